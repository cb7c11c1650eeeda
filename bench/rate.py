#!/usr/bin/python3
"""Fixed-rate latency benchmark: p99 at a fraction of each server's maximum
(a report, not a test).

    /usr/bin/python3 bench/rate.py [--suite wsgi|asgi|change]
                                   [--fraction 0.5 | --rate R] [--duration S]
                                   [--repeat N] [--only ARM[,ARM]]
    /usr/bin/python3 bench/rate.py --selfcheck

For each arm of the suite (suites.py's arms, started, preflighted and
stopped by run.py's code), on one fresh server per arm and repeat: first
the server's maximum rate is measured the way run.py measures req/s (wrk,
closed loop, or bench/rateload.c in its closed-loop mode with
--max-with rateload), then bench/rateload.c (built here into
bench/.build/) sends requests at FRACTION of that rate on a fixed
schedule and measures every latency from the request's intended send
time, so a stall is charged to every request it delays (no coordinated
omission). With --rate R every arm runs at R instead: CPU per request
compared at one load (a server's cost per request falls as its rate rises
and its passes batch more, so at its own fraction a faster server is
measured where it is cheaper). Server on CPU 0, client on CPU 1. Results go to
bench/results/rate-SUITE.{md,json,png}. --selfcheck shows that the client
sees a slow server's queue (see selfcheck()).
"""

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import report  # noqa: E402
import run  # noqa: E402
from suites import SUITES, Arm  # noqa: E402

RATELOAD_SRC = BENCH / "rateload.c"
RATELOAD = BENCH / ".build" / "rateload"
REQUEST_TIMEOUT = 5.0  # s: rateload -t, also its drain after the window
RATE_HELD_PCT = 95.0  # achieved below this % of the target: flagged
CLIENT_BOUND_PCT = 90.0
DISTURBED_PCT = 10.0
HTTP_SUITES = sorted(n for n, s in SUITES.items() if s.kind == "http")


def build_rateload(dest=RATELOAD):
    """DEST (bench/.build/rateload by default; a test builds it elsewhere,
    the source tree may be read-only), compiled when missing or older than
    its source."""
    dest = Path(dest)
    if dest.exists() and dest.stat().st_mtime >= RATELOAD_SRC.stat().st_mtime:
        return dest
    dest.parent.mkdir(exist_ok=True)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror",
                    "-o", str(dest), str(RATELOAD_SRC)], check=True)
    return dest


def rateload_argv(port, path, conns, rate, duration, warmup, cpu=None,
                  binary=RATELOAD):
    argv = [str(binary), "-p", str(port), "-P", path, "-c", str(conns),
            "-r", "%.3f" % rate, "-d", str(duration), "-w", str(warmup),
            "-t", str(REQUEST_TIMEOUT)]
    return argv if cpu is None else [run.TASKSET, "-c", str(cpu)] + argv


def run_rateload(argv, root_pid=None, server_cpu=None):
    """One rateload run: its JSON summary, plus (with ROOT_PID) the server
    tree's CPU time and what others used of SERVER_CPU between its MEASURE
    and END lines (run.run_marked). Never waits past rateload's own bound
    plus a margin."""
    duration, warmup = float(argv[argv.index("-d") + 1]), \
        float(argv[argv.index("-w") + 1])
    res, lines, rc = run.run_marked(
        argv, "MEASURE", "END", root_pid, server_cpu,
        timeout=warmup + duration + REQUEST_TIMEOUT + 30)
    res = dict({"argv": argv}, **res)
    out = []
    for line in lines:
        if line.startswith("{"):
            res.update(json.loads(line))
        elif line and line not in ("MEASURE", "END"):
            out.append(line)
    if "latency_us" not in res:
        return {"error": "rateload gave no summary (exit %s): %s"
                % (rc, " | ".join(out[-3:])), "argv": argv}
    return res


