#!/usr/bin/python3
"""System calls per request, by call, for the hello suite's arms (issue 32;
a report, not a test).

    /usr/bin/python3 bench/syscalls.py [--quick] [--only ARM[,ARM]]
                                       [--conns 16,256] [--pipelines 1,16]
    /usr/bin/python3 bench/syscalls.py --render JSON

For each arm (sluice's WSGI and ASGI hello worlds in pump and inline mode,
uvicorn, nginx: the arms of suites.py's wsgi and asgi suites) a fresh
server, one worker, pinned to one CPU (run.py's Server: taskset, its own
session, readiness, preflight, stop); wrk on the other CPU. For each
pipelining depth (1, and 16 requests written at once: run.py's generated
Lua script) and connection count, three wrk runs on that server:

  1. unattached: run.py's measure() (a warm-up, then the measured run; the
     CPU time of the server's whole process tree from /proc): req/s and
     CPU µs per request;
  2. counted in the kernel: `perf stat --per-thread -e 'syscalls:sys_enter_*'
     -p WORKER`, its counters enabled right before wrk starts and disabled
     right after it ends (perf's control FIFO); the worker runs at about
     its own speed, so its batching is what it is unattached;
  3. under `strace -c -f -p WORKER` (as static.py does, and as issue 32's
     table was counted): ptrace stops the worker at every call, so it runs
     several times slower and batches differently; kept for comparison
     with the issue's figures.

Each call's count over the requests wrk completed in that run is the
figure. The floor is one read and one write per request, one of each per
16 when pipelined x16: 2 and 0.125 calls per request.

The report goes to bench/results/syscalls.md, the runs to
$LOGDIR/syscalls.json (--json). See bench/README.md.
"""

import argparse
import dataclasses
import datetime
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import report  # noqa: E402
import run  # noqa: E402
import static  # noqa: E402
from suites import SUITES  # noqa: E402

PERF = "/usr/bin/perf"
PERF_EVENTS = "syscalls:sys_enter_*"
ACK_TIMEOUT = 10.0  # s: perf answers a control command by then
SHOWN = 0.001  # calls per request below this are left out of the tables

# (report name, suite, arm in that suite)
ARMS = [("wsgi-pump", "wsgi", "sluice"),
        ("wsgi-inline", "wsgi", "sluice-inline"),
        ("asgi-pump", "asgi", "sluice-asgi"),
        ("asgi-inline", "asgi", "sluice-asgi-inline"),
        ("uvicorn", "asgi", "uvicorn"),
        ("nginx", "wsgi", "nginx")]

# Calls that carry a request's bytes in or out: the floor is one of each.
IN_CALLS = ("read", "recvfrom", "recvmsg", "readv", "recvmmsg")
OUT_CALLS = ("write", "sendto", "sendmsg", "writev", "sendmmsg")


def arms():
    out = []
    for name, suite, arm in ARMS:
        a = next(x for x in SUITES[suite].arms if x.name == arm)
        out.append(dataclasses.replace(a, name=name))
    return out


def floor(pipeline):
    """System calls per request at the floor: one read and one write per
    request, or per burst of PIPELINE requests."""
    return 2.0 / pipeline


def worker_pids(srv):
    """The processes that serve: every process of the tree but the one
    started (sluice's worker), or that one when it is alone (uvicorn,
    nginx with master_process off)."""
    root = srv.proc.pid
    pids = sorted(p for p, _st in run.process_tree(root) if p != root)
    return pids or [root]


def thread_names(pids):
    """{tid: label}: "main" for a process's first thread, else "thread N"
    in tid order, with the thread's comm."""
    out = {}
    for pid in pids:
        tids = sorted(int(t) for t in static._tasks(pid))
        for k, tid in enumerate(tids):
            try:
                comm = Path("/proc/%d/task/%d/comm" % (pid, tid)) \
                    .read_text().strip()
            except OSError:
                comm = "?"
            label = "main" if tid == pid else "thread %d" % k
            out[tid] = "%s (%s)" % (label, comm)
    return out


# ---------------------------------------------------------------- perf


