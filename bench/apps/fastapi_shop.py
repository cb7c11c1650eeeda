"""A FastAPI app for bench/preload.py: a few routes under a router,
pydantic models with validators, a dependency, CORS and GZip middleware,
data in memory. GET /items answers 20 items as JSON through a
response_model; /pid answers the pid of the worker (plain digits) and every
response carries it in X-Worker-Pid, so that the harness can count
requests per worker. Everything is imported and built at import."""

import datetime
import enum
import os
from typing import List, Optional

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query
from fastapi.middleware.cors import CORSMiddleware
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, Field, validator


class Category(str, enum.Enum):
    books = "books"
    music = "music"
    games = "games"


class ItemIn(BaseModel):
    name: str = Field(..., min_length=1, max_length=100)
    price: float = Field(..., gt=0)
    category: Category
    tags: List[str] = []
    description: Optional[str] = None

    @validator("tags", each_item=True)
    def short_tags(cls, v):
        if len(v) > 20:
            raise ValueError("tag too long")
        return v.lower()


class Item(ItemIn):
    id: int
    created: datetime.datetime


class Page(BaseModel):
    total: int
    offset: int
    items: List[Item]


UTC = datetime.timezone.utc
ITEMS = [Item(id=i, name="item %d" % i, price=1.5 + i,
              category=list(Category)[i % 3], tags=["t%d" % (i % 5)],
              description="the item number %d" % i,
              created=datetime.datetime(2024, 1, 1 + i % 28, tzinfo=UTC))
         for i in range(100)]


def paging(offset: int = Query(0, ge=0), limit: int = Query(20, ge=1, le=100)):
    return offset, limit


router = APIRouter(prefix="/items", tags=["items"])


@router.get("", response_model=Page)
async def list_items(page=Depends(paging),
                     category: Optional[Category] = None):
    offset, limit = page
    found = [i for i in ITEMS if category is None or i.category == category]
    return Page(total=len(found), offset=offset,
                items=found[offset:offset + limit])


@router.get("/{item_id}", response_model=Item)
async def get_item(item_id: int):
    if not 0 <= item_id < len(ITEMS):
        raise HTTPException(status_code=404, detail="no such item")
    return ITEMS[item_id]


@router.post("", response_model=Item, status_code=201)
async def create_item(item: ItemIn):
    return Item(id=len(ITEMS), created=datetime.datetime.now(UTC),
                **item.dict())


app = FastAPI(title="bench shop")
app.add_middleware(GZipMiddleware, minimum_size=4096)
app.add_middleware(CORSMiddleware, allow_origins=["*"])
app.include_router(router)


@app.middleware("http")
async def worker_pid_header(request, call_next):
    response = await call_next(request)
    response.headers["X-Worker-Pid"] = str(os.getpid())
    return response


@app.get("/pid", response_class=PlainTextResponse)
async def pid():
    return str(os.getpid())


app.openapi()  # built at import, as a deployed app's first /docs would
