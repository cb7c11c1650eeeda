/* startup.c - argv, options and the error log, for both mains (see
 * startup.h).
 *
 * Process titles are written over argv's memory, so the title module takes
 * it over before anything keeps a pointer into argv or the environment.
 * getopt_long() reorders what it parses, so it gets a twin of the copy,
 * and the copy itself stays as given for the execs.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/conffile.h"
#include "common/proctitle.h"
#include "common/settings.h"
#include "common/startup.h"

static bool parse_and_log(int argc, char **argv, sl_options_t *o, int *status);

bool sl_startup(int argc, char **argv, sl_options_t *o, char ***args,
                int *status)
{
    static char **parse; /* kept: the options borrow its strings */

    *args = sl_proctitle_init(argc, argv);
    parse = calloc((size_t)argc + 1, sizeof(*parse));
    if (*args == NULL || parse == NULL) {
        sl_log_usage("out of memory");
        *status = SL_EXIT_FAIL;
        return false;
    }
    memcpy(parse, *args, (size_t)argc * sizeof(*parse));
    return parse_and_log(argc, parse, o, status);
}

bool sl_startup_supervisor(int argc, char **argv, sl_options_t *o, char ***args,
                           char ***eff, int *status)
{
    static sl_conffile_t words; /* kept: the options borrow its strings */
    static char **parse;

    *args = sl_proctitle_init(argc, argv);
    if (*args == NULL) {
        sl_log_usage("out of memory");
        *status = SL_EXIT_FAIL;
        return false;
    }
    if (sl_settings_build(*args, NULL, &words) == -1) {
        *status = SL_EXIT_USAGE;
        return false;
    }
    parse = calloc((size_t)words.n + 1, sizeof(*parse));
    if (parse == NULL) {
        sl_log_usage("out of memory");
        *status = SL_EXIT_FAIL;
        return false;
    }
    memcpy(parse, words.words, (size_t)words.n * sizeof(*parse));
    *eff = words.words;
    return parse_and_log(words.n, parse, o, status);
}

/* Parse ARGV into *O, then the log level and file it asks for. */
static bool parse_and_log(int argc, char **argv, sl_options_t *o, int *status)
{
    int rc = sl_options_parse(o, argc, argv);
    if (rc != 0) {
        *status = rc == 1 ? SL_EXIT_OK : SL_EXIT_USAGE;
        return false;
    }
    sl_log_set_level(o->log_level);
    if (o->check_config || o->print_config) {
        return true; /* they open, bind and import nothing */
    }
    if (o->error_logfile != NULL && sl_log_open(o->error_logfile) == -1) {
        sl_log_usage("cannot open the error log %s: %s", o->error_logfile,
                     strerror(errno));
        *status = SL_EXIT_USAGE;
        return false;
    }
    return true;
}

int sl_startup_int(const char *s, int *out)
{
    char *end;
    long v;

    if (s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (*end != '\0' || errno != 0 || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}
