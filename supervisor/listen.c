/* listen.c - binds every --bind, or adopts the sockets systemd passed.
 *
 * Called once, before any worker exists. Every socket is made non-blocking
 * and close-on-exec here; spawn.c clears close-on-exec in the child only,
 * right before the exec, so nothing else the supervisor ever starts inherits
 * a listener by accident.
 *
 * A unix socket file left behind by a crashed server is removed, but only
 * after a connect() to it is refused: a live server's socket, or a file
 * that is not a socket at all, is never unlinked.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/listen.h"
#include "supervisor/sd.h"

#define DEFAULT_PORT 8000

static int parse_tcp(const char *spec, sl_addr_t *a);
static int parse_port(const char *spec, const char *s, int *port);
static int open_systemd(sl_listener_t *ls, int max, bool tls);
static int open_tcp(const sl_options_t *o, const char *spec,
                    const sl_addr_t *a);
static int open_unix(const sl_options_t *o, const char *spec,
                     const sl_addr_t *a);
static int adopt_fd(const sl_options_t *o, const char *spec, int fd);
static int remove_stale_socket(const char *spec, const char *path);
static int inherit_one(const char *tok, sl_listener_t *l);
static int set_flags(int fd);
static void name_socket(int fd, char *buf, size_t size);

int sl_listen_parse(const char *spec, sl_addr_t *a)
{
    memset(a, 0, sizeof(*a));

    if (strncmp(spec, "unix:", 5) == 0) {
        const char *path = spec + 5;
        a->kind = SL_ADDR_UNIX;
        if (path[0] == '\0') {
            sl_log_usage("bind '%s': unix: needs a path", spec);
            return -1;
        }
        if (strlen(path) >= sizeof(a->path)) {
            sl_log_usage("bind '%s': unix socket path longer than %zu bytes",
                         spec, sizeof(a->path) - 1);
            return -1;
        }
        strcpy(a->path, path);
        return 0;
    }

    if (strncmp(spec, "fd://", 5) == 0) {
        const char *num = spec + 5;
        a->kind = SL_ADDR_FD;
        if (num[0] == '\0' || strspn(num, "0123456789") != strlen(num) ||
            strlen(num) > 9) {
            sl_log_usage("bind '%s': fd:// needs a descriptor number", spec);
            return -1;
        }
        a->fd = atoi(num);
        return 0;
    }

    return parse_tcp(spec, a);
}

/* HOST:PORT, [V6]:PORT, HOST or [V6] (port 8000), :PORT (any address). */
static int parse_tcp(const char *spec, sl_addr_t *a)
{
    a->kind = SL_ADDR_TCP;
    a->port = DEFAULT_PORT;
    const char *host = spec;
    size_t hostlen;
    const char *rest;

    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (close == NULL) {
            sl_log_usage("bind '%s': missing ']' after the IPv6 address", spec);
            return -1;
        }
        host = spec + 1;
        hostlen = (size_t)(close - host);
        rest = close + 1;
        if (rest[0] != '\0' && rest[0] != ':') {
            sl_log_usage("bind '%s': expected ':PORT' after ']'", spec);
            return -1;
        }
    } else {
        const char *colon = strchr(spec, ':');
        if (colon != NULL && strchr(colon + 1, ':') != NULL) {
            sl_log_usage("bind '%s': write an IPv6 address in brackets,"
                         " as [::1]:8000",
                         spec);
            return -1;
        }
        hostlen = colon ? (size_t)(colon - spec) : strlen(spec);
        rest = colon ? colon : "";
    }
    if (hostlen >= sizeof(a->host)) {
        sl_log_usage("bind '%s': host name too long", spec);
        return -1;
    }
    memcpy(a->host, host, hostlen);
    a->host[hostlen] = '\0';
    if (rest[0] == ':' && parse_port(spec, rest + 1, &a->port) == -1) {
        return -1;
    }
    return 0;
}

/* A TLS listener says so in its name: "https://127.0.0.1:8443". */
static void mark_tls(sl_listener_t *l)
{
    char name[sizeof(l->name)];

    l->tls = true;
    if (strncmp(l->name, "http://", 7) == 0) {
        snprintf(name, sizeof(name), "https://%s", l->name + 7);
        snprintf(l->name, sizeof(l->name), "%s", name);
    }
}

