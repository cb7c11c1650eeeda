/* test_listen.c - check suite for supervisor/listen.c.
 *
 * Parsing is checked value by value; binding is checked on real sockets:
 * loopback ports chosen by the kernel (:0), unix sockets in a temporary
 * directory, and socket activation in a forked child that owns fd 3.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/options.h"
#include "supervisor/listen.h"

static char dir[] = "/tmp/sl-test-listen-XXXXXX";
static char err_text[4096];

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
    sl_log_set_level(SL_LOG_WARNING); /* no "Listening at" in the output */
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_PID");
}

static void teardown(void)
{
    char cmd[64];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Options for "sluice [-b SPEC]... m:a"; stderr is captured at open. */
static void options_for(sl_options_t *o, const char *b1, const char *b2)
{
    char *argv[] = {"sluice", "-b", (char *)b1, "-b", (char *)b2, "m:a", NULL};

    if (b2 == NULL) {
        argv[3] = "m:a";
        argv[4] = NULL;
    }
    ck_assert_int_eq(sl_options_parse(o, b2 ? 6 : 4, argv), 0);
}

static int open_captured(const sl_options_t *o, sl_listener_t *ls)
{
    FILE *err = tmpfile();
    int saved = dup(STDERR_FILENO);

    dup2(fileno(err), STDERR_FILENO);
    int n = sl_listen_open(o, ls, SL_MAX_LISTENERS);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(err);
    size_t len = fread(err_text, 1, sizeof(err_text) - 1, err);
    err_text[len] = '\0';
    fclose(err);
    return n;
}

static void assert_listening(int fd)
{
    int on = 0;
    socklen_t len = sizeof(on);

    ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len), 0);
    ck_assert_int_eq(on, 1);
    ck_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
    ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

START_TEST(test_parse_good)
{
    sl_addr_t a;

    ck_assert_int_eq(sl_listen_parse("127.0.0.1:8000", &a), 0);
    ck_assert_int_eq(a.kind, SL_ADDR_TCP);
    ck_assert_str_eq(a.host, "127.0.0.1");
    ck_assert_int_eq(a.port, 8000);

    ck_assert_int_eq(sl_listen_parse("[::1]:9000", &a), 0);
    ck_assert_int_eq(a.kind, SL_ADDR_TCP);
    ck_assert_str_eq(a.host, "::1");
    ck_assert_int_eq(a.port, 9000);

    ck_assert_int_eq(sl_listen_parse("[::]", &a), 0);
    ck_assert_str_eq(a.host, "::");
    ck_assert_int_eq(a.port, 8000);

    ck_assert_int_eq(sl_listen_parse("localhost", &a), 0);
    ck_assert_str_eq(a.host, "localhost");
    ck_assert_int_eq(a.port, 8000);

    ck_assert_int_eq(sl_listen_parse(":8080", &a), 0);
    ck_assert_str_eq(a.host, "");
    ck_assert_int_eq(a.port, 8080);

    ck_assert_int_eq(sl_listen_parse("0.0.0.0:0", &a), 0);
    ck_assert_int_eq(a.port, 0);

    ck_assert_int_eq(sl_listen_parse("unix:/run/sluice.sock", &a), 0);
    ck_assert_int_eq(a.kind, SL_ADDR_UNIX);
    ck_assert_str_eq(a.path, "/run/sluice.sock");

    ck_assert_int_eq(sl_listen_parse("fd://3", &a), 0);
    ck_assert_int_eq(a.kind, SL_ADDR_FD);
    ck_assert_int_eq(a.fd, 3);
}
END_TEST

static const struct {
    const char *spec, *expect;
} bad_specs[] = {
    {"unix:", "unix: needs a path"},
    {"fd://", "fd:// needs a descriptor number"},
    {"fd://x", "fd:// needs a descriptor number"},
    {"fd://-1", "fd:// needs a descriptor number"},
    {"::1:80", "in brackets"},
    {"[::1", "missing ']'"},
    {"[::1]80", "expected ':PORT'"},
    {"host:99999", "port must be a number from 0 to 65535"},
    {"host:65536", "port must be"},
    {"host:", "port must be"},
    {"host:http", "port must be"},
    {"host:-1", "port must be"},
};

START_TEST(test_parse_bad)
{
    sl_addr_t a;
    FILE *err = tmpfile();
    int saved = dup(STDERR_FILENO);

    dup2(fileno(err), STDERR_FILENO);
    int rc = sl_listen_parse(bad_specs[_i].spec, &a);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(err);
    size_t len = fread(err_text, 1, sizeof(err_text) - 1, err);
    err_text[len] = '\0';
    fclose(err);

    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strncmp(err_text, "sluice: error: bind '", 21) == 0,
                  "got '%s'", err_text);
    ck_assert_msg(strstr(err_text, bad_specs[_i].expect) != NULL,
                  "'%s' not in '%s'", bad_specs[_i].expect, err_text);
}
END_TEST

