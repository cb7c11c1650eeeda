#!/usr/bin/python3
"""workermem: what one idle sluice worker holds in memory (issue 13).

Starts sluice with one worker serving a hello app (bench/apps/hello_wsgi.py
or hello_asgi.py), opens N keep-alive connections that each make one
request and then stay idle, and reads the worker's memory from /proc:

  /proc/PID/status        VmRSS, RssAnon, RssFile, RssShmem
  /proc/PID/smaps_rollup  Pss
  /proc/PID/smaps         Rss grouped by mapping: libpython, each other
                          .so, [heap], thread stacks (an anonymous mapping
                          right above a one-page PROT_NONE guard), other
                          anonymous memory, everything else

The baseline is Debian's python3 importing the same app and nothing else
(`/usr/bin/python3 -c "import hello_wsgi"`), read the same way.

With --imports it also lists the modules the worker has imported that the
bare interpreter importing the app has not (PYTHONPROFILEIMPORTTIME in
the worker's environment: CPython prints one line per import to stderr,
which the supervisor passes through to its own stderr).

Timing does not enter into it; the figures move by a few hundred KiB
between runs (page cache, ASLR). The report (Markdown) goes to stdout and,
with --out, to a file:

    /usr/bin/python3 bench/workermem.py --out bench/results/worker-memory.md
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
APPS = REPO / "bench" / "apps"
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import helpers  # noqa: E402

GET = b"GET / HTTP/1.1\r\nHost: mem\r\n\r\n"
KINDS = {"wsgi": ("hello_wsgi", "hello_wsgi:app", []),
         "asgi": ("hello_asgi", "hello_asgi:app", ["--interface", "asgi"])}
STATUS_FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")
IMPORT_RE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


# ------------------------------------------------------------------ /proc

def status(pid):
    """The STATUS_FIELDS of PID in KiB."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in STATUS_FIELDS:
                out[key] = int(rest.split()[0])
    return out


