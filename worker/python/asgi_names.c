/* asgi_names.c - the names ASGI's files use, interned once.
 *
 * A leaf-level table (docs/architecture.md): every ASGI file may read it,
 * and it calls nothing of theirs.
 */
#include "config.h"

#include <Python.h>
#include <string.h>

#include "worker/python/asgi_names.h"

PyObject *sl_asgi_names[N_COUNT];

static const char *const name_text[N_COUNT] = {
    "type",
    "path",
    "headers",
    "body",
    "more_body",
    "status",
    "trailers",
    "more_trailers",
    "text",
    "bytes",
    "code",
    "reason",
    "subprotocol",
    "http.request",
    "http.disconnect",
    "http.response.start",
    "http.response.body",
    "http.response.trailers",
    "http.response.pathsend",
    "set_result",
    "done",
    "cancel",
    "throw",
    "close",
    "websocket.connect",
    "websocket.receive",
    "websocket.disconnect",
    "websocket.accept",
    "websocket.send",
    "websocket.close",
    "websocket.http.response.start",
    "websocket.http.response.body",
    "cancelling",
    "uncancel",
    "set_name",
    "call_soon",
    "_asyncio_future_blocking",
};

int sl_asgi_names_init(void)
{
    size_t i;

    for (i = 0; i < N_COUNT; i++)
        if ((sl_asgi_names[i] = PyUnicode_InternFromString(name_text[i])) ==
            NULL)
            return -1;
    return 0;
}

/* Apps write message types as literals that are not interned (they hold
 * dots), so compare the text when needed. */
bool sl_asgi_str_is(PyObject *s, PyObject *key)
{
    if (s == key)
        return true;
    if (!PyUnicode_Check(s))
        return false;
    if (PyUnicode_CheckExact(s) && PyUnicode_IS_COMPACT_ASCII(s))
        return PyUnicode_GET_LENGTH(s) == PyUnicode_GET_LENGTH(key) &&
               memcmp(PyUnicode_DATA(s), PyUnicode_DATA(key),
                      (size_t)PyUnicode_GET_LENGTH(s)) == 0;
    return PyUnicode_Compare(s, key) == 0;
}

int sl_asgi_msg_read(PyObject *msg, sl_asgi_msg_t *m)
{
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    bool lookup = false;
    int i;

    memset(m, 0, sizeof(*m));
    while (PyDict_Next(msg, &pos, &k, &v)) {
        for (i = 0; i < N_MSG_KEYS; i++)
            if (k == sl_asgi_names[i])
                break;
        if (i == N_MSG_KEYS && PyUnicode_CheckExact(k))
            for (i = 0; i < N_MSG_KEYS; i++)
                if (sl_asgi_str_is(k, sl_asgi_names[i]))
                    break;
        if (i < N_MSG_KEYS)
            m->v[i] = v;
        else if (!PyUnicode_CheckExact(k))
            lookup = true; /* a key that may compare equal to a name */
    }
    if (!lookup)
        return 0;
    for (i = 0; i < N_MSG_KEYS; i++)
        if (m->v[i] == NULL &&
            (m->v[i] = PyDict_GetItemWithError(msg, sl_asgi_names[i])) ==
                NULL &&
            PyErr_Occurred())
            return -1;
    return 0;
}
