#!/usr/bin/python3
"""HTTP/2 requests per second and server CPU per request (issue 29).

    /usr/bin/python3 bench/h2bench.py [--duration S] [--repeat N]
                                 [--only nginx,hypercorn] [--protos h2,h2c]
                                 [--shapes 1x100,16x10,16x100,256x10,256x100]

The h2 suite's arms (suites.py: sluice WSGI and ASGI, nginx's `return 200`
and hypercorn, each over h2 with TLS, chosen by ALPN, and over h2c by prior
knowledge), one worker each, started fresh per arm and repeat on CPU 0 and
loaded from CPU 1 by h2load (Debian's nghttp2-client, one thread) at each
shape CONNSxSTREAMS: `h2load -c CONNS -m STREAMS`, a warm-up then a timed
run (-D). The server tree's CPU time is sampled when h2load starts and ends
its measured window (the lines it prints then), as rate.py does with
rateload. Before it is measured an arm must answer two GETs on one HTTP/2
connection with the hello-world body (python3-h2). Results:
bench/results/h2.{md,json,png} and h2-29.md (issue 29's targets).
"""

import argparse
import datetime
import json
import os
import re
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import report  # noqa: E402
import run  # noqa: E402
import workload  # noqa: E402
from suites import H2  # noqa: E402

H2LOAD = "/usr/bin/h2load"
# h2load -t 1 prints these when its measured window opens and closes.
WINDOW_START = "Main benchmark duration is started"
WINDOW_END = "Main benchmark duration is over"
SHAPES = ((1, 100), (16, 10), (16, 100), (256, 10), (256, 100))
CLIENT_BOUND_PCT = 90.0  # h2load this busy: it may be the limit
SATURATED_PCT = 90.0  # server and others below this: it waited on h2load
DISTURBED_PCT = 10.0
CPU_TARGET = 1.2  # sluice's CPU per request over nginx's, over h2
RPS_TARGET = 10.0  # sluice's requests per second over hypercorn's


def proto(arm):
    """The arm's protocol: h2 (TLS, ALPN) or h2c (prior knowledge)."""
    return "h2" if arm.tls else "h2c"


def base_name(server, p):
    return "%s-%s" % (server, p)


# ---------------------------------------------------------------- h2load


def h2load_argv(port, path, tls, conns, streams, duration, warmup, cpu):
    """h2load on CPU, one thread; over TLS it offers only h2 by ALPN,
    in cleartext it opens with the preface (its default for http://)."""
    url = "%s://127.0.0.1:%s%s" % ("https" if tls else "http", port, path)
    return ([run.TASKSET, "-c", str(cpu), H2LOAD, "-t", "1",
             "-c", str(conns), "-m", str(streams), "-D", str(duration),
             "--warm-up-time", str(warmup)]
            + (["--npn-list", "h2"] if tls else []) + [url])


_UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6}


def _us(text):
    m = re.fullmatch(r"([0-9.]+)(us|ms|s)", text)
    return float(m.group(1)) * _UNITS[m.group(2)] if m else None


def parse_h2load(lines):
    """What h2load printed: req/s over its measured window, the request
    counters, status classes, the time per request (min, max, mean, sd in
    µs) and what it negotiated."""
    out = {}
    for line in lines:
        m = re.match(r"finished in [0-9.]+s, ([0-9.]+) req/s", line)
        if m:
            out["rps"] = float(m.group(1))
        elif line.startswith("requests:"):
            out["counts"] = {k: int(v) for v, k in re.findall(
                r"(\d+) (total|started|done|succeeded|failed|errored|"
                r"timeout)", line)}
        elif line.startswith("status codes:"):
            out["status"] = {k: int(v) for v, k in
                             re.findall(r"(\d+) (\dxx)", line)}
        elif line.startswith("time for request:"):
            vals = [_us(v) for v in line.split(":", 1)[1].split()[:4]]
            if None not in vals:
                out["request_us"] = dict(zip(("min", "max", "mean", "sd"),
                                             vals))
        elif line.startswith("Application protocol:"):
            out["protocol"] = line.split(":", 1)[1].strip()
        elif line.startswith("TLS Protocol:"):
            out["tls_protocol"] = line.split(":", 1)[1].strip()
        elif line.startswith("Cipher:"):
            out["cipher"] = line.split(":", 1)[1].strip()
    return out


