/* spawn.c - fork + exec of one worker, or of a new supervisor.
 *
 * Between fork() and exec() the child runs supervisor code with the
 * supervisor's signal handlers, which write to the supervisor's libev wake-up
 * pipe. So every signal is blocked across fork(); the child resets all
 * dispositions to their defaults before unblocking, and a signal meant for
 * the supervisor waits in the parent until it has restored its mask.
 *
 * A worker asks the kernel for SIGTERM when the supervisor dies
 * (PR_SET_PDEATHSIG survives exec), so an orphaned worker drains and exits
 * even if the supervisor was SIGKILLed before it could tell anyone. A new
 * supervisor (binary upgrade) must outlive the old one, so it does not.
 *
 * The worker executable is looked up beside /proc/self/exe at start: later
 * that link may name a file an upgrade has replaced ("... (deleted)").
 *
 * --user and --group are resolved once, at start, while the supervisor
 * still knows it can (names need the user database, which a chroot or a
 * changed /etc could take away); each worker child drops to them just
 * before exec, so the worker's own code never runs as root. The supervisor
 * stays as it was started, as gunicorn's arbiter does: it has to, to start
 * the next worker under another uid.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/handoff.h"
#include "common/log.h"
#include "common/options.h"
#include "supervisor/spawn.h"

#define FDLIST_MAX      1024 /* "3,4,...": room for SL_MAX_LISTENERS numbers */
#define WORKER_NAME     "sluice-worker"
#define STRINGIFY(x)    #x
#define AS_STRING(x)    STRINGIFY(x)
#define HANDOFF_VERSION AS_STRING(SL_HANDOFF_VERSION)

#ifndef SL_WORKER_PATH /* the installed worker; Makefile.am defines it */
#error "SL_WORKER_PATH is not defined"
#endif
#ifndef SL_BINDIR /* where sluice itself is installed; likewise */
#error "SL_BINDIR is not defined"
#endif

/* The supervisor's systemd variables: a worker must not talk to systemd. */
static const char *const supervisor_only_env[] = {
    "NOTIFY_SOCKET",      "WATCHDOG_USEC",       "WATCHDOG_PID",
    "SLUICE_UPGRADE_FDS", "SLUICE_UPGRADE_PIPE", "SLUICE_UPGRADE_WORKERS",
    "SLUICE_CMD_ARGS", /* already in the worker's argv */
};

static void beside_self(char *buf, size_t size);
static void self_exe(char *buf, size_t size);
static int copy_path(char *buf, size_t size, const char *path);
static bool is_executable(const char *path);
static pid_t fork_blocked(void);
static void reset_signals(void);
static void exec_worker(const char *exe, char *const argv[], const int *fds,
                        int nfds, int worker_id, int ctl_fd, int metrics_fd,
                        pid_t parent) __attribute__((noreturn));
static void exec_supervisor(const char *exe, char *const argv[],
                            const int *keep, int nkeep, char *const env[])
    __attribute__((noreturn));
static int keep_across_exec(int fd);
static int resolve_user(const char *user, uid_t *uid, gid_t *gid);
static int resolve_group(const char *group, gid_t *gid);
static bool is_id(const char *s, unsigned long *id);
static int drop_identity(void);

/* Who the workers run as; decided at start (sl_spawn_set_identity()). */
static struct {
    bool set;
    bool have_user; /* setuid() and the user's groups */
    uid_t uid;
    gid_t gid;
    char name[64]; /* for initgroups(); "" when the uid has no name */
} identity;

int sl_spawn_find_worker(char *buf, size_t size)
{
    const char *bin = getenv("SLUICE_WORKER_BIN");
    char beside[PATH_MAX], self[PATH_MAX], moved[PATH_MAX];

    if (bin != NULL) {
        if (!is_executable(bin)) {
            sl_log_usage("SLUICE_WORKER_BIN=%s is not an executable file: %s",
                         bin, strerror(errno));
            return -1;
        }
        return copy_path(buf, size, bin);
    }
    beside_self(beside, sizeof(beside));
    if (beside[0] != '\0' && is_executable(beside)) {
        return copy_path(buf, size, beside);
    }
    /* An installed tree unpacked under another root (dpkg -x, a DESTDIR,
     * a chroot seen from outside) keeps its layout but not its prefix. */
    self_exe(self, sizeof(self));
    if (sl_spawn_relocate(self, SL_BINDIR, SL_WORKER_PATH, moved,
                          sizeof(moved)) &&
        is_executable(moved)) {
        return copy_path(buf, size, moved);
    }
    if (is_executable(SL_WORKER_PATH)) {
        return copy_path(buf, size, SL_WORKER_PATH);
    }
    sl_log_usage("no worker executable: neither %s nor %s is an executable"
                 " file (set SLUICE_WORKER_BIN to one)",
                 beside[0] ? beside : "(this executable's directory)",
                 SL_WORKER_PATH);
    return -1;
}

