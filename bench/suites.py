"""What the benchmark runs: suites of arms (one server configuration each).

An arm is one server command line plus the URL path wrk hits. Command lines
are templates; run.py fills in:

    {port}    a free TCP port on 127.0.0.1, chosen per server start
    {apps}    absolute path of bench/apps
    {root}    absolute path of the repository root
    {sluice}  the sluice binary (--sluice-bin, $SLUICE_BIN, default ./sluice)
    {sluice_before}  an earlier sluice to compare with (--before-bin,
              $SLUICE_BEFORE_BIN): the "change" suite's "-before" arms
    {config}  the arm's `config` file, written for this server start
    {logdir}  the run's temporary directory (server logs, access logs)
    {certfile}, {keyfile}  a TLS suite's certificate and key, made by the
              harness in {logdir} at the start of the run (never committed)

Every server runs as `taskset -c SERVER_CPU <argv>`, in its own session, with
a cleaned environment (no PYTHON* variables, PATH limited to the system's
directories) plus the arm's `env`.

To add an arm: append an Arm to a suite's `arms`. To benchmark another URL
path on the same server (the health-check arm does this), set `path`, and
`expect_body=None` if the body is not the hello-world one.
To add a suite: add a Suite to SUITES; `run.py --suite NAME` picks it up and
writes bench/results/NAME.{md,json,png}.
"""

import signal
from dataclasses import dataclass, field
from typing import Dict, List, Optional

HELLO = b"Hello, World!"


@dataclass
class Arm:
    name: str
    argv: List[str]
    cwd: str = "{apps}"
    env: Dict[str, str] = field(default_factory=dict)
    path: str = "/"
    # Body the preflight request must return (None: any 2xx body will do).
    expect_body: Optional[bytes] = HELLO
    # How to ask the server to stop. uWSGI treats SIGTERM as "reload".
    stop_signal: int = signal.SIGTERM
    # Executable whose absence skips the arm ("{sluice}" allowed).
    requires: Optional[str] = None
    # Skip (rather than fail) when the preflight request gets a 404: used by
    # arms that benchmark a feature the server may not have yet.
    skip_if_404: bool = False
    # One line for the report: why these flags.
    note: str = ""
    # A file in bench/apps the server reads, with @PORT@ and @DIR@ (the
    # run's log directory) filled in per server start; {config} names it.
    config: Optional[str] = None
    # True for the project's own arms (the report says "peers only" when none
    # of them produced a number).
    ours: bool = False
    # Request method and body: a POST of `upload` bytes of the BIG pattern
    # (below) repeated; wrk then runs a Lua script generated into $LOGDIR.
    method: str = "GET"
    upload: int = 0
    # The load client: "wrk", or "upload" (bench/upload.py: big uploads on
    # keep-alive connections, which wrk cannot send well).
    client: str = "wrk"
    # The preflight parses the body as JSON and compares it with this.
    expect_json: Optional[object] = None
    # Connection counts of this arm when --conns is not given (None: the
    # suite's).
    conns: Optional[List[int]] = None
    # Shown in the table's flags column, without a warning: what makes the
    # row differ from its neighbours (a peer without pathsend, say).
    mark: str = ""
    # The same server's hello-world arm: the report says what share of this
    # arm's CPU per request the server alone costs.
    ref: Optional[str] = None
    # Served over TLS: wrk and the preflight speak https to it.
    tls: bool = False


@dataclass
class Suite:
    name: str
    title: str
    app: str  # file in bench/apps
    baselines: List[str]  # arms the ratio columns divide by
    arms: List[Arm]
    # "http": loaded by wrk (run.py); "ws": WebSocket echo loaded by
    # bench/wsload.c (wsbench.py)
    kind: str = "http"
    # Connection counts when --conns is not given.
    conns: List[int] = field(default_factory=lambda: [16, 256])
    # Write the 1 MiB file (BIG) to $LOGDIR/big.bin before any server
    # starts; arms find it through $SLUICE_BENCH_FILE.
    big_file: bool = False
    # Make the TLS certificates (workload.tls_certs) before any server
    # starts; the report adds CPU µs/req ratios and MB/s.
    tls: bool = False


UWSGI_COMMON = [
    "--plugin", "python3",
    "--wsgi-file", "{apps}/hello_wsgi.py", "--callable", "app",
    "--processes", "1",  # one worker, no --master: a single process
    "--disable-logging",  # no per-request log line
    "--need-app",  # exit instead of serving 500s if the app fails to load
    "--listen", "1024",  # default backlog is 100; others use >= 1024
]


