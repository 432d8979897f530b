#include "flow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callcheck.h"
#include "guard.h"
#include "log.h"
#include "toon.h"

struct flow {
    int64_t trace_t0;
    req_ctx *c;
    app *a;
    const tools_info *ti;
    int mcp;
    json_value *args; /* the arguments minus bkn_context (owned) */
    bkn_context ctx;
    char kn_id[129];
    char invocation[260];
    char idem_key[65];
    char input_hash[65];
    int idem_owned;
    int needs_context;
    int record;     /* an Operation is being recorded */
    int unrecorded; /* admitted after a verified Trace Core outage */
    char lease_token[160];
    json_value *lease_epoch;
    int lease_cached;   /* lease_token/epoch came from the lease cache, not a lookup */
    char lease_key[65]; /* the lease cache key of this call, once computed */
    char operation_id[96];
    char receipt_id[96];
    long attempt;
    char trace_id[33], span_id[17];
    trace_call *tc;
    idem_wait *iw;
    /* tool outcome */
    int toon; /* response_format=toon: the text block (MCP) or body (REST) is TOON */
    buf toon_text;
    int is_error;
    int status;
    buf body;
    const char *outcome;
    char outcome_buf[64];
    json_value *receipt; /* from attempt complete/fail */
};

/* Trace Core wait time, for the access log (SPEC §20: durations split by upstream,
 * Trace Core and Lua). */
static void trace_time_begin(flow *f)
{
    f->trace_t0 = now_mono_ms();
}

static void trace_time_end(flow *f)
{
    if (f->trace_t0 && f->c)
        f->c->trace_ms += now_mono_ms() - f->trace_t0;
    f->trace_t0 = 0;
}

/* One Trace Core request of this call; its wait counts towards the Trace Core time. */
static void core(flow *f, const char *method, const char *path, const json_value *body,
                 int idempotent, trace_cb cb)
{
    trace_time_begin(f);
    f->tc = trace_request(f->a->trace, &f->c->who, lang_tag(f->c->lang), method, path, body,
                          idempotent, cb, f);
}

static void run_tool(flow *f);

/* ---- small helpers ---- */

static void flow_free(flow *f)
{
    if (f->tc)
        trace_cancel(f->tc);
    if (f->iw)
        idem_cancel(f->iw);
    if (f->idem_owned)
        idem_abort(f->a->idem, f->idem_key);
    json_free(f->args);
    json_free(f->lease_epoch);
    json_free(f->receipt);
    guard_context_free(&f->ctx);
    buf_free(&f->body);
    buf_free(&f->toon_text);
    free(f);
}

void flow_cancel(flow *f)
{
    if (f->c)
        f->c->flow = NULL;
    if (f->c && f->c->call) {
        call_cancel(f->c->call);
        f->c->call = NULL;
    }
    flow_free(f);
}

/* Encodes the stored/sent response: MCP -> the CallToolResult JSON; REST -> the body.
 * The idempotency blob wraps it with the status and headers. */
static void blob_encode(buf *out, int status, int is_error, const char *receipt_id,
                        const char *operation_id, int unrecorded, const char *body, size_t len)
{
    buf_printf(out, "{\"status\":%d,\"is_error\":%s,\"unrecorded\":%s,\"receipt_id\":", status,
               is_error ? "true" : "false", unrecorded ? "true" : "false");
    json_write_string(out, receipt_id, strlen(receipt_id));
    buf_puts(out, ",\"operation_id\":");
    json_write_string(out, operation_id, strlen(operation_id));
    buf_puts(out, ",\"body\":");
    json_write_string(out, body, len);
    buf_putc(out, '}');
}

/* Sends the final answer on the request (and stores it for replays when we own an
 * idempotency key). body: MCP CallToolResult JSON, or the REST body. */
static void respond(flow *f, int status, int is_error, const char *body, size_t len, int store_it)
{
    req_ctx *c = f->c;
    if (f->idem_owned) {
        if (store_it) {
            buf blob = BUF_INIT;
            blob_encode(&blob, status, is_error, f->receipt_id, f->operation_id, f->unrecorded,
                        body, len);
            idem_finish(f->a->idem, f->idem_key, f->input_hash, blob.data, blob.len);
            buf_free(&blob);
        } else {
            idem_abort(f->a->idem, f->idem_key);
        }
        f->idem_owned = 0;
    }
    c->flow = NULL;
    f->c = NULL;
    if (!c->outcome)
        c->outcome = f->outcome ? f->outcome : (is_error ? "tool_error" : "ok");
    if (f->mcp) {
        mcp_send_result(c, body, len);
    } else {
        if (f->receipt_id[0])
            req_add_header(c, "bkn-receipt-id", f->receipt_id);
        if (f->operation_id[0])
            req_add_header(c, "bkn-operation-id", f->operation_id);
        if (f->unrecorded)
            req_add_header(c, "bkn-trace-status", "unrecorded");
        if (is_error)
            req_add_header(c, "Content-Language", lang_tag(c->lang));
        req_reply(c, status,
                  f->toon && !is_error ? "application/toon; charset=utf-8"
                                       : "application/json; charset=utf-8",
                  body, len);
    }
    flow_free(f);
}

