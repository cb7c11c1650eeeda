/* conffile.c - configuration text into argv words (see conffile.h).
 *
 * The file's grammar is one setting per line, nothing spanning lines, so
 * the parser is a loop over lines and every error can name its line. A
 * line is judged on its shape and on its name (the option table says what
 * a name takes: common/options.c, sl_options_lookup()); its value is judged
 * later by the option parser itself, so that "workers = x" and "-w x" fail
 * with the same words.
 */
#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/conffile.h"
#include "common/options.h"

#define NAME_MAX_LEN 64

typedef struct {
    const char *file;
    int line;
    char *err;
    size_t size;
} where_t;

static int parse_line(sl_conffile_t *c, const char *p, const char *end,
                      where_t *w);
static int fail(where_t *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *skip_blanks(const char *p, const char *end);
static int read_value(const char *p, const char *end, char *out, bool *quoted,
                      where_t *w);
static int add_setting(sl_conffile_t *c, const char *name, char *value,
                       bool quoted, where_t *w);
static int add_list(sl_conffile_t *c, const char *canon, char *value,
                    where_t *w);
static int add_word(sl_conffile_t *c, const char *canon, const char *value,
                    where_t *w);
static int bool_word(const char *v);
static bool is_name_char(char ch);

void sl_conffile_init(sl_conffile_t *c)
{
    *c = (sl_conffile_t){0};
}

void sl_conffile_free(sl_conffile_t *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->words[i]);
    }
    free(c->words);
    free(c->lines);
    sl_conffile_init(c);
}

int sl_conffile_add(sl_conffile_t *c, const char *word, int line)
{
    if (c->n + 2 > c->cap) {
        int cap = c->cap ? c->cap * 2 : 16;
        char **words = realloc(c->words, (size_t)cap * sizeof(*words));
        if (words == NULL) {
            return -1;
        }
        c->words = words;
        int *lines = realloc(c->lines, (size_t)cap * sizeof(*lines));
        if (lines == NULL) {
            return -1;
        }
        c->lines = lines;
        c->cap = cap;
    }
    char *copy = strdup(word);
    if (copy == NULL) {
        return -1;
    }
    c->lines[c->n] = line;
    c->words[c->n++] = copy;
    c->words[c->n] = NULL;
    return 0;
}

int sl_conffile_parse(sl_conffile_t *c, const char *text, size_t len,
                      const char *file, char *err, size_t size)
{
    where_t w = {file, 0, err, size};
    const char *end = text + len;

    for (const char *p = text; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        w.line++;
        if (memchr(p, '\0', (size_t)(eol - p)) != NULL) {
            return fail(&w, "a NUL byte: not a text file");
        }
        if (eol > p && eol[-1] == '\r') { /* CRLF */
            eol--;
        }
        if (parse_line(c, p, eol, &w) == -1) {
            return -1;
        }
        p = nl ? nl + 1 : end;
    }
    return 0;
}

/* One line, P..END (without its newline). */
static int parse_line(sl_conffile_t *c, const char *p, const char *end,
                      where_t *w)
{
    char name[NAME_MAX_LEN];

    p = skip_blanks(p, end);
    if (p == end || *p == '#') {
        return 0;
    }
    size_t n = 0;
    while (p + n < end && is_name_char(p[n])) {
        n++;
    }
    if (n == 0) {
        return fail(w, "expected 'name = value', not '%.*s'",
                    (int)(end - p > 40 ? 40 : end - p), p);
    }
    if (n >= sizeof(name)) {
        return fail(w, "unknown setting '%.*s...'", 40, p);
    }
    memcpy(name, p, n);
    name[n] = '\0';
    p = skip_blanks(p + n, end);
    if (p == end || *p != '=') {
        return fail(w, "expected '=' after '%s'", name);
    }
    p = skip_blanks(p + 1, end);

    char *value = malloc((size_t)(end - p) + 1);
    bool quoted = false;
    if (value == NULL) {
        return fail(w, "out of memory");
    }
    int rc = read_value(p, end, value, &quoted, w);
    if (rc == 0) {
        rc = add_setting(c, name, value, quoted, w);
    }
    free(value);
    return rc;
}

/* The value at P..END (blanks before it skipped) into OUT, unquoted. */
static int read_value(const char *p, const char *end, char *out, bool *quoted,
                      where_t *w)
{
    size_t n = 0;

    if (p < end && (*p == '"' || *p == '\'')) {
        char q = *p++;
        for (; p < end && *p != q; p++) {
            if (q == '"' && *p == '\\' && p + 1 < end &&
                (p[1] == '"' || p[1] == '\\')) {
                p++;
            }
            out[n++] = *p;
        }
        if (p == end) {
            return fail(w, "unterminated %s-quoted value",
                        q == '"' ? "double" : "single");
        }
        p = skip_blanks(p + 1, end);
        if (p < end && *p != '#') {
            return fail(w, "unexpected '%.*s' after the quoted value",
                        (int)(end - p > 40 ? 40 : end - p), p);
        }
        out[n] = '\0';
        *quoted = true;
        return 0;
    }
    /* unquoted: up to a '#' that follows a blank, trailing blanks off */
    for (; p < end; p++) {
        if (*p == '#' && (n == 0 || out[n - 1] == ' ' || out[n - 1] == '\t')) {
            break;
        }
        out[n++] = *p;
    }
    while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == '\t')) {
        n--;
    }
    out[n] = '\0';
    *quoted = false;
    return 0;
}

