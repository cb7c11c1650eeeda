#!/usr/bin/python3
"""summary-selftest.py - tests/summary.sh run on made-up test logs.

Each case writes automake's pair of files for a few test programs (NAME.log
with the program's output, NAME.trs with its harness result) and runs
summary.sh over them: the count it prints must add up the individual
tests, and every failed program must be named on a "failed:" line, by its
failing test when the log names one. The last line is in the check
library's format ("Checks: N, Failures: F, Errors: E") so that summary.sh
counts these cases too.
"""

import os
import subprocess
import sys
import tempfile

from selftest import report

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "summary.sh")

# (name, {program: (result, log text)}, expected count line,
#  expected "failed:" lines, each as (program, text it must contain))
CASES = [
    ("all passing: check and pytest counted by test",
     {"test_a": ("PASS", "100%: Checks: 7, Failures: 0, Errors: 0\n"),
      "run.sh": ("PASS", "....\n12 passed, 2 skipped in 3.1s\n")},
     "19 passed, 0 failed, 2 skipped", []),
    ("a failing pytest test is named",
     {"run.sh": ("FAIL",
                 "..F.\nFAILED tests/e2e/test_x.py::test_y - "
                 "AssertionError: 502\n3 passed, 1 failed in 9s\n")},
     "3 passed, 1 failed",
     [("run.sh", "FAILED tests/e2e/test_x.py::test_y - AssertionError")]),
    ("a failing check case is named",
     {"test_b": ("FAIL",
                 "tests/unit/test_b.c:41:F:core:test_len:0: "
                 "Assertion 'n == 3' failed\n"
                 "80%: Checks: 5, Failures: 1, Errors: 0\n")},
     "4 passed, 1 failed",
     [("test_b", "test_b.c:41:F:core:test_len")]),
    ("a sanitizer report is named",
     {"test_c": ("FAIL",
                 "==4242==ERROR: AddressSanitizer: heap-use-after-free\n")},
     "0 passed, 1 failed",
     [("test_c", "AddressSanitizer: heap-use-after-free")]),
    ("a crash with no count is one failure, pointed at its log",
     {"test_d": ("ERROR", "Running suite(s): d\n")},
     "0 passed, 1 failed",
     [("test_d", "no failing test named")]),
]


def run_case(tmp, number, programs):
    where = os.path.join(tmp, str(number))
    os.mkdir(where)
    logs = []
    for name, (result, text) in programs.items():
        base = os.path.join(where, name)
        with open(base + ".log", "w") as f:
            f.write(text)
        with open(base + ".trs", "w") as f:
            f.write(":test-result: %s\n" % result)
        logs.append(base + ".log")
    run = subprocess.run(["sh", SCRIPT] + logs, capture_output=True,
                         text=True, timeout=30)
    return where, run


def check_case(tmp, number, programs, count, named):
    where, run = run_case(tmp, number, programs)
    lines = run.stdout.splitlines()
    problems = []
    if not lines or lines[-1] != count:
        problems.append("count %r, not %r" % (lines[-1:] or None, count))
    failed_lines = [line for line in lines if line.startswith("failed: ")]
    for program, text in named:
        prefix = "failed: %s: " % os.path.join(where, program)
        if not any(line.startswith(prefix) and text in line
                   for line in failed_lines):
            problems.append("no line %r...%r" % (prefix, text))
    if len(failed_lines) != len(named):
        problems.append("%d failed: lines, not %d"
                        % (len(failed_lines), len(named)))
    bad = any(result in ("FAIL", "ERROR") for result, _ in programs.values())
    if (run.returncode != 0) != bad:
        problems.append("exit status %d" % run.returncode)
    return problems, lines + run.stderr.splitlines()


def main():
    with tempfile.TemporaryDirectory(prefix="summary-selftest.") as tmp:
        results = [(name, check_case(tmp, number, programs, count, named))
                   for number, (name, programs, count, named)
                   in enumerate(CASES)]
    return report("summary-selftest.py", results)


if __name__ == "__main__":
    sys.exit(main())
