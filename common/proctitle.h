/* proctitle.h - process titles as ps(1) shows them:
 * "sluice: supervisor [app:main]", "sluice: worker 3 [app:main]".
 *
 * Linux shows a process's argv memory as its command line, so the title is
 * written over that memory (and over the environment strings after it,
 * which are first copied to the heap). Everything that still needs the
 * original arguments uses the copy sl_proctitle_init() returns.
 *
 * Both kinds of process set a title, so this lives in common/: it needs
 * nothing but the log.
 */
#ifndef SL_PROCTITLE_H
#define SL_PROCTITLE_H

/* Take over ARGV's memory for titles. Call first thing in main(), before
 * anything keeps a pointer into argv or into the environment. Returns a
 * deep, NULL-terminated copy of ARGV (owned by this module, kept for the
 * life of the process), or NULL when out of memory. */
char **sl_proctitle_init(int argc, char **argv);

/* Show the printf-formatted title in ps; also sets the short name (comm)
 * to NAME, truncated to 15 bytes. A no-op for the title part when
 * sl_proctitle_init() was never called. */
void sl_proctitle_set(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
