"""Pipelined requests in every mode, for both interfaces.

A finished response may wait for the next pipelined request's, to leave in
the same write (conn.c: conn_hold()). What is held must never wait for the
client: one that reads an answer before it sends the next request's body or
the rest of its head, that half-closes after its last request, or whose
next request turns out bad, gets every answer it is owed, in order, without
waiting for a timeout. In pump mode it must not wait for a slow app either:
the next request runs on another thread, and the hold lasts a moment
(conn.h: SL_CONN_HOLD_SECS).
"""

import pytest

from conftest import start_mode_server
from helpers import build_request

pytestmark = pytest.mark.sluice_only

WAIT = 5  # seconds a read may take: well below the server's own timeouts
SLOW = 3  # seconds the slow request takes


@pytest.fixture(scope="module")
def wsgi(mode, tmp_path_factory):
    with start_mode_server(tmp_path_factory, "pipe-wsgi", mode) as s:
        yield s


@pytest.fixture(scope="module")
def asgi(asgi_mode, tmp_path_factory):
    with start_mode_server(tmp_path_factory, "pipe-asgi", asgi_mode,
                           "asgi_app:app") as s:
        yield s


def body_after_the_answer(server):
    with server.connect(timeout=WAIT) as c:
        c.send(build_request("GET", "/hello")
               + build_request("POST", "/echo", body=None,
                               headers=[("Content-Length", "5")]))
        assert c.read_response().body == b"hello\n"
        c.send(b"abcde")
        assert c.read_response().body == b"abcde"


def rest_of_head_after_the_answer(server):
    with server.connect(timeout=WAIT) as c:
        c.send(build_request("GET", "/hello") + b"GET /hel")
        assert c.read_response().body == b"hello\n"
        c.send(b"lo HTTP/1.1\r\nHost: x\r\n\r\n")
        assert c.read_response().body == b"hello\n"


def continue_after_the_answer(server):
    with server.connect(timeout=WAIT) as c:
        c.send(build_request("GET", "/hello")
               + build_request("POST", "/echo", body=None,
                               headers=[("Content-Length", "4"),
                                        ("Expect", "100-continue")]))
        assert c.read_response().body == b"hello\n"
        assert c.read_response().status == 100
        c.send(b"wxyz")
        assert c.read_response().body == b"wxyz"


def half_close_after_the_last(server, n=20):
    with server.connect(timeout=WAIT) as c:
        c.send(b"".join(build_request("GET", "/hello") for _ in range(n)))
        c.half_close()
        for _ in range(n):
            assert c.read_response().body == b"hello\n"
        c.expect_eof(timeout=WAIT)


def bad_body_after_answers(server):
    with server.connect(timeout=WAIT) as c:
        c.send(build_request("GET", "/hello") * 3
               + b"POST /echo HTTP/1.1\r\nHost: x\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")
        for _ in range(3):
            assert c.read_response().body == b"hello\n"
        assert c.read_response().status == 400


def many_in_order(server, n=200):
    with server.connect(timeout=WAIT) as c:
        reqs = []
        for i in range(n):
            reqs.append(build_request("HEAD" if i % 3 == 2 else "GET",
                                      "/hello"))
        c.send(b"".join(reqs))
        for i in range(n):
            method = "HEAD" if i % 3 == 2 else "GET"
            r = c.read_response(method)
            assert r.status == 200
            assert r.body == (b"" if method == "HEAD" else b"hello\n")
        assert c.request("GET", "/hello").body == b"hello\n"


def answer_before_a_slow_next(server):
    with server.connect(timeout=WAIT) as c:
        c.send(build_request("GET", "/hello")
               + build_request("GET", "/slow?t=%d" % SLOW))
        c.sock.settimeout(SLOW / 2)  # an answer held for the slow one fails
        assert c.read_response().body == b"hello\n"
        c.sock.settimeout(WAIT)
        assert c.read_response().body.startswith(b"slept")


def slow_first_fast_after(server, n=8):
    """In pump mode the GETs after the slow one run ahead of it and end
    first (h1_ahead.h); their answers still wait for its."""
    with server.connect(timeout=WAIT) as c:
        c.send(build_request("GET", "/slow?t=0.5")
               + b"".join(build_request("GET", "/hello?i=%d" % i)
                          for i in range(n)))
        assert c.read_response().body.startswith(b"slept")
        for _ in range(n):
            assert c.read_response().body == b"hello\n"
        assert c.request("GET", "/hello").body == b"hello\n"


def unsafe_between(server):
    """A POST is not run ahead, nor what follows it before it is answered:
    each request sees the ones before it done."""
    with server.connect(timeout=WAIT) as c:
        c.send(build_request("GET", "/hello")
               + build_request("POST", "/echo", body=b"abc")
               + build_request("GET", "/hello")
               + build_request("PUT", "/echo", body=b"defg")
               + build_request("HEAD", "/hello"))
        assert c.read_response().body == b"hello\n"
        assert c.read_response().body == b"abc"
        assert c.read_response().body == b"hello\n"
        assert c.read_response().body == b"defg"
        r = c.read_response("HEAD")
        assert r.status == 200 and r.body == b""


def big_answers_in_order(server, big_target, size):
    """Answers above the send credit (exchange.h: SL_CONN_CREDIT), run
    ahead: each waits for credit until its turn, none for ever."""
    with server.connect(timeout=WAIT) as c:
        c.send(b"".join(build_request("GET", big_target) for _ in range(4))
               + build_request("GET", "/hello"))
        for _ in range(4):
            r = c.read_response()
            assert r.status == 200 and len(r.body) == size
        assert c.read_response().body == b"hello\n"


def gone_mid_burst(server, n=16):
    """A client that leaves with requests still running ahead: they end
    with the executor, and the worker serves on."""
    for _ in range(3):
        with server.connect(timeout=WAIT) as c:
            c.send(build_request("GET", "/slow?t=0.2")
                   + b"".join(build_request("GET", "/hello")
                              for _ in range(n)))
    with server.connect(timeout=WAIT) as c:
        c.send(build_request("GET", "/hello") * n)
        for _ in range(n):
            assert c.read_response().body == b"hello\n"


CHECKS = [body_after_the_answer, rest_of_head_after_the_answer,
          continue_after_the_answer, half_close_after_the_last,
          bad_body_after_answers, many_in_order, slow_first_fast_after,
          unsafe_between, gone_mid_burst]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__)
def test_wsgi(wsgi, check):
    check(wsgi)


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__)
def test_asgi(asgi, check):
    check(asgi)


def test_wsgi_answer_before_a_slow_next(wsgi, mode):
    if mode["inline"]:
        pytest.skip("inline: a slow app holds the whole loop thread, and "
                    "the answer before it with it")
    answer_before_a_slow_next(wsgi)


def test_asgi_answer_before_a_slow_next(asgi):
    answer_before_a_slow_next(asgi)


def test_wsgi_big_answers_in_order(wsgi):
    big_answers_in_order(wsgi, "/big?size=600000", 600000)


def test_asgi_big_answers_in_order(asgi):
    big_answers_in_order(asgi, "/big?chunks=10", 10 * 65536)
