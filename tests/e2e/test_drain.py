"""Drain and rolling restarts that drop nothing (issue 4; docs/architecture.md,
"The drain" and "Rolling restart").

Worker side, in pump mode, inline mode and pump mode with four lanes:

- a request sleeping 1.5 s when SIGTERM reaches the worker (sent to the
  worker itself, or to the supervisor of one worker) is answered at 1.5 s
  with "Connection: close", and the worker exits right after (0 when clean);
- a request that outlives --graceful-timeout (2 s) is logged with its method
  and path, and the worker exits at 2 s, non-zero;
- --health-path says 200 while serving and 503 from the moment TERM arrives,
  already during --shutdown-delay, while other requests are still served;
  but 200 from a worker stopped by a rolling restart (HUP): the host stays;
- an idle keep-alive connection is closed at once on TERM; a request that is
  on the wire of a keep-alive connection when TERM arrives is answered, with
  "Connection: close".

Supervisor side, under load (helpers.Load: 64 threads speaking raw HTTP,
keep-alive and fresh connections mixed, every failure counted and kept for
the message):

- five SIGHUPs to a two-worker supervisor: every worker pid replaced each
  time, not one request failed, not one connection refused or reset;
- SIGTERM to a socket-activated supervisor (systemd-socket-activate): every
  request that got a connection is answered; refusals after the listening
  socket is gone are counted apart and allowed;
- a rolling restart whose replacement fails to import the app is abandoned
  and the old workers serve on, without a failed request.

Timings are measured from the moment the request is sent (the server has
answered a request before, so start-up is not measured); processes are
watched through /proc with short polls, never fixed sleeps.
"""

import os
import re
import signal
import time

import pytest

import helpers
from conftest import WSGI_MODE_PARAMS, WSGI_MODES
from helpers import HTTPError, Load, PeerClosed, build_request, wait_until

pytestmark = pytest.mark.sluice_only

# The bars once more with --preload (issue 30): the same pump worker, forked
# by its generation's zygote rather than exec'd.
PRELOAD = pytest.param(dict(WSGI_MODES["pump"], name="pump-preload",
                            args=["--preload"]), id="pump-preload")
DRAIN_MODES = WSGI_MODE_PARAMS + [PRELOAD]

SLOW = 1.5           # seconds the in-flight request sleeps
SLOW_TOL = 0.1       # ... and how far off its answer may be
EXIT_AFTER = 0.2     # a clean worker exits this soon after its last response
GRACE = 2.0          # --graceful-timeout of the forced-drain tests
GRACE_TOL = 0.2


# ------------------------------------------------------------------ helpers

def wait_exit(pid, timeout, what="the worker"):
    """Poll until PID is gone or a zombie; the monotonic time it was seen."""
    return helpers.wait_gone([pid], timeout, "%s (pid %d) to exit"
                             % (what, pid), interval=0.002)


def only_worker(s):
    pids = s.wait_workers(1)
    return pids[0]


def worker_exit_line(s, pid, timeout=5):
    """The supervisor's log line about PID's exit: (line, exit code or None
    when it was killed by a signal)."""
    pat = re.compile(r"Worker \d+ \(pid %d\) (exited with code (\d+)|"
                     r"was killed by signal \d+)[^\n]*" % pid)

    def find():
        return pat.search(s.error_log_text())
    m = wait_until(find, timeout, "the supervisor to log pid %d's exit" % pid)
    return m.group(0), (int(m.group(2)) if m.group(2) is not None else None)


def send_slow(s, t, tag):
    """Open a connection and send GET /slow?t=T; (conn, send time) once the
    application has started on it."""
    c = s.connect()
    t0 = time.monotonic()
    c.send(build_request("GET", "/slow?t=%s&tag=%s" % (t, tag)))
    s.wait_for_call("tag=%s" % tag, timeout=5)
    return c, t0


def keep_alive_conn(s):
    """A connection that has been answered once and is kept alive."""
    c = s.connect()
    r = c.request("GET", "/hello")
    assert r.status == 200 and not r.has_token("Connection", "close"), r
    return c


# ------------------------------------------------------------ 1. clean drain

