"""The access log: --access-logfile, --access-logformat, --access-log-json.

Every test starts its own server, for a WSGI and an ASGI app in pump and in
inline mode. Lines are written by the worker's loop thread and flushed at
least once a second, so a test polls the file for the line it expects
rather than reading it once. The readiness probe (GET /__ready) is logged
too; tests pick their own lines by path.
"""

import json
import os
import re
import signal
import time

import pytest

from conftest import EXECUTORS
import helpers
from helpers import wait_until

pytestmark = pytest.mark.sluice_only

APPS = {"wsgi": "wsgi_app:app", "asgi": "asgi_app:app"}
# a streamed (chunked) body of 3 x 5 bytes, in each interface's test app
STREAM = {"wsgi": "/chunks?n=3&size=5", "asgi": "/stream?n=3&size=5"}
FLUSH_BOUND = 5.0  # the flush is due within ~1 s; slack for a busy machine

GUNICORN_DEFAULT = re.compile(
    r'^(?P<h>\S+) - (?P<u>\S+) \[\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2}'
    r' [+-]\d{4}\] "(?P<r>[^"]*)" (?P<s>\d{3}) (?P<b>\d+|-)'
    r' "(?P<f>[^"]*)" "(?P<a>[^"]*)"$')


@pytest.fixture(params=[(i, e) for i in APPS for e in EXECUTORS],
                ids=lambda p: "%s-%s" % p)
def kind(request):
    """(interface, executor) of this run."""
    return request.param


@pytest.fixture
def start(kind, make_server, tmp_path):
    """start(args=..., env=...): a server of this run's kind."""
    iface, executor = kind

    def start_server(args=(), **kw):
        return make_server(APPS[iface], inline=executor == "inline",
                           args=list(args), **kw)

    return start_server


def read_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace").splitlines()
    except FileNotFoundError:
        return []


def wait_line(path, needle, timeout=FLUSH_BOUND):
    """The first line of PATH holding NEEDLE, once one appears."""
    return wait_until(
        lambda: next((l for l in read_lines(path) if needle in l), None),
        timeout, "a line with %r in %s" % (needle, path))


def test_default_format_has_gunicorns_shape(start, tmp_path):
    log = tmp_path / "access.log"
    s = start(["--access-logfile", log])
    r = s.get("/hello?x=1", headers=[("Referer", "http://ref.test/"),
                                     ("User-Agent", "e2e-agent/1.0")])
    assert r.status == 200
    t0 = time.monotonic()
    line = wait_line(log, "/hello?x=1")
    # no traffic since: the 1 s timer wrote it
    assert time.monotonic() - t0 < FLUSH_BOUND
    m = GUNICORN_DEFAULT.match(line)
    assert m, line
    assert m.group("h") == "127.0.0.1"
    assert m.group("u") == "-"
    assert m.group("r") == "GET /hello?x=1 HTTP/1.1"
    assert m.group("s") == "200"
    assert m.group("b") == "6"  # "hello\n"
    assert m.group("f") == "http://ref.test/"
    assert m.group("a") == "e2e-agent/1.0"


def test_every_atom(kind, start, tmp_path):
    log = tmp_path / "access.log"
    fmt = ("h=%(h)s l=%(l)s u=%(u)s t=%(t)s r=%(r)s m=%(m)s U=%(U)s q=%(q)s"
           " H=%(H)s s=%(s)s B=%(B)s b=%(b)s f=%(f)s a=%(a)s T=%(T)s D=%(D)s"
           " M=%(M)s L=%(L)s p=%(p)s i=%({x-request-id}i)s"
           " o=%({content-type}o)s e=%({AL_E2E_VAR}e)s zz=%(zz)s %%")
    s = start(["--access-logfile", log, "--access-logformat", fmt],
              env={"AL_E2E_VAR": "env-value"})
    with s.connect() as c:
        r = c.request("GET", "/hello%20there?k=v&w=%22",
                      headers=[("X-Request-Id", 'id-7"\\'),
                               ("Authorization", "Basic Ym9iOnNlY3JldA=="),
                               ("User-Agent", "ua")])
        assert r.status in (200, 404)  # the route may not exist: any answer
        r2 = c.request("GET", STREAM[kind[0]])
        assert r2.status == 200 and len(r2.body) == 15
    line = wait_line(log, "U=/hello there")
    pid = s.worker_pids()[0]
    want = (r"^h=127\.0\.0\.1 l=- u=bob t=\[[^]]+\]"
            r" r=GET /hello%20there\?k=v&w=%22 HTTP/1\.1 m=GET"
            r" U=/hello there q=k=v&w=%22 H=HTTP/1\.1 s=(?P<s>\d{3})"
            r" B=(?P<B>\d+) b=(?P<b>\d+) f=- a=ua T=0 D=(?P<D>\d+)"
            r" M=(?P<M>\d+) L=0\.(?P<L>\d{6}) p=<PID>"
            r' i=id-7\\x22\\x5c o=(?P<o>\S+) e=env-value zz=- %$').replace(
                "PID", str(pid))
    m = re.match(want, line)
    assert m, line
    assert int(m.group("s")) == r.status
    assert int(m.group("B")) == len(r.body) == int(m.group("b"))
    assert m.group("o") == r.header("content-type").replace(" ", "")[:len(
        m.group("o"))]
    assert int(m.group("D")) // 1000 == int(m.group("M"))
    assert int(m.group("L")) == int(m.group("D"))
    # a streamed body: its bytes, not its chunk framing
    line = wait_line(log, "U=" + STREAM[kind[0]].split("?")[0])
    assert " s=200 B=15 b=15 " in line, line


