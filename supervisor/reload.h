/* reload.h - --reload: watch the app's source, say when it changed.
 *
 * One inotify descriptor, read from an ev_io on the supervisor's loop,
 * watches directories: --chdir's, every --pythonpath's, the ones holding
 * the module files the workers report, and those of --reload-extra-file.
 * A .py file (or an extra file) written, moved in, created or deleted
 * there starts a quiet period (SL_RELOAD_QUIET); when it ends without
 * another change, the callback runs once. What to do then (a rolling
 * restart, exactly as HUP) is the supervisor's business, not this
 * module's.
 *
 * Workers report their module files through a private directory this
 * module creates: each worker writes one file named after its pid, one
 * absolute path a line, and renames it into place, before it sends READY
 * and again whenever it has imported more. The supervisor reads a report
 * when the rename shows on the directory's own watch, and at READY
 * (sl_reload_take_report), so the app's directories are watched by the
 * time the worker serves. The directory's path reaches the workers as
 * SLUICE_RELOAD_DIR (common/handoff.h).
 */
#ifndef SL_RELOAD_H
#define SL_RELOAD_H

#include <ev.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/options.h"

#define SL_RELOAD_QUIET 0.3 /* seconds without a change before reloading */

/* Called once per burst of changes; PATH is the first file that changed
 * (borrowed, good for the call). */
typedef void sl_reload_cb(void *ctx, const char *path);

typedef struct {
    int wd;     /* inotify watch descriptor */
    char *path; /* owned: the directory, resolved */
    bool code;  /* any .py file here counts, not only the extra files */
} sl_reload_dir_t;

typedef struct {
    int fd;                /* owned: inotify; -1 when --reload is off */
    struct ev_loop *loop;  /* borrowed */
    ev_io io;              /* reads fd */
    ev_timer quiet;        /* the debounce */
    sl_reload_dir_t *dirs; /* owned, ndirs of them */
    int ndirs, cap;
    char **extra; /* owned, nextra resolved --reload-extra-file paths */
    int nextra;
    char report_dir[PATH_MAX]; /* "" when none was made */
    int report_wd;             /* its watch: reports renamed in; -1: none */
    char changed[PATH_MAX];    /* the first change of this burst, or "" */
    sl_reload_cb *on_change;
    void *ctx; /* borrowed: passed to on_change */
} sl_reload_t;

/* Off (fd -1) unless O->reload. When on: the inotify descriptor, watches
 * on --chdir, --pythonpath and the extra files' directories, and the
 * report directory (exported to workers as SLUICE_RELOAD_DIR). 0, or -1
 * after logging (the caller exits). */
int sl_reload_init(sl_reload_t *r, struct ev_loop *loop, const sl_options_t *o,
                   sl_reload_cb *on_change, void *ctx);

/* Whether --reload is on for R. */
bool sl_reload_on(const sl_reload_t *r);

/* Watch DIR (CODE: its .py files count). A directory already watched is
 * not watched twice. 0, or -1 after logging (the directory is skipped). */
int sl_reload_watch_dir(sl_reload_t *r, const char *dir, bool code);

/* Read, watch and remove the report of worker PID, if it left one. The
 * number of module files in it, or -1 when there was none. */
int sl_reload_take_report(sl_reload_t *r, pid_t pid);

/* Whether a change to NAME in a directory counts: a .py file that is not
 * hidden (editors' lock and swap files start with '.'). */
bool sl_reload_is_source(const char *name);

/* Stop watching, close the descriptor, remove the report directory. */
void sl_reload_close(sl_reload_t *r);

#endif
