"""Deterministic test data shared by the served apps and the e2e tests.

The block has a prime length so that a body built from it never lines up
with a power-of-two chunk size: an offset or ordering mistake in the server
shows up as a byte mismatch instead of an identical-looking repeat.
"""

import random

BLOCK = random.Random(20261129).randbytes(65521)


def pattern(n, start=0):
    """Return the N bytes of the infinite repetition of BLOCK from START."""
    out = bytearray()
    pos = start % len(BLOCK)
    while len(out) < n:
        take = min(len(BLOCK) - pos, n - len(out))
        out += BLOCK[pos:pos + take]
        pos = 0
    return bytes(out)
