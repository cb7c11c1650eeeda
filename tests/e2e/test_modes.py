"""The executor shapes are really in effect (otherwise running every test in
each mode would prove nothing).

- pump mode: the loop thread keeps parsing while the only lane is busy, so
  a malformed request on another connection is answered at once; with one
  lane a second application call waits for the first, with four it doesn't.
- inline mode (SLUICE_INLINE=1): the application runs on the loop thread,
  so nothing else on that worker is answered until it returns.

The busy request sleeps 1.2 s; "at once" means under 0.6 s, "waits" means
at least 0.6 s after the second request was sent.
"""

import itertools
import time

import pytest

from helpers import build_request

pytestmark = pytest.mark.sluice_only

_ids = itertools.count()
BUSY = 1.2
SPLIT = 0.6


def start_busy(server):
    """Start a /slow request and wait until the app is running it."""
    m = "busy-%d" % next(_ids)
    c = server.connect()
    c.send(build_request("GET", "/slow/%s?t=%s" % (m, BUSY)))
    server.wait_for_call(m)
    return c


def timed_response(server, data):
    with server.connect(timeout=10) as c:
        t0 = time.monotonic()
        c.send(data)
        r = c.read_response()
        return r, time.monotonic() - t0


def test_malformed_request_answered_while_app_busy(server, mode):
    busy = start_busy(server)
    try:
        r, elapsed = timed_response(server, b"GARBAGE\r\n\r\n")
        assert r.status == 400
        if mode["inline"]:
            assert elapsed >= SPLIT, \
                "inline mode answered during the app call (%.2fs)" % elapsed
        else:
            assert elapsed < SPLIT, \
                "pump mode's loop was blocked by the app (%.2fs)" % elapsed
        assert busy.read_response().status == 200
    finally:
        busy.close()


def test_second_app_call_waits_only_when_one_lane(server, mode):
    busy = start_busy(server)
    try:
        r, elapsed = timed_response(server, build_request("GET", "/hello"))
        assert r.status == 200
        if mode["threads"] == 1:
            assert elapsed >= SPLIT, \
                "two app calls overlapped with one lane (%.2fs)" % elapsed
        else:
            assert elapsed < SPLIT, \
                "a second lane did not take the request (%.2fs)" % elapsed
        assert busy.read_response().status == 200
    finally:
        busy.close()
