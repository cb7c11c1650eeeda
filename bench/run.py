#!/usr/bin/python3
"""Side-by-side benchmark of sluice and its peers (a report, not a test).

    /usr/bin/python3 bench/run.py [--suite wsgi|asgi] [--duration S]
                                  [--repeat N] [--only ARM[,ARM]]
                                  [--pipeline N]

For each arm of the suite (see suites.py) and each connection count, the
server is started pinned to one CPU, wrk is pinned to the other, and the run
records wrk's req/s, errors and latency, plus the CPU time the server's whole
process tree used per request. With --pipeline N, wrk writes N requests at
once on each connection (a Lua script generated for the run), as
TechEmpower's plaintext test does. Results go to
bench/results/SUITE.{md,json,png} (SUITE-pipelineN.* with --pipeline N).
Paths under the repository and the run's temporary directory are written
as $REPO and $LOGDIR. See bench/README.md for what the numbers mean and
what they do not.
"""

import argparse
import datetime
import http.client
import json
import os
import platform
import select
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
APPS = BENCH / "apps"
WRK_LUA = BENCH / "wrk_summary.lua"
sys.path.insert(0, str(BENCH))

import report  # noqa: E402
import workload  # noqa: E402
import wsbench  # noqa: E402
from suites import SUITES  # noqa: E402

TASKSET = "/usr/bin/taskset"
WRK = "/usr/bin/wrk"
CLK_TCK = os.sysconf("SC_CLK_TCK")
JSON_MARK = "SLUICE-BENCH-JSON "

START_TIMEOUT = 20.0  # s: server must accept a TCP connection by then
PREFLIGHT_TIMEOUT = 15.0  # s: and answer the first request by then
STOP_TIMEOUT = 10.0  # s: then its process group gets SIGKILL
WRK_GRACE = 30.0  # s: wrk killed if it runs this much past -d


class Skip(Exception):
    """The arm cannot be measured now; the message says why."""


# ---------------------------------------------------------------- /proc


def _read_stat(pid):
    """(ppid, sid, utime+stime ticks, starttime) of one process, or None."""
    try:
        with open("/proc/%s/stat" % pid, "rb") as f:
            data = f.read()
    except OSError:
        return None
    # comm (field 2) may hold spaces and ')': split after the last ')'.
    rest = data[data.rindex(b")") + 2:].split()
    # rest[0] is field 3 (state); field N is rest[N - 3].
    ppid, sid = int(rest[1]), int(rest[3])
    utime, stime = int(rest[11]), int(rest[12])
    starttime = int(rest[19])
    return ppid, sid, utime + stime, starttime


def process_tree(root):
    """{(pid, starttime): cpu_ticks} for root and every descendant.

    Descendants are found by walking ppid chains over /proc/*/stat; processes
    in root's session are included too (the harness starts every server in a
    session of its own), which catches a daemonised grandchild whose parent
    has exited. /proc/PID/stat covers the whole thread group, dead threads
    included, so threads need no separate walk.
    """
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _read_stat(name)
            if st is not None:
                procs[int(name)] = st
    children = {}
    for pid, (ppid, _sid, _t, _s) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in procs and pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    found.update(p for p, st in procs.items() if st[1] == root)
    return {(p, procs[p][3]): procs[p][2] for p in found}


def tree_cpu_delta(before, after):
    """CPU ticks used between two process_tree() samples, and a note when
    the set of processes changed (time of a process that exited in between
    is lost)."""
    ticks = sum(t - before.get(key, 0) for key, t in after.items())
    gone = set(before) - set(after)
    new = set(after) - set(before)
    note = ""
    if gone or new:
        note = "process set changed: %d exited, %d new" % (len(gone), len(new))
    return ticks, note


def accept_queue(port):
    """Connections waiting in the accept queue of 127.0.0.1:port, summed over
    listeners (/proc/net/tcp shows the accept backlog as rx_queue for a
    socket in LISTEN state). None if no listener was found."""
    local = "0100007F:%04X" % port
    total, seen = 0, False
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[1] == local and fields[3] == "0A":
                    total += int(fields[4].split(":")[1], 16)
                    seen = True
    except OSError:
        return None
    return total if seen else None


