/* test_accesslog.c - check suite for common/logfmt.c and
 * worker/loop/accesslog.c: compiling gunicorn formats, rendering every
 * atom, escaping what a client sent, JSON lines, the per-second time
 * cache, and the writer (whole lines to a file, drops counted on a pipe
 * that is full or has no reader).
 *
 * Requests are built by hand (a sl_req_t is offsets into its buffer), and
 * the time zone is UTC so the time atom's text is known.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/logfmt.h"
#include "llhttp.h"
#include "worker/loop/accesslog.h"
#include "worker/loop/conn.h"

#define T0 971186136.0 /* 2000-10-10 13:55:36 UTC */

typedef struct {
    sl_req_t req;
    sl_hdr_t hdrs[8];
} fake_req_t;

/* A GET of URL with NH header pairs NV[2i], NV[2i+1] (lengths by strlen,
 * or VLEN for the last value when VLEN > 0: values may hold NUL). */
static void make_req(fake_req_t *f, const char *url, const char *const *nv,
                     int nh, size_t vlen)
{
    sl_buf_t *b = &f->req.hbuf;
    int i;

    memset(f, 0, sizeof(*f));
    f->req.hdrs = f->hdrs;
    f->req.method = HTTP_GET;
    f->req.major = 1;
    f->req.minor = 1;
    f->req.url_off = 0;
    f->req.url_len = (uint32_t)strlen(url);
    ck_assert_int_eq(sl_buf_append(b, url, strlen(url)), 0);
    for (i = 0; i < nh; i++) {
        const char *v = nv[2 * i + 1];
        size_t n = (i == nh - 1 && vlen > 0) ? vlen : strlen(v);
        f->hdrs[i].name_off = (uint32_t)b->len;
        f->hdrs[i].name_len = (uint32_t)strlen(nv[2 * i]);
        ck_assert_int_eq(sl_buf_append(b, nv[2 * i], strlen(nv[2 * i])), 0);
        f->hdrs[i].val_off = (uint32_t)b->len;
        f->hdrs[i].val_len = (uint32_t)n;
        ck_assert_int_eq(sl_buf_append(b, v, n), 0);
    }
    f->req.nhdrs = nh;
}

static sl_accesslog_rec_t make_rec(const sl_req_t *req)
{
    static const char head[] = "HTTP/1.1 200 OK\r\n"
                               "Content-Type: text/plain\r\n"
                               "X-Id:  42 \r\n"
                               "\r\n";
    sl_accesslog_rec_t r = {
        .req = req,
        .peer = "10.0.0.7",
        .status = 200,
        .body = 1234,
        .start = T0 - 1.5,
        .end = T0,
        .pid = 4321,
        .resp_head = head,
        .resp_head_len = sizeof(head) - 1,
    };
    return r;
}

/* The line for REC in FMT (JSON when JSON). */
static const char *render(const char *fmt, bool json,
                          const sl_accesslog_rec_t *rec)
{
    static char out[SL_ACCESSLOG_LINE_MAX + 1];
    static sl_logfmt_t f;
    sl_accesslog_clock_t clk = {.sec = -1};
    char err[128];
    size_t n;

    ck_assert_msg(sl_logfmt_compile(&f, fmt, json, err, sizeof(err)) == 0, "%s",
                  err);
    n = sl_accesslog_render(&f, &clk, rec, out, SL_ACCESSLOG_LINE_MAX);
    ck_assert_uint_le(n, SL_ACCESSLOG_LINE_MAX);
    out[n] = '\0';
    return out;
}

static void setup(void)
{
    setenv("TZ", "UTC", 1);
    tzset();
    setenv("SL_TEST_VAR", "v\"1", 1);
    unsetenv("SL_TEST_UNSET");
    signal(SIGPIPE, SIG_IGN);
}

/* ---- compiling ---- */

START_TEST(test_compile_default)
{
    sl_logfmt_t f;
    char err[128];
    int i, atoms = 0;

    ck_assert_int_eq(sl_logfmt_compile(&f, NULL, false, err, sizeof(err)), 0);
    for (i = 0; i < f.nops; i++)
        atoms += f.ops[i].kind == SL_OP_ATOM;
    ck_assert_int_eq(atoms, 9); /* h l u t r s b f a */
    ck_assert(!f.json);
    ck_assert(!f.resp_headers);
    ck_assert(!f.unknown);
    ck_assert_int_eq(sl_logfmt_compile(&f, "json", false, err, sizeof(err)), 0);
    ck_assert(f.json);
    ck_assert_int_eq(
        sl_logfmt_compile(&f, "%({x}o)s %(zz)s", false, err, sizeof(err)), 0);
    ck_assert(f.resp_headers);
    ck_assert(f.unknown);
}
END_TEST

