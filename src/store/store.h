/* store: the shared-state store behind idempotency records, in-flight locks and
 * anything else that must agree across replicas.
 *
 * The interface is asynchronous because the Redis backend is: every operation
 * returns a handle at once and reports its result through a callback that is always
 * delivered later from the event loop, never from inside the starting call (the
 * in-memory backend defers its answers the same way, so callers are written for
 * the real thing).
 *
 * Ordering: operations issued on one store are applied in issue order (one queue in
 * memory, one pipelined connection for Redis), and each callback runs right after
 * its operation was applied.
 *
 * Keys are NUL-terminated strings; values are arbitrary bytes (binary-safe).
 *
 * Ownership and lifetimes:
 * - store_* copy the key and value before returning; the caller keeps its buffers.
 * - The val passed to a callback is owned by the store and valid only during the
 *   callback (copy it to keep it). It is NUL-terminated for convenience but may
 *   contain NULs; use len.
 * - A store_op handle is valid until its callback has started or store_cancel was
 *   called, whichever is first. cb may be NULL (fire-and-forget); the handle must
 *   then not be used at all (NULL may be returned).
 * - store_cancel suppresses the callback only: a write that was already issued may
 *   still take effect (a command sent to Redis cannot be recalled; the memory
 *   store applies it too, for the same semantics).
 * - store_free drops pending operations without calling their callbacks. It must not
 *   be called from inside a store callback. */
#ifndef CL_STORE_H
#define CL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct event_base;

typedef struct store store;
typedef struct store_op store_op;

/* rc: 0 found (val, len set), 1 absent, -1 error. */
typedef void (*store_get_cb)(int rc, const char *val, size_t len, void *arg);
/* rc: 0 done (set / claimed / replaced / deleted), 1 not done (see each operation;
 * val is then the current value, or NULL when the key is absent), -1 error. */
typedef void (*store_rc_cb)(int rc, const char *val, size_t len, void *arg);

/* ttl_ms <= 0 means no expiry. */

/* Reads a key. */
store_op *store_get(store *s, const char *key, store_get_cb cb, void *arg);
/* Writes a key unconditionally: rc 0. */
store_op *store_set(store *s, const char *key, const char *val, size_t len, long ttl_ms,
                    store_rc_cb cb, void *arg);
/* Atomic set-if-absent (Redis SET NX PX): rc 0 claimed; rc 1 the key exists and val
 * is its current value. */
store_op *store_claim(store *s, const char *key, const char *val, size_t len, long ttl_ms,
                      store_rc_cb cb, void *arg);
/* Atomic compare-and-set: replaces the value only if the current value is exactly
 * expect (bytes): rc 0 replaced; rc 1 mismatch, val = current value or NULL when the
 * key is absent. (Redis: a small script; a release only by the lock's owner.) */
store_op *store_set_if(store *s, const char *key, const char *expect, size_t expect_len,
                       const char *val, size_t len, long ttl_ms, store_rc_cb cb, void *arg);
/* Deletes a key: rc 0 deleted, rc 1 it was absent (val NULL). */
store_op *store_del(store *s, const char *key, store_rc_cb cb, void *arg);
/* Atomic compare-and-delete: rc 0 deleted; rc 1 mismatch (val = current or NULL). */
store_op *store_del_if(store *s, const char *key, const char *expect, size_t expect_len,
                       store_rc_cb cb, void *arg);

/* Suppresses the callback of a pending operation (see above). */
void store_cancel(store_op *op);

typedef struct store_stats_t {
    uint64_t ops;       /* operations completed (including failed ones) */
    uint64_t errors;    /* operations that answered rc -1 */
    size_t entries;     /* live entries (memory: exact, including not-yet-swept expired) */
    uint64_t evictions; /* entries dropped to respect the bound (memory) */
    uint64_t expired;   /* entries dropped because their TTL passed (memory) */
    uint64_t timeouts;  /* connections dropped by the command timeout (redis) */
} store_stats_t;
void store_stats(const store *s, store_stats_t *out);
/* Those figures as /metrics series (cl_store_*); nothing for a NULL s. */
void store_write_metrics(const store *s, buf *out);

