#!/usr/bin/python3
"""make_corpus.py - writes the seed corpora of tests/fuzz/fuzz_ws.c into
tests/fuzz/corpus/ws/ and of tests/fuzz/fuzz_proxy.c into
tests/fuzz/corpus/proxy/ (committed; re-run after changing an input format).

Each seed is three config bytes (see fuzz_ws.c) then the data: client
frames for the parser, with and without deflate, Sec-WebSocket-Extensions
values for the offer parser, and payloads for the writer's round trip.
"""
import os
import struct
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "ws")
KEY = b"\x37\xfa\x21\x3d"


def frame(b0, payload, masked=True, form=0):
    n = len(payload)
    if form == 0 and n < 126:
        head = bytes([b0, (0x80 if masked else 0) | n])
    elif form != 8 and n <= 0xFFFF:
        head = bytes([b0, (0x80 if masked else 0) | 126]) + struct.pack("!H", n)
    else:
        head = bytes([b0, (0x80 if masked else 0) | 127]) + struct.pack("!Q", n)
    if not masked:
        return head + payload
    body = bytes(c ^ KEY[i % 4] for i, c in enumerate(payload))
    return head + KEY + body


def deflate(data, bits=15):
    z = zlib.compressobj(6, zlib.DEFLATED, -bits)
    out = z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


# config byte 0: bits 0-1 mode (0/1 parser, 2 offer, 3 writer), bit 2
# deflate, bit 3 client_no_context_takeover; byte 1: window bits, bit 6
# large limit; byte 2: chunk seed.
RX, RXZ, OFFER, TX, TXZ = b"\x00\x7f\x01", b"\x04\x7f\x02", b"\x02\x00\x03", \
    b"\x03\x7f\x04", b"\x07\x7f\x05"

SEEDS = {
    "hello": RX + frame(0x81, b"Hello"),
    "fragmented": RX + frame(0x01, b"Hel") + frame(0x89, b"ping")
    + frame(0x80, b"lo"),
    "binary-256": RX + frame(0x82, bytes(range(256))),
    "binary-len64": RX + frame(0x82, b"\x00" * 300, form=8),
    "close": RX + frame(0x88, b"\x03\xe8bye"),
    "close-empty": RX + frame(0x88, b""),
    "utf8-split": RX + frame(0x01, b"a\xf0\x9f") + frame(0x80, b"\x98\x80z"),
    "unmasked": RX + frame(0x81, b"Hello", masked=False),
    "small-limit": b"\x00\x01\x07" + frame(0x82, b"x" * 40)
    + frame(0x01, b"y" * 20) + frame(0x80, b"z" * 20),
    "deflate-hello": RXZ + frame(0xC1, deflate(b"Hello")),
    "deflate-fragments": RXZ + frame(0x41, deflate(b"Hello world " * 20)[:9])
    + frame(0x8A, b"") + frame(0x80, deflate(b"Hello world " * 20)[9:]),
    "deflate-bomb": b"\x0c\x07\x09" + frame(0xC2, deflate(b"\x00" * 200000)),
    "deflate-bits9": b"\x04\x49\x0a" + frame(0xC1, deflate(b"abc" * 300, 9)),
    "offer-browser": OFFER
    + b"permessage-deflate; client_max_window_bits",
    "offer-all": OFFER + b"permessage-deflate; client_no_context_takeover; "
    b"server_no_context_takeover; server_max_window_bits=10; "
    b"client_max_window_bits=\"9\"",
    "offer-several": OFFER + b"x-foo; a=\"b,c\", permessage-deflate; bad, "
    b"permessage-deflate; server_max_window_bits=8",
    "tx-text": TX + "héllo wörld, ".encode() * 30,
    "tx-deflate": TXZ + b"the quick brown fox " * 100,
    "tx-deflate-bits8": b"\x07\x40\x06" + b"aaaaabbbbbcccc" * 80,
}


V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v2(cmd, fam, addr):
    return V2_SIG + bytes([0x20 | cmd, fam]) + struct.pack(">H", len(addr)) \
        + addr


# fuzz_proxy: first byte even = a PROXY header (+ what follows it), odd =
# Forwarded NUL X-Forwarded-For NUL X-Forwarded-Proto
PROXY_SEEDS = {
    "v1-tcp4": b"\0PROXY TCP4 192.0.2.1 192.0.2.2 56324 443\r\nGET / HTTP/1.1\r\n",
    "v1-tcp6": b"\0PROXY TCP6 2001:db8::1 ::1 56324 443\r\n",
    "v1-unknown": b"\0PROXY UNKNOWN\r\n",
    "v2-tcp4": b"\0" + v2(1, 0x11, bytes([192, 0, 2, 1, 127, 0, 0, 1])
                        + struct.pack(">HH", 56324, 8000)),
    "v2-tcp6": b"\0" + v2(1, 0x21, bytes(15) + b"\1" + bytes(15) + b"\1"
                        + struct.pack(">HH", 1, 2)),
    "v2-tlv": b"\0" + v2(1, 0x11, bytes([10, 0, 0, 1, 10, 0, 0, 2])
                       + struct.pack(">HH", 1, 2) + b"\x04\x00\x02ab"),
    "v2-local": b"\0" + v2(0, 0x00, b""),
    "fwd-chain": b"\1for=192.0.2.60;proto=https, for=\"[2001:db8::1]:80\""
                 b"\0203.0.113.1, 10.0.0.1\0https, http",
    "xff-only": b"\1\0198.51.100.7, 127.0.0.1\0http",
    "fwd-obfuscated": b"\1for=_hidden;by=_proxy, for=unknown\0\0",
}


def main():
    pout = os.path.join(os.path.dirname(OUT), "proxy")
    os.makedirs(pout, exist_ok=True)
    for name, data in PROXY_SEEDS.items():
        with open(os.path.join(pout, name), "wb") as f:
            f.write(data)
    print(f"{len(PROXY_SEEDS)} seeds in {pout}")
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(SEEDS)} seeds in {OUT}")


if __name__ == "__main__":
    main()
