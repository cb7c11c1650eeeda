"""The configuration file (-c), SLUICE_CMD_ARGS, --check-config,
--print-config, the re-read on HUP, and --user/--group.

A server here is started as an operator would start it with a file:
"sluice -c FILE [ARGS] APP", every setting (bind, workers, the error log)
in the file unless the test is about the command line overriding it.
Serving tests run a WSGI and an ASGI app, each in pump and inline mode;
precedence and validation tests read --print-config and exit statuses,
which is where they show, without starting servers.
"""

import grp
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

import helpers

from helpers import (APPS, Server, alive, assert_usage_error, base_command,
                     children_of, copied_binary, free_port, run_cli, wait_gone,
                     wait_until)

pytestmark = pytest.mark.sluice_only

APPS_BY_KIND = {"wsgi": "wsgi_app:app", "asgi": "asgi_app:app"}
SERVING = [pytest.param(kind, executor, id="%s-%s" % (kind, executor))
           for kind in APPS_BY_KIND for executor in ("pump", "inline")]


class ConfServer(Server):
    """A Server started as "sluice -c CONF ARGS APP": the file (written by
    the test) holds what Server would put on the command line."""

    def __init__(self, workdir, app, conf, **kw):
        super().__init__(workdir, app, **kw)
        self.conf = Path(conf)

    def command(self):
        cmd = [str(self.binary)] if self.binary else base_command()
        return cmd + ["-c", str(self.conf)] + self.args + [self.app]


def conf_text(server_or_binds, error_log, workers=1, extra=""):
    """A configuration file's text: binds, workers, the test apps' path and
    the error log, then EXTRA."""
    binds = getattr(server_or_binds, "binds", server_or_binds)
    return ("# written by test_config.py\n"
            "bind = %s\n"
            "workers = %d\n"
            "pythonpath = %s\n"
            "error_logfile = %s\n%s"
            % (", ".join(binds), workers, APPS, error_log, extra))


def make_conf_server(tmp_path, kind, executor, workers=1, extra="",
                     args=(), env=None, workdir=None):
    """A ConfServer (not started) for KIND's app in EXECUTOR mode, its file
    at TMP_PATH/sluice.conf."""
    workdir = Path(workdir or tmp_path / "srv")
    conf = tmp_path / "sluice.conf"
    s = ConfServer(workdir, APPS_BY_KIND[kind], conf,
                   inline=executor == "inline", args=list(args), env=env)
    conf.write_text(conf_text(s, s.error_log, workers, extra))
    return s


@pytest.fixture
def servers():
    """Servers a test starts, stopped (and judged) when it ends."""
    started = []
    yield started
    problems = []
    for s in started:
        problems += [p + "\n" + s.diagnostics() for p in s.stop()]
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def start(servers, s):
    servers.append(s)
    return s.start()


def print_config(args, env=None):
    rc, out, err = run_cli(list(args) + ["--print-config"], env=env)
    assert rc == 0, err
    assert err == "", err
    return out


def setting(text, name):
    """The values NAME has in a --print-config output."""
    return [line.split(" = ", 1)[1] for line in text.splitlines()
            if line.startswith(name + " = ")]


# ------------------------------------------------------------ serving

@pytest.mark.parametrize("kind,executor", SERVING)
def test_file_sets_bind_and_workers(tmp_path, servers, kind, executor):
    s = start(servers, make_conf_server(tmp_path, kind, executor, workers=2))
    assert s.get("/hello").status == 200
    s.wait_workers(2)
    assert "-c" in s.command() and "-b" not in s.command()


@pytest.mark.parametrize("kind,executor", SERVING)
def test_command_line_overrides_file(tmp_path, servers, kind, executor):
    file_port = free_port()
    conf = tmp_path / "sluice.conf"
    s = ConfServer(tmp_path / "srv", APPS_BY_KIND[kind], conf,
                   inline=executor == "inline")
    # the file binds FILE_PORT with 2 workers; the command line replaces
    # the whole bind list and the worker count
    conf.write_text(conf_text(["127.0.0.1:%d" % file_port], s.error_log, 2))
    s.args = ["-b", s.binds[0], "--workers", "1"]
    start(servers, s)
    assert s.get("/hello").status == 200
    s.wait_workers(1)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", file_port), timeout=2).close()