def pss(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def smaps(pid):
    """[(start, end, perms, name, rss_kib)] in address order."""
    maps = []
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            head = line.split()
            if re.match(r"^[0-9a-f]+-[0-9a-f]+$", head[0]):
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                name = " ".join(head[5:]) if len(head) > 5 else ""
                maps.append([lo, hi, head[1], name, 0])
            elif head[0] == "Rss:":
                maps[-1][4] = int(head[1])
    return maps


def group_of(maps, i):
    lo, hi, perms, name, _ = maps[i]
    if name.startswith("/"):
        base = os.path.basename(name)
        if base.startswith("libpython"):
            return "libpython"
        if ".so" in base:
            return base.split(".so")[0] + ".so"
        if base.startswith("sluice-worker"):
            return "sluice-worker (text/data)"
        return "other files"
    if name in ("[heap]", "[stack]"):
        return "main " + name.strip("[]")
    if name:
        return name
    prev = maps[i - 1] if i > 0 else None
    if (prev is not None and prev[1] == lo and prev[2].startswith("---")
            and prev[1] - prev[0] == 4096 and hi - lo >= 64 * 1024):
        return "thread stacks"
    return "anonymous (malloc mmap, Python arenas, pools)"


def breakdown(pid):
    """{group: rss_kib}, plus the thread stacks' reserved size."""
    maps = smaps(pid)
    groups = defaultdict(int)
    reserved = 0
    for i, m in enumerate(maps):
        g = group_of(maps, i)
        groups[g] += m[4]
        if g == "thread stacks":
            reserved += (m[1] - m[0]) // 1024
    return dict(groups), reserved


def snapshot(pid):
    s = status(pid)
    s["Pss"] = pss(pid)
    s["groups"], s["stack_reserved"] = breakdown(pid)
    s["threads"] = len(os.listdir("/proc/%d/task" % pid))
    return s


# ------------------------------------------------------------- the server

def read_response(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed before a response")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    n = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(rest) < n:
        rest += s.recv(65536)


def settled(pid):
    """snapshot() once VmRSS reads the same twice in a row, 50 ms apart."""
    last = None
    for _ in range(200):
        now = status(pid)["VmRSS"]
        if now == last:
            break
        last = now
        time.sleep(0.05)
    return snapshot(pid)


def measure(kind, conns, wconns, extra_env=None, imports=False, more=()):
    """Start a server (with MORE arguments), hold CONNS idle connections,
    return snapshots."""
    module, app, args = KINDS[kind]
    work = Path(tempfile.mkdtemp(prefix="sluice-workermem-"))
    srv_args = args + ["--keep-alive", "120", "--header-timeout", "120"]
    srv_args += list(more)
    if wconns is not None:
        srv_args += ["--worker-connections", str(wconns)]
    env = dict(extra_env or {})
    if imports:
        env["PYTHONPROFILEIMPORTTIME"] = "1"
    server = helpers.Server(work, app, args=srv_args, env=env,
                            ready_path="/", pythonpath=(str(APPS),))
    server.start()
    socks = []
    try:
        pid = server.wait_workers(1)[0]
        out = {"start": settled(pid)}
        for _ in range(conns):
            s = socket.create_connection((server.host, server.port), 10)
            socks.append(s)
            s.sendall(GET)
            read_response(s)
        out["held"] = settled(pid)
        if imports:
            out["imports"] = server.error_log_text()
        return out
    finally:
        for s in socks:
            s.close()
        server.stop()


BASELINE = r"""
import sys
sys.path.insert(0, %r)
import %s
pid = __import__("os").getpid()
print(open("/proc/%%d/status" %% pid).read())
print(open("/proc/%%d/smaps_rollup" %% pid).read())
"""


def baseline(kind, imports=False):
    """The bare interpreter importing the app: (VmRSS, RssAnon, RssFile,
    Pss) and, with IMPORTS, its -X importtime output."""
    module = KINDS[kind][0]
    cmd = ["/usr/bin/python3"] + (["-X", "importtime"] if imports else [])
    cmd += ["-c", BASELINE % (str(APPS), module)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True,
                       env=helpers.clean_env())
    vals = {}
    for line in p.stdout.splitlines():
        key, _, rest = line.partition(":")
        if key in STATUS_FIELDS or key == "Pss":
            vals[key] = int(rest.split()[0])
    return vals, p.stderr


def modules_of(text):
    """{module: self µs} from -X importtime lines."""
    mods = {}
    for line in text.splitlines():
        m = IMPORT_RE.match(line)
        if m:
            mods[m.group(4)] = int(m.group(1))
    return mods


# ----------------------------------------------------------------- report

def fmt_status(label, s):
    return "| %s | %s | %s | %s | %s | %s | %s |" % (
        label, s.get("VmRSS", "-"), s.get("RssAnon", "-"),
        s.get("RssFile", "-"), s.get("RssShmem", "-"), s.get("Pss", "-"),
        s.get("threads", "-"))


def report(args):
    lines = ["# Worker memory (bench/workermem.py)", ""]
    if args.label:
        lines += [args.label, ""]
    lines += ["One worker (`-w 1`, `--threads 1`), pump mode, idle keep-alive "
              "connections that made one request each. KiB, from "
              "/proc/PID/status and smaps_rollup; a single run on a shared "
              "machine (a few hundred KiB of noise).", "",
              "| case | VmRSS | RssAnon | RssFile | RssShmem | Pss | threads |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    detail = []
    for kind in args.kinds:
        base, _ = baseline(kind)
        lines.append(fmt_status("python3 -c 'import %s'" % KINDS[kind][0],
                                base))
        for wconns in args.worker_connections:
            for conns in args.conns:
                more = args.asgi_args.split() if kind == "asgi" else []
                r = measure(kind, conns, wconns, more=more)
                label = "%s, --worker-connections %s" % (
                    kind, wconns if wconns else "default (1000)")
                if more:
                    label += ", " + " ".join(more)
                if conns == args.conns[0]:
                    lines.append(fmt_status(label + ", started",
                                            r["start"]))
                    detail.append((label + ", started", r["start"]))
                lines.append(fmt_status("%s, %d idle" % (label, conns),
                                        r["held"]))
                detail.append(("%s, %d idle" % (label, conns), r["held"]))
    lines += ["", "## Rss by mapping (KiB)", ""]
    groups = sorted({g for _, s in detail for g in s["groups"]},
                    key=lambda g: -max(s["groups"].get(g, 0)
                                       for _, s in detail))
    lines.append("| mapping | " + " | ".join(l for l, _ in detail) + " |")
    lines.append("|---|" + "---:|" * len(detail))
    for g in groups:
        lines.append("| %s | " % g + " | ".join(
            str(s["groups"].get(g, 0)) for _, s in detail) + " |")
    lines.append("| (thread stacks reserved) | " + " | ".join(
        str(s["stack_reserved"]) for _, s in detail) + " |")
    if args.imports:
        lines += imports_section(args.kinds)
    return "\n".join(lines) + "\n"


def imports_section(kinds):
    lines = ["", "## Modules the worker imports that the app did not ask for",
             "",
             "`PYTHONPROFILEIMPORTTIME=1` in the worker's environment against "
             "`/usr/bin/python3 -X importtime -c 'import APP'`: modules in "
             "the worker's list and not in the bare interpreter's, with "
             "their own import time (µs, noisy).", ""]
    for kind in kinds:
        _, bare = baseline(kind, imports=True)
        r = measure(kind, 0, None, imports=True)
        mine, theirs = modules_of(r["imports"]), modules_of(bare)
        extra = sorted(set(mine) - set(theirs))
        lines.append("- %s: %d modules in the worker, %d in `python3 -c "
                     "'import %s'`; %d more:" % (kind, len(mine), len(theirs),
                                                KINDS[kind][0], len(extra)))
        lines.append("")
        lines.append("  " + (", ".join("%s (%d)" % (m, mine[m])
                                       for m in extra) or "(none)"))
        lines.append("")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", nargs="+", default=["wsgi", "asgi"],
                    choices=sorted(KINDS))
    ap.add_argument("--conns", nargs="+", type=int, default=[10, 1000],
                    help="idle connections held (default 10 1000)")
    ap.add_argument("--worker-connections", nargs="+", type=int,
                    default=[0], help="0 = the default")
    ap.add_argument("--asgi-args", default="",
                    help="more server arguments for the ASGI runs, one "
                    "string: --asgi-args='--loop asyncio'")
    ap.add_argument("--imports", action="store_true",
                    help="also list the modules the worker adds")
    ap.add_argument("--label", default="", help="a line under the title")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    args.worker_connections = [w or None for w in args.worker_connections]
    text = report(args)
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
