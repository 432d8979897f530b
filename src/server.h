/* server: the process-wide state shared by the HTTP routes (httpd.c), the MCP
 * surface (mcp.c) and the REST surface (rest.c), and the per-request context.
 *
 * Ownership: the app owns every module it points to; a req_ctx is owned by the
 * route handling it from the moment httpd accepts the request until the reply is
 * sent (req_finish frees it). */
#ifndef CL_SERVER_H
#define CL_SERVER_H

#include <event2/event.h>
#include <event2/http.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "call.h"
#include "conf.h"
#include "fetch.h"
#include "idem.h"
#include "json.h"
#include "outcome.h"
#include "principal.h"
#include "session.h"
#include "store.h"
#include "trace.h"
#include "tools.h"
#include "util.h"

typedef struct sse_stream sse_stream;
typedef struct req_ctx req_ctx;

/* A route's handler: runs after authentication, owns the request until it replies. */
typedef void (*route_handler)(req_ctx *c);
/* The route table (route.c, registered by main): the handler for the path below the
 * prefix (rest, e.g. "/mcp" or "/kn/x"); NULL when it already answered (404, 405,
 * 403). It sets c->kind, c->surface, c->tool as it sees them. */
typedef route_handler (*route_fn)(req_ctx *c, const char *rest);

typedef struct app {
    conf *cfg;
    struct event_base *base;
    fetch_ctx *fetch;
    auth_ctx *auth;
    tools_host *tools;
    session_ctx *sessions;
    trace_ctx *trace;
    store *store;
    idem_ctx *idem;
    struct evhttp *http;
    struct evhttp *admin_http;
    struct evhttp_bound_socket *listener;
    char prefix[128];
    lang_id default_lang;
    char *instructions[LANG_COUNT];
    tools_upstream upstreams[8];
    size_t n_upstreams;
    sse_stream *streams; /* open GET /mcp streams */
    size_t n_streams;
    struct event *heartbeat;
    size_t inflight;     /* requests being processed asynchronously */
    int draining;        /* SIGTERM received */
    int listen_loopback; /* public listener is bound to a loopback address */
    int64_t started_ms;
    uint64_t requests_total;
    json_value *ctx_config; /* ctx.config for tools (permission_request, gates) */
    route_fn route;         /* the route table (set before httpd_start) */
} app;

typedef enum { ROUTE_NONE, ROUTE_MCP, ROUTE_REST, ROUTE_INFO, ROUTE_TOOLKIT } route_kind;

/* The one asynchronous operation a request waits for (authentication, a session
 * lookup, a business or lifecycle call); cancelled when the request ends first
 * (client gone). */
typedef struct req_pending {
    void *op;
    void (*cancel)(void *op);
} req_pending;

struct req_ctx {
    app *app;
    struct evhttp_request *req;
    route_kind kind;
    char method[8];
    char path[512];
    char request_id[160];
    char traceparent[64];
    lang_id lang;
    int64_t t0;
    principal who;
    int authed;
    req_pending pending;
    route_handler handler; /* from routing, run once authenticated */
    tools_gen *gen;        /* pinned once: at routing (REST) or at tools/call (MCP) */
    const tools_info *ti;  /* REST: the tool found at routing, in gen */
    int tool_builtin;      /* tool is one of the core's own (the lifecycle tools) */
    void (*flow_reply)(req_ctx *c, const call_outcome *o); /* reqflow.c: the writer */
    char tool[128];
    char surface[16];
    json_value *msg; /* parsed body (MCP JSON-RPC message or REST arguments) */
    buf rpc_id;      /* JSON text of the JSON-RPC id */
    int status;      /* for the access log */
    const char *outcome;
    int64_t lua_ms, upstream_ms;
    int on_close_set;
    struct event *close_watch; /* hang-up watch on the client socket while async */
    int caller_request_id;     /* the request id came from the caller (a retry hint) */
    json_value *query;         /* REST query parameters (object of strings), or NULL */
    char format[16];           /* REST ?response_format= as given */
    int proxy;                 /* POST /mcp/proxy/{mcp_id}/tools/{tool_name}/call */
    char proxy_mcp_id[256], proxy_tool[256];
    int format_given;
    json_value *reqinfo; /* ctx.request, built on first use */
    /* MCP progress (SPEC §20): the client's progressToken (JSON text) and, once the
     * call outlasts mcp.progress_interval_ms, the response switched to an SSE stream. */
    buf progress_token;
    struct event *progress_timer;
    int progress_n;
    int sse;
    int64_t trace_ms; /* time spent waiting for Trace Core */
};

