#!/usr/bin/python3
"""Soak: millions of requests of mixed shapes against one worker.

Run by hand (minutes), not in CI; tests/e2e/test_soak.py runs a short
variant through the same client. One sluice worker (-w 1) serves
tests/apps/soak_app.py while several client processes repeat a cycle of
shapes, each answer checked byte for byte:

  keep-alive   20 GETs, one after the other, on one connection
  pipelined    16 GETs written at once, 16 answers read
  chunked      4 chunked uploads echoed back, on one connection
  garbage      one malformed request: a 4xx/5xx answer, then the close
  reset        a 4 MiB response, the client's receive buffer small; after
               the head the client closes with SO_LINGER 0 (a reset while
               the response streams)
  close        one GET with Connection: close

Every 100,000 requests the worker's VmRSS and open fds are sampled. At the
end the clients stop, the fd count must come back to the count before the
load, the worker's pid must be the one it started with, and the
supervisor's log must hold no crash line. The report (Markdown) goes to
stdout and, with --out, to a file.

    nice -n 19 /usr/bin/python3 bench/soak.py --requests 2000000 \\
        --out bench/results/soak.md
"""

import argparse
import multiprocessing
import os
import random
import re
import socket
import struct
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for sub in ("tests/e2e", "tests/apps"):
    if str(REPO / sub) not in sys.path:
        sys.path.insert(0, str(REPO / sub))

from soak_app import expected_body  # noqa: E402

HELLO = b"hello\n"
GET_HELLO = b"GET /hello HTTP/1.1\r\nHost: soak\r\n\r\n"
RESET_SIZE = 4 * 1024 * 1024
GARBAGE = (
    b"GARBAGE\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
    b"Content-Length: 6\r\n\r\nhello!",
    b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"zz\r\nhello\r\n0\r\n\r\n",
    b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
)
# Read before the server is stopped, so its own shutdown lines are not in it.
CRASH_RE = re.compile(r"\[(ERROR|CRITICAL)\]|exited with code|signal|"
                      r"Traceback|Sanitizer|runtime error|core dumped", re.I)
IO_TIMEOUT = 30.0


class Bad(Exception):
    """An answer that did not come as expected (closed early, say)."""


class Wrong(Bad):
    """An answer that came whole but is not the one expected: its failure
    kind starts with WRONG."""


