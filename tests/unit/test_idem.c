/* Unit tests of the idempotency records (idem.h) over the memory store. */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "idem.h"
#include "json.h"
#include "store.h"
#include "util.h"

/* ---- loop helpers ---- */

static void guard_cb(evutil_socket_t fd, short what, void *arg)
{
    *(int *)arg = 1;
}

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

/* ---- recording ---- */

static int delivered = 0;

typedef struct got {
    int calls;
    idem_decision d;
    char *resp;
    size_t len;
    int64_t at_ms;
} got;

static void got_reset(got *g)
{
    free(g->resp);
    memset(g, 0, sizeof *g);
}

static void on_idem(idem_decision d, const char *resp, size_t len, void *arg)
{
    got *g = arg;
    g->calls++;
    g->d = d;
    free(g->resp);
    g->resp = NULL;
    g->len = len;
    if (resp) {
        g->resp = xmalloc(len + 1);
        memcpy(g->resp, resp, len);
    }
    g->at_ms = now_mono_ms();
    delivered++;
}

/* begin and wait for its decision */
static idem_decision begin_sync(struct event_base *b, idem_ctx *ic, const char *key,
                                const char *hash, got *g, long max_ms)
{
    got_reset(g);
    int target = delivered + 1;
    idem_begin(ic, key, hash, on_idem, g);
    CHECK(g->calls == 0); /* never synchronous */
    CHECK(run_until(b, &delivered, target, max_ms));
    CHECK(g->calls == 1);
    return g->d;
}

typedef struct env {
    struct event_base *b;
    store *s;
    idem_ctx *ic;
} env;

static void env_open(env *e, long ttl, long wait, long poll, long claim_ttl)
{
    e->b = event_base_new();
    e->s = store_memory_new(e->b, 0);
    idem_config cfg = {ttl, wait, poll, claim_ttl};
    e->ic = idem_new(e->b, e->s, &cfg);
}

static void env_close(env *e)
{
    idem_free(e->ic);
    store_free(e->s);
    event_base_free(e->b);
}

static void hash_of(const char *text, char out[65])
{
    sha256_hex(text, strlen(text), out);
}

/* ---- tests ---- */

static void test_run_replay(void)
{
    env e;
    env_open(&e, 0, 0, 0, 0);
    char key[65], h1[65];
    got g = {0};
    idem_key("pk", "mcp", "query", "inv-1", key);
    hash_of("input-1", h1);

    CHECK(begin_sync(e.b, e.ic, key, h1, &g, 1000) == IDEM_RUN);
    const char blob[] = {'{', '\0', '"', 'x', '\0', '\0', '}', '\xff'};
    idem_finish(e.ic, key, h1, blob, sizeof blob);
    CHECK(begin_sync(e.b, e.ic, key, h1, &g, 1000) == IDEM_REPLAY);
    CHECK(g.len == sizeof blob && memcmp(g.resp, blob, sizeof blob) == 0);
    /* Replays again, any number of times. */
    CHECK(begin_sync(e.b, e.ic, key, h1, &g, 1000) == IDEM_REPLAY);
    CHECK(g.len == sizeof blob && memcmp(g.resp, blob, sizeof blob) == 0);

    /* A big binary payload. */
    size_t big = 3u << 20;
    char *payload = xmalloc(big);
    random_bytes(payload, big);
    payload[0] = '\0';
    payload[big - 1] = '\0';
    idem_key("pk", "mcp", "query", "inv-big", key);
    CHECK(begin_sync(e.b, e.ic, key, h1, &g, 1000) == IDEM_RUN);
    idem_finish(e.ic, key, h1, payload, big);
    CHECK(begin_sync(e.b, e.ic, key, h1, &g, 1000) == IDEM_REPLAY);
    CHECK(g.len == big && memcmp(g.resp, payload, big) == 0);
    free(payload);

    /* An empty response replays as empty (not as "absent"). */
    idem_key("pk", "mcp", "query", "inv-empty", key);
    CHECK(begin_sync(e.b, e.ic, key, h1, &g, 1000) == IDEM_RUN);
    idem_finish(e.ic, key, h1, NULL, 0);
    CHECK(begin_sync(e.b, e.ic, key, h1, &g, 1000) == IDEM_REPLAY);
    CHECK(g.len == 0 && g.resp != NULL);

    idem_stats_t st;
    idem_stats(e.ic, &st);
    CHECK(st.runs == 3 && st.replays == 4 && st.finished == 3 && st.conflicts == 0);
    got_reset(&g);
    env_close(&e);
}

