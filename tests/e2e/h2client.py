"""HTTP/2 clients for the end-to-end tests (test_h2.py, test_h2_attacks.py).

Two clients, one per kind of test:

- H2Client drives Python's h2 (Debian's python3-h2) over one socket: the
  protocol and executor tests. h2 keeps the client honest (HPACK, flow
  control in both directions, frame sizes, stream states); a server that
  breaks the protocol makes h2 raise, which fails the test with h2's words.
  Each stream's response is collected in a Response (status, headers,
  interim answers, body, trailers, reset code, timings); GOAWAY frames in
  `goaways`, PING acknowledgements in `pings`. The client grants window as
  it reads, except on streams in `stalled`, whose window it keeps shut
  (the connection's own window still opens).
- RawH2 writes frames the h2 state machine refuses to write (a RST_STREAM
  right behind each HEADERS, endless CONTINUATION, an HPACK bomb, floods)
  with hyperframe and hpack, and reads the server's frames one by one,
  decoding header blocks so the HPACK context stays in step: the attacks.

h2 4.1 treats every GOAWAY as the end of the connection and refuses the
frames that follow it; RFC 9113 section 6.8 lets streams up to the last
stream id finish after a graceful GOAWAY, so H2Client's connection keeps
its state open across one (the drain tests read those streams).

Servers: h2c_server() listens in cleartext with --http2-cleartext
prior-knowledge, h2_tls_server() with TLS and h2 offered by ALPN; both
speak HTTP/1.1 as well (--http-protocols h2,h1), which is how
helpers.Server sees them ready. connect() picks the transport from the
server.
"""

import collections
import select
import socket
import ssl
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import hpack
import hyperframe.frame as hf

import helpers
from conftest import mode_kwargs

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_ARGS = ["--http-protocols", "h2,h1"]
H2C_ARGS = H2_ARGS + ["--http2-cleartext", "prior-knowledge"]

NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
PROTOCOL_ERROR = 0x1
CANCEL = 0x8
REFUSED_STREAM = 0x7
ENHANCE_YOUR_CALM = 0xB
MAX_STREAM_ID = 2 ** 31 - 1


# ------------------------------------------------------------------ servers

def h2c_server(workdir, mode, app="wsgi_app:app", args=(), **kw):
    """A helpers.Server (not started) in MODE whose plain listener takes
    HTTP/1.1 and the HTTP/2 preface alike."""
    s = helpers.Server(workdir, app, **mode_kwargs(mode, H2C_ARGS +
                                                    list(args)), **kw)
    s.h2_ctx = None
    return s


def h2_context(pki, alpn=("h2",)):
    """A client TLS context trusting PKI's CA and offering ALPN."""
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    ctx.set_alpn_protocols(list(alpn))
    return ctx


def h2_tls_server(workdir, pki, mode, app="wsgi_app:app", args=(), **kw):
    """A tls_helpers.TLSServer (not started) in MODE that offers h2 by ALPN
    (and HTTP/1.1, which its readiness check speaks)."""
    from tls_helpers import TLSServer
    s = TLSServer(workdir, pki, app=app,
                  **mode_kwargs(mode, H2_ARGS + list(args)), **kw)
    s.h2_ctx = h2_context(pki)
    return s


