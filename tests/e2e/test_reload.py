"""--reload: an edit to the app's source restarts the workers, as HUP does.

Each test writes its own app into a fresh directory: app.py, which imports
pkg/helper.py (a directory only the worker's module report makes the
supervisor watch) and answers "<version> <word>" on every path. Every test
runs for both executors (pump, inline) and both interfaces (WSGI, ASGI).
"""

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

import helpers
from conftest import EXECUTORS
from helpers import Load, Req, Server, wait_until

pytestmark = pytest.mark.sluice_only

RELOAD_TIMEOUT = 20  # an edit to new workers serving, at most

WSGI_APP = """\
from pkg import helper

VERSION = {version!r}


def app(environ, start_response):
    if environ["PATH_INFO"] == "/later":  # imported by a request
        from later import late
        body = late.WORD.encode()
    else:
        body = ("%s %s" % (VERSION, helper.word())).encode()
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]
"""

ASGI_APP = """\
from pkg import helper

VERSION = {version!r}


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({{"type": "lifespan.startup.complete"}})
            elif message["type"] == "lifespan.shutdown":
                await send({{"type": "lifespan.shutdown.complete"}})
                return
    if scope["path"] == "/later":  # imported by a request
        from later import late
        body = late.WORD.encode()
    else:
        body = ("%s %s" % (VERSION, helper.word())).encode()
    await send({{"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]}})
    await send({{"type": "http.response.body", "body": body}})
"""

HELPER = """\
import os

WORD = {word!r}
EXTRA = os.environ.get("RELOAD_E2E_EXTRA")
if EXTRA:  # read once, at import: only a new worker sees a change
    with open(EXTRA) as f:
        WORD += "+" + f.read().strip()


def word():
    return WORD
"""

PARAMS = [pytest.param((ex, iface), id="%s-%s" % (ex, iface))
          for ex in EXECUTORS for iface in ("wsgi", "asgi")]


class AppDir:
    """The app's source tree, which the tests edit."""

    def __init__(self, path, iface):
        self.path = path
        self.iface = iface
        (path / "pkg").mkdir(parents=True)
        (path / "pkg" / "__init__.py").write_text("")
        (path / "later").mkdir()
        (path / "later" / "__init__.py").write_text("")
        self.write_late("early")
        self.write_app("first")
        self.write_helper("alpha")

    def write_app(self, version):
        text = (WSGI_APP if self.iface == "wsgi" else ASGI_APP)
        self._write(self.path / "app.py", text.format(version=version))

    def write_broken_app(self):
        self._write(self.path / "app.py", "def app(:\n    pass\n")

    def write_raising_app(self):
        self._write(self.path / "app.py",
                    "def fail():\n"
                    "    raise RuntimeError('broken on purpose')\n"
                    "fail()\n")

    def write_helper(self, word):
        self._write(self.path / "pkg" / "helper.py", HELPER.format(word=word))

    def write_late(self, word):
        self._write(self.path / "later" / "late.py", "WORD = %r\n" % word)

    @staticmethod
    def _write(path, text):
        # as an editor that saves in place: truncate and write
        with open(path, "w") as f:
            f.write(text)


def start(tmp_path, appdir, inline, args=(), env=None, name="srv"):
    env = dict(env or {})
    env.setdefault("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return Server(tmp_path / name, "app:app", inline=inline,
                  args=["--log-level", "debug"] + list(args), env=env,
                  pythonpath=(str(appdir.path),), ready_path="/").start()


def body(server, path="/"):
    r = server.get(path)
    assert r.status == 200, r
    return r.body.decode()


def wait_body(server, want, timeout=RELOAD_TIMEOUT, path="/"):
    wait_until(lambda: body(server, path) == want, timeout,
               "the server to answer %r (it answers %r)"
               % (want, body(server, path)))


def stop(server, tmp_path):
    problems = server.stop()
    assert problems == [], problems
    # the supervisor removed the directory the workers reported through
    left = [p.name for p in (tmp_path / "tmp").iterdir()
            if p.name.startswith("sluice-reload-")]
    assert left == [], left


