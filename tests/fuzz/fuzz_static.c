/* fuzz_static.c - a libFuzzer target for what a request for a static file
 * says (static_parse.h): its path made a path inside the folder, its Range,
 * its entity-tag lists, its Accept-Encoding.
 *
 * The input: byte 0 is a room CAP for the path (0..255); byte 1's low six
 * bits a shift and bytes 2..9 a 64-bit little-endian number, shifted right
 * by it: the representation's SIZE (so small sizes are common); the rest,
 * V, is given to all four functions: whole as a path, a Range value and an
 * Accept-Encoding value, and cut at its first '\n' into an entity-tag list
 * and the tag (a fixed one when there is no '\n').
 *
 * Beyond "no crash, no UB, no byte read or written out of bounds" (the
 * path goes to a buffer of exactly CAP bytes), each answer is held to the
 * header's contract:
 * - the path: a path of the header's shape (shorter than CAP,
 *   NUL-terminated, no '/' at either end, no "//", no segment beginning
 *   with '.', no control byte or '\\') that a decoder written here from
 *   the contract alone also makes, refused for the reason it finds; with
 *   room for the input it is never "long", with CAP it is long exactly
 *   when it does not fit; and a path made without a '%' in it reads back
 *   as itself;
 * - the Range: FIRST <= LAST < SIZE; "bytes=" then one first-last or
 *   suffix (any number of digits, the spaces static_parse.c allows around
 *   the value and the '=') answered as RFC 9110 §14.1.2 does, anything else
 *   ignored;
 * - the entity tags: the strong comparison names no more than the weak
 *   one; only "*" or the tag's own bytes name it; a strong tag names
 *   itself, W/ before it names it weakly only, a weak tag nothing
 *   strongly; a list that names a tag is well formed (comma-separated
 *   quoted tags, "*" alone);
 * - Accept-Encoding: only SL_ENC_* bits; a well-formed list of distinct
 *   codings (RFC 9110 §12.5.3 token;q=qvalue) gets exactly the codings it
 *   gives a q above 0, by name or, unnamed, through "*"; ", identity"
 *   after a list changes nothing.
 *
 * Built by a --enable-fuzzing configuration (tests/fuzz/run.sh).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "worker/loop/static_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_static: %s:%d: %s\n", __FILE__, __LINE__,    \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

#define HEAD 10 /* cap, shift, size: the bytes before V */

static bool ows(char c)
{
    return c == ' ' || c == '\t';
}

static void trim(const char **p, size_t *n)
{
    while (*n > 0 && ows(**p))
        (*p)++, (*n)--;
    while (*n > 0 && ows((*p)[*n - 1]))
        (*n)--;
}