START_TEST(test_compile_errors)
{
    static const char *const bad[] = {"%h", "%(h", "%(h)", "%(h)x", "a % b"};
    sl_logfmt_t f;
    char err[128], big[SL_LOGFMT_POOL + 100];
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ck_assert_msg(sl_logfmt_compile(&f, bad[i], false, err, sizeof(err)) ==
                          -1,
                      "'%s' compiled", bad[i]);
        ck_assert_msg(err[0] != '\0', "no reason for '%s'", bad[i]);
    }
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ck_assert_int_eq(sl_logfmt_compile(&f, big, false, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "too long"));
    /* flags and widths are Python's: accepted */
    ck_assert_int_eq(
        sl_logfmt_compile(&f, "%(h)-15s %(s)3d %%", false, err, sizeof(err)),
        0);
}
END_TEST

/* ---- rendering ---- */

START_TEST(test_render_default)
{
    static const char *const nv[] = {
        "Host",          "x",
        "Referer",       "http://r/",
        "User-Agent",    "ua/1",
        "Authorization", "Basic Ym9iOnNlY3JldA==", /* bob:secret */
    };
    fake_req_t f;
    sl_accesslog_rec_t r;

    make_req(&f, "/a%20b?x=1&y=2", nv, 4, 0);
    r = make_rec(&f.req);
    ck_assert_str_eq(render(NULL, false, &r),
                     "10.0.0.7 - bob [10/Oct/2000:13:55:36 +0000] "
                     "\"GET /a%20b?x=1&y=2 HTTP/1.1\" 200 1234 "
                     "\"http://r/\" \"ua/1\"\n");
    sl_buf_free(&f.req.hbuf);
}
END_TEST

START_TEST(test_render_every_atom)
{
    static const char *const nv[] = {"X-Request-Id", "abc", "Host", "h"};
    fake_req_t f;
    sl_accesslog_rec_t r;

    make_req(&f, "/p%2Fq%20r?k=v", nv, 2, 0);
    r = make_rec(&f.req);
    f.req.minor = 0;
    ck_assert_str_eq(
        render("h=%(h)s l=%(l)s u=%(u)s t=%(t)s r=%(r)s m=%(m)s U=%(U)s"
               " q=%(q)s H=%(H)s s=%(s)s B=%(B)s b=%(b)s f=%(f)s a=%(a)s"
               " T=%(T)s D=%(D)s M=%(M)s L=%(L)s p=%(p)s"
               " i=%({x-request-id}i)s I=%({X-Missing}i)s"
               " o=%({content-type}o)s o2=%({X-ID}o)s O=%({nope}o)s"
               " e=%({SL_TEST_VAR}e)s E=%({SL_TEST_UNSET}e)s z=%(zz)s %%",
               false, &r),
        "h=10.0.0.7 l=- u=- t=[10/Oct/2000:13:55:36 +0000]"
        " r=GET /p%2Fq%20r?k=v HTTP/1.0 m=GET U=/p/q r q=k=v H=HTTP/1.0"
        " s=200 B=1234 b=1234 f=- a=- T=1 D=1500000 M=1500 L=1.500000"
        " p=<4321> i=abc I=- o=text/plain o2=42 O=- e=v\\x221 E=- z=- %\n");
    /* nothing sent, no head parsed, no peer */
    r.body = 0;
    r.status = 0;
    r.req = NULL;
    r.peer = "";
    r.resp_head = NULL;
    ck_assert_str_eq(render("%(h)s %(r)s %(s)s %(B)s %(b)s %(U)s %(q)s"
                            " %(H)s %(m)s %({host}i)s %({x}o)s",
                            false, &r),
                     "- - - 0 - - - - - - -\n");
    sl_buf_free(&f.req.hbuf);
}
END_TEST

START_TEST(test_render_escapes)
{
    static const char value[] = "a\"b\\c\nd\re\x01\x7f\xc3\xa9";
    static const char *const nv[] = {"X-V", value};
    fake_req_t f;
    sl_accesslog_rec_t r;

    make_req(&f, "/x\"y", nv, 1, 0);
    r = make_rec(&f.req);
    /* text: controls, quote and backslash as \xNN; UTF-8 as it is */
    ck_assert_str_eq(render("\"%({x-v}i)s\" \"%(r)s\"", false, &r),
                     "\"a\\x22b\\x5cc\\x0ad\\x0de\\x01\\x7f\xc3\xa9\" "
                     "\"GET /x\\x22y HTTP/1.1\"\n");
    sl_buf_free(&f.req.hbuf);
}
END_TEST

