#!/usr/bin/python3
"""Static files: sluice --static beside nginx, and beside WhiteNoise in
Django (issue 31; a report, not a test).

    /usr/bin/python3 bench/static.py [--rounds 3] [--duration 5] [--quick]
                                     [--only ARM[,ARM]] [--no-strace]
    /usr/bin/python3 bench/static.py --render JSON [--notes FILE]

The harness writes a folder of files (1 KiB, 100 KiB and 1 MiB) into the
run's temporary directory, then for each round and arm (the order rotates
every round) starts the server fresh on one CPU (run.py's Server: taskset,
its own session, readiness, stop), checks every file it is to serve byte
for byte and keep-alive (run.py's preflight), and for each file and
connection count runs wrk on the other CPU (run.py's measure: a warm-up,
then the measured run, the server's whole process tree's CPU time read
from /proc before and after). Arms:

    nginx                the folder under /static/, master + 1 worker
                         (apps/nginx_static.conf)
    sluice-static        sluice --static /static/=DIR -w 1, hello_wsgi:app
    sluice-whitenoise    sluice -w 1, Django + WhiteNoise (the app path)
    gunicorn-whitenoise  gunicorn gthread -w 1, the same Django project
    sluice-wsgi-file     sluice -w 1, apps/static_wsgi.py (no framework)

Then, once, `strace -c -f` on the worker of nginx and of sluice-static
for a short wrk run of the 1 KiB and the 100 KiB file: system calls per
request, by call.
The report (medians over rounds) goes to bench/results/static.md, the
runs to $LOGDIR/static.json (--json). See bench/README.md.
"""

import argparse
import dataclasses
import datetime
import http.client
import json
import os
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
from suites import Arm, pattern  # noqa: E402

STRACE = "/usr/bin/strace"
ATTACH_TIMEOUT = 10.0  # s: strace must have every thread by then
FILES = {"1k": 1024, "100k": 100 * 1024, "1m": 1024 * 1024}
CPU_TARGET = 1.2  # issue 31: sluice's CPU per request <= 1.2x nginx's
_ENV = {"SLUICE_BENCH_STATIC": "{logdir}/static"}


def _sluice(name, extra, app, note, env=None):
    return Arm(name=name,
               argv=["{sluice}", *extra, "-w", "1", "-b", "127.0.0.1:{port}",
                     "--chdir", "bench/apps", app],
               cwd="{root}", env=dict(env or {}), expect_body=None,
               requires="{sluice}", ours=True, note=note)


ARMS = [
    Arm(name="nginx",
        argv=["/usr/sbin/nginx", "-p", "{logdir}", "-e", "stderr",
              "-c", "{config}", "-g", "daemon off;"],
        config="nginx_static.conf", requires="/usr/sbin/nginx",
        expect_body=None,
        note="nginx, master + 1 worker, sendfile on, tcp_nopush on, no "
             "open_file_cache (the default), access log off"),
    _sluice("sluice-static", ["--static", "/static/={logdir}/static"],
            "hello_wsgi:app",
            "sluice --static: the worker's loop thread sends the file, the "
            "app (hello world) is never called"),
    _sluice("sluice-whitenoise", [], "static_django:application",
            "Django 3.2 + WhiteNoiseMiddleware on sluice's app path (WSGI, "
            "pump mode; WhiteNoise's file goes out by wsgi.file_wrapper)",
            env=_ENV),
    Arm(name="gunicorn-whitenoise",
        argv=["/usr/bin/gunicorn", "-k", "gthread", "--threads", "1",
              "-w", "1", "-b", "127.0.0.1:{port}", "--chdir", "{apps}",
              "static_django:application"],
        env=dict(_ENV), expect_body=None, requires="/usr/bin/gunicorn",
        note="the same Django project under gunicorn, gthread worker, "
             "1 thread (gunicorn sendfile()s wsgi.file_wrapper)"),
    _sluice("sluice-wsgi-file", [], "static_wsgi:app",
            "a plain WSGI app: open(), fstat(), wsgi.file_wrapper (no "
            "framework), on sluice's app path", env=_ENV),
]
# The files each arm serves (WhiteNoise's comparison needs two sizes).
ARM_FILES = {"nginx": ["1k", "100k", "1m"],
             "sluice-static": ["1k", "100k", "1m"],
             "sluice-whitenoise": ["1k", "100k"],
             "gunicorn-whitenoise": ["1k", "100k"],
             "sluice-wsgi-file": ["1k", "100k"]}
