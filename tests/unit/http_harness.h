/* http_harness.h - what the head suites (test_http*.c, for
 * worker/loop/http.c and reqline.c) share on top of harness.h: one pump in
 * pump mode and one client per test (setup/teardown as check fixtures),
 * and a request sent to it, dispatched or answered by the loop.
 */
#ifndef SL_TEST_HTTP_HARNESS_H
#define SL_TEST_HTTP_HARNESS_H

#include <check.h>
#include <regex.h>

#include "tests/unit/buf_faults.h"
#include "tests/unit/harness.h"
#include "worker/loop/http.h"
#include "worker/loop/reqline.h"

static sl_options_t opt;
static sl_pump_t pump;
static h_client_t client;
static h_resp_t resp;

static inline void up(void)
{
    h_pump_up(&pump, &opt);
    h_connect(&pump, &client);
}

static inline void setup(void)
{
    client.fd = -1;
}

static inline void teardown(void)
{
    h_resp_free(&resp);
    h_client_close(&client);
    h_pump_down(&pump);
}

static inline bool served_or_answered(void *arg)
{
    sl_conn_t *c = arg;

    h_pull(&client);
    return c->state == SL_CONN_SERVING || client.len > 0 || client.eof;
}

/* Send RAW on a fresh pump with the options in opt; true when the request
 * reached the executor, false when the loop answered it instead (then the
 * answer is in resp). */
static inline bool submit(const char *raw)
{
    sl_conn_t *c;

    up();
    c = client.conn;
    h_sends(&client, raw);
    ck_assert(h_run_until(&pump, served_or_answered, c));
    if (c->state == SL_CONN_SERVING)
        return true;
    ck_assert(h_response(&pump, &client, &resp, strncmp(raw, "HEAD ", 5) == 0));
    ck_assert_uint_eq(h_tickets(&pump), 0); /* the app never saw it */
    return false;
}

/* The request was refused with STATUS and Connection: close. */
static inline void assert_refused(const char *raw, int status)
{
    char v[64];

    h_options(&opt, NULL);
    ck_assert_msg(!submit(raw), "request served, wanted %d", status);
    ck_assert_int_eq(resp.status, status);
    ck_assert_ptr_nonnull(h_header(resp.head, "Connection", v, sizeof(v)));
    ck_assert_str_eq(v, "close");
    ck_assert(h_wait_eof(&pump, &client));
}

static inline const sl_req_t *req(void)
{
    return &client.conn->x.req;
}

static inline void assert_url(const char *want)
{
    const sl_req_t *r = req();

    ck_assert_int_eq(r->url_len, strlen(want));
    ck_assert(memcmp(r->hbuf.data + r->url_off, want, r->url_len) == 0);
}

/* Header I of the request is NAME: VALUE, as slices of hbuf. */
static inline void assert_hdr(int i, const char *name, const char *value)
{
    const sl_req_t *r = req();
    const sl_hdr_t *hd = &r->hdrs[i];

    ck_assert_int_lt(i, r->nhdrs);
    ck_assert_msg(hd->name_len == strlen(name) &&
                      memcmp(r->hbuf.data + hd->name_off, name, hd->name_len) ==
                          0,
                  "header %d name is '%.*s', want '%s'", i, (int)hd->name_len,
                  r->hbuf.data + hd->name_off, name);
    ck_assert_msg(hd->val_len == strlen(value) &&
                      memcmp(r->hbuf.data + hd->val_off, value, hd->val_len) ==
                          0,
                  "header %d value is '%.*s', want '%s'", i, (int)hd->val_len,
                  r->hbuf.data + hd->val_off, value);
}

#endif
