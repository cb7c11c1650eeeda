/* test_static.c - check suite for the pure parts of --static: the request
 * read (worker/loop/static_parse.c), media types (mime.c) and the open
 * beneath a folder (static.c's sl_static_open()). The headers' comments
 * are the contract: each case is one of their sentences or an edge of one.
 * The opens run on a tree built in the test's scratch folder (symlinks in
 * and out, a FIFO), through openat2(2) and the walk, its fallback.
 * tests/fuzz/fuzz_static.c explores the parsers' inputs further.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness_base.h"
#include "worker/loop/mime.h"
#include "worker/loop/static.h"
#include "worker/loop/static_parse.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* sl_static_path()                                                   */

static char out[512];

/* sl_static_path() on P[0..N) into out with room CAP; every byte of out
 * is '#' before the call, so a write past CAP shows. */
static long path_n(const char *p, size_t n, size_t cap)
{
    ck_assert_uint_le(cap, sizeof(out));
    memset(out, '#', sizeof(out));
    return sl_static_path(p, n, out, cap);
}

static long path(const char *p)
{
    return path_n(p, strlen(p), sizeof(out));
}

static const char *shown(long rc)
{
    return rc >= 0 ? out : "(refused)";
}

/* clang-format off */
static const struct {
    const char *in, *want;
} path_ok[] = {
    {"", ""},                {"/", ""},               {"//", ""},
    {"a", "a"},              {"a/", "a"},             {"/a", "a"},
    {"//a//b/", "a/b"},      {"a/b/c.txt", "a/b/c.txt"},
    {"css/site.min.css", "css/site.min.css"},         {"%41%62c", "Abc"},
    {"%C3%A9", "\xc3\xa9"},  /* UTF-8 in percent form */
    {"caf%c3%a9/%E2%82%AC.txt", "caf\xc3\xa9/\xe2\x82\xac.txt"},
    {"caf\xc3\xa9", "caf\xc3\xa9"},                    /* raw UTF-8 too */
    {"a+b", "a+b"},          {"%2B", "+"},            /* '+' is no space */
    {"a%20b", "a b"},        {"%25", "%"},            {"%2541", "%41"},
    {"a%3Fb%23c", "a?b#c"},  {"a..b", "a..b"},        {"a.", "a."},
    {"x/b./c", "x/b./c"},    {"~u", "~u"},
};
/* clang-format on */

START_TEST(test_path_decoded)
{
    long rc = path(path_ok[_i].in);

    ck_assert_msg(rc == (long)strlen(path_ok[_i].want) &&
                      strcmp(out, path_ok[_i].want) == 0,
                  "\"%s\": %ld \"%s\", want \"%s\"", path_ok[_i].in, rc,
                  shown(rc), path_ok[_i].want);
}
END_TEST

/* SL_SPATH_BAD: what a browser never sends. */
/* clang-format off */
static const char *const path_bad[] = {
    ".", "..", "./a", "a/./b", "a/..", "a/../b", "../etc/passwd", "%2e", "%2E",
    "%2e%2e", "%2E%2E/secret", ".%2e", "a/%2e%2E/b", "%2F", "%2f", "a%2fb",
    "..%2f", "%00", "a%00.txt", "%0a", "%0D", "%01", "%1f", "%7f", "%5c",
    "%5C..%5C", "a\\b", "a\tb", "a\nb", "a\x7f", "%", "%4", "%zz", "%4g", "%g4",
    "%%41", "a%", "abc%2", "a/%",
};
/* clang-format on */

/* SL_SPATH_HIDDEN: a segment beginning with '.'. */
/* clang-format off */
static const char *const path_hidden[] = {
    ".env", "a/.git/config", ".git/config", "a/b/.htpasswd", "%2eenv",
    "%2Egit/HEAD", "...", "..a", ".well-known/x",
};
/* clang-format on */

START_TEST(test_path_refused)
{
    long rc;

    for (size_t i = 0; i < N_OF(path_bad); i++)
        ck_assert_msg((rc = path(path_bad[i])) == SL_SPATH_BAD,
                      "\"%s\": %ld \"%s\", want BAD", path_bad[i], rc,
                      shown(rc));
    for (size_t i = 0; i < N_OF(path_hidden); i++)
        ck_assert_msg((rc = path(path_hidden[i])) == SL_SPATH_HIDDEN,
                      "\"%s\": %ld \"%s\", want HIDDEN", path_hidden[i], rc,
                      shown(rc));
    /* a NUL that arrives raw (N counts it) ends no name */
    ck_assert_int_eq(path_n("a\0b", 3, sizeof(out)), SL_SPATH_BAD);
    ck_assert_int_eq(path_n("\0", 1, sizeof(out)), SL_SPATH_BAD);
}
END_TEST

