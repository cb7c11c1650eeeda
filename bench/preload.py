#!/usr/bin/python3
"""preload: what --preload saves in memory and start time (issue 30), sluice
beside gunicorn, on real apps (a report, not a test).

    SLUICE_BIN=$PWD/sluice /usr/bin/python3 bench/preload.py [--repeat 2]
        [--apps django,fastapi] [--arms sluice,sluice-preload,...]
        [--per-worker 2000] [--ttin 5] [--hups 3]

Two apps under bench/apps, each imported whole at module import:
djrest (Django 3.2 with the admin, auth, contenttypes, sessions, messages
and Django REST framework: a model, a serializer, a viewset behind a
router, sqlite in the run's temporary directory) and fastapi_shop (FastAPI
with pydantic models, a router, middleware). Every server runs 4 workers
of the same app:

  sluice                sluice, workers exec'd (no --preload)
  sluice-preload        sluice --preload (a zygote forks the workers)
  gunicorn              gunicorn, sync workers (Django) or
                        -k uvicorn.workers.UvicornWorker (FastAPI)
  gunicorn-preload      the same with gunicorn's --preload

For each app, arm and repeat, on a fresh server pinned to CPU 0 (taskset;
the harness and its client on CPU 1):

1. Memory once the workers are ready (sluice: the "is ready" lines;
   every arm: each process's VmRSS unchanged over 5 readings 0.2 s apart)
   and again after every worker answered --per-worker requests of the
   app's JSON endpoint (keep-alive connections of 25 requests each; the
   X-Worker-Pid header says which worker answered), because copy-on-write
   sharing erodes as workers touch pages. Pss, Rss and private memory of
   each process from /proc/PID/smaps_rollup, grouped by role: the
   supervisor (gunicorn: arbiter), the zygote (any other process of the
   tree), the workers (the pids of the "Booting worker" log lines).
2. sluice arms: the boot figures of the log ("Worker N (pid P) is ready
   (booted in X)": from the supervisor's request to the worker's READY),
   for the 4 first workers (booted together) and for --ttin workers
   added one at a time by SIGTTIN (each removed by SIGTTOU before the
   next), with the time the harness saw the ready line after its signal.
3. Rolling restarts (HUP) with and without --preload: bench/reload.py's
   run_arm() on the same apps (4 workers, not pinned, load of 16 paced
   threads on /pid and the JSON endpoint): requests lost, p50/p99.

Results: bench/results/preload.{md,json} (--out DIR), where the repository
is $REPO and the run's temporary directory $LOGDIR.
"""

import argparse
import datetime
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
APPS = BENCH / "apps"
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(BENCH))

import helpers  # noqa: E402
import reload as reloadbench  # noqa: E402
import report  # noqa: E402
import run  # noqa: E402

WORKERS = 4
READY_RE = re.compile(r"Worker (\d+) \(pid (\d+)\) is ready "
                      r"\(booted in ([0-9.]+) ?(ms|s)\)")
ZYGOTE_RE = re.compile(r"zygote of generation \d+ \(pid \d+\) is ready "
                       r"\(app loaded in ([0-9.]+)s, ([0-9.]+)s after")
ROLLUP = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Shared_Clean",
          "Shared_Dirty", "Private_Clean", "Private_Dirty", "Swap")
STABLE = 5
ENV_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # run.py's: Debian's python3


class App:
    def __init__(self, name, target, json_path, asgi, gunicorn_worker):
        self.name, self.target, self.json_path = name, target, json_path
        self.asgi, self.gunicorn_worker = asgi, gunicorn_worker


APPS_ALL = {
    "django": App("django", "djrest.wsgi:application", "/api/books/",
                  False, "sync"),
    "fastapi": App("fastapi", "fastapi_shop:app", "/items", True,
                   "uvicorn.workers.UvicornWorker"),
}
ARMS = ("sluice", "sluice-preload", "gunicorn", "gunicorn-preload")


