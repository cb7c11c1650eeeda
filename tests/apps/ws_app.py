"""A raw ASGI application with WebSocket routes, for tests/e2e/test_ws_asgi.py.

The path picks a route; each exercises one message or error path of the
websocket scope. What the app saw (the messages receive() returned, the
exception a bad send() raised) goes to the call log named by E2E_CALL_LOG,
one line per event, as in asgi_app.py. HTTP requests get a small JSON
answer (/__ready, the harness's readiness probe, among them). Lifespan
startup puts a value into the state every scope must carry.
"""

import json
import os


def record(line):
    """Append one line to the call log (no-op when E2E_CALL_LOG is unset)."""
    path = os.environ.get("E2E_CALL_LOG")
    if not path:
        return
    data = (line.replace("\n", "\\n") + "\n").encode("utf-8",
                                                       "backslashreplace")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def plain(obj):
    """The scope as JSON can hold it (bytes as latin-1 text)."""
    if isinstance(obj, bytes):
        return obj.decode("latin-1")
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


async def accept(send, **extra):
    await send({"type": "websocket.accept", **extra})


async def connect(receive):
    msg = await receive()
    assert msg["type"] == "websocket.connect", msg


# ---------------------------------------------------------------- routes

async def echo(scope, receive, send):
    """Every message back as it came (text as text, bytes as bytes), until
    the client closes; the disconnect is recorded with its code."""
    await connect(receive)
    await accept(send)
    while True:
        msg = await receive()
        if msg["type"] == "websocket.disconnect":
            record("ECHO disconnect %s %r" % (msg["code"],
                                              msg.get("reason")))
            return
        if msg.get("text") is not None:
            await send({"type": "websocket.send", "text": msg["text"]})
        else:
            await send({"type": "websocket.send", "bytes": msg["bytes"]})


async def subprotocol(scope, receive, send):
    """Accept with the client's last offer and two extra headers."""
    await connect(receive)
    offered = scope["subprotocols"]
    await accept(send, subprotocol=offered[-1] if offered else None,
                 headers=[(b"x-extra", b"one"), [b"X-Other", b"two"]])
    await send({"type": "websocket.send", "text": json.dumps(offered)})
    await receive()


async def close_before_accept(scope, receive, send):
    await connect(receive)
    await send({"type": "websocket.close", "code": 4000})
    record("CLOSED-EARLY %s" % (await receive())["type"])


async def deny(scope, receive, send):
    """The denial-response extension: a 401 of the app's own, in two body
    messages."""
    await connect(receive)
    await send({"type": "websocket.http.response.start", "status": 401,
                "headers": [(b"content-type", b"text/plain"),
                            (b"www-authenticate", b"Bearer")]})
    await send({"type": "websocket.http.response.body", "body": b"no ",
                "more_body": True})
    await send({"type": "websocket.http.response.body", "body": b"entry\n"})


async def close_code(scope, receive, send):
    """Accept, say one thing, close with 4001 and a reason."""
    await connect(receive)
    await accept(send)
    await send({"type": "websocket.send", "text": "bye soon"})
    await send({"type": "websocket.close", "code": 4001,
                "reason": "done here"})
    msg = await receive()
    record("AFTER-CLOSE %s %s" % (msg["type"], msg.get("code")))


async def raise_before(scope, receive, send):
    await connect(receive)
    raise LookupError("boom before accept")


async def raise_after(scope, receive, send):
    await connect(receive)
    await accept(send)
    raise LookupError("boom after accept")


async def return_without_close(scope, receive, send):
    await connect(receive)
    await accept(send)
    await send({"type": "websocket.send", "bytes": b"\x00\x01"})


async def return_before_accept(scope, receive, send):
    await connect(receive)


async def scope_dump(scope, receive, send):
    await connect(receive)
    await accept(send)
    await send({"type": "websocket.send",
                "text": json.dumps(plain(scope), sort_keys=True)})
    await receive()


async def after_disconnect(scope, receive, send):
    """Wait for the client to leave, then send: the error must be an
    OSError (ASGI 2.4), not a misuse."""
    await connect(receive)
    await accept(send)
    msg = await receive()
    record("LEFT %s %s" % (msg["type"], msg["code"]))
    try:
        await send({"type": "websocket.send", "text": "too late"})
    except Exception as e:  # noqa: BLE001 - the type is the point
        record("LATE %s %s %s" % (type(e).__module__, type(e).__name__,
                                  isinstance(e, OSError)))
        raise


