/* conn_ws.c - a connection after a WebSocket upgrade (see conn_ws.h).
 *
 * The codec (ws.h) turns bytes into events and messages into frames; this
 * file joins it to the connection. The loop thread reads and parses, answers
 * pings, queues whole messages for the executor and runs the close
 * handshake; the executor takes messages and queues frames in c->x.out, as it
 * queues an HTTP response, so output takes the path HTTP output takes
 * (notify, take, flush, credit) with both handoff and on-loop executors.
 *
 * Shared with the executor, under c->x.mu: the queue, the end, accepted,
 * close_sent and the writer (the deflater's state). The parser and the
 * timers are the loop's alone.
 *
 * What a peer can make a connection hold is bounded both ways: reading
 * stops while --ws-max-queue messages wait for the app, and while the
 * output waiting for the peer (the app's frames and ours) is over the
 * credit, SL_CONN_CREDIT. Our control frames wait in two slots (one pong,
 * one ping) until the write buffer is empty: a peer that pings and never
 * reads is answered once, for its latest ping (RFC 6455 §5.5.3). A peer
 * that takes no byte for --send-timeout, or leaves our ping, due behind
 * output it does not read, unanswered for --ws-ping-timeout, is cut.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/date.h"
#include "common/log.h"
#include "common/metrics.h"
#include "worker/loop/conn_ws.h"
#include "worker/loop/pump.h"
#include "worker/loop/served.h"

typedef struct ws_node {
    struct ws_node *next;
    sl_ws_msg_t msg;
} ws_node_t;

struct sl_conn_ws {
    sl_ws_handshake_t *hs; /* owned, from upgrade until accept */
    sl_ws_rx_t *rx;        /* owned; loop only once accepted */
    sl_ws_tx_t *tx;        /* owned; under mu */
    ws_node_t *head;       /* mu: received messages, oldest first */
    ws_node_t *tail;
    uint32_t nq;      /* mu: messages queued */
    bool accepted;    /* mu: the executor sent 101 */
    bool close_sent;  /* mu: our close frame is queued */
    bool ended;       /* mu: the end is known (recv: once the queue is out) */
    bool rx_done;     /* nothing more to parse: a close, an error, EOF */
    bool peer_closed; /* the peer's side is over: its close or EOF */
    bool app_done;    /* the executor's END was taken */
    bool failed;      /* we fail the connection (RFC 6455 §7.1.7): after
                         our close frame, our side shuts at once */
    bool shut_wr;     /* failed, and our write side is shut */
    bool pong_due;    /* a pong for the latest ping waits for the socket */
    bool ping_due;    /* our ping waits for the socket */
    bool cut;         /* cut(): nothing more goes out */
    uint8_t pong_len;
    uint8_t *pong;      /* owned: the latest ping's payload, NULL if none */
    ev_tstamp last_rx;  /* bytes last came from the peer */
    ev_tstamp ping_at;  /* our ping waits for its pong since, 0 = none */
    ev_tstamp close_at; /* our close was seen by the loop at, 0 = not yet */
    unsigned end_code;  /* mu */
    char *end_reason;   /* mu, owned: NUL-terminated, NULL when empty */
    uint64_t sent;      /* mu: messages the app sent, not yet counted in
                           the metrics (the loop thread counts them) */
};

/* ------------------------------------------------------------------ */
/* shared helpers (mu held)                                           */

static void set_end(sl_conn_ws_t *ws, unsigned code, const char *reason,
                    size_t n)
{
    if (ws->ended)
        return;
    ws->ended = true;
    ws->end_code = code;
    if (n > 0) /* out of memory: without its reason */
        ws->end_reason =
            strndup(reason, n < SL_WS_REASON_MAX ? n : SL_WS_REASON_MAX);
}

/* Loop thread: queue our close frame behind what the executor queued, so
 * no frame of the app's can follow it. */
