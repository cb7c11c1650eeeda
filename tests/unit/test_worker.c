/* test_worker.c - check suite for worker/worker.c, a worker's whole life.
 *
 * sl_worker_main() runs in a child process, exactly as the supervisor's
 * exec'd worker would run it: a listening socket, a SOCK_SEQPACKET control
 * channel, an app in a module file on --pythonpath, the log in a file. The
 * test plays the supervisor (it reads READY, HEARTBEAT, RETIRE, DRAINING,
 * sends signals, closes the channel) and the client. The child dies with
 * the test (PR_SET_PDEATHSIG) and teardown reaps it, so a failing test
 * leaves no process behind.
 */
#include "config.h"

#include <check.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/ctl.h"
#include "tests/unit/harness.h"
#include "worker/worker.h"

static const char APP[] =
    "import time\n"
    "\n"
    "def app(e, sr):\n"
    "    path = e['PATH_INFO']\n"
    "    if path == '/sleepy':\n"
    "        with open(e['QUERY_STRING'], 'w') as fifo:\n"
    "            fifo.write('in the app')\n" /* tell the test */
    "        time.sleep(0.5)\n"
    "        sr('200 OK', [])\n"
    "        return [b'slept']\n"
    "    if path == '/slow':\n"
    "        sr('200 OK', [])\n"
    "        return slow()\n"
    "    sr('200 OK', [('Content-Type', 'text/plain')])\n"
    "    return [b'hello from ' + path.encode()]\n"
    "\n"
    "def slow():\n"
    "    yield b'started;'\n"
    "    time.sleep(0.5)\n" /* the app's own pace, not the test's */
    "    yield b'finished'\n";

static const char ASGI_APP[] =
    "async def app(scope, receive, send):\n"
    "    if scope['type'] == 'lifespan':\n"
    "        while True:\n"
    "            m = await receive()\n"
    "            if m['type'] == 'lifespan.startup':\n"
    "                await send({'type': 'lifespan.startup.complete'})\n"
    "            elif m['type'] == 'lifespan.shutdown':\n"
    "                await send({'type': 'lifespan.shutdown.complete'})\n"
    "                return\n"
    "    await send({'type': 'http.response.start', 'status': 200,\n"
    "                'headers': [(b'content-type', b'text/plain')]})\n"
    "    await send({'type': 'http.response.body', 'body': b'asgi'})\n";

#define DEADLINE_MS 3000

static sl_options_t opt;
static char dir[96], logpath[128];
static pid_t child = -1;
static int ctl = -1; /* the supervisor's end */
static int lfd = -1;
static h_client_t client;
static h_resp_t resp;

static void put_file(const char *name, const char *text)
{
    char path[256];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void setup(void)
{
    client.fd = -1;
    snprintf(dir, sizeof(dir), "%s", h_test_dir());
    snprintf(logpath, sizeof(logpath), "%s/error.log", dir);
    put_file("wapp.py", APP);
    put_file("aapp.py", ASGI_APP);
    put_file("broken.py", "import nonexistent_module_xyz\n");
    unsetenv("SLUICE_INLINE");
}

static void teardown(void)
{
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        child = -1;
    }
    h_resp_free(&resp);
    h_client_close(&client);
}

static const char *log_text(void)
{
    static char buf[1 << 16];
    FILE *f = fopen(logpath, "r");
    size_t n = 0;

    if (f != NULL) {
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

/* Start a worker for "sluice --pythonpath DIR ARGS... APP". */
static void start(const char *app, ...)
{
    static char *argv[32];
    int argc = 0, pair[2];
    va_list ap;

    argv[argc++] = "sluice";
    argv[argc++] = "--pythonpath";
    argv[argc++] = dir;
    va_start(ap, app);
    for (char *a; (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc++] = (char *)app;
    argv[argc] = NULL;
    ck_assert_int_eq(sl_options_parse(&opt, argc, argv), 0);
    lfd = h_listen();
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair), 0);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(pair[1]);
        if (sl_log_open(logpath) < 0)
            _exit(99);
        _exit(sl_worker_main(&opt, &lfd, 1, NULL, 0, 7, pair[0]));
    }
    close(pair[0]);
    ctl = pair[1];
}

/* The next control message: 1, or 0 on EOF (the worker is gone). */
static int next_msg(sl_ctl_msg_t *m)
{
    struct pollfd pfd = {.fd = ctl, .events = POLLIN};
    ssize_t n;

    ck_assert_msg(poll(&pfd, 1, DEADLINE_MS) == 1, "no control message");
    n = recv(ctl, m, sizeof(*m), 0);
    ck_assert_int_ge(n, 0);
    if (n == 0)
        return 0;
    ck_assert_int_eq(n, sizeof(*m));
    return 1;
}

