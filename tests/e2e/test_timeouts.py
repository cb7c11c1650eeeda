"""Header timeout (408 and close) and the idle keep-alive timeout.

The server runs with --header-timeout 1 --keep-alive 1. The header timeout
bounds the whole head, so a client dribbling one byte at a time does not
keep a connection open forever. Neither timer may fire while the
application is working on a request, and the keep-alive timer measures
idleness, not the age of the connection.
"""

import itertools
import time

import pytest

from conftest import start_mode_server
from helpers import ReadTimeout

_ids = itertools.count()


@pytest.fixture(scope="module")
def timed(mode, tmp_path_factory):
    args = ["--keep-alive", "1"]
    from helpers import PEER
    if not PEER:
        args += ["--header-timeout", "1"]
    with start_mode_server(tmp_path_factory, "timeouts", mode,
                           args=args) as s:
        yield s


def _closed_after(conn, timeout):
    """Seconds until the peer closes; the bytes it sent before closing."""
    t0 = time.monotonic()
    data = conn.read_until_eof(timeout)
    return time.monotonic() - t0, data


@pytest.mark.sluice_only
def test_partial_head_gets_408_and_close(timed):
    m = "partial-%d" % next(_ids)
    with timed.connect() as c:
        c.send(b"GET /hello/%s HTTP/1.1\r\nHost: x\r\nX-Incomplete: y"
               % m.encode())
        t0 = time.monotonic()
        r = c.read_response()
        elapsed = time.monotonic() - t0
        assert r.status == 408, r.raw
        assert r.has_token("Connection", "close")
        c.expect_eof()
    assert 0.8 <= elapsed <= 4, elapsed
    assert not timed.called(m)


@pytest.mark.sluice_only
def test_dribbled_head_still_times_out(timed):
    """One byte every 0.2 s never completes the head within 1 s."""
    head = b"GET /hello HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"p" * 100
    with timed.connect() as c:
        t0 = time.monotonic()
        got = b""
        for i in range(len(head)):
            try:
                c.send(head[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                break
            got = c.read_available(0.2)
            if got or c.eof:
                break
        elapsed = time.monotonic() - t0
        if not c.eof:
            got += c.read_until_eof(5)
    assert got.startswith(b"HTTP/1.1 408 "), got
    assert elapsed <= 4, elapsed


@pytest.mark.sluice_only
def test_silent_connection_is_closed(timed):
    """A connection that never sends a byte is closed near the header
    timeout (a 408 is allowed but not required)."""
    with timed.connect() as c:
        elapsed, data = _closed_after(c, 6)
    assert 0.8 <= elapsed <= 4, elapsed
    assert data == b"" or data.startswith(b"HTTP/1.1 408 "), data


def test_idle_keep_alive_connection_is_closed(timed):
    with timed.connect() as c:
        assert c.request("GET", "/hello").status == 200
        elapsed, data = _closed_after(c, 6)
    assert data == b"", data
    assert 0.8 <= elapsed <= 4, elapsed


def test_keep_alive_timer_measures_idleness_not_age(timed):
    with timed.connect() as c:
        port = c.local_port
        for i in range(4):
            r = c.request("GET", "/environ")
            assert r.status == 200
            assert r.json()["REMOTE_PORT"]["value"] == str(port)
            time.sleep(0.6)  # pacing: stays under the 1 s idle timeout


def test_slow_app_outlives_both_timeouts(timed):
    with timed.connect() as c:
        r = c.request("GET", "/slow?t=1.8")
        assert r.status == 200
        assert r.body.startswith(b"slept 1.8")
        # and the connection is still usable right after
        assert c.request("GET", "/hello").status == 200


def test_slow_request_body_within_timeout_gaps(timed):
    """Body bytes arriving every 0.5 s (below both timeouts) are fine even
    though the whole upload takes longer than either timeout."""
    body = b"0123456789"
    with timed.connect() as c:
        c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
        for i in range(0, 10, 2):
            time.sleep(0.5)  # pacing the upload
            c.send(body[i:i + 2])
        try:
            r = c.read_response()
        except ReadTimeout as e:
            raise AssertionError("no response: %s" % e)
    assert r.status == 200 and r.body == body


def test_slow_download_outlives_keep_alive(timed):
    """Writing a response to a slow reader for longer than the keep-alive
    timeout is not idleness: the connection stays usable afterwards."""
    size = 16 * 1024 * 1024
    with timed.connect(timeout=20) as c:
        c.send(b"GET /big?size=%d HTTP/1.1\r\nHost: x\r\n\r\n" % size)
        head = c.read_head()
        assert head.status == 200
        got = len(c.buf)
        t0 = time.monotonic()
        while got < size:
            piece = c.sock.recv(min(262144, size - got))
            assert piece, "closed after %d of %d body bytes" % (got, size)
            got += len(piece)
            if time.monotonic() - t0 < 2.5:
                time.sleep(0.05)  # pacing: a slow reader for 2.5 s
        c.buf.clear()
        assert time.monotonic() - t0 >= 2.0
        r = c.request("GET", "/hello")
        assert r.status == 200 and r.body == b"hello\n"


@pytest.fixture(scope="module")
def line_timed(tmp_path_factory):
    """One WSGI pump server with --header-timeout 2 (the loop's timers do
    not depend on the executor)."""
    from conftest import WSGI_MODES
    mode = dict(WSGI_MODES["pump"], name="pump")
    with start_mode_server(tmp_path_factory, "timeouts-line", mode,
                           args=["--header-timeout", "2"]) as s:
        yield s


def _dribble_line_then_wait(c):
    """Send a request line in 10 pieces over 1.8 s, then one field and no
    end of head; the seconds from the first byte to the 408."""
    line = b"GET /hello/dribbled-line HTTP/1.1\r\n"
    step = -(-len(line) // 10)
    t0 = time.monotonic()
    for i in range(0, len(line), step):
        if i:
            time.sleep(0.2)  # the client's pace, not a wait for the server
        c.send(line[i:i + step])
    c.send(b"Host: x\r\n")
    r = c.read_response()
    return time.monotonic() - t0, r


@pytest.mark.sluice_only
@pytest.mark.parametrize("reused", [False, True], ids=["fresh", "keep-alive"])
def test_slow_request_line_does_not_rearm_header_timeout(line_timed, reused):
    """The head's clock starts once (at accept, or at a keep-alive
    connection's next first byte) and is not started again when the
    request line becomes whole: the 408 comes about 2 s after the first
    byte (the 1 s sweep adds up to 1 s), not 2 s after the line's 1.8 s."""
    with line_timed.connect() as c:
        if reused:
            c.send(b"GET /hello/first HTTP/1.1\r\nHost: x\r\n\r\n")
            assert c.read_response().status == 200
        elapsed, r = _dribble_line_then_wait(c)
        assert r.status == 408, r.raw
        c.expect_eof()
    assert 1.9 <= elapsed <= 3.6, elapsed
