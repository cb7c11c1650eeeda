"""Turns the runs recorded by run.py into a summary, a Markdown table and a
PNG chart. No measuring here."""

import statistics

WRK_BOUND_PCT = 90.0  # wrk this busy on its CPU: the client may be the limit
DISTURBED_PCT = 10.0  # other processes took this much of the server's CPU
STOLEN_PCT = 10.0  # the hypervisor kept this much of a CPU from the machine


def _med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _errors(r):
    return sum((r.get("errors") or {}).values())


def _rps(v):
    """req/s for the table: whole numbers, but a tenth below 100 (64 MiB
    uploads run at a few per second)."""
    return "%.0f" % v if v >= 100 else "%.1f" % v


def one_line(r):
    """Progress line for one run."""
    if "error" in r:
        return "FAILED: " + r["error"]
    lat = r["latency_us"]
    s = "%8.1f req/s  %6.1f us/req  srv %3.0f%%  wrk %3.0f%%  p50/p99 %s" % (
        r["rps"], r["cpu_us_per_req"] or 0, r["server_cpu_pct"] or 0,
        r["wrk_cpu_pct"], "n/a" if r.get("pipeline", 1) > 1 else
        "%.2f/%.2f ms" % (lat["p50"] / 1000.0, lat["p99"] / 1000.0))
    flags = flags_of([r], conns=r["conns"])
    return s + ("  [" + "; ".join(flags) + "]" if flags else "")


def machine_us(r):
    """Busy time of every CPU during the measured run (user, system, irq,
    softirq: server, client and kernel) over the requests completed, or
    None for a record without per-CPU figures. Over loopback the kernel's
    TCP work lands on whichever CPU is running at the time, so this is the
    figure that does not move with it."""
    pct = r.get("cpu_pct")
    if not pct or not r.get("requests"):
        return None
    busy = sum(c["busy"] + c["irq"] for c in pct.values()) / 100.0
    return 1e6 * busy * r["wall_s"] / r["requests"]


def flags_of(runs, conns):
    """Human-readable problems over one arm's runs at one connection count."""
    flags = []
    total = {}
    for r in runs:
        for k, v in (r.get("errors") or {}).items():
            total[k] = total.get(k, 0) + v
    names = {"connect": "connect", "read": "read", "write": "write",
             "timeout": "timeout", "status": "non-2xx/3xx"}
    for k in ("connect", "read", "write", "timeout", "status"):
        if total.get(k):
            flags.append("%s %d" % (names[k], total[k]))
    starved = max((r.get("starved_conns", 0) for r in runs), default=0)
    slow = max((r.get("unaccepted_max", 0) for r in runs), default=0)
    if starved:
        flags.append("starved: %d/%d conns never accepted" % (starved, conns))
    elif slow:
        flags.append("slow accept: up to %d/%d conns queued" % (slow, conns))
    if any(r.get("server_died") for r in runs):
        flags.append("server died")
    wrk = _med([r.get("wrk_cpu_pct") for r in runs])
    if wrk is not None and wrk >= WRK_BOUND_PCT:
        flags.append("wrk %.0f%% busy: client-bound?" % wrk)
    other = [r.get("other_on_server_cpu_pct") for r in runs]
    stolen = [max(c["steal"] for c in r["cpu_pct"].values())
              if r.get("cpu_pct") else None for r in runs]
    for word, values, bound, what in (
            ("disturbed", other, DISTURBED_PCT,
             "others took up to %.0f%% of the server CPU"),
            ("stolen", stolen, STOLEN_PCT,
             "the hypervisor kept up to %.0f%% of a CPU")):
        hit = [v for v in values if v is not None and v >= bound]
        if hit:
            flags.append("%s in %d/%d run%s: %s" % (
                word, len(hit), len(runs), "s" if len(runs) > 1 else "",
                what % max(hit)))
    if any(r.get("server_tree_note") for r in runs):
        # e.g. a worker respawned mid-run: its CPU time before exiting is lost
        flags.append("process tree changed")
    return flags


