/* exchange.h - one request and its response, as the executor sees them.
 *
 * An exchange is the unit an executor works on: the request record, the
 * body queue, the output it queued and its credit, the tail it lends (a
 * file or bytes), the generation that tells a stale call from a live one,
 * the mailbox under its mutex, and the access-log record of the response.
 * A connection's session carries exchanges (docs/architecture.md, "The
 * connection in layers"): HTTP/1.1 one at a time, embedded in the
 * connection; nothing here assumes that, and an HTTP/2 session will carry
 * many. No executor file names the connection: what it needs of it (the
 * client, the listener) it asks here.
 *
 * Every call below may come from another thread (a lane) while the loop
 * thread works the same exchange, so each takes the exchange's mutex and
 * first compares the generation: a call for a request that is over (an app
 * that kept wsgi.input, a send() after the client left) touches nothing.
 * The executor never writes to the socket; it queues bytes in out and
 * notifies the loop (exec.h), which takes them. An on-loop executor (inline
 * mode) *is* the loop thread: the same calls run without the handoff, and
 * where they would wait they ask the executor's wait operation, which for
 * it means the socket.
 */
#ifndef SL_EXCHANGE_H
#define SL_EXCHANGE_H

#include <ev.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "common/buf.h"
#include "worker/loop/request.h"
#include "worker/loop/tail.h"

typedef struct sl_pump sl_pump_t;
typedef struct sl_conn sl_conn_t;
typedef struct sl_conn_ws sl_conn_ws_t;
typedef struct sl_exch sl_exch_t;
typedef struct sl_tls_info sl_tls_info_t;

struct sl_exch {
    uint32_t id;     /* what tickets name it by (exec.h) */
    uint32_t gen;    /* request generation, bumped per request (under mu) */
    sl_conn_t *conn; /* borrowed: the connection carrying it (loop side
                        only: executors ask the calls below) */
    sl_req_t req;
    /* the WebSocket's messages (conn_ws.c), while it is one */
    sl_conn_ws_t *ws; /* owned: the WebSocket state, NULL for HTTP; set and
                         freed by the loop, read by the executor under mu */

    /* Shared with the executor: everything below is under mu. */
    pthread_mutex_t mu;
    /* borrowed: the condition variable of the lane thread waiting on mu
     * for body or credit (its own, exec.c), NULL when none waits; one
     * per thread rather than one per connection, most of which are idle */
    pthread_cond_t *waiter;
    sl_buf_t body;        /* request body received, not yet read by the app */
    sl_buf_t out;         /* response bytes from the executor, not yet taken */
    sl_tail_t tail;       /* after out: lent bytes or a file, owned */
    uint16_t resp_status; /* access log, metrics: the response's status, 0 =
                             none */
    /* Its answer waits for others' anyway (a request run ahead, or one
     * with requests run ahead behind it): its posts may wake the loop at
     * the end of the executor's batch (exec.h: sl_exec_hold_wake()). Set
     * by the loop. */
    bool wake_later;
    uint64_t body_total; /* body bytes received for this request */
    bool body_done;      /* the whole body is in (or there is none) */
    bool resp_done;      /* the executor sent END */
    bool close_after;    /* the executor asked to close after the response */
    bool aborted;        /* the client is gone: stop producing */
    bool peer_gone;      /* EOF after a whole request (ASGI: disconnect) */
    bool notified;       /* already in the pump's completion inbox */
    bool body_paused;    /* the loop stopped reading at a full body window:
                            a reader that empties it must notify */
    bool waiting;        /* the executor waits on cv */
    size_t inflight;     /* bytes handed to the loop, not yet written */
    ev_tstamp picked;    /* when the executor started the request (0: not
                            yet): the end of its queue time */
    uint64_t resp_body;  /* access log: its body bytes */
    sl_buf_t resp_head;  /* access log: its head, when the format asks */
};

/* Flags for sl_exch_send(). */
enum {
    SL_SEND_END = 1,   /* this is the last part of the response */
    SL_SEND_CLOSE = 2, /* close the connection after the response */
};

enum {
    SL_AWAIT_BODY = 1,       /* body bytes, or the end of the body */
    SL_AWAIT_CREDIT = 2,     /* queued output below half the credit */
    SL_AWAIT_DISCONNECT = 3, /* the client goes away */
};

/* Unread request body the loop will still drop after the response, at
 * most; past this the response should close the connection instead. */
#define SL_CONN_DISCARD_MAX (1024 * 1024)

/* Response bytes a request may have queued and not yet written, for every
 * executor: past it sl_exch_send() answers 1, and the executor waits
 * (sl_exch_wait_credit(), or SL_AWAIT_CREDIT) until half of it is written. */
#define SL_CONN_CREDIT (256 * 1024)

/* ---- executor side (any thread; in pump mode without the GIL held) ---- */

/* Queue response bytes for request GEN. Never blocks. Returns 0, 1 when
 * more than the credit is now queued (call sl_exch_wait_credit() before
 * producing more), or -1 when the request is stale or the client is gone:
 * stop producing. Out of memory, none of IOV is queued and the connection
 * is treated as gone (-1). SL_SEND_END ends the request whatever the
 * result, unless it is stale. */
int sl_exch_send(sl_exch_t *x, uint32_t gen, const struct iovec *iov,
                 int iovcnt, int flags);

/* The executor starts request GEN now: its queue time ends (metrics).
 * Any thread; a stale GEN is ignored. */
