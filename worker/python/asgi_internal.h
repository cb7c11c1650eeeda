/* asgi_internal.h - what the files of the ASGI executor share, and no one
 * else: the request object, the executor's state, the interned names.
 *
 *   asgi.c          set-up, and the event loop's life (create, lifespan)
 *   asgi_request.c  one request: its app's steps, start, end
 *   asgi_carrier.c  the Tasks requests run in, and their first step
 *   asgi_task.c     a request's current_task(), its own for its life
 *   asgi_channel.c  receive() and send(): the request's messages
 *   asgi_lane.c     pump mode: the lane thread, woken by an eventfd
 *   asgi_inline.c   inline mode: the event loop drives libev
 *   asgi_ws.c       the websocket scope's messages
 *
 * Everything here runs with the GIL held, on the event loop's thread.
 */
#ifndef SL_ASGI_INTERNAL_H
#define SL_ASGI_INTERNAL_H

#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "worker/loop/conn.h"
#include "worker/loop/conn_ws.h"
#include "worker/loop/pump.h"
#include "worker/python/writer.h"

/* Where a request's response stands. */
enum { RS_INIT, RS_STARTED, RS_BODY, RS_TRAILERS, RS_DONE };

/* One request: its app's coroutine and the state of its response. */
typedef struct sl_asgi_req {
    PyObject_HEAD
    sl_conn_t *c; /* borrowed: pool slots outlive requests */
    uint32_t gen;
    struct sl_asgi_req *prev, *next; /* the live list, which holds a
                                        reference */
    PyObject *coro;         /* owned: the app's awaitable, while it runs */
    PyObject *task;         /* owned: the carrier Task it awaits in, or
                               NULL (not awaited yet, or over) */
    PyObject *ctx;          /* owned: the context its steps run in */
    PyObject *ptask;        /* owned: its current_task() (asgi_task.c),
                               until it ends */
    PyObject *recv_waiters; /* owned list of Futures, or NULL */
    PyObject *send_waiter;  /* owned Future, or NULL */
    PyObject *headers;      /* owned: http.response.start's, until sent */
    PyObject *trailers;     /* owned list of trailer pairs, or NULL */
    PyObject *body_rest;    /* owned: a large body's bytes, while some are
                               not queued yet (asgi_channel.c), or NULL */
    size_t body_off;        /* bytes of body_rest queued */
    bool body_rest_last;    /* body_rest ends the body (more_body False) */
    sl_writer_t w;          /* the response */
    int status;             /* http.response.start's, until sent */
    int state;              /* RS_* */
    uint64_t body_left;     /* sized request body not yet received */
    bool want_trailers;     /* http.response.start said trailers: True */
    bool body_done;         /* receive() gave more_body: False */
    bool gone;              /* the client left, or the request is stale */
    bool finished;          /* the app's coroutine is over */
    bool on_slot;           /* sl_asgi.slots points here */
    bool cancelled;         /* cancelled by the drain */
    char what[96];          /* "GET /path", for the log */
    size_t what_len;
    /* a WebSocket's (asgi_ws.c) */
    bool ws;             /* the scope is a websocket's */
    bool ws_connected;   /* receive() gave websocket.connect */
    bool ws_ended;       /* the WebSocket is over: ws_end says how */
    int ws_state;        /* asgi_ws.c's WS_* */
    PyObject *ws_misuse; /* owned: the error a misuse raised, to log once
                            at the app's end; or NULL */
    sl_ws_end_t ws_end;
} sl_asgi_req_t;

/* The executor's state, one per worker (asgi.c). */
typedef struct {
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
    sl_buf_t scratch;          /* the writers' heads, errors, trailers */
    const char *loop_name;     /* "uvloop" or "asyncio" */
    double budget;             /* for lifespan shutdown */
    bool started;              /* sl_asgi_start() succeeded */
    bool stopping;             /* the event loop is being stopped */
} sl_asgi_t;

extern sl_asgi_t sl_asgi;

