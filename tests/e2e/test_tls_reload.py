"""HUP and the TLS certificates (issue 28).

A renewed certificate is a file changed on disk: HUP rolls the workers,
and the new ones serve it. Before any rolling restart a worker built as at
start checks the certificates and keys (supervisor/reconfig.c): one that
cannot serve refuses the restart with one line, and the workers serve on
with what they have, as --check-config refuses it. A configuration file
that turns TLS on or off is refused whole (whether a listener speaks TLS
was decided when it was set up). --ssl-ticket-rotation re-read by HUP
takes effect: 0 stops the new workers issuing tickets.

The certificates are copies of conftest's pki (shared by the session),
so a test may overwrite its own.
"""

import hashlib
import os
import re
import shutil
import signal

import pytest

import helpers
from helpers import wait_until
from tls_helpers import client_context, s_client, served

pytestmark = pytest.mark.sluice_only

REFUSED = "Rolling restart refused: the TLS certificates or keys cannot serve"


class CertServer(helpers.Server):
    """A TLS server on copies of the pki's pair (self.cert, self.key), or,
    with CONF, one whose settings are all in the file CONF (rewritten by
    the test with conf())."""

    def __init__(self, workdir, pki, conf=False, args=(), **kw):
        workdir.mkdir(parents=True, exist_ok=True)
        self.cert = workdir / "cert.pem"
        self.key = workdir / "key.pem"
        shutil.copy(pki["cert"], self.cert)
        shutil.copy(pki["key"], self.key)
        self.conf_path = workdir / "sluice.conf" if conf else None
        pair = [] if conf else ["--certfile", str(self.cert),
                                "--keyfile", str(self.key)]
        super().__init__(workdir, "wsgi_app:app", args=pair + list(args),
                         **kw)
        self.ctx = client_context(pki)
        if conf:
            self.conf()

    def command(self):
        cmd = super().command()
        if self.conf_path is None:
            return cmd
        # the file holds the binds and the TLS settings: drop --bind
        out, skip = [], False
        for word in cmd[:-1]:
            if skip:
                skip = False
            elif word in ("-b", "--bind"):
                skip = True
            else:
                out.append(word)
        return out + ["-c", str(self.conf_path), cmd[-1]]

    def conf(self, extra="", tls=True, cert=None):
        text = "bind = %s\n" % ", ".join(self.binds)
        if tls:
            text += "certfile = %s\nkeyfile = %s\n" % (cert or self.cert,
                                                       self.key)
        self.conf_path.write_text(text + extra)

    def connect(self, timeout=helpers.IO_TIMEOUT):
        raw = helpers.RawConn.tcp(self.host, self.port, timeout)
        raw.sock = self.ctx.wrap_socket(raw.sock, server_hostname="localhost")
        raw.sock.settimeout(timeout)
        return raw

    def served_cert(self):
        """The SHA-256 of the certificate a new connection is shown, and
        the pid of the worker that answered /pid on it."""
        with self.connect() as c:
            der = c.sock.getpeercert(binary_form=True)
            c.send(helpers.build_request("GET", "/pid"))
            pid = int(c.read_response().body)
        return hashlib.sha256(der).hexdigest(), pid


def status(s, path):
    with s.connect() as c:
        c.send(helpers.build_request("GET", path))
        return c.read_response().status


def der_digest(pem_path):
    import ssl
    der = ssl.PEM_cert_to_DER_cert(pem_path.read_text())
    return hashlib.sha256(der).hexdigest()


def hup(s):
    mark = s.log_mark()
    os.kill(s.pid, signal.SIGHUP)
    return mark


def renew(s, pki, tmp_path):
    """A new certificate for the same names, from the same CA, written
    over S's files (as certbot's deploy hook leaves them): its digest."""
    leaf = pki["ca_object"].issue_cert("localhost", "127.0.0.1")
    fresh = tmp_path / "fresh"
    fresh.mkdir(exist_ok=True)
    leaf.cert_chain_pems[0].write_to_path(str(fresh / "cert.pem"))
    leaf.private_key_pem.write_to_path(str(fresh / "key.pem"))
    os.replace(fresh / "cert.pem", s.cert)
    os.replace(fresh / "key.pem", s.key)
    return der_digest(s.cert)


def test_hup_serves_a_renewed_certificate(tmp_path, pki):
    s = CertServer(tmp_path / "srv", pki, workers=2)
    with served(s):
        old_workers = set(s.wait_workers(2))
        before, _ = s.served_cert()
        assert before == der_digest(s.cert)
        after = renew(s, pki, tmp_path)
        assert after != before
        mark = hup(s)
        s.wait_for_log("Rolling restart done", timeout=30, since=mark)
        wait_until(lambda: not old_workers & set(s.worker_pids()), 30,
                   "the old workers to exit")
        for _ in range(4):
            digest, pid = s.served_cert()
            assert digest == after and pid not in old_workers
        assert REFUSED not in s.log_since(mark)


