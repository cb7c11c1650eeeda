#!/bin/sh
# run.sh - builds the libFuzzer targets out of tree in _fuzz/ and runs
# each for SECONDS (default 40) from its seed corpus in
# tests/fuzz/corpus/NAME/ (new inputs go to _fuzz/corpus-NAME/, crashes to
# _fuzz/NAME-crash-*), with tests/fuzz/NAME.dict when there is one:
# fuzz_ws (the WebSocket codec), fuzz_proxy (the PROXY header and
# forwarding headers), fuzz_http (the request parser, pipelined, cut at
# every byte), fuzz_config (configuration file, SLUICE_CMD_ARGS, the
# option parser), fuzz_tls (the server name and ALPN choices of a
# handshake), fuzz_h2 (the HTTP/2 session, cut at every byte) and
# fuzz_static (a static file's path, Range, entity tags and
# Accept-Encoding), or the NAMEs given. Targets run FUZZ_JOBS at a time
# (default 2, the CI machine's cores): seven targets of 40 s take four
# rounds, under three minutes.
#
# usage: [FUZZ_JOBS=N] tests/fuzz/run.sh [SECONDS [NAME...]]
#
# Ends with one line "N passed, M failed" (each target is one test) for
# .ci/run to count; exits 77, with "0 passed, 0 failed, 1 skipped", when clang-14
# or libFuzzer is missing (the Debian packages clang-14, libfuzzer-14-dev).
# Like the other out-of-tree builds, it needs a source tree that is not
# configured itself.
set -u

secs=${1:-40}
[ $# -gt 0 ] && shift
targets=${*:-ws proxy http config tls h2 static}
jobs=${FUZZ_JOBS:-2}
src=$(cd "$(dirname "$0")/../.." && pwd)
cc=${FUZZ_CC:-clang-14}

skip() {
    echo "fuzz: $1: skipped"
    echo "0 passed, 0 failed, 1 skipped"
    exit 77
}

fail() {
    echo "fuzz: $1"
    echo "0 passed, 1 failed"
    exit 1
}

command -v "$cc" >/dev/null 2>&1 || skip "$cc not found"
probe=$(mktemp -d)
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)' \
    '{ (void)d; (void)n; return 0; }' >"$probe/t.c"
if ! "$cc" -fsanitize=fuzzer "$probe/t.c" -o "$probe/t" >/dev/null 2>&1; then
    rm -rf "$probe"
    skip "$cc cannot link with libFuzzer"
fi
rm -rf "$probe"

cd "$src" || fail "no source tree"
[ -x configure ] || ./autogen.sh || fail "autogen.sh failed"
mkdir -p _fuzz
cd _fuzz || fail "no _fuzz"
if [ ! -f Makefile ]; then
    CC=$cc ../configure --enable-fuzzing >configure.out 2>&1 ||
        { tail -n 20 configure.out; fail "configure failed"; }
fi

passed=0
failed=0
built=
for t in $targets; do
    if ! nice -n 19 make -j2 "tests/fuzz/fuzz_$t" >"make-$t.out" 2>&1; then
        tail -n 30 "make-$t.out"
        echo "fuzz: fuzz_$t: build failed"
        failed=$((failed + 1))
        continue
    fi
    built="$built $t"
done

# One target in the background: its log in fuzz-NAME.log, its exit
# status in rc-NAME.
start() {
    t=$1
    dict=
    [ -f "$src/tests/fuzz/$t.dict" ] && dict="-dict=$src/tests/fuzz/$t.dict"
    mkdir -p "corpus-$t"
    rm -f "rc-$t"
    echo "fuzz: fuzz_$t for ${secs} s"
    (
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            nice -n 19 "./tests/fuzz/fuzz_$t" -max_total_time="$secs" \
            -error_exitcode=1 -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
            -print_final_stats=1 -artifact_prefix="$src/_fuzz/$t-" $dict \
            "corpus-$t" "$src/tests/fuzz/corpus/$t" >"fuzz-$t.log" 2>&1
        echo $? >"rc-$t"
    ) &
}

# The verdict of a finished target, in the order the targets were named.
judge() {
    t=$1
    rc=$(cat "rc-$t" 2>/dev/null || echo 1)
    echo "fuzz: fuzz_$t:"
    grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)' "fuzz-$t.log"
    grep -E '^#[0-9]+[[:space:]]+DONE' "fuzz-$t.log" | tail -n 1
    if [ "$rc" -ne 0 ]; then
        tail -n 60 "fuzz-$t.log"
        echo "fuzz: fuzz_$t found a problem (exit status $rc): see _fuzz/fuzz-$t.log"
        failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
}

set -- $built
while [ $# -gt 0 ]; do
    batch=
    n=0
    while [ $# -gt 0 ] && [ $n -lt "$jobs" ]; do
        start "$1"
        batch="$batch $1"
        n=$((n + 1))
        shift
    done
    wait
    for t in $batch; do
        judge "$t"
    done
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
