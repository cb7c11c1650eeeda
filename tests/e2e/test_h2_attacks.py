"""HTTP/2 attacks, each a named test (issue 29).

Every attack runs against a cleartext h2 server (prior knowledge) in the
four executors (WSGI and ASGI, pump and inline), with
--http2-max-concurrent-streams 10 and --send-timeout 2, and ends the same
way: a normal request on a new connection is answered, by the same worker
process (no crash, no restart). What each attack must do to its own
connection:

- rapid reset (CVE-2023-44487): streams opened and reset at once, by the
  thousand: GOAWAY ENHANCE_YOUR_CALM before the app has run one request
  per stream;
- CONTINUATION flood (CVE-2024-27316 class): a header block that never
  ends, 16 MiB of CONTINUATION frames: GOAWAY ENHANCE_YOUR_CALM (from
  libnghttp2's cap, CVE-2024-28182), never the app called, the worker's
  memory not grown by the flood;
- HPACK bomb: one 4 KiB field in the dynamic table, referenced 60000
  times (240 MB decoded from 64 KB): GOAWAY ENHANCE_YOUR_CALM without
  the app, memory bounded;
- SETTINGS flood, PING flood: frames that each ask for an ACK, sent
  without reading the ACKs: GOAWAY ENHANCE_YOUR_CALM;
- empty-DATA flood: 200000 zero-length DATA frames on one stream: the
  worker serves another connection meanwhile; the flooding connection
  ends with GOAWAY ENHANCE_YOUR_CALM;
- zero-window stall: a client whose windows are 0 asks for 8 MiB on
  three streams and never opens them: within --send-timeout (2 s) and a
  margin the streams are reset or the connection closed, and other
  connections are served meanwhile;
- too many streams: past SETTINGS_MAX_CONCURRENT_STREAMS (10, after the
  client acknowledged it) the connection ends with GOAWAY PROTOCOL_ERROR
  naming the tenth stream as the last one processed: libnghttp2 makes
  this a connection error (RFC 9113 5.1.2 asks for a stream error; it
  does so only before the client acknowledged the setting), and no
  stream past the limit reaches the app or gets an answer.

Debian's libnghttp2 (1.52.0-1+deb12u3) carries the fixes for
CVE-2023-44487 (a reset rate limit, which ends in GOAWAY INTERNAL_ERROR
of its own), CVE-2024-28182 (a cap on CONTINUATION frames) and
CVE-2026-27135; what the server adds in front of them is its business:
these tests only look at the wire. Each attack prints what came back
(run with -s to see it).
"""

import time

import pytest

pytest.importorskip("h2", reason="HTTP/2 tests need python3-h2")

import helpers
from conftest import ASGI_MODES, WSGI_MODES
from h2client import (CANCEL, ENHANCE_YOUR_CALM, PROTOCOL_ERROR, RawH2,
                      connect, h2c_server, raw_connect)

pytestmark = [pytest.mark.sluice_only,
              pytest.mark.plain_only("chooses its own transport (h2c)")]

MAX_STREAMS = 10
SEND_TIMEOUT = 2
MiB = 1024 * 1024
RSS_GROWTH_KIB = 64 * 1024   # what a flood may add to the worker's RSS

ATTACK_MODES = [
    pytest.param(("wsgi_app:app", dict(WSGI_MODES["pump"], name="pump")),
                 id="wsgi-pump"),
    pytest.param(("wsgi_app:app", dict(WSGI_MODES["inline"],
                                       name="inline")), id="wsgi-inline"),
    pytest.param(("asgi_app:app", dict(ASGI_MODES["pump"], name="pump")),
                 id="asgi-pump"),
    pytest.param(("asgi_app:app", dict(ASGI_MODES["inline"],
                                       name="inline")), id="asgi-inline"),
]


@pytest.fixture(scope="module", params=ATTACK_MODES)
def server(request, tmp_path_factory):
    app, mode = request.param
    workdir = tmp_path_factory.mktemp("h2-attacks-%s-%s" % (
        app.split("_")[0], mode["name"]))
    s = h2c_server(workdir, mode, app, [
        "--http2-max-concurrent-streams", str(MAX_STREAMS),
        "--send-timeout", str(SEND_TIMEOUT)])
    yield from helpers.serving(s)


@pytest.fixture
def worker(server):
    """The worker's pid before the attack; after it, the same worker must
    answer a new connection."""
    pids = server.wait_workers(1)
    yield pids[0]
    assert_still_serving(server, pids)


def assert_still_serving(server, pids, timeout=10):
    with connect(server, timeout=timeout) as c:
        r = c.get("/hello", timeout=timeout)
        assert r.status == 200 and bytes(r.body) == b"hello\n", r
    assert server.worker_pids() == pids, \
        "the worker changed: %s, then %s\n%s" % (
            pids, server.worker_pids(), server.error_log_text()[-2000:])


def outcome(name, sent, how, raw):
    """What an attack did, for the log of a run with -s (or -rP)."""
    print("%s: sent %d bytes (%s); %s" % (name, sent, how, raw.summary(4)))


