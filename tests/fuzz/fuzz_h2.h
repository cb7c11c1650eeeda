/* fuzz_h2.h - what fuzz_h2.c (the property: runs, cuts, stories) and
 * fuzz_h2_peer.c (the worker around the session, and the client at the
 * other end of its socket) share. One run at a time: fz_run.
 */
#ifndef FUZZ_H2_H
#define FUZZ_H2_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/options.h"
#include "worker/loop/conn.h"
#include "worker/loop/exec.h"
#include "worker/loop/pump.h"

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_h2: %s:%d: %s\n", __FILE__, __LINE__,        \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* The executor: lanes (handoff), ASGI inline (on the loop, answers
 * later), WSGI inline (on the loop, answers in run(), its output sent as
 * it is queued: sl_h2_inline_notify()). */
enum { EXEC_HANDOFF, EXEC_ONLOOP, EXEC_ATONCE };

/* A profile byte 0 chooses. */
typedef struct {
    const char *args[24];
    int exec;   /* EXEC_* */
    bool drain; /* at the input's end the worker drains (GOAWAY notice,
                   its PING, the last GOAWAY); else the 1 Hz sweep runs
                   far in the future (keep-alive, send and header
                   timeouts) after the answers */
} profile_def_t;

typedef struct {
    const profile_def_t *def;
    sl_options_t opt;
    sl_exec_t exec;
    sl_pump_t pump;
} profile_t;

/* A request the executor holds until the input is over. */
typedef struct {
    sl_exch_t *x;
    uint32_t gen;
    sl_buf_t head; /* what it was given, told at the end */
    bool answered;
} held_t;

/* What a run made of the input. */
typedef struct {
    sl_buf_t text;     /* the requests, in a form memcmp can compare */
    int goaway;        /* the last GOAWAY's error code, -1: none */
    bool closed;       /* the connection closed before the client did */
    unsigned gone;     /* requests the executor saw aborted (not told) */
    unsigned served;   /* requests answered, by the executor or the loop */
    bool raced;        /* a stream ended by the server before the input did */
    bool refused;      /* a stream was refused (RST_STREAM REFUSED_STREAM) */
    bool split_cont;   /* a cut fell inside a CONTINUATION frame's header */
    bool split_goaway; /* a cut fell after the client's GOAWAY */
} story_t;

/* The run under way. */
typedef struct {
    profile_t *p;
    sl_conn_t *c;
    int fd; /* the client's end */
    story_t *story;
    held_t *held; /* every request the executor was given, in order */
    uint32_t nheld, held_cap;
    sl_exch_t **done; /* completions to apply: h2s.max entries */
    uint32_t ndone;
    sl_buf_t rx; /* what the server wrote, frames not yet whole */
    bool settings_first;
    bool input_over;  /* the last piece of the input is written */
    bool stalled;     /* the socket is full and the session does not read */
    sl_buf_t backlog; /* the input not written yet, when stalled */
    unsigned lent, released;
} fz_run_t;

extern fz_run_t fz_run;

static inline uint32_t fz_be24(const uint8_t *p)
{
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

/* fuzz_h2_peer.c: the executor table's operations */
void fz_exec_run(sl_exch_t *x);
void fz_exec_notify(sl_exch_t *x);
void fz_exec_wake(sl_exch_t *x);
int fz_exec_wait(sl_exch_t *x, int what);
void fz_exec_release(void *owner);
void fz_pool_changed(sl_pool_t *pool, bool released);

/* fuzz_h2_peer.c: a run. A session on P's connection, the client's
 * preface sent; the input's pieces, the last after input_over is set; the
 * input's end: the answers, time passing, the client leaving, every
 * resource checked given back. */
void fz_begin(profile_t *p, story_t *story);
void fz_feed(const uint8_t *d, size_t n);
void fz_end(void);

#endif
