/* mcp: the MCP Streamable HTTP surface: JSON-RPC framing, sessions,
 * initialize / ping / tools/list / tools/call, GET streams and DELETE; and, on the
 * same endpoints, the stateless protocol era (mcp_era.h): server/discover, the empty
 * prompt and resource lists, subscriptions/listen. One dispatch serves both eras:
 * the era decides the framing, the headers checked and the session check at the
 * edge (handle_post), and the result tail (send_result_ttl, reply_outcome). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "confirm.h"
#include "lifecycle.h"
#include "log.h"
#include "mcp_era.h"
#include "mcp_msg.h"
#include "server.h"
#include "surfaces.h"

static const char *const VERSIONS[] = {"2025-11-25", "2025-06-18", "2025-03-26"};
#define N_VERSIONS (sizeof VERSIONS / sizeof VERSIONS[0])

/* Lifetimes of the stateless era's cacheable results (the tool list also changes
 * on a hot reload: subscriptions/listen says so at once). */
#define LIST_TTL_MS 300000L
#define DISCOVER_TTL_MS 3600000L

/* An open event stream: a session's GET stream, or a stateless subscriptions/listen
 * (sub_id set: the request id's JSON text, which tags every notification). */
struct sse_stream {
    app *app;
    hstream *st;
    char session[SESSION_ID_LEN + 1];
    buf sub_id;         /* listen only */
    int tools_changed;  /* listen: the client asked for notifications/tools/list_changed */
    char who[sizeof(((principal *)0)->key)]; /* listen: the principal, for the bound */
    LIST_ENTRY(sse_stream) link; /* in app->streams */
};

static int version_supported(const char *v)
{
    for (size_t i = 0; i < N_VERSIONS; i++)
        if (!strcmp(v, VERSIONS[i]))
            return 1;
    return 0;
}

/* A JSON-RPC error reply in the request's era (data: JSON text, stateless era only). */
static void rpc_error_data(req_ctx *c, int http_status, int code, const char *message,
                           const char *data)
{
    buf b = BUF_INIT;
    if (req_mcp(c)->modern)
        mcp_era_write_error(&b, req_mcp(c)->rpc_id.data, code, message, data);
    else
        mcp_write_error(&b, req_mcp(c)->rpc_id.data, code, message);
    c->outcome = "rpc_error";
    req_reply(c, http_status, "application/json", b.data, b.len);
    buf_free(&b);
}

static void session_store_unavailable(req_ctx *c);

static void rpc_error(req_ctx *c, int http_status, int code, const char *message)
{
    rpc_error_data(c, http_status, code, message, NULL);
}

static void sse_send(req_ctx *c, const char *json, size_t len)
{
    buf e = BUF_INIT;
    buf_reserve(&e, len + 32);
    buf_append(&e, "event: message\ndata: ", 21);
    buf_append(&e, json, len);
    buf_append(&e, "\n\n", 2);
    req_stream_write(c, e.data, e.len);
    buf_free(&e);
}

/* Starts {"jsonrpc":"2.0","id":<request id>,"result": in b (room for extra more). */
static void begin_result(req_ctx *c, buf *b, size_t extra)
{
    mcp_req *m = req_mcp(c);
    buf_reserve(b, m->rpc_id.len + extra + 64);
    buf_puts(b, "{\"jsonrpc\":\"2.0\",\"id\":");
    buf_append(b, m->rpc_id.data, m->rpc_id.len);
    buf_puts(b, ",\"result\":");
}

/* Ends the response begun by begin_result and sends it; frees c. */
static void send_result(req_ctx *c, buf *b)
{
    mcp_req *m = req_mcp(c);
    buf_putc(b, '}');
    if (m->progress_timer) {
        event_free(m->progress_timer);
        m->progress_timer = NULL;
    }
    if (c->sse) {
        /* The stream began with progress notifications; the result ends it. */
        sse_send(c, b->data, b->len);
        req_end_stream(c, b->len);
    } else {
        req_reply(c, 200, "application/json", b->data, b->len);
    }
}

/* Sends result (a JSON object); in the stateless era with the result tail
 * (resultType, serverInfo and, with ttl_ms >= 0, the caching hints). */
static void send_result_ttl(req_ctx *c, const char *result, size_t len, long ttl_ms)
{
    buf b = BUF_INIT;
    begin_result(c, &b, len + 192);
    if (req_mcp(c)->modern && len >= 2 && result[len - 1] == '}') {
        buf tail = BUF_INIT;
        mcp_era_result_tail(&tail, ttl_ms);
        buf_append(&b, result, len - 1);
        int empty = b.data[b.len - 1] == '{'; /* no comma before the first member */
        buf_append(&b, tail.data + empty, tail.len - (size_t)empty);
        buf_putc(&b, '}');
        buf_free(&tail);
    } else {
        buf_append(&b, result, len);
    }
    send_result(c, &b);
    buf_free(&b);
}

void mcp_send_result(req_ctx *c, const char *result, size_t len)
{
    send_result_ttl(c, result, len, -1);
}

/* The one answer of every tools/call that ran (business tools, lifecycle tools,
 * refusals, replays, errors): the outcome as a CallToolResult. Frees c. */
static void reply_outcome(req_ctx *c, const call_outcome *o)
{
    buf b = BUF_INIT;
    /* Room for the whole answer at once (a realloc would copy it): the text block
     * escaped (JSON text has an escape every few bytes; json_write_string reserves
     * its own worst case a slice at a time), structuredContent the JSON again, and
     * the receipt. */
    size_t text = o->toon && o->toon_text.data ? o->toon_text.len : o->json.len;
    begin_result(c, &b, 2 * text + o->json.len + 512);
    if (req_mcp(c)->modern && !o->unrecorded && !o->receipt_pending) {
        /* the stateless result's members, encoded once */
        static const char TAIL[] =
            ",\"_meta\":{" MCP_ERA_SERVER_INFO "},\"resultType\":\"complete\"}";
        mcp_write_tool_result_open(&b, o);
        buf_append(&b, TAIL, sizeof TAIL - 1);
    } else if (req_mcp(c)->modern) {
        mcp_write_tool_result_ex(&b, o, MCP_ERA_SERVER_INFO, "\"resultType\":\"complete\"");
    } else {
        mcp_write_tool_result(&b, o);
    }
    send_result(c, &b);
    buf_free(&b);
}

/* The call is still running after mcp.progress_interval_ms: switch the response to
 * an SSE stream (the client's Accept admits it) and send notifications/progress,
 * again at every interval, until the result ends the stream. */
