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

With SLUICE_E2E_PEER=gunicorn the same tests run against Debian's gunicorn
(gthread worker), which is how the test logic was checked before sluice
could serve; tests of sluice-only behaviour skip there.
"""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
APPS = REPO / "tests" / "apps"
if str(APPS) not in sys.path:
    sys.path.insert(0, str(APPS))

PEER = os.environ.get("SLUICE_E2E_PEER", "")
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


def vm_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


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
                 host="127.0.0.1"):
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
        self.extra_env = dict(env or {})
        self.pythonpath = list(pythonpath)
        self.proc = None
        self.stop_problems = []

    # -- life cycle

    def command(self):
        cmd = base_command()
        for b in self.binds:
            cmd += ["-b", b]
        cmd += ["-w", str(self.workers), "--threads", str(self.threads)]
        for p in self.pythonpath:
            cmd += ["--pythonpath", p]
        cmd += ["--error-logfile", str(self.error_log)]
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
        return children_of(self.proc.pid)

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
        if self.port is not None:
            return RawConn.tcp(self.host, self.port, timeout)
        return RawConn.unix(self.unix_path, timeout)

    def get(self, target, headers=(), timeout=IO_TIMEOUT):
        """One request on a fresh connection (Connection: close)."""
        with self.connect(timeout) as c:
            return c.request("GET", target,
                             headers=list(headers) + [("Connection", "close")])


@contextlib.contextmanager
def running(workdir, app="wsgi_app:app", **kw):
    """Start a Server for a with-block; fail its exit on stop problems."""
    s = Server(workdir, app, **kw).start()
    try:
        yield s
    finally:
        problems = s.stop()
    if problems:
        raise AssertionError("; ".join(problems) + "\n" + s.diagnostics())


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
    """A client socket with an exact-bytes HTTP/1.x response reader."""

    def __init__(self, sock, timeout=IO_TIMEOUT):
        self.sock = sock
        self.timeout = timeout
        sock.settimeout(timeout)
        self.buf = bytearray()
        self.eof = False
        self.consumed = bytearray()

    @classmethod
    def tcp(cls, host, port, timeout=IO_TIMEOUT):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect((host, port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException:
            s.close()
            raise
        return cls(s, timeout)

    @classmethod
    def unix(cls, path, timeout=IO_TIMEOUT):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(path)
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
            data = b""
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
    import http.client
    return http.client.HTTPConnection(server.host, server.port,
                                      timeout=timeout)


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