START_TEST(test_parse_long_unix_path)
{
    char spec[256] = "unix:/";
    sl_addr_t a;

    memset(spec + 6, 'a', 200);
    ck_assert_int_eq(sl_listen_parse(spec, &a), -1);
}
END_TEST

START_TEST(test_tcp_two_addresses)
{
    sl_options_t o;
    sl_listener_t ls[SL_MAX_LISTENERS];

    options_for(&o, "127.0.0.1:0", "localhost:0");
    int n = open_captured(&o, ls);
    ck_assert_msg(n == 2, "n=%d: %s", n, err_text);
    for (int i = 0; i < n; i++) {
        assert_listening(ls[i].fd);
        ck_assert(!ls[i].unlink);
        ck_assert_msg(strncmp(ls[i].name, "http://", 7) == 0, "%s", ls[i].name);
        ck_assert_msg(strstr(ls[i].name, ":0") == NULL,
                      "%s: the kernel's port, not :0", ls[i].name);
    }
    ck_assert(strncmp(ls[0].name, "http://127.0.0.1:", 17) == 0);
    sl_listen_close(ls, n, true);
    ck_assert_int_eq(ls[0].fd, -1);
}
END_TEST

START_TEST(test_ipv6_only)
{
    sl_options_t o;
    sl_listener_t ls[SL_MAX_LISTENERS];
    int v6only = 0;
    socklen_t len = sizeof(v6only);

    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    if (probe == -1) {
        return; /* no IPv6 on this machine */
    }
    close(probe);
    options_for(&o, "[::1]:0", NULL);
    int n = open_captured(&o, ls);
    if (n == -1 && strstr(err_text, "Cannot assign requested address")) {
        return; /* IPv6 present, but no ::1 (a container without it) */
    }
    ck_assert_msg(n == 1, "%s", err_text);
    ck_assert(strncmp(ls[0].name, "http://[::1]:", 13) == 0);
    ck_assert_int_eq(
        getsockopt(ls[0].fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &len), 0);
    ck_assert_int_eq(v6only, 1);
    sl_listen_close(ls, n, true);
}
END_TEST

START_TEST(test_address_in_use)
{
    sl_options_t o;
    sl_listener_t ls[SL_MAX_LISTENERS];
    char spec[64];

    options_for(&o, "127.0.0.1:0", NULL);
    ck_assert_int_eq(open_captured(&o, ls), 1);
    const char *port = strrchr(ls[0].name, ':') + 1;
    snprintf(spec, sizeof(spec), "127.0.0.1:%s", port);

    sl_options_t o2;
    sl_listener_t ls2[SL_MAX_LISTENERS];
    options_for(&o2, "127.0.0.1:0", spec);
    ck_assert_int_eq(open_captured(&o2, ls2), -1);
    char expect[128];
    snprintf(expect, sizeof(expect),
             "sluice: error: cannot bind %s: Address already in use\n", spec);
    ck_assert_str_eq(err_text, expect);
    sl_listen_close(ls, 1, true);
}
END_TEST

START_TEST(test_unix_socket)
{
    char spec[160], path[128];
    sl_options_t o;
    sl_listener_t ls[SL_MAX_LISTENERS];
    struct stat st;

    snprintf(path, sizeof(path), "%s/s.sock", dir);
    snprintf(spec, sizeof(spec), "unix:%s", path);
    char *argv[] = {"sluice", "-b", spec, "--umask", "077", "m:a", NULL};
    ck_assert_int_eq(sl_options_parse(&o, 6, argv), 0);

    ck_assert_int_eq(open_captured(&o, ls), 1);
    assert_listening(ls[0].fd);
    ck_assert(ls[0].unlink);
    ck_assert_str_eq(ls[0].name, spec);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert(S_ISSOCK(st.st_mode));
    ck_assert_int_eq(st.st_mode & 0777, 0700);

    /* while it listens, a second server must not steal the path */
    sl_listener_t ls2[SL_MAX_LISTENERS];
    ck_assert_int_eq(open_captured(&o, ls2), -1);
    ck_assert_ptr_nonnull(strstr(err_text, "another server is listening"));
    ck_assert_int_eq(stat(path, &st), 0);

    /* closed without unlink (a crash): stale, so removed and rebound */
    sl_listen_close(ls, 1, false);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(open_captured(&o, ls), 1);
    assert_listening(ls[0].fd);

    /* a final stop removes the file */
    sl_listen_close(ls, 1, true);
    ck_assert_int_eq(stat(path, &st), -1);
}
END_TEST

START_TEST(test_unix_path_not_a_socket)
{
    char spec[160], path[128];
    sl_options_t o;
    sl_listener_t ls[SL_MAX_LISTENERS];
    struct stat st;

    snprintf(path, sizeof(path), "%s/data", dir);
    snprintf(spec, sizeof(spec), "unix:%s", path);
    FILE *f = fopen(path, "w");
    fputs("precious", f);
    fclose(f);
    options_for(&o, spec, NULL);
    ck_assert_int_eq(open_captured(&o, ls), -1);
    ck_assert_ptr_nonnull(strstr(err_text, "is not a socket"));
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
}
END_TEST

