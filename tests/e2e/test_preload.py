"""--preload: one zygote per generation imports the app and forks the
workers (issue 30; supervisor/zygote.c, worker/zygote.c, common/zygote.h).

Each test writes its own app, pl_app.py, into a directory of its own and
edits it there. Every import appends the importing process's pid to the
file "imports" in the server's directory: that file says who imported the
app, and how often. The app answers "/pid" with its pid (for helpers.Load)
and every other path with "VERSION PID FROZEN LIFESPAN": the version the
test wrote, the worker's pid, gc.get_freeze_count() and, for ASGI, the pid
that ran lifespan startup ("-" for WSGI); "/slow" sleeps a second first,
and "/hang" never returns.

Who is who comes from the supervisor's log ("Booting the zygote of
generation N with pid: P", "Booting worker W with pid: P"), not from
process titles: a worker just forked still carries its zygote's title.

Checked here: the app is imported once, by the zygote, and forked workers
(the supervisor's children) serve it, in WSGI and ASGI, pump and inline
mode, with ASGI lifespan run in each worker; HUP and --reload bring a new
zygote with the new code and let the old one go after its last worker,
without a failed request; a zygote killed with SIGKILL is started again
while its workers serve on, and forks the next worker; a new generation
that cannot import leaves the old one serving; a thread started at import
and a first generation that cannot import end the supervisor with exit 2;
TERM drains and leaves no process; gc.freeze() reaches the workers;
--max-requests replaces a worker by a fork; USR2 hands over to a new
supervisor with its own zygote; a supervisor killed with SIGKILL leaves
neither zygote nor worker; a hung forked worker has its tracebacks dumped
and is replaced by a fork; after USR1 (the error log moved away), a
worker forked later logs to the new file.

In TLS mode (SLUICE_E2E_TLS=1) the tests that serve through forked
workers run: the zygote sets up TLS before it forks; the others are
plain_only.
"""

import os
import re
import signal
import threading
import time

import pytest

import helpers
from conftest import EXECUTORS
from helpers import (Load, Req, Server, alive, build_request, run_cli,
                     wait_gone, wait_until)

pytestmark = pytest.mark.sluice_only

APP = "pl_app:app"
RESTART_TIMEOUT = 20  # a HUP (or an edit) to new workers serving, at most

ZYGOTE_BOOT = re.compile(r"Booting the zygote of generation (\d+) with pid: "
                         r"(\d+)")
WORKER_BOOT = re.compile(r"Booting worker (\d+) with pid: (\d+)"
                         r"( \(forked by the zygote\))?")

HEAD = """\
import gc
import os
import time

VERSION = {version!r}
if os.environ.get("E2E_TMP"):
    with open(os.path.join(os.environ["E2E_TMP"], "imports"), "a") as f:
        f.write("%d\\n" % os.getpid())
{extra}


def record(line):
    path = os.environ.get("E2E_CALL_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\\n")


def hang_here_forever():
    while True:
        time.sleep(0.05)


def answer(path, lifespan):
    if path == "/pid":
        return str(os.getpid()).encode()
    return ("%s %d %d %s" % (VERSION, os.getpid(), gc.get_freeze_count(),
                             lifespan)).encode()
"""

WSGI_APP = HEAD + """

def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/slow":
        record("slow-start")
        time.sleep(1)
    elif path == "/hang":
        record("hang-start")
        hang_here_forever()
    body = answer(path, "-")
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]
"""

ASGI_APP = HEAD + """
import asyncio

LIFESPAN = None


async def app(scope, receive, send):
    global LIFESPAN
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                LIFESPAN = os.getpid()
                await send({{"type": "lifespan.startup.complete"}})
            elif message["type"] == "lifespan.shutdown":
                await send({{"type": "lifespan.shutdown.complete"}})
                return
    if scope["path"] == "/slow":
        record("slow-start")
        await asyncio.sleep(1)
    body = answer(scope["path"], LIFESPAN)
    await send({{"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]}})
    await send({{"type": "http.response.body", "body": body}})
"""

BROKEN = "raise RuntimeError('pl_app is broken on purpose')"
THREAD = """\
import threading
threading.Thread(target=time.sleep, args=(60,), name="pool-keeper",
                 daemon=True).start()"""


