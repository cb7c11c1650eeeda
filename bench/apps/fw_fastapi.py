"""FastAPI JSON endpoint of the frameworks suite (Debian's FastAPI 0.92):
GET / answers {"message": "Hello, World!"} from an async route."""

from fastapi import FastAPI

app = FastAPI()


@app.get("/")
async def index():
    return {"message": "Hello, World!"}
