"""The WebSocket echo suite of bench/run.py (--suite ws): a report, not a
test.

Each arm serves bench/apps/ws_echo_asgi.py with one worker, pinned to the
server CPU. The load is bench/wsload.c (built here into bench/.build/),
pinned to the client CPU: N connections, each sending a 16-byte text
message and waiting for its echo, a closed loop. wsload prints MEASURE
when its warm-up ends; the server's process-tree CPU time (run.py's
process_tree, /proc/PID/stat) is sampled then and when its JSON summary
arrives, so CPU µs per message covers the same window as the message
count. wsload reports its own CPU time over that window too: the client
must use less CPU than the server for the numbers to be about the server.

An arm that does not complete a WebSocket handshake and an echo (sluice
before it served WebSockets) is skipped, with what it answered.
"""

import base64
import datetime
import json
import os
import select
import socket
import statistics
import struct
import subprocess
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
WSLOAD_SRC = BENCH / "wsload.c"
WSLOAD = BENCH / ".build" / "wsload"
MSG_SIZE = 16
CLIENT_BOUND_PCT = 90.0


def build_wsload():
    """bench/.build/wsload, compiled when missing or older than its
    source."""
    if WSLOAD.exists() and WSLOAD.stat().st_mtime >= \
            WSLOAD_SRC.stat().st_mtime:
        return WSLOAD
    WSLOAD.parent.mkdir(exist_ok=True)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-o",
                    str(WSLOAD), str(WSLOAD_SRC)], check=True)
    return WSLOAD


def preflight(port, path, skip):
    """A WebSocket handshake and one echo on PATH; info for the report, or
    SKIP(reason) raised when the server does not serve WebSockets."""
    key = base64.b64encode(os.urandom(16)).decode()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError as e:
        raise skip("no TCP connection: %s" % e)
    with s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                   "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
                   "\r\n" % (path, port, key)).encode())
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                data = s.recv(4096)
                if not data:
                    break
                buf += data
        except OSError as e:
            raise skip("not serving WebSockets: %s" % e)
        head, _, rest = buf.partition(b"\r\n\r\n")
        first = head.split(b"\r\n")[0].decode("latin-1")
        if not first.startswith("HTTP/1.1 101"):
            raise skip("not serving WebSockets: the handshake got %r"
                       % (first or buf[:60]))
        server = None
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.decode("latin-1").partition(":")
            if k.strip().lower() == "server":
                server = v.strip()
        mask = os.urandom(4)
        body = b"preflight"
        s.sendall(bytes([0x81, 0x80 | len(body)]) + mask +
                  bytes(b ^ mask[i % 4] for i, b in enumerate(body)))
        want = bytes([0x81, len(body)]) + body
        try:
            while len(rest) < len(want):
                data = s.recv(4096)
                if not data:
                    break
                rest += data
        except OSError:
            pass
        if rest[:len(want)] != want:
            raise skip("not serving the app: echo got %r" % rest[:40])
        s.sendall(bytes([0x88, 0x82]) + mask +
                  bytes(b ^ mask[i % 4]
                        for i, b in enumerate(struct.pack("!H", 1000))))
    return {"status": 101, "server_header": server, "echo": True}


def run_wsload(run, port, path, conns, args, root_pid):
    """One wsload run; its summary plus the server's CPU over the measured
    window."""
    argv = [run.TASKSET, "-c", str(args.client_cpu), str(WSLOAD),
            "-p", str(port), "-P", path, "-c", str(conns),
            "-d", str(args.duration), "-w", str(args.warmup),
            "-s", str(MSG_SIZE)]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + args.warmup + args.duration + 40
    before = cpus_before = t0 = None
    res = {"argv": argv}
    buf = b""
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([p.stdout], [], [], 0.5)
            if not ready:
                continue
            data = os.read(p.stdout.fileno(), 65536)
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                line = line.decode(errors="replace").strip()
                if line == "MEASURE":
                    before = run.process_tree(root_pid)
                    cpus_before = run.cpu_ticks()
                    t0 = time.monotonic()
                elif line.startswith("{"):
                    after = run.process_tree(root_pid)
                    cpus_after = run.cpu_ticks()
                    wall = time.monotonic() - (t0 or time.monotonic())
                    res.update(json.loads(line))
                    if before is not None:
                        ticks, note = run.tree_cpu_delta(before, after)
                        res["server_cpu_s"] = ticks / run.CLK_TCK
                        res["harness_wall_s"] = round(wall, 3)
                        busy = (cpus_after[args.server_cpu]["busy"]
                                + cpus_after[args.server_cpu]["irq"]
                                - cpus_before[args.server_cpu]["busy"]
                                - cpus_before[args.server_cpu]["irq"])
                        res["other_on_server_cpu_pct"] = max(
                            0.0, 100.0 * (busy - ticks) / run.CLK_TCK
                            / max(wall, 1e-3))
                        if note:
                            res["server_tree_note"] = note
                elif line:
                    res.setdefault("output", []).append(line)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    if "error" in res:
        return {"error": res["error"], "argv": argv}
    if "messages" not in res or "server_cpu_s" not in res:
        return {"error": "wsload gave no summary (exit %s): %s"
                % (p.returncode, " | ".join(res.get("output", [])[-3:])),
                "argv": argv}
    n, wall = res["messages"], res["wall_s"]
    res["rps"] = res["msgs_per_s"]
    res["cpu_us_per_msg"] = 1e6 * res["server_cpu_s"] / n if n else None
    res["server_cpu_pct"] = 100.0 * res["server_cpu_s"] / wall
    res["client_cpu_pct"] = 100.0 * res["client_cpu_s"] / wall
    res["client_user_pct"] = 100.0 * res.get("client_user_s", 0) / wall
    return res


