/* response.c - a WSGI or ASGI response as HTTP/1.1 bytes.
 *
 * The head is copied, never re-encoded (WSGI's latin-1 str and ASGI's bytes
 * are both one byte per character); a name must be an RFC 9110 token and
 * a value may not hold what would split the head (CR, LF, NUL), for WSGI
 * and ASGI alike. Connection and Transfer-Encoding belong to the server:
 * the app's are read for intent and dropped, and the framing is chosen
 * here so a hello-world response goes out with a Content-Length in the
 * same write as its head.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "common/date.h"
#include "worker/loop/http.h"
#include "worker/loop/response.h"

bool sl_response_bad_bytes(const char *p, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (p[i] == '\r' || p[i] == '\n' || p[i] == '\0')
            return true;
    return false;
}

/* RFC 9110's tchar: the bytes a field name (a token) may hold. */
static const bool tchar[256] = {
    ['!'] = true,  ['#'] = true, ['$'] = true, ['%'] = true, ['&'] = true,
    ['\''] = true, ['*'] = true, ['+'] = true, ['-'] = true, ['.'] = true,
    ['^'] = true,  ['_'] = true, ['`'] = true, ['|'] = true, ['~'] = true,
    ['0'] = true,  ['1'] = true, ['2'] = true, ['3'] = true, ['4'] = true,
    ['5'] = true,  ['6'] = true, ['7'] = true, ['8'] = true, ['9'] = true,
    ['A'] = true,  ['B'] = true, ['C'] = true, ['D'] = true, ['E'] = true,
    ['F'] = true,  ['G'] = true, ['H'] = true, ['I'] = true, ['J'] = true,
    ['K'] = true,  ['L'] = true, ['M'] = true, ['N'] = true, ['O'] = true,
    ['P'] = true,  ['Q'] = true, ['R'] = true, ['S'] = true, ['T'] = true,
    ['U'] = true,  ['V'] = true, ['W'] = true, ['X'] = true, ['Y'] = true,
    ['Z'] = true,  ['a'] = true, ['b'] = true, ['c'] = true, ['d'] = true,
    ['e'] = true,  ['f'] = true, ['g'] = true, ['h'] = true, ['i'] = true,
    ['j'] = true,  ['k'] = true, ['l'] = true, ['m'] = true, ['n'] = true,
    ['o'] = true,  ['p'] = true, ['q'] = true, ['r'] = true, ['s'] = true,
    ['t'] = true,  ['u'] = true, ['v'] = true, ['w'] = true, ['x'] = true,
    ['y'] = true,  ['z'] = true,
};

bool sl_response_bad_name(const char *p, size_t n)
{
    size_t i;

    if (n == 0)
        return true;
    for (i = 0; i < n; i++)
        if (!tchar[(unsigned char)p[i]])
            return true;
    return false;
}

/* Append N bytes of P to B for RS's head. A failure sticks: the head is
 * unusable from then on, whatever later appends manage. Macros, so that
 * every append is inlined and a literal's length stays a constant (a head
 * is a dozen small appends per request). */
#define PUT(rs, b, p, n)  ((rs)->nomem |= sl_buf_append((b), (p), (n)) < 0)
#define PUT_LIT(rs, b, s) PUT((rs), (b), (s), sizeof(s) - 1)

int sl_response_begin(sl_response_t *rs, sl_buf_t *b, const sl_req_t *req,
                      int status, const char *line, size_t ln)
{
    memset(rs, 0, sizeof(*rs));
    rs->status = status;
    rs->no_body = req->head || status < 200 || status == 204 || status == 304;
    b->len = b->off = 0;
    PUT_LIT(rs, b, "HTTP/1.1 ");
    if (line != NULL) {
        PUT(rs, b, line, ln);
    } else {
        const char *r = sl_http_reason(status);
        char code[4] = {(char)('0' + status / 100),
                        (char)('0' + status / 10 % 10),
                        (char)('0' + status % 10), ' '};
        PUT(rs, b, code, sizeof(code));
        PUT(rs, b, r, strlen(r));
    }
    PUT_LIT(rs, b, "\r\n");
    return rs->nomem ? -1 : 0;
}

