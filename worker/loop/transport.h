/* transport.h - the bytes under a connection: plain socket or TLS.
 *
 * Every read, write, sendfile and shutdown of a client socket goes through
 * the connection's transport, a const table of operations chosen when the
 * socket is accepted; nothing above it names recv(2) or send(2) and nothing
 * above it asks which table it holds. The plain table is a thin coat over
 * the socket calls; the TLS one (tls.h: OpenSSL, non-blocking, on the loop
 * thread) plugs in under the same callers, and the contract below is
 * written for it as much as for the plain one:
 *
 * - An operation that cannot go on now fails with errno EAGAIN, as a
 *   non-blocking socket does; EINTR may come too (call again at once).
 *   Any other errno means the connection is broken.
 * - What a blocked operation waits for need not be its own direction: a
 *   TLS read may need the socket writable (it has a handshake record to
 *   send), a TLS write readable. After EAGAIN the transport's read_wait
 *   and write_wait say which socket readiness (EV_READ or EV_WRITE) lets a
 *   read, and a write, go on. Callers never test them directly: they ask
 *   for the operations they want to do (EV_READ: to read, EV_WRITE: to
 *   write) and turn that into socket events with sl_transport_events(),
 *   and socket events back into operations with sl_transport_ready(). For
 *   plain they are EV_READ and EV_WRITE, always.
 * - A transport may hold bytes a read returns without the socket becoming
 *   readable (TLS: the rest of a record already decrypted); pending() says
 *   how many. A caller that stopped reading before a read failed with
 *   EAGAIN, and starts again, must read at once when pending() > 0 rather
 *   than wait for readiness that will not come. Plain holds none.
 *
 * The fd is the transport's: close() closes it and frees the rest. The
 * struct is embedded in its owner (the connection): starting one never
 * allocates, and the plain table needs no state. Loop thread only.
 */
#ifndef SL_TRANSPORT_H
#define SL_TRANSPORT_H

#include <errno.h>
#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct sl_transport sl_transport_t;

/* errno of a read that found the peer speaking plain where the transport
 * expects its own protocol (HTTP sent to a TLS port): the transport is
 * the plain one from then on, so the caller may answer in plain, and
 * closes after. */
#define SL_TRANSPORT_EPLAIN EPROTONOSUPPORT

/* errno of a read whose transport refused the peer and told it why in
 * its own protocol (a TLS alert: a failed handshake, a client certificate
 * refused): the transport is plain from then on, with nothing more to
 * say, and the caller closes as it does after an answer (lingering: a
 * reset would destroy the alert on its way). */
#define SL_TRANSPORT_EREFUSED ECONNREFUSED

/* What a TLS handshake settled, as the apps and the access log see it.
 * The TLS transport fills it on the loop thread once the handshake is
 * done, before the first request's bytes are read (none of it can change
 * after: there is no renegotiation), and frees it when it closes, which
 * waits for the executor's end of the connection's last request; so an
 * executor may read it from another thread while it serves one. */
typedef struct sl_tls_info {
    uint16_t version;         /* on the wire: 0x0303 TLS 1.2, 0x0304 1.3 */
    uint16_t cipher;          /* the suite's IANA id (0x1301) */
    const char *protocol;     /* static: "TLSv1.3" */
    const char *cipher_name;  /* static: OpenSSL's name of the suite */
    const char *alpn;         /* static: the protocol ALPN settled on,
                                 "h2" or "http/1.1"; NULL: none */
    const char *server_cert;  /* borrowed (the context's): the certificate
                                 sent, PEM; NULL when unknown */
    char *client_chain;       /* owned: the client's certificate, then the
                                 rest of the chain it sent, PEM blocks one
                                 after the other; NULL when it sent none */
    char *client_name;        /* owned: its subject, RFC 4514; NULL: none */
    const char *client_error; /* static: why its check failed; NULL when
                                 it passed or none was sent */
} sl_tls_info_t;

/* Flags for writev(). */
enum {
    /* more bytes follow at once (a file after a head): the transport may
     * hold these back to send them with those (plain: MSG_MORE) */
    SL_TRANSPORT_MORE = 1,
};

