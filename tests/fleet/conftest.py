"""Fixtures of the fleet test (tests/fleet): the fleet itself (plain, or
over TLS for a test that asks), and the per-step tables the tests hand
in, printed at the end of the run whatever pytest's verbosity (they are
the figures the test exists to report)."""

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
    """The fleet, up; over TLS when the test parametrizes it indirectly
    with "tls" (plain by default)."""
    why = fleet_mod.missing_requirements()
    if why:
        pytest.skip(why)
    tls = getattr(request, "param", "plain") == "tls"
    if tls:
        pytest.importorskip("trustme", reason="the TLS arm makes its "
                            "certificates with python3-trustme")
    f = fleet_mod.Fleet(tmp_path, tls=tls)
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
