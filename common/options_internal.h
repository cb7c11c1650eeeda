/* options_internal.h - the option table, shared by the three files of the
 * options module and by nothing else: options.c reads the command line by
 * it (getopt, the configuration file's lookups), options_value.c reads one
 * option's value into sl_options_t, options_print.c writes the table out
 * (--help, --print-config). Everyone else uses common/options.h.
 */
#ifndef SL_OPTIONS_INTERNAL_H
#define SL_OPTIONS_INTERNAL_H

#include <stddef.h>

#include "common/options.h"

typedef enum {
    OPT_INT,     /* int field, [min, max] */
    OPT_LLONG,   /* long long field, [min, max] */
    OPT_SECONDS, /* double field, [min, max], decimals accepted */
    OPT_OCTAL,   /* int field, octal, [min, max] */
    OPT_STRING,  /* const char * field */
    OPT_SPECIAL, /* read by apply_special(), printed by print_special() */
    OPT_FLAG,    /* no argument: --help, --version */
    OPT_SWITCH,  /* no argument: sets a bool field */
} opt_kind_t;

/* One option: a row of sl_options_defs. */
typedef struct {
    const char *name; /* long name, without "--" */
    int short_name;   /* 0 when none */
    opt_kind_t kind;  /* how the argument is read */
    size_t offset;    /* of the field in sl_options_t */
    double min, max;  /* accepted range for numbers */
    const char *metavar;
    const char *help; /* for --help; the default in brackets */
} opt_def_t;

/* ---- options.c ---- */

/* Every option, in --help's order (static storage, never written); a long
 * option's getopt_long value is its row's index + 256. */
extern const opt_def_t sl_options_defs[];

/* The number of rows in sl_options_defs. */
extern const size_t sl_options_ndefs;

/* ---- options_value.c ---- */

/* ARG (NULL for a switch) as the value of D's option into *O; a bad value
 * is reported (sl_log_usage()) and -1 returned, 0 otherwise. */
int sl_options_apply(sl_options_t *o, const opt_def_t *d, const char *arg);

/* D's option as argparse names it, "-w/--workers" or "--threads", into
 * BUF[SIZE]; "(unknown)" when D is NULL. */
void sl_options_describe(const opt_def_t *d, char *buf, size_t size);

/* ARG, an address list, into *A for the option --NAME
 * (--forwarded-allow-ips, --proxy-allow-from); -1 after reporting a bad
 * one. */
int sl_options_parse_allow(sl_allow_t *a, const char *name, const char *arg);

/* The --static and --static-cache-control maps of *O, together: one
 * prefix a map, every cache control naming one. -1 after reporting. */
int sl_options_check_statics(const sl_options_t *o);

/* ---- options_print.c ---- */

/* Print the --help text (usage, one entry a row, the environment) to
 * stdout; flushing it is the caller's. */
void sl_options_print_help(void);

#endif
