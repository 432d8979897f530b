/* Unit tests of the state store interface over the memory backend (store.h). */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "store.h"
#include "util.h"

/* ---- loop helpers ---- */

static void guard_cb(evutil_socket_t fd, short what, void *arg)
{
    *(int *)arg = 1;
}

/* Runs the loop until *counter >= target or max_ms passed; 1 if reached. */
static int run_until(struct event_base *b, const int *counter, int target, long max_ms)
{
    /* gives up after max_ms, longer on a loaded machine (check_wait in check.h): a
     * 10 ms tick bounds a turn */
    int ticked = 0;
    struct event *g = event_new(b, -1, EV_PERSIST, guard_cb, &ticked);
    struct timeval tv = {0, 10000};
    check_wait w = check_wait_start(max_ms);
    evtimer_add(g, &tv);
    while (*counter < target && check_wait_on(&w))
        event_base_loop(b, EVLOOP_ONCE);
    event_free(g);
    return *counter >= target;
}

static void run_for(struct event_base *b, long ms)
{
    int never = 0;
    run_until(b, &never, 1, ms);
}

/* ---- recording callbacks ---- */

typedef struct rec {
    int calls;
    int rc;
    int had_val;
    char val[256];
    size_t len;
    int order; /* global sequence number of the call */
} rec;

static int seq = 0;
static int done_count = 0;

static void rec_store(rec *r, int rc, const char *val, size_t len)
{
    r->calls++;
    r->rc = rc;
    r->had_val = val != NULL;
    r->len = len;
    memset(r->val, 0, sizeof r->val);
    if (val && len < sizeof r->val)
        memcpy(r->val, val, len);
    r->order = ++seq;
    done_count++;
}

static void on_get(int rc, const char *val, size_t len, void *arg)
{
    rec_store(arg, rc, val, len);
}

static void on_rc(int rc, const char *val, size_t len, void *arg)
{
    rec_store(arg, rc, val, len);
}

/* Issues nothing; waits for n more callbacks. */
static int wait_n(struct event_base *b, int n)
{
    int target = done_count + n;
    return run_until(b, &done_count, target, 2000);
}

static int get_sync(struct event_base *b, store *s, const char *key, rec *r)
{
    memset(r, 0, sizeof *r);
    store_get(s, key, on_get, r);
    CHECK(wait_n(b, 1));
    return r->rc;
}

/* ---- tests ---- */

static void test_basic(void)
{
    struct event_base *b = event_base_new();
    store *s = store_memory_new(b, 0);
    rec r1, r2, r3;
    memset(&r1, 0, sizeof r1);

    /* Never synchronous: nothing has run when the call returns. */
    store_op *op = store_get(s, "k", on_get, &r1);
    CHECK(op != NULL);
    CHECK(r1.calls == 0);
    CHECK(wait_n(b, 1));
    CHECK(r1.calls == 1 && r1.rc == 1 && !r1.had_val);

    /* Binary-safe values. */
    const char bin[] = {'a', '\0', 'b', '\0', '\xff'};
    memset(&r2, 0, sizeof r2);
    store_set(s, "k", bin, sizeof bin, 0, on_rc, &r2);
    CHECK(r2.calls == 0);
    CHECK(wait_n(b, 1));
    CHECK(r2.rc == 0);
    CHECK(get_sync(b, s, "k", &r3) == 0);
    CHECK(r3.len == sizeof bin && memcmp(r3.val, bin, sizeof bin) == 0);

    /* Empty value is a value, not absence. */
    store_set(s, "empty", "", 0, 0, NULL, NULL);
    CHECK(get_sync(b, s, "empty", &r3) == 0);
    CHECK(r3.len == 0 && r3.had_val);

    /* claim: first wins, second sees the current value. */
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    store_claim(s, "c", "one", 3, 0, on_rc, &r1);
    store_claim(s, "c", "two", 3, 0, on_rc, &r2);
    CHECK(wait_n(b, 2));
    CHECK(r1.rc == 0 && !r1.had_val);
    CHECK(r2.rc == 1 && r2.len == 3 && memcmp(r2.val, "one", 3) == 0);
    CHECK(r1.order < r2.order);

    /* set_if: match replaces, mismatch reports the current value, absent -> NULL. */
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    memset(&r3, 0, sizeof r3);
    store_set_if(s, "c", "two", 3, "x", 1, 0, on_rc, &r1);
    store_set_if(s, "c", "one", 3, "three", 5, 0, on_rc, &r2);
    store_set_if(s, "nokey", "one", 3, "z", 1, 0, on_rc, &r3);
    CHECK(wait_n(b, 3));
    CHECK(r1.rc == 1 && r1.len == 3 && memcmp(r1.val, "one", 3) == 0);
    CHECK(r2.rc == 0);
    CHECK(r3.rc == 1 && !r3.had_val);
    CHECK(get_sync(b, s, "c", &r3) == 0);
    CHECK(r3.len == 5 && memcmp(r3.val, "three", 5) == 0);
    CHECK(get_sync(b, s, "nokey", &r3) == 1);

    /* del and del_if. */
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    memset(&r3, 0, sizeof r3);
    store_del_if(s, "c", "one", 3, on_rc, &r1);
    store_del_if(s, "c", "three", 5, on_rc, &r2);
    store_del(s, "c", on_rc, &r3);
    CHECK(wait_n(b, 3));
    CHECK(r1.rc == 1 && r1.len == 5);
    CHECK(r2.rc == 0);
    CHECK(r3.rc == 1 && !r3.had_val);
    memset(&r1, 0, sizeof r1);
    store_del(s, "k", on_rc, &r1);
    CHECK(wait_n(b, 1));
    CHECK(r1.rc == 0);
    CHECK(get_sync(b, s, "k", &r3) == 1);

    store_stats_t st;
    store_stats(s, &st);
    CHECK(st.entries == 1); /* "empty" */
    CHECK(st.errors == 0);
    CHECK(st.ops >= 15);

    store_free(s);
    event_base_free(b);
}

