/* test_flow: the call sequencing of flow.c without a server. Trace Core, the
 * idempotency store and the Lua tool are link-time fakes defined here: each
 * operation the flow starts becomes a pending entry that the test completes (or
 * sees cancelled) explicitly, so every stage can be reached, answered and
 * cancelled. Run under ASan/UBSan: nothing may leak, no callback after a cancel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accept.h"
#include "check.h"
#include "flow.h"
#include "mcp_msg.h"
#include "outcome.h"

/* ---- the fake operations ---- */

typedef enum {
    OP_POLICY,
    OP_PROBE,
    OP_GET,
    OP_ENSURE,
    OP_ATTEMPT,
    OP_IDEM,
    OP_CALL,
    OP_KINDS
} op_kind;

typedef struct fake_op {
    op_kind kind;
    void *arg;
    trace_policy_cb policy_cb;
    trace_probe_cb probe_cb;
    trace_interaction_cb inter_cb;
    trace_operation_cb op_cb;
    trace_receipt_cb receipt_cb;
    idem_cb idem_cb;
    call_done_fn call_cb;
    char lease_token[160]; /* OP_ENSURE: the lease it was sent with */
    int failed;            /* OP_ATTEMPT */
    int want_value, toon;  /* OP_CALL */
    char payload[512];     /* OP_ATTEMPT: the payload as JSON text */
    char refs[512];        /* OP_ATTEMPT: the business_refs as JSON text */
} fake_op;

struct trace_call {
    fake_op op;
};
struct idem_wait {
    fake_op op;
};
struct call {
    fake_op op;
};

#define MAX_OPS 16
static fake_op *g_ops[MAX_OPS];
static int g_started[OP_KINDS], g_cancelled[OP_KINDS];

static void *op_new(size_t size, op_kind kind, void *arg)
{
    fake_op *o = calloc(1, size);
    o->kind = kind;
    o->arg = arg;
    for (int i = 0; i < MAX_OPS; i++)
        if (!g_ops[i]) {
            g_ops[i] = o;
            break;
        }
    g_started[kind]++;
    return o;
}

static void op_drop(fake_op *o)
{
    for (int i = 0; i < MAX_OPS; i++)
        if (g_ops[i] == o)
            g_ops[i] = NULL;
    free(o);
}

/* The one pending operation of a kind (removed from the table; the caller frees
 * it after completing), or NULL. */
static fake_op *take(op_kind kind)
{
    for (int i = 0; i < MAX_OPS; i++)
        if (g_ops[i] && g_ops[i]->kind == kind) {
            fake_op *o = g_ops[i];
            g_ops[i] = NULL;
            return o;
        }
    return NULL;
}

static int n_pending(void)
{
    int n = 0;
    for (int i = 0; i < MAX_OPS; i++)
        n += g_ops[i] != NULL;
    return n;
}

static void reset_counts(void)
{
    memset(g_started, 0, sizeof g_started);
    memset(g_cancelled, 0, sizeof g_cancelled);
}

/* ---- fake Trace Core ---- */

static int g_installed = 1;
static trace_breaker g_breaker = TRACE_BREAKER_CLOSED;
static int g_lease_ttl = 10;
static struct {
    char key[65], conversation_id[160], token[160];
    int set;
} g_lease;

int trace_installed(const trace_ctx *t)
{
    (void)t;
    return g_installed;
}

void trace_cancel(trace_call *c)
{
    if (!c)
        return;
    g_cancelled[c->op.kind]++;
    op_drop(&c->op);
}

trace_call *trace_capture_policy(trace_ctx *t, const principal *who, trace_policy_cb cb, void *arg)
{
    trace_call *c = op_new(sizeof *c, OP_POLICY, arg);
    c->op.policy_cb = cb;
    return c;
}

trace_call *trace_probe(trace_ctx *t, trace_probe_cb cb, void *arg)
{
    trace_call *c = op_new(sizeof *c, OP_PROBE, arg);
    c->op.probe_cb = cb;
    return c;
}

void trace_note_failure(trace_ctx *t)
{
    (void)t;
}

void trace_stats(const trace_ctx *t, trace_stats_t *out)
{
    memset(out, 0, sizeof *out);
    out->breaker = g_breaker;
}

static char g_seen_call[256];    /* the latest call's trace context: state|baggage|parent */
static char g_seen_attempt[256]; /* the latest finalization's origin: the same, |request id */

trace_call *trace_get_interaction(trace_ctx *t, const principal *who, const trace_origin *o,
                                  const char *interaction_id, trace_interaction_cb cb, void *arg)
{
    trace_call *c = op_new(sizeof *c, OP_GET, arg);
    c->op.inter_cb = cb;
    return c;
}

static char g_op_key[40]; /* the Operation key of the latest ensure */

trace_call *trace_ensure_operation(trace_ctx *t, const principal *who, const trace_origin *o,
                                   const trace_ensure_in *in, trace_operation_cb cb, void *arg)
{
    trace_call *c = op_new(sizeof *c, OP_ENSURE, arg);
    c->op.op_cb = cb;
    snprintf(c->op.lease_token, sizeof c->op.lease_token, "%s", in->lease_token);
    snprintf(g_op_key, sizeof g_op_key, "%s", in->operation_key);
    return c;
}

trace_call *trace_finish_attempt(trace_ctx *t, const principal *who, const trace_origin *o,
                                 const trace_attempt_in *in, trace_receipt_cb cb, void *arg)
{
    snprintf(g_seen_attempt, sizeof g_seen_attempt, "%s|%s|%s|%s",
             o && o->tracestate ? o->tracestate : "-", o && o->baggage ? o->baggage : "-",
             o && o->traceparent ? o->traceparent : "-", o && o->request_id ? o->request_id : "-");
    trace_call *c = op_new(sizeof *c, OP_ATTEMPT, arg);
    buf b = BUF_INIT;
    c->op.receipt_cb = cb;
    c->op.failed = in->failed;
    if (in->payload_json)
        buf_append(&b, in->payload_json, in->payload_len);
    else if (in->payload)
        json_write(&b, in->payload, 0);
    snprintf(c->op.payload, sizeof c->op.payload, "%s", b.data ? b.data : "null");
    buf_reset(&b);
    if (in->business_refs)
        json_write(&b, in->business_refs, 0);
    snprintf(c->op.refs, sizeof c->op.refs, "%s", b.data ? b.data : "null");
    buf_free(&b);
    return c;
}

static int g_later;                 /* background finalizations asked for */
static char g_later_payload[512];   /* the latest one's payload */

