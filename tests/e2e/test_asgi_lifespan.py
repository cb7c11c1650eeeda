"""ASGI start-up and shut-down: interface detection, --loop, lifespan
startup before READY (a failed one is a failed boot), lifespan shutdown on
SIGTERM within its budget, and the drain's bar for ASGI: a request sleeping
1.5 s when SIGTERM arrives is answered at 1.5 s, and the worker exits right
after. The drain tests run in pump and inline mode."""

import signal
import time

import pytest

import helpers
from conftest import ASGI_EXECUTOR_PARAMS, ASGI_MODE_PARAMS
from helpers import build_request

pytestmark = pytest.mark.sluice_only

APPS = str(helpers.APPS)


def boot_fails(tmp_path, app, *args):
    status, out, err = helpers.run_cli(
        ["-b", "127.0.0.1:%d" % helpers.free_port(), "--pythonpath", APPS,
         *args, app], timeout=30)
    assert status != 0, "the server kept running: %s" % err[-2000:]
    return err


def test_failed_startup_is_a_failed_boot(tmp_path):
    err = boot_fails(tmp_path, "asgi_app:lifespan_fails")
    assert "ASGI lifespan startup failed: database unreachable" in err


def test_lifespan_on_requires_support(tmp_path):
    err = boot_fails(tmp_path, "asgi_app:no_lifespan", "--lifespan", "on")
    assert "lifespan startup failed" in err
    assert "ValueError: only http, not lifespan" in err


def test_lifespan_auto_serves_an_app_without_it(make_server):
    s = make_server("asgi_app:no_lifespan")
    assert s.get("/").body == b"no lifespan here\n"
    assert "ASGI lifespan not supported by the app" in s.error_log_text()


def test_lifespan_off(make_server):
    s = make_server("asgi_app:app", args=["--lifespan", "off"])
    assert b'"state"' not in s.get("/scope").body
    assert not s.called("LIFESPAN")


def test_lifespan_startup_before_ready_and_shutdown_on_term(make_server):
    s = make_server("asgi_app:app")
    assert s.called("LIFESPAN startup")
    assert s.stop() == []
    assert s.called("LIFESPAN shutdown")


def test_lifespan_shutdown_is_bounded(make_server):
    s = make_server("asgi_app:slow_shutdown")
    t0 = time.monotonic()
    problems = s.stop()
    assert s.called("LIFESPAN slow shutdown")
    assert problems == []
    assert time.monotonic() - t0 < 8
    assert "lifespan shutdown did not finish" in s.error_log_text()


@pytest.mark.parametrize("app,iface,body", [
    ("asgi_app:app", None, b"hello\n"),
    ("asgi_app:obj_app", None, b"object\n"),
    ("asgi_app:wsgi_looking", None, b"wsgi\n"),
    ("asgi_app:obj_app", "asgi", b"object\n"),
])
def test_interface(make_server, app, iface, body):
    args = ["--interface", iface] if iface else []
    s = make_server(app, args=args, ready_path="/hello")
    assert s.get("/hello").body == body


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_loop_choice(make_server, loop):
    s = make_server("asgi_app:app", args=["--loop", loop])
    assert "(ASGI on %s," % loop in s.error_log_text()


# ---------------------------------------------------------------- drain

@pytest.mark.parametrize("mode", ASGI_MODE_PARAMS)
def test_drain_answers_at_its_time_then_exits(make_server, mode):
    s = make_server("asgi_app:app", mode=mode)
    with s.connect() as c:
        t0 = time.monotonic()
        c.send(build_request("GET", "/slow/drain?t=1.5"))
        s.wait_for_call("SLOW start /slow/drain")
        s.proc.send_signal(signal.SIGTERM)
        r = c.read_response()
        answered = time.monotonic() - t0
        assert r.status == 200 and r.body == b"slept 1.5\n"
        assert r.header("Connection") == "close"
    assert 1.4 <= answered < 2.0, "answered at %.2fs" % answered
    s.proc.wait(5)
    exited = time.monotonic() - t0
    assert exited - answered < 0.8, \
        "answered at %.2fs, exited at %.2fs" % (answered, exited)
    assert s.proc.returncode == 0
    assert s.called("LIFESPAN shutdown")


@pytest.mark.parametrize("mode", ASGI_EXECUTOR_PARAMS)
def test_drain_cancels_past_the_graceful_timeout(make_server, mode):
    s = make_server("asgi_app:app", mode=mode,
                    args=["--graceful-timeout", "0.5"])
    with s.connect() as c:
        c.send(build_request("GET", "/slow/cut?t=30"))
        s.wait_for_call("SLOW start /slow/cut")
        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        try:
            r = c.read_response()
            assert r.status == 503
        except helpers.PeerClosed as e:
            assert e.data == b""  # a clean close, nothing half-sent
    s.proc.wait(8)
    assert time.monotonic() - t0 < 4
    assert not s.called("SLOW end /slow/cut")
    assert "abandoning request GET /slow/cut" in s.error_log_text()
