"""WebSocket clients that would take a worker's memory or hold a
connection forever: one that pings and never reads, and readers that stop
reading while the app sends. What a connection may hold and when it is cut
is in docs/websockets.md (WebSocket limits); these check it from outside, in
both ASGI modes. sluice-only: --send-timeout is not uvicorn's.

Each client here connects with a small receive buffer, so that what it
does not read fills the connection after a few kilobytes, not after the
megabytes the kernel would otherwise take in for it.
"""

import socket
import time

import pytest

import helpers
from conftest import ASGI_EXECUTOR_PARAMS
from ws_helpers import (OP_BIN, OP_PING, OP_PONG, WsRaw, sluice_ws_only,
                        ws_frame, ws_serve, ws_start)

pytestmark = sluice_ws_only

PINGS = 400_000  # of 125 bytes: 52 MB of frames
PINGS_PER_WRITE = 1000
FLOOD_RSS_BOUND_KIB = 16 * 1024  # one pong queued per ping: +50 MB
MESSAGE = 1 << 20
MESSAGES_MAX = 64  # the server stops reading long before


@pytest.fixture(scope="module", params=ASGI_EXECUTOR_PARAMS)
def cutting(request, tmp_path_factory):
    """The send timeout alone: --send-timeout 1, no pings."""
    s = ws_start(tmp_path_factory, "wscut", request.param, "ws_extra_app:app",
                 ["--send-timeout", "1", "--ws-ping-interval", "0"])
    yield from ws_serve(s)


@pytest.fixture(scope="module", params=ASGI_EXECUTOR_PARAMS)
def quiet(request, tmp_path_factory):
    """No timers at all (no pings, no send timeout): what a flood leaves."""
    s = ws_start(tmp_path_factory, "wsquiet", request.param,
                 "ws_extra_app:app",
                 ["--send-timeout", "0", "--ws-ping-interval", "0"])
    yield from ws_serve(s)


@pytest.fixture(scope="module", params=ASGI_EXECUTOR_PARAMS)
def pinging(request, tmp_path_factory):
    """Pings alone: every second, a second to answer; no send timeout."""
    s = ws_start(tmp_path_factory, "wsping", request.param,
                 "ws_extra_app:app",
                 ["--send-timeout", "0", "--ws-ping-interval", "1",
                  "--ws-ping-timeout", "1"])
    yield from ws_serve(s)


def ended(server, mark, timeout):
    """How the app's echo for MARK ended ("1006": cut), waiting for it."""
    line = server.wait_for_call("ECHO %s ended" % mark, timeout=timeout)[0]
    return line.split()[-1]


def stall(c):
    """Send 1 MiB messages to the echo, reading nothing, until the server
    stops reading (a send blocks for 2 s) or cuts the connection."""
    frame = ws_frame(OP_BIN, b"m" * MESSAGE)
    c.sock.settimeout(2)
    try:
        for _ in range(MESSAGES_MAX):
            c.sock.sendall(frame)
    except socket.timeout:
        return
    except (ConnectionResetError, BrokenPipeError):
        return  # cut while it still read: the output had waited long enough
    raise AssertionError("the server read %d MiB from a client that reads "
                         "nothing" % MESSAGES_MAX)


def test_ping_flood_keeps_memory_bounded(quiet):
    # 400,000 pings from a client that reads nothing: all of them are read,
    # and the pongs wait in one place, the latest ping's (RFC 6455 §5.5.3);
    # before, one pong was queued per ping (+45 MB here). No timers: a
    # flood slow enough (a sanitizer build) would otherwise see the server's
    # own ping go unanswered, which ends the connection by design
    pid = quiet.ws_worker_pid()
    block = b"".join(ws_frame(OP_PING, b"%0125d" % i)
                     for i in range(PINGS_PER_WRITE))
    with WsRaw.to(quiet, "/echo", rcvbuf=4096) as c:
        base = helpers.vm_rss_kib(pid)
        c.sock.settimeout(30)
        sent, end = 0, time.monotonic() + 60
        while sent < PINGS and time.monotonic() < end:
            c.sock.sendall(block)
            sent += PINGS_PER_WRITE
        c.send_frame(OP_PING, b"latest")
        grown = helpers.vm_rss_kib(pid) - base
        print("ping flood: %d pings sent, worker RSS +%d KiB" % (sent, grown))
        assert sent == PINGS
        assert helpers.sanitized() or grown < FLOOD_RSS_BOUND_KIB, \
            "worker RSS grew %d KiB under %d pings" % (grown, sent)
        # the client reads at last: pongs, one per read of pings at most,
        # and the latest ping answered
        c.sock.settimeout(10)
        pongs = 0
        while True:
            _, _, op, payload = c.recv_frame()
            assert op == OP_PONG, op
            pongs += 1
            if payload == b"latest":
                break
        print("%d pongs for %d pings" % (pongs, sent + 1))
        assert pongs < PINGS // 10


def cut_after_stall(server, mark, bound):
    """A client of the echo stops reading (stall()); the server must cut
    it, the app hearing 1006, within BOUND seconds of its first send."""
    with WsRaw.to(server, "/echo?m=" + mark, rcvbuf=4096) as c:
        began = time.monotonic()
        stall(c)
        how = ended(server, mark, timeout=15)
        waited = time.monotonic() - began
        print("cut %.1fs after the client began" % waited)
        assert how == "1006"
        assert waited < bound
        assert c.expect_eof(timeout=10) in ("eof", "reset")


def test_stalled_reader_is_cut_by_the_send_timeout(cutting):
    # the echo's output waits for a client that stopped reading; before,
    # the connection and the ~40 MB it held stayed forever. The output
    # waits from the first echo: --send-timeout 1, the sweep's second, and
    # room for a slow machine
    cut_after_stall(cutting, "sendtimeout", 8)


def test_stalled_reader_is_cut_by_its_unanswered_ping(pinging):
    # the same reader with no send timeout: the ping that waits behind the
    # output it does not read counts as unanswered (before, its clock
    # never started). Interval 1 s + timeout 1 s, each seen by a 1 Hz
    # sweep, the 2 s the stalled send waited, and room for a slow machine
    cut_after_stall(pinging, "pingtimeout", 12)