class AppDir:
    """The app's directory, where a test writes (and rewrites) pl_app.py."""

    def __init__(self, path, iface="wsgi"):
        self.path = path
        self.iface = iface
        path.mkdir(parents=True)
        self.write("v1")

    def write(self, version, extra=""):
        text = WSGI_APP if self.iface == "wsgi" else ASGI_APP
        # as an editor that saves in place: truncate and write
        with open(self.path / "pl_app.py", "w") as f:
            f.write(text.format(version=version, extra=extra))


class Answer:
    """One parsed answer of the app: version, pid, frozen, lifespan."""

    def __init__(self, body):
        v, pid, frozen, lifespan = body.decode().split(" ")
        self.version, self.pid, self.frozen = v, int(pid), int(frozen)
        self.lifespan = None if lifespan in ("-", "None") else int(lifespan)

    def __repr__(self):
        return "<%s pid=%d frozen=%d lifespan=%s>" % (
            self.version, self.pid, self.frozen, self.lifespan)


def start(make_server, appdir, workers=2, args=(), inline=False, env=None):
    """A --preload server for APPDIR's app (make_server: stopped, and its
    leftover processes failed, at the end of the test)."""
    return make_server(APP, workers=workers, inline=inline,
                       args=["--preload"] + list(args), env=env,
                       pythonpath=(str(appdir.path),))


def ask(s, path="/"):
    r = s.get(path)
    assert r.status == 200, r
    return Answer(r.body)


def imports(s):
    """The pids that imported the app, in order."""
    try:
        text = (s.workdir / "imports").read_text()
    except FileNotFoundError:
        return []
    return [int(line) for line in text.split()]


def zygotes(s, since=0, gen=None):
    """The zygote pids the log has booted after SINCE (of generation GEN)."""
    return [int(p) for g, p in ZYGOTE_BOOT.findall(s.log_since(since))
            if gen is None or int(g) == gen]


def workers(s, since=0):
    """The live workers the log has booted after SINCE."""
    return sorted(int(p) for _, p, _ in WORKER_BOOT.findall(s.log_since(since))
                  if alive(int(p)))


def ppid(pid):
    return helpers._proc_stat(pid)[1]