STRACE_ARMS = ["sluice-static", "nginx"]
# Whose figures the app-path arms are divided by.
REF = "sluice-static"


def url(name):
    return "/static/%s.bin" % name


def write_files(logdir):
    """The folder every server serves: LOGDIR/static/{1k,100k,1m}.bin.
    LOGDIR is made readable by all: nginx's worker runs as `nobody` when
    the harness runs as root."""
    os.chmod(logdir, 0o755)
    folder = Path(logdir) / "static"
    folder.mkdir()
    contents = {}
    for name, size in FILES.items():
        # the suites' 0..255 pattern, shifted per file so that a file
        # served for another is seen
        data = pattern(size + len(name))[len(name):]
        (folder / ("%s.bin" % name)).write_bytes(data)
        contents[name] = data
    return contents


def preflight(srv, arm, files, contents):
    """run.py's preflight of every file ARM serves (status 200, the body
    byte for byte, keep-alive); returns the first one's record plus the
    response headers of the 1 KiB file."""
    info = None
    for name in files:
        srv.arm = dataclasses.replace(arm, path=url(name),
                                      expect_body=contents[name])
        got = srv.preflight()
        info = info or got
    srv.arm = arm
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request("GET", url(files[0]))
        resp = conn.getresponse()
        resp.read()
        info["headers"] = [[k, v] for k, v in resp.getheaders()
                           if k.lower() != "date"]
    finally:
        conn.close()
    return info


def log_problems(srv):
    """Lines of the server's log that name an error or a warning (sluice,
    gunicorn and nginx all put the level in the line)."""
    try:
        text = srv.logpath.read_text(errors="replace")
    except OSError:
        return []
    words = ("error", "warn", "crit", "alert", "emerg", "traceback")
    return [line for line in text.splitlines()
            if any(w in line.lower() for w in words)][:20]


# ---------------------------------------------------------------- strace


def _tasks(pid):
    try:
        return os.listdir("/proc/%d/task" % pid)
    except OSError:
        return []


def _traced(pid, tracer):
    """True when every thread of PID is traced by TRACER."""
    tasks = _tasks(pid)
    for tid in tasks:
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                line = next(ln for ln in f if ln.startswith("TracerPid:"))
        except (OSError, StopIteration):
            return False
        if int(line.split()[1]) != tracer:
            return False
    return bool(tasks)


