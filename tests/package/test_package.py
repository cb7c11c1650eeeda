"""The Debian package, unpacked into a throwaway root and run from there.

The package is SLUICE_DEB when that names one, else it is built here by
contrib/build-deb.sh with DEB_BUILD_OPTIONS=nocheck (make check is CI's job;
the build alone takes a few minutes of both cores). "dpkg -x" unpacks it
into a temporary ROOT: nothing is installed on the machine. The checks:
the files are where Debian wants them, the control fields match
configure.ac, the template units are not enabled by the maintainer
scripts and pass "systemd-analyze verify", and ROOT/usr/bin/sluice serves
contrib/example/hello.py with ROOT's own worker (the supervisor looks for
its worker under the root it runs from: supervisor/spawn.h).

Run by "make check-package", or:
    /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/package
"""

import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

REPO = pathlib.Path(os.environ.get("SLUICE_SRCDIR") or
                    pathlib.Path(__file__).resolve().parents[2])
BUILD_TIMEOUT = 1200  # a serial build on a busy machine; about 3 minutes
IO_TIMEOUT = 10
START_TIMEOUT = 30
STOP_TIMEOUT = 30
WORKER = "usr/libexec/sluice/sluice-worker"
TLS_MODULE = "usr/libexec/sluice/sluice-tls.so"  # loaded by a TLS worker
ANALYZE = shutil.which("systemd-analyze")


def ac_version():
    m = re.search(r"^AC_INIT\(\[sluice\], \[([^]]+)\]",
                  (REPO / "configure.ac").read_text(), re.M)
    assert m, "no AC_INIT in configure.ac"
    return m.group(1)


def host_arch():
    return subprocess.run(["dpkg", "--print-architecture"], check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    given = os.environ.get("SLUICE_DEB")
    if given:
        assert os.path.isfile(given), "SLUICE_DEB=%s is not a file" % given
        return pathlib.Path(given)
    if shutil.which("dpkg-buildpackage") is None:
        pytest.skip("dpkg-buildpackage is missing (Debian packages dpkg-dev "
                    "and debhelper) and SLUICE_DEB names no package")
    out = tmp_path_factory.mktemp("deb")
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck")
    log = out / "build.log"
    with open(log, "wb") as f:
        res = subprocess.run([str(REPO / "contrib" / "build-deb.sh"),
                              str(out)], stdout=f, stderr=subprocess.STDOUT,
                             env=env, timeout=BUILD_TIMEOUT)
    assert res.returncode == 0, log.read_text(errors="replace")[-4000:]
    return out / ("sluice_%s_%s.deb" % (ac_version(), host_arch()))


@pytest.fixture(scope="module")
def root(deb, tmp_path_factory):
    r = tmp_path_factory.mktemp("root")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(r)], check=True,
                   timeout=60)
    return r


def unit_dir(root):
    for d in ("lib/systemd/system", "usr/lib/systemd/system"):
        if (root / d / "sluice@.service").exists():
            return root / d
    pytest.fail("no sluice@.service under %s" % root)


def test_name_and_control_fields(deb):
    version = ac_version()
    assert deb.name == "sluice_%s_%s.deb" % (version, host_arch())
    fields = {}
    for name in ("Package", "Version", "Architecture", "Depends",
                 "Built-Using"):
        fields[name] = subprocess.run(
            ["dpkg-deb", "-f", str(deb), name], check=True,
            capture_output=True, text=True).stdout.strip()
    assert fields["Package"] == "sluice"
    assert fields["Version"] == version
    assert fields["Architecture"] == host_arch()
    # the embedded libpython (shlibs) and the python3 of the same version
    assert re.search(r"\blibpython3\.\d+\b", fields["Depends"])
    assert re.search(r"\bpython3 \(>= 3\.\d+\), python3 \(<< 3\.\d+\)",
                     fields["Depends"])
    assert "libev4" in fields["Depends"]
    assert fields["Built-Using"].startswith("node-undici (= ")


