/* accesslog.h - the access log, written by the loop thread.
 *
 * One line per request, in gunicorn's format (common/logfmt.h) or as JSON,
 * rendered when the request ends (sl_request_done()) straight into a
 * buffer the loop thread owns: no Python, no lock, no allocation per
 * request. The buffer goes out with one write(2) of whole lines when it
 * fills, on a 1 s timer and at exit. The log never blocks or kills the
 * worker: a write that fails (a full disk, a full or closed pipe) drops
 * what was buffered, and the count of lines dropped is reported to the
 * error log at most once a second.
 */
#ifndef SL_ACCESSLOG_H
#define SL_ACCESSLOG_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/logfmt.h"
#include "common/options.h"
#include "worker/loop/request.h"

typedef struct sl_conn sl_conn_t;
typedef struct sl_exch sl_exch_t;
typedef struct sl_accesslog sl_accesslog_t;

/* Bytes one line may take, at most: longer ones are cut. */
#define SL_ACCESSLOG_LINE_MAX 16384

/* Bytes buffered before a write. */
#define SL_ACCESSLOG_BUF (64 * 1024)

/* What one line says about one request. */
typedef struct {
    const sl_req_t *req; /* borrowed; NULL when no head was parsed */
    const char *peer;    /* remote address text, "" when none */
    int status;          /* 0 when no response went out */
    uint64_t body;       /* body bytes of the response */
    double start, end;   /* wall clock, seconds */
    long pid;
    const char *resp_head; /* the response head, for %({x}o)s; NULL: none */
    size_t resp_head_len;
    /* the TLS version and suite (static), for the TLS atoms; NULL: not
     * TLS, or the format names neither */
    const char *tls_protocol, *tls_cipher;
} sl_accesslog_rec_t;

/* The time atom's text, made again only when the second changes. */
typedef struct {
    time_t sec;   /* of the texts below; -1 before the first */
    char clf[40]; /* [10/Oct/2000:13:55:36 +0000] */
    char iso[40]; /* 2000-10-10T13:55:36+00:00 */
    size_t clf_len, iso_len;
} sl_accesslog_clock_t;

/* Set CLK for T (seconds since the epoch), in local time, unless it holds
 * that second already. */
void sl_accesslog_clock_set(sl_accesslog_clock_t *clk, time_t t);

/* Render REC as F says into OUT[0..N) (N >= 64): returns the length of
 * the line, which ends with '\n'. A line that does not fit is cut (a JSON
 * line is cut at a value and stays one valid object). Header values and
 * every other byte from the client are escaped: "\xNN" for controls, '"'
 * and '\' in text lines; JSON escapes (invalid UTF-8 as \u00NN) in JSON. */
size_t sl_accesslog_render(const sl_logfmt_t *f, sl_accesslog_clock_t *clk,
                           const sl_accesslog_rec_t *rec, char *out, size_t n);

/* Open the access log O asks for, with its flush timer on LOOP: *OUT is
 * NULL when there is none (the default). 0, or -1 after logging (the
 * file cannot be opened, or out of memory). */
int sl_accesslog_open(sl_accesslog_t **out, struct ev_loop *loop,
                      const sl_options_t *o);

/* Does A's format ask for response headers (%({x}o)s)? */
bool sl_accesslog_wants_head(const sl_accesslog_t *a);

/* The client address the h atom shows for X: the one a trusted proxy named
 * (--forwarded-allow-ips), else the peer (the PROXY header's source when
 * there was one), as text in BUF[0..N) or in X's request. */
const char *sl_accesslog_remote(const sl_exch_t *x, char *buf, size_t n);

/* Log X's request, which has just ended; HEAD: its head was read whole
 * (else the line shows no request). Loop thread. */
void sl_accesslog_request(sl_accesslog_t *a, const sl_exch_t *x, bool head);

/* Log REC (sl_accesslog_request() without a connection). */
void sl_accesslog_add(sl_accesslog_t *a, const sl_accesslog_rec_t *rec);

/* Write what is buffered now. 0, or -1 when it was dropped (counted). */
int sl_accesslog_flush(sl_accesslog_t *a);

/* Lines dropped and not yet reported; reports them (error log). */
uint64_t sl_accesslog_report(sl_accesslog_t *a);

/* USR1: flush, then open the file again by its name (logrotate moved
 * it). On failure the old file is kept, and that is logged. */
void sl_accesslog_reopen(sl_accesslog_t *a);

/* Flush, report, stop the timer and free A (NULL is fine). */
void sl_accesslog_close(sl_accesslog_t *a);

#endif