def summarise(runs, arm_names, conns_list, baselines):
    rows = []
    base = {}  # (baseline arm, conns) -> median req/s
    for arm in arm_names:
        for conns in conns_list:
            mine = [r for r in runs if r["arm"] == arm and r["conns"] == conns]
            ok = [r for r in mine if "rps" in r]
            if not mine:
                continue
            row = {"arm": arm, "conns": conns, "n": len(ok),
                   "failed": [r["error"] for r in mine if "error" in r]}
            if ok:
                rps = [r["rps"] for r in ok]
                row.update(
                    rps_median=_med(rps), rps_min=min(rps), rps_max=max(rps),
                    cpu_us_per_req=_med([r["cpu_us_per_req"] for r in ok]),
                    cpu_us_min=min(r["cpu_us_per_req"] for r in ok),
                    cpu_us_max=max(r["cpu_us_per_req"] for r in ok),
                    server_cpu_pct=_med([r["server_cpu_pct"] for r in ok]),
                    machine_us_per_req=_med([machine_us(r) for r in ok]),
                    wrk_cpu_pct=_med([r["wrk_cpu_pct"] for r in ok]),
                    other_pct=_med([r.get("other_on_server_cpu_pct")
                                    for r in ok]),
                    p50_ms=_med([r["latency_us"]["p50"] for r in ok]) / 1000.0,
                    p99_ms=_med([r["latency_us"]["p99"] for r in ok]) / 1000.0,
                    errors=sum(_errors(r) for r in ok),
                    flags=flags_of(ok, conns),
                    mb_per_s=_med([r["bytes"] / r["duration_us"]
                                   for r in ok if r.get("duration_us")]),
                )
                if arm in baselines:
                    base[arm, conns] = row["rps_median"]
                    base[arm, conns, "cpu"] = row["cpu_us_per_req"]
            rows.append(row)
    for row in rows:
        row["ratio"] = {}
        row["cpu_ratio"] = {}
        for b in baselines:
            v = base.get((b, row["conns"]))
            if v and row.get("rps_median") is not None:
                row["ratio"][b] = row["rps_median"] / v
            v = base.get((b, row["conns"], "cpu"))
            if v and row.get("cpu_us_per_req") is not None:
                row["cpu_ratio"][b] = row["cpu_us_per_req"] / v
    return {"baselines": baselines, "rows": rows}


def scrub(obj, dirs):
    """OBJ (JSON-like) with every occurrence of the directories in DIRS
    ({path: "$NAME"}) in its strings replaced by their names, so that no
    absolute path of this machine reaches an output file."""
    if isinstance(obj, str):
        for d in sorted(dirs, key=len, reverse=True):
            obj = obj.replace(d, dirs[d])
        return obj
    if isinstance(obj, dict):
        return {k: scrub(v, dirs) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub(v, dirs) for v in obj]
    return obj


def _rel(text, root):
    return text.replace(root, "$REPO") if root else text


