#!/bin/sh
# run.sh - the fleet test (make check-fleet): two sluice hosts in network
# namespaces behind HAProxy, through rolling restarts, deploys and a host
# killed under load (tests/fleet/test_fleet.py says what and why). Needs
# root, iproute2 and haproxy; without them the tests skip.
#
# Ends with one "N passed, M failed[, K skipped]" line, as make check does,
# for .ci/run to count; exits non-zero when anything failed.

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
log=$(mktemp) || exit 99
trap 'rm -f "$log"' EXIT
start=$(date +%s)
PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -q -p no:cacheprovider \
    tests/fleet "$@" 2>&1 | tee "$log"
echo "run.sh: the fleet test took $(($(date +%s) - start)) s"

# pytest's closing line: "2 passed, 1 failed, 1 skipped in 80.1s"
line=$(grep -E '^=* *[0-9]+ (passed|failed|skipped|errors?)' "$log" | tail -n 1)
count() {
    echo "$line" | grep -oE "[0-9]+ $1" | awk '{ n += $1 } END { print n + 0 }'
}
passed=$(count passed)
failed=$(($(count failed) + $(count 'errors?')))
skipped=$(count skipped)
if [ -z "$line" ]; then
    failed=$((failed + 1)) # pytest did not get as far as a summary
fi
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