static void test_conflict(void)
{
    env e;
    env_open(&e, 0, 0, 0, 0);
    char key[65], h1[65], h2[65];
    got g = {0};
    idem_key("pk", "rest", "action", "inv-c", key);
    hash_of("input-1", h1);
    hash_of("input-2", h2);
    CHECK(begin_sync(e.b, e.ic, key, h1, &g, 1000) == IDEM_RUN);
    /* While running: a different input conflicts at once (no waiting: no wait begun,
     * no poll fired). */
    idem_stats_t s0, s1;
    idem_stats(e.ic, &s0);
    CHECK(begin_sync(e.b, e.ic, key, h2, &g, 1000) == IDEM_CONFLICT);
    idem_stats(e.ic, &s1);
    CHECK(s1.waits == s0.waits && s1.polls == s0.polls);
    idem_finish(e.ic, key, h1, "resp", 4);
    /* After done: still a conflict; the right input still replays. */
    CHECK(begin_sync(e.b, e.ic, key, h2, &g, 1000) == IDEM_CONFLICT);
    CHECK(g.resp == NULL && g.len == 0);
    CHECK(begin_sync(e.b, e.ic, key, h1, &g, 1000) == IDEM_REPLAY);
    CHECK(g.len == 4 && memcmp(g.resp, "resp", 4) == 0);
    /* The conflicting finish changes nothing. */
    idem_finish(e.ic, key, h2, "other", 5);
    CHECK(begin_sync(e.b, e.ic, key, h1, &g, 1000) == IDEM_REPLAY);
    CHECK(g.len == 4 && memcmp(g.resp, "resp", 4) == 0);
    idem_stats_t st;
    idem_stats(e.ic, &st);
    CHECK(st.conflicts == 2 && st.runs == 1 && st.finish_stale == 1);
    got_reset(&g);
    env_close(&e);
}

/* 20 duplicates at once: exactly one runs; the owner finishes after ~100 ms on a
 * timer; the other 19 replay its bytes. */
#define DUPS 20

typedef struct dup_run {
    idem_ctx *ic, *ics[2]; /* the owner's; both instances */
    char key[65], hash[65];
    struct event *finish_ev;
    int64_t finished_at;
    uint64_t polls_at_finish; /* poll timers fired in both instances before the finish */
} dup_run;

static uint64_t polls_of(idem_ctx *const ics[2])
{
    idem_stats_t a, b;
    idem_stats(ics[0], &a);
    idem_stats(ics[1], &b);
    return a.polls + b.polls;
}

static dup_run *the_run;

static void finish_cb(evutil_socket_t fd, short what, void *arg)
{
    dup_run *r = arg;
    r->finished_at = now_mono_ms();
    r->polls_at_finish = polls_of(r->ics);
    idem_finish(r->ic, r->key, r->hash, "the\0answer", 10);
}

static void on_dup(idem_decision d, const char *resp, size_t len, void *arg)
{
    on_idem(d, resp, len, arg);
    if (d == IDEM_RUN) {
        struct timeval tv = {0, 100 * 1000};
        evtimer_add(the_run->finish_ev, &tv);
    }
}

