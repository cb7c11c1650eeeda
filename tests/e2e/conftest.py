"""Fixtures shared by the end-to-end tests, and the one table of modes.

A mode is a shape the server runs in, and every test of a kind must pass in
each. WSGI_MODES: pump mode with one lane, inline mode (SLUICE_INLINE=1, one
lane) and pump mode with four lanes. ASGI_MODES: pump and inline mode, each
on uvloop and on asyncio's own loop. EXECUTORS names the two executor kinds
alone (pump, inline), for tests whose point is not the lane count or the
event loop. The names are the test ids.

`mode` and `asgi_mode` are module-scoped and parametrized over those
tables: pytest groups a module's tests by the parameter, so each module
starts one server per mode and reuses it for every test that does not need
a fresh one. A test that starts its own server for each mode parametrizes
with WSGI_MODE_PARAMS / ASGI_MODE_PARAMS / ASGI_EXECUTOR_PARAMS (imported
from here) and passes the mode to make_server(mode=...).

`make_server` starts extra servers for a single test and stops them when
the test ends, failing the test if stopping went wrong.

TLS mode (SLUICE_E2E_TLS=1, helpers.py) runs the same tests with every
server and client on TLS, in the EXECUTORS modes only; a test that means
nothing there carries @pytest.mark.plain_only("why") and is skipped with
that reason.
"""

import os
import re

import pytest

import helpers

WSGI_MODES = {
    "pump": {"threads": 1, "inline": False},
    "inline": {"threads": 1, "inline": True},
    "pump-t4": {"threads": 4, "inline": False},
}
ASGI_MODES = {
    # no --loop: auto, which is uvloop where it is installed
    "pump": {"inline": False, "args": []},
    "inline": {"inline": True, "args": []},
    "pump-asyncio": {"inline": False, "args": ["--loop", "asyncio"]},
    "inline-asyncio": {"inline": True, "args": ["--loop", "asyncio"]},
}
EXECUTORS = ("pump", "inline")
if helpers.TLS:
    # TLS mode: the transport is the loop thread's, and each executor kind
    # meets it its own way (pump hands over, inline runs the app on the
    # loop thread); the lane count and the event loop do not touch it, so
    # the re-run keeps its time for the executor kinds alone
    WSGI_MODES = {k: WSGI_MODES[k] for k in EXECUTORS}
    ASGI_MODES = {k: ASGI_MODES[k] for k in EXECUTORS}


def mode_params(table, names=None):
    """pytest params (id = the mode's name) of TABLE's modes NAMES (all by
    default); each value is the mode's dict with its "name" added."""
    return [pytest.param(dict(table[n], name=n), id=n)
            for n in (names or table)]


WSGI_MODE_PARAMS = mode_params(WSGI_MODES)
ASGI_MODE_PARAMS = mode_params(ASGI_MODES)
ASGI_EXECUTOR_PARAMS = mode_params(ASGI_MODES, EXECUTORS)


def mode_kwargs(mode, args=()):
    """Server keyword arguments for MODE (a WSGI or ASGI mode dict), with
    ARGS added after the mode's own command-line arguments."""
    return {"threads": mode.get("threads", 1), "inline": mode["inline"],
            "args": list(mode.get("args", ())) + list(args)}


def pytest_configure(config):
    config.addinivalue_line("markers",
                            "sluice_only: behaviour the gunicorn peer lacks")
    config.addinivalue_line("markers",
                            "plain_only(why): means nothing over TLS; "
                            "skipped in TLS mode (SLUICE_E2E_TLS=1)")


def pytest_collection_modifyitems(config, items):
    if helpers.TLS:
        for item in items:
            m = item.get_closest_marker("plain_only")
            if m is not None:
                item.add_marker(pytest.mark.skip(
                    reason="plain only: %s" % (m.args[0] if m.args
                                               else "not over TLS")))
    if not helpers.PEER:
        return
    skip = pytest.mark.skip(reason="not comparable on the %s peer"
                            % helpers.PEER)
    for item in items:
        if "sluice_only" in item.keywords:
            item.add_marker(skip)


def pytest_sessionstart(session):
    if helpers.TLS:
        try:
            helpers.tls_pki()
        except ImportError as e:
            pytest.exit("SLUICE_E2E_TLS=1 needs trustme (the Debian package "
                        "python3-trustme): %s" % e, returncode=4)
    if helpers.PEER:
        return
    for b in (helpers.sluice_bin(), helpers.worker_bin()):
        if not (os.path.isfile(b) and os.access(b, os.X_OK)):
            pytest.exit("%s not found (build it, or set SLUICE_BIN to the "
                        "sluice beside it)" % b, returncode=4)


@pytest.fixture(scope="module", params=WSGI_MODE_PARAMS)
def mode(request):
    """The module's WSGI mode (a WSGI_MODES entry with its name)."""
    if helpers.PEER and request.param["inline"]:
        pytest.skip("the peer has no inline mode")
    return dict(request.param)


@pytest.fixture(scope="module", params=ASGI_MODE_PARAMS)
def asgi_mode(request):
    """The module's ASGI mode (an ASGI_MODES entry with its name)."""
    return dict(request.param)


@pytest.fixture(params=EXECUTORS)
def inline(request):
    """For one test's own servers: whether this run is the inline one."""
    return request.param == "inline"


def _slug(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:60]


@pytest.fixture(scope="module")
def module_tmp(request, tmp_path_factory):
    return tmp_path_factory.mktemp(_slug(request.module.__name__))


def start_mode_server(tmp_path_factory, label, mode, app="wsgi_app:app",
                      args=(), **kw):
    """Context manager: a server for MODE (a WSGI or ASGI mode dict) with
    ARGS after the mode's own arguments."""
    workdir = tmp_path_factory.mktemp(_slug("%s-%s" % (label, mode["name"])))
    return helpers.running(workdir, app, **mode_kwargs(mode, args), **kw)


@pytest.fixture(scope="module")
def server(request, mode, tmp_path_factory):
    """The module's default server: wsgi_app:app in the current mode."""
    with start_mode_server(tmp_path_factory, request.module.__name__,
                           mode) as s:
        yield s


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """The HTTPS tests' certificates: tls_helpers.make_pki() (skips
    without trustme)."""
    import tls_helpers
    return tls_helpers.make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def make_server(request, tmp_path):
    """Factory for servers owned by one test: make_server(app, **kw), or
    make_server(app, mode=MODE, args=ARGS, **kw) for a server in MODE."""
    started = []

    def make(app="wsgi_app:app", mode=None, **kw):
        workdir = tmp_path / ("srv%d" % len(started))
        if mode is not None:
            kw.update(mode_kwargs(mode, kw.pop("args", ())))
        s = helpers.Server(workdir, app, **kw)
        started.append(s)
        return s.start()

    yield make
    problems = []
    for s in started:
        for p in s.stop():
            problems.append(p + "\n" + s.diagnostics())
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