/* A lifecycle-style refusal {"error":{...}} (before any downstream call). */
static void refuse(flow *f, int rest_status, const char *code, const char *message, int retryable,
                   const char *mcp_action, const char *rest_action)
{
    buf b = BUF_INIT;
    f->outcome = code;
    if (f->mcp) {
        buf e = BUF_INIT;
        guard_write_error(&e, code, message, retryable, mcp_action, 1);
        buf_puts(&b, "{\"content\":[{\"type\":\"text\",\"text\":");
        json_write_string(&b, e.data, e.len);
        buf_puts(&b, "}],\"isError\":true}");
        buf_free(&e);
    } else {
        guard_write_error(&b, code, message, retryable, rest_action, 0);
    }
    respond(f, rest_status, 1, b.data, b.len, 0);
    buf_free(&b);
}

/* REST status of a Trace Core error code (reference trace-lifecycle.md §3.4). */
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

/* A Trace Core API error passed on: the envelope as is on MCP, the status derived
 * from its code on REST. */
static void refuse_api(flow *f, const trace_reply *r)
{
    buf b = BUF_INIT;
    const char *code = r->error_code && *r->error_code ? r->error_code : "internal_error";
    f->outcome = code;
    json_write(&b, r->body, 0);
    if (f->mcp) {
        buf m = BUF_INIT;
        buf_puts(&m, "{\"content\":[{\"type\":\"text\",\"text\":");
        json_write_string(&m, b.data, b.len);
        buf_puts(&m, "}],\"isError\":true}");
        respond(f, 200, 1, m.data, m.len, 0);
        buf_free(&m);
    } else {
        respond(f, rest_status_of(code), 1, b.data, b.len, 0);
    }
    buf_free(&b);
}

static void refuse_unavailable(flow *f)
{
    f->c->outcome = "trace_core_unavailable";
    refuse(f, 503, "trace_core_unavailable", "BKN Trace Core is temporarily unavailable", 1,
           "retry_later", "retry_later");
}

/* ---- hints and keys ---- */

int flow_hint(req_ctx *c, const json_value *meta, const char *header, const char *meta_key,
              char *out, size_t outlen, char *err, size_t errlen)
{
    out[0] = '\0';
    const char *v = req_header(c, header);
    const char *src = header;
    if (!v && meta) {
        const json_value *m = json_get(meta, meta_key);
        src = meta_key;
        if (m && json_typeof(m) != JSON_STRING) {
            snprintf(err, errlen, "%s must be a string", src);
            return -1;
        }
        v = m ? json_get_str(m, NULL) : NULL;
    }
    return callcheck_hint(v, src, out, outlen, err, errlen);
}

void flow_operation_key(const char *conversation_id, const char *interaction_id,
                        const char *surface, const char *tool, const char *invocation_id,
                        const char *request_id, const char *input_hash, char out[40])
{
    json_value *o = json_new_object();
    buf id = BUF_INIT;
    if (invocation_id && *invocation_id) {
        char h[65];
        sha256_hex(invocation_id, strlen(invocation_id), h);
        buf_printf(&id, "inv:%s", h);
    } else {
        buf_printf(&id, "req:%s:%s", request_id, input_hash);
    }
    json_set(o, "tool", json_new_str(tool, strlen(tool)));
    json_set(o, "surface", json_new_str(surface, strlen(surface)));
    json_set(o, "interaction_id", json_new_str(interaction_id, strlen(interaction_id)));
    json_set(o, "identity", json_new_str(id.data, id.len));
    json_set(o, "conversation_id", json_new_str(conversation_id, strlen(conversation_id)));
    buf text = BUF_INIT;
    json_write(&text, o, 1);
    char h[65];
    sha256_hex(text.data, text.len, h);
    snprintf(out, 40, "op_%.32s", h);
    buf_free(&text);
    buf_free(&id);
    json_free(o);
}

/* ---- finishing ---- */

