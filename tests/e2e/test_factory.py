"""--factory and MODULE:NAME() (issue 30): the app is what NAME() returns.

The factory is called with no arguments once per worker: each call appends
the worker's pid to a file, so two workers leave two different pids, each
once, and every answer comes from an app the factory made (it names the
pid that made it). gunicorn's spelling, MODULE:NAME() without --factory,
is the same thing; arguments inside the parentheses are a usage error. A
factory that raises, or returns something that is not callable, is one
clear error line (the traceback of what it raised too) and the supervisor
exits 2 without a retry loop, as for an app that cannot be imported.
"""

import time

import pytest

import helpers
from helpers import Server, http_call, run_cli, serving, wait_until

pytestmark = pytest.mark.sluice_only

APP = '''
import os

CALLS = os.path.join(os.environ["E2E_TMP"], "factory-calls")


def _count():
    with open(CALLS, "a") as f:
        f.write("%d\\n" % os.getpid())


def create_wsgi():
    _count()
    made_by = os.getpid()

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"wsgi from factory in %d" % made_by]
    return app


def create_asgi():
    _count()
    made_by = os.getpid()

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                m = await receive()
                if m["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif m["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body",
                    "body": b"asgi from factory in %d" % made_by})
    return app


class Broken(Exception):
    pass


def raises():
    raise Broken("the database is not there")


def returns_none():
    return None


def exits():
    raise SystemExit(7)


not_callable = 42
'''


def write_factory_app(directory):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "factory_app.py").write_text(APP)
    return directory


def factory_server(tmp_path, app, args=(), workers=2):
    appdir = write_factory_app(tmp_path / "app")
    return Server(tmp_path / "srv", app, workers=workers, args=list(args),
                  pythonpath=(str(appdir),), ready_path="/")


def factory_calls(server):
    return [int(p) for p in
            (server.workdir / "factory-calls").read_text().split()]


def assert_one_call_per_worker(s, kind):
    pids = s.wait_workers(2)
    # the supervisor counts a worker ready after its factory ran
    wait_until(lambda: len(factory_calls(s)) >= 2, 10, "two factory calls")
    calls = factory_calls(s)
    assert sorted(calls) == sorted(pids), (calls, pids)
    seen = set()
    for _ in range(20):
        status, _, body = http_call(s, "GET", "/")
        assert status == 200, (status, body)
        prefix = b"%s from factory in " % kind.encode()
        assert body.startswith(prefix), body
        seen.add(int(body[len(prefix):]))
    assert seen <= set(pids), (seen, pids)
    assert factory_calls(s) == calls  # once per worker, not per request


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_factory_runs_once_per_worker(tmp_path, kind):
    s = factory_server(tmp_path, "factory_app:create_" + kind,
                       args=["--factory"])
    for s in serving(s):
        assert_one_call_per_worker(s, kind)


def test_gunicorn_spelling_is_a_factory(tmp_path):
    s = factory_server(tmp_path, "factory_app:create_wsgi()")
    for s in serving(s):
        assert_one_call_per_worker(s, "wsgi")
        assert "serving factory_app:create_wsgi()" in s.error_log_text()


def run_failing(tmp_path, app, args=()):
    """Run APP to its end; (status, error log text, seconds taken)."""
    appdir = write_factory_app(tmp_path / "app")
    log = tmp_path / "error.log"
    t0 = time.monotonic()
    rc, out, err = run_cli(["-w", "2", "--pythonpath", str(appdir),
                            "-b", "127.0.0.1:%d" % helpers.free_port(),
                            "--error-logfile", str(log)] + list(args)
                           + [app], env={"E2E_TMP": str(tmp_path)})
    return rc, log.read_text(), time.monotonic() - t0


@pytest.mark.parametrize("app,args,line,traceback", [
    ("factory_app:raises()", [],
     "[ERROR] the app factory 'factory_app:raises()' raised:"
     " Broken: the database is not there", True),
    ("factory_app:raises", ["--factory"],
     "[ERROR] the app factory 'factory_app:raises()' raised:"
     " Broken: the database is not there", True),
    # SystemExit from the factory is a failure, not the worker's exit code
    ("factory_app:exits", ["--factory"],
     "[ERROR] the app factory 'factory_app:exits()' raised: SystemExit: 7",
     True),
    ("factory_app:returns_none", ["--factory"],
     "[ERROR] 'factory_app:returns_none()' returned a NoneType, not a"
     " callable app", False),
    ("factory_app:not_callable", ["--factory"],
     "[ERROR] 'factory_app:not_callable' is not callable", False),
], ids=["raises", "raises-flag", "system-exit", "none", "not-callable"])
def test_failing_factory_exits_2(tmp_path, app, args, line, traceback):
    rc, text, took = run_failing(tmp_path, app, args)
    assert rc == 2, (rc, text)
    assert took < 10, took
    assert line in text, text
    assert text.count(line) <= 2, text  # one per worker, no second round
    assert text.count("Booting worker") <= 2, text
    if traceback:
        assert "Traceback (most recent call last):" in text, text
        assert 'factory_app.py", line' in text, text
    else:
        assert "Traceback" not in text, text
    # no worker served: no call was counted twice
    calls = (tmp_path / "factory-calls")
    assert not calls.exists() or len(calls.read_text().split()) <= 2


@pytest.mark.parametrize("app", ["factory_app:create_wsgi(1)",
                                 "factory_app:create_wsgi(",
                                 "factory_app:()"])
def test_factory_arguments_are_a_usage_error(tmp_path, app):
    appdir = write_factory_app(tmp_path / "app")
    rc, out, err = run_cli(["--pythonpath", str(appdir),
                            "-b", "127.0.0.1:%d" % helpers.free_port(), app])
    assert rc == 2, (rc, err)
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("sluice: error: application '%s'" % app), err
    assert "called with no arguments" in lines[0], err
    assert not (tmp_path / "factory-calls").exists()


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_factory_runs_once_in_the_zygote_with_preload(tmp_path, kind):
    """With --preload the zygote loads the app, factory included: one call,
    by the zygote, whose app every worker serves (it says who made it)."""
    s = factory_server(tmp_path, "factory_app:create_" + kind,
                       args=["--factory", "--preload"])
    for s in serving(s):
        pids = s.wait_workers(2)
        zygotes = wait_until(s.zygote_pids, 10, "the zygote")
        assert factory_calls(s) == zygotes, (factory_calls(s), zygotes)
        prefix = b"%s from factory in " % kind.encode()
        for _ in range(10):
            status, _, body = http_call(s, "GET", "/")
            assert status == 200 and body == prefix + b"%d" % zygotes[0], \
                (status, body, pids, zygotes)
        assert factory_calls(s) == zygotes
