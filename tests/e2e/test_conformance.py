"""HTTP/1.1 conformance (RFC 9110 / RFC 9112): what is legal is served,
what is not is refused, each shape a test id of its own.

The accept side runs against WSGI and ASGI apps in pump and inline mode
(conform_app reports what it was handed); the refusals are the parser's
alone and run against one WSGI server in pump mode (the "conformance"
case of tests/unit/test_http.c covers the same parser pieces). A refused
request is sent with a valid request pipelined after it: the answer is the
status wanted with Connection: close, the pipelined request is never
answered, and the app is called for neither.
"""

import itertools
import socket

import pytest

from conftest import ASGI_MODES, EXECUTORS, WSGI_MODES, start_mode_server
from helpers import build_request, wait_until

pytestmark = pytest.mark.sluice_only

_ids = itertools.count()

APPS = [pytest.param((kind, ex), id="%s-%s" % (kind, ex))
        for kind in ("wsgi", "asgi") for ex in EXECUTORS]


@pytest.fixture(scope="module", params=APPS)
def app_server(request, tmp_path_factory):
    kind, ex = request.param
    table = WSGI_MODES if kind == "wsgi" else ASGI_MODES
    mode = dict(table[ex], name=ex)
    with start_mode_server(tmp_path_factory, "conform-" + kind, mode,
                           "conform_app:" + kind) as s:
        s.kind = kind
        yield s


@pytest.fixture(scope="module")
def parser_server(tmp_path_factory):
    mode = dict(WSGI_MODES["pump"], name="pump")
    with start_mode_server(tmp_path_factory, "conform-parser", mode,
                           "conform_app:wsgi") as s:
        yield s


def marker(tag):
    return "%s-%d" % (tag, next(_ids))


def served(server, raw):
    """Send RAW (one request); its 200 answer as the app's JSON."""
    with server.connect() as c:
        c.send(raw)
        r = c.read_response()
    assert r.status == 200, r.raw
    return r.json()


def refused(server, raw, status=400):
    """Send RAW with a request pipelined after it: STATUS, Connection:
    close, nothing more, and the app called for neither."""
    m = marker("refused")
    after = marker("after")
    data = raw.replace(b"/M", b"/x?m=" + m.encode()) + \
        build_request("GET", "/x?m=" + after)
    with server.connect() as c:
        c.send(data)
        r = c.read_response()
        assert r.status == status, r.raw
        assert r.has_token("Connection", "close"), r.headers
        c.expect_eof()
    # the server still serves, and logged no call for either request
    assert served(server, build_request("GET", "/ok"))["path"] == b"/ok".hex()
    assert not server.called(m) and not server.called(after)


H = b"Host: h\r\n"
POST_TE = b"POST /M HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"


# ------------------------------------------------------------ accept side

CHUNKS = {
    "extension-name-value": b"5;name=value\r\nhello\r\n0\r\n\r\n",
    "extension-flag": b"5;flag\r\nhello\r\n0\r\n\r\n",
    "extensions-several": b"5;a=1;b;c=x\r\nhello\r\n0;last=1\r\n\r\n",
    "extension-quoted": b'5;name="a b;c=d"\r\nhello\r\n0\r\n\r\n',
    "extension-quoted-then-more": b'5;q="x";flag;n=1\r\nhello\r\n0\r\n\r\n',
    "extension-values-then-flag": b"5;a=1;b=2;c\r\nhello\r\n0;z=9;y=8\r\n\r\n",
    # RFC 9112 §7.1.1: BWS around ';' and '=' (gunicorn's corpus sends the
    # first; llhttp 8.1 refused both)
    "extension-bws": b"5; some; parameters=stuff\r\nhello\r\n0\r\n\r\n",
    "extension-bws-everywhere":
        b"5 ;\ta = 1 ; b\t=\t\"q;\\\"\" ;c\r\nhello\r\n0 ; z = 9\r\n\r\n",
    "size-leading-zeros": b"0005\r\nhello\r\n0\r\n\r\n",
    "last-chunk-000": b"5\r\nhello\r\n000\r\n\r\n",
    "allowed-trailer": b"5\r\nhello\r\n0\r\nX-Checksum: abc\r\n\r\n",
}


