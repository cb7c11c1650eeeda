"""TLS session resumption on any worker: the supervisor's ticket keys.

The supervisor makes the session ticket keys and hands them to every
worker (supervisor/tickets.c), so a session one worker began resumes on
another, and on the workers of a rolling restart (HUP). The key is
replaced every --ssl-ticket-rotation seconds with the one before still
accepted: a ticket two rotations old is refused (a full handshake), and
--ssl-ticket-rotation 0 issues none. The client is openssl s_client
-sess_out / -sess_in, which says "Reused" or "New"; each request asks
/pid, so the worker that served it is known. Certificates are the
test's own (conftest's pki).
"""

import os
import re
import signal
import threading

import pytest

import helpers
from helpers import wait_until
from tls_helpers import TLSServer, s_client, served

pytestmark = pytest.mark.sluice_only

PID_REQUEST = b"GET /pid HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def session(server, path, *, new, version="-tls1_3"):
    """One connection with s_client, saving its session to PATH (NEW) or
    resuming the one in PATH: (reused, pid of the worker)."""
    args = [version, "-sess_out" if new else "-sess_in", str(path)]
    rc, out = s_client(server.port, *args, data=PID_REQUEST)
    assert rc == 0, out
    m = re.search(r"^(New|Reused), TLSv", out, re.M)
    pid = re.search(r"\r?\n\r?\n(\d+)", out)
    assert m and pid, out
    return m.group(1) == "Reused", int(pid.group(1))


def hold_worker(server, pid):
    """Keep worker PID's loop busy for 3 s (inline mode: /slow runs on
    it); False when the connection reached another worker."""
    c = server.connect()
    c.send(helpers.build_request("GET", "/pid"))
    if int(c.read_response().body) != pid:
        c.close()
        return False

    def run():
        with c:
            c.send(helpers.build_request("GET", "/slow?t=3"))
            c.read_response()
    threading.Thread(target=run, daemon=True).start()
    return True


@pytest.mark.parametrize("version", ["-tls1_3", "-tls1_2"])
def test_resumes_on_another_worker(tmp_path, pki, version):
    # inline mode: a worker running /slow does not accept, so the next
    # connection goes to the other one
    s = TLSServer(tmp_path, pki, workers=2, inline=True)
    with served(s):
        s.wait_workers(2)
        sess = tmp_path / "sess.pem"
        reused, first = session(s, sess, new=True, version=version)
        assert not reused
        seen = set()

        def elsewhere():
            if not hold_worker(s, first):
                return None
            reused, pid = session(s, sess, new=False, version=version)
            seen.add((reused, pid))
            return pid != first and reused
        wait_until(elsewhere, 30, "a resumption on a worker other than %d"
                   % first, interval=0.1)
        assert all(r for r, _ in seen), seen


def test_resumes_after_a_rolling_restart(tmp_path, pki):
    s = TLSServer(tmp_path, pki, workers=2)
    with served(s):
        old = set(s.wait_workers(2))
        sess = tmp_path / "sess.pem"
        assert session(s, sess, new=True)[0] is False
        assert session(s, sess, new=False)[0] is True
        mark = s.log_mark()
        os.kill(s.pid, signal.SIGHUP)
        s.wait_for_log("Rolling restart done", timeout=30, since=mark)
        wait_until(lambda: not old & set(s.worker_pids()), 30,
                   "the old workers to exit")
        reused, pid = session(s, sess, new=False)
        assert reused and pid not in old


def test_rotation_retires_old_tickets(tmp_path, pki):
    """--ssl-ticket-rotation 1: a ticket resumes at first; two rotations
    later its key is gone, and the client gets a full handshake."""
    s = TLSServer(tmp_path, pki, args=["--ssl-ticket-rotation", "1"])
    with served(s):
        sess = tmp_path / "sess.pem"
        session(s, sess, new=True)
        assert session(s, sess, new=False)[0] is True
        wait_until(lambda: not session(s, sess, new=False)[0], 15,
                   "the ticket's key to be retired", interval=0.2)


@pytest.mark.parametrize("version", ["-tls1_3", "-tls1_2"])
def test_rotation_zero_issues_no_tickets(tmp_path, pki, version):
    """Without tickets (and without a session cache, one worker's) there
    is no session to save, or none that resumes."""
    s = TLSServer(tmp_path, pki, args=["--ssl-ticket-rotation", "0"])
    with served(s):
        sess = tmp_path / "sess.pem"
        session(s, sess, new=True, version=version)
        assert not sess.exists() or \
            session(s, sess, new=False, version=version)[0] is False
