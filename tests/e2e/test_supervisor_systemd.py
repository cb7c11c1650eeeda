"""sluice under systemd's protocols, without systemd running.

systemd-socket-activate (Debian's systemd package) binds the socket, waits
for the first connection and execs sluice with LISTEN_FDS; the test owns the
NOTIFY_SOCKET and records every datagram with its sender's pid. The
sequence must be exactly READY -> RELOADING -> READY -> STOPPING for a
start, a HUP and a TERM, with STATUS= updates and WATCHDOG=1 pings in
between. Twenty activated sockets are each served (a worker once ignored
every socket after the 16th). The example units in contrib/systemd must pass
systemd-analyze verify without a single complaint.
"""

import os
import re
import shutil
import signal
import subprocess
import time

import pytest

import helpers
from helpers import (ACTIVATE, REPO, NotifySocket, RawConn, free_port,
                     free_ports,
                     wait_until, write_app)

pytestmark = pytest.mark.sluice_only

ANALYZE = shutil.which("systemd-analyze") or "/usr/bin/systemd-analyze"


def get_pid(port, timeout=20):
    with RawConn.tcp("127.0.0.1", port, timeout) as c:
        r = c.request("GET", "/pid", headers=[("Connection", "close")])
    assert r.status == 200
    return int(r.body)


@pytest.mark.skipif(not os.access(ACTIVATE, os.X_OK),
                    reason="systemd-socket-activate is not installed")
def test_socket_activation_and_the_notify_sequence(tmp_path):
    appdir = write_app(tmp_path / "app")
    port, unused = free_port(), free_port()
    log = tmp_path / "error.log"
    with NotifySocket() as notify, \
            open(tmp_path / "stderr.txt", "wb") as err:
        cmd = helpers.activate_command(
            "127.0.0.1:%d" % port, fdname="web",
            env=["NOTIFY_SOCKET=" + notify.path, "WATCHDOG_USEC=1000000"])
        cmd += [helpers.sluice_bin(), "-w", "2", "--pythonpath", str(appdir),
                "--error-logfile", str(log),
                "-b", "127.0.0.1:%d" % unused,  # ignored: systemd's sockets
                "sup_app:app"]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
        try:
            _run_the_sequence(proc, port, unused, log, notify)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
            wait_until(lambda: not helpers.live_pids_in_group(proc.pid), 5,
                       "sluice's processes to exit")


