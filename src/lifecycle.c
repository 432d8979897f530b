#include "lifecycle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow.h"
#include "guard.h"

struct lifecycle {
    int64_t trace_t0;
    req_ctx *c;
    app *a;
    int finish; /* 0 = start, 1 = finish */
    json_value *args;
    char invocation[260];
    char host_key[260];
    char conversation_id[129];
    char interaction_id[129];
    char answer_ref[200];
    trace_call *tc;
};

/* Trace Core wait time, for the access log (SPEC §20: durations split by upstream,
 * Trace Core and Lua). */
static void trace_time_begin(lifecycle *l)
{
    l->trace_t0 = now_mono_ms();
}

static void trace_time_end(lifecycle *l)
{
    if (l->trace_t0 && l->c)
        l->c->trace_ms += now_mono_ms() - l->trace_t0;
    l->trace_t0 = 0;
}

/* ---- catalogue entries ---- */

static const char START_SCHEMA[] =
    "{\"additionalProperties\":false,\"oneOf\":[{\"properties\":{\"conversation_mode\":{\"const\":"
    "\"new\"}},\"not\":{\"required\":[\"conversation_id\"]}},{\"properties\":{\"conversation_"
    "mode\":"
    "{\"const\":\"continue\"}},\"required\":[\"conversation_id\"]}],\"properties\":{\"agent_name\":"
    "{\"description\":\"Your stable agent name (the same on every turn)\",\"maxLength\":128,"
    "\"minLength\":1,\"type\":\"string\"},\"conversation_id\":{\"description\":\"Only with "
    "conversation_mode=continue: the conversation_id an earlier start returned\",\"minLength\":1,"
    "\"type\":\"string\"},\"conversation_mode\":{\"description\":\"new: no current conversation; "
    "continue: continue conversation_id\",\"enum\":[\"new\",\"continue\"],\"type\":\"string\"},"
    "\"question\":{\"description\":\"The user's full question for this turn\",\"minLength\":1,"
    "\"type\":\"string\"}},\"required\":[\"question\",\"agent_name\",\"conversation_mode\"],"
    "\"type\":\"object\"}";

static const char START_OUTPUT[] =
    "{\"additionalProperties\":false,\"properties\":{\"conversation_id\":{\"type\":\"string\"},"
    "\"execution_status\":{\"enum\":[\"active\"],\"type\":\"string\"},\"interaction_id\":{\"type\":"
    "\"string\"}},\"required\":[\"conversation_id\",\"interaction_id\",\"execution_status\"],"
    "\"type\":\"object\"}";

static const char FINISH_SCHEMA[] =
    "{\"additionalProperties\":false,\"oneOf\":[{\"properties\":{\"outcome\":{\"const\":"
    "\"completed\"}},\"required\":[\"answer\"]},{\"properties\":{\"outcome\":{\"enum\":[\"failed\","
    "\"cancelled\",\"handed_off\"]}}}],\"properties\":{\"answer\":{\"description\":\"The answer "
    "given to the user (required for completed)\",\"minLength\":1,\"type\":\"string\"},"
    "\"interaction_id\":{\"description\":\"The interaction_id bkn_start_interaction returned\","
    "\"minLength\":1,\"type\":\"string\"},\"outcome\":{\"enum\":[\"completed\",\"failed\","
    "\"cancelled\",\"handed_off\"],\"type\":\"string\"},\"reason\":{\"description\":\"Why, for "
    "outcomes other than completed\",\"type\":\"string\"}},\"required\":[\"interaction_id\","
    "\"outcome\"],\"type\":\"object\"}";

static const char FINISH_OUTPUT[] =
    "{\"properties\":{\"conversation_id\":{\"type\":\"string\"},\"evidence_status\":{\"type\":"
    "\"string\"},\"execution_status\":{\"type\":\"string\"},\"interaction_id\":{\"type\":"
    "\"string\"}},\"required\":[\"interaction_id\",\"execution_status\"],\"type\":\"object\"}";