def _sluice(name, app, extra=(), env=None, path="/", expect=HELLO,
            skip_if_404=False, note="", binary="{sluice}", **more):
    return Arm(
        name=name,
        argv=[binary, "-w", "1", "-b", "127.0.0.1:{port}",
              "--chdir", "bench/apps", *extra, app],
        cwd="{root}",
        env=dict(env or {}),
        path=path,
        expect_body=expect,
        requires=binary,
        skip_if_404=skip_if_404,
        note=note,
        ours=True,
        **more,
    )


# Not an app server: nginx answering the hello-world bytes itself. In both
# suites it shows how fast wrk on one CPU can go (bench/README.md).
NGINX = Arm(
    name="nginx",
    argv=["/usr/sbin/nginx", "-e", "stderr", "-c", "{config}"],
    config="nginx_hello.conf",
    requires="/usr/sbin/nginx",
    note="not an app server: nginx answering the same bytes from its "
         "config (`return 200`), no Python; the ceiling of what wrk on one "
         "CPU can drive, for reading the ratio columns",
)

WSGI = Suite(
    name="wsgi",
    title="WSGI hello world, one worker",
    app="hello_wsgi.py",
    # uwsgi: the flags asked for; uwsgi-router: uWSGI set up so that it
    # really serves every connection (see the arms' notes and README).
    baselines=["uwsgi", "uwsgi-router"],
    arms=[
        Arm(
            name="gunicorn",
            argv=["/usr/bin/gunicorn", "-k", "gthread", "--threads", "1",
                  "-w", "1", "-b", "127.0.0.1:{port}", "--chdir", "{apps}",
                  "hello_wsgi:app"],
            requires="/usr/bin/gunicorn",
            note="gthread worker, 1 thread; access log is off by default",
        ),
        Arm(
            name="gunicorn-accesslog",
            argv=["/usr/bin/gunicorn", "-k", "gthread", "--threads", "1",
                  "-w", "1", "-b", "127.0.0.1:{port}", "--chdir", "{apps}",
                  "--access-logfile", "{logdir}/gunicorn-access-{port}.log",
                  "hello_wsgi:app"],
            requires="/usr/bin/gunicorn",
            note="gunicorn with its access log on (default format, to a "
                 "file): what the same line costs in Python",
        ),
        Arm(
            name="uwsgi",
            argv=["/usr/bin/uwsgi", "--http11-socket", "127.0.0.1:{port}",
                  *UWSGI_COMMON],
            stop_signal=signal.SIGINT,
            requires="/usr/bin/uwsgi",
            note="HTTP/1.1 keep-alive served by the worker itself; a sync "
                 "worker stays on one keep-alive connection until the client "
                 "closes it, so the other connections wait in the accept "
                 "queue (see the 'starved' flag)",
        ),
        Arm(
            name="uwsgi-router",
            argv=["/usr/bin/uwsgi", "--plugin", "http",
                  "--http", "127.0.0.1:{port}", "--http-keepalive",
                  *UWSGI_COMMON],
            stop_signal=signal.SIGINT,
            requires="/usr/bin/uwsgi",
            note="uWSGI's own HTTP router process (C, keep-alive to the "
                 "client) in front of the same single worker; the fair "
                 "keep-alive configuration at 16/256 connections",
        ),
        Arm(
            name="waitress",
            argv=["/usr/bin/waitress-serve", "--listen=127.0.0.1:{port}",
                  "--connection-limit=1024", "hello_wsgi:app"],
            requires="/usr/bin/waitress-serve",
            note="default 4 threads; --connection-limit raised from 100 so "
                 "all 256 connections are served",
        ),
        NGINX,
        _sluice("sluice", "hello_wsgi:app", note="pump mode (default)"),
        _sluice("sluice-inline", "hello_wsgi:app", env={"SLUICE_INLINE": "1"},
                note="inline mode: SLUICE_INLINE=1"),
        _sluice("sluice-health", "hello_wsgi:app",
                extra=["--health-path", "/healthz"], path="/healthz",
                expect=None, skip_if_404=True,
                note="/healthz answered from C, no Python; skipped while the "
                     "server answers 404 there"),
        _sluice("sluice-accesslog", "hello_wsgi:app",
                extra=["--access-logfile", "{logdir}/access-{port}.log"],
                note="pump mode with the access log on (gunicorn's default "
                     "format, to a file on disk)"),
    ],
)