/* Operations are applied in issue order; those issued from a callback run after
 * the callback returns, never inside it. */
typedef struct chain {
    store *s;
    rec inner;
    int inner_calls_at_return;
    rec outer;
} chain;

static void on_chain(int rc, const char *val, size_t len, void *arg)
{
    chain *c = arg;
    rec_store(&c->outer, rc, val, len);
    store_get(c->s, "o", on_get, &c->inner);
    c->inner_calls_at_return = c->inner.calls;
}

static void test_order(void)
{
    struct event_base *b = event_base_new();
    store *s = store_memory_new(b, 0);
    rec g1, g2;
    memset(&g1, 0, sizeof g1);
    memset(&g2, 0, sizeof g2);
    store_set(s, "o", "1", 1, 0, NULL, NULL);
    store_get(s, "o", on_get, &g1);
    store_set(s, "o", "2", 1, 0, NULL, NULL);
    store_get(s, "o", on_get, &g2);
    CHECK(wait_n(b, 2));
    CHECK(g1.val[0] == '1' && g2.val[0] == '2' && g1.order < g2.order);

    chain c;
    memset(&c, 0, sizeof c);
    c.s = s;
    store_get(s, "o", on_chain, &c);
    CHECK(wait_n(b, 2));
    CHECK(c.outer.calls == 1 && c.inner.calls == 1);
    CHECK(c.inner_calls_at_return == 0);
    CHECK(c.inner.rc == 0 && c.inner.val[0] == '2');

    store_free(s);
    event_base_free(b);
}

