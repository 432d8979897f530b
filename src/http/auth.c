/* auth: token introspection with a hashed-token cache and single-flight (auth.h). */
#include "auth.h"
#include "json.h"
#include "metrics.h"
#include "util.h"

#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#define FLIGHT_BUCKETS 256
#define MAX_TOKEN_LEN 16384 /* longer than any real token; refused without a call */
#define WAITS_KEPT 32       /* freed waits kept for the next checks */

static const char DETAIL_TOKEN[] = "token is invalid";
static const char DETAIL_APIKEY[] = "api key is invalid";

typedef struct entry {
    char key[65]; /* sha256 hex of the token */
    auth_status st;
    principal who;            /* when st == AUTH_OK */
    const char *detail;       /* static text when st == AUTH_INVALID */
    int64_t expires_ms;       /* monotonic */
    struct entry *hnext;      /* hash chain */
    TAILQ_ENTRY(entry) order; /* a->entries: insertion order, oldest first */
} entry;

typedef struct flight flight;

typedef enum { W_FLIGHT, W_READY, W_DELIVERING } wait_state;

struct auth_wait {
    auth_ctx *a;
    wait_state state;
    flight *f; /* when W_FLIGHT */
    auth_cb cb;
    void *arg;
    /* result, when W_READY */
    auth_status st;
    principal who;
    char detail[160];
    TAILQ_ENTRY(auth_wait) link; /* in f->waiters or a->ready */
};

typedef TAILQ_HEAD(wait_list, auth_wait) wait_list;

struct flight {
    auth_ctx *a;
    char key[65];
    int apikey; /* AppKey introspection (affects the invalid detail) */
    fetch_req *req;
    wait_list waiters;
    struct flight *hnext;
};

struct auth_ctx {
    struct event_base *base;
    fetch_ctx *fetch;
    /* owned copies of the config strings */
    char *oauth_url, *appkey_url, *basic_auth, *tenant, *domain;
    long timeout_ms;
    int64_t ttl_ms, neg_ttl_ms;
    size_t max_entries;
    entry **buckets;
    size_t nbuckets;
    TAILQ_HEAD(, entry) entries; /* oldest first */
    size_t n_entries;
    flight *flights[FLIGHT_BUCKETS];
    wait_list ready;
    auth_wait *kept[WAITS_KEPT]; /* freed waits kept for reuse (owned) */
    size_t n_kept;
    struct event *deliver;
    int dispatching, dead;
    auth_stats_t stats;
};

/* ---- small helpers ---- */