/* Builds the reply from the tool outcome (+ receipt) and sends it. */
static void deliver(flow *f)
{
    buf out = BUF_INIT;
    char *receipt = NULL;
    if (f->receipt) {
        const json_value *rid = json_get(f->receipt, "receipt_id");
        if (rid && json_typeof(rid) == JSON_STRING)
            snprintf(f->receipt_id, sizeof f->receipt_id, "%s", json_get_str(rid, NULL));
        buf r = BUF_INIT;
        json_write(&r, f->receipt, 0);
        receipt = buf_steal(&r, NULL);
    }
    int toon = f->toon && !f->is_error && f->toon_text.data;
    if (f->mcp) {
        buf_puts(&out, "{\"content\":[{\"type\":\"text\",\"text\":");
        if (toon)
            json_write_string(&out, f->toon_text.data, f->toon_text.len);
        else
            json_write_string(&out, f->body.data, f->body.len);
        buf_puts(&out, "}]");
        if (!f->is_error) {
            buf_puts(&out, ",\"structuredContent\":");
            if (receipt && f->body.len >= 2 && f->body.data[0] == '{') {
                /* the result object with bkn_receipt as its last member */
                size_t end = f->body.len - 1;
                while (end > 0 && f->body.data[end] != '}')
                    end--;
                buf_append(&out, f->body.data, end);
                int empty = end == 1;
                buf_puts(&out, empty ? "\"bkn_receipt\":" : ",\"bkn_receipt\":");
                buf_puts(&out, receipt);
                buf_putc(&out, '}');
            } else {
                buf_append(&out, f->body.data, f->body.len);
            }
        } else if (receipt) {
            buf_printf(&out, ",\"structuredContent\":{\"result\":null,\"bkn_receipt\":%s}",
                       receipt);
        }
        buf_printf(&out, ",\"isError\":%s", f->is_error ? "true" : "false");
        if (f->unrecorded)
            buf_puts(&out, ",\"_meta\":{\"openbkn.ai/trace-status\":\"unrecorded\"}");
        buf_putc(&out, '}');
        respond(f, 200, f->is_error, out.data, out.len, 1);
    } else {
        int status = f->status ? f->status : (f->is_error ? 500 : 200);
        if (toon)
            respond(f, status, 0, f->toon_text.data, f->toon_text.len, 1);
        else
            respond(f, status, f->is_error, f->body.data, f->body.len, 1);
    }
    buf_free(&out);
    free(receipt);
}

static void on_finalized(const trace_reply *r, void *arg)
{
    flow *f = arg;
    f->tc = NULL;
    trace_time_end(f);
    if (r->status == TRACE_OK && r->body) {
        const json_value *rc = json_get(r->body, "receipt");
        if (rc)
            f->receipt = json_clone(rc);
    } else {
        /* The business result stands; the receipt stays pending at Core. */
        log_line *l = log_begin(LOG_WARN, "operation finalize failed");
        log_str(l, "request_id", f->c->request_id);
        log_str(l, "operation_id", f->operation_id);
        log_int(l, "trace_status", (int)r->status);
        log_end(l);
    }
    deliver(f);
}

static void finalize(flow *f)
{
    json_value *b = json_new_object();
    json_value *payload = NULL;
    if (f->mcp) {
        /* the CallToolResult without receipt: content text + structured result */
        buf t = BUF_INIT;
        buf_puts(&t, "{\"content\":[{\"type\":\"text\",\"text\":");
        json_write_string(&t, f->body.data, f->body.len);
        buf_printf(&t, "}],\"isError\":%s}", f->is_error ? "true" : "false");
        payload = json_parse(t.data, t.len, NULL, NULL, 0);
        buf_free(&t);
    } else {
        payload = json_parse(f->body.data, f->body.len, NULL, NULL, 0);
    }
    json_value *env = NULL;
    if (f->is_error) {
        json_value *e = json_new_object();
        json_set(e, "code", json_new_str("tool_error", 10));
        json_set(e, "message", json_new_str("the tool returned an error", 26));
        json_set(e, "stage", json_new_str("tool_execution", 14));
        json_set(e, "result", payload ? payload : json_new_null());
        trace_payload_envelope(e, &env);
        json_free(e);
    } else {
        trace_payload_envelope(payload, &env);
        json_free(payload);
    }
    json_set(b, "receipt_id", json_new_str(f->receipt_id, strlen(f->receipt_id)));
    json_set(b, "evidence_durability", json_new_str("durable", 7));
    json_set(b, "retryable", json_new_bool(0));
    json_set(b, "request_id", json_new_str(f->c->request_id, strlen(f->c->request_id)));
    json_set(b, "trace_id", json_new_str(f->trace_id, 32));
    json_set(b, "span_id", json_new_str(f->span_id, 16));
    json_set(b, "observed_evidence_refs", json_new_array());
    json_set(b, "business_refs",
             f->ctx.business_refs ? json_clone(f->ctx.business_refs) : json_new_array());
    json_set(b, "artifact_refs", json_new_null());
    json_set(b, "partial_reasons", json_new_null());
    json_set(b, f->is_error ? "error" : "output", env);
    buf path = BUF_INIT, esc = BUF_INIT;
    buf_puts(&path, "/operations/");
    buf_puts(&path, trace_path_escape(f->operation_id, &esc));
    buf_printf(&path, "/attempts/%ld:%s", f->attempt, f->is_error ? "fail" : "complete");
    core(f, "POST", path.data, b, 1, on_finalized);
    buf_free(&path);
    buf_free(&esc);
    json_free(b);
}