/* CAP holds the NUL too: a path of L bytes needs L + 1, and the room
 * counts decoded bytes, not the percent-encoded ones. */
START_TEST(test_path_cap)
{
    static const char in[] = "/dir/%C3%A9t%C3%A9//sub/file.name.txt";
    const char *want = "dir/\xc3\xa9t\xc3\xa9/sub/file.name.txt";

    ck_assert_int_eq(path_n("abc", 3, 3), SL_SPATH_LONG);
    ck_assert_int_eq(path_n("abc", 3, 4), 3);
    ck_assert_str_eq(out, "abc");
    ck_assert_int_eq(path_n("a/b", 3, 3), SL_SPATH_LONG);
    ck_assert_int_eq(path_n("a/b", 3, 4), 3);
    ck_assert_int_eq(path_n("%41%42", 6, 2), SL_SPATH_LONG);
    ck_assert_int_eq(path_n("%41%42", 6, 3), 2);
    ck_assert_str_eq(out, "AB");
    ck_assert_int_eq(path_n("//a", 3, 2), 1);
    ck_assert_str_eq(out, "a");
    ck_assert_int_eq(path_n("", 0, 1), 0);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(path_n("", 0, 0), SL_SPATH_LONG);
    ck_assert_int_eq(path_n("a", 1, 0), SL_SPATH_LONG);
    /* nothing is written at or past CAP, whatever CAP is */
    for (size_t cap = 0; cap < strlen(want) + 4; cap++) {
        long rc = path_n(in, strlen(in), cap);
        for (size_t k = cap; k < sizeof(out); k++)
            ck_assert_msg(out[k] == '#', "cap %zu: byte %zu written", cap, k);
        if (cap > strlen(want)) {
            ck_assert_int_eq(rc, (long)strlen(want));
            ck_assert_str_eq(out, want);
        } else {
            ck_assert_int_eq(rc, SL_SPATH_LONG);
        }
    }
}
END_TEST

/* CONTRACT: "SL_SPATH_LONG: the path does not fit in CAP". A path whose
 * last (or a later, empty) segment is a '/' fits as well as without it:
 * the '/' dropped takes no room. */
START_TEST(test_path_trailing_slash_at_exact_cap)
{
    long rc = path_n("a/", 2, 2);

    ck_assert_msg(rc == 1 && strcmp(out, "a") == 0,
                  "\"a/\" cap 2: %ld \"%s\", want 1 \"a\"", rc, shown(rc));
    rc = path_n("a/b//", 5, 4);
    ck_assert_msg(rc == 3 && strcmp(out, "a/b") == 0,
                  "\"a/b//\" cap 4: %ld \"%s\", want 3 \"a/b\"", rc, shown(rc));
}
END_TEST

/* ------------------------------------------------------------------ */
/* sl_static_range()                                                  */

#define BIG   1000000000000ULL
#define ONE   SL_RANGE_ONE
#define UNSAT SL_RANGE_UNSAT
#define NONE  SL_RANGE_NONE
#define MAX   UINT64_MAX

