/* options_value.c - one option's value into sl_options_t: a number in its
 * row's range, a string, a switch, or one of the options read by name
 * (OPT_SPECIAL: --bind, --pythonpath, the choices, the address lists).
 *
 * options.c walks the command line and hands each option here, and so does
 * its check of a configuration file's value (sl_options_check()); a bad
 * value is reported here, argparse-style, and -1 returned.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/options.h"
#include "common/options_internal.h"

static int apply_number(sl_options_t *o, const opt_def_t *d, const char *arg);
static bool parse_number(opt_kind_t kind, const char *arg, double *v);
static int apply_special(sl_options_t *o, const opt_def_t *d, const char *arg);
static int apply_asgi_choice(sl_options_t *o, const opt_def_t *d,
                             const char *arg);
static int apply_tls_choice(sl_options_t *o, const opt_def_t *d,
                            const char *arg);
static int apply_http_choice(sl_options_t *o, const opt_def_t *d,
                             const char *arg);
static int apply_http_protocols(sl_options_t *o, const char *arg);
static int add_pythonpath(sl_options_t *o, const char *arg);
static int add_word(const char **list, int *n, int max, const char *name,
                    const char *what, const char *arg);

/* "-w/--workers" or "--threads", as argparse names an argument. */
void sl_options_describe(const opt_def_t *d, char *buf, size_t size)
{
    if (d == NULL) {
        snprintf(buf, size, "(unknown)");
    } else if (d->short_name) {
        snprintf(buf, size, "-%c/--%s", d->short_name, d->name);
    } else {
        snprintf(buf, size, "--%s", d->name);
    }
}

/* The prefix of "PREFIX=..." SPEC: its length without trailing '/'s. */
static size_t static_prefix(const char *spec)
{
    size_t n = strcspn(spec, "=");

    while (n > 0 && spec[n - 1] == '/')
        n--;
    return n;
}

/* --static PREFIX=DIR, --static-cache-control PREFIX=VALUE: one more of
 * NAME's list, its form checked (the pair: sl_options_check_statics()). */