/* httpd.c */
int httpd_start(app *a, char *err, size_t errlen);
void httpd_stop_accepting(app *a);
void httpd_free(app *a);
/* Common response headers (request id, no-store, content type) and send; frees ctx. */
void req_reply(req_ctx *c, int status, const char *content_type, const char *body, size_t len);
void req_reply_json(req_ctx *c, int status, const char *json);
/* REST-style service error {code, description, solution, link, details}. */
void req_reply_error(req_ctx *c, int status, const char *code, const char *details);
const char *req_header(req_ctx *c, const char *name);
void req_add_header(req_ctx *c, const char *name, const char *value);
/* Body of the request (pointer into libevent's buffer, valid until reply). */
const char *req_body(req_ctx *c, size_t *len);
/* Marks the request as waiting for something asynchronous. */
void req_async_begin(req_ctx *c);
/* The request now waits for op (cancel(op) runs if the request ends first). */
void req_pending_set(req_ctx *c, void *op, void (*cancel)(void *op));
/* op finished (its callback runs): nothing to cancel any more. */
void req_pending_clear(req_ctx *c);
/* The 404 of an unknown route. */
void req_not_found(req_ctx *c);
/* Origin allow-list (config) plus loopback origins; DNS-rebinding guard on Host
 * when the listener is a loopback address. */
int req_origin_allowed(req_ctx *c);
/* The request became a long-lived stream owned elsewhere: log it, free ctx, keep req. */
void req_detach(req_ctx *c, int status);
/* Ends an SSE response begun with evhttp_send_reply_start: logs, frees c. */
void req_end_stream(req_ctx *c, size_t bytes_out);
/* Fills a call environment from the request (strings borrowed from c). */
void req_call_env(req_ctx *c, call_env *env);
/* Whether the gate of a tool is switched on. */
int app_gate_enabled(app *a, const char *gate);

/* route.c: the route table main registers (app.route). */
route_handler route_request(req_ctx *c, const char *rest);

/* reqflow.c: the business call of a request: the flow with the request's call
 * environment as a pending operation; reply gets the outcome (the request's
 * outcome and Trace Core, Lua and upstream times already copied) and must answer. */
void req_flow_start(req_ctx *c, const tools_info *ti, const json_value *args,
                    const json_value *meta, void (*reply)(req_ctx *c, const call_outcome *o));

/* mcp.c: POST/GET/DELETE on /mcp, after authentication. */
/* Sends {"jsonrpc":"2.0","id":<request id>,"result":<result>} and frees c. */
void mcp_send_result(req_ctx *c, const char *result, size_t len);
void mcp_handle(req_ctx *c);
/* Appends the JSON array of what tools/list of a surface (SURFACE_MCP, _COMPACT or
 * _PTC) shows in lang, all pages at once: the lifecycle tools, then the visible tools
 * of the current generation. ignore_gates lists gated tools whatever their switch. */
void mcp_list_entries(app *a, unsigned surface, lang_id lang, int ignore_gates, buf *out);
/* Closes every open SSE stream (shutdown). */
void mcp_close_streams(app *a);
void mcp_heartbeat(app *a);
/* After a reload swapped generations: sends notifications/tools/list_changed on every
 * open GET stream when the listed catalogue (any surface, any language) changed. */
void mcp_tools_changed(app *a, tools_gen *cur);

/* info.c: GET /mcp/info, /mcp-compact/info, /mcp/ptc/info (c->surface says which),
 * JSON or, for Accept: text/html, the catalogue page (SPEC §15). */
void info_handle(req_ctx *c);
/* ptc.c: GET /mcp/ptc/toolkit and the deprecated /mcp/toolkit (SPEC §14). */
void toolkit_handle(req_ctx *c);
/* ptc.c: after the listeners are bound: the sandbox callback URL (ptc.sandbox_mcp_url,
 * else http://<listener>/<prefix>/mcp/), also set as ctx.config.ptc.sandbox_mcp_url. */
void ptc_init(app *a);
const char *ptc_sandbox_url(void);
/* ptc.c: the tools/list entry of ti as /mcp/ptc lists it: for the PTC tools the
 * description the toolkit renders (run_code's is the signature list of the sandbox
 * functions), else ti->list_json[lang]. Borrowed: valid while g is held and until the
 * next ptc_* call for another generation. */
const char *ptc_list_json(app *a, tools_gen *g, const tools_info *ti, lang_id lang);
/* ptc.c: frees the cached renderings (shutdown). */
void ptc_free(void);

/* rest.c: POST /kn/<tool>, after authentication (c->gen and c->ti pinned at
 * routing). */
void rest_handle(req_ctx *c);
/* Answers a tool call's outcome: status, the receipt / operation / trace-status
 * headers, Content-Language of errors, the body (TOON or JSON). Frees c. */
void rest_reply_outcome(req_ctx *c, const call_outcome *o);

#endif