static void dups_case(long poll_ms, int owner_elsewhere)
{
    env e;
    env_open(&e, 0, 10000, poll_ms, 0);
    idem_config cfg = {0, 10000, poll_ms, 0};
    idem_ctx *other = idem_new(e.b, e.s, &cfg); /* a second instance on the same store */
    dup_run r;
    memset(&r, 0, sizeof r);
    r.ic = owner_elsewhere ? other : e.ic;
    r.ics[0] = e.ic;
    r.ics[1] = other;
    idem_key("pk", "mcp", "dup", "inv-dup", r.key);
    hash_of("same input", r.hash);
    r.finish_ev = evtimer_new(e.b, finish_cb, &r);
    the_run = &r;
    got g[DUPS];
    memset(g, 0, sizeof g);
    int target = delivered + DUPS;
    int64_t t0 = now_mono_ms();
    for (int i = 0; i < DUPS; i++)
        idem_begin(i == 0 ? r.ic : (owner_elsewhere ? e.ic : r.ic), r.key, r.hash, on_dup, &g[i]);
    CHECK(run_until(e.b, &delivered, target, 30000));
    int runs = 0, replays = 0;
    int64_t last = 0;
    for (int i = 0; i < DUPS; i++) {
        CHECK(g[i].calls == 1);
        if (g[i].d == IDEM_RUN)
            runs++;
        if (g[i].d == IDEM_REPLAY) {
            replays++;
            CHECK(g[i].len == 10 && memcmp(g[i].resp, "the\0answer", 10) == 0);
            CHECK(g[i].at_ms >= r.finished_at);
        }
        if (g[i].at_ms > last)
            last = g[i].at_ms;
    }
    CHECK(runs == 1);
    CHECK(replays == DUPS - 1);
    CHECK(g[0].d == IDEM_RUN); /* the first claim wins */
    CHECK(r.finished_at - t0 >= 95);
    /* Found by polling (other instance: one poll each after the finish, at most) or
     * woken by the finish (same ctx): with a 5 s poll, no poll fires after it (with a
     * short one, a waiter whose read crossed the finish polls once more). Counted, not
     * timed: a loaded machine fires timers late, it does not add polls. */
    uint64_t after = polls_of(r.ics) - r.polls_at_finish;
    if (owner_elsewhere || poll_ms < 2000)
        CHECK(after <= DUPS - 1);
    else
        CHECK(after == 0);
    CHECK(last >= r.finished_at);
    idem_stats_t st, so;
    idem_stats(e.ic, &st);
    idem_stats(other, &so);
    CHECK(st.runs + so.runs == 1);
    CHECK(st.replays + so.replays == DUPS - 1);
    CHECK(st.waits + so.waits == DUPS - 1);
    for (int i = 0; i < DUPS; i++)
        got_reset(&g[i]);
    event_free(r.finish_ev);
    idem_free(other);
    env_close(&e);
}

static void test_duplicates(void)
{
    dups_case(25, 0);
    /* A huge poll interval: only the in-process wake-up can be this fast. */
    dups_case(5000, 0);
    /* The owner is another instance: the waiters must find the result by polling. */
    dups_case(20, 1);
}

static void test_in_progress(void)
{
    env e;
    env_open(&e, 0, 150, 25, 0);
    char key[65], h[65];
    got g = {0};
    idem_key("pk", "mcp", "slow", "inv-slow", key);
    hash_of("in", h);
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 1000) == IDEM_RUN);
    int64_t t0 = now_mono_ms();
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 30000) == IDEM_IN_PROGRESS);
    int64_t took = now_mono_ms() - t0;
    CHECK(took >= 150); /* it waited its wait_ms (a loaded machine may take longer) */
    idem_stats_t st;
    idem_stats(e.ic, &st);
    /* and gave up at its deadline: polls of 25 ms across 150 ms, never more than
     * 150 / 25 + 1 however late the timers fire */
    CHECK(st.polls >= 1 && st.polls <= 7);
    CHECK(st.in_progress == 1 && st.runs == 1 && st.waits == 1);
    got_reset(&g);
    env_close(&e);
}