ASGI = Suite(
    name="asgi",
    title="ASGI hello world, one worker",
    app="hello_asgi.py",
    # sluice-wsgi: the second target (ASGI within 15 % of sluice's
    # own WSGI hello world) is read from the same run.
    baselines=["uvicorn", "sluice-wsgi"],
    arms=[
        Arm(
            name="uvicorn",
            argv=["/usr/bin/python3", "-m", "uvicorn",
                  "--loop", "uvloop", "--http", "httptools",
                  "--host", "127.0.0.1", "--port", "{port}",
                  "--app-dir", "{apps}", "--no-access-log",
                  "--log-level", "warning", "hello_asgi:app"],
            requires="/usr/bin/python3",
            note="uvloop + httptools, single process, access log off",
        ),
        Arm(
            name="hypercorn",
            argv=["/usr/bin/hypercorn", "-w", "1", "-k", "uvloop",
                  "-b", "127.0.0.1:{port}", "--backlog", "1024",
                  "hello_asgi:app"],
            requires="/usr/bin/hypercorn",
            note="uvloop worker class; backlog raised from 100; access log "
                 "is off by default",
        ),
        NGINX,
        _sluice("sluice-asgi", "hello_asgi:app", extra=["--interface", "asgi"],
                note="pump mode (default), uvloop (the default when "
                     "installed)"),
        _sluice("sluice-asgi-asyncio", "hello_asgi:app",
                extra=["--interface", "asgi", "--loop", "asyncio"],
                note="pump mode, asyncio's own event loop"),
        _sluice("sluice-asgi-inline", "hello_asgi:app",
                extra=["--interface", "asgi"], env={"SLUICE_INLINE": "1"},
                note="inline mode: SLUICE_INLINE=1, uvloop"),
        _sluice("sluice-asgi-inline-asyncio", "hello_asgi:app",
                extra=["--interface", "asgi", "--loop", "asyncio"],
                env={"SLUICE_INLINE": "1"},
                note="inline mode, asyncio's own event loop"),
        _sluice("sluice-wsgi", "hello_wsgi:app",
                note="sluice's WSGI hello world, pump mode: the reference "
                     "for ASGI's cost"),
        _sluice("sluice-wsgi-inline", "hello_wsgi:app",
                env={"SLUICE_INLINE": "1"},
                note="sluice's WSGI hello world, inline mode: pump or inline "
                     "by default is decided from the same run"),
    ],
)

# Before and after a change to sluice itself, one arm pair per executor and
# the C-only health path, so that --repeat interleaves the two binaries
# within every round. The ratio column divides by nothing useful; read the
# CPU µs per request of each pair.
_CHANGE_ARMS = [
    ("wsgi-pump", "hello_wsgi:app", [], {}),
    ("wsgi-inline", "hello_wsgi:app", [], {"SLUICE_INLINE": "1"}),
    ("asgi-pump", "hello_asgi:app", ["--interface", "asgi"], {}),
    ("asgi-inline", "hello_asgi:app", ["--interface", "asgi"],
     {"SLUICE_INLINE": "1"}),
    ("healthz", "hello_wsgi:app", ["--health-path", "/healthz"], {}),
]

CHANGE = Suite(
    name="change",
    title="sluice before and after a change, one worker",
    app="hello_wsgi.py",
    baselines=["wsgi-pump-before"],
    arms=[
        _sluice("%s-%s" % (name, when), app, extra=extra, env=env,
                path="/healthz" if name == "healthz" else "/",
                expect=None if name == "healthz" else HELLO,
                binary=binary,
                note="%s binary" % when)
        for name, app, extra, env in _CHANGE_ARMS
        for when, binary in (("before", "{sluice_before}"),
                             ("after", "{sluice}"))
    ] + [NGINX],
)

# WebSocket echo (issue 10): every arm serves apps/ws_echo_asgi.py on /ws;
# wsload.c is the client (wsbench.py). The sluice arms are skipped while
# sluice does not complete a WebSocket handshake.
_UVICORN_WS = ["/usr/bin/python3", "-m", "uvicorn", "--loop", "uvloop",
               "--http", "httptools", "--host", "127.0.0.1",
               "--port", "{port}", "--app-dir", "{apps}", "--no-access-log",
               "--log-level", "warning"]