START_TEST(test_render_json)
{
    static const char value[] = "q\"b\\s\n\x01\xc3\xa9\xff\xc3";
    static const char *const nv[] = {"User-Agent", "ua", "X-V", value};
    fake_req_t f;
    sl_accesslog_rec_t r;

    make_req(&f, "/j?a=b", nv, 2, 0);
    r = make_rec(&f.req);
    ck_assert_str_eq(
        render(NULL, true, &r),
        "{\"remote_addr\":\"10.0.0.7\",\"ident\":null,\"user\":null,"
        "\"time\":\"2000-10-10T13:55:36+00:00\",\"request\":\"GET /j?a=b "
        "HTTP/1.1\",\"status\":200,\"bytes\":1234,\"referer\":null,"
        "\"user_agent\":\"ua\"}\n");
    /* B and b share their key: one of them; invalid UTF-8 as \u00NN */
    ck_assert_str_eq(
        render("%(B)s %(b)s %(D)s %(p)s %(L)s %({x-v}i)s %({X-V}o)s "
               "%({SL_TEST_VAR}e)s %(zz)s %(H)s %(U)s %(q)s %(m)s",
               true, &r),
        "{\"bytes\":1234,\"duration_us\":1500000,\"pid\":4321,"
        "\"duration\":1.500000,"
        "\"request_header:x-v\":\"q\\\"b\\\\s\\u000a\\u0001\xc3\xa9"
        "\\u00ff\\u00c3\",\"response_header:x-v\":null,"
        "\"env:SL_TEST_VAR\":\"v\\\"1\",\"protocol\":\"HTTP/1.1\","
        "\"path\":\"/j\",\"query\":\"a=b\",\"method\":\"GET\"}\n");
    sl_buf_free(&f.req.hbuf);
}
END_TEST

/* sluice's named atoms: the TLS version and suite, '-' (null) without;
 * a one-letter name is still gunicorn's, an unknown name still '-'. */
START_TEST(test_render_tls_atoms)
{
    fake_req_t f;
    sl_accesslog_rec_t r;
    sl_logfmt_t fmt;
    char err[128];

    make_req(&f, "/t", NULL, 0, 0);
    r = make_rec(&f.req);
    ck_assert_str_eq(
        render("%(tls_protocol)s %(tls_cipher)s %(tls)s", false, &r),
        "- - -\n");
    r.tls_protocol = "TLSv1.3";
    r.tls_cipher = "TLS_AES_128_GCM_SHA256";
    ck_assert_str_eq(render("%(h)s %(tls_protocol)s %(tls_cipher)s", false, &r),
                     "10.0.0.7 TLSv1.3 TLS_AES_128_GCM_SHA256\n");
    ck_assert_str_eq(render("%(tls_protocol)s %(tls_cipher)s", true, &r),
                     "{\"tls_protocol\":\"TLSv1.3\","
                     "\"tls_cipher\":\"TLS_AES_128_GCM_SHA256\"}\n");
    /* the format says whether a line needs them, and knows the names */
    ck_assert_int_eq(
        sl_logfmt_compile(&fmt, "%(tls_cipher)s", false, err, sizeof(err)), 0);
    ck_assert(fmt.tls && !fmt.unknown);
    ck_assert_int_eq(sl_logfmt_compile(&fmt, NULL, false, err, sizeof(err)), 0);
    ck_assert(!fmt.tls);
    sl_buf_free(&f.req.hbuf);
}
END_TEST

/* A line too long for its room is cut, and a JSON one stays an object. */
START_TEST(test_render_cut)
{
    static char big[SL_ACCESSLOG_LINE_MAX * 2];
    const char *nv[] = {"X-Big", big};
    const char *line;
    fake_req_t f;
    sl_accesslog_rec_t r;
    size_t n;

    memset(big, '"', sizeof(big) - 1);
    make_req(&f, "/", nv, 1, 0);
    r = make_rec(&f.req);
    line = render("%(s)s %({x-big}i)s %(s)s", false, &r);
    n = strlen(line);
    ck_assert_uint_le(n, SL_ACCESSLOG_LINE_MAX);
    ck_assert_uint_gt(n, SL_ACCESSLOG_LINE_MAX - 16);
    ck_assert_int_eq(line[n - 1], '\n');
    ck_assert_ptr_eq(strchr(line, '\n'), line + n - 1);
    line = render("%(s)s %({x-big}i)s %(s)s", true, &r);
    n = strlen(line);
    ck_assert_uint_le(n, SL_ACCESSLOG_LINE_MAX);
    ck_assert_str_eq(line + n - 3, "\"}\n");
    ck_assert(strncmp(line, "{\"status\":200,\"request_header:x-big\":\"\\\"",
                      40) == 0);
    /* the cut never splits an escape: the text before the close is whole
     * \" pairs */
    ck_assert_int_eq((n - 3 -
                      strlen("{\"status\":200,"
                             "\"request_header:x-big\":\"")) %
                         2,
                     0);
    sl_buf_free(&f.req.hbuf);
}
END_TEST

