"""Fixtures of the fleet test (tests/fleet): the fleet itself (plain, or
over TLS, HTTP/2 or both for a test that asks), and the per-step tables
the tests hand in, printed at the end of the run whatever pytest's
verbosity (they are the figures the test exists to report)."""

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
E2E = HERE.parent / "e2e"
for d in (str(E2E), str(HERE)):
    if d not in sys.path:
        sys.path.insert(0, d)

import fleet as fleet_mod  # noqa: E402

REPORTS = []


@pytest.fixture
def fleet(request, tmp_path):
    """The fleet, up; as the test's indirect parameter says: "plain"
    (the default), "tls", "h2c" (HTTP/2 by prior knowledge) or "h2-tls"
    (HTTP/2 over TLS, by ALPN), or "preload" (plain, the hosts with
    --preload)."""
    why = fleet_mod.missing_requirements()
    if why:
        pytest.skip(why)
    arm = getattr(request, "param", "plain")
    assert arm in ("plain", "tls", "h2c", "h2-tls", "preload"), arm
    tls = arm in ("tls", "h2-tls")
    if tls:
        pytest.importorskip("trustme", reason="the TLS arm makes its "
                            "certificates with python3-trustme")
    f = fleet_mod.Fleet(tmp_path, tls=tls, h2=arm.startswith("h2"),
                        preload=arm == "preload")
    problems = []
    try:
        f.up()
        yield f
    finally:
        problems = f.down()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def report():
    """report(title, lines): a table for the end of the run."""
    def add(title, lines):
        REPORTS.append((title, list(lines)))
    return add


def pytest_terminal_summary(terminalreporter):
    for title, lines in REPORTS:
        terminalreporter.write_sep("-", title)
        for line in lines:
            terminalreporter.write_line(line)
