/* sd.c - systemd's service protocol, without libsystemd (see sd.h for why).
 *
 * The environment is the whole interface: systemd sets the variables before
 * exec, and they describe this process only when their PID variable names
 * it, because a child that inherits them must not take them for its own.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "supervisor/sd.h"

/* Parse S as a whole unsigned decimal that fits in *OUT. */
static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (s == NULL || *s < '0' || *s > '9')
        return false;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* Does the variable NAME, when set, name this process? Unset: ABSENT. */
static int names_me(const char *name, int absent)
{
    const char *s = getenv(name);
    uint64_t pid;

    if (s == NULL)
        return absent;
    if (!parse_u64(s, &pid))
        return -EINVAL;
    return pid == (uint64_t)getpid();
}

int sl_sd_notify(const char *msg)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n, len;
    ssize_t sent;
    int fd, err;

    if (path == NULL || path[0] == '\0')
        return 0;
    n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path))
        return -EINVAL;
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = '\0'; /* the abstract namespace */
    len = offsetof(struct sockaddr_un, sun_path) + n;
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    sent = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
                  (socklen_t)len);
    err = errno;
    close(fd);
    return sent < 0 ? -err : 1;
}

int sl_sd_watchdog(uint64_t *usec)
{
    const char *s = getenv("WATCHDOG_USEC");
    int mine;

    if (s == NULL)
        return 0;
    if (!parse_u64(s, usec) || *usec == 0)
        return -EINVAL;
    /* set for another process (we were started by a service): not ours */
    mine = names_me("WATCHDOG_PID", 1);
    return mine;
}

/* LISTEN_FDNAMES (S, maybe NULL) split at ':' into N owned strings;
 * "unknown" for the ones it does not name. NULL when out of memory. */
static char **split_names(const char *s, int n)
{
    char **names = calloc((size_t)n + 1, sizeof(*names));
    const char *p = s, *colon;
    int i;

    if (names == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        if (p != NULL) {
            colon = strchr(p, ':');
            names[i] = colon ? strndup(p, (size_t)(colon - p)) : strdup(p);
            p = colon ? colon + 1 : NULL;
        } else {
            names[i] = strdup("unknown");
        }
        if (names[i] == NULL)
            goto out_free;
    }
    return names;

out_free:
    while (i-- > 0)
        free(names[i]);
    free(names);
    return NULL;
}

int sl_sd_listen_fds(char ***names)
{
    const char *fds = getenv("LISTEN_FDS");
    const char *fdnames = getenv("LISTEN_FDNAMES");
    uint64_t n = 0;
    int mine, i, rc;

    *names = NULL;
    mine = names_me("LISTEN_PID", 0);
    if (mine <= 0 || fds == NULL) {
        rc = mine < 0 ? mine : 0;
        goto out_unset;
    }
    if (!parse_u64(fds, &n) || n > INT_MAX - SL_SD_LISTEN_FDS_START) {
        rc = -EINVAL;
        goto out_unset;
    }
    for (i = 0; i < (int)n; i++) {
        int fd = SL_SD_LISTEN_FDS_START + i;
        int flags = fcntl(fd, F_GETFD);
        if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) {
            rc = -errno;
            goto out_unset;
        }
    }
    if (n > 0) {
        *names = split_names(fdnames, (int)n);
        if (*names == NULL) {
            rc = -ENOMEM;
            goto out_unset;
        }
    }
    rc = (int)n;

out_unset:
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return rc;
}

bool sl_sd_is_listening_stream(int fd)
{
    struct stat st;
    int type = 0, listening = 0;
    socklen_t len = sizeof(type);

    if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
        return false;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
        type != SOCK_STREAM)
        return false;
    len = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0)
        return false;
    return listening != 0;
}
