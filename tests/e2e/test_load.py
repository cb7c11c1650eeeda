"""Volume: 1,000 requests on one keep-alive connection, and 10,000 mixed
requests without the worker's resident memory growing.

The memory test starts its own server, warms it up with 10,000 requests of
the same mix (with four lanes, glibc's per-thread arenas keep growing in
steps for about that long, then stay flat: measured over 150,000
requests), reads the worker's VmRSS, sends 10,000 more and reads it again.
helpers.Load sends the mix, one request at a time. The mix covers the paths that allocate per request: pipelined and
sequential keep-alive GETs, Content-Length and chunked uploads, chunked
responses, the environ with extra headers, new connections, malformed
requests (400) and application exceptions (500 plus a logged traceback).
Under the sanitizers the growth is printed, not bounded (see below).
"""

from conftest import start_mode_server
from helpers import (PEER, Load, Req, build_request, chunked, sanitized,
                     vm_rss_kib)

# Growth allowed over 10,000 requests, by number of lanes. Measured noise
# after the warm-up: one lane, 0-400 KiB; four lanes (one glibc arena per
# thread, growing in ~370 KiB steps until ~100,000 requests, then flat),
# up to ~1,200 KiB. A leak of 100 bytes per request adds ~1 MiB, 200
# bytes ~2 MiB.
RSS_GROWTH_LIMIT_KIB = {1: 1024, 4: 2048}


def test_1000_requests_on_one_keep_alive_connection(server):
    with server.connect() as c:
        port = c.local_port
        for i in range(1000):
            if i % 100 == 0:
                r = c.request("GET", "/environ?i=%d" % i)
                assert r.status == 200
                assert r.json()["REMOTE_PORT"]["value"] == str(port)
            elif i % 3 == 0:
                body = b"request %d" % i
                r = c.request("POST", "/echo", body=body)
                assert r.status == 200 and r.body == body
            else:
                r = c.request("GET", "/hello")
                assert r.status == 200 and r.body == b"hello\n", (i, r)
            assert not r.has_token("Connection", "close"), (i, r.headers)


def mix(rounds=10):
    """ROUNDS rounds of the mix, twenty requests a round, in order: one
    keep-alive connection for the first eighteen, then a fresh connection
    for a request with Connection: close (an application exception every
    tenth round) and one for a malformed request."""
    body = b"b" * 1024
    hello = Req("/hello", expect=b"hello\n")
    close = [("Connection", "close")]
    out = []
    for n in range(rounds):
        if PEER:
            # the gunicorn peer drops pipelined requests
            first = [Req("/hello", expect=b"hello\n", fresh=True)] + \
                [hello] * 9
        else:
            first = [Req("/hello", raw=build_request("GET", "/hello") * 10,
                         responses=10, expect=b"hello\n", fresh=True)]
        out += first
        out += [Req("/echo", "POST", body=body, expect=body)] * 3
        out += [Req("/echo", "POST", expect=body, raw=(
            b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
            b"chunked\r\n\r\n" + chunked(body, sizes=(100, 300))))] * 2
        out += [Req("/chunks?n=3&size=100",
                    check=lambda r: r.chunked and len(r.body) == 300)] * 2
        out.append(Req("/environ?round=%d" % n,
                       headers=[("X-Round", str(n)), ("Cookie", "a=b; c=d"),
                                ("Accept-Language", "en")]))
        if n % 10 == 0:
            out.append(Req("/raise?when=before&marker=load", headers=close,
                           status=500, fresh=True))
        else:
            out.append(Req("/hello", headers=close, fresh=True))
        out.append(Req("(malformed)", status=400, fresh=True,
                       raw=b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"))
    return out


def send_mix(server, n):
    """N requests of the mix, one after the other; all answered right."""
    load = Load(server, mix(), conns=1, keep_alive=True, requests=n,
                duration=600).run()
    assert load.count("ok") == n, load.failure_report()


def test_worker_rss_stable_over_10000_requests(mode, tmp_path_factory):
    with start_mode_server(tmp_path_factory, "rss", mode) as s:
        workers = s.wait_workers(1)
        worker = workers[0]
        send_mix(s, 10000)             # warm-up
        samples = [vm_rss_kib(worker)]
        for _ in range(5):             # 10,000 requests
            send_mix(s, 2000)
            samples.append(vm_rss_kib(worker))
        assert s.worker_pids() == [worker], "the worker was replaced"
    before, after = samples[0], samples[-1]
    growth = after - before
    limit = RSS_GROWTH_LIMIT_KIB[mode["threads"]]
    print("worker VmRSS every 2,000 requests: %s KiB (%+d KiB)"
          % (samples, growth))
    # Under ASan the figure is the allocator's quarantine filling (256 MiB
    # of freed blocks held back), not the server: the mix still runs there
    # for ASan's sake, and the bound is checked by the plain build.
    assert sanitized() or growth < limit, \
        "worker RSS grew %d KiB (limit %d) over 10,000 requests; VmRSS " \
        "every 2,000 requests: %s KiB" % (growth, limit, samples)