def cpu_ticks():
    """{cpu number: {"busy", "irq", "idle", "steal", "total"}} in ticks from
    /proc/stat. busy is user+nice+system, irq is irq+softirq (on loopback
    much of the TCP work lands there)."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *vals = line.split()
                v = [int(x) for x in vals] + [0] * 10
                out[int(name[3:])] = {
                    "busy": v[0] + v[1] + v[2], "idle": v[3] + v[4],
                    "irq": v[5] + v[6], "steal": v[7], "total": sum(v[:8])}
    return out


def passive_opens():
    """TCP connections accepted so far, system-wide (/proc/net/snmp)."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    return int(rows[1][rows[0].index("PassiveOpens")])


def session_members(sid):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _read_stat(name)
            if st is not None and st[1] == sid:
                out.append(int(name))
    return out


# ---------------------------------------------------------------- servers


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    # The first python3 on this machine's PATH is not Debian's; servers and
    # anything they exec must only see the system's directories.
    env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
    env.update(extra)
    return env


def expand(value, ctx):
    return value.format(**ctx)


class Server:
    def __init__(self, arm, ctx, cpu, logdir, tag):
        self.arm = arm
        self.port = ctx["port"]
        if arm.config is not None:
            text = (APPS / arm.config).read_text()
            text = text.replace("@PORT@", str(self.port))
            text = text.replace("@DIR@", str(logdir))
            text = text.replace("@CERT@", ctx.get("certfile", ""))
            text = text.replace("@KEY@", ctx.get("keyfile", ""))
            conf = Path(logdir) / ("%s.conf" % tag)
            conf.write_text(text)
            ctx = dict(ctx, config=str(conf))
        ctx = dict(ctx, logdir=str(logdir))
        self.ctx = ctx
        self.argv = [expand(a, ctx) for a in arm.argv]
        self.cwd = expand(arm.cwd, ctx)
        self.env_extra = {k: expand(v, ctx) for k, v in arm.env.items()}
        self.full_argv = [TASKSET, "-c", str(cpu)] + self.argv
        self.logpath = Path(logdir) / ("%s.log" % tag)
        self.proc = None

    def command_line(self):
        env = " ".join("%s=%s" % (k, shlex.quote(v))
                       for k, v in self.env_extra.items())
        cd = "cd %s && " % shlex.quote(self.cwd)
        line = cd + (env + " " if env else "") + shlex.join(self.full_argv)
        if self.arm.config is not None:  # the template, not this start's copy
            line = line.replace(self.ctx["config"],
                                str(APPS / self.arm.config))
        return line

    def log_tail(self, lines=6):
        try:
            text = self.logpath.read_text(errors="replace").strip()
        except OSError:
            return ""
        return " | ".join(text.splitlines()[-lines:])

    def start(self):
        with open(self.logpath, "wb") as log:
            self.proc = subprocess.Popen(
                self.full_argv, cwd=self.cwd, env=server_env(self.env_extra),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_default_signals)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise Skip("failed to start (exit status %s): %s"
                           % (rc, self.log_tail()))
            try:
                socket.create_connection(("127.0.0.1", self.port),
                                         timeout=0.5).close()
                return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise Skip("failed to start: no TCP accept within %.0f s: %s"
                           % (START_TIMEOUT, self.log_tail()))
            time.sleep(0.05)

    def _get(self, conn):
        path = self.arm.path
        try:
            conn.request(self.arm.method, path,
                         body=workload.request_body(self.arm))
            resp = conn.getresponse()
            return resp, resp.read()
        except (OSError, http.client.HTTPException) as e:
            rc = self.proc.poll()
            if rc is not None:
                raise Skip("failed to start (exit status %s after "
                           "accepting): %s" % (rc, self.log_tail()))
            return None, e

    def preflight(self):
        """Checks status and body of one request, then sends a second one on
        the same connection to learn whether the server keeps connections
        alive. Raises Skip when the arm must not be measured."""
        path = self.arm.path
        if self.arm.tls:  # the harness's own certificate: no verification
            import ssl
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
            conn = http.client.HTTPSConnection(
                "127.0.0.1", self.port, timeout=PREFLIGHT_TIMEOUT,
                context=tls)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                              timeout=PREFLIGHT_TIMEOUT)
        try:
            resp, body = self._get(conn)
            if resp is None:
                raise Skip("no valid HTTP response on %s: %r" % (path, body))
            if resp.status == 404 and self.arm.skip_if_404:
                raise Skip("server answers 404 on %s" % path)
            if not 200 <= resp.status < 300:
                raise Skip("not serving the app: %s %s answered %d %r: %s"
                           % (self.arm.method, path, resp.status, body[:80],
                              self.log_tail(3)))
            wrong = workload.check_body(self.arm, body)
            if wrong:
                raise Skip("not serving the app: %s %s: %s"
                           % (self.arm.method, path, wrong))
            info = {"status": resp.status,
                    "server_header": resp.getheader("Server"),
                    "keep_alive": True}
            if resp.getheader("X-Bench-Body"):  # work_asgi.py's /file
                info["body_source"] = resp.getheader("X-Bench-Body")
            if self.arm.tls:
                info["tls"] = "%s %s" % (conn.sock.version(),
                                         conn.sock.cipher()[0])
            if resp.will_close:
                info["keep_alive"] = False
                info["keep_alive_note"] = "server said Connection: close"
            else:
                resp2, err = self._get(conn)
                if resp2 is None:
                    info["keep_alive"] = False
                    info["keep_alive_note"] = (
                        "second request on the connection failed: %r" % err)
                elif resp2.will_close:
                    info["keep_alive"] = False
                    info["keep_alive_note"] = ("server said Connection: close "
                                               "after the second request")
        finally:
            conn.close()
        return info

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        p = self.proc
        if p is None:
            return
        leader = p.pid
        if p.poll() is None:
            try:
                os.kill(leader, self.arm.stop_signal)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                _kill_group(leader)
                p.wait(timeout=STOP_TIMEOUT)
        # Anything of ours still left in the server's session (an orphaned
        # worker, say) is ended by pid.
        for pid in session_members(leader):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None


