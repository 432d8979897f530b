/* flow: one business call's sequence (see flow.h). */
#include "flow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "callcheck.h"
#include "errenv.h"
#include "guard.h"
#include "log.h"
#include "mcp_msg.h"

struct flow {
    flow_input in; /* pointers borrowed (flow.h) */
    flow_done_fn done;
    void *done_arg;
    int64_t trace_t0;
    /* The arguments minus bkn_context, the hints and response_format: in->args itself
     * (borrowed: it lives as long as the request) when it has none of them, else
     * args_copy, an edited copy (owned). */
    const json_value *args;
    json_value *args_copy;
    /* The tool that actually runs and its arguments, which key the idempotency record
     * and the Operation: the tool itself, or for execute_tool of a Context Loader tool
     * (or a skill) that tool and the arguments it gets - a retry may move between a
     * direct call and execute_tool, and the name and tool_id forms are one call. */
    const char *run_name;
    const json_value *run_args;
    json_value *run_args_own;
    int run_toon; /* the response format as the tool that runs picks it */
    buf args_canon; /* canonical text of run_args, once written (args_canon()) */
    bkn_context ctx;
    char kn_id[129];
    char invocation[260];
    char idem_key[65];
    char input_hash[65];
    int idem_owned;
    int needs_context;
    int record; /* an Operation is being recorded */
    char lease_token[160];
    json_value *lease_epoch;
    int lease_cached;   /* lease_token/epoch came from the lease cache, not a lookup */
    char lease_key[65]; /* the lease cache key of this call, once computed */
    long attempt;
    char trace_id[33], span_id[17];
    trace_call *tc;
    idem_wait *iw;
    call *call;
    json_value *error_value; /* the tool's error object as a tree, for the attempt */
    call_outcome o;
    /* detached (flow_cancel with a claim): the borrowed input, copied (owned; NULL
     * while the caller is there) */
    struct flow_own *own;
    flow *dnext, **dprev; /* in g_detached */
};

/* What a detached flow copies of its borrowed input. Apart from the flow, which every
 * call allocates and clears: glibc clears more than 2 kB with `rep stosb`, which
 * callgrind counts once per byte (3.2 k instructions a call with the principal
 * inside). */
struct flow_own {
    principal who;
    char *strs[10];
    json_value *query, *request, *context;
};
_Static_assert(sizeof(struct flow) <= 2048, "struct flow is calloc'd per call: keep it <= 2 kB");

static const char *lang(const flow *f)
{
    return lang_tag(f->in.env.lang);
}

/* The request this flow serves, as its Trace Core calls carry it. */
static const trace_origin *origin(const flow *f, trace_origin *o)
{
    const call_env *e = &f->in.env;
    o->lang = lang(f);
    o->request_id = e->request_id;
    o->traceparent = e->traceparent;
    o->tracestate = e->tracestate;
    o->baggage = e->baggage;
    return o;
}

/* Trace Core wait time, for the access log (durations split by upstream, Trace
 * Core and Lua). */
static void trace_time_begin(flow *f)
{
    f->trace_t0 = now_mono_ms();
}

static void trace_time_end(flow *f)
{
    if (f->trace_t0)
        f->o.trace_ms += now_mono_ms() - f->trace_t0;
    f->trace_t0 = 0;
}

static void run_tool(flow *f);

/* ---- ending ---- */

/* The detached flows of this process (flow.h). */
static flow *g_detached;
static size_t g_n_detached;

static void flow_free(flow *f)
{
    if (f->own) {
        *f->dprev = f->dnext;
        if (f->dnext)
            f->dnext->dprev = f->dprev;
        g_n_detached--;
        for (size_t i = 0; i < sizeof f->own->strs / sizeof *f->own->strs; i++)
            free(f->own->strs[i]);
        json_free(f->own->query);
        json_free(f->own->request);
        json_free(f->own->context);
        free(f->own);
        if (f->in.gen)
            tools_gen_release(f->in.gen);
    }
    if (f->tc)
        trace_cancel(f->tc);
    if (f->iw)
        idem_cancel(f->iw);
    if (f->call)
        call_cancel(f->call);
    if (f->idem_owned)
        idem_abort(f->in.idem, f->idem_key);
    json_free(f->args_copy);
    json_free(f->run_args_own);
    buf_free(&f->args_canon);
    json_free(f->lease_epoch);
    json_free(f->error_value);
    guard_context_free(&f->ctx);
    outcome_free(&f->o);
    free(f);
}

/* A copy owned by the flow (freed with it), or NULL. */
static const char *own_str(flow *f, size_t slot, const char *s)
{
    f->own->strs[slot] = s ? xstrdup(s) : NULL;
    return f->own->strs[slot];
}

/* The caller left while the flow holds its claim: make the flow self-contained
 * (flow.h) and let it run on. */