static void entry(buf *out, const char *name, const char *title, const char *desc,
                  const char *schema, const char *output, const char *group_title, int order,
                  int read_only)
{
    buf_puts(out, "{\"_meta\":{\"openbkn.ai/group\":\"lifecycle\",\"openbkn.ai/group_title\":");
    json_write_string(out, group_title, strlen(group_title));
    buf_printf(out,
               ",\"openbkn.ai/order\":%d},\"annotations\":{\"destructiveHint\":false,"
               "\"idempotentHint\":true,\"openWorldHint\":false,\"readOnlyHint\":%s},",
               order, read_only ? "true" : "false");
    buf_puts(out, "\"description\":");
    json_write_string(out, desc, strlen(desc));
    buf_printf(out, ",\"inputSchema\":%s,\"name\":\"%s\",\"outputSchema\":%s,\"title\":", schema,
               name, output);
    json_write_string(out, title, strlen(title));
    buf_putc(out, '}');
}

void lifecycle_list_entries(buf *out, lang_id lang)
{
    int en = lang == LANG_EN_US;
    const char *gt = en ? "Session Lifecycle" : "会话生命周期";
    entry(out, "bkn_start_interaction", en ? "Start Interaction" : "开始交互",
          en ? "Call first on every turn: submit the user's full question, your stable agent_name "
               "and conversation_mode (new without conversation_id, or continue with the "
               "conversation_id an earlier start returned). Returns conversation_id and "
               "interaction_id: pass them as bkn_context to every other tool of this turn."
             : "每轮对话先调用：提交用户的完整问题、固定的 agent_name 与 conversation_mode（new "
               "不传 conversation_id；continue 传入之前 start 返回的 conversation_id）。返回 "
               "conversation_id 与 interaction_id，本轮其他工具都以 bkn_context 携带它们。",
          START_SCHEMA, START_OUTPUT, gt, 10, 0);
    buf_putc(out, ',');
    entry(out, "bkn_finish_interaction", en ? "Finish Interaction" : "结束交互",
          en ? "Call before replying to the user: the interaction_id, the outcome (completed, "
               "failed, cancelled, handed_off) and, for completed, your answer. Ends the "
               "interaction only; the conversation stays open for the next turn."
             : "回复用户之前调用：提交 interaction_id、outcome（completed、failed、cancelled、"
               "handed_off），completed 时附上 answer。只结束本次交互，会话保持打开供下一轮使用。",
          FINISH_SCHEMA, FINISH_OUTPUT, gt, 20, 0);
}

const char *lifecycle_second_entry(const char *entries)
{
    const char *p = strstr(entries, "},{\"_meta\"");
    return p ? p + 2 : entries + strlen(entries);
}

int lifecycle_is_tool(const char *name)
{
    return !strcmp(name, "bkn_start_interaction") || !strcmp(name, "bkn_finish_interaction");
}

/* ---- replies ---- */

static void lc_free(lifecycle *l)
{
    if (l->tc)
        trace_cancel(l->tc);
    json_free(l->args);
    free(l);
}

void lifecycle_cancel(lifecycle *l)
{
    if (l->c)
        l->c->lc = NULL;
    lc_free(l);
}

static void lc_send(lifecycle *l, const char *result, size_t len, const char *outcome)
{
    req_ctx *c = l->c;
    c->lc = NULL;
    l->c = NULL;
    c->outcome = outcome;
    mcp_send_result(c, result, len);
    lc_free(l);
}

static void fail(lifecycle *l, const char *code, const char *message, int retryable,
                 const char *action, const char *extra_status)
{
    buf e = BUF_INIT, b = BUF_INIT;
    guard_write_error(&e, code, message, retryable, action, 1);
    if (extra_status) { /* add current_status inside the error object */
        e.len -= 2;
        e.data[e.len] = '\0';
        buf_puts(&e, ",\"current_status\":");
        json_write_string(&e, extra_status, strlen(extra_status));
        buf_puts(&e, "}}");
    }
    buf_puts(&b, "{\"content\":[{\"type\":\"text\",\"text\":");
    json_write_string(&b, e.data, e.len);
    buf_puts(&b, "}],\"isError\":true}");
    lc_send(l, b.data, b.len, code);
    buf_free(&e);
    buf_free(&b);
}

/* A Trace Core outcome that is not a success: the envelope as is, or a mapped code. */
static void fail_trace(lifecycle *l, const trace_reply *r)
{
    if (r->status == TRACE_API_ERROR && r->body) {
        buf e = BUF_INIT, b = BUF_INIT;
        json_write(&e, r->body, 0);
        buf_puts(&b, "{\"content\":[{\"type\":\"text\",\"text\":");
        json_write_string(&b, e.data, e.len);
        buf_puts(&b, "}],\"isError\":true}");
        lc_send(l, b.data, b.len, r->error_code && *r->error_code ? r->error_code : "trace_error");
        buf_free(&e);
        buf_free(&b);
    } else if (r->status == TRACE_NOT_INSTALLED) {
        fail(l, "feature_not_installed", "BKN Trace Core is not configured for this deployment", 0,
             "", NULL);
    } else if (r->status == TRACE_NO_OWNER) {
        fail(l, "permission_denied", "the caller has no tenant, business domain or account", 0,
             "request_authorization", NULL);
    } else {
        fail(l, "trace_core_unavailable", "BKN Trace Core is temporarily unavailable", 1,
             "retry_later", NULL);
    }
}

