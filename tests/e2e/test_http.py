"""HTTP/1.1 features, checked on the exact bytes with raw sockets.

Keep-alive (1.1 default, 1.0 opt-in), pipelining, Expect: 100-continue,
HEAD, request bodies framed by Content-Length or chunked encoding, chunked
responses when the application gives no length (close-delimited on 1.0),
the Date and Server headers.
"""

import email.utils
import hashlib
import re
import ssl
import time

import pytest

import helpers
from e2e_data import pattern
from helpers import HTTPError, build_request, chunked, server_name

IMF_FIXDATE = re.compile(
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} "
    r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
    r"\d{2}:\d{2}:\d{2} GMT$")


def test_basic_get_has_date_and_server(server):
    with server.connect() as c:
        r = c.request("GET", "/hello")
    assert r.status == 200
    assert r.version == "HTTP/1.1"
    assert r.body == b"hello\n"
    assert r.header("Server") == server_name()
    date = r.header("Date")
    assert date and IMF_FIXDATE.match(date), date
    sent = email.utils.parsedate_to_datetime(date).timestamp()
    assert abs(sent - time.time()) < 5, date
    assert len(r.header_all("Date")) == 1
    assert len(r.header_all("Server")) == 1


def test_the_connection_is_the_passs_transport(server):
    """Plain, or TLS in run.sh's TLS pass (SLUICE_E2E_TLS=1): the client
    speaks what the pass says, and the app sees its scheme."""
    with server.connect() as c:
        tls = isinstance(c.sock, ssl.SSLSocket)
        r = c.request("GET", "/environ")
    assert tls == helpers.TLS
    assert r.json()["wsgi.url_scheme"]["value"] == helpers.url_scheme("http")


def test_status_line_keeps_the_app_reason_phrase(server):
    with server.connect() as c:
        r = c.request("GET", "/status?code=299&reason=Custom+Reason+Here")
    assert r.raw.startswith(b"HTTP/1.1 299 Custom Reason Here\r\n")
    assert r.body == b"status body"


def test_repeated_response_headers_are_all_sent(server):
    with server.connect() as c:
        r = c.request("GET", "/headers")
    assert r.header_all("Set-Cookie") == ["a=1", "b=2"]
    assert r.header("X-Custom") == "custom value"


def test_keep_alive_is_the_default_on_http11(server):
    with server.connect() as c:
        port = c.local_port
        for i in range(5):
            r = c.request("GET", "/environ")
            assert r.status == 200
            assert not r.has_token("Connection", "close")
            # Same TCP connection every time.
            assert r.json()["REMOTE_PORT"]["value"] == str(port)


def test_connection_close_on_http11_closes(server):
    with server.connect() as c:
        r = c.request("GET", "/hello", headers=[("Connection", "close")])
        assert r.status == 200
        assert r.has_token("Connection", "close")
        c.expect_eof()


def test_http10_closes_by_default(server):
    with server.connect() as c:
        r = c.request("GET", "/hello", version="HTTP/1.0")
        assert r.status == 200
        assert r.body == b"hello\n"
        assert not r.has_token("Connection", "keep-alive")
        c.expect_eof()


def test_http10_keep_alive_when_asked(server):
    with server.connect() as c:
        for i in range(3):
            r = c.request("GET", "/hello", version="HTTP/1.0",
                          headers=[("Connection", "keep-alive")])
            assert r.status == 200
            assert r.body == b"hello\n"
            assert r.has_token("Connection", "keep-alive"), r.headers
            assert not r.chunked


def test_http10_without_host_is_served(server):
    with server.connect() as c:
        r = c.request("GET", "/hello", version="HTTP/1.0", host=None)
    assert r.status == 200


def test_http10_streamed_body_is_close_delimited(server):
    """No length from the app on 1.0: no chunked coding, body ends at close,
    even when the client asked for keep-alive."""
    with server.connect() as c:
        r = c.request("GET", "/chunks?n=4&size=1000", version="HTTP/1.0",
                      headers=[("Connection", "keep-alive")])
        assert r.status == 200
        assert r.header("Transfer-Encoding") is None
        assert not r.has_token("Connection", "keep-alive")
        assert r.close_delimited
        assert r.body == pattern(4000)


