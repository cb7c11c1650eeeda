/* h1.h - the HTTP/1.1 session (h1.c, its parser h1_parse.c). */
#ifndef SL_H1_H
#define SL_H1_H

#include "worker/loop/conn.h"

extern const sl_session_ops_t sl_h1_session;

/* C, just accepted (or past its PROXY header's session), speaks HTTP/1.1
 * from here: its parser set up, the header timeout armed, reading. */
void sl_h1_start(sl_conn_t *c);

/* Advance C as far as it goes without waiting (bytes already in its read
 * buffer: the PROXY session hands over with the first request read). */
void sl_h1_process(sl_conn_t *c);

/* The hold queue's expired() (output.h): the hold on the answers of the
 * connection whose output is O is over; write them and go on. */
void sl_h1_unhold(sl_output_t *o);

/* C, its last answer written, closes: its write side shut, what the
 * client still sends read and dropped until it closes too or a short
 * while passes (a reset would destroy the answer on its way). C speaks
 * HTTP/1.1's session from here, whatever it spoke before. */
void sl_h1_linger(sl_conn_t *c);

/* ---- h1_answer.c: answers the loop makes in place of an executor's ---- */

/* Queue the loop's error answer STATUS (http.c), closing after it; out of
 * memory, the close alone says it. */
void sl_h1_answer_error(sl_conn_t *c, int status);

/* Queue the health check's answer (--health-path). */
void sl_h1_answer_health(sl_conn_t *c);

/* Queue the answer of the --static map MAP (static.h); out of memory, the
 * close alone says it. */
void sl_h1_answer_static(sl_conn_t *c, int map);

#endif
