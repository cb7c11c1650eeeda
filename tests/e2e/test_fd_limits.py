"""File descriptors under attack (issue 12, "Limits under attack").

A worker out of descriptors (EMFILE) must not spin on its listener: it
pauses accepting, logs the failure at most once a second with a count, and
takes the waiting connections once descriptors free up. The supervisor's
metrics endpoint does the same. At start the supervisor raises the soft
RLIMIT_NOFILE to fit --worker-connections (the workers inherit it), and
warns once when the hard limit is too low.

Servers run under `prlimit --nofile=SOFT:HARD` (which execs sluice, so the
pid is the supervisor's); the supervisor's own limit is lowered while it
runs with `prlimit --pid`. CPU is read from /proc/PID/stat between two
log lines a second apart, the window the once-a-second line itself marks.
"""

import os
import signal
import shutil
import socket
import subprocess
import time

import pytest

import helpers
from conftest import EXECUTORS

pytestmark = pytest.mark.sluice_only

APPS = {"wsgi": "wsgi_app:app", "asgi": "asgi_app:app"}
PRLIMIT = shutil.which("prlimit") or "/usr/bin/prlimit"
TICKS = os.sysconf("SC_CLK_TCK")
# the stated bar: a paused listener costs next to nothing; generous, for a
# shared machine (a spinning one costs a whole core)
CPU_MAX = 0.1
EMFILE = "Too many open files"
FAILED = "accept4() failed: " + EMFILE
PAUSED = FAILED + "; accepting paused"
COUNTED = "times in the last"


def prlimit(soft, hard):
    return [PRLIMIT, "--nofile=%d:%d" % (soft, hard), "--"]