/* clang-format off */
static const struct {
    const char *v;
    uint64_t size;
    int rc;
    uint64_t first, last;
} ranges[] = {
    {"bytes=0-0", 10, ONE, 0, 0},           {"bytes=0-9", 10, ONE, 0, 9},
    {"bytes=2-5", 10, ONE, 2, 5},           {"bytes=0-", 10, ONE, 0, 9},
    {"bytes=9-", 10, ONE, 9, 9},            {"bytes=-1", 10, ONE, 9, 9},
    {"bytes=-10", 10, ONE, 0, 9},           {"bytes=0-0", 1, ONE, 0, 0},
    {"bytes=-11", 10, ONE, 0, 9},           /* a longer suffix: all */
    {"bytes=5-100", 10, ONE, 5, 9},         /* the last cut to the end */
    {"bytes=0-", BIG, ONE, 0, BIG - 1},     {"bytes=0-", MAX, ONE, 0, MAX - 1},
    {"bytes=-1", MAX, ONE, MAX - 1, MAX - 1},
    {"bytes=-0", 10, UNSAT, 0, 0},          {"bytes=10-", 10, UNSAT, 0, 0},
    {"bytes=10-20", 10, UNSAT, 0, 0},       {"bytes=11-12", 10, UNSAT, 0, 0},
    {"bytes=0-", 0, UNSAT, 0, 0},           {"bytes=0-0", 0, UNSAT, 0, 0},
    {"bytes=-5", 0, UNSAT, 0, 0},
    /* ignored: several ranges, another unit, what does not parse */
    {"bytes=5-2", 10, NONE, 0, 0},          {"bytes=1-2,4-5", 10, NONE, 0, 0},
    {"bytes=1-2, 4-5", 10, NONE, 0, 0},     {"bytes=0-0,-1", 10, NONE, 0, 0},
    {"items=0-1", 10, NONE, 0, 0},          {"byte=0-1", 10, NONE, 0, 0},
    {"bytesx=0-1", 10, NONE, 0, 0},         {"bytes", 10, NONE, 0, 0},
    {"bytes=", 10, NONE, 0, 0},             {"bytes=-", 10, NONE, 0, 0},
    {"bytes=--1", 10, NONE, 0, 0},          {"bytes=1", 10, NONE, 0, 0},
    {"bytes=+1-2", 10, NONE, 0, 0},         {"bytes=1-+2", 10, NONE, 0, 0},
    {"bytes=0x1-2", 10, NONE, 0, 0},        {"bytes=1-2x", 10, NONE, 0, 0},
    {"bytes=-1x", 10, NONE, 0, 0},          {"bytes=1-2;", 10, NONE, 0, 0},
    {"bytes=a-b", 10, NONE, 0, 0},          {"", 10, NONE, 0, 0},
    /* spaces: around the value and the '=', never inside a range */
    {"bytes=1 -2", 10, NONE, 0, 0},         {"bytes=1- 2", 10, NONE, 0, 0},
    {"bytes=- 1", 10, NONE, 0, 0},          {"  bytes=1-2\t ", 10, ONE, 1, 2},
    {"bytes= 1-2", 10, ONE, 1, 2},          {"bytes =1-2", 10, ONE, 1, 2},
    {"BYTES=1-2", 10, ONE, 1, 2},           {"bytes=0001-0002", 10, ONE, 1, 2},
    /* any number of digits: a number past 2^64 - 1 is past every end */
    {"bytes=0-9999999999999999999", 10, ONE, 0, 9},
    {"bytes=-9999999999999999999", 10, ONE, 0, 9},
    {"bytes=9999999999999999999-", 10, UNSAT, 0, 0},
    {"bytes=9999999999999999998-", MAX, ONE, 9999999999999999998U, MAX - 1},
    {"bytes=0-18446744073709551615", 10, ONE, 0, 9},
    {"bytes=0-99999999999999999999", 10, ONE, 0, 9},
    {"bytes=99999999999999999999-", 10, UNSAT, 0, 0},
    {"bytes=-99999999999999999999", 10, ONE, 0, 9},
};
/* clang-format on */

START_TEST(test_range)
{
    const __typeof__(ranges[0]) *r = &ranges[_i];
    uint64_t first = 7777, last = 7777;
    int rc = sl_static_range(r->v, strlen(r->v), r->size, &first, &last);

    ck_assert_msg(rc == r->rc &&
                      (rc != ONE || (first == r->first && last == r->last)),
                  "\"%s\" of %llu: %d %llu-%llu, want %d %llu-%llu", r->v,
                  (unsigned long long)r->size, rc, (unsigned long long)first,
                  (unsigned long long)last, r->rc, (unsigned long long)r->first,
                  (unsigned long long)r->last);
}
END_TEST

/* ------------------------------------------------------------------ */
/* sl_static_etag_match()                                             */

#define X  "\"x\""
#define WX "W/\"x\""

