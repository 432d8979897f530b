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
#include <sys/queue.h>

#include "auth.h"
#include "call.h"
#include "conf.h"
#include "fetch.h"
#include "idem.h"
#include "json.h"
#include "principal.h"
#include "session.h"
#include "store.h"
#include "trace.h"
#include "tools.h"
#include "util.h"

typedef struct sse_stream sse_stream;

typedef struct app {
    const settings *cfg; /* owned by main */
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
    LIST_HEAD(, sse_stream) streams; /* open GET /mcp streams */
    size_t n_streams;
    struct event *heartbeat;
    size_t inflight;     /* requests being processed asynchronously */
    int draining;        /* SIGTERM received */
    int listen_loopback; /* public listener is bound to a loopback address */
    int64_t started_ms;
    uint64_t requests_total;
    json_value *ctx_config; /* ctx.config for tools (permission_request, gates) */
} app;

typedef enum { ROUTE_NONE, ROUTE_MCP, ROUTE_REST, ROUTE_INFO, ROUTE_TOOLKIT } route_kind;

struct flow;
struct lifecycle;

typedef struct req_ctx {
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
    auth_wait *auth;
    tools_gen *gen;
    call *call;
    char tool[128];
    char surface[16];
    json_value *msg; /* parsed body (MCP JSON-RPC message or REST arguments) */
    buf rpc_id;      /* JSON text of the JSON-RPC id */
    int status;      /* for the access log */
    const char *outcome;
    int64_t lua_ms, upstream_ms;
    int on_close_set;
    struct event *close_watch;         /* hang-up watch on the client socket while async */
    int caller_request_id;             /* the request id came from the caller (a retry hint) */
    struct flow *flow;                 /* a business call in progress */
    struct lifecycle *lc;              /* a lifecycle tool call in progress */
    struct session_wait *session_wait; /* Mcp-Session-Id check or end in the store */
    json_value *query;                 /* REST query parameters (object of strings), or NULL */
    char format[16];                   /* REST ?response_format= as given */
    int proxy;                         /* POST /mcp/proxy/{mcp_id}/tools/{tool_name}/call */
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
    int plimit_held;  /* counted in limits.max_calls_per_principal until freed */
} req_ctx;

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
/* The request became a long-lived stream owned elsewhere: log it, free ctx, keep req. */
void req_detach(req_ctx *c, int status);
/* Ends an SSE response begun with evhttp_send_reply_start: logs, frees c. */
void req_end_stream(req_ctx *c, size_t bytes_out);
/* Fills a call environment from the request (strings borrowed from c). */
void req_call_env(req_ctx *c, call_env *env);
const char *lang_tag(lang_id l);
lang_id lang_from_accept(const char *accept_language, lang_id dflt);

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

/* rest.c: POST /kn/<tool>, after authentication. */
void rest_handle(req_ctx *c);

#endif
