/* test_http.c - check suite for worker/loop/http.c.
 *
 * sl_http_head_complete() is driven the way the worker drives it: request
 * bytes go over a real loopback connection to a real pump (pump mode), and
 * the test looks at what the head recorded once the connection hands the
 * request to the executor, or at the response the loop wrote instead. The
 * pure helpers (reason phrases, name compare, the heads the loop writes)
 * are called directly.
 */
#include "config.h"

#include <check.h>
#include <regex.h>

#include "tests/unit/buf_faults.h"
#include "tests/unit/harness.h"
#include "worker/loop/http.h"
#include "worker/loop/reqline.h"

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;

static void up(void)
{
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
}

static void setup(void)
{
    client.fd = -1;
}

static void teardown(void)
{
    h_resp_free(&resp);
    h_client_close(&client);
    h_pump_down(&pump);
}

static bool served_or_answered(void *arg)
{
    sl_conn_t *c = arg;

    h_pull(&client);
    return c->state == SL_CONN_SERVING || client.len > 0 || client.eof;
}

/* Send RAW on a fresh pump with the options in opt; true when the request
 * reached the executor, false when the loop answered it instead (then the
 * answer is in resp). */
static bool submit(const char *raw)
{
    sl_conn_t *c;

    up();
    c = client.conn;
    h_sends(&client, raw);
    ck_assert(h_run_until(&pump, served_or_answered, c));
    if (c->state == SL_CONN_SERVING)
        return true;
    ck_assert(h_response(&pump, &client, &resp, strncmp(raw, "HEAD ", 5) == 0));
    ck_assert_uint_eq(h_tickets(&pump), 0); /* the app never saw it */
    return false;
}

/* The request was refused with STATUS and Connection: close. */
static void assert_refused(const char *raw, int status)
{
    char v[64];

    h_options(&opt, NULL);
    ck_assert_msg(!submit(raw), "request served, wanted %d", status);
    ck_assert_int_eq(resp.status, status);
    ck_assert_ptr_nonnull(h_header(resp.head, "Connection", v, sizeof(v)));
    ck_assert_str_eq(v, "close");
    ck_assert(h_wait_eof(&pump, &client));
}

static const sl_req_t *req(void)
{
    return &client.conn->req;
}

static void assert_url(const char *want)
{
    const sl_req_t *r = req();

    ck_assert_int_eq(r->url_len, strlen(want));
    ck_assert(memcmp(r->hbuf.data + r->url_off, want, r->url_len) == 0);
}

/* Header I of the request is NAME: VALUE, as slices of hbuf. */
static void assert_hdr(int i, const char *name, const char *value)
{
    const sl_req_t *r = req();
    const sl_hdr_t *hd = &r->hdrs[i];

    ck_assert_int_lt(i, r->nhdrs);
    ck_assert_msg(hd->name_len == strlen(name) &&
                      memcmp(r->hbuf.data + hd->name_off, name, hd->name_len) ==
                          0,
                  "header %d name is '%.*s', want '%s'", i, (int)hd->name_len,
                  r->hbuf.data + hd->name_off, name);
    ck_assert_msg(hd->val_len == strlen(value) &&
                      memcmp(r->hbuf.data + hd->val_off, value, hd->val_len) ==
                          0,
                  "header %d value is '%.*s', want '%s'", i, (int)hd->val_len,
                  r->hbuf.data + hd->val_off, value);
}

/* ------------------------------------------------------------------ */
/* pure helpers                                                       */

START_TEST(test_name_is)
{
    ck_assert(sl_http_name_is("Content-Length", 14, "content-length"));
    ck_assert(sl_http_name_is("HOST", 4, "host"));
    ck_assert(sl_http_name_is("host", 4, "host"));
    ck_assert(!sl_http_name_is("hos", 3, "host"));
    ck_assert(!sl_http_name_is("hostx", 5, "host"));
    ck_assert(!sl_http_name_is("hosT2", 4, "host2")); /* length is N */
    ck_assert(sl_http_name_is("hosT2", 4, "host"));
    ck_assert(!sl_http_name_is("X_Host", 6, "x-host"));
    ck_assert(sl_http_name_is("", 0, ""));
}
END_TEST

/* A header list walks item by item, trimmed, empty items included. */
START_TEST(test_list_next)
{
    static const char v[] = " a, b\t,, c d ";
    const char *p = v, *item;
    size_t n = sizeof(v) - 1, len;
    const char *want[] = {"a", "b", "", "c d"};
    int i = 0;

    while (sl_http_list_next(&p, &n, &item, &len)) {
        ck_assert_int_lt(i, 4);
        ck_assert_uint_eq(len, strlen(want[i]));
        ck_assert(memcmp(item, want[i], len) == 0);
        i++;
    }
    ck_assert_int_eq(i, 4);
}
END_TEST