def measure(srv, arm, conns, streams, args):
    """One h2load run at CONNS x STREAMS against the started server SRV:
    the record with rps and cpu_us_per_req, or with error."""
    argv = h2load_argv(srv.port, arm.path, arm.tls, conns, streams,
                       args.duration, args.warmup, args.client_cpu)
    res, lines, rc = run.run_marked(argv, WINDOW_START, WINDOW_END,
                                    srv.proc.pid, args.server_cpu,
                                    timeout=args.warmup + args.duration + 60)
    r = dict(res, argv=argv, exit=rc, arm=arm.name, proto=proto(arm),
             conns=conns, streams=streams, **parse_h2load(lines))
    if "rps" not in r or "counts" not in r:
        r["error"] = "h2load gave no summary (exit %s): %s" % (
            rc, " | ".join(lines[-3:]))
        return r
    if "server_cpu_s" not in r:
        r["error"] = "h2load printed no measured window: %s" % (
            " | ".join(lines[-3:]))
        return r
    if not r["rps"]:
        c = r["counts"]
        r["error"] = ("no request completed in the %d s window (failed %d, "
                      "errored %d, timeout %d; protocol %s)"
                      % (args.duration, c.get("failed", 0),
                         c.get("errored", 0), c.get("timeout", 0),
                         r.get("protocol", "none negotiated")))
        if not c.get("started") and r.get("protocol"):
            # every stream was opened in the warm-up and none came back:
            # a server that answers them all together, later than that
            r["error"] += ("; all %d streams in flight since the warm-up: "
                           "answered later than the window, if at all "
                           "(a longer --duration tells)"
                           % (conns * streams))
        return r
    wall = r["harness_wall_s"]
    # h2load counts the requests of its -D window; the harness's window
    # (between the two lines) is that one give or take a few ms.
    r["cpu_us_per_req"] = 1e6 * r["server_cpu_s"] / (r["rps"] * wall)
    r["server_cpu_pct"] = 100.0 * r["server_cpu_s"] / wall
    r["client_cpu_pct"] = 100.0 * r["client_cpu_window_s"] / wall
    if not srv.alive():
        r["server_died"] = True
    return r


# ---------------------------------------------------------------- preflight


def preflight(port, path, tls, expect, timeout=run.PREFLIGHT_TIMEOUT):
    """Two GETs of PATH, one after the other, on one HTTP/2 connection (TLS
    with ALPN h2 only, or cleartext with the preface): both must answer 2xx
    with EXPECT (None: any body). Returns what was negotiated; raises
    run.Skip otherwise."""
    try:
        import h2.config
        import h2.connection
        import h2.events
        import h2.exceptions
    except ImportError:
        raise run.Skip("python3-h2 is not installed (the preflight's "
                       "client)")
    info = {}
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError as e:
        raise run.Skip("preflight: connect: %s" % e)
    try:
        if tls:  # the harness's own certificate: no verification
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            sock = ctx.wrap_socket(sock, server_hostname="localhost")
            info["tls"] = "%s %s" % (sock.version(), sock.cipher()[0])
            info["alpn"] = sock.selected_alpn_protocol()
            if info["alpn"] != "h2":
                raise run.Skip("preflight: ALPN chose %r, not h2"
                               % info["alpn"])
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        for _ in range(2):
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, [
                (":method", "GET"), (":scheme", "https" if tls else "http"),
                (":authority", "127.0.0.1:%d" % port), (":path", path)],
                end_stream=True)
            sock.sendall(conn.data_to_send())
            headers, body = _response(sock, conn, sid, h2.events)
            status = int(headers.get(":status", "0"))
            if not 200 <= status < 300:
                raise run.Skip("not serving the app: GET %s answered %d %r"
                               % (path, status, body[:80]))
            if expect is not None and body != expect:
                raise run.Skip("not serving the app: GET %s: body %r"
                               % (path, body[:80]))
            info.update(status=status, server_header=headers.get("server"))
        info["streams_on_one_connection"] = 2
    except (OSError, ssl.SSLError) as e:
        raise run.Skip("preflight: %s" % e)
    except h2.exceptions.ProtocolError as e:
        raise run.Skip("preflight: HTTP/2 protocol error: %r" % e)
    finally:
        sock.close()
    return info


