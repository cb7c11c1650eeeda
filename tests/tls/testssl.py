#!/usr/bin/python3
"""testssl.py - Debian's testssl.sh against sluice's TLS defaults (make
check-testssl; issue 28).

It makes its own certificates (a CA, and for localhost an ECDSA P-256
and an RSA 2048 certificate served side by side, OpenSSL choosing the one
the client can check, plus one for another name so that the SNI callback
is in place as it is with several sites), starts sluice on 127.0.0.1 with
nothing but those, and runs testssl.sh on it once, with these groups of
checks (the testssl.sh options in brackets):

    protocols (-p), cipher categories (-s), server preferences (-P: the
    cipher order, which must be Mozilla's intermediate ECDHE suites for
    both keys), HTTP headers (-h), vulnerabilities (-U: Heartbleed, CCS,
    Ticketbleed, ROBOT, renegotiation, CRIME, BREACH, POODLE,
    TLS_FALLBACK_SCSV, SWEET32, FREAK, DROWN, LOGJAM, BEAST, LUCKY13, RC4)

and with --all, for a closer look by hand, also forward secrecy (-f:
the curves and groups), server defaults and certificates (-S: these
certificates, extensions, tickets), each cipher one by one (-e) and the
client simulations (-c). CI's budget is why: on two cores busy with
other work the default run took 1.2 minutes of CPU time (3 of wall
time), a full testssl.sh run 3 (5.5 of wall time). No DNS lookup is
made (--nodns none, --ip), nothing is fetched (no --phone-out), the CA
is given with --add-ca.

Each group is one test: it passes when none of its findings is rated
HIGH or CRITICAL and the findings it must have are there (TLS 1.0 not
offered, each vulnerability checked and found absent, both keys' suites
in the cipher order, ...), so a check that did not run fails too; so do
severe findings outside the groups that ran ("other"). Printed: each
group's verdict and findings' count, the count of findings per
severity, and the id of every MEDIUM and LOW finding on one line. Ends
with "N passed, M failed" (.ci/run counts it); exits 0, 1, or 77 with
"0 passed, 0 failed, 1 skipped" when testssl.sh is not installed (the
Debian package testssl.sh).

usage: testssl.py [--all]    (SLUICE_BIN: the sluice to test, else the
                             build tree's; TESTSSL: the testssl.sh to run)
"""

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))

RUN_TIMEOUT = 900  # seconds; the default run takes one to three minutes
SEVERE = ("HIGH", "CRITICAL")
VULNERABILITIES = ("heartbleed", "CCS", "ticketbleed", "ROBOT",
                   "secure_renego", "secure_client_renego", "CRIME_TLS",
                   "BREACH", "POODLE_SSL", "fallback_SCSV", "SWEET32",
                   "FREAK", "DROWN", "LOGJAM", "BEAST", "LUCKY13", "RC4")

# Mozilla's intermediate TLS 1.2 suites in their order, for an ECDSA and
# an RSA key: ECDHE only, the server's order.
TLS12_ORDER = ("ECDHE-ECDSA-AES128-GCM-SHA256 ECDHE-RSA-AES128-GCM-SHA256 "
               "ECDHE-ECDSA-AES256-GCM-SHA384 ECDHE-RSA-AES256-GCM-SHA384 "
               "ECDHE-ECDSA-CHACHA20-POLY1305 ECDHE-RSA-CHACHA20-POLY1305$")

# The groups in the order they run: name, testssl.sh option, the ids (or
# id prefixes, ending in "*") that are the group's, what the group must
# find (id -> a regular expression its finding starts with, or a
# severity: "=OK"), and whether only --all runs it.
GROUPS = [
    ("protocols", "-p",
     ("SSLv2", "SSLv3", "TLS1", "TLS1_1", "TLS1_2", "TLS1_3", "NPN",
      "ALPN*"),
     {"SSLv2": "not offered", "SSLv3": "not offered",
      "TLS1": "not offered", "TLS1_1": "not offered",
      "TLS1_2": "offered", "TLS1_3": "offered with final",
      "ALPN": "http/1.1"}, False),
    ("cipher categories", "-s", ("cipherlist_*",),
     {"cipherlist_%s" % c: "not offered" for c in
      ("NULL", "aNULL", "EXPORT", "LOW", "3DES_IDEA", "AVERAGE")} |
     {"cipherlist_STRONG": "offered"}, False),
    ("forward secrecy", "-f", ("PFS*", "FS*", "DH_groups"),
     {"PFS": "=OK"}, True),
    ("server preferences", "-P",
     ("cipher_order*", "cipherorder_*", "protocol_negotiated",
      "cipher_negotiated"),
     {"cipher_order": "server",
      "protocol_negotiated": r"Default protocol TLS1\.3",
      "cipherorder_TLSv1_2": TLS12_ORDER}, False),
    ("server defaults", "-S",
     ("TLS_extensions", "TLS_session_ticket", "SSL_sessionID_support",
      "sessionresumption_*", "TLS_timestamp", "cert*", "OCSP_stapling*",
      "DNS_CAArecord*", "certificate_transparency*"),
     {"cert_numbers": "2", "cert_chain_of_trust <cert#1>": "=OK",
      "cert_chain_of_trust <cert#2>": "=OK"}, True),
    ("HTTP headers", "-h",
     ("HTTP_*", "HSTS", "HPKP", "banner_*", "cookie_*", "security_headers",
      "X-*"),
     {"HTTP_status_code": r"[1-5][0-9][0-9]"}, False),
    ("vulnerabilities", "-U",
     VULNERABILITIES + ("DROWN_hint", "LOGJAM-common_primes", "BEAST_*",
                        "winshock", "opossum", "GREASE"),
     {v: "=OK" for v in VULNERABILITIES}, False),
]

