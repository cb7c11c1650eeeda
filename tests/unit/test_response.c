/* test_response.c - check suite for worker/loop/response.c.
 *
 * The framing is pure: a request as the parser would leave it, a status,
 * the app's fields, and out come the head's bytes and each body part's
 * bytes. The tests look only at those bytes (the head in the buffer, the
 * iovecs sl_response_frame() fills, flattened as writev() would send them)
 * and at the predicate the executors act on (sl_response_ends_connection).
 * The header rule both interfaces share is checked byte by byte, and heads
 * are built while buffer growth fails (buf_faults.h).
 */
#include "config.h"

#include <check.h>

#include "common/date.h"
#include "tests/unit/buf_faults.h"
#include "tests/unit/harness.h"
#include "worker/loop/response.h"

static sl_req_t req;
static sl_response_t rs;
static sl_buf_t head;
static char wire[(1 << 20) + 64]; /* one frame's bytes, NUL-terminated */
static size_t wire_len;

static void setup(void)
{
    sl_log_set_level(SL_LOG_ERROR);
    sl_date_update();
    memset(&req, 0, sizeof(req));
    memset(&rs, 0, sizeof(rs));
    memset(&head, 0, sizeof(head));
}

static void teardown(void)
{
    sl_buf_free(&head);
}

/* The request: HTTP/1.MINOR, keep-alive as asked, HEAD or not. */
static void request(int minor, bool keep_alive, bool is_head)
{
    req.major = 1;
    req.minor = (uint8_t)minor;
    req.keep_alive = keep_alive;
    req.head = is_head;
}

/* The head built so far, as text. */
static const char *head_text(void)
{
    static char text[8192];

    ck_assert_uint_lt(head.len, sizeof(text));
    memcpy(text, head.data, head.len);
    text[head.len] = '\0';
    return text;
}

/* Build the head of a STATUS response with the app's fields (name, value
 * pairs, NULL-terminated) and the server's framing for KNOWN, TRAILERS and
 * CLOSE; the head's bytes. */
static const char *build(int status, long long known, bool trailers, bool close,
                         ...)
{
    va_list ap;
    const char *name, *value;

    ck_assert_int_eq(sl_response_begin(&rs, &head, &req, status, NULL, 0), 0);
    va_start(ap, close);
    while ((name = va_arg(ap, const char *)) != NULL) {
        value = va_arg(ap, const char *);
        ck_assert_int_eq(sl_response_field(&rs, &head, name, strlen(name),
                                           value, strlen(value)),
                         0);
    }
    va_end(ap);
    ck_assert_int_eq(sl_response_end(&rs, &head, &req, known, trailers, close),
                     0);
    return head_text();
}

/* Frame LEN bytes of DATA (END as given) and flatten the iovecs into
 * wire/wire_len, as writev() would put them on the socket. */
static const char *frame(const void *data, size_t len, bool end)
{
    struct iovec iov[3];
    char size_line[24];
    int n = 0, i;

    memset(iov, 0, sizeof(iov));
    sl_response_frame(&rs, iov, &n, size_line, data, len, end);
    ck_assert_int_ge(n, 0);
    ck_assert_int_le(n, 3);
    wire_len = 0;
    for (i = 0; i < n; i++) {
        ck_assert_uint_lt(wire_len + iov[i].iov_len, sizeof(wire));
        memcpy(wire + wire_len, iov[i].iov_base, iov[i].iov_len);
        wire_len += iov[i].iov_len;
    }
    wire[wire_len] = '\0';
    return wire;
}

static const char *frames(const char *s, bool end)
{
    return frame(s, strlen(s), end);
}

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
/* the app's fields                                                   */

/* Connection is the server's: the app's is dropped, "close" is heeded. */
START_TEST(test_app_connection_dropped)
{
    const char *h;
    char v[64];

    request(1, true, false);
    h = build(200, 1, false, false, "Connection", "keep-alive", "X-A", "1",
              NULL);
    ck_assert_int_eq(h_header_count(h, "Connection"), 0);
    ck_assert_str_eq(h_header(h, "X-A", v, sizeof(v)), "1");
    ck_assert_str_eq(frames("x", true), "x");
    ck_assert(!sl_response_ends_connection(&rs));

    h = build(200, 1, false, false, "connection", "Close", NULL);
    ck_assert_int_eq(h_header_count(h, "Connection"), 1);
    ck_assert_str_eq(h_header(h, "Connection", v, sizeof(v)), "close");
    ck_assert(strstr(h, "Close") == NULL); /* the app's line is gone */
    ck_assert_str_eq(frames("x", true), "x");
    ck_assert(sl_response_ends_connection(&rs));

    h = build(200, 1, false, false, "Connection", "Upgrade", NULL);
    ck_assert_int_eq(h_header_count(h, "Connection"), 0);
    ck_assert(strstr(h, "Upgrade") == NULL);
}
END_TEST