@pytest.mark.parametrize("damage", ["garbage", "other_key", "missing"])
def test_hup_refuses_a_bad_pair_and_serves_on(tmp_path, pki, damage):
    s = CertServer(tmp_path / "srv", pki, workers=2)
    with served(s):
        workers = set(s.wait_workers(2))
        before, _ = s.served_cert()
        if damage == "garbage":
            s.cert.write_text("-----BEGIN CERTIFICATE-----\nnot one\n")
        elif damage == "other_key":
            shutil.copy(pki["other_key"], s.key)
        else:
            s.key.unlink()
        mark = hup(s)
        log = s.wait_for_log(REFUSED, timeout=10, since=mark)
        errors = [line for line in log.splitlines() if "[ERROR]" in line]
        # the check's own line (which file, what is wrong), then ours
        assert len(errors) == 2, log
        assert str(s.key if damage != "garbage" else s.cert) in errors[0], log
        assert "rolling restart of" not in log
        # the same workers serve on, with the certificate they had
        for _ in range(4):
            digest, pid = s.served_cert()
            assert digest == before and pid in workers
        assert set(s.worker_pids()) == workers
        # mended, a HUP rolls as usual
        shutil.copy(pki["cert"], s.cert)
        shutil.copy(pki["key"], s.key)
        mark = hup(s)
        s.wait_for_log("Rolling restart done", timeout=30, since=mark)
        assert REFUSED not in s.log_since(mark)


def test_hup_with_a_file_refuses_a_bad_pair(tmp_path, pki):
    s = CertServer(tmp_path / "srv", pki, conf=True)
    with served(s):
        workers = set(s.wait_workers(1))
        bad = tmp_path / "bad.pem"
        bad.write_text("nothing\n")
        s.conf(extra="health_path = /hz\n", cert=bad)
        mark = hup(s)
        log = s.wait_for_log(REFUSED, timeout=10, since=mark)
        assert str(bad) in log and "re-read" not in log
        assert s.served_cert()[1] in workers
        # nor the file's other settings; mended, it is read
        assert status(s, "/hz") == 404
        s.conf(extra="health_path = /hz\n")
        mark = hup(s)
        s.wait_for_log("Rolling restart done", timeout=30, since=mark)
        wait_until(lambda: status(s, "/hz") == 200, 20, "/hz to answer")


@pytest.mark.parametrize("start_tls", [True, False])
def test_hup_cannot_turn_tls_on_or_off(tmp_path, pki, start_tls):
    s = CertServer(tmp_path / "srv", pki, conf=True)
    if not start_tls:
        s.conf(tls=False)
        s.connect = lambda timeout=helpers.IO_TIMEOUT: helpers.RawConn.tcp(
            s.host, s.port, timeout)
    with served(s):
        workers = set(s.wait_workers(1))
        s.conf(tls=not start_tls)
        mark = hup(s)
        needle = "it turns TLS %s, which only a restart can do" % (
            "off" if start_tls else "on")
        log = s.wait_for_log(needle, timeout=10, since=mark)
        assert "rolling restart of" not in log
        with s.connect() as c:
            c.send(helpers.build_request("GET", "/pid"))
            assert int(c.read_response().body) in workers


def test_hup_takes_a_new_ticket_rotation(tmp_path, pki):
    """3600 at start: a session resumes. A HUP with 0: the new workers
    issue no tickets, so a new session has nothing to resume."""
    s = CertServer(tmp_path / "srv", pki, conf=True)
    with served(s):
        workers = set(s.wait_workers(1))
        sess = tmp_path / "sess.pem"
        assert resumed(s, sess, new=True) is False
        assert resumed(s, sess, new=False) is True
        s.conf(extra="ssl_ticket_rotation = 0\n")
        mark = hup(s)
        s.wait_for_log("Rolling restart done", timeout=30, since=mark)
        wait_until(lambda: not workers & set(s.worker_pids()), 30,
                   "the old worker to exit")
        sess.unlink()
        resumed(s, sess, new=True)
        assert not sess.exists() or resumed(s, sess, new=False) is False


def resumed(s, path, new):
    """One s_client connection saving (NEW) or resuming the session in
    PATH: whether it was resumed."""
    rc, out = s_client(s.port, "-tls1_3", "-sess_out" if new else "-sess_in",
                       str(path))
    assert rc == 0, out
    m = re.search(r"^(New|Reused), TLSv", out, re.M)
    assert m, out
    return m.group(1) == "Reused"


def test_hup_shortens_the_ticket_rotation(tmp_path, pki):
    """3600 at start, 1 after a HUP: the timer takes the new period at
    once, so a ticket made after the HUP stops resuming within seconds,
    not within the hour the old period had left."""
    s = CertServer(tmp_path / "srv", pki, conf=True)
    with served(s):
        workers = set(s.wait_workers(1))
        s.conf(extra="ssl_ticket_rotation = 1\n")
        mark = hup(s)
        s.wait_for_log("Rolling restart done", timeout=30, since=mark)
        wait_until(lambda: not workers & set(s.worker_pids()), 30,
                   "the old worker to exit")
        sess = tmp_path / "sess.pem"
        resumed(s, sess, new=True)
        assert resumed(s, sess, new=False) is True
        wait_until(lambda: not resumed(s, sess, new=False), 15,
                   "the ticket's key to be retired", interval=0.2)
