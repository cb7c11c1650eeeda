/* tlsctx.c - builds the listeners' TLS context (OpenSSL 3) from the
 * options.
 *
 * The defaults are the ones a review asks for: TLS 1.2 and 1.3 only, the
 * server's cipher order, no renegotiation (a client could make us redo
 * the costly half of a handshake at will), no compression (CRIME), TLS 1.2
 * suites with ECDHE only (no DH parameters are set, so a DHE suite named
 * in --ciphers cannot be chosen either). ALPN offers the protocols a
 * worker speaks (protocols(): --http-protocols, h2 and http/1.1), the server's
 * choice first, so h2 goes first there once there is an HTTP/2 session.
 *
 * The modes are the transport's (worker/loop/tls.c): a write may end
 * after part of its buffer, be retried from another address (the output
 * moves), and OpenSSL gives back its buffers while a connection is idle,
 * so a kept-alive TLS connection costs what a plain one does plus its SSL.
 *
 * A key file must not be encrypted: the password callback refuses at once
 * instead of OpenSSL asking on the terminal of a server that has none.
 *
 * Each certificate served carries its own PEM text (in the X509's extra
 * data, freed with it), made once here: the ASGI TLS extension shows it
 * with every request, and the loop must not encode it for each.
 *
 * Several certificates (--certfile and --keyfile repeated, in pairs):
 * the names a certificate is for are its own (its DNS subject alternative
 * names, its common name without them), so nothing is said twice. Pairs
 * whose certificates name the same hosts with keys of different types (an
 * RSA and an ECDSA one) share a context, where OpenSSL picks the one the
 * client can check; any other pair gets a context of its own. The
 * listeners serve the first pair's context, and the client's server name
 * (SNI) moves a connection to the first context whose certificate names
 * it, during the handshake; a name no certificate has, or none, stays
 * with the first. Every context has the same policy and client CAs.
 *
 * What is chosen (the certificate for a name, the ALPN protocol) is
 * decided by tlspick.c over plain bytes, the names copied out of the
 * certificates once here, so the decisions are tested and fuzzed without
 * OpenSSL.
 *
 * Session tickets are sealed and opened with the supervisor's keys
 * (supervisor/tickets.h), the same in every worker, so a session resumes
 * on any of them; a worker issues none before it has them.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <stdlib.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/log.h"
#include "worker/loop/tlsctx.h"
#include "worker/loop/tlspick.h"

/* The most protocols ALPN offers. */
#define SL_TLS_PROTOCOLS 4

/* The protocols ALPN offers, the ones a worker speaks, into NAMES (room
 * for SL_TLS_PROTOCOLS), the server's preference first; their count. */
static int protocols(const sl_options_t *o, const char **names)
{
    int i, n = 0;

    for (i = 0; i < o->nhttp_protocols && n < SL_TLS_PROTOCOLS; i++)
        names[n++] = o->http_protocols[i] == SL_PROTO_H2 ? "h2" : "http/1.1";
    return n;
}

/* ARG is the offer (sl_tlspick_alpn_t); what tlspick.c chooses, or, with
 * no protocol in common, a fatal alert (RFC 7301 3.2: that client speaks
 * nothing we do). */
static int alpn_select(SSL *ssl, const unsigned char **out,
                       unsigned char *outlen, const unsigned char *in,
                       unsigned inlen, void *arg)
{
    (void)ssl;
    if (sl_tlspick_alpn(arg, in, inlen, out, outlen) < 0)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    return SSL_TLSEXT_ERR_OK;
}

/* The session ticket keys (SL_CTL_TICKET_KEY bytes each: name, HMAC key,
 * AES key): [0] seals, all open. Loop thread. */
static struct {
    uint8_t key[2][SL_CTL_TICKET_KEY];
    int n;
} tickets;

