/* test_proctitle.c - check suite for common/proctitle.c, process
 * titles.
 *
 * The title is written over this program's own argv and environment
 * strings, so each case runs in a child of the test (its own copy of that
 * memory) and reports by its exit status which check failed, if any.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <sys/prctl.h>

#include "common/proctitle.h"
#include "tests/unit/harness_base.h"

static int main_argc;
static char **main_argv;

static void assert_exit(int status, int code)
{
    ck_assert_msg(WIFEXITED(status), "status %#x", status);
    ck_assert_int_eq(WEXITSTATUS(status), code);
}

/* Run CHECK in a child; it returns 0 when all is well, else the number of
 * the check that failed. */
static void in_child(int (*check)(void))
{
    int status;
    pid_t pid = fork();

    ck_assert_int_ne(pid, -1);
    if (pid == 0) {
        _exit(check());
    }
    ck_assert_msg(h_wait_exit(pid, &status, 10), "child still runs");
    assert_exit(status, 0);
}

static const char *read_proc(const char *name, char *buf, size_t size)
{
    char path[64];
    ssize_t n = -1;

    snprintf(path, sizeof(path), "/proc/self/%s", name);
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        n = read(fd, buf, size - 1);
        close(fd);
    }
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

extern char **environ;

/* ps shows the title alone, and the environment (as the program started
 * with it, and as set since) and the arguments survive in their copies. */
static int title_check(void)
{
    char want[] = "sluice: worker 3 [m:a]";
    char got[256] = "";
    char *arg0 = strdup(main_argv[0]);
    const char *kept = getenv("SL_TITLE_KEPT");
    char *set_since = kept ? strdup(kept) : NULL;
    char *first_env = environ[0] ? strdup(environ[0]) : NULL;
    char **copy = sl_proctitle_init(main_argc, main_argv);

    sl_proctitle_set("sluice", "%s: worker %d [%s]", "sluice", 3, "m:a");
    int fd = open("/proc/self/cmdline", O_RDONLY);
    ssize_t n = read(fd, got, sizeof(got) - 1);
    close(fd);
    if (copy == NULL || strcmp(copy[0], arg0) != 0)
        return 1;
    if (n <= (ssize_t)strlen(want) || strcmp(got, want) != 0)
        return 2; /* the title, then the rest of the area zeroed */
    kept = getenv("SL_TITLE_KEPT");
    if (set_since == NULL || kept == NULL || strcmp(kept, set_since) != 0)
        return 3;
    if (first_env == NULL || strcmp(environ[0], first_env) != 0)
        return 4;
    char *eq = strchr(first_env, '=');
    *eq = '\0';
    if (getenv(first_env) == NULL || strcmp(getenv(first_env), eq + 1) != 0)
        return 5;
    if (setenv("SL_TITLE_TEST", "1", 1) != 0)
        return 6;
    return 0;
}

START_TEST(test_proctitle)
{
    setenv("SL_TITLE_KEPT", "kept", 1); /* set before the child's init */
    in_child(title_check);
}
END_TEST

/* The short name (comm) is set, cut to 15 bytes, even without init; the
 * command line is then left as it was. */
static int name_check(void)
{
    char comm[64], cmdline[256];

    read_proc("cmdline", cmdline, sizeof(cmdline));
    char *before = strdup(cmdline);
    sl_proctitle_set("sluice-with-a-long-name", "%s", "never shown");
    if (strcmp(read_proc("comm", comm, sizeof(comm)), "sluice-with-a-l\n") != 0)
        return 1;
    if (strcmp(read_proc("cmdline", cmdline, sizeof(cmdline)), before) != 0)
        return 2;
    return 0;
}

START_TEST(test_name_without_init)
{
    in_child(name_check);
}
END_TEST

/* A title longer than the area is cut to fit, NUL-terminated, and
 * nothing past the area is written: an argv of our own, laid end to end
 * as the kernel lays one out, with guard bytes after it. */
static int long_title_check(void)
{
    static char mem[] = "ab\0cd\0GUARD";
    char *argv[] = {mem, mem + 3, NULL};
    char **copy = sl_proctitle_init(2, argv);

    if (copy == NULL || strcmp(copy[0], "ab") || strcmp(copy[1], "cd"))
        return 1;
    sl_proctitle_set("sluice", "%s", "sluice: a title far longer than argv");
    if (memcmp(mem, "sluic\0", 6) != 0)
        return 2; /* 6 bytes of area: 5 of title and the NUL */
    if (strcmp(mem + 6, "GUARD") != 0)
        return 3;
    if (strcmp(copy[0], "ab") != 0)
        return 4;
    return 0;
}

START_TEST(test_long_title_cut)
{
    in_child(long_title_check);
}
END_TEST

static Suite *proctitle_suite(void)
{
    Suite *s = suite_create("proctitle");
    TCase *tc = tcase_create("proctitle");

    tcase_add_test(tc, test_proctitle);
    tcase_add_test(tc, test_name_without_init);
    tcase_add_test(tc, test_long_title_cut);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    main_argc = argc;
    main_argv = argv;

    SRunner *sr = srunner_create(proctitle_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