static void on_progress(evutil_socket_t fd, short ev, void *arg)
{
    req_ctx *c = arg;
    (void)fd;
    (void)ev;
    mcp_req *pm = req_mcp(c);
    req_stream_begin(c);
    pm->progress_n++;
    buf b = BUF_INIT;
    buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{"
                 "\"progressToken\":");
    buf_append(&b, pm->progress_token.data, pm->progress_token.len);
    buf_printf(&b, ",\"progress\":%d,\"message\":", pm->progress_n);
    char m[200];
    snprintf(m, sizeof m, text_get(TEXT_PROGRESS_RUNNING, c->lang), c->tool,
             (long long)(now_mono_ms() - c->t0));
    json_write_string(&b, m, strlen(m));
    buf_puts(&b, "}}");
    sse_send(c, b.data, b.len);
    buf_free(&b);
}

/* Arms progress notifications when the client sent _meta.progressToken. */
static void arm_progress(req_ctx *c, const json_value *meta)
{
    const json_value *tok = meta ? json_get(meta, "progressToken") : NULL;
    if (!tok || (json_typeof(tok) != JSON_STRING && json_typeof(tok) != JSON_INT))
        return;
    long ms = c->app->cfg->mcp_progress_interval_ms;
    if (ms <= 0)
        return;
    mcp_req *m = req_mcp(c);
    json_write(&m->progress_token, tok, 0);
    m->progress_timer = event_new(c->app->base, -1, EV_PERSIST, on_progress, c);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_add(m->progress_timer, &tv);
}

/* The listing surface of the request: /mcp, /mcp-compact or /mcp/ptc. */
static unsigned surface_bit(const req_ctx *c)
{
    if (!strcmp(c->surface, "compact"))
        return SURFACE_COMPACT;
    if (!strcmp(c->surface, "ptc"))
        return SURFACE_PTC;
    return SURFACE_MCP;
}

static int tool_visible(const req_ctx *c, const tools_info *ti)
{
    return ti && (ti->surfaces & surface_bit(c)) && ti->gate_open;
}

void mcp_list_entries(app *a, unsigned surface, lang_id lang, int ignore_gates, buf *out)
{
    tools_gen *g = tools_host_acquire(a->tools);
    size_t n = g ? tools_gen_count(g) : 0;
    buf_putc(out, '[');
    lifecycle_list_entries(out, g, lang);
    for (size_t i = 0; i < n; i++) {
        const tools_info *ti = tools_gen_info(g, i);
        if (!(ti->surfaces & surface) || (!ignore_gates && !ti->gate_open))
            continue;
        buf_putc(out, ',');
        buf_puts(out, surface == SURFACE_PTC ? ptc_list_json(a, g, ti, lang)
                                             : tools_entry_json(ti, surface, lang));
    }
    buf_putc(out, ']');
    if (g)
        tools_gen_release(g);
}

void mcp_gateway_entries(app *a, unsigned surface, lang_id lang, buf *out)
{
    tools_gen *g = tools_host_acquire(a->tools);
    size_t n = g ? tools_gen_count(g) : 0;
    int first = 1;
    buf_putc(out, '[');
    for (size_t i = 0; i < n; i++) {
        const tools_info *ti = tools_gen_info(g, i);
        if (!(ti->surfaces & SURFACE_GATEWAY) || !ti->gate_open)
            continue;
        if (!first)
            buf_putc(out, ',');
        first = 0;
        buf_puts(out, tools_entry_json(ti, surface, lang));
    }
    buf_putc(out, ']');
    if (g)
        tools_gen_release(g);
}

/* ---- methods ---- */

static void do_initialize(req_ctx *c, const json_value *params)
{
    const char *want = params ? json_get_string(params, "protocolVersion") : NULL;
    const char *ver = want && version_supported(want) ? want : VERSIONS[0];
    char sid[SESSION_ID_LEN + 1];
    const json_value *caps = params ? json_get(params, "capabilities") : NULL;
    const json_value *eli = caps ? json_get(caps, "elicitation") : NULL;
    session_mint_flags(c->app->sessions, &c->who,
                       eli && json_typeof(eli) == JSON_OBJECT ? SESSION_FLAG_ELICITATION : 0, sid);
    req_add_header(c, "Mcp-Session-Id", sid);
    const char *instr = c->app->instructions[c->lang];
    buf b = BUF_INIT;
    buf_puts(&b, "{\"protocolVersion\":");
    json_write_string(&b, ver, strlen(ver));
    buf_puts(&b, ",\"capabilities\":{\"tools\":{\"listChanged\":true}},"
                 "\"serverInfo\":{\"name\":\"context-loader\",\"title\":\"Context Loader\","
                 "\"version\":\"" CL_VERSION "\"}");
    if (instr) {
        buf_puts(&b, ",\"instructions\":");
        json_write_string(&b, instr, strlen(instr));
    }
    buf_putc(&b, '}');
    c->outcome = "ok";
    mcp_send_result(c, b.data, b.len);
    buf_free(&b);
}

static void do_tools_list(req_ctx *c, const json_value *params)
{
    size_t offset = 0;
    char err[128];
    int code = mcp_parse_cursor(params, &offset, err, sizeof err);
    if (code) {
        rpc_error(c, 200, code, err);
        return;
    }
    tools_gen *g = tools_host_acquire(c->app->tools);
    buf b = BUF_INIT;
    buf_puts(&b, "{\"tools\":[");
    /* The two lifecycle tools (orders 10 and 20) come first, then the generation's. */
    buf lc = BUF_INIT;
    lifecycle_list_entries(&lc, g, c->lang);
    size_t seen = 0, listed = 0, n = g ? tools_gen_count(g) : 0;
    size_t page = (size_t)c->app->cfg->mcp_tools_page_size;
    if (page == 0)
        page = 100;
    int more = 0;
    /* lc holds two objects separated by the one top-level comma after the first (none
     * without a generation). */
    const char *first = lc.data ? lc.data : "", *second = lifecycle_second_entry(first);
    const char *entries[2] = {first, second};
    size_t lens[2] = {g ? (size_t)(second - 1 - first) : 0, strlen(second)};
    for (size_t i = g ? 0 : 2; i < 2 + n && !more; i++) {
        const tools_info *ti = i >= 2 ? tools_gen_info(g, i - 2) : NULL;
        if (i >= 2 && !tool_visible(c, ti))
            continue;
        if (seen++ < offset)
            continue;
        if (listed == page) {
            more = 1;
            break;
        }
        if (listed++)
            buf_putc(&b, ',');
        if (i < 2)
            buf_append(&b, entries[i], lens[i]);
        else if (surface_bit(c) == SURFACE_PTC)
            buf_puts(&b, ptc_list_json(c->app, g, ti, c->lang)); /* run_code: the digest */
        else
            buf_puts(&b, tools_entry_json(ti, surface_bit(c), c->lang));
    }
    buf_free(&lc);
    buf_putc(&b, ']');
    if (more)
        buf_printf(&b, ",\"nextCursor\":\"o:%zu\"", offset + listed);
    buf_putc(&b, '}');
    if (g)
        tools_gen_release(g);
    c->outcome = "ok";
    send_result_ttl(c, b.data, b.len, LIST_TTL_MS);
    buf_free(&b);
}

