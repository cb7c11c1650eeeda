#!/bin/sh
# run.sh - the end-to-end suite: pytest over tests/e2e against the built
# binary. make check runs it with SLUICE_BIN and SLUICE_SRCDIR set; run by
# hand from the source directory it uses ./sluice.
#
# Debian's pytest, run by Debian's Python (/usr/bin/python3): another python3
# earlier on PATH may lack it, or be a different version altogether.
# pytest exits 5 when it collected no test; an empty suite is not a failure.

srcdir=${SLUICE_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
SLUICE_BIN=${SLUICE_BIN:-$srcdir/sluice}
export SLUICE_BIN

if ! /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
    echo "run.sh: pytest is missing: install the Debian package python3-pytest" >&2
    exit 99
fi
if [ ! -x "$SLUICE_BIN" ]; then
    echo "run.sh: no sluice binary at $SLUICE_BIN (build it first)" >&2
    exit 99
fi

cd "$srcdir" || exit 99
# The source tree may be read-only (make distcheck): no .pyc, no cache.
PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -q -p no:cacheprovider \
    tests/e2e "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
    echo "run.sh: no end-to-end tests collected"
    exit 0
fi
exit "$rc"