# ------------------------------------------------------------- servers

class SluiceServer(helpers.Server):
    pass


class GunicornServer(helpers.Server):
    def __init__(self, workdir, app, worker_class, preload, **kw):
        super().__init__(workdir, app, **kw)
        self.worker_class, self.preload = worker_class, preload

    def command(self):
        return self.prefix + [
            "/usr/bin/gunicorn", "-k", self.worker_class,
            "-w", str(self.workers), "-b", self.binds[0],
            "--pythonpath", self.pythonpath[0],
            "--error-logfile", str(self.error_log)] + \
            (["--preload"] if self.preload else []) + [self.app]

    def describe(self):
        return "gunicorn[%s workers=%d]" % (self.app, self.workers)


def make_server(arm, app, workdir, args, pinned=True, workers=WORKERS):
    env = {"PATH": ENV_PATH, "SLUICE_BENCH_DB": str(args.db)}
    prefix = [run.TASKSET, "-c", str(args.server_cpu)] if pinned else []
    kw = dict(workers=workers, env=env, pythonpath=(str(APPS),),
              ready_path=None, prefix=prefix)
    if arm.startswith("sluice"):
        more = ["--interface", "asgi"] if app.asgi else []
        if arm == "sluice-preload":
            more.append("--preload")
        return SluiceServer(workdir, app.target, args=more,
                            binary=args.sluice_bin, **kw)
    return GunicornServer(workdir, app.target, app.gunicorn_worker,
                          arm == "gunicorn-preload", **kw)


# ---------------------------------------------------------------- /proc

def rollup(pid):
    """The ROLLUP fields of /proc/PID/smaps_rollup in KiB (None: gone)."""
    out = {}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ROLLUP:
                    out[key] = int(rest.split()[0])
    except (FileNotFoundError, ProcessLookupError):
        return None
    out["Private"] = out.get("Private_Clean", 0) + out.get("Private_Dirty",
                                                            0)
    return out


def roles(server):
    """{"supervisor": [pid], "zygote": [pids], "workers": [pids]}."""
    tree = reloadbench.descendants(server.pid)
    workers = reloadbench.worker_pids(server)
    return {"supervisor": [server.pid], "workers": workers,
            "zygote": sorted(set(tree) - set(workers))}


def memory(server):
    """Per role: the pids, each one's rollup, and the sums."""
    out = {}
    for role, pids in roles(server).items():
        per = {p: rollup(p) for p in pids}
        per = {p: r for p, r in per.items() if r is not None}
        out[role] = {"pids": sorted(per), "each": {str(p): r for p, r in
                                                   per.items()},
                     "sum": {k: sum(r.get(k, 0) for r in per.values())
                             for k in ROLLUP + ("Private",)}}
    return out


