"""Static files (issue 31), how they are served: HEAD, keep-alive and
pipelining, big files byte for byte, a file renamed over or truncated
while a slow client reads it, 10,000 requests leaving no descriptor open,
the access log, the metrics' handler label, HTTP/2 and TLS, inline mode
and an ASGI app, the configuration file, the usage errors, a DIR that
does not exist, and the drain. What is answered: test_static.py.

In run.sh's TLS pass (SLUICE_E2E_TLS=1) the shared server and the
make_server ones speak TLS; the tests that pick their own transport (h2,
the TLS server of their own) are plain_only.
"""

import os
import re
import signal
from collections import Counter

import pytest

import helpers
from conftest import WSGI_MODES
from helpers import (APPS, assert_usage_error, build_request, run_cli,
                     wait_until)
from static_helpers import (MiB, LM, CC_STATIC, ALLOW, STRONG_ETAG,
                            COUNTING_ASGI, served, sha, put, static_args,
                            fresh, slow_conn, etag_of, no_static_calls)
from static_helpers import tree, srv  # noqa: F401 (fixtures)

pytestmark = pytest.mark.sluice_only


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
    from test_access_log import GUNICORN_DEFAULT, wait_line
    mode = dict(WSGI_MODES["pump"], name="pump")
    log = tmp_path / "access.log"
    args = static_args(tree) + ["--access-logfile", str(log)]
    if transport == "h2c":
        s = h2client.h2c_server(tmp_path / "srv", mode, args=args)
    else:
        s = h2client.h2_tls_server(tmp_path / "srv", helpers.tls_pki(), mode,
                                   args=args)
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
        # the access log counts the body's bytes, a file's as well
        for t, status, n in [("/static/hello.txt?al=h2", 200, 14),
                             ("/static/r.bin?al=h2r", 206, 20),
                             ("/static/missing?al=h2", 404, None)]:
            hs = [("range", "bytes=10-29")] if "h2r" in t else []
            r = c.get(t, hs)
            assert r.status == status and len(r.body) == (n or len(r.body))
            g = GUNICORN_DEFAULT.match(wait_line(log, t))
            assert g and g.group("r") == "GET %s HTTP/2.0" % t, g
            assert g.group("s") == str(status), g.groups()
            assert g.group("b") == str(len(r.body)), g.groups()
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
