"""HTTPS in every executor mode, and WebSockets over TLS (wss://).

test_tls.py runs the TLS transport under WSGI in pump mode. Here the same
paths run in each of conftest's WSGI modes (inline mode, SLUICE_INLINE=1,
among them) and in the ASGI executors (pump and inline), and clients
test_tls.py does not use run against it: httpx (Debian's python3-httpx,
a connection pool that keeps its connection alive), python3-websockets
and Node's ws (node-ws) over wss://. Certificates are the test's own
(conftest's pki, tls_helpers.make_pki()).
"""

import asyncio
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

import helpers
from conftest import ASGI_EXECUTOR_PARAMS, WSGI_MODE_PARAMS, mode_kwargs
from e2e_data import pattern
from tls_helpers import TLSServer, client_context

pytestmark = pytest.mark.sluice_only

E2E = Path(__file__).resolve().parent
NODE_PATH = "/usr/share/nodejs"  # where Debian's node-ws puts require('ws')


def start(tmp_path_factory, pki, label, mode, app):
    workdir = tmp_path_factory.mktemp("%s-%s" % (label, mode["name"]))
    s = TLSServer(workdir, pki, app=app, **mode_kwargs(mode))
    yield from helpers.serving(s)


@pytest.fixture(scope="module", params=WSGI_MODE_PARAMS)
def wsgi(request, tmp_path_factory, pki):
    yield from start(tmp_path_factory, pki, "tls-wsgi", request.param,
                     "wsgi_app:app")


@pytest.fixture(scope="module", params=ASGI_EXECUTOR_PARAMS)
def asgi(request, tmp_path_factory, pki):
    yield from start(tmp_path_factory, pki, "tls-asgi", request.param,
                     "asgi_app:app")


@pytest.fixture(scope="module", params=ASGI_EXECUTOR_PARAMS)
def wss(request, tmp_path_factory, pki):
    yield from start(tmp_path_factory, pki, "tls-ws", request.param,
                     "ws_extra_app:app")


# ------------------------------------------------------------------ WSGI


def test_wsgi_keep_alive_and_pipelining(wsgi):
    with wsgi.connect() as c:
        for i in range(3):
            assert c.request("GET", "/hello?i=%d" % i).status == 200
        c.send(b"".join(helpers.build_request("GET", "/status?body=p%d" % i)
                        for i in range(6)))
        for i in range(6):
            r = c.read_response()
            assert (r.status, r.body) == (200, b"p%d" % i)


def test_wsgi_pipelined_past_the_read_buffer(wsgi):
    """400 requests in one write, many TLS records: the transport reads
    ahead of what one read takes, so whole records wait in OpenSSL, not
    in the socket; each must still be read (none waits for a readiness
    that never comes)."""
    pad = "x" * 300
    with wsgi.connect() as c:
        c.send(b"".join(helpers.build_request(
            "GET", "/status?body=p%d" % i, headers=[("X-Pad", pad)])
            for i in range(400)))
        for i in range(400):
            r = c.read_response()
            assert (r.status, r.body) == (200, b"p%d" % i)


def test_wsgi_upload_and_stream(wsgi):
    body = os.urandom(1024 * 1024 + 7)
    with wsgi.connect() as c:
        r = c.request("POST", "/echo?sha=1", body=body)
        assert r.json() == {"len": len(body),
                            "sha256": hashlib.sha256(body).hexdigest()}
        r = c.request("GET", "/chunks?n=20&size=30000")
        assert r.status == 200 and r.body == pattern(20 * 30000)


def test_wsgi_file_wrapper(wsgi, tmp_path):
    data = pattern(2 * 1024 * 1024 + 1)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    with wsgi.connect() as c:
        r = c.request("GET", "/file?path=%s" % path)
        assert r.status == 200 and r.body == data
        assert c.request("GET", "/hello").status == 200


def test_wsgi_environ(wsgi):
    with wsgi.connect() as c:
        env = c.request("GET", "/environ").json()
    assert env["wsgi.url_scheme"]["value"] == "https"
    assert env["HTTPS"]["value"] == "on"


# ------------------------------------------------------------------ ASGI


