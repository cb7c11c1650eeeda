#!/usr/bin/python3
"""Failed requests per rolling restart: sluice beside gunicorn (a report,
not a test).

    /usr/bin/python3 bench/reload.py [--hups 5] [--conns 64]
                                     [--only sluice,gunicorn]

Each server runs two workers of tests/apps/drain_app.py (its /slow route
sleeps a few ms, so requests are in flight whenever a signal lands) and
gets the load of tests/e2e/test_drain.py's rolling-restart test
(tests/e2e/helpers.py's Load): CONNS threads, half on keep-alive
connections and half on a fresh connection per request, paced, every
failure counted (reset, EOF before a complete response, timeout, non-200;
refused connections apart). While it runs, the supervisor (sluice) or the
arbiter (gunicorn -k gthread) gets SIGHUP HUPS times; after each, the
harness waits until every worker pid has been replaced and the new workers
have answered --settle /pid requests, then sends the next.

Failures are charged to the restart in whose window (its HUP up to the next
HUP, or the end of the load) they happened. Results: a table on stdout and
bench/results/reload.md, where the repository is $REPO and the run's
temporary directory $LOGDIR.
"""

import argparse
import datetime
import os
import platform
import re
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
E2E = ROOT / "tests" / "e2e"
APPS = ROOT / "tests" / "apps"
sys.path.insert(0, str(E2E))

import helpers  # noqa: E402
import report  # noqa: E402

APP = "drain_app:app"
PATHS = ("/pid", "/pid", "/hello", "/slow?t=0.005")


BOOTING = re.compile(r"Booting worker (?:\d+ )?with pid:? (\d+)")


def descendants(pid):
    """Every live descendant of PID."""
    out, todo = [], [pid]
    while todo:
        kids = helpers.children_of(todo.pop())
        out += kids
        todo += kids
    return out


def worker_pids(server):
    """The live workers of SERVER: the descendants of its supervisor (or
    arbiter) that its error log names in a "Booting worker" line (sluice
    and gunicorn both log one per worker), so that a zygote (sluice
    --preload), whether it is the workers' parent or their sibling, is
    not taken for a worker. Without such a line, the children of the
    supervisor."""
    tree = descendants(server.pid)
    logged = {int(p) for p in BOOTING.findall(server.error_log_text())}
    mine = sorted(p for p in tree if p in logged)
    return mine if logged else helpers.children_of(server.pid)


def sluice_server(workdir, binary, workers, preload=False):
    return helpers.Server(workdir, APP, workers=workers, ready_path="/hello",
                          binary=binary,
                          args=["--preload"] if preload else [])


