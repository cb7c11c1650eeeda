"""WSGI (wsgi) and ASGI (asgi) apps for tests/e2e/test_conformance.py.

Both answer with JSON saying what the server handed over: the method, the
path (as the bytes of PATH_INFO's latin-1 / ASGI's raw_path, in hex), the
query, the Host, every header name and the body. A body that ends in a
read error is reported, and logged to the call log with the request's
marker (?m=...), since its client may be gone before the answer.
"""

import json
import os
from urllib.parse import parse_qs


def record(line):
    """Append one line to the call log (no-op when E2E_CALL_LOG is unset)."""
    path = os.environ.get("E2E_CALL_LOG")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8", "backslashreplace"))
    finally:
        os.close(fd)


def _marker(qs):
    return parse_qs(qs).get("m", ["-"])[0]


def wsgi(environ, start_response):
    marker = _marker(environ.get("QUERY_STRING", ""))
    out = {
        "method": environ["REQUEST_METHOD"],
        "path": environ["PATH_INFO"].encode("latin-1").hex(),
        "query": environ.get("QUERY_STRING", ""),
        "host": environ.get("HTTP_HOST"),
        "server_name": environ.get("SERVER_NAME"),
        "headers": sorted(k[5:].lower().replace("_", "-")
                          for k in environ if k.startswith("HTTP_")),
    }
    try:
        body = environ["wsgi.input"].read()
        out["body"] = body.decode("latin-1")
        record("%s body %d" % (marker, len(body)))
    except Exception as e:  # noqa: BLE001 - the point is what was raised
        out["error"] = type(e).__name__
        record("%s error %s" % (marker, type(e).__name__))
    data = json.dumps(out).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(data)))])
    return [data]


async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    marker = _marker(scope["query_string"].decode("latin-1"))
    headers = scope["headers"]
    host = [v.decode("latin-1") for k, v in headers if k == b"host"]
    out = {
        "method": scope["method"],
        "path": scope["raw_path"].hex(),
        "decoded_path": scope["path"],
        "query": scope["query_string"].decode("latin-1"),
        "host": host[0] if host else None,
        "headers": sorted(k.decode("latin-1") for k, _ in headers),
    }
    body = b""
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            out["error"] = "disconnect"
            record("%s error disconnect" % marker)
            break
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            out["body"] = body.decode("latin-1")
            record("%s body %d" % (marker, len(body)))
            break
    data = json.dumps(out).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
