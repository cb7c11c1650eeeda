/* options.c - parses the command line into sl_options_t.
 *
 * One table drives everything: getopt_long's option list, the value check
 * and the --help text come from the same rows, so an option cannot be added
 * to one and forgotten in another. Each row names the field it fills and the
 * range it accepts; a bad value is reported once, argparse-style
 * ("sluice: error: argument -w/--workers: ..."), and parsing stops.
 *
 * Strings are borrowed from argv, with one exception: --pythonpath accepts a
 * comma-separated list, and its pieces are copied (and kept for the life of
 * the process) because argv must stay intact for the workers' exec.
 *
 * The table lives here; options_value.c reads one option's value by its
 * row, options_print.c writes the table out (--help, and --print-config's
 * "name = value" lines), and options_internal.h is the shape of a row,
 * which the three files share.
 */
#include "config.h"

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/logfmt.h"
#include "common/options.h"
#include "common/options_internal.h"

#define MAX_WORKERS       1024
#define MAX_THREADS       1024
#define MAX_SECONDS       (365.0 * 24 * 3600)
#define MAX_FIELD_SIZE    (1024 * 1024)
#define MAX_CONNECTIONS   (1024 * 1024)
#define MAX_BACKLOG       65535
#define MAX_REQUEST_LINE  8190
#define MAX_HEADER_FIELDS 32768
#define MAX_H2_SETTING    2147483647.0 /* 2^31-1: RFC 9113's windows */
#define MIN_H2_FRAME      16384.0      /* RFC 9113, 6.5.2 */
#define MAX_H2_FRAME      16777215.0

#define FIELD(f) offsetof(sl_options_t, f)
#define NOFIELD  0