/* Bind the N addresses SPECS after the *COUNT listeners of LS (MAX at
 * most), TLS ones when TLS. 0, or -1 after one line. */
static int bind_list(const sl_options_t *o, const char *const *specs, int n,
                     bool tls, sl_listener_t *ls, int *count, int max)
{
    for (int i = 0; i < n; i++) {
        if (*count == max) {
            sl_log_usage("too many addresses to bind (at most %d)", max);
            return -1;
        }
        if (sl_listen_bind(o, specs[i], &ls[*count]) == -1) {
            return -1;
        }
        if (tls) {
            mark_tls(&ls[*count]);
        }
        (*count)++;
    }
    return 0;
}

int sl_listen_open(const sl_options_t *o, sl_listener_t *ls, int max)
{
    int n = open_systemd(ls, max, o->certfile != NULL);
    if (n != 0) {
        return n; /* -1, or the sockets systemd passed */
    }

    if (bind_list(o, o->binds, o->nbinds, o->certfile != NULL, ls, &n, max) ==
            -1 ||
        bind_list(o, o->insecure_binds, o->ninsecure_binds, false, ls, &n,
                  max) == -1) {
        goto out_close;
    }
    for (int i = 0; i < n; i++) {
        sl_info("Listening at: %s (%ld)", ls[i].name, (long)getpid());
    }
    return n;

out_close:
    sl_listen_close(ls, n, true);
    return -1;
}

int sl_listen_inherit(const char *list, sl_listener_t *ls, int max)
{
    char buf[1024];
    int n = 0;

    if (strlen(list) >= sizeof(buf)) {
        sl_log_usage("inherited listener list too long: %s", list);
        return -1;
    }
    strcpy(buf, list);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == max) {
            sl_log_usage("more than %d inherited listeners", max);
            return -1;
        }
        if (inherit_one(tok, &ls[n]) == -1) {
            return -1;
        }
        sl_info("Listening at: %s (%ld), inherited", ls[n].name,
                (long)getpid());
        n++;
    }
    if (n == 0) {
        sl_log_usage("no inherited listener in '%s'", list);
        return -1;
    }
    return n;
}

int sl_listen_fdlist(const sl_listener_t *ls, int n, char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        int w =
            snprintf(buf + len, size - len, "%s%s%s%d", i ? "," : "",
                     ls[i].tls ? "t" : "", ls[i].unlink ? "u" : "", ls[i].fd);
        if (w < 0 || (size_t)w >= size - len) {
            return -1;
        }
        len += (size_t)w;
    }
    return 0;
}

int sl_listen_tls_fdlist(const sl_listener_t *ls, int n, char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (!ls[i].tls) {
            continue;
        }
        int w =
            snprintf(buf + len, size - len, "%s%d", len ? "," : "", ls[i].fd);
        if (w < 0 || (size_t)w >= size - len) {
            return -1;
        }
        len += (size_t)w;
    }
    return 0;
}

/* "u5", "t6" or "5": an inherited listener; with 'u', one whose unix socket
 * file is ours to remove at the final exit; with 't', one that speaks
 * TLS. */
static int inherit_one(const char *tok, sl_listener_t *l)
{
    bool tls = tok[0] == 't';
    bool ours = tok[tls] == 'u';
    const char *num = tok + tls + ours;

    if (num[0] == '\0' || strspn(num, "0123456789") != strlen(num) ||
        strlen(num) > 9) {
        sl_log_usage("inherited listener '%s' is not a descriptor number", tok);
        return -1;
    }
    int fd = atoi(num);
    if (!sl_sd_is_listening_stream(fd)) {
        sl_log_usage("inherited fd %d is not a listening stream socket", fd);
        return -1;
    }
    if (set_flags(fd) == -1) {
        return -1;
    }
    *l = (sl_listener_t){.fd = fd, .unlink = false};
    name_socket(fd, l->name, sizeof(l->name));
    if (ours && strncmp(l->name, "unix:", 5) == 0 &&
        strlen(l->name + 5) < sizeof(l->path)) {
        l->unlink = true;
        strcpy(l->path, l->name + 5);
    }
    if (tls) {
        mark_tls(l);
    }
    return 0;
}

