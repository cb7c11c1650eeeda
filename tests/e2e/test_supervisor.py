"""The supervisor driven by real signals: every row of the signal table.

TERM drains (an in-flight request is answered), INT and QUIT stop at once,
HUP replaces every worker under load without a failed request, TTIN/TTOU
change the worker count, USR1 reopens a log file that was moved away, USR2
upgrades the binary in place while requests keep flowing and the old
supervisor exits. Also here: --pid and the process titles.

The application is written by the test into its own directory (sup_app.py
below), so these tests depend on nothing but the binary. The helpers that
the other test_supervisor_* files share live here too: the app, a load
generator and a NOTIFY_SOCKET recorder.
"""

import os
import shutil
import signal
import socket
import struct
import tempfile
import textwrap
import threading
import time

import pytest

import helpers
from helpers import Server, wait_until

pytestmark = pytest.mark.sluice_only

SUP_APP = textwrap.dedent('''\
    """sluice supervisor tests' app: /pid, /slow, /hang, /log."""
    import os
    import sys
    import time
    from urllib.parse import parse_qs

    HERE = os.path.dirname(os.path.abspath(__file__))
    if os.path.exists(os.path.join(HERE, "BROKEN")):
        raise RuntimeError("sup_app is broken on purpose")
    if os.path.exists(os.path.join(HERE, "IMPORT_SLEEP")):
        time.sleep(60)


    def record(line):
        path = os.environ.get("E2E_CALL_LOG")
        if path:
            with open(path, "a") as f:
                f.write(line + "\\n")


    def hang_here_forever():
        while True:
            time.sleep(0.05)


    def app(environ, start_response):
        path = environ["PATH_INFO"]
        q = {k: v[-1] for k, v in
             parse_qs(environ.get("QUERY_STRING", "")).items()}
        if path == "/slow":
            record("slow-start %s" % q.get("id", ""))
            time.sleep(float(q.get("t", "1")))
        elif path == "/hang":
            record("hang-start")
            hang_here_forever()
        elif path == "/log":
            sys.stderr.write("sup-app %d says %s\\n"
                             % (os.getpid(), q.get("msg", "")))
            sys.stderr.flush()
        body = str(os.getpid()).encode()
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  ("Content-Length", str(len(body)))])
        return [body]
    ''')


