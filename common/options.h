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
#include <stdio.h>

#include "common/allow.h"

#define SL_MAX_BINDS        16
#define SL_MAX_PYTHONPATHS  16
#define SL_MAX_RELOAD_EXTRA 64 /* --reload-extra-file, at most */
#define SL_MAX_CERTS        16 /* --certfile / --keyfile pairs, at most */
#define SL_MAX_STATIC       16 /* --static maps, at most */

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

/* --cert-reqs: gunicorn's 0, 1, 2 (Python's ssl.CERT_*). */
typedef enum {
    SL_CERT_NONE = 0,
    SL_CERT_OPTIONAL = 1,
    SL_CERT_REQUIRED = 2,
} sl_cert_reqs_t;

/* --http-protocols: the protocols a connection may speak */
typedef enum {
    SL_PROTO_H1 = 1,
    SL_PROTO_H2 = 2,
} sl_proto_t;

#define SL_MAX_PROTOS 2

/* --ssl-min-version */
typedef enum {
    SL_TLS_1_2 = 0,
    SL_TLS_1_3,
} sl_tls_version_t;

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
    /* --insecure-bind: listeners TLS does not apply to */
    const char *insecure_binds[SL_MAX_BINDS];
    int ninsecure_binds;

    /* TLS (gunicorn's names): with certfile and keyfile, every --bind
     * listener speaks TLS. Repeated, they pair up in order: the Nth
     * --keyfile is the key of the Nth --certfile, and a client's server
     * name picks the pair whose certificate names it (SNI), the first
     * pair when none does (worker/loop/tlsctx.c). */
    const char *certfiles[SL_MAX_CERTS]; /* PEM certificate chains */
    int ncertfiles;
    const char *keyfiles[SL_MAX_CERTS]; /* their PEM private keys */
    int nkeyfiles;
    const char *certfile;     /* certfiles[0], or NULL: no TLS */
    const char *keyfile;      /* keyfiles[0], or NULL */
    const char *ca_certs;     /* PEM CAs for client certificates */
    sl_cert_reqs_t cert_reqs; /* client certificates */
    const char *ciphers;      /* TLS 1.2 suites, OpenSSL's syntax */
    sl_tls_version_t tls_min; /* --ssl-min-version */
    /* seconds a session ticket key encrypts new tickets (the one before
     * still opens them); 0: no tickets */
    double ticket_rotation;

    /* HTTP/2 (gunicorn's names; worker/loop/h2.c) */
    sl_proto_t http_protocols[SL_MAX_PROTOS]; /* in order of preference */
    int nhttp_protocols;                      /* [h1] */
    bool http2_prior_knowledge;       /* --http2-cleartext prior-knowledge:
                                         plain listeners take h2's preface */
    int http2_max_concurrent_streams; /* [100] */
    int http2_initial_window_size;    /* bytes [65535] */
    int http2_max_frame_size;         /* bytes [16384] */
    int http2_max_header_list_size;   /* bytes [65536] */

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
    /* slow readers (nginx's send_timeout) */
    double send_timeout; /* seconds a response may wait unread, 0 = forever */

    /* life cycle (later issues) */
    double timeout;
    double graceful_timeout;
    double boot_timeout;
    double shutdown_delay;
    int max_requests;
    int max_requests_jitter;
    int max_worker_memory; /* MiB of PSS, 0: no bound */
    bool preload;          /* fork workers from a zygote */
    bool factory;          /* the app is NAME() */
    int reload_surge;
    /* WebSockets (uvicorn's names and defaults) */
    long long ws_max_size;   /* bytes of one message */
    int ws_max_queue;        /* received messages queued for the app */
    double ws_ping_interval; /* seconds, 0 = no pings */
    double ws_ping_timeout;  /* seconds, 0 = no timeout */
    bool ws_per_message_deflate;

    /* behind a proxy (gunicorn's names and defaults) */
    sl_allow_t forwarded_allow;       /* --forwarded-allow-ips */
    const char *forwarded_allow_text; /* as given, for --print-config */
    bool forwarded_allow_set;         /* given on the command line */
    bool proxy_protocol;              /* --proxy-protocol */
    sl_allow_t proxy_allow;           /* --proxy-allow-from */
    const char *proxy_allow_text;     /* as given, for --print-config */
    /* metrics */
    const char *metrics_bind; /* --metrics-bind ADDR, NULL: off */
    /* access log */
    const char *access_logfile;   /* NULL = off, "-" = stdout */
    const char *access_logformat; /* NULL = gunicorn's default */
    bool access_log_json;

    const char *health_path;
    /* static files (worker/loop/static.h): "PREFIX=DIR" and
     * "PREFIX=VALUE", as given (borrowed), checked */
    const char *statics[SL_MAX_STATIC];
    int nstatics;
    const char *static_caches[SL_MAX_STATIC];
    int nstatic_caches;
    const char *pidfile;
    const char *error_logfile;
    const char *proc_name;

    /* logging */
    int log_level; /* SL_LOG_* from log.h */

    /* configuration file and identity (common/settings.h) */
    const char *config; /* -c FILE, or NULL */
    bool check_config;  /* validate, then exit */
    bool print_config;  /* print the effective settings, then exit */
    const char *user;   /* workers' user (name or uid), or NULL */
    const char *group;  /* workers' group (name or gid), or NULL */
    /* development: restart the workers when the source changes */
    bool reload;
    const char *reload_extra_files[SL_MAX_RELOAD_EXTRA]; /* borrowed */
    int nreload_extra_files;
} sl_options_t;

