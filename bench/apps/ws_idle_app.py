"""The app of bench/wsidle.py (idle WebSockets): ws_echo_asgi's app, and
GET /_mem answering the worker's own memory figures as JSON: glibc's
mallinfo2(); with ?deep, the gc-tracked objects by type (count and
sys.getsizeof() bytes) and what the websocket scope dicts alive hold, and
under tracemalloc its traced bytes and allocations by line; with ?trim,
after malloc_trim(0). Not a benchmark app of its own: the figures are
the harness's to read."""
import collections
import ctypes
import gc
import json
import sys
import tracemalloc

from ws_echo_asgi import app as echo

FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
          "fsmblks", "uordblks", "fordblks", "keepcost")


class Mallinfo2(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in FIELDS]


libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Mallinfo2


def figures(deep):
    if deep:
        gc.collect()  # the last deep reading's cycles (its snapshot's)
    mi = libc.mallinfo2()
    out = {"malloc": {f: getattr(mi, f) for f in FIELDS},
           "blocks": sys.getallocatedblocks()}
    if tracemalloc.is_tracing():
        out["traced"] = tracemalloc.get_traced_memory()[0]
    if deep and tracemalloc.is_tracing():
        # before anything else is made: the snapshot leaves out its own
        snap = tracemalloc.take_snapshot().filter_traces([
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, __file__)])
        out["lines"] = [[str(s.traceback[0]), s.size, s.count]
                        for s in snap.statistics("lineno")]
        del snap
    if deep:
        counts, sizes = collections.Counter(), collections.Counter()
        scopes = []
        for o in gc.get_objects():
            counts[type(o).__name__] += 1
            sizes[type(o).__name__] += sys.getsizeof(o, 0)
            if type(o) is dict and o.get("type") == "websocket":
                scopes.append(owned(o))
        out["types"] = {k: [v, sizes[k]] for k, v in counts.items()}
        out["ws_scopes"] = [len(scopes), sum(scopes)]
    return out


def owned(o):
    """Bytes of O and of the containers, bytes and strings under it that
    no one else holds (a shared key or constant has many references)."""
    total, todo = 0, [o]
    while todo:
        x = todo.pop()
        if x is not o and sys.getrefcount(x) > 3:
            continue
        total += sys.getsizeof(x, 0)
        if type(x) is dict:
            todo += list(x.keys()) + list(x.values())
        elif type(x) in (list, tuple):
            todo += list(x)
    return total


async def mem(scope, receive, send):
    await receive()
    if b"trim" in scope["query_string"]:
        libc.malloc_trim(0)
    body = json.dumps(figures(b"deep" in scope["query_string"])).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


def app(scope, receive, send):
    """Not a coroutine function: it hands the echo app's coroutine over
    as it is, so a WebSocket holds no frame of the hook's (the servers are
    told it is ASGI 3)."""
    if scope["type"] == "http" and scope["path"] == "/_mem":
        return mem(scope, receive, send)
    return echo(scope, receive, send)