static void on_call_done(const call_result *res, void *arg)
{
    flow *f = arg;
    f->c->call = NULL;
    f->c->lua_ms = res->lua_ms;
    f->c->upstream_ms = res->upstream_ms;
    f->is_error = res->is_error;
    f->status = res->status;
    buf_append(&f->body, res->body, res->body_len);
    if (f->toon && !res->is_error && res->toon) {
        buf_append(&f->toon_text, res->toon, res->toon_len); /* the tool's own layout */
    } else if (f->toon && !res->is_error) {
        /* TOON from the exact JSON result (big integers and key order intact). */
        char err[200];
        json_value *v = json_parse(res->body, res->body_len, NULL, err, sizeof err);
        if (!v || toon_encode(&f->toon_text, v, NULL, err, sizeof err) < 0) {
            log_line *l = log_begin(LOG_ERROR, "toon rendering failed");
            log_str(l, "request_id", f->c->request_id);
            log_str(l, "tool", f->ti->name);
            log_end(l);
            buf_free(&f->toon_text); /* falls back to JSON */
        }
        json_free(v);
    }
    /* res and its strings die with the call: keep a copy of the code for the log */
    snprintf(f->outcome_buf, sizeof f->outcome_buf, "%s",
             res->is_error ? (res->error_code ? res->error_code : "tool_error") : "ok");
    f->outcome = f->outcome_buf;
    f->c->outcome = f->outcome;
    if (f->record)
        finalize(f);
    else
        deliver(f);
}

static void run_tool(flow *f)
{
    call_env env;
    req_call_env(f->c, &env);
    /* PTC: the sandbox's calls name this run as their parent operation */
    env.operation_id = f->operation_id[0] ? f->operation_id : NULL;
    env.toon = f->toon;
    f->c->call = call_start(f->c->gen, f->ti, f->args, &env, on_call_done, f);
}

/* ---- Trace Core steps ---- */

static void on_probe(probe_verdict v, void *arg)
{
    flow *f = arg;
    f->tc = NULL;
    trace_time_end(f);
    if (v == PROBE_DOWN) {
        /* Verified outage: admitted, unrecorded, and the response says so. */
        f->unrecorded = 1;
        f->record = 0;
        run_tool(f);
    } else {
        refuse_unavailable(f);
    }
}

static void probe(flow *f)
{
    trace_note_failure(f->a->trace);
    trace_time_begin(f);
    f->tc = trace_probe(f->a->trace, on_probe, f);
}

/* A Trace Core reply of the recording steps: 1 when it is a success with a body;
 * otherwise the failure is answered (probe on unavailability, the API envelope, or
 * the retryable unavailable error) and 0 is returned. */
static int reply_ok(flow *f, const trace_reply *r)
{
    if (r->status == TRACE_UNAVAILABLE)
        probe(f);
    else if (r->status == TRACE_API_ERROR)
        refuse_api(f, r);
    else if (r->status != TRACE_OK || !r->body)
        refuse_unavailable(f);
    else
        return 1;
    return 0;
}

static void on_interaction(const trace_reply *r, void *arg);

/* ---- interaction lease cache (issue 17: "cache the interaction lease between calls of
 * one turn, invalidated on conflict") ----
 * A managed call looks its interaction up (GET /interactions/{id}: conversation,
 * status, lease) before ensuring its Operation. Every call of a turn gets the same
 * answer, and operations:ensure checks all of it again on Trace Core's side (status,
 * conversation, lease token and epoch, who may see it), so for a few seconds the
 * answer is reused: per caller and interaction, in this process. Any refusal of an
 * ensure made with a reused lease drops the entry and the call starts over with the
 * lookup, so callers see exactly what they would have seen without the cache. */
