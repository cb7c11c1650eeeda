/* tickets.h - the keys of TLS session tickets, made by the supervisor.
 *
 * A session ticket is the session's state, encrypted by the server and
 * kept by the client; any worker with the key opens it and resumes the
 * session without a full handshake. So the key is the supervisor's: made
 * at start from the kernel's random bytes, held in memory only (never
 * written to disk, never in an environment), handed to every worker over
 * its control channel (SL_CTL_TICKET_KEYS), and replaced on a schedule
 * (--ssl-ticket-rotation) with the one before still accepted, so a ticket
 * lives one to two periods. Workers of a rolling restart get the same
 * keys, so sessions resume across it.
 */
#ifndef SL_TICKETS_H
#define SL_TICKETS_H

#include <ev.h>

#include "supervisor/table.h"

typedef struct {
    ev_timer timer;    /* embedded: the rotation */
    sl_table_t *table; /* borrowed: where the keys go */
} sl_tickets_t;

/* Make the first key, give it to TABLE (its workers, and every one
 * spawned after), and replace it every EVERY seconds on LOOP. 0, or -1
 * after logging (no random bytes: the workers then issue no tickets). */
int sl_tickets_start(sl_tickets_t *k, struct ev_loop *loop, sl_table_t *table,
                     double every);

/* A HUP's --ssl-ticket-rotation: EVERY seconds from now on (the next key
 * EVERY seconds from now), or with 0 no more rotation (the new workers
 * issue no tickets; the keys stay for the old ones). Starts K on TABLE
 * when it never ran. 0, or -1 after logging. */
int sl_tickets_reschedule(sl_tickets_t *k, struct ev_loop *loop,
                          sl_table_t *table, double every);

#endif
