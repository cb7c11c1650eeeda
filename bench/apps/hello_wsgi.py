"""Hello-world WSGI app used by every arm of the WSGI benchmark suite.

Kept minimal on purpose: the benchmark measures the server, not the app.
"""

BODY = b"Hello, World!"
HEADERS = [
    ("Content-Type", "text/plain"),
    ("Content-Length", str(len(BODY))),
]


def app(environ, start_response):
    start_response("200 OK", HEADERS)
    return [BODY]


# uWSGI's --wsgi-file looks for "application" by default.
application = app
