/* conn.h - one client connection and the request it is serving.
 *
 * The loop thread owns every connection: it reads, parses, writes and closes.
 * The executor sees a connection only between a submit and the END of its
 * response, and only through the calls below, which take the connection's
 * mutex and check the request generation, so an executor that holds on to a
 * stale request (an app keeping wsgi.input around) can never touch the next
 * one. An on-loop executor (inline mode) *is* the loop thread: the same
 * calls run without the handoff, and where they would wait they ask the
 * executor's wait operation (worker/loop/exec.h), which for it means the
 * socket.
 */
#ifndef SL_CONN_H
#define SL_CONN_H

#include <ev.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "llhttp.h"
#include "common/buf.h"
#include "worker/loop/request.h"
#include "worker/loop/output.h"
#include "worker/loop/transport.h"

typedef struct sl_pump sl_pump_t;
typedef struct sl_conn sl_conn_t;
typedef struct sl_conn_ws sl_conn_ws_t;

/* A session: what a connection's bytes mean, and so what it does when
 * they come or go (docs/architecture.md, "The connection in
 * layers"). A connection has one at a time and its sessions switch it:
 * the PROXY header's (conn_proxy.c) hands over to HTTP/1.1 (h1.c), which
 * hands over to a WebSocket (conn_ws.c) once the app accepts an upgrade.
 * The connection below (conn.c) and the drain above (drain.c) reach a
 * connection only through these. Loop thread. */
typedef struct sl_session_ops {
    const char *name; /* "PROXY", "HTTP/1.1", "WebSocket" */
    /* The socket is ready: READY is what the transport says of it
     * (EV_READ, EV_WRITE). */
    void (*io)(sl_conn_t *c, int ready);
    /* The executor queued something for C (a completion). */
    void (*complete)(sl_conn_t *c);
    /* Housekeeping at NOW: act on an expired deadline. */
    void (*sweep)(sl_conn_t *c, ev_tstamp now);
    /* A drain step at NOW: serve what is already here, close an idle
     * connection once GRACE has passed. True when C was closed. */
    bool (*drain)(sl_conn_t *c, ev_tstamp now, ev_tstamp grace);
    /* The drain began: tell the peer, with close CODE where it has one. */
    void (*going_away)(sl_conn_t *c, unsigned code);
    /* C's executor was told to stop (sl_conn_abort()): close, or wait for
     * the executor's END where it still runs. */
    void (*abort)(sl_conn_t *c);
    /* C closes: free the session's own state. */
    void (*close)(sl_conn_t *c);
} sl_session_ops_t;

enum {
    SL_CONN_FREE = 0,
    SL_CONN_READING, /* idle keep-alive or reading a request head */
    SL_CONN_SERVING, /* a request is with the executor */
    SL_CONN_WRITING, /* the executor is done, output still queued */
    SL_CONN_CLOSING, /* lingering close: write side shut, draining input */
    SL_CONN_WS,      /* a WebSocket after its 101 (conn_ws.h) */
};

/* Flags for sl_conn_send(). */
enum {
    SL_SEND_END = 1,   /* this is the last part of the response */
    SL_SEND_CLOSE = 2, /* close the connection after the response */
};

struct sl_conn {
    ev_io io;          /* read/write readiness, embedded */
    sl_transport_t tp; /* the socket, and every byte through it; its table
                          is chosen at accept (sl_conn_start()) */
    const sl_session_ops_t *sess; /* the session speaking on it now */
    uint32_t idx;                 /* index in the pump's pool */
    uint32_t gen;                 /* request generation, bumped per request */
    uint32_t serial;              /* connection generation, bumped per accept */
    int state;
    sl_pump_t *pump; /* borrowed */
    sl_conn_t *next; /* free list, or the active list */
    sl_conn_t *prev;
    sl_conn_t *idle_next; /* the pump's idle list (pump.h), NULL-ended */
    sl_conn_t *idle_prev;
    ev_tstamp deadline;   /* header, keep-alive, send or linger; 0 = none */
    ev_tstamp idle_since; /* when it last became idle (accept, response) */
    struct sockaddr_storage peer; /* the PROXY header's source, once read */
    socklen_t peerlen;
    int listener;  /* index of the listener it came from */
    bool peer_eof; /* the client shut its write side */

