"""What test_static.py and test_static_serving.py share: the tree of
files a module serves (a temporary directory every user can enter: DIR
"static" behind /static with Cache-Control "public, max-age=60", DIR
"deep" behind the longer /static/deep/ with "no-cache", DIR "files"
behind /files/ with none, and next to them a secret.txt no symlink may
reach; its files carry a fixed mtime, so Last-Modified is known to the
second), the server most tests share (WSGI, pump mode; its app, wsgi_app,
writes every call to the call log, where a static path that reached the
app would show), and the helpers that read its answers.
"""

import contextlib
import email.utils
import gzip
import hashlib
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

import helpers

MiB = 1024 * 1024
MTIME = 1614834367  # Thu, 04 Mar 2021 05:06:07 GMT
LM = email.utils.formatdate(MTIME, usegmt=True)
CC_STATIC = "public, max-age=60"
CC_DEEP = "no-cache"
ALLOW = "GET, HEAD"
IMF_FIXDATE = re.compile(
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} "
    r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
    r"\d{2}:\d{2}:\d{2} GMT$")
STRONG_ETAG = re.compile(r'^"[\x21\x23-\x7e\x80-\xff]*"$')
CHARSET_TYPES = ("application/javascript", "application/json",
                 "text/javascript")

# A WSGI app would answer any of these itself (wsgi_app's 404): a counting
# ASGI app is asgi_app with every HTTP call written to the call log.
COUNTING_ASGI = '''\
"""asgi_app, every HTTP call written to the call log first."""
from asgi_app import app as inner, record


async def app(scope, receive, send):
    if scope["type"] == "http":
        record("call %s %s %s" % (scope["method"], scope["path"],
                                  scope["query_string"].decode()))
    await inner(scope, receive, send)
'''

served = contextlib.contextmanager(helpers.serving)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def httpdate(t):
    return email.utils.formatdate(t, usegmt=True)


def mime_types():
    """{extension: type} from /etc/mime.types (the first type that lists an
    extension)."""
    out = {}
    with open("/etc/mime.types") as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            for ext in words[1:]:
                out.setdefault(ext.lower(), words[0])
    return out


def expected_type(name):
    """The Content-Type the spec gives file NAME."""
    ext = name.rpartition(".")[2].lower() if "." in name else ""
    t = mime_types().get(ext, "application/octet-stream")
    if t.startswith("text/") or t in CHARSET_TYPES:
        t += "; charset=utf-8"
    return t


# ------------------------------------------------------------------ the tree

def put(path, data, mtime=MTIME):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))
    return data


@pytest.fixture(scope="module")
def tree():
    """The module's files (see the module's docstring): .root, the DIRs
    .a (/static), .b (/static/deep/), .c (/files/), and .data, the bytes
    of each file of .a by name."""
    root = Path(tempfile.mkdtemp(prefix="sl-static-"))
    a, b, c = root / "static", root / "deep", root / "files"
    data = {}
    css = b"body { color: #123456; }\n" * 40
    for name, body in [
            ("hello.txt", b"hello, static\n"),
            ("page.html", b"<!doctype html><title>t</title>\n"),
            ("style.css", css),
            ("style.css.br", b"BR" + os.urandom(300)),
            ("style.css.gz", gzip.compress(css)),
            ("app.js", b"console.log('js');\n"),
            ("only.js", b"let only = 1;\n" * 30),
            ("only.js.gz", gzip.compress(b"let only = 1;\n" * 30)),
            ("data.json", b'{"k": 1}\n'),
            ("pic.png", b"\x89PNG\r\n\x1a\n" + os.urandom(64)),
            ("pic.svg", b"<svg xmlns='http://www.w3.org/2000/svg'/>\n"),
            ("blob.zzq", os.urandom(33)),
            ("noext", os.urandom(17)),
            ("r.bin", os.urandom(1000)),
            ("a..b.txt", b"two dots inside a name\n"),
            ("a+b.txt", b"a plus\n"),
            ("with space.txt", b"a space\n"),
            ("caf\u00e9.txt", b"utf-8 name\n"),
            ("deepx.txt", b"not deep\n"),
            ("sub/deep.txt", b"deep in sub\n"),
            ("sub/.hidden", b"hidden in sub\n"),
            ("dir/index.html", b"<p>no index pages</p>\n"),
            (".env", b"SECRET=1\n"),
            (".git/config", b"[core]\n"),
            ("locked.txt", b"locked\n"),
            ("big5.bin", os.urandom(5 * MiB + 7)),
            ("big50.bin", os.urandom(50 * MiB + 3))]:
        data[name] = put(a / name, body)
    put(b / "x.txt", b"from deep\n")
    put(c / "hello.txt", b"hello from files\n")
    put(root / "secret.txt", b"outside every DIR\n")
    os.mkfifo(a / "fifo")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(a / "sock"))  # the file stays after the close
    os.symlink(str(root / "secret.txt"), a / "out-abs")
    os.symlink("../secret.txt", a / "out-rel")
    os.symlink("..", a / "out-dir")
    os.symlink("sub/deep.txt", a / "in-link")
    os.symlink("sub", a / "in-dir")
    for d, dirs, _ in os.walk(root):
        os.chmod(d, 0o755)
    os.chmod(a / "locked.txt", 0)
    try:
        yield SimpleNamespace(root=root, a=a, b=b, c=c, data=data)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def static_args(t):
    return ["--static", "/static=%s" % t.a,
            "--static", "/static/deep/=%s" % t.b,
            "--static", "/files/=%s" % t.c,
            "--static-cache-control", "/static=" + CC_STATIC,
            "--static-cache-control", "/static/deep/=" + CC_DEEP]


@pytest.fixture(scope="module")
def srv(tree, tmp_path_factory):
    """The shared server: wsgi_app in pump mode, the tree's maps, an access
    log (.access_log)."""
    workdir = tmp_path_factory.mktemp("static-srv")
    log = workdir / "access.log"
    s = helpers.Server(workdir, args=static_args(tree) +
                       ["--access-logfile", log])
    s.access_log = log
    yield from helpers.serving(s)


def fresh(s, method, target, headers=()):
    """One request on a new connection (Connection: close)."""
    with s.connect() as c:
        return c.request(method, target,
                         headers=list(headers) + [("Connection", "close")])


def slow_conn(s, rcvbuf=4096):
    """A RawConn to S whose socket has a small receive buffer (set before
    connect(), so the window stays small): a slow reader."""
    family = socket.AF_INET6 if ":" in s.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(helpers.IO_TIMEOUT)
        sock.connect((s.host, s.port))
        if s.tls:
            sock = helpers.tls_wrap(sock, s.host)
    except BaseException:
        sock.close()
        raise
    return helpers.RawConn(sock)


def etag_of(s, target, headers=()):
    r = fresh(s, "GET", target, headers)
    assert r.status == 200, r
    return r.header("ETag")


def no_static_calls(s):
    """Call-log lines of the app for a path under a prefix."""
    return [l for l in s.calls()
            if re.search(r" /(static|files)(/| )", l)
            and "rawprefix" not in l]  # test_prefix_matching's own
