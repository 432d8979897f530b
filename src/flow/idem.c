/* idem: idempotency records over the state store (see idem.h for the protocol and
 * the record encoding). */
#include "idem.h"
#include "metrics.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "util.h"

#define REC_MAGIC "CLI1"
#define REC_HASH_OFF 5
#define REC_HDR 69 /* magic 4 + state 1 + hash 64 */
#define REC_NONCE_LEN 32
#define SKEY_LEN (5 + 64 + 1) /* "idem:" + hex + NUL */

/* A claim we won, remembered until finish / abort. */
typedef struct owned {
    struct owned *next;
    char key[65];
    char hash[65];
    char *marker;
    size_t mlen;
} owned;

/* A fire-and-forget store operation of finish / abort, tracked so idem_free can
 * cancel its callback. */
typedef struct bg {
    LIST_ENTRY(bg) link; /* in ic->bgs */
    idem_ctx *ic;
    store_op *op;
    char key[65];
    char skey[SKEY_LEN];
    char *done; /* finish: the done record, kept for the "marker expired" fallback */
    size_t dlen;
    int fallback; /* finish: the claim fallback is running */
} bg;

struct idem_wait {
    LIST_ENTRY(idem_wait) link; /* in ic->waits */
    idem_ctx *ic;
    char key[65];
    char hash[65];
    char skey[SKEY_LEN];
    idem_cb cb;
    void *arg;
    store_op *op;
    int claiming; /* op is a claim (its success must be undone after a cancel) */
    int detached; /* cancelled while a claim was in flight */
    int waited;
    int woken; /* its timer was made active by wake_waiters (not a poll) */
    int64_t deadline;
    struct event *timer;
    char *marker;
    size_t mlen;
};

struct idem_ctx {
    struct event_base *base;
    store *s;
    idem_config cfg;
    LIST_HEAD(, idem_wait) waits;
    LIST_HEAD(, bg) bgs;
    owned *owned;
    idem_stats_t st;
};

/* ---- helpers ---- */

static void copy_hex(char dst[65], const char *src)
{
    snprintf(dst, 65, "%.64s", src ? src : "");
}

static void store_key(char out[SKEY_LEN], const char *key)
{
    snprintf(out, SKEY_LEN, "idem:%.64s", key);
}

/* Builds a record: header + payload. Caller frees. */
static char *rec_build(char state, const char *hash, const char *payload, size_t plen,
                       size_t *outlen)
{
    char *r = xmalloc(REC_HDR + plen + 1);
    memcpy(r, REC_MAGIC, 4);
    r[4] = state;
    memset(r + REC_HASH_OFF, '0', 64);
    memcpy(r + REC_HASH_OFF, hash, strnlen(hash, 64));
    if (plen)
        memcpy(r + REC_HDR, payload, plen);
    r[REC_HDR + plen] = '\0';
    *outlen = REC_HDR + plen;
    return r;
}

/* 0 and the parts when v is a well-formed record, -1 otherwise. */
static int rec_parse(const char *v, size_t n, char *state, const char **payload, size_t *plen)
{
    if (!v || n < REC_HDR || memcmp(v, REC_MAGIC, 4) != 0)
        return -1;
    if (v[4] != 'R' && v[4] != 'D')
        return -1;
    if (v[4] == 'R' && n != REC_HDR + REC_NONCE_LEN)
        return -1;
    *state = v[4];
    *payload = v + REC_HDR;
    *plen = n - REC_HDR;
    return 0;
}

static int rec_hash_is(const char *v, const char *hash)
{
    size_t hl = strnlen(hash, 64);
    char h[64];
    memset(h, '0', sizeof h);
    memcpy(h, hash, hl);
    return memcmp(v + REC_HASH_OFF, h, 64) == 0;
}

static owned *owned_find(idem_ctx *ic, const char *key, const char *hash, owned ***where)
{
    owned **pp = &ic->owned;
    for (; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->key, key) == 0 && (!hash || strcmp((*pp)->hash, hash) == 0)) {
            if (where)
                *where = pp;
            return *pp;
        }
    }
    return NULL;
}

static void owned_free(owned *o)
{
    free(o->marker);
    free(o);
}

