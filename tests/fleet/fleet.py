"""The fleet: two sluice "hosts" behind Debian's HAProxy, on one machine.

Each host is a network namespace of its own (`ip netns add`), joined to a
private bridge in the root namespace by a veth pair; its sluice (a
supervisor with 2 workers, --health-path, --shutdown-delay,
--proxy-protocol) binds the host's address on the bridge's /24. HAProxy
runs in the root namespace, listens on 127.0.0.1, health-checks both
hosts with GET /healthz and sends PROXY v2. Nothing leaves the machine:
the bridge has no uplink and no route is added beyond its own subnet.

Names carry this process's pid (netns "slfleet-PID-a", links "slfPIDbr",
"slfPIDa", ...) so that runs side by side do not meet, and a run killed
before its cleanup is swept by the next one: sweep_stale() deletes the
namespaces and links of pids that are gone. Cleanup runs from the
fixture's finally, and from atexit as the backstop.

The HAProxy configuration here is the one the deployment guide
(contrib/deploy/README.md) explains, with the timers shortened so that a
test takes seconds: a 503 from /healthz takes a host out within one
check interval (fall 1), two good checks bring it back (rise 2), and
`retry-on` with `option redispatch` moves a request that met a closing
or dead host to the other one, which is what makes "zero failed" hold.

The TLS arm (Fleet(tls=True)): the test is its own CA (make_pki, with
Debian's python3-trustme); each host's sluice serves a certificate of its
own, for NAME.fleet.test and its address, with --certfile/--keyfile, and
HAProxy's server lines say what an operator's would: `ssl verify required
ca-file <the CA> verifyhost NAME.fleet.test` (HAProxy's reasons are at
HAProxy.server_line). `ssl` puts the health checks over TLS too, with the
same verification; the PROXY header still comes first, before the
handshake. Its check timers are the guide's, longer than the plain arm's,
and its --shutdown-delay longer with them (TLS_CHECK_INTER_MS says why).
A backend no frontend uses (verify_probe) checks host a with a wrong name
and with a CA that did not sign it: those checks must fail, which shows
that verification is really on.

The HTTP/2 arms (Fleet(h2=True)): every host's sluice speaks HTTP/2 as
well (--http-protocols h2,h1) and HAProxy speaks only HTTP/2 to it,
multiplexing the load's requests as streams on its server connections.
In cleartext (h2c) the server lines say `proto h2` and sluice takes the
connection's preface as prior knowledge (--http2-cleartext
prior-knowledge: HAProxy is the trusted proxy that option is for); over
TLS (with tls=True) they say `alpn h2`, HAProxy offers nothing else, and
sluice picks h2 by ALPN. The health checks follow the server line: over
HTTP/2 too (HAProxy's check-proto and check-alpn default to the
server's). Each host's supervisor serves its metrics on its address,
port METRICS_PORT (Host.metrics), from which the test reads how many
requests each host served over HTTP/2.
"""

import atexit
import contextlib
import csv
import io
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import helpers
from helpers import wait_until

HERE = Path(__file__).resolve().parent
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
NETNS_PREFIX = "slfleet-"
LINK_RE = re.compile(r"^slf(\d+)(br|[a-z])$")
PORT = 8000           # every host's sluice port
METRICS_PORT = 9100   # every host's --metrics-bind port
DELAY = 1.5           # --shutdown-delay: > HAProxy's inter * fall + a check
GRACE = 10.0          # --graceful-timeout
CHECK_INTER_MS = 200  # HAProxy's health check interval
# The TLS arm's check timers are the deployment guide's (inter 1s,
# fastinter 500ms). HAProxy gives a check min(timeout connect, inter) to
# connect, and over TLS connecting includes the handshake, several turns of
# HAProxy's loop: on a busy two-core machine, under the test's load, 200 ms
# was too short for them (checks timed out and took hosts out), though
# sluice answered each step within a few milliseconds. A plain check only
# has to connect in that time (the kernel accepts); then it has `timeout
# check`.
TLS_CHECK_INTER_MS = 1000
TLS_CHECK_FASTINTER_MS = 500
TLS_DELAY = 2.5       # > 1 s inter * fall 1 + a check
TLS_DOMAIN = "fleet.test"  # host NAME's certificate names NAME.fleet.test


def run(*cmd, check=True):
    return subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, check=check, timeout=20,
                          text=True)


