/* tls.c - the TLS transport: the contract of transport.h over OpenSSL.
 *
 * OpenSSL does the socket I/O itself (a socket BIO on the connection's
 * fd, non-blocking) and says what it waits for: SSL_ERROR_WANT_READ and
 * WANT_WRITE become EAGAIN with read_wait or write_wait set to EV_READ or
 * EV_WRITE, and the caller's watcher turns them into the events to poll
 * (a read may wait for the socket to be writable mid-handshake). The
 * handshake itself is never called for: the SSL is in accept state and
 * the first SSL_read runs it, inside the header timeout of the session
 * reading.
 *
 * One thing comes before OpenSSL sees a byte: the first one is peeked at.
 * A TLS connection opens with a handshake record (0x16); a letter is a
 * plain HTTP request sent to the TLS port, and rather than the alert
 * OpenSSL would send to a client that cannot read it, the transport turns
 * plain (its table becomes sl_transport_plain) and fails the read with
 * SL_TRANSPORT_EPLAIN, so the HTTP session answers 400 in HTTP. Only then
 * does the SSL get its socket. A handshake that fails (a client
 * certificate refused, a protocol OpenSSL will not speak) ends the same
 * way once OpenSSL has sent its alert: plain, failing the read with
 * SL_TRANSPORT_EREFUSED, so the session closes lingering and the client
 * reads the alert instead of a reset.
 *
 * Writes. OpenSSL holds on to a record it could not send, and the next
 * SSL_write must offer at least the bytes the failed one did, which the
 * output does: it retries from where it stopped, with its bytes only ever
 * growing behind (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER lets them move).
 * Small pieces (a head, a short body) are copied into one record, so a
 * response is not a record per iovec; a piece of a record or more goes to
 * SSL_write where it lies. A file is read (pread) into the same buffer,
 * a bounded copy, then written, until the socket is full: this kernel has
 * no TLS offload (kTLS) to hand sendfile(2) to.
 *
 * The copy buffer is one per process: the loop thread is the only caller,
 * and nothing is kept in it between calls that OpenSSL has not taken.
 *
 * What the handshake settled (the version, the suite, the certificates)
 * is read off the SSL once, at the first read that brings bytes after
 * it, into the transport's state beside the SSL (sl_tls_info_t): the
 * executor reads that copy from its own thread, never the SSL.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <stdlib.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/log.h"
#include "worker/loop/tls.h"
#include "worker/loop/tlsctx.h"
#include "worker/loop/tlsmod.h"

/* Bytes of one TLS record's payload, at most: pieces smaller than this
 * are gathered into one. */
#define RECORD SSL3_RT_MAX_PLAIN_LENGTH

/* The copy buffer: a gathered record, or a slice of a file. */
#define STAGE (64 * 1024)

/* The first byte of a TLS record that carries a handshake message. */
#define HANDSHAKE_RECORD 0x16

static unsigned char stage[STAGE];

/* The transport's state: the connection's SSL and what its handshake
 * settled, allocated and freed together. */
typedef struct {
    SSL *ssl;           /* owned */
    bool settled;       /* info is filled in */
    bool ahead;         /* the last read filled its buffer with bytes read
                           ahead still held: maybe whole records */
    bool broken;        /* a call failed for good: no close_notify */
    sl_tls_info_t info; /* its strings owned as transport.h says */
} tls_t;

static inline SSL *ssl_of(const sl_transport_t *t)
{
    return ((tls_t *)t->state)->ssl;
}

void sl_tls_start(sl_transport_t *t, SSL_CTX *ctx, int fd)
{
    tls_t *tls;

    sl_transport_start(t, &sl_transport_tls, fd);
    tls = calloc(1, sizeof(*tls));
    if (tls == NULL) {
        sl_error("out of memory for the TLS state of fd %d", fd);
        return;
    }
    tls->ssl = SSL_new(ctx);
    if (tls->ssl == NULL) {
        sl_error("SSL_new() failed for fd %d: %s", fd,
                 ERR_reason_error_string(ERR_get_error()));
        ERR_clear_error();
        free(tls);
        return;
    }
    SSL_set_accept_state(tls->ssl);
    /* a record in one recv, not its header and then its body, and what
     * follows it in the same one (read-ahead: pending() counts it) */
    SSL_set_read_ahead(tls->ssl, 1);
    t->state = tls;
}

