"""Behind a proxy: --forwarded-allow-ips with X-Forwarded-For,
X-Forwarded-Proto, X-Forwarded-Host, X-Forwarded-Port and RFC 7239
Forwarded, and --proxy-protocol (PROXY v1
and v2) with --proxy-allow-from, by hand-written bytes and through a real
HAProxy (Debian's haproxy, started here with send-proxy and
send-proxy-v2).

What the app sees is read back from the apps' own dumps: WSGI's
REMOTE_ADDR, REMOTE_PORT, wsgi.url_scheme, HTTP_HOST, SERVER_NAME and
SERVER_PORT (wsgi_app /environ), ASGI's client, scheme, server and
headers (asgi_app /scope, and the websocket scope of ws_app /scope). Every test runs for a WSGI and an ASGI app, in pump mode and in
inline mode.
"""

import base64
import contextlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import struct
import subprocess

import pytest

import helpers
from conftest import EXECUTORS

pytestmark = pytest.mark.sluice_only

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
KINDS = ("wsgi", "asgi")
APPS = {"wsgi": "wsgi_app:app", "asgi": "asgi_app:app"}

# The servers each test needs, by name: the arguments they run with.
CONFIGS = {
    "default": [],
    "chain": ["--forwarded-allow-ips", "127.0.0.1, 10.0.0.0/8"],
    "untrusted": ["--forwarded-allow-ips", "10.0.0.1"],
    "star": ["--forwarded-allow-ips", "*"],
    "proxy": ["--proxy-protocol", "--forwarded-allow-ips",
              "127.0.0.1,::1,192.0.2.1"],
    "proxy-refused": ["--proxy-protocol", "--proxy-allow-from",
                      "10.0.0.1"],
}

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v1(src, sport, dst="127.0.0.1", dport=8000):
    fam = "TCP6" if ":" in src else "TCP4"
    return ("PROXY %s %s %s %d %d\r\n" % (fam, src, dst, sport,
                                          dport)).encode()


def v2(src=None, sport=0, dst=None, dport=0, local=False, tlvs=b""):
    """A binary header: PROXY over TCP from SRC, or LOCAL."""
    if local or src is None:
        return V2_SIG + bytes([0x20 if local else 0x21, 0x00]) + \
            struct.pack("!H", len(tlvs)) + tlvs
    a = ipaddress.ip_address(src)
    b = ipaddress.ip_address(dst or ("::1" if a.version == 6 else
                                     "127.0.0.1"))
    block = a.packed + b.packed + struct.pack("!HH", sport, dport) + tlvs
    fam = 0x21 if a.version == 6 else 0x11
    return V2_SIG + bytes([0x21, fam]) + struct.pack("!H", len(block)) + \
        block


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """servers(kind, executor, config): one server per combination,
    started when first asked for and kept for the module."""
    started = {}

    def get(kind, executor, config):
        key = (kind, executor, config)
        if key not in started:
            args = CONFIGS[config]
            proxied = "--proxy-protocol" in args
            workdir = tmp_path_factory.mktemp("proxy-%s-%s-%s" % key)
            s = helpers.Server(workdir, APPS[kind], args=args,
                               inline=executor == "inline",
                               ready_path=None if proxied else "/__ready")
            started[key] = s
            s.start()
            if proxied and config != "proxy-refused":
                ready(s)
        return started[key]

    yield get
    problems = []
    for s in started.values():
        for p in s.stop():
            problems.append(p + "\n" + s.diagnostics())
    assert not problems, "\n".join(problems)


def ready(s):
    """A proxied server is ready once a request with a header is served
    (the probe of helpers.Server sends none)."""
    with s.connect(timeout=helpers.START_TIMEOUT) as c:
        c.send(v1("127.0.0.1", 1) + helpers.build_request(
            "GET", "/__ready", [("Connection", "close")]))
        assert c.read_response().status == 200


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


@pytest.fixture(params=EXECUTORS)
def executor(request):
    return request.param


