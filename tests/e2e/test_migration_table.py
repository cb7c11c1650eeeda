"""contrib/gunicorn-migration.md has one row for every gunicorn setting.

The list of settings is the installed gunicorn's own (Debian's package
gunicorn); without it the test is skipped. A row for a setting of a later
gunicorn says since when ("since gunicorn 25.0" in its first column), and
is checked against the installed gunicorn only once that is as new.
"""

import os
import re
from pathlib import Path

import pytest

SRCDIR = Path(os.environ.get("SLUICE_SRCDIR",
                             Path(__file__).resolve().parents[2]))
TABLE = SRCDIR / "contrib" / "gunicorn-migration.md"
STATUS = re.compile(r"^(same|renamed|differs|not supported|not needed)\b")
SINCE = re.compile(r"since gunicorn (\d+)\.(\d+)")


def rows():
    """{setting: (sluice column, note)} from the table's rows."""
    return {name: row[1:] for name, row in rows_with_since().items()}


def rows_with_since():
    """{setting: (since, sluice column, note)}; since is the (major, minor)
    of the gunicorn that added the setting, () for those of 20.1."""
    found = {}
    for line in TABLE.read_text().splitlines():
        m = re.match(r"^\| `([a-z][a-z0-9_]*)`([^|]*)"
                     r"\| ([^|]*)\|([^|]*)\|$", line)
        if m:
            assert m.group(1) not in found, "two rows for %s" % m.group(1)
            since = SINCE.search(m.group(2))
            found[m.group(1)] = (
                tuple(int(n) for n in since.groups()) if since else (),
                m.group(3).strip(), m.group(4).strip())
    return found


def test_every_gunicorn_setting_has_a_row():
    config = pytest.importorskip("gunicorn.config")
    settings = {s.name for s in config.KNOWN_SETTINGS}
    table = rows()
    missing = settings - set(table)
    assert not missing, "gunicorn settings missing from %s: %s" % (
        TABLE.name, ", ".join(sorted(missing)))
    installed = tuple(pytest.importorskip("gunicorn").version_info[:2])
    newer = {name for name, (since, _, _) in rows_with_since().items()
             if since > installed}
    unknown = set(table) - settings - newer
    assert not unknown, "rows for settings gunicorn lacks: %s" % (
        ", ".join(sorted(unknown)))


def test_later_settings_say_since_when():
    """The HTTP/2 rows (gunicorn 25 and later) are found, and say so."""
    later = {name: since for name, (since, _, _) in rows_with_since().items()
             if since}
    assert {"http_protocols", "http2_cleartext",
            "http2_max_concurrent_streams", "http2_initial_window_size",
            "http2_max_frame_size", "http2_max_header_list_size"} \
        <= set(later), later
    assert later["http2_cleartext"] == (26, 2)


def test_every_row_says_what_became_of_it():
    for name, (sluice, note) in rows().items():
        assert STATUS.match(sluice), "%s: %r" % (name, sluice)
        # a setting sluice lacks says why
        if sluice.startswith(("not supported", "not needed")):
            assert note, "%s: no reason given" % name
