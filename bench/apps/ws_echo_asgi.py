"""The WebSocket benchmark's app (bench/run.py --suite ws): /ws echoes
every message back as it came (text as text, bytes as bytes); any HTTP
request gets "ok". Plain ASGI 3, so that every server runs the same code."""


async def app(scope, receive, send):
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        while True:
            msg = await receive()
            if msg["type"] == "websocket.disconnect":
                return
            if msg.get("text") is not None:
                await send({"type": "websocket.send", "text": msg["text"]})
            else:
                await send({"type": "websocket.send", "bytes": msg["bytes"]})
    elif scope["type"] == "http":
        await receive()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"),
                                (b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})
    elif scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