/* The long option's index in this table is getopt's return value + 256. */
const opt_def_t sl_options_defs[] = {
    {"bind", 'b', OPT_SPECIAL, NOFIELD, 0, 0, "ADDR",
     "listen on ADDR: HOST:PORT, [IPV6]:PORT, unix:PATH or fd://N;"
     " repeatable [127.0.0.1:8000]"},
    {"insecure-bind", 0, OPT_SPECIAL, NOFIELD, 0, 0, "ADDR",
     "listen on ADDR without TLS, beside the TLS --bind listeners; the"
     " forms of --bind; repeatable [none]"},
    {"workers", 'w', OPT_INT, FIELD(workers), 1, MAX_WORKERS, "N",
     "worker processes [1]"},
    {"threads", 0, OPT_INT, FIELD(threads), 1, MAX_THREADS, "N",
     "WSGI threads (lanes) per worker [1]"},
    {"worker-connections", 0, OPT_INT, FIELD(worker_connections), 1,
     MAX_CONNECTIONS, "N", "open connections per worker, at most [1000]"},
    {"chdir", 0, OPT_STRING, FIELD(chdir), 0, 0, "DIR",
     "change to DIR in each worker before loading the app"},
    {"pythonpath", 0, OPT_SPECIAL, NOFIELD, 0, 0, "DIRS",
     "prepend DIRS (comma-separated) to sys.path; repeatable"},
    {"venv", 0, OPT_STRING, FIELD(venv), 0, 0, "DIR",
     "use the virtual environment in DIR"},
    {"interface", 0, OPT_SPECIAL, NOFIELD, 0, 0, "IFACE",
     "asgi, wsgi or auto (decided from the app) [auto]"},
    {"loop", 0, OPT_SPECIAL, NOFIELD, 0, 0, "LOOP",
     "ASGI event loop: auto (uvloop when installed), asyncio or uvloop"
     " [auto]"},
    {"lifespan", 0, OPT_SPECIAL, NOFIELD, 0, 0, "MODE",
     "ASGI lifespan: auto (run it if the app supports it), on or off"
     " [auto]"},
    {"root-path", 0, OPT_STRING, FIELD(root_path), 0, 0, "PATH",
     "ASGI root_path: the path prefix the app is mounted at [none]"},
    {"log-level", 0, OPT_SPECIAL, NOFIELD, 0, 0, "LEVEL",
     "debug, info, warning, error or critical [info]"},
    {"error-logfile", 0, OPT_SPECIAL, NOFIELD, 0, 0, "FILE",
     "write the error log to FILE, '-' for stderr [-]"},
    {"log-file", 0, OPT_SPECIAL, NOFIELD, 0, 0, "FILE",
     "same as --error-logfile"},
    {"limit-request-line", 0, OPT_INT, FIELD(limit_request_line), 0,
     MAX_REQUEST_LINE, "N", "longest request line, 0 = 8190 [4094]"},
    {"limit-request-fields", 0, OPT_INT, FIELD(limit_request_fields), 0,
     MAX_HEADER_FIELDS, "N", "most header fields, 0 = 32768 [100]"},
    {"limit-request-field-size", 0, OPT_INT, FIELD(limit_request_field_size), 0,
     MAX_FIELD_SIZE, "N", "name + value of a field, 0 = no own limit [8190]"},
    {"limit-request-body", 0, OPT_LLONG, FIELD(limit_request_body), 0, 9.2e18,
     "BYTES", "largest request body, 0 = unlimited [0]"},
    {"header-timeout", 0, OPT_SECONDS, FIELD(header_timeout), 0, MAX_SECONDS,
     "SECS", "time allowed to send a request head [30]"},
    {"keep-alive", 0, OPT_SECONDS, FIELD(keep_alive), 0, MAX_SECONDS, "SECS",
     "idle keep-alive connection timeout [5]"},
    /* slow readers */
    {"send-timeout", 0, OPT_SECONDS, FIELD(send_timeout), 0, MAX_SECONDS,
     "SECS",
     "close a connection whose client has taken no byte of its response"
     " (or WebSocket frames) for SECS; 0 = never [10]"},
    {"timeout", 't', OPT_SECONDS, FIELD(timeout), 0, MAX_SECONDS, "SECS",
     "a worker silent for SECS, or with every lane inside one request"
     " for SECS, has its Python tracebacks logged and is replaced; 0 ="
     " never [30]"},
    {"graceful-timeout", 0, OPT_SECONDS, FIELD(graceful_timeout), 0,
     MAX_SECONDS, "SECS", "time a stopping worker may drain [30]"},
    {"boot-timeout", 0, OPT_SECONDS, FIELD(boot_timeout), 0, MAX_SECONDS,
     "SECS",
     "a worker not ready after SECS is replaced (tracebacks logged); if no"
     " worker is ready SECS after start, exit 1; 0 = no limit [30]"},
    {"shutdown-delay", 0, OPT_SECONDS, FIELD(shutdown_delay), 0, MAX_SECONDS,
     "SECS", "keep accepting this long after SIGTERM [0]"},
    {"max-requests", 0, OPT_INT, FIELD(max_requests), 0, 2147483647.0, "N",
     "replace a worker after N requests, 0 = never [0]"},
    {"max-requests-jitter", 0, OPT_INT, FIELD(max_requests_jitter), 0,
     2147483647.0, "N", "add up to N at random to --max-requests [0]"},
    {"max-worker-memory", 0, OPT_INT, FIELD(max_worker_memory), 0, 4194304.0,
     "MB",
     "replace a worker whose memory (PSS, in MiB, read every second) is"
     " past MB less 0-10% (picked per worker), as --max-requests does;"
     " 0 = never [0]"},
    {"preload", 0, OPT_SWITCH, FIELD(preload), 0, 0, NULL,
     "import the app once per generation, in a zygote process that forks"
     " the workers (its pages shared copy-on-write) [off]"},
    {"factory", 0, OPT_SWITCH, FIELD(factory), 0, 0, NULL,
     "MODULE:NAME is a factory: call it with no arguments to get the app,"
     " once per worker (once per generation with --preload); MODULE:NAME()"
     " says the same [off]"},
    {"reload-surge", 0, OPT_INT, FIELD(reload_surge), 1, MAX_WORKERS, "N",
     "rolling restart (HUP): new workers started at once beyond the"
     " target [1]"},
    /* metrics (issue 11) */
    {"metrics-bind", 0, OPT_STRING, FIELD(metrics_bind), 0, 0, "ADDR",
     "serve Prometheus metrics from the supervisor at ADDR/metrics:"
     " HOST:PORT, [IPV6]:PORT or unix:PATH [off]"},
    {"ws-max-size", 0, OPT_LLONG, FIELD(ws_max_size), 1, 2147483647.0, "BYTES",
     "largest WebSocket message (after inflating); a bigger one closes"
     " the WebSocket with 1009 [16777216]"},
    {"ws-max-queue", 0, OPT_INT, FIELD(ws_max_queue), 1, 65536, "N",
     "received WebSocket messages queued for the app, at most; reading"
     " from the client stops while the queue is full [32]"},
    {"ws-ping-interval", 0, OPT_SECONDS, FIELD(ws_ping_interval), 0,
     MAX_SECONDS, "SECS",
     "ping a WebSocket peer idle for SECS, 0 = never [20]"},
    {"ws-ping-timeout", 0, OPT_SECONDS, FIELD(ws_ping_timeout), 0, MAX_SECONDS,
     "SECS",
     "close a WebSocket (1011) whose peer does not answer a ping within"
     " SECS, 0 = wait forever [20]"},
    {"ws-per-message-deflate", 0, OPT_SPECIAL, NOFIELD, 0, 0, "BOOL",
     "accept permessage-deflate compression on WebSockets: true or"
     " false [true]"},
    /* behind a proxy */
    {"forwarded-allow-ips", 0, OPT_SPECIAL, NOFIELD, 0, 0, "IPS",
     "addresses and CIDR blocks (comma-separated; '*' for all, 'unix' for"
     " unix: socket peers) whose X-Forwarded-For, -Proto, -Host, -Port"
     " and Forwarded headers are trusted; environment FORWARDED_ALLOW_IPS"
     " [127.0.0.1,::1]"},
    {"proxy-protocol", 0, OPT_SWITCH, FIELD(proxy_protocol), 0, 0, NULL,
     "every connection must begin with a PROXY protocol header (v1 or v2)"
     " [off]"},
    {"proxy-allow-from", 0, OPT_SPECIAL, NOFIELD, 0, 0, "IPS",
     "peers allowed to send a PROXY protocol header (same syntax as"
     " --forwarded-allow-ips) [127.0.0.1,::1]"},
    /* TLS (gunicorn's names; worker/loop/tls.c) */
    {"certfile", 0, OPT_SPECIAL, NOFIELD, 0, 0, "FILE",
     "serve TLS on every --bind with the certificate chain in FILE (PEM);"
     " needs --keyfile; repeatable: a client's server name (SNI) picks the"
     " certificate that names it, the first when none does"
     " [none: plain HTTP]"},
    {"keyfile", 0, OPT_SPECIAL, NOFIELD, 0, 0, "FILE",
     "the private key of --certfile (PEM, not encrypted); repeated, the"
     " Nth is the Nth --certfile's [none]"},
    {"ca-certs", 0, OPT_STRING, FIELD(ca_certs), 0, 0, "FILE",
     "CA certificates (PEM) that client certificates are checked against"
     " [none]"},
    {"cert-reqs", 0, OPT_SPECIAL, NOFIELD, 0, 0, "MODE",
     "client certificates: none (0), optional (1) or required (2);"
     " optional and required need --ca-certs [none]"},
    {"ciphers", 0, OPT_STRING, FIELD(ciphers), 0, 0, "LIST",
     "TLS 1.2 cipher suites, in OpenSSL's syntax; TLS 1.3 keeps OpenSSL's"
     " suites [Mozilla's intermediate list, its ECDHE suites]"},
    {"ssl-min-version", 0, OPT_SPECIAL, NOFIELD, 0, 0, "VERSION",
     "oldest TLS version accepted: TLSv1.2 or TLSv1.3 [TLSv1.2]"},
    {"ssl-ticket-rotation", 0, OPT_SECONDS, FIELD(ticket_rotation), 0,
     MAX_SECONDS, "SECS",
     "TLS session tickets, which resume a session on any worker: a new"
     " key every SECS, the one before still accepted; 0 = no tickets"
     " [3600]"},
    /* HTTP/2 (gunicorn's names; worker/loop/h2.c) */
    {"http-protocols", 0, OPT_SPECIAL, NOFIELD, 0, 0, "LIST",
     "the protocols a connection may speak, comma-separated, the preferred"
     " first: h1 (HTTP/1.1) and h2 (HTTP/2, chosen by ALPN on TLS"
     " listeners; on plain ones only with --http2-cleartext) [h1]"},
    {"http2-cleartext", 0, OPT_SPECIAL, NOFIELD, 0, 0, "MODE",
     "HTTP/2 without TLS: off, or prior-knowledge (a connection to a plain"
     " listener that opens with HTTP/2's preface is served as HTTP/2);"
     " needs h2 in --http-protocols; for a trusted proxy in front, never"
     " for the internet [off]"},
    {"http2-max-concurrent-streams", 0, OPT_INT,
     FIELD(http2_max_concurrent_streams), 1, MAX_H2_SETTING, "N",
     "HTTP/2 requests open at once on one connection, at most [100]"},
    {"http2-initial-window-size", 0, OPT_INT, FIELD(http2_initial_window_size),
     1, MAX_H2_SETTING, "BYTES",
     "HTTP/2 flow control: the bytes of a request body a client may send"
     " on a stream before sluice asks for more; up to 2147483647 [65535]"},
    {"http2-max-frame-size", 0, OPT_INT, FIELD(http2_max_frame_size),
     MIN_H2_FRAME, MAX_H2_FRAME, "BYTES",
     "the largest HTTP/2 frame payload a client may send, 16384 to"
     " 16777215 (RFC 9113) [16384]"},
    {"http2-max-header-list-size", 0, OPT_INT,
     FIELD(http2_max_header_list_size), 0, MAX_H2_SETTING, "BYTES",
     "the largest header list of an HTTP/2 request, decoded (each field's"
     " name and value and 32 bytes); 0 = 2147483647 [65536]"},
    {"access-logfile", 0, OPT_STRING, FIELD(access_logfile), 0, 0, "FILE",
     "write the access log to FILE, '-' for stdout [none: no access log]"},
    {"access-logformat", 0, OPT_STRING, FIELD(access_logformat), 0, 0, "FMT",
     "access log format, gunicorn's %(atom)s syntax, or 'json' [gunicorn's"
     " default: %(h)s %(l)s %(u)s %(t)s \"%(r)s\" %(s)s %(b)s \"%(f)s\""
     " \"%(a)s\"]"},
    {"access-log-json", 0, OPT_SWITCH, FIELD(access_log_json), 0, 0, NULL,
     "write the access log as one JSON object per line, with the fields"
     " of --access-logformat [off]"},
    {"health-path", 0, OPT_STRING, FIELD(health_path), 0, 0, "PATH",
     "answer GET or HEAD of PATH without calling the app [none]"},
    {"static", 0, OPT_SPECIAL, NOFIELD, 0, 0, "PREFIX=DIR",
     "answer GET and HEAD of paths under PREFIX with the files of DIR,"
     " from the worker's loop, without calling the app (relative DIR: to"
     " --chdir); repeatable [none]"},
    {"static-cache-control", 0, OPT_SPECIAL, NOFIELD, 0, 0, "PREFIX=VALUE",
     "the Cache-Control header of the --static map of PREFIX, e.g."
     " '/static/=public, max-age=31536000, immutable'; repeatable [none]"},
    {"pid", 'p', OPT_STRING, FIELD(pidfile), 0, 0, "FILE",
     "write the supervisor's pid to FILE [none]"},
    {"backlog", 0, OPT_INT, FIELD(backlog), 1, MAX_BACKLOG, "N",
     "listen(2) backlog [2048]"},
    {"umask", 'm', OPT_OCTAL, FIELD(umask), 0, 0777, "MODE",
     "umask (octal) for unix: sockets [unchanged]"},
    {"name", 'n', OPT_STRING, FIELD(proc_name), 0, 0, "NAME",
     "process name in ps: 'NAME: worker 3 [app]' [sluice]"},
    /* configuration file and identity (common/settings.c) */
    {"config", 'c', OPT_STRING, FIELD(config), 0, 0, "FILE",
     "read settings from FILE ('name = value' lines); SLUICE_CMD_ARGS and"
     " the command line override it; re-read on HUP [none]"},
    {"check-config", 0, OPT_SWITCH, FIELD(check_config), 0, 0, NULL,
     "check the settings and the application's name, bind and import"
     " nothing, exit 0 (valid) or 2"},
    {"print-config", 0, OPT_SWITCH, FIELD(print_config), 0, 0, NULL,
     "print the effective settings in the configuration file's format and"
     " exit"},
    {"user", 'u', OPT_STRING, FIELD(user), 0, 0, "USER",
     "run the workers as USER (name or uid); the supervisor must be root"
     " [unchanged]"},
    {"group", 'g', OPT_STRING, FIELD(group), 0, 0, "GROUP",
     "run the workers as GROUP (name or gid) [USER's group]"},
    /* --reload and its file list (development) */
    {"reload", 0, OPT_SWITCH, FIELD(reload), 0, 0, NULL,
     "restart the workers (rolling, as HUP) when a Python file of the app"
     " changes; for development [off]"},
    {"reload-extra-file", 0, OPT_SPECIAL, NOFIELD, 0, 0, "FILE",
     "with --reload, also restart when FILE changes; repeatable [none]"},
    {"version", 'v', OPT_FLAG, NOFIELD, 0, 0, NULL,
     "print the version and exit"},
    {"help", 'h', OPT_FLAG, NOFIELD, 0, 0, NULL, "print this help and exit"},
};