def rate_flags(runs):
    """Problems with one arm's fixed-rate runs at one connection count (the
    harness's own checks), over repeats: counts summed, the worst value of
    a percentage."""
    out, n = [], len(runs)

    def total(key):
        return sum(r.get(key) or 0 for r in runs)

    held = [100.0 * r["achieved_rate"] / r["rate_target"] for r in runs
            if r.get("rate_target")]
    if held and min(held) < RATE_HELD_PCT:
        out.append("rate not held: %.0f %% of target" % min(held))
    if total("unsent"):
        out.append("%d never sent" % total("unsent"))
    if total("reconnects") > 0.01 * max(total("completed"), 1):
        # closed by the server (no keep-alive), refused, or timed out
        out.append("%d connections reopened" % total("reconnects"))
    if total("warmup_timeouts"):
        # connections the server left unanswered since the warm-up
        out.append("%d warm-up requests timed out" % total("warmup_timeouts"))
    errs = {}
    for r in runs:
        for k, v in (r.get("errors") or {}).items():
            errs[k] = errs.get(k, 0) + v
    errs = {k: v for k, v in errs.items() if v}
    if errs:
        out.append("errors " + ", ".join("%s %d" % kv
                                         for kv in sorted(errs.items())))
    busy = max(r.get("client_cpu_pct", 0) for r in runs)
    if busy >= CLIENT_BOUND_PCT:
        out.append("client %.0f %% busy" % busy)
    hit = [r["other_on_server_cpu_pct"] for r in runs
           if (r.get("other_on_server_cpu_pct") or 0) >= DISTURBED_PCT]
    if hit:
        out.append("disturbed in %d/%d run%s: others took up to %.0f %% of "
                   "the server CPU" % (len(hit), n, "s" if n > 1 else "",
                                       max(hit)))
    if any(r.get("server_tree_note") for r in runs):
        out.append("process tree changed")
    if any(r.get("server_died") for r in runs):
        out.append("server died")
    return out


def max_flags(maxes, conns):
    """Flags of the maximum-rate runs: run.py's for wrk, ours for
    rateload's closed loop."""
    if all("wrk_cpu_pct" in m for m in maxes):
        return report.flags_of(maxes, conns)
    return rate_flags(maxes)


def measure_max(srv, arm, conns, args):
    """The server's maximum rate at CONNS connections: run.py's wrk run, or
    rateload's closed loop. A record with "rps" or "error"."""
    if args.max_with == "wrk":
        return run.measure(srv, arm, conns, args, run.WRK_LUA)
    r = run_rateload(rateload_argv(srv.port, arm.path, conns, 0,
                                   args.duration, args.warmup,
                                   args.client_cpu),
                     srv.proc.pid, args.server_cpu)
    if "error" in r:
        return r
    r["rps"] = r["achieved_rate"]
    r["cpu_us_per_req"] = (1e6 * r["server_cpu_s"] / r["answered_in_window"]
                           if r.get("answered_in_window") else None)
    r["client_cpu_pct"] = 100.0 * r["client_cpu_s"] / r["duration_s"]
    return r


def measure(srv, arm, conns, args):
    """Maximum rate, then the fixed-rate run at --fraction of it (at
    --rate, the same for every arm, when given)."""
    mx = measure_max(srv, arm, conns, args)
    if "error" in mx:
        return {"error": "max-rate run: " + mx["error"]}
    if not mx["rps"]:
        return {"error": "max-rate run completed no request"}
    target = args.rate or args.fraction * mx["rps"]
    r = run_rateload(rateload_argv(srv.port, arm.path, conns, target,
                                   args.duration, args.warmup,
                                   args.client_cpu),
                     srv.proc.pid, args.server_cpu)
    if "error" in r:
        return r
    wall = r["duration_s"]
    r["max"] = mx
    r["max_rps"] = mx["rps"]
    r["target_rate"] = target
    r["cpu_us_per_req"] = (1e6 * r["server_cpu_s"] / r["answered_in_window"]
                           if r.get("answered_in_window") else None)
    r["server_cpu_pct"] = 100.0 * r["server_cpu_s"] / wall
    r["client_cpu_pct"] = 100.0 * r["client_cpu_s"] / wall
    if not srv.alive():
        r["server_died"] = True
    return r


