"""A fleet behind HAProxy (issue 14): what an operator's deploys do to the
clients, measured where the clients are.

Two sluice hosts (network namespaces, fleet.py) behind HAProxy. Under one
load run through HAProxy (helpers.Load: 64 keep-alive connections, every
outcome recorded with its time; the app names the host, version and
worker pid in every answer), the test takes three steps and counts each
one's window on its own:

  1. rolling restart (HUP) of host a, then of host b, then of both at
     once (as a configuration push does): zero failed, and HAProxy never
     takes a host out (a restarting worker's /healthz stays 200);
  2. deploy of v2 host by host (TERM; HAProxy sees /healthz 503 during
     --shutdown-delay and stops sending; the host drains and exits 0; it
     starts with v2 and HAProxy sees it UP): zero failed, and both
     versions answer within the step;
  3. host b killed with SIGKILL (every process of it at once): failures
     allowed only up to the TCP connections b had open then (counted by
     ss in b's namespace just before the kill; HAProxy's own count of
     requests in progress on b is reported beside it).

One load run, not one per step: the steps follow each other as soon as
the previous one is over (HAProxy has the host UP again), so the whole
test takes well under a minute rather than wrk's fixed 60 s per step.
Between steps the load must be seen served by the expected hosts and
versions, which proves each step's end state.

The first test has two arms: plain, and TLS (HAProxy -> sluice over TLS,
`ssl verify required` with the test's own CA; fleet.py says how). The
TLS arm takes the same steps under the same load and must lose nothing
in the same ones. Every answer says how it came (the scope's scheme and
the connection's TLS version, fleet_app.py), and every one must have
come the arm's way: https over TLS, or http without. In the TLS arm
HAProxy's health checks go over TLS as well (the hosts speak nothing
else, so a host checked UP was checked over TLS), and two checks that
must fail verification (a wrong name, a CA that did not sign the host)
must keep their servers DOWN.

Two more arms take the same steps over HTTP/2 (HAProxy -> sluice; the
load still speaks HTTP/1.1 to HAProxy): h2c, cleartext by prior
knowledge (`proto h2`), and h2-tls, over TLS by ALPN (`alpn h2`, with the
TLS arm's verification). A rolling restart or a deploy then ends each
HTTP/2 connection with GOAWAY rather than a close after a response, and
HAProxy must send its next streams elsewhere: the arms lose nothing in
the same steps as the others. Every answer must say that the app saw
HTTP/2 (the scope's http_version), and each host's own metrics must
count the requests it served over HTTP/2 (none in the HTTP/1.1 arms).

One more arm, preload, takes the same steps in plain HTTP/1.1 with the
hosts started with --preload: a rolling restart then makes a new zygote
per host, which forks the new generation, and a deploy starts a new
supervisor with its own zygote; it must lose nothing in the same steps.

The second test holds WebSocket clients open through HAProxy during a
deploy of each host in turn: every client of the host being deployed gets
a close frame (1001, or 1012) and then EOF, never a reset; its reconnect
through HAProxy reaches the other host.

Each test hands a per-step table (served, failed, versions and hosts
seen) to the end-of-run summary (conftest.py).
"""

import time
from collections import Counter

import pytest

import helpers
from fleet import DELAY, GRACE
from helpers import wait_until
from ws_helpers import WsClosed, WsRaw

CONNS = 64           # load connections through HAProxy
LOAD_BOUND = 150.0   # seconds: the load stops by then whatever happens
PER_STEP = 300       # answers each expected host must give before moving on
HOLD = 3.0           # seconds of load kept after a killed host is out
N_WS = 24            # WebSocket clients


class Answers:
    """Every good answer's (time, host, version, pid, transport), recorded
    by the load's check callback (called on the load threads: append
    only). The transport is "SCHEME TLS-VERSION HTTP-VERSION" as the app
    saw them ("https 0x0304 2", "http - 1.1")."""

    def __init__(self):
        self.rows = []

    def check(self, r):
        parts = r.body.decode("latin-1").split()
        if r.status != 200 or len(parts) != 3 or not parts[2].isdigit():
            return False
        transport = "%s %s %s" % (r.header("x-fleet-scheme"),
                                  r.header("x-fleet-tls"),
                                  r.header("x-fleet-http"))
        self.rows.append((time.monotonic(), parts[0], parts[1],
                          int(parts[2]), transport))
        return True

    def since(self, t0, t1=None):
        return [r for r in list(self.rows)
                if r[0] >= t0 and (t1 is None or r[0] < t1)]

    def wait(self, t0, what, n=PER_STEP, **match):
        """Wait until N answers since T0 match MATCH (host=, version=,
        pids=)."""
        def count():
            k = 0
            for _, host, version, pid, _ in self.since(t0):
                if match.get("host", host) != host or \
                        match.get("version", version) != version or \
                        ("pids" in match and pid not in match["pids"]):
                    continue
                k += 1
            return k >= n
        wait_until(count, 30, what, interval=0.02)