def test_json_lines(kind, start, tmp_path):
    log = tmp_path / "access.log"
    s = start(["--access-logfile", log, "--access-log-json",
               "--access-logformat",
               "%(h)s %(t)s %(r)s %(m)s %(U)s %(q)s %(H)s %(s)s %(B)s %(b)s"
               " %(f)s %(a)s %(D)s %(p)s %({x-tag}i)s %({content-type}o)s"])
    r = s.get("/hello?q=1", headers=[("User-Agent", 'bad"\tua\\'),
                                     ("X-Tag", "caf\xe9")])
    assert r.status == 200
    line = wait_line(log, "/hello?q=1")
    obj = json.loads(line)
    assert obj["remote_addr"] == "127.0.0.1"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$",
                    obj["time"])
    assert obj["request"] == "GET /hello?q=1 HTTP/1.1"
    assert obj["method"] == "GET"
    assert obj["path"] == "/hello"
    assert obj["query"] == "q=1"
    assert obj["protocol"] == "HTTP/1.1"
    assert obj["status"] == 200
    assert obj["bytes"] == 6
    assert obj["referer"] is None
    assert obj["user_agent"] == 'bad"\tua\\'
    assert isinstance(obj["duration_us"], int)
    assert obj["pid"] == s.worker_pids()[0]
    # a latin-1 byte is not UTF-8: escaped as \u00e9, never a broken line
    assert obj["request_header:x-tag"] == "caf\xe9"
    assert obj["response_header:content-type"].startswith("text/plain")
    for l in read_lines(log):
        json.loads(l)


def test_json_by_format_name(start, tmp_path):
    log = tmp_path / "access.log"
    s = start(["--access-logfile", log, "--access-logformat", "json"])
    s.get("/hello?by=name")
    obj = json.loads(wait_line(log, "/hello?by=name"))
    assert set(obj) == {"remote_addr", "ident", "user", "time", "request",
                        "status", "bytes", "referer", "user_agent"}


def test_dash_is_stdout(start, tmp_path):
    s = start(["--access-logfile", "-"])
    s.get("/hello?to=stdout")
    line = wait_line(s.stdout_path, "/hello?to=stdout")
    assert GUNICORN_DEFAULT.match(line), line


def test_off_by_default(start, tmp_path):
    s = start()
    assert s.get("/hello?off=1").status == 200
    problems = s.stop()
    assert not problems, problems
    out = s.stdout_path.read_bytes()
    assert b"/hello?off=1" not in out
    assert not [p for p in os.listdir(s.workdir) if "access" in p]


def test_usr1_reopens_after_rename(start, tmp_path):
    log = tmp_path / "access.log"
    rotated = tmp_path / "access.log.1"
    s = start(["--access-logfile", log])
    s.get("/hello?before=1")
    wait_line(log, "before=1")
    os.rename(log, rotated)
    os.kill(s.pid, signal.SIGUSR1)
    wait_until(log.exists, FLUSH_BOUND, "the log file opened again")
    s.get("/hello?after=1")
    wait_line(log, "after=1")
    assert not [l for l in read_lines(rotated) if "after=1" in l]
    assert [l for l in read_lines(rotated) if "before=1" in l]