START_TEST(test_common_index)
{
    int i;

    ck_assert_int_eq(sl_http_common_index("Host", 4), 0);
    ck_assert_int_eq(sl_http_common_index("CONTENT-length", 14),
                     sl_http_common_index("content-length", 14));
    ck_assert_int_ge(sl_http_common_index("te", 2), 0);
    ck_assert_int_eq(sl_http_common_index("hos", 3), -1);
    ck_assert_int_eq(sl_http_common_index("hostx", 5), -1);
    ck_assert_int_eq(sl_http_common_index("x-custom", 8), -1);
    ck_assert_int_eq(sl_http_common_index("", 0), -1);
    /* every name is found at its own index, so none shadows another */
    for (i = 0; i < SL_HTTP_NCOMMON; i++)
        ck_assert_int_eq(sl_http_common_index(sl_http_common_names[i],
                                              strlen(sl_http_common_names[i])),
                         i);
}
END_TEST

static void check_target(const char *url, const char *path, const char *query)
{
    sl_target_t t;

    sl_http_target(url, strlen(url), &t);
    ck_assert_msg(
        t.path_len == strlen(path) && memcmp(t.path, path, t.path_len) == 0,
        "%s: path '%.*s', want '%s'", url, (int)t.path_len, t.path, path);
    if (query == NULL) {
        ck_assert_msg(t.query == NULL, "%s: unexpected query", url);
    } else {
        ck_assert_msg(t.query != NULL && t.query_len == strlen(query) &&
                          memcmp(t.query, query, t.query_len) == 0,
                      "%s: query wrong, want '%s'", url, query);
    }
}

START_TEST(test_target)
{
    check_target("/a/b?x=1", "/a/b", "x=1");
    check_target("/a", "/a", NULL);
    check_target("/a?", "/a", "");
    check_target("/a#frag?no", "/a", NULL);
    check_target("/a?x#f", "/a", "x");
    check_target("*", "*", NULL);
    check_target("http://h:8/p/q?x=1", "/p/q", "x=1");
    check_target("http://h", "/", NULL);
    check_target("http://h?x=/y", "/", "x=/y");
    check_target("http://h#f", "/", NULL);
}
END_TEST

/* "METHOD url" for the log, cut to the buffer, always terminated. */
START_TEST(test_log_name)
{
    static char url[] = "/a/path?q=1";
    sl_req_t r = {.method = HTTP_GET, .url_len = 11};
    char buf[32];

    r.hbuf.data = url;
    ck_assert_uint_eq(sl_http_log_name(&r, buf, sizeof(buf)), 15);
    ck_assert_str_eq(buf, "GET /a/path?q=1");
    ck_assert_uint_eq(sl_http_log_name(&r, buf, 8), 7);
    ck_assert_str_eq(buf, "GET /a/");
    ck_assert_uint_eq(sl_http_log_name(&r, buf, 4), 3);
    ck_assert_str_eq(buf, "GET");
    ck_assert_uint_eq(sl_http_log_name(&r, buf, 3), 2);
    ck_assert_str_eq(buf, "GE");
    ck_assert_uint_eq(sl_http_log_name(&r, buf, 1), 0);
    ck_assert_str_eq(buf, "");
    buf[0] = 'x';
    ck_assert_uint_eq(sl_http_log_name(&r, buf, 0), 0);
    ck_assert_int_eq(buf[0], 'x'); /* no room: untouched */
    r.method = HTTP_MSEARCH;
    r.url_off = 3;
    r.url_len = 4;
    sl_http_log_name(&r, buf, sizeof(buf));
    ck_assert_str_eq(buf, "M-SEARCH path");
}
END_TEST

START_TEST(test_reason)
{
    ck_assert_str_eq(sl_http_reason(200), "OK");
    ck_assert_str_eq(sl_http_reason(400), "Bad Request");
    ck_assert_str_eq(sl_http_reason(408), "Request Timeout");
    ck_assert_str_eq(sl_http_reason(413), "Content Too Large");
    ck_assert_str_eq(sl_http_reason(414), "URI Too Long");
    ck_assert_str_eq(sl_http_reason(417), "Expectation Failed");
    ck_assert_str_eq(sl_http_reason(431), "Request Header Fields Too Large");
    ck_assert_str_eq(sl_http_reason(500), "Internal Server Error");
    ck_assert_str_eq(sl_http_reason(503), "Service Unavailable");
    ck_assert_str_eq(sl_http_reason(505), "HTTP Version Not Supported");
    ck_assert_str_eq(sl_http_reason(299), "Unknown");
    ck_assert_str_eq(sl_http_reason(0), "Unknown");
}
END_TEST

/* Every status the loop answers by itself gets a complete, well-framed
 * response: status line, Server, the cached Date, a body as long as its
 * Content-Length, and Connection: close. */
