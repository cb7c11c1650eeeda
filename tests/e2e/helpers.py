"""Helpers for sluice's end-to-end tests: run the real binary, speak raw HTTP.

Server starts the binary (SLUICE_BIN, default <repo>/sluice, which finds
its sluice-worker in the same directory) in its own process group with the
error log sent to a file, polls until the listening socket accepts and one
request has been answered, and stops it with SIGTERM
(SIGKILL for the whole group after a bound). Stopping reports problems
instead of hiding them: a server that needed SIGKILL, exited non-zero, or
left processes behind is a failure.

RawConn is a socket with a parser for exactly what came back: status line,
headers in order, and a body framed by Content-Length, chunked encoding, or
the close of the connection. Every read has a timeout.

Load is the one load generator: client threads sending a mix of requests,
keep-alive or not, bounded by a count, a time or stop(), every outcome
recorded (a good answer, or which failure, when, on which connection).

Also here, for the tests that share them: the supervisor tests' app
(tests/apps/sup_app.py, served from a copy) and its Server, a NOTIFY_SOCKET
recorder, a server started by systemd-socket-activate, and http.client
calls.

With SLUICE_E2E_PEER=gunicorn the same tests run against Debian's gunicorn
(gthread worker), which is how the test logic was checked before sluice
could serve; tests of sluice-only behaviour skip there.

With SLUICE_E2E_TLS=1 (TLS mode; run.sh's second pass) every Server
listens with TLS, on a certificate for localhost, 127.0.0.1 and ::1 from a
CA made once per process (tls_pki(), Debian's python3-trustme), and every
client here speaks TLS trusting that CA: RawConn, Load, http_client(), and
ws_helpers' clients. The bytes a test writes and reads are the same; the
transport under them is sluice's TLS one. A test that cannot mean the same
over TLS is marked plain_only (conftest.py). Off (the default), nothing
here touches TLS.
"""

import contextlib
import os
import random
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
APPS = REPO / "tests" / "apps"
if str(APPS) not in sys.path:
    sys.path.insert(0, str(APPS))

PEER = os.environ.get("SLUICE_E2E_PEER", "")
TLS = os.environ.get("SLUICE_E2E_TLS", "0") not in ("", "0")
IO_TIMEOUT = 10.0
START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0


def sluice_bin():
    return os.environ.get("SLUICE_BIN", str(REPO / "sluice"))


def worker_bin():
    """sluice-worker beside the supervisor: where sluice looks first."""
    return str(Path(sluice_bin()).with_name("sluice-worker"))


def sanitized():
    """Whether the build under test runs under ASan/UBSan: its memory and
    timing figures say little (ASan's quarantine alone grows RSS)."""
    return os.environ.get("SLUICE_SANITIZERS") == "yes"


def server_name():
    """The Server header value the server under test must send."""
    return "gunicorn" if PEER == "gunicorn" else "sluice"


def wait_until(predicate, timeout, what, interval=0.01):
    """Poll PREDICATE until it returns something true; fail after TIMEOUT."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError("timed out after %.1fs waiting for %s"
                                 % (timeout, what))
        time.sleep(interval)


def free_port(host="127.0.0.1"):
    """A TCP port on HOST that was free a moment ago."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_ports(n, host="127.0.0.1"):
    """N distinct TCP ports on HOST that were free a moment ago."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(family, socket.SOCK_STREAM)
            socks.append(s)
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# ------------------------------------------------------------------ TLS mode

_tls = {}
_tls_lock = threading.Lock()


def tls_pki():
    """TLS mode's certificates, made on the first call (from any thread):
    "ca", "cert", "key" (paths) and "context", a client SSLContext that
    trusts the CA and offers http/1.1. They live in a directory of their
    own, removed when the process exits."""
    with _tls_lock:
        if not _tls:
            _tls.update(_make_tls_pki())
        return _tls


def _make_tls_pki():
    import atexit
    import trustme  # Debian's python3-trustme
    d = Path(tempfile.mkdtemp(prefix="sluice-e2e-tls-"))
    atexit.register(shutil.rmtree, str(d), True)
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1", "::1")
    out = {"ca": d / "ca.pem", "cert": d / "cert.pem", "key": d / "key.pem"}
    ca.cert_pem.write_to_path(str(out["ca"]))
    for i, blob in enumerate(leaf.cert_chain_pems):
        blob.write_to_path(str(out["cert"]), append=i > 0)
    leaf.private_key_pem.write_to_path(str(out["key"]))
    ctx = ssl.create_default_context(cafile=str(out["ca"]))
    ctx.set_alpn_protocols(["http/1.1"])
    out["context"] = ctx
    return out


def tls_server_args():
    """The options that make a server's listeners TLS in TLS mode."""
    pki = tls_pki()
    return ["--certfile", str(pki["cert"]), "--keyfile", str(pki["key"])]


def tls_wrap(sock, host):
    """Connected socket SOCK to HOST (an address, or None for a Unix
    socket), after the TLS handshake with the session CA's context; the
    handshake is bounded by SOCK's timeout."""
    return tls_pki()["context"].wrap_socket(
        sock, server_hostname=host or "localhost")


def url_scheme(plain="http"):
    """PLAIN ("http", "ws"), or its secure twin in TLS mode."""
    return plain + "s" if TLS else plain


def half_close(sock):
    """End SOCK's sending side, as a client that has sent all it will; it
    reads on. Over TLS the TCP FIN alone, no close_notify: Python sends
    one only by waiting for the peer's, which would eat what it sends
    meanwhile, and sluice takes an EOF without one as the end
    (SSL_OP_IGNORE_UNEXPECTED_EOF) like a plain FIN. SSLSocket's own
    shutdown() would drop the TLS layer, so the socket's is called."""
    socket.socket.shutdown(sock, socket.SHUT_WR)


# ------------------------------------------------------------------ processes

