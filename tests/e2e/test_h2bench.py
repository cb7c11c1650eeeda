"""bench/h2bench.py, issue 29's HTTP/2 benchmark, in a tiny mode: one
shape (2 connections x 4 streams), 1 s measured after 1 s of warm-up.

hypercorn over h2 (TLS, ALPN) and h2c (prior knowledge) must each be
measured: requests per second and the server's CPU per request above
zero, the protocol h2load negotiated the arm's, no h2load error, the
reports written with no path of this machine in them. sluice's arms the
same once sluice takes --http-protocols. And the preflight must refuse a
server that does not speak HTTP/2 (sluice over HTTP/1.1 only), so that
such an arm is skipped, never measured. Skipped without h2load
(nghttp2-client) or python3-h2. About 20 s.
"""

import json
import os
import subprocess
import sys

import pytest

from helpers import REPO, TLS, sluice_bin

if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

import h2bench  # noqa: E402
import run as bench_run  # noqa: E402
from suites import HELLO  # noqa: E402

pytestmark = pytest.mark.sluice_only

if not os.access(h2bench.H2LOAD, os.X_OK):
    pytest.skip("h2load not installed (nghttp2-client)",
                allow_module_level=True)
pytest.importorskip("h2.connection")

CLIENT_CPU = "1" if (os.cpu_count() or 1) > 1 else "0"


def tiny_run(out, only):
    p = subprocess.run(
        [sys.executable, str(REPO / "bench" / "h2bench.py"), "--only", only,
         "--shapes", "2x4", "--duration", "1", "--warmup", "1",
         "--server-cpu", "0", "--client-cpu", CLIENT_CPU,
         "--sluice-bin", sluice_bin(), "--out", str(out),
         "--label", "e2e smoke"],
        capture_output=True, text=True, timeout=120, cwd=str(REPO))
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((out / "h2.json").read_text())
    for name in ("h2.md", "h2-29.md"):
        text = (out / name).read_text()
        assert "e2e smoke" in text
        assert str(REPO) not in text and str(out) not in text, name
    assert str(REPO) not in json.dumps(doc)
    return doc, p.stdout


def check_measured(doc, stdout, arms):
    rows = {r["arm"]: r for r in doc["summary"]["rows"]}
    for arm in arms:
        assert arm not in doc["skipped"], (arm, doc["skipped"], stdout)
        row = rows[arm]
        assert row["n"] == 1, (row, stdout)
        assert row["rps"] > 0 and row["cpu_us"] > 0, row
        assert (row["conns"], row["streams"]) == (2, 4)
        # no h2load error, no other protocol than the arm's
        assert not [f for f in row["flags"]
                    if f.startswith(("errors", "protocol"))], row
    for r in doc["runs"]:
        assert r["protocol"] == r["proto"], r
        assert r["counts"]["succeeded"] > 0, r


SAME_IN_TLS_MODE = ("the harness makes its own certificate and runs the same "
                    "arms in either pass")


@pytest.mark.plain_only(SAME_IN_TLS_MODE)
@pytest.mark.skipif(not os.access("/usr/bin/hypercorn", os.X_OK),
                    reason="hypercorn not installed")
def test_hypercorn_over_h2_and_h2c(tmp_path):
    doc, out = tiny_run(tmp_path, "hypercorn")
    check_measured(doc, out, ("hypercorn-h2", "hypercorn-h2c"))
    hc = doc["arms"]["hypercorn-h2"]["preflight"]
    assert hc["alpn"] == "h2" and hc["status"] == 200, hc
    assert "hypercorn-h2 | h2 | 2×4 |" in (tmp_path / "h2.md").read_text()


@pytest.mark.plain_only(SAME_IN_TLS_MODE)
def test_sluice_over_h2_and_h2c(tmp_path):
    help_text = subprocess.run([sluice_bin(), "--help"], capture_output=True,
                               text=True, timeout=20).stdout
    if "--http-protocols" not in help_text:
        pytest.skip("this sluice has no --http-protocols yet")
    doc, out = tiny_run(tmp_path, "sluice")
    check_measured(doc, out, [a.name for a in h2bench.H2.arms if a.ours])
    assert "sluice-h2 | h2 | 2×4 |" in (tmp_path / "h2-29.md").read_text()


def test_preflight_refuses_http1_only(make_server):
    server = make_server("hello_wsgi:app",
                         pythonpath=(str(REPO / "bench" / "apps"),),
                         ready_path=None)
    with pytest.raises(bench_run.Skip):
        h2bench.preflight(server.port, "/", TLS, HELLO, timeout=5)


def test_h2load_parse():
    """The summary lines of Debian's h2load 1.52 as the harness reads
    them (the tiny runs above read a live one)."""
    got = h2bench.parse_h2load([
        "Application protocol: h2c",
        "finished in 3.00s, 71063.00 req/s, 5.42MB/s",
        "requests: 142126 total, 142126 started, 142126 done, 142120 "
        "succeeded, 6 failed, 0 errored, 0 timeout",
        "status codes: 142120 2xx, 0 3xx, 6 4xx, 0 5xx",
        "time for request:       51us      3.56ms       547us       175us"
        "    87.73%"])
    assert got["rps"] == 71063.0
    assert got["counts"]["succeeded"] == 142120
    assert got["counts"]["failed"] == 6
    assert got["status"]["4xx"] == 6
    assert got["protocol"] == "h2c"
    assert got["request_us"] == {"min": 51.0, "max": 3560.0, "mean": 547.0,
                                 "sd": 175.0}
