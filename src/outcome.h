/* outcome: what one tool call (a business call or a lifecycle tool) ends with,
 * independent of the surface that asked. The MCP side turns it into a
 * CallToolResult (mcp_write_tool_result), REST into status, headers and body
 * (rest_reply_outcome); the idempotency record stores it (outcome_encode /
 * outcome_decode), so a replay is written by the same writers as the first answer.
 *
 * Shapes:
 *   result      is_error 0: json = the result's JSON text, result = its tree (when
 *               the call built one; needed to add bkn_receipt), toon_text = the
 *               TOON rendering when response_format is toon.
 *   error       is_error 1: json = the error body (the tool's error object, a
 *               lifecycle refusal {"error":{...}}, a Trace Core envelope).
 *   reused      note != NULL: an earlier attempt's durable receipt answers the call;
 *               json = {"operation":...,"receipt":...} (MCP structuredContent and
 *               the REST body), note = the MCP text block.
 * receipt (a value) becomes structuredContent.bkn_receipt on MCP; receipt_id and
 * operation_id become REST headers.
 *
 * Ownership: an outcome owns its buffers and values (outcome_free). */
#ifndef CL_OUTCOME_H
#define CL_OUTCOME_H

#include <stdint.h>

#include "json.h"
#include "util.h"

typedef struct call_outcome {
    int status;   /* REST status */
    int is_error; /* MCP isError */
    int toon;     /* response_format=toon was asked */
    buf json;     /* see above */
    buf toon_text;
    json_value *result;  /* the result tree, or NULL */
    json_value *receipt; /* bkn_receipt, or NULL */
    const char *note;    /* static text: the MCP text block of a reused receipt */
    char receipt_id[96];
    char operation_id[96];
    int unrecorded; /* admitted during a verified Trace Core outage, nothing recorded */
    char code[64];  /* outcome for the access log and metrics ("ok", "replay", a code) */
    int64_t lua_ms, upstream_ms, trace_ms;
} call_outcome;

void outcome_init(call_outcome *o);
void outcome_free(call_outcome *o);

/* The idempotency record of a finished call: a JSON object of the members the
 * writers read. outcome_decode fills an initialised o; 0, or -1 when blob is not
 * a record. */
void outcome_encode(buf *out, const call_outcome *o);
int outcome_decode(const char *blob, size_t len, call_outcome *o);

/* An error of the lifecycle kind: json = {"error":{code, message, retryable,
 * required_action, retry_after_ms}} (guard_write_error; mcp picks the action
 * rules), status, is_error and code set. */
void outcome_refuse(call_outcome *o, int status, const char *code, const char *message,
                    int retryable, const char *required_action, int mcp);

#endif
