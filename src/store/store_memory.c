/* store_memory: the single-instance backend of store.h.
 *
 * A chained hash table of entries plus a binary min-heap of the same entries by
 * expiry time: the heap gives the periodic sweep and the "evict the soonest
 * expiring" rule in O(log n). Operations are queued and applied by one deferred
 * event in FIFO order, so callbacks are never synchronous and ordering matches a
 * pipelined Redis connection. */
#include "store.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define MEM_DEFAULT_MAX 100000
#define MEM_SWEEP_MS 1000
#define MEM_NO_EXPIRY INT64_MAX

typedef struct mentry {
    struct mentry *next; /* bucket chain */
    uint64_t hash;
    char *key;
    char *val; /* len bytes + NUL */
    size_t len;
    int64_t expires; /* monotonic ms, MEM_NO_EXPIRY for none */
    size_t heap_idx;
} mentry;

typedef struct mop {
    store_op base; /* first: store_op* <-> mop* */
    struct mop *next;
    store_kind kind;
    char *key;
    char *expect;
    size_t expect_len;
    char *val;
    size_t len;
    long ttl_ms;
    store_get_cb get_cb;
    store_rc_cb rc_cb;
    void *arg;
    int cancelled;
} mop;

typedef struct mstore {
    store base; /* first */
    struct event_base *evb;
    struct event *drain_ev;
    int drain_scheduled;
    struct event *sweep_ev;
    int sweep_armed;
    mop *q_head, *q_tail;
    mentry **buckets;
    size_t nbuckets; /* power of two */
    size_t count;
    mentry **heap;
    size_t heap_len, heap_cap;
    size_t max_entries;
    int fail_next;
} mstore;

static const store_vtable memory_vt;

/* ---- hashing and the heap ---- */

static uint64_t hash_key(const char *k)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *k; k++) {
        h ^= (unsigned char)*k;
        h *= 1099511628211ULL;
    }
    return h;
}

static void heap_swap(mstore *m, size_t a, size_t b)
{
    mentry *t = m->heap[a];
    m->heap[a] = m->heap[b];
    m->heap[b] = t;
    m->heap[a]->heap_idx = a;
    m->heap[b]->heap_idx = b;
}

static void heap_up(mstore *m, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (m->heap[p]->expires <= m->heap[i]->expires)
            break;
        heap_swap(m, p, i);
        i = p;
    }
}

static void heap_down(mstore *m, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, best = i;
        if (l < m->heap_len && m->heap[l]->expires < m->heap[best]->expires)
            best = l;
        if (r < m->heap_len && m->heap[r]->expires < m->heap[best]->expires)
            best = r;
        if (best == i)
            break;
        heap_swap(m, i, best);
        i = best;
    }
}

static void heap_push(mstore *m, mentry *e)
{
    if (m->heap_len == m->heap_cap) {
        m->heap_cap = m->heap_cap ? m->heap_cap * 2 : 64;
        m->heap = xrealloc(m->heap, m->heap_cap * sizeof *m->heap);
    }
    e->heap_idx = m->heap_len;
    m->heap[m->heap_len++] = e;
    heap_up(m, e->heap_idx);
}

static void heap_fix(mstore *m, size_t i)
{
    if (i > 0 && m->heap[i]->expires < m->heap[(i - 1) / 2]->expires)
        heap_up(m, i);
    else
        heap_down(m, i);
}

static void heap_remove(mstore *m, mentry *e)
{
    size_t i = e->heap_idx, last = m->heap_len - 1;
    if (i != last)
        heap_swap(m, i, last);
    m->heap_len--;
    if (i < m->heap_len)
        heap_fix(m, i);
}

/* ---- the table ---- */

static void table_grow(mstore *m)
{
    size_t n = m->nbuckets * 2;
    mentry **nb = xcalloc(n, sizeof *nb);
    for (size_t i = 0; i < m->nbuckets; i++) {
        mentry *e = m->buckets[i];
        while (e) {
            mentry *next = e->next;
            size_t b = e->hash & (n - 1);
            e->next = nb[b];
            nb[b] = e;
            e = next;
        }
    }
    free(m->buckets);
    m->buckets = nb;
    m->nbuckets = n;
}

