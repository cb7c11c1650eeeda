/* pidfile.c - writes and removes --pid FILE (see pidfile.h).
 *
 * The temporary file is created with mkstemp() beside the target, because
 * rename() is only atomic within one file system.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/pidfile.h"

#define PATH_MAX_LEN 4096

static int write_all(int fd, const char *buf, size_t n);

int sl_pidfile_write(const char *path)
{
    char tmp[PATH_MAX_LEN];
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());

    if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp)) {
        sl_error("pid file name too long: %s", path);
        return -1;
    }
    int fd = mkstemp(tmp);
    if (fd == -1) {
        sl_log_errno(SL_LOG_ERROR, "mkstemp(\"%s\") failed for the pid file",
                     tmp);
        return -1;
    }
    if (fchmod(fd, 0644) == -1) {
        sl_log_errno(SL_LOG_ERROR, "fchmod(\"%s\") failed", tmp);
        goto out_unlink;
    }
    if (write_all(fd, buf, (size_t)n) == -1) {
        sl_log_errno(SL_LOG_ERROR, "write() failed on \"%s\"", tmp);
        goto out_unlink;
    }
    if (close(fd) == -1) {
        fd = -1;
        sl_log_errno(SL_LOG_ERROR, "close() failed on \"%s\"", tmp);
        goto out_unlink;
    }
    fd = -1;
    if (rename(tmp, path) == -1) {
        sl_log_errno(SL_LOG_ERROR, "rename(\"%s\", \"%s\") failed", tmp, path);
        goto out_unlink;
    }
    return 0;

out_unlink:
    if (fd != -1) {
        close(fd);
    }
    unlink(tmp);
    return -1;
}

void sl_pidfile_remove(const char *path)
{
    char buf[32] = "";
    FILE *f = fopen(path, "re");

    if (f == NULL) {
        if (errno != ENOENT) {
            sl_log_errno(SL_LOG_WARNING, "fopen(\"%s\") failed", path);
        }
        return;
    }
    char *line = fgets(buf, sizeof(buf), f);
    fclose(f);
    if (line == NULL || atol(buf) != (long)getpid()) {
        sl_debug("pid file %s names another process: left in place", path);
        return;
    }
    if (unlink(path) == -1 && errno != ENOENT) {
        sl_log_errno(SL_LOG_WARNING, "unlink(\"%s\") failed", path);
    }
}

static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w == -1 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}
