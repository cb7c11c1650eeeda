"""Slow clients as an attacker sends them: slowloris and the slow reader.

Slowloris: 500 connections dribble a request head one byte at a time and
never finish it. With --header-timeout 3 each must get a 408 and be closed
near 3 s after it connected, and a fresh request sent meanwhile must be
answered at its normal speed. Fresh requests (a new connection each, one
every 10 ms, from a process of their own) are timed for 100 requests
before the attack and all through it; the bound on the p99 during the
attack is max(100 ms, 10 x the median before, 2 x the p99 before) (under
the sanitizers max(300 ms, 30 x, 3 x)). The p99 term follows the machine's
own noise: on a shared, loaded machine single requests take 40-60 ms with
or without the attack. A server that stalls under it shows up as seconds
(a request waiting for the header timeout to free a slot) or hundreds of
milliseconds.

Slow reader: a client asks for a 64 MiB response (a WSGI iterator, an ASGI
send loop) and stops reading. The worker holds at most its send credit
(SL_CONN_CREDIT, 256 KiB) plus the socket's buffer for it, so its VmRSS
grows by a few MiB at most, and the connection is cut once the client has
taken nothing for --send-timeout (2 s here). A slow reader that keeps
reading is never cut. In pump mode other clients are served meanwhile (the
WSGI server has two lanes, so one held by the stalled response leaves one);
in inline mode the app's own wait holds the loop, so they are served after
the cut.
"""

import multiprocessing
import selectors
import socket
import statistics
import time

import pytest

from conftest import EXECUTORS
from helpers import (fd_count, sanitized, settled_fds, vm_rss_kib,
                     wait_until)

APPS = {"wsgi": ("soak_app:app", []),
        "asgi": ("soak_app:asgi", ["--interface", "asgi"])}
APP_PARAMS = [pytest.param((ex, kind), id="%s-%s" % (kind, ex))
              for kind in APPS for ex in EXECUTORS]
HEADER_TIMEOUT = 3.0
SLOW_CONNS = 500
SEND_TIMEOUT = 2.0
BIG = 64 * 1024 * 1024
HELLO = b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

pytestmark = pytest.mark.sluice_only


def start(make_server, param, args, threads=1):
    executor, kind = param
    app, extra = APPS[kind]
    return make_server(app, args=extra + args,
                       threads=1 if executor == "inline" else threads,
                       inline=executor == "inline", ready_path="/hello")


def fresh_get(server, timeout=10):
    """Seconds one GET /hello on a new connection took (checked)."""
    t0 = time.monotonic()
    with socket.create_connection((server.host, server.port),
                                  timeout=timeout) as s:
        s.sendall(HELLO)
        data = b""
        while True:
            piece = s.recv(4096)
            if not piece:
                break
            data += piece
    elapsed = time.monotonic() - t0
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"hello\n"), \
        data[:200]
    return elapsed


class Prober:
    """Fresh requests, one every 10 ms, until stop() (or LIMIT of them);
    their latencies. A process of its own, so the test's other threads
    cannot hold it back (the GIL) and count as the server's latency."""

    def __init__(self, server, limit=None):
        ctx = multiprocessing.get_context("fork")
        self.limit = limit
        self.halt = ctx.Event()
        self.recv, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=self._run, args=(server, send),
                                daemon=True)

    def _run(self, server, send):
        out = []
        try:
            fresh_get(server)  # not counted: the new process's first touch
            while not self.halt.is_set() and len(out) != self.limit:
                out.append(fresh_get(server))
                self.halt.wait(0.01)  # pacing
            send.send(out)
        except BaseException as e:
            send.send("%s: %s" % (type(e).__name__, e))

    def start(self):
        self.proc.start()
        return self

    def stop(self):
        if self.limit is None:
            self.halt.set()
        assert self.recv.poll(20), "the prober hung"
        out = self.recv.recv()
        self.proc.join(5)
        assert not isinstance(out, str), "fresh request failed: " + out
        return out


