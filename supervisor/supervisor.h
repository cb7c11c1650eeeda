/* supervisor.h - the supervisor's loop and its table of workers.
 *
 * The supervisor is C only and never loads Python: it keeps the target
 * number of workers alive, forwards stop signals to them and reaps them.
 */
#ifndef SL_SUPERVISOR_H
#define SL_SUPERVISOR_H

#include "common/options.h"
#include "supervisor/listen.h"

#define SL_SUPERVISOR_MAX_WORKERS 1024 /* slots in the worker table */

/* Run until stopped by a signal, keeping o->workers workers serving the
 * listeners LS[0..NLS) (borrowed: the caller closes them afterwards). ARGV
 * is exec'd for every worker. Writes and removes --pid. Returns the exit
 * status: SL_EXIT_OK after a clean stop, SL_EXIT_USAGE when a worker could
 * not import the application, SL_EXIT_FAIL otherwise. */
int sl_supervisor_run(const sl_options_t *o, char **argv,
                      const sl_listener_t *ls, int nls);

#endif
