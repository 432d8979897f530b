#include "session.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/hmac.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* An id whose tag matched for a principal key. The tag is a function of the id's
 * random part and expiry, the key and this context's secret alone, so a match holds
 * for the life of the context: a client's next requests on its session skip the
 * HMAC (the expiry is still checked on every request). */
typedef struct {
    char id[SESSION_ID_LEN];
    char key[sizeof(((principal *)0)->key)];
} verified_id;

#define VERIFIED_SLOTS 64 /* direct-mapped by the id's first random byte */

struct session_ctx {
    unsigned char secret[64];
    size_t secret_len;
    long max_age_s;
    store *st;
    EVP_MAC_CTX *mac; /* owned: HMAC-SHA256 keyed with secret, copied per tag (NULL: none) */
    verified_id verified[VERIFIED_SLOTS];
};

/* One pending store lookup or write; freed in its store callback. */
struct session_wait {
    session_cb cb;
    void *arg;
    store_op *op;
    int ending; /* session_end rather than session_verify */
};

#define ENDED_PREFIX "session:ended:"

session_ctx *session_new(const char *secret, long max_age_s, store *st)
{
    session_ctx *s = xcalloc(1, sizeof *s);
    s->st = st;
    if (secret && *secret) {
        /* Long secrets are hashed down to a fixed key. */
        unsigned int n = 0;
        EVP_Digest(secret, strlen(secret), s->secret, &n, EVP_sha256(), NULL);
        s->secret_len = n;
    } else {
        random_bytes(s->secret, 32);
        s->secret_len = 32;
    }
    s->max_age_s = max_age_s > 0 ? max_age_s : 86400;
    /* Keyed once: a copy of this context costs a fraction of a one-shot HMAC(),
     * which looks the algorithm up and keys it again for every tag. */
    EVP_MAC *m = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (m) {
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
            OSSL_PARAM_construct_end()};
        s->mac = EVP_MAC_CTX_new(m);
        if (s->mac && !EVP_MAC_init(s->mac, s->secret, s->secret_len, params)) {
            EVP_MAC_CTX_free(s->mac);
            s->mac = NULL;
        }
        EVP_MAC_free(m);
    }
    return s;
}

void session_free(session_ctx *s)
{
    if (!s)
        return;
    EVP_MAC_CTX_free(s->mac);
    OPENSSL_cleanse(s->secret, sizeof s->secret);
    free(s);
}

/* HMAC-SHA256(secret, msg) into md (32 bytes). */
static void mac_of(session_ctx *s, const char *msg, size_t len, unsigned char md[EVP_MAX_MD_SIZE])
{
    unsigned int mdlen = 0;
    EVP_MAC_CTX *c = s->mac ? EVP_MAC_CTX_dup(s->mac) : NULL;
    size_t n = 0;
    if (!(c && EVP_MAC_update(c, (const unsigned char *)msg, len) &&
          EVP_MAC_final(c, md, &n, EVP_MAX_MD_SIZE)))
        HMAC(EVP_sha256(), s->secret, (int)s->secret_len, (const unsigned char *)msg, len, md,
             &mdlen);
    EVP_MAC_CTX_free(c);
}

void session_sign(session_ctx *s, const char *msg, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    mac_of(s, msg, len, md);
    hex_encode(md, 32, out);
}

/* tag = HMAC-SHA256(secret, random "|" expiry "|" principal key), 16 bytes as hex. */
static void tag_for(session_ctx *s, const char *rnd_hex, const char *exp_hex, const principal *who,
                    char out[33])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    buf msg = BUF_INIT;
    buf_puts(&msg, rnd_hex);
    buf_putc(&msg, '|');
    buf_puts(&msg, exp_hex);
    buf_putc(&msg, '|');
    buf_puts(&msg, who->key);
    EVP_MAC_CTX *c = s->mac ? EVP_MAC_CTX_dup(s->mac) : NULL;
    size_t n = 0;
    if (c && EVP_MAC_update(c, (const unsigned char *)msg.data, msg.len) &&
        EVP_MAC_final(c, md, &n, sizeof md))
        mdlen = (unsigned int)n;
    else
        HMAC(EVP_sha256(), s->secret, (int)s->secret_len, (const unsigned char *)msg.data, msg.len,
             md, &mdlen);
    EVP_MAC_CTX_free(c);
    buf_free(&msg);
    hex_encode(md, 16, out);
}

void session_mint(session_ctx *s, const principal *who, char out[SESSION_ID_LEN + 1])
{
    session_mint_flags(s, who, 0, out);
}

