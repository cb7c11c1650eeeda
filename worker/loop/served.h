/* served.h - a request's end, counted (served.c). */
#ifndef SL_SERVED_H
#define SL_SERVED_H

typedef struct sl_pump sl_pump_t;
typedef struct sl_conn sl_conn_t;

/* Loop side: C is done with its request (served count, its metrics:
 * method and status class, duration, queue time; its access-log line;
 * retire once the served count says so). */
void sl_request_done(sl_pump_t *p, sl_conn_t *c);

#endif
