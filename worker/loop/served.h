/* served.h - a request's end, counted (served.c). */
#ifndef SL_SERVED_H
#define SL_SERVED_H

#include <stdbool.h>

typedef struct sl_pump sl_pump_t;
typedef struct sl_conn sl_conn_t;
typedef struct sl_exch sl_exch_t;

/* Loop side: X is done with its request (served count, its metrics:
 * method and status class, duration, queue time; its access-log line;
 * retire once the served count says so). HEAD: its head was read whole. */
void sl_exch_done(sl_pump_t *p, const sl_exch_t *x, bool head);

/* The same, for the exchange C carries itself (HTTP/1.1). */
void sl_request_done(sl_pump_t *p, sl_conn_t *c);

#endif