def _default_signals():
    # A harness started from a non-interactive shell's background job has
    # SIGINT ignored, and children inherit that: a server would then ignore
    # the stop signal. Give every server the default dispositions.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- wrk


PIPELINE_LUA = """\
-- Generated by bench/run.py --pipeline %(depth)d for one run; not kept.
-- request() returns %(depth)d requests at once, so wrk writes them together
-- on each connection and sends the next batch when all are answered; it
-- counts every response (TechEmpower's plaintext test loads the same way).
init = function(args)
  local r = {}
  for i = 1, %(depth)d do
    r[i] = wrk.format()
  end
  pipelined = table.concat(r)
end

request = function()
  return pipelined
end

"""


def wrk_script(depth, tmpdir):
    """The wrk -s script for pipeline DEPTH: wrk_summary.lua itself for 1
    (no Lua call per request), else one generated in TMPDIR with the same
    done()."""
    if depth <= 1:
        return WRK_LUA
    path = Path(tmpdir) / ("pipeline-%d.lua" % depth)
    path.write_text(PIPELINE_LUA % {"depth": depth} + WRK_LUA.read_text())
    return path


def run_wrk(port, path, conns, threads, duration, cpu, script=WRK_LUA,
            root_pid=None, probe=False, server_cpu=None, client=None,
            scheme="http"):
    """One wrk run with SCRIPT (or the CLIENT argv, which prints the same
    summary: bench/upload.py). With root_pid, also samples the server
    tree's CPU time right before and right after, and (probe=True) the
    accept queue during the middle of the run."""
    url = "%s://127.0.0.1:%d%s" % (scheme, port, path)
    argv = [TASKSET, "-c", str(cpu)] + (client or [
        WRK, "-t%d" % threads, "-c%d" % conns, "-d%ds" % duration,
        "-s", str(script), url])
    out = tempfile.TemporaryFile()
    before = process_tree(root_pid) if root_pid else None
    cpus_before = cpu_ticks()
    opens_before = passive_opens()
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                         stderr=subprocess.STDOUT)
    # Sample the accept queue between 20 % and 90 % of the run.
    samples, next_probe = [], t0 + 0.2 * duration
    probe_end = t0 + 0.9 * duration
    deadline = t0 + duration + WRK_GRACE
    status = rusage = None
    while True:
        pid, status, rusage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        now = time.monotonic()
        if now > deadline:
            p.kill()
            _, status, rusage = os.wait4(p.pid, 0)
            break
        if probe and next_probe <= now <= probe_end:
            q = accept_queue(port)
            if q is not None:
                samples.append(q)
            next_probe = now + max(0.1, duration / 20)
        time.sleep(0.02)
    p.returncode = os.waitstatus_to_exitcode(status)
    after = process_tree(root_pid) if root_pid else None
    cpus_after = cpu_ticks()
    opens = passive_opens() - opens_before
    wall = time.monotonic() - t0
    out.seek(0)
    text = out.read().decode(errors="replace")
    out.close()
    res = {"argv": argv, "exit": p.returncode, "wall_s": round(wall, 3),
           "wrk_cpu_s": round(rusage.ru_utime + rusage.ru_stime, 3),
           # System-wide, so it includes a server's internal connections
           # (uWSGI's router opens one to its worker per request).
           "tcp_passive_opens": opens}
    for line in text.splitlines():
        if line.startswith(JSON_MARK):
            res.update(json.loads(line[len(JSON_MARK):]))
    if "requests" not in res:
        res["error"] = "wrk gave no summary (exit %s): %s" % (
            p.returncode, " | ".join(text.strip().splitlines()[-4:]))
        return res
    # A process's utime+stime comes from the scheduler's run time, which
    # includes irq/softirq work done while it was on the CPU; /proc/stat puts
    # that work in its own columns. So what others used is (busy + irq) minus
    # the process's own time (a lower bound: never below 0).
    busy = {n: (cpus_after[n]["busy"] + cpus_after[n]["irq"]
                - cpus_before[n]["busy"] - cpus_before[n]["irq"]) / CLK_TCK
            for n in cpus_after if n in cpus_before}
    # Where each CPU's time went during the run, in % of wall time.
    res["cpu_pct"] = {
        str(n): {k: round(100.0 * (cpus_after[n][k] - cpus_before[n][k])
                          / CLK_TCK / wall, 1)
                 for k in ("busy", "irq", "idle", "steal")}
        for n in cpus_after if n in cpus_before}
    if before is not None:
        ticks, note = tree_cpu_delta(before, after)
        res["server_cpu_s"] = ticks / CLK_TCK
        # Whatever else ran on the server's CPU (another build on a shared
        # machine, say): time the server could not have.
        if server_cpu in busy:
            res["other_on_server_cpu_pct"] = max(
                0.0, 100.0 * (busy[server_cpu] - ticks / CLK_TCK) / wall)
        res["server_procs"] = len(after)
        if note:
            res["server_tree_note"] = note
    if cpu in busy:
        res["other_on_client_cpu_pct"] = max(
            0.0, 100.0 * (busy[cpu] - res["wrk_cpu_s"]) / wall)
    if probe:
        res["accept_queue"] = samples
    return res