def cpu_seconds(pid):
    """utime + stime of PID, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def nofile(pid):
    """(soft, hard) RLIMIT_NOFILE of PID, from /proc/PID/limits."""
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no open files limit for pid %d" % pid)


def hard_limit():
    import resource
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def lowest_free_fd(pid):
    used = {int(fd) for fd in os.listdir("/proc/%d/fd" % pid)}
    fd = 0
    while fd in used:
        fd += 1
    return fd


def open_connections(port, n):
    """N connections to PORT; the kernel completes them (listen backlog)
    whether or not the server accepts."""
    socks = []
    try:
        for _ in range(n):
            socks.append(socket.create_connection(("127.0.0.1", port),
                                                  timeout=5))
    except BaseException:
        close_all(socks)
        raise
    return socks


def close_all(socks):
    for s in socks:
        s.close()


def pause_window(server, mark, pid):
    """From the first failure line after MARK to the counted one that
    follows it a second or more later (at most 3 s: a spinning process
    never writes it): PID's CPU share over that window, and whether the
    counted line came."""
    server.wait_for_log(EMFILE, timeout=10, since=mark)
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    try:
        helpers.wait_until(lambda: COUNTED in server.log_since(mark), 3.0,
                           "the counted failure line")
    except AssertionError:
        pass  # told below, after the CPU figure
    cpu1, t1 = cpu_seconds(pid), time.monotonic()
    share = (cpu1 - cpu0) / (t1 - t0)
    print("pid %d: %.1f%% of a core over %.2fs" % (pid, share * 100, t1 - t0))
    return share, COUNTED in server.log_since(mark)


def failure_lines(server, mark, who):
    return [line for line in server.log_since(mark).splitlines()
            if FAILED in line and who in line]


@pytest.mark.parametrize("app", sorted(APPS))
@pytest.mark.parametrize("executor", EXECUTORS)
def test_emfile_pauses_accepting(make_server, app, executor):
    """ulimit -n 64 and 120 connections: the worker stops accepting instead
    of spinning, logs a bounded number of lines, and serves a fresh
    request once the connections close."""
    start = time.monotonic()
    s = make_server(APPS[app], inline=executor == "inline",
                    prefix=prlimit(64, 64))
    (worker,) = s.wait_workers(1)
    assert nofile(worker) == (64, 64)
    mark = s.log_mark()
    socks = open_connections(s.port, 120)
    try:
        share, counted = pause_window(s, mark, worker)
        assert share < CPU_MAX, \
            "worker used %.0f%% of a core while paused" % (share * 100)
        assert counted
        assert PAUSED in s.log_since(mark)
        lines = failure_lines(s, mark, "listener")
        elapsed = time.monotonic() - start
        assert 2 <= len(lines) <= elapsed + 2, lines[:5]
        assert helpers.alive(worker)
    finally:
        close_all(socks)
    # descriptors free again: a fresh request is served
    r = s.get("/hello", timeout=10)
    assert r.status == 200, (r, s.log_since(mark)[-3000:])
    assert s.worker_pids() == [worker]


def test_metrics_endpoint_pauses_on_emfile(make_server):
    """The supervisor's metrics endpoint, out of descriptors, pauses its
    listener instead of spinning, and answers again once it can."""
    port = helpers.free_port()
    s = make_server("wsgi_app:app",
                    args=["--metrics-bind", "127.0.0.1:%d" % port])
    sup = s.pid
    soft, hard = nofile(sup)
    mark = s.log_mark()
    subprocess.run([PRLIMIT, "--pid", str(sup), "--nofile=%d:%d"
                    % (lowest_free_fd(sup), hard)], check=True)
    socks = []
    try:
        socks = open_connections(port, 3)
        share, counted = pause_window(s, mark, sup)
        assert share < CPU_MAX, \
            "supervisor used %.0f%% of a core while paused" % (share * 100)
        assert counted
        assert PAUSED in s.log_since(mark)
        lines = failure_lines(s, mark, "metrics")
        assert 2 <= len(lines) <= 4, lines[:5]
    finally:
        subprocess.run([PRLIMIT, "--pid", str(sup), "--nofile=%d:%d"
                        % (soft, hard)], check=True)
        close_all(socks)
    with helpers.RawConn.tcp("127.0.0.1", port, 10) as c:
        r = c.request("GET", "/metrics", headers=[("Connection", "close")])
    assert r.status == 200
    assert b"sluice_worker_up" in r.body


def test_rlimit_raised_to_fit_connections(make_server):
    """A soft limit of 256 with --worker-connections 2000: the supervisor
    raises it (2000 connections + 1 listener + 64 spare) before the
    workers start, and they inherit it."""
    hard = min(hard_limit(), 65536)
    if hard < 4096:
        pytest.skip("hard RLIMIT_NOFILE %d leaves no room" % hard)
    s = make_server("wsgi_app:app", workers=2, prefix=prlimit(256, hard),
                    args=["--worker-connections", "2000"])
    want = 2000 + 1 + 64
    for pid in [s.pid] + s.wait_workers(2):
        assert nofile(pid) == (want, hard), pid
    log = s.error_log_text()
    assert "soft limit raised from 256 to %d" % want in log
    assert "WARNING" not in log


def test_rlimit_warns_once_when_hard_limit_too_low(make_server):
    """A hard limit of 128 cannot fit 1000 connections: one warning line
    (from the supervisor, not one per worker), and the soft limit goes as
    high as it can."""
    s = make_server("wsgi_app:app", workers=2, prefix=prlimit(100, 128))
    workers = s.wait_workers(2)
    for pid in [s.pid] + workers:
        assert nofile(pid) == (128, 128), pid
    lines = [line for line in s.error_log_text().splitlines()
             if "RLIMIT_NOFILE" in line]
    assert len(lines) == 1, lines
    assert "[WARNING]" in lines[0]
    assert "1000 worker connections need 1065 descriptors" in lines[0]
    assert "hard limit is 128" in lines[0]
    assert s.get("/hello").status == 200


def test_rlimit_fitted_again_on_hup(make_server, tmp_path):
    """A HUP that raises worker_connections in the configuration file
    raises the soft limit for the new generation of workers."""
    hard = min(hard_limit(), 65536)
    if hard < 4096:
        pytest.skip("hard RLIMIT_NOFILE %d leaves no room" % hard)
    conf = tmp_path / "sluice.conf"
    conf.write_text("worker_connections = 100\n")
    s = make_server("wsgi_app:app", prefix=prlimit(256, hard),
                    args=["-c", conf])
    (old,) = s.wait_workers(1)
    assert nofile(old) == (256, hard)  # 100 + 1 + 64 fit already
    conf.write_text("worker_connections = 3000\n")
    mark = s.log_mark()
    os.kill(s.pid, signal.SIGHUP)
    s.wait_for_log("re-read %s" % conf, timeout=10, since=mark)
    assert "soft limit raised from 256 to 3065" in s.log_since(mark)
    helpers.wait_until(lambda: old not in s.worker_pids()
                       and len(s.worker_pids()) == 1, 20,
                       "the old worker to be replaced")
    (new,) = s.worker_pids()
    assert nofile(new) == (3065, hard)
