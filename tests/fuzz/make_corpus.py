#!/usr/bin/python3
"""make_corpus.py - writes the seed corpora of tests/fuzz/fuzz_ws.c into
tests/fuzz/corpus/ws/, of tests/fuzz/fuzz_proxy.c into
tests/fuzz/corpus/proxy/, of tests/fuzz/fuzz_http.c into
tests/fuzz/corpus/http/, of tests/fuzz/fuzz_config.c into
tests/fuzz/corpus/config/, of tests/fuzz/fuzz_tls.c into
tests/fuzz/corpus/tls/ and of tests/fuzz/fuzz_static.c into
tests/fuzz/corpus/static/ (committed; re-run after changing an input
format). Files whose names begin with "regress-" are regression inputs
(findings), kept as they were found: this script leaves them alone.

Each seed is three config bytes (see fuzz_ws.c) then the data: client
frames for the parser, with and without deflate, Sec-WebSocket-Extensions
values for the offer parser, and payloads for the writer's round trip.
"""
import os
import struct
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "ws")
KEY = b"\x37\xfa\x21\x3d"


def frame(b0, payload, masked=True, form=0):
    n = len(payload)
    if form == 0 and n < 126:
        head = bytes([b0, (0x80 if masked else 0) | n])
    elif form != 8 and n <= 0xFFFF:
        head = bytes([b0, (0x80 if masked else 0) | 126]) + struct.pack("!H", n)
    else:
        head = bytes([b0, (0x80 if masked else 0) | 127]) + struct.pack("!Q", n)
    if not masked:
        return head + payload
    body = bytes(c ^ KEY[i % 4] for i, c in enumerate(payload))
    return head + KEY + body


def deflate(data, bits=15):
    z = zlib.compressobj(6, zlib.DEFLATED, -bits)
    out = z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


# config byte 0: bits 0-1 mode (0/1 parser, 2 offer, 3 writer), bit 2
# deflate, bit 3 client_no_context_takeover; byte 1: window bits, bit 6
# large limit; byte 2: chunk seed.
RX, RXZ, OFFER, TX, TXZ = b"\x00\x7f\x01", b"\x04\x7f\x02", b"\x02\x00\x03", \
    b"\x03\x7f\x04", b"\x07\x7f\x05"

SEEDS = {
    "hello": RX + frame(0x81, b"Hello"),
    "fragmented": RX + frame(0x01, b"Hel") + frame(0x89, b"ping")
    + frame(0x80, b"lo"),
    "binary-256": RX + frame(0x82, bytes(range(256))),
    "binary-len64": RX + frame(0x82, b"\x00" * 300, form=8),
    "close": RX + frame(0x88, b"\x03\xe8bye"),
    "close-empty": RX + frame(0x88, b""),
    "utf8-split": RX + frame(0x01, b"a\xf0\x9f") + frame(0x80, b"\x98\x80z"),
    "unmasked": RX + frame(0x81, b"Hello", masked=False),
    "small-limit": b"\x00\x01\x07" + frame(0x82, b"x" * 40)
    + frame(0x01, b"y" * 20) + frame(0x80, b"z" * 20),
    "deflate-hello": RXZ + frame(0xC1, deflate(b"Hello")),
    "deflate-fragments": RXZ + frame(0x41, deflate(b"Hello world " * 20)[:9])
    + frame(0x8A, b"") + frame(0x80, deflate(b"Hello world " * 20)[9:]),
    "deflate-bomb": b"\x0c\x07\x09" + frame(0xC2, deflate(b"\x00" * 200000)),
    "deflate-bits9": b"\x04\x49\x0a" + frame(0xC1, deflate(b"abc" * 300, 9)),
    "offer-browser": OFFER
    + b"permessage-deflate; client_max_window_bits",
    "offer-all": OFFER + b"permessage-deflate; client_no_context_takeover; "
    b"server_no_context_takeover; server_max_window_bits=10; "
    b"client_max_window_bits=\"9\"",
    "offer-several": OFFER + b"x-foo; a=\"b,c\", permessage-deflate; bad, "
    b"permessage-deflate; server_max_window_bits=8",
    "tx-text": TX + "héllo wörld, ".encode() * 30,
    "tx-deflate": TXZ + b"the quick brown fox " * 100,
    "tx-deflate-bits8": b"\x07\x40\x06" + b"aaaaabbbbbcccc" * 80,
}