static int add_setting(sl_conffile_t *c, const char *name, char *value,
                       bool quoted, where_t *w)
{
    const char *canon = NULL;

    switch (sl_options_lookup(name, &canon)) {
    case SL_OPTARG_UNKNOWN:
        return fail(w, "unknown setting '%s'", name);
    case SL_OPTARG_ACTION:
        return fail(w, "'%s' is not a setting a file can hold", name);
    case SL_OPTARG_FLAG: {
        int b = bool_word(value);
        if (b == -1) {
            return fail(w, "'%s' takes true or false, not '%s'", name, value);
        }
        return b ? add_word(c, canon, NULL, w) : 0;
    }
    case SL_OPTARG_LIST:
        if (!quoted) {
            return add_list(c, canon, value, w);
        }
        break;
    default:
        break;
    }
    if (value[0] == '\0' && !quoted) {
        return fail(w, "'%s' has no value", name);
    }
    return add_word(c, canon, value, w);
}

/* "a, b" adds a and b; empty pieces are skipped, but not all of them. */
static int add_list(sl_conffile_t *c, const char *canon, char *value,
                    where_t *w)
{
    int added = 0;

    for (char *p = value; *p != '\0';) {
        size_t n = strcspn(p, ",");
        char *next = p[n] == ',' ? p + n + 1 : p + n;
        p[n] = '\0';
        p += strspn(p, " \t");
        size_t len = strlen(p);
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) {
            p[--len] = '\0';
        }
        if (len > 0) {
            if (add_word(c, canon, p, w) == -1) {
                return -1;
            }
            added++;
        }
        p = next;
    }
    if (added == 0) {
        return fail(w, "'%s' has no value", canon);
    }
    return 0;
}

/* "--CANON=VALUE", or "--CANON" when VALUE is NULL. */
static int add_word(sl_conffile_t *c, const char *canon, const char *value,
                    where_t *w)
{
    size_t len = strlen(canon) + (value ? strlen(value) : 0) + 4;
    char *word = malloc(len);

    if (word == NULL) {
        return fail(w, "out of memory");
    }
    snprintf(word, len, "--%s%s%s", canon, value ? "=" : "",
             value ? value : "");
    int rc = sl_conffile_add(c, word, w->line);
    free(word);
    return rc == 0 ? 0 : fail(w, "out of memory");
}

/* 1, 0, or -1 for a word that is neither. */
static int bool_word(const char *v)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};

    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            return 1;
        }
        if (strcasecmp(v, no[i]) == 0) {
            return 0;
        }
    }
    return -1;
}

static int fail(where_t *w, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(w->err, w->size, "%s:%d: ", w->file, w->line);

    if (n >= 0 && (size_t)n < w->size) {
        va_start(ap, fmt);
        vsnprintf(w->err + n, w->size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static bool is_name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
}

static const char *skip_blanks(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }
    return p;
}

int sl_conffile_split(sl_conffile_t *c, const char *text, char *err,
                      size_t size)
{
    char *word = malloc(strlen(text) + 1);
    const char *p = text;

    if (word == NULL) {
        snprintf(err, size, "out of memory");
        return -1;
    }
    for (;;) {
        p += strspn(p, " \t\n\r");
        if (*p == '\0') {
            break;
        }
        size_t n = 0;
        while (*p != '\0' && strchr(" \t\n\r", *p) == NULL) {
            char q = *p;
            if (q == '\'' || q == '"') {
                const char *open = p++;
                while (*p != '\0' && *p != q) {
                    if (q == '"' && *p == '\\' && p[1] != '\0' &&
                        strchr("\"\\$`", p[1]) != NULL) {
                        p++;
                    }
                    word[n++] = *p++;
                }
                if (*p == '\0') {
                    snprintf(err, size, "unterminated quote at '%.20s'", open);
                    free(word);
                    return -1;
                }
                p++;
            } else if (q == '\\' && p[1] != '\0') {
                word[n++] = p[1];
                p += 2;
            } else {
                word[n++] = *p++;
            }
        }
        word[n] = '\0';
        if (sl_conffile_add(c, word, 0) == -1) {
            snprintf(err, size, "out of memory");
            free(word);
            return -1;
        }
    }
    free(word);
    return 0;
}
