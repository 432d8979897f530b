/* trace: the BKN Trace Core client (docs/lifecycle.md).
 *
 * Every Trace Core call of the process goes through one trace_ctx on top of the
 * shared fetch_ctx: owner headers from the authenticated principal (never a token,
 * never Authorization), a per-call timeout, bounded retries for idempotent calls, a
 * circuit breaker, the capture-policy cache and the availability probe.
 *
 * Callbacks: every callback runs later from the event loop, never inside the
 * starting call, exactly once unless the handle is cancelled first. A callback may
 * start or cancel other calls, and may call trace_free.
 *
 * Ownership: trace_new copies the config strings. The returned trace_call handles
 * are owned by the context; a handle is valid until its callback has returned or it
 * is cancelled. Everything reachable from a trace_reply is owned by the client and
 * valid only during the callback (json_clone what you keep). */
#ifndef CL_TRACE_H
#define CL_TRACE_H

#include <stdint.h>

#include "fetch.h"
#include "json.h"
#include "principal.h"
#include "util.h"

struct event_base;

typedef struct trace_ctx trace_ctx;
typedef struct trace_call trace_call; /* an in-flight request, policy lookup or probe */

typedef struct trace_config {
    const char *base_url; /* BKN_TRACE_CORE_URL; NULL or "" = not installed; the client
                             appends /api/agent-observability/v1 */
    long timeout_ms;      /* per try (0 -> 3000) */
    int policy_ttl_s;     /* capture-policy cache TTL (0 -> 30) */
    int probe_tries;      /* availability probe: tries (0 -> 3) */
    long probe_budget_ms; /* total budget for all tries (0 -> 1500) */
    int verdict_ttl_s;    /* probe verdict cache (0 -> 5) */
    int breaker_failures; /* consecutive UNAVAILABLE outcomes that open the breaker (0 -> 5) */
    long breaker_open_ms; /* open window before a half-open trial (0 -> 2000) */
    const char *default_tenant_id;       /* fallback for x-tenant-id; may be NULL */
    const char *default_business_domain; /* fallback for x-business-domain; may be NULL */
    int lease_ttl_s;                     /* interaction lease cache TTL; 0 = no cache */
    int pipeline; /* requests may be written behind others on a kept connection */
} trace_config;

/* Returns a context using base and fetch (both borrowed; they must outlive it).
 * Never NULL (aborting allocation). */
trace_ctx *trace_new(struct event_base *base, fetch_ctx *fetch, const trace_config *cfg);
/* Cancels every in-flight call (their callbacks are not called) and frees. May be
 * called from inside a trace callback (the free completes when it returns). */
void trace_free(trace_ctx *t);
/* 1 when a base URL is configured. */
int trace_installed(const trace_ctx *t);

typedef enum {
    TRACE_OK,            /* 2xx; body is the parsed JSON (NULL when the body was empty) */
    TRACE_API_ERROR,     /* non-2xx whose body is the {"error":{...}} envelope */
    TRACE_UNAVAILABLE,   /* transport error, timeout, breaker open, a 2xx that is not
                            JSON, or a non-2xx body that is not the envelope */
    TRACE_NOT_INSTALLED, /* base_url empty: no call was made */
    TRACE_NO_OWNER       /* anonymous principal or no account/tenant/business domain:
                            no call was made (callers map it to permission_denied) */
} trace_status;

typedef struct trace_reply {
    trace_status status;
    long http_status;       /* of the last try; 0 when none got an HTTP answer */
    const json_value *body; /* parsed body (OK and API_ERROR), else NULL */
    const char *error_code; /* body.error.code for API_ERROR ("" when absent), else NULL */
    const char *detail;     /* human text for UNAVAILABLE / NOT_INSTALLED / NO_OWNER */
    int64_t elapsed_ms;     /* from trace_request to the outcome, retries included */
} trace_reply;

/* r and everything it points to are valid only during the callback. */
typedef void (*trace_cb)(const trace_reply *r, void *arg);

/* Where a Trace Core call comes from: the request it serves. Every member may be NULL.
 * Sent as headers: lang as Accept-Language; request_id as bkn-request-id and
 * x-request-id (so Core's error envelopes name the request); a child of traceparent
 * (the inbound trace id and flags, a fresh span id; nothing when the inbound one is
 * missing or malformed: the recorded payloads carry their own trace ids), tracestate
 * and baggage as they came. Borrowed for the starting call only (the headers are
 * copied into the call). */
typedef struct trace_origin {
    const char *lang;
    const char *request_id;
    const char *traceparent, *tracestate, *baggage;
} trace_origin;

