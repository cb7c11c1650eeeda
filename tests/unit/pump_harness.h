/* pump_harness.h - what the pump suites (test_pump*.c, for
 * worker/loop/pump.c) share on top of harness.h: one pump, one client and
 * the control channel's socketpair per test (setup/teardown as check
 * fixtures), and the helpers more than one of them uses.
 */
#ifndef SL_TEST_PUMP_HARNESS_H
#define SL_TEST_PUMP_HARNESS_H

#include <check.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "common/date.h"
#include "common/ctl.h"
#include "common/metrics.h"
#include "tests/unit/harness.h"

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;
static int ctl[2] = {-1, -1}; /* [0] the worker's end, [1] the supervisor's */

static inline void setup(void)
{
    client.fd = -1;
    sl_log_set_level(SL_LOG_ERROR);
}

static inline void teardown(void)
{
    h_resp_free(&resp);
    h_client_close(&client);
    h_pump_down(&pump);
    if (ctl[1] >= 0)
        close(ctl[1]);
}

/* Has the pump accepted CL (is the peer of one of its connections)? */
static inline bool accepted(void *arg)
{
    h_client_t *cl = arg;
    struct sockaddr_in mine, theirs;
    socklen_t len = sizeof(mine), tlen;
    sl_conn_t *c;

    ck_assert_int_eq(getsockname(cl->fd, (struct sockaddr *)&mine, &len), 0);
    for (c = pump.pool.active.next; c != &pump.pool.active; c = c->next) {
        tlen = sizeof(theirs);
        if (getpeername(c->tp.fd, (struct sockaddr *)&theirs, &tlen) == 0 &&
            mine.sin_port == theirs.sin_port)
            return true;
    }
    return false;
}

#endif