def _proc_stat(pid):
    """(state, ppid, pgrp) of PID, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("latin-1")
    except (FileNotFoundError, ProcessLookupError):
        return None
    rest = data[data.rindex(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[2])


def _all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def live_pids_in_group(pgid):
    """Processes of group PGID that are not zombies."""
    out = []
    for pid in _all_pids():
        st = _proc_stat(pid)
        if st and st[2] == pgid and st[0] != "Z":
            out.append(pid)
    return out


def children_of(pid):
    """Live (non-zombie) child processes of PID."""
    kids = set()
    task_dir = "/proc/%d/task" % pid
    try:
        for tid in os.listdir(task_dir):
            try:
                with open("%s/%s/children" % (task_dir, tid)) as f:
                    kids.update(int(x) for x in f.read().split())
            except FileNotFoundError:
                pass
    except FileNotFoundError:
        return []
    if not kids:
        # Kernels without the children file: scan for the parent.
        kids = {p for p in _all_pids()
                if (_proc_stat(p) or ("Z", 0, 0))[1] == pid}
    return sorted(p for p in kids
                  if (_proc_stat(p) or ("Z",))[0] != "Z")


def is_zygote(pid):
    """PID's process title is a --preload zygote's ("NAME: zygote ...")."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return b": zygote" in f.read()
    except OSError:
        return False


def alive(pid):
    """PID exists and is not a zombie."""
    st = _proc_stat(pid)
    return st is not None and st[0] != "Z"


def wait_gone(pids, timeout, what="processes to exit", interval=0.01):
    """Poll until none of PIDS is alive; the monotonic time that was seen."""
    return wait_until(lambda: (not [p for p in pids if alive(p)]
                               and time.monotonic()),
                      timeout, what, interval=interval)


def status_kib(pid, field):
    """FIELD (VmRSS, RssAnon, ...) of /proc/PID/status, in KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for pid %d" % (field, pid))


def vm_rss_kib(pid):
    return status_kib(pid, "VmRSS")


def read_response(s):
    """Read one small 200 response whole from socket S (Content-Length or
    chunked), so the connection is idle after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, "connection closed before a response"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    lower = head.lower()
    if b"content-length:" in lower:
        n = int(lower.split(b"content-length:")[1].split(b"\r\n")[0])
        while len(rest) < n:
            chunk = s.recv(65536)
            assert chunk
            rest += chunk
    else:
        while not rest.endswith(b"0\r\n\r\n"):
            chunk = s.recv(65536)
            assert chunk
            rest += chunk


def settled_rss(pid):
    """The worker's VmRSS (KiB) once two reads in a row agree: the loop
    has finished with what the last batch of connections sent."""
    last = [None]

    def same():
        v = vm_rss_kib(pid)
        ok = v == last[0]
        last[0] = v
        return ok

    wait_until(same, 10, "the worker's RSS to settle", interval=0.05)
    return last[0]


def fd_count(pid):
    """Open file descriptors of PID (/proc/PID/fd)."""
    return len(os.listdir("/proc/%d/fd" % pid))


def settled_fds(pid, timeout=10):
    """PID's fd count once it has not changed for 0.5 s (a connection
    closed a moment ago may still be lingering on the server's side)."""
    last = [fd_count(pid), time.monotonic()]

    def steady():
        n = fd_count(pid)
        if n != last[0]:
            last[:] = [n, time.monotonic()]
        return time.monotonic() - last[1] >= 0.5 and n

    return wait_until(steady, timeout, "the fd count of %d to settle" % pid,
                      interval=0.05)


def clean_env(extra=None, inline=False):
    """The environment a server is started with."""
    env = dict(os.environ)
    for k in ("PYTHONHOME", "PYTHONPATH", "VIRTUAL_ENV", "SLUICE_INLINE",
              "SLUICE_WORKER_BIN"):
        env.pop(k, None)
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    if inline:
        env["SLUICE_INLINE"] = "1"
    env.update(extra or {})
    return env


def base_command():
    if PEER == "gunicorn":
        return ["/usr/bin/gunicorn", "-k", "gthread"]
    if PEER:
        raise RuntimeError("unknown SLUICE_E2E_PEER=%r" % PEER)
    return [sluice_bin()]


def peer_args(args):
    """ARGS as the peer spells them (gunicorn has one odd option name)."""
    if PEER != "gunicorn":
        return list(args)
    return ["--limit-request-field_size" if a == "--limit-request-field-size"
            else a for a in args]


class ServerFailed(AssertionError):
    pass


