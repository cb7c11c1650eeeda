"""WSGI app of the bench suites that do real work (io, big, upload).

Paths:
    /sleep   blocks 10 ms in time.sleep (a database or HTTP call), then
             answers the hello-world body: the io suite
    /mem     1 MiB body from memory: the big suite
    /file    the same 1 MiB from the file named by $SLUICE_BENCH_FILE
             (created by the harness in its temporary directory) through
             wsgi.file_wrapper, so a server can sendfile() it
    /echo    the request body echoed back (1 MiB uploads)
    /upload  reads the request body in 64 KiB pieces and answers the
             number of bytes read (64 MiB uploads)

The 1 MiB body is BIG below; the harness writes the same bytes to the file
and checks both bodies in its preflight.
"""

import os
import time

HELLO = b"Hello, World!"
# 1 MiB that is not one repeated byte (a server cannot get away with a
# shortcut, and a truncated or shifted body fails the preflight).
BIG = bytes(range(256)) * 4096
PIECE = 65536


def _ok(start_response, length, ctype="text/plain"):
    start_response("200 OK", [("Content-Type", ctype),
                              ("Content-Length", str(length))])


def _length(environ):
    try:
        return int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def app(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    if path == "/sleep":
        time.sleep(0.010)
        _ok(start_response, len(HELLO))
        return [HELLO]
    if path == "/mem":
        _ok(start_response, len(BIG), "application/octet-stream")
        return [BIG]
    if path == "/file":
        f = open(os.environ["SLUICE_BENCH_FILE"], "rb")
        _ok(start_response, os.fstat(f.fileno()).st_size,
            "application/octet-stream")
        wrapper = environ.get("wsgi.file_wrapper")
        if wrapper is None:  # not a server of this benchmark: plain reads
            return iter(lambda: f.read(PIECE), b"")
        return wrapper(f, PIECE)
    if path == "/echo":
        body = environ["wsgi.input"].read(_length(environ))
        _ok(start_response, len(body), "application/octet-stream")
        return [body]
    if path == "/upload":
        stream = environ["wsgi.input"]
        left = _length(environ)
        got = 0
        while left > 0:
            piece = stream.read(min(PIECE, left))
            if not piece:
                break
            got += len(piece)
            left -= len(piece)
        out = str(got).encode("ascii")
        _ok(start_response, len(out))
        return [out]
    _ok(start_response, len(HELLO))
    return [HELLO]


# uWSGI's --wsgi-file looks for "application" by default.
application = app
