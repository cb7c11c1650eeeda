/* logfmt.c - compiles a gunicorn access log format into ops.
 *
 * Everything a request line needs that does not depend on the request is
 * settled here, once: literal text is copied into the format's pool,
 * header names are lower-cased for a case-insensitive match, environment
 * atoms are read (a worker's environment does not change while it runs)
 * and unknown atoms become '-', as gunicorn's SafeAtoms makes them.
 */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/logfmt.h"

/* The letters of gunicorn's atoms; '\0' ends them. */
static const char atom_letters[SL_ATOM_UNKNOWN] = {
    'h', 'l', 'u', 't', 'r', 'm', 'U', 'q', 'H', 's',
    'B', 'b', 'f', 'a', 'T', 'D', 'M', 'L', 'p', '\0',
};

/* The names of sluice's own atoms, from SL_ATOM_TLS_PROTOCOL on: the
 * same as their JSON keys. */
#define SL_ATOM_NAMED SL_ATOM_TLS_PROTOCOL

static const char *const atom_keys[SL_ATOM_COUNT] = {
    "remote_addr", "ident",       "user",     "time",       "request",
    "method",      "path",        "query",    "protocol",   "status",
    "bytes",       "bytes",       "referer",  "user_agent", "duration_s",
    "duration_us", "duration_ms", "duration", "pid",        "tls_protocol",
    "tls_cipher",  "unknown",
};

const char *sl_logfmt_key(sl_atom_t atom)
{
    return atom < SL_ATOM_COUNT ? atom_keys[atom] : "unknown";
}

static int fail(char *err, size_t errn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errn, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errn, fmt, ap);
    va_end(ap);
    return -1;
}

/* Copy N bytes of P into F's pool, lower-cased when LOWER; *OFF gets
 * where. 0, or -1 when the pool is full. */
static int pool_put(sl_logfmt_t *f, const char *p, size_t n, bool lower,
                    uint16_t *off)
{
    size_t i;

    if (n > sizeof(f->pool) - f->pool_len)
        return -1;
    *off = (uint16_t)f->pool_len;
    for (i = 0; i < n; i++)
        f->pool[f->pool_len + i] =
            lower ? (char)tolower((unsigned char)p[i]) : p[i];
    f->pool_len += n;
    return 0;
}

static sl_logop_t *new_op(sl_logfmt_t *f)
{
    if (f->nops >= SL_LOGFMT_MAX_OPS)
        return NULL;
    memset(&f->ops[f->nops], 0, sizeof(f->ops[0]));
    return &f->ops[f->nops++];
}

/* Literal text P[0..N): joins the op before when that is text too. */
static int add_lit(sl_logfmt_t *f, const char *p, size_t n)
{
    sl_logop_t *op;
    uint16_t off;

    if (n == 0)
        return 0;
    if (pool_put(f, p, n, false, &off) < 0)
        return -1;
    op = f->nops > 0 ? &f->ops[f->nops - 1] : NULL;
    if (op != NULL && op->kind == SL_OP_LIT &&
        (size_t)op->name_off + op->name_len == off) {
        op->name_len = (uint16_t)(op->name_len + n);
        return 0;
    }
    if ((op = new_op(f)) == NULL)
        return -1;
    op->kind = SL_OP_LIT;
    op->name_off = off;
    op->name_len = (uint16_t)n;
    return 0;
}

