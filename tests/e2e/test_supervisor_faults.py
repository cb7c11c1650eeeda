"""The supervisor when things go wrong, with real processes and sockets.

A worker killed under load is replaced and the others never notice; an
application that hangs has its Python tracebacks logged and its worker
replaced after --timeout (pump mode: every lane stuck; inline mode: no
heartbeat); an application that cannot be imported ends the supervisor with
one clear error and no retry loop; one that never finishes importing ends it
after --boot-timeout; a supervisor killed with SIGKILL leaves no worker
behind; --max-requests recycles workers under load without a failed request;
a rolling restart whose new workers cannot load the app leaves the old ones
serving.
"""

import os
import re
import signal
import threading
import time

import pytest

import helpers
from helpers import (Load, NotifySocket, alive, run_cli, sup_server,
                     wait_gone, wait_until, worker_pid_of, write_app)

pytestmark = pytest.mark.sluice_only


def test_kill9_worker_under_load(tmp_path):
    s = sup_server(tmp_path, workers=3).start()
    try:
        pids = s.wait_workers(3)
        with Load(s, conns=4) as load:
            load.wait_served_by(pids)
            victim = pids[0]
            os.kill(victim, signal.SIGKILL)
            t_kill = time.monotonic()
            fresh = wait_until(
                lambda: (lambda now: len(now) == 3 and victim not in now
                         and now)(s.worker_pids()), 10,
                "a replacement for the killed worker")
            newcomer = (set(fresh) - set(pids)).pop()
            load.wait_served_by([newcomer])
            t_back = time.monotonic()
            n = load.total()
            wait_until(lambda: load.total() > n + 50, 10, "more requests")
        # only connections the dead worker held can fail, and only then
        lost = load.failed()
        assert len(lost) <= 4, load.failure_report()
        assert all(t_kill <= o.t < t_back for o in lost), \
            load.failure_report() + "\nkilled at t=%.3fs, back at t=%.3fs" % (
                t_kill - load.t0, t_back - load.t0)
        assert set(pids[1:]) <= set(fresh), "the other workers were touched"
        s.wait_for_log("was killed by signal 9")
    finally:
        problems = s.stop()
    assert problems == []


def test_hung_app_is_dumped_and_replaced(tmp_path, inline):
    s = sup_server(tmp_path, workers=2, args=["--timeout", "2"],
                   inline=inline).start()
    try:
        pids = s.wait_workers(2)
        mark = s.log_mark()
        hung = {}

        def hang():
            try:
                with s.connect(timeout=15) as c:
                    c.send(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
                    c.read_response()
            except Exception as e:  # noqa: BLE001 - the worker dies
                hung["error"] = e
        t = threading.Thread(target=hang)
        t.start()
        s.wait_for_call("hang-start")
        t0 = time.monotonic()
        why = ("all 1 lanes busy with a request for" if not inline
               else "no heartbeat for")
        log = s.wait_for_log("timed out: " + why, timeout=10, since=mark)
        took = time.monotonic() - t0
        assert 1.5 < took < 6, took
        # faulthandler's dump names the function the app is stuck in
        log = s.wait_for_log("in hang_here_forever", timeout=5, since=mark)
        m = re.search(r"Worker (\d+) \(pid (\d+)\) timed out", log)
        assert m and int(m.group(2)) in pids, log
        dead = int(m.group(2))
        t.join(15)
        assert "error" in hung
        wait_gone([dead], 5, "the hung worker to die")
        now = s.wait_workers(2)
        assert dead not in now
        assert worker_pid_of(s) in now
    finally:
        problems = s.stop()
    assert problems == []


def test_import_failure_exits_without_a_retry_loop(tmp_path):
    appdir = write_app(tmp_path / "app")
    (appdir / "BROKEN").touch()
    log = tmp_path / "error.log"
    t0 = time.monotonic()
    rc, out, err = run_cli(["-w", "3", "--pythonpath", str(appdir),
                            "-b", "127.0.0.1:%d" % helpers.free_port(),
                            "--error-logfile", str(log), "sup_app:app"])
    assert rc == 2, (rc, err)
    assert time.monotonic() - t0 < 10
    text = log.read_text()
    assert "sup_app is broken on purpose" in text, text
    assert text.count("Booting worker") <= 3, text  # no second round


def test_boot_timeout_ends_the_supervisor_with_the_reason(tmp_path):
    appdir = write_app(tmp_path / "app")
    (appdir / "IMPORT_SLEEP").touch()
    log = tmp_path / "error.log"
    t0 = time.monotonic()
    rc, out, err = run_cli(["-w", "2", "--pythonpath", str(appdir),
                            "--boot-timeout", "1.5",
                            "-b", "127.0.0.1:%d" % helpers.free_port(),
                            "--error-logfile", str(log), "sup_app:app"])
    took = time.monotonic() - t0
    text = log.read_text()
    assert rc == 1, (rc, text)
    assert 1.4 < took < 10, took
    assert "No worker became ready within 1.5s" in text, text
    # where the import was stuck, from faulthandler
    assert "sup_app.py" in text, text


def test_kill9_supervisor_leaves_no_worker(tmp_path):
    s = sup_server(tmp_path, workers=2).start()
    pids = s.wait_workers(2)
    os.kill(s.pid, signal.SIGKILL)
    s.proc.wait(5)
    t0 = time.monotonic()
    wait_gone(pids, 2, "the orphaned workers to exit")
    assert time.monotonic() - t0 < 2
    s.stop()


def test_max_requests_recycles_without_a_failed_request(tmp_path):
    s = sup_server(tmp_path, workers=2,
                   args=["--max-requests", "40",
                         "--max-requests-jitter", "10"]).start()
    try:
        first = set(s.wait_workers(2))
        with Load(s, conns=4) as load:
            wait_until(lambda: len(load.pids() - first) >= 4, 30,
                       "four generations of recycled workers")
        assert not load.failed(), load.failure_report()
        assert load.total() >= 160
        assert s.error_log_text().count("(--max-requests): replacing") >= 4
        s.wait_workers(2)
    finally:
        problems = s.stop()
    assert problems == []


def test_failed_rolling_restart_keeps_the_old_workers(tmp_path):
    with NotifySocket() as notify:
        s = sup_server(tmp_path, workers=2,
                       env={"NOTIFY_SOCKET": notify.path}).start()
        appdir = tmp_path / "srv-app"
        try:
            old = set(s.wait_workers(2))
            notify.wait("READY", "1")
            (appdir / "BROKEN").touch()  # a deploy gone wrong
            mark = s.log_mark()
            os.kill(s.pid, signal.SIGHUP)
            r = notify.wait("RELOADING", "1")
            i = notify.wait("READY", "1", start=r + 1)
            assert "reload failed" in notify.messages[i][1]["STATUS"]
            s.wait_for_log("Rolling restart stopped", since=mark)
            assert "sup_app is broken on purpose" in s.log_since(mark)
            time.sleep(0.5)  # pacing: no retry may follow
            assert set(s.worker_pids()) == old
            assert s.log_since(mark).count("Booting worker") == 1
            assert worker_pid_of(s) in old
            # fixed: the next HUP goes through
            (appdir / "BROKEN").unlink()
            os.kill(s.pid, signal.SIGHUP)
            r = notify.wait("RELOADING", "1", start=i + 1)
            notify.wait("READY", "1", start=r + 1)
            new = set(s.wait_workers(2))
            assert not new & old
        finally:
            problems = s.stop()
        assert problems == []
        assert all(alive(p) is False for p in old)