int sl_response_field(sl_response_t *rs, sl_buf_t *b, const char *name,
                      size_t nn, const char *value, size_t vn)
{
    if (sl_http_name_is(name, nn, "content-length")) {
        if (sl_http_parse_u64(value, vn, &rs->cl) < 0)
            return -2;
        rs->app_cl = true;
    } else if (sl_http_name_is(name, nn, "connection")) {
        if (vn == 5 && sl_http_name_is(value, 5, "close"))
            rs->close = true;
        return 0; /* hop-by-hop: the server's to send */
    } else if (sl_http_name_is(name, nn, "transfer-encoding")) {
        return 0; /* the server frames the body */
    } else if (sl_http_name_is(name, nn, "server")) {
        rs->has_server = true;
    } else if (sl_http_name_is(name, nn, "date")) {
        rs->has_date = true;
    }
    PUT(rs, b, name, nn);
    PUT_LIT(rs, b, ": ");
    PUT(rs, b, value, vn);
    PUT_LIT(rs, b, "\r\n");
    return rs->nomem ? -1 : 0;
}

static void put_u64(sl_response_t *rs, sl_buf_t *b, uint64_t v)
{
    char digits[20];
    size_t i = sizeof(digits);

    do
        digits[--i] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    PUT(rs, b, digits + i, sizeof(digits) - i);
}

int sl_response_end(sl_response_t *rs, sl_buf_t *b, const sl_req_t *req,
                    long long known, bool trailers, bool close)
{
    int status = rs->status;
    bool framed = status >= 200 && status != 204 && status != 304;

    if (!rs->has_server)
        PUT_LIT(rs, b, "Server: sluice\r\n");
    if (!rs->has_date)
        PUT(rs, b, sl_date_line(), SL_DATE_LINE_LEN);
    if (rs->app_cl) {
        /* a sized body has no room for trailers */
    } else if (trailers && sl_req_chunks(req) && framed) {
        rs->chunked = !req->head;
        rs->trailers = rs->chunked;
        if (rs->chunked)
            PUT_LIT(rs, b, "Transfer-Encoding: chunked\r\n");
    } else if (known >= 0 && framed) {
        PUT_LIT(rs, b, "Content-Length: ");
        put_u64(rs, b, (uint64_t)known);
        PUT_LIT(rs, b, "\r\n");
        rs->app_cl = true;
        rs->cl = (uint64_t)known;
    } else if (!rs->no_body) {
        if (sl_req_chunks(req)) {
            rs->chunked = true;
            PUT_LIT(rs, b, "Transfer-Encoding: chunked\r\n");
        } else {
            rs->close = true; /* HTTP/1.0: the close ends the body */
        }
    }
    if (!req->keep_alive || rs->close || close) {
        rs->close = true;
        PUT_LIT(rs, b, "Connection: close\r\n");
    } else if (!sl_req_chunks(req)) {
        PUT_LIT(rs, b, "Connection: keep-alive\r\n");
    }
    PUT_LIT(rs, b, "\r\n");
    return rs->nomem ? -1 : 0;
}

bool sl_response_ends_connection(const sl_response_t *rs)
{
    return rs->close || (rs->app_cl && !rs->no_body && rs->sent < rs->cl);
}

void sl_response_frame(sl_response_t *rs, struct iovec *iov, int *n,
                       char *size_line, const void *data, size_t len, bool end)
{
    static const char crlf_end[] = "\r\n0\r\n\r\n";

    if (rs->no_body)
        len = 0;
    if (rs->app_cl && rs->sent + len > rs->cl)
        len = (size_t)(rs->cl - rs->sent); /* never more than promised */
    if (len > 0) {
        if (rs->chunked) {
            iov[*n].iov_base = size_line;
            iov[(*n)++].iov_len =
                (size_t)snprintf(size_line, 24, "%zx\r\n", len);
        }
        iov[*n].iov_base = (void *)data;
        iov[(*n)++].iov_len = len;
        rs->sent += len;
    }
    if (!rs->chunked)
        return;
    end = end && !rs->trailers;
    if (len > 0) {
        iov[*n].iov_base = (void *)crlf_end;
        iov[(*n)++].iov_len = end ? sizeof(crlf_end) - 1 : 2;
    } else if (end) {
        iov[*n].iov_base = (void *)(crlf_end + 2);
        iov[(*n)++].iov_len = sizeof(crlf_end) - 3;
    }
}