static void owned_add(idem_ctx *ic, const idem_wait *w)
{
    owned **pp = NULL;
    owned *old = owned_find(ic, w->key, NULL, &pp);
    if (old) { /* our earlier claim on this key expired: the new one supersedes it */
        *pp = old->next;
        owned_free(old);
    }
    owned *o = xcalloc(1, sizeof *o);
    memcpy(o->key, w->key, 65);
    memcpy(o->hash, w->hash, 65);
    o->marker = xmalloc(w->mlen);
    memcpy(o->marker, w->marker, w->mlen);
    o->mlen = w->mlen;
    o->next = ic->owned;
    ic->owned = o;
}

/* Unlinks w from ic->waits and frees it. */
static void wait_free(idem_wait *w)
{
    LIST_REMOVE(w, link);
    if (w->timer)
        event_free(w->timer);
    free(w->marker);
    free(w);
}

static bg *bg_new(idem_ctx *ic, const char *key)
{
    bg *b = xcalloc(1, sizeof *b);
    b->ic = ic;
    copy_hex(b->key, key);
    store_key(b->skey, b->key);
    LIST_INSERT_HEAD(&ic->bgs, b, link);
    return b;
}

static void bg_free(bg *b)
{
    LIST_REMOVE(b, link);
    free(b->done);
    free(b);
}

/* The owner in this process finished or gave up: waiters on the key look again
 * now instead of at their next poll. */
static void wake_waiters(idem_ctx *ic, const char *key)
{
    idem_wait *w;
    LIST_FOREACH(w, &ic->waits, link)
    {
        if (!w->detached && w->timer && strcmp(w->key, key) == 0 &&
            evtimer_pending(w->timer, NULL)) {
            evtimer_del(w->timer);
            w->woken = 1;
            event_active(w->timer, EV_TIMEOUT, 0);
        }
    }
}

/* ---- begin: claim, judge, wait ---- */

static void deliver(idem_wait *w, idem_decision d, const char *resp, size_t len)
{
    idem_ctx *ic = w->ic;
    switch (d) {
    case IDEM_RUN:
        ic->st.runs++;
        break;
    case IDEM_REPLAY:
        ic->st.replays++;
        break;
    case IDEM_CONFLICT:
        ic->st.conflicts++;
        break;
    case IDEM_IN_PROGRESS:
        ic->st.in_progress++;
        break;
    case IDEM_UNAVAILABLE:
        ic->st.unavailable++;
        break;
    }
    idem_cb cb = w->cb;
    void *arg = w->arg;
    wait_free(w); /* before the callback: nothing of w may be used once it starts */
    if (cb)
        cb(d, resp, len, arg);
}

static void on_claim(int rc, const char *val, size_t len, void *arg);
static void on_get(int rc, const char *val, size_t len, void *arg);

static void start_claim(idem_wait *w)
{
    w->claiming = 1;
    w->op =
        store_claim(w->ic->s, w->skey, w->marker, w->mlen, w->ic->cfg.claim_ttl_ms, on_claim, w);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    idem_wait *w = arg;
    w->claiming = 0;
    if (w->woken)
        w->woken = 0;
    else
        w->ic->st.polls++;
    w->op = store_get(w->ic->s, w->skey, on_get, w);
}

/* The key holds a record that is not ours: decide, or keep waiting. */
static void judge(idem_wait *w, const char *val, size_t len)
{
    char state;
    const char *payload;
    size_t plen;
    if (rec_parse(val, len, &state, &payload, &plen) != 0) {
        deliver(w, IDEM_UNAVAILABLE, NULL, 0); /* a foreign value: do not guess */
        return;
    }
    if (!rec_hash_is(val, w->hash)) {
        deliver(w, IDEM_CONFLICT, NULL, 0);
        return;
    }
    if (state == 'D') {
        deliver(w, IDEM_REPLAY, payload, plen);
        return;
    }
    int64_t now = now_mono_ms();
    if (!w->waited) {
        w->waited = 1;
        w->ic->st.waits++;
        w->deadline = now + w->ic->cfg.wait_ms;
    }
    if (now >= w->deadline) {
        deliver(w, IDEM_IN_PROGRESS, NULL, 0);
        return;
    }
    long ms = w->ic->cfg.poll_ms;
    if (w->deadline - now < ms)
        ms = (long)(w->deadline - now);
    if (!w->timer)
        w->timer = evtimer_new(w->ic->base, on_timer, w);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(w->timer, &tv);
}