class Server:
    """One sluice process tree serving APP (module:callable)."""

    def __init__(self, workdir, app="wsgi_app:app", *, args=(), env=None,
                 threads=1, inline=False, workers=1, binds=None,
                 pythonpath=(str(APPS),), ready_path="/__ready",
                 host="127.0.0.1", binary=None, prefix=()):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.app = app
        self.threads = threads
        self.inline = inline
        self.workers = workers
        self.error_log = self.workdir / "error.log"
        self.call_log = self.workdir / "calls.log"
        self.stdout_path = self.workdir / "stdout.txt"
        self.stderr_path = self.workdir / "stderr.txt"
        self.ready_path = ready_path
        if binds is None:
            binds = ["%s:%d" % (host, free_port(host))]
        self.binds = list(binds)
        self.host = self.port = self.unix_path = None
        for b in self.binds:
            if b.startswith("unix:"):
                self.unix_path = self.unix_path or b[5:]
            elif self.port is None:
                h, _, p = b.rpartition(":")
                self.host, self.port = h.strip("[]"), int(p)
        self.args = [str(a) for a in args]
        # TLS mode: every listener speaks TLS, unless the test brought
        # certificates of its own (tls_helpers.TLSServer)
        self.tls = TLS and "--certfile" not in self.args
        self.extra_env = dict(env or {})
        self.pythonpath = list(pythonpath)
        self.binary = binary  # instead of SLUICE_BIN: a copy a test replaces
        # a command the server runs under, e.g. ["prlimit", "--nofile=64:64",
        # "--"]: it must exec the server, keeping the pid
        self.prefix = [str(a) for a in prefix]
        self.proc = None
        self.stop_problems = []

    # -- life cycle

    def command(self):
        cmd = list(self.prefix)
        cmd += [str(self.binary)] if self.binary else base_command()
        for b in self.binds:
            cmd += ["-b", b]
        cmd += ["-w", str(self.workers), "--threads", str(self.threads)]
        for p in self.pythonpath:
            cmd += ["--pythonpath", p]
        cmd += ["--error-logfile", str(self.error_log)]
        if self.tls:
            cmd += tls_server_args()
        cmd += peer_args(self.args)
        cmd.append(self.app)
        return cmd

    def start(self):
        env = clean_env(inline=self.inline)
        env["E2E_CALL_LOG"] = str(self.call_log)
        env["E2E_TMP"] = str(self.workdir)
        env.update(self.extra_env)
        self.call_log.touch()
        with open(self.stdout_path, "wb") as out, \
                open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                self.command(), env=env, cwd=str(self.workdir),
                stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _try_connect(self):
        if self.proc.poll() is not None:
            raise ServerFailed("server exited with status %s before it "
                               "served\n%s" % (self.proc.returncode,
                                               self.diagnostics()))
        try:
            c = self.connect(timeout=2)
        except OSError:
            return None
        return c

    def _wait_ready(self):
        end = time.monotonic() + START_TIMEOUT
        conn = wait_until(self._try_connect, START_TIMEOUT,
                          "the server to accept on %s" % self.binds[0])
        if self.ready_path is None:
            conn.close()
            return
        with conn:
            conn.timeout = max(1.0, end - time.monotonic())
            conn.sock.settimeout(conn.timeout)
            try:
                conn.send(b"GET %s HTTP/1.1\r\nHost: ready\r\n"
                          b"Connection: close\r\n\r\n"
                          % self.ready_path.encode())
                conn.read_response()
            except (OSError, HTTPError) as e:
                raise ServerFailed("server accepted but did not answer its "
                                   "first request (%s)\n%s"
                                   % (e, self.diagnostics()))

    def stop(self, sig=signal.SIGTERM):
        """Stop the tree; return (and remember) a list of problems seen."""
        problems = []
        if self.proc is None:
            return problems
        pgid = self.proc.pid
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                problems.append("%s did not exit within %ss of %s; killed"
                                % (self.describe(), STOP_TIMEOUT, sig.name))
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)
                self.proc.wait(STOP_TIMEOUT)
            else:
                if self.proc.returncode != 0:
                    problems.append("%s exited with status %s after %s"
                                    % (self.describe(), self.proc.returncode,
                                       sig.name))
        try:
            wait_until(lambda: not live_pids_in_group(pgid), 5,
                       "the server's processes to exit")
        except AssertionError:
            left = live_pids_in_group(pgid)
            problems.append("%s left processes %s running after the "
                            "supervisor exited; killed" % (self.describe(),
                                                            left))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
        self.stop_problems = problems
        return problems

    def describe(self):
        mode = "inline" if self.inline else "pump"
        if self.tls:
            mode += " tls"
        return "server[%s %s threads=%d workers=%d]" % (
            self.app, mode, self.threads, self.workers)

    def diagnostics(self):
        parts = ["command: %s" % " ".join(self.command())]
        for label, path in (("stderr", self.stderr_path),
                            ("error log", self.error_log)):
            try:
                data = path.read_text(errors="replace")
            except FileNotFoundError:
                data = "(none)"
            parts.append("--- %s (last 3000 chars):\n%s" % (label, data[-3000:]))
        return "\n".join(parts)

    # -- observation

    @property
    def pid(self):
        return self.proc.pid

    def worker_pids(self):
        """The supervisor's children but its --preload zygotes."""
        return [p for p in children_of(self.proc.pid) if not is_zygote(p)]

    def zygote_pids(self):
        """The supervisor's --preload zygotes (one per generation)."""
        return [p for p in children_of(self.proc.pid) if is_zygote(p)]

    def wait_workers(self, n, timeout=START_TIMEOUT):
        return wait_until(lambda: (len(self.worker_pids()) == n
                                   and self.worker_pids()),
                          timeout, "%d worker processes" % n)

    def error_log_text(self):
        try:
            return self.error_log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_mark(self):
        """A position in the error log; pass it to wait_for_log(since=)."""
        try:
            return self.error_log.stat().st_size
        except FileNotFoundError:
            return 0

    def log_since(self, mark):
        try:
            with open(self.error_log, "rb") as f:
                f.seek(mark)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def wait_for_log(self, needle, timeout=5, since=0):
        """Poll until NEEDLE appears in the error log after SINCE; return
        the log text after SINCE."""
        wait_until(lambda: needle in self.log_since(since), timeout,
                   "%r in the error log" % needle)
        return self.log_since(since)

    def calls(self):
        return self.call_log.read_text(errors="replace").splitlines()

    def wait_for_call(self, needle, timeout=5):
        return wait_until(lambda: [l for l in self.calls() if needle in l],
                          timeout, "%r in the call log" % needle)

    def called(self, needle):
        return [l for l in self.calls() if needle in l]

    # -- connections

    def connect(self, timeout=IO_TIMEOUT):
        """A RawConn to the first bind (over TLS in TLS mode)."""
        if self.port is not None:
            return RawConn.tcp(self.host, self.port, timeout, tls=self.tls)
        return RawConn.unix(self.unix_path, timeout, tls=self.tls)

    def get(self, target, headers=(), timeout=IO_TIMEOUT):
        """One request on a fresh connection (Connection: close)."""
        with self.connect(timeout) as c:
            return c.request("GET", target,
                             headers=list(headers) + [("Connection", "close")])


def serving(s):
    """Start server S, yield it, stop it; what went wrong in it (its stop
    problems) fails the caller. For fixtures: yield from serving(s)."""
    s.start()
    try:
        yield s
    finally:
        problems = s.stop()
    if problems:
        raise AssertionError("; ".join(problems) + "\n" + s.diagnostics())


