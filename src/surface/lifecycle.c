/* lifecycle: bkn_start_interaction and bkn_finish_interaction (see lifecycle.h). */
#include "lifecycle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "callcheck.h"
#include "guard.h"
#include "log.h"

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

/* The request this lifecycle call serves, as its Trace Core calls carry it. */
static const trace_origin *origin(const lifecycle *l, trace_origin *o)
{
    o->lang = lang(l);
    o->request_id = l->in.request_id;
    o->traceparent = l->in.traceparent;
    o->tracestate = l->in.tracestate;
    o->baggage = l->in.baggage;
    return o;
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

void lifecycle_list_entries(buf *out, const tools_gen *g, lang_id lang)
{
    if (g)
        buf_puts(out, tools_gen_lifecycle_json(g, lang));
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
    guard_write_error_status(&l->o.json, l->in.lang, code, message, retryable, action,
                             extra_status);
    l->o.is_error = 1;
    lc_send(l, code);
}

/* fail with the catalogue text id (no format arguments) in the caller's language. */
static void fail_text(lifecycle *l, const char *code, text_id id, int retryable, const char *action,
                      const char *extra_status)
{
    fail(l, code, text_get(id, l->in.lang), retryable, action, extra_status);
}

/* A Trace Core outcome that is not a success: the envelope as is, or a mapped code. */
static void fail_trace(lifecycle *l, const trace_reply *r)
{
    if (r->status == TRACE_API_ERROR && r->body) {
        buf_reset(&l->o.json);
        guard_write_api_error(&l->o.json, r->body, l->in.lang, 1);
        l->o.is_error = 1;
        lc_send(l, r->error_code && *r->error_code ? r->error_code : "trace_error");
    } else if (r->status == TRACE_NOT_INSTALLED) {
        fail_text(l, "feature_not_installed", TEXT_LC_TRACE_NOT_INSTALLED, 0,
                  "contact_administrator", NULL);
    } else if (r->status == TRACE_NO_OWNER) {
        fail_text(l, "permission_denied", TEXT_LC_NO_OWNER, 0, "request_permission", NULL);
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

/* ---- arguments ---- */

/* Checks the arguments against the tool's declaration (lua/lifecycle.lua): 0 when they
 * pass, else -1 after replying with the refusal. */
static int refuse_arguments(lifecycle *l)
{
    json_value *r = NULL;
    char err[300];
    int rc = l->in.gen ? tools_gen_lifecycle_check(l->in.gen, l->in.name, l->args, l->in.lang,
                                                   l->host_key[0] != '\0', &r, err, sizeof err)
                       : -1;
    if (rc == 0)
        return 0;
    if (rc < 0) {
        log_line *lg = log_begin(LOG_ERROR, "lifecycle arguments not checked");
        log_str(lg, "tool", l->in.name);
        log_str(lg, "error", l->in.gen ? err : "no tool generation");
        log_end(lg);
        const char *name, *desc, *sol;
        text_status(500, l->in.lang, &name, &desc, &sol);
        fail(l, "Public.InternalServerError", desc, 0, "contact_administrator", NULL);
        return -1;
    }
    const char *code = json_get_string(r, "code");
    const char *message = json_get_string(r, "message");
    guard_error ge = {.lang = l->in.lang,
                      .code = code ? code : "invalid_params",
                      .description = message ? message : "",
                      .details = json_get(r, "details"),
                      .required_action = json_get_string(r, "required_action")};
    buf_reset(&l->o.json);
    guard_write_object(&l->o.json, &ge);
    l->o.is_error = 1;
    lc_send(l, code ? code : "invalid_params");
    json_free(r);
    return -1;
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
    l->tc = trace_create_interaction(l->in.trace, l->in.who, origin(l, &(trace_origin){0}),
                                     l->conversation_id, key, question, agent,
                                     on_interaction_created, l);
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

static void start(lifecycle *l)
{
    const char *mode = json_get_string(l->args, "conversation_mode");
    const char *cid = json_get_string(l->args, "conversation_id");
    if (!trace_installed(l->in.trace)) {
        fail_text(l, "feature_not_installed", TEXT_LC_TRACE_NOT_INSTALLED, 0,
                  "contact_administrator", NULL);
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
    l->tc = trace_ensure_conversation(l->in.trace, l->in.who, origin(l, &(trace_origin){0}), ext,
                                      on_conversation, l);
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
    l->tc = trace_finish_interaction(l->in.trace, l->in.who, origin(l, &(trace_origin){0}),
                                     l->interaction_id, outcome, key, l->answer_ref, reason,
                                     on_finished, l);
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
    l->tc = trace_store_answer(l->in.trace, l->in.who, origin(l, &(trace_origin){0}),
                               l->in.request_id, l->interaction_id,
                               json_get_string(l->args, "answer"), it->updated_at, on_artifact, l);
}

static void finish(lifecycle *l)
{
    const char *outcome = json_get_string(l->args, "outcome");
    const char *iid = json_get_string(l->args, "interaction_id");
    if (!trace_installed(l->in.trace)) {
        fail_text(l, "feature_not_installed", TEXT_LC_TRACE_NOT_INSTALLED, 0,
                  "contact_administrator", NULL);
        return;
    }
    snprintf(l->interaction_id, sizeof l->interaction_id, "%s", iid);
    if (strcmp(outcome, "completed")) {
        post_finish(l);
        return;
    }
    trace_time_begin(l);
    l->tc = trace_get_interaction(l->in.trace, l->in.who, origin(l, &(trace_origin){0}), iid,
                                  on_pre_read, l);
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
    if (refuse_arguments(l) < 0)
        return;
    if (l->finish)
        finish(l);
    else
        start(l);
}