/* clang-format off */
static const struct {
    const char *list, *tag;
    bool weak, want;
} etags[] = {
    {X, X, 0, 1},                      {X, X, 1, 1},
    {"\"y\"", X, 1, 0},                {"\"xx\"", X, 1, 0},
    {X, "\"xx\"", 1, 0},               {"\"X\"", X, 1, 0}, /* case counts */
    {"\"\"", "\"\"", 0, 1},            {"\"a\", \"b\", " X, X, 0, 1},
    {"\"a\"," X, X, 0, 1},             {" \t\"a\" ,\t " X " ", X, 0, 1},
    {",, " X ",", X, 0, 1},            {"\"a\", \"b\"", X, 1, 0},
    /* W/ in the list: named by the weak comparison only */
    {WX, X, 1, 1},                     {WX, X, 0, 0},
    {"\"a\", " WX, X, 1, 1},           {WX ", " X, X, 0, 1},
    {"w/" X, X, 1, 0},                 /* "W/" is case-sensitive */
    /* a weak TAG: the strong comparison names it by nothing */
    {WX, WX, 0, 0},                    {X, WX, 0, 0},
    /* "*" names every tag, weak or strong */
    {"*", X, 0, 1},                    {"*", X, 1, 1},
    {" * ", X, 0, 1},                  {"*", WX, 0, 1},
    /* nothing, and malformed lists */
    {"", X, 1, 0},                     {" ,", X, 1, 0},
    {"x", "x", 1, 0},                  {"\"x", X, 1, 0},
    {"\"x", "\"x", 1, 0},              {"W/", X, 1, 0},
    {"W/x", X, 1, 0},                  {"W" X, X, 1, 0},
    {"junk, " X, X, 1, 0},             {"\"a\" junk, " X, X, 1, 0},
    {"'x'", "'x'", 1, 0},
};
/* clang-format on */

START_TEST(test_etag)
{
    bool got = sl_static_etag_match(etags[_i].list, strlen(etags[_i].list),
                                    etags[_i].tag, strlen(etags[_i].tag),
                                    etags[_i].weak);

    ck_assert_msg(got == etags[_i].want, "[%s] names %s (%s): %d, want %d",
                  etags[_i].list, etags[_i].tag,
                  etags[_i].weak ? "weak" : "strong", got, etags[_i].want);
}
END_TEST

/* CONTRACT: "A malformed list names nothing." A list that goes wrong after
 * an item naming the tag (or a "*" with company, which the grammar does
 * not allow: "*" / #entity-tag) is still malformed. */
/* clang-format off */
static const char *const etag_malformed_late[] = {
    X ", junk", X ", \"y", X ", W/", X " \"y\"", X "junk", "*, " X, X ", *",
    "*junk",
};
/* clang-format on */

START_TEST(test_etag_malformed_after_a_match)
{
    const char *v = etag_malformed_late[_i];

    for (int weak = 0; weak < 2; weak++)
        ck_assert_msg(!sl_static_etag_match(v, strlen(v), "\"x\"", 3, weak),
                      "[%s] (%s) names \"x\": a malformed list names nothing",
                      v, weak ? "weak" : "strong");
}
END_TEST

/* ------------------------------------------------------------------ */
/* sl_static_accept()                                                 */

#define BOTH (SL_ENC_GZIP | SL_ENC_BR)

/* clang-format off */
static const struct {
    const char *v;
    int want;
} accepts[] = {
    {"gzip", SL_ENC_GZIP}, {"br", SL_ENC_BR}, {"gzip, deflate, br, zstd", BOTH},
    {"br;q=0, gzip", SL_ENC_GZIP}, {"br;q=0,gzip;q=0.5", SL_ENC_GZIP},
    {"*", BOTH}, {"*;q=0", 0}, {"*;q=0.5", BOTH}, {"gzip;q=0, *", SL_ENC_BR},
    {"*, gzip;q=0", SL_ENC_BR}, {"*;q=0, br", SL_ENC_BR}, {"identity", 0},
    {"identity, deflate", 0}, {"x-gzip", SL_ENC_GZIP}, {"X-GZIP", SL_ENC_GZIP},
    {"GZIP", SL_ENC_GZIP}, {"Br", SL_ENC_BR}, {"br;q=0.000", 0}, {"br;q=0.", 0},
    {"br;q=0", 0}, {"br;q=0.001", SL_ENC_BR}, {"br;q=0.5", SL_ENC_BR},
    {"br;q=1", SL_ENC_BR}, {"br;q=1.0", SL_ENC_BR}, {"br;q=1.000", SL_ENC_BR},
    {"br;Q=0", 0}, {"br ; q=0 , gzip ;q=1", SL_ENC_GZIP},
    {" gzip\t,\tbr ", BOTH}, {",,gzip,,", SL_ENC_GZIP}, {"", 0}, {"junk", 0},
    {"gzipx, xbr, gz, b", 0}, {"gzip br", 0}, {"br;q=x", 0}, {"br;q=", 0},
    {"br;q", 0}, {"br;level=1", 0}, {";q=1", 0}, {"\x01\xff", 0},
};
/* clang-format on */

START_TEST(test_accept)
{
    int got = sl_static_accept(accepts[_i].v, strlen(accepts[_i].v));

    ck_assert_msg(got == accepts[_i].want, "\"%s\": %d, want %d", accepts[_i].v,
                  got, accepts[_i].want);
}
END_TEST