/* Interned names, made once (asgi.c). */
enum {
    N_TYPE,
    N_PATH,
    N_HEADERS,
    N_BODY,
    N_MORE_BODY,
    N_STATUS,
    N_TRAILERS,
    N_MORE_TRAILERS,
    N_HTTP_REQUEST,
    N_HTTP_DISCONNECT,
    N_RESPONSE_START,
    N_RESPONSE_BODY,
    N_RESPONSE_TRAILERS,
    N_RESPONSE_PATHSEND,
    N_SET_RESULT,
    N_DONE,
    N_CANCEL,
    N_THROW,
    N_CLOSE,
    N_TEXT,
    N_BYTES,
    N_CODE,
    N_REASON,
    N_SUBPROTOCOL,
    N_WS_CONNECT,
    N_WS_RECEIVE,
    N_WS_DISCONNECT,
    N_WS_ACCEPT,
    N_WS_SEND,
    N_WS_CLOSE,
    N_WS_RESPONSE_START,
    N_WS_RESPONSE_BODY,
    N_CANCELLING,
    N_UNCANCEL,
    N_SET_NAME,
    N_CALL_SOON,
    N_FUTURE_BLOCKING,
    N_COUNT
};
extern PyObject *sl_asgi_names[N_COUNT];

/* Time cancelled request tasks get to unwind at shutdown. */
#define SL_ASGI_CANCEL_SECS 1.0

/* ---- asgi.c: the event loop's life ---- */

/* Create the event loop and what every request needs of it. 0, or -1
 * after logging. */
int sl_asgi_loop_create(void);

/* Lifespan startup on the event loop. 0, or -1 after logging. */
int sl_asgi_loop_startup(void);

/* Cancel the requests left, run lifespan shutdown within sl_asgi.budget,
 * close the loop. */
void sl_asgi_loop_shutdown(void);

/* What is left of --graceful-timeout for lifespan shutdown. */
double sl_asgi_shutdown_budget(sl_pump_t *p);

/* ---- asgi_request.c: one request ---- */

/* Ready the request type. 0, or -1 with an exception. */
int sl_asgi_req_init(void);

/* Start request GEN of C: scope, receive and send, the app's coroutine,
 * its first step. Errors answer the client (500, 501) and are logged. */
void sl_asgi_req_start(sl_conn_t *c, uint32_t gen);

/* One step of R's app, in R's context: send ARG in. PYGEN_NEXT with what
 * it yielded in *RESULT; or PYGEN_RETURN (None in *RESULT) once the app
 * returned or raised, which ended R (errors logged, the response failed). */
PySendResult sl_asgi_req_step(sl_asgi_req_t *r, PyObject *arg,
                              PyObject **result);

/* throw(ARGS) into R's app, in R's context: what it yielded, or NULL
 * with StopIteration once the app ended (R ended as by _step()); with the
 * exception itself when the app had ended before. */
PyObject *sl_asgi_req_throw(sl_asgi_req_t *r, PyObject *const *args,
                            Py_ssize_t n);

/* Close R's app coroutine (its Task is going away) and end R. */
void sl_asgi_req_close(sl_asgi_req_t *r);

/* Act on ticket T: start a request, or wake the one it names. */
void sl_asgi_req_ticket(const sl_ticket_t *t);

/* Cancel every request's Task (the drain's finish). */
void sl_asgi_req_cancel_all(void);

/* The writer ended R's response: release what waits for it. Once. */
void sl_asgi_req_ended(sl_asgi_req_t *r);

/* End R's broken response with STATUS (or a close), then as ended. */
void sl_asgi_req_fail(sl_asgi_req_t *r, int status);

/* ---- asgi_carrier.c: the Tasks requests run in ---- */

/* Ready the carrier type, find asyncio's current tasks. 0, or -1 with an
 * exception. */
int sl_asgi_carrier_init(void);

/* Run R's first step as a carrier Task's; if the app awaits, that Task
 * carries R on. 0, or -1 with an exception (R not stepped). */
int sl_asgi_carrier_run(sl_asgi_req_t *r);

/* Cancel the idle carriers' Tasks (they end), appending each to TASKS (a
 * list, or NULL) to wait for. */
void sl_asgi_carrier_end_idle(PyObject *tasks);

/* ---- asgi_task.c: a request's current_task() ---- */

/* Ready the type. 0, or -1 with an exception. */
int sl_asgi_task_init(void);