def test_files_are_in_their_debian_places(root):
    for path in ("usr/bin/sluice", WORKER, TLS_MODULE):
        p = root / path
        assert p.is_file() and os.access(p, os.X_OK), path
    assert (root / "usr/share/man/man1/sluice.1.gz").is_file()
    assert (root / "usr/share/doc/sluice/copyright").is_file()
    assert (root / "usr/share/doc/sluice/examples/hello.py").is_file()
    # README.md links to docs/*.md by name: both are there, uncompressed
    assert (root / "usr/share/doc/sluice/README.md").is_file()
    assert (root / "usr/share/doc/sluice/docs/settings.md").is_file()
    units = unit_dir(root)
    service = (units / "sluice@.service").read_text()
    assert (units / "sluice@.socket").is_file()
    assert re.search(r"^ExecStart=/usr/bin/sluice ", service, re.M)
    assert "/usr/local" not in service
    assert "/usr/local" not in (units / "sluice@.socket").read_text()
    # Documentation= names a file the package has
    doc = re.search(r"^Documentation=file://(\S+)", service, re.M).group(1)
    assert (root / doc.lstrip("/")).is_file(), doc
    # nothing else under /usr/local, and no build-tree leftovers
    assert not (root / "usr/local").exists()


def test_template_units_are_not_enabled_or_started(deb, tmp_path):
    ctl = tmp_path / "control"
    subprocess.run(["dpkg-deb", "-e", str(deb), str(ctl)], check=True,
                   timeout=60)
    # dh_installsystemd --no-enable --no-start: no script names a unit
    for script in ("preinst", "postinst", "prerm", "postrm"):
        p = ctl / script
        if p.exists():
            assert "sluice@" not in p.read_text(), script


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
def test_units_pass_systemd_analyze_verify(root, tmp_path):
    # verify wants ExecStart='s binary to exist: point it into ROOT, and
    # give the template an instance as systemctl would
    units = []
    for name in ("sluice@.service", "sluice@.socket"):
        text = (unit_dir(root) / name).read_text()
        text = text.replace("/usr/bin/sluice", str(root / "usr/bin/sluice"))
        for unit in (name, name.replace("@.", "@demo.")):
            (tmp_path / unit).write_text(text)
            units.append(str(tmp_path / unit))
    res = subprocess.run([ANALYZE, "verify", "--man=no"] + units,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "" and res.stderr.strip() == "", \
        res.stdout + res.stderr


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path="/"):
    """(status, body) of GET PATH on 127.0.0.1:PORT, Connection: close."""
    with socket.create_connection(("127.0.0.1", port), IO_TIMEOUT) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                  % path.encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(p) for p in f.read().split()]


def test_installed_sluice_serves_the_example_with_its_own_worker(root,
                                                                  tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(REPO / "contrib" / "example" / "hello.py", app)
    port = free_port()
    log = tmp_path / "sluice.log"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLUICE_", "LISTEN_", "NOTIFY_", "WATCHDOG_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    with open(log, "wb") as f:
        proc = subprocess.Popen(
            [str(root / "usr/bin/sluice"), "-b", "127.0.0.1:%d" % port,
             "--chdir", str(app), "hello:app"],
            stdout=f, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
            start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert proc.poll() is None, log.read_text(errors="replace")
            try:
                status, body = get(port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("no answer within %d s:\n%s" % (
                        START_TIMEOUT, log.read_text(errors="replace")))
                time.sleep(0.05)
        assert status == 200
        assert body == b"Hello from sluice!\n"
        worker = str(root / WORKER)
        assert "(workers: %s)" % worker in log.read_text(errors="replace")
        workers = children(proc.pid)
        assert len(workers) == 1
        assert os.readlink("/proc/%d/exe" % workers[0]) == worker
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(STOP_TIMEOUT) == 0, log.read_text(errors="replace")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(STOP_TIMEOUT)