class Conn:
    """A client socket and the bytes read from it but not yet used."""

    def __init__(self, addr, rcvbuf=0):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(IO_TIMEOUT)
        self.sock.connect(addr)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def close(self):
        self.sock.close()

    def reset(self):
        """Close with SO_LINGER 0: the kernel sends a RST."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                             struct.pack("ii", 1, 0))
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        data = self.sock.recv(262144)
        if not data:
            raise Bad("closed early")
        self.buf += data

    def head(self):
        """(status, {lower name: value}) of the next response head."""
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            self._fill()
        lines = bytes(self.buf[:end]).split(b"\r\n")
        del self.buf[:end + 4]
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise Wrong("bad status line %r" % lines[0][:80])
        hdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            hdrs[k.strip().lower()] = v.strip()
        return int(parts[1]), hdrs

    def response(self):
        """(status, headers, body) of a Content-Length framed response."""
        status, hdrs = self.head()
        n = int(hdrs.get(b"content-length", b"0"))
        while len(self.buf) < n:
            self._fill()
        body = bytes(self.buf[:n])
        del self.buf[:n]
        return status, hdrs, body

    def expect_eof(self):
        while True:
            data = self.sock.recv(65536)
            if not data:
                return
            self.buf += data
            if len(self.buf) > 1 << 20:
                raise Wrong("no close after the answer")


def hello_ok(c):
    status, _, body = c.response()
    if status != 200 or body != HELLO:
        raise Wrong("hello answered %d %r" % (status, body[:60]))


def shape_keep_alive(addr, rng):
    c = Conn(addr)
    try:
        for _ in range(20):
            c.send(GET_HELLO)
            hello_ok(c)
    finally:
        c.close()
    return 20


def shape_pipelined(addr, rng):
    c = Conn(addr)
    try:
        c.send(GET_HELLO * 16)
        for _ in range(16):
            hello_ok(c)
    finally:
        c.close()
    return 16


def chunked_body(body, rng):
    out, pos = [], 0
    while pos < len(body):
        n = rng.randint(1, 3000)
        piece = body[pos:pos + n]
        out.append(b"%x\r\n%s\r\n" % (len(piece), piece))
        pos += n
    out.append(b"0\r\n\r\n")
    return b"".join(out)


def shape_chunked(addr, rng):
    c = Conn(addr)
    try:
        for _ in range(4):
            body = rng.randbytes(rng.randint(1, 8192))
            c.send(b"POST /echo HTTP/1.1\r\nHost: soak\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n"
                   + chunked_body(body, rng))
            status, _, got = c.response()
            if status != 200 or got != body:
                raise Wrong("echo answered %d, %d bytes of %d"
                          % (status, len(got), len(body)))
    finally:
        c.close()
    return 4


def shape_garbage(addr, rng):
    c = Conn(addr)
    try:
        c.send(rng.choice(GARBAGE))
        status, _ = c.head()
        if not 400 <= status < 600:
            raise Wrong("garbage answered %d" % status)
        c.expect_eof()
    finally:
        c.close()
    return 1


def shape_reset(addr, rng):
    c = Conn(addr, rcvbuf=8192)
    try:
        c.send(b"GET /big?size=%d HTTP/1.1\r\nHost: soak\r\n\r\n"
               % RESET_SIZE)
        status, hdrs = c.head()
        if status != 200 or hdrs.get(b"content-length") != b"%d" % RESET_SIZE:
            raise Wrong("big answered %d" % status)
        while not c.buf:
            c._fill()
        want = expected_body(len(c.buf))
        if bytes(c.buf) != want:
            raise Wrong("big body wrong in its first %d bytes" % len(c.buf))
    except BaseException:
        c.close()
        raise
    c.reset()
    return 1


def shape_close(addr, rng):
    c = Conn(addr)
    try:
        c.send(b"GET /hello HTTP/1.1\r\nHost: soak\r\nConnection: close"
               b"\r\n\r\n")
        hello_ok(c)
        c.expect_eof()
    finally:
        c.close()
    return 1


def shape_big(addr, rng):
    """Not in the soak's cycle (the fault test's): a whole response of up
    to 1 MiB, read and checked."""
    size = rng.randint(1, 1 << 20)
    c = Conn(addr)
    try:
        c.send(b"GET /big?size=%d HTTP/1.1\r\nHost: soak\r\n\r\n" % size)
        status, _, body = c.response()
        if status != 200 or body != expected_body(size):
            raise Wrong("big answered %d, %d bytes of %d"
                        % (status, len(body), size))
    finally:
        c.close()
    return 1


SHAPES = (shape_keep_alive, shape_pipelined, shape_chunked, shape_garbage,
          shape_reset, shape_close)


def client(addr, total, counter, errors_q, seed, shapes=SHAPES, until=None):
    """Repeat the cycle of SHAPES until COUNTER reaches TOTAL (or the
    monotonic time UNTIL); put a Counter of failures (kind -> count) and
    one of requests done (shape -> count) on ERRORS_Q at the end."""
    rng = random.Random(seed)
    errors = Counter()
    done = Counter()
    while counter.value < total and (until is None or
                                     time.monotonic() < until):
        for shape in shapes:
            try:
                n = shape(addr, rng)
                done[shape.__name__] += n
            except (Bad, OSError) as e:
                errors["%s%s: %s" % ("WRONG " if isinstance(e, Wrong) else "",
                                     shape.__name__[6:],
                                     re.sub(r"\d+", "N", str(e))[:80])] += 1
                n = 1
            with counter.get_lock():
                counter.value += n
    errors_q.put((dict(errors), dict(done)))


class Load:
    """PROCS client processes against ADDR until TOTAL requests are done
    (or SECONDS have passed), each repeating the cycle of SHAPES."""

    def __init__(self, addr, total, procs=4, seed=1, shapes=SHAPES,
                 seconds=None):
        ctx = multiprocessing.get_context("fork")
        self.total = total
        self.counter = ctx.Value("q", 0)
        self.queue = ctx.Queue()
        until = None if seconds is None else time.monotonic() + seconds
        self.procs = [ctx.Process(target=client,
                                  args=(addr, total, self.counter,
                                        self.queue, seed * 1000 + i,
                                        shapes, until),
                                  daemon=True)
                      for i in range(procs)]
        self.errors = Counter()
        self.done = Counter()

    def start(self):
        for p in self.procs:
            p.start()
        return self

    @property
    def count(self):
        return self.counter.value

    def running(self):
        return any(p.is_alive() for p in self.procs)

    def join(self, timeout):
        """Collect every client's result; fails after TIMEOUT seconds."""
        end = time.monotonic() + timeout
        for _ in self.procs:
            errors, done = self.queue.get(timeout=max(0.1, end -
                                                      time.monotonic()))
            self.errors.update(errors)
            self.done.update(done)
        for p in self.procs:
            p.join(max(0.1, end - time.monotonic()))
            if p.is_alive():
                p.kill()
                raise AssertionError("a client process did not finish")
            if p.exitcode != 0:
                raise AssertionError("a client process exited %s"
                                     % p.exitcode)
        return self


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for %d" % pid)