static void test_ttl(void)
{
    struct event_base *b = event_base_new();
    store *s = store_memory_new(b, 0);
    rec r;
    store_set(s, "short", "v", 1, 40, NULL, NULL);
    store_claim(s, "lock", "a", 1, 40, NULL, NULL);
    store_set(s, "long", "v", 1, 60000, NULL, NULL);
    CHECK(get_sync(b, s, "short", &r) == 0);
    memset(&r, 0, sizeof r);
    store_claim(s, "lock", "b", 1, 40, on_rc, &r);
    CHECK(wait_n(b, 1));
    CHECK(r.rc == 1 && r.val[0] == 'a');
    run_for(b, 80);
    CHECK(get_sync(b, s, "short", &r) == 1);
    /* An expired lock can be claimed again. */
    memset(&r, 0, sizeof r);
    store_claim(s, "lock", "b", 1, 40, on_rc, &r);
    CHECK(wait_n(b, 1));
    CHECK(r.rc == 0);
    CHECK(get_sync(b, s, "long", &r) == 0);

    /* set refreshes the TTL; a set without TTL removes it. */
    store_set(s, "refresh", "v", 1, 40, NULL, NULL);
    run_for(b, 25);
    store_set(s, "refresh", "w", 1, 0, NULL, NULL);
    run_for(b, 40);
    CHECK(get_sync(b, s, "refresh", &r) == 0 && r.val[0] == 'w');

    /* The periodic sweep drops expired entries nobody reads. */
    for (int i = 0; i < 10; i++) {
        char k[16];
        snprintf(k, sizeof k, "sw%d", i);
        store_set(s, k, "v", 1, 20, NULL, NULL);
    }
    run_for(b, 10);
    store_stats_t st;
    store_stats(s, &st);
    size_t before = st.entries;
    CHECK(before >= 12);
    run_for(b, 1300);
    store_stats(s, &st);
    CHECK(st.entries <= before - 10);
    CHECK(st.expired >= 11);
    CHECK(get_sync(b, s, "long", &r) == 0);

    store_free(s);
    event_base_free(b);
}

static void test_bounds(void)
{
    struct event_base *b = event_base_new();
    store *s = store_memory_new(b, 3);
    rec r;
    store_set(s, "a", "1", 1, 100000, NULL, NULL);
    store_set(s, "b", "1", 1, 5000, NULL, NULL); /* expires soonest */
    store_set(s, "c", "1", 1, 0, NULL, NULL);    /* no TTL: evicted last */
    store_set(s, "d", "1", 1, 200000, NULL, NULL);
    CHECK(get_sync(b, s, "b", &r) == 1);
    CHECK(get_sync(b, s, "a", &r) == 0);
    CHECK(get_sync(b, s, "c", &r) == 0);
    CHECK(get_sync(b, s, "d", &r) == 0);
    /* Overwriting an existing key never evicts. */
    store_set(s, "a", "2", 1, 100000, NULL, NULL);
    CHECK(get_sync(b, s, "d", &r) == 0);
    store_set(s, "e", "1", 1, 0, NULL, NULL); /* evicts a (soonest of a, d) */
    CHECK(get_sync(b, s, "a", &r) == 1);
    store_stats_t st;
    store_stats(s, &st);
    CHECK(st.entries == 3);
    CHECK(st.evictions == 2);
    store_free(s);

    /* Expired entries go first, without counting as evictions. */
    s = store_memory_new(b, 2);
    store_set(s, "x", "1", 1, 20, NULL, NULL);
    store_set(s, "y", "1", 1, 0, NULL, NULL);
    run_for(b, 40);
    store_set(s, "z", "1", 1, 0, NULL, NULL);
    CHECK(get_sync(b, s, "y", &r) == 0);
    CHECK(get_sync(b, s, "z", &r) == 0);
    store_stats(s, &st);
    CHECK(st.evictions == 0 && st.expired == 1 && st.entries == 2);
    store_free(s);
    event_base_free(b);
}

static void test_cancel_and_faults(void)
{
    struct event_base *b = event_base_new();
    store *s = store_memory_new(b, 0);
    rec r1, r2, r3;
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    store_op *g = store_get(s, "k", on_get, &r1);
    store_op *w = store_set(s, "k", "v", 1, 0, on_rc, &r2);
    store_cancel(g);
    store_cancel(w);
    run_for(b, 30);
    CHECK(r1.calls == 0 && r2.calls == 0);
    /* A cancelled write still applies (as a sent Redis command would). */
    CHECK(get_sync(b, s, "k", &r3) == 0 && r3.val[0] == 'v');

    store_memory_fail_next(s, 2);
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    memset(&r3, 0, sizeof r3);
    store_set(s, "k", "w", 1, 0, on_rc, &r1);
    store_get(s, "k", on_get, &r2);
    store_claim(s, "n", "v", 1, 0, on_rc, &r3);
    CHECK(wait_n(b, 3));
    CHECK(r1.rc == -1 && r2.rc == -1 && !r2.had_val && r3.rc == 0);
    CHECK(get_sync(b, s, "k", &r3) == 0 && r3.val[0] == 'v'); /* failed set changed nothing */
    store_stats_t st;
    store_stats(s, &st);
    CHECK(st.errors == 2);

    /* Freeing with pending operations calls nothing. */
    memset(&r1, 0, sizeof r1);
    store_get(s, "k", on_get, &r1);
    store_free(s);
    run_for(b, 20);
    CHECK(r1.calls == 0);
    event_base_free(b);
}

