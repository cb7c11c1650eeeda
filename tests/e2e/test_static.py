"""Static files (issue 31): --static URL_PREFIX=DIR, served by the worker's
loop thread without calling the app.

One tree of files is made for the module (a temporary directory every user
can enter): DIR "static" behind /static (Cache-Control "public,
max-age=60"), DIR "deep" behind the longer /static/deep/ ("no-cache"),
DIR "files" behind /files/ (no Cache-Control), and next to them a
secret.txt that no symlink may reach. Its files carry a fixed mtime, so
Last-Modified is known to the second. Most tests share one server (WSGI,
pump mode) whose app, wsgi_app, writes every call to the call log: a
static path that reached the app would show there.

What is checked: the headers of a 200 (Content-Type from /etc/mime.types,
read here too, with "; charset=utf-8" for text, JavaScript and JSON),
conditionals (304, 412), ranges (206, 416, the whole file when there are
several or the header is malformed, If-Range), precompressed .br/.gz
siblings, every refusal (400 for a bad path, 404 for hidden files,
directories, FIFOs, sockets and symlinks out of DIR, 403 for an unreadable
file, 405 for other methods), prefix matching, HEAD, keep-alive and
pipelining, big files byte for byte, a file renamed over or truncated while
a slow client reads it, 10,000 requests leaving no descriptor open, the
access log, the metrics' handler label, HTTP/2 and TLS, inline mode and an
ASGI app, the configuration file, the usage errors, a DIR that does not
exist, and the drain.

In run.sh's TLS pass (SLUICE_E2E_TLS=1) the shared server and the
make_server ones speak TLS; the tests that pick their own transport (h2,
the TLS server of their own) are plain_only.
"""

import contextlib
import email.utils
import gzip
import hashlib
import os
import re
import shutil
import signal
import socket
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

import helpers
from conftest import WSGI_MODES
from helpers import (APPS, assert_usage_error, build_request, run_cli,
                     wait_until)

pytestmark = pytest.mark.sluice_only

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


# ------------------------------------------------------------ headers

@pytest.mark.parametrize("name", ["hello.txt", "page.html", "style.css",
                                  "app.js", "data.json", "pic.png",
                                  "pic.svg", "blob.zzq", "noext"])
def test_200_headers(srv, tree, name):
    r = fresh(srv, "GET", "/static/" + name)
    assert r.status == 200, r
    assert r.body == tree.data[name]
    assert r.header("Content-Type") == expected_type(name), r
    assert r.header("Content-Length") == str(len(tree.data[name]))
    assert r.header("Last-Modified") == LM
    assert STRONG_ETAG.match(r.header("ETag", "")), r
    assert r.header("Accept-Ranges") == "bytes"
    assert r.has_token("Vary", "Accept-Encoding"), r
    assert r.header("Cache-Control") == CC_STATIC
    assert IMF_FIXDATE.match(r.header("Date", "")), r
    assert r.header("Server") == "sluice"
    assert r.header("Content-Encoding") is None
    for h in ("Content-Type", "Content-Length", "ETag", "Last-Modified",
              "Date", "Server"):
        assert len(r.header_all(h)) == 1, (h, r)


def test_mime_types_is_what_the_table_is_read_from():
    """The expectations above come from /etc/mime.types: a sanity check
    that reading it worked."""
    assert expected_type("x.txt") == "text/plain; charset=utf-8"
    assert expected_type("x.png") == "image/png"
    assert expected_type("x.zzq") == "application/octet-stream"


def test_cache_control_per_prefix(srv):
    r = fresh(srv, "GET", "/static/deep/x.txt")
    assert (r.status, r.body) == (200, b"from deep\n")
    assert r.header("Cache-Control") == CC_DEEP
    r = fresh(srv, "GET", "/files/hello.txt")
    assert (r.status, r.body) == (200, b"hello from files\n")
    assert r.header("Cache-Control") is None, r
    assert r.header("ETag") and r.header("Last-Modified")


def test_keep_alive_by_default(srv):
    with srv.connect() as c:
        for _ in range(3):
            r = c.request("GET", "/static/hello.txt")
            assert r.status == 200
            assert not r.has_token("Connection", "close"), r


def test_http_10_closes_after_the_file(srv):
    with srv.connect() as c:
        c.send(b"GET /static/hello.txt HTTP/1.0\r\n\r\n")
        r = c.read_response()
        assert (r.status, r.body) == (200, b"hello, static\n"), r
        c.expect_eof()


def test_etag_changes_with_mtime_and_size(srv, tree):
    path = tree.a / "etag-changes.txt"
    put(path, b"four")
    target = "/static/etag-changes.txt"
    first = fresh(srv, "GET", target)
    os.utime(path, (MTIME + 3600, MTIME + 3600))
    second = fresh(srv, "GET", target)
    assert second.header("Last-Modified") == httpdate(MTIME + 3600)
    assert second.header("ETag") != first.header("ETag")
    put(path, b"five!", mtime=MTIME + 3600)
    third = fresh(srv, "GET", target)
    assert third.body == b"five!"
    assert third.header("ETag") not in (first.header("ETag"),
                                        second.header("ETag"))
    for r in (first, second, third):
        assert STRONG_ETAG.match(r.header("ETag", "")), r


# ------------------------------------------------------------ conditionals

def check_304(r):
    assert r.status == 304, r
    assert r.body == b""
    assert r.header("Last-Modified") == LM
    assert r.header("Cache-Control") == CC_STATIC
    assert r.has_token("Vary", "Accept-Encoding"), r
    assert STRONG_ETAG.match(r.header("ETag", "")), r