/* Only P[0..N) (and TAG[0..TN)) is read: what follows is another field's
 * or request's business. */
START_TEST(test_fields_read_n_bytes_only)
{
    uint64_t first = 0, last = 0;

    ck_assert_int_eq(path_n("ab/../x", 2, sizeof(out)), 2);
    ck_assert_str_eq(out, "ab");
    ck_assert_int_eq(path_n("a%41", 2, sizeof(out)), SL_SPATH_BAD);
    ck_assert_int_eq(path_n("a/.env", 2, sizeof(out)), 1);

    ck_assert_int_eq(sl_static_range("bytes=1-2,4-5", 9, 10, &first, &last),
                     SL_RANGE_ONE);
    ck_assert(first == 1 && last == 2);
    ck_assert_int_eq(sl_static_range("bytes=1-234", 8, 10, &first, &last),
                     SL_RANGE_ONE);
    ck_assert(first == 1 && last == 9);
    ck_assert(!sl_static_etag_match("\"x\"", 2, "\"x\"", 3, true));
    ck_assert(sl_static_etag_match("\"ab\"", 4, "\"ab\"zzz", 4, false));
    ck_assert(!sl_static_etag_match("\"ab\"", 4, "\"ab\"", 3, false));
    ck_assert_int_eq(sl_static_accept("gzip, br", 4), SL_ENC_GZIP);
    ck_assert_int_eq(sl_static_accept("br;q=0", 2), SL_ENC_BR);
}
END_TEST

/* ------------------------------------------------------------------ */
/* sl_mime_load(), sl_mime_type()                                     */

#define OCTET "application/octet-stream"

typedef struct {
    const char *name, *want;
} mime_case_t;

static const char *type_of(const sl_mime_t *m, const char *name)
{
    return sl_mime_type(m, name, strlen(name));
}