static void on_claim(int rc, const char *val, size_t len, void *arg)
{
    idem_wait *w = arg;
    w->op = NULL;
    w->claiming = 0;
    if (w->detached) {
        /* Cancelled while claiming: give a won key back at once. */
        if (rc == 0)
            store_del_if(w->ic->s, w->skey, w->marker, w->mlen, NULL, NULL);
        wait_free(w);
        return;
    }
    if (rc < 0) {
        deliver(w, IDEM_UNAVAILABLE, NULL, 0);
    } else if (rc == 0) {
        owned_add(w->ic, w);
        deliver(w, IDEM_RUN, NULL, 0);
    } else {
        judge(w, val, len);
    }
}

static void on_get(int rc, const char *val, size_t len, void *arg)
{
    idem_wait *w = arg;
    w->op = NULL;
    if (rc < 0)
        deliver(w, IDEM_UNAVAILABLE, NULL, 0);
    else if (rc == 1)
        start_claim(w); /* the owner aborted or its marker expired: try to own it */
    else
        judge(w, val, len);
}

idem_wait *idem_begin(idem_ctx *ic, const char key[65], const char input_hash[65], idem_cb cb,
                      void *arg)
{
    idem_wait *w = xcalloc(1, sizeof *w);
    w->ic = ic;
    copy_hex(w->key, key);
    copy_hex(w->hash, input_hash);
    store_key(w->skey, w->key);
    w->cb = cb;
    w->arg = arg;
    unsigned char nonce[REC_NONCE_LEN / 2];
    char nonce_hex[REC_NONCE_LEN + 1];
    random_bytes(nonce, sizeof nonce);
    hex_encode(nonce, sizeof nonce, nonce_hex);
    w->marker = rec_build('R', w->hash, nonce_hex, REC_NONCE_LEN, &w->mlen);
    LIST_INSERT_HEAD(&ic->waits, w, link);
    start_claim(w);
    return w;
}

void idem_cancel(idem_wait *w)
{
    if (!w)
        return;
    if (w->op && w->claiming) {
        w->detached = 1; /* on_claim cleans up (and releases a won key) */
        w->cb = NULL;
        return;
    }
    if (w->op)
        store_cancel(w->op);
    wait_free(w);
}

/* ---- finish and abort ---- */

static void on_finish(int rc, const char *val, size_t len, void *arg)
{
    bg *b = arg;
    idem_ctx *ic = b->ic;
    b->op = NULL;
    if (rc == 0) {
        ic->st.finished++;
        wake_waiters(ic, b->key);
    } else if (rc < 0) {
        ic->st.finish_errors++;
    } else if (!val && !b->fallback) {
        /* Our marker expired and nobody claimed the key: the response is still the
         * result of this input, so store it unless someone claims first. */
        b->fallback = 1;
        b->op = store_claim(ic->s, b->skey, b->done, b->dlen, ic->cfg.ttl_ms, on_finish, b);
        return;
    } else {
        ic->st.finish_stale++; /* another owner holds the key now: leave it alone */
    }
    bg_free(b);
}

void idem_finish(idem_ctx *ic, const char key[65], const char input_hash[65], const char *response,
                 size_t len)
{
    char k[65], h[65];
    copy_hex(k, key);
    copy_hex(h, input_hash);
    owned **pp = NULL;
    owned *o = owned_find(ic, k, h, &pp);
    if (!o) {
        ic->st.finish_stale++;
        return;
    }
    *pp = o->next;
    bg *b = bg_new(ic, k);
    b->done = rec_build('D', h, response, len, &b->dlen);
    b->op = store_set_if(ic->s, b->skey, o->marker, o->mlen, b->done, b->dlen, ic->cfg.ttl_ms,
                         on_finish, b);
    owned_free(o);
}

static void on_abort(int rc, const char *val, size_t len, void *arg)
{
    bg *b = arg;
    b->op = NULL;
    if (rc < 0)
        b->ic->st.finish_errors++;
    wake_waiters(b->ic, b->key);
    bg_free(b);
}

