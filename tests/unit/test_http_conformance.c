/* test_http_conformance.c - check suite for worker/loop/http.c and
 * reqline.c against RFC 9110 and RFC 9112: the request line's method and
 * target, the authority, chunk size lines, trailer names, and the heads
 * refused for it.
 *
 * Request bytes go over a real loopback connection to a real pump (pump
 * mode), and the test looks at what the head recorded once the connection
 * hands the request to the executor, or at the response the loop wrote
 * instead. What the test_http*.c suites share is
 * tests/unit/http_harness.h.
 */
#include "config.h"

#include <check.h>
#include <regex.h>

#include "tests/unit/buf_faults.h"
#include "tests/unit/harness.h"
#include "tests/unit/http_harness.h"
#include "worker/loop/http.h"
#include "worker/loop/reqline.h"

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

static Suite *http_conformance_suite(void)
{
    Suite *s = suite_create("http_conformance");
    TCase *tc;

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

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(http_conformance_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
