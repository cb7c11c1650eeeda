/* control.c - the worker's side of the control channel (drain.h): what it
 * tells the supervisor (ready, heartbeats with its counters, draining,
 * retire) and what it hears (a restart is coming). The watcher that hears
 * the supervisor leave is the drain's (drain.c).
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/ctl.h"
#include "common/log.h"
#include "worker/loop/drain.h"
#include "worker/loop/pump.h"
#include "worker/loop/tlsmod.h"

void sl_drain_ctl(sl_pump_t *p, uint32_t type)
{
    sl_ctl_msg_t m = {.type = type, .pid = (uint32_t)getpid()};
    ev_tstamp now = ev_now(p->loop);
    sl_conn_t *c;

    if (p->drain.ctl_fd < 0)
        return;
    m.served = p->served;
    m.active = p->inflight;
    m.conns = p->pool.nactive;
    m.lanes = (uint32_t)p->lanes;
    m.busy_lanes = p->inflight < m.lanes ? p->inflight : m.lanes;
    for (c = p->pool.active.next; c != &p->pool.active; c = c->next) {
        m.websockets += c->state == SL_CONN_WS;
        /* the request being written: x's, or one run ahead */
        if (c->state == SL_CONN_SERVING &&
            now - sl_conn_wx(c)->req.start > m.oldest)
            m.oldest = now - sl_conn_wx(c)->req.start;
        if (c->state == SL_CONN_H2 && sl_h2_oldest(c) > 0 &&
            now - sl_h2_oldest(c) > m.oldest)
            m.oldest = now - sl_h2_oldest(c);
    }
    if (sl_ctl_send(p->drain.ctl_fd, &m) < 0 && errno != EAGAIN)
        sl_log_errno(SL_LOG_DEBUG, "send() on the control channel failed");
}

int sl_drain_ctl_read(sl_pump_t *p)
{
    sl_ctl_msg_t m;
    int rc;

    if (p->drain.ctl_fd < 0)
        return 0;
    while ((rc = sl_ctl_recv(p->drain.ctl_fd, &m)) == 1) {
        if (m.type == SL_CTL_RESTART)
            p->drain.restart = true;
        /* a worker with no TLS listener has no module: nothing to key */
        if (m.type == SL_CTL_TICKET_KEYS && p->tls != NULL)
            p->tls->ticket_keys(m.ticket_keys, m.nticket_keys);
    }
    memset(&m, 0, sizeof(m)); /* no copy of a key left on the stack */
    return rc < 0 && errno == EAGAIN ? 0 : -1;
}

void sl_drain_retire_check(sl_pump_t *p)
{
    sl_drain_t *d = &p->drain;

    if (d->retire_at == 0 || p->served < d->retire_at || d->retired)
        return;
    d->retired = true;
    sl_info("max requests (%llu) reached: asking to be replaced",
            (unsigned long long)d->retire_at);
    sl_drain_ctl(p, SL_CTL_RETIRE);
}
