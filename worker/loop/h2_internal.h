/* h2_internal.h - what the HTTP/2 session's two files share: the session
 * (h2.c) and its streams (h2_stream.c). Loop thread, except where a field
 * says it is the exchange's (under x.mu).
 */
#ifndef SL_H2_INTERNAL_H
#define SL_H2_INTERNAL_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/options.h"
#include "worker/loop/conn.h"
#include "worker/loop/h2.h"

typedef struct sl_h2 sl_h2_t;
typedef struct sl_h2_stream sl_h2_stream_t;

/* Where the response's HTTP/1.1 bytes (what executors write, response.h)
 * are in their translation to frames. */
enum {
    SL_H2_RESP_HEAD = 0, /* the head is not whole yet */
    SL_H2_RESP_BODY,     /* a sized, or unframed, body: bytes as they are */
    SL_H2_RESP_CHUNK,    /* chunked: a size line is next */
    SL_H2_RESP_DATA,     /* chunked: chunk_left bytes of data */
    SL_H2_RESP_CRLF,     /* chunked: the CRLF after a chunk's data */
    SL_H2_RESP_TRAILER,  /* chunked: trailer fields, then the blank line */
    SL_H2_RESP_END,      /* every byte of the body is framed */
};

/* One stream: the exchange an executor sees (first, so the exchange's
 * address is the stream's), and the loop's side of it. */
struct sl_h2_stream {
    sl_exch_t x;
    sl_h2_t *h2;          /* the session it belongs to; NULL: free */
    sl_h2_stream_t *next; /* the session's streams, or the free list */
    sl_h2_stream_t *prev;
    sl_h2_stream_t *ready;       /* the session's heads to dispatch, in order */
    int32_t sid;                 /* its stream id */
    uint32_t auth_off, auth_len; /* :authority in x.req.hbuf; len 0: none */
    uint32_t head_bytes;         /* RFC 9113 §6.5.2 size of its fields */
    uint16_t http_error;         /* answer this instead of serving, 0: no */
    bool has_host;               /* a host field came */
    bool has_cl;                 /* a content-length field came */
    bool head_done;              /* every field of the head is in */
    bool queued;                 /* on the ready queue */
    bool with_exec;              /* the executor has it: until its END */
    bool closed;                 /* nghttp2 closed the stream */
    bool answered;               /* the response HEADERS were submitted */
    bool deferred;               /* the data source waits for bytes */
    bool counted;                /* sl_exch_done() ran for it */
    bool orphan;                 /* its connection closed while the
                                    executor had it: it ends alone */
    uint64_t consumed;           /* body bytes the peer's window got back */
    ev_tstamp progress;          /* its output last moved (send timeout) */

    /* the response, taken from x.out: HTTP/1.1 bytes being translated */
    sl_buf_t raw;
    int resp;        /* SL_H2_RESP_* */
    uint64_t left;   /* BODY with a length: bytes still allowed;
                        DATA: bytes of the chunk */
    bool sized;      /* BODY: a Content-Length bounds it */
    bool no_body;    /* HEAD, 1xx, 204, 304 */
    bool trailers;   /* trailer fields were sent */
    size_t head_len; /* the head's bytes at raw's start, once parsed */
    bool resp_end;   /* the executor's END was taken */
    sl_tail_t tail;  /* taken after raw: a file or lent bytes */
};

/* One connection's HTTP/2 session. */
struct sl_h2 {
    nghttp2_session *ng;     /* owned */
    sl_conn_t *c;            /* borrowed: the connection it speaks on */
    sl_h2_stream_t *streams; /* its live streams (h2_stream.c) */
    sl_h2_stream_t *ready_head;
    sl_h2_stream_t *ready_tail;
    uint32_t nstreams;   /* live: open, or still with the executor */
    uint32_t nexec;      /* with the executor */
    bool in_recv;        /* nghttp2_session_mem_recv() runs */
    bool dispatching;    /* the ready queue is being worked */
    bool notice_sent;    /* the drain's first GOAWAY went out */
    bool goaway_final;   /* the last-stream-id GOAWAY is queued */
    bool failed;         /* the session is over: flush and close */
    ev_tstamp notice_at; /* when the drain's first GOAWAY was queued */
    ev_tstamp started;   /* when the session began */
    bool got_stream;     /* a stream was opened on it */
    bool dirty;          /* on the pump's h2dirty list */
    sl_h2_t *dirty_next;
    ev_tstamp quiet_since; /* when its last stream ended (keep-alive) */
    /* floods beyond what nghttp2 counts itself */
    ev_tstamp flood_since; /* start of the current second */
    uint32_t resets;       /* streams the client reset there, unanswered */
    uint32_t empty_data;   /* DATA frames with nothing in them there */
};

