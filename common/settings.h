/* settings.h - the one effective command line: file, environment, argv.
 *
 * The supervisor reads -c FILE and SLUICE_CMD_ARGS and merges them with
 * its own command line into one argument vector, in this order, a later
 * source overriding an earlier one: the file, then SLUICE_CMD_ARGS, then
 * the command line. A single-valued setting keeps its last value; a list
 * (--bind, --pythonpath) given by a later source replaces the earlier
 * source's whole list, as gunicorn's command line replaces its file's.
 * Workers are exec'd with that vector (without -c), so they read no file.
 */
#ifndef SL_SETTINGS_H
#define SL_SETTINGS_H

#include "common/conffile.h"

/* Build the effective vector of the command line ARGS (argv[0] first,
 * NULL-terminated; not modified) into *EFF (initialised here; the caller
 * frees it with sl_conffile_free()). Without -c and without a non-empty
 * SLUICE_CMD_ARGS it is a copy of ARGS. Otherwise it is ARGS[0], one
 * "--name=value" word per setting, the words of EXTRA (NULL-terminated,
 * or NULL: options that override all the rest), "--" and the application.
 * Each bad line or value is reported once by sl_log_usage(), naming
 * "FILE:LINE" or "SLUICE_CMD_ARGS". 0, or -1. */
int sl_settings_build(char *const *args, char *const *extra,
                      sl_conffile_t *eff);

/* The configuration file that ARGS (as above) or SLUICE_CMD_ARGS name
 * with -c, as sl_settings_build() reads it, in static storage; NULL when
 * none. Meant for a command line already found valid: a bad one is
 * reported as by sl_settings_build(). */
const char *sl_settings_config_path(char *const *args);

#endif
