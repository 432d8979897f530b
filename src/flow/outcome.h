/* outcome: what one tool call (a business call or a lifecycle tool) ends with,
 * independent of the surface that asked. The MCP side turns it into a
 * CallToolResult (mcp_write_tool_result), REST into status, headers and body
 * (rest_reply_outcome); the idempotency record stores it (outcome_encode /
 * outcome_decode), so a replay is written by the same writers as the first answer.
 *
 * Shapes:
 *   result      is_error 0: json = the result's JSON text (an object's), result =
 *               its tree when the call built one (REST's attempt payload),
 *               toon_text = the TOON rendering when response_format is toon.
 *   error       is_error 1: json = the error body (the tool's error object, a
 *               lifecycle refusal {"error":{...}}, a Trace Core envelope).
 * receipt_json (a value's JSON text) becomes bkn_receipt on MCP, put in as it is; receipt_id and
 * operation_id become REST headers.
 *
 * Ownership: an outcome owns its buffers and values (outcome_free). */
#ifndef CL_OUTCOME_H
#define CL_OUTCOME_H

#include <stdint.h>

#include "json.h"
#include "texts.h"
#include "util.h"

typedef struct call_outcome {
    int status;   /* REST status */
    int is_error; /* MCP isError */
    int toon;     /* response_format=toon was asked */
    buf json;     /* see above */
    buf json_quoted; /* json as a JSON string (quoted, escaped) once outcome_quote made it,
                        else empty: the text block, the attempt output and the
                        idempotency record all take it from here */
    buf toon_text;
    json_value *result;  /* the result tree, or NULL */
    buf receipt_json;    /* bkn_receipt as JSON text (Trace Core's bytes), empty: none */
    char receipt_id[96];
    char operation_id[96];
    int unrecorded; /* admitted during a verified Trace Core outage, nothing recorded */
    int receipt_pending; /* the tool ran, its finalization failed: receipt_id is still
                            pending at Trace Core (finalized in the background) */
    char code[64];  /* outcome for the access log and metrics ("ok", "replay", a code) */
    int64_t lua_ms, upstream_ms, trace_ms;
} call_outcome;

void outcome_init(call_outcome *o);
void outcome_free(call_outcome *o);
/* Fills json_quoted from json (escaped once for every writer that needs it). Whoever
 * changes json afterwards empties json_quoted (the outcome_* functions here do). */
void outcome_quote(call_outcome *o);

/* The idempotency record of a finished call: a JSON object of the members the
 * writers read. outcome_decode fills an initialised o; 0, or -1 when blob is not
 * a record. */
void outcome_encode(buf *out, const call_outcome *o);
int outcome_decode(const char *blob, size_t len, call_outcome *o);

/* A refusal: json = the one error object (guard_write_error: message is its
 * description, the solution is required_action's text in lang), status, is_error
 * and code set. */
void outcome_refuse(call_outcome *o, int status, const char *code, const char *message,
                    int retryable, const char *required_action, lang_id lang);

/* The call's Operation already ran - Trace Core holds its terminal receipt - but
 * the original result is gone (its idempotency record was lost: a memory store
 * restarted, evicted or outlived it). Never a success-shaped answer: the error
 * operation_already_executed (REST 409, MCP isError), not retryable, in lang,
 * whose message says the call ran and how to read its outcome (texts.h
 * ALREADY_RAN_*), with required_action
 *   read_outcome             execute_action with its run named on the receipt
 *                            (details.next_call = get_action_execution {kn_id,
 *                            execution_id}); any other call with effects (check
 *                            the receipt before running it again);
 *   use_new_idempotency_key  read_only tools: a new invocation id reads afresh;
 * and details {operation_id, receipt_id, receipt_status, tool_name, attempt,
 * terminal_at, kn_id, execution_id, next_call} (what is known). operation and
 * receipt are Trace Core's objects (borrowed; either may be NULL); the receipt is
 * copied into o (bkn_receipt, receipt headers). */
void outcome_already_executed(call_outcome *o, const json_value *operation,
                              const json_value *receipt, const char *tool, int read_only,
                              lang_id lang, int mcp);

/* The call's Operation was started and never finished: its receipt is still
 * pending at Trace Core long after any owner could still be running it (its
 * instance stopped mid-call: the idempotency claim expired, or a memory store went
 * with it). It is not run again, and nothing will finish it. The error
 * operation_outcome_unknown (REST 409, MCP isError), not retryable, in lang: the
 * call was started, its outcome was never recorded; required_action read_outcome
 * (check what it did before running it again with a new invocation id) or, for
 * read_only tools, use_new_idempotency_key; details {operation_id, receipt_id,
 * receipt_status, tool_name, attempt, created_at}; the receipt is attached. */
void outcome_unknown(call_outcome *o, const json_value *operation, const json_value *receipt,
                     const char *tool, int read_only, lang_id lang, int mcp);

/* A stored error replayed to a retry of the same invocation id: the first answer
 * said whether a retry may help, but under that id every retry gets this same
 * error. When the error object says retryable: true, it is rewritten to
 * retryable: false, without retry_after_ms, with required_action
 * use_new_idempotency_key (read_only) or read_outcome (anything that may have taken
 * effect) and the matching sentence (texts.h REPLAYED_ERROR_*) as its solution.
 * Code, description and details stay. Other outcomes are left as they are. */
void outcome_replayed_error(call_outcome *o, int read_only, lang_id lang);

/* The business_refs recorded with an attempt (copied onto the receipt by Trace
 * Core): the caller's refs plus, for an accepted execute_action, the run it
 * started as "action_instance:<kn_id>:<at_id>:<execution_id>", so that the receipt
 * names the run when the result itself is gone (outcome_already_executed reads it
 * back). The result is its tree, or, without one, its JSON text (parsed here, for
 * execute_action only). Returns a new array (caller frees), or NULL when there is
 * nothing to add: caller_refs is then recorded as is. All arguments are borrowed;
 * any may be NULL but tool. */
json_value *outcome_attempt_refs(const char *tool, const char *kn_id, const json_value *args,
                                 const json_value *result, const buf *result_text,
                                 const json_value *caller_refs);

#endif
