"""README.md and docs/ agree with `sluice --help` and with each other.

docs/settings.md is generated from the option table (make check's
tests/check-settings-doc.sh compares it); the hand-written option tables of
README.md and docs/*.md ("| option | default | ...") are checked here: every
row names an option --help lists, with the default --help gives in
brackets. And every docs/ page is linked from the README, and every
relative link between them (and its #anchor) leads somewhere.
"""
import os
import re
from pathlib import Path

import helpers

SRCDIR = Path(os.environ.get("SLUICE_SRCDIR",
                             Path(__file__).resolve().parents[2]))
PAGES = [SRCDIR / "README.md"] + sorted((SRCDIR / "docs").glob("*.md"))


def help_defaults():
    """{long option: the text of its trailing [default], or None}."""
    rc, out, err = helpers.run_cli(["--help"])
    assert rc == 0, err
    entries, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^  (?:-[A-Za-z], |    )--([a-z][a-z0-9-]*)(.*)", line)
        if m:
            cur = m.group(1)
            entries[cur] = m.group(2)
        elif cur and line.startswith("      "):
            entries[cur] += " " + line.strip()
        else:
            cur = None
    found = {}
    for name, text in entries.items():
        m = re.search(r" \[([^][]*)\]$", text.strip())
        found[name] = m.group(1) if m else None
    return found


def option_rows():
    """(page, option, default cell) of every option table's rows."""
    for page in PAGES:
        if page.name == "settings.md":
            continue
        in_table = False
        for line in page.read_text().splitlines():
            if re.match(r"^\| option \| default \|", line):
                in_table = True
                continue
            if not line.startswith("|"):
                in_table = False
                continue
            if in_table and line.startswith("| `-"):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                name = re.search(r"--([a-z][a-z0-9-]*)", cells[0]).group(1)
                yield page.name, name, cells[1]


def test_option_tables_match_help():
    defaults = help_defaults()
    rows = list(option_rows())
    assert len(rows) > 40, rows  # the parser must see the tables
    wrong = []
    for page, name, cell in rows:
        if name not in defaults:
            wrong.append("%s: --%s is not an option of --help" % (page, name))
            continue
        want = defaults[name]
        # "`-` (stderr)" is "-"; "none (off)" is "none: no access log"
        got = re.sub(r" \(.*\)$", "", cell.replace("`", "")).strip()
        if got == "":
            ok = want in (None, "none", "unchanged", "off")
        else:
            ok = want is not None and (want == got or
                                       want.startswith(got + ":") or
                                       want.startswith(got + " default"))
        if not ok:
            wrong.append("%s: --%s default %r, --help says [%s]"
                         % (page, name, cell, want))
    assert not wrong, "\n".join(wrong)


def slug(heading):
    """GitHub's anchor for a heading."""
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


def anchors(page):
    found, in_code = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"^#+ ", line):
            found.add(slug(line.lstrip("#")))
    return found


def test_links_between_pages_resolve():
    broken = []
    for page in PAGES:
        for url in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"^[a-z]+:", url):
                continue
            path, _, frag = url.partition("#")
            target = (page.parent / path) if path else page
            if not target.exists():
                broken.append("%s: %s: no such file" % (page.name, url))
            elif frag and frag not in anchors(target):
                broken.append("%s: %s: no such heading" % (page.name, url))
    assert not broken, "\n".join(broken)


def test_readme_links_every_docs_page():
    readme = (SRCDIR / "README.md").read_text()
    missing = [p.name for p in PAGES[1:]
               if "](docs/%s)" % p.name not in readme]
    assert not missing, missing