static void detach(flow *f)
{
    call_env *e = &f->in.env;
    f->own = xcalloc(1, sizeof *f->own);
    f->dnext = g_detached;
    if (g_detached)
        g_detached->dprev = &f->dnext;
    f->dprev = &g_detached;
    g_detached = f;
    g_n_detached++;
    f->done = NULL;
    f->own->who = *e->who;
    e->who = &f->own->who;
    e->request_id = own_str(f, 0, e->request_id);
    e->traceparent = own_str(f, 1, e->traceparent);
    e->kn_id_header = own_str(f, 2, e->kn_id_header);
    e->surface = own_str(f, 3, e->surface);
    e->caller_token = own_str(f, 4, e->caller_token);
    f->in.format = own_str(f, 5, f->in.format);
    f->in.declined_code = own_str(f, 6, f->in.declined_code);
    f->in.declined_message = own_str(f, 7, f->in.declined_message);
    e->tracestate = own_str(f, 8, e->tracestate);
    e->baggage = own_str(f, 9, e->baggage);
    e->query = f->own->query = e->query ? json_clone(e->query) : NULL;
    e->request = f->own->request = e->request ? json_clone(e->request) : NULL;
    e->bkn_context = f->own->context = e->bkn_context ? json_clone(e->bkn_context) : NULL;
    if (!f->args_copy)
        f->args = f->args_copy = f->args ? json_clone(f->args) : json_new_object();
    f->in.args = f->in.meta = NULL;
    f->in.invocation_header = NULL;
    if (f->in.gen)
        tools_gen_ref(f->in.gen);
}

size_t flow_detached(void)
{
    return g_n_detached;
}

void flow_drop_detached(void)
{
    while (g_detached) {
        flow *f = g_detached;
        f->idem_owned = 0; /* the claim stays: it expires on its own */
        flow_free(f);
    }
}

void flow_cancel(flow *f)
{
    if (f->idem_owned && !f->own) {
        detach(f);
        return;
    }
    flow_free(f);
}

/* Hands the outcome over (storing it for replays when we own an idempotency key
 * and store_it) and frees the flow. */
static void finish(flow *f, int store_it)
{
    if (f->idem_owned) {
        if (store_it) {
            buf rec = BUF_INIT;
            if (!f->o.json_quoted.len)
                outcome_quote(&f->o); /* escaped once: the record and the MCP text block */
            outcome_encode(&rec, &f->o);
            idem_finish(f->in.idem, f->idem_key, f->input_hash, rec.data, rec.len);
            buf_free(&rec);
        } else {
            idem_abort(f->in.idem, f->idem_key);
        }
        f->idem_owned = 0;
    }
    if (!f->o.code[0])
        str_copy(f->o.code, sizeof f->o.code, f->o.is_error ? "tool_error" : "ok");
    if (f->done)
        f->done(&f->o, f->done_arg);
    flow_free(f);
}

/* The catalogue text id in the call's language. */
#define TX(f, id) text_get(TEXT_##id, (f)->in.env.lang)

/* A refusal in the one error object (before any downstream call). */
static void refuse(flow *f, int rest_status, const char *code, const char *message, int retryable,
                   const char *mcp_action, const char *rest_action)
{
    outcome_refuse(&f->o, rest_status, code, message, retryable,
                   f->in.mcp ? mcp_action : rest_action, f->in.env.lang);
    finish(f, 0);
}

/* REST status of a Trace Core error code. */
static int rest_status_of(const char *code)
{
    static const char *const s400[] = {"conversation_required", "interaction_required",
                                       "operation_required",    "invalid_business_context",
                                       "invalid_business_ref",  "lifecycle_hint_invalid"};
    static const char *const s404[] = {"conversation_not_found", "resource_not_disclosed"};
    static const char *const s403[] = {"conversation_owner_mismatch", "permission_denied"};
    for (size_t i = 0; i < sizeof s400 / sizeof *s400; i++)
        if (!strcmp(code, s400[i]))
            return 400;
    for (size_t i = 0; i < sizeof s404 / sizeof *s404; i++)
        if (!strcmp(code, s404[i]))
            return 404;
    for (size_t i = 0; i < sizeof s403 / sizeof *s403; i++)
        if (!strcmp(code, s403[i]))
            return 403;
    if (!strcmp(code, "trace_core_unavailable") || !strcmp(code, "feature_not_installed"))
        return 503;
    return 409;
}

/* A Trace Core API error passed on: its envelope under the gateway's retry rules
 * (guard_write_api_error); on REST the status derived from its code. */
static void refuse_api(flow *f, const trace_reply *r)
{
    const char *code = r->error_code && *r->error_code ? r->error_code : "internal_error";
    str_copy(f->o.code, sizeof f->o.code, code);
    buf_reset(&f->o.json);
    guard_write_api_error(&f->o.json, r->body, f->in.env.lang, f->in.mcp);
    f->o.is_error = 1;
    f->o.status = rest_status_of(code);
    finish(f, 0);
}

