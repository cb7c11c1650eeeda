/* ctl.h - the control channel between the supervisor and one worker.
 *
 * One socketpair(AF_UNIX, SOCK_SEQPACKET) per worker: message boundaries
 * are kept, a message is one fixed-layout struct, and EOF on either end
 * means the other process is gone. The worker writes its state; the
 * supervisor talks back with signals (TERM drain, INT/QUIT fast stop, USR1
 * reopen logs, ABRT dump tracebacks and die) and with one message,
 * SL_CTL_RESTART, written just before the TERM of a rolling restart or a
 * retirement, so the worker can tell its WebSocket clients "service
 * restart" (1012: come back) rather than "going away" (1001), and
 * SL_CTL_TICKET_KEYS, the keys of TLS session tickets, so that a session
 * one worker began resumes on any other (worker/loop/tlsctx.c). The two ends
 * are different executables, perhaps from different builds: a change to the
 * layout below bumps SL_HANDOFF_VERSION (common/handoff.h), and a worker
 * refuses to run under a supervisor of another version.
 */
#ifndef SL_CTL_H
#define SL_CTL_H

#include <stdint.h>

enum {
    SL_CTL_READY = 1,       /* the app is loaded (and ASGI startup done) */
    SL_CTL_HEARTBEAT = 2,   /* once a second from the loop thread */
    SL_CTL_RETIRE = 3,      /* max-requests reached: replace me, then TERM */
    SL_CTL_DRAINING = 4,    /* the worker began to drain (TERM or EOF) */
    SL_CTL_RESTART = 5,     /* supervisor -> worker: the TERM that follows
                               replaces the worker (HUP, max-requests) */
    SL_CTL_TICKET_KEYS = 6, /* supervisor -> worker: ticket_keys, the
                               current key first, then the one before */
};

/* One session ticket key: its name (16 bytes), HMAC-SHA256 key (32),
 * AES-256 key (32). */
#define SL_CTL_TICKET_KEY 80

typedef struct {
    uint32_t type; /* SL_CTL_* */
    uint32_t pid;
    uint64_t served;       /* requests completed since the worker started */
    uint32_t active;       /* requests with the executor now */
    uint32_t conns;        /* open connections */
    uint32_t lanes;        /* executor lanes */
    uint32_t busy_lanes;   /* lanes inside a request now */
    double oldest;         /* age in seconds of the oldest request in flight */
    uint32_t websockets;   /* open WebSockets (counted in conns too) */
    uint32_t nticket_keys; /* SL_CTL_TICKET_KEYS: 1 or 2 */
    uint8_t ticket_keys[2][SL_CTL_TICKET_KEY];
} sl_ctl_msg_t;

/* Send one message on FD (a SOCK_SEQPACKET end); never blocks, drops the
 * message when the socket is full. 0, or -1 with errno set (EPIPE when the
 * supervisor is gone). */
int sl_ctl_send(int fd, const sl_ctl_msg_t *m);

/* Receive one message: 1 when read, 0 on EOF, -1 on error (EAGAIN when
 * none is waiting). */
int sl_ctl_recv(int fd, sl_ctl_msg_t *m);

#endif
