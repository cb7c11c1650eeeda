"""WebSockets (issue 10) with independent clients: Debian's python3-websockets
and Node's ws (node-ws), and a raw RFC 6455 client (ws_helpers.WsRaw) for
what a client library will not do.

Apps: tests/apps/ws_extra_app.py (raw ASGI), and the /ws routes of
asgi_starlette.py and asgi_fastapi.py. Every test runs in pump and inline
mode (conftest.ASGI_EXECUTOR_PARAMS).

SLUICE_WS_TARGET=uvicorn or uvicorn-wsproto runs the same tests against
Debian's uvicorn (--ws websockets / wsproto) instead of sluice: that is how
the tests were checked before sluice served WebSockets. Tests of what only
sluice promises (exact close reasons, the denial-response extension,
options uvicorn lacks) skip there, as does inline mode.
"""

import asyncio
import json
import subprocess
import threading
import time
import zlib
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatusCode

import helpers
from conftest import ASGI_EXECUTOR_PARAMS
from ws_helpers import (OP_BIN, OP_CONT, OP_PING, OP_PONG, OP_TEXT,
                        ON_SLUICE, WS_TARGET, WsRaw, WsServer, ws_connect,
                        ws_deflate, ws_frame,
                        ws_node_env, ws_run, ws_serve, ws_start,
                        sluice_ws_only)

E2E = Path(__file__).resolve().parent
SIZES = [0, 125, 126, 65536, 1 << 20]
MAX_SIZE_TIGHT = 4096
PING = 0.4  # --ws-ping-interval and --ws-ping-timeout of the tight server



def not_on_wsproto(why):
    """What Debian's uvicorn 0.17 with --ws wsproto gets wrong, seen when
    these tests were checked against it; those tests skip there."""
    return pytest.mark.skipif(WS_TARGET == "uvicorn-wsproto",
                              reason="uvicorn --ws wsproto: " + why)


NO_CLOSE_FRAME = not_on_wsproto("drops the TCP connection without a close "
                                "frame on a protocol error")


@pytest.fixture(scope="module", params=ASGI_EXECUTOR_PARAMS)
def srv(request, tmp_path_factory):
    """ws_extra_app with the defaults."""
    s = ws_start(tmp_path_factory, "ws", request.param, "ws_extra_app:app")
    yield from ws_serve(s)


@pytest.fixture(scope="module", params=ASGI_EXECUTOR_PARAMS)
def tight(request, tmp_path_factory):
    """ws_extra_app with a small --ws-max-size, fast pings and no
    permessage-deflate."""
    s = ws_start(tmp_path_factory, "wstight", request.param,
                 "ws_extra_app:app",
                 ["--ws-max-size", str(MAX_SIZE_TIGHT),
                  "--ws-ping-interval", str(PING),
                  "--ws-ping-timeout", str(PING),
                  "--ws-per-message-deflate", "false"])
    yield from ws_serve(s)


@pytest.fixture(scope="module", params=ASGI_EXECUTOR_PARAMS)
def star(request, tmp_path_factory):
    s = ws_start(tmp_path_factory, "wsstar", request.param,
                 "asgi_starlette:app")
    yield from ws_serve(s)


@pytest.fixture(scope="module", params=ASGI_EXECUTOR_PARAMS)
def fast(request, tmp_path_factory):
    s = ws_start(tmp_path_factory, "wsfast", request.param,
                 "asgi_fastapi:app")
    yield from ws_serve(s)