void trace_finish_attempt_later(trace_ctx *t, const principal *who, const trace_origin *o,
                                const trace_attempt_in *in)
{
    buf b = BUF_INIT;
    g_later++;
    if (in->payload_json)
        buf_append(&b, in->payload_json, in->payload_len);
    else if (in->payload)
        json_write(&b, in->payload, 0);
    snprintf(g_later_payload, sizeof g_later_payload, "%s", b.data ? b.data : "null");
    buf_free(&b);
}

void trace_synthetic_ids(const char *request_id, char trace_id[33], char span_id[17])
{
    memset(trace_id, 'a', 32);
    trace_id[32] = '\0';
    memset(span_id, 'b', 16);
    span_id[16] = '\0';
}

void trace_lease_key(const char *caller_key, const char *interaction_id, char out[65])
{
    buf k = BUF_INIT;
    buf_printf(&k, "%s\n%s", caller_key, interaction_id);
    sha256_hex(k.data, k.len, out);
    buf_free(&k);
}

int trace_lease_get(trace_ctx *t, const char key[65], const char *conversation_id, char *token,
                    size_t tokenlen, json_value **epoch)
{
    if (!g_lease.set || strcmp(g_lease.key, key) ||
        strcmp(g_lease.conversation_id, conversation_id))
        return 0;
    snprintf(token, tokenlen, "%s", g_lease.token);
    *epoch = json_new_int(7);
    return 1;
}

void trace_lease_put(trace_ctx *t, const char key[65], const char *conversation_id,
                     const char *token, const json_value *epoch)
{
    if (g_lease_ttl <= 0 || !token[0])
        return;
    g_lease.set = 1;
    snprintf(g_lease.key, sizeof g_lease.key, "%s", key);
    snprintf(g_lease.conversation_id, sizeof g_lease.conversation_id, "%s", conversation_id);
    snprintf(g_lease.token, sizeof g_lease.token, "%s", token);
}

void trace_lease_drop(trace_ctx *t, const char key[65])
{
    if (g_lease.set && !strcmp(g_lease.key, key))
        g_lease.set = 0;
}

/* ---- fake idempotency store ---- */

static buf g_record;
static int g_finished, g_aborted;
static char g_idem_key[65]; /* the key of the latest idem_begin */

void idem_key(const char *principal_key, const char *surface, const char *tool, const char *hint,
              char out[65])
{
    buf b = BUF_INIT;
    buf_printf(&b, "%s\n%s\n%s\n%s", principal_key, surface, tool, hint ? hint : "");
    sha256_hex(b.data, b.len, out);
    buf_free(&b);
}

void idem_input_hash(const json_value *args, char out[65])
{
    buf b = BUF_INIT;
    json_write(&b, args, 1);
    sha256_hex(b.data, b.len, out);
    buf_free(&b);
}

idem_wait *idem_begin(idem_ctx *ic, const char key[65], const char input_hash[65], idem_cb cb,
                      void *arg)
{
    idem_wait *w = op_new(sizeof *w, OP_IDEM, arg);
    w->op.idem_cb = cb;
    snprintf(g_idem_key, sizeof g_idem_key, "%s", key);
    return w;
}

void idem_finish(idem_ctx *ic, const char key[65], const char input_hash[65], const char *response,
                 size_t len)
{
    buf_reset(&g_record);
    buf_append(&g_record, response, len);
    g_finished++;
}

void idem_abort(idem_ctx *ic, const char key[65])
{
    g_aborted++;
}

void idem_cancel(idem_wait *w)
{
    g_cancelled[OP_IDEM]++;
    op_drop(&w->op);
}

/* ---- fake tool ---- */

call *call_start(tools_gen *gen, const tools_info *info, const json_value *args,
                 const call_env *env, call_done_fn done, void *arg)
{
    snprintf(g_seen_call, sizeof g_seen_call, "%s|%s|%s", env->tracestate ? env->tracestate : "-",
             env->baggage ? env->baggage : "-", env->traceparent ? env->traceparent : "-");
    call *c = op_new(sizeof *c, OP_CALL, arg);
    c->op.call_cb = done;
    c->op.want_value = env->want_value;
    c->op.toon = env->toon;
    return c;
}

static int g_gen_refs; /* references a detached flow holds */

long idem_claim_ttl_ms(const idem_ctx *ic)
{
    return 60000;
}

void tools_gen_ref(tools_gen *g)
{
    g_gen_refs++;
}

void tools_gen_release(tools_gen *g)
{
    g_gen_refs--;
}

void call_cancel(call *c)
{
    g_cancelled[OP_CALL]++;
    op_drop(&c->op);
}

/* ---- driving ---- */

static const tools_info TOOL = {.name = "query_object_instance", .kind = "read", .toon = 1};
static const tools_info ACTION = {.name = "execute_action", .kind = "execute", .toon = 1};
static const tools_info *g_tool = &TOOL; /* the tool of the next flow */

/* The generation's lookup: the two tools above, listed on /mcp. */
const tools_info *tools_gen_find(const tools_gen *g, const char *name)
{
    (void)g;
    return !strcmp(name, TOOL.name) ? &TOOL : !strcmp(name, ACTION.name) ? &ACTION : NULL;
}
static const char *g_surface;            /* its MCP surface (NULL: "mcp") */
static lang_id g_lang = LANG_EN_US;      /* its language */
static principal g_who;

typedef struct result {
    int done;
    call_outcome o; /* a copy of what the flow handed over */
    buf mcp;        /* the CallToolResult the MCP writer made of it */
} result;

static void on_done(const call_outcome *o, void *arg)
{
    result *r = arg;
    r->done++;
    outcome_init(&r->o);
    r->o.status = o->status;
    r->o.is_error = o->is_error;
    r->o.toon = o->toon;
    r->o.unrecorded = o->unrecorded;
    r->o.receipt_pending = o->receipt_pending;
    buf_append(&r->o.json, o->json.data ? o->json.data : "", o->json.len);
    snprintf(r->o.code, sizeof r->o.code, "%s", o->code);
    snprintf(r->o.receipt_id, sizeof r->o.receipt_id, "%s", o->receipt_id);
    snprintf(r->o.operation_id, sizeof r->o.operation_id, "%s", o->operation_id);
    buf_append(&r->o.receipt_json, o->receipt_json.data ? o->receipt_json.data : "",
               o->receipt_json.len);
    mcp_write_tool_result(&r->mcp, o);
}

static void result_free(result *r)
{
    outcome_free(&r->o);
    buf_free(&r->mcp);
}

static json_value *parse(const char *s)
{
    return json_parse(s, strlen(s), NULL, NULL, 0);
}

/* A flow for args (JSON text); mcp != 0: MCP tools/call. */
static json_value *g_args; /* the arguments of the latest flow (borrowed by it) */

static const char *g_env_traceparent, *g_env_tracestate, *g_env_baggage; /* the next start's */