static void test_abort(void)
{
    env e;
    env_open(&e, 0, 5000, 1000, 0);
    char key[65], h[65];
    got g = {0}, w = {0};
    idem_key("pk", "mcp", "act", "inv-abort", key);
    hash_of("in", h);
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 1000) == IDEM_RUN);
    idem_abort(e.ic, key);
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 1000) == IDEM_RUN);

    /* A duplicate waiting on an owner that aborts takes the key over (woken, not
     * after the 1 s poll). */
    int target = delivered + 1;
    idem_begin(e.ic, key, h, on_idem, &w);
    run_for(e.b, 30);
    CHECK(w.calls == 0);
    idem_stats_t s0, s1;
    idem_stats(e.ic, &s0);
    idem_abort(e.ic, key);
    CHECK(run_until(e.b, &delivered, target, 30000));
    CHECK(w.d == IDEM_RUN);
    idem_stats(e.ic, &s1);
    CHECK(s1.polls == s0.polls); /* woken by the abort, not by its poll */
    /* Now it is the owner: its finish is stored. */
    idem_finish(e.ic, key, h, "ok", 2);
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 1000) == IDEM_REPLAY);
    CHECK(g.len == 2 && memcmp(g.resp, "ok", 2) == 0);
    /* Abort of a key we do not own does nothing. */
    idem_abort(e.ic, key);
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 1000) == IDEM_REPLAY);
    idem_stats_t st;
    idem_stats(e.ic, &st);
    CHECK(st.aborts == 2 && st.runs == 3);
    got_reset(&g);
    got_reset(&w);
    env_close(&e);
}

static void test_claim_expiry(void)
{
    env e;
    env_open(&e, 0, 5000, 20, 60);
    char key[65], h[65];
    got g = {0};
    idem_key("pk", "mcp", "crash", "inv-crash", key);
    hash_of("in", h);
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 1000) == IDEM_RUN); /* owner "crashes" */
    /* A duplicate waits, then takes over when the marker expires. */
    int64_t t0 = now_mono_ms();
    idem_stats_t s0, s1;
    idem_stats(e.ic, &s0);
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 30000) == IDEM_RUN);
    int64_t took = now_mono_ms() - t0;
    idem_stats(e.ic, &s1);
    CHECK(took >= 40); /* it waited for the marker's expiry */
    /* and took over at the expiry (a 60 ms marker polled every 20 ms), not at the end
     * of its 5 s wait: a few polls, however late the timers fire */
    CHECK(s1.polls - s0.polls >= 1 && s1.polls - s0.polls <= 5);
    /* After expiry without a waiter, the next begin runs as well. */
    run_for(e.b, 100);
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 1000) == IDEM_RUN);
    got_reset(&g);
    env_close(&e);
}

static void test_unavailable(void)
{
    env e;
    env_open(&e, 0, 5000, 20, 0);
    char key[65], h[65];
    got g = {0}, w = {0};
    idem_key("pk", "mcp", "u", "inv-u", key);
    hash_of("in", h);
    store_memory_fail_next(e.s, 1);
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 1000) == IDEM_UNAVAILABLE);
    /* Nothing was run or claimed: the next begin owns the key. */
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 1000) == IDEM_RUN);
    /* A waiter whose poll fails is told so, rather than run. */
    int target = delivered + 1;
    idem_begin(e.ic, key, h, on_idem, &w);
    run_for(e.b, 10);
    CHECK(w.calls == 0);
    store_memory_fail_next(e.s, 1);
    CHECK(run_until(e.b, &delivered, target, 2000));
    CHECK(w.d == IDEM_UNAVAILABLE);
    /* A finish the store refuses is counted, and leaves the marker. */
    store_memory_fail_next(e.s, 1);
    idem_finish(e.ic, key, h, "x", 1);
    run_for(e.b, 10);
    idem_stats_t st;
    idem_stats(e.ic, &st);
    CHECK(st.unavailable == 2 && st.runs == 1 && st.finish_errors == 1 && st.finished == 0);

    /* A value under the key that is not a record: do not guess. */
    char skey[80];
    char k2[65];
    idem_key("pk", "mcp", "u", "inv-garbage", k2);
    snprintf(skey, sizeof skey, "idem:%s", k2);
    store_set(e.s, skey, "garbage", 7, 0, NULL, NULL);
    CHECK(begin_sync(e.b, e.ic, k2, h, &g, 1000) == IDEM_UNAVAILABLE);
    got_reset(&g);
    got_reset(&w);
    env_close(&e);
}