/* What a setting takes, for the configuration file's parser. */
typedef enum {
    SL_OPTARG_UNKNOWN = -1, /* no such option */
    SL_OPTARG_ACTION,       /* --help, --config: not a setting */
    SL_OPTARG_FLAG,         /* no argument: "name = true" sets it */
    SL_OPTARG_ONE,          /* one value; a later one replaces it */
    SL_OPTARG_LIST,         /* repeatable: each value adds one */
    SL_OPTARG_LINES,        /* the same, but a file's line is one value
                               (commas are its own: --static-cache-control) */
} sl_optarg_t;

/* Called by sl_options_scan() for each option (NAME its long name without
 * "--", VALUE its argument or NULL for a flag) and, with NAME NULL, for
 * each positional argument. Returns 0, or -1 to stop the scan. */
typedef int (*sl_options_visit_fn)(void *ctx, const char *name,
                                   const char *value);

/* Fill *o with defaults, then parse argv. On a bad command line prints one
 * "sluice: error: ..." line to stderr and returns -1 (caller exits 2). On
 * --help or --version prints and returns 1 (caller exits 0). Returns 0 when
 * the options are ready to use. argv strings are borrowed, not copied. */
int sl_options_parse(sl_options_t *o, int argc, char **argv);

/* Free what *O owns (the --pythonpath copies); *O keeps its other settings
 * and no --pythonpath. O may be NULL. */
void sl_options_release(sl_options_t *o);

/* What the option NAME (long name; '_' and '-' alike) takes; *CANON, when
 * not NULL, gets the table's spelling of the name (static storage). */
sl_optarg_t sl_options_lookup(const char *name, const char **canon);

/* Walk ARGV[1..ARGC) as sl_options_parse() would, without applying
 * anything: VISIT gets each option and positional in order. ARGV may be
 * reordered (getopt). An unknown option or a missing argument is reported
 * as by sl_options_parse(). Returns 0, or -1 (reported, or VISIT's -1). */
int sl_options_scan(int argc, char **argv, sl_options_visit_fn visit,
                    void *ctx);

/* Check VALUE for the option NAME alone, as the command line would (one
 * "sluice: error: ..." line when bad). 0 or -1. */
int sl_options_check(const char *name, const char *value);

/* Print every setting of *O to OUT as "name = value" lines that
 * common/conffile.c reads back to the same settings; unset ones as
 * comments. ARGV[1..ARGC), the vector *O was parsed from, gives the value of
 * a setting this function does not know how to print. */
void sl_options_print(const sl_options_t *o, int argc, char **argv, FILE *out);

/* Print the settings reference, docs/settings.md, to OUT: a Markdown table
 * with one row an option of the table, in --help's order (its flag, the
 * default --help gives in brackets, the line --print-config writes for *O
 * and the help text), then the environment --help lists. *O and
 * ARGV[1..ARGC) as for sl_options_print(), parsed from no options to show
 * the defaults. Returns 0, or -1 (logged) when memory runs out. */
int sl_options_print_reference(const sl_options_t *o, int argc, char **argv,
                               FILE *out);

#endif