def wait_fds(pid, baseline, timeout):
    """Poll the fd count of PID until it is BASELINE; the last count."""
    end = time.monotonic() + timeout
    while True:
        n = fd_count(pid)
        if n <= baseline or time.monotonic() > end:
            return n
        time.sleep(0.05)


def crash_lines(text):
    return [line for line in text.splitlines() if CRASH_RE.search(line)]


def run(args):
    import helpers
    workdir = Path(tempfile.mkdtemp(prefix="sluice-soak-"))
    srv_args = ["--keep-alive", "5"]
    app = "soak_app:asgi" if args.asgi else "soak_app:app"
    if args.asgi:
        srv_args += ["--interface", "asgi"]
    server = helpers.Server(workdir, app, args=srv_args, inline=args.inline,
                            ready_path="/hello",
                            binary=args.sluice_bin,
                            pythonpath=(str(REPO / "tests" / "apps"),))
    server.start()
    try:
        pid = server.wait_workers(1)[0]
        base_fds = wait_fds(pid, 0, 1.0)
        addr = (server.host, server.port)
        load = Load(addr, args.requests, procs=args.procs).start()
        t0 = time.monotonic()
        samples = []
        step = args.sample_every
        nxt = step
        window = []
        last = 0.0
        while load.running() and load.count < args.requests:
            now = time.monotonic()
            if now - last >= 0.25:
                window.append(rss_kib(pid))
                last = now
            if load.count >= nxt:
                rss = rss_kib(pid)
                window.append(rss)
                samples.append((load.count, now - t0, rss, fd_count(pid),
                                min(window), max(window),
                                median(window)))
                print("%9d requests %7.1f s  VmRSS %7d KiB  fds %4d  "
                      "window %d-%d median %d" % samples[-1], flush=True)
                window = [rss]
                nxt += step
            time.sleep(0.05)
        load.join(120)
        elapsed = time.monotonic() - t0
        rss = rss_kib(pid)
        window.append(rss)
        samples.append((load.count, elapsed, rss, fd_count(pid),
                        min(window), max(window), median(window)))
        end_fds = wait_fds(pid, base_fds, 10.0)
        pids = server.worker_pids()
        log = server.error_log_text() + server.stderr_path.read_text(
            errors="replace")
        problems = server.stop()
    except BaseException:
        server.stop()
        raise
    return {"samples": samples, "base_fds": base_fds, "end_fds": end_fds,
            "pid": pid, "pids_after": pids, "elapsed": elapsed,
            "errors": load.errors, "done": load.done,
            "crash_lines": crash_lines(log), "stop_problems": problems,
            "total": load.count, "workdir": workdir}