class Steps:
    """The step windows of one load run, and their table."""

    def __init__(self, load, answers):
        self.load, self.answers = load, answers
        self.rows = []

    def begin(self, name):
        self.load.event("begin " + name)
        self.current = (name, time.monotonic())
        return self.current[1]

    def end(self, note=""):
        name, t0 = self.current
        t1 = time.monotonic()
        self.load.event("end " + name)
        served = self.answers.since(t0, t1)
        fails = [o for o in self.load.failed(since=t0) if o.t < t1]
        row = {"name": name, "t0": t0, "t1": t1, "served": len(served),
               "failed": fails, "note": note,
               "versions": Counter(r[2] for r in served),
               "hosts": Counter(r[1] for r in served)}
        self.rows.append(row)
        return row

    def table(self):
        lines = ["%-26s %6s %8s %6s  %-20s %-18s %s" % (
            "step", "secs", "served", "failed", "versions", "hosts", "note")]
        for r in self.rows:
            lines.append("%-26s %6.1f %8d %6d  %-20s %-18s %s" % (
                r["name"], r["t1"] - r["t0"], r["served"], len(r["failed"]),
                " ".join("%s=%d" % kv for kv in sorted(r["versions"].items())),
                " ".join("%s=%d" % kv for kv in sorted(r["hosts"].items())),
                r["note"]))
        return lines


def transport_ok(transport, tls, h2):
    """Whether an answer's TRANSPORT is the arm's: https over TLS 1.2 or
    1.3 when TLS, else http without TLS; HTTP/2 when H2, else 1.1."""
    scheme, version, http = (transport.split(" ") + ["", "", ""])[:3]
    if http != ("2" if h2 else "1.1"):
        return False
    if tls:
        return scheme == "https" and version in ("0x0303", "0x0304")
    return scheme == "http" and version == "-"


def h2_requests(fleet):
    """{host: its sluice_http2_requests_total} now, for the hosts alive."""
    return {name: int(h.metrics()["sluice_http2_requests_total"])
            for name, h in sorted(fleet.hosts.items())}


def verify_probes(lb):
    """The verify_probe backend's servers once each has been checked:
    {name: "STATUS CHECK_STATUS: LAST_CHK"}, e.g. "DOWN L6RSP: SSL
    handshake failure" ("* " marks a check in progress)."""
    def checked():
        rows = lb.servers("verify_probe")
        if any(r["check_status"].lstrip("* ") in ("", "INI")
               for r in rows.values()):
            return None
        return {n: "%s %s: %s" % (r["status"], r["check_status"].lstrip("* "),
                                  r["last_chk"]) for n, r in rows.items()}
    return wait_until(checked, 10, "haproxy's verify_probe checks")


@pytest.mark.parametrize("fleet", ["plain", "tls", "h2c", "h2-tls", "preload"],
                         indirect=True)
