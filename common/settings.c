/* settings.c - merges the configuration file, SLUICE_CMD_ARGS and argv
 * (see settings.h).
 *
 * Every source is first reduced to the same thing, a list of (name, value)
 * entries in the order given: argv and SLUICE_CMD_ARGS by the option
 * parser's own getopt walk, the file by common/conffile.c. Merging is then
 * one pass over the entries that drops those a later one overrides, and
 * the option parser sees the result as if it had been typed. A value is
 * checked where it came from, so a bad one in the file names its line.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/conffile.h"
#include "common/log.h"
#include "common/options.h"
#include "common/settings.h"

#define ENV_NAME "SLUICE_CMD_ARGS"
#define SRC_FILE 0
#define SRC_ENV  1
#define SRC_ARGV 2

typedef struct {
    const char *name;  /* the option's long name, static */
    const char *value; /* borrowed from a source's words; NULL for a flag */
    int src;           /* SRC_* */
} entry_t;

typedef struct {
    entry_t *entries; /* owned */
    int n, cap;
    const char **apps; /* owned: positional arguments of the source */
    int napps[3];
    int nall, capall;
    const char *config; /* the last -c seen */
    int src;            /* the source being scanned */
} merge_t;

static int visit(void *ctx, const char *name, const char *value);
static int scan_words(merge_t *m, sl_conffile_t *words, int src);
static int read_file(const char *path, sl_conffile_t *words);
static int add_file_entries(merge_t *m, sl_conffile_t *words, const char *path);
static int emit(merge_t *m, char *const *args, char *const *extra,
                sl_conffile_t *eff);
static bool overridden(const merge_t *m, int i);
static int copy_args(char *const *args, sl_conffile_t *eff);

int sl_settings_build(char *const *args, char *const *extra, sl_conffile_t *eff)
{
    merge_t m = {0};
    sl_conffile_t argw, envw, filew;
    char err[512];
    int rc = -1;

    sl_conffile_init(eff);
    sl_conffile_init(&argw);
    sl_conffile_init(&envw);
    sl_conffile_init(&filew);
    if (copy_args(args, &argw) == -1) {
        goto out;
    }
    const char *env = getenv(ENV_NAME);
    bool use_env = env != NULL && env[strspn(env, " \t\n\r")] != '\0';
    if (use_env) {
        if (sl_conffile_add(&envw, args[0], 0) == -1 ||
            sl_conffile_split(&envw, env, err, sizeof(err)) == -1) {
            sl_log_usage("%s: %s", ENV_NAME, err);
            goto out;
        }
        sl_log_usage_context(ENV_NAME);
        rc = scan_words(&m, &envw, SRC_ENV);
        sl_log_usage_context(NULL);
        if (rc == -1) {
            goto out;
        }
        rc = -1;
    }
    if (scan_words(&m, &argw, SRC_ARGV) == -1) {
        goto out;
    }
    if (m.config == NULL && !use_env) {
        rc = copy_args(args, eff);
        goto out;
    }
    if (m.config != NULL) {
        if (read_file(m.config, &filew) == -1 ||
            add_file_entries(&m, &filew, m.config) == -1) {
            goto out;
        }
    }
    rc = emit(&m, args, extra, eff);
out:
    sl_log_usage_context(NULL);
    if (rc == -1) {
        sl_conffile_free(eff);
    }
    free(m.entries);
    free(m.apps);
    sl_conffile_free(&argw);
    sl_conffile_free(&envw);
    sl_conffile_free(&filew);
    return rc;
}

const char *sl_settings_config_path(char *const *args)
{
    static char path[4096];
    merge_t m = {0};
    sl_conffile_t argw, envw;
    const char *env = getenv(ENV_NAME);
    const char *found = NULL;
    char err[512];
    int rc = 0;

    sl_conffile_init(&argw);
    sl_conffile_init(&envw);
    if (env != NULL) { /* -c may come from there; argv's wins */
        rc = sl_conffile_add(&envw, args[0], 0);
        rc = rc == 0 ? sl_conffile_split(&envw, env, err, sizeof(err)) : -1;
        rc = rc == 0 ? scan_words(&m, &envw, SRC_ENV) : -1;
    }
    if (rc == 0 && copy_args(args, &argw) == 0 &&
        scan_words(&m, &argw, SRC_ARGV) == 0 && m.config != NULL) {
        snprintf(path, sizeof(path), "%s", m.config);
        found = path;
    }
    free(m.entries);
    free(m.apps);
    sl_conffile_free(&argw);
    sl_conffile_free(&envw);
    return found;
}

/* The source's words (a twin of them: getopt reorders) as entries. */
static int scan_words(merge_t *m, sl_conffile_t *words, int src)
{
    char **twin = calloc((size_t)words->n + 1, sizeof(*twin));

    if (twin == NULL) {
        sl_log_usage("out of memory");
        return -1;
    }
    memcpy(twin, words->words, (size_t)words->n * sizeof(*twin));
    m->src = src;
    int rc = sl_options_scan(words->n, twin, visit, m);
    free(twin);
    return rc;
}

static int visit(void *ctx, const char *name, const char *value)
{
    merge_t *m = ctx;

    if (name == NULL) {
        if (m->nall == m->capall) {
            m->capall = m->capall ? m->capall * 2 : 4;
            const char **a = realloc(m->apps, (size_t)m->capall * sizeof(*a));
            if (a == NULL) {
                sl_log_usage("out of memory");
                return -1;
            }
            m->apps = a;
        }
        /* sources are scanned in order, so each one's apps stay together */
        m->apps[m->nall++] = value;
        m->napps[m->src]++;
        return 0;
    }
    if (m->src == SRC_ENV && value != NULL &&
        sl_options_check(name, value) == -1) {
        return -1; /* named as SLUICE_CMD_ARGS's, not the command line's */
    }
    if (strcmp(name, "config") == 0) {
        m->config = value;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 32;
        entry_t *e = realloc(m->entries, (size_t)m->cap * sizeof(*e));
        if (e == NULL) {
            sl_log_usage("out of memory");
            return -1;
        }
        m->entries = e;
    }
    m->entries[m->n++] = (entry_t){name, value, m->src};
    return 0;
}

