/* test_wsgi_input.c - check suite for worker/wsgi_input.c.
 *
 * The app (APP below) reads wsgi.input the way its route says and answers
 * with what it read. The pump runs in inline mode, so a read that needs
 * more bytes reads the socket itself: the test sends the body before the
 * app runs, or from a second thread when the point is that the app waits.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>

#include "tests/unit/py_harness.h"
#include "worker/python/lane.h"
#include "worker/python/wsgi.h"
#include "worker/python/wsgi_input.h"

static const char APP[] =
    "import hashlib\n"
    "state = {}\n"
    "\n"
    "def read_all(i):\n"
    "    return i.read()\n"
    "\n"
    "def read_none(i):\n"
    "    return i.read(None)\n"
    "\n"
    "def read_neg(i):\n"
    "    return i.read(-1)\n"
    "\n"
    "def read_pieces(i):\n"
    "    out = []\n"
    "    out.append(i.read(0))\n"
    "    out.append(i.read(3))\n"
    "    out.append(i.read(4))\n"
    "    out.append(i.read(100))\n"
    "    out.append(i.read(5))\n"
    "    out.append(i.read())\n"
    "    return b'|'.join(out)\n"
    "\n"
    "def readline(i):\n"
    "    out = []\n"
    "    while True:\n"
    "        line = i.readline()\n"
    "        out.append(line)\n"
    "        if not line:\n"
    "            break\n"
    "    return b'|'.join(out)\n"
    "\n"
    "def readline_size(i):\n"
    "    return b'|'.join([i.readline(2), i.readline(2), i.readline(100),\n"
    "                      i.readline(-1), i.readline(None)])\n"
    "\n"
    "def readlines(i):\n"
    "    return b'|'.join(i.readlines())\n"
    "\n"
    "def readlines_hint(i):\n"
    "    first = i.readlines(3)\n"
    "    return b'|'.join(first) + b'/' + b'|'.join(i.readlines())\n"
    "\n"
    "def iterate(i):\n"
    "    return b'|'.join(line for line in i)\n"
    "\n"
    "def digest(i):\n"
    "    data = i.read()\n"
    "    return b'%d %s' % (len(data), "
    "hashlib.sha1(data).hexdigest().encode())\n"
    "\n"
    "def digest_lines(i):\n"
    "    h, n = hashlib.sha1(), 0\n"
    "    for line in i:\n"
    "        h.update(line)\n"
    "        n += len(line)\n"
    "    return b'%d %s' % (n, h.hexdigest().encode())\n"
    "\n"
    "def bad_args(i):\n"
    "    out = []\n"
    "    for call in (lambda: i.read('x'), lambda: i.read(1, 2),\n"
    "                 lambda: i.readline('x'), lambda: i.readlines(1, 2)):\n"
    "        try:\n"
    "            call()\n"
    "            out.append(b'ok')\n"
    "        except TypeError:\n"
    "            out.append(b'TypeError')\n"
    "    return b'|'.join(out)\n"
    "\n"
    "def keep(i):\n"
    "    state['input'] = i\n"
    "    return b'kept'\n"
    "\n"
    "def stale(i):\n"
    "    try:\n"
    "        return b'read: ' + state['input'].read()\n"
    "    except OSError as ex:\n"
    "        return type(ex).__name__.encode()\n"
    "\n"
    "def gone(i):\n"
    "    try:\n"
    "        state['gone'] = i.read()\n"
    "    except OSError as ex:\n"
    "        state['gone'] = type(ex).__name__\n"
    "    return b'x'\n"
    "\n"
    "def app(e, sr):\n"
    "    name = e['PATH_INFO'].strip('/')\n"
    "    body = globals()[name](e['wsgi.input'])\n"
    "    sr('200 OK', [('Content-Type', 'application/octet-stream')])\n"
    "    return [body]\n";

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;
static sl_wsgi_lane_t *lane;

static sl_exec_t inline_exec; /* WSGI inline's, running on our lane */

static void run_inline(sl_exch_t *x)
{
    sl_wsgi_handle(lane, x, x->gen);
}

static void setup(void)
{
    PyObject *app;

    client.fd = -1;
    hp_log_to_file();
    h_options(&opt, NULL);
    ck_assert_int_eq(sl_py_init(&opt), 0);
    hp_module("testapp", APP);
    app = sl_py_load_app(&opt);
    hp_check(app, "load the app");
    inline_exec = sl_lane_inline_exec;
    inline_exec.run = run_inline; /* this suite's own lane */
    h_exec = &inline_exec;
    h_pump_up(&pump, &opt);
    ck_assert_int_eq(sl_wsgi_init(app, &pump), 0);
    Py_DECREF(app);
    lane = sl_wsgi_lane_new();
    ck_assert_ptr_nonnull(lane);
    h_connect(&pump, &client);
}

