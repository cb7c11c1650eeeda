/* lane.c - the executor lanes of pump mode.
 *
 * A lane is a plain pthread that holds the GIL while it has work and waits
 * on the work queue without it. It pops without releasing the GIL first: when
 * a batch arrived, the next request is already there and a release/acquire
 * pair per request would only buy a chance for a context switch.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <time.h>

#include "common/log.h"
#include "worker/python/lane.h"
#include "worker/python/py.h"
#include "worker/python/wsgi.h"

#define MAX_LANES 256

typedef struct {
    pthread_t tid;
    sl_pump_t *pump; /* borrowed */
    bool running;
} lane_t;

static lane_t lanes[MAX_LANES];
static int nlanes;
static pthread_mutex_t exit_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t exit_cv = PTHREAD_COND_INITIALIZER;
static int nrunning;

static void *lane_main(void *arg)
{
    lane_t *lane = arg;
    sl_pump_t *p = lane->pump;
    PyGILState_STATE gs = PyGILState_Ensure();
    sl_wsgi_lane_t *wl = sl_wsgi_lane_new();
    sl_ticket_t t;
    bool ok;

    if (wl == NULL) {
        sl_py_log_exception("cannot start an executor lane");
        goto out;
    }
    for (;;) {
        if (!sl_queue_try_pop(&p->work, &t)) {
            Py_BEGIN_ALLOW_THREADS
            ok = sl_queue_pop_wait(&p->work, &t);
            Py_END_ALLOW_THREADS
            if (!ok)
                break;
        }
        if (t.kind == SL_TICKET_SUBMIT)
            sl_wsgi_handle(wl, &p->conns[t.idx], t.gen);
    }
    sl_wsgi_lane_free(wl);
out:
    PyGILState_Release(gs);
    pthread_mutex_lock(&exit_mu);
    lane->running = false;
    nrunning--;
    pthread_cond_broadcast(&exit_cv);
    pthread_mutex_unlock(&exit_mu);
    return NULL;
}

int sl_lane_start(sl_pump_t *p, int n)
{
    sigset_t all, old;
    int i, rc;

    if (n > MAX_LANES)
        n = MAX_LANES;
    /* lanes never take signals: the loop thread owns them */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (i = 0; i < n; i++) {
        lanes[i].pump = p;
        lanes[i].running = true;
        rc = pthread_create(&lanes[i].tid, NULL, lane_main, &lanes[i]);
        if (rc != 0) {
            errno = rc;
            sl_log_errno(SL_LOG_ERROR, "pthread_create() failed for lane %d",
                         i);
            break;
        }
        pthread_mutex_lock(&exit_mu);
        nrunning++;
        pthread_mutex_unlock(&exit_mu);
        nlanes++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return i == n ? 0 : -1;
}

int sl_lane_stop(sl_pump_t *p, double timeout)
{
    struct timespec ts;
    int i, left;

    sl_queue_close(&p->work);
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)timeout;
    ts.tv_nsec += (long)((timeout - (double)(time_t)timeout) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&exit_mu);
    while (nrunning > 0 && pthread_cond_timedwait(&exit_cv, &exit_mu, &ts) == 0)
        ;
    left = nrunning;
    pthread_mutex_unlock(&exit_mu);
    for (i = 0; i < nlanes; i++)
        if (!lanes[i].running)
            pthread_join(lanes[i].tid, NULL);
    return left;
}