static int apply_static(sl_options_t *o, const char *name, const char *arg)
{
    bool cache = strcmp(name, "static-cache-control") == 0;
    const char *eq = strchr(arg, '=');
    const char *bad = NULL;

    if (arg[0] != '/' || eq == NULL)
        bad = cache ? "must be PREFIX=VALUE, the PREFIX a path beginning"
                      " with '/'"
                    : "must be PREFIX=DIR, the PREFIX a path beginning"
                      " with '/'";
    else if (strcspn(arg, "?# \t%") < (size_t)(eq - arg))
        bad = "the PREFIX may not hold '?', '#', '%' or blanks";
    else if (eq[1] == '\0')
        bad = cache ? "the VALUE is empty" : "the DIR is empty";
    else if (cache && strlen(eq + 1) > 256)
        bad = "the VALUE is longer than 256 bytes";
    for (const char *p = eq ? eq + 1 : ""; bad == NULL && cache && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            bad = "the VALUE holds a control character";
    if (bad != NULL) {
        sl_log_usage("argument --%s: '%s': %s", name, arg, bad);
        return -1;
    }
    if (cache)
        return add_word(o->static_caches, &o->nstatic_caches, SL_MAX_STATIC,
                        "--static-cache-control", "maps", arg);
    return add_word(o->statics, &o->nstatics, SL_MAX_STATIC, "--static", "maps",
                    arg);
}

int sl_options_check_statics(const sl_options_t *o)
{
    for (int i = 0; i < o->nstatics; i++) {
        size_t n = static_prefix(o->statics[i]);
        for (int k = 0; k < i; k++) {
            if (static_prefix(o->statics[k]) == n &&
                memcmp(o->statics[k], o->statics[i], n) == 0) {
                sl_log_usage("argument --static: '%s': the prefix of '%s'"
                             " again",
                             o->statics[i], o->statics[k]);
                return -1;
            }
        }
    }
    for (int i = 0; i < o->nstatic_caches; i++) {
        size_t n = static_prefix(o->static_caches[i]);
        bool found = false;
        for (int k = 0; k < o->nstatics && !found; k++)
            found = static_prefix(o->statics[k]) == n &&
                    memcmp(o->statics[k], o->static_caches[i], n) == 0;
        if (!found) {
            sl_log_usage("argument --static-cache-control: '%s': no --static"
                         " has that prefix",
                         o->static_caches[i]);
            return -1;
        }
    }
    return 0;
}

int sl_options_apply(sl_options_t *o, const opt_def_t *d, const char *arg)
{
    char what[64];

    switch (d->kind) {
    case OPT_SWITCH:
        *(bool *)((char *)o + d->offset) = true;
        return 0;
    case OPT_STRING:
        if (arg[0] == '\0') {
            sl_options_describe(d, what, sizeof(what));
            sl_log_usage("argument %s: must not be empty", what);
            return -1;
        }
        *(const char **)((char *)o + d->offset) = arg;
        return 0;
    case OPT_SPECIAL:
        return apply_special(o, d, arg);
    default:
        return apply_number(o, d, arg);
    }
}

static int apply_number(sl_options_t *o, const opt_def_t *d, const char *arg)
{
    char what[64];
    double v;
    void *field = (char *)o + d->offset;

    sl_options_describe(d, what, sizeof(what));
    if (!parse_number(d->kind, arg, &v)) {
        sl_log_usage("argument %s: invalid %s: '%s'", what,
                     d->kind == OPT_SECONDS ? "number of seconds"
                     : d->kind == OPT_OCTAL ? "octal mode"
                                            : "integer",
                     arg);
        return -1;
    }
    if (v < d->min || v > d->max) {
        if (d->kind == OPT_OCTAL) {
            sl_log_usage("argument %s: '%s' is out of range 0..0777", what,
                         arg);
        } else {
            sl_log_usage("argument %s: '%s' is out of range %.15g..%.15g", what,
                         arg, d->min, d->max);
        }
        return -1;
    }

    switch (d->kind) {
    case OPT_SECONDS:
        *(double *)field = v;
        break;
    case OPT_LLONG:
        *(long long *)field = strtoll(arg, NULL, 10);
        break;
    default:
        *(int *)field = (int)v;
        break;
    }
    return 0;
}

/* The whole of ARG as a number of KIND. strto* would skip leading blanks and
 * take '+' or "0x"; a value here is plain digits, with an optional '-' (so
 * that "-1" is reported as out of range rather than as gibberish), one '.'
 * for seconds (strtod stops at a second one) and Python's "0o" prefix for
 * octal. Too large to represent counts as infinite, hence out of range. */
static bool parse_number(opt_kind_t kind, const char *arg, double *v)
{
    const char *p = arg;
    char *end;

    if (kind == OPT_OCTAL) {
        if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O')) {
            p += 2;
        }
        if (*p == '\0' || strspn(p, "01234567") != strlen(p)) {
            return false;
        }
        errno = 0;
        *v = (double)strtoll(p, &end, 8);
        return errno == 0;
    }

    const char *digits = p[0] == '-' ? p + 1 : p;
    bool decimal = kind == OPT_SECONDS;
    size_t n = strspn(digits, decimal ? "0123456789." : "0123456789");
    if (n == 0 || digits[n] != '\0') {
        return false;
    }
    errno = 0;
    *v = decimal ? strtod(p, &end) : (double)strtoll(p, &end, 10);
    if (errno == ERANGE) {
        *v = p[0] == '-' ? -INFINITY : INFINITY;
    }
    return *end == '\0';
}