static void refuse_unavailable(flow *f)
{
    refuse(f, 503, "trace_core_unavailable", TX(f, FLOW_TRACE_UNAVAILABLE), 1, "retry_later",
           "retry_later");
}

/* ---- keys ---- */

/* The protocol a call's keys are scoped by: the idempotency record and the Trace
 * Core Operation key use the same one, so /mcp, /mcp-compact and /mcp/ptc share one
 * scope (a retry that moves between them replays) and REST has its own. */
static const char *idem_scope(const flow *f)
{
    return f->in.mcp ? "mcp" : "rest";
}

/* Appends ,"key":<s as a JSON string> (first: no comma). */
static void put_str(buf *out, int first, const char *key, const char *v)
{
    buf_puts(out, first ? "\"" : ",\"");
    buf_puts(out, key);
    buf_puts(out, "\":");
    json_write_string(out, v, strlen(v));
}

void flow_operation_key(const char *conversation_id, const char *interaction_id,
                        const char *surface, const char *tool, const char *invocation_id,
                        const char *request_id, const char *input_hash, char out[40])
{
    /* The canonical JSON of {tool, surface, interaction_id, identity,
     * conversation_id}, written as text in its member order. */
    buf id = BUF_INIT, text = BUF_INIT;
    if (invocation_id && *invocation_id) {
        char h[65];
        sha256_hex(invocation_id, strlen(invocation_id), h);
        buf_puts(&id, "inv:");
        buf_puts(&id, h);
    } else {
        buf_puts(&id, "req:");
        buf_puts(&id, request_id);
        buf_putc(&id, ':');
        buf_puts(&id, input_hash);
    }
    buf_putc(&text, '{');
    put_str(&text, 1, "conversation_id", conversation_id);
    put_str(&text, 0, "identity", id.data);
    put_str(&text, 0, "interaction_id", interaction_id);
    put_str(&text, 0, "surface", surface);
    put_str(&text, 0, "tool", tool);
    buf_putc(&text, '}');
    char h[65];
    sha256_hex(text.data, text.len, h);
    memcpy(out, "op_", 3);
    memcpy(out + 3, h, 32);
    out[35] = '\0';
    buf_free(&text);
    buf_free(&id);
}

void flow_input_hash(const char *args_canon, size_t len, const bkn_context *ctx, int toon,
                     const json_value *query, char out[65])
{
    /* The canonical JSON of {arguments, bkn_context, response_format, query}, written
     * as text in its member order around the arguments' canonical text. */
    buf t = BUF_INIT;
    buf_puts(&t, "{\"arguments\":");
    buf_append(&t, args_canon, len);
    if (ctx && !ctx->adhoc) {
        buf_puts(&t, ",\"bkn_context\":{");
        if (ctx->causation_event_ids) {
            buf_puts(&t, "\"causation_event_ids\":");
            json_write(&t, ctx->causation_event_ids, 1);
            buf_putc(&t, ',');
        }
        put_str(&t, 1, "conversation_id", ctx->conversation_id);
        put_str(&t, 0, "interaction_id", ctx->interaction_id);
        if (ctx->parent_operation_id[0])
            put_str(&t, 0, "parent_operation_id", ctx->parent_operation_id);
        buf_putc(&t, '}');
    }
    if (query) {
        buf_puts(&t, ",\"query\":");
        json_write(&t, query, 1);
    }
    buf_puts(&t, toon ? ",\"response_format\":\"toon\"}" : ",\"response_format\":\"json\"}");
    sha256_hex(t.data, t.len, out);
    buf_free(&t);
}

/* The arguments' canonical text, written once (the input hash and the Operation's
 * input both take it). */
static const buf *args_canon(flow *f)
{
    if (!f->args_canon.data)
        json_write(&f->args_canon, f->run_args, 1);
    return &f->args_canon;
}

/* The input hash: canonical JSON of the normalized input (the arguments minus
 * bkn_context, with the context's ids). Computed on first use only: an ad hoc call
 * without an idempotency hint never needs it. */
static const char *input_hash(flow *f)
{
    if (f->input_hash[0])
        return f->input_hash;
    const buf *a = args_canon(f);
    flow_input_hash(a->data, a->len, &f->ctx, f->run_toon, f->in.env.query, f->input_hash);
    return f->input_hash;
}

/* ---- the tool and its attempt ---- */

static void send_attempt(flow *f, int later);