static int hex(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (unsigned char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* ------------------------------------------------------------------ */
/* the path                                                           */

/* The contract's decoding of P[0..N), segment by segment, into OUT (room
 * for N + 1): its length, or the first refusal of a segment (so a "bad"
 * and a "hidden" segment in one path may each be the answer: *BAD and
 * *HIDDEN say whether there is one of either). */
static long ref_path(const char *p, size_t n, char *out, bool *bad,
                     bool *hidden)
{
    size_t i = 0, o = 0;

    *bad = *hidden = false;
    while (i <= n) {
        size_t start = o + (o > 0);
        bool seg_bad = false;
        char *seg = out + start;
        size_t len = 0;
        for (; i < n && p[i] != '/'; i++) {
            unsigned char c = (unsigned char)p[i];
            if (c == '%') {
                if (i + 2 >= n || hex((unsigned char)p[i + 1]) < 0 ||
                    hex((unsigned char)p[i + 2]) < 0) {
                    seg_bad = true;
                    break;
                }
                c = (unsigned char)(hex((unsigned char)p[i + 1]) * 16 +
                                    hex((unsigned char)p[i + 2]));
                i += 2;
                if (c == '/')
                    seg_bad = true;
            }
            if (c < 0x20 || c == 0x7f || c == '\\')
                seg_bad = true;
            seg[len++] = (char)c;
        }
        while (i < n && p[i] != '/') /* the rest of a bad segment */
            i++;
        i++;
        if (seg_bad || (len > 0 && seg[0] == '.' &&
                        (len == 1 || (len == 2 && seg[1] == '.')))) {
            *bad = true;
            continue;
        }
        if (len > 0 && seg[0] == '.') {
            *hidden = true;
            continue;
        }
        if (len == 0 || *bad || *hidden)
            continue;
        if (o > 0)
            out[o] = '/';
        o = start + len;
    }
    out[o] = '\0';
    return *bad || *hidden ? -1 : (long)o;
}

/* A path of the header's shape: segments joined by one '/', none empty
 * or beginning with '.', no byte a name may not hold. */
static void check_shape(const char *out, long len, size_t cap)
{
    CHECK(len >= 0 && (size_t)len < cap);
    CHECK(out[len] == '\0' && strlen(out) == (size_t)len);
    if (len == 0)
        return;
    CHECK(out[0] != '/' && out[len - 1] != '/');
    CHECK(strstr(out, "//") == NULL);
    for (long i = 0; i < len; i++) {
        unsigned char c = (unsigned char)out[i];
        CHECK(c >= 0x20 && c != 0x7f && c != '\\');
        if (i == 0 || out[i - 1] == '/')
            CHECK(c != '.');
    }
}

static void fuzz_path(const char *v, size_t n, size_t cap)
{
    char *big = malloc(n + 1), *ref = malloc(n + 1), *tight = malloc(cap);
    bool bad, hidden;
    long rc, want, rc_cap;

    CHECK(big != NULL && ref != NULL && (cap == 0 || tight != NULL));
    rc = sl_static_path(v, n, big, n + 1);
    want = ref_path(v, n, ref, &bad, &hidden);
    CHECK(rc != SL_SPATH_LONG); /* it never grows */
    if (rc >= 0) {
        check_shape(big, rc, n + 1);
        CHECK(want == rc && memcmp(big, ref, (size_t)rc + 1) == 0);
    } else {
        CHECK(rc == SL_SPATH_BAD || rc == SL_SPATH_HIDDEN);
        CHECK(want == -1);
        CHECK(rc == SL_SPATH_BAD ? bad : hidden);
    }
    rc_cap = sl_static_path(v, n, tight, cap);
    if (rc >= 0 && (size_t)rc < cap) {
        CHECK(rc_cap == rc && memcmp(tight, big, (size_t)rc + 1) == 0);
    } else if (rc >= 0) {
        CHECK(rc_cap == SL_SPATH_LONG);
    } else {
        CHECK(rc_cap == rc || rc_cap == SL_SPATH_LONG);
    }
    /* a path without '%' is its own decoding */
    if (rc >= 0 && memchr(big, '%', (size_t)rc) == NULL) {
        CHECK(sl_static_path(big, (size_t)rc, ref, (size_t)rc + 1) == rc);
        CHECK(memcmp(ref, big, (size_t)rc + 1) == 0);
    }
    free(big);
    free(ref);
    free(tight);
}

/* ------------------------------------------------------------------ */
/* the Range                                                          */

/* Decimal digits, at least one, the whole of P[0..N), into *V; a number
 * past UINT64_MAX is UINT64_MAX (past every end). */
static bool ref_number(const char *p, size_t n, uint64_t *v)
{
    if (n == 0)
        return false;
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        if (*v > (UINT64_MAX - (uint64_t)(p[i] - '0')) / 10)
            *v = UINT64_MAX;
        else
            *v = *v * 10 + (uint64_t)(p[i] - '0');
    }
    return true;
}

/* RFC 9110 §14.1.2 on one "bytes=" range, with the leeway for spaces
 * static_parse.c gives: around the value and around the '='. */
static int ref_range(const char *v, size_t n, uint64_t size, uint64_t *first,
                     uint64_t *last)
{
    const char *dash;
    uint64_t a, b;

    trim(&v, &n);
    if (n < 5 || strncasecmp(v, "bytes", 5) != 0)
        return SL_RANGE_NONE;
    v += 5, n -= 5;
    trim(&v, &n);
    if (n == 0 || v[0] != '=')
        return SL_RANGE_NONE;
    v++, n--;
    trim(&v, &n);
    if ((dash = memchr(v, '-', n)) == NULL)
        return SL_RANGE_NONE;
    if (dash == v) { /* -B: the last B bytes */
        if (!ref_number(v + 1, n - 1, &b))
            return SL_RANGE_NONE;
        if (b == 0 || size == 0)
            return SL_RANGE_UNSAT;
        *first = b >= size ? 0 : size - b;
        *last = size - 1;
        return SL_RANGE_ONE;
    }
    if (!ref_number(v, (size_t)(dash - v), &a))
        return SL_RANGE_NONE;
    b = UINT64_MAX;
    if (dash + 1 < v + n &&
        (!ref_number(dash + 1, (size_t)(v + n - dash - 1), &b) || b < a))
        return SL_RANGE_NONE;
    if (a >= size)
        return SL_RANGE_UNSAT;
    *first = a;
    *last = b < size ? b : size - 1;
    return SL_RANGE_ONE;
}

static void fuzz_range(const char *v, size_t n, uint64_t size)
{
    uint64_t first = 0, last = 0, rf = 0, rl = 0, f2, l2;
    int rc = sl_static_range(v, n, size, &first, &last);
    char again[64];
    int k;

    CHECK(rc == SL_RANGE_NONE || rc == SL_RANGE_ONE || rc == SL_RANGE_UNSAT);
    CHECK(rc == ref_range(v, n, size, &rf, &rl));
    if (rc == SL_RANGE_NONE)
        return;
    CHECK(memchr(v, ',', n) == NULL);
    if (rc == SL_RANGE_UNSAT)
        return;
    CHECK(first == rf && last == rl);
    CHECK(first <= last && last < size);
    /* the range answered, written back, is answered the same */
    k = snprintf(again, sizeof(again), "bytes=%llu-%llu",
                 (unsigned long long)first, (unsigned long long)last);
    if (k < (int)sizeof(again) && last < 10000000000000000000ULL) {
        CHECK(sl_static_range(again, (size_t)k, size, &f2, &l2) ==
              SL_RANGE_ONE);
        CHECK(f2 == first && l2 == last);
    }
}

/* ------------------------------------------------------------------ */
/* entity tags                                                        */

/* [W/]"...": the length of the tag at P[0..N), or 0. */
static size_t tag_len(const char *p, size_t n)
{
    size_t i = n >= 2 && p[0] == 'W' && p[1] == '/' ? 2 : 0;
    const char *q;

    if (i >= n || p[i] != '"')
        return 0;
    q = memchr(p + i + 1, '"', n - i - 1);
    return q == NULL ? 0 : (size_t)(q - p) + 1;
}

/* "*" alone, or tags separated by commas (empty items and spaces
 * allowed): RFC 9110 §13.1.1's shape, the tags' bytes unchecked. */
static bool well_formed(const char *v, size_t n)
{
    size_t i = 0, t;
    bool any = false;

    trim(&v, &n);
    if (n == 1 && v[0] == '*')
        return true;
    while (i < n) {
        while (i < n && (ows(v[i]) || v[i] == ','))
            i++;
        if (i == n)
            break;
        if ((t = tag_len(v + i, n - i)) == 0)
            return false;
        i += t;
        any = true;
        while (i < n && ows(v[i]))
            i++;
        if (i < n && v[i] != ',')
            return false;
    }
    return any;
}

static bool strong_tag(const char *t, size_t tn)
{
    return tn >= 2 && tag_len(t, tn) == tn && t[0] == '"';
}

static void fuzz_etag(const char *v, size_t n, const char *tag, size_t tn)
{
    bool weak = sl_static_etag_match(v, n, tag, tn, true);
    bool strong = sl_static_etag_match(v, n, tag, tn, false);
    bool star = memchr(v, '*', n) != NULL;
    char *w;

    CHECK(!strong || weak);
    if (weak && !star)
        CHECK(tn > 0 && memmem(v, n, tag, tn) != NULL);
    if (weak)
        CHECK(well_formed(v, n));
    if (tn >= 2 && tag[0] == 'W' && tag[1] == '/' && !star)
        CHECK(!strong); /* a weak tag names nothing strongly */
    if (!strong_tag(tag, tn))
        return;
    CHECK(sl_static_etag_match(tag, tn, tag, tn, false));
    CHECK((w = malloc(tn + 2)) != NULL);
    memcpy(w, "W/", 2);
    memcpy(w + 2, tag, tn);
    CHECK(sl_static_etag_match(w, tn + 2, tag, tn, true));
    CHECK(!sl_static_etag_match(w, tn + 2, tag, tn, false));
    free(w);
}

/* ------------------------------------------------------------------ */
/* Accept-Encoding                                                    */

/* RFC 9110 §5.6.2 tchar. */
static bool tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ): above 0
 * (1), 0, or -1 when it is not one. */
