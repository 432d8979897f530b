/* auth: bearer token -> principal, asynchronously (docs/security.md).
 *
 * Tokens starting "bak_" are AppKeys, checked at bkn-safe's introspection endpoint
 * (JSON body); everything else goes to the OAuth server's RFC 7662 introspection
 * endpoint (form body, token percent-encoded, optional HTTP Basic client auth).
 * If no AppKey endpoint is configured, "bak_" tokens go to OAuth.
 *
 * Results are cached under the SHA-256 of the token (the cache never holds the
 * token, nothing logs it; only an auth_memo does, below): positive results until
 * min(exp, now + cache_ttl_s), negative ones for negative_ttl_s; the cache holds at
 * most max_entries (expired entries first, then the oldest, are evicted). Failures
 * of the endpoint (transport error, non-2xx, undecodable body) are not cached.
 * Concurrent checks of one token share one upstream call (single-flight).
 *
 * Ownership: auth_new copies the config (strings included); the fetch_ctx is
 * borrowed and must outlive the auth_ctx. An auth_wait is owned by auth and lives
 * until its callback returns or it is cancelled. The principal and detail passed to
 * the callback are valid only during the callback (copy the principal, it is a
 * plain value). Everything runs on the event base's thread. */
#ifndef CL_AUTH_H
#define CL_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "fetch.h"
#include "principal.h"
#include "util.h"

struct event_base;

typedef struct auth_config {
    const char *oauth_introspect_url;
    const char *oauth_client_id;     /* optional HTTP Basic for the introspection call */
    const char *oauth_client_secret; /* (both must be set to be used) */
    const char *appkey_introspect_url;
    long timeout_ms;                     /* per introspection call; 0 -> 5000 */
    int cache_ttl_s;                     /* positive results: until min(exp, now+ttl); 0 -> 300 */
    int negative_ttl_s;                  /* 0 -> 10 */
    size_t max_entries;                  /* 0 -> 10000 */
    const char *default_tenant_id;       /* used when the response has none; may be NULL */
    const char *default_business_domain; /* idem */
} auth_config;

typedef enum {
    AUTH_OK,
    AUTH_INVALID,    /* -> 401 */
    AUTH_UNAVAILABLE /* -> 503: introspection failed (transport, non-2xx, bad body) */
} auth_status;

/* detail: "token is invalid" | "api key is invalid" | the reason for
 * unavailability (never contains the token). who is NULL unless st == AUTH_OK. */
typedef void (*auth_cb)(auth_status st, const principal *who, const char *detail, void *arg);

typedef struct auth_ctx auth_ctx;
typedef struct auth_wait auth_wait;

typedef struct auth_stats_t {
    uint64_t hits;           /* positive cache hits */
    uint64_t negative_hits;  /* negative cache hits */
    uint64_t misses;         /* checks not answered from the cache (incl. coalesced) */
    uint64_t introspections; /* upstream calls started */
    uint64_t coalesced;      /* checks that joined an introspection already in flight */
    uint64_t errors;         /* introspections that ended AUTH_UNAVAILABLE */
    uint64_t entries;        /* current cache size */
} auth_stats_t;

/* Returns NULL if base or fetch is NULL. */
auth_ctx *auth_new(struct event_base *base, fetch_ctx *fetch, const auth_config *cfg);
/* Cancels every pending check (callbacks are not called) and in-flight call. Safe
 * from inside an auth callback. */
void auth_free(auth_ctx *a);

/* Starts a check. The callback always runs later from the event loop (even for a
 * cache hit or an empty token), exactly once unless cancelled. The token is read
 * during the call only. Returns NULL only if a or cb is NULL. */
auth_wait *auth_check(auth_ctx *a, const char *token, size_t token_len, auth_cb cb, void *arg);

/* A connection's last token and its cache key: the same token sent again on that
 * connection is not hashed again (bytes compared in constant time). Only the key is
 * remembered, never a result: the cache decides each time, expiry included, exactly
 * as auth_check. It holds a copy of the token, so its owner clears it (the bytes
 * wiped) when the connection closes. All zero is an empty memo. */
typedef struct auth_memo {
    char *token;
    size_t len;
    char key[65];
} auth_memo;
/* auth_check, through the memo m (NULL: none), which it updates. */
auth_wait *auth_check_memo(auth_ctx *a, const char *token, size_t token_len, auth_memo *m,
                           auth_cb cb, void *arg);
void auth_memo_clear(auth_memo *m);

/* The callback will not be called. Other waiters of the same token are unaffected;
 * the introspection continues and still fills the cache. Safe from any callback. */
void auth_cancel(auth_wait *w);

void auth_stats(const auth_ctx *a, auth_stats_t *out);
/* Those figures as /metrics series (cl_auth_*); nothing for a NULL a. */
void auth_write_metrics(const auth_ctx *a, buf *out);

#endif
