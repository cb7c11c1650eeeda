"""The app of the soak, the fault and the slow-reader tests (WSGI `app`,
ASGI `asgi`): a few routes whose answers a client can check byte for byte
without asking the server, and no per-request logging, so millions of
requests cost the server nothing but the request itself.

  /hello          "hello\\n"
  /echo           the request body, back
  /big?size=N     N bytes of BLOCK repeated, streamed 64 KiB at a time (a
                  WSGI iterator; ASGI: one send per 64 KiB); byte i of the
                  body is i % 251, so any slice can be checked alone
"""

BLOCK = bytes(i % 251 for i in range(251 * 261))  # 65511 bytes, 251 | len
CHUNK = len(BLOCK)


def expected_body(size):
    """The body /big?size=SIZE answers with."""
    whole, rest = divmod(size, CHUNK)
    return BLOCK * whole + BLOCK[:rest]


def _size(qs):
    for part in qs.split("&"):
        k, _, v = part.partition("=")
        if k == "size":
            return int(v)
    return 1048576


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/echo":
        inp = environ["wsgi.input"]
        parts = []
        while True:
            data = inp.read(65536)
            if not data:
                break
            parts.append(data)
        body = b"".join(parts)
        start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                  ("Content-Length", str(len(body)))])
        return [body]
    if path == "/big":
        size = _size(environ.get("QUERY_STRING", ""))
        start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                  ("Content-Length", str(size))])
        return _big(size)
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", "6")])
    return [b"hello\n"]


def _big(size):
    pos = 0
    while pos < size:
        n = min(CHUNK, size - pos)
        yield BLOCK if n == CHUNK else BLOCK[:n]
        pos += n


async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope["path"]
    ctype = [(b"content-type", b"application/octet-stream")]
    if path == "/echo":
        body = bytearray()
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body += msg.get("body", b"")
            if not msg.get("more_body", False):
                break
        await send({"type": "http.response.start", "status": 200,
                    "headers": ctype + [(b"content-length",
                                         str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": bytes(body)})
        return
    if path == "/big":
        size = _size(scope["query_string"].decode("latin-1"))
        await send({"type": "http.response.start", "status": 200,
                    "headers": ctype + [(b"content-length",
                                         str(size).encode())]})
        pos = 0
        while pos < size:
            n = min(CHUNK, size - pos)
            await send({"type": "http.response.body",
                        "body": BLOCK if n == CHUNK else BLOCK[:n],
                        "more_body": True})
            pos += n
        await send({"type": "http.response.body", "body": b""})
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", b"6")]})
    await send({"type": "http.response.body", "body": b"hello\n"})
