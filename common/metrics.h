/* metrics.h - the shared-memory segment workers count into and the
 * supervisor reads when Prometheus scrapes it (--metrics-bind).
 *
 * The supervisor creates one segment (memfd, MAP_SHARED) with one slot per
 * worker-table slot and passes its descriptor to every worker it spawns
 * (SLUICE_METRICS_FD). A worker maps it and writes its own slot, from its
 * loop thread only: one writer per slot, so a counter is bumped with a
 * relaxed load and a relaxed store, never a lock or a locked instruction,
 * and a scrape reads every word with a relaxed load. A scrape therefore
 * never waits for a worker, not even a stopped one, and never sends it a
 * message; what it may see is a histogram whose buckets were read a few
 * increments apart, which is why _count is computed from the buckets.
 *
 * Counters never go backwards across worker replacements: when a worker has
 * been reaped (no writer is left) the supervisor folds its slot's counters
 * into its own retired totals and zeroes the slot before it is reused.
 * Gauges are only meaningful in live slots, and a zeroed slot reads 0.
 *
 * Every field of a slot is a uint64_t (times are integer nanoseconds), so
 * that folding and summing can walk the counters as one array.
 */
#ifndef SL_METRICS_H
#define SL_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_METRICS_MAGIC   0x534c4d31u /* "SLM1" */
#define SL_METRICS_BUCKETS 14          /* finite upper bounds, then +Inf */

/* The buckets' upper bounds, seconds: 0.0005 .. 10. */
extern const double sl_metrics_bounds[SL_METRICS_BUCKETS];

/* Who answered (label handler="app", "static"): a --static map (the
 * worker's static.c), or anything else, the server's own answers (errors,
 * the health check) included. */
enum { SL_METRICS_APP, SL_METRICS_STATIC, SL_METRICS_HANDLERS };

/* Method classes (label method="GET", ..., "other"). */
enum {
    SL_METRICS_GET,
    SL_METRICS_HEAD,
    SL_METRICS_POST,
    SL_METRICS_PUT,
    SL_METRICS_DELETE,
    SL_METRICS_PATCH,
    SL_METRICS_OPTIONS,
    SL_METRICS_OTHER,
    SL_METRICS_METHODS
};

/* Status classes (label code="1xx" .. "5xx"; "none": no response went out,
 * the client left first). */
enum {
    SL_METRICS_1XX,
    SL_METRICS_2XX,
    SL_METRICS_3XX,
    SL_METRICS_4XX,
    SL_METRICS_5XX,
    SL_METRICS_NONE,
    SL_METRICS_CODES
};

typedef struct {
    uint64_t bucket[SL_METRICS_BUCKETS + 1]; /* not cumulative; last: +Inf */
    uint64_t sum_ns;
} sl_metrics_hist_t;

/* One worker's slot. Counters first, gauges after `conns_open`. */
typedef struct {
    uint64_t requests[SL_METRICS_HANDLERS][SL_METRICS_METHODS]
                     [SL_METRICS_CODES];
    sl_metrics_hist_t duration; /* head complete -> response written */
    sl_metrics_hist_t queue;    /* head complete -> a lane starts it */
    sl_metrics_hist_t lag;      /* lateness of the loop's 1 Hz timer */
    uint64_t bytes_in, bytes_out;
    uint64_t conns_accepted;
    uint64_t ws_opened, ws_msgs_in, ws_msgs_out;
    uint64_t idle_evictions; /* idle keep-alive conns closed to make room */
    uint64_t h2_conns;       /* connections that spoke HTTP/2 */
    uint64_t h2_requests;    /* requests served over HTTP/2 */
    /* gauges */
    uint64_t conns_open;
    uint64_t inflight;
    uint64_t lanes;
    uint64_t lanes_busy;
    uint64_t ws_open;
    uint64_t h2_conns_open;
    uint64_t h2_streams_open; /* to 1280 bytes, a multiple of 64 */
} sl_metrics_slot_t;

#define SL_METRICS_NCOUNTERS (offsetof(sl_metrics_slot_t, conns_open) / 8)
#define SL_METRICS_NWORDS    (sizeof(sl_metrics_slot_t) / 8)

typedef struct {
    uint32_t magic;
    uint32_t nslots;
    uint32_t slot_size;
    uint32_t pad[13];
    sl_metrics_slot_t slots[];
} sl_metrics_seg_t;

/* ---- supervisor ---- */

/* A zeroed segment of NSLOTS slots, mapped shared; *FD is the descriptor
 * to hand to workers (close-on-exec; spawn.c keeps it open across the
 * worker's exec). NULL after logging. */
sl_metrics_seg_t *sl_metrics_create(int nslots, int *fd);

/* A consistent-enough copy of slot S: every word read with a relaxed
 * load. Never blocks. */
void sl_metrics_read(const sl_metrics_slot_t *s, sl_metrics_slot_t *out);

/* Add the counters of S (not its gauges) to *TOTAL. */
void sl_metrics_add_counters(sl_metrics_slot_t *total,
                             const sl_metrics_slot_t *s);

/* Slot S's writer is gone: add its counters to *RETIRED, then zero S. */
void sl_metrics_fold(sl_metrics_slot_t *retired, sl_metrics_slot_t *s);

/* ---- worker ---- */

/* Map the segment on FD (from SLUICE_METRICS_FD) and keep slot
 * WORKER_ID - 1 as this process's; closes FD. 0, or -1 after logging
 * (the worker then counts into nothing). */
int sl_metrics_attach(int fd, int worker_id);

/* This worker's slot: a private one (counted, never read) until
 * sl_metrics_attach() succeeds. Written by the loop thread only. */
extern sl_metrics_slot_t *sl_metrics_self;

/* ---- both: one writer per word ---- */

static inline void sl_metrics_add(uint64_t *c, uint64_t n)
{
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n,
                     __ATOMIC_RELAXED);
}

static inline void sl_metrics_set(uint64_t *g, uint64_t v)
{
    __atomic_store_n(g, v, __ATOMIC_RELAXED);
}

/* Count SECONDS (negative counts as 0) into H. */
void sl_metrics_observe(sl_metrics_hist_t *h, double seconds);

#endif
