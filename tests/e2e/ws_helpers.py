"""Helpers for the WebSocket end-to-end tests (test_websocket*.py).

WsServer: helpers.Server that can also start a reference server instead of
sluice. SLUICE_WS_TARGET picks it: "sluice" (the default), "uvicorn"
(Debian's uvicorn with --ws websockets) or "uvicorn-wsproto" (--ws
wsproto). That is how these tests were checked before sluice served
WebSockets; tests of sluice-only behaviour skip on the references
(sluice_ws_only).

ws_* : a small RFC 6455 client on a raw socket, for what a well-behaved
client library will not do (unmasked frames, bad UTF-8, not answering
pings, reading a close frame byte for byte) and for checking exactly what
came back.

In TLS mode (helpers.TLS) the server's URL is wss://, ws_connect() gives
the python client the session CA's context, ws_node_env() hands the CA to
node (NODE_EXTRA_CA_CERTS), and WsRaw shakes hands before it upgrades.
"""

import base64
import hashlib
import os
import socket
import struct
import time
import zlib

import pytest

import helpers

WS_TARGET = os.environ.get("SLUICE_WS_TARGET", "sluice")
UVICORN_WS = {"uvicorn": "websockets", "uvicorn-wsproto": "wsproto"}
if WS_TARGET != "sluice" and WS_TARGET not in UVICORN_WS:
    raise RuntimeError("unknown SLUICE_WS_TARGET=%r (sluice, uvicorn, "
                       "uvicorn-wsproto)" % WS_TARGET)
ON_SLUICE = WS_TARGET == "sluice"

sluice_ws_only = pytest.mark.skipif(
    not ON_SLUICE, reason="sluice-specific (target %s)" % WS_TARGET)

# Options both sluice and uvicorn take, with the same meaning.
SHARED_WS_OPTIONS = ("--ws-max-size", "--ws-ping-interval",
                     "--ws-ping-timeout", "--ws-per-message-deflate")

NODE_PATH = "/usr/share/nodejs"  # where Debian's node-ws puts require('ws')
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class WsServer(helpers.Server):
    """A Server on SLUICE_WS_TARGET. ARGS use sluice's option names; on
    uvicorn only SHARED_WS_OPTIONS are passed on (others are dropped: a
    test that depends on them is sluice_ws_only)."""

    def command(self):
        if ON_SLUICE:
            return super().command()
        cmd = ["/usr/bin/python3", "-m", "uvicorn",
               "--ws", UVICORN_WS[WS_TARGET],
               "--host", self.host, "--port", str(self.port),
               "--app-dir", self.pythonpath[0], "--log-level", "warning",
               "--no-access-log",
               # uvicorn 0.17 has no lifespan state, which asgi_starlette's
               # lifespan needs; no WebSocket test needs a lifespan
               "--lifespan", "off"]
        if self.tls:
            pki = helpers.tls_pki()
            cmd += ["--ssl-certfile", str(pki["cert"]),
                    "--ssl-keyfile", str(pki["key"])]
        a = list(self.args)
        while a:
            opt = a.pop(0)
            val = a.pop(0) if a and not a[0].startswith("--") else None
            if opt in SHARED_WS_OPTIONS:
                cmd += [opt, val]
        cmd.append(self.app)
        return cmd

    def ws_worker_pid(self):
        """The process that runs the app (the one worker, or uvicorn)."""
        if not ON_SLUICE:
            return self.pid
        return self.wait_workers(1)[0]

    def url(self, path):
        return ws_url(self, path)


def ws_url(server, path):
    """SERVER's URL for PATH: ws://, or wss:// when SERVER speaks TLS."""
    scheme = "wss" if getattr(server, "tls", False) else "ws"
    return "%s://%s:%d%s" % (scheme, server.host, server.port, path)


def ws_connect(url, **kw):
    """websockets.connect(URL, **KW), with the session CA's context for a
    wss:// URL."""
    import websockets
    if url.startswith("wss:"):
        kw.setdefault("ssl", helpers.tls_pki()["context"])
    return websockets.connect(url, **kw)


def ws_skip_inline_on_reference(mode):
    if not ON_SLUICE and mode["inline"]:
        pytest.skip("%s has no inline mode" % WS_TARGET)


