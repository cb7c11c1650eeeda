/* mime.c - media types by extension (mime.h).
 *
 * An open-addressed table of extension -> Content-Type value, its size a
 * power of two at least twice the entries, so a lookup is a hash and one
 * or two comparisons on the request's path.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "worker/loop/mime.h"

#define EXT_MAX 16 /* longer extensions are not looked up */

typedef struct {
    char *ext;        /* owned, lower case; NULL: empty slot */
    const char *type; /* into the types list */
} mime_slot_t;

struct sl_mime {
    mime_slot_t *slots;
    size_t mask; /* slots - 1 */
    size_t used;
    char **types; /* owned: each distinct Content-Type value */
    size_t ntypes, captypes;
};

static const char octet[] = "application/octet-stream";

/* What web pages are made of, for a system without /etc/mime.types. */
static const char *const builtin[][2] = {
    {"html", "text/html"},
    {"htm", "text/html"},
    {"css", "text/css"},
    {"js", "text/javascript"},
    {"mjs", "text/javascript"},
    {"json", "application/json"},
    {"map", "application/json"},
    {"txt", "text/plain"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/vnd.microsoft.icon"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    {"pdf", "application/pdf"},
    {"wasm", "application/wasm"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"webmanifest", "application/manifest+json"},
};

/* FNV-1a over the lower-cased extension. */
static uint32_t hash(const char *p, size_t n)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c + 32);
        h = (h ^ c) * 16777619u;
    }
    return h;
}

/* A type a browser reads as text: it is told the charset. */
static bool is_text(const char *type)
{
    return strncmp(type, "text/", 5) == 0 ||
           strcmp(type, "application/javascript") == 0 ||
           strcmp(type, "application/json") == 0 ||
           strcmp(type, "application/manifest+json") == 0;
}

/* The Content-Type value for TYPE, kept once in M's list. */
static const char *intern(sl_mime_t *m, const char *type)
{
    char *v;
    size_t n = strlen(type);

    if (m->ntypes > 0 && strncmp(m->types[m->ntypes - 1], type, n) == 0 &&
        (m->types[m->ntypes - 1][n] == '\0' ||
         m->types[m->ntypes - 1][n] == ';'))
        return m->types[m->ntypes - 1]; /* the same line's type */
    if (m->ntypes == m->captypes) {
        size_t cap = m->captypes ? 2 * m->captypes : 256;
        char **t = realloc(m->types, cap * sizeof(*t));
        if (t == NULL)
            return NULL;
        m->types = t;
        m->captypes = cap;
    }
    v = malloc(n + sizeof("; charset=utf-8"));
    if (v == NULL)
        return NULL;
    memcpy(v, type, n + 1);
    if (is_text(type))
        memcpy(v + n, "; charset=utf-8", sizeof("; charset=utf-8"));
    m->types[m->ntypes++] = v;
    return v;
}

static int grow(sl_mime_t *m)
{
    size_t cap = m->slots ? 2 * (m->mask + 1) : 1024;
    mime_slot_t *s = calloc(cap, sizeof(*s));

    if (s == NULL)
        return -1;
    for (size_t i = 0; m->slots != NULL && i <= m->mask; i++) {
        mime_slot_t *e = &m->slots[i];
        size_t j;
        if (e->ext == NULL)
            continue;
        j = hash(e->ext, strlen(e->ext)) & (cap - 1);
        while (s[j].ext != NULL)
            j = (j + 1) & (cap - 1);
        s[j] = *e;
    }
    free(m->slots);
    m->slots = s;
    m->mask = cap - 1;
    return 0;
}

/* EXT[0..N) -> TYPE, unless EXT is already there. -1: out of memory. */
static int add(sl_mime_t *m, const char *ext, size_t n, const char *type)
{
    size_t j;

    if (n == 0 || n > EXT_MAX)
        return 0;
    if ((m->used + 1) * 2 > m->mask + 1 && grow(m) < 0)
        return -1;
    for (j = hash(ext, n) & m->mask; m->slots[j].ext != NULL;
         j = (j + 1) & m->mask)
        if (strncasecmp(m->slots[j].ext, ext, n) == 0 &&
            m->slots[j].ext[n] == '\0')
            return 0; /* the first line naming it wins */
    if ((m->slots[j].ext = strndup(ext, n)) == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (m->slots[j].ext[i] >= 'A' && m->slots[j].ext[i] <= 'Z')
            m->slots[j].ext[i] = (char)(m->slots[j].ext[i] + 32);
    m->slots[j].type = type;
    m->used++;
    return 0;
}

/* One line of mime.types: "type ext ext ...". -1: out of memory. */
static int add_line(sl_mime_t *m, char *line)
{
    static const char sep[] = " \t\r\n";
    char *save = NULL, *word, *type;
    const char *v = NULL;

    if ((word = strchr(line, '#')) != NULL)
        *word = '\0';
    if ((type = strtok_r(line, sep, &save)) == NULL ||
        strchr(type, '/') == NULL)
        return 0;
    while ((word = strtok_r(NULL, sep, &save)) != NULL) {
        if (v == NULL && (v = intern(m, type)) == NULL)
            return -1;
        if (add(m, word, strlen(word), v) < 0)
            return -1;
    }
    return 0;
}

static int read_file(sl_mime_t *m, const char *path)
{
    char *line = NULL;
    size_t cap = 0;
    FILE *f = fopen(path, "re");
    int rc = 0;

    if (f == NULL) {
        sl_warn("%s: %s: static files get the built-in media types", path,
                strerror(errno));
        return 0;
    }
    while (rc == 0 && getline(&line, &cap, f) >= 0)
        rc = add_line(m, line);
    free(line);
    fclose(f);
    return rc;
}

sl_mime_t *sl_mime_load(const char *path)
{
    sl_mime_t *m = calloc(1, sizeof(*m));
    int rc;

    rc = m == NULL || grow(m) < 0 ? -1 : 0;
    if (rc == 0 && path != NULL)
        rc = read_file(m, path);
    /* the built-in table fills what the file leaves out ("map") */
    for (size_t i = 0; rc == 0 && i < sizeof(builtin) / sizeof(builtin[0]);
         i++) {
        const char *v = intern(m, builtin[i][1]);
        rc = v == NULL ? -1 : add(m, builtin[i][0], strlen(builtin[i][0]), v);
    }
    if (rc < 0) {
        sl_error("out of memory reading the media types");
        sl_mime_free(m);
        return NULL;
    }
    return m;
}

void sl_mime_free(sl_mime_t *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; m->slots != NULL && i <= m->mask; i++)
        free(m->slots[i].ext);
    for (size_t i = 0; i < m->ntypes; i++)
        free(m->types[i]);
    free(m->slots);
    free(m->types);
    free(m);
}

const char *sl_mime_type(const sl_mime_t *m, const char *name, size_t n)
{
    const char *dot = NULL, *ext;
    size_t len, j;

    for (size_t i = n; i > 0; i--) {
        if (name[i - 1] == '.') {
            dot = name + i - 1;
            break;
        }
        if (name[i - 1] == '/')
            break;
    }
    if (dot == NULL)
        return octet;
    ext = dot + 1;
    len = (size_t)(name + n - ext);
    if (len == 0 || len > EXT_MAX)
        return octet;
    for (j = hash(ext, len) & m->mask; m->slots[j].ext != NULL;
         j = (j + 1) & m->mask)
        if (strncasecmp(m->slots[j].ext, ext, len) == 0 &&
            m->slots[j].ext[len] == '\0')
            return m->slots[j].type;
    return octet;
}
