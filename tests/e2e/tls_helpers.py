"""Helpers for the HTTPS end-to-end tests (test_tls*.py).

make_pki(): the test's own certificates (conftest's pki fixture), made by trustme (Debian's python3-trustme): a CA, a server
certificate for localhost and 127.0.0.1 signed by it, a key that matches
nothing, an expired pair, a client certificate from the same CA and one
from a second CA the server does not know.

TLSServer: helpers.Server whose first --bind speaks TLS; connect() shakes
hands with Python's ssl module, so RawConn reads exactly what comes back.
"""

import contextlib
import datetime
import ssl
import subprocess

import pytest

import helpers

trustme = pytest.importorskip("trustme")

# a started Server for a with-block; its stop problems fail the test
served = contextlib.contextmanager(helpers.serving)


def write_leaf(leaf, cert_path, key_path):
    """LEAF's chain (its certificate first) and its key, as PEM files."""
    for i, blob in enumerate(leaf.cert_chain_pems):
        blob.write_to_path(str(cert_path), append=i > 0)
    leaf.private_key_pem.write_to_path(str(key_path))


def make_pki(d):
    """Certificates in directory D, as paths: ca, cert, key, other_key,
    expired_cert, expired_key, client_cert, client_key (signed by ca, CN
    "client one"), stranger_cert, stranger_key (signed by a CA the
    server does not trust); client_leaf, the trustme LeafCert of
    client_cert; ca_object, the trustme CA (for issue())."""
    ca = trustme.CA()
    out = {"ca": d / "ca.pem", "cert": d / "cert.pem", "key": d / "key.pem",
           "other_key": d / "other-key.pem",
           "expired_cert": d / "expired.pem",
           "expired_key": d / "expired-key.pem",
           "client_cert": d / "client.pem",
           "client_key": d / "client-key.pem",
           "stranger_cert": d / "stranger.pem",
           "stranger_key": d / "stranger-key.pem"}
    ca.cert_pem.write_to_path(str(out["ca"]))
    write_leaf(ca.issue_cert("localhost", "127.0.0.1"), out["cert"],
               out["key"])
    ca.issue_cert("localhost").private_key_pem.write_to_path(
        str(out["other_key"]))
    old = ca.issue_cert("localhost",
                        not_after=datetime.datetime(2020, 1, 1))
    old.cert_chain_pems[0].write_to_path(str(out["expired_cert"]))
    old.private_key_pem.write_to_path(str(out["expired_key"]))
    out["client_leaf"] = ca.issue_cert("client@example.org",
                                       common_name="client one")
    write_leaf(out["client_leaf"], out["client_cert"], out["client_key"])
    write_leaf(trustme.CA().issue_cert("client@example.org",
                                       common_name="stranger"),
               out["stranger_cert"], out["stranger_key"])
    out["ca_object"] = ca
    return out


def issue(ca, path_stem, names, common_name, key_type, days=30,
          revocation=None):
    """A certificate for NAMES (DNS names) with a new KEY_TYPE key ("rsa"
    or "ecdsa"), signed by trustme CA CA, valid for DAYS, written to
    PATH_STEM.pem and PATH_STEM.key: (cert path, key path). REVOCATION, a
    URL, is given as its CRL and OCSP locations (never fetched). trustme
    0.9 makes RSA keys only, so this builds the certificate with
    cryptography itself."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import AuthorityInformationAccessOID, NameOID

    ca_key = serialization.load_pem_private_key(ca.private_key_pem.bytes(),
                                                None)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    key = (ec.generate_private_key(ec.SECP256R1()) if key_type == "ecdsa"
           else rsa.generate_private_key(public_exponent=65537,
                                         key_size=2048))
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(
                NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName(n) for n in names]), critical=False))
    if revocation is not None:
        where = x509.UniformResourceIdentifier(revocation)
        builder = builder.add_extension(x509.CRLDistributionPoints(
            [x509.DistributionPoint([where], None, None, None)]),
            critical=False).add_extension(x509.AuthorityInformationAccess(
                [x509.AccessDescription(AuthorityInformationAccessOID.OCSP,
                                        where)]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_path = path_stem.with_suffix(".pem")
    key_path = path_stem.with_suffix(".key")
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return cert_path, key_path


def client_context(pki, cert=None, key=None):
    """A client context that trusts PKI's CA, offers http/1.1, and shows
    the certificate CERT with KEY when given."""
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    ctx.set_alpn_protocols(["http/1.1"])
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def tls_args(pki):
    return ["--certfile", pki["cert"], "--keyfile", pki["key"]]


class TLSServer(helpers.Server):
    """A Server whose first --bind speaks TLS: connect() shakes hands."""

    def __init__(self, workdir, pki, app="wsgi_app:app", args=(), **kw):
        super().__init__(workdir, app, args=tls_args(pki) + list(args), **kw)
        self.ctx = client_context(pki)

    def connect(self, timeout=helpers.IO_TIMEOUT, ctx=None):
        raw = helpers.RawConn.tcp(self.host, self.port, timeout)
        raw.sock = (ctx or self.ctx).wrap_socket(raw.sock,
                                                 server_hostname="localhost")
        raw.sock.settimeout(timeout)
        return raw

    def url(self, path, scheme="https"):
        return "%s://localhost:%d%s" % (scheme, self.port, path)


def mtls_server(workdir, pki, reqs, app="wsgi_app:app", args=(), **kw):
    """A TLSServer asking for client certificates signed by PKI's CA
    (--cert-reqs REQS); its own connect() shows the client certificate."""
    s = TLSServer(workdir, pki, app=app,
                  args=["--ca-certs", pki["ca"], "--cert-reqs", reqs] +
                  list(args), **kw)
    s.ctx = client_context(pki, pki["client_cert"], pki["client_key"])
    return s


def s_client(port, *args, data=b"GET /hello HTTP/1.1\r\nHost: x\r\n"
             b"Connection: close\r\n\r\n", servername="localhost"):
    """openssl s_client to 127.0.0.1:PORT with ARGS, DATA sent: its exit
    status and all it wrote."""
    sni = ["-servername", servername] if servername else ["-noservername"]
    r = subprocess.run(["openssl", "s_client", "-connect",
                        "127.0.0.1:%d" % port, "-ign_eof"] + sni + list(args),
                       input=data, capture_output=True, timeout=30)
    return r.returncode, r.stdout.decode(errors="replace") + \
        r.stderr.decode(errors="replace")