def missing_requirements():
    """Why the fleet cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", HAPROXY):
        if not shutil.which(tool):
            return "%s is missing (Debian packages iproute2, haproxy)" % tool
    return None


# ------------------------------------------------------------ namespaces

def _netns_pids(name):
    out = run("ip", "netns", "pids", name, check=False)
    return [int(p) for p in out.stdout.split() if p.isdigit()]


def delete_netns(name):
    """Kill whatever still runs in namespace NAME, then delete it."""
    for pid in _netns_pids(name):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(AssertionError):
        wait_until(lambda: not _netns_pids(name), 5,
                   "the processes of netns %s to die" % name)
    run("ip", "netns", "del", name, check=False)


def sweep_stale():
    """Delete namespaces and links left by fleet runs whose pid is gone."""
    for line in run("ip", "netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.match(re.escape(NETNS_PREFIX) + r"(\d+)-", name)
        if m and not helpers.alive(int(m.group(1))):
            delete_netns(name)
    for line in run("ip", "-o", "link", "show", check=False).stdout \
            .splitlines():
        fields = line.split(":")
        if len(fields) < 2:
            continue
        name = fields[1].strip().split("@")[0]
        m = LINK_RE.match(name)
        if m and not helpers.alive(int(m.group(1))):
            run("ip", "link", "del", name, check=False)


def free_subnet():
    """A 10.213.N.0/24 no interface of the root namespace is on."""
    used = run("ip", "-o", "-4", "addr", "show").stdout
    for n in range(1, 255):
        if " 10.213.%d." % n not in used:
            return "10.213.%d" % n
    raise AssertionError("no free 10.213.N.0/24 subnet")


class Network:
    """The bridge in the root namespace and one namespace per host name."""

    def __init__(self, names):
        self.pid = os.getpid()
        self.bridge = "slf%dbr" % self.pid
        self.subnet = None
        self.names = list(names)
        self.netns = {}     # host name -> namespace
        self.addr = {}      # host name -> its address on the bridge
        self.links = []
        self.gateway = None

    def up(self):
        sweep_stale()
        atexit.register(self.down)
        self.subnet = free_subnet()
        self.gateway = self.subnet + ".1"
        run("ip", "link", "add", self.bridge, "type", "bridge")
        self.links.append(self.bridge)
        run("ip", "addr", "add", self.gateway + "/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for i, name in enumerate(self.names):
            ns = "%s%d-%s" % (NETNS_PREFIX, self.pid, name)
            veth = "slf%d%s" % (self.pid, name)
            addr = "%s.%d" % (self.subnet, i + 2)
            run("ip", "netns", "del", ns, check=False)
            run("ip", "netns", "add", ns)
            self.netns[name] = ns
            run("ip", "link", "add", veth, "type", "veth", "peer", "name",
                "eth0", "netns", ns)
            self.links.append(veth)
            run("ip", "link", "set", veth, "master", self.bridge, "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
            run("ip", "-n", ns, "addr", "add", addr + "/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            self.addr[name] = addr
        return self

    def down(self):
        for ns in self.netns.values():
            delete_netns(ns)
        self.netns = {}
        for link in reversed(self.links):
            run("ip", "link", "del", link, check=False)
        self.links = []


# -------------------------------------------------------------------- PKI

def make_pki(d, hosts):
    """The TLS arm's certificates, as files in directory D: "ca", the CA
    HAProxy trusts; "stranger_ca", a CA that signed nothing here; and for
    each of HOSTS (Host objects) by its name a (certificate, key) pair,
    signed by "ca", for the host's dns_name and its address. trustme comes
    from Debian's python3-trustme."""
    import trustme

    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    out = {"ca": d / "ca.pem", "stranger_ca": d / "stranger-ca.pem"}
    ca.cert_pem.write_to_path(str(out["ca"]))
    trustme.CA().cert_pem.write_to_path(str(out["stranger_ca"]))
    for h in hosts:
        leaf = ca.issue_cert(h.dns_name, h.addr)
        cert, key = d / ("%s.pem" % h.name), d / ("%s-key.pem" % h.name)
        for i, blob in enumerate(leaf.cert_chain_pems):
            blob.write_to_path(str(cert), append=i > 0)
        leaf.private_key_pem.write_to_path(str(key))
        out[h.name] = (cert, key)
    return out


# ------------------------------------------------------------------ hosts