static void on_finalized(const trace_reply *r, const trace_receipt *rc, void *arg)
{
    flow *f = arg;
    f->tc = NULL;
    trace_time_end(f);
    if (r->status == TRACE_OK && r->body) {
        if (rc) { /* Core's text, put into the answer as it is */
            buf_reset(&f->o.receipt_json);
            buf_append(&f->o.receipt_json, rc->json, rc->len);
            if (rc->receipt_id)
                str_copy(f->o.receipt_id, sizeof f->o.receipt_id, rc->receipt_id);
        }
    } else {
        /* The business result stands: the answer says its receipt is still pending,
         * and the finalization is sent again in the background until Core takes it. */
        log_line *l = log_begin(LOG_WARN, "operation finalize failed");
        log_str(l, "request_id", f->in.env.request_id);
        log_str(l, "operation_id", f->o.operation_id);
        log_int(l, "trace_status", (int)r->status);
        log_end(l);
        f->o.receipt_pending = r->status == TRACE_UNAVAILABLE;
        if (f->o.receipt_pending)
            send_attempt(f, 1);
    }
    finish(f, 1);
}

/* Completes (or fails) the attempt with the call's output: on MCP the
 * CallToolResult without receipt, written from the result's text (escaped once, for
 * the reply as well); on REST the result (or error) value; later: in the background,
 * without a callback (trace_finish_attempt_later). */
static void send_attempt(flow *f, int later)
{
    json_value *payload = NULL, *parsed = NULL;
    const buf *text = &f->o.json;
    buf out = BUF_INIT;
    trace_attempt_in a;
    memset(&a, 0, sizeof a);
    if (f->in.mcp) {
        outcome_quote(&f->o);
        mcp_write_attempt_output(&out, &f->o);
        a.payload_json = out.data;
        a.payload_len = out.len;
    } else if (!f->o.is_error && f->o.result) {
        payload = f->o.result; /* borrowed */
    } else if (f->o.is_error && f->error_value) {
        payload = f->error_value; /* borrowed */
    } else {
        /* a downstream body passed through as text (or the incident envelope) */
        payload = parsed = json_parse(text->data ? text->data : "", text->len, NULL, NULL, 0);
    }
    a.operation_id = f->o.operation_id;
    a.attempt = f->attempt;
    a.failed = f->o.is_error;
    a.receipt_id = f->o.receipt_id;
    a.request_id = f->in.env.request_id;
    a.trace_id = f->trace_id;
    a.span_id = f->span_id;
    json_value *refs = outcome_attempt_refs(f->in.ti->name, f->kn_id, f->args, f->o.result,
                                            f->o.is_error ? NULL : text, f->ctx.business_refs);
    a.business_refs = refs ? refs : f->ctx.business_refs;
    a.payload = payload;
    if (later) {
        trace_finish_attempt_later(f->in.trace, f->in.env.who, origin(f, &(trace_origin){0}), &a);
    } else {
        trace_time_begin(f);
        f->tc = trace_finish_attempt(f->in.trace, f->in.env.who, origin(f, &(trace_origin){0}), &a,
                                     on_finalized, f);
    }
    buf_free(&out);
    json_free(parsed);
    json_free(refs);
}

static void on_call_done(const call_result *res, void *arg)
{
    flow *f = arg;
    call_outcome *o = &f->o;
    f->call = NULL;
    o->lua_ms = res->lua_ms;
    o->upstream_ms = res->upstream_ms;
    o->is_error = res->is_error;
    o->status = res->status ? res->status : (res->is_error ? 500 : 200);
    /* the result's text is taken, not copied: the call frees the outcome's old buffer */
    buf mine = o->json;
    o->json = *res->body_buf;
    *res->body_buf = mine;
    buf_reset(&o->json_quoted);
    if (o->toon && !res->is_error && res->toon)
        buf_append(&o->toon_text, res->toon, res->toon_len);
    if (res->is_error)
        f->error_value = res->value;
    else
        o->result = res->value;
    str_copy(o->code, sizeof o->code,
             res->is_error ? (res->error_code ? res->error_code : "tool_error") : "ok");
    if (f->record)
        send_attempt(f, 0);
    else
        finish(f, 1);
}

static void run_tool(flow *f)
{
    if (f->in.declined_code) {
        /* Not run: the answer (and the attempt, when recorded) says the person said no. */
        outcome_refuse(&f->o, 409, f->in.declined_code, f->in.declined_message, 0,
                       "respect_decline", f->in.env.lang);
        if (f->record)
            send_attempt(f, 0);
        else
            finish(f, 1);
        return;
    }
    call_env env = f->in.env;
    /* PTC: the sandbox's calls name this run as their parent operation */
    env.operation_id = f->o.operation_id[0] ? f->o.operation_id : NULL;
    env.toon = f->o.toon;
    /* REST's attempt payload is the result's value; MCP's is written from its text (a
     * TOON answer is rendered from the tree, which the call then builds anyway) */
    env.want_value = f->record && (!f->in.mcp || f->o.toon);
    f->call = call_start(f->in.gen, f->in.ti, f->args, &env, on_call_done, f);
}

