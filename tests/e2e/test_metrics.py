"""--metrics-bind: the supervisor's Prometheus endpoint (issue 11).

Every server here runs two workers and a metrics address of its own. A
test takes a scrape before it sends anything (the readiness probe and
whatever else came first are in it) and checks what its own requests
added, polled until it shows: a worker counts a request when its response
has been written, which may come a moment after the client read it.
The text of every scrape is checked by promtool, Prometheus' own linter.
"""

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest

import helpers
from conftest import EXECUTORS
from ws_helpers import OP_TEXT, WsRaw

PROMTOOL = "/usr/bin/promtool"
PROMETHEUS = "/usr/bin/prometheus"
APPS = {"wsgi": "wsgi_app:app", "asgi": "asgi_app:app"}
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$")

pytestmark = pytest.mark.sluice_only


def status_path(app, code):
    """A target on APP (wsgi/asgi) that answers CODE."""
    return ("/status?code=%d" % code if app == "wsgi"
            else "/status/%d" % code)


def metrics_server(make_server, app="wsgi", inline=False, workers=2,
                   args=(), **kw):
    """A started server for APP with --metrics-bind on a free port; its
    metrics address is in .metrics_port."""
    port = helpers.free_port()
    s = make_server(APPS.get(app, app), inline=inline, workers=workers,
                    args=["--metrics-bind", "127.0.0.1:%d" % port]
                    + list(args), **kw)
    s.metrics_port = port
    # The server may have answered once (one worker ready, perhaps not
    # all), or not yet been asked (ready_path=None): the supervisor may not
    # listen on the metrics address yet.
    helpers.wait_until(lambda: workers_up(s) == workers,
                       helpers.START_TIMEOUT, "%d workers up" % workers)
    if s.ready_path is not None:
        # the worker counts the readiness probe once it has written the
        # answer, which the probe may have read a moment before: a test's
        # first scrape must not miss it, or its deltas count it too
        helpers.wait_until(
            lambda: total(scrape(s, check=False),
                          "sluice_requests_total{") >= 1,
            5, "the readiness probe to be counted")
    return s


def workers_up(server):
    """sluice_worker_up summed, or -1 while the metrics address refuses."""
    try:
        samples = scrape(server, check=False)
    except ConnectionRefusedError:
        return -1
    return sum(v for k, v in samples.items()
               if k.startswith("sluice_worker_up"))


def scrape_raw(server, target="/metrics", method="GET", timeout=5.0):
    with helpers.RawConn.tcp("127.0.0.1", server.metrics_port,
                             timeout) as c:
        return c.request(method, target, headers=[("Connection", "close")])