static int ref_q(const char *q, size_t n)
{
    bool pos = false;

    if (n == 0 || (q[0] != '0' && q[0] != '1') || (n > 1 && q[1] != '.') ||
        n > 5)
        return -1;
    for (size_t i = 2; i < n; i++) {
        if (q[i] < '0' || q[i] > '9' || (q[0] == '1' && q[i] != '0'))
            return -1;
        pos = pos || q[i] != '0';
    }
    return q[0] == '1' || pos;
}

/* The codings a well-formed list of distinct codings accepts, or -1 when
 * V is not one. */
static int ref_accept(const char *v, size_t n)
{
    int named = 0, yes = 0, star = -1;
    size_t i = 0;

    while (i <= n) {
        const char *item = v + i, *comma = memchr(item, ',', n - i);
        size_t len = comma ? (size_t)(comma - item) : n - i, k = 0;
        int coding = 0, pos = 1;
        i += len + 1;
        trim(&item, &len);
        if (len == 0)
            continue;
        while (k < len && tchar((unsigned char)item[k]))
            k++;
        if (k == 0)
            return -1;
        if (k == 2 && strncasecmp(item, "br", 2) == 0)
            coding = SL_ENC_BR;
        else if ((k == 4 && strncasecmp(item, "gzip", 4) == 0) ||
                 (k == 6 && strncasecmp(item, "x-gzip", 6) == 0))
            coding = SL_ENC_GZIP;
        if (k < len) { /* OWS ";" OWS "q=" qvalue */
            const char *q = item + k;
            size_t qn = len - k;
            trim(&q, &qn);
            if (qn < 1 || q[0] != ';')
                return -1;
            q++, qn--;
            trim(&q, &qn);
            if (qn < 2 || (q[0] | 0x20) != 'q' || q[1] != '=' ||
                (pos = ref_q(q + 2, qn - 2)) < 0)
                return -1;
        }
        if (k == 1 && item[0] == '*') {
            if (star >= 0)
                return -1;
            star = pos;
        }
        if (coding & named)
            return -1; /* named twice: the RFC does not say */
        named |= coding;
        if (pos)
            yes |= coding;
    }
    if (star == 1)
        yes |= (SL_ENC_BR | SL_ENC_GZIP) & ~named;
    return yes;
}

