"""The command line: --version/--help, and every way to start it wrong.

A command-line mistake, an application that cannot be imported or has no
such callable, and an address that cannot be bound all end the same way:
exit status 2, one clear error line on stderr, never a Python traceback.
Command-line errors print exactly one line ("sluice: error: ..."); for
application and bind failures the process may have logged INFO lines first,
so the rule there is: exactly one line at a level above INFO, and it names
what went wrong.

Also here: --chdir, --pythonpath and --venv actually change what is
imported (those start real servers, in both executor modes).
"""

import re
import socket
import textwrap

import pytest

from helpers import (APPS, BASE, assert_one_error, assert_usage_error,
                     bind_args, free_port, problem_lines, run_cli)

pytestmark = pytest.mark.sluice_only

def test_version():
    rc, out, err = run_cli(["--version"])
    assert rc == 0, err
    assert re.search(r"sluice\S* \d+\.\d+", out + err), (out, err)


def test_help():
    rc, out, err = run_cli(["--help"])
    assert rc == 0, err
    for opt in ("--bind", "--workers", "--threads", "--chdir",
                "--pythonpath", "--limit-request-line", "--keep-alive",
                "--http-protocols", "--http2-cleartext",
                "--http2-max-concurrent-streams",
                "--http2-initial-window-size", "--http2-max-frame-size",
                "--http2-max-header-list-size"):
        assert opt in out, opt


@pytest.mark.parametrize("args,needle", [
    (["--no-such-option", "wsgi_app:app"], "--no-such-option"),
    (["-w", "many", "wsgi_app:app"], "many"),
    (["--workers=-3", "wsgi_app:app"], "-3"),
    (["--threads", "0", "wsgi_app:app"], "threads"),
    (["--threads", "x", "wsgi_app:app"], "x"),
    (["--limit-request-line", "lots", "wsgi_app:app"], "lots"),
    (["--limit-request-body=-5", "wsgi_app:app"], "-5"),
    (["--keep-alive", "soon", "wsgi_app:app"], "soon"),
    (["--header-timeout", "never", "wsgi_app:app"], "never"),
    (["--log-level", "chatty", "wsgi_app:app"], "chatty"),
    (["--http-protocols", "h2,h3", "wsgi_app:app"],
     "argument --http-protocols: invalid choice: 'h3'"),
    (["--http-protocols", "h2,h1,h2", "wsgi_app:app"], "h2 is named twice"),
    (["--http-protocols", "h1,", "wsgi_app:app"], "an empty name in 'h1,'"),
    (["--http-protocols=", "wsgi_app:app"], "must not be empty"),
    (["--http2-cleartext", "both", "wsgi_app:app"],
     "argument --http2-cleartext: invalid choice: 'both'"),
    (["--http2-cleartext", "prior-knowledge", "wsgi_app:app"],
     "prior-knowledge needs h2 in --http-protocols"),
    (["--http2-max-concurrent-streams", "0", "wsgi_app:app"],
     "argument --http2-max-concurrent-streams: '0' is out of range"),
    (["--http2-initial-window-size", "2147483648", "wsgi_app:app"],
     "argument --http2-initial-window-size: '2147483648' is out of range"),
    (["--http2-max-frame-size", "16383", "wsgi_app:app"],
     "out of range 16384..16777215"),
    (["--http2-max-frame-size", "16777216", "wsgi_app:app"],
     "out of range 16384..16777215"),
    (["--http2-max-header-list-size", "-1", "wsgi_app:app"],
     "argument --http2-max-header-list-size: '-1' is out of range"),
    (["--bind"], "bind"),
    ([], ""),
    (["wsgi_app:app", "extra_app:app"], ""),
])
def test_bad_command_line(args, needle):
    rc, out, err = run_cli(BASE + args)
    assert_usage_error(rc, err, needle)


def test_bad_bind_syntax():
    rc, out, err = run_cli(BASE + ["-b", "127.0.0.1:notaport",
                                   "wsgi_app:app"])
    assert rc == 2, err
    assert "Traceback" not in err
    assert len(problem_lines(err)) == 1, err
    assert "127.0.0.1:notaport" in err


def test_bind_port_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc, out, err = run_cli(BASE + ["-b", "127.0.0.1:%d" % port,
                                       "wsgi_app:app"])
    line = assert_one_error(rc, err, str(port))
    assert re.search(r"(?i)in use", line), line


def test_bind_address_not_local():
    # 192.0.2.0/24 is TEST-NET-1: never an address of this machine.
    rc, out, err = run_cli(BASE + ["-b", "192.0.2.1:8080", "wsgi_app:app"])
    assert_one_error(rc, err, "192.0.2.1")


def test_bind_unix_in_missing_directory(tmp_path):
    path = tmp_path / "no" / "such" / "dir" / "sock"
    rc, out, err = run_cli(BASE + ["-b", "unix:%s" % path, "wsgi_app:app"])
    assert_one_error(rc, err, str(path))


def test_missing_module():
    rc, out, err = run_cli(BASE + bind_args() + ["no_such_module_e2e:app"])
    line = assert_one_error(rc, err, "no_such_module_e2e")
    assert "ModuleNotFoundError" in line or "No module named" in line, line


def test_missing_callable():
    rc, out, err = run_cli(BASE + bind_args() + ["wsgi_app:no_such_callable"])
    assert_one_error(rc, err, "no_such_callable")