# ---------------------------------------------------------------- report


def _med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(runs, arm_names, conns_list):
    rows = []
    for arm in arm_names:
        for conns in conns_list:
            mine = [r for r in runs if r["arm"] == arm and r["conns"] == conns]
            if not mine:
                continue
            ok = [r for r in mine if "latency_us" in r]
            row = {"arm": arm, "conns": conns, "n": len(ok),
                   "failed": [r["error"] for r in mine if "error" in r]}
            if ok:
                lat = {q: _med([r["latency_us"][q] for r in ok])
                       for q in ("p50", "p90", "p99", "p99.9", "max")}
                flags = (["max run: " + f for f in
                          max_flags([r["max"] for r in ok], conns)]
                         + rate_flags(ok))
                row.update(
                    max_rps=_med([r["max_rps"] for r in ok]),
                    max_rps_min=min(r["max_rps"] for r in ok),
                    max_rps_max=max(r["max_rps"] for r in ok),
                    target=_med([r["target_rate"] for r in ok]),
                    achieved=_med([r["achieved_rate"] for r in ok]),
                    latency_us=lat,
                    p99_min=min(r["latency_us"]["p99"] for r in ok),
                    p99_max=max(r["latency_us"]["p99"] for r in ok),
                    cpu_us_per_req=_med([r["cpu_us_per_req"] for r in ok]),
                    server_cpu_pct=_med([r["server_cpu_pct"] for r in ok]),
                    client_cpu_pct=_med([r["client_cpu_pct"] for r in ok]),
                    other_pct=_med([r.get("other_on_server_cpu_pct")
                                    for r in ok]),
                    errors=sum(sum(r["errors"].values()) for r in ok),
                    flags=flags)
            rows.append(row)
    return {"rows": rows}


def _ms(us):
    return "%.2f" % (us / 1000.0)


def rate_words(m):
    """The fixed rate as the title says it."""
    if m.get("rate"):
        return "%.0f req/s for every server" % m["rate"]
    return "%.0f %% of each server's maximum" % (100 * m["fraction"])


