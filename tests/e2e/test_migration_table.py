"""contrib/gunicorn-migration.md has one row for every gunicorn setting.

The list of settings is the installed gunicorn's own (Debian's package
gunicorn); without it the test is skipped.
"""

import os
import re
from pathlib import Path

import pytest

SRCDIR = Path(os.environ.get("SLUICE_SRCDIR",
                             Path(__file__).resolve().parents[2]))
TABLE = SRCDIR / "contrib" / "gunicorn-migration.md"
STATUS = re.compile(r"^(same|renamed|differs|not supported|not needed)\b")


def rows():
    """{setting: (sluice column, note)} from the table's rows."""
    found = {}
    for line in TABLE.read_text().splitlines():
        m = re.match(r"^\| `([a-z_]+)`[^|]*\| ([^|]*)\|([^|]*)\|$", line)
        if m:
            assert m.group(1) not in found, "two rows for %s" % m.group(1)
            found[m.group(1)] = (m.group(2).strip(), m.group(3).strip())
    return found


def test_every_gunicorn_setting_has_a_row():
    config = pytest.importorskip("gunicorn.config")
    settings = {s.name for s in config.KNOWN_SETTINGS}
    table = rows()
    missing = settings - set(table)
    assert not missing, "gunicorn settings missing from %s: %s" % (
        TABLE.name, ", ".join(sorted(missing)))
    unknown = set(table) - settings
    assert not unknown, "rows for settings gunicorn lacks: %s" % (
        ", ".join(sorted(unknown)))


def test_every_row_says_what_became_of_it():
    for name, (sluice, note) in rows().items():
        assert STATUS.match(sluice), "%s: %r" % (name, sluice)
        # a setting sluice lacks says why
        if sluice.startswith(("not supported", "not needed")):
            assert note, "%s: no reason given" % name
