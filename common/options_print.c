/* options_print.c - the option table of options.c written out: --help,
 * --print-config's "name = value" lines, and the settings reference in
 * Markdown (docs/settings.md, printed by tools/settings-md).
 *
 * Both walk the table's rows in order, so a row added there shows up in
 * --help and in the printed settings without a line here. A row whose
 * offset alone cannot say how to print its field (OPT_SPECIAL) has a case
 * in print_special(); one without a case prints its last "--NAME=VALUE"
 * in the argument vector. What --print-config writes must read back:
 * common/conffile.c parses the same lines to the same settings, so a value
 * its parser would misread is double-quoted.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/options.h"
#include "common/options_internal.h"

#define HELP_INDENT 32 /* column where --help's descriptions start */

/* The environment variables --help lists after the options (and the
 * settings reference too). */
static const struct {
    const char *name;
    const char *help;
} env_defs[] = {
    {"SLUICE_INLINE=1",
     "run the Python side on the loop thread (one lane, so --threads 1)"},
};

static void print_wrapped(const char *text);
static void print_setting(const sl_options_t *o, const opt_def_t *d, int argc,
                          char **argv, FILE *out);
static void flag_text(const opt_def_t *d, bool pad, char *buf, size_t size);
static void print_special(const sl_options_t *o, const opt_def_t *d, int argc,
                          char **argv, FILE *out);
static void print_value(const opt_def_t *d, const char *value, FILE *out);
static void print_list(const opt_def_t *d, const char *const *list, int n,
                       FILE *out);
static size_t help_default(const char *help);
static void md_text(const char *text, size_t n, bool code, FILE *out);
static int md_file_cell(const sl_options_t *o, const opt_def_t *d, int argc,
                        char **argv, FILE *out);

/* TEXT from column HELP_INDENT, wrapped at 79 columns. */
static void print_wrapped(const char *text)
{
    int col = HELP_INDENT;
    const char *p = text;

    while (*p != '\0') {
        int n = (int)strcspn(p, " ");
        if (col > HELP_INDENT && col + 1 + n > 79) {
            printf("\n%*s", HELP_INDENT, "");
            col = HELP_INDENT;
        } else if (col > HELP_INDENT) {
            putchar(' ');
            col++;
        }
        printf("%.*s", n, p);
        col += n;
        p += n;
        p += strspn(p, " ");
    }
    putchar('\n');
}

/* "-w, --workers N" (PAD: "    --threads N" when there is no short name)
 * into BUF. */
static void flag_text(const opt_def_t *d, bool pad, char *buf, size_t size)
{
    const char *sp = d->metavar ? " " : "";
    const char *mv = d->metavar ? d->metavar : "";

    if (d->short_name) {
        snprintf(buf, size, "-%c, --%s%s%s", d->short_name, d->name, sp, mv);
    } else {
        snprintf(buf, size, "%s--%s%s%s", pad ? "    " : "", d->name, sp, mv);
    }
}

void sl_options_print_help(void)
{
    printf("usage: sluice [OPTIONS] MODULE:CALLABLE\n"
           "\n"
           "Serve the WSGI or ASGI application CALLABLE from Python module"
           " MODULE\nover HTTP/1.1, and HTTP/2 with --http-protocols h2,h1."
           " Defaults are in\nbrackets.\n"
           "\n"
           "options:\n");
    for (size_t i = 0; i < sl_options_ndefs; i++) {
        const opt_def_t *d = &sl_options_defs[i];
        char flag[64];
        flag_text(d, true, flag, sizeof(flag));
        if (strlen(flag) <= HELP_INDENT - 4) {
            printf("  %-*s  ", HELP_INDENT - 4, flag);
        } else {
            printf("  %s\n%*s", flag, HELP_INDENT, "");
        }
        print_wrapped(d->help);
    }
    printf("\n"
           "environment:\n");
    for (size_t i = 0; i < sizeof(env_defs) / sizeof(env_defs[0]); i++) {
        printf("  %-*s", HELP_INDENT - 2, env_defs[i].name);
        print_wrapped(env_defs[i].help);
    }
}