    /* the PROXY session's (conn_proxy.c) */
    bool proxy_pending; /* its header is due */

    /* the HTTP/1.1 session's (h1.c, h1_parse.c) */
    llhttp_t parser;
    sl_buf_t rbuf;    /* owned: bytes read, rbuf.off = parsed up to */
    size_t req_start; /* offset in rbuf where the current head began */
    bool in_value;    /* llhttp: last header callback was a value */
    bool head_done;   /* headers complete for the current request */
    bool msg_done;    /* message complete for the current request */
    int http_error;   /* status to answer instead of serving, 0 = none */
    bool in_msg;      /* a message has begun and is not yet served */
    bool head_clock;  /* deadline is the head's: armed once per head */
    sl_req_t req;
    /* the WebSocket session's (conn_ws.c) */
    sl_conn_ws_t *ws; /* owned: the WebSocket state, NULL for HTTP; set and
                         freed by the loop, read by the executor under mu */

    /* Shared with the executor: everything below is under mu. */
    pthread_mutex_t mu;
    /* borrowed: the condition variable of the lane thread waiting on mu
     * for body or credit (its own, exec.c), NULL when none waits; one
     * per thread rather than one per connection, most of which are idle */
    pthread_cond_t *waiter;
    sl_buf_t body;   /* request body received, not yet read by the app */
    sl_buf_t out;    /* response bytes from the executor, not yet taken */
    int file_fd;     /* sendfile after out, -1 = none; owned */
    int resp_status; /* access log, metrics: the response's status, 0 = none */
    off_t file_off;
    size_t file_len;
    const char *mem; /* lent bytes after out (sl_conn_sendmem()), or NULL */
    size_t mem_len;
    void *mem_owner;     /* given back by p->exec->release() */
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

    /* Loop-thread side of the output: what is being written */
    sl_output_t tx;
};

/* ---- executor side (any thread; in pump mode without the GIL held) ---- */

/* Queue response bytes for request GEN. Never blocks. Returns 0, 1 when
 * more than the credit is now queued (call sl_conn_wait_credit() before
 * producing more), or -1 when the request is stale or the client is gone:
 * stop producing. Out of memory, none of IOV is queued and the connection
 * is treated as gone (-1). SL_SEND_END ends the request whatever the
 * result, unless it is stale. */
int sl_conn_send(sl_conn_t *c, uint32_t gen, const struct iovec *iov,
                 int iovcnt, int flags);

/* The executor starts request GEN now: its queue time ends (metrics).
 * Any thread; a stale GEN is ignored. */
void sl_conn_started(sl_conn_t *c, uint32_t gen);

/* Wait until the queued output has drained below half the credit. Blocks:
 * call it without the GIL. 0, or -1 as above. */
int sl_conn_wait_credit(sl_conn_t *c, uint32_t gen);

/* Send LEN bytes of FD from OFF after what is queued, as the last part of
 * the response; the connection takes ownership of FD. 0 or -1 as above
 * (FD is closed on failure too). */
int sl_conn_sendfile(sl_conn_t *c, uint32_t gen, int fd, off_t off, size_t len,
                     int flags);

/* Send LEN bytes at MEM after what is queued, as the last part of the
 * response, without copying them: the executor lends them, unchanged,
 * until the loop gives OWNER back through p->exec->release() (written, or
 * dropped with the connection). 0, or -1 as above: then nothing was lent
 * (OWNER stays the caller's), and END is the caller's to send. */
int sl_conn_sendmem(sl_conn_t *c, uint32_t gen, const void *mem, size_t len,
                    void *owner, int flags);

