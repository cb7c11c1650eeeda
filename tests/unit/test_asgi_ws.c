/* test_asgi_ws.c - check suite for worker/python/asgi_ws.c, ASGI's
 * websocket scope.
 *
 * The real thing in one process, as test_asgi.c: the embedded interpreter,
 * the ASGI app (APP below) on the asyncio lane, the pump's loop run by the
 * test thread without the GIL. The client speaks WebSocket by hand: a
 * handshake, masked frames in, unmasked frames out (RFC 6455 §5), so each
 * test sees exactly the bytes the app's messages turned into. The app
 * records what it saw in testapp.state; the test takes the GIL only to
 * read it.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>

#include "tests/unit/py_harness.h"
#include "tests/unit/ws_frames.h"
#include "worker/python/asgi.h"
#include "worker/python/asgi_lifespan.h"

static const char APP[] =
    "import asyncio\n"
    "state = {'types': [], 'end': None, 'error': None, 'suspended': 0,\n"
    "         'sent': 0}\n"
    "loop = None\n"
    "\n"
    "async def lifespan(scope, receive, send):\n"
    "    global loop\n"
    "    loop = asyncio.get_running_loop()\n"
    "    while True:\n"
    "        m = await receive()\n"
    "        if m['type'] == 'lifespan.startup':\n"
    "            scope['state']['k'] = 'v'\n"
    "            await send({'type': 'lifespan.startup.complete'})\n"
    "        else:\n"
    "            await send({'type': 'lifespan.shutdown.complete'})\n"
    "            return\n"
    "\n"
    "async def echo(scope, receive, send):\n"
    "    while True:\n"
    "        m = await receive()\n"
    "        state['types'].append(m['type'])\n"
    "        if m['type'] == 'websocket.connect':\n"
    "            await send({'type': 'websocket.accept',\n"
    "                        'subprotocol': (scope['subprotocols'] or\n"
    "                                        [None])[0],\n"
    "                        'headers': [(b'x-state', scope['state']['k']\n"
    "                                     .encode())]})\n"
    "        elif m['type'] == 'websocket.disconnect':\n"
    "            state['end'] = (m['code'], m['reason'])\n"
    "            return\n"
    "        elif m.get('text') is not None:\n"
    "            await send({'type': 'websocket.send', 'text': m['text']})\n"
    "        else:\n"
    "            await send({'type': 'websocket.send', 'bytes': m['bytes']})\n"
    "\n"
    "async def refuse(scope, receive, send):\n"
    "    await receive()\n"
    "    await send({'type': 'websocket.close'})\n"
    "\n"
    "async def deny(scope, receive, send):\n"
    "    await receive()\n"
    "    await send({'type': 'websocket.http.response.start',\n"
    "                'status': 401, 'headers': [(b'x-why', b'token')]})\n"
    "    await send({'type': 'websocket.http.response.body',\n"
    "                'body': b'go away'})\n"
    "\n"
    "async def misuse(scope, receive, send):\n"
    "    await receive()\n"
    "    await send({'type': 'websocket.accept'})\n"
    "    try:\n"
    "        await send({'type': 'websocket.send', 'text': 1})\n"
    "    except TypeError as e:\n"
    "        state['error'] = str(e)\n"
    "        raise\n"
    "\n"
    "async def early(scope, receive, send):\n"
    "    await receive()\n"
    "    try:\n"
    "        await send({'type': 'websocket.send', 'text': 'x'})\n"
    "    except RuntimeError as e:\n"
    "        state['error'] = str(e)\n"
    "\n"
    "async def done(scope, receive, send):\n"
    "    await receive()\n"
    "    await send({'type': 'websocket.accept'})\n"
    "    await send({'type': 'websocket.send', 'text': 'last'})\n"
    "\n"
    "async def closing(scope, receive, send):\n"
    "    await receive()\n"
    "    await send({'type': 'websocket.accept'})\n"
    "    await send({'type': 'websocket.close', 'code': 4002,\n"
    "                'reason': 'see you'})\n"
    "\n"
    "BLOCK, BLOCKS = 64 * 1024, 64\n"
    "\n"
    "async def flood(scope, receive, send):\n"
    "    await receive()\n"
    "    await send({'type': 'websocket.accept'})\n"
    "    for i in range(BLOCKS):\n"
    "        ran = []\n"
    "        loop.call_soon(ran.append, 1)\n"
    "        await send({'type': 'websocket.send',\n"
    "                    'bytes': bytes([65 + i % 26]) * BLOCK})\n"
    "        state['suspended'] += bool(ran)\n"
    "        state['sent'] += 1\n"
    "    await send({'type': 'websocket.close'})\n"
    "\n"
    "async def left(scope, receive, send):\n"
    "    await receive()\n"
    "    await send({'type': 'websocket.accept'})\n"
    "    m = await receive()\n"
    "    state['end'] = (m['code'], m['reason'])\n"
    "    try:\n"
    "        await send({'type': 'websocket.send', 'text': 'late'})\n"
    "    except OSError as e:\n"
    "        state['error'] = type(e).__name__\n"
    "\n"
    "async def app(scope, receive, send):\n"
    "    if scope['type'] == 'lifespan':\n"
    "        return await lifespan(scope, receive, send)\n"
    "    assert scope['type'] == 'websocket'\n"
    "    await globals()[scope['path'].strip('/')](scope, receive, send)\n";

#define KEY    "dGhlIHNhbXBsZSBub25jZQ=="
#define ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" /* RFC 6455 §1.3's example */

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;
static PyThreadState *main_ts;
static char v[256];

