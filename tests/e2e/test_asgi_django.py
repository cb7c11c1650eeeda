"""The Django suite of test_django.py, served through Django's ASGI handler
(asgi_django:application) instead of WSGI, in pump and inline mode. The
test functions are test_django.py's own: only the server fixture differs."""

import json

import pytest

import test_django
from conftest import ASGI_EXECUTOR_PARAMS, start_mode_server
from helpers import http_call

pytestmark = pytest.mark.sluice_only

# test_meta_from_environ checks SERVER_PROTOCOL, which Django 3.2's
# ASGIRequest never sets; test_meta_from_scope below replaces it.
globals().update({name: getattr(test_django, name)
                  for name in dir(test_django) if name.startswith("test_")
                  and name != "test_meta_from_environ"})


@pytest.fixture(scope="module", params=ASGI_EXECUTOR_PARAMS)
def django_server(request, tmp_path_factory):
    with start_mode_server(tmp_path_factory, "django-asgi", request.param,
                           "asgi_django:application", ready_path="/") as s:
        yield s


def test_lifespan_rejected_quietly(django_server):
    assert "ASGI lifespan not supported by the app" in \
        django_server.error_log_text()


def test_meta_from_scope(django_server):
    status, headers, body = http_call(django_server, "GET",
                                      "/meta/?a=1&b=two")
    meta = json.loads(body)
    assert meta["PATH_INFO"] == "/meta/"
    assert meta["SCRIPT_NAME"] == ""
    assert meta["QUERY_STRING"] == "a=1&b=two"
    assert meta["REQUEST_METHOD"] == "GET"
    assert meta["HTTP_HOST"] == "%s:%d" % (django_server.host,
                                           django_server.port)