static void fuzz_accept(const char *v, size_t n)
{
    int got = sl_static_accept(v, n), want = ref_accept(v, n);
    char *more;

    CHECK((got & ~(SL_ENC_BR | SL_ENC_GZIP)) == 0);
    if (want >= 0)
        CHECK(got == want);
    CHECK((more = malloc(n + 10)) != NULL);
    memcpy(more, v, n);
    memcpy(more + n, ",identity", 9);
    CHECK(sl_static_accept(more, n + 9) == got);
    free(more);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *v = (const char *)data + (size < HEAD ? size : HEAD), *nl;
    size_t n = size < HEAD ? 0 : size - HEAD;
    uint64_t rep = 0;
    size_t cap = size > 0 ? data[0] : 0;

    for (size_t i = 2; i < HEAD && i < size; i++)
        rep |= (uint64_t)data[i] << (8 * (i - 2));
    if (size > 1)
        rep >>= data[1] & 63;
    fuzz_path(v, n, cap);
    fuzz_range(v, n, rep);
    fuzz_accept(v, n);
    if ((nl = memchr(v, '\n', n)) != NULL)
        fuzz_etag(v, (size_t)(nl - v), nl + 1, (size_t)(v + n - nl - 1));
    else
        fuzz_etag(v, n, "\"x\"", 3);
    return 0;
}