class TimedLoad(helpers.Load):
    """helpers.Load that also keeps, for every request, the time it ended
    and how long it took from its first byte sent to the last byte of its
    answer (or its failure); a new connection's connect() is not in it."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.latencies = []  # (monotonic end, seconds)
        self._lat_lock = threading.Lock()

    def _exchange(self, conn, req, keep, reused):
        t = time.monotonic()
        try:
            return super()._exchange(conn, req, keep, reused)
        finally:
            now = time.monotonic()
            with self._lat_lock:
                self.latencies.append((now, now - t))

    def percentiles(self, lo=None, hi=None, windows=None):
        """(count, p50, p99, max) in ms of the requests that ended between
        LO and HI (seconds since t0), or inside any (lo, hi) of WINDOWS."""
        with self._lat_lock:
            lat = list(self.latencies)
        if windows is None:
            windows = [(lo if lo is not None else -1e9,
                        hi if hi is not None else 1e9)]
        xs = sorted(d for t, d in lat
                    if any(a <= t - self.t0 < b for a, b in windows))
        if not xs:
            return 0, None, None, None

        def pct(q):
            return 1000.0 * xs[min(len(xs) - 1, int(q * len(xs)))]
        return len(xs), pct(0.50), pct(0.99), 1000.0 * xs[-1]


class GunicornServer(helpers.Server):
    """gunicorn -k gthread, as close to the sluice arm as its options go."""

    def __init__(self, workdir, workers):
        super().__init__(workdir, APP, workers=workers, ready_path="/hello")

    def command(self):
        return ["/usr/bin/gunicorn", "-k", "gthread",
                "-w", str(self.workers), "--threads", "1",
                "-b", self.binds[0], "--pythonpath", str(APPS),
                "--error-logfile", str(self.error_log), APP]

    def describe(self):
        return "gunicorn[%s workers=%d]" % (self.app, self.workers)


def run_arm(name, server, args, paths=PATHS):
    """Start SERVER, load it with PATHS (Req objects or /pid-like
    targets), HUP it ARGS.hups times; a result dict."""
    server.start()
    reloads = []
    try:
        n = server.workers
        pids = set(helpers.wait_until(
            lambda: len(worker_pids(server)) == n and worker_pids(server),
            30, "%d workers" % n))
        with TimedLoad(server, paths, conns=args.conns,
                       keep_alive="mixed", order="random",
                       pace=(0.01, 0.03), duration=3600) as load:
            load.wait_answers(pids, args.settle, timeout=30)
            for i in range(args.hups):
                t_hup = load.now()
                load.event("HUP %d" % (i + 1))
                os.kill(server.pid, signal.SIGHUP)

                def replaced(old=pids):
                    now = set(worker_pids(server))
                    return len(now) == n and not now & old and now
                new = helpers.wait_until(replaced, 60,
                                         "every worker of %s replaced"
                                         % sorted(pids))
                t_new = load.now()
                load.wait_answers(new, args.settle, timeout=30)
                reloads.append({"hup": t_hup, "replaced": t_new - t_hup,
                                "old": sorted(pids), "new": sorted(new)})
                pids = new
            t_end = load.now()
    finally:
        problems = server.stop()
    fails = load.failed(allow={"refused"})
    windows = [r["hup"] for r in reloads] + [t_end + 1]
    for i, r in enumerate(reloads):
        mine = [f for f in fails
                if windows[i] <= f.t - load.t0 < windows[i + 1]]
        r["failed"] = len(mine)
        r["kinds"] = dict(Counter(f.kind for f in mine))
    before = [f for f in fails if f.t - load.t0 < windows[0]]
    steady = load.percentiles(0, windows[0])
    during = load.percentiles(windows=[(r["hup"], r["hup"] + r["replaced"])
                                       for r in reloads])
    win = getattr(args, "window", 5.0)
    fixed = load.percentiles(windows=[(r["hup"], r["hup"] + win)
                                      for r in reloads])
    whole = load.percentiles()
    return {
        "name": name,
        "command": " ".join(server.command()),
        "reloads": reloads,
        "before": len(before),
        "ok": load.count("ok"),
        "failed": len(fails),
        "kinds": dict(Counter(f.kind for f in fails)),
        "refused": load.count("refused"),
        "idle_closed": load.count("idle-closed-by-server"),
        "told_to_close": load.count("told-to-close"),
        "seconds": t_end,
        "latency_ms": {"before_first_hup": steady, "hup_to_replaced": during,
                       "hup_window": fixed, "window_s": win, "all": whole},
        "problems": problems,
        "examples": [(f.t - load.t0, f.kind, f.target, f.reused, f.detail)
                     for f in fails[:10]],
        "log": str(server.error_log),
    }


def lat_text(p):
    n, p50, p99, mx = p
    if not n:
        return "n/a"
    return "%.1f / %.1f / %.1f (%d requests)" % (p50, p99, mx, n)


def kinds_text(kinds):
    return ", ".join("%s %d" % kv for kv in sorted(kinds.items())) or "-"


def reload_report(results, args):
    lines = []
    names = [r["name"] for r in results]
    lines.append("# Failed requests per rolling restart (HUP)")
    lines.append("")
    lines.append("%s, %s, %d CPUs. %d workers each, app `%s` "
                 "(paths %s), %d load connections (half keep-alive, half a "
                 "fresh connection per request), %d HUPs; the next HUP once "
                 "every worker pid was replaced and the new ones had "
                 "answered %d `/pid` requests." % (
                     datetime.date.today().isoformat(), platform.node(),
                     os.cpu_count(), args.workers, APP, ", ".join(PATHS),
                     args.conns, args.hups, args.settle))
    lines.append("")
    head = "| reload | " + " | ".join(
        "%s failed (kinds) | %s s to replace" % (n, n) for n in names) + " |"
    lines.append(head)
    lines.append("|" + "---|" * (1 + 2 * len(names)))
    for i in range(args.hups):
        cells = []
        for r in results:
            rl = r["reloads"][i] if i < len(r["reloads"]) else None
            if rl is None:
                cells += ["n/a", "n/a"]
            else:
                cells += ["%d (%s)" % (rl["failed"], kinds_text(rl["kinds"])),
                          "%.2f" % rl["replaced"]]
        lines.append("| %d | %s |" % (i + 1, " | ".join(cells)))
    lines.append("")
    lines.append("| | " + " | ".join(names) + " |")
    lines.append("|" + "---|" * (1 + len(names)))
    rows = [
        ("requests answered 200", lambda r: "%d" % r["ok"]),
        ("failed, all", lambda r: "%d (%s)" % (r["failed"],
                                               kinds_text(r["kinds"]))),
        ("failed per reload", lambda r: "%.1f" % (r["failed"] /
                                                   max(1, len(r["reloads"])))),
        ("failed before the first HUP", lambda r: "%d" % r["before"]),
        ("connections refused", lambda r: "%d" % r["refused"]),
        ("idle keep-alive closed by the server",
         lambda r: "%d" % r["idle_closed"]),
        ("responses with Connection: close (keep-alive side)",
         lambda r: "%d" % r["told_to_close"]),
        ("load seconds", lambda r: "%.1f" % r["seconds"]),
        ("p50 / p99 / max ms before the first HUP",
         lambda r: lat_text(r["latency_ms"]["before_first_hup"])),
        ("p50 / p99 / max ms from each HUP until every worker was replaced",
         lambda r: lat_text(r["latency_ms"]["hup_to_replaced"])),
        ("p50 / p99 / max ms in the %.0f s after each HUP" % args.window,
         lambda r: lat_text(r["latency_ms"]["hup_window"])),
    ]
    for label, fn in rows:
        lines.append("| %s | %s |" % (label, " | ".join(fn(r)
                                                      for r in results)))
    lines.append("")
    lines.append("Kinds: *reset* ECONNRESET while waiting for the response "
                 "(the server closed the connection with the request unread); "
                 "*eof* the connection closed before a complete response; "
                 "*timeout*, *status* (not 200), *body* (not a pid from /pid), "
                 "*connect*, *idle-reset* "
                 "(an idle keep-alive connection reset).")
    lines.append("")
    for r in results:
        lines.append("- `%s`" % r["command"])
        if r["problems"]:
            lines.append("  - stopping: %s" % "; ".join(r["problems"]))
        for t, kind, path, reused, detail in r["examples"]:
            lines.append("  - t=%.3fs %s %s (%s connection): %s" % (
                t, kind, path, "reused" if reused else "new", detail))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hups", type=int, default=5)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--settle", type=int, default=1000,
                    help="/pid answers from the new workers before the "
                    "next HUP [1000]")
    ap.add_argument("--window", type=float, default=5.0,
                    help="latency also over this many seconds after each "
                    "HUP, the same span for every server [5]")
    ap.add_argument("--only", default="sluice,gunicorn",
                    help="sluice, sluice-preload (--preload), gunicorn")
    ap.add_argument("--sluice-bin",
                    default=os.environ.get("SLUICE_BIN", str(ROOT / "sluice")))
    ap.add_argument("--out", default=str(BENCH / "results"))
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="sluice-reload-"))
    print("server logs in %s" % tmp, flush=True)
    results = []
    for name in args.only.split(","):
        if name in ("sluice", "sluice-preload"):
            srv = sluice_server(tmp / name, args.sluice_bin, args.workers,
                                preload=name == "sluice-preload")
        elif name == "gunicorn":
            srv = GunicornServer(tmp / name, args.workers)
        else:
            ap.error("unknown server %r" % name)
        print("%s: %s" % (name, " ".join(srv.command())), flush=True)
        res = run_arm(name, srv, args)
        print("%s: %d failed of %d in %.1fs (%s)" % (
            name, res["failed"], res["ok"] + res["failed"], res["seconds"],
            kinds_text(res["kinds"])), flush=True)
        results.append(res)
    text = report.scrub(reload_report(results, args),
                        {str(ROOT): "$REPO", str(tmp): "$LOGDIR"})
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "reload.md").write_text(text)
    print("wrote %s" % (out / "reload.md"))


if __name__ == "__main__":
    main()