def test_if_none_match(srv):
    target = "/static/hello.txt"
    etag = etag_of(srv, target)
    cases = [(etag, 304), ('"nope", %s' % etag, 304), ("*", 304),
             ("W/" + etag, 304), ('"nope"', 200), ('W/"nope"', 200),
             ('"nope", "other"', 200)]
    with srv.connect() as c:  # one connection: a 304 must carry no body
        for value, status in cases:
            r = c.request("GET", target, headers=[("If-None-Match", value)])
            assert r.status == status, (value, r)
            if status == 304:
                check_304(r)
                assert r.header("ETag") == etag
            else:
                assert r.body == b"hello, static\n"
        r = c.request("HEAD", target, headers=[("If-None-Match", etag)])
        check_304(r)
        assert c.request("GET", target).status == 200


def test_if_modified_since(srv):
    target = "/static/hello.txt"
    etag = etag_of(srv, target)
    cases = [([("If-Modified-Since", LM)], 304),
             ([("If-Modified-Since", httpdate(MTIME + 86400))], 304),
             ([("If-Modified-Since", httpdate(MTIME - 1))], 200),
             ([("If-Modified-Since", "not a date")], 200),
             # If-None-Match decides alone when it is there
             ([("If-None-Match", '"nope"'), ("If-Modified-Since", LM)], 200),
             ([("If-None-Match", etag),
               ("If-Modified-Since", httpdate(MTIME - 86400))], 304)]
    with srv.connect() as c:
        for headers, status in cases:
            r = c.request("GET", target, headers=headers)
            assert r.status == status, (headers, r)
            if status == 304:
                check_304(r)
            else:
                assert r.body == b"hello, static\n"


def test_if_match_and_if_unmodified_since(srv):
    target = "/static/hello.txt"
    etag = etag_of(srv, target)
    cases = [([("If-Match", '"nope"')], 412),
             ([("If-Match", "W/" + etag)], 412),  # strong comparison
             ([("If-Match", etag)], 200),
             ([("If-Match", '"nope", ' + etag)], 200),
             ([("If-Match", "*")], 200),
             ([("If-Unmodified-Since", httpdate(MTIME - 86400))], 412),
             ([("If-Unmodified-Since", LM)], 200),
             ([("If-Unmodified-Since", httpdate(MTIME + 86400))], 200)]
    with srv.connect() as c:
        for headers, status in cases:
            r = c.request("GET", target, headers=headers)
            assert r.status == status, (headers, r)
            if status == 200:
                assert r.body == b"hello, static\n"
        assert c.request("GET", target).status == 200


# ------------------------------------------------------------ ranges

def test_single_ranges(srv, tree):
    data = tree.data["r.bin"]
    size = len(data)
    cases = [("bytes=0-9", 0, 9), ("bytes=990-", 990, 999),
             ("bytes=-7", 993, 999), ("bytes=0-0", 0, 0),
             ("bytes=995-5000", 995, 999), ("bytes=-5000", 0, 999),
             ("bytes=100-899", 100, 899)]
    with srv.connect() as c:
        for value, first, last in cases:
            r = c.request("GET", "/static/r.bin", headers=[("Range", value)])
            assert r.status == 206, (value, r)
            assert r.header("Content-Range") == "bytes %d-%d/%d" % (
                first, last, size), (value, r)
            assert r.header("Content-Length") == str(last - first + 1)
            assert r.body == data[first:last + 1], value
            assert r.header("Content-Type") == "application/octet-stream"
            assert STRONG_ETAG.match(r.header("ETag", "")), r
            assert r.header("Last-Modified") == LM


def test_unsatisfiable_ranges_are_416(srv, tree):
    size = len(tree.data["r.bin"])
    with srv.connect() as c:
        for value in ("bytes=%d-" % size, "bytes=%d-%d" % (size, size + 10),
                      "bytes=5000-6000", "bytes=-0"):
            r = c.request("GET", "/static/r.bin", headers=[("Range", value)])
            assert r.status == 416, (value, r)
            assert r.header("Content-Range") == "bytes */%d" % size, r
        assert c.request("GET", "/static/r.bin").status == 200


def test_several_or_malformed_ranges_get_the_whole_file(srv, tree):
    data = tree.data["r.bin"]
    with srv.connect() as c:
        for value in ("bytes=0-1,5-6", "bytes=0-9, 20-29", "bytes=abc",
                      "bytes=9-2", "items=0-9", "bytes 0-9", "bytes=",
                      "bytes=1-2-3"):
            r = c.request("GET", "/static/r.bin", headers=[("Range", value)])
            assert r.status == 200, (value, r)
            assert r.header("Content-Range") is None, (value, r)
            assert r.body == data, value


def test_if_range(srv, tree):
    data = tree.data["r.bin"]
    etag = etag_of(srv, "/static/r.bin")
    cases = [(etag, 206), (LM, 206), ('"other"', 200), ("W/" + etag, 200),
             (httpdate(MTIME + 86400), 200), (httpdate(MTIME - 86400), 200)]
    with srv.connect() as c:
        for value, status in cases:
            r = c.request("GET", "/static/r.bin",
                          headers=[("Range", "bytes=10-19"),
                                   ("If-Range", value)])
            assert r.status == status, (value, r)
            assert r.body == (data[10:20] if status == 206 else data), value


# ------------------------------------------------------------ precompressed