def p99(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def latency_bound(before):
    median = statistics.median(before)
    if sanitized():
        return max(0.3, 30 * median, 3 * p99(before))
    return max(0.1, 10 * median, 2 * p99(before))


# ---------------------------------------------------------------- slowloris

def dribble(conns, deadline):
    """Keep CONNS dribbling one byte every 0.5 s (a tenth of them every
    50 ms) until each has an answer or its close; {conn: (seconds from its
    connect, bytes it got)}."""
    opened = {s: t for s, t in conns}
    got = {s: b"" for s in opened}
    done = {}
    sel = selectors.DefaultSelector()
    for s in opened:
        sel.register(s, selectors.EVENT_READ)
    order = list(opened)
    turn = 0
    next_byte = time.monotonic()
    while len(done) < len(opened) and time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_byte:
            for s in order[turn::10]:
                if s not in done and not got[s]:
                    try:
                        s.send(b"a")
                    except OSError:
                        pass  # closed under us: the read below sees it
            turn = (turn + 1) % 10
            next_byte = now + 0.05
        for key, _ in sel.select(max(0.0, next_byte - time.monotonic())):
            s = key.fileobj
            try:
                piece = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                piece = b""
            if piece:
                got[s] += piece
            else:
                done[s] = (time.monotonic() - opened[s], got[s])
                sel.unregister(s)
    sel.close()
    return done


@pytest.mark.parametrize("param", APP_PARAMS)
def test_slowloris_500_dribbling_heads(make_server, param):
    server = start(make_server, param,
                   ["--header-timeout", str(HEADER_TIMEOUT)])
    for _ in range(20):  # warm-up
        fresh_get(server)
    # the baseline as the attack's figure is taken: paced, from a process
    # of its own (back to back, requests find everything warm)
    before = Prober(server, limit=100).start().stop()
    baseline = statistics.median(before)
    worker = server.wait_workers(1)[0]
    base_fds = settled_fds(worker)
    conns = []
    try:
        for _ in range(SLOW_CONNS):
            s = socket.create_connection((server.host, server.port),
                                         timeout=10)
            t = time.monotonic()
            s.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\nX-Dribble: ")
            s.setblocking(False)
            conns.append((s, t))
        # the attack is on once the worker holds them all; before that a
        # fresh connection queues behind them in the listen backlog
        wait_until(lambda: fd_count(worker) >= base_fds + SLOW_CONNS, 5,
                   "the worker to accept the slow connections")
        prober = Prober(server).start()
        try:
            done = dribble(conns, time.monotonic() + 20)
        finally:
            latencies = prober.stop()
    finally:
        for s, _ in conns:
            s.close()
    wait_until(lambda: fd_count(worker) <= base_fds, 5,
               "the worker's fds to come back to %d" % base_fds)
    assert server.worker_pids() == [worker]
    assert len(done) == SLOW_CONNS, \
        "%d of %d slow connections never closed" % (SLOW_CONNS - len(done),
                                                   SLOW_CONNS)
    times = sorted(t for t, _ in done.values())
    wrong = [d[:60] for _, d in done.values()
             if not d.startswith(b"HTTP/1.1 408 ")]
    assert not wrong, "%d answers were not 408: %s" % (len(wrong), wrong[:3])
    late = 6.0 if not sanitized() else 9.0
    assert times[0] >= HEADER_TIMEOUT - 0.2 and times[-1] <= late, \
        "closed after %.2f..%.2f s (header timeout %.0f s)" % (
            times[0], times[-1], HEADER_TIMEOUT)
    bound = latency_bound(before)
    print("slowloris: before: median %.1f ms, p99 %.1f ms; during: %d "
          "requests, p99 %.1f ms, max %.1f ms (bound %.0f ms); closed after "
          "%.2f..%.2f s" % (baseline * 1e3, p99(before) * 1e3,
                            len(latencies), p99(latencies) * 1e3,
                            max(latencies) * 1e3, bound * 1e3, times[0],
                            times[-1]))
    assert len(latencies) >= 20, latencies
    assert p99(latencies) < bound, \
        "fresh requests p99 %.1f ms during the attack, baseline %.1f ms; " \
        "all (ms): %s" % (p99(latencies) * 1e3, baseline * 1e3,
                          [round(x * 1e3, 1) for x in latencies])


# ---------------------------------------------------------------- slow reader

def stalled_client(server, size, rcvbuf=16384):
    """A connection that asked for SIZE bytes and reads nothing (a small
    receive buffer, so the server's side fills fast)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect((server.host, server.port))
    s.sendall(b"GET /big?size=%d HTTP/1.1\r\nHost: x\r\n\r\n" % size)
    return s


def read_all(s):
    data = bytearray()
    try:
        while True:
            piece = s.recv(1 << 20)
            if not piece:
                break
            data += piece
    except ConnectionResetError:
        pass
    return bytes(data)


@pytest.mark.parametrize("param", APP_PARAMS)
def test_stalled_reader_is_cut_and_costs_bounded_memory(make_server, param):
    from soak_app import expected_body
    executor = param[0]
    server = start(make_server, param,
                   ["--send-timeout", str(SEND_TIMEOUT)], threads=2)
    worker = server.wait_workers(1)[0]
    with socket.create_connection((server.host, server.port)) as s:
        s.sendall(b"GET /big?size=%d HTTP/1.1\r\nHost: x\r\n"
                  b"Connection: close\r\n\r\n" % (4 << 20))
        assert len(read_all(s)) > 4 << 20  # warm-up: buffers at full size
    base_fds = settled_fds(worker)
    base_rss = vm_rss_kib(worker)
    s = stalled_client(server, BIG)
    t0 = time.monotonic()
    try:
        wait_until(lambda: fd_count(worker) > base_fds, 5,
                   "the stalled connection to be accepted")
        rss, served = [], []
        if executor == "pump":
            # other clients, meanwhile
            while fd_count(worker) > base_fds and \
                    time.monotonic() - t0 < SEND_TIMEOUT + 8:
                served.append(fresh_get(server))
                rss.append(vm_rss_kib(worker))
        wait_until(lambda: fd_count(worker) <= base_fds, SEND_TIMEOUT + 8,
                   "the stalled connection to be cut")
        cut = time.monotonic() - t0
        rss.append(vm_rss_kib(worker))
        data = read_all(s)
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head[:100]
    assert 0 < len(body) < BIG // 4, len(body)
    assert body == expected_body(len(body))
    growth = max(rss) - base_rss
    print("stalled reader: cut after %.2f s; %d bytes reached it; VmRSS "
          "%+d KiB at most; %d requests served meanwhile"
          % (cut, len(body), growth, len(served)))
    assert SEND_TIMEOUT - 0.2 <= cut <= SEND_TIMEOUT + (4 if not sanitized()
                                                       else 7), cut
    assert sanitized() or growth < 4096, growth
    if executor == "pump":
        assert served and max(served) < 1.0, served
    assert fresh_get(server) < 1.0
    assert server.worker_pids() == [worker]


def test_stalled_reader_does_not_cost_a_one_lane_worker(make_server):
    """One WSGI lane, --timeout 3: the lane writing to a stalled reader is
    freed at --send-timeout (1 s), before the supervisor would judge every
    lane stuck in a request and replace the worker (as it did before
    --send-timeout, when the lane waited for the reader forever)."""
    server = start(make_server, ("pump", "wsgi"),
                   ["--send-timeout", "1", "--timeout", "3"])
    worker = server.wait_workers(1)[0]
    base_fds = settled_fds(worker)
    t0 = time.monotonic()
    with stalled_client(server, BIG):
        wait_until(lambda: fd_count(worker) > base_fds, 5,
                   "the stalled connection to be accepted")
        served = 0
        while time.monotonic() - t0 < 5:  # past --timeout and a heartbeat
            assert fresh_get(server) < 3.0
            served += 1
            assert server.worker_pids() == [worker], \
                "the worker was replaced:\n" + server.error_log_text()
    assert served > 0
    assert "timed out" not in server.error_log_text()


@pytest.mark.parametrize("param", APP_PARAMS[:1])
def test_slow_reader_that_reads_is_not_cut(make_server, param):
    """Taking 64 KiB every 0.25 s for longer than --send-timeout 1 is
    slow, not stalled: the whole response arrives."""
    from soak_app import expected_body
    server = start(make_server, param, ["--send-timeout", "1"])
    size = 2 << 20
    s = stalled_client(server, size, rcvbuf=65536)
    data = bytearray()
    t0 = time.monotonic()
    with s:
        while True:
            piece = s.recv(65536)
            if not piece:
                break
            data += piece
            if data.find(b"\r\n\r\n") >= 0 and \
                    len(data) - data.find(b"\r\n\r\n") - 4 >= size:
                break
            time.sleep(0.25 if time.monotonic() - t0 < 2.5 else 0)  # pacing
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert len(body) == size and body == expected_body(size)
    assert time.monotonic() - t0 >= 2.0