def test_http11_streamed_body_is_chunked_and_keeps_alive(server):
    with server.connect() as c:
        r = c.request("GET", "/chunks?n=4&size=1000")
        assert r.status == 200
        assert r.chunked
        assert r.header("Content-Length") is None
        assert r.body == pattern(4000)
        r2 = c.request("GET", "/hello")
        assert r2.body == b"hello\n"


def test_empty_chunks_from_app_do_not_end_the_chunked_body(server):
    """b"" items must not be framed as the zero-length last chunk."""
    with server.connect() as c:
        r = c.request("GET", "/chunks?n=3&size=10&empty=1")
        assert r.chunked
        assert r.body == pattern(30)
        assert 0 not in r.chunk_sizes
        r2 = c.request("GET", "/hello")
        assert r2.body == b"hello\n"


def test_content_length_from_app_is_used_not_chunked(server):
    with server.connect() as c:
        r = c.request("GET", "/big?size=200000")
    assert not r.chunked
    assert r.header("Content-Length") == "200000"
    assert r.body == pattern(200000)


def test_large_response_is_complete(server):
    size = 8 * 1024 * 1024 + 13
    with server.connect(timeout=30) as c:
        r = c.request("GET", "/big?size=%d" % size)
    assert len(r.body) == size
    assert hashlib.sha256(r.body).digest() == \
        hashlib.sha256(pattern(size)).digest()


def test_pipelined_requests_answered_in_order(server):
    reqs = b"".join(build_request("GET", "/status?code=200&body=req%d" % i)
                    for i in range(10))
    with server.connect() as c:
        c.send(reqs)
        bodies = [c.read_response().body for i in range(10)]
    assert bodies == [b"req%d" % i for i in range(10)]


def test_pipelined_slow_first_request_still_answers_in_order(server):
    reqs = (build_request("GET", "/slow?t=0.3")
            + build_request("GET", "/status?code=200&body=second")
            + build_request("POST", "/echo", body=b"third")
            + build_request("GET", "/status?code=200&body=fourth"))
    with server.connect() as c:
        c.send(reqs)
        r1 = c.read_response()
        r2 = c.read_response()
        r3 = c.read_response()
        r4 = c.read_response()
    assert r1.body.startswith(b"slept 0.3")
    assert (r2.body, r3.body, r4.body) == (b"second", b"third", b"fourth")


def test_pipelined_head_then_get(server):
    """A HEAD response carries no body, so the next response parses."""
    reqs = (build_request("HEAD", "/chunks?n=2&size=100")
            + build_request("HEAD", "/big?size=5000")
            + build_request("GET", "/hello"))
    with server.connect() as c:
        c.send(reqs)
        h1 = c.read_response("HEAD")
        h2 = c.read_response("HEAD")
        g = c.read_response()
    assert h1.status == 200 and h1.body == b""
    assert h2.status == 200 and h2.header("Content-Length") == "5000"
    assert g.body == b"hello\n"


def test_head_sends_no_body_bytes(server):
    with server.connect() as c:
        r = c.request("HEAD", "/big?size=5000",
                      headers=[("Connection", "close")])
        assert r.status == 200
        assert r.header("Content-Length") == "5000"
        # Anything after the head would be body bytes.
        c.expect_eof()


def test_request_split_into_single_bytes(server):
    req = build_request("POST", "/echo", body=b"dribbled body")
    with server.connect() as c:
        for i in range(len(req)):
            c.send(req[i:i + 1])
        r = c.read_response()
    assert r.status == 200
    assert r.body == b"dribbled body"


def test_request_split_at_every_offset(server):
    """The head and body arriving in two reads, split at every byte; the
    worker survives all of it. Every outcome is collected, so a failure
    lists each offset that went wrong and how."""
    req = (b"POST /environ?q=split HTTP/1.1\r\nHost: split.test\r\n"
           b"X-Split-Header: some value\r\nContent-Type: text/plain\r\n"
           b"Content-Length: 5\r\n\r\nhello")
    want = ("/environ", "q=split", "split.test", "some value", "text/plain",
            "5")
    workers = server.worker_pids()
    bad = []
    for i in range(1, len(req)):
        with server.connect(timeout=5) as c:
            c.send(req[:i])
            time.sleep(0.003)  # pacing: make the two parts separate reads
            try:
                c.send(req[i:])
                r = c.read_response()
            except (OSError, HTTPError) as e:
                bad.append((i, req[:i][-12:], type(e).__name__))
                continue
            if r.status != 200:
                bad.append((i, req[:i][-12:], r.status))
                continue
            env = r.json()
            got = tuple(env.get(k, {}).get("value") for k in (
                "PATH_INFO", "QUERY_STRING", "HTTP_HOST",
                "HTTP_X_SPLIT_HEADER", "CONTENT_TYPE", "CONTENT_LENGTH"))
            if got != want:
                bad.append((i, req[:i][-12:], got))
    now = server.worker_pids()
    assert now == workers and not bad, \
        "workers %s -> %s; %d of %d split points failed: %r" % (
            workers, now, len(bad), len(req) - 1, bad)