def _med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(runs, arm_names, conns_list, baselines):
    rows, base = [], {}
    for arm in arm_names:
        for conns in conns_list:
            mine = [r for r in runs if r["arm"] == arm and r["conns"] == conns]
            if not mine:
                continue
            ok = [r for r in mine if "rps" in r]
            row = {"arm": arm, "conns": conns, "n": len(ok),
                   "failed": [r["error"] for r in mine if "error" in r]}
            if ok:
                rps = [r["rps"] for r in ok]
                row.update(
                    rps_median=_med(rps), rps_min=min(rps), rps_max=max(rps),
                    cpu_us_per_msg=_med([r["cpu_us_per_msg"] for r in ok]),
                    server_cpu_pct=_med([r["server_cpu_pct"] for r in ok]),
                    client_cpu_pct=_med([r["client_cpu_pct"] for r in ok]),
                    client_user_pct=_med([r["client_user_pct"] for r in ok]),
                    other_pct=_med([r.get("other_on_server_cpu_pct")
                                    for r in ok]),
                    p50_ms=_med([r["latency_us"]["p50"] for r in ok]) / 1e3,
                    p99_ms=_med([r["latency_us"]["p99"] for r in ok]) / 1e3,
                    errors=sum(sum(r["errors"].values()) for r in ok))
                if arm in baselines:
                    base[arm, conns] = row
            rows.append(row)
    for row in rows:
        row["ratio"], row["cpu_ratio"] = {}, {}
        for b in baselines:
            ref = base.get((b, row["conns"]))
            if ref and row.get("rps_median") is not None:
                row["ratio"][b] = row["rps_median"] / ref["rps_median"]
                row["cpu_ratio"][b] = row["cpu_us_per_msg"] / \
                    ref["cpu_us_per_msg"]
    return {"baselines": baselines, "rows": rows}


def flags(row):
    out = []
    if row.get("errors"):
        out.append("%d connection errors" % row["errors"])
    if row["client_cpu_pct"] >= CLIENT_BOUND_PCT:
        out.append("client %.0f%% busy: client-bound?" % row["client_cpu_pct"])
    if row["client_cpu_pct"] >= row["server_cpu_pct"]:
        out.append("client CPU not below the server's")
    if (row.get("other_pct") or 0) >= 10:
        out.append("disturbed: others took %.0f%% of the server CPU"
                   % row["other_pct"])
    if row["failed"]:
        out.append("%d run(s) failed" % len(row["failed"]))
    return out