def test_deploys_under_load(fleet, report):
    lb = fleet.haproxy
    probes = verify_probes(lb) if fleet.tls else {}
    answers = Answers()
    load = helpers.Load(("127.0.0.1", lb.port),
                        mix=[helpers.Req("/", check=answers.check)],
                        conns=CONNS, keep_alive=True, duration=LOAD_BOUND)
    steps = Steps(load, answers)
    t_start = time.monotonic()
    with load:
        t0 = steps.begin("0 warm-up")
        for host in ("a", "b"):
            answers.wait(t0, "answers from host %s" % host, host=host,
                         version="v1")
        steps.end()

        t0 = steps.begin("1 rolling restart (HUP)")
        downs = {h: lb.transitions(h) for h in ("a", "b")}
        for host in ("a", "b"):
            new = fleet.rolling_restart(host)
            answers.wait(time.monotonic(), "answers from host %s's new "
                         "workers" % host, host=host, pids=new)
        flaps = sum(lb.transitions(h) - downs[h] for h in ("a", "b"))
        steps.end("haproxy took a host out %d time(s)" % flaps)

        t0 = steps.begin("1b HUP both hosts at once")
        new = fleet.rolling_restart("a", "b")
        answers.wait(time.monotonic(), "answers from the new workers",
                     n=2 * PER_STEP, pids=new)
        flaps_all = sum(lb.transitions(h) - downs[h] for h in ("a", "b")) \
            - flaps
        steps.end("haproxy took a host out %d time(s)" % flaps_all)

        t0 = steps.begin("2 deploy v2 (TERM)")
        outs = []
        for host in ("a", "b"):
            outs.append(fleet.deploy(host, "v2"))
            answers.wait(time.monotonic(), "v2 answers from host %s" % host,
                         host=host, version="v2")
        deploy = steps.end("out of haproxy %s s after TERM" % ", ".join(
            "%.2f" % s for s in outs))
        # both hosts are new since the deploy; b is about to be killed
        h2_counts = h2_requests(fleet)

        t0 = steps.begin("3 SIGKILL host b")
        open_to_b = fleet.hosts["b"].open_connections()
        busy_b = lb.sessions("b")
        fleet.hosts["b"].kill()
        lb.wait_status("b", "DOWN")
        t_down = time.monotonic()
        answers.wait(t_down, "answers from host a alone", host="a",
                     version="v2")
        # a window of load on the one host left, so that a failure coming
        # after the takeout (a retry that found no server) shows in it;
        # nothing to poll for: it is a measurement window
        time.sleep(max(0.0, t_down + HOLD - time.monotonic()))
        killed = steps.end("b had %d connections open (%d busy) at the "
                           "kill; out after %.2fs" % (open_to_b, busy_b,
                                                      t_down - t0))
    wall = time.monotonic() - t_start
    rows = lb.servers()
    checks = {h: rows[h]["check_status"].lstrip("* ") for h in ("a", "b")}
    # what "zero failed" took: requests HAProxy retried, or sent elsewhere
    retried = {h: "%s/%s" % (rows[h]["wretr"] or 0, rows[h]["wredis"] or 0)
               for h in ("a", "b")}

    table = steps.table()
    table.append("load: %d connections, %.1f s, %d answered, %d failed; "
                 "failures: %s" % (CONNS, wall, len(answers.rows),
                                   len(load.failed()),
                                   dict(Counter(o.kind
                                                for o in load.failed()))))
    transports = Counter(r[4] for r in answers.rows)
    table.append("answers came as (scheme, TLS version, HTTP version): %s; "
                 "haproxy's last checks: %s" % (dict(transports), checks))
    table.append("requests over HTTP/2 by the hosts' metrics after the "
                 "deploy: %s; haproxy's retries/redispatches by server: %s"
                 % (h2_counts, retried))
    for name, what in sorted(probes.items()):
        table.append("verify_probe %s: %s" % (name, what))
    arm = ("HTTP/2 " if fleet.h2 else "") + ("TLS" if fleet.tls else
                                               "plain") + \
        (", --preload" if fleet.preload else "")
    report("fleet: deploys under load (%s)" % arm, table)
    print("\n".join(table))

    by_name = {r["name"].split()[0]: r for r in steps.rows}
    for key in ("0", "1", "1b", "2"):
        r = by_name[key]
        assert not r["failed"], "step %s: %s" % (
            r["name"], load.failure_report(r["failed"]))
    # Over TLS, a check that fails with "Layer7 invalid response" or
    # "Broken pipe" here was closed by a worker that began its drain while
    # the check's handshake was under way: a drain closes a connection
    # that has sent no request after IDLE_GRACE (worker/loop/drain.c), and
    # over TLS the handshake comes before the request. Over HTTP/2, one
    # that fails with "Layer7 timeout" or "Socket error" met the drain's
    # GOAWAY on a connection it had opened but not yet sent its request
    # on: HAProxy then opens no stream on it, and the check waits out
    # `timeout check` (or sees the close).
    assert flaps == 0 and flaps_all == 0, \
        "haproxy took a host out during a rolling restart:\n" + \
        lb.log_text()[-3000:]
    assert deploy["versions"]["v1"] > 0 and deploy["versions"]["v2"] > 0, \
        deploy["versions"]
    assert set(killed["versions"]) == {"v2"}, killed["versions"]
    assert len(killed["failed"]) <= open_to_b, \
        "%d failures with %d connections open to b:\n%s" % (
            len(killed["failed"]), open_to_b,
            load.failure_report(killed["failed"]))
    # nothing failed outside the windows either
    assert len(load.failed()) == sum(len(r["failed"]) for r in steps.rows), \
        load.failure_report()
    # every answer came the arm's way
    assert all(transport_ok(t, fleet.tls, fleet.h2) for t in transports), \
        transports
    # and sluice counted them as HTTP/2 (each host has served PER_STEP
    # answers or more since its deploy), or counted none
    for name, n in h2_counts.items():
        if fleet.h2:
            assert n >= PER_STEP, h2_counts
        else:
            assert n == 0, h2_counts
    if fleet.tls:
        # host a still UP by an HTTP check over TLS (b is dead by now)
        assert checks["a"] == "L7OK", checks
        # and the checks that must fail verification did
        assert set(probes) == {"wrong-name", "wrong-ca"}, probes
        for name, what in probes.items():
            assert what.startswith("DOWN L6"), (name, what)
    if fleet.preload:
        # and the workers came from zygotes: host a's supervisor (the one
        # the deploy started) forked each of its workers from one
        log = fleet.hosts["a"].server.error_log_text()
        booted = [ln for ln in log.splitlines() if "Booting worker" in ln]
        assert booted and all(ln.endswith("(forked by the zygote)")
                              for ln in booted), log[-3000:]