class Host:
    """One sluice host: its namespace, its directory, its app version;
    with TLS, its (certificate, key) files."""

    def __init__(self, net, name, workdir):
        self.net = net
        self.name = name
        self.workdir = Path(workdir)
        self.appdir = self.workdir / "app"
        self.server = None
        self.generation = 0
        self.version = None
        self.tls = None
        self.h2 = False
        self.preload = False  # --preload: workers forked by a zygote
        self.delay = DELAY

    @property
    def dns_name(self):
        """The name its certificate is for."""
        return "%s.%s" % (self.name, TLS_DOMAIN)

    @property
    def addr(self):
        return self.net.addr[self.name]

    def install(self, version):
        """Put VERSION of the app in place, as a release would."""
        self.appdir.mkdir(parents=True, exist_ok=True)
        src = (HERE / "fleet_app.py").read_text()
        new = re.sub(r'^VERSION = ".*"$', 'VERSION = "%s"' % version, src,
                     count=1, flags=re.M)
        assert new != src or version == "v1"
        (self.appdir / "fleet_app.py").write_text(new)
        self.version = version

    def start(self, version):
        self.install(version)
        self.generation += 1
        args = ["--interface", "asgi", "--name", "fleet-" + self.name,
                "--health-path", "/healthz",
                "--shutdown-delay", str(self.delay),
                "--graceful-timeout", str(GRACE),
                "--proxy-protocol", "--proxy-allow-from", self.net.gateway,
                "--metrics-bind", "%s:%d" % (self.addr, METRICS_PORT)]
        if self.tls is not None:
            args += ["--certfile", self.tls[0], "--keyfile", self.tls[1]]
        if self.preload:
            args += ["--preload"]
        if self.h2:
            args += ["--http-protocols", "h2,h1"]
            if self.tls is None:
                args += ["--http2-cleartext", "prior-knowledge"]
        self.server = helpers.Server(
            self.workdir / ("run%d" % self.generation), "fleet_app:app",
            args=args, workers=2, binds=["%s:%d" % (self.addr, PORT)],
            pythonpath=(str(self.appdir),), ready_path=None,
            env={"FLEET_HOST": self.name},
            prefix=["ip", "netns", "exec", self.net.netns[self.name]])
        self.server.start()
        # the socket accepts as soon as the supervisor binds it; a health
        # check sent before the workers are READY would wait (and time out)
        self.server.wait_for_log("All 2 workers are ready", timeout=60)
        return self

    @property
    def pid(self):
        return self.server.pid

    def signal(self, sig):
        os.kill(self.server.pid, sig)

    def wait_exit(self, timeout):
        """The supervisor's exit status, once it has exited."""
        try:
            return self.server.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("host %s did not exit within %.0fs\n%s" % (
                self.name, timeout, self.server.diagnostics()))

    def open_connections(self):
        """TCP connections established to the host's sluice now, as its
        own kernel counts them (ss in its namespace): what a crash of the
        host can cut."""
        out = run("ss", "-H", "-t", "-n", "-N", self.net.netns[self.name],
                  "state", "established", "( sport = :%d )" % PORT)
        return len([line for line in out.stdout.splitlines() if line])

    def metrics(self):
        """The host's supervisor's metrics now: {sample name with its
        labels: value}, from GET /metrics at METRICS_PORT."""
        url = "http://%s:%d/metrics" % (self.addr, METRICS_PORT)
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def kill(self):
        """SIGKILL every process of the host at once: the machine died."""
        os.killpg(self.server.pid, signal.SIGKILL)
        self.server.proc.wait(10)

    def stop(self):
        """Stop it (TERM); the problems seen, as Server.stop says them."""
        if self.server is None:
            return []
        problems = self.server.stop()
        return [p + "\n" + self.server.diagnostics() for p in problems]


# ---------------------------------------------------------------- HAProxy

HAPROXY_CFG = """\
global
    maxconn 4096
    stats socket {sock} mode 600 level admin
    stats timeout 10s

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 30s
    timeout tunnel 1h
    timeout http-keep-alive 60s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response junk-response response-timeout 503
    timeout check 1s

frontend fleet_in
    bind 127.0.0.1:{port}
    default_backend fleet

backend fleet
    balance roundrobin
    option httpchk GET /healthz
{check_send}    http-check expect status 200
    default-server check send-proxy-v2 inter {inter}ms fastinter {fastinter}ms downinter {inter}ms fall 1 rise 2
{servers}
"""

# The HTTP/2 arms' health checks name a host. HAProxy's `option httpchk
# GET /healthz` sends none; over HTTP/1 sluice answers that (as HTTP/1.0),
# but over HTTP/2 it becomes a HEADERS frame with neither :authority nor
# Host, which libnghttp2's request checks (on in sluice) reject: the stream
# is reset with PROTOCOL_ERROR and HAProxy counts a "Socket error". An
# operator's configuration for `proto h2` or `alpn h2` needs this line too.
H2_CHECK_SEND = "    http-check send hdr Host %s\n" % TLS_DOMAIN


