/* expo.h - the Prometheus text exposition of sluice's metrics.
 *
 * A pure function of its inputs, so that a unit test can check the text
 * and the aggregation without processes: the counters of workers already
 * gone (folded), a snapshot of each worker slot in use, and what the
 * supervisor counts itself. Counters are the retired totals plus every
 * slot's; gauges are the slots' sum; histograms are emitted cumulative,
 * with _count taken from the buckets, so _count always equals the +Inf
 * bucket even when a snapshot caught a worker mid-observation.
 */
#ifndef SL_EXPO_H
#define SL_EXPO_H

#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/metrics.h"

/* Why the supervisor replaced a worker (label cause=...). */
typedef enum {
    SL_EXPO_CRASH,        /* it exited or died unasked */
    SL_EXPO_TIMEOUT,      /* killed by the health check (--timeout) */
    SL_EXPO_MAX_REQUESTS, /* it retired (--max-requests) */
    SL_EXPO_RELOAD,       /* a rolling restart (HUP) replaced it */
    SL_EXPO_MEMORY,       /* past --max-worker-memory */
    SL_EXPO_CAUSES
} sl_expo_cause_t;

/* What the supervisor counts itself. */
typedef struct {
    uint64_t restarts[SL_EXPO_CAUSES];
    uint64_t boots;              /* workers that became READY */
    sl_metrics_hist_t boot_time; /* fork to READY */
    int target;                  /* workers wanted */
} sl_expo_super_t;

/* One worker slot in use at the scrape. */
typedef struct {
    int id;              /* the table slot number, stable across replacements */
    bool up;             /* READY */
    sl_metrics_slot_t m; /* a snapshot (sl_metrics_read()) */
} sl_expo_worker_t;

/* Append the whole exposition to B: RETIRED's counters plus W[0..NW)'s,
 * the gauges of W, worker_up for ids 1..NUP (0 for ids not in W), and
 * SUP. 0, or -1 when out of memory (B holds a part). */
int sl_expo_format(sl_buf_t *b, const sl_metrics_slot_t *retired,
                   const sl_expo_worker_t *w, int nw, int nup,
                   const sl_expo_super_t *sup);

/* The content type of that text. */
#define SL_EXPO_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
