"""The raw ASGI 3.0 application the end-to-end tests serve.

The first path segment picks a route; each route exercises one message or
error path of the http scope. Every interesting event is appended to the
file named by E2E_CALL_LOG (see wsgi_app.record), so a test can prove what
the app saw: the messages receive() returned, the exception a bad send()
raised, whether the app learnt that its client went away. (The same
one-line-per-event format as wsgi_app.py.)

Lifespan is supported: startup puts a value into the lifespan state, which
every request's scope["state"] must carry (a shallow copy).
"""

import asyncio
import contextvars
import json
import os
import sys


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


REQUEST_ID = contextvars.ContextVar("request_id", default=None)


async def start(send, status=200, headers=(), ctype=b"text/plain",
                **extra):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype)] + list(headers),
                **extra})


async def text(send, body, status=200, headers=()):
    if isinstance(body, str):
        body = body.encode("utf-8")
    await start(send, status, headers)
    await send({"type": "http.response.body", "body": body})


async def as_json(send, obj, status=200):
    await start(send, status, ctype=b"application/json")
    await send({"type": "http.response.body",
                "body": json.dumps(obj, sort_keys=True).encode()})


def query(scope):
    out = {}
    for part in scope["query_string"].decode("latin-1").split("&"):
        if part:
            k, _, v = part.partition("=")
            out[k] = v
    return out


async def read_body(receive):
    """The whole request body and the number of http.request messages."""
    body, count = bytearray(), 0
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise ConnectionError("client disconnected")
        assert msg["type"] == "http.request", msg
        count += 1
        body += msg.get("body", b"")
        if not msg.get("more_body", False):
            return bytes(body), count


# ---------------------------------------------------------------- routes

async def hello(scope, receive, send):
    await text(send, b"hello\n")


async def scope_route(scope, receive, send):
    def plain(v):
        if isinstance(v, bytes):
            return v.decode("latin-1")
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v
    out = {k: plain(v) for k, v in scope.items()}
    out["types"] = {k: type(v).__name__ for k, v in scope.items()}
    await as_json(send, out)


async def echo(scope, receive, send):
    body, count = await read_body(receive)
    await text(send, body, headers=[(b"x-messages", str(count).encode())])


async def receive_twice(scope, receive, send):
    """After the body, receive() waits; the response's end ends the wait."""
    first = await receive()

    async def watch():
        msg = await receive()
        record("WATCH %s" % msg["type"])
    task = asyncio.ensure_future(watch())
    await asyncio.sleep(0)
    await text(send, first["type"])
    await asyncio.wait_for(task, 5)


async def stream(scope, receive, send):
    q = query(scope)
    n, size = int(q.get("n", "5")), int(q.get("size", "10"))
    delay = float(q.get("delay", "0"))
    await start(send)
    for i in range(n):
        await send({"type": "http.response.body",
                    "body": bytes([97 + i % 26]) * size, "more_body": True})
        if delay:
            await asyncio.sleep(delay)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def sized_stream(scope, receive, send):
    await start(send, headers=[(b"content-length", b"6")])
    for piece in (b"ab", b"cd", b"ef"):
        await send({"type": "http.response.body", "body": piece,
                    "more_body": True})
    await send({"type": "http.response.body"})


async def disconnect(scope, receive, send):
    """Streams until receive() reports the client gone."""
    mark = query(scope).get("m", "x")
    await receive()  # the (empty) request
    gone = asyncio.Event()

    async def watch():
        msg = await receive()
        record("DISCONNECT %s %s" % (mark, msg["type"]))
        gone.set()
    task = asyncio.ensure_future(watch())
    await start(send)
    for i in range(400):
        if gone.is_set():
            break
        await send({"type": "http.response.body", "body": b"tick\n",
                    "more_body": True})
        record("SENT %s %d" % (mark, i))
        await asyncio.sleep(0.02)
    await send({"type": "http.response.body", "body": b""})
    await asyncio.wait_for(task, 5)