static void success(lifecycle *l, const json_value *inter, int finish)
{
    buf s = BUF_INIT, b = BUF_INIT;
    const char *keys[] = {"conversation_id", "interaction_id", "execution_status",
                          "evidence_status"};
    buf_putc(&s, '{');
    for (int i = 0; i < (finish ? 4 : 3); i++) {
        const char *v = json_get_string(inter, keys[i]);
        if (!v && i == 0)
            v = l->conversation_id;
        if (!v)
            continue;
        if (s.len > 1)
            buf_putc(&s, ',');
        json_write_string(&s, keys[i], strlen(keys[i]));
        buf_putc(&s, ':');
        json_write_string(&s, v, strlen(v));
    }
    buf_putc(&s, '}');
    buf_puts(&b, "{\"content\":[{\"type\":\"text\",\"text\":");
    json_write_string(&b, s.data, s.len);
    buf_puts(&b, "}],\"structuredContent\":");
    buf_append(&b, s.data, s.len);
    buf_puts(&b, ",\"isError\":false}");
    lc_send(l, b.data, b.len, "ok");
    buf_free(&s);
    buf_free(&b);
}

/* Starts a Trace Core call at fmt, whose one "%s" (if any) is id path-escaped; the
 * wait counts towards the request's Trace Core time. */
static void core(lifecycle *l, const char *method, const char *fmt, const char *id,
                 const json_value *body, int idempotent, trace_cb cb)
{
    buf path = BUF_INIT, e = BUF_INIT;
    if (id)
        buf_printf(&path, fmt, trace_path_escape(id, &e));
    else
        buf_puts(&path, fmt);
    trace_time_begin(l);
    l->tc = trace_request(l->a->trace, &l->c->who, lang_tag(l->c->lang), method, path.data, body,
                          idempotent, cb, l);
    buf_free(&path);
    buf_free(&e);
}

/* Member field of a successful reply; otherwise answers the failure and returns NULL
 * (missing: the message when Core answered without it). */
static const char *reply_field(lifecycle *l, const trace_reply *r, const char *field,
                               const char *missing)
{
    const char *v = r->status == TRACE_OK && r->body ? json_get_string(r->body, field) : NULL;
    if (v)
        return v;
    if (r->status == TRACE_OK)
        fail(l, "trace_core_unavailable", missing, 1, "retry_later", NULL);
    else
        fail_trace(l, r);
    return NULL;
}

/* "mcp:" + 32 hex of sha256 over the canonical {Args, Name, RequestID}: an idempotency
 * key that only the arguments (and the request id) decide. */
static void args_key(const json_value *args, const char *name, const char *request_id, char out[48])
{
    json_value *o = json_new_object();
    json_set(o, "Args", json_clone(args));
    json_set(o, "Name", json_new_str(name, strlen(name)));
    json_set(o, "RequestID", json_new_str(request_id, strlen(request_id)));
    buf t = BUF_INIT;
    json_write(&t, o, 1);
    char h[65];
    sha256_hex(t.data, t.len, h);
    snprintf(out, 48, "mcp:%.32s", h);
    buf_free(&t);
    json_free(o);
}

/* ---- validation ---- */

static int only_keys(const json_value *o, const char *const *allowed)
{
    for (size_t i = 0; i < json_count(o); i++) {
        const char *k = json_key_at(o, i, NULL);
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= !strcmp(k, *a);
        if (!ok)
            return 0;
    }
    return 1;
}

/* A non-empty string member, or NULL; *bad set when present but not one. */
static const char *str_member(const json_value *o, const char *key, int *bad)
{
    const json_value *v = json_get(o, key);
    if (!v)
        return NULL;
    size_t n = 0;
    if (json_typeof(v) != JSON_STRING || (json_get_str(v, &n), n == 0)) {
        *bad = 1;
        return NULL;
    }
    return json_get_str(v, NULL);
}