static void queue_close_locked(sl_conn_t *c, unsigned code, const char *reason,
                               size_t n)
{
    sl_conn_ws_t *ws = c->x.ws;

    if (ws->close_sent)
        return;
    ws->close_sent = true;
    ws->close_at = ev_now(c->pump->loop);
    if (sl_buf_pending(&c->x.out) > 0 && sl_conn_take_out(c, &c->x) < 0)
        c->x.aborted = true;
    else if (sl_ws_tx_close(&c->tx.buf, code, reason, n) < 0)
        c->x.aborted = true; /* out of memory: the cut says it */
}

/* The connection is over for the app: sends fail, recv says how. */
static void give_up_locked(sl_conn_t *c, unsigned code)
{
    set_end(c->x.ws, code, NULL, 0);
    c->x.aborted = true;
    sl_exch_wake(&c->x);
}

static void ws_free(sl_conn_ws_t *ws)
{
    ws_node_t *n, *next;

    for (n = ws->head; n != NULL; n = next) {
        next = n->next;
        sl_buf_free(&n->msg.data);
        free(n);
    }
    if (ws->rx != NULL)
        sl_ws_rx_free(ws->rx);
    if (ws->tx != NULL)
        sl_ws_tx_free(ws->tx);
    free(ws->hs);
    free(ws->pong);
    free(ws->end_reason);
    free(ws);
}

/* ------------------------------------------------------------------ */
/* executor side                                                      */

/* The request is GEN's, still with the executor, and a WebSocket. */
static bool live(const sl_conn_t *c, uint32_t gen)
{
    return c->x.gen == gen && c->x.ws != NULL && !c->x.resp_done;
}

