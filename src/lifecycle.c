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

/* The description keyword of a schema property, in lang. */
static void put_desc(buf *out, text_id id, lang_id lang)
{
    const char *t = text_get(id, lang);
    buf_puts(out, "\"description\":");
    json_write_string(out, t, strlen(t));
    buf_putc(out, ',');
}

/* The input schemas, keys in canonical order; every property described in lang. */
static void start_schema(buf *o, lang_id lang)
{
    buf_puts(o,
             "{\"additionalProperties\":false,\"oneOf\":[{\"properties\":{\"conversation_mode\":"
             "{\"const\":\"new\"}},\"not\":{\"required\":[\"conversation_id\"]}},{\"properties\":"
             "{\"conversation_mode\":{\"const\":\"continue\"}},\"required\":["
             "\"conversation_id\"]}],\"properties\":{\"agent_name\":{");
    put_desc(o, TEXT_LC_P_AGENT_NAME, lang);
    buf_puts(o, "\"maxLength\":128,\"minLength\":1,\"type\":\"string\"},\"conversation_id\":{");
    put_desc(o, TEXT_LC_P_CONVERSATION_ID, lang);
    buf_puts(o, "\"minLength\":1,\"type\":\"string\"},\"conversation_mode\":{");
    put_desc(o, TEXT_LC_P_MODE, lang);
    buf_puts(o, "\"enum\":[\"new\",\"continue\"],\"type\":\"string\"},\"question\":{");
    put_desc(o, TEXT_LC_P_QUESTION, lang);
    buf_puts(o, "\"minLength\":1,\"type\":\"string\"}},\"required\":[\"question\",\"agent_name\","
                "\"conversation_mode\"],\"type\":\"object\"}");
}

static void finish_schema(buf *o, lang_id lang)
{
    buf_puts(o,
             "{\"additionalProperties\":false,\"oneOf\":[{\"properties\":{\"outcome\":{\"const\":"
             "\"completed\"}},\"required\":[\"answer\"]},{\"properties\":{\"outcome\":{\"enum\":["
             "\"failed\",\"cancelled\",\"handed_off\"]}}}],\"properties\":{\"answer\":{");
    put_desc(o, TEXT_LC_P_ANSWER, lang);
    buf_puts(o, "\"minLength\":1,\"type\":\"string\"},\"interaction_id\":{");
    put_desc(o, TEXT_LC_P_INTERACTION_ID, lang);
    buf_puts(o, "\"minLength\":1,\"type\":\"string\"},\"outcome\":{");
    put_desc(o, TEXT_LC_P_OUTCOME, lang);
    buf_puts(o, "\"enum\":[\"completed\",\"failed\",\"cancelled\",\"handed_off\"],\"type\":"
                "\"string\"},\"reason\":{");
    put_desc(o, TEXT_LC_P_REASON, lang);
    buf_puts(o, "\"type\":\"string\"}},\"required\":[\"interaction_id\",\"outcome\"],\"type\":"
                "\"object\"}");
}

static const char START_OUTPUT[] =
    "{\"additionalProperties\":false,\"properties\":{\"conversation_id\":{\"type\":\"string\"},"
    "\"execution_status\":{\"enum\":[\"active\"],\"type\":\"string\"},\"interaction_id\":{\"type\":"
    "\"string\"}},\"required\":[\"conversation_id\",\"interaction_id\",\"execution_status\"],"
    "\"type\":\"object\"}";

static const char FINISH_OUTPUT[] =
    "{\"properties\":{\"conversation_id\":{\"type\":\"string\"},\"evidence_status\":{\"type\":"
    "\"string\"},\"execution_status\":{\"type\":\"string\"},\"interaction_id\":{\"type\":"
    "\"string\"}},\"required\":[\"interaction_id\",\"execution_status\"],\"type\":\"object\"}";

/* idempotent: whether repeating the call with the same arguments changes nothing
 * more (a repeated finish replays its outcome; a repeated "new" start opens another
 * conversation). */
static void entry(buf *out, const char *name, text_id title, text_id desc,
                  void (*schema)(buf *, lang_id), const char *output, int order, int idempotent,
                  lang_id lang)
{
    const char *gt = text_get(TEXT_LC_GROUP_TITLE, lang);
    buf_puts(out, "{\"_meta\":{\"openbkn.ai/group\":\"lifecycle\",\"openbkn.ai/group_title\":");
    json_write_string(out, gt, strlen(gt));
    buf_printf(out,
               ",\"openbkn.ai/order\":%d},\"annotations\":{\"destructiveHint\":false,"
               "\"idempotentHint\":%s,\"openWorldHint\":false,\"readOnlyHint\":false},",
               order, idempotent ? "true" : "false");
    buf_puts(out, "\"description\":");
    json_write_string(out, text_get(desc, lang), strlen(text_get(desc, lang)));
    buf_puts(out, ",\"inputSchema\":");
    schema(out, lang);
    buf_printf(out, ",\"name\":\"%s\",\"outputSchema\":%s,\"title\":", name, output);
    json_write_string(out, text_get(title, lang), strlen(text_get(title, lang)));
    buf_putc(out, '}');
}

