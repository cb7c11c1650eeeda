/* pidfile.h - --pid FILE: written atomically, removed only by its owner.
 *
 * A binary upgrade (USR2) leaves two supervisors running for a while: the
 * new one rewrites the file when it takes over, and the old one, on its
 * way out, must not remove a file that no longer names it.
 */
#ifndef SL_PIDFILE_H
#define SL_PIDFILE_H

/* Write this process's pid to PATH through a temporary file in the same
 * directory and rename(), so a reader sees the old content or the new,
 * never a partial one. 0, or -1 after logging the failing call. */
int sl_pidfile_write(const char *path);

/* Remove PATH if it still holds this process's pid; otherwise leave it
 * alone. Failures are logged as warnings. */
void sl_pidfile_remove(const char *path);

#endif
