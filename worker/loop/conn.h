/* conn.h - one client connection, below and around its session.
 *
 * The loop thread owns every connection: it reads, parses, writes and
 * closes. A connection has a transport (its socket, transport.h), an
 * output (what is being written, output.h), a session that gives its bytes
 * their meaning (sl_session_ops_t below) and the exchange its session
 * carries (exchange.h): the executor sees only that.
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
#include "common/options.h"
#include "worker/loop/request.h"
#include "worker/loop/exchange.h"
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
    SL_CONN_H2,      /* HTTP/2: its streams are the exchanges (h2.h) */
};

struct sl_conn {
    ev_io io;          /* read/write readiness, embedded */
    sl_transport_t tp; /* the socket, and every byte through it; its table
                          is chosen at accept (sl_conn_start()) */
    const sl_session_ops_t *sess; /* the session speaking on it now */
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
    uint8_t peerlen;              /* of peer (at most 128) */
    uint8_t listener;             /* index of the listener it came from */
    bool peer_eof;                /* the client shut its write side */

    /* the PROXY session's (conn_proxy.c) */
    bool proxy_pending; /* its header is due */
    /* HTTP/1.1's, before its first request: the bytes so far begin
     * HTTP/2's preface (h1.c: h2_wanted()) */
    bool h2_maybe;
    /* HTTP/1.1's requests run ahead (h1_ahead.h): how many, whether the
     * oldest is the one being written (sl_conn_wx()), whether the parser
     * fills a spare now (the pump's ahead_px) */
    uint8_t nahead;
    bool ahead_writing;
    bool ahead_parsing;

    sl_buf_t rbuf; /* owned: bytes read, rbuf.off = parsed up to */

    /* the HTTP/1.1 session's state (h1.c, h1_parse.c), or the HTTP/2
     * session's (h2.c: owned); one connection speaks one of them, and
     * HTTP/1.1 hands over to HTTP/2 before its first request */
    union {
        struct {
            uint16_t
                http_error;  /* status to answer instead of serving, 0: none */
            bool in_value;   /* llhttp: last header callback was a value */
            bool head_done;  /* headers complete for the current request */
            bool msg_done;   /* message complete for the current request */
            bool in_msg;     /* a message has begun and is not yet served */
            bool head_clock; /* deadline is the head's: armed once per head */
            bool fresh;      /* no byte of a request read yet */
            llhttp_t parser;
            size_t req_start; /* offset in rbuf where the current head began */
            /* pipelined requests run ahead of x's, oldest first
             * (h1_ahead.h) */
            struct sl_ahead *ahead;
        } h1;
        struct sl_h2 *h2;
    };

    /* The exchange it carries (exchange.h): on HTTP/1.1 one at a time,
     * its id the connection's index in the pool. */
    sl_exch_t x;

    /* Loop-thread side of the output: what is being written */
    sl_output_t tx;
};

/* The exchange whose response C is writing: x, or on HTTP/1.1 the
 * oldest request run ahead once x's is over (h1_ahead.h: its exchange
 * is its first member). */
static inline sl_exch_t *sl_conn_wx(sl_conn_t *c)
{
    return c->ahead_writing ? (sl_exch_t *)(void *)c->h1.ahead : &c->x;
}

/* The exchange C's parser fills: x, or a spare while a pipelined request
 * is run ahead (sl_conn_parse_ahead()). */
sl_exch_t *sl_conn_px(sl_conn_t *c);

/* The peer's address as text and its port (0 for unix sockets). */
const char *sl_conn_peer(const sl_conn_t *c, char *buf, size_t n, int *port);

/* Bytes read from a socket at once. */
#define SL_CONN_READ_CHUNK 16384

/* A draining worker closes a connection that says nothing for a grace
 * (drain.c's, 0.1 s); one that has not sent its first request yet gets
 * this long, from its accept or its TLS handshake's end: a client retries
 * a request that found a reused connection closed, not one on a new
 * connection, and over TLS 1.2 the request comes a round trip after the
 * server's last handshake message. */
#define SL_CONN_FRESH_GRACE 1.0

/* Pipelining: finished responses of at most this many bytes wait for the
 * next request's, already read, to leave with it in one write (h1.c:
 * conn_hold()); in pump mode at most SL_CONN_HOLD_SECS after the last
 * answer joined them (output.h: SL_OUTPUT_HOLD_JOINS), since the next
 * request runs on another thread and may take its time. 2 ms: with 256
 * connections pipelining 16 deep, an ASGI lane's batch of first steps
 * takes about 1 ms, and at 1 ms their answers left in 1.4 writes a burst
 * (bench/results/syscalls.md, issue 32). */
