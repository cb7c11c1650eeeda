"""The WSGI application of the drain and rolling-restart tests (and of
bench/reload.py): small routes a load generator can hit thousands of times.

  /hello          a fixed body
  /pid            the worker's pid (which generation answered)
  /slow?t=SECS    sleeps SECS (default 0.005) first, so that requests are
                  in flight whenever a signal arrives

The module refuses to import while the file named by DRAIN_BROKEN_FLAG
exists: a test starts the server with the file absent, creates it, and
sends HUP, so that every replacement worker fails to load the app.
"""

import os
import time
from urllib.parse import parse_qs

_flag = os.environ.get("DRAIN_BROKEN_FLAG")
if _flag and os.path.exists(_flag):
    raise RuntimeError("drain_app: %s exists, so this import fails" % _flag)


def _reply(start_response, body):
    body = body.encode("ascii")
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/hello":
        return _reply(start_response, "hello\n")
    if path == "/pid":
        return _reply(start_response, str(os.getpid()))
    if path == "/slow":
        qs = parse_qs(environ.get("QUERY_STRING", ""))
        t = float(qs.get("t", ["0.005"])[-1])
        time.sleep(t)
        return _reply(start_response, "slept %s pid %d" % (t, os.getpid()))
    start_response("404 Not Found", [("Content-Type", "text/plain"),
                                     ("Content-Length", "10")])
    return [b"not found\n"]