typedef struct sl_transport_ops {
    const char *name; /* "plain": for logs */

    /* Up to N bytes into BUF: the count, 0 at the peer's orderly end of
     * its side, -1 with errno (EAGAIN: see read_wait). */
    ssize_t (*read)(sl_transport_t *t, void *buf, size_t n);

    /* Write IOVCNT (>= 1) buffers in order, in one call where the transport
     * can: the count taken, which may end anywhere in them, or -1 with
     * errno (EAGAIN: see write_wait; EPIPE when the peer is gone). Never
     * raises SIGPIPE. FLAGS: SL_TRANSPORT_MORE or 0. */
    ssize_t (*writev)(sl_transport_t *t, const struct iovec *iov, int iovcnt,
                      int flags);

    /* Write up to N bytes of FILE_FD from *OFF, moving *OFF past what was
     * taken: the count, 0 when the file ends before *OFF + N (it shrank),
     * or -1 with errno as writev(). A transport that cannot hand the
     * kernel a file copies through a buffer of its own. */
    ssize_t (*sendfile)(sl_transport_t *t, int file_fd, off_t *off, size_t n);

    /* End our side, with the output already written: the peer reads EOF
     * after it (TLS: a close_notify first). 0, or -1 with errno; EAGAIN
     * when the end could not be written yet, which a caller that cannot
     * wait takes as a failure (it closes). Reads go on working. */
    int (*shutdown)(sl_transport_t *t);

    /* Close the fd and free what the transport holds, at once (TLS: a
     * close_notify first, unsent if the socket is full, when none went
     * out yet and nothing failed). */
    void (*close)(sl_transport_t *t);

    /* Bytes a read would return now without the socket being readable. */
    size_t (*pending)(const sl_transport_t *t);

    /* The transport's own opening (a TLS handshake) has begun and not
     * ended: the peer is busy, not quiet, though no byte reached us. */
    bool (*opening)(const sl_transport_t *t);

    /* What the handshake settled, once it is done; NULL before, and
     * always for plain. */
    const sl_tls_info_t *(*tls_info)(const sl_transport_t *t);
} sl_transport_ops_t;

struct sl_transport {
    const sl_transport_ops_t *ops; /* borrowed (static); NULL before start */
    void *state;                   /* owned by ops; plain: NULL */
    int fd;                        /* owned; -1 = none (closed) */
    /* Socket readiness a read, and a write, that failed with EAGAIN
     * waits for: EV_READ or EV_WRITE. Set by the operations only. One
     * byte each: the struct lives in every pooled connection. */
    uint8_t read_wait;
    uint8_t write_wait;
};

/* The plain socket: recv, send/sendmsg (MSG_NOSIGNAL), sendfile,
 * shutdown(SHUT_WR), close. */
extern const sl_transport_ops_t sl_transport_plain;

/* Start T on the accepted, non-blocking socket FD with OPS; T owns FD
 * from here. Never fails and never allocates (a transport with state to
 * set up does so on its first operation). */
void sl_transport_start(sl_transport_t *t, const sl_transport_ops_t *ops,
                        int fd);

/* Is a read due without waiting: bytes held by T (pending()), or bytes,
 * an EOF or an error in the kernel? Never blocks, never consumes. */
bool sl_transport_waiting(const sl_transport_t *t);

/* What comes before the transport's own protocol, on the socket itself
 * (a PROXY protocol header, before a TLS handshake): up to N bytes into
 * BUF without taking them (MSG_PEEK). The count, 0 at EOF, -1 with errno
 * (EAGAIN: wait for EV_READ). Call it before the transport's first read. */
ssize_t sl_transport_peek(const sl_transport_t *t, void *buf, size_t n);

/* Take N bytes that sl_transport_peek() showed off the socket, into BUF:
 * the count, or -1 with errno. */
ssize_t sl_transport_take(sl_transport_t *t, void *buf, size_t n);

/* The socket events (EV_READ | EV_WRITE) to wait for, for a caller that
 * wants to do the operations WANT (EV_READ: read, EV_WRITE: write). */
static inline int sl_transport_events(const sl_transport_t *t, int want)
{
    return ((want & EV_READ) ? t->read_wait : 0) |
           ((want & EV_WRITE) ? t->write_wait : 0);
}

/* The operations (EV_READ: read, EV_WRITE: write) that socket events
 * REVENTS let go on. */
static inline int sl_transport_ready(const sl_transport_t *t, int revents)
{
    return ((revents & t->read_wait) ? EV_READ : 0) |
           ((revents & t->write_wait) ? EV_WRITE : 0);
}

/* The operations, through T's table (see sl_transport_ops_t). */
static inline ssize_t sl_transport_read(sl_transport_t *t, void *buf, size_t n)
{
    return t->ops->read(t, buf, n);
}

static inline ssize_t sl_transport_writev(sl_transport_t *t,
                                          const struct iovec *iov, int iovcnt,
                                          int flags)
{
    return t->ops->writev(t, iov, iovcnt, flags);
}

static inline ssize_t sl_transport_sendfile(sl_transport_t *t, int file_fd,
                                            off_t *off, size_t n)
{
    return t->ops->sendfile(t, file_fd, off, n);
}

static inline int sl_transport_shutdown(sl_transport_t *t)
{
    return t->ops->shutdown(t);
}

/* Closes T if open; no-op when closed. */
static inline void sl_transport_close(sl_transport_t *t)
{
    if (t->fd >= 0)
        t->ops->close(t);
}

static inline size_t sl_transport_pending(const sl_transport_t *t)
{
    return t->ops->pending(t);
}

static inline bool sl_transport_opening(const sl_transport_t *t)
{
    return t->ops->opening(t);
}

static inline const sl_tls_info_t *
sl_transport_tls_info(const sl_transport_t *t)
{
    return t->ops->tls_info(t);
}

#endif
