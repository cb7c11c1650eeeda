"""Memory per idle keep-alive connection in the worker (issue 12).

One worker holds N keep-alive connections that have each made one request
(and, in the second variant, N that have sent nothing yet); the worker's
VmRSS before and after, divided by N, must stay at or under 1 KiB. The
connection pool is allocated at start-up and touched then, so what this
measures is what a connection holds beyond its pool entry: read, head,
body and output buffers, and the header array. The pool entry itself
(sizeof(sl_conn_t)) is bounded by the unit suite (test_conn_bufs), and the
kernel's socket buffers are not the worker's memory and not counted.

Under the sanitizers (ASan's quarantine and redzones) the figure is
printed, not bounded.
"""

import socket

import pytest

from helpers import (build_request, sanitized, vm_rss_kib, wait_until)

N = 1000
LIMIT_BYTES = 1024
APPS = {"wsgi": ("wsgi_app:app", []),
        "asgi": ("asgi_app:app", ["--interface", "asgi"])}


def open_conns(server, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection((server.host, server.port), timeout=10)
        socks.append(s)
    return socks


def read_response(s):
    """Read one small response whole (Content-Length or chunked), so the
    connection is idle after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, "connection closed before a response"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    lower = head.lower()
    if b"content-length:" in lower:
        n = int(lower.split(b"content-length:")[1].split(b"\r\n")[0])
        while len(rest) < n:
            chunk = s.recv(65536)
            assert chunk
            rest += chunk
    else:
        while not rest.endswith(b"0\r\n\r\n"):
            chunk = s.recv(65536)
            assert chunk
            rest += chunk


def settled_rss(pid):
    """The worker's VmRSS (KiB) once two reads in a row agree: the loop
    has finished with what the last batch of connections sent."""
    last = [None]

    def same():
        v = vm_rss_kib(pid)
        ok = v == last[0]
        last[0] = v
        return ok

    wait_until(same, 10, "the worker's RSS to settle", interval=0.05)
    return last[0]


def measure(server, used):
    worker = server.wait_workers(1)[0]
    # warm up: the first requests import, allocate the environ/scope and
    # fill the buffer cache; those are not per connection
    warm = open_conns(server, 20)
    for s in warm:
        s.sendall(build_request("GET", "/hello"))
    for s in warm:
        read_response(s)
    for s in warm:
        s.close()
    before = settled_rss(worker)
    socks = open_conns(server, N)
    try:
        if used:
            # one at a time: what is measured is what an idle connection
            # keeps, not the peak of 1,000 requests in flight at once
            for s in socks:
                s.sendall(build_request("GET", "/hello"))
                read_response(s)
        else:
            # the worker has accepted them all when it answers one more
            with server.connect() as c:
                assert c.request("GET", "/hello").status == 200
        after = settled_rss(worker)
        # all still open: the server kept them alive
        for s in socks[:: N // 10]:
            s.sendall(build_request("GET", "/hello"))
            read_response(s)
    finally:
        for s in socks:
            s.close()
    return (after - before) * 1024 / N


@pytest.mark.sluice_only
@pytest.mark.parametrize("used", [True, False], ids=["one-request", "silent"])
@pytest.mark.parametrize("kind", sorted(APPS))
def test_idle_connection_memory(make_server, inline, kind, used):
    app, args = APPS[kind]
    server = make_server(app, inline=inline,
                         args=args + ["--worker-connections", str(N + 100),
                                      "--keep-alive", "60",
                                      "--header-timeout", "60"])
    per = measure(server, used)
    print("%s %s %s: worker VmRSS grew %.0f bytes per idle connection "
          "(%d connections)" % (kind, "inline" if inline else "pump",
                                "after one request" if used else "silent",
                                per, N))
    if sanitized():
        return
    assert per <= LIMIT_BYTES, \
        "%.0f bytes of worker memory per idle connection (limit %d)" % (
            per, LIMIT_BYTES)