@pytest.mark.parametrize("kind,executor", SERVING)
def test_cmd_args_env_applies(tmp_path, servers, kind, executor):
    s = make_conf_server(tmp_path, kind, executor,
                         env={"SLUICE_CMD_ARGS": "--health-path '/hz'"})
    start(servers, s)
    r = s.get("/hz")
    assert (r.status, r.body) == (200, b"OK\n")


def test_precedence_file_env_argv(tmp_path):
    conf = tmp_path / "sluice.conf"
    conf.write_text("workers = 2\nthreads = 2\nkeep_alive = 7\n"
                    "bind = 127.0.0.1:1, 127.0.0.1:2\nname = file\n")
    env = {"SLUICE_CMD_ARGS": "--threads 3 -n env -b 127.0.0.1:3"}
    out = print_config(["-c", conf, "--workers", "4", "-n", "argv",
                        "wsgi_app:app"], env)
    assert setting(out, "workers") == ["4"]       # argv over file
    assert setting(out, "threads") == ["3"]       # env over file
    assert setting(out, "keep_alive") == ["7"]    # file over default
    assert setting(out, "name") == ["argv"]       # argv over env over file
    assert setting(out, "bind") == ["127.0.0.1:3"]  # env's list replaces
    out = print_config(["-c", conf, "-b", "127.0.0.1:4", "-b", "127.0.0.1:5",
                        "wsgi_app:app"], env)
    assert setting(out, "bind") == ["127.0.0.1:4", "127.0.0.1:5"]
    out = print_config(["-c", conf, "wsgi_app:app"])
    assert setting(out, "bind") == ["127.0.0.1:1", "127.0.0.1:2"]
    assert setting(out, "threads") == ["2"]


# ------------------------------------------------------------ bad input

@pytest.mark.parametrize("text,line,needle", [
    ("workers = 2\n\nwrokers = 3\n", 3, "unknown setting 'wrokers'"),
    ("# ok\nworkers = lots\n", 2, "argument -w/--workers: invalid integer"),
    ("bind = 127.0.0.1:1\nbind = \n", 2, "'bind' has no value"),
    ("name = \"unterminated\n", 1, "unterminated double-quoted value"),
    ("workers 2\n", 1, "expected '=' after 'workers'"),
    ("config = other.conf\n", 1, "not a setting a file can hold"),
    ("keep_alive = -1\n", 1, "out of range"),
    ("interface = both\n", 1, "invalid choice: 'both'"),
    ("workers = 2\nhttp_protocols = h2, h3\n", 2,
     "argument --http-protocols: invalid choice: 'h3'"),
    ("http_protocols = h2, h2\n", 1, "h2 is named twice"),
    ("http_protocols = \"\"\n", 1, "--http-protocols: must not be empty"),
    ("http2_cleartext = upgrade\n", 1,
     "argument --http2-cleartext: invalid choice: 'upgrade'"),
    ("http2_max_concurrent_streams = 0\n", 1,
     "--http2-max-concurrent-streams: '0' is out of range"),
    ("http2_initial_window_size = 2147483648\n", 1, "out of range"),
    ("http2_max_frame_size = 16383\n", 1,
     "--http2-max-frame-size: '16383' is out of range 16384..16777215"),
    ("http2_max_header_list_size = big\n", 1, "invalid integer: 'big'"),
])
def test_bad_file_names_its_line(tmp_path, text, line, needle):
    conf = tmp_path / "bad.conf"
    conf.write_text(text)
    rc, out, err = run_cli(["-c", conf, "wsgi_app:app"])
    assert_usage_error(rc, err, "%s:%d: " % (conf, line), needle)


