/* tlsmod.c - loading sluice-tls.so (tlsmod.h).
 *
 * The module sits beside sluice-worker, in the build tree as where it is
 * installed ($(pkglibexecdir)): the directory of /proc/self/exe, or, when
 * that is a tool running the worker (valgrind), of SLUICE_WORKER_BIN, the
 * worker the supervisor was told to run.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/loop/tlsmod.h"

/* The module's path beside executable EXE into BUF[SIZE]; false when EXE
 * names no directory or no module is there. */
static bool beside(const char *exe, char *buf, size_t size)
{
    const char *slash = strrchr(exe, '/');

    if (slash == NULL)
        return false;
    snprintf(buf, size, "%.*s/%s", (int)(slash - exe), exe, SL_TLS_MODULE_FILE);
    return access(buf, F_OK) == 0;
}

/* Where the module is, into BUF[SIZE] (the first place looked at when it
 * is nowhere: the error names it). */
static void find(char *buf, size_t size)
{
    const char *bin = getenv("SLUICE_WORKER_BIN");
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    self[n > 0 ? n : 0] = '\0';
    buf[0] = '\0';
    if (beside(self, buf, size) || (bin != NULL && beside(bin, buf, size)))
        return;
    (void)beside(self, buf, size); /* nowhere: the error names this place */
}

const sl_tls_module_t *sl_tls_module_load(void)
{
    static const sl_tls_module_t *module;
    char path[PATH_MAX + sizeof(SL_TLS_MODULE_FILE) + 1];
    void *h;

    if (module != NULL)
        return module;
    find(path, sizeof(path));
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        sl_error("TLS: cannot load %s: %s", path, dlerror());
        return NULL;
    }
    module = dlsym(h, SL_TLS_MODULE_SYMBOL);
    if (module == NULL)
        sl_error("TLS: %s has no %s: %s", path, SL_TLS_MODULE_SYMBOL,
                 dlerror());
    return module;
}
