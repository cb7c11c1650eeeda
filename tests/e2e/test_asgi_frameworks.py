"""Starlette and FastAPI (Debian's packages, anyio underneath) served by
sluice in pump and inline mode: JSON, path and query parameters, bodies
and streamed uploads, streaming and server-sent events, background tasks,
lifespan with state, middleware, and a client that leaves an event
stream."""

import functools
import hashlib
import json
import time

import pytest

from conftest import ASGI_EXECUTOR_PARAMS, start_mode_server
from helpers import build_request, http_call

pytestmark = pytest.mark.sluice_only


@pytest.fixture(scope="module", params=ASGI_EXECUTOR_PARAMS)
def star(request, tmp_path_factory):
    with start_mode_server(tmp_path_factory, "starlette", request.param,
                           "asgi_starlette:app") as s:
        yield s


@pytest.fixture(scope="module", params=ASGI_EXECUTOR_PARAMS)
def fast(request, tmp_path_factory):
    with start_mode_server(tmp_path_factory, "fastapi", request.param,
                           "asgi_fastapi:app") as s:
        yield s


call = functools.partial(http_call, header_dict=True)


# ---------------------------------------------------------------- Starlette

def test_starlette_index_and_middleware(star):
    status, headers, body = call(star, "GET", "/")
    assert status == 200 and body == b"hello from starlette\n"
    assert headers["x-middleware"] == "stamped"


def test_starlette_json(star):
    status, _, body = call(star, "GET", "/json")
    assert json.loads(body) == {"ok": True, "n": [1, 2, 3]}


def test_starlette_params(star):
    status, _, body = call(star, "GET", "/items/42?q=x%20y&tag=a&tag=b")
    assert json.loads(body) == {"item_id": 42, "q": "x y",
                                "tags": ["a", "b"]}
    assert call(star, "GET", "/items/notanint")[0] == 404


def test_starlette_body(star):
    data = b"payload " * 10000
    status, _, body = call(star, "POST", "/echo", data,
                           {"Content-Type": "application/octet-stream"})
    assert json.loads(body) == {"size": len(data),
                                "sha256": hashlib.sha256(data).hexdigest(),
                                "type": "application/octet-stream"}


def test_starlette_streamed_upload(star):
    data = bytes(range(256)) * 8192  # 2 MB
    status, _, body = call(star, "PUT", "/upload", data)
    out = json.loads(body)
    assert out["size"] == len(data)
    assert out["sha256"] == hashlib.sha256(data).hexdigest()
    assert out["chunks"] > 1


def test_starlette_streaming(star):
    status, headers, body = call(star, "GET", "/stream")
    assert headers.get("Transfer-Encoding") == "chunked"
    assert body == b"".join(b"line %d\n" % i for i in range(5))


def test_starlette_sse(star):
    status, headers, body = call(star, "GET", "/sse?n=3&m=full")
    assert headers["content-type"].startswith("text/event-stream")
    assert body == b"".join(b"data: event %d\n\n" % i for i in range(3))
    star.wait_for_call("SSE full complete")


def test_starlette_sse_client_leaves(star):
    mark = "gone%d" % time.monotonic_ns()
    log = star.log_mark()
    with star.connect() as c:
        c.send(build_request("GET", "/sse?n=1000&m=%s" % mark))
        c.read_head()
        c.read_line()
    star.wait_for_call("SSE %s cancelled" % mark, timeout=5)
    assert call(star, "GET", "/")[0] == 200
    # the app stopped because its client left: nothing to report
    assert "without completing" not in star.log_since(log)


def test_starlette_background_task(star):
    mark = "bg%d" % time.monotonic_ns()
    status, _, body = call(star, "GET", "/background?m=%s" % mark)
    assert body == b"accepted\n"
    star.wait_for_call("BACKGROUND %s done" % mark)


def test_starlette_lifespan_state(star):
    assert star.called("STARLETTE startup")
    status, _, body = call(star, "GET", "/state")
    assert json.loads(body) == {"greeting": "hello from lifespan"}


def test_starlette_current_task(star):
    assert json.loads(call(star, "GET", "/task")[2]) == {"same": True}


def test_starlette_error_is_500(star):
    mark = star.log_mark()
    assert call(star, "GET", "/boom")[0] == 500
    star.wait_for_log("starlette boom", since=mark)
    assert call(star, "GET", "/")[0] == 200


def test_starlette_keep_alive(star):
    with star.connect() as c:
        for path in ("/", "/json", "/stream", "/"):
            assert c.request("GET", path).status == 200


# ---------------------------------------------------------------- FastAPI

def test_fastapi_startup_event(fast):
    assert fast.called("FASTAPI startup")
    status, headers, body = call(fast, "GET", "/")
    assert json.loads(body) == {"hello": "fastapi", "started": "yes"}
    assert headers["x-fastapi-mw"] == "1"


def test_fastapi_params_and_dependency(fast):
    status, _, body = call(fast, "GET", "/items/7?q=abc&limit=3")
    assert json.loads(body) == {"item_id": 7, "q": "abc", "limit": 3}
    status, _, body = call(fast, "GET", "/items/nope")
    assert status == 422


def test_fastapi_json_body(fast):
    item = {"name": "widget", "price": 2.5, "tags": ["x"]}
    status, _, body = call(fast, "POST", "/items", json.dumps(item),
                           {"Content-Type": "application/json"})
    assert status == 200
    assert json.loads(body) == {"name": "widget", "total": 5.0,
                                "tags": ["x"]}
    status, _, body = call(fast, "POST", "/items", b'{"name": 1}',
                           {"Content-Type": "application/json"})
    assert status == 422
    assert "price" in body.decode()


def test_fastapi_sync_route_in_threadpool(fast):
    assert json.loads(call(fast, "GET", "/sync")[2]) == {"thread": "pool"}


def test_fastapi_background(fast):
    mark = "fbg%d" % time.monotonic_ns()
    status, _, body = call(fast, "POST", "/notify?m=%s" % mark)
    assert json.loads(body) == {"queued": mark}
    fast.wait_for_call("FASTAPI background %s" % mark)


def test_fastapi_stream_and_text(fast):
    assert call(fast, "GET", "/stream")[2] == b"".join(
        b"chunk %d\n" % i for i in range(4))
    assert call(fast, "GET", "/text")[2] == b"plain\n"


def test_fastapi_openapi(fast):
    status, _, body = call(fast, "GET", "/openapi.json")
    assert status == 200 and "/items/{item_id}" in json.loads(body)["paths"]


def test_fastapi_shutdown_event(fast):
    assert fast.stop() == []
    assert fast.called("FASTAPI shutdown")
