#include "util.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static void oom(void)
{
    fputs("context-loader: out of memory\n", stderr);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom();
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* Freed blocks of 2, 4, 8 and 16 kB, up to BUF_KEEP of each, kept for the next
 * buffer that grows to that size: a request's buffers (the upstream body, the
 * encoded result, the reply) grow to a few kB and are freed when it ends, so the
 * next request's take them instead of going through malloc's bins at each
 * doubling. Per thread, no lock; at most 120 kB per thread. None under
 * AddressSanitizer (BUF_REUSE, util.h): a kept block would hide a use after free. */
#define BUF_CLASS_MIN 2048
#define BUF_CLASSES 4
#define BUF_KEEP 4
static __thread struct {
    int n;
    char *blk[BUF_KEEP];
} buf_kept[BUF_CLASSES];

/* The class of a block of cap bytes, or -1 when such blocks are not kept (caps are
 * 64 doubled, so every cap of 2 to 16 kB is a class's). */
static inline int buf_class(size_t cap)
{
    if (cap < BUF_CLASS_MIN || cap > (size_t)BUF_CLASS_MIN << (BUF_CLASSES - 1) ||
        (cap & (cap - 1)))
        return -1;
    return __builtin_ctzll(cap) - __builtin_ctz(BUF_CLASS_MIN);
}

/* Keeps the block p of cap bytes or frees it. */
static void buf_release(char *p, size_t cap)
{
    int k = buf_class(cap);
    if (BUF_REUSE && k >= 0 && buf_kept[k].n < BUF_KEEP)
        buf_kept[k].blk[buf_kept[k].n++] = p;
    else
        free(p);
}

void buf_reserve(buf *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    int k = buf_class(cap);
    if (BUF_REUSE && k >= 0 && buf_kept[k].n) {
        char *p = buf_kept[k].blk[--buf_kept[k].n];
        if (b->data) {
            memcpy(p, b->data, b->len + 1);
            buf_release(b->data, b->cap);
        }
        b->data = p;
    } else {
        b->data = xrealloc(b->data, cap);
    }
    b->cap = cap;
}

void buf_append(buf *b, const void *data, size_t len)
{
    buf_reserve(b, len);
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void buf_puts(buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

void buf_putc(buf *b, char c)
{
    buf_reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void buf_printf(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    /* One pass when the text fits the spare room (the usual case), two otherwise. */
    size_t room = b->cap > b->len ? b->cap - b->len : 0;
    int n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n >= room) {
        buf_reserve(b, (size_t)n);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    }
    if (n > 0)
        b->len += (size_t)n;
    else if (room)
        b->data[b->len] = '\0';
    va_end(ap2);
}

void buf_reset(buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void buf_free(buf *b)
{
    if (b->data)
        buf_release(b->data, b->cap);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *buf_steal(buf *b, size_t *len)
{
    if (!b->data)
        buf_reserve(b, 0), b->data[0] = '\0';
    char *p = b->data;
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

int64_t now_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t now_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void time_rfc3339(int64_t wall_ms, char out[25])
{
    time_t t = (time_t)(wall_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, 20, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 25 - n, ".%03dZ", (int)(wall_ms % 1000));
}

void url_redact(const char *url, char *out, size_t outlen)
{
    const char *scheme = strstr(url, "://");
    const char *at = scheme ? strchr(scheme + 3, '@') : NULL;
    const char *slash = scheme ? strchr(scheme + 3, '/') : NULL;
    const char *colon = scheme ? strchr(scheme + 3, ':') : NULL;
    if (!at || (slash && slash < at) || !colon || colon > at)
        snprintf(out, outlen, "%s", url);
    else
        snprintf(out, outlen, "%.*s:***%s", (int)(colon - url), url, at);
}

void random_bytes(void *out, size_t n)
{
    if (RAND_bytes(out, (int)n) != 1) {
        fputs("context-loader: RAND_bytes failed\n", stderr);
        abort();
    }
}

static uint64_t id_rng[4];
static int id_rng_seeded;

static void id_rng_forget(void)
{
    id_rng_seeded = 0; /* a forked child must not repeat its parent's ids */
}

static uint64_t rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void id_random_bytes(void *out, size_t n)
{
    static int atfork_set;
    unsigned char *o = out;
    if (!id_rng_seeded) {
        if (!atfork_set) {
            pthread_atfork(NULL, NULL, id_rng_forget);
            atfork_set = 1;
        }
        do
            random_bytes(id_rng, sizeof id_rng);
        while (!(id_rng[0] | id_rng[1] | id_rng[2] | id_rng[3]));
        id_rng_seeded = 1;
    }
    while (n) {
        uint64_t *st = id_rng;
        uint64_t r = rotl64(st[1] * 5, 7) * 9;
        uint64_t t = st[1] << 17;
        st[2] ^= st[0];
        st[3] ^= st[1];
        st[1] ^= st[2];
        st[0] ^= st[3];
        st[2] ^= t;
        st[3] = rotl64(st[3], 45);
        size_t k = n < 8 ? n : 8;
        memcpy(o, &r, k);
        o += k;
        n -= k;
    }
}

void hex_encode(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

void sha256_hex(const void *data, size_t len, char out[65])
{
    /* Fetched once: with OpenSSL 3, EVP_sha256() makes every digest look its
     * implementation up in the provider store again (a hash per request for the token
     * cache and the idempotency keys). Kept for the life of the process. */
    static EVP_MD *sha256;
    unsigned char md[32];
    unsigned int mdlen = 0;
    if (!sha256)
        sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    EVP_Digest(data, len, md, &mdlen, sha256 ? sha256 : EVP_sha256(), NULL);
    hex_encode(md, 32, out);
}

void str_copy(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

int str_ieq(const char *a, const char *b)
{
    return strcasecmp(a, b) == 0;
}

int str_istartswith(const char *s, const char *prefix)
{
    return strncasecmp(s, prefix, strlen(prefix)) == 0;
}

int read_file_max(const char *path, size_t max, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    buf b = BUF_INIT;
    char chunk[8192];
    size_t n;
    int rc = -1;
    if (!f)
        return -1;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        buf_append(&b, chunk, n);
        if (b.len > max)
            goto done;
    }
    if (ferror(f))
        goto done;
    *text = buf_steal(&b, len);
    rc = 0;
done:
    fclose(f);
    buf_free(&b);
    return rc;
}
