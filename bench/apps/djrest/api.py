"""The REST side: a serializer, a viewset, a router; /pid answers the pid
of the worker (plain digits) and every response carries it in
X-Worker-Pid, so that the harness can count requests per worker."""

import os

from rest_framework import routers, serializers, viewsets

from djrest.models import Book


def worker_pid_header(get_response):
    def middleware(request):
        response = get_response(request)
        response["X-Worker-Pid"] = str(os.getpid())
        return response
    return middleware


class BookSerializer(serializers.ModelSerializer):
    class Meta:
        model = Book
        fields = ["id", "title", "author", "isbn", "pages", "published",
                  "in_print"]

    def validate_isbn(self, value):
        if not value.isdigit() or len(value) not in (10, 13):
            raise serializers.ValidationError("10 or 13 digits")
        return value


class BookViewSet(viewsets.ModelViewSet):
    queryset = Book.objects.all()
    serializer_class = BookSerializer


router = routers.DefaultRouter()
router.register("books", BookViewSet)
