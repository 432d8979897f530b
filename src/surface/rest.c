/* rest: POST /kn/<tool>, the REST twin of every business tool. The body
 * is the tool's arguments; the tool's result or error envelope is the response. */
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "callcheck.h"
#include "confirm.h"
#include "guard.h"
#include "outcome.h"
#include "server.h"
#include "surfaces.h"

/* ---- confirmation by a person (docs/confirmation.md): 428 with a token ---- */

#define CONFIRM_HEADER "X-OpenBKN-Confirmation"
#define CONFIRM_ANSWER_HEADER "X-OpenBKN-Confirmation-Answer"

/* The call as the rule and the token see it: the body's arguments, with the query
 * parameters and X-Kn-ID filling what the body leaves out (as the tool gets them). */
static json_value *confirm_view(req_ctx *c)
{
    const rest_req *r = req_rest(c);
    json_value *v = json_typeof(c->msg) == JSON_OBJECT ? json_clone(c->msg) : json_new_object();
    for (size_t i = 0; r->query && i < json_count(r->query); i++) {
        const char *k = json_key_at(r->query, i, NULL);
        if (!json_get(v, k))
            json_set(v, k, json_clone(json_val_at(r->query, i)));
    }
    const char *kn = req_header(c, "X-Kn-ID");
    if (kn && !json_get(v, "kn_id"))
        json_set(v, "kn_id", json_new_str(kn, strlen(kn)));
    return v;
}

static void confirm_refuse(req_ctx *c, int status, const char *code, const char *message,
                           const char *action)
{
    call_outcome o;
    outcome_init(&o);
    outcome_refuse(&o, status, code, message, 0, action, c->lang);
    c->outcome = code;
    rest_reply_outcome(c, &o);
    outcome_free(&o);
}

/* 428: the question and a token to send back in X-OpenBKN-Confirmation. */
static void confirm_required(req_ctx *c, const json_value *view, const char *target,
                             const json_value *target_args)
{
    buf msg = BUF_INIT, schema = BUF_INIT, b = BUF_INIT;
    char hash[65], token[CONFIRM_STATE_LEN + 1];
    confirm_describe(target, target_args, c->lang, &msg, &schema);
    confirm_args_hash(view, hash);
    confirm_state_mint(c->app->sessions, &c->who, c->tool, hash, confirm_interaction(view),
                       c->app->cfg->confirm_ttl_s, token);
    json_value *details = json_new_object();
    json_set(details, "confirmation_token", json_new_str(token, strlen(token)));
    json_set(details, "header", json_new_str(CONFIRM_HEADER, strlen(CONFIRM_HEADER)));
    json_set(details, "question", json_new_str(msg.data, msg.len));
    json_set(details, "expires_in_s", json_new_int(c->app->cfg->confirm_ttl_s > 0
                                                        ? c->app->cfg->confirm_ttl_s
                                                        : 600));
    guard_error e = {.lang = c->lang,
                     .code = "confirmation_required",
                     .description = msg.data,
                     .details = details,
                     .retryable = 0,
                     .required_action = "confirm_by_person"};
    guard_write_object(&b, &e);
    req_add_header(c, "Content-Language", lang_tag(c->lang));
    c->outcome = "confirmation_required";
    req_reply(c, 428, "application/json; charset=utf-8", b.data, b.len);
    json_free(details);
    buf_free(&b);
    buf_free(&msg);
    buf_free(&schema);
}

typedef struct rest_confirm {
    req_ctx *c;
    store_op *op;
    const char *declined; /* static code, or NULL */
} rest_confirm;

static void cancel_rest_confirm(void *op)
{
    rest_confirm *u = op;
    store_cancel(u->op);
    free(u);
}

static void on_rest_confirm_claimed(int rc, const char *val, size_t len, void *arg)
{
    rest_confirm *u = arg;
    req_ctx *c = u->c;
    const char *declined = u->declined;
    (void)val;
    (void)len;
    free(u);
    req_pending_clear(c);
    if (rc == 1) {
        confirm_refuse(c, 409, "confirmation_state_used",
                       c->lang == LANG_ZH_CN ? "该确认令牌已使用过：请不带令牌重新调用以再次请求确认"
                                             : "This confirmation token was used already: call again "
                                               "without it to ask the person again",
                       "confirm_by_person");
        return;
    }
    if (rc != 0) {
        call_outcome o;
        outcome_init(&o);
        outcome_refuse(&o, 503, "state_store_unavailable",
                       "Service Unavailable: the state store (state_store) cannot be reached; "
                       "retry the request",
                       1, "retry_later", c->lang);
        rest_reply_outcome(c, &o);
        outcome_free(&o);
        return;
    }
    if (declined) {
        char m[256];
        snprintf(m, sizeof m,
                 c->lang == LANG_ZH_CN ? "用户拒绝了确认：%s 未执行" : "The person declined: %s did not run",
                 c->tool);
        req_flow_start_declined(c, req_rest(c)->ti, c->msg, NULL, rest_reply_outcome, declined, m);
    } else {
        req_flow_start(c, req_rest(c)->ti, c->msg, NULL, rest_reply_outcome);
    }
}