static void assert_types(const sl_mime_t *m, const mime_case_t *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(strcmp(type_of(m, c[i].name), c[i].want) == 0,
                      "%s: \"%s\", want \"%s\"", c[i].name,
                      type_of(m, c[i].name), c[i].want);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

/* A mime.types file written for the test, its path. */
static const char *mime_file(const char *text)
{
    static char p[160];

    snprintf(p, sizeof(p), "%s/mime.types", h_test_dir());
    write_file(p, text);
    return p;
}

static const char mime_text[] =
    "# a comment line: text/x-no no\n"
    "text/x-first\tfoo FOO2\n"
    "application/x-second foo bar   # foo is the line above's\n"
    "application/json json\n"
    "application/javascript js\n"
    "application/gzip gz\n"
    "image/x-mixed Pic\n"
    "noslash qux\n"
    "application/x-bare\n"
    "application/x-long abcdefghijklmnop abcdefghijklmnopq\n"
    "text/x-crlf crlf\r\n"
    "image/png png # after: notanext\n";

/* clang-format off */
static const mime_case_t mime_cases[] = {
    {"a.foo", "text/x-first; charset=utf-8"},
    {"a.FOO", "text/x-first; charset=utf-8"},
    {"a.Foo2", "text/x-first; charset=utf-8"},
    {"b.bar", "application/x-second"},
    {"c.json", "application/json; charset=utf-8"},
    {"c.js", "application/javascript; charset=utf-8"}, /* the file's */
    {"c.mjs", "text/javascript; charset=utf-8"},       /* built in */
    {"d.tar.gz", "application/gzip"}, {"e.pic", "image/x-mixed"},
    {"E.PIC", "image/x-mixed"}, {"f.qux", OCTET},
    {"g.abcdefghijklmnop", "application/x-long"},
    {"g.abcdefghijklmnopq", OCTET}, {"h.crlf", "text/x-crlf; charset=utf-8"},
    {"i.png", "image/png"}, {"i.notanext", OCTET}, {"j.no", OCTET},
    {"k.css", "text/css; charset=utf-8"}, /* built in, not in the file */
    {"k.woff2", "font/woff2"}, {"dir/l.png", "image/png"}, {"a.b/c", OCTET},
    {"a.png/c", OCTET}, {"noext", OCTET}, {"trailing.", OCTET}, {"", OCTET},
    {".png", "image/png"}, {"m.unknown", OCTET},
};
/* clang-format on */

START_TEST(test_mime_file)
{
    sl_mime_t *m = sl_mime_load(mime_file(mime_text));

    ck_assert_ptr_nonnull(m);
    assert_types(m, mime_cases, N_OF(mime_cases));
    /* only NAME[0..N) is read */
    ck_assert_str_eq(sl_mime_type(m, "i.pngxyz", 5), "image/png");
    ck_assert_str_eq(sl_mime_type(m, "i.png.foo", 5), "image/png");
    sl_mime_free(m);
}
END_TEST

/* clang-format off */
static const mime_case_t mime_builtin[] = {
    {"index.html", "text/html; charset=utf-8"},
    {"INDEX.HTM", "text/html; charset=utf-8"},
    {"a.css", "text/css; charset=utf-8"},
    {"a.js", "text/javascript; charset=utf-8"},
    {"a.mjs", "text/javascript; charset=utf-8"},
    {"a.json", "application/json; charset=utf-8"},
    {"a.js.map", "application/json; charset=utf-8"},
    {"a.txt", "text/plain; charset=utf-8"},
    {"site.webmanifest", "application/manifest+json; charset=utf-8"},
    {"a.svg", "image/svg+xml"},     {"a.png", "image/png"},
    {"a.JPG", "image/jpeg"},        {"a.woff2", "font/woff2"},
    {"a.wasm", "application/wasm"}, {"a.tar.gz", OCTET},
    {"a.b/c", OCTET},               {"README", OCTET},
};
/* clang-format on */

/* NULL: the built-in table alone; so is a file that cannot be read, after
 * a warning naming it. */
START_TEST(test_mime_builtin)
{
    char p[160];
    sl_mime_t *m;

    ck_assert_ptr_nonnull(m = sl_mime_load(NULL));
    assert_types(m, mime_builtin, N_OF(mime_builtin));
    sl_mime_free(m);
    h_log_to_file();
    snprintf(p, sizeof(p), "%s/no-such-mime.types", h_test_dir());
    ck_assert_ptr_nonnull(m = sl_mime_load(p));
    assert_types(m, mime_builtin, N_OF(mime_builtin));
    ck_assert_msg(strstr(h_log_text(), "no-such-mime.types") != NULL,
                  "no warning: [%s]", h_log_text());
    sl_mime_free(m);
}
END_TEST

/* More extensions than the first table holds: every one still found. */
START_TEST(test_mime_many)
{
    size_t cap = 64 * 2000, len = 0;
    char *text = malloc(cap), name[32], want[48];
    sl_mime_t *m;

    ck_assert_ptr_nonnull(text);
    for (int i = 0; i < 2000; i++)
        len += (size_t)snprintf(text + len, cap - len,
                                "application/x-t%d e%d E%dx\n", i % 7, i, i);
    m = sl_mime_load(mime_file(text));
    free(text);
    ck_assert_ptr_nonnull(m);
    for (int i = 0; i < 2000; i++) {
        snprintf(want, sizeof(want), "application/x-t%d", i % 7);
        snprintf(name, sizeof(name), "f.E%d", i);
        ck_assert_str_eq(type_of(m, name), want);
        snprintf(name, sizeof(name), "f.e%dX", i);
        ck_assert_str_eq(type_of(m, name), want);
    }
    ck_assert_str_eq(type_of(m, "f.e2000"), OCTET);
    ck_assert_str_eq(type_of(m, "f.css"), "text/css; charset=utf-8");
    sl_mime_free(m);
}
END_TEST

/* The system's list, when there is one: what pages are made of. */
START_TEST(test_mime_system_file)
{
    sl_mime_t *m;

    if (access("/etc/mime.types", R_OK) != 0) {
        fprintf(stderr, "test_static: no /etc/mime.types: case skipped\n");
        return;
    }
    ck_assert_ptr_nonnull(m = sl_mime_load("/etc/mime.types"));
    ck_assert_str_eq(type_of(m, "a.html"), "text/html; charset=utf-8");
    ck_assert_str_eq(type_of(m, "a.PNG"), "image/png");
    ck_assert_str_eq(type_of(m, "a.json"), "application/json; charset=utf-8");
    ck_assert_str_eq(type_of(m, "a.map"), "application/json; charset=utf-8");
    ck_assert_ptr_nonnull(strstr(type_of(m, "a.js"), "; charset=utf-8"));
    ck_assert_str_eq(type_of(m, "a.b/c"), OCTET);
    sl_mime_free(m);
}
END_TEST

/* ------------------------------------------------------------------ */
/* sl_static_open()                                                   */

static int root_fd; /* the tree's root/, O_PATH as a worker opens it */

/* The tree: 'd' a folder, 'f' a file (ARG its text), 'l' a symlink to
 * ARG, 'a' an absolute one (to ARG under the test's folder), 'p' a FIFO. */
/* clang-format off */
static const struct {
    char kind;
    const char *rel, *arg;
} tree_items[] = {
    {'d', "outside", NULL},                   {'d', "root", NULL},
    {'d', "root/sub", NULL},                  {'d', "root/sub/deeper", NULL},
    {'f', "outside/secret", "secret"},        {'f', "root/file.txt", "hello"},
    {'f', "root/sub/inner.txt", "inner"},     {'l', "root/link-sub", "sub"},
    {'f', "root/sub/deeper/x.txt", "deep"},   {'l', "root/link-in", "file.txt"},
    {'l', "root/sub/link-up", "../file.txt"},
    {'a', "root/out-abs", "outside/secret"},
    {'l', "root/out-rel", "../outside/secret"},
    {'l', "root/out-dir", "../outside"},
    {'l', "root/sub/out-deep", "../../outside/secret"},
    {'p', "root/fifo", NULL},
};
/* clang-format on */

static void tree_setup(void)
{
    const char *tree = h_test_dir();
    char p[256], t[256];

    for (size_t i = 0; i < N_OF(tree_items); i++) {
        snprintf(p, sizeof(p), "%s/%s", tree, tree_items[i].rel);
        switch (tree_items[i].kind) {
        case 'd':
            ck_assert_int_eq(mkdir(p, 0755), 0);
            break;
        case 'f':
            write_file(p, tree_items[i].arg);
            break;
        case 'a':
            snprintf(t, sizeof(t), "%s/%s", tree, tree_items[i].arg);
            ck_assert_int_eq(symlink(t, p), 0);
            break;
        case 'l':
            ck_assert_int_eq(symlink(tree_items[i].arg, p), 0);
            break;
        default:
            ck_assert_int_eq(mkfifo(p, 0644), 0);
        }
    }
    snprintf(p, sizeof(p), "%s/root", tree);
    root_fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(root_fd, 0);
}

/* Does this kernel (and sandbox) let a process call openat2(2)? When it
 * does not, only the walk's answers can be checked: a line says so. */
static bool have_openat2(void)
{
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH};
    long fd = syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof(how));

    if (fd < 0) {
        fprintf(stderr, "test_static: openat2(2): %s: its cases skipped\n",
                strerror(errno));
        return false;
    }
    close((int)fd);
    return true;
}

