/* scrape.h - the supervisor's metrics endpoint (--metrics-bind).
 *
 * Owns the shared metrics segment (common/metrics.h), the totals of
 * workers already gone, what the supervisor counts itself, and a small
 * HTTP/1.1 listener on the supervisor's own loop that answers GET /metrics
 * with the Prometheus text (supervisor/expo.h). A scrape reads the workers'
 * slots from memory: it never sends a worker anything and never waits for
 * one, and its sockets are non-blocking, bounded in number and time.
 */
#ifndef SL_SCRAPE_H
#define SL_SCRAPE_H

#include <ev.h>
#include <stdbool.h>

#include "common/options.h"
#include "supervisor/expo.h"
#include "supervisor/table.h"

typedef struct sl_scrape sl_scrape_t;

/* Create the segment for every table slot and listen on o->metrics_bind,
 * serving from LOOP; T (borrowed) says which workers are up. When the
 * address cannot be bound: NULL after one "sluice: error" line, unless
 * RETRY (a binary upgrade's new supervisor, whose predecessor still holds
 * it), which logs a warning and binds again on every sl_scrape_tick().
 * NULL after logging on any other failure. */
sl_scrape_t *sl_scrape_start(struct ev_loop *loop, const sl_options_t *o,
                             const sl_table_t *t, bool retry);

/* The segment's descriptor, for workers (SLUICE_METRICS_FD). */
int sl_scrape_segment_fd(const sl_scrape_t *sc);

/* Worker ID was reaped: fold its slot into the totals; count a restart
 * for CAUSE (SL_EXPO_CAUSES: not a restart). */
void sl_scrape_worker_gone(sl_scrape_t *sc, int id, sl_expo_cause_t cause);

/* A worker became READY BOOT seconds after its fork. */
void sl_scrape_worker_ready(sl_scrape_t *sc, double boot);

/* The target worker count, for sluice_workers_target. */
void sl_scrape_set_target(sl_scrape_t *sc, int target);

/* Once a second: bind the address again if it was busy at start. */
void sl_scrape_tick(sl_scrape_t *sc);

/* Stop listening (a binary upgrade's successor took over); scrapes under
 * way finish. */
void sl_scrape_stop_listening(sl_scrape_t *sc);

/* Close everything; the unix socket file, if any, is removed when
 * REMOVE_FILE. */
void sl_scrape_destroy(sl_scrape_t *sc, bool remove_file);

#endif