static void tls_free(sl_transport_t *t)
{
    tls_t *tls = t->state;

    if (tls == NULL)
        return;
    SSL_free(tls->ssl);
    free(tls->info.client_chain);
    free(tls->info.client_name);
    free(tls);
    t->state = NULL;
}

/* What BIO B holds, as a string of ours (NUL-terminated); NULL when out
 * of memory. */
static char *bio_text(BIO *b)
{
    char *data, *s;
    long n = BIO_get_mem_data(b, &data);

    if (n < 0 || (s = malloc((size_t)n + 1)) == NULL)
        return NULL;
    memcpy(s, data, (size_t)n);
    s[n] = '\0';
    return s;
}

/* The client's certificate and the chain it sent, as PEM, and its
 * subject (RFC 4514) into INFO. Out of memory, they stay NULL: the app
 * sees no certificate, which the check's verdict (refused when required)
 * already judged. */
static void settle_client(SSL *ssl, X509 *peer, sl_tls_info_t *info)
{
    /* on a server the chain is documented to leave the client's own
     * certificate out, but it may hold it: it goes first, once */
    STACK_OF(X509) *chain = SSL_get_peer_cert_chain(ssl);
    BIO *b = BIO_new(BIO_s_mem());
    X509 *x;
    int i, ok;

    if (b == NULL)
        goto out;
    ok = PEM_write_bio_X509(b, peer);
    for (i = 0; ok && chain != NULL && i < sk_X509_num(chain); i++) {
        x = sk_X509_value(chain, i);
        if (X509_cmp(x, peer) != 0)
            ok = PEM_write_bio_X509(b, x);
    }
    if (ok)
        info->client_chain = bio_text(b);
    (void)BIO_reset(b);
    if (X509_NAME_print_ex(b, X509_get_subject_name(peer), 0,
                           XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) >= 0)
        info->client_name = bio_text(b);
    BIO_free(b);
out:
    ERR_clear_error();
}

/* The handshake is done: read what it settled off TLS's SSL. */
static void settle(tls_t *tls)
{
    SSL *ssl = tls->ssl;
    const SSL_CIPHER *c = SSL_get_current_cipher(ssl);
    X509 *peer = SSL_get0_peer_certificate(ssl);
    const unsigned char *alpn = NULL;
    unsigned alpn_len = 0;
    long verdict;

    tls->settled = true;
    tls->info.version = (uint16_t)SSL_version(ssl);
    tls->info.protocol = SSL_get_version(ssl);
    tls->info.cipher = c != NULL ? SSL_CIPHER_get_protocol_id(c) : 0;
    tls->info.cipher_name = c != NULL ? SSL_CIPHER_get_name(c) : NULL;
    tls->info.server_cert = sl_tlsctx_cert_pem(SSL_get_certificate(ssl));
    SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
    if (alpn_len == 2 && memcmp(alpn, "h2", 2) == 0)
        tls->info.alpn = "h2";
    else if (alpn_len > 0)
        tls->info.alpn = "http/1.1";
    if (peer == NULL)
        return;
    settle_client(ssl, peer, &tls->info);
    verdict = SSL_get_verify_result(ssl);
    if (verdict != X509_V_OK)
        tls->info.client_error = X509_verify_cert_error_string(verdict);
}

/* The SSL call that returned RC on T failed: -1 with errno EAGAIN and
 * *WAIT set when it can go on, 0 at the peer's orderly end, else -1 with
 * the errno of a broken connection. */
static int ssl_failed(sl_transport_t *t, int rc, uint8_t *wait)
{
    int saved = errno;
    unsigned long e;

    switch (SSL_get_error(ssl_of(t), rc)) {
    case SSL_ERROR_WANT_READ:
        *wait = EV_READ;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        *wait = EV_WRITE;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        /* close_notify, or an EOF without it: HTTP's own framing tells a
         * cut request (SSL_OP_IGNORE_UNEXPECTED_EOF) */
        return 0;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        ((tls_t *)t->state)->broken = true;
        errno = saved != 0 ? saved : ECONNRESET;
        return -1;
    default:
        ((tls_t *)t->state)->broken = true;
        /* a client's failed handshake is its news, not ours: debug */
        e = ERR_peek_error();
        sl_debug("TLS: closing fd %d: %s", t->fd,
                 e != 0 ? ERR_reason_error_string(e) : "protocol error");
        ERR_clear_error();
        errno = EPROTO;
        return -1;
    }
}

