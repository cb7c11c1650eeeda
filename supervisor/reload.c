/* reload.c - --reload's watcher: inotify on the app's directories.
 *
 * The watches are on directories, never on files: editors save by writing
 * a new file and renaming it over the old one, which a watch on the old
 * file's inode would miss, while the directory sees the name arrive
 * (IN_MOVED_TO). The price is noise (swap files, caches, logs), so an
 * event counts only for a .py file that is not hidden, or for a file
 * named by --reload-extra-file. Changes come in bursts (an editor's save,
 * a `git checkout`): each one restarts a short quiet timer, and only its
 * expiry reports the burst, once.
 *
 * Nothing here decides what a change means; the supervisor's callback
 * does, and it only raises a flag that cycle() acts on.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/reload.h"
#include "supervisor/spawn.h"

#define WATCH_MASK                                                             \
    (IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ONLYDIR)
#define REPORT_ENV "SLUICE_RELOAD_DIR"

static int make_report_dir(sl_reload_t *r);
static int resolve(const char *path, const char *base, char *out);
static int watch_extra_file(sl_reload_t *r, const char *file);
static void on_inotify(struct ev_loop *loop, ev_io *w, int revents);
static void on_event(sl_reload_t *r, const struct inotify_event *ev);
static void on_report(sl_reload_t *r, const char *name);
static void on_quiet(struct ev_loop *loop, ev_timer *w, int revents);
static void note_change(sl_reload_t *r, const char *path);
static void remove_report_dir(sl_reload_t *r);

int sl_reload_init(sl_reload_t *r, struct ev_loop *loop, const sl_options_t *o,
                   sl_reload_cb *on_change, void *ctx)
{
    char cwd[PATH_MAX], base[PATH_MAX], dir[PATH_MAX];

    memset(r, 0, sizeof(*r));
    r->fd = -1;
    r->report_wd = -1;
    r->loop = loop;
    r->on_change = on_change;
    r->ctx = ctx;
    if (!o->reload) {
        return 0;
    }
    r->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (r->fd == -1) {
        sl_log_errno(SL_LOG_ERROR, "--reload: inotify_init1() failed");
        return -1;
    }
    if (make_report_dir(r) == -1) {
        goto out_close;
    }
    r->report_wd =
        inotify_add_watch(r->fd, r->report_dir, IN_MOVED_TO | IN_ONLYDIR);
    if (r->report_wd == -1) {
        sl_log_errno(SL_LOG_ERROR, "--reload: inotify_add_watch(%s) failed",
                     r->report_dir);
        goto out_close;
    }
    ev_io_init(&r->io, on_inotify, r->fd, EV_READ);
    r->io.data = r;
    ev_io_start(loop, &r->io);
    ev_init(&r->quiet, on_quiet);
    r->quiet.data = r;

    /* the workers' sys.path: their working directory, then --pythonpath
     * (relative to that directory, as the workers see it) */
    if (getcwd(cwd, sizeof(cwd)) == NULL) {
        sl_log_errno(SL_LOG_ERROR, "--reload: getcwd() failed");
        goto out_close;
    }
    if (resolve(o->chdir ? o->chdir : ".", cwd, base) == 0) {
        sl_reload_watch_dir(r, base, true);
    } else {
        snprintf(base, sizeof(base), "%s", cwd);
    }
    for (int i = 0; i < o->npythonpath; i++) {
        if (resolve(o->pythonpath[i], base, dir) == 0) {
            sl_reload_watch_dir(r, dir, true);
        }
    }
    for (int i = 0; i < o->nreload_extra_files; i++) {
        if (watch_extra_file(r, o->reload_extra_files[i]) == -1) {
            goto out_close;
        }
    }
    sl_info("--reload: watching %d director%s for changes", r->ndirs,
            r->ndirs == 1 ? "y" : "ies");
    return 0;

out_close:
    sl_reload_close(r);
    return -1;
}

bool sl_reload_on(const sl_reload_t *r)
{
    return r->fd != -1;
}

/* A private directory for the workers' reports, in $TMPDIR or /tmp, and
 * its path in the environment the workers inherit. */
static int make_report_dir(sl_reload_t *r)
{
    const char *tmp = getenv("TMPDIR");
    int n;

    if (tmp == NULL || tmp[0] == '\0') {
        tmp = "/tmp";
    }
    n = snprintf(r->report_dir, sizeof(r->report_dir),
                 "%s/sluice-reload-XXXXXX", tmp);
    if (n < 0 || (size_t)n >= sizeof(r->report_dir)) {
        sl_error("--reload: TMPDIR is too long: %s", tmp);
        r->report_dir[0] = '\0';
        return -1;
    }
    if (mkdtemp(r->report_dir) == NULL) {
        sl_log_errno(SL_LOG_ERROR, "--reload: mkdtemp(%s) failed",
                     r->report_dir);
        r->report_dir[0] = '\0';
        return -1;
    }
    /* workers that run as --user write their reports here too */
    uid_t uid;
    gid_t gid;
    if (sl_spawn_identity(&uid, &gid) && chown(r->report_dir, uid, gid) == -1) {
        sl_log_errno(SL_LOG_ERROR, "--reload: chown(\"%s\", %ld, %ld) failed",
                     r->report_dir, (long)uid, (long)gid);
        return -1;
    }
    if (setenv(REPORT_ENV, r->report_dir, 1) == -1) {
        sl_log_errno(SL_LOG_ERROR, "--reload: setenv(" REPORT_ENV ") failed");
        return -1;
    }
    return 0;
}