static int apply_special(sl_options_t *o, const opt_def_t *d, const char *arg)
{
    if (strcmp(d->name, "bind") == 0) {
        return add_word(o->binds, &o->nbinds, SL_MAX_BINDS, "-b/--bind",
                        "addresses", arg);
    }
    if (strcmp(d->name, "insecure-bind") == 0) {
        return add_word(o->insecure_binds, &o->ninsecure_binds, SL_MAX_BINDS,
                        "--insecure-bind", "addresses", arg);
    }
    if (strcmp(d->name, "pythonpath") == 0) {
        return add_pythonpath(o, arg);
    }
    if (strcmp(d->name, "certfile") == 0) {
        if (add_word(o->certfiles, &o->ncertfiles, SL_MAX_CERTS, "--certfile",
                     "certificates", arg) < 0) {
            return -1;
        }
        o->certfile = o->certfiles[0];
        return 0;
    }
    if (strcmp(d->name, "keyfile") == 0) {
        if (add_word(o->keyfiles, &o->nkeyfiles, SL_MAX_CERTS, "--keyfile",
                     "keys", arg) < 0) {
            return -1;
        }
        o->keyfile = o->keyfiles[0];
        return 0;
    }
    if (strcmp(d->name, "cert-reqs") == 0 ||
        strcmp(d->name, "ssl-min-version") == 0) {
        return apply_tls_choice(o, d, arg);
    }
    if (strcmp(d->name, "http-protocols") == 0 ||
        strcmp(d->name, "http2-cleartext") == 0) {
        return apply_http_choice(o, d, arg);
    }
    if (strcmp(d->name, "interface") == 0) {
        if (strcmp(arg, "auto") == 0) {
            o->interface = SL_IFACE_AUTO;
        } else if (strcmp(arg, "wsgi") == 0) {
            o->interface = SL_IFACE_WSGI;
        } else if (strcmp(arg, "asgi") == 0) {
            o->interface = SL_IFACE_ASGI;
        } else {
            sl_log_usage("argument --interface: invalid choice: '%s'"
                         " (choose from asgi, wsgi, auto)",
                         arg);
            return -1;
        }
        return 0;
    }
    if (strcmp(d->name, "loop") == 0 || strcmp(d->name, "lifespan") == 0) {
        return apply_asgi_choice(o, d, arg);
    }
    if (strcmp(d->name, "ws-per-message-deflate") == 0) {
        /* the words uvicorn's --ws-per-message-deflate takes */
        if (strcasecmp(arg, "true") == 0 || strcmp(arg, "1") == 0) {
            o->ws_per_message_deflate = true;
        } else if (strcasecmp(arg, "false") == 0 || strcmp(arg, "0") == 0) {
            o->ws_per_message_deflate = false;
        } else {
            sl_log_usage("argument --ws-per-message-deflate: invalid"
                         " choice: '%s' (choose from true, false)",
                         arg);
            return -1;
        }
        return 0;
    }
    if (strcmp(d->name, "forwarded-allow-ips") == 0) {
        o->forwarded_allow_set = true;
        o->forwarded_allow_text = arg;
        return sl_options_parse_allow(&o->forwarded_allow, d->name, arg);
    }
    if (strcmp(d->name, "proxy-allow-from") == 0) {
        o->proxy_allow_text = arg;
        return sl_options_parse_allow(&o->proxy_allow, d->name, arg);
    }
    if (strcmp(d->name, "static") == 0 ||
        strcmp(d->name, "static-cache-control") == 0) {
        return apply_static(o, d->name, arg);
    }
    if (strcmp(d->name, "reload-extra-file") == 0) {
        return add_word(o->reload_extra_files, &o->nreload_extra_files,
                        SL_MAX_RELOAD_EXTRA, "--reload-extra-file", "files",
                        arg);
    }
    if (strcmp(d->name, "log-level") == 0) {
        int level = sl_log_level_parse(arg);
        if (level == -1) {
            sl_log_usage("argument --log-level: invalid choice: '%s' (choose"
                         " from debug, info, warning, error, critical)",
                         arg);
            return -1;
        }
        o->log_level = level;
        return 0;
    }
    /* --error-logfile, --log-file */
    if (arg[0] == '\0') {
        sl_log_usage("argument --%s: must not be empty", d->name);
        return -1;
    }
    o->error_logfile = strcmp(arg, "-") == 0 ? NULL : arg;
    return 0;
}

/* --forwarded-allow-ips and --proxy-allow-from (NAME) into *A. */
int sl_options_parse_allow(sl_allow_t *a, const char *name, const char *arg)
{
    char why[128];

    if (sl_allow_parse(a, arg, why, sizeof(why)) < 0) {
        sl_log_usage("argument --%s: %s", name, why);
        return -1;
    }
    return 0;
}

/* --loop and --lifespan: a choice of three words each. */
static int apply_asgi_choice(sl_options_t *o, const opt_def_t *d,
                             const char *arg)
{
    static const char *const loops[] = {"auto", "asyncio", "uvloop"};
    static const char *const lifespans[] = {"auto", "on", "off"};
    bool is_loop = strcmp(d->name, "loop") == 0;
    const char *const *words = is_loop ? loops : lifespans;

    for (int i = 0; i < 3; i++) {
        if (strcmp(arg, words[i]) == 0) {
            if (is_loop) {
                o->loop = (sl_loop_t)i;
            } else {
                o->lifespan = (sl_lifespan_t)i;
            }
            return 0;
        }
    }
    sl_log_usage("argument --%s: invalid choice: '%s' (choose from %s, %s,"
                 " %s)",
                 d->name, arg, words[0], words[1], words[2]);
    return -1;
}

/* --cert-reqs (gunicorn's numbers, or their names) and --ssl-min-version
 * (OpenSSL's and Python's spelling of the versions, any case). */
static int apply_tls_choice(sl_options_t *o, const opt_def_t *d,
                            const char *arg)
{
    static const char *const reqs[] = {"none", "optional", "required"};
    static const char *const nums[] = {"0", "1", "2"};

    if (strcmp(d->name, "ssl-min-version") == 0) {
        if (strcasecmp(arg, "TLSv1.2") == 0) {
            o->tls_min = SL_TLS_1_2;
        } else if (strcasecmp(arg, "TLSv1.3") == 0) {
            o->tls_min = SL_TLS_1_3;
        } else {
            sl_log_usage("argument --ssl-min-version: invalid choice: '%s'"
                         " (choose from TLSv1.2, TLSv1.3)",
                         arg);
            return -1;
        }
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        if (strcasecmp(arg, reqs[i]) == 0 || strcmp(arg, nums[i]) == 0) {
            o->cert_reqs = (sl_cert_reqs_t)i;
            return 0;
        }
    }
    sl_log_usage("argument --cert-reqs: invalid choice: '%s' (choose from"
                 " none, optional, required, or 0, 1, 2)",
                 arg);
    return -1;
}