@pytest.mark.parametrize("shape", list(CHUNKS))
def test_chunked_body_is_accepted(app_server, shape):
    got = served(app_server, POST_TE.replace(b"/M", b"/c") + CHUNKS[shape])
    assert got["body"] == "hello"
    # a trailer is never handed over as a header
    assert "x-checksum" not in got["headers"]
    assert "transfer-encoding" in got["headers"]


def test_chunk_extensions_split_at_every_byte(app_server):
    """Size lines are read by the loop, not llhttp (a value ended by ';'
    and whitespace around ';' are what llhttp 8.1 gets wrong): every split
    of them across reads must be served the same."""
    body = (b"5;a=1;b=2;c\r\nhello\r\n3;x=\"q\";y=z\r\n!!!\r\n"
            b"2 ; w = \"v\" ;\tu\r\n??\r\n0;e=1\r\n\r\n")
    with app_server.connect() as c:
        c.send(POST_TE.replace(b"/M", b"/split"))
        for i in range(len(body)):
            c.send(body[i:i + 1])
        got = c.read_response().json()
    assert got["body"] == "hello!!!??"


METHODS = ["M-SEARCH", "foo", "PURGE!", "get", "#x", "A1~|'*+.^_`", "LINK",
           "PROPFIND", "DESCRIBE"]


@pytest.mark.parametrize("method", METHODS)
def test_method_token_reaches_the_app_as_written(app_server, method):
    got = served(app_server, b"%s /m HTTP/1.1\r\nHost: h\r\n\r\n"
                 % method.encode())
    assert got["method"] == method
    assert got["path"] == b"/m".hex()


def test_unknown_method_with_body(app_server):
    got = served(app_server, b"SEARCH-X /m HTTP/1.1\r\nHost: h\r\n"
                 b"Content-Length: 5\r\n\r\nhello")
    assert got["method"] == "SEARCH-X" and got["body"] == "hello"


def test_unknown_method_pipelined_keeps_alive(app_server):
    with app_server.connect() as c:
        c.send(b"foo /1 HTTP/1.1\r\nHost: h\r\n\r\n"
               b"BAR-BAZ /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok"
               b"GET /3 HTTP/1.1\r\nHost: h\r\n\r\n")
        got = [c.read_response().json() for _ in range(3)]
    assert [g["method"] for g in got] == ["foo", "BAR-BAZ", "GET"]
    assert got[1]["body"] == "ok"


def test_unknown_method_split_at_every_byte(parser_server):
    raw = b"\r\nSEARCH-X /\xe9 HTTP/1.1\r\nHost: h\r\n\r\n"
    with parser_server.connect() as c:
        for i in range(len(raw)):
            c.send(raw[i:i + 1])
        got = c.read_response().json()
    assert got["method"] == "SEARCH-X"
    assert got["path"] == b"/\xe9".hex()


def test_head_keeps_no_body_semantics(app_server):
    with app_server.connect() as c:
        c.send(b"HEAD /h HTTP/1.1\r\nHost: h\r\n\r\n")
        r = c.read_response("HEAD")
        assert r.status == 200 and r.body == b""
        # the connection is still in step
        c.send(build_request("GET", "/after"))
        assert c.read_response().json()["path"] == b"/after".hex()


def test_method_in_access_log(make_server, tmp_path):
    log = tmp_path / "access.log"
    s = make_server("conform_app:wsgi",
                    args=["--access-logfile", str(log), "--access-logformat",
                          "m=%(m)s r=%(r)s"])
    served(s, b"PURGE! /al HTTP/1.1\r\nHost: h\r\n\r\n")
    line = wait_until(lambda: [l for l in log.read_text().splitlines()
                               if "/al" in l], 5, "the access log line")[0]
    assert line == "m=PURGE! r=PURGE! /al HTTP/1.1"


TARGETS = {
    "latin1-e9": b"/caf\xe9",
    "byte-ff": b"/\xff\x80/x",
    "utf8-encoded": "/\u00e9t\u00e9".encode("utf-8"),
}