/* ---- --print-config: the configuration file's view of the table ---- */

void sl_options_print(const sl_options_t *o, int argc, char **argv, FILE *out)
{
    for (size_t i = 0; i < sl_options_ndefs; i++) {
        const opt_def_t *d = &sl_options_defs[i];
        if (sl_options_lookup(d->name, NULL) == SL_OPTARG_ACTION ||
            strcmp(d->name, "log-file") == 0) {
            continue; /* not settings, or another name for one */
        }
        print_setting(o, d, argc, argv, out);
    }
}

static void print_setting(const sl_options_t *o, const opt_def_t *d, int argc,
                          char **argv, FILE *out)
{
    const void *field = (const char *)o + d->offset;
    char num[64];

    switch (d->kind) {
    case OPT_INT:
        snprintf(num, sizeof(num), "%d", *(const int *)field);
        break;
    case OPT_LLONG:
        snprintf(num, sizeof(num), "%lld", *(const long long *)field);
        break;
    case OPT_SECONDS:
        snprintf(num, sizeof(num), "%.15g", *(const double *)field);
        break;
    case OPT_OCTAL:
        if (*(const int *)field < 0) {
            print_value(d, NULL, out);
            return;
        }
        snprintf(num, sizeof(num), "0%03o", (unsigned)*(const int *)field);
        break;
    case OPT_STRING: {
        const char *v = *(const char *const *)field;
        print_value(d, v != NULL && v[0] != '\0' ? v : NULL, out);
        return;
    }
    case OPT_SWITCH:
        print_value(d, *(const bool *)field ? "true" : "false", out);
        return;
    default:
        print_special(o, d, argc, argv, out);
        return;
    }
    print_value(d, num, out);
}

static void print_special(const sl_options_t *o, const opt_def_t *d, int argc,
                          char **argv, FILE *out)
{
    static const char *const ifaces[] = {"auto", "wsgi", "asgi"};
    static const char *const loops[] = {"auto", "asyncio", "uvloop"};
    static const char *const lifespans[] = {"auto", "on", "off"};
    static const char *const reqs[] = {"none", "optional", "required"};
    static const char *const levels[] = {"debug", "info", "warning", "error",
                                         "critical"};
    const char *n = d->name;

    if (strcmp(n, "bind") == 0) {
        print_list(d, o->binds, o->nbinds, out);
    } else if (strcmp(n, "insecure-bind") == 0) {
        print_list(d, o->insecure_binds, o->ninsecure_binds, out);
    } else if (strcmp(n, "certfile") == 0) {
        print_list(d, o->certfiles, o->ncertfiles, out);
    } else if (strcmp(n, "keyfile") == 0) {
        print_list(d, o->keyfiles, o->nkeyfiles, out);
    } else if (strcmp(n, "cert-reqs") == 0) {
        print_value(d, reqs[o->cert_reqs], out);
    } else if (strcmp(n, "ssl-min-version") == 0) {
        print_value(d, o->tls_min == SL_TLS_1_3 ? "TLSv1.3" : "TLSv1.2", out);
    } else if (strcmp(n, "http-protocols") == 0) {
        char list[16] = "";
        for (int i = 0; i < o->nhttp_protocols; i++) {
            strcat(list, i > 0 ? "," : "");
            strcat(list, o->http_protocols[i] == SL_PROTO_H2 ? "h2" : "h1");
        }
        print_value(d, list, out);
    } else if (strcmp(n, "http2-cleartext") == 0) {
        print_value(d, o->http2_prior_knowledge ? "prior-knowledge" : "off",
                    out);
    } else if (strcmp(n, "pythonpath") == 0) {
        print_list(d, o->pythonpath, o->npythonpath, out);
    } else if (strcmp(n, "static") == 0) {
        print_list(d, o->statics, o->nstatics, out);
    } else if (strcmp(n, "static-cache-control") == 0) {
        print_list(d, o->static_caches, o->nstatic_caches, out);
    } else if (strcmp(n, "reload-extra-file") == 0) {
        print_list(d, o->reload_extra_files, o->nreload_extra_files, out);
    } else if (strcmp(n, "forwarded-allow-ips") == 0) {
        print_value(d, o->forwarded_allow_text, out);
    } else if (strcmp(n, "proxy-allow-from") == 0) {
        print_value(d, o->proxy_allow_text, out);
    } else if (strcmp(n, "interface") == 0) {
        print_value(d, ifaces[o->interface], out);
    } else if (strcmp(n, "loop") == 0) {
        print_value(d, loops[o->loop], out);
    } else if (strcmp(n, "lifespan") == 0) {
        print_value(d, lifespans[o->lifespan], out);
    } else if (strcmp(n, "ws-per-message-deflate") == 0) {
        print_value(d, o->ws_per_message_deflate ? "true" : "false", out);
    } else if (strcmp(n, "log-level") == 0) {
        print_value(d, levels[o->log_level], out);
    } else if (strcmp(n, "error-logfile") == 0) {
        print_value(d, o->error_logfile ? o->error_logfile : "-", out);
    } else {
        /* A row added without a printer here: the last value given, as
         * given; else it is left unset. */
        const char *given = NULL;
        size_t len = strlen(n);
        for (int i = 1; i < argc; i++) {
            if (strncmp(argv[i], "--", 2) == 0 &&
                strncmp(argv[i] + 2, n, len) == 0 && argv[i][2 + len] == '=') {
                given = argv[i] + 3 + len;
            }
        }
        print_value(d, given, out);
    }
}