void sl_tlsctx_ticket_keys(const uint8_t (*keys)[SL_CTL_TICKET_KEY], int n)
{
    tickets.n = n < 0 ? 0 : n > 2 ? 2 : n;
    memcpy(tickets.key, keys, (size_t)tickets.n * SL_CTL_TICKET_KEY);
}

/* OpenSSL seals (ENC) or opens a ticket: the key by NAME, the IV, the
 * cipher and the MAC. 1 done, 2 opened with the key before (a new ticket
 * follows, sealed with the current one), 0 no ticket (none to seal
 * with; a name not known: a full handshake), -1 failed. */
static int ticket_key(SSL *ssl, unsigned char name[16], unsigned char *iv,
                      EVP_CIPHER_CTX *cipher, EVP_MAC_CTX *mac, int enc)
{
    static char sha256[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, sha256, 0),
        OSSL_PARAM_construct_end(),
    };
    const uint8_t *k;
    int i = 0;

    (void)ssl;
    if (enc) {
        if (tickets.n == 0)
            return 0;
        memcpy(name, tickets.key[0], 16);
        if (RAND_bytes(iv, 16) != 1)
            return -1;
    } else {
        while (i < tickets.n && memcmp(name, tickets.key[i], 16) != 0)
            i++;
        if (i == tickets.n)
            return 0;
    }
    k = tickets.key[i];
    if (EVP_MAC_init(mac, k + 16, 32, params) != 1 ||
        EVP_CipherInit_ex(cipher, EVP_aes_256_cbc(), NULL, k + 48, iv, enc) !=
            1)
        return -1;
    return i == 0 ? 1 : 2;
}

/* The X509 extra-data index of a certificate's PEM text; -1 before the
 * first context. */
static int pem_index = -1;

static void pem_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
                     long argl, void *argp)
{
    (void)parent;
    (void)ad;
    (void)idx;
    (void)argl;
    (void)argp;
    free(ptr);
}

/* Give CERT its PEM text. 0, or -1 when out of memory. */
static int attach_pem(X509 *cert)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *data, *pem = NULL;
    long n;

    if (pem_index < 0)
        pem_index = X509_get_ex_new_index(0, NULL, NULL, NULL, pem_free);
    if (b == NULL || pem_index < 0 || PEM_write_bio_X509(b, cert) != 1 ||
        (n = BIO_get_mem_data(b, &data)) < 0 ||
        (pem = malloc((size_t)n + 1)) == NULL)
        goto out_free;
    memcpy(pem, data, (size_t)n);
    pem[n] = '\0';
    if (X509_set_ex_data(cert, pem_index, pem) != 1)
        goto out_free;
    BIO_free(b);
    return 0;

out_free:
    free(pem);
    BIO_free(b);
    ERR_clear_error();
    return -1;
}

const char *sl_tlsctx_cert_pem(const X509 *cert)
{
    if (cert == NULL || pem_index < 0)
        return NULL;
    return X509_get_ex_data(cert, pem_index);
}

static int no_password(char *buf, int size, int rwflag, void *arg)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)arg;
    return -1;
}

/* OpenSSL's reason for the failure (the first in its queue: the one
 * that says what was wrong with the input), and its queue emptied. */
static const char *ssl_reason(void)
{
    unsigned long e = ERR_peek_error();
    const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;

    ERR_clear_error();
    return r != NULL ? r : "unknown error";
}

/* Can PATH, given as --OPTION, be read? Its errno in ERR when not. */
static int readable(const char *option, const char *path, char *err,
                    size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        snprintf(err, size, "cannot read --%s %s: %s", option, path,
                 strerror(errno));
        return -1;
    }
    close(fd);
    return 0;
}

/* Load the certificate chain in CERT and its key in KEY into CTX; the
 * certificate is CTX's current one after. */
