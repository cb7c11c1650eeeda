"""A Starlette app (Debian's python3-starlette) for the ASGI tests: JSON,
path and query parameters, request bodies and streamed uploads, streaming
and server-sent-event responses, background tasks, lifespan with state and
middleware (BaseHTTPMiddleware, which runs on anyio task groups)."""

import asyncio
import contextlib
import hashlib

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import (JSONResponse, PlainTextResponse,
                                 StreamingResponse)
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocketDisconnect

from asgi_app import record


@contextlib.asynccontextmanager
async def lifespan(app):
    record("STARLETTE startup")
    yield {"greeting": "hello from lifespan"}
    record("STARLETTE shutdown")


class Stamp(BaseHTTPMiddleware):
    async def dispatch(self, request, call_next):
        response = await call_next(request)
        response.headers["x-middleware"] = "stamped"
        return response


async def index(request):
    return PlainTextResponse("hello from starlette\n")


async def as_json(request):
    return JSONResponse({"ok": True, "n": [1, 2, 3]})


async def item(request):
    return JSONResponse({"item_id": request.path_params["item_id"],
                         "q": request.query_params.get("q"),
                         "tags": request.query_params.getlist("tag")})


async def echo(request):
    body = await request.body()
    return JSONResponse({"size": len(body),
                         "sha256": hashlib.sha256(body).hexdigest(),
                         "type": request.headers.get("content-type")})


async def upload(request):
    h, size, chunks = hashlib.sha256(), 0, 0
    async for chunk in request.stream():
        h.update(chunk)
        size += len(chunk)
        chunks += 1
    return JSONResponse({"size": size, "sha256": h.hexdigest(),
                         "chunks": chunks})


async def stream(request):
    async def gen():
        for i in range(5):
            yield ("line %d\n" % i).encode()
            await asyncio.sleep(0.01)
    return StreamingResponse(gen(), media_type="text/plain")


async def sse(request):
    mark = request.query_params.get("m", "x")
    n = int(request.query_params.get("n", "3"))

    async def events():
        try:
            for i in range(n):
                yield "data: event %d\n\n" % i
                await asyncio.sleep(0.05)
            record("SSE %s complete" % mark)
        except asyncio.CancelledError:
            record("SSE %s cancelled" % mark)
            raise
    return StreamingResponse(events(), media_type="text/event-stream")


async def background(request):
    mark = request.query_params.get("m", "x")

    async def later():
        await asyncio.sleep(0.05)
        record("BACKGROUND %s done" % mark)
    return PlainTextResponse("accepted\n", background=BackgroundTask(later))


async def state(request):
    return JSONResponse({"greeting": request.state.greeting})


async def task(request):
    t = asyncio.current_task()
    await asyncio.sleep(0)
    return JSONResponse({"same": t is asyncio.current_task()})


async def boom(request):
    raise RuntimeError("starlette boom")


async def ws(websocket):
    # WebSocket route (tests/e2e/test_websocket.py): the first offered
    # subprotocol, a greeting, then echo with a prefix (text) or doubled
    # (bytes) until the client leaves
    name = websocket.query_params.get("name", "-")
    offered = websocket.scope.get("subprotocols") or []
    await websocket.accept(subprotocol=offered[0] if offered else None)
    await websocket.send_text("hello %s" % name)
    try:
        while True:
            msg = await websocket.receive()
            if msg["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(msg.get("code", 1000))
            if msg.get("text") is not None:
                await websocket.send_text("starlette echo: " + msg["text"])
            else:
                await websocket.send_bytes(msg["bytes"] * 2)
    except WebSocketDisconnect as e:
        record("STARLETTE ws %s disconnect %s" % (name, e.code))


app = Starlette(
    routes=[
        Route("/", index), Route("/__ready", index), Route("/json", as_json),
        Route("/items/{item_id:int}", item),
        Route("/echo", echo, methods=["POST"]),
        Route("/upload", upload, methods=["POST", "PUT"]),
        Route("/stream", stream), Route("/sse", sse),
        Route("/background", background), Route("/state", state),
        Route("/task", task), Route("/boom", boom),
        WebSocketRoute("/ws", ws),
    ],
    middleware=[Middleware(Stamp)],
    lifespan=lifespan,
)