START_TEST(test_clock_cache)
{
    sl_accesslog_clock_t clk = {.sec = -1};

    sl_accesslog_clock_set(&clk, (time_t)T0);
    ck_assert_str_eq(clk.clf, "[10/Oct/2000:13:55:36 +0000]");
    ck_assert_str_eq(clk.iso, "2000-10-10T13:55:36+00:00");
    ck_assert_uint_eq(clk.clf_len, strlen(clk.clf));
    /* the same second: the text is not made again */
    clk.clf[1] = '9';
    sl_accesslog_clock_set(&clk, (time_t)T0);
    ck_assert_str_eq(clk.clf, "[90/Oct/2000:13:55:36 +0000]");
    /* the next one is */
    sl_accesslog_clock_set(&clk, (time_t)T0 + 1);
    ck_assert_str_eq(clk.clf, "[10/Oct/2000:13:55:37 +0000]");
    /* every month's name, and a zone east of UTC */
    setenv("TZ", "XST-05:30", 1);
    tzset();
    sl_accesslog_clock_set(&clk, (time_t)951782400); /* 2000-02-29 00:00 */
    ck_assert_str_eq(clk.clf, "[29/Feb/2000:05:30:00 +0530]");
    ck_assert_str_eq(clk.iso, "2000-02-29T05:30:00+05:30");
}
END_TEST

/* h: the client's address, IPv4 formatted by hand, the rest by
 * sl_peer_text(). */
START_TEST(test_remote_address)
{
    static const char *const v4[] = {"0.0.0.0", "255.255.255.255", "10.0.7.1",
                                     "192.168.100.9", "1.22.103.4"};
    static sl_conn_t c;
    struct sockaddr_in *in = (struct sockaddr_in *)&c.peer;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&c.peer;
    char buf[64];
    size_t i;

    c.x.conn = &c;
    for (i = 0; i < sizeof(v4) / sizeof(v4[0]); i++) {
        memset(&c.peer, 0, sizeof(c.peer));
        in->sin_family = AF_INET;
        ck_assert_int_eq(inet_pton(AF_INET, v4[i], &in->sin_addr), 1);
        ck_assert_str_eq(sl_accesslog_remote(&c.x, buf, sizeof(buf)), v4[i]);
    }
    memset(&c.peer, 0, sizeof(c.peer));
    in6->sin6_family = AF_INET6;
    ck_assert_int_eq(inet_pton(AF_INET6, "2001:db8::7", &in6->sin6_addr), 1);
    ck_assert_str_eq(sl_accesslog_remote(&c.x, buf, sizeof(buf)),
                     "2001:db8::7");
    c.peer.ss_family = AF_UNIX;
    ck_assert_str_eq(sl_accesslog_remote(&c.x, buf, sizeof(buf)), "");
}
END_TEST

/* ---- writing ---- */

static sl_accesslog_t *open_log(struct ev_loop *loop, const char *path)
{
    sl_options_t o;
    sl_accesslog_t *a = NULL;

    memset(&o, 0, sizeof(o));
    o.access_logfile = path;
    o.access_logformat = "%(s)s %(U)s";
    ck_assert_int_eq(sl_accesslog_open(&a, loop, &o), 0);
    ck_assert_ptr_nonnull(a);
    return a;
}

START_TEST(test_off_by_default)
{
    struct ev_loop *loop = ev_loop_new(0);
    sl_options_t o;
    sl_accesslog_t *a = (sl_accesslog_t *)&o;

    memset(&o, 0, sizeof(o));
    ck_assert_int_eq(sl_accesslog_open(&a, loop, &o), 0);
    ck_assert_ptr_null(a);
    sl_accesslog_close(NULL);
    ev_loop_destroy(loop);
}
END_TEST

