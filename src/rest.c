/* rest: POST /kn/<tool>, the REST twin of every business tool (SPEC §4). The body
 * is the tool's arguments; the tool's result or error envelope is the response. */
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>

#include "callcheck.h"
#include "flow.h"
#include "server.h"

void rest_handle(req_ctx *c)
{
    struct evkeyvalq q;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(c->req);
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    memset(&q, 0, sizeof q);
    if (query && evhttp_parse_query_str(query, &q) < 0) {
        req_reply_error(c, 400, NULL, "malformed query string");
        return;
    }
    const char *fmt = evhttp_find_header(&q, "response_format");
    if (fmt) /* checked against the tool's formats by flow.c */
        snprintf(c->format, sizeof c->format, "%.15s", fmt), c->format_given = 1;
    /* The other query parameters fill arguments the body leaves out (kn_id, ot_id, ...). */
    struct evkeyval *kv;
    TAILQ_FOREACH(kv, &q, next)
    {
        if (!strcmp(kv->key, "response_format"))
            continue;
        if (!c->query)
            c->query = json_new_object();
        json_set(c->query, kv->key, json_new_str(kv->value, strlen(kv->value)));
    }
    evhttp_clear_headers(&q);
    size_t len;
    const char *body = req_body(c, &len);
    char err[320];
    int status;
    if (callcheck_rest_body(body, len, req_header(c, "Content-Type"),
                            (size_t)c->app->cfg->limits_json_max_depth, &c->msg, &status, err,
                            sizeof err) < 0) {
        req_reply_error(c, status, NULL, err);
        return;
    }
    c->gen = tools_host_acquire(c->app->tools);
    const tools_info *ti = NULL;
    if (c->proxy) {
        /* The body is the MCP tool's flat parameters (plus an optional bkn_context). */
        ti = c->gen ? tools_gen_find(c->gen, "mcp_proxy_call") : NULL;
        json_value *args = json_new_object();
        json_set(args, "mcp_id", json_new_str(c->proxy_mcp_id, strlen(c->proxy_mcp_id)));
        json_set(args, "tool_name", json_new_str(c->proxy_tool, strlen(c->proxy_tool)));
        const json_value *ctx = json_get(c->msg, "bkn_context");
        if (ctx)
            json_set(args, "bkn_context", json_clone(ctx));
        json_value *params = json_clone(c->msg);
        json_remove(params, "bkn_context");
        json_set(args, "parameters", params);
        json_free(c->msg);
        c->msg = args;
    } else {
        ti = c->gen ? tools_gen_find_rest(c->gen, c->tool) : NULL;
    }
    if (!ti) { /* the catalogue changed since routing */
        req_reply_error(c, 404, NULL, "no such route");
        return;
    }
    snprintf(c->tool, sizeof c->tool, "%s", ti->name);
    req_async_begin(c);
    flow_start(c, ti, c->msg, NULL);
}
