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

/* The one error object of every surface (docs/errors.md), flat:
 *   {"code","description","solution"[,"details"],"retryable"[,"retry_after_ms"],
 *    "required_action"[, the members of extra]}
 * solution NULL -> the text of required_action (texts.h CL_ACTIONS) in lang;
 * required_action NULL or "" -> contact_administrator; retry_after_ms only when
 * retryable, then a real wait (ERR_RETRY_AFTER_MS when <= 0). Nothing is kept. */
typedef struct guard_error {
    lang_id lang;
    const char *code;
    const char *description;
    const char *solution;     /* NULL: by required_action */
    const json_value *details; /* NULL: none */
    int retryable;
    long retry_after_ms;
    const char *required_action;
    const json_value *extra; /* an object whose members follow, or NULL */
} guard_error;
void guard_write_object(buf *out, const guard_error *e);

/* The object of a refusal whose message is its description. */
void guard_write_error(buf *out, lang_id lang, const char *code, const char *message, int retryable,
                       const char *required_action);
/* The same with a current_status member (NULL = none). */
void guard_write_error_status(buf *out, lang_id lang, const char *code, const char *message,
                              int retryable, const char *required_action,
                              const char *current_status);

/* A Trace Core API error body ({"error":{code, message, ...}}) as the one error
 * object: a code Trace Core is known to send gets the catalogue's description and
 * required_action (mcp: the MCP surface's) in lang, an unknown code a generic
 * description naming it; Trace Core's message is details.message; its other members
 * (current_status, current_interaction_id, request_id, ...) follow. A body of
 * another shape reads as trace_core_unavailable with the body as details. */
void guard_write_api_error(buf *out, const json_value *body, lang_id lang, int mcp);

#endif
