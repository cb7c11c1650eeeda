#!/usr/bin/python3
"""check-layers.py - the layer rules of docs/architecture.md, checked on the
source.

usage: check-layers.py [ROOT]

The folders are layers and includes only point down:

    common  <-  worker/loop  <-  worker/python  <-  worker/ (worker life)
    common  <-  supervisor

A file may include its own folder and the folders below it, nothing else
(config.h and system headers are not the tree's and are always fine).
Python.h belongs to the Python side and to worker life: the loop side and
the supervisor never see it, and neither does common/, which the supervisor
uses too. On top of the layer rules no two folders may include each other
through any chain (a folder-level cycle), and no header may reach itself
through its own includes (a file-level cycle), in any scanned folder,
tests/ included.

Every violation is one line, "FILE:LINE: includes X: RULE", and any of them
makes the exit status 1. A .c or .h over 800 lines earns a warning line
only.

The call graph between the .c files of common/, supervisor/ and worker/
(a file that names a non-static function or global another file defines
calls that file) is checked too: calls go down through the layers and
come back up through callbacks (docs/architecture.md, "The connection in
layers"), so no circle of files may be larger than MAX_CIRCLE. Each larger
circle is a violation, one line, "call-graph circle of N files: ...", with
a shortest cycle through it and a name for each step.

Bytes to and from a client go through the connection's transport: no .c
file of worker/ but the transports (TRANSPORTS) calls recv, send,
sendmsg, writev, sendfile or their kin. A call on a socket that is no
client's says so on its line or the line above, in a comment holding
"not a client socket"
(the access log's stdout, say). Each other call is a violation,
"FILE:LINE: calls NAME(): ...".

ROOT defaults to SLUICE_SRCDIR (make check exports it), then srcdir,
then the tree this script sits in; a missing ROOT exits 99 (a hard error to
automake's test harness).

Includes are read from the text after comments are removed, whatever #if
surrounds them: a conditional include is still a dependency.
"""

import os
import re
import sys

# The top-level folders scanned for .c and .h files.
SCANNED = ("common", "supervisor", "worker", "tests", "llhttp")

MAX_LINES = 800

# The folders whose .c files make the call graph, and the largest circle
# of files in it that is not reported.
CALL_SCANNED = ("common/", "supervisor/", "worker/")
MAX_CIRCLE = 3

# At the start of a line, outside any body: a definition's head up to the
# name before its parameter list (a function), or up to its '=' or ';' (a
# global). What follows the parameter list tells a definition ('{') from a
# declaration (';').
FUNC_HEAD = re.compile(r"^(?!static\b|typedef\b|extern\b)[A-Za-z_][^;{}()=\n#]*?"
                       r"\b([A-Za-z_]\w*)\s*\(", re.M)
GLOBAL_DEF = re.compile(r"^(?!static\b|typedef\b|extern\b|struct\b[^;=]*\{|"
                        r"enum\b|union\b)[A-Za-z_][^;{}()=\n#]*?"
                        r"\b([A-Za-z_]\w*)\s*(?:\[[^\]\n]*\])?\s*[=;]",
                        re.M)
WORD = re.compile(r"\b[A-Za-z_]\w*\b")

# The files that may do a client socket's I/O, and the calls that do it.
TRANSPORTS = ("worker/loop/transport.c", "worker/loop/tls.c")
SOCKET_IO = re.compile(r"(?<![\w.>])(recv|recvfrom|recvmsg|recvmmsg|send|sendto|"
                       r"sendmsg|sendmmsg|writev|readv|sendfile|splice)\s*\(")
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
NOT_CLIENT = "not a client socket"

LAYERS = "common <- worker/loop <- worker/python <- worker/"

# Each layer and the layers its files may include, besides their own.
ALLOWED = {
    "common": (),
    "supervisor": ("common",),
    "worker/loop": ("common",),
    "worker/python": ("common", "worker/loop"),
    "worker": ("common", "worker/loop", "worker/python"),
}

# Why a layer may not include another one: (from, to) -> rule text.
RULES = {
    ("common", "supervisor"):
        "common/ is shared by both processes and includes only common/",
    ("common", "worker"):
        "common/ is shared by both processes and includes only common/",
    ("supervisor", "worker"):
        "the supervisor uses common/ only, never the worker",
    ("worker/loop", "worker/python"):
        "the loop side never includes the Python side (" + LAYERS + ")",
    ("worker/loop", "worker"):
        "the loop side never includes worker life (" + LAYERS + ")",
    ("worker/python", "worker"):
        "the Python side never includes worker life (" + LAYERS + ")",
}

PYTHON_H_RULES = {
    "common": "common/ never includes Python.h: the supervisor uses it too",
    "supervisor": "the supervisor never includes Python.h (it never links "
                  "Python)",
    "worker/loop": "the loop side never includes Python.h (the GIL line)",
}

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">]+)[">]')