/* Random operations against a simple model (with distinct TTL ranks, so the
 * eviction order is known), exercising the hash chains and the heap. */
#define MODEL_KEYS 64
#define MODEL_MAX 20

typedef struct model_ent {
    int live;
    int val;
    long ttl;
} model_ent;

static void test_model(void)
{
    struct event_base *b = event_base_new();
    store *s = store_memory_new(b, MODEL_MAX);
    model_ent m[MODEL_KEYS];
    memset(m, 0, sizeof m);
    srand(12345);
    int mismatches = 0;
    long next_ttl_rank = 0;
    for (int i = 0; i < 4000; i++) {
        int k = rand() % MODEL_KEYS;
        char key[16], val[16];
        snprintf(key, sizeof key, "key%d", k);
        int v = rand() % 1000;
        snprintf(val, sizeof val, "%d", v);
        /* Distinct TTLs a million ms apart, in a shuffled order: eviction order is
         * the TTL order regardless of the few ms the test takes. */
        long ttl = 100000000L + ((next_ttl_rank++ * 7919) % 10007) * 1000000L;
        int opk = rand() % 4;
        rec r;
        memset(&r, 0, sizeof r);
        int live = 0;
        for (int j = 0; j < MODEL_KEYS; j++)
            live += m[j].live;
        int inserting = 0;
        if (opk == 0) {
            store_get(s, key, on_get, &r);
            CHECK(wait_n(b, 1));
            int want = m[k].live ? 0 : 1;
            if (r.rc != want || (want == 0 && atoi(r.val) != m[k].val))
                mismatches++;
            continue;
        } else if (opk == 1) {
            store_set(s, key, val, strlen(val), ttl, on_rc, &r);
            CHECK(wait_n(b, 1));
            inserting = !m[k].live;
            if (r.rc != 0)
                mismatches++;
        } else if (opk == 2) {
            store_claim(s, key, val, strlen(val), ttl, on_rc, &r);
            CHECK(wait_n(b, 1));
            if (m[k].live) {
                if (r.rc != 1 || atoi(r.val) != m[k].val)
                    mismatches++;
                continue;
            }
            inserting = 1;
            if (r.rc != 0)
                mismatches++;
        } else {
            store_del(s, key, on_rc, &r);
            CHECK(wait_n(b, 1));
            if (r.rc != (m[k].live ? 0 : 1))
                mismatches++;
            m[k].live = 0;
            continue;
        }
        if (inserting && live >= MODEL_MAX) {
            int victim = -1;
            for (int j = 0; j < MODEL_KEYS; j++)
                if (m[j].live && (victim < 0 || m[j].ttl < m[victim].ttl))
                    victim = j;
            m[victim].live = 0;
        }
        m[k].live = 1;
        m[k].val = v;
        m[k].ttl = ttl;
    }
    CHECK(mismatches == 0);
    int live = 0;
    for (int j = 0; j < MODEL_KEYS; j++)
        live += m[j].live;
    store_stats_t st;
    store_stats(s, &st);
    CHECK(st.entries == (size_t)live);
    store_free(s);

    /* Growth: many keys in an unbounded table. */
    s = store_memory_new(b, 0);
    for (int i = 0; i < 5000; i++) {
        char key[16];
        snprintf(key, sizeof key, "g%d", i);
        store_set(s, key, key, strlen(key), i % 2 ? 60000 : 0, NULL, NULL);
    }
    for (int i = 0; i < 5000; i += 2) {
        char key[16];
        snprintf(key, sizeof key, "g%d", i);
        store_del(s, key, NULL, NULL);
    }
    rec r;
    CHECK(get_sync(b, s, "g4999", &r) == 0 && strcmp(r.val, "g4999") == 0);
    CHECK(get_sync(b, s, "g4998", &r) == 1);
    store_stats(s, &st);
    CHECK(st.entries == 2500);
    store_free(s);
    event_base_free(b);
}

int main(void)
{
    test_basic();
    test_order();
    test_ttl();
    test_bounds();
    test_cancel_and_faults();
    test_model();
    return CHECK_DONE();
}