/* A list setting: one line an item, a commented line when empty. */
static void print_list(const opt_def_t *d, const char *const *list, int n,
                       FILE *out)
{
    for (int i = 0; i < n; i++) {
        print_value(d, list[i], out);
    }
    if (n == 0) {
        print_value(d, NULL, out);
    }
}

/* "name = value", the name with '_' as gunicorn's settings spell it, the
 * value double-quoted when the file's parser would otherwise misread it;
 * a commented-out "# name =" when VALUE is NULL (not set). */
static void print_value(const opt_def_t *d, const char *value, FILE *out)
{
    char name[64];

    snprintf(name, sizeof(name), "%s", d->name);
    for (char *p = name; *p != '\0'; p++) {
        *p = *p == '-' ? '_' : *p;
    }
    if (value == NULL) {
        fprintf(out, "# %s =\n", name);
        return;
    }
    size_t len = strlen(value);
    bool quote = len == 0 || strpbrk(value, "#\"'\\,") != NULL ||
                 value[0] == ' ' || value[0] == '\t' || value[len - 1] == ' ' ||
                 value[len - 1] == '\t';
    if (!quote) {
        fprintf(out, "%s = %s\n", name, value);
        return;
    }
    fprintf(out, "%s = \"", name);
    for (const char *p = value; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\') {
            fputc('\\', out);
        }
        fputc(*p, out);
    }
    fputs("\"\n", out);
}

/* ---- the settings reference (docs/settings.md) ---- */