def test_asgi_keep_alive_and_pipelining(asgi):
    with asgi.connect() as c:
        for i in range(3):
            assert c.request("GET", "/hello?i=%d" % i).body == b"hello\n"
        c.send(b"".join(helpers.build_request("GET", "/hello")
                        for _ in range(6)))
        for _ in range(6):
            r = c.read_response()
            assert (r.status, r.body) == (200, b"hello\n")


def test_asgi_upload_and_stream(asgi):
    body = os.urandom(1024 * 1024 + 7)
    with asgi.connect() as c:
        r = c.request("POST", "/echo", body=body)
        assert r.status == 200 and r.body == body
        r = c.request("GET", "/stream?n=30&size=20000")
        assert r.status == 200
        assert r.body == b"".join(bytes([97 + i % 26]) * 20000
                                  for i in range(30))


def test_asgi_pathsend(asgi):
    with asgi.connect() as c:
        r = c.request("GET", "/pathsend")
        assert r.status == 200 and r.body == bytes(range(256)) * 1000
        assert c.request("GET", "/hello").status == 200


def test_asgi_scheme(asgi):
    with asgi.connect() as c:
        assert c.request("GET", "/scope").json()["scheme"] == "https"


# ----------------------------------------------------------------- httpx


def test_httpx_keep_alive(wsgi, pki):
    """httpx's pool keeps one connection for the requests in a row."""
    httpx = pytest.importorskip("httpx")
    with httpx.Client(verify=str(pki["ca"]), timeout=10) as client:
        ports = set()
        for i in range(5):
            r = client.get(wsgi.url("/environ?i=%d" % i))
            assert r.status_code == 200 and r.http_version == "HTTP/1.1"
            env = r.json()
            assert env["wsgi.url_scheme"]["value"] == "https"
            ports.add(env["REMOTE_PORT"]["value"])
        r = client.post(wsgi.url("/echo?sha=1"), content=b"x" * 100000)
        assert r.json()["len"] == 100000
    assert len(ports) == 1, ports


def test_httpx_asgi(asgi, pki):
    httpx = pytest.importorskip("httpx")
    with httpx.Client(verify=str(pki["ca"]), timeout=10) as client:
        for _ in range(3):
            r = client.post(asgi.url("/echo"), content=b"y" * 70000)
            assert r.status_code == 200 and r.content == b"y" * 70000


# ------------------------------------------------------------- wss://


def ws_connect(server, pki, path):
    import websockets
    return websockets.connect(server.url(path, "wss"),
                              ssl=client_context(pki), max_size=4 << 20,
                              open_timeout=10, close_timeout=5)


@pytest.mark.parametrize("size", [0, 125, 70000, 1 << 20])
def test_wss_echo_python(wss, pki, size):
    text = "abc\u00e9" * (size // 5)
    data = os.urandom(size)

    async def go():
        async with ws_connect(wss, pki, "/echo") as ws:
            await ws.send(text)
            got_text = await asyncio.wait_for(ws.recv(), 20)
            await ws.send(data)
            got_data = await asyncio.wait_for(ws.recv(), 20)
            await ws.close()
            return got_text, got_data, ws.close_code
    assert asyncio.run(go()) == (text, data, 1000)


def test_wss_scope(wss, pki):
    async def go():
        async with ws_connect(wss, pki, "/scope") as ws:
            return json.loads(await asyncio.wait_for(ws.recv(), 20))
    assert asyncio.run(go())["scheme"] == "wss"


def test_wss_echo_node(wss, pki):
    sizes = [0, 125, 65536, 1 << 20]
    env = dict(os.environ, NODE_PATH=NODE_PATH,
               NODE_EXTRA_CA_CERTS=str(pki["ca"]))
    p = subprocess.run(
        ["node", str(E2E / "ws_client.js"), "echo", wss.url("/echo", "wss"),
         ",".join(map(str, sizes))],
        env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, (p.stdout, p.stderr)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert [(r["kind"], r["size"], r["ok"]) for r in out["results"]] == \
        [(k, n, True) for n in sizes for k in ("text", "binary")], out
    assert out["pong"] is True
    assert out["close"][0] == 1000, out