void store_free(store *s);

/* ---- in-memory backend ----
 * A hash table with per-entry TTL: expired entries are invisible at once, dropped
 * lazily on access and by a periodic sweep (a 1 s timer, armed only while entries
 * with a TTL exist; note that it keeps event_base_dispatch from returning then).
 * At most max_entries (0 = 100000) live entries: a write of a new key
 * into a full table first drops expired entries, then evicts the entry that expires
 * soonest (entries without TTL last). */
store *store_memory_new(struct event_base *base, size_t max_entries);
/* Test hook: the next n operations fail with rc -1 (and change nothing). */
void store_memory_fail_next(store *s, int n);

/* ---- Redis backend (store_redis.c, hiredis + its libevent adapter) ----
 * One pipelined connection per store. store_redis_new only starts connecting: it
 * never waits, and nothing ever blocks the loop (host names are resolved with
 * evdns). Until the connection is up (TCP, AUTH, SELECT, scripts loaded), and
 * during an outage, every operation fails fast with rc -1 (still from the loop,
 * never synchronously); the store reconnects by itself with exponential backoff.
 * A command without an answer after command_timeout_ms counts as an outage: the
 * connection is dropped, every pending operation answers -1, and it reconnects.
 * claim, set_if and del_if are small server-side Lua scripts (EVALSHA, EVAL after
 * NOSCRIPT), so each is atomic on the server. Ordering as in the interface, except
 * that an operation re-sent after NOSCRIPT runs after those issued before the retry.
 * Every key is prefixed with key_prefix. stats.entries is 0 (not tracked). */
typedef struct store_redis_url {
    char host[256];
    int port;       /* default 6379 */
    int db;         /* default 0 */
    char user[128]; /* "" = none (AUTH <password>) */
    char pass[256]; /* "" = no AUTH */
} store_redis_url;

/* Parses redis://[[user][:password]@]host[:port][/db] (host may be [v6]; user and
 * password may be %-encoded). 0, or -1 with err. */
int store_redis_parse_url(const char *url, store_redis_url *out, char *err, size_t errlen);

/* Zero / NULL fields take the defaults. */
typedef struct store_redis_config {
    const char *url;         /* required */
    long connect_timeout_ms; /* TCP + AUTH + SELECT + script load; default 1000 */
    long command_timeout_ms; /* one command's answer; default 1000 */
    long reconnect_min_ms;   /* first backoff; default 50 */
    long reconnect_max_ms;   /* backoff cap; default 2000 */
    const char *key_prefix;  /* default "" */
} store_redis_config;

/* NULL with err when the URL is bad. The store borrows base; copies cfg. */
store *store_redis_new(struct event_base *base, const store_redis_config *cfg, char *err,
                       size_t errlen);
/* 1 while the connection is ready for commands (0 for other backends). */
int store_redis_ready(const store *s);

/* ---- for backends ----
 * A backend embeds `store` as its first member and fills the vtable; store.c
 * dispatches and keeps the shared counters. A backend's op embeds store_op first. */
typedef enum {
    STORE_GET,
    STORE_SET,
    STORE_CLAIM,
    STORE_SET_IF,
    STORE_DEL,
    STORE_DEL_IF
} store_kind;

typedef struct store_request {
    store_kind kind;
    const char *key;
    const char *expect; /* SET_IF / DEL_IF */
    size_t expect_len;
    const char *val; /* SET / CLAIM / SET_IF */
    size_t len;
    long ttl_ms;
    store_get_cb get_cb; /* GET */
    store_rc_cb rc_cb;   /* others */
    void *arg;
} store_request;

typedef struct store_vtable {
    store_op *(*submit)(store *s, const store_request *req);
    void (*cancel)(store_op *op);
    size_t (*entries)(const store *s);
    void (*destroy)(store *s);
} store_vtable;

struct store {
    const store_vtable *vt;
    uint64_t ops, errors, evictions, expired, timeouts;
};

struct store_op {
    store *s;
};

#endif
