"""A real Django project served by sluice: CSRF-protected and exempt form
posts, uploads (in memory and to a temporary file), redirects and a
StreamingHttpResponse. No database is configured."""

import hashlib
import http.cookies
import json
import urllib.parse

import pytest

from conftest import start_mode_server
from e2e_data import pattern
from helpers import chunked_then_reuse, http_call as call, multipart


@pytest.fixture(scope="module")
def django_server(mode, tmp_path_factory):
    with start_mode_server(tmp_path_factory, "django", mode,
                           app="djangoproj.wsgi:application",
                           ready_path="/") as s:
        yield s


def header(headers, name):
    return [v for k, v in headers if k.lower() == name.lower()]


def test_index(django_server):
    status, headers, body = call(django_server, "GET", "/")
    assert status == 200 and body == b"hello from django\n"


def test_meta_from_environ(django_server):
    status, headers, body = call(django_server, "GET", "/meta/?a=1&b=two")
    meta = json.loads(body)
    assert meta["PATH_INFO"] == "/meta/"
    assert meta["SCRIPT_NAME"] == ""
    assert meta["QUERY_STRING"] == "a=1&b=two"
    assert meta["REQUEST_METHOD"] == "GET"
    assert meta["SERVER_PROTOCOL"] == "HTTP/1.1"


def test_csrf_exempt_form_post(django_server):
    form = urllib.parse.urlencode([("x", "1"), ("y", "caf\u00e9"),
                                   ("y", "second")])
    status, headers, body = call(
        django_server, "POST", "/form/", form.encode(),
        {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200, body[:300]
    assert json.loads(body) == {"fields": {"x": ["1"],
                                           "y": ["caf\u00e9", "second"]}}


def test_csrf_protected_post_without_token_is_403(django_server):
    status, headers, body = call(
        django_server, "POST", "/csrf-form/", b"name=eve",
        {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 403


def test_csrf_protected_post_with_token(django_server):
    status, headers, body = call(django_server, "GET", "/csrf-form/")
    assert status == 200
    token = json.loads(body)["token"]
    jar = http.cookies.SimpleCookie()
    for v in header(headers, "Set-Cookie"):
        jar.load(v)
    assert "csrftoken" in jar
    status, headers, body = call(
        django_server, "POST", "/csrf-form/", b"name=alice",
        {"Content-Type": "application/x-www-form-urlencoded",
         "Cookie": "csrftoken=%s" % jar["csrftoken"].value,
         "X-CSRFToken": token})
    assert status == 200, body[:500]
    assert json.loads(body) == {"accepted": "alice"}


@pytest.mark.parametrize("size,handler", [
    (11, "InMemoryUploadedFile"),
    # above FILE_UPLOAD_MAX_MEMORY_SIZE: spooled to a temporary file
    (1536 * 1024 + 5, "TemporaryUploadedFile"),
])
def test_upload(django_server, size, handler):
    data = pattern(size)
    ctype, body = multipart(fields=[("who", "tester")],
                            files=[("f", "f.bin", "application/octet-stream",
                                    data)])
    status, headers, rbody = call(django_server, "POST", "/upload/", body,
                                  {"Content-Type": ctype})
    assert status == 200, rbody[:500]
    out = json.loads(rbody)
    assert out["fields"] == {"who": "tester"}
    assert out["files"]["f"] == [{
        "filename": "f.bin", "size": size,
        "sha256": hashlib.sha256(data).hexdigest(), "handler": handler}]


def test_redirect(django_server):
    status, headers, body = call(django_server, "GET", "/redirect/")
    assert status == 302
    assert header(headers, "Location") == ["/target/"]
    status, headers, body = call(django_server, "GET", "/target/")
    assert status == 200 and body == b"django target\n"


def test_append_slash_redirect(django_server):
    status, headers, body = call(django_server, "GET", "/target")
    assert status == 301
    loc = header(headers, "Location")[0]
    assert urllib.parse.urlsplit(loc).path == "/target/"


def test_streaming_response(django_server):
    body = chunked_then_reuse(django_server, "/stream/?n=200",
                              b"hello from django\n")
    assert body == "".join("row %d\n" % i for i in range(200)).encode()


def test_not_found(django_server):
    status, headers, body = call(django_server, "GET", "/nope/")
    assert status == 404
