/* expo.c - Prometheus text format 0.0.4 from the metrics (see expo.h).
 *
 * Every family is written in one go: HELP, TYPE, then its samples, as the
 * format asks (promtool checks it). Names follow Prometheus conventions:
 * a sluice_ prefix, _total on counters, base units (_seconds, _bytes).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "supervisor/expo.h"

static const char *const method_names[SL_METRICS_METHODS] = {
    "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "other",
};
static const char *const handler_names[SL_METRICS_HANDLERS] = {"app", "static"};
static const char *const code_names[SL_METRICS_CODES] = {
    "1xx", "2xx", "3xx", "4xx", "5xx", "none",
};
static const char *const cause_names[SL_EXPO_CAUSES] = {
    "crash", "timeout", "max_requests", "reload", "memory",
};

typedef struct {
    sl_buf_t *b;
    int failed; /* an append ran out of memory */
} out_t;

static void put(out_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void family(out_t *o, const char *name, const char *type,
                   const char *help);
static void counter(out_t *o, const char *name, const char *help, uint64_t v);
static void gauge(out_t *o, const char *name, const char *help, uint64_t v);
static void histogram(out_t *o, const char *name, const char *help,
                      const sl_metrics_hist_t *h);

int sl_expo_format(sl_buf_t *b, const sl_metrics_slot_t *retired,
                   const sl_expo_worker_t *w, int nw, int nup,
                   const sl_expo_super_t *sup)
{
    sl_metrics_slot_t t = *retired; /* counters: retired + live */
    sl_metrics_slot_t g = {0};      /* gauges: live only */
    out_t o = {.b = b};

    for (int i = 0; i < nw; i++) {
        sl_metrics_add_counters(&t, &w[i].m);
        g.conns_open += w[i].m.conns_open;
        g.inflight += w[i].m.inflight;
        g.lanes += w[i].m.lanes;
        g.lanes_busy += w[i].m.lanes_busy;
        g.ws_open += w[i].m.ws_open;
        g.h2_conns_open += w[i].m.h2_conns_open;
        g.h2_streams_open += w[i].m.h2_streams_open;
    }

    family(&o, "sluice_requests_total", "counter",
           "Requests served, by method, status class and handler.");
    for (int h = 0; h < SL_METRICS_HANDLERS; h++) {
        for (int m = 0; m < SL_METRICS_METHODS; m++) {
            for (int c = 0; c < SL_METRICS_CODES; c++) {
                put(&o,
                    "sluice_requests_total{method=\"%s\",code=\"%s\","
                    "handler=\"%s\"} %llu\n",
                    method_names[m], code_names[c], handler_names[h],
                    (unsigned long long)t.requests[h][m][c]);
            }
        }
    }
    histogram(&o, "sluice_request_duration_seconds",
              "From the request head read to the response written.",
              &t.duration);
    histogram(&o, "sluice_request_queue_seconds",
              "From the request head read to a lane starting it.", &t.queue);
    gauge(&o, "sluice_requests_in_flight", "Requests with the application now.",
          g.inflight);
    gauge(&o, "sluice_lanes", "Executor lanes (an ASGI worker has one).",
          g.lanes);
    gauge(&o, "sluice_lanes_busy", "Lanes inside a request now.", g.lanes_busy);
    gauge(&o, "sluice_connections_open", "Client connections open now.",
          g.conns_open);
    counter(&o, "sluice_connections_total", "Client connections accepted.",
            t.conns_accepted);
    counter(&o, "sluice_idle_evictions_total",
            "Idle keep-alive connections closed to make room for a new one"
            " (every --worker-connections slot was taken).",
            t.idle_evictions);
    counter(&o, "sluice_received_bytes_total",
            "Bytes read from clients (heads, bodies, WebSocket frames).",
            t.bytes_in);
    counter(&o, "sluice_sent_bytes_total", "Bytes written to clients.",
            t.bytes_out);
    histogram(&o, "sluice_loop_lag_seconds",
              "Lateness of each worker loop's 1 Hz timer.", &t.lag);
    gauge(&o, "sluice_websocket_connections_open", "WebSockets open now.",
          g.ws_open);
    counter(&o, "sluice_websocket_connections_total",
            "WebSockets accepted (101 sent).", t.ws_opened);
    counter(&o, "sluice_websocket_messages_received_total",
            "WebSocket messages received from clients.", t.ws_msgs_in);
    counter(&o, "sluice_websocket_messages_sent_total",
            "WebSocket messages the application sent.", t.ws_msgs_out);
    gauge(&o, "sluice_http2_connections_open",
          "Client connections speaking HTTP/2 now.", g.h2_conns_open);
    counter(&o, "sluice_http2_connections_total",
            "Client connections that spoke HTTP/2.", t.h2_conns);
    gauge(&o, "sluice_http2_streams_open",
          "HTTP/2 streams open now (or still with the application).",
          g.h2_streams_open);
    counter(&o, "sluice_http2_requests_total",
            "Requests served over HTTP/2 (sluice_requests_total counts them"
            " too).",
            t.h2_requests);

    family(&o, "sluice_worker_restarts_total", "counter",
           "Workers replaced by the supervisor, by cause.");
    for (int c = 0; c < SL_EXPO_CAUSES; c++) {
        put(&o, "sluice_worker_restarts_total{cause=\"%s\"} %llu\n",
            cause_names[c], (unsigned long long)sup->restarts[c]);
    }
    counter(&o, "sluice_worker_boots_total", "Workers that became ready.",
            sup->boots);
    histogram(&o, "sluice_worker_boot_seconds",
              "From a worker's fork to its READY.", &sup->boot_time);
    gauge(&o, "sluice_workers_target", "Workers wanted (--workers, TTIN/TTOU).",
          (uint64_t)(sup->target > 0 ? sup->target : 0));

    family(&o, "sluice_worker_up", "gauge",
           "1 when the worker in this slot is ready and serving, else 0.");
    for (int id = 1; id <= nup; id++) {
        int up = 0;
        for (int i = 0; i < nw; i++) {
            if (w[i].id == id && w[i].up) {
                up = 1;
            }
        }
        put(&o, "sluice_worker_up{worker=\"%d\"} %d\n", id, up);
    }
    return o.failed ? -1 : 0;
}

static void put(out_t *o, const char *fmt, ...)
{
    va_list ap;
    char line[256];

    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(line) ||
        sl_buf_append(o->b, line, (size_t)n) < 0) {
        o->failed = 1;
    }
}

static void family(out_t *o, const char *name, const char *type,
                   const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(out_t *o, const char *name, const char *help, uint64_t v)
{
    family(o, name, "counter", help);
    put(o, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(out_t *o, const char *name, const char *help, uint64_t v)
{
    family(o, name, "gauge", help);
    put(o, "%s %llu\n", name, (unsigned long long)v);
}

static void histogram(out_t *o, const char *name, const char *help,
                      const sl_metrics_hist_t *h)
{
    uint64_t n = 0;

    family(o, name, "histogram", help);
    for (int i = 0; i < SL_METRICS_BUCKETS; i++) {
        n += h->bucket[i];
        put(o, "%s_bucket{le=\"%g\"} %llu\n", name, sl_metrics_bounds[i],
            (unsigned long long)n);
    }
    n += h->bucket[SL_METRICS_BUCKETS];
    put(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)n);
    put(o, "%s_sum %.9f\n", name, (double)h->sum_ns / 1e9);
    put(o, "%s_count %llu\n", name, (unsigned long long)n);
}