def markdown(doc):
    m, summary = doc["meta"], doc["summary"]
    bl = summary["baselines"]
    out = []
    w = out.append
    w("# sluice benchmark: %s" % m["title"])
    w("")
    if m.get("label"):
        w("> %s" % m["label"])
        w("")
    if not any(doc["arms"].get(r["arm"], {}).get("ours") and r.get("n")
               for r in summary["rows"]):
        w("> **PEERS ONLY.** No sluice arm produced numbers in this run (see "
          "*Skipped*): sluice did not complete a WebSocket handshake yet.")
        w("")
    w("- Date: %s; commit %s" % (m["date"], m.get("git_commit") or "?"))
    w("- Machine: %s, %s CPUs, kernel %s, Debian %s; load average %s at the "
      "start, %s at the end (shared machine: expect noise)"
      % (m["cpu_model"], m["cpus"], m["kernel"], m["debian"],
         " ".join(m["loadavg_start"]), " ".join(m.get("loadavg_end", []))))
    w("- Pinning: servers `taskset -c %d`, wsload `taskset -c %d`"
      % (m["server_cpu"], m["client_cpu"]))
    w("- Load: `bench/wsload.c` (C, epoll, one thread): CONNS connections, "
      "each sending a %d-byte masked text message and waiting for its echo "
      "(closed loop, no permessage-deflate offered); %d s measured after a "
      "%d s warm-up, on a fresh server per arm and repeat; %d repeat(s), "
      "interleaved; msgs/s is the median with min–max beside it"
      % (MSG_SIZE, m["duration_s"], m["warmup_s"], m["repeat"]))
    w("- CPU µs/msg: utime+stime of the server's whole process tree "
      "(/proc/PID/stat) over the measured window, per echoed message. "
      "*CPU vs X*: that over X's (below 1 is cheaper). *client CPU*: "
      "wsload's own CPU time over wall time, which must stay below the "
      "server's for the run to measure the server; in brackets its user "
      "part. Most of the client's time is the kernel's: on loopback the "
      "sender's system call also runs the receiver's TCP input, so the "
      "client's system time includes part of the server's network work "
      "and the server's includes part of the client's")
    w("")
    w("| arm | conns | msgs/s | min–max | %s | CPU µs/msg | %s | server CPU "
      "| client CPU | others on its CPU | p50 ms | p99 ms | flags |"
      % (" | ".join("vs %s" % b for b in bl),
         " | ".join("CPU vs %s" % b for b in bl)))
    w("|---|---:|---:|---:|%s---:|%s---:|---:|---:|---:|---:|---|"
      % ("---:|" * len(bl), "---:|" * len(bl)))
    for r in summary["rows"]:
        if not r.get("n"):
            w("| %s | %d | – | – |%s – |%s – | – | – | – | – | ⚠ failed: %s |"
              % (r["arm"], r["conns"], " – |" * len(bl), " – |" * len(bl),
                 "; ".join(r["failed"])[:120]))
            continue
        fl = flags(r)
        w("| %s | %d | %.0f | %.0f–%.0f | %s | %.1f | %s | %.0f %% | %.0f %% "
          "(%.0f %%) | %s | %.2f | %.2f | %s |" % (
              r["arm"], r["conns"], r["rps_median"], r["rps_min"],
              r["rps_max"],
              " | ".join("%.2f×" % r["ratio"][b] if b in r["ratio"] else "–"
                         for b in bl),
              r["cpu_us_per_msg"],
              " | ".join("%.2f" % r["cpu_ratio"][b] if b in r["cpu_ratio"]
                         else "–" for b in bl),
              r["server_cpu_pct"], r["client_cpu_pct"], r["client_user_pct"],
              "%.0f %%" % r["other_pct"] if r.get("other_pct") is not None
              else "?", r["p50_ms"], r["p99_ms"],
              ("⚠ " + "; ".join(fl)) if fl else "0"))
    w("")
    w("Issue 10's target, read from this table: sluice at ≤ 1/3 of "
      "`uvicorn-websockets`' CPU per message (*CPU vs* ≤ 0.33) and ≥ 3× its "
      "messages per second.")
    w("")
    w("## Commands")
    w("")
    for name, a in doc["arms"].items():
        if "command" in a:
            w("- **%s**: %s" % (name, a["note"]))
            w("  `%s`" % a["command"])
    w("- **wsload**: `%s`" % m["client_command"])
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
    w("")
    return "\n".join(out)