def markdown(doc):
    m = doc["meta"]
    arms = doc["arms"]
    summary = doc["summary"]
    root = m.get("root", "")
    out = []
    w = out.append
    w("# sluice benchmark: %s" % m["title"])
    w("")
    if m.get("label"):
        w("> %s" % m["label"])
        w("")
    ours_ran = any(arms.get(r["arm"], {}).get("ours") and r.get("n")
                   for r in summary["rows"])
    if not ours_ran:
        w("> **PEERS ONLY.** No sluice arm produced numbers in this run (see "
          "*Skipped*); this is not the project's table. Re-run once the "
          "binary exists.")
        w("")
    pk = m.get("packages", {})
    w("- Date: %s; commit %s" % (m["date"], m.get("git_commit") or "?"))
    w("- Machine: %s, %s CPUs, kernel %s, Debian %s; load average %s at the "
      "start, %s at the end (shared machine: expect noise)"
      % (m["cpu_model"], m["cpus"], m["kernel"], m["debian"],
         " ".join(m["loadavg_start"]), " ".join(m.get("loadavg_end", []))))
    w("- Pinning: each server with `taskset -c %d` (its whole process tree "
      "inherits it); wrk with `taskset -c %d`; the harness also on CPU %d"
      % (m["server_cpu"], m["client_cpu"], m["client_cpu"]))
    depth = m.get("pipeline", 1)
    w("- Load: wrk %s, `-t%d`, keep-alive (wrk's default), %d s measured "
      "after a %d s warm-up at the same connection count, on a fresh server "
      "per arm and repeat"
      % (pk.get("wrk", "?"), m["wrk_threads"], m["duration_s"], m["warmup_s"]))
    if depth > 1:
        w("- Pipeline depth %d: wrk writes %d requests at once on each "
          "connection and the next %d once all are answered (a generated "
          "Lua script, as in TechEmpower's plaintext test); req/s counts "
          "responses. wrk then times a whole batch, not each request, and "
          "its percentiles come out wrong: p99 is not shown"
          % (depth, depth, depth))
    else:
        w("- Pipeline depth 1: one request at a time on each connection")
    w("- Repeats: %d, interleaved (the arm order rotates each repeat); req/s "
      "is the median with min–max beside it" % m["repeat"])
    w("- CPU µs/req: utime+stime of the server's whole process tree "
      "(every process and thread, from /proc/PID/stat) sampled right before "
      "and right after the measured wrk run, divided by the requests wrk "
      "completed. *server CPU* is that time over the run's wall time (100 % = "
      "one full core); *others on its CPU*: what the server's CPU spent on "
      "anything else meanwhile (user+system+irq+softirq time from /proc/stat "
      "minus the server's own; a build running beside the benchmark shows up "
      "here); *wrk CPU*: wrk's own CPU time over wall time; *both CPUs "
      "µs/req*: all the machine's busy time (user, system, irq, softirq, on "
      "every CPU: server, client and kernel) over the requests completed. "
      "Over loopback the kernel's TCP work for one side often runs on the "
      "other side's CPU, so the server's own figure can rise when work moves "
      "to it; this one cannot hide it. All medians over repeats")
    bl = summary["baselines"]
    client = ("client" if any(a.get("client", "wrk") != "wrk"
                              for a in arms.values()) else "wrk")
    w("- Ratio column%s: req/s over %s at the same connection count"
      % ("s" if len(bl) > 1 else "", " and ".join("`%s`" % b for b in bl)))
    tls = bool(m.get("tls"))
    if tls:
        w("- TLS: every arm serves HTTPS (wrk speaks TLS itself: "
          "OpenSSL, no certificate check) with the same certificate, made "
          "by the harness for the run (ECDSA P-256, self-signed); *CPU "
          "vs X*: CPU µs/req over arm X's (issue 28's targets read from "
          "these: ≤ 1.15× nginx's keep-alive CPU per request); *MB/s*: "
          "response bytes (heads included) wrk read per second, in 10⁶ "
          "bytes; *TLS*: what the preflight negotiated")
    w("")
    cpu_cols = "".join(" CPU vs %s |" % b for b in bl) if tls else ""
    w("| arm | conns | pipeline | req/s | min–max | %s |%s%s CPU µs/req | "
      "server CPU | others on its CPU | %s CPU | both CPUs µs/req | "
      "p50 ms | p99 ms | errors / flags |"
      % (" | ".join("vs %s" % b for b in bl), cpu_cols,
         " MB/s |" if tls else "", client))
    w("|---|---:|---:|---:|---:|%s---:|---:|---:|---:|---:|---:|---:|---|"
      % ("---:|" * (len(bl) * (2 if tls else 1) + (1 if tls else 0))))
    for r in summary["rows"]:
        if not r.get("n"):
            w("| %s | %d | %d | – | – |%s – | – | – | – | – | – | – | – | "
              "⚠ failed: %s |"
              % (r["arm"], r["conns"], depth,
                 " – |" * (len(bl) * (2 if tls else 1) + (1 if tls else 0)),
                 "; ".join(r["failed"])[:120]))
            continue
        ratio = " | ".join("%.2f×" % r["ratio"][b] if b in r["ratio"] else "–"
                           for b in bl)
        if tls:
            cr = r.get("cpu_ratio") or {}
            ratio += "".join(" | %.2f×" % cr[b] if b in cr else " | –"
                             for b in bl)
            ratio += (" | %.1f" % r["mb_per_s"]
                      if r.get("mb_per_s") is not None else " | –")
        flags = list(r["flags"])
        pre = arms.get(r["arm"], {}).get("preflight") or {}
        if pre and not pre.get("keep_alive", True):
            flags.insert(0, "no keep-alive (preflight)")
        if r["failed"]:
            flags.append("%d run(s) failed" % len(r["failed"]))
        fl = ("⚠ " + "; ".join(flags)) if flags else "0"
        mark = arms.get(r["arm"], {}).get("mark")
        if mark:  # not a problem: what sets the row apart
            fl += "; *%s*" % mark
        other = ("%.0f %%" % r["other_pct"]
                 if r.get("other_pct") is not None else "?")
        p50 = "n/a" if depth > 1 else "%.2f" % r.get("p50_ms", float("nan"))
        p99 = "n/a" if depth > 1 else "%.2f" % r["p99_ms"]
        both = ("%.1f" % r["machine_us_per_req"]
                if r.get("machine_us_per_req") is not None else "?")
        w("| %s | %d | %d | %s | %s–%s | %s | %.1f | %.0f %% | %s | "
          "%.0f %% | %s | %s | %s | %s |" % (
              r["arm"], r["conns"], depth, _rps(r["rps_median"]),
              _rps(r["rps_min"]), _rps(r["rps_max"]), ratio,
              r["cpu_us_per_req"], r["server_cpu_pct"], other,
              r["wrk_cpu_pct"], both, p50, p99, fl))
    w("")
    w("Flags (⚠): wrk's socket errors (connect/read/write/timeout) and "
      "non-2xx/3xx responses, summed over repeats. *starved N/C*: N of the C "
      "connections sat unaccepted in the server's listen queue for most of "
      "the run (median of samples taken from /proc/net/tcp between 20 %% and "
      "90 %% of it); wrk counts no error for a request that is never "
      "answered, so without this flag such a server looks healthy. *slow "
      "accept*: some connections were still queued at 20 %% of the run. "
      "*disturbed*: other processes took ≥ %.0f %% of the server's CPU in "
      "some repeat. *stolen*: the hypervisor kept ≥ %.0f %% of a CPU from "
      "this virtual machine in some repeat (steal time, /proc/stat): that "
      "run's figures are the host's, not the server's. *client-bound?*: wrk "
      "used ≥ %.0f %% of its CPU."
      % (DISTURBED_PCT, STOLEN_PCT, WRK_BOUND_PCT))
    w("")
    out.extend(server_share(doc))
    w("## Commands")
    w("")
    w("Ports are picked free per server start (`PORT`); `$REPO` is the "
      "repository root, `$LOGDIR` the run's temporary directory (server "
      "logs, generated wrk scripts). Servers run with the caller's environment minus "
      "`PYTHON*` variables and with `PATH=/usr/sbin:/usr/bin:/sbin:/bin`.")
    w("")
    for name, a in arms.items():
        if "command" not in a:
            continue
        w("- **%s** (GET `%s`): %s" % (name, a["path"], a["note"]))
        w("  `%s`" % _rel(a["command"], root))
        if a.get("upload"):
            w("  — each request a %s of %d bytes%s" % (
                a.get("method", "POST"), a["upload"],
                ", sent by `bench/upload.py` (CONNS keep-alive connections, "
                "one thread each) instead of wrk"
                if a.get("client") == "upload" else
                " (wrk with a Lua script generated into `$LOGDIR`)"))
        pre = a.get("preflight")
        if pre:
            w("  — preflight: %d, keep-alive %s, Server: %s%s"
              % (pre.get("status", 0), "yes" if pre.get("keep_alive") else
                 "NO (%s)" % pre.get("keep_alive_note", "?"),
                 pre.get("server_header") or "–",
                 (", body sent by: %s" % pre["body_source"]
                  if pre.get("body_source") else "")
                 + (", TLS: %s" % pre["tls"] if pre.get("tls") else "")))
    w("- **wrk**: `%s`" % m["wrk_command"])
    w("")
    if doc["skipped"]:
        w("## Skipped")
        w("")
        for name, why in doc["skipped"].items():
            w("- **%s**: skipped: %s" % (name, _rel(why, root)))
        w("")
    w("## Versions")
    w("")
    w("- Debian packages: " + ", ".join("%s %s" % kv
                                        for kv in sorted(pk.items())))
    if m.get("sluice_bin"):
        w("- sluice binary: `%s`%s" % (_rel(m["sluice_bin"], root),
                                       (" (%s)" % m["sluice_version"])
                                       if m.get("sluice_version") else ""))
    w("")
    return "\n".join(out)