def _response(sock, conn, sid, events):
    """Headers ({name: value}) and body of stream SID, read to its end."""
    headers, body = {}, b""
    while True:
        data = sock.recv(65536)
        if not data:
            raise run.Skip("preflight: the server closed the connection")
        for ev in conn.receive_data(data):
            if isinstance(ev, events.ResponseReceived) and ev.stream_id == sid:
                headers = dict(ev.headers)
            elif isinstance(ev, events.DataReceived) and ev.stream_id == sid:
                body += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length,
                                               sid)
            elif isinstance(ev, events.StreamReset) and ev.stream_id == sid:
                raise run.Skip("preflight: stream reset (error %s)"
                               % ev.error_code)
            elif isinstance(ev, events.ConnectionTerminated):
                raise run.Skip("preflight: GOAWAY (error %s)"
                               % ev.error_code)
            elif isinstance(ev, events.StreamEnded) and ev.stream_id == sid:
                sock.sendall(conn.data_to_send())
                return headers, body
        sock.sendall(conn.data_to_send())


# ---------------------------------------------------------------- summary


def _med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def flags_of(runs, p):
    out = []
    errs = {}
    for r in runs:
        for k in ("failed", "errored", "timeout"):
            errs[k] = errs.get(k, 0) + r["counts"].get(k, 0)
        for k in ("3xx", "4xx", "5xx"):
            errs[k] = errs.get(k, 0) + r.get("status", {}).get(k, 0)
    errs = {k: v for k, v in errs.items() if v}
    if errs:
        out.append("errors " + ", ".join("%s %d" % kv
                                         for kv in sorted(errs.items())))
    got = sorted({r.get("protocol", "none") for r in runs} - {p})
    if got:
        out.append("protocol %s, not %s" % (", ".join(got), p))
    client = _med([r["client_cpu_pct"] for r in runs])
    server = _med([r["server_cpu_pct"] for r in runs])
    taken = _med([r["server_cpu_pct"] + (r.get("other_on_server_cpu_pct")
                                         or 0) for r in runs])
    if client >= CLIENT_BOUND_PCT:
        out.append("h2load %.0f %% busy: client-bound?" % client)
    elif taken < SATURATED_PCT:
        out.append("server %.0f %% busy: waited on h2load" % server)
    hit = [r["other_on_server_cpu_pct"] for r in runs
           if (r.get("other_on_server_cpu_pct") or 0) >= DISTURBED_PCT]
    if hit:
        out.append("disturbed in %d/%d run%s: others took up to %.0f %% of "
                   "the server CPU" % (len(hit), len(runs),
                                       "s" if len(runs) > 1 else "", max(hit)))
    if any(r.get("server_tree_note") for r in runs):
        out.append("process tree changed")
    if any(r.get("server_died") for r in runs):
        out.append("server died")
    return out


def summarise(runs, arms, shapes):
    """One row per arm (ARMS: {name: proto}) and shape: medians over the
    repeats, min-max, flags, and the ratios over nginx's CPU per request
    and hypercorn's req/s of the same protocol."""
    rows, by = [], {}
    for conns, streams in shapes:
        for arm, p in arms.items():
            mine = [r for r in runs if r["arm"] == arm
                    and (r["conns"], r["streams"]) == (conns, streams)]
            if not mine:
                continue
            ok = [r for r in mine if "cpu_us_per_req" in r]
            row = {"arm": arm, "proto": p, "conns": conns, "streams": streams,
                   "n": len(ok),
                   "failed": [r["error"] for r in mine if "error" in r]}
            if ok:
                rps = [r["rps"] for r in ok]
                cpu = [r["cpu_us_per_req"] for r in ok]
                row.update(
                    rps=_med(rps), rps_min=min(rps), rps_max=max(rps),
                    cpu_us=_med(cpu), cpu_us_min=min(cpu),
                    cpu_us_max=max(cpu),
                    server_cpu_pct=_med([r["server_cpu_pct"] for r in ok]),
                    client_cpu_pct=_med([r["client_cpu_pct"] for r in ok]),
                    client_us=_med([1e6 * r["client_cpu_window_s"]
                                    / (r["rps"] * r["harness_wall_s"])
                                    for r in ok]),
                    other_pct=_med([r.get("other_on_server_cpu_pct")
                                    for r in ok]),
                    mean_ms=_med([r.get("request_us", {}).get("mean")
                                  for r in ok]),
                    flags=flags_of(ok, p))
                if row["mean_ms"] is not None:
                    row["mean_ms"] /= 1000.0
                by[arm, conns, streams] = row
            rows.append(row)
    for row in rows:
        if not row.get("n"):
            continue
        key = (row["conns"], row["streams"])
        ng = by.get((base_name("nginx", row["proto"]),) + key)
        hc = by.get((base_name("hypercorn", row["proto"]),) + key)
        row["cpu_vs_nginx"] = row["cpu_us"] / ng["cpu_us"] if ng else None
        row["rps_vs_nginx"] = row["rps"] / ng["rps"] if ng else None
        row["rps_vs_hypercorn"] = row["rps"] / hc["rps"] if hc else None
    return {"rows": rows}


