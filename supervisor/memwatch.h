/* memwatch.h - --max-worker-memory: a worker bounded by its memory.
 *
 * Once a second the supervisor reads each serving worker's PSS and marks
 * one past its bound to retire, exactly as a worker at --max-requests is:
 * maintain.c starts its replacement first, then lets it drain.
 */
#ifndef SL_MEMWATCH_H
#define SL_MEMWATCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/options.h"
#include "supervisor/table.h"

/* Judge every READY worker of T of generation GEN_MIN or newer that is not
 * already retiring or leaving, when O->max_worker_memory is set: one whose
 * PSS is past its bound (sl_memwatch_bound_kib()) gets retire and
 * over_memory set and one INFO line with the figure. A worker whose PSS
 * cannot be read is skipped (a warning, once per supervisor, unless it is
 * simply gone). */
void sl_memwatch_tick(sl_table_t *t, const sl_options_t *o, unsigned gen_min);

/* The figure of the "Pss:" line of the smaps_rollup text TEXT[0..N), in
 * KiB (the kernel's kB); -1 when there is no such line (a zombie's file is
 * empty). */
long long sl_memwatch_parse_pss(const char *text, size_t n);

/* The bound of the worker with PID, in KiB: LIMIT_MIB less 0 to 10 %,
 * picked by a hash of PID and SEED, so it stays the same for one worker's
 * life and differs between workers (workers leaking alike do not all
 * restart on the same tick). */
long long sl_memwatch_bound_kib(int limit_mib, pid_t pid, uint32_t seed);

#endif
