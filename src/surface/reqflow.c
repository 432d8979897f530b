/* reqflow: a request's business call - the flow (flow.c) started with the call
 * environment of the request, registered as the request's pending operation, and
 * its outcome handed to the surface's writer. */
#include <stdlib.h>
#include <string.h>

#include "flow.h"
#include "server.h"
#include "surfaces.h"

/* The request's pending operation: the flow and where its outcome goes. */
typedef struct req_flow {
    flow *f;
    char *declined_code, *declined_message; /* owned, or NULL */
    req_ctx *c;
    void (*reply)(req_ctx *c, const call_outcome *o);
} req_flow;

static void req_flow_free(req_flow *rf)
{
    free(rf->declined_code);
    free(rf->declined_message);
    free(rf);
}

static void cancel_flow(void *op)
{
    req_flow *rf = op;
    flow_cancel(rf->f);
    req_flow_free(rf);
}

static void on_flow_done(const call_outcome *o, void *arg)
{
    req_flow *rf = arg;
    req_ctx *c = rf->c;
    void (*reply)(req_ctx *, const call_outcome *) = rf->reply;
    req_pending_clear(c);
    c->outcome = o->code;
    c->lua_ms = o->lua_ms;
    c->upstream_ms = o->upstream_ms;
    c->trace_ms += o->trace_ms;
    reply(c, o);
    req_flow_free(rf); /* after the reply: the outcome may hold the decline's strings */
}

void req_flow_start(req_ctx *c, const tools_info *ti, const json_value *args,
                    const json_value *meta, void (*reply)(req_ctx *c, const call_outcome *o))
{
    req_flow_start_declined(c, ti, args, meta, reply, NULL, NULL);
}

void req_flow_start_declined(req_ctx *c, const tools_info *ti, const json_value *args,
                             const json_value *meta,
                             void (*reply)(req_ctx *c, const call_outcome *o),
                             const char *declined_code, const char *declined_message)
{
    flow_input in;
    memset(&in, 0, sizeof in);
    in.trace = c->app->trace;
    in.idem = c->app->idem;
    req_call_env(c, &in.env);
    in.env.query = req_rest(c)->query;
    in.caller_request_id = c->caller_request_id;
    in.mcp = c->kind == ROUTE_MCP;
    in.declared_route = req_rest(c)->route_params != NULL;
    in.gen = c->gen;
    in.ti = ti;
    in.args = args;
    in.meta = meta;
    in.invocation_header = req_header(c, "X-OpenBKN-Client-Invocation-Id");
    in.format = req_rest(c)->format_given ? req_rest(c)->format : NULL;
    req_flow *rf = xcalloc(1, sizeof *rf);
    rf->c = c;
    rf->reply = reply;
    if (declined_code) {
        rf->declined_code = xstrdup(declined_code);
        rf->declined_message = xstrdup(declined_message ? declined_message : "");
        in.declined_code = rf->declined_code;
        in.declined_message = rf->declined_message;
    }
    rf->f = flow_new(&in, on_flow_done, rf);
    req_pending_set(c, rf, cancel_flow);
    flow_run(rf->f);
}