static void cancel_lifecycle(void *op)
{
    lifecycle_cancel(op);
}

static void on_lifecycle_done(const call_outcome *o, void *arg)
{
    req_ctx *c = arg;
    req_pending_clear(c);
    c->outcome = o->code;
    c->trace_ms += o->trace_ms;
    reply_outcome(c, o);
}

/* ---- confirmation by a person (confirm.h; docs/confirmation.md) ---- */

/* The refusal when nobody can be asked: not retryable, naming the hosts that can. */
static void confirm_unavailable(req_ctx *c, const char *tool)
{
    char m[640];
    snprintf(m, sizeof m,
             c->lang == LANG_ZH_CN
                 ? "本部署要求由人确认后才能执行 %s，而此客户端无法发起确认：请使用声明了 elicitation "
                   "能力的 MCP 宿主（2025-11-25 会话在 initialize 中声明，2026-07-28 在 "
                   "clientCapabilities 中声明），或使用 REST 路由并回传确认令牌"
                 : "This deployment requires a person to confirm %s before it runs, and this client "
                   "cannot ask one: use an MCP host that declares the elicitation capability (in "
                   "initialize for 2025-11-25 sessions, in clientCapabilities for 2026-07-28), or "
                   "the REST route with its confirmation token",
             tool);
    if (req_mcp(c)->modern) {
        rpc_error_data(c, 400, -32021, m,
                       "{\"requiredCapabilities\":{\"elicitation\":{}},\"code\":"
                       "\"confirmation_unavailable\",\"retryable\":false,\"required_action\":"
                       "\"confirm_by_person\"}");
        return;
    }
    call_outcome o;
    outcome_init(&o);
    outcome_refuse(&o, 428, "confirmation_unavailable", m, 0, "confirm_by_person", c->lang);
    c->outcome = "confirmation_unavailable";
    reply_outcome(c, &o);
    outcome_free(&o);
}

/* A requestState that cannot be trusted: a JSON-RPC error naming why, never a result. */
static void confirm_state_refused(req_ctx *c, const char *code)
{
    const char *why = !strcmp(code, "confirmation_state_expired")
                          ? "Invalid params: requestState expired (confirm.ttl_s): call the tool "
                            "again without it to ask the person again"
                      : !strcmp(code, "confirmation_state_used")
                          ? "Invalid params: requestState was already answered once: call the tool "
                            "again without it to ask the person again"
                          : "Invalid params: requestState is not one this server issued for this "
                            "caller, tool, arguments and interaction";
    char data[160];
    snprintf(data, sizeof data, "{\"code\":\"%s\",\"retryable\":false}", code);
    c->outcome = code;
    rpc_error_data(c, 200, -32602, why, data);
}

/* Stateless era: the input_required result asking the person, with a fresh state. */
static void confirm_ask(req_ctx *c, const char *name, const char *target,
                        const json_value *target_args, const json_value *args)
{
    buf msg = BUF_INIT, schema = BUF_INIT, b = BUF_INIT;
    char hash[65], state[CONFIRM_STATE_LEN + 1];
    confirm_describe(target, target_args, c->lang, &msg, &schema);
    confirm_args_hash(args, hash);
    confirm_state_mint(c->app->sessions, &c->who, name, hash, confirm_interaction(args),
                       c->app->cfg->confirm_ttl_s, state);
    begin_result(c, &b, msg.len * 2 + schema.len + 512);
    buf_puts(&b, "{\"resultType\":\"input_required\",\"inputRequests\":{\"" CONFIRM_INPUT_KEY
                 "\":{\"method\":\"elicitation/create\",\"params\":{\"mode\":\"form\",\"message\":");
    json_write_string(&b, msg.data, msg.len);
    buf_puts(&b, ",\"requestedSchema\":");
    buf_append(&b, schema.data, schema.len);
    buf_puts(&b, "}}},\"requestState\":\"");
    buf_puts(&b, state);
    buf_puts(&b, "\",\"_meta\":{" MCP_ERA_SERVER_INFO "}}");
    c->outcome = "input_required";
    send_result(c, &b);
    buf_free(&b);
    buf_free(&msg);
    buf_free(&schema);
}

/* What the person answered (an ElicitResult): 1 accept (with confirm true), 0 not
 * accepted (*code says how), -1 no usable answer. */
static int confirm_answer(const json_value *res, const char **code)
{
    const char *action = res && json_typeof(res) == JSON_OBJECT ? json_get_string(res, "action") : NULL;
    if (!action)
        return -1;
    if (!strcmp(action, "accept")) {
        const json_value *content = json_get(res, "content");
        const json_value *yes = content ? json_get(content, CONFIRM_INPUT_KEY) : NULL;
        if (yes && json_typeof(yes) == JSON_TRUE)
            return 1;
        *code = "confirmation_declined"; /* accepted the form, left the box unticked */
        return 0;
    }
    if (!strcmp(action, "decline")) {
        *code = "confirmation_declined";
        return 0;
    }
    if (!strcmp(action, "cancel")) {
        *code = "confirmation_cancelled";
        return 0;
    }
    return -1;
}

static const char *decline_message(const char *code, lang_id lang, const char *tool)
{
    static char m[320];
    int cancelled = !strcmp(code, "confirmation_cancelled");
    if (lang == LANG_ZH_CN)
        snprintf(m, sizeof m, cancelled ? "确认已取消：%s 未执行。除非用户再次要求，请勿重复此调用"
                                        : "用户拒绝了确认：%s 未执行。除非用户再次要求，请勿重复此调用",
                 tool);
    else
        snprintf(m, sizeof m,
                 cancelled ? "The person cancelled the confirmation: %s did not run. Do not repeat "
                             "the call unless the person asks again"
                           : "The person declined: %s did not run. Do not repeat the call unless "
                             "the person asks again",
                 tool);
    return m;
}