void idem_abort(idem_ctx *ic, const char key[65])
{
    char k[65];
    copy_hex(k, key);
    owned **pp = NULL;
    owned *o = owned_find(ic, k, NULL, &pp);
    if (!o)
        return;
    *pp = o->next;
    ic->st.aborts++;
    bg *b = bg_new(ic, k);
    b->op = store_del_if(ic->s, b->skey, o->marker, o->mlen, on_abort, b);
    owned_free(o);
}

/* ---- ctx ---- */

idem_ctx *idem_new(struct event_base *base, store *s, const idem_config *cfg)
{
    idem_ctx *ic = xcalloc(1, sizeof *ic);
    LIST_INIT(&ic->waits);
    LIST_INIT(&ic->bgs);
    ic->base = base;
    ic->s = s;
    if (cfg)
        ic->cfg = *cfg;
    if (ic->cfg.ttl_ms <= 0)
        ic->cfg.ttl_ms = 86400000L;
    if (ic->cfg.wait_ms <= 0)
        ic->cfg.wait_ms = 10000;
    if (ic->cfg.poll_ms <= 0)
        ic->cfg.poll_ms = 25;
    if (ic->cfg.claim_ttl_ms <= 0)
        ic->cfg.claim_ttl_ms = 60000;
    return ic;
}

void idem_free(idem_ctx *ic)
{
    if (!ic)
        return;
    while (!LIST_EMPTY(&ic->waits)) {
        idem_wait *w = LIST_FIRST(&ic->waits);
        if (w->op)
            store_cancel(w->op);
        wait_free(w);
    }
    while (!LIST_EMPTY(&ic->bgs)) {
        bg *b = LIST_FIRST(&ic->bgs);
        if (b->op)
            store_cancel(b->op);
        bg_free(b);
    }
    while (ic->owned) {
        owned *o = ic->owned;
        ic->owned = o->next;
        owned_free(o);
    }
    free(ic);
}

void idem_key(const char *principal_key, const char *scope, const char *tool, const char *hint,
              char out[65])
{
    buf b = BUF_INIT;
    const char *parts[4] = {principal_key, scope, tool, hint};
    for (int i = 0; i < 4; i++) {
        if (i)
            buf_putc(&b, '\n');
        if (parts[i])
            buf_puts(&b, parts[i]);
    }
    sha256_hex(b.data ? b.data : "", b.len, out);
    buf_free(&b);
}

void idem_input_hash(const json_value *args, char out[65])
{
    buf b = BUF_INIT;
    if (args)
        json_write(&b, args, 1);
    else
        buf_puts(&b, "{}");
    sha256_hex(b.data ? b.data : "", b.len, out);
    buf_free(&b);
}

void idem_stats(const idem_ctx *ic, idem_stats_t *out)
{
    *out = ic->st;
}

void idem_write_metrics(const idem_ctx *ic, buf *out)
{
    static const char *const names[] = {"run",         "replay", "conflict", "in_progress",
                                        "unavailable", "wait",   "abort"};
    idem_stats_t st;
    if (!ic)
        return;
    idem_stats(ic, &st);
    uint64_t vals[] = {st.runs,        st.replays, st.conflicts, st.in_progress,
                       st.unavailable, st.waits,   st.aborts};
    metrics_write_header(out, "cl_idempotency_decisions_total", "counter",
                         "Idempotency decisions by kind.");
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char lbl[64];
        snprintf(lbl, sizeof lbl, "decision=\"%s\"", names[i]);
        metrics_write_sample(out, "cl_idempotency_decisions_total", lbl, (double)vals[i]);
    }
    metrics_write_counter(out, "cl_idempotency_stored_total", "Responses stored.",
                          (double)st.finished);
    metrics_write_counter(out, "cl_idempotency_store_errors_total",
                          "Stores and aborts the store failed.", (double)st.finish_errors);
}

const char *idem_decision_name(idem_decision d)
{
    switch (d) {
    case IDEM_RUN:
        return "run";
    case IDEM_REPLAY:
        return "replay";
    case IDEM_CONFLICT:
        return "conflict";
    case IDEM_IN_PROGRESS:
        return "in_progress";
    case IDEM_UNAVAILABLE:
        return "unavailable";
    }
    return "?";
}

long idem_claim_ttl_ms(const idem_ctx *ic)
{
    return ic->cfg.claim_ttl_ms;
}
