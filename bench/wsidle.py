#!/usr/bin/python3
"""Idle WebSockets: what each costs the worker that holds it (issue 32; a
report, not a test).

    /usr/bin/python3 bench/wsidle.py [--conns 10000] [--arms sluice,uvicorn]
                                     [--idle 3] [--out FILE]
    /usr/bin/python3 bench/wsidle.py --render JSON

For each arm (sluice in pump and inline mode, uvicorn with the websockets
library; one worker each, pinned to one CPU), a fresh server of
bench/apps/ws_idle_app.py (ws_echo_asgi's echo, and GET /_mem: the
worker's own figures) and the descriptor limit raised; 100 WebSockets
opened and closed; a reading (*before*); N WebSockets opened, each a
handshake and one 16-byte message echoed (*after the echo*); --idle
seconds later (sluice gives an idle WebSocket's buffers back after 1 s)
*idle*; then malloc_trim(0) in the worker and a last reading. A reading:
VmRSS once settled, smaps_rollup, /_mem, the kernel's slabs and TCP
pages (system-wide: not the worker's memory). After the echo and when
idle, gdb reads sluice's worker (its debug information names the
structures) and sums what every WebSocket connection holds. Each arm
runs twice: plain, and with PYTHONTRACEMALLOC=1 for Python's share
(tracemalloc grows the process: only its own figures are read there).

The report goes to bench/results/ws-idle.md, the runs to
$LOGDIR/ws-idle.json (--json). See bench/README.md.
"""

import argparse
import base64
import dataclasses
import datetime
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import report  # noqa: E402
import run  # noqa: E402
import syscalls  # noqa: E402
import wsbench  # noqa: E402
from suites import Arm, _sluice  # noqa: E402

GDB = "/usr/bin/gdb"
WARM = 100  # WebSockets opened and closed before the first reading
BATCH = 250  # handshakes in flight at once
MESSAGE = b"idle-websocket!!"  # 16 bytes, as wsload sends
IO_TIMEOUT = 30.0  # s: a handshake or an echo answers by then
TOP_LINES = 25  # tracemalloc lines shown per arm
# What the client's handshake offers: nothing (as wsload.c), or
# permessage-deflate as browsers offer it
OFFERS = {"none": "", "deflate": "Sec-WebSocket-Extensions: "
          "permessage-deflate; client_max_window_bits\r\n"}

# Run by gdb on sluice's worker (`gdb -p PID -batch -x FILE`): walks the
# pool's active list and sums what each WebSocket connection holds. A
# buffer's memory is its cap; the chunk column adds glibc's 8-byte header
# and rounds to 16 (32 at least), what malloc takes for it.
GDB_WALK = r'''
import json
import gdb

OUT = %(out)r
LIMIT = %(limit)d


def val(expr):
    return int(gdb.parse_and_eval(expr))


def size(t):
    return val("sizeof(%%s)" %% t)


def chunk(n):
    return 0 if n <= 0 else max(32, (n + 8 + 15) & ~15)


def cls(n):
    """bufcache.h's sl_bufcache_size()."""
    if n <= 1024:
        return 1024
    if n > 65536:
        return n
    return 1 << (n - 1).bit_length()


SIZES = {t: size(t) for t in ("sl_conn_t", "struct sl_conn_ws",
                              "struct sl_ws_rx", "struct sl_ws_tx",
                              "sl_ws_handshake_t", "sl_client_t",
                              "struct ws_node")}
pump = gdb.parse_and_eval("sl_worker_serve::pump")
opt = pump["opt"].dereference()
HDRS = cls((int(opt["limit_request_fields"]) + 1) * size("sl_hdr_t"))
WS = val("SL_CONN_WS")
parts = {}


def add(name, n, malloced=True):
    p = parts.setdefault(name, {"bytes": 0, "chunk": 0, "holders": 0})
    if n > 0:
        p["bytes"] += n
        p["chunk"] += chunk(n) if malloced else n
        p["holders"] += 1


def cap(b):
    return int(b["cap"]) if int(b["data"]) != 0 else 0


def has(v, field):
    """Does V's struct have FIELD (a build before or after a change)?"""
    return any(f.name == field for f in v.type.strip_typedefs().fields())


pool = pump["pool"]
end = pool["active"].address
c = pool["active"]["next"]
n = other = 0
while c != end and n < LIMIT:
    v = c.dereference()
    if int(v["state"]) != WS:
        other += 1
        c = v["next"]
        continue
    n += 1
    x = v["x"]
    add("pool entry sl_conn_t", SIZES["sl_conn_t"], malloced=False)
    add("read buffer c->rbuf", cap(v["rbuf"]))
    add("write buffer c->tx.buf", cap(v["tx"]["buf"]))
    add("executor's output c->x.out", cap(x["out"]))
    add("request body c->x.body", cap(x["body"]))
    add("access-log head c->x.resp_head", cap(x["resp_head"]))
    req = x["req"]
    if has(req, "packed") and bool(req["packed"]):
        # conn.c: sl_conn_pack_head(), one block: the head's bytes (cap,
        # rounded to 16), then the used header entries
        add("request head and header array, packed (c->x.req.hbuf)",
            cap(req["hbuf"]) + int(req["nhdrs"]) * size("sl_hdr_t"))
    else:
        add("request head c->x.req.hbuf (the handshake's bytes)",
            cap(req["hbuf"]))
        if int(req["hdrs"]) != 0:
            add("header array c->x.req.hdrs", HDRS)
    if int(x["req"]["client"]) != 0:
        add("forwarded client c->x.req.client", SIZES["sl_client_t"])
    ws = x["ws"]
    if int(ws) != 0:
        w = ws.dereference()
        add("WebSocket state struct sl_conn_ws", SIZES["struct sl_conn_ws"])
        if w["pong"].type.code == gdb.TYPE_CODE_PTR and int(w["pong"]) != 0:
            add("ping payload ws->pong", int(w["pong_len"]))
        if has(w, "end_reason") and int(w["end_reason"]) != 0:
            add("close reason ws->end_reason",
                len(w["end_reason"].string("latin-1")) + 1)
        if int(w["hs"]) != 0:
            add("handshake answer sl_ws_handshake_t",
                SIZES["sl_ws_handshake_t"])
        if int(w["rx"]) != 0:
            rx = w["rx"].dereference()
            add("frame parser struct sl_ws_rx", SIZES["struct sl_ws_rx"])
            add("parser's message buffer rx->msg", cap(rx["msg"]))
            if rx["ctl"].type.code == gdb.TYPE_CODE_PTR and \
                    int(rx["ctl"]) != 0:
                add("parser's control payload rx->ctl", 125)
            if int(rx["zin"]) != 0:  # its size is zlib's (no calls here)
                add("parser's inflater rx->zin (the z_stream alone)",
                    size("z_stream"))
        if int(w["tx"]) != 0:
            add("frame writer struct sl_ws_tx", SIZES["struct sl_ws_tx"])
        q = w["head"]
        while int(q) != 0:
            add("queued message nodes", SIZES["struct ws_node"])
            add("queued messages' bytes", cap(q.dereference()["msg"]["data"]))
            q = q.dereference()["next"]
    c = v["next"]
with open(OUT, "w") as f:
    json.dump({"ws_conns": n, "other_conns": other, "sizes": SIZES,
               "hdrs_block": HDRS, "parts": parts,
               "pool_entries": int(pool["nconns"]),
               "pool_touched": int(pool["nfresh"])}, f)
'''


