#!/usr/bin/python3
"""check-layers-selftest.py - check-layers.py run on small made-up trees.

Each case writes a tree into a temporary directory: the clean tree below,
plus the files that break one rule. check-layers.py must pass the clean
tree (and see through comments, system headers and a long file, which is a
warning only) and fail each broken one with a line naming the file, the
line and the include; a circle of more than three files in the call
graph is a violation too. The last line is in
the check library's format
("Checks: N, Failures: F, Errors: E") so tests/summary.sh counts every case.
"""

import os
import subprocess
import sys
import tempfile

from selftest import report

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "check-layers.py")

# The clean tree: every layer, each including what it may.
CLEAN = {
    "common/buf.h": "#include <stddef.h>\n",
    "common/log.h": '#include "common/buf.h"\n',
    "common/log.c": '#include "config.h"\n#include "common/log.h"\n',
    "supervisor/table.h": '#include "common/log.h"\n',
    "supervisor/main.c": ('#include "config.h"\n#include <ev.h>\n'
                          '#include "common/log.h"\n'
                          '#include "supervisor/table.h"\n'),
    "worker/loop/conn.h": '#include "llhttp.h"\n#include "common/buf.h"\n',
    "worker/loop/conn.c": ('#include "config.h"\n'
                           "/* the loop side never does\n"
                           "#include <Python.h>\n"
                           '#include "worker/python/py.h" */\n'
                           '#include "worker/loop/conn.h" // not "Python.h"\n'
                           'static const char *s = "/* not a comment";\n'
                           '#include "pump.h"\n'),
    "worker/loop/pump.h": '#include "worker/loop/conn.h"\n',
    "worker/python/py.h": ('#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n'
                           '#include "worker/loop/conn.h"\n'),
    "worker/python/py.c": ('#include "config.h"\n'
                           '#include "worker/python/py.h"\n'),
    "worker/worker.h": '#include "common/log.h"\n',
    "worker/worker.c": ('#include "config.h"\n#include <Python.h>\n'
                        '#include "worker/loop/pump.h"\n'
                        '#include "worker/python/py.h"\n'
                        '#include "worker/worker.h"\n'),
    "tests/unit/harness.h": '#include "worker/loop/conn.h"\n',
    "tests/unit/test_conn.c": '#include "tests/unit/harness.h"\n',
    "llhttp/build_api.c": '#include "api.c"\n',
    "worker/python/long.c": "int x;\n" * 900,
}

# name, files added to (or replacing) CLEAN's, what every violation line
# must hold (one per expected line: their number must match exactly).
CASES = [
    ("loop includes <Python.h>",
     {"worker/loop/bad.c": "int a;\n#include <Python.h>\n"},
     ["worker/loop/bad.c:2: includes <Python.h>: the loop side"]),
    ('loop includes "Python.h"',
     {"worker/loop/bad.h": '#  include "Python.h"\n'},
     ['worker/loop/bad.h:1: includes "Python.h": the loop side']),
    ("loop includes the Python side",
     {"worker/loop/bad.c": '#include "worker/python/py.h"\n'},
     ['worker/loop/bad.c:1: includes "worker/python/py.h": the loop side',
      "folder include cycle: worker/loop -> worker/python -> worker/loop"]),
    ("loop includes the Python side by a relative path",
     {"worker/loop/bad.c": '#include "../python/py.h"\n'},
     ['worker/loop/bad.c:1: includes "../python/py.h": the loop side',
      "folder include cycle: worker/loop -> worker/python -> worker/loop"]),
    ("loop includes worker life",
     {"worker/loop/bad.c": '#include "worker/worker.h"\n'},
     ['worker/loop/bad.c:1: includes "worker/worker.h": the loop side '
      "never includes worker life",
      "folder include cycle: worker -> worker/loop -> worker"]),
    ("common includes the worker",
     {"common/bad.h": '#include "worker/loop/conn.h"\n'},
     ['common/bad.h:1: includes "worker/loop/conn.h": common/ is shared',
      "folder include cycle: common -> worker/loop -> common"]),
    ("common includes the supervisor",
     {"common/bad.c": '#include "supervisor/table.h"\n'},
     ['common/bad.c:1: includes "supervisor/table.h": common/',
      "folder include cycle: common -> supervisor -> common"]),
    ("supervisor includes worker life",
     {"supervisor/bad.c": '#include "worker/worker.h"\n'},
     ['supervisor/bad.c:1: includes "worker/worker.h": the supervisor']),
    ("supervisor includes <Python.h>",
     {"supervisor/bad.c": "#include <Python.h>\n"},
     ["supervisor/bad.c:1: includes <Python.h>: the supervisor"]),
    ("Python side includes worker life",
     {"worker/python/bad.c": '#include "worker/worker.h"\n'},
     ['worker/python/bad.c:1: includes "worker/worker.h": the Python side',
      "folder include cycle: worker -> worker/python -> worker"]),
    ("folder cycle outside the layers",
     {"tests/unit/a.h": '#include "tests/fixtures/b.h"\n',
      "tests/fixtures/b.h": '#include "tests/unit/harness.h"\n'},
     ["folder include cycle: tests/fixtures -> tests/unit -> "
      "tests/fixtures: tests/fixtures -> tests/unit (tests/fixtures/b.h:1)"]),
    ("header cycle",
     {"worker/loop/a.h": '#include "worker/loop/b.h"\n',
      "worker/loop/b.h": '#include "common/buf.h"\n'
                         '#include "worker/loop/a.h"\n'},
     ["header include cycle: worker/loop/a.h -> worker/loop/b.h -> "
      "worker/loop/a.h: worker/loop/a.h -> worker/loop/b.h "
      "(worker/loop/a.h:1); worker/loop/b.h -> worker/loop/a.h "
      "(worker/loop/b.h:2)"]),
]


