"""Checks shared by the WSGI and ASGI suites for a large body given as the
response's last part: sluice lends that bytes object to its loop instead of
copying it (writer.h: sl_writer_lend()). Both test apps serve the same
routes: /lent (one bytes object, LENT, as the whole body; cl=N states N as
Content-Length, cl=none states none) and /lent-refs (LENT's reference
count: 2 once no response holds it).
"""

import time

from helpers import build_request


def whole(server, lent):
    """Sized, whole, and the connection still in sync; HEAD sends none."""
    with server.connect(timeout=20) as c:
        for target in ("/lent", "/lent?cl=none"):
            r = c.request("GET", target)
            assert r.status == 200
            assert r.header("Content-Length") == str(len(lent))
            assert r.header("Transfer-Encoding") is None
            assert r.body == lent
        r = c.request("HEAD", "/lent")
        assert r.header("Content-Length") == str(len(lent))
        assert r.body == b""
        assert c.request("GET", "/hello").body == b"hello\n"


def pipelined(server, lent):
    """Two lent bodies and a small answer, asked for at once: in order."""
    with server.connect(timeout=20) as c:
        c.send(build_request("GET", "/lent") * 2
               + build_request("GET", "/hello"))
        assert c.read_response().body == lent
        assert c.read_response().body == lent
        assert c.read_response().body == b"hello\n"


def cut_to_content_length(server, lent):
    """The app promised fewer bytes than it gave: exactly those go out,
    and the connection stays usable."""
    with server.connect(timeout=20) as c:
        r = c.request("GET", "/lent?cl=1000")
        assert r.header("Content-Length") == "1000"
        assert r.body == lent[:1000]
        assert c.request("GET", "/hello").body == b"hello\n"


def short_of_content_length(server, lent):
    """The app promised more than it gave: all it gave goes out, then the
    connection closes (a client must not wait for bytes that never come)."""
    with server.connect(timeout=20) as c:
        c.send(build_request("GET", "/lent?cl=%d" % (len(lent) + 10)))
        head = c.read_head()
        assert head.header("Content-Length") == str(len(lent) + 10)
        assert c.read_until_eof(timeout=10) == lent


def given_back(server, leavers=12, timeout=10):
    """Clients that leave in the middle of a lent body, and one that reads
    it all: every reference the responses held is given back to the app
    (polled, bounded), and the worker serves on."""
    for _ in range(leavers):
        with server.connect(timeout=20) as c:
            c.send(build_request("GET", "/lent"))
            c.read_head()
    assert server.get("/lent").status == 200
    deadline = time.monotonic() + timeout
    refs = None
    while time.monotonic() < deadline:
        refs = server.get("/lent-refs").body
        if refs == b"2":
            break
        time.sleep(0.02)
    assert refs == b"2", "LENT still held: %r references" % refs