#define LEASE_SLOTS 256

typedef struct {
    char key[65]; /* sha256(caller key, interaction id); "" when the slot is empty */
    char conversation_id[160];
    char lease_token[160];
    json_value *lease_epoch;
    int64_t expires_ms;
} lease_entry;

static lease_entry g_leases[LEASE_SLOTS];

/* The slot of this call's caller and interaction; the key is hashed once per call. */
static lease_entry *lease_slot(flow *f)
{
    if (!f->lease_key[0]) {
        buf k = BUF_INIT;
        buf_printf(&k, "%s\n%s", f->c->who.key, f->ctx.interaction_id);
        sha256_hex(k.data, k.len, f->lease_key);
        buf_free(&k);
    }
    return &g_leases[strtoul(f->lease_key + 56, NULL, 16) % LEASE_SLOTS];
}

static void lease_forget(flow *f)
{
    lease_entry *e = lease_slot(f);
    if (!strcmp(e->key, f->lease_key)) {
        e->key[0] = '\0';
        json_free(e->lease_epoch);
        e->lease_epoch = NULL;
    }
}

static void lease_remember(flow *f, const char *conversation_id)
{
    long ttl = f->a->cfg->trace_core_lease_cache_ttl_s;
    if (ttl <= 0 || !f->lease_token[0])
        return;
    lease_entry *e = lease_slot(f);
    json_free(e->lease_epoch);
    memcpy(e->key, f->lease_key, sizeof e->key);
    snprintf(e->conversation_id, sizeof e->conversation_id, "%s", conversation_id);
    snprintf(e->lease_token, sizeof e->lease_token, "%s", f->lease_token);
    e->lease_epoch = f->lease_epoch ? json_clone(f->lease_epoch) : NULL;
    e->expires_ms = now_mono_ms() + ttl * 1000;
}

/* 1 if a fresh entry for this caller, interaction and conversation filled the lease. */
static int lease_reuse(flow *f)
{
    if (f->a->cfg->trace_core_lease_cache_ttl_s <= 0)
        return 0;
    lease_entry *e = lease_slot(f);
    if (strcmp(e->key, f->lease_key) || e->expires_ms <= now_mono_ms() ||
        strcmp(e->conversation_id, f->ctx.conversation_id))
        return 0;
    snprintf(f->lease_token, sizeof f->lease_token, "%s", e->lease_token);
    json_free(f->lease_epoch);
    f->lease_epoch = e->lease_epoch ? json_clone(e->lease_epoch) : NULL;
    f->lease_cached = 1;
    return 1;
}

static void lookup_interaction(flow *f)
{
    buf path = BUF_INIT, e = BUF_INIT;
    buf_printf(&path, "/interactions/%s", trace_path_escape(f->ctx.interaction_id, &e));
    core(f, "GET", path.data, NULL, 1, on_interaction);
    buf_free(&path);
    buf_free(&e);
}

static void on_ensure(const trace_reply *r, void *arg)
{
    flow *f = arg;
    f->tc = NULL;
    trace_time_end(f);
    if (f->lease_cached && r->status == TRACE_API_ERROR) {
        /* refused with a reused lease: forget it and decide on a fresh lookup */
        lease_forget(f);
        f->lease_cached = 0;
        lookup_interaction(f);
        return;
    }
    if (!reply_ok(f, r))
        return;
    const json_value *op = json_get(r->body, "operation");
    const json_value *rc = json_get(r->body, "receipt");
    const json_value *exec = json_get(r->body, "execute");
    const char *op_id = op ? json_get_string(op, "operation_id") : NULL;
    const char *rc_id = rc ? json_get_string(rc, "receipt_id") : NULL;
    const json_value *attempt = op ? json_get(op, "attempt") : NULL;
    if (!op_id || !rc_id || !attempt || json_typeof(attempt) != JSON_INT) {
        refuse_unavailable(f);
        return;
    }
    snprintf(f->operation_id, sizeof f->operation_id, "%s", op_id);
    snprintf(f->receipt_id, sizeof f->receipt_id, "%s", rc_id);
    f->attempt = (long)json_get_int(attempt);
    if (!exec || json_typeof(exec) != JSON_TRUE) {
        /* Another claimant ran (or runs) this operation: answer from the receipt. */
        const char *st = json_get_string(rc, "receipt_status");
        buf b = BUF_INIT;
        if (st && strcmp(st, "pending")) {
            int failed = !strcmp(st, "failed");
            buf s = BUF_INIT;
            buf_puts(&s, "{\"operation\":");
            json_write(&s, op, 0);
            buf_puts(&s, ",\"receipt\":");
            json_write(&s, rc, 0);
            buf_putc(&s, '}');
            if (f->mcp) {
                buf_puts(&b, "{\"content\":[{\"type\":\"text\",\"text\":\"operation is terminal; "
                             "durable receipt reused\"}],\"structuredContent\":");
                buf_append(&b, s.data, s.len);
                buf_printf(&b, ",\"isError\":%s}", failed ? "true" : "false");
                respond(f, 200, failed, b.data, b.len, 0);
            } else {
                respond(f, failed ? 409 : 200, failed, s.data, s.len, 0);
            }
            buf_free(&s);
        } else {
            f->c->outcome = "receipt_pending";
            refuse(f, 409, "receipt_pending", "another call is executing this operation", 1,
                   "retry_same_business_tool", "retry_same_business_tool");
        }
        buf_free(&b);
        return;
    }
    run_tool(f);
}

