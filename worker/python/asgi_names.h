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

/* The interned names, N_* each: borrowed, for the worker's life. */
extern PyObject *sl_asgi_names[N_COUNT];

/* Intern them. 0, or -1 with an exception. GIL held. */
int sl_asgi_names_init(void);

/* Is S the interned string KEY (or equal to it)? */
bool sl_asgi_str_is(PyObject *s, PyObject *key);

#endif