static void entry_unlink(mstore *m, mentry *e)
{
    mentry **pp = &m->buckets[e->hash & (m->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->next;
    *pp = e->next;
    heap_remove(m, e);
    m->count--;
    free(e->key);
    free(e->val);
    free(e);
}

static void drop_expired(mstore *m, int64_t now)
{
    while (m->heap_len > 0 && m->heap[0]->expires <= now) {
        entry_unlink(m, m->heap[0]);
        m->base.expired++;
    }
}

/* The live entry for key, dropping it first if its TTL has passed. */
static mentry *lookup(mstore *m, const char *key, uint64_t h, int64_t now)
{
    mentry *e = m->buckets[h & (m->nbuckets - 1)];
    for (; e; e = e->next) {
        if (e->hash == h && strcmp(e->key, key) == 0)
            break;
    }
    if (e && e->expires <= now) {
        entry_unlink(m, e);
        m->base.expired++;
        e = NULL;
    }
    return e;
}

static int64_t expiry_of(long ttl_ms, int64_t now)
{
    return ttl_ms > 0 ? now + ttl_ms : MEM_NO_EXPIRY;
}

static void sweep_arm(mstore *m);

static void entry_put(mstore *m, mentry *e, const char *key, uint64_t h, const char *val,
                      size_t len, long ttl_ms, int64_t now)
{
    char *copy = xmalloc(len + 1);
    if (len)
        memcpy(copy, val, len);
    copy[len] = '\0';
    if (e) {
        free(e->val);
        e->val = copy;
        e->len = len;
        e->expires = expiry_of(ttl_ms, now);
        heap_fix(m, e->heap_idx);
        sweep_arm(m);
        return;
    }
    if (m->count >= m->max_entries)
        drop_expired(m, now);
    while (m->count >= m->max_entries && m->heap_len > 0) {
        entry_unlink(m, m->heap[0]); /* the soonest to expire */
        m->base.evictions++;
    }
    if (m->count >= m->nbuckets)
        table_grow(m);
    e = xcalloc(1, sizeof *e);
    e->hash = h;
    e->key = xstrdup(key);
    e->val = copy;
    e->len = len;
    e->expires = expiry_of(ttl_ms, now);
    size_t b = h & (m->nbuckets - 1);
    e->next = m->buckets[b];
    m->buckets[b] = e;
    m->count++;
    heap_push(m, e);
    sweep_arm(m);
}

static int same_bytes(const mentry *e, const char *p, size_t n)
{
    return e && e->len == n && (n == 0 || memcmp(e->val, p, n) == 0);
}

/* ---- applying operations ---- */

static void answer_rc(mop *op, int rc, const mentry *cur)
{
    if (op->cancelled || !op->rc_cb)
        return;
    op->rc_cb(rc, cur ? cur->val : NULL, cur ? cur->len : 0, op->arg);
}

static void apply(mstore *m, mop *op)
{
    int64_t now = now_mono_ms();
    m->base.ops++;
    if (m->fail_next > 0) {
        m->fail_next--;
        m->base.errors++;
        if (op->cancelled)
            return;
        if (op->kind == STORE_GET) {
            if (op->get_cb)
                op->get_cb(-1, NULL, 0, op->arg);
        } else {
            answer_rc(op, -1, NULL);
        }
        return;
    }
    uint64_t h = hash_key(op->key);
    mentry *e = lookup(m, op->key, h, now);
    switch (op->kind) {
    case STORE_GET:
        if (!op->cancelled && op->get_cb)
            op->get_cb(e ? 0 : 1, e ? e->val : NULL, e ? e->len : 0, op->arg);
        break;
    case STORE_SET:
        entry_put(m, e, op->key, h, op->val, op->len, op->ttl_ms, now);
        answer_rc(op, 0, NULL);
        break;
    case STORE_CLAIM:
        if (e) {
            answer_rc(op, 1, e);
        } else {
            entry_put(m, NULL, op->key, h, op->val, op->len, op->ttl_ms, now);
            answer_rc(op, 0, NULL);
        }
        break;
    case STORE_SET_IF:
        if (same_bytes(e, op->expect, op->expect_len)) {
            entry_put(m, e, op->key, h, op->val, op->len, op->ttl_ms, now);
            answer_rc(op, 0, NULL);
        } else {
            answer_rc(op, 1, e);
        }
        break;
    case STORE_DEL:
        if (e) {
            entry_unlink(m, e);
            answer_rc(op, 0, NULL);
        } else {
            answer_rc(op, 1, NULL);
        }
        break;
    case STORE_DEL_IF:
        if (same_bytes(e, op->expect, op->expect_len)) {
            entry_unlink(m, e);
            answer_rc(op, 0, NULL);
        } else {
            answer_rc(op, 1, e);
        }
        break;
    }
}

static void op_free(mop *op)
{
    free(op->key);
    free(op->expect);
    free(op->val);
    free(op);
}

static void drain_cb(evutil_socket_t fd, short what, void *arg)
{
    mstore *m = arg;
    /* Take the current queue: operations issued by callbacks run in the next round,
     * so one round always ends. */
    mop *list = m->q_head;
    m->q_head = m->q_tail = NULL;
    m->drain_scheduled = 0;
    while (list) {
        mop *op = list;
        list = op->next;
        apply(m, op);
        op_free(op);
    }
}

static void sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    mstore *m = arg;
    m->sweep_armed = 0;
    drop_expired(m, now_mono_ms());
    sweep_arm(m);
}

/* The sweep timer runs only while some entry has a TTL, so an idle store keeps
 * nothing scheduled on the loop. */
static void sweep_arm(mstore *m)
{
    if (m->sweep_armed || m->heap_len == 0 || m->heap[0]->expires == MEM_NO_EXPIRY)
        return;
    struct timeval tv = {MEM_SWEEP_MS / 1000, (MEM_SWEEP_MS % 1000) * 1000};
    evtimer_add(m->sweep_ev, &tv);
    m->sweep_armed = 1;
}

/* ---- vtable ---- */

static char *dup_bytes(const char *p, size_t n)
{
    if (!p)
        return NULL;
    char *c = xmalloc(n + 1);
    if (n)
        memcpy(c, p, n);
    c[n] = '\0';
    return c;
}

static store_op *mem_submit(store *s, const store_request *req)
{
    mstore *m = (mstore *)s;
    mop *op = xcalloc(1, sizeof *op);
    op->base.s = s;
    op->kind = req->kind;
    op->key = xstrdup(req->key);
    op->expect = dup_bytes(req->expect, req->expect_len);
    op->expect_len = req->expect_len;
    if (req->kind == STORE_SET_IF || req->kind == STORE_DEL_IF) {
        /* expect is compared as bytes; a NULL expect means "empty value". */
        if (!op->expect)
            op->expect = dup_bytes("", 0);
    }
    op->val = dup_bytes(req->val ? req->val : "", req->len);
    op->len = req->val ? req->len : 0;
    op->ttl_ms = req->ttl_ms;
    op->get_cb = req->get_cb;
    op->rc_cb = req->rc_cb;
    op->arg = req->arg;
    if (m->q_tail)
        m->q_tail->next = op;
    else
        m->q_head = op;
    m->q_tail = op;
    if (!m->drain_scheduled) {
        event_active(m->drain_ev, EV_TIMEOUT, 0);
        m->drain_scheduled = 1;
    }
    return (op->get_cb || op->rc_cb) ? &op->base : NULL;
}

static void mem_cancel(store_op *o)
{
    /* The op stays queued (writes still apply); only its callback is dropped. */
    ((mop *)o)->cancelled = 1;
}

static size_t mem_entries(const store *s)
{
    return ((const mstore *)s)->count;
}

static void mem_destroy(store *s)
{
    mstore *m = (mstore *)s;
    mop *op = m->q_head;
    while (op) {
        mop *next = op->next;
        op_free(op);
        op = next;
    }
    while (m->heap_len > 0)
        entry_unlink(m, m->heap[0]);
    event_free(m->drain_ev);
    event_free(m->sweep_ev);
    free(m->buckets);
    free(m->heap);
    free(m);
}

static const store_vtable memory_vt = {mem_submit, mem_cancel, mem_entries, mem_destroy};

store *store_memory_new(struct event_base *base, size_t max_entries)
{
    mstore *m = xcalloc(1, sizeof *m);
    m->base.vt = &memory_vt;
    m->evb = base;
    m->max_entries = max_entries ? max_entries : MEM_DEFAULT_MAX;
    m->nbuckets = 64;
    m->buckets = xcalloc(m->nbuckets, sizeof *m->buckets);
    m->drain_ev = event_new(base, -1, 0, drain_cb, m);
    m->sweep_ev = evtimer_new(base, sweep_cb, m);
    if (!m->drain_ev || !m->sweep_ev)
        abort(); /* allocation failure, like xmalloc */
    return &m->base;
}

void store_memory_fail_next(store *s, int n)
{
    if (s && s->vt == &memory_vt)
        ((mstore *)s)->fail_next = n;
}