/* The input hash: canonical JSON of the normalized input (the arguments minus
 * bkn_context, with the context's ids; SPEC §8). Computed on first use only: an ad
 * hoc call without an idempotency hint never needs it. */
static const char *input_hash(flow *f)
{
    if (f->input_hash[0])
        return f->input_hash;
    json_value *in = json_new_object();
    json_set(in, "arguments", json_clone(f->args));
    if (!f->ctx.adhoc) {
        json_value *cx = json_new_object();
        json_set(cx, "conversation_id",
                 json_new_str(f->ctx.conversation_id, strlen(f->ctx.conversation_id)));
        json_set(cx, "interaction_id",
                 json_new_str(f->ctx.interaction_id, strlen(f->ctx.interaction_id)));
        if (f->ctx.parent_operation_id[0])
            json_set(cx, "parent_operation_id",
                     json_new_str(f->ctx.parent_operation_id, strlen(f->ctx.parent_operation_id)));
        if (f->ctx.causation_event_ids)
            json_set(cx, "causation_event_ids", json_clone(f->ctx.causation_event_ids));
        json_set(in, "bkn_context", cx);
    }
    json_set(in, "response_format", json_new_str(f->toon ? "toon" : "json", 4));
    if (f->c->query) /* REST query parameters are arguments too */
        json_set(in, "query", json_clone(f->c->query));
    idem_input_hash(in, f->input_hash);
    json_free(in);
    return f->input_hash;
}

static void ensure_operation(flow *f)
{
    char op_key[40];
    flow_operation_key(f->ctx.conversation_id, f->ctx.interaction_id, f->mcp ? "mcp" : "rest",
                       f->ti->name, f->invocation, f->c->request_id, input_hash(f), op_key);
    json_value *b = json_new_object();
    json_set(b, "operation_key", json_new_str(op_key, strlen(op_key)));
    json_set(b, "tool_name", json_new_str(f->ti->name, strlen(f->ti->name)));
    json_set(b, "protocol", json_new_str(f->mcp ? "mcp" : "sdk", f->mcp ? 3 : 3));
    json_set(b, "source_module", json_new_str("context-loader", 14));
    json_value *env = NULL;
    trace_payload_envelope(f->args, &env);
    json_set(b, "input", env);
    json_set(b, "required", json_new_bool(1));
    json_set(b, "lease_token", json_new_str(f->lease_token, strlen(f->lease_token)));
    json_set(b, "lease_epoch", f->lease_epoch ? json_clone(f->lease_epoch) : json_new_int(0));
    if (f->ctx.parent_operation_id[0])
        json_set(b, "parent_operation_id",
                 json_new_str(f->ctx.parent_operation_id, strlen(f->ctx.parent_operation_id)));
    if (f->ctx.causation_event_ids)
        json_set(b, "causation_event_ids", json_clone(f->ctx.causation_event_ids));
    buf path = BUF_INIT, e1 = BUF_INIT, e2 = BUF_INIT;
    buf_printf(&path, "/conversations/%s/interactions/%s/operations:ensure",
               trace_path_escape(f->ctx.conversation_id, &e1),
               trace_path_escape(f->ctx.interaction_id, &e2));
    core(f, "POST", path.data, b, 0, on_ensure);
    buf_free(&path);
    buf_free(&e1);
    buf_free(&e2);
    json_free(b);
}