bool sl_spawn_relocate(const char *exe, const char *bindir,
                       const char *installed, char *buf, size_t size)
{
    const char *slash = strrchr(exe, '/');
    size_t dirlen = slash != NULL ? (size_t)(slash - exe) : 0;
    size_t binlen = strlen(bindir);

    buf[0] = '\0';
    while (binlen > 1 && bindir[binlen - 1] == '/') {
        binlen--; /* "/usr/bin/" is "/usr/bin" */
    }
    /* BINDIR is absolute, so a match at the end of EXE's directory starts
     * at a '/': "/r/xusr/bin" cannot pass for "/usr/bin". The root left
     * over is non-empty (else EXE is where it was installed) and absolute. */
    if (bindir[0] != '/' || installed[0] != '/' || exe[0] != '/' ||
        dirlen <= binlen ||
        memcmp(exe + dirlen - binlen, bindir, binlen) != 0) {
        return false;
    }
    int len =
        snprintf(buf, size, "%.*s%s", (int)(dirlen - binlen), exe, installed);
    if (len < 0 || (size_t)len >= size) {
        buf[0] = '\0';
        return false;
    }
    return true;
}

/* This process's executable, or "". */
static void self_exe(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);

    buf[n > 0 ? n : 0] = '\0';
}

/* WORKER_NAME in the directory of this process's executable, or "". */
static void beside_self(char *buf, size_t size)
{
    char self[PATH_MAX];

    buf[0] = '\0';
    self_exe(self, sizeof(self));
    char *slash = strrchr(self, '/');
    if (slash == NULL) {
        return;
    }
    slash[1] = '\0';
    int len = snprintf(buf, size, "%s%s", self, WORKER_NAME);
    if (len < 0 || (size_t)len >= size) {
        buf[0] = '\0';
    }
}

static int copy_path(char *buf, size_t size, const char *path)
{
    int len = snprintf(buf, size, "%s", path);
    if (len < 0 || (size_t)len >= size) {
        sl_log_usage("the worker's path is too long: %s", path);
        return -1;
    }
    return 0;
}

/* PATH names an executable regular file; false with errno set if not. */
static bool is_executable(const char *path)
{
    struct stat st;

    if (stat(path, &st) == -1 || access(path, X_OK) == -1) {
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        errno = S_ISDIR(st.st_mode) ? EISDIR : EACCES;
        return false;
    }
    return true;
}

pid_t sl_spawn_worker(const char *exe, char *const argv[], const int *fds,
                      int nfds, int worker_id, int ctl_fd, int metrics_fd)
{
    pid_t parent = getpid();
    pid_t pid = fork_blocked();

    if (pid == 0) {
        unsetenv("SLUICE_ZYGOTE_FD"); /* a worker, not a zygote */
        exec_worker(exe, argv, fds, nfds, worker_id, ctl_fd, metrics_fd,
                    parent);
    }
    if (pid == -1) {
        sl_log_errno(SL_LOG_ERROR, "fork() failed for worker %d", worker_id);
    }
    return pid;
}

pid_t sl_spawn_zygote(const char *exe, char *const argv[], const int *fds,
                      int nfds, int zygote_fd, unsigned gen, int metrics_fd)
{
    pid_t parent = getpid();
    pid_t pid = fork_blocked();
    char buf[16], genbuf[16];

    if (pid == 0) {
        snprintf(buf, sizeof(buf), "%d", zygote_fd);
        snprintf(genbuf, sizeof(genbuf), "%u", gen);
        if (keep_across_exec(zygote_fd) == -1 ||
            setenv("SLUICE_ZYGOTE_FD", buf, 1) == -1 ||
            setenv("SLUICE_ZYGOTE_GEN", genbuf, 1) == -1) {
            _exit(127);
        }
        exec_worker(exe, argv, fds, nfds, 0, -1, metrics_fd, parent);
    }
    if (pid == -1) {
        sl_log_errno(SL_LOG_ERROR, "fork() failed for the zygote");
    }
    return pid;
}

int sl_spawn_check_tls(const char *exe, char *const argv[], bool to_log)
{
    sigset_t none;
    int status;

    /* a HUP runs it from the loop: no handler of the supervisor's may run
     * in the child before the exec */
    sigemptyset(&none);
    pid_t pid = fork_blocked();
    if (pid == -1) {
        sl_log_errno(SL_LOG_ERROR, "fork() failed for the TLS check");
        return SL_EXIT_FAIL;
    }
    if (pid == 0) {
        if (setenv("SLUICE_CHECK_TLS", to_log ? "log" : "1", 1) == -1 ||
            drop_identity() == -1) {
            _exit(SL_EXIT_USAGE);
        }
        sigprocmask(SIG_SETMASK, &none, NULL);
        execv(exe, argv);
        sl_log_errno(SL_LOG_ERROR, "execv(\"%s\") failed", exe);
        _exit(SL_EXIT_FAIL);
    }
    while (waitpid(pid, &status, 0) == -1) {
        if (errno != EINTR) {
            sl_log_errno(SL_LOG_ERROR, "waitpid() failed for the TLS check");
            return SL_EXIT_FAIL;
        }
    }
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    sl_error("the TLS check (%s) was killed by signal %d", exe,
             WTERMSIG(status));
    return SL_EXIT_FAIL;
}

