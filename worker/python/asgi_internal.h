/* asgi_internal.h - what the files of the ASGI executor share, and no one
 * else: the request object, the executor's context, the interned names.
 *
 * The files call each other as a hub and its leaves (docs/architecture.md):
 *
 *   asgi.c          set-up, and the event loop's life (create, lifespan)
 *   asgi_lane.c     pump mode: the lane thread, woken by an eventfd
 *   asgi_inline.c   inline mode: the event loop drives libev
 *     -> asgi_request.c  the hub: one request, its app's steps, start,
 *                        end, its receive() and send() callables and
 *                        send()'s one dispatch by message type
 *          -> asgi_carrier.c  the Tasks requests run in (it drives a
 *                             request through the coroutine protocol)
 *          -> asgi_task.c     a request's current_task(), its own for its
 *                             life
 *          -> asgi_channel.c  the http scope's messages (sl_asgi_http)
 *          -> asgi_ws.c       the websocket scope's messages (sl_asgi_ws)
 *               -> asgi_io.c  what both scopes share below them: the
 *                             waits of receive() and send(), the
 *                             response's body and credit, its end
 *               -> asgi_scope.c, asgi_names.c, asgi_done.c, writer.c
 *
 * A request picks its scope's operations (sl_asgi_kind_t) once, when it
 * is made; nothing tests the scope's kind after that. Leaves call down,
 * never up nor across: what must come back up (the io's receive() of a
 * scope, its disconnect message) comes through the request's kind table.
 * The context (sl_asgi_t) is passed, never global: each request, carrier
 * and task object holds a borrowed pointer to it, and the executor's
 * operations find it in their exec table (sl_asgi_of()).
 *
 * Everything here runs with the GIL held, on the event loop's thread.
 */
#ifndef SL_ASGI_INTERNAL_H
#define SL_ASGI_INTERNAL_H

#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "worker/loop/exchange.h"
#include "worker/loop/conn_ws.h"
#include "worker/loop/pump.h"
#include "worker/python/asgi.h"
#include "worker/python/asgi_names.h"
#include "worker/python/freelist.h"
#include "worker/python/writer.h"

/* Where a request's response stands. */
enum { RS_INIT, RS_STARTED, RS_BODY, RS_TRAILERS, RS_DONE };

typedef struct sl_asgi_req sl_asgi_req_t;
typedef struct sl_asgi_carrier sl_asgi_carrier_t;

/* A scope's kind (http, websocket): what a request of it does where the
 * two differ. Chosen once, when the request is made. */
typedef struct {
    int kind;         /* SL_ASGI_HTTP or SL_ASGI_WS: send()'s routes */
    const char *name; /* "an http", "a websocket": for errors */
    /* the scope of C's request (STATE: the lifespan state, or NULL) */
    PyObject *(*scope)(const sl_exch_t *c, PyObject *state);
    /* receive()'s next message: a new reference; NULL without an exception
     * when a WAKE will come (the wait is armed); NULL with one */
    PyObject *(*recv_try)(sl_asgi_req_t *r);
    /* what a receive() still waiting gets once R is over */
    PyObject *(*disconnect)(sl_asgi_req_t *r);
    /* the exception set is the app's error in send(): end what must be,
     * keep the exception set; returns NULL */
    PyObject *(*error)(sl_asgi_req_t *r);
    /* R's app ended (RAISED: with its exception set, which this logs and
     * clears): end or refuse what is left */
    void (*finish)(sl_asgi_req_t *r, bool raised);
} sl_asgi_kind_t;

enum { SL_ASGI_HTTP, SL_ASGI_WS };

/* A handler of one message type of send(), for R, given the message's
 * keys: an awaitable, or NULL with the exception the app sees. */
typedef PyObject *(*sl_asgi_send_fn)(sl_asgi_req_t *r, const sl_asgi_msg_t *m);