def wsgi(server):
    return server.app.startswith("wsgi")


def rss(pid):
    return helpers.vm_rss_kib(pid)


def ended(raw, sid):
    """How the server ended stream SID, or the connection: a word, or
    None while neither happened."""
    if raw.status(sid) is not None:
        return "status %d" % raw.status(sid)
    if sid in raw.resets:
        return "RST_STREAM %d" % raw.resets[sid]
    if raw.goaways:
        return "GOAWAY %d" % raw.goaways[0].error_code
    if raw.closed and not raw.buf:
        return "closed"
    return None


# ------------------------------------------------------------ rapid reset


def test_rapid_reset_cve_2023_44487(server, worker):
    """20000 streams, each HEADERS then RST_STREAM(CANCEL) at once."""
    n = 20000
    mark = len(server.calls())
    with raw_connect(server) as raw:
        frames = bytearray()
        for _ in range(n):
            sid = raw.sid()
            frames += raw.headers_frame(sid, raw.request_block(
                "/hello?rapidreset"))
            frames += raw.rst_frame(sid, CANCEL)
        sent, how = raw.flood(bytes(frames), 20)
        goaway = raw.wait_end(timeout=20)
        outcome("rapid reset", sent, how, raw)
        calls = len([l for l in server.calls()[mark:]
                     if "rapidreset" in l])
        if goaway is not None:
            assert goaway.error_code == ENHANCE_YOUR_CALM, \
                "GOAWAY with code %d, not ENHANCE_YOUR_CALM: %s" % (
                    goaway.error_code, raw.summary())
    if wsgi(server):  # asgi_app logs no call for /hello
        assert calls < n, "the app ran all %d reset streams" % n


# ------------------------------------------------------- CONTINUATION flood


def test_continuation_flood_cve_2024_27316(server, worker):
    """A HEADERS frame without END_HEADERS, then 4096 CONTINUATION frames
    of 4 KiB of new header fields each, never ending the block."""
    before = rss(worker)
    with raw_connect(server) as raw:
        sid = raw.sid()
        frames = bytearray(raw.headers_frame(
            sid, raw.request_block("/hello?contflood"), end_headers=False))
        for i in range(4096):
            # literal fields without indexing: the server's table stays
            # as it was, so each frame is a fresh 4 KiB of headers
            block = b"".join(b"\x00\x07x-flood" + encode_len(
                100) + b"v" * 100 for _ in range(40))
            frames += raw.continuation_frame(sid, block)
        sent, how = raw.flood(bytes(frames), 15)
        raw.wait(lambda: ended(raw, sid), 20,
                 "the end of the flooded stream or connection")
        got = ended(raw, sid)
        outcome("CONTINUATION flood", sent, how, raw)
        assert got == "GOAWAY %d" % ENHANCE_YOUR_CALM, got
        grown = rss(worker) - before
    assert not server.called("contflood"), "the app was called"
    assert grown < RSS_GROWTH_KIB, "the worker grew %d KiB" % grown


def encode_len(n):
    """An HPACK string length (7-bit prefix, no Huffman)."""
    if n < 127:
        return bytes([n])
    out, n = bytearray([127]), n - 127
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    out.append(n)
    return bytes(out)


# ------------------------------------------------------------ HPACK bomb


def test_hpack_bomb(server, worker):
    """A 4000-byte field added to the dynamic table, then 60000 one-byte
    references to it: 240 MB of header list from 64 KB on the wire."""
    before = rss(worker)
    with raw_connect(server) as raw:
        sid = raw.sid()
        block = raw.request_block("/hello?hpackbomb")
        # literal with incremental indexing, new name: index 62 after it
        block += b"\x40\x06x-bomb" + encode_len(4000) + b"a" * 4000
        block += b"\xbe" * 60000
        frames = bytearray()
        step = 16384
        pieces = [block[i:i + step] for i in range(0, len(block), step)]
        frames += raw.headers_frame(sid, pieces[0], end_headers=False)
        for i, p in enumerate(pieces[1:], 1):
            frames += raw.continuation_frame(sid, p,
                                             end_headers=i == len(pieces) - 1)
        sent, how = raw.flood(bytes(frames), 20)
        raw.wait(lambda: ended(raw, sid), 20,
                 "the end of the bombed stream or connection")
        got = ended(raw, sid)
        outcome("HPACK bomb", sent, how, raw)
        assert got == "GOAWAY %d" % ENHANCE_YOUR_CALM, got
        grown = rss(worker) - before
    assert not server.called("hpackbomb"), "the app was called"
    assert grown < RSS_GROWTH_KIB, "the worker grew %d KiB" % grown


# ------------------------------------------------------------ floods


def describe(frame):
    return {4: "SETTINGS", 6: "PING"}[frame[3]]


