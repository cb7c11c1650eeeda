/* buf_faults.h - buffer growth that fails on cue, to test what a caller
 * does when memory runs out.
 *
 * Include it in exactly one file of a suite: it compiles common/buf.c with
 * SL_BUF_FAULTS, and that copy of sl_buf_grow() (with a countdown) is the
 * one the suite's binary links instead of the library's. Only growth can
 * fail: an append that fits in a buffer's capacity always succeeds, so a
 * test that wants a given append to fail starts from a buffer too small
 * for it.
 */
#ifndef SL_TEST_BUF_FAULTS_H
#define SL_TEST_BUF_FAULTS_H

#define SL_BUF_FAULTS 1
#include "common/buf.c"

/* Let N more growths succeed, then fail every one; -1: never fail. */
static inline void hb_fail_after(long n)
{
    sl_buf_faults_left = n;
}

#endif