static flow *start(const char *args, int mcp, const char *invocation, result *r)
{
    json_free(g_args);
    g_args = args ? parse(args) : NULL;
    const json_value *a = g_args;
    flow_input in;
    memset(&in, 0, sizeof in);
    in.env.who = &g_who;
    in.env.request_id = "req_test_000001";
    in.env.lang = g_lang;
    in.env.traceparent = g_env_traceparent;
    in.env.tracestate = g_env_tracestate;
    in.env.baggage = g_env_baggage;
    in.env.surface = mcp ? (g_surface ? g_surface : "mcp") : "rest";
    in.mcp = mcp;
    in.ti = g_tool;
    in.gen = (tools_gen *)&g_gen_refs; /* never dereferenced: the fake counts references */
    in.args = a;
    in.invocation_header = invocation;
    memset(r, 0, sizeof *r);
    flow *f = flow_new(&in, on_done, r);
    flow_run(f);
    return f;
}

static const char *CTX_ARGS = "{\"kn_id\":\"kn_1\",\"bkn_context\":{\"conversation_id\":\"conv_1\","
                              "\"interaction_id\":\"int_1\"}}";

static void answer_policy(capture_state st)
{
    fake_op *o = take(OP_POLICY);
    CHECK(o != NULL);
    if (o)
        o->policy_cb(st, o->arg);
    free(o);
}

static void answer_probe(probe_verdict v)
{
    fake_op *o = take(OP_PROBE);
    CHECK(o != NULL);
    if (o)
        o->probe_cb(v, o->arg);
    free(o);
}

static void answer_get(const char *conversation_id, const char *status, const char *lease)
{
    fake_op *o = take(OP_GET);
    CHECK(o != NULL);
    if (!o)
        return;
    trace_reply r = {TRACE_OK, 200, NULL, NULL, NULL, 0};
    json_value *body = json_new_object();
    r.body = body;
    trace_interaction it;
    memset(&it, 0, sizeof it);
    it.conversation_id = conversation_id;
    it.execution_status = status;
    it.lease_token = lease;
    o->inter_cb(&r, &it, o->arg);
    json_free(body);
    free(o);
}

/* ensure: status NULL -> execute; else the receipt_status of a reused receipt;
 * api_error -> a refusal envelope. Returns the lease token the ensure carried. */
static void answer_ensure_body(const char *receipt_status, int api_error, char lease[160],
                               const char *ok_body)
{
    fake_op *o = take(OP_ENSURE);
    CHECK(o != NULL);
    if (!o)
        return;
    if (lease)
        snprintf(lease, 160, "%s", o->lease_token);
    json_value *body = parse(api_error ? "{\"error\":{\"code\":\"lease_conflict\"}}" : ok_body);
    trace_reply r = {api_error ? TRACE_API_ERROR : TRACE_OK,
                     api_error ? 409 : 200,
                     body,
                     api_error ? "lease_conflict" : NULL,
                     NULL,
                     0};
    trace_operation op;
    memset(&op, 0, sizeof op);
    op.operation_id = "op_1";
    op.receipt_id = "rc_1";
    op.receipt_status = receipt_status;
    op.attempt = 1;
    op.execute = receipt_status == NULL;
    op.operation = json_get(body, "operation");
    op.receipt = json_get(body, "receipt");
    o->op_cb(&r, api_error ? NULL : &op, o->arg);
    json_free(body);
    free(o);
}

static void answer_ensure(const char *receipt_status, int api_error, char lease[160])
{
    answer_ensure_body(receipt_status, api_error, lease,
                       "{\"operation\":{\"operation_id\":\"op_1\",\"attempt\":1},"
                       "\"receipt\":{\"receipt_id\":\"rc_1\"}}");
}

static void answer_call(const char *body, int is_error, int *want_value)
{
    fake_op *o = take(OP_CALL);
    CHECK(o != NULL);
    if (!o)
        return;
    if (want_value)
        *want_value = o->want_value;
    call_result res;
    memset(&res, 0, sizeof res);
    res.is_error = is_error;
    res.status = is_error ? 404 : 200;
    /* the body in a buffer of the call's, as call.c hands it */
    buf b = BUF_INIT;
    buf_puts(&b, body);
    char *text = b.data;
    res.body = b.data;
    res.body_len = b.len;
    res.body_buf = &b;
    if (o->want_value || o->toon)
        res.value = parse(body);
    if (o->toon && !is_error) {
        res.toon = "n: 1";
        res.toon_len = 4;
    }
    o->call_cb(&res, o->arg);
    CHECK(b.data != text); /* the flow took the text instead of copying it */
    buf_free(&b);
    free(o);
}

static void answer_attempt_refs(int *failed, char payload[512], char refs[512])
{
    fake_op *o = take(OP_ATTEMPT);
    CHECK(o != NULL);
    if (!o)
        return;
    if (failed)
        *failed = o->failed;
    if (payload)
        snprintf(payload, 512, "%s", o->payload);
    if (refs)
        snprintf(refs, 512, "%s", o->refs);
    /* the receipt as the client hands it over: Core's text and its id */
    const char *text = "{\"receipt_id\":\"rc_1\",\"receipt_status\":\"succeeded\"}";
    json_value *body = json_new_object();
    trace_reply r = {TRACE_OK, 200, body, NULL, NULL, 0};
    trace_receipt rc = {text, strlen(text), "rc_1"};
    o->receipt_cb(&r, &rc, o->arg);
    json_free(body);
    free(o);
}

static void answer_attempt(int *failed, char payload[512])
{
    answer_attempt_refs(failed, payload, NULL);
}

/* The finalization fails: Trace Core unavailable. */
static void answer_attempt_unavailable(char payload[512])
{
    fake_op *o = take(OP_ATTEMPT);
    CHECK(o != NULL);
    if (!o)
        return;
    snprintf(payload, 512, "%s", o->payload);
    trace_reply r = {TRACE_UNAVAILABLE, 503, NULL, NULL, "down", 0};
    o->receipt_cb(&r, NULL, o->arg);
    free(o);
}

static void answer_idem(idem_decision d, const char *record)
{
    fake_op *o = take(OP_IDEM);
    CHECK(o != NULL);
    if (o)
        o->idem_cb(d, record, record ? strlen(record) : 0, o->arg);
    free(o);
}

/* ---- tests ---- */

static void test_adhoc_rest_read(void)
{
    result r;
    reset_counts();
    start("{\"kn_id\":\"kn_1\"}", 0, NULL, &r);
    CHECK(g_started[OP_POLICY] == 0 && r.done == 0);
    int want = -1;
    answer_call("{\"n\":1}", 0, &want);
    CHECK(want == 0); /* nothing recorded: no tree needed for JSON */
    CHECK(r.done == 1);
    CHECK(r.o.status == 200 && !r.o.is_error);
    CHECK_STR(r.o.json.data, "{\"n\":1}");
    CHECK_STR(r.o.code, "ok");
    CHECK(n_pending() == 0);
    result_free(&r);
}