/* ---- Trace Core steps ---- */

static void on_probe(probe_verdict v, void *arg)
{
    flow *f = arg;
    f->tc = NULL;
    trace_time_end(f);
    if (v == PROBE_DOWN) {
        /* Verified outage: admitted, unrecorded, and the response says so. */
        f->o.unrecorded = 1;
        f->record = 0;
        run_tool(f);
    } else {
        refuse_unavailable(f);
    }
}

static void probe(flow *f)
{
    trace_note_failure(f->in.trace);
    trace_time_begin(f);
    f->tc = trace_probe(f->in.trace, on_probe, f);
}

/* A recording step's Trace Core reply that is not a success with a body: probe on
 * unavailability, pass the API envelope on, else the retryable unavailable error. */
static void reply_failed(flow *f, const trace_reply *r)
{
    if (r->status == TRACE_UNAVAILABLE)
        probe(f);
    else if (r->status == TRACE_API_ERROR)
        refuse_api(f, r);
    else
        refuse_unavailable(f);
}

static void on_interaction(const trace_reply *r, const trace_interaction *it, void *arg);

static void lookup_interaction(flow *f)
{
    trace_time_begin(f);
    f->tc = trace_get_interaction(f->in.trace, f->in.env.who, origin(f, &(trace_origin){0}),
                                  f->ctx.interaction_id, on_interaction, f);
}

static int abandoned(const flow *f, const json_value *operation);

static void on_ensure(const trace_reply *r, const trace_operation *op, void *arg)
{
    flow *f = arg;
    f->tc = NULL;
    trace_time_end(f);
    if (f->lease_cached && r->status == TRACE_API_ERROR) {
        /* refused with a reused lease: forget it and decide on a fresh lookup */
        trace_lease_drop(f->in.trace, f->lease_key);
        f->lease_cached = 0;
        lookup_interaction(f);
        return;
    }
    if (r->status != TRACE_OK || !r->body) {
        reply_failed(f, r);
        return;
    }
    if (!op) {
        refuse_unavailable(f);
        return;
    }
    str_copy(f->o.operation_id, sizeof f->o.operation_id, op->operation_id);
    str_copy(f->o.receipt_id, sizeof f->o.receipt_id, op->receipt_id);
    f->attempt = op->attempt;
    if (op->execute) {
        run_tool(f);
        return;
    }
    /* Another claimant ran (or runs) this operation. */
    const char *st = op->receipt_status;
    if ((!st || !strcmp(st, "pending")) && f->idem_owned && abandoned(f, op->operation)) {
        /* We hold the claim, so its first owner does not, and it was started longer
         * ago than any owner can run: nobody will ever finish it. */
        outcome_unknown(&f->o, op->operation, op->receipt, f->in.ti->name,
                        !strcmp(f->in.ti->kind, "read"), f->in.env.lang, f->in.mcp);
        finish(f, 0);
        return;
    }
    if (!st || !strcmp(st, "pending")) {
        refuse(f, 409, "receipt_pending", TX(f, FLOW_RECEIPT_PENDING), 1,
               "retry_later", "retry_later");
        return;
    }
    /* Terminal, and our idempotency record of it is gone: say so, never a stub. */
    outcome_already_executed(&f->o, op->operation, op->receipt, f->run_name,
                             !strcmp(f->in.ti->kind, "read"), f->in.env.lang, f->in.mcp);
    finish(f, 0);
}

/* Milliseconds since the epoch of an RFC 3339 UTC time ("2026-01-02T03:04:05.678Z"),
 * or -1 when s has another form. */
static int64_t utc_ms(const char *s)
{
    int y, mo, d, h, mi, sec, n = 0;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
        return -1;
    int64_t ms = 0;
    const char *p = s + n;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3)
                ms = ms * 10 + (*p - '0');
        for (; digits < 3; digits++)
            ms *= 10;
    }
    if (*p != 'Z' || mo < 1 || mo > 12)
        return -1;
    /* days from the civil date (proleptic Gregorian) */
    int64_t yy = mo <= 2 ? y - 1 : y;
    int64_t era = (yy >= 0 ? yy : yy - 399) / 400;
    int64_t yoe = yy - era * 400;
    int64_t doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = era * 146097 + doe - 719468;
    return ((days * 24 + h) * 60 + mi) * 60000 + (int64_t)sec * 1000 + ms;
}

/* 1 when the Operation was created longer ago than an idempotency claim lives (so
 * no owner can still be running it); 0 when younger or of unknown age. */
static int abandoned(const flow *f, const json_value *operation)
{
    int64_t t = utc_ms(operation ? json_get_string(operation, "created_at") : NULL);
    return t >= 0 && now_wall_ms() - t >= idem_claim_ttl_ms(f->in.idem);
}