def chart(doc, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    m, rows = doc["meta"], doc["summary"]["rows"]
    arms = list(doc["arms"])
    conns_list = m["conns"]
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(arms) + 2), 4.5))
    width = 0.8 / max(1, len(conns_list))
    ymax = max([r.get("rps_max", 0) for r in rows] + [1])
    for i, conns in enumerate(conns_list):
        xs, ys, lo, hi = [], [], [], []
        for j, arm in enumerate(arms):
            row = next((r for r in rows if r["arm"] == arm
                        and r["conns"] == conns and r.get("n")), None)
            if row is None:
                continue
            xs.append(j + (i - (len(conns_list) - 1) / 2) * width)
            ys.append(row["rps_median"])
            lo.append(row["rps_median"] - row["rps_min"])
            hi.append(row["rps_max"] - row["rps_median"])
        bars = ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3,
                      label="%d conns" % conns)
        for bar, y in zip(bars, ys):
            ax.text(bar.get_x() + bar.get_width() / 2, y + ymax * 0.02,
                    "%.0f" % y, ha="center", va="bottom", fontsize=7,
                    rotation=90)
    for j, arm in enumerate(arms):
        if arm in doc["skipped"]:
            ax.text(j, ymax * 0.02, "skipped", ha="center", va="bottom",
                    fontsize=8, rotation=90, color="grey")
    ax.set_xlim(-0.6, len(arms) - 0.4)
    ax.set_xticks(range(len(arms)))
    ax.set_xticklabels(arms, rotation=20, ha="right")
    ax.set_ylabel("echoed messages / s (median; bars: min–max)")
    ax.set_ylim(0, ymax * 1.3)
    ax.set_title("%s — %d s × %d, server CPU %d, wsload CPU %d"
                 % (m["title"], m["duration_s"], m["repeat"],
                    m["server_cpu"], m["client_cpu"]), fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(run, args, suite, arms, conns_list, baselines, ctx_base):
    """The ws suite's matrix (run.py's main hands over after parsing)."""
    import report
    build_wsload()
    os.sched_setaffinity(0, {args.client_cpu})
    skipped, runnable = {}, []
    for arm in arms:
        need = arm.requires and run.expand(arm.requires, ctx_base)
        if need and not os.access(need, os.X_OK):
            skipped[arm.name] = "binary not found: %s" % need
        else:
            runnable.append(arm)
    meta = run.machine_info()
    meta.update({
        "suite": suite.name, "title": suite.title, "label": args.label,
        "date": datetime.datetime.now(datetime.timezone.utc)
        .strftime("%Y-%m-%d %H:%M:%S UTC"),
        "duration_s": args.duration, "warmup_s": args.warmup,
        "repeat": args.repeat, "conns": conns_list,
        "server_cpu": args.server_cpu, "client_cpu": args.client_cpu,
        "baselines": baselines, "sluice_bin": ctx_base["sluice"],
        "root": str(run.ROOT), "msg_size": MSG_SIZE,
        "git_commit": subprocess.run(
            ["git", "-C", str(run.ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True).stdout.strip(),
        "client_command": "taskset -c %d bench/.build/wsload -p PORT -P PATH "
        "-c CONNS -d %d -w %d -s %d" % (args.client_cpu, args.duration,
                                        args.warmup, MSG_SIZE),
    })
    arm_info = {a.name: {"note": a.note, "path": a.path, "ours": a.ours}
                for a in arms}
    runs, attempt_errors = [], {}
    logdir = tempfile.mkdtemp(prefix="sluice-bench-ws-")
    print("server logs: %s" % logdir, flush=True)
    for rep in range(args.repeat):
        k = rep % len(runnable) if runnable else 0
        for arm in runnable[k:] + runnable[:k]:
            ctx = dict(ctx_base, port=run.free_port())
            srv = run.Server(arm, ctx, args.server_cpu, logdir,
                             "%s-%d" % (arm.name, rep + 1))
            arm_info[arm.name]["command"] = srv.command_line().replace(
                "127.0.0.1:%d" % ctx["port"], "127.0.0.1:PORT").replace(
                "--port %d" % ctx["port"], "--port PORT")
            try:
                srv.start()
                arm_info[arm.name]["preflight"] = preflight(
                    srv.port, arm.path, run.Skip)
                for conns in conns_list:
                    if not srv.alive():
                        raise run.Skip("server exited: %s" % srv.log_tail())
                    r = run_wsload(run, srv.port, arm.path, conns, args,
                                   srv.proc.pid)
                    r.update(arm=arm.name, conns=conns, rep=rep + 1)
                    runs.append(r)
                    print("rep %d %-20s c%-4d %s" % (
                        rep + 1, arm.name, conns,
                        r["error"] if "error" in r else
                        "%8.0f msg/s %6.1f us/msg srv %3.0f%% client %3.0f%% "
                        "p99 %.2f ms" % (r["rps"], r["cpu_us_per_msg"],
                                         r["server_cpu_pct"],
                                         r["client_cpu_pct"],
                                         r["latency_us"]["p99"] / 1e3)),
                        flush=True)
            except run.Skip as e:
                attempt_errors.setdefault(arm.name, []).append(str(e))
                print("rep %d %-20s skipped: %s" % (rep + 1, arm.name, e),
                      flush=True)
            finally:
                srv.stop()
    for name, errs in attempt_errors.items():
        if not any(r["arm"] == name and "rps" in r for r in runs):
            skipped[name] = errs[0]
    meta["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    doc = {"meta": meta, "arms": arm_info, "skipped": skipped, "runs": runs,
           "summary": summarise(runs, [a.name for a in arms], conns_list,
                                baselines)}
    doc = report.scrub(doc, {str(run.ROOT): "$REPO", logdir: "$LOGDIR"})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = out / suite.name
    with open(str(base) + ".json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    Path(str(base) + ".md").write_text(markdown(doc))
    png = chart(doc, str(base) + ".png")
    print("wrote %s.md, %s.json%s" % (base, base, ", " + png if png else ""))
    return 0
