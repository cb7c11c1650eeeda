"""WebSockets across deploys (issue 10, "Deploys and limits"), with raw
clients (ws_helpers.WsRaw) so that every byte before the EOF is seen:

- SIGTERM: after --shutdown-delay each open WebSocket gets a close frame
  1001, not before; the app sees websocket.disconnect 1001 and still
  finishes its work (tests/apps/ws_extra_app.py /drain records it); the
  supervisor exits 0.
- HUP (rolling restart): the old worker's WebSockets get 1012; a client
  that reconnects reaches the new worker (its pid, from the app).
- No WebSocket is reset or cut without a close frame in either case.

Pump and inline mode. sluice-only: skipped on SLUICE_WS_TARGET=uvicorn*.
"""

import os
import signal
import time

import pytest

import helpers
from conftest import ASGI_EXECUTOR_PARAMS, mode_kwargs
from helpers import wait_until
from ws_helpers import OP_TEXT, WsClosed, WsRaw, WsServer, sluice_ws_only

pytestmark = sluice_ws_only

DELAY = 0.6   # --shutdown-delay
GRACE = 5.0   # --graceful-timeout
N_SOCKETS = 20


@pytest.fixture
def make_ws(tmp_path):
    started = []

    def make(mode, args=(), workers=1):
        s = WsServer(tmp_path / ("srv%d" % len(started)), "ws_extra_app:app",
                     workers=workers, **mode_kwargs(mode, args))
        started.append(s)
        return s.start()

    yield make
    problems = []
    for s in started:
        for p in s.stop():
            problems.append(p + "\n" + s.diagnostics())
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def open_many(s, path, n):
    """N raw clients on PATH, each past its first message; (client,
    first message text)."""
    out = []
    for i in range(n):
        c = WsRaw.to(s, path.replace("MARK", "m%d" % i))
        assert c.status == 101, (c.status, c.body)
        op, payload, _ = c.recv_message()
        assert op == OP_TEXT
        out.append((c, payload.decode()))
    return out


def close_frame_then_eof(c, what):
    """The close frame's code, after answering it; fails if the connection
    ends (EOF or reset) before a close frame, or is reset after it."""
    try:
        code, _ = c.recv_close(answer_pings=True)
    except WsClosed as e:
        raise AssertionError("%s: connection ended without a close frame "
                             "(%s)" % (what, e))
    c.send_close(code)
    assert c.expect_eof() == "eof", "%s: reset after the close" % what
    return code


@pytest.mark.parametrize("mode", ASGI_EXECUTOR_PARAMS)
def test_sigterm_closes_1001_after_shutdown_delay(make_ws, mode):
    s = make_ws(mode, ["--shutdown-delay", str(DELAY),
                       "--graceful-timeout", str(GRACE)])
    clients = open_many(s, "/drain?m=MARK", N_SOCKETS)
    assert all(first == "ready" for _, first in clients)
    t0 = time.monotonic()
    os.kill(s.pid, signal.SIGTERM)
    for i, (c, _) in enumerate(clients):
        with c:
            c.sock.settimeout(DELAY + GRACE)
            assert close_frame_then_eof(c, "socket %d" % i) == 1001
            if i == 0:
                waited = time.monotonic() - t0
                assert waited >= DELAY - 0.05, \
                    "closed %.2fs after TERM, before --shutdown-delay" % waited
    # the app was told, and had time to finish
    for i in range(N_SOCKETS):
        line = s.wait_for_call("DRAIN m%d disconnect" % i)[0]
        assert line == "DRAIN m%d disconnect 1001" % i, line
        s.wait_for_call("DRAIN m%d send-after" % i)
        s.wait_for_call("DRAIN m%d finished" % i, timeout=GRACE)
    assert s.proc.wait(GRACE + 5) == 0, s.diagnostics()


@pytest.mark.parametrize("mode", ASGI_EXECUTOR_PARAMS)
def test_hup_closes_1012_and_reconnect_reaches_new_worker(make_ws, mode):
    s = make_ws(mode, ["--graceful-timeout", str(GRACE)])
    old = s.wait_workers(1)[0]
    clients = open_many(s, "/pid", N_SOCKETS)
    assert {int(first) for _, first in clients} == {old}
    os.kill(s.pid, signal.SIGHUP)
    for i, (c, _) in enumerate(clients):
        with c:
            c.sock.settimeout(GRACE + 5)
            assert close_frame_then_eof(c, "socket %d" % i) == 1012
    # reconnecting reaches the new generation
    def new_pid():
        try:
            with WsRaw.to(s, "/pid", timeout=2) as c:
                if c.status != 101:
                    return None
                pid = int(c.recv_message()[1])
                c.send_close(1000)
                return pid if pid != old else None
        except (OSError, WsClosed):
            return None
    new = wait_until(new_pid, 10, "a WebSocket served by a new worker")
    assert new in s.worker_pids()
    helpers.wait_gone([old], GRACE + 5, "the old worker to exit")
    # and it serves
    with WsRaw.to(s, "/echo") as c:
        c.send_text("after hup")
        assert c.recv_message()[1] == b"after hup"


@pytest.mark.parametrize("mode", ASGI_EXECUTOR_PARAMS)
def test_hup_with_busy_sockets_none_reset(make_ws, mode):
    # sockets in the middle of traffic when HUP lands: each ends with a
    # close frame 1012, none with a bare EOF or a reset
    s = make_ws(mode, ["--graceful-timeout", str(GRACE)], workers=2)
    s.wait_workers(2)
    clients = open_many(s, "/pid", N_SOCKETS)
    for c, _ in clients:
        c.send_text("x" * 1000)
    os.kill(s.pid, signal.SIGHUP)
    codes = []
    for i, (c, _) in enumerate(clients):
        with c:
            c.sock.settimeout(GRACE + 5)
            codes.append(close_frame_then_eof(c, "socket %d" % i))
    assert codes == [1012] * N_SOCKETS
