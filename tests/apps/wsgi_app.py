"""The WSGI application the end-to-end tests serve: one route per behaviour.

The first path segment picks a route. Every route that wsgiref's validator
can wrap is wrapped in it, and its warnings are turned into errors, so a
server that breaks PEP 3333 in a way the validator sees answers 500 and the
test fails. Routes that exercise things the validator forbids on purpose
(read() without a size, start_response twice, start_response from inside
the iterator, ...) are served unwrapped and check by hand.

Every call is appended to the file named by E2E_CALL_LOG (one line per
event, written with O_APPEND so several threads and workers can share it),
so a test can prove that a request reached the application, or that it
never did, and that close() was called on a response iterable.
"""

import hashlib
import json
import os
import sys
import threading
import time
import warnings
from urllib.parse import parse_qs
from wsgiref.validate import WSGIWarning, validator

from e2e_data import pattern

warnings.filterwarnings("error", category=WSGIWarning)
# PEP 3333 lets QUERY_STRING be absent when empty; do not fail on that.
warnings.filterwarnings("ignore", message="QUERY_STRING is not in",
                        category=WSGIWarning)


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


def _unraisable(args):
    # The validator complains from __del__ when an iterable is never
    # closed; such a complaint cannot reach the client, so log it.
    record("UNRAISABLE %r %r" % (args.exc_value, args.object))


sys.unraisablehook = _unraisable


def query(environ):
    qs = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    return {k: v[-1] for k, v in qs.items()}


def text(start_response, body, status="200 OK", ctype="text/plain",
         extra=()):
    if isinstance(body, str):
        body = body.encode("utf-8")
    start_response(status, [("Content-Type", ctype),
                            ("Content-Length", str(len(body)))] + list(extra))
    return [body]


def as_json(start_response, obj, status="200 OK"):
    return text(start_response, json.dumps(obj, sort_keys=True), status,
                "application/json")


# ---------------------------------------------------------------- routes

def hello(environ, start_response):
    return text(start_response, b"hello\n")


def pid(environ, start_response):
    return text(start_response, str(os.getpid()))


def describe(value):
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, tuple):
        return [describe(v) for v in value]
    return None


def environ_dump(environ, start_response):
    q = query(environ)
    out = {k: {"type": type(v).__name__, "value": describe(v)}
           for k, v in environ.items()}
    out["_key_types"] = sorted({type(k).__name__ for k in environ})
    out["_pid"] = os.getpid()
    out["_cwd"] = os.getcwd()
    out["_callables"] = {
        k: callable(environ.get(k))
        for k in ("wsgi.file_wrapper",)
    }
    out["_input_attrs"] = [a for a in ("read", "readline", "readlines",
                                       "__iter__")
                           if hasattr(environ["wsgi.input"], a)]
    out["_errors_attrs"] = [a for a in ("write", "writelines", "flush")
                            if hasattr(environ["wsgi.errors"], a)]
    if q.get("mutate"):
        # A later request must not see any of this.
        environ["e2e.leak"] = "leaked"
        environ["HTTP_X_LEAK"] = "leaked"
        environ["PATH_INFO"] = "/mutated"
    return as_json(start_response, out)


def echo(environ, start_response):
    q = query(environ)
    inp = environ["wsgi.input"]
    size = int(q.get("chunk", "65536"))
    h = hashlib.sha256()
    parts = []
    total = 0
    while True:
        data = inp.read(size)
        if not data:
            break
        total += len(data)
        h.update(data)
        if not q.get("sha"):
            parts.append(data)
    if q.get("sha"):
        return as_json(start_response, {"len": total, "sha256": h.hexdigest()})
    return text(start_response, b"".join(parts), ctype="application/octet-stream")


