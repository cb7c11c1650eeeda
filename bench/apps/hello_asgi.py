"""Hello-world ASGI 3.0 app used by every arm of the ASGI benchmark suite.

Same response as hello_wsgi.py. Lifespan is accepted and acknowledged so
servers that run it (uvicorn, hypercorn, sluice) start the same way.

The app awaits the request's `http.request` event before answering, as an
app that reads its request body does. Besides being the usual shape, this
matters for Debian's hypercorn (0.13.2 with h11 0.14): when the response ends
before the server has seen the end of the request, it closes the connection
(without a `Connection: close` header), so keep-alive is lost and wrk counts
one read error per request.
"""

BODY = b"Hello, World!"
START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [
        (b"content-type", b"text/plain"),
        (b"content-length", str(len(BODY)).encode("ascii")),
    ],
}
END = {"type": "http.response.body", "body": BODY}


async def app(scope, receive, send):
    kind = scope["type"]
    if kind == "http":
        message = await receive()
        while message.get("more_body"):  # a GET has none; drain if sent
            message = await receive()
        await send(START)
        await send(END)
    elif kind == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    else:  # websocket or unknown: not part of this benchmark
        raise RuntimeError("unsupported scope type: %s" % kind)
