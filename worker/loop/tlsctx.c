/* tlsctx.c - builds the listeners' TLS context (OpenSSL 3) from the
 * options.
 *
 * The defaults are the ones a review asks for: TLS 1.2 and 1.3 only, the
 * server's cipher order, no renegotiation (a client could make us redo
 * the costly half of a handshake at will), no compression (CRIME), TLS 1.2
 * suites with ECDHE only (no DH parameters are set, so a DHE suite named
 * in --ciphers cannot be chosen either). ALPN says http/1.1; the list is
 * in the server's order, so h2 goes first once there is an HTTP/2 session.
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
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <stdlib.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/log.h"
#include "worker/loop/tlsctx.h"

/* ALPN, the wire's form: a length byte before each name, the server's
 * preference first. */
static const unsigned char alpn_offer[] = "\x08http/1.1";

static int alpn_select(SSL *ssl, const unsigned char **out,
                       unsigned char *outlen, const unsigned char *in,
                       unsigned inlen, void *arg)
{
    unsigned char *chosen;

    (void)ssl;
    (void)arg;
    /* the first of ours the client offers; none in common is fatal
     * (RFC 7301 3.2): that client speaks nothing we do */
    if (SSL_select_next_proto(&chosen, outlen, alpn_offer,
                              sizeof(alpn_offer) - 1, in,
                              inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
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

static int load_pair(SSL_CTX *ctx, const sl_options_t *o, char *err,
                     size_t size)
{
    if (readable("certfile", o->certfile, err, size) < 0 ||
        readable("keyfile", o->keyfile, err, size) < 0)
        return -1;
    if (SSL_CTX_use_certificate_chain_file(ctx, o->certfile) != 1) {
        snprintf(err, size, "--certfile %s: no PEM certificate in it (%s)",
                 o->certfile, ssl_reason());
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, o->keyfile, SSL_FILETYPE_PEM) != 1) {
        unsigned long e = ERR_peek_last_error();
        if (ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH)
            snprintf(err, size, "--keyfile %s does not match --certfile %s",
                     o->keyfile, o->certfile);
        else
            snprintf(err, size,
                     "--keyfile %s: no unencrypted PEM private key in it"
                     " (%s)",
                     o->keyfile, ssl_reason());
        ERR_clear_error();
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        snprintf(err, size, "--keyfile %s does not match --certfile %s",
                 o->keyfile, o->certfile);
        return -1;
    }
    if (attach_pem(SSL_CTX_get0_certificate(ctx)) < 0) {
        snprintf(err, size, "out of memory for --certfile %s", o->certfile);
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
    SSL_CTX_set_default_passwd_cb(ctx, no_password);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    return 0;
}

SSL_CTX *sl_tlsctx_new(const sl_options_t *o, char *err, size_t size)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (ctx == NULL) {
        snprintf(err, size, "SSL_CTX_new() failed (%s)", ssl_reason());
        return NULL;
    }
    if (set_policy(ctx, o, err, size) < 0 || load_pair(ctx, o, err, size) < 0 ||
        load_client_cas(ctx, o, err, size) < 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* Warn when CTX's certificate is out of its dates: it serves, but
 * clients that check refuse it. */
static void warn_dates(SSL_CTX *ctx, const char *path)
{
    X509 *cert = SSL_CTX_get0_certificate(ctx);
    const ASN1_TIME *end;
    struct tm tm;
    char when[64] = "?";

    if (cert == NULL)
        return;
    end = X509_get0_notAfter(cert);
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
    SSL_CTX *ctx;

    if (o->certfile == NULL)
        return 0;
    ctx = sl_tlsctx_new(o, err, sizeof(err));
    if (ctx == NULL) {
        sl_log_usage("%s", err);
        return -1;
    }
    warn_dates(ctx, o->certfile);
    SSL_CTX_free(ctx);
    return 0;
}
