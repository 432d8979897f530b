/* call: one tool call on a generation: a Lua coroutine running
 * host.invoke(tool, args, ctx). The core validates and defaults the arguments in
 * Lua (schema.lua) before handle runs; ctx.http starts a fetch and yields; the
 * fetch completion resumes the coroutine from the event loop (cosocket model).
 *
 * The call holds a reference on its generation until it ends. */
#ifndef CL_CALL_H
#define CL_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "principal.h"
#include "tools.h"

typedef struct call_env {
    const principal *who;     /* copied */
    const char *request_id;   /* bkn-request-id, copied */
    const char *traceparent;  /* W3C traceparent of the inbound request, copied; child
                                 span ids are made per outbound call */
    const char *tracestate;   /* W3C tracestate and baggage of the inbound request (NULL:
                                 none), copied; passed on as they are */
    const char *baggage;
    lang_id lang;             /* request language */
    const char *kn_id_header; /* X-Kn-ID of the request, or NULL; copied */
    const char *surface;      /* "mcp" | "compact" | "rest" | "ptc", copied */
    int64_t deadline_ms;      /* now_mono_ms() based; 0 = none */
    /* The following are borrowed during call_start only (pushed into Lua there). */
    const json_value *query;   /* REST query parameters (object of strings) merged into
                                  args where absent, coerced by the schema; or NULL */
    const json_value *request; /* ctx.request: {host, forwarded_host, forwarded_proto} */
    const json_value *config;  /* ctx.config: deployment settings tools may read */
    int toon;                  /* response_format is toon (ctx.response_format); the
                                  result then comes with its TOON text */
    int want_value;            /* the result is also wanted as a tree (call_result.value) */
    /* ctx.bkn_context: the call's validated turn context {conversation_id,
       interaction_id, parent_operation_id?} (borrowed during call_start; NULL when the
       call is ad hoc). Only those three string members are passed on. */
    const json_value *bkn_context;
    /* ctx.operation_id: the Operation recorded for this call, or NULL; copied. */
    const char *operation_id;
    /* The caller's raw bearer token, or NULL; copied into the call, wiped and freed
       when the call ends, never logged and never visible to Lua: ctx.http sends it
       as Authorization only on an explicit caller_token = true to an upstream that
       allows it (tools_upstream.caller_token: by default the execution factory's
       public face). */
    const char *caller_token;
} call_env;

typedef struct call_result {
    int is_error;     /* 1 when the tool returned nil, err, raised, or args were invalid */
    int status;       /* REST status: 200 on success, else the error's status */
    const char *body; /* JSON text: the result object, or the error object */
    size_t body_len;
    buf *body_buf;    /* the buffer holding body: the callback may take its data (swap
                         it with a buf of its own); the call frees what it then holds */
    const char *toon; /* with env.toon: the tool's own rendering (its render function),
                         else the result rendered from its tree; NULL when neither
                         (an error, or the rendering failed: logged) */
    size_t toon_len;
    json_value *value;       /* with env.toon or env.want_value: the tree of body when the
                                tool returned a table (body is its JSON text), else NULL.
                                Owned by the callback (json_free) */
    const char *incident_id; /* set when the tool raised (traceback logged), else NULL */
    const char *error_code;  /* "invalid_arguments", "tool_raised", ... or NULL */
    int64_t lua_ms;          /* time spent running Lua */
    int64_t upstream_ms;     /* summed ctx.http wall time */
    int upstream_calls;
} call_result;

/* The result and its strings are valid only during the callback. */
typedef void (*call_done_fn)(const call_result *res, void *arg);

typedef struct call call;

/* Starts tool `info->name` of generation gen with args (borrowed; NULL = {}).
 * done runs exactly once, always later from the event loop (never inside
 * call_start), unless call_cancel is called first. Never returns NULL. */
call *call_start(tools_gen *gen, const tools_info *info, const json_value *args,
                 const call_env *env, call_done_fn done, void *arg);
/* Cancels a running call (client gone): in-flight fetches are cancelled, ctx is
 * marked dead, the coroutine is dropped; done is not called. */
void call_cancel(call *c);

/* Calls in flight (all generations). */
size_t call_inflight(void);
/* That figure as the /metrics series cl_tool_calls_inflight. */
void call_write_metrics(buf *out);
/* For tests: the finished coroutines gen's state keeps for later calls; *clean = 0
 * when one of them is not empty, not finished or has a hook. */
size_t call_co_pooled(tools_gen *gen, int *clean);

#endif
