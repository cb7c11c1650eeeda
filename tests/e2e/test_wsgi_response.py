"""The response side of PEP 3333: start_response rules, write(), late
headers, close() on the result, and application errors.

close() calls and start_response outcomes are observed through the app's
call log, which the tests poll (bounded) instead of sleeping.
"""

import itertools
import re

import pytest

import lent_checks
from e2e_data import pattern
from helpers import PeerClosed, build_request

LENT = pattern(1024 * 1024 + 17)  # wsgi_app.LENT

_ids = itertools.count()


def token(tag):
    return "%s-%d" % (tag, next(_ids))


# ------------------------------------------------------------ start_response

def test_start_response_twice_without_exc_info_raises(server):
    with server.connect() as c:
        r = c.request("GET", "/sr_twice")
    assert r.status == 200
    assert r.header("X-First") == "1"
    assert r.header("X-Second") is None
    assert r.body.startswith(b"raised "), r.body


def test_start_response_with_exc_info_before_headers_replaces(server):
    with server.connect() as c:
        r = c.request("GET", "/sr_replace")
        assert r.raw.startswith(b"HTTP/1.1 503 Replaced\r\n")
        assert r.header("X-After") == "1"
        assert r.header("X-Before") is None
        assert r.body == b"replaced"
        assert c.request("GET", "/hello").status == 200


def test_start_response_with_exc_info_after_headers_reraises(server):
    t = token("sr-after")
    with server.connect() as c:
        r = c.request("GET", "/sr_after?token=" + t)
    assert r.status == 200
    assert r.body == b"first;after"
    lines = server.wait_for_call("sr_after " + t)
    assert lines == ["sr_after %s KeyError same=True" % t]


def test_headers_wait_for_first_nonempty_chunk(server):
    """An empty first item does not send headers, so exc_info can still
    replace them."""
    with server.connect() as c:
        r = c.request("GET", "/empty_then_replace")
        assert r.status == 503, r.raw
        assert r.header("X-Replaced") == "1"
        assert r.header("X-First") is None
        assert r.body == b"replaced"


def test_start_response_called_late_from_generator(server):
    with server.connect() as c:
        r = c.request("GET", "/late_start")
        assert r.raw.startswith(b"HTTP/1.1 202 Accepted\r\n")
        assert r.header("X-Late") == "yes"
        assert r.body == b"late start"
        assert c.request("GET", "/hello").status == 200


# ------------------------------------------------------------ write()

def test_write_callable_then_iterable(server):
    with server.connect() as c:
        r = c.request("GET", "/write")
        assert r.status == 200
        assert r.body == b"write1;write2;iter1;iter2"
        assert c.request("GET", "/hello").status == 200


def test_write_callable_with_content_length(server):
    with server.connect() as c:
        r = c.request("GET", "/write?cl=1")
        assert r.header("Content-Length") == "15"
        assert not r.chunked
        assert r.body == b"write1;write2;x"
        assert c.request("GET", "/hello").status == 200


def test_write_callable_on_http10(server):
    with server.connect() as c:
        r = c.request("GET", "/write", version="HTTP/1.0")
    assert r.body == b"write1;write2;iter1;iter2"


# ------------------------------------------------------------ close()

def test_close_called_after_full_response(server):
    t = token("close-normal")
    with server.connect() as c:
        r = c.request("GET", "/close?mode=normal&token=" + t)
        assert r.body == b"part1;part2"
        server.wait_for_call("close " + t)
        # A further request proves close() ran once, not per request.
        assert c.request("GET", "/hello").status == 200
    assert server.called("close " + t) == ["close " + t]


def test_close_called_for_head(server):
    t = token("close-head")
    with server.connect() as c:
        r = c.request("HEAD", "/close?mode=normal&token=" + t)
        assert r.status == 200 and r.body == b""
        assert c.request("GET", "/hello").status == 200
    server.wait_for_call("close " + t)


def test_close_called_when_iteration_raises(server):
    t = token("close-raise")
    with server.connect() as c:
        c.send(build_request("GET", "/close?mode=raise&token=" + t))
        with pytest.raises(PeerClosed):
            c.read_response()
    server.wait_for_call("close " + t)


def test_close_called_when_first_iteration_raises(server):
    t = token("close-raise-first")
    with server.connect() as c:
        r = c.request("GET", "/close?mode=raise_first&token=" + t)
        assert r.status == 500
    server.wait_for_call("close " + t)


@pytest.mark.parametrize("kind", ["stream", "slow"])
def test_close_called_when_client_disconnects_mid_stream(server, kind):
    t = token("close-" + kind)
    c = server.connect()
    try:
        c.send(build_request("GET", "/close?mode=%s&token=%s" % (kind, t)))
        head = c.read_head()
        assert head.status == 200
        c.read_exact(20000 if kind == "stream" else 20)
    finally:
        c.close()
    server.wait_for_call("close " + t, timeout=10)
    assert not server.called("exhausted " + t)
    # The lane is free again.
    assert server.get("/hello").status == 200