WS = Suite(
    name="ws",
    title="WebSocket echo, one worker",
    app="ws_echo_asgi.py",
    baselines=["uvicorn-websockets"],
    kind="ws",
    arms=[
        _sluice("sluice", "ws_echo_asgi:app", extra=["--interface", "asgi"],
                path="/ws", expect=None, note="pump mode (default), uvloop"),
        # run only when --before-bin names an earlier binary
        _sluice("sluice-before", "ws_echo_asgi:app",
                extra=["--interface", "asgi"], path="/ws", expect=None,
                binary="{sluice_before}",
                note="pump mode, the earlier binary (--before-bin)"),
        _sluice("sluice-inline", "ws_echo_asgi:app",
                extra=["--interface", "asgi"], env={"SLUICE_INLINE": "1"},
                path="/ws", expect=None,
                note="inline mode: SLUICE_INLINE=1, uvloop"),
        Arm(
            name="uvicorn-websockets",
            argv=_UVICORN_WS + ["--ws", "websockets", "ws_echo_asgi:app"],
            path="/ws", expect_body=None, requires="/usr/bin/python3",
            note="uvloop + httptools, --ws websockets (the websockets "
                 "library's protocol), single process, access log off",
        ),
        Arm(
            name="uvicorn-wsproto",
            argv=_UVICORN_WS + ["--ws", "wsproto", "ws_echo_asgi:app"],
            path="/ws", expect_body=None, requires="/usr/bin/python3",
            note="the same with --ws wsproto",
        ),
        Arm(
            name="hypercorn",
            argv=["/usr/bin/hypercorn", "-w", "1", "-k", "uvloop",
                  "-b", "127.0.0.1:{port}", "--backlog", "1024",
                  "ws_echo_asgi:app"],
            path="/ws", expect_body=None, requires="/usr/bin/hypercorn",
            note="uvloop worker class (wsproto underneath); backlog raised "
                 "from 100",
        ),
    ],
)

# ------------------------------------------------ suites of real work
#
# io, big and upload serve apps/work_wsgi.py or apps/work_asgi.py (one app
# per interface, a path per kind of work); frameworks serves the apps/fw_*
# apps. Each server is the same one-worker configuration as in the hello
# suites unless an arm's note says otherwise.

BIG = bytes(range(256)) * 4096  # the 1 MiB body; equal to work_*.py's
UPLOAD_64M = 64 * 1024 * 1024
_FILE_ENV = {"SLUICE_BENCH_FILE": "{logdir}/big.bin"}
_JSON = {"message": "Hello, World!"}


def pattern(size):
    """SIZE bytes of BIG repeated: the request body of an upload arm."""
    whole, part = divmod(size, len(BIG))
    return BIG * whole + BIG[:part]


def _gunicorn(name, app, threads=1, **kw):
    return Arm(
        name=name,
        argv=["/usr/bin/gunicorn", "-k", "gthread", "--threads", str(threads),
              "-w", "1", "-b", "127.0.0.1:{port}", "--chdir", "{apps}", app],
        requires="/usr/bin/gunicorn",
        note=kw.pop("note", "gthread worker, %d thread%s"
                    % (threads, "s" if threads > 1 else "")),
        **kw)


def _uwsgi(name, wsgi_file="work_wsgi.py", threads=1, **kw):
    extra = ["--threads", str(threads)] if threads > 1 else []
    return Arm(
        name=name,
        argv=["/usr/bin/uwsgi", "--plugin", "http",
              "--http", "127.0.0.1:{port}", "--http-keepalive",
              "--plugin", "python3", "--wsgi-file", "{apps}/" + wsgi_file,
              "--callable", "app", "--processes", "1", *extra,
              "--disable-logging", "--need-app", "--listen", "1024"],
        stop_signal=signal.SIGINT,
        requires="/usr/bin/uwsgi",
        note=kw.pop("note", "uWSGI's HTTP router (keep-alive to the client) "
                    "in front of one worker%s, as the wsgi suite's "
                    "uwsgi-router arm" % (" with %d threads" % threads
                                          if threads > 1 else "")),
        **kw)