void lifecycle_list_entries(buf *out, lang_id lang)
{
    entry(out, "bkn_start_interaction", TEXT_LC_START_TITLE, TEXT_LC_START_DESC, start_schema,
          START_OUTPUT, 10, 0, lang);
    buf_putc(out, ',');
    entry(out, "bkn_finish_interaction", TEXT_LC_FINISH_TITLE, TEXT_LC_FINISH_DESC, finish_schema,
          FINISH_OUTPUT, 20, 1, lang);
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

/* fail with the catalogue text id (no format arguments) in the caller's language. */
static void fail_text(lifecycle *l, const char *code, text_id id, int retryable, const char *action,
                      const char *extra_status)
{
    fail(l, code, text_get(id, l->in.lang), retryable, action, extra_status);
}

/* invalid_params (or code) naming the field and the rule: msg was formatted from a
 * catalogue text. */
static void fail_args(lifecycle *l, const char *code, const char *action, const char *msg)
{
    fail(l, code, msg, 0, action, NULL);
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
        fail_text(l, "feature_not_installed", TEXT_LC_TRACE_NOT_INSTALLED, 0, "", NULL);
    } else if (r->status == TRACE_NO_OWNER) {
        fail_text(l, "permission_denied", TEXT_LC_NO_OWNER, 0, "request_authorization", NULL);
    } else {
        fail_text(l, "trace_core_unavailable", TEXT_LC_TRACE_UNAVAILABLE, 1, "retry_later", NULL);
    }
}

/* A reply without the id it should carry: Core answered without it (missing), or
 * the failure itself. */
