"""Listening addresses and processes: unix:PATH, [::1]:port, several
--bind at once, and -w 2 (two workers that each accept and serve)."""

import os
import signal
import socket
import stat

import pytest

from conftest import start_mode_server
from helpers import Load, RawConn, free_port, wait_until


@pytest.fixture(scope="module")
def multi(mode, tmp_path_factory):
    sockdir = tmp_path_factory.mktemp("sock")
    unix_path = str(sockdir / "sluice.sock")
    p4 = free_port("127.0.0.1")
    p6 = free_port("::1")
    binds = ["unix:%s" % unix_path, "[::1]:%d" % p6, "127.0.0.1:%d" % p4]
    with start_mode_server(tmp_path_factory, "binds", mode,
                           binds=binds) as s:
        s.p4, s.p6 = p4, p6
        yield s


@pytest.fixture(scope="module")
def two_workers(mode, tmp_path_factory):
    with start_mode_server(tmp_path_factory, "workers2", mode,
                           workers=2) as s:
        yield s


def test_unix_socket(multi):
    assert stat.S_ISSOCK(os.stat(multi.unix_path).st_mode)
    with RawConn.unix(multi.unix_path) as c:
        r = c.request("GET", "/environ?via=unix")
        assert r.status == 200
        env = r.json()
        assert env["QUERY_STRING"]["value"] == "via=unix"
        assert env["PATH_INFO"]["value"] == "/environ"
        # keep-alive and a body over the unix socket too
        assert c.request("POST", "/echo", body=b"unix body").body == \
            b"unix body"


def test_ipv6_loopback(multi):
    with RawConn.tcp("::1", multi.p6) as c:
        r = c.request("GET", "/environ", host="[::1]:%d" % multi.p6)
        env = r.json()
        assert env["REMOTE_ADDR"]["value"] == "::1"
        assert env["REMOTE_PORT"]["value"] == str(c.local_port)
        assert env["SERVER_PORT"]["value"] == str(multi.p6)


def test_ipv4_alongside(multi):
    with RawConn.tcp("127.0.0.1", multi.p4) as c:
        env = c.request("GET", "/environ").json()
    assert env["REMOTE_ADDR"]["value"] == "127.0.0.1"
    assert env["SERVER_PORT"]["value"] == str(multi.p4)


def test_ipv6_bind_is_not_ipv4(multi):
    """[::1] binds the IPv6 loopback only: the v4 port is the other bind."""
    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex(("127.0.0.1", multi.p6)) != 0


def test_two_workers_exist_and_say_multiprocess(two_workers):
    pids = two_workers.wait_workers(2)
    assert len(set(pids)) == 2
    env = two_workers.get("/environ").json()
    assert env["wsgi.multiprocess"]["value"] is True
    assert env["_pid"] in pids


def _served_by(server, n):
    """The workers that answered N requests for /pid, one at a time."""
    load = Load(server, conns=1, requests=n, timeout=5).run()
    assert load.count("ok") == n, load.failure_report()
    return load.pids()


def test_each_worker_accepts_on_its_own(two_workers):
    """With one worker stopped, the other serves every request; then the
    other way round."""
    pids = two_workers.wait_workers(2)
    # Both workers must have finished booting before one is frozen.
    wait_until(lambda: _both_ready(two_workers, pids), 20,
               "both workers to serve")
    for frozen, live in ((pids[0], pids[1]), (pids[1], pids[0])):
        os.kill(frozen, signal.SIGSTOP)
        try:
            assert _served_by(two_workers, 8) == {live}
        finally:
            os.kill(frozen, signal.SIGCONT)
    assert two_workers.worker_pids() == pids


def _both_ready(server, pids):
    """True once a request has been answered by each worker: freeze one,
    ask, thaw, for both."""
    for p in pids:
        other = [q for q in pids if q != p][0]
        os.kill(other, signal.SIGSTOP)
        try:
            with server.connect(timeout=3) as c:
                got = int(c.request("GET", "/pid").body)
        except OSError:
            got = None
        except Exception:
            got = None
        finally:
            os.kill(other, signal.SIGCONT)
        if got != p:
            return False
    return True