static void ensure_operation(flow *f)
{
    char op_key[40];
    flow_operation_key(f->ctx.conversation_id, f->ctx.interaction_id, idem_scope(f), f->run_name,
                       f->invocation, f->in.env.request_id, input_hash(f), op_key);
    trace_ensure_in e;
    memset(&e, 0, sizeof e);
    e.conversation_id = f->ctx.conversation_id;
    e.interaction_id = f->ctx.interaction_id;
    e.operation_key = op_key;
    e.tool_name = f->run_name;
    e.protocol = f->in.mcp ? "mcp" : "sdk";
    e.input = f->run_args;
    e.input_json = args_canon(f)->data;
    e.input_len = f->args_canon.len;
    e.lease_token = f->lease_token;
    e.lease_epoch = f->lease_epoch;
    e.parent_operation_id = f->ctx.parent_operation_id;
    e.causation_event_ids = f->ctx.causation_event_ids;
    trace_time_begin(f);
    f->tc = trace_ensure_operation(f->in.trace, f->in.env.who, origin(f, &(trace_origin){0}), &e,
                                   on_ensure, f);
}

static void on_interaction(const trace_reply *r, const trace_interaction *it, void *arg)
{
    flow *f = arg;
    f->tc = NULL;
    trace_time_end(f);
    if (!it) {
        reply_failed(f, r);
        return;
    }
    const char *cid = it->conversation_id;
    const char *st = it->execution_status;
    if (!cid || strcmp(cid, f->ctx.conversation_id)) {
        refuse(f, 400, "interaction_required", TX(f, FLOW_INTERACTION_FOREIGN), 0,
               "bkn_start_interaction", "start_interaction");
        return;
    }
    if (!st || strcmp(st, "active")) {
        char m[320];
        snprintf(m, sizeof m, TX(f, FLOW_INTERACTION_TERMINAL), st ? st : "not active");
        refuse(f, 409, "interaction_terminal", m, 0, "bkn_start_interaction", "start_interaction");
        return;
    }
    str_copy(f->lease_token, sizeof f->lease_token, it->lease_token ? it->lease_token : "");
    json_free(f->lease_epoch);
    f->lease_epoch = it->lease_epoch ? json_clone(it->lease_epoch) : NULL;
    trace_lease_put(f->in.trace, f->lease_key, cid, f->lease_token, f->lease_epoch);
    ensure_operation(f);
}

static void begin_record(flow *f)
{
    const char *tp = f->in.env.traceparent;
    f->record = 1;
    if (tp && tp[0]) {
        memcpy(f->trace_id, tp + 3, 32);
        f->trace_id[32] = '\0';
        memcpy(f->span_id, tp + 36, 16);
        f->span_id[16] = '\0';
    } else {
        trace_synthetic_ids(f->in.env.request_id, f->trace_id, f->span_id);
    }
    trace_lease_key(f->in.env.who->key, f->ctx.interaction_id, f->lease_key);
    json_value *epoch = NULL;
    if (trace_lease_get(f->in.trace, f->lease_key, f->ctx.conversation_id, f->lease_token,
                        sizeof f->lease_token, &epoch)) {
        json_free(f->lease_epoch);
        f->lease_epoch = epoch;
        f->lease_cached = 1;
        ensure_operation(f);
    } else {
        lookup_interaction(f);
    }
}

static void refuse_context_required(flow *f)
{
    refuse(f, 400, "conversation_required", TX(f, FLOW_CONVERSATION_REQUIRED), 0,
           "bkn_start_interaction", "create_conversation");
}

/* An ad hoc call where a context is required, after Trace Core failures. */
static void on_adhoc_probe(probe_verdict v, void *arg)
{
    flow *f = arg;
    f->tc = NULL;
    trace_time_end(f);
    if (v == PROBE_DOWN) {
        f->o.unrecorded = 1; /* verified outage: admitted, unrecorded */
        run_tool(f);
    } else {
        refuse_context_required(f);
    }
}

static void on_policy(capture_state st, void *arg)
{
    flow *f = arg;
    f->tc = NULL;
    trace_time_end(f);
    if (st == CAPTURE_UNKNOWN) {
        probe(f);
        return;
    }
    if (st == CAPTURE_DISABLED) {
        run_tool(f); /* with or without context: admitted, nothing recorded */
        return;
    }
    if (f->ctx.adhoc) {
        if (f->needs_context) {
            /* Required only while Trace Core is available; a cached policy says
             * nothing about that. After recent failures (breaker not closed) the probe
             * verdict, usually cached, decides. */
            trace_stats_t ts;
            trace_stats(f->in.trace, &ts);
            if (ts.breaker != TRACE_BREAKER_CLOSED) {
                trace_time_begin(f);
                f->tc = trace_probe(f->in.trace, on_adhoc_probe, f);
                return;
            }
            refuse_context_required(f);
            return;
        }
        run_tool(f); /* an eligible ad hoc call: no Trace records */
        return;
    }
    begin_record(f);
}