# ---------------------------------------------------------------- report


def _x(v):
    return "%.2f×" % v if v is not None else "–"


def _shape(r):
    return "%d×%d" % (r["conns"], r["streams"])


def markdown(doc):
    m, s = doc["meta"], doc["summary"]
    out = []
    w = out.append
    w("# sluice benchmark: hello world over HTTP/2, one worker")
    w("")
    if m.get("label"):
        w("> %s" % m["label"])
        w("")
    w("- Date: %s; commit %s" % (m["date"], m.get("git_commit") or "?"))
    w("- Machine: %s, %s CPUs, kernel %s, Debian %s, %s; load average %s at "
      "the start, %s at the end (shared machine: expect noise)"
      % (m["cpu_model"], m["cpus"], m["kernel"], m["debian"],
         m.get("openssl", "?"), " ".join(m["loadavg_start"]),
         " ".join(m.get("loadavg_end", []))))
    w("- Pinning: each server with `taskset -c %d`; h2load (`-t 1`) and the "
      "harness with `taskset -c %d`" % (m["server_cpu"], m["client_cpu"]))
    w("- Load: h2load at each shape *conns × streams* (`-c CONNS -m "
      "STREAMS`: that many connections, each with that many requests in "
      "flight), `GET %s`; %d s measured (`-D`) after a %d s warm-up "
      "(`--warm-up-time`), every shape on the same server start, a fresh "
      "server per arm and repeat. *h2*: TLS (a self-signed ECDSA P-256 "
      "certificate made for the run), h2 chosen by ALPN (h2load offers "
      "only h2); *h2c*: cleartext, h2load opens with the connection "
      "preface (prior knowledge)" % (m["path"], m["duration_s"],
                                     m["warmup_s"]))
    w("- Repeats: %d, interleaved (the arm order rotates each repeat); "
      "figures are medians, min–max beside req/s and CPU" % m["repeat"])
    w("- *req/s*: h2load's, requests completed in its measured window over "
      "its length. *CPU µs/req*: utime+stime of the server's whole process "
      "tree (`/proc`) between the lines h2load prints when that window "
      "opens and closes, over the requests of the window. *CPU vs nginx*: "
      "that over nginx's at the same protocol and shape (issue 29's "
      "target: ≤ %.1f× over h2); *vs hypercorn*: req/s over hypercorn's, "
      "same protocol and shape (target: ≥ %.0f×). *server CPU*, *h2load "
      "CPU*: their CPU time over the window's wall time; *h2load µs/req*: "
      "the client's own cost; *mean ms*: h2load's mean time per request"
      % (CPU_TARGET, RPS_TARGET))
    w("")
    w("| arm | proto | conns × streams | req/s | min–max | CPU µs/req | "
      "min–max | CPU vs nginx | vs nginx | vs hypercorn | server CPU | "
      "h2load CPU | h2load µs/req | others on its CPU | mean ms | flags |")
    w("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
      "---:|---|")
    for r in s["rows"]:
        if not r.get("n"):
            w("| %s | %s | %s |%s ⚠ failed: %s |" % (
                r["arm"], r["proto"], _shape(r), " – |" * 12,
                "; ".join(r["failed"])[:160]))
            continue
        fl = "⚠ " + "; ".join(r["flags"]) if r["flags"] else "0"
        if r["failed"]:
            fl += "; %d run(s) failed" % len(r["failed"])
        w("| %s | %s | %s | %.0f | %.0f–%.0f | %.1f | %.1f–%.1f | %s | %s | "
          "%s | %.0f %% | %.0f %% | %.1f | %s | %s | %s |" % (
              r["arm"], r["proto"], _shape(r), r["rps"], r["rps_min"],
              r["rps_max"], r["cpu_us"], r["cpu_us_min"], r["cpu_us_max"],
              _x(r["cpu_vs_nginx"]), _x(r["rps_vs_nginx"]),
              _x(r["rps_vs_hypercorn"]), r["server_cpu_pct"],
              r["client_cpu_pct"], r["client_us"],
              "%.0f %%" % r["other_pct"] if r["other_pct"] is not None
              else "?", "%.2f" % r["mean_ms"] if r["mean_ms"] is not None
              else "–", fl))
    w("")
    w("Flags (⚠): h2load's failed, errored and timed-out requests and "
      "answers other than 2xx, summed over repeats; *protocol*: h2load "
      "negotiated something else; *client-bound?*: h2load used ≥ %.0f %% "
      "of its CPU, so req/s may be its limit (read CPU µs/req); *waited on "
      "h2load*: the server and other processes together used less than "
      "%.0f %% of the server's CPU; *disturbed*: other processes took "
      "≥ %.0f %% of the server's CPU in some repeat."
      % (CLIENT_BOUND_PCT, SATURATED_PCT, DISTURBED_PCT))
    w("")
    w("## Commands")
    w("")
    w("`PORT` is picked free per server start; `$REPO` is the repository "
      "root, `$LOGDIR` the run's temporary directory (the certificate, "
      "`ecdsa.crt`/`ecdsa.key`).")
    w("")
    for name, a in doc["arms"].items():
        if "command" not in a:
            continue
        w("- **%s** (%s): %s" % (name, a["proto"], a["note"]))
        w("  `%s`" % a["command"])
        pre = a.get("preflight")
        if pre:
            w("  — preflight: %d on 2 streams of one connection%s%s" % (
                pre["status"], ", TLS: %s, ALPN %s" % (pre["tls"], pre["alpn"])
                if pre.get("tls") else "",
                ", server: %s" % pre["server_header"]
                if pre.get("server_header") else ""))
    w("- **client**: `%s`" % m["client_command"])
    w("")
    if doc["skipped"]:
        w("## Skipped")
        w("")
        for name, why in doc["skipped"].items():
            w("- **%s**: %s" % (name, why))
        w("")
    w("## Versions")
    w("")
    w("- Debian packages: " + ", ".join(
        "%s %s" % kv for kv in sorted(m.get("packages", {}).items())))
    if m.get("sluice_version"):
        w("- sluice: %s" % m["sluice_version"])
    w("")
    return "\n".join(out)


