/* reqflow: a request's business call - the flow (flow.c) started with the call
 * environment of the request, registered as the request's pending operation, and
 * its outcome handed to the surface's writer. */
#include <string.h>

#include "flow.h"
#include "server.h"

static void cancel_flow(void *op)
{
    flow_cancel(op);
}

static void on_flow_done(const call_outcome *o, void *arg)
{
    req_ctx *c = arg;
    req_pending_clear(c);
    c->outcome = o->code;
    c->lua_ms = o->lua_ms;
    c->upstream_ms = o->upstream_ms;
    c->trace_ms += o->trace_ms;
    c->flow_reply(c, o);
}

void req_flow_start(req_ctx *c, const tools_info *ti, const json_value *args,
                    const json_value *meta, void (*reply)(req_ctx *c, const call_outcome *o))
{
    flow_input in;
    memset(&in, 0, sizeof in);
    in.trace = c->app->trace;
    in.idem = c->app->idem;
    req_call_env(c, &in.env);
    in.caller_request_id = c->caller_request_id;
    in.mcp = c->kind == ROUTE_MCP;
    in.proxy = c->proxy;
    in.gen = c->gen;
    in.ti = ti;
    in.args = args;
    in.meta = meta;
    in.invocation_header = req_header(c, "X-OpenBKN-Client-Invocation-Id");
    in.format = c->format_given ? c->format : NULL;
    c->flow_reply = reply;
    flow *f = flow_new(&in, on_flow_done, c);
    req_pending_set(c, f, cancel_flow);
    flow_run(f);
}