def parse_strace(text):
    """{syscall: (calls, errors)} from strace -c's table."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 5 or not f[3].isdigit() or f[-1] == "total":
            continue
        errors = int(f[4]) if len(f) == 6 and f[4].isdigit() else 0
        out[f[-1]] = (int(f[3]), errors)
    return out


def strace_run(arm, name, ctx_base, args, logdir, contents):
    """One server of ARM; its worker processes (every process of its tree
    but the one started) traced by `strace -c -f` while wrk fetches the
    file NAME. Returns the record for the report."""
    tag = "%s-strace-%s" % (arm.name, name)
    srv = run.Server(arm, dict(ctx_base, port=run.free_port()),
                     args.server_cpu, logdir, tag)
    rec = {"arm": arm.name, "file": name, "conns": args.strace_conns,
           "duration_s": args.strace_duration}
    tracer = None
    try:
        srv.start()
        preflight(srv, arm, [name], contents)
        run.run_wrk(srv.port, url(name), args.strace_conns, 1, 1,
                    args.client_cpu)  # warm-up, untraced
        root = srv.proc.pid
        workers = sorted(p for p, _st in run.process_tree(root) if p != root)
        if not workers:
            raise run.Skip("no worker process found under pid %d" % root)
        out = Path(logdir) / ("%s.txt" % tag)
        argv = [run.TASKSET, "-c", str(args.client_cpu), STRACE, "-c", "-f",
                "-o", str(out)]
        for p in workers:
            argv += ["-p", str(p)]
        rec["command"] = " ".join(argv[:7] + [
            "$LOGDIR/%s.txt" % tag, "-p", "WORKERPID"])
        tracer = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + ATTACH_TIMEOUT
        while not all(_traced(p, tracer.pid) for p in workers):
            if time.monotonic() > deadline or tracer.poll() is not None:
                raise run.Skip("strace did not attach to %s" % workers)
            time.sleep(0.05)
        r = run.run_wrk(srv.port, url(name), args.strace_conns, 1,
                        args.strace_duration, args.client_cpu)
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=30)
        tracer = None
        if "error" in r:
            raise run.Skip("wrk under strace: %s" % r["error"])
        rec.update(requests=r["requests"], errors=r.get("errors"),
                   workers=len(workers),
                   calls=parse_strace(out.read_text()))
    except run.Skip as e:
        rec["error"] = str(e)
    finally:
        if tracer is not None:
            tracer.kill()
            tracer.wait()
        srv.stop()
    return rec


# ---------------------------------------------------------------- report


def summarise(doc):
    """Rows of run.py's report.summarise, one per arm, file and
    connection count (named ARM/FILE)."""
    runs = [dict(r, arm="%s/%s" % (r["arm"], r["file"])) for r in doc["runs"]]
    names = ["%s/%s" % (a, f) for a in doc["arms"] for f in ARM_FILES[a]]
    rows = report.summarise(runs, names, doc["meta"]["conns"], [])["rows"]
    return {(r["arm"], r["conns"]): r for r in rows}


def paired(doc, a, b, fname, conns, key):
    """A's KEY over B's, round by round (both measured in the same round,
    one after the other): (min, max) or None."""
    ratios = []
    for rep in range(1, doc["meta"]["rounds"] + 1):
        x = [r for r in doc["runs"] if r["arm"] == a and r["file"] == fname
             and r["conns"] == conns and r["rep"] == rep and key in r]
        y = [r for r in doc["runs"] if r["arm"] == b and r["file"] == fname
             and r["conns"] == conns and r["rep"] == rep and key in r]
        if x and y and y[0][key]:
            ratios.append(x[0][key] / y[0][key])
    return (min(ratios), max(ratios)) if ratios else None


def _f(v, fmt="%.1f"):
    return "–" if v is None else fmt % v


def _range(p):
    return "–" if p is None else "%.2f–%.2f" % p


def _flags(row):
    if row is None:
        return "not run"
    if not row.get("n"):
        return "⚠ failed: " + "; ".join(row["failed"])[:100]
    return "⚠ " + "; ".join(row["flags"]) if row["flags"] else "0"


def nginx_table(doc, rows):
    out = ["| file | conns | nginx req/s | sluice req/s | req/s sluice/nginx "
           "| nginx CPU µs/req | sluice CPU µs/req | CPU sluice/nginx "
           "(rounds) | ≤ %.1f× | both CPUs µs/req nginx / sluice | flags "
           "nginx; sluice |" % CPU_TARGET,
           "|---|---:|---:|---:|---:|---:|---:|---:|:-:|---:|---|"]
    for fname in ARM_FILES["nginx"]:
        for conns in doc["meta"]["conns"]:
            n = rows.get(("nginx/" + fname, conns))
            s = rows.get(("sluice-static/" + fname, conns))
            if not (n and n.get("n") and s and s.get("n")):
                out.append("| %s | %d | %s | %s | – | – | – | – | – | – | "
                           "%s; %s |" % (fname, conns,
                                         _f(n and n.get("rps_median"), "%.0f"),
                                         _f(s and s.get("rps_median"), "%.0f"),
                                         _flags(n), _flags(s)))
                continue
            cpu = s["cpu_us_per_req"] / n["cpu_us_per_req"]
            out.append(
                "| %s | %d | %.0f | %.0f | %.2f× | %.1f | %.1f | %.2f× (%s) "
                "| %s | %s / %s | %s; %s |" % (
                    fname, conns, n["rps_median"], s["rps_median"],
                    s["rps_median"] / n["rps_median"], n["cpu_us_per_req"],
                    s["cpu_us_per_req"], cpu,
                    _range(paired(doc, "sluice-static", "nginx", fname, conns,
                                  "cpu_us_per_req")),
                    "yes" if cpu <= CPU_TARGET else "**no**",
                    _f(n.get("machine_us_per_req")),
                    _f(s.get("machine_us_per_req")), _flags(n), _flags(s)))
    return out


def app_table(doc, rows):
    out = ["| file | conns | arm | req/s | CPU µs/req | sluice-static req/s "
           "over it | its CPU µs/req over sluice-static's (rounds) | flags |",
           "|---|---:|---|---:|---:|---:|---:|---|"]
    arms = [a for a in doc["arms"] if a not in ("nginx", REF)]
    for fname in ARM_FILES["sluice-whitenoise"]:
        for conns in doc["meta"]["conns"]:
            ref = rows.get(("%s/%s" % (REF, fname), conns))
            if ref and ref.get("n"):
                out.append("| %s | %d | %s | %.0f | %.1f | 1.00× | 1.00× | "
                           "%s |" % (fname, conns, REF, ref["rps_median"],
                                     ref["cpu_us_per_req"], _flags(ref)))
            for a in arms:
                r = rows.get(("%s/%s" % (a, fname), conns))
                if not (r and r.get("n")):
                    out.append("| %s | %d | %s | – | – | – | – | %s |"
                               % (fname, conns, a, _flags(r)))
                    continue
                ok = ref and ref.get("n")
                out.append("| %s | %d | %s | %.0f | %.1f | %s | %s | %s |" % (
                    fname, conns, a, r["rps_median"], r["cpu_us_per_req"],
                    "%.2f×" % (ref["rps_median"] / r["rps_median"])
                    if ok else "–",
                    "%.2f× (%s)" % (
                        r["cpu_us_per_req"] / ref["cpu_us_per_req"],
                        _range(paired(doc, a, REF, fname, conns,
                                      "cpu_us_per_req"))) if ok else "–",
                    _flags(r)))
    return out


def detail_table(doc, rows):
    out = ["| arm | file | conns | req/s | min–max | CPU µs/req | min–max | "
           "server CPU | others on its CPU | wrk CPU | both CPUs µs/req | "
           "MB/s | p50 ms | p99 ms |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
           "---:|"]
    for a in doc["arms"]:
        for fname in ARM_FILES[a]:
            for conns in doc["meta"]["conns"]:
                r = rows.get(("%s/%s" % (a, fname), conns))
                if not (r and r.get("n")):
                    continue
                out.append(
                    "| %s | %s | %d | %.0f | %.0f–%.0f | %.1f | %.1f–%.1f | "
                    "%.0f %% | %s | %.0f %% | %s | %.0f | %.2f | %.2f |" % (
                        a, fname, conns, r["rps_median"], r["rps_min"],
                        r["rps_max"], r["cpu_us_per_req"], r["cpu_us_min"],
                        r["cpu_us_max"], r["server_cpu_pct"],
                        _f(r.get("other_pct"), "%.0f %%"), r["wrk_cpu_pct"],
                        _f(r.get("machine_us_per_req")),
                        r.get("mb_per_s") or 0, r["p50_ms"], r["p99_ms"]))
    return out


def strace_table(doc):
    recs = [s for s in doc.get("strace", []) if "calls" in s]
    if not recs:
        return ["(not run%s)" % "".join(
            "; %s: %s" % (s["arm"], s["error"]) for s in doc.get("strace", [])
            if "error" in s)]
    names = sorted({c for s in recs for c in s["calls"]},
                   key=lambda c: -max(s["calls"].get(c, (0, 0))[0]
                                      / s["requests"] for s in recs))
    out = ["| system call | %s |" % " | ".join(
               "%s, %s: calls/req (errors/req)" % (s["arm"], s["file"])
               for s in recs),
           "|---|%s" % ("---:|" * len(recs))]
    for c in names:
        cells = []
        for s in recs:
            calls, errs = s["calls"].get(c, (0, 0))
            cells.append("%.3f%s" % (calls / s["requests"],
                                     " (%.3f)" % (errs / s["requests"])
                                     if errs else ""))
        if any(float(x.split()[0]) >= 0.001 for x in cells):
            out.append("| %s | %s |" % (c, " | ".join(cells)))
    out.append("| **all** | %s |" % " | ".join(
        "%.2f" % (sum(v[0] for v in s["calls"].values()) / s["requests"])
        for s in recs))
    out += ["", "Requests counted: %s (wrk, %d connections, %d s; calls "
            "below 0.001 per request left out)." % (
                ", ".join("%s %s: %d" % (s["arm"], s["file"], s["requests"])
                          for s in recs),
                recs[0]["conns"], recs[0]["duration_s"])]
    return out


def markdown(doc):
    m, rows = doc["meta"], summarise(doc)
    pk = m.get("packages", {})
    out = ["# sluice benchmark: static files (issue 31)", ""]
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
    w("- Each server pinned with `taskset -c %d` (its whole tree), wrk "
      "(`-t1`, keep-alive) and the harness with `taskset -c %d`; one worker "
      "each; %d round(s), the arm order rotating each round, a fresh server "
      "per arm and round; each run %d s measured after a %d s warm-up at "
      "the same connection count; figures are medians over rounds"
      % (m["server_cpu"], m["client_cpu"], m["rounds"], m["duration_s"],
         m["warmup_s"]))
    w("- CPU µs/req: utime+stime of the server's whole process tree (nginx's "
      "master and worker, sluice's supervisor and worker, gunicorn's arbiter "
      "and worker; /proc/PID/stat, every thread) read right before and right "
      "after the measured run, over the requests wrk completed. *both CPUs "
      "µs/req*: every CPU's busy time (server, wrk, kernel) over the same "
      "requests: over loopback part of the kernel's TCP work for the server "
      "lands on wrk's CPU; it also counts whatever else ran (read it on "
      "rows that are not *disturbed*). *(rounds)*: the ratio's min–max over the rounds, "
      "each pairing two runs of the same round")
    w("- Files: `/static/1k.bin`, `/static/100k.bin`, `/static/1m.bin` "
      "(1024, 102400, 1048576 bytes) in `$LOGDIR/static`")
    w("")
    w("## sluice --static beside nginx")
    w("")
    out += nginx_table(doc, rows)
    w("")
    w("## sluice --static beside the app path (WhiteNoise in Django, a plain "
      "WSGI app)")
    w("")
    out += app_table(doc, rows)
    w("")
    if doc.get("notes"):
        out += ["## Notes", "", doc["notes"].strip(), ""]
    w("## System calls per request (strace)")
    w("")
    w("`strace -c -f` attached to the worker process (every thread) of a "
      "fresh server for one wrk run of one file; calls over the "
      "requests wrk completed. Under strace the server is several times "
      "slower, so calls that depend on batching (epoll_wait, reads that "
      "find nothing) may come out higher than unattached; the per-file "
      "calls (open, stat, sendfile, close) do not.")
    w("")
    out += strace_table(doc)
    w("")
    w("## Every run (medians over rounds)")
    w("")
    out += detail_table(doc, rows)
    w("")
    w("Flags (⚠) are run.py's (bench/README.md): wrk's socket errors and "
      "non-2xx/3xx answers summed over rounds, *disturbed* (others took ≥ "
      "10 % of the server's CPU), *stolen*, *client-bound?* (wrk ≥ 90 % of "
      "its CPU), *starved*/*slow accept*.")
    w("")
    w("## Commands")
    w("")
    for name, a in doc["arms"].items():
        w("- **%s** (%s): %s" % (name, ", ".join(
            "`%s`" % url(f) for f in ARM_FILES[name]), a["note"]))
        if a.get("command"):
            w("  `%s`" % a["command"])
        pre = a.get("preflight")
        if pre:
            w("  — preflight: %d, keep-alive %s; headers of 1k.bin: %s" % (
                pre["status"], "yes" if pre.get("keep_alive") else "NO",
                ", ".join("%s: %s" % (k, v) for k, v in pre.get("headers",
                                                                 []))))
        if a.get("log_problems"):
            w("  — its log: %s" % " | ".join(a["log_problems"][:5]))
    w("- **wrk**: `%s`" % m["wrk_command"])
    for s in doc.get("strace", []):
        if s.get("command"):
            w("- **strace** (%s, %s): `%s`" % (s["arm"], s["file"],
                                                s["command"]))
    w("")
    if doc["skipped"]:
        w("## Skipped")
        w("")
        for name, why in doc["skipped"].items():
            w("- **%s**: %s" % (name, why))
        w("")
    w("## Versions")
    w("")
    w("- Debian packages: " + ", ".join("%s %s" % kv
                                        for kv in sorted(pk.items())))
    w("")
    return "\n".join(out)


# ---------------------------------------------------------------- driver


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5,
                    help="seconds of each measured wrk run (default 5)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="seconds of wrk before each measured run (default 1)")
    ap.add_argument("--quick", action="store_true",
                    help="1 round of 2 s runs, strace for 2 s: a smoke run")
    ap.add_argument("--conns", default="16,256")
    ap.add_argument("--only", default="", help="arms, comma-separated")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--strace-duration", type=int, default=3)
    ap.add_argument("--strace-conns", type=int, default=16)
    ap.add_argument("--strace-files", default="1k,100k",
                    help="the files of the strace runs (default 1k,100k)")
    report.add_report_args(ap, "static")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.duration, args.warmup = 1, 2, 1
        args.strace_duration = 2
    args.wrk_threads = 1  # what run.measure() reads
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
    arms = ARMS
    if args.only:
        wanted = [a for a in args.only.split(",") if a]
        bad = set(wanted) - {a.name for a in ARMS}
        if bad:
            ap.error("unknown arm(s): %s" % ", ".join(sorted(bad)))
        arms = [a for a in ARMS if a.name in wanted]
    conns_list = [int(c) for c in args.conns.split(",") if c]
    ctx_base = {"apps": str(run.APPS), "root": str(run.ROOT),
                "sluice": run.sluice_bin(args), "sluice_before": ""}
    if args.list:
        with tempfile.TemporaryDirectory() as scratch:
            for arm in arms:
                s = run.Server(arm, dict(ctx_base, port="PORT"),
                               args.server_cpu, scratch, "x")
                print("%-20s %s  [%s]" % (
                    arm.name, s.command_line().replace(scratch, "$LOGDIR"),
                    " ".join(map(url, ARM_FILES[arm.name]))))
        return 0
    os.sched_setaffinity(0, {args.client_cpu})
    skipped, runnable = {}, []
    for arm in arms:
        need = run.expand(arm.requires, ctx_base)
        if not os.access(need, os.X_OK):
            skipped[arm.name] = "binary not found: %s" % need
        else:
            runnable.append(arm)
    n_runs = sum(len(ARM_FILES[a.name]) for a in runnable) * len(conns_list)
    print("%d arms, %d runs a round, about %.0f s in all" % (
        len(runnable), n_runs, args.rounds * n_runs
        * (args.duration + args.warmup + 0.7)), flush=True)

    logdir = tempfile.mkdtemp(prefix="sluice-bench-static-")
    print("server logs: %s" % logdir, flush=True)
    contents = write_files(logdir)
    meta = run.machine_info()
    extra = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", "nginx",
         "nginx-common", "gunicorn", "python3-whitenoise", "strace"],
        capture_output=True, text=True).stdout
    for line in extra.splitlines():
        k, _, v = line.partition(" ")
        if v:
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
        "label": args.label, "rounds": args.rounds, "conns": conns_list,
        "duration_s": args.duration, "warmup_s": args.warmup,
        "server_cpu": args.server_cpu, "client_cpu": args.client_cpu,
        "command": report.command_line("static.py", sys.argv[1:]),
        "git_commit": subprocess.run(
            ["git", "-C", str(run.ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True).stdout.strip(),
        "wrk_command": "%s -c %d %s -t1 -cCONNS -d%ds -s bench/wrk_summary.lua"
                       " http://127.0.0.1:PORT/static/FILE"
                       % (run.TASKSET, args.client_cpu, run.WRK,
                          args.duration)})
    arm_info = {a.name: {"note": a.note} for a in arms}
    runs, errors, current = [], {}, [None]

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        for rep in range(args.rounds):
            k = rep % len(runnable) if runnable else 0
            for arm in runnable[k:] + runnable[:k]:
                ctx = dict(ctx_base, port=run.free_port())
                srv = run.Server(arm, ctx, args.server_cpu, logdir,
                                 "%s-%d" % (arm.name, rep + 1))
                current[0] = srv
                arm_info[arm.name]["command"] = srv.command_line().replace(
                    "127.0.0.1:%d" % ctx["port"], "127.0.0.1:PORT")
                try:
                    srv.start()
                    arm_info[arm.name]["preflight"] = preflight(
                        srv, arm, ARM_FILES[arm.name], contents)
                    for fname in ARM_FILES[arm.name]:
                        one = dataclasses.replace(arm, path=url(fname))
                        for conns in conns_list:
                            if not srv.alive():
                                raise run.Skip("server exited: %s"
                                               % srv.log_tail())
                            r = run.measure(srv, one, conns, args,
                                            run.WRK_LUA)
                            r.update(arm=arm.name, file=fname, conns=conns,
                                     rep=rep + 1, pipeline=1)
                            runs.append(r)
                            print("round %d %-20s %-4s c%-4d %s" % (
                                rep + 1, arm.name, fname, conns,
                                report.one_line(r)), flush=True)
                except run.Skip as e:
                    errors.setdefault(arm.name, []).append(str(e))
                    print("round %d %-20s skipped: %s" % (rep + 1, arm.name,
                                                          e), flush=True)
                finally:
                    srv.stop()
                    current[0] = None
                    problems = log_problems(srv)
                    if problems:
                        arm_info[arm.name].setdefault(
                            "log_problems", []).extend(problems)
        stx = []
        if not args.no_strace and os.access(STRACE, os.X_OK):
            for arm in [a for a in runnable if a.name in STRACE_ARMS]:
                for fname in args.strace_files.split(","):
                    stx.append(strace_run(arm, fname, ctx_base, args, logdir,
                                          contents))
                    print("strace %s %s: %s" % (
                        arm.name, fname, stx[-1].get("error", "%d requests"
                                                     % stx[-1].get(
                                                         "requests", 0))),
                        flush=True)
    except (KeyboardInterrupt, SystemExit):
        if current[0] is not None:
            current[0].stop()
        print("interrupted; no report written", file=sys.stderr)
        return 130
    for name, errs in errors.items():
        if not any(r["arm"] == name and "rps" in r for r in runs):
            skipped[name] = errs[0]
        else:
            arm_info[name]["attempt_errors"] = errs
    meta["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    doc = {"meta": meta, "arms": arm_info, "skipped": skipped, "runs": runs,
           "strace": stx}
    places = {str(run.ROOT): "$REPO", logdir: "$LOGDIR"}
    after = Path(ctx_base["sluice"]).resolve().parent
    if not str(after).startswith(str(run.ROOT)):
        places[str(after)] = "$AFTER"
    doc = report.scrub(doc, places)
    jpath = Path(args.json or Path(logdir) / "static.json")
    jpath.write_text(json.dumps(doc, indent=1) + "\n")
    Path(args.out).write_text(markdown(doc))
    print("wrote %s, %s" % (args.out, jpath))
    return 0


if __name__ == "__main__":
    sys.exit(main())
