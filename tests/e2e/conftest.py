"""Fixtures shared by the end-to-end tests.

`mode` is module-scoped and parametrized over the executor shapes every
HTTP/WSGI test must pass in: pump mode with one lane, inline mode
(SLUICE_INLINE=1, one lane) and pump mode with four lanes. pytest groups a
module's tests by that parameter, so each module starts one server per mode
and reuses it for every test that does not need a fresh one.

`make_server` starts extra servers for a single test and stops them when
the test ends, failing the test if stopping went wrong.
"""

import os
import re

import pytest

import helpers

MODES = {
    "pump": {"threads": 1, "inline": False},
    "inline": {"threads": 1, "inline": True},
    "pump-t4": {"threads": 4, "inline": False},
}


def pytest_configure(config):
    config.addinivalue_line("markers",
                            "sluice_only: behaviour the gunicorn peer lacks")


def pytest_collection_modifyitems(config, items):
    if not helpers.PEER:
        return
    skip = pytest.mark.skip(reason="not comparable on the %s peer"
                            % helpers.PEER)
    for item in items:
        if "sluice_only" in item.keywords:
            item.add_marker(skip)


def pytest_sessionstart(session):
    if helpers.PEER:
        return
    for b in (helpers.sluice_bin(), helpers.worker_bin()):
        if not (os.path.isfile(b) and os.access(b, os.X_OK)):
            pytest.exit("%s not found (build it, or set SLUICE_BIN to the "
                        "sluice beside it)" % b, returncode=4)


@pytest.fixture(scope="module", params=list(MODES))
def mode(request):
    if helpers.PEER and MODES[request.param]["inline"]:
        pytest.skip("the peer has no inline mode")
    return dict(MODES[request.param], name=request.param)


def _slug(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:60]


@pytest.fixture(scope="module")
def module_tmp(request, tmp_path_factory):
    return tmp_path_factory.mktemp(_slug(request.module.__name__))


def start_mode_server(tmp_path_factory, label, mode, app="wsgi_app:app",
                      **kw):
    """Context manager: a server for MODE (dict from the mode fixture)."""
    workdir = tmp_path_factory.mktemp(_slug("%s-%s" % (label, mode["name"])))
    return helpers.running(workdir, app, threads=mode["threads"],
                           inline=mode["inline"], **kw)


@pytest.fixture(scope="module")
def server(request, mode, tmp_path_factory):
    """The module's default server: wsgi_app:app in the current mode."""
    with start_mode_server(tmp_path_factory, request.module.__name__,
                           mode) as s:
        yield s


@pytest.fixture
def make_server(request, tmp_path):
    """Factory for servers owned by one test: make_server(app, **kw)."""
    started = []

    def make(app="wsgi_app:app", **kw):
        workdir = tmp_path / ("srv%d" % len(started))
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