/* ---- start ---- */

static void on_interaction_created(const trace_reply *r, void *arg)
{
    lifecycle *l = arg;
    l->tc = NULL;
    trace_time_end(l);
    if (r->status != TRACE_OK || !r->body) {
        fail_trace(l, r);
        return;
    }
    success(l, r->body, 0);
}

static void create_interaction(lifecycle *l)
{
    const char *question = json_get_string(l->args, "question");
    const char *agent = json_get_string(l->args, "agent_name");
    char qhash[65], key[100];
    sha256_hex(question, strlen(question), qhash);
    if (l->invocation[0]) {
        char h[65];
        sha256_hex(l->invocation, strlen(l->invocation), h);
        snprintf(key, sizeof key, "mcp-invocation:%s", h);
    } else {
        /* Deterministic from the arguments and the request id (stable when a retry
         * reuses bkn-request-id). */
        args_key(l->args, "bkn_start_interaction", l->c->request_id, key);
    }
    json_value *b = json_new_object();
    json_set(b, "idempotency_key", json_new_str(key, strlen(key)));
    json_set(b, "request_hash", json_new_str(qhash, 64));
    json_set(b, "agent_name", json_new_str(agent, strlen(agent)));
    /* Safe to retry: Core answers a replay of the same key with the same Interaction. */
    core(l, "POST", "/conversations/%s/interactions", l->conversation_id, b, 1,
         on_interaction_created);
    json_free(b);
}

static void on_conversation(const trace_reply *r, void *arg)
{
    lifecycle *l = arg;
    l->tc = NULL;
    trace_time_end(l);
    const char *cid =
        reply_field(l, r, "conversation_id", "BKN Trace Core answered without a conversation");
    if (!cid)
        return;
    const char *given = json_get_string(l->args, "conversation_id");
    if (given && strcmp(given, cid)) {
        fail(l, "conversation_context_conflict",
             "conversation_id does not match the host conversation mapping", 0,
             "use_authoritative_conversation", NULL);
        return;
    }
    snprintf(l->conversation_id, sizeof l->conversation_id, "%s", cid);
    create_interaction(l);
}

static void start(lifecycle *l)
{
    static const char *const allowed[] = {"question", "agent_name", "conversation_mode",
                                          "conversation_id", NULL};
    const json_value *a = l->args;
    int bad = 0;
    const char *question = str_member(a, "question", &bad);
    const char *agent = str_member(a, "agent_name", &bad);
    const char *mode = str_member(a, "conversation_mode", &bad);
    const char *cid = str_member(a, "conversation_id", &bad);
    int ok = !bad && only_keys(a, allowed) && question && agent && strlen(agent) <= 128 && mode &&
             ((!strcmp(mode, "new") && !json_get(a, "conversation_id")) ||
              (!strcmp(mode, "continue") && cid));
    if (!ok) {
        fail(l, "invalid_params",
             "bkn_start_interaction expects top-level agent_name, question, and conversation_mode; "
             "use continue with conversation_id or new without it",
             0, "correct_tool_arguments", NULL);
        return;
    }
    if (!trace_installed(l->a->trace)) {
        fail(l, "feature_not_installed", "BKN Trace Core is not configured for this deployment", 0,
             "", NULL);
        return;
    }
    if (!strcmp(mode, "continue") && !l->host_key[0]) {
        snprintf(l->conversation_id, sizeof l->conversation_id, "%s", cid);
        create_interaction(l);
        return;
    }
    /* new, or any mode with a host conversation key: the mapping decides. */
    char ext[120], h[65];
    if (l->host_key[0]) {
        sha256_hex(l->host_key, strlen(l->host_key), h);
        snprintf(ext, sizeof ext, "mcp-host:%s", h);
    } else if (l->invocation[0] || l->c->caller_request_id) {
        /* A retry of the same start must land on the same conversation. */
        buf k = BUF_INIT;
        buf_printf(&k, "%s|%s", l->c->who.key, l->invocation[0] ? l->invocation : l->c->request_id);
        sha256_hex(k.data, k.len, h);
        snprintf(ext, sizeof ext, "mcp-retry:%.32s", h);
        buf_free(&k);
    } else {
        unsigned char r[16];
        random_bytes(r, sizeof r);
        hex_encode(r, sizeof r, h);
        snprintf(ext, sizeof ext, "mcp:%s", h);
    }
    char ikey[80];
    sha256_hex(ext, strlen(ext), h);
    snprintf(ikey, sizeof ikey, "mcp-conversation:%.32s", h);
    json_value *b = json_new_object();
    json_set(b, "external_conversation_key", json_new_str(ext, strlen(ext)));
    json_set(b, "idempotency_key", json_new_str(ikey, strlen(ikey)));
    core(l, "POST", "/conversations:ensure-current", NULL, b, 1, on_conversation);
    json_free(b);
}

