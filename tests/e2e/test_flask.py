"""A real Flask application served by sluice: forms, multipart uploads,
redirects, JSON, a stream_with_context response, and a failing view."""

import functools
import hashlib
import json
import urllib.parse

import pytest

from conftest import start_mode_server
from e2e_data import pattern
from helpers import chunked_then_reuse, http_call, multipart


@pytest.fixture(scope="module")
def flask_server(mode, tmp_path_factory):
    with start_mode_server(tmp_path_factory, "flask", mode,
                           app="flask_app:app", ready_path="/") as s:
        yield s


call = functools.partial(http_call, header_dict=True)


def test_index(flask_server):
    status, headers, body = call(flask_server, "GET", "/")
    assert status == 200 and body == b"hello from flask\n"


def test_urlencoded_form(flask_server):
    form = urllib.parse.urlencode([("name", "Zo\u00eb"), ("tag", "a"),
                                   ("tag", "b & c")])
    status, headers, body = call(
        flask_server, "POST", "/form", form.encode(),
        {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200
    assert json.loads(body) == {
        "fields": {"name": ["Zo\u00eb"], "tag": ["a", "b & c"]},
        "content_type": "application/x-www-form-urlencoded"}


def test_multipart_upload(flask_server):
    small = b"small file\n"
    large = pattern(1024 * 1024 + 99)
    ctype, body = multipart(
        fields=[("title", "two files")],
        files=[("doc", "small.txt", "text/plain", small),
               ("doc", "large.bin", "application/octet-stream", large)])
    status, headers, rbody = call(flask_server, "POST", "/upload", body,
                                  {"Content-Type": ctype})
    assert status == 200, rbody[:500]
    out = json.loads(rbody)
    assert out["fields"] == {"title": "two files"}
    assert out["files"]["doc"] == [
        {"filename": "small.txt", "size": len(small),
         "sha256": hashlib.sha256(small).hexdigest(),
         "mimetype": "text/plain"},
        {"filename": "large.bin", "size": len(large),
         "sha256": hashlib.sha256(large).hexdigest(),
         "mimetype": "application/octet-stream"},
    ]


def test_redirect(flask_server):
    status, headers, body = call(flask_server, "GET", "/redirect?note=hi")
    assert status == 302
    location = headers["Location"]
    # Flask builds it from the environ; relative or absolute to this server.
    path = urllib.parse.urlsplit(location)
    assert path.path == "/target"
    if path.netloc:
        assert path.netloc == "%s:%d" % (flask_server.host, flask_server.port)
    status, headers, body = call(flask_server, "GET",
                                 path.path + "?" + path.query)
    assert status == 200 and body == b"target reached note=hi\n"


def test_json_get(flask_server):
    status, headers, body = call(flask_server, "GET", "/json")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"ok": True, "items": [1, 2, 3],
                                "text": "caf\u00e9"}


def test_json_post(flask_server):
    payload = json.dumps({"numbers": [1, 2, 21]}).encode()
    status, headers, body = call(flask_server, "POST", "/json", payload,
                                 {"Content-Type": "application/json"})
    assert status == 200
    assert json.loads(body) == {"received": {"numbers": [1, 2, 21]},
                                "doubled": [2, 4, 42]}


def test_stream_with_context(flask_server):
    body = chunked_then_reuse(flask_server, "/stream?n=50&prefix=row",
                              b"hello from flask\n")
    assert body == "".join("row %d\n" % i for i in range(50)).encode()


def test_not_found(flask_server):
    status, headers, body = call(flask_server, "GET", "/no/such/page")
    assert status == 404


def test_view_exception_is_500_and_logged(flask_server):
    mark = flask_server.log_mark()
    status, headers, body = call(flask_server, "GET", "/fail")
    assert status == 500
    # Flask catches the exception itself and logs it to wsgi.errors.
    flask_server.wait_for_log("flask view failed on purpose", since=mark)
    status, headers, body = call(flask_server, "GET", "/")
    assert status == 200