def open_socket(server, timeout=helpers.IO_TIMEOUT, ctx=None, rcvbuf=None):
    """A socket to SERVER's first bind, over TLS when the server has an
    h2 context (or CTX is given): then ALPN must have picked h2."""
    family = socket.AF_INET6 if ":" in server.host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        if rcvbuf is not None:
            # before connect(): the window scale follows from it
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(timeout)
        s.connect((server.host, server.port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ctx = ctx or getattr(server, "h2_ctx", None)
        if ctx is not None:
            s = ctx.wrap_socket(s, server_hostname="localhost")
            got = s.selected_alpn_protocol()
            assert got == "h2", "ALPN picked %r, not h2" % got
    except BaseException:
        s.close()
        raise
    return s


def connect(server, timeout=helpers.IO_TIMEOUT, settings=None, **kw):
    """An H2Client on a new connection to SERVER, past the exchange of
    SETTINGS (the server's first frame must be SETTINGS)."""
    c = H2Client(open_socket(server, timeout), timeout, settings=settings,
                 **kw)
    c.authority = "localhost:%d" % server.port
    c.wait(lambda: c.server_settings is not None, timeout,
           "the server's SETTINGS")
    return c


def raw_connect(server, timeout=helpers.IO_TIMEOUT, rcvbuf=None,
                settings=None):
    """A RawH2 on a new connection to SERVER, past the SETTINGS exchange."""
    r = RawH2(open_socket(server, timeout, rcvbuf=rcvbuf), timeout)
    r.authority = "localhost:%d" % server.port
    r.handshake(settings or {})
    return r


# ------------------------------------------------------------------ H2Client

class Response:
    """One stream as the client saw it."""

    def __init__(self, sid):
        self.sid = sid
        self.status = None
        self.headers = []         # [(name, value)] as str, the final head
        self.interim = []         # the 1xx heads, in order
        self.body = bytearray()
        self.data_frames = 0      # DATA frames that carried bytes
        self.trailers = None
        self.ended = False        # END_STREAM seen
        self.reset = None         # the server's RST_STREAM error code
        self.t_start = time.monotonic()
        self.t_head = self.t_end = None

    @property
    def done(self):
        return self.ended or self.reset is not None

    def header(self, name, default=None):
        for k, v in self.headers:
            if k == name:
                return v
        return default

    def header_all(self, name):
        return [v for k, v in self.headers if k == name]

    def json(self):
        import json
        return json.loads(bytes(self.body))

    def __repr__(self):
        return "<h2 stream %d status=%s ended=%s reset=%s body=%d%s>" % (
            self.sid, self.status, self.ended, self.reset, len(self.body),
            (" %r" % bytes(self.body[:80])) if self.body else "")


class _Connection(h2.connection.H2Connection):
    """h2's connection, kept open across a GOAWAY (see the module's
    docstring): the streams the GOAWAY lets finish are still read."""

    def _receive_goaway_frame(self, frame):
        state = self.state_machine.state
        frames, events = super()._receive_goaway_frame(frame)
        self.state_machine.state = state
        return frames, events


class H2Client:
    """An HTTP/2 client connection (see the module's docstring)."""

    def __init__(self, sock, timeout=helpers.IO_TIMEOUT, settings=None):
        self.sock = sock
        self.timeout = timeout
        self.authority = "localhost"
        cfg = h2.config.H2Configuration(client_side=True,
                                        header_encoding="utf-8")
        self.conn = _Connection(config=cfg)
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.streams = {}
        self.goaways = []       # [(error code, last stream id, data, time)]
        self.pings = []         # opaque data of the acknowledged PINGs
        self.server_settings = None
        self.settings_acked = 0
        self.closed = False     # the server closed (or reset) the socket
        self.stalled = set()    # streams whose window the client keeps shut
        self.flush()

    # -- plumbing

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def flush(self):
        data = self.conn.data_to_send()
        if data and not self.closed:
            try:
                self.sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                self.closed = True

    def pump(self, timeout):
        """Read what arrives within TIMEOUT (once), handle it; False when
        nothing came."""
        if self.closed:
            return False
        if not (isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()):
            ready, _, _ = select.select([self.sock], [], [], timeout)
            if not ready:
                return False
        try:
            data = self.sock.recv(1 << 20)
        except (ssl.SSLWantReadError, BlockingIOError):
            return False
        except (ConnectionResetError, ssl.SSLEOFError):
            data = b""
        if not data:
            self.closed = True
            return True
        for ev in self.conn.receive_data(data):
            self._handle(ev)
        self.flush()
        return True

    def wait(self, predicate, timeout=None, what="the server"):
        """Pump until PREDICATE() is true; AssertionError after TIMEOUT or
        when the connection closes first."""
        timeout = self.timeout if timeout is None else timeout
        end = time.monotonic() + timeout
        while not predicate():
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("timed out after %.1fs waiting for %s "
                                     "(streams %s, goaways %s)" % (
                                         timeout, what,
                                         list(self.streams.values()),
                                         self.goaways))
            if self.closed:
                raise AssertionError("connection closed while waiting for "
                                     "%s (streams %s, goaways %s)" % (
                                         what, list(self.streams.values()),
                                         self.goaways))
            self.pump(min(left, 0.5))
        return predicate()

    def settle(self, sid, timeout=None):
        """Pump until stream SID ends or is reset, a GOAWAY comes or the
        connection closes (whichever first); SID's Response."""
        r = self.streams[sid]
        timeout = self.timeout if timeout is None else timeout
        end = time.monotonic() + timeout
        while not (r.done or self.goaways or self.closed):
            left = end - time.monotonic()
            assert left > 0, "stream %d unsettled after %.1fs: %r" % (
                sid, timeout, r)
            self.pump(min(left, 0.5))
        return r

    def wait_closed(self, timeout=None):
        """Pump until the server closes the connection."""
        timeout = self.timeout if timeout is None else timeout
        end = time.monotonic() + timeout
        while not self.closed:
            left = end - time.monotonic()
            assert left > 0, "the connection stayed open %.1fs" % timeout
            self.pump(min(left, 0.5))

    def _handle(self, ev):
        E = h2.events
        now = time.monotonic()
        r = self.streams.get(getattr(ev, "stream_id", None))
        if isinstance(ev, E.RemoteSettingsChanged):
            self.server_settings = dict(self.conn.remote_settings)
        elif isinstance(ev, E.SettingsAcknowledged):
            self.settings_acked += 1
        elif isinstance(ev, E.InformationalResponseReceived):
            r.interim.append(list(ev.headers))
        elif isinstance(ev, E.ResponseReceived):
            r.headers = list(ev.headers)
            r.status = int(r.header(":status"))
            r.t_head = now
        elif isinstance(ev, E.TrailersReceived):
            r.trailers = list(ev.headers)
        elif isinstance(ev, E.DataReceived):
            if ev.data:
                r.body += ev.data
                r.data_frames += 1
            n = ev.flow_controlled_length
            if n:
                if ev.stream_id in self.stalled:
                    self.conn.increment_flow_control_window(n)
                else:
                    self.conn.acknowledge_received_data(n, ev.stream_id)
        elif isinstance(ev, E.StreamEnded):
            r.ended, r.t_end = True, now
        elif isinstance(ev, E.StreamReset):
            if r is not None:
                r.reset, r.t_end = int(ev.error_code), now
        elif isinstance(ev, E.PingAckReceived):
            self.pings.append(ev.ping_data)
        elif isinstance(ev, E.ConnectionTerminated):
            self.goaways.append((int(ev.error_code), ev.last_stream_id,
                                 ev.additional_data, now))

    # -- requests

    def start(self, method, path, headers=(), body=None, end=True,
              authority=None):
        """Open a stream for METHOD PATH with HEADERS ([(name, value)],
        lower-case names) and send BODY (bytes) under flow control; the
        stream ends with it when END. Returns the stream id."""
        sid = self.conn.get_next_available_stream_id()
        self.streams[sid] = Response(sid)
        head = [(":method", method), (":scheme", self.scheme),
                (":authority", authority or self.authority),
                (":path", path)] + list(headers)
        self.conn.send_headers(sid, head, end_stream=end and body is None)
        self.flush()
        if body is not None:
            self.send_body(sid, body, end=end)
        return sid

    @property
    def scheme(self):
        return "https" if isinstance(self.sock, ssl.SSLSocket) else "http"

    def send_body(self, sid, data, end=True, timeout=None, stop=None):
        """Send DATA on SID as the windows allow, reading meanwhile; the
        number of bytes sent. STOP(): give up (with what was sent) when it
        turns true while the window is shut."""
        timeout = self.timeout if timeout is None else timeout
        view = memoryview(data)
        sent = 0
        deadline = time.monotonic() + timeout
        while sent < len(view):
            r = self.streams[sid]
            if r.done or self.closed:
                return sent
            n = min(self.conn.local_flow_control_window(sid),
                    self.conn.max_outbound_frame_size, len(view) - sent)
            if n <= 0:
                if stop is not None and stop():
                    return sent
                assert time.monotonic() < deadline, \
                    "the window of stream %d stayed shut %.1fs (%d of %d " \
                    "bytes sent)" % (sid, timeout, sent, len(view))
                self.pump(0.05)
                continue
            last = end and sent + n == len(view)
            try:
                self.conn.send_data(sid, bytes(view[sent:sent + n]),
                                    end_stream=last)
            except h2.exceptions.StreamClosedError:
                return sent  # the server ended or reset it meanwhile
            sent += n
            self.flush()
            self.pump(0)
        if end and not len(view):
            self.conn.end_stream(sid)
            self.flush()
        return sent

    def response(self, sid, timeout=None):
        """SID's Response once it ended or was reset."""
        r = self.streams[sid]
        self.wait(lambda: r.done, timeout, "the end of stream %d" % sid)
        return r

    def request(self, method, path, headers=(), body=None, timeout=None,
                authority=None):
        """One request on a new stream: its Response, complete."""
        return self.response(self.start(method, path, headers, body,
                                        authority=authority), timeout)

    def get(self, path, headers=(), timeout=None):
        return self.request("GET", path, headers, timeout=timeout)

    def ping(self, timeout=None):
        """Send a PING; its round trip in seconds."""
        opaque = b"%08d" % (len(self.pings) % 10 ** 8)
        t0 = time.monotonic()
        n = len(self.pings)
        self.conn.ping(opaque)
        self.flush()
        self.wait(lambda: len(self.pings) > n, timeout, "a PING's ACK")
        return time.monotonic() - t0


# ------------------------------------------------------------------ RawH2

FRAME_NAMES = {0: "DATA", 1: "HEADERS", 2: "PRIORITY", 3: "RST_STREAM",
               4: "SETTINGS", 5: "PUSH_PROMISE", 6: "PING", 7: "GOAWAY",
               8: "WINDOW_UPDATE", 9: "CONTINUATION"}


def describe(frame):
    """A frame as one short line, for failure messages."""
    if isinstance(frame, hf.GoAwayFrame):
        return "GOAWAY(last=%d, code=%d, %r)" % (
            frame.last_stream_id, frame.error_code,
            bytes(frame.additional_data[:60]))
    if isinstance(frame, hf.RstStreamFrame):
        return "RST_STREAM(%d, code=%d)" % (frame.stream_id,
                                            frame.error_code)
    return "%s(%d, flags=%s, len=%d)" % (
        type(frame).__name__.replace("Frame", "").upper(), frame.stream_id,
        ",".join(sorted(frame.flags)), getattr(frame, "body_len", 0))


class RawH2:
    """Frames on a socket, without a state machine (see the module's
    docstring). The server's last frames are in `frames`, how many of
    each type in `counts`; its decoded
    header blocks in `heads` (stream id -> [[(name, value)], ...]); its
    resets in `resets`, DATA bytes in `data`, ended streams in `ended`,
    GOAWAY frames in `goaways`; `closed` once the socket ended (`reset`
    when it ended with a TCP reset)."""

    def __init__(self, sock, timeout=helpers.IO_TIMEOUT):
        self.sock = sock
        self.timeout = timeout
        self.authority = "localhost"
        self.buf = bytearray()
        self.frames = collections.deque(maxlen=64)  # the last ones
        self.counts = collections.Counter()         # all, by type
        self.heads = {}
        self.resets = {}
        self.data = {}
        self.ended = set()
        self.goaways = []
        self.closed = False
        self.reset = False
        self.cut = None            # the head of a frame the close cut
        self.server_settings = None
        self.acks = 0              # our SETTINGS the server acknowledged
        self.auto_ack = True       # acknowledge the server's SETTINGS/PING
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.decoder.max_header_list_size = 1 << 24
        self._block = None         # (stream id, bytes) of a header block
        self.next_sid = 1

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- writing

    def send(self, data):
        """Send DATA whole; False if the server closed or reset first."""
        if self.closed:
            return False
        try:
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.closed = True
            return False
        except socket.timeout:
            raise AssertionError("the server read nothing for %.1fs"
                                 % self.timeout)

    def handshake(self, settings):
        f = hf.SettingsFrame(0)
        f.settings = dict(settings)
        self.send(PREFACE + f.serialize())
        self.wait(lambda: self.server_settings is not None and self.acks,
                  what="the SETTINGS exchange")

    def sid(self):
        """The next client stream id."""
        sid, self.next_sid = self.next_sid, self.next_sid + 2
        return sid

    def request_block(self, path, method="GET", headers=()):
        """An HPACK block for a request (through this connection's
        encoder: blocks must reach the server in the order made)."""
        return self.encoder.encode(
            [(":method", method), (":scheme", "http"),
             (":authority", self.authority), (":path", path)] +
            list(headers))

    @staticmethod
    def headers_frame(sid, block, end_stream=True, end_headers=True):
        f = hf.HeadersFrame(sid)
        f.data = block
        if end_stream:
            f.flags.add("END_STREAM")
        if end_headers:
            f.flags.add("END_HEADERS")
        return f.serialize()

    @staticmethod
    def continuation_frame(sid, block, end_headers=False):
        f = hf.ContinuationFrame(sid)
        f.data = block
        if end_headers:
            f.flags.add("END_HEADERS")
        return f.serialize()

    @staticmethod
    def data_frame(sid, data=b"", end_stream=False):
        f = hf.DataFrame(sid)
        f.data = data
        if end_stream:
            f.flags.add("END_STREAM")
        return f.serialize()

    @staticmethod
    def rst_frame(sid, code=CANCEL):
        f = hf.RstStreamFrame(sid)
        f.error_code = code
        return f.serialize()

    @staticmethod
    def settings_frame(settings=None):
        f = hf.SettingsFrame(0)
        f.settings = dict(settings or {})
        return f.serialize()

    @staticmethod
    def ping_frame(opaque=b"12345678"):
        f = hf.PingFrame(0)
        f.opaque_data = opaque
        return f.serialize()

    def flood(self, data, seconds):
        """Send as much of DATA as the server takes within SECONDS, without
        reading: (bytes sent, how it ended: "all", "blocked" or
        "closed")."""
        self.sock.setblocking(False)
        view = memoryview(data)
        sent = 0
        end = time.monotonic() + seconds
        try:
            while sent < len(view):
                left = end - time.monotonic()
                if left <= 0:
                    return sent, "blocked"
                try:
                    sent += self.sock.send(view[sent:sent + (1 << 18)])
                except (BlockingIOError, ssl.SSLWantWriteError,
                        ssl.SSLWantReadError):
                    select.select([], [self.sock], [], min(left, 0.1))
                except (BrokenPipeError, ConnectionResetError,
                        ssl.SSLError):
                    self.closed = True
                    return sent, "closed"
            return sent, "all"
        finally:
            self.sock.setblocking(True)
            self.sock.settimeout(self.timeout)

    # -- reading

    def pump(self, timeout):
        """Read what arrives within TIMEOUT (once) and parse whole frames;
        False when nothing came."""
        if self.closed and not self.buf:
            return False
        if not self.closed:
            if not (isinstance(self.sock, ssl.SSLSocket)
                    and self.sock.pending()):
                ready, _, _ = select.select([self.sock], [], [], timeout)
                if not ready:
                    return False
            try:
                data = self.sock.recv(1 << 20)
            except (ssl.SSLWantReadError, BlockingIOError):
                return False
            except ConnectionResetError:
                data, self.reset = b"", True
            except ssl.SSLError:
                data = b""
            if not data:
                self.closed = True
            self.buf += data
        self._parse()
        if self.closed and self.buf:
            # a frame cut short by the close (or a reset): nothing more
            # of it will come
            self.cut = bytes(self.buf[:9])
            self.buf.clear()
        return True

    def _parse(self):
        while len(self.buf) >= 9:
            f, length = hf.Frame.parse_frame_header(memoryview(self.buf[:9]))
            if len(self.buf) < 9 + length:
                return
            f.parse_body(memoryview(bytes(self.buf[9:9 + length])))
            del self.buf[:9 + length]
            self._on_frame(f)

    def _on_frame(self, f):
        self.frames.append(f)
        self.counts[FRAME_NAMES.get(f.type, hex(f.type))] += 1
        if isinstance(f, hf.SettingsFrame):
            if "ACK" in f.flags:
                self.acks += 1
            else:
                self.server_settings = {**(self.server_settings or {}),
                                        **f.settings}
                if self.auto_ack:
                    ack = hf.SettingsFrame(0)
                    ack.flags.add("ACK")
                    self.send(ack.serialize())
        elif isinstance(f, hf.PingFrame):
            if "ACK" not in f.flags and self.auto_ack:
                ack = hf.PingFrame(0)
                ack.flags.add("ACK")
                ack.opaque_data = f.opaque_data
                self.send(ack.serialize())
        elif isinstance(f, hf.GoAwayFrame):
            self.goaways.append(f)
        elif isinstance(f, hf.RstStreamFrame):
            self.resets[f.stream_id] = f.error_code
        elif isinstance(f, (hf.HeadersFrame, hf.ContinuationFrame)):
            if isinstance(f, hf.HeadersFrame):
                self._block = (f.stream_id, bytearray())
            self._block[1].extend(f.data)
            if "END_HEADERS" in f.flags:
                sid, block = self._block
                self._block = None
                self.heads.setdefault(sid, []).append(
                    self.decoder.decode(bytes(block), raw=False))
            if "END_STREAM" in f.flags:
                self.ended.add(f.stream_id)
        elif isinstance(f, hf.DataFrame):
            self.data[f.stream_id] = self.data.get(f.stream_id, b"") + f.data
            if "END_STREAM" in f.flags:
                self.ended.add(f.stream_id)

    def wait(self, predicate, timeout=None, what="the server"):
        """Read until PREDICATE() is true; AssertionError after TIMEOUT, or
        when the connection ended first (with the frames seen)."""
        timeout = self.timeout if timeout is None else timeout
        end = time.monotonic() + timeout
        while not predicate():
            left = end - time.monotonic()
            if left <= 0 or (self.closed and not self.buf):
                raise AssertionError("%s waiting for %s; last frames: %s" % (
                    "timed out after %.1fs" % timeout if left <= 0
                    else "connection closed", what, self.summary()))
            self.pump(min(left, 0.5))
        return predicate()

    def wait_end(self, timeout=None):
        """Read until the server sends GOAWAY or the connection ends; the
        GOAWAY frame or None (the time bound exceeded fails)."""
        self.wait(lambda: self.goaways or (self.closed and not self.buf),
                  timeout, "GOAWAY or the end of the connection")
        return self.goaways[0] if self.goaways else None

    def status(self, sid):
        """The final :status of SID's response, or None."""
        for head in self.heads.get(sid, []):
            st = dict(head).get(":status")
            if st is not None and not st.startswith("1"):
                return int(st)
        return None

    def summary(self, n=12):
        tail = [describe(f) for f in list(self.frames)[-n:]]
        return "frames %s, closed=%s reset=%s cut=%r, last: %s" % (
            dict(self.counts), self.closed, self.reset, self.cut,
            "; ".join(tail))
