/* asgi_names.h - the names ASGI's files use, interned once (asgi_names.c).
 * A table the leaves read: it calls nothing. */
#ifndef SL_ASGI_NAMES_H
#define SL_ASGI_NAMES_H

#include <Python.h>
#include <stdbool.h>

enum {
    N_TYPE,
    N_PATH,
    N_HEADERS,
    N_BODY,
    N_MORE_BODY,
    N_STATUS,
    N_TRAILERS,
    N_MORE_TRAILERS,
    N_TEXT,
    N_BYTES,
    N_CODE,
    N_REASON,
    N_SUBPROTOCOL,
    N_MSG_KEYS, /* the keys above are those send()'s messages have */
    N_HTTP_REQUEST = N_MSG_KEYS,
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

/* The interned names, N_* each: borrowed, for the worker's life. */
extern PyObject *sl_asgi_names[N_COUNT];

/* Intern them. 0, or -1 with an exception. GIL held. */
int sl_asgi_names_init(void);

/* Is S the interned string KEY (or equal to it)? */
bool sl_asgi_str_is(PyObject *s, PyObject *key);

/* A message the app gave send(): the values of its keys N_TYPE ..
 * N_SUBPROTOCOL (borrowed from the dict; NULL when missing). */
typedef struct {
    PyObject *v[N_MSG_KEYS];
} sl_asgi_msg_t;

/* Read dict MSG's keys into M in one pass: apps write them as literals,
 * which are the interned names, so a key is found by its address; only
 * a key that is not falls back to comparing text, or (not a str) to a
 * lookup of each name. 0, or -1 with an exception. */
int sl_asgi_msg_read(PyObject *msg, sl_asgi_msg_t *m);

#endif