@pytest.mark.parametrize("mode", DRAIN_MODES)
@pytest.mark.parametrize("target", ["worker", "supervisor"])
def test_in_flight_request_answered_on_time_then_exit(make_server, mode,
                                                      target):
    s = make_server(mode=mode)
    wpid = only_worker(s)
    mark = s.log_mark()
    c, t0 = send_slow(s, SLOW, "bar1")
    os.kill(wpid if target == "worker" else s.pid, signal.SIGTERM)
    with c:
        r = c.read_response()
        answered = time.monotonic() - t0
        exited = wait_exit(wpid, 10) - t0
        rest = c.read_until_eof(timeout=2)
    line, code = worker_exit_line(s, wpid)
    if target == "supervisor":
        rc = s.proc.wait(5)
    problems = []
    if not (r.status == 200 and r.body.startswith(b"slept 1.5")):
        problems.append("response %r %r" % (r, r.body))
    if not r.has_token("Connection", "close"):
        problems.append("the response in flight at TERM has no "
                        "Connection: close: %r" % r)
    if rest:
        problems.append("bytes after the response: %r" % rest[:300])
    if abs(answered - SLOW) > SLOW_TOL:
        problems.append("answered at %.3fs, not %.1fs" % (answered, SLOW))
    if exited - answered > EXIT_AFTER:
        problems.append("answered at %.3fs, the worker exited at %.3fs" % (
            answered, exited))
    if code != 0:
        problems.append("worker exit: %s" % line)
    if target == "supervisor" and rc != 0:
        problems.append("supervisor exited with status %s" % rc)
    assert not problems, "\n".join(problems) + "\n--- log after TERM:\n" + \
        s.log_since(mark)


# ----------------------------------------------------------- 2. forced drain

@pytest.mark.parametrize("mode", DRAIN_MODES)
@pytest.mark.parametrize("target", ["worker", "supervisor"])
def test_graceful_timeout_cuts_the_drain(make_server, mode, target):
    s = make_server(mode=mode, args=["--graceful-timeout", str(GRACE)])
    wpid = only_worker(s)
    c, _ = send_slow(s, 30, "bar2")
    mark = s.log_mark()
    t_term = time.monotonic()
    os.kill(wpid if target == "worker" else s.pid, signal.SIGTERM)
    with c:
        # The supervisor's own deadline is a little past GRACE: wait for
        # that much, so that a worker that never drains shows as such.
        try:
            exited = wait_exit(wpid, GRACE + 5) - t_term
        except AssertionError:
            # Never drained (nor killed): end it here, or the server's
            # stop would count the kill a second time.
            exited = None
            os.kill(wpid, signal.SIGKILL)
            wait_exit(wpid, 5)
        try:
            r = c.read_response()
        except PeerClosed as e:
            r = e
    if target == "worker":
        line, code = worker_exit_line(s, wpid)
    else:
        rc = s.proc.wait(5)
    log = s.log_since(mark)
    problems = []
    if isinstance(r, PeerClosed):
        if r.data:
            problems.append("half a response: %r" % r.data[:300])
    elif r.status == 200:
        problems.append("the abandoned request was answered 200: %r" % r)
    if exited is None:
        problems.append("the worker was still running %.1fs after TERM "
                        "(killed by the test)" % (GRACE + 5))
    elif abs(exited - GRACE) > GRACE_TOL:
        problems.append("the worker exited %.3fs after TERM, "
                        "--graceful-timeout %.1f" % (exited, GRACE))
    if not re.search(r"GET /slow\b", log):
        problems.append("the request still running is not logged with its "
                        "method and path")
    if target == "worker" and not code:
        problems.append("a forced drain must end in a non-zero exit of the "
                        "worker's own: %s" % line)
    if target == "supervisor" and rc == 0:
        problems.append("the supervisor exited 0 after a forced drain")
    assert not problems, "\n".join(problems) + "\n--- log after TERM:\n" + \
        log


# ------------------------------------------------------------------ health

@pytest.mark.parametrize("mode", WSGI_MODE_PARAMS)
def test_health_path_503_from_term_through_shutdown_delay(make_server, mode):
    delay = 1.0
    s = make_server(mode=mode, args=["--health-path", "/healthz",
                                       "--shutdown-delay", str(delay)])
    wpid = only_worker(s)
    r = s.get("/healthz")
    assert r.status == 200, r
    ka = s.connect()
    r = ka.request("GET", "/healthz")
    assert r.status == 200 and not r.has_token("Connection", "close"), r

    mark = s.log_mark()
    t_term = time.monotonic()
    os.kill(wpid, signal.SIGTERM)
    seen = []

    def says_503():
        seen.append(s.get("/healthz").status)
        return seen[-1] == 503
    wait_until(says_503, 0.2, "/healthz to say 503 after TERM", interval=0)
    assert set(seen) <= {200, 503}, seen
    with ka:
        r = ka.request("GET", "/healthz")
        assert r.status == 503, \
            "/healthz on a kept-alive connection after TERM: %r" % r
        # Still serving: the delay has not run out.
        r = s.get("/hello")
        during = time.monotonic() - t_term
        assert r.status == 200, r
        assert during < delay, "took %.2fs to check the delay" % during
        assert s.get("/healthz").status == 503
        exited = wait_exit(wpid, delay + 10) - t_term
    log = s.log_since(mark)
    # after the delay: prepare, 0.1 s of idle grace for the kept-alive
    # connection, a step. Not one of the bars; the slack is for an
    # ASan build on a busy machine (1.48 s was seen once with 0.3).
    assert delay <= exited <= delay + 0.6, \
        "worker exited %.3fs after TERM with --shutdown-delay %.1f\n%s" % (
            exited, delay, log)
    assert not s.called("/healthz"), "the health path reached the app"
    line, code = worker_exit_line(s, wpid)
    assert code == 0, line