/* A confirmed (or declined) call waiting for its state's one use to be recorded. */
typedef struct confirm_use {
    req_ctx *c;
    store_op *op;
    const tools_info *ti;
    const json_value *args, *meta;
    const char *declined; /* static code, or NULL: accepted */
} confirm_use;

static void cancel_confirm_use(void *op)
{
    confirm_use *u = op;
    store_cancel(u->op);
    free(u);
}

static void on_confirm_claimed(int rc, const char *val, size_t len, void *arg)
{
    confirm_use *u = arg;
    req_ctx *c = u->c;
    (void)val;
    (void)len;
    req_pending_clear(c);
    confirm_use me = *u;
    free(u);
    if (rc == 1) {
        confirm_state_refused(c, "confirmation_state_used");
        return;
    }
    if (rc != 0) {
        session_store_unavailable(c);
        return;
    }
    arm_progress(c, me.meta);
    if (me.declined)
        req_flow_start_declined(c, me.ti, me.args, me.meta, reply_outcome, me.declined,
                                decline_message(me.declined, c->lang, c->tool));
    else
        req_flow_start(c, me.ti, me.args, me.meta, reply_outcome);
}

/* Stateless era, a call that needs confirmation: ask, or take the answer the retry
 * carries (params.inputResponses, params.requestState). */
static void confirm_modern(req_ctx *c, const tools_info *ti, const char *name,
                           const json_value *params, const json_value *args,
                           const json_value *meta, const char *target,
                           const json_value *target_args)
{
    const json_value *caps = meta ? json_get(meta, MCP_META_CLIENT_CAPABILITIES) : NULL;
    const json_value *eli = caps ? json_get(caps, "elicitation") : NULL;
    const json_value *st = json_get(params, "requestState");
    if (!st) {
        if (!eli || json_typeof(eli) != JSON_OBJECT)
            confirm_unavailable(c, target);
        else
            confirm_ask(c, name, target, target_args, args);
        return;
    }
    char hash[65], nonce[33];
    long long exp = 0;
    confirm_args_hash(args, hash);
    const char *state = json_typeof(st) == JSON_STRING ? json_get_str(st, NULL) : NULL;
    confirm_status cs = confirm_state_check(c->app->sessions, &c->who, name, hash,
                                            confirm_interaction(args), state, nonce, &exp);
    if (cs != CONFIRM_OK) {
        confirm_state_refused(c, cs == CONFIRM_EXPIRED ? "confirmation_state_expired"
                                                       : "confirmation_state_invalid");
        return;
    }
    const json_value *resp = json_get(params, "inputResponses");
    const json_value *answer = resp ? json_get(resp, CONFIRM_INPUT_KEY) : NULL;
    const char *declined = NULL;
    int a = confirm_answer(answer, &declined);
    if (a < 0) { /* no answer to our question: ask again */
        confirm_ask(c, name, target, target_args, args);
        return;
    }
    /* The state answers once: a second use is refused, whatever it says. */
    char key[64];
    snprintf(key, sizeof key, "confirm:used:%s", nonce);
    long ttl_ms = (long)(exp * 1000 - now_wall_ms()) + 1000;
    confirm_use *u = xcalloc(1, sizeof *u);
    u->c = c;
    u->ti = ti;
    u->args = args;
    u->meta = meta;
    u->declined = a ? NULL : declined;
    req_async_begin(c);
    req_pending_set(c, u, cancel_confirm_use);
    u->op = store_claim(c->app->store, key, "1", 1, ttl_ms, on_confirm_claimed, u);
}

/* Session era, a client that declared elicitation: the response turns into an SSE
 * stream carrying elicitation/create (id "confirm-<nonce>"); the client POSTs its
 * answer to the endpoint as a JSON-RPC response (mcp_confirm_answer). The answer
 * reaches the waiting call directly in this process, or through the state store
 * (key "confirm:answer:<nonce>:<principal key>", polled) from another. Unanswered
 * for confirm.ttl_s: cancelled. */
typedef struct confirm_wait {
    req_ctx *c;
    const tools_info *ti;
    const json_value *args, *meta;
    char nonce[33];
    char store_key[160];
    struct event *tick;
    store_op *op;
    int64_t deadline_ms, next_ping_ms;
    LIST_ENTRY(confirm_wait) link;
} confirm_wait;

static LIST_HEAD(, confirm_wait) g_confirm_waits = LIST_HEAD_INITIALIZER(g_confirm_waits);

#define CONFIRM_POLL_MS 250
#define CONFIRM_PING_MS 10000

static void confirm_wait_free(confirm_wait *w)
{
    LIST_REMOVE(w, link);
    if (w->tick)
        event_free(w->tick);
    if (w->op)
        store_cancel(w->op);
    free(w);
}

static void cancel_confirm_wait(void *op)
{
    confirm_wait_free(op);
}

static void noop_store_cb(int rc, const char *val, size_t len, void *arg)
{
    (void)rc;
    (void)val;
    (void)len;
    (void)arg;
}

/* The answer arrived (msg: the client's JSON-RPC response; NULL: the time ran
 * out): run the call, or go through the flow declined. Frees w. */
static void confirm_wait_done(confirm_wait *w, const json_value *msg)
{
    req_ctx *c = w->c;
    const tools_info *ti = w->ti;
    const json_value *args = w->args, *meta = w->meta;
    req_pending_clear(c);
    store_del(c->app->store, w->store_key, noop_store_cb, NULL);
    confirm_wait_free(w);
    const json_value *res = msg ? json_get(msg, "result") : NULL;
    const char *declined = "confirmation_cancelled";
    int a = confirm_answer(res, &declined);
    if (a > 0)
        req_flow_start(c, ti, args, meta, reply_outcome);
    else
        req_flow_start_declined(c, ti, args, meta, reply_outcome, declined,
                                decline_message(declined, c->lang, c->tool));
}

static void on_confirm_poll(int rc, const char *val, size_t len, void *arg)
{
    confirm_wait *w = arg;
    w->op = NULL;
    if (rc != 0)
        return; /* not yet (or the store failed: the next tick asks again) */
    json_value *msg = json_parse(val, len, NULL, NULL, 0);
    confirm_wait_done(w, msg);
    json_free(msg);
}

