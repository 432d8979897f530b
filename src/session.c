#include "session.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef struct ended {
    char rnd[33];
    int64_t expires_ms;
    struct ended *next;
} ended;

#define ENDED_BUCKETS 1024

struct session_ctx {
    unsigned char secret[64];
    size_t secret_len;
    long ended_ttl_s;
    ended *buckets[ENDED_BUCKETS];
    size_t n_ended;
};

session_ctx *session_new(const char *secret, long ended_ttl_s)
{
    session_ctx *s = xcalloc(1, sizeof *s);
    if (secret && *secret) {
        /* Long secrets are hashed down to a fixed key. */
        unsigned int n = 0;
        EVP_Digest(secret, strlen(secret), s->secret, &n, EVP_sha256(), NULL);
        s->secret_len = n;
    } else {
        random_bytes(s->secret, 32);
        s->secret_len = 32;
    }
    s->ended_ttl_s = ended_ttl_s > 0 ? ended_ttl_s : 86400;
    return s;
}

void session_free(session_ctx *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < ENDED_BUCKETS; i++) {
        ended *e = s->buckets[i];
        while (e) {
            ended *next = e->next;
            free(e);
            e = next;
        }
    }
    OPENSSL_cleanse(s->secret, sizeof s->secret);
    free(s);
}

static void tag_for(session_ctx *s, const char *rnd_hex, const principal *who, char out[33])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    buf msg = BUF_INIT;
    buf_puts(&msg, rnd_hex);
    buf_putc(&msg, '|');
    buf_puts(&msg, who->key);
    HMAC(EVP_sha256(), s->secret, (int)s->secret_len, (const unsigned char *)msg.data, msg.len, md,
         &mdlen);
    buf_free(&msg);
    hex_encode(md, 16, out);
}

void session_mint(session_ctx *s, const principal *who, char out[SESSION_ID_LEN + 1])
{
    unsigned char rnd[16];
    char rnd_hex[33], tag[33];
    random_bytes(rnd, sizeof rnd);
    hex_encode(rnd, sizeof rnd, rnd_hex);
    tag_for(s, rnd_hex, who, tag);
    memcpy(out, rnd_hex, 32);
    out[32] = '.';
    memcpy(out + 33, tag, 32);
    out[65] = '\0';
}

static unsigned bucket_of(const char *rnd)
{
    unsigned h = 2166136261u;
    for (int i = 0; i < 32; i++)
        h = (h ^ (unsigned char)rnd[i]) * 16777619u;
    return h % ENDED_BUCKETS;
}

static int is_hex32(const char *p)
{
    for (int i = 0; i < 32; i++) {
        char c = p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
    }
    return 1;
}

static int is_ended(session_ctx *s, const char *rnd)
{
    int64_t now = now_wall_ms();
    ended **pp = &s->buckets[bucket_of(rnd)];
    while (*pp) {
        ended *e = *pp;
        if (e->expires_ms <= now) { /* prune expired entries as we walk */
            *pp = e->next;
            free(e);
            s->n_ended--;
            continue;
        }
        if (memcmp(e->rnd, rnd, 32) == 0)
            return 1;
        pp = &e->next;
    }
    return 0;
}

session_status session_verify(session_ctx *s, const principal *who, const char *id)
{
    if (!id || strlen(id) != SESSION_ID_LEN || id[32] != '.' || !is_hex32(id) || !is_hex32(id + 33))
        return SESSION_INVALID;
    char rnd[33], tag[33];
    memcpy(rnd, id, 32);
    rnd[32] = '\0';
    tag_for(s, rnd, who, tag);
    if (CRYPTO_memcmp(tag, id + 33, 32) != 0)
        return SESSION_INVALID;
    return is_ended(s, rnd) ? SESSION_ENDED : SESSION_OK;
}

void session_end(session_ctx *s, const char *id)
{
    if (!id || strlen(id) != SESSION_ID_LEN)
        return;
    if (is_ended(s, id))
        return;
    ended *e = xcalloc(1, sizeof *e);
    memcpy(e->rnd, id, 32);
    e->expires_ms = now_wall_ms() + (int64_t)s->ended_ttl_s * 1000;
    unsigned b = bucket_of(id);
    e->next = s->buckets[b];
    s->buckets[b] = e;
    s->n_ended++;
}

size_t session_ended_count(const session_ctx *s)
{
    return s->n_ended;
}