def write_app(directory):
    """sup_app.py in DIRECTORY (created); returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sup_app.py").write_text(SUP_APP)
    return directory


def sup_server(tmp_path, workers=1, args=(), env=None, inline=False,
               name="srv"):
    """A Server for sup_app (not started) with its own app directory."""
    appdir = write_app(tmp_path / (name + "-app"))
    return Server(tmp_path / name, "sup_app:app", workers=workers,
                  args=list(args), env=env, inline=inline,
                  pythonpath=(str(appdir),), ready_path="/pid")


def worker_pid_of(server, timeout=5):
    return int(server.get("/pid", timeout=timeout).body)


def alive(pid):
    """PID exists and is not a zombie."""
    st = helpers._proc_stat(pid)
    return st is not None and st[0] != "Z"


def wait_gone(pids, timeout, what="processes to exit"):
    wait_until(lambda: not [p for p in pids if alive(p)], timeout, what)


class Load:
    """THREADS clients requesting PATH on fresh connections until stopped.

    Each result is (monotonic time, worker pid or None, error or None).
    """

    def __init__(self, server, path="/pid", threads=3):
        self.server = server
        self.path = path
        self.results = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True)
                         for _ in range(threads)]

    def __enter__(self):
        for t in self._threads:
            t.start()
        wait_until(lambda: len(self.results) >= 10, 10, "the load to start")
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def _run(self):
        while not self._stop.is_set():
            try:
                r = self.server.get(self.path, timeout=10)
                ok = r.status == 200
                res = (time.monotonic(), int(r.body) if ok else None,
                       None if ok else "status %d" % r.status)
            except Exception as e:  # noqa: BLE001 - every failure counts
                res = (time.monotonic(), None, repr(e))
            with self._lock:
                self.results.append(res)

    def count(self):
        with self._lock:
            return len(self.results)

    def failures(self, since=0.0):
        with self._lock:
            return [r for r in self.results if r[2] and r[0] >= since]

    def pids(self):
        with self._lock:
            return {r[1] for r in self.results if r[1]}

    def wait_served_by(self, pids, timeout=10):
        wait_until(lambda: set(pids) <= self.pids(), timeout,
                   "requests served by %s" % sorted(pids))


class NotifySocket:
    """A NOTIFY_SOCKET owned by the test: every datagram, with its sender's
    pid (SO_PASSCRED), in arrival order."""

    def __init__(self):
        # sun_path is short: not under pytest's long tmp_path
        self.dir = tempfile.mkdtemp(prefix="sl-notify-")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.setblocking(False)
        self.messages = []  # (pid, {key: value}, monotonic time)

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def poll(self):
        while True:
            try:
                data, anc, _, _ = self.sock.recvmsg(
                    4096, socket.CMSG_SPACE(struct.calcsize("iII")))
            except BlockingIOError:
                return self.messages
            pid = None
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and \
                        kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("iII", payload[:12])[0]
            fields = dict(line.split("=", 1)
                          for line in data.decode().split("\n") if "=" in line)
            self.messages.append((pid, fields, time.monotonic()))

    def find(self, key, value=None, start=0):
        """Index of the first message from START on that has KEY (=VALUE)."""
        for i, (_, f, _) in enumerate(self.poll()[start:], start):
            if key in f and (value is None or f[key] == value):
                return i
        return None

    def wait(self, key, value=None, start=0, timeout=20):
        return wait_until(
            lambda: (lambda i: i + 1 if i is not None else None)(
                self.find(key, value, start)),
            timeout, "%s=%s from index %d in %s"
            % (key, value or "*", start, self.messages)) - 1

    def states(self):
        """The sequence of READY/RELOADING/STOPPING/MAINPID messages."""
        out = []
        for _, f, _ in self.poll():
            for k in ("MAINPID", "RELOADING", "READY", "STOPPING"):
                if k in f:
                    out.append(k)
        return out


# --------------------------------------------------------------- TERM, INT

def test_term_answers_the_request_in_flight(tmp_path):
    s = sup_server(tmp_path).start()
    out = {}

    def slow():
        out["r"] = s.get("/slow?t=1.5&id=term", timeout=10)
    t = threading.Thread(target=slow)
    t.start()
    s.wait_for_call("slow-start term")
    workers = s.worker_pids()
    t0 = time.monotonic()
    os.kill(s.pid, signal.SIGTERM)
    t.join(10)
    assert out["r"].status == 200
    s.proc.wait(10)
    took = time.monotonic() - t0
    assert s.proc.returncode == 0, s.diagnostics()
    assert 0.8 < took < 5, took
    assert not [p for p in workers if alive(p)]
    assert s.stop() == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGQUIT])
def test_int_and_quit_stop_at_once(tmp_path, sig):
    s = sup_server(tmp_path, workers=2).start()
    errors = []

    def slow():
        try:
            s.get("/slow?t=8&id=fast", timeout=10)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    t = threading.Thread(target=slow)
    t.start()
    s.wait_for_call("slow-start fast")
    workers = s.worker_pids()
    t0 = time.monotonic()
    os.kill(s.pid, sig)
    s.proc.wait(10)
    t.join(10)
    assert time.monotonic() - t0 < 3
    assert errors, "the 8 s request was answered"
    assert s.proc.returncode == 0, s.diagnostics()
    assert not [p for p in workers if alive(p)]
    assert s.stop() == []


# ------------------------------------------------------------------- HUP

def test_hup_replaces_every_worker_under_load(tmp_path):
    s = sup_server(tmp_path, workers=2).start()
    try:
        old = set(s.wait_workers(2))
        with Load(s) as load:
            mark = s.log_mark()
            os.kill(s.pid, signal.SIGHUP)
            s.wait_for_log("Rolling restart done", timeout=20, since=mark)
            new = set(s.wait_workers(2))
            assert not old & new
            load.wait_served_by(new)
        assert load.failures() == [], load.failures()[:5]
        assert old & load.pids(), "no request reached the old workers"
        log = s.log_since(mark)
        # each old worker drained only after a new one was ready
        assert log.index("is ready") < log.index("replaced: draining")
    finally:
        problems = s.stop()
    assert problems == []


# ------------------------------------------------------------- TTIN/TTOU

def test_ttin_and_ttou_change_the_worker_count(tmp_path):
    s = sup_server(tmp_path, workers=2).start()
    try:
        # one signal at a time: two of a kind in flight count as one
        first = set(s.wait_workers(2))
        os.kill(s.pid, signal.SIGTTIN)
        s.wait_workers(3)
        os.kill(s.pid, signal.SIGTTIN)
        assert first < set(s.wait_workers(4))
        os.kill(s.pid, signal.SIGTTOU)
        three = s.wait_workers(3)
        os.kill(s.pid, signal.SIGTTOU)
        s.wait_workers(2)
        os.kill(s.pid, signal.SIGTTOU)
        one = s.wait_workers(1)
        os.kill(s.pid, signal.SIGTTOU)  # never below one
        s.wait_for_log("ttou: 1 workers (was 2)")
        assert set(one) <= set(three)
        time.sleep(0.5)  # pacing: nothing else may start or stop
        assert s.worker_pids() == one
        assert worker_pid_of(s) == one[0]
    finally:
        problems = s.stop()
    assert problems == []


# ------------------------------------------------------------------- USR1

def test_usr1_reopens_the_error_log(tmp_path):
    s = sup_server(tmp_path, workers=2).start()
    try:
        moved = s.error_log.with_name("error.log.1")
        os.rename(s.error_log, moved)
        os.kill(s.pid, signal.SIGUSR1)
        wait_until(s.error_log.exists, 5, "a new error log")
        s.wait_for_log("log files reopened")
        # every worker writes to the new file too (each acts on its USR1
        # in its own time: ask until both have been heard there)
        wanted = set(s.worker_pids())

        def both_in_new_log():
            s.get("/log?msg=after-usr1")
            text = s.error_log_text()
            return all("sup-app %d says after-usr1" % p in text
                       for p in wanted)
        wait_until(both_in_new_log, 10, "both workers to log to the new file",
                   interval=0.05)
        assert "Handling signal: usr1" not in moved.read_text()
    finally:
        problems = s.stop()
    assert problems == []


# ------------------------------------------------------------------- USR2

def copy_binaries(bindir):
    """sluice and sluice-worker copied side by side into BINDIR (created);
    returns the copy of sluice."""
    bindir.mkdir()
    shutil.copy2(helpers.worker_bin(), bindir / "sluice-worker")
    shutil.copy2(helpers.sluice_bin(), bindir / "sluice")
    return bindir / "sluice"


class CopiedBinaryServer(Server):
    """A Server run from a copy of the binary that the test can replace."""

    def __init__(self, binary, *a, **kw):
        super().__init__(*a, **kw)
        self.binary = binary

    def command(self):
        return [str(self.binary)] + super().command()[1:]


def test_usr2_upgrades_the_binary_while_serving(tmp_path):
    bindir = tmp_path / "bin"
    binary = copy_binaries(bindir)
    appdir = write_app(tmp_path / "app")
    pidfile = tmp_path / "sluice.pid"
    with NotifySocket() as notify:
        s = CopiedBinaryServer(
            binary, tmp_path / "srv", "sup_app:app", workers=2,
            pythonpath=(str(appdir),), ready_path="/pid",
            args=["--pid", str(pidfile)],
            env={"NOTIFY_SOCKET": notify.path}).start()
        new_sup = None
        try:
            old_sup = s.pid
            notify.wait("READY", "1")
            old_workers = set(s.wait_workers(2))
            # the upgrade: a new build lands at the same paths
            for name, src in (("sluice-worker", helpers.worker_bin()),
                              ("sluice", helpers.sluice_bin())):
                shutil.copy2(src, bindir / (name + ".new"))
                os.rename(bindir / (name + ".new"), bindir / name)
            with Load(s) as load:
                os.kill(old_sup, signal.SIGUSR2)
                s.proc.wait(20)
                assert s.proc.returncode == 0, s.diagnostics()
                new_sup = int(pidfile.read_text())
                assert new_sup != old_sup and alive(new_sup)
                new_workers = set(helpers.children_of(new_sup))
                assert len(new_workers) == 2
                assert not new_workers & old_workers
                load.wait_served_by(new_workers)
            assert load.failures() == [], load.failures()[:5]
            assert old_workers & load.pids()
            assert not [p for p in old_workers if alive(p)]
            # the new supervisor runs the new file, not the deleted old one,
            # and its workers the new worker beside it
            assert os.readlink("/proc/%d/exe" % new_sup) == str(binary)
            for w in new_workers:
                assert os.readlink("/proc/%d/exe" % w) == \
                    str(bindir / "sluice-worker")
            assert worker_pid_of(s) in new_workers
            # systemd is told who the main process is now
            i = notify.wait("MAINPID", str(new_sup))
            notify.wait("READY", "1", start=1)
            assert notify.messages[i][0] in (old_sup, new_sup)
            assert "STOPPING" not in notify.states()
        finally:
            if new_sup is not None and alive(new_sup):
                os.kill(new_sup, signal.SIGTERM)
                wait_gone([new_sup], 10, "the new supervisor to exit")
            problems = s.stop()
        assert problems == []
        assert not pidfile.exists()


def test_usr2_with_a_broken_binary_keeps_serving(tmp_path):
    bindir = tmp_path / "bin"
    binary = copy_binaries(bindir)
    appdir = write_app(tmp_path / "app")
    s = CopiedBinaryServer(binary, tmp_path / "srv", "sup_app:app",
                           workers=2, pythonpath=(str(appdir),),
                           ready_path="/pid").start()
    try:
        workers = set(s.wait_workers(2))
        broken = bindir / "sluice.new"
        broken.write_text("#!/bin/sh\nexit 7\n")
        broken.chmod(0o755)
        os.rename(broken, binary)
        mark = s.log_mark()
        os.kill(s.pid, signal.SIGUSR2)
        s.wait_for_log("Binary upgrade failed: the new supervisor", since=mark)
        assert "exited with code 7" in s.log_since(mark)
        assert set(s.worker_pids()) == workers
        assert worker_pid_of(s) in workers
    finally:
        problems = s.stop()
    assert problems == []


# ---------------------------------------------------------- --pid, titles

def test_pid_file_and_process_titles(tmp_path):
    pidfile = tmp_path / "run" / "sluice.pid"
    pidfile.parent.mkdir()
    s = sup_server(tmp_path, workers=2,
                   args=["--pid", str(pidfile), "--name", "shop"]).start()
    try:
        assert int(pidfile.read_text()) == s.pid
        assert [p.name for p in pidfile.parent.iterdir()] == ["sluice.pid"]

        def title(pid):
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                return f.read().split(b"\0")[0].decode()
        assert title(s.pid) == "shop: supervisor [sup_app:app]"
        titles = sorted(title(p) for p in s.wait_workers(2))
        assert titles == ["shop: worker 1 [sup_app:app]",
                          "shop: worker 2 [sup_app:app]"]
        with open("/proc/%d/comm" % s.pid) as f:
            assert f.read().strip() == "shop"
    finally:
        problems = s.stop()
    assert problems == []
    assert not pidfile.exists()