/* PATH opened with WALK: the file's text, which must be WANT. */
static void assert_opens(const char *path, bool walk, const char *want)
{
    char buf[64] = "";
    int fd = sl_static_open(root_fd, path, walk);
    ssize_t n;

    ck_assert_msg(fd >= 0, "%s (walk %d): %s", path, walk, strerror(errno));
    n = pread(fd, buf, sizeof(buf) - 1, 0);
    ck_assert_int_eq(n, (ssize_t)strlen(want));
    buf[n] = '\0';
    ck_assert_str_eq(buf, want);
    ck_assert_int_eq(write(fd, "x", 1), -1); /* for reading only */
    ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
}

/* PATH refused with WALK: -1 and ERR (or ERR2, when not 0). */
static void assert_refused(const char *path, bool walk, int err, int err2)
{
    int fd;

    errno = 0;
    fd = sl_static_open(root_fd, path, walk);
    ck_assert_msg(fd == -1 && (errno == err || (err2 != 0 && errno == err2)),
                  "%s (walk %d): %d, errno %d (%s), want -1 and %d", path, walk,
                  fd, errno, strerror(errno), err);
}

/* Both ways: a file, in a folder, in a folder's folder; missing ones. */
START_TEST(test_open_files)
{
    tree_setup();
    for (int walk = 0; walk < 2; walk++) {
        assert_opens("file.txt", walk, "hello");
        assert_opens("sub/inner.txt", walk, "inner");
        assert_opens("sub/deeper/x.txt", walk, "deep");
        assert_refused("nope", walk, ENOENT, 0);
        assert_refused("sub/nope", walk, ENOENT, 0);
        assert_refused("nope/x.txt", walk, ENOENT, 0);
        assert_refused("file.txt/x", walk, ENOTDIR, 0);
        assert_refused("", walk, ENOENT, 0);
    }
}
END_TEST

/* A symlink that stays in the folder: followed by openat2(2), refused by
 * the walk. */