/* One request: its app's coroutine and the state of its response. */
struct sl_asgi_req {
    PyObject_HEAD
    sl_asgi_t *x;               /* borrowed: the executor's context */
    const sl_asgi_kind_t *kind; /* its scope's operations */
    sl_exch_t *ex;              /* borrowed: exchanges outlive requests */
    uint32_t gen;
    struct sl_asgi_req *prev, *next; /* the live list, which holds a
                                        reference */
    PyObject *coro;        /* owned: the app's awaitable, while it runs */
    PyObject *task;        /* owned: the carrier Task it awaits in, or
                              NULL (not awaited yet, or over) */
    PyObject *ctx;         /* owned: the context its steps run in */
    PyObject *ptask;       /* owned: its current_task() (asgi_task.c),
                              until it ends */
    PyObject *recv_waiter; /* owned: the waiting receive()'s Future, or
                              NULL (no list for the one most apps have) */
    PyObject *recv_more;   /* owned list of the Futures of receive()s
                              called while one waits (in order), or NULL */
    PyObject *send_waiter; /* owned Future, or NULL */
    PyObject *headers;     /* owned: http.response.start's, until sent */
    PyObject *trailers;    /* owned list of trailer pairs, or NULL */
    PyObject *body_rest;   /* owned: a large body's bytes, while some are
                              not queued yet (asgi_io.c), or NULL */
    size_t body_off;       /* bytes of body_rest queued */
    bool body_rest_last;   /* body_rest ends the body (more_body False) */
    sl_writer_t w;         /* the response */
    int status;            /* http.response.start's, until sent */
    int state;             /* RS_* */
    uint64_t body_left;    /* sized request body not yet received */
    bool want_trailers;    /* http.response.start said trailers: True */
    bool body_done;        /* receive() gave more_body: False */
    bool gone;             /* the client left, or the request is stale */
    bool finished;         /* the app's coroutine is over */
    bool on_slot;          /* x->slots points here */
    bool cancelled;        /* cancelled by the drain */
    char what[96];         /* "GET /path", for the log */
    size_t what_len;
    /* a WebSocket's (asgi_ws.c) */
    bool ws_connected;       /* receive() gave websocket.connect */
    bool ws_ended;           /* the WebSocket is over: ws_end says how */
    int ws_state;            /* asgi_ws.c's WS_* */
    PyObject *ws_misuse;     /* owned: the error a misuse raised, to log once
                                at the app's end; or NULL */
    unsigned ws_end_code;    /* how it ended, once ws_ended */
    PyObject *ws_end_reason; /* owned: the peer's close reason, or NULL for
                                none (most: no 124 bytes held for it) */
};

/* The executor's context, one per executor table (sl_asgi_of()). */
struct sl_asgi {
    sl_pump_t *p;              /* borrowed */
    PyObject *app;             /* owned */
    PyObject *loop;            /* owned: the event loop */
    PyObject *create_future;   /* owned: loop.create_future */
    PyObject *task_type;       /* owned: asyncio.Task */
    PyObject *kw_task;         /* owned: ("loop", "context", "name") */
    PyObject *base_ctx;        /* owned: the context every Task copies */
    PyObject *cancelled_error; /* owned: asyncio.CancelledError */
    PyObject *state;           /* owned: lifespan state, or NULL */
    PyObject *empty;           /* owned: b"" */
    PyObject *empty_tuple;     /* owned: () */
    sl_asgi_req_t **slots;     /* per connection: the request whose
                                  response it carries (borrowed) */
    sl_asgi_req_t *live;       /* every request whose app still runs */
    sl_asgi_carrier_t *idle;   /* the idle carriers' stack (asgi_carrier.c),
                                  which holds a reference to each */
    unsigned nidle;
    sl_buf_t scratch;      /* the writers' heads, errors, trailers */
    const char *loop_name; /* "uvloop" or "asyncio" */
    double budget;         /* for lifespan shutdown */
    Py_hash_t loop_hash;   /* loop's: current tasks are keyed by it */
    int task_batch;        /* batches of steps begun and not ended (they
                              nest: sl_asgi_task_batch) */
    bool task_stale;       /* the current task is a finished step's, which
                              stands for none until the batch's end */
    bool started;          /* sl_asgi_start() succeeded */
    bool stopping;         /* the event loop is being stopped */
};

/* The context of pump P, whose executor is one of ASGI's. */
static inline sl_asgi_t *sl_asgi_of(const sl_pump_t *p)
{
    return ((const sl_asgi_exec_t *)(const void *)p->exec)->x;
}