@contextlib.contextmanager
def running(workdir, app="wsgi_app:app", **kw):
    """Start a Server for a with-block; fail its exit on stop problems."""
    yield from serving(Server(workdir, app, **kw))


# ------------------------------------------------------------ supervisor tests

SANITIZER_ENV = ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS")
ACTIVATE = shutil.which("systemd-socket-activate") or \
    "/usr/bin/systemd-socket-activate"


def write_app(directory):
    """A copy of tests/apps/sup_app.py in DIRECTORY (created); returns the
    directory, where a test may put BROKEN or IMPORT_SLEEP."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(APPS / "sup_app.py", directory / "sup_app.py")
    return directory


def sup_server(tmp_path, workers=1, args=(), env=None, inline=False,
               name="srv", binary=None):
    """A Server for sup_app (not started) with its own app directory,
    TMP_PATH/NAME-app."""
    appdir = write_app(tmp_path / (name + "-app"))
    return Server(tmp_path / name, "sup_app:app", workers=workers,
                  args=list(args), env=env, inline=inline,
                  pythonpath=(str(appdir),), ready_path="/pid",
                  binary=binary)


def worker_pid_of(server, timeout=5):
    """The pid of the worker that answers a GET /pid (sup_app, drain_app)."""
    return int(server.get("/pid", timeout=timeout).body)


def activate_command(listen, env=(), fdname=None):
    """The systemd-socket-activate command that listens on LISTEN
    (host:port, or a list of them: one socket each) and execs the command
    appended to it with LISTEN_FDS. ENV: NAME or NAME=VALUE to pass on; the
    tool passes nothing it is not told to, so a sanitized build's options
    are added here."""
    cmd = [ACTIVATE]
    for addr in [listen] if isinstance(listen, str) else listen:
        cmd += ["-l", addr]
    if fdname:
        cmd += ["--fdname", fdname]
    for k in list(env) + [k for k in SANITIZER_ENV if k in os.environ]:
        cmd += ["-E", k]
    return cmd


class ActivatedServer(Server):
    """A server started by systemd-socket-activate, which listens on the
    port, waits for the first connection and execs sluice with LISTEN_FDS
    (the same pid, so stopping and cleaning up work as for Server)."""

    def command(self):
        keep = ["E2E_CALL_LOG", "E2E_TMP"] + list(self.extra_env)
        if self.inline:
            keep.append("SLUICE_INLINE")
        # sluice takes the socket from LISTEN_FDS; its -b is ignored.
        return activate_command("%s:%d" % (self.host, self.port), keep) + \
            super().command()


class NotifySocket:
    """A NOTIFY_SOCKET owned by the test: every datagram, with its sender's
    pid (SO_PASSCRED), in arrival order."""

    def __init__(self):
        # sun_path is short: not under pytest's long tmp_path
        self.dir = tempfile.mkdtemp(prefix="sl-notify-")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.setblocking(False)
        self.messages = []  # (pid, {key: value}, monotonic time)

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def poll(self):
        while True:
            try:
                data, anc, _, _ = self.sock.recvmsg(
                    4096, socket.CMSG_SPACE(struct.calcsize("iII")))
            except BlockingIOError:
                return self.messages
            pid = None
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and \
                        kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("iII", payload[:12])[0]
            fields = dict(line.split("=", 1)
                          for line in data.decode().split("\n") if "=" in line)
            self.messages.append((pid, fields, time.monotonic()))

    def find(self, key, value=None, start=0):
        """Index of the first message from START on that has KEY (=VALUE)."""
        for i, (_, f, _) in enumerate(self.poll()[start:], start):
            if key in f and (value is None or f[key] == value):
                return i
        return None

    def wait(self, key, value=None, start=0, timeout=20):
        return wait_until(
            lambda: (lambda i: i + 1 if i is not None else None)(
                self.find(key, value, start)),
            timeout, "%s=%s from index %d in %s"
            % (key, value or "*", start, self.messages)) - 1

    def states(self):
        """The sequence of READY/RELOADING/STOPPING/MAINPID messages."""
        out = []
        for _, f, _ in self.poll():
            for k in ("MAINPID", "RELOADING", "READY", "STOPPING"):
                if k in f:
                    out.append(k)
        return out


# ------------------------------------------------------------------ the CLI

def run_cli(args, timeout=20, env=None, cwd=None):
    """Run the binary to completion with ARGS; (status, stdout, stderr).

    A run that outlives TIMEOUT has its whole process group killed and
    fails the test.
    """
    cmd = base_command() + [str(a) for a in args]
    proc = subprocess.Popen(cmd, env=clean_env(env), cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError("%s still running after %ss\nstderr: %r"
                             % (cmd, timeout, err[-2000:]))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out.decode(errors="replace"), \
        err.decode(errors="replace")


# ------------------------------------------------------------------ raw HTTP

class HTTPError(Exception):
    """The bytes received do not form the expected response."""

    def __init__(self, msg, data=b"", response=None):
        super().__init__("%s; bytes so far: %r" % (msg, bytes(data)[:2000]))
        self.data = bytes(data)
        self.response = response


class PeerClosed(HTTPError):
    """EOF (or a reset) before a complete response."""


class PeerReset(PeerClosed):
    """The peer reset the connection (RST, not an orderly close)."""


class ReadTimeout(HTTPError):
    """Nothing more arrived within the timeout."""


class Response:
    def __init__(self):
        self.version = None
        self.status = None
        self.reason = None
        self.headers = []
        self.body = b""
        self.trailers = []
        self.chunked = False
        self.close_delimited = False
        self.chunk_sizes = []
        self.raw = b""

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def has_token(self, name, token):
        """Whether header NAME lists TOKEN (case-insensitive, comma list)."""
        vals = ",".join(self.header_all(name)).lower().split(",")
        return token.lower() in [v.strip() for v in vals]

    def json(self):
        import json
        return json.loads(self.body)

    def __repr__(self):
        return "<Response %s %s %r body=%d bytes>" % (
            self.status, self.reason, self.headers, len(self.body))


STATUS_RE = re.compile(rb"^(HTTP/\d\.\d) (\d{3})(?: (.*))?$")


class RawConn:
    """A client socket with an exact-bytes HTTP/1.x response reader. SOCK
    may be a TLS one (ssl.SSLSocket): tcp() and unix() with TLS make it."""

    def __init__(self, sock, timeout=IO_TIMEOUT):
        self.sock = sock
        self.timeout = timeout
        sock.settimeout(timeout)
        self.buf = bytearray()
        self.eof = False
        self.consumed = bytearray()

    @classmethod
    def tcp(cls, host, port, timeout=IO_TIMEOUT, tls=False):
        """Connected to HOST:PORT; with TLS, after the handshake
        (tls_wrap())."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect((host, port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if tls:
                s = tls_wrap(s, host)
        except BaseException:
            s.close()
            raise
        return cls(s, timeout)

    @classmethod
    def unix(cls, path, timeout=IO_TIMEOUT, tls=False):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(path)
            if tls:
                s = tls_wrap(s, None)
        except BaseException:
            s.close()
            raise
        return cls(s, timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.sock.close()

    @property
    def local_port(self):
        return self.sock.getsockname()[1]

    def send(self, data):
        self.sock.sendall(data)

    def half_close(self):
        """Send no more (a FIN; see half_close()); reading goes on."""
        half_close(self.sock)

    def _fill(self, what):
        if self.eof:
            raise PeerClosed("connection closed while reading %s" % what,
                             self.consumed + self.buf)
        try:
            data = self.sock.recv(262144)
        except socket.timeout:
            raise ReadTimeout("no data for %.1fs while reading %s"
                              % (self.sock.gettimeout(), what),
                              self.consumed + self.buf)
        except ConnectionResetError:
            self.eof = True
            raise PeerReset("connection reset while reading %s" % what,
                            self.consumed + self.buf)
        if not data:
            self.eof = True
            raise PeerClosed("connection closed while reading %s" % what,
                             self.consumed + self.buf)
        self.buf += data

    def _take(self, n):
        out = bytes(self.buf[:n])
        del self.buf[:n]
        self.consumed += out
        return out

    def idle_state(self):
        """What the peer did to this idle connection, without waiting:
        "open", "eof", "reset" or "data" (bytes nobody asked for)."""
        if isinstance(self.sock, ssl.SSLSocket):
            return self._tls_idle_state()
        self.sock.settimeout(0)
        try:
            data = self.sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return "open"
        except ConnectionResetError:
            return "reset"
        finally:
            self.sock.settimeout(self.timeout)
        return "eof" if data == b"" else "data"

    def _tls_idle_state(self):
        """idle_state() over TLS, which cannot peek: a record that arrived
        is read (a session ticket is no data; bytes are kept in the
        buffer), and a record not yet whole counts as nothing yet."""
        if self.sock.pending():
            return "data"
        self.sock.settimeout(0)
        try:
            data = self.sock.recv(65536)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError,
                BlockingIOError):
            return "open"
        except ConnectionResetError:
            return "reset"
        finally:
            self.sock.settimeout(self.timeout)
        if data == b"":
            return "eof"
        self.buf += data
        return "data"

    def read_line(self, what="a line", limit=65536):
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line = self._take(i + 1)
                if not line.endswith(b"\r\n"):
                    raise HTTPError("line not ended by CRLF: %r" % line,
                                    self.consumed)
                return line[:-2]
            if len(self.buf) > limit:
                raise HTTPError("line too long", self.consumed + self.buf)
            self._fill(what)

    def read_exact(self, n, what="body"):
        while len(self.buf) < n:
            self._fill(what)
        return self._take(n)

    def read_available(self, timeout=0.2):
        """Whatever arrives within TIMEOUT (b"" when nothing; EOF noted)."""
        self.sock.settimeout(timeout)
        try:
            self._fill("anything")
        except (ReadTimeout, PeerClosed):
            pass
        finally:
            self.sock.settimeout(self.timeout)
        return self._take(len(self.buf))

    def read_until_eof(self, timeout=None, what="the end of the connection"):
        """All bytes until the peer closes; ReadTimeout if it does not."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            while True:
                try:
                    self._fill(what)
                except PeerClosed:
                    return self._take(len(self.buf))
        finally:
            self.sock.settimeout(self.timeout)

    def expect_eof(self, timeout=5):
        """Assert the peer closes within TIMEOUT without sending more."""
        rest = self.read_until_eof(timeout)
        assert rest == b"", "unexpected bytes before close: %r" % rest[:500]

    def read_head(self, response=None):
        r = response or Response()
        self.consumed = bytearray()
        line = self.read_line("the status line")
        m = STATUS_RE.match(line)
        if not m:
            raise HTTPError("bad status line %r" % line, self.consumed)
        r.version = m.group(1).decode()
        r.status = int(m.group(2))
        r.reason = (m.group(3) or b"").decode("latin-1")
        while True:
            line = self.read_line("the response headers")
            if line == b"":
                break
            if b":" not in line or line[:1] in (b" ", b"\t"):
                raise HTTPError("bad header line %r" % line, self.consumed)
            k, _, v = line.partition(b":")
            r.headers.append((k.decode("latin-1"),
                              v.strip(b" \t").decode("latin-1")))
        return r

    def read_response(self, method="GET"):
        """Read one complete response (a 1xx is returned as it is)."""
        r = self.read_head()
        try:
            self._read_body(r, method)
        except HTTPError as e:
            e.response = r
            r.raw = bytes(self.consumed)
            raise
        r.raw = bytes(self.consumed)
        return r

    def _read_body(self, r, method):
        if method == "HEAD" or 100 <= r.status < 200 or r.status in (204, 304):
            return
        te = [t.strip().lower() for t in
              ",".join(r.header_all("Transfer-Encoding")).split(",") if t.strip()]
        if te:
            if te[-1] != "chunked":
                raise HTTPError("unsupported transfer-encoding %r" % te,
                                self.consumed)
            r.chunked = True
            body = bytearray()
            while True:
                line = self.read_line("a chunk size")
                size_s = line.split(b";", 1)[0].strip()
                if not re.fullmatch(rb"[0-9a-fA-F]+", size_s):
                    raise HTTPError("bad chunk size line %r" % line,
                                    self.consumed)
                size = int(size_s, 16)
                if size == 0:
                    break
                r.chunk_sizes.append(size)
                body += self.read_exact(size, "chunk data")
                r.body = bytes(body)
                if self.read_exact(2, "chunk CRLF") != b"\r\n":
                    raise HTTPError("chunk not followed by CRLF", self.consumed)
            while True:
                line = self.read_line("the trailers")
                if line == b"":
                    break
                r.trailers.append(line)
            r.body = bytes(body)
            return
        cl = r.header_all("Content-Length")
        if cl:
            if len(set(cl)) != 1 or not cl[0].isdigit():
                raise HTTPError("bad Content-Length %r" % cl, self.consumed)
            n = int(cl[0])
            while len(self.buf) < n:
                try:
                    self._fill("the body")
                except HTTPError:
                    r.body = bytes(self.buf)
                    raise
            r.body = self._take(n)
            return
        r.close_delimited = True
        try:
            r.body = self.read_until_eof(what="a close-delimited body")
        except ReadTimeout:
            r.body = bytes(self.buf)
            raise

    def request(self, method, target, headers=(), body=None,
                version="HTTP/1.1", host="e2e.test"):
        self.send(build_request(method, target, headers, body, version, host))
        return self.read_response(method)


def build_request(method, target, headers=(), body=None, version="HTTP/1.1",
                  host="e2e.test"):
    """Bytes of one request; adds Host (unless None) and Content-Length."""
    lines = ["%s %s %s" % (method, target, version)]
    names = {k.lower() for k, _ in headers}
    if host is not None and "host" not in names:
        lines.append("Host: %s" % host)
    for k, v in headers:
        lines.append("%s: %s" % (k, v))
    if body is not None and "content-length" not in names \
            and "transfer-encoding" not in names:
        lines.append("Content-Length: %d" % len(body))
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + (body or b"")


def chunked(body, sizes=(7,), ext=b"", trailers=b""):
    """BODY in chunked framing, chunk sizes cycling through SIZES."""
    out = bytearray()
    pos = 0
    i = 0
    while pos < len(body):
        n = sizes[i % len(sizes)]
        i += 1
        piece = body[pos:pos + n]
        pos += len(piece)
        out += b"%x%s\r\n%s\r\n" % (len(piece), ext, piece)
    out += b"0\r\n" + trailers + b"\r\n"
    return bytes(out)


# ------------------------------------------------------------ http.client use

def http_client(server, timeout=IO_TIMEOUT):
    """An http.client connection to SERVER; HTTPS when SERVER is TLS."""
    import http.client
    if getattr(server, "tls", False):
        return http.client.HTTPSConnection(server.host, server.port,
                                           timeout=timeout,
                                           context=tls_pki()["context"])
    return http.client.HTTPConnection(server.host, server.port,
                                      timeout=timeout)


def http_call(server, method, path, body=None, headers=None,
              header_dict=False):
    """One request through http.client: (status, [(name, value)], body),
    or with HEADER_DICT the response headers as a dict (name as sent; the
    last of a repeated one wins)."""
    conn = http_client(server)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        got = r.getheaders()
        return r.status, dict(got) if header_dict else got, r.read()
    finally:
        conn.close()


def chunked_then_reuse(server, path, index_body):
    """GET PATH through http.client: it must come back 200 and chunked, and
    the connection must then serve GET / (INDEX_BODY) too. PATH's body."""
    conn = http_client(server)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        assert r.status == 200
        assert r.getheader("Transfer-Encoding") == "chunked"
        body = r.read()
        # the connection is reusable after the chunked body
        conn.request("GET", "/")
        assert conn.getresponse().read() == index_body
    finally:
        conn.close()
    return body


