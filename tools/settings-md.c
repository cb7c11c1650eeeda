/* settings-md.c - prints docs/settings.md, the settings reference, from
 * the option table (common/options.c) that --help and --print-config are
 * written from, so the three cannot disagree.
 *
 * Built by make and never installed. "make settings-md" writes its output
 * over docs/settings.md; tests/check-settings-doc.sh fails make check when
 * the committed file differs from it.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/options.h"

int main(void)
{
    /* The defaults, whatever this shell's environment says: these two
     * would change what sl_options_parse() fills in. */
    static char prog[] = "sluice", app[] = "MODULE:CALLABLE";
    char *argv[] = {prog, app, NULL};
    sl_options_t o;
    int rc;

    if (unsetenv("FORWARDED_ALLOW_IPS") != 0 ||
        unsetenv("SLUICE_INLINE") != 0) {
        perror("settings-md: unsetenv");
        return 1;
    }
    if (sl_options_parse(&o, 2, argv) != 0) {
        return 1;
    }
    rc = sl_options_print_reference(&o, 2, argv, stdout);
    sl_options_release(&o);
    if (rc != 0 || fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "settings-md: could not write the reference\n");
        return 1;
    }
    return 0;
}
