"""Request size limits: 414 (line), 431 (field count, field size), 413 (body).

The defaults (4094, 100, 8190, body unlimited) are checked on a default
server with a margin on each side; small custom values are checked on a
second server, where the body limit is exact: a body of exactly
--limit-request-body bytes is accepted, one byte more is refused.
"""

import itertools

import pytest

from conftest import start_mode_server
from helpers import build_request, chunked

_ids = itertools.count()


@pytest.fixture(scope="module")
def small(mode, tmp_path_factory):
    args = ["--limit-request-line", "200", "--limit-request-fields", "10",
            "--limit-request-field-size", "100"]
    with start_mode_server(tmp_path_factory, "limits-small", mode,
                           args=args) as s:
        yield s


@pytest.fixture(scope="module")
def body_limited(mode, tmp_path_factory):
    with start_mode_server(tmp_path_factory, "limits-body", mode,
                           args=["--limit-request-body", "1000"]) as s:
        yield s


def marker(tag):
    return "%s-%d" % (tag, next(_ids))


def path_for_line(total, m):
    """A /hello/... target whose request line is TOTAL bytes long."""
    base = "/hello/%s/" % m
    fixed = len("GET  HTTP/1.1") + len(base)
    return base + "a" * (total - fixed)


def expect_refused(server, req, status, m):
    with server.connect() as c:
        c.send(req)
        r = c.read_response()
        assert r.status == status, r.raw[:300]
        assert r.has_token("Connection", "close")
        c.expect_eof()
    assert not server.called(m)
    # still serving
    assert server.get("/hello").status == 200


def expect_ok(server, req, m):
    with server.connect() as c:
        c.send(req)
        r = c.read_response()
    assert r.status == 200, r.raw[:300]
    assert server.called(m)
    return r


# ---------------------------------------------------------------- defaults

def test_default_request_line_limit_refuses(server):
    m = marker("line")
    req = build_request("GET", path_for_line(5000, m))
    expect_refused(server, req, 414, m)


def test_default_request_line_limit_allows(server):
    m = marker("line-ok")
    expect_ok(server, build_request("GET", path_for_line(4000, m)), m)


def test_default_field_count_limit_refuses(server):
    m = marker("fields")
    headers = [("X-H-%d" % i, "v") for i in range(120)]
    expect_refused(server, build_request("GET", "/hello/" + m, headers),
                   431, m)


def test_default_field_count_limit_allows(server):
    m = marker("fields-ok")
    headers = [("X-H-%d" % i, "v") for i in range(90)]
    expect_ok(server, build_request("GET", "/hello/" + m, headers), m)


def test_default_field_size_limit_refuses(server):
    m = marker("fsize")
    headers = [("X-Big", "v" * 9000)]
    expect_refused(server, build_request("GET", "/hello/" + m, headers),
                   431, m)


def test_default_field_size_limit_allows(server):
    m = marker("fsize-ok")
    headers = [("X-Big", "v" * 8000)]
    r = expect_ok(server, build_request("GET", "/environ?" + m, headers), m)
    assert r.json()["HTTP_X_BIG"]["value"] == "v" * 8000


def test_default_body_is_unlimited(server):
    body = b"b" * (5 * 1024 * 1024)
    with server.connect(timeout=30) as c:
        r = c.request("POST", "/echo?sha=1", body=body)
    assert r.status == 200 and r.json()["len"] == len(body)


# ---------------------------------------------------------------- custom

def test_custom_request_line_limit(small):
    m = marker("cline")
    expect_refused(small, build_request("GET", path_for_line(300, m)),
                   414, m)
    m = marker("cline-ok")
    expect_ok(small, build_request("GET", path_for_line(150, m)), m)


def test_custom_field_count_limit(small):
    m = marker("cfields")
    headers = [("X-H-%d" % i, "v") for i in range(15)]
    expect_refused(small, build_request("GET", "/hello/" + m, headers),
                   431, m)
    m = marker("cfields-ok")
    headers = [("X-H-%d" % i, "v") for i in range(7)]
    expect_ok(small, build_request("GET", "/hello/" + m, headers), m)


def test_custom_field_size_limit(small):
    m = marker("cfsize")
    expect_refused(small, build_request("GET", "/hello/" + m,
                                        [("X-Big", "v" * 200)]), 431, m)
    m = marker("cfsize-ok")
    expect_ok(small, build_request("GET", "/hello/" + m,
                                   [("X-Big", "v" * 60)]), m)


@pytest.mark.sluice_only
def test_body_limit_exact_size_is_accepted(body_limited):
    body = b"x" * 1000
    with body_limited.connect() as c:
        r = c.request("POST", "/echo", body=body)
    assert r.status == 200 and r.body == body


@pytest.mark.sluice_only
def test_body_limit_content_length_over_is_413(body_limited):
    m = marker("body")
    req = build_request("POST", "/echo/" + m, body=b"x" * 1001)
    expect_refused(body_limited, req, 413, m)


@pytest.mark.sluice_only
def test_body_limit_large_content_length_not_sent_is_413(body_limited):
    """Refused from the header alone: the body is never sent."""
    m = marker("body-hdr")
    req = (b"POST /echo/%s HTTP/1.1\r\nHost: x\r\n"
           b"Content-Length: 10000000\r\n\r\n" % m.encode())
    expect_refused(body_limited, req, 413, m)


@pytest.mark.sluice_only
def test_body_limit_chunked_over_is_413(body_limited):
    req = (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
           b"\r\n\r\n" + chunked(b"y" * 2000, sizes=(300,)))
    with body_limited.connect() as c:
        c.send(req)
        r = c.read_response()
        assert r.status == 413, r.raw[:300]
        assert r.has_token("Connection", "close")
        c.expect_eof()


@pytest.mark.sluice_only
def test_body_limit_chunked_under_is_accepted(body_limited):
    body = b"z" * 900
    req = (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
           b"\r\n\r\n" + chunked(body, sizes=(300,)))
    with body_limited.connect() as c:
        c.send(req)
        r = c.read_response()
    assert r.status == 200 and r.body == body


@pytest.mark.sluice_only
def test_body_limit_with_expect_100_refuses_before_continue(body_limited):
    m = marker("body-100")
    head = (b"POST /echo/%s HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n"
            b"Expect: 100-continue\r\n\r\n" % m.encode())
    with body_limited.connect() as c:
        c.send(head)
        r = c.read_response()
        assert r.status == 413, r.raw
        assert r.has_token("Connection", "close")
    assert not body_limited.called(m)