def _verdict(ok):
    return "meets" if ok else "**misses**"


def targets_markdown(doc):
    """h2-29.md: issue 29's two targets, judged on the sluice rows over
    h2 (the h2c rows beside them for reading), then the peers."""
    m, rows = doc["meta"], [r for r in doc["summary"]["rows"] if r.get("n")]
    out = []
    w = out.append
    w("# sluice over HTTP/2 beside nginx and hypercorn (issue 29)")
    w("")
    if m.get("label"):
        w("> %s" % m["label"])
        w("")
    w("Read from one run of `bench/h2bench.py`, whose report [`h2.md`](h2.md) "
      "has every column, the commands, flags and versions. Every server "
      "has one worker on CPU 0; h2load (one thread) is on CPU 1. All "
      "figures are medians over the repeats; shapes are h2load's "
      "*connections × streams in flight per connection*.")
    w("")
    w("- `h2`: %s, commit %s, %d × %d s, load average %s → %s"
      % (m["date"], m.get("git_commit", "?"), m["repeat"], m["duration_s"],
         " ".join(m["loadavg_start"]), " ".join(m.get("loadavg_end", []))))
    w("")
    w("## CPU per request ≤ %.1f× nginx's over h2, and ≥ %.0f× hypercorn's "
      "requests per second" % (CPU_TARGET, RPS_TARGET))
    w("")
    ours = [r for r in doc["summary"]["rows"] if r["arm"] in doc["ours"]]
    if ours:
        w("| arm | proto | conns × streams | CPU µs/req | nginx's | CPU vs "
          "nginx | target | req/s | hypercorn's | vs hypercorn | target | "
          "flags |")
        w("|---|---|---|---:|---:|---:|---|---:|---:|---:|---|---|")
        by = {(r["arm"], r["conns"], r["streams"]): r for r in rows}
        for r in ours:
            if not r.get("n"):
                w("| %s | %s | %s |%s ⚠ failed: %s |" % (
                    r["arm"], r["proto"], _shape(r), " – |" * 8,
                    "; ".join(r["failed"])[:200]))
                continue
            key = (r["conns"], r["streams"])
            ng = by.get((base_name("nginx", r["proto"]),) + key)
            hc = by.get((base_name("hypercorn", r["proto"]),) + key)
            judged = r["proto"] == "h2"
            cv, hv = r["cpu_vs_nginx"], r["rps_vs_hypercorn"]
            w("| %s | %s | %s | %.1f | %s | %s | %s | %.0f | %s | %s | %s | "
              "%s |" % (
                  r["arm"], r["proto"], _shape(r), r["cpu_us"],
                  "%.1f" % ng["cpu_us"] if ng else "–", _x(cv),
                  _verdict(cv <= CPU_TARGET) if judged and cv else "–",
                  r["rps"], "%.0f" % hc["rps"] if hc else "–", _x(hv),
                  _verdict(hv >= RPS_TARGET) if judged and hv else "–",
                  "⚠ " + "; ".join(r["flags"]) if r["flags"] else ""))
    else:
        w("No sluice row: %s." % ("; ".join(
            "%s skipped (%s)" % (n, why[:200])
            for n, why in doc["skipped"].items() if n in doc["ours"])
            or "no sluice arm was run"))
    w("")
    w("The targets are judged over h2 (TLS); the h2c rows compare with "
      "nginx and hypercorn over h2c. Where h2load is flagged "
      "*client-bound?*, req/s is its limit and CPU µs/req the figure to "
      "read.")
    w("")
    w("## The peers")
    w("")
    if not any(r["arm"] not in doc["ours"] for r in doc["summary"]["rows"]):
        w("None run.")
        w("")
        return "\n".join(out)
    w("| arm | proto | conns × streams | req/s | CPU µs/req | h2load CPU "
      "| flags |")
    w("|---|---|---|---:|---:|---:|---|")
    for r in doc["summary"]["rows"]:
        if r["arm"] in doc["ours"]:
            continue
        if not r.get("n"):
            w("| %s | %s | %s | – | – | – | ⚠ failed: %s |" % (
                r["arm"], r["proto"], _shape(r),
                "; ".join(r["failed"])[:200]))
            continue
        w("| %s | %s | %s | %.0f | %.1f | %.0f %% | %s |" % (
            r["arm"], r["proto"], _shape(r), r["rps"], r["cpu_us"],
            r["client_cpu_pct"],
            "⚠ " + "; ".join(r["flags"]) if r["flags"] else ""))
    w("")
    return "\n".join(out)


