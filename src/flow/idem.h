/* idem: idempotency records over the state store.
 *
 * A call that carries a hint (client invocation id, or a reused bkn-request-id)
 * gets a record keyed by idem_key(principal key, scope, tool, hint). The first
 * call claims the key with an in-flight marker and runs; idem_finish replaces the
 * marker with the stored response; a retry with the same input hash gets that
 * response back (REPLAY) instead of running again; a retry with a different input
 * hash is a CONFLICT; a duplicate that arrives while the first still runs waits
 * for it (polling the store, and woken at once when the owner is in this process)
 * and gets IN_PROGRESS after wait_ms.
 *
 * Record encoding (store key "idem:<key hex>"), length-prefixed binary, so any
 * response bytes round-trip (NULs included):
 *   bytes 0..3   "CLI1"               magic and version
 *   byte  4      'R' running | 'D' done
 *   bytes 5..68  input hash, 64 lowercase hex
 *   running: bytes 69..100  owner nonce, 32 hex (16 random bytes); nothing after
 *   done:    bytes 69..end  the response blob, as given to idem_finish
 * A running marker lives claim_ttl_ms (so a crashed owner does not block the key
 * forever); a done record lives ttl_ms.
 *
 * Ownership in this process: a successful claim is remembered in the ctx by (key,
 * input hash) together with the marker bytes. idem_finish / idem_abort look it up
 * and only replace / delete the marker if it is still exactly ours (atomic
 * compare-and-set in the store), so an owner whose marker expired and whose key was
 * claimed again cannot overwrite the new owner's record. If the same ctx claims a
 * key again after its marker expired, the newer claim replaces the older one
 * (a finish then stores whichever response comes first: both ran on the same key).
 *
 * Every RUN must end in idem_finish or idem_abort (the ctx remembers the claim
 * until then). The marker is not refreshed while the owner runs, so claim_ttl_ms
 * must exceed the longest call deadline, or a duplicate may run after it expires.
 *
 * Lifetimes: idem_begin copies key and hash. An idem_wait handle is valid until its
 * callback has started or idem_cancel was called. The response passed to the
 * callback is valid only during the callback. Callbacks are always delivered from
 * the event loop, never from inside idem_begin. idem_free drops pending waits
 * without callbacks; it and store_free must not be called from inside a callback.
 * The store must outlive the ctx. */
#ifndef CL_IDEM_H
#define CL_IDEM_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "store.h"

struct event_base;

typedef enum {
    IDEM_RUN,         /* you own the key: run, then idem_finish (or idem_abort) */
    IDEM_REPLAY,      /* the stored response is attached */
    IDEM_CONFLICT,    /* same key, different input hash */
    IDEM_IN_PROGRESS, /* a duplicate is still running after the wait bound */
    IDEM_UNAVAILABLE  /* the store failed: answer a retryable error, do NOT run */
} idem_decision;

/* Zero / negative fields take the defaults. */
typedef struct idem_config {
    long ttl_ms;       /* done records; default 86400000 (24 h) */
    long wait_ms;      /* how long a duplicate waits for the first; default 10000 */
    long poll_ms;      /* wait granularity; default 25 */
    long claim_ttl_ms; /* in-flight marker TTL; default 60000 */
} idem_config;

typedef struct idem_ctx idem_ctx;
typedef struct idem_wait idem_wait;

/* cfg may be NULL (defaults). The ctx borrows s and base. */
idem_ctx *idem_new(struct event_base *base, store *s, const idem_config *cfg);
void idem_free(idem_ctx *ic);

/* sha256 hex of principal_key "\n" scope "\n" tool "\n" hint (NULL = ""). scope is
 * the protocol: "mcp" for every MCP surface (/mcp, /mcp-compact, /mcp/ptc share one
 * scope, as they share one Trace Core Operation key), "rest" for REST. The parts
 * must not contain '\n' (principal keys are hex, scopes and tool names are
 * identifiers, hints are validated printable ASCII without spaces), which makes the
 * join unambiguous. */
void idem_key(const char *principal_key, const char *scope, const char *tool, const char *hint,
              char out[65]);

/* sha256 hex of the canonical JSON of args (json_write canonical=1: keys sorted,
 * no whitespace); args NULL hashes as {}. The caller removes bkn_context first.
 * Numbers compare by their parsed form: member order and whitespace never matter,
 * and spellings of the same double are equal (1.5, 1.50, 15e-1), but an integer and
 * a float are different inputs (1 vs 1.0 vs 1e0), and numbers kept as text (big
 * integers, excess precision) compare by text. */
void idem_input_hash(const json_value *args, char out[65]);

/* response/len: the stored blob for REPLAY; NULL/0 otherwise. */
typedef void (*idem_cb)(idem_decision d, const char *response, size_t len, void *arg);

/* key and input_hash: 64 hex chars. */
idem_wait *idem_begin(idem_ctx *ic, const char key[65], const char input_hash[65], idem_cb cb,
                      void *arg);
/* Stores the response (fire-and-forget; outcomes counted in the stats) if our
 * marker for (key, input_hash) is still in place; if the marker expired and nobody
 * claimed the key since, the response is stored anyway (it is the result of that
 * input). Wakes this ctx's waiters on the key. Copies response. */
void idem_finish(idem_ctx *ic, const char key[65], const char input_hash[65], const char *response,
                 size_t len);
/* The owner could not run (cancelled / refused before any downstream call): deletes
 * our marker so a retry may run; wakes this ctx's waiters on the key. */
void idem_abort(idem_ctx *ic, const char key[65]);
/* Stops a pending begin: its callback will not run. If a claim was already in
 * flight and succeeds, the marker is deleted again. */
void idem_cancel(idem_wait *w);

typedef struct idem_stats_t {
    uint64_t runs, replays, conflicts, in_progress, unavailable;
    uint64_t waits;         /* begins that found the key running and waited */
    uint64_t finished;      /* responses stored */
    uint64_t finish_stale;  /* finishes dropped: not our marker any more / not owned */
    uint64_t finish_errors; /* finishes (and aborts) the store failed */
    uint64_t aborts;
    uint64_t polls; /* poll timers of waiting duplicates that fired (a store read each) */
} idem_stats_t;
void idem_stats(const idem_ctx *ic, idem_stats_t *out);
/* Those figures as /metrics series (cl_idempotency_*); nothing for a NULL ic. */
void idem_write_metrics(const idem_ctx *ic, buf *out);

const char *idem_decision_name(idem_decision d); /* "run", "replay", ... */
/* The in-flight marker's lifetime in effect (claim_ttl_ms after defaults). */
long idem_claim_ttl_ms(const idem_ctx *ic);

#endif