def test_chunked_body_split_at_every_offset(server):
    body = b"0123456789abcdef"
    req = (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
           b"\r\n\r\n" + chunked(body, sizes=(5, 11), ext=b";e=1",
                                 trailers=b"T: v\r\n"))
    head_len = req.index(b"\r\n\r\n") + 4
    bad = []
    with server.connect() as c:
        for i in range(head_len, len(req)):
            c.send(req[:i])
            time.sleep(0.003)  # pacing: make the two parts separate reads
            c.send(req[i:])
            r = c.read_response()
            if r.status != 200 or r.body != body:
                bad.append((i, r.status, r.body))
                break
    assert not bad, bad


def test_pipelined_posts_with_bodies(server):
    bodies = [pattern(n, n) for n in (1, 100, 70000, 0, 5)]
    reqs = b"".join(build_request("POST", "/echo", body=b) for b in bodies)
    with server.connect() as c:
        c.send(reqs)
        got = [c.read_response().body for b in bodies]
    assert got == bodies


def test_content_length_request_body(server):
    body = pattern(100000)
    with server.connect() as c:
        r = c.request("POST", "/echo", body=body)
    assert r.status == 200 and r.body == body


def test_chunked_request_body_with_extensions_and_trailers(server):
    body = pattern(5000)
    req = (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
           b"\r\n" + chunked(body, sizes=(1, 300, 4096), ext=b";name=val",
                             trailers=b"X-Trailer: yes\r\n"))
    with server.connect() as c:
        c.send(req)
        r = c.read_response()
        assert r.status == 200 and r.body == body
        r2 = c.request("GET", "/hello")
        assert r2.body == b"hello\n"


def test_empty_chunked_request_body(server):
    req = (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
           b"\r\n0\r\n\r\n")
    with server.connect() as c:
        c.send(req)
        r = c.read_response()
    assert r.status == 200 and r.body == b""


def test_large_chunked_request_body(server):
    body = pattern(3 * 1024 * 1024 + 7)
    req = (b"POST /echo?sha=1 HTTP/1.1\r\nHost: x\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n"
           + chunked(body, sizes=(65536, 1, 12345)))
    with server.connect(timeout=30) as c:
        c.send(req)
        r = c.read_response()
    assert r.status == 200
    assert r.json() == {"len": len(body),
                        "sha256": hashlib.sha256(body).hexdigest()}


def test_uppercase_chunked_and_hex_sizes(server):
    body = b"A" * 0x1F + b"B" * 0xAB
    req = (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n"
           b"\r\n1F\r\n" + b"A" * 0x1F + b"\r\nab\r\n" + b"B" * 0xAB
           + b"\r\n0\r\n\r\n")
    with server.connect() as c:
        c.send(req)
        r = c.read_response()
    assert r.status == 200 and r.body == body


def test_expect_100_continue(server):
    body = b"sent after 100"
    head = (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
            b"Expect: 100-continue\r\n\r\n" % len(body))
    with server.connect() as c:
        c.send(head)
        interim = c.read_response()
        assert interim.raw.startswith(b"HTTP/1.1 100 Continue\r\n"), \
            interim.raw
        assert interim.raw.endswith(b"\r\n\r\n")
        c.send(body)
        r = c.read_response()
        assert r.status == 200 and r.body == body
        r2 = c.request("GET", "/hello")
        assert r2.body == b"hello\n"


def test_expect_100_continue_chunked(server):
    body = pattern(20000)
    head = (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            b"Expect: 100-continue\r\n\r\n")
    with server.connect() as c:
        c.send(head)
        interim = c.read_response()
        assert interim.status == 100
        c.send(chunked(body, sizes=(999,)))
        r = c.read_response()
    assert r.status == 200 and r.body == body


