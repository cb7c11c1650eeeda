#!/usr/bin/python3
"""icount.py - instructions per request under callgrind, before and after.

On a shared machine CPU time per request moves by tens of percent from one
run to the next; the number of instructions a worker executes per request
does not. This runs each arm twice under valgrind's callgrind (every
process of the server's tree), serving N1 and then N2 pipelined requests,
and reports (Ir(N2) - Ir(N1)) / (N2 - N1) for the worker: start-up, the
import of the app and the shutdown cancel out. A report beside the
benchmark, not a replacement for it: it counts instructions, not cache
misses or system calls, and valgrind serialises threads.

    bench/icount.py --before-bin OLD/sluice [--sluice-bin ./sluice]

A build older than sluice-worker (one binary re-executing itself through
/proc/self/exe) must honour SLUICE_SELF_EXE for its re-exec to run under
valgrind: a one-line local change to its spawn.c.
"""
import argparse
import glob
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: (environment, extra arguments, app, path)
ARMS = {
    "wsgi-pump": ({}, [], "hello_wsgi:app", "/"),
    "wsgi-inline": ({"SLUICE_INLINE": "1"}, [], "hello_wsgi:app", "/"),
    "asgi-pump": ({}, ["--interface", "asgi"], "hello_asgi:app", "/"),
    "asgi-inline": ({"SLUICE_INLINE": "1"}, ["--interface", "asgi"],
                    "hello_asgi:app", "/"),
    "healthz": ({}, ["--health-path", "/healthz"], "hello_wsgi:app",
                "/healthz"),
    # {tmp}: the run's own directory
    "wsgi-pump-accesslog": ({}, ["--access-logfile", "{tmp}/access.log"],
                            "hello_wsgi:app", "/"),
    "wsgi-inline-accesslog": ({"SLUICE_INLINE": "1"},
                              ["--access-logfile", "{tmp}/access.log"],
                              "hello_wsgi:app", "/"),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, secs=120.0):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("server exited during start-up")
        try:
            with socket.create_connection(("127.0.0.1", port), 1) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                if s.recv(64).startswith(b"HTTP/1.1 "):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server not ready in %.0f s" % secs)


def load(port, path, n, conns=16, depth=16):
    """Send N requests over CONNS connections, DEPTH at a time on each,
    and read every response."""
    req = ("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode()
    socks = [socket.create_connection(("127.0.0.1", port), 30)
             for _ in range(conns)]
    left = n
    try:
        while left > 0:
            batch = []
            for s in socks:
                k = min(depth, left)
                if k == 0:
                    break
                s.sendall(req * k)
                batch.append((s, k))
                left -= k
            for s, k in batch:
                got, data = 0, b""
                while got < k:
                    chunk = s.recv(65536)
                    if not chunk:
                        raise RuntimeError("connection closed early")
                    data += chunk
                    got = data.count(b"HTTP/1.1 ")
    finally:
        for s in socks:
            s.close()


def worker_ir(outdir):
    """The largest total of the run's callgrind files: the worker's."""
    best = 0
    for f in glob.glob(os.path.join(outdir, "cg.*")):
        with open(f, errors="replace") as fh:
            for line in fh:
                m = re.match(r"(?:totals|summary): (\d+)", line)
                if m:
                    best = max(best, int(m.group(1)))
    return best


def run_once(binary, arm, n):
    env_add, extra, app, path = ARMS[arm]
    port = free_port()
    with tempfile.TemporaryDirectory() as outdir:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PYTHON")}
        env.update(env_add)
        env["PYTHONHASHSEED"] = "0"
        # the worker beside the supervisor: sluice-worker, or (a build from
        # before the split) the binary itself, which must then be told its
        # path: under valgrind /proc/self/exe is valgrind's
        env["SLUICE_WORKER_BIN"] = os.path.join(os.path.dirname(binary),
                                                "sluice-worker")
        env["SLUICE_SELF_EXE"] = binary
        cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes",
               "--callgrind-out-file=%s/cg.%%p" % outdir,
               binary, "-w", "1", "-b", "127.0.0.1:%d" % port,
               "--boot-timeout", "300", "--timeout", "300",
               "--chdir", os.path.join(REPO, "bench", "apps")] + [
                   a.replace("{tmp}", outdir) for a in extra] + [app]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            wait_ready(port, proc)
            load(port, path, n)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(300)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return worker_ir(outdir)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice-bin", default=os.path.join(REPO, "sluice"))
    ap.add_argument("--before-bin", required=True)
    ap.add_argument("--only", default=",".join(ARMS))
    ap.add_argument("--n1", type=int, default=2000)
    ap.add_argument("--n2", type=int, default=12000)
    a = ap.parse_args()
    print("| arm | Ir/request before | after | after/before |")
    print("|---|---:|---:|---:|")
    for arm in a.only.split(","):
        per = []
        for binary in (os.path.abspath(a.before_bin),
                       os.path.abspath(a.sluice_bin)):
            lo = run_once(binary, arm, a.n1)
            hi = run_once(binary, arm, a.n2)
            per.append((hi - lo) / (a.n2 - a.n1))
        print("| %s | %.0f | %.0f | %.3f |" % (arm, per[0], per[1],
                                               per[1] / per[0]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
