"""The fleet test's application (ASGI): every answer names the host and
the version that served it, so the load client can count versions and
hosts per step without reading HAProxy's log.

The test copies this file into each host's own directory and rewrites the
VERSION line there: a deploy is a new file on disk and a fresh start, as a
release would be. FLEET_HOST comes from the environment of that host's
sluice.

  GET /        200 "HOST VERSION PID\n", also as X-Fleet-Host and
               X-Fleet-Version; X-Fleet-Scheme is the scope's scheme and
               X-Fleet-TLS the connection's TLS version (the ASGI TLS
               extension's tls_version, as 0x0304), or "-" without TLS,
               and X-Fleet-HTTP the scope's http_version ("1.1", "2")
  WebSocket /  sends "HOST VERSION PID" once accepted, then echoes text
"""

import os

VERSION = "v1"
HOST = os.environ.get("FLEET_HOST", "?")


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    who = "%s %s %d" % (HOST, VERSION, os.getpid())
    if scope["type"] == "websocket":
        await websocket(receive, send, who)
        return
    body = (who + "\n").encode()
    tls = (scope.get("extensions") or {}).get("tls")
    tls_version = "%#06x" % tls["tls_version"] if tls else "-"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"x-fleet-host", HOST.encode()),
                            (b"x-fleet-version", VERSION.encode()),
                            (b"x-fleet-scheme", scope["scheme"].encode()),
                            (b"x-fleet-tls", tls_version.encode()),
                            (b"x-fleet-http",
                             scope["http_version"].encode())]})
    await send({"type": "http.response.body", "body": body})


async def websocket(receive, send, who):
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": who})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message.get("text") is not None:
            await send({"type": "websocket.send", "text": message["text"]})