def test_precompressed_siblings(srv, tree):
    css, br, gz = (tree.data[n] for n in ("style.css", "style.css.br",
                                         "style.css.gz"))
    cases = [(None, css, None), ("gzip, deflate, br", br, "br"),
             ("br", br, "br"), ("BR", br, "br"), ("gzip", gz, "gzip"),
             ("br;q=0, gzip", gz, "gzip"), ("br;q=0.0, gzip;q=0.5", gz,
                                            "gzip"),
             ("gzip;q=1, br;q=0.1", br, "br"),  # any q > 0 for br wins
             ("br;q=0, gzip;q=0", css, None), ("gzip;q=0", css, None),
             ("identity", css, None), ("deflate", css, None),
             ("*", br, "br"), ("gzip, *;q=0", gz, "gzip")]
    etags = {}
    with srv.connect() as c:
        for ae, body, coding in cases:
            headers = [] if ae is None else [("Accept-Encoding", ae)]
            r = c.request("GET", "/static/style.css", headers=headers)
            assert r.status == 200, (ae, r)
            assert r.header("Content-Encoding") == coding, (ae, r)
            assert r.body == body, ae
            assert r.header("Content-Length") == str(len(body))
            assert r.header("Content-Type") == "text/css; charset=utf-8"
            assert r.has_token("Vary", "Accept-Encoding"), r
            assert r.header("Cache-Control") == CC_STATIC
            etags.setdefault(coding, set()).add(r.header("ETag"))
    assert all(len(v) == 1 for v in etags.values()), etags
    assert len({v.pop() for v in etags.values()}) == 3, etags


def test_precompressed_gzip_only_sibling(srv, tree):
    js, gz = tree.data["only.js"], tree.data["only.js.gz"]
    with srv.connect() as c:
        r = c.request("GET", "/static/only.js",
                      headers=[("Accept-Encoding", "br, gzip")])
        assert (r.header("Content-Encoding"), r.body) == ("gzip", gz), r
        r = c.request("GET", "/static/only.js",
                      headers=[("Accept-Encoding", "br")])
        assert (r.header("Content-Encoding"), r.body) == (None, js), r


def test_precompressed_ranges_and_conditionals(srv, tree):
    br = tree.data["style.css.br"]
    ae = [("Accept-Encoding", "br")]
    br_etag = etag_of(srv, "/static/style.css", ae)
    with srv.connect() as c:
        r = c.request("GET", "/static/style.css",
                      headers=ae + [("Range", "bytes=5-24")])
        assert r.status == 206, r
        assert r.header("Content-Encoding") == "br"
        assert r.header("Content-Range") == "bytes 5-24/%d" % len(br)
        assert r.body == br[5:25]
        r = c.request("GET", "/static/style.css",
                      headers=ae + [("If-None-Match", br_etag)])
        check_304(r)
        # the identity representation is another one: its ETag differs
        r = c.request("GET", "/static/style.css",
                      headers=[("If-None-Match", br_etag)])
        assert r.status == 200 and r.body == tree.data["style.css"], r


# ------------------------------------------------------------ refusals

BAD_PATHS = [
    "/static/../secret.txt", "/static/sub/../hello.txt",
    "/static/./hello.txt", "/static/sub/./deep.txt", "/static/sub/..",
    "/static/%2e%2e/secret.txt", "/static/%2E%2E/secret.txt",
    "/static/.%2e/secret.txt", "/static/%2e./secret.txt",
    "/static/%2e/hello.txt", "/static/sub/%2e%2e/hello.txt",
    "/static/sub%2Fdeep.txt", "/static/sub%2fdeep.txt",
    "/static/hello.txt%00", "/static/hello%00.txt",
    "/static/hello.txt%", "/static/hello.txt%2", "/static/hel%zzlo.txt",
    "/static/hel%g0lo.txt", "/static/hello%01.txt", "/static/hello%1f.txt",
    "/static/hello%0a.txt", "/static/hello%7f.txt",
    "/static/sub%5Cdeep.txt", "/static/sub\\deep.txt",
]


@pytest.mark.parametrize("target", BAD_PATHS)
def test_bad_path_is_400(srv, target):
    r = fresh(srv, "GET", target)
    assert r.status == 400, (target, r)
    assert b"secret" not in r.body and b"hello, static" not in r.body


def test_raw_control_byte_is_400(srv):
    with srv.connect() as c:
        c.send(b"GET /static/hel\x01lo.txt HTTP/1.1\r\nHost: x\r\n"
               b"Connection: close\r\n\r\n")
        r = c.read_response()
    assert r.status == 400, r


NOT_FOUND = [
    "/static/.env", "/static/.git/config", "/static/%2eenv",
    "/static/%2Egit/config", "/static/sub/.hidden", "/static/missing.txt",
    "/static/dir", "/static/dir/", "/static/sub", "/static/", "/static/sock",
    "/static/out-abs", "/static/out-rel", "/static/out-dir/secret.txt",
    "/static/nope/deeper/x.txt",
    "/static/deep/hello.txt", "/files/x.txt",
]


@pytest.mark.parametrize("target", NOT_FOUND)
def test_not_found(srv, target):
    r = fresh(srv, "GET", target)
    assert r.status == 404, (target, r)
    for leak in (b"outside every DIR", b"SECRET=1", b"[core]",
                 b"hidden in sub", b"no index pages", b"hello, static",
                 b"deep in sub"):
        assert leak not in r.body, (target, r.body)
    assert not no_static_calls(srv)


