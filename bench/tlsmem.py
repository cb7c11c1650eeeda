#!/usr/bin/python3
"""tlsmem: bytes per idle TLS keep-alive connection, sluice beside nginx
(issue 28).

Each server (one process: a sluice worker, nginx with master_process off)
gets 20 warm-up TLS connections, then N (default 1,000) TLS connections
that each make one request and stay open; the serving process's VmRSS
before and after, divided by N, is what an idle TLS connection costs it.
The same over plain TCP says how much of that is TLS. Certificates are
made at start (openssl req: ECDSA P-256 and RSA 2048) in a temporary
directory, never kept; both servers use the same pair, TLS 1.2 and 1.3,
session tickets on, and release OpenSSL's buffers when idle (sluice
always; nginx does by default).

The report (Markdown) goes to stdout and, with --out, to a file:

    /usr/bin/python3 bench/tlsmem.py --out bench/results/tls-idle-memory-28.md
"""

import argparse
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HELLO_WSGI = HERE / "apps"

NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log stderr warn;
events {{ worker_connections {conns}; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    client_body_temp_path {dir};
    proxy_temp_path {dir};
    fastcgi_temp_path {dir};
    uwsgi_temp_path {dir};
    scgi_temp_path {dir};
    server {{
        listen 127.0.0.1:{port} {ssl} backlog=2048;
        {tls}
        location / {{
            default_type text/plain;
            return 200 "Hello, World!";
        }}
    }}
}}
"""

NGINX_TLS = """ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache off;
        ssl_session_tickets on;"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for %d" % pid)


def settled_rss(pid):
    """VmRSS once two reads 50 ms apart agree (at most 5 s)."""
    last = rss_kib(pid)
    for _ in range(100):
        time.sleep(0.05)
        now = rss_kib(pid)
        if now == last:
            return now
        last = now
    return last


def make_pair(d, kind):
    cert, key = d / ("%s.pem" % kind), d / ("%s.key" % kind)
    algo = (["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
            if kind == "ecdsa" else ["-newkey", "rsa:2048"])
    subprocess.run(["openssl", "req", "-x509", "-nodes", "-days", "2"] +
                   algo + ["-keyout", str(key), "-out", str(cert),
                           "-subj", "/CN=localhost",
                           "-addext", "subjectAltName=DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


def wait_listening(port, proc, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("the server exited with %s" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on %d" % port)


def child_pid(pid, timeout=20):
    """The one worker of sluice's supervisor PID, once it serves."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            kids = Path("/proc/%d/task/%d/children" % (pid, pid)).read_text()
        except OSError:
            kids = ""
        if kids.split():
            return int(kids.split()[0])
        time.sleep(0.05)
    raise RuntimeError("no worker")


def start_sluice(binary, d, port, pair, conns):
    cmd = [binary, "-b", "127.0.0.1:%d" % port, "-w", "1",
           "--pythonpath", str(HELLO_WSGI), "--worker-connections",
           str(conns + 100), "--keep-alive", "120", "--header-timeout", "120",
           "--backlog", "2048", "--error-logfile", str(d / "sluice.log")]
    if pair:
        cmd += ["--certfile", str(pair[0]), "--keyfile", str(pair[1])]
    proc = subprocess.Popen(cmd + ["hello_wsgi:app"],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_listening(port, proc)
    return proc, child_pid(proc.pid)


def start_nginx(d, port, pair, conns):
    tls = NGINX_TLS.format(cert=pair[0], key=pair[1]) if pair else ""
    conf = d / ("nginx-%d.conf" % port)
    conf.write_text(NGINX_CONF.format(dir=d, port=port, conns=conns + 100,
                                      ssl="ssl" if pair else "", tls=tls))
    proc = subprocess.Popen(["/usr/sbin/nginx", "-e", "stderr", "-c",
                             str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_listening(port, proc)
    return proc, proc.pid


REQUEST = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"


def one_request(s):
    s.sendall(REQUEST)
    got = b""
    while b"Hello, World!" not in got:
        chunk = s.recv(4096)
        if not chunk:
            raise RuntimeError("closed: %r" % got)
        got += chunk


def open_conns(port, n, ctx):
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        out.append(ctx.wrap_socket(s, server_hostname="localhost")
                   if ctx else s)
    return out


def measure(port, pid, n, ctx):
    warm = open_conns(port, 20, ctx)
    for s in warm:
        one_request(s)
    for s in warm:
        s.close()
    time.sleep(0.5)  # the server closes them: no condition to poll here
    before = settled_rss(pid)
    socks = open_conns(port, n, ctx)
    for s in socks:
        one_request(s)
    after = settled_rss(pid)
    for s in socks:
        s.close()
    return (after - before) * 1024 / n


def client_ctx(version):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ctx.maximum_version = version
    return ctx


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sluice-bin", default=str(ROOT / "sluice"))
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--out")
    a = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory(prefix="tlsmem-") as tmp:
        d = Path(tmp)
        pairs = {"ECDSA P-256": make_pair(d, "ecdsa"),
                 "RSA 2048": make_pair(d, "rsa")}
        arms = [("plain", None, None)]
        for name, pair in pairs.items():
            for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
                arms.append(("%s, %s" % (version.name.replace("v1_", " 1."),
                                         name), pair, version))
        for label, pair, version in arms:
            row = [label]
            for start in (lambda p: start_sluice(a.sluice_bin, d, p, pair,
                                                 a.conns),
                          lambda p: start_nginx(d, p, pair, a.conns)):
                port = free_port()
                proc, pid = start(port)
                try:
                    row.append(measure(port, pid, a.conns,
                                       client_ctx(version) if pair else None))
                finally:
                    proc.terminate()
                    proc.wait(timeout=30)
            rows.append(row)

    lines = ["# Bytes per idle keep-alive connection, sluice and nginx",
             "",
             "`bench/tlsmem.py`: %d connections, each one request then idle;"
             " growth of the serving process's VmRSS / connections (sluice's"
             " one worker; nginx with master_process off). Warm-up: 20"
             " connections." % a.conns, "",
             "| connection | sluice | nginx | sluice / nginx |",
             "|---|---:|---:|---:|"]
    for label, s, n in rows:
        lines.append("| %s | %.0f | %.0f | %s |" % (
            label, s, n, "%.2f" % (s / n) if n > 0 else "—"))
    lines.append("")
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
