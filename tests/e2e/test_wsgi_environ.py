"""The WSGI environ (PEP 3333): keys, values and native-string types.

/environ is served through wsgiref's validator, which already fails the
request (500) on the grosser mistakes; these tests check the values.
"""

from helpers import build_request


def env_of(server, target, headers=(), method="GET", body=None,
           version="HTTP/1.1", host=None):
    host = host or "127.0.0.1:%d" % server.port
    with server.connect() as c:
        r = c.request(method, target, headers=headers, body=body,
                      version=version, host=host)
        port = c.local_port
    assert r.status == 200, r.raw[:2000]
    env = r.json()
    env["_client_port"] = port
    return env


def val(env, key):
    return env[key]["value"]


def test_cgi_variables_are_native_strings(server):
    env = env_of(server, "/environ/x?a=1", headers=[("X-Thing", "t")])
    assert env["_key_types"] == ["str"]
    for key in ("REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING",
                "SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL",
                "REMOTE_ADDR", "REMOTE_PORT", "HTTP_HOST", "HTTP_X_THING"):
        assert env[key]["type"] == "str", (key, env[key])
    for key, info in env.items():
        if "." not in key and not key.startswith("_"):
            assert info["type"] == "str", (key, info)


def test_basic_values(server):
    env = env_of(server, "/environ/some/path?x=1&y=%20z")
    assert val(env, "REQUEST_METHOD") == "GET"
    assert val(env, "SCRIPT_NAME") == ""
    assert val(env, "PATH_INFO") == "/environ/some/path"
    assert val(env, "QUERY_STRING") == "x=1&y=%20z"
    assert val(env, "SERVER_PROTOCOL") == "HTTP/1.1"
    assert val(env, "SERVER_NAME") == "127.0.0.1"
    assert val(env, "SERVER_PORT") == str(server.port)
    assert val(env, "REMOTE_ADDR") == "127.0.0.1"
    assert val(env, "REMOTE_PORT") == str(env["_client_port"])
    assert val(env, "HTTP_HOST") == "127.0.0.1:%d" % server.port


def test_wsgi_keys(server, mode):
    env = env_of(server, "/environ")
    assert env["wsgi.version"] == {"type": "tuple", "value": [1, 0]}
    assert val(env, "wsgi.url_scheme") == "http"
    assert env["wsgi.multithread"] == {"type": "bool",
                                       "value": mode["threads"] > 1}
    assert env["wsgi.multiprocess"] == {"type": "bool", "value": False}
    assert env["wsgi.run_once"] == {"type": "bool", "value": False}
    assert env["wsgi.input_terminated"] == {"type": "bool", "value": True}
    assert env["_callables"]["wsgi.file_wrapper"] is True
    assert env["_input_attrs"] == ["read", "readline", "readlines",
                                   "__iter__"]
    assert env["_errors_attrs"] == ["write", "writelines", "flush"]


def test_path_info_is_percent_decoded_then_latin1(server):
    env = env_of(server, "/environ/caf%C3%A9/%20sp%2Fslash/%7e?q=%C3%A9")
    # UTF-8 bytes of "é" show up as two latin-1 characters.
    assert val(env, "PATH_INFO") == "/environ/caf\u00c3\u00a9/ sp/slash/~"
    assert val(env, "QUERY_STRING") == "q=%C3%A9"


def test_empty_query_string(server):
    env = env_of(server, "/environ")
    # PEP 3333: may be empty or absent.
    assert env.get("QUERY_STRING", {"value": ""})["value"] == ""


def test_content_type_and_length_absent_when_not_sent(server):
    env = env_of(server, "/environ")
    assert "CONTENT_TYPE" not in env
    assert "CONTENT_LENGTH" not in env
    assert "HTTP_CONTENT_TYPE" not in env
    assert "HTTP_CONTENT_LENGTH" not in env


def test_content_type_and_length_present_when_sent(server):
    env = env_of(server, "/environ", method="POST", body=b"hello",
                 headers=[("Content-Type", "text/plain; charset=utf-8")])
    assert val(env, "CONTENT_LENGTH") == "5"
    assert val(env, "CONTENT_TYPE") == "text/plain; charset=utf-8"
    assert val(env, "REQUEST_METHOD") == "POST"
    assert "HTTP_CONTENT_TYPE" not in env
    assert "HTTP_CONTENT_LENGTH" not in env