def server_share(doc):
    """Lines of the section that puts each arm with a `ref` (a framework
    app) beside its server's hello-world arm: what share of the framework
    request's CPU time the server's own hello world costs."""
    arms = doc["arms"]
    rows = {(r["arm"], r["conns"]): r for r in doc["summary"]["rows"]
            if r.get("n")}
    out = []
    for (name, conns), r in rows.items():
        ref = arms.get(name, {}).get("ref")
        h = rows.get((ref, conns)) if ref else None
        if h is None:
            continue
        if not out:
            out += ["## The server's share of a framework request", "",
                    "CPU µs per request of each framework arm beside the same "
                    "server's hello world at the same connection count. The "
                    "hello world's cost is about what the server spends on a "
                    "request (parsing, the call into Python, the response "
                    "out); the difference is the framework's. *server share* "
                    "= hello ÷ framework.", "",
                    "| arm | conns | CPU µs/req | hello arm | its CPU µs/req "
                    "| framework µs/req | server share | req/s vs hello |",
                    "|---|---:|---:|---|---:|---:|---:|---:|"]
        a, b = r["cpu_us_per_req"], h["cpu_us_per_req"]
        out.append("| %s | %d | %.1f | %s | %.1f | %.1f | %.0f %% | %.2f× |" % (
            name, conns, a, ref, b, a - b, 100.0 * b / a if a else 0,
            r["rps_median"] / h["rps_median"] if h["rps_median"] else 0))
    return out + [""] if out else []


