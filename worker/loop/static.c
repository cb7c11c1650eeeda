/* static.c - static files answered by the loop thread (static.h).
 *
 * One request costs an open beneath the folder, an fstat and the file's
 * send: the open is openat2(2) with RESOLVE_BENEATH, which the kernel
 * resolves in the dentry cache without blocking on a warm folder, as
 * nginx's default (no open-file cache) does. There is no cache of open
 * descriptors: a file replaced between two requests is the new one on the
 * next, and a file replaced while being sent stays the old one to its
 * end (the descriptor holds the old inode).
 *
 * Only regular files are served: a FIFO is opened O_NONBLOCK (so the open
 * cannot wait for a writer) and a device O_NOCTTY, and either is closed
 * unread after the fstat says what it is.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/date.h"
#include "common/log.h"
#include "worker/loop/http.h"
#include "worker/loop/mime.h"
#include "worker/loop/static.h"
#include "worker/loop/static_parse.h"

#define MIME_TYPES "/etc/mime.types"

typedef struct {
    const char *prefix; /* borrowed from the options: no trailing '/' */
    size_t plen;
    const char *dir;           /* borrowed: as given, for messages */
    int dirfd;                 /* owned: O_PATH | O_DIRECTORY */
    const char *cache_control; /* borrowed; NULL: none */
    size_t cclen;
} static_map_t;

struct sl_static {
    static_map_t maps[SL_MAX_STATIC];
    int n;
    sl_mime_t *mime; /* owned */
};

/* openat2(2) is not known to this kernel (or a sandbox refuses it): every
 * later open walks instead. Loop thread only. */
static bool no_openat2;

/* "PREFIX=VALUE" (checked by the options) cut at the '='; the prefix
 * without a trailing '/'. */
static const char *split(const char *spec, size_t *plen)
{
    const char *eq = strchr(spec, '=');

    *plen = (size_t)(eq - spec);
    while (*plen > 0 && spec[*plen - 1] == '/')
        (*plen)--;
    return eq + 1;
}

int sl_static_load(const sl_options_t *o, sl_static_t **out)
{
    sl_static_t *s;

    *out = NULL;
    if (o->nstatics == 0)
        return 0;
    if ((s = calloc(1, sizeof(*s))) == NULL ||
        (s->mime = sl_mime_load(MIME_TYPES)) == NULL) {
        sl_error("out of memory loading the --static maps");
        free(s);
        return -1;
    }
    for (int i = 0; i < o->nstatics; i++) {
        static_map_t *m = &s->maps[s->n];
        m->prefix = o->statics[i];
        m->dir = split(o->statics[i], &m->plen);
        m->dirfd = open(m->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (m->dirfd < 0) {
            sl_log_errno(SL_LOG_ERROR, "--static %s: cannot open %s",
                         o->statics[i], m->dir);
            sl_static_free(s);
            return -1;
        }
        s->n++;
    }
    for (int i = 0; i < o->nstatic_caches; i++) {
        size_t plen;
        const char *v = split(o->static_caches[i], &plen);
        for (int k = 0; k < s->n; k++) {
            if (s->maps[k].plen == plen &&
                memcmp(s->maps[k].prefix, o->static_caches[i], plen) == 0) {
                s->maps[k].cache_control = v;
                s->maps[k].cclen = strlen(v);
            }
        }
    }
    *out = s;
    return 0;
}

void sl_static_free(sl_static_t *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->n; i++)
        close(s->maps[i].dirfd);
    sl_mime_free(s->mime);
    free(s);
}

int sl_static_match(const sl_static_t *s, const sl_req_t *r)
{
    sl_target_t t;
    int best = -1;

    if (s == NULL)
        return -1;
    sl_http_target(r->hbuf.data + r->url_off, r->url_len, &t);
    for (int i = 0; i < s->n; i++) {
        const static_map_t *m = &s->maps[i];
        if (t.path_len >= m->plen && memcmp(t.path, m->prefix, m->plen) == 0 &&
            (t.path_len == m->plen || t.path[m->plen] == '/') &&
            (best < 0 || m->plen > s->maps[best].plen))
            best = i;
    }
    return best;
}

