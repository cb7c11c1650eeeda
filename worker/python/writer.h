/* writer.h - one response, from the app's status and headers to END: the
 * writer WSGI and ASGI share.
 *
 * An interface converts what its app gave (WSGI's status text and (str,
 * str) tuples, ASGI's int and [bytes, bytes] pairs) and decides how to wait
 * for credit (a WSGI lane blocks without the GIL, an ASGI send() awaits);
 * the writer does the rest the same way for both: the head, the framing of
 * the body, the END that gives the connection back to the loop, and the
 * way a broken response ends (a 500 while nothing went out, a closed
 * connection once something did).
 */
#ifndef SL_WRITER_H
#define SL_WRITER_H

#include <Python.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/buf.h"
#include "worker/loop/exchange.h"
#include "worker/loop/response.h"

/* How an interface's header list holds its pairs (writer.c). */
typedef struct sl_writer_iface sl_writer_iface_t;

/* A list of (str, str) tuples of latin-1 text, checked when the head is
 * built (PEP 3333). */
extern const sl_writer_iface_t sl_writer_wsgi;

/* A list or tuple of [bytes, bytes] pairs, checked by
 * sl_writer_check_headers() when the app sends them (ASGI). */
extern const sl_writer_iface_t sl_writer_asgi;

/* One response. Its fields are read-only outside writer.c. */
typedef struct {
    const sl_writer_iface_t *iface; /* borrowed: static */
    sl_exch_t *ex;                  /* borrowed: exchanges outlive requests */
    uint32_t gen;                   /* the request's generation */
    sl_buf_t *scratch; /* borrowed: where the head, an error answer or the
                          trailers are built; the caller's, reused */
    sl_response_t rs;  /* the head's framing, once start() built it */
    bool started;      /* start() built the head (it may not be out yet) */
    bool headed;       /* the head waits in *scratch for the next part */
    bool trailers;     /* the app announced trailers: end() sends them */
    bool sent;         /* bytes of the response were queued */
    bool ended;        /* END was queued: the connection moved on */
    bool gone;         /* nothing more goes out: ended, or the client left */
} sl_writer_t;

/* Set W up for request GEN of C, for an app of IFACE, building in
 * SCRATCH (which must outlive the calls below; it is emptied by them).
 * Drops the lent bytes the loop gave back meanwhile. GIL held. */
void sl_writer_init(sl_writer_t *w, const sl_writer_iface_t *iface,
                    sl_buf_t *scratch, sl_exch_t *c, uint32_t gen);

/* Build the head into the scratch, to go out with the next body(), end()
 * or sendfile(): STATUS (100..999) with LINE[0..LN) as the app wrote the
 * status ("200 OK"), or the reason table's when LINE is NULL; HEADERS of
 * W's interface; KNOWN the whole body length when known, else -1;
 * TRAILERS when the app will end the response with trailer fields. The
 * connection is asked to close when the worker drains or an unread body
 * is too big. 0, or -1 with an exception (a bad pair or Content-Length):
 * nothing was sent. GIL held. */
int sl_writer_start(sl_writer_t *w, int status, const char *line, size_t ln,
                    PyObject *headers, long long known, bool trailers);

/* Bytes of one body part each interface queues by one sl_writer_body()
 * call at most, waiting for credit between slices (wsgi.c, asgi_io.c).
 * Queued whole, a 1 MiB body took a fresh 2 MiB output buffer per
 * response, and 16 connections at once kept the worker faulting its pages
 * in: 2.8-4.3 ms of CPU per response (gunicorn and uvicorn: 0.3-0.6). */
#define SL_WRITER_SLICE (64 * 1024)

/* Queue LEN body bytes at DATA (the head first when it waits). LAST: they
 * are the body's last, and the response ends with them unless trailers
 * were announced (then end() sends them). Never blocks. 0; 1 when more
 * than the credit is queued now (the caller waits: sl_exch_wait_credit()
 * or SL_AWAIT_CREDIT); -1 when the client is gone (stop producing). */
int sl_writer_body(sl_writer_t *w, const void *data, size_t len, bool last);

/* Bodies of at least this many bytes, when they are a response's last
 * part, go out by reference (sl_writer_lend()) rather than copied. */
#define SL_WRITER_LEND_MIN SL_WRITER_SLICE

/* Queue BYTES, an exact bytes object, as the body's last part and end the
 * response, lending the loop BYTES itself instead of copying it: the loop
 * writes straight from it and gives it back (sl_py_lent_release()) when
 * written. Only a body framed by Content-Length (not chunked, no
 * trailers) of SL_WRITER_LEND_MIN bytes or more is lent; 1 says it was not
 * (nothing done: call sl_writer_body()). 0 when queued, -1 when the
 * client is gone (the response is ended either way). GIL held. */
int sl_writer_lend(sl_writer_t *w, PyObject *bytes);

/* The executors' release (exec.h): note OWNER, a bytes object lent by
 * sl_writer_lend(), for sl_writer_lent_collect() to drop. Any thread, no
 * GIL: the loop thread gives lent bytes back without it. */
void sl_writer_lent_release(void *owner);

/* Drop what the loop gave back. Cheap when it gave nothing back: called as
 * each request starts (sl_writer_init()) and before the interpreter ends.
 * GIL held. */
void sl_writer_lent_collect(void);

/* End the response: the head when it waits, the last chunk, or TRAILERS
 * (pairs of W's interface, already checked; NULL for none) when they were
 * announced and the body is chunked. 0, or -1 when the client is gone or
 * the trailers could not be built (then the connection closes). GIL held
 * when TRAILERS is not NULL. */
int sl_writer_end(sl_writer_t *w, PyObject *trailers);

/* Send the head when it waits, then LEN bytes of FD from OFF by
 * sendfile(2) as the rest of the body, and END. LEN is cut to what the
 * head's Content-Length still allows; a bodiless response sends none. W
 * takes FD (closed on every path). The body must not be chunked (a head
 * start() built with KNOWN >= 0 never is). 0, or -1 when the client is
 * gone; the response is ended either way. */
int sl_writer_sendfile(sl_writer_t *w, int fd, off_t off, uint64_t len);

/* End a broken response: an error answer with STATUS when nothing was
 * sent, else a closed connection. Does nothing once the response ended. */
void sl_writer_fail(sl_writer_t *w, int status);

/* Validate HEADERS, a list or tuple of [bytes, bytes] pairs, as an ASGI
 * app gave them (WHAT names the message in errors): each name an RFC 9110
 * token, no CR, LF or NUL in a value. 0, or -1 with a TypeError or
 * ValueError set. GIL held. */
int sl_writer_check_headers(PyObject *headers, const char *what);

#endif