/* Skip heartbeats until a message of TYPE comes. */
static void expect_msg(uint32_t type, sl_ctl_msg_t *m)
{
    do {
        ck_assert_msg(next_msg(m) == 1, "EOF waiting for message %u: %s", type,
                      log_text());
    } while (m->type == SL_CTL_HEARTBEAT && type != SL_CTL_HEARTBEAT);
    ck_assert_uint_eq(m->type, type);
}

/* Wait for the worker to exit (EOF on the channel first); its status. */
static int exit_status(void)
{
    sl_ctl_msg_t m;
    int st;

    while (next_msg(&m) == 1)
        ;
    ck_assert_int_eq(waitpid(child, &st, 0), child);
    child = -1;
    ck_assert_msg(WIFEXITED(st), "worker died of signal %d",
                  WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return WEXITSTATUS(st);
}

static void connect_client(void)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    memset(&client, 0, sizeof(client));
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
    client.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(client.fd, 0);
    ck_assert_int_eq(connect(client.fd, (struct sockaddr *)&sin, len), 0);
}

/* Read until a whole response is in resp. */
static void read_response(void)
{
    struct pollfd pfd = {.fd = client.fd, .events = POLLIN};

    while (!h_take_response(&client, &resp, false)) {
        ck_assert_msg(!client.eof, "connection closed mid-response: %s",
                      client.data ? client.data : "");
        ck_assert_msg(poll(&pfd, 1, DEADLINE_MS) == 1, "no response");
    }
}

/* Wait until the client has at least N bytes. */
static void read_bytes(size_t n)
{
    struct pollfd pfd = {.fd = client.fd, .events = POLLIN};

    for (h_pull(&client); client.len < n && !client.eof; h_pull(&client))
        ck_assert_msg(poll(&pfd, 1, DEADLINE_MS) == 1, "no bytes");
}

static void get(const char *path)
{
    char raw[256];

    snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", path);
    h_sends(&client, raw);
    read_response();
}

/* ------------------------------------------------------------------ */

/* READY, requests, heartbeats, TERM: DRAINING and a clean exit. */
static void serve_and_stop(const char *mode)
{
    sl_ctl_msg_t m;
    char line[128];

    expect_msg(SL_CTL_READY, &m);
    ck_assert_uint_eq(m.pid, (uint32_t)child);
    connect_client();
    get("/one");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "hello from /one");
    get("/two");
    ck_assert_str_eq(resp.body, "hello from /two");
    expect_msg(SL_CTL_HEARTBEAT, &m);
    ck_assert_uint_eq(m.pid, (uint32_t)child);
    ck_assert_int_eq(kill(child, SIGTERM), 0);
    expect_msg(SL_CTL_DRAINING, &m);
    ck_assert(m.served == 2);
    ck_assert_int_eq(exit_status(), SL_EXIT_OK);
    snprintf(line, sizeof(line), "worker 7 serving wapp:app (%s", mode);
    ck_assert_msg(strstr(log_text(), line) != NULL, "'%s' not in %s", line,
                  log_text());
    ck_assert_ptr_nonnull(strstr(log_text(), "worker 7 exiting (status 0)"));
}

START_TEST(test_pump_mode)
{
    start("wapp:app", "--threads", "2", NULL);
    serve_and_stop("pump mode, 2 lanes");
}
END_TEST

START_TEST(test_inline_mode)
{
    setenv("SLUICE_INLINE", "1", 1);
    start("wapp:app", NULL);
    ck_assert(opt.inline_mode);
    serve_and_stop("inline mode, 1 lane");
}
END_TEST

START_TEST(test_asgi_app)
{
    sl_ctl_msg_t m;

    start("aapp:app", NULL);
    expect_msg(SL_CTL_READY, &m);
    connect_client();
    get("/");
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "asgi");
    ck_assert_int_eq(kill(child, SIGTERM), 0);
    ck_assert_int_eq(exit_status(), SL_EXIT_OK);
}
END_TEST

/* An app that cannot be imported: no READY, the distinct exit status, and
 * one clear line saying why. */
static const struct {
    const char *spec;
    const char *line;
} bad_apps[] = {
    {"broken:app", "cannot import module 'broken': ModuleNotFoundError"},
    {"wapp:nope", "module 'wapp' has no attribute 'nope'"},
    {"absent:app", "cannot import module 'absent'"},
};

START_TEST(test_app_load_failure)
{
    sl_ctl_msg_t m;

    start(bad_apps[_i].spec, NULL);
    ck_assert_int_eq(next_msg(&m), 0);
    ck_assert_int_eq(exit_status(), SL_EXIT_APPLOAD);
    ck_assert_msg(strstr(log_text(), bad_apps[_i].line) != NULL,
                  "'%s' not in %s", bad_apps[_i].line, log_text());
}
END_TEST

START_TEST(test_bad_chdir)
{
    sl_ctl_msg_t m;

    start("wapp:app", "--chdir", "/nonexistent/dir", NULL);
    ck_assert_int_eq(next_msg(&m), 0);
    ck_assert_int_eq(exit_status(), SL_EXIT_APPLOAD);
    ck_assert_ptr_nonnull(strstr(log_text(), "chdir(/nonexistent/dir)"));
}
END_TEST