def test_flushed_at_sigterm(kind, start, tmp_path):
    log = tmp_path / "access.log"
    s = start(["--access-logfile", log])
    # many lines, then an immediate stop: the last ones go out at exit
    with s.connect() as c:
        for i in range(50):
            assert c.request("GET", "/hello?n=%d" % i).status == 200
    problems = s.stop()
    assert not problems, problems
    lines = [l for l in read_lines(log) if "/hello?n=" in l]
    assert len(lines) == 50
    assert lines[-1].split('"')[1] == "GET /hello?n=49 HTTP/1.1"


def test_loop_answers_are_logged(start, tmp_path):
    """Answers the loop gives without the app: health and a bad request."""
    log = tmp_path / "access.log"
    s = start(["--access-logfile", log, "--health-path", "/healthz"])
    assert s.get("/healthz").status == 200
    with s.connect() as c:
        c.send(b"GET /x HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n")
        assert c.read_response("GET").status == 400
    line = wait_line(log, "/healthz")
    assert GUNICORN_DEFAULT.match(line).group("s") == "200"
    bad = wait_until(lambda: [l for l in read_lines(log) if '"-" 400 ' in l],
                     FLUSH_BOUND, "the 400 in the access log")
    m = GUNICORN_DEFAULT.match(bad[0].replace('"-" 400', '"" 400'))
    assert m and int(m.group("b")) > 0, bad