def chart(doc, path):
    """req/s (log scale) and CPU µs per request, per shape and arm."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in doc["summary"]["rows"] if r.get("n")]
    shapes = []
    for r in rows:
        if (r["conns"], r["streams"]) not in shapes:
            shapes.append((r["conns"], r["streams"]))
    arms = [a for a in doc["arms"] if any(r["arm"] == a for r in rows)]
    if not shapes or not arms:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    width = 0.8 / len(arms)
    colours = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3",
               "#937860", "#da8bc3", "#8c8c8c"]
    for ax, (field, lo, hi, label, log) in zip(axes, (
            ("rps", "rps_min", "rps_max", "requests / s", True),
            ("cpu_us", "cpu_us_min", "cpu_us_max",
             "server CPU µs per request", True))):
        for i, arm in enumerate(arms):
            xs, ys, el, eh, hatch = [], [], [], [], []
            for j, sh in enumerate(shapes):
                r = next((r for r in rows if r["arm"] == arm
                          and (r["conns"], r["streams"]) == sh), None)
                if r is None:
                    continue
                xs.append(j + (i - (len(arms) - 1) / 2) * width)
                ys.append(r[field])
                el.append(r[field] - r[lo])
                eh.append(r[hi] - r[field])
                hatch.append(bool(r["flags"]))
            bars = ax.bar(xs, ys, width, yerr=[el, eh], capsize=2,
                          label=arm, color=colours[i % len(colours)])
            for bar, flagged, y in zip(bars, hatch, ys):
                if flagged:
                    bar.set_hatch("//")
                    bar.set_edgecolor("black")
                ax.text(bar.get_x() + bar.get_width() / 2, y, _short(y),
                        ha="center", va="bottom", fontsize=6, rotation=90)
        if log:
            ax.set_yscale("log")
        ax.set_xticks(range(len(shapes)))
        ax.set_xticklabels(["%d × %d" % sh for sh in shapes])
        ax.set_xlabel("connections × streams per connection")
        ax.set_ylabel(label + " (median; bars: min–max)")
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(arms),
               fontsize=8)
    m = doc["meta"]
    fig.suptitle("HTTP/2 hello world, one worker — h2load, %d s × %d, "
                 "server on CPU %d, h2load on CPU %d"
                 % (m["duration_s"], m["repeat"], m["server_cpu"],
                    m["client_cpu"]), fontsize=10)
    fig.text(0.01, 0.99, "%s  hatched = flagged in the table" % m["date"],
             fontsize=7, color="grey", va="top")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _short(v):
    """A bar's label: 63483 -> 63.5k, 11.7 -> 11.7."""
    if v >= 1e4:
        return "%.0fk" % (v / 1e3)
    if v >= 1e3:
        return "%.1fk" % (v / 1e3)
    return "%.0f" % v if v >= 100 else "%.1f" % v