static int load_pair(SSL_CTX *ctx, const char *cert, const char *key, char *err,
                     size_t size)
{
    if (readable("certfile", cert, err, size) < 0 ||
        readable("keyfile", key, err, size) < 0)
        return -1;
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        snprintf(err, size, "--certfile %s: no PEM certificate in it (%s)",
                 cert, ssl_reason());
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        unsigned long e = ERR_peek_last_error();
        if (ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH)
            snprintf(err, size, "--keyfile %s does not match --certfile %s",
                     key, cert);
        else
            snprintf(err, size,
                     "--keyfile %s: no unencrypted PEM private key in it"
                     " (%s)",
                     key, ssl_reason());
        ERR_clear_error();
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        snprintf(err, size, "--keyfile %s does not match --certfile %s", key,
                 cert);
        return -1;
    }
    if (attach_pem(SSL_CTX_get0_certificate(ctx)) < 0) {
        snprintf(err, size, "out of memory for --certfile %s", cert);
        return -1;
    }
    return 0;
}

/* --ca-certs and --cert-reqs: which client certificates are asked for,
 * and checked against what. */
static int load_client_cas(SSL_CTX *ctx, const sl_options_t *o, char *err,
                           size_t size)
{
    STACK_OF(X509_NAME) * names;
    int mode = SSL_VERIFY_NONE;

    if (o->ca_certs == NULL)
        return 0;
    if (readable("ca-certs", o->ca_certs, err, size) < 0)
        return -1;
    names = SSL_load_client_CA_file(o->ca_certs);
    if (SSL_CTX_load_verify_locations(ctx, o->ca_certs, NULL) != 1 ||
        names == NULL) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        snprintf(err, size, "--ca-certs %s: no PEM certificate in it (%s)",
                 o->ca_certs, ssl_reason());
        return -1;
    }
    SSL_CTX_set_client_CA_list(ctx, names);
    if (o->cert_reqs != SL_CERT_NONE)
        mode = SSL_VERIFY_PEER;
    if (o->cert_reqs == SL_CERT_REQUIRED)
        mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx, mode, NULL);
    return 0;
}

/* The protocol, options and modes every connection gets. */
static int set_policy(SSL_CTX *ctx, const sl_options_t *o, char *err,
                      size_t size)
{
    static const unsigned char sid[] = "sluice";
    int min = o->tls_min == SL_TLS_1_3 ? TLS1_3_VERSION : TLS1_2_VERSION;

    if (SSL_CTX_set_min_proto_version(ctx, min) != 1) {
        snprintf(err, size, "cannot set the oldest TLS version (%s)",
                 ssl_reason());
        return -1;
    }
    SSL_CTX_set_options(
        ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION |
                 SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_set_cipher_list(ctx, o->ciphers) != 1) {
        snprintf(err, size,
                 "--ciphers '%s': no cipher suite OpenSSL knows"
                 " (%s)",
                 o->ciphers, ssl_reason());
        return -1;
    }
    /* client certificates and resumed sessions need one */
    (void)SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
    /* resumption by ticket only (a session cache would be one worker's),
     * with the supervisor's keys; --ssl-ticket-rotation 0: none */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (o->ticket_rotation > 0) {
        SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_key);
    } else {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        (void)SSL_CTX_set_num_tickets(ctx, 0);
    }
    SSL_CTX_set_default_passwd_cb(ctx, no_password);
    return 0;
}

/* The contexts of the certificates served (the essay above): the
 * default's first. Kept in the default context's extra data and freed
 * with it. */
typedef struct {
    int ncontexts;
    SSL_CTX *ctx[SL_MAX_CERTS]; /* [0] the default (borrowed: it owns this
                                   table), the rest owned */
    int npairs;
    X509 *leaf[SL_MAX_CERTS]; /* borrowed (its context's): pair I's
                                 certificate */
    int of[SL_MAX_CERTS];     /* the context pair I is in */
    sl_tlspick_name_t *names; /* owned, and each name: the names the
                                 certificates are for, pair by pair */
    int nnames, names_cap;
    sl_tlspick_alpn_t alpn; /* what every context offers */
} sni_t;

/* The extra-data index of a default context's sni_t; -1 before the
 * first. */
static int sni_index = -1;