/* Before OpenSSL reads: does the connection open with a handshake record?
 * 1 when it does (the SSL has the socket now), 0 at EOF, -1 with errno:
 * EAGAIN, SL_TRANSPORT_EPLAIN (a letter: T is plain from here), EPROTO
 * (neither). */
static int first_byte(sl_transport_t *t)
{
    unsigned char b;
    ssize_t n = recv(t->fd, &b, 1, MSG_PEEK);

    if (n <= 0) {
        t->read_wait = EV_READ;
        return (int)n;
    }
    if (b == HANDSHAKE_RECORD) {
        if (SSL_set_fd(ssl_of(t), t->fd) != 1) {
            ERR_clear_error();
            errno = ENOMEM;
            return -1;
        }
        return 1;
    }
    if ((b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z')) {
        tls_free(t);
        t->ops = &sl_transport_plain;
        errno = SL_TRANSPORT_EPLAIN;
        return -1;
    }
    errno = EPROTO;
    return -1;
}

static ssize_t tls_read(sl_transport_t *t, void *buf, size_t n)
{
    tls_t *tls = t->state;
    size_t got, more;
    int rc;

    if (tls == NULL) {
        errno = ENOMEM;
        return -1;
    }
    if (SSL_get_rbio(tls->ssl) == NULL && (rc = first_byte(t)) <= 0)
        return rc;
    ERR_clear_error();
    tls->ahead = false;
    rc = SSL_read_ex(tls->ssl, buf, n, &got);
    if (rc == 1) {
        t->read_wait = EV_READ;
        if (!tls->settled)
            settle(tls);
        /* a record at a time: the next ones already read, too, until
         * only part of one is left (a failure here comes back at the next
         * call); a full BUF may leave whole ones, which pending() says */
        while (got < n && SSL_has_pending(tls->ssl) &&
               SSL_read_ex(tls->ssl, (char *)buf + got, n - got, &more) == 1)
            got += more;
        tls->ahead = got == n && SSL_has_pending(tls->ssl);
        ERR_clear_error();
        return (ssize_t)got;
    }
    if (ssl_failed(t, rc, &t->read_wait) == 0)
        return 0;
    if (errno == EPROTO && !SSL_is_init_finished(tls->ssl)) {
        /* the handshake failed and OpenSSL sent its alert: no request
         * was ever read, so nothing holds the state */
        tls_free(t);
        t->ops = &sl_transport_plain;
        errno = SL_TRANSPORT_EREFUSED;
    }
    return -1;
}

/* Copy the pieces of IOV[I..IOVCNT), from OFF into IOV[I], into the copy
 * buffer: one record's worth at most. The bytes copied. */
static size_t gather(const struct iovec *iov, int iovcnt, int i, size_t off)
{
    size_t len = 0, k;

    for (; i < iovcnt && len < RECORD; i++, off = 0) {
        k = iov[i].iov_len - off;
        if (k > RECORD - len)
            k = RECORD - len;
        memcpy(stage + len, (const char *)iov[i].iov_base + off, k);
        len += k;
    }
    return len;
}

/* One SSL_write of LEN bytes at P on T: the count written, or what
 * ssl_failed() says (never 0 here: an end the peer sent is EPIPE). */
static ssize_t write_some(sl_transport_t *t, const void *p, size_t len)
{
    size_t done;
    int rc;

    ERR_clear_error();
    rc = SSL_write_ex(ssl_of(t), p, len, &done);
    if (rc == 1) {
        t->write_wait = EV_WRITE;
        return (ssize_t)done;
    }
    if (ssl_failed(t, rc, &t->write_wait) == 0)
        errno = EPIPE;
    return -1;
}

static ssize_t tls_writev(sl_transport_t *t, const struct iovec *iov,
                          int iovcnt, int flags)
{
    size_t total = 0, off = 0, len;
    const void *p;
    ssize_t n;
    int i = 0;

    (void)flags; /* a record per write already: nothing to hold back */
    if (t->state == NULL) {
        errno = ENOMEM;
        return -1;
    }
    for (;;) {
        while (i < iovcnt && off == iov[i].iov_len) {
            i++;
            off = 0;
        }
        if (i == iovcnt)
            return (ssize_t)total;
        /* the same choice on a retry: the same first bytes, no fewer */
        len = iov[i].iov_len - off;
        if (len >= RECORD || i == iovcnt - 1) {
            p = (const char *)iov[i].iov_base + off;
        } else {
            len = gather(iov, iovcnt, i, off);
            p = stage;
        }
        n = write_some(t, p, len);
        if (n < 0)
            return total > 0 ? (ssize_t)total : -1;
        total += (size_t)n;
        for (len = (size_t)n; len > 0; i++, off = 0) {
            size_t k = iov[i].iov_len - off;
            if (len < k) {
                off += len;
                break;
            }
            len -= k;
        }
    }
}

static ssize_t tls_sendfile(sl_transport_t *t, int file_fd, off_t *off,
                            size_t n)
{
    size_t total = 0, got, pos;
    ssize_t r, w;

    if (t->state == NULL) {
        errno = ENOMEM;
        return -1;
    }
    while (total < n) {
        r = pread(file_fd, stage, n - total < STAGE ? n - total : STAGE, *off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) /* an error, or the file shrank: its count so far */
            return total > 0 || r == 0 ? (ssize_t)total : -1;
        got = (size_t)r;
        for (pos = 0; pos < got; pos += (size_t)w) {
            w = write_some(t, stage + pos, got - pos);
            if (w < 0)
                return total > 0 ? (ssize_t)total : -1;
            *off += w;
            total += (size_t)w;
        }
    }
    return (ssize_t)total;
}

/* close_notify once the handshake is done (before it there is no session
 * to end), then the socket's own end, which reads go on after. */
static int tls_shutdown(sl_transport_t *t)
{
    int rc;

    if (t->state != NULL && SSL_is_init_finished(ssl_of(t))) {
        ERR_clear_error();
        rc = SSL_shutdown(ssl_of(t));
        if (rc < 0 && ssl_failed(t, rc, &t->write_wait) < 0 && errno == EAGAIN)
            return -1;
    }
    return shutdown(t->fd, SHUT_WR);
}

/* A connection closed in good order (a keep-alive timeout, a drain, an
 * eviction) says so first: close_notify, once, without waiting for the
 * socket (a full one loses it, as a reset would lose the rest). */
static void tls_close(sl_transport_t *t)
{
    const tls_t *tls = t->state;

    if (tls != NULL && !tls->broken && SSL_is_init_finished(tls->ssl) &&
        !(SSL_get_shutdown(tls->ssl) & SSL_SENT_SHUTDOWN)) {
        (void)SSL_shutdown(tls->ssl);
        ERR_clear_error();
    }
    tls_free(t);
    close(t->fd);
    t->fd = -1;
}

/* Decrypted bytes held, or 1 for bytes read ahead that may hold whole
 * records (tls_read() opened every whole one it could: what is left
 * after it stopped short is part of one, which waits for the socket). */
static size_t tls_pending(const sl_transport_t *t)
{
    const tls_t *tls = t->state;
    int n;

    if (tls == NULL)
        return 0;
    n = SSL_pending(tls->ssl);
    return n > 0 ? (size_t)n : tls->ahead ? 1 : 0;
}

/* The client's first byte came (the SSL has the socket) and the
 * handshake has not finished. */
static bool tls_opening(const sl_transport_t *t)
{
    const tls_t *tls = t->state;

    return tls != NULL && SSL_get_rbio(tls->ssl) != NULL &&
           !SSL_is_init_finished(tls->ssl);
}

static const sl_tls_info_t *tls_info(const sl_transport_t *t)
{
    const tls_t *tls = t->state;

    return tls != NULL && tls->settled ? &tls->info : NULL;
}

const sl_transport_ops_t sl_transport_tls = {
    .name = "tls",
    .read = tls_read,
    .writev = tls_writev,
    .sendfile = tls_sendfile,
    .shutdown = tls_shutdown,
    .close = tls_close,
    .pending = tls_pending,
    .opening = tls_opening,
    .tls_info = tls_info,
};

static void ctx_free(SSL_CTX *ctx)
{
    SSL_CTX_free(ctx);
}

/* What the worker finds in this module (tlsmod.h). */
const sl_tls_module_t sl_tls_module = {
    .ctx_new = sl_tlsctx_new,
    .check = sl_tlsctx_check,
    .ctx_free = ctx_free,
    .start = sl_tls_start,
    .ticket_keys = sl_tlsctx_ticket_keys,
};
