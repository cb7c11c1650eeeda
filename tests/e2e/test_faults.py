"""Faults on the path: loss and delay inside a network namespace.

The test creates a network namespace of its own (`ip netns add`), brings
its loopback up with a 1500-byte MTU, and moves its own thread into it
(setns(2)), so the server it starts and the client processes it forks live
there: no address outside the namespace is used and no packet leaves it.
The namespace is deleted at the end.

On the namespace's loopback it imposes loss and delay, with `tc netem`
(delay 20 ms +- 10 ms, loss 3 %) where the kernel has it. Where it does
not (the qdisc is probed each run), the substitutes are:
  - loss: nftables `numgen random mod 100 < 3 drop` on the server port,
    both directions (3 % of segments, SYNs and FINs included);
  - delay: a token bucket (`tbf rate 20mbit burst 4kb latency 50ms`): not
    a fixed delay but the queueing delay of a slow link, up to 50 ms, with
    tail drops beyond it.
The test skips only when `ip` is missing or it is not root, or when
neither netem nor nft can drop packets (named in the skip reason).

Under that, bench/soak.py's client (keep-alive, pipelined, chunked
uploads, whole responses of up to 1 MiB, resets mid-response, garbage,
Connection: close) runs from four processes for a few seconds. Every
answer that arrives whole is checked byte for byte and must be right; an
answer cut short by the faults (a timeout, say) is allowed but counted;
most must complete. The worker never dies: same pid, no crash line in its
log, and it answers after the faults are lifted.
"""

import contextlib
import ctypes
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import EXECUTORS
from helpers import REPO, running, sanitized

if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

import soak  # noqa: E402

pytestmark = pytest.mark.sluice_only

APPS = {"wsgi": ("soak_app:app", []),
        "asgi": ("soak_app:asgi", ["--interface", "asgi"])}
CLONE_NEWNET = 0x40000000
LOSS_PCT = 3
SECONDS = 3
SHAPES = (soak.shape_keep_alive, soak.shape_big, soak.shape_chunked,
          soak.shape_pipelined, soak.shape_big, soak.shape_reset,
          soak.shape_garbage, soak.shape_close)


def run(*cmd, check=True):
    return subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, check=check, timeout=20,
                          text=True)


def setns(fd):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns() failed")


@contextlib.contextmanager
def inside_netns(name):
    """This thread (and what it starts) in a new namespace NAME, lo up."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2's ip for a network namespace")
    run("ip", "netns", "del", name, check=False)  # left by a killed run
    run("ip", "netns", "add", name)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        fd = os.open("/run/netns/" + name, os.O_RDONLY)
        try:
            setns(fd)
        finally:
            os.close(fd)
        try:
            run("ip", "link", "set", "lo", "mtu", "1500", "up")
            yield
        finally:
            setns(home)
    finally:
        os.close(home)
        run("ip", "netns", "del", name, check=False)


def impose_faults(port):
    """Loss and delay on lo for PORT; a line saying how."""
    netem = run("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                "20ms", "10ms", "loss", "%d%%" % LOSS_PCT, check=False)
    if netem.returncode == 0:
        return "netem delay 20ms 10ms loss %d%%" % LOSS_PCT
    how = []
    if shutil.which("nft"):
        rules = ("add table inet sluice_faults\n"
                 "add chain inet sluice_faults in "
                 "{ type filter hook input priority 0; }\n"
                 "add rule inet sluice_faults in tcp dport %d "
                 "numgen random mod 100 < %d counter drop\n"
                 "add rule inet sluice_faults in tcp sport %d "
                 "numgen random mod 100 < %d counter drop\n"
                 % (port, LOSS_PCT, port, LOSS_PCT))
        nft = subprocess.run(["nft", "-f", "-"], input=rules, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=20)
        if nft.returncode == 0:
            how.append("nft numgen loss %d%%" % LOSS_PCT)
    if not how:
        pytest.skip("no way to drop packets here: no netem qdisc (%s) and "
                    "no working nft (the nftables package)"
                    % netem.stdout.strip())
    run("tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "20mbit",
        "burst", "4kb", "latency", "50ms")
    how.append("tbf rate 20mbit latency 50ms (queueing delay; no netem)")
    return ", ".join(how)


def lift_faults():
    """Remove the faults; the packets nft dropped (None: nft not used)."""
    run("tc", "qdisc", "del", "dev", "lo", "root", check=False)
    if not shutil.which("nft"):
        return None
    table = run("nft", "list", "table", "inet", "sluice_faults", check=False)
    if table.returncode != 0:
        return None
    run("nft", "delete", "table", "inet", "sluice_faults", check=False)
    return sum(int(n) for n in re.findall(r"packets (\d+)", table.stdout))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("kind", APPS)
def test_loss_and_delay_under_load(tmp_path, kind, executor):
    app, args = APPS[kind]
    with inside_netns("sluice-faults-%d" % os.getpid()), \
            running(tmp_path / "srv", app, args=args,
                    inline=executor == "inline", ready_path="/hello",
                    pythonpath=(str(REPO / "tests" / "apps"),)) as server:
        worker = server.wait_workers(1)[0]
        how = impose_faults(server.port)
        try:
            load = soak.Load((server.host, server.port), 10 ** 9, procs=4,
                             shapes=SHAPES, seconds=SECONDS).start()
            load.join(120 if not sanitized() else 300)
        finally:
            dropped = lift_faults()
        served = sum(load.done.values())
        failed = sum(load.errors.values())
        wrong = {k: v for k, v in load.errors.items() if k.startswith("WRONG")}
        print("faults (%s): %s packets dropped; %d requests answered whole "
              "and right, %d cut short: %s" % (how, dropped, served, failed,
                                               dict(load.errors)))
        assert dropped is None or dropped > 0, "nft dropped nothing"
        assert not wrong, "wrong answers: %s" % wrong
        assert served >= 100 and failed <= served // 10, \
            (served, dict(load.errors))
        assert server.worker_pids() == [worker], "the worker was replaced"
        crashes = soak.crash_lines(server.error_log_text())
        assert not crashes, crashes
        # and it serves once the faults are gone
        r = server.get("/hello")
        assert r.status == 200 and r.body == b"hello\n"