# The TLS arm's backend that no frontend uses: host a checked with a name
# its certificate does not have, and with a CA that did not sign it. Both
# must stay DOWN. The first check comes within an inter of the start.
PROBE_CFG = """
backend verify_probe
    option httpchk GET /healthz
    http-check expect status 200
    default-server check send-proxy-v2 inter {inter}ms fall 1
{servers}
"""


class HAProxy:
    """Debian's haproxy in front of HOSTS; its stats socket is polled for
    what it thinks of each server. With PKI (make_pki's), it speaks TLS to
    the hosts and verifies them, and has the verify_probe backend."""

    def __init__(self, workdir, hosts, pki=None, h2=False):
        self.workdir = Path(workdir)
        self.hosts = hosts
        self.pki = pki
        self.h2 = h2
        self.inter = self.fastinter = CHECK_INTER_MS
        self.port = helpers.free_port()
        self.sock = self.workdir / "haproxy.sock"
        self.log_path = self.workdir / "haproxy.log"
        self.proc = None

    @staticmethod
    def server_line(name, host, ca=None, verifyhost=None, h2=False):
        """The server line for HOST, under NAME; with CA, over TLS; with
        H2, over HTTP/2 alone (`alpn h2` over TLS, else `proto h2`: prior
        knowledge).

        Over TLS with H2, also `check-proto h2`: HAProxy 2.6's health
        check takes the server's ALPN (check-alpn), so its handshake
        settles on h2, but without check-proto it then writes its request
        as HTTP/1.0 text on that connection, which sluice, expecting
        HTTP/2's preface, refuses ("Layer7 invalid response").

        What an operator writes for a host whose certificate names it:
        `ssl` (TLS to the server; the health checks follow it, with the
        same settings, as long as the server line has no `port` or `addr`:
        HAProxy 2.6's "ssl", "check-ssl"), `verify required` (the default,
        unless the global ssl-server-verify changes it; written out so that
        the line says it), `ca-file` (the CA that signs the hosts, not the
        system's), and `verifyhost`: without SNI HAProxy matches the
        certificate's names only against verifyhost, and without it checks
        the chain alone, so that any certificate from the CA would do. No
        `sni`: this backend has one name per server, and verifyhost alone
        also covers the health checks, which do not use `sni` (they would
        need check-sni). sluice serves its first certificate to a client
        that sends no SNI."""
        line = "    server %s %s:%d" % (name, host.addr, PORT)
        if ca is not None:
            line += " ssl verify required ca-file %s verifyhost %s" % (
                ca, verifyhost or host.dns_name)
            if h2:
                line += " alpn h2 check-proto h2"
        elif h2:
            line += " proto h2"
        return line

    def config(self):
        ca = self.pki["ca"] if self.pki else None
        servers = "\n".join(self.server_line(h.name, h, ca, h2=self.h2)
                            for h in self.hosts)
        cfg = HAPROXY_CFG.format(sock=self.sock, port=self.port,
                                 inter=self.inter, fastinter=self.fastinter,
                                 check_send=H2_CHECK_SEND if self.h2 else "",
                                 servers=servers)
        if self.pki:
            a, b = self.hosts[0], self.hosts[1]
            probes = "\n".join((
                self.server_line("wrong-name", a, ca, verifyhost=b.dns_name),
                self.server_line("wrong-ca", a, self.pki["stranger_ca"])))
            cfg += PROBE_CFG.format(inter=self.inter, servers=probes)
        return cfg

    def start(self):
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "haproxy.cfg"
        cfg.write_text(self.config())
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [HAPROXY, "-f", str(cfg), "-db"], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self._listening, 10, "haproxy to listen")
        return self

    def _listening(self):
        if self.proc.poll() is not None:
            raise AssertionError("haproxy exited with %s:\n%s" % (
                self.proc.returncode, self.log_text()))
        try:
            socket.create_connection(("127.0.0.1", self.port), 1).close()
        except OSError:
            return False
        return self.sock.exists()

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def log_text(self):
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def transitions(self, name):
        """How many times HAProxy logged server NAME going DOWN."""
        return len(re.findall(r"Server fleet/%s is DOWN" % re.escape(name),
                              self.log_text()))

    def command(self, line):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.sock))
            s.sendall(line.encode() + b"\n")
            out = b""
            while True:
                data = s.recv(65536)
                if not data:
                    return out.decode()
                out += data

    def servers(self, backend="fleet"):
        """{server name: its `show stat` row as a dict}, of BACKEND."""
        text = self.command("show stat").lstrip("# ")
        rows = csv.DictReader(io.StringIO(text))
        return {r["svname"]: r for r in rows if r["pxname"] == backend
                and r["svname"] not in ("FRONTEND", "BACKEND")}

    def status(self, name):
        """UP or DOWN (or "DOWN 1/2" while rising), once a check has
        been done: HAProxy starts a server as UP before checking it. While
        a check runs, check_status is the last one's with "* " before it
        ("* INI" during the first)."""
        row = self.servers()[name]
        if row["check_status"].lstrip("* ") in ("", "INI"):
            return "unchecked"
        return row["status"]

    def wait_status(self, name, status, timeout=15):
        wait_until(lambda: self.status(name) == status, timeout,
                   "haproxy to see server %s %s" % (name, status),
                   interval=0.02)

    def sessions(self, name):
        """Connections HAProxy has open to server NAME now (scur)."""
        return int(self.servers()[name]["scur"] or 0)