pid_t sl_spawn_supervisor(const char *exe, char *const argv[], const int *keep,
                          int nkeep, char *const env[])
{
    pid_t pid = fork_blocked();

    if (pid == 0) {
        exec_supervisor(exe, argv, keep, nkeep, env);
    }
    if (pid == -1) {
        sl_log_errno(SL_LOG_ERROR, "fork() failed for the new supervisor");
    }
    return pid;
}

/* fork() with every signal blocked across it: the parent gets its mask
 * back (and fork()'s errno), the child keeps it blocked, with default
 * dispositions, until just before its exec. */
static pid_t fork_blocked(void)
{
    sigset_t all, old;

    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
    pid_t pid = fork();
    if (pid == 0) {
        reset_signals();
        return 0;
    }
    int err = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    errno = err;
    return pid;
}

/* In the child: default dispositions everywhere; the mask stays blocked
 * until just before exec. */
static void reset_signals(void)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};

    for (int sig = 1; sig < NSIG; sig++) {
        sigaction(sig, &dfl, NULL); /* fails harmlessly for KILL, STOP */
    }
}

static void exec_worker(const char *exe, char *const argv[], const int *fds,
                        int nfds, int worker_id, int ctl_fd, int metrics_fd,
                        pid_t parent)
{
    sigset_t none;
    char buf[16];
    char list[FDLIST_MAX];
    size_t len = 0;

    if (prctl(PR_SET_PDEATHSIG, SIGTERM) == -1) {
        sl_log_errno(SL_LOG_ERROR, "prctl(PR_SET_PDEATHSIG) failed");
        _exit(127);
    }
    if (getppid() != parent) {
        _exit(1); /* the supervisor died before prctl() took effect */
    }

    list[0] = '\0';
    for (int i = 0; i < nfds; i++) {
        if (keep_across_exec(fds[i]) == -1) {
            _exit(127);
        }
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d",
                                i ? "," : "", fds[i]);
    }
    snprintf(buf, sizeof(buf), "%d", worker_id);
    if (setenv("SLUICE_WORKER_ID", buf, 1) == -1 ||
        setenv("SLUICE_LISTEN_FDS", list, 1) == -1 ||
        setenv("SLUICE_HANDOFF", HANDOFF_VERSION, 1) == -1) {
        sl_log_errno(SL_LOG_ERROR, "setenv() failed");
        _exit(127);
    }
    if (ctl_fd >= 0) {
        snprintf(buf, sizeof(buf), "%d", ctl_fd);
        if (keep_across_exec(ctl_fd) == -1 ||
            setenv("SLUICE_CTL_FD", buf, 1) == -1) {
            _exit(127);
        }
    } else {
        unsetenv("SLUICE_CTL_FD");
    }
    if (metrics_fd >= 0) {
        snprintf(buf, sizeof(buf), "%d", metrics_fd);
        if (keep_across_exec(metrics_fd) == -1 ||
            setenv("SLUICE_METRICS_FD", buf, 1) == -1) {
            _exit(127);
        }
    } else {
        unsetenv("SLUICE_METRICS_FD");
    }
    for (size_t i = 0; i < sizeof(supervisor_only_env) / sizeof(char *); i++) {
        unsetenv(supervisor_only_env[i]);
    }

    if (drop_identity() == -1) {
        _exit(SL_EXIT_APPLOAD); /* the next worker would fail the same way */
    }
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(exe, argv);
    sl_log_errno(SL_LOG_ERROR, "execv(\"%s\") failed", exe);
    _exit(127);
}

static void exec_supervisor(const char *exe, char *const argv[],
                            const int *keep, int nkeep, char *const env[])
{
    sigset_t none;
    char buf[16];

    for (int i = 0; i < nkeep; i++) {
        if (keep_across_exec(keep[i]) == -1) {
            _exit(127);
        }
    }
    for (int i = 0; env[i] != NULL; i++) {
        if (putenv(env[i]) != 0) {
            sl_log_errno(SL_LOG_ERROR, "putenv() failed");
            _exit(127);
        }
    }
    if (getenv("WATCHDOG_PID") != NULL) {
        snprintf(buf, sizeof(buf), "%ld", (long)getpid());
        if (setenv("WATCHDOG_PID", buf, 1) == -1) {
            sl_log_errno(SL_LOG_ERROR, "setenv(\"WATCHDOG_PID\") failed");
            _exit(127);
        }
    }
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(exe, argv);
    sl_log_errno(SL_LOG_ERROR, "execv(\"%s\") failed", exe);
    _exit(127);
}