def write(doc, out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    base = out / "h2"
    with open(str(base) + ".json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    Path(str(base) + ".md").write_text(markdown(doc))
    (out / "h2-29.md").write_text(targets_markdown(doc))
    png = chart(doc, str(base) + ".png")
    print("wrote %s.md, %s.json, %s%s" % (base, base, out / "h2-29.md",
                                          ", " + png if png else ""))


# ---------------------------------------------------------------- driver


def parse_shapes(text):
    shapes = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)x(\d+)\s*", part)
        if not m or not int(m.group(1)) or not int(m.group(2)):
            raise ValueError(part)
        shapes.append((int(m.group(1)), int(m.group(2))))
    return shapes


def pick_arms(only, protos):
    """The suite's arms named in ONLY (a name, or a prefix before '-':
    `nginx` is nginx-h2 and nginx-h2c, `sluice` every sluice arm) and of a
    protocol in PROTOS; unknown names raise ValueError."""
    arms = list(H2.arms)
    if only:
        wanted = [w.strip() for w in only.split(",") if w.strip()]
        bad = [w for w in wanted if not any(
            a.name == w or a.name.startswith(w + "-") for a in arms)]
        if bad:
            raise ValueError(",".join(bad))
        arms = [a for a in arms if any(
            a.name == w or a.name.startswith(w + "-") for w in wanted)]
    return [a for a in arms if proto(a) in protos]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=int, default=10,
                    help="seconds of each measured h2load run (default 10)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="seconds of h2load's warm-up before it (default 2)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="",
                    help="arms, or their prefixes (nginx, hypercorn, "
                         "sluice, sluice-asgi); default: all")
    ap.add_argument("--protos", default="h2,h2c")
    ap.add_argument("--shapes", default=",".join("%dx%d" % s
                                                  for s in SHAPES),
                    help="CONNSxSTREAMS,... (default %(default)s)")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--sluice-bin",
                    default=os.environ.get("SLUICE_BIN", "./sluice"))
    ap.add_argument("--out", default=str(BENCH / "results"))
    ap.add_argument("--label", default="")
    ap.add_argument("--list", action="store_true",
                    help="print the arms' commands, run nothing")
    ap.add_argument("--render", metavar="JSON",
                    help="only rewrite the reports beside an h2.json")
    args = ap.parse_args()
    if args.render:
        with open(args.render) as f:
            doc = json.load(f)
        m = doc["meta"]  # the table's figures, from the runs again
        doc["summary"] = summarise(
            doc["runs"], {n: a["proto"] for n, a in doc["arms"].items()},
            [tuple(s) for s in m["shapes"]])
        write(doc, Path(args.render).parent)
        return 0
    protos = [p.strip() for p in args.protos.split(",") if p.strip()]
    if not protos or any(p not in ("h2", "h2c") for p in protos):
        ap.error("--protos takes h2,h2c")
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as e:
        ap.error("--shapes takes CONNSxSTREAMS,...; not %r" % str(e))
    try:
        arms = pick_arms(args.only, protos)
    except ValueError as e:
        ap.error("unknown arm(s) %s; the h2 suite has: %s"
                 % (e, ", ".join(a.name for a in H2.arms)))
    ctx_base = {"apps": str(run.APPS), "root": str(run.ROOT),
                "sluice": run.sluice_bin(args), "sluice_before": "",
                "certfile": "$LOGDIR/ecdsa.crt",
                "keyfile": "$LOGDIR/ecdsa.key"}
    client = " ".join(h2load_argv("PORT", "/", False, "CONNS", "STREAMS",
                                  args.duration, args.warmup,
                                  args.client_cpu)[:-1]) \
        + " [--npn-list h2] http[s]://127.0.0.1:PORT/"
    if args.list:
        with tempfile.TemporaryDirectory() as tmp:
            for arm in arms:
                srv = run.Server(arm, dict(ctx_base, port="PORT"),
                                 args.server_cpu, tmp, "x")
                print("%s (%s): %s" % (arm.name, proto(arm),
                                       srv.command_line()))
        print("client: %s" % client)
        return 0
    if not os.access(H2LOAD, os.X_OK):
        print("h2load not found at %s (apt-get install nghttp2-client)"
              % H2LOAD, file=sys.stderr)
        return 1
    skipped, runnable = {}, []
    for arm in arms:
        need = run.expand(arm.requires or "", ctx_base)
        if need and not os.access(need, os.X_OK):
            skipped[arm.name] = "binary not found: %s" % need
            print("skip %-16s %s" % (arm.name, skipped[arm.name]), flush=True)
        else:
            runnable.append(arm)
    os.sched_setaffinity(0, {args.client_cpu})
    logdir = tempfile.mkdtemp(prefix="sluice-h2-")
    print("server logs: %s" % logdir, flush=True)
    ctx_base.update(zip(("certfile", "keyfile"),
                        workload.tls_certs(logdir, ("ecdsa",))["ecdsa"]))
    meta = run.machine_info()
    meta["packages"].update(_versions(["nghttp2-client", "python3-h2",
                                       "nginx"]))
    meta.update({
        "suite": "h2", "label": args.label,
        "date": datetime.datetime.now(datetime.timezone.utc)
        .strftime("%Y-%m-%d %H:%M:%S UTC"),
        "duration_s": args.duration, "warmup_s": args.warmup,
        "repeat": args.repeat, "shapes": shapes, "path": "/",
        "server_cpu": args.server_cpu, "client_cpu": args.client_cpu,
        "root": str(run.ROOT), "client_command": client,
        "openssl": subprocess.run(["/usr/bin/openssl", "version"],
                                  capture_output=True,
                                  text=True).stdout.strip(),
        "git_commit": subprocess.run(
            ["git", "-C", str(run.ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True).stdout.strip(),
    })
    try:
        meta["sluice_version"] = subprocess.run(
            [ctx_base["sluice"], "--version"], capture_output=True,
            text=True, timeout=10).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    arm_info = {a.name: {"note": a.note, "proto": proto(a)} for a in arms}
    runs, errors = [], {}
    srv = None
    try:
        for rep in range(args.repeat):
            k = rep % len(runnable) if runnable else 0
            for arm in runnable[k:] + runnable[:k]:
                ctx = dict(ctx_base, port=run.free_port())
                srv = run.Server(arm, ctx, args.server_cpu, logdir,
                                 "%s-%d" % (arm.name, rep + 1))
                arm_info[arm.name]["command"] = srv.command_line().replace(
                    "127.0.0.1:%d" % ctx["port"], "127.0.0.1:PORT")
                try:
                    srv.start()
                    arm_info[arm.name]["preflight"] = preflight(
                        srv.port, arm.path, arm.tls, arm.expect_body)
                    for conns, streams in shapes:
                        if not srv.alive():
                            raise run.Skip("server exited: %s"
                                           % srv.log_tail())
                        r = measure(srv, arm, conns, streams, args)
                        r["rep"] = rep + 1
                        runs.append(r)
                        print("rep %d %-16s %4dx%-4d %s" % (
                            rep + 1, arm.name, conns, streams,
                            "FAILED: " + r["error"] if "error" in r else
                            "%8.0f req/s  %6.1f us/req  srv %3.0f%%  "
                            "h2load %3.0f%%  others %3.0f%%" % (
                                r["rps"], r["cpu_us_per_req"],
                                r["server_cpu_pct"], r["client_cpu_pct"],
                                r.get("other_on_server_cpu_pct") or 0)),
                            flush=True)
                except run.Skip as e:
                    errors.setdefault(arm.name, []).append(str(e))
                    print("rep %d %-16s skipped: %s" % (rep + 1, arm.name, e),
                          flush=True)
                finally:
                    srv.stop()
    except KeyboardInterrupt:
        if srv is not None:
            srv.stop()
        print("interrupted; no report written", file=sys.stderr)
        return 130
    for name, errs in errors.items():
        if not any(r["arm"] == name and "rps" in r for r in runs):
            skipped[name] = errs[0]
    meta["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    doc = {"meta": meta, "arms": arm_info, "skipped": skipped, "runs": runs,
           "ours": [a.name for a in arms if a.ours],
           "summary": summarise(runs, {a.name: proto(a) for a in arms},
                                shapes)}
    places = {str(run.ROOT): "$REPO", logdir: "$LOGDIR"}
    after = Path(ctx_base["sluice"]).resolve().parent
    if not str(after).startswith(str(run.ROOT)):
        places[str(after)] = "$AFTER"
    write(report.scrub(doc, places), args.out)
    return 0


def _versions(pkgs):
    try:
        text = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Package} ${Version}\\n"] + pkgs,
            capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(line.split(" ", 1) for line in text.splitlines()
                if " " in line)


if __name__ == "__main__":
    sys.exit(main())