static void free_names(sni_t *sni)
{
    int i;

    for (i = 0; i < sni->nnames; i++)
        free((char *)sni->names[i].name);
    free(sni->names);
}

static void sni_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
                     long argl, void *argp)
{
    sni_t *sni = ptr;
    int i;

    (void)parent;
    (void)ad;
    (void)idx;
    (void)argl;
    (void)argp;
    if (sni == NULL)
        return;
    for (i = 1; i < sni->ncontexts; i++)
        SSL_CTX_free(sni->ctx[i]);
    free_names(sni);
    free(sni);
}

/* The DNS names CERT is for, or NULL (then its subject stands). */
static GENERAL_NAMES *dns_names(const X509 *cert)
{
    return X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
}

/* Does NAMES hold the DNS name S (case aside)? And how many DNS names
 * does it hold, in *N? */
static bool has_dns(const GENERAL_NAMES *names, const ASN1_IA5STRING *s, int *n)
{
    bool found = false;
    int i;

    *n = 0;
    for (i = 0; i < sk_GENERAL_NAME_num(names); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        if (g->type != GEN_DNS)
            continue;
        (*n)++;
        if (s != NULL &&
            ASN1_STRING_length(g->d.dNSName) == ASN1_STRING_length(s) &&
            strncasecmp((const char *)ASN1_STRING_get0_data(g->d.dNSName),
                        (const char *)ASN1_STRING_get0_data(s),
                        (size_t)ASN1_STRING_length(s)) == 0)
            found = true;
    }
    return found;
}

/* Are A and B for the same hosts: the same DNS names, or without any,
 * the same subject? */
static bool same_names(const X509 *a, const X509 *b)
{
    GENERAL_NAMES *na = dns_names(a), *nb = dns_names(b);
    int i, count_a = 0, count_b = 0, k;
    bool same = true;

    (void)has_dns(na, NULL, &count_a);
    (void)has_dns(nb, NULL, &count_b);
    if (count_a == 0 || count_b == 0) {
        same =
            count_a == count_b && X509_NAME_cmp(X509_get_subject_name(a),
                                                X509_get_subject_name(b)) == 0;
    } else {
        same = count_a == count_b;
        for (i = 0; same && i < sk_GENERAL_NAME_num(na); i++) {
            const GENERAL_NAME *g = sk_GENERAL_NAME_value(na, i);
            if (g->type == GEN_DNS)
                same = has_dns(nb, g->d.dNSName, &k);
        }
    }
    GENERAL_NAMES_free(na);
    GENERAL_NAMES_free(nb);
    ERR_clear_error();
    return same;
}

static int key_type(const X509 *cert)
{
    return EVP_PKEY_get_base_id(X509_get0_pubkey(cert));
}

/* The client named a server: move SSL to the context of the first
 * certificate that is for it (tlspick.c decides); the default when none
 * is, or none was named. */