/* Time cancelled request tasks get to unwind at shutdown. */
#define SL_ASGI_CANCEL_SECS 1.0

/* ---- asgi.c: the event loop's life ---- */

/* Create the event loop and what every request needs of it. 0, or -1
 * after logging. */
int sl_asgi_loop_create(sl_asgi_t *x);

/* Lifespan startup on the event loop. 0, or -1 after logging. */
int sl_asgi_loop_startup(sl_asgi_t *x);

/* Cancel the requests left, run lifespan shutdown within x->budget, close
 * the loop. */
void sl_asgi_loop_shutdown(sl_asgi_t *x);

/* What is left of --graceful-timeout for lifespan shutdown. */
double sl_asgi_shutdown_budget(sl_pump_t *p);

/* ---- asgi_request.c: the hub, one request ---- */

/* Ready the request type and its callables. 0, or -1 with an exception. */
int sl_asgi_req_init(void);

/* Start request GEN of C: scope, receive and send, the app's coroutine,
 * its first step. Errors answer the client (500, 501) and are logged. */
void sl_asgi_req_start(sl_asgi_t *x, sl_exch_t *c, uint32_t gen);

/* Act on ticket T: start a request, or wake the one it names. */
void sl_asgi_req_ticket(sl_asgi_t *x, const sl_ticket_t *t);

/* Cancel every request's Task (the drain's finish). */
void sl_asgi_req_cancel_all(sl_asgi_t *x);

/* The request object is a coroutine to its carrier: PyIter_Send() runs a
 * step of its app in its context (PYGEN_RETURN once the app returned or
 * raised, which ended it: errors logged, the response failed); its
 * throw() and close() methods are the app's, and end it the same way. */

/* ---- asgi_carrier.c: the Tasks requests run in ---- */

/* Ready the carrier type. 0, or -1 with an exception. */
int sl_asgi_carrier_init(void);

/* An idle carrier nobody cancelled, or a new one with its Task, for a
 * request whose first step waits. A new reference, or NULL with an
 * exception. */
sl_asgi_carrier_t *sl_asgi_carrier_take(sl_asgi_t *x);

/* R's first step yielded PENDING (stolen): K's Task carries R on from its
 * next step. Sets r->task. */
void sl_asgi_carrier_hold(sl_asgi_carrier_t *k, sl_asgi_req_t *r,
                          PyObject *pending);

/* Done with K (stolen) after a first step: its Task wakes for the
 * request it holds (or, holding none, K waits for the next request). */
void sl_asgi_carrier_put(sl_asgi_carrier_t *k);

/* Cancel the idle carriers' Tasks (they end), appending each to TASKS (a
 * list, or NULL) to wait for. */
void sl_asgi_carrier_end_idle(sl_asgi_t *x, PyObject *tasks);

/* ---- asgi_task.c: a request's current_task() ---- */

/* Ready the type. 0, or -1 with an exception. */
int sl_asgi_task_init(void);

/* R's own task object, pending until sl_asgi_task_finish(). A new
 * reference, or NULL with an exception. */
PyObject *sl_asgi_task_new(sl_asgi_req_t *r);

/* Make TASK what current_task() returns on X's loop; *PREV gets what it
 * was (a new reference, or NULL) for sl_asgi_task_leave(). 0, or -1 with
 * an exception. */
int sl_asgi_task_enter(sl_asgi_t *x, PyObject *task, PyObject **prev);

/* Put PREV (stolen; NULL: none) back as X's loop's current task. Within
 * a batch, "none" is left for the batch's next step or its end to
 * settle: the entry costs a dict delete and insert per step otherwise. */
void sl_asgi_task_leave(sl_asgi_t *x, PyObject *prev);

/* A batch of steps begins (ON) or ends: the tickets of one pass, or the
 * requests one libev pass starts in inline mode, which run one after the
 * other with no Task, no loop callback and no other Python code between
 * them. Batches nest; at the outermost one's end no task is current. */
void sl_asgi_task_batch(sl_asgi_t *x, bool on);

/* TASK's name ("GET /path" unless set): a new reference, or NULL with an
 * exception. */
PyObject *sl_asgi_task_name(PyObject *task);