static void decide_trace(flow *f)
{
    if (!trace_installed(f->in.trace)) {
        if (f->needs_context || !f->ctx.adhoc) {
            refuse(f, 503, "feature_not_installed", TX(f, FLOW_TRACE_NOT_INSTALLED), 0,
                   "contact_administrator", "contact_administrator");
            return;
        }
        run_tool(f);
        return;
    }
    if (f->ctx.adhoc && !f->needs_context) {
        run_tool(f); /* REST reads and declared routes may always go ad hoc */
        return;
    }
    trace_time_begin(f);
    f->tc = trace_capture_policy(f->in.trace, f->in.env.who, on_policy, f);
}

/* ---- idempotency ---- */

static void replay(flow *f, const char *record, size_t len)
{
    int toon = f->o.toon;
    if (outcome_decode(record, len, &f->o) < 0) {
        f->o.toon = toon;
        refuse(f, 503, "state_store_unavailable", TX(f, FLOW_RECORD_UNREADABLE), 1, "retry_later",
               "retry_later");
        return;
    }
    /* under this id the stored error is all a retry can ever get */
    outcome_replayed_error(&f->o, !strcmp(f->in.ti->kind, "read"), f->in.env.lang);
    snprintf(f->o.code, sizeof f->o.code, "replay");
    finish(f, 0);
}

static void on_idem(idem_decision d, const char *response, size_t len, void *arg)
{
    flow *f = arg;
    f->iw = NULL;
    switch (d) {
    case IDEM_RUN:
        f->idem_owned = 1;
        decide_trace(f);
        return;
    case IDEM_REPLAY:
        replay(f, response, len);
        return;
    case IDEM_CONFLICT:
        refuse(f, 409, "idempotency_conflict", TX(f, FLOW_IDEM_CONFLICT), 0,
               "use_new_idempotency_key", "use_new_idempotency_key");
        return;
    case IDEM_IN_PROGRESS:
        refuse(f, 409, "in_progress", TX(f, FLOW_IDEM_IN_PROGRESS), 1, "retry_later",
               "retry_later");
        return;
    case IDEM_UNAVAILABLE:
    default:
        refuse(f, 503, "state_store_unavailable", TX(f, FLOW_IDEM_UNAVAILABLE), 1, "retry_later",
               "retry_later");
        return;
    }
}

/* ---- response_format ---- */

/* MCP: the argument, default toon; REST: ?response_format=, default json. Removes the
 * argument before the tool's own schema is checked. */
static int pick_format(flow *f)
{
    char details[200];
    int rc = callcheck_format(f->in.format, json_get(f->args, "response_format"), f->in.mcp,
                              f->in.ti->toon, &f->o.toon, details, sizeof details);
    if (f->args_copy)
        json_remove(f->args_copy, "response_format");
    if (rc == 0)
        return 0;
    err_write(&f->o.json, 400, f->in.env.lang, NULL, NULL, NULL, details, NULL, NULL);
    snprintf(f->o.code, sizeof f->o.code, "invalid_response_format");
    f->o.is_error = 1;
    f->o.status = 400;
    finish(f, 0);
    return -1;
}

/* ---- the tool that runs ---- */

/* 1 when the tool's inputSchema (of its tools/list entry) declares kn_id. */
static int declares_kn_id(const tools_info *ti)
{
    const char *text = ti->list_json[LANG_EN_US];
    json_value *e = text ? json_parse(text, strlen(text), NULL, NULL, 0) : NULL;
    const json_value *props = json_get(json_get(e, "inputSchema"), "properties");
    int yes = json_get(props, "kn_id") != NULL;
    json_free(e);
    return yes;
}

/* execute_tool that runs a Context Loader tool or a skill: that tool (as ctx.invoke
 * would find it: listed on an MCP surface, not gated off) and the arguments it gets,
 * as tools/execute_tool.lua hands them on (arguments without bkn_context,
 * response_format and hints; kn_id from execute_tool's own when the tool declares it
 * and lacks it; a skill's skill_id, entry_shell and timeout). Else the call itself. */