START_TEST(test_error_head)
{
    static const int codes[] = {400, 408, 413, 414, 417, 431, 500, 505};
    regex_t re;

    h_options(&opt, NULL);
    ck_assert_int_eq(sl_pump_init(&pump, &opt, h_exec, NULL, 0), 0);
    ck_assert_int_eq(
        regcomp(&re,
                "^HTTP/1\\.1 [0-9]{3} [A-Za-z ]+\r\n"
                "Server: sluice\r\n"
                "Date: [A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} "
                "[0-9]{2}:[0-9]{2}:[0-9]{2} GMT\r\n"
                "Content-Type: text/plain; charset=utf-8\r\n"
                "Content-Length: [0-9]+\r\n"
                "Connection: close\r\n\r\n",
                REG_EXTENDED),
        0);
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        sl_buf_t b = {0};
        char line[64], want_body[64];
        const char *body;

        sl_http_error_head(&b, codes[i]);
        ck_assert(sl_buf_append(&b, "", 1) == 0);
        ck_assert_msg(regexec(&re, b.data, 0, NULL, 0) == 0, "bad head: %s",
                      b.data);
        snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", codes[i],
                 sl_http_reason(codes[i]));
        ck_assert(strncmp(b.data, line, strlen(line)) == 0);
        body = strstr(b.data, "\r\n\r\n") + 4;
        snprintf(want_body, sizeof(want_body), "%s\n",
                 sl_http_reason(codes[i]));
        ck_assert_str_eq(body, want_body);
        ck_assert_int_eq(h_header_count(b.data, "Content-Length"), 1);
        ck_assert_uint_eq(
            strtoul(strstr(b.data, "Content-Length: ") + 16, NULL, 10),
            strlen(body));
        sl_buf_free(&b);
    }
    regfree(&re);
    sl_pump_destroy(&pump);
}
END_TEST

START_TEST(test_error_head_appends)
{
    sl_buf_t b = {0};

    ck_assert(sl_buf_append(&b, "keep", 4) == 0);
    sl_http_error_head(&b, 400);
    ck_assert(b.len > 4);
    ck_assert(memcmp(b.data, "keepHTTP/1.1 400 Bad Request\r\n", 30) == 0);
    sl_buf_free(&b);
}
END_TEST

/* Out of memory: nothing appended, and the caller is told. */
START_TEST(test_error_head_out_of_memory)
{
    sl_buf_t b = {0};

    hb_fail_after(0);
    ck_assert_int_eq(sl_http_error_head(&b, 500), -1);
    ck_assert_uint_eq(b.len, 0);
    hb_fail_after(-1);
    ck_assert_int_eq(sl_http_error_head(&b, 500), 0);
    ck_assert(b.len > 0);
    sl_buf_free(&b);
}
END_TEST

/* ------------------------------------------------------------------ */
/* what a head records                                                */

START_TEST(test_get_head)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET /a/b?x=1&y=2 HTTP/1.1\r\n"
                     "Host: example.com\r\n"
                     "User-Agent: t/1.0\r\n"
                     "X-Empty:\r\n"
                     "\r\n"));
    ck_assert_int_eq(req()->method, HTTP_GET);
    ck_assert_int_eq(req()->major, 1);
    ck_assert_int_eq(req()->minor, 1);
    assert_url("/a/b?x=1&y=2");
    ck_assert_int_eq(req()->nhdrs, 3);
    assert_hdr(0, "Host", "example.com");
    assert_hdr(1, "User-Agent", "t/1.0");
    assert_hdr(2, "X-Empty", "");
    ck_assert(req()->keep_alive);
    ck_assert(!req()->has_body);
    ck_assert(!req()->chunked);
    ck_assert(!req()->head);
    ck_assert(!req()->expect_continue);
    ck_assert_int_eq(client.conn->http_error, 0);
}
END_TEST

START_TEST(test_values_are_trimmed)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET / HTTP/1.1\r\nHost: h\r\n"
                     "X-Pad:   padded \t \r\n"
                     "X-In: a  b\r\n\r\n"));
    assert_hdr(1, "X-Pad", "padded");
    assert_hdr(2, "X-In", "a  b");
}
END_TEST

START_TEST(test_head_method)
{
    h_options(&opt, NULL);
    ck_assert(submit("HEAD /h HTTP/1.1\r\nHost: h\r\n\r\n"));
    ck_assert_int_eq(req()->method, HTTP_HEAD);
    ck_assert(req()->head);
}
END_TEST

START_TEST(test_content_length_body)
{
    h_options(&opt, NULL);
    ck_assert(submit("POST /p HTTP/1.1\r\nHost: h\r\n"
                     "Content-Length: 11\r\n\r\nhello world"));
    ck_assert_int_eq(req()->method, HTTP_POST);
    ck_assert(req()->has_body);
    ck_assert(!req()->chunked);
    ck_assert_uint_eq(req()->content_length, 11);
}
END_TEST

START_TEST(test_zero_content_length_is_no_body)
{
    h_options(&opt, NULL);
    ck_assert(submit("POST /p HTTP/1.1\r\nHost: h\r\n"
                     "Content-Length: 0\r\n\r\n"));
    ck_assert(!req()->has_body);
    ck_assert_uint_eq(req()->content_length, 0);
}
END_TEST

START_TEST(test_chunked_body)
{
    h_options(&opt, NULL);
    ck_assert(submit("POST /p HTTP/1.1\r\nHost: h\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n"));
    ck_assert(req()->has_body);
    ck_assert(req()->chunked);
}
END_TEST