def client_of(kind, r):
    """(address, port, scheme) the app saw, from its dump in response R."""
    assert r.status == 200, r.body
    d = r.json()
    if kind == "wsgi":
        addr = d.get("REMOTE_ADDR", {}).get("value")
        port = d.get("REMOTE_PORT", {}).get("value")
        return addr, int(port) if port is not None else None, \
            d["wsgi.url_scheme"]["value"]
    client = d["client"]
    return (client[0], client[1]) + (d["scheme"],) if client else \
        (None, None, d["scheme"])


def host_of(kind, r):
    """(Host header, server name, server port) the app saw, from its dump
    in response R: WSGI's HTTP_HOST, SERVER_NAME and SERVER_PORT, ASGI's
    host header (never rewritten) and server."""
    assert r.status == 200, r.body
    d = r.json()
    if kind == "wsgi":
        return (d["HTTP_HOST"]["value"], d["SERVER_NAME"]["value"],
                int(d["SERVER_PORT"]["value"]))
    hosts = [v for k, v in d["headers"] if k == "host"]
    assert len(hosts) == 1, d["headers"]
    assert d["types"]["server"] == "tuple"
    return (hosts[0], d["server"][0], d["server"][1])


def ask(s, kind, headers=(), prefix=b"", conn=None, close=True,
        read=client_of):
    """What the app saw for one request with HEADERS, sent after PREFIX
    (a PROXY header) on CONN or a fresh connection: READ(kind, response),
    by default the client."""
    path = "/environ" if kind == "wsgi" else "/scope"
    hdrs = list(headers) + ([("Connection", "close")] if close else [])
    data = prefix + helpers.build_request("GET", path, hdrs)
    if conn is not None:
        conn.send(data)
        return read(kind, conn.read_response())
    with s.connect() as c:
        c.send(data)
        return read(kind, c.read_response())


# ------------------------------------------------------------ forwarding

def test_no_header_is_the_peer(servers, kind, executor):
    s = servers(kind, executor, "default")
    with s.connect() as c:
        got = ask(s, kind, conn=c)
        assert got == ("127.0.0.1", c.local_port, "http")


def test_trusted_peer_headers_name_the_client(servers, kind, executor):
    s = servers(kind, executor, "default")
    assert ask(s, kind, [("X-Forwarded-For", "203.0.113.9"),
                         ("X-Forwarded-Proto", "https")]) == \
        ("203.0.113.9", 0, "https")
    assert ask(s, kind, [("X-Forwarded-For", "[2001:db8::9]:4711")]) == \
        ("2001:db8::9", 4711, "http")
    # RFC 7239, with quoting, IPv6 and a port; it wins over X-Forwarded-*
    assert ask(s, kind, [
        ("Forwarded", 'for="[2001:db8:cafe::17]:4711";proto=https'),
        ("X-Forwarded-For", "198.51.100.1")]) == \
        ("2001:db8:cafe::17", 4711, "https")
    # an obfuscated identifier is what the proxy chose to say
    assert ask(s, kind, [("Forwarded", "for=_hidden;proto=http")])[:2] == \
        ("_hidden", 0)


def test_header_lines_join(servers, kind, executor):
    """X-Forwarded-For sent twice is one list: the right-most untrusted
    entry is in the second line."""
    s = servers(kind, executor, "chain")
    assert ask(s, kind, [("X-Forwarded-For", "1.1.1.1"),
                         ("X-Forwarded-For", "203.0.113.9, 10.0.0.2")]) \
        [0] == "203.0.113.9"


def test_keep_alive_request_without_headers(servers, kind, executor):
    """The forwarded client is the request's: the next request on the
    same connection, without the header, is the peer's again."""
    s = servers(kind, executor, "default")
    with s.connect() as c:
        assert ask(s, kind, [("X-Forwarded-For", "203.0.113.9"),
                             ("X-Forwarded-Proto", "https")],
                   conn=c, close=False) == ("203.0.113.9", 0, "https")
        assert ask(s, kind, [("X-Forwarded-For", "203.0.113.10")],
                   conn=c, close=False) == ("203.0.113.10", 0, "http")
        assert ask(s, kind, conn=c) == ("127.0.0.1", c.local_port, "http")