int sl_options_print_reference(const sl_options_t *o, int argc, char **argv,
                               FILE *out)
{
    fputs("# Settings\n"
          "\n"
          "<!-- Generated by tools/settings-md from the option table in"
          " common/options.c;\n"
          "     do not edit: \"make settings-md\" writes it again. -->\n"
          "\n"
          "Every option of `sluice --help`, in its order, from the same"
          " table as `--help`\n"
          "and `--print-config`. A setting can be given on the command line,"
          " in a\n"
          "configuration file (`-c FILE`, one `name = value` a line) or in"
          " `SLUICE_CMD_ARGS`;\n"
          "[configuration.md](configuration.md) says how they combine. The"
          " file column\n"
          "is the line `--print-config` writes when the setting is left at"
          " its default\n"
          "(`# name =` when it has no value).\n"
          "\n"
          "| option | default | in a configuration file | meaning |\n"
          "|---|---|---|---|\n",
          out);
    for (size_t i = 0; i < sl_options_ndefs; i++) {
        const opt_def_t *d = &sl_options_defs[i];
        size_t n = help_default(d->help);
        char flag[64];

        flag_text(d, false, flag, sizeof(flag));
        fputs("| `", out);
        md_text(flag, strlen(flag), true, out);
        fputs("` | ", out);
        if (n < strlen(d->help)) { /* the default, without its brackets */
            md_text(d->help + n + 2, strlen(d->help) - n - 3, false, out);
        }
        fputs(" | ", out);
        if (md_file_cell(o, d, argc, argv, out) < 0) {
            return -1;
        }
        fputs(" | ", out);
        md_text(d->help, n, false, out);
        fputs(" |\n", out);
    }
    fputs("\n"
          "## Environment\n"
          "\n"
          "| variable | meaning |\n"
          "|---|---|\n",
          out);
    for (size_t i = 0; i < sizeof(env_defs) / sizeof(env_defs[0]); i++) {
        fprintf(out, "| `%s` | ", env_defs[i].name);
        md_text(env_defs[i].help, strlen(env_defs[i].help), false, out);
        fputs(" |\n", out);
    }
    return 0;
}

/* The length of HELP without its trailing " [default]", or all of it when
 * it has none. */
static size_t help_default(const char *help)
{
    size_t len = strlen(help);
    const char *open = strrchr(help, '[');

    if (len == 0 || help[len - 1] != ']' || open == NULL || open == help ||
        open[-1] != ' ') {
        return len;
    }
    return (size_t)(open - 1 - help);
}

/* N bytes of TEXT for a Markdown table cell: '|' escaped, and outside a
 * code span (CODE false) also what would start emphasis or HTML. */
static void md_text(const char *text, size_t n, bool code, FILE *out)
{
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '|' ||
            (!code && text[i] != '\0' && strchr("*<\\", text[i]) != NULL)) {
            fputc('\\', out);
        }
        fputc(text[i], out);
    }
}

/* The configuration file's view of row D: the line(s) --print-config
 * writes at the default, or why the file cannot hold it. */
static int md_file_cell(const sl_options_t *o, const opt_def_t *d, int argc,
                        char **argv, FILE *out)
{
    const char *canon = NULL;
    sl_optarg_t arg = sl_options_lookup(d->name, &canon);

    if (arg == SL_OPTARG_ACTION) {
        fputs("command line only", out);
        return 0;
    }
    if (strcmp(d->name, "log-file") == 0) {
        fputs("`log_file`, another name for `error_logfile`", out);
        return 0;
    }
    char *lines = NULL;
    size_t size = 0;
    FILE *mem = open_memstream(&lines, &size);
    if (mem == NULL) {
        sl_log_errno(SL_LOG_ERROR, "open_memstream() failed for --%s", d->name);
        return -1;
    }
    print_setting(o, d, argc, argv, mem);
    if (fclose(mem) != 0) {
        sl_log_errno(SL_LOG_ERROR, "fclose() failed for --%s", d->name);
        free(lines);
        return -1;
    }
    const char *sep = "";
    for (char *line = strtok(lines, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        fprintf(out, "%s`", sep);
        md_text(line, strlen(line), true, out);
        fputc('`', out);
        sep = "<br>";
    }
    free(lines);
    if (arg == SL_OPTARG_LIST) {
        fputs(" (a list: repeat the line, or separate values by commas)", out);
    } else if (arg == SL_OPTARG_LINES) {
        fputs(" (a list: repeat the line)", out);
    } else if (arg == SL_OPTARG_FLAG) {
        fputs(" (`true` or `false`)", out);
    }
    return 0;
}