static uint32_t key_hash(const char *hex)
{
    uint32_t h = 0;
    for (int i = 0; i < 8; i++) {
        char c = hex[i];
        h = (h << 4) | (uint32_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    return h;
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

/* RFC 3986 unreserved characters pass; everything else is %XX. */
static void percent_encode(buf *out, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            buf_putc(out, (char)c);
        } else {
            buf_putc(out, '%');
            buf_putc(out, hex[c >> 4]);
            buf_putc(out, hex[c & 15]);
        }
    }
}

/* ---- cache ---- */

static void entry_unlink_free(auth_ctx *a, entry *e)
{
    entry **pp = &a->buckets[key_hash(e->key) & (a->nbuckets - 1)];
    while (*pp && *pp != e)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = e->hnext;
    TAILQ_REMOVE(&a->entries, e, order);
    a->n_entries--;
    free(e);
}

static entry *cache_find(auth_ctx *a, const char *key, int64_t now)
{
    entry *e = a->buckets[key_hash(key) & (a->nbuckets - 1)];
    while (e && strcmp(e->key, key) != 0)
        e = e->hnext;
    if (e && e->expires_ms <= now) {
        entry_unlink_free(a, e);
        return NULL;
    }
    return e;
}

static void cache_put(auth_ctx *a, const char *key, auth_status st, const principal *who,
                      const char *detail, int64_t expires_ms)
{
    int64_t now = now_mono_ms();
    if (expires_ms <= now)
        return;
    entry *old = cache_find(a, key, now);
    if (old)
        entry_unlink_free(a, old);
    if (a->n_entries >= a->max_entries) {
        /* Expired entries first (one pass), then the oldest. */
        for (entry *e = TAILQ_FIRST(&a->entries), *nx; e; e = nx) {
            nx = TAILQ_NEXT(e, order);
            if (e->expires_ms <= now)
                entry_unlink_free(a, e);
        }
        while (a->n_entries >= a->max_entries && !TAILQ_EMPTY(&a->entries))
            entry_unlink_free(a, TAILQ_FIRST(&a->entries));
    }
    entry *e = xcalloc(1, sizeof(*e));
    memcpy(e->key, key, sizeof(e->key));
    e->st = st;
    if (who)
        e->who = *who;
    e->detail = detail;
    e->expires_ms = expires_ms;
    size_t b = key_hash(key) & (a->nbuckets - 1);
    e->hnext = a->buckets[b];
    a->buckets[b] = e;
    TAILQ_INSERT_TAIL(&a->entries, e, order);
    a->n_entries++;
}

/* ---- waits ---- */

/* A wait holds a principal (over 1 kB): a malloc of that size is slow (it takes
 * glibc's large-request path), so freed waits are kept and reused. Only the fields
 * read before make_ready are set here; who and detail are written by make_ready. */
static auth_wait *wait_new(auth_ctx *a, auth_cb cb, void *arg)
{
    auth_wait *w = a->n_kept ? a->kept[--a->n_kept] : xmalloc(sizeof(*w));
    w->a = a;
    w->state = W_READY;
    w->f = NULL;
    w->cb = cb;
    w->arg = arg;
    w->st = AUTH_INVALID;
    w->detail[0] = '\0';
    return w;
}

static void wait_release(auth_ctx *a, auth_wait *w)
{
    if (a->n_kept < WAITS_KEPT)
        a->kept[a->n_kept++] = w;
    else
        free(w);
}

/* ---- delivery ---- */

static void make_ready(auth_ctx *a, auth_wait *w, auth_status st, const principal *who,
                       const char *detail)
{
    w->state = W_READY;
    w->f = NULL;
    w->st = st;
    if (st == AUTH_OK && who)
        w->who = *who;
    str_copy(w->detail, sizeof(w->detail), detail ? detail : "");
    TAILQ_INSERT_TAIL(&a->ready, w, link);
    event_active(a->deliver, 0, 0);
}

static void deliver_cb(evutil_socket_t fd, short what, void *arg)
{
    auth_ctx *a = arg;
    auth_wait *w;
    a->dispatching = 1;
    while (!a->dead && (w = TAILQ_FIRST(&a->ready))) {
        TAILQ_REMOVE(&a->ready, w, link);
        w->state = W_DELIVERING;
        w->cb(w->st, w->st == AUTH_OK ? &w->who : NULL, w->detail, w->arg);
        wait_release(a, w);
    }
    a->dispatching = 0;
    if (a->dead)
        auth_free(a);
}

/* ---- flights ---- */

static flight *flight_find(auth_ctx *a, const char *key)
{
    flight *f = a->flights[key_hash(key) % FLIGHT_BUCKETS];
    while (f && strcmp(f->key, key) != 0)
        f = f->hnext;
    return f;
}

static void flight_remove(auth_ctx *a, flight *f)
{
    flight **pp = &a->flights[key_hash(f->key) % FLIGHT_BUCKETS];
    while (*pp && *pp != f)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = f->hnext;
}

/* Copies a string field into a fixed principal field; -1 if it does not fit
 * (truncating an identity would silently merge callers). */
static int put_field(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        return -1;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
    return 0;
}

/* Member of obj.ext, else of obj itself. */
static const char *ext_or_top(const json_value *obj, const char *key)
{
    const json_value *ext = json_get(obj, "ext");
    const char *s = NULL;
    if (ext && json_typeof(ext) == JSON_OBJECT)
        s = json_get_string(ext, key);
    return s ? s : json_get_string(obj, key);
}

static int finish_principal(auth_ctx *a, const json_value *doc, principal *p)
{
    const char *tenant = ext_or_top(doc, "tenant_id");
    const char *domain = ext_or_top(doc, "business_domain");
    if (put_field(p->tenant_id, sizeof(p->tenant_id), tenant ? tenant : a->tenant) != 0 ||
        put_field(p->business_domain, sizeof(p->business_domain), domain ? domain : a->domain) != 0)
        return -1;
    buf k = BUF_INIT;
    buf_printf(&k, "%s|%s|%s", p->account_type, p->account_id, p->tenant_id);
    sha256_hex(k.data, k.len, p->key);
    buf_free(&k);
    return 0;
}

/* Maps a decoded introspection body. Returns the status; *exp_s is the token's exp
 * (epoch seconds) or 0. */
static auth_status map_response(auth_ctx *a, int apikey, const json_value *doc, principal *p,
                                int64_t *exp_s, const char **why)
{
    *exp_s = 0;
    memset(p, 0, sizeof(*p));
    const json_value *active = json_get(doc, "active");
    if (!active || json_typeof(active) != JSON_TRUE)
        return AUTH_INVALID;
    const char *sub = json_get_string(doc, "sub");
    int bad = 0;
    if (apikey) {
        const char *at = json_get_string(doc, "account_type");
        str_copy(p->account_type, sizeof(p->account_type),
                 at && strcmp(at, "app") == 0 ? "app" : "user");
        snprintf(p->auth_method, sizeof(p->auth_method), "api_key");
        bad |= put_field(p->account_id, sizeof(p->account_id), sub);
        bad |= put_field(p->client_id, sizeof(p->client_id), json_get_string(doc, "key_id"));
        bad |= put_field(p->subject_name, sizeof(p->subject_name),
                         json_get_string(doc, "subject_name"));
    } else {
        const char *cid = json_get_string(doc, "client_id");
        const char *vt = ext_or_top(doc, "visitor_type");
        const char *type = "anonymous";
        if (sub && cid && strcmp(sub, cid) == 0)
            type = "app"; /* client-credentials token */
        else if (vt && strcmp(vt, "realname") == 0)
            type = "user";
        str_copy(p->account_type, sizeof(p->account_type), type);
        snprintf(p->auth_method, sizeof(p->auth_method), "oauth");
        bad |= put_field(p->account_id, sizeof(p->account_id), sub);
        bad |= put_field(p->client_id, sizeof(p->client_id), cid);
        bad |= put_field(p->subject_name, sizeof(p->subject_name), ext_or_top(doc, "visitor_name"));
        const json_value *exp = json_get(doc, "exp");
        if (exp && (json_typeof(exp) == JSON_INT || json_typeof(exp) == JSON_DOUBLE)) {
            double e =
                json_typeof(exp) == JSON_INT ? (double)json_get_int(exp) : json_get_double(exp);
            if (e > 0 && e < 1e15)
                *exp_s = (int64_t)e;
        }
    }
    if (bad || finish_principal(a, doc, p) != 0) {
        *why = "introspection response field too long";
        return AUTH_UNAVAILABLE;
    }
    if (*exp_s && *exp_s * 1000 <= now_wall_ms())
        return AUTH_INVALID; /* active but already expired: do not trust it */
    return AUTH_OK;
}

static void flight_done(const fetch_response *resp, void *arg)
{
    flight *f = arg;
    auth_ctx *a = f->a;
    auth_status st = AUTH_UNAVAILABLE;
    principal p;
    memset(&p, 0, sizeof(p));
    const char *detail = NULL;
    char why[160];
    json_value *doc = NULL;
    int64_t exp_s = 0;

    if (resp->result != FETCH_OK) {
        snprintf(why, sizeof(why), "introspection endpoint unreachable: %s",
                 resp->result == FETCH_TIMEOUT     ? "timeout"
                 : resp->result == FETCH_CONNECT   ? "connection failed"
                 : resp->result == FETCH_TOO_LARGE ? "response too large"
                                                   : "transport error");
        detail = why;
        goto done;
    }
    if (resp->status < 200 || resp->status > 299) {
        snprintf(why, sizeof(why), "introspection endpoint returned HTTP %ld", resp->status);
        detail = why;
        goto done;
    }
    json_limits lim = {.max_depth = 32, .max_size = 1 << 20};
    doc = json_parse(resp->body, resp->body_len, &lim, NULL, 0);
    if (!doc || json_typeof(doc) != JSON_OBJECT) {
        detail = "undecodable introspection response";
        goto done;
    }
    const char *why_map = NULL;
    st = map_response(a, f->apikey, doc, &p, &exp_s, &why_map);
    if (st == AUTH_UNAVAILABLE) {
        detail = why_map;
        goto done;
    }
    int64_t now = now_mono_ms();
    if (st == AUTH_INVALID) {
        detail = f->apikey ? DETAIL_APIKEY : DETAIL_TOKEN;
        cache_put(a, f->key, st, NULL, detail, now + a->neg_ttl_ms);
    } else {
        int64_t until = now + a->ttl_ms;
        if (exp_s) {
            int64_t left = exp_s * 1000 - now_wall_ms();
            if (now + left < until)
                until = now + left;
        }
        cache_put(a, f->key, st, &p, NULL, until);
    }
done:
    if (st == AUTH_UNAVAILABLE)
        a->stats.errors++;
    json_free(doc);
    flight_remove(a, f);
    for (auth_wait *w; (w = TAILQ_FIRST(&f->waiters));) {
        TAILQ_REMOVE(&f->waiters, w, link);
        make_ready(a, w, st, &p, detail);
    }
    free(f);
}

static flight *flight_start(auth_ctx *a, const char *key, const char *token, size_t len,
                            const char **why)
{
    int apikey = len >= 4 && memcmp(token, "bak_", 4) == 0 && a->appkey_url;
    const char *url = apikey ? a->appkey_url : a->oauth_url;
    flight *f = xcalloc(1, sizeof(*f));
    buf body = BUF_INIT;
    fetch_header hs[3];
    size_t nh = 0;
    f->a = a;
    f->apikey = apikey;
    memcpy(f->key, key, sizeof(f->key));
    TAILQ_INIT(&f->waiters);
    const char *err = NULL;
    *why = "introspection endpoint is not configured";
    if (!url)
        goto done;
    if (apikey) {
        buf_puts(&body, "{\"token\":");
        json_write_string(&body, token, len);
        buf_putc(&body, '}');
        hs[nh++] = (fetch_header){"Content-Type", "application/json"};
    } else {
        buf_puts(&body, "token=");
        percent_encode(&body, token, len);
        hs[nh++] = (fetch_header){"Content-Type", "application/x-www-form-urlencoded"};
        if (a->basic_auth)
            hs[nh++] = (fetch_header){"Authorization", a->basic_auth};
    }
    hs[nh++] = (fetch_header){"Accept", "application/json"};
    fetch_request rq = {.method = "POST",
                        .url = url,
                        .headers = hs,
                        .n_headers = nh,
                        .body = body.data ? body.data : "",
                        .body_len = body.len,
                        .timeout_ms = a->timeout_ms,
                        .max_response = 1 << 20};
    f->req = fetch_start(a->fetch, &rq, flight_done, f, &err);
    *why = "introspection request could not be started";
done:
    /* The body may hold the token: wipe it before freeing. */
    if (body.data)
        memset(body.data, 0, body.len);
    buf_free(&body);
    if (!f->req) {
        free(f);
        return NULL;
    }
    a->stats.introspections++;
    f->hnext = a->flights[key_hash(key) % FLIGHT_BUCKETS];
    a->flights[key_hash(key) % FLIGHT_BUCKETS] = f;
    return f;
}

/* ---- public API ---- */

static char *basic_auth_header(const char *id, const char *secret)
{
    /* RFC 6749 §2.3.1: id and secret are form-encoded before Basic encoding. */
    buf raw = BUF_INIT;
    percent_encode(&raw, id, strlen(id));
    buf_putc(&raw, ':');
    percent_encode(&raw, secret, strlen(secret));
    size_t cap = 4 * ((raw.len + 2) / 3) + 1;
    char *out = xmalloc(cap + 6);
    memcpy(out, "Basic ", 6);
    EVP_EncodeBlock((unsigned char *)out + 6, (const unsigned char *)raw.data, (int)raw.len);
    memset(raw.data, 0, raw.len);
    buf_free(&raw);
    return out;
}

auth_ctx *auth_new(struct event_base *base, fetch_ctx *fetch, const auth_config *cfg)
{
    if (!base || !fetch)
        return NULL;
    auth_config c = {0};
    if (cfg)
        c = *cfg;
    auth_ctx *a = xcalloc(1, sizeof(*a));
    a->base = base;
    a->fetch = fetch;
    a->oauth_url = dup_or_null(c.oauth_introspect_url);
    a->appkey_url = dup_or_null(c.appkey_introspect_url);
    if (c.oauth_client_id && c.oauth_client_secret)
        a->basic_auth = basic_auth_header(c.oauth_client_id, c.oauth_client_secret);
    a->tenant = xstrdup(c.default_tenant_id ? c.default_tenant_id : "");
    a->domain = xstrdup(c.default_business_domain ? c.default_business_domain : "");
    a->timeout_ms = c.timeout_ms > 0 ? c.timeout_ms : 5000;
    a->ttl_ms = (int64_t)(c.cache_ttl_s > 0 ? c.cache_ttl_s : 300) * 1000;
    a->neg_ttl_ms = (int64_t)(c.negative_ttl_s > 0 ? c.negative_ttl_s : 10) * 1000;
    a->max_entries = c.max_entries ? c.max_entries : 10000;
    a->nbuckets = 64;
    while (a->nbuckets < a->max_entries && a->nbuckets < (1u << 20))
        a->nbuckets <<= 1;
    a->buckets = xcalloc(a->nbuckets, sizeof(*a->buckets));
    TAILQ_INIT(&a->entries);
    TAILQ_INIT(&a->ready);
    a->deliver = event_new(base, -1, 0, deliver_cb, a);
    if (!a->deliver) {
        auth_free(a);
        return NULL;
    }
    return a;
}

void auth_free(auth_ctx *a)
{
    if (!a)
        return;
    /* Cancel every pending wait and flight. */
    for (size_t i = 0; i < FLIGHT_BUCKETS; i++) {
        while (a->flights[i]) {
            flight *f = a->flights[i];
            a->flights[i] = f->hnext;
            fetch_cancel(f->req);
            for (auth_wait *w; (w = TAILQ_FIRST(&f->waiters));) {
                TAILQ_REMOVE(&f->waiters, w, link);
                free(w);
            }
            free(f);
        }
    }
    for (auth_wait *w; (w = TAILQ_FIRST(&a->ready));) {
        TAILQ_REMOVE(&a->ready, w, link);
        free(w);
    }
    if (a->dispatching) {
        a->dead = 1; /* deliver_cb finishes the job when the callback returns */
        return;
    }
    while (!TAILQ_EMPTY(&a->entries))
        entry_unlink_free(a, TAILQ_FIRST(&a->entries));
    while (a->n_kept)
        free(a->kept[--a->n_kept]);
    free(a->buckets);
    if (a->deliver)
        event_free(a->deliver);
    if (a->basic_auth) {
        memset(a->basic_auth, 0, strlen(a->basic_auth));
        free(a->basic_auth);
    }
    free(a->oauth_url);
    free(a->appkey_url);
    free(a->tenant);
    free(a->domain);
    free(a);
}

void auth_memo_clear(auth_memo *m)
{
    if (m->token) {
        OPENSSL_cleanse(m->token, m->len);
        free(m->token);
    }
    memset(m, 0, sizeof *m);
}

/* The cache key of token into key: the memo's when it holds these very bytes, else
 * hashed (and remembered). */
static void token_key(const char *token, size_t token_len, auth_memo *m, char key[65])
{
    if (m && m->token && m->len == token_len && CRYPTO_memcmp(m->token, token, token_len) == 0) {
        memcpy(key, m->key, 65);
        return;
    }
    sha256_hex(token, token_len, key);
    if (!m)
        return;
    auth_memo_clear(m);
    m->token = xmalloc(token_len);
    memcpy(m->token, token, token_len);
    m->len = token_len;
    memcpy(m->key, key, 65);
}

auth_wait *auth_check(auth_ctx *a, const char *token, size_t token_len, auth_cb cb, void *arg)
{
    return auth_check_memo(a, token, token_len, NULL, cb, arg);
}

auth_wait *auth_check_memo(auth_ctx *a, const char *token, size_t token_len, auth_memo *m,
                           auth_cb cb, void *arg)
{
    if (!a || !cb || a->dead)
        return NULL;
    auth_wait *w = wait_new(a, cb, arg);
    if (!token || token_len == 0 || token_len > MAX_TOKEN_LEN) {
        make_ready(a, w, AUTH_INVALID, NULL, DETAIL_TOKEN);
        return w;
    }
    if (token_len >= 4 && memcmp(token, "bak_", 4) == 0 && a->appkey_url &&
        !json_utf8_valid(token, token_len)) {
        /* Cannot be put into a JSON body faithfully, and no real key looks like it. */
        make_ready(a, w, AUTH_INVALID, NULL, DETAIL_APIKEY);
        return w;
    }
    char key[65];
    token_key(token, token_len, m, key);
    entry *e = cache_find(a, key, now_mono_ms());
    if (e) {
        if (e->st == AUTH_OK)
            a->stats.hits++;
        else
            a->stats.negative_hits++;
        make_ready(a, w, e->st, &e->who, e->detail);
        return w;
    }
    a->stats.misses++;
    flight *f = flight_find(a, key);
    if (f) {
        a->stats.coalesced++;
    } else {
        const char *why = NULL;
        f = flight_start(a, key, token, token_len, &why);
        if (!f) {
            a->stats.errors++;
            make_ready(a, w, AUTH_UNAVAILABLE, NULL, why);
            return w;
        }
    }
    w->state = W_FLIGHT;
    w->f = f;
    TAILQ_INSERT_TAIL(&f->waiters, w, link);
    return w;
}

void auth_cancel(auth_wait *w)
{
    if (!w)
        return;
    switch (w->state) {
    case W_FLIGHT:
        /* The flight keeps running for the others and for the cache. */
        TAILQ_REMOVE(&w->f->waiters, w, link);
        break;
    case W_READY:
        TAILQ_REMOVE(&w->a->ready, w, link);
        break;
    case W_DELIVERING:
        return; /* freed by deliver_cb when its callback returns */
    }
    wait_release(w->a, w);
}

void auth_stats(const auth_ctx *a, auth_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    if (!a)
        return;
    *out = a->stats;
    out->entries = a->n_entries;
}

void auth_write_metrics(const auth_ctx *a, buf *out)
{
    auth_stats_t st;
    if (!a)
        return;
    auth_stats(a, &st);
    metrics_write_counter(out, "cl_auth_cache_hits_total",
                          "Token checks answered by the positive cache.", (double)st.hits);
    metrics_write_counter(out, "cl_auth_cache_negative_hits_total",
                          "Token checks answered by the negative cache.",
                          (double)st.negative_hits);
    metrics_write_counter(out, "cl_auth_cache_misses_total",
                          "Token checks not answered from the cache.", (double)st.misses);
    metrics_write_counter(out, "cl_auth_introspections_total", "Introspection calls started.",
                          (double)st.introspections);
    metrics_write_counter(out, "cl_auth_coalesced_total",
                          "Checks that joined an introspection in flight.", (double)st.coalesced);
    metrics_write_counter(out, "cl_auth_errors_total",
                          "Introspections that failed (unavailable).", (double)st.errors);
    metrics_write_gauge(out, "cl_auth_cache_entries", "Cached tokens.", (double)st.entries);
}