def title(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().split(b"\0")[0].decode()


def answers_from(s, pids, timeout=10):
    """{pid: Answer} of "/" from each of PIDS (a load of fresh and kept
    connections, until every one has answered); an answer from a pid
    outside PIDS, or a failed request, fails."""
    got = Answers()
    with Load(s, mix=[got.req], conns=4, keep_alive="mixed") as load:
        got.wait_for(pids, timeout=timeout)
    assert not load.failed(), load.failure_report()
    assert set(got.last) <= set(pids), (got.last, pids)
    return got.last


class Answers:
    """A Load request for "/" whose good answers have one of VERSIONS
    (any, when none are given); it keeps the last answer of each pid, and
    which (version, pid) pairs it has seen."""

    def __init__(self, *versions):
        self.versions = versions
        self.seen = set()
        self.last = {}
        self.lock = threading.Lock()
        self.req = Req("/", check=self.check)

    def check(self, r):
        a = Answer(r.body)
        with self.lock:
            self.seen.add((a.version, a.pid))
            self.last[a.pid] = a
        return not self.versions or a.version in self.versions

    def wait_for(self, pids, version=None, timeout=10):
        """Until each of PIDS has answered (with VERSION)."""
        def done():
            with self.lock:
                if version is None:
                    return set(pids) <= set(self.last)
                return {(version, p) for p in pids} <= self.seen
        wait_until(done, timeout, "%s from each of %s"
                   % (version or "answers", sorted(pids)))


# ------------------------------------------------- 1. imported once, forked

@pytest.mark.parametrize("iface", ["wsgi", "asgi"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_imported_once_by_the_zygote_and_served_by_forks(make_server, tmp_path,
                                                         executor, iface):
    appdir = AppDir(tmp_path / "app", iface)
    s = start(make_server, appdir, workers=3, inline=executor == "inline")
    s.wait_for_log("All 3 workers are ready")
    log = s.error_log_text()
    [zygote] = zygotes(s)
    pids = workers(s)
    assert len(pids) == 3, log
    assert len(WORKER_BOOT.findall(log)) == 3, log
    assert all(forked for _, _, forked in WORKER_BOOT.findall(log)), log
    assert "The zygote of generation 0 (pid %d) is ready" % zygote in log
    assert imports(s) == [zygote]
    assert zygote not in pids
    # the workers are the supervisor's children, not the zygote's
    assert {ppid(p) for p in pids + [zygote]} == {s.pid}
    assert title(zygote) == "sluice: zygote of gen 0 [%s]" % APP
    assert sorted(title(p) for p in pids) == [
        "sluice: worker %d [%s]" % (i, APP) for i in (1, 2, 3)]
    # concurrent connections, so that more than one worker takes some
    got = Answers("v1")
    with Load(s, mix=[got.req], conns=4, keep_alive=False) as load:
        wait_until(lambda: len(got.last) >= 2, 10,
                   "answers from two workers (%s)" % got.last)
    assert not load.failed(), load.failure_report()
    assert set(got.last) <= set(pids), (got.last, pids)
    for a in got.last.values():
        assert a.frozen > 0, a
        if iface == "asgi":  # lifespan ran in the worker, after the fork
            assert a.lifespan == a.pid, a
        else:
            assert a.lifespan is None
    assert imports(s) == [zygote]


# ----------------------------------------------------------------- 2. HUP

@pytest.mark.parametrize("shape", [("wsgi", False), ("asgi", True)],
                         ids=["wsgi-pump", "asgi-inline"])
def test_hup_brings_a_new_zygote_with_the_new_code(make_server, tmp_path,
                                                   shape):
    iface, inline = shape
    appdir = AppDir(tmp_path / "app", iface)
    s = start(make_server, appdir, workers=2, inline=inline,
              args=["--graceful-timeout", "5"])
    s.wait_for_log("All 2 workers are ready")
    [old_zygote] = zygotes(s)
    old = workers(s)
    versions = Answers("v1", "v2")
    with Load(s, mix=[versions.req, Req("/pid")], conns=3,
              keep_alive="mixed") as load:
        mark = s.log_mark()
        appdir.write("v2")
        load.event("HUP")
        os.kill(s.pid, signal.SIGHUP)
        s.wait_for_log("Rolling restart done", since=mark,
                       timeout=RESTART_TIMEOUT)
        wait_gone(old, RESTART_TIMEOUT, "the old workers to drain")
        new = workers(s, since=mark)
        assert len(new) == 2, s.log_since(mark)
        versions.wait_for(new, "v2")
        load.wait_served_by(new)
        # the old zygote goes once its last worker is gone
        wait_gone([old_zygote], 5, "the old zygote to exit")
    assert not load.failed(), load.failure_report()
    assert {p for _, p in versions.seen} & set(old), \
        "no request reached the old workers"
    log = s.log_since(mark)
    [new_zygote] = zygotes(s, since=mark, gen=1)
    assert imports(s) == [old_zygote, new_zygote]
    assert "The zygote of generation 0 (pid %d) has no worker left: " \
        "stopping it" % old_zygote in log, log
    assert len(WORKER_BOOT.findall(log)) == 2, log
    assert all(forked for _, _, forked in WORKER_BOOT.findall(log)), log
    assert {ppid(p) for p in new + [new_zygote]} == {s.pid}
    for a in answers_from(s, set(new)).values():
        assert a.version == "v2", a


# ------------------------------------------------------ 3. zygote SIGKILL

def test_killed_zygote_is_restarted_while_its_workers_serve_on(make_server,
                                                               tmp_path):
    appdir = AppDir(tmp_path / "app")
    s = start(make_server, appdir, workers=2)
    s.wait_for_log("All 2 workers are ready")
    [zygote] = zygotes(s)
    pids = workers(s)
    with Load(s, conns=3, keep_alive="mixed") as load:
        mark = s.log_mark()
        load.event("SIGKILL to the zygote")
        os.kill(zygote, signal.SIGKILL)
        s.wait_for_log("The zygote of generation 0 (pid %d) was killed by "
                       "signal 9 (Killed); its workers serve on" % zygote,
                       since=mark)
        wait_until(lambda: zygotes(s, since=mark), 10,
                   "a new zygote to boot")
        [fresh] = zygotes(s, since=mark, gen=0)
        s.wait_for_log("The zygote of generation 0 (pid %d) is ready"
                       % fresh, since=mark)
        load.wait_answers(pids, n=30)
        assert workers(s) == pids  # nobody replaced, nobody lost
        # one more worker: forked by the new zygote
        mark = s.log_mark()
        load.event("TTIN")
        os.kill(s.pid, signal.SIGTTIN)
        log = s.wait_for_log("(forked by the zygote)", since=mark)
        [(wid, newcomer, _)] = WORKER_BOOT.findall(log)
        s.wait_for_log("Worker %s (pid %s) is ready" % (wid, newcomer),
                       since=mark)
        load.wait_served_by([int(newcomer)])
    assert not load.failed(), load.failure_report()
    assert not alive(zygote)
    assert alive(fresh) and ppid(fresh) == s.pid
    assert ppid(int(newcomer)) == s.pid
    assert workers(s) == sorted(pids + [int(newcomer)])
    assert imports(s) == [zygote, fresh]


# ------------------------------------------- 4. import error, new generation

@pytest.mark.plain_only("about the restart, not the transport")
@pytest.mark.parametrize("fault", [(BROKEN, "pl_app is broken on purpose"),
                                   (THREAD, "('pool-keeper', thread id")],
                         ids=["raises", "thread"])
def test_import_error_in_a_new_generation_keeps_the_old_serving(make_server,
                                                                tmp_path,
                                                                fault):
    extra, said = fault
    appdir = AppDir(tmp_path / "app")
    s = start(make_server, appdir, workers=2)
    s.wait_for_log("All 2 workers are ready")
    [zygote] = zygotes(s)
    old = workers(s)
    mark = s.log_mark()
    appdir.write("v2", extra=extra)
    os.kill(s.pid, signal.SIGHUP)
    log = s.wait_for_log("Rolling restart stopped", since=mark,
                         timeout=RESTART_TIMEOUT)
    assert "its zygote could not load the application" in log, log
    assert said in log, log
    [broken] = zygotes(s, since=mark, gen=1)
    assert imports(s) == [zygote, broken]  # it did start importing
    wait_gone([broken], 5, "the broken zygote to exit")
    assert s.proc.poll() is None
    assert workers(s) == old
    for a in answers_from(s, set(old)).values():
        assert a.version == "v1", a
    assert "Booting worker" not in s.log_since(mark)

    # fixed: the next HUP serves the new code
    mark = s.log_mark()
    appdir.write("v3")
    os.kill(s.pid, signal.SIGHUP)
    s.wait_for_log("Rolling restart done", since=mark, timeout=RESTART_TIMEOUT)
    wait_gone(old + [zygote], RESTART_TIMEOUT,
              "the old workers and their zygote to exit")
    new = workers(s, since=mark)
    assert len(new) == 2
    for a in answers_from(s, set(new)).values():
        assert a.version == "v3", a
    assert imports(s) == [zygote, broken] + zygotes(s, since=mark)


# --------------------------------------------- 5. refused at the first load

def run_refused(tmp_path, extra):
    """A --preload server whose app does EXTRA at import, run to its end:
    (status, stderr, seconds it ran)."""
    appdir = AppDir(tmp_path / "app")
    appdir.write("v1", extra=extra)
    t0 = time.monotonic()
    rc, _, err = run_cli(helpers.bind_args() +
                         ["-w", "2", "--preload", "--pythonpath",
                          str(appdir.path), APP],
                         timeout=20, env={"E2E_TMP": str(tmp_path)})
    return rc, err, time.monotonic() - t0


@pytest.mark.plain_only("the app never serves")
def test_thread_started_at_import_is_refused_by_name(tmp_path):
    rc, err, took = run_refused(tmp_path, THREAD)
    assert rc == 2, err
    assert "--preload: a thread runs in the zygote ('pool-keeper', thread id" \
        in err, err
    assert "Booting worker" not in err, err
    assert took < 10, took
    # the zygote alone imported the app, once
    assert len((tmp_path / "imports").read_text().split()) == 1


@pytest.mark.plain_only("the app never serves")
def test_import_error_in_the_first_generation_exits_2(tmp_path):
    rc, err, took = run_refused(tmp_path, BROKEN)
    assert rc == 2, err
    assert "cannot import module 'pl_app'" in err, err
    assert "pl_app is broken on purpose" in err, err
    assert "Booting worker" not in err, err
    assert took < 10, took


# ------------------------------------------------------------ 6. TERM drains

def test_term_answers_the_request_in_flight_and_leaves_nothing(make_server,
                                                               tmp_path):
    appdir = AppDir(tmp_path / "app")
    s = start(make_server, appdir, workers=2, args=["--graceful-timeout", "5"])
    s.wait_for_log("All 2 workers are ready")
    everyone = workers(s) + zygotes(s)
    assert len(everyone) == 3
    with s.connect() as c:
        c.send(build_request("GET", "/slow", [("Connection", "close")]))
        s.wait_for_call("slow-start")
        t0 = time.monotonic()
        os.kill(s.pid, signal.SIGTERM)
        r = c.read_response()
    assert r.status == 200, r
    assert Answer(r.body).version == "v1"
    assert s.proc.wait(10) == 0, s.diagnostics()
    assert time.monotonic() - t0 < 5
    wait_gone(everyone, 5, "the workers and the zygote to exit")
    assert helpers.live_pids_in_group(s.pid) == []


# ------------------------------------------------------------ 7. gc.freeze

@pytest.mark.plain_only("about the app's memory, not the transport")
def test_gc_freeze_reaches_the_workers_with_preload_only(make_server,
                                                         tmp_path):
    appdir = AppDir(tmp_path / "app")
    preload = start(make_server, appdir, workers=1)
    plain = make_server(APP, workers=1, pythonpath=(str(appdir.path),))
    frozen = ask(preload)
    assert frozen.frozen > 0, frozen
    assert frozen.pid != imports(preload)[0]
    unfrozen = ask(plain)
    assert unfrozen.frozen == 0, unfrozen
    assert imports(plain) == [unfrozen.pid]  # the worker imported it


# ---------------------------------------------------------- 8. max-requests

@pytest.mark.plain_only("about the worker's replacement, not the transport")
def test_max_requests_replaces_a_worker_by_a_fork(make_server, tmp_path):
    appdir = AppDir(tmp_path / "app")
    s = start(make_server, appdir, workers=1, args=["--max-requests", "5"])
    s.wait_for_log("All 1 workers are ready")
    [zygote] = zygotes(s)
    [first] = workers(s)
    mark = s.log_mark()
    served = set()

    def replaced():
        served.add(ask(s).pid)
        return len(served) >= 2
    wait_until(replaced, 10, "an answer from a second worker")
    log = s.wait_for_log("(forked by the zygote)", since=mark)
    [(_, successor, _)] = WORKER_BOOT.findall(log)
    assert served == {first, int(successor)}
    wait_gone([first], 10, "the retired worker to exit")
    assert ppid(int(successor)) == s.pid
    assert imports(s) == [zygote]
    assert "retired: draining" in s.log_since(mark)


# ------------------------------------------------------------------- 9. USR2

@pytest.mark.plain_only("about the supervisor's hand-over, not the transport")
def test_usr2_new_supervisor_has_its_own_zygote(tmp_path):
    appdir = AppDir(tmp_path / "app")
    pidfile = tmp_path / "sluice.pid"
    s = Server(tmp_path / "srv", APP, workers=1,
               args=["--preload", "--pid", str(pidfile)],
               pythonpath=(str(appdir.path),)).start()
    new_sup = None
    try:
        s.wait_for_log("All 1 workers are ready")
        [old_zygote] = zygotes(s)
        [old_worker] = workers(s)
        mark = s.log_mark()
        os.kill(s.pid, signal.SIGUSR2)
        assert s.proc.wait(20) == 0, s.diagnostics()
        new_sup = int(pidfile.read_text())
        assert new_sup != s.pid and alive(new_sup)
        wait_gone([old_zygote, old_worker], 5,
                  "the old zygote and worker to exit")
        [new_zygote] = zygotes(s, since=mark)
        [new_worker] = workers(s, since=mark)
        assert ppid(new_zygote) == ppid(new_worker) == new_sup
        assert ask(s).pid == new_worker
        assert imports(s) == [old_zygote, new_zygote]
    finally:
        if new_sup is not None and alive(new_sup):
            left = helpers.children_of(new_sup)
            os.kill(new_sup, signal.SIGTERM)
            wait_gone([new_sup] + left, 10, "the new supervisor to exit")
        problems = s.stop()
    assert problems == []


# ----------------------------------------------------------------- 10. reload

@pytest.mark.plain_only("about the restart, not the transport")
def test_reload_edit_brings_a_new_zygote(make_server, tmp_path):
    appdir = AppDir(tmp_path / "app")
    (tmp_path / "tmp").mkdir()
    s = start(make_server, appdir, workers=1, args=["--reload"],
              env={"TMPDIR": str(tmp_path / "tmp")})
    s.wait_for_log("All 1 workers are ready")
    [zygote] = zygotes(s)
    [old] = workers(s)
    mark = s.log_mark()
    appdir.write("v2")
    wait_until(lambda: ask(s).version == "v2", RESTART_TIMEOUT,
               "the new code to serve")
    log = s.wait_for_log("Rolling restart done", since=mark,
                         timeout=RESTART_TIMEOUT)
    assert "--reload: %s changed" % (appdir.path / "pl_app.py") in log, log
    [fresh] = zygotes(s, since=mark, gen=1)
    wait_gone([old, zygote], RESTART_TIMEOUT,
              "the old worker and its zygote to exit")
    [new] = workers(s, since=mark)
    assert ppid(new) == ppid(fresh) == s.pid
    assert imports(s) == [zygote, fresh]
    assert ask(s).pid == new


# ------------------------------------------------------- 11. supervisor gone

@pytest.mark.plain_only("about processes, not the transport")
def test_supervisor_killed_leaves_no_zygote_and_no_worker(make_server,
                                                          tmp_path):
    """Forked workers ask for SIGTERM at the supervisor's death once they
    are its children; the zygote reads EOF on its channel."""
    appdir = AppDir(tmp_path / "app")
    s = start(make_server, appdir, workers=2)
    s.wait_for_log("All 2 workers are ready")
    everyone = workers(s) + zygotes(s)
    assert len(everyone) == 3
    os.kill(s.pid, signal.SIGKILL)
    s.proc.wait(5)
    wait_gone(everyone, 2, "the orphaned zygote and workers to exit")


# ---------------------------------------------------------------- 12. USR1

@pytest.mark.plain_only("about the error log, not the transport")
def test_usr1_a_worker_forked_after_it_logs_to_the_new_file(make_server,
                                                            tmp_path):
    appdir = AppDir(tmp_path / "app")
    s = start(make_server, appdir, workers=1)
    s.wait_for_log("All 1 workers are ready")
    moved = s.error_log.with_name("error.log.1")
    os.rename(s.error_log, moved)
    os.kill(s.pid, signal.SIGUSR1)
    s.wait_for_log("log files reopened")
    os.kill(s.pid, signal.SIGTTIN)
    log = s.wait_for_log("(forked by the zygote)")
    [(wid, pid, _)] = WORKER_BOOT.findall(log)
    said = "worker %s serving %s" % (wid, APP)
    # it says so in one file or the other: then look where
    wait_until(lambda: said in s.error_log_text() + moved.read_text(), 5,
               "worker %s (pid %s) to say it serves" % (wid, pid))
    assert said not in moved.read_text()
    assert said in s.error_log_text()


# ------------------------------------------------------------ 13. hung app

@pytest.mark.plain_only("about the health check, not the transport")
def test_hung_forked_worker_is_dumped_and_replaced_by_a_fork(make_server,
                                                             tmp_path):
    """faulthandler, set up in the zygote, dumps the forked worker's
    tracebacks on the supervisor's SIGABRT."""
    appdir = AppDir(tmp_path / "app")
    s = start(make_server, appdir, workers=1, args=["--timeout", "2"])
    s.wait_for_log("All 1 workers are ready")
    [zygote] = zygotes(s)
    [hung] = workers(s)
    mark = s.log_mark()
    with s.connect() as c:
        c.send(build_request("GET", "/hang"))
        s.wait_for_call("hang-start")
        log = s.wait_for_log("in hang_here_forever", timeout=10, since=mark)
        assert "Worker 1 (pid %d) timed out" % hung in log, log
        with pytest.raises(helpers.PeerClosed):
            c.read_response()
    wait_gone([hung], 5, "the hung worker to die")
    log = s.wait_for_log("(forked by the zygote)", since=mark)
    [(_, successor, _)] = WORKER_BOOT.findall(log)
    assert ask(s).pid == int(successor)
    assert imports(s) == [zygote]
