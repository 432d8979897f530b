/* guard: the bkn_context rules (docs/lifecycle.md).
 *
 * guard_parse reads and validates the bkn_context member of a call's arguments:
 * only "absent" and {} are ad hoc; one id without the other, a misspelt or unknown
 * field, wrong types or bad business_refs are refused - never downgraded. The
 * refusal carries the code, message, the required_action for each surface and the
 * REST status; it happens before any downstream call.
 *
 * Ownership: a bkn_context owns its json members (guard_context_free). */
#ifndef CL_GUARD_H
#define CL_GUARD_H

#include "json.h"
#include "texts.h"
#include "util.h"

typedef struct bkn_context {
    int adhoc; /* absent or {} */
    char conversation_id[129];
    char interaction_id[129];
    char parent_operation_id[129];
    json_value *causation_event_ids; /* sorted, de-duplicated array of strings, or NULL */
    json_value *business_refs;       /* normalized refs (version defaulted), or NULL */
} bkn_context;

typedef struct guard_refusal {
    const char *code;
    char message[512];       /* in lang */
    const char *mcp_action;  /* required_action on MCP */
    const char *rest_action; /* required_action on REST */
    int rest_status;
    int retryable;
    lang_id lang; /* the language of message (guard_parse's lang) */
} guard_refusal;

/* args: the call's argument object (may be NULL). kn_id: the network the call is
 * about (argument kn_id, else X-Kn-ID), or NULL. lang: the language of a refusal's
 * message (the text catalogue's). Returns 0, or -1 with *why set. */
int guard_parse(const json_value *args, const char *kn_id, lang_id lang, bkn_context *out,
                guard_refusal *why);
void guard_context_free(bkn_context *c);

/* Removes host hints smuggled into tool arguments (hints never take part in
 * identity or permission decisions; an argument with a hint's name is ignored): the
 * _meta keys openbkn.ai/client-invocation-id and openbkn.ai/host-conversation-key and
 * the header names, case-insensitively. Returns how many were removed. */
int guard_strip_hints(json_value *args);
/* 1 when key is one of those hint names (case-insensitively), else 0. */
int guard_is_hint(const char *key);

/* Writes the lifecycle error envelope {"error":{code,message,retryable,
 * required_action,retry_after_ms[,extra members]}}; mcp != 0 picks the MCP action
 * and always writes required_action, REST leaves it out when empty. retry_after_ms
 * is there only when retryable: ERR_RETRY_AFTER_MS (errenv.h), never 0. */
void guard_write_error(buf *out, const char *code, const char *message, int retryable,
                       const char *required_action, int mcp);
/* The same with a current_status member after retry_after_ms (NULL = none). */
void guard_write_error_status(buf *out, const char *code, const char *message, int retryable,
                              const char *required_action, int mcp, const char *current_status);

/* Writes a lifecycle error body that came from elsewhere (a Trace Core API error)
 * by the same rules: retry_after_ms only when retryable, then a real wait
 * (ERR_RETRY_AFTER_MS when it said 0 or nothing); every other member as it is. A body
 * without an "error" object is written as it is. */
void guard_write_api_error(buf *out, const json_value *body);

#endif