def settle(server, n, timeout=60.0):
    """Wait until the server has N workers (sluice: N "is ready" lines as
    well) and the VmRSS of every process of its tree has been the same
    over STABLE readings 0.2 s apart (gunicorn logs nothing when a worker
    has loaded the app: a worker importing it grows). Seconds it took."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    helpers.wait_until(lambda: len(reloadbench.worker_pids(server)) >= n,
                       timeout, "%d workers" % n)
    if isinstance(server, SluiceServer):
        helpers.wait_until(
            lambda: len(READY_RE.findall(server.error_log_text())) >= n,
            max(1.0, deadline - time.monotonic()), "%d ready lines" % n)
    same, last = 0, None
    while same < STABLE:
        if time.monotonic() > deadline:
            raise AssertionError("memory did not settle in %ss" % timeout)
        pids = [server.pid] + reloadbench.descendants(server.pid)
        now = []
        for p in pids:
            try:
                now.append((p, helpers.vm_rss_kib(p)))
            except (FileNotFoundError, ProcessLookupError, AssertionError):
                pass
        same = same + 1 if now == last else 0
        last = now
        time.sleep(0.2)
    return time.monotonic() - t0


# --------------------------------------------------------------- client

def load_until(server, path, per_worker, threads=8, per_conn=25,
               timeout=300.0):
    """GET PATH on keep-alive connections (PER_CONN requests each, then a
    new one, so that connections spread over the workers) from THREADS
    threads until every worker has answered PER_WORKER of them (by the
    X-Worker-Pid header) or TIMEOUT. A result dict."""
    workers = set(reloadbench.worker_pids(server))
    counts = Counter()
    errors = Counter()
    lock = threading.Lock()
    done = threading.Event()
    req = ("GET %s HTTP/1.1\r\nHost: bench\r\n\r\n" % path).encode()

    def enough():
        return all(counts[p] >= per_worker for p in workers)

    def one():
        while not done.is_set():
            try:
                conn = helpers.RawConn.tcp(server.host, server.port, 10)
            except OSError as e:
                with lock:
                    errors["connect: %s" % type(e).__name__] += 1
                time.sleep(0.01)
                continue
            with conn:
                for _ in range(per_conn):
                    if done.is_set():
                        break
                    try:
                        conn.send(req)
                        r = conn.read_response()
                    except (OSError, helpers.HTTPError) as e:
                        with lock:
                            errors[type(e).__name__] += 1
                        break
                    pid = r.header("X-Worker-Pid")
                    with lock:
                        if r.status != 200 or not pid:
                            errors["status %d" % r.status] += 1
                        else:
                            counts[int(pid)] += 1
                            if enough():
                                done.set()
                    if r.has_token("Connection", "close"):
                        break

    t0 = time.monotonic()
    ts = [threading.Thread(target=one, daemon=True) for _ in range(threads)]
    for t in ts:
        t.start()
    done.wait(timeout)
    done.set()
    for t in ts:
        t.join(30)
    secs = time.monotonic() - t0
    return {"seconds": round(secs, 2), "requests": sum(counts.values()),
            "per_worker": {str(p): counts[p] for p in sorted(workers)},
            "other_pids": {str(p): c for p, c in counts.items()
                           if p not in workers},
            "errors": dict(errors), "complete": enough()}


# ----------------------------------------------------------- boot times

def boot_figure(value, unit):
    return float(value) / (1000.0 if unit == "ms" else 1.0)


def ready_lines(text):
    """[(worker number, pid, seconds)] of the "is ready" lines of TEXT."""
    return [(int(n), int(p), boot_figure(v, u))
            for n, p, v, u in READY_RE.findall(text)]


def ttin_boots(server, count, timeout=60.0):
    """COUNT times: SIGTTIN, wait for the new worker's ready line, SIGTTOU,
    wait until the server is back to its worker count. [dict]."""
    out = []
    for _ in range(count):
        mark = server.log_mark()
        t0 = time.monotonic()
        os.kill(server.pid, signal.SIGTTIN)
        seen = helpers.wait_until(
            lambda: ready_lines(server.log_since(mark)) and time.monotonic(),
            timeout, "the ready line of a TTIN worker", interval=0.002)
        n, pid, booted = ready_lines(server.log_since(mark))[0]
        out.append({"worker": n, "pid": pid, "booted_s": booted,
                    "seen_after_signal_s": round(seen - t0, 4)})
        os.kill(server.pid, signal.SIGTTOU)
        helpers.wait_until(
            lambda: len(reloadbench.worker_pids(server)) == server.workers,
            timeout, "back to %d workers after TTOU" % server.workers)
    return out


# ------------------------------------------------------------ one arm

def run_arm(arm, app, args, workdir):
    server = make_server(arm, app, workdir, args)
    res = {"app": app.name, "arm": arm, "command": " ".join(server.command())}
    t0 = time.monotonic()
    try:
        server.start()
    except helpers.ServerFailed as e:
        res["skipped"] = "failed to start: %s" % str(e)[-800:]
        return res
    try:
        res["settle_s"] = round(settle(server, WORKERS), 2)
        res["start_to_settled_s"] = round(time.monotonic() - t0, 2)
        res["roles_ready"] = roles(server)
        res["mem_ready"] = memory(server)
        res["load"] = load_until(server, app.json_path, args.per_worker,
                                 timeout=args.load_timeout)
        settle(server, WORKERS)
        res["mem_loaded"] = memory(server)
        if arm.startswith("sluice"):
            text = server.error_log_text()
            res["boot_initial"] = [b for _, _, b in ready_lines(text)]
            res["zygote_boot"] = [[float(a), float(b)] for a, b in
                                  ZYGOTE_RE.findall(text)]
            if args.ttin:
                res["boot_ttin"] = ttin_boots(server, args.ttin)
        res["zygote_seen"] = bool(res["roles_ready"]["zygote"])
    except AssertionError as e:
        res["error"] = str(e)[-800:]
    finally:
        res["stop_problems"] = server.stop()
        res["log_tail"] = server.error_log_text()[-1500:]
    return res


def hup_arm(arm, app, args, workdir):
    """bench/reload.py's rolling-restart load on APP."""
    server = make_server(arm, app, workdir, args, pinned=False)
    server.ready_path = "/pid"
    paths = [helpers.Req("/pid"),
             helpers.Req(app.json_path, check=lambda r: r.body[:1] == b"{")]
    ns = argparse.Namespace(hups=args.hups, conns=args.hup_conns,
                            settle=args.hup_settle, window=args.hup_window)
    try:
        res = reloadbench.run_arm(arm, server, ns, paths=paths)
    except (AssertionError, helpers.ServerFailed) as e:
        server.stop()
        return {"name": arm, "app": app.name, "error": str(e)[-800:]}
    res["app"] = app.name
    return res


