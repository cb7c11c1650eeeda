#!/usr/bin/python3
"""TLS handshakes per second and server CPU per handshake (issue 28).

    /usr/bin/python3 bench/tlshs.py [--duration S] [--repeat N]
                                    [--only sluice,nginx,uvicorn]
                                    [--keys ecdsa,rsa] [--modes full,resumed]

The tls suite's arms (suites.py: sluice, nginx and uvicorn over TLS, one
worker each), each started on CPU 0 with an ECDSA P-256 and with an RSA
2048 certificate made for the run, loaded from CPU 1 by bench/hsload.c
(built here into bench/.build/hsload): CONNS connections in flight, each a
new TCP connection, a handshake, one request with `Connection: close`,
the response read to the close. `full`: every handshake is a new session;
`resumed`: every one offers the session (ticket) of the first. The
server tree's CPU time is sampled at hsload's MEASURE and END lines, as
rate.py does. Results: bench/results/tls-handshake.{md,json,png}.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import rate  # noqa: E402
import report  # noqa: E402
import run  # noqa: E402
import workload  # noqa: E402
from suites import TLS  # noqa: E402

HSLOAD_SRC = BENCH / "hsload.c"
HSLOAD = BENCH / ".build" / "hsload"
CLIENT_BOUND_PCT = 90.0  # the client this busy: it may be the limit
SATURATED_PCT = 90.0  # the server below this: it waited on the client
DISTURBED_PCT = 10.0
KEYS = {"ecdsa": "ECDSA P-256", "rsa": "RSA 2048"}
MODES = ("full", "resumed")
DEFAULT_ARMS = ("sluice", "nginx", "uvicorn")
BASELINES = ("nginx", "uvicorn")


def build_hsload(dest=HSLOAD):
    dest = Path(dest)
    if dest.exists() and dest.stat().st_mtime >= HSLOAD_SRC.stat().st_mtime:
        return dest
    dest.parent.mkdir(exist_ok=True)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror",
                    "-o", str(dest), str(HSLOAD_SRC), "-lssl", "-lcrypto"],
                   check=True)
    return dest


def hsload_argv(port, path, conns, mode, duration, warmup, cpu):
    return [run.TASKSET, "-c", str(cpu), str(HSLOAD), "-p", str(port),
            "-P", path, "-c", str(conns), "-d", str(duration),
            "-w", str(warmup)] + (["-r"] if mode == "resumed" else [])


def measure(srv, arm, key, mode, args):
    r = rate.run_rateload(
        hsload_argv(srv.port, arm.path, args.conns, mode, args.duration,
                    args.warmup, args.client_cpu),
        root_pid=srv.proc.pid, server_cpu=args.server_cpu)
    r.update(arm=arm.name, key=key, mode=mode)
    if "error" in r:
        return r
    if not r.get("handshakes") or "server_cpu_s" not in r:
        r["error"] = "no handshake completed (errors %s)" % r.get("errors")
        return r
    r["cpu_us_per_hs"] = 1e6 * r["server_cpu_s"] / r["handshakes"]
    r["server_cpu_pct"] = 100.0 * r["server_cpu_s"] / r["harness_wall_s"]
    r["client_us_per_hs"] = 1e6 * r["client_cpu_s"] / r["handshakes"]
    r["resumed_pct"] = 100.0 * r["resumed"] / r["handshakes"]
    if not srv.alive():
        r["server_died"] = True
    return r


def _med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def flags_of(runs, mode):
    out = []
    errs = {}
    for r in runs:
        for k, v in (r.get("errors") or {}).items():
            errs[k] = errs.get(k, 0) + v
    errs = {k: v for k, v in errs.items() if v}
    if errs:
        out.append("errors " + ", ".join("%s %d" % kv
                                         for kv in sorted(errs.items())))
    client = _med([r.get("client_cpu_pct") for r in runs])
    server = _med([r.get("server_cpu_pct") for r in runs])
    # what the server's CPU did besides the server: others had it, so the
    # server did not wait on the client then
    taken = _med([(r.get("server_cpu_pct") or 0)
                  + (r.get("other_on_server_cpu_pct") or 0) for r in runs])
    if client is not None and client >= CLIENT_BOUND_PCT:
        out.append("client %.0f %% busy: client-bound" % client)
    elif taken is not None and taken < SATURATED_PCT:
        out.append("server %.0f %% busy: waited on the client" % server)
    res = min(r.get("resumed_pct", 0) for r in runs)
    if mode == "resumed" and res < 99.0:
        out.append("only %.0f %% resumed" % res)
    if mode == "full" and max(r.get("resumed_pct", 0) for r in runs) > 0:
        out.append("some resumed")
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


def summarise(runs, arms, keys, modes):
    rows, base = [], {}
    for key in keys:
        for mode in modes:
            for arm in arms:
                mine = [r for r in runs if (r["arm"], r["key"], r["mode"])
                        == (arm, key, mode)]
                if not mine:
                    continue
                ok = [r for r in mine if "cpu_us_per_hs" in r]
                row = {"arm": arm, "key": key, "mode": mode, "n": len(ok),
                       "failed": [r["error"] for r in mine if "error" in r]}
                if ok:
                    hs = [r["rate"] for r in ok]
                    cpu = [r["cpu_us_per_hs"] for r in ok]
                    row.update(
                        rate=_med(hs), rate_min=min(hs), rate_max=max(hs),
                        cpu_us=_med(cpu), cpu_us_min=min(cpu),
                        cpu_us_max=max(cpu),
                        server_cpu_pct=_med([r["server_cpu_pct"]
                                             for r in ok]),
                        client_cpu_pct=_med([r["client_cpu_pct"]
                                             for r in ok]),
                        client_us=_med([r["client_us_per_hs"] for r in ok]),
                        other_pct=_med([r.get("other_on_server_cpu_pct")
                                        for r in ok]),
                        resumed_pct=_med([r["resumed_pct"] for r in ok]),
                        p50_ms=_med([r["latency_us"]["p50"] for r in ok])
                        / 1000.0,
                        p99_ms=_med([r["latency_us"]["p99"] for r in ok])
                        / 1000.0,
                        flags=flags_of(ok, mode))
                    base[arm, key, mode] = (row["rate"], row["cpu_us"])
                rows.append(row)
    for row in rows:
        row["ratio"], row["cpu_ratio"] = {}, {}
        for b in BASELINES:
            v = base.get((b, row["key"], row["mode"]))
            if v and row.get("rate") is not None:
                row["ratio"][b] = row["rate"] / v[0]
                row["cpu_ratio"][b] = row["cpu_us"] / v[1]
    return {"baselines": list(BASELINES), "rows": rows}


def markdown(doc):
    m, arms, s = doc["meta"], doc["arms"], doc["summary"]
    out = []
    w = out.append
    w("# sluice benchmark: TLS handshakes, one worker")
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
    w("- Pinning: each server with `taskset -c %d`; the client "
      "(`bench/hsload.c`) and the harness with `taskset -c %d`"
      % (m["server_cpu"], m["client_cpu"]))
    w("- Load: %d connections in flight; each a new TCP connection, a TLS "
      "handshake, one `GET %s` with `Connection: close`, the response read "
      "to the server's close, the client's close_notify. *full*: no session "
      "offered; *resumed*: every connection offers the session (ticket) of "
      "the first one. %d s measured after a %d s warm-up, on a fresh server "
      "per arm, key and repeat (both modes on the same server)"
      % (m["conns"], m["path"], m["duration_s"], m["warmup_s"]))
    w("- Keys: a self-signed certificate of each kind, made by the harness "
      "for the run (`openssl req`); the TLS version and suite are what "
      "client and server agree on by default (the preflight's are under "
      "*Commands*)")
    w("- Repeats: %d, interleaved (the order of arm and key rotates each "
      "repeat); figures are medians, min–max beside the rate and the CPU"
      % m["repeat"])
    w("- *server CPU µs/hs*: utime+stime of the server's whole process tree "
      "between hsload's MEASURE and END, over the handshakes completed in "
      "that window (each with its one request); *CPU vs X*: that over arm "
      "X's for the same key and mode (issue 28's target: ≤ 1.1× nginx's "
      "for a full handshake); *server CPU*, *client CPU*: their CPU time "
      "over wall time; *client CPU µs/hs*: hsload's own. A handshake costs "
      "the client about as much as the server (it checks the server's "
      "signature and does its half of the key exchange), so one client CPU "
      "may not drive one server CPU to 100 %: then the handshakes/s "
      "measure the client (flagged), and CPU µs/hs is the figure to read")
    w("")
    bl = s["baselines"]
    w("| arm | key | mode | handshakes/s | min–max | %s | server CPU µs/hs "
      "| min–max |%s server CPU | client CPU | client CPU µs/hs | others on "
      "its CPU | resumed | p50 ms | p99 ms | flags |"
      % (" | ".join("vs %s" % b for b in bl),
         "".join(" CPU vs %s |" % b for b in bl)))
    w("|---|---|---|---:|---:|%s---:|---:|%s---:|---:|---:|---:|---:|---:|"
      "---:|---|" % ("---:|" * len(bl), "---:|" * len(bl)))
    for r in s["rows"]:
        if not r.get("n"):
            w("| %s | %s | %s | – | – |%s – | – |%s – | – | – | – | – | – | "
              "– | ⚠ failed: %s |" % (r["arm"], KEYS[r["key"]], r["mode"],
                                      " – |" * len(bl), " – |" * len(bl),
                                      "; ".join(r["failed"])[:120]))
            continue
        ratio = " | ".join("%.2f×" % r["ratio"][b] if b in r["ratio"] else "–"
                           for b in bl)
        cr = "".join(" %.2f× |" % r["cpu_ratio"][b]
                     if b in r["cpu_ratio"] else " – |" for b in bl)
        fl = "⚠ " + "; ".join(r["flags"]) if r["flags"] else "0"
        if r["failed"]:
            fl += "; %d run(s) failed" % len(r["failed"])
        w("| %s | %s | %s | %.0f | %.0f–%.0f | %s | %.0f | %.0f–%.0f |%s "
          "%.0f %% | %.0f %% | %.0f | %s | %.0f %% | %.2f | %.2f | %s |" % (
              r["arm"], KEYS[r["key"]], r["mode"], r["rate"], r["rate_min"],
              r["rate_max"], ratio, r["cpu_us"], r["cpu_us_min"],
              r["cpu_us_max"], cr, r["server_cpu_pct"], r["client_cpu_pct"],
              r["client_us"], "%.0f %%" % r["other_pct"]
              if r.get("other_pct") is not None else "?", r["resumed_pct"],
              r["p50_ms"], r["p99_ms"], fl))
    w("")
    w("Flags (⚠): hsload's errors (connect, TLS, a response other than 2xx, "
      "5 s without progress), summed over repeats; *client-bound*: hsload "
      "used ≥ %.0f %% of its CPU; *waited on the client*: the server and "
      "other processes together used less than %.0f %% of the server's CPU; *only N %% resumed*: the server did not "
      "take the offered session every time; *disturbed*: other processes "
      "took ≥ %.0f %% of the server's CPU in some repeat."
      % (CLIENT_BOUND_PCT, SATURATED_PCT, DISTURBED_PCT))
    w("")
    w("## Commands")
    w("")
    w("`PORT` is picked free per server start; `$REPO` is the repository "
      "root, `$LOGDIR` the run's temporary directory (the certificates, "
      "`KEY.crt`/`KEY.key`).")
    w("")
    for name, a in arms.items():
        if "command" not in a:
            continue
        w("- **%s**: %s" % (name, a["note"]))
        w("  `%s`" % a["command"])
        for key, pre in sorted((a.get("preflight") or {}).items()):
            w("  — preflight (%s): %d, %s" % (KEYS[key], pre["status"],
                                               pre.get("tls", "?")))
    w("- **client**: `%s`" % m["client_command"])
    w("")
    if doc["skipped"]:
        w("## Skipped")
        w("")
        for name, why in doc["skipped"].items():
            w("- **%s**: %s" % (name, why))
        w("")
    pk = m.get("packages", {})
    w("## Versions")
    w("")
    w("- Debian packages: " + ", ".join("%s %s" % kv
                                        for kv in sorted(pk.items())))
    if m.get("sluice_version"):
        w("- sluice: %s" % m["sluice_version"])
    w("")
    return "\n".join(out)


def chart(doc, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in doc["summary"]["rows"] if r.get("n")]
    groups = []
    for r in rows:
        g = (r["key"], r["mode"])
        if g not in groups:
            groups.append(g)
    arms = [a for a in doc["arms"] if any(r["arm"] == a for r in rows)]
    if not groups or not arms:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(arms)
    colours = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"]
    for ax, (field, lo, hi, label) in zip(axes, (
            ("rate", "rate_min", "rate_max", "handshakes / s"),
            ("cpu_us", "cpu_us_min", "cpu_us_max",
             "server CPU µs per handshake"))):
        for i, arm in enumerate(arms):
            xs, ys, el, eh, hatch = [], [], [], [], []
            for j, g in enumerate(groups):
                r = next((r for r in rows if r["arm"] == arm
                          and (r["key"], r["mode"]) == g), None)
                if r is None:
                    continue
                xs.append(j + (i - (len(arms) - 1) / 2) * width)
                ys.append(r[field])
                el.append(r[field] - r[lo])
                eh.append(r[hi] - r[field])
                hatch.append(bool(r["flags"]))
            bars = ax.bar(xs, ys, width, yerr=[el, eh], capsize=3,
                          label=arm, color=colours[i % len(colours)])
            for bar, flagged, y in zip(bars, hatch, ys):
                if flagged:
                    bar.set_hatch("//")
                    bar.set_edgecolor("black")
                ax.text(bar.get_x() + bar.get_width() / 2, y, "%.0f" % y,
                        ha="center", va="bottom", fontsize=7, rotation=90)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(["%s\n%s" % (KEYS[k], md) for k, md in groups])
        ax.set_ylabel(label + " (median; bars: min–max)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    m = doc["meta"]
    fig.suptitle("TLS handshakes, one worker — %d s × %d, server on CPU %d, "
                 "hsload on CPU %d" % (m["duration_s"], m["repeat"],
                                       m["server_cpu"], m["client_cpu"]),
                 fontsize=10)
    fig.text(0.01, 0.01, "%s  hatched = flagged in the table" % m["date"],
             fontsize=7, color="grey")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(doc, base):
    with open(str(base) + ".json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    Path(str(base) + ".md").write_text(markdown(doc))
    png = chart(doc, str(base) + ".png")
    print("wrote %s.md, %s.json%s" % (base, base, ", " + png if png else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default=",".join(DEFAULT_ARMS),
                    help="arms of the tls suite (default: %s)"
                         % ",".join(DEFAULT_ARMS))
    ap.add_argument("--keys", default="ecdsa,rsa")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--conns", type=int, default=8,
                    help="connections in flight (default 8)")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--sluice-bin",
                    default=os.environ.get("SLUICE_BIN", "./sluice"))
    ap.add_argument("--out", default=str(BENCH / "results"))
    ap.add_argument("--label", default="")
    ap.add_argument("--render", metavar="JSON",
                    help="only rewrite the .md and .png beside a JSON")
    args = ap.parse_args()
    if args.render:
        base = args.render[:-5] if args.render.endswith(".json") \
            else args.render
        with open(base + ".json") as f:
            doc = json.load(f)
        m = doc["meta"]  # the table's figures, from the runs again
        doc["summary"] = summarise(doc["runs"], list(doc["arms"]),
                                   m["keys"], m["modes"])
        Path(base + ".md").write_text(markdown(doc))
        chart(doc, base + ".png")
        return 0

    byname = {a.name: a for a in TLS.arms}
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    bad = [n for n in names if n not in byname]
    if bad:
        ap.error("unknown arm(s) %s; the tls suite has: %s"
                 % (",".join(bad), ", ".join(byname)))
    keys = [k.strip() for k in args.keys.split(",") if k.strip()]
    modes = [k.strip() for k in args.modes.split(",") if k.strip()]
    if any(k not in KEYS for k in keys) or any(k not in MODES for k in modes):
        ap.error("--keys takes ecdsa,rsa; --modes full,resumed")
    build_hsload()
    ctx_base = {"apps": str(run.APPS), "root": str(run.ROOT),
                "sluice": run.sluice_bin(args), "sluice_before": ""}
    skipped, arms = {}, []
    for n in names:
        need = run.expand(byname[n].requires or "", ctx_base)
        if need and not os.access(need, os.X_OK):
            skipped[n] = "binary not found: %s" % need
        else:
            arms.append(byname[n])
    os.sched_setaffinity(0, {args.client_cpu})
    logdir = tempfile.mkdtemp(prefix="sluice-tlshs-")
    print("server logs: %s" % logdir, flush=True)
    certs = workload.tls_certs(logdir, keys)
    meta = run.machine_info()
    meta.update({
        "suite": "tls-handshake", "label": args.label,
        "date": datetime.datetime.now(datetime.timezone.utc)
        .strftime("%Y-%m-%d %H:%M:%S UTC"),
        "duration_s": args.duration, "warmup_s": args.warmup,
        "repeat": args.repeat, "conns": args.conns, "path": "/",
        "keys": keys, "modes": modes, "server_cpu": args.server_cpu,
        "client_cpu": args.client_cpu, "root": str(run.ROOT),
        "openssl": subprocess.run(["/usr/bin/openssl", "version"],
                                  capture_output=True,
                                  text=True).stdout.strip(),
        "git_commit": subprocess.run(
            ["git", "-C", str(run.ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True).stdout.strip(),
        "client_command": " ".join(
            hsload_argv("PORT", "/", args.conns, "full", args.duration,
                        args.warmup, args.client_cpu)) + " [-r: resumed]",
    })
    try:
        meta["sluice_version"] = subprocess.run(
            [ctx_base["sluice"], "--version"], capture_output=True,
            text=True, timeout=10).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    arm_info = {a.name: {"note": a.note} for a in arms}
    runs, errors = [], {}
    combos = [(a, k) for a in arms for k in keys]
    try:
        for rep in range(args.repeat):
            k = rep % len(combos) if combos else 0
            for arm, key in combos[k:] + combos[:k]:
                ctx = dict(ctx_base, port=run.free_port(),
                           certfile=certs[key][0], keyfile=certs[key][1])
                srv = run.Server(arm, ctx, args.server_cpu, logdir,
                                 "%s-%s-%d" % (arm.name, key, rep + 1))
                arm_info[arm.name]["command"] = srv.command_line().replace(
                    "127.0.0.1:%d" % ctx["port"], "127.0.0.1:PORT").replace(
                    "--port %d" % ctx["port"], "--port PORT").replace(
                    certs[key][0], "$LOGDIR/KEY.crt").replace(
                    certs[key][1], "$LOGDIR/KEY.key")
                try:
                    srv.start()
                    pre = srv.preflight()
                    arm_info[arm.name].setdefault("preflight", {})[key] = pre
                    for mode in modes:
                        if not srv.alive():
                            raise run.Skip("server exited: %s"
                                           % srv.log_tail())
                        r = measure(srv, arm, key, mode, args)
                        r["rep"] = rep + 1
                        runs.append(r)
                        print("rep %d %-10s %-5s %-7s %s" % (
                            rep + 1, arm.name, key, mode,
                            "FAILED: " + r["error"] if "error" in r else
                            "%7.0f hs/s  %6.0f us/hs  srv %3.0f%%  "
                            "client %3.0f%% (%4.0f us/hs)  resumed %3.0f%%"
                            % (r["rate"], r["cpu_us_per_hs"],
                               r["server_cpu_pct"], r["client_cpu_pct"],
                               r["client_us_per_hs"], r["resumed_pct"])),
                            flush=True)
                except run.Skip as e:
                    errors.setdefault(arm.name, []).append(str(e))
                    print("rep %d %-10s %-5s skipped: %s"
                          % (rep + 1, arm.name, key, e), flush=True)
                finally:
                    srv.stop()
    except KeyboardInterrupt:
        print("interrupted; no report written", file=sys.stderr)
        return 130
    for name, errs in errors.items():
        if not any(r["arm"] == name and "rate" in r for r in runs):
            skipped[name] = errs[0]
    meta["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    doc = {"meta": meta, "arms": arm_info, "skipped": skipped, "runs": runs,
           "summary": summarise(runs, [a.name for a in arms], keys, modes)}
    places = {str(run.ROOT): "$REPO", logdir: "$LOGDIR"}
    after = Path(ctx_base["sluice"]).resolve().parent
    if not str(after).startswith(str(run.ROOT)):
        places[str(after)] = "$AFTER"
    doc = report.scrub(doc, places)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write(doc, out / "tls-handshake")
    return 0


if __name__ == "__main__":
    sys.exit(main())