static void test_stale_owner(void)
{
    env e;
    env_open(&e, 0, 5000, 20, 50);
    idem_config cfg = {0, 5000, 20, 50};
    idem_ctx *b2 = idem_new(e.b, e.s, &cfg);
    char key[65], h[65], h2[65];
    got g = {0};
    idem_key("pk", "mcp", "stale", "inv-stale", key);
    hash_of("in", h);
    hash_of("in-2", h2);

    /* Instance A owns, stalls past the marker TTL; instance B takes over. */
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 1000) == IDEM_RUN);
    run_for(e.b, 80);
    CHECK(begin_sync(e.b, b2, key, h, &g, 1000) == IDEM_RUN);
    idem_finish(e.ic, key, h, "stale", 5);
    run_for(e.b, 10);
    idem_stats_t sa;
    idem_stats(e.ic, &sa);
    CHECK(sa.finish_stale == 1 && sa.finished == 0);
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 3000) == IDEM_RUN); /* B's marker expired too */
    idem_abort(e.ic, key);
    CHECK(begin_sync(e.b, b2, key, h, &g, 1000) == IDEM_RUN);
    idem_finish(b2, key, h, "fresh", 5);
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 1000) == IDEM_REPLAY);
    CHECK(g.len == 5 && memcmp(g.resp, "fresh", 5) == 0);

    /* Same instance, a new input after expiry: the old owner's finish is dropped. */
    char k2[65];
    idem_key("pk", "mcp", "stale", "inv-stale-2", k2);
    CHECK(begin_sync(e.b, e.ic, k2, h, &g, 1000) == IDEM_RUN);
    run_for(e.b, 80);
    CHECK(begin_sync(e.b, e.ic, k2, h2, &g, 1000) == IDEM_RUN);
    idem_finish(e.ic, k2, h, "old", 3);
    idem_finish(e.ic, k2, h2, "new", 3);
    CHECK(begin_sync(e.b, e.ic, k2, h2, &g, 1000) == IDEM_REPLAY);
    CHECK(g.len == 3 && memcmp(g.resp, "new", 3) == 0);
    CHECK(begin_sync(e.b, e.ic, k2, h, &g, 1000) == IDEM_CONFLICT);

    /* Marker expired and nobody claimed since: the late finish is still stored. */
    char k3[65];
    idem_key("pk", "mcp", "stale", "inv-late", k3);
    CHECK(begin_sync(e.b, e.ic, k3, h, &g, 1000) == IDEM_RUN);
    run_for(e.b, 80);
    idem_finish(e.ic, k3, h, "late", 4);
    run_for(e.b, 10); /* the fallback claim is a second round trip */
    CHECK(begin_sync(e.b, b2, k3, h, &g, 1000) == IDEM_REPLAY);
    CHECK(g.len == 4 && memcmp(g.resp, "late", 4) == 0);
    got_reset(&g);
    idem_free(b2);
    env_close(&e);
}

static void test_cancel(void)
{
    env e;
    env_open(&e, 0, 5000, 20, 0);
    char key[65], h[65];
    got g = {0}, w = {0};
    idem_key("pk", "mcp", "cx", "inv-cx", key);
    hash_of("in", h);
    /* Cancelled while its claim is in flight: no callback, and the key is free. */
    idem_wait *x = idem_begin(e.ic, key, h, on_idem, &w);
    idem_cancel(x);
    run_for(e.b, 20);
    CHECK(w.calls == 0);
    CHECK(begin_sync(e.b, e.ic, key, h, &g, 1000) == IDEM_RUN);
    /* Cancelled while waiting. */
    x = idem_begin(e.ic, key, h, on_idem, &w);
    run_for(e.b, 50);
    idem_cancel(x);
    idem_finish(e.ic, key, h, "r", 1);
    run_for(e.b, 50);
    CHECK(w.calls == 0);
    /* Freed with waits pending (checked by ASan). */
    char k2[65];
    idem_key("pk", "mcp", "cx", "inv-cx-2", k2);
    CHECK(begin_sync(e.b, e.ic, k2, h, &g, 1000) == IDEM_RUN);
    idem_begin(e.ic, k2, h, on_idem, &w);
    idem_begin(e.ic, k2, h, on_idem, &w);
    run_for(e.b, 30);
    idem_begin(e.ic, k2, h, on_idem, &w);
    idem_finish(e.ic, k2, h, "r", 1);
    CHECK(w.calls == 0);
    got_reset(&g);
    got_reset(&w);
    env_close(&e);
}

