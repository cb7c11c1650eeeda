"""bench/rateload.c, the fixed-rate client of bench/rate.py, against a
server that answers slowly: the coordinated-omission check.

sluice serves tests/apps/drain_app.py's /slow?t=0.05 with one lane, so at
most 20 requests a second. rateload at 40 a second for 2 s must show the
queue that builds up (latency measured from each request's intended send
time grows with the run: p50 about 1 s, p99 about 2 s), while a closed loop
against the same server sees only ~4 × 50 ms and a rate of 10 a second
sees no queue. The checks are bench/rate.py's co_check(), also run by
`bench/rate.py --selfcheck`. About 8 s.
"""

import sys

import pytest

from helpers import REPO

if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

import rate  # noqa: E402

pytestmark = pytest.mark.sluice_only


def test_rateload_charges_queueing_to_every_request(make_server, tmp_path):
    binary = rate.build_rateload(tmp_path / "rateload")
    server = make_server("drain_app:app", threads=1, ready_path="/hello")
    verdicts, runs = rate.co_check(server.port, binary=binary)
    failed = ["%s: %s" % (name, detail) for name, ok, detail in verdicts
              if not ok]
    assert not failed, "%s\nruns: %s" % ("\n".join(failed), runs)
    # every check ran (a run that failed to start reports one verdict)
    assert len(verdicts) == 6