/* One Trace Core call: method + API base + path ("/interactions/int_x"; build
 * segments with trace_path_escape). body may be NULL; it is written canonically.
 * o (the origin's headers) may be NULL. idempotent != 0 allows 2 extra tries
 * (20 ms then 40 ms apart) after transport errors (not oversize bodies), 5xx and
 * 429. Each try has its own timeout_ms. who is copied. Never NULL (method, path and
 * cb must be non-NULL: misuse is reported as UNAVAILABLE). */
trace_call *trace_request(trace_ctx *t, const principal *who, const trace_origin *o,
                          const char *method, const char *path, const json_value *body,
                          int idempotent, trace_cb cb, void *arg);

/* Cancels any trace_call (request, policy lookup or probe); its callback will not be
 * called. No-op on the call whose callback is running. A cancelled lookup or probe
 * does not stop the shared Core call: its result still fills the cache. */
void trace_cancel(trace_call *c);

/* Capture policy: GET /capture-policy -> {"capture":"enabled"|"disabled","ttl_s"?}.
 * Cached per (tenant, business domain) after defaults for min(ttl_s, policy_ttl_s)
 * seconds; concurrent lookups for one key share one call. UNKNOWN (Core unavailable,
 * an API error or a malformed answer) is not cached. Not installed -> DISABLED (no
 * Core, nothing to record); a principal without an owner -> UNKNOWN, no call. */
typedef enum { CAPTURE_ENABLED, CAPTURE_DISABLED, CAPTURE_UNKNOWN } capture_state;
typedef void (*trace_policy_cb)(capture_state st, void *arg);
trace_call *trace_capture_policy(trace_ctx *t, const principal *who, trace_policy_cb cb, void *arg);

/* Availability probe: GET /health, up to probe_tries tries within
 * probe_budget_ms in total (each try's timeout = remaining budget / remaining
 * tries); ALIVE when any try gets a 2xx. The verdict is cached verdict_ttl_s;
 * concurrent probes share one. Not subject to the breaker; DOWN opens (or keeps
 * open) the breaker, ALIVE lets the next call through as the half-open trial.
 * Not installed -> DOWN without a call. */
typedef enum { PROBE_ALIVE, PROBE_DOWN } probe_verdict;
typedef void (*trace_probe_cb)(probe_verdict v, void *arg);
trace_call *trace_probe(trace_ctx *t, trace_probe_cb cb, void *arg);

/* A caller saw a Trace Core call fail: forget a cached ALIVE verdict so that the
 * next probe checks again (a cached DOWN is kept). */
void trace_note_failure(trace_ctx *t);

typedef enum { TRACE_BREAKER_CLOSED, TRACE_BREAKER_OPEN, TRACE_BREAKER_HALF_OPEN } trace_breaker;

typedef struct trace_stats_t {
    uint64_t requests;                    /* trace_request + internal policy calls */
    uint64_t http_calls;                  /* tries sent to Core (probe excluded) */
    uint64_t ok, api_errors, unavailable; /* final outcomes */
    uint64_t retries;                     /* extra tries */
    uint64_t fast_fails;                  /* refused by the open breaker */
    uint64_t no_owner, not_installed;
    trace_breaker breaker; /* current state */
    uint64_t breaker_opens;
    uint64_t probes;        /* probe runs (coalesced and cached ones excluded) */
    uint64_t probe_tries;   /* GET /health sent */
    uint64_t probe_down;    /* DOWN verdicts of probe runs */
    uint64_t policy_hits;   /* served from cache or joined an in-flight lookup */
    uint64_t policy_misses; /* started a Core call */
    int last_probe;              /* verdict of the last probe run: PROBE_ALIVE, PROBE_DOWN,
                                    or -1 when none ran yet (kept past the verdict's TTL) */
    int64_t last_probe_wall_ms;  /* when it settled (wall clock), 0 when none */
    uint64_t redeliveries;       /* background finalizations started */
    uint64_t redelivered;        /* ... that got their receipt */
    uint64_t redelivery_failed;  /* ... that ended without one (API error or time up) */
} trace_stats_t;
void trace_stats(const trace_ctx *t, trace_stats_t *out);
/* Those figures as /metrics series (cl_trace_*); nothing for a NULL t. */
void trace_write_metrics(const trace_ctx *t, buf *out);

/* Appends id percent-encoded for one path segment (everything but A-Z a-z 0-9
 * - . _ ~) to out; returns out->data. */
const char *trace_path_escape(const char *id, buf *out);

