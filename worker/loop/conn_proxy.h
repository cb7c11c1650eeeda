/* conn_proxy.h - the PROXY session (conn_proxy.c): a connection's PROXY
 * protocol header, before its first request. */
#ifndef SL_CONN_PROXY_H
#define SL_CONN_PROXY_H

#include "worker/loop/conn.h"

extern const sl_session_ops_t sl_proxy_session;

/* C, just accepted, must open with a PROXY header (--proxy-protocol): it
 * is closed at once when its peer is not on --proxy-allow-from. */
void sl_conn_proxy_start(sl_conn_t *c);

#endif
