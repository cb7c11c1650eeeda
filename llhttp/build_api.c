/* build_api.c - compiles llhttp's api.c into libllhttp.a.
 *
 * llhttp is generated C that node-llhttp ships as sources, not as a library.
 * configure finds them (--with-llhttp) and puts their directory on this
 * file's include path, so the code is compiled here without being copied
 * into the tree, and with its own relaxed flags (see Makefile.am).
 */
#include "api.c"