/* "{name}i", "{name}o", "{name}e" or a letter: one op. */
static int add_atom(sl_logfmt_t *f, const char *p, size_t n)
{
    sl_logop_t *op = new_op(f);
    const char *v;
    size_t i;

    if (op == NULL)
        return -1;
    op->kind = SL_OP_ATOM;
    op->atom = SL_ATOM_UNKNOWN;
    if (n >= 3 && p[0] == '{' && p[n - 2] == '}' &&
        (p[n - 1] == 'i' || p[n - 1] == 'o' || p[n - 1] == 'e')) {
        char name[256];
        size_t nn = n - 3;
        if (nn >= sizeof(name))
            return -1;
        memcpy(name, p + 1, nn);
        name[nn] = '\0';
        op->kind = p[n - 1] == 'i'   ? SL_OP_REQ_HDR
                   : p[n - 1] == 'o' ? SL_OP_RESP_HDR
                                     : SL_OP_ENV;
        if (pool_put(f, name, nn, op->kind != SL_OP_ENV, &op->name_off) < 0)
            return -1;
        op->name_len = (uint16_t)nn;
        f->resp_headers |= op->kind == SL_OP_RESP_HDR;
        if (op->kind != SL_OP_ENV)
            return 0;
        v = getenv(name);
        op->val_len = UINT16_MAX;
        if (v != NULL) {
            if (pool_put(f, v, strlen(v), false, &op->val_off) < 0)
                return -1;
            op->val_len = (uint16_t)strlen(v);
        }
        return 0;
    }
    for (i = 0; n == 1 && atom_letters[i] != '\0'; i++)
        if (atom_letters[i] == p[0])
            op->atom = (uint8_t)i;
    for (i = SL_ATOM_NAMED; n > 1 && i < SL_ATOM_UNKNOWN; i++)
        if (strlen(atom_keys[i]) == n && memcmp(atom_keys[i], p, n) == 0)
            op->atom = (uint8_t)i;
    f->tls |=
        op->atom == SL_ATOM_TLS_PROTOCOL || op->atom == SL_ATOM_TLS_CIPHER;
    if (op->atom == SL_ATOM_UNKNOWN) {
        f->unknown = true;
        if (pool_put(f, p, n, false, &op->name_off) < 0)
            return -1;
        op->name_len = (uint16_t)n;
    }
    return 0;
}

int sl_logfmt_compile(sl_logfmt_t *f, const char *fmt, bool json, char *err,
                      size_t errn)
{
    const char *p, *lit, *name, *close;

    memset(f, 0, sizeof(*f));
    if (fmt != NULL && strcmp(fmt, "json") == 0) {
        json = true;
        fmt = NULL;
    }
    if (fmt == NULL || fmt[0] == '\0')
        fmt = SL_LOGFMT_DEFAULT;
    f->json = json;
    for (p = lit = fmt; *p != '\0';) {
        if (*p != '%') {
            p++;
            continue;
        }
        if (add_lit(f, lit, (size_t)(p - lit)) < 0)
            goto out_full;
        if (p[1] == '%') {
            if (add_lit(f, "%", 1) < 0)
                goto out_full;
            p += 2;
            lit = p;
            continue;
        }
        if (p[1] != '(')
            return fail(err, errn,
                        "'%%' at offset %zu is not %%(name)s or %%%%",
                        (size_t)(p - fmt));
        name = p + 2;
        close = strchr(name, ')');
        if (close == NULL)
            return fail(err, errn, "'%%(' at offset %zu is never closed",
                        (size_t)(p - fmt));
        p = close + 1;
        /* Python's flags and width are accepted and ignored */
        while (*p != '\0' && strchr("-+ #0123456789.", *p) != NULL)
            p++;
        if (*p != 's' && *p != 'd' && *p != 'r' && *p != 'i')
            return fail(err, errn,
                        "%%(%.*s) at offset %zu: expected a conversion such"
                        " as 's' after it",
                        (int)(close - name), name, (size_t)(name - 2 - fmt));
        if (add_atom(f, name, (size_t)(close - name)) < 0)
            goto out_full;
        lit = ++p;
    }
    if (add_lit(f, lit, (size_t)(p - lit)) < 0)
        goto out_full;
    return 0;

out_full:
    return fail(err, errn, "too long: at most %d atoms and %d bytes of text",
                SL_LOGFMT_MAX_OPS, SL_LOGFMT_POOL);
}
