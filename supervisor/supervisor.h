/* supervisor.h - the supervisor's loop and its table of workers.
 *
 * The supervisor is C only and never loads Python: it keeps the target
 * number of workers serving, replaces them (rolling restart, max-requests,
 * hung or dead workers), answers signals, tells systemd what it is doing,
 * and hands over to a new binary on USR2.
 */
#ifndef SL_SUPERVISOR_H
#define SL_SUPERVISOR_H

#include "common/options.h"
#include "supervisor/listen.h"

/* Run until stopped, keeping o->workers workers serving the listeners
 * LS[0..NLS) (borrowed: the caller closes them afterwards; after a binary
 * upgrade their unlink flags are cleared, the files belong to the new
 * supervisor). Every worker is WORKER_EXE (borrowed, for the whole run;
 * see sl_spawn_find_worker()) exec'd with WORKER_ARGV (the effective
 * command line, common/settings.h); a binary upgrade execs this process's
 * own executable with ARGV (the command line as given), and a HUP builds
 * the effective one anew from ARGV.
 * Writes --pid, and removes it at exit if it still names this process.
 * Returns the exit status: SL_EXIT_OK after a clean stop, SL_EXIT_USAGE
 * when no worker could import the application, SL_EXIT_FAIL when no
 * worker became ready in time or a worker's stop went wrong. */
int sl_supervisor_run(const sl_options_t *o, const char *worker_exe,
                      char **argv, char **worker_argv, sl_listener_t *ls,
                      int nls);

#endif