def _waitress(name, app, threads=4, **kw):
    return Arm(
        name=name,
        argv=["/usr/bin/waitress-serve", "--listen=127.0.0.1:{port}",
              "--threads=%d" % threads, "--connection-limit=1024", app],
        requires="/usr/bin/waitress-serve",
        note=kw.pop("note", "%d threads%s; --connection-limit raised from 100"
                    % (threads, " (its default)" if threads == 4 else "")),
        **kw)


def _uvicorn(name, app, **kw):
    return Arm(
        name=name,
        argv=["/usr/bin/python3", "-m", "uvicorn",
              "--loop", "uvloop", "--http", "httptools",
              "--host", "127.0.0.1", "--port", "{port}",
              "--app-dir", "{apps}", "--no-access-log",
              "--log-level", "warning", app],
        requires="/usr/bin/python3",
        note=kw.pop("note", "uvloop + httptools, single process, access log "
                    "off"),
        **kw)


def _hypercorn(name, app, **kw):
    return Arm(
        name=name,
        argv=["/usr/bin/hypercorn", "-w", "1", "-k", "uvloop",
              "-b", "127.0.0.1:{port}", "--backlog", "1024", app],
        requires="/usr/bin/hypercorn",
        note=kw.pop("note", "uvloop worker class; backlog raised from 100"),
        **kw)


_ASGI = ["--interface", "asgi"]

# io: every request waits 10 ms (a database or an HTTP call) at 512
# connections. WSGI servers get 32 threads each, so 32 requests wait at once
# (at most 3,200 req/s); an ASGI server awaits them all on one event loop.
IO = Suite(
    name="io",
    title="10 ms of waiting per request, 512 connections, one worker",
    app="work_wsgi.py, work_asgi.py",
    baselines=["gunicorn", "uvicorn"],
    conns=[512],
    arms=[
        _sluice("sluice", "work_wsgi:app", extra=["--threads", "32"],
                path="/sleep", note="WSGI, pump mode, --threads 32: 32 lanes "
                                    "block in time.sleep(0.010)"),
        _gunicorn("gunicorn", "work_wsgi:app", threads=32, path="/sleep"),
        _uwsgi("uwsgi-router", threads=32, path="/sleep"),
        _waitress("waitress", "work_wsgi:app", threads=32, path="/sleep"),
        _sluice("sluice-asgi", "work_asgi:app", extra=_ASGI, path="/sleep",
                note="ASGI, pump mode, uvloop: await asyncio.sleep(0.010)"),
        _uvicorn("uvicorn", "work_asgi:app", path="/sleep"),
        _hypercorn("hypercorn", "work_asgi:app", path="/sleep"),
    ],
)

# big: a 1 MiB response, from memory (/mem) and from a file (/file) through
# wsgi.file_wrapper or http.response.pathsend. The peers' ASGI apps lack
# pathsend and send the same bytes from memory; the preflight records which
# way each server got its body (the table shows it).
BIG_SUITE = Suite(
    name="big",
    title="1 MiB responses from memory and from a file, one worker",
    app="work_wsgi.py, work_asgi.py",
    baselines=["gunicorn-mem", "uvicorn-mem"],
    big_file=True,
    arms=[
        _sluice("sluice-mem", "work_wsgi:app", path="/mem", expect=BIG,
                note="WSGI, pump mode: the body is one bytes object"),
        _sluice("sluice-file", "work_wsgi:app", path="/file", expect=BIG,
                env=_FILE_ENV, note="WSGI, pump mode: wsgi.file_wrapper"),
        _gunicorn("gunicorn-mem", "work_wsgi:app", path="/mem",
                  expect_body=BIG),
        _gunicorn("gunicorn-file", "work_wsgi:app", path="/file",
                  expect_body=BIG, env=_FILE_ENV,
                  note="gthread, 1 thread: wsgi.file_wrapper (gunicorn "
                       "sendfile()s it)"),
        _uwsgi("uwsgi-router-mem", path="/mem", expect_body=BIG),
        _uwsgi("uwsgi-router-file", path="/file", expect_body=BIG,
               env=_FILE_ENV),
        _waitress("waitress-mem", "work_wsgi:app", path="/mem",
                  expect_body=BIG),
        _waitress("waitress-file", "work_wsgi:app", path="/file",
                  expect_body=BIG, env=_FILE_ENV),
        _sluice("sluice-asgi-mem", "work_asgi:app", extra=_ASGI, path="/mem",
                expect=BIG, note="ASGI, pump mode: one http.response.body"),
        _sluice("sluice-asgi-file", "work_asgi:app", extra=_ASGI,
                path="/file", expect=BIG, env=_FILE_ENV,
                note="ASGI, pump mode: http.response.pathsend"),
        _uvicorn("uvicorn-mem", "work_asgi:app", path="/mem",
                 expect_body=BIG),
        _uvicorn("uvicorn-file", "work_asgi:app", path="/file",
                 expect_body=BIG, env=_FILE_ENV,
                 mark="no pathsend: body from memory"),
        _hypercorn("hypercorn-mem", "work_asgi:app", path="/mem",
                   expect_body=BIG),
        _hypercorn("hypercorn-file", "work_asgi:app", path="/file",
                   expect_body=BIG, env=_FILE_ENV,
                   mark="no pathsend: body from memory"),
    ],
)

