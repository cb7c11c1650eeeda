"""Upgrade requests to an executor that serves no WebSockets (WSGI): the
request reaches the app as an ordinary one, as under gunicorn's sync
workers, the client gets the app's response, then the end of the
connection. Nothing hangs, whatever follows the head.
"""

import json

import pytest

from conftest import start_mode_server
from helpers import build_request

WS_HEADERS = (("Upgrade", "websocket"), ("Connection", "Upgrade"),
              ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
              ("Sec-WebSocket-Version", "13"))

# a masked text frame "hi", as a client would send right after its head
FRAME = bytes([0x81, 0x82, 1, 2, 3, 4, ord("h") ^ 1, ord("i") ^ 2])


def test_websocket_upgrade_reaches_a_wsgi_app(server):
    with server.connect() as c:
        r = c.request("GET", "/environ", WS_HEADERS)
        assert r.status == 200
        env = json.loads(r.body)
        assert env["HTTP_UPGRADE"]["value"] == "websocket"
        assert env["HTTP_SEC_WEBSOCKET_VERSION"]["value"] == "13"
        assert r.has_token("Connection", "close")
        c.expect_eof()


def test_bytes_after_the_upgrade_head_do_not_hang(server):
    with server.connect() as c:
        c.send(build_request("GET", "/hello", WS_HEADERS) + FRAME)
        r = c.read_response()
        assert r.status == 200
        assert r.body == b"hello\n"
        c.expect_eof()


def test_other_upgrades_are_ordinary_requests(server):
    headers = (("Upgrade", "h2c"), ("Connection", "Upgrade, HTTP2-Settings"),
               ("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA"))
    with server.connect() as c:
        r = c.request("GET", "/environ", headers)
        assert r.status == 200
        assert json.loads(r.body)["HTTP_UPGRADE"]["value"] == "h2c"
        c.expect_eof()


def test_upgrade_with_a_body_is_served(server):
    with server.connect() as c:
        c.send(build_request("POST", "/echo", WS_HEADERS, body=b"payload"))
        r = c.read_response("POST")
        assert r.status == 200
        assert r.body == b"payload"
        c.expect_eof()


def test_a_plain_request_after_is_served(server):
    # the upgrade's connection closed; the worker goes on serving
    with server.connect() as c:
        c.request("GET", "/hello", WS_HEADERS)
        c.expect_eof()
    with server.connect() as c:
        r = c.request("GET", "/hello")
        assert r.status == 200
        assert not r.has_token("Connection", "close")


# ------------------------------------------------ an executor that serves them
# A bad WebSocket handshake to an ASGI app is answered by the loop, before
# the app could see it; an upgrade to another protocol is an ordinary
# request there too.

@pytest.fixture(scope="module")
def asgi_server(asgi_mode, tmp_path_factory):
    with start_mode_server(tmp_path_factory, "ws-asgi", asgi_mode,
                           "asgi_app:app") as s:
        yield s


@pytest.mark.sluice_only
def test_websocket_version_other_than_13_is_426(asgi_server):
    headers = tuple(h for h in WS_HEADERS if h[0] != "Sec-WebSocket-Version")
    with asgi_server.connect() as c:
        r = c.request("GET", "/hello",
                      headers + (("Sec-WebSocket-Version", "8"),))
        assert r.status == 426
        assert r.header("Sec-WebSocket-Version") == "13"
        assert r.has_token("Connection", "close")
        c.expect_eof()


@pytest.mark.sluice_only
def test_websocket_without_a_key_is_400(asgi_server):
    headers = tuple(h for h in WS_HEADERS if h[0] != "Sec-WebSocket-Key")
    with asgi_server.connect() as c:
        r = c.request("GET", "/hello", headers)
        assert r.status == 400
        c.expect_eof()


@pytest.mark.sluice_only
def test_other_upgrades_reach_an_asgi_app(asgi_server):
    headers = (("Upgrade", "h2c"), ("Connection", "Upgrade, HTTP2-Settings"),
               ("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA"))
    with asgi_server.connect() as c:
        r = c.request("GET", "/hello", headers)
        assert r.status == 200
        assert r.has_token("Connection", "close")
        c.expect_eof()