async def big(scope, receive, send):
    """Backpressure: records how far it got; a slow client holds it back."""
    q = query(scope)
    mark, chunks = q.get("m", "x"), int(q.get("chunks", "64"))
    chunk = b"z" * 65536
    await start(send, headers=[(b"content-length",
                                str(len(chunk) * chunks).encode())])
    for i in range(chunks):
        await send({"type": "http.response.body", "body": chunk,
                    "more_body": True})
        record("BIG %s %d" % (mark, i))
    await send({"type": "http.response.body", "body": b""})


PATTERN = bytes(range(251))


def pattern_body(size):
    """SIZE bytes where byte i is i % 251: any shift or cut shows."""
    return (PATTERN * (size // 251 + 1))[:size]


async def large(scope, receive, send):
    """A large body in few send()s: parts=N messages; overlap=1 sends all
    but the last without waiting for them first."""
    q = query(scope)
    size, parts = int(q.get("size", "1048576")), int(q.get("parts", "1"))
    body = pattern_body(size)
    await start(send, ctype=b"application/octet-stream")
    step = -(-size // parts)
    pieces = [body[i:i + step] for i in range(0, size, step)]
    msgs = [{"type": "http.response.body", "body": b, "more_body": True}
            for b in pieces[:-1]]
    last = {"type": "http.response.body", "body": pieces[-1]}
    if q.get("overlap") == "1":
        pending = [send(m) for m in msgs]
        await send(last)
        for f in pending:
            await f
    else:
        for m in msgs:
            await send(m)
        await send(last)
    record("LARGE %d done" % size)


# One bytes object sent whole by /lent, as wsgi_app's LENT; /lent-refs
# answers its reference count (2 once no response holds it).
LENT = pattern_body(1024 * 1024 + 17)


async def lent(scope, receive, send):
    q = query(scope)
    cl = q.get("cl", str(len(LENT)))
    headers = [] if cl == "none" else [(b"content-length", cl.encode())]
    await start(send, headers=headers, ctype=b"application/octet-stream")
    if q.get("first"):  # a small part first: the head leaves before LENT
        await send({"type": "http.response.body", "body": b"<",
                    "more_body": True})
    await send({"type": "http.response.body", "body": LENT})


async def lent_refs(scope, receive, send):
    await text(send, str(sys.getrefcount(LENT)))


async def slow(scope, receive, send):
    t = float(query(scope).get("t", "1.5"))
    record("SLOW start %s" % scope["path"])
    await asyncio.sleep(t)
    await text(send, b"slept %.1f\n" % t)
    record("SLOW end %s" % scope["path"])


async def error_before(scope, receive, send):
    raise RuntimeError("boom before start")


async def error_after(scope, receive, send):
    await start(send)
    await send({"type": "http.response.body", "body": b"partial",
                "more_body": True})
    raise RuntimeError("boom after start")


async def no_response(scope, receive, send):
    return None


async def started_only(scope, receive, send):
    await start(send)


async def bad_send(scope, receive, send):
    kind = scope["path"].split("/")[2]
    messages = {
        "body-first": [{"type": "http.response.body", "body": b"x"}],
        "status-str": [{"type": "http.response.start", "status": "200"}],
        "header-str": [{"type": "http.response.start", "status": 200,
                        "headers": [("content-type", "text/plain")]}],
        "header-crlf": [{"type": "http.response.start", "status": 200,
                         "headers": [(b"x-a", b"1\r\nx-b: 2")]}],
        "body-str": [{"type": "http.response.start", "status": 200},
                     {"type": "http.response.body", "body": "text"}],
        "not-dict": ["http.response.start"],
        "unknown": [{"type": "http.response.nope"}],
        "start-twice": [{"type": "http.response.start", "status": 200},
                        {"type": "http.response.start", "status": 200}],
    }[kind]
    try:
        for m in messages:
            await send(m)
    except Exception as e:
        record("SENDERROR %s %s: %s" % (kind, type(e).__name__, e))
        raise


async def after_end(scope, receive, send):
    await text(send, b"done\n")
    try:
        await send({"type": "http.response.body", "body": b"more"})
    except Exception as e:
        record("AFTEREND %s: %s" % (type(e).__name__, e))


async def trailers(scope, receive, send):
    await start(send, trailers=True)
    await send({"type": "http.response.body", "body": b"data",
                "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    await send({"type": "http.response.trailers",
                "headers": [(b"x-checksum", b"abc")], "more_trailers": True})
    await send({"type": "http.response.trailers",
                "headers": [(b"x-count", b"1")], "more_trailers": False})


async def pathsend(scope, receive, send):
    path = os.path.join(os.environ["E2E_TMP"], "pathsend.bin")
    with open(path, "wb") as f:
        f.write(bytes(range(256)) * 1000)
    await start(send, ctype=b"application/octet-stream")
    await send({"type": "http.response.pathsend", "path": path})


async def task_info(scope, receive, send):
    """current_task() is one Task for the whole request; context is
    per request."""
    t1 = asyncio.current_task()
    before = REQUEST_ID.get()
    REQUEST_ID.set(scope["path"])
    await receive()
    await asyncio.sleep(0.01)
    t2 = asyncio.current_task()
    await as_json(send, {"task": t1 is not None and t1 is t2,
                         "before": before, "after": REQUEST_ID.get(),
                         "done": t1.done(), "name": t1.get_name()})


async def await_mix(scope, receive, send):
    """Awaits that complete at once (receive, send) mixed with real waits
    (a bare yield, a loop Future resolved later), in one Task."""
    loop = asyncio.get_running_loop()
    t1 = asyncio.current_task()
    msg = await receive()
    await start(send)
    await asyncio.sleep(0)
    fut = loop.create_future()
    loop.call_later(0.01, fut.set_result, b"later,")
    got = await fut
    await send({"type": "http.response.body", "body": msg["body"] + b",",
                "more_body": True})
    await send({"type": "http.response.body", "body": got, "more_body": True})
    await send({"type": "http.response.body",
                "body": b"same" if asyncio.current_task() is t1 else b"other"})


async def cancel_self(scope, receive, send):
    """A request that cancels a child task and survives it."""
    child = asyncio.ensure_future(asyncio.sleep(10))
    await asyncio.sleep(0)
    child.cancel()
    try:
        await child
    except asyncio.CancelledError:
        pass
    await text(send, b"child cancelled\n")


async def head_len(scope, receive, send):
    await text(send, b"x" * 1234)


async def status(scope, receive, send):
    code = int(scope["path"].split("/")[2])
    await start(send, code)
    await send({"type": "http.response.body", "body": b"" if code in (
        204, 304) else b"status %d\n" % code})


KEPT = []  # a request's Task, kept past its request's end


async def keep_task(scope, receive, send):
    """Keeps its Task, and ends without awaiting anything incomplete."""
    KEPT[:] = [asyncio.current_task()]
    await text(send, b"kept\n")


async def cancel_kept(scope, receive, send):
    """Cancels the Task an earlier request kept (long over): what a stray
    reference can do. Later requests must not feel it."""
    done = bool(KEPT) and KEPT[0].cancel()
    await asyncio.sleep(0)
    await text(send, b"cancel %s\n" % (b"taken" if done else b"refused"))


async def task_state(scope, receive, send):
    """current_task() in the first step and after a real wait: the same
    Task, no cancellation pending on it."""
    t = asyncio.current_task()
    before = t.cancelling()
    if query(scope).get("wait"):
        await asyncio.sleep(0.001)
    await as_json(send, {"same": asyncio.current_task() is t,
                         "cancelling": [before, t.cancelling()],
                         "tasks": len(asyncio.all_tasks())})


async def timeout_route(scope, receive, send):
    """asyncio.timeout() entered in the first step, firing after it."""
    try:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(5)
        body = b"slept\n"
    except TimeoutError:
        body = b"timed out\n"
    await text(send, body)


async def task_group(scope, receive, send):
    """A TaskGroup made in the first step: its children's results, and one
    child's failure cancelling the other."""
    async def child(v, delay):
        await asyncio.sleep(delay)
        return v
    async with asyncio.TaskGroup() as tg:
        a = tg.create_task(child(b"a", 0.01))
        b = tg.create_task(child(b"b", 0))
    async def boom():
        raise ValueError("child failed")
    try:
        async with asyncio.TaskGroup() as tg:
            slow_one = tg.create_task(asyncio.sleep(5))
            tg.create_task(boom())
        got = b"no error"
    except* ValueError:
        got = b"ValueError"
    await text(send, a.result() + b.result() + b"," + got + b"," +
               (b"cancelled" if slow_one.cancelled() else b"not"))


async def task_done_callback(scope, receive, send):
    """A done callback on its own Task runs once the request is over, with
    that Task; the Task is then done and refuses cancel()."""
    mark = query(scope)["m"]
    def done(t):
        record("TASKDONE %s %s %s" % (mark, t.done(), t.cancel()))
    asyncio.current_task().add_done_callback(done)
    if query(scope).get("wait"):
        await asyncio.sleep(0.001)
    await text(send, b"ok\n")


async def cancel_own(scope, receive, send):
    """Cancels its own Task in its first step: the next await raises,
    as in any Task; caught and uncancelled, the request goes on."""
    asyncio.current_task().cancel()
    try:
        await asyncio.sleep(0.01)
        body = b"not cancelled\n"
    except asyncio.CancelledError:
        asyncio.current_task().uncancel()
        body = b"cancelled\n"
    await asyncio.sleep(0)
    await text(send, body)


async def between_steps(scope, receive, send):
    """What a loop callback, and a Task the app starts, see as the current
    task once the request's step is over: none, and the Task itself (a
    request's task left current would make asyncio refuse to step it)."""
    mark = query(scope)["m"]
    loop = asyncio.get_running_loop()

    async def child():
        record("BETWEENTASK %s %s" % (mark, asyncio.current_task() is me))

    loop.call_soon(lambda: record("BETWEENCB %s %s" % (
        mark, asyncio.current_task())))
    me = asyncio.ensure_future(child())
    await text(send, b"ok\n")


ROUTES = {
    "": hello, "hello": hello, "__ready": hello, "scope": scope_route,
    "echo": echo, "receive-twice": receive_twice, "stream": stream,
    "sized-stream": sized_stream, "disconnect": disconnect, "big": big, "large": large,
    "slow": slow, "error-before": error_before, "error-after": error_after,
    "no-response": no_response, "started-only": started_only,
    "bad-send": bad_send, "after-end": after_end, "trailers": trailers,
    "pathsend": pathsend, "task": task_info, "cancel-self": cancel_self,
    "head": head_len, "status": status, "await-mix": await_mix,
    "keep-task": keep_task, "cancel-kept": cancel_kept,
    "task-state": task_state, "timeout": timeout_route,
    "task-group": task_group, "cancel-own": cancel_own,
    "task-done-callback": task_done_callback,
    "lent": lent, "lent-refs": lent_refs, "between-steps": between_steps,
}


async def lifespan(scope, receive, send):
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            scope["state"]["started"] = "yes"
            scope["state"]["shared"] = []
            record("LIFESPAN startup")
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            record("LIFESPAN shutdown")
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        return await lifespan(scope, receive, send)
    assert scope["type"] == "http", scope["type"]
    name = scope["path"].split("/")[1]
    handler = ROUTES.get(name)
    if handler is None:
        await text(send, b"no route\n", 404)
        return
    await handler(scope, receive, send)


# ---------------------------------------------------------------- variants

async def lifespan_fails(scope, receive, send):
    """Its startup fails: the worker must not become ready."""
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.failed",
                    "message": "database unreachable"})
        return
    await text(send, b"should not serve\n")


async def no_lifespan(scope, receive, send):
    """Rejects lifespan the way Django does: auto mode serves anyway."""
    if scope["type"] != "http":
        raise ValueError("only http, not %s" % scope["type"])
    await text(send, b"no lifespan here\n")


async def slow_shutdown(scope, receive, send):
    """Lifespan shutdown that takes longer than any budget."""
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.complete"})
        await receive()
        record("LIFESPAN slow shutdown")
        await asyncio.sleep(3600)
        return
    await text(send, b"ok\n")


def wsgi_looking(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"wsgi\n"]


class ASGIObject:
    """An object whose __call__ is a coroutine function: ASGI for auto."""

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            await text(send, b"object\n")


obj_app = ASGIObject()