static void test_keys(void)
{
    char a[65], b[65], want[65];
    const char *joined = "pk\nmcp\nquery\ninv";
    sha256_hex(joined, strlen(joined), want);
    idem_key("pk", "mcp", "query", "inv", a);
    CHECK_STR(a, want);
    CHECK(strlen(a) == 64);
    idem_key("pk2", "mcp", "query", "inv", b);
    CHECK(strcmp(a, b) != 0);
    idem_key("pk", "rest", "query", "inv", b);
    CHECK(strcmp(a, b) != 0);
    idem_key("pk", "mcp", "query2", "inv", b);
    CHECK(strcmp(a, b) != 0);
    idem_key("pk", "mcp", "query", "inv2", b);
    CHECK(strcmp(a, b) != 0);
    idem_key("pk", "mcp", "query", "inv", b);
    CHECK_STR(a, b);
    /* Moving a character across a separator changes the key. */
    idem_key("pkm", "cp", "query", "inv", b);
    CHECK(strcmp(a, b) != 0);
    CHECK_STR(idem_decision_name(IDEM_IN_PROGRESS), "in_progress");
}

static void input_hash_text(const char *text, char out[65])
{
    char err[128];
    json_value *v = json_parse(text, strlen(text), NULL, err, sizeof err);
    CHECK(v != NULL);
    idem_input_hash(v, out);
    json_free(v);
}

static void test_input_hash(void)
{
    char a[65], b[65];
    input_hash_text("{\"b\":1,\"a\":[1,2,{\"y\":2,\"x\":\"s\"}],\"c\":{\"q\":null,\"p\":true}}", a);
    input_hash_text(" { \"c\" : {\"p\":true,\"q\":null}, \"a\": [1, 2, {\"x\":\"s\",\"y\":2}],"
                    "\n \"b\": 1 }",
                    b);
    CHECK_STR(a, b);
    /* Array order matters; values matter. */
    input_hash_text("{\"b\":1,\"a\":[2,1,{\"y\":2,\"x\":\"s\"}],\"c\":{\"q\":null,\"p\":true}}", b);
    CHECK(strcmp(a, b) != 0);
    input_hash_text("{\"b\":2,\"a\":[1,2,{\"y\":2,\"x\":\"s\"}],\"c\":{\"q\":null,\"p\":true}}", b);
    CHECK(strcmp(a, b) != 0);
    /* Numbers (documented in idem.h): float spellings of one double are equal;
     * an integer and a float are not. */
    input_hash_text("{\"n\":1.5}", a);
    input_hash_text("{\"n\":1.50}", b);
    CHECK_STR(a, b);
    input_hash_text("{\"n\":15e-1}", b);
    CHECK_STR(a, b);
    input_hash_text("{\"n\":1}", a);
    input_hash_text("{\"n\":1.0}", b);
    CHECK(strcmp(a, b) != 0);
    /* String escapes decode to the same value. */
    input_hash_text("{\"s\":\"\\u0041\"}", a);
    input_hash_text("{\"s\":\"A\"}", b);
    CHECK_STR(a, b);
    /* No arguments == {} (and the hash is of the canonical text). */
    idem_input_hash(NULL, a);
    input_hash_text("{ }", b);
    CHECK_STR(a, b);
    hash_of("{}", b);
    CHECK_STR(a, b);
}

int main(void)
{
    test_keys();
    test_input_hash();
    test_run_replay();
    test_conflict();
    test_duplicates();
    test_in_progress();
    test_abort();
    test_claim_expiry();
    test_unavailable();
    test_stale_owner();
    test_cancel();
    return CHECK_DONE();
}
