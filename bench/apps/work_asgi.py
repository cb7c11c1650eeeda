"""ASGI 3.0 twin of work_wsgi.py (same paths, same bodies):

    /sleep   awaits asyncio.sleep(0.010), then the hello-world body
    /mem     1 MiB from memory
    /file    the file named by $SLUICE_BENCH_FILE through the
             http.response.pathsend extension when the server offers it
             (sluice does); otherwise the same bytes from memory, which is
             what the big suite's table marks for those servers
    /echo    the request body echoed back
    /upload  counts the request body's bytes as the server delivers them
             and answers the count

Every response says in an x-bench-body header whether its body went out
from memory or by pathsend (the harness's preflight records it).

Like hello_asgi.py, every path reads its request events to the end before
answering (hypercorn closes the connection otherwise).
"""

import asyncio
import os

HELLO = b"Hello, World!"
BIG = bytes(range(256)) * 4096


def _start(length, ctype=b"text/plain", how=b"memory"):
    return {"type": "http.response.start", "status": 200,
            "headers": [(b"content-type", ctype),
                        (b"content-length", str(length).encode("ascii")),
                        (b"x-bench-body", how)]}


async def _read_all(receive, keep):
    parts, got = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            return None, got
        body = message.get("body", b"")
        got += len(body)
        if keep:
            parts.append(body)
        if not message.get("more_body"):
            return b"".join(parts), got


async def app(scope, receive, send):
    kind = scope["type"]
    if kind == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if kind != "http":
        raise RuntimeError("unsupported scope type: %s" % kind)
    path = scope["path"]
    body, got = await _read_all(receive, keep=(path == "/echo"))
    if path == "/sleep":
        await asyncio.sleep(0.010)
        out = HELLO
    elif path == "/mem":
        await send(_start(len(BIG), b"application/octet-stream"))
        await send({"type": "http.response.body", "body": BIG})
        return
    elif path == "/file":
        name = os.environ["SLUICE_BENCH_FILE"]
        if "http.response.pathsend" in (scope.get("extensions") or {}):
            await send(_start(os.stat(name).st_size,
                              b"application/octet-stream", b"pathsend"))
            await send({"type": "http.response.pathsend", "path": name})
            return
        await send(_start(len(BIG), b"application/octet-stream"))
        await send({"type": "http.response.body", "body": BIG})
        return
    elif path == "/echo":
        out = body or b""
    elif path == "/upload":
        out = str(got).encode("ascii")
    else:
        out = HELLO
    await send(_start(len(out)))
    await send({"type": "http.response.body", "body": out})
