"""A FastAPI app (Debian's python3-fastapi 0.92) for the ASGI tests:
pydantic bodies and their 422s, path and query parameters, dependencies,
background tasks, streaming, startup/shutdown events and HTTP
middleware."""

import asyncio
from typing import List, Optional

from fastapi import (BackgroundTasks, Depends, FastAPI, Request, WebSocket,
                     WebSocketDisconnect, status)
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import BaseModel

from asgi_app import record

app = FastAPI()


class Item(BaseModel):
    name: str
    price: float
    tags: List[str] = []


@app.on_event("startup")
async def startup():
    app.state.started = "yes"
    record("FASTAPI startup")


@app.on_event("shutdown")
async def shutdown():
    record("FASTAPI shutdown")


@app.middleware("http")
async def timing(request: Request, call_next):
    response = await call_next(request)
    response.headers["x-fastapi-mw"] = "1"
    return response


def common(limit: int = 10):
    return {"limit": limit}


@app.get("/")
async def index():
    return {"hello": "fastapi", "started": app.state.started}


@app.get("/__ready")
async def ready():
    return {}


@app.get("/items/{item_id}")
async def read_item(item_id: int, q: Optional[str] = None,
                    params: dict = Depends(common)):
    return {"item_id": item_id, "q": q, "limit": params["limit"]}


@app.post("/items")
async def create_item(item: Item):
    return {"name": item.name, "total": item.price * 2, "tags": item.tags}


@app.get("/sync")
def sync_route():
    return {"thread": "pool"}


@app.post("/notify")
async def notify(m: str, tasks: BackgroundTasks):
    async def later():
        await asyncio.sleep(0.05)
        record("FASTAPI background %s" % m)
    tasks.add_task(later)
    return {"queued": m}


@app.get("/stream")
async def stream():
    async def gen():
        for i in range(4):
            yield b"chunk %d\n" % i
            await asyncio.sleep(0.01)
    return StreamingResponse(gen(), media_type="text/plain")


@app.get("/text", response_class=PlainTextResponse)
async def text():
    return "plain\n"


async def ws_token(websocket: WebSocket, token: Optional[str] = None):
    """Refuses (closes before accept: the client gets a 403) without the
    right token."""
    if token != "t":
        await websocket.close(code=status.WS_1008_POLICY_VIOLATION)
        return None
    return token


@app.websocket("/ws/{room}")
async def ws_room(websocket: WebSocket, room: str,
                  token: Optional[str] = Depends(ws_token)):
    if token is None:
        return
    await websocket.accept()
    count = 0
    try:
        while True:
            data = await websocket.receive_json()
            count += 1
            await websocket.send_json({"room": room, "echo": data,
                                       "count": count})
    except WebSocketDisconnect as e:
        record("FASTAPI ws %s disconnect %s" % (room, e.code))