def chart(doc, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    m = doc["meta"]
    rows = doc["summary"]["rows"]
    arms = [a for a in doc["arms"]]
    conns_list = m["conns"]
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(arms) + 2), 4.5))
    width = 0.8 / max(1, len(conns_list))
    depth = m.get("pipeline", 1)
    pipelined = ", pipeline %d" % depth if depth > 1 else ""
    colours = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"]
    ymax = max([r.get("rps_max", 0) for r in rows] + [1])
    # The upload suite's 64 MiB arms run at a few req/s beside 1 MiB echoes
    # at hundreds: a linear axis would hide them, so a log axis then.
    lows = [r["rps_min"] for r in rows if r.get("n") and r["rps_min"] > 0]
    log = bool(lows) and ymax / min(lows) > 50
    ybot = min(lows) / 2 if log else 0
    for i, conns in enumerate(conns_list):
        xs, ys, lo, hi, hatch = [], [], [], [], []
        for j, arm in enumerate(arms):
            row = next((r for r in rows if r["arm"] == arm
                        and r["conns"] == conns and r.get("n")), None)
            if row is None:
                continue
            xs.append(j + (i - (len(conns_list) - 1) / 2) * width)
            ys.append(row["rps_median"])
            lo.append(row["rps_median"] - row["rps_min"])
            hi.append(row["rps_max"] - row["rps_median"])
            hatch.append(bool(row["flags"]))
        bars = ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3,
                      label="%d conns%s" % (conns, pipelined),
                      color=colours[i % len(colours)])
        for bar, flagged, y, top in zip(bars, hatch, ys, hi):
            if flagged:
                bar.set_hatch("//")
                bar.set_edgecolor("black")
            ax.text(bar.get_x() + bar.get_width() / 2,
                    (y + top) * 1.1 if log else y + top + ymax * 0.01,
                    "%s%s" % (_rps(y), " ⚠" if flagged else ""),
                    ha="center", va="bottom", fontsize=7, rotation=90)
    for j, arm in enumerate(arms):
        if arm in doc["skipped"]:
            ax.text(j, ybot * 1.2 if log else ymax * 0.02, "skipped",
                    ha="center", va="bottom",
                    fontsize=8, rotation=90, color="grey")
    ax.set_xlim(-0.6, len(arms) - 0.4)
    ax.set_xticks(range(len(arms)))
    ax.set_xticklabels(arms, rotation=20, ha="right")
    ax.set_ylabel("requests / s (median; bars: min–max)%s"
                  % (", log scale" if log else ""))
    if log:
        ax.set_yscale("log")
        ax.set_ylim(ybot, ymax * 8)
    else:
        ax.set_ylim(0, ymax * 1.3)
    title = "%s — %d s × %d, server on CPU %d, wrk on CPU %d" % (
        m["title"], m["duration_s"], m["repeat"], m["server_cpu"],
        m["client_cpu"])

    if not any(doc["arms"].get(r["arm"], {}).get("ours") and r.get("n")
               for r in rows):
        title = "PEERS ONLY — " + title
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.text(0.01, 0.01, "%s  hatched ⚠ = flagged in the table" % m["date"],
             fontsize=7, color="grey")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ------------------------------------------------ the scripts' shared parts