V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v2(cmd, fam, addr):
    return V2_SIG + bytes([0x20 | cmd, fam]) + struct.pack(">H", len(addr)) \
        + addr


# fuzz_proxy: first byte even = a PROXY header (+ what follows it), odd =
# Forwarded NUL X-Forwarded-For NUL X-Forwarded-Proto
PROXY_SEEDS = {
    "v1-tcp4": b"\0PROXY TCP4 192.0.2.1 192.0.2.2 56324 443\r\nGET / HTTP/1.1\r\n",
    "v1-tcp6": b"\0PROXY TCP6 2001:db8::1 ::1 56324 443\r\n",
    "v1-unknown": b"\0PROXY UNKNOWN\r\n",
    "v2-tcp4": b"\0" + v2(1, 0x11, bytes([192, 0, 2, 1, 127, 0, 0, 1])
                        + struct.pack(">HH", 56324, 8000)),
    "v2-tcp6": b"\0" + v2(1, 0x21, bytes(15) + b"\1" + bytes(15) + b"\1"
                        + struct.pack(">HH", 1, 2)),
    "v2-tlv": b"\0" + v2(1, 0x11, bytes([10, 0, 0, 1, 10, 0, 0, 2])
                       + struct.pack(">HH", 1, 2) + b"\x04\x00\x02ab"),
    "v2-local": b"\0" + v2(0, 0x00, b""),
    "fwd-chain": b"\1for=192.0.2.60;proto=https, for=\"[2001:db8::1]:80\""
                 b"\0203.0.113.1, 10.0.0.1\0https, http",
    "xff-only": b"\1\0198.51.100.7, 127.0.0.1\0http",
    "fwd-obfuscated": b"\1for=_hidden;by=_proxy, for=unknown\0\0",
}


# fuzz_http: byte 0 the options profile (0 ASGI-like defaults, 1 WSGI-like
# with --health-path /healthz,
# 2 tight limits, 3 forwarding headers not trusted), byte 1 the seed of the
# cuts, then the bytes a client sends.
def http(body, profile=0, seed=7):
    return bytes([profile, seed]) + body


def chunked(*chunks, ext=b"", trailer=b""):
    out = b""
    for c in chunks:
        out += b"%x%s\r\n%s\r\n" % (len(c), ext, c)
    return out + b"0\r\n" + trailer + b"\r\n"


GET = b"GET /a?b=c HTTP/1.1\r\nHost: x\r\n\r\n"
POST = b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
CHUNKED_HEAD = (b"POST /c HTTP/1.1\r\nHost: x\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")

