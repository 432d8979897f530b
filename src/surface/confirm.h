/* confirm: a person confirms before a business call changes something. The
 * deployment names the tools that need it in confirm.tools, a comma-separated list
 * of entries "tool", "tool@kn_id" or "tool@kn_id/at_id" (kn_id may be "*"): a call
 * needs confirmation when an entry names its tool and, when narrowed, the knowledge
 * network (arguments.kn_id) and the action type (arguments.at_id) it acts on.
 *
 * This module holds what needs no server: the rule match, the question put to the
 * person (a message in the caller's language and the form's schema), and the signed
 * confirmation state: "cs1.<32 hex nonce>.<8 hex expiry>.<64 hex tag>", tag =
 * HMAC-SHA256(session secret, "confirm|" nonce "|" expiry "|" principal key "|" tool
 * "|" sha256 of the canonical arguments "|" interaction id). Any replica with the
 * same session_secret verifies it; changing any bound part invalidates it. That a
 * state is used once is the caller's business (the state store, keyed by the
 * nonce).
 *
 * Ownership: every pointer argument is borrowed for the call; out buffers are the
 * caller's. */
#ifndef CL_CONFIRM_H
#define CL_CONFIRM_H

#include <stddef.h>

#include "json.h"
#include "principal.h"
#include "session.h"
#include "texts.h"
#include "util.h"

#define CONFIRM_STATE_LEN 110 /* 3 + 1 + 32 + 1 + 8 + 1 + 64 */
/* The key of the one input request of an input_required result, and of the form's
 * one field. */
#define CONFIRM_INPUT_KEY "confirm"

typedef enum {
    CONFIRM_OK = 0,
    CONFIRM_INVALID, /* malformed, or signed for another principal, tool, arguments or interaction
                      */
    CONFIRM_EXPIRED  /* ours and intact, but past its expiry */
} confirm_status;

/* Whether spec (confirm.tools; NULL or empty: nothing) makes a call of tool with
 * args (an object or NULL) need confirmation. */
int confirm_applies(const char *spec, const char *tool, const json_value *args);

/* The call a rule judges: execute_tool's inner call (tool_id or name with its
 * arguments; execute_skill with execute_tool's own arguments for a skill_id), else
 * the call itself. */
void confirm_target(const char *tool, const json_value *args, const char **target,
                    const json_value **target_args);

/* Whether spec names tool at all (narrowed or not): for the catalogue and /mcp/info. */
int confirm_names_tool(const char *spec, const char *tool);

/* Whether some call of tool may need confirmation under spec, told from the names
 * alone (no arguments read): spec names tool, or tool is execute_tool (judged as the
 * call it makes). 0 means confirm_applies is 0 for every call of tool, so a caller
 * can skip building the call's arguments for the rule. */
int confirm_may_apply(const char *spec, const char *tool);

/* sha256 hex of the canonical JSON of args (NULL: {}). */
void confirm_args_hash(const json_value *args, char out[65]);

/* The interaction the call belongs to: arguments.bkn_context.interaction_id, or "". */
const char *confirm_interaction(const json_value *args);

/* The question in lang: message (plain text naming what will happen: the action
 * type, the knowledge network, how many instances and which, the parameters) and
 * schema (JSON text of an elicitation requestedSchema: one boolean field "confirm"). */
void confirm_describe(const char *tool, const json_value *args, lang_id lang, buf *message,
                      buf *schema);

/* Mints a state valid for ttl_s seconds into out (CONFIRM_STATE_LEN + 1 bytes). */
void confirm_state_mint(session_ctx *s, const principal *who, const char *tool,
                        const char *args_hash, const char *interaction, long ttl_s, char *out);

/* Checks a state presented with a call; on CONFIRM_OK (and CONFIRM_EXPIRED) nonce
 * gets its 32 hex chars and *expires_s its expiry (Unix seconds). */
confirm_status confirm_state_check(session_ctx *s, const principal *who, const char *tool,
                                   const char *args_hash, const char *interaction,
                                   const char *state, char nonce[33], long long *expires_s);

#endif