def test_file_with_a_trailing_slash_is_404(srv):
    """A file is no folder: "hello.txt/" names nothing (open(2) says
    ENOTDIR; nginx and Apache answer 404), and answering it would give
    the page another URL, against which its relative links resolve."""
    r = fresh(srv, "GET", "/static/hello.txt/")
    assert r.status == 404, r


@pytest.mark.parametrize("target,name", [
    ("/static/in-link", "sub/deep.txt"), ("/static/in-dir/deep.txt",
                                          "sub/deep.txt"),
    ("/static/a..b.txt", "a..b.txt"), ("/static/dir/index.html",
                                       "dir/index.html"),
    ("/static/a+b.txt", "a+b.txt"), ("/static/a%2Bb.txt", "a+b.txt"),
    ("/static/with%20space.txt", "with space.txt"),
    ("/static/caf%C3%A9.txt", "caf\u00e9.txt"),
    ("/static/h%65llo.txt", "hello.txt"), ("/static/sub/deep.txt",
                                           "sub/deep.txt")])
def test_served(srv, tree, target, name):
    """Symlinks that stay inside DIR, names with dots, plus signs, spaces
    and UTF-8, percent-encoded letters."""
    r = fresh(srv, "GET", target)
    assert r.status == 200, (target, r)
    assert r.body == tree.data[name]


def test_fifo_is_404_and_the_worker_does_not_block(srv, tree):
    fifo = tree.a / "fifo"
    try:
        with srv.connect(timeout=5) as c:
            c.send(build_request("GET", "/static/fifo"))
            # another connection is answered meanwhile, and at once
            t0 = time.monotonic()
            r = fresh(srv, "GET", "/static/hello.txt")
            took = time.monotonic() - t0
            assert r.status == 200, r
            first = c.read_response()
            assert first.status == 404, first
            assert c.request("GET", "/static/hello.txt").status == 200
        assert took < 2, "the next request took %.2fs" % took
    finally:
        # a worker stuck opening the FIFO for reading is let go: a writer
        # comes and goes
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.skipif(os.geteuid() == 0,
                    reason="root reads any file; "
                           "test_unreadable_file_is_403_as_nobody covers it")
def test_unreadable_file_is_403(srv):
    r = fresh(srv, "GET", "/static/locked.txt")
    assert r.status == 403, r
    assert b"locked" not in r.body


@pytest.mark.skipif(os.geteuid() != 0,
                    reason="the workers run as nobody only when sluice is "
                           "started as root")
@pytest.mark.plain_only("about file permissions, not the transport")
def test_unreadable_file_is_403_as_nobody(tree):
    """As root, through a worker running as nobody (-u): the file's mode
    0 is then a refusal of the kernel's, as for a non-root server."""
    workdir = tree.root / "srv-nobody"  # the worker must reach its log
    workdir.mkdir()
    workdir.chmod(0o755)
    s = helpers.Server(workdir, env={"E2E_CALL_LOG": ""},
                       args=static_args(tree) + ["-u", "nobody"])
    with served(s):
        r = fresh(s, "GET", "/static/locked.txt")
        assert r.status == 403, r
        assert b"locked" not in r.body
        assert fresh(s, "GET", "/static/hello.txt").status == 200


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS",
                                    "PATCH"])
def test_other_methods_are_405(srv, method):
    with srv.connect() as c:
        r = c.request(method, "/static/hello.txt",
                      headers=[("Content-Length", "0")])
        assert r.status == 405, r
        assert r.header("Allow") == ALLOW, r
        if not r.has_token("Connection", "close"):
            assert c.request("GET", "/static/hello.txt").status == 200


def test_405_after_a_request_body(srv):
    """A POST with a body: answered 405, and the connection either goes on
    after the body or says it closes."""
    with srv.connect() as c:
        r = c.request("POST", "/static/hello.txt", body=b"x" * 5000)
        assert r.status == 405 and r.header("Allow") == ALLOW, r
        if not r.has_token("Connection", "close"):
            r = c.request("GET", "/static/hello.txt")
            assert (r.status, r.body) == (200, b"hello, static\n"), r
    assert not no_static_calls(srv)


# ------------------------------------------------------------ prefixes

def test_prefix_matching(srv, tree):
    cases = [
        # (target, status, body or None for the app's 404, from the app)
        ("/staticfoo/hello.txt?pm=1", 404, None, True),
        ("/STATIC/hello.txt?pm=2", 404, None, True),
        # matched on the raw path: an encoded prefix is not the prefix
        ("/st%61tic/hello.txt?pm=3&rawprefix", 404, None, True),
        ("/hello?pm=4", 200, b"hello\n", True),
        ("/static/hello.txt?pm=5&x=../..%2e%2e%00", 200,
         b"hello, static\n", False),
        ("/static/deep/x.txt?pm=6", 200, b"from deep\n", False),
        ("/static/deepx.txt?pm=7", 200, b"not deep\n", False),
        ("/files/hello.txt?pm=8", 200, b"hello from files\n", False),
    ]
    for target, status, body, by_app in cases:
        r = fresh(srv, "GET", target)
        assert r.status == status, (target, r)
        if body is not None:
            assert r.body == body, (target, r)
        tag = "pm=%s" % target.split("pm=")[1].split("&")[0]
        assert bool(srv.called(tag)) == by_app, (target, srv.calls()[-5:])
    assert fresh(srv, "GET", "/static/deep/x.txt").header(
        "Cache-Control") == CC_DEEP