def input_ops(environ, start_response):
    """Run the wsgi.input operations named in ?ops=... and report results.

    ops is a comma list of read, read:N, readline, readline:N, readlines,
    iter. After them one more read() must return b"" (reported as "tail").
    """
    inp = environ["wsgi.input"]
    ops = query(environ).get("ops", "read")
    results = []
    for op in ops.split(","):
        name, _, arg = op.partition(":")
        if name == "read":
            v = inp.read(int(arg)) if arg else inp.read()
        elif name == "readline":
            v = inp.readline(int(arg)) if arg else inp.readline()
        elif name == "readlines":
            v = inp.readlines()
        elif name == "iter":
            v = [line for line in inp]
        else:
            raise ValueError("unknown op %r" % op)
        if isinstance(v, list):
            results.append([x.decode("latin-1") for x in v])
            assert all(type(x) is bytes for x in v)
        else:
            assert type(v) is bytes, type(v)
            results.append(v.decode("latin-1"))
    tail = inp.read()
    tail2 = inp.read(10)
    tail3 = inp.readline()
    return as_json(start_response, {
        "results": results,
        "tail": (tail + tail2 + tail3).decode("latin-1"),
    })


def errors(environ, start_response):
    marker = query(environ).get("marker", "no-marker")
    err = environ["wsgi.errors"]
    err.write("%s first-line\n" % marker)
    err.writelines(["%s second-line\n" % marker, "%s third-line\n" % marker])
    err.flush()
    return text(start_response, b"logged")


class RecordingFile:
    """A real file (it has a fileno, so sendfile applies) that logs close()."""

    def __init__(self, path, token):
        self._f = open(path, "rb")
        self._token = token

    def fileno(self):
        return self._f.fileno()

    def read(self, n=-1):
        return self._f.read(n)

    def seek(self, *a):
        return self._f.seek(*a)

    def tell(self):
        return self._f.tell()

    def close(self):
        record("fileclose %s" % self._token)
        self._f.close()


class RecordingBytes:
    """A file-like object without fileno(): the server must fall back."""

    def __init__(self, data, token):
        self._data = data
        self._pos = 0
        self._token = token

    def read(self, n=-1):
        if n is None or n < 0:
            n = len(self._data) - self._pos
        chunk = self._data[self._pos:self._pos + n]
        self._pos += len(chunk)
        return chunk

    def close(self):
        record("fileclose %s" % self._token)


def file_route(environ, start_response):
    q = query(environ)
    token = q.get("token", "-")
    offset = int(q.get("offset", "0"))
    blksize = int(q.get("blksize", "8192"))
    if q.get("kind") == "bytes":
        data = pattern(int(q["size"]))
        f = RecordingBytes(data, token)
        f.read(offset)
        length = len(data) - offset
    else:
        f = RecordingFile(q["path"], token)
        f.seek(offset)
        length = os.path.getsize(q["path"]) - offset
    headers = [("Content-Type", "application/octet-stream")]
    if q.get("cl", "1") == "1":
        headers.append(("Content-Length", str(length)))
    start_response("200 OK", headers)
    return environ["wsgi.file_wrapper"](f, blksize)


def sr_twice(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("X-First", "1")])
    try:
        start_response("201 Created", [("Content-Type", "text/plain"),
                                       ("X-Second", "1")])
    except Exception as e:
        outcome = "raised %s" % type(e).__name__
    else:
        outcome = "no-raise"
    return [outcome.encode()]


def sr_replace(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("X-Before", "1")])
    try:
        raise ValueError("replace me")
    except ValueError:
        start_response("503 Replaced", [("Content-Type", "text/plain"),
                                        ("X-After", "1")], sys.exc_info())
    return [b"replaced"]


def sr_after(environ, start_response):
    token = query(environ).get("token", "-")
    write = start_response("200 OK", [("Content-Type", "text/plain")])

    def body():
        yield b"first;"
        try:
            raise KeyError("late")
        except KeyError as original:
            try:
                start_response("500 Too Late", [("Content-Type", "text/plain")],
                               sys.exc_info())
            except BaseException as e:
                record("sr_after %s %s same=%s" % (token, type(e).__name__,
                                                   e is original))
            else:
                record("sr_after %s no-raise" % token)
        yield b"after"

    return body()


