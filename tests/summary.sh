#!/bin/sh
# summary.sh - one "N passed, M failed" line for a whole make check run.
#
# usage: summary.sh TEST.log...   (automake's logs; TEST.trs beside each)
#
# Counts individual tests, not test programs: a check suite's
# "Checks: N, Failures: F, Errors: E" line and pytest's closing
# "X passed, Y failed, ..." line are read from each log. A program whose
# harness result is FAIL or ERROR but whose log shows no failing test (it
# crashed, or never got going) counts as one failed test; one with no
# count at all counts as one test of its harness result. Each failed
# program first gets "failed: PROGRAM: LINE" lines naming its failed tests
# (name_failures, below); .ci/run repeats them at its end.
# Exits 1 when anything failed, so the caller can use it as the verdict.

passed=0
failed=0
skipped=0

# name_failures LOG: the lines of LOG that name what failed, at most 20:
# pytest's short summary ("FAILED file::test - why", "ERROR ..."), a check
# suite's failing cases ("file.c:N:F:case:test:0: why"), a sanitizer's
# headline. CI shows the head and the tail of its output, and a make check
# run keeps each program's output in its own log: these lines, printed
# before the count, say which test to look at.
name_failures() {
    grep -E '^(FAILED|ERROR)[: ]|:[0-9]+:[FE]:|^==[0-9]+==ERROR: |runtime error: |^WARNING: ThreadSanitizer' \
        "$1" 2>/dev/null | cut -c1-300 | head -n 20
}

for log in "$@"; do
    trs=${log%.log}.trs
    result=$(sed -n 's/^:test-result: *\([A-Z]*\).*/\1/p' "$trs" 2>/dev/null |
        sort -u | tr '\n' ' ')
    [ -n "$result" ] || result="ERROR"
    counts=$(awk '
        /Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+/ {
            line = $0
            sub(/.*Checks: /, "", line)
            split(line, f, /[^0-9]+/)
            p += f[1] - f[2] - f[3]; x += f[2] + f[3]; found = 1
            next
        }
        /^=* *no tests ran/ { found = 1; next }
        /^=* *[0-9]+ (passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)[ ,]/ {
            # pytest: the last such line is the run summary
            pp = 0; xx = 0; ss = 0
            n = split($0, w, /[ ,=]+/)
            for (i = 1; i < n; i++) {
                if (w[i] !~ /^[0-9]+$/) continue
                if (w[i+1] == "passed" || w[i+1] == "xfailed") pp += w[i]
                else if (w[i+1] ~ /^(failed|errors?|xpassed)$/) xx += w[i]
                else if (w[i+1] == "skipped") ss += w[i]
            }
            py = 1
            next
        }
        END {
            if (py) { p += pp; x += xx; s += ss; found = 1 }
            if (found) print p + 0, x + 0, s + 0
        }' "$log" 2>/dev/null)

    bad=no
    case " $result " in
    *" FAIL "* | *" ERROR "* | *" XPASS "*) bad=yes ;;
    esac

    if [ -n "$counts" ]; then
        p=${counts%% *}
        rest=${counts#* }
        x=${rest%% *}
        s=${rest#* }
        if [ "$bad" = yes ] && [ "$x" -eq 0 ]; then
            x=1
        fi
    else
        p=0 x=0 s=0
        case "$bad:$result" in
        yes:*) x=1 ;;
        *SKIP*) s=1 ;;
        *) p=1 ;;
        esac
    fi
    if [ "$bad" = yes ] || [ "$x" -gt 0 ]; then
        named=$(name_failures "$log")
        if [ -n "$named" ]; then
            printf '%s\n' "$named" | sed "s|^|failed: ${log%.log}: |"
        else
            echo "failed: ${log%.log}: (no failing test named: see $log)"
        fi
    fi
    passed=$((passed + p))
    failed=$((failed + x))
    skipped=$((skipped + s))
done

if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