static void fail_no_id(lifecycle *l, const trace_reply *r, text_id missing)
{
    if (r->status == TRACE_OK)
        fail_text(l, "trace_core_unavailable", missing, 1, "retry_later", NULL);
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

/* The first key of o not in allowed, or NULL. */
static const char *unknown_key(const json_value *o, const char *const *allowed)
{
    for (size_t i = 0; i < json_count(o); i++) {
        const char *k = json_key_at(o, i, NULL);
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= !strcmp(k, *a);
        if (!ok)
            return k;
    }
    return NULL;
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

/* Checks one field of the arguments: a required (when rule is not 0) non-empty
 * string. Returns it, or NULL with msg set (field absent with a rule, or not a
 * non-empty string); an absent optional field is NULL with msg empty. */
static const char *want_str(const json_value *a, const char *key, text_id rule, lang_id lang,
                            char *msg, size_t n)
{
    int bad = 0;
    const char *v = str_member(a, key, &bad);
    msg[0] = '\0';
    if (bad)
        snprintf(msg, n, text_get(TEXT_LC_NOT_STRING, lang), key);
    else if (!v && rule)
        snprintf(msg, n, text_get(TEXT_LC_FIELD_REQUIRED, lang), key, text_get(rule, lang));
    return v;
}

/* The refusal of an argument object with a field outside allowed (msg set), or 0. */
static int refuse_unknown(const json_value *a, const char *tool, const char *const *allowed,
                          lang_id lang, char *msg, size_t n)
{
    const char *k = unknown_key(a, allowed);
    if (!k)
        return 0;
    char list[160] = "";
    for (const char *const *p = allowed; *p; p++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", p == allowed ? "" : ", ",
                 *p);
    char shown[80];
    snprintf(shown, sizeof shown, "%s", k);
    json_utf8_scrub(shown); /* a cut inside a character */
    snprintf(msg, n, text_get(TEXT_LC_UNKNOWN_FIELD, lang), shown, tool, list);
    return 1;
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
        fail_no_id(l, r, TEXT_LC_NO_CONVERSATION);
        return;
    }
    /* The host's mapping decides: a conversation_id or mode of the caller that says
     * otherwise is overridden, not refused (the answer names the mapped id). */
    snprintf(l->conversation_id, sizeof l->conversation_id, "%s", cid);
    create_interaction(l);
}

/* The refusal of start's arguments naming the field and the rule (msg set), or 0.
 * With a host conversation key the mapping decides the conversation, so mode and
 * conversation_id need not agree with each other. */
static int start_refusal(const lifecycle *l, char *msg, size_t n)
{
    static const char *const allowed[] = {"question", "agent_name", "conversation_mode",
                                          "conversation_id", NULL};
    const json_value *a = l->args;
    lang_id lang = l->in.lang;
    if (refuse_unknown(a, "bkn_start_interaction", allowed, lang, msg, n))
        return 1;
    want_str(a, "question", TEXT_LC_P_QUESTION, lang, msg, n);
    if (msg[0])
        return 1;
    const char *agent = want_str(a, "agent_name", TEXT_LC_P_AGENT_NAME, lang, msg, n);
    if (msg[0])
        return 1;
    if (strlen(agent) > 128) {
        snprintf(msg, n, text_get(TEXT_LC_TOO_LONG, lang), "agent_name", 128);
        return 1;
    }
    const char *mode = want_str(a, "conversation_mode", TEXT_LC_P_MODE, lang, msg, n);
    if (msg[0])
        return 1;
    int is_new = !strcmp(mode, "new");
    if (!is_new && strcmp(mode, "continue")) {
        snprintf(msg, n, "%s", text_get(TEXT_LC_MODE_INVALID, lang));
        return 1;
    }
    if (is_new && json_get(a, "conversation_id") && !l->host_key[0]) {
        snprintf(msg, n, "%s", text_get(TEXT_LC_NEW_WITH_ID, lang));
        return 1;
    }
    const char *cid = want_str(a, "conversation_id", 0, lang, msg, n);
    if (msg[0])
        return 1;
    if (!is_new && !cid && !l->host_key[0]) {
        snprintf(msg, n, "%s", text_get(TEXT_LC_CONTINUE_WITHOUT_ID, lang));
        return 1;
    }
    return 0;
}

static void start(lifecycle *l)
{
    char msg[400];
    if (start_refusal(l, msg, sizeof msg)) {
        fail_args(l, "invalid_params", "correct_tool_arguments", msg);
        return;
    }
    const char *mode = json_get_string(l->args, "conversation_mode");
    const char *cid = json_get_string(l->args, "conversation_id");
    if (!trace_installed(l->in.trace)) {
        fail_text(l, "feature_not_installed", TEXT_LC_TRACE_NOT_INSTALLED, 0, "", NULL);
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
        fail_no_id(l, r, TEXT_LC_ANSWER_NOT_STORED);
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
        fail_text(l, "terminal_conflict", TEXT_LC_TERMINAL_CONFLICT, 0,
                  "reuse_authoritative_interaction", st ? st : "unknown");
        return;
    }
    /* Records the answer as a result artifact first. */
    trace_time_begin(l);
    l->tc = trace_store_answer(l->in.trace, l->in.who, lang(l), l->in.request_id, l->interaction_id,
                               json_get_string(l->args, "answer"), it->updated_at, on_artifact, l);
}

/* The refusal of finish's arguments (msg set, *code the error code and *action its
 * required_action), or 0. */
static int finish_refusal(const lifecycle *l, char *msg, size_t n, const char **code,
                          const char **action)
{
    static const char *const allowed[] = {"interaction_id", "outcome", "answer", "reason", NULL};
    const json_value *a = l->args;
    lang_id lang = l->in.lang;
    *code = "invalid_params";
    *action = "correct_tool_arguments";
    if (json_get(a, "bkn_context")) {
        snprintf(msg, n, "%s", text_get(TEXT_LC_FINISH_NESTED_CONTEXT, lang));
        return 1;
    }
    const json_value *ov = json_get(a, "outcome");
    const char *outcome = ov && json_typeof(ov) == JSON_STRING ? json_get_str(ov, NULL) : NULL;
    int known = outcome && (!strcmp(outcome, "completed") || !strcmp(outcome, "failed") ||
                            !strcmp(outcome, "cancelled") || !strcmp(outcome, "handed_off"));
    if (ov && !known) {
        snprintf(msg, n, "%s", text_get(TEXT_LC_OUTCOME_INVALID, lang));
        return 1;
    }
    if (refuse_unknown(a, "bkn_finish_interaction", allowed, lang, msg, n))
        return 1;
    want_str(a, "interaction_id", TEXT_LC_P_INTERACTION_ID, lang, msg, n);
    if (msg[0])
        return 1;
    if (!outcome) {
        snprintf(msg, n, text_get(TEXT_LC_FIELD_REQUIRED, lang), "outcome",
                 text_get(TEXT_LC_P_OUTCOME, lang));
        return 1;
    }
    const json_value *reason = json_get(a, "reason");
    if (reason && json_typeof(reason) != JSON_STRING) {
        snprintf(msg, n, text_get(TEXT_LC_NOT_TEXT, lang), "reason");
        return 1;
    }
    want_str(a, "answer", 0, lang, msg, n);
    if (!strcmp(outcome, "completed") && (msg[0] || !json_get(a, "answer"))) {
        /* The closure of a completed interaction is its answer. */
        *code = "closure_manifest_invalid";
        *action = "provide_answer";
        snprintf(msg, n, "%s", text_get(TEXT_LC_ANSWER_REQUIRED, lang));
        return 1;
    }
    return msg[0] != '\0';
}

static void finish(lifecycle *l)
{
    char msg[400];
    const char *code, *action;
    if (finish_refusal(l, msg, sizeof msg, &code, &action)) {
        fail_args(l, code, action, msg);
        return;
    }
    const char *outcome = json_get_string(l->args, "outcome");
    const char *iid = json_get_string(l->args, "interaction_id");
    if (!trace_installed(l->in.trace)) {
        fail_text(l, "feature_not_installed", TEXT_LC_TRACE_NOT_INSTALLED, 0, "", NULL);
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
                            "openbkn.ai/client-invocation-id", in->lang, l->invocation,
                            sizeof l->invocation, err, sizeof err) < 0 ||
        callcheck_hint_pick(in->host_key_header, "X-OpenBKN-Host-Conversation-Key", in->meta,
                            "openbkn.ai/host-conversation-key", in->lang, l->host_key,
                            sizeof l->host_key, err, sizeof err) < 0) {
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