/* Copy up to N body bytes into DST. Returns the count, 0 at the end of the
 * body, -1 when the request is stale or the client is gone, and -2 when
 * bytes must be waited for and WAIT is false (then call again with WAIT
 * true, without the GIL). STOP_AT_LF stops after the first '\n'. */
long sl_conn_read_body(sl_conn_t *c, uint32_t gen, char *dst, size_t n,
                       bool stop_at_lf, bool wait);

enum {
    SL_AWAIT_BODY = 1,       /* body bytes, or the end of the body */
    SL_AWAIT_CREDIT = 2,     /* queued output below half the credit */
    SL_AWAIT_DISCONNECT = 3, /* the client goes away */
};

/* Unread request body the loop will still drop after the response, at
 * most; past this the response should close the connection instead. */
#define SL_CONN_DISCARD_MAX (1024 * 1024)

/* Response bytes a request may have queued and not yet written, for every
 * executor: past it sl_conn_send() answers 1, and the executor waits
 * (sl_conn_wait_credit(), or SL_AWAIT_CREDIT) until half of it is written. */
#define SL_CONN_CREDIT (256 * 1024)

/* Bytes read from a socket at once. */
#define SL_CONN_READ_CHUNK 16384

/* Pipelining: finished responses of at most this many bytes wait for the
 * next request's, already read, to leave with it in one write (conn.c:
 * conn_hold()); in pump mode at most SL_CONN_HOLD_SECS, since the next
 * request runs on another thread and may take its time. */
#define SL_CONN_HOLD_MAX  16384
#define SL_CONN_HOLD_SECS 0.001

/* Bytes read at once while a request body streams in: fewer reads, and
 * fewer wake-ups of an executor waiting for body bytes. */
#define SL_CONN_BODY_READ (64 * 1024)

/* Request body buffered for the executor, at most: past it the loop stops
 * reading the socket until the app has read some. */
#define SL_CONN_BODY_WINDOW (256 * 1024)

/* Buffers above this size are freed at once when emptied mid-request;
 * every buffer goes back to the pump's cache (bufcache.h) when its
 * request ends, and a connection idle between requests holds none. */
#define SL_CONN_BUF_KEEP (64 * 1024)

/* Must the connection close after the response to C's request GEN,
 * whatever the app says? When the worker drains, or when the body the app
 * left unread is too big to read and drop (SL_CONN_DISCARD_MAX). */
bool sl_conn_must_close(sl_conn_t *c, uint32_t gen);

/* Body bytes of request GEN not yet received: 0 when complete, UINT64_MAX
 * when unknown (chunked). */
uint64_t sl_conn_body_left(sl_conn_t *c, uint32_t gen);

/* For executors that cannot block (ASGI): returns 0 when WHAT already
 * holds (go ahead), 1 when a SL_TICKET_WAKE for request GEN will arrive once
 * something changes (re-check then), -1 when the request is stale or the
 * client is gone (for SL_AWAIT_DISCONNECT, gone returns 0). */
int sl_conn_await(sl_conn_t *c, uint32_t gen, int what);

/* For the access log: the body bytes of request GEN's response, when
 * its last part is not its first (sl_conn_send() counts a response that
 * goes out in one part itself). Call before the part with SL_SEND_END. */
void sl_conn_note_body(sl_conn_t *c, uint32_t gen, uint64_t body);

/* The peer's address as text and its port (0 for unix sockets). */
const char *sl_conn_peer(const sl_conn_t *c, char *buf, size_t n, int *port);

/* The client of C's current request into BUF (N bytes; SL_CLIENT_ADDR_MAX
 * holds any, a shorter BUF truncates) and *PORT: the one a trusted proxy's
 * forwarding headers name (forwarded.h), else the peer (sl_conn_peer()).
 * Returns BUF; "" and 0 for a unix: socket peer no header names. Read-only:
 * call it between submit and END, or on the loop thread after the head is
 * complete. */
const char *sl_conn_client(const sl_conn_t *c, char *buf, size_t n, int *port);