class PerfStat:
    """perf stat counting every syscall tracepoint on PIDS' threads,
    started with its counters off; enable() and disable() switch them
    through its control FIFO and return once perf acknowledged."""

    def __init__(self, pids, logdir, tag, cpu, events):
        self.out = Path(logdir) / ("%s.perf" % tag)
        ctl, ack = (Path(logdir) / ("%s.%s" % (tag, n))
                    for n in ("ctl", "ack"))
        os.mkfifo(ctl)
        os.mkfifo(ack)
        # O_RDWR: opening a FIFO so never waits for the other end
        self.ctl = os.open(ctl, os.O_RDWR)
        self.ack = os.open(ack, os.O_RDWR)
        self.argv = [run.TASKSET, "-c", str(cpu), PERF, "stat", "-x", ",",
                     "--per-thread", "-D", "-1", "--control",
                     "fifo:%s,%s" % (ctl, ack), "-e", events,
                     "-p", ",".join(map(str, pids)), "-o", str(self.out)]
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)

    def _command(self, word):
        os.write(self.ctl, word.encode() + b"\n")
        deadline = time.monotonic() + ACK_TIMEOUT
        got = b""
        while b"ack" not in got:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise run.Skip("perf stat did not acknowledge %r: %s" % (
                    word, self.proc.stderr.read(400).decode(errors="replace")
                    if self.proc.poll() is not None else "timeout"))
            ready, _, _ = select.select([self.ack], [], [], min(left, 0.5))
            if ready:
                got += os.read(self.ack, 64)

    def enable(self):
        self._command("enable")

    def disable(self):
        self._command("disable")

    def finish(self):
        """Stop perf; {tid: {call: count}}."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.ctl)
        os.close(self.ack)
        return parse_perf(self.out.read_text())

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def parse_perf(text):
    """{tid: {call: count}} from perf stat -x, --per-thread output (lines
    "comm-tid,count,unit,syscalls:sys_enter_CALL,..."); zero counts and
    calls perf did not count are left out."""
    out = {}
    for line in text.splitlines():
        f = line.split(",")
        if len(f) < 4 or not f[3].startswith("syscalls:sys_enter_"):
            continue
        if not f[1].isdigit() or int(f[1]) == 0:
            continue
        tid = int(f[0].rsplit("-", 1)[1])
        call = f[3][len("syscalls:sys_enter_"):]
        out.setdefault(tid, {})[call] = int(f[1])
    return out


# ---------------------------------------------------------------- runs


def traced_run(srv, arm, conns, script, args, tracer, tag, logdir):
    """One wrk run of ARGS.duration seconds with TRACER ("perf" or
    "strace") counting the worker's system calls. The record: requests,
    and calls {call: count} (strace: [calls, errors]; perf: also
    by_thread)."""
    pids = worker_pids(srv)
    secs = args.duration if tracer == "perf" else args.strace_duration
    rec = {"tracer": tracer, "duration_s": secs, "pids": len(pids)}
    names = thread_names(pids)
    if tracer == "perf":

        def counted(events, secs, tag):
            perf = PerfStat(pids, logdir, tag, args.client_cpu, events)
            try:
                perf.enable()
                r = run.run_wrk(srv.port, arm.path, conns, 1, secs,
                                args.client_cpu, script)
                perf.disable()
                return r, perf.finish()
            finally:
                perf.kill()

        events = PERF_EVENTS
        if args.perf_events == "used":
            # every tracepoint costs the worker at each of its context
            # switches: count only the calls a first second made
            _r, seen = counted(PERF_EVENTS, 1, tag + "-all")
            events = ",".join("syscalls:sys_enter_%s" % k for k in sorted(
                {k for c in seen.values() for k in c}
                | set(IN_CALLS + OUT_CALLS)))
        rec["events"] = events
        rec["command"] = "perf stat -x , --per-thread -D -1 --control " \
            "fifo:CTL,ACK -e EVENTS -p WORKERPID"
        r, by_tid = counted(events, args.duration, tag)
        by_thread = {names.get(t, "tid %d" % t): c for t, c in by_tid.items()}
        calls = {}
        for c in by_tid.values():
            for k, v in c.items():
                calls[k] = calls.get(k, 0) + v
        rec.update(calls=calls, by_thread=by_thread)
    else:
        out = Path(logdir) / ("%s.strace" % tag)
        argv = [run.TASKSET, "-c", str(args.client_cpu), static.STRACE, "-c",
                "-f", "-o", str(out)]
        for p in pids:
            argv += ["-p", str(p)]
        rec["command"] = "strace -c -f -o FILE -p WORKERPID"
        st = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + static.ATTACH_TIMEOUT
            while not all(static._traced(p, st.pid) for p in pids):
                if time.monotonic() > deadline or st.poll() is not None:
                    raise run.Skip("strace did not attach to %s" % pids)
                time.sleep(0.05)
            r = run.run_wrk(srv.port, arm.path, conns, 1, secs,
                            args.client_cpu, script)
            st.send_signal(signal.SIGINT)
            st.wait(timeout=30)
        finally:
            if st.poll() is None:
                st.kill()
                st.wait()
        rec["calls"] = {k: list(v) for k, v in
                        static.parse_strace(out.read_text()).items()}
    if "error" in r:
        raise run.Skip("wrk under %s: %s" % (tracer, r["error"]))
    if not r.get("requests"):
        raise run.Skip("wrk under %s completed no request" % tracer)
    rec.update(requests=r["requests"], errors=r.get("errors"),
               rps=r["requests"] / (r["duration_us"] / 1e6))
    return rec


def count(v):
    """A call's count in either tracer's record."""
    return v[0] if isinstance(v, list) else v


def per_req(rec):
    """{call: calls per request} of a traced run."""
    return {k: count(v) / rec["requests"] for k, v in rec["calls"].items()}


def split(rec, pipeline):
    """(in, out, others, total) calls per request: the calls that carry
    bytes in, out, and every other one."""
    pr = per_req(rec)
    cin = sum(pr.get(k, 0) for k in IN_CALLS)
    cout = sum(pr.get(k, 0) for k in OUT_CALLS)
    total = sum(pr.values())
    return cin, cout, total - cin - cout, total


def above_floor(rec, pipeline, n=5):
    """The largest contributions above the floor: every call but the
    bytes' own, and what the in and out calls make beyond one each per
    request (per burst)."""
    pr = per_req(rec)
    half = floor(pipeline) / 2
    extra = {k: v for k, v in pr.items()
             if k not in IN_CALLS + OUT_CALLS}
    for group in (IN_CALLS, OUT_CALLS):
        got = {k: pr[k] for k in group if k in pr}
        if not got:
            continue
        top = max(got, key=got.get)
        for k, v in got.items():
            v = v - half if k == top else v
            if v >= SHOWN:
                extra["%s (beyond one)" % k if k == top else k] = v
    items = sorted(extra.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join("%s %.3f" % kv for kv in items if kv[1] >= SHOWN)


def run_arm(arm, ctx_base, args, logdir, cells):
    """A fresh server of ARM; for each (pipeline, conns) in CELLS the
    unattached run and the traced ones. Returns (records, arm info)."""
    ctx = dict(ctx_base, port=run.free_port())
    srv = run.Server(arm, ctx, args.server_cpu, logdir, arm.name)
    info = {"note": arm.note,
            "command": srv.command_line().replace(
                "127.0.0.1:%d" % ctx["port"], "127.0.0.1:PORT").replace(
                "--port %d" % ctx["port"], "--port PORT")}
    recs = []
    try:
        srv.start()
        info["preflight"] = srv.preflight()
        info["worker_threads"] = sorted(thread_names(worker_pids(srv))
                                        .values())
        for pipeline, conns in cells:
            script = run.wrk_script(pipeline, logdir)
            rec = {"arm": arm.name, "pipeline": pipeline, "conns": conns}
            recs.append(rec)
            if not srv.alive():
                raise run.Skip("server exited: %s" % srv.log_tail())
            ns = argparse.Namespace(
                warmup=args.warmup, duration=args.cpu_duration,
                client_cpu=args.client_cpu, server_cpu=args.server_cpu,
                wrk_threads=1)
            r = run.measure(srv, arm, conns, ns, script)
            r.update(arm=arm.name, conns=conns, pipeline=pipeline, rep=1)
            rec["cpu"] = r
            print("%-12s x%-2d c%-4d %s" % (arm.name, pipeline, conns,
                                            report.one_line(r)), flush=True)
            for tracer in args.tracers:
                tag = "%s-x%d-c%d-%s" % (arm.name, pipeline, conns, tracer)
                try:
                    t = traced_run(srv, arm, conns, script, args, tracer, tag,
                                   logdir)
                except run.Skip as e:
                    rec[tracer] = {"error": str(e)}
                    print("%-12s x%-2d c%-4d %s: %s" % (
                        arm.name, pipeline, conns, tracer, e), flush=True)
                    continue
                rec[tracer] = t
                cin, cout, other, total = split(t, pipeline)
                print("%-12s x%-2d c%-4d %-6s %7.0f req/s  %.3f calls/req "
                      "(in %.3f, out %.3f, others %.3f)" % (
                          arm.name, pipeline, conns, tracer, t["rps"], total,
                          cin, cout, other), flush=True)
    except run.Skip as e:
        info["error"] = str(e)
        print("%-12s skipped: %s" % (arm.name, e), flush=True)
    finally:
        srv.stop()
        problems = static.log_problems(srv)
        if problems:
            info["log_problems"] = problems
    return recs, info


# ---------------------------------------------------------------- report


def _cell(p, c):
    return "c%d%s" % (c, " ×%d" % p if p > 1 else "")


def _f(v, fmt="%.3f"):
    return "–" if v is None else fmt % v


def summary_table(doc):
    tracers = doc["meta"]["tracers"]
    main = tracers[0]
    head = ["arm", "pipeline", "conns", "req/s", "CPU µs/req",
            "%s: in" % main, "out", "others", "total", "floor",
            "total / floor"]
    head += ["%s: total (/ floor)" % t for t in tracers[1:]]
    head += ["above the floor (%s), calls/req" % main, "flags"]
    out = ["| %s |" % " | ".join(head),
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|%s---|---|"
           % ("---:|" * (len(tracers) - 1))]
    for rec in doc["runs"]:
        p, c = rec["pipeline"], rec["conns"]
        cpu = rec.get("cpu") or {}
        row = [rec["arm"], str(p), str(c),
               _f(cpu.get("rps"), "%.0f"), _f(cpu.get("cpu_us_per_req"),
                                              "%.1f")]
        t = rec.get(main) or {}
        if "calls" in t:
            cin, cout, other, total = split(t, p)
            row += ["%.3f" % cin, "%.3f" % cout, "%.3f" % other,
                    "**%.3f**" % total, "%.3f" % floor(p),
                    "%.2f×" % (total / floor(p))]
        else:
            row += ["–"] * 4 + ["%.3f" % floor(p), "–"]
        for tr in tracers[1:]:
            s = rec.get(tr) or {}
            if "calls" in s:
                total = split(s, p)[3]
                row.append("%.3f (%.2f×)" % (total, total / floor(p)))
            else:
                row.append("–")
        row.append(above_floor(t, p) if "calls" in t else
                   t.get("error", "not run"))
        flags = [] if "error" in cpu else report.flags_of([cpu], c)
        if "error" in cpu:
            flags.append("CPU run failed: %s" % cpu["error"])
        row.append("⚠ " + "; ".join(flags) if flags else "")
        out.append("| %s |" % " | ".join(row))
    return out


def arm_table(doc, arm):
    """Calls per request by call for ARM: a column per cell and tracer."""
    recs = [r for r in doc["runs"] if r["arm"] == arm]
    cols = [(r, t) for r in recs for t in doc["meta"]["tracers"]
            if "calls" in (r.get(t) or {})]
    if not cols:
        return ["(no traced run)"]
    prs = [per_req(r[t]) for r, t in cols]
    names = sorted({k for pr in prs for k, v in pr.items() if v >= SHOWN},
                   key=lambda k: -max(pr.get(k, 0) for pr in prs))
    out = ["| call | %s |" % " | ".join(
               "%s %s" % (_cell(r["pipeline"], r["conns"]), t)
               for r, t in cols),
           "|---|%s" % ("---:|" * len(cols))]
    for k in names:
        cells = []
        for (r, t), pr in zip(cols, prs):
            v = pr.get(k, 0)
            errs = r[t]["calls"].get(k)
            e = (errs[1] / r[t]["requests"]
                 if isinstance(errs, list) and errs[1] else 0)
            cells.append("%.3f%s" % (v, " (%.3f err)" % e if e >= SHOWN
                                     else ""))
        out.append("| %s | %s |" % (k, " | ".join(cells)))
    out.append("| **total** | %s |" % " | ".join(
        "**%.3f**" % sum(pr.values()) for pr in prs))
    out.append("| floor | %s |" % " | ".join(
        "%.3f" % floor(r["pipeline"]) for r, _t in cols))
    out.append("| requests counted | %s |" % " | ".join(
        "%d" % r[t]["requests"] for r, t in cols))
    out.append("| req/s while counted | %s |" % " | ".join(
        "%.0f" % r[t]["rps"] for r, t in cols))
    return out


def thread_table(doc):
    """perf's counts by thread: who makes the calls."""
    out = ["| arm | cell | thread | calls/req | its calls (≥ %.3f/req) |"
           % SHOWN, "|---|---|---|---:|---|"]
    for rec in doc["runs"]:
        t = rec.get("perf") or {}
        if "by_thread" not in t:
            continue
        for name, calls in sorted(t["by_thread"].items()):
            pr = {k: v / t["requests"] for k, v in calls.items()}
            total = sum(pr.values())
            if total < SHOWN:
                continue
            top = ", ".join("%s %.3f" % kv for kv in sorted(
                pr.items(), key=lambda kv: -kv[1]) if kv[1] >= SHOWN)
            out.append("| %s | %s | %s | %.3f | %s |" % (
                rec["arm"], _cell(rec["pipeline"], rec["conns"]), name,
                total, top))
    return out


