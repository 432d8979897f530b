/* lifecycle: bkn_start_interaction and bkn_finish_interaction (see lifecycle.h). */
#include "lifecycle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "callcheck.h"
#include "guard.h"

struct lifecycle {
    lifecycle_input in; /* pointers borrowed (lifecycle.h) */
    lifecycle_done_fn done;
    void *done_arg;
    int64_t trace_t0;
    int finish; /* 0 = start, 1 = finish */
    json_value *args;
    char invocation[260];
    char host_key[260];
    char conversation_id[129];
    char interaction_id[129];
    char answer_ref[200];
    trace_call *tc;
    call_outcome o;
};

static const char *lang(const lifecycle *l)
{
    return lang_tag(l->in.lang);
}

/* Trace Core wait time, for the access log (durations split by upstream, Trace
 * Core and Lua). */
static void trace_time_begin(lifecycle *l)
{
    l->trace_t0 = now_mono_ms();
}

static void trace_time_end(lifecycle *l)
{
    if (l->trace_t0)
        l->o.trace_ms += now_mono_ms() - l->trace_t0;
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
    outcome_free(&l->o);
    free(l);
}

void lifecycle_cancel(lifecycle *l)
{
    lc_free(l);
}

static void lc_send(lifecycle *l, const char *code)
{
    snprintf(l->o.code, sizeof l->o.code, "%s", code);
    l->done(&l->o, l->done_arg);
    lc_free(l);
}

static void fail(lifecycle *l, const char *code, const char *message, int retryable,
                 const char *action, const char *extra_status)
{
    buf_reset(&l->o.json);
    guard_write_error_status(&l->o.json, code, message, retryable, action, 1, extra_status);
    l->o.is_error = 1;
    lc_send(l, code);
}