START_TEST(test_keep_alive_rules)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"));
    ck_assert(!req()->keep_alive);
}
END_TEST

START_TEST(test_http10_closes_by_default)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET / HTTP/1.0\r\n\r\n")); /* no Host needed */
    ck_assert_int_eq(req()->minor, 0);
    ck_assert(!req()->keep_alive);
}
END_TEST

START_TEST(test_http10_keep_alive_when_asked)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    ck_assert(req()->keep_alive);
}
END_TEST

START_TEST(test_expect_continue)
{
    h_options(&opt, NULL);
    ck_assert(submit("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
                     "Expect: 100-Continue\r\n\r\n"));
    ck_assert(req()->expect_continue);
}
END_TEST

START_TEST(test_expect_continue_ignored_on_http10)
{
    h_options(&opt, NULL);
    ck_assert(submit("POST / HTTP/1.0\r\nContent-Length: 3\r\n"
                     "Expect: 100-continue\r\n\r\n"));
    ck_assert(!req()->expect_continue);
}
END_TEST

START_TEST(test_body_at_limit_is_accepted)
{
    h_options(&opt, "--limit-request-body", "10", NULL);
    ck_assert(submit("POST / HTTP/1.1\r\nHost: h\r\n"
                     "Content-Length: 10\r\n\r\n0123456789"));
    ck_assert_uint_eq(req()->content_length, 10);
}
END_TEST

/* The head is copied out of the read buffer: pipelined bytes read after
 * it cannot change what the executor sees. */
START_TEST(test_head_survives_read_buffer_reuse)
{
    sl_conn_t *c;

    h_options(&opt, NULL);
    ck_assert(submit("GET /first HTTP/1.1\r\nHost: one\r\n\r\n"));
    c = client.conn;
    ck_assert_ptr_ne(c->req.hbuf.data, c->rbuf.data);
    memset(c->rbuf.data, 'Z', c->rbuf.len);
    assert_url("/first");
    assert_hdr(0, "Host", "one");
}
END_TEST

/* ------------------------------------------------------------------ */
/* what a head is refused for                                         */

START_TEST(test_missing_host_on_http11)
{
    assert_refused("GET / HTTP/1.1\r\nX-A: b\r\n\r\n", 400);
}
END_TEST

START_TEST(test_two_hosts)
{
    assert_refused("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400);
}
END_TEST

START_TEST(test_unknown_expectation)
{
    assert_refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
                   "Expect: 200-ok\r\n\r\nx",
                   417);
}
END_TEST

START_TEST(test_http_version_2)
{
    h_options(&opt, NULL);
    ck_assert(!submit("GET / HTTP/2.0\r\nHost: a\r\n\r\n"));
    ck_assert_int_eq(resp.status, 505);
}
END_TEST

START_TEST(test_content_length_over_limit)
{
    h_options(&opt, "--limit-request-body", "10", NULL);
    /* refused from the head alone: the body is never sent */
    ck_assert(!submit("POST / HTTP/1.1\r\nHost: h\r\n"
                      "Content-Length: 11\r\n\r\n"));
    ck_assert_int_eq(resp.status, 413);
    ck_assert_str_eq(resp.body, "Content Too Large\n");
}
END_TEST

/* ------------------------------------------------------------------ */
/* --health-path                                                      */