def ws_start(tmp_path_factory, label, mode, app, args=()):
    """A WsServer for APP in MODE (one of conftest's ASGI modes), not yet
    started: module fixtures yield from ws_serve() on it."""
    ws_skip_inline_on_reference(mode)
    from conftest import mode_kwargs
    workdir = tmp_path_factory.mktemp("%s-%s" % (label, mode["name"]))
    return WsServer(workdir, app, **mode_kwargs(mode, args))


def ws_serve(s):
    """Start S, yield it, stop it (helpers.serving())."""
    yield from helpers.serving(s)


# ------------------------------------------------------------ raw client

OP_CONT, OP_TEXT, OP_BIN, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10


class WsClosed(Exception):
    """The peer closed the TCP connection (EOF or reset) mid-read."""


def ws_accept_key(key):
    return base64.b64encode(hashlib.sha1(key.encode() + WS_GUID)
                            .digest()).decode()


def ws_frame(opcode, payload=b"", fin=True, mask=True, rsv=0,
             mask_key=None):
    """One frame as a client sends it (masked unless MASK is false)."""
    if isinstance(payload, str):
        payload = payload.encode()
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("!BB", b0, m | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, m | 126, n)
    else:
        head = struct.pack("!BBQ", b0, m | 127, n)
    if not mask:
        return head + payload
    key = mask_key if mask_key is not None else os.urandom(4)
    return head + key + ws_mask(payload, key)


def ws_mask(data, key):
    if not data:
        return b""
    n = len(data)
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")) \
        .to_bytes(n, "big")


def ws_close_payload(code, reason=""):
    return struct.pack("!H", code) + reason.encode()


def ws_deflate(data):
    """RFC 7692 §7.2.1: raw deflate, flushed, the final 00 00 ff ff cut."""
    c = zlib.compressobj(wbits=-15)
    out = c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