/* 1 when the call needs confirmation and this function answered or went on with it. */
static int rest_confirm_gate(req_ctx *c)
{
    /* most deployments confirm nothing, or not this tool: no view to build */
    if (!confirm_may_apply(c->app->cfg->confirm_tools, c->tool))
        return 0;
    json_value *view = confirm_view(c);
    const char *target;
    const json_value *target_args;
    confirm_target(c->tool, view, &target, &target_args); /* execute_tool: its inner call */
    if (!confirm_applies(c->app->cfg->confirm_tools, target, target_args)) {
        json_free(view);
        return 0;
    }
    const char *token = req_header(c, CONFIRM_HEADER);
    if (!token || !*token) {
        confirm_required(c, view, target, target_args);
        json_free(view);
        return 1;
    }
    char hash[65], nonce[33];
    long long exp = 0;
    confirm_args_hash(view, hash);
    confirm_status cs = confirm_state_check(c->app->sessions, &c->who, c->tool, hash,
                                            confirm_interaction(view), token, nonce, &exp);
    json_free(view);
    if (cs != CONFIRM_OK) {
        int zh = c->lang == LANG_ZH_CN;
        if (cs == CONFIRM_EXPIRED)
            confirm_refuse(c, 400, "confirmation_state_expired",
                           zh ? "确认令牌已过期：请不带令牌重新调用以再次请求确认"
                              : "The confirmation token expired: call again without it to ask again",
                           "confirm_by_person");
        else
            confirm_refuse(c, 400, "confirmation_state_invalid",
                           zh ? "确认令牌不是本部署为此调用方、工具、参数与交互签发的"
                              : "The confirmation token was not issued by this deployment for this "
                                "caller, tool, arguments and interaction",
                           "confirm_by_person");
        return 1;
    }
    const char *answer = req_header(c, CONFIRM_ANSWER_HEADER);
    rest_confirm *u = xcalloc(1, sizeof *u);
    u->c = c;
    if (answer && !strcmp(answer, "decline"))
        u->declined = "confirmation_declined";
    else if (answer && !strcmp(answer, "cancel"))
        u->declined = "confirmation_cancelled";
    else if (answer && strcmp(answer, "accept")) {
        free(u);
        confirm_refuse(c, 400, "confirmation_answer_invalid",
                       "X-OpenBKN-Confirmation-Answer must be accept, decline or cancel",
                       "fix_request");
        return 1;
    }
    char key[64];
    snprintf(key, sizeof key, "confirm:used:%s", nonce);
    req_async_begin(c);
    req_pending_set(c, u, cancel_rest_confirm);
    u->op = store_claim(c->app->store, key, "1", 1, (long)(exp * 1000 - now_wall_ms()) + 1000,
                        on_rest_confirm_claimed, u);
    return 1;
}

void rest_handle(req_ctx *c)
{
    rest_req *r = req_rest(c);
    struct evkeyvalq q;
    const char *query = req_query(c);
    memset(&q, 0, sizeof q);
    if (query && evhttp_parse_query_str(query, &q) < 0) {
        req_reply_error(c, 400, NULL, "malformed query string");
        return;
    }
    const char *fmt = evhttp_find_header(&q, "response_format");
    if (fmt) /* checked against the tool's formats by flow.c */
        snprintf(r->format, sizeof r->format, "%.15s", fmt), r->format_given = 1;
    /* The other query parameters fill arguments the body leaves out (kn_id, ot_id, ...). */
    struct evkeyval *kv;
    TAILQ_FOREACH(kv, &q, next)
    {
        if (!strcmp(kv->key, "response_format"))
            continue;
        if (!r->query)
            r->query = json_new_object();
        json_set(r->query, kv->key, json_new_str(kv->value, strlen(kv->value)));
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
    const tools_info *ti = r->ti; /* pinned at routing, in c->gen */
    if (r->route_params) {
        /* A declared route: the path's parameters, and the body as the arguments or,
         * with route_body, as that one argument (its bkn_context stays the call's). */
        json_value *args = json_clone(r->route_params);
        if (r->route_body) {
            const json_value *ctx = json_get(c->msg, "bkn_context");
            if (ctx)
                json_set(args, "bkn_context", json_clone(ctx));
            json_value *body = json_clone(c->msg);
            json_remove(body, "bkn_context");
            json_set(args, r->route_body, body);
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
    if (rest_confirm_gate(c))
        return;
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

void rest_req_end(rest_req *r)
{
    json_free(r->query);
    json_free(r->route_params);
}
