/* h1_answer.c - the answers the HTTP/1.1 session makes itself, in place
 * of an executor's: the loop's errors, the health check, a --static file.
 * Each leaves the connection WRITING with its response queued, as an
 * executor's END does (h1.c writes it and goes on).
 */
#include "config.h"

#include "worker/loop/conn.h"
#include "worker/loop/h1.h"
#include "worker/loop/http.h"
#include "worker/loop/pump.h"
#include "worker/loop/static.h"

void sl_h1_answer_error(sl_conn_t *c, int status)
{
    size_t mark = c->tx.buf.len;

    if (c->state == SL_CONN_READING)
        c->x.req.start = ev_now(c->pump->loop); /* never dispatched */
    sl_conn_buf_ready(c, &c->tx.buf);
    (void)sl_http_error_head(&c->tx.buf, status);
    /* the access log and the metrics tell this answer, not the one it
     * replaces */
    c->x.resp_status = 0;
    c->x.resp_head.len = 0;
    sl_exch_note_head(&c->x, c->tx.buf.data + mark, c->tx.buf.len - mark, true);
    c->x.close_after = true;
    c->x.resp_done = true;
    c->state = SL_CONN_WRITING;
    c->deadline = 0; /* the header deadline: from here, the send timeout */
}

/* The head, then the file as the output's tail (static.h). */
void sl_h1_answer_static(sl_conn_t *c, int map)
{
    sl_static_body_t body;
    size_t mark = c->tx.buf.len;

    c->x.req.start = ev_now(c->pump->loop);
    c->x.req.from_static = true;
    sl_conn_buf_ready(c, &c->tx.buf);
    if (sl_static_answer(c->pump->statics, map, &c->x.req, &c->tx.buf, &body) <
        0) {
        c->x.close_after = true;
    } else {
        sl_exch_note_head(&c->x, c->tx.buf.data + mark, c->tx.buf.len - mark,
                          true);
        if (body.fd >= 0) {
            c->tx.tail.file_fd = body.fd;
            c->tx.tail.file_off = body.off;
            c->tx.tail.len = body.len;
            c->x.resp_body = body.len;
        }
        /* its head said so: a body it will not read is not waited for */
        c->x.close_after = !c->x.req.keep_alive || c->x.req.has_body;
    }
    c->x.resp_done = true;
    c->state = SL_CONN_WRITING;
    c->deadline = 0; /* the header deadline: from here, the send timeout */
}

void sl_h1_answer_health(sl_conn_t *c)
{
    size_t mark = c->tx.buf.len;

    c->x.req.start = ev_now(c->pump->loop);
    sl_conn_buf_ready(c, &c->tx.buf);
    /* 503 tells a load balancer this host is going away; a worker
     * stopping for a rolling restart (or a retirement) is not. Out of
     * memory, no answer: close rather than leave the client waiting on a
     * kept-alive connection */
    if (sl_http_health_head(&c->tx.buf, &c->x.req,
                            !c->pump->drain.terminating ||
                                c->pump->drain.restart) < 0)
        c->x.close_after = true;
    sl_exch_note_head(&c->x, c->tx.buf.data + mark, c->tx.buf.len - mark, true);
    c->x.resp_done = true;
    c->state = SL_CONN_WRITING;
}