/* A recorded MCP call: policy, interaction, ensure, tool, attempt; the receipt is
 * structuredContent.bkn_receipt (a value) and the text block is the TOON text. */
static void test_recorded_call_and_lease_reuse(void)
{
    result r;
    char lease[160], payload[512];
    int want = 0, failed = -1;
    reset_counts();
    g_lease.set = 0;
    start(CTX_ARGS, 1, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    answer_get("conv_1", "active", "lease_A");
    answer_ensure(NULL, 0, lease);
    CHECK_STR(lease, "lease_A");
    answer_call("{\"n\":1,\"s\":\"x\"}", 0, &want);
    CHECK(want == 1); /* the attempt payload is built from the value */
    answer_attempt(&failed, payload);
    CHECK(failed == 0);
    CHECK_STR(payload,
              "{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"n\\\":1,\\\"s\\\":\\\"x\\\"}\"}],"
              "\"isError\":false}");
    CHECK(r.done == 1);
    CHECK_STR(r.o.receipt_id, "rc_1");
    CHECK_STR(r.o.operation_id, "op_1");
    CHECK_STR(r.mcp.data,
              "{\"content\":[{\"type\":\"text\",\"text\":\"n: 1\"}],\"structuredContent\":{\"n\":1,"
              "\"s\":\"x\",\"bkn_receipt\":{\"receipt_id\":\"rc_1\",\"receipt_status\":"
              "\"succeeded\"}},\"isError\":false}");
    result_free(&r);

    /* the next call of the turn reuses the lease: no lookup */
    reset_counts();
    start(CTX_ARGS, 1, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    CHECK(g_started[OP_GET] == 0);
    answer_ensure(NULL, 0, lease);
    CHECK_STR(lease, "lease_A");
    answer_call("{\"n\":2}", 0, NULL);
    answer_attempt(NULL, NULL);
    CHECK(r.done == 1 && !r.o.is_error);
    result_free(&r);

    /* an ensure refused with the reused lease: forgotten, looked up again, retried */
    reset_counts();
    start(CTX_ARGS, 1, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    answer_ensure(NULL, 1, lease);
    CHECK(r.done == 0);
    CHECK(g_started[OP_GET] == 1);
    answer_get("conv_1", "active", "lease_B");
    answer_ensure(NULL, 0, lease);
    CHECK_STR(lease, "lease_B");
    answer_call("{\"n\":3}", 0, NULL);
    answer_attempt(NULL, NULL);
    CHECK(r.done == 1 && !r.o.is_error);
    result_free(&r);

    /* the same refusal with a looked-up lease is the caller's answer */
    reset_counts();
    g_lease.set = 0;
    start(CTX_ARGS, 0, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    answer_get("conv_1", "active", "lease_C");
    answer_ensure(NULL, 1, NULL);
    CHECK(r.done == 1 && r.o.is_error);
    CHECK(r.o.status == 409);
    CHECK_STR(r.o.code, "lease_conflict");
    CHECK(n_pending() == 0);
    result_free(&r);
}

static void test_probe_verdicts(void)
{
    result r;
    /* policy unknown, probe says down: runs unrecorded */
    reset_counts();
    start(CTX_ARGS, 1, NULL, &r);
    answer_policy(CAPTURE_UNKNOWN);
    answer_probe(PROBE_DOWN);
    answer_call("{\"n\":1}", 0, NULL);
    CHECK(r.done == 1 && !r.o.is_error && r.o.unrecorded);
    CHECK(g_started[OP_ATTEMPT] == 0);
    CHECK(strstr(r.mcp.data, "\"_meta\":{\"openbkn.ai/trace-status\":\"unrecorded\"}") != NULL);
    result_free(&r);
    /* alive: the failure was Core's, refused as retryable */
    reset_counts();
    start(CTX_ARGS, 0, NULL, &r);
    answer_policy(CAPTURE_UNKNOWN);
    answer_probe(PROBE_ALIVE);
    CHECK(r.done == 1 && r.o.is_error && r.o.status == 503);
    CHECK_STR(r.o.code, "trace_core_unavailable");
    CHECK(g_started[OP_CALL] == 0);
    result_free(&r);
    /* an ad hoc MCP call after failures: the probe decides */
    reset_counts();
    g_breaker = TRACE_BREAKER_OPEN;
    start("{}", 1, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    answer_probe(PROBE_ALIVE);
    CHECK(r.done == 1 && r.o.status == 400);
    CHECK_STR(r.o.code, "conversation_required");
    result_free(&r);
    g_breaker = TRACE_BREAKER_CLOSED;
}

/* The error object of an outcome's JSON (owned by the caller). */
/* The one error object of an outcome (flat: code, description, solution, ...). */
static json_value *error_of(const call_outcome *o)
{
    return parse(o->json.data ? o->json.data : "");
}

/* Trace Core holds the terminal Operation but the call's idempotency record is gone:
 * a localized operation_already_executed error that names the receipt and the next
 * step, never a success-shaped stub; the tool does not run again. */
static void test_receipt_reuse(void)
{
    result r;
    reset_counts();
    g_lease.set = 0;
    start(CTX_ARGS, 1, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    answer_get("conv_1", "active", "L");
    answer_ensure("completed", 0, NULL);
    CHECK(g_started[OP_CALL] == 0); /* the tool does not run again */
    CHECK(r.done == 1 && r.o.is_error && r.o.status == 409);
    CHECK_STR(r.o.code, "operation_already_executed");
    CHECK_STR(r.o.receipt_id, "rc_1");
    CHECK_STR(r.o.operation_id, "op_1");
    json_value *e = error_of(&r.o);
    CHECK_STR(json_get_string(e, "code"), "operation_already_executed");
    CHECK(json_typeof(json_get(e, "retryable")) == JSON_FALSE);
    CHECK_STR(json_get_string(e, "required_action"), "use_new_idempotency_key"); /* a read */
    CHECK(strstr(json_get_string(e, "description"), "already ran") != NULL);
    CHECK(strstr(json_get_string(e, "description"), "rc_1") != NULL);
    const json_value *d = json_get(e, "details");
    CHECK_STR(json_get_string(d, "operation_id"), "op_1");
    CHECK_STR(json_get_string(d, "receipt_id"), "rc_1");
    CHECK_STR(json_get_string(d, "tool_name"), "query_object_instance");
    CHECK(json_get_int(json_get(d, "attempt")) == 1);
    json_free(e);
    CHECK(strstr(r.mcp.data, "\"isError\":true") != NULL);
    CHECK(strstr(r.mcp.data, "reused") == NULL);
    /* the receipt is a member of the error object in the text block (no structuredContent) */
    CHECK(strstr(r.mcp.data, "\\\"bkn_receipt\\\":{\\\"receipt_id\\\":\\\"rc_1\\\"}") != NULL);
    CHECK(strstr(r.mcp.data, "structuredContent") == NULL);
    result_free(&r);
    /* zh-CN: the same error in the deployment language */
    reset_counts();
    g_lang = LANG_ZH_CN;
    start(CTX_ARGS, 1, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    answer_ensure("completed", 0, NULL);
    e = error_of(&r.o);
    CHECK(strstr(json_get_string(e, "description"), "已经执行过") != NULL);
    CHECK(strstr(json_get_string(e, "description"), "already") == NULL);
    json_free(e);
    g_lang = LANG_EN_US;
    result_free(&r);
    reset_counts();
    start(CTX_ARGS, 0, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    answer_ensure("failed", 0, NULL);
    CHECK(r.done == 1 && r.o.is_error && r.o.status == 409);
    CHECK_STR(r.o.code, "operation_already_executed");
    result_free(&r);
    reset_counts();
    start(CTX_ARGS, 0, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    answer_ensure("pending", 0, NULL);
    CHECK(r.done == 1 && r.o.is_error && r.o.status == 409);
    CHECK_STR(r.o.code, "receipt_pending");
    CHECK_STR(r.o.receipt_id, "rc_1"); /* still named in the REST headers */
    result_free(&r);
    /* with the claim of an invocation id: pending and younger than a claim lives,
     * its owner may still finish it (retry); older, nobody will (outcome unknown) */
    static const char *PENDING =
        "{\"operation\":{\"operation_id\":\"op_1\",\"attempt\":1,\"created_at\":\"%s\"},"
        "\"receipt\":{\"receipt_id\":\"rc_1\",\"receipt_status\":\"pending\"}}";
    for (int old = 0; old <= 1; old++) {
        char when[40], body[300];
        time_t t = (time_t)(now_wall_ms() / 1000) - (old ? 120 : 5);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S.250Z", &tm);
        snprintf(body, sizeof body, PENDING, when);
        reset_counts();
        g_aborted = 0;
        g_lease.set = 0;
        start(CTX_ARGS, 0, "inv-pending", &r);
        answer_idem(IDEM_RUN, NULL);
        answer_policy(CAPTURE_ENABLED);
        answer_get("conv_1", "active", "L");
        answer_ensure_body("pending", 0, NULL, body);
        CHECK(r.done == 1 && r.o.is_error && r.o.status == 409);
        CHECK_STR(r.o.code, old ? "operation_outcome_unknown" : "receipt_pending");
        json_value *e = error_of(&r.o);
        CHECK(json_typeof(json_get(e, "retryable")) == (old ? JSON_FALSE : JSON_TRUE));
        if (old) {
            CHECK_STR(json_get_string(e, "required_action"), "use_new_idempotency_key");
            CHECK_STR(json_get_string(json_get(e, "details"), "operation_id"), "op_1");
            CHECK(strstr(json_get_string(e, "description"), "never recorded") != NULL);
        }
        CHECK(g_aborted == 1 && g_started[OP_CALL] == 0); /* nothing ran; the claim is given back */
        json_free(e);
        result_free(&r);
    }
}

/* execute_action: the attempt records the run it started on the receipt
 * (an action_instance business ref), and a retry whose record is gone is told to
 * read that run with get_action_execution. */
static void test_action_run_on_receipt(void)
{
    static const char *ARGS = "{\"kn_id\":\"kn_1\",\"at_id\":\"at_1\",\"bkn_context\":{"
                              "\"conversation_id\":\"conv_1\",\"interaction_id\":\"int_1\","
                              "\"business_refs\":[{\"ref_type\":\"knowledge_network\","
                              "\"ref_id\":\"kn:kn_1\"}]}}";
    result r;
    char refs[512];
    reset_counts();
    g_lease.set = 0;
    g_tool = &ACTION;
    start(ARGS, 0, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    answer_get("conv_1", "active", "L");
    answer_ensure(NULL, 0, NULL);
    answer_call("{\"execution_id\":\"ex_9\",\"status\":\"pending\"}", 0, NULL);
    answer_attempt_refs(NULL, NULL, refs);
    CHECK_STR(refs, "[{\"ref_type\":\"knowledge_network\",\"ref_id\":\"kn:kn_1\",\"version\":"
                    "\"unversioned\"},{\"ref_type\":\"action_instance\",\"ref_id\":"
                    "\"action_instance:kn_1:at_1:ex_9\",\"version\":\"unversioned\"}]");
    CHECK(r.done == 1 && !r.o.is_error);
    result_free(&r);
    /* an id Trace Core could not split is not recorded */
    reset_counts();
    start(ARGS, 0, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    answer_ensure(NULL, 0, NULL);
    answer_call("{\"execution_id\":\"ex:9\"}", 0, NULL);
    answer_attempt_refs(NULL, NULL, refs);
    CHECK(strstr(refs, "action_instance") == NULL);
    result_free(&r);

    reset_counts();
    start(ARGS, 1, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    answer_ensure_body("completed", 0, NULL,
                       "{\"operation\":{\"operation_id\":\"op_1\",\"attempt\":1},\"receipt\":{"
                       "\"receipt_id\":\"rc_1\",\"receipt_status\":\"completed\",\"business_refs\":"
                       "[{\"ref_type\":\"action_instance\",\"ref_id\":"
                       "\"action_instance:kn_1:at_1:ex_9\",\"version\":\"unversioned\"}]}}");
    CHECK(g_started[OP_CALL] == 0);
    CHECK(r.done == 1 && r.o.is_error && r.o.status == 409);
    json_value *e = error_of(&r.o);
    CHECK_STR(json_get_string(e, "required_action"), "read_outcome");
    CHECK(strstr(json_get_string(e, "description"), "get_action_execution") != NULL);
    CHECK(strstr(json_get_string(e, "description"), "ex_9") != NULL);
    const json_value *d = json_get(e, "details");
    CHECK_STR(json_get_string(d, "execution_id"), "ex_9");
    CHECK_STR(json_get_string(d, "kn_id"), "kn_1");
    CHECK_STR(json_get_string(d, "receipt_status"), "completed");
    const json_value *next = json_get(d, "next_call");
    CHECK_STR(json_get_string(next, "name"), "get_action_execution");
    CHECK_STR(json_get_string(json_get(next, "arguments"), "execution_id"), "ex_9");
    json_free(e);
    result_free(&r);
    /* a receipt without a run (the action failed): check what it did */
    reset_counts();
    start(ARGS, 1, NULL, &r);
    answer_policy(CAPTURE_ENABLED);
    answer_ensure("failed", 0, NULL);
    e = error_of(&r.o);
    CHECK_STR(json_get_string(e, "required_action"), "read_outcome");
    CHECK(json_get(json_get(e, "details"), "next_call") == NULL);
    json_free(e);
    result_free(&r);
    g_tool = &TOOL;
}

/* One scope for the MCP surfaces, another for REST: the idempotency key and the
 * Operation key agree on it. */
static void test_scope(void)
{
    static const char *const surfaces[] = {"mcp", "compact", "ptc"};
    char idem0[65] = "", op0[40] = "";
    for (size_t i = 0; i < 4; i++) {
        result r;
        reset_counts();
        g_lease.set = 0;
        g_surface = i < 3 ? surfaces[i] : NULL;
        start(CTX_ARGS, i < 3, "inv-scope", &r);
        answer_idem(IDEM_RUN, NULL);
        answer_policy(CAPTURE_ENABLED);
        answer_get("conv_1", "active", "L");
        answer_ensure(NULL, 0, NULL);
        answer_call("{\"n\":1}", 0, NULL);
        answer_attempt(NULL, NULL);
        CHECK(r.done == 1);
        if (i == 0) {
            memcpy(idem0, g_idem_key, sizeof idem0);
            memcpy(op0, g_op_key, sizeof op0);
        } else if (i < 3) {
            CHECK_STR(g_idem_key, idem0);
            CHECK_STR(g_op_key, op0);
        } else {
            CHECK(strcmp(g_idem_key, idem0) != 0);
            CHECK(strcmp(g_op_key, op0) != 0);
        }
        result_free(&r);
    }
    g_surface = NULL;
}

/* A retry with the same invocation id: the stored outcome answers, byte for byte. */
static void test_idempotent_replay(void)
{
    result first, again;
    reset_counts();
    g_lease.set = 0;
    g_finished = g_aborted = 0;
    start(CTX_ARGS, 1, "inv-1", &first);
    answer_idem(IDEM_RUN, NULL);
    answer_policy(CAPTURE_ENABLED);
    answer_get("conv_1", "active", "L");
    answer_ensure(NULL, 0, NULL);
    answer_call("{\"big\":12345678901234567890,\"f\":1.50}", 0, NULL);
    answer_attempt(NULL, NULL);
    CHECK(first.done == 1 && g_finished == 1);
    char *record = strdup(g_record.data);
    start(CTX_ARGS, 1, "inv-1", &again);
    answer_idem(IDEM_REPLAY, record);
    CHECK(again.done == 1);
    CHECK_STR(again.o.code, "replay");
    CHECK_STR(again.mcp.data, first.mcp.data);
    CHECK(g_started[OP_CALL] == 1 && g_finished == 1);
    free(record);
    result_free(&first);
    result_free(&again);
    /* a record that cannot be read is a retryable refusal */
    start(CTX_ARGS, 1, "inv-1", &again);
    answer_idem(IDEM_REPLAY, "{\"not\":\"a record\"}");
    CHECK(again.done == 1 && again.o.status == 503);
    CHECK_STR(again.o.code, "state_store_unavailable");
    result_free(&again);
}

/* The tool ran and its finalization failed: the result stands, marked
 * receipt_pending with the pending receipt's id, the same attempt is handed to the
 * background finalization, and the stored record (a replay) keeps the mark. */
static void test_finalize_fails(void)
{
    result first, again;
    char payload[512];
    reset_counts();
    g_lease.set = 0;
    g_finished = g_aborted = 0;
    g_later = 0;
    start(CTX_ARGS, 1, "inv-fin", &first);
    answer_idem(IDEM_RUN, NULL);
    answer_policy(CAPTURE_ENABLED);
    answer_get("conv_1", "active", "L");
    answer_ensure(NULL, 0, NULL);
    answer_call("{\"n\":2}", 0, NULL);
    answer_attempt_unavailable(payload);
    CHECK(first.done == 1 && !first.o.is_error);
    CHECK(first.o.receipt_pending == 1 && first.o.receipt_json.len == 0);
    CHECK(first.o.receipt_id[0] != '\0');
    CHECK(g_later == 1);
    CHECK_STR(g_later_payload, payload);
    CHECK(strstr(first.mcp.data, "\"openbkn.ai/trace-status\":\"receipt_pending\"") != NULL);
    CHECK(g_finished == 1);
    char *record = strdup(g_record.data);
    start(CTX_ARGS, 1, "inv-fin", &again);
    answer_idem(IDEM_REPLAY, record);
    CHECK(again.done == 1 && again.o.receipt_pending == 1);
    CHECK_STR(again.mcp.data, first.mcp.data);
    CHECK(g_later == 1 && n_pending() == 0);
    free(record);
    result_free(&first);
    result_free(&again);
}

/* A stored retryable error replayed: not retryable under that id any more, with
 * the next step; a stored error that was not retryable replays unchanged. */
static void test_replayed_error(void)
{
    result first, again;
    reset_counts();
    g_lease.set = 0;
    g_finished = g_aborted = 0;
    start(CTX_ARGS, 1, "inv-err", &first);
    answer_idem(IDEM_RUN, NULL);
    answer_policy(CAPTURE_ENABLED);
    answer_get("conv_1", "active", "L");
    answer_ensure(NULL, 0, NULL);
    answer_call("{\"code\":\"X.Unavailable\",\"description\":\"d\",\"solution\":\"s\","
                "\"retryable\":true,\"retry_after_ms\":1000,\"required_action\":\"retry_later\"}",
                1, NULL);
    answer_attempt(NULL, NULL);
    CHECK(first.done == 1 && first.o.is_error && g_finished == 1);
    CHECK(strstr(first.o.json.data, "\"retryable\":true") != NULL);
    char *record = strdup(g_record.data);
    start(CTX_ARGS, 1, "inv-err", &again);
    answer_idem(IDEM_REPLAY, record);
    CHECK(again.done == 1 && again.o.is_error);
    json_value *e = parse(again.o.json.data);
    CHECK_STR(json_get_string(e, "code"), "X.Unavailable");
    CHECK(json_typeof(json_get(e, "retryable")) == JSON_FALSE);
    CHECK(json_get(e, "retry_after_ms") == NULL);
    CHECK_STR(json_get_string(e, "required_action"), "use_new_idempotency_key"); /* a read */
    CHECK(strcmp(json_get_string(e, "solution"), "s") != 0);
    json_free(e);
    free(record);
    result_free(&first);
    result_free(&again);
}

/* A recorded MCP call answered in JSON: no tree is built; the attempt output, the
 * reply and the idempotency record are written from the result's text, which stays
 * byte for byte (a 64-bit id, an integer past int64, [] and {}, key order); the
 * receipt goes in as the last member of structuredContent, also of an empty result;
 * a replay of the record answers the same bytes. */
static void test_recorded_json_from_text(void)
{
    static const char *const bodies[] = {
        "{\"z\":9007199254740993,\"big\":12345678901234567890123,\"tags\":[],\"ext\":{},"
        "\"s\":\"a\\\"b\\u00e9/\"}",
        "{}"};
    static const char *const replies[] = {
        "{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"z\\\":9007199254740993,\\\"big\\\":"
        "12345678901234567890123,\\\"tags\\\":[],\\\"ext\\\":{},\\\"s\\\":\\\"a\\\\\\\"b\\\\u00e9/"
        "\\\"}\"}],\"structuredContent\":{\"z\":9007199254740993,\"big\":12345678901234567890123,"
        "\"tags\":[],\"ext\":{},\"s\":\"a\\\"b\\u00e9/\",\"bkn_receipt\":{\"receipt_id\":\"rc_1\","
        "\"receipt_status\":\"succeeded\"}},\"isError\":false}",
        "{\"content\":[{\"type\":\"text\",\"text\":\"{}\"}],\"structuredContent\":{\"bkn_receipt\":"
        "{\"receipt_id\":\"rc_1\",\"receipt_status\":\"succeeded\"}},\"isError\":false}"};
    static const char *const payloads[] = {
        "{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"z\\\":9007199254740993,\\\"big\\\":"
        "12345678901234567890123,\\\"tags\\\":[],\\\"ext\\\":{},\\\"s\\\":\\\"a\\\\\\\"b\\\\u00e9/"
        "\\\"}\"}],\"isError\":false}",
        "{\"content\":[{\"type\":\"text\",\"text\":\"{}\"}],\"isError\":false}"};
    const char *args = "{\"kn_id\":\"kn_1\",\"response_format\":\"json\",\"bkn_context\":"
                       "{\"conversation_id\":\"conv_1\",\"interaction_id\":\"int_1\"}}";
    for (int i = 0; i < 2; i++) {
        result r, again;
        char payload[512];
        int want = -1, failed = -1;
        reset_counts();
        g_lease.set = 0;
        g_finished = 0;
        start(args, 1, i ? "inv-json-2" : "inv-json-1", &r);
        answer_idem(IDEM_RUN, NULL);
        answer_policy(CAPTURE_ENABLED);
        answer_get("conv_1", "active", "L");
        answer_ensure(NULL, 0, NULL);
        answer_call(bodies[i], 0, &want);
        CHECK(want == 0); /* no tree: everything is written from the text */
        answer_attempt(&failed, payload);
        CHECK(failed == 0);
        CHECK_STR(payload, payloads[i]);
        CHECK(r.done == 1 && g_finished == 1);
        CHECK_STR(r.o.json.data, bodies[i]);
        CHECK_STR(r.mcp.data, replies[i]);
        char *record = strdup(g_record.data);
        start(args, 1, i ? "inv-json-2" : "inv-json-1", &again);
        answer_idem(IDEM_REPLAY, record);
        CHECK(again.done == 1);
        CHECK_STR(again.o.code, "replay");
        CHECK_STR(again.mcp.data, replies[i]);
        free(record);
        result_free(&r);
        result_free(&again);
    }
}

static void test_idempotency_refusals(void)
{
    static const struct {
        idem_decision d;
        int status;
        const char *code;
    } cases[] = {{IDEM_CONFLICT, 409, "idempotency_conflict"},
                 {IDEM_IN_PROGRESS, 409, "in_progress"},
                 {IDEM_UNAVAILABLE, 503, "state_store_unavailable"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result r;
        reset_counts();
        start("{\"kn_id\":\"kn_1\"}", 0, "inv-2", &r);
        answer_idem(cases[i].d, NULL);
        CHECK(r.done == 1 && r.o.is_error && r.o.status == cases[i].status);
        CHECK_STR(r.o.code, cases[i].code);
        CHECK(g_started[OP_CALL] == 0);
        result_free(&r);
    }
    /* a malformed hint is refused before anything runs */
    result r;
    reset_counts();
    start("{}", 0, "bad hint with spaces", &r);
    CHECK(r.done == 1 && r.o.status == 400);
    CHECK_STR(r.o.code, "lifecycle_hint_invalid");
    CHECK(g_started[OP_IDEM] == 0);
    result_free(&r);
}

/* Cancelled at each stage: the pending operation is cancelled, the claim given
 * back, done never runs, and (ASan) nothing leaks. */
static void test_cancel_each_stage(void)
{
    for (int stage = 0; stage <= 6; stage++) {
        result r;
        reset_counts();
        g_lease.set = 0;
        g_aborted = 0;
        flow *f = start(CTX_ARGS, 1, "inv-3", &r);
        op_kind at = OP_IDEM;
        if (stage >= 1) {
            answer_idem(IDEM_RUN, NULL);
            at = OP_POLICY;
        }
        if (stage == 2) {
            answer_policy(CAPTURE_UNKNOWN);
            at = OP_PROBE;
        }
        if (stage >= 3) {
            answer_policy(CAPTURE_ENABLED);
            at = OP_GET;
        }
        if (stage >= 4) {
            answer_get("conv_1", "active", "L");
            at = OP_ENSURE;
        }
        if (stage >= 5) {
            answer_ensure(NULL, 0, NULL);
            at = OP_CALL;
        }
        if (stage >= 6) {
            answer_call("{\"n\":1}", 0, NULL);
            at = OP_ATTEMPT;
        }
        CHECK(n_pending() == 1);
        g_finished = 0;
        flow_cancel(f);
        CHECK(r.done == 0);
        if (stage == 0) {
            /* no claim yet: stopped where it was */
            CHECK(g_cancelled[at] == 1);
            CHECK(n_pending() == 0);
            CHECK(g_aborted == 0);
            continue;
        }
        /* it holds the claim: detached, it runs to its end without a callback, stores
         * its record and never gives the claim back (a retry must not run it again) */
        CHECK(g_cancelled[at] == 0);
        CHECK(n_pending() == 1);
        CHECK(g_gen_refs == 1);
        if (stage == 1)
            answer_policy(CAPTURE_ENABLED);
        if (stage == 2)
            answer_probe(PROBE_DOWN); /* verified outage: runs unrecorded */
        if (stage == 1 || stage == 3)
            answer_get("conv_1", "active", "L");
        if (stage != 2 && stage <= 4)
            answer_ensure(NULL, 0, NULL);
        if (stage <= 5)
            answer_call("{\"n\":1}", 0, NULL);
        if (stage != 2)
            answer_attempt(NULL, NULL);
        CHECK(r.done == 0);
        CHECK(g_finished == 1);
        CHECK(g_aborted == 0);
        CHECK(n_pending() == 0);
        CHECK(g_gen_refs == 0);
        CHECK(flow_detached() == 0);
    }
    /* a process that ends with a detached flow still running frees it without giving
     * its claim back (the claim expires on its own) */
    result r;
    reset_counts();
    g_lease.set = 0;
    g_aborted = 0;
    flow *f = start(CTX_ARGS, 1, "inv-3", &r);
    answer_idem(IDEM_RUN, NULL);
    answer_policy(CAPTURE_ENABLED);
    answer_get("conv_1", "active", "L");
    answer_ensure(NULL, 0, NULL);
    flow_cancel(f);
    CHECK(flow_detached() == 1 && n_pending() == 1 && g_gen_refs == 1);
    flow_drop_detached();
    CHECK(flow_detached() == 0);
    CHECK(g_cancelled[OP_CALL] == 1 && n_pending() == 0);
    CHECK(g_aborted == 0 && g_gen_refs == 0 && r.done == 0);
}

/* A flow detached while Trace Core ensures its Operation starts its tool after the
 * request is gone: the request's trace context must be its own copy by then (the
 * request's strings are overwritten and freed here, as a closed connection's are). */
static void test_detached_keeps_trace_context(void)
{
    result r;
    reset_counts();
    g_lease.set = 0;
    g_aborted = 0;
    char *tp = xstrdup("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    char *ts = xstrdup("vendor=abc");
    char *bg = xstrdup("k=v");
    g_env_traceparent = tp;
    g_env_tracestate = ts;
    g_env_baggage = bg;
    flow *f = start(CTX_ARGS, 1, "inv-9", &r);
    g_env_traceparent = g_env_tracestate = g_env_baggage = NULL;
    answer_idem(IDEM_RUN, NULL);
    answer_policy(CAPTURE_ENABLED);
    answer_get("conv_1", "active", "L");
    g_finished = 0;
    flow_cancel(f); /* the client hung up: ensure is in flight */
    CHECK(flow_detached() == 1);
    memset(tp, 'X', strlen(tp));
    memset(ts, 'X', strlen(ts));
    memset(bg, 'X', strlen(bg));
    free(tp);
    free(ts);
    free(bg);
    g_seen_call[0] = g_seen_attempt[0] = '\0';
    answer_ensure(NULL, 0, NULL);
    CHECK_STR(g_seen_call,
              "vendor=abc|k=v|00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    answer_call("{\"n\":1}", 0, NULL);
    answer_attempt(NULL, NULL);
    CHECK_STR(g_seen_attempt,
              "vendor=abc|k=v|00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01|"
              "req_test_000001");
    CHECK(r.done == 0 && g_finished == 1 && flow_detached() == 0 && n_pending() == 0);
}

static void test_refusals_before_downstream(void)
{
    result r;
    reset_counts();
    start("{\"bkn_context\":{\"conversation_id\":\"conv_1\"}}", 1, NULL, &r);
    CHECK(r.done == 1 && r.o.is_error);
    CHECK_STR(r.o.code, "interaction_required");
    CHECK_STR(r.mcp.data,
              "{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"code\\\":"
              "\\\"interaction_required\\\",\\\"description\\\":\\\"interaction_id is "
              "required\\\",\\\"solution\\\":\\\"Call bkn_start_interaction to start the "
              "turn and pass the conversation_id and interaction_id it returns in "
              "bkn_context\\\",\\\"retryable\\\":false,"
              "\\\"required_action\\\":\\\"bkn_start_interaction\\\"}\"}],"
              "\"isError\":true}");
    CHECK(n_pending() == 0);
    result_free(&r);
    reset_counts();
    start("{\"response_format\":\"yaml\"}", 0, NULL, &r);
    CHECK(r.done == 1 && r.o.status == 400);
    CHECK_STR(r.o.code, "invalid_response_format");
    result_free(&r);
    /* Trace Core not installed: a context cannot be honoured */
    g_installed = 0;
    start(CTX_ARGS, 0, NULL, &r);
    CHECK(r.done == 1 && r.o.status == 503);
    CHECK_STR(r.o.code, "feature_not_installed");
    result_free(&r);
    g_installed = 1;
}

/* The one Accept parser: q=0 is "not acceptable" wherever it is named; the most
 * specific range decides. And the one Accept-Language parser. */
static void test_accept(void)
{
    CHECK(accept_admits(NULL, "application/json"));
    CHECK(accept_admits("", "text/event-stream"));
    CHECK(accept_admits("application/json, text/event-stream", "text/event-stream"));
    CHECK(!accept_admits("application/json, text/event-stream;q=0", "text/event-stream"));
    CHECK(!accept_admits("application/json;q=0, */*", "application/json"));
    CHECK(accept_admits("application/json;q=0, */*", "text/event-stream"));
    CHECK(accept_admits("text/*;q=0.1", "text/event-stream"));
    CHECK(!accept_admits("text/*;q=0, */*;q=1", "text/event-stream"));
    CHECK(!accept_admits("image/png", "application/json"));
    CHECK(!accept_admits("application/json;q=x", "application/json")); /* malformed q */
    CHECK(accept_q("text/html;q=0.5, application/json", "text/html") == 0.5);
    CHECK(accept_q("text/html", "application/json") < 0);
    CHECK(lang_from_accept("en-US,zh;q=0.5", LANG_ZH_CN) == LANG_EN_US);
    CHECK(lang_from_accept("en;q=0, *", LANG_EN_US) == LANG_ZH_CN);
    CHECK(lang_from_accept(NULL, LANG_EN_US) == LANG_EN_US);
    CHECK_STR(lang_tag(LANG_ZH_CN), "zh-CN");
}

int main(void)
{
    snprintf(g_who.account_id, sizeof g_who.account_id, "u1");
    snprintf(g_who.account_type, sizeof g_who.account_type, "user");
    snprintf(g_who.key, sizeof g_who.key, "%064d", 1);
    test_adhoc_rest_read();
    test_recorded_call_and_lease_reuse();
    test_probe_verdicts();
    test_receipt_reuse();
    test_action_run_on_receipt();
    test_scope();
    test_idempotent_replay();
    test_finalize_fails();
    test_replayed_error();
    test_recorded_json_from_text();
    test_idempotency_refusals();
    test_cancel_each_stage();
    test_detached_keeps_trace_context();
    test_refusals_before_downstream();
    test_accept();
    buf_free(&g_record);
    json_free(g_args);
    return CHECK_DONE();
}