def test_no_iterable_left_unclosed(server):
    """The validator reports an iterable garbage-collected unclosed."""
    for path in ("/hello", "/chunks?n=2", "/write", "/empty_then_replace",
                 "/late_start", "/status?code=204"):
        with server.connect() as c:
            c.request("HEAD", path)
            c.request("GET", path)
    assert server.get("/hello").status == 200
    assert not server.called("UNRAISABLE"), server.called("UNRAISABLE")


# ------------------------------------------------------------ app errors

@pytest.mark.parametrize("when", ["before", "first_iter", "none_result",
                                  "str_chunk", "no_start_response"])
def test_error_before_headers_gives_500_and_traceback(server, when):
    m = token("err-" + when)
    workers = server.worker_pids()
    mark = server.log_mark()
    with server.connect() as c:
        r = c.request("GET", "/raise?when=%s&marker=%s" % (when, m))
        assert r.status == 500, r.raw
        if not r.has_token("Connection", "close"):
            assert c.request("GET", "/hello").status == 200
    if when in ("before", "first_iter"):
        # The application's own exception: its traceback is logged.
        log = server.wait_for_log(m, since=mark)
        assert "Traceback (most recent call last)" in log, log
        assert re.search(r"RuntimeError: e2e-[a-z_-]+ " + re.escape(m), log)
    else:
        # A broken result the server itself rejects: logged as an error.
        log = server.wait_for_log("Error", since=mark)
    assert server.get("/hello").status == 200
    assert server.worker_pids() == workers


@pytest.mark.parametrize("cl", ["", "1000"])
def test_error_after_headers_closes_connection(server, cl):
    m = token("err-after")
    workers = server.worker_pids()
    mark = server.log_mark()
    with server.connect() as c:
        c.send(build_request("GET", "/raise?when=after&cl=%s&marker=%s"
                             % (cl, m)))
        with pytest.raises(PeerClosed) as info:
            c.read_response()
    r = info.value.response
    assert r is not None and r.status == 200
    assert r.body == b"partial-body;"
    log = server.wait_for_log(m, since=mark)
    assert "Traceback (most recent call last)" in log
    assert "RuntimeError: e2e-after " + m in log
    assert server.get("/hello").status == 200
    assert server.worker_pids() == workers


def test_short_content_length_from_app_closes_connection(server):
    """The app promised 100 bytes and sent 10: the connection cannot be
    reused, so the server closes it instead of leaving the client hung."""
    with server.connect() as c:
        c.send(build_request("GET", "/short_cl"))
        head = c.read_head()
        assert head.header("Content-Length") == "100"
        rest = c.read_until_eof(timeout=5)
    assert rest == b"only-10-b!"


def test_wsgi_errors_goes_to_error_log(server):
    m = token("errors")
    mark = server.log_mark()
    assert server.get("/errors?marker=" + m).body == b"logged"
    log = server.wait_for_log(m + " third-line", since=mark)
    assert m + " first-line" in log
    assert m + " second-line" in log


@pytest.mark.parametrize("kind", ["crlf", "lf_in_name", "nonlatin1",
                                  "bytes_status"])
def test_forbidden_status_or_headers_are_not_sent(server, kind):
    """PEP 3333 forbids control characters in headers, non-latin-1 text
    and non-str status; passing them through would allow response
    splitting. The server refuses (500) instead."""
    with server.connect() as c:
        c.send(build_request("GET", "/bad_header?kind=" + kind))
        r = c.read_response()
    assert r.status == 500, r.raw
    assert r.header("X-Injected") is None
    assert b"should not be sent" not in r.body
    assert server.get("/hello").status == 200


@pytest.mark.sluice_only
def test_space_in_header_name_is_refused(server):
    """A header name must be an RFC 9110 token, as for ASGI: one with a
    space is refused (500), and the app's error is logged."""
    mark = server.log_mark()
    with server.connect() as c:
        c.send(build_request("GET", "/bad_header?kind=space_in_name"))
        r = c.read_response()
    assert r.status == 500, r.raw
    assert b"X Injected" not in r.raw
    assert b"should not be sent" not in r.body
    log = server.wait_for_log("bad header", since=mark)
    assert "X Injected" in log, log
    assert server.get("/hello").status == 200


def test_large_last_body_is_sent_whole(server):
    lent_checks.whole(server, LENT)


def test_large_last_bodies_pipelined(server):
    lent_checks.pipelined(server, LENT)


def test_large_last_body_cut_to_content_length(server):
    lent_checks.cut_to_content_length(server, LENT)


def test_large_last_body_short_of_content_length_closes(server):
    lent_checks.short_of_content_length(server, LENT)


def test_large_last_body_reference_is_given_back(server):
    lent_checks.given_back(server)
