"""bench/rateload.c, the fixed-rate client of bench/rate.py.

The coordinated-omission check: sluice serves tests/apps/drain_app.py's
/slow?t=0.05 with one lane, so at most 20 requests a second. rateload at 40
a second for 2 s must show the queue that builds up (latency measured from
each request's intended send time grows with the run: p50 about 1 s, p99
about 2 s), while a closed loop against the same server sees only ~4 × 50
ms and a rate of 10 a second sees no queue. The checks are bench/rate.py's
co_check(), also run by `bench/rate.py --selfcheck`. About 8 s.

The response parser: a raw socket server answers each request with fixed
bytes — Content-Length, chunked with extensions and trailers, a body that
runs to the close, Connection: close, an interim 100 before a 204, an error
status, garbage — written in one piece or a byte at a time, and rateload
must find the end of every response and count what it must count.
"""

import socket
import socketserver
import sys
import threading

import pytest

from helpers import REPO

if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

import rate  # noqa: E402

RATE, SECONDS = 100, 0.3
N = round(RATE * SECONDS)  # requests due in the measured window

CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n")
# path: (response bytes, close after it, write a byte at a time)
RESPONSES = {
    "/len": (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", False,
             False),
    "/len-split": (b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
                   False, True),
    "/chunked": (CHUNKED, False, False),
    "/chunked-split": (CHUNKED, False, True),
    "/close": (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
               b"Connection: close\r\n\r\nok", True, False),
    "/eof": (b"HTTP/1.0 200 OK\r\n\r\nthe body runs to the close", True,
             True),
    "/continue": (b"HTTP/1.1 100 Continue\r\n\r\n"
                  b"HTTP/1.1 204 No Content\r\n\r\n", False, False),
    "/error": (b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n", False,
               False),
    "/garbage": (b"FOO BAR\r\n\r\n", True, False),
}


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = sock.recv(4096)
                if not data:
                    return
                buf += data
            head, buf = buf.split(b"\r\n\r\n", 1)
            path = head.split(b" ")[1].decode()
            body, close, split = RESPONSES[path]
            if split:
                for i in range(len(body)):
                    sock.sendall(body[i:i + 1])
            else:
                sock.sendall(body)
            if close:
                return


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture(scope="module")
def rateload(tmp_path_factory):
    return rate.build_rateload(tmp_path_factory.mktemp("rateload") /
                               "rateload")


@pytest.fixture(scope="module")
def raw_server():
    srv = Server(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(10)


# path: (errors that must be counted, whether connections get replaced)
EXPECT = {
    "/len": ({}, False),
    "/len-split": ({}, False),
    "/chunked": ({}, False),
    "/chunked-split": ({}, False),
    "/close": ({}, True),
    "/eof": ({}, True),
    "/continue": ({}, False),
    "/error": ({"status": N}, False),
    "/garbage": ({"parse": N}, True),
}


@pytest.mark.parametrize("path", sorted(EXPECT))
def test_rateload_finds_the_end_of_each_response(rateload, raw_server, path):
    r = rate.run_rateload(rate.rateload_argv(raw_server, path, 2, RATE,
                                             SECONDS, 0, binary=rateload))
    assert "error" not in r, r
    errors, reconnects = EXPECT[path]
    assert r["sent"] == N, r
    # a response that is garbage is not completed: its connection is lost
    assert r["completed"] == (0 if "parse" in errors else N), r
    assert {k: v for k, v in r["errors"].items() if v} == errors, r
    assert r["unsent"] == 0 and r["warmup_timeouts"] == 0, r
    assert (r["reconnects"] >= N) if reconnects else (r["reconnects"] == 0), r
    if "parse" not in errors:
        # nothing waited for a timeout: every answer was seen at once
        assert r["latency_us"]["max"] < 1e6, r


@pytest.mark.sluice_only
def test_rateload_charges_queueing_to_every_request(make_server, rateload):
    server = make_server("drain_app:app", threads=1, ready_path="/hello")
    verdicts, runs = rate.co_check(server.port, binary=rateload)
    failed = ["%s: %s" % (name, detail) for name, ok, detail in verdicts
              if not ok]
    assert not failed, "%s\nruns: %s" % ("\n".join(failed), runs)
    # every check ran (a run that failed to start reports one verdict)
    assert len(verdicts) == 6