def arms():
    """The servers: sluice's worker in pump and inline mode, uvicorn with
    the websockets library (the ws suite's reference), one worker each.
    Pings every 600 s: none while the harness holds the connections
    (both servers' default is 20 s, and a peer that does not answer is
    cut)."""
    extra = ["--interface", "asgi",
             "--worker-connections", "{wconns}", "--ws-ping-interval", "600"]
    return [
        _sluice("sluice", "ws_idle_app:app", extra=extra, path="/ws",
                expect=None, note="pump mode (default), uvloop"),
        _sluice("sluice-inline", "ws_idle_app:app", extra=extra, path="/ws",
                expect=None, env={"SLUICE_INLINE": "1"},
                note="inline mode: SLUICE_INLINE=1, uvloop"),
        Arm(name="uvicorn",
            argv=["/usr/bin/python3", "-m", "uvicorn", "--loop", "uvloop",
                  "--http", "httptools", "--ws", "websockets",
                  "--interface", "asgi3",
                  "--ws-ping-interval", "600", "--host", "127.0.0.1",
                  "--port", "{port}", "--app-dir", "{apps}",
                  "--no-access-log", "--log-level", "warning",
                  "ws_idle_app:app"],
            path="/ws", expect_body=None, requires="/usr/bin/python3",
            note="uvloop + httptools, --ws websockets, single process, "
                 "access log off (the ws suite's uvicorn-websockets)"),
    ]


