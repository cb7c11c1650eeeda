import os

from django.contrib import admin
from django.http import HttpResponse
from django.urls import include, path

from djrest.api import router


def pid(request):
    return HttpResponse(str(os.getpid()), content_type="text/plain")


urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include(router.urls)),
    path("pid", pid),
]