def run_marked(argv, start, end, root_pid=None, server_cpu=None,
               timeout=60.0):
    """Runs the load client ARGV and reads its output as it comes. At the
    first line starting with START, and the first after it starting with
    END (the client's own measured window: rateload's MEASURE and END,
    h2load's "Main benchmark duration is started/over"), samples the
    server tree's CPU time (ROOT_PID), the client's own and what other
    processes used of SERVER_CPU. The client is killed after TIMEOUT
    seconds. Returns (res, lines, exit status): every output line, and
    server_cpu_s, client_cpu_s, harness_wall_s, other_on_server_cpu_pct
    (and server_tree_note) in res once both lines were seen."""
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    res, lines, buf = {}, [], b""
    before = client_before = cpus_before = t0 = None
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
                lines.append(line)
                if t0 is None and line.startswith(start):
                    before = process_tree(root_pid) if root_pid else None
                    client_before = process_tree(p.pid)
                    cpus_before = cpu_ticks()
                    t0 = time.monotonic()
                elif (t0 is not None and "harness_wall_s" not in res
                      and line.startswith(end)):
                    after = process_tree(root_pid) if root_pid else None
                    client_ticks, _ = tree_cpu_delta(client_before,
                                                     process_tree(p.pid))
                    cpus_after = cpu_ticks()
                    wall = max(time.monotonic() - t0, 1e-3)
                    res["harness_wall_s"] = round(wall, 3)
                    res["client_cpu_window_s"] = client_ticks / CLK_TCK
                    if before is None:
                        continue
                    ticks, note = tree_cpu_delta(before, after)
                    res["server_cpu_s"] = ticks / CLK_TCK
                    if server_cpu in cpus_after:
                        a, b = cpus_after[server_cpu], cpus_before[server_cpu]
                        busy = a["busy"] + a["irq"] - b["busy"] - b["irq"]
                        res["other_on_server_cpu_pct"] = max(
                            0.0, 100.0 * (busy - ticks) / CLK_TCK / wall)
                    if note:
                        res["server_tree_note"] = note
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    if buf.strip():
        lines.append(buf.decode(errors="replace").strip())
    return res, lines, p.returncode