def test_untrusted_peer_changes_nothing(servers, kind, executor):
    s = servers(kind, executor, "untrusted")
    with s.connect() as c:
        assert ask(s, kind, [("X-Forwarded-For", "203.0.113.9"),
                             ("X-Forwarded-Proto", "https"),
                             ("Forwarded", "for=198.51.100.1;proto=https")],
                   conn=c) == ("127.0.0.1", c.local_port, "http")


def test_malformed_header_changes_nothing(servers, kind, executor):
    s = servers(kind, executor, "default")
    with s.connect() as c:
        assert ask(s, kind, [("X-Forwarded-For", "203.0.113.9, evil host"),
                             ("X-Forwarded-Proto", "gopher")],
                   conn=c) == ("127.0.0.1", c.local_port, "http")


def test_chain_rightmost_untrusted(servers, kind, executor):
    s = servers(kind, executor, "chain")
    assert ask(s, kind, [("X-Forwarded-For",
                          "1.1.1.1, 203.0.113.9, 10.0.0.2, 10.0.0.3")]) \
        == ("203.0.113.9", 0, "http")
    assert ask(s, kind, [("Forwarded", "for=1.1.1.1, "
                          "for=203.0.113.9;proto=https, for=10.0.0.2")]) \
        == ("203.0.113.9", 0, "https")


def test_star_trusts_everyone(servers, kind, executor):
    s = servers(kind, executor, "star")
    assert ask(s, kind, [("X-Forwarded-For", "1.1.1.1, 203.0.113.9")])[0] \
        == "1.1.1.1"


# ------------------------------------------------------------ host and port

def forwarded_host(kind, host, port):
    """What the app should see for a forwarded HOST (as sent) and PORT:
    WSGI's HTTP_HOST is the forwarded one, ASGI's host header stays as
    the request sent it (build_request's)."""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return (host if kind == "wsgi" else "e2e.test", name.strip("[]"), port)


def test_forwarded_host_and_port(servers, kind, executor):
    s = servers(kind, executor, "default")
    plain = ("e2e.test", "127.0.0.1", s.port)
    with s.connect() as c:
        def seen(*headers):
            return ask(s, kind, headers, conn=c, close=False, read=host_of)

        assert seen() == plain
        # no port: the scheme's
        assert seen(("X-Forwarded-Host", "example.com"),
                    ("X-Forwarded-Proto", "https")) == \
            forwarded_host(kind, "example.com", 443)
        assert seen(("X-Forwarded-Host", "example.com")) == \
            forwarded_host(kind, "example.com", 80)
        # the host's own port; X-Forwarded-Port over it
        assert seen(("X-Forwarded-Host", "example.com:8443")) == \
            forwarded_host(kind, "example.com:8443", 8443)
        assert seen(("X-Forwarded-Host", "example.com:8443"),
                    ("X-Forwarded-Port", "9000")) == \
            forwarded_host(kind, "example.com:8443", 9000)
        assert seen(("X-Forwarded-Host", "[2001:db8::1]:8080")) == \
            forwarded_host(kind, "[2001:db8::1]:8080", 8080)
        # a port alone: the rest stays
        assert seen(("X-Forwarded-Port", "8443")) == \
            ("e2e.test", "127.0.0.1", 8443)
        # RFC 7239 host=, with the scheme of the same element
        assert seen(("Forwarded",
                     'for=203.0.113.9;host="example.org:81";proto=https')) \
            == forwarded_host(kind, "example.org:81", 81)
        assert seen(("Forwarded", "for=203.0.113.9;host=example.org;"
                     "proto=https")) == \
            forwarded_host(kind, "example.org", 443)
        # the next request without them is the request's own again
        assert seen() == plain


