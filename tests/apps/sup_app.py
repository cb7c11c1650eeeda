"""The supervisor tests' app: /pid, /slow, /hang, /log.

Each test serves a copy of this file in a directory of its own
(helpers.write_app), where it can break the next import: a file BROKEN next
to the copy makes the import fail, IMPORT_SLEEP makes it hang.
"""

import os
import sys
import time
from urllib.parse import parse_qs

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.exists(os.path.join(HERE, "BROKEN")):
    raise RuntimeError("sup_app is broken on purpose")
if os.path.exists(os.path.join(HERE, "IMPORT_SLEEP")):
    time.sleep(60)


def record(line):
    path = os.environ.get("E2E_CALL_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def hang_here_forever():
    while True:
        time.sleep(0.05)


def app(environ, start_response):
    path = environ["PATH_INFO"]
    q = {k: v[-1] for k, v in
         parse_qs(environ.get("QUERY_STRING", "")).items()}
    if path == "/slow":
        record("slow-start %s" % q.get("id", ""))
        time.sleep(float(q.get("t", "1")))
    elif path == "/hang":
        record("hang-start")
        hang_here_forever()
    elif path == "/log":
        sys.stderr.write("sup-app %d says %s\n"
                         % (os.getpid(), q.get("msg", "")))
        sys.stderr.flush()
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]
