/* proctitle.c - writes the process title over argv (see proctitle.h).
 *
 * The area is argv[0]'s string and every argv and environment string that
 * follows it without a gap; the kernel laid them out that way at exec. Once
 * the environment has moved to the heap, the whole area is free: the title
 * goes at its start and the rest is zeroed, so /proc/PID/cmdline reads as
 * the title alone (nginx and PostgreSQL do the same).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "common/log.h"
#include "common/proctitle.h"

extern char **environ;

static char **args;     /* owned: the copy of argv handed out */
static char **env;      /* owned: the copy of the environment */
static char *area;      /* borrowed: the original argv[0] */
static size_t area_len; /* bytes from area to the end of the last string */

static char **copy_strings(char **src, int n);
static char *contiguous_end(char *end, char **strs, int n);

char **sl_proctitle_init(int argc, char **argv)
{
    int nenv = 0;

    args = copy_strings(argv, argc);
    if (args == NULL || argc == 0) {
        return args;
    }
    while (environ != NULL && environ[nenv] != NULL) {
        nenv++;
    }
    char *end = contiguous_end(argv[0], argv, argc);
    char *env_end = contiguous_end(end, environ, nenv);
    if (env_end != end) {
        env = copy_strings(environ, nenv);
        if (env == NULL) {
            return args; /* keep the old environment and a shorter area */
        }
        environ = env;
        end = env_end;
    }
    area = argv[0];
    area_len = (size_t)(end - area);
    return args;
}

void sl_proctitle_set(const char *name, const char *fmt, ...)
{
    char title[256];
    char comm[16];
    va_list ap;

    snprintf(comm, sizeof(comm), "%s", name);
    if (prctl(PR_SET_NAME, comm) == -1) {
        sl_log_errno(SL_LOG_DEBUG, "prctl(PR_SET_NAME) failed");
    }
    if (area == NULL || area_len < 2) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(title, sizeof(title), fmt, ap);
    va_end(ap);
    size_t n = strlen(title);
    if (n > area_len - 1) {
        n = area_len - 1;
    }
    memcpy(area, title, n);
    memset(area + n, 0, area_len - n);
}

/* A NULL-terminated copy of SRC[0..N), strings and all; NULL if out of
 * memory. */
static char **copy_strings(char **src, int n)
{
    char **dst = calloc((size_t)n + 1, sizeof(*dst));

    if (dst == NULL) {
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        dst[i] = strdup(src[i]);
        if (dst[i] == NULL) {
            return NULL; /* the process is about to fail anyway */
        }
    }
    return dst;
}

/* Where the run of strings STRS[0..N) that starts exactly at END, each
 * right after the one before, stops. END itself when STRS[0] is elsewhere. */
static char *contiguous_end(char *end, char **strs, int n)
{
    for (int i = 0; i < n && strs[i] == end; i++) {
        end += strlen(strs[i]) + 1;
    }
    return end;
}
