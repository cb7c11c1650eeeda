/* tlspick.h - what sluice itself decides from a TLS handshake: which
 * certificate serves the server name a client asks for (SNI), and which
 * protocol ALPN settles on.
 *
 * Pure functions over bytes, without OpenSSL: tlsctx.c calls them from
 * its handshake callbacks with what OpenSSL parsed, and the unit tests and
 * the fuzz target (tests/fuzz/fuzz_tls.c) call them with anything.
 */
#ifndef SL_TLSPICK_H
#define SL_TLSPICK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A host name is 255 bytes at most (RFC 6066 3, OpenSSL's limit). */
#define SL_TLSPICK_HOST_MAX 255

/* Room for the server's ALPN offer in wire form: "h2" and "http/1.1"
 * take 12 bytes. */
#define SL_TLSPICK_ALPN_MAX 64

/* One name a certificate is for, as its certificate says it. */
typedef struct {
    const char *name; /* borrowed; LEN bytes, no NUL needed */
    size_t len;
    int pair; /* the --certfile pair the certificate came from */
} sl_tlspick_name_t;

/* The protocols the server speaks, in wire form (a length byte before
 * each name), its preference first. */
typedef struct {
    uint8_t wire[SL_TLSPICK_ALPN_MAX];
    size_t len;
} sl_tlspick_alpn_t;

/* Does the certificate name PATTERN[0..PLEN) cover the host HOST[0..HLEN)?
 * ASCII case aside, the same bytes; or PATTERN is a wildcard, "*." then
 * two labels or more, and HOST is one label (letters, digits, '-') then
 * the same labels (RFC 9525 6.3: the star stands for one whole label). A
 * NUL in either, an empty or over-long HOST, any other star: false. */
bool sl_tlspick_covers(const char *pattern, size_t plen, const char *host,
                       size_t hlen);

/* The certificate for the server name HOST[0..HLEN): the pair of the first
 * of NAMES[0..N) that covers it, or -1 when none does (the first pair
 * serves then, as when the client names no server). */
int sl_tlspick_server(const sl_tlspick_name_t *names, int n, const char *host,
                      size_t hlen);

/* Make OFFER of the protocol names NAMES[0..N), the first preferred. 0, or
 * -1 when a name is empty or longer than 255 bytes, or they do not fit
 * (then OFFER is empty). */
int sl_tlspick_alpn_offer(sl_tlspick_alpn_t *offer, const char *const *names,
                          int n);

/* The protocol to speak, from the client's list CLIENT[0..LEN) (wire
 * form): the first of OFFER's that the client lists too. 0 with *OUT
 * pointing into OFFER (it lives as long as OFFER) and its length in
 * *OUTLEN; -1 when no protocol is in both, or CLIENT is no list (empty, a
 * name of length 0, a length past the end): the handshake fails (RFC 7301
 * 3.2, no_application_protocol). */
int sl_tlspick_alpn(const sl_tlspick_alpn_t *offer, const uint8_t *client,
                    size_t len, const uint8_t **out, uint8_t *outlen);

#endif