static void on_confirm_tick(evutil_socket_t fd, short ev, void *arg)
{
    confirm_wait *w = arg;
    (void)fd;
    (void)ev;
    int64_t now = now_mono_ms();
    if (now >= w->deadline_ms) {
        confirm_wait_done(w, NULL);
        return;
    }
    if (now >= w->next_ping_ms) { /* keeps the stream (and its proxies) from idling out */
        req_stream_write(w->c, ": waiting for confirmation\n\n", 28);
        w->next_ping_ms = now + CONFIRM_PING_MS;
    }
    if (!w->op)
        w->op = store_get(w->c->app->store, w->store_key, on_confirm_poll, w);
}

static void confirm_legacy(req_ctx *c, const tools_info *ti, const json_value *args,
                           const json_value *meta, const char *target,
                           const json_value *target_args)
{
    confirm_wait *w = xcalloc(1, sizeof *w);
    unsigned char rnd[16];
    random_bytes(rnd, sizeof rnd);
    hex_encode(rnd, sizeof rnd, w->nonce);
    w->c = c;
    w->ti = ti;
    w->args = args;
    w->meta = meta;
    snprintf(w->store_key, sizeof w->store_key, "confirm:answer:%s:%s", w->nonce, c->who.key);
    long ttl_s = c->app->cfg->confirm_ttl_s > 0 ? c->app->cfg->confirm_ttl_s : 600;
    w->deadline_ms = now_mono_ms() + ttl_s * 1000;
    w->next_ping_ms = now_mono_ms() + CONFIRM_PING_MS;
    LIST_INSERT_HEAD(&g_confirm_waits, w, link);
    req_async_begin(c);
    req_pending_set(c, w, cancel_confirm_wait);
    buf msg = BUF_INIT, schema = BUF_INIT, b = BUF_INIT;
    confirm_describe(target, target_args, c->lang, &msg, &schema);
    buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":\"confirm-%s\",\"method\":\"elicitation/create\","
                   "\"params\":{\"message\":",
               w->nonce);
    json_write_string(&b, msg.data, msg.len);
    buf_puts(&b, ",\"requestedSchema\":");
    buf_append(&b, schema.data, schema.len);
    buf_puts(&b, "}}");
    req_stream_begin(c);
    sse_send(c, b.data, b.len);
    buf_free(&b);
    buf_free(&msg);
    buf_free(&schema);
    w->tick = event_new(c->app->base, -1, EV_PERSIST, on_confirm_tick, w);
    struct timeval tv = {0, CONFIRM_POLL_MS * 1000};
    event_add(w->tick, &tv);
}

/* A JSON-RPC response POSTed by a client: 1 when it answers one of our
 * confirmation questions (delivered here, or left in the store for the instance
 * that asked), else 0. */
static int confirm_response(req_ctx *c, const json_value *msg)
{
    const char *id = json_get_string(msg, "id");
    if (!id || strncmp(id, "confirm-", 8) != 0 || strlen(id) != 8 + 32)
        return 0;
    const char *nonce = id + 8;
    confirm_wait *w;
    LIST_FOREACH(w, &g_confirm_waits, link)
    if (!strcmp(w->nonce, nonce) && !strcmp(w->c->who.key, c->who.key)) {
        confirm_wait_done(w, msg);
        return 1;
    }
    char key[160];
    snprintf(key, sizeof key, "confirm:answer:%s:%s", nonce, c->who.key);
    size_t len;
    const char *body = req_body(c, &len);
    long ttl_s = c->app->cfg->confirm_ttl_s > 0 ? c->app->cfg->confirm_ttl_s : 600;
    store_set(c->app->store, key, body, len, ttl_s * 1000, noop_store_cb, NULL);
    return 1;
}

static void do_tools_call(req_ctx *c, const json_value *params)
{
    mcp_call mc;
    char err[128];
    int code = mcp_parse_call(params, &mc, err, sizeof err);
    if (mc.name)
        str_copy(c->tool, sizeof c->tool, mc.name);
    if (code) {
        rpc_error(c, 200, code, err);
        return;
    }
    const char *name = mc.name;
    const json_value *args = mc.args, *meta = mc.meta;
    req_trace_from_meta(c, meta); /* _meta's trace context, as the headers' */
    if (lifecycle_is_tool(name)) {
        c->tool_builtin = 1;
        c->gen = tools_host_acquire(c->app->tools); /* declares the tools' arguments */
        req_async_begin(c);
        lifecycle_input in;
        memset(&in, 0, sizeof in);
        in.trace = c->app->trace;
        in.who = &c->who;
        in.request_id = c->request_id;
        in.caller_request_id = c->caller_request_id;
        in.lang = c->lang;
        in.name = name;
        in.args = args;
        in.gen = c->gen;
        in.meta = meta;
        in.invocation_header = req_header(c, "X-OpenBKN-Client-Invocation-Id");
        in.host_key_header = req_header(c, "X-OpenBKN-Host-Conversation-Key");
        in.traceparent = c->traceparent;
        in.tracestate = c->tracestate;
        in.baggage = c->baggage;
        lifecycle *l = lifecycle_new(&in, on_lifecycle_done, c);
        req_pending_set(c, l, cancel_lifecycle);
        lifecycle_run(l);
        return;
    }
    c->gen = tools_host_acquire(c->app->tools);
    const tools_info *ti = c->gen ? tools_gen_find(c->gen, name) : NULL;
    if (!tool_visible(c, ti)) {
        /* Absent, gated off and REST-only tools must be indistinguishable. */
        buf m = BUF_INIT;
        buf_puts(&m, "Unknown tool: ");
        buf_puts(&m, name);
        rpc_error(c, 200, -32602, m.data);
        buf_free(&m);
        return;
    }
    const char *target;
    const json_value *target_args;
    confirm_target(name, args, &target, &target_args);
    if (confirm_applies(c->app->cfg->confirm_tools, target, target_args)) {
        if (req_mcp(c)->meta_text) { /* confirmation reads the client's capabilities */
            mcp_params_meta_parse((json_value *)params, (size_t)c->app->cfg->limits_json_max_depth);
            req_mcp(c)->meta_text = 0;
            meta = mcp_parse_call(params, &mc, err, sizeof err) ? NULL : mc.meta;
        }
        if (req_mcp(c)->modern)
            confirm_modern(c, ti, name, params, args, meta, target, target_args);
        else if (session_id_flags(req_header(c, "Mcp-Session-Id")) & SESSION_FLAG_ELICITATION)
            confirm_legacy(c, ti, args, meta, target, target_args);
        else
            confirm_unavailable(c, target);
        return;
    }
    req_async_begin(c);
    arm_progress(c, meta);
    req_flow_start(c, ti, args, meta, reply_outcome);
}