def multipart(fields=(), files=()):
    """(content_type, body) for FIELDS [(name, value)] and FILES
    [(name, filename, content_type, data)]."""
    import uuid
    boundary = "e2e-%s" % uuid.uuid4().hex
    out = bytearray()
    for name, value in fields:
        out += b"--%s\r\n" % boundary.encode()
        out += b'Content-Disposition: form-data; name="%s"\r\n\r\n' \
            % name.encode()
        out += value.encode("utf-8") + b"\r\n"
    for name, filename, ctype, data in files:
        out += b"--%s\r\n" % boundary.encode()
        out += (b'Content-Disposition: form-data; name="%s"; '
                b'filename="%s"\r\n' % (name.encode(), filename.encode()))
        out += b"Content-Type: %s\r\n\r\n" % ctype.encode()
        out += data + b"\r\n"
    out += b"--%s--\r\n" % boundary.encode()
    return "multipart/form-data; boundary=%s" % boundary, bytes(out)


# ------------------------------------------------------------------ load

class Req:
    """One request of a load's mix, and what a good answer to it is.

    TARGET is sent with METHOD, HEADERS and BODY (Host and Content-Length
    added; "Connection: close" too on a connection that is not kept
    alive), or RAW as it is, which may hold several pipelined requests:
    RESPONSES says how many answers it gets. A good answer has STATUS, the
    body EXPECT when that is given, and passes CHECK(response) when that is
    given; with PID (the default for /pid) its body is the pid of the worker
    that answered, which the load counts. A FRESH request is sent on a new
    connection.
    """

    def __init__(self, target="/", method="GET", headers=(), body=None,
                 raw=None, responses=1, status=200, expect=None, check=None,
                 pid=None, fresh=False):
        self.target, self.method, self.fresh = target, method, fresh
        self.headers, self.body, self.raw = list(headers), body, raw
        self.responses = responses
        self.status, self.expect, self.check = status, expect, check
        self.pid = target == "/pid" if pid is None else pid

    def data(self, keep_alive):
        if self.raw is not None:
            return self.raw
        close = [] if keep_alive else [("Connection", "close")]
        return build_request(self.method, self.target, self.headers + close,
                             self.body)

    def judge(self, r):
        """(kind, detail, pid): kind "ok" or what is wrong with R."""
        if r.status != self.status:
            return "status", "%d %r" % (r.status, r.body[:100]), None
        if self.expect is not None and r.body != self.expect:
            return "body", "%r, not %r" % (r.body[:100],
                                            self.expect[:100]), None
        if self.check is not None and not self.check(r):
            return "check", repr(r), None
        if self.pid:
            if not r.body.isdigit():
                return "body", "not a pid: %r" % r.body[:100], None
            return "ok", None, int(r.body)
        return "ok", None, None