void sl_listen_close(sl_listener_t *ls, int n, bool remove_files)
{
    for (int i = 0; i < n; i++) {
        if (ls[i].fd != -1) {
            close(ls[i].fd);
            ls[i].fd = -1;
        }
        if (remove_files && ls[i].unlink && unlink(ls[i].path) == -1 &&
            errno != ENOENT) {
            sl_log_errno(SL_LOG_WARNING, "unlink(\"%s\") failed", ls[i].path);
        }
    }
}

static int parse_port(const char *spec, const char *s, int *port)
{
    if (s[0] == '\0' || strspn(s, "0123456789") != strlen(s) || strlen(s) > 5 ||
        atoi(s) > 65535) {
        sl_log_usage("bind '%s': port must be a number from 0 to 65535", spec);
        return -1;
    }
    *port = atoi(s);
    return 0;
}

/* Socket activation. Returns how many sockets systemd passed (0 when it
 * passed none, the usual case), or -1. LISTEN_* are removed from the
 * environment so that workers do not take them for their own. */
static int open_systemd(sl_listener_t *ls, int max, bool tls)
{
    char **names = NULL;
    int n = sl_sd_listen_fds(&names);

    if (n < 0) {
        sl_log_usage("systemd's LISTEN_FDS: %s", strerror(-n));
        return -1;
    }
    if (n > max) {
        sl_log_usage("systemd passed %d sockets, at most %d are served", n,
                     max);
        n = -1;
        goto out_free;
    }
    for (int i = 0; i < n; i++) {
        int fd = SL_SD_LISTEN_FDS_START + i;
        if (!sl_sd_is_listening_stream(fd)) {
            sl_log_usage("systemd passed fd %d (%s), which is not a listening"
                         " stream socket",
                         fd, names ? names[i] : "?");
            n = -1;
            goto out_free;
        }
        if (set_flags(fd) == -1) {
            n = -1;
            goto out_free;
        }
        ls[i] = (sl_listener_t){.fd = fd, .unlink = false};
        name_socket(fd, ls[i].name, sizeof(ls[i].name));
        if (tls) {
            mark_tls(&ls[i]);
        }
        sl_info("Listening at: %s (%ld), from systemd as %s", ls[i].name,
                (long)getpid(), names ? names[i] : "?");
    }

out_free:
    if (names != NULL) {
        for (char **p = names; *p != NULL; p++) {
            free(*p);
        }
        free(names);
    }
    return n;
}

int sl_listen_bind(const sl_options_t *o, const char *spec, sl_listener_t *l)
{
    sl_addr_t a;
    int fd;

    if (sl_listen_parse(spec, &a) == -1) {
        return -1;
    }
    switch (a.kind) {
    case SL_ADDR_UNIX:
        fd = open_unix(o, spec, &a);
        break;
    case SL_ADDR_FD:
        fd = adopt_fd(o, spec, a.fd);
        break;
    default:
        fd = open_tcp(o, spec, &a);
        break;
    }
    if (fd == -1) {
        return -1;
    }
    *l = (sl_listener_t){.fd = fd, .unlink = a.kind == SL_ADDR_UNIX};
    if (l->unlink) {
        strcpy(l->path, a.path);
    }
    name_socket(fd, l->name, sizeof(l->name));
    return 0;
}

static int open_tcp(const sl_options_t *o, const char *spec, const sl_addr_t *a)
{
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC,
        .ai_socktype = SOCK_STREAM,
        .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
    };
    struct addrinfo *res;
    char port[8];
    int one = 1;
    int fd = -1;
    int err = 0;

    snprintf(port, sizeof(port), "%d", a->port);
    int rc = getaddrinfo(a->host[0] ? a->host : "0.0.0.0", port, &hints, &res);
    if (rc != 0) {
        sl_log_usage("cannot bind %s: %s", spec,
                     rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return -1;
    }
    /* A name may resolve to several addresses: the first that binds wins. */
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family,
                    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd == -1) {
            err = errno;
            continue;
        }
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
            (ai->ai_family == AF_INET6 &&
             setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) ==
                 -1) ||
            bind(fd, ai->ai_addr, ai->ai_addrlen) == -1 ||
            listen(fd, o->backlog) == -1) {
            err = errno;
            close(fd);
            fd = -1;
            continue;
        }
        break;
    }
    freeaddrinfo(res);
    if (fd == -1) {
        sl_log_usage("cannot bind %s: %s", spec, strerror(err));
    }
    return fd;
}