@pytest.mark.parametrize("mode", WSGI_MODE_PARAMS)
def test_health_path_200_through_a_restarts_shutdown_delay(make_server, mode):
    """HUP: the old worker's --shutdown-delay is no reason for a load
    balancer to take the host out (its replacement is READY on the same
    socket), so /healthz says 200 even on a connection the old worker
    holds; a fleet-wide HUP took every host out of HAProxy before."""
    delay = 1.0
    s = make_server(mode=mode, args=["--health-path", "/healthz",
                                       "--shutdown-delay", str(delay)])
    old = only_worker(s)
    ka = s.connect()
    r = ka.request("GET", "/healthz")
    assert r.status == 200 and not r.has_token("Connection", "close"), r
    mark = s.log_mark()
    os.kill(s.pid, signal.SIGHUP)
    s.wait_for_log("TERM: serving", timeout=20, since=mark)
    t_term = time.monotonic()
    with ka:
        r = ka.request("GET", "/healthz")
        during = time.monotonic() - t_term
        assert r.status == 200, \
            "/healthz from the old worker in a restart's delay: %r" % r
    assert during < delay, "took %.2fs to check the delay" % during
    assert helpers.alive(old), "the old worker was gone already"
    wait_exit(old, delay + 10)
    assert s.get("/healthz").status == 200


# -------------------------------------------------------------- keep-alive

@pytest.mark.parametrize("mode", WSGI_MODE_PARAMS)
def test_idle_keep_alive_closed_promptly(make_server, mode):
    s = make_server(mode=mode)
    wpid = only_worker(s)
    idle = keep_alive_conn(s)
    busy = None
    if not mode["inline"]:
        # The worker has a reason to stay: the idle close is the drain's
        # doing, not the exit's. (Inline mode runs the app on the loop
        # thread, which sees TERM only once the app returns.)
        busy, _ = send_slow(s, SLOW, "ka-busy")
    t_term = time.monotonic()
    os.kill(wpid, signal.SIGTERM)
    with idle:
        rest = idle.read_until_eof(timeout=2)
        closed = time.monotonic() - t_term
    assert rest == b"", "bytes on an idle connection: %r" % rest[:300]
    assert closed < 0.3, "idle keep-alive connection closed %.3fs after " \
        "TERM" % closed
    if busy is not None:
        with busy:
            assert helpers.alive(wpid), \
                "the worker exited with a request in flight"
            r = busy.read_response()
            assert r.status == 200 and r.has_token("Connection", "close"), r
    wait_exit(wpid, 10)
    line, code = worker_exit_line(s, wpid)
    assert code == 0, line


FRESH_GRACE = 1.0  # conn.h's SL_CONN_FRESH_GRACE


@pytest.mark.parametrize("mode", WSGI_MODE_PARAMS)
def test_new_connection_gets_a_grace_for_its_first_request(make_server,
                                                            mode):
    """A connection accepted before TERM that has not sent its request
    yet is not an idle keep-alive one: its client would not retry on a
    new connection that closes. Its request, sent 0.5 s into the drain
    (past the 0.1 s an idle keep-alive connection gets), is answered; a
    second new connection that stays silent is closed about FRESH_GRACE
    after TERM, and the worker exits then."""
    s = make_server(mode=mode)
    wpid = only_worker(s)
    late, silent = s.connect(), s.connect()
    # both accepted (and over TLS, past the handshake) before TERM: the
    # worker has answered a request on a third connection opened after
    with s.connect() as c:
        assert c.request("GET", "/hello").status == 200
    mark = s.log_mark()
    t_term = time.monotonic()
    os.kill(wpid, signal.SIGTERM)
    s.wait_for_log("draining", since=mark)
    # into the drain, past the idle grace: the time under test
    time.sleep(0.5)
    with late, silent:
        late.send(build_request("GET", "/hello"))
        r = late.read_response()
        assert r.status == 200 and r.has_token("Connection", "close"), r
        assert silent.read_until_eof(timeout=3) == b""
        closed = time.monotonic() - t_term
    assert FRESH_GRACE - 0.1 <= closed < FRESH_GRACE + 0.6, \
        "a silent new connection closed %.2fs after TERM" % closed
    wait_exit(wpid, 10)
    line, code = worker_exit_line(s, wpid)
    assert code == 0, line


