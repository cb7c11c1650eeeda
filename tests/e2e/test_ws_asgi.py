"""ASGI's websocket scope with a raw app (tests/apps/ws_app.py), driven by
an independent client, Debian's python3-websockets (its asyncio client:
the sync one is newer than Debian's 10.4), and by raw sockets where the
bytes on the wire are the point (denials): the scope, the events both
ways, subprotocols and extra headers, close codes, denial responses,
every misuse the app can commit and what the client and the log see.

Every test runs in pump mode and inline mode, each on uvloop and on
asyncio's own loop (conftest.ASGI_MODES).
"""

import asyncio
import base64
import json
import os
import signal

import pytest
import websockets
import websockets.exceptions

import helpers
from conftest import ASGI_MODE_PARAMS, start_mode_server
from ws_helpers import ws_connect, ws_url

pytestmark = pytest.mark.sluice_only

TIMEOUT = 10


@pytest.fixture(scope="module")
def server(asgi_mode, tmp_path_factory):
    with start_mode_server(tmp_path_factory, "ws-asgi", asgi_mode,
                           "ws_app:app", args=["--root-path", "/r"]) as s:
        yield s


def run(coro):
    """Run one client coroutine, bounded in time."""
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


def connect(server, path, **kw):
    kw.setdefault("ping_interval", None)
    kw.setdefault("open_timeout", TIMEOUT)
    kw.setdefault("close_timeout", TIMEOUT)
    return ws_connect(ws_url(server, path), **kw)


async def closed_with(ws):
    """Read until the server's close; (code, reason, messages read)."""
    got = []
    try:
        while True:
            got.append(await ws.recv())
    except websockets.exceptions.ConnectionClosed:
        pass
    await ws.wait_closed()
    return ws.close_code, ws.close_reason, got


def handshake(server, path, extra=()):
    """A raw handshake request for PATH; the response and what follows."""
    key = base64.b64encode(os.urandom(16)).decode()
    c = server.connect()
    r = c.request("GET", path, headers=[
        ("Connection", "Upgrade"), ("Upgrade", "websocket"),
        ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13"),
        *extra])
    return c, r


# ---------------------------------------------------------------- scope

def test_scope(server):
    async def go():
        async with connect(server, "/scope?x=1&y=%20",
                           subprotocols=["chat", "superchat"],
                           extra_headers=[("X-Mixed-Case", "Value")]) as ws:
            return json.loads(await ws.recv()), ws.local_address

    s, local = run(go())
    assert s["type"] == "websocket"
    assert s["asgi"] == {"version": "3.0", "spec_version": "2.4"}
    assert s["http_version"] == "1.1"
    assert s["scheme"] == helpers.url_scheme("ws")
    assert s["path"] == "/scope"
    assert s["raw_path"] == "/scope"
    assert s["query_string"] == "x=1&y=%20"
    assert s["root_path"] == "/r"
    assert s["subprotocols"] == ["chat", "superchat"]
    ext = dict(s["extensions"])
    tls = ext.pop("tls", None)
    assert ext == {"websocket.http.response": {}}
    # the TLS extension exactly when the connection is TLS (TLS mode)
    assert (tls is not None) == helpers.TLS, tls
    assert ["x-mixed-case", "Value"] in s["headers"]
    assert ["upgrade", "websocket"] in s["headers"]
    assert s["client"] == [local[0], local[1]]
    assert s["server"] == [server.host, server.port]
    assert s["state"] == {"greeting": "hello"}
    assert "method" not in s


def test_lifespan_state(server):
    async def go():
        async with connect(server, "/state") as ws:
            return json.loads(await ws.recv())

    assert run(go()) == {"greeting": "hello"}


# ---------------------------------------------------------------- messages