def command_line(script, argv):
    """How a report was made: `/usr/bin/python3 bench/SCRIPT` and ARGV,
    with the output files' places left out (a path of this machine has no
    place in a committed report)."""
    import shlex
    out, hide = [], False
    for a in argv:
        if hide:
            out.append("FILE")
        elif a.startswith(("--json=", "--out=")):
            out.append(a.split("=")[0] + "=FILE")
        else:
            out.append(a)
        hide = a in ("--json", "--out")
    return shlex.join(["/usr/bin/python3", "bench/" + script] + out)


def add_report_args(ap, name, listing=True):
    """The options every report script takes: the CPUs, the binary, where
    the report (results/NAME.md) and its runs (NAME.json) go, a label,
    --list (when LISTING) and --render/--notes."""
    import os
    from pathlib import Path
    bench = Path(__file__).resolve().parent
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--sluice-bin",
                    default=os.environ.get("SLUICE_BIN", "./sluice"))
    ap.add_argument("--out", default=str(bench / "results" / (name + ".md")))
    ap.add_argument("--json", default="",
                    help="where the runs go (default $LOGDIR/%s.json)" % name)
    ap.add_argument("--label", default="")
    if listing:
        ap.add_argument("--list", action="store_true",
                        help="print the commands, run nothing")
    ap.add_argument("--render", metavar="JSON",
                    help="only rewrite --out from an earlier run's JSON")
    ap.add_argument("--notes", metavar="FILE",
                    help="with --render: FILE's Markdown as the notes")

