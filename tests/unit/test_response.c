/* test_response.c - check suite for worker/loop/response.c.
 *
 * The framing is pure: a request as the parser would leave it, a status,
 * the app's fields, and out come the head's bytes and each body part's
 * bytes. The tests look only at those bytes (the head in the buffer, the
 * iovecs sl_response_frame() fills, flattened as writev() would send them)
 * and at the predicate the executors act on (sl_response_ends_connection).
 * Heads are built while buffer growth fails (buf_faults.h). The app's
 * fields, and the header rule both interfaces share, are
 * test_response_fields.c's; what the two share is
 * tests/unit/response_harness.h.
 */
#include "config.h"

#include <check.h>

#include "common/date.h"
#include "tests/unit/buf_faults.h"
#include "tests/unit/harness.h"
#include "tests/unit/response_harness.h"
#include "worker/loop/response.h"

/* The head ends with exactly one blank line, and only there. */
static void assert_head_ends(const char *h)
{
    const char *blank = strstr(h, "\r\n\r\n");

    ck_assert_ptr_nonnull(blank);
    ck_assert_str_eq(blank, "\r\n\r\n");
}

/* ------------------------------------------------------------------ */
/* the status line                                                    */

static const struct {
    int status;
    const char *line;
} status_lines[] = {
    {200, "HTTP/1.1 200 OK\r\n"},
    {100, "HTTP/1.1 100 Continue\r\n"},
    {204, "HTTP/1.1 204 No Content\r\n"},
    {404, "HTTP/1.1 404 Not Found\r\n"},
    {503, "HTTP/1.1 503 Service Unavailable\r\n"},
    {599, "HTTP/1.1 599 Unknown\r\n"},
    {999, "HTTP/1.1 999 Unknown\r\n"},
};

START_TEST(test_status_line)
{
    request(1, true, false);
    ck_assert_int_eq(
        sl_response_begin(&rs, &head, &req, status_lines[_i].status, NULL, 0),
        0);
    ck_assert_str_eq(head_text(), status_lines[_i].line);
}
END_TEST

/* The app's status line (WSGI's "200 Fine") is sent as given. */
START_TEST(test_status_line_given)
{
    request(1, true, false);
    ck_assert_int_eq(sl_response_begin(&rs, &head, &req, 200, "200 Fine", 8),
                     0);
    ck_assert_str_eq(head_text(), "HTTP/1.1 200 Fine\r\n");
    ck_assert_int_eq(rs.status, 200);
}
END_TEST

/* Begin empties both the buffer and a response left over from the last
 * request before it writes the status line. */