START_TEST(test_open_symlink_inside)
{
    tree_setup();
    if (have_openat2()) {
        assert_opens("link-in", false, "hello");
        assert_opens("sub/link-up", false, "hello");
        assert_opens("link-sub/inner.txt", false, "inner");
    }
    assert_refused("link-in", true, ELOOP, 0);
    assert_refused("sub/link-up", true, ELOOP, 0);
    assert_refused("link-sub/inner.txt", true, ENOTDIR, ELOOP);
}
END_TEST

/* A symlink out of the folder, absolute or through "..", to a file or a
 * folder: refused both ways. */
START_TEST(test_open_symlink_out)
{
    static const char *const outs[] = {"out-abs", "out-rel", "out-dir/secret",
                                       "sub/out-deep"};

    tree_setup();
    for (size_t i = 0; i < N_OF(outs); i++) {
        if (have_openat2())
            assert_refused(outs[i], false, EXDEV, 0);
        assert_refused(outs[i], true, ELOOP, ENOTDIR);
    }
}
END_TEST

/* A FIFO with no writer opens at once (O_NONBLOCK); the caller's fstat
 * then refuses it. */
START_TEST(test_open_fifo_does_not_block)
{
    struct stat st;

    tree_setup();
    for (int walk = 0; walk < 2; walk++) {
        int fd = sl_static_open(root_fd, "fifo", walk);
        ck_assert_msg(fd >= 0, "fifo (walk %d): %s", walk, strerror(errno));
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert(S_ISFIFO(st.st_mode));
        ck_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
        close(fd);
    }
}
END_TEST

/* No magic link (/proc/PID/fd/N) is followed, whichever way. */
START_TEST(test_open_no_magic_link)
{
    char name[32];
    int proc = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
    int fd;

    if (proc < 0) {
        fprintf(stderr, "test_static: no /proc: magic link case skipped\n");
        return;
    }
    tree_setup();
    fd = openat(root_fd, "file.txt", O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    snprintf(name, sizeof(name), "fd/%d", fd);
    for (int walk = 0; walk < 2; walk++) {
        errno = 0;
        ck_assert_int_eq(sl_static_open(proc, name, walk), -1);
        ck_assert_msg(errno == ELOOP || errno == EXDEV, "%s: %s", name,
                      strerror(errno));
    }
    close(fd);
    close(proc);
}
END_TEST

/* A name longer than a file system allows: refused, both ways. */
START_TEST(test_open_long_name)
{
    char name[400];

    tree_setup();
    memset(name, 'a', 300);
    snprintf(name + 300, sizeof(name) - 300, "/x.txt");
    for (int walk = 0; walk < 2; walk++) {
        assert_refused(name, walk, ENAMETOOLONG, 0); /* a folder's name */
        name[300] = '\0';
        assert_refused(name, walk, ENAMETOOLONG, 0); /* the file's */
        name[300] = '/';
    }
}
END_TEST

/* ------------------------------------------------------------------ */

static Suite *static_suite(void)
{
    Suite *s = suite_create("static");
    TCase *tc = tcase_create("parse");
    TCase *files = tcase_create("files");

    tcase_add_loop_test(tc, test_path_decoded, 0, N_OF(path_ok));
    tcase_add_test(tc, test_path_refused);
    tcase_add_test(tc, test_path_cap);
    tcase_add_test(tc, test_path_trailing_slash_at_exact_cap);
    tcase_add_loop_test(tc, test_range, 0, N_OF(ranges));
    tcase_add_loop_test(tc, test_etag, 0, N_OF(etags));
    tcase_add_loop_test(tc, test_etag_malformed_after_a_match, 0,
                        N_OF(etag_malformed_late));
    tcase_add_loop_test(tc, test_accept, 0, N_OF(accepts));
    tcase_add_test(tc, test_fields_read_n_bytes_only);
    suite_add_tcase(s, tc);

    tcase_add_unchecked_fixture(files, h_dir_make, h_dir_remove);
    tcase_add_test(files, test_mime_file);
    tcase_add_test(files, test_mime_builtin);
    tcase_add_test(files, test_mime_many);
    tcase_add_test(files, test_mime_system_file);
    tcase_add_test(files, test_open_files);
    tcase_add_test(files, test_open_symlink_inside);
    tcase_add_test(files, test_open_symlink_out);
    tcase_add_test(files, test_open_fifo_does_not_block);
    tcase_add_test(files, test_open_no_magic_link);
    tcase_add_test(files, test_open_long_name);
    suite_add_tcase(s, files);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(static_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