def measure(server, arm, conns, args, script):
    """Warm-up then the measured run, both with wrk SCRIPT; returns the
    result record."""
    port = server.port
    threads = min(args.wrk_threads, conns)
    scheme = "https" if arm.tls else "http"

    def client(duration):
        if arm.client != "upload":
            return None
        return workload.client_argv(arm, port, conns, duration)

    if args.warmup > 0:
        w = run_wrk(port, arm.path, conns, threads, args.warmup,
                    args.client_cpu, script, client=client(args.warmup),
                    scheme=scheme)
        if "error" in w:
            return {"error": "warm-up: " + w["error"]}
    r = run_wrk(port, arm.path, conns, threads, args.duration, args.client_cpu,
                script, root_pid=server.proc.pid, probe=True,
                server_cpu=args.server_cpu, client=client(args.duration),
                scheme=scheme)
    if "error" in r:
        return r
    if not r["requests"]:  # nothing to divide by: a failed run
        r["error"] = "no request completed in %d s (errors %s)" % (
            args.duration, r.get("errors"))
        return r
    dur = r["duration_us"] / 1e6
    r["rps"] = r["requests"] / dur if dur > 0 else 0.0
    r["server_cpu_pct"] = 100.0 * r["server_cpu_s"] / r["wall_s"]
    r["wrk_cpu_pct"] = 100.0 * r["wrk_cpu_s"] / r["wall_s"]
    r["cpu_us_per_req"] = (1e6 * r["server_cpu_s"] / r["requests"]
                           if r["requests"] else None)
    q = r.get("accept_queue") or []
    # Connections still unaccepted well into the run: median = for most of
    # it (starved), max = at some point (slow to accept).
    r["starved_conns"] = int(statistics.median(q)) if q else 0
    r["unaccepted_max"] = max(q) if q else 0
    if not server.alive():
        r["server_died"] = True
    return r


# ---------------------------------------------------------------- driver


def sluice_bin(args):
    b = Path(args.sluice_bin)
    return str(b if b.is_absolute() else (ROOT / b))


