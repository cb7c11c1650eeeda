/* handoff.h - what the supervisor hands a worker, and how much of it.
 *
 * A worker is exec'd with the supervisor's argv and, in its environment:
 *   SLUICE_WORKER_ID=N        its slot number in the supervisor's table
 *   SLUICE_LISTEN_FDS=3,4,... the inherited listening sockets
 *   SLUICE_TLS_FDS=3,...      those of them that speak TLS ("" for none;
 *                             set once by the supervisor, inherited)
 *   SLUICE_CTL_FD=N           its end of the control socketpair (optional)
 *   SLUICE_METRICS_FD=N       the shared metrics segment (common/metrics.h;
 *                             only with --metrics-bind)
 *   SLUICE_HANDOFF=N          SL_HANDOFF_VERSION, as the supervisor knows it
 *   SLUICE_RELOAD_DIR=PATH    --reload only: where the worker writes the
 *                             list of its module files (supervisor/reload.h)
 *   SLUICE_ZYGOTE_FD=N        --preload only: this one is a zygote, with
 *                             its end of the zygote channel (common/zygote.h)
 *                             and no SLUICE_CTL_FD; its workers get their
 *                             id and control socket at the fork
 *   SLUICE_ZYGOTE_GEN=N       ... the generation it forks, for its title
 *
 * The supervisor and its workers are two executables (sluice and
 * sluice-worker), and a worker started after a new release was installed
 * (a rolling restart, a replacement) is the new file while the supervisor
 * is still the old process. So the worker checks SLUICE_HANDOFF and
 * refuses to run, as a worker that cannot load the app does, when it does
 * not speak the supervisor's version of this protocol.
 *
 * Both sides size their listener arrays by the one limit below: the
 * supervisor refuses to start with more sockets than that, so a worker is
 * never handed one it has no room for. (A worker once kept 16 and silently
 * ignored the rest of the 64 the supervisor could pass.)
 */
#ifndef SL_HANDOFF_H
#define SL_HANDOFF_H

/* Bump when anything above, the layout of sl_ctl_msg_t (common/ctl.h) or
 * that of the metrics segment changes. */
#define SL_HANDOFF_VERSION 8

/* Listening sockets per server: at most SL_MAX_BINDS from --bind, but
 * systemd (LISTEN_FDS) and a binary upgrade may pass up to this many. */
#define SL_MAX_LISTENERS 64

#endif