def test_forwarded_host_of_the_clients_hop(servers, kind, executor):
    """Lists as long as X-Forwarded-For: the client's hop's entry; else
    the right-most."""
    s = servers(kind, executor, "chain")
    assert ask(s, kind, [("X-Forwarded-For", "203.0.113.9, 10.0.0.2"),
                         ("X-Forwarded-Host", "a.example, b.internal"),
                         ("X-Forwarded-Port", "8443, 8080")],
               read=host_of) == forwarded_host(kind, "a.example", 8443)
    assert ask(s, kind, [("X-Forwarded-For", "203.0.113.9"),
                         ("X-Forwarded-Host", "a.example, b.internal")],
               read=host_of) == forwarded_host(kind, "b.internal", 80)
    assert ask(s, kind, [("Forwarded", "for=203.0.113.9;host=a.example, "
                          "for=10.0.0.2;host=b.internal")],
               read=host_of) == forwarded_host(kind, "a.example", 80)


def test_forwarded_host_untrusted_changes_nothing(servers, kind, executor):
    s = servers(kind, executor, "untrusted")
    assert ask(s, kind, [("X-Forwarded-Host", "example.com:8443"),
                         ("X-Forwarded-Port", "9000"),
                         ("Forwarded", "host=example.org")],
               read=host_of) == ("e2e.test", "127.0.0.1", s.port)


@pytest.mark.parametrize("headers", [
    [("X-Forwarded-Host", "evil host")],
    [("X-Forwarded-Host", "a:b:c")],
    [("X-Forwarded-Host", "example.com:99999")],
    [("X-Forwarded-Host", "user@example.com")],
    [("X-Forwarded-Host", "x" * 300)],
    [("X-Forwarded-Host", "[not-ipv6]")],
    [("X-Forwarded-Port", "0")],
    [("X-Forwarded-Port", "65536")],
    [("X-Forwarded-Port", "http")],
    [("Forwarded", 'host="evil host"')],
], ids=["space", "colons", "big-port", "userinfo", "too-long", "brackets",
        "port-0", "port-big", "port-word", "forwarded-space"])
def test_forwarded_host_malformed_changes_nothing(servers, kind, executor,
                                                  headers):
    s = servers(kind, executor, "default")
    assert ask(s, kind, headers, read=host_of) == \
        ("e2e.test", "127.0.0.1", s.port)


# ------------------------------------------------------------ PROXY protocol

def test_proxy_v1_and_v2_by_hand(servers, kind, executor):
    s = servers(kind, executor, "proxy")
    assert ask(s, kind, prefix=v1("192.0.2.7", 56324)) == \
        ("192.0.2.7", 56324, "http")
    assert ask(s, kind, prefix=v1("2001:db8::7", 443, "::1")) == \
        ("2001:db8::7", 443, "http")
    assert ask(s, kind, prefix=v2("192.0.2.8", 1234)) == \
        ("192.0.2.8", 1234, "http")
    assert ask(s, kind, prefix=v2("2001:db8::8", 4321,
                                  tlvs=b"\x04\x00\x03abc")) == \
        ("2001:db8::8", 4321, "http")
    # LOCAL and UNKNOWN: the real peer
    with s.connect() as c:
        assert ask(s, kind, prefix=v2(local=True), conn=c) == \
            ("127.0.0.1", c.local_port, "http")
    with s.connect() as c:
        assert ask(s, kind, prefix=b"PROXY UNKNOWN\r\n", conn=c) == \
            ("127.0.0.1", c.local_port, "http")


def test_proxy_header_in_pieces(servers, kind, executor):
    """Split across reads, and the request right behind it."""
    s = servers(kind, executor, "proxy")
    for header in (v1("192.0.2.9", 999), v2("192.0.2.9", 999)):
        with s.connect() as c:
            for i in range(0, len(header), 5):
                c.send(header[i:i + 5])
                # a piece is no reason to close
                assert c.idle_state() == "open"
            got = ask(s, kind, conn=c)
            assert got == ("192.0.2.9", 999, "http")