class WsRaw:
    """A client on a raw socket: the handshake, then frames in and out.
    Every read is bounded by TIMEOUT."""

    def __init__(self, host, port, path="/echo", headers=(), timeout=10.0,
                 rcvbuf=None, handshake=True, tls=False):
        self.sock = socket.socket(socket.AF_INET6 if ":" in host
                                  else socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        if tls:
            self.sock = helpers.tls_wrap(self.sock, host)
        self.buf = b""
        self.timeout = timeout
        self.status = None
        self.headers = []
        self.body = b""
        self.wire_in = 0  # frame bytes read, heads included
        self.closing = False  # a close frame was sent or received
        if handshake:
            self.handshake(host, port, path, headers)

    @classmethod
    def to(cls, server, path="/echo", **kw):
        """A client of SERVER (over TLS when SERVER is)."""
        kw.setdefault("tls", getattr(server, "tls", False))
        return cls(server.host, server.port, path, **kw)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Leave politely: a close frame 1000 unless a close was sent or
        seen, then the socket (the server's answer is not awaited).
        abort() leaves without one."""
        if self.status == 101 and not self.closing:
            try:
                self.sock.sendall(ws_frame(OP_CLOSE, ws_close_payload(1000)))
                helpers.half_close(self.sock)
                self.sock.settimeout(1.0)
                end = time.monotonic() + 2.0
                while self.sock.recv(65536) and time.monotonic() < end:
                    pass
            except OSError:
                pass
        self.sock.close()

    def abort(self):
        """Close the TCP connection without a close frame."""
        self.closing = True
        self.sock.close()

    def handshake(self, host, port, path, headers=()):
        """Send the upgrade request; read the response head (and, for a
        status other than 101, its Content-Length body)."""
        self.key = base64.b64encode(os.urandom(16)).decode()
        lines = ["GET %s HTTP/1.1" % path, "Host: %s:%d" % (host, port),
                 "Upgrade: websocket", "Connection: Upgrade",
                 "Sec-WebSocket-Key: %s" % self.key,
                 "Sec-WebSocket-Version: 13"]
        lines += ["%s: %s" % h for h in headers]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = self._read_until(b"\r\n\r\n")
        first, *rest = head.decode("latin-1").split("\r\n")
        self.status = int(first.split()[1])
        self.headers = [tuple(x.strip() for x in line.split(":", 1))
                        for line in rest if line]
        if self.status == 101:
            assert self.header("Sec-WebSocket-Accept") == \
                ws_accept_key(self.key), self.headers
            return
        n = self.header("Content-Length")
        if n is not None:
            self.body = self._read_exact(int(n))

    def header(self, name, default=None):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return default

    def _fill(self):
        try:
            data = self.sock.recv(1 << 16)
        except ConnectionResetError as e:
            raise WsClosed("connection reset") from e
        if not data:
            raise WsClosed("EOF")
        self.buf += data

    def _read_until(self, sep):
        while sep not in self.buf:
            self._fill()
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def _read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, data):
        self.sock.sendall(data)

    def send_frame(self, opcode, payload=b"", **kw):
        if opcode == OP_CLOSE:
            self.closing = True
        self.sock.sendall(ws_frame(opcode, payload, **kw))

    def send_text(self, text):
        self.send_frame(OP_TEXT, text.encode())

    def send_close(self, code=1000, reason=""):
        self.send_frame(OP_CLOSE, ws_close_payload(code, reason))

    def recv_frame(self):
        """(fin, rsv, opcode, payload) of the next frame; a server's frames
        must not be masked."""
        b0, b1 = self._read_exact(2)
        assert not b1 & 0x80, "server frame is masked"
        n = b1 & 0x7F
        extra = 0
        if n == 126:
            n = struct.unpack("!H", self._read_exact(2))[0]
            extra = 2
        elif n == 127:
            n = struct.unpack("!Q", self._read_exact(8))[0]
            extra = 8
        payload = self._read_exact(n)
        self.wire_in += 2 + extra + n
        return bool(b0 & 0x80), (b0 >> 4) & 7, b0 & 0x0F, payload

    def recv_message(self, answer_pings=True):
        """(opcode, payload, compressed) of the next data message,
        continuations joined (compressed: RSV1 on its first frame, payload
        not inflated). Pings are answered; a close frame raises
        AssertionError with its code."""
        parts, first_op, rsv1 = [], None, False
        while True:
            fin, rsv, op, payload = self.recv_frame()
            if op == OP_PING:
                if answer_pings:
                    self.send_frame(OP_PONG, payload)
                continue
            if op == OP_PONG:
                continue
            if op == OP_CLOSE:
                self.closing = True
                raise AssertionError("close frame %r instead of a message"
                                     % (ws_parse_close(payload),))
            if first_op is None:
                first_op, rsv1 = op, bool(rsv & 4)
            parts.append(payload)
            if fin:
                return first_op, b"".join(parts), rsv1

    def recv_close(self, skip_data=True, answer_pings=False):
        """Read frames until a close frame; (code, reason) of it (code None
        for an empty close). Data frames and pings before it are skipped;
        EOF before it raises WsClosed."""
        while True:
            fin, rsv, op, payload = self.recv_frame()
            if op == OP_CLOSE:
                self.closing = True
                return ws_parse_close(payload)
            if op == OP_PING and answer_pings:
                self.send_frame(OP_PONG, payload)
            elif op not in (OP_PING, OP_PONG) and not skip_data:
                raise AssertionError("frame op %d before the close" % op)

    def expect_eof(self, timeout=5.0):
        """The server closes the TCP connection after the close handshake;
        anything but frames-then-EOF within TIMEOUT fails."""
        end = time.monotonic() + timeout
        while True:
            self.sock.settimeout(max(0.05, end - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return "reset"
            except socket.timeout:
                raise AssertionError("no EOF within %.1fs" % timeout)
            if not data:
                return "eof"


def ws_parse_close(payload):
    if not payload:
        return None, ""
    code = struct.unpack("!H", payload[:2])[0]
    return code, payload[2:].decode("utf-8", "replace")


def ws_node_env():
    env = dict(os.environ)
    env["NODE_PATH"] = NODE_PATH
    if helpers.TLS:
        env["NODE_EXTRA_CA_CERTS"] = str(helpers.tls_pki()["ca"])
    return env


def ws_run(coro):
    """Run a coroutine of the python websockets client to completion."""
    import asyncio
    return asyncio.run(coro)

