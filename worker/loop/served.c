/* served.c - a request's end, as the worker counts it: the metrics by
 * handler, method and status class, its duration and queue time, its
 * access-log line, the served count and what it may ask of the supervisor
 * (retire). Loop thread.
 */
#include "config.h"

#include "common/metrics.h"
#include "worker/loop/accesslog.h"
#include "worker/loop/drain.h"
#include "worker/loop/pump.h"
#include "worker/loop/served.h"

static int method_class(int method)
{
    switch (method) {
    case HTTP_GET:
        return SL_METRICS_GET;
    case HTTP_HEAD:
        return SL_METRICS_HEAD;
    case HTTP_POST:
        return SL_METRICS_POST;
    case HTTP_PUT:
        return SL_METRICS_PUT;
    case HTTP_DELETE:
        return SL_METRICS_DELETE;
    case HTTP_PATCH:
        return SL_METRICS_PATCH;
    case HTTP_OPTIONS:
        return SL_METRICS_OPTIONS;
    default:
        return SL_METRICS_OTHER;
    }
}

/* X's request, counted by handler, method and status class, with its
 * duration and queue time. The executor is done with it: resp_status and
 * picked are final. */
static void metrics_request(sl_pump_t *p, const sl_exch_t *x, bool head)
{
    sl_metrics_slot_t *m = sl_metrics_self;
    ev_tstamp start = x->req.start;
    int method = head ? method_class(x->req.method) : SL_METRICS_OTHER;
    int status = x->resp_status;
    int code =
        status >= 100 && status < 600 ? status / 100 - 1 : SL_METRICS_NONE;
    int handler = x->req.from_static ? SL_METRICS_STATIC : SL_METRICS_APP;

    sl_metrics_add(&m->requests[handler][method][code], 1);
    if (start <= 0)
        return; /* refused before it began (a bad head) */
    sl_metrics_observe(&m->duration, ev_now(p->loop) - start);
    if (x->picked > 0)
        sl_metrics_observe(&m->queue, x->picked - start);
}

void sl_exch_done(sl_pump_t *p, const sl_exch_t *x, bool head)
{
    metrics_request(p, x, head);
    if (x->req.major == 2)
        sl_metrics_add(&sl_metrics_self->h2_requests, 1);
    if (p->alog != NULL)
        sl_accesslog_request(p->alog, x, head);
    p->served++;
    sl_drain_retire_check(p);
}

void sl_request_done(sl_pump_t *p, sl_conn_t *c)
{
    sl_exch_done(p, &c->x, c->h1.head_done);
}