def ack_flood(server, frame, n):
    """N copies of FRAME (each asks for an ACK) from a client that reads
    nothing meanwhile (a 4 KiB receive buffer): what the server did."""
    with raw_connect(server, rcvbuf=4096) as raw:
        sent, how = raw.flood(frame * n, 20)
        raw.auto_ack = False
        goaway = raw.wait_end(timeout=20)
        outcome("%s flood" % describe(frame), sent, how, raw)
        return sent, how, goaway, raw.summary()


def test_settings_flood(server, worker):
    sent, how, goaway, summary = ack_flood(server, RawH2.settings_frame(),
                                           200000)
    # GOAWAY (ENHANCE_YOUR_CALM is nghttp2's word for it) or close:
    # wait_end() failed the test otherwise
    assert goaway is not None, summary
    assert goaway.error_code == ENHANCE_YOUR_CALM, summary


def test_ping_flood(server, worker):
    sent, how, goaway, summary = ack_flood(server, RawH2.ping_frame(),
                                           200000)
    assert goaway is not None, summary
    assert goaway.error_code == ENHANCE_YOUR_CALM, summary


def test_empty_data_flood(server, worker):
    """200000 empty DATA frames on a POST: the worker answers another
    connection while it takes them; the flooding stream is answered once
    it ends, unless the server ended the connection first."""
    with raw_connect(server) as raw:
        sid = raw.sid()
        raw.send(raw.headers_frame(sid, raw.request_block(
            "/echo?emptydata", "POST"), end_stream=False))
        flood = RawH2.data_frame(sid) * 200000
        t0 = time.monotonic()
        sent, how = raw.flood(flood, 20)
        # meanwhile (the server may still be reading the flood)
        with connect(server) as c:
            assert c.get("/hello").status == 200
        if how == "all":
            raw.send(raw.data_frame(sid, b"", end_stream=True))
        raw.wait(lambda: ended(raw, sid), 20,
                 "an answer to the flooded stream, or the connection's end")
        got = ended(raw, sid)
        took = time.monotonic() - t0
        outcome("empty DATA flood", sent, how, raw)
        assert got == "GOAWAY %d" % ENHANCE_YOUR_CALM, got
        if got == "status 200":
            raw.wait(lambda: sid in raw.ended, 10, "the stream's end")
            assert raw.data.get(sid, b"") == b"", raw.summary()
    assert took < 20, "the flood took %.1fs to get through" % took


# ------------------------------------------------------------ zero window


def test_zero_window_stall(server, worker):
    """INITIAL_WINDOW_SIZE 0 and three 8 MiB responses asked for: the
    server can send the heads, no data. Within --send-timeout (2 s) and a
    margin each stream is reset or the connection closed; another
    connection is served meanwhile."""
    size = 8 * MiB
    path = ("/big?size=%d" if wsgi(server) else "/large?size=%d") % size
    with raw_connect(server, settings={0x4: 0}) as raw:
        sids = [raw.sid() for _ in range(3)]
        for sid in sids:
            raw.send(raw.headers_frame(sid, raw.request_block(path)))
        t0 = time.monotonic()
        with connect(server, timeout=SEND_TIMEOUT + 10) as c:
            r = c.get("/hello", timeout=SEND_TIMEOUT + 10)
            assert r.status == 200
        raw.wait(lambda: all(s in raw.resets for s in sids) or
                 raw.goaways or (raw.closed and not raw.buf),
                 SEND_TIMEOUT + 8, "the stalled streams' end")
        took = time.monotonic() - t0
        outcome("zero window (%.1fs)" % took, 0, "-", raw)
        for sid in sids:
            assert len(raw.data.get(sid, b"")) == 0, \
                "DATA sent past a zero window on stream %d" % sid
            assert sid not in raw.ended, \
                "stream %d ended without its body" % sid
    assert took >= SEND_TIMEOUT - 0.5, \
        "stalled streams ended %.1fs in, before --send-timeout" % took


# ------------------------------------------------------------ streams


def test_too_many_streams(server, worker):
    """Fifteen streams at once on a connection whose client acknowledged
    SETTINGS_MAX_CONCURRENT_STREAMS 10: GOAWAY PROTOCOL_ERROR whose last
    stream is the tenth, and none of the five past it answered."""
    with raw_connect(server) as raw:
        assert raw.server_settings.get(0x3) == MAX_STREAMS, \
            raw.server_settings
        sids = [raw.sid() for _ in range(MAX_STREAMS + 5)]
        frames = b"".join(raw.headers_frame(sid, raw.request_block(
            "/slow/manystreams?t=0.2")) for sid in sids)
        raw.send(frames)
        first, extra = sids[:MAX_STREAMS], sids[MAX_STREAMS:]
        raw.wait(lambda: all(s in raw.resets or s in raw.ended
                             for s in sids) or raw.goaways,
                 30, "an answer or a reset on every stream")
        outcome("too many streams", len(frames), "-", raw)
        assert raw.goaways, raw.summary()
        goaway = raw.goaways[0]
        assert goaway.error_code == PROTOCOL_ERROR, raw.summary()
        assert goaway.last_stream_id == first[-1], raw.summary()
        assert all(raw.status(s) is None for s in extra), raw.summary()