# ------------------------------------------------------------------ fleet

class Fleet:
    """Network, two hosts serving v1, HAProxy in front, all checked UP;
    with TLS, HAProxy speaks TLS to the hosts (make_pki's certificates);
    with H2, HTTP/2 (over TLS by ALPN, else by prior knowledge); with
    PRELOAD, the hosts fork their workers from a zygote (--preload)."""

    def __init__(self, workdir, names=("a", "b"), tls=False, h2=False,
                 preload=False):
        self.workdir = Path(workdir)
        self.tls = tls
        self.h2 = h2
        self.preload = preload
        self.delay = TLS_DELAY if tls else DELAY
        self.net = Network(names)
        self.hosts = {n: Host(self.net, n, self.workdir / ("host-" + n))
                      for n in names}
        for h in self.hosts.values():
            h.delay = self.delay
            h.h2 = h2
            h.preload = preload
        self.haproxy = HAProxy(self.workdir / "haproxy",
                               list(self.hosts.values()), h2=h2)
        if tls:
            self.haproxy.inter = TLS_CHECK_INTER_MS
            self.haproxy.fastinter = TLS_CHECK_FASTINTER_MS

    def up(self):
        self.net.up()
        if self.tls:
            # the certificates name the addresses, known only now
            pki = make_pki(self.workdir / "pki", self.hosts.values())
            for h in self.hosts.values():
                h.tls = pki[h.name]
            self.haproxy.pki = pki
        for h in self.hosts.values():
            h.start("v1")
        self.haproxy.start()
        for name in self.hosts:
            self.haproxy.wait_status(name, "UP")
        return self

    def down(self):
        """Stop everything; the problems seen stopping the hosts."""
        problems = []
        try:
            for h in self.hosts.values():
                problems += h.stop()
        finally:
            try:
                self.haproxy.stop()
            finally:
                self.net.down()
        return problems

    def deploy(self, host, version, on_down=None):
        """Deploy VERSION on HOST as an operator would: TERM; HAProxy must
        see the host DOWN (its /healthz says 503) while it still serves;
        it drains and exits 0; it starts with VERSION and HAProxy sees it
        UP again. ON_DOWN() runs once HAProxy has taken it out."""
        h = self.hosts[host]
        h.signal(signal.SIGTERM)
        t_term = time.monotonic()
        self.haproxy.wait_status(host, "DOWN", timeout=self.delay + 5)
        out_after = time.monotonic() - t_term
        assert out_after < self.delay, \
            "haproxy took %s out %.2fs after TERM: not within " \
            "--shutdown-delay %.1fs" % (host, out_after, self.delay)
        if on_down is not None:
            on_down()
        rc = h.wait_exit(self.delay + GRACE + 5)
        assert rc == 0, "host %s exited %s after TERM\n%s" % (
            host, rc, h.server.diagnostics())
        h.start(version)
        self.haproxy.wait_status(host, "UP")
        return out_after

    def rolling_restart(self, *hosts):
        """HUP to each of HOSTS at once; wait until each has both workers
        new and the old ones gone, and HAProxy has it UP. Returns the new
        worker pids, all hosts together."""
        old = {h: set(self.hosts[h].server.worker_pids()) for h in hosts}
        for h in hosts:
            self.hosts[h].signal(signal.SIGHUP)
        new = set()
        for h in hosts:
            server = self.hosts[h].server

            def replaced():
                now = set(server.worker_pids())
                return len(now) == 2 and not now & old[h] and now
            new |= wait_until(replaced, self.delay + GRACE + 20,
                              "host %s's workers to be replaced" % h,
                              interval=0.02)
            self.haproxy.wait_status(h, "UP")
        return new
