"""A plain WSGI app that serves files, no framework (bench/static.py's
`sluice-wsgi-file` arm): the cheapest way to send a file through a
server's app path, to set beside WhiteNoise's and sluice's --static.

GET /static/NAME answers the file NAME of the folder named by
$SLUICE_BENCH_STATIC (one level, no subfolders: a name with a '/' or
starting with '.' is a 404) through wsgi.file_wrapper, so a server that
offers sendfile() uses it. Per request: an open() and an fstat(), as a
careful app does; the headers are Content-Type (application/octet-stream),
Content-Length and Last-Modified. Anything else gets the hello-world body.
"""

import os
from email.utils import formatdate

ROOT = os.environ["SLUICE_BENCH_STATIC"]
PREFIX = "/static/"
HELLO = b"Hello, World!"


def _not_found(start_response):
    start_response("404 Not Found", [("Content-Type", "text/plain"),
                                     ("Content-Length", "9")])
    return [b"not found"]


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if not path.startswith(PREFIX):
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  ("Content-Length", str(len(HELLO)))])
        return [HELLO]
    name = path[len(PREFIX):]
    if not name or "/" in name or name.startswith("."):
        return _not_found(start_response)
    try:
        f = open(os.path.join(ROOT, name), "rb")
    except OSError:
        return _not_found(start_response)
    st = os.fstat(f.fileno())
    start_response("200 OK", [
        ("Content-Type", "application/octet-stream"),
        ("Content-Length", str(st.st_size)),
        ("Last-Modified", formatdate(st.st_mtime, usegmt=True)),
    ])
    wrapper = environ.get("wsgi.file_wrapper")
    if wrapper is not None:
        return wrapper(f, 65536)
    return iter(lambda: f.read(65536), b"")  # closed when collected
