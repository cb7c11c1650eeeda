#!/usr/bin/python3
"""icount.py - instructions per request under callgrind, before and after.

On a shared machine CPU time per request moves by tens of percent from one
run to the next; the number of instructions a worker executes per request
does not. This runs each arm twice under valgrind's callgrind (every
process of the server's tree), serving N1 and then N2 pipelined requests,
and reports (Ir(N2) - Ir(N1)) / (N2 - N1) for the worker: start-up, the
import of the app and the shutdown cancel out. A report beside the
benchmark, not a replacement for it: it counts instructions, not cache
misses or system calls, and valgrind serialises threads.

    bench/icount.py --before-bin OLD/sluice [--sluice-bin ./sluice]
    bench/icount.py --against nginx --only wsgi-pump-tls,wsgi-inline-tls

The arms ending in -tls serve HTTPS (a P-256 certificate made for the
run) and the load speaks TLS; its 16 handshakes are the same in both runs
and cancel out. --against nginx puts nginx (master_process off, `return
200`, the same certificate, TLS 1.2 and 1.3) in the "before" column: the
same protocol, plain or TLS, as the arm. --handshakes makes each request
a new connection (a full handshake, one request with Connection: close,
read to the close): the figure is then instructions per handshake.

A build older than sluice-worker (one binary re-executing itself through
/proc/self/exe) must honour SLUICE_SELF_EXE for its re-exec to run under
valgrind: a one-line local change to its spawn.c.
"""
import argparse
import glob
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: (environment, extra arguments, app, path)
ARMS = {
    "wsgi-pump": ({}, [], "hello_wsgi:app", "/"),
    "wsgi-inline": ({"SLUICE_INLINE": "1"}, [], "hello_wsgi:app", "/"),
    "asgi-pump": ({}, ["--interface", "asgi"], "hello_asgi:app", "/"),
    "asgi-inline": ({"SLUICE_INLINE": "1"}, ["--interface", "asgi"],
                    "hello_asgi:app", "/"),
    "healthz": ({}, ["--health-path", "/healthz"], "hello_wsgi:app",
                "/healthz"),
    # {tmp}: the run's own directory
    "wsgi-pump-accesslog": ({}, ["--access-logfile", "{tmp}/access.log"],
                            "hello_wsgi:app", "/"),
    "wsgi-inline-accesslog": ({"SLUICE_INLINE": "1"},
                              ["--access-logfile", "{tmp}/access.log"],
                              "hello_wsgi:app", "/"),
    # {cert}, {key}: the run's certificate
    "wsgi-pump-tls": ({}, ["--certfile", "{cert}", "--keyfile", "{key}"],
                      "hello_wsgi:app", "/"),
    "wsgi-inline-tls": ({"SLUICE_INLINE": "1"},
                        ["--certfile", "{cert}", "--keyfile", "{key}"],
                        "hello_wsgi:app", "/"),
    "asgi-pump-tls": ({}, ["--interface", "asgi", "--certfile", "{cert}",
                           "--keyfile", "{key}"], "hello_asgi:app", "/"),
}

NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {tmp};
    proxy_temp_path {tmp};
    fastcgi_temp_path {tmp};
    uwsgi_temp_path {tmp};
    scgi_temp_path {tmp};
    server {{
        listen 127.0.0.1:{port}{ssl};
        {tls}
        location / {{
            default_type text/plain;
            return 200 "Hello, World!";
        }}
    }}
}}
"""
NGINX_TLS = ("ssl_certificate {cert}; ssl_certificate_key {key}; "
             "ssl_protocols TLSv1.2 TLSv1.3;")


def make_cert(d):
    """A P-256 certificate for localhost and its key, in D."""
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-nodes", "-days", "2",
                    "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-keyout", key, "-out", cert, "-subj", "/CN=localhost"],
                   check=True, capture_output=True)
    return cert, key


def client_ctx():
    import ssl
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, secs=120.0, tls=False):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("server exited during start-up")
        try:
            with socket.create_connection(("127.0.0.1", port), 10) as raw, \
                    (client_ctx().wrap_socket(raw) if tls else raw) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                if s.recv(64).startswith(b"HTTP/1.1 "):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server not ready in %.0f s" % secs)


def load(port, path, n, conns=16, depth=16, tls=False):
    """Send N requests over CONNS connections, DEPTH at a time on each,
    and read every response."""
    req = ("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode()
    socks = [socket.create_connection(("127.0.0.1", port), 30)
             for _ in range(conns)]
    if tls:
        ctx = client_ctx()
        socks = [ctx.wrap_socket(s) for s in socks]
    left = n
    try:
        while left > 0:
            batch = []
            for s in socks:
                k = min(depth, left)
                if k == 0:
                    break
                s.sendall(req * k)
                batch.append((s, k))
                left -= k
            for s, k in batch:
                got, data = 0, b""
                while got < k:
                    chunk = s.recv(65536)
                    if not chunk:
                        raise RuntimeError("connection closed early")
                    data += chunk
                    got = data.count(b"HTTP/1.1 ")
    finally:
        for s in socks:
            s.close()


def handshakes(port, path, n, tls=True):
    """N connections one after another, each a new TLS handshake (no
    session offered) and one request with Connection: close, read to the
    server's close."""
    req = ("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
           % path).encode()
    ctx = client_ctx()
    for _ in range(n):
        with socket.create_connection(("127.0.0.1", port), 30) as raw, \
                ctx.wrap_socket(raw) as s:
            s.sendall(req)
            while s.recv(65536):
                pass