/* "https" when a trusted proxy says the client spoke https (or wss), else
 * "http": static. Same rules as sl_conn_client(). */
const char *sl_conn_scheme(const sl_conn_t *c);

/* ---- loop thread ---- */

/* One-time init of a pool slot. 0 or -1. */
int sl_conn_init(sl_conn_t *c, sl_pump_t *p, uint32_t idx);

/* Set C up for an accepted socket, before its first session starts
 * (sl_h1_start(), sl_conn_proxy_start()). */
void sl_conn_start(sl_conn_t *c, int fd, int listener,
                   const struct sockaddr *sa, socklen_t salen);

/* Apply what the executor queued for C (a completion). */
void sl_conn_complete(sl_conn_t *c);

/* Housekeeping: act on an expired deadline at NOW. */
void sl_conn_sweep(sl_conn_t *c, ev_tstamp now);

/* Drain step for C at NOW: a request already in the kernel is read and
 * served (with Connection: close); an idle connection is closed once it has
 * been idle GRACE seconds, so a client mid-way to its next request gets an
 * answer rather than a reset. True when C was closed. */
bool sl_conn_drain(sl_conn_t *c, ev_tstamp now, ev_tstamp grace);

/* Tell C's executor to stop, and close C (at once, or at the executor's
 * END where it still runs). */
void sl_conn_abort(sl_conn_t *c);

/* The drain began: C's session tells its peer (a WebSocket's close with
 * CODE). */
void sl_conn_going_away(sl_conn_t *c, unsigned code);

/* ---- the connection's own files (conn*.c) and on-loop executors ---- */

/* Give C's request a header array (from the pump's cache). 0, or -1
 * when out of memory. */
int sl_conn_hdrs_get(sl_conn_t *c);

/* Give every buffer C holds back to its pump's cache (loop thread, no
 * executor on C). */
void sl_conn_free_bufs(sl_conn_t *c);

/* Give the request's own memory back: head, header array, forwarded
 * client. Loop thread, no executor on the request. */
void sl_conn_free_head(sl_conn_t *c);

/* Give an empty buffer B of C a cached block, so what is appended next
 * does not malloc (out of memory the append tries itself). */
void sl_conn_buf_ready(sl_conn_t *c, sl_buf_t *b);

/* Set up C's parser for a new connection. */
void sl_conn_parser_init(sl_conn_t *c);

/* Wake the executor if it waits on C (mu held): exec->wake. */
void sl_conn_wake(sl_conn_t *c);

/* Run llhttp over C's unparsed bytes until it needs more, a head or a
 * message completes, or it fails. 0, or -1 when an error response is due
 * (c->http_error says which). */
int sl_conn_parse(sl_conn_t *c);

/* Write what the loop holds for C. 1 when all is written, 0 when the
 * socket is full, -1 when the client is gone. */
int sl_conn_flush(sl_conn_t *c);

/* The same, for a caller that holds c->mu (an executor on the loop
 * thread, inside one of the calls above). */
int sl_conn_flush_locked(sl_conn_t *c);

/* Close the file and give back the lent bytes of a tail the executor
 * queued and the loop has not taken yet (mu held). */
void sl_conn_drop_tail_locked(sl_conn_t *c);

/* Set the events C's watcher waits for (0: none). */
void sl_conn_watch(sl_conn_t *c, int events);

/* Close C now and give its slot back (loop thread). */
void sl_conn_close(sl_conn_t *c);

/* For the access log: P[0..N) begins the response to C's current request
 * (a head, and when WHOLE the whole response): note its status, its head
 * when the format asks, and when WHOLE its body bytes. Once per request;
 * mu held, or the loop thread while no executor has the request. */
void sl_conn_note_head(sl_conn_t *c, const char *p, size_t n, bool whole);

/* Move what the executor queued in c->out behind the loop's write buffer
 * (mu held). 0, or -1 when out of memory (those bytes are lost: the
 * caller must see that nothing after them goes out). */
int sl_conn_take_out(sl_conn_t *c);

#endif