def test_closed_stdout_never_stops_the_worker(kind, tmp_path):
    """stdout a pipe whose reader went away: lines are dropped and counted,
    the worker keeps serving and exits cleanly."""
    iface, executor = kind
    s = helpers.Server(tmp_path / "srv", APPS[iface],
                       inline=executor == "inline",
                       args=["--access-logfile", "-"])
    s.stdout_path = tmp_path / "stdout.fifo"
    os.mkfifo(s.stdout_path)
    reader = os.open(s.stdout_path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        s.start()
        os.close(reader)  # nobody reads the worker's stdout any more
        reader = None
        for i in range(3):
            assert s.get("/hello?gone=%d" % i).status == 200
        text = s.wait_for_log("lines dropped", timeout=FLUSH_BOUND)
        m = re.search(r"access log: (\d+) lines dropped \((\w+)\)", text)
        assert m, text
        assert int(m.group(1)) >= 1 and m.group(2) == "EPIPE"
        assert s.get("/hello?still=1").status == 200
        assert s.worker_pids()
    finally:
        if reader is not None:
            os.close(reader)
        problems = s.stop()
    assert not problems, problems


def test_bad_format_is_a_usage_error():
    status, out, err = helpers.run_cli(
        ["--access-logfile", "-", "--access-logformat", "%(h)s %(s", "-b",
         "127.0.0.1:%d" % helpers.free_port(), "wsgi_app:app"])
    assert status == 2, err
    assert err.count("\n") == 1 and "--access-logformat" in err, err


def test_unopenable_file_is_a_usage_error(tmp_path):
    bad = tmp_path / "no-such-dir" / "access.log"
    status, out, err = helpers.run_cli(
        ["--access-logfile", bad, "-b",
         "127.0.0.1:%d" % helpers.free_port(), "--pythonpath",
         str(helpers.APPS), "wsgi_app:app"], timeout=10)
    assert status == 2, err
    assert "cannot open the access log" in err, err


@pytest.mark.parametrize("executor", EXECUTORS)
def test_websocket_logged_once_at_its_end(executor, make_server, tmp_path):
    """A WebSocket is one line, written when it ends: status 101, its whole
    life as the duration."""
    from ws_helpers import WsRaw
    log = tmp_path / "access.log"
    s = make_server("ws_app:app", inline=executor == "inline",
                    args=["--interface", "asgi", "--access-logfile", log,
                          "--access-logformat", '"%(r)s" %(s)s %(b)s %(D)s'])
    with WsRaw.to(s, "/echo") as ws:
        assert ws.status == 101
        ws.send_text("hi")
        assert ws.recv_message()[1] == b"hi"
        # the session is open: nothing logged for it yet; a later
        # request's line, written after it would have been, shows that
        s.get("/echo-not-a-ws")
        wait_line(log, "/echo-not-a-ws")
        assert not [l for l in read_lines(log) if '"GET /echo HTTP' in l]
        t_open = time.monotonic()
    line = wait_line(log, '"GET /echo HTTP/1.1"')
    m = re.match(r'^"GET /echo HTTP/1\.1" 101 - (\d+)$', line)
    assert m, line
    assert int(m.group(1)) > 0
    assert time.monotonic() - t_open < FLUSH_BOUND



@pytest.mark.parametrize("executor", EXECUTORS)
def test_websocket_line_reads_its_handshake(executor, make_server, tmp_path):
    """A WebSocket's line is written long after its handshake, whose head
    the loop keeps compactly once the 101 is out (conn.c:
    sl_conn_pack_head()): the request line, path, query and request
    header fields, the last of the head and one past the header block's
    first 1 KiB, all still read right."""
    from ws_helpers import OP_PING, OP_PONG, WsRaw
    log = tmp_path / "access.log"
    s = make_server("ws_app:app", inline=executor == "inline",
                    args=["--interface", "asgi", "--access-logfile", log,
                          "--access-logformat",
                          '"%(r)s" %(s)s U=%(U)s q=%(q)s'
                          ' a=%({user-agent}i)s t=%({x-trace}i)s'
                          ' z=%({x-last}i)s n=%({x-none}i)s'])
    headers = [("User-Agent", "wsmem-test/1.0 (idle)"),
               ("X-Pad", "p" * 1200), ("X-Trace", "t-42"),
               ("X-Last", "the end")]
    with WsRaw.to(s, "/echo?room=7&x=%20y", headers=headers) as ws:
        assert ws.status == 101
        for i in range(3):
            ws.send_text("m%d" % i)
            assert ws.recv_message()[1] == b"m%d" % i
        ws.send_frame(OP_PING, b"ping-payload")
        assert ws.recv_frame() == (True, 0, OP_PONG, b"ping-payload")
    line = wait_line(log, '"GET /echo?room=7')
    assert line == ('"GET /echo?room=7&x=%20y HTTP/1.1" 101 U=/echo'
                    ' q=room=7&x=%20y a=wsmem-test/1.0 (idle) t=t-42'
                    ' z=the end n=-'), line


def test_workers_share_a_file_in_whole_lines(start, tmp_path):
    """Two workers append to one file: every line whole, none lost."""
    import threading
    log = tmp_path / "access.log"
    s = start(["--access-logfile", log], workers=2)
    n_threads, per = 4, 100

    def client(k):
        with s.connect() as c:
            for i in range(per):
                assert c.request("GET", "/hello?c=%d&i=%d" % (k, i)).status \
                    == 200

    threads = [threading.Thread(target=client, args=(k,))
               for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    problems = s.stop()
    assert not problems, problems
    lines = [l for l in read_lines(log) if "/hello?c=" in l]
    assert len(lines) == n_threads * per
    assert all(GUNICORN_DEFAULT.match(l) for l in lines), lines[:3]
    assert len(set(lines_paths(lines))) == n_threads * per


def lines_paths(lines):
    return [l.split('"')[1] for l in lines]


def test_h_is_the_client_a_trusted_proxy_names(start, tmp_path):
    """h shows the client a trusted proxy's X-Forwarded-For names, and the
    peer itself when the proxy is not trusted (then the header changes
    nothing)."""
    log = tmp_path / "access.log"
    s = start(["--access-logfile", log, "--access-logformat",
               "%(h)s %(q)s"])
    r = s.get("/hello?trusted",
              headers=[("X-Forwarded-For", "203.0.113.9, 127.0.0.1")])
    assert r.status == 200
    assert wait_line(log, " trusted") == "203.0.113.9 trusted"

    log2 = tmp_path / "access2.log"
    s2 = start(["--access-logfile", log2, "--access-logformat",
                "%(h)s %(q)s", "--forwarded-allow-ips", "10.0.0.1"])
    r = s2.get("/hello?untrusted",
               headers=[("X-Forwarded-For", "203.0.113.9")])
    assert r.status == 200
    assert wait_line(log2, " untrusted") == "127.0.0.1 untrusted"


def test_h_is_the_proxy_protocol_source(start, tmp_path):
    log = tmp_path / "access.log"
    s = start(["--access-logfile", log, "--access-logformat", "%(h)s %(q)s",
               "--proxy-protocol"], ready_path=None)
    with s.connect(timeout=helpers.START_TIMEOUT) as c:
        c.send(b"PROXY TCP6 2001:db8::7 ::1 40000 443\r\n" +
               helpers.build_request("GET", "/hello?proxied",
                                     [("Connection", "close")]))
        assert c.read_response().status == 200
    assert wait_line(log, " proxied") == "2001:db8::7 proxied"