/* ---- finish ---- */

static void on_finished(const trace_reply *r, void *arg)
{
    lifecycle *l = arg;
    l->tc = NULL;
    trace_time_end(l);
    if (r->status != TRACE_OK || !r->body) {
        fail_trace(l, r);
        return;
    }
    success(l, r->body, 1);
}

static void post_finish(lifecycle *l)
{
    const char *outcome = json_get_string(l->args, "outcome");
    const char *reason = json_get_string(l->args, "reason");
    char key[48];
    args_key(l->args, "bkn_finish_interaction", "", key);
    json_value *b = json_new_object();
    json_set(b, "outcome", json_new_str(outcome, strlen(outcome)));
    json_set(b, "idempotency_key", json_new_str(key, strlen(key)));
    if (l->answer_ref[0])
        json_set(b, "answer_artifact_ref", json_new_str(l->answer_ref, strlen(l->answer_ref)));
    if (reason)
        json_set(b, "reason", json_new_str(reason, strlen(reason)));
    core(l, "POST", "/interactions/%s/finish", l->interaction_id, b, 1, on_finished);
    json_free(b);
}

static void on_artifact(const trace_reply *r, void *arg)
{
    lifecycle *l = arg;
    l->tc = NULL;
    trace_time_end(l);
    const char *id = reply_field(l, r, "artifact_id", "BKN Trace Core did not store the answer");
    if (!id)
        return;
    snprintf(l->answer_ref, sizeof l->answer_ref, "artifact:%s", id);
    post_finish(l);
}

/* Records the answer as a result artifact (reference trace-lifecycle.md §2.3 E1). */
static void post_answer(lifecycle *l, const json_value *inter)
{
    const char *answer = json_get_string(l->args, "answer");
    const principal *w = &l->c->who;
    json_value *content = json_new_object();
    json_set(content, "answer", json_new_str(answer, strlen(answer)));
    buf t = BUF_INIT;
    json_write(&t, content, 1);
    char h[65], hash[80], idsrc[400], aid[80], trace_id[33], span_id[17];
    sha256_hex(t.data, t.len, h);
    buf_free(&t);
    snprintf(hash, sizeof hash, "sha256:%s", h);
    snprintf(idsrc, sizeof idsrc, "%s|result|%s", l->interaction_id, hash);
    sha256_hex(idsrc, strlen(idsrc), h);
    snprintf(aid, sizeof aid, "art_result_%.32s", h);
    trace_synthetic_ids(l->c->request_id, trace_id, span_id);
    const char *observed = json_get_string(inter, "updated_at");
    json_value *b = json_new_object();
    json_set(b, "artifact_id", json_new_str(aid, strlen(aid)));
    json_set(b, "artifact_type", json_new_str("result", 6));
    json_set(b, "bkn.request.id", json_new_str(l->c->request_id, strlen(l->c->request_id)));
    json_set(b, "trace_id", json_new_str(trace_id, 32));
    json_set(b, "interaction_id", json_new_str(l->interaction_id, strlen(l->interaction_id)));
    json_set(b, "content_type", json_new_str("application/json", 16));
    json_set(b, "schema_version", json_new_str("2.2.0", 5));
    if (observed)
        json_set(b, "observed_at", json_new_str(observed, strlen(observed)));
    json_set(b, "content_hash", json_new_str(hash, strlen(hash)));
    json_set(b, "content", content);
    json_set(b, "bkn.account.id", json_new_str(w->account_id, strlen(w->account_id)));
    json_set(b, "bkn.account.type", json_new_str(w->account_type, strlen(w->account_type)));
    json_set(b, "effective_subject_id", json_new_str(w->account_id, strlen(w->account_id)));
    const char *app_id = w->client_id[0] ? w->client_id : w->account_id;
    json_set(b, "application_principal_id", json_new_str(app_id, strlen(app_id)));
    buf ini = BUF_INIT;
    buf_printf(&ini, "account:%s", w->account_id);
    json_set(b, "initiator", json_new_str(ini.data, ini.len));
    buf_free(&ini);
    json_set(b, "agent_or_app", json_new_str(app_id, strlen(app_id)));
    core(l, "POST", "/evidence/artifacts", NULL, b, 1, on_artifact);
    json_free(b);
}