#define NOPTS (sizeof(sl_options_defs) / sizeof(sl_options_defs[0]))

const size_t sl_options_ndefs = NOPTS;

/* Mozilla's "intermediate" configuration (server-side TLS guidelines,
 * version 5.7), its ECDHE suites: forward secrecy with no DH parameters
 * to manage; AES-GCM and ChaCha20 only. */
static const char tls_ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

static void set_defaults(sl_options_t *o);
static int check_tls(const sl_options_t *o);
static int check_http2(sl_options_t *o);
static void build_getopt_tables(struct option *longopts, char *shortopts);
static void report_getopt_error(int c, char **argv);
static int finish(sl_options_t *o, int argc, char **argv);
static const opt_def_t *find_def(int c);
static int check_app(sl_options_t *o, const char *app);
static int check_access_logformat(const sl_options_t *o);
static bool is_action(const opt_def_t *d);
static const opt_def_t *find_name(const char *name);

int sl_options_parse(sl_options_t *o, int argc, char **argv)
{
    struct option longopts[NOPTS + 1];
    char shortopts[2 * NOPTS + 2];

    set_defaults(o);
    build_getopt_tables(longopts, shortopts);

    optind = 0; /* glibc: start afresh, even if called before */
    opterr = 0;
    for (;;) {
        int c = getopt_long(argc, argv, shortopts, longopts, NULL);
        if (c == -1) {
            break;
        }
        const opt_def_t *d = c == '?' || c == ':' ? NULL : find_def(c);
        if (d == NULL) {
            report_getopt_error(c, argv);
            return -1;
        }
        if (d->kind == OPT_FLAG) {
            if (d->short_name == 'h') {
                sl_options_print_help();
            } else {
                printf("sluice %s\n", PACKAGE_VERSION);
            }
            fflush(stdout);
            return 1;
        }
        if (sl_options_apply(o, d, optarg) == -1) {
            return -1;
        }
    }
    return finish(o, argc, argv);
}

