/* memwatch.c - --max-worker-memory: read each worker's memory, judge it.
 *
 * The measure is PSS, the "Pss:" line of /proc/PID/smaps_rollup: each
 * page a worker maps counted as its size divided by the number of
 * processes sharing it. RSS would count a shared page in full in every
 * worker that maps it, so under --preload (workers forked from a zygote,
 * sharing its imported app copy-on-write) every worker would be charged
 * the whole app, and the bound would be reached by sharing, not by
 * leaking. PSS grows with what a worker owns alone (what a leak adds) and
 * the sum of all the workers' PSS is the fleet's real footprint.
 * smaps_rollup (Linux 4.14) gives the sum the kernel would otherwise print
 * per mapping in smaps, at the cost of one walk of the worker's page
 * tables: well under a millisecond for a few hundred MiB, once a second.
 *
 * A worker past its bound is marked exactly as one that sent RETIRE at
 * --max-requests, so the one rule of supervisor.c replaces it: its
 * replacement first, then its drain. Its bound is the limit less 0 to 10 %
 * (a hash of its pid): workers that leak alike, started together, would
 * otherwise cross one bound on the same tick and all be replaced at once.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/memwatch.h"

#define JITTER_PERMILLE 100 /* a bound is the limit less up to 10.0 % */

static uint32_t mix(uint32_t x);
static long long read_pss(const sl_worker_t *w);
static void judge(sl_worker_t *w, int limit_mib, uint32_t seed);

void sl_memwatch_tick(sl_table_t *t, const sl_options_t *o, unsigned gen_min)
{
    static uint32_t seed;
    static bool seeded;

    if (o->max_worker_memory <= 0) {
        return;
    }
    if (!seeded) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        seed = mix((uint32_t)ts.tv_nsec ^ (uint32_t)getpid());
        seeded = true;
    }
    for (int i = 0; i < t->high; i++) {
        sl_worker_t *w = &t->slots[i];
        /* an outdated worker is being replaced already */
        if (w->state == SL_WORKER_READY && !sl_worker_leaving(w) &&
            !sl_worker_outdated(w, gen_min)) {
            judge(w, o->max_worker_memory, seed);
        }
    }
}

long long sl_memwatch_parse_pss(const char *text, size_t n)
{
    const char *p = text, *end = text + n;

    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        long long v = 0;
        if (eol == NULL) {
            eol = end;
        }
        /* "Pss:" exactly: Pss_Anon:, Pss_File:... are parts of it */
        if (eol - p > 4 && memcmp(p, "Pss:", 4) == 0) {
            const char *q = p + 4;
            while (q < eol && (*q == ' ' || *q == '\t')) {
                q++;
            }
            const char *digits = q;
            while (q < eol && *q >= '0' && *q <= '9' && v < LLONG_MAX / 10) {
                v = v * 10 + (*q++ - '0');
            }
            if (q == digits || q + 3 > eol || memcmp(q, " kB", 3) != 0) {
                return -1; /* not the format this was written for */
            }
            return v;
        }
        p = eol + 1;
    }
    return -1;
}

long long sl_memwatch_bound_kib(int limit_mib, pid_t pid, uint32_t seed)
{
    long long limit = (long long)limit_mib * 1024;
    uint32_t permille = mix((uint32_t)pid ^ seed) % (JITTER_PERMILLE + 1);

    return limit - limit * permille / 1000;
}

/* Chris Wellons' lowbias32: every input bit moves about half the output
 * bits, so neighbouring pids get unrelated jitters. */
static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

/* W's PSS in KiB, or -1: silently when the process is gone (or a zombie,
 * whose file is empty), else after a warning, the first time only (it would
 * say the same every second). */
static long long read_pss(const sl_worker_t *w)
{
    static bool warned;
    char path[64], buf[4096];
    size_t len = 0;
    ssize_t n;
    bool gone;
    int fd;

    snprintf(path, sizeof(path), "/proc/%ld/smaps_rollup", (long)w->pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        gone = errno == ESRCH || (errno == ENOENT && kill(w->pid, 0) < 0);
        if (!gone && !warned) {
            sl_log_errno(SL_LOG_WARNING,
                         "open(%s) failed: --max-worker-memory cannot judge"
                         " worker %d",
                         path, w->id);
            warned = true;
        }
        return -1;
    }
    while (len < sizeof(buf) - 1) {
        n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break; /* an error reads as no figure: a zombie's is empty */
        }
        len += (size_t)n;
    }
    close(fd);
    long long kib = sl_memwatch_parse_pss(buf, len);
    if (kib < 0 && len > 0 && !warned) {
        sl_warn("%s has no \"Pss: N kB\" line: --max-worker-memory cannot"
                " judge worker %d",
                path, w->id);
        warned = true;
    }
    return kib;
}

/* Mark W to retire when its PSS is past its bound. */
static void judge(sl_worker_t *w, int limit_mib, uint32_t seed)
{
    long long pss = read_pss(w);
    long long bound = sl_memwatch_bound_kib(limit_mib, w->pid, seed);

    if (pss < 0 || pss <= bound) {
        return;
    }
    w->retire = true;
    w->over_memory = true;
    sl_info("Worker %d (pid %ld) uses %.1f MiB (PSS), past"
            " --max-worker-memory %d (its bound %.0f MiB): replacing it",
            w->id, (long)w->pid, (double)pss / 1024, limit_mib,
            (double)bound / 1024);
}