void sl_exch_started(sl_exch_t *x, uint32_t gen);

/* Wait until the queued output has drained below half the credit. Blocks:
 * call it without the GIL. 0, or -1 as above. */
int sl_exch_wait_credit(sl_exch_t *x, uint32_t gen);

/* Send LEN bytes of FD from OFF after what is queued, as the last part of
 * the response; the connection takes ownership of FD. 0 or -1 as above
 * (FD is closed on failure too). */
int sl_exch_sendfile(sl_exch_t *x, uint32_t gen, int fd, off_t off, size_t len,
                     int flags);

/* Send LEN bytes at MEM after what is queued, as the last part of the
 * response, without copying them: the executor lends them, unchanged,
 * until the loop gives OWNER back through p->exec->release() (written, or
 * dropped with the connection). 0, or -1 as above: then nothing was lent
 * (OWNER stays the caller's), and END is the caller's to send. */
int sl_exch_sendmem(sl_exch_t *x, uint32_t gen, const void *mem, size_t len,
                    void *owner, int flags);

/* Copy up to N body bytes into DST. Returns the count, 0 at the end of the
 * body, -1 when the request is stale or the client is gone, and -2 when
 * bytes must be waited for and WAIT is false (then call again with WAIT
 * true, without the GIL). STOP_AT_LF stops after the first '\n'. */
long sl_exch_read_body(sl_exch_t *x, uint32_t gen, char *dst, size_t n,
                       bool stop_at_lf, bool wait);

/* X's client is gone, or its connection failed: what it produces now is
 * dropped (takes mu). */
bool sl_exch_aborted(sl_exch_t *x);

/* Must the connection close after the response to C's request GEN,
 * whatever the app says? When the worker drains, or when the body the app
 * left unread is too big to read and drop (SL_CONN_DISCARD_MAX). */
bool sl_exch_must_close(sl_exch_t *x, uint32_t gen);

/* Body bytes of request GEN not yet received: 0 when complete, UINT64_MAX
 * when unknown (chunked). */
uint64_t sl_exch_body_left(sl_exch_t *x, uint32_t gen);

/* For executors that cannot block (ASGI): returns 0 when WHAT already
 * holds (go ahead), 1 when a SL_TICKET_WAKE for request GEN will arrive once
 * something changes (re-check then), -1 when the request is stale or the
 * client is gone (for SL_AWAIT_DISCONNECT, gone returns 0). */
int sl_exch_await(sl_exch_t *x, uint32_t gen, int what);

/* For the access log: the body bytes of request GEN's response, when
 * its last part is not its first (sl_exch_send() counts a response that
 * goes out in one part itself). Call before the part with SL_SEND_END. */
void sl_exch_note_body(sl_exch_t *x, uint32_t gen, uint64_t body);

/* The client of C's current request into BUF (N bytes; SL_CLIENT_ADDR_MAX
 * holds any, a shorter BUF truncates) and *PORT: the one a trusted proxy's
 * forwarding headers name (forwarded.h), else the peer (the peer).
 * Returns BUF; "" and 0 for a unix: socket peer no header names. Read-only:
 * call it between submit and END, or on the loop thread after the head is
 * complete. */
const char *sl_exch_client(const sl_exch_t *x, char *buf, size_t n, int *port);

/* "https" when a trusted proxy says the client spoke https (or wss), else
 * "http": static. Same rules as sl_exch_client(). */
const char *sl_exch_scheme(const sl_exch_t *x);

/* What X's connection's TLS handshake settled (transport.h), NULL when
 * it is not TLS. Same rules as sl_exch_client(). */
const sl_tls_info_t *sl_exch_tls(const sl_exch_t *x);

/* X is one of several on its connection (an HTTP/2 stream), not the one
 * it carries itself (HTTP/1.1). */
bool sl_exch_is_stream(const sl_exch_t *x);

/* X is a pipelined HTTP/1.1 request run ahead of its connection's
 * current one (h1_ahead.h). */
bool sl_exch_is_ahead(const sl_exch_t *x);

/* The exchange's listener (the index of the socket it came in on), for
 * the server name and port an app is shown. */
int sl_exch_listener(const sl_exch_t *x);

/* The connection generation of X's connection: the same across the
 * requests of one keep-alive connection, another for the next accept. */
uint32_t sl_exch_serial(const sl_exch_t *x);

/* X's peer is an IP address (not a unix: socket). */
bool sl_exch_peer_is_ip(const sl_exch_t *x);

/* The worker X belongs to. */
sl_pump_t *sl_exch_pump(const sl_exch_t *x);

/* The executor needs the loop to look at X soon (exec.h: need_loop). */
void sl_exch_need_loop(sl_exch_t *x);

/* ---- loop side ---- */

/* Wake the executor if it waits on X (mu held): exec->wake. */
void sl_exch_wake(sl_exch_t *x);

/* Close the file and give back the lent bytes of a tail the executor
 * queued and the loop has not taken yet (mu held). */
void sl_exch_drop_tail_locked(sl_exch_t *x);

/* For the access log: P[0..N) begins the response to X's request (a
 * head, and when WHOLE the whole response): note its status, its head
 * when the format asks, and when WHOLE its body bytes. Once per request;
 * mu held, or the loop thread while no executor has the request. */
void sl_exch_note_head(sl_exch_t *x, const char *p, size_t n, bool whole);

#endif
