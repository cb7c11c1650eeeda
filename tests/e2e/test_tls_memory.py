"""Memory per idle TLS keep-alive connection in the worker (issue 28).

One worker holds N keep-alive TLS connections that have each made one
request; its VmRSS before and after, divided by N, is what an idle TLS
connection costs. The SSL object and its session stay (they are the
connection); OpenSSL's read and write buffers must not: the context
releases them when a connection has nothing in flight
(SSL_MODE_RELEASE_BUFFERS, worker/loop/tlsctx.c), and the transport keeps
no buffer of its own (worker/loop/tls.c). With them kept, a connection
would hold some 34 KiB more (a 16 KiB record each way and their
headroom), so the bound below tells the two apart.

Unlike test_idle_memory.py, the warm-up is a few connections, not N: N
TLS connections opened and closed would leave the heap holding N freed
SSL objects for the measured ones to take again, and hide what they cost.
So the figure includes setting up the connection's pool entry on its
first use; the same measure over plain TCP, printed beside it, is that
part. Under the sanitizers the figures are printed, not bounded.
"""

import socket
import ssl

import pytest

import helpers
from helpers import (build_request, fd_count, read_response, sanitized,
                     settled_fds, settled_rss, wait_until)
from tls_helpers import TLSServer, served

pytestmark = pytest.mark.sluice_only

N = 1000
# what an SSL object and its session come to with the buffers released,
# with room; a connection that kept its buffers is well over it
LIMIT_BYTES = 20 * 1024


def open_conns(server, n, ctx):
    socks = []
    for _ in range(n):
        s = socket.create_connection((server.host, server.port), timeout=10)
        socks.append(ctx.wrap_socket(s, server_hostname="localhost")
                     if ctx else s)
    return socks


def one_request(s):
    s.sendall(build_request("GET", "/hello"))
    return read_response(s)


def measure(server, ctx):
    """Bytes of worker VmRSS per connection held idle after one request."""
    worker = server.wait_workers(1)[0]
    base_fds = settled_fds(worker)
    warm = open_conns(server, 20, ctx)
    try:
        for s in warm:
            one_request(s)
    finally:
        for s in warm:
            s.close()
    wait_until(lambda: fd_count(worker) <= base_fds, 10,
               "the worker to close the warm-up connections")
    before = settled_rss(worker)
    socks = open_conns(server, N, ctx)
    try:
        for s in socks:
            one_request(s)
        after = settled_rss(worker)
        for s in socks[:: N // 10]:  # all still open: kept alive
            one_request(s)
    finally:
        for s in socks:
            s.close()
    return (after - before) * 1024 / N


ARGS = ["--worker-connections", str(N + 100), "--keep-alive", "60",
        "--header-timeout", "60"]


@pytest.mark.parametrize("version", ["TLSv1_3", "TLSv1_2"])
def test_idle_tls_connection_memory(tmp_path, pki, inline, version):
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    ctx.minimum_version = ctx.maximum_version = getattr(ssl.TLSVersion,
                                                        version)
    s = TLSServer(tmp_path / "tls", pki, inline=inline, args=ARGS)
    with served(s):
        per = measure(s, ctx)
    plain = helpers.Server(tmp_path / "plain", inline=inline, args=ARGS)
    with served(plain):
        per_plain = measure(plain, None)
    print("%s %s: worker VmRSS grew %.0f bytes per idle TLS connection, "
          "%.0f per plain one (%d connections, one request each)"
          % (version, "inline" if inline else "pump", per, per_plain, N))
    if sanitized():
        return
    assert per <= LIMIT_BYTES, \
        "%.0f bytes of worker memory per idle TLS connection (limit %d)" % (
            per, LIMIT_BYTES)
