/* fuzz_config.c - a libFuzzer target for the settings' parsers: the
 * configuration file (conffile.c) as -c FILE reads it, SLUICE_CMD_ARGS
 * split as a shell would, their merge with the command line (settings.c),
 * and the option parser itself (options.c) over the result or over an
 * argv of the fuzzer's own.
 *
 * The input's first byte chooses. 0: the rest is a configuration file's
 * text, read through -c from a memfd. 1: the rest is SLUICE_CMD_ARGS, then
 * after its first NUL byte the file's text. 2: the rest is an argv, its
 * words cut at NUL bytes (no -c is honoured there: the fuzzer could name a
 * FIFO). Every parser must refuse with -1 (one line, here silenced) rather
 * than exit, crash or leak, and a command line found good must survive
 * --print-config: printed, read back as a file and printed again, the text
 * is the same (a value holding a line break cannot be written in the
 * file's syntax, and is left out of that check).
 *
 * The refusals are silent; FUZZ_LOG=1 in the environment shows them when
 * reproducing a finding. Built by a --enable-fuzzing configuration
 * (tests/fuzz/run.sh).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/conffile.h"
#include "common/log.h"
#include "common/options.h"
#include "common/settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_config: %s:%d: %s\n", __FILE__, __LINE__,    \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

#define MAX_WORDS 64

static int file_fd = -1;   /* the memfd -c reads */
static char file_path[64]; /* its /proc/self/fd/ name */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* --help and --version print to stdout: not to the fuzzer's log */
    CHECK(freopen("/dev/null", "w", stdout) != NULL);
    /* usage errors go to the error log at ERROR level, which is off */
    sl_log_usage_to_log("fuzz");
    sl_log_set_level(getenv("FUZZ_LOG") ? SL_LOG_DEBUG : SL_LOG_CRITICAL);
    unsetenv("SLUICE_CMD_ARGS");
    unsetenv("FORWARDED_ALLOW_IPS");
    unsetenv("SLUICE_INLINE");
    file_fd = memfd_create("fuzz-config", MFD_CLOEXEC);
    CHECK(file_fd >= 0);
    snprintf(file_path, sizeof(file_path), "/proc/self/fd/%d", file_fd);
    return 0;
}

/* --pythonpath's pieces are copies the options keep for good: not here. */
static void options_free(sl_options_t *o)
{
    for (int i = 0; i < o->npythonpath; i++)
        free((char *)o->pythonpath[i]);
    o->npythonpath = 0;
}

/* --print-config's text for *O parsed from ARGV[0..ARGC); owned. */
static char *print(const sl_options_t *o, int argc, char **argv)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    CHECK(f != NULL);
    sl_options_print(o, argc, argv, f);
    CHECK(fclose(f) == 0);
    return text;
}

static bool has_line_break(char *const *words, int n)
{
    for (int i = 0; i < n; i++)
        if (strpbrk(words[i], "\r\n") != NULL)
            return true;
    return false;
}

/* *O, parsed from ARGV[0..ARGC), printed, read back as a file and printed
 * again: the same text. */
static void round_trip(const sl_options_t *o, int argc, char **argv)
{
    char *first = print(o, argc, argv), *again, err[512];
    sl_conffile_t words;
    sl_options_t back;
    int rc;

    sl_conffile_init(&words);
    CHECK(sl_conffile_add(&words, "sluice", 0) == 0);
    rc = sl_conffile_parse(&words, first, strlen(first), "printed", err,
                           sizeof(err));
    if (rc != 0)
        fprintf(stderr, "fuzz_config: --print-config's text: %s\n%s", err,
                first);
    CHECK(rc == 0);
    CHECK(sl_conffile_add(&words, "--", 0) == 0);
    CHECK(sl_conffile_add(&words, o->app, 0) == 0);
    rc = sl_options_parse(&back, words.n, words.words);
    if (rc != 0)
        fprintf(stderr, "fuzz_config: --print-config's text refused:\n%s",
                first);
    CHECK(rc == 0);
    again = print(&back, words.n, words.words);
    if (strcmp(first, again) != 0)
        fprintf(stderr, "fuzz_config: printed:\n%s\nread back:\n%s", first,
                again);
    CHECK(strcmp(first, again) == 0);
    options_free(&back);
    free(again);
    free(first);
    sl_conffile_free(&words);
}