def test_proxy_peer_is_what_forwarding_is_checked_against(servers, kind,
                                                          executor):
    """The PROXY header's source is the peer --forwarded-allow-ips sees:
    a client's own X-Forwarded-For is not believed because the proxy in
    front was trusted."""
    s = servers(kind, executor, "proxy")
    assert ask(s, kind, [("X-Forwarded-For", "203.0.113.9")],
               prefix=v1("198.51.100.5", 5)) == ("198.51.100.5", 5, "http")
    # 192.0.2.1 is on this server's --forwarded-allow-ips
    assert ask(s, kind, [("X-Forwarded-For", "203.0.113.9")],
               prefix=v1("192.0.2.1", 5)) == ("203.0.113.9", 0, "http")


BAD_HEADERS = [
    pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="missing"),
    pytest.param(b"PROXY TCP4 192.0.2.1 nonsense\r\n", id="v1-malformed"),
    pytest.param(b"PROXY TCP4 192.0.2.1 127.0.0.1 1 99999\r\n",
                 id="v1-bad-port"),
    pytest.param(V2_SIG + b"\x31\x11\x00\x0c" + bytes(12), id="v2-version"),
    pytest.param(V2_SIG + b"\x21\x11\x00\x04" + bytes(4), id="v2-short"),
]


@pytest.mark.parametrize("data", BAD_HEADERS)
def test_bad_proxy_header_closes(servers, kind, executor, data):
    s = servers(kind, executor, "proxy")
    mark = s.log_mark()
    with s.connect() as c:
        c.send(data)
        c.expect_eof()
    s.wait_for_log("PROXY protocol: closing the connection from 127.0.0.1",
                   since=mark)
    # the worker lives on and serves the next
    assert ask(s, kind, prefix=v1("192.0.2.7", 7))[0] == "192.0.2.7"


def test_proxy_header_cut_short_closes(servers, kind, executor):
    s = servers(kind, executor, "proxy")
    mark = s.log_mark()
    with s.connect() as c:
        c.send(b"PROXY TCP4 192.0.2")
        c.sock.shutdown(socket.SHUT_WR)
        c.expect_eof()
    s.wait_for_log("closed in the middle of the header", since=mark)


def test_proxy_peer_not_allowed(servers, kind, executor):
    s = servers(kind, executor, "proxy-refused")
    mark = s.log_mark()
    # no probe can tell this server is ready: the worker may still be
    # starting, and then the refusal comes once it accepts
    with s.connect(timeout=helpers.START_TIMEOUT) as c:
        c.send(v1("192.0.2.7", 7) + helpers.build_request("GET", "/"))
        c.expect_eof(timeout=helpers.START_TIMEOUT)
    s.wait_for_log("peer not allowed to send a header (--proxy-allow-from)",
                   since=mark)


def test_proxy_header_timeout(make_server, kind, executor):
    s = make_server(APPS[kind], inline=executor == "inline",
                    args=["--proxy-protocol", "--header-timeout", "1"],
                    ready_path=None)
    ready(s)
    mark = s.log_mark()
    with s.connect() as c:
        c.send(b"PROXY ")
        c.expect_eof(timeout=5)
    s.wait_for_log("no header within --header-timeout", since=mark)


def test_websocket_scope_client(make_server, executor):
    """The websocket scope says the same as the http one: client, and
    the scheme as wss when the proxy says https."""
    s = make_server("ws_app:app", inline=executor == "inline")
    key = base64.b64encode(os.urandom(16)).decode()
    c = helpers.RawConn.tcp(s.host, s.port, timeout=helpers.START_TIMEOUT)
    with c:
        c.send(helpers.build_request("GET", "/scope", [
            ("Connection", "Upgrade"), ("Upgrade", "websocket"),
            ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13"),
            ("X-Forwarded-For", "203.0.113.9:77"),
            ("X-Forwarded-Proto", "https"),
            ("X-Forwarded-Host", "example.com")]))
        r = c.read_head()
        assert r.status == 101
        first = c.read_exact(2)
        assert first[0] == 0x81  # one unmasked text frame
        n = first[1]
        if n == 126:
            n = struct.unpack("!H", c.read_exact(2))[0]
        scope = json.loads(c.read_exact(n))
    assert scope["client"] == ["203.0.113.9", 77]
    assert scope["scheme"] == "wss"
    # the forwarded host is the server; the headers stay as sent
    assert scope["server"] == ["example.com", 443]
    assert ["host", "e2e.test"] in scope["headers"]