def test_missing_file_and_bad_env(tmp_path):
    rc, out, err = run_cli(["-c", tmp_path / "none.conf", "wsgi_app:app"])
    assert_usage_error(rc, err, "none.conf", "No such file")
    rc, out, err = run_cli(["wsgi_app:app"],
                           env={"SLUICE_CMD_ARGS": "--workers 'two"})
    assert_usage_error(rc, err, "SLUICE_CMD_ARGS", "unterminated quote")
    rc, out, err = run_cli(["wsgi_app:app"],
                           env={"SLUICE_CMD_ARGS": "--wrokers 2"})
    assert_usage_error(rc, err, "SLUICE_CMD_ARGS", "--wrokers")


def test_check_config(tmp_path):
    port = free_port()
    conf = tmp_path / "sluice.conf"
    conf.write_text("bind = 127.0.0.1:%d\nworkers = 3\n" % port)
    # The port is taken and the module does not exist: a check that
    # bound or imported would fail.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen(1)
        rc, out, err = run_cli(["-c", conf, "--check-config",
                                "no_such_module_anywhere:app"])
    assert (rc, out, err) == (0, "sluice: configuration OK\n", "")
    assert not (tmp_path / "error.log").exists()


@pytest.mark.parametrize("args,needle", [
    (["--check-config", "no_colon"], "MODULE:CALLABLE"),
    (["--check-config", "-b", "127.0.0.1:notaport", "m:app"], "notaport"),
    (["--check-config", "--user", "no-such-user-here", "m:app"],
     "no such user"),
    (["--check-config", "--group", "no-such-group-here", "m:app"],
     "no such group"),
    (["--check-config", "-w", "0", "m:app"], "--workers"),
    (["--check-config", "--http2-cleartext", "prior-knowledge", "m:app"],
     "argument --http2-cleartext: prior-knowledge needs h2 in"
     " --http-protocols"),
    (["--check-config", "--http-protocols", "h1,h1", "m:app"],
     "argument --http-protocols: h1 is named twice"),
    (["--check-config", "--http2-max-frame-size", "16777216", "m:app"],
     "argument --http2-max-frame-size: '16777216' is out of range"),
])
def test_check_config_fails(args, needle):
    rc, out, err = run_cli(args)
    assert out == ""
    assert_usage_error(rc, err, needle)


def test_print_config_reads_back(tmp_path):
    conf = tmp_path / "sluice.conf"
    conf.write_text("bind = \"unix:%s/a,b.sock\"\nroot_path = '/x # y'\n"
                    "umask = 027\nws_per_message_deflate = false\n"
                    % tmp_path)
    first = print_config(["-c", conf, "--pythonpath", "/p1,/p2", "--loop",
                          "asyncio", "-t", "2.5", "m:app"],
                         {"SLUICE_CMD_ARGS": "--health-path=/hz"})
    # every option of --help, defaults included
    for name in ("workers", "threads", "keep_alive", "timeout", "backlog",
                 "limit_request_line", "health_path", "root_path"):
        assert setting(first, name), name
    assert setting(first, "pythonpath") == ["/p1", "/p2"]
    assert setting(first, "bind") == ['"unix:%s/a,b.sock"' % tmp_path]
    copy = tmp_path / "printed.conf"
    copy.write_text(first)
    assert print_config(["-c", copy, "m:app"]) == first


HTTP2_DEFAULTS = {"http_protocols": "h1", "http2_cleartext": "off",
                  "http2_max_concurrent_streams": "100",
                  "http2_initial_window_size": "65535",
                  "http2_max_frame_size": "16384",
                  "http2_max_header_list_size": "65536"}


def test_print_config_http2_defaults():
    out = print_config(["m:app"])
    for name, value in HTTP2_DEFAULTS.items():
        assert setting(out, name) == [value], name


