#include "session.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct session_ctx {
    unsigned char secret[64];
    size_t secret_len;
    long ended_ttl_s;
    store *st;
};

/* One pending store lookup or write; freed in its store callback. */
struct session_wait {
    session_cb cb;
    void *arg;
    store_op *op;
    int ending; /* session_end rather than session_verify */
};

#define ENDED_PREFIX "session:ended:"

session_ctx *session_new(const char *secret, long ended_ttl_s, store *st)
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
    s->ended_ttl_s = ended_ttl_s > 0 ? ended_ttl_s : 86400;
    return s;
}

void session_free(session_ctx *s)
{
    if (!s)
        return;
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

static int is_hex32(const char *p)
{
    for (int i = 0; i < 32; i++) {
        char c = p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
    }
    return 1;
}

session_status session_check_id(session_ctx *s, const principal *who, const char *id)
{
    if (!id || strlen(id) != SESSION_ID_LEN || id[32] != '.' || !is_hex32(id) || !is_hex32(id + 33))
        return SESSION_INVALID;
    char rnd[33], tag[33];
    memcpy(rnd, id, 32);
    rnd[32] = '\0';
    tag_for(s, rnd, who, tag);
    return CRYPTO_memcmp(tag, id + 33, 32) == 0 ? SESSION_OK : SESSION_INVALID;
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
    if (session_check_id(s, who, id) != SESSION_OK)
        return SESSION_INVALID;
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
    w->op = store_set(s->st, key, "1", 1, s->ended_ttl_s * 1000, on_store, w);
    return w;
}

void session_cancel(session_wait *w)
{
    if (!w)
        return;
    store_cancel(w->op); /* the callback will not run: free the wait now */
    free(w);
}