@pytest.fixture(params=PARAMS)
def shape(request):
    """(inline, iface) for one test's own server."""
    ex, iface = request.param
    return ex == "inline", iface


def test_edit_reloads_and_no_request_fails(tmp_path, shape):
    inline, iface = shape
    appdir = AppDir(tmp_path / "app", iface)
    s = start(tmp_path, appdir, inline, ["--reload"])
    try:
        assert body(s) == "first alpha"
        old = set(s.worker_pids())
        ok = Req("/", check=lambda r: r.body.split(b" ")[0] in
                 (b"first", b"second"))
        with Load(s, mix=[ok], conns=3, keep_alive="mixed") as load:
            mark = s.log_mark()
            load.event("edit app.py")
            appdir.write_app("second")
            wait_body(s, "second alpha")
            log = s.wait_for_log("Rolling restart done", since=mark,
                                 timeout=RELOAD_TIMEOUT)
            n = load.total()
            wait_until(lambda: load.total() >= n + 20, 10,
                       "20 more answers after the reload")
        assert not load.failed(), load.failure_report()
        assert "--reload: %s changed" % (appdir.path / "app.py") in log, log
        assert "Handling a source change: rolling restart" in log, log
        helpers.wait_gone(old, RELOAD_TIMEOUT, "the old worker to drain")
    finally:
        stop(s, tmp_path)


def test_syntax_error_keeps_old_workers_then_fix_reloads(tmp_path, shape):
    inline, iface = shape
    appdir = AppDir(tmp_path / "app", iface)
    s = start(tmp_path, appdir, inline, ["--reload"])
    try:
        old = set(s.worker_pids())
        mark = s.log_mark()
        appdir.write_broken_app()
        log = s.wait_for_log("Rolling restart stopped", since=mark,
                             timeout=RELOAD_TIMEOUT)
        # the traceback of the failed import, with the file and the line
        assert "cannot import module 'app': SyntaxError" in log, log
        assert 'File "%s", line 1' % (appdir.path / "app.py") in log, log
        assert "def app(:" in log, log
        # the old worker serves on, the old code
        assert body(s) == "first alpha"
        assert set(s.worker_pids()) == old
        assert s.proc.poll() is None

        # broken again, otherwise: an exception at import, with its traceback
        mark = s.log_mark()
        appdir.write_raising_app()
        log = s.wait_for_log("Rolling restart stopped", since=mark,
                             timeout=RELOAD_TIMEOUT)
        assert "Traceback (most recent call last)" in log, log
        assert "in fail" in log, log
        assert "RuntimeError: broken on purpose" in log, log
        assert body(s) == "first alpha"
        assert set(s.worker_pids()) == old

        mark = s.log_mark()
        appdir.write_app("fixed")
        wait_body(s, "fixed alpha")
        s.wait_for_log("Rolling restart done", since=mark,
                       timeout=RELOAD_TIMEOUT)
        helpers.wait_gone(old, RELOAD_TIMEOUT, "the old worker to drain")
    finally:
        stop(s, tmp_path)


def test_imported_helper_module_change_reloads(tmp_path, shape):
    inline, iface = shape
    appdir = AppDir(tmp_path / "app", iface)
    s = start(tmp_path, appdir, inline, ["--reload"])
    try:
        # pkg/ is neither --chdir nor --pythonpath: the worker reported it
        s.wait_for_log("--reload: watching %s\n" % (appdir.path / "pkg"))
        mark = s.log_mark()
        appdir.write_helper("beta")
        wait_body(s, "first beta")
        log = s.log_since(mark)
        assert "--reload: %s changed" % (appdir.path / "pkg" / "helper.py") \
            in log, log
    finally:
        stop(s, tmp_path)


