"""hello.py - the smallest useful WSGI application (PEP 3333).

Serve it with:  ./sluice --chdir contrib/example hello:app
"""


def app(environ, start_response):
    body = b"Hello from sluice!\n"
    start_response(
        "200 OK",
        [("Content-Type", "text/plain; charset=utf-8"),
         ("Content-Length", str(len(body)))],
    )
    return [body]