/* PATH made absolute against BASE and resolved into OUT (PATH_MAX). 0, or
 * -1 after a warning. */
static int resolve(const char *path, const char *base, char *out)
{
    char joined[PATH_MAX * 2];

    if (path[0] == '/') {
        snprintf(joined, sizeof(joined), "%s", path);
    } else {
        snprintf(joined, sizeof(joined), "%s/%s", base, path);
    }
    if (realpath(joined, out) == NULL) {
        sl_log_errno(SL_LOG_WARNING, "--reload: cannot watch %s", joined);
        return -1;
    }
    return 0;
}

/* The file's directory must exist; the file itself may come later. */
static int watch_extra_file(sl_reload_t *r, const char *file)
{
    char copy[PATH_MAX], dir[PATH_MAX], cwd[PATH_MAX], full[PATH_MAX * 2];
    char **more;

    if (getcwd(cwd, sizeof(cwd)) == NULL) {
        sl_log_errno(SL_LOG_ERROR, "--reload: getcwd() failed");
        return -1;
    }
    snprintf(copy, sizeof(copy), "%s", file);
    if (resolve(dirname(copy), cwd, dir) == -1) {
        return -1;
    }
    snprintf(copy, sizeof(copy), "%s", file);
    snprintf(full, sizeof(full), "%s/%s", dir, basename(copy));
    more = realloc(r->extra, (size_t)(r->nextra + 1) * sizeof(*more));
    if (more == NULL) {
        sl_error("--reload: out of memory");
        return -1;
    }
    r->extra = more;
    r->extra[r->nextra] = strdup(full);
    if (r->extra[r->nextra] == NULL) {
        sl_error("--reload: out of memory");
        return -1;
    }
    r->nextra++;
    return sl_reload_watch_dir(r, dir, false);
}

int sl_reload_watch_dir(sl_reload_t *r, const char *dir, bool code)
{
    char real[PATH_MAX];
    sl_reload_dir_t *d;

    if (r->fd == -1) {
        return 0;
    }
    if (realpath(dir, real) == NULL) {
        sl_log_errno(SL_LOG_WARNING, "--reload: cannot watch %s", dir);
        return -1;
    }
    int wd = inotify_add_watch(r->fd, real, WATCH_MASK);
    if (wd == -1) {
        sl_log_errno(SL_LOG_WARNING, "--reload: inotify_add_watch(%s) failed",
                     real);
        return -1;
    }
    for (int i = 0; i < r->ndirs; i++) {
        if (r->dirs[i].wd == wd) { /* the same directory once more */
            r->dirs[i].code = r->dirs[i].code || code;
            return 0;
        }
    }
    if (r->ndirs == r->cap) {
        int cap = r->cap ? r->cap * 2 : 16;
        d = realloc(r->dirs, (size_t)cap * sizeof(*d));
        if (d == NULL) {
            sl_error("--reload: out of memory for %d watches", cap);
            return -1;
        }
        r->dirs = d;
        r->cap = cap;
    }
    d = &r->dirs[r->ndirs];
    d->path = strdup(real);
    if (d->path == NULL) {
        sl_error("--reload: out of memory");
        inotify_rm_watch(r->fd, wd);
        return -1;
    }
    d->wd = wd;
    d->code = code;
    r->ndirs++;
    sl_debug("--reload: watching %s%s", real, code ? "" : " (extra files)");
    return 0;
}

int sl_reload_take_report(sl_reload_t *r, pid_t pid)
{
    char path[PATH_MAX + 32], last[PATH_MAX] = "";
    char *line = NULL;
    size_t size = 0;
    ssize_t n;
    int count = 0;

    if (r->fd == -1 || r->report_dir[0] == '\0') {
        return -1;
    }
    snprintf(path, sizeof(path), "%s/%ld", r->report_dir, (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        if (errno != ENOENT) {
            sl_log_errno(SL_LOG_WARNING, "--reload: cannot read %s", path);
        }
        return -1;
    }
    while ((n = getline(&line, &size, f)) > 0) {
        if (line[n - 1] == '\n') {
            line[--n] = '\0';
        }
        if (line[0] != '/') {
            continue;
        }
        count++;
        char *dir = dirname(line);
        if (strcmp(dir, last) != 0) { /* a package's modules come together */
            sl_reload_watch_dir(r, dir, true);
            snprintf(last, sizeof(last), "%s", dir);
        }
    }
    free(line);
    fclose(f);
    if (unlink(path) == -1) {
        sl_log_errno(SL_LOG_WARNING, "--reload: unlink(%s) failed", path);
    }
    return count;
}

bool sl_reload_is_source(const char *name)
{
    size_t n = strlen(name);

    return n > 3 && name[0] != '.' && strcmp(name + n - 3, ".py") == 0;
}

/* Every event waiting, until the descriptor would block. */
static void on_inotify(struct ev_loop *loop, ev_io *w, int revents)
{
    sl_reload_t *r = w->data;
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));

    (void)loop;
    (void)revents;
    for (;;) {
        ssize_t n = read(r->fd, buf, sizeof(buf));
        if (n == -1 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (n == -1 && errno != EAGAIN) {
                sl_log_errno(SL_LOG_WARNING, "--reload: read(inotify) failed");
            }
            return;
        }
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            on_event(r, ev);
            p += sizeof(*ev) + ev->len;
        }
    }
}