static void pick_run(flow *f)
{
    f->run_name = f->in.ti->name;
    f->run_args = f->args;
    f->run_toon = f->o.toon;
    if (strcmp(f->in.ti->name, "execute_tool") || json_typeof(f->args) != JSON_OBJECT ||
        json_get(f->args, "toolbox_id"))
        return;
    const json_value *a = json_get(f->args, "arguments");
    const char *skill = json_get_string(f->args, "skill_id");
    const char *key = json_get_string(f->args, "tool_id");
    if (!key)
        key = json_get_string(f->args, "name");
    const tools_info *ti = tools_gen_find(f->in.gen, skill ? "execute_skill" : key ? key : "");
    if (!ti || !(ti->surfaces & (SURFACE_MCP | SURFACE_COMPACT)) || (ti->gate && !ti->gate_open) ||
        !strcmp(ti->name, "execute_tool"))
        return;
    json_value *inner;
    if (skill) {
        inner = json_new_object();
        json_set(inner, "skill_id", json_new_str(skill, strlen(skill)));
        const json_value *entry = json_get(a, "entry_shell");
        const json_value *timeout = json_get(a, "timeout");
        if (entry)
            json_set(inner, "entry_shell", json_clone(entry));
        if (timeout)
            json_set(inner, "timeout", json_clone(timeout));
    } else {
        inner = json_typeof(a) == JSON_OBJECT ? json_clone(a) : json_new_object();
        json_remove(inner, "bkn_context");
        json_remove(inner, "response_format");
        guard_strip_hints(inner);
        const json_value *kn = json_get(f->args, "kn_id");
        if (kn && !json_get(inner, "kn_id") && declares_kn_id(ti))
            json_set(inner, "kn_id", json_clone(kn));
    }
    int toon = 0;
    char details[200];
    if (callcheck_format(f->in.format, json_get(f->in.args, "response_format"), f->in.mcp, ti->toon,
                         &toon, details, sizeof details) == 0)
        f->run_toon = toon;
    f->run_name = ti->name;
    f->run_args = f->run_args_own = inner;
}

/* ---- entry ---- */

flow *flow_new(const flow_input *in, flow_done_fn done, void *arg)
{
    /* cleared by its own size: calloc clears the chunk it got, which may be a few bytes
     * longer, and past 2 kB that is `rep stosb` (see struct flow_own) */
    flow *f = xmalloc(sizeof *f);
    memset(f, 0, sizeof *f);
    f->in = *in;
    f->done = done;
    f->done_arg = arg;
    outcome_init(&f->o);
    /* MCP business tools and the REST execution routes need a context; the MCP
     * routes tools declare (the MCP proxy route) may always go ad hoc. */
    f->needs_context = in->mcp || (!strcmp(in->ti->kind, "execute") && !in->declared_route);
    return f;
}

/* 1 when the arguments hold a member the tool must not see (bkn_context, a host
 * hint, response_format): then the flow works on a copy without them. */
static int args_to_edit(const json_value *args)
{
    if (json_typeof(args) != JSON_OBJECT)
        return 1;
    for (size_t i = 0, n = json_count(args); i < n; i++) {
        const char *k = json_key_at(args, i, NULL);
        if (!strcmp(k, "bkn_context") || !strcmp(k, "response_format") || guard_is_hint(k))
            return 1;
    }
    return 0;
}

void flow_run(flow *f)
{
    const flow_input *in = &f->in;
    char err[300];
    if (callcheck_hint_pick(in->invocation_header, "X-OpenBKN-Client-Invocation-Id", in->meta,
                            "openbkn.ai/client-invocation-id", in->env.lang, f->invocation,
                            sizeof f->invocation, err, sizeof err) < 0) {
        refuse(f, 400, "lifecycle_hint_invalid", err, 0, "fix_host_lifecycle_hint",
               "fix_host_lifecycle_hint");
        return;
    }
    const char *kn = in->args ? json_get_string(in->args, "kn_id") : NULL;
    if (!kn)
        kn = in->env.kn_id_header;
    str_copy(f->kn_id, sizeof f->kn_id, kn ? kn : "");
    guard_refusal why;
    if (guard_parse(in->args, f->kn_id[0] ? f->kn_id : NULL, in->env.lang, &f->ctx, &why) < 0) {
        refuse(f, why.rest_status, why.code, why.message, why.retryable, why.mcp_action,
               why.rest_action);
        return;
    }
    if (!in->args || args_to_edit(in->args)) {
        f->args = f->args_copy = in->args ? json_clone(in->args) : json_new_object();
        json_remove(f->args_copy, "bkn_context");
        guard_strip_hints(f->args_copy);
    } else {
        f->args = in->args;
    }
    if (pick_format(f) < 0)
        return;
    pick_run(f);

    /* The hint: the invocation id, else a caller-supplied request id. */
    const char *hint = f->invocation[0]        ? f->invocation
                       : in->caller_request_id ? in->env.request_id
                                               : NULL;
    if (!hint) {
        decide_trace(f);
        return;
    }
    idem_key(in->env.who->key, idem_scope(f), f->run_name, hint, f->idem_key);
    f->iw = idem_begin(in->idem, f->idem_key, input_hash(f), on_idem, f);
}
