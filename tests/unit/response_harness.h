/* response_harness.h - what the response framing suites
 * (test_response*.c, for worker/loop/response.c) share: the request a
 * response answers, and the helpers that frame one and read its bytes back.
 */
#ifndef SL_TEST_RESPONSE_HARNESS_H
#define SL_TEST_RESPONSE_HARNESS_H

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

static inline void setup(void)
{
    sl_log_set_level(SL_LOG_ERROR);
    sl_date_update();
    memset(&req, 0, sizeof(req));
    memset(&rs, 0, sizeof(rs));
    memset(&head, 0, sizeof(head));
}

static inline void teardown(void)
{
    sl_buf_free(&head);
}

/* The request: HTTP/1.MINOR, keep-alive as asked, HEAD or not. */
static inline void request(int minor, bool keep_alive, bool is_head)
{
    req.major = 1;
    req.minor = (uint8_t)minor;
    req.keep_alive = keep_alive;
    req.head = is_head;
}

/* The head built so far, as text. */
static inline const char *head_text(void)
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
static inline const char *build(int status, long long known, bool trailers,
                                bool close, ...)
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
static inline const char *frame(const void *data, size_t len, bool end)
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

static inline const char *frames(const char *s, bool end)
{
    return frame(s, strlen(s), end);
}

#endif
