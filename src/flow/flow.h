/* flow: one business tool call, shared by MCP tools/call and REST /kn/<tool>. It
 * only sequences:
 *
 *   hints -> bkn_context (guard) -> idempotency claim (idem) -> trace decision
 *   (capture policy, probe on failure) -> interaction check + operation ensure
 *   (Trace Core, trace.c) -> the Lua tool (call) -> attempt complete/fail (receipt)
 *   -> idempotency record -> the outcome.
 *
 * It knows nothing of HTTP: the caller describes the request in a flow_input and
 * gets a call_outcome (outcome.h) in its done callback, which it turns into bytes
 * (mcp_write_tool_result, rest_reply_outcome). Every refusal happens before any
 * downstream call.
 *
 * Lifetimes: flow_new copies the input struct; the strings and values it points to
 * are borrowed and must stay valid until done has run or flow_cancel was called
 * (the request owns them). done runs exactly once unless the flow is cancelled
 * first - possibly from inside flow_run (a refusal) - and the flow frees itself
 * after done returns; the outcome is valid only during done. flow_cancel stops the
 * flow at any stage (Trace Core call, idempotency wait, running tool) without a
 * callback and frees it - except a flow that holds its invocation id's claim
 * (idempotency): that one is detached instead. It copies what it borrowed, keeps its
 * tool generation, runs to its end without its caller (the tool, the receipt, the
 * idempotency record) and frees itself; done is not called. Its claim is what keeps
 * a retry from running the call again, and the record it leaves is what the retry
 * gets, so a caller that hangs up mid-call never makes the call run twice (nor
 * leaves its Operation pending for good). */
#ifndef CL_FLOW_H
#define CL_FLOW_H

#include "call.h"
#include "guard.h"
#include "idem.h"
#include "outcome.h"
#include "tools.h"
#include "trace.h"

typedef struct flow flow;

typedef struct flow_input {
    trace_ctx *trace;
    idem_ctx *idem;
    /* The call environment: who, request_id, traceparent, lang, kn_id_header, surface
     * ("mcp" | "compact" | "ptc" | "rest"), query, request, config, bkn_context,
     * caller_token. flow sets operation_id, toon and want_value itself. */
    call_env env;
    int caller_request_id; /* env.request_id came from the caller (a retry hint) */
    int mcp;               /* MCP tools/call (else REST) */
    int declared_route;    /* a route the tool declares (may always go ad hoc) */
    tools_gen *gen;        /* the pinned generation the tool runs on */
    const tools_info *ti;
    const json_value *args;        /* the call's arguments (NULL = {}) */
    const json_value *meta;        /* the MCP _meta object, or NULL */
    const char *invocation_header; /* X-OpenBKN-Client-Invocation-Id, or NULL */
    const char *format;            /* REST ?response_format= as given, or NULL */
    /* A person was asked to confirm the call and did not accept: the tool does not
     * run; its attempt (when recorded) fails with this error code and message
     * (confirm.h). NULL: the call runs. */
    const char *declined_code, *declined_message;
} flow_input;

typedef void (*flow_done_fn)(const call_outcome *o, void *arg);

flow *flow_new(const flow_input *in, flow_done_fn done, void *arg);
void flow_run(flow *f);
void flow_cancel(flow *f);

/* Detached flows (flow_cancel of a flow holding a claim) still running in this
 * process: a stopping instance waits for them as for requests. */
size_t flow_detached(void);
/* Frees every detached flow without finishing it (the loop no longer runs): for the
 * end of the process only, before the trace, idempotency and tool contexts are freed.
 * Their claims are left in the store to expire, not given back, so a retry cannot run
 * such a call again while its claim lives. */
void flow_drop_detached(void);

/* Operation key (canonical, exported for tests): "op_" + 32 hex of sha256 over the
 * canonical JSON {conversation_id, identity, interaction_id, surface, tool}; surface is
 * the scope the idempotency record uses too ("mcp" for every MCP surface, "rest");
 * identity is "inv:" + sha256(invocation id) with a hint, else "req:" + request id +
 * ":" + input hash. */
void flow_operation_key(const char *conversation_id, const char *interaction_id,
                        const char *surface, const char *tool, const char *invocation_id,
                        const char *request_id, const char *input_hash, char out[40]);

/* The input hash of a call: sha256 hex of the canonical JSON of {arguments,
 * bkn_context (the context's ids, when not ad hoc), response_format ("toon" when toon,
 * else "json"), query (REST query parameters, when given)} - idem_input_hash of that
 * object - written around args_canon, the arguments' canonical text (len bytes). */
void flow_input_hash(const char *args_canon, size_t len, const bkn_context *ctx, int toon,
                     const json_value *query, char out[65]);

#endif