/* getopt_long's tables from sl_options_defs: a long option returns its row's
 * index + 256, a short one its letter. */
static void build_getopt_tables(struct option *longopts, char *shortopts)
{
    size_t ns = 0;

    shortopts[ns++] = ':'; /* report a missing argument as ':' */
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_def_t *d = &sl_options_defs[i];
        bool has_arg = d->kind != OPT_FLAG && d->kind != OPT_SWITCH;
        longopts[i] = (struct option){d->name, has_arg, NULL, (int)i + 256};
        if (d->short_name) {
            shortopts[ns++] = (char)d->short_name;
            if (has_arg) {
                shortopts[ns++] = ':';
            }
        }
    }
    shortopts[ns] = '\0';
    longopts[NOPTS] = (struct option){NULL, 0, NULL, 0};
}

/* getopt_long returned C: '?' (unknown option, or an argument given to a
 * flag), ':' (missing argument) or something no row claims. */
static void report_getopt_error(int c, char **argv)
{
    char what[64];

    if (c == ':') {
        sl_options_describe(find_def(optopt), what, sizeof(what));
        sl_log_usage("argument %s: expected one argument", what);
    } else if (c == '?' && optopt != 0 && optopt < 256) {
        sl_log_usage("unrecognized option '-%c'", optopt);
    } else {
        sl_log_usage("unrecognized option '%s'", argv[optind - 1]);
    }
}