# upload: a 1 MiB POST echoed back (wrk, generated Lua script), and 64 MiB
# uploads the app reads in 64 KiB pieces (bench/upload.py as the client, at
# 1 and 4 connections: one 64 MiB request takes tens of milliseconds).
_ECHO = dict(path="/echo", method="POST", upload=1024 * 1024)
_BIG_UP = dict(path="/upload", method="POST", upload=UPLOAD_64M,
               client="upload", conns=[1, 4])
_BIG_UP_BODY = str(UPLOAD_64M).encode("ascii")
UPLOAD = Suite(
    name="upload",
    title="1 MiB echoed and 64 MiB uploads, one worker",
    app="work_wsgi.py, work_asgi.py",
    baselines=["gunicorn-echo", "gunicorn-64m"],
    conns=[16, 64],
    arms=[
        _sluice("sluice-echo", "work_wsgi:app", expect=BIG,
                note="WSGI, pump mode: wsgi.input.read() of 1 MiB", **_ECHO),
        _sluice("sluice-64m", "work_wsgi:app", expect=_BIG_UP_BODY,
                note="WSGI, pump mode: 64 KiB reads of wsgi.input", **_BIG_UP),
        _gunicorn("gunicorn-echo", "work_wsgi:app", expect_body=BIG, **_ECHO),
        _gunicorn("gunicorn-64m", "work_wsgi:app", expect_body=_BIG_UP_BODY,
                  **_BIG_UP),
        _uwsgi("uwsgi-router-echo", expect_body=BIG, **_ECHO),
        _uwsgi("uwsgi-router-64m", expect_body=_BIG_UP_BODY, **_BIG_UP),
        _waitress("waitress-echo", "work_wsgi:app", expect_body=BIG, **_ECHO),
        _waitress("waitress-64m", "work_wsgi:app", expect_body=_BIG_UP_BODY,
                  **_BIG_UP),
        _sluice("sluice-asgi-echo", "work_asgi:app", extra=_ASGI, expect=BIG,
                note="ASGI, pump mode", **_ECHO),
        _sluice("sluice-asgi-64m", "work_asgi:app", extra=_ASGI,
                expect=_BIG_UP_BODY, note="ASGI, pump mode: the body's "
                "pieces as the server delivers them", **_BIG_UP),
        _uvicorn("uvicorn-echo", "work_asgi:app", expect_body=BIG, **_ECHO),
        _uvicorn("uvicorn-64m", "work_asgi:app", expect_body=_BIG_UP_BODY,
                 **_BIG_UP),
        _hypercorn("hypercorn-echo", "work_asgi:app", expect_body=BIG,
                   **_ECHO),
        _hypercorn("hypercorn-64m", "work_asgi:app", expect_body=_BIG_UP_BODY,
                   **_BIG_UP),
    ],
)

