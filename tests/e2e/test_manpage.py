"""sluice.1 is kept in step with `sluice --help`, and renders cleanly.

Every long option --help lists must have its paragraph in the manual's
OPTIONS section, and every option documented there must be one --help
lists. The manual's version is the binary's.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import helpers

pytestmark = pytest.mark.sluice_only

SRCDIR = Path(os.environ.get("SLUICE_SRCDIR",
                             Path(__file__).resolve().parents[2]))
MANPAGE = SRCDIR / "sluice.1"


def help_text():
    rc, out, err = helpers.run_cli(["--help"])
    assert rc == 0, err
    return out


def help_options():
    names = set()
    for line in help_text().splitlines():
        m = re.match(r"^  (?:-[A-Za-z], |    )--([a-z][a-z0-9-]*)", line)
        if m:
            names.add(m.group(1))
    return names


def man_source():
    return MANPAGE.read_text()


def man_section(name):
    """The source lines of section NAME (.SH NAME up to the next .SH)."""
    lines = man_source().splitlines()
    start = lines.index(".SH %s" % name)
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith(".SH ")), len(lines))
    return lines[start + 1:end]


def man_options():
    """The long options of OPTIONS' tag lines (the line after each .TP)."""
    lines = man_section("OPTIONS")
    names = set()
    for i, line in enumerate(lines[:-1]):
        if line == ".TP":
            tag = lines[i + 1]
            found = re.findall(r"\\-\\-([a-z0-9]+(?:\\-[a-z0-9]+)*)", tag)
            assert found, "a .TP without an option: %r" % tag
            names.update(f.replace("\\-", "-") for f in found)
    return names


def test_help_lists_options():
    # the parser of --help must see the options, or the next test is empty
    names = help_options()
    assert {"bind", "workers", "threads", "reload", "reload-extra-file",
            "version", "help"} <= names, names


def test_every_help_option_is_in_the_manual():
    missing = help_options() - man_options()
    assert not missing, ("options of sluice --help missing from sluice.1: "
                         + ", ".join("--" + m for m in sorted(missing)))


def test_every_manual_option_is_in_help():
    extra = man_options() - help_options()
    assert not extra, ("options in sluice.1 that sluice --help lacks: "
                       + ", ".join("--" + m for m in sorted(extra)))


def test_short_options_match():
    """A short name in --help is the same short name in the manual."""
    shorts = dict(re.findall(r"^  -([A-Za-z]), --([a-z][a-z0-9-]*)",
                             help_text(), re.M))
    src = "\n".join(man_section("OPTIONS"))
    for short, name in shorts.items():
        tag = r"\fB\-%s\fR, \fB\-\-%s\fR" % (short, name.replace("-", r"\-"))
        assert tag in src, "sluice.1 lacks -%s for --%s" % (short, name)


def test_version_matches():
    rc, out, err = helpers.run_cli(["--version"])
    assert rc == 0, err
    version = out.split()[-1]
    th = next(l for l in man_source().splitlines() if l.startswith(".TH "))
    assert '"sluice %s"' % version in th, (th, version)


def test_environment_and_signals_documented():
    env = "\n".join(man_section("ENVIRONMENT"))
    for name in ("SLUICE_INLINE", "SLUICE_CMD_ARGS", "SLUICE_WORKER_BIN",
                 "LISTEN_FDS", "NOTIFY_SOCKET"):
        assert name in env, name
    signals = "\n".join(man_section("SIGNALS"))
    for sig in ("TERM", "INT", "QUIT", "HUP", "TTIN", "TTOU", "USR1", "USR2",
                "CHLD"):
        assert "SIG" + sig in signals, sig
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS",
                    "FILES", "EXAMPLES", "SEE ALSO"):
        assert man_section(section), section


@pytest.mark.skipif(shutil.which("groff") is None,
                    reason="groff (Debian package groff-base) is missing")
def test_groff_renders_without_warnings():
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(MANPAGE)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