/* The whole of PATH, parsed into WORDS. */
static int read_file(const char *path, sl_conffile_t *words)
{
    char err[512];
    FILE *f = fopen(path, "re");
    char *text = NULL;
    size_t len = 0, cap = 0;
    int rc = -1;

    if (f == NULL) {
        sl_log_usage("cannot read the configuration file %s: %s", path,
                     strerror(errno));
        return -1;
    }
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            char *t = cap <= (1u << 24) ? realloc(text, cap) : NULL;
            if (t == NULL) {
                sl_log_usage("the configuration file %s is too large", path);
                goto out;
            }
            text = t;
        }
        size_t n = fread(text + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            break;
        }
    }
    if (ferror(f)) {
        sl_log_usage("cannot read the configuration file %s: %s", path,
                     strerror(errno));
        goto out;
    }
    if (sl_conffile_parse(words, text, len, path, err, sizeof(err)) == -1) {
        sl_log_usage("%s", err);
        goto out;
    }
    rc = 0;
out:
    free(text);
    fclose(f);
    return rc;
}

/* The file's entries go first, each value checked with its line named. */
static int add_file_entries(merge_t *m, sl_conffile_t *words, const char *path)
{
    char where[4200];
    int nold = m->n;

    for (int i = 0; i < words->n; i++) {
        char *w = words->words[i] + 2; /* "--name=value" or "--name" */
        char *eq = strchr(w, '=');
        const char *canon = NULL;
        if (eq != NULL) {
            *eq = '\0';
        }
        sl_options_lookup(w, &canon);
        snprintf(where, sizeof(where), "%s:%d", path, words->lines[i]);
        sl_log_usage_context(where);
        int rc = eq ? sl_options_check(canon, eq + 1) : 0;
        sl_log_usage_context(NULL);
        if (rc == -1) {
            return -1;
        }
        m->src = SRC_FILE;
        if (visit(m, canon, eq ? eq + 1 : NULL) == -1) {
            return -1;
        }
    }
    /* move them in front of the others */
    int nfile = m->n - nold;
    entry_t *tmp = malloc((size_t)(nfile ? nfile : 1) * sizeof(*tmp));
    if (tmp == NULL) {
        sl_log_usage("out of memory");
        return -1;
    }
    memcpy(tmp, m->entries + nold, (size_t)nfile * sizeof(*tmp));
    memmove(m->entries + nfile, m->entries, (size_t)nold * sizeof(*tmp));
    memcpy(m->entries, tmp, (size_t)nfile * sizeof(*tmp));
    free(tmp);
    return 0;
}

/* A later entry of the same name replaces entry I: any later one for a
 * single value, one from a later source for a list. */
static bool overridden(const merge_t *m, int i)
{
    const entry_t *e = &m->entries[i];
    sl_optarg_t kind = sl_options_lookup(e->name, NULL);
    bool list = kind == SL_OPTARG_LIST || kind == SL_OPTARG_LINES;

    for (int j = i + 1; j < m->n; j++) {
        const entry_t *l = &m->entries[j];
        if (strcmp(l->name, e->name) == 0 && (!list || l->src > e->src)) {
            return true;
        }
    }
    return false;
}

static int emit(merge_t *m, char *const *args, char *const *extra,
                sl_conffile_t *eff)
{
    char *word = NULL;
    size_t cap = 0;

    if (sl_conffile_add(eff, args[0], 0) == -1) {
        goto nomem;
    }
    for (int i = 0; i < m->n; i++) {
        const entry_t *e = &m->entries[i];
        if (strcmp(e->name, "config") == 0 || overridden(m, i)) {
            continue;
        }
        size_t len = strlen(e->name) + (e->value ? strlen(e->value) : 0) + 4;
        if (len > cap) {
            char *w = realloc(word, len);
            if (w == NULL) {
                goto nomem;
            }
            word = w;
            cap = len;
        }
        snprintf(word, len, "--%s%s%s", e->name, e->value ? "=" : "",
                 e->value ? e->value : "");
        if (sl_conffile_add(eff, word, 0) == -1) {
            goto nomem;
        }
    }
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        if (sl_conffile_add(eff, extra[i], 0) == -1) {
            goto nomem;
        }
    }
    /* the application: the command line's, else SLUICE_CMD_ARGS's */
    int first = m->napps[SRC_ARGV] ? m->napps[SRC_ENV] : 0;
    int count = m->napps[SRC_ARGV] ? m->napps[SRC_ARGV] : m->napps[SRC_ENV];
    if (count > 0 && sl_conffile_add(eff, "--", 0) == -1) {
        goto nomem;
    }
    for (int i = first; i < first + count; i++) {
        if (sl_conffile_add(eff, m->apps[i], 0) == -1) {
            goto nomem;
        }
    }
    free(word);
    return 0;
nomem:
    free(word);
    sl_log_usage("out of memory");
    return -1;
}

static int copy_args(char *const *args, sl_conffile_t *eff)
{
    for (int i = 0; args[i] != NULL; i++) {
        if (sl_conffile_add(eff, args[i], 0) == -1) {
            sl_log_usage("out of memory");
            return -1;
        }
    }
    return 0;
}