def text_of(size):
    """SIZE bytes of UTF-8 text, two-byte characters included."""
    s = "abc\u00e9" * (size // 5)
    return s + "x" * (size - len(s.encode()))


def bytes_of(size):
    return bytes((i * 7 + 3) & 0xFF for i in range(256)) * (size // 256) + \
        bytes(size % 256)


def connect(server, path, **kw):
    kw.setdefault("max_size", 4 << 20)
    kw.setdefault("open_timeout", 10)
    kw.setdefault("close_timeout", 5)
    return ws_connect(server.url(path), **kw)


async def bounded(coro, t=20):
    return await asyncio.wait_for(coro, t)


# ---------------------------------------------------------------- echo

@pytest.mark.parametrize("kind", ["text", "binary"])
@pytest.mark.parametrize("size", SIZES)
def test_echo_python(srv, kind, size):
    data = text_of(size) if kind == "text" else bytes_of(size)
    assert len(data.encode() if kind == "text" else data) == size

    async def go():
        async with connect(srv, "/echo") as ws:
            await ws.send(data)
            got = await bounded(ws.recv())
            await ws.close()
            return got
    got = ws_run(go())
    assert type(got) is type(data) and got == data


def test_echo_node(srv):
    p = subprocess.run(
        ["node", str(E2E / "ws_client.js"), "echo", srv.url("/echo"),
         ",".join(map(str, SIZES))],
        env=ws_node_env(), capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, (p.stdout, p.stderr)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert [(r["kind"], r["size"], r["ok"]) for r in out["results"]] == \
        [(k, n, True) for n in SIZES for k in ("text", "binary")], out
    assert out["pong"] is True
    assert out["close"][0] == 1000, out


def test_echo_raw_fragmented_with_ping_between(srv):
    # a text message in three frames, a ping between two of them, a
    # two-byte character split across frames: one message comes back
    with WsRaw.to(srv, "/echo") as c:
        assert c.status == 101
        msg = "caf\u00e9 au lait".encode()
        c.send_frame(OP_TEXT, msg[:4], fin=False)
        c.send_frame(OP_PING, b"between")
        c.send_frame(OP_CONT, msg[4:8], fin=False)
        c.send_frame(OP_CONT, msg[8:], fin=True)
        fin, _, op, payload = c.recv_frame()
        assert (op, payload) == (OP_PONG, b"between")
        op, payload, _ = c.recv_message()
        assert (op, payload) == (OP_TEXT, msg)
        c.send_close(1000)
        assert c.recv_close() == (1000, "")
        c.expect_eof()


# ---------------------------------------------------------------- handshake

def test_subprotocol_negotiated(srv):
    async def go(protocols):
        async with connect(srv, "/proto", subprotocols=protocols) as ws:
            info = json.loads(await bounded(ws.recv()))
            return ws.subprotocol, info
    chosen, info = ws_run(go(["nope", "chat.v1", "chat.v2"]))
    # the app picks by its own preference among what was offered
    assert chosen == "chat.v2"
    assert info == {"subprotocols": ["nope", "chat.v1", "chat.v2"],
                    "chosen": "chat.v2"}
    chosen, info = ws_run(go(None))
    assert chosen is None
    assert info == {"subprotocols": [], "chosen": None}


def test_subprotocol_header_raw(srv):
    with WsRaw.to(srv, "/proto",
                  headers=[("Sec-WebSocket-Protocol", "x, chat.v1")]) as c:
        assert c.status == 101
        assert c.header("Sec-WebSocket-Protocol") == "chat.v1"
        _, payload, _ = c.recv_message()
        assert json.loads(payload)["subprotocols"] == ["x", "chat.v1"]


def test_close_before_accept_is_403(srv):
    with WsRaw.to(srv, "/refuse") as c:
        assert c.status == 403

    async def go():
        async with connect(srv, "/refuse"):
            pass
    with pytest.raises(InvalidStatusCode) as e:
        ws_run(go())
    assert e.value.status_code == 403


@sluice_ws_only
def test_denial_response(srv):
    # websocket.http.response: the client gets the app's status, headers
    # and body instead of an upgrade (uvicorn 0.17 lacks the extension)
    with WsRaw.to(srv, "/deny") as c:
        assert c.status == 401
        assert c.header("WWW-Authenticate") == "Token"
        assert c.body == b"denied: no token\n"

    async def go():
        async with connect(srv, "/deny"):
            pass
    with pytest.raises(InvalidStatusCode) as e:
        ws_run(go())
    assert e.value.status_code == 401


# ---------------------------------------------------------------- close codes

def test_client_close_code_reaches_app(srv):
    async def go():
        async with connect(srv, "/watch?m=cc") as ws:
            await ws.send("hi")
            await ws.close(4000, "client bye")
            return ws.close_code
    assert ws_run(go()) == 4000  # the server echoed the code
    line = srv.wait_for_call("WATCH cc disconnect")[0]
    assert line.startswith("WATCH cc disconnect 4000"), line
    assert srv.called("WATCH cc got 'hi'")


@not_on_wsproto("never tells the app (it waits in receive() for ever, and "
                "the server then does not exit on SIGTERM)")
def test_client_vanishing_reaches_app(srv):
    # no close frame, just the TCP connection gone: the app's receive()
    # returns a disconnect with 1006 (abnormal closure), it does not hang
    c = WsRaw.to(srv, "/watch?m=gone")
    c.send_text("here")
    srv.wait_for_call("WATCH gone got 'here'")
    c.abort()
    line = srv.wait_for_call("WATCH gone disconnect")[0]
    assert line.startswith("WATCH gone disconnect 1006"), line


@sluice_ws_only
def test_client_close_reason_reaches_app(srv):
    # ASGI 2.3's websocket.disconnect has the reason (uvicorn 0.17: no)
    async def go():
        async with connect(srv, "/watch?m=cr") as ws:
            await ws.close(4000, "client bye")
    ws_run(go())
    line = srv.wait_for_call("WATCH cr disconnect")[0]
    assert line == "WATCH cr disconnect 4000 'client bye'", line


def test_app_close_code_reaches_client(srv):
    async def go():
        async with connect(srv, "/closeme?code=4001&reason=app%20bye") as ws:
            with pytest.raises(ConnectionClosed):
                await bounded(ws.recv())
            return ws.close_code, ws.close_reason
    code, reason = ws_run(go())
    assert code == 4001
    if ON_SLUICE:
        assert reason == "app bye"


@not_on_wsproto("closes the socket without waiting for the client's close "
                "frame (a reset when it arrives)")
def test_app_close_raw_handshake(srv):
    # the server's close frame first, then our answer, then its EOF
    with WsRaw.to(srv, "/closeme?code=4001&reason=app%20bye") as c:
        code, reason = c.recv_close(skip_data=False)
        assert code == 4001
        if ON_SLUICE:
            assert reason == "app bye"
        c.send_close(code)
        assert c.expect_eof() == "eof"


# ---------------------------------------------------------------- ping/pong

def test_client_ping_answered(srv):
    async def go():
        async with connect(srv, "/echo") as ws:
            waiter = await ws.ping(b"py-ping")
            await bounded(waiter, 5)
            await ws.send("still there")
            return await bounded(ws.recv())
    assert ws_run(go()) == "still there"
    with WsRaw.to(srv, "/echo") as c:
        c.send_frame(OP_PING, b"raw-ping")
        fin, _, op, payload = c.recv_frame()
        assert (fin, op, payload) == (True, OP_PONG, b"raw-ping")


@pytest.mark.skipif(WS_TARGET == "uvicorn-wsproto",
                    reason="uvicorn's wsproto side never pings")
def test_server_pings_and_drops_the_silent(tight):
    with WsRaw.to(tight, "/echo", timeout=4 * PING + 5) as c:
        # answered pings keep the connection: three in a row
        for _ in range(3):
            t0 = time.monotonic()
            fin, _, op, payload = c.recv_frame()
            assert op == OP_PING, op
            assert time.monotonic() - t0 < 2 * PING + 1
            c.send_frame(OP_PONG, payload)
        c.send_text("alive")
        assert c.recv_message()[:2] == (OP_TEXT, b"alive")
        # now silent: a close 1011 within interval + timeout (+ slack)
        t0 = time.monotonic()
        code, _ = c.recv_close(answer_pings=False)
        assert code == 1011
        assert time.monotonic() - t0 < 2 * PING + 2
        # a peer that answers no ping will not answer the close either: cut
        # at once, or after the server's bounded wait for the close (5 s on
        # sluice); either way, no reset
        assert c.expect_eof(timeout=8) == "eof"


# ---------------------------------------------------------------- protocol errors

def answer_close_then_eof(c, code):
    """Answer the server's close as a client library does; then the TCP
    connection ends. A reset is allowed: a server that failed the
    connection may have closed its socket before our answer arrived."""
    c.send_close(code)
    assert c.expect_eof() in ("eof", "reset")


@NO_CLOSE_FRAME
@pytest.mark.parametrize("frame", [
    dict(opcode=OP_TEXT, payload=b"naked", mask=False),
    dict(opcode=OP_TEXT, payload=b"\xff\xfe"),
], ids=["unmasked", "bad-utf8"])
def test_failed_connection_is_dropped_at_once(srv, frame):
    # RFC 6455 §7.1.7: on a protocol error the server fails the
    # connection: its close frame, then the TCP connection closed, without
    # waiting for (or processing) an answer from the client (§7.1.1)
    with WsRaw.to(srv, "/echo") as c:
        c.send_frame(**frame)
        c.recv_close()
        t0 = time.monotonic()
        assert c.expect_eof(timeout=2) == "eof"
        assert time.monotonic() - t0 < 2



@NO_CLOSE_FRAME
def test_unmasked_frame_is_1002(srv):
    with WsRaw.to(srv, "/echo") as c:
        c.send_frame(OP_TEXT, b"naked", mask=False)
        assert c.recv_close()[0] == 1002
        answer_close_then_eof(c, 1002)


@NO_CLOSE_FRAME
def test_reserved_bits_are_1002(tight):
    # no extension negotiated on this server: RSV1 means nothing
    with WsRaw.to(tight, "/echo") as c:
        c.send_frame(OP_TEXT, b"x", rsv=4)
        assert c.recv_close()[0] == 1002
        answer_close_then_eof(c, 1002)


@NO_CLOSE_FRAME
@pytest.mark.parametrize("frames", [
    [(OP_TEXT, b"\xff\xfe", True)],
    # a character split over two frames whose second half is wrong
    [(OP_TEXT, b"ok \xe2\x82", False), (OP_CONT, b"\x28", True)],
], ids=["whole", "across-fragments"])
def test_bad_utf8_is_1007(srv, frames):
    with WsRaw.to(srv, "/echo") as c:
        for op, data, fin in frames:
            c.send_frame(op, data, fin=fin)
        assert c.recv_close()[0] == 1007
        answer_close_then_eof(c, 1007)


@not_on_wsproto("never answers a message over --ws-max-size")
def test_oversize_message_is_1009(tight):
    with WsRaw.to(tight, "/echo") as c:
        c.send_frame(OP_BIN, bytes(MAX_SIZE_TIGHT))  # at the limit: fine
        op, payload, _ = c.recv_message()
        assert (op, len(payload)) == (OP_BIN, MAX_SIZE_TIGHT)
        c.send_frame(OP_BIN, bytes(MAX_SIZE_TIGHT + 1))
        assert c.recv_close(answer_pings=True)[0] == 1009
        answer_close_then_eof(c, 1009)


@sluice_ws_only
def test_oversize_fragmented_is_1009(tight):
    # each fragment is small; the message they add up to is not
    with WsRaw.to(tight, "/echo") as c:
        for _ in range(MAX_SIZE_TIGHT // 1024):
            c.send_frame(OP_BIN if _ == 0 else OP_CONT, bytes(1024),
                         fin=False)
        c.send_frame(OP_CONT, b"!", fin=True)
        assert c.recv_close(answer_pings=True)[0] == 1009
        answer_close_then_eof(c, 1009)


# ---------------------------------------------------------------- memory

FLOOD_N = 1024
FLOOD_SIZE = 65536  # 64 MiB in all
FLOOD_RSS_BOUND_KIB = 24 * 1024


def flood_progress(server, mark):
    sent = 0
    for line in server.called("FLOOD %s " % mark):
        parts = line.split()
        if parts[2] in ("sent", "done"):
            sent = max(sent, int(parts[3]))
    return sent


def test_slow_reader_memory_bounded(srv):
    # The app sends 64 MiB to a client that reads nothing. A server that
    # keeps the app waiting while the client does not read stays within a
    # few MiB; one that buffers what the app sends grows by about 64 MiB.
    pid = srv.ws_worker_pid()
    with WsRaw.to(srv, "/flood?m=slow&n=%d&size=%d" % (FLOOD_N, FLOOD_SIZE),
                  rcvbuf=65536) as c:
        base = helpers.vm_rss_kib(pid)
        c.send_text("go")
        srv.wait_for_call("FLOOD slow start")
        # until the app stops getting anywhere (polled: two equal samples
        # a quarter of a second apart), bounded
        last, end = -1, time.monotonic() + 30
        while time.monotonic() < end:
            now = flood_progress(srv, "slow")
            if now == last:
                break
            last = now
            time.sleep(0.25)
        else:
            raise AssertionError("the app never stalled (at %d)" % last)
        grown = helpers.vm_rss_kib(pid) - base
        print("flood: app sent %d of %d, worker RSS +%d KiB" % (last, FLOOD_N, grown))
        assert not srv.called("FLOOD slow done")
        assert last < FLOOD_N, last
        assert helpers.sanitized() or grown < FLOOD_RSS_BOUND_KIB, \
            "worker RSS grew %d KiB while the client did not read (app " \
            "sent %d of %d messages)" % (grown, last, FLOOD_N)
        # then read it all: nothing lost, in order
        c.sock.settimeout(20)
        for i in range(FLOOD_N):
            op, payload, _ = c.recv_message()
            assert (op, len(payload)) == (OP_BIN, FLOOD_SIZE), i
        srv.wait_for_call("FLOOD slow done %d" % FLOOD_N)


def test_app_not_receiving_memory_bounded(srv):
    # The other way: a client sends 64 MiB while the app receives nothing.
    # The server queues a bounded number of messages and then stops
    # reading, so the client's sends block; nothing is lost once the app
    # receives again.
    pid = srv.ws_worker_pid()
    c = WsRaw.to(srv, "/hold?m=in")
    srv.wait_for_call("HOLD in holding")
    base = helpers.vm_rss_kib(pid)
    frame = ws_frame(OP_BIN, bytes_of(FLOOD_SIZE))
    sent = [0]
    failed = []

    def sender():
        try:
            for _ in range(FLOOD_N):
                c.sock.sendall(frame)
                sent[0] += 1
        except OSError as e:
            failed.append(e)
    c.sock.settimeout(30)
    t = threading.Thread(target=sender, daemon=True)
    t.start()
    try:
        last, end = -1, time.monotonic() + 30
        while time.monotonic() < end and t.is_alive():
            if sent[0] == last:
                break
            last = sent[0]
            time.sleep(0.25)
        grown = helpers.vm_rss_kib(pid) - base
        print("hold: client sent %d of %d, worker RSS +%d KiB"
              % (last, FLOOD_N, grown))
        assert t.is_alive(), "all %d messages were taken while the app " \
            "received nothing" % FLOOD_N
        assert helpers.sanitized() or grown < FLOOD_RSS_BOUND_KIB, \
            "worker RSS grew %d KiB while the app received nothing " \
            "(client sent %d of %d messages)" % (grown, last, FLOOD_N)
        assert srv.get("/release?m=in").body == b"released"
        t.join(30)
        assert not t.is_alive() and not failed, failed
        c.send_close(1000)
        c.recv_close()
    finally:
        c.close()
        t.join(5)
    line = srv.wait_for_call("HOLD in got")[0]
    assert line == "HOLD in got %d %d" % (FLOOD_N, FLOOD_N * FLOOD_SIZE)


# ---------------------------------------------------------------- many sockets

def test_200_concurrent_sockets(srv):
    n = 200

    async def one(i, opened, go):
        async with connect(srv, "/echo", compression=None) as ws:
            opened.append(i)
            await go.wait()
            await ws.send("hello %d" % i)
            return await bounded(ws.recv(), 30)

    async def main():
        opened, go = [], asyncio.Event()
        tasks = [asyncio.ensure_future(one(i, opened, go)) for i in range(n)]
        # every socket open at once before any message is sent
        end = time.monotonic() + 30
        while len(opened) < n and time.monotonic() < end:
            done = [t for t in tasks if t.done() and t.exception()]
            if done:
                break
            await asyncio.sleep(0.02)
        count = len(opened)
        go.set()
        res = await asyncio.gather(*tasks, return_exceptions=True)
        return count, res
    count, res = ws_run(main())
    errors = [r for r in res if isinstance(r, BaseException)]
    assert count == n, (count, errors[:3])
    assert res == ["hello %d" % i for i in range(n)], errors[:3]


# ---------------------------------------------------------------- frameworks

def test_starlette_route(star):
    async def go():
        async with connect(star, "/ws?name=st", subprotocols=["star"]) as ws:
            greeting = await bounded(ws.recv())
            await ws.send("one")
            a = await bounded(ws.recv())
            await ws.send(b"\x00\x01")
            b = await bounded(ws.recv())
            await ws.close(4002)
            return ws.subprotocol, greeting, a, b
    assert ws_run(go()) == ("star", "hello st", "starlette echo: one",
                            b"\x00\x01\x00\x01")
    star.wait_for_call("STARLETTE ws st disconnect 4002")


def test_fastapi_route(fast):
    async def go(path):
        async with connect(fast, path) as ws:
            await ws.send(json.dumps({"n": 1}))
            first = json.loads(await bounded(ws.recv()))
            await ws.send(json.dumps({"n": 2}))
            second = json.loads(await bounded(ws.recv()))
            return first, second
    first, second = ws_run(go("/ws/lobby?token=t"))
    assert first == {"room": "lobby", "echo": {"n": 1}, "count": 1}
    assert second == {"room": "lobby", "echo": {"n": 2}, "count": 2}
    fast.wait_for_call("FASTAPI ws lobby disconnect")
    # a dependency that refuses: closed before accept, so a 403
    with pytest.raises(InvalidStatusCode) as e:
        ws_run(go("/ws/lobby?token=wrong"))
    assert e.value.status_code == 403


# ---------------------------------------------------------------- deflate

def test_deflate_negotiated_python(srv):
    data = "compress me " * 50000  # 600 kB, very compressible

    async def go():
        async with connect(srv, "/echo") as ws:
            ext = ws.response_headers.get("Sec-WebSocket-Extensions", "")
            await ws.send(data)
            return ext, await bounded(ws.recv())
    ext, got = ws_run(go())
    assert "permessage-deflate" in ext
    assert got == data


def test_deflate_used_both_ways_raw(srv):
    with WsRaw.to(srv, "/echo", headers=[
            ("Sec-WebSocket-Extensions",
             "permessage-deflate; client_max_window_bits")]) as c:
        assert c.status == 101
        ext = c.header("Sec-WebSocket-Extensions", "")
        assert ext.split(";")[0].strip() == "permessage-deflate", ext
        inflater = zlib.decompressobj(wbits=-15)
        for text in ("a" * 65536, "b" * 65536 + "end"):
            c.send_frame(OP_TEXT, ws_deflate(text.encode()), rsv=4)
            before = c.wire_in
            op, payload, compressed = c.recv_message()
            assert op == OP_TEXT and compressed, "reply not compressed"
            assert c.wire_in - before < 2048
            # one inflater over the messages: right with or without the
            # server's context takeover
            got = inflater.decompress(payload + b"\x00\x00\xff\xff")
            assert got == text.encode()
        # an uncompressed message is fine too (RSV1 clear)
        c.send_text("plain")
        op, payload, compressed = c.recv_message()
        data = inflater.decompress(payload + b"\x00\x00\xff\xff") \
            if compressed else payload
        assert data == b"plain"


def test_deflate_off(tight):
    with WsRaw.to(tight, "/echo", headers=[
            ("Sec-WebSocket-Extensions", "permessage-deflate")]) as c:
        assert c.status == 101
        assert c.header("Sec-WebSocket-Extensions") is None
        c.send_text("x" * 1000)
        op, payload, compressed = c.recv_message()
        assert (op, payload, compressed) == (OP_TEXT, b"x" * 1000, False)


@sluice_ws_only
def test_deflate_bomb_is_1009(srv):
    # a small frame that inflates far past the 16 MiB default limit
    with WsRaw.to(srv, "/echo", headers=[
            ("Sec-WebSocket-Extensions", "permessage-deflate")]) as c:
        bomb = ws_deflate(bytes(32 << 20))
        assert len(bomb) < 64 << 10
        c.send_frame(OP_BIN, bomb, rsv=4)
        assert c.recv_close(answer_pings=True)[0] == 1009
        answer_close_then_eof(c, 1009)