def raise_nofile(need):
    """The harness's descriptor limit (and so its servers') to at least
    NEED; root may raise the hard limit too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return soft
    if hard < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, need))
            return need
        except (ValueError, OSError):
            raise SystemExit("RLIMIT_NOFILE: need %d descriptors, the hard "
                             "limit is %d (ulimit -Hn)" % (need, hard))
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    return need


# ---------------------------------------------------------------- client


def _recv_until(s, buf, done):
    while not done(buf):
        data = s.recv(65536)
        if not data:
            raise OSError("the server closed the connection")
        buf += data
    return buf


def open_websockets(port, n, offer=""):
    """N WebSockets on /ws, BATCH at a time: each shakes hands and has
    one message echoed. Returns the sockets, open and idle."""
    socks = []
    frame = masked_text(MESSAGE)
    while len(socks) < n:
        batch = []
        for _ in range(min(BATCH, n - len(socks))):
            s = socket.create_connection(("127.0.0.1", port),
                                         timeout=IO_TIMEOUT)
            key = base64.b64encode(os.urandom(16)).decode()
            s.sendall(("GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                       "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Key: %s\r\n"
                       "Sec-WebSocket-Version: 13\r\n%s\r\n"
                       % (port, key, offer)).encode())
            batch.append(s)
        rests = []
        for s in batch:
            buf = _recv_until(s, b"", lambda b: b"\r\n\r\n" in b)
            head, _, rest = buf.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 101"):
                raise run.Skip("handshake %d answered %r" % (
                    len(socks), head[:60]))
            rests.append(rest)
        for s in batch:
            s.sendall(frame)
        for s, rest in zip(batch, rests):
            got = _recv_until(s, rest, lambda b: len(b) >= 2 and
                              len(b) >= 2 + (b[1] & 0x7f))
            if echoed(got) != MESSAGE:
                raise run.Skip("echo %d got %r" % (len(socks), got[:40]))
        socks += batch
    return socks


def echoed(frame):
    """The payload of a short server text FRAME, inflated when its RSV1
    says it is compressed (a server may compress even 16 bytes)."""
    if frame[0] & 0x0f != 1 or len(frame) != 2 + (frame[1] & 0x7f):
        return None
    if frame[0] & 0x40:
        return zlib.decompressobj(-15).decompress(frame[2:] +
                                                  b"\x00\x00\xff\xff")
    return frame[2:]


def masked_text(payload):
    """A masked text frame (a client's)."""
    mask = os.urandom(4)
    return bytes([0x81, 0x80 | len(payload)]) + mask + bytes(
        b ^ mask[i % 4] for i, b in enumerate(payload))


def close_all(socks):
    for s in socks:
        s.close()


# ---------------------------------------------------------------- readings


def rollup(pid):
    """/proc/PID/smaps_rollup's fields (KiB), and status's VmRSS and
    RssAnon."""
    out = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            k, _, rest = line.partition(":")
            if rest.strip().endswith("kB"):
                out[k] = int(rest.split()[0])
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, rest = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile"):
                out[k] = int(rest.split()[0])
    return out


def settled(pid):
    """rollup() once VmRSS reads the same twice 100 ms apart (10 s at
    most: then the last reading, marked)."""
    last = None
    deadline = time.monotonic() + 10
    while True:
        now = rollup(pid)
        if last is not None and now["VmRSS"] == last["VmRSS"]:
            return now
        if time.monotonic() > deadline:
            now["unsettled"] = True
            return now
        last = now
        time.sleep(0.1)


def kernel():
    """Slab bytes by cache (/proc/slabinfo: active objects x size) and the
    TCP sockets' buffer pages (/proc/net/sockstat), system-wide."""
    slabs = {}
    try:
        with open("/proc/slabinfo") as f:
            for line in f:
                x = line.split()
                if len(x) > 3 and x[1].isdigit():
                    slabs[x[0]] = int(x[1]) * int(x[3])
    except OSError:
        pass
    tcp = {}
    with open("/proc/net/sockstat") as f:
        for line in f:
            if line.startswith("TCP:"):
                x = line.split()[1:]
                tcp = dict(zip(x[::2], map(int, x[1::2])))
    return {"slab": slabs, "tcp": tcp}


def hook(port, deep, trim=""):
    """The worker's own figures (the hook's /_mem); TRIM: after
    malloc_trim(0)."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", "/_mem?" + ("deep" if deep else trim))
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise run.Skip("/_mem answered %d" % resp.status)
        return json.loads(body)
    finally:
        conn.close()


def reading(pid, port, deep):
    """The worker's memory (first, so the hook's own request is not in
    it), then its own figures, then the kernel's."""
    m = settled(pid)
    m["hook"] = hook(port, deep)
    m["kernel"] = kernel()
    return m


def gdb_walk(pid, logdir, tag, limit):
    """GDB_WALK's sums over sluice's worker PID, or {"error": ...}."""
    out = Path(logdir) / ("%s-walk.json" % tag)
    script = Path(logdir) / ("%s-walk.py" % tag)
    script.write_text(GDB_WALK % {"out": str(out), "limit": limit})
    t0 = time.monotonic()
    p = subprocess.run([GDB, "-nx", "-batch", "-p", str(pid), "-x",
                        str(script)], capture_output=True, text=True,
                       timeout=600)
    if not out.exists():
        return {"error": "gdb wrote nothing (exit %d): %s" % (
            p.returncode, " | ".join((p.stderr or p.stdout).strip()
                                     .splitlines()[-4:]))}
    walk = json.loads(out.read_text())
    walk["gdb_s"] = round(time.monotonic() - t0, 1)
    return walk


