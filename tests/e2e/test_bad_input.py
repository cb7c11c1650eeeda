"""Malformed requests: 400 with Connection: close, the app never called.

Each case is sent in one piece followed by a valid pipelined request. The
server must answer 400 with Connection: close, close the connection without
answering (or running) the pipelined request, never call the application
for either, and keep serving: an already open keep-alive connection on the
same worker still works afterwards, and the worker process is the same.
"""

import itertools

import pytest

from helpers import Load, Req, build_request

_ids = itertools.count()

H = b"Host: x\r\n"

BAD = {
    # malformed request lines
    "garbage-request-line": b"GARBAGE\r\n\r\n",
    "request-line-extra-token": b"GET /M HTTP/1.1 extra\r\n" + H + b"\r\n",
    "bad-protocol-name": b"GET /M HTTX/1.1\r\n" + H + b"\r\n",
    "bad-method-char": b"G(T /M HTTP/1.1\r\n" + H + b"\r\n",
    "no-target": b"GET HTTP/1.1\r\n" + H + b"\r\n",
    "space-in-target": b"GET /M x HTTP/1.1\r\n" + H + b"\r\n",
    # bad header bytes
    "space-in-header-name": b"GET /M HTTP/1.1\r\n" + H + b"Bad Name: v\r\n\r\n",
    "header-without-colon": b"GET /M HTTP/1.1\r\n" + H + b"NoColonHere\r\n\r\n",
    "ctl-in-header-name": b"GET /M HTTP/1.1\r\n" + H + b"X-A\x01b: v\r\n\r\n",
    "space-before-colon": b"GET /M HTTP/1.1\r\n" + H + b"X-Foo : v\r\n\r\n",
    "empty-header-name": b"GET /M HTTP/1.1\r\n" + H + b": v\r\n\r\n",
    # request framing
    "content-length-and-chunked":
        b"POST /M HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "chunked-and-content-length":
        b"POST /M HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n"
        b"Content-Length: 5\r\n\r\n0\r\n\r\n",
    "two-different-content-lengths":
        b"POST /M HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n"
        b"Content-Length: 6\r\n\r\nhello!",
    "content-length-list":
        b"POST /M HTTP/1.1\r\n" + H + b"Content-Length: 5, 6\r\n\r\nhello!",
    "non-numeric-content-length":
        b"POST /M HTTP/1.1\r\n" + H + b"Content-Length: abc\r\n\r\n",
    "negative-content-length":
        b"POST /M HTTP/1.1\r\n" + H + b"Content-Length: -1\r\n\r\n",
    "bad-chunk-size":
        b"POST /M HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
        b"zz\r\nhello\r\n0\r\n\r\n",
    "chunk-size-overflow":
        b"POST /M HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
        b"fffffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
    "chunk-data-too-long":
        b"POST /M HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
        b"3\r\nhello\r\n0\r\n\r\n",
    # obs-fold (RFC 9112 5.2: reject with 400)
    "obs-fold-space":
        b"GET /M HTTP/1.1\r\n" + H + b"X-Folded: a\r\n  b\r\n\r\n",
    "obs-fold-tab":
        b"GET /M HTTP/1.1\r\n" + H + b"X-Folded: a\r\n\tb\r\n\r\n",
    # Host is required on HTTP/1.1
    "missing-host": b"GET /M HTTP/1.1\r\nX-Other: y\r\n\r\n",
    # control bytes in header values
    "nul-in-header-value": b"GET /M HTTP/1.1\r\n" + H + b"X-A: a\x00b\r\n\r\n",
    "ctl-01-in-header-value":
        b"GET /M HTTP/1.1\r\n" + H + b"X-A: a\x01b\r\n\r\n",
    "ctl-1f-in-header-value":
        b"GET /M HTTP/1.1\r\n" + H + b"X-A: a\x1fb\r\n\r\n",
    "del-in-header-value": b"GET /M HTTP/1.1\r\n" + H + b"X-A: a\x7fb\r\n\r\n",
    "bare-cr-in-header-value":
        b"GET /M HTTP/1.1\r\n" + H + b"X-A: a\rb\r\n\r\n",
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_request_gets_400_and_app_is_not_called(server, case):
    n = next(_ids)
    bad_marker = "bad-%s-%d" % (case, n)
    after_marker = "after-%s-%d" % (case, n)
    data = BAD[case].replace(b"/M", b"/hello/" + bad_marker.encode())
    data += build_request("GET", "/hello/" + after_marker)
    with server.connect() as other:
        assert other.request("GET", "/hello").status == 200
        workers = server.worker_pids()
        with server.connect() as c:
            c.send(data)
            r = c.read_response()
            assert r.status == 400, r.raw
            assert r.has_token("Connection", "close"), r.headers
            # The pipelined request is neither answered nor run.
            c.expect_eof()
        # The worker survives and keeps serving its other connections.
        assert other.request("GET", "/hello").status == 200
        assert server.worker_pids() == workers
    assert not server.called(bad_marker)
    assert not server.called(after_marker)


def test_good_request_after_many_bad_connections(server):
    """Twenty bad connections in a row leave the worker healthy."""
    bad = Req("garbage-request-line", raw=BAD["garbage-request-line"],
              status=400)
    load = Load(server, [bad], conns=1, requests=20).run()
    assert load.count("ok") == 20, load.failure_report()
    with server.connect() as c:
        r = c.request("GET", "/hello")
    assert r.status == 200 and r.body == b"hello\n"


def test_underscore_header_is_dropped(server):
    with server.connect() as c:
        r = c.request("GET", "/environ",
                      headers=[("X_Under_Score", "sneaky"),
                               ("X-Dash", "dash")])
    env = r.json()
    assert r.status == 200
    assert env["HTTP_X_DASH"]["value"] == "dash"
    assert not [k for k in env if "UNDER" in k.upper()], \
        [k for k in env if k.startswith("HTTP_")]


def test_underscore_header_cannot_spoof_dash_header(server):
    with server.connect() as c:
        r = c.request("GET", "/environ",
                      headers=[("X-Real-Ip", "10.0.0.1"),
                               ("X_Real_Ip", "6.6.6.6")])
    env = r.json()
    assert env["HTTP_X_REAL_IP"]["value"] == "10.0.0.1"


def test_bad_request_in_middle_of_keep_alive_connection(server):
    """Earlier good requests on the connection are answered first."""
    marker = "mid-%d" % next(_ids)
    with server.connect() as c:
        c.send(build_request("GET", "/status?code=200&body=first")
               + BAD["obs-fold-space"].replace(b"/M", b"/hello/" + marker.encode()))
        r1 = c.read_response()
        assert r1.status == 200 and r1.body == b"first"
        r2 = c.read_response()
        assert r2.status == 400
        assert r2.has_token("Connection", "close")
        c.expect_eof()
    assert not server.called(marker)