/* After the options: the one positional argument, then what depends on
 * more than one option. */
static int finish(sl_options_t *o, int argc, char **argv)
{
    if (optind >= argc) {
        sl_log_usage("missing the application, MODULE:CALLABLE"
                     " (see sluice --help)");
        return -1;
    }
    if (optind + 1 < argc) {
        sl_log_usage("unexpected argument '%s': only one MODULE:CALLABLE"
                     " is served",
                     argv[optind + 1]);
        return -1;
    }
    if (check_app(o, argv[optind]) == -1) {
        return -1;
    }
    o->app = argv[optind];

    if (o->nbinds == 0 && o->ninsecure_binds == 0) {
        o->binds[o->nbinds++] = "127.0.0.1:8000";
    }
    if (check_tls(o) == -1 || check_http2(o) == -1) {
        return -1;
    }
    /* 0 means "the largest allowed", as --help says */
    if (o->limit_request_line == 0) {
        o->limit_request_line = 8190;
    }
    if (o->limit_request_fields == 0) {
        o->limit_request_fields = 32768;
    }

    /* as gunicorn and uvicorn: the environment's list unless the command
     * line gives one */
    const char *fwd = getenv("FORWARDED_ALLOW_IPS");
    if (!o->forwarded_allow_set && fwd != NULL) {
        o->forwarded_allow_text = fwd;
        if (sl_options_parse_allow(&o->forwarded_allow, "forwarded-allow-ips",
                                   fwd) < 0) {
            return -1;
        }
    }
    if (o->nreload_extra_files > 0 && !o->reload) {
        sl_log_usage("argument --reload-extra-file: only means something"
                     " with --reload");
        return -1;
    }
    if (check_access_logformat(o) == -1 || sl_options_check_statics(o) < 0) {
        return -1;
    }

    const char *inl = getenv("SLUICE_INLINE");
    o->inline_mode = inl != NULL && strcmp(inl, "1") == 0;
    if (o->inline_mode && o->threads > 1) {
        sl_log_usage("argument --threads: %d threads, but inline mode runs"
                     " one lane (SLUICE_INLINE=1)",
                     o->threads);
        return -1;
    }
    return 0;
}