def _run_the_sequence(proc, port, unused, log, notify):
    # The first connection makes systemd-socket-activate exec sluice; it
    # waits in the backlog until a worker is ready.
    wait_until(lambda: _connects(port), 10, "the activation socket")
    assert get_pid(port) in helpers.children_of(proc.pid)
    sup = proc.pid  # exec'd in place
    i = notify.wait("READY", "1")
    pid, fields, _ = notify.messages[i]
    assert pid == sup
    assert fields["STATUS"].startswith("2/2 workers ready"), fields
    text = log.read_text()
    assert "from systemd as web" in text, text
    assert text.count("is ready") == 2
    assert not _connects(unused), "--bind was bound despite LISTEN_FDS"

    # HUP: RELOADING=1 with the time, every worker replaced, READY=1
    before = set(helpers.children_of(sup))
    os.kill(sup, signal.SIGHUP)
    r = notify.wait("RELOADING", "1", start=i + 1)
    usec = int(notify.messages[r][1]["MONOTONIC_USEC"])
    assert abs(usec / 1e6 - time.clock_gettime(time.CLOCK_MONOTONIC)) < 10
    notify.wait("READY", "1", start=r + 1)
    after = wait_until(lambda: (lambda c: len(c) == 2 and c)(
        set(helpers.children_of(sup))), 10, "the old workers to drain")
    assert not before & after

    # STATUS= follows the request rate
    load = helpers.Load(("127.0.0.1", port), conns=1, requests=40,
                        timeout=20).run()
    assert load.count("ok") == 40, load.failure_report()
    wait_until(lambda: [f for _, f, _ in notify.poll() if _rate(f) > 0], 5,
               "a STATUS= with a request rate")

    # WATCHDOG=1 every 0.5 s (half of WATCHDOG_USEC)
    wait_until(lambda: len(_pings(notify)) >= 4, 5, "four watchdog pings")
    pings = _pings(notify)
    gaps = [b - a for a, b in zip(pings, pings[1:])]
    assert 0.3 < sorted(gaps)[len(gaps) // 2] < 0.8, gaps

    os.kill(sup, signal.SIGTERM)
    assert proc.wait(10) == 0
    notify.wait("STOPPING", "1")
    assert notify.states() == ["READY", "RELOADING", "READY", "STOPPING"]
    assert all(p == sup for p, _, _ in notify.poll())


@pytest.mark.skipif(not os.access(ACTIVATE, os.X_OK),
                    reason="systemd-socket-activate is not installed")
def test_every_socket_systemd_passes_is_served(tmp_path):
    """20 sockets, more than a worker once served (it ignored every one
    after the 16th): each answers a request."""
    appdir = write_app(tmp_path / "app")
    ports = free_ports(20)
    log = tmp_path / "error.log"
    with open(tmp_path / "stderr.txt", "wb") as err:
        cmd = helpers.activate_command(
            ["127.0.0.1:%d" % port for port in ports])
        cmd += [helpers.sluice_bin(), "-w", "1", "--pythonpath", str(appdir),
                "--error-logfile", str(log), "sup_app:app"]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
        try:
            wait_until(lambda: _connects(ports[0]), 10,
                       "the activation sockets")
            worker = get_pid(ports[0])
            for i, port in enumerate(ports):
                try:
                    pid = get_pid(port, timeout=5)
                except helpers.HTTPError as e:
                    raise AssertionError("socket %d of %d (port %d) did not "
                                         "answer: %s" % (i + 1, len(ports),
                                                         port, e))
                assert pid == worker, (i, port)
            assert log.read_text().count("from systemd") == 20
            os.kill(proc.pid, signal.SIGTERM)
            assert proc.wait(10) == 0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
            wait_until(lambda: not helpers.live_pids_in_group(proc.pid), 5,
                       "sluice's processes to exit")


def _connects(port):
    try:
        with RawConn.tcp("127.0.0.1", port, 1):
            return True
    except OSError:
        return False


def _rate(fields):
    m = re.search(r"([0-9.]+) req/s", fields.get("STATUS", ""))
    return float(m.group(1)) if m else 0.0


def _pings(notify):
    return [t for _, f, t in notify.poll() if f.get("WATCHDOG") == "1"]


@pytest.mark.skipif(not os.access(ANALYZE, os.X_OK),
                    reason="systemd-analyze is not installed")
def test_example_units_pass_systemd_analyze_verify(tmp_path):
    src = REPO / "contrib" / "systemd"
    units = []
    for name in ("sluice@.service", "sluice@.socket"):
        text = (src / name).read_text()
        # verify insists that ExecStart= exists: use the binary under test
        text = text.replace("/usr/local/bin/sluice", helpers.sluice_bin())
        for unit in (name, name.replace("@.", "@demo.")):
            (tmp_path / unit).write_text(text)
            units.append(str(tmp_path / unit))
    res = subprocess.run([ANALYZE, "verify", "--man=no"] + units,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    # warnings (an unknown key, a bad value) do not change the status
    assert res.stdout.strip() == "" and res.stderr.strip() == "", \
        res.stdout + res.stderr

    service = (src / "sluice@.service").read_text()
    settings = dict(re.findall(r"^(\w+)=(.*)$", service, re.M))
    assert settings["Type"] == "notify"
    assert settings["ExecReload"] == "kill -HUP $MAINPID"
    assert settings["KillMode"] == "mixed"
    # longer than the default --graceful-timeout (30 s) and the margin
    assert int(settings["TimeoutStopSec"]) > 31
