"""HTTPS: the TLS transport, its options and what apps see of it.

Certificates are the test's own, made by trustme (Debian's
python3-trustme): a CA, and a server certificate for localhost and
127.0.0.1 signed by it. Clients are real ones: curl, openssl s_client and
Python's ssl module under RawConn, which reads exactly what comes back.
What runs through TLS is what the plain suites check on a smaller scale:
keep-alive, pipelining, an upload, a streamed response, a file through
wsgi.file_wrapper (the transport's pread-then-SSL_write path, as this
kernel has no kernel TLS), the drain. And what is TLS's own: the versions,
ALPN, plain HTTP on the TLS port, the handshake within --header-timeout,
a PROXY header before the handshake, the files refused at start.
"""

import hashlib
import os
import shutil
import signal
import ssl
import subprocess
import time

import pytest

import helpers
from e2e_data import pattern
import tls_helpers
from tls_helpers import TLSServer, s_client, served, tls_args

pytestmark = pytest.mark.sluice_only


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki):
    s = TLSServer(tmp_path_factory.mktemp("tls"), pki,
                  args=["--header-timeout", "2"])
    yield from helpers.serving(s)


@pytest.fixture(scope="module")
def asgi_server(tmp_path_factory, pki):
    s = TLSServer(tmp_path_factory.mktemp("tls-asgi"), pki,
                  app="asgi_app:app")
    yield from helpers.serving(s)


def url(s, path):
    return s.url(path)


# ------------------------------------------------------------ requests


