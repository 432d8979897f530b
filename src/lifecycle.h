/* lifecycle: the MCP lifecycle tools bkn_start_interaction and
 * bkn_finish_interaction (SPEC §7; reference trace-lifecycle.md §1), owned by the
 * core because they speak to Trace Core directly. Strict validation, the reference's
 * error codes and required_action values; IDs only ever come from Trace Core.
 *
 * Ownership: a lifecycle call belongs to its request context (c->lc) until it
 * replies. */
#ifndef CL_LIFECYCLE_H
#define CL_LIFECYCLE_H

#include "server.h"

typedef struct lifecycle lifecycle;

/* 1 when name is a lifecycle tool. */
int lifecycle_is_tool(const char *name);
/* Appends the tools/list entries (comma-separated JSON objects) for lang. */
void lifecycle_list_entries(buf *out, lang_id lang);
/* The start of the second entry in the text lifecycle_list_entries wrote (just past
 * the comma that separates the two). */
const char *lifecycle_second_entry(const char *entries);
/* Runs the tool; replies on c. meta: params._meta or NULL. */
void lifecycle_call(req_ctx *c, const char *name, const json_value *args, const json_value *meta);
void lifecycle_cancel(lifecycle *l);

#endif