def parse(text):
    """{'name{labels}': value} of every sample; fails on a line that is
    neither a comment nor a sample."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        samples[m.group(1)] = float(m.group(2))
    return samples


def promtool_check(text):
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(),
                       capture_output=True, timeout=20)
    assert r.returncode == 0, (r.stdout + r.stderr).decode()


def scrape(server, check=True):
    r = scrape_raw(server)
    assert r.status == 200, r
    assert r.header("Content-Type") == \
        "text/plain; version=0.0.4; charset=utf-8"
    text = r.body.decode()
    if check:
        promtool_check(text)
    return parse(text)


def req(method, code, handler="app"):
    """The series of sluice_requests_total: HANDLER "app" is every request
    but those a --static map answered."""
    return 'sluice_requests_total{method="%s",code="%s",handler="%s"}' % (
        method, code, handler)


def handler_total(samples, handler):
    """sluice_requests_total summed over methods and codes."""
    return sum(v for k, v in samples.items()
               if k.startswith("sluice_requests_total{")
               and k.endswith(',handler="%s"}' % handler))


def total(samples, prefix):
    return sum(v for k, v in samples.items() if k.startswith(prefix))


def wait_delta(server, before, key, want, timeout=5):
    """Poll until KEY has grown by WANT since BEFORE; the scrape."""
    def grown():
        now = scrape(server, check=False)
        return now if now[key] - before[key] >= want else None
    after = helpers.wait_until(grown, timeout, "%s to grow by %s" % (key, want))
    assert after[key] - before[key] == want, (key, after[key], before[key])
    return after


def send(server, method, target, body=None):
    with server.connect() as c:
        return c.request(method, target, headers=[("Connection", "close")],
                         body=body)


# ------------------------------------------------------------------ counts

@pytest.mark.parametrize("inline", EXECUTORS)
@pytest.mark.parametrize("app", ["wsgi", "asgi"])
def test_counts_after_requests_are_exact(make_server, app, inline):
    s = metrics_server(make_server, app, inline == "inline")
    before = scrape(s)
    plan = [("GET", "/hello", 200)] * 5 + \
           [("GET", status_path(app, 404), 404)] * 3 + \
           [("GET", status_path(app, 503), 503)] * 2 + \
           [("POST", "/echo", 200)] * 2
    for method, target, code in plan:
        r = send(s, method, target, body=b"ping" if method == "POST" else None)
        assert r.status == code, (target, r)
    after = wait_delta(s, before, req("POST", "2xx"), 2)
    after = wait_delta(s, before, req("GET", "5xx"), 2)
    for key, want in ((req("GET", "2xx"), 5), (req("GET", "4xx"), 3),
                      (req("GET", "5xx"), 2), (req("POST", "2xx"), 2),
                      (req("GET", "none"), 0), (req("PUT", "2xx"), 0)):
        assert after[key] - before[key] == want, key
    n = len(plan)
    assert total(after, "sluice_requests_total") - \
        total(before, "sluice_requests_total") == n
    assert handler_total(after, "app") - handler_total(before, "app") == n
    assert handler_total(after, "static") == 0
    for hist in ("sluice_request_duration_seconds",
                 "sluice_request_queue_seconds"):
        assert after[hist + "_count"] - before[hist + "_count"] == n, hist
        assert after[hist + '_bucket{le="+Inf"}'] == after[hist + "_count"]
    assert after["sluice_received_bytes_total"] > \
        before["sluice_received_bytes_total"]
    assert after["sluice_sent_bytes_total"] > \
        before["sluice_sent_bytes_total"]
    assert after["sluice_connections_total"] - \
        before["sluice_connections_total"] >= n
    assert after['sluice_worker_up{worker="1"}'] == 1
    assert after['sluice_worker_up{worker="2"}'] == 1
    assert after["sluice_worker_boots_total"] == 2
    assert after["sluice_worker_boot_seconds_count"] == 2
    assert after["sluice_lanes"] == 2
    assert after["sluice_workers_target"] == 2


def test_server_own_answers_are_the_apps(make_server):
    """A request the server refuses itself counts under handler="app";
    every method, code and handler has its series from the start."""
    s = metrics_server(make_server)
    before = scrape(s)
    methods = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS",
               "other")
    codes = ("1xx", "2xx", "3xx", "4xx", "5xx", "none")
    for handler in ("app", "static"):
        for method in methods:
            for code in codes:
                assert req(method, code, handler) in before
    assert len([k for k in before
                if k.startswith("sluice_requests_total{")]) == 2 * 8 * 6
    with s.connect() as c:
        c.send(b"GET / HTTP/1.1\r\nHost: h\r\nno colon here\r\n\r\n")
        assert c.read_response().status == 400
    after = wait_delta(s, before, req("other", "4xx"), 1)
    assert handler_total(after, "app") - handler_total(before, "app") == 1
    assert handler_total(after, "static") == 0


def test_endpoint_answers_only_get_metrics(make_server):
    s = metrics_server(make_server, workers=1)
    assert scrape_raw(s, "/").status == 404
    assert scrape_raw(s, "/metricsx").status == 404
    assert scrape_raw(s, "/metrics", method="POST").status == 404
    assert scrape_raw(s, "/metrics?x=1").status == 200
    head = scrape_raw(s, method="HEAD")
    assert head.status == 200 and head.body == b""
    assert int(head.header("Content-Length")) > 1000
    # a head that never ends is answered (431) or cut, never waited on
    with socket.create_connection(("127.0.0.1", s.metrics_port), 5) as c:
        c.settimeout(5)
        c.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 4000)
        data = c.recv(4096)
        assert data.startswith(b"HTTP/1.1 431 "), data
    # and the endpoint still serves
    scrape(s)


@pytest.mark.parametrize("form", ["ipv6", "unix"])
def test_metrics_address_forms(make_server, tmp_path, form):
    if form == "ipv6":
        port = helpers.free_port("::1")
        spec = "[::1]:%d" % port

        def conn():
            return helpers.RawConn.tcp("::1", port, 5)
    else:
        path = str(tmp_path / "metrics.sock")
        spec = "unix:" + path

        def conn():
            return helpers.RawConn.unix(path, 5)
    s = make_server("wsgi_app:app", workers=1, args=["--metrics-bind", spec])
    with conn() as c:
        r = c.request("GET", "/metrics", headers=[("Connection", "close")])
    assert r.status == 200
    promtool_check(r.body.decode())
    assert parse(r.body.decode())["sluice_workers_target"] == 1
    if form == "unix":
        s.stop()
        assert not os.path.exists(path)  # the file goes with the server


def test_idle_scrapers_are_bounded_and_timed_out(make_server):
    """Eight clients that connect and say nothing hold every scrape slot;
    the supervisor goes on working meanwhile (a worker it is told to add
    arrives), drops them after its 5 s limit, and serves the next scrape."""
    s = metrics_server(make_server, workers=1)
    idle = [socket.create_connection(("127.0.0.1", s.metrics_port), 5)
            for _ in range(8)]
    try:
        t0 = time.monotonic()
        os.kill(s.pid, signal.SIGTTIN)
        s.wait_workers(2)
        for c in idle:
            c.settimeout(10)
            assert c.recv(1) == b""  # closed by the server, unanswered
        assert 4 <= time.monotonic() - t0 < 9
    finally:
        for c in idle:
            c.close()
    assert scrape(s)["sluice_workers_target"] == 2


def test_bad_metrics_address_is_a_usage_error(tmp_path):
    rc, out, err = helpers.run_cli(
        ["--metrics-bind", "127.0.0.1:notaport", "-b",
         "127.0.0.1:%d" % helpers.free_port(), "wsgi_app:app"])
    assert rc == 2, (out, err)
    assert "port must be a number" in err


def test_metrics_are_off_by_default(make_server):
    def segments(pid):
        fds = "/proc/%d/fd" % pid
        names = []
        for fd in os.listdir(fds):
            try:
                names.append(os.readlink(os.path.join(fds, fd)))
            except OSError:
                pass
        return [n for n in names if "sluice-metrics" in n]

    plain = make_server("wsgi_app:app", workers=1)
    assert segments(plain.pid) == []
    assert "metrics: " not in plain.error_log_text()
    on = metrics_server(make_server, workers=1)
    assert len(segments(on.pid)) == 1  # what the check above looks for
    assert "metrics: listening at http://127.0.0.1:%d/metrics" \
        % on.metrics_port in on.error_log_text()


def test_queue_time_and_busy_lanes(make_server):
    """Pump mode, one lane: of two slow requests sent together, one waits
    for the other. Its wait is the queue time an autoscaler watches, and
    while both are in the worker, two are in flight on one busy lane.
    (Inline mode has no queue to see: the loop runs the app itself and
    reads the second head only when the first is done.)"""
    s = metrics_server(make_server, workers=1)
    before = scrape(s)
    conns = [s.connect() for _ in range(2)]
    try:
        for c in conns:
            c.send(b"GET /slow?t=0.6 HTTP/1.1\r\nHost: x\r\n"
                   b"Connection: close\r\n\r\n")
        busy = helpers.wait_until(
            lambda: (lambda m: m if m["sluice_requests_in_flight"] == 2
                     else None)(scrape(s, check=False)),
            5, "two requests in flight")
        assert busy["sluice_lanes"] == 1
        assert busy["sluice_lanes_busy"] == 1
        for c in conns:
            assert c.read_response().status == 200
    finally:
        for c in conns:
            c.close()
    after = wait_delta(s, before, "sluice_request_queue_seconds_count", 2)
    waited = after["sluice_request_queue_seconds_count"] - \
        after['sluice_request_queue_seconds_bucket{le="0.25"}']
    quick = after['sluice_request_queue_seconds_bucket{le="0.05"}'] - \
        before['sluice_request_queue_seconds_bucket{le="0.05"}']
    assert (waited, quick) == (1, 1)
    assert after["sluice_request_queue_seconds_sum"] - \
        before["sluice_request_queue_seconds_sum"] >= 0.5
    assert after['sluice_request_duration_seconds_bucket{le="0.5"}'] - \
        before['sluice_request_duration_seconds_bucket{le="0.5"}'] == 0
    helpers.wait_until(
        lambda: scrape(s, check=False)["sluice_requests_in_flight"] == 0, 5,
        "nothing in flight")


# ------------------------------------------------------------ restarts

@pytest.mark.parametrize("inline", EXECUTORS)
@pytest.mark.parametrize("app", ["wsgi", "asgi"])
def test_counters_survive_reload_and_a_killed_worker(make_server, app,
                                                     inline):
    s = metrics_server(make_server, app, inline == "inline")
    before = scrape(s)
    for _ in range(6):
        assert send(s, "POST", "/echo", body=b"x").status == 200
    seen = wait_delta(s, before, req("POST", "2xx"), 6)
    counters = [k for k in seen if "_total" in k or k.endswith("_count")
                or "_bucket" in k or k.endswith("_sum")]

    def not_back(now):
        for k in counters:
            assert now[k] >= seen[k], (k, now[k], seen[k])

    old = set(s.wait_workers(2))
    os.kill(s.pid, signal.SIGHUP)

    def reloaded():
        now = scrape(s, check=False)
        not_back(now)
        return now if now['sluice_worker_restarts_total{cause="reload"}'] \
            == 2 and set(s.worker_pids()).isdisjoint(old) and \
            len(s.worker_pids()) == 2 else None
    now = helpers.wait_until(reloaded, 30, "both workers replaced")
    promtool_check(scrape_raw(s).body.decode())
    assert now[req("POST", "2xx")] == seen[req("POST", "2xx")]
    assert now['sluice_worker_restarts_total{cause="crash"}'] == 0
    seen = now

    victim = s.wait_workers(2)[0]
    os.kill(victim, signal.SIGKILL)

    def replaced():
        now = scrape(s, check=False)
        not_back(now)
        pids = s.worker_pids()
        return now if now['sluice_worker_restarts_total{cause="crash"}'] \
            == 1 and victim not in pids and len(pids) == 2 and \
            total(now, "sluice_worker_up") == 2 else None
    now = helpers.wait_until(replaced, 30, "the killed worker replaced")
    assert now[req("POST", "2xx")] == seen[req("POST", "2xx")]
    assert now["sluice_worker_boots_total"] == 5  # 2 + 2 reloaded + 1
    for _ in range(3):
        assert send(s, "POST", "/echo", body=b"x").status == 200
    wait_delta(s, before, req("POST", "2xx"), 9)


def test_max_requests_restart_is_counted(make_server):
    s = metrics_server(make_server, workers=1,
                       args=["--max-requests", "3"])
    for _ in range(4):
        send(s, "GET", "/hello")

    def retired():
        now = scrape(s, check=False)
        return now['sluice_worker_restarts_total{cause="max_requests"}'] \
            >= 1 and now
    now = helpers.wait_until(retired, 30, "a max-requests restart counted")
    assert now['sluice_worker_restarts_total{cause="crash"}'] == 0


def test_timeout_restart_is_counted(tmp_path):
    """A worker the health check kills (--timeout) is a timeout restart,
    not a crash, though it dies of a signal nobody sent it to stop."""
    port = helpers.free_port()
    s = helpers.sup_server(tmp_path, workers=1, args=[
        "--timeout", "2", "--metrics-bind", "127.0.0.1:%d" % port]).start()
    s.metrics_port = port
    hung = threading.Thread(target=lambda: _request_ignoring_errors(s,
                                                                   "/hang"))
    try:
        hung.start()
        s.wait_for_call("hang-start")

        def counted():
            now = scrape(s, check=False)
            return now['sluice_worker_restarts_total{cause="timeout"}'] == 1 \
                and total(now, "sluice_worker_up") == 1 and now
        now = helpers.wait_until(counted, 20, "the timeout restart counted")
        assert now['sluice_worker_restarts_total{cause="crash"}'] == 0
        assert now["sluice_worker_boots_total"] == 2
        hung.join(15)
    finally:
        problems = s.stop()
    assert problems == []


def _request_ignoring_errors(server, target):
    try:
        with server.connect(timeout=15) as c:
            c.send(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % target.encode())
            c.read_response()
    except Exception:  # noqa: BLE001 - the worker is killed under it
        pass


def test_stopped_worker_does_not_stall_a_scrape(make_server):
    s = metrics_server(make_server)
    pids = s.wait_workers(2)
    os.kill(pids[0], signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        for _ in range(5):
            samples = scrape(s)
        assert time.monotonic() - t0 < 5
        assert total(samples, "sluice_worker_up") == 2
    finally:
        os.kill(pids[0], signal.SIGCONT)


# ---------------------------------------------------------- WebSockets

@pytest.mark.parametrize("inline", EXECUTORS)
def test_websocket_connections_and_messages(make_server, inline):
    s = metrics_server(make_server, "ws_app:app", inline == "inline",
                       workers=1, ready_path=None)
    before = scrape(s)
    with WsRaw.to(s, "/echo") as ws:
        assert ws.status == 101
        for i in range(3):
            ws.send_text("m%d" % i)
            assert ws.recv_message() == (OP_TEXT, b"m%d" % i, False)
        now = wait_delta(s, before, "sluice_websocket_connections_open", 1)
        assert now["sluice_websocket_messages_received_total"] - \
            before["sluice_websocket_messages_received_total"] == 3
        assert now["sluice_websocket_messages_sent_total"] - \
            before["sluice_websocket_messages_sent_total"] == 3
        assert now["sluice_websocket_connections_total"] - \
            before["sluice_websocket_connections_total"] == 1
    after = wait_delta(s, before, req("GET", "1xx"), 1)
    helpers.wait_until(
        lambda: scrape(s, check=False)["sluice_websocket_connections_open"]
        == 0, 5, "the WebSocket gauge back to 0")


# ---------------------------------------------------- a real Prometheus

def prometheus_query(port, query):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (
        port, urllib.parse.urlencode({"query": query}))
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            data = json.load(r)
    except OSError:
        return None
    result = data.get("data", {}).get("result", [])
    return float(result[0]["value"][1]) if result else None


@pytest.mark.parametrize("app", ["wsgi", "asgi"])
def test_prometheus_scrapes_the_request_count(make_server, tmp_path, app):
    s = metrics_server(make_server, app)
    sent = 7  # POSTs: the readiness probe is a GET
    for _ in range(sent):
        assert send(s, "POST", "/echo", body=b"x").status == 200
    wait_delta(s, {req("POST", "2xx"): 0}, req("POST", "2xx"), sent)

    web = helpers.free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: sluice\n    static_configs:\n"
        "      - targets: ['127.0.0.1:%d']\n" % s.metrics_port)
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [PROMETHEUS, "--config.file", str(config),
         "--storage.tsdb.path", str(tmp_path / "tsdb"),
         "--web.listen-address", "127.0.0.1:%d" % web],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True)
    try:
        got = helpers.wait_until(
            lambda: prometheus_query(
                web, 'sum(sluice_requests_total{method="POST"})'),
            60, "Prometheus to have scraped sluice")
        assert got == sent
        assert prometheus_query(web, 'up{job="sluice"}') == 1
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        log.close()