# ------------------------------------------------------------ real HAProxy

@contextlib.contextmanager
def haproxy(tmp_path, backend_port, send_proxy):
    """HAProxy on a free port of [::1] sending to 127.0.0.1:BACKEND_PORT
    with SEND_PROXY ("send-proxy" or "send-proxy-v2"); yields the port."""
    if not os.access(HAPROXY, os.X_OK):
        pytest.skip("%s is not installed (Debian package haproxy)"
                    % HAPROXY)
    port = helpers.free_port("::1")
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(
        "global\n"
        "    maxconn 64\n"
        "defaults\n"
        "    mode tcp\n"
        "    timeout connect 5s\n"
        "    timeout client 20s\n"
        "    timeout server 20s\n"
        "frontend fe\n"
        "    bind [::1]:%d\n"
        "    default_backend be\n"
        "backend be\n"
        "    server s1 127.0.0.1:%d %s\n" % (port, backend_port, send_proxy))
    log = open(tmp_path / "haproxy.log", "wb")
    proc = subprocess.Popen([HAPROXY, "-f", str(cfg), "-db"],
                            stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        def listening():
            if proc.poll() is not None:
                raise AssertionError("haproxy exited with %s: %s" % (
                    proc.returncode,
                    (tmp_path / "haproxy.log").read_text(errors="replace")))
            with contextlib.suppress(OSError):
                socket.create_connection(("::1", port), 1).close()
                return True
            return False
        helpers.wait_until(listening, 10, "haproxy to listen")
        yield port
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        log.close()


@pytest.mark.parametrize("send_proxy", ["send-proxy", "send-proxy-v2"])
def test_through_haproxy(servers, tmp_path, kind, executor, send_proxy):
    """HAProxy takes the client on ::1 and connects to sluice from
    127.0.0.1: the app sees the client's IPv6 address and its port."""
    s = servers(kind, executor, "proxy")
    with haproxy(tmp_path, s.port, send_proxy) as port:
        with helpers.RawConn.tcp("::1", port) as c:
            got = ask(s, kind, conn=c)
            assert got == ("::1", c.local_port, "http")


def test_unix_socket_peers(make_server, tmp_path, kind, executor):
    """A unix: socket peer has no address; 'unix' on the list trusts it,
    and then a forwarded client is the app's client."""
    path = str(tmp_path / "s.sock")
    s = make_server(APPS[kind], inline=executor == "inline",
                    binds=["unix:" + path],
                    args=["--forwarded-allow-ips", "unix"])
    assert ask(s, kind) == (None, None, "http")
    assert ask(s, kind, [("X-Forwarded-For", "203.0.113.9"),
                         ("X-Forwarded-Proto", "https")]) == \
        ("203.0.113.9", 0, "https")
    # a unix: socket's server is no (host, port); a forwarded host is
    got = ask(s, kind, [("X-Forwarded-Host", "example.com")], read=host_of)
    assert got == forwarded_host(kind, "example.com", 80)


def test_default_trusts_ipv6_loopback(make_server, kind, executor):
    """The default list is 127.0.0.1 and ::1: a proxy on [::1] is
    believed."""
    s = make_server(APPS[kind], inline=executor == "inline",
                    binds=["[::1]:%d" % helpers.free_port("::1")])
    assert ask(s, kind, [("X-Forwarded-For", "203.0.113.9")]) == \
        ("203.0.113.9", 0, "http")
    with s.connect() as c:
        assert ask(s, kind, conn=c) == ("::1", c.local_port, "http")