HTTP_SEEDS = {
    "get": http(GET),
    "get-wsgi": http(GET, profile=1),
    "health": http(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + GET,
                   profile=1),
    "get-10": http(b"GET / HTTP/1.0\r\n\r\n"),
    "get-10-keepalive": http(b"GET / HTTP/1.0\r\nConnection: keep-alive"
                             b"\r\n\r\n" + b"GET /2 HTTP/1.0\r\n\r\n"),
    "head": http(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n"),
    "options-star": http(b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"),
    "absolute-form": http(b"GET http://example.com:8080/p?q HTTP/1.1\r\n"
                          b"Host: example.com\r\n\r\n"),
    "post": http(POST),
    "post-expect": http(b"POST /p HTTP/1.1\r\nHost: x\r\nExpect: "
                        b"100-continue\r\nContent-Length: 3\r\n\r\nabc"),
    "chunked": http(CHUNKED_HEAD + chunked(b"hello", b" world")),
    "chunked-ext": http(CHUNKED_HEAD + b"5;name=value;flag\r\nhello\r\n"
                        b"000\r\n\r\n"),
    "chunked-leading-zeros": http(CHUNKED_HEAD + b"0005\r\nhello\r\n"
                                  b"0\r\n\r\n"),
    "chunked-trailers": http(CHUNKED_HEAD + chunked(
        b"abc", trailer=b"X-Checksum: 1\r\nX-More: 2\r\n")),
    "chunked-bad-trailer": http(CHUNKED_HEAD + chunked(
        b"abc", trailer=b"Content-Length: 3\r\n")),
    "chunked-no-final-crlf": http(CHUNKED_HEAD + b"3\r\nabc\r\n0\r\n"),
    "chunked-size-overflow": http(CHUNKED_HEAD + b"fffffffffffffffff\r\n"),
    "pipelined-get-get": http(GET + b"GET /2 HTTP/1.1\r\nHost: y\r\n\r\n"),
    "pipelined-post-get": http(POST + GET),
    "pipelined-chunked-get": http(CHUNKED_HEAD + chunked(b"xy") + GET),
    "pipelined-close": http(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: "
                            b"close\r\n\r\n" + GET),
    "smuggle-cl-te": http(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4"
                          b"\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
                          b"\r\n" + GET),
    "smuggle-te-cl": http(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:"
                          b" chunked\r\nContent-Length: 4\r\n\r\n0\r\n"
                          b"\r\n"),
    "smuggle-two-cl": http(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1"
                           b"\r\nContent-Length: 2\r\n\r\nab"),
    "smuggle-te-identity": http(b"POST / HTTP/1.1\r\nHost: x\r\n"
                                b"Transfer-Encoding: identity, chunked\r\n"
                                b"\r\n0\r\n\r\n"),
    "smuggle-te-10": http(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked"
                          b"\r\n\r\n0\r\n\r\n"),
    "obs-fold": http(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n"),
    "bare-lf": http(b"GET / HTTP/1.1\nHost: x\n\n"),
    "bare-cr": http(b"GET / HTTP/1.1\rHost: x\r\n\r\n"),
    "nul-in-value": http(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n"),
    "nul-in-target": http(b"GET /a\x00b HTTP/1.1\r\nHost: x\r\n\r\n"),
    "space-before-colon": http(b"GET / HTTP/1.1\r\nHost : x\r\n\r\n"),
    "empty-name": http(b"GET / HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n"),
    "two-hosts": http(b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"),
    "no-host": http(b"GET / HTTP/1.1\r\n\r\n"),
    "http2-preface": http(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    "method-token": http(b"M-SEARCH! / HTTP/1.1\r\nHost: x\r\n\r\n"),
    "target-latin1": http(b"GET /caf\xe9 HTTP/1.1\r\nHost: x\r\n\r\n"),
    "long-header": http(b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: "
                        + b"v" * 3000 + b"\r\n\r\n"),
    "many-headers": http(b"GET / HTTP/1.1\r\nHost: x\r\n"
                         + b"".join(b"X-%d: %d\r\n" % (i, i)
                                    for i in range(40)) + b"\r\n"),
    "tight-414": http(b"GET /" + b"u" * 60 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
                      profile=2),
    "tight-431": http(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 60
                      + b"\r\n\r\n", profile=2),
    "tight-431-count": http(b"GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\n"
                            b"C: 3\r\nD: 4\r\n\r\n", profile=2),
    "tight-413": http(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 30"
                      b"\r\n\r\n" + b"b" * 30, profile=2),
    "tight-413-chunked": http(CHUNKED_HEAD + chunked(b"a" * 20, b"b" * 20),
                              profile=2),
    "forwarded": http(b"GET / HTTP/1.1\r\nHost: x\r\nForwarded: for=192.0.2.1"
                      b";proto=https;host=example.com\r\nX-Forwarded-For: "
                      b"198.51.100.2, 10.0.0.1\r\nX-Forwarded-Port: 8443"
                      b"\r\n\r\n"),
    "forwarded-untrusted": http(b"GET / HTTP/1.1\r\nHost: x\r\n"
                                b"X-Forwarded-For: 192.0.2.1\r\n\r\n",
                                profile=3),
    "websocket": http(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket"
                      b"\r\nConnection: Upgrade\r\nSec-WebSocket-Key: "
                      b"dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13"
                      b"\r\nSec-WebSocket-Extensions: permessage-deflate; "
                      b"client_max_window_bits\r\n\r\n\x81\x80abcd"),
    "websocket-bad-version": http(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: "
                                  b"websocket\r\nConnection: Upgrade\r\n"
                                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="
                                  b"\r\nSec-WebSocket-Version: 8\r\n\r\n"),
    "upgrade-h2c": http(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\n"
                        b"Connection: Upgrade, HTTP2-Settings\r\n\r\n"
                        + GET, profile=1),
    "version-2": http(b"GET / HTTP/2.0\r\nHost: x\r\n\r\n"),
    "version-09": http(b"GET /\r\n\r\n"),
    "expect-other": http(b"PUT / HTTP/1.1\r\nHost: x\r\nExpect: x\r\n"
                         b"Content-Length: 1\r\n\r\nz"),
    "body-partial": http(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10"
                         b"\r\n\r\nabc"),
    "head-partial": http(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: b"),
    "leading-crlf": http(b"\r\n\r\n" + GET),
}


# fuzz_config: byte 0 chooses 0 a configuration file's text, 1
# SLUICE_CMD_ARGS NUL the file's text, 2 an argv with NUL between words.
FULL_CONF = b"""# every kind of setting
bind = 127.0.0.1:8001, unix:/tmp/s.sock
bind = [::1]:8002
workers = 2
threads = 4
worker_connections = 500
chdir = /srv/app
pythonpath = /a, b, /c
venv = /srv/venv
interface = asgi
loop = asyncio
lifespan = off
root_path = '/api'
log_level = debug
error_logfile = -
limit_request_line = 8190
limit_request_fields = 0
limit_request_field_size = 16384
limit_request_body = 1048576
header_timeout = 2.5
keep-alive = 0.5
timeout = 0
graceful_timeout = 10
boot_timeout = 60
shutdown_delay = 1
max_requests = 1000
max_requests_jitter = 50
reload_surge = 2
metrics_bind = 127.0.0.1:9100
ws_max_size = 65536
ws_max_queue = 8
ws_ping_interval = 0
ws_ping_timeout = 5
ws_per_message_deflate = false
forwarded_allow_ips = "10.0.0.0/8, fd00::/8, unix"
proxy_protocol = true
proxy_allow_from = *
access_logfile = -
access_logformat = "%(h)s %(r)s %(s)s \\"%(a)s\\""
access_log_json = false
http_protocols = h2, h1
http2_cleartext = prior-knowledge
http2_max_concurrent_streams = 250
http2_initial_window_size = 1048576
http2_max_frame_size = 32768
http2_max_header_list_size = 0
health_path = /healthz
pid = /run/s.pid
backlog = 128
umask = 0o22
name = app   # a comment after a blank
user = nobody
group = nogroup
reload = true
reload_extra_file = a.html, b.css
"""

CONFIG_SEEDS = {
    "file-full": b"\0" + FULL_CONF,
    "file-small": b"\0workers = 3\r\nbind = unix:/run/a.sock\n",
    "file-quotes": b"\0name = \"a # b \\\" c\"\nroot_path = 'x # y'  # c\n",
    "file-empty": b"\0",
    "file-comments": b"\0# only\n   \n\t# comments\n",
    "bad-unknown": b"\0wrokers = 2\n",
    "bad-no-equals": b"\0workers 2\n",
    "bad-value": b"\0workers = many\n",
    "bad-range": b"\0workers = 0\nbacklog = 999999\n",
    "bad-flag": b"\0reload = maybe\n",
    "bad-action": b"\0config = other.conf\n",
    "bad-unterminated": b"\0name = \"abc\n",
    "bad-after-quote": b"\0name = 'a' b\n",
    "bad-nul": b"\0name = a\0b\n",
    "bad-empty-list": b"\0bind = , ,\n",
    "bad-long-name": b"\0" + b"n" * 80 + b" = 1\n",
    "bad-logformat": b"\0access_logformat = %(\n",
    "bad-extra-without-reload": b"\0reload_extra_file = a\n",
    "bad-http-protocols": b"\0http_protocols = h2,,H1\n",
    "bad-prior-knowledge": b"\0http2_cleartext = prior-knowledge\n",
    "env-args": b"\1-w 3 --bind 'unix:/tmp/a b.sock' --name=\"x\\\"y\"\0"
                b"workers = 2\n",
    "env-app": b"\1--threads=2 other:app\0",
    "env-bad-quote": b"\1--name 'abc\0",
    "env-bad-value": b"\1--backlog=-1\0",
    "argv-full": b"\2-w\0002\0--threads=3\0-b\0:8000\0--bind=unix:s\0"
                 b"--pythonpath\0a,,b\0--umask=077\0--reload\0"
                 b"--reload-extra-file=x\0--keep-alive=1.5\0app:app",
    "argv-help": b"\2--help\0app:app",
    "argv-abbrev": b"\2--work=2\0--thr\0004\0m:a",
    "argv-missing-arg": b"\2app:app\0--workers",
    "argv-two-apps": b"\2a:b\0c:d",
    "argv-bad-app": b"\2nocolon",
    "argv-unknown": b"\2-Z\0app:app",
    "argv-newline": b"\2--chdir=a\nb\0app:app",
    "argv-octal": b"\2--umask\0000o777\0app:app",
    "argv-huge": b"\2--limit-request-body=99999999999999999999\0app:app",
}

# fuzz_tls.c: an even first byte, then a server name and certificate names
# a line each; an odd one, then the offer's number and the client's ALPN
# list in wire form.
def sni(host, *names):
    return b"\x00" + b"\n".join((host,) + names)


def alpn(offer, *names):
    return b"\x01" + bytes([offer]) + b"".join(bytes([len(n)]) + n
                                              for n in names)


LONG_HOST = b".".join([b"a" * 63] * 3 + [b"b" * 61])  # 253 bytes
TLS_SEEDS = {
    "sni-exact": sni(b"localhost", b"localhost", b"example.com"),
    "sni-wildcard": sni(b"www.example.com", b"localhost", b"example.com",
                        b"*.example.com", b"api.example.com"),
    "sni-case": sni(b"WWW.Example.COM", b"example.com", b"*.EXAMPLE.com"),
    "sni-none": sni(b"example.net", b"*.example.com", b"example.org"),
    "sni-two-labels": sni(b"a.b.example.com", b"*.example.com",
                          b"*.b.example.com"),
    "sni-bad-wildcards": sni(b"www.example.com", b"w*.example.com",
                             b"*.com", b"*", b"www.*.com", b"*.*.example.com"),
    "sni-empty": sni(b"", b"localhost", b""),
    "sni-long": sni(LONG_HOST, b"*." + LONG_HOST.split(b".", 1)[1],
                    LONG_HOST + b"c"),
    "alpn-browser": alpn(0, b"h2", b"http/1.1"),
    "alpn-h2-first": alpn(1, b"h2", b"http/1.1"),
    "alpn-client-order": alpn(2, b"http/1.1", b"h2"),
    "alpn-none-common": alpn(0, b"h2", b"h2c"),
    "alpn-many": alpn(4, b"spdy/1", b"spdy/2", b"h2c", b"http/1.0",
                      b"http/1.1"),
    "alpn-acme": alpn(5, b"acme-tls/1"),
    "alpn-zero-length": b"\x01\x00\x00\x08http/1.1",
    "alpn-past-end": b"\x01\x00\x09http/1.1",
    "alpn-empty": b"\x01\x00",
}

# fuzz_static.c: the room for the path (a byte), a shift (a byte) and a
# size (eight bytes, little-endian, shifted right by it), then the value
# every function reads: a path, a Range, an Accept-Encoding value, and an
# entity-tag list, '\n', a tag.
def static(value, cap=255, size=10, shift=0):
    return bytes([cap, shift]) + struct.pack("<Q", size) + value


STATIC_SEEDS = {
    "path-plain": static(b"css/site.min.css", cap=17),
    "path-slashes": static(b"//a//b/"),
    "path-trailing-slash": static(b"a/b/", cap=4),
    "path-utf8": static(b"caf%C3%A9/%E2%82%AC.txt"),
    "path-raw-utf8": static("café/€.txt".encode()),
    "path-plus": static(b"a+b%2B%20c"),
    "path-dotdot": static(b"a/../b"),
    "path-encoded-dots": static(b"%2e%2E/x"),
    "path-hidden": static(b"a/.git/config"),
    "path-encoded-hidden": static(b"%2eenv"),
    "path-encoded-slash": static(b"a%2Fb"),
    "path-bad-escape": static(b"a%4"),
    "path-nul": static(b"a%00b"),
    "path-control": static(b"a%0a%7fb"),
    "path-backslash": static(b"a%5cb\\c"),
    "path-tight": static(b"abc", cap=3),
    "path-no-room": static(b"abc", cap=0),
    "range-one": static(b"bytes=0-0"),
    "range-open": static(b"bytes=5-"),
    "range-suffix": static(b"bytes=-3"),
    "range-suffix-zero": static(b"bytes=-0"),
    "range-suffix-long": static(b"bytes=-11"),
    "range-past-end": static(b"bytes=2-1000"),
    "range-last-at-size": static(b"bytes=0-10"),
    "range-unsat": static(b"bytes=10-"),
    "range-backwards": static(b"bytes=5-2"),
    "range-several": static(b"bytes=1-2,4-5"),
    "range-unit": static(b"items=0-1"),
    "range-spaces": static(b" BYTES = 1-2\t"),
    "range-19-digits": static(b"bytes=0-9999999999999999999", size=1 << 63),
    "range-20-digits": static(b"bytes=0-18446744073709551615"),
    "range-size-0": static(b"bytes=0-", size=0),
    "range-size-max": static(b"bytes=-1", size=(1 << 64) - 1),
    "range-shifted": static(b"bytes=100-", size=(1 << 64) - 1, shift=56),
    "etag-list": static(b'"a", W/"b", "x"\n"x"'),
    "etag-weak": static(b'W/"x"\n"x"'),
    "etag-star": static(b'*\n"x"'),
    "etag-weak-tag": static(b'"x"\nW/"x"'),
    "etag-empty-tag": static(b'""\n""'),
    "etag-malformed": static(b'junk, "x"\n"x"'),
    "etag-unterminated": static(b'"x\n"x"'),
    "accept-browser": static(b"gzip, deflate, br, zstd"),
    "accept-q": static(b"br;q=0, gzip;q=0.5, *;q=0.1"),
    "accept-star-refused": static(b"gzip;q=0, *"),
    "accept-star-zero": static(b"*;q=0"),
    "accept-q-edges": static(b"br;q=0.001, gzip;q=1.000, identity;q=0"),
    "accept-x-gzip": static(b"x-gzip ; Q=1.0"),
}


def main():
    sout = os.path.join(os.path.dirname(OUT), "static")
    os.makedirs(sout, exist_ok=True)
    for name, data in STATIC_SEEDS.items():
        with open(os.path.join(sout, name), "wb") as f:
            f.write(data)
    print(f"{len(STATIC_SEEDS)} seeds in {sout}")
    tout = os.path.join(os.path.dirname(OUT), "tls")
    os.makedirs(tout, exist_ok=True)
    for name, data in TLS_SEEDS.items():
        with open(os.path.join(tout, name), "wb") as f:
            f.write(data)
    print(f"{len(TLS_SEEDS)} seeds in {tout}")
    cout = os.path.join(os.path.dirname(OUT), "config")
    os.makedirs(cout, exist_ok=True)
    for name, data in CONFIG_SEEDS.items():
        with open(os.path.join(cout, name), "wb") as f:
            f.write(data)
    print(f"{len(CONFIG_SEEDS)} seeds in {cout}")
    hout = os.path.join(os.path.dirname(OUT), "http")
    os.makedirs(hout, exist_ok=True)
    for name, data in HTTP_SEEDS.items():
        with open(os.path.join(hout, name), "wb") as f:
            f.write(data)
    print(f"{len(HTTP_SEEDS)} seeds in {hout}")
    pout = os.path.join(os.path.dirname(OUT), "proxy")
    os.makedirs(pout, exist_ok=True)
    for name, data in PROXY_SEEDS.items():
        with open(os.path.join(pout, name), "wb") as f:
            f.write(data)
    print(f"{len(PROXY_SEEDS)} seeds in {pout}")
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(SEEDS)} seeds in {OUT}")


if __name__ == "__main__":
    main()
