"""bench/hsload.c, the handshake client of bench/tlshs.py, against sluice
over TLS.

Each of hsload's connections is a new handshake and one request read to
the server's close. Full handshakes must all complete with no error and
none resumed; with -r every one must offer the first session and sluice
(tickets from its supervisor) must take it every time; with
--ssl-ticket-rotation 0 sluice issues no ticket, so none can resume, and
a path that answers 404 counts as an HTTP error, not a handshake. These
are what bench/tlshs.py reads its figures from. A few seconds.
"""

import json
import subprocess
import sys

import pytest

from helpers import REPO
from tls_helpers import TLSServer, served

if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

import tlshs  # noqa: E402

pytestmark = pytest.mark.sluice_only


def hsload(binary, port, path="/hello", resume=False):
    argv = [str(binary), "-p", str(port), "-P", path, "-c", "4",
            "-d", "0.8", "-w", "0.2"] + (["-r"] if resume else [])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["MEASURE", "END"], out.stdout
    return json.loads(lines[2])


def test_hsload_full_and_resumed(tmp_path, pki):
    binary = tlshs.build_hsload(tmp_path / "hsload")
    with served(TLSServer(tmp_path / "srv", pki)) as s:
        full = hsload(binary, s.port)
        assert full["handshakes"] > 0
        assert full["resumed"] == 0
        assert sum(full["errors"].values()) == 0, full
        again = hsload(binary, s.port, resume=True)
        assert again["handshakes"] > 0
        assert again["resumed"] == again["handshakes"], again
        assert sum(again["errors"].values()) == 0, again
        missing = hsload(binary, s.port, path="/no-such-route")
        assert missing["handshakes"] == 0
        assert missing["errors"]["http"] > 0, missing


def test_hsload_without_tickets_resumes_nothing(tmp_path, pki):
    binary = tlshs.build_hsload(tmp_path / "hsload")
    with served(TLSServer(tmp_path / "srv", pki,
                          args=["--ssl-ticket-rotation", "0"])) as s:
        r = hsload(binary, s.port, resume=True)
        assert r["handshakes"] > 0
        assert r["resumed"] == 0, r
        assert sum(r["errors"].values()) == 0, r
