/* modules.h - --reload, the worker's half: which files the app imported.
 *
 * The supervisor watches the directories of the application's module
 * files (supervisor/reload.h); only the worker knows which files those
 * are. It writes them to a report the supervisor reads, once the app is
 * imported and again whenever it has imported more.
 */
#ifndef SL_MODULES_H
#define SL_MODULES_H

#include <Python.h>
#include <stdbool.h>

/* Write the file of every module imported so far, one absolute path a
 * line, to DIR/<pid> (through a temporary name renamed into place, so the
 * supervisor never reads half a list), and start a daemon thread that
 * writes it again whenever sys.modules has grown (looked at once a second:
 * modules imported inside a request). The standard library and
 * site-packages / dist-packages are left out: they do not change while one
 * develops an app. Without WATCH, the list is written once and no thread
 * is started: a --preload zygote, whose workers write their own after the
 * fork, must have none. 0, or -1 after one log line; the worker serves on
 * either way (reloading is a convenience). GIL held; call once a process. */
int sl_modules_report(const char *dir, bool watch);

#endif
