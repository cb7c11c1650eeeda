"""selftest.py - how the self-tests of the test tools report.

check-layers-selftest.py and summary-selftest.py each check a tool of
tests/ on made-up input. report() prints their cases as they ran, a
failing one with what went wrong and the tool's output under it, and ends
with a line in the check library's format ("Checks: N, Failures: F,
Errors: 0") so that tests/summary.sh counts every case.
"""


def report(script, results):
    """Print RESULTS, a list of (name, (problems, lines)), and return the
    exit status: 1 if any case has problems."""
    failures = 0
    for name, (problems, lines) in results:
        if not problems:
            print("ok: " + name)
            continue
        failures += 1
        print("FAILED: %s: %s" % (name, "; ".join(problems)))
        for line in lines:
            print("    | " + line)
    print("%s: Checks: %d, Failures: %d, Errors: 0"
          % (script, len(results), failures))
    return 1 if failures else 0