static int pick_context(SSL *ssl, int *alert, void *arg)
{
    const sni_t *sni = arg;
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    int pair, c;

    (void)alert;
    if (name == NULL)
        return SSL_TLSEXT_ERR_OK;
    pair = sl_tlspick_server(sni->names, sni->nnames, name, strlen(name));
    c = pair < 0 ? 0 : sni->of[pair];
    if (c != 0 && SSL_set_SSL_CTX(ssl, sni->ctx[c]) == NULL) {
        ERR_clear_error();
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    return SSL_TLSEXT_ERR_OK;
}

/* Add NAME[0..LEN), a name pair PAIR's certificate is for, to SNI's
 * table (a copy). -1 when out of memory. */
static int add_name(sni_t *sni, const unsigned char *name, size_t len, int pair)
{
    sl_tlspick_name_t *grown;
    char *copy;
    int cap;

    if (sni->nnames == sni->names_cap) {
        cap = sni->names_cap > 0 ? 2 * sni->names_cap : 8;
        grown = realloc(sni->names, (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            return -1;
        sni->names = grown;
        sni->names_cap = cap;
    }
    if ((copy = malloc(len > 0 ? len : 1)) == NULL)
        return -1;
    memcpy(copy, name, len);
    sni->names[sni->nnames++] = (sl_tlspick_name_t){copy, len, pair};
    return 0;
}

/* Add the names CERT, pair PAIR's, is for to SNI's table: its DNS names,
 * or without any, its subject's common names (what a client checks). -1
 * when out of memory. */
static int add_names(sni_t *sni, const X509 *cert, int pair)
{
    GENERAL_NAMES *dns = dns_names(cert);
    const X509_NAME *subject = X509_get_subject_name(cert);
    unsigned char *utf8;
    int i, n, rc = 0, before = sni->nnames;
    bool any_dns;

    for (i = 0; rc == 0 && i < sk_GENERAL_NAME_num(dns); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(dns, i);
        if (g->type == GEN_DNS)
            rc = add_name(sni, ASN1_STRING_get0_data(g->d.dNSName),
                          (size_t)ASN1_STRING_length(g->d.dNSName), pair);
    }
    any_dns = sni->nnames > before;
    GENERAL_NAMES_free(dns);
    i = -1;
    while (rc == 0 && !any_dns &&
           (i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) >= 0) {
        n = ASN1_STRING_to_UTF8(
            &utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i)));
        if (n < 0)
            continue;
        rc = add_name(sni, utf8, (size_t)n, pair);
        OPENSSL_free(utf8);
    }
    ERR_clear_error();
    return rc;
}

/* A context with O's policy and client CAs, no certificate yet. */
static SSL_CTX *new_context(const sl_options_t *o, char *err, size_t size)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (ctx == NULL) {
        snprintf(err, size, "SSL_CTX_new() failed (%s)", ssl_reason());
        return NULL;
    }
    if (set_policy(ctx, o, err, size) < 0 ||
        load_client_cas(ctx, o, err, size) < 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* The context pair I of O goes into: the one of an earlier pair for the
 * same hosts with a key of another type, else a new one (SNI->ncontexts).
 * -1 when an earlier pair has the same hosts and key type: only one of
 * them could ever be served. */
static int context_of(const sni_t *sni, const sl_options_t *o, int i,
                      X509 *cert, char *err, size_t size)
{
    int k, c = sni->ncontexts;

    for (k = 0; k < i; k++) {
        if (!same_names(sni->leaf[k], cert))
            continue;
        if (key_type(sni->leaf[k]) == key_type(cert)) {
            snprintf(err, size,
                     "--certfile %s is for the same names as --certfile %s,"
                     " with the same type of key: only one could be served",
                     o->certfiles[i], o->certfiles[k]);
            return -1;
        }
        c = sni->of[k];
    }
    return c;
}

/* The certificate in PATH (its first), to learn its names before it is
 * loaded; NULL after ERR says why. */
static X509 *peek_cert(const char *path, char *err, size_t size)
{
    BIO *b;
    X509 *x;

    if (readable("certfile", path, err, size) < 0)
        return NULL;
    b = BIO_new_file(path, "r");
    x = b != NULL ? PEM_read_bio_X509(b, NULL, no_password, NULL) : NULL;
    BIO_free(b);
    if (x == NULL)
        snprintf(err, size, "--certfile %s: no PEM certificate in it (%s)",
                 path, ssl_reason());
    return x;
}

/* Load O's pair I into its context in SNI (a new one if it needs one). */
static int add_pair(sni_t *sni, const sl_options_t *o, int i, char *err,
                    size_t size)
{
    X509 *cert = peek_cert(o->certfiles[i], err, size);
    int c;

    if (cert == NULL)
        return -1;
    /* the pairs so far are leaf[0..i): context_of() compares with them */
    c = context_of(sni, o, i, cert, err, size);
    X509_free(cert);
    if (c < 0)
        return -1;
    if (c == sni->ncontexts) {
        if ((sni->ctx[c] = new_context(o, err, size)) == NULL)
            return -1;
        sni->ncontexts++;
    }
    if (load_pair(sni->ctx[c], o->certfiles[i], o->keyfiles[i], err, size) < 0)
        return -1;
    sni->leaf[i] = SSL_CTX_get0_certificate(sni->ctx[c]);
    sni->of[i] = c;
    sni->npairs = i + 1;
    if (add_names(sni, sni->leaf[i], i) < 0) {
        snprintf(err, size, "out of memory for --certfile %s", o->certfiles[i]);
        return -1;
    }
    return 0;
}

/* Every context of SNI offers O's protocols (a connection SNI moved
 * chooses with its new context's callback). */
static int set_alpn(sni_t *sni, const sl_options_t *o, char *err, size_t size)
{
    const char *names[SL_TLS_PROTOCOLS];
    int i;

    if (sl_tlspick_alpn_offer(&sni->alpn, names, protocols(o, names)) < 0) {
        snprintf(err, size, "the ALPN protocols do not fit");
        return -1;
    }
    for (i = 0; i < sni->ncontexts; i++)
        SSL_CTX_set_alpn_select_cb(sni->ctx[i], alpn_select, &sni->alpn);
    return 0;
}

SSL_CTX *sl_tlsctx_new(const sl_options_t *o, char *err, size_t size)
{
    sni_t *sni = calloc(1, sizeof(*sni));
    SSL_CTX *ctx;
    int i;

    if (sni == NULL) {
        snprintf(err, size, "out of memory for the TLS contexts");
        return NULL;
    }
    if (sni_index < 0)
        sni_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, sni_free);
    for (i = 0; i < o->ncertfiles; i++)
        if (add_pair(sni, o, i, err, size) < 0)
            goto out_free;
    if (set_alpn(sni, o, err, size) < 0)
        goto out_free;
    ctx = sni->ctx[0];
    if (ctx == NULL || sni_index < 0 ||
        SSL_CTX_set_ex_data(ctx, sni_index, sni) != 1) {
        if (ctx != NULL)
            snprintf(err, size, "SSL_CTX_set_ex_data() failed (%s)",
                     ssl_reason());
        goto out_free;
    }
    if (sni->ncontexts > 1) {
        SSL_CTX_set_tlsext_servername_callback(ctx, pick_context);
        SSL_CTX_set_tlsext_servername_arg(ctx, sni);
    }
    return ctx;

out_free:
    for (i = 0; i < sni->ncontexts; i++)
        SSL_CTX_free(sni->ctx[i]);
    free_names(sni);
    free(sni);
    return NULL;
}

/* Warn when CERT, from --certfile PATH, is out of its dates: it serves,
 * but clients that check refuse it. */
static void warn_dates(const X509 *cert, const char *path)
{
    const ASN1_TIME *end = X509_get0_notAfter(cert);
    struct tm tm;
    char when[64] = "?";

    if (X509_cmp_current_time(end) < 0) {
        if (ASN1_TIME_to_tm(end, &tm) == 1)
            strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
        sl_warn("the certificate in --certfile %s expired on %s: clients"
                " will refuse it",
                path, when);
    } else if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
        sl_warn("the certificate in --certfile %s is not valid yet: clients"
                " will refuse it",
                path);
    }
}

int sl_tlsctx_check(const sl_options_t *o)
{
    char err[1024];
    const sni_t *sni;
    SSL_CTX *ctx;
    int i;

    if (o->certfile == NULL)
        return 0;
    ctx = sl_tlsctx_new(o, err, sizeof(err));
    if (ctx == NULL) {
        sl_log_usage("%s", err);
        return -1;
    }
    sni = SSL_CTX_get_ex_data(ctx, sni_index);
    for (i = 0; i < sni->npairs; i++)
        warn_dates(sni->leaf[i], o->certfiles[i]);
    SSL_CTX_free(ctx);
    return 0;
}
