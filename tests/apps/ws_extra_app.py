"""A raw ASGI WebSocket app for the independent-client tests
(tests/e2e/test_websocket.py, test_websocket_deploy.py).

Plain ASGI 3, no framework, so that the same app runs on sluice and on the
reference servers the tests are checked against (uvicorn). It writes what
it saw to the call log (asgi_app.record) so a test can assert what the app
was told, not only what the client got.

Routes (WebSocket unless said otherwise):
  /echo            echo every message back, text as text, bytes as bytes;
                   with ?m=MARK, record how it ended: "ECHO MARK ended
                   CODE" (the disconnect's code, or the exception a send
                   raised)
  /proto           accept with the first subprotocol of ours the client
                   offers, send {"subprotocols": offered, "chosen": ...}
  /deny            refuse with a 401 and a body (denial-response extension),
                   or with a plain close (403) where the server lacks it
  /refuse          close before accept (the server answers 403)
  /closeme         accept, then close with ?code= and ?reason=
  /watch?m=MARK    accept, record the disconnect's code and reason
  /flood?m=&n=&size=  accept, wait for one message, then send N binary
                   messages of SIZE bytes as fast as send() returns,
                   recording progress every 8 messages
  /pid             accept, send the worker's pid, then echo
  /drain?m=MARK    accept, send "ready", wait; on the disconnect record its
                   code, try one more send, record the result, then finish
                   a little work and record "DRAIN MARK finished"
  /hold?m=MARK     accept, receive nothing until GET /release?m=MARK
                   (HTTP), then count the messages that arrive until the
                   client closes: "HOLD MARK got N BYTES"
HTTP: /release?m=MARK as above; anything else answers 200 "ok".
"""

import asyncio
import json
import os
from urllib.parse import parse_qs

from asgi_app import record

OUR_PROTOCOLS = ("chat.v2", "chat.v1")
RELEASED = set()  # /hold marks released by GET /release (one process)


def query(scope):
    q = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return {k: v[-1] for k, v in q.items()}


async def http(scope, receive, send):
    if scope["path"] == "/pid":
        body = str(os.getpid()).encode()
    elif scope["path"] == "/release":
        RELEASED.add(query(scope).get("m", "-"))
        body = b"released"
    else:
        body = b"ok"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def lifespan(receive, send):
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def echo(q, receive, send):
    await send({"type": "websocket.accept"})
    if "m" not in q:
        await echo_loop(receive, send)
        return
    try:
        end = await echo_loop(receive, send)
    except Exception as e:  # what a send to a client that is gone raised
        end = type(e).__name__
    record("ECHO %s ended %s" % (q["m"], end))


async def echo_loop(receive, send):
    """Echo until the disconnect; its code."""
    while True:
        msg = await receive()
        if msg["type"] == "websocket.disconnect":
            return msg.get("code")
        if msg.get("text") is not None:
            await send({"type": "websocket.send", "text": msg["text"]})
        else:
            await send({"type": "websocket.send",
                        "bytes": msg.get("bytes") or b""})


async def proto(scope, receive, send):
    offered = list(scope.get("subprotocols") or [])
    chosen = next((p for p in OUR_PROTOCOLS if p in offered), None)
    accept = {"type": "websocket.accept"}
    if chosen:
        accept["subprotocol"] = chosen
    await send(accept)
    await send({"type": "websocket.send",
                "text": json.dumps({"subprotocols": offered,
                                    "chosen": chosen})})
    while (await receive())["type"] != "websocket.disconnect":
        pass


async def scope_route(scope, send):
    """Accept, then send what the scope says of the connection: the
    scheme and the "tls" extension (test_tls_*.py)."""
    await send({"type": "websocket.accept"})
    tls = (scope.get("extensions") or {}).get("tls")
    await send({"type": "websocket.send",
                "text": json.dumps({"scheme": scope["scheme"],
                                    "tls": tls})})


async def deny(scope, send):
    if "websocket.http.response" in (scope.get("extensions") or {}):
        body = b"denied: no token\n"
        await send({"type": "websocket.http.response.start", "status": 401,
                    "headers": [(b"content-type", b"text/plain"),
                                (b"www-authenticate", b"Token"),
                                (b"content-length",
                                 str(len(body)).encode())]})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close"})


async def watch(q, receive, send):
    await send({"type": "websocket.accept"})
    while True:
        msg = await receive()
        if msg["type"] == "websocket.disconnect":
            record("WATCH %s disconnect %s %r"
                   % (q.get("m", "-"), msg.get("code"), msg.get("reason")))
            return
        record("WATCH %s got %r" % (q.get("m", "-"),
                                    msg.get("text") or msg.get("bytes")))


async def flood(q, receive, send):
    mark, n, size = q.get("m", "-"), int(q.get("n", "64")), \
        int(q.get("size", "65536"))
    await send({"type": "websocket.accept"})
    msg = await receive()
    if msg["type"] == "websocket.disconnect":
        return
    chunk = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    record("FLOOD %s start" % mark)
    for i in range(n):
        try:
            await send({"type": "websocket.send", "bytes": chunk})
        except Exception as e:  # the client left: say how far it got
            record("FLOOD %s error %d %s" % (mark, i, type(e).__name__))
            return
        if i % 8 == 7:
            record("FLOOD %s sent %d" % (mark, i + 1))
    record("FLOOD %s done %d" % (mark, n))
    while (await receive())["type"] != "websocket.disconnect":
        pass


async def hold(q, receive, send):
    mark = q.get("m", "-")
    await send({"type": "websocket.accept"})
    record("HOLD %s holding" % mark)
    while mark not in RELEASED:
        await asyncio.sleep(0.02)
    n = size = 0
    while True:
        msg = await receive()
        if msg["type"] == "websocket.disconnect":
            break
        n += 1
        size += len(msg.get("bytes") or b"")
    record("HOLD %s got %d %d" % (mark, n, size))


async def drain(q, receive, send):
    mark = q.get("m", "-")
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": "ready"})
    while True:
        msg = await receive()
        if msg["type"] == "websocket.disconnect":
            break
    record("DRAIN %s disconnect %s" % (mark, msg.get("code")))
    try:
        await send({"type": "websocket.send", "text": "after"})
        record("DRAIN %s send-after ok" % mark)
    except Exception as e:
        record("DRAIN %s send-after %s" % (mark, type(e).__name__))
    await asyncio.sleep(0.2)  # work the app still finishes while draining
    record("DRAIN %s finished" % mark)


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        return await lifespan(receive, send)
    if scope["type"] == "http":
        return await http(scope, receive, send)
    path, q = scope["path"], query(scope)
    msg = await receive()
    assert msg["type"] == "websocket.connect", msg
    if path == "/echo":
        await echo(q, receive, send)
    elif path == "/proto":
        await proto(scope, receive, send)
    elif path == "/deny":
        await deny(scope, send)
    elif path == "/scope":
        await scope_route(scope, send)
    elif path == "/refuse":
        await send({"type": "websocket.close"})
    elif path == "/closeme":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close",
                    "code": int(q.get("code", "1000")),
                    "reason": q.get("reason", "")})
    elif path == "/watch":
        await watch(q, receive, send)
    elif path == "/flood":
        await flood(q, receive, send)
    elif path == "/pid":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": str(os.getpid())})
        await echo_loop(receive, send)
    elif path == "/hold":
        await hold(q, receive, send)
    elif path == "/drain":
        await drain(q, receive, send)
    else:
        await send({"type": "websocket.close", "code": 4404})