# misuses: each raises in the app, which records and re-raises it
MISUSES = {
    "send-before-accept": [{"type": "websocket.send", "text": "x"}],
    "accept-twice": [{"type": "websocket.accept"},
                     {"type": "websocket.accept"}],
    "send-after-close": [{"type": "websocket.accept"},
                         {"type": "websocket.close"},
                         {"type": "websocket.send", "text": "x"}],
    "unknown-type": [{"type": "websocket.accept"},
                     {"type": "websocket.bogus"}],
    "unknown-before-accept": [{"type": "http.response.start",
                               "status": 200}],
    "both-fields": [{"type": "websocket.accept"},
                    {"type": "websocket.send", "text": "a", "bytes": b"b"}],
    "no-field": [{"type": "websocket.accept"}, {"type": "websocket.send"}],
    "text-not-str": [{"type": "websocket.accept"},
                     {"type": "websocket.send", "text": b"x"}],
    "bytes-not-bytes": [{"type": "websocket.accept"},
                        {"type": "websocket.send", "bytes": "x"}],
    "bad-code": [{"type": "websocket.accept"},
                 {"type": "websocket.close", "code": 1005}],
    "code-not-int": [{"type": "websocket.accept"},
                     {"type": "websocket.close", "code": "1000"}],
    "bad-header": [{"type": "websocket.accept",
                    "headers": [(b"x-bad", b"a\r\nb")]}],
    "handshake-header": [{"type": "websocket.accept",
                          "headers": [(b"sec-websocket-accept", b"x")]}],
    "bad-subprotocol": [{"type": "websocket.accept",
                         "subprotocol": "a b"}],
    "accept-after-denial-start": [{"type": "websocket.http.response.start",
                                   "status": 403},
                                  {"type": "websocket.accept"}],
    "denial-after-accept": [{"type": "websocket.accept"},
                            {"type": "websocket.http.response.start",
                             "status": 403}],
}


async def misuse(scope, receive, send):
    kind = scope["path"].rsplit("/", 1)[-1]
    await connect(receive)
    try:
        for msg in MISUSES[kind]:
            await send(msg)
    except Exception as e:  # noqa: BLE001 - recorded, then re-raised
        record("MISUSE %s %s: %s" % (kind, type(e).__name__, e))
        raise
    record("MISUSE %s none" % kind)


async def misuse_caught(scope, receive, send):
    """A misuse the app catches and goes on from: still logged once."""
    await connect(receive)
    await accept(send)
    try:
        await send({"type": "websocket.send"})
    except ValueError:
        record("CAUGHT")
    msg = await receive()
    record("CAUGHT-THEN %s %s" % (msg["type"], msg.get("code")))


async def state(scope, receive, send):
    await connect(receive)
    await accept(send)
    await send({"type": "websocket.send",
                "text": json.dumps(scope.get("state"), sort_keys=True)})
    await receive()


async def many(scope, receive, send):
    """N messages of SIZE bytes as fast as send() lets it (backpressure),
    then close."""
    await connect(receive)
    await accept(send)
    msg = await receive()
    n, size = (int(x) for x in msg["text"].split())
    for i in range(n):
        await send({"type": "websocket.send",
                    "bytes": bytes([i % 256]) * size})
    await send({"type": "websocket.close"})
    record("MANY sent %d" % n)


async def receivers(scope, receive, send):
    """receive()s called while one waits, answered in the order they were
    called: two by the client's messages (both called before the client is
    told to send), echoed as one; two more, called before that echo, by
    the client's close."""
    import asyncio
    await connect(receive)
    await accept(send)
    a, b = receive(), receive()
    await send({"type": "websocket.send", "text": "go"})
    a, b = await asyncio.gather(a, b)
    c, d = receive(), receive()
    await send({"type": "websocket.send", "text": a["text"] + b["text"]})
    c, d = await asyncio.gather(c, d)
    record("RECEIVERS %s %s %s %s" % (c["type"], c.get("code"),
                                      d["type"], d.get("code")))


ROUTES = {
    "/echo": echo,
    "/subprotocol": subprotocol,
    "/close-before-accept": close_before_accept,
    "/deny": deny,
    "/close-code": close_code,
    "/raise-before": raise_before,
    "/raise-after": raise_after,
    "/return-without-close": return_without_close,
    "/return-before-accept": return_before_accept,
    "/scope": scope_dump,
    "/after-disconnect": after_disconnect,
    "/misuse-caught": misuse_caught,
    "/state": state,
    "/many": many,
    "/receivers": receivers,
}


async def lifespan(scope, receive, send):
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            scope["state"]["greeting"] = "hello"
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def http(scope, receive, send):
    body = json.dumps({"path": scope["path"]}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        return await lifespan(scope, receive, send)
    if scope["type"] == "http":
        return await http(scope, receive, send)
    assert scope["type"] == "websocket", scope["type"]
    path = scope["path"]
    if path.startswith("/misuse/"):
        return await misuse(scope, receive, send)
    await ROUTES[path](scope, receive, send)