/* Synthetic correlation: trace_id = hex of the first 16 bytes of sha256("bkn.synthetic.trace:" +
 * request_id), span_id = hex of the first 8 bytes of sha256("bkn.synthetic.span:" +
 * request_id). Lowercase, NUL-terminated. */
void trace_synthetic_ids(const char *request_id, char trace_id[33], char span_id[17]);

/* Trace Core's PayloadEnvelope for payload: {"mode":"inline","media_type":"application/json",
 * "byte_length":N,"inline":<payload>} where N is the length of the canonical
 * encoding; past 1 MiB {"mode":"omitted","media_type":...,"byte_length":N,
 * "omitted_reason":"payload_too_large"}; payload NULL -> omitted with
 * "serialization_failed" and byte_length 0. *out is owned by the caller. Returns 0. */
#define TRACE_INLINE_MAX (1024 * 1024)
int trace_payload_envelope(const json_value *payload, json_value **out);

/* ---- the protocol: typed operations ----
 *
 * Each builds its path and body, sends it with trace_request and checks the reply
 * before the callback runs. A 2xx reply is decoded keeping only the members its
 * typed view reads (json_parse_keep; the others are checked and skipped), so
 * trace_reply.body holds those members only; an API error's envelope is whole. The callback gets the raw reply (for the failure cases:
 * status, API envelope, error code) and the typed view, which is non-NULL only when
 * the reply is TRACE_OK with a body (and, for ensure, carries every required
 * member). Everything is borrowed for the duration of the callback. Every op is
 * cancelled with trace_cancel. who is copied; strings and values given are copied
 * or written before the op returns. */

/* An interaction (GET /interactions/{id}, create, finish); members NULL when absent. */
typedef struct trace_interaction {
    const char *conversation_id, *interaction_id, *execution_status, *evidence_status;
    const char *lease_token, *updated_at;
    const json_value *lease_epoch;   /* any JSON value, or NULL */
    const char *answer_artifact_ref; /* closure_manifest.answer_artifact_ref, or NULL */
} trace_interaction;
typedef void (*trace_interaction_cb)(const trace_reply *r, const trace_interaction *it, void *arg);

/* GET /interactions/{interaction_id} */
trace_call *trace_get_interaction(trace_ctx *t, const principal *who, const trace_origin *o,
                                  const char *interaction_id, trace_interaction_cb cb, void *arg);

/* POST /conversations/{conversation_id}/interactions {idempotency_key, request_hash,
 * agent_name}: request_hash = sha256 hex of the question. Retried (Core answers a
 * replay of the key with the same interaction). */
trace_call *trace_create_interaction(trace_ctx *t, const principal *who, const trace_origin *o,
                                     const char *conversation_id, const char *idempotency_key,
                                     const char *question, const char *agent_name,
                                     trace_interaction_cb cb, void *arg);

/* POST /interactions/{interaction_id}/finish {outcome, idempotency_key,
 * answer_artifact_ref?, reason?} (answer_ref, reason: NULL or "" = absent). */
trace_call *trace_finish_interaction(trace_ctx *t, const principal *who, const trace_origin *o,
                                     const char *interaction_id, const char *outcome,
                                     const char *idempotency_key, const char *answer_ref,
                                     const char *reason, trace_interaction_cb cb, void *arg);

/* conversation_id: the reply's member, or NULL (also when it is missing). */
typedef void (*trace_id_cb)(const trace_reply *r, const char *id, void *arg);

/* POST /conversations:ensure-current {external_conversation_key, idempotency_key}
 * where idempotency_key = "mcp-conversation:" + 32 hex of sha256(external key). */
trace_call *trace_ensure_conversation(trace_ctx *t, const principal *who, const trace_origin *o,
                                      const char *external_key, trace_id_cb cb, void *arg);

/* POST /evidence/artifacts: the answer of an interaction as a result artifact
 * ({"answer": answer}, content-addressed id art_result_<32 hex>, synthetic trace id
 * of request_id, observed_at the interaction's updated_at when given). The id given
 * to the callback is the reply's artifact_id. */
trace_call *trace_store_answer(trace_ctx *t, const principal *who, const trace_origin *o,
                               const char *request_id, const char *interaction_id,
                               const char *answer, const char *observed_at, trace_id_cb cb,
                               void *arg);

