"""What apps and the access log see of a TLS connection.

ASGI: scope["extensions"]["tls"], the ASGI TLS extension (server_cert,
client_cert_chain, client_cert_name, client_cert_error, tls_version,
cipher_suite) on http and websocket scopes of a TLS connection, never on a
plain one. WSGI: mod_ssl's names, SSL_PROTOCOL, SSL_CIPHER,
SSL_CLIENT_VERIFY, and with a client certificate SSL_CLIENT_S_DN and
SSL_CLIENT_CERT. The access log: the tls_protocol and tls_cipher atoms.
Each checked against what the client itself saw of the handshake, in pump
and inline mode. Certificates are the test's own (conftest's pki).
"""

import asyncio
import json
import ssl

import pytest
from cryptography import x509

import helpers
from conftest import EXECUTORS
from helpers import wait_until
from tls_helpers import client_context, mtls_server

pytestmark = pytest.mark.sluice_only

TLS13_SUITES = {"TLS_AES_128_GCM_SHA256": 0x1301,
                "TLS_AES_256_GCM_SHA384": 0x1302,
                "TLS_CHACHA20_POLY1305_SHA256": 0x1303}
FLUSH_BOUND = 5.0  # the access log's flush is due within ~1 s


def suite_id(name):
    """The IANA id of the suite OpenSSL calls NAME."""
    if name in TLS13_SUITES:
        return TLS13_SUITES[name]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.set_ciphers("ALL")
    return next(c["id"] & 0xFFFF for c in ctx.get_ciphers()
                if c["name"] == name)


def first_pem(path):
    text = path.read_text()
    end = "-----END CERTIFICATE-----\n"
    return text[:text.index(end) + len(end)]


def rfc4514(pem):
    return x509.load_pem_x509_certificate(pem.encode()).subject \
        .rfc4514_string()


def start(tmp_path_factory, pki, label, executor, app, args=()):
    workdir = tmp_path_factory.mktemp("%s-%s" % (label, executor))
    plain = helpers.free_port()
    s = mtls_server(workdir, pki, "optional", app=app,
                    args=["--insecure-bind", "127.0.0.1:%d" % plain,
                          "--access-logfile", workdir / "access.log",
                          "--access-logformat",
                          "%(r)s %(tls_protocol)s %(tls_cipher)s"] +
                    list(args),
                    inline=executor == "inline")
    s.plain_port = plain
    s.access_log = workdir / "access.log"
    yield from helpers.serving(s)


@pytest.fixture(scope="module", params=EXECUTORS)
def wsgi(request, tmp_path_factory, pki):
    yield from start(tmp_path_factory, pki, "apps-wsgi", request.param,
                     "wsgi_app:app")


@pytest.fixture(scope="module", params=EXECUTORS)
def asgi(request, tmp_path_factory, pki):
    yield from start(tmp_path_factory, pki, "apps-asgi", request.param,
                     "asgi_app:app")


@pytest.fixture(scope="module", params=EXECUTORS)
def wss(request, tmp_path_factory, pki):
    yield from start(tmp_path_factory, pki, "apps-ws", request.param,
                     "ws_extra_app:app")


def contexts(pki):
    """(label, client context, shows a certificate, TLS version)."""
    def tls12(c):
        c.maximum_version = ssl.TLSVersion.TLSv1_2
        return c
    return [
        ("anonymous-1.3", client_context(pki), False, 0x0304),
        ("cert-1.3", client_context(pki, pki["client_cert"],
                                    pki["client_key"]), True, 0x0304),
        ("cert-1.2", tls12(client_context(pki, pki["client_cert"],
                                          pki["client_key"])), True, 0x0303),
    ]


def fetch(server, ctx, path):
    """PATH's JSON over a connection with CTX, and the suite the client
    saw: (json, cipher name, protocol name)."""
    with server.connect(ctx=ctx) as c:
        body = c.request("GET", path).json()
        name, proto, _ = c.sock.cipher()
    return body, name, proto


# ------------------------------------------------------------------ ASGI


def test_asgi_tls_extension(asgi, pki):
    server_pem = first_pem(pki["cert"])
    client_pem = first_pem(pki["client_cert"])
    ca_pem = pki["ca"].read_text()
    for label, ctx, with_cert, version in contexts(pki):
        scope, name, proto = fetch(asgi, ctx, "/scope")
        tls = scope["extensions"]["tls"]
        assert tls["tls_version"] == version, label
        assert tls["cipher_suite"] == suite_id(name), (label, tls, name)
        assert tls["server_cert"] == server_pem, label
        assert tls["client_cert_error"] is None, label
        if with_cert:
            # the client's certificate first; Python's ssl sends the CA
            # after it, from the store it checks the server with
            chain = tls["client_cert_chain"]
            assert chain[0] == client_pem, label
            assert chain[1:] in ([], [ca_pem]), label
            assert tls["client_cert_name"] == rfc4514(client_pem), label
            assert "CN=client one" in tls["client_cert_name"], label
        else:
            assert tls["client_cert_chain"] == [], label
            assert tls["client_cert_name"] is None, label
        # the other extensions are still there, as on plain
        assert "http.response.pathsend" in scope["extensions"], label