# Socket calls outside the transports: one on a client's socket fails;
# one marked as no client's, one in a comment or a string, and the
# transport's own pass.
SOCKETS = {
    "worker/loop/transport.c": ("long sl_t_read(int fd, void *b)\n{\n"
                                "    return recv(fd, b, 1, 0);\n}\n"),
    "worker/loop/log.c": ("long sl_l_write(int fd, const void *b)\n{\n"
                          "    /* send(fd) */\n    return send(fd, b, 1, 0)"
                          "; /* not a client socket: a log */\n}\n"),
    "worker/python/msg.c": ('const char *sl_m = "send() takes one";\n'),
    "worker/loop/bad.c": ("long sl_bad(int fd, const void *b)\n{\n"
                          "    return sendmsg(fd, b, 0);\n}\n"),
}


def check_socket_io(tmp):
    root = os.path.join(tmp, "sockets")
    write_tree(root, dict(CLEAN, **SOCKETS))
    rc, found, lines = run(root)
    problems = []
    if rc != 1:
        problems.append("a socket call outside the transport passed (exit %d)"
                        % rc)
    if len(found) != 1 or not found[0].startswith(
            "worker/loop/bad.c:3: calls sendmsg()"):
        problems.append("not one violation line for bad.c's sendmsg() alone")
    return problems, lines


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


def run(root):
    proc = subprocess.run([sys.executable, SCRIPT, root],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    lines = proc.stdout.splitlines()
    found = [l for l in lines
             if not l.startswith(("warning: ", "check-layers.py: "))]
    return proc.returncode, found, lines


def check_clean(tmp):
    root = os.path.join(tmp, "clean")
    write_tree(root, CLEAN)
    rc, found, lines = run(root)
    problems = []
    if rc != 0 or found:
        problems.append("the clean tree failed (exit %d)" % rc)
    if not any(l.startswith("warning: worker/python/long.c: 900 lines")
               for l in lines):
        problems.append("no warning for the 900-line file")
    return problems, lines


def check_case(tmp, number, files, expected):
    root = os.path.join(tmp, "case%d" % number)
    write_tree(root, dict(CLEAN, **files))
    rc, found, lines = run(root)
    problems = []
    if rc != 1:
        problems.append("exit %d, not 1" % rc)
    if len(found) != len(expected):
        problems.append("%d violation lines, not %d"
                        % (len(found), len(expected)))
    for want in expected:
        if not any(want in l for l in found):
            problems.append("no line holding: " + want)
    return problems, lines


# Four loop-side files that call each other in a circle, and three that do
# too (small enough to pass); a static function, a prototype and a name in
# a comment make no edge.
CALLS = {
    "worker/loop/a.c": ("int sl_b_go(void);\nint sl_a_go(void)\n{\n"
                        "    return sl_b_go();\n}\n"),
    "worker/loop/b.c": "int sl_b_go(void)\n{\n    return sl_c_go();\n}\n",
    "worker/loop/c.c": ("const int sl_c_table[2] = {0};\nint sl_c_go(void)\n"
                        "{\n    return sl_d_go();\n}\n"),
    "worker/loop/d.c": "int sl_d_go(void)\n{\n    return sl_a_go();\n}\n",
    "common/x.c": ("int sl_x_go(void)\n{\n    return sl_y_go();\n}\n"
                   "/* sl_a_go() */\n"),
    "common/y.c": ("static int sl_a_go(void)\n{\n    return 0;\n}\n"
                   "int sl_y_go(void)\n{\n    return sl_z_go();\n}\n"),
    "common/z.c": "int sl_z_go(void)\n{\n    return sl_x_go() + 1;\n}\n",
}


def check_call_circle(tmp):
    root = os.path.join(tmp, "calls")
    write_tree(root, dict(CLEAN, **CALLS))
    rc, found, lines = run(root)
    problems = []
    circles = [l for l in lines if l.startswith("call-graph circle")]
    if rc != 1:
        problems.append("a call-graph circle passed (exit %d)" % rc)
    if len(circles) != 1 or not circles[0].startswith(
            "call-graph circle of 4 files: worker/loop/a.c (sl_b_go)") or \
            "common/" in circles[0]:
        problems.append("not one violation line for the 4-file circle alone")
    return problems, lines


def check_no_root(tmp):
    rc, _, lines = run(os.path.join(tmp, "absent"))
    return ([] if rc == 99 else ["exit %d for a missing tree, not 99" % rc],
            lines)


def main():
    with tempfile.TemporaryDirectory(prefix="check-layers.") as tmp:
        results = [("clean tree passes", check_clean(tmp)),
                   ("missing tree is a hard error", check_no_root(tmp)),
                   ("call-graph circles over 3 files",
                    check_call_circle(tmp)),
                   ("socket calls outside the transport",
                    check_socket_io(tmp))]
        for number, (name, files, expected) in enumerate(CASES):
            results.append((name, check_case(tmp, number, files, expected)))
    return report("check-layers-selftest.py", results)


if __name__ == "__main__":
    sys.exit(main())