@pytest.mark.parametrize("mode", WSGI_MODE_PARAMS)
def test_request_on_the_wire_at_term_is_answered(make_server, mode):
    s = make_server(mode=mode)
    wpid = only_worker(s)
    ka = keep_alive_conn(s)
    # A keeps the worker (and in pump mode its one lane, in inline mode its
    # loop thread) busy, so the request on KA is still waiting when TERM
    # arrives; its bytes are sent before the signal.
    a, _ = send_slow(s, 0.5, "wire-a")
    with ka, a:
        ka.send(build_request("GET", "/slow?t=0.2&tag=wire-b"))
        os.kill(wpid, signal.SIGTERM)
        try:
            r = ka.read_response()
        except HTTPError as e:
            raise AssertionError("request sent on a keep-alive connection "
                                 "just before TERM was not answered: %s\n%s"
                                 % (e, s.error_log_text()[-2000:]))
        assert r.status == 200 and r.body.startswith(b"slept 0.2"), r
        assert r.has_token("Connection", "close"), r
        ka.expect_eof(2)
        r = a.read_response()
        assert r.status == 200 and r.has_token("Connection", "close"), r
    wait_exit(wpid, 10)
    line, code = worker_exit_line(s, wpid)
    assert code == 0, line


# ------------------------------------------------------------------ load

# Paced clients (64 threads, a request every 10-30 ms each), keep-alive and
# fresh connections mixed, on drain_app's small routes.
LOAD_MIX = ("/pid", "/pid", "/hello", "/slow?t=0.005")


def drain_load(s):
    return Load(s, LOAD_MIX, conns=64, keep_alive="mixed", order="random",
                pace=(0.01, 0.03))


def all_ready(s, n, since=0, timeout=20):
    s.wait_for_log("All %d workers are ready" % n, timeout, since)
    return set(s.wait_workers(n))


def hup_and_wait(s, old, load, timeout=30):
    """HUP the supervisor; wait for the rolling restart to finish and every
    old worker to be gone; the new set of worker pids."""
    mark = s.log_mark()
    load.event("HUP")
    os.kill(s.pid, signal.SIGHUP)
    s.wait_for_log("Rolling restart done", timeout, mark)
    load.event("restart done")

    def replaced():
        pids = set(s.worker_pids())
        return len(pids) == len(old) and not pids & old and pids
    new = wait_until(replaced, timeout,
                     "every worker of %s to be replaced" % sorted(old))
    load.event("old workers gone")
    return new


@pytest.mark.parametrize("preload", [False, True],
                         ids=["exec", "preload"])
def test_rolling_restarts_under_load_drop_nothing(make_server, tmp_path,
                                                  preload):
    s = make_server("drain_app:app", workers=2, ready_path="/hello",
                    args=["--preload"] if preload else [])
    pids = all_ready(s, 2)
    history = [sorted(pids)]
    with drain_load(s) as load:
        load.wait_answers(pids, 200)
        for i in range(5):
            new = hup_and_wait(s, pids, load)
            history.append(sorted(new))
            # The new generation carries the load a while before the next
            # HUP (about a second at this load).
            load.wait_answers(new, 1000)
            pids = new
    fails = load.failed()
    assert load.count("ok") > 1000, load.summary()
    assert not fails, \
        load.failure_report() + "\nworker pids per generation: %s\n%s" % (
            history, s.error_log_text()[-3000:])
    assert load.count("idle-closed-by-server") + \
        load.count("told-to-close") > 0, \
        "no connection was ever closed by a drain: %s" % load.summary()


@pytest.mark.parametrize("preload", [False, True],
                         ids=["exec", "preload"])