def report(res, args):
    s = res["samples"]
    # The baseline is the interval that starts at the first 100k requests
    # (the one before it is the warm-up). A single reading moves by a
    # megabyte or two within seconds with what is in flight (4 MiB
    # responses streaming to small receive buffers, pipelined answers,
    # uploads) and with the heap's top given back and taken again, so each
    # interval is read every quarter second and judged by its median: a
    # leak raises it, a spike or a dip does not. Floors and ceilings are
    # shown beside it.
    base = next((x for x in s[1:] if x[0] >= 2 * args.sample_every), s[-1])
    growth = max(x[6] for x in s if x[0] >= base[0]) - base[6]
    end_growth = s[-1][6] - base[6]
    floor = s[-1][4] - base[4]
    peak = max(x[5] for x in s if x[0] >= base[0]) - base[5]
    first = next((x for x in s if x[0] >= args.sample_every), s[0])
    out = ["# Soak: %s requests of mixed shapes, one worker" %
           format(res["total"], ","), "",
           "Command: `bench/soak.py --requests %d --procs %d%s%s` "
           "(%s, %s executor), %.0f s, %.0f requests/s." % (
               args.requests, args.procs, " --asgi" if args.asgi else "",
               " --inline" if args.inline else "",
               "ASGI" if args.asgi else "WSGI",
               "inline" if args.inline else "pump",
               res["elapsed"], res["total"] / res["elapsed"]), "",
           "VmRSS is read at each mark and every 0.25 s between marks; "
           "an interval is the stretch that ends at its mark.", "",
           "| requests | seconds | VmRSS KiB at the mark | interval "
           "median KiB | median vs %s | interval min-max KiB | open fds |"
           % format(base[0], ","),
           "|---:|---:|---:|---:|---:|---:|---:|"]
    for n, t, rss, fds, lo, hi, med in s:
        out.append("| %s | %.0f | %d | %d | %+d | %d-%d | %d |"
                   % (format(n, ","), t, rss, med, med - base[6], lo, hi,
                      fds))
    ok = (growth <= 1024 and res["end_fds"] == res["base_fds"]
          and res["pids_after"] == [res["pid"]] and not res["crash_lines"]
          and not res["stop_problems"])
    out += ["",
            "- RSS growth after the first %s requests (the interval that "
            "ends at %s is the baseline): interval median %+d KiB at the "
            "highest, %+d KiB at the end (bar: 1024 KiB); floor %+d KiB at "
            "the end, ceiling %+d KiB at the highest"
            % (format(first[0], ","), format(base[0], ","), growth,
               end_growth, floor, peak),
            "- single readings: %d KiB at %s, %d KiB at the end (%+d)"
            % (first[2], format(first[0], ","), s[-1][2],
               s[-1][2] - first[2]),
            "- open fds: %d before the load, %d after it (bar: equal)"
            % (res["base_fds"], res["end_fds"]),
            "- worker pid %d, after the load: %s; crash lines in the "
            "logs: %d; problems stopping: %s"
            % (res["pid"], res["pids_after"], len(res["crash_lines"]),
               res["stop_problems"] or "none"),
            "- requests by shape: %s" % ", ".join(
                "%s %s" % (k[6:], format(v, ","))
                for k, v in sorted(res["done"].items())),
            "- client-side failures: %s" % (
                ", ".join("%s x%d" % kv for kv in res["errors"].items())
                or "none"),
            "- verdict: %s" % ("PASS" if ok else "FAIL"), ""]
    return "\n".join(out), ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=2000000)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--sample-every", type=int, default=100000)
    ap.add_argument("--asgi", action="store_true")
    ap.add_argument("--inline", action="store_true")
    ap.add_argument("--sluice-bin", default=os.environ.get(
        "SLUICE_BIN", str(REPO / "sluice")))
    ap.add_argument("--out")
    args = ap.parse_args()
    res = run(args)
    text, ok = report(res, args)
    print(text)
    if res["crash_lines"]:
        print("crash lines:\n" + "\n".join(res["crash_lines"][:20]))
    if args.out:
        Path(args.out).write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