def test_chunked_request_has_no_content_length(server):
    host = "127.0.0.1:%d" % server.port
    with server.connect() as c:
        c.send(b"POST /environ HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: "
               b"chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" % host.encode())
        env = c.read_response().json()
    assert "CONTENT_LENGTH" not in env
    assert "HTTP_CONTENT_LENGTH" not in env


def test_http10_protocol(server):
    env = env_of(server, "/environ", version="HTTP/1.0")
    assert val(env, "SERVER_PROTOCOL") == "HTTP/1.0"


def test_http_headers(server):
    env = env_of(server, "/environ", headers=[
        ("X-Custom-Header", "value 1"),
        ("x-lower-case", "lower"),
        ("X-Padded", "   padded value \t "),
        ("X-Latin", "caf\xe9"),
        ("Accept", "text/html"),
    ])
    assert val(env, "HTTP_X_CUSTOM_HEADER") == "value 1"
    assert val(env, "HTTP_X_LOWER_CASE") == "lower"
    assert val(env, "HTTP_X_PADDED") == "padded value"
    assert val(env, "HTTP_X_LATIN") == "caf\xe9"
    assert val(env, "HTTP_ACCEPT") == "text/html"


def test_repeated_headers_are_joined_with_commas(server):
    env = env_of(server, "/environ", headers=[
        ("X-Multi", "a"), ("X-Other", "o"), ("X-Multi", "b"),
        ("x-multi", "c")])
    joined = val(env, "HTTP_X_MULTI")
    assert [p.strip() for p in joined.split(",")] == ["a", "b", "c"], joined
    assert val(env, "HTTP_X_OTHER") == "o"


def test_absolute_form_target(server):
    """RFC 9112 3.2.2: a server must accept absolute-form targets."""
    env = env_of(server, "http://example.com/environ/abs?q=1")
    assert val(env, "PATH_INFO") == "/environ/abs"
    assert val(env, "QUERY_STRING") == "q=1"


def test_environ_is_fresh_for_every_request(server):
    """Mutations by the app, headers and body keys of one request never
    leak into the next request on the same connection."""
    host = "127.0.0.1:%d" % server.port
    with server.connect() as c:
        c.request("POST", "/environ?mutate=1", body=b"12345", host=host,
                  headers=[("X-Only-Once", "1"),
                           ("Content-Type", "text/plain")])
        env = c.request("GET", "/environ", host=host).json()
    assert "e2e.leak" not in env
    assert "HTTP_X_LEAK" not in env
    assert "HTTP_X_ONLY_ONCE" not in env
    assert "CONTENT_LENGTH" not in env
    assert "CONTENT_TYPE" not in env
    assert val(env, "PATH_INFO") == "/environ"
    assert val(env, "REQUEST_METHOD") == "GET"


def test_request_methods(server):
    host = "127.0.0.1:%d" % server.port
    for method in ("PUT", "DELETE", "OPTIONS", "PATCH"):
        with server.connect() as c:
            r = c.request(method, "/environ", host=host, body=b"")
        assert r.status == 200
        assert r.json()["REQUEST_METHOD"]["value"] == method


def test_each_connection_reports_its_own_remote_port(server):
    # REMOTE_ADDR/PORT are made once per connection: a new connection in
    # the same pool slot must not see the one before it
    seen = []
    for _ in range(4):
        env = env_of(server, "/environ")
        assert val(env, "REMOTE_PORT") == str(env["_client_port"])
        assert val(env, "REMOTE_ADDR") == "127.0.0.1"
        seen.append(env["_client_port"])
    assert len(set(seen)) == 4


def test_same_connection_reports_same_remote_port(server):
    host = "127.0.0.1:%d" % server.port
    with server.connect() as c:
        c.send(build_request("GET", "/environ", host=host) * 3)
        ports = {c.read_response().json()["REMOTE_PORT"]["value"]
                 for i in range(3)}
        assert ports == {str(c.local_port)}
