/* logfmt.h - an access log format, compiled once into a list of ops.
 *
 * Operators paste their gunicorn --access-logformat, so the syntax is
 * Python's %-style: "%(h)s %(l)s ... \"%(a)s\"", header atoms
 * "%({x-request-id}i)s", "%({content-type}o)s", environment atoms
 * "%({HOME}e)s", and "%%" for a percent sign. Compiling is pure (no
 * request, no I/O), so the supervisor can check a format while it reads
 * the command line and every worker compiles the same one at start; the
 * worker's loop thread renders lines from the ops (worker/loop/accesslog.c)
 * without parsing anything per request.
 */
#ifndef SL_LOGFMT_H
#define SL_LOGFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* gunicorn's default access log format. */
#define SL_LOGFMT_DEFAULT                                                      \
    "%(h)s %(l)s %(u)s %(t)s \"%(r)s\" %(s)s %(b)s \"%(f)s\" \"%(a)s\""

#define SL_LOGFMT_MAX_OPS 64
#define SL_LOGFMT_POOL    4096 /* literal text, header names, env values */

/* The atoms, gunicorn's letters in a fixed order (the unit test walks
 * them all), then sluice's own, which have names, not letters: gunicorn
 * renders a name it does not know as '-', so a format with them still
 * works there. */
typedef enum {
    SL_ATOM_H = 0,        /* h: remote address */
    SL_ATOM_L,            /* l: '-' */
    SL_ATOM_U,            /* u: user of Basic Authorization, or '-' */
    SL_ATOM_T,            /* t: [10/Oct/2000:13:55:36 +0000] */
    SL_ATOM_R,            /* r: request line */
    SL_ATOM_M,            /* m: method */
    SL_ATOM_PATH,         /* U: path, percent-decoded */
    SL_ATOM_Q,            /* q: query string */
    SL_ATOM_PROTO,        /* H: protocol */
    SL_ATOM_S,            /* s: status */
    SL_ATOM_BYTES,        /* B: body bytes sent */
    SL_ATOM_B,            /* b: the same, '-' for none */
    SL_ATOM_F,            /* f: Referer */
    SL_ATOM_A,            /* a: User-Agent */
    SL_ATOM_SECS,         /* T: duration, whole seconds */
    SL_ATOM_D,            /* D: duration, microseconds */
    SL_ATOM_MS,           /* M: duration, milliseconds */
    SL_ATOM_LSECS,        /* L: duration, decimal seconds */
    SL_ATOM_P,            /* p: <pid> */
    SL_ATOM_TLS_PROTOCOL, /* tls_protocol: TLSv1.3, '-' without TLS */
    SL_ATOM_TLS_CIPHER,   /* tls_cipher: OpenSSL's name of the suite */
    SL_ATOM_UNKNOWN,      /* any other name: '-', as gunicorn */
    SL_ATOM_COUNT
} sl_atom_t;

typedef enum {
    SL_OP_LIT = 0,  /* text: pool[name_off..+name_len] */
    SL_OP_ATOM,     /* atom */
    SL_OP_REQ_HDR,  /* a request header: name (lower case) in the pool */
    SL_OP_RESP_HDR, /* a response header: name (lower case) in the pool */
    SL_OP_ENV,      /* an environment variable: name, and its value (as
                       at compile time) at val_off, val_len; val_len ==
                       UINT16_MAX when unset */
} sl_op_kind_t;

typedef struct {
    uint8_t kind; /* sl_op_kind_t */
    uint8_t atom; /* sl_atom_t for SL_OP_ATOM */
    uint16_t name_len, val_len;
    uint16_t name_off, val_off; /* into the pool */
} sl_logop_t;

typedef struct {
    sl_logop_t ops[SL_LOGFMT_MAX_OPS];
    int nops;
    char pool[SL_LOGFMT_POOL];
    size_t pool_len;
    bool json;         /* one JSON object per line */
    bool resp_headers; /* a %({x}o)s asks for the response head */
    bool tls;          /* a TLS atom is named */
    bool unknown;      /* an atom no one knows was met (rendered '-') */
} sl_logfmt_t;

/* Compile FMT (gunicorn's syntax; NULL or "" for the default; "json" for
 * the default's fields as JSON) into F; JSON asks for JSON lines with the
 * fields FMT names. Environment atoms are read now. 0, or -1 with a
 * one-line reason in ERR[0..ERRN) (a '%' not followed by "(name)s" or
 * "%", an unclosed name, too many ops or too much text). */
int sl_logfmt_compile(sl_logfmt_t *f, const char *fmt, bool json, char *err,
                      size_t errn);

/* The JSON key of ATOM ("remote_addr", "status", ...). */
const char *sl_logfmt_key(sl_atom_t atom);

#endif