def markdown(doc):
    m = doc["meta"]
    ncalls = [len(r["perf"]["events"].split(",")) for r in doc["runs"]
              if "events" in (r.get("perf") or {})]
    out = ["# sluice benchmark: system calls per request (issue 32)", ""]
    w = out.append
    if m.get("label"):
        w("> %s" % m["label"])
        w("")
    w("- Date: %s; commit %s; %s" % (m["date"], m.get("git_commit") or "?",
                                     m.get("sluice_version", "")))
    w("- Machine: %s, %s CPUs, kernel %s, Debian %s; load average %s at the "
      "start, %s at the end (shared machine: expect noise)"
      % (m["cpu_model"], m["cpus"], m["kernel"], m["debian"],
         " ".join(m["loadavg_start"]), " ".join(m.get("loadavg_end", []))))
    w("- Command: `%s`" % m["command"])
    w("- Each server fresh per arm, one worker, pinned with `taskset -c %d`; "
      "wrk (`-t1`, keep-alive), perf, strace and the harness on CPU %d. Per "
      "pipelining depth and connection count, on that server: a %d s "
      "warm-up and a %d s unattached run (req/s, CPU µs/req: utime+stime "
      "of the server's whole process tree over the requests wrk "
      "completed, run.py's measure()), then a %d s run under perf and a "
      "%d s one under strace"
      % (m["server_cpu"], m["client_cpu"], m["warmup_s"], m["cpu_duration_s"],
         m["duration_s"], m.get("strace_duration_s", m["duration_s"])))
    w("- **perf**: `perf stat --per-thread -e syscalls:sys_enter_CALL,... "
      "-p WORKER`, counting in the kernel (no stop of the worker); its "
      "counters are switched on right before wrk starts and off right after "
      "it ends; the calls counted are those a 1 s run under every "
      "`syscalls:sys_enter_*` tracepoint saw (%s), since a per-thread "
      "counter is switched with its thread. **strace**: `strace -c -f -p "
      "WORKER` attached before wrk and detached after (issue 32's method): "
      "ptrace stops the worker at every call, so it runs at a few per cent "
      "of its rate (see *req/s while counted*) and its batches differ: "
      "calls that depend on batching (epoll_wait, futex, eventfd) come out "
      "otherwise than unattached"
      % ("`--perf-events all`: every one in the measured run too"
         if m.get("perf_events") == "all" else "%d to %d calls" % (
             min(ncalls, default=0), max(ncalls, default=0))))
    w("- WORKER: sluice's worker process (every thread: the loop thread, "
      "the lanes), uvicorn's one process, nginx's one process "
      "(`master_process off`, apps/nginx_hello.conf)")
    w("- *in*: %s; *out*: %s (socket and eventfd alike: the by-thread table "
      "tells them apart); the floor is one in and one out per request (per "
      "burst of 16 when pipelined): 2 and 0.125 calls per request. Calls "
      "under %.3f per request are left out of the tables (the 16 or 256 "
      "accepts of a run, the 1 Hz heartbeat)"
      % ("/".join(IN_CALLS), "/".join(OUT_CALLS), SHOWN))
    w("")
    w("## Summary")
    w("")
    out += summary_table(doc)
    w("")
    if doc.get("notes"):
        out += ["## Notes", "", doc["notes"].strip(), ""]
    w("## Calls per request, by call")
    w("")
    for name in doc["arms"]:
        w("### %s" % name)
        w("")
        out += arm_table(doc, name)
        w("")
    if "perf" in m["tracers"]:
        w("## By thread (perf)")
        w("")
        out += thread_table(doc)
        w("")
    w("## Commands")
    w("")
    for name, a in doc["arms"].items():
        w("- **%s**: %s" % (name, a["note"]))
        if a.get("command"):
            w("  `%s`" % a["command"])
        if a.get("worker_threads"):
            w("  — traced threads: %s" % ", ".join(a["worker_threads"]))
        if a.get("error"):
            w("  — ⚠ %s" % a["error"])
        if a.get("log_problems"):
            w("  — its log: %s" % " | ".join(a["log_problems"][:5]))
    w("- **wrk**: `%s`" % m["wrk_command"])
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
    ap.add_argument("--only", default="",
                    help="arms, comma-separated: %s" % ",".join(
                        a[0] for a in ARMS))
    ap.add_argument("--conns", default="16,256")
    ap.add_argument("--pipelines", default="1,16",
                    help="pipelining depths (default 1,16)")
    ap.add_argument("--duration", type=int, default=3,
                    help="seconds of the wrk run under perf (default 3)")
    ap.add_argument("--strace-duration", type=int, default=2,
                    help="seconds of the wrk run under strace (default 2)")
    ap.add_argument("--cpu-duration", type=int, default=4,
                    help="seconds of the unattached run (default 4)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="seconds of wrk before the unattached run")
    ap.add_argument("--tracers", default="perf,strace",
                    help="perf, strace or both (default perf,strace; the "
                         "first is the summary's)")
    ap.add_argument("--perf-events", default="used", choices=("used", "all"),
                    help="used (default): count the calls a first second "
                         "under every tracepoint saw; all: every syscall "
                         "tracepoint in the measured run too")
    ap.add_argument("--quick", action="store_true",
                    help="2 s runs, c16 only: a smoke run (about 5 minutes)")
    report.add_report_args(ap, "syscalls")
    args = ap.parse_args()
    if args.quick:
        args.duration, args.cpu_duration, args.conns = 2, 2, "16"
        args.strace_duration = 2
    args.tracers = [t for t in args.tracers.split(",") if t]
    if not args.tracers or set(args.tracers) - {"perf", "strace"}:
        ap.error("--tracers takes perf, strace or both")
    return ap, args


def main():
    ap, args = parse_args()
    if args.render:
        doc = json.loads(Path(args.render).read_text())
        if args.notes:
            doc["notes"] = Path(args.notes).read_text()
        Path(args.out).write_text(markdown(doc))
        print("wrote %s" % args.out)
        return 0
    chosen = arms()
    if args.only:
        wanted = [a for a in args.only.split(",") if a]
        bad = set(wanted) - {a.name for a in chosen}
        if bad:
            ap.error("unknown arm(s): %s" % ", ".join(sorted(bad)))
        chosen = [a for a in chosen if a.name in wanted]
    cells = [(int(p), int(c)) for p in args.pipelines.split(",") if p
             for c in args.conns.split(",") if c]
    ctx_base = {"apps": str(run.APPS), "root": str(run.ROOT),
                "sluice": run.sluice_bin(args), "sluice_before": ""}
    if args.list:
        with tempfile.TemporaryDirectory() as scratch:
            for arm in chosen:
                s = run.Server(arm, dict(ctx_base, port="PORT"),
                               args.server_cpu, scratch, "x")
                print("%-12s %s" % (arm.name, s.command_line().replace(
                    scratch, "$LOGDIR")))
        return 0
    for tool in [run.WRK] + [{"perf": PERF, "strace": static.STRACE}[t]
                             for t in args.tracers]:
        if not os.access(tool, os.X_OK):
            print("%s not found" % tool, file=sys.stderr)
            return 1
    os.sched_setaffinity(0, {args.client_cpu})
    runnable, skipped = [], {}
    for arm in chosen:
        need = run.expand(arm.requires, ctx_base)
        if os.access(need, os.X_OK):
            runnable.append(arm)
        else:
            skipped[arm.name] = "binary not found: %s" % need
    # seconds of wrk, and what each run adds around it (seen: perf's and
    # strace's start and stop, run.py's sampling)
    per_cell = (args.warmup + args.cpu_duration + 3
                + (args.duration + 6 if "perf" in args.tracers else 0)
                + (args.strace_duration + 4
                   if "strace" in args.tracers else 0))
    print("%d arms x %d cells, about %.0f s" % (
        len(runnable), len(cells),
        len(runnable) * (2 + len(cells) * per_cell)),
        flush=True)
    logdir = tempfile.mkdtemp(prefix="sluice-bench-syscalls-")
    print("server logs: %s" % logdir, flush=True)
    meta = run.machine_info()
    pk = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n",
                         "linux-perf", "strace"],
                        capture_output=True, text=True).stdout
    for line in pk.splitlines():
        k, _, v = line.partition(" ")
        meta["packages"][k] = v
    meta["packages"] = {k: v for k, v in meta["packages"].items() if v}
    try:
        meta["sluice_version"] = subprocess.run(
            [ctx_base["sluice"], "--version"], capture_output=True,
            text=True, timeout=10).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    meta.update({
        "date": datetime.datetime.now(datetime.timezone.utc)
        .strftime("%Y-%m-%d %H:%M:%S UTC"),
        "label": args.label, "tracers": args.tracers,
        "duration_s": args.duration, "cpu_duration_s": args.cpu_duration,
        "strace_duration_s": args.strace_duration,
        "perf_events": args.perf_events,
        "warmup_s": args.warmup, "server_cpu": args.server_cpu,
        "client_cpu": args.client_cpu, "cells": cells,
        "command": report.command_line("syscalls.py", sys.argv[1:]),
        "git_commit": subprocess.run(
            ["git", "-C", str(run.ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True).stdout.strip(),
        "wrk_command": "%s -c %d %s -t1 -cCONNS -dSECONDS -s "
                       "bench/wrk_summary.lua (pipelined: "
                       "$LOGDIR/pipeline-16.lua) http://127.0.0.1:PORT/"
                       % (run.TASKSET, args.client_cpu, run.WRK)})

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    runs, info = [], {}
    try:
        for arm in runnable:
            recs, info[arm.name] = run_arm(arm, ctx_base, args, logdir, cells)
            runs += recs
    except (KeyboardInterrupt, SystemExit):
        print("interrupted; no report written", file=sys.stderr)
        return 130
    for name, why in skipped.items():
        info[name] = {"note": why, "error": why}
    meta["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    doc = {"meta": meta, "arms": info, "runs": runs}
    places = {str(run.ROOT): "$REPO", logdir: "$LOGDIR"}
    after = Path(ctx_base["sluice"]).resolve().parent
    if not str(after).startswith(str(run.ROOT)):
        places[str(after)] = "$AFTER"
    doc = report.scrub(doc, places)
    jpath = Path(args.json or Path(logdir) / "syscalls.json")
    jpath.write_text(json.dumps(doc, indent=1) + "\n")
    Path(args.out).write_text(markdown(doc))
    print("wrote %s, %s" % (args.out, jpath))
    return 0


if __name__ == "__main__":
    sys.exit(main())