# -------------------------------------------------------------- WebSockets

def ws_open(lb):
    """A WebSocket through HAProxy; (client, host it reached)."""
    c = WsRaw("127.0.0.1", lb.port, "/", timeout=10)
    assert c.status == 101, (c.status, c.body)
    _, payload, _ = c.recv_message()
    return c, payload.decode().split()[0]


def ws_end(c):
    """How a client's connection ended: ("close", code) when a close frame
    came and then EOF; ("reset"/"eof"/"late", None) when not."""
    c.sock.settimeout(DELAY + GRACE)
    try:
        code, _ = c.recv_close(answer_pings=True)
    except WsClosed as e:
        return ("reset" if "reset" in str(e) else "eof"), None
    except OSError:
        return "late", None
    c.send_close(code)
    end = c.expect_eof()
    return ("close" if end == "eof" else end), code


def test_websockets_across_deploys(fleet, report):
    lb = fleet.haproxy
    clients = [ws_open(lb) for _ in range(N_WS)]
    assert {h for _, h in clients} == {"a", "b"}, Counter(
        h for _, h in clients)
    answers = Answers()
    load = helpers.Load(("127.0.0.1", lb.port),
                        mix=[helpers.Req("/", check=answers.check)],
                        conns=8, keep_alive=True, duration=LOAD_BOUND)
    lines = ["%-10s %8s %-22s %-26s %s" % ("deploy", "clients", "ended",
                                             "reconnected to", "http failed")]
    ends_all = Counter()
    try:
        with load:
            for host, other in (("a", "b"), ("b", "a")):
                victims = [c for c, h in clients if h == host]
                others = [(c, h) for c, h in clients if h != host]
                ends, moved = Counter(), Counter()
                fresh = []

                def on_down():
                    for c in victims:
                        with c:
                            kind, code = ws_end(c)
                            ends["%s %s" % (kind, code or "")] += 1
                        fresh.append(ws_open(lb))
                        moved[fresh[-1][1]] += 1
                t0 = time.monotonic()
                fleet.deploy(host, "v2", on_down=on_down)
                fails = load.failed(since=t0)
                lines.append("%-10s %8d %-22s %-26s %d" % (
                    host, len(victims), dict(ends), dict(moved), len(fails)))
                ends_all.update(ends)
                assert not fails, load.failure_report(fails)
                assert set(ends) <= {"close 1001", "close 1012"}, dict(ends)
                assert set(moved) == {other}, dict(moved)
                # the other host's clients were left alone
                for c, _ in others:
                    c.send_text("still here")
                    assert c.recv_message()[1] == b"still here"
                clients = others + fresh
    finally:
        for c, _ in clients:
            c.close()
        report("fleet: WebSockets across deploys (%d clients)" % N_WS, lines)
        print("\n".join(lines))
    assert sum(ends_all.values()) >= N_WS