def test_asgi_plain_listener_has_no_tls(asgi, pki):
    fetch(asgi, client_context(pki), "/scope")  # a TLS scope first
    with helpers.RawConn.tcp("127.0.0.1", asgi.plain_port) as c:
        scope = c.request("GET", "/scope").json()
    assert scope["scheme"] == "http"
    assert "tls" not in scope["extensions"]
    assert "http.response.pathsend" in scope["extensions"]


def test_proxy_changes_the_scheme_not_the_tls(asgi, wsgi, pki):
    """A trusted proxy (127.0.0.1 by default) saying http over a TLS
    connection: the scheme follows it, what the connection is does not."""
    fwd = [("X-Forwarded-Proto", "http")]
    with asgi.connect(ctx=client_context(pki)) as c:
        scope = c.request("GET", "/scope", headers=fwd).json()
    assert scope["scheme"] == "http"
    assert scope["extensions"]["tls"]["tls_version"] in (0x0303, 0x0304)
    with wsgi.connect(ctx=client_context(pki)) as c:
        env = c.request("GET", "/environ", headers=fwd).json()
    assert env["wsgi.url_scheme"]["value"] == "http"
    assert env["HTTPS"]["value"] == "on"
    assert env["SSL_PROTOCOL"]["value"].startswith("TLSv1.")


def test_wss_tls_extension(wss, pki):
    import websockets

    async def go(ctx):
        async with websockets.connect(wss.url("/scope", "wss"), ssl=ctx,
                                      open_timeout=10) as ws:
            return json.loads(await asyncio.wait_for(ws.recv(), 20))
    got = asyncio.run(go(client_context(pki, pki["client_cert"],
                                        pki["client_key"])))
    assert got["scheme"] == "wss"
    assert got["tls"]["tls_version"] == 0x0304
    assert got["tls"]["client_cert_name"] == rfc4514(
        first_pem(pki["client_cert"]))

    async def plain():
        url = "ws://127.0.0.1:%d/scope" % wss.plain_port
        async with websockets.connect(url, open_timeout=10) as ws:
            return json.loads(await asyncio.wait_for(ws.recv(), 20))
    got = asyncio.run(plain())
    assert got == {"scheme": "ws", "tls": None}


# ------------------------------------------------------------------ WSGI


def test_wsgi_ssl_variables(wsgi, pki):
    client_pem = first_pem(pki["client_cert"])
    for label, ctx, with_cert, version in contexts(pki):
        env, name, proto = fetch(wsgi, ctx, "/environ")
        val = {k: v["value"] for k, v in env.items() if k.startswith("SSL_")}
        assert env["HTTPS"]["value"] == "on", label
        assert val["SSL_PROTOCOL"] == proto, label
        assert val["SSL_CIPHER"] == name, label
        if with_cert:
            assert val["SSL_CLIENT_VERIFY"] == "SUCCESS", label
            assert val["SSL_CLIENT_S_DN"] == rfc4514(client_pem), label
            assert val["SSL_CLIENT_CERT"] == client_pem, label
        else:
            assert val["SSL_CLIENT_VERIFY"] == "NONE", label
            assert "SSL_CLIENT_S_DN" not in val, label
            assert "SSL_CLIENT_CERT" not in val, label


def test_wsgi_plain_listener_has_no_ssl_variables(wsgi):
    with helpers.RawConn.tcp("127.0.0.1", wsgi.plain_port) as c:
        env = c.request("GET", "/environ").json()
    assert "HTTPS" not in env
    assert not [k for k in env if k.startswith("SSL_")]


# ------------------------------------------------------------ access log


def test_access_log_atoms(wsgi, pki):
    tag = "/hello?atoms=%d" % id(wsgi)
    with wsgi.connect() as c:
        assert c.request("GET", tag + "-tls").status == 200
        name, proto, _ = c.sock.cipher()
    with helpers.RawConn.tcp("127.0.0.1", wsgi.plain_port) as c:
        assert c.request("GET", tag + "-plain").status == 200

    def line(needle):
        return wait_until(
            lambda: next((ln for ln in wsgi.access_log.read_text()
                          .splitlines() if needle in ln), None),
            FLUSH_BOUND, "an access log line with %r" % needle)
    assert line(tag + "-tls ").endswith(" %s %s" % (proto, name))
    assert line(tag + "-plain ").endswith(" - -")