#define SL_CONN_HOLD_MAX  16384
#define SL_CONN_HOLD_SECS 0.002

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

/* ---- loop thread ---- */

/* One-time init of a pool slot. 0 or -1. */
int sl_conn_init(sl_conn_t *c, sl_pump_t *p, uint32_t idx);

/* Set C up for an accepted socket, before its first session starts
 * (sl_h1_start(), sl_conn_proxy_start()): the TLS transport when its
 * listener speaks TLS, else the plain one. */
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

/* Bytes of the block that holds a request's header array under O (a
 * pump cache block: HTTP/1.1's and HTTP/2's requests alike). */
size_t sl_conn_hdrs_size(const sl_options_t *o);

/* Give request R of C a header array (from the pump's cache). 0, or -1
 * when out of memory. */
int sl_conn_hdrs_get(sl_conn_t *c, sl_req_t *r);

/* Give every buffer C holds back to its pump's cache (loop thread, no
 * executor on C). */
void sl_conn_free_bufs(sl_conn_t *c);

/* Give the request's own memory back: head, header array, forwarded
 * client. Loop thread, no executor on the request. */
void sl_conn_free_head(sl_conn_t *c);

/* The same for request R of one of C's exchanges. */
void sl_conn_free_req(sl_conn_t *c, sl_req_t *r);

/* Move C's request head and header array, which a long request (a
 * WebSocket) keeps for its access-log line, into one block of their exact
 * size, and give the two cache blocks back. Loop thread; no executor reads
 * hbuf or hdrs any more. Out of memory, the request stays as it was. */
void sl_conn_pack_head(sl_conn_t *c);

/* Give an empty buffer B of C a cached block, so what is appended next
 * does not malloc (out of memory the append tries itself). */
void sl_conn_buf_ready(sl_conn_t *c, sl_buf_t *b);

/* Read up to ROOM bytes (at most SL_CONN_READ_CHUNK) into C's read buffer;
 * a connection without one (idle) takes one only when bytes come, from
 * the cache and of the size that came: a 16-byte WebSocket frame takes
 * 1 KiB, not ROOM. The read's result; -1 with errno ENOMEM when out of
 * memory. Loop thread. */
ssize_t sl_conn_recv(sl_conn_t *c, size_t room);

/* Set up C's parser for a new connection. */
void sl_conn_parser_init(sl_conn_t *c);

/* Run llhttp over C's unparsed bytes until it needs more, a head or a
 * message completes, or it fails. 0, or -1 when an error response is due
 * (c->http_error says which). */
int sl_conn_parse(sl_conn_t *c);

/* Parse the pipelined request that follows C's current one into X, a
 * spare exchange (h1_ahead.h): 1 when it was whole, ends with its head
 * (no body, no upgrade), keeps the connection, has a safe method and is
 * the app's (not the health check's or a static file's); else 0, and C's
 * read buffer and parser are as they were: it is parsed in its turn. */
int sl_conn_parse_ahead(sl_conn_t *c, sl_exch_t *x);

/* May the pipelined requests after R run ahead of it, and R after the
 * one before? A safe method, keep-alive, no body, no 100 Continue. */
bool sl_conn_may_run_ahead(const sl_req_t *r);

/* Write what the loop holds for C. 1 when all is written, 0 when the
 * socket is full, -1 when the client is gone. */
int sl_conn_flush(sl_conn_t *c);

/* The same, for a caller that holds c->x.mu (an executor on the loop
 * thread, inside one of the calls above). */
int sl_conn_flush_locked(sl_conn_t *c);

/* Wait until C's socket is readable, or writable when WRITE (or when its
 * transport's read waits for that), up to --timeout (WHAT EV_READ) or
 * --send-timeout (EV_WRITE); at once when the transport holds bytes.
 * false: nothing came in that time, or the socket broke. Blocks: for an
 * executor on the loop thread only (inline.c, h2_exec.c). */
bool sl_conn_poll(sl_conn_t *c, int what, bool write);

/* Set the events C's watcher waits for (0: none). */
void sl_conn_watch(sl_conn_t *c, int events);

/* Close C now and give its slot back (loop thread). */
void sl_conn_close(sl_conn_t *c);

/* Move what the executor queued in X's out behind C's write buffer (X is
 * the exchange C writes: x, or a request run ahead; its mu held). 0, or
 * -1 when out of memory (those bytes are lost: the caller must see that
 * nothing after them goes out). */
int sl_conn_take_out(sl_conn_t *c, sl_exch_t *x);

#endif