/* ---- h2.c: the session's bytes ---- */

/* Write what nghttp2 has to send. 1 when all is written, 0 when the
 * socket is full, -1 when the connection is broken. */
int sl_h2_send(sl_h2_t *h2);

/* Read what the socket has (a few chunks at most) into nghttp2. 0, or -1
 * when the peer left or broke the protocol. */
int sl_h2_read(sl_h2_t *h2);

/* Advance H2 as far as it goes without waiting: dispatch, write, watch
 * what is due; close the connection when both sides are done. */
void sl_h2_process(sl_h2_t *h2);

/* The session is over: every stream's executor hears the client left;
 * what is queued goes if it can, and the connection closes once no
 * executor holds a stream of it. */
void sl_h2_fail(sl_h2_t *h2);

/* ---- h2_frames.c: what nghttp2 reads ---- */

/* Make H2's nghttp2 server session, its first SETTINGS queued. 0 or -1. */
int sl_h2_session_new(sl_h2_t *h2);

/* The data source of a response's body (nghttp2_data_source_read_callback):
 * SRC's ptr is the stream. */
ssize_t sl_h2_data_read(nghttp2_session *ng, int32_t sid, uint8_t *buf,
                        size_t len, uint32_t *flags, nghttp2_data_source *src,
                        void *ud);

/* ---- h2_exec.c: streams and the executor ---- */

/* Dispatch the streams whose head is whole, in order: never inside
 * nghttp2's calls, never twice at once. */
void sl_h2_dispatch_ready(sl_h2_t *h2);

/* Take what S's executor queued and frame it; free S when it is over. */
void sl_h2_stream_take_out(sl_h2_t *h2, sl_h2_stream_t *s);

/* ---- h2_stream.c ---- */

/* A free stream for H2's stream SID: its exchange ready for a new
 * request. NULL when the worker has none left (the stream is refused). */
sl_h2_stream_t *sl_h2_stream_new(sl_h2_t *h2, int32_t sid);

/* Give S back: its buffers, its tail, its slot. Its executor is done. */
void sl_h2_stream_free(sl_h2_stream_t *s);

/* One header field of S's request (nghttp2 checked its syntax, RFC 9113
 * §8.2). 0; -1 when out of memory; the status to answer (431, 400) when
 * the request cannot be served. */
int sl_h2_stream_field(sl_h2_stream_t *s, const uint8_t *name, size_t nn,
                       const uint8_t *value, size_t vn);

/* S's head is whole: make the request what the executors see (Host from
 * :authority, cookies joined, the target checked, forwarding headers
 * applied). END_STREAM: no body follows. 0, or the status to answer. */
int sl_h2_stream_head(sl_h2_stream_t *s, bool end_stream);

/* Take what S's executor queued (x.mu held): output, its tail, END. */
void sl_h2_stream_take(sl_h2_stream_t *s);

/* The response's head, once raw holds it whole: its fields as nghttp2
 * takes them, into NV (room for N) and their count, the status in
 * *STATUS; they point into raw, which keeps them until the caller has
 * submitted them and consumed head_len bytes. 1; 0 when the head is not
 * whole yet, -1 when it is bad (ours never is). */
int sl_h2_stream_head_out(sl_h2_stream_t *s, nghttp2_nv *nv, size_t n,
                          size_t *count, int *status);

/* Up to N body bytes of S's response into BUF: the count, with
 * NGHTTP2_DATA_FLAG_EOF in *FLAGS when the body ended with them (and
 * NO_END_STREAM when trailer fields, submitted here, end the stream
 * instead). -2 when nothing is there yet, -1 when the response cannot go
 * on (a file that failed, a body cut short). */
long sl_h2_stream_body(sl_h2_stream_t *s, uint8_t *buf, size_t n,
                       uint32_t *flags);

/* Fields a response head may have, at most (past them the stream is
 * reset). */
#define SL_H2_FIELDS_MAX 256

/* Trailer fields a response may have, at most. */
#define SL_H2_TRAILERS_MAX 64

/* The streams the worker may have at once (all sessions): the ids above
 * the connections' (pump.h: sl_pump_exch()). */
uint32_t sl_h2_streams_max(const sl_options_t *o, uint32_t nconns);

#endif
