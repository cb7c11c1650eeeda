/* inline.h - the loop-side half of an executor that runs on the loop
 * thread (inline mode): where a lane would sleep, it works the socket. */
#ifndef SL_INLINE_H
#define SL_INLINE_H

#include "worker/loop/conn.h"

/* notify for an executor that blocks (WSGI inline): what the app queued
 * goes out now (a streamed event must not sit in a buffer), except the
 * end of the response, which the dispatch takes; a write error marks the
 * client gone. c->x.mu held. */
void sl_inline_notify(sl_exch_t *x);

/* wake: nothing sleeps, the executor is the loop thread itself. */
void sl_inline_wake(sl_exch_t *x);

/* wait for an executor that blocks (WSGI inline), c->x.mu held: for
 * SL_AWAIT_BODY, read and parse until the body has bytes or ends; for
 * SL_AWAIT_CREDIT, write out everything queued. Polls the socket for at
 * most --timeout at a time. 0, or -1 when the client is gone or silent. */
int sl_inline_wait(sl_exch_t *x, int what);

#endif