/* A Trace Core outcome that is not a success: the envelope as is, or a mapped code. */
static void fail_trace(lifecycle *l, const trace_reply *r)
{
    if (r->status == TRACE_API_ERROR && r->body) {
        buf_reset(&l->o.json);
        guard_write_api_error(&l->o.json, r->body);
        l->o.is_error = 1;
        lc_send(l, r->error_code && *r->error_code ? r->error_code : "trace_error");
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

/* A reply without the id it should carry: Core answered without it (missing), or
 * the failure itself. */
static void fail_no_id(lifecycle *l, const trace_reply *r, const char *missing)
{
    if (r->status == TRACE_OK)
        fail(l, "trace_core_unavailable", missing, 1, "retry_later", NULL);
    else
        fail_trace(l, r);
}

static void success(lifecycle *l, const trace_interaction *it, int finish)
{
    const char *keys[] = {"conversation_id", "interaction_id", "execution_status",
                          "evidence_status"};
    const char *vals[] = {it->conversation_id ? it->conversation_id : l->conversation_id,
                          it->interaction_id, it->execution_status, it->evidence_status};
    json_value *s = json_new_object();
    for (int i = 0; i < (finish ? 4 : 3); i++)
        if (vals[i])
            json_set(s, keys[i], json_new_str(vals[i], strlen(vals[i])));
    buf_reset(&l->o.json);
    json_write(&l->o.json, s, 0);
    l->o.result = s;
    l->o.is_error = 0;
    lc_send(l, "ok");
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

static void on_interaction_created(const trace_reply *r, const trace_interaction *it, void *arg)
{
    lifecycle *l = arg;
    l->tc = NULL;
    trace_time_end(l);
    if (!it) {
        fail_trace(l, r);
        return;
    }
    success(l, it, 0);
}

static void create_interaction(lifecycle *l)
{
    const char *question = json_get_string(l->args, "question");
    const char *agent = json_get_string(l->args, "agent_name");
    char key[100];
    if (l->invocation[0]) {
        char h[65];
        sha256_hex(l->invocation, strlen(l->invocation), h);
        snprintf(key, sizeof key, "mcp-invocation:%s", h);
    } else {
        /* Deterministic from the arguments and the request id (stable when a retry
         * reuses bkn-request-id). */
        args_key(l->args, "bkn_start_interaction", l->in.request_id, key);
    }
    trace_time_begin(l);
    l->tc = trace_create_interaction(l->in.trace, l->in.who, lang(l), l->conversation_id, key,
                                     question, agent, on_interaction_created, l);
}

static void on_conversation(const trace_reply *r, const char *cid, void *arg)
{
    lifecycle *l = arg;
    l->tc = NULL;
    trace_time_end(l);
    if (!cid) {
        fail_no_id(l, r, "BKN Trace Core answered without a conversation");
        return;
    }
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
    if (!trace_installed(l->in.trace)) {
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
    } else if (l->invocation[0] || l->in.caller_request_id) {
        /* A retry of the same start must land on the same conversation. */
        buf k = BUF_INIT;
        buf_printf(&k, "%s|%s", l->in.who->key,
                   l->invocation[0] ? l->invocation : l->in.request_id);
        sha256_hex(k.data, k.len, h);
        snprintf(ext, sizeof ext, "mcp-retry:%.32s", h);
        buf_free(&k);
    } else {
        unsigned char r[16];
        random_bytes(r, sizeof r);
        hex_encode(r, sizeof r, h);
        snprintf(ext, sizeof ext, "mcp:%s", h);
    }
    trace_time_begin(l);
    l->tc = trace_ensure_conversation(l->in.trace, l->in.who, lang(l), ext, on_conversation, l);
}

/* ---- finish ---- */

static void on_finished(const trace_reply *r, const trace_interaction *it, void *arg)
{
    lifecycle *l = arg;
    l->tc = NULL;
    trace_time_end(l);
    if (!it) {
        fail_trace(l, r);
        return;
    }
    success(l, it, 1);
}

static void post_finish(lifecycle *l)
{
    const char *outcome = json_get_string(l->args, "outcome");
    const char *reason = json_get_string(l->args, "reason");
    char key[48];
    args_key(l->args, "bkn_finish_interaction", "", key);
    trace_time_begin(l);
    l->tc = trace_finish_interaction(l->in.trace, l->in.who, lang(l), l->interaction_id, outcome,
                                     key, l->answer_ref, reason, on_finished, l);
}

static void on_artifact(const trace_reply *r, const char *id, void *arg)
{
    lifecycle *l = arg;
    l->tc = NULL;
    trace_time_end(l);
    if (!id) {
        fail_no_id(l, r, "BKN Trace Core did not store the answer");
        return;
    }
    snprintf(l->answer_ref, sizeof l->answer_ref, "artifact:%s", id);
    post_finish(l);
}

static void on_pre_read(const trace_reply *r, const trace_interaction *it, void *arg)
{
    lifecycle *l = arg;
    l->tc = NULL;
    trace_time_end(l);
    if (!it) {
        fail_trace(l, r);
        return;
    }
    const char *st = it->execution_status;
    const char *ref = it->answer_artifact_ref;
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
    /* Records the answer as a result artifact first. */
    trace_time_begin(l);
    l->tc = trace_store_answer(l->in.trace, l->in.who, lang(l), l->in.request_id, l->interaction_id,
                               json_get_string(l->args, "answer"), it->updated_at, on_artifact, l);
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
    if (!trace_installed(l->in.trace)) {
        fail(l, "feature_not_installed", "BKN Trace Core is not configured for this deployment", 0,
             "", NULL);
        return;
    }
    snprintf(l->interaction_id, sizeof l->interaction_id, "%s", iid);
    if (strcmp(outcome, "completed")) {
        post_finish(l);
        return;
    }
    trace_time_begin(l);
    l->tc = trace_get_interaction(l->in.trace, l->in.who, lang(l), iid, on_pre_read, l);
}

lifecycle *lifecycle_new(const lifecycle_input *in, lifecycle_done_fn done, void *arg)
{
    lifecycle *l = xcalloc(1, sizeof *l);
    l->in = *in;
    l->done = done;
    l->done_arg = arg;
    l->finish = !strcmp(in->name, "bkn_finish_interaction");
    outcome_init(&l->o);
    return l;
}

void lifecycle_run(lifecycle *l)
{
    const lifecycle_input *in = &l->in;
    char err[300];
    if (callcheck_hint_pick(in->invocation_header, "X-OpenBKN-Client-Invocation-Id", in->meta,
                            "openbkn.ai/client-invocation-id", l->invocation, sizeof l->invocation,
                            err, sizeof err) < 0 ||
        callcheck_hint_pick(in->host_key_header, "X-OpenBKN-Host-Conversation-Key", in->meta,
                            "openbkn.ai/host-conversation-key", l->host_key, sizeof l->host_key,
                            err, sizeof err) < 0) {
        fail(l, "lifecycle_hint_invalid", err, 0, "fix_host_lifecycle_hint", NULL);
        return;
    }
    l->args = in->args ? json_clone(in->args) : json_new_object();
    guard_strip_hints(l->args);
    if (l->finish)
        finish(l);
    else
        start(l);
}
