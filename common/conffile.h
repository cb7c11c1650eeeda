/* conffile.h - a configuration file, or SLUICE_CMD_ARGS, as argv words.
 *
 * Both are turned into the words a command line would have had
 * ("--workers=2", "--bind=unix:/run/app.sock"), so that one option parser
 * (common/options.c) judges every value wherever it came from, and the
 * workers can be exec'd with plain words and need no file. Nothing here
 * reads a file or the environment: text in, words out, errors in a buffer.
 */
#ifndef SL_CONFFILE_H
#define SL_CONFFILE_H

#include <stddef.h>

typedef struct {
    char **words; /* owned, NULL-terminated: "--name=value" or "--name" */
    int *lines;   /* owned: the line each word came from (0: split words) */
    int n;
    int cap;
} sl_conffile_t;

/* An empty list of words. */
void sl_conffile_init(sl_conffile_t *c);

/* Free every word; *C is empty again. */
void sl_conffile_free(sl_conffile_t *c);

/* Append the settings of the file text TEXT[0..LEN), named FILE in
 * messages, to *C. One "name = value" per line; '#' starts a comment (in a
 * value, after a blank); a value may be quoted ('...' as is, "..." with \"
 * and \\); a name is an option's long name, '_' or '-' alike; a flag takes
 * true or false; a list (bind, pythonpath) takes commas or repeated lines.
 * 0, or -1 with "FILE:LINE: what is wrong" in ERR[0..SIZE); *C may then
 * hold some words. */
int sl_conffile_parse(sl_conffile_t *c, const char *text, size_t len,
                      const char *file, char *err, size_t size);

/* Append the words of TEXT split as a shell would (blanks separate;
 * '...' as is; "..." with \", \\, \$ and \`; a backslash outside quotes
 * takes the next character as is), without expanding anything. 0, or -1
 * with the reason in ERR[0..SIZE) (an unterminated quote). */
int sl_conffile_split(sl_conffile_t *c, const char *text, char *err,
                      size_t size);

/* Append a copy of WORD, from line LINE. 0, or -1 when out of memory. */
int sl_conffile_add(sl_conffile_t *c, const char *word, int line);

#endif