def test_term_under_load_with_socket_activation(tmp_path, preload):
    s = helpers.ActivatedServer(tmp_path / "srv", "drain_app:app", workers=2,
                                ready_path="/hello",
                                args=["--preload"] if preload else [])
    s.start()
    try:
        assert "from systemd" in s.error_log_text(), s.diagnostics()
        pids = all_ready(s, 2)
        with drain_load(s) as load:
            load.wait_answers(pids, 300)
            load.event("TERM")
            os.kill(s.pid, signal.SIGTERM)
            rc = s.proc.wait(helpers.STOP_TIMEOUT)
            load.event("supervisor reaped")
            # Let the load meet the closed socket for a while.
            wait_until(lambda: load.count("refused") >= 50, 10,
                       "connections to be refused after the exit")
    finally:
        problems = s.stop()
    # refusals once the listening socket is gone are expected
    fails = load.failed(allow={"refused"})
    assert rc == 0, s.diagnostics()
    assert not problems, problems
    assert load.count("ok") > 300, load.summary()
    assert not fails, load.failure_report(fails) + "\n" + \
        s.error_log_text()[-3000:]


@pytest.mark.parametrize("preload", [False, True],
                         ids=["exec", "preload"])
def test_replacement_that_fails_to_import_aborts_the_restart(make_server,
                                                              tmp_path,
                                                              preload):
    flag = tmp_path / "broken"
    s = make_server("drain_app:app", workers=2, ready_path="/hello",
                    env={"DRAIN_BROKEN_FLAG": str(flag)},
                    args=["--preload"] if preload else [])
    pids = all_ready(s, 2)
    with drain_load(s) as load:
        load.wait_answers(pids, 200)
        flag.write_text("the next import fails\n")
        mark = s.log_mark()
        load.event("HUP with the app broken")
        os.kill(s.pid, signal.SIGHUP)
        s.wait_for_log("Rolling restart stopped", 30, mark)
        load.event("restart stopped")
        load.wait_answers(pids, 200)
        after = set(s.worker_pids())
    log = s.log_since(mark)
    # The app can be loaded again: the next HUP (without load: the drain
    # under load is the other test's) replaces everyone.
    flag.unlink()
    mark = s.log_mark()
    os.kill(s.pid, signal.SIGHUP)
    s.wait_for_log("Rolling restart done", 30, mark)
    wait_until(lambda: not set(s.worker_pids()) & pids, 30,
               "the old workers to exit after a good HUP")
    assert after == pids, "workers %s became %s after the failed " \
        "restart\n%s" % (sorted(pids), sorted(after), log)
    assert "Rolling restart done" not in log, log
    fails = load.failed()
    assert not fails, load.failure_report() + "\n" + log


# A response whose head was made before the drain began (so it told the
# client to keep the connection) and is still being written when it
# begins: the client may send its next request on that connection at once,
# and must get an answer (with Connection: close), not EOF. Found by
# bench/preload.py's rolling restarts of a FastAPI app: a few requests a
# run ended in EOF, the worker having closed after a keep-alive response.
BIG = 8 << 20
BIG_APP = """
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b"x" * %d if scope["path"] == "/big" else b"next"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"%%d" %% len(body))]})
    await send({"type": "http.response.body", "body": body})
""" % BIG


@pytest.mark.parametrize("inline", [False, True], ids=["pump", "inline"])
def test_keep_alive_promised_before_the_drain_is_kept(make_server, tmp_path,
                                                      inline):
    appdir = tmp_path / "app"
    appdir.mkdir()
    (appdir / "big_app.py").write_text(BIG_APP)
    s = make_server("big_app:app", pythonpath=(str(appdir),),
                    ready_path="/", inline=inline,
                    args=["--interface", "asgi"])
    wpid = only_worker(s)
    c = s.connect()
    with c:
        c.send(build_request("GET", "/big"))
        # the head (keep-alive) and the first bytes are here, most of the
        # body still waits in the worker: then the drain begins
        head = c.sock.recv(65536)
        assert head.startswith(b"HTTP/1.1 200"), head[:200]
        assert b"Connection: close" not in head.split(b"\r\n\r\n")[0]
        os.kill(wpid, signal.SIGTERM)
        s.wait_for_log("draining:", 5)
        got = len(head) - head.index(b"\r\n\r\n") - 4
        while got < BIG:
            chunk = c.sock.recv(1 << 20)
            assert chunk, "EOF after %d of %d body bytes" % (got, BIG)
            got += len(chunk)
        assert got == BIG
        # the client was told to keep the connection: it sends at once
        r = c.request("GET", "/next")
        assert r.status == 200 and r.body == b"next", r
        assert r.has_token("Connection", "close"), r
        assert c.read_until_eof(timeout=2) == b""
    wait_exit(wpid, 5)
