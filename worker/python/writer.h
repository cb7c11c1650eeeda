/* writer.h - response heads and trailers from Python header lists. */
#ifndef SL_WRITER_H
#define SL_WRITER_H

#include <Python.h>
#include <stdbool.h>

#include "common/buf.h"
#include "worker/loop/response.h"

/* Validate HEADERS, a list or tuple of [bytes, bytes] pairs, as the ASGI
 * app gave them (WHAT names the message in errors). 0, or -1 with a
 * TypeError/ValueError set. GIL held. */
int sl_writer_check_headers(PyObject *headers, const char *what);

/* Build the head of REQ's response into B (emptied first): STATUS,
 * HEADERS (checked), and the framing: KNOWN is the whole body length when
 * known, else -1; TRAILERS asks for a chunked body that trailers end;
 * CLOSE forces Connection: close. Fills RS. 0, or -1 with an exception. */
int sl_writer_head(sl_response_t *rs, sl_buf_t *b, const sl_req_t *req,
                   int status, PyObject *headers, long long known,
                   bool trailers, bool close);

/* Append the last chunk, the trailer fields of HEADERS (checked; NULL for
 * none) and the final CRLF to B. 0, or -1 with an exception. */
int sl_writer_trailers(sl_buf_t *b, PyObject *headers);

#endif