/* The supervisor is gone (EOF on the channel): drain, exit. */
START_TEST(test_supervisor_gone)
{
    sl_ctl_msg_t m;
    int st;

    start("wapp:app", NULL);
    expect_msg(SL_CTL_READY, &m);
    connect_client();
    get("/before");
    ck_assert_int_eq(shutdown(ctl, SHUT_RDWR), 0);
    ck_assert_int_eq(waitpid(child, &st, 0), child);
    child = -1;
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), SL_EXIT_OK);
    ck_assert_ptr_nonnull(strstr(log_text(), "supervisor gone"));
}
END_TEST

START_TEST(test_retire_after_max_requests)
{
    sl_ctl_msg_t m;

    start("wapp:app", "--max-requests", "2", NULL);
    expect_msg(SL_CTL_READY, &m);
    connect_client();
    get("/1");
    get("/2");
    expect_msg(SL_CTL_RETIRE, &m);
    ck_assert(m.served == 2);
    /* it goes on serving until the supervisor's TERM */
    get("/3");
    ck_assert_str_eq(resp.body, "hello from /3");
    ck_assert_int_eq(kill(child, SIGTERM), 0);
    ck_assert_int_eq(exit_status(), SL_EXIT_OK);
}
END_TEST

/* TERM while a response streams: it is finished, the connection closes
 * after it, and the worker exits clean. */
START_TEST(test_term_waits_for_request)
{
    sl_ctl_msg_t m;

    start("wapp:app", "--graceful-timeout", "3", NULL);
    expect_msg(SL_CTL_READY, &m);
    connect_client();
    h_sends(&client, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n");
    read_bytes(1);
    ck_assert_ptr_nonnull(strstr(client.data, "started;"));
    ck_assert_int_eq(kill(child, SIGTERM), 0);
    read_response();
    ck_assert_str_eq(resp.body, "started;finished");
    read_bytes(SIZE_MAX);
    ck_assert(client.eof);
    ck_assert_int_eq(exit_status(), SL_EXIT_OK);
}
END_TEST

/* TERM while the app works on a request whose head is not out yet: the
 * answer says it is the last on its connection. */
START_TEST(test_term_response_says_close)
{
    sl_ctl_msg_t m;
    char fifo[128], raw[256], v[32], buf[32];
    struct pollfd pfd = {.events = POLLIN};

    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    pfd.fd = open(fifo, O_RDONLY | O_NONBLOCK);
    ck_assert_int_ge(pfd.fd, 0);
    start("wapp:app", "--graceful-timeout", "3", NULL);
    expect_msg(SL_CTL_READY, &m);
    connect_client();
    snprintf(raw, sizeof(raw), "GET /sleepy?%s HTTP/1.1\r\nHost: h\r\n\r\n",
             fifo);
    h_sends(&client, raw);
    ck_assert_int_eq(poll(&pfd, 1, DEADLINE_MS), 1);
    ck_assert_int_gt(read(pfd.fd, buf, sizeof(buf)), 0);
    close(pfd.fd);
    ck_assert_int_eq(kill(child, SIGTERM), 0);
    read_response();
    ck_assert_str_eq(resp.body, "slept");
    ck_assert_str_eq(h_header(resp.head, "Connection", v, sizeof(v)), "close");
    ck_assert_int_eq(exit_status(), SL_EXIT_OK);
}
END_TEST

/* INT with a request in flight: everything closes now, status 1. */
START_TEST(test_int_stops_fast)
{
    sl_ctl_msg_t m;

    start("wapp:app", NULL);
    expect_msg(SL_CTL_READY, &m);
    connect_client();
    h_sends(&client, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n");
    read_bytes(1);
    ck_assert_int_eq(kill(child, SIGINT), 0);
    ck_assert_int_eq(exit_status(), SL_EXIT_FAIL);
    h_pull(&client);
    ck_assert_ptr_null(strstr(client.data, "finished"));
}
END_TEST

static Suite *worker_suite(void)
{
    Suite *s = suite_create("worker");
    TCase *tc = tcase_create("worker");

    tcase_add_unchecked_fixture(tc, h_dir_make, h_dir_remove);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_pump_mode);
    tcase_add_test(tc, test_inline_mode);
    tcase_add_test(tc, test_asgi_app);
    tcase_add_loop_test(tc, test_app_load_failure, 0,
                        sizeof(bad_apps) / sizeof(bad_apps[0]));
    tcase_add_test(tc, test_bad_chdir);
    tcase_add_test(tc, test_supervisor_gone);
    tcase_add_test(tc, test_retire_after_max_requests);
    tcase_add_test(tc, test_term_waits_for_request);
    tcase_add_test(tc, test_term_response_says_close);
    tcase_add_test(tc, test_int_stops_fast);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(worker_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