def test_module_imported_by_a_request_is_watched(tmp_path, shape):
    """later/ is imported by the first request to /later, after READY: the
    worker reports it within a second or so, and an edit there reloads."""
    inline, iface = shape
    appdir = AppDir(tmp_path / "app", iface)
    s = start(tmp_path, appdir, inline, ["--reload"])
    try:
        mark = s.log_mark()
        assert body(s, "/later") == "early"
        s.wait_for_log("--reload: watching %s\n" % (appdir.path / "later"),
                       since=mark)
        mark = s.log_mark()
        appdir.write_late("late edit")
        wait_body(s, "late edit", path="/later")
        assert "--reload: %s changed" % (appdir.path / "later" / "late.py") \
            in s.log_since(mark)
    finally:
        stop(s, tmp_path)


def test_extra_file_change_reloads(tmp_path, shape):
    inline, iface = shape
    appdir = AppDir(tmp_path / "app", iface)
    data = tmp_path / "conf"
    data.mkdir()
    extra = data / "settings.txt"
    extra.write_text("one\n")
    s = start(tmp_path, appdir, inline,
              ["--reload", "--reload-extra-file", str(extra)],
              env={"RELOAD_E2E_EXTRA": str(extra)})
    try:
        assert body(s) == "first alpha+one"
        mark = s.log_mark()
        extra.write_text("three\n")
        wait_body(s, "first alpha+three")
        log = s.log_since(mark)
        assert "--reload: %s changed" % extra in log, log
    finally:
        stop(s, tmp_path)


def test_off_by_default(tmp_path, shape):
    """Without --reload an edit changes nothing. The proof that enough time
    passed is a second server, with --reload, on the same source: by the
    time it has restarted, the first one would have too."""
    inline, iface = shape
    appdir = AppDir(tmp_path / "app", iface)
    plain = start(tmp_path, appdir, inline, name="plain")
    watching = start(tmp_path, appdir, inline, ["--reload"], name="watching")
    try:
        plain_workers = plain.worker_pids()
        mark = watching.log_mark()
        appdir.write_app("second")
        watching.wait_for_log("Rolling restart done", since=mark,
                              timeout=RELOAD_TIMEOUT)
        # (the old worker may take a connection or two before its TERM)
        wait_body(watching, "second alpha")
        assert body(plain) == "first alpha"
        assert plain.worker_pids() == plain_workers
        assert "--reload" not in plain.error_log_text()
        # and HUP, which --reload imitates, does load the edit
        mark = plain.log_mark()
        os.kill(plain.pid, signal.SIGHUP)
        plain.wait_for_log("Rolling restart done", since=mark,
                           timeout=RELOAD_TIMEOUT)
        wait_body(plain, "second alpha")
    finally:
        stop(watching, tmp_path)
        stop(plain, tmp_path)


def test_extra_file_needs_reload(tmp_path):
    rc, out, err = helpers.run_cli(["--reload-extra-file", "x.txt",
                                    "app:app"])
    helpers.assert_usage_error(rc, err, "--reload-extra-file", "--reload")


@pytest.mark.skipif(os.geteuid() != 0,
                    reason="--user needs root; these tests run as uid %d"
                    % os.geteuid())
def test_workers_as_another_user_report_their_modules(tmp_path):
    """With --user, the workers write their module reports into the
    supervisor's private directory too (it is given to that user)."""
    top = Path(tempfile.mkdtemp(prefix="sl-reload-user-"))
    try:
        os.chmod(top, 0o755)
        appdir = AppDir(top / "app", "wsgi")
        (top / "tmp").mkdir()
        s = Server(top / "srv", "app:app",
                   args=["--log-level", "debug", "--reload", "--user",
                         "nobody"],
                   env={"TMPDIR": str(top / "tmp")},
                   pythonpath=(str(appdir.path),), ready_path="/").start()
        try:
            s.wait_for_log("--reload: watching %s\n" % (appdir.path / "pkg"))
            appdir.write_helper("beta")
            wait_body(s, "first beta")
        finally:
            problems = s.stop()
        assert problems == [], problems
    finally:
        shutil.rmtree(top, ignore_errors=True)
