"""Mutual TLS: client certificates asked for, checked, and refused.

--ca-certs names the CAs a client certificate must chain to; --cert-reqs
required refuses, during the handshake, a client that shows none or one
those CAs did not sign; optional lets a client without one in, and still
refuses one whose certificate fails the check. Clients: curl with
--cert/--key and Python's ssl, over TLS 1.3 (where a client learns of the
refusal at its first read, the handshake being over on its side) and TLS
1.2 (inside the handshake). Certificates are the test's own (conftest's
pki, tls_helpers.make_pki()).
"""

import socket
import ssl
import subprocess

import pytest

import helpers
from tls_helpers import client_context, mtls_server, s_client, served

pytestmark = pytest.mark.sluice_only


@pytest.fixture(scope="module")
def required(tmp_path_factory, pki):
    s = mtls_server(tmp_path_factory.mktemp("mtls-req"), pki, "required")
    yield from helpers.serving(s)


@pytest.fixture(scope="module")
def optional(tmp_path_factory, pki):
    s = mtls_server(tmp_path_factory.mktemp("mtls-opt"), pki, "optional")
    yield from helpers.serving(s)


def curl(server, pki, *args):
    r = subprocess.run(["curl", "-sS", "--cacert", str(pki["ca"]),
                        "-w", "\n%{http_code}"] + list(args) +
                       [server.url("/environ")],
                       capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout, r.stderr


def refused(server, ctx):
    """Does SERVER refuse a client with CTX? The failure, as text: raised
    by the handshake (TLS 1.2) or by the first read after it (1.3)."""
    try:
        with server.connect(ctx=ctx) as c:
            c.request("GET", "/hello")
    except (ssl.SSLError, ConnectionError, helpers.HTTPError,
            socket.timeout) as e:
        return "%s: %s" % (type(e).__name__, e)
    return None


def tls12(ctx):
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    return ctx


# ------------------------------------------------------------- required


def test_required_curl_with_certificate(required, pki):
    rc, out, err = curl(required, pki, "--cert", str(pki["client_cert"]),
                        "--key", str(pki["client_key"]))
    assert rc == 0, err
    assert out.rsplit("\n", 1)[1] == "200", out


@pytest.mark.parametrize("who", ["none", "stranger"])
def test_required_curl_refused(required, pki, who):
    args = [] if who == "none" else ["--cert", str(pki["stranger_cert"]),
                                     "--key", str(pki["stranger_key"])]
    rc, out, err = curl(required, pki, *args)
    assert rc != 0, out
    assert not out.endswith("200"), out


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_required_python(required, pki, version):
    def ctx(cert=None, key=None):
        c = client_context(pki, cert, key)
        return tls12(c) if version == "1.2" else c
    assert refused(required, ctx(pki["client_cert"], pki["client_key"])) \
        is None
    why = refused(required, ctx())
    assert why is not None
    # 1.3: the client's request crosses the alert; the server must not
    # reset the connection before the client has read the alert
    assert ("HANDSHAKE_FAILURE" if version == "1.2"
            else "CERTIFICATE_REQUIRED") in why, why
    why = refused(required, ctx(pki["stranger_cert"], pki["stranger_key"]))
    assert why is not None and "UNKNOWN_CA" in why, why
    # the worker serves on
    assert refused(required, ctx(pki["client_cert"], pki["client_key"])) \
        is None


@pytest.mark.parametrize("who,alert", [
    ("none", "alert certificate required"), ("stranger", "alert unknown ca")])
def test_required_s_client_alert(required, pki, who, alert):
    args = ["-tls1_3", "-CAfile", str(pki["ca"])]
    if who == "stranger":
        args += ["-cert", str(pki["stranger_cert"]), "-key",
                 str(pki["stranger_key"])]
    rc, out = s_client(required.port, *args, data=b"")
    assert alert in out, out
    assert "HTTP/1.1" not in out, out


# ------------------------------------------------------------- optional


def test_optional_lets_both_in(optional, pki):
    rc, out, err = curl(optional, pki)
    assert rc == 0 and out.endswith("200"), (out, err)
    rc, out, err = curl(optional, pki, "--cert", str(pki["client_cert"]),
                        "--key", str(pki["client_key"]))
    assert rc == 0 and out.endswith("200"), (out, err)
    assert refused(optional, client_context(pki)) is None


def test_optional_refuses_a_bad_certificate(optional, pki):
    why = refused(optional, client_context(pki, pki["stranger_cert"],
                                           pki["stranger_key"]))
    assert why is not None and "UNKNOWN_CA" in why, why


def test_none_asks_for_nothing(tmp_path, pki):
    """--cert-reqs none with --ca-certs: a client certificate is not
    asked for, so a stranger's is never looked at."""
    s = mtls_server(tmp_path, pki, "none")
    with served(s):
        assert refused(s, client_context(pki, pki["stranger_cert"],
                                         pki["stranger_key"])) is None