void session_mint_flags(session_ctx *s, const principal *who, unsigned flags,
                        char out[SESSION_ID_LEN + 1])
{
    unsigned char rnd[16];
    char rnd_hex[33], exp_hex[9], tag[33];
    random_bytes(rnd, sizeof rnd);
    /* the flags live in the low bit of the random part's last byte, under the tag */
    rnd[15] = (unsigned char)((rnd[15] & ~1u) | (flags & SESSION_FLAG_ELICITATION));
    hex_encode(rnd, sizeof rnd, rnd_hex);
    snprintf(exp_hex, sizeof exp_hex, "%08x",
             (unsigned)((uint64_t)(now_wall_ms() / 1000 + s->max_age_s) & 0xffffffffu));
    tag_for(s, rnd_hex, exp_hex, who, tag);
    memcpy(out, rnd_hex, 32);
    out[32] = '.';
    memcpy(out + 33, exp_hex, 8);
    out[41] = '.';
    memcpy(out + 42, tag, 32);
    out[74] = '\0';
}

unsigned session_id_flags(const char *id)
{
    if (!id || strlen(id) != SESSION_ID_LEN)
        return 0;
    char c = id[31];
    unsigned v = c >= 'a' ? (unsigned)(c - 'a' + 10) : (unsigned)(c - '0');
    return v & SESSION_FLAG_ELICITATION;
}

static int is_hex(const char *p, int n)
{
    for (int i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
    }
    return 1;
}

static unsigned nibble(char c)
{
    return c <= '9' ? (unsigned)(c - '0') : (unsigned)(c - 'a' + 10);
}

/* Seconds since the epoch at which id (well-formed) stops being valid. */
static int64_t expiry_of(const char *id)
{
    char exp_hex[9];
    memcpy(exp_hex, id + 33, 8);
    exp_hex[8] = '\0';
    return (int64_t)strtoul(exp_hex, NULL, 16);
}

session_status session_check_id(session_ctx *s, const principal *who, const char *id)
{
    if (!id || strlen(id) != SESSION_ID_LEN || id[32] != '.' || id[41] != '.' || !is_hex(id, 32) ||
        !is_hex(id + 33, 8) || !is_hex(id + 42, 32))
        return SESSION_INVALID;
    verified_id *v = &s->verified[(nibble(id[0]) << 4 | nibble(id[1])) % VERIFIED_SLOTS];
    if (CRYPTO_memcmp(v->id, id, SESSION_ID_LEN) != 0 || strcmp(v->key, who->key) != 0) {
        char rnd[33], exp_hex[9], tag[33];
        memcpy(rnd, id, 32);
        rnd[32] = '\0';
        memcpy(exp_hex, id + 33, 8);
        exp_hex[8] = '\0';
        tag_for(s, rnd, exp_hex, who, tag);
        if (CRYPTO_memcmp(tag, id + 42, 32) != 0)
            return SESSION_INVALID;
        memcpy(v->id, id, SESSION_ID_LEN);
        str_copy(v->key, sizeof v->key, who->key);
    }
    return expiry_of(id) > now_wall_ms() / 1000 ? SESSION_OK : SESSION_EXPIRED;
}

static void ended_key(const char *id, char out[sizeof ENDED_PREFIX + 32])
{
    memcpy(out, ENDED_PREFIX, sizeof ENDED_PREFIX - 1);
    memcpy(out + sizeof ENDED_PREFIX - 1, id, 32);
    out[sizeof ENDED_PREFIX - 1 + 32] = '\0';
}

static void on_store(int rc, const char *val, size_t len, void *arg)
{
    session_wait *w = arg;
    session_status st;
    if (rc < 0)
        st = SESSION_UNAVAILABLE;
    else if (w->ending)
        st = SESSION_ENDED; /* set answers 0 */
    else
        st = rc == 0 ? SESSION_ENDED : SESSION_OK;
    session_cb cb = w->cb;
    void *cb_arg = w->arg;
    free(w);
    cb(st, cb_arg);
}

int session_verify(session_ctx *s, const principal *who, const char *id, session_cb cb, void *arg,
                   session_wait **wait)
{
    session_status st = session_check_id(s, who, id);
    if (st != SESSION_OK)
        return st;
    char key[sizeof ENDED_PREFIX + 32];
    ended_key(id, key);
    session_wait *w = xcalloc(1, sizeof *w);
    w->cb = cb;
    w->arg = arg;
    w->op = store_get(s->st, key, on_store, w);
    *wait = w;
    return 0;
}

session_wait *session_end(session_ctx *s, const char *id, session_cb cb, void *arg)
{
    char key[sizeof ENDED_PREFIX + 32];
    ended_key(id, key);
    session_wait *w = xcalloc(1, sizeof *w);
    w->cb = cb;
    w->arg = arg;
    w->ending = 1;
    /* kept while the id could still be presented: until its expiry */
    int64_t left = expiry_of(id) - now_wall_ms() / 1000;
    if (left < 1)
        left = 1;
    if (left > s->max_age_s)
        left = s->max_age_s;
    w->op = store_set(s->st, key, "1", 1, left * 1000, on_store, w);
    return w;
}

void session_cancel(session_wait *w)
{
    if (!w)
        return;
    store_cancel(w->op); /* the callback will not run: free the wait now */
    free(w);
}