def test_expect_100_continue_body_sent_without_waiting(server):
    """A client that does not wait for 100 must still be served."""
    body = b"eager body"
    req = (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
           b"Expect: 100-continue\r\n\r\n%s" % (len(body), body))
    with server.connect() as c:
        c.send(req)
        r = c.read_response()
        if r.status == 100:
            r = c.read_response()
        assert r.status == 200 and r.body == body
        r2 = c.request("GET", "/hello")
        assert r2.body == b"hello\n"


def test_no_100_continue_for_http10(server):
    """RFC 9110 10.1.1: a 1.0 request's 100-continue must be ignored."""
    body = b"ten"
    head = (b"POST /echo HTTP/1.0\r\nContent-Length: 3\r\n"
            b"Expect: 100-continue\r\n\r\n")
    with server.connect() as c:
        c.send(head)
        early = c.read_available(0.3)
        assert b"100 Continue" not in early
        c.send(body)
        rest = early + c.read_until_eof()
    assert b" 100 " not in rest.split(b"\r\n", 1)[0]
    assert rest.endswith(b"\r\n\r\nten")


@pytest.mark.parametrize("code", [204, 304])
def test_no_body_statuses_have_no_framing(server, code):
    with server.connect() as c:
        c.send(build_request("GET", "/status?code=%d" % code)
               + build_request("GET", "/hello"))
        r = c.read_response()
        assert r.status == code
        assert r.header("Transfer-Encoding") is None
        assert r.header("X-Status") == str(code)
        r2 = c.read_response()
        assert r2.body == b"hello\n"


def test_nothing_served_after_connection_close(server):
    """A request after one that said Connection: close is never run."""
    m = "after-close-%d" % id(server)
    with server.connect() as c:
        c.send(build_request("GET", "/hello", [("Connection", "close")])
               + build_request("GET", "/hello/" + m))
        r = c.read_response()
        assert r.status == 200 and r.has_token("Connection", "close")
        c.expect_eof()
    assert not server.called(m)


def test_date_header_advances(server):
    first = server.get("/hello").header("Date")
    later = wait_until_value(lambda: server.get("/hello").header("Date"),
                             lambda d: d != first, 4)
    assert email.utils.parsedate_to_datetime(later) > \
        email.utils.parsedate_to_datetime(first)


def wait_until_value(fetch, ok, timeout):
    end = time.monotonic() + timeout
    while True:
        v = fetch()
        if ok(v):
            return v
        assert time.monotonic() < end, "value stayed %r for %ss" % (v, timeout)
        time.sleep(0.05)


def test_many_connections_interleaved(server):
    """Fifty open connections, requests sent on all before any is read."""
    conns = [server.connect() for i in range(50)]
    try:
        for rnd in range(5):
            for i, c in enumerate(conns):
                c.send(build_request("POST", "/echo", body=b"c%d r%d" % (i, rnd)))
            for i, c in enumerate(conns):
                r = c.read_response()
                assert r.status == 200 and r.body == b"c%d r%d" % (i, rnd)
    finally:
        for c in conns:
            c.close()


def test_slow_reader_gets_the_whole_body(server):
    """The client reads nothing for a while, then everything arrives."""
    size = 24 * 1024 * 1024 + 5
    with server.connect(timeout=30) as c:
        c.send(build_request("GET", "/big?size=%d" % size))
        time.sleep(1.0)  # pacing: a client that is slow to read
        r = c.read_response()
        assert hashlib.sha256(r.body).digest() == \
            hashlib.sha256(pattern(size)).digest()
        assert c.request("GET", "/hello").body == b"hello\n"


def test_unread_request_body_does_not_become_a_request(server):
    """A body the app ignores is discarded, never parsed as a request."""
    smuggled = build_request("GET", "/hello/smuggled-%d" % id(server))
    first = build_request("POST", "/status?code=200&body=ignored",
                          body=smuggled * 50)
    with server.connect() as c:
        c.send(first + build_request("GET", "/status?code=200&body=next"))
        r = c.read_response()
        assert r.body == b"ignored"
        if not r.has_token("Connection", "close"):
            r2 = c.read_response()
            assert r2.body == b"next"
        else:
            c.expect_eof()
    assert not server.called("smuggled-%d" % id(server))