static bool header_safe(const char *s)
{
    for (; *s != '\0'; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

int sl_exch_ws_accept(sl_exch_t *x, uint32_t gen, const char *subprotocol,
                      const char *headers, size_t n)
{
    sl_conn_t *c = x->conn;
    static const char head[] = "HTTP/1.1 101 Switching Protocols\r\n"
                               "Upgrade: websocket\r\n"
                               "Connection: Upgrade\r\n"
                               "Server: sluice\r\n";
    sl_conn_ws_t *ws;
    sl_ws_handshake_t *hs;
    size_t mark;
    char line[256];
    int rc = -1;

    sl_exch_lock(&c->x);
    ws = c->x.ws;
    if (!live(c, gen) || c->x.aborted || ws->accepted || ws->hs == NULL)
        goto out_unlock;
    if (subprotocol != NULL &&
        (!header_safe(subprotocol) || strlen(subprotocol) > 200))
        goto out_unlock;
    hs = ws->hs;
    ws->rx = sl_ws_rx_new((size_t)c->pump->opt->ws_max_size, &hs->deflate);
    ws->tx = sl_ws_tx_new(&hs->deflate);
    mark = c->x.out.len;
    if (ws->rx == NULL || ws->tx == NULL ||
        SL_BUF_APPEND_LIT(&c->x.out, head) < 0 ||
        sl_buf_append(&c->x.out, sl_date_line(), strlen(sl_date_line())) < 0)
        goto out_oom;
    snprintf(line, sizeof(line), "Sec-WebSocket-Accept: %s\r\n", hs->accept);
    if (sl_buf_append(&c->x.out, line, strlen(line)) < 0)
        goto out_oom;
    if (hs->extensions[0] != '\0') {
        snprintf(line, sizeof(line), "Sec-WebSocket-Extensions: %s\r\n",
                 hs->extensions);
        if (sl_buf_append(&c->x.out, line, strlen(line)) < 0)
            goto out_oom;
    }
    if (subprotocol != NULL) {
        snprintf(line, sizeof(line), "Sec-WebSocket-Protocol: %s\r\n",
                 subprotocol);
        if (sl_buf_append(&c->x.out, line, strlen(line)) < 0)
            goto out_oom;
    }
    if (sl_buf_append(&c->x.out, headers, n) < 0 ||
        SL_BUF_APPEND_LIT(&c->x.out, "\r\n") < 0)
        goto out_oom;
    sl_exch_note_head(&c->x, c->x.out.data + mark, c->x.out.len - mark, true);
    ws->accepted = true;
    free(ws->hs);
    ws->hs = NULL;
    c->pump->exec->notify(&c->x);
    rc = 0;
    goto out_unlock;

out_oom:
    c->x.out.len = mark;
    c->x.aborted = true;
    c->pump->exec->notify(&c->x);
out_unlock:
    sl_exch_unlock(&c->x);
    return rc;
}

int sl_exch_ws_recv(sl_exch_t *x, uint32_t gen, sl_ws_msg_t *msg,
                    sl_ws_end_t *end)
{
    sl_conn_t *c = x->conn;
    sl_conn_ws_t *ws;
    ws_node_t *node;
    int rc = -1;

    end->code = SL_WS_CLOSE_ABNORMAL; /* stale, or cut */
    end->reason[0] = '\0';
    sl_exch_lock(&c->x);
    ws = c->x.ws;
    if (!live(c, gen) || !ws->accepted)
        goto out_unlock;
    if ((node = ws->head) != NULL) {
        ws->head = node->next;
        if (ws->head == NULL)
            ws->tail = NULL;
        /* the loop stopped reading at a full queue: let it go on */
        if (ws->nq-- == (uint32_t)c->pump->opt->ws_max_queue)
            c->pump->exec->notify(&c->x);
        *msg = node->msg;
        free(node);
        rc = 0;
    } else if (ws->ended) {
        end->code = ws->end_code;
        if (ws->end_reason != NULL)
            strcpy(end->reason, ws->end_reason); /* SL_WS_REASON_MAX */
    } else if (!c->x.aborted) {
        c->x.waiting = true;
        rc = 1;
    }
out_unlock:
    sl_exch_unlock(&c->x);
    return rc;
}

int sl_exch_ws_send(sl_exch_t *x, uint32_t gen, int opcode, const void *data,
                    size_t n)
{
    sl_conn_t *c = x->conn;
    sl_conn_ws_t *ws;
    int rc = -1;

    sl_exch_lock(&c->x);
    ws = c->x.ws;
    if (!live(c, gen) || !ws->accepted || ws->close_sent || c->x.aborted)
        goto out_unlock;
    if (sl_ws_tx_frame(ws->tx, &c->x.out, opcode, data, n) < 0) {
        c->x.aborted = true; /* out of memory: the client is cut */
        c->pump->exec->notify(&c->x);
        goto out_unlock;
    }
    ws->sent++;
    c->pump->exec->notify(&c->x);
    rc = c->x.aborted                                    ? -1
         : c->x.out.len + c->x.inflight > SL_CONN_CREDIT ? 1
                                                         : 0;
out_unlock:
    sl_exch_unlock(&c->x);
    return rc;
}

int sl_exch_ws_close(sl_exch_t *x, uint32_t gen, unsigned code,
                     const char *reason, size_t n)
{
    sl_conn_t *c = x->conn;
    sl_conn_ws_t *ws;
    int rc = -1;

    sl_exch_lock(&c->x);
    ws = c->x.ws;
    if (!live(c, gen) || !ws->accepted || c->x.aborted)
        goto out_unlock;
    rc = 0;
    if (ws->close_sent)
        goto out_unlock;
    if (sl_ws_tx_close(&c->x.out, code, reason, n) < 0)
        c->x.aborted = true;
    ws->close_sent = true;
    c->pump->exec->notify(&c->x);
out_unlock:
    sl_exch_unlock(&c->x);
    return rc;
}

/* ------------------------------------------------------------------ */
/* loop side                                                          */

int sl_conn_ws_upgrade(sl_conn_t *c)
{
    sl_conn_ws_t *ws = calloc(1, sizeof(*ws));
    int status;

    if (ws == NULL || (ws->hs = malloc(sizeof(*ws->hs))) == NULL) {
        free(ws);
        return 503;
    }
    status = sl_ws_handshake(&c->x.req, c->pump->opt->ws_per_message_deflate,
                             ws->hs);
    if (status != 0) {
        ws_free(ws);
        return status;
    }
    sl_conn_ws_free(c); /* none expected: a connection upgrades once */
    pthread_mutex_lock(&c->x.mu);
    c->x.ws = ws;
    pthread_mutex_unlock(&c->x.mu);
    c->x.req.websocket = true;
    return 0;
}

void sl_conn_ws_take_locked(sl_conn_t *c)
{
    sl_conn_ws_t *ws = c->x.ws;
    sl_pump_t *p = c->pump;

    sl_metrics_add(&sl_metrics_self->ws_msgs_out, ws->sent);
    ws->sent = 0;
    if (ws->accepted && c->state == SL_CONN_SERVING) {
        sl_metrics_add(&sl_metrics_self->ws_opened, 1);
        c->state = SL_CONN_WS;
        c->sess = &sl_ws_session; /* the connection is ours from here */
        c->deadline = 0;
        sl_conn_pack_head(c); /* what its log line needs, exactly */
        ws->last_rx = ev_now(p->loop);
        /* accepted while the worker drains: it is told at once */
        if (p->drain.ws_going_away != 0) {
            set_end(ws, p->drain.ws_going_away, NULL, 0);
            queue_close_locked(c, p->drain.ws_going_away, NULL, 0);
            sl_exch_wake(&c->x);
        }
    }
    if (c->state != SL_CONN_WS)
        return;
    if (ws->close_sent && ws->close_at == 0)
        ws->close_at = ev_now(p->loop);
    if (c->x.resp_done && !ws->app_done) {
        ws->app_done = true;
        p->inflight--;
        sl_request_done(p, c);
        /* an executor that ended without a close: say it for it */
        queue_close_locked(c, SL_WS_CLOSE_NORMAL, NULL, 0);
    }
}

bool sl_conn_ws_app_running(const sl_conn_t *c)
{
    return c->x.ws != NULL && c->x.ws->accepted && !c->x.ws->app_done;
}

uint32_t sl_conn_ws_count(sl_pump_t *p)
{
    sl_conn_t *c;
    uint32_t n = 0;

    for (c = p->pool.active.next; c != &p->pool.active; c = c->next)
        n += c->state == SL_CONN_WS;
    return n;
}

/* Hand the message the parser completed to the queue. */
static int queue_message(sl_conn_t *c, int opcode)
{
    sl_conn_ws_t *ws = c->x.ws;
    ws_node_t *node = calloc(1, sizeof(*node));

    if (node == NULL)
        return -1;
    node->msg.opcode = opcode;
    sl_ws_rx_take(ws->rx, &node->msg.data);
    pthread_mutex_lock(&c->x.mu);
    if (ws->tail != NULL)
        ws->tail->next = node;
    else
        ws->head = node;
    ws->tail = node;
    ws->nq++;
    /* a cached block for the app's answer (none while it only waits) */
    sl_conn_buf_ready(c, &c->x.out);
    sl_metrics_add(&sl_metrics_self->ws_msgs_in, 1);
    sl_exch_wake(&c->x);
    pthread_mutex_unlock(&c->x.mu);
    return 0;
}

static bool queue_full(sl_conn_t *c)
{
    bool full;

    pthread_mutex_lock(&c->x.mu);
    full = c->x.ws->nq >= (uint32_t)c->pump->opt->ws_max_queue;
    pthread_mutex_unlock(&c->x.mu);
    return full;
}

/* The output waiting for the peer is at the credit: read no more from a
 * peer that does not take what it is sent. */
static bool out_full(const sl_conn_t *c)
{
    return sl_buf_pending(&c->tx.buf) >= SL_CONN_CREDIT;
}

/* Our control frames go out once the write buffer is empty: it holds
 * whole frames, so that is between two, and a peer that does not read
 * leaves one pong and one ping waiting at most (mu held). */
static void put_control_locked(sl_conn_t *c)
{
    sl_conn_ws_t *ws = c->x.ws;

    if (ws->close_sent) {
        ws->pong_due = ws->ping_due = false; /* nothing after a close */
        return;
    }
    if (sl_buf_pending(&c->tx.buf) > 0)
        return;
    if ((ws->pong_due && sl_ws_tx_frame(ws->tx, &c->tx.buf, SL_WS_OP_PONG,
                                        ws->pong, ws->pong_len) < 0) ||
        (ws->ping_due &&
         sl_ws_tx_frame(ws->tx, &c->tx.buf, SL_WS_OP_PING, NULL, 0) < 0))
        give_up_locked(c, SL_WS_CLOSE_ABNORMAL);
    ws->pong_due = ws->ping_due = false;
    free(ws->pong); /* a pinged WebSocket holds no payload once idle */
    ws->pong = NULL;
}

/* Cut C now: its peer takes nothing (--send-timeout, or our ping behind
 * output it does not read) or never answered our close. What waits for
 * it is dropped and the app hears 1006; the connection closes once the
 * app's END is in (sl_conn_ws_process()). */
static void cut(sl_conn_t *c, const char *why)
{
    sl_conn_ws_t *ws = c->x.ws;

    sl_debug("WebSocket on fd %d: %s, cut", c->tp.fd, why);
    ws->cut = true;
    ws->rx_done = true;
    ws->peer_closed = true;
    ws->pong_due = ws->ping_due = false;
    c->peer_eof = true;
    c->deadline = 0;
    c->tx.buf.off = c->tx.buf.len = 0;
    pthread_mutex_lock(&c->x.mu);
    c->x.out.off = c->x.out.len = 0;
    give_up_locked(c, SL_WS_CLOSE_ABNORMAL);
    pthread_mutex_unlock(&c->x.mu);
    sl_conn_ws_process(c);
}

/* Act on one event of the parser. */
static void on_event(sl_conn_t *c, const sl_ws_event_t *ev)
{
    sl_conn_ws_t *ws = c->x.ws;
    unsigned code;

    switch (ev->kind) {
    case SL_WS_EV_MESSAGE:
        if (queue_message(c, ev->opcode) == 0)
            break;
        ws->failed = true;
        pthread_mutex_lock(&c->x.mu);
        set_end(ws, SL_WS_CLOSE_INTERNAL, NULL, 0);
        queue_close_locked(c, SL_WS_CLOSE_INTERNAL, NULL, 0);
        sl_exch_wake(&c->x);
        pthread_mutex_unlock(&c->x.mu);
        ws->rx_done = true;
        break;
    case SL_WS_EV_PING:
        /* only the latest ping needs its pong: a newer one replaces it
         * while it waits (put_control_locked()) */
        free(ws->pong); /* the parser took no more than 125 bytes */
        ws->pong = ev->len > 0 ? malloc(ev->len) : NULL;
        ws->pong_len = ws->pong != NULL ? (uint8_t)ev->len : 0;
        if (ws->pong != NULL)
            memcpy(ws->pong, ev->data, ev->len);
        ws->pong_due = ws->pong_len == ev->len; /* out of memory: none */
        break;
    case SL_WS_EV_PONG:
        ws->ping_at = 0;
        break;
    case SL_WS_EV_CLOSE:
        ws->rx_done = true;
        ws->peer_closed = true;
        /* echo the code; a close without one is answered without one */
        code = ev->code == SL_WS_CLOSE_NO_STATUS ? 0 : ev->code;
        pthread_mutex_lock(&c->x.mu);
        set_end(ws, ev->code, ev->reason, ev->reason_len);
        queue_close_locked(c, code, NULL, 0);
        sl_exch_wake(&c->x);
        pthread_mutex_unlock(&c->x.mu);
        break;
    case SL_WS_EV_ERROR:
        ws->rx_done = true;
        ws->failed = true;
        sl_debug("WebSocket on fd %d: %s (closing with %u)", c->tp.fd,
                 ev->reason ? ev->reason : "error", ev->code);
        pthread_mutex_lock(&c->x.mu);
        set_end(ws, ev->code, NULL, 0);
        queue_close_locked(c, ev->code, ev->reason,
                           ev->reason ? strlen(ev->reason) : 0);
        sl_exch_wake(&c->x);
        pthread_mutex_unlock(&c->x.mu);
        break;
    default:
        break;
    }
}

/* Parse what rbuf holds, while the queue has room. */
static void parse(sl_conn_t *c)
{
    sl_conn_ws_t *ws = c->x.ws;
    sl_buf_t *b = &c->rbuf;
    sl_ws_event_t ev;
    long n;

    while (!ws->rx_done && sl_buf_pending(b) > 0 && !queue_full(c)) {
        memset(&ev, 0, sizeof(ev));
        n = sl_ws_rx_feed(ws->rx, (const uint8_t *)b->data + b->off,
                          sl_buf_pending(b), &ev);
        if (n < 0) {
            ev.kind = SL_WS_EV_ERROR;
            ev.code = SL_WS_CLOSE_INTERNAL;
            ev.reason = "out of memory";
            n = 0;
        }
        /* the event's data points into rbuf: act before consuming */
        on_event(c, &ev);
        sl_buf_consume(b, (size_t)n);
    }
    if (ws->rx_done)
        b->off = b->len = 0; /* what follows a close is nobody's */
    if (c->peer_eof && !ws->peer_closed &&
        (ws->rx_done || sl_buf_pending(b) == 0)) {
        /* EOF: without a close frame, the end is 1006 */
        ws->rx_done = true;
        ws->peer_closed = true;
        pthread_mutex_lock(&c->x.mu);
        set_end(ws, SL_WS_CLOSE_ABNORMAL, NULL, 0);
        sl_exch_wake(&c->x);
        pthread_mutex_unlock(&c->x.mu);
    }
}

void sl_conn_ws_read(sl_conn_t *c)
{
    sl_conn_ws_t *ws = c->x.ws;
    sl_buf_t *b = &c->rbuf;
    ssize_t n;

    if (c->peer_eof || (!ws->rx_done && (queue_full(c) || out_full(c)))) {
        sl_conn_ws_process(c);
        return;
    }
    if (sl_buf_pending(b) == 0)
        b->off = b->len = 0;
    n = sl_conn_recv(c, SL_CONN_READ_CHUNK);
    if (n > 0) {
        b->len += (size_t)n;
        sl_metrics_add(&sl_metrics_self->bytes_in, (uint64_t)n);
        ws->last_rx = ev_now(c->pump->loop);
    } else if (n == 0) {
        c->peer_eof = true;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        c->peer_eof = true;
        b->off = b->len = 0;
    }
    sl_conn_ws_process(c);
}

/* Give an idle WebSocket's buffers back (to the cache, or freed). */
static void trim(sl_conn_t *c)
{
    sl_conn_ws_t *ws = c->x.ws;
    sl_bufcache_t *bc = &c->pump->bufs;

    if (sl_buf_pending(&c->rbuf) == 0)
        sl_bufcache_put(bc, &c->rbuf);
    if (sl_buf_pending(&c->tx.buf) == 0)
        sl_bufcache_put(bc, &c->tx.buf);
    if (ws->rx != NULL && !ws->rx_done)
        sl_ws_rx_trim(ws->rx);
    pthread_mutex_lock(&c->x.mu);
    if (sl_buf_pending(&c->x.out) == 0)
        sl_bufcache_put(bc, &c->x.out);
    sl_bufcache_put(bc, &c->x.body);
    if (ws->tx != NULL)
        sl_ws_tx_trim(ws->tx);
    pthread_mutex_unlock(&c->x.mu);
}

void sl_conn_ws_process(sl_conn_t *c)
{
    sl_conn_ws_t *ws = c->x.ws;
    bool done;
    int rc, events = 0;

    parse(c);
    rc = 1; /* cut: nothing goes out any more */
    while (!ws->cut) {
        pthread_mutex_lock(&c->x.mu);
        put_control_locked(c);
        if (sl_buf_pending(&c->x.out) > 0 && sl_conn_take_out(c, &c->x) < 0)
            c->x.aborted = true;
        pthread_mutex_unlock(&c->x.mu);
        rc = c->x.aborted ? -1 : sl_conn_flush(c);
        /* a control frame that waited for the buffer to empty goes now */
        if (rc != 1 || !(ws->pong_due || ws->ping_due))
            break;
    }
    if (rc < 0) {
        pthread_mutex_lock(&c->x.mu);
        give_up_locked(c, SL_WS_CLOSE_ABNORMAL);
        pthread_mutex_unlock(&c->x.mu);
    }
    /* failing: once our close frame is out, the peer gets EOF right
     * behind it instead of waiting for a close handshake we will not
     * finish; we read on (and drop) until it closes too, so unread input
     * cannot turn our close into a reset that eats the close frame */
    if (rc == 1 && ws->failed && !ws->shut_wr && !c->peer_eof) {
        ws->shut_wr = true;
        if (sl_transport_shutdown(&c->tp) < 0)
            rc = -1;
    }
    /* over: the socket broke, or both closes went their way (or the peer
     * left), and what we had to say is out */
    done = rc < 0 ||
           (rc == 1 && ws->peer_closed && (ws->close_sent || c->peer_eof)) ||
           (rc == 1 && ws->failed && c->peer_eof);
    if (done) {
        pthread_mutex_lock(&c->x.mu);
        give_up_locked(c, SL_WS_CLOSE_ABNORMAL);
        pthread_mutex_unlock(&c->x.mu);
        if (ws->app_done) {
            sl_conn_close(c);
            return;
        }
        sl_conn_watch(c, 0); /* closed when the app's END comes */
        return;
    }
    /* between messages a WebSocket holds no read or write buffer */
    if (sl_buf_pending(&c->rbuf) == 0)
        sl_bufcache_put(&c->pump->bufs, &c->rbuf);
    if (rc == 1 && sl_buf_pending(&c->tx.buf) == 0)
        sl_bufcache_put(&c->pump->bufs, &c->tx.buf);
    if (rc == 0)
        events |= EV_WRITE;
    if (!c->peer_eof && (ws->rx_done || (!queue_full(c) && !out_full(c))))
        events |= EV_READ;
    sl_conn_watch(c, events);
}

void sl_conn_ws_sweep(sl_conn_t *c, ev_tstamp now)
{
    sl_conn_ws_t *ws = c->x.ws;
    const sl_options_t *o = c->pump->opt;

    if (c->state != SL_CONN_WS || ws == NULL || ws->cut)
        return;
    /* --send-timeout, as for HTTP (conn.c: send_deadline()) */
    if (c->deadline > 0 && now >= c->deadline) {
        cut(c, "send timeout");
        return;
    }
    if (ws->close_sent && ws->close_at > 0 &&
        now - ws->close_at >= SL_CONN_WS_CLOSE_WAIT) {
        cut(c, "no close from the peer"); /* it never answered ours */
        return;
    }
    if (!ws->rx_done && queue_full(c) && sl_buf_pending(&c->tx.buf) == 0) {
        /* not reading for the app's sake, and nothing of ours waits on
         * the peer: its silence says nothing, and its pong would wait
         * behind the messages the app has yet to take */
        ws->last_rx = now;
        ws->ping_at = 0;
        return;
    }
    if (!ws->close_sent && !ws->rx_done) {
        if (ws->ping_at > 0 && o->ws_ping_timeout > 0 &&
            now - ws->ping_at >= o->ws_ping_timeout) {
            /* a ping still behind output the peer does not read counts
             * as unanswered; a close would wait behind it too */
            if (sl_buf_pending(&c->tx.buf) > 0) {
                cut(c, "ping timeout, output unread");
                return;
            }
            pthread_mutex_lock(&c->x.mu);
            ws->failed = true;
            set_end(ws, SL_WS_CLOSE_INTERNAL, NULL, 0);
            queue_close_locked(c, SL_WS_CLOSE_INTERNAL, "ping timeout", 12);
            sl_exch_wake(&c->x);
            pthread_mutex_unlock(&c->x.mu);
            sl_conn_ws_process(c);
            return;
        }
        if (ws->ping_at == 0 && o->ws_ping_interval > 0 &&
            now - ws->last_rx >= o->ws_ping_interval) {
            /* its clock starts now, written or not */
            ws->ping_due = true;
            ws->ping_at = now;
            sl_conn_ws_process(c);
            return;
        }
    }
    if (now - ws->last_rx >= 1.0)
        trim(c);
}

void sl_conn_ws_going_away(sl_conn_t *c, unsigned code)
{
    if (c->state != SL_CONN_WS || c->x.ws == NULL)
        return;
    pthread_mutex_lock(&c->x.mu);
    set_end(c->x.ws, code, NULL, 0);
    queue_close_locked(c, code, NULL, 0);
    sl_exch_wake(&c->x);
    pthread_mutex_unlock(&c->x.mu);
    sl_conn_ws_process(c);
}

void sl_conn_ws_free(sl_conn_t *c)
{
    sl_conn_ws_t *ws;

    pthread_mutex_lock(&c->x.mu);
    ws = c->x.ws;
    c->x.ws = NULL;
    if (ws != NULL)
        sl_metrics_add(&sl_metrics_self->ws_msgs_out, ws->sent);
    pthread_mutex_unlock(&c->x.mu);
    c->x.req.websocket = false;
    if (ws != NULL)
        ws_free(ws);
}

/* ------------------------------------------------------------------ */
/* the session's operations                                           */

static void ws_io(sl_conn_t *c, int ready)
{
    if (ready & EV_READ) {
        sl_conn_ws_read(c);
        return;
    }
    sl_conn_ws_process(c);
}

static void ws_complete(sl_conn_t *c)
{
    pthread_mutex_lock(&c->x.mu);
    c->x.notified = false;
    if (sl_buf_pending(&c->x.out) > 0 && sl_conn_take_out(c, &c->x) < 0) {
        /* out of memory: those bytes are lost; the app stops */
        c->x.aborted = true;
        sl_exch_wake(&c->x);
    }
    sl_conn_ws_take_locked(c);
    pthread_mutex_unlock(&c->x.mu);
    sl_conn_ws_process(c);
}

static bool ws_drain(sl_conn_t *c, ev_tstamp now, ev_tstamp grace)
{
    (void)c; /* told to go away once, at the drain's start */
    (void)now;
    (void)grace;
    return false;
}

/* An app still running hears of it (sl_conn_abort()); the connection is
 * released when its END comes. */
static void ws_abort(sl_conn_t *c)
{
    if (sl_conn_ws_app_running(c)) {
        sl_conn_watch(c, 0);
        return;
    }
    sl_conn_close(c);
}

const sl_session_ops_t sl_ws_session = {
    .name = "WebSocket",
    .io = ws_io,
    .complete = ws_complete,
    .sweep = sl_conn_ws_sweep,
    .drain = ws_drain,
    .going_away = sl_conn_ws_going_away,
    .abort = ws_abort,
    .close = sl_conn_ws_free,
};