# frameworks: a JSON endpoint in Flask, Django and FastAPI, and beside each
# server its hello-world arm (ref), so the report can say what share of a
# framework request's CPU time is the server's.
_FW = dict(expect_json=_JSON)
FRAMEWORKS = Suite(
    name="frameworks",
    title="JSON endpoint in Flask, Django and FastAPI, one worker",
    app="fw_flask.py, fw_django.py, fw_fastapi.py",
    baselines=["gunicorn-flask", "uvicorn-fastapi"],
    arms=[
        _sluice("sluice-hello", "hello_wsgi:app",
                note="the server's share: WSGI hello world, pump mode"),
        _sluice("sluice-flask", "fw_flask:app", expect=None,
                ref="sluice-hello", note="Flask, pump mode", **_FW),
        _sluice("sluice-django", "fw_django:application", expect=None,
                ref="sluice-hello", note="Django (WSGI), pump mode", **_FW),
        _gunicorn("gunicorn-hello", "hello_wsgi:app",
                  note="the server's share: WSGI hello world, gthread, "
                       "1 thread"),
        _gunicorn("gunicorn-flask", "fw_flask:app", expect_body=None,
                  ref="gunicorn-hello", **_FW),
        _gunicorn("gunicorn-django", "fw_django:application",
                  expect_body=None, ref="gunicorn-hello", **_FW),
        _sluice("sluice-asgi-hello", "hello_asgi:app", extra=_ASGI,
                note="the server's share: ASGI hello world, pump mode"),
        _sluice("sluice-fastapi", "fw_fastapi:app", extra=_ASGI, expect=None,
                ref="sluice-asgi-hello", note="FastAPI, pump mode", **_FW),
        _sluice("sluice-django-asgi", "fw_django:asgi_application",
                extra=_ASGI, expect=None, ref="sluice-asgi-hello",
                note="Django's ASGI handler, pump mode", **_FW),
        _uvicorn("uvicorn-hello", "hello_asgi:app",
                 note="the server's share: ASGI hello world"),
        _uvicorn("uvicorn-fastapi", "fw_fastapi:app", expect_body=None,
                 ref="uvicorn-hello", **_FW),
        _uvicorn("uvicorn-django-asgi", "fw_django:asgi_application",
                 expect_body=None, ref="uvicorn-hello", **_FW),
    ],
)

# ------------------------------------------------ TLS (issue 28)
#
# The same one-worker servers with TLS in front: sluice's own (the
# sluice-tls.so module), nginx's (its config: the same certificate,
# protocols, TLS 1.2 suites, key-exchange groups and session tickets as
# sluice's defaults, worker/loop/tlsctx.c and common/options.c), and
# uvicorn's (Python's ssl module). The certificate is ECDSA P-256 unless
# the harness says otherwise (bench/tlshs.py also runs RSA 2048).
# Handshakes are measured by bench/tlshs.py from the same arms.

# sluice's default TLS 1.2 suites (common/options.c), for the peers
TLS_CIPHERS = ("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
               "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
               "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305")
_TLS = ["--certfile", "{certfile}", "--keyfile", "{keyfile}"]


def _nginx_tls(name, path="/", **kw):
    return Arm(
        name=name,
        argv=["/usr/sbin/nginx", "-e", "stderr", "-c", "{config}"],
        config="nginx_tls.conf", requires="/usr/sbin/nginx", path=path,
        tls=True,
        note=kw.pop("note", "nginx over TLS, one worker process, no master; "
                    "`return 200` from its config, no Python"),
        **kw)


def _uvicorn_tls(name, app, **kw):
    arm = _uvicorn(name, app, tls=True, **kw)
    arm.argv[-1:-1] = ["--ssl-certfile", "{certfile}",
                       "--ssl-keyfile", "{keyfile}",
                       "--ssl-ciphers", TLS_CIPHERS]
    arm.note += "; --ssl-certfile/--ssl-keyfile, --ssl-ciphers as sluice's"
    return arm


TLS = Suite(
    name="tls",
    title="hello world over TLS (ECDSA P-256), one worker",
    app="hello_wsgi.py, hello_asgi.py",
    baselines=["nginx", "uvicorn"],
    tls=True,
    arms=[
        _sluice("sluice", "hello_wsgi:app", extra=_TLS, tls=True,
                note="WSGI, pump mode (default)"),
        _sluice("sluice-inline", "hello_wsgi:app", extra=_TLS, tls=True,
                env={"SLUICE_INLINE": "1"},
                note="WSGI, inline mode: SLUICE_INLINE=1"),
        _sluice("sluice-asgi", "hello_asgi:app", extra=_TLS + _ASGI,
                tls=True, note="ASGI, pump mode, uvloop"),
        _nginx_tls("nginx"),
        _uvicorn_tls("uvicorn", "hello_asgi:app"),
    ],
)