static void set_defaults(sl_options_t *o)
{
    *o = (sl_options_t){
        .app = NULL,
        .interface = SL_IFACE_AUTO,
        .loop = SL_LOOP_AUTO,
        .lifespan = SL_LIFESPAN_AUTO,
        .root_path = "",
        .backlog = 2048,
        .umask = -1,
        .workers = 1,
        .threads = 1,
        .worker_connections = 1000,
        .limit_request_line = 4094,
        .limit_request_fields = 100,
        .limit_request_field_size = 8190,
        .limit_request_body = 0,
        .header_timeout = 30,
        .keep_alive = 5,
        .send_timeout = 10,
        .timeout = 30,
        .graceful_timeout = 30,
        .boot_timeout = 30,
        .shutdown_delay = 0,
        .max_requests = 0,
        .max_requests_jitter = 0,
        .max_worker_memory = 0,
        .reload_surge = 1,
        .ws_max_size = 16777216,
        .ws_max_queue = 32,
        .ws_ping_interval = 20,
        .ws_ping_timeout = 20,
        .ws_per_message_deflate = true,
        .error_logfile = NULL, /* stderr */
        .log_level = SL_LOG_INFO,
        .cert_reqs = SL_CERT_NONE,
        .ciphers = tls_ciphers,
        .tls_min = SL_TLS_1_2,
        .ticket_rotation = 3600,
        .http_protocols = {SL_PROTO_H1},
        .nhttp_protocols = 1,
        .http2_max_concurrent_streams = 100,
        .http2_initial_window_size = 65535,
        .http2_max_frame_size = 16384,
        .http2_max_header_list_size = 65536,
    };
    o->forwarded_allow_text = o->proxy_allow_text = "127.0.0.1,::1";
    (void)sl_allow_parse(&o->forwarded_allow, "127.0.0.1,::1", NULL, 0);
    (void)sl_allow_parse(&o->proxy_allow, "127.0.0.1,::1", NULL, 0);
}

