/* reconfig.c - HUP re-reads the configuration file.
 *
 * The effective command line is built again exactly as at start (the -c
 * file, SLUICE_CMD_ARGS and argv, common/settings.h) and parsed into a new
 * sl_options_t; only when all of it is good does it replace the current
 * one, so a bad file is one error line in the log and changes nothing (not
 * even the rolling restart happens: the operator's intent is unknown).
 *
 * Settings the supervisor acts on only at start cannot change this way:
 * the sockets are bound, the pid file written, the workers' user resolved.
 * A HUP that changes one of them says so in a warning and keeps the old
 * value, for the supervisor and, where a worker reads it too (--name, the
 * error log), for the new workers, by appending the old value to their
 * command line. Everything else reaches the new generation of workers;
 * --workers also moves the supervisor's target, as gunicorn's HUP does.
 *
 * TLS is the exception both ways. Whether the listeners speak it was
 * decided when they were set up, so a file that turns it on or off is
 * refused whole. And the certificates and keys are files the new workers
 * read, changed on disk with or without a configuration file (a renewed
 * certificate): before any rolling restart a worker built as at start
 * checks them (supervisor/spawn.h), and one that cannot serve refuses the
 * restart, so the old generation serves on, as --check-config refuses it.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/conffile.h"
#include "common/log.h"
#include "common/options.h"
#include "common/settings.h"
#include "supervisor/nofile.h"
#include "supervisor/spawn.h"
#include "supervisor/state.h"

#define LOG_PREFIX "Handling signal: hup: the configuration was not re-read"
#define MAX_KEPT   8

/* The generation HUP made last: owned here (the first one is main()'s). */
static sl_options_t *current;
static sl_conffile_t current_words;

static int build(supervisor_t *s, char *const *extra, sl_options_t *o,
                 sl_conffile_t *words);
static int check_tls(const supervisor_t *s, const sl_options_t *o,
                     char *const *argv);
static int kept_settings(const sl_options_t *old, const sl_options_t *o,
                         char *names, size_t size, char **extra);
static void add_name(char *names, size_t size, const char *name);
static bool same(const char *a, const char *b);
static bool same_list(const char *const *a, int na, const char *const *b,
                      int nb);
static void keep_start_only(const sl_options_t *old, sl_options_t *o);

int sl_reconfig(supervisor_t *s)
{
    const char *path = sl_settings_config_path(s->argv);
    sl_conffile_t words;
    char names[256];
    char *extra[MAX_KEPT];

    if (path == NULL) {
        /* argv and the environment are fixed; the files they name are not */
        return check_tls(s, s->o, s->worker_argv);
    }
    sl_options_t *o = calloc(1, sizeof(*o));
    if (o == NULL) {
        sl_error("%s: out of memory", LOG_PREFIX);
        return -1;
    }
    sl_log_usage_to_log(LOG_PREFIX);
    int rc = build(s, NULL, o, &words);
    if (rc == 0 && kept_settings(s->o, o, names, sizeof(names), extra) > 0) {
        /* again, with the old values last, so that they win */
        sl_conffile_free(&words);
        sl_options_release(o);
        rc = build(s, extra, o, &words);
    }
    sl_log_usage_to_log(NULL);
    if (rc == 0 && (o->certfile != NULL) != (s->o->certfile != NULL)) {
        sl_error("%s: it turns TLS %s, which only a restart can do (the"
                 " listeners were set up at start)",
                 LOG_PREFIX, o->certfile != NULL ? "on" : "off");
        sl_conffile_free(&words);
        rc = -1;
    }
    if (rc == 0 && check_tls(s, o, words.words) == -1) {
        sl_conffile_free(&words);
        rc = -1;
    }
    if (rc == -1) {
        sl_options_release(o);
        free(o);
        return -1;
    }

    if (names[0] != '\0') {
        sl_warn("Handling signal: hup: %s: only read at start, kept as they"
                " were",
                names);
    }
    keep_start_only(s->o, o);
    if (o->workers != s->o->workers) {
        int most = SL_TABLE_SLOTS - o->reload_surge;
        int target = o->workers < most ? o->workers : most;
        sl_info("Handling signal: hup: %d workers (was %d)", target, s->target);
        s->target = target;
    }
    if (o->worker_connections != s->o->worker_connections ||
        o->workers != s->o->workers) {
        (void)sl_nofile_fit(sl_nofile_need(o, s->nls), o->worker_connections);
    }
    sl_log_set_level(o->log_level);
    sl_info("Handling signal: hup: re-read %s", path);

    s->o = o;
    s->worker_argv = words.words;
    /* nothing borrows the previous generation any more */
    sl_options_release(current);
    free(current);
    sl_conffile_free(&current_words);
    current = o;
    current_words = words;
    return 0;
}

/* The effective command line, with EXTRA after its settings, into *WORDS,
 * and parsed into *O. */