def layer_of(path):
    """The layer of a tree-relative path, or None for tests/, llhttp/..."""
    parts = path.split("/")
    if parts[0] in ("common", "supervisor"):
        return parts[0]
    if parts[0] == "worker":
        # worker/loop, worker/python, or a folder no rule knows yet
        return "worker" if len(parts) == 2 else "worker/" + parts[1]
    return None


def folder_of(path):
    """The node of PATH in the folder graph: its layer, else its directory."""
    return layer_of(path) or os.path.dirname(path) or "."


def strip_comments(text):
    """TEXT with every comment blanked out, newlines kept (line numbers
    stay right); string and character literals are skipped over whole."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end) or " ")
            i = end
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def scan(root):
    """{relative path: text} for every .c and .h in the scanned folders."""
    files = {}
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if not name.endswith((".c", ".h")):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                with open(full, encoding="utf-8", errors="replace") as f:
                    files[rel] = f.read()
    return files


def resolve(root, files, includer, name, quoted):
    """The tree-relative path an include names, or None when it is not the
    tree's (system headers, the generated config.h, llhttp.h). A quoted
    include is looked for beside its includer first, as the compiler
    does; both forms are then looked for from the top (-I$(top_srcdir)).
    A missing file under a scanned folder still names that folder."""
    candidates = []
    if quoted:
        candidates.append(os.path.join(os.path.dirname(includer), name))
    candidates.append(name)
    for cand in candidates:
        cand = os.path.normpath(cand).replace(os.sep, "/")
        if cand in files or os.path.isfile(os.path.join(root, cand)):
            if cand.split("/")[0] in SCANNED:
                return cand
    if quoted and name.split("/")[0] in SCANNED and "/" in name:
        return os.path.normpath(name).replace(os.sep, "/")
    return None


def includes(root, files):
    """[(file, line, spelled, target or None)] for every #include."""
    found = []
    for path, text in sorted(files.items()):
        for lineno, line in enumerate(strip_comments(text).split("\n"), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            quoted = m.group(1) == '"'
            name = m.group(2).strip()
            spelled = '"%s"' % name if quoted else "<%s>" % name
            target = resolve(root, files, path, name, quoted)
            found.append((path, lineno, spelled, target))
    return found


def layer_violations(incs):
    out = []
    for path, lineno, spelled, target in incs:
        src = layer_of(path)
        if src is None:
            continue
        name = spelled[1:-1]
        if os.path.basename(name) == "Python.h":
            if src in PYTHON_H_RULES:
                out.append("%s:%d: includes %s: %s"
                           % (path, lineno, spelled, PYTHON_H_RULES[src]))
            continue
        if target is None:
            continue
        dst = layer_of(target)
        if dst == src or dst in ALLOWED.get(src, ()):
            continue
        if src not in ALLOWED or (dst is not None and dst not in ALLOWED):
            unknown = src if src not in ALLOWED else dst
            rule = ("%s/ is no layer of docs/architecture.md (%s): name it in "
                    "tests/check-layers.py first" % (unknown, LAYERS))
        elif dst is None:
            rule = "%s/ includes only %s" % (
                src, ", ".join(l + "/" for l in (src,) + ALLOWED[src]))
        else:
            top = dst.split("/")[0]
            rule = RULES.get((src, dst)) or RULES.get(
                (src, top), "%s/ may not include %s/" % (src, dst))
        out.append("%s:%d: includes %s: %s" % (path, lineno, spelled, rule))
    return out


def sccs(graph):
    """The strongly connected components of GRAPH ({node: set of nodes}),
    each a sorted list; Tarjan's algorithm, iterative."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                result.append(sorted(comp))
    return result


def shortest_cycle(graph, start, members):
    """A shortest cycle start -> ... -> start inside MEMBERS, as a list."""
    prev = {start: None}
    queue = [start]
    for node in queue:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                path = [node]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if nxt in members and nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return [start, start]


def cycles(graph, edges_of):
    """One line per cycle of GRAPH: the cycle, then where each step is."""
    out = []
    for comp in sccs(graph):
        start = comp[0]
        if len(comp) == 1 and start not in graph.get(start, ()):
            continue
        cyc = shortest_cycle(graph, start, set(comp))
        steps = []
        for a, b in zip(cyc, cyc[1:]):
            steps.append("%s -> %s (%s)" % (a, b, edges_of(a, b)))
        extra = ""
        if len(comp) > len(cyc) - 1:
            extra = "; all of %s reach each other" % ", ".join(comp)
        out.append(" -> ".join(cyc) + ": " + "; ".join(steps) + extra)
    return out


def cycle_violations(incs):
    folders, folder_edges = {}, {}
    headers, header_edges = {}, {}
    for path, lineno, spelled, target in incs:
        if target is None:
            continue
        a, b = folder_of(path), folder_of(target)
        if a != b:
            folders.setdefault(a, set()).add(b)
            folder_edges.setdefault((a, b), []).append(
                "%s:%d" % (path, lineno))
        headers.setdefault(path, set()).add(target)
        header_edges[(path, target)] = "%s:%d" % (path, lineno)

    def folder_where(a, b):
        where = folder_edges[(a, b)]
        more = " and %d more" % (len(where) - 1) if len(where) > 1 else ""
        return where[0] + more

    out = []
    for line in cycles(folders, folder_where):
        out.append("folder include cycle: %s: no two folders may include "
                   "each other" % line)
    for line in cycles(headers, lambda a, b: header_edges[(a, b)]):
        out.append("header include cycle: %s: no file may include itself "
                   "through its includes" % line)
    return out


def long_files(files):
    out = []
    for path, text in sorted(files.items()):
        lines = text.count("\n") + (not text.endswith("\n") and text != "")
        if lines > MAX_LINES:
            out.append("warning: %s: %d lines, over %d: split it by "
                       "responsibility (docs/architecture.md)"
                       % (path, lines, MAX_LINES))
    return out


def definitions(path, text):
    """The non-static functions and globals .c file PATH defines."""
    names = set()
    for m in FUNC_HEAD.finditer(text):
        rest = text[m.end():]
        semi, brace = rest.find(";"), rest.find("{")
        if brace >= 0 and (semi < 0 or brace < semi):
            names.add(m.group(1))
    for m in GLOBAL_DEF.finditer(text):
        names.add(m.group(1))
    return names


def call_graph(files):
    """({file: set of files it calls}, {(a, b): a name a uses of b's})
    over the .c files of CALL_SCANNED."""
    texts = {path: strip_comments(text) for path, text in files.items()
             if path.endswith(".c") and path.startswith(CALL_SCANNED)}
    owner = {}
    for path, text in texts.items():
        for name in definitions(path, text):
            owner.setdefault(name, path)
    graph, why = {}, {}
    for path, text in texts.items():
        graph.setdefault(path, set())
        for word in set(WORD.findall(text)):
            dst = owner.get(word)
            if dst is not None and dst != path:
                graph[path].add(dst)
                why.setdefault((path, dst), word)
    return graph, why


def call_circles(files):
    """One line per circle of more than MAX_CIRCLE files in the call
    graph."""
    graph, why = call_graph(files)
    out = []
    for comp in sccs(graph):
        if len(comp) <= MAX_CIRCLE:
            continue
        cyc = shortest_cycle(graph, comp[0], set(comp))
        steps = " -> ".join(
            "%s (%s)" % (a, why[(a, b)]) for a, b in zip(cyc, cyc[1:]))
        out.append("call-graph circle of %d files: %s -> %s; all of %s "
                   "reach each other" % (len(comp), steps, cyc[-1],
                                         ", ".join(comp)))
    return out


def socket_io(files):
    """One line per client-socket call outside the transports."""
    out = []
    for path, text in sorted(files.items()):
        if (not path.startswith("worker/") or not path.endswith(".c") or
                path in TRANSPORTS):
            continue
        code = STRING.sub('""', strip_comments(text)).split("\n")
        lines = text.split("\n")
        for i, line in enumerate(code):
            for m in SOCKET_IO.finditer(line):
                if NOT_CLIENT in lines[i] or (i > 0 and
                                              NOT_CLIENT in lines[i - 1]):
                    continue
                out.append("%s:%d: calls %s(): a client's bytes go through "
                           "its transport (%s)" % (path, i + 1, m.group(1),
                                                   ", ".join(TRANSPORTS)))
    return out


def default_root():
    for var in ("SLUICE_SRCDIR", "srcdir"):
        if os.environ.get(var):
            return os.environ[var]
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main(argv):
    args = argv[1:]
    if len(args) > 1:
        print("usage: check-layers.py [ROOT]", file=sys.stderr)
        return 99
    root = args[0] if args else default_root()
    if not os.path.isdir(os.path.join(root, "worker")):
        print("check-layers.py: %s: no source tree here (no worker/)" % root,
              file=sys.stderr)
        return 99
    files = scan(root)
    incs = includes(root, files)
    bad = layer_violations(incs) + cycle_violations(incs)
    bad += socket_io(files)
    circles = call_circles(files)
    for line in long_files(files):
        print(line)
    bad += circles
    for line in bad:
        print(line)
    if bad:
        print("check-layers.py: FAIL: %d violation%s of the layer rules "
              "(docs/architecture.md)" % (len(bad), "" if len(bad) == 1 else "s"))
        return 1
    print("check-layers.py: PASS: %d files, %d includes, no violation, no "
          "call-graph circle over %d files" % (len(files), len(incs),
                                               MAX_CIRCLE))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