/* R's own task object, pending until sl_asgi_task_finish(). A new
 * reference, or NULL with an exception. */
PyObject *sl_asgi_task_new(sl_asgi_req_t *r);

/* Make TASK what current_task() returns on the loop; *PREV gets what it
 * was (a new reference, or NULL) for sl_asgi_task_leave(). 0, or -1 with
 * an exception. */
int sl_asgi_task_enter(PyObject *task, PyObject **prev);

/* Put PREV (stolen; NULL: none) back as the loop's current task. */
void sl_asgi_task_leave(PyObject *prev);

/* TASK's name ("GET /path" unless set): a new reference, or NULL with an
 * exception. */
PyObject *sl_asgi_task_name(PyObject *task);

/* TASK's request is now carried by CARRIER (a Task): pass on what
 * cancel() held during the first step. 0, or -1 with an exception. */
int sl_asgi_task_handed(PyObject *task, PyObject *carrier);

/* TASK's request ended (CANCELLED: by its cancellation): it is done, its
 * done callbacks are scheduled, it reaches no carrier any more. */
void sl_asgi_task_finish(PyObject *task, bool cancelled);

/* ---- asgi_channel.c: receive() and send() ---- */

/* Ready the receive and send types. 0, or -1 with an exception. */
int sl_asgi_channel_init(void);

/* R's receive() (SEND false) or send() callable; a new reference, or NULL
 * with an exception. */
PyObject *sl_asgi_channel_new(sl_asgi_req_t *r, bool send);

/* A WAKE for R: hand out what its waiting receive()s can have, let a
 * send() that waits for credit go on when it may. */
void sl_asgi_channel_wake(sl_asgi_req_t *r);

/* R is over: every receive() still waiting gets http.disconnect (or
 * websocket.disconnect), a send() waiting for credit returns. */
void sl_asgi_channel_release(sl_asgi_req_t *r);

/* Is S the interned string KEY (or equal to it)? */
bool sl_asgi_str_is(PyObject *s, PyObject *key);

/* Queue LEN body bytes of R's response (its head first when it waits:
 * r->status, r->headers); LAST ends the body. 0, 1 when over the credit,
 * -1 with an exception. */
int sl_asgi_channel_emit(sl_asgi_req_t *r, const void *data, size_t len,
                         bool last);

/* What send() returns after output went over the credit: a Future the
 * WAKE resolves, or a completed awaitable when no wait is needed. NULL
 * with an exception. */
PyObject *sl_asgi_channel_wait_credit(sl_asgi_req_t *r);

/* ---- asgi_ws.c: the websocket scope's messages ---- */

/* sluice.ClientDisconnected (an OSError): send() after the client left. */
extern PyObject *sl_asgi_ws_disconnected;

/* Make the exception type. 0, or -1 with an exception. */
int sl_asgi_ws_init(void);

/* receive()'s next message for WebSocket R as recv_try: a new reference;
 * NULL without an exception when a WAKE will come; NULL with one. */
PyObject *sl_asgi_ws_recv_try(sl_asgi_req_t *r);

/* websocket.disconnect with R's end (1006 when none is known). */
PyObject *sl_asgi_ws_disconnect_msg(sl_asgi_req_t *r);

/* send(MSG) for WebSocket R: an awaitable, or NULL with the exception
 * the app sees. */
PyObject *sl_asgi_ws_send(sl_asgi_req_t *r, PyObject *msg);

/* The exception set is a misuse of R by the app: keep it to log once,
 * end R's WebSocket (1011) or response (500). Returns NULL, the exception
 * still set. */
PyObject *sl_asgi_ws_error(sl_asgi_req_t *r);

/* R's app ended (RAISED: with its exception set, which this logs and
 * clears): close or refuse what is left, send END. */
void sl_asgi_ws_finish(sl_asgi_req_t *r, bool raised);

/* ---- asgi_inline.c: inline mode ---- */

/* Set up the dirty list and the event loop on this thread. 0 or -1. */
int sl_asgi_inline_start(sl_pump_t *p);

/* ---- asgi_lane.c: pump mode ---- */

/* Start the lane thread and wait for its event loop to boot. 0 or -1. */
int sl_asgi_lane_start(void);

#endif