START_TEST(test_fd_adopted)
{
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    sl_options_t o;
    sl_listener_t ls[SL_MAX_LISTENERS];
    char spec[32];

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    snprintf(spec, sizeof(spec), "fd://%d", fd);
    options_for(&o, spec, NULL);
    ck_assert_int_eq(open_captured(&o, ls), 1);
    ck_assert_int_eq(ls[0].fd, fd);
    assert_listening(fd); /* listen() was called for us */

    options_for(&o, "fd://1000", NULL);
    ck_assert_int_eq(open_captured(&o, ls), -1);
    ck_assert_ptr_nonnull(strstr(err_text, "cannot use fd://1000"));
}
END_TEST

/* systemd passes fd 3: a child sets that up and reports by exit code. */
START_TEST(test_socket_activation)
{
    pid_t pid = fork();

    ck_assert_int_ne(pid, -1);
    if (pid == 0) {
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        sl_options_t o;
        sl_listener_t ls[SL_MAX_LISTENERS];
        char buf[32];

        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
            listen(fd, 8) == -1 || dup2(fd, 3) != 3) {
            _exit(10);
        }
        snprintf(buf, sizeof(buf), "%ld", (long)getpid());
        setenv("LISTEN_PID", buf, 1);
        setenv("LISTEN_FDS", "1", 1);
        setenv("LISTEN_FDNAMES", "web", 1);
        /* no ck_assert here: check reports through a descriptor that fd 3
         * may just have replaced */
        char *argv[] = {"sluice", "-b", "unix:/nonexistent/never.sock", "m:a",
                        NULL};
        if (sl_options_parse(&o, 4, argv) != 0) {
            _exit(14);
        }
        int n = sl_listen_open(&o, ls, SL_MAX_LISTENERS);
        if (n != 1 || ls[0].fd != 3 || ls[0].unlink) {
            _exit(11);
        }
        if (getenv("LISTEN_FDS") != NULL || getenv("LISTEN_PID") != NULL) {
            _exit(12); /* workers must not see them */
        }
        if (!(fcntl(3, F_GETFL) & O_NONBLOCK)) {
            _exit(13);
        }
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status), "child status %#x", status);
    ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

/* The list a worker or a new supervisor is given ("3,u4": u for a unix
 * socket file that is ours to remove), and the listeners read back from
 * it. */
START_TEST(test_listen_fdlist_round_trip)
{
    sl_listener_t ls[2], back[2];
    sl_options_t o;
    char list[64], want[64], unix_bind[160];

    snprintf(unix_bind, sizeof(unix_bind), "unix:%s/s.sock", dir);
    char *argv[] = {"t", "-b", "127.0.0.1:0", "-b", unix_bind, "m:a", NULL};
    ck_assert_int_eq(sl_options_parse(&o, 6, argv), 0);
    ck_assert_int_eq(sl_listen_open(&o, ls, 2), 2);
    ck_assert_int_eq(sl_listen_fdlist(ls, 2, list, sizeof(list)), 0);
    snprintf(want, sizeof(want), "%d,u%d", ls[0].fd, ls[1].fd);
    ck_assert_str_eq(list, want);
    ck_assert_int_eq(sl_listen_fdlist(ls, 2, list, 4), -1);

    ck_assert_int_eq(sl_listen_inherit(want, back, 2), 2);
    ck_assert_str_eq(back[0].name, ls[0].name);
    ck_assert(!back[0].unlink);
    ck_assert(back[1].unlink);
    ck_assert_str_eq(back[1].path, unix_bind + 5);
    ck_assert_int_eq(sl_listen_inherit("0", back, 2), -1); /* not a socket */
    ck_assert_int_eq(sl_listen_inherit("x3", back, 2), -1);
    ck_assert_int_eq(sl_listen_inherit("", back, 2), -1);
    sl_listen_close(ls, 2, true);
    ck_assert_int_eq(access(unix_bind + 5, F_OK), -1);
}
END_TEST

static Suite *listen_suite(void)
{
    Suite *s = suite_create("listen");
    TCase *parse = tcase_create("parse");
    TCase *open = tcase_create("open");

    tcase_add_test(parse, test_parse_good);
    tcase_add_loop_test(parse, test_parse_bad, 0,
                        sizeof(bad_specs) / sizeof(bad_specs[0]));
    tcase_add_test(parse, test_parse_long_unix_path);
    suite_add_tcase(s, parse);

    tcase_add_checked_fixture(open, setup, teardown);
    tcase_add_test(open, test_tcp_two_addresses);
    tcase_add_test(open, test_ipv6_only);
    tcase_add_test(open, test_address_in_use);
    tcase_add_test(open, test_unix_socket);
    tcase_add_test(open, test_unix_path_not_a_socket);
    tcase_add_test(open, test_fd_adopted);
    tcase_add_test(open, test_socket_activation);
    tcase_add_test(open, test_listen_fdlist_round_trip);
    suite_add_tcase(s, open);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(listen_suite());

    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
