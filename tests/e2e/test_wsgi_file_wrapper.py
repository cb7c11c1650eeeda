"""wsgi.file_wrapper: real files (the sendfile path) and file-likes without
fileno(), with and without Content-Length, from the file's current
position, and close() of the file-like called once the response is done.
"""

import hashlib
import itertools
import urllib.parse

import pytest

from e2e_data import pattern
from helpers import build_request

_ids = itertools.count()

SIZES = [0, 1, 65536, 1024 * 1024 + 17]


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("files")
    out = {}
    for n in SIZES + [6 * 1024 * 1024 + 1]:
        p = d / ("data-%d.bin" % n)
        p.write_bytes(pattern(n))
        out[n] = str(p)
    return out


def file_url(**q):
    return "/file?" + urllib.parse.urlencode(q)


def fetch(server, target, method="GET", version="HTTP/1.1", timeout=20):
    with server.connect(timeout=timeout) as c:
        c.send(build_request(method, target, version=version))
        r = c.read_response(method)
        if version == "HTTP/1.1" and not r.has_token("Connection", "close"):
            # The connection is still in sync after the file.
            assert c.request("GET", "/hello").body == b"hello\n"
    return r


@pytest.mark.parametrize("size", SIZES)
def test_real_file_with_content_length(server, data_files, size):
    t = "fw-%d" % next(_ids)
    r = fetch(server, file_url(path=data_files[size], token=t))
    assert r.status == 200
    assert r.header("Content-Length") == str(size)
    assert r.body == pattern(size)
    server.wait_for_call("fileclose " + t)


def assert_framed_as(r, size):
    """Without a length from the app the server may chunk (or, on 1.0,
    close), or state the length it learnt from the file: either way the
    framing must match the bytes sent."""
    if r.chunked or r.close_delimited:
        assert r.header("Content-Length") is None
    else:
        assert r.header("Content-Length") == str(size), r.headers


def test_real_file_without_content_length(server, data_files):
    size = 1024 * 1024 + 17
    t = "fw-nocl-%d" % next(_ids)
    r = fetch(server, file_url(path=data_files[size], token=t, cl=0,
                               offset=17))
    assert_framed_as(r, size - 17)
    assert r.body == pattern(size)[17:]
    server.wait_for_call("fileclose " + t)


def test_real_file_without_content_length_on_http10(server, data_files):
    size = 65536
    r = fetch(server, file_url(path=data_files[size], cl=0),
              version="HTTP/1.0")
    assert_framed_as(r, size)
    assert r.body == pattern(size)


def test_real_file_from_current_position(server, data_files):
    size = 1024 * 1024 + 17
    t = "fw-off-%d" % next(_ids)
    r = fetch(server, file_url(path=data_files[size], token=t, offset=1000))
    assert r.header("Content-Length") == str(size - 1000)
    assert r.body == pattern(size)[1000:]
    server.wait_for_call("fileclose " + t)


def test_large_real_file(server, data_files):
    size = 6 * 1024 * 1024 + 1
    r = fetch(server, file_url(path=data_files[size], blksize=1 << 20),
              timeout=30)
    assert len(r.body) == size
    assert hashlib.sha256(r.body).digest() == \
        hashlib.sha256(pattern(size)).digest()


def test_real_file_head(server, data_files):
    t = "fw-head-%d" % next(_ids)
    size = 65536
    r = fetch(server, file_url(path=data_files[size], token=t), method="HEAD")
    assert r.status == 200 and r.body == b""
    assert r.header("Content-Length") == str(size)
    server.wait_for_call("fileclose " + t)


@pytest.mark.parametrize("cl", [1, 0])
def test_filelike_without_fileno(server, cl):
    size = 300001
    t = "fw-bytes-%d" % next(_ids)
    r = fetch(server, file_url(kind="bytes", size=size, offset=7, token=t,
                               cl=cl, blksize=1000))
    assert r.status == 200
    assert r.body == pattern(size)[7:]
    server.wait_for_call("fileclose " + t)


def test_file_closed_when_client_disconnects(server, data_files):
    size = 6 * 1024 * 1024 + 1
    t = "fw-gone-%d" % next(_ids)
    c = server.connect()
    try:
        c.send(build_request("GET", file_url(path=data_files[size], token=t,
                                             blksize=65536)))
        head = c.read_head()
        assert head.status == 200
        c.read_exact(1000)
    finally:
        c.close()
    server.wait_for_call("fileclose " + t, timeout=10)
    assert server.get("/hello").status == 200