def test_curl_get(server, pki):
    r = subprocess.run(["curl", "-sS", "--cacert", str(pki["ca"]),
                        "-w", "\n%{http_code} %{http_version} %{scheme}",
                        url(server, "/hello")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    body, _, status = r.stdout.rpartition("\n")
    assert status.split() == ["200", "1.1", "HTTPS"], r.stdout
    assert body


def test_keep_alive(server):
    with server.connect() as c:
        ports = set()
        for i in range(5):
            r = c.request("GET", "/hello?i=%d" % i)
            assert r.status == 200
            ports.add(c.local_port)
        assert len(ports) == 1


def test_pipelining(server):
    n = 8
    with server.connect() as c:
        c.send(b"".join(helpers.build_request("GET", "/status?body=r%d" % i)
                        for i in range(n)))
        for i in range(n):
            r = c.read_response()
            assert (r.status, r.body) == (200, b"r%d" % i)


def test_upload(server):
    body = os.urandom(3 * 1024 * 1024 + 5)
    with server.connect() as c:
        r = c.request("POST", "/echo?sha=1", body=body)
    assert r.status == 200
    assert r.json() == {"len": len(body),
                        "sha256": hashlib.sha256(body).hexdigest()}


def test_streamed_response(server):
    with server.connect() as c:
        r = c.request("GET", "/chunks?n=40&size=50000")
    assert r.status == 200
    assert r.header("Transfer-Encoding") == "chunked"
    assert r.body == pattern(40 * 50000)


def test_file_wrapper(server, tmp_path):
    data = pattern(5 * 1024 * 1024 + 3)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    with server.connect() as c:
        r = c.request("GET", "/file?path=%s" % path)
        assert r.status == 200 and r.body == data
        # the connection goes on after a file
        assert c.request("GET", "/hello").status == 200


def test_wsgi_environ(server):
    with server.connect() as c:
        env = c.request("GET", "/environ").json()
    assert env["wsgi.url_scheme"]["value"] == "https"
    assert env["HTTPS"]["value"] == "on"


def test_forwarded_proto_still_wins(server):
    with server.connect() as c:
        env = c.request("GET", "/environ",
                        headers=[("X-Forwarded-Proto", "http")]).json()
    assert env["wsgi.url_scheme"]["value"] == "http"


def test_asgi_scheme(asgi_server):
    with asgi_server.connect() as c:
        scope = c.request("GET", "/scope").json()
    assert scope["scheme"] == "https"


# ------------------------------------------------------ TLS's own


@pytest.mark.parametrize("version", ["1_2", "1_3"])
def test_versions_and_alpn(server, pki, version):
    # a browser's list, h2 first: http/1.1 is what sluice speaks today
    rc, out = s_client(server.port, "-tls" + version, "-alpn",
                       "h2,http/1.1", "-CAfile", str(pki["ca"]))
    assert rc == 0, out
    assert "Protocol  : TLSv%s" % version.replace("_", ".") in out, out
    assert "ALPN protocol: http/1.1" in out, out
    assert "Verify return code: 0 (ok)" in out, out
    assert "HTTP/1.1 200" in out, out
    if version == "1_2":
        assert "Cipher is ECDHE-" in out, out


def test_alpn_nothing_in_common_refused(server):
    # RFC 7301 3.2: a client that speaks none of our protocols is refused
    # with no_application_protocol, not served HTTP/1.1 it did not offer
    rc, out = s_client(server.port, "-alpn", "h2", data=b"")
    assert rc != 0, out
    assert "no application protocol" in out, out


def test_tls_1_1_refused(server):
    rc, out = s_client(server.port, "-tls1_1", "-cipher",
                       "DEFAULT@SECLEVEL=0", data=b"")
    assert rc != 0, out
    assert "alert protocol version" in out, out


def test_plain_http_to_tls_port(server):
    with helpers.RawConn.tcp(server.host, server.port) as c:
        c.send(helpers.build_request("GET", "/hello"))
        r = c.read_response()
        assert r.status == 400
        assert b"The plain HTTP request was sent to HTTPS port" in r.body
        assert r.has_token("Connection", "close")
        c.expect_eof()


def test_stalled_handshake_closed_at_header_timeout(server):
    with helpers.RawConn.tcp(server.host, server.port) as c:
        c.send(b"\x16\x03\x01\x02\x00\x01")  # a ClientHello that stops
        t0 = time.monotonic()
        c.expect_eof(timeout=8)
        took = time.monotonic() - t0
    assert 1.5 <= took < 6, took  # --header-timeout 2, checked at 1 Hz


def test_insecure_bind_beside_tls(tmp_path, pki):
    tls_port, plain_port = helpers.free_ports(2)
    s = TLSServer(tmp_path, pki, binds=["127.0.0.1:%d" % tls_port],
                  args=["--insecure-bind", "127.0.0.1:%d" % plain_port])
    with served(s):
        with helpers.RawConn.tcp("127.0.0.1", plain_port) as c:
            env = c.request("GET", "/environ").json()
            assert env["wsgi.url_scheme"]["value"] == "http"
            assert "HTTPS" not in env
        with s.connect() as c:
            env = c.request("GET", "/environ").json()
            assert env["wsgi.url_scheme"]["value"] == "https"
        log = s.error_log_text()
        assert "Listening at: https://127.0.0.1:%d" % tls_port in log
        assert "Listening at: http://127.0.0.1:%d" % plain_port in log


def mapped(pid):
    """The file names of PID's mappings."""
    with open("/proc/%d/maps" % pid) as f:
        return {line.split()[-1] for line in f if "/" in line}


def test_openssl_only_in_a_worker_that_serves_tls(tmp_path, pki):
    """OpenSSL lives in sluice-tls.so, which a worker loads only when its
    listeners speak TLS: a plain worker (behind a proxy, the usual case)
    maps neither the module nor libssl/libcrypto (their ~1.7 MiB), and the
    supervisor never does. The plain worker serves the example app, which
    imports nothing (the suite's app imports hashlib, and with it
    libcrypto)."""
    def names(pid):
        return {os.path.basename(m) for m in mapped(pid)}

    plain = helpers.Server(tmp_path / "plain", "hello:app",
                           pythonpath=(str(helpers.REPO / "contrib" /
                                           "example"),), ready_path="/")
    with served(plain):
        pid = plain.wait_workers(1)[0]
        for n in (names(pid), names(plain.proc.pid)):
            assert "sluice-tls.so" not in n
            assert not any(m.startswith(("libssl", "libcrypto")) for m in n)
    s = TLSServer(tmp_path / "tls", pki)
    with served(s):
        with s.connect() as c:
            assert c.request("GET", "/environ").status == 200
        n = names(s.wait_workers(1)[0])
        assert "sluice-tls.so" in n
        assert any(m.startswith("libssl") for m in n)
        assert not any(m.startswith(("libssl", "libcrypto", "sluice-tls"))
                       for m in names(s.proc.pid))


def test_proxy_header_then_tls(tmp_path, pki):
    s = TLSServer(tmp_path, pki, args=["--proxy-protocol"])
    # the ready check: a connection accepted is enough, as it sends no
    # PROXY header to go before a handshake
    s.ready_path = None
    s.connect = lambda timeout=2: helpers.RawConn.tcp(s.host, s.port, timeout)
    with served(s):
        for header in (b"PROXY TCP4 192.0.2.7 127.0.0.1 4711 443\r\n",
                       b"PROXY TCP4 192.0.2.8 127.0.0.1 4712 443\r\n"):
            raw = helpers.RawConn.tcp(s.host, s.port)
            with raw:
                raw.sock.sendall(header)
                raw.sock = s.ctx.wrap_socket(raw.sock,
                                             server_hostname="localhost")
                env = raw.request("GET", "/environ").json()
            assert env["REMOTE_ADDR"]["value"] == header.split()[2].decode()
            assert env["wsgi.url_scheme"]["value"] == "https"


def exited_cleanly(s):
    """S, sent TERM, exits by itself, with status 0."""
    s.proc.wait(helpers.STOP_TIMEOUT)
    assert s.proc.returncode == 0, s.diagnostics()


def test_drain_completes_a_request_in_flight(tmp_path, pki):
    s = TLSServer(tmp_path, pki)
    with served(s):
        with s.connect() as c:
            c.send(helpers.build_request("GET", "/slow?t=1"))
            s.wait_for_call("GET /slow")
            os.kill(s.pid, signal.SIGTERM)
            r = c.read_response()
            assert r.status == 200 and r.body.startswith(b"slept 1")
        exited_cleanly(s)


def strict_conn(server, pki):
    """A TLS connection to SERVER on which an EOF without close_notify is
    an error (ssl.SSLEOFError), not a quiet b"" as Python's defaults
    (OP_IGNORE_UNEXPECTED_EOF, suppress_ragged_eofs) make it."""
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    ctx.options &= ~ssl.OP_IGNORE_UNEXPECTED_EOF
    raw = helpers.RawConn.tcp(server.host, server.port, helpers.IO_TIMEOUT)
    raw.sock = ctx.wrap_socket(raw.sock, server_hostname="localhost",
                               suppress_ragged_eofs=False)
    return raw


def test_close_notify_after_connection_close(server, pki):
    with strict_conn(server, pki) as c:
        c.send(helpers.build_request("GET", "/hello",
                                     headers=[("Connection", "close")]))
        assert c.read_response().status == 200
        assert c.sock.recv(1) == b""  # close_notify, else SSLEOFError


def test_close_notify_to_idle_connections_at_drain(tmp_path, pki):
    s = TLSServer(tmp_path, pki)
    with served(s):
        conns = [strict_conn(s, pki) for _ in range(3)]
        for c in conns:
            assert c.request("GET", "/hello").status == 200
        os.kill(s.pid, signal.SIGTERM)
        for c in conns:
            with c:
                assert c.sock.recv(1) == b""
        exited_cleanly(s)


def test_drain_waits_for_a_handshake_under_way(tmp_path, pki):
    """A connection accepted before TERM whose handshake is still going
    is not an idle one: the drain's grace for a quiet connection counts
    from the handshake's end, so its request is answered. The client
    (Python's ssl over memory buffers) holds its last flight back past
    that grace, then sends it with the request."""
    s = TLSServer(tmp_path, pki)
    with served(s):
        ctx = tls_helpers.client_context(pki)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_3
        into, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ctx.wrap_bio(into, out, server_hostname="localhost")
        with helpers.RawConn.tcp(s.host, s.port) as c:
            for _ in range(10):  # bounded: TLS 1.3 takes two rounds
                try:
                    tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    c.sock.sendall(out.read())
                    into.write(c.sock.recv(65536))
            # the client is done; the server waits for its Finished
            held = out.read()
            assert held
            mark = s.log_mark()
            os.kill(s.pid, signal.SIGTERM)
            s.wait_for_log("draining", since=mark)
            # past the drain's grace for a quiet connection (0.1 s): the
            # time under test, not a condition to poll for
            time.sleep(0.5)
            tls.write(helpers.build_request("GET", "/hello"))
            c.sock.sendall(held + out.read())
            got = b""
            while not got.endswith(b"\r\n\r\nhello\n"):
                chunk = c.sock.recv(65536)
                assert chunk, "closed unanswered: %r" % got
                into.write(chunk)
                try:
                    got += tls.read(65536)
                except ssl.SSLWantReadError:
                    pass
            assert got.startswith(b"HTTP/1.1 200 ")
        exited_cleanly(s)


# ------------------------------------------------ refused at start


def refusal(args, check):
    argv = (["--check-config"] if check else
            ["-b", "127.0.0.1:%d" % helpers.free_port()]) + \
        [str(a) for a in args] + ["wsgi_app:app"]
    return helpers.run_cli(argv, cwd=str(helpers.APPS))


@pytest.mark.parametrize("check", [False, True], ids=["start", "check"])
@pytest.mark.parametrize("case", ["missing", "mismatch", "not-pem",
                                  "key-alone", "reqs-without-ca"])
def test_refused_at_start(pki, tmp_path, case, check):
    args, want = {
        "missing": (["--certfile", tmp_path / "nope.pem", "--keyfile",
                     pki["key"]], "cannot read --certfile"),
        "mismatch": (["--certfile", pki["cert"], "--keyfile",
                      pki["other_key"]], "does not match --certfile"),
        "not-pem": (["--certfile", pki["key"], "--keyfile", pki["key"]],
                    "no PEM certificate"),
        "key-alone": (["--keyfile", pki["key"]],
                      "TLS needs both --certfile and --keyfile"),
        "reqs-without-ca": (tls_args(pki) + ["--cert-reqs", "2"],
                            "required needs --ca-certs"),
    }[case]
    rc, out, err = refusal(args, check)
    assert rc == 2, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sluice: error: "), err
    assert want in lines[0], err


def test_expired_certificate_warned(pki):
    rc, out, err = refusal(["--certfile", pki["expired_cert"], "--keyfile",
                            pki["expired_key"]], True)
    assert rc == 0, err
    assert "expired on 2020-01-01" in err, err
    assert "configuration OK" in out


def test_print_config_round_trip(pki, tmp_path):
    rc, out, err = helpers.run_cli(
        ["--print-config", "--cert-reqs", "optional", "--ca-certs",
         pki["ca"], "--ssl-min-version", "TLSv1.3", "--insecure-bind",
         "127.0.0.1:9"] + tls_args(pki) + ["wsgi_app:app"])
    assert rc == 0, err
    for line in ("certfile = %s" % pki["cert"], "cert_reqs = optional",
                 "ssl_min_version = TLSv1.3", "insecure_bind = 127.0.0.1:9"):
        assert line in out.splitlines(), out
    conf = tmp_path / "sluice.conf"
    conf.write_text(out)
    rc, out2, err = helpers.run_cli(["--print-config", "-c", conf,
                                     "wsgi_app:app"])
    assert rc == 0, err
    assert out2 == out


def test_tls_1_3_only(tmp_path, pki):
    s = TLSServer(tmp_path, pki, args=["--ssl-min-version", "TLSv1.3"])
    with served(s):
        rc, out = s_client(s.port, "-tls1_2", data=b"")
        assert rc != 0 and "alert protocol version" in out, out
        rc, out = s_client(s.port, "-tls1_3")
        assert rc == 0 and "HTTP/1.1 200" in out, out


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl")
def test_curl_http11_many(server, pki):
    """One curl, several URLs: one connection, kept alive."""
    r = subprocess.run(["curl", "-sS", "-v", "--cacert", str(pki["ca"]),
                        url(server, "/hello"), url(server, "/hello"),
                        url(server, "/hello")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("Re-using existing connection") == 2, r.stderr