static void on_interaction(const trace_reply *r, void *arg)
{
    flow *f = arg;
    f->tc = NULL;
    trace_time_end(f);
    if (!reply_ok(f, r))
        return;
    const char *cid = json_get_string(r->body, "conversation_id");
    const char *st = json_get_string(r->body, "execution_status");
    const char *lease = json_get_string(r->body, "lease_token");
    if (!cid || strcmp(cid, f->ctx.conversation_id)) {
        refuse(f, 400, "interaction_required", "interaction does not belong to conversation", 0,
               "bkn_start_interaction", "start_interaction");
        return;
    }
    if (!st || strcmp(st, "active")) {
        char m[160];
        snprintf(m, sizeof m, "the interaction is %s; start a new interaction",
                 st ? st : "not active");
        refuse(f, 409, "interaction_terminal", m, 0, "bkn_start_interaction", "start_interaction");
        return;
    }
    snprintf(f->lease_token, sizeof f->lease_token, "%s", lease ? lease : "");
    const json_value *ep = json_get(r->body, "lease_epoch");
    json_free(f->lease_epoch);
    f->lease_epoch = ep ? json_clone(ep) : NULL;
    lease_remember(f, cid);
    ensure_operation(f);
}

static void begin_record(flow *f)
{
    f->record = 1;
    if (f->c->traceparent[0]) {
        memcpy(f->trace_id, f->c->traceparent + 3, 32);
        f->trace_id[32] = '\0';
        memcpy(f->span_id, f->c->traceparent + 36, 16);
        f->span_id[16] = '\0';
    } else {
        trace_synthetic_ids(f->c->request_id, f->trace_id, f->span_id);
    }
    if (lease_reuse(f))
        ensure_operation(f);
    else
        lookup_interaction(f);
}

static void refuse_context_required(flow *f)
{
    f->c->outcome = "conversation_required";
    refuse(f, 400, "conversation_required",
           "bkn_context {conversation_id, interaction_id} from bkn_start_interaction is required",
           0, "bkn_start_interaction", "create_conversation");
}