def worker_ir(outdir):
    """The largest total of the run's callgrind files: the worker's."""
    best = 0
    for f in glob.glob(os.path.join(outdir, "cg.*")):
        with open(f, errors="replace") as fh:
            for line in fh:
                m = re.match(r"(?:totals|summary): (\d+)", line)
                if m:
                    best = max(best, int(m.group(1)))
    return best


LOAD = load  # or handshakes(): main() chooses


def run_once(binary, arm, n):
    env_add, extra, app, path = ARMS[arm]
    tls = arm.endswith("-tls")
    port = free_port()
    with tempfile.TemporaryDirectory() as outdir:
        cert, key = make_cert(outdir) if tls else (None, None)
        if binary == "nginx":
            return run_nginx(outdir, port, path, n, cert, key)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PYTHON")}
        env.update(env_add)
        env["PYTHONHASHSEED"] = "0"
        # the worker beside the supervisor: sluice-worker, or (a build from
        # before the split) the binary itself, which must then be told its
        # path: under valgrind /proc/self/exe is valgrind's
        env["SLUICE_WORKER_BIN"] = os.path.join(os.path.dirname(binary),
                                                "sluice-worker")
        env["SLUICE_SELF_EXE"] = binary
        cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes",
               "--callgrind-out-file=%s/cg.%%p" % outdir,
               binary, "-w", "1", "-b", "127.0.0.1:%d" % port,
               "--boot-timeout", "300", "--timeout", "300",
               "--chdir", os.path.join(REPO, "bench", "apps")] + [
                   a.replace("{tmp}", outdir).replace(
                       "{cert}", str(cert)).replace("{key}", str(key))
                   for a in extra] + [app]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL,
                                start_new_session=True)
        serve(proc, port, path, n, tls, signal.SIGTERM)
        return worker_ir(outdir)


def serve(proc, port, path, n, tls, stop):
    """Load PROC's server on PORT with N requests, then stop it with
    signal STOP (callgrind writes its files at the exit) and wait."""
    try:
        wait_ready(port, proc, tls=tls)
        LOAD(port, path, n, tls=tls)
    finally:
        proc.send_signal(stop)
        try:
            proc.wait(300)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_nginx(outdir, port, path, n, cert, key):
    """run_once() for nginx: the same protocol, under callgrind."""
    conf = os.path.join(outdir, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(
            tmp=outdir, port=port, ssl=" ssl" if cert else "",
            tls=NGINX_TLS.format(cert=cert, key=key) if cert else ""))
    cmd = ["valgrind", "--tool=callgrind",
           "--callgrind-out-file=%s/cg.%%p" % outdir,
           "/usr/sbin/nginx", "-e", "stderr", "-c", conf]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    serve(proc, port, path, n, cert is not None, signal.SIGQUIT)  # graceful
    return worker_ir(outdir)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sluice-bin", default=os.path.join(REPO, "sluice"))
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--before-bin")
    which.add_argument("--against", choices=["nginx"],
                       help="nginx in the before column")
    ap.add_argument("--only", default=",".join(ARMS))
    ap.add_argument("--n1", type=int, default=2000)
    ap.add_argument("--n2", type=int, default=12000)
    ap.add_argument("--handshakes", action="store_true",
                    help="each request on a new TLS connection (-tls arms):"
                    " instructions per handshake")
    a = ap.parse_args()
    global LOAD
    LOAD = handshakes if a.handshakes else load
    before = "nginx" if a.against else os.path.abspath(a.before_bin)
    print("| arm | Ir/request %s | sluice | ratio |"
          % ("nginx" if a.against else "before"))
    print("|---|---:|---:|---:|")
    for arm in a.only.split(","):
        per = []
        for binary in (before, os.path.abspath(a.sluice_bin)):
            lo = run_once(binary, arm, a.n1)
            hi = run_once(binary, arm, a.n2)
            per.append((hi - lo) / (a.n2 - a.n1))
        print("| %s | %.0f | %.0f | %.3f |" % (arm, per[0], per[1],
                                               per[1] / per[0]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