# ------------------------------------------------------------ database

def make_db(path):
    """Django's tables and 50 books in the sqlite file PATH."""
    code = ("import djrest.wsgi as w\n"
            "from django.core.management import call_command\n"
            "call_command('migrate', run_syncdb=True, verbosity=0)\n"
            "w.seed()\n")
    env = helpers.clean_env({"PATH": ENV_PATH, "SLUICE_BENCH_DB": str(path),
                             "PYTHONPATH": str(APPS)})
    subprocess.run(["/usr/bin/python3", "-c", code], env=env, check=True,
                   cwd=str(APPS), timeout=120)


# -------------------------------------------------------------- report

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs, fmt="%.0f"):
    """"median (min–max)" of XS, or the one value."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    if len(xs) == 1:
        return fmt % xs[0]
    return (fmt + " (" + fmt + "–" + fmt + ")") % (statistics.median(xs),
                                                  min(xs), max(xs))


def mib(kib):
    return None if kib is None else kib / 1024.0


def mem_figures(r, when):
    m = r.get(when)
    if not m:
        return None
    w, z, s = (m[k]["sum"] for k in ("workers", "zygote", "supervisor"))
    nw = max(1, len(m["workers"]["pids"]))
    return {"supervisor": mib(s["Pss"]), "zygote": mib(z["Pss"]),
            "workers": mib(w["Pss"]), "workers_zygote": mib(w["Pss"]
                                                            + z["Pss"]),
            "tree": mib(w["Pss"] + z["Pss"] + s["Pss"]),
            "rss_worker": mib(w["Rss"] / nw),
            "private_worker": mib(w["Private"] / nw),
            "nworkers": len(m["workers"]["pids"])}


def markdown(doc):
    args = doc["args"]
    lines = ["# --preload: memory and start time (bench/preload.py)", ""]
    if args.get("label"):
        lines += ["> " + args["label"], ""]
    mach = doc["machine"]
    lines += ["%s; %s CPUs (%s), kernel %s, Debian %s; load average at the "
              "start %s, at the end %s. %d repeat(s), arms interleaved "
              "(the order rotates). sluice %s. Every figure is a median "
              "over the repeats with min–max beside it." % (
                  doc["date"], mach["cpus"], mach["cpu_model"],
                  mach["kernel"], mach["debian"],
                  " ".join(mach["loadavg_start"]),
                  " ".join(doc["loadavg_end"]), args["repeat"],
                  doc["sluice_commit"]), ""]
    runs = [r for r in doc["runs"]]
    for app in args["apps"]:
        lines += ["## %s: memory, %d workers (PSS, MiB)" % (app, WORKERS), ""]
        lines += ["Ready: the workers booted, no request served yet. "
                  "Loaded: after every worker answered %d requests of `%s`."
                  % (args["per_worker"], APPS_ALL[app].json_path), ""]
        lines += ["| server | when | supervisor / arbiter | zygote | "
                  "4 workers | workers + zygote | whole tree | "
                  "RSS per worker | private per worker |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        med_of = {}
        for arm in args["arms"]:
            mine = [r for r in runs if r["app"] == app and r["arm"] == arm]
            ok = [r for r in mine if "mem_ready" in r]
            if not ok:
                why = "; ".join(sorted({r.get("skipped") or r.get("error")
                                        or "?" for r in mine}))[:300]
                lines.append("| %s | | skipped: %s |||||||" % (
                    arm, why.replace("\n", " ").replace("|", "/")))
                continue
            for when in ("mem_ready", "mem_loaded"):
                figs = [mem_figures(r, when) for r in ok]
                figs = [f for f in figs if f]
                col = {k: [f[k] for f in figs] for k in figs[0]}
                med_of[(arm, when)] = {k: med(v) for k, v in col.items()}
                note = ""
                if arm == "sluice-preload" and not any(
                        r.get("zygote_seen") for r in ok):
                    note = " ⚠ no zygote seen"
                if set(col["nworkers"]) - {WORKERS}:
                    note += " ⚠ workers: %s" % sorted(set(col["nworkers"]))
                lines.append("| %s%s | %s | %s | %s | %s | %s | %s | %s | %s |"
                             % (arm, note, when[4:],
                                spread(col["supervisor"], "%.1f"),
                                spread(col["zygote"], "%.1f"),
                                spread(col["workers"], "%.1f"),
                                spread(col["workers_zygote"], "%.1f"),
                                spread(col["tree"], "%.1f"),
                                spread(col["rss_worker"], "%.1f"),
                                spread(col["private_worker"], "%.1f")))
        gun = "gunicorn-preload"
        lines += ["", "Ratios of the medians (targets of issue 30: sluice "
                  "--preload ≤ 0.6× sluice, and ≤ gunicorn --preload):", "",
                  "| ratio | when | 4 workers | workers + zygote (gunicorn: "
                  "+ arbiter) | whole tree |", "|---|---|---:|---:|---:|"]
        for when in ("mem_ready", "mem_loaded"):
            a = med_of.get(("sluice-preload", when))
            for other, label in (("sluice", "sluice --preload / sluice"),
                                 (gun, "sluice --preload / gunicorn "
                                  "--preload"),
                                 ("gunicorn", "gunicorn --preload / "
                                  "gunicorn")):
                b = med_of.get((other, when))
                if other == "gunicorn":
                    a2 = med_of.get((gun, when))
                else:
                    a2 = a
                if not a2 or not b:
                    lines.append("| %s | %s | n/a | n/a | n/a |"
                                 % (label, when[4:]))
                    continue
                # gunicorn's arbiter holds the app under --preload: it is
                # its zygote
                def wz(f, arm_name):
                    if arm_name.startswith("gunicorn"):
                        return f["workers"] + f["supervisor"]
                    return f["workers_zygote"]
                num_arm = gun if other == "gunicorn" else "sluice-preload"
                lines.append("| %s | %s | %.2f | %.2f | %.2f |" % (
                    label, when[4:], a2["workers"] / b["workers"],
                    wz(a2, num_arm) / wz(b, other), a2["tree"] / b["tree"]))
        lines.append("")
        load = [r["load"] for r in runs if r["app"] == app and "load" in r]
        if load:
            lines.append("Load: %s requests per arm, %s s (per-worker counts "
                         "and errors in the JSON); errors: %s." % (
                             spread([l["requests"] for l in load]),
                             spread([l["seconds"] for l in load], "%.1f"),
                             sum(sum(l["errors"].values()) for l in load)))
            lines.append("")
    lines += boot_section(doc)
    lines += hup_section(doc)
    if doc.get("notes"):
        lines += ["## Notes", "", doc["notes"].strip(), ""]
    lines += ["## Commands", ""]
    seen = set()
    for r in runs + doc.get("hup", []):
        c = r.get("command")
        if c and c not in seen:
            seen.add(c)
            lines.append("- `%s`" % c)
    problems = [(r.get("app"), r.get("arm") or r.get("name"), p)
                for r in runs + doc.get("hup", [])
                for p in (r.get("stop_problems") or r.get("problems") or [])]
    errors = [(r.get("app"), r.get("arm") or r.get("name"), r["error"])
              for r in runs + doc.get("hup", []) if r.get("error")]
    if problems or errors:
        lines += ["", "Problems seen:", ""]
        for app, arm, p in problems + errors:
            lines.append("- %s %s: %s" % (app, arm, p.replace("\n", " ")
                                          [:400]))
    return "\n".join(lines) + "\n"


def boot_section(doc):
    runs = doc["runs"]
    lines = ["## Worker boot: from the supervisor's request to READY", "",
             "sluice's own figure (\"booted in\" of its ready line). "
             "*4 at once*: the first workers, started together on one "
             "CPU; *one at a time*: workers added by SIGTTIN (one TTOU "
             "after each). *seen* is from the harness's kill(TTIN) to the "
             "ready line in the log (polled every 2 ms). *zygote*: its "
             "own ready line (sluice --preload), the import and the whole "
             "start. Seconds, over "
             "every worker of every repeat. Target of issue 30: ≤ 0.020 s "
             "with --preload.", "",
             "| app | server | zygote: app loaded / ready after its start "
             "| 4 at once: median (min–max) | one at a time: "
             "min | median | max | seen: median |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for app in doc["args"]["apps"]:
        for arm in ("sluice", "sluice-preload"):
            mine = [r for r in runs if r["app"] == app and r["arm"] == arm
                    and "boot_initial" in r]
            if not mine:
                continue
            init = [b for r in mine for b in r["boot_initial"][:WORKERS]]
            tt = [b["booted_s"] for r in mine for b in r.get("boot_ttin", [])]
            seen = [b["seen_after_signal_s"] for r in mine
                    for b in r.get("boot_ttin", [])]
            zy = [z for r in mine for z in r.get("zygote_boot", [])[:1]]
            zcell = "%s / %s" % (spread([z[0] for z in zy], "%.3f"),
                                 spread([z[1] for z in zy], "%.3f")) \
                if zy else "-"
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                app, arm, zcell, spread(init, "%.3f"),
                "%.3f" % min(tt) if tt else "n/a",
                "%.3f" % med(tt) if tt else "n/a",
                "%.3f" % max(tt) if tt else "n/a",
                "%.3f" % med(seen) if seen else "n/a"))
    lines.append("")
    return lines


def hup_section(doc):
    hups = doc.get("hup") or []
    if not hups:
        return []
    args = doc["args"]
    lines = ["## Rolling restart (HUP) with and without --preload", "",
             "bench/reload.py's load and procedure on each app: %d workers "
             "(not pinned), %d paced client threads (half keep-alive, half "
             "a fresh connection per request) on `/pid` and the JSON "
             "endpoint; %d HUPs a run, the next once every worker was "
             "replaced and the new ones had answered %d `/pid`. Latency "
             "from a request's first byte sent to its answer's last byte "
             "(connect() not included). A window from a HUP until every "
             "worker was replaced is shorter when the replacement is "
             "faster, so it holds fewer ordinary requests: the fixed "
             "window after each HUP is the one to compare. Per run; totals "
             "over the run's HUPs." % (WORKERS, args["hup_conns"],
                                       args["hups"],
                        args["hup_settle"]), "",
             "| app | server | run | answered | failed (kinds) | refused | "
             "s to replace (median) | p50 / p99 / max ms before the first "
             "HUP | p50 / p99 / max ms from a HUP until replaced | "
             "p50 / p99 / max ms in the %.0f s after a HUP |"
             % args.get("hup_window", 5.0),
             "|---|---|---|---:|---|---:|---:|---|---|---|"]
    for i, r in enumerate(hups):
        if r.get("error"):
            lines.append("| %s | %s | %d | error: %s ||||||" % (
                r["app"], r["name"], r.get("repeat", 0) + 1,
                r["error"].replace("\n", " ")[:200]))
            continue
        lat = r["latency_ms"]
        lines.append("| %s | %s | %d | %d | %d (%s) | %d | %.2f | %s | %s "
                     "| %s |" % (r["app"], r["name"], r.get("repeat", 0) + 1, r["ok"],
                        r["failed"], reloadbench.kinds_text(r["kinds"]),
                        r["refused"],
                        med([x["replaced"] for x in r["reloads"]]) or 0,
                        reloadbench.lat_text(lat["before_first_hup"]),
                        reloadbench.lat_text(lat["hup_to_replaced"]),
                        reloadbench.lat_text(lat.get("hup_window",
                                                     (0, 0, 0, 0)))))
    lines.append("")
    return lines


# ---------------------------------------------------------------- main

def package_versions(names):
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f",
                              "${Package} ${Version}\\n"] + names,
                             capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(line.split(" ", 1) for line in out.splitlines()
                if " " in line)


def sluice_commit():
    try:
        return subprocess.run(["git", "-C", str(ROOT), "log", "-1",
                               "--format=%h %s"], capture_output=True,
                              text=True, timeout=10).stdout.strip()[:100]
    except (OSError, subprocess.SubprocessError):
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apps", default="django,fastapi")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--per-worker", type=int, default=2000,
                    help="requests each worker answers before the second "
                    "reading [2000]")
    ap.add_argument("--load-timeout", type=float, default=300.0)
    ap.add_argument("--ttin", type=int, default=5,
                    help="workers added one at a time (SIGTTIN) [5]")
    ap.add_argument("--hups", type=int, default=3,
                    help="HUPs per rolling-restart run; 0: no HUP runs [3]")
    ap.add_argument("--hup-arms", default="sluice,sluice-preload")
    ap.add_argument("--hup-conns", type=int, default=16)
    ap.add_argument("--hup-settle", type=int, default=1000,
                    help="/pid answers from the new workers before the "
                    "next HUP (and from the first before the first) [1000]")
    ap.add_argument("--hup-window", type=float, default=10.0,
                    help="latency also over this many seconds after each "
                    "HUP, the same span for every server [10]")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--sluice-bin",
                    default=os.environ.get("SLUICE_BIN", str(ROOT / "sluice")))
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default=str(BENCH / "results"))
    ap.add_argument("--name", default="preload",
                    help="the report is OUT/NAME.md and .json [preload]")
    ap.add_argument("--render", metavar="JSON",
                    help="only rewrite the .md beside an existing JSON")
    ap.add_argument("--notes", metavar="FILE",
                    help="with --render: FILE's Markdown as the notes "
                    "(kept in the JSON)")
    args = ap.parse_args()
    out = Path(args.out)
    if args.render:
        doc = json.loads(Path(args.render).read_text())
        if args.notes:
            doc["notes"] = Path(args.notes).read_text()
            Path(args.render).write_text(json.dumps(doc, indent=1) + "\n")
        Path(args.render).with_suffix(".md").write_text(markdown(doc))
        return
    args.apps = args.apps.split(",")
    args.arms = [a for a in args.arms.split(",") if a]  # "": HUP runs only
    for a in args.apps:
        if a not in APPS_ALL:
            ap.error("unknown app %r" % a)
    for a in args.arms + args.hup_arms.split(","):
        if a and a not in ARMS:
            ap.error("unknown arm %r" % a)
    args.sluice_bin = str(Path(args.sluice_bin).resolve())
    try:
        os.sched_setaffinity(0, {args.client_cpu})
    except OSError:
        pass
    tmp = Path(tempfile.mkdtemp(prefix="sluice-preload-"))
    print("server logs in %s" % tmp, flush=True)
    args.db = tmp / "djrest.sqlite3"
    if "django" in args.apps:
        make_db(args.db)
    doc = {"date": datetime.date.today().isoformat(),
           "machine": run.machine_info(), "sluice_commit": sluice_commit(),
           "runs": [], "hup": []}
    doc["machine"]["packages"].update(package_versions(
        ["python3-djangorestframework", "python3-pydantic", "gunicorn"]))
    for rep in range(args.repeat):
        k = rep % max(1, len(args.arms))
        order = args.arms[k:] + args.arms[:k]
        for app in args.apps:
            for arm in order:
                wd = tmp / ("%s-%s-%d" % (app, arm, rep))
                print("%s %s (repeat %d)..." % (app, arm, rep + 1),
                      flush=True)
                r = run_arm(arm, APPS_ALL[app], args, wd)
                r["repeat"] = rep
                doc["runs"].append(r)
                f = mem_figures(r, "mem_ready")
                g = mem_figures(r, "mem_loaded")
                print("  %s" % (r.get("skipped") or r.get("error") or
                                "workers+zygote PSS %.1f MiB ready, %.1f "
                                "loaded; %s" % (
                                    f["workers_zygote"],
                                    g["workers_zygote"] if g else -1,
                                    [b["booted_s"] for b in
                                     r.get("boot_ttin", [])])), flush=True)
        if args.hups:
            for app in args.apps:
                for arm in [a for a in args.hup_arms.split(",") if a]:
                    wd = tmp / ("hup-%s-%s-%d" % (app, arm, rep))
                    print("%s %s HUP x%d (repeat %d)..." % (
                        app, arm, args.hups, rep + 1), flush=True)
                    r = hup_arm(arm, APPS_ALL[app], args, wd)
                    r["repeat"] = rep
                    doc["hup"].append(r)
                    print("  %s" % (r.get("error") or "%d failed of %d" % (
                        r["failed"], r["ok"] + r["failed"])), flush=True)
    doc["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    a = vars(args).copy()
    a["db"] = str(args.db)
    doc["args"] = a
    dirs = {str(ROOT): "$REPO", str(tmp): "$LOGDIR"}
    if not args.sluice_bin.startswith(str(ROOT) + "/"):
        dirs[os.path.dirname(args.sluice_bin)] = "$SLUICE_DIR"
    if not str(out.resolve()).startswith(str(ROOT) + "/"):
        dirs[str(args.out)] = "$OUT"
    doc = report.scrub(doc, dirs)
    out.mkdir(parents=True, exist_ok=True)
    (out / ("%s.json" % args.name)).write_text(json.dumps(doc, indent=1)
                                               + "\n")
    text = markdown(doc)
    (out / ("%s.md" % args.name)).write_text(text)
    print(text)
    print("wrote %s.{md,json}" % (out / args.name))


if __name__ == "__main__":
    main()
