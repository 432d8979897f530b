/* flow: one business tool call end to end, shared by MCP tools/call and REST
 * /kn/<tool> (SPEC §7, §8):
 *
 *   hints -> bkn_context (guard) -> idempotency claim (idem) -> trace decision
 *   (capture policy, probe on failure) -> interaction check + operation ensure
 *   (Trace Core) -> the Lua tool (call) -> attempt complete/fail (receipt) ->
 *   idempotency record -> reply (receipt on the result, or the unrecorded mark).
 *
 * Every refusal happens before any downstream call. The flow replies on the
 * request itself (mcp_send_result / req_reply) and frees itself.
 *
 * Ownership: flow_start borrows args (it clones what it keeps); the flow is owned
 * by the request context (c->flow) until it replies. */
#ifndef CL_FLOW_H
#define CL_FLOW_H

#include "server.h"

typedef struct flow flow;

/* meta: the MCP _meta object of tools/call params (or NULL). */
void flow_start(req_ctx *c, const tools_info *ti, const json_value *args, const json_value *meta);
void flow_cancel(flow *f);

/* Operation key (canonical, exported for tests): "op_" + 32 hex of sha256 over the
 * canonical JSON {conversation_id, identity, interaction_id, surface, tool}; identity
 * is "inv:" + sha256(invocation id) with a hint, else "req:" + request id + ":" +
 * input hash. */
void flow_operation_key(const char *conversation_id, const char *interaction_id,
                        const char *surface, const char *tool, const char *invocation_id,
                        const char *request_id, const char *input_hash, char out[40]);

/* Reads and validates a host hint (SPEC §6, §8): the header, else the MCP _meta key
 * (header wins); trimmed; 1-256 printable ASCII 0x21-0x7E. Returns 0 (out[0] == 0
 * when absent) or -1 when malformed (message in err). */
int flow_hint(req_ctx *c, const json_value *meta, const char *header, const char *meta_key,
              char *out, size_t outlen, char *err, size_t errlen);

#endif