def test_not_callable():
    rc, out, err = run_cli(BASE + bind_args() + ["wsgi_app:NOT_CALLABLE"])
    assert_one_error(rc, err, "NOT_CALLABLE")


def test_module_raising_at_import(tmp_path):
    (tmp_path / "raises_at_import.py").write_text(textwrap.dedent("""\
        def helper():
            raise RuntimeError("boom while importing e2e")
        helper()
        app = None
        """))
    rc, out, err = run_cli(["--pythonpath", str(tmp_path)] + bind_args()
                           + ["raises_at_import:app"])
    line = assert_one_error(rc, err, "raises_at_import")
    assert "RuntimeError" in line and "boom while importing e2e" in line, line


def test_module_with_syntax_error(tmp_path):
    (tmp_path / "bad_syntax_e2e.py").write_text("def app(:\n    pass\n")
    rc, out, err = run_cli(["--pythonpath", str(tmp_path)] + bind_args()
                           + ["bad_syntax_e2e:app"])
    line = assert_one_error(rc, err, "bad_syntax_e2e")
    assert "SyntaxError" in line, line


def test_import_error_goes_to_error_logfile(tmp_path):
    """With --error-logfile the one error line is in the file, and stderr
    has nothing else to say."""
    log = tmp_path / "error.log"
    rc, out, err = run_cli(BASE + bind_args() + [
        "--error-logfile", str(log), "no_such_module_e2e:app"])
    assert rc == 2, err
    text = log.read_text() if log.exists() else ""
    combined = text + err
    assert "Traceback" not in combined
    lines = problem_lines(combined)
    assert len(lines) == 1, combined
    assert "no_such_module_e2e" in lines[0]


def test_bad_chdir(tmp_path):
    missing = tmp_path / "missing-dir"
    rc, out, err = run_cli(BASE + bind_args() + ["--chdir", str(missing),
                                                 "wsgi_app:app"])
    assert rc == 2, err
    assert "Traceback" not in err
    assert len(problem_lines(err)) == 1, err
    assert str(missing) in err


def test_bad_error_logfile(tmp_path):
    bad = tmp_path / "missing-dir" / "error.log"
    rc, out, err = run_cli(BASE + bind_args() + ["--error-logfile", str(bad),
                                                 "wsgi_app:app"])
    assert rc == 2, err
    assert "Traceback" not in err
    assert len(problem_lines(err)) == 1, err
    assert str(bad) in err


# ------------------------------------------------ options that change imports

def test_chdir_makes_cwd_importable(make_server, tmp_path, inline):
    appdir = tmp_path / "chdir_app"
    appdir.mkdir()
    (appdir / "chdir_only_app.py").write_text(textwrap.dedent("""\
        import os
        def app(environ, start_response):
            body = ("cwd=" + os.getcwd()).encode()
            start_response("200 OK", [("Content-Type", "text/plain"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        """))
    s = make_server("chdir_only_app:app", pythonpath=(), inline=inline,
                    args=["--chdir", str(appdir)], ready_path="/")
    assert s.get("/").body == ("cwd=%s" % appdir).encode()


def test_pythonpath_is_searched(make_server, tmp_path, inline):
    d1 = tmp_path / "p1"
    d2 = tmp_path / "p2"
    d1.mkdir()
    d2.mkdir()
    (d1 / "pp_app.py").write_text(textwrap.dedent("""\
        import pp_helper
        def app(environ, start_response):
            body = pp_helper.VALUE
            start_response("200 OK", [("Content-Type", "text/plain"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        """))
    (d2 / "pp_helper.py").write_text("VALUE = b'from second pythonpath'\n")
    s = make_server("pp_app:app", pythonpath=(str(d1), str(d2)),
                    inline=inline, ready_path="/")
    assert s.get("/").body == b"from second pythonpath"


def test_venv_site_packages_are_importable(make_server, tmp_path, inline):
    import subprocess
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip",
                    str(venv)], check=True, timeout=60)
    site = list(venv.glob("lib/python3*/site-packages"))
    assert len(site) == 1, site
    (site[0] / "only_in_venv_e2e.py").write_text("MARK = b'venv package'\n")
    appdir = tmp_path / "app"
    appdir.mkdir()
    (appdir / "venv_app.py").write_text(textwrap.dedent("""\
        import sys
        import only_in_venv_e2e
        def app(environ, start_response):
            body = only_in_venv_e2e.MARK
            start_response("200 OK", [("Content-Type", "text/plain"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        """))
    s = make_server("venv_app:app", pythonpath=(str(appdir),), inline=inline,
                    args=["--venv", str(venv)], ready_path="/")
    assert s.get("/").body == b"venv package"


def test_inline_mode_with_several_threads_is_refused():
    rc, out, err = run_cli(BASE + bind_args() + ["--threads", "4",
                                                 "wsgi_app:app"],
                           env={"SLUICE_INLINE": "1"})
    assert_usage_error(rc, err, "threads")


def test_log_level_filters_the_error_log(make_server):
    quiet = make_server(args=["--log-level", "warning"])
    chatty = make_server()
    for s in (quiet, chatty):
        assert s.get("/hello").status == 200
    # the default level (info) logs start-up; warning does not
    assert "[INFO]" in chatty.error_log_text()
    assert "[INFO]" not in quiet.error_log_text(), quiet.error_log_text()
    # errors still get through at warning level
    mark = quiet.log_mark()
    assert quiet.get("/raise?when=before&marker=lvl").status == 500
    quiet.wait_for_log("e2e-before lvl", since=mark)