def markdown(doc):
    m, rows = doc["meta"], doc["summary"]["rows"]
    out = []
    w = out.append
    w("# sluice benchmark: %s, fixed rate (%s)" % (m["title"], rate_words(m)))
    w("")
    if m.get("label"):
        w("> %s" % m["label"])
        w("")
    w("- Date: %s; commit %s" % (m["date"], m.get("git_commit") or "?"))
    w("- Machine: %s, %s CPUs, kernel %s, Debian %s; load average %s at the "
      "start, %s at the end (shared machine: expect noise)"
      % (m["cpu_model"], m["cpus"], m["kernel"], m["debian"],
         " ".join(m["loadavg_start"]), " ".join(m.get("loadavg_end", []))))
    w("- Pinning: each server with `taskset -c %d`; the clients (wrk, "
      "rateload) and the harness on CPU %d" % (m["server_cpu"],
                                              m["client_cpu"]))
    w("- Maximum rate: %s; %d s measured after a %d s warm-up, on the same "
      "server start as the fixed-rate run that follows it"
      % ("`wrk` as `run.py` runs it (closed loop, keep-alive)"
         if m["max_with"] == "wrk" else
         "`rateload -r 0` (closed loop: each connection sends again when "
         "answered)", m["duration_s"], m["warmup_s"]))
    w("- Fixed rate: `bench/rateload.c` (C, epoll, one thread) sends request "
      "i at t0 + i/R over CONNS keep-alive connections (one request "
      "outstanding per connection; a due request waits for a free one) with "
      "R = %s; %d s measured after a %d s warm-up at the "
      "same rate. Latency runs from each request's *intended* send time to "
      "the end of its response, so time spent queued behind a slow answer "
      "counts (no coordinated omission); percentiles are exact to 1 µs "
      "below 1 s (a histogram of 1 µs buckets)"
      % ("%.0f req/s for every arm (`--rate`)" % m["rate"] if m.get("rate")
         else "%.2f × the maximum" % m["fraction"], m["duration_s"],
         m["warmup_s"]))
    w("- Repeats: %d, interleaved (the arm order rotates each repeat); "
      "every figure is the median over repeats" % m["repeat"])
    w("- *CPU µs/req*: utime+stime of the server's whole process tree "
      "between rateload's start and end of the measured window, over the "
      "responses that arrived in it. *achieved*: those responses over the "
      "window's length. *client CPU*: rateload's own CPU time over the "
      "window")
    w("")
    w("| arm | conns | max req/s | min–max | target req/s | achieved req/s "
      "| p50 ms | p99 ms | p99 min–max | p99.9 ms | max ms | CPU µs/req "
      "| server CPU | client CPU | others on its CPU | errors / flags |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
      "---:|---|")
    for r in rows:
        if not r.get("n"):
            w("| %s | %d |%s ⚠ failed: %s |" % (
                r["arm"], r["conns"], " – |" * 13,
                "; ".join(r["failed"])[:160]))
            continue
        lat = r["latency_us"]
        fl = list(r["flags"])
        if r["failed"]:
            fl.append("%d run(s) failed" % len(r["failed"]))
        w("| %s | %d | %.0f | %.0f–%.0f | %.0f | %.0f | %s | %s | %s–%s | %s "
          "| %s | %s | %.0f %% | %.0f %% | %s | %s |" % (
              r["arm"], r["conns"], r["max_rps"], r["max_rps_min"],
              r["max_rps_max"], r["target"], r["achieved"], _ms(lat["p50"]),
              _ms(lat["p99"]), _ms(r["p99_min"]), _ms(r["p99_max"]),
              _ms(lat["p99.9"]), _ms(lat["max"]),
              "%.1f" % r["cpu_us_per_req"] if r["cpu_us_per_req"] else "–",
              r["server_cpu_pct"], r["client_cpu_pct"],
              "%.0f %%" % r["other_pct"] if r["other_pct"] is not None
              else "?", ("⚠ " + "; ".join(fl)) if fl else "0"))
    w("")
    w("Flags (⚠), the harness's own checks: *rate not held*: fewer than "
      "%.0f %% of the target's responses arrived within the window; *never "
      "sent*: requests of the window still waiting for a connection when "
      "the drain (%.0f s) ended; *errors*: connect failures, resets (io), "
      "connections closed with a request outstanding, requests unanswered "
      "after %.0f s (timeout), answers outside 2xx/3xx (status), malformed "
      "answers (parse); *client busy*: rateload used ≥ %.0f %% of its CPU; "
      "*disturbed*: other processes took ≥ %.0f %% of the server's CPU; "
      "*connections reopened*: for more than 1 %% of the requests (the server "
      "closed them after a response, refused them, or a request on them "
      "timed out); "
      "*warm-up requests timed out*: requests sent before the window were "
      "never answered (a server that leaves connections unserved keeps "
      "them busy all run, so the window's own counters miss it). "
      "*max run:* flags of the maximum-rate run (run.py's: starved or slow "
      "accept, client-bound wrk, ...)."
      % (RATE_HELD_PCT, REQUEST_TIMEOUT, REQUEST_TIMEOUT, CLIENT_BOUND_PCT,
         DISTURBED_PCT))
    w("")
    w("## Commands")
    w("")
    w("Ports are picked free per server start (`PORT`); `$REPO` is the "
      "repository root, `$LOGDIR` the run's temporary directory.")
    w("")
    for name, a in doc["arms"].items():
        if "command" in a:
            w("- **%s** (GET `%s`): %s" % (name, a["path"], a["note"]))
            w("  `%s`" % a["command"])
    w("- **maximum**: `%s`" % m["max_command"])
    w("- **fixed rate**: `%s`" % m["rate_command"])
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


