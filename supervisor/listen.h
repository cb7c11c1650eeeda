/* listen.h - the listening sockets, bound once by the supervisor.
 *
 * Workers never bind: they inherit these descriptors across exec and all
 * accept from the same sockets, which is what lets a worker be replaced
 * without resetting a connection waiting in the backlog.
 */
#ifndef SL_LISTEN_H
#define SL_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/un.h>

#include "common/handoff.h" /* SL_MAX_LISTENERS */
#include "common/options.h"

typedef enum {
    SL_ADDR_TCP,  /* host:port, [v6]:port, host (port 8000) */
    SL_ADDR_UNIX, /* unix:PATH */
    SL_ADDR_FD,   /* fd://N, an already bound socket */
} sl_addr_kind_t;

typedef struct {
    sl_addr_kind_t kind;
    char host[256]; /* TCP: name or literal, no brackets; "" = any */
    int port;       /* TCP */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* UNIX */
    int fd;                                                 /* FD */
} sl_addr_t;

typedef struct {
    int fd;         /* owned; non-blocking, close-on-exec */
    bool unlink;    /* a unix socket file we created: remove it at exit */
    bool tls;       /* speaks TLS: a --bind, or systemd's, with --certfile */
    char name[160]; /* "http://127.0.0.1:8000", "unix:/run/x.sock" */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* if unlink */
} sl_listener_t;

/* Parse one --bind value into *a. On a malformed value prints one
 * "sluice: error: ..." line and returns -1. */
int sl_listen_parse(const char *spec, sl_addr_t *a);

/* Fill ls[] with the sockets to serve: the ones systemd passed (LISTEN_FDS,
 * in which case --bind and --insecure-bind are ignored) or one per --bind,
 * then one per --insecure-bind. With --certfile, all but the
 * --insecure-bind ones are TLS. Returns how many, or -1 after one
 * "sluice: error: ..." line (the caller exits 2); nothing is left open on
 * failure. */
int sl_listen_open(const sl_options_t *o, sl_listener_t *ls, int max);

/* Bind and listen on SPEC alone (a --bind form) into *L, as
 * sl_listen_open() does for each --bind. 0, or -1 after one
 * "sluice: error: ..." line. */
int sl_listen_bind(const sl_options_t *o, const char *spec, sl_listener_t *l);

/* The listeners a binary upgrade's new supervisor takes over, read from
 * LIST as sl_listen_fdlist() wrote it ("u5,t6": fd 5 is a unix socket whose
 * file the supervisor created, fd 6 is not and speaks TLS). Each must be an
 * open, listening stream socket; it is made non-blocking and close-on-exec.
 * Returns how many, or -1 after one "sluice: error: ..." line. */
int sl_listen_inherit(const char *list, sl_listener_t *ls, int max);

/* LS[0..N) as the list sl_listen_inherit() reads, in BUF. 0, or -1 when
 * BUF is too small. */
int sl_listen_fdlist(const sl_listener_t *ls, int n, char *buf, size_t size);

/* The TLS ones of LS[0..N) as the list a worker reads in SLUICE_TLS_FDS
 * (common/handoff.h), "" when none, in BUF. 0, or -1 when BUF is too
 * small. */
int sl_listen_tls_fdlist(const sl_listener_t *ls, int n, char *buf,
                         size_t size);

/* Close every listener; remove the unix socket files we created when
 * REMOVE_FILES (a final stop, not a re-exec). */
void sl_listen_close(sl_listener_t *ls, int n, bool remove_files);

#endif