/* TASK's request is now carried by CARRIER (a Task): pass on what
 * cancel() held during the first step. 0, or -1 with an exception. */
int sl_asgi_task_handed(PyObject *task, PyObject *carrier);

/* TASK's request ended (CANCELLED: by its cancellation): it is done, its
 * done callbacks are scheduled, it reaches no carrier any more. */
void sl_asgi_task_finish(PyObject *task, bool cancelled);

/* ---- asgi_channel.c: the http scope's messages ---- */

/* Ready the http messages. 0, or -1 with an exception. */
int sl_asgi_channel_init(void);

extern const sl_asgi_kind_t sl_asgi_http;

/* send()'s http messages (sl_asgi_send_fn). */
PyObject *sl_asgi_http_start(sl_asgi_req_t *r, const sl_asgi_msg_t *m);
PyObject *sl_asgi_http_body(sl_asgi_req_t *r, const sl_asgi_msg_t *m);
PyObject *sl_asgi_http_trailers(sl_asgi_req_t *r, const sl_asgi_msg_t *m);
PyObject *sl_asgi_http_pathsend(sl_asgi_req_t *r, const sl_asgi_msg_t *m);

/* ---- asgi_ws.c: the websocket scope's messages ---- */

/* Make the exception type. 0, or -1 with an exception. */
int sl_asgi_ws_init(void);

extern const sl_asgi_kind_t sl_asgi_ws;

/* send()'s websocket messages (sl_asgi_send_fn). */
PyObject *sl_asgi_ws_accept(sl_asgi_req_t *r, const sl_asgi_msg_t *m);
PyObject *sl_asgi_ws_send(sl_asgi_req_t *r, const sl_asgi_msg_t *m);
PyObject *sl_asgi_ws_close(sl_asgi_req_t *r, const sl_asgi_msg_t *m);
PyObject *sl_asgi_ws_denial_start(sl_asgi_req_t *r, const sl_asgi_msg_t *m);
PyObject *sl_asgi_ws_denial_body(sl_asgi_req_t *r, const sl_asgi_msg_t *m);

/* ---- asgi_io.c: both scopes' waits, output and end ---- */

/* receive() for R: a completed awaitable when R's kind has the message
 * now, else a Future a WAKE resolves. NULL with an exception. */
PyObject *sl_asgi_io_receive(sl_asgi_req_t *r);

/* A WAKE for R: hand out what its waiting receive()s can have, let a
 * send() that waits for credit go on when it may. */
void sl_asgi_io_wake(sl_asgi_req_t *r);

/* R is over: every receive() still waiting gets its kind's disconnect
 * message, a send() waiting for credit returns. */
void sl_asgi_io_release(sl_asgi_req_t *r);

/* The writer ended R's response: release what waits for it. Once. */
void sl_asgi_io_ended(sl_asgi_req_t *r);

/* End R's broken response with STATUS (or a close), then as ended. */
void sl_asgi_io_fail(sl_asgi_req_t *r, int status);

/* The head of R's response (r->status, r->headers) for a body of KNOWN
 * bytes (-1: not known, chunked). 0, or -1 with an exception. */
int sl_asgi_io_start_body(sl_asgi_req_t *r, long long known);

/* Queue LEN body bytes of R's response (its head first when it waits);
 * LAST ends the body. 0, 1 when over the credit, -1 with an exception. */
int sl_asgi_io_emit(sl_asgi_req_t *r, const void *data, size_t len, bool last);

/* Queue what is left of r->body_rest (ALL: at once, else until the output
 * is over the credit). 0 when all is queued, 1 when all is and the output
 * is over the credit, 2 when bytes are left, -1 with an exception. */
int sl_asgi_io_emit_rest(sl_asgi_req_t *r, bool all);

/* What send() returns after output went over the credit: a Future the
 * WAKE resolves, or a completed awaitable when no wait is needed. NULL
 * with an exception. */
PyObject *sl_asgi_io_wait_credit(sl_asgi_req_t *r);

/* ---- asgi_inline.c and asgi_lane.c: the two modes ---- */

/* Set up the dirty list and the event loop on this thread. 0 or -1. */
int sl_asgi_inline_start(sl_pump_t *p);

#endif
