/* tickets.c - TLS session ticket keys: made, rotated, handed out
 * (tickets.h says why they are the supervisor's).
 *
 * The message the table sends is the whole state: the current key first,
 * the one before second. A rotation moves the current key down and makes
 * a new one; the key before that is gone, and with it every ticket it
 * sealed (those clients do a full handshake).
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "common/ctl.h"
#include "common/log.h"
#include "supervisor/tickets.h"

/* N random bytes into BUF from the kernel. 0, or -1 with errno. */
static int random_bytes(uint8_t *buf, size_t n)
{
    ssize_t got;

    while (n > 0) {
        got = getrandom(buf, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        buf += got;
        n -= (size_t)got;
    }
    return 0;
}

/* A new current key for K's table, the current one kept as the one
 * before. 0, or -1 after logging (the keys stay as they were). */
static int rotate(sl_tickets_t *k)
{
    sl_ctl_msg_t m = k->table->keys;

    m.type = SL_CTL_TICKET_KEYS;
    if (m.nticket_keys > 0)
        memcpy(m.ticket_keys[1], m.ticket_keys[0], SL_CTL_TICKET_KEY);
    if (random_bytes(m.ticket_keys[0], SL_CTL_TICKET_KEY) < 0) {
        sl_log_errno(SL_LOG_ERROR, "getrandom() failed for a TLS ticket key");
        return -1;
    }
    m.nticket_keys = m.nticket_keys > 0 ? 2 : 1;
    sl_table_set_keys(k->table, &m);
    memset(&m, 0, sizeof(m)); /* no copy of a key left on the stack */
    return 0;
}

static void on_rotate(struct ev_loop *loop, ev_timer *w, int revents)
{
    sl_tickets_t *k = (sl_tickets_t *)w;

    (void)loop;
    (void)revents;
    (void)rotate(k);
}

int sl_tickets_start(sl_tickets_t *k, struct ev_loop *loop, sl_table_t *table,
                     double every)
{
    k->table = table;
    if (rotate(k) < 0)
        return -1;
    ev_timer_init(&k->timer, on_rotate, every, every);
    ev_timer_start(loop, &k->timer);
    return 0;
}

int sl_tickets_reschedule(sl_tickets_t *k, struct ev_loop *loop,
                          sl_table_t *table, double every)
{
    if (every <= 0) {
        if (k->table != NULL)
            ev_timer_stop(loop, &k->timer);
        return 0;
    }
    if (k->table == NULL || table->keys.nticket_keys == 0)
        return sl_tickets_start(k, loop, table, every);
    if (k->timer.repeat == every && ev_is_active(&k->timer))
        return 0;
    k->timer.repeat = every;
    ev_timer_again(loop, &k->timer);
    return 0;
}