static void on_event(sl_reload_t *r, const struct inotify_event *ev)
{
    char path[PATH_MAX];
    int i, n;

    if (ev->mask & IN_Q_OVERFLOW) {
        note_change(r, "(more changes than inotify could queue)");
        return;
    }
    if (ev->wd == r->report_wd) {
        if (ev->len > 0 && (ev->mask & IN_MOVED_TO)) {
            on_report(r, ev->name);
        }
        return;
    }
    for (i = 0; i < r->ndirs && r->dirs[i].wd != ev->wd; i++) {
    }
    if (i == r->ndirs) {
        return;
    }
    sl_reload_dir_t *d = &r->dirs[i];
    if (ev->mask & IN_IGNORED) { /* the directory went away */
        sl_info("--reload: %s is gone, no longer watched", d->path);
        free(d->path);
        *d = r->dirs[--r->ndirs];
        return;
    }
    if (ev->len == 0 || (ev->mask & IN_ISDIR)) {
        return;
    }
    n = snprintf(path, sizeof(path), "%s/%s", d->path, ev->name);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        return;
    }
    bool counts = d->code && sl_reload_is_source(ev->name);
    for (int k = 0; k < r->nextra && !counts; k++) {
        counts = strcmp(r->extra[k], path) == 0;
    }
    if (counts) {
        note_change(r, path);
    }
}

/* A worker renamed its report NAME ("<pid>") into place: it imported
 * more since the last one. Its temporary files end in ".tmp". */
static void on_report(sl_reload_t *r, const char *name)
{
    size_t n = strspn(name, "0123456789");
    long pid;

    if (n == 0 || n > 9 || name[n] != '\0') {
        return;
    }
    pid = strtol(name, NULL, 10);
    int count = sl_reload_take_report(r, (pid_t)pid);
    if (count >= 0) {
        sl_debug("--reload: pid %ld reported %d module files", pid, count);
    }
}

/* Keep the first change of the burst, and wait for the burst to end. */
static void note_change(sl_reload_t *r, const char *path)
{
    if (r->changed[0] == '\0') {
        snprintf(r->changed, sizeof(r->changed), "%s", path);
    }
    ev_timer_stop(r->loop, &r->quiet);
    ev_timer_set(&r->quiet, SL_RELOAD_QUIET, 0);
    ev_timer_start(r->loop, &r->quiet);
}

static void on_quiet(struct ev_loop *loop, ev_timer *w, int revents)
{
    sl_reload_t *r = w->data;
    char path[PATH_MAX];

    (void)loop;
    (void)revents;
    snprintf(path, sizeof(path), "%s", r->changed);
    r->changed[0] = '\0';
    r->on_change(r->ctx, path);
}

void sl_reload_close(sl_reload_t *r)
{
    r->report_wd = -1;
    if (r->fd != -1) {
        ev_io_stop(r->loop, &r->io);
        ev_timer_stop(r->loop, &r->quiet);
        close(r->fd);
        r->fd = -1;
    }
    for (int i = 0; i < r->ndirs; i++) {
        free(r->dirs[i].path);
    }
    free(r->dirs);
    r->dirs = NULL;
    r->ndirs = r->cap = 0;
    for (int i = 0; i < r->nextra; i++) {
        free(r->extra[i]);
    }
    free(r->extra);
    r->extra = NULL;
    r->nextra = 0;
    remove_report_dir(r);
}

/* Reports of workers that never became READY are left behind: remove
 * them with the directory. */
static void remove_report_dir(sl_reload_t *r)
{
    if (r->report_dir[0] == '\0') {
        return;
    }
    DIR *d = opendir(r->report_dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] != '.') {
                unlinkat(dirfd(d), e->d_name, 0);
            }
        }
        closedir(d);
    }
    if (rmdir(r->report_dir) == -1) {
        sl_log_errno(SL_LOG_WARNING, "--reload: rmdir(%s) failed",
                     r->report_dir);
    }
    r->report_dir[0] = '\0';
}