def chart(doc, path):
    """p50, p99 and p99.9 per arm and connection count (log scale)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    m = doc["meta"]
    rows = [r for r in doc["summary"]["rows"] if r.get("n")]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows) + 2), 4.5))
    qs = ("p50", "p99", "p99.9")
    width = 0.8 / len(qs)
    for i, q in enumerate(qs):
        xs = [j + (i - 1) * width for j in range(len(rows))]
        ys = [max(r["latency_us"][q], 1) / 1000.0 for r in rows]
        bars = ax.bar(xs, ys, width, label=q)
        for bar, r in zip(bars, rows):
            if r["flags"]:
                bar.set_hatch("//")
                bar.set_edgecolor("black")
    ax.set_yscale("log")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(["%s c%d\n%.0f req/s" % (r["arm"], r["conns"],
                                                r["target"]) for r in rows],
                       rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("latency from intended send, ms (median of repeats)")
    ax.set_title("%s\n%s, %d s × %d, server CPU %d, client "
                 "CPU %d" % (m["title"], rate_words(m), m["duration_s"],
                             m["repeat"], m["server_cpu"], m["client_cpu"]),
                 fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3, which="both")
    fig.text(0.01, 0.01, "%s  hatched = flagged in the table" % m["date"],
             fontsize=7, color="grey")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------- self-check


SLOW_S = 0.05  # the self-check's app sleeps this long per request
SLOW_PATH = "/slow?t=%g" % SLOW_S
SELFCHECK_ARM = Arm(
    name="selfcheck",
    argv=["{sluice}", "-w", "1", "--threads", "1", "-b", "127.0.0.1:{port}",
          "--chdir", "tests/apps", "drain_app:app"],
    cwd="{root}", path=SLOW_PATH, expect_body=None, requires="{sluice}",
    note="one worker, one lane: at most 1/%g requests per second" % SLOW_S)


def co_check(port, path=SLOW_PATH, service_s=SLOW_S, binary=RATELOAD):
    """The coordinated-omission check, against a server on PORT whose PATH
    takes SERVICE_S seconds and is served one request at a time (so at most
    1/SERVICE_S per second). Three rateload runs, four connections each:

    - overload, twice the capacity for 2 s: the queue grows all run, so
      the median request waits about as long as the run is old (~1 s) and
      p99 reaches ~2 s. A client that times from the actual send would
      show at most 4 × SERVICE_S (the connections' own queue at the
      server), and so does the closed loop below;
    - closed loop (-r 0) for 1 s: what such a client reports for the same
      server, for comparison;
    - underload, half the capacity for 1 s: nothing queues, so p99 stays
      within a few service times (the client adds no latency of its own).

    Returns (verdicts [(name, ok, detail)], runs {name: summary})."""
    cap = 1.0 / service_s

    def load(rate, duration):
        return run_rateload(rateload_argv(port, path, 4, rate, duration, 0,
                                          binary=binary))

    runs = {"overload": load(2 * cap, 2), "closed": load(0, 1),
            "underload": load(cap / 2, 1)}
    verdicts = []

    def check(name, ok, detail):
        verdicts.append((name, bool(ok), detail))

    for name, r in runs.items():
        if "error" in r:
            check(name + " ran", False, r["error"])
    if verdicts:
        return verdicts, runs
    over, closed, under = runs["overload"], runs["closed"], runs["underload"]
    lat = over["latency_us"]
    check("overload: every request answered",
          over["completed"] == over["sent"] == round(4 * cap) and
          not any(over["errors"].values()) and not over["unsent"],
          "sent %d, completed %d, unsent %d, errors %s" % (
              over["sent"], over["completed"], over["unsent"],
              over["errors"]))
    check("overload: p50 grows with the run (>= 8 service times)",
          lat["p50"] >= 8 * service_s * 1e6,
          "p50 %.0f ms" % (lat["p50"] / 1e3))
    check("overload: p99 grows with the run (>= 20 service times)",
          lat["p99"] >= 20 * service_s * 1e6,
          "p99 %.0f ms" % (lat["p99"] / 1e3))
    check("overload: the queue was seen (max backlog > 10)",
          over["max_backlog"] > 10, "max backlog %d" % over["max_backlog"])
    check("closed loop: p99 bounded by the connections (< 10 service times)",
          closed["latency_us"]["p99"] < 10 * service_s * 1e6,
          "p99 %.0f ms" % (closed["latency_us"]["p99"] / 1e3))
    check("underload: no queue (p99 < 6 service times), every request "
          "answered",
          under["latency_us"]["p99"] < 6 * service_s * 1e6 and
          under["completed"] == under["sent"] and
          not any(under["errors"].values()),
          "p99 %.0f ms, sent %d, completed %d" % (
              under["latency_us"]["p99"] / 1e3, under["sent"],
              under["completed"]))
    return verdicts, runs


def selfcheck(args, ctx_base):
    """rate.py --selfcheck: co_check() against sluice serving
    tests/apps/drain_app.py with one lane. Exit status 0 when it holds."""
    need = run.expand(SELFCHECK_ARM.requires, ctx_base)
    if not os.access(need, os.X_OK):
        print("selfcheck: no sluice binary at %s" % need, file=sys.stderr)
        return 2
    logdir = tempfile.mkdtemp(prefix="sluice-rate-check-")
    srv = run.Server(SELFCHECK_ARM, dict(ctx_base, port=run.free_port()),
                     args.server_cpu, logdir, "selfcheck")
    try:
        srv.start()
        srv.preflight()
        verdicts, runs = co_check(srv.port)
    except run.Skip as e:
        print("selfcheck: server did not start: %s" % e, file=sys.stderr)
        return 2
    finally:
        srv.stop()
    for name, r in runs.items():
        if "latency_us" in r:
            lat = r["latency_us"]
            print("%-9s target %5.1f/s achieved %5.1f/s sent %3d p50 %7.1f "
                  "ms p99 %7.1f ms max %7.1f ms" % (
                      name, r["rate_target"], r["achieved_rate"], r["sent"],
                      lat["p50"] / 1e3, lat["p99"] / 1e3, lat["max"] / 1e3))
    for name, ok, detail in verdicts:
        print("%s  %s: %s" % ("PASS" if ok else "FAIL", name, detail))
    return 0 if all(ok for _, ok, _ in verdicts) else 1


# ---------------------------------------------------------------- driver


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="wsgi", choices=HTTP_SUITES)
    ap.add_argument("--fraction", type=float, default=0.5,
                    help="fixed rate as a fraction of the measured maximum "
                         "(default 0.5)")
    ap.add_argument("--rate", type=float, default=0,
                    help="drive every arm at this many requests a second "
                         "instead (CPU per request compared at one load; "
                         "the maximum is still measured and shown)")
    ap.add_argument("--max-with", choices=("wrk", "rateload"), default="wrk",
                    help="how the maximum is measured (default wrk, as "
                         "run.py does)")
    ap.add_argument("--duration", type=int, default=10,
                    help="seconds of each measured run (default 10)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="seconds before each measured run (default 2)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the whole matrix N times, interleaved")
    ap.add_argument("--only", default="",
                    help="comma-separated arm names (default: all)")
    ap.add_argument("--conns", default="16",
                    help="comma-separated connection counts (default 16)")
    ap.add_argument("--wrk-threads", type=int, default=1)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--sluice-bin",
                    default=os.environ.get("SLUICE_BIN", "./sluice"),
                    help="relative to the repo root (default $SLUICE_BIN or "
                         "./sluice)")
    ap.add_argument("--before-bin",
                    default=os.environ.get("SLUICE_BEFORE_BIN", ""),
                    help="the change suite's earlier binary")
    ap.add_argument("--out", default=str(BENCH / "results"),
                    help="directory for rate-SUITE.md/.json/.png")
    ap.add_argument("--label", default="")
    ap.add_argument("--list", action="store_true",
                    help="print the arms and their commands, run nothing")
    ap.add_argument("--render", metavar="JSON",
                    help="only rewrite the .md and .png beside a results JSON")
    ap.add_argument("--selfcheck", action="store_true",
                    help="the coordinated-omission check against a slow "
                         "sluice app (about 10 s), nothing else")
    args = ap.parse_args()
    if not 0 < args.fraction <= 1:
        ap.error("--fraction takes a number in (0, 1]")
    if args.rate < 0:
        ap.error("--rate takes a positive number")

    if args.render:
        base = args.render[:-5] if args.render.endswith(".json") \
            else args.render
        with open(base + ".json") as f:
            doc = json.load(f)
        Path(base + ".md").write_text(markdown(doc))
        chart(doc, base + ".png")
        print("wrote %s.md, %s.png" % (base, base))
        return 0

    suite = SUITES[args.suite]
    arms = suite.arms
    if args.only:
        wanted = [a.strip() for a in args.only.split(",") if a.strip()]
        names = {a.name for a in arms}
        unknown = [a for a in wanted if a not in names]
        if unknown:
            ap.error("unknown arm(s) %s; suite %s has: %s" % (
                ",".join(unknown), suite.name, ", ".join(sorted(names))))
        arms = [a for a in arms if a.name in wanted]
    conns_list = [int(c) for c in args.conns.split(",")]
    ctx_base = {"apps": str(run.APPS), "root": str(run.ROOT),
                "sluice": run.sluice_bin(args),
                "sluice_before": (str(Path(args.before_bin).resolve())
                                  if args.before_bin else "")}

    if args.list:
        for arm in arms:
            s = run.Server(arm, dict(ctx_base, port="PORT"), args.server_cpu,
                           "/tmp", "x")
            print("%-20s %s  [GET %s]" % (arm.name, s.command_line(),
                                          arm.path))
        return 0

    build_rateload()
    if args.selfcheck:
        return selfcheck(args, ctx_base)
    if args.max_with == "wrk" and not Path(run.WRK).exists():
        print("wrk not found at %s (apt-get install wrk)" % run.WRK,
              file=sys.stderr)
        return 1
    os.sched_setaffinity(0, {args.client_cpu})
    return run_matrix(args, suite, arms, conns_list, ctx_base)


def run_matrix(args, suite, arms, conns_list, ctx_base):
    skipped, runnable = {}, []
    for arm in arms:
        need = arm.requires and run.expand(arm.requires, ctx_base)
        if arm.requires and not need:
            skipped[arm.name] = "no binary given (%s)" % arm.requires
        elif need and not os.access(need, os.X_OK):
            skipped[arm.name] = "binary not found: %s" % need
        else:
            runnable.append(arm)
    for name, why in skipped.items():
        print("skip %-18s %s" % (name, why), flush=True)
    meta = run.machine_info()
    if os.access(ctx_base["sluice"], os.X_OK):
        try:
            meta["sluice_version"] = subprocess.run(
                [ctx_base["sluice"], "--version"], capture_output=True,
                text=True, timeout=10).stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
    meta.update({
        "suite": suite.name, "title": suite.title, "label": args.label,
        "date": datetime.datetime.now(datetime.timezone.utc)
        .strftime("%Y-%m-%d %H:%M:%S UTC"),
        "duration_s": args.duration, "warmup_s": args.warmup,
        "repeat": args.repeat, "conns": conns_list,
        "fraction": args.fraction, "rate": args.rate,
        "max_with": args.max_with,
        "server_cpu": args.server_cpu, "client_cpu": args.client_cpu,
        "sluice_bin": ctx_base["sluice"], "root": str(run.ROOT),
        "git_commit": subprocess.run(
            ["git", "-C", str(run.ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True).stdout.strip(),
        "max_command": (
            "taskset -c %d wrk -t%d -cCONNS -d%ds -s bench/wrk_summary.lua "
            "http://127.0.0.1:PORT/PATH" % (args.client_cpu, args.wrk_threads,
                                            args.duration)
            if args.max_with == "wrk" else
            "taskset -c %d bench/.build/rateload -p PORT -P PATH -c CONNS "
            "-r 0 -d %d -w %d -t %g" % (args.client_cpu, args.duration,
                                        args.warmup, REQUEST_TIMEOUT)),
        "rate_command": "taskset -c %d bench/.build/rateload -p PORT -P PATH "
        "-c CONNS -r %s -d %d -w %d -t %g" % (
            args.client_cpu, "%.0f" % args.rate if args.rate else
            "%.2f*MAX" % args.fraction, args.duration, args.warmup,
            REQUEST_TIMEOUT),
    })
    arm_info = {a.name: {"note": a.note, "path": a.path, "ours": a.ours}
                for a in arms}
    runs, attempt_errors = [], {}
    logdir = tempfile.mkdtemp(prefix="sluice-bench-rate-")
    print("server logs: %s" % logdir, flush=True)
    current = [None]

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        for rep in range(args.repeat):
            k = rep % len(runnable) if runnable else 0
            for arm in runnable[k:] + runnable[:k]:
                ctx = dict(ctx_base, port=run.free_port())
                srv = run.Server(arm, ctx, args.server_cpu, logdir,
                                 "%s-%d" % (arm.name, rep + 1))
                current[0] = srv
                arm_info[arm.name]["command"] = srv.command_line().replace(
                    "127.0.0.1:%d" % ctx["port"], "127.0.0.1:PORT").replace(
                    "--port %d" % ctx["port"], "--port PORT")
                try:
                    srv.start()
                    arm_info[arm.name]["preflight"] = srv.preflight()
                    for conns in conns_list:
                        if not srv.alive():
                            raise run.Skip("server exited: %s"
                                           % srv.log_tail())
                        r = measure(srv, arm, conns, args)
                        r.update(arm=arm.name, conns=conns, rep=rep + 1)
                        runs.append(r)
                        print("rep %d %-20s c%-4d %s" % (
                            rep + 1, arm.name, conns, one_line(r)),
                            flush=True)
                except run.Skip as e:
                    attempt_errors.setdefault(arm.name, []).append(str(e))
                    print("rep %d %-20s skipped: %s" % (rep + 1, arm.name, e),
                          flush=True)
                finally:
                    srv.stop()
                    current[0] = None
    except (KeyboardInterrupt, SystemExit):
        if current[0] is not None:
            current[0].stop()
        print("interrupted; no report written", file=sys.stderr)
        return 130
    for name, errs in attempt_errors.items():
        if not any(r["arm"] == name and "latency_us" in r for r in runs):
            skipped[name] = errs[0]
        else:
            arm_info[name]["attempt_errors"] = errs
    meta["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    doc = {"meta": meta, "arms": arm_info, "skipped": skipped, "runs": runs,
           "summary": summarise(runs, [a.name for a in arms], conns_list)}
    places = {str(run.ROOT): "$REPO", logdir: "$LOGDIR"}
    if ctx_base["sluice_before"]:
        places[str(Path(ctx_base["sluice_before"]).parent)] = "$BEFORE"
    after = Path(ctx_base["sluice"]).resolve().parent
    if not str(after).startswith(str(run.ROOT)):  # a build outside the tree
        places[str(after)] = "$AFTER"
    doc = report.scrub(doc, places)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = out / ("rate-%s" % suite.name)
    with open(str(base) + ".json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    Path(str(base) + ".md").write_text(markdown(doc))
    png = chart(doc, str(base) + ".png")
    print("wrote %s.md, %s.json%s" % (base, base, ", " + png if png else ""))
    return 0


def one_line(r):
    """Progress line for one arm's pair of runs."""
    if "error" in r:
        return "FAILED: " + r["error"]
    lat = r["latency_us"]
    s = ("max %8.0f req/s  target %8.0f  achieved %8.0f  p50 %.2f  p99 %.2f "
         "p99.9 %.2f ms  %5.1f us/req  client %3.0f%%" % (
             r["max_rps"], r["target_rate"], r["achieved_rate"],
             lat["p50"] / 1e3, lat["p99"] / 1e3, lat["p99.9"] / 1e3,
             r["cpu_us_per_req"] or 0, r["client_cpu_pct"]))
    fl = (["max run: " + f for f in max_flags([r["max"]], r["conns"])]
          + rate_flags([r]))
    return s + ("  [" + "; ".join(fl) + "]" if fl else "")


if __name__ == "__main__":
    sys.exit(main())
