/* metrics.c - the shared metrics segment (see metrics.h). */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"

_Static_assert(sizeof(sl_metrics_slot_t) % 64 == 0,
               "metrics slots are whole cache lines");
_Static_assert(sizeof(sl_metrics_seg_t) == 64, "the header is one line");

const double sl_metrics_bounds[SL_METRICS_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1,    0.25,  0.5,    1,     2.5,  5,     10,
};

static sl_metrics_slot_t unshared; /* counts when nothing is attached */
sl_metrics_slot_t *sl_metrics_self = &unshared;

static size_t seg_size(int nslots)
{
    return sizeof(sl_metrics_seg_t) +
           (size_t)nslots * sizeof(sl_metrics_slot_t);
}

sl_metrics_seg_t *sl_metrics_create(int nslots, int *fd)
{
    size_t size = seg_size(nslots);
    sl_metrics_seg_t *seg;

    *fd = memfd_create("sluice-metrics", MFD_CLOEXEC);
    if (*fd == -1) {
        sl_log_errno(SL_LOG_ERROR, "memfd_create() failed for the metrics");
        return NULL;
    }
    if (ftruncate(*fd, (off_t)size) == -1) {
        sl_log_errno(SL_LOG_ERROR, "ftruncate() failed for the metrics");
        goto out_close;
    }
    /* pages of slots never used are never touched, so never allocated */
    seg = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    if (seg == MAP_FAILED) {
        sl_log_errno(SL_LOG_ERROR, "mmap() failed for the metrics");
        goto out_close;
    }
    seg->magic = SL_METRICS_MAGIC;
    seg->nslots = (uint32_t)nslots;
    seg->slot_size = (uint32_t)sizeof(sl_metrics_slot_t);
    return seg;

out_close:
    close(*fd);
    *fd = -1;
    return NULL;
}

void sl_metrics_read(const sl_metrics_slot_t *s, sl_metrics_slot_t *out)
{
    const uint64_t *src = (const uint64_t *)s;
    uint64_t *dst = (uint64_t *)out;

    for (size_t i = 0; i < SL_METRICS_NWORDS; i++) {
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    }
}

void sl_metrics_add_counters(sl_metrics_slot_t *total,
                             const sl_metrics_slot_t *s)
{
    const uint64_t *src = (const uint64_t *)s;
    uint64_t *dst = (uint64_t *)total;

    for (size_t i = 0; i < SL_METRICS_NCOUNTERS; i++) {
        dst[i] += src[i];
    }
}

void sl_metrics_fold(sl_metrics_slot_t *retired, sl_metrics_slot_t *s)
{
    sl_metrics_slot_t copy;

    sl_metrics_read(s, &copy);
    sl_metrics_add_counters(retired, &copy);
    memset(s, 0, sizeof(*s));
}

int sl_metrics_attach(int fd, int worker_id)
{
    struct stat st;
    sl_metrics_seg_t *seg;

    if (fstat(fd, &st) == -1) {
        sl_log_errno(SL_LOG_ERROR, "fstat() failed on the metrics segment");
        goto out_close;
    }
    if ((size_t)st.st_size < sizeof(sl_metrics_seg_t)) {
        sl_error("the metrics segment is too small (%lld bytes)",
                 (long long)st.st_size);
        goto out_close;
    }
    seg = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
               0);
    if (seg == MAP_FAILED) {
        sl_log_errno(SL_LOG_ERROR, "mmap() failed on the metrics segment");
        goto out_close;
    }
    if (seg->magic != SL_METRICS_MAGIC ||
        seg->slot_size != sizeof(sl_metrics_slot_t) || worker_id < 1 ||
        (uint32_t)worker_id > seg->nslots ||
        (size_t)st.st_size < seg_size((int)seg->nslots)) {
        sl_error("the metrics segment does not match this worker (slot %d)",
                 worker_id);
        munmap(seg, (size_t)st.st_size);
        goto out_close;
    }
    sl_metrics_self = &seg->slots[worker_id - 1];
    close(fd);
    return 0;

out_close:
    close(fd);
    return -1;
}

void sl_metrics_observe(sl_metrics_hist_t *h, double seconds)
{
    int i = 0;

    if (seconds < 0) {
        seconds = 0;
    }
    while (i < SL_METRICS_BUCKETS && seconds > sl_metrics_bounds[i]) {
        i++;
    }
    sl_metrics_add(&h->bucket[i], 1);
    sl_metrics_add(&h->sum_ns, (uint64_t)(seconds * 1e9));
}