def empty_then_replace(environ, start_response):
    def body():
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  ("X-First", "1")])
        yield b""
        try:
            raise ValueError("still before headers")
        except ValueError:
            start_response("503 Replaced", [("Content-Type", "text/plain"),
                                            ("X-Replaced", "1")],
                           sys.exc_info())
        yield b"replaced"

    return body()


def write_route(environ, start_response):
    q = query(environ)
    headers = [("Content-Type", "text/plain")]
    if q.get("cl"):
        headers.append(("Content-Length", "15"))
    write = start_response("200 OK", headers)
    write(b"write1;")
    write(b"write2;")
    if q.get("cl"):
        return [b"x"]
    return [b"iter1;", b"iter2"]


def late_start(environ, start_response):
    def body():
        start_response("202 Accepted", [("Content-Type", "text/plain"),
                                        ("X-Late", "yes")])
        yield b"late "
        yield b"start"

    return body()


class Closing:
    """A response iterable that logs close(); MODE picks its behaviour."""

    def __init__(self, token, mode, start_response):
        self.token = token
        self.mode = mode
        self.start_response = start_response

    def __iter__(self):
        mode = self.mode
        if mode == "raise_first":
            raise RuntimeError("raise_first %s" % self.token)
        yield b"part1;"
        if mode == "raise":
            raise RuntimeError("raise mid-body %s" % self.token)
        if mode == "stream":
            # Large chunks until the client goes away (bounded in time: a
            # server that never notices keeps a lane busy for 8 s at most).
            chunk = b"s" * 65536
            end = time.monotonic() + 8
            while time.monotonic() < end:
                yield chunk
            record("stream-exhausted %s" % self.token)
        if mode == "slow":
            end = time.monotonic() + 8
            while time.monotonic() < end:
                time.sleep(0.05)
                yield b"tick;"
            record("slow-exhausted %s" % self.token)
        yield b"part2"

    def close(self):
        record("close %s" % self.token)


def closing(environ, start_response):
    q = query(environ)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return Closing(q.get("token", "-"), q.get("mode", "normal"),
                   start_response)


def raising(environ, start_response):
    q = query(environ)
    when = q.get("when", "before")
    marker = q.get("marker", "no-marker")
    if when == "before":
        raise RuntimeError("e2e-before %s" % marker)
    if when == "none_result":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return None
    if when == "str_chunk":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return ["a str, not bytes %s" % marker]
    if when == "no_start_response":
        return [b"body without start_response"]
    if when == "first_iter":
        def body():
            start_response("200 OK", [("Content-Type", "text/plain")])
            raise RuntimeError("e2e-first-iter %s" % marker)
            yield b"never"
        return body()
    if when == "after":
        cl = q.get("cl")
        headers = [("Content-Type", "text/plain")]
        if cl:
            headers.append(("Content-Length", cl))

        def body():
            start_response("200 OK", headers)
            yield b"partial-body;"
            raise RuntimeError("e2e-after %s" % marker)
        return body()
    raise ValueError("unknown when=%r" % when)


def chunks(environ, start_response):
    q = query(environ)
    n = int(q.get("n", "3"))
    size = int(q.get("size", "5"))
    empty = q.get("empty") == "1"
    start_response("200 OK", [("Content-Type", "application/octet-stream")])

    def body():
        pos = 0
        for i in range(n):
            if empty:
                yield b""
            yield pattern(size, pos)
            pos += size
        if empty:
            yield b""

    return body()


def status(environ, start_response):
    q = query(environ)
    code = int(q.get("code", "200"))
    reason = q.get("reason", "Whatever")
    if code in (204, 304):
        start_response("%d %s" % (code, reason), [("X-Status", str(code))])
        return []
    body = q.get("body", "status body").encode()
    start_response("%d %s" % (code, reason),
                   [("Content-Type", "text/plain"),
                    ("Content-Length", str(len(body)))])
    return [body]


