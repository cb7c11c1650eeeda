#!/usr/bin/python3
"""Issue 28's TLS targets, read from one run's four reports.

    /usr/bin/python3 bench/tls28.py [--dir bench/results] [--label TEXT]

Reads DIR/tls.json, tls-pipeline16.json, tls-file.json (bench/run.py
--suite tls, --suite tls --pipeline 16, --suite tls-file) and
tls-handshake.json (bench/tlshs.py) and writes DIR/tls-28.md: each target
with the figures it is judged on. A report that is missing is named as
such. No measuring here.
"""

import argparse
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parent
SLUICE_HELLO = ("sluice", "sluice-inline", "sluice-asgi")
HS_TARGET = 1.10  # CPU per full handshake over nginx's
KA_TARGET = 1.15  # keep-alive CPU per request over nginx's return 200
RPS_TARGET = 3.0  # requests per second over uvicorn's


def load(d, name):
    try:
        with open(Path(d) / (name + ".json")) as f:
            return json.load(f)
    except OSError:
        return None


def verdict(ok):
    return "meets" if ok else "**misses**"


def flags(row):
    return ("⚠ " + "; ".join(row["flags"])) if row.get("flags") else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(BENCH / "results"))
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    docs = {n: load(args.dir, n) for n in
            ("tls", "tls-pipeline16", "tls-file", "tls-handshake")}
    out = []
    w = out.append
    w("# sluice over TLS beside nginx and uvicorn (issue 28)")
    w("")
    if args.label:
        w("> %s" % args.label)
        w("")
    w("Read from the reports of one run, each with its own details, "
      "commands and flags: %s. Every server has one worker on CPU 0; the "
      "client is on CPU 1. All figures are medians over the repeats."
      % ", ".join("[`%s.md`](%s.md)%s" % (n, n, "" if d else " (missing)")
                  for n, d in docs.items()))
    w("")
    for n, d in docs.items():
        if d:
            m = d["meta"]
            w("- `%s`: %s, commit %s, %d × %d s, load average %s → %s"
              % (n, m["date"], m.get("git_commit", "?"), m["repeat"],
                 m["duration_s"], " ".join(m["loadavg_start"]),
                 " ".join(m.get("loadavg_end", []))))
    w("")

    hs = docs["tls-handshake"]
    w("## CPU per full handshake ≤ %.2f× nginx's" % HS_TARGET)
    w("")
    if hs:
        w("| arm | key | mode | server CPU µs/hs | nginx's | ratio | target "
          "| handshakes/s | vs nginx | flags |")
        w("|---|---|---|---:|---:|---:|---|---:|---:|---|")
        rows = hs["summary"]["rows"]
        for r in rows:
            if not r.get("n") or r["arm"] == "nginx":
                continue
            base = next((b for b in rows if b["arm"] == "nginx" and
                         b["key"] == r["key"] and b["mode"] == r["mode"]
                         and b.get("n")), None)
            if base is None:
                continue
            ratio = r["cpu_us"] / base["cpu_us"]
            target = (verdict(ratio <= HS_TARGET)
                      if r["mode"] == "full" and r["arm"].startswith("sluice")
                      else "–")
            w("| %s | %s | %s | %.0f | %.0f | %.2f× | %s | %.0f | %.2f× | "
              "%s |" % (r["arm"], r["key"], r["mode"], r["cpu_us"],
                        base["cpu_us"], ratio, target, r["rate"],
                        r["rate"] / base["rate"], flags(r)))
    else:
        w("No `tls-handshake.json`.")
    w("")

    w("## Keep-alive CPU per request ≤ %.2f× nginx's `return 200`, and "
      "≥ %.0f× uvicorn's requests per second" % (KA_TARGET, RPS_TARGET))
    w("")
    w("| arm | conns | pipeline | CPU µs/req | nginx's | CPU vs nginx | "
      "target | req/s | uvicorn's | vs uvicorn | target | flags |")
    w("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---|")
    for name in ("tls", "tls-pipeline16"):
        d = docs[name]
        if not d:
            continue
        depth = d["meta"].get("pipeline", 1)
        rows = {(r["arm"], r["conns"]): r for r in d["summary"]["rows"]
                if r.get("n")}
        for (arm, conns), r in rows.items():
            if arm not in SLUICE_HELLO:
                continue
            ng, uv = rows.get(("nginx", conns)), rows.get(("uvicorn", conns))
            cpu = r["cpu_us_per_req"] / ng["cpu_us_per_req"] if ng else None
            rps = r["rps_median"] / uv["rps_median"] if uv else None
            w("| %s | %d | %d | %.1f | %s | %s | %s | %.0f | %s | %s | %s | "
              "%s |" % (
                  arm, conns, depth, r["cpu_us_per_req"],
                  "%.1f" % ng["cpu_us_per_req"] if ng else "–",
                  "%.2f×" % cpu if cpu else "–",
                  verdict(cpu <= KA_TARGET) if cpu else "–",
                  r["rps_median"], "%.0f" % uv["rps_median"] if uv else "–",
                  "%.2f×" % rps if rps else "–",
                  verdict(rps >= RPS_TARGET) if rps else "–", flags(r)))
    w("")
    w("wrk on one CPU is a ceiling for every arm here (`bench/README.md`, "
      "*Caveats*): where nginx's row and sluice's are both client-bound, "
      "the req/s ratio over uvicorn is wrk's, and CPU µs/req is the figure "
      "to read.")
    w("")

    f = docs["tls-file"]
    w("## A 1 MiB file over HTTPS")
    w("")
    if f:
        w("| arm | conns | req/s | MB/s | CPU µs/req | CPU vs nginx-file | "
          "req/s vs uvicorn-file | flags |")
        w("|---|---:|---:|---:|---:|---:|---:|---|")
        for r in f["summary"]["rows"]:
            if not r.get("n"):
                continue
            cr = r.get("cpu_ratio", {}).get("nginx-file")
            rr = r.get("ratio", {}).get("uvicorn-file")
            fl = flags(r)
            mark = f["arms"].get(r["arm"], {}).get("mark")
            if mark:
                fl += ("; " if fl else "") + "*%s*" % mark
            w("| %s | %d | %.0f | %.1f | %.0f | %s | %s | %s |" % (
                r["arm"], r["conns"], r["rps_median"], r["mb_per_s"] or 0,
                r["cpu_us_per_req"], "%.2f×" % cr if cr else "–",
                "%.2f×" % rr if rr else "–", fl))
    else:
        w("No `tls-file.json`.")
    w("")
    path = Path(args.dir) / "tls-28.md"
    path.write_text("\n".join(out))
    print("wrote %s" % path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
