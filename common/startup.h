/* startup.h - the first steps of both executables' main().
 *
 * sluice (the supervisor) and sluice-worker are started with the same argv,
 * so they parse the same options; doing it here, in one function both call
 * first, also makes them set up process titles and the error log the same
 * way before anything else can log.
 */
#ifndef SL_STARTUP_H
#define SL_STARTUP_H

#include <stdbool.h>

#include "common/options.h"

/* Take over ARGV's memory for process titles, parse ARGV into *O, set the
 * log level and open --error-logfile. *ARGS gets the untouched copy of
 * argv that every exec uses (owned by common/proctitle.c; *O borrows its
 * strings from a twin kept for the life of the process). Returns true
 * when main() goes on; false when it exits with *STATUS: SL_EXIT_OK after
 * --help or --version, SL_EXIT_USAGE after one "sluice: error: ..." line,
 * SL_EXIT_FAIL when out of memory. */
bool sl_startup(int argc, char **argv, sl_options_t *o, char ***args,
                int *status);

/* sl_startup() for the supervisor: as above, but *O is parsed from the
 * effective vector common/settings.h builds (configuration file,
 * SLUICE_CMD_ARGS, then ARGV), which goes to *EFF (kept for the life of
 * the process: *O borrows its strings) for the workers' exec; *ARGS stays
 * the command line as given, for a binary upgrade's. */
bool sl_startup_supervisor(int argc, char **argv, sl_options_t *o, char ***args,
                           char ***eff, int *status);

/* S as a whole non-negative decimal int (what the supervisor passes in
 * SLUICE_* variables: fds, ids, counts) into *OUT: 0, or -1 when S is
 * empty, signed, has anything after the digits or does not fit. */
int sl_startup_int(const char *s, int *out);

#endif
