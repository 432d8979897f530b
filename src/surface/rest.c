/* rest: POST /kn/<tool>, the REST twin of every business tool. The body
 * is the tool's arguments; the tool's result or error envelope is the response. */
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>

#include "accept.h"
#include "callcheck.h"
#include "server.h"
#include "surfaces.h"

void rest_handle(req_ctx *c)
{
    struct evkeyvalq q;
    const char *query = req_query(c);
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
    const tools_info *ti = c->ti; /* pinned at routing, in c->gen */
    if (c->route_params) {
        /* A declared route: the path's parameters, and the body as the arguments or,
         * with route_body, as that one argument (its bkn_context stays the call's). */
        json_value *args = json_clone(c->route_params);
        if (c->route_body) {
            const json_value *ctx = json_get(c->msg, "bkn_context");
            if (ctx)
                json_set(args, "bkn_context", json_clone(ctx));
            json_value *body = json_clone(c->msg);
            json_remove(body, "bkn_context");
            json_set(args, c->route_body, body);
        } else {
            for (size_t i = 0; i < json_count(c->msg); i++) {
                const char *k = json_key_at(c->msg, i, NULL);
                if (!json_get(args, k))
                    json_set(args, k, json_clone(json_val_at(c->msg, i)));
            }
        }
        json_free(c->msg);
        c->msg = args;
    }
    str_copy(c->tool, sizeof c->tool, ti->name);
    req_async_begin(c);
    req_flow_start(c, ti, c->msg, NULL, rest_reply_outcome);
}

void rest_reply_outcome(req_ctx *c, const call_outcome *o)
{
    int toon = o->toon && !o->is_error;
    const buf *body = toon && o->toon_text.data ? &o->toon_text : &o->json;
    if (o->receipt_id[0])
        req_add_header(c, "bkn-receipt-id", o->receipt_id);
    if (o->operation_id[0])
        req_add_header(c, "bkn-operation-id", o->operation_id);
    if (o->unrecorded)
        req_add_header(c, "bkn-trace-status", "unrecorded");
    else if (o->receipt_pending)
        req_add_header(c, "bkn-trace-status", "receipt_pending");
    if (o->is_error)
        req_add_header(c, "Content-Language", lang_tag(c->lang));
    req_reply(c, o->status,
              toon ? "application/toon; charset=utf-8" : "application/json; charset=utf-8",
              body->data ? body->data : "", body->len);
}