START_TEST(test_write_file)
{
    char path[] = "/tmp/test_accesslog_XXXXXX", buf[256];
    struct ev_loop *loop = ev_loop_new(0);
    sl_accesslog_t *a;
    fake_req_t f;
    sl_accesslog_rec_t r;
    int fd = mkstemp(path), i;
    ssize_t n;

    ck_assert_int_ge(fd, 0);
    make_req(&f, "/w", NULL, 0, 0);
    r = make_rec(&f.req);
    a = open_log(loop, path);
    for (i = 0; i < 3; i++)
        sl_accesslog_add(a, &r);
    ck_assert_int_eq(read(fd, buf, sizeof(buf)), 0); /* buffered */
    ck_assert_int_eq(sl_accesslog_flush(a), 0);
    n = read(fd, buf, sizeof(buf) - 1);
    ck_assert_int_eq(n, 3 * 7);
    buf[n] = '\0';
    ck_assert_str_eq(buf, "200 /w\n200 /w\n200 /w\n");
    /* enough lines to fill the buffer go out without a flush */
    for (i = 0; i < 20000; i++)
        sl_accesslog_add(a, &r);
    ck_assert_int_gt(lseek(fd, 0, SEEK_END), 3 * 7);
    sl_accesslog_close(a); /* flushes the rest */
    ck_assert_int_eq(lseek(fd, 0, SEEK_END), 20003 * 7);
    close(fd);
    unlink(path);
    sl_buf_free(&f.req.hbuf);
    ev_loop_destroy(loop);
}
END_TEST

/* stdout a pipe nobody reads: EPIPE, dropped and counted, never fatal. */
START_TEST(test_write_closed_pipe)
{
    struct ev_loop *loop = ev_loop_new(0);
    sl_accesslog_t *a;
    fake_req_t f;
    sl_accesslog_rec_t r;
    int p[2];

    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_ge(dup2(p[1], STDOUT_FILENO), 0);
    close(p[1]);
    close(p[0]);
    make_req(&f, "/c", NULL, 0, 0);
    r = make_rec(&f.req);
    a = open_log(loop, "-");
    sl_accesslog_add(a, &r);
    sl_accesslog_add(a, &r);
    ck_assert_int_eq(sl_accesslog_flush(a), -1);
    ck_assert_uint_eq(sl_accesslog_report(a), 2);
    ck_assert_uint_eq(sl_accesslog_report(a), 0); /* reported once */
    sl_accesslog_close(a);
    sl_buf_free(&f.req.hbuf);
    ev_loop_destroy(loop);
}
END_TEST

/* stdout a full pipe: the write would block; it does not, the lines are
 * dropped, and what did go in is whole lines. The pipe's own description
 * stays blocking (the app's stdout is not made non-blocking). */
START_TEST(test_write_full_pipe)
{
    struct ev_loop *loop = ev_loop_new(0);
    sl_accesslog_t *a;
    fake_req_t f;
    sl_accesslog_rec_t r;
    static char buf[1 << 20];
    uint64_t dropped;
    int p[2], i;
    ssize_t n, total = 0;

    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_ge(dup2(p[1], STDOUT_FILENO), 0);
    close(p[1]);
    make_req(&f, "/full", NULL, 0, 0);
    r = make_rec(&f.req);
    a = open_log(loop, "-");
    for (i = 0; i < 100000; i++)
        sl_accesslog_add(a, &r);
    sl_accesslog_flush(a);
    dropped = sl_accesslog_report(a);
    ck_assert_uint_gt(dropped, 0);
    ck_assert_int_eq(fcntl(STDOUT_FILENO, F_GETFL) & O_NONBLOCK, 0);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    while ((n = read(p[0], buf + total, sizeof(buf) - (size_t)total)) > 0)
        total += n;
    ck_assert_int_gt(total, 0);
    ck_assert_int_eq(total % 10, 0); /* "200 /full\n": whole lines */
    ck_assert_uint_eq((uint64_t)total / 10 + dropped, 100000);
    sl_accesslog_close(a);
    close(p[0]);
    sl_buf_free(&f.req.hbuf);
    ev_loop_destroy(loop);
}
END_TEST

static Suite *accesslog_suite(void)
{
    Suite *s = suite_create("accesslog");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_compile_default);
    tcase_add_test(tc, test_compile_errors);
    tcase_add_test(tc, test_render_default);
    tcase_add_test(tc, test_render_every_atom);
    tcase_add_test(tc, test_render_escapes);
    tcase_add_test(tc, test_render_json);
    tcase_add_test(tc, test_render_tls_atoms);
    tcase_add_test(tc, test_render_cut);
    tcase_add_test(tc, test_clock_cache);
    tcase_add_test(tc, test_remote_address);
    tcase_add_test(tc, test_off_by_default);
    tcase_add_test(tc, test_write_file);
    tcase_add_test(tc, test_write_closed_pipe);
    tcase_add_test(tc, test_write_full_pipe);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(accesslog_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
