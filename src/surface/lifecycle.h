/* lifecycle: the MCP lifecycle tools bkn_start_interaction and
 * bkn_finish_interaction, owned by the core because they speak to Trace Core
 * directly (through trace.c's typed operations). Their declarations (schemas,
 * texts) are lua/lifecycle.lua's, loaded with every tool generation: the arguments
 * are checked against the schema tools/list shows before anything runs. Fixed error
 * codes and required_action values; IDs only ever come from Trace Core. It only
 * sequences; the caller gets a call_outcome (outcome.h) and writes the
 * CallToolResult.
 *
 * Lifetimes: as flow.h - lifecycle_new copies the input struct (pointers borrowed
 * until done ran or lifecycle_cancel); done runs exactly once unless cancelled,
 * possibly from inside lifecycle_run; the call frees itself after done returns. */
#ifndef CL_LIFECYCLE_H
#define CL_LIFECYCLE_H

#include "outcome.h"
#include "principal.h"
#include "tools.h"
#include "trace.h"

typedef struct lifecycle lifecycle;

/* 1 when name is a lifecycle tool. */
int lifecycle_is_tool(const char *name);
/* Appends the tools/list entries (comma-separated JSON objects) for lang: those g
 * declares (lua/lifecycle.lua); nothing when g is NULL. */
void lifecycle_list_entries(buf *out, const tools_gen *g, lang_id lang);
/* The start of the second entry in the text lifecycle_list_entries wrote (just past
 * the comma that separates the two). */
const char *lifecycle_second_entry(const char *entries);
typedef struct lifecycle_input {
    trace_ctx *trace;
    const principal *who;
    const char *request_id;
    int caller_request_id; /* request_id came from the caller (a retry hint) */
    lang_id lang;
    const char *name;       /* bkn_start_interaction | bkn_finish_interaction */
    const json_value *args; /* NULL = {} */
    tools_gen *gen; /* the generation declaring the tools (arguments are checked against it) */
    const json_value *meta;        /* params._meta, or NULL */
    const char *invocation_header; /* X-OpenBKN-Client-Invocation-Id, or NULL */
    const char *host_key_header;   /* X-OpenBKN-Host-Conversation-Key, or NULL */
    const char *traceparent, *tracestate, *baggage; /* the request's W3C trace context
                                                       (NULL: none), for Trace Core */
} lifecycle_input;

typedef void (*lifecycle_done_fn)(const call_outcome *o, void *arg);

lifecycle *lifecycle_new(const lifecycle_input *in, lifecycle_done_fn done, void *arg);
void lifecycle_run(lifecycle *l);
void lifecycle_cancel(lifecycle *l);

#endif