@pytest.mark.parametrize("size", [0, 125, 126, 65536, 1024 * 1024])
def test_echo(server, size):
    text = "é" * (size // 2) + "x" * (size % 2)
    data = bytes(i % 251 for i in range(size))

    async def go():
        async with connect(server, "/echo", max_size=4 * 1024 * 1024) as ws:
            await ws.send(text)
            got_text = await ws.recv()
            await ws.send(data)
            got_data = await ws.recv()
            return got_text, got_data

    got_text, got_data = run(go())
    assert isinstance(got_text, str) and got_text == text
    assert isinstance(got_data, bytes) and got_data == data


def test_echo_many_in_order(server):
    async def go():
        async with connect(server, "/echo") as ws:
            for i in range(200):
                await ws.send("m%d" % i)
            return [await ws.recv() for _ in range(200)]

    assert run(go()) == ["m%d" % i for i in range(200)]


def test_client_close_reaches_the_app(server):
    async def go():
        async with connect(server, "/echo") as ws:
            await ws.send("hi")
            assert await ws.recv() == "hi"
            await ws.close(code=4321, reason="client done")

    run(go())
    server.wait_for_call("ECHO disconnect 4321 'client done'")


def test_receive_waiters_in_order(server):
    """receive()s called while one waits are answered in call order, and
    each gets the disconnect at the end."""
    async def go():
        async with connect(server, "/receivers") as ws:
            assert await ws.recv() == "go"
            await ws.send("one")
            await ws.send("two")
            assert await ws.recv() == "onetwo"
            await ws.close(code=4002, reason="bye")

    run(go())
    server.wait_for_call("RECEIVERS websocket.disconnect 4002"
                         " websocket.disconnect 4002")


def test_subprotocol_and_extra_headers(server):
    async def go():
        async with connect(server, "/subprotocol",
                           subprotocols=["one", "two"]) as ws:
            return (ws.subprotocol, ws.response_headers,
                    json.loads(await ws.recv()))

    sub, headers, offered = run(go())
    assert sub == "two"
    assert offered == ["one", "two"]
    assert headers["X-Extra"] == "one"
    assert headers["X-Other"] == "two"
    assert headers["Sec-WebSocket-Protocol"] == "two"


def test_no_subprotocol_offered(server):
    async def go():
        async with connect(server, "/subprotocol") as ws:
            return ws.subprotocol, json.loads(await ws.recv())

    assert run(go()) == (None, [])


def test_close_with_code_and_reason(server):
    async def go():
        async with connect(server, "/close-code") as ws:
            return await closed_with(ws)

    assert run(go()) == (4001, "done here", ["bye soon"])
    server.wait_for_call("AFTER-CLOSE websocket.disconnect")


def test_return_without_close_is_1000(server):
    async def go():
        async with connect(server, "/return-without-close") as ws:
            return await closed_with(ws)

    assert run(go()) == (1000, "", [b"\x00\x01"])


def test_send_after_client_left_is_an_oserror(server):
    async def go():
        async with connect(server, "/after-disconnect") as ws:
            await ws.close(code=1000)

    run(go())
    server.wait_for_call("LEFT websocket.disconnect 1000")
    line = server.wait_for_call("LATE ")[0]
    assert line.endswith("True"), line  # isinstance(e, OSError)
    assert "ClientDisconnected" in line, line


def test_backpressure_keeps_every_message(server):
    n, size = 64, 64 * 1024

    async def go():
        async with connect(server, "/many", max_size=size * 2,
                           max_queue=4) as ws:
            await ws.send("%d %d" % (n, size))
            code, _, got = await closed_with(ws)
            return code, got

    code, got = run(go())
    assert code == 1000
    assert len(got) == n
    assert all(m == bytes([i % 256]) * size for i, m in enumerate(got))
    server.wait_for_call("MANY sent %d" % n)


def test_http_still_served(server):
    r = server.get("/plain")
    assert r.status == 200
    assert json.loads(r.body) == {"path": "/plain"}


# ---------------------------------------------------------------- refusals

def test_close_before_accept_is_403(server):
    c, r = handshake(server, "/close-before-accept")
    with c:
        assert r.status == 403
        assert r.header("Connection") == "close"
        c.expect_eof()
    server.wait_for_call("CLOSED-EARLY websocket.disconnect")


def test_close_before_accept_with_the_client(server):
    async def go():
        with pytest.raises(websockets.exceptions.InvalidStatusCode) as e:
            async with connect(server, "/close-before-accept"):
                pass
        return e.value.status_code

    assert run(go()) == 403


def test_return_before_accept_is_403(server):
    c, r = handshake(server, "/return-before-accept")
    with c:
        assert r.status == 403
        c.expect_eof()


def test_denial_response(server):
    c, r = handshake(server, "/deny")
    with c:
        assert r.status == 401
        assert r.header("WWW-Authenticate") == "Bearer"
        assert r.header("Content-Type") == "text/plain"
        assert r.header("Connection") == "close"
        assert r.header("Sec-WebSocket-Accept") is None
        assert r.body == b"no entry\n"
        c.expect_eof()


def test_raise_before_accept_is_500(server):
    mark = server.log_mark()
    c, r = handshake(server, "/raise-before")
    with c:
        assert r.status == 500
        assert r.header("Connection") == "close"
        c.expect_eof()
    log = server.wait_for_log("boom before accept", since=mark)
    assert "Traceback" in log


def test_raise_after_accept_is_1011(server):
    mark = server.log_mark()

    async def go():
        async with connect(server, "/raise-after") as ws:
            return await closed_with(ws)

    assert run(go())[0] == 1011
    log = server.wait_for_log("boom after accept", since=mark)
    assert log.count("error in WebSocket GET /raise-after") == 1, log


# ---------------------------------------------------------------- misuse

MISUSE_CASES = [
    # kind, exception, words, after the accept
    ("send-before-accept", "RuntimeError", "before websocket.accept", False),
    ("unknown-before-accept", "ValueError", "unexpected message type",
     False),
    ("bad-header", "ValueError", "CR, LF or NUL", False),
    ("handshake-header", "ValueError", "the handshake's own", False),
    ("bad-subprotocol", "ValueError", "not a token", False),
    ("accept-after-denial-start", "RuntimeError",
     "after websocket.http.response.start", False),
    ("accept-twice", "RuntimeError", "sent twice", True),
    ("send-after-close", "RuntimeError", "after websocket.close", True),
    ("unknown-type", "ValueError", "unexpected message type", True),
    ("both-fields", "ValueError", "exactly one of", True),
    ("no-field", "ValueError", "exactly one of", True),
    ("text-not-str", "TypeError", "'text' must be str", True),
    ("bytes-not-bytes", "TypeError", "'bytes' must be bytes", True),
    ("bad-code", "ValueError", "not a close code", True),
    ("code-not-int", "TypeError", "'code' must be int", True),
    ("denial-after-accept", "RuntimeError", "after the accept", True),
]


@pytest.mark.parametrize("kind,exc,words,accepted", MISUSE_CASES,
                         ids=[m[0] for m in MISUSE_CASES])
def test_misuse_raises_in_the_app(server, kind, exc, words, accepted):
    mark = server.log_mark()
    path = "/misuse/%s" % kind
    if accepted:
        async def go():
            async with connect(server, path) as ws:
                return await closed_with(ws)

        code = run(go())[0]
        # send-after-close: the app's own close came first
        assert code == (1000 if kind == "send-after-close" else 1011)
    else:
        c, r = handshake(server, path)
        with c:
            assert r.status == 500
            c.expect_eof()
    line = server.wait_for_call("MISUSE %s " % kind)[0]
    assert exc in line and words in line, line
    log = server.wait_for_log(words, since=mark)
    server.wait_for_log("Traceback", since=mark)
    assert log.count("error in WebSocket") == 1, log


def test_misuse_caught_is_still_logged_once(server):
    mark = server.log_mark()

    async def go():
        async with connect(server, "/misuse-caught") as ws:
            return await closed_with(ws)

    assert run(go())[0] == 1011
    server.wait_for_call("CAUGHT")
    server.wait_for_call("CAUGHT-THEN websocket.disconnect")
    log = server.wait_for_log("the app went on", since=mark)
    assert log.count("exactly one of") == 1, log


# ---------------------------------------------------------------- drain

@pytest.mark.parametrize("mode", ASGI_MODE_PARAMS)
def test_drain_closes_1001_and_tells_the_app(make_server, mode):
    s = make_server("ws_app:app", mode=mode)

    async def go():
        async with connect(s, "/echo") as ws:
            await ws.send("hi")
            assert await ws.recv() == "hi"
            os.kill(s.pid, signal.SIGTERM)
            return await closed_with(ws)

    assert run(go()) == (1001, "", [])
    s.wait_for_call("ECHO disconnect 1001 ''")
    s.proc.wait(TIMEOUT)
    assert s.proc.returncode == 0