def slow(environ, start_response):
    t = float(query(environ).get("t", "0.5"))
    time.sleep(t)
    return text(start_response, "slept %s pid %d" % (t, os.getpid()))


def big(environ, start_response):
    size = int(query(environ).get("size", "1048576"))
    start_response("200 OK", [("Content-Type", "application/octet-stream"),
                              ("Content-Length", str(size))])

    def body():
        pos = 0
        while pos < size:
            n = min(65536, size - pos)
            yield pattern(n, pos)
            pos += n

    return body()


# One bytes object served whole by /lent: the body a server may send
# without copying (sluice lends it to its loop). /lent-refs answers its
# reference count, which is back to 2 (LENT, and getrefcount's argument)
# once every response that held it is over.
LENT = pattern(1024 * 1024 + 17)


def lent(environ, start_response):
    cl = query(environ).get("cl", str(len(LENT)))
    headers = [("Content-Type", "application/octet-stream")]
    if cl != "none":
        headers.append(("Content-Length", cl))
    start_response("200 OK", headers)
    return [LENT]


def lent_refs(environ, start_response):
    return text(start_response, str(sys.getrefcount(LENT)))


def headers_route(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Set-Cookie", "a=1"),
                              ("Set-Cookie", "b=2"),
                              ("X-Custom", "custom value")])
    return [b"headers"]


def short_cl(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", "100")])
    return [b"only-10-b!"]


def bad_header(environ, start_response):
    """Hand start_response something PEP 3333 forbids."""
    kind = query(environ).get("kind", "crlf")
    if kind == "crlf":
        headers = [("Content-Type", "text/plain"),
                   ("X-Split", "a\r\nX-Injected: yes")]
        status = "200 OK"
    elif kind == "nonlatin1":
        headers = [("Content-Type", "text/plain"), ("X-Euro", "\u20ac")]
        status = "200 OK"
    elif kind == "bytes_status":
        headers = [("Content-Type", "text/plain")]
        status = b"200 OK"
    elif kind == "lf_in_name":
        headers = [("Content-Type", "text/plain"), ("X-A\nX-Injected", "yes")]
        status = "200 OK"
    elif kind == "space_in_name":
        headers = [("Content-Type", "text/plain"), ("X Injected", "yes")]
        status = "200 OK"
    else:
        raise ValueError(kind)
    start_response(status, headers)
    return [b"should not be sent as 200"]


def not_found(environ, start_response):
    return text(start_response, b"not found", "404 Not Found")


VALIDATED = {
    "hello": hello,
    "pid": pid,
    "environ": environ_dump,
    "echo": echo,
    "errors": errors,
    "sr_replace": sr_replace,
    "sr_after": sr_after,
    "empty_then_replace": empty_then_replace,
    "write": write_route,
    "close": closing,
    "chunks": chunks,
    "status": status,
    "slow": slow,
    "big": big,
    "headers": headers_route,
    "late_start": late_start,
    "__ready": hello,
}

UNVALIDATED = {
    # read() without size, readline(n) and readlines() are outside what
    # the validator's input wrapper accepts.
    "input": input_ops,
    # The validator would hide the file wrapper behind its own iterator,
    # and with it the sendfile path under test.
    "file": file_route,
    # Calling start_response twice without exc_info is the point.
    "sr_twice": sr_twice,
    # Deliberately broken applications.
    "raise": raising,
    "short_cl": short_cl,
    "bad_header": bad_header,
    # The validator would hide the list behind its own iterator.
    "lent": lent,
    "lent-refs": lent_refs,
}

ROUTES = {name: validator(fn) for name, fn in VALIDATED.items()}
ROUTES.update(UNVALIDATED)

_lock = threading.Lock()


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    record("call %s %s %s" % (environ.get("REQUEST_METHOD"), path,
                              environ.get("QUERY_STRING", "")))
    name = path.split("/")[1] if path.startswith("/") else ""
    return ROUTES.get(name, validator(not_found))(environ, start_response)


NOT_CALLABLE = 42