/* ------------------------------------------------------------------ */
/* opening beneath the folder                                         */

#define OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)

/* One component at a time, none of them a symlink. */
static int open_walk(int dirfd, const char *path)
{
    char part[NAME_MAX + 1];
    const char *p = path, *slash;
    int fd = dirfd, next, err;

    while ((slash = strchr(p, '/')) != NULL) {
        if ((size_t)(slash - p) > NAME_MAX) {
            errno = ENAMETOOLONG;
            next = -1;
        } else {
            memcpy(part, p, (size_t)(slash - p));
            part[slash - p] = '\0';
            next =
                openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        err = errno;
        if (fd != dirfd)
            close(fd);
        if (next < 0) {
            errno = err;
            return -1;
        }
        fd = next;
        p = slash + 1;
    }
    next = openat(fd, p, OPEN_FLAGS | O_NOFOLLOW);
    err = errno;
    if (fd != dirfd)
        close(fd);
    errno = err;
    return next;
}

int sl_static_open(int dirfd, const char *path, bool walk)
{
    struct open_how how = {
        .flags = OPEN_FLAGS,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    long fd;

    if (walk || no_openat2)
        return open_walk(dirfd, path);
    do
        fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
    while (fd < 0 && errno == EINTR);
    if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
        no_openat2 = errno == ENOSYS;
        return open_walk(dirfd, path);
    }
    return (int)fd;
}

/* ------------------------------------------------------------------ */
/* the answer                                                         */

/* The value of R's first header NAME (lower case), or NULL. */
static const char *header(const sl_req_t *r, const char *name, size_t *n)
{
    for (int i = 0; i < r->nhdrs; i++) {
        const sl_hdr_t *h = &r->hdrs[i];
        if (sl_http_name_is(r->hbuf.data + h->name_off, h->name_len, name)) {
            *n = h->val_len;
            return r->hbuf.data + h->val_off;
        }
    }
    return NULL;
}

/* The connection field R's answer ends its head with. */
static const char *connection(const sl_req_t *r)
{
    if (!r->keep_alive || r->has_body)
        return "Connection: close\r\n";
    return r->major == 1 && r->minor == 0 ? "Connection: keep-alive\r\n" : "";
}

/* A short answer of the server's own: STATUS with its reason as the
 * body, EXTRA fields before it. */
static int small(sl_buf_t *b, const sl_req_t *r, int status, const char *extra)
{
    char head[512];
    const char *reason = sl_http_reason(status);
    int n;

    n = snprintf(head, sizeof(head),
                 "HTTP/1.1 %d %s\r\n"
                 "Server: sluice\r\n"
                 "%.*s"
                 "Content-Type: text/plain; charset=utf-8\r\n"
                 "Content-Length: %zu\r\n"
                 "%s%s"
                 "\r\n"
                 "%s%s",
                 status, reason, SL_DATE_LINE_LEN, sl_date_line(),
                 strlen(reason) + 1, extra, connection(r),
                 r->head ? "" : reason, r->head ? "" : "\n");
    if (n <= 0 || (size_t)n >= sizeof(head) ||
        sl_buf_append(b, head, (size_t)n) < 0)
        return -1;
    return status;
}

/* The status a failed open answers. */
static int open_status(int err)
{
    switch (err) {
    case EACCES:
        return 403;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
        return 503;
    case ENOENT:
    case ENOTDIR:
    case ELOOP:
    case EXDEV:
    case ENAMETOOLONG:
    case EISDIR:
    case ENXIO:
    case EAGAIN:
        return 404;
    default:
        return 500;
    }
}

/* What the answer says of the file it chose. */
typedef struct {
    struct stat st;
    int enc; /* SL_ENC_*, 0: identity */
    char etag[64];
    size_t etag_len;
    char mtime[SL_DATE_LEN + 1];
} chosen_t;

/* The regular file PATH[0..LEN) (room for 4 bytes more) or, when R
 * accepts it and one is there, its precompressed sibling, open in *FD.
 * The status to answer instead (the file's open failed, or it is not a
 * regular file), or 0. */
static int choose(const static_map_t *m, const sl_req_t *r, char *path,
                  size_t len, int *fd, chosen_t *c)
{
    static const struct {
        int enc;
        const char *suffix;
    } sibs[] = {{SL_ENC_BR, ".br"}, {SL_ENC_GZIP, ".gz"}};
    const char *ae;
    size_t aen;
    int accept = 0, sfd;

    if ((*fd = sl_static_open(m->dirfd, path, false)) < 0)
        return open_status(errno);
    if (fstat(*fd, &c->st) < 0 || !S_ISREG(c->st.st_mode)) {
        close(*fd);
        *fd = -1;
        return 404; /* a folder, a FIFO, a device, a socket */
    }
    c->enc = 0;
    if ((ae = header(r, "accept-encoding", &aen)) != NULL)
        accept = sl_static_accept(ae, aen);
    for (size_t i = 0; accept != 0 && i < 2; i++) {
        struct stat st;
        if ((accept & sibs[i].enc) == 0)
            continue;
        memcpy(path + len, sibs[i].suffix, 4);
        sfd = sl_static_open(m->dirfd, path, false);
        path[len] = '\0';
        if (sfd < 0)
            continue;
        if (fstat(sfd, &st) == 0 && S_ISREG(st.st_mode)) {
            close(*fd);
            *fd = sfd;
            c->st = st;
            c->enc = sibs[i].enc;
            break;
        }
        close(sfd);
    }
    c->etag_len = (size_t)snprintf(
        c->etag, sizeof(c->etag), "\"%" PRIx64 ".%lx-%" PRIx64 "\"",
        (uint64_t)c->st.st_mtim.tv_sec, (unsigned long)c->st.st_mtim.tv_nsec,
        (uint64_t)c->st.st_size);
    sl_date_format(c->st.st_mtim.tv_sec, c->mtime);
    return 0;
}

/* The conditional fields' verdict on C (RFC 9110 §13.2.2, in its order):
 * 412, 304, or 0 to go on. */
static int preconditions(const sl_req_t *r, const chosen_t *c)
{
    const char *v;
    size_t n;
    time_t t;

    if ((v = header(r, "if-match", &n)) != NULL) {
        if (!sl_static_etag_match(v, n, c->etag, c->etag_len, false))
            return 412;
    } else if ((v = header(r, "if-unmodified-since", &n)) != NULL &&
               sl_date_parse(v, n, &t) == 0 && c->st.st_mtim.tv_sec > t) {
        return 412;
    }
    if ((v = header(r, "if-none-match", &n)) != NULL) {
        if (sl_static_etag_match(v, n, c->etag, c->etag_len, true))
            return 304;
    } else if ((v = header(r, "if-modified-since", &n)) != NULL &&
               sl_date_parse(v, n, &t) == 0 && c->st.st_mtim.tv_sec <= t) {
        return 304;
    }
    return 0;
}

/* Does R's Range apply to C (a GET, and an If-Range that holds)? */
static const char *range_of(const sl_req_t *r, const chosen_t *c, size_t *n)
{
    const char *range, *ir;
    size_t irn;

    if (r->method != HTTP_GET || (range = header(r, "range", n)) == NULL)
        return NULL;
    if ((ir = header(r, "if-range", &irn)) == NULL)
        return range;
    sl_http_trim(&ir, &irn);
    if (irn > 0 && (ir[0] == '"' || ir[0] == 'W'))
        return sl_static_etag_match(ir, irn, c->etag, c->etag_len, false)
                   ? range
                   : NULL;
    return irn == SL_DATE_LEN && memcmp(ir, c->mtime, SL_DATE_LEN) == 0 ? range
                                                                        : NULL;
}

int sl_static_answer(const sl_static_t *s, int map, const sl_req_t *r,
                     sl_buf_t *b, sl_static_body_t *body)
{
    const static_map_t *m = &s->maps[map];
    char path[PATH_MAX + 4];
    char head[1024], cr[96] = "", rep[256] = "";
    chosen_t c;
    sl_target_t t;
    const char *range;
    size_t rn;
    uint64_t first = 0, last = 0, size;
    long len;
    int fd, status, n;

    body->fd = -1;
    body->off = 0;
    body->len = 0;
    if (r->method != HTTP_GET && r->method != HTTP_HEAD)
        return small(b, r, 405, "Allow: GET, HEAD\r\n");
    sl_http_target(r->hbuf.data + r->url_off, r->url_len, &t);
    /* a folder's name (no listings), or a file's with a '/' after it:
     * one URL a file, as the kernel's ENOTDIR says */
    if (t.path_len == 0 || t.path[t.path_len - 1] == '/')
        return small(b, r, 404, "");
    len =
        sl_static_path(t.path + m->plen, t.path_len - m->plen, path, PATH_MAX);
    if (len == SL_SPATH_BAD)
        return small(b, r, 400, "");
    if (len <= 0) /* hidden, too long, or the folder itself */
        return small(b, r, 404, "");
    if ((status = choose(m, r, path, (size_t)len, &fd, &c)) != 0)
        return small(b, r, status, "");
    size = (uint64_t)c.st.st_size;
    status = preconditions(r, &c);
    if (status == 0 && (range = range_of(r, &c, &rn)) != NULL) {
        switch (sl_static_range(range, rn, size, &first, &last)) {
        case SL_RANGE_ONE:
            status = 206;
            snprintf(cr, sizeof(cr),
                     "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64
                     "\r\n",
                     first, last, size);
            break;
        case SL_RANGE_UNSAT:
            close(fd);
            snprintf(cr, sizeof(cr), "Content-Range: bytes */%" PRIu64 "\r\n",
                     size);
            return small(b, r, 416, cr);
        default:
            break;
        }
    }
    if (status == 412) {
        close(fd);
        return small(b, r, 412, "");
    }
    if (status == 0) {
        status = 200;
        last = size - 1; /* unused when size is 0 */
    }
    if (status != 304) /* a 304 says nothing of the content (§15.4.5) */
        snprintf(rep, sizeof(rep),
                 "Content-Type: %s\r\n"
                 "Content-Length: %" PRIu64 "\r\n"
                 "%s"
                 "Accept-Ranges: bytes\r\n",
                 sl_mime_type(s->mime, path, (size_t)len),
                 size == 0 ? 0 : last - first + 1,
                 c.enc == SL_ENC_BR     ? "Content-Encoding: br\r\n"
                 : c.enc == SL_ENC_GZIP ? "Content-Encoding: gzip\r\n"
                                        : "");
    n = snprintf(head, sizeof(head),
                 "HTTP/1.1 %d %s\r\n"
                 "Server: sluice\r\n"
                 "%.*s"
                 "%s%s"
                 "Last-Modified: %s\r\n"
                 "ETag: %.*s\r\n"
                 "%s%.*s%s"
                 "Vary: Accept-Encoding\r\n"
                 "%s"
                 "\r\n",
                 status, sl_http_reason(status), SL_DATE_LINE_LEN,
                 sl_date_line(), rep, cr, c.mtime, (int)c.etag_len, c.etag,
                 m->cache_control ? "Cache-Control: " : "", (int)m->cclen,
                 m->cache_control ? m->cache_control : "",
                 m->cache_control ? "\r\n" : "", connection(r));
    if (n <= 0 || (size_t)n >= sizeof(head) ||
        sl_buf_append(b, head, (size_t)n) < 0) {
        close(fd);
        return -1;
    }
    if (status == 304 || r->head || size == 0) {
        close(fd);
        return status;
    }
    body->fd = fd;
    body->off = (off_t)first;
    body->len = (size_t)(last - first + 1);
    return status;
}