static void teardown(void)
{
    h_resp_free(&resp);
    h_client_close(&client);
}

/* POST BODY (N bytes) with a Content-Length to ROUTE; answer in resp. */
static void post(const char *route, const char *body, size_t n)
{
    char head[256];

    snprintf(head, sizeof(head),
             "POST /%s HTTP/1.1\r\nHost: h\r\nContent-Length: %zu\r\n\r\n",
             route, n);
    h_sends(&client, head);
    h_send(&client, body, n);
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_msg(resp.status == 200, "%s: status %d", route, resp.status);
}

/* The same body, chunked in pieces of at most PIECE bytes. */
static void post_chunked(const char *route, const char *body, size_t n,
                         size_t piece)
{
    char head[256], size[32];

    snprintf(head, sizeof(head),
             "POST /%s HTTP/1.1\r\nHost: h\r\n"
             "Transfer-Encoding: chunked\r\n\r\n",
             route);
    h_sends(&client, head);
    for (size_t at = 0; at < n; at += piece) {
        size_t k = n - at < piece ? n - at : piece;
        snprintf(size, sizeof(size), "%zx\r\n", k);
        h_sends(&client, size);
        h_send(&client, body + at, k);
        h_sends(&client, "\r\n");
    }
    h_sends(&client, "0\r\n\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_msg(resp.status == 200, "%s: status %d", route, resp.status);
}

static const char LINES[] = "one\ntwo\n\nthree";

START_TEST(test_read_all)
{
    post("read_all", "hello body", 10);
    ck_assert_str_eq(resp.body, "hello body");
    post("read_none", "hello body", 10);
    ck_assert_str_eq(resp.body, "hello body");
    post("read_neg", "hello body", 10);
    ck_assert_str_eq(resp.body, "hello body");
}
END_TEST

START_TEST(test_read_empty_body)
{
    post("read_all", "", 0);
    ck_assert_str_eq(resp.body, "");
    h_sends(&client, "GET /read_pieces HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_str_eq(resp.body, "|||||");
}
END_TEST

/* read(n) never returns more than n, nor anything past the body. */
START_TEST(test_read_pieces)
{
    post("read_pieces", "0123456789abc", 13);
    ck_assert_str_eq(resp.body, "|012|3456|789abc||");
}
END_TEST

START_TEST(test_readline)
{
    post("readline", LINES, strlen(LINES));
    ck_assert_str_eq(resp.body, "one\n|two\n|\n|three|");
}
END_TEST

START_TEST(test_readline_size)
{
    post("readline_size", LINES, strlen(LINES));
    ck_assert_str_eq(resp.body, "on|e\n|two\n|\n|three");
}
END_TEST

START_TEST(test_readlines)
{
    post("readlines", LINES, strlen(LINES));
    ck_assert_str_eq(resp.body, "one\n|two\n|\n|three");
}
END_TEST

START_TEST(test_readlines_hint)
{
    post("readlines_hint", LINES, strlen(LINES));
    ck_assert_str_eq(resp.body, "one\n/two\n|\n|three");
}
END_TEST

START_TEST(test_iteration)
{
    post("iterate", LINES, strlen(LINES));
    ck_assert_str_eq(resp.body, "one\n|two\n|\n|three");
}
END_TEST

START_TEST(test_chunked_body)
{
    post_chunked("read_all", "a chunked request body", 22, 5);
    ck_assert_str_eq(resp.body, "a chunked request body");
    post_chunked("readline", LINES, strlen(LINES), 2);
    ck_assert_str_eq(resp.body, "one\n|two\n|\n|three|");
}
END_TEST

START_TEST(test_bad_arguments)
{
    post("bad_args", "x", 1);
    ck_assert_str_eq(resp.body, "TypeError|TypeError|TypeError|TypeError");
}
END_TEST

/* An input object kept past its request reads nothing of the next. */
START_TEST(test_stale_input)
{
    post("keep", "first body", 10);
    ck_assert_str_eq(resp.body, "kept");
    post("stale", "second body", 11);
    ck_assert_str_eq(resp.body, "OSError");
}
END_TEST

/* The client went away before the body was all there. */
START_TEST(test_client_gone)
{
    h_sends(&client, "POST /gone HTTP/1.1\r\nHost: h\r\n"
                     "Content-Length: 100\r\n\r\nonly ten..");
    ck_assert_int_eq(shutdown(client.fd, SHUT_WR), 0);
    ck_assert(h_wait_eof(&pump, &client));
    ck_assert_str_eq(hp_eval("testapp", "state['gone']"), "OSError");
}
END_TEST

/* ------------------------------------------------------------------ */
/* bodies that arrive while the app reads                             */

typedef struct {
    int fd;
    const char *head;
    const char *body;
    size_t n;
    bool wait_continue; /* send the body only after "100 Continue" */
    bool got_continue;
} sender_t;

static void *send_body(void *arg)
{
    sender_t *s = arg;
    char buf[64];

    if (send(s->fd, s->head, strlen(s->head), MSG_NOSIGNAL) < 0)
        return NULL;
    if (s->wait_continue) {
        ssize_t k = recv(s->fd, buf, 25, MSG_WAITALL);
        s->got_continue =
            k == 25 && memcmp(buf, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0;
        if (!s->got_continue)
            return NULL;
    }
    for (size_t at = 0; at < s->n;) {
        ssize_t w = send(s->fd, s->body + at, s->n - at, MSG_NOSIGNAL);
        if (w <= 0)
            return NULL;
        at += (size_t)w;
    }
    return NULL;
}

/* A body much larger than the socket buffers, read with read() while it
 * is still being sent: every byte, in order. */
START_TEST(test_large_body_streams_in)
{
    enum { SIZE = 3 * 1024 * 1024 + 17 };
    static char body[SIZE], head[128];
    sender_t s = {.fd = client.fd, .head = head, .body = body, .n = SIZE};
    pthread_t th;

    for (size_t i = 0; i < SIZE; i++)
        body[i] = (char)(i * 7 + i / 251);
    snprintf(head, sizeof(head),
             "POST /digest HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n",
             SIZE);
    ck_assert_int_eq(pthread_create(&th, NULL, send_body, &s), 0);
    ck_assert(h_response(&pump, &client, &resp, false));
    pthread_join(th, NULL);
    hp_module("want", "import hashlib\n"
                      "b = bytes((i * 7 + i // 251) & 255 for i in range(3 * "
                      "1024 * 1024 + 17))\n"
                      "d = '%d %s' % (len(b), hashlib.sha1(b).hexdigest())\n");
    ck_assert_str_eq(resp.body, hp_eval("want", "d"));
}
END_TEST

/* The same body, line by line as it arrives. */
START_TEST(test_large_body_by_lines)
{
    enum { SIZE = 1024 * 1024 };
    static char body[SIZE], head[128];
    sender_t s = {.fd = client.fd, .head = head, .body = body, .n = SIZE};
    pthread_t th;

    for (size_t i = 0; i < SIZE; i++)
        body[i] = i % 61 == 60 ? '\n' : (char)('a' + i % 26);
    snprintf(head, sizeof(head),
             "POST /digest_lines HTTP/1.1\r\nHost: h\r\n"
             "Content-Length: %d\r\n\r\n",
             SIZE);
    ck_assert_int_eq(pthread_create(&th, NULL, send_body, &s), 0);
    ck_assert(h_response(&pump, &client, &resp, false));
    pthread_join(th, NULL);
    hp_module("want", "import hashlib\n"
                      "b = bytes(10 if i % 61 == 60 else 97 + i % 26\n"
                      "          for i in range(1024 * 1024))\n"
                      "d = '%d %s' % (len(b), hashlib.sha1(b).hexdigest())\n");
    ck_assert_str_eq(resp.body, hp_eval("want", "d"));
}
END_TEST

/* Expect: 100-continue in inline mode: the interim response leaves before
 * the app blocks reading the body the client holds back until then. */
START_TEST(test_expect_continue)
{
    sender_t s = {.fd = client.fd,
                  .head = "POST /read_all HTTP/1.1\r\nHost: h\r\n"
                          "Content-Length: 9\r\nExpect: 100-continue\r\n\r\n",
                  .body = "continued",
                  .n = 9,
                  .wait_continue = true};
    pthread_t th;

    ck_assert_int_eq(pthread_create(&th, NULL, send_body, &s), 0);
    ck_assert(h_response(&pump, &client, &resp, false));
    pthread_join(th, NULL);
    ck_assert(s.got_continue);
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "continued");
}
END_TEST

static Suite *wsgi_input_suite(void)
{
    Suite *s = suite_create("wsgi_input");
    TCase *tc = tcase_create("read");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_read_all);
    tcase_add_test(tc, test_read_empty_body);
    tcase_add_test(tc, test_read_pieces);
    tcase_add_test(tc, test_readline);
    tcase_add_test(tc, test_readline_size);
    tcase_add_test(tc, test_readlines);
    tcase_add_test(tc, test_readlines_hint);
    tcase_add_test(tc, test_iteration);
    tcase_add_test(tc, test_chunked_body);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_stale_input);
    tcase_add_test(tc, test_client_gone);
    suite_add_tcase(s, tc);

    tc = tcase_create("streaming");
    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_large_body_streams_in);
    tcase_add_test(tc, test_large_body_by_lines);
    tcase_add_test(tc, test_expect_continue);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wsgi_input_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