static void do_ping(req_ctx *c, const json_value *params)
{
    (void)params;
    c->outcome = "ok";
    mcp_send_result(c, "{}", 2);
}

/* ---- the stateless era's own methods ---- */

static void do_discover(req_ctx *c, const json_value *params)
{
    (void)params;
    buf b = BUF_INIT;
    mcp_era_discover(&b, c->app->instructions[c->lang]);
    c->outcome = "ok";
    send_result_ttl(c, b.data, b.len, DISCOVER_TTL_MS);
    buf_free(&b);
}

/* The server offers no prompts and no resources: their lists are empty (and
 * cacheable), a get or read names something that does not exist. */
static void empty_list(req_ctx *c, const char *member)
{
    char r[64];
    int n = snprintf(r, sizeof r, "{\"%s\":[]}", member);
    c->outcome = "ok";
    send_result_ttl(c, r, (size_t)n, LIST_TTL_MS);
}

static void do_prompts_list(req_ctx *c, const json_value *params)
{
    (void)params;
    empty_list(c, "prompts");
}

static void do_resources_list(req_ctx *c, const json_value *params)
{
    (void)params;
    empty_list(c, "resources");
}

static void do_templates_list(req_ctx *c, const json_value *params)
{
    (void)params;
    empty_list(c, "resourceTemplates");
}

static void do_prompts_get(req_ctx *c, const json_value *params)
{
    const char *name = params ? json_get_string(params, "name") : NULL;
    buf m = BUF_INIT;
    buf_puts(&m, name ? "Unknown prompt: " : "Invalid params: name must be a string");
    if (name)
        buf_append(&m, name, strnlen(name, 200));
    rpc_error(c, 200, -32602, m.data);
    buf_free(&m);
}

static void do_resources_read(req_ctx *c, const json_value *params)
{
    const char *uri = params ? json_get_string(params, "uri") : NULL;
    if (!uri) {
        rpc_error(c, 200, -32602, "Invalid params: uri must be a string");
        return;
    }
    buf d = BUF_INIT;
    buf_puts(&d, "{\"uri\":");
    json_write_string(&d, uri, strlen(uri));
    buf_putc(&d, '}');
    rpc_error_data(c, 200, -32602, "Resource not found", d.data);
    buf_free(&d);
}

/* ---- event streams: GET (session era) and subscriptions/listen (stateless) ---- */

static void stream_unlink(app *a, sse_stream *s)
{
    LIST_REMOVE(s, link);
    a->n_streams--;
}

/* The client went away (the HTTP layer frees the stream itself). */
static void stream_free(sse_stream *s)
{
    buf_free(&s->sub_id);
    free(s);
}

static void on_stream_close(void *arg)
{
    sse_stream *s = arg;
    stream_unlink(s->app, s);
    stream_free(s);
}

static void stream_write(sse_stream *s, const char *text)
{
    hstream_write(s->st, text, strlen(text));
}

static void open_stream(req_ctx *c, const char *sid)
{
    app *a = c->app;
    sse_stream *s = xcalloc(1, sizeof *s);
    s->app = a;
    str_copy(s->session, sizeof s->session, sid);
    s->st = req_stream_detach(c, on_stream_close, s);
    LIST_INSERT_HEAD(&a->streams, s, link);
    a->n_streams++;
    stream_write(s, ": context-loader stream open\n\n");
}

/* subscriptions/listen: a stream that outlives the request, acknowledged at once
 * with the notification types it will carry (of those asked for, the tool list's
 * changes: the server has no prompts or resources to watch). Closing it is the
 * cancellation. Bounded per principal. */
static void do_listen(req_ctx *c, const json_value *params)
{
    app *a = c->app;
    const json_value *want = params ? json_get(params, "notifications") : NULL;
    if (want && json_typeof(want) != JSON_OBJECT) {
        rpc_error(c, 200, -32602, "Invalid params: notifications must be an object");
        return;
    }
    const json_value *t = want ? json_get(want, "toolsListChanged") : NULL;
    size_t mine = 0;
    sse_stream *s;
    LIST_FOREACH(s, &a->streams, link)
    mine += s->sub_id.len && !strcmp(s->who, c->who.key);
    long max = c->app->cfg->mcp_listen_max_per_principal;
    if ((long)mine >= max) {
        char m[160];
        snprintf(m, sizeof m,
                 "Too many open subscriptions/listen streams for this caller (at most %ld): close "
                 "one first",
                 max);
        req_add_header(c, "Retry-After", "1");
        rpc_error(c, 429, -32600, m);
        return;
    }
    s = xcalloc(1, sizeof *s);
    s->app = a;
    s->tools_changed = t && json_typeof(t) == JSON_TRUE;
    buf_append(&s->sub_id, req_mcp(c)->rpc_id.data, req_mcp(c)->rpc_id.len);
    str_copy(s->who, sizeof s->who, c->who.key);
    buf ack = BUF_INIT;
    buf_puts(&ack, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":"
                   "\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":{\"" MCP_META_SUBSCRIPTION_ID "\":");
    buf_append(&ack, s->sub_id.data, s->sub_id.len);
    buf_puts(&ack, s->tools_changed ? "},\"notifications\":{\"toolsListChanged\":true}}}\n\n"
                                    : "},\"notifications\":{}}}\n\n");
    c->outcome = "listen";
    s->st = req_stream_detach(c, on_stream_close, s);
    LIST_INSERT_HEAD(&a->streams, s, link);
    a->n_streams++;
    stream_write(s, ack.data);
    buf_free(&ack);
}

void mcp_heartbeat(app *a)
{
    sse_stream *s;
    LIST_FOREACH(s, &a->streams, link)
    stream_write(s, ": ping\n\n");
}

/* Digest of what tools/list shows, per listing surface and language: the entries
 * of the visible tools in order. Tool bodies are not part of it, so a change to
 * handle code alone notifies nobody. */
static void list_digest(app *a, tools_gen *g, char out[65])
{
    static const unsigned surfaces[] = {SURFACE_MCP, SURFACE_COMPACT, SURFACE_PTC};
    buf b = BUF_INIT;
    size_t n = g ? tools_gen_count(g) : 0;
    for (size_t s = 0; s < sizeof surfaces / sizeof surfaces[0]; s++)
        for (int l = 0; l < LANG_COUNT; l++) {
            buf_printf(&b, "surface %u lang %d\n", surfaces[s], l);
            for (size_t i = 0; i < n; i++) {
                const tools_info *ti = tools_gen_info(g, i);
                if (!(ti->surfaces & surfaces[s]) || !ti->gate_open)
                    continue;
                buf_puts(&b, tools_entry_json(ti, surfaces[s], l));
                buf_putc(&b, '\n');
            }
        }
    sha256_hex(b.data ? b.data : "", b.len, out);
    buf_free(&b);
}

static char g_list_digest[65]; /* of the current generation; "" before the first */

/* After a reload swapped cur in: tells every open GET stream, once, when the
 * listed catalogue changed. */
void mcp_tools_changed(app *a, tools_gen *cur)
{
    char d[65];
    size_t n = 0;
    list_digest(a, cur, d);
    if (!g_list_digest[0] || !strcmp(d, g_list_digest)) {
        memcpy(g_list_digest, d, sizeof d);
        return;
    }
    memcpy(g_list_digest, d, sizeof d);
    sse_stream *s;
    LIST_FOREACH(s, &a->streams, link)
    {
        if (!s->sub_id.len) {
            stream_write(s, "event: message\ndata: "
                            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}"
                            "\n\n");
        } else if (s->tools_changed) { /* only the types the subscription asked for */
            buf e = BUF_INIT;
            buf_puts(&e, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":"
                         "\"notifications/tools/list_changed\",\"params\":{\"_meta\":{"
                         "\"" MCP_META_SUBSCRIPTION_ID "\":");
            buf_append(&e, s->sub_id.data, s->sub_id.len);
            buf_puts(&e, "}}}\n\n");
            stream_write(s, e.data);
            buf_free(&e);
        } else {
            continue;
        }
        n++;
    }
    log_line *l = log_begin(LOG_INFO, "list_changed");
    log_int(l, "generation", cur ? tools_gen_id(cur) : 0);
    log_int(l, "streams", (long long)n);
    log_end(l);
}