START_TEST(test_health_ok)
{
    char v[64];

    h_options(&opt, "--health-path", "/healthz", NULL);
    ck_assert(!submit("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(resp.body, "OK\n");
    ck_assert_ptr_nonnull(h_header(resp.head, "Cache-Control", v, sizeof(v)));
    ck_assert_str_eq(v, "no-store");
    ck_assert_ptr_nonnull(h_header(resp.head, "Date", v, sizeof(v)));
    ck_assert_ptr_null(h_header(resp.head, "Connection", v, sizeof(v)));
    /* keep-alive: the same connection serves the next request */
    h_sends(&client, "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

/* No memory for the health answer: the connection closes rather than
 * leave the client waiting for an answer on a kept-alive connection. */
START_TEST(test_health_out_of_memory)
{
    h_options(&opt, "--health-path", "/healthz", NULL);
    up();
    /* the read buffer, the header array and the head's copy are new
     * blocks (a fresh pump's cache is empty); the answer's cannot be */
    hb_fail_after(3);
    h_sends(&client, "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_wait_eof(&pump, &client));
    hb_fail_after(-1);
    ck_assert_uint_eq(client.len, 0);
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

/* No memory for an error answer: the close alone says it. */
START_TEST(test_error_answer_out_of_memory)
{
    h_options(&opt, NULL);
    up();
    hb_fail_after(2); /* the read buffer and the header array */
    h_sends(&client, "GET / HTTP/1.1\r\nHost: h\r\nBad Header\r\n\r\n");
    ck_assert(h_wait_eof(&pump, &client));
    hb_fail_after(-1);
    ck_assert_uint_eq(client.len, 0);
    ck_assert_uint_eq(h_tickets(&pump), 0);
}
END_TEST

START_TEST(test_health_head_has_no_body)
{
    char v[64];

    h_options(&opt, "--health-path", "/healthz", NULL);
    ck_assert(!submit("HEAD /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(h_header(resp.head, "Content-Length", v, sizeof(v)), "3");
    h_sends(&client, "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 200); /* not body bytes of the HEAD */
    ck_assert_str_eq(resp.body, "OK\n");
}
END_TEST

START_TEST(test_health_fails_once_terminating)
{
    h_options(&opt, "--health-path", "/healthz", NULL);
    up();
    pump.drain.terminating = true;
    h_sends(&client, "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    ck_assert(h_response(&pump, &client, &resp, false));
    ck_assert_int_eq(resp.status, 503);
    ck_assert_str_eq(resp.body, "draining\n");
    ck_assert_int_eq(h_header_count(resp.head, "Connection"), 1);
    ck_assert(strstr(resp.head, "Connection: keep-alive\r\n") != NULL);
}
END_TEST

START_TEST(test_health_http10_close)
{
    char v[64];

    h_options(&opt, "--health-path", "/healthz", NULL);
    ck_assert(!submit("GET /healthz HTTP/1.0\r\n\r\n"));
    ck_assert_int_eq(resp.status, 200);
    ck_assert_str_eq(h_header(resp.head, "Connection", v, sizeof(v)), "close");
    ck_assert(h_wait_eof(&pump, &client));
}
END_TEST

/* Only GET and HEAD of exactly that path, without a body, are the health
 * check; everything else is the app's. */
START_TEST(test_not_health)
{
    static const char *const reqs[] = {
        "GET /healthz/ HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /healthz?x=1 HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /health HTTP/1.1\r\nHost: h\r\n\r\n",
        "DELETE /healthz HTTP/1.1\r\nHost: h\r\n\r\n",
        "POST /healthz HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx",
    };

    h_options(&opt, "--health-path", "/healthz", NULL);
    ck_assert_msg(submit(reqs[_i]), "'%s' answered by the loop", reqs[_i]);
    ck_assert(!sl_http_is_health(client.conn));
}
END_TEST

START_TEST(test_no_health_path)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"));
    ck_assert(!sl_http_is_health(client.conn));
}
END_TEST

/* The metrics read a response's status from its first bytes. */
START_TEST(test_status_of)
{
    ck_assert_int_eq(sl_http_status_of("HTTP/1.1 404 Not Found\r\n", 24), 404);
    ck_assert_int_eq(sl_http_status_of("HTTP/1.0 200 OK\r\n", 17), 200);
    ck_assert_int_eq(sl_http_status_of("HTTP/1.1 101 ", 13), 101);
    ck_assert_int_eq(sl_http_status_of("HTTP/1.1 20", 11), 0); /* short */
    ck_assert_int_eq(sl_http_status_of("HTTP/2.0 200 OK", 15), 0);
    ck_assert_int_eq(sl_http_status_of("HTTP/1.1 2x0 OK", 15), 0);
    ck_assert_int_eq(sl_http_status_of("\x81\x05hello world", 13), 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* RFC 9110 / 9112 conformance: the parser pieces                     */

static const struct {
    const char *line;
    int rc;
    size_t mlen, tlen;
} scan_cases[] = {
    {"GET / HTTP/1.1", 1, 3, 1},
    {"M-SEARCH * ", 1, 8, 1},
    {"PURGE! /x?y ", 1, 6, 4},
    {"#x /\xe9\xff\x80 ", 1, 2, 4}, /* bytes 0x80-0xFF pass */
    {"GET /a", 0, 0, 0},            /* more to come */
    {"M-SE", 0, 0, 0},
    {"G(T / ", 400, 0, 0}, /* no token */
    {" / ", 400, 0, 0},
    {"GET  / ", 400, 0, 0}, /* empty target */
    {"GET /a\x01 ", 400, 0, 0},
    {"GET /a\x7f ", 400, 0, 0},
    {"GET /a\tb ", 400, 0, 0},
    {"GET /\r\n", 400, 0, 0}, /* no version */
    {"GET /0123456789 ", 414, 0, 0},
    {"GETTINGLONGER", 414, 0, 0},
};

START_TEST(test_scan_line)
{
    const char *line = scan_cases[_i].line;
    size_t n = strlen(line), k, pos = 0, mlen = 0, tlen = 0;
    int rc = sl_reqline_scan(line, n, 20, &pos, &mlen, &tlen);

    ck_assert_msg(rc == scan_cases[_i].rc, "'%s': %d", line, rc);
    if (rc == 1) {
        ck_assert_uint_eq(mlen, scan_cases[_i].mlen);
        ck_assert_uint_eq(tlen, scan_cases[_i].tlen);
    }
    /* the same line a byte at a time, what was checked carried over */
    pos = mlen = 0;
    for (k = 1; k <= n; k++) {
        rc = sl_reqline_scan(line, k, 20, &pos, &mlen, &tlen);
        if (rc != 0)
            break;
        ck_assert_uint_eq(pos, k);
    }
    ck_assert_msg(rc == scan_cases[_i].rc, "'%s' in pieces: %d", line, rc);
    if (rc == 1)
        ck_assert_uint_eq(tlen, scan_cases[_i].tlen);
}
END_TEST

START_TEST(test_method_of)
{
    ck_assert_int_eq(sl_reqline_method_of("GET", 3), HTTP_GET);
    ck_assert_int_eq(sl_reqline_method_of("HEAD", 4), HTTP_HEAD);
    ck_assert_int_eq(sl_reqline_method_of("CONNECT", 7), HTTP_CONNECT);
    ck_assert_int_eq(sl_reqline_method_of("M-SEARCH", 8), HTTP_MSEARCH);
    ck_assert_int_eq(sl_reqline_method_of("SOURCE", 6), HTTP_SOURCE);
    /* methods are case-sensitive; RTSP's and others are just tokens */
    ck_assert_int_eq(sl_reqline_method_of("get", 3), SL_METHOD_OTHER);
    ck_assert_int_eq(sl_reqline_method_of("GETX", 4), SL_METHOD_OTHER);
    ck_assert_int_eq(sl_reqline_method_of("GE", 2), SL_METHOD_OTHER);
    ck_assert_int_eq(sl_reqline_method_of("DESCRIBE", 8), SL_METHOD_OTHER);
    ck_assert_int_eq(sl_reqline_method_of("PRI", 3), SL_METHOD_OTHER);
}
END_TEST

static const struct {
    const char *auth;
    bool ok, need_port;
} auth_cases[] = {
    {"example.com", true, false},
    {"example.com:8080", true, false},
    {"h:", true, false},
    {"[::1]:81", true, false},
    {"[fe80::1]", true, false},
    {"a%2Db.c", true, false},
    {"127.0.0.1:65535", true, true},
    {"h:1", true, true},
    {"", false, false},
    {"user@h", false, false},
    {"h:8x", false, false},
    {"h:65536", false, false},
    {"[::1", false, false},
    {"[zz]", false, false},
    {"[]", false, false},
    {"h]", false, false},
    {"h:%38", false, false},
    {"a%2", false, false},
    {":80", false, false},
    {"h", false, true},
    {"h:", false, true},
    {"h\xe9", false, false},
};

START_TEST(test_authority_ok)
{
    const char *a = auth_cases[_i].auth;

    ck_assert_msg(
        sl_reqline_authority_ok(a, strlen(a), auth_cases[_i].need_port) ==
            auth_cases[_i].ok,
        "'%s'", a);
}
END_TEST

/* a trailer name, fed in pieces of PIECE bytes */
static bool trailer_refused(const char *name, size_t piece)
{
    sl_req_t r;
    size_t n = strlen(name), k;

    sl_http_trailer_reset(&r);
    for (k = 0; k < n; k += piece)
        sl_http_trailer_feed(&r, name + k, n - k < piece ? n - k : piece);
    return sl_http_trailer_end(&r);
}

START_TEST(test_trailer_names)
{
    static const char *const refused[] = {
        "Content-Length",
        "transfer-encoding",
        "HOST",
        "Trailer",
        "TE",
        "Connection",
        "Authorization",
        "Cookie",
        "Set-Cookie",
        "Range",
        "Content-Type",
        "content-x",
        "Proxy-Authorization",
        "proxy-",
        "If-None-Match",
        "Accept",
        "Accept-Encoding",
        "X-Forwarded-For",
        "Forwarded",
        "Cache-Control",
        "Expect",
        "Max-Forwards",
        "Pragma",
    };
    static const char *const allowed[] = {
        "X-Checksum", "Server-Timing", "Digest",   "Hosts",       "T",    "Tex",
        "Content",    "Proxy",         "Accepted", "X-Forwarded", "Etag", "a",
    };
    size_t i, piece;

    for (piece = 1; piece <= 3; piece++) {
        for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
            ck_assert_msg(trailer_refused(refused[i], piece), "%s", refused[i]);
        for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
            ck_assert_msg(!trailer_refused(allowed[i], piece), "%s",
                          allowed[i]);
    }
}
END_TEST

/* any token is a method: recorded as written, framed like GET */
START_TEST(test_method_token_recorded)
{
    size_t n;
    const char *m;

    h_options(&opt, NULL);
    ck_assert(submit("PURGE! /x HTTP/1.1\r\nHost: h\r\n"
                     "Content-Length: 2\r\n\r\nok"));
    ck_assert_int_eq(req()->method, SL_METHOD_OTHER);
    m = sl_reqline_method_name(req(), &n);
    ck_assert_uint_eq(n, 6);
    ck_assert(memcmp(m, "PURGE!", 6) == 0);
    assert_url("/x");
    ck_assert(req()->has_body && !req()->head);
    assert_hdr(0, "Host", "h");
}
END_TEST

START_TEST(test_known_method_keeps_its_number)
{
    size_t n;

    h_options(&opt, NULL);
    ck_assert(submit("\r\nM-SEARCH / HTTP/1.1\r\nHost: h\r\n\r\n"));
    ck_assert_int_eq(req()->method, HTTP_MSEARCH);
    ck_assert(memcmp(sl_reqline_method_name(req(), &n), "M-SEARCH", 8) == 0);
    ck_assert_uint_eq(n, 8);
}
END_TEST

START_TEST(test_connect_authority_form)
{
    h_options(&opt, NULL);
    ck_assert(submit("CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n"));
    ck_assert_int_eq(req()->method, HTTP_CONNECT);
    assert_url("h:443");
    ck_assert(!req()->keep_alive);
}
END_TEST

START_TEST(test_high_bytes_in_target)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET /caf\xe9/\xff HTTP/1.1\r\nHost: h\r\n\r\n"));
    assert_url("/caf\xe9/\xff");
}
END_TEST

START_TEST(test_absolute_form_replaces_host)
{
    h_options(&opt, NULL);
    ck_assert(submit("GET http://example.com:8080/p?q HTTP/1.1\r\n"
                     "Host: other\r\n\r\n"));
    assert_url("http://example.com:8080/p?q");
    assert_hdr(0, "Host", "example.com:8080");
}
END_TEST

START_TEST(test_options_asterisk)
{
    h_options(&opt, NULL);
    ck_assert(submit("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"));
    assert_url("*");
}
END_TEST

START_TEST(test_chunk_extensions_accepted)
{
    h_options(&opt, NULL);
    /* the body is parsed before the request is handed over */
    ck_assert(submit("POST /p HTTP/1.1\r\nHost: h\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n"
                     "05;a=1;b;c=\"x;y\";d=2\r\nhello\r\n"
                     "000;z=1\r\nX-Sum: 1\r\n\r\n"));
    ck_assert(req()->chunked);
}
END_TEST

START_TEST(test_chunk_extensions_with_whitespace)
{
    h_options(&opt, NULL);
    /* RFC 9112 §7.1.1: BWS ";" BWS name [ BWS "=" BWS value ] */
    ck_assert(submit("POST /p HTTP/1.1\r\nHost: h\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n"
                     "5; some; parameters=stuff\r\nhello\r\n"
                     "3 ;\ta = \"x y\"\t; b\r\nabc\r\n"
                     "0 ; z = 1\r\n\r\n"));
    ck_assert(req()->chunked);
}
END_TEST

/* sl_reqline_chunk(): LINE, what it returns, the digits and the length */
static const struct {
    const char *line;
    int rc;
    size_t digits, len;
} chunk_cases[] = {
    {"5\r\n", 1, 1, 3},
    {"0005\r\nhello", 1, 4, 6},
    {"aF\r\n", 1, 2, 4},
    {"5;a\r\n", 1, 1, 5},
    {"5;a=1;b;c=\"x;y\"\r\n", 1, 1, 17},
    {"5; some; parameters=stuff\r\n", 1, 1, 27},
    {"5 ;\ta = 1 ; b\t=\t\"q\\\"\" ;c\r\n", 1, 1, 26},
    {"5;a=\"\x80\xff\"\r\n", 1, 1, 10},
    {"5", 0, 0, 0},
    {"5;a=\"x\r", 0, 0, 0},
    {"\r\n", -1, 0, 0},
    {" 5\r\n", -1, 0, 0},
    {"5 \r\n", -1, 0, 0},
    {"5 5\r\n", -1, 0, 0},
    {"5\n", -1, 0, 0},
    {"5;\r\n", -1, 0, 0},
    {"5;a=\r\n", -1, 0, 0},
    {"5;a= \r\n", -1, 0, 0},
    {"5;a \r\n", -1, 0, 0},
    {"5;a b\r\n", -1, 0, 0},
    {"5;a=b c\r\n", -1, 0, 0},
    {"5;a=\"x\r\n", -1, 0, 0},
    {"5;a=\"x\\\r\n", -1, 0, 0},
    {"5;a=\"x\x01\"\r\n", -1, 0, 0},
    {"5;a\rb\r\n", -1, 0, 0},
    {"5;@\r\n", -1, 0, 0},
    {"0x5\r\n", -1, 0, 0},
};

START_TEST(test_chunk_line)
{
    const char *line = chunk_cases[_i].line;
    size_t digits = 0, len = 0;
    int rc = sl_reqline_chunk(line, strlen(line), &digits, &len);

    ck_assert_msg(rc == chunk_cases[_i].rc, "'%s': %d", line, rc);
    if (rc == 1) {
        ck_assert_uint_eq(digits, chunk_cases[_i].digits);
        ck_assert_uint_eq(len, chunk_cases[_i].len);
    }
}
END_TEST

START_TEST(test_chunk_line_limit)
{
    static char line[SL_REQLINE_CHUNK_MAX + 8];
    size_t digits, len;

    memset(line, 'x', sizeof(line));
    memcpy(line, "5;a=", 4);
    /* no LF yet: more may come while the line can still fit */
    ck_assert_int_eq(
        sl_reqline_chunk(line, SL_REQLINE_CHUNK_MAX - 1, &digits, &len), 0);
    ck_assert_int_eq(
        sl_reqline_chunk(line, SL_REQLINE_CHUNK_MAX, &digits, &len), -1);
    /* the longest line taken ends its CRLF on the limit's last byte */
    memcpy(line + SL_REQLINE_CHUNK_MAX - 2, "\r\n", 2);
    ck_assert_int_eq(sl_reqline_chunk(line, sizeof(line), &digits, &len), 1);
    ck_assert_uint_eq(len, SL_REQLINE_CHUNK_MAX);
    memcpy(line + SL_REQLINE_CHUNK_MAX - 2, "xx\r\n", 4);
    ck_assert_int_eq(sl_reqline_chunk(line, sizeof(line), &digits, &len), -1);
}
END_TEST

static const struct {
    const char *raw;
    int status;
} conform_refused[] = {
    {"GET * HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"foo * HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET http://user@h/ HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET h:80 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET x HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"CONNECT /x HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET /\x7f HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET / HTTP/1.1\nHost: h\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: h\r\n\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n chunked\r\n\r\n",
     400},
    {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity, chunked"
     "\r\n\r\n0\r\n\r\n",
     501},
    {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n"
     "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     501},
    {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip"
     "\r\n\r\n0\r\n\r\n",
     400},
    {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
     "5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n",
     400},
    {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
     "0\r\nX-Ok: 1\r\nhOsT: evil\r\n\r\n",
     400},
};

START_TEST(test_conformance_refused)
{
    assert_refused(conform_refused[_i].raw, conform_refused[_i].status);
}
END_TEST

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("helpers");

    tcase_add_test(tc, test_name_is);
    tcase_add_test(tc, test_common_index);
    tcase_add_test(tc, test_status_of);
    tcase_add_test(tc, test_target);
    tcase_add_test(tc, test_log_name);
    tcase_add_test(tc, test_reason);
    tcase_add_test(tc, test_error_head);
    tcase_add_test(tc, test_error_head_appends);
    tcase_add_test(tc, test_error_head_out_of_memory);
    suite_add_tcase(s, tc);

    tc = tcase_create("head");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_get_head);
    tcase_add_test(tc, test_values_are_trimmed);
    tcase_add_test(tc, test_head_method);
    tcase_add_test(tc, test_content_length_body);
    tcase_add_test(tc, test_zero_content_length_is_no_body);
    tcase_add_test(tc, test_chunked_body);
    tcase_add_test(tc, test_keep_alive_rules);
    tcase_add_test(tc, test_http10_closes_by_default);
    tcase_add_test(tc, test_http10_keep_alive_when_asked);
    tcase_add_test(tc, test_expect_continue);
    tcase_add_test(tc, test_expect_continue_ignored_on_http10);
    tcase_add_test(tc, test_body_at_limit_is_accepted);
    tcase_add_test(tc, test_head_survives_read_buffer_reuse);
    suite_add_tcase(s, tc);

    tc = tcase_create("refused");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_missing_host_on_http11);
    tcase_add_test(tc, test_two_hosts);
    tcase_add_test(tc, test_unknown_expectation);
    tcase_add_test(tc, test_http_version_2);
    tcase_add_test(tc, test_content_length_over_limit);
    suite_add_tcase(s, tc);

    tc = tcase_create("conformance");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_scan_line, 0,
                        sizeof(scan_cases) / sizeof(scan_cases[0]));
    tcase_add_test(tc, test_method_of);
    tcase_add_loop_test(tc, test_authority_ok, 0,
                        sizeof(auth_cases) / sizeof(auth_cases[0]));
    tcase_add_test(tc, test_trailer_names);
    tcase_add_test(tc, test_method_token_recorded);
    tcase_add_test(tc, test_known_method_keeps_its_number);
    tcase_add_test(tc, test_connect_authority_form);
    tcase_add_test(tc, test_high_bytes_in_target);
    tcase_add_test(tc, test_absolute_form_replaces_host);
    tcase_add_test(tc, test_options_asterisk);
    tcase_add_test(tc, test_chunk_extensions_accepted);
    tcase_add_test(tc, test_chunk_extensions_with_whitespace);
    tcase_add_loop_test(tc, test_chunk_line, 0,
                        sizeof(chunk_cases) / sizeof(chunk_cases[0]));
    tcase_add_test(tc, test_chunk_line_limit);
    tcase_add_loop_test(tc, test_conformance_refused, 0,
                        sizeof(conform_refused) / sizeof(conform_refused[0]));
    suite_add_tcase(s, tc);

    tc = tcase_create("health");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_health_ok);
    tcase_add_test(tc, test_health_head_has_no_body);
    tcase_add_test(tc, test_health_fails_once_terminating);
    tcase_add_test(tc, test_health_http10_close);
    tcase_add_loop_test(tc, test_not_health, 0, 5);
    tcase_add_test(tc, test_no_health_path);
    tcase_add_test(tc, test_health_out_of_memory);
    tcase_add_test(tc, test_error_answer_out_of_memory);
    tcase_add_test(tc, test_list_next);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(http_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