def fds_settled(pid, most):
    """Wait (10 s at most) until PID holds at most MOST descriptors: the
    warm-up's connections are closed on its side too."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if len(os.listdir("/proc/%d/fd" % pid)) <= most:
            return True
        time.sleep(0.05)
    return False


def still_open(socks):
    """How many of SOCKS the server has neither closed nor written to."""
    import select
    quiet = 0
    for k in range(0, len(socks), 500):
        part = socks[k:k + 500]
        p = select.poll()
        for s in part:
            p.register(s, select.POLLIN)
        quiet += len(part) - len(p.poll(0))
    return quiet


def run_once(arm, ctx_base, args, logdir, n, traced, offer):
    """One server of ARM holding N idle WebSockets; PYTHONTRACEMALLOC=1
    when TRACED. The record of its readings."""
    tag = "%s-%d%s" % (arm.name, n, "-tracemalloc" if traced else "")
    env = dict(arm.env)
    if traced:
        env["PYTHONTRACEMALLOC"] = "1"
    ctx = dict(ctx_base, port=run.free_port(), wconns=str(n + WARM + 100))
    srv = run.Server(dataclasses.replace(arm, env=env), ctx, args.server_cpu,
                     logdir, tag)
    rec = {"arm": arm.name, "conns": n, "tracemalloc": traced,
           "command": srv.command_line().replace(
               "127.0.0.1:%d" % ctx["port"], "127.0.0.1:PORT").replace(
               "--port %d" % ctx["port"], "--port PORT")}
    socks = []
    try:
        srv.start()
        rec["preflight"] = wsbench.preflight(srv.port, "/ws", run.Skip)
        pid = syscalls.worker_pids(srv)[0]
        base_fds = len(os.listdir("/proc/%d/fd" % pid))
        close_all(open_websockets(srv.port, WARM, offer))
        if not fds_settled(pid, base_fds + 2):
            rec["note"] = "the warm-up's connections were still open"
        rec["before"] = reading(pid, srv.port, traced)
        t0 = time.monotonic()
        socks = open_websockets(srv.port, n, offer)
        rec["open_s"] = round(time.monotonic() - t0, 2)
        rec["after_echo"] = reading(pid, srv.port, False)
        walk = arm.name.startswith("sluice") and not traced and args.gdb
        if walk:  # what trim() will give back, before it does
            rec["walk_echo"] = gdb_walk(pid, logdir, tag + "-echo",
                                        n + WARM + 100)
        time.sleep(args.idle)  # the idle time is what is measured
        rec["idle"] = reading(pid, srv.port, traced)
        rec["threads"] = len(os.listdir("/proc/%d/task" % pid))
        if walk:
            rec["walk"] = gdb_walk(pid, logdir, tag, n + WARM + 100)
        if args.trim and not traced:
            # last, as it changes the heap: glibc gives back the whole
            # free pages it keeps, in every arena
            hook(srv.port, False, "trim")
            rec["trimmed"] = settled(pid)
        rec["still_open"] = still_open(socks)
        if traced:
            rec["lines"] = lines_delta(rec)
    except run.Skip as e:
        rec["error"] = str(e)
    except OSError as e:
        rec["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        close_all(socks)
        srv.stop()
    print("%-14s %s" % (tag, one_line(rec)), flush=True)
    return rec


def lines_delta(rec):
    """Python's allocations by line, growth from before to idle (the 150
    largest), taken out of the readings (a process has tens of thousands
    of lines)."""
    a = {k: (s, c) for k, s, c in rec["before"]["hook"].pop("lines", [])}
    rows = []
    for k, s, c in rec["idle"]["hook"].pop("lines", []):
        s0, c0 = a.get(k, (0, 0))
        rows.append([k, s - s0, c - c0])
    rows.sort(key=lambda r: -r[1])
    return rows[:150]


def per_ws(rec, key, stage="idle"):
    """KEY's growth from before to STAGE over the WebSockets, in bytes
    (KiB fields of /proc are turned into bytes)."""
    try:
        a, b = rec["before"], rec[stage]
    except KeyError:
        return None
    if key in ("uordblks", "arena", "hblkhd"):
        return (b["hook"]["malloc"][key] - a["hook"]["malloc"][key]) \
            / rec["conns"]
    if key in ("traced", "blocks"):
        if key not in b["hook"]:
            return None
        return (b["hook"][key] - a["hook"][key]) / rec["conns"]
    return 1024.0 * (b[key] - a[key]) / rec["conns"]


def one_line(rec):
    if "error" in rec:
        return "FAILED: " + rec["error"]
    if rec["tracemalloc"]:
        return "opened in %.1f s; Python traced %.0f B/WS idle" % (
            rec["open_s"], per_ws(rec, "traced"))
    return ("opened in %.1f s; per WS: VmRSS %.0f B after the echo, %.0f B "
            "idle; Pss %.0f B; malloc in use %.0f B idle" % (
                rec["open_s"], per_ws(rec, "VmRSS", "after_echo"),
                per_ws(rec, "VmRSS"), per_ws(rec, "Pss"),
                per_ws(rec, "uordblks")))


# ---------------------------------------------------------------- report

# The slab caches a connected TCP socket's descriptor takes: its sock,
# inode, file, dentry and (the server's end) epoll item.
SOCKET_SLABS = ("TCP", "sock_inode_cache", "filp", "dentry", "eventpoll_epi",
                "eventpoll_pwq")
TARGET = 6 * 1024  # issue 32: an idle WebSocket costs <= 6 kB in total

# Where each part of the walk is allocated and given back.
ORIGIN = {
    "pool entry": "pool.c: sl_pool_init() (one calloc for "
                  "--worker-connections, its pages touched at first use), "
                  "set up by conn.c: sl_conn_init()",
    "read buffer": "conn_ws.c: sl_conn_ws_read() reserves "
                   "SL_CONN_READ_CHUNK (16 KiB); freed by trim() after 1 s "
                   "idle (sl_conn_ws_sweep())",
    "write buffer": "exchange.c: sl_conn_take_out() swaps in x.out; "
                    "conn_ws.c: put_control_locked(); freed by trim()",
    "executor's output": "conn_ws.c: sl_exch_ws_accept() (the 101), "
                         "sl_exch_ws_send(); freed by trim()",
    "request body": "conn_ws.c: trim() frees it",
    "access-log head": "exchange.c: sl_exch_note_head()",
    "request head and header array": "conn.c: sl_conn_pack_head() once "
                                     "the 101 is taken: one block of their "
                                     "exact size, kept until the WebSocket "
                                     "ends (its access-log line)",
    "ping payload": "conn_ws.c: on_event(), freed once the pong is out",
    "close reason": "conn_ws.c: set_end()",
    "parser's control payload": "ws_rx.c: taken at a control frame with a "
                                "payload, freed by sl_ws_rx_trim()",
    "request head": "h1_parse.c: on_headers_complete() takes a bufcache "
                    "block for the head; kept until the request (the "
                    "WebSocket) ends: conn.c: sl_conn_free_head()",
    "header array": "conn.c: sl_conn_hdrs_get() from h1_parse.c's header "
                    "callbacks, (limit_request_fields + 1) x 16 bytes "
                    "rounded to a bufcache class; kept until the WebSocket "
                    "ends",
    "forwarded client": "forwarded.c: sl_forwarded_apply()",
    "WebSocket state": "conn_ws.c: sl_conn_ws_upgrade() (calloc), freed by "
                       "sl_conn_ws_free()",
    "handshake answer": "conn_ws.c: sl_conn_ws_upgrade(), freed at accept",
    "frame parser": "ws_rx.c: sl_ws_rx_new(), from conn_ws.c: "
                    "sl_exch_ws_accept()",
    "parser's message buffer": "ws_rx.c: the message being assembled; "
                               "sl_ws_rx_trim() frees it",
    "parser's inflater": "ws_rx.c / ws_deflate.c (permessage-deflate only)",
    "frame writer": "ws_tx.c: sl_ws_tx_new(), from sl_exch_ws_accept()",
    "queued message": "conn_ws.c: queue_message()",
}


def origin(part):
    for k, v in ORIGIN.items():
        if part.startswith(k):
            return v
    return ""


def _b(v):
    return "–" if v is None else "{:,.0f}".format(v)


def _kib(v):
    return "–" if v is None else "%.1f" % (v / 1024.0)


def plain(doc, arm):
    return next((r for r in doc["runs"] if r["arm"] == arm
                 and not r["tracemalloc"] and "error" not in r), None)


def traced(doc, arm):
    return next((r for r in doc["runs"] if r["arm"] == arm
                 and r["tracemalloc"] and "error" not in r), None)


def kernel_per_ws(rec):
    """(slab bytes, TCP buffer bytes, top caches) per WebSocket, both ends
    of each connection together, from before to idle."""
    a, b = rec["before"]["kernel"], rec["idle"]["kernel"]
    deltas = {k: v - a["slab"].get(k, 0) for k, v in b["slab"].items()
              if k in SOCKET_SLABS}
    slab = sum(deltas.values()) / rec["conns"]
    tcp = 4096.0 * (b["tcp"].get("mem", 0) - a["tcp"].get("mem", 0)) \
        / rec["conns"]
    top = sorted(deltas.items(), key=lambda kv: -kv[1])[:6]
    return slab, tcp, [(k, v / rec["conns"]) for k, v in top]


def summary_table(doc):
    out = ["| arm | WebSockets | opened in (s) | VmRSS / WS after the echo "
           "| VmRSS / WS idle | Pss / WS idle | malloc in use / WS after the "
           "echo → idle | Python traced / WS idle (tracemalloc run) | "
           "≤ 6 kB | still open | flags |",
           "|---|---:|---:|---:|---:|---:|---:|---:|:-:|---:|---|"]
    for arm in doc["arms"]:
        for rec in [r for r in doc["runs"] if r["arm"] == arm
                    and not r["tracemalloc"]]:
            t = next((x for x in doc["runs"] if x["arm"] == arm
                      and x["tracemalloc"] and x["conns"] == rec["conns"]
                      and "error" not in x), None)
            if "error" in rec:
                out.append("| %s | %d | – | – | – | – | – | – | – | – | ⚠ %s |"
                           % (arm, rec["conns"], rec["error"][:120]))
                continue
            idle = per_ws(rec, "VmRSS")
            flags = []
            if rec["still_open"] != rec["conns"]:
                flags.append("the server closed or wrote to %d" % (
                    rec["conns"] - rec["still_open"]))
            if any(rec[s].get("unsettled") for s in ("before", "after_echo",
                                                      "idle")):
                flags.append("RSS still moving at a reading")
            out.append(
                "| %s | %d | %.1f | %s B | **%s B** (%s KiB) | %s B | %s → %s "
                "B | %s B | %s | %d | %s |" % (
                    arm, rec["conns"], rec["open_s"],
                    _b(per_ws(rec, "VmRSS", "after_echo")), _b(idle),
                    _kib(idle), _b(per_ws(rec, "Pss")),
                    _b(per_ws(rec, "uordblks", "after_echo")),
                    _b(per_ws(rec, "uordblks")),
                    _b(per_ws(t, "traced")) if t else "–",
                    "yes" if idle <= TARGET else "**no**", rec["still_open"],
                    "⚠ " + "; ".join(flags) if flags else ""))
    return out


def breakdown(doc, arm):
    """The shares of one idle WebSocket of a sluice arm."""
    rec, t = plain(doc, arm), traced(doc, arm)
    if rec is None:
        return ["(no plain run)"]
    out = ["| share | after the echo: bytes / WS | idle: bytes / WS | idle: "
           "malloc chunks / WS | where |", "|---|---:|---:|---:|---|"]
    slab, tcp, _top = kernel_per_ws(rec)
    out.append("| kernel: slab objects of both ends (%s; **not the "
               "worker's memory**) | | %s | – | /proc/slabinfo, system-wide |"
               % (", ".join(SOCKET_SLABS), _b(slab)))
    out.append("| kernel: TCP buffer pages of both ends (**not the "
               "worker's memory**) | | %s | – | /proc/net/sockstat `mem` |"
               % _b(tcp))
    walks = [rec.get("walk_echo") or {}, rec.get("walk") or {}]
    c_bytes = c_chunks = 0
    if all(w.get("ws_conns") for w in walks):
        names = sorted({k for w in walks for k, v in w["parts"].items()
                        if v["bytes"]},
                       key=lambda k: -max(w["parts"].get(k, {"bytes": 0})
                                          ["bytes"] for w in walks))
        sums = [0, 0]
        for name in names:
            cells = []
            for k, w in enumerate(walks):
                p = w["parts"].get(name, {"bytes": 0, "chunk": 0,
                                          "holders": 0})
                m = w["ws_conns"]
                sums[k] += p["bytes"] / m
                cells.append(_b(p["bytes"] / m) + (
                    "" if p["holders"] in (0, m) else
                    " (%d of %d)" % (p["holders"], m)))
            p = walks[1]["parts"].get(name, {"chunk": 0})
            c_chunks += p["chunk"] / walks[1]["ws_conns"]
            out.append("| sluice C: %s | %s | %s | %s | %s |" % (
                name, cells[0], cells[1],
                _b(p["chunk"] / walks[1]["ws_conns"]), origin(name)))
        c_bytes = sums[1]
        out.append("| **sluice C, all** (gdb over %d WebSockets) | **%s** | "
                   "**%s** | **%s** | |" % (walks[1]["ws_conns"],
                                             _b(sums[0]), _b(sums[1]),
                                             _b(c_chunks)))
    else:
        out.append("| sluice C | | – | – | %s |" % (
            walks[1].get("error") or walks[0].get("error") or "not walked"))
    py = per_ws(t, "traced") if t else None
    out.append("| **Python** (tracemalloc: every object the WebSocket's "
               "request holds, sluice's own and the app's task) | %s | "
               "**%s** | – | tracemalloc run: traced bytes − before |" % (
                   _b(per_ws(t, "traced", "after_echo")) if t else "–",
                   _b(py)))
    rss = per_ws(rec, "VmRSS")
    out.append("| the worker's VmRSS growth / WS (total) | %s | **%s** | | "
               "plain run, %d WebSockets |" % (
                   _b(per_ws(rec, "VmRSS", "after_echo")), _b(rss),
                   rec["conns"]))
    if py is not None and c_bytes:
        out.append("| the rest: allocator (freed chunks the heap keeps, "
                   "pymalloc's rounding, pools and arenas, pages) | | %s | | "
                   "VmRSS − (C chunks + Python) |" % _b(rss - c_chunks - py))
    if "trimmed" in rec:
        trim = per_ws(rec, "VmRSS", "trimmed")
        out.append("| the worker's VmRSS growth / WS once the hook called "
                   "`malloc_trim(0)` (after the idle reading) | | %s | | the "
                   "heap's free pages given back: %s / WS |" % (
                       _b(trim), _b(rss - trim)))
    return out


def types_table(doc):
    arms = [a for a in doc["arms"] if traced(doc, a)
            and "types" in traced(doc, a)["idle"]["hook"]]
    if not arms:
        return ["(no tracemalloc run)"]
    deltas = {}
    for a in arms:
        t = traced(doc, a)
        b, i = t["before"]["hook"]["types"], t["idle"]["hook"]["types"]
        deltas[a] = {k: ((v[0] - b.get(k, (0, 0))[0]) / t["conns"],
                         (v[1] - b.get(k, (0, 0))[1]) / t["conns"])
                     for k, v in i.items()}
    names = sorted({k for d in deltas.values() for k, v in d.items()
                    if v[0] >= 0.1}, key=lambda k: -max(
                        d.get(k, (0, 0))[1] for d in deltas.values()))
    out = ["| type (gc-tracked objects) | %s |" % " | ".join(
        "%s: objects / WS (bytes, sys.getsizeof)" % a for a in arms),
           "|---|%s" % ("---:|" * len(arms))]
    for k in names[:20]:
        out.append("| %s | %s |" % (k, " | ".join(
            "%.2f (%.0f B)" % deltas[a].get(k, (0, 0)) for a in arms)))
    out.append("| **all** | %s |" % " | ".join(
        "%.1f (%.0f B)" % (sum(v[0] for v in deltas[a].values()),
                           sum(v[1] for v in deltas[a].values()))
        for a in arms))
    return out


def lines_table(doc, arm):
    t = traced(doc, arm)
    if not t or "lines" not in t:
        return ["(no tracemalloc run)"]
    out = ["| allocated at (file:line; `<unknown>`: C code with no Python "
           "frame: sluice making the scope, the request, its Task) | "
           "bytes / WS | blocks / WS |", "|---|---:|---:|"]
    for k, s, c in t["lines"][:TOP_LINES]:
        if s < t["conns"]:
            break
        out.append("| `%s` | %.0f | %.2f |" % (k, s / t["conns"],
                                               c / t["conns"]))
    out.append("| **traced, all** | **%.0f** | |" % per_ws(t, "traced"))
    sc = t["idle"]["hook"].get("ws_scopes")
    if sc and sc[0]:
        out += ["", "The %d websocket scope dicts alive hold %.0f bytes each "
                "(the dict, its headers list, tuples, bytes and strings that "
                "nothing else references)." % (sc[0], sc[1] / sc[0])]
    return out


def markdown(doc):
    m = doc["meta"]
    out = ["# sluice benchmark: idle WebSockets (issue 32)", ""]
    w = out.append
    if m.get("label"):
        w("> %s" % m["label"])
        w("")
    w("- Date: %s; commit %s; %s" % (m["date"], m.get("git_commit") or "?",
                                     m.get("sluice_version", "")))
    w("- Machine: %s, %s CPUs, kernel %s, Debian %s, glibc %s; load average "
      "%s at the start, %s at the end" % (
          m["cpu_model"], m["cpus"], m["kernel"], m["debian"],
          m.get("glibc", "?"), " ".join(m["loadavg_start"]),
          " ".join(m.get("loadavg_end", []))))
    w("- Command: `%s`" % m["command"])
    w("- One worker each, pinned with `taskset -c %d`; the harness (the "
      "client) on CPU %d, RLIMIT_NOFILE %d (raised to N + 1124 at least). "
      "The app: "
      "bench/apps/ws_idle_app.py: ws_echo_asgi.py's echo, and `GET /_mem` "
      "(glibc's `mallinfo2()`, the gc-tracked objects by type, and under "
      "tracemalloc its traced bytes and lines)"
      % (m["server_cpu"], m["client_cpu"], m["nofile"]))
    w("- Per arm and count N: %d WebSockets opened and closed (warm-up); "
      "*before*; N WebSockets opened %d at a time, each a handshake and one "
      "16-byte text message echoed; *after the echo*; %d s idle; *idle*. "
      "Each reading is the worker's VmRSS once it reads the same twice "
      "100 ms apart, smaps_rollup, then the hook. Figures are the growth "
      "from *before* over N, in bytes (VmRSS and Pss come in KiB from "
      "/proc)" % (WARM, BATCH, m["idle_s"]))
    w("- Each arm twice: plain (every memory figure) and with "
      "PYTHONTRACEMALLOC=1 (only Python's traced bytes and the tables "
      "below: tracemalloc's own tables grow the process). sluice's C side "
      "is read by gdb from the plain run's worker after the echo and once "
      "idle: the walk "
      "follows the pool's active list and sums what each connection in "
      "state SL_CONN_WS holds (*malloc chunks*: glibc's 8-byte header, "
      "rounded to 16)")
    w("- Issue 32's figures: an idle HTTP keep-alive connection 0.3 kB; an "
      "idle WebSocket 20.2 kB (1,000 on the echo app: RSS +20,168 kB), "
      "uvicorn 124.7 kB; the target ≤ 6 kB per idle WebSocket in total")
    w("")
    w("## Per idle WebSocket")
    w("")
    out += summary_table(doc)
    w("")
    if doc.get("notes"):
        out += ["## Notes", "", doc["notes"].strip(), ""]
    for arm in doc["arms"]:
        if not arm.startswith("sluice"):
            continue
        w("## %s: where an idle WebSocket's memory is" % arm)
        w("")
        out += breakdown(doc, arm)
        w("")
    w("## Python objects per idle WebSocket, by type (tracemalloc run, "
      "`gc.get_objects()`)")
    w("")
    out += types_table(doc)
    w("")
    for arm in doc["arms"]:
        w("## %s: Python's allocations per idle WebSocket, by line "
          "(tracemalloc)" % arm)
        w("")
        out += lines_table(doc, arm)
        w("")
    w("## The kernel's share (both ends of every connection, system-wide)")
    w("")
    w("| arm | slab bytes / WS | TCP buffer bytes / WS | largest slab caches "
      "/ WS |")
    w("|---|---:|---:|---|")
    for arm in doc["arms"]:
        rec = plain(doc, arm)
        if rec:
            slab, tcp, top = kernel_per_ws(rec)
            w("| %s | %s | %s | %s |" % (arm, _b(slab), _b(tcp), ", ".join(
                "%s %.0f" % kv for kv in top)))
    w("")
    w("## Commands")
    w("")
    for arm, a in doc["arms"].items():
        w("- **%s**: %s" % (arm, a["note"]))
        if a.get("command"):
            w("  `%s`" % a["command"])
    w("")
    w("## Versions")
    w("")
    w("- Debian packages: " + ", ".join(
        "%s %s" % kv for kv in sorted(m.get("packages", {}).items())))
    w("")
    return "\n".join(out)


# ---------------------------------------------------------------- driver


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conns", default="10000",
                    help="idle WebSockets held, one run per count "
                         "(default 10000)")
    ap.add_argument("--arms", default="sluice,sluice-inline,uvicorn")
    ap.add_argument("--offers", default="none",
                    help="none, deflate or both: what the client's "
                         "handshake offers (deflate: %r)" % OFFERS["deflate"])
    ap.add_argument("--idle", type=float, default=3.0,
                    help="seconds the WebSockets sit idle before the idle "
                         "reading (default 3: sluice trims after 1)")
    ap.add_argument("--no-tracemalloc", action="store_true",
                    help="skip the tracemalloc runs")
    ap.add_argument("--no-gdb", dest="gdb", action="store_false",
                    help="skip the walk of sluice's structures")
    ap.add_argument("--no-trim", dest="trim", action="store_false",
                    help="no malloc_trim(0) in the worker after the idle "
                         "reading (and no reading after it)")
    report.add_report_args(ap, "ws-idle", listing=False)
    return ap, ap.parse_args()


def main():
    ap, args = parse_args()
    if args.render:
        doc = json.loads(Path(args.render).read_text())
        if args.notes:
            doc["notes"] = Path(args.notes).read_text()
        Path(args.out).write_text(markdown(doc))
        print("wrote %s" % args.out)
        return 0
    counts = [int(c) for c in args.conns.split(",") if c]
    chosen = [a for a in arms() if a.name in args.arms.split(",")]
    bad = set(args.arms.split(",")) - {a.name for a in arms()} - {""}
    if bad:
        ap.error("unknown arm(s): %s" % ", ".join(sorted(bad)))
    if args.gdb and not os.access(GDB, os.X_OK):
        args.gdb = False
    nofile = raise_nofile(max(counts) + WARM + 1024)
    os.sched_setaffinity(0, {args.client_cpu})
    ctx_base = {"apps": str(run.APPS), "root": str(run.ROOT),
                "sluice": run.sluice_bin(args), "sluice_before": ""}
    logdir = tempfile.mkdtemp(prefix="sluice-bench-wsidle-")
    print("server logs: %s" % logdir, flush=True)
    meta = run.machine_info()
    pk = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n",
                         "python3-websockets", "gdb", "libc6"],
                        capture_output=True, text=True).stdout
    for line in pk.splitlines():
        k, _, v = line.partition(" ")
        meta["packages"][k] = v
    meta["packages"] = {k: v for k, v in meta["packages"].items() if v}
    meta["glibc"] = meta["packages"].get("libc6", "?")
    try:
        meta["sluice_version"] = subprocess.run(
            [ctx_base["sluice"], "--version"], capture_output=True,
            text=True, timeout=10).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    meta.update({
        "date": datetime.datetime.now(datetime.timezone.utc)
        .strftime("%Y-%m-%d %H:%M:%S UTC"),
        "label": args.label, "idle_s": args.idle, "nofile": nofile,
        "server_cpu": args.server_cpu, "client_cpu": args.client_cpu,
        "command": report.command_line("wsidle.py", sys.argv[1:]),
        "git_commit": subprocess.run(
            ["git", "-C", str(run.ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True).stdout.strip()})

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    runs, info = [], {}
    try:
        for arm, offer in [(a, o) for o in args.offers.split(",")
                           for a in chosen]:
            if offer == "deflate":
                arm = dataclasses.replace(
                    arm, name=arm.name + "+deflate",
                    note=arm.note + "; the client offers permessage-deflate")
            info[arm.name] = {"note": arm.note}
            need = run.expand(arm.requires, ctx_base)
            if not os.access(need, os.X_OK):
                info[arm.name]["error"] = "binary not found: %s" % need
                continue
            for n in counts:
                for tm in [False] + ([] if args.no_tracemalloc else [True]):
                    rec = run_once(arm, ctx_base, args, logdir, n, tm,
                                   OFFERS[offer])
                    info[arm.name].setdefault("command", rec["command"])
                    runs.append(rec)
    except (KeyboardInterrupt, SystemExit):
        print("interrupted; no report written", file=sys.stderr)
        return 130
    meta["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    doc = {"meta": meta, "arms": info, "runs": runs}
    places = {str(run.ROOT): "$REPO", logdir: "$LOGDIR"}
    after = Path(ctx_base["sluice"]).resolve().parent
    if not str(after).startswith(str(run.ROOT)):
        places[str(after)] = "$AFTER"
    doc = report.scrub(doc, places)
    jpath = Path(args.json or Path(logdir) / "ws-idle.json")
    jpath.write_text(json.dumps(doc, indent=1) + "\n")
    Path(args.out).write_text(markdown(doc))
    print("wrote %s, %s" % (args.out, jpath))
    return 0


if __name__ == "__main__":
    sys.exit(main())
