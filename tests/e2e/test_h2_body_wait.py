"""HTTP/2: an app reading a request body that will never come is told so.

Two findings of tests/fuzz/fuzz_h2.c, each of which left a WSGI app in
wsgi.input.read() for good, its lane with it: the client resets the
stream with NO_ERROR before its body ended, or the session ends itself
(nghttp2 answers a protocol error with GOAWAY and reads no more) while a
body is half sent. With one lane, a request on another connection is
answered only once the lane is free again: it must be, well before
--timeout.

The client speaks HTTP/2 with prior knowledge on a plain listener,
framed by Debian's python3-h2.
"""

import socket

import pytest

import helpers

h2 = pytest.importorskip("h2.connection")
h2_config = pytest.importorskip("h2.config")
hyperframe = pytest.importorskip("hyperframe.frame")

pytestmark = [
    pytest.mark.sluice_only,
    pytest.mark.plain_only("HTTP/2 with prior knowledge is plain only"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = helpers.Server(tmp_path_factory.mktemp("h2body"), threads=1,
                       args=["--http-protocols", "h2,h1",
                             "--http2-cleartext", "prior-knowledge",
                             "--timeout", "30"])
    yield from helpers.serving(s)


def half_a_body(server):
    """A connection whose stream 1 is a POST to /echo (wsgi.input read
    to its end) with 4 of its 10 body bytes sent: the socket, and the
    client's state."""
    conn = h2.H2Connection(h2_config.H2Configuration(client_side=True,
                                                     header_encoding=None))
    conn.initiate_connection()
    conn.send_headers(1, [(b":method", b"POST"), (b":scheme", b"http"),
                          (b":authority", b"localhost"),
                          (b":path", b"/echo"),
                          (b"content-length", b"10")])
    conn.send_data(1, b"half")
    s = socket.create_connection((server.host, server.port),
                                 timeout=helpers.IO_TIMEOUT)
    s.sendall(conn.data_to_send())
    return s, conn


def lane_free(server):
    """A request on a connection of its own is answered (the one lane
    is not held), within 5 s."""
    r = server.get("/hello", timeout=5)
    assert r.status == 200


@pytest.mark.parametrize("how", ["rst-no-error", "protocol-error"])
def test_a_body_that_will_not_come_frees_the_lane(server, how):
    # counted before the request goes: the app may log it at once
    before = server.call_log.read_bytes().count(b"call POST /echo")
    s, conn = half_a_body(server)
    try:
        # the app has the request, and waits in wsgi.input for the rest
        helpers.wait_until(
            lambda: server.call_log.read_bytes().count(b"call POST /echo")
            > before, 5, "the app to get the request")
        if how == "rst-no-error":
            conn.reset_stream(1, error_code=0)
            s.sendall(conn.data_to_send())
        else:
            # a PUSH_PROMISE from a client: nghttp2 ends the session
            # with GOAWAY(PROTOCOL_ERROR) and reads no more
            s.sendall(hyperframe.PushPromiseFrame(
                1, promised_stream_id=2, data=b"\x82",
                flags=["END_HEADERS"]).serialize())
        lane_free(server)
    finally:
        s.close()