@pytest.mark.parametrize("shape", list(TARGETS))
def test_high_bytes_in_target_pass_through(app_server, shape):
    target = TARGETS[shape]
    got = served(app_server, b"GET %s?q=1 HTTP/1.1\r\nHost: h\r\n\r\n" % target)
    assert got["path"] == target.hex()
    assert got["query"] == "q=1"
    if app_server.kind == "asgi":
        # path is decoded as for any other target: UTF-8 where it is
        if shape == "utf8-encoded":
            assert got["decoded_path"] == "/\u00e9t\u00e9"
        elif shape == "latin1-e9":
            # not UTF-8: the byte is replaced, raw_path keeps it
            assert got["decoded_path"] == "/caf\ufffd"


def test_options_asterisk_is_served(app_server):
    got = served(app_server, b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n")
    assert got["method"] == "OPTIONS"
    assert got["path"] == b"*".hex()


def test_absolute_form_authority_replaces_host(app_server):
    got = served(app_server, b"GET http://example.com:8080/p/q?x=1 HTTP/1.1\r\n"
                 b"Host: other\r\n\r\n")
    assert got["path"] == b"/p/q".hex()
    assert got["query"] == "x=1"
    assert got["host"] == "example.com:8080"


def test_absolute_form_without_path(app_server):
    got = served(app_server, b"GET http://[::1]:81 HTTP/1.1\r\nHost: o\r\n\r\n")
    assert got["path"] == b"/".hex()
    assert got["host"] == "[::1]:81"


def test_field_size_at_the_limit_passes(app_server):
    name = b"X-Big"
    value = b"v" * (8190 - len(name))
    got = served(app_server, b"GET /big HTTP/1.1\r\nHost: h\r\n%s: %s\r\n\r\n"
                 % (name, value))
    assert "x-big" in got["headers"]


# ------------------------------------------------------------ refusals

BAD_TARGET = {
    "ctl-01": b"/a\x01b",
    "ctl-1f": b"/a\x1fb",
    "del-7f": b"/a\x7fb",
    "tab": b"/a\tb",
    "nul": b"/a\x00b",
}


@pytest.mark.parametrize("shape", list(BAD_TARGET))
def test_control_bytes_in_target_refused(parser_server, shape):
    refused(parser_server, b"GET /M%s HTTP/1.1\r\nHost: h\r\n\r\n"
            % BAD_TARGET[shape])


FORBIDDEN_TRAILERS = ["Content-Length: 5", "Transfer-Encoding: chunked",
                      "Host: evil", "Content-Type: text/plain",
                      "Content-Encoding: gzip", "Content-Range: bytes 0-4/5",
                      "Trailer: X", "Authorization: Basic eDp5",
                      "Cookie: a=b", "Set-Cookie: a=b",
                      "Cache-Control: no-cache", "Expect: 100-continue",
                      "Max-Forwards: 1", "Pragma: no-cache", "Range: bytes=0-",
                      "TE: trailers", "Connection: close", "Keep-Alive: 5",
                      "Upgrade: websocket", "Proxy-Authorization: Basic eDp5",
                      "Age: 1", "Date: Mon, 01 Jan 2024 00:00:00 GMT",
                      "Location: /x", "Retry-After: 1", "Vary: *",
                      "WWW-Authenticate: Basic", "Proxy-Authenticate: Basic",
                      "If-Match: *", "Forwarded: for=x",
                      "X-Forwarded-For: 1.2.3.4"]


@pytest.mark.parametrize("field", FORBIDDEN_TRAILERS,
                         ids=[f.split(":")[0] for f in FORBIDDEN_TRAILERS])
def test_forbidden_trailer_refused(parser_server, field):
    refused(parser_server, POST_TE + b"5\r\nhello\r\n0\r\n%s\r\n\r\n"
            % field.encode())


def test_forbidden_trailer_refused_any_case(parser_server):
    refused(parser_server, POST_TE + b"0\r\ncOnTeNt-LeNgTh: 5\r\n\r\n")


def test_forbidden_trailer_after_allowed_one(parser_server):
    refused(parser_server, POST_TE + b"0\r\nX-A: 1\r\nHost: evil\r\n\r\n")


def test_forbidden_trailer_after_the_app_began_reading(app_server):
    """Trailers that come after the body was handed over: no 400 can be
    sent any more, so the app's read fails and the connection closes."""
    m = marker("late")
    with app_server.connect() as c:
        c.send(b"POST /c?m=%s HTTP/1.1\r\nHost: h\r\nExpect: 100-continue"
               b"\r\nTransfer-Encoding: chunked\r\n\r\n" % m.encode())
        # the 100 goes out once the app reads: it is reading now
        assert c.read_response().status == 100
        c.send(b"5\r\nhello\r\n0\r\nHost: evil\r\n\r\n")
        rest = c.read_until_eof()
    assert b'"body": "hello"' not in rest
    want = "error OSError" if app_server.kind == "wsgi" else "error disconnect"
    assert app_server.wait_for_call(m) == ["%s %s" % (m, want)]


def test_transfer_encoding_on_http10_refused(parser_server):
    refused(parser_server, b"POST /M HTTP/1.0\r\nTransfer-Encoding: chunked"
            b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")


@pytest.mark.parametrize("method", ["GET", "POST", "HEAD", "foo", "DELETE"])
def test_asterisk_form_refused_but_for_options(parser_server, method):
    refused(parser_server, b"%s * HTTP/1.1\r\nHost: h\r\n\r\n"
            % method.encode() + b"GET /M HTTP/1.1\r\nHost: h\r\n\r\n")


BAD_AUTHORITY = {
    "empty-host": b"http:///M",
    "userinfo": b"http://user@h/M",
    "port-not-digits": b"http://h:8x/M",
    "port-too-big": b"http://h:65536/M",
    "ipv6-unclosed": b"http://[::1/M",
    "ipv6-garbage": b"http://[zz]/M",
    "bracket-in-name": b"http://h]/M",
    "percent-in-port": b"http://h:%38/M",
    "empty-port-colon-only": b"http://h:x/M",
}


@pytest.mark.parametrize("shape", list(BAD_AUTHORITY))
def test_absolute_form_bad_authority_refused(parser_server, shape):
    refused(parser_server, b"GET %s HTTP/1.1\r\nHost: h\r\n\r\n"
            % BAD_AUTHORITY[shape])


def test_field_over_the_limit_refused(parser_server):
    name = b"X-Big"
    value = b"v" * (8191 - len(name))
    refused(parser_server, b"GET /M HTTP/1.1\r\nHost: h\r\n%s: %s\r\n\r\n"
            % (name, value), 431)


@pytest.fixture(scope="module")
def small_head_server(tmp_path_factory):
    mode = dict(WSGI_MODES["pump"], name="pump")
    with start_mode_server(tmp_path_factory, "conform-small", mode,
                           "conform_app:wsgi",
                           args=["--limit-request-fields", "4",
                                 "--limit-request-field-size", "100"]) as s:
        yield s


def test_small_field_limit_boundary(small_head_server):
    value = b"v" * (100 - len(b"X-B"))
    got = served(small_head_server,
                 b"GET /b HTTP/1.1\r\nHost: h\r\nX-B: %s\r\n\r\n" % value)
    assert "x-b" in got["headers"]
    refused(small_head_server,
            b"GET /M HTTP/1.1\r\nHost: h\r\nX-B: %sv\r\n\r\n" % value, 431)


def test_too_many_fields_refused(small_head_server):
    refused(small_head_server, b"GET /M HTTP/1.1\r\nHost: h\r\n"
            + b"".join(b"X-%d: 1\r\n" % i for i in range(4)) + b"\r\n", 431)


def test_every_limit_reached_at_once_fits_the_head(small_head_server):
    # a request line of 4094 bytes (the default limit) and four fields
    # (Host among them) each of name + value = 100 bytes, with ": " and
    # CRLF: the bound on the whole head leaves room for all of it
    path = b"/" + b"a" * (4094 - len(b"GET ") - len(b" HTTP/1.1") - 1)
    fields = [b"Host: " + b"h" * 96] + [b"X-%d: " % i + b"v" * 97
                                        for i in range(3)]
    got = served(small_head_server, b"GET %s HTTP/1.1\r\n" % path
                 + b"".join(f + b"\r\n" for f in fields) + b"\r\n")
    assert got["path"] == path.hex()


def test_total_head_bounded(small_head_server):
    # whitespace around a value is not part of the field's size, but the
    # head as a whole is bounded all the same
    pad = b" " * 100000
    with small_head_server.connect() as c:
        try:
            c.send(b"GET /M HTTP/1.1\r\nHost: h\r\nX-Pad:" + pad)
        except OSError:
            pass  # the server may answer and close before taking it all
        r = c.read_response()
    assert r.status == 431


# chunked body cut short: the app sees an error, never a short body

CUT = {
    "mid-chunk": b"5\r\nhel",
    "after-chunk-data": b"5\r\nhello\r\n",
    "after-last-chunk": b"5\r\nhello\r\n0\r\n",
    "in-trailers": b"5\r\nhello\r\n0\r\nX-T: 1\r\n",
}


@pytest.mark.parametrize("shape", list(CUT))
@pytest.mark.parametrize("close", ["shut-wr", "close"])
def test_cut_chunked_body_is_an_error(app_server, shape, close):
    m = marker("cut")
    head = (b"POST /c?m=%s HTTP/1.1\r\nHost: h\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" % m.encode())
    sock = socket.create_connection((app_server.host, app_server.port),
                                    timeout=5)
    try:
        sock.sendall(head + CUT[shape])
        if close == "close":
            sock.close()
        else:
            sock.shutdown(socket.SHUT_WR)
            # the server closes the connection (after an answer, if any)
            while sock.recv(65536):
                pass
    finally:
        sock.close()
    got = app_server.wait_for_call(m)
    if app_server.kind == "wsgi":
        assert got == ["%s error OSError" % m]
    else:
        assert got == ["%s error disconnect" % m]


# Transfer-Encoding: only a single, final chunked is served; a coding we
# do not know before it is 501, anything where chunked is not last is 400

TE = {
    "gzip-then-chunked": (b"gzip, chunked", 501),
    "identity-then-chunked": (b"identity, chunked", 501),
    "deflate-then-chunked": (b"deflate,chunked", 501),
    "x-custom-then-chunked": (b"x-custom, chunked", 501),
    "chunked-then-gzip": (b"chunked, gzip", 400),
    "identity-alone": (b"identity", 400),
    "gzip-alone": (b"gzip", 400),
    "chunked-twice-in-list": (b"chunked, chunked", 400),
    "chunked-with-parameter": (b"chunked;q=1", 400),
    "empty": (b"", 400),
    "xchunked": (b"xchunked", 400),
    "chunked-comma-empty": (b"chunked,", 400),
}


@pytest.mark.parametrize("shape", list(TE))
def test_transfer_coding_table(parser_server, shape):
    value, status = TE[shape]
    refused(parser_server, b"POST /M HTTP/1.1\r\nHost: h\r\n"
            b"Transfer-Encoding: %s\r\n\r\n5\r\nhello\r\n0\r\n\r\n" % value,
            status)


def test_gzip_chunked_split_over_two_fields(parser_server):
    refused(parser_server, b"POST /M HTTP/1.1\r\nHost: h\r\n"
            b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n0\r\n\r\n", 501)


# request smuggling shapes: all refused with 400

SMUGGLING = {
    "cl-and-te": b"POST /M HTTP/1.1\r\n" + H + b"Content-Length: 4\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te-and-cl": b"POST /M HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked"
                 b"\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
    "two-differing-cls": b"POST /M HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n"
                         b"Content-Length: 6\r\n\r\nhello!",
    "two-equal-cls": b"POST /M HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n"
                     b"Content-Length: 5\r\n\r\nhello",
    "cl-list-equal": b"POST /M HTTP/1.1\r\n" + H + b"Content-Length: 5, 5"
                     b"\r\n\r\nhello",
    "cl-plus-sign": b"POST /M HTTP/1.1\r\n" + H + b"Content-Length: +5\r\n"
                    b"\r\nhello",
    "cl-hex": b"POST /M HTTP/1.1\r\n" + H + b"Content-Length: 0x5\r\n\r\nhello",
    "cl-trailing-garbage": b"POST /M HTTP/1.1\r\n" + H + b"Content-Length: 5x"
                           b"\r\n\r\nhello",
    "te-obs-fold": b"POST /M HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked"
                   b"\r\n , identity\r\n\r\n0\r\n\r\n",
    "te-obs-fold-value-on-next-line": b"POST /M HTTP/1.1\r\n" + H +
    b"Transfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n",
    "te-twice": b"POST /M HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te-space-before-colon": b"POST /M HTTP/1.1\r\n" + H +
    b"Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
    "te-vertical-tab": b"POST /M HTTP/1.1\r\n" + H +
    b"Transfer-Encoding: \x0bchunked\r\n\r\n0\r\n\r\n",
    "te-form-feed": b"POST /M HTTP/1.1\r\n" + H +
    b"Transfer-Encoding: \x0cchunked\r\n\r\n0\r\n\r\n",
    "space-before-colon": b"GET /M HTTP/1.1\r\n" + H + b"X-A : 1\r\n\r\n",
    "bare-lf-after-request-line": b"GET /M HTTP/1.1\n" + H + b"\r\n",
    "bare-lf-ending-head": b"GET /M HTTP/1.1\r\n" + H + b"\n",
    "bare-lf-after-header": b"GET /M HTTP/1.1\r\nHost: h\nX: y\r\n\r\n",
    "bare-cr-in-head": b"GET /M HTTP/1.1\r\nHost: h\rX: y\r\n\r\n",
    "nul-in-header-value": b"GET /M HTTP/1.1\r\n" + H + b"X-A: a\x00b\r\n\r\n",
    "nul-in-header-name": b"GET /M HTTP/1.1\r\n" + H + b"X-\x00A: b\r\n\r\n",
    "chunk-size-overflow": POST_TE + b"10000000000000000\r\nx\r\n0\r\n\r\n",
    "chunk-size-negative": POST_TE + b"-5\r\nhello\r\n0\r\n\r\n",
    "chunk-size-0x": POST_TE + b"0x5\r\nhello\r\n0\r\n\r\n",
    "chunk-size-bare-lf": POST_TE + b"5\nhello\r\n0\r\n\r\n",
    "chunk-data-bare-lf": POST_TE + b"5\r\nhello\n0\r\n\r\n",
    "chunk-data-too-long": POST_TE + b"3\r\nhello\r\n0\r\n\r\n",
    "chunk-size-space-inside": POST_TE + b"5 5\r\nhello\r\n0\r\n\r\n",
    # whitespace is allowed around ';' and '=' only
    "chunk-size-trailing-space": POST_TE + b"5 \r\nhello\r\n0\r\n\r\n",
    "chunk-size-leading-space": POST_TE + b" 5\r\nhello\r\n0\r\n\r\n",
    "chunk-ext-trailing-space": POST_TE + b"5;a=1 \r\nhello\r\n0\r\n\r\n",
    "chunk-ext-no-name": POST_TE + b"5; ;a\r\nhello\r\n0\r\n\r\n",
    "chunk-ext-no-value": POST_TE + b"5;a= \r\nhello\r\n0\r\n\r\n",
    "chunk-ext-space-in-name": POST_TE + b"5;a b\r\nhello\r\n0\r\n\r\n",
    "chunk-ext-open-quote": POST_TE + b"5;a=\"x\r\nhello\r\n0\r\n\r\n",
    "chunk-ext-bare-cr": POST_TE + b"5;a\rb\r\nhello\r\n0\r\n\r\n",
    "chunk-ext-too-long": POST_TE + b"5;a=" + b"x" * 5000 +
        b"\r\nhello\r\n0\r\n\r\n",
    "request-line-two-spaces": b"GET  /M HTTP/1.1\r\n" + H + b"\r\n",
    "http-version-1-10": b"GET /M HTTP/1.10\r\n" + H + b"\r\n",
    "host-twice": b"GET /M HTTP/1.1\r\n" + H + b"Host: other\r\n\r\n",
}


@pytest.mark.parametrize("shape", list(SMUGGLING))
def test_smuggling_shape_refused(parser_server, shape):
    refused(parser_server, SMUGGLING[shape])