static int build(supervisor_t *s, char *const *extra, sl_options_t *o,
                 sl_conffile_t *words)
{
    if (sl_settings_build(s->argv, extra, words) == -1) {
        return -1;
    }
    char **twin = calloc((size_t)words->n + 1, sizeof(*twin));
    if (twin == NULL) {
        sl_log_usage("out of memory");
        sl_conffile_free(words);
        return -1;
    }
    memcpy(twin, words->words, (size_t)words->n * sizeof(*twin));
    int rc = sl_options_parse(o, words->n, twin);
    free(twin); /* *O borrows the strings, not the array */
    if (rc != 0) {
        sl_conffile_free(words);
        return -1;
    }
    return 0;
}

/* With TLS in O, the new workers' certificates and keys, read by a
 * worker run with ARGV as at start (supervisor/spawn.h): a file that
 * cannot serve keeps the generation that serves now. 0, or -1 after the
 * check's own line and ours. */
static int check_tls(const supervisor_t *s, const sl_options_t *o,
                     char *const *argv)
{
    if (o->certfile == NULL ||
        sl_spawn_check_tls(s->worker_exe, argv, true) == SL_EXIT_OK) {
        return 0;
    }
    sl_error("Rolling restart refused: the TLS certificates or keys cannot"
             " serve (above); the workers serve on with the ones they have");
    return -1;
}

/* The start-only settings O changes from OLD, named in NAMES ("" when
 * none); the words that give a worker back the old value of those a worker
 * reads too, in EXTRA (NULL-terminated, static storage). How many. */
static int kept_settings(const sl_options_t *old, const sl_options_t *o,
                         char *names, size_t size, char **extra)
{
    static char name_word[300], log_word[4200];
    int n = 0;

    names[0] = '\0';
    if (!same_list(old->binds, old->nbinds, o->binds, o->nbinds)) {
        add_name(names, size, "bind");
    }
    if (!same_list(old->insecure_binds, old->ninsecure_binds, o->insecure_binds,
                   o->ninsecure_binds)) {
        add_name(names, size, "insecure_bind");
    }
    if (!same(old->pidfile, o->pidfile)) {
        add_name(names, size, "pid");
    }
    if (!same(old->user, o->user)) {
        add_name(names, size, "user");
    }
    if (!same(old->group, o->group)) {
        add_name(names, size, "group");
    }
    if (old->umask != o->umask) {
        add_name(names, size, "umask");
    }
    if (old->backlog != o->backlog) {
        add_name(names, size, "backlog");
    }
    if (!same(old->metrics_bind, o->metrics_bind)) {
        add_name(names, size, "metrics_bind");
    }
    if (old->reload != o->reload ||
        !same_list(old->reload_extra_files, old->nreload_extra_files,
                   o->reload_extra_files, o->nreload_extra_files)) {
        add_name(names, size, "reload");
    }
    if (!same(old->proc_name, o->proc_name)) {
        add_name(names, size, "name");
        snprintf(name_word, sizeof(name_word), "--name=%s",
                 old->proc_name ? old->proc_name : "sluice");
        extra[n++] = name_word;
    }
    if (!same(old->error_logfile, o->error_logfile)) {
        add_name(names, size, "error_logfile");
        snprintf(log_word, sizeof(log_word), "--error-logfile=%s",
                 old->error_logfile ? old->error_logfile : "-");
        extra[n++] = log_word;
    }
    extra[n] = NULL;
    return n;
}

static void add_name(char *names, size_t size, const char *name)
{
    size_t len = strlen(names);

    snprintf(names + len, size - len, "%s%s", len ? ", " : "", name);
}

static bool same(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool same_list(const char *const *a, int na, const char *const *b,
                      int nb)
{
    if (na != nb) {
        return false;
    }
    for (int i = 0; i < na; i++) {
        if (strcmp(a[i], b[i]) != 0) {
            return false;
        }
    }
    return true;
}

/* The supervisor goes on with the values it started with. Strings are
 * borrowed from main()'s vector, which lives as long as the process. */
static void keep_start_only(const sl_options_t *old, sl_options_t *o)
{
    memcpy(o->binds, old->binds, sizeof(o->binds));
    o->nbinds = old->nbinds;
    memcpy(o->insecure_binds, old->insecure_binds, sizeof(o->insecure_binds));
    o->ninsecure_binds = old->ninsecure_binds;
    o->pidfile = old->pidfile;
    o->user = old->user;
    o->group = old->group;
    o->umask = old->umask;
    o->backlog = old->backlog;
    o->proc_name = old->proc_name;
    o->error_logfile = old->error_logfile;
    o->metrics_bind = old->metrics_bind;
    o->reload = old->reload;
    memcpy(o->reload_extra_files, old->reload_extra_files,
           sizeof(o->reload_extra_files));
    o->nreload_extra_files = old->nreload_extra_files;
}