def test_app_never_called_for_a_static_path(srv):
    targets = ["/static/hello.txt", "/static/missing", "/static/.env",
               "/static/dir/", "/static/../x", "/static/a%2fb",
               "/static/fifo-none", "/static/deep/x.txt", "/static/deep/no",
               "/files/hello.txt", "/files/no"]
    statuses = Counter()
    for t in targets:
        for method in ("GET", "HEAD", "POST"):
            headers = [("Content-Length", "0")] if method == "POST" else []
            r = fresh(srv, method, t + "?probe=never", headers)
            statuses[r.status] += 1
    assert statuses[200] == 6 and statuses[405] >= 3, statuses
    assert fresh(srv, "GET", "/hello?probe=after").status == 200
    srv.wait_for_call("probe=after")
    assert not srv.called("probe=never"), srv.called("probe=never")
    assert not no_static_calls(srv), no_static_calls(srv)


# ------------------------------------------------------------ HEAD, keep-alive

def test_head(srv, tree):
    with srv.connect() as c:
        g = c.request("GET", "/static/page.html")
        h = c.request("HEAD", "/static/page.html")
        assert h.status == 200 and h.body == b"", h
        for name in ("Content-Type", "Content-Length", "ETag",
                     "Last-Modified", "Accept-Ranges", "Cache-Control"):
            assert h.header(name) == g.header(name), name
        h = c.request("HEAD", "/static/big50.bin")
        assert h.header("Content-Length") == str(len(tree.data["big50.bin"]))
        # range handling is GET's alone (RFC 9110 14.2): HEAD ignores it
        h = c.request("HEAD", "/static/r.bin",
                      headers=[("Range", "bytes=0-9")])
        assert h.status == 200 and h.header("Content-Length") == "1000", h
        # nothing of a body came after the heads
        r = c.request("GET", "/static/hello.txt")
        assert (r.status, r.body) == (200, b"hello, static\n")
        assert c.read_available(0.1) == b""


def test_keep_alive_static_and_app_mixed(srv, tree):
    etag = etag_of(srv, "/static/hello.txt")
    with srv.connect() as c:
        port = c.local_port
        for i in range(40):
            kind = i % 4
            if kind == 0:
                r = c.request("GET", "/static/hello.txt")
                assert (r.status, r.body) == (200, b"hello, static\n")
            elif kind == 1:
                r = c.request("GET", "/hello?ka=%d" % i)
                assert (r.status, r.body) == (200, b"hello\n")
            elif kind == 2:
                r = c.request("GET", "/static/hello.txt",
                              headers=[("If-None-Match", etag)])
                assert r.status == 304
            else:
                r = c.request("GET", "/static/r.bin",
                              headers=[("Range", "bytes=1-3")])
                assert (r.status, r.body) == (206, tree.data["r.bin"][1:4])
            assert not r.has_token("Connection", "close"), r
        assert c.local_port == port


def test_pipelined(srv, tree):
    etag = etag_of(srv, "/static/hello.txt")
    plan = [
        ("GET", "/static/hello.txt", [], 200, b"hello, static\n"),
        ("GET", "/hello?pl=1", [], 200, b"hello\n"),
        ("HEAD", "/static/big5.bin", [], 200, b""),
        ("GET", "/static/hello.txt", [("If-None-Match", etag)], 304, b""),
        ("GET", "/static/r.bin", [("Range", "bytes=-5")], 206,
         tree.data["r.bin"][-5:]),
        ("GET", "/static/missing", [], 404, None),
        ("GET", "/static/big5.bin", [], 200, tree.data["big5.bin"]),
        ("GET", "/static/r.bin", [("Range", "bytes=2000-")], 416, None),
        ("GET", "/static/deep/x.txt", [], 200, b"from deep\n"),
        ("GET", "/hello?pl=2", [], 200, b"hello\n"),
        ("GET", "/static/style.css", [("Accept-Encoding", "gzip")], 200,
         tree.data["style.css.gz"]),
    ] * 2
    with srv.connect() as c:
        c.send(b"".join(build_request(m, t, h) for m, t, h, _, _ in plan))
        for m, t, h, status, body in plan:
            r = c.read_response(m)
            assert r.status == status, (m, t, r)
            if body is not None:
                assert r.body == body, (m, t)
        assert c.read_available(0.1) == b""


# ------------------------------------------------------------ big files

