#!/usr/bin/python3
"""Load client of the upload suite's big arms: N keep-alive connections,
each sending one POST of SIZE bytes after another, for a duration.

    /usr/bin/python3 bench/upload.py --port P --path /upload
        --size 67108864 --conns 4 --duration 10

wrk holds a request body in its Lua state and rewrites it per request,
which does not go well at 64 MiB; this client sends the same buffer on
every request with sendall() (the kernel copies it; Python does not touch
it), reads the response head and its Content-Length body, and records each
request's latency (first byte sent to last byte read). One thread per
connection: sendall() and recv() release the GIL.

When the duration is over no new request starts; the ones in flight are
finished and counted, and the measured time runs until the last one ends,
so requests and the server's CPU time cover the same work. The last line
is the same JSON summary wrk_summary.lua prints (SLUICE-BENCH-JSON ...),
so run.py reads both clients alike. Exit status 0 even with errors: they
are in the summary.
"""

import argparse
import json
import socket
import sys
import threading
import time

JSON_MARK = "SLUICE-BENCH-JSON "
BLOCK = bytes(range(256)) * 4096  # the body's pattern, as suites.pattern()


def body_of(size):
    whole, part = divmod(size, len(BLOCK))
    return BLOCK * whole + BLOCK[:part]


def read_response(sock, buf):
    """Reads one response (head + Content-Length body) from SOCK, BUF being
    bytes already received. Returns (status, body length, leftover bytes);
    raises OSError or ValueError on a broken response."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("EOF before the response head")
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = None
    close = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"connection" and b"close" in value.lower():
            close = True
    if length is None:
        raise ValueError("response without Content-Length")
    while len(rest) < length:
        data = sock.recv(max(65536, length - len(rest)))
        if not data:
            raise ConnectionError("EOF in the response body")
        rest += data
    return status, length, rest[length:], close


class Worker(threading.Thread):
    def __init__(self, args, request, body, stop_at):
        super().__init__(daemon=True)
        self.args, self.request, self.body = args, request, body
        self.stop_at = stop_at
        self.latencies = []
        self.bytes = 0
        self.errors = {"connect": 0, "read": 0, "write": 0, "status": 0,
                       "timeout": 0}

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.args.port),
                                     timeout=self.args.timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def run(self):
        sock, buf = None, b""
        while time.monotonic() < self.stop_at:
            if sock is None:
                try:
                    sock, buf = self.connect(), b""
                except OSError:
                    self.errors["connect"] += 1
                    time.sleep(0.01)  # a refused connect: do not spin
                    continue
            t0 = time.monotonic()
            try:
                sock.sendall(self.request)
                sock.sendall(self.body)
            except socket.timeout:
                self.errors["timeout"] += 1
                sock.close()
                sock = None
                continue
            except OSError:
                self.errors["write"] += 1
                sock.close()
                sock = None
                continue
            try:
                status, length, buf, close = read_response(sock, buf)
            except socket.timeout:
                self.errors["timeout"] += 1
                sock.close()
                sock = None
                continue
            except (OSError, ValueError, IndexError):
                self.errors["read"] += 1
                sock.close()
                sock = None
                continue
            self.latencies.append(time.monotonic() - t0)
            self.bytes += length
            if not 200 <= status < 400:
                self.errors["status"] += 1
            if close:
                sock.close()
                sock = None
        if sock is not None:
            sock.close()


def percentile(values, p):
    if not values:
        return 0
    k = min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))
    return values[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", default="/upload")
    ap.add_argument("--size", type=int, default=64 * 1024 * 1024)
    ap.add_argument("--conns", type=int, default=1)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--timeout", type=float, default=20.0,
                    help="seconds a send or receive may block")
    args = ap.parse_args()

    body = body_of(args.size)
    request = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
               "Content-Type: application/octet-stream\r\n"
               "Content-Length: %d\r\n\r\n"
               % (args.path, args.port, args.size)).encode("ascii")
    t0 = time.monotonic()
    workers = [Worker(args, request, body, t0 + args.duration)
               for _ in range(args.conns)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.monotonic() - t0
    lat = sorted(x for w in workers for x in w.latencies)
    errors = {k: sum(w.errors[k] for w in workers) for k in workers[0].errors}
    us = [int(x * 1e6) for x in lat]
    summary = {
        "requests": len(lat),
        "duration_us": int(elapsed * 1e6),
        "bytes": sum(w.bytes for w in workers),
        "uploaded_bytes": len(lat) * args.size,
        "errors": errors,
        "latency_us": {"mean": round(sum(us) / len(us), 1) if us else 0.0,
                       "p50": percentile(us, 50), "p90": percentile(us, 90),
                       "p99": percentile(us, 99), "max": us[-1] if us else 0},
    }
    print("%d requests in %.2f s" % (len(lat), elapsed))
    print(JSON_MARK + json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