/* One frame from the server. */
typedef struct {
    int opcode;
    char *data; /* owned, NUL-terminated */
    size_t len;
} frame_t;

static void setup(void)
{
    client.fd = -1;
    hp_log_to_file();
}

static void teardown(void)
{
    if (pump.exec != NULL)
        ck_assert_int_eq(pump.exec->stop(&pump, 2.0), 0);
    h_resp_free(&resp);
    h_client_close(&client);
}

/* Python, the app, the asyncio lane with lifespan done, a client, and
 * the GIL given up for the lane. */
static void up(void)
{
    PyObject *app;

    h_options(&opt, "--ws-per-message-deflate", "false", NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    hp_module("testapp", APP);
    app = sl_py_load_app(&opt);
    hp_check(app, "load the app");
    ck_assert_int_eq(sl_asgi_lifespan_init(), 0);
    h_exec = &sl_asgi_lane_exec.ops;
    h_pump_up(&pump, &opt);
    ck_assert_int_eq(sl_asgi_init(app, &pump), 0);
    Py_DECREF(app);
    ck_assert_int_eq(sl_asgi_start(&pump), 0);
    main_ts = PyEval_SaveThread();
    h_connect(&pump, &client);
}

static const char *app_eval(const char *expr)
{
    const char *r;

    PyEval_RestoreThread(main_ts);
    r = hp_eval("testapp", expr);
    main_ts = PyEval_SaveThread();
    return r;
}

typedef struct {
    const char *expr, *want;
} app_is_t;

static bool app_is(void *arg)
{
    app_is_t *a = arg;

    return strcmp(app_eval(a->expr), a->want) == 0;
}

static bool until_app(const char *expr, const char *want)
{
    app_is_t a = {expr, want};

    return h_run_until(&pump, app_is, &a);
}

static bool log_has(void *text)
{
    return strstr(hp_log_text(), text) != NULL;
}

/* Send the handshake for PATH with EXTRA header lines; run until the
 * answer's head (and body, if any) is in RESP. */
static void handshake(const char *path, const char *extra)
{
    char raw[512];

    snprintf(raw, sizeof(raw),
             "GET %s HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Key: " KEY "\r\n"
             "Sec-WebSocket-Version: 13\r\n%s\r\n",
             path, extra);
    h_sends(&client, raw);
    ck_assert_msg(h_response(&pump, &client, &resp, false),
                  "no answer to the handshake for %s", path);
}

static const char *hdr(const char *name)
{
    return h_header(resp.head, name, v, sizeof(v));
}

/* Send one masked client frame (ws_frames.h builds it). */
static void send_frame(int opcode, const void *data, size_t n)
{
    sl_buf_t b = {0};

    wf_frame(&b, (uint8_t)(0x80 | opcode), data, n, 0);
    h_send(&client, b.data, b.len);
    sl_buf_free(&b);
}

/* Take one whole server frame off the client's bytes into *F. */
static bool take_frame(frame_t *f)
{
    const uint8_t *p;
    size_t h = 2, n, i;

    h_pull(&client); /* may move client.data */
    if (client.len < 2)
        return false;
    p = (const uint8_t *)client.data;
    ck_assert_msg((p[1] & 0x80) == 0, "a server frame is masked");
    n = p[1] & 0x7f;
    if (n == 126) {
        if (client.len < 4)
            return false;
        n = (size_t)p[2] << 8 | p[3];
        h = 4;
    } else if (n == 127) {
        if (client.len < 10)
            return false;
        for (n = 0, i = 0; i < 8; i++)
            n = n << 8 | p[2 + i];
        h = 10;
    }
    if (client.len < h + n)
        return false;
    ck_assert_msg(p[0] & 0x80, "a fragmented server frame");
    f->opcode = p[0] & 0x0f;
    f->data = malloc(n + 1);
    memcpy(f->data, p + h, n);
    f->data[n] = '\0';
    f->len = n;
    memmove(client.data, client.data + h + n, client.len - h - n);
    client.len -= h + n;
    return true;
}

typedef struct {
    frame_t *f;
    bool done;
} want_frame_t;

static bool got_frame(void *arg)
{
    want_frame_t *w = arg;

    if (!w->done)
        w->done = take_frame(w->f);
    return w->done || client.eof;
}

/* Run the loop until a whole frame arrived; take it. */
static void frame(frame_t *f)
{
    want_frame_t w = {f, false};

    ck_assert_msg(h_run_until(&pump, got_frame, &w) && w.done,
                  "no frame (eof %d)", client.eof);
}

/* The next frame must be a close with CODE and REASON. */
static void expect_close(unsigned code, const char *reason)
{
    frame_t f;

    frame(&f);
    ck_assert_int_eq(f.opcode, 0x8);
    ck_assert_uint_ge(f.len, 2);
    ck_assert_uint_eq((unsigned)((uint8_t)f.data[0] << 8 | (uint8_t)f.data[1]),
                      code);
    ck_assert_str_eq(f.data + 2, reason);
    free(f.data);
}

/* A client close frame with CODE and REASON. */
static void send_close(unsigned code, const char *reason)
{
    char b[128];
    size_t n = strlen(reason);

    b[0] = (char)(code >> 8);
    b[1] = (char)code;
    memcpy(b + 2, reason, n);
    send_frame(0x8, b, n + 2);
}

/* ------------------------------------------------------------------ */

START_TEST(test_echo)
{
    frame_t f;
    const uint8_t bin[] = {0, 1, 2, 255};

    up();
    handshake("/echo", "Sec-WebSocket-Protocol: chat, other\r\n");
    ck_assert_int_eq(resp.status, 101);
    ck_assert_str_eq(hdr("Sec-WebSocket-Accept"), ACCEPT);
    ck_assert_str_eq(hdr("Sec-WebSocket-Protocol"), "chat");
    ck_assert_str_eq(hdr("X-State"), "v"); /* the lifespan state */
    send_frame(0x1, "h\xc3\xa9llo", 6);
    frame(&f);
    ck_assert_int_eq(f.opcode, 0x1);
    ck_assert_str_eq(f.data, "h\xc3\xa9llo");
    free(f.data);
    send_frame(0x2, bin, sizeof(bin));
    frame(&f);
    ck_assert_int_eq(f.opcode, 0x2);
    ck_assert_uint_eq(f.len, 4);
    ck_assert(memcmp(f.data, bin, 4) == 0);
    free(f.data);
    send_close(4000, "bye");
    expect_close(4000, ""); /* the loop echoes the code alone */
    ck_assert(until_app("state['end']", "(4000, 'bye')"));
    ck_assert_str_eq(app_eval("state['types']"),
                     "['websocket.connect', 'websocket.receive', "
                     "'websocket.receive', 'websocket.disconnect']");
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert(!log_has("[ERROR]"));
}
END_TEST

/* A client that leaves without a close frame: 1006 for the app. */
START_TEST(test_client_vanishes)
{
    up();
    handshake("/echo", "");
    ck_assert_int_eq(resp.status, 101);
    ck_assert(until_app("state['types']", "['websocket.connect']"));
    h_client_close(&client);
    ck_assert(until_app("state['end']", "(1006, '')"));
}
END_TEST

START_TEST(test_close_before_accept_is_403)
{
    up();
    handshake("/refuse", "");
    ck_assert_int_eq(resp.status, 403);
    ck_assert_str_eq(hdr("Connection"), "close");
    ck_assert_ptr_null(hdr("Sec-WebSocket-Accept"));
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

START_TEST(test_denial_response)
{
    up();
    handshake("/deny", "");
    ck_assert_int_eq(resp.status, 401);
    ck_assert_str_eq(hdr("X-Why"), "token");
    ck_assert_str_eq(hdr("Connection"), "close");
    ck_assert_str_eq(resp.body, "go away");
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

/* A wrong field type after the accept: TypeError in the app, close 1011
 * for the client, the error logged once. */
START_TEST(test_misuse_after_accept)
{
    const char *log;

    up();
    handshake("/misuse", "");
    ck_assert_int_eq(resp.status, 101);
    expect_close(1011, "");
    ck_assert(until_app("state['error']",
                        "ASGI: websocket.send: 'text' must be str, not int"));
    ck_assert(h_run_until(&pump, log_has, "error in WebSocket GET /misuse"));
    log = hp_log_text();
    ck_assert_ptr_null(
        strstr(strstr(log, "error in WebSocket") + 1, "error in WebSocket"));
}
END_TEST

/* A send before the accept: RuntimeError, and a 500 since nothing went
 * out; the app that catches it is still logged (once). */
START_TEST(test_send_before_accept)
{
    up();
    handshake("/early", "");
    ck_assert_int_eq(resp.status, 500);
    ck_assert(until_app("state['error']",
                        "ASGI: websocket.send before websocket.accept "
                        "(GET /early)"));
    ck_assert(h_run_until(&pump, log_has, "(the app went on)"));
}
END_TEST

START_TEST(test_return_without_close_is_1000)
{
    frame_t f;

    up();
    handshake("/done", "");
    frame(&f);
    ck_assert_str_eq(f.data, "last");
    free(f.data);
    expect_close(1000, "");
    send_close(1000, "");
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

START_TEST(test_close_with_code_and_reason)
{
    up();
    handshake("/closing", "");
    expect_close(4002, "see you");
}
END_TEST

/* Far more than the credit to a client that reads nothing: send()
 * suspends the app; once the client reads, every message arrives. */
START_TEST(test_send_waits_for_credit)
{
    enum { BLOCK = 64 * 1024, BLOCKS = 64 };
    frame_t f;
    char want[BLOCK];
    int i;

    ck_assert_int_gt((long)BLOCK * BLOCKS, 8 * SL_CONN_CREDIT);
    up();
    handshake("/flood", "");
    ck_assert(until_app("state['suspended'] > 0", "True"));
    ck_assert_str_ne(app_eval("state['sent']"), "64");
    for (i = 0; i < BLOCKS; i++) {
        frame(&f);
        memset(want, 'A' + i % 26, sizeof(want));
        ck_assert_uint_eq(f.len, BLOCK);
        ck_assert_msg(memcmp(f.data, want, BLOCK) == 0, "block %d", i);
        free(f.data);
    }
    expect_close(1000, "");
    ck_assert(until_app("state['sent']", "64"));
}
END_TEST

/* After the client's close, receive() says so and send() raises an
 * OSError (sluice.ClientDisconnected). */
START_TEST(test_send_after_client_left)
{
    up();
    handshake("/left", "");
    ck_assert_int_eq(resp.status, 101);
    send_close(1001, "away");
    ck_assert(until_app("state['error']", "ClientDisconnected"));
    ck_assert_str_eq(app_eval("state['end']"), "(1001, 'away')");
    expect_close(1001, "");
    ck_assert(!log_has("[ERROR]"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* inline mode                                                        */

/* Inline, the test thread runs the event loop, so the client is a thread:
 * the handshake, one text frame (built beforehand: no check asserts off
 * the test thread), its echo, then the drain as the supervisor asks for
 * it (SIGTERM), and the close frame it brings. It records; the test
 * thread asserts. */
typedef struct {
    struct sockaddr_in to;
    sl_buf_t frame; /* the client's text frame */
    char got[1024];
    size_t len;
    int err;
} inline_client_t;

/* Read until GOT holds N bytes after the handshake's head (or fail). */
static bool read_more(int fd, inline_client_t *ic, size_t n)
{
    while (ic->len < n) {
        ssize_t k =
            recv(fd, ic->got + ic->len, sizeof(ic->got) - 1 - ic->len, 0);
        if (k <= 0) {
            ic->err = k == 0 ? EPIPE : errno;
            return false;
        }
        ic->len += (size_t)k;
        ic->got[ic->len] = '\0';
    }
    return true;
}

static void *inline_client(void *arg)
{
    static const char hs[] = "GET /echo HTTP/1.1\r\nHost: h\r\n"
                             "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                             "Sec-WebSocket-Key: " KEY "\r\n"
                             "Sec-WebSocket-Version: 13\r\n\r\n";
    inline_client_t *ic = arg;
    struct timeval tv = {.tv_sec = 5};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const char *end = NULL;

    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
        connect(fd, (struct sockaddr *)&ic->to, sizeof(ic->to)) < 0 ||
        send(fd, hs, sizeof(hs) - 1, MSG_NOSIGNAL) < 0) {
        ic->err = errno;
        goto out;
    }
    while (end == NULL && read_more(fd, ic, ic->len + 1))
        end = strstr(ic->got, "\r\n\r\n");
    if (end == NULL)
        goto out;
    if (send(fd, ic->frame.data, ic->frame.len, MSG_NOSIGNAL) < 0) {
        ic->err = errno;
        goto out;
    }
    /* the echo: 2 + 4 bytes */
    if (!read_more(fd, ic, (size_t)(end + 4 - ic->got) + 6))
        goto out;
    kill(getpid(), SIGTERM);
    read_more(fd, ic, (size_t)(end + 4 - ic->got) + 6 + 4); /* close 1001 */
out:
    if (fd >= 0)
        close(fd);
    kill(getpid(), SIGTERM); /* drain, whatever happened */
    return NULL;
}

/* Inline: the handshake, a message both ways, and the drain's close 1001,
 * which the app's receive() reports. */
START_TEST(test_inline_echo_and_drain)
{
    static const uint8_t want[] = {0x81, 4,    'p', 'i',  'n',
                                   'g',  0x88, 2,   0x03, 0xe9};
    inline_client_t ic = {0};
    socklen_t len = sizeof(ic.to);
    pthread_t th;
    const char *body;
    PyObject *app;

    h_options(&opt, "--ws-per-message-deflate", "false", NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    hp_module("testapp", APP);
    app = sl_py_load_app(&opt);
    hp_check(app, "load the app");
    ck_assert_int_eq(sl_asgi_lifespan_init(), 0);
    h_exec = &sl_asgi_inline_exec.ops;
    h_pump_up(&pump, &opt);
    ck_assert_int_eq(sl_asgi_init(app, &pump), 0);
    Py_DECREF(app);
    ck_assert_int_eq(sl_asgi_start(&pump), 0);
    wf_frame(&ic.frame, 0x81, "ping", 4, 0);
    ck_assert_int_eq(
        getsockname(pump.listeners[0].fd, (struct sockaddr *)&ic.to, &len), 0);
    ck_assert_int_eq(pthread_create(&th, NULL, inline_client, &ic), 0);
    ck_assert_int_eq(sl_asgi_run_inline(&pump), SL_EXIT_OK);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    sl_buf_free(&ic.frame);
    ck_assert_msg(ic.err == 0, "client: %s (got: %s)", strerror(ic.err),
                  ic.got);
    ck_assert(strncmp(ic.got, "HTTP/1.1 101 ", 13) == 0);
    body = strstr(ic.got, "\r\n\r\n") + 4;
    ck_assert_uint_eq(ic.len - (size_t)(body - ic.got), sizeof(want));
    ck_assert(memcmp(body, want, sizeof(want)) == 0);
    ck_assert_str_eq(hp_eval("testapp", "state['end']"), "(1001, '')");
    ck_assert_int_eq(pump.exec->stop(&pump, 2.0), 0);
    pump.exec = NULL; /* stopped: the teardown must not again */
}
END_TEST

static Suite *asgi_ws_suite(void)
{
    Suite *s = suite_create("asgi_ws");
    TCase *tc = tcase_create("websocket");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_echo);
    tcase_add_test(tc, test_client_vanishes);
    tcase_add_test(tc, test_close_before_accept_is_403);
    tcase_add_test(tc, test_denial_response);
    tcase_add_test(tc, test_misuse_after_accept);
    tcase_add_test(tc, test_send_before_accept);
    tcase_add_test(tc, test_return_without_close_is_1000);
    tcase_add_test(tc, test_close_with_code_and_reason);
    tcase_add_test(tc, test_send_waits_for_credit);
    tcase_add_test(tc, test_send_after_client_left);
    suite_add_tcase(s, tc);

    tc = tcase_create("inline");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_inline_echo_and_drain);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(asgi_ws_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