void mcp_close_streams(app *a)
{
    for (sse_stream *s; (s = LIST_FIRST(&a->streams));) {
        stream_unlink(a, s);
        if (s->sub_id.len) { /* a subscription ends with its result */
            buf e = BUF_INIT;
            buf_puts(&e, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":");
            buf_append(&e, s->sub_id.data, s->sub_id.len);
            buf_puts(&e, ",\"result\":{\"resultType\":\"complete\",\"_meta\":{\"" MCP_META_SUBSCRIPTION_ID "\":");
            buf_append(&e, s->sub_id.data, s->sub_id.len);
            buf_puts(&e, "}}}\n\n");
            stream_write(s, e.data);
            buf_free(&e);
        }
        hstream_end(s->st);
        stream_free(s);
    }
}

/* ---- entry ---- */

/* ---- sessions: ended ids live in the state store (Redis: shared by instances) ---- */

/* The store could not be asked: a retryable error, never a silent accept. */
static void session_store_unavailable(req_ctx *c)
{
    buf b = BUF_INIT;
    const char *msg = "Service Unavailable: the session store (state_store) cannot be reached; "
                      "retry the request";
    buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
    buf_puts(&b, req_mcp(c)->rpc_id.len ? req_mcp(c)->rpc_id.data : "null");
    buf_puts(&b, ",\"error\":{\"code\":-32000,\"message\":");
    json_write_string(&b, msg, strlen(msg));
    buf_puts(&b, ",\"data\":{\"code\":\"state_store_unavailable\",\"retryable\":true,"
                 "\"retry_after_ms\":1000,\"required_action\":\"retry_later\"}}}");
    req_add_header(c, "Retry-After", "1");
    c->outcome = "state_store_unavailable";
    req_reply(c, 503, "application/json", b.data, b.len);
    buf_free(&b);
}

static void post_dispatch(req_ctx *c);
static void open_stream(req_ctx *c, const char *sid);

static void cancel_session(void *op)
{
    session_cancel(op);
}

static void on_session_ended(session_status st, void *arg)
{
    req_ctx *c = arg;
    req_pending_clear(c);
    if (st == SESSION_UNAVAILABLE) {
        session_store_unavailable(c);
        return;
    }
    c->outcome = "session_ended";
    req_reply(c, 204, NULL, NULL, 0);
}

static void on_session(session_status st, void *arg)
{
    req_ctx *c = arg;
    req_pending_clear(c);
    if (st == SESSION_UNAVAILABLE) {
        session_store_unavailable(c);
        return;
    }
    if (st != SESSION_OK) {
        rpc_error(c, 404, -32001, "Session ended: initialize a new session");
        return;
    }
    const char *sid = req_header(c, "Mcp-Session-Id");
    if (!strcmp(c->method, "POST"))
        post_dispatch(c);
    else if (!strcmp(c->method, "GET"))
        open_stream(c, sid);
    else /* DELETE */
        req_pending_set(c, session_end(c->app->sessions, sid, on_session_ended, c), cancel_session);
}

/* Checks Mcp-Session-Id, then goes on in on_session (the ended-session lookup is
 * asynchronous); replies at once when the id is missing or not valid. */
static void check_session(req_ctx *c)
{
    const char *sid = req_header(c, "Mcp-Session-Id");
    if (!sid || !*sid) {
        rpc_error(c, 400, -32600, "Bad Request: Mcp-Session-Id header is required");
        return;
    }
    session_wait *w = NULL;
    int vr = session_verify(c->app->sessions, &c->who, sid, on_session, c, &w);
    if (vr != 0) {
        rpc_error(c, 404, -32001,
                  vr == SESSION_EXPIRED ? "Session expired: initialize a new session"
                                        : "Session not found: initialize a new session");
        return;
    }
    req_async_begin(c);
    req_pending_set(c, w, cancel_session);
}

/* The session era's MCP-Protocol-Version check: replies 400 and returns -1 for a
 * version it does not serve. */
static int legacy_version_refused(req_ctx *c)
{
    const char *pv = req_header(c, "MCP-Protocol-Version");
    if (!pv || version_supported(pv))
        return 0;
    char m[256];
    snprintf(m, sizeof m,
             "Bad Request: unsupported MCP-Protocol-Version %.60s (supported: %s, %s, %s; "
             "stateless: %s with the request's _meta)",
             pv, VERSIONS[0], VERSIONS[1], VERSIONS[2], MCP_MODERN_VERSION);
    rpc_error(c, 400, -32600, m);
    return -1;
}