class Outcome:
    """What came of one request (or of one attempt to connect): T, the
    monotonic time; KIND, "ok" or a failure (see Load); the worker's PID
    for a good /pid answer; REUSED, whether the connection had carried a
    request before; DETAIL for the report."""

    __slots__ = ("t", "target", "kind", "status", "pid", "reused", "detail")

    def __init__(self, t, target, kind, status=None, pid=None, reused=False,
                 detail=None):
        self.t, self.target, self.kind, self.status = t, target, kind, status
        self.pid, self.reused, self.detail = pid, reused, detail

    def __repr__(self):
        return "<%s %s %s%s>" % (self.kind, self.target, self.status or "",
                                 ": " + self.detail if self.detail else "")


class Load:
    """CONNS client threads sending the requests of MIX to a server, each
    outcome recorded, until stop(), REQUESTS requests in all, or DURATION
    seconds, whichever comes first.

    TARGET is a Server or a (host, port), spoken to over TLS when the
    Server is (a (host, port): in TLS mode). MIX holds Req objects or targets
    (GET); each thread takes them in order (ORDER "cycle") or at random
    ("random", seeded by the thread's number). KEEP_ALIVE: True, every
    thread keeps its connection alive (and opens a new one when the server
    closes it or says Connection: close); False, every request has a fresh
    connection and Connection: close; "mixed", even-numbered threads keep
    alive, odd ones do not. Before reusing an idle connection a thread
    checks whether the server has closed it meanwhile, as a client's pool
    does; that is not a failure. PACE (lo, hi): each thread waits a random
    time in that range between requests (and before its first); none: as
    fast as the server answers.

    Outcome kinds: ok (the Req's good answer); failures: refused (connect()
    refused), connect (any other connect error), reset, eof (closed before
    a complete response), timeout, bad (unparsable), status, body, check
    (not the Req's answer), idle-reset, unsolicited (bytes on an idle
    connection), error (anything else). count(kind) counts them, and the
    notes idle-closed-by-server and told-to-close.
    """

    def __init__(self, target, mix=("/pid",), conns=4, keep_alive=False,
                 order="cycle", pace=None, requests=None, duration=120.0,
                 timeout=IO_TIMEOUT):
        if isinstance(target, tuple):
            self.host, self.port = target
            self.tls = TLS
        else:
            self.host, self.port = target.host, target.port
            self.tls = getattr(target, "tls", False)
        self.mix = [m if isinstance(m, Req) else Req(m) for m in mix]
        self.conns = conns
        self.keep_alive = keep_alive
        self.order = order
        self.pace = pace
        self.requests = requests
        self.duration = duration
        self.timeout = timeout
        self.outcomes = []
        self.counts = Counter()
        self.pid_counts = Counter()   # pid -> good /pid answers
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.threads = []
        self.events = []          # (time since start, what the test did)
        self.t0 = self.deadline = None
        self._claimed = 0

    # -- running

    def start(self):
        self.t0 = time.monotonic()
        self.deadline = self.t0 + self.duration
        for i in range(self.conns):
            t = threading.Thread(target=self._run, args=(i,), daemon=True,
                                 name="load-%d" % i)
            t.start()
            self.threads.append(t)
        return self

    def stop(self):
        self.halt.set()
        for t in self.threads:
            t.join(self.timeout + 5)
        alive = [t.name for t in self.threads if t.is_alive()]
        assert not alive, "load threads still running: %s" % alive
        return self

    def run(self):
        """Start, and wait until REQUESTS (or DURATION) ends the load."""
        self.start()
        for t in self.threads:
            t.join(self.duration + self.timeout + 5)
        if time.monotonic() >= self.deadline:
            self.event("DURATION (%ss) ran out" % self.duration)
        return self.stop()

    def __enter__(self):
        self.start()
        first = min(10, self.requests or 10)
        wait_until(lambda: self.total() >= first, 10, "the load to start")
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- results

    def now(self):
        return time.monotonic() - self.t0

    def event(self, what):
        """Note something the test did, for the failure report."""
        with self.lock:
            self.events.append((self.now(), what))

    def total(self):
        """How many outcomes have been recorded."""
        with self.lock:
            return len(self.outcomes)

    def count(self, what):
        with self.lock:
            return self.counts[what]

    def failed(self, since=0.0, allow=()):
        """The failures (Outcome) from monotonic time SINCE on, but for
        the kinds in ALLOW."""
        with self.lock:
            return [o for o in self.outcomes if o.kind != "ok"
                    and o.kind not in allow and o.t >= since]

    def pids(self):
        """The workers that answered a /pid request."""
        with self.lock:
            return set(self.pid_counts)

    def answered_by(self, pids):
        """How many /pid requests workers PIDS answered."""
        with self.lock:
            return sum(self.pid_counts[p] for p in pids)

    def wait_answers(self, pids, n=50, timeout=10):
        """Wait until PIDS have answered N more /pid requests."""
        base = self.answered_by(pids)
        wait_until(lambda: self.answered_by(pids) >= base + n, timeout,
                   "%d answers from workers %s" % (n, sorted(pids)))

    def wait_served_by(self, pids, timeout=10):
        """Wait until each of PIDS has answered a /pid request."""
        wait_until(lambda: set(pids) <= self.pids(), timeout,
                   "requests served by %s" % sorted(pids))

    def summary(self):
        with self.lock:
            c = dict(self.counts)
        return ", ".join("%s=%d" % kv for kv in sorted(c.items()))

    def failure_report(self, fails=None, limit=25):
        """FAILS (default: every failure), the counts and the events, for
        an assertion message."""
        fails = self.failed() if fails is None else fails
        kinds = Counter(o.kind for o in fails)
        lines = ["%d failed requests (%s); counts: %s" % (
            len(fails), dict(kinds), self.summary())]
        for o in fails[:limit]:
            lines.append("  t=%.3fs %s %s (%s connection): %s" % (
                o.t - self.t0, o.kind, o.target,
                "reused" if o.reused else "new", o.detail))
        if len(fails) > limit:
            lines.append("  ... and %d more" % (len(fails) - limit))
        with self.lock:
            events = list(self.events)
        lines.append("events: " + ", ".join("t=%.3fs %s" % e
                                            for e in events))
        return "\n".join(lines)

    # -- one thread

    def _record(self, target, kind, status=None, pid=None, reused=False,
                detail=None):
        o = Outcome(time.monotonic(), target, kind, status, pid, reused,
                    None if detail is None else str(detail)[:300])
        with self.lock:
            self.outcomes.append(o)
            self.counts[kind] += 1
            if kind != "ok":
                self.counts["failed"] += 1
            if pid is not None:
                self.pid_counts[pid] += 1

    def _note(self, what):
        with self.lock:
            self.counts[what] += 1

    def _claim(self, n):
        """Whether N more requests fit in the bounds."""
        if time.monotonic() >= self.deadline:
            return False
        with self.lock:
            if self.requests is not None and \
                    self._claimed + n > self.requests:
                return False
            self._claimed += n
            return True

    def _pause(self, rng):
        if self.pace:
            self.halt.wait(rng.uniform(*self.pace))

    def _check_idle(self, conn):
        """CONN, or None when the server closed it while it was idle."""
        state = conn.idle_state()
        if state == "open":
            return conn
        conn.close()
        if state == "eof":
            self._note("idle-closed-by-server")
        elif state == "reset":
            self._record("-", "idle-reset", reused=True,
                         detail="idle keep-alive connection reset")
        else:
            self._record("-", "unsolicited", reused=True,
                         detail="bytes on an idle connection")
        return None

    def _exchange(self, conn, req, keep, reused):
        """Send REQ on CONN and judge its answers; whether CONN may carry
        the next request."""
        try:
            conn.send(req.data(keep))
            answers = [conn.read_response(req.method)
                       for _ in range(req.responses)]
        except (PeerReset, ConnectionResetError, BrokenPipeError) as e:
            self._record(req.target, "reset", reused=reused, detail=e)
            return False
        except ReadTimeout as e:
            self._record(req.target, "timeout", reused=reused, detail=e)
            return False
        except PeerClosed as e:
            self._record(req.target, "eof", reused=reused,
                         detail="%d bytes, then EOF" % len(e.data))
            return False
        except HTTPError as e:
            self._record(req.target, "bad", reused=reused, detail=e)
            return False
        except OSError as e:
            self._record(req.target, "error", reused=reused, detail=repr(e))
            return False
        good = True
        for r in answers:
            kind, detail, pid = req.judge(r)
            self._record(req.target, kind, r.status, pid, reused, detail)
            good = good and kind == "ok"
        if not (keep and good):
            return False
        if answers[-1].has_token("Connection", "close"):
            self._note("told-to-close")
            return False
        return True

    def _run(self, idx):
        rng = random.Random(idx)
        keep = self.keep_alive is True or \
            (self.keep_alive == "mixed" and idx % 2 == 0)
        conn = None
        n = 0
        if self.pace:
            # Spread the first requests over one pacing interval.
            self.halt.wait(rng.uniform(0, self.pace[1]))
        while not self.halt.is_set():
            if self.order == "random":
                req = rng.choice(self.mix)
            else:
                req = self.mix[n % len(self.mix)]
            n += 1
            if not self._claim(req.responses):
                break
            if conn is not None and req.fresh:
                conn.close()
                conn = None
            if conn is not None:
                conn = self._check_idle(conn)
            reused = conn is not None
            if conn is None:
                try:
                    conn = RawConn.tcp(self.host, self.port, self.timeout,
                                       tls=self.tls)
                except ConnectionRefusedError as e:
                    self._record(req.target, "refused", detail=repr(e))
                    self._pause(rng)
                    continue
                except OSError as e:
                    self._record(req.target, "connect", detail=repr(e))
                    self._pause(rng)
                    continue
            if not self._exchange(conn, req, keep, reused):
                conn.close()
                conn = None
            self._pause(rng)
        if conn is not None:
            conn.close()


# ------------------------------------------------------- command-line errors

BASE = ["--pythonpath", str(APPS)]


def bind_args():
    return ["-b", "127.0.0.1:%d" % free_port()]


def problem_lines(err):
    """Lines of stderr that are not informational log lines."""
    return [l for l in err.splitlines()
            if l.strip() and not re.search(r"\[(INFO|DEBUG)\]", l)]


def assert_usage_error(rc, err, *needles):
    assert rc == 2, (rc, err)
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("sluice: error:"), lines[0]
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def assert_one_error(rc, err, *needles):
    assert rc == 2, (rc, err)
    assert "Traceback" not in err, err
    lines = problem_lines(err)
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def copied_binary(tmp_path):
    """TMP_PATH/bin/sluice with sluice-worker beside it: copies of the
    binaries that a test can replace (new files renamed over them in the
    same directory). Returns the copy of sluice."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy2(worker_bin(), bindir / "sluice-worker")
    binary = bindir / "sluice"
    shutil.copy2(sluice_bin(), binary)
    return binary