START_TEST(test_begin_starts_afresh)
{
    const char *h;
    char v[64];

    SL_BUF_APPEND_LIT(&head, "left over from the last response");
    memset(&rs, 0xff, sizeof(rs));
    request(1, true, false);
    h = build(200, 0, false, false, NULL);
    ck_assert(strncmp(h, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ck_assert_str_eq(h_header(h, "Content-Length", v, sizeof(v)), "0");
    ck_assert_int_eq(h_header_count(h, "Connection"), 0);
    ck_assert_int_eq(h_header_count(h, "Server"), 1);
    ck_assert_int_eq(h_header_count(h, "Date"), 1);
    ck_assert_str_eq(frames("x", true), "");
    ck_assert(!sl_response_ends_connection(&rs));
}
END_TEST

/* HTTP/1.1 always, whatever the request's version. */
START_TEST(test_status_line_on_http10)
{
    request(0, false, false);
    ck_assert(strncmp(build(200, 2, false, false, NULL), "HTTP/1.1 200 OK\r\n",
                      17) == 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* framing                                                            */

START_TEST(test_app_content_length)
{
    static const char want[] = "HTTP/1.1 200 OK\r\n"
                               "Content-Type: text/plain\r\n"
                               "Content-Length: 5\r\n";
    const char *h;
    char v[64];

    request(1, true, false);
    h = build(200, -1, false, false, "Content-Type", "text/plain",
              "Content-Length", "5", NULL);
    ck_assert(strncmp(h, want, strlen(want)) == 0);
    ck_assert_int_eq(h_header_count(h, "Content-Length"), 1);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_ptr_null(h_header(h, "Connection", v, sizeof(v)));
    assert_head_ends(h);
    ck_assert_str_eq(frames("hel", false), "hel");
    ck_assert(sl_response_ends_connection(&rs)); /* 2 bytes short so far */
    ck_assert_str_eq(frames("lo", true), "lo");
    ck_assert(!sl_response_ends_connection(&rs));
}
END_TEST

/* The app's Content-Length wins over a length the server knows. */
START_TEST(test_app_content_length_beats_known)
{
    const char *h;
    char v[64];

    request(1, true, false);
    h = build(200, 99, false, false, "content-length", "3", NULL);
    ck_assert_int_eq(h_header_count(h, "Content-Length"), 1);
    ck_assert_str_eq(h_header(h, "Content-Length", v, sizeof(v)), "3");
}
END_TEST

static const long long known_lengths[] = {0, 11, 1234567890123LL};

START_TEST(test_known_length)
{
    const char *h;
    char v[64], want[32];

    request(1, true, false);
    h = build(200, known_lengths[_i], false, false, NULL);
    snprintf(want, sizeof(want), "%lld", known_lengths[_i]);
    ck_assert_str_eq(h_header(h, "Content-Length", v, sizeof(v)), want);
    ck_assert_int_eq(h_header_count(h, "Content-Length"), 1);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_int_eq(h_header_count(h, "Connection"), 0);
    assert_head_ends(h);
    if (known_lengths[_i] == 0)
        ck_assert(!sl_response_ends_connection(&rs));
}
END_TEST

START_TEST(test_http11_unknown_length_is_chunked)
{
    const char *h;
    char v[64];

    request(1, true, false);
    h = build(200, -1, false, false, NULL);
    ck_assert_str_eq(h_header(h, "Transfer-Encoding", v, sizeof(v)), "chunked");
    ck_assert_int_eq(h_header_count(h, "Content-Length"), 0);
    ck_assert_int_eq(h_header_count(h, "Connection"), 0);
    ck_assert_str_eq(frames("hello", false), "5\r\nhello\r\n");
    ck_assert_str_eq(frames("world!", true), "6\r\nworld!\r\n0\r\n\r\n");
    ck_assert(!sl_response_ends_connection(&rs));
}
END_TEST

/* HTTP/1.0 has no chunks: the close ends the body, and says so. */
START_TEST(test_http10_unknown_length_is_close_delimited)
{
    const char *h;
    char v[64];

    request(0, true, false); /* even when it asked for keep-alive */
    h = build(200, -1, false, false, NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_int_eq(h_header_count(h, "Content-Length"), 0);
    ck_assert_str_eq(h_header(h, "Connection", v, sizeof(v)), "close");
    ck_assert_int_eq(h_header_count(h, "Connection"), 1);
    ck_assert_str_eq(frames("hello", false), "hello");
    ck_assert_str_eq(frames("!", true), "!");
    ck_assert(sl_response_ends_connection(&rs));
}
END_TEST

START_TEST(test_http10_keep_alive_with_length)
{
    const char *h;
    char v[64];

    request(0, true, false);
    h = build(200, 2, false, false, NULL);
    ck_assert_str_eq(h_header(h, "Content-Length", v, sizeof(v)), "2");
    ck_assert_str_eq(h_header(h, "Connection", v, sizeof(v)), "keep-alive");
    ck_assert_str_eq(frames("ok", true), "ok");
    ck_assert(!sl_response_ends_connection(&rs));
    request(0, false, false);
    h = build(200, 2, false, false, NULL);
    ck_assert_str_eq(h_header(h, "Connection", v, sizeof(v)), "close");
    ck_assert_str_eq(frames("ok", true), "ok");
    ck_assert(sl_response_ends_connection(&rs));
}
END_TEST

/* The client, or the server, ending the connection: one Connection:
 * close in the head, and the predicate agrees. */
START_TEST(test_close_requested)
{
    const char *h;
    char v[64];

    request(1, false, false);
    h = build(200, 1, false, false, NULL);
    ck_assert_str_eq(h_header(h, "Connection", v, sizeof(v)), "close");
    ck_assert_str_eq(frames("x", true), "x");
    ck_assert(sl_response_ends_connection(&rs));
    request(1, true, false);
    h = build(200, 1, false, true, NULL);
    ck_assert_str_eq(h_header(h, "Connection", v, sizeof(v)), "close");
    ck_assert_int_eq(h_header_count(h, "Connection"), 1);
    ck_assert_str_eq(frames("x", true), "x");
    ck_assert(sl_response_ends_connection(&rs));
}
END_TEST

/* HEAD: the head of the GET, no body bytes whatever is framed. */
START_TEST(test_head_has_no_body)
{
    const char *h;
    char v[64];

    request(1, true, true);
    h = build(200, 5, false, false, NULL);
    ck_assert_str_eq(h_header(h, "Content-Length", v, sizeof(v)), "5");
    ck_assert_str_eq(frames("hello", true), "");
    ck_assert_uint_eq(wire_len, 0);
    ck_assert(!sl_response_ends_connection(&rs));

    /* unknown length: no chunks promised, and the connection lives on */
    h = build(200, -1, false, false, NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_int_eq(h_header_count(h, "Connection"), 0);
    ck_assert_str_eq(frames("hello", false), "");
    ck_assert_str_eq(frames("", true), "");
    ck_assert(!sl_response_ends_connection(&rs));

    /* the app's length is kept, though nothing follows it */
    h = build(200, -1, false, false, "Content-Length", "10", NULL);
    ck_assert_str_eq(h_header(h, "Content-Length", v, sizeof(v)), "10");
    ck_assert_str_eq(frames("0123456789", true), "");
    ck_assert(!sl_response_ends_connection(&rs));

    /* trailers cannot make a HEAD response chunked */
    h = build(200, -1, true, false, NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_str_eq(frames("x", true), "");
}
END_TEST

static const int bodiless[] = {100, 103, 204, 304};

/* 1xx, 204, 304: neither a length nor chunks, and no body bytes. */
START_TEST(test_bodiless_statuses)
{
    const char *h;

    request(1, true, false);
    h = build(bodiless[_i], 5, false, false, NULL);
    ck_assert_int_eq(h_header_count(h, "Content-Length"), 0);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_str_eq(frames("hello", true), "");
    ck_assert(!sl_response_ends_connection(&rs));

    h = build(bodiless[_i], -1, false, false, NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_int_eq(h_header_count(h, "Connection"), 0);
    ck_assert_str_eq(frames("hello", true), "");

    h = build(bodiless[_i], -1, true, false, NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_str_eq(frames("", true), "");

    request(0, true, false); /* no close-delimiting either */
    h = build(bodiless[_i], -1, false, false, NULL);
    ck_assert(!sl_response_ends_connection(&rs));
}
END_TEST

/* ------------------------------------------------------------------ */
/* the body                                                           */

/* Whatever the app sends, no more than its Content-Length goes out. */
START_TEST(test_frame_never_exceeds_content_length)
{
    request(1, true, false);
    build(200, -1, false, false, "Content-Length", "5", NULL);
    ck_assert_str_eq(frames("hel", false), "hel");
    ck_assert_str_eq(frames("lo world", false), "lo");
    ck_assert_str_eq(frames("more", true), "");
    ck_assert_uint_eq(wire_len, 0);
    ck_assert(!sl_response_ends_connection(&rs));

    /* the same for a length the server promised */
    build(200, 2, false, false, NULL);
    ck_assert_str_eq(frames("abc", true), "ab");
    ck_assert(!sl_response_ends_connection(&rs));

    /* and a promised zero is zero */
    build(200, -1, false, false, "Content-Length", "0", NULL);
    ck_assert_str_eq(frames("abc", true), "");
}
END_TEST

/* A body shorter than promised leaves the client waiting: close. */
START_TEST(test_short_body_ends_connection)
{
    request(1, true, false);
    build(200, -1, false, false, "Content-Length", "10", NULL);
    ck_assert_str_eq(frames("hello", true), "hello");
    ck_assert(sl_response_ends_connection(&rs));
}
END_TEST

static const size_t chunk_sizes[] = {1,   9,   10,   15,    16,
                                     255, 256, 4096, 65535, 1 << 20};

/* A chunk is its size in hex, CRLF, the bytes, CRLF. */
START_TEST(test_chunk_sizes)
{
    static char data[(1 << 20) + 1];
    size_t n = chunk_sizes[_i], hlen;
    char *end;
    unsigned long size;

    memset(data, 'z', n);
    request(1, true, false);
    build(200, -1, false, false, NULL);
    frame(data, n, false);
    size = strtoul(wire, &end, 16);
    ck_assert_uint_eq(size, n);
    ck_assert(end > wire && end[0] == '\r' && end[1] == '\n');
    hlen = (size_t)(end - wire) + 2;
    ck_assert_uint_eq(wire_len, hlen + n + 2);
    ck_assert(memcmp(wire + hlen, data, n) == 0);
    ck_assert(memcmp(wire + hlen + n, "\r\n", 2) == 0);
}
END_TEST

/* The last chunk: with the last part, alone, and never by accident (an
 * empty part must not become "0\r\n\r\n", which would end the body). */
START_TEST(test_last_chunk)
{
    request(1, true, false);
    build(200, -1, false, false, NULL);
    ck_assert_str_eq(frames("", false), "");
    ck_assert_uint_eq(wire_len, 0);
    ck_assert_str_eq(frames("ab", false), "2\r\nab\r\n");
    ck_assert_str_eq(frames("", true), "0\r\n\r\n");

    build(200, -1, false, false, NULL);
    ck_assert_str_eq(frames("abc", true), "3\r\nabc\r\n0\r\n\r\n");
}
END_TEST

/* Trailers: a chunked body whose end the caller writes (the trailer
 * fields), even when the length is known; not on HTTP/1.0, not when the
 * app gave a length. */
START_TEST(test_trailers)
{
    const char *h;
    char v[64];

    request(1, true, false);
    h = build(200, 3, true, false, NULL);
    ck_assert_str_eq(h_header(h, "Transfer-Encoding", v, sizeof(v)), "chunked");
    ck_assert_int_eq(h_header_count(h, "Content-Length"), 0);
    ck_assert_str_eq(frames("abc", true), "3\r\nabc\r\n");
    ck_assert_str_eq(frames("", true), "");

    h = build(200, -1, true, false, "Content-Length", "3", NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_str_eq(frames("abc", true), "abc");

    request(0, true, false);
    h = build(200, 3, true, false, NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_str_eq(h_header(h, "Content-Length", v, sizeof(v)), "3");
    ck_assert_str_eq(frames("abc", true), "abc");
}
END_TEST

/* ------------------------------------------------------------------ */
/* out of memory                                                      */

static char long_a[3000], long_b[5000];

/* A head with two long fields built into the suite's buffer, so that it
 * grows mid-way: the steps' results or'ed (0, or -1 from any step). */
static int build_long(void)
{
    int rc;

    request(1, true, false);
    memset(long_a, 'a', sizeof(long_a));
    memset(long_b, 'b', sizeof(long_b));
    rc = sl_response_begin(&rs, &head, &req, 200, "200 Fine", 8);
    rc |= sl_response_field(&rs, &head, "X-A", 3, long_a, sizeof(long_a));
    rc |= sl_response_field(&rs, &head, "X-Short", 7, "s", 1);
    rc |= sl_response_field(&rs, &head, "X-B", 3, long_b, sizeof(long_b));
    rc |= sl_response_end(&rs, &head, &req, 12, false, false);
    return rc;
}

START_TEST(test_head_whole)
{
    ck_assert_int_eq(build_long(), 0);
    ck_assert(strncmp(head.data, "HTTP/1.1 200 Fine\r\nX-A: aaa", 25) == 0);
    ck_assert(head.len > sizeof(long_a) + sizeof(long_b));
    ck_assert(memcmp(head.data + head.len - 4, "\r\n\r\n", 4) == 0);
    ck_assert_ptr_nonnull(
        memmem(head.data, head.len, "Content-Length: 12\r\n", 20));
}
END_TEST

/* Out of memory at any growth: a step says so and end() fails, though the
 * small appends after the failed one fit (they would cut the head short
 * and still end it with a blank line); the next head builds whole. Each
 * build starts from an empty buffer, so the same growths happen. */
START_TEST(test_head_out_of_memory)
{
    size_t whole;

    ck_assert_int_eq(build_long(), 0);
    whole = head.len;
    sl_buf_free(&head);
    hb_fail_after(_i); /* 0: at the status line; 1: X-A; 2: X-B */
    ck_assert_int_eq(build_long(), -1);
    ck_assert(rs.nomem);
    ck_assert_int_eq(sl_response_end(&rs, &head, &req, -1, false, false),
                     -1); /* still failed: it sticks until begin */
    hb_fail_after(-1);
    sl_buf_free(&head);
    ck_assert_int_eq(build_long(), 0);
    ck_assert_uint_eq(head.len, whole);
}
END_TEST

static Suite *response_suite(void)
{
    Suite *s = suite_create("response");
    TCase *tc;

    tc = tcase_create("head");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_status_line, 0,
                        sizeof(status_lines) / sizeof(status_lines[0]));
    tcase_add_test(tc, test_status_line_given);
    tcase_add_test(tc, test_begin_starts_afresh);
    tcase_add_test(tc, test_status_line_on_http10);
    suite_add_tcase(s, tc);

    tc = tcase_create("framing");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_app_content_length);
    tcase_add_test(tc, test_app_content_length_beats_known);
    tcase_add_loop_test(tc, test_known_length, 0,
                        sizeof(known_lengths) / sizeof(known_lengths[0]));
    tcase_add_test(tc, test_http11_unknown_length_is_chunked);
    tcase_add_test(tc, test_http10_unknown_length_is_close_delimited);
    tcase_add_test(tc, test_http10_keep_alive_with_length);
    tcase_add_test(tc, test_close_requested);
    tcase_add_test(tc, test_head_has_no_body);
    tcase_add_loop_test(tc, test_bodiless_statuses, 0,
                        sizeof(bodiless) / sizeof(bodiless[0]));
    suite_add_tcase(s, tc);

    tc = tcase_create("memory");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_head_whole);
    tcase_add_loop_test(tc, test_head_out_of_memory, 0, 3);
    suite_add_tcase(s, tc);

    tc = tcase_create("body");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_frame_never_exceeds_content_length);
    tcase_add_test(tc, test_short_body_ends_connection);
    tcase_add_loop_test(tc, test_chunk_sizes, 0,
                        sizeof(chunk_sizes) / sizeof(chunk_sizes[0]));
    tcase_add_test(tc, test_last_chunk);
    tcase_add_test(tc, test_trailers);
    suite_add_tcase(s, tc);

    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(response_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