static void handle_post(req_ctx *c)
{
    mcp_era_headers h = {req_header(c, "MCP-Protocol-Version"), req_header(c, "Mcp-Method"),
                         req_header(c, "Mcp-Name")};
    /* Until the body says otherwise, a stateless version header frames the errors. */
    req_mcp(c)->modern = mcp_era_header_modern(h.protocol_version);
    const char *ct = req_header(c, "Content-Type");
    if (!ct || !str_istartswith(ct, "application/json")) {
        rpc_error(c, 415, -32600, "Unsupported Media Type: Content-Type must be application/json");
        return;
    }
    const char *accept = req_header(c, "Accept");
    if (!accept_admits(accept, "application/json") || !accept_admits(accept, "text/event-stream")) {
        rpc_error(c, 406, -32600,
                  "Not Acceptable: Accept must include application/json and text/event-stream");
        return;
    }
    size_t len;
    const char *body = req_body(c, &len);
    char err[320];
    mcp_msg m;
    /* Under a stateless version header, _meta stays text while only the edge reads it. */
    int code = (req_mcp(c)->modern ? mcp_parse_message_meta_text : mcp_parse_message)(
        body, len, (size_t)c->app->cfg->limits_json_max_depth, &m, err, sizeof err);
    /* The request context takes the message and the id text (freed with it). */
    c->msg = m.msg;
    buf_free(&req_mcp(c)->rpc_id);
    req_mcp(c)->rpc_id = m.id;
    if (code) {
        /* params that are not an object hold no _meta: a stateless request's 400 */
        rpc_error(c, req_mcp(c)->modern && code == -32602 ? 400 : m.http_status, code, err);
        return;
    }
    if (m.kind == MCP_MSG_RESPONSE) {
        /* A response from the client: accepted; an answer to a confirmation question
         * goes to the call that waits for it. */
        if (confirm_response(c, m.msg)) {
            c->outcome = "confirm_answer";
            req_reply(c, 202, NULL, NULL, 0);
            return;
        }
        c->outcome = "client_response";
        req_reply(c, 202, NULL, NULL, 0);
        return;
    }
    mcp_era_env env;
    if (mcp_era_read(&m, &env) != 0) { /* an escape in the text: read the parsed _meta */
        mcp_msg_meta_parse(&m);
        mcp_era_read(&m, &env);
    }
    mcp_era era;
    if ((code = mcp_era_classify(&m, &h, &env, &era, err, sizeof err)) != 0) {
        rpc_error(c, 400, code, err);
        return;
    }
    req_mcp(c)->modern = era == MCP_ERA_MODERN;
    /* Only a tools/call with nothing but the envelope in _meta keeps the text: other
     * members (progress, trace context, hints) and other methods read the value. */
    if (m.meta_text && (!req_mcp(c)->modern || env.others || strcmp(m.method, "tools/call"))) {
        mcp_msg_meta_parse(&m);
        mcp_era_read(&m, &env); /* env pointed into the text the parse replaced */
    }
    req_mcp(c)->meta_text = m.meta_text;
    if (req_mcp(c)->modern) {
        /* Stateless: no session to check, none minted; the request says everything. */
        if (m.kind == MCP_MSG_NOTIFICATION) {
            c->outcome = "notification";
            req_reply(c, 202, NULL, NULL, 0);
            return;
        }
        int status;
        buf data = BUF_INIT;
        code = mcp_era_check(&m, &h, &env, &status, &data, err, sizeof err);
        if (code)
            rpc_error_data(c, status, code, err, data.data);
        else
            post_dispatch(c);
        buf_free(&data);
        return;
    }
    if (legacy_version_refused(c))
        return;
    if (!strcmp(m.method, "initialize")) {
        do_initialize(c, m.params);
        return;
    }
    check_session(c); /* goes on in post_dispatch */
}

/* The methods, and the eras that have each. */
#define ERA_SESSION 1u
#define ERA_STATELESS 2u
static const struct {
    const char *name;
    unsigned eras;
    void (*run)(req_ctx *c, const json_value *params);
} METHODS[] = {
    {"tools/call", ERA_SESSION | ERA_STATELESS, do_tools_call},
    {"tools/list", ERA_SESSION | ERA_STATELESS, do_tools_list},
    {"ping", ERA_SESSION, do_ping},
    {"server/discover", ERA_STATELESS, do_discover},
    {"subscriptions/listen", ERA_STATELESS, do_listen},
    {"prompts/list", ERA_STATELESS, do_prompts_list},
    {"prompts/get", ERA_STATELESS, do_prompts_get},
    {"resources/list", ERA_STATELESS, do_resources_list},
    {"resources/templates/list", ERA_STATELESS, do_templates_list},
    {"resources/read", ERA_STATELESS, do_resources_read},
};

/* A POST after its session check (session era) or its stateless checks: the
 * message was validated by handle_post. One dispatch for both eras. */
static void post_dispatch(req_ctx *c)
{
    const char *method = json_get_string(c->msg, "method");
    const json_value *params = json_get(c->msg, "params");
    if (!json_get(c->msg, "id")) { /* a notification: nothing to answer */
        c->outcome = "notification";
        req_reply(c, 202, NULL, NULL, 0);
        return;
    }
    unsigned era = req_mcp(c)->modern ? ERA_STATELESS : ERA_SESSION;
    for (size_t i = 0; i < sizeof METHODS / sizeof METHODS[0]; i++)
        if ((METHODS[i].eras & era) && !strcmp(method, METHODS[i].name)) {
            METHODS[i].run(c, params);
            return;
        }
    char err[320];
    snprintf(err, sizeof err, "Method not found: %.200s", method);
    /* the stateless era answers a method it does not have (or no longer has) 404 */
    rpc_error(c, req_mcp(c)->modern ? 404 : 200, -32601, err);
}

void mcp_handle(req_ctx *c)
{
    if (!strcmp(c->method, "POST")) {
        handle_post(c); /* the era is known once the body is read */
        return;
    }
    /* GET and DELETE are the session era's */
    if (legacy_version_refused(c))
        return;
    if (!strcmp(c->method, "GET")) {
        if (!accept_admits(req_header(c, "Accept"), "text/event-stream")) {
            rpc_error(c, 406, -32600, "Not Acceptable: GET needs Accept: text/event-stream");
            return;
        }
        check_session(c); /* goes on in open_stream */
        return;
    }
    check_session(c); /* DELETE: goes on in session_end */
}

void mcp_req_end(mcp_req *m)
{
    buf_free(&m->rpc_id);
    buf_free(&m->progress_token);
    if (m->progress_timer)
        event_free(m->progress_timer);
}
