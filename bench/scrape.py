#!/usr/bin/python3
"""Time GET /metrics: a report, not a test.

Starts ./sluice (or --sluice-bin) with --workers 2 and --metrics-bind on
free ports, sends a few requests so the counters are not all zero, then
times N sequential scrapes (a fresh connection each, as Prometheus does)
and prints the mean, median, p99 and max in milliseconds.

    /usr/bin/python3 bench/scrape.py [--scrapes 100] [--workers 2]
"""

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, target):
    """One GET on a fresh connection; the whole response's bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.sendall(b"GET %s HTTP/1.1\r\nHost: bench\r\nConnection: close"
                  b"\r\n\r\n" % target.encode())
        data = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                return data
            data += chunk


def wait_serving(port, proc):
    end = time.monotonic() + 20
    while time.monotonic() < end:
        if proc.poll() is not None:
            sys.exit("sluice exited with %s" % proc.returncode)
        try:
            if get(port, "/hello").startswith(b"HTTP/1.1 200"):
                return
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit("sluice did not serve within 20 s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scrapes", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sluice-bin", default=os.environ.get(
        "SLUICE_BIN", str(REPO / "sluice")))
    a = ap.parse_args()
    port, mport = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [a.sluice_bin, "-w", str(a.workers), "-b", "127.0.0.1:%d" % port,
             "--metrics-bind", "127.0.0.1:%d" % mport,
             "--pythonpath", str(REPO / "bench" / "apps"),
             "--error-logfile", os.path.join(tmp, "error.log"),
             "hello_wsgi:app"], start_new_session=True,
            stdin=subprocess.DEVNULL)
        try:
            wait_serving(port, proc)
            for _ in range(50):
                get(port, "/hello")
            size = len(get(mport, "/metrics"))
            times = []
            for _ in range(a.scrapes):
                t0 = time.perf_counter()
                r = get(mport, "/metrics")
                times.append((time.perf_counter() - t0) * 1000)
                assert r.startswith(b"HTTP/1.1 200"), r[:100]
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print("%d scrapes, %d workers, %d bytes each: mean %.3f ms, median "
          "%.3f ms, p99 %.3f ms, max %.3f ms"
          % (a.scrapes, a.workers, size, statistics.mean(times),
             statistics.median(times), p99, times[-1]))


if __name__ == "__main__":
    main()