# What --all adds that is judged only by the severity of its findings.
ALL_ONLY = ("-e", "-c")


def testssl_path():
    """testssl.sh (Debian installs it as testssl), or None."""
    for name in (os.environ.get("TESTSSL"), "testssl", "testssl.sh"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def make_certs(d):
    """The server's certificates in D, and the CA: (--certfile/--keyfile
    arguments, CA path). The ECDSA pair is the default (first)."""
    import trustme
    from tls_helpers import issue

    ca = trustme.CA()
    ca_path = d / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    args = []
    for stem, names, key_type in (("ecdsa", ["localhost"], "ecdsa"),
                                  ("rsa", ["localhost"], "rsa"),
                                  ("other", ["other.test"], "ecdsa")):
        cert, key = issue(ca, d / stem, names, names[0], key_type, days=365,
                          revocation="http://revocation.invalid/ca")
        args += ["--certfile", str(cert), "--keyfile", str(key)]
    return args, ca_path


def group_of(finding_id, groups):
    """The name of the group of GROUPS FINDING_ID is in, or "other"."""
    for name, _, ids, _, _ in groups:
        for i in ids:
            if finding_id == i or (i.endswith("*") and
                                   finding_id.startswith(i[:-1])):
                return name
    return "other"


def missing(findings, expect):
    """What EXPECT asks of FINDINGS (id -> finding) that is not there."""
    problems = []
    for fid, want in expect.items():
        f = findings.get(fid)
        if f is None:
            problems.append("%s: not reported" % fid)
        elif want.startswith("="):
            if f["severity"] != want[1:]:
                problems.append("%s: %s, not %s (%s)" % (
                    fid, f["severity"], want[1:], f["finding"]))
        elif not re.match(want + r"(?![\w.])", f["finding"]):
            problems.append("%s: %r, not %r" % (fid, f["finding"], want))
    return problems


def judge(results, groups):
    """Print the verdict of each of GROUPS from RESULTS (testssl.sh's flat
    JSON), and of the findings in none of them ("other"); the numbers of
    groups passed and failed."""
    by_group = collections.defaultdict(list)
    for r in results:
        by_group[group_of(r["id"], groups)].append(r)
    passed = failed = 0
    for name, option, _, expect, _ in groups + [("other", "", (), {}, 0)]:
        rs = by_group.get(name, [])
        problems = ["%s is %s: %s" % (r["id"], r["severity"], r["finding"])
                    for r in rs if r["severity"] in SEVERE]
        problems += missing({r["id"]: r for r in rs}, expect)
        verdict = "FAILED" if problems else "ok"
        print("testssl: %-19s %-3s %3d findings  %s" % (name, option,
                                                       len(rs), verdict))
        for p in problems:
            print("testssl:     " + p)
        if problems:
            failed += 1
        else:
            passed += 1
    return passed, failed


def summarize(results):
    counts = collections.Counter(r["severity"] for r in results)
    print("testssl: severities: " + ", ".join(
        "%s %d" % (s, counts[s]) for s in
        ("CRITICAL", "HIGH", "MEDIUM", "LOW", "WARN", "OK", "INFO")))
    for sev in ("MEDIUM", "LOW", "WARN"):
        ids = ["%s (%s)" % (r["id"], r["finding"]) for r in results
               if r["severity"] == sev]
        if ids:
            print("testssl: %s: %s" % (sev, "; ".join(ids)))


def run(testssl, d, everything):
    """Serve and scan (EVERYTHING: --all); the numbers of groups passed
    and failed."""
    from tls_helpers import TLSServer, served

    cert_args, ca = make_certs(d)
    pki = {"ca": ca, "cert": cert_args[1], "key": cert_args[3]}
    report = d / "testssl.json"
    server = TLSServer(d / "server", pki, args=cert_args[4:])
    cmd = [testssl, "--quiet", "--color", "0", "--warnings", "off",
           "--nodns", "none", "--ip", "127.0.0.1", "--add-ca", str(ca),
           "--connect-timeout", "10", "--openssl-timeout", "10",
           "--jsonfile", str(report)]
    groups = [g for g in GROUPS if everything or not g[4]]
    cmd += [g[1] for g in groups] + list(ALL_ONLY if everything else ())
    cmd.append("localhost:%d" % server.port)
    with served(server):
        t0 = time.monotonic()
        r = subprocess.run(cmd, cwd=str(d), stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=RUN_TIMEOUT)
        took = time.monotonic() - t0
    (d / "testssl.out").write_bytes(r.stdout + r.stderr)
    print("testssl: %s (exit status %d) took %.0f s" % (
        " ".join(cmd[1:-1]), r.returncode, took))
    try:
        results = json.loads(report.read_text())
    except (OSError, ValueError) as e:
        print("testssl: no findings to read (%s); its output:" % e)
        print((r.stdout + r.stderr).decode(errors="replace")[-4000:])
        return 0, 1
    passed, failed = judge(results, groups)
    summarize(results)
    return passed, failed


def main():
    if sys.argv[1:] not in ([], ["--all"]):
        print("usage: testssl.py [--all]", file=sys.stderr)
        return 2
    testssl = testssl_path()
    if testssl is None:
        print("testssl: skipped: testssl.sh is not installed (the Debian "
              "package testssl.sh)")
        print("0 passed, 0 failed, 1 skipped")
        return 77
    with tempfile.TemporaryDirectory(prefix="sluice-testssl-") as tmp:
        try:
            passed, failed = run(testssl, Path(tmp),
                                 sys.argv[1:] == ["--all"])
        except Exception as e:  # one line for .ci/run, whatever broke
            print("testssl: %s: %s" % (type(e).__name__, e))
            passed, failed = 0, 1
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