/* The effective command line of -c FILE (and SLUICE_CMD_ARGS when set),
 * then the options parsed from it. */
static void fuzz_settings(const uint8_t *text, size_t n)
{
    char *args[] = {"sluice", "-c", file_path, "app:app", NULL};
    sl_conffile_t eff;
    sl_options_t o;
    int rc;

    CHECK(ftruncate(file_fd, 0) == 0);
    CHECK(pwrite(file_fd, text, n, 0) == (ssize_t)n);
    if (sl_settings_build(args, NULL, &eff) != 0)
        return; /* refused, and *EFF freed */
    CHECK(eff.n >= 2 && eff.words[eff.n] == NULL);
    for (int i = 1; i < eff.n; i++)
        CHECK(eff.words[i] != NULL);
    rc = sl_options_parse(&o, eff.n, eff.words);
    CHECK(rc >= -1 && rc <= 1);
    if (rc == 0 && !has_line_break(eff.words, eff.n))
        round_trip(&o, eff.n, eff.words);
    options_free(&o);
    sl_conffile_free(&eff);
}

/* The file's parser alone: whatever it accepts is "--name[=value]" words
 * with their lines. */
static void fuzz_file(const uint8_t *text, size_t n)
{
    sl_conffile_t c;
    char err[512];
    int lines = 1;

    for (size_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    sl_conffile_init(&c);
    err[0] = '\0';
    if (sl_conffile_parse(&c, (const char *)text, n, "f", err, sizeof(err)) ==
        0) {
        for (int i = 0; i < c.n; i++) {
            CHECK(strncmp(c.words[i], "--", 2) == 0);
            CHECK(c.lines[i] >= 1 && c.lines[i] <= lines);
            CHECK(i == 0 || c.lines[i] >= c.lines[i - 1]);
        }
    } else {
        CHECK(strncmp(err, "f:", 2) == 0);
        CHECK(memchr(err, '\0', sizeof(err)) != NULL);
    }
    sl_conffile_free(&c);
    fuzz_settings(text, n);
}

/* SLUICE_CMD_ARGS (up to the first NUL), then the file. */
static void fuzz_env(const uint8_t *d, size_t n)
{
    const uint8_t *nul = memchr(d, '\0', n);
    size_t len = nul ? (size_t)(nul - d) : n;
    char *env = strndup((const char *)d, len);

    CHECK(env != NULL);
    CHECK(setenv("SLUICE_CMD_ARGS", env, 1) == 0);
    free(env);
    if (nul != NULL)
        fuzz_settings(nul + 1, n - len - 1);
    else
        fuzz_settings((const uint8_t *)"", 0);
    unsetenv("SLUICE_CMD_ARGS");
}

static int visit_count(void *ctx, const char *name, const char *value)
{
    (void)value;
    CHECK(name == NULL || sl_options_lookup(name, NULL) != SL_OPTARG_UNKNOWN);
    (*(int *)ctx)++;
    return 0;
}

/* An argv: the words of D[0..N) cut at NUL bytes. */
static void fuzz_argv(const uint8_t *d, size_t n)
{
    char *copy = malloc(n + 1), *argv[MAX_WORDS + 2], *twin[MAX_WORDS + 2];
    int argc = 0, rc, visits = 0;
    size_t pos = 0;
    sl_options_t o;

    CHECK(copy != NULL);
    memcpy(copy, d, n);
    copy[n] = '\0';
    argv[argc++] = "sluice";
    while (pos <= n && argc < MAX_WORDS + 1) {
        argv[argc++] = copy + pos;
        pos += strlen(copy + pos) + 1;
    }
    argv[argc] = NULL;
    memcpy(twin, argv, sizeof(argv));
    rc = sl_options_parse(&o, argc, argv);
    CHECK(rc >= -1 && rc <= 1);
    if (rc == 0 && !has_line_break(argv, argc))
        round_trip(&o, argc, argv);
    options_free(&o);
    /* the walk the merge uses is no stricter than the parser */
    if (sl_options_scan(argc, twin, visit_count, &visits) != 0)
        CHECK(rc == -1 || rc == 1);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 3) {
    case 0:
        fuzz_file(data + 1, size - 1);
        break;
    case 1:
        fuzz_env(data + 1, size - 1);
        break;
    default:
        fuzz_argv(data + 1, size - 1);
        break;
    }
    return 0;
}