/* --http-protocols and --http2-cleartext (gunicorn's words, any case). */
static int apply_http_choice(sl_options_t *o, const opt_def_t *d,
                             const char *arg)
{
    if (strcmp(d->name, "http-protocols") == 0) {
        return apply_http_protocols(o, arg);
    }
    if (strcasecmp(arg, "off") == 0) {
        o->http2_prior_knowledge = false;
    } else if (strcasecmp(arg, "prior-knowledge") == 0) {
        o->http2_prior_knowledge = true;
    } else {
        /* gunicorn's upgrade and both: RFC 9113 deprecates Upgrade: h2c */
        bool upgrade =
            strcasecmp(arg, "upgrade") == 0 || strcasecmp(arg, "both") == 0;
        sl_log_usage("argument --http2-cleartext: invalid choice: '%s'"
                     " (choose from off, prior-knowledge%s)",
                     arg, upgrade ? "; Upgrade: h2c is not served" : "");
        return -1;
    }
    return 0;
}

/* "h2,h1": the protocols in order of preference, blanks around a name
 * allowed (a file's "h2, h1"); an empty, unknown or repeated one is an
 * error, and *O is changed only when all are good. */
static int apply_http_protocols(sl_options_t *o, const char *arg)
{
    static const char *const names[] = {"h1", "h2"};
    static const sl_proto_t protos[] = {SL_PROTO_H1, SL_PROTO_H2};
    sl_proto_t list[SL_MAX_PROTOS];
    int n = 0;
    const char *p = arg;

    if (arg[0] == '\0') {
        sl_log_usage("argument --http-protocols: must not be empty");
        return -1;
    }
    for (;;) {
        p += strspn(p, " \t");
        size_t len = strcspn(p, ",");
        size_t word = len;
        while (word > 0 && (p[word - 1] == ' ' || p[word - 1] == '\t')) {
            word--;
        }
        if (word == 0) {
            sl_log_usage("argument --http-protocols: an empty name in '%s'"
                         " (a comma-separated list of h1, h2)",
                         arg);
            return -1;
        }
        int k = 0;
        while (k < 2 && (strlen(names[k]) != word ||
                         strncasecmp(p, names[k], word) != 0)) {
            k++;
        }
        if (k == 2) {
            sl_log_usage("argument --http-protocols: invalid choice: '%.*s'"
                         " (choose from h1, h2)",
                         (int)word, p);
            return -1;
        }
        for (int i = 0; i < n; i++) {
            if (list[i] == protos[k]) {
                sl_log_usage("argument --http-protocols: %s is named twice"
                             " in '%s'",
                             names[k], arg);
                return -1;
            }
        }
        list[n++] = protos[k];
        if (p[len] == '\0') {
            break;
        }
        p += len + 1;
    }
    memcpy(o->http_protocols, list, (size_t)n * sizeof(list[0]));
    o->nhttp_protocols = n;
    return 0;
}

/* "a,b" adds a and b; empty pieces ("a,,b", a trailing comma) are skipped,
 * as gunicorn does. */
static int add_pythonpath(sl_options_t *o, const char *arg)
{
    const char *p = arg;

    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        if (n > 0) {
            if (o->npythonpath == SL_MAX_PYTHONPATHS) {
                sl_log_usage("argument --pythonpath: at most %d directories",
                             SL_MAX_PYTHONPATHS);
                return -1;
            }
            char *dir = strndup(p, n);
            if (dir == NULL) {
                sl_log_usage("argument --pythonpath: out of memory");
                return -1;
            }
            o->pythonpath[o->npythonpath++] = dir;
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    return 0;
}

/* ARG appended to the list LIST[0..*N) of at most MAX WHAT, for the
 * option named NAME: --bind, --reload-extra-file. */
static int add_word(const char **list, int *n, int max, const char *name,
                    const char *what, const char *arg)
{
    if (arg[0] == '\0') {
        sl_log_usage("argument %s: must not be empty", name);
        return -1;
    }
    if (*n == max) {
        sl_log_usage("argument %s: at most %d %s", name, max, what);
        return -1;
    }
    list[(*n)++] = arg;
    return 0;
}
