"""Views for the e2e Django project."""

import hashlib
import json

from django.http import (HttpResponse, JsonResponse, StreamingHttpResponse)
from django.middleware.csrf import get_token
from django.shortcuts import redirect
from django.views.decorators.csrf import csrf_exempt


def index(request):
    return HttpResponse("hello from django\n", content_type="text/plain")


@csrf_exempt
def form(request):
    if request.method != "POST":
        return HttpResponse(status=405)
    return JsonResponse({"fields": {k: request.POST.getlist(k)
                                    for k in request.POST}})


def csrf_form(request):
    """GET hands out a token (and its cookie); POST needs both back."""
    if request.method == "GET":
        return JsonResponse({"token": get_token(request)})
    return JsonResponse({"accepted": request.POST.get("name", "")})


@csrf_exempt
def upload(request):
    out = {}
    for name in request.FILES:
        for f in request.FILES.getlist(name):
            h = hashlib.sha256()
            size = 0
            for chunk in f.chunks():
                h.update(chunk)
                size += len(chunk)
            out.setdefault(name, []).append({
                "filename": f.name, "size": size, "sha256": h.hexdigest(),
                "handler": type(f).__name__,
            })
    return JsonResponse({"files": out, "fields": request.POST.dict()})


def go_elsewhere(request):
    return redirect("target")


def target(request):
    return HttpResponse("django target\n", content_type="text/plain")


def stream(request):
    n = int(request.GET.get("n", "5"))

    def rows():
        for i in range(n):
            yield "row %d\n" % i

    return StreamingHttpResponse(rows(), content_type="text/plain")


def meta(request):
    keys = ("PATH_INFO", "SCRIPT_NAME", "QUERY_STRING", "REQUEST_METHOD",
            "SERVER_PROTOCOL", "HTTP_HOST")
    return HttpResponse(json.dumps({k: request.META.get(k) for k in keys},
                                   sort_keys=True),
                        content_type="application/json")