def test_http2_settings_from_file_read_back(tmp_path):
    """gunicorn's spelling in a file ("h2, h1" unquoted), printed back
    normalised and quoted, and the printed file reads the same; the
    command line overrides the file as for any setting."""
    conf = tmp_path / "sluice.conf"
    conf.write_text("http_protocols = h2, h1\n"
                    "http2_cleartext = prior-knowledge\n"
                    "http2_max_concurrent_streams = 250\n"
                    "http2_initial_window_size = 1048576\n"
                    "http2_max_frame_size = 16777215\n"
                    "http2_max_header_list_size = 0\n")
    rc, out, err = run_cli(["-c", conf, "--check-config", "m:app"])
    assert (rc, out, err) == (0, "sluice: configuration OK\n", "")
    first = print_config(["-c", conf, "m:app"])
    assert setting(first, "http_protocols") == ['"h2,h1"']
    assert setting(first, "http2_cleartext") == ["prior-knowledge"]
    assert setting(first, "http2_max_concurrent_streams") == ["250"]
    assert setting(first, "http2_initial_window_size") == ["1048576"]
    assert setting(first, "http2_max_frame_size") == ["16777215"]
    # gunicorn's "0 = unlimited": the largest value a SETTINGS frame holds
    assert setting(first, "http2_max_header_list_size") == ["2147483647"]
    copy = tmp_path / "printed.conf"
    copy.write_text(first)
    assert print_config(["-c", copy, "m:app"]) == first
    out = print_config(["-c", conf, "--http-protocols", "h2",
                        "--http2-max-frame-size=32768", "m:app"])
    assert setting(out, "http_protocols") == ["h2"]
    assert setting(out, "http2_max_frame_size") == ["32768"]
    # the file's prior-knowledge with the command line's h1 alone
    rc, out, err = run_cli(["-c", conf, "--http-protocols", "h1", "m:app"])
    assert_usage_error(rc, err, "prior-knowledge needs h2")


# ------------------------------------------------------------ HUP

def hup_and_wait(s, needle):
    mark = s.log_mark()
    os.kill(s.pid, signal.SIGHUP)
    return s.wait_for_log(needle, timeout=10, since=mark)


@pytest.mark.parametrize("kind,executor", SERVING)
def test_hup_rereads_file(tmp_path, servers, kind, executor):
    s = start(servers, make_conf_server(tmp_path, kind, executor))
    old = s.wait_workers(1)
    assert s.get("/hz").status == 404  # the app's own answer
    s.conf.write_text(conf_text(s, s.error_log, 2, "health_path = /hz\n"))
    log = hup_and_wait(s, "re-read %s" % s.conf)
    assert "2 workers (was 1)" in log
    wait_until(lambda: not set(old) & set(s.worker_pids()), 20,
               "the old worker to be replaced")
    s.wait_workers(2, timeout=20)
    r = s.get("/hz")
    assert (r.status, r.body) == (200, b"OK\n")


@pytest.mark.parametrize("kind,executor", SERVING)
def test_hup_broken_file_changes_nothing(tmp_path, servers, kind, executor):
    s = start(servers, make_conf_server(tmp_path, kind, executor))
    old = s.wait_workers(1)
    good = s.conf.read_text()
    s.conf.write_text(good + "workers = lots\n")
    log = hup_and_wait(s, "the configuration was not re-read")
    lines = [l for l in log.splitlines() if "[ERROR]" in l]
    assert len(lines) == 1, log
    assert "%s:6: argument -w/--workers: invalid integer: 'lots'" \
        % s.conf in lines[0]
    assert "rolling restart" not in log
    assert s.get("/hello").status == 200
    # a good file afterwards is read: the supervisor went on as before
    s.conf.write_text(good + "health_path = /hz\n")
    hup_and_wait(s, "re-read %s" % s.conf)
    wait_until(lambda: s.get("/hz").status == 200, 20,
               "the new settings to serve")
    assert s.worker_pids() != old


def test_hup_takes_http2_settings(tmp_path, servers):
    """The HTTP/2 settings are the workers': a HUP that changes them is a
    rolling restart, nothing kept; one that breaks them changes nothing."""
    s = start(servers, make_conf_server(tmp_path, "wsgi", "pump"))
    old = s.wait_workers(1)
    good = s.conf.read_text()
    s.conf.write_text(good + "http2_cleartext = prior-knowledge\n")
    log = hup_and_wait(s, "the configuration was not re-read")
    assert "argument --http2-cleartext: prior-knowledge needs h2" in log
    assert s.worker_pids() == old
    s.conf.write_text(good + "http_protocols = h2, h1\n"
                      "http2_max_concurrent_streams = 8\n")
    log = hup_and_wait(s, "re-read %s" % s.conf)
    assert "only read at start" not in log, log
    wait_until(lambda: not set(old) & set(s.worker_pids()), 20,
               "the old worker to be replaced")
    assert s.get("/hello").status == 200


