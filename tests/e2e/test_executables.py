"""The two executables: sluice, the supervisor (C only), and sluice-worker,
the one that embeds CPython.

The supervisor never loads Python: ldd of sluice names no libpython, and a
running supervisor has none mapped while its worker does. It stays small
(VmRSS, skipped under sanitizers). It finds its worker once, at start:
SLUICE_WORKER_BIN when set, else sluice-worker beside itself (a copied pair
serves, with the copied worker), else the installed one. A worker it cannot
find is one error line and exit status 2, not a respawn loop; for a binary
upgrade's new supervisor that means a failed upgrade while the old one
serves on. A worker from another build (another handoff version) says so
and is not respawned; sluice-worker started by hand refuses with one line.
"""

import os
import shutil
import signal
import subprocess

import pytest

import helpers
from helpers import (BASE, assert_one_error, assert_usage_error, bind_args,
                     copied_binary, sup_server, worker_pid_of)

pytestmark = pytest.mark.sluice_only

# A supervisor with one worker. Measured here: VmRSS 1.95-2.06 MiB, of
# which RssAnon (its own memory) is ~0.14 MiB and the rest file pages:
# libc's alone are ~1.5 MiB (1.1 MiB of its code, which the kernel maps 64
# KiB around every page it faults in; sleep(1) alone shows 1.7 MiB). It was
# ~6 MiB while the supervisor linked libpython and ~3 MiB while it linked
# libsystemd. The limits catch either coming back, without failing on how
# much of libc's code the kernel happens to map.
SUPERVISOR_RSS_LIMIT_KIB = 2304
SUPERVISOR_ANON_LIMIT_KIB = 512


def ldd(path):
    res = subprocess.run(["ldd", path], capture_output=True, text=True,
                         timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout


def maps(pid):
    with open("/proc/%d/maps" % pid) as f:
        return f.read()


def test_only_the_worker_links_python():
    assert "libpython" not in ldd(helpers.sluice_bin())
    assert "libpython" in ldd(helpers.worker_bin())


def test_running_supervisor_maps_no_python(make_server):
    s = make_server()
    worker = s.wait_workers(1)[0]
    assert "libpython" in maps(worker)
    assert "libpython" not in maps(s.pid)


@pytest.mark.skipif(helpers.sanitized(),
                    reason="RSS means little under ASan")
def test_supervisor_rss_is_small(make_server):
    s = make_server()
    s.wait_workers(1)
    rss = helpers.vm_rss_kib(s.pid)
    anon = helpers.status_kib(s.pid, "RssAnon")
    print("supervisor VmRSS: %d KiB, RssAnon %d KiB" % (rss, anon))
    assert rss <= SUPERVISOR_RSS_LIMIT_KIB, \
        "supervisor VmRSS %d KiB > %d KiB" % (rss, SUPERVISOR_RSS_LIMIT_KIB)
    assert anon <= SUPERVISOR_ANON_LIMIT_KIB, \
        "supervisor RssAnon %d KiB > %d KiB" % (anon,
                                                SUPERVISOR_ANON_LIMIT_KIB)


def test_missing_worker_is_one_error_line_and_status_2(tmp_path):
    missing = tmp_path / "no-such-worker"
    rc, out, err = helpers.run_cli(BASE + bind_args() + ["wsgi_app:app"],
                                   env={"SLUICE_WORKER_BIN": str(missing)},
                                   timeout=10)
    assert_usage_error(rc, err, "SLUICE_WORKER_BIN", str(missing),
                       "No such file")


def test_unexecutable_worker_is_one_error_line(tmp_path):
    worker = tmp_path / "sluice-worker"
    shutil.copy2(helpers.worker_bin(), worker)
    worker.chmod(0o644)
    rc, out, err = helpers.run_cli(BASE + bind_args() + ["wsgi_app:app"],
                                   env={"SLUICE_WORKER_BIN": str(worker)},
                                   timeout=10)
    assert_usage_error(rc, err, str(worker), "not an executable file")


def test_worker_bin_variable_is_used(make_server):
    s = make_server(env={"SLUICE_WORKER_BIN": helpers.worker_bin()})
    worker = s.wait_workers(1)[0]
    assert os.readlink("/proc/%d/exe" % worker) == \
        os.path.realpath(helpers.worker_bin())
    assert "(workers: %s)" % helpers.worker_bin() in s.error_log_text()


def test_worker_is_found_beside_the_supervisor(tmp_path):
    binary = copied_binary(tmp_path)
    bindir = binary.parent
    s = sup_server(tmp_path, binary=binary).start()
    try:
        worker = s.wait_workers(1)[0]
        assert os.readlink("/proc/%d/exe" % worker) == \
            str(bindir / "sluice-worker")
        with open("/proc/%d/cmdline" % worker, "rb") as f:
            title = f.read().split(b"\0")[0].decode()
        assert title == "sluice: worker 1 [sup_app:app]"
    finally:
        problems = s.stop()
    assert problems == []


def test_usr2_to_a_supervisor_without_its_worker_fails_cleanly(tmp_path):
    binary = copied_binary(tmp_path)
    bindir = binary.parent
    # SLUICE_WORKER_BIN, inherited by the new supervisor, so that an
    # installed sluice-worker cannot stand in for the missing one
    s = sup_server(tmp_path, binary=binary,
                   env={"SLUICE_WORKER_BIN":
                        str(bindir / "sluice-worker")}).start()
    try:
        workers = set(s.wait_workers(1))
        os.rename(bindir / "sluice-worker", bindir / "elsewhere")
        mark = s.log_mark()
        os.kill(s.pid, signal.SIGUSR2)
        s.wait_for_log("Binary upgrade failed: the new supervisor", since=mark)
        assert "exited with code 2" in s.log_since(mark)
        helpers.wait_until(lambda: "is not an executable file" in
                           s.stderr_path.read_text(), 5,
                           "the new supervisor's error line")
        assert set(s.worker_pids()) == workers
        assert worker_pid_of(s) in workers
    finally:
        problems = s.stop()
    assert problems == []


def test_worker_of_another_handoff_version_is_not_respawned(tmp_path):
    """A sluice-worker that does not speak its supervisor's handoff version
    (another build) says so once and is not retried: exit 2."""
    wrapper = tmp_path / "sluice-worker"
    wrapper.write_text('#!/bin/sh\nSLUICE_HANDOFF=999 exec "%s" "$@"\n'
                       % helpers.worker_bin())
    wrapper.chmod(0o755)
    rc, out, err = helpers.run_cli(BASE + bind_args() + ["wsgi_app:app"],
                                   env={"SLUICE_WORKER_BIN": str(wrapper)},
                                   timeout=20)
    line = assert_one_error(rc, err, "handoff version", "its supervisor 999")
    assert "sluice-worker" in line
    assert err.count("Booting worker") == 1, err


def test_worker_started_by_hand_refuses():
    res = subprocess.run([helpers.worker_bin()] + BASE + ["wsgi_app:app"],
                         env=helpers.clean_env(), capture_output=True,
                         text=True, timeout=10)
    assert_usage_error(res.returncode, res.stderr, "sluice-worker",
                       "SLUICE_WORKER_ID")