def machine_info():
    def first(path, key):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(key):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return "?"

    def cmd(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "?"

    pkgs = ["python3", "python3-gunicorn", "uwsgi-core",
            "uwsgi-plugin-python3", "python3-waitress", "python3-uvicorn",
            "python3-uvloop", "python3-httptools", "python3-hypercorn", "wrk",
            "nginx-light", "python3-flask", "python3-django",
            "python3-fastapi"]
    versions = {}
    for line in cmd(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n"]
                    + pkgs).splitlines():
        name, _, ver = line.partition(" ")
        versions[name] = ver
    try:
        debian = Path("/etc/debian_version").read_text().strip()
    except OSError:
        debian = "?"
    return {
        "cpu_model": first("/proc/cpuinfo", "model name"),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "debian": debian,
        "packages": versions,
        "loadavg_start": Path("/proc/loadavg").read_text().split()[:3],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="wsgi", choices=sorted(SUITES),
                    help="wsgi, asgi, change, ws (WebSocket echo, loaded "
                         "by bench/wsload.c: see wsbench.py), or real work: "
                         "io, big, upload, frameworks")
    ap.add_argument("--duration", type=int, default=10,
                    help="seconds per measured wrk run (default 10)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="seconds of unmeasured wrk before each run (default 2)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the whole matrix N times, interleaved; the "
                         "report shows the median and min-max")
    ap.add_argument("--only", default="",
                    help="comma-separated arm names (default: all)")
    ap.add_argument("--conns", default="",
                    help="comma-separated connection counts (default: the "
                         "suite's, 16,256 for most)")
    ap.add_argument("--wrk-threads", type=int, default=1,
                    help="wrk -t (default 1: wrk has one CPU)")
    ap.add_argument("--pipeline", type=int, default=1, metavar="N",
                    help="requests wrk writes at once per connection "
                         "(default 1: no pipelining)")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--sluice-bin",
                    default=os.environ.get("SLUICE_BIN", "./sluice"),
                    help="sluice binary, relative to the repo root "
                         "(default $SLUICE_BIN or ./sluice)")
    ap.add_argument("--before-bin",
                    default=os.environ.get("SLUICE_BEFORE_BIN", ""),
                    help="an earlier sluice binary, for the 'change' suite's "
                         "-before arms (default $SLUICE_BEFORE_BIN)")
    ap.add_argument("--baseline", default=None,
                    help="comma-separated arms for the ratio columns "
                         "(default: the suite's)")
    ap.add_argument("--out", default=str(BENCH / "results"),
                    help="directory for SUITE.md/.json/.png")
    ap.add_argument("--label", default="",
                    help="one line shown at the top of the report")
    ap.add_argument("--list", action="store_true",
                    help="print the arms and their commands, run nothing")
    ap.add_argument("--render", metavar="JSON",
                    help="only rewrite the .md and .png beside an existing "
                         "results JSON (after a change to report.py)")
    args = ap.parse_args()
    if args.pipeline < 1:
        ap.error("--pipeline takes a whole number from 1 up")

    if args.render:
        base = args.render[:-5] if args.render.endswith(".json") else args.render
        with open(base + ".json") as f:
            doc = json.load(f)
        rep = wsbench if doc["meta"].get("suite") == "ws" else report
        if rep is report and "baselines" in doc["summary"]:
            # the table's figures, from the runs again
            s = doc["summary"]
            doc["summary"] = report.summarise(
                doc["runs"], list(doc["arms"]),
                sorted({r["conns"] for r in doc["runs"]}), s["baselines"])
        Path(base + ".md").write_text(rep.markdown(doc))
        rep.chart(doc, base + ".png")
        print("wrote %s.md, %s.png" % (base, base))
        return 0

    suite = SUITES[args.suite]
    arms = suite.arms
    if args.only:
        wanted = [a.strip() for a in args.only.split(",") if a.strip()]
        names = {a.name for a in arms}
        unknown = [w for w in wanted if w not in names]
        if unknown:
            ap.error("unknown arm(s) %s; suite %s has: %s"
                     % (",".join(unknown), suite.name, ", ".join(sorted(names))))
        arms = [a for a in arms if a.name in wanted]
    if workload.pipeline_conflict(arms, args.pipeline):
        ap.error(workload.pipeline_conflict(arms, args.pipeline))
    given = [int(c) for c in args.conns.split(",") if c.strip()]
    conns_of = {a.name: workload.arm_conns(a, suite, given) for a in arms}
    conns_list = sorted({c for a in arms for c in conns_of[a.name]})
    baselines = (args.baseline.split(",") if args.baseline
                 else list(suite.baselines))
    ctx_base = {"apps": str(APPS), "root": str(ROOT),
                "sluice": sluice_bin(args),
                "sluice_before": (str(Path(args.before_bin).resolve())
                                  if args.before_bin else "")}

    if suite.tls:  # made in $LOGDIR once the run has one
        ctx_base.update(certfile="$LOGDIR/ecdsa.crt",
                        keyfile="$LOGDIR/ecdsa.key")
    if args.list:
        for arm in arms:
            s = Server(arm, dict(ctx_base, port="PORT"), args.server_cpu,
                       "/tmp", "x")
            print(workload.list_entry(arm, s.command_line(),
                                      conns_of[arm.name],
                                      [TASKSET, "-c", str(args.client_cpu)]))
        return 0

    if suite.kind == "ws":
        return wsbench.main(sys.modules[__name__], args, suite, arms,
                            conns_list, baselines, ctx_base)

    if not Path(WRK).exists():
        print("wrk not found at %s (apt-get install wrk)" % WRK, file=sys.stderr)
        return 1

    # The harness itself stays off the server's CPU.
    os.sched_setaffinity(0, {args.client_cpu})

    skipped = {}  # arm -> reason (when no run of it produced numbers)
    runnable = []
    for arm in arms:
        need = arm.requires and expand(arm.requires, ctx_base)
        if arm.requires and not need:
            skipped[arm.name] = "no binary given (%s)" % arm.requires
            print("skip %-18s %s" % (arm.name, skipped[arm.name]), flush=True)
        elif need and not os.access(need, os.X_OK):
            skipped[arm.name] = "binary not found: %s" % need
            print("skip %-18s %s" % (arm.name, skipped[arm.name]), flush=True)
        else:
            runnable.append(arm)

    meta = machine_info()
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
        "wrk_threads": args.wrk_threads, "pipeline": args.pipeline,
        "server_cpu": args.server_cpu, "client_cpu": args.client_cpu,
        "baselines": baselines, "sluice_bin": ctx_base["sluice"],
        "tls": suite.tls,
        "root": str(ROOT),
        "git_commit": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True).stdout.strip(),
        "wrk_command": " ".join(
            [TASKSET, "-c", str(args.client_cpu), WRK,
             "-t%d" % args.wrk_threads, "-cCONNS", "-d%ds" % args.duration,
             "-s", "bench/wrk_summary.lua" if args.pipeline == 1 else
             "$LOGDIR/pipeline-%d.lua" % args.pipeline,
             "%s://127.0.0.1:PORT/PATH" % ("https" if suite.tls
                                           else "http")]),
    })

    arm_info = {a.name: {"note": a.note, "path": a.path, "ours": a.ours,
                         "method": a.method, "upload": a.upload,
                         "client": a.client, "mark": a.mark, "ref": a.ref,
                         "tls": a.tls}
                for a in arms}
    runs = []
    attempt_errors = {}
    current = [None]

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    logdir = tempfile.mkdtemp(prefix="sluice-bench-")
    print("server logs: %s" % logdir, flush=True)
    script = wrk_script(args.pipeline, logdir)
    if suite.big_file:
        workload.big_file(logdir)
    if suite.tls:
        ctx_base.update(zip(("certfile", "keyfile"),
                            workload.tls_certs(logdir, ("ecdsa",))["ecdsa"]))
    try:
        for rep in range(args.repeat):
            k = rep % len(runnable) if runnable else 0
            order = runnable[k:] + runnable[:k]  # rotate: no fixed position
            for arm in order:
                ctx = dict(ctx_base, port=free_port())
                srv = Server(arm, ctx, args.server_cpu, logdir,
                             "%s-%d" % (arm.name, rep + 1))
                current[0] = srv
                arm_info[arm.name]["command"] = srv.command_line().replace(
                    "127.0.0.1:%d" % ctx["port"], "127.0.0.1:PORT").replace(
                    "--port %d" % ctx["port"], "--port PORT")
                try:
                    srv.start()
                    pre = srv.preflight()
                    arm_info[arm.name]["preflight"] = pre
                    for conns in conns_of[arm.name]:
                        if not srv.alive():
                            raise Skip("server exited: %s" % srv.log_tail())
                        r = measure(srv, arm, conns, args, workload.wrk_script(
                            arm, script, logdir))
                        r.update(arm=arm.name, conns=conns, rep=rep + 1,
                                 port=ctx["port"], pipeline=args.pipeline)
                        runs.append(r)
                        print("rep %d %-18s c%-4d %s" % (
                            rep + 1, arm.name, conns, report.one_line(r)),
                            flush=True)
                except Skip as e:
                    attempt_errors.setdefault(arm.name, []).append(str(e))
                    print("rep %d %-18s skipped: %s" % (rep + 1, arm.name, e),
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
        if not any(r["arm"] == name and "rps" in r for r in runs):
            skipped[name] = errs[0]
        else:
            arm_info[name]["attempt_errors"] = errs
    meta["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]

    doc = {"meta": meta, "arms": arm_info, "skipped": skipped, "runs": runs,
           "summary": report.summarise(runs, [a.name for a in arms],
                                       conns_list, baselines)}
    places = {str(ROOT): "$REPO", logdir: "$LOGDIR"}
    if ctx_base["sluice_before"]:
        places[str(Path(ctx_base["sluice_before"]).parent)] = "$BEFORE"
    after = Path(ctx_base["sluice"]).resolve().parent
    if not str(after).startswith(str(ROOT)):  # a build outside the tree
        places[str(after)] = "$AFTER"
    doc = report.scrub(doc, places)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = out / (suite.name if args.pipeline == 1 else
                  "%s-pipeline%d" % (suite.name, args.pipeline))
    with open(str(base) + ".json", "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    Path(str(base) + ".md").write_text(report.markdown(doc))
    png = report.chart(doc, str(base) + ".png")
    print("wrote %s.md, %s.json%s" % (base, base, ", " + png if png else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
