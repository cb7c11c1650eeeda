#!/bin/sh
# check-settings-doc.sh - docs/settings.md is what tools/settings-md prints.
#
# The settings reference is generated from the option table that --help
# and --print-config are written from; this fails when the committed file
# was not regenerated after a change to the table (or was edited by hand),
# and shows the difference. Run by make check, which sets SLUICE_BIN (the
# built sluice; tools/settings-md is built beside it) and SLUICE_SRCDIR.

srcdir=${SLUICE_SRCDIR:-$(dirname "$0")/..}
builddir=$(dirname "${SLUICE_BIN:-./sluice}")
gen=$builddir/tools/settings-md
doc=$srcdir/docs/settings.md

if [ ! -x "$gen" ]; then
    echo "FAIL: $gen is not built (make builds it)"
    exit 1
fi
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
if ! "$gen" >"$out"; then
    echo "FAIL: $gen failed"
    exit 1
fi
if ! diff -u "$doc" "$out"; then
    echo "FAIL: docs/settings.md differs from what the option table says"
    echo "(above: - the file, + the table). Regenerate it with"
    echo "    make settings-md"
    echo "and commit it."
    exit 1
fi
echo "PASS: docs/settings.md matches the option table"
