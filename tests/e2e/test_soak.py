"""The soak's short variant: bench/soak.py's client (keep-alive,
pipelined, chunked uploads, garbage, resets mid-response, Connection:
close; every answer checked byte for byte) sends 5,000 requests from four
processes to one worker, in each of the four modes (20,000 in all).
Afterwards the worker's open fds are back to their count before the load,
the worker is the one that started, and its log holds no crash line. The
long run (two million requests, RSS sampled) is bench/soak.py itself, by
hand.
"""

import sys

import pytest

from conftest import EXECUTORS
from helpers import REPO, fd_count, sanitized, settled_fds, wait_until

if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

import soak  # noqa: E402

pytestmark = pytest.mark.sluice_only

APPS = {"wsgi": ("soak_app:app", []),
        "asgi": ("soak_app:asgi", ["--interface", "asgi"])}
REQUESTS = 5000


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("kind", APPS)
def test_soak_short(make_server, kind, executor):
    app, args = APPS[kind]
    server = make_server(app, args=args, inline=executor == "inline",
                         ready_path="/hello")
    worker = server.wait_workers(1)[0]
    base = settled_fds(worker)
    load = soak.Load((server.host, server.port), REQUESTS, procs=4).start()
    load.join(120 if not sanitized() else 300)
    assert not load.errors, "client-side failures: %s" % dict(load.errors)
    assert load.count >= REQUESTS
    assert set(load.done) == {f.__name__ for f in soak.SHAPES}, load.done
    wait_until(lambda: fd_count(worker) <= base, 10,
               "the worker's fds to come back to %d (now %d)"
               % (base, fd_count(worker)))
    assert server.worker_pids() == [worker], "the worker was replaced"
    crashes = soak.crash_lines(server.error_log_text())
    assert not crashes, crashes
    print("soak short: %d requests by shape %s; fds %d before and after"
          % (load.count, dict(load.done), base))