/* operations:ensure of one business call. */
typedef struct trace_ensure_in {
    const char *conversation_id, *interaction_id;
    const char *operation_key, *tool_name;
    const char *protocol;                  /* "mcp" | "sdk" */
    const json_value *input;               /* the arguments (put in a PayloadEnvelope) */
    const char *input_json;                /* or their canonical text (input is then
                                              ignored); NULL: written from input */
    size_t input_len;
    const char *lease_token;               /* "" when none */
    const json_value *lease_epoch;         /* NULL -> 0 */
    const char *parent_operation_id;       /* NULL or "" = absent */
    const json_value *causation_event_ids; /* or NULL */
} trace_ensure_in;

typedef struct trace_operation {
    const char *operation_id, *receipt_id;
    const char *receipt_status; /* or NULL */
    long attempt;
    int execute; /* 1: run the tool; 0: another claimant ran (or runs) it */
    const json_value *operation, *receipt;
} trace_operation;
/* op: non-NULL on TRACE_OK when operation_id, receipt_id and an integer attempt
 * are present. */
typedef void (*trace_operation_cb)(const trace_reply *r, const trace_operation *op, void *arg);

/* POST /conversations/{cid}/interactions/{iid}/operations:ensure (not retried). */
trace_call *trace_ensure_operation(trace_ctx *t, const principal *who, const trace_origin *o,
                                   const trace_ensure_in *in, trace_operation_cb cb, void *arg);

/* The outcome of an attempt. */
typedef struct trace_attempt_in {
    const char *operation_id;
    long attempt;
    int failed; /* :fail with a tool_error, else :complete */
    const char *receipt_id, *request_id, *trace_id, *span_id;
    const json_value *business_refs; /* or NULL ([]) */
    const json_value *payload;       /* the output (or the error's result); NULL =
                                        serialization_failed */
    /* Or the payload already as JSON text (payload is then ignored): sent as it is,
     * byte_length its length. The caller's text, not rewritten, so its member order
     * stands (the same length as its canonical form when it has no whitespace). */
    const char *payload_json;
    size_t payload_len;
} trace_attempt_in;
/* The reply's "receipt" member as its JSON text - the bytes Core sent, not parsed
 * into a tree - and its receipt_id (NULL when absent or not a string). */
typedef struct trace_receipt {
    const char *json;
    size_t len;
    const char *receipt_id;
} trace_receipt;
/* rc: NULL when the reply has no "receipt" member. */
typedef void (*trace_receipt_cb)(const trace_reply *r, const trace_receipt *rc, void *arg);

/* POST /operations/{id}/attempts/{n}:complete | :fail (retried). */
trace_call *trace_finish_attempt(trace_ctx *t, const principal *who, const trace_origin *o,
                                 const trace_attempt_in *in, trace_receipt_cb cb, void *arg);

/* The same finalization, for an attempt whose finalization failed (the tool ran and
 * its caller has been answered): sent again in the background, ignoring the
 * breaker, with a growing pause (250 ms doubling to 4 s) while Trace Core is
 * unavailable, for at most TRACE_REDELIVER_MS; it ends at the first answer that is
 * not an outage (the receipt, or an API error: nothing more can be done). No
 * callback; it lives in the ctx (trace_free drops it: an instance that stops or
 * dies leaves that receipt pending). Counted in trace_stats (redeliveries,
 * redelivered, redelivery_failed). in is copied. */
#define TRACE_REDELIVER_MS 300000
void trace_finish_attempt_later(trace_ctx *t, const principal *who, const trace_origin *o,
                                const trace_attempt_in *in);

/* ---- the interaction lease cache ----
 * A managed call looks its interaction up (conversation, status, lease) before it
 * ensures its Operation. Every call of a turn gets the same answer, and
 * operations:ensure checks all of it again on Core's side, so for lease_ttl_s the
 * answer is reused: per caller and interaction, in this process. A caller whose
 * ensure with a reused lease is refused drops the entry and looks up again, so
 * callers see what they would have seen without the cache. */

/* The cache key of (caller key, interaction id): 64 hex. */
void trace_lease_key(const char *caller_key, const char *interaction_id, char out[65]);
/* 1 and the lease (token copied into token, epoch a new value or NULL, owned by
 * the caller) when a fresh entry for key and conversation_id exists; else 0. */
int trace_lease_get(trace_ctx *t, const char key[65], const char *conversation_id, char *token,
                    size_t tokenlen, json_value **epoch);
/* Remembers a lease (epoch cloned); no-op without a token or with the cache off. */
void trace_lease_put(trace_ctx *t, const char key[65], const char *conversation_id,
                     const char *token, const json_value *epoch);
void trace_lease_drop(trace_ctx *t, const char key[65]);

#endif