/* An ad hoc call where a context is required, after Trace Core failures. */
static void on_adhoc_probe(probe_verdict v, void *arg)
{
    flow *f = arg;
    f->tc = NULL;
    trace_time_end(f);
    if (v == PROBE_DOWN) {
        f->unrecorded = 1; /* verified outage: admitted, unrecorded */
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
            /* Required only while Trace Core is available (SPEC §7); a cached policy says
             * nothing about that. After recent failures (breaker not closed) the probe
             * verdict, usually cached, decides. */
            trace_stats_t ts;
            trace_stats(f->a->trace, &ts);
            if (ts.breaker != TRACE_BREAKER_CLOSED) {
                trace_time_begin(f);
                f->tc = trace_probe(f->a->trace, on_adhoc_probe, f);
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
    if (!trace_installed(f->a->trace)) {
        if (f->needs_context || !f->ctx.adhoc) {
            refuse(f, 503, "feature_not_installed",
                   "BKN Trace Core is not configured for this deployment", 0, "", "");
            return;
        }
        run_tool(f);
        return;
    }
    if (f->ctx.adhoc && !f->needs_context) {
        run_tool(f); /* REST reads and the proxy may always go ad hoc */
        return;
    }
    trace_time_begin(f);
    f->tc = trace_capture_policy(f->a->trace, &f->c->who, on_policy, f);
}

/* ---- idempotency ---- */

static void replay(flow *f, const char *blob, size_t len)
{
    json_value *v = json_parse(blob, len, NULL, NULL, 0);
    const json_value *st = v ? json_get(v, "status") : NULL;
    const json_value *body = v ? json_get(v, "body") : NULL;
    if (!st || !body || json_typeof(body) != JSON_STRING) {
        json_free(v);
        refuse(f, 503, "state_store_unavailable", "the stored result could not be read", 1,
               "retry_later", "retry_later");
        return;
    }
    const char *rid = json_get_string(v, "receipt_id");
    const char *oid = json_get_string(v, "operation_id");
    snprintf(f->receipt_id, sizeof f->receipt_id, "%s", rid ? rid : "");
    snprintf(f->operation_id, sizeof f->operation_id, "%s", oid ? oid : "");
    const json_value *un = json_get(v, "unrecorded");
    f->unrecorded = un && json_typeof(un) == JSON_TRUE;
    const json_value *ie = json_get(v, "is_error");
    size_t blen;
    const char *b = json_get_str(body, &blen);
    f->outcome = "replay";
    f->c->outcome = "replay";
    respond(f, (int)json_get_int(st), ie && json_typeof(ie) == JSON_TRUE, b, blen, 0);
    json_free(v);
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
        f->c->outcome = "idempotency_conflict";
        refuse(f, 409, "idempotency_conflict",
               "this invocation id was already used with different input", 0,
               "use_new_idempotency_key", "use_new_idempotency_key");
        return;
    case IDEM_IN_PROGRESS:
        f->c->outcome = "in_progress";
        refuse(f, 409, "in_progress", "the same call is still running; retry it later", 1,
               "retry_same_business_tool", "retry_same_business_tool");
        return;
    case IDEM_UNAVAILABLE:
    default:
        f->c->outcome = "state_store_unavailable";
        refuse(f, 503, "state_store_unavailable",
               "the idempotency store is unavailable; retry the call", 1, "retry_later",
               "retry_later");
        return;
    }
}

/* ---- response_format (SPEC §12) ---- */

/* MCP: the argument, default toon; REST: ?response_format=, default json. Removes the
 * argument before the tool's own schema is checked. */
static int pick_format(flow *f)
{
    char details[200];
    int rc = callcheck_format(f->c->format_given ? f->c->format : NULL,
                              json_get(f->args, "response_format"), f->mcp, f->ti->toon, &f->toon,
                              details, sizeof details);
    json_remove(f->args, "response_format");
    if (rc == 0)
        return 0;
    int en = f->c->lang == LANG_EN_US;
    buf b = BUF_INIT;
    buf_puts(&b, "{\"code\":\"Public.BadRequest\",\"description\":");
    const char *d = en ? "Invalid parameters" : "参数错误";
    const char *sol = en ? "Please check if the parameters are correct" : "请检查参数是否正确";
    json_write_string(&b, d, strlen(d));
    buf_puts(&b, ",\"solution\":");
    json_write_string(&b, sol, strlen(sol));
    buf_puts(&b, ",\"link\":\"\",\"details\":");
    json_write_string(&b, details, strlen(details));
    buf_putc(&b, '}');
    f->outcome = "invalid_response_format";
    if (f->mcp) {
        buf m = BUF_INIT;
        buf_puts(&m, "{\"content\":[{\"type\":\"text\",\"text\":");
        json_write_string(&m, b.data, b.len);
        buf_puts(&m, "}],\"isError\":true}");
        respond(f, 200, 1, m.data, m.len, 0);
        buf_free(&m);
    } else {
        respond(f, 400, 1, b.data, b.len, 0);
    }
    buf_free(&b);
    return -1;
}

/* ---- entry ---- */

void flow_start(req_ctx *c, const tools_info *ti, const json_value *args, const json_value *meta)
{
    flow *f = xcalloc(1, sizeof *f);
    f->c = c;
    f->a = c->app;
    f->ti = ti;
    f->mcp = c->kind == ROUTE_MCP;
    c->flow = f;
    /* MCP business tools and the REST execution routes need a context (SPEC §7). */
    /* ... but the MCP proxy route may always go ad hoc (SPEC §4, §7). */
    f->needs_context = f->mcp || (!strcmp(ti->kind, "execute") && !c->proxy);
    char err[300];
    if (flow_hint(c, meta, "X-OpenBKN-Client-Invocation-Id", "openbkn.ai/client-invocation-id",
                  f->invocation, sizeof f->invocation, err, sizeof err) < 0) {
        refuse(f, 400, "lifecycle_hint_invalid", err, 0, "fix_host_lifecycle_hint",
               "fix_host_lifecycle_hint");
        return;
    }
    const char *kn = args ? json_get_string(args, "kn_id") : NULL;
    if (!kn)
        kn = req_header(c, "X-Kn-ID");
    snprintf(f->kn_id, sizeof f->kn_id, "%s", kn ? kn : "");
    guard_refusal why;
    if (guard_parse(args, f->kn_id[0] ? f->kn_id : NULL, &f->ctx, &why) < 0) {
        refuse(f, why.rest_status, why.code, why.message, why.retryable, why.mcp_action,
               why.rest_action);
        return;
    }
    f->args = args ? json_clone(args) : json_new_object();
    json_remove(f->args, "bkn_context");
    guard_strip_hints(f->args);
    if (pick_format(f) < 0)
        return;

    /* The hint: the invocation id, else a caller-supplied request id (SPEC §8). */
    const char *hint = f->invocation[0]       ? f->invocation
                       : c->caller_request_id ? c->request_id
                                              : NULL;
    if (!hint) {
        decide_trace(f);
        return;
    }
    idem_key(c->who.key, f->mcp ? c->surface : "rest", ti->name, hint, f->idem_key);
    f->iw = idem_begin(f->a->idem, f->idem_key, input_hash(f), on_idem, f);
}
