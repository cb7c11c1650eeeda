"""wsgi.input: read(n), read(), readline(), readline(n), readlines(),
iteration, for Content-Length and chunked bodies, never past the body.

/input runs the operations named in ?ops= and then reads three more times
(read(), read(10), readline()), which must all come back empty: that is the
"never reads past the body" check, made sharper by pipelining a second
request right behind the body.
"""

import hashlib
import time

import pytest

from e2e_data import pattern
from helpers import build_request, chunked

TEXT = b"line one\nline two\n\nlast line without newline"


def run_ops(server, ops, body, framing="length", trailing=True):
    target = "/input?ops=" + ops
    if framing == "length":
        req = build_request("POST", target, body=body)
    else:
        req = (b"POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
               b"\r\n\r\n" % target.encode() + chunked(body, sizes=(3, 11)))
    nxt = build_request("POST", "/echo", body=b"NEXT-REQUEST")
    with server.connect() as c:
        c.send(req + (nxt if trailing else b""))
        r = c.read_response()
        assert r.status == 200, r.raw[:3000]
        if trailing:
            r2 = c.read_response()
            assert r2.status == 200 and r2.body == b"NEXT-REQUEST"
    out = r.json()
    assert out["tail"] == "", "read past the body: %r" % out["tail"]
    return [x.encode("latin-1") if isinstance(x, str)
            else [y.encode("latin-1") for y in x] for x in out["results"]]


FRAMINGS = ["length", "chunked"]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_read_all(server, framing):
    assert run_ops(server, "read", TEXT, framing) == [TEXT]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_read_sized_pieces(server, framing):
    got = run_ops(server, "read:4,read:0,read:5,read:1000,read:3", TEXT,
                  framing)
    assert got == [TEXT[:4], b"", TEXT[4:9], TEXT[9:], b""]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_read_minus_one_reads_all(server, framing):
    assert run_ops(server, "read:2,read:-1", TEXT, framing) == \
        [TEXT[:2], TEXT[2:]]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_readline(server, framing):
    got = run_ops(server, "readline,readline,readline,readline,readline",
                  TEXT, framing)
    assert got == [b"line one\n", b"line two\n", b"\n",
                   b"last line without newline", b""]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_readline_with_size(server, framing):
    got = run_ops(server, "readline:4,readline:100,readline:3,readline,read",
                  TEXT, framing)
    assert got == [b"line", b" one\n", b"lin", b"e two\n",
                   b"\nlast line without newline"]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_readlines(server, framing):
    got = run_ops(server, "readline,readlines", TEXT, framing)
    assert got == [b"line one\n",
                   [b"line two\n", b"\n", b"last line without newline"]]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_iteration(server, framing):
    got = run_ops(server, "read:5,iter", TEXT, framing)
    assert got == [b"line ", [b"one\n", b"line two\n", b"\n",
                              b"last line without newline"]]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_mixed_operations(server, framing):
    got = run_ops(server, "read:2,readline,readline:3,read:4,readlines",
                  TEXT, framing)
    assert got == [b"li", b"ne one\n", b"lin", b"e tw",
                   [b"o\n", b"\n", b"last line without newline"]]


def test_long_line_across_reads(server):
    body = b"x" * 300000 + b"\nend"
    got = run_ops(server, "readline,readline", body, "chunked")
    assert got == [b"x" * 300000 + b"\n", b"end"]


def test_empty_body(server):
    got = run_ops(server, "read,readline,readlines,read:5", b"")
    assert got == [b"", b"", [], b""]


def test_get_without_body(server):
    with server.connect() as c:
        c.send(build_request("GET", "/input?ops=read,readline,read:10")
               + build_request("GET", "/hello"))
        r = c.read_response()
        assert r.json() == {"results": ["", "", ""], "tail": ""}
        assert c.read_response().body == b"hello\n"


def test_binary_body_unchanged(server):
    body = bytes(range(256)) * 40 + b"\r\n\r\n\x00"
    assert run_ops(server, "read", body) == [body]
    assert run_ops(server, "read", body, "chunked") == [body]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_large_body_sha(server, framing):
    body = pattern(2 * 1024 * 1024 + 3, 5)
    if framing == "length":
        req = build_request("POST", "/echo?sha=1&chunk=10000", body=body)
    else:
        req = (b"POST /echo?sha=1&chunk=10000 HTTP/1.1\r\nHost: x\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n"
               + chunked(body, sizes=(65536, 3, 40000)))
    with server.connect(timeout=30) as c:
        c.send(req)
        r = c.read_response()
    assert r.json() == {"len": len(body),
                        "sha256": hashlib.sha256(body).hexdigest()}


def test_body_arriving_slowly_is_waited_for(server):
    """The app's read() blocks until body bytes arrive, in pieces."""
    with server.connect() as c:
        c.send(b"POST /input?ops=read:6,read:6,read HTTP/1.1\r\nHost: x\r\n"
               b"Content-Length: 15\r\n\r\nabc")
        for piece in (b"def", b"ghi", b"jklmno"):
            time.sleep(0.15)  # pacing the upload
            c.send(piece)
        r = c.read_response()
    assert r.json() == {"results": ["abcdef", "ghijkl", "mno"], "tail": ""}


def test_unread_large_body_then_next_request(server):
    """A body the app never reads does not corrupt the connection."""
    body = pattern(300000)
    with server.connect(timeout=20) as c:
        c.send(build_request("POST", "/hello", body=body)
               + build_request("GET", "/status?code=200&body=after"))
        r1 = c.read_response()
        assert r1.body == b"hello\n"
        if r1.has_token("Connection", "close"):
            c.expect_eof()
        else:
            assert c.read_response().body == b"after"