def test_hup_keeps_start_only_settings(tmp_path, servers):
    s = start(servers, make_conf_server(tmp_path, "wsgi", "pump"))
    old = s.wait_workers(1)
    other = "127.0.0.1:%d" % free_port()
    s.conf.write_text(conf_text([other], s.error_log, 1,
                                "backlog = 16\nname = renamed\n"))
    log = hup_and_wait(s, "re-read %s" % s.conf)
    assert "bind, backlog, name: only read at start, kept as they were" \
        in log, log
    assert s.get("/hello").status == 200  # still on the old address
    # the new worker keeps the old --name too
    wait_until(lambda: not set(old) & set(s.worker_pids()), 20,
               "the old worker to be replaced")
    with open("/proc/%d/cmdline" % s.wait_workers(1)[0], "rb") as f:
        assert f.read().startswith(b"sluice: worker "), "renamed"


@pytest.mark.parametrize("kind,executor", SERVING)
def test_usr2_new_supervisor_reads_the_file(tmp_path, kind, executor):
    """A binary upgrade execs the command line as given (-c FILE), so the
    new supervisor reads the file as it is now."""
    pidfile = tmp_path / "sluice.pid"
    s = make_conf_server(tmp_path, kind, executor,
                         extra="pid = %s\n" % pidfile)
    s.binary = copied_binary(tmp_path)
    s.start()
    new_sup = None
    try:
        s.wait_workers(1)
        assert s.get("/hz").status == 404
        s.conf.write_text(conf_text(s, s.error_log, 2, "pid = %s\n"
                                    "health_path = /hz\n" % pidfile))
        os.kill(s.pid, signal.SIGUSR2)
        s.proc.wait(20)
        assert s.proc.returncode == 0, s.diagnostics()
        new_sup = int(pidfile.read_text())
        assert new_sup != s.pid and alive(new_sup)
        r = s.get("/hz")
        assert (r.status, r.body) == (200, b"OK\n")
        # but an upgrade keeps the number of workers running (TTIN/TTOU
        # included): the file's new count waits for a HUP
        assert len(children_of(new_sup)) == 1
        mark = s.log_mark()
        os.kill(new_sup, signal.SIGHUP)
        s.wait_for_log("2 workers (was 1)", since=mark)
        wait_until(lambda: len(children_of(new_sup)) == 2, 20,
                   "the new supervisor's 2 workers")
    finally:
        if new_sup is not None and alive(new_sup):
            os.kill(new_sup, signal.SIGTERM)
            wait_gone([new_sup], 10, "the new supervisor to exit")
        problems = s.stop()
    assert problems == [], problems


# ------------------------------------------------------------ --user

def status_ids(pid):
    """(real uid, real gid) of PID from /proc/PID/status."""
    ids = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Uid", "Gid", "Groups"):
                ids[key] = rest.split()
    return ids


needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="switching the workers' user needs "
                                       "root; these tests run as uid %d"
                                       % os.geteuid())


@pytest.fixture
def open_dir():
    """A directory every user can enter (pytest's tmp_path is 0700, which
    a worker running as nobody could not open its error log in)."""
    d = tempfile.mkdtemp(prefix="sl-user-")
    os.chmod(d, 0o755)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@needs_root