# A 1 MiB file over TLS: wsgi.file_wrapper, pathsend, nginx's static file
# (sendfile on; without kTLS every server encrypts in user space).
TLS_FILE = Suite(
    name="tls-file",
    title="a 1 MiB file over TLS (ECDSA P-256), one worker",
    app="work_wsgi.py, work_asgi.py",
    baselines=["nginx-file", "uvicorn-file"],
    big_file=True,
    tls=True,
    conns=[16],
    arms=[
        _sluice("sluice-file", "work_wsgi:app", extra=_TLS, tls=True,
                path="/file", expect=BIG, env=_FILE_ENV,
                note="WSGI, pump mode: wsgi.file_wrapper"),
        _sluice("sluice-asgi-file", "work_asgi:app", extra=_TLS + _ASGI,
                tls=True, path="/file", expect=BIG, env=_FILE_ENV,
                note="ASGI, pump mode: http.response.pathsend"),
        _nginx_tls("nginx-file", path="/file", expect_body=BIG,
                   note="nginx over TLS serving $LOGDIR/big.bin as a "
                        "static file (sendfile on; no kTLS: read and "
                        "encrypted in user space)"),
        _uvicorn_tls("uvicorn-file", "work_asgi:app", path="/file",
                     expect_body=BIG, env=_FILE_ENV,
                     mark="no pathsend: body from memory"),
    ],
)

# ------------------------------------------------ HTTP/2 (issue 29)
#
# The hello world over HTTP/2, loaded by h2load (bench/h2bench.py, not run.py:
# h2load, many streams per connection). Each server twice: h2 over TLS,
# chosen by ALPN (tls=True; the tls suite's certificate and nginx's TLS
# settings), and h2c, cleartext with prior knowledge (the client opens
# with the preface, no Upgrade). Every server allows 100 concurrent
# streams per connection: sluice's and hypercorn's default, nginx's set
# down from 128.

_H2 = ["--http-protocols", "h2,h1"]
_H2C = _H2 + ["--http2-cleartext", "prior-knowledge"]


def _nginx_h2(name, tls):
    return Arm(
        name=name,
        argv=["/usr/sbin/nginx", "-e", "stderr", "-c", "{config}"],
        config="nginx_h2.conf" if tls else "nginx_h2c.conf",
        requires="/usr/sbin/nginx", tls=tls,
        note="nginx, one worker process, no master; `return 200` from its "
             "config, no Python; " + (
                 "`listen ... ssl http2`, TLS as in the tls suite" if tls else
                 "`listen ... http2` without ssl: h2c by prior knowledge "
                 "only"))


def _hypercorn_h2(name, tls):
    arm = _hypercorn(name, "hello_asgi:app", tls=tls)
    if tls:
        arm.argv[-1:-1] = ["--certfile", "{certfile}", "--keyfile",
                           "{keyfile}", "--ciphers", TLS_CIPHERS]
        arm.note += ("; --certfile/--keyfile, --ciphers as sluice's (h2 by "
                     "ALPN)")
    else:
        arm.note += "; h2c: it takes the preface on its HTTP/1.1 port"
    return arm


H2 = Suite(
    name="h2",
    title="hello world over HTTP/2, one worker",
    app="hello_wsgi.py, hello_asgi.py",
    baselines=["nginx", "hypercorn"],  # of the same protocol: h2 or h2c
    kind="h2",
    tls=True,
    arms=[
        _sluice("sluice-h2", "hello_wsgi:app", extra=_TLS + _H2, tls=True,
                note="WSGI, pump mode, h2 by ALPN"),
        _sluice("sluice-asgi-h2", "hello_asgi:app",
                extra=_TLS + _H2 + _ASGI, tls=True,
                note="ASGI, pump mode, uvloop, h2 by ALPN"),
        _sluice("sluice-h2c", "hello_wsgi:app", extra=_H2C,
                note="WSGI, pump mode, h2c by prior knowledge"),
        _sluice("sluice-asgi-h2c", "hello_asgi:app", extra=_H2C + _ASGI,
                note="ASGI, pump mode, uvloop, h2c by prior knowledge"),
        _nginx_h2("nginx-h2", tls=True),
        _nginx_h2("nginx-h2c", tls=False),
        _hypercorn_h2("hypercorn-h2", tls=True),
        _hypercorn_h2("hypercorn-h2c", tls=False),
    ],
)

SUITES = {s.name: s for s in (WSGI, ASGI, CHANGE, WS, IO, BIG_SUITE, UPLOAD,
                              FRAMEWORKS, TLS, TLS_FILE)}