static const opt_def_t *find_def(int c)
{
    if (c >= 256 && c < 256 + (int)NOPTS) {
        return &sl_options_defs[c - 256];
    }
    for (size_t i = 0; i < NOPTS; i++) {
        if (c != 0 && sl_options_defs[i].short_name == c) {
            return &sl_options_defs[i];
        }
    }
    return NULL;
}

/* The TLS settings that need one another: a certificate and its key go
 * together, the rest mean something only with them (a value other than
 * the default: --print-config writes the defaults, and its output must
 * read back), and a client certificate cannot be checked without CAs.
 * What needs the files (readable, a key that matches) is
 * worker/loop/tlsctx.c's, at start. */
static int check_tls(const sl_options_t *o)
{
    const char *lone = o->ca_certs != NULL                    ? "ca-certs"
                       : o->cert_reqs != SL_CERT_NONE         ? "cert-reqs"
                       : strcmp(o->ciphers, tls_ciphers) != 0 ? "ciphers"
                       : o->tls_min != SL_TLS_1_2   ? "ssl-min-version"
                       : o->ticket_rotation != 3600 ? "ssl-ticket-rotation"
                                                    : NULL;

    if ((o->certfile == NULL) != (o->keyfile == NULL)) {
        sl_log_usage("argument --%s: TLS needs both --certfile and"
                     " --keyfile",
                     o->certfile == NULL ? "keyfile" : "certfile");
        return -1;
    }
    if (o->ncertfiles != o->nkeyfiles) {
        sl_log_usage("argument --keyfile: each --certfile needs its own"
                     " --keyfile, in the same order (%d --certfile, %d"
                     " --keyfile)",
                     o->ncertfiles, o->nkeyfiles);
        return -1;
    }
    if (o->certfile == NULL && lone != NULL) {
        sl_log_usage("argument --%s: only means something with --certfile"
                     " and --keyfile",
                     lone);
        return -1;
    }
    if (o->cert_reqs != SL_CERT_NONE && o->ca_certs == NULL) {
        sl_log_usage("argument --cert-reqs: %s needs --ca-certs, the CAs"
                     " client certificates are checked against",
                     o->cert_reqs == SL_CERT_REQUIRED ? "required"
                                                      : "optional");
        return -1;
    }
    return 0;
}

/* The HTTP/2 settings that need one another: prior knowledge serves
 * HTTP/2, so h2 must be allowed. As in gunicorn, h2 without TLS or prior
 * knowledge is no error (ALPN offers it wherever there is TLS), and the
 * --http2-* limits without h2 are none either: --print-config writes them
 * always, and its output must read back. */
static int check_http2(sl_options_t *o)
{
    bool h2 = false;

    for (int i = 0; i < o->nhttp_protocols; i++) {
        h2 = h2 || o->http_protocols[i] == SL_PROTO_H2;
    }
    if (o->http2_prior_knowledge && !h2) {
        sl_log_usage("argument --http2-cleartext: prior-knowledge needs h2"
                     " in --http-protocols");
        return -1;
    }
    /* 0 means "the largest allowed", as --help says (gunicorn's 0 is
     * "unlimited") */
    if (o->http2_max_header_list_size == 0) {
        o->http2_max_header_list_size = (int)MAX_H2_SETTING;
    }
    return 0;
}

/* --access-logformat: a format that does not compile is a usage error
 * here, not a worker that fails at start. */
static int check_access_logformat(const sl_options_t *o)
{
    static sl_logfmt_t f; /* 6 KiB: not on the stack */
    char err[256];

    if (sl_logfmt_compile(&f, o->access_logformat, o->access_log_json, err,
                          sizeof(err)) == -1) {
        sl_log_usage("argument --access-logformat: %s", err);
        return -1;
    }
    return 0;
}