static int open_unix(const sl_options_t *o, const char *spec,
                     const sl_addr_t *a)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    int err;

    strcpy(sun.sun_path, a->path);
    if (remove_stale_socket(spec, a->path) == -1) {
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        sl_log_usage("cannot bind %s: socket(): %s", spec, strerror(errno));
        return -1;
    }
    /* The supervisor is single-threaded: the umask is ours to borrow. */
    mode_t old = o->umask >= 0 ? umask((mode_t)o->umask) : 0;
    int rc = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
    err = errno;
    if (o->umask >= 0) {
        umask(old);
    }
    if (rc == -1 || listen(fd, o->backlog) == -1) {
        err = rc == -1 ? err : errno;
        sl_log_usage("cannot bind %s: %s", spec, strerror(err));
        close(fd);
        return -1;
    }
    return fd;
}

/* Nothing at PATH, or a socket nobody answers on (removed): 0. A live
 * server's socket or a file of another kind: -1, with the reason. */
static int remove_stale_socket(const char *spec, const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    struct stat st;

    if (lstat(path, &st) == -1) {
        return 0; /* bind() will report what is wrong, if anything */
    }
    if (!S_ISSOCK(st.st_mode)) {
        sl_log_usage("cannot bind %s: %s exists and is not a socket", spec,
                     path);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        return 0;
    }
    strcpy(sun.sun_path, path);
    int rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
    int err = errno;
    close(fd);
    if (rc == 0) {
        sl_log_usage("cannot bind %s: another server is listening on it", spec);
        return -1;
    }
    if (err == ECONNREFUSED && unlink(path) == -1 && errno != ENOENT) {
        sl_log_usage("cannot bind %s: removing the stale socket: %s", spec,
                     strerror(errno));
        return -1;
    }
    return 0;
}

/* fd://N: a socket someone else bound for us; listen() if they did not. */
static int adopt_fd(const sl_options_t *o, const char *spec, int fd)
{
    int type, listening;
    socklen_t len = sizeof(type);

    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == -1) {
        sl_log_usage("cannot use %s: %s", spec, strerror(errno));
        return -1;
    }
    if (type != SOCK_STREAM) {
        sl_log_usage("cannot use %s: not a stream socket", spec);
        return -1;
    }
    len = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == -1 ||
        (!listening && listen(fd, o->backlog) == -1)) {
        sl_log_usage("cannot listen on %s: %s", spec, strerror(errno));
        return -1;
    }
    if (set_flags(fd) == -1) {
        return -1;
    }
    return fd;
}

static int set_flags(int fd)
{
    int fl = fcntl(fd, F_GETFL);

    if (fl == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) == -1) {
        sl_log_usage("fcntl() failed on fd %d: %s", fd, strerror(errno));
        return -1;
    }
    return 0;
}

/* What the socket is bound to, as an operator would type it: the real port
 * when :0 asked the kernel to choose one. */
static void name_socket(int fd, char *buf, size_t size)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char host[INET6_ADDRSTRLEN];

    if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1) {
        snprintf(buf, size, "fd://%d", fd);
        return;
    }
    switch (ss.ss_family) {
    case AF_INET: {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        snprintf(buf, size, "http://%s:%d", host, ntohs(in->sin_port));
        break;
    }
    case AF_INET6: {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        snprintf(buf, size, "http://[%s]:%d", host, ntohs(in6->sin6_port));
        break;
    }
    case AF_UNIX: {
        struct sockaddr_un *un = (struct sockaddr_un *)&ss;
        size_t n = len > offsetof(struct sockaddr_un, sun_path)
                       ? len - offsetof(struct sockaddr_un, sun_path)
                       : 0;
        snprintf(buf, size, "unix:%.*s", (int)strnlen(un->sun_path, n),
                 un->sun_path);
        break;
    }
    default:
        snprintf(buf, size, "fd://%d", fd);
        break;
    }
}
