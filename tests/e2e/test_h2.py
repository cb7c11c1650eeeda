"""HTTP/2 end to end (issue 29): the protocol, every executor mode, interop.

Servers speak h2 two ways: cleartext with prior knowledge (`h2c`: the
plain listener takes the HTTP/2 preface, --http2-cleartext
prior-knowledge) in every mode of conftest's tables, and TLS with h2 by
ALPN (`tls`) in the executor kinds (pump, inline); all also speak
HTTP/1.1 (--http-protocols h2,h1). The client is h2client.H2Client
(Python's h2 over a raw socket), so a server that breaks the protocol
makes h2 raise.

What every mode must do over h2, with wsgi_app / asgi_app's routes:
requests as the apps expect them (SERVER_PROTOCOL "HTTP/2", http_version
"2", :authority as Host, cookies joined with "; "), 8 MiB uploads and
downloads under flow control with the bytes checked, several large
responses at once on one connection, streaming, wsgi.file_wrapper, ASGI
pathsend and trailers, 100-continue, HEAD, 204 and 304 without a body,
the health path. Concurrency: a slow stream does not hold up the others
where the mode runs two app calls at once (ASGI in both executors, WSGI
with four lanes); WSGI with one lane, pump or inline, runs one app call
at a time by design, so there the second waits; the loop thread still
answers a PING meanwhile in pump mode, not in inline mode (the app runs on
it). Flow control: a request body's window opens only as the app reads.

Then the settings the options set, ALPN, the access log, request limits,
the drain (TERM and a rolling restart: GOAWAY, the stream in flight
finishes, the connection closes), and other clients: curl, nghttp, h2load
(nghttp2-client) and httpx.

The attacks are test_h2_attacks.py's.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

pytest.importorskip("h2", reason="HTTP/2 tests need python3-h2")

import helpers
from conftest import ASGI_MODES, EXECUTORS, WSGI_MODES
from e2e_data import pattern
from h2client import (H2_ARGS, H2C_ARGS, NO_ERROR, MAX_STREAM_ID, connect,
                      h2_context, h2_tls_server, h2c_server, open_socket)
from helpers import wait_until

pytestmark = [pytest.mark.sluice_only,
              pytest.mark.plain_only("chooses its own transports")]

MiB = 1024 * 1024
SLOW = 1.5       # seconds a slow stream sleeps
SPLIT = 0.6      # "at once" is under this, "waits" at least this
HEALTH = "/healthz"


def asgi_pattern(size):
    """asgi_app's /large body: byte i is i % 251."""
    return (bytes(range(251)) * (size // 251 + 1))[:size]


def transport_params(table):
    """(transport, mode) params: h2c in every mode of TABLE, TLS in the
    executor kinds."""
    out = [pytest.param(("h2c", dict(table[n], name=n)), id="h2c-" + n)
           for n in table]
    out += [pytest.param(("tls", dict(table[n], name=n)), id="tls-" + n)
            for n in EXECUTORS]
    return out


def make_h2_server(tmp_path_factory, pki, label, transport, mode, app,
                   args=(), **kw):
    workdir = tmp_path_factory.mktemp("%s-%s-%s" % (label, transport,
                                                    mode["name"]))
    args = ["--health-path", HEALTH, "--access-logfile",
            str(workdir / "access.log")] + list(args)
    if transport == "tls":
        s = h2_tls_server(workdir, pki, mode, app, args, **kw)
    else:
        s = h2c_server(workdir, mode, app, args, **kw)
    s.mode, s.transport = mode, transport
    return s


@pytest.fixture(scope="module", params=transport_params(WSGI_MODES))
def wsgi(request, tmp_path_factory, pki):
    transport, mode = request.param
    yield from helpers.serving(make_h2_server(
        tmp_path_factory, pki, "h2-wsgi", transport, mode, "wsgi_app:app"))


@pytest.fixture(scope="module", params=transport_params(ASGI_MODES))
def asgi(request, tmp_path_factory, pki):
    transport, mode = request.param
    yield from helpers.serving(make_h2_server(
        tmp_path_factory, pki, "h2-asgi", transport, mode, "asgi_app:app"))


def concurrent(server):
    """Whether SERVER runs two app calls at once."""
    return server.app.startswith("asgi") or server.mode["threads"] > 1


# ------------------------------------------- the request as apps see it


def test_wsgi_environ(wsgi):
    with connect(wsgi) as c:
        r = c.get("/environ", headers=[("cookie", "a=1"), ("cookie", "b=2"),
                                       ("x-e2e", "yes")])
    assert r.status == 200, r
    env = {k: v["value"] for k, v in r.json().items() if isinstance(v, dict)
           and "value" in v}
    assert env["SERVER_PROTOCOL"] == "HTTP/2"
    assert env["HTTP_HOST"] == "localhost:%d" % wsgi.port
    assert env["HTTP_COOKIE"] == "a=1; b=2"
    assert env["HTTP_X_E2E"] == "yes"
    assert env["REQUEST_METHOD"] == "GET" and env["PATH_INFO"] == "/environ"
    assert env["wsgi.url_scheme"] == ("https" if wsgi.transport == "tls"
                                      else "http")
    assert not any(k.startswith("HTTP_:") or k.startswith(":") for k in env)


def test_asgi_scope(asgi):
    with connect(asgi) as c:
        r = c.get("/scope?q=1", headers=[("cookie", "a=1"),
                                         ("cookie", "b=2")])
    assert r.status == 200, r
    scope = r.json()
    assert scope["http_version"] == "2"
    assert scope["scheme"] == ("https" if asgi.transport == "tls"
                               else "http")
    assert scope["path"] == "/scope" and scope["query_string"] == "q=1"
    headers = scope["headers"]
    assert ["host", "localhost:%d" % asgi.port] in headers, headers
    assert [h for h in headers if h[0] == "cookie"] == \
        [["cookie", "a=1; b=2"]], headers
    assert not [h for h in headers if h[0].startswith(":")], headers


def test_response_head_is_h2(wsgi):
    """Connection-specific fields are not sent (h2 itself refuses them:
    the request would fail); :status and the app's fields are."""
    with connect(wsgi) as c:
        r = c.get("/headers")
    assert r.status == 200 and bytes(r.body) == b"headers"
    assert r.header_all("set-cookie") == ["a=1", "b=2"]
    assert r.header("x-custom") == "custom value"
    assert r.header("server") == "sluice" and r.header("date"), r.headers
    for name in ("connection", "keep-alive", "transfer-encoding"):
        assert r.header(name) is None, r.headers


# ------------------------------------------------------------ concurrency


def check_slow_stream_does_not_block_the_others(s):
    with connect(s) as c:
        tag = "slowblock-%d" % time.monotonic_ns()
        slow = c.start("GET", "/slow/%s?t=%s" % (tag, SLOW))
        s.wait_for_call(tag)
        t0 = time.monotonic()
        fast = c.response(c.start("GET", "/hello"), timeout=SLOW + 10)
        fast_at = time.monotonic() - t0
        r = c.response(slow, timeout=SLOW + 10)
        assert r.status == 200 and fast.status == 200, (r, fast)
        assert bytes(fast.body) == b"hello\n"
        if concurrent(s):
            assert fast_at < SPLIT, "a stream waited %.2fs for a slow one " \
                "on the same connection" % fast_at
            assert fast.t_end < r.t_end
        else:
            # one lane (pump) or the loop thread (inline): one app call
            # at a time, by design
            assert fast_at >= SPLIT and fast.t_end >= r.t_end, \
                "two app calls overlapped with one lane (%.2fs)" % fast_at


def check_loop_answers_ping_while_the_app_runs(s):
    """In pump mode the loop thread is free while an app runs: a PING is
    acknowledged at once. WSGI inline mode runs the app on the loop
    thread: the ACK waits for the app."""
    with connect(s) as c:
        tag = "slowping-%d" % time.monotonic_ns()
        slow = c.start("GET", "/slow/%s?t=%s" % (tag, SLOW))
        s.wait_for_call(tag)
        rtt = c.ping(timeout=SLOW + 10)
        if s.mode["inline"] and s.app.startswith("wsgi"):
            assert rtt >= SPLIT, "inline mode answered a PING %.2fs into " \
                "an app call on the loop thread" % rtt
        else:
            assert rtt < SPLIT, "PING answered after %.2fs" % rtt
        assert c.response(slow, SLOW + 10).status == 200


def check_many_streams_at_once(s):
    with connect(s) as c:
        sids = [c.start("GET", "/hello?i=%d" % i) for i in range(50)]
        for sid in sids:
            r = c.response(sid, timeout=30)
            assert r.status == 200 and bytes(r.body) == b"hello\n", r


def check_stalled_stream_does_not_block_the_others(s):
    """A download the client stops reading (its stream's window shut at
    the first 65535 bytes, the connection's kept open): another stream on
    the connection is answered meanwhile where the mode runs two app calls
    at once; then the window opens and the download ends whole."""
    size = 4 * MiB
    path, want = big_route(s, size)
    with connect(s, timeout=30) as c:
        big = c.start("GET", path)
        c.stalled.add(big)
        r = c.streams[big]
        c.wait(lambda: len(r.body) >= 65535 or r.done, 10,
               "the stalled stream's first window")
        assert len(r.body) == 65535 and not r.done, r
        if concurrent(s):
            t0 = time.monotonic()
            fast = c.get("/hello", timeout=5)
            took = time.monotonic() - t0
            assert fast.status == 200 and took < SPLIT, (fast, took)
        c.stalled.discard(big)
        c.conn.increment_flow_control_window(len(r.body), stream_id=big)
        c.flush()
        r = c.response(big)
        assert r.status == 200 and bytes(r.body) == want, r
        assert c.get("/hello").status == 200


def big_route(s, size):
    """The path of a SIZE-byte download on S's app, and its bytes."""
    if s.app.startswith("wsgi"):
        return "/big?size=%d" % size, pattern(size)
    return "/large?size=%d&parts=8" % size, asgi_pattern(size)


# ------------------------------------------------------------ big bodies


def test_wsgi_8mib_upload(wsgi):
    body = os.urandom(8 * MiB + 3)
    with connect(wsgi, timeout=60) as c:
        r = c.request("POST", "/echo?sha=1", body=body,
                      headers=[("content-length", str(len(body)))])
        assert r.status == 200, r
        assert r.json() == {"len": len(body),
                            "sha256": hashlib.sha256(body).hexdigest()}
        # no content-length: the body ends with the stream
        r = c.request("POST", "/echo?sha=1", body=body[:MiB])
        assert r.json()["len"] == MiB


def test_wsgi_8mib_download(wsgi):
    size = 8 * MiB + 5
    with connect(wsgi, timeout=60) as c:
        r = c.get("/big?size=%d" % size)
        assert r.status == 200 and r.header("content-length") == str(size)
        assert len(r.body) == size and bytes(r.body) == pattern(size)


def test_asgi_8mib_echo(asgi):
    """Up and down at once: the app reads the body and sends it back."""
    body = os.urandom(8 * MiB + 3)
    with connect(asgi, timeout=60) as c:
        r = c.request("POST", "/echo", body=body)
        assert r.status == 200, r
        assert len(r.body) == len(body)
        assert hashlib.sha256(r.body).digest() == \
            hashlib.sha256(body).digest()


def test_asgi_8mib_download(asgi):
    size = 8 * MiB + 5
    with connect(asgi, timeout=60) as c:
        r = c.get("/large?size=%d&parts=4" % size)
        assert r.status == 200 and len(r.body) == size
        assert bytes(r.body) == asgi_pattern(size)


def check_big_downloads_interleave(s):
    """Three 2 MiB responses at once on one connection, each whole."""
    size = 2 * MiB + 1
    path = ("/big?size=%d" if s.app.startswith("wsgi")
            else "/large?size=%d&parts=8") % size
    want = pattern(size) if s.app.startswith("wsgi") else asgi_pattern(size)
    with connect(s, timeout=60) as c:
        sids = [c.start("GET", path) for _ in range(3)]
        for sid in sids:
            r = c.response(sid)
            assert r.status == 200 and bytes(r.body) == want, r
        assert c.get("/hello").status == 200


def check_download_respects_a_small_client_window(s):
    """A client window of 1000 bytes and frames of 16 KiB at most: h2
    fails the request if the server sends past either."""
    size = 300000
    path = ("/big?size=%d" if s.app.startswith("wsgi")
            else "/large?size=%d") % size
    from h2.settings import SettingCodes as S
    with connect(s, timeout=30,
                 settings={S.INITIAL_WINDOW_SIZE: 1000}) as c:
        c.wait(lambda: c.settings_acked, what="our SETTINGS' ACK")
        r = c.get(path)
        assert r.status == 200 and len(r.body) == size
        assert r.data_frames >= size // 1000


# ------------------------------------------------------- response kinds


def test_wsgi_streaming(wsgi):
    with connect(wsgi) as c:
        r = c.get("/chunks?n=20&size=30000")
        assert r.status == 200 and bytes(r.body) == pattern(20 * 30000)
        r = c.get("/chunks?n=5&size=10&empty=1")
        assert bytes(r.body) == pattern(50)
        r = c.get("/write")
        assert bytes(r.body) == b"write1;write2;iter1;iter2"


def test_asgi_streaming(asgi):
    with connect(asgi) as c:
        r = c.get("/stream?n=30&size=20000")
        assert r.status == 200
        assert bytes(r.body) == b"".join(bytes([97 + i % 26]) * 20000
                                         for i in range(30))
        r = c.get("/stream?n=3&size=5&delay=0.2")
        assert bytes(r.body) == b"aaaaabbbbbccccc"


def test_wsgi_file_wrapper(wsgi, tmp_path):
    data = pattern(2 * MiB + 1)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    with connect(wsgi, timeout=30) as c:
        r = c.get("/file?path=%s&token=h2f" % path)
        assert r.status == 200 and bytes(r.body) == data
        r = c.get("/file?kind=bytes&size=100000&offset=7&token=h2b")
        assert bytes(r.body) == pattern(100000)[7:]
    wsgi.wait_for_call("fileclose h2f")
    wsgi.wait_for_call("fileclose h2b")


def test_asgi_pathsend(asgi):
    with connect(asgi) as c:
        r = c.get("/pathsend")
        assert r.status == 200 and bytes(r.body) == bytes(range(256)) * 1000
        assert c.get("/hello").status == 200


def test_asgi_trailers(asgi):
    with connect(asgi) as c:
        r = c.get("/trailers", headers=[("te", "trailers")])
    assert r.status == 200 and bytes(r.body) == b"data", r
    assert r.trailers is not None, "no trailers HEADERS: %r" % r
    assert ("x-checksum", "abc") in r.trailers and \
        ("x-count", "1") in r.trailers, r.trailers


def check_head(s):
    path = "/hello" if s.app.startswith("wsgi") else "/head"
    with connect(s) as c:
        r = c.request("HEAD", path)
        assert r.status == 200 and r.ended, r
        assert bytes(r.body) == b"" and r.data_frames == 0
        assert r.header("content-length") == \
            ("6" if s.app.startswith("wsgi") else "1234")
        assert c.get(path).status == 200


def check_no_body_statuses(s, code):
    path = ("/status?code=%d" if s.app.startswith("wsgi")
            else "/status/%d") % code
    with connect(s) as c:
        r = c.get(path)
        assert r.status == code and r.ended, r
        assert bytes(r.body) == b"" and r.data_frames == 0, r
        assert c.get("/hello").status == 200


def check_expect_100_continue(s):
    with connect(s) as c:
        sid = c.start("POST", "/echo", headers=[("content-length", "4"),
                                             ("expect", "100-continue")],
                      end=False)
        r = c.streams[sid]
        c.wait(lambda: r.interim or r.done, what="100 Continue")
        assert [dict(h).get(":status") for h in r.interim] == ["100"], r
        c.send_body(sid, b"abcd")
        r = c.response(sid)
        assert r.status == 200 and bytes(r.body) == b"abcd", r


def check_health_path(s):
    with connect(s) as c:
        r = c.get(HEALTH)
        assert r.status == 200, r
    assert not s.called(HEALTH), "the health path reached the app"


def check_access_log_says_http2(s):
    tag = "al%d" % time.monotonic_ns()
    with connect(s) as c:
        assert c.get("/hello?%s" % tag).status == 200
    log = s.workdir / "access.log"
    line = wait_until(
        lambda: next((l for l in log.read_text().splitlines()
                      if tag in l), None) if log.exists() else None,
        5, "the access-log line of %s" % tag)
    assert '"GET /hello?%s HTTP/2.0"' % tag in line, line


def check_http1_still_served(s):
    """h2,h1: the same listener answers HTTP/1.1 (ALPN http/1.1 on TLS)."""
    with s.connect() as c:
        r = c.request("GET", "/hello")
    assert r.status == 200 and r.version == "HTTP/1.1"

# --------------------------------------- each check on WSGI and ASGI


def test_slow_stream_does_not_block_the_others_wsgi(wsgi):
    check_slow_stream_does_not_block_the_others(wsgi)


def test_slow_stream_does_not_block_the_others_asgi(asgi):
    check_slow_stream_does_not_block_the_others(asgi)


def test_loop_answers_ping_while_the_app_runs_wsgi(wsgi):
    check_loop_answers_ping_while_the_app_runs(wsgi)


def test_loop_answers_ping_while_the_app_runs_asgi(asgi):
    check_loop_answers_ping_while_the_app_runs(asgi)


def test_many_streams_at_once_wsgi(wsgi):
    check_many_streams_at_once(wsgi)


def test_many_streams_at_once_asgi(asgi):
    check_many_streams_at_once(asgi)


def test_stalled_stream_does_not_block_the_others_wsgi(wsgi):
    check_stalled_stream_does_not_block_the_others(wsgi)


def test_stalled_stream_does_not_block_the_others_asgi(asgi):
    check_stalled_stream_does_not_block_the_others(asgi)


def test_big_downloads_interleave_wsgi(wsgi):
    check_big_downloads_interleave(wsgi)


def test_big_downloads_interleave_asgi(asgi):
    check_big_downloads_interleave(asgi)


def test_download_respects_a_small_client_window_wsgi(wsgi):
    check_download_respects_a_small_client_window(wsgi)


def test_download_respects_a_small_client_window_asgi(asgi):
    check_download_respects_a_small_client_window(asgi)


def test_head_wsgi(wsgi):
    check_head(wsgi)


def test_head_asgi(asgi):
    check_head(asgi)


@pytest.mark.parametrize("code", [204, 304])
def test_no_body_statuses_wsgi(wsgi, code):
    check_no_body_statuses(wsgi, code)


@pytest.mark.parametrize("code", [204, 304])
def test_no_body_statuses_asgi(asgi, code):
    check_no_body_statuses(asgi, code)


def test_expect_100_continue_wsgi(wsgi):
    check_expect_100_continue(wsgi)


def test_expect_100_continue_asgi(asgi):
    check_expect_100_continue(asgi)


def test_health_path_wsgi(wsgi):
    check_health_path(wsgi)


def test_health_path_asgi(asgi):
    check_health_path(asgi)


def test_access_log_says_http2_wsgi(wsgi):
    check_access_log_says_http2(wsgi)


def test_access_log_says_http2_asgi(asgi):
    check_access_log_says_http2(asgi)


def test_http1_still_served_wsgi(wsgi):
    check_http1_still_served(wsgi)


def test_http1_still_served_asgi(asgi):
    check_http1_still_served(asgi)



# --------------------------------------------- servers of a test's own


def own_h2c(make_server, app="wsgi_app:app", mode_name="pump", args=()):
    """A started h2c server of this test's own (make_server's)."""
    table = ASGI_MODES if app.startswith("asgi") else WSGI_MODES
    s = make_server(app, mode=dict(table[mode_name], name=mode_name),
                    args=H2C_ARGS + list(args))
    s.h2_ctx = None
    return s


# ------------------------------------------------------ flow control in


@pytest.mark.parametrize("app,mode_name", [("wsgi_app:app", "pump-t4"),
                                           ("asgi_app:app", "pump"),
                                           ("asgi_app:app", "inline")])
def test_request_window_opens_only_as_the_app_reads(make_server, app,
                                                     mode_name):
    """An app that never reads its body (/slow): the client can send no
    more than the initial window (16 KiB) on that stream, and another
    stream on the same connection is answered meanwhile. Then an app that
    reads (/echo) takes 8 MiB through the same small window, whole."""
    window = 16384
    s = own_h2c(make_server, app, mode_name,
                ["--http2-initial-window-size", str(window)])
    wsgi = app.startswith("wsgi")
    with connect(s, timeout=30) as c:
        sid = c.start("POST", "/slow/nowindow?t=2", end=False)
        s.wait_for_call("nowindow")
        r = c.streams[sid]
        deadline = time.monotonic() + 1.0
        sent = c.send_body(sid, os.urandom(MiB), end=False, timeout=30,
                           stop=lambda: r.done or
                           time.monotonic() > deadline)
        assert sent <= window, \
            "sent %d bytes to an app that never reads (initial window " \
            "%d)" % (sent, window)
        other = c.get("/hello")
        assert other.status == 200 and not r.done, (other, r)
        # the app answers without reading: the stream ends (a reset of
        # the rest of the body, NO_ERROR, may follow the response)
        r = c.response(sid, timeout=10)
        assert r.status == 200, r
        body = os.urandom(8 * MiB)
        got = c.request("POST", "/echo?sha=1" if wsgi else "/echo",
                        body=body, timeout=60)
        assert got.status == 200, got
        if wsgi:
            assert got.json()["sha256"] == hashlib.sha256(body).hexdigest()
        else:
            assert bytes(got.body) == body


# ------------------------------------------------------------ settings


def test_settings_follow_the_options(make_server):
    from h2.settings import SettingCodes as S
    s = own_h2c(make_server, args=[
        "--http2-initial-window-size", "32768",
        "--http2-max-concurrent-streams", "7",
        "--http2-max-frame-size", "32768",
        "--http2-max-header-list-size", "20000"])
    with connect(s) as c:
        got = c.server_settings
        assert got.get(S.MAX_CONCURRENT_STREAMS) == 7, got
        assert got.get(S.INITIAL_WINDOW_SIZE) == 32768, got
        assert got.get(S.MAX_FRAME_SIZE) == 32768, got
        assert got.get(S.MAX_HEADER_LIST_SIZE) == 20000, got
        # the client sends frames of 32 KiB now
        body = os.urandom(200000)
        r = c.request("POST", "/echo?sha=1", body=body)
        assert r.json()["sha256"] == hashlib.sha256(body).hexdigest()


def test_default_settings(wsgi):
    from h2.settings import SettingCodes as S
    with connect(wsgi) as c:
        got = c.server_settings
    assert got.get(S.MAX_CONCURRENT_STREAMS) == 100, got
    assert got.get(S.MAX_FRAME_SIZE, 16384) == 16384, got


def test_header_list_over_the_setting(make_server):
    """A header list past --http2-max-header-list-size is refused before
    the app (431, or the stream or connection ended); the worker serves
    on."""
    s = own_h2c(make_server, args=["--http2-max-header-list-size", "4096"])
    wpid = s.wait_workers(1)
    with connect(s) as c:
        r = c.settle(c.start("GET", "/hello?biglist",
                             headers=[("x-big-%d" % i, "v" * 1000)
                                      for i in range(6)]), 10)
        assert r.status in (None, 431), r
    with connect(s) as c:
        assert c.get("/hello").status == 200
    assert not s.called("biglist") and s.worker_pids() == wpid


def test_frame_past_max_frame_size(make_server):
    """A DATA frame longer than the server's SETTINGS_MAX_FRAME_SIZE
    (16384) is a connection error (RFC 9113 section 4.2): GOAWAY
    FRAME_SIZE_ERROR, then the connection closes (section 5.4.1). The
    app was already reading the body (/echo, one lane): its read ends
    with the connection, so the lane serves the next request."""
    from h2client import raw_connect
    s = own_h2c(make_server)
    with raw_connect(s) as raw:
        sid = raw.sid()
        raw.send(raw.headers_frame(sid, raw.request_block(
            "/echo?framesize", "POST"), end_stream=False))
        s.wait_for_call("framesize")
        raw.send(raw.data_frame(sid, b"x" * 20000, end_stream=True))
        goaway = raw.wait_end(10)
        assert goaway is None or goaway.error_code == 0x6, raw.summary()
        raw.wait(lambda: raw.closed and not raw.buf, 2,
                 "the close after a connection error's GOAWAY")
        assert raw.status(sid) is None, raw.summary()
    with connect(s) as c:
        assert c.get("/hello", timeout=5).status == 200


# ----------------------------------------------------------- negotiation


@pytest.mark.parametrize("protocols,offer,picked", [
    ("h2,h1", ["h2", "http/1.1"], "h2"),
    ("h2,h1", ["http/1.1"], "http/1.1"),
    ("h1,h2", ["h2", "http/1.1"], "http/1.1"),
    ("h1,h2", ["h2"], "h2"),
    ("h1", ["h2", "http/1.1"], "http/1.1"),
])
def test_alpn(tmp_path, pki, protocols, offer, picked):
    """--http-protocols' order is the server's preference; what ALPN picks
    is what the connection speaks."""
    from conftest import mode_kwargs
    from tls_helpers import TLSServer, served
    mode = dict(WSGI_MODES["pump"], name="pump")
    s = TLSServer(tmp_path / "srv", pki,
                  **mode_kwargs(mode, ["--http-protocols", protocols]))
    with served(s):
        raw = open_socket(s, ctx=None)
        sock = h2_context(pki, offer).wrap_socket(
            raw, server_hostname="localhost")
        with sock:
            assert sock.selected_alpn_protocol() == picked
        if picked == "h2":
            s.h2_ctx = h2_context(pki, offer)
            with connect(s) as c:
                assert c.get("/hello").status == 200
        else:
            with s.connect() as c:
                assert c.request("GET", "/hello").status == 200


def test_without_cleartext_option_the_preface_is_not_h2(make_server):
    """--http-protocols h2,h1 alone: the plain listener speaks HTTP/1.1
    only, and the preface is a bad request (no SETTINGS come back)."""
    mode = dict(WSGI_MODES["pump"], name="pump")
    s = make_server(mode=mode, args=H2_ARGS)
    with s.connect() as c:
        c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\0\0\0\4\0\0\0\0\0")
        data = c.read_available(2)
    assert not data.startswith(b"\0"), "an HTTP/2 answer: %r" % data[:50]
    assert data == b"" or re.match(rb"HTTP/1\.1 [45]\d\d ", data), data[:200]


# ------------------------------------------------------------ limits


def test_too_many_header_fields(make_server):
    """The request limits of HTTP/1.1 hold on h2: too many fields, or one
    too large, is refused (431, or the stream reset) before the app; the
    worker serves on."""
    s = own_h2c(make_server, args=["--limit-request-fields", "10",
                                   "--limit-request-field-size", "100"])
    wpid = s.wait_workers(1)
    with connect(s) as c:
        r = c.request("GET", "/hello?manyfields",
                      headers=[("x-f%d" % i, "1") for i in range(20)])
        assert r.status == 431 or r.reset is not None, r
    with connect(s) as c:
        r = c.request("GET", "/hello?bigfield",
                      headers=[("x-big", "v" * 200)])
        assert r.status == 431 or r.reset is not None, r
    with connect(s) as c:
        r = c.request("GET", "/hello?fewfields",
                      headers=[("x-f%d" % i, "1") for i in range(5)])
        assert r.status == 200, r
    assert not s.called("manyfields") and not s.called("bigfield")
    assert s.worker_pids() == wpid


def test_body_over_the_limit(make_server):
    s = own_h2c(make_server, args=["--limit-request-body", "1000"])
    wpid = s.wait_workers(1)
    with connect(s) as c:
        r = c.request("POST", "/echo?sha=1&withlength",
                      headers=[("content-length", "5000")],
                      body=b"x" * 5000)
        assert r.status == 413, r
        # no content-length: the limit is met in the DATA
        r = c.request("POST", "/echo?sha=1&nolength", body=b"x" * 5000)
        assert r.status == 413 or r.reset is not None, r
    assert not s.called("withlength")
    with connect(s) as c:
        r = c.request("POST", "/echo?sha=1", body=b"y" * 1000)
        assert r.status == 200 and r.json()["len"] == 1000
    assert s.worker_pids() == wpid


# ------------------------------------------------------------ drain

DRAIN_MODES = [pytest.param("wsgi_app:app", m, id="wsgi-" + m)
               for m in EXECUTORS] + \
    [pytest.param("asgi_app:app", m, id="asgi-" + m) for m in EXECUTORS]


def check_goaways(c, sid):
    """The drain's GOAWAYs (RFC 9113 section 6.8): NO_ERROR; the first
    with the largest stream id, the last naming SID or later."""
    assert c.goaways, "no GOAWAY"
    codes = [g[0] for g in c.goaways]
    assert set(codes) == {NO_ERROR}, c.goaways
    assert c.goaways[0][1] == MAX_STREAM_ID, \
        "the first GOAWAY's last stream id is %d, not 2^31-1" % \
        c.goaways[0][1]
    assert c.goaways[-1][1] >= sid, c.goaways


@pytest.mark.parametrize("app,mode_name", DRAIN_MODES)
def test_term_drains_h2(make_server, app, mode_name):
    """TERM to the supervisor with a stream in flight: GOAWAY, the stream
    is answered in full, the connection closes, everything exits 0."""
    s = own_h2c(make_server, app, mode_name)
    wpid = s.wait_workers(1)[0]
    with connect(s, timeout=20) as c:
        assert c.get("/hello").status == 200
        sid = c.start("GET", "/slow/termdrain?t=%s" % SLOW)
        s.wait_for_call("termdrain")
        os.kill(s.pid, signal.SIGTERM)
        c.wait(lambda: c.goaways, SLOW + 5, "GOAWAY after TERM")
        r = c.response(sid, timeout=SLOW + 10)
        assert r.status == 200 and r.ended, r
        assert bytes(r.body).startswith(b"slept 1.5"), r
        c.wait_closed(timeout=5)
        check_goaways(c, sid)
    helpers.wait_gone([wpid], 10, "the worker to exit")
    assert s.proc.wait(10) == 0, s.diagnostics()


@pytest.mark.parametrize("mode_name", EXECUTORS)
def test_rolling_restart_drains_h2(make_server, mode_name):
    """HUP: the old worker's connection gets GOAWAY, its stream in flight
    finishes, it closes; a new connection is served by the new worker."""
    s = own_h2c(make_server, "wsgi_app:app", mode_name)
    old = s.wait_workers(1)[0]
    with connect(s, timeout=30) as c:
        assert bytes(c.get("/pid").body) == str(old).encode()
        sid = c.start("GET", "/slow/hupdrain?t=%s" % SLOW)
        s.wait_for_call("hupdrain")
        mark = s.log_mark()
        os.kill(s.pid, signal.SIGHUP)
        c.wait(lambda: c.goaways, 20, "GOAWAY after HUP")
        r = c.response(sid, timeout=SLOW + 20)
        assert r.status == 200 and bytes(r.body).startswith(b"slept 1.5")
        c.wait_closed(timeout=10)
        check_goaways(c, sid)
    s.wait_for_log("Rolling restart done", 30, mark)
    helpers.wait_gone([old], 10, "the old worker to exit")
    with connect(s) as c:
        new = int(bytes(c.get("/pid").body))
    assert new != old and new in s.worker_pids()


def test_drain_grants_a_fresh_connection_its_first_request(make_server):
    """TERM while a connection has sent its preface and SETTINGS but no
    request yet: no GOAWAY comes before its first request (after one it
    could open no stream at all), which is served when it comes half a
    second later; then GOAWAY, and the connection closes."""
    s = own_h2c(make_server)
    wpid = s.wait_workers(1)[0]
    with connect(s, timeout=20) as c:
        c.ping()  # the preface and SETTINGS are in, nothing else
        os.kill(s.pid, signal.SIGTERM)
        s.wait_for_log("draining", 10)
        # the client's own pace: half a second, reading what comes
        until = time.monotonic() + 0.5
        while time.monotonic() < until:
            c.pump(until - time.monotonic())
        assert not c.goaways, "GOAWAY before the first request"
        r = c.get("/hello", timeout=10)
        assert r.status == 200 and bytes(r.body) == b"hello\n", r
        c.wait(lambda: c.goaways, 10, "GOAWAY after the first request")
        c.wait_closed(timeout=10)
    helpers.wait_gone([wpid], 10, "the worker to exit")
    assert s.proc.wait(10) == 0, s.diagnostics()


# ------------------------------------------------------------ other clients


@pytest.fixture(scope="module", params=[
    pytest.param(("h2c", "wsgi_app:app"), id="h2c-wsgi"),
    pytest.param(("tls", "wsgi_app:app"), id="tls-wsgi"),
    pytest.param(("h2c", "asgi_app:app"), id="h2c-asgi"),
    pytest.param(("tls", "asgi_app:app"), id="tls-asgi")])
def interop(request, tmp_path_factory, pki):
    transport, app = request.param
    table = ASGI_MODES if app.startswith("asgi") else WSGI_MODES
    name = "pump" if app.startswith("asgi") else "pump-t4"
    s = make_h2_server(tmp_path_factory, pki, "h2-interop", transport,
                       dict(table[name], name=name), app)
    s.pki = pki
    yield from helpers.serving(s)


def base_url(s):
    """The server's URL by address (its certificate names 127.0.0.1 too):
    "localhost" may be ::1 first, where it does not listen."""
    return "%s://127.0.0.1:%d" % ("https" if s.transport == "tls" else
                                  "http", s.port)


def need(tool):
    path = shutil.which(tool)
    if path is None:
        pytest.skip("%s is not installed" % tool)
    return path


def curl(s, path, *extra):
    args = [need("curl"), "-sS", "--max-time", "30", "-o", "-",
            "-w", "\n%{http_version} %{http_code}"]
    if s.transport == "tls":
        args += ["--http2", "--cacert", str(s.pki["ca"])]
    else:
        args += ["--http2-prior-knowledge"]
    p = subprocess.run(args + list(extra) + [base_url(s) + path],
                       capture_output=True, timeout=40)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    body, _, tail = p.stdout.rpartition(b"\n")
    return tail.decode(), body


def test_curl(interop, tmp_path):
    tail, body = curl(interop, "/hello")
    assert (tail, body) == ("2 200", b"hello\n")
    data = os.urandom(MiB + 1)
    f = tmp_path / "up.bin"
    f.write_bytes(data)
    wsgi = interop.app.startswith("wsgi")
    tail, body = curl(interop, "/echo?sha=1" if wsgi else "/echo",
                      "--data-binary", "@%s" % f)
    assert tail == "2 200"
    if wsgi:
        assert json.loads(body)["sha256"] == hashlib.sha256(data).hexdigest()
    else:
        assert body == data


def test_nghttp(interop):
    p = subprocess.run([need("nghttp"), "-nv", base_url(interop) +
                        "/hello", base_url(interop) + "/hello?2"],
                       capture_output=True, timeout=40)
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 0, out[-3000:] + p.stderr.decode()
    assert out.count(":status: 200") == 2, out[-3000:]
    assert "recv RST_STREAM" not in out, out[-3000:]


def test_h2load(interop):
    p = subprocess.run([need("h2load"), "-n", "100", "-c", "2", "-m", "10",
                        base_url(interop) + "/hello"],
                       capture_output=True, timeout=60)
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 0, out + p.stderr.decode()
    assert re.search(r"requests: 100 total, 100 started, 100 done, "
                     r"100 succeeded, 0 failed, 0 errored", out), out
    assert re.search(r"status codes: 100 2xx", out), out
    if interop.transport == "tls":
        assert "Application protocol: h2" in out, out


def test_httpx(interop):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("h2")
    if interop.transport == "tls":
        client = httpx.Client(http2=True, verify=str(interop.pki["ca"]),
                              timeout=20)
    else:
        # prior knowledge: HTTP/2 alone
        client = httpx.Client(http1=False, http2=True, timeout=20)
    wsgi = interop.app.startswith("wsgi")
    with client:
        ports = set()
        for i in range(5):
            r = client.get(base_url(interop) + "/hello?i=%d" % i)
            assert r.status_code == 200 and r.http_version == "HTTP/2"
            assert r.content == b"hello\n"
        if wsgi:
            for i in range(3):
                env = client.get(base_url(interop) + "/environ").json()
                ports.add(env["REMOTE_PORT"]["value"])
            assert len(ports) == 1, ports
        body = os.urandom(300000)
        r = client.post(base_url(interop) + ("/echo?sha=1" if wsgi
                                             else "/echo"), content=body)
        assert r.status_code == 200
        if wsgi:
            assert r.json()["sha256"] == hashlib.sha256(body).hexdigest()
        else:
            assert r.content == body


# ------------------------------------------------------------- metrics


def test_metrics_count_http2(make_server):
    """The supervisor's metrics count HTTP/2 connections and requests, and
    show the streams open while one is with the app."""
    from test_metrics import scrape
    port = helpers.free_port()
    s = own_h2c(make_server, args=["--metrics-bind", "127.0.0.1:%d" % port])
    s.metrics_port = port
    before = wait_until(lambda: scrape(s, check=False), 10, "metrics")
    with connect(s) as c:
        for _ in range(3):
            assert c.get("/hello").status == 200
        slow = c.start("GET", "/slow?t=3")

        def streams_open():
            now = scrape(s, check=False)
            return now if now["sluice_http2_streams_open"] >= 1 else None
        during = wait_until(streams_open, 8, "an open stream in the metrics")
        assert during["sluice_http2_connections_open"] >= 1
        assert c.response(slow, timeout=10).status == 200
    after = scrape(s, check=False)
    assert after["sluice_http2_requests_total"] - \
        before["sluice_http2_requests_total"] >= 3
    assert after["sluice_http2_connections_total"] - \
        before["sluice_http2_connections_total"] >= 1
