/* options.h - the command line, parsed once into one plain struct.
 *
 * The supervisor parses argv; a worker (sluice-worker) is exec'd with the
 * same argv plus a few SLUICE_* variables in its environment, so both sides
 * see identical options without any serialisation. Option names follow
 * gunicorn wherever gunicorn has the option.
 */
#ifndef SL_OPTIONS_H
#define SL_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#define SL_MAX_BINDS       16
#define SL_MAX_PYTHONPATHS 16

/* Exit statuses shared by supervisor and worker. */
enum {
    SL_EXIT_OK = 0,
    SL_EXIT_FAIL = 1,    /* runtime failure, or a forced drain */
    SL_EXIT_USAGE = 2,   /* bad option, bad app, unbindable address */
    SL_EXIT_APPLOAD = 3, /* worker: the app could not be imported */
};

typedef enum {
    SL_IFACE_AUTO = 0,
    SL_IFACE_WSGI,
    SL_IFACE_ASGI,
} sl_iface_t;

typedef enum {
    SL_LOOP_AUTO = 0, /* uvloop when importable, else asyncio */
    SL_LOOP_ASYNCIO,
    SL_LOOP_UVLOOP,
} sl_loop_t;

typedef enum {
    SL_LIFESPAN_AUTO = 0, /* run it; an app that rejects it is served */
    SL_LIFESPAN_ON,       /* run it; any failure fails the boot */
    SL_LIFESPAN_OFF,
} sl_lifespan_t;

typedef struct {
    /* what to serve */
    const char *app; /* "module:callable", borrowed from argv */
    sl_iface_t interface;
    const char *chdir;
    const char *pythonpath[SL_MAX_PYTHONPATHS];
    int npythonpath;
    const char *venv;

    /* ASGI */
    sl_loop_t loop;
    sl_lifespan_t lifespan;
    const char *root_path; /* the scope's root_path, "" when not given */

    /* sockets */
    const char *binds[SL_MAX_BINDS];
    int nbinds;
    int backlog;
    int umask; /* for unix: sockets, -1 when not given */

    /* processes and executor */
    int workers;
    int threads;
    int worker_connections;
    bool inline_mode; /* SLUICE_INLINE=1 in the environment */

    /* HTTP limits (gunicorn's names and defaults) */
    int limit_request_line;
    int limit_request_fields;
    int limit_request_field_size;
    long long limit_request_body; /* bytes, 0 = unlimited */
    double header_timeout;        /* seconds */
    double keep_alive;            /* idle keep-alive timeout, seconds */

    /* life cycle (later issues) */
    double timeout;
    double graceful_timeout;
    double boot_timeout;
    double shutdown_delay;
    int max_requests;
    int max_requests_jitter;
    int reload_surge;
    /* WebSockets (uvicorn's names and defaults) */
    long long ws_max_size;   /* bytes of one message */
    int ws_max_queue;        /* received messages queued for the app */
    double ws_ping_interval; /* seconds, 0 = no pings */
    double ws_ping_timeout;  /* seconds, 0 = no timeout */
    bool ws_per_message_deflate;

    /* access log */
    const char *access_logfile;   /* NULL = off, "-" = stdout */
    const char *access_logformat; /* NULL = gunicorn's default */
    bool access_log_json;

    const char *health_path;
    const char *pidfile;
    const char *error_logfile;
    const char *proc_name;

    /* logging */
    int log_level; /* SL_LOG_* from log.h */
} sl_options_t;

/* Fill *o with defaults, then parse argv. On a bad command line prints one
 * "sluice: error: ..." line to stderr and returns -1 (caller exits 2). On
 * --help or --version prints and returns 1 (caller exits 0). Returns 0 when
 * the options are ready to use. argv strings are borrowed, not copied. */
int sl_options_parse(sl_options_t *o, int argc, char **argv);

#endif
