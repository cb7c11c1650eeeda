/* test_log.c - check suite for common/log.c.
 *
 * To prove "one write(2) per line", stderr is replaced by one end of a
 * SOCK_SEQPACKET socketpair: every write() becomes one packet, so one recv()
 * returning exactly one whole line means it was written in one call.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"

#define LINE_RE                                                                \
    "^\\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} \\+0000\\] "    \
    "\\[[0-9]+\\] \\[(DEBUG|INFO|WARNING|ERROR|CRITICAL)\\] "

static char dir[] = "/tmp/sl-test-log-XXXXXX";
static int packet_fd = -1; /* reading end while stderr is a socketpair */

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[64];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static char *path_in_dir(const char *name)
{
    static char buf[2][128];
    static int which;

    which ^= 1;
    snprintf(buf[which], sizeof(buf[which]), "%s/%s", dir, name);
    return buf[which];
}

/* The whole file at PATH, NUL-terminated, malloc'd. */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char *buf = malloc(1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void assert_line(const char *line, const char *level, const char *msg)
{
    regex_t re;
    char expect[256];

    ck_assert_int_eq(regcomp(&re, LINE_RE, REG_EXTENDED), 0);
    ck_assert_msg(regexec(&re, line, 0, NULL, 0) == 0, "bad line: '%s'", line);
    regfree(&re);
    snprintf(expect, sizeof(expect), "] [%ld] [%s] %s\n", (long)getpid(), level,
             msg);
    ck_assert_msg(strstr(line, expect) != NULL, "'%s' not in '%s'", expect,
                  line);
    ck_assert_int_eq(strchr(line, '\n') - line, strlen(line) - 1);
}

/* Make stderr a SOCK_SEQPACKET socket: each write() is one packet. */
static void stderr_to_packets(void)
{
    int sv[2];

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    ck_assert_int_eq(dup2(sv[0], STDERR_FILENO), STDERR_FILENO);
    close(sv[0]);
    packet_fd = sv[1];
}

/* One packet, i.e. what one write() to stderr wrote; "" if none. */
static char *next_packet(void)
{
    static char buf[65536];

    ssize_t n = recv(packet_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

START_TEST(test_level_parse)
{
    ck_assert_int_eq(sl_log_level_parse("debug"), SL_LOG_DEBUG);
    ck_assert_int_eq(sl_log_level_parse("info"), SL_LOG_INFO);
    ck_assert_int_eq(sl_log_level_parse("warning"), SL_LOG_WARNING);
    ck_assert_int_eq(sl_log_level_parse("error"), SL_LOG_ERROR);
    ck_assert_int_eq(sl_log_level_parse("critical"), SL_LOG_CRITICAL);
    ck_assert_int_eq(sl_log_level_parse("CRITICAL"), SL_LOG_CRITICAL);
    ck_assert_int_eq(sl_log_level_parse("Info"), SL_LOG_INFO);
    ck_assert_int_eq(sl_log_level_parse("warn"), -1);
    ck_assert_int_eq(sl_log_level_parse(""), -1);
    ck_assert_int_eq(sl_log_level_parse("debugx"), -1);
}
END_TEST

START_TEST(test_line_format_one_write)
{
    stderr_to_packets();
    sl_info("hello %d", 42);
    assert_line(next_packet(), "INFO", "hello 42");
    ck_assert_str_eq(next_packet(), "");

    /* a trailing newline in the message is not doubled */
    sl_error("with newline\n");
    assert_line(next_packet(), "ERROR", "with newline");
    sl_log(SL_LOG_CRITICAL, "%s", "crit");
    assert_line(next_packet(), "CRITICAL", "crit");
}
END_TEST

START_TEST(test_long_line_one_write)
{
    char *msg = malloc(10001);

    memset(msg, 'x', 10000);
    msg[10000] = '\0';
    stderr_to_packets();
    sl_warn("%s", msg);
    char *p = next_packet();
    assert_line(p, "WARNING", msg);
    ck_assert_str_eq(next_packet(), "");
    free(msg);
}
END_TEST

START_TEST(test_level_filter)
{
    stderr_to_packets();
    sl_debug("hidden by default");
    ck_assert_str_eq(next_packet(), "");
    sl_log_set_level(SL_LOG_WARNING);
    sl_info("hidden");
    ck_assert_str_eq(next_packet(), "");
    sl_warn("shown");
    assert_line(next_packet(), "WARNING", "shown");
    sl_log_set_level(SL_LOG_DEBUG);
    sl_debug("now shown");
    assert_line(next_packet(), "DEBUG", "now shown");
}
END_TEST

START_TEST(test_errno)
{
    stderr_to_packets();
    errno = ENOENT;
    sl_log_errno(SL_LOG_ERROR, "open(\"%s\") failed", "/x");
    ck_assert_int_eq(errno, ENOENT);
    assert_line(next_packet(), "ERROR",
                "open(\"/x\") failed: No such file or directory");
    errno = EPIPE;
    sl_info("errno survives");
    ck_assert_int_eq(errno, EPIPE);
}
END_TEST

START_TEST(test_usage)
{
    stderr_to_packets();
    sl_log_usage("argument %s: bad", "-w");
    ck_assert_str_eq(next_packet(), "sluice: error: argument -w: bad\n");
    ck_assert_str_eq(next_packet(), "");
}
END_TEST

START_TEST(test_file_and_reopen)
{
    char *path = path_in_dir("error.log");
    char *moved = path_in_dir("error.log.1");

    ck_assert_int_eq(sl_log_fd(), STDERR_FILENO);
    ck_assert_int_eq(sl_log_open(path), 0);
    int fd = sl_log_fd();
    ck_assert_int_ne(fd, STDERR_FILENO);
    ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    sl_info("first");

    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0644 & ~umask(022));

    /* logrotate moves the file, then USR1 asks for a reopen */
    ck_assert_int_eq(rename(path, moved), 0);
    sl_info("second, still in the moved file");
    ck_assert_int_eq(sl_log_reopen(), 0);
    ck_assert_int_eq(sl_log_fd(), fd); /* same number: holders follow */
    sl_info("third");

    char *old = read_file(moved);
    char *cur = read_file(path);
    ck_assert_ptr_nonnull(strstr(old, "[INFO] first\n"));
    ck_assert_ptr_nonnull(strstr(old, "[INFO] second, still"));
    ck_assert_ptr_null(strstr(old, "third"));
    assert_line(cur, "INFO", "third");
    free(old);
    free(cur);

    /* appending, not truncating */
    ck_assert_int_eq(sl_log_open(path), 0);
    sl_info("fourth");
    cur = read_file(path);
    ck_assert_ptr_nonnull(strstr(cur, "third\n"));
    ck_assert_ptr_nonnull(strstr(cur, "fourth\n"));
    free(cur);

    /* back to stderr, keeping the number */
    stderr_to_packets();
    ck_assert_int_eq(sl_log_open(NULL), 0);
    ck_assert_int_eq(sl_log_fd(), fd);
    ck_assert_int_eq(sl_log_reopen(), 0);
    sl_info("fifth");
    assert_line(next_packet(), "INFO", "fifth");
}
END_TEST

START_TEST(test_open_failure_keeps_target)
{
    char *path = path_in_dir("kept.log");

    ck_assert_int_eq(sl_log_open(path), 0);
    int fd = sl_log_fd();
    errno = 0;
    ck_assert_int_eq(sl_log_open("/nonexistent/dir/x.log"), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_int_eq(sl_log_fd(), fd);
    sl_info("still here");
    char *cur = read_file(path);
    assert_line(cur, "INFO", "still here");
    free(cur);

    /* the file vanished with its directory: reopen fails, logging goes on */
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
    ck_assert_int_eq(sl_log_reopen(), -1);
    sl_info("into the unlinked file");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
}
END_TEST

#define THREADS 4
#define LINES   2000

static void *log_lines(void *arg)
{
    long id = (long)arg;

    for (int i = 0; i < LINES; i++) {
        sl_info("thread %ld line %d %s", id, i,
                "padding padding padding padding padding padding padding");
        if (id == 0 && i % 500 == 0) {
            sl_log_reopen(); /* reopening under writers loses nothing */
        }
    }
    return NULL;
}

START_TEST(test_threads_do_not_interleave)
{
    char *path = path_in_dir("threads.log");
    pthread_t t[THREADS];
    regex_t re;
    int count[THREADS] = {0};

    ck_assert_int_eq(sl_log_open(path), 0);
    for (long i = 0; i < THREADS; i++) {
        ck_assert_int_eq(pthread_create(&t[i], NULL, log_lines, (void *)i), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
    }

    char *text = read_file(path);
    ck_assert_int_eq(regcomp(&re,
                             LINE_RE "thread [0-9] line [0-9]+ (padding ?){7}$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    int lines = 0;
    for (char *save, *line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        ck_assert_msg(regexec(&re, line, 0, NULL, 0) == 0, "mangled line: '%s'",
                      line);
        count[strstr(line, "thread ")[7] - '0']++;
        lines++;
    }
    regfree(&re);
    free(text);
    ck_assert_int_eq(lines, THREADS * LINES);
    for (int i = 0; i < THREADS; i++) {
        ck_assert_int_eq(count[i], LINES);
    }
}
END_TEST

static Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_level_parse);
    tcase_add_test(tc, test_line_format_one_write);
    tcase_add_test(tc, test_long_line_one_write);
    tcase_add_test(tc, test_level_filter);
    tcase_add_test(tc, test_errno);
    tcase_add_test(tc, test_usage);
    tcase_add_test(tc, test_file_and_reopen);
    tcase_add_test(tc, test_open_failure_keeps_target);
    tcase_add_test(tc, test_threads_do_not_interleave);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(log_suite());

    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
