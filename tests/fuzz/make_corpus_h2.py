#!/usr/bin/python3
"""make_corpus_h2.py - writes the seed corpus of tests/fuzz/fuzz_h2.c into
tests/fuzz/corpus/h2/ (committed; re-run after changing the input format).
Apart from make_corpus.py because it needs the h2 package (Debian's
python3-h2, with hpack and hyperframe). Files whose names begin with
"regress-" are regression inputs (findings), kept as they were found:
this script leaves them alone.

Each seed is two bytes (fuzz_h2.c: the profile, 0 lanes with the
defaults, 1 ASGI inline with the defaults, 2 tight limits, 3 a health path
and trusted forwarding headers, inline, 4 an app that answers at once;
then the seed of the cuts) and what a client sends after its preface,
which the target sends itself.
"""
import os

import h2.config
import h2.connection
import hpack
from hyperframe.frame import (ContinuationFrame, DataFrame, HeadersFrame,
                              SettingsFrame)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "h2")
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS_ACK = SettingsFrame(0, flags=["ACK"]).serialize()


def client(validate=True):
    c = h2.connection.H2Connection(h2.config.H2Configuration(
        client_side=True, header_encoding=None,
        validate_outbound_headers=validate,
        normalize_outbound_headers=validate))
    c.initiate_connection()
    out = c.data_to_send()
    assert out.startswith(PREFACE)
    return c, out[len(PREFACE):] + SETTINGS_ACK


def req(method=b"GET", path=b"/", extra=(), authority=b"example.com"):
    h = [(b":method", method), (b":scheme", b"http"),
         (b":authority", authority), (b":path", path)]
    return h + list(extra)


def seed(profile, body, rng=7):
    return bytes([profile, rng]) + body


def get_one():
    c, out = client()
    c.send_headers(1, req(path=b"/a?b=c"), end_stream=True)
    return out + c.data_to_send()


def post_body():
    c, out = client()
    c.send_headers(1, req(b"POST", b"/p", [(b"content-length", b"11"),
                                           (b"content-type", b"text/plain")]))
    c.send_data(1, b"hello ")
    c.send_data(1, b"world", end_stream=True)
    return out + c.data_to_send()


def post_chunked_trailers():
    c, out = client()
    c.send_headers(1, req(b"PUT", b"/up"))
    c.send_data(1, b"part one,")
    c.send_data(1, b"", pad_length=4)
    c.send_data(1, b"part two")
    c.send_headers(1, [(b"x-checksum", b"abc")], end_stream=True)
    return out + c.data_to_send()


def cookies_split():
    c, out = client()
    c.send_headers(1, req(path=b"/c", extra=[
        (b"cookie", b"a=1"), (b"accept", b"*/*"), (b"cookie", b"b=2"),
        (b"cookie", b"c=3"), (b"user-agent", b"seed")]), end_stream=True)
    return out + c.data_to_send()


def many_streams():
    c, out = client()
    for sid in range(1, 12, 2):
        c.send_headers(sid, req(path=b"/s%d" % sid), end_stream=True)
    c.ping(b"12345678")
    c.increment_flow_control_window(100000)
    return out + c.data_to_send()


def rst_and_ping():
    c, out = client()
    c.send_headers(1, req(b"POST", b"/slow"))
    c.send_data(1, b"abc")
    c.reset_stream(1)
    c.send_headers(3, req(path=b"/after"), end_stream=True)
    c.ping(b"pingpong")
    c.increment_flow_control_window(1000, stream_id=3)
    return out + c.data_to_send()


def window_updates():
    c, out = client()
    c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 10,
                       h2.settings.SettingCodes.MAX_FRAME_SIZE: 20000})
    c.send_headers(1, req(path=b"/big"), end_stream=True)
    c.send_headers(3, req(b"HEAD", b"/h"), end_stream=True)
    c.increment_flow_control_window(70000)
    c.increment_flow_control_window(70000, stream_id=1)
    return out + c.data_to_send()


def big_header_list(n=60, size=150):
    c, out = client()
    extra = [(b"x-h%d" % i, b"v" * size) for i in range(n)]
    c.send_headers(1, req(path=b"/big-head", extra=extra), end_stream=True)
    return out + c.data_to_send()


def continuation():
    """A header block in a HEADERS frame and two CONTINUATIONs."""
    _, out = client()
    block = hpack.Encoder().encode(req(b"POST", b"/cont", [
        (b"content-length", b"4"), (b"x-long", b"y" * 200),
        (b"expect", b"100-continue")]))
    a, b = len(block) // 3, 2 * len(block) // 3
    h = HeadersFrame(1, data=block[:a])
    c1 = ContinuationFrame(1, data=block[a:b])
    c2 = ContinuationFrame(1, data=block[b:], flags=["END_HEADERS"])
    data = DataFrame(1, data=b"body", flags=["END_STREAM"])
    return (out + h.serialize() + c1.serialize() + c2.serialize() +
            data.serialize())


def bad_requests():
    c, out = client(validate=False)
    # no :path; a Host and an :authority; a bad content-length
    c.send_headers(1, [(b":method", b"GET"), (b":scheme", b"http"),
                       (b":authority", b"a")], end_stream=True)
    c.send_headers(3, req(path=b"/h", extra=[(b"host", b"other")]),
                   end_stream=True)
    c.send_headers(5, req(b"POST", b"/cl", [(b"content-length", b"2")]))
    c.send_data(5, b"toolong", end_stream=True)
    return out + c.data_to_send()


def health_and_forwarded():
    c, out = client()
    c.send_headers(1, req(path=b"/healthz"), end_stream=True)
    c.send_headers(3, req(path=b"/app", extra=[
        (b"x-forwarded-for", b"203.0.113.9"),
        (b"x-forwarded-proto", b"https"),
        (b"forwarded", b"for=198.51.100.1;proto=https")]), end_stream=True)
    return out + c.data_to_send()


def goaway():
    c, out = client()
    c.send_headers(1, req(path=b"/last"), end_stream=True)
    c.close_connection()
    return out + c.data_to_send()


def empty_data_flood(n=110):
    """Empty DATA frames past the session's budget a second."""
    c, out = client()
    c.send_headers(1, req(b"POST", b"/flood"))
    empty = DataFrame(1, data=b"").serialize()
    return out + c.data_to_send() + empty * n


def rapid_reset(n=8):
    """Streams opened and reset at once (CVE-2023-44487)."""
    c, out = client()
    for sid in range(1, 2 * n, 2):
        c.send_headers(sid, req(path=b"/r%d" % sid), end_stream=True)
        c.reset_stream(sid, error_code=8)
    return out + c.data_to_send()


SEEDS = {}
for prof in range(5):
    for name, make in [("get", get_one), ("post", post_body),
                       ("trailers", post_chunked_trailers),
                       ("cookies", cookies_split), ("streams", many_streams),
                       ("rst-ping", rst_and_ping), ("windows", window_updates),
                       ("continuation", continuation),
                       ("bad", bad_requests),
                       ("health-forwarded", health_and_forwarded),
                       ("goaway", goaway)]:
        SEEDS["%s-p%d" % (name, prof)] = seed(prof, make())
SEEDS["big-headers-p0"] = seed(0, big_header_list())
SEEDS["big-headers-p2"] = seed(2, big_header_list(8, 40))
SEEDS["empty-data-flood-p0"] = seed(0, empty_data_flood())
SEEDS["rapid-reset-p2"] = seed(2, rapid_reset())
SEEDS["rapid-reset-p0"] = seed(0, rapid_reset(120))


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(SEEDS)} seeds in {OUT}")


if __name__ == "__main__":
    main()