@pytest.mark.parametrize("kind,executor", SERVING)
def test_user_nobody(tmp_path, servers, open_dir, kind, executor):
    nobody = pwd.getpwnam("nobody")
    sock = open_dir / "s.sock"
    s = ConfServer(open_dir / "srv", APPS_BY_KIND[kind],
                   tmp_path / "sluice.conf", inline=executor == "inline",
                   binds=["127.0.0.1:%d" % free_port(), "unix:%s" % sock],
                   env={"E2E_CALL_LOG": ""})  # the app logs no calls
    s.workdir.chmod(0o755)
    s.conf.write_text(conf_text(s, s.error_log, 2, "user = nobody\n"))
    start(servers, s)
    workers = s.wait_workers(2)
    for pid in workers:
        ids = status_ids(pid)
        assert ids["Uid"] == [str(nobody.pw_uid)] * 4, ids
        assert ids["Gid"] == [str(nobody.pw_gid)] * 4, ids
        assert "0" not in ids["Groups"], ids
    assert status_ids(s.pid)["Uid"][0] == "0"  # the supervisor stays
    st = os.stat(sock)
    assert stat.S_ISSOCK(st.st_mode)
    assert (st.st_uid, st.st_gid) == (nobody.pw_uid, nobody.pw_gid)
    assert os.stat(s.error_log).st_uid == nobody.pw_uid
    assert s.get("/hello").status == 200


@needs_root
def test_user_nobody_with_tls(tmp_path, servers, open_dir):
    """--user with TLS: the supervisor's TLS check runs as the workers'
    user and opens the error log, so the log is theirs before it runs
    (it used to be created by root first: exit 2, "cannot open the error
    log")."""
    nobody = pwd.getpwnam("nobody")
    pki = helpers.tls_pki()
    for name in ("cert", "key"):
        shutil.copy(pki[name], open_dir / ("%s.pem" % name))
        os.chmod(open_dir / ("%s.pem" % name), 0o644)
    s = ConfServer(open_dir / "srv", "wsgi_app:app", tmp_path / "c.conf",
                   env={"E2E_CALL_LOG": ""})
    s.workdir.chmod(0o755)
    s.conf.write_text(conf_text(
        s, s.error_log, 1, "user = nobody\ncertfile = %s\nkeyfile = %s\n"
        % (open_dir / "cert.pem", open_dir / "key.pem")))
    start(servers, s)
    (pid,) = s.wait_workers(1)
    assert status_ids(pid)["Uid"] == [str(nobody.pw_uid)] * 4
    assert os.stat(s.error_log).st_uid == nobody.pw_uid
    out = subprocess.run(
        ["curl", "-sS", "--cacert", str(pki["ca"]), "-o", "/dev/null",
         "-w", "%{http_code}",
         "https://localhost:%d/hello" % s.port], capture_output=True,
        text=True, timeout=20)
    assert out.stdout == "200", out


@needs_root
def test_user_numeric_and_group(tmp_path, servers, open_dir):
    nobody = pwd.getpwnam("nobody")
    s = ConfServer(open_dir / "srv", "wsgi_app:app", tmp_path / "c.conf",
                   env={"E2E_CALL_LOG": ""},
                   args=["-u", str(nobody.pw_uid), "-g", "daemon"])
    s.workdir.chmod(0o755)
    s.conf.write_text(conf_text(s, s.error_log))
    start(servers, s)
    ids = status_ids(s.wait_workers(1)[0])
    assert ids["Uid"][0] == str(nobody.pw_uid)
    assert ids["Gid"][0] == str(grp.getgrnam("daemon").gr_gid)


@pytest.mark.skipif(os.geteuid() == 0,
                    reason="as root, test_user_refused_as_nobody checks this")
def test_user_refused_when_not_root():
    rc, out, err = run_cli(["--user", "root", "--check-config", "m:app"])
    assert_usage_error(rc, err, "needs root")


@needs_root
def test_user_refused_as_nobody():
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    cmd = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
           base_command()[0], "--user", "daemon", "m:app"]
    p = subprocess.run(cmd, capture_output=True, timeout=20,
                       env={"PATH": "/usr/bin:/bin"})
    err = p.stderr.decode()
    assert_usage_error(p.returncode, err, "-u/--user", "needs root",
                       "sluice runs as uid %d" % pwd.getpwnam("nobody").pw_uid)