static int check_app(sl_options_t *o, const char *app)
{
    const char *colon = strchr(app, ':');
    const char *paren = colon ? strchr(colon, '(') : NULL;

    if (colon == NULL) {
        sl_log_usage("application '%s' must be MODULE:CALLABLE", app);
        return -1;
    }
    if (colon == app) {
        sl_log_usage("application '%s' has no module before ':'", app);
        return -1;
    }
    if (colon[1] == '\0') {
        sl_log_usage("application '%s' has no callable after ':'", app);
        return -1;
    }
    /* gunicorn's MODULE:NAME() is --factory; what it also allows, literal
     * arguments, would be a Python parser here: use a factory of none */
    if (paren != NULL && (paren == colon + 1 || strcmp(paren, "()") != 0)) {
        sl_log_usage("application '%s': a factory is called with no"
                     " arguments (write MODULE:NAME() or MODULE:NAME with"
                     " --factory)",
                     app);
        return -1;
    }
    if (paren != NULL) {
        o->factory = true;
    }
    return 0;
}

/* ---- the configuration file's view of the table (common/settings.c) ---- */

/* --help and --version: they print and exit, they set nothing. */
static bool is_action(const opt_def_t *d)
{
    return strcmp(d->name, "help") == 0 || strcmp(d->name, "version") == 0;
}

/* The row named NAME, '_' read as '-'; NULL when none. */
static const opt_def_t *find_name(const char *name)
{
    for (size_t i = 0; i < NOPTS; i++) {
        const char *a = sl_options_defs[i].name, *b = name;
        while (*a != '\0' && (*a == *b || (*a == '-' && *b == '_'))) {
            a++;
            b++;
        }
        if (*a == '\0' && *b == '\0') {
            return &sl_options_defs[i];
        }
    }
    return NULL;
}

sl_optarg_t sl_options_lookup(const char *name, const char **canon)
{
    const opt_def_t *d = find_name(name);

    if (d == NULL) {
        return SL_OPTARG_UNKNOWN;
    }
    if (canon != NULL) {
        *canon = d->name;
    }
    if (is_action(d) || strcmp(d->name, "config") == 0 ||
        strcmp(d->name, "check-config") == 0 ||
        strcmp(d->name, "print-config") == 0) {
        return SL_OPTARG_ACTION;
    }
    if (d->kind == OPT_SWITCH) {
        return SL_OPTARG_FLAG;
    }
    if (strcmp(d->name, "bind") == 0 || strcmp(d->name, "pythonpath") == 0 ||
        strcmp(d->name, "reload-extra-file") == 0 ||
        strcmp(d->name, "insecure-bind") == 0 ||
        strcmp(d->name, "certfile") == 0 || strcmp(d->name, "keyfile") == 0 ||
        strcmp(d->name, "static") == 0) {
        return SL_OPTARG_LIST;
    }
    if (strcmp(d->name, "static-cache-control") == 0) {
        return SL_OPTARG_LINES;
    }
    return SL_OPTARG_ONE;
}

int sl_options_scan(int argc, char **argv, sl_options_visit_fn visit, void *ctx)
{
    struct option longopts[NOPTS + 1];
    char shortopts[2 * NOPTS + 2];

    build_getopt_tables(longopts, shortopts);
    optind = 0;
    opterr = 0;
    for (;;) {
        int c = getopt_long(argc, argv, shortopts, longopts, NULL);
        if (c == -1) {
            break;
        }
        const opt_def_t *d = c == '?' || c == ':' ? NULL : find_def(c);
        if (d == NULL) {
            report_getopt_error(c, argv);
            return -1;
        }
        bool bare = d->kind == OPT_FLAG || d->kind == OPT_SWITCH;
        if (visit(ctx, d->name, bare ? NULL : optarg) == -1) {
            return -1;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (visit(ctx, NULL, argv[i]) == -1) {
            return -1;
        }
    }
    return 0;
}

int sl_options_check(const char *name, const char *value)
{
    const opt_def_t *d = find_name(name);
    sl_options_t scratch;

    if (d == NULL) {
        sl_log_usage("unrecognized option '--%s'", name);
        return -1;
    }
    if (d->kind == OPT_FLAG || d->kind == OPT_SWITCH) {
        return 0;
    }
    set_defaults(&scratch);
    int rc = sl_options_apply(&scratch, d, value);
    sl_options_release(&scratch); /* a check keeps nothing */
    return rc;
}

void sl_options_release(sl_options_t *o)
{
    if (o == NULL) {
        return;
    }
    for (int i = 0; i < o->npythonpath; i++) {
        free((char *)o->pythonpath[i]);
    }
    o->npythonpath = 0;
}
