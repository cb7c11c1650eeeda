"""Several certificates: chosen by the client's server name (SNI).

--certfile and --keyfile repeated, in pairs. The server here has the
test's localhost certificate first (the default), an ECDSA and an RSA
certificate for shop.test side by side, and an RSA one for blog.test and
*.blog.test. openssl s_client -servername shows which certificate came
(its subject), for a client that can check ECDSA and RSA signatures and
for one that takes RSA only, over TLS 1.3 (signature algorithms) and
1.2 (cipher suites); Python's ssl compares the certificate byte for
byte; the ASGI TLS extension's server_cert is the one that was served.
Certificates are the test's own (conftest's pki, tls_helpers.issue()).
"""

import re
import ssl

import pytest

import helpers
from tls_helpers import TLSServer, issue, s_client

pytestmark = pytest.mark.sluice_only

RSA_ONLY_13 = ["-tls1_3", "-sigalgs",
               "rsa_pss_rsae_sha256:rsa_pss_rsae_sha384:rsa_pkcs1_sha256"]
ECDSA_13 = ["-tls1_3", "-sigalgs",
            "ecdsa_secp256r1_sha256:rsa_pss_rsae_sha256"]
RSA_ONLY_12 = ["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"]
ECDSA_12 = ["-tls1_2", "-cipher",
            "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"]


@pytest.fixture(scope="module")
def certs(pki, tmp_path_factory):
    d = tmp_path_factory.mktemp("sni")
    ca = pki["ca_object"]
    return {
        "shop-ecdsa": issue(ca, d / "shop-ecdsa", ["shop.test"],
                            "shop ecdsa", "ecdsa"),
        "shop-rsa": issue(ca, d / "shop-rsa", ["shop.test"], "shop rsa",
                          "rsa"),
        "blog": issue(ca, d / "blog", ["blog.test", "*.blog.test"], "blog",
                      "rsa"),
        "shop-rsa-again": issue(ca, d / "shop-rsa-again", ["shop.test"],
                                "shop rsa again", "rsa"),
    }


def pairs(*items):
    args = []
    for cert, key in items:
        args += ["--certfile", cert, "--keyfile", key]
    return args


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki, certs):
    s = TLSServer(tmp_path_factory.mktemp("sni"), pki, app="asgi_app:app",
                  args=pairs(certs["shop-ecdsa"], certs["shop-rsa"],
                             certs["blog"]))
    yield from helpers.serving(s)


def subject_cn(port, name, args):
    rc, out = s_client(port, *args, servername=name)
    assert rc == 0 and "HTTP/1.1 200" in out, out
    m = re.search(r"^subject=.*CN ?= ?([^,/\n]+)$", out, re.M)
    assert m, out
    return m.group(1).strip()


@pytest.mark.parametrize("version", ["1.3", "1.2"])
def test_key_type_follows_the_client(server, version):
    rsa_only, ecdsa = ((RSA_ONLY_13, ECDSA_13) if version == "1.3"
                       else (RSA_ONLY_12, ECDSA_12))
    assert subject_cn(server.port, "shop.test", ecdsa) == "shop ecdsa"
    assert subject_cn(server.port, "shop.test", rsa_only) == "shop rsa"


@pytest.mark.parametrize("name,cn", [("blog.test", "blog"),
                                     ("www.blog.test", "blog"),
                                     ("SHOP.test", "shop ecdsa")])
def test_server_name_picks(server, name, cn):
    assert subject_cn(server.port, name, ECDSA_13) == cn


@pytest.mark.parametrize("name", ["other.test", "localhost", None])
def test_default_is_the_first(server, pki, name):
    """A name no certificate has, the first one's, or none at all: the
    first certificate, compared byte for byte."""
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    ctx.check_hostname = False
    with helpers.RawConn.tcp(server.host, server.port) as c:
        c.sock = ctx.wrap_socket(c.sock, server_hostname=name)
        got = c.sock.getpeercert(binary_form=True)
        assert c.request("GET", "/hello").status == 200
    first = pki["cert"].read_text()
    first = first[:first.index("-----END CERTIFICATE-----") + 25]
    assert got == ssl.PEM_cert_to_DER_cert(first)


def test_asgi_sees_the_certificate_served(server, pki, certs):
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("ECDHE-RSA-AES128-GCM-SHA256")
    with helpers.RawConn.tcp(server.host, server.port) as c:
        c.sock = ctx.wrap_socket(c.sock, server_hostname="shop.test")
        scope = c.request("GET", "/scope").json()
    assert scope["extensions"]["tls"]["server_cert"] == \
        certs["shop-rsa"][0].read_text()


def test_same_names_same_key_type_refused(pki, certs):
    argv = ["--check-config"] + [str(a) for a in pairs(
        certs["shop-rsa"], certs["shop-rsa-again"])] + ["wsgi_app:app"]
    rc, out, err = helpers.run_cli(argv, cwd=str(helpers.APPS))
    assert rc == 2, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "only one could be served" in lines[0], err


def test_unpaired_keyfile_refused(pki, certs):
    argv = ["--check-config", "--certfile", str(pki["cert"]), "--keyfile",
            str(pki["key"]), "--certfile", str(certs["blog"][0]),
            "wsgi_app:app"]
    rc, out, err = helpers.run_cli(argv, cwd=str(helpers.APPS))
    assert rc == 2, (rc, out, err)
    assert "each --certfile needs its own --keyfile" in err, err


def test_print_config_round_trip(pki, certs, tmp_path):
    rc, out, err = helpers.run_cli(
        ["--print-config"] + [str(a) for a in pairs(
            (pki["cert"], pki["key"]), certs["shop-ecdsa"])] +
        ["wsgi_app:app"])
    assert rc == 0, err
    lines = out.splitlines()
    assert "certfile = %s" % pki["cert"] in lines, out
    assert "certfile = %s" % certs["shop-ecdsa"][0] in lines, out
    assert "keyfile = %s" % certs["shop-ecdsa"][1] in lines, out
    conf = tmp_path / "sluice.conf"
    conf.write_text(out)
    rc, out2, err = helpers.run_cli(["--print-config", "-c", conf,
                                     "wsgi_app:app"])
    assert rc == 0, err
    assert out2 == out
    rc, out3, err = helpers.run_cli(["--check-config", "-c", conf,
                                     "wsgi_app:app"], cwd=str(helpers.APPS))
    assert rc == 0, err
