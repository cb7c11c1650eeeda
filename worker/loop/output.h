/* output.h - what the loop writes to one client, in order, and the
 * answers a pipelining client's connection holds back.
 *
 * An output is the write side of one connection above its transport: the
 * write buffer (response heads, copied body parts, answers held for a
 * pipelining client), then the tail an executor handed over instead of
 * copying, lent bytes or a file. It knows nothing of the connection that
 * owns it, and holds no pointer out: it writes through the transport it
 * is given, gives lent bytes back through the release operation it is
 * given, says "all written" by its result and "the hold is over" through
 * the hold queue's callback. The owner (worker/loop/conn.c) turns the
 * bytes written into credit and deadlines.
 *
 * The hold queue: in pump mode a pipelining client's finished answers may
 * wait briefly to leave with the next one (one write instead of one per
 * response). Every held output waits on its worker's queue, oldest first,
 * at most the queue's secs since the last answer joined it (an answer
 * joining a hold restarts its time, up to SL_OUTPUT_HOLD_JOINS times, so
 * the answers of one pipelined burst leave in one write while each of its
 * requests is quick); its timer then calls expired() for each output whose
 * time is up, already off the queue.
 */
#ifndef SL_OUTPUT_H
#define SL_OUTPUT_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"
#include "worker/loop/tail.h"
#include "worker/loop/transport.h"

typedef struct sl_output sl_output_t;

/* Answers that may join a hold after its first, each restarting its time:
 * a pipelined burst of 16 leaves in one write, and the first answer waits
 * at most 16 of the queue's secs (the bytes held are bounded too, by the
 * caller: conn.h, SL_CONN_HOLD_MAX). */
#define SL_OUTPUT_HOLD_JOINS 15
typedef struct sl_holdq sl_holdq_t;

struct sl_output {
    sl_buf_t buf;           /* owned: bytes being written */
    sl_tail_t tail;         /* owned: lent bytes or a file after buf */
    size_t interim;         /* bytes at the head of buf that are not the current
                               response: a 100 Continue, earlier answers held */
    sl_output_t *hold_next; /* the hold queue's links, NULL-ended */
    sl_output_t *hold_prev;
    ev_tstamp hold_since; /* when it began to hold answers back */
    bool wrote_any;       /* bytes of the current response went out */
    bool held;            /* on a hold queue */
    uint16_t joined;      /* answers that joined the hold after its first */
};

struct sl_holdq {
    struct ev_loop *loop; /* borrowed */
    sl_output_t *head;    /* the oldest hold */
    sl_output_t *tail;
    ev_timer timer; /* embedded */
    ev_tstamp secs; /* how long an answer may be held */
    /* The hold on O is over (the timer; O is off the queue): its owner
     * writes the answers and goes on. */
    void (*expired)(sl_output_t *o);
};

/* One-time set-up of O. */
void sl_output_init(sl_output_t *o);

/* Write what O holds through TP: the buffer, then lent bytes, then the
 * file; the head and the tail's first bytes leave in one call where the
 * kernel allows. Adds the count written to *WRITTEN. 1 when all is
 * written, 0 when the socket is full, -1 when the client is gone. */
int sl_output_write(sl_output_t *o, sl_transport_t *tp, size_t *written);

/* A new response begins: what O still holds is not its own. */
static inline void sl_output_begin(sl_output_t *o)
{
    o->wrote_any = false;
    o->interim = sl_buf_pending(&o->buf);
}

/* Hold O's answers back on HQ for the next one, from NOW; within the
 * queue's secs they go out anyway. When O already holds, the answer it
 * just took joins the hold: its time starts again from NOW, unless
 * SL_OUTPUT_HOLD_JOINS answers joined it already. */
void sl_output_hold(sl_output_t *o, sl_holdq_t *hq, ev_tstamp now);

/* O's hold on HQ is over (it is writing, or closing). No-op when it holds
 * none. */
void sl_output_unhold(sl_output_t *o, sl_holdq_t *hq);

/* O holds answers and nothing of the response being served is queued
 * behind them: a write can wait. */
static inline bool sl_output_holding(const sl_output_t *o)
{
    return o->held && sl_buf_pending(&o->buf) == o->interim;
}

/* Set up HQ on LOOP: holds last SECS, then EXPIRED. */
void sl_holdq_init(sl_holdq_t *hq, struct ev_loop *loop, ev_tstamp secs,
                   void (*expired)(sl_output_t *o));

#endif