@pytest.mark.parametrize("name", ["big5.bin", "big50.bin"])
def test_big_file_and_ranges(srv, tree, name):
    data = tree.data[name]
    n = len(data)
    with srv.connect(timeout=30) as c:
        r = c.request("GET", "/static/" + name)
        assert r.status == 200 and r.header("Content-Length") == str(n)
        assert sha(r.body) == sha(data)
        for first, last in ((1, n // 2), (MiB - 1, 3 * MiB + 1),
                            (n - MiB - 3, n - 1), (n // 3, n - 1)):
            r = c.request("GET", "/static/" + name,
                          headers=[("Range", "bytes=%d-%d" % (first, last))])
            assert r.status == 206, r
            assert r.header("Content-Range") == "bytes %d-%d/%d" % (
                first, last, n)
            assert sha(r.body) == sha(data[first:last + 1]), (first, last)
        r = c.request("GET", "/static/" + name,
                      headers=[("Range", "bytes=-%d" % (MiB + 1))])
        assert r.status == 206 and sha(r.body) == sha(data[-MiB - 1:])
        r = c.request("GET", "/static/" + name,
                      headers=[("Range", "bytes=%d-" % (n - 12345))])
        assert r.status == 206 and r.body == data[n - 12345:]


def test_file_renamed_over_while_sent(srv, tree):
    path = tree.a / "swap.bin"
    old = put(path, os.urandom(16 * MiB))
    new = os.urandom(16 * MiB - 5)
    with slow_conn(srv) as c:
        c.send(build_request("GET", "/static/swap.bin"))
        r = c.read_head()
        assert r.status == 200 and r.header("Content-Length") == str(len(old))
        first = c.read_exact(64 * 1024)
        put(tree.a / ".swap.tmp", new)
        os.rename(tree.a / ".swap.tmp", path)
        rest = c.read_exact(len(old) - len(first))
        assert sha(first + rest) == sha(old), "the old file, whole"
        # the next request on the same connection: the new file
        r = c.request("GET", "/static/swap.bin")
        assert r.status == 200 and sha(r.body) == sha(new)
    r = fresh(srv, "GET", "/static/swap.bin")
    assert sha(r.body) == sha(new)


def test_file_truncated_while_sent(srv, tree):
    path = tree.a / "trunc.bin"
    data = put(path, os.urandom(16 * MiB))
    pids = srv.worker_pids()
    with slow_conn(srv) as c:
        c.send(build_request("GET", "/static/trunc.bin"))
        r = c.read_head()
        assert r.status == 200 and r.header("Content-Length") == str(len(data))
        first = c.read_exact(64 * 1024)
        os.truncate(path, MiB)
        got = first + c.read_until_eof(timeout=10)
    assert len(got) < len(data), "the body came whole from a truncated file"
    # up to the new end, the file's bytes; past it, what sendfile(2) had
    # queued still refers to the page cache the truncation zeroed
    assert got[:MiB] == data[:min(len(got), MiB)], "bytes not the file's"
    r = fresh(srv, "GET", "/static/hello.txt")
    assert (r.status, r.body) == (200, b"hello, static\n")
    assert srv.worker_pids() == pids, "the worker was replaced"


# ------------------------------------------------------------ descriptors

def test_10000_requests_leave_no_descriptor_open(srv, tree):
    wpid = srv.worker_pids()[0]
    etag = etag_of(srv, "/static/hello.txt")
    before = helpers.settled_fds(wpid)
    mix = [("GET", "/static/hello.txt", [], 200),
           ("GET", "/static/hello.txt", [("If-None-Match", etag)], 304),
           ("GET", "/static/missing.txt", [], 404),
           ("GET", "/static/big5.bin", [("Range", "bytes=100-1099")], 206),
           ("GET", "/static/dir/", [], 404),
           ("HEAD", "/static/r.bin", [], 200),
           ("GET", "/static/style.css", [("Accept-Encoding", "br")], 200),
           ("GET", "/static/out-rel", [], 404)]
    batch = [mix[i % len(mix)] for i in range(50)]
    wire = b"".join(build_request(m, t, h) for m, t, h, _ in batch)
    conns = [srv.connect(timeout=20) for _ in range(4)]
    seen = Counter()
    try:
        for _ in range(50):
            for c in conns:
                c.send(wire)
            for c in conns:
                for m, t, h, status in batch:
                    r = c.read_response(m)
                    assert r.status == status, (m, t, r)
                    seen[status] += 1
    finally:
        for c in conns:
            c.close()
    assert sum(seen.values()) == 10000, seen
    after = helpers.settled_fds(wpid)
    assert srv.worker_pids() == [wpid]
    assert after == before, "fds %d before, %d after: %s" % (
        before, after, sorted(os.listdir("/proc/%d/fd" % wpid)))


# ------------------------------------------------------------ logs, metrics

def test_access_log_lines(srv, tree):
    from test_access_log import GUNICORN_DEFAULT, wait_line
    etag = etag_of(srv, "/static/hello.txt")
    size = len(tree.data["hello.txt"])
    cases = [("GET", "/static/hello.txt?al=200", [], 200),
             ("GET", "/static/hello.txt?al=304",
              [("If-None-Match", etag)], 304),
             ("GET", "/static/r.bin?al=206", [("Range", "bytes=0-9")], 206),
             ("GET", "/static/r.bin?al=416", [("Range", "bytes=5000-")],
              416),
             ("GET", "/static/missing?al=404", [], 404),
             ("GET", "/static/%2e%2e/x?al=400", [], 400),
             ("HEAD", "/static/hello.txt?al=head", [], 200),
             ("POST", "/static/hello.txt?al=405", [("Content-Length", "0")],
              405)]
    got = []
    for m, t, h, status in cases:
        r = fresh(srv, m, t, h)
        assert r.status == status, (t, r)
        got.append(len(r.body))
    assert got[0] == size and got[2] == 10
    for (m, t, _, status), n in zip(cases, got):
        line = wait_line(srv.access_log, t)
        g = GUNICORN_DEFAULT.match(line)
        assert g, line
        assert g.group("r") == "%s %s HTTP/1.1" % (m, t), line
        assert g.group("s") == str(status), line
        assert g.group("b") == (str(n) if n else "-"), (line, n)


def handler_counts(samples):
    """{(handler, code): count} of sluice_requests_total."""
    out = Counter()
    for key, value in samples.items():
        if key.startswith("sluice_requests_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', key))
            out[(labels.get("handler"), labels.get("code"))] += value
    return out


def test_metrics_handler_label(tree, make_server):
    from test_metrics import metrics_server, scrape
    s = metrics_server(make_server, workers=1, args=static_args(tree))
    before = handler_counts(scrape(s))
    assert all(h in ("app", "static") for h, _ in before), before
    etag = etag_of(s, "/static/hello.txt")  # one static 2xx
    for m, t, h in [("GET", "/static/hello.txt", []),
                    ("GET", "/static/r.bin", [("Range", "bytes=0-1")]),
                    ("GET", "/static/hello.txt", [("If-None-Match", etag)]),
                    ("GET", "/static/missing", []),
                    ("POST", "/static/hello.txt", [("Content-Length", "0")]),
                    ("GET", "/hello", []), ("GET", "/hello", [])]:
        fresh(s, m, t, h)
    want = {("static", "2xx"): 3, ("static", "3xx"): 1,
            ("static", "4xx"): 2, ("app", "2xx"): 2}

    def grown():
        now = handler_counts(scrape(s, check=False))
        delta = {k: now[k] - before[k] for k in set(now) | set(before)}
        return delta if sum(delta.values()) >= sum(want.values()) else None

    delta = wait_until(grown, 5, "the requests to be counted")
    delta = {k: v for k, v in delta.items() if v}
    assert delta == want, delta
    text = handler_counts(scrape(s))  # promtool checks the text
    assert all(h in ("app", "static") for h, _ in text), text


# ------------------------------------------------------------ HTTP/2, TLS

@pytest.mark.plain_only("chooses its own transports")
@pytest.mark.parametrize("transport", ["h2c", "tls"])
def test_http2(tree, tmp_path, transport):
    pytest.importorskip("h2", reason="HTTP/2 tests need python3-h2")
    import h2client
    mode = dict(WSGI_MODES["pump"], name="pump")
    if transport == "h2c":
        s = h2client.h2c_server(tmp_path / "srv", mode,
                                args=static_args(tree))
    else:
        s = h2client.h2_tls_server(tmp_path / "srv", helpers.tls_pki(), mode,
                                   args=static_args(tree))
    data, big = tree.data["r.bin"], tree.data["big5.bin"]
    with served(s), h2client.connect(s) as c:
        r = c.get("/static/hello.txt")
        assert (r.status, bytes(r.body)) == (200, b"hello, static\n"), r
        assert r.header("content-type") == "text/plain; charset=utf-8"
        assert r.header("content-length") == "14"
        assert r.header("last-modified") == LM
        assert r.header("cache-control") == CC_STATIC
        etag = r.header("etag")
        assert STRONG_ETAG.match(etag or ""), r
        r = c.get("/static/hello.txt", [("if-none-match", etag)])
        assert (r.status, bytes(r.body)) == (304, b""), r
        assert r.header("etag") == etag
        r = c.get("/static/r.bin", [("range", "bytes=10-29")])
        assert r.status == 206, r
        assert r.header("content-range") == "bytes 10-29/%d" % len(data)
        assert bytes(r.body) == data[10:30]
        r = c.request("HEAD", "/static/big5.bin")
        assert r.status == 200 and r.ended and bytes(r.body) == b"", r
        assert r.header("content-length") == str(len(big))
        r = c.get("/static/big5.bin")
        assert r.status == 200 and sha(bytes(r.body)) == sha(big), r
        r = c.get("/static/.env")
        assert r.status == 404, r
        r = c.request("POST", "/static/hello.txt", body=b"x")
        assert r.status == 405 and r.header("allow") == ALLOW, r
        r = c.get("/hello")
        assert (r.status, bytes(r.body)) == (200, b"hello\n"), r
    assert not no_static_calls(s)


@pytest.mark.plain_only("a TLS server of its own")
def test_tls_big_file(tree, tmp_path):
    from tls_helpers import TLSServer
    data = tree.data["big50.bin"]
    # the session's certificates (one CA, one leaf): cheaper than conftest's
    # pki, which makes eight keys
    s = TLSServer(tmp_path / "srv", helpers.tls_pki(),
                  args=static_args(tree))
    with served(s), s.connect(timeout=30) as c:
        r = c.request("GET", "/static/big50.bin")
        assert r.status == 200 and sha(r.body) == sha(data)
        r = c.request("GET", "/static/big50.bin",
                      headers=[("Range", "bytes=%d-%d" % (MiB + 1,
                                                          20 * MiB))])
        assert r.status == 206 and sha(r.body) == sha(data[MiB + 1:
                                                            20 * MiB + 1])
        r = c.request("GET", "/static/hello.txt")
        assert (r.status, r.body) == (200, b"hello, static\n")


# ------------------------------------------------------------ modes, apps

KINDS = [pytest.param(i, e, id="%s-%s" % (i, e))
         for i in ("wsgi", "asgi") for e in ("pump", "inline")]


@pytest.mark.parametrize("iface,executor", KINDS)
def test_every_app_kind_and_executor(tree, tmp_path, make_server, iface,
                                     executor):
    pythonpath = [str(APPS)]
    app = "wsgi_app:app"
    if iface == "asgi":
        appdir = tmp_path / "app"
        appdir.mkdir()
        (appdir / "static_asgi.py").write_text(COUNTING_ASGI)
        pythonpath.append(str(appdir))
        app = "static_asgi:app"
    s = make_server(app, inline=executor == "inline", pythonpath=pythonpath,
                    args=static_args(tree))
    data = tree.data["r.bin"]
    with s.connect() as c:
        r = c.request("GET", "/static/hello.txt?k=1")
        assert (r.status, r.body) == (200, b"hello, static\n"), r
        etag = r.header("ETag")
        r = c.request("GET", "/static/hello.txt?k=2",
                      headers=[("If-None-Match", etag)])
        assert r.status == 304, r
        r = c.request("GET", "/static/r.bin?k=3",
                      headers=[("Range", "bytes=-10")])
        assert (r.status, r.body) == (206, data[-10:]), r
        r = c.request("HEAD", "/static/r.bin?k=4")
        assert r.status == 200 and r.header("Content-Length") == "1000"
        assert c.request("GET", "/static/.env?k=5").status == 404
        r = c.request("DELETE", "/static/hello.txt?k=6")
        assert r.status == 405 and r.header("Allow") == ALLOW, r
        if r.has_token("Connection", "close"):
            c.close()
            c = s.connect()
        r = c.request("GET", "/hello?k=app")
        assert (r.status, r.body) == (200, b"hello\n"), r
        r = c.request("GET", "/static/big5.bin")
        assert sha(r.body) == sha(tree.data["big5.bin"])
        c.close()
    s.wait_for_call("k=app")
    assert not no_static_calls(s), no_static_calls(s)


# ------------------------------------------------------------ configuration

def test_config_file_and_relative_dirs(tree, tmp_path):
    """`static = ...` lines (repeated), a Cache-Control with a comma quoted
    and not (the value is the line's, commas and all), a relative DIR taken
    from the working directory; and, with --chdir, a relative DIR taken
    from there."""
    workdir = tmp_path / "srv"
    put(workdir / "public" / "p.txt", b"relative to the cwd\n")
    conf = tmp_path / "sluice.conf"
    conf.write_text("static = /cfg=%s\n"
                    "static = /rel/=public\n"
                    "static_cache_control = \"/cfg=private, max-age=7\"\n"
                    "static_cache_control = /rel=public, max-age=9\n"
                    % tree.a)
    s = helpers.Server(workdir, args=["-c", conf])
    with served(s):
        r = fresh(s, "GET", "/cfg/hello.txt")
        assert (r.status, r.body) == (200, b"hello, static\n"), r
        assert r.header("Cache-Control") == "private, max-age=7"
        r = fresh(s, "GET", "/rel/p.txt")
        assert (r.status, r.body) == (200, b"relative to the cwd\n"), r
        assert r.header("Cache-Control") == "public, max-age=9"
        assert fresh(s, "GET", "/hello").body == b"hello\n"
    s = helpers.Server(tmp_path / "srv2",
                       args=["--chdir", tree.root, "--static",
                             "/c/=files"])
    with served(s):
        r = fresh(s, "GET", "/c/hello.txt")
        assert (r.status, r.body) == (200, b"hello from files\n"), r


@pytest.mark.parametrize("args,needles", [
    (["--static", "nodir"], ("--static", "'nodir'")),
    (["--static", "relative=/srv"], ("--static", "'relative=/srv'")),
    (["--static", "=/srv"], ("--static", "'=/srv'")),
    (["--static", "/a=/srv", "--static-cache-control", "/x=no-cache"],
     ("--static-cache-control", "'/x=no-cache'")),
    (["--static-cache-control", "/x=no-cache"],
     ("--static-cache-control", "'/x=no-cache'")),
    (["--static", "/a=/srv", "--static-cache-control", "nocc"],
     ("--static-cache-control", "'nocc'")),
    ([a for i in range(17) for a in ("--static", "/p%d=/srv" % i)],
     ("--static", "16")),
], ids=["no-equals", "no-slash", "empty-prefix", "cc-unknown-prefix",
        "cc-without-static", "cc-no-equals", "seventeen"])
def test_usage_errors(args, needles):
    rc, out, err = run_cli(helpers.BASE + helpers.bind_args() + args +
                           ["wsgi_app:app"], timeout=10)
    assert_usage_error(rc, err, *needles)


def test_usage_accepts_the_same_prefix_with_and_without_slash(tree):
    rc, out, err = run_cli(["--static", "/a/=%s" % tree.a,
                            "--static-cache-control", "/a=no-cache",
                            "--check-config", "wsgi_app:app"])
    assert rc == 0, err


@pytest.mark.parametrize("what", ["missing", "file"])
def test_dir_that_cannot_be_opened_fails_the_boot(tree, tmp_path, what):
    bad = tmp_path / "no-such-dir" if what == "missing" else \
        tree.a / "hello.txt"
    rc, out, err = run_cli(helpers.BASE + helpers.bind_args() +
                           ["--static", "/s=%s" % bad, "wsgi_app:app"],
                           timeout=20)
    assert rc > 0, (rc, err)
    assert "Traceback" not in err, err
    naming = [l for l in err.splitlines() if str(bad) in l]
    assert len(naming) == 1, err
    assert "[ERROR]" in naming[0] or "[CRITICAL]" in naming[0], naming
    assert len(helpers.problem_lines(err)) == 1, err


# ------------------------------------------------------------ the drain

def test_drain_lets_a_big_download_finish(tree, make_server):
    data = tree.data["big50.bin"]
    s = make_server(args=static_args(tree))
    wpid = s.worker_pids()[0]
    c = slow_conn(s)
    try:
        c.send(build_request("GET", "/static/big50.bin"))
        r = c.read_head()
        assert r.status == 200, r
        first = c.read_exact(MiB)
        mark = s.log_mark()
        os.kill(s.pid, signal.SIGTERM)
        s.wait_for_log("draining", since=mark)
        rest = c.read_exact(len(data) - MiB)
        assert sha(first + rest) == sha(data)
    finally:
        c.close()
    helpers.wait_gone([wpid], 10, "the worker to exit")
    assert s.proc.wait(10) == 0, s.log_since(mark)
