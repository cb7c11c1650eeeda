"""The apps of bench/run.py's suites of real work (io, big, upload,
frameworks) served by sluice: every sluice arm of those suites gets the
request its wrk run sends, and the answer must pass the same check as the
benchmark's preflight (bench/workload.py: the whole 1 MiB body byte for
byte, the 1 MiB echo, the 64 MiB upload's byte count, the framework's
JSON). The file arms must go out by wsgi.file_wrapper / pathsend. And
bench/upload.py, the 64 MiB arms' client, is run against sluice for a
moment: its summary must count requests and no error.

A benchmark whose app is broken measures the wrong thing without failing;
this is where such a break fails.
"""

import json
import subprocess
import sys

import pytest

from helpers import REPO, http_call

if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

import suites  # noqa: E402
import workload  # noqa: E402

pytestmark = pytest.mark.sluice_only

BENCH_APPS = REPO / "bench" / "apps"
FRAMEWORK_MODULES = {"fw_flask": "flask", "fw_django": "django",
                     "fw_fastapi": "fastapi"}


def _sluice_arms():
    out = []
    for suite in (suites.IO, suites.BIG_SUITE, suites.UPLOAD,
                  suites.FRAMEWORKS):
        for arm in suite.arms:
            if arm.ours:
                out.append(pytest.param(arm, id="%s-%s" % (suite.name,
                                                           arm.name)))
    return out


def _server_args(arm):
    """(app, threads, other args) from the arm's sluice command line:
    everything after --chdir bench/apps, the app last."""
    argv = arm.argv[arm.argv.index("--chdir") + 2:]
    app, rest = argv[-1], argv[:-1]
    threads = 1
    if "--threads" in rest:
        i = rest.index("--threads")
        threads = int(rest[i + 1])
        rest = rest[:i] + rest[i + 2:]
    return app, threads, rest


@pytest.mark.parametrize("arm", _sluice_arms())
def test_bench_arm_answers_its_preflight(make_server, tmp_path, arm):
    app, threads, args = _server_args(arm)
    module = app.split(":")[0]
    if module in FRAMEWORK_MODULES:
        pytest.importorskip(FRAMEWORK_MODULES[module])
    workload.big_file(tmp_path)
    env = {k: v.format(logdir=str(tmp_path)) for k, v in arm.env.items()}
    server = make_server(app, args=args, threads=threads, env=env,
                         pythonpath=(str(BENCH_APPS),), ready_path=None)
    status, headers, body = http_call(server, arm.method, arm.path,
                                      body=workload.request_body(arm),
                                      header_dict=True)
    assert status == 200, (status, body[:200])
    assert workload.check_body(arm, body) is None, \
        workload.check_body(arm, body)
    if arm.path == "/file" and "asgi" in args:
        assert headers.get("x-bench-body") == "pathsend", headers


def test_upload_client_counts_uploads(make_server):
    server = make_server("work_wsgi:app", pythonpath=(str(BENCH_APPS),),
                         ready_path=None)
    size = 3 * 1024 * 1024 + 5  # not a whole number of 64 KiB reads
    p = subprocess.run(
        [sys.executable, str(REPO / "bench" / "upload.py"),
         "--port", str(server.port), "--path", "/upload",
         "--size", str(size), "--conns", "2", "--duration", "0.5"],
        capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    line = [x for x in p.stdout.splitlines()
            if x.startswith("SLUICE-BENCH-JSON ")]
    assert line, p.stdout
    summary = json.loads(line[-1].split(" ", 1)[1])
    assert summary["requests"] >= 2, summary
    assert not any(summary["errors"].values()), summary
    # each answer is the byte count the app read: len(str(size)) bytes
    assert summary["bytes"] == summary["requests"] * len(str(size))
    assert summary["uploaded_bytes"] == summary["requests"] * size
    assert 0 < summary["latency_us"]["p50"] <= summary["latency_us"]["max"]


# bench/preload.py's apps: a Django project with the admin and Django REST
# framework (sqlite), and a FastAPI app. Each must answer its JSON endpoint
# and /pid from the worker named in X-Worker-Pid, by which the harness
# counts requests per worker.

PRELOAD_APPS = [
    pytest.param("djrest.wsgi:application", "/api/books/", [],
                 ("django", "rest_framework"), id="django-drf"),
    pytest.param("fastapi_shop:app", "/items", ["--interface", "asgi"],
                 ("fastapi",), id="fastapi"),
]


@pytest.mark.parametrize("app,path,args,modules", PRELOAD_APPS)
def test_preload_bench_app_answers(make_server, tmp_path, app, path, args,
                                   modules):
    for m in modules:
        pytest.importorskip(m)
    import preload  # bench/, on sys.path above

    db = tmp_path / "djrest.sqlite3"
    if app.startswith("djrest"):
        preload.make_db(db)
    server = make_server(app, args=args, env={"SLUICE_BENCH_DB": str(db)},
                         pythonpath=(str(BENCH_APPS),), ready_path=None)
    worker = server.wait_workers(1)[0]
    status, headers, body = http_call(server, "GET", path, header_dict=True)
    assert status == 200, (status, body[:300])
    doc = json.loads(body)
    items = doc["results"] if "results" in doc else doc["items"]
    assert len(items) == 20 and items[0]["id"] in (0, 1), doc
    pid = {k.lower(): v for k, v in headers.items()}.get("x-worker-pid")
    assert pid == str(worker), headers
    status, _, body = http_call(server, "GET", "/pid", header_dict=True)
    assert (status, body) == (200, str(worker).encode())