static void on_pre_read(const trace_reply *r, void *arg)
{
    lifecycle *l = arg;
    l->tc = NULL;
    trace_time_end(l);
    if (r->status != TRACE_OK || !r->body) {
        fail_trace(l, r);
        return;
    }
    const char *st = json_get_string(r->body, "execution_status");
    const json_value *man = json_get(r->body, "closure_manifest");
    const char *ref =
        man && json_typeof(man) == JSON_OBJECT ? json_get_string(man, "answer_artifact_ref") : NULL;
    if (st && !strcmp(st, "completed") && ref && *ref) {
        /* A retry after a finish that went through: reuse the committed answer. */
        snprintf(l->answer_ref, sizeof l->answer_ref, "%s", ref);
        post_finish(l);
        return;
    }
    if (!st || (strcmp(st, "active") && strcmp(st, "completed"))) {
        fail(l, "terminal_conflict", "another terminal outcome already won", 0,
             "reuse_authoritative_interaction", st ? st : "unknown");
        return;
    }
    post_answer(l, r->body);
}

static void finish(lifecycle *l)
{
    static const char *const allowed[] = {"interaction_id", "outcome", "answer", "reason", NULL};
    const json_value *a = l->args;
    if (json_get(a, "bkn_context")) {
        fail(l, "invalid_params",
             "bkn_finish_interaction requires interaction_id as a top-level field; remove "
             "bkn_context and retry",
             0, "correct_tool_arguments", NULL);
        return;
    }
    const json_value *ov = json_get(a, "outcome");
    const char *outcome = ov && json_typeof(ov) == JSON_STRING ? json_get_str(ov, NULL) : NULL;
    int known = outcome && (!strcmp(outcome, "completed") || !strcmp(outcome, "failed") ||
                            !strcmp(outcome, "cancelled") || !strcmp(outcome, "handed_off"));
    if (ov && !known) {
        fail(l, "invalid_params",
             "bkn_finish_interaction outcome must be one of: completed, failed, cancelled, "
             "handed_off",
             0, "correct_tool_arguments", NULL);
        return;
    }
    int bad = 0;
    const char *iid = str_member(a, "interaction_id", &bad);
    const char *answer = str_member(a, "answer", &bad);
    const json_value *reason = json_get(a, "reason");
    if (reason && json_typeof(reason) != JSON_STRING)
        bad = 1;
    if (bad || !only_keys(a, allowed) || !iid || !outcome ||
        (!strcmp(outcome, "completed") && !answer)) {
        fail(l, "invalid_params",
             "bkn_finish_interaction expects top-level interaction_id and outcome, plus answer for "
             "completed or optional reason otherwise",
             0, "correct_tool_arguments", NULL);
        return;
    }
    if (!trace_installed(l->a->trace)) {
        fail(l, "feature_not_installed", "BKN Trace Core is not configured for this deployment", 0,
             "", NULL);
        return;
    }
    snprintf(l->interaction_id, sizeof l->interaction_id, "%s", iid);
    if (strcmp(outcome, "completed")) {
        post_finish(l);
        return;
    }
    core(l, "GET", "/interactions/%s", iid, NULL, 1, on_pre_read);
}

void lifecycle_call(req_ctx *c, const char *name, const json_value *args, const json_value *meta)
{
    lifecycle *l = xcalloc(1, sizeof *l);
    l->c = c;
    l->a = c->app;
    l->finish = !strcmp(name, "bkn_finish_interaction");
    c->lc = l;
    char err[300];
    if (flow_hint(c, meta, "X-OpenBKN-Client-Invocation-Id", "openbkn.ai/client-invocation-id",
                  l->invocation, sizeof l->invocation, err, sizeof err) < 0 ||
        flow_hint(c, meta, "X-OpenBKN-Host-Conversation-Key", "openbkn.ai/host-conversation-key",
                  l->host_key, sizeof l->host_key, err, sizeof err) < 0) {
        fail(l, "lifecycle_hint_invalid", err, 0, "fix_host_lifecycle_hint", NULL);
        return;
    }
    l->args = args ? json_clone(args) : json_new_object();
    guard_strip_hints(l->args);
    if (l->finish)
        finish(l);
    else
        start(l);
}