static int keep_across_exec(int fd)
{
    if (fcntl(fd, F_SETFD, 0) == -1) {
        sl_log_errno(SL_LOG_ERROR, "fcntl(%d, F_SETFD) failed", fd);
        return -1;
    }
    return 0;
}

int sl_spawn_set_identity(const char *user, const char *group)
{
    uid_t uid = geteuid();
    gid_t gid = getegid();

    identity.name[0] = '\0';
    if (user != NULL) {
        if (resolve_user(user, &uid, &gid) == -1) {
            return -1;
        }
    }
    if (group != NULL && resolve_group(group, &gid) == -1) {
        return -1;
    }
    if (user != NULL && group == NULL && identity.name[0] == '\0') {
        sl_log_usage("argument -u/--user: uid %s has no entry in the user"
                     " database: give its group with --group",
                     user);
        return -1;
    }
    if (uid == geteuid() && gid == getegid()) {
        return 0; /* already there: nothing to drop */
    }
    if (geteuid() != 0) {
        sl_log_usage("argument %s: switching the workers to %s %s needs"
                     " root (sluice runs as uid %ld)",
                     user != NULL ? "-u/--user" : "-g/--group",
                     user != NULL ? "user" : "group",
                     user != NULL ? user : group, (long)geteuid());
        return -1;
    }
    identity.set = true;
    identity.have_user = user != NULL;
    identity.uid = uid;
    identity.gid = gid;
    return 0;
}

bool sl_spawn_identity(uid_t *uid, gid_t *gid)
{
    if (!identity.set) {
        return false;
    }
    *uid = identity.have_user ? identity.uid : geteuid();
    *gid = identity.gid;
    return true;
}

/* USER, a name or a uid, into *UID and its login group into *GID; its name
 * into identity.name when the database knows it. */
static int resolve_user(const char *user, uid_t *uid, gid_t *gid)
{
    unsigned long id;
    struct passwd *pw;

    errno = 0;
    if (is_id(user, &id)) {
        pw = getpwuid((uid_t)id);
        *uid = (uid_t)id;
    } else {
        pw = getpwnam(user);
        if (pw == NULL) {
            sl_log_usage("argument -u/--user: no such user: '%s'", user);
            return -1;
        }
        *uid = pw->pw_uid;
    }
    if (pw != NULL) {
        *gid = pw->pw_gid;
        snprintf(identity.name, sizeof(identity.name), "%s", pw->pw_name);
    }
    return 0;
}

static int resolve_group(const char *group, gid_t *gid)
{
    unsigned long id;

    if (is_id(group, &id)) {
        *gid = (gid_t)id;
        return 0;
    }
    struct group *gr = getgrnam(group);
    if (gr == NULL) {
        sl_log_usage("argument -g/--group: no such group: '%s'", group);
        return -1;
    }
    *gid = gr->gr_gid;
    return 0;
}

/* S is all decimal digits, fitting an id. */
static bool is_id(const char *s, unsigned long *id)
{
    char *end;

    if (s[0] < '0' || s[0] > '9') {
        return false;
    }
    errno = 0;
    *id = strtoul(s, &end, 10);
    return *end == '\0' && errno == 0 && *id < 0xFFFFFFFFul;
}

/* In the worker child: groups, gid, then uid (the other order would have
 * lost the right to change the first two). */
static int drop_identity(void)
{
    gid_t gid = identity.gid;

    if (!identity.set) {
        return 0;
    }
    if (identity.have_user && identity.name[0] != '\0') {
        if (initgroups(identity.name, gid) == -1) {
            sl_log_errno(SL_LOG_ERROR, "initgroups(\"%s\", %ld) failed",
                         identity.name, (long)gid);
            return -1;
        }
    } else if (setgroups(1, &gid) == -1) {
        sl_log_errno(SL_LOG_ERROR, "setgroups(%ld) failed", (long)gid);
        return -1;
    }
    if (setgid(gid) == -1) {
        sl_log_errno(SL_LOG_ERROR, "setgid(%ld) failed", (long)gid);
        return -1;
    }
    if (identity.have_user && setuid(identity.uid) == -1) {
        sl_log_errno(SL_LOG_ERROR, "setuid(%ld) failed", (long)identity.uid);
        return -1;
    }
    if (identity.have_user && identity.uid != 0 && setuid(0) == 0) {
        sl_error("setuid(%ld) left the worker able to become root again",
                 (long)identity.uid);
        return -1;
    }
    return 0;
}
