/* h1_ahead.h - HTTP/1.1 pipelining in pump mode: requests run ahead.
 *
 * A connection's own exchange (conn.h: x) carries one request at a time,
 * so a pipelined burst would reach the executor one request a pass, each
 * answer's way back to the loop the next one's start. Instead, while x's
 * request is with the executor, the session parses the safe requests
 * that follow it (GET, HEAD, OPTIONS; whole, without a body: RFC 9112
 * §9.3.2 lets a server process those in parallel) into spare exchanges,
 * each handed over as a ticket of its own, and the whole burst goes in
 * one pass. Answers leave in order all the same: a spare's output stays
 * with it until the requests before it are answered; then it is the
 * exchange the connection writes (sl_conn_wx(): its output taken and its credit
 * given back as x's would be), and at its END its request and response
 * move into x, which the session finishes as its own (the access log,
 * keep-alive, the next one). docs/architecture.md, "Pipelining".
 *
 * Spares are the pump's, in a table of slots after the HTTP/2 streams'
 * (slots.h: their ids follow). A connection that closes leaves the ones still
 * with the executor behind (orphans), given back at their END. Loop thread.
 */
#ifndef SL_H1_AHEAD_H
#define SL_H1_AHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "worker/loop/exchange.h"

typedef struct sl_ahead sl_ahead_t;

struct sl_ahead {
    sl_exch_t x;      /* first: a ticket's exchange is the spare */
    sl_ahead_t *next; /* its connection's queue */
    bool orphan;      /* its connection closed while the executor had it */
};

/* Requests run ahead of one connection's current one, at most: a burst of
 * 16 goes at once. */
#define SL_AHEAD_DEPTH 15

/* Spares of one worker, at most: what a pipelining client can make the
 * executor hold beyond one request per connection. */
#define SL_AHEAD_HARD 1024

/* A pass runs requests ahead only while it has handed fewer tickets than
 * this: enough that its wake-ups are a few hundredths of a call per
 * request. Past it a request waits for its turn, as without pipelining:
 * every spare costs memory the caches then lack (at 256 connections
 * pipelining 16 deep, all 1,024 spares cost 20 % more CPU per request
 * than none: bench/results/change-32-ahead-pipeline16.md). */
#define SL_AHEAD_PASS 128

/* The table, sized for P's connections (none for an executor on the loop
 * thread: it answers a burst in one pass anyway). 0 or -1. */
int sl_ahead_init(sl_pump_t *p);
void sl_ahead_destroy(sl_pump_t *p);

/* Run ahead what C's read buffer holds after the request being served:
 * as many whole safe requests as fit, each a ticket. */
void sl_h1_ahead_run(sl_conn_t *c);

/* C's request in x is over and the connection stays: the oldest request
 * run ahead, if any, becomes the one being written (SERVING). True when
 * there was one: then take its output (sl_h1_ahead_take()). It stays
 * first in C's queue until its END (conn.h: sl_conn_wx()). */
bool sl_h1_ahead_next(sl_conn_t *c);

/* Take what the request being written (sl_conn_wx(), a spare) queued
 * into C's output. At its END its request and response move into x, the
 * spare leaves the queue, and true is returned: x is then taken as any
 * completion. */
bool sl_h1_ahead_take(sl_conn_t *c);

/* The executor queued something for spare X (pump.c). */
void sl_h1_ahead_complete(sl_exch_t *x);

/* Tell the request being written and every one run ahead on C that the
 * client is gone (ABORTED), or that it only closed its side after them
 * (the ASGI disconnect). */
void sl_h1_ahead_tell(sl_conn_t *c, bool aborted);

/* C closes, or will answer nothing more: its requests run ahead are
 * given back, or left to end with the executor. */
void sl_h1_ahead_drop(sl_conn_t *c);

#endif
