/* surfaces: the routes above httpd - the route table (route.c), the MCP surface
 * (mcp.c, info.c, ptc.c), REST (rest.c) and a request's business call
 * (reqflow.c). httpd.c does not include this header: it reaches them only through
 * the handler app.route returns. */
#ifndef CL_SURFACES_H
#define CL_SURFACES_H

#include "outcome.h"
#include "server.h"

/* REST's own state of a request (rest.c; route.c fills the routing part). */
typedef struct rest_req {
    const tools_info *ti; /* the tool found at routing, in c->gen */
    json_value *query;    /* query parameters (object of strings), or NULL */
    char format[16];      /* ?response_format= as given */
    int format_given;
    /* A route the tool declares (tools_info.routes): its {parameter} segments, decoded
     * (an object), and the parameter the body becomes (borrowed from ti, or NULL). */
    json_value *route_params;
    const char *route_body;
} rest_req;

/* MCP's own state of a request (mcp.c). */
typedef struct mcp_req {
    buf rpc_id; /* JSON text of the JSON-RPC id */
    /* progress: the client's progressToken (JSON text) and, once the call outlasts
     * mcp.progress_interval_ms, the timer of its notifications (the response then
     * switched to an SSE stream) */
    buf progress_token;
    struct event *progress_timer;
    int progress_n;
    /* the request is of the stateless protocol era (no session; its framing and
     * validation, mcp_era.h) */
    int modern;
    /* a stateless tools/call whose params._meta holds only the envelope is kept as
     * its text (read by the edge, nothing else reads it): mcp_params_meta_parse
     * before anything else reads _meta */
    int meta_text;
} mcp_req;

/* The surfaces' state of one request, in req_ctx.surface_state: zeroed with the
 * context; route_request_end ends it. A request is MCP or REST, and the business
 * call (reqflow.c) reads the REST part of either (zero on MCP). */
typedef struct surface_req {
    rest_req rest;
    mcp_req mcp;
} surface_req;
_Static_assert(sizeof(surface_req) <= REQ_SURFACE_BYTES, "raise REQ_SURFACE_BYTES");

static inline surface_req *req_surface(req_ctx *c)
{
    return (surface_req *)(void *)c->surface_state.bytes;
}
static inline rest_req *req_rest(req_ctx *c)
{
    return &req_surface(c)->rest;
}
static inline mcp_req *req_mcp(req_ctx *c)
{
    return &req_surface(c)->mcp;
}

/* route.c: the route table main registers (app.route), and the end of a request's
 * surface state main registers (app.req_end): each surface ends its own part. */
route_handler route_request(req_ctx *c, const char *rest);
void route_request_end(req_ctx *c);
/* rest.c, mcp.c: free what their part of a request's state holds. */
void rest_req_end(rest_req *r);
void mcp_req_end(mcp_req *m);

/* reqflow.c: the business call of a request: the flow with the request's call
 * environment as a pending operation; reply gets the outcome (the request's
 * outcome and Trace Core, Lua and upstream times already copied) and must answer. */
void req_flow_start(req_ctx *c, const tools_info *ti, const json_value *args,
                    const json_value *meta, void (*reply)(req_ctx *c, const call_outcome *o));
/* The same for a call a person was asked to confirm and did not accept: the flow
 * runs its checks and records the attempt as failed with declined_code and
 * declined_message (copied), and the tool does not run. */
void req_flow_start_declined(req_ctx *c, const tools_info *ti, const json_value *args,
                             const json_value *meta,
                             void (*reply)(req_ctx *c, const call_outcome *o),
                             const char *declined_code, const char *declined_message);

/* mcp.c: POST/GET/DELETE on /mcp, after authentication. */
/* Sends {"jsonrpc":"2.0","id":<request id>,"result":<result>} and frees c. */
void mcp_send_result(req_ctx *c, const char *result, size_t len);
void mcp_handle(req_ctx *c);
/* Appends the JSON array of what tools/list of a surface (SURFACE_MCP, _COMPACT or
 * _PTC) shows in lang, all pages at once: the lifecycle tools, then the visible tools
 * of the current generation. ignore_gates lists gated tools whatever their switch. */
void mcp_list_entries(app *a, unsigned surface, lang_id lang, int ignore_gates, buf *out);
/* Appends the JSON array of the gateway tools (listed by no tools/list, run through
 * execute_tool) in the entry form of a listing surface (SURFACE_MCP or _COMPACT), in
 * order, gated-off ones left out. */
void mcp_gateway_entries(app *a, unsigned surface, lang_id lang, buf *out);
/* Closes every open SSE stream (shutdown). */
void mcp_close_streams(app *a);
void mcp_heartbeat(app *a);
/* After a reload swapped generations: sends notifications/tools/list_changed on every
 * open GET stream when the listed catalogue (any surface, any language) changed. */
void mcp_tools_changed(app *a, tools_gen *cur);

/* info.c: GET /mcp/info, /mcp-compact/info, /mcp/ptc/info (c->surface says which),
 * JSON or, for Accept: text/html, the catalogue page. */
void info_handle(req_ctx *c);
/* info.c: whether a GET on an info route is a browser without a token (prefers
 * text/html, no Authorization header), and the public page shell it gets: a form for a
 * token that fetches the catalogue with it (the token never in the URL). The shell
 * holds no data. info_shell answers (c is gone). */
int info_shell_wanted(req_ctx *c);
void info_shell(req_ctx *c);
/* info.c: GET /.well-known/oauth-protected-resource[<prefix>/mcp...] - the RFC 9728
 * metadata when oauth.authorization_servers is set, else 404. No authentication.
 * Answers (c is gone). */
void info_well_known(req_ctx *c, const char *path);
/* ptc.c: GET /mcp/ptc/toolkit and the deprecated /mcp/toolkit. */
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

/* rest.c: POST /kn/<tool>, after authentication (c->gen and req_rest(c)->ti pinned at
 * routing). */
void rest_handle(req_ctx *c);
/* Answers a tool call's outcome: status, the receipt / operation / trace-status
 * headers, Content-Language of errors, the body (TOON or JSON). Frees c. */
void rest_reply_outcome(req_ctx *c, const call_outcome *o);

#endif