/* Transfer-Encoding is the server's: dropped, and the framing is ours. */
START_TEST(test_app_transfer_encoding_dropped)
{
    const char *h;
    char v[64];

    request(1, true, false);
    h = build(200, 4, false, false, "Transfer-Encoding", "chunked", NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_str_eq(h_header(h, "Content-Length", v, sizeof(v)), "4");
    ck_assert_str_eq(frames("abcd", true), "abcd");

    h = build(200, -1, false, false, "transfer-encoding", "gzip, chunked",
              NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 1);
    ck_assert_str_eq(h_header(h, "Transfer-Encoding", v, sizeof(v)), "chunked");

    request(0, false, false); /* HTTP/1.0: never chunked, even if asked */
    h = build(200, -1, false, false, "Transfer-Encoding", "chunked", NULL);
    ck_assert_int_eq(h_header_count(h, "Transfer-Encoding"), 0);
    ck_assert_str_eq(frames("abcd", true), "abcd");
}
END_TEST

START_TEST(test_server_and_date_added)
{
    const char *h;
    char v[64], date[64];

    request(1, true, false);
    h = build(200, 0, false, false, NULL);
    ck_assert_str_eq(h_header(h, "Server", v, sizeof(v)), "sluice");
    ck_assert_int_eq(h_header_count(h, "Server"), 1);
    ck_assert_int_eq(h_header_count(h, "Date"), 1);
    snprintf(date, sizeof(date), "%.*s", SL_DATE_LINE_LEN, sl_date_line());
    ck_assert_ptr_nonnull(strstr(h, date));
    ck_assert(strncmp(date, "Date: ", 6) == 0);
    ck_assert(strcmp(date + SL_DATE_LINE_LEN - 5, "GMT\r\n") == 0);
}
END_TEST

START_TEST(test_server_and_date_given)
{
    const char *h;
    char v[64];

    request(1, true, false);
    h = build(200, 0, false, false, "server", "mine", "DATE",
              "Thu, 01 Jan 1970 00:00:00 GMT", "Set-Cookie", "a=1",
              "Set-Cookie", "b=2", NULL);
    ck_assert_int_eq(h_header_count(h, "Server"), 1);
    ck_assert_str_eq(h_header(h, "Server", v, sizeof(v)), "mine");
    ck_assert_int_eq(h_header_count(h, "Date"), 1);
    ck_assert_str_eq(h_header(h, "Date", v, sizeof(v)),
                     "Thu, 01 Jan 1970 00:00:00 GMT");
    ck_assert_int_eq(h_header_count(h, "Set-Cookie"), 2);
    /* kept as given, in order */
    ck_assert_ptr_nonnull(strstr(h, "\r\nserver: mine\r\nDATE: Thu, 01 Jan "
                                    "1970 00:00:00 GMT\r\nSet-Cookie: a=1\r\n"
                                    "Set-Cookie: b=2\r\n"));
}
END_TEST

static const char *const bad_lengths[] = {"",   "abc", "-1",
                                          "5x", "1 2", "99999999999999999999"};

START_TEST(test_content_length_not_a_number)
{
    const char *s = bad_lengths[_i];

    request(1, true, false);
    ck_assert_int_eq(sl_response_begin(&rs, &head, &req, 200, NULL, 0), 0);
    ck_assert_int_eq(
        sl_response_field(&rs, &head, "Content-Length", 14, s, strlen(s)), -2);
    ck_assert(!rs.nomem); /* the app's mistake, not memory's */
}
END_TEST

/* Spaces around a number are not part of it. */
START_TEST(test_content_length_trimmed)
{
    request(1, true, false);
    build(200, -1, false, false, "Content-Length", " 3 ", NULL);
    ck_assert_str_eq(frames("abcdef", true), "abc");
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
/* checks on the app's bytes                                          */

START_TEST(test_bad_bytes)
{
    ck_assert(!sl_response_bad_bytes("text/plain; q=1", 15));
    ck_assert(!sl_response_bad_bytes("", 0));
    ck_assert(!sl_response_bad_bytes("\t\x7f\xff:", 4));
    ck_assert(sl_response_bad_bytes("a\rb", 3));
    ck_assert(sl_response_bad_bytes("a\nb", 3));
    ck_assert(sl_response_bad_bytes("a\0b", 3));
    ck_assert(sl_response_bad_bytes("\r", 1));
    ck_assert(sl_response_bad_bytes("ab\n", 3));  /* the last byte too */
    ck_assert(!sl_response_bad_bytes("ab\n", 2)); /* only N bytes */
}
END_TEST

START_TEST(test_bad_name)
{
    ck_assert(!sl_response_bad_name("X-Good_Name.1", 13));
    ck_assert(!sl_response_bad_name("a", 1));
    ck_assert(sl_response_bad_name("", 0));
    ck_assert(sl_response_bad_name("X:A", 3));
    ck_assert(sl_response_bad_name("X A", 3));
    ck_assert(sl_response_bad_name("X\tA", 3));
    ck_assert(sl_response_bad_name("X\rA", 3));
    ck_assert(sl_response_bad_name("X\nA", 3));
    ck_assert(sl_response_bad_name("X\0A", 3));
    ck_assert(sl_response_bad_name("Host:", 5));
    ck_assert(!sl_response_bad_name("Host:", 4));
}
END_TEST

/* RFC 9110: token = 1*tchar, tchar = "!" / "#" / "$" / "%" / "&" / "'" /
 * "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA. */
static bool is_tchar(int ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
           (ch >= 'A' && ch <= 'Z') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* Every byte, alone and inside a name: bad exactly when not a tchar. */
START_TEST(test_name_is_a_token)
{
    char name[3] = {'X', 0, 'Y'};
    int ch;

    for (ch = 0; ch < 256; ch++) {
        name[1] = (char)ch;
        ck_assert_msg(sl_response_bad_name(name + 1, 1) == !is_tchar(ch),
                      "byte 0x%02x alone", ch);
        ck_assert_msg(sl_response_bad_name(name, 3) == !is_tchar(ch),
                      "byte 0x%02x inside a name", ch);
    }
}
END_TEST

START_TEST(test_name_examples)
{
    ck_assert(sl_response_bad_name("", 0));
    ck_assert(sl_response_bad_name("X Injected", 10));
    ck_assert(sl_response_bad_name("X-A:", 4));
    ck_assert(sl_response_bad_name("X-A\t", 4));
    ck_assert(sl_response_bad_name("(comment)", 9));
    ck_assert(sl_response_bad_name("caf\xc3\xa9", 5));
    ck_assert(!sl_response_bad_name("Content-Type", 12));
    ck_assert(!sl_response_bad_name("x!#$%&'*+-.^_`|~9", 17));
}
END_TEST

/* A value may hold anything but what would split the head. */
START_TEST(test_value_bytes)
{
    char value[3] = {'a', 0, 'b'};
    int ch;

    for (ch = 0; ch < 256; ch++) {
        value[1] = (char)ch;
        ck_assert_msg(sl_response_bad_bytes(value, 3) ==
                          (ch == '\r' || ch == '\n' || ch == '\0'),
                      "byte 0x%02x", ch);
    }
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
    TCase *tc = tcase_create("head");

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

    tc = tcase_create("fields");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_app_connection_dropped);
    tcase_add_test(tc, test_app_transfer_encoding_dropped);
    tcase_add_test(tc, test_server_and_date_added);
    tcase_add_test(tc, test_server_and_date_given);
    tcase_add_loop_test(tc, test_content_length_not_a_number, 0,
                        sizeof(bad_lengths) / sizeof(bad_lengths[0]));
    tcase_add_test(tc, test_content_length_trimmed);
    tcase_add_test(tc, test_bad_bytes);
    tcase_add_test(tc, test_bad_name);
    tcase_add_test(tc, test_name_is_a_token);
    tcase_add_test(tc, test_name_examples);
    tcase_add_test(tc, test_value_bytes);
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
