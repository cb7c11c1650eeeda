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


UWSGI_COMMON = [
    "--plugin", "python3",
    "--wsgi-file", "{apps}/hello_wsgi.py", "--callable", "app",
    "--processes", "1",  # one worker, no --master: a single process
    "--disable-logging",  # no per-request log line
    "--need-app",  # exit instead of serving 500s if the app fails to load
    "--listen", "1024",  # default backlog is 100; others use >= 1024
]


def _sluice(name, app, extra=(), env=None, path="/", expect=HELLO,
            skip_if_404=False, note="", binary="{sluice}"):
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
    ],
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

SUITES = {s.name: s for s in (WSGI, ASGI, CHANGE, WS)}
