"""Static files (issue 31), what is answered: --static URL_PREFIX=DIR,
served by the worker's loop thread without calling the app.

The headers of a 200 (Content-Type from /etc/mime.types, read here too,
with "; charset=utf-8" for text, JavaScript and JSON), conditionals (304,
412), ranges (206, 416, the whole file when there are several or the
header is malformed, If-Range), precompressed .br/.gz siblings, every
refusal (400 for a bad path, 404 for hidden files, directories, FIFOs,
sockets and symlinks out of DIR, 403 for an unreadable file, 405 for
other methods) and prefix matching. The tree and the shared server:
static_helpers.py. How it is served: test_static_serving.py.

In run.sh's TLS pass (SLUICE_E2E_TLS=1) the shared server speaks TLS.
"""

import contextlib
import os
import time
from collections import Counter

import pytest

import helpers
from helpers import build_request
from static_helpers import (MTIME, LM, CC_STATIC, CC_DEEP, ALLOW, IMF_FIXDATE,
                            STRONG_ETAG, served, httpdate, expected_type, put,
                            static_args, fresh, etag_of, no_static_calls)
from static_helpers import tree, srv  # noqa: F401 (fixtures)

pytestmark = pytest.mark.sluice_only


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
