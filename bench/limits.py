#!/usr/bin/python3
"""Limits under attack, measured (a report, not a test): the two figures
issue 12 gave, for one or two sluice binaries.

    /usr/bin/python3 bench/limits.py [--sluice-bin ./sluice]
                                     [--before-bin ../old/sluice]
                                     [--idle 1000] [--emfile-secs 3]

idle:   one worker at its default --worker-connections (1000) and
        --keep-alive (5 s); IDLE keep-alive connections are opened and each
        does one request, then three fresh requests are timed, one after
        the other (Connection: close). With every slot idle, the first used
        to wait for a keep-alive timeout to free a slot.
emfile: one worker under `prlimit --nofile=64:64`; 120 connections are
        opened and held for EMFILE_SECS seconds, which run the worker out of
        descriptors. Reported: the worker's CPU seconds over that time, the
        error log's accept4() lines, and how long a fresh request takes
        once the 120 have closed.

The tests (tests/e2e/test_idle_evict.py, test_fd_limits.py) check the same
behaviour on a small scale; this prints the figures at the issue's scale.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
APPS = os.path.join(REPO, "tests", "apps")
HELLO = b"GET /hello HTTP/1.1\r\nHost: bench\r\n\r\n"
HELLO_CLOSE = b"GET /hello HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary, logdir, prefix=()):
    port = free_port()
    log = os.path.join(logdir, "error-%d.log" % port)
    cmd = list(prefix) + [binary, "-b", "127.0.0.1:%d" % port, "-w", "1",
                          "--pythonpath", APPS, "--error-logfile", log,
                          "wsgi_app:app"]
    proc = subprocess.Popen(cmd, start_new_session=True,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        try:
            fresh_request(port, 2)
            return proc, port, log
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("%s did not start (see %s)" % (binary, log))


def stop(proc):
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()


def fresh_request(port, timeout=30):
    """Seconds for one request on a fresh connection."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(HELLO_CLOSE)
        if not s.recv(12).startswith(b"HTTP/1.1 200"):
            raise OSError("bad answer")
    return time.monotonic() - t0


def worker_of(proc):
    path = "/proc/%d/task/%d/children" % (proc.pid, proc.pid)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        with open(path) as f:
            kids = f.read().split()
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    sys.exit("no worker")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle(binary, logdir, n):
    proc, port, _ = start(binary, logdir)
    held = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            held.append(s)
            s.sendall(HELLO)
            s.recv(4096)
        return [fresh_request(port) for _ in range(3)]
    finally:
        for s in held:
            s.close()
        stop(proc)


def emfile(binary, logdir, secs):
    proc, port, log = start(binary, logdir,
                            [shutil.which("prlimit") or "/usr/bin/prlimit",
                             "--nofile=64:64", "--"])
    held = []
    try:
        worker = worker_of(proc)
        cpu0 = cpu_seconds(worker)
        for _ in range(120):
            held.append(socket.create_connection(("127.0.0.1", port),
                                                 timeout=10))
        time.sleep(secs)  # the measured stretch itself
        cpu = cpu_seconds(worker) - cpu0
        for s in held:
            s.close()
        held = []
        after = fresh_request(port)
        with open(log, errors="replace") as f:
            lines = sum(1 for line in f if "accept4() failed" in line)
        return cpu, lines, after
    finally:
        for s in held:
            s.close()
        stop(proc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice-bin",
                    default=os.environ.get("SLUICE_BIN",
                                           os.path.join(REPO, "sluice")))
    ap.add_argument("--before-bin")
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--emfile-secs", type=float, default=3.0)
    a = ap.parse_args()
    arms = [("after", a.sluice_bin)]
    if a.before_bin:
        arms.insert(0, ("before", a.before_bin))
    logdir = tempfile.mkdtemp(prefix="sluice-limits-")
    print("| binary | fresh requests with %d idle held (s) | worker CPU "
          "over %.0f s at EMFILE (s) | accept4() lines | fresh request "
          "after (s) |" % (a.idle, a.emfile_secs))
    print("|---|---|---|---|---|")
    for name, binary in arms:
        times = idle(os.path.abspath(binary), logdir, a.idle)
        cpu, lines, after = emfile(os.path.abspath(binary), logdir,
                                   a.emfile_secs)
        print("| %s | %s | %.2f | %d | %.3f |"
              % (name, ", ".join("%.3f" % t for t in times), cpu, lines,
                 after))
    shutil.rmtree(logdir, ignore_errors=True)


if __name__ == "__main__":
    main()
