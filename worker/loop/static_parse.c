/* static_parse.c - a static file's request, read (static_parse.h).
 *
 * Everything here reads bytes a client chose, so every loop is bounded
 * by N and every write by CAP; tests/fuzz/fuzz_static.c holds it to that.
 */
#include "config.h"

#include <string.h>
#include <strings.h>

#include "worker/loop/static_parse.h"

static int hexval(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* A byte no file name under a static folder may hold: it would end the
 * name (NUL), cross into another folder ('/' arriving encoded), mean a
 * folder to another system ('\\'), or forge lines in a log. */
static bool refused_byte(unsigned char c)
{
    return c < 0x20 || c == 0x7f || c == '\\';
}

long sl_static_path(const char *p, size_t n, char *out, size_t cap)
{
    size_t i = 0, o = 0, start, len;
    int hi, lo;

    if (cap == 0)
        return SL_SPATH_LONG;
    while (i <= n) {
        /* one segment, decoded into out[start..o); the '/' before it is
         * written with its first byte (an empty one is no segment) */
        start = o;
        while (i < n && p[i] != '/') {
            unsigned char c = (unsigned char)p[i];
            if (c == '%') {
                if (i + 2 >= n || (hi = hexval((unsigned char)p[i + 1])) < 0 ||
                    (lo = hexval((unsigned char)p[i + 2])) < 0)
                    return SL_SPATH_BAD;
                c = (unsigned char)(hi * 16 + lo);
                if (c == '/')
                    return SL_SPATH_BAD;
                i += 3;
            } else {
                i++;
            }
            if (refused_byte(c))
                return SL_SPATH_BAD;
            if (o == start && start > 0) {
                if (o + 1 >= cap)
                    return SL_SPATH_LONG;
                out[o++] = '/';
                start = o;
            }
            if (o + 1 >= cap)
                return SL_SPATH_LONG;
            out[o++] = (char)c;
        }
        len = o - start;
        if (len > 0 && out[start] == '.') {
            if (len == 1 || (len == 2 && out[start + 1] == '.'))
                return SL_SPATH_BAD;
            return SL_SPATH_HIDDEN;
        }
        i++; /* past the '/' (or the end) */
    }
    out[o] = '\0';
    return (long)o;
}

static void trim(const char **p, size_t *n)
{
    while (*n > 0 && (**p == ' ' || **p == '\t'))
        (*p)++, (*n)--;
    while (*n > 0 && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t'))
        (*n)--;
}

/* The decimal number at *P (at least one digit) into *V, UINT64_MAX
 * when it is larger (a position past any file's end); *P and *N move past
 * it. -1 when there is none. */
static int number(const char **p, size_t *n, uint64_t *v)
{
    size_t k = 0;
    unsigned d;

    *v = 0;
    while (k < *n && (*p)[k] >= '0' && (*p)[k] <= '9') {
        d = (unsigned)((*p)[k] - '0');
        *v = *v > (UINT64_MAX - d) / 10 ? UINT64_MAX : *v * 10 + d;
        k++;
    }
    if (k == 0)
        return -1;
    *p += k;
    *n -= k;
    return 0;
}

int sl_static_range(const char *v, size_t n, uint64_t size, uint64_t *first,
                    uint64_t *last)
{
    uint64_t a, b;

    trim(&v, &n);
    if (n < 6 || strncasecmp(v, "bytes", 5) != 0)
        return SL_RANGE_NONE;
    v += 5, n -= 5;
    trim(&v, &n);
    if (n == 0 || *v != '=')
        return SL_RANGE_NONE;
    v++, n--;
    if (memchr(v, ',', n) != NULL)
        return SL_RANGE_NONE; /* several ranges: the whole instead */
    trim(&v, &n);
    if (n > 0 && *v == '-') { /* the last B bytes */
        v++, n--;
        if (number(&v, &n, &b) < 0 || n != 0)
            return SL_RANGE_NONE;
        if (b == 0 || size == 0)
            return SL_RANGE_UNSAT;
        *first = b >= size ? 0 : size - b;
        *last = size - 1;
        return SL_RANGE_ONE;
    }
    if (number(&v, &n, &a) < 0 || n == 0 || *v != '-')
        return SL_RANGE_NONE;
    v++, n--;
    b = UINT64_MAX;
    if (n > 0 && (number(&v, &n, &b) < 0 || n != 0 || b < a))
        return SL_RANGE_NONE;
    if (a >= size)
        return SL_RANGE_UNSAT;
    *first = a;
    *last = b < size ? b : size - 1;
    return SL_RANGE_ONE;
}

/* The blanks at V[I..N) skipped: the new I. */
static size_t blanks(const char *v, size_t n, size_t i)
{
    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    return i;
}

bool sl_static_etag_match(const char *v, size_t n, const char *tag, size_t tn,
                          bool weak)
{
    size_t i = blanks(v, n, 0), end;
    bool item_weak, hit = false;

    if (i < n && v[i] == '*') /* "*" alone: any tag */
        return blanks(v, n, i + 1) == n;
    /* the whole list is read: a malformed one names nothing, even after
     * an item that matched */
    for (;;) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        if (i == n)
            return hit;
        item_weak = n - i >= 2 && v[i] == 'W' && v[i + 1] == '/';
        if (item_weak)
            i += 2;
        if (i == n || v[i] != '"')
            return false;
        for (end = i + 1; end < n && v[end] != '"'; end++)
            ;
        if (end == n)
            return false;
        end++; /* past the closing quote */
        if ((weak || !item_weak) && end - i == tn &&
            memcmp(v + i, tag, tn) == 0)
            hit = true;
        i = blanks(v, n, end);
        if (i < n && v[i] != ',')
            return false; /* two items with no comma between */
    }
}

/* A q-value's text, Q[0..N): is it above 0? -1 when it is not one. */
static int qvalue_positive(const char *q, size_t n)
{
    size_t i;

    if (n == 0 || (q[0] != '0' && q[0] != '1'))
        return -1;
    if (q[0] == '1')
        return 1;
    for (i = 1; i < n; i++)
        if (q[i] != '.' && q[i] != '0')
            return (q[i] >= '1' && q[i] <= '9') ? 1 : -1;
    return 0;
}

int sl_static_accept(const char *v, size_t n)
{
    int yes = 0, no = 0, star = -1; /* star: -1 unnamed, 0 refused, 1 */
    size_t i = 0;

    while (i < n) {
        const char *base = v + i, *item = base, *semi, *q;
        size_t len, name_len, qn;
        int pos = 1, coding = 0;
        const char *comma = memchr(base, ',', n - i);

        len = comma ? (size_t)(comma - base) : n - i;
        i += len + 1;
        semi = memchr(item, ';', len);
        name_len = semi ? (size_t)(semi - item) : len;
        trim(&item, &name_len);
        if (semi != NULL) { /* ";q=..." (the only parameter defined) */
            q = semi + 1;
            qn = len - (size_t)(q - base);
            trim(&q, &qn);
            if (qn < 2 || (q[0] != 'q' && q[0] != 'Q') || q[1] != '=')
                continue; /* not understood: ignored */
            if ((pos = qvalue_positive(q + 2, qn - 2)) < 0)
                continue;
        }
        if (name_len == 2 && strncasecmp(item, "br", 2) == 0)
            coding = SL_ENC_BR;
        else if ((name_len == 4 && strncasecmp(item, "gzip", 4) == 0) ||
                 (name_len == 6 && strncasecmp(item, "x-gzip", 6) == 0))
            coding = SL_ENC_GZIP;
        else if (name_len == 1 && item[0] == '*')
            star = pos;
        if (coding != 0 && pos)
            yes |= coding;
        else if (coding != 0)
            no |= coding;
    }
    if (star == 1)
        yes |= (SL_ENC_BR | SL_ENC_GZIP) & ~no;
    return yes & ~no;
}
