/* trace: the Trace Core client (see trace.h for the contract).
 *
 * Shape: every public handle is a trace_call with one libevent timer. Final results
 * are stored in the call and delivered by activating that timer, so user callbacks
 * always run from the loop and a cancel is just "delete the timer and free". The
 * same timer doubles as the retry backoff. Policy lookups and probes are waiters on
 * a shared flight (an internal request, or the ctx's probe state); when the flight
 * ends each waiter gets its own activation. */
#include "trace.h"
#include "metrics.h"
#include "upstream_req.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#define API_PREFIX "/api/agent-observability/v1"
#define MAX_TRIES 3
#define MAX_RESPONSE (1024 * 1024)
#define POLICY_MAX_ENTRIES 1024
#define MAX_HEADERS 20

typedef enum { K_REQUEST, K_POLICY, K_PROBE } call_kind;
typedef enum { PH_IDLE, PH_BACKOFF, PH_DELIVER } call_phase;

typedef struct policy_entry policy_entry;
typedef LIST_HEAD(call_list, trace_call) call_list;

/* The typed view of a reply, made just before the callback (typed operations). */
typedef enum { V_NONE, V_INTERACTION, V_ID, V_OPERATION, V_RECEIPT } view_kind;

struct trace_call {
    trace_ctx *t;
    call_kind kind;
    call_phase phase;
    struct event *ev;
    int in_cb;
    int waiting;                  /* in wlink's list */
    LIST_ENTRY(trace_call) all;   /* t->calls */
    LIST_ENTRY(trace_call) wlink; /* waiter list of a policy entry or of the probe */
    /* request */
    trace_cb cb;
    void *arg;
    view_kind view;
    const char *id_member; /* V_ID: the member handed to the callback */
    const json_keep *keep; /* a 2xx body's members the view reads, or NULL: all */
    union {
        trace_interaction_cb interaction;
        trace_id_cb id;
        trace_operation_cb operation;
        trace_receipt_cb receipt;
    } tcb;
    char *method, *url, *body; /* url: the path after the API base (t->api) */
    size_t url_len, body_len;
    buf hstore;                      /* header names and values, each NUL-ended */
    size_t hoff[MAX_HEADERS * 2];    /* where each starts in hstore */
    fetch_header hdrs[MAX_HEADERS];
    size_t nh;
    int idempotent, tries, counts; /* counts: affects breaker and stats */
    int64_t persist_until;         /* a background finalization: retried until then */
    fetch_req *fr;
    int64_t started;
    trace_reply reply;
    json_value *body_json; /* owned, reply.body points here */
    char *detail;          /* owned, reply.detail may point here */
    /* policy waiter */
    trace_policy_cb pcb;
    policy_entry *entry;
    capture_state st;
    /* probe waiter */
    trace_probe_cb vcb;
    probe_verdict verdict;
};

struct policy_entry {
    trace_ctx *t;
    char *key; /* tenant "\n" domain */
    capture_state st;
    int64_t expires; /* mono ms; valid when st != UNKNOWN */
    trace_call *flight;
    call_list waiters;
    policy_entry *next;
};

#define LEASE_SLOTS 256

typedef struct lease_entry {
    char key[65]; /* "" when the slot is empty */
    char conversation_id[160];
    char lease_token[160];
    json_value *lease_epoch;
    int64_t expires_ms;
} lease_entry;

struct trace_ctx {
    struct event_base *base;
    fetch_ctx *fetch;
    trace_config cfg;
    char *base_url, *def_tenant, *def_domain;
    fetch_base *api; /* base_url + API_PREFIX, parsed once: a request appends its path */
    call_list calls;
    policy_entry *policies;
    size_t n_policies;
    /* breaker */
    trace_breaker breaker;
    int consecutive;
    int64_t open_until;
    trace_call *trial; /* the half-open trial in flight, if any */
    /* probe */
    fetch_req *probe_fr;
    call_list probe_waiters;
    int probe_running, probe_tries_done;
    int64_t probe_deadline;
    int have_verdict;
    probe_verdict verdict;
    int64_t verdict_expires;
    lease_entry leases[LEASE_SLOTS];
    /* lifetime */
    int depth; /* user callbacks running */
    int dead;
    trace_stats_t st;
};

static void call_event(evutil_socket_t fd, short what, void *arg);
static void try_send(trace_call *c);

/* ---- small helpers ---- */

/* Appends the NUL-terminated strings a, b and c (NULL: none), without a format. */
static void put3(buf *out, const char *a, const char *b, const char *c)
{
    if (a)
        buf_append(out, a, strlen(a));
    if (b)
        buf_append(out, b, strlen(b));
    if (c)
        buf_append(out, c, strlen(c));
}

static char *dup_or_empty(const char *s)
{
    return xstrdup(s ? s : "");
}

const char *trace_path_escape(const char *id, buf *out)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)(id ? id : "");
    buf_reserve(out, strlen((const char *)p) + 1);
    for (; *p; p++) {
        unsigned char ch = *p;
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '.' || ch == '_' || ch == '~') {
            /* the run of unreserved bytes from here, appended at once */
            const unsigned char *q = p + 1;
            while ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
                   (*q >= '0' && *q <= '9') || *q == '-' || *q == '.' || *q == '_' || *q == '~')
                q++;
            buf_append(out, (const char *)p, (size_t)(q - p));
            p = q - 1;
        } else {
            buf_putc(out, '%');
            buf_putc(out, hex[ch >> 4]);
            buf_putc(out, hex[ch & 15]);
        }
    }
    buf_append(out, "", 0); /* always a string, even when id is empty */
    return out->data;
}

void trace_synthetic_ids(const char *request_id, char trace_id[33], char span_id[17])
{
    buf b = BUF_INIT;
    char h[65];
    put3(&b, "bkn.synthetic.trace:", request_id, NULL);
    sha256_hex(b.data, b.len, h);
    memcpy(trace_id, h, 32);
    trace_id[32] = '\0';
    buf_reset(&b);
    put3(&b, "bkn.synthetic.span:", request_id, NULL);
    sha256_hex(b.data, b.len, h);
    memcpy(span_id, h, 16);
    span_id[16] = '\0';
    buf_free(&b);
}

int trace_payload_envelope(const json_value *payload, json_value **out)
{
    json_value *env = json_new_object();
    buf b = BUF_INIT;
    const char *reason = NULL;
    size_t n = 0;
    if (!payload) {
        reason = "serialization_failed";
    } else {
        json_write(&b, payload, 1);
        n = b.len;
        if (n > TRACE_INLINE_MAX)
            reason = "payload_too_large";
    }
    json_set(env, "mode", json_new_str(reason ? "omitted" : "inline", reason ? 7 : 6));
    json_set(env, "media_type", json_new_str("application/json", 16));
    json_set(env, "byte_length", json_new_int((int64_t)n));
    if (reason)
        json_set(env, "omitted_reason", json_new_str(reason, strlen(reason)));
    else
        json_set(env, "inline", json_clone(payload));
    buf_free(&b);
    *out = env;
    return 0;
}

/* ---- context ---- */

trace_ctx *trace_new(struct event_base *base, fetch_ctx *fetch, const trace_config *cfg)
{
    trace_ctx *t = xcalloc(1, sizeof(*t));
    t->st.last_probe = -1;
    LIST_INIT(&t->calls);
    LIST_INIT(&t->probe_waiters);
    trace_config c = {0};
    if (cfg)
        c = *cfg;
    t->base = base;
    t->fetch = fetch;
    /* Strip trailing slashes so that base + prefix never has "//". */
    t->base_url = dup_or_empty(c.base_url);
    for (size_t n = strlen(t->base_url); n > 0 && t->base_url[n - 1] == '/'; n--)
        t->base_url[n - 1] = '\0';
    t->def_tenant = dup_or_empty(c.default_tenant_id);
    t->def_domain = dup_or_empty(c.default_business_domain);
    buf api = BUF_INIT;
    put3(&api, t->base_url, API_PREFIX, NULL);
    t->api = fetch_base_new(api.data);
    buf_free(&api);
    c.timeout_ms = c.timeout_ms > 0 ? c.timeout_ms : 3000;
    c.policy_ttl_s = c.policy_ttl_s > 0 ? c.policy_ttl_s : 30;
    c.probe_tries = c.probe_tries > 0 ? c.probe_tries : 3;
    c.probe_budget_ms = c.probe_budget_ms > 0 ? c.probe_budget_ms : 1500;
    c.verdict_ttl_s = c.verdict_ttl_s > 0 ? c.verdict_ttl_s : 5;
    c.breaker_failures = c.breaker_failures > 0 ? c.breaker_failures : 5;
    c.breaker_open_ms = c.breaker_open_ms > 0 ? c.breaker_open_ms : 2000;
    c.base_url = t->base_url;
    c.default_tenant_id = t->def_tenant;
    c.default_business_domain = t->def_domain;
    t->cfg = c;
    t->breaker = TRACE_BREAKER_CLOSED;
    return t;
}

int trace_installed(const trace_ctx *t)
{
    return t && t->base_url[0] != '\0';
}

static void call_free(trace_call *c)
{
    trace_ctx *t = c->t;
    if (t->trial == c)
        t->trial = NULL; /* a cancelled trial: let the next call be the trial */
    LIST_REMOVE(c, all);
    if (c->fr)
        fetch_cancel(c->fr);
    event_free(c->ev);
    free(c->method);
    free(c->url);
    free(c->body);
    buf_free(&c->hstore);
    json_free(c->body_json);
    free(c->detail);
    free(c);
}

static void policy_free_all(trace_ctx *t)
{
    policy_entry *e = t->policies;
    while (e) {
        policy_entry *n = e->next;
        free(e->key);
        free(e);
        e = n;
    }
    t->policies = NULL;
}

static void ctx_destroy(trace_ctx *t)
{
    while (!LIST_EMPTY(&t->calls))
        call_free(LIST_FIRST(&t->calls));
    if (t->probe_fr)
        fetch_cancel(t->probe_fr);
    policy_free_all(t);
    for (size_t i = 0; i < LEASE_SLOTS; i++)
        json_free(t->leases[i].lease_epoch);
    free(t->base_url);
    fetch_base_free(t->api);
    free(t->def_tenant);
    free(t->def_domain);
    free(t);
}

void trace_free(trace_ctx *t)
{
    if (!t)
        return;
    if (t->depth > 0) {
        /* Inside a callback: the running call is freed by call_event afterwards. */
        trace_call *c = LIST_FIRST(&t->calls);
        while (c) {
            trace_call *n = LIST_NEXT(c, all);
            if (!c->in_cb)
                call_free(c);
            c = n;
        }
        if (t->probe_fr) {
            fetch_cancel(t->probe_fr);
            t->probe_fr = NULL;
        }
        LIST_INIT(&t->probe_waiters);
        policy_free_all(t);
        t->dead = 1;
        return;
    }
    ctx_destroy(t);
}

static trace_call *call_new(trace_ctx *t, call_kind kind)
{
    trace_call *c = xcalloc(1, sizeof(*c));
    c->t = t;
    c->kind = kind;
    c->ev = evtimer_new(t->base, call_event, c);
    if (!c->ev)
        abort(); /* like xmalloc: out of memory */
    c->started = now_mono_ms();
    LIST_INSERT_HEAD(&t->calls, c, all);
    return c;
}

static void deliver_later(trace_call *c)
{
    c->phase = PH_DELIVER;
    event_active(c->ev, EV_TIMEOUT, 0);
}

/* Takes c out of the waiter list it is in, if any. */
static void waiter_unlink(trace_call *c)
{
    if (c->waiting)
        LIST_REMOVE(c, wlink);
    c->waiting = 0;
}

static void waiter_push(call_list *head, trace_call *c)
{
    LIST_INSERT_HEAD(head, c, wlink);
    c->waiting = 1;
}

/* ---- breaker ---- */

static void breaker_open(trace_ctx *t, int64_t now)
{
    if (t->breaker != TRACE_BREAKER_OPEN)
        t->st.breaker_opens++;
    t->breaker = TRACE_BREAKER_OPEN;
    t->open_until = now + t->cfg.breaker_open_ms;
}

/* Returns 1 when the call may go out (marking it as the trial when half-open). */
static int breaker_admit(trace_ctx *t, trace_call *c)
{
    int64_t now = now_mono_ms();
    if (t->breaker == TRACE_BREAKER_OPEN && now >= t->open_until)
        t->breaker = TRACE_BREAKER_HALF_OPEN;
    if (t->breaker == TRACE_BREAKER_CLOSED)
        return 1;
    if (t->breaker == TRACE_BREAKER_HALF_OPEN && !t->trial) {
        t->trial = c;
        return 1;
    }
    return 0;
}

static void breaker_outcome(trace_ctx *t, trace_call *c, trace_status st)
{
    int was_trial = t->trial == c;
    if (was_trial)
        t->trial = NULL;
    if (st == TRACE_UNAVAILABLE) {
        t->consecutive++;
        int64_t now = now_mono_ms();
        if (was_trial || t->breaker == TRACE_BREAKER_HALF_OPEN ||
            (t->breaker == TRACE_BREAKER_CLOSED && t->consecutive >= t->cfg.breaker_failures))
            breaker_open(t, now);
    } else {
        /* Core answered: whatever was open is closed again. */
        t->consecutive = 0;
        t->breaker = TRACE_BREAKER_CLOSED;
    }
}

/* ---- requests ---- */

/* Takes ownership of text (from buf_steal). */
static void set_detail(trace_call *c, char *text)
{
    free(c->detail);
    c->detail = text;
    c->reply.detail = text;
}

static char *fmt_detail(const char *what, const char *extra, long status)
{
    buf b = BUF_INIT;
    if (status)
        buf_printf(&b, "trace core: HTTP %ld %s", status, what);
    else
        buf_printf(&b, "trace core: %s%s", what, extra ? extra : "");
    return buf_steal(&b, NULL);
}

/* Records the final outcome of a request and schedules its delivery. */
static void request_finish(trace_call *c, trace_status st)
{
    trace_ctx *t = c->t;
    c->reply.status = st;
    c->reply.elapsed_ms = now_mono_ms() - c->started;
    if (c->counts) {
        breaker_outcome(t, c, st);
        if (st == TRACE_OK)
            t->st.ok++;
        else if (st == TRACE_API_ERROR)
            t->st.api_errors++;
        else if (st == TRACE_UNAVAILABLE)
            t->st.unavailable++;
    }
    deliver_later(c);
}

static void request_fail_now(trace_call *c, trace_status st, const char *detail)
{
    c->reply.status = st;
    c->reply.detail = detail;
    c->reply.elapsed_ms = 0;
    deliver_later(c);
}

/* The members each typed view reads of a 2xx body (json_parse_keep). */
static const json_keep KEEP_MANIFEST[] = {{"answer_artifact_ref", NULL, 0}, {NULL, NULL, 0}};
static const json_keep KEEP_INTERACTION[] = {
    {"conversation_id", NULL, 0}, {"interaction_id", NULL, 0}, {"execution_status", NULL, 0},
    {"evidence_status", NULL, 0}, {"lease_token", NULL, 0},    {"updated_at", NULL, 0},
    {"lease_epoch", NULL, 0},     {"closure_manifest", KEEP_MANIFEST, 0}, {NULL, NULL, 0}};
static const json_keep KEEP_CONVERSATION_ID[] = {{"conversation_id", NULL, 0}, {NULL, NULL, 0}};
static const json_keep KEEP_ARTIFACT_ID[] = {{"artifact_id", NULL, 0}, {NULL, NULL, 0}};
static const json_keep KEEP_OP_OPERATION[] = {
    {"operation_id", NULL, 0}, {"attempt", NULL, 0}, {NULL, NULL, 0}};
static const json_keep KEEP_OP_RECEIPT[] = {
    {"receipt_id", NULL, 0}, {"receipt_status", NULL, 0}, {NULL, NULL, 0}};
/* operations:ensure: what running the tool needs; a reply that does not let us run
 * is decoded again whole (op_executes) */
static const json_keep KEEP_OPERATION[] = {{"operation", KEEP_OP_OPERATION, 0},
                                           {"receipt", KEEP_OP_RECEIPT, 0},
                                           {"execute", NULL, 0},
                                           {NULL, NULL, 0}};
/* an attempt's outcome: the receipt as its text (it goes into the answer as it is) */
static const json_keep KEEP_RECEIPT[] = {{"receipt", NULL, 1}, {NULL, NULL, 0}};

static int json_ws(char ch)
{
    return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t';
}

/* Past the value at p in JSON text already checked (a kept raw member): brackets and
 * strings followed, nothing checked again. */
static const char *skip_checked(const char *p, const char *end)
{
    int depth = 0;
    do {
        while (p < end && json_ws(*p))
            p++;
        if (p >= end)
            break;
        char ch = *p;
        if (ch == '"') { /* to the next quote not escaped: one with an even run of
                            backslashes before it */
            const char *q = p + 1;
            for (;;) {
                q = memchr(q, '"', (size_t)(end - q));
                if (!q)
                    return end;
                const char *b = q;
                while (b > p + 1 && b[-1] == '\\')
                    b--;
                if ((q - b) % 2 == 0)
                    break;
                q++;
            }
            p = q + 1;
        } else if (ch == '{' || ch == '[') {
            depth++;
            p++;
        } else if (ch == '}' || ch == ']') {
            depth--;
            p++;
        } else if (ch == ',' || ch == ':') {
            p++;
        } else {
            while (p < end && !json_ws(*p) && *p != ',' && *p != '}' && *p != ']')
                p++;
        }
    } while (depth > 0);
    return p;
}

/* The receipt_id of a receipt's checked JSON text - its top-level member of that
 * name when it is a string (the last one, as json_get takes it), decoded into out -
 * or NULL. Read with skip_checked: nothing is parsed but the id. */
static const char *receipt_id_of(const char *text, size_t len, buf *out)
{
    const char *p = text, *end = text + len, *hit = NULL, *hit_end = NULL;
    while (p < end && json_ws(*p))
        p++;
    if (p >= end || *p != '{')
        return NULL;
    p++;
    for (;;) {
        while (p < end && json_ws(*p))
            p++;
        if (p >= end || *p != '"')
            break; /* '}' */
        const char *k = p;
        p = skip_checked(p, end); /* the key */
        int match = p - k == 12 && !memcmp(k, "\"receipt_id\"", 12);
        if (!match && memchr(k, '\\', (size_t)(p - k))) { /* an escaped key: decoded */
            json_value *kv = json_parse(k, (size_t)(p - k), NULL, NULL, 0);
            const char *ks = kv ? json_get_str(kv, NULL) : NULL;
            match = ks && !strcmp(ks, "receipt_id");
            json_free(kv);
        }
        while (p < end && (json_ws(*p) || *p == ':'))
            p++;
        const char *v = p;
        p = skip_checked(p, end);
        if (match) {
            hit = v;
            hit_end = p;
        }
        while (p < end && json_ws(*p))
            p++;
        if (p >= end || *p != ',')
            break;
        p++;
    }
    if (!hit || *hit != '"')
        return NULL;
    json_value *sv = json_parse(hit, (size_t)(hit_end - hit), NULL, NULL, 0);
    size_t n;
    const char *str = sv ? json_get_str(sv, &n) : NULL;
    if (str)
        buf_append(out, str, n);
    json_free(sv);
    return str ? (out->data ? out->data : "") : NULL;
}

static int op_executes(const json_value *body)
{
    const json_value *x = json_get(body, "execute");
    return x && json_typeof(x) == JSON_TRUE;
}

static int retryable(const fetch_response *resp)
{
    if (resp->result == FETCH_OK)
        return resp->status >= 500 || resp->status == 429;
    return resp->result != FETCH_TOO_LARGE;
}

static void request_fetched(const fetch_response *resp, void *arg)
{
    trace_call *c = arg;
    trace_ctx *t = c->t;
    trace_status st = TRACE_UNAVAILABLE;
    char err[128];
    c->fr = NULL;
    json_free(c->body_json);
    c->body_json = NULL;
    c->reply.body = NULL;
    c->reply.error_code = NULL;
    set_detail(c, NULL);
    c->reply.http_status = resp->result == FETCH_OK ? resp->status : 0;
    if (resp->result != FETCH_OK) {
        set_detail(c, fmt_detail(resp->error ? resp->error : "transport error", NULL, 0));
    } else if (resp->status >= 200 && resp->status < 300) {
        json_limits lim = {0, MAX_RESPONSE};
        if (resp->body_len == 0) {
            st = TRACE_OK;
        } else if ((c->body_json = json_parse_keep(resp->body, resp->body_len, &lim, c->keep, err,
                                                   sizeof(err))) != NULL) {
            st = TRACE_OK;
            if (c->view == V_OPERATION && !op_executes(c->body_json)) {
                /* another claimant's: the caller reads its operation and receipt whole */
                json_free(c->body_json);
                c->body_json = json_parse(resp->body, resp->body_len, &lim, err, sizeof(err));
            }
            c->reply.body = c->body_json;
        } else {
            set_detail(c, fmt_detail("with a body that is not JSON", NULL, resp->status));
        }
    } else {
        json_limits lim = {0, MAX_RESPONSE};
        json_value *v = json_parse(resp->body, resp->body_len, &lim, err, sizeof(err));
        const json_value *e = v ? json_get(v, "error") : NULL;
        if (e && json_typeof(e) == JSON_OBJECT) {
            const char *code = json_get_string(e, "code");
            st = TRACE_API_ERROR;
            c->body_json = v;
            c->reply.body = v;
            c->reply.error_code = code ? code : "";
        } else {
            json_free(v);
            set_detail(c, fmt_detail("without an error envelope", NULL, resp->status));
        }
    }
    if (c->persist_until) {
        /* a background finalization: keep trying while Core is out, then count it */
        if (st == TRACE_UNAVAILABLE && now_mono_ms() < c->persist_until) {
            long ms = 250L << (c->tries < 5 ? c->tries - 1 : 4);
            struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
            c->phase = PH_BACKOFF;
            evtimer_add(c->ev, &tv);
            return;
        }
        if (st == TRACE_OK)
            t->st.redelivered++;
        else
            t->st.redelivery_failed++;
        request_finish(c, st);
        return;
    }
    if (c->idempotent && c->tries < MAX_TRIES && retryable(resp)) {
        /* Bounded backoff: 20 ms, then 40 ms. */
        struct timeval tv = {0, (c->tries == 1 ? 20 : 40) * 1000};
        t->st.retries++;
        c->phase = PH_BACKOFF;
        evtimer_add(c->ev, &tv);
        return;
    }
    request_finish(c, st);
}

static void try_send(trace_call *c)
{
    trace_ctx *t = c->t;
    const char *err = NULL;
    fetch_request rq = {0};
    rq.method = c->method;
    rq.base = t->api;
    rq.path = c->url;
    rq.path_len = c->url_len;
    rq.headers = c->hdrs;
    rq.n_headers = c->nh;
    rq.body = c->body;
    rq.body_len = c->body_len;
    rq.timeout_ms = t->cfg.timeout_ms;
    rq.max_response = MAX_RESPONSE;
    rq.pipeline = t->cfg.pipeline;
    c->tries++;
    t->st.http_calls++;
    c->fr = fetch_start(t->fetch, &rq, request_fetched, c, &err);
    if (!c->fr) {
        /* Invalid arguments (a bad path or method): a bug, not an outage. */
        c->counts = 0;
        set_detail(c, fmt_detail("request rejected: ", err, 0));
        if (t->trial == c)
            t->trial = NULL;
        request_finish(c, TRACE_UNAVAILABLE);
    }
}

static void add_header(trace_call *c, const char *name, const char *value)
{
    if (c->nh >= MAX_HEADERS)
        return;
    /* one buffer for all of them: pointed at by headers_done once they are in */
    c->hoff[c->nh * 2] = c->hstore.len;
    buf_append(&c->hstore, name, strlen(name) + 1);
    c->hoff[c->nh * 2 + 1] = c->hstore.len;
    buf_append(&c->hstore, value, strlen(value) + 1);
    c->nh++;
}

static void headers_done(trace_call *c)
{
    for (size_t i = 0; i < c->nh; i++) {
        c->hdrs[i].name = c->hstore.data + c->hoff[i * 2];
        c->hdrs[i].value = c->hstore.data + c->hoff[i * 2 + 1];
    }
}

/* Owner tenant and domain after defaults; 0 when the principal cannot own. */
static int resolve_owner(const trace_ctx *t, const principal *who, const char **tenant,
                         const char **domain)
{
    if (!who || !who->account_id[0] || !who->account_type[0] ||
        strcmp(who->account_type, "anonymous") == 0)
        return 0;
    *tenant = who->tenant_id[0] ? who->tenant_id : t->def_tenant;
    *domain = who->business_domain[0] ? who->business_domain : t->def_domain;
    return (*tenant)[0] && (*domain)[0];
}

/* The origin's headers (trace_origin): request id and W3C trace context. */
static void origin_headers(trace_call *c, const trace_origin *o)
{
    if (o->lang && o->lang[0])
        add_header(c, "Accept-Language", o->lang);
    if (o->request_id && o->request_id[0]) {
        add_header(c, "bkn-request-id", o->request_id);
        add_header(c, "x-request-id", o->request_id);
    }
    char tp[56];
    if (o->traceparent && upstream_traceparent_outbound(o->traceparent, 0, tp))
        add_header(c, "traceparent", tp);
    if (o->tracestate && o->tracestate[0])
        add_header(c, "tracestate", o->tracestate);
    if (o->baggage && o->baggage[0])
        add_header(c, "baggage", o->baggage);
}

static void owner_headers(trace_call *c, const principal *who, const char *tenant,
                          const char *domain, const trace_origin *o)
{
    int app = strcmp(who->account_type, "app") == 0;
    buf_reserve(&c->hstore, 640);
    if (c->body)
        add_header(c, "Content-Type", "application/json");
    if (o)
        origin_headers(c, o);
    add_header(c, "x-account-id", who->account_id);
    add_header(c, "X-BKN-Effective-Subject-ID", who->account_id);
    add_header(c, "x-account-type", who->account_type);
    add_header(c, "x-tenant-id", tenant);
    add_header(c, "X-BKN-Tenant-ID", tenant);
    add_header(c, "x-business-domain", domain);
    add_header(c, "X-Business-Domain-ID", domain);
    add_header(c, "X-BKN-Application-Principal-ID",
               who->client_id[0] ? who->client_id : who->account_id);
    add_header(c, "X-BKN-Effective-Subject-Type", app ? "service" : "user");
    if (who->subject_name[0])
        add_header(c, "X-BKN-Effective-Subject-Name", who->subject_name);
    if (who->auth_method[0])
        add_header(c, "X-BKN-Auth-Method", who->auth_method);
    headers_done(c);
}

/* trace_request with the body as text: body (owned, from buf_steal) becomes the call's
 * (NULL: none). */
/* persist_until: 0, or a background request without a callback, retried until then
 * (request_fetched); it neither consults nor moves the breaker. */
static trace_call *request_text_ex(trace_ctx *t, const principal *who, const trace_origin *o,
                                   const char *method, const char *path, char *body,
                                   size_t body_len, int idempotent, trace_cb cb, void *arg,
                                   int64_t persist_until)
{
    trace_call *c = call_new(t, K_REQUEST);
    c->persist_until = persist_until;
    c->body = body;
    c->body_len = body_len;
    const char *tenant = NULL, *domain = NULL;
    buf u = BUF_INIT;
    c->cb = cb;
    c->arg = arg;
    c->idempotent = idempotent != 0;
    t->st.requests++;
    if (!method || !path || path[0] != '/') {
        request_fail_now(c, TRACE_UNAVAILABLE, "trace core request rejected: bad method or path");
        goto done;
    }
    if (!trace_installed(t)) {
        t->st.not_installed++;
        request_fail_now(c, TRACE_NOT_INSTALLED, "trace core is not installed");
        goto done;
    }
    if (!resolve_owner(t, who, &tenant, &domain)) {
        t->st.no_owner++;
        request_fail_now(c, TRACE_NO_OWNER, "no trusted account, tenant or business domain");
        goto done;
    }
    if (!persist_until && !breaker_admit(t, c)) {
        t->st.fast_fails++;
        request_fail_now(c, TRACE_UNAVAILABLE, "circuit open");
        goto done;
    }
    c->counts = !persist_until;
    c->method = xstrdup(method);
    put3(&u, path, NULL, NULL);
    c->url = buf_steal(&u, &c->url_len);
    owner_headers(c, who, tenant, domain, o);
    try_send(c);
done:
    buf_free(&u);
    return c;
}

static trace_call *request_text(trace_ctx *t, const principal *who, const trace_origin *o,
                                const char *method, const char *path, char *body, size_t body_len,
                                int idempotent, trace_cb cb, void *arg)
{
    return request_text_ex(t, who, o, method, path, body, body_len, idempotent, cb, arg, 0);
}

trace_call *trace_request(trace_ctx *t, const principal *who, const trace_origin *o,
                          const char *method, const char *path, const json_value *body,
                          int idempotent, trace_cb cb, void *arg)
{
    char *text = NULL;
    size_t len = 0;
    if (body) {
        buf b = BUF_INIT;
        json_write(&b, body, 1);
        text = buf_steal(&b, &len);
    }
    return request_text(t, who, o, method, path, text, len, idempotent, cb, arg);
}

/* ---- capture policy ---- */

static policy_entry *policy_find(trace_ctx *t, const char *key)
{
    for (policy_entry *e = t->policies; e; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

/* Keeps the table bounded: drops idle entries that expired, then (if still full)
 * any idle entry. */
static void policy_trim(trace_ctx *t, int64_t now)
{
    policy_entry **pp = &t->policies;
    while (*pp && t->n_policies >= POLICY_MAX_ENTRIES) {
        policy_entry *e = *pp;
        if (!e->flight && LIST_EMPTY(&e->waiters) &&
            (e->st == CAPTURE_UNKNOWN || e->expires <= now)) {
            *pp = e->next;
            free(e->key);
            free(e);
            t->n_policies--;
        } else {
            pp = &e->next;
        }
    }
    pp = &t->policies;
    while (*pp && t->n_policies >= POLICY_MAX_ENTRIES) {
        policy_entry *e = *pp;
        if (!e->flight && LIST_EMPTY(&e->waiters)) {
            *pp = e->next;
            free(e->key);
            free(e);
            t->n_policies--;
        } else {
            pp = &e->next;
        }
    }
}

static void policy_done(const trace_reply *r, void *arg)
{
    policy_entry *e = arg;
    trace_ctx *t = e->t;
    capture_state st = CAPTURE_UNKNOWN;
    e->flight = NULL;
    if (r->status == TRACE_OK && r->body && json_typeof(r->body) == JSON_OBJECT) {
        const char *cap = json_get_string(r->body, "capture");
        const json_value *ttl = json_get(r->body, "ttl_s");
        int64_t ttl_s = t->cfg.policy_ttl_s;
        if (cap && strcmp(cap, "enabled") == 0)
            st = CAPTURE_ENABLED;
        else if (cap && strcmp(cap, "disabled") == 0)
            st = CAPTURE_DISABLED;
        /* Core's hint can only shorten our own TTL. */
        if (ttl && json_typeof(ttl) == JSON_INT && json_get_int(ttl) < ttl_s)
            ttl_s = json_get_int(ttl) > 0 ? json_get_int(ttl) : 0;
        e->expires = now_mono_ms() + 1000 * ttl_s;
    }
    e->st = st;
    for (trace_call *w; (w = LIST_FIRST(&e->waiters));) {
        waiter_unlink(w);
        w->entry = NULL;
        w->st = st;
        deliver_later(w);
    }
}

trace_call *trace_capture_policy(trace_ctx *t, const principal *who, trace_policy_cb cb, void *arg)
{
    trace_call *c = call_new(t, K_POLICY);
    const char *tenant = NULL, *domain = NULL;
    int64_t now = now_mono_ms();
    buf key = BUF_INIT;
    policy_entry *e = NULL;
    c->pcb = cb;
    if (!trace_installed(t)) {
        c->st = CAPTURE_DISABLED;
        deliver_later(c);
        goto done;
    }
    if (!resolve_owner(t, who, &tenant, &domain)) {
        c->st = CAPTURE_UNKNOWN;
        deliver_later(c);
        goto done;
    }
    put3(&key, tenant, "\n", domain);
    e = policy_find(t, key.data);
    if (e && !e->flight && e->st != CAPTURE_UNKNOWN && now < e->expires) {
        t->st.policy_hits++;
        c->st = e->st;
        deliver_later(c);
        goto done;
    }
    if (!e) {
        policy_trim(t, now);
        e = xcalloc(1, sizeof(*e));
        e->t = t;
        e->key = buf_steal(&key, NULL);
        e->st = CAPTURE_UNKNOWN;
        LIST_INIT(&e->waiters);
        e->next = t->policies;
        t->policies = e;
        t->n_policies++;
    }
    if (e->flight) {
        t->st.policy_hits++;
    } else {
        t->st.policy_misses++;
        e->flight = trace_request(t, who, NULL, "GET", "/capture-policy", NULL, 1, policy_done, e);
    }
    c->entry = e;
    waiter_push(&e->waiters, c);
done:
    c->arg = arg;
    buf_free(&key);
    return c;
}

/* ---- probe ---- */

static void probe_try(trace_ctx *t);

static void probe_verdict_set(trace_ctx *t, probe_verdict v)
{
    int64_t now = now_mono_ms();
    t->probe_running = 0;
    t->have_verdict = 1;
    t->verdict = v;
    t->verdict_expires = now + 1000LL * t->cfg.verdict_ttl_s;
    t->st.last_probe = (int)v;
    t->st.last_probe_wall_ms = now_wall_ms();
    if (v == PROBE_DOWN) {
        t->st.probe_down++;
        /* A verified outage: fail fast for a while rather than hammering Core. */
        breaker_open(t, now);
    } else if (t->breaker == TRACE_BREAKER_OPEN) {
        t->open_until = now; /* the next call is the half-open trial */
    }
    for (trace_call *w; (w = LIST_FIRST(&t->probe_waiters));) {
        waiter_unlink(w);
        w->verdict = v;
        deliver_later(w);
    }
}

static void probe_fetched(const fetch_response *resp, void *arg)
{
    trace_ctx *t = arg;
    t->probe_fr = NULL;
    if (resp->result == FETCH_OK && resp->status >= 200 && resp->status < 300) {
        probe_verdict_set(t, PROBE_ALIVE);
        return;
    }
    probe_try(t);
}

static void probe_try(trace_ctx *t)
{
    int64_t remaining = t->probe_deadline - now_mono_ms();
    int left = t->cfg.probe_tries - t->probe_tries_done;
    buf u = BUF_INIT;
    const char *err = NULL;
    fetch_request rq = {0};
    if (left <= 0 || remaining <= 0) {
        probe_verdict_set(t, PROBE_DOWN);
        goto done;
    }
    buf_printf(&u, "%s%s/health", t->base_url, API_PREFIX);
    rq.method = "GET";
    rq.url = u.data;
    rq.timeout_ms = remaining / left > 0 ? remaining / left : 1;
    rq.max_response = 64 * 1024;
    t->probe_tries_done++;
    t->st.probe_tries++;
    t->probe_fr = fetch_start(t->fetch, &rq, probe_fetched, t, &err);
    if (!t->probe_fr)
        probe_verdict_set(t, PROBE_DOWN); /* a malformed base URL never becomes alive */
done:
    buf_free(&u);
}

trace_call *trace_probe(trace_ctx *t, trace_probe_cb cb, void *arg)
{
    trace_call *c = call_new(t, K_PROBE);
    c->vcb = cb;
    c->arg = arg;
    if (!trace_installed(t)) {
        c->verdict = PROBE_DOWN;
        deliver_later(c);
        return c;
    }
    if (!t->probe_running && t->have_verdict && now_mono_ms() < t->verdict_expires) {
        c->verdict = t->verdict;
        deliver_later(c);
        return c;
    }
    waiter_push(&t->probe_waiters, c);
    if (!t->probe_running) {
        t->probe_running = 1;
        t->probe_tries_done = 0;
        t->probe_deadline = now_mono_ms() + t->cfg.probe_budget_ms;
        t->st.probes++;
        probe_try(t); /* may settle DOWN at once: waiters are still delivered later */
    }
    return c;
}

void trace_note_failure(trace_ctx *t)
{
    if (t && t->have_verdict && t->verdict == PROBE_ALIVE)
        t->have_verdict = 0;
}

/* ---- typed operations ---- */

static void deliver_view(trace_call *c)
{
    const trace_reply *r = &c->reply;
    const json_value *b = r->status == TRACE_OK ? r->body : NULL;
    switch (c->view) {
    case V_INTERACTION: {
        trace_interaction it;
        memset(&it, 0, sizeof it);
        if (b) {
            const json_value *man = json_get(b, "closure_manifest");
            it.conversation_id = json_get_string(b, "conversation_id");
            it.interaction_id = json_get_string(b, "interaction_id");
            it.execution_status = json_get_string(b, "execution_status");
            it.evidence_status = json_get_string(b, "evidence_status");
            it.lease_token = json_get_string(b, "lease_token");
            it.updated_at = json_get_string(b, "updated_at");
            it.lease_epoch = json_get(b, "lease_epoch");
            it.answer_artifact_ref = man && json_typeof(man) == JSON_OBJECT
                                         ? json_get_string(man, "answer_artifact_ref")
                                         : NULL;
        }
        c->tcb.interaction(r, b ? &it : NULL, c->arg);
        break;
    }
    case V_ID:
        c->tcb.id(r, b ? json_get_string(b, c->id_member) : NULL, c->arg);
        break;
    case V_OPERATION: {
        trace_operation op;
        int ok = 0;
        memset(&op, 0, sizeof op);
        if (b) {
            const json_value *exec = json_get(b, "execute");
            op.operation = json_get(b, "operation");
            op.receipt = json_get(b, "receipt");
            op.operation_id = op.operation ? json_get_string(op.operation, "operation_id") : NULL;
            op.receipt_id = op.receipt ? json_get_string(op.receipt, "receipt_id") : NULL;
            op.receipt_status = op.receipt ? json_get_string(op.receipt, "receipt_status") : NULL;
            const json_value *attempt = op.operation ? json_get(op.operation, "attempt") : NULL;
            op.execute = exec && json_typeof(exec) == JSON_TRUE;
            ok = op.operation_id && op.receipt_id && attempt && json_typeof(attempt) == JSON_INT;
            op.attempt = ok ? (long)json_get_int(attempt) : 0;
        }
        c->tcb.operation(r, ok ? &op : NULL, c->arg);
        break;
    }
    case V_RECEIPT: {
        const json_value *raw = b ? json_get(b, "receipt") : NULL;
        trace_receipt rc = {NULL, 0, NULL};
        buf id = BUF_INIT;
        if (raw && json_typeof(raw) == JSON_STRING) { /* the member's text (KEEP_RECEIPT) */
            rc.json = json_get_str(raw, &rc.len);
            rc.receipt_id = receipt_id_of(rc.json, rc.len, &id);
        }
        c->tcb.receipt(r, raw ? &rc : NULL, c->arg);
        buf_free(&id);
        break;
    }
    default:
        break;
    }
}

/* fmt with its "%s" (up to two) filled by a and b in turn: a path without printf. */
static void fill_path(buf *out, const char *fmt, const char *a, const char *b)
{
    const char *fill[2] = {a, b};
    int i = 0;
    for (const char *p = fmt; *p;) {
        const char *q = strstr(p, "%s");
        if (!q || i == 2) {
            buf_append(out, p, strlen(p));
            break;
        }
        buf_append(out, p, (size_t)(q - p));
        put3(out, fill[i++], NULL, NULL);
        p = q + 2;
    }
    if (!out->data)
        buf_puts(out, "");
}

/* Sends a typed operation: path is fmt with up to two "%s" filled by id1 and id2
 * path-escaped; body (may be NULL) is written and freed here. */
static trace_call *typed_request(trace_ctx *t, const principal *who, const trace_origin *o,
                                 const char *method, const char *fmt, const char *id1,
                                 const char *id2, json_value *body, int idempotent, view_kind view,
                                 void *arg)
{
    char *text = NULL;
    size_t len = 0;
    if (body) {
        buf b = BUF_INIT;
        json_write(&b, body, 1);
        text = buf_steal(&b, &len);
        json_free(body);
    }
    buf path = BUF_INIT, e1 = BUF_INIT, e2 = BUF_INIT;
    fill_path(&path, fmt, trace_path_escape(id1, &e1), trace_path_escape(id2, &e2));
    trace_call *c = request_text(t, who, o, method, path.data, text, len, idempotent, NULL, arg);
    c->view = view;
    buf_free(&path);
    buf_free(&e1);
    buf_free(&e2);
    return c;
}

static void set_str(json_value *o, const char *key, const char *v)
{
    json_set(o, key, json_new_str(v, strlen(v)));
}

trace_call *trace_get_interaction(trace_ctx *t, const principal *who, const trace_origin *o,
                                  const char *interaction_id, trace_interaction_cb cb, void *arg)
{
    trace_call *c = typed_request(t, who, o, "GET", "/interactions/%s", interaction_id, NULL, NULL,
                                  1, V_INTERACTION, arg);
    c->tcb.interaction = cb;
    c->keep = KEEP_INTERACTION;
    return c;
}

trace_call *trace_create_interaction(trace_ctx *t, const principal *who, const trace_origin *o,
                                     const char *conversation_id, const char *idempotency_key,
                                     const char *question, const char *agent_name,
                                     trace_interaction_cb cb, void *arg)
{
    char qhash[65];
    sha256_hex(question, strlen(question), qhash);
    json_value *b = json_new_object();
    set_str(b, "idempotency_key", idempotency_key);
    set_str(b, "request_hash", qhash);
    set_str(b, "agent_name", agent_name);
    trace_call *c = typed_request(t, who, o, "POST", "/conversations/%s/interactions",
                                  conversation_id, NULL, b, 1, V_INTERACTION, arg);
    c->tcb.interaction = cb;
    c->keep = KEEP_INTERACTION;
    return c;
}

trace_call *trace_finish_interaction(trace_ctx *t, const principal *who, const trace_origin *o,
                                     const char *interaction_id, const char *outcome,
                                     const char *idempotency_key, const char *answer_ref,
                                     const char *reason, trace_interaction_cb cb, void *arg)
{
    json_value *b = json_new_object();
    set_str(b, "outcome", outcome);
    set_str(b, "idempotency_key", idempotency_key);
    if (answer_ref && *answer_ref)
        set_str(b, "answer_artifact_ref", answer_ref);
    if (reason)
        set_str(b, "reason", reason);
    trace_call *c = typed_request(t, who, o, "POST", "/interactions/%s/finish", interaction_id,
                                  NULL, b, 1, V_INTERACTION, arg);
    c->tcb.interaction = cb;
    c->keep = KEEP_INTERACTION;
    return c;
}

trace_call *trace_ensure_conversation(trace_ctx *t, const principal *who, const trace_origin *o,
                                      const char *external_key, trace_id_cb cb, void *arg)
{
    char h[65], ikey[80];
    sha256_hex(external_key, strlen(external_key), h);
    snprintf(ikey, sizeof ikey, "mcp-conversation:%.32s", h);
    json_value *b = json_new_object();
    set_str(b, "external_conversation_key", external_key);
    set_str(b, "idempotency_key", ikey);
    trace_call *c = typed_request(t, who, o, "POST", "/conversations:ensure-current", NULL, NULL, b,
                                  1, V_ID, arg);
    c->tcb.id = cb;
    c->id_member = "conversation_id";
    c->keep = KEEP_CONVERSATION_ID;
    return c;
}

trace_call *trace_store_answer(trace_ctx *t, const principal *who, const trace_origin *o,
                               const char *request_id, const char *interaction_id,
                               const char *answer, const char *observed_at, trace_id_cb cb,
                               void *arg)
{
    json_value *content = json_new_object();
    set_str(content, "answer", answer);
    buf text = BUF_INIT, ini = BUF_INIT;
    json_write(&text, content, 1);
    char h[65], hash[80], idsrc[400], aid[80], trace_id[33], span_id[17];
    sha256_hex(text.data, text.len, h);
    snprintf(hash, sizeof hash, "sha256:%s", h);
    snprintf(idsrc, sizeof idsrc, "%s|result|%s", interaction_id, hash);
    sha256_hex(idsrc, strlen(idsrc), h);
    snprintf(aid, sizeof aid, "art_result_%.32s", h);
    trace_synthetic_ids(request_id, trace_id, span_id);
    json_value *b = json_new_object();
    set_str(b, "artifact_id", aid);
    set_str(b, "artifact_type", "result");
    set_str(b, "bkn.request.id", request_id);
    set_str(b, "trace_id", trace_id);
    set_str(b, "interaction_id", interaction_id);
    set_str(b, "content_type", "application/json");
    set_str(b, "schema_version", "2.2.0");
    if (observed_at)
        set_str(b, "observed_at", observed_at);
    set_str(b, "content_hash", hash);
    json_set(b, "content", content);
    set_str(b, "bkn.account.id", who->account_id);
    set_str(b, "bkn.account.type", who->account_type);
    set_str(b, "effective_subject_id", who->account_id);
    const char *app_id = who->client_id[0] ? who->client_id : who->account_id;
    set_str(b, "application_principal_id", app_id);
    buf_printf(&ini, "account:%s", who->account_id);
    set_str(b, "initiator", ini.data);
    set_str(b, "agent_or_app", app_id);
    trace_call *c =
        typed_request(t, who, o, "POST", "/evidence/artifacts", NULL, NULL, b, 1, V_ID, arg);
    c->tcb.id = cb;
    c->id_member = "artifact_id";
    c->keep = KEEP_ARTIFACT_ID;
    buf_free(&text);
    buf_free(&ini);
    return c;
}

/* Appends a PayloadEnvelope of the payload text p (n bytes) in canonical member order
 * (trace_payload_envelope's members). */
static void put_envelope(buf *b, const char *p, size_t n)
{
    if (!p) {
        buf_puts(b, "{\"byte_length\":0,\"media_type\":\"application/json\",\"mode\":"
                    "\"omitted\",\"omitted_reason\":\"serialization_failed\"}");
    } else if (n > TRACE_INLINE_MAX) {
        buf_puts(b, "{\"byte_length\":");
        json_write_int(b, (int64_t)n);
        buf_puts(b, ",\"media_type\":\"application/json\",\"mode\":\"omitted\","
                    "\"omitted_reason\":\"payload_too_large\"}");
    } else {
        buf_puts(b, "{\"byte_length\":");
        json_write_int(b, (int64_t)n);
        buf_puts(b, ",\"inline\":");
        buf_append(b, p, n);
        buf_puts(b, ",\"media_type\":\"application/json\",\"mode\":\"inline\"}");
    }
}

static void put_member_str(buf *b, const char *key, const char *v, size_t n)
{
    put3(b, ",\"", key, "\":");
    json_write_string(b, v ? v : "", v ? n : 0);
}

trace_call *trace_ensure_operation(trace_ctx *t, const principal *who, const trace_origin *o,
                                   const trace_ensure_in *in, trace_operation_cb cb, void *arg)
{
    /* The body written as text in canonical member order, the input's canonical
     * text put in once. */
    buf it = BUF_INIT, b = BUF_INIT;
    const char *p = in->input_json;
    size_t n = in->input_len;
    if (!p && in->input) {
        json_write(&it, in->input, 1);
        p = it.data;
        n = it.len;
    }
    /* room for the members around the input: grown once, not step by step */
    buf_reserve(&b, n + 640);
    buf_putc(&b, '{');
    if (in->causation_event_ids) {
        buf_puts(&b, "\"causation_event_ids\":");
        json_write(&b, in->causation_event_ids, 1);
        buf_putc(&b, ',');
    }
    buf_puts(&b, "\"input\":");
    put_envelope(&b, p, n);
    buf_puts(&b, ",\"lease_epoch\":");
    if (in->lease_epoch)
        json_write(&b, in->lease_epoch, 1);
    else
        buf_putc(&b, '0');
    const char *lt = in->lease_token ? in->lease_token : "";
    put_member_str(&b, "lease_token", lt, strlen(lt));
    put_member_str(&b, "operation_key", in->operation_key, strlen(in->operation_key));
    if (in->parent_operation_id && in->parent_operation_id[0])
        put_member_str(&b, "parent_operation_id", in->parent_operation_id,
                       strlen(in->parent_operation_id));
    put_member_str(&b, "protocol", in->protocol, strlen(in->protocol));
    buf_puts(&b, ",\"required\":true,\"source_module\":\"context-loader\"");
    put_member_str(&b, "tool_name", in->tool_name, strlen(in->tool_name));
    buf_putc(&b, '}');
    buf_free(&it);

    buf path = BUF_INIT, e1 = BUF_INIT, e2 = BUF_INIT;
    put3(&path, "/conversations/", trace_path_escape(in->conversation_id, &e1), "/interactions/");
    put3(&path, trace_path_escape(in->interaction_id, &e2), "/operations:ensure", NULL);
    size_t len;
    char *text = buf_steal(&b, &len);
    trace_call *c = request_text(t, who, o, "POST", path.data, text, len, 0, NULL, arg);
    c->view = V_OPERATION;
    c->tcb.operation = cb;
    c->keep = KEEP_OPERATION;
    buf_free(&path);
    buf_free(&e1);
    buf_free(&e2);
    return c;
}

/* The finalization's body (returned, owned; *len set) and its path (into path). */
static char *attempt_text(const trace_attempt_in *in, size_t *len, buf *path)
{
    /* The body written as text in canonical member order, the payload's text put in
     * once (a tree payload is written once, canonically). */
    buf pl = BUF_INIT, b = BUF_INIT;
    const char *p = in->payload_json;
    size_t n = in->payload_len;
    if (!p && in->payload) {
        json_write(&pl, in->payload, 1);
        p = pl.data;
        n = pl.len;
    }
    /* room for the members around the payload: grown once, not step by step */
    buf_reserve(&b, n + 640);
    buf_puts(&b, "{\"artifact_refs\":null,\"business_refs\":");
    if (in->business_refs)
        json_write(&b, in->business_refs, 1);
    else
        buf_puts(&b, "[]");
    if (in->failed) {
        /* {code, message, result: the payload, stage}, canonical */
        buf e = BUF_INIT;
        buf_puts(&e, "{\"code\":\"tool_error\",\"message\":\"the tool returned an error\","
                     "\"result\":");
        if (p)
            buf_append(&e, p, n);
        else
            buf_puts(&e, "null");
        buf_puts(&e, ",\"stage\":\"tool_execution\"}");
        buf_puts(&b, ",\"error\":");
        put_envelope(&b, e.data, e.len);
        buf_free(&e);
    }
    buf_puts(&b, ",\"evidence_durability\":\"durable\",\"observed_evidence_refs\":[]");
    if (!in->failed) {
        buf_puts(&b, ",\"output\":");
        put_envelope(&b, p, n);
    }
    buf_puts(&b, ",\"partial_reasons\":null");
    put_member_str(&b, "receipt_id", in->receipt_id, in->receipt_id ? strlen(in->receipt_id) : 0);
    put_member_str(&b, "request_id", in->request_id, in->request_id ? strlen(in->request_id) : 0);
    buf_puts(&b, ",\"retryable\":false");
    put_member_str(&b, "span_id", in->span_id, 16);
    put_member_str(&b, "trace_id", in->trace_id, 32);
    buf_putc(&b, '}');
    buf_free(&pl);

    buf e1 = BUF_INIT;
    put3(path, "/operations/", trace_path_escape(in->operation_id, &e1), "/attempts/");
    json_write_int(path, (int64_t)in->attempt);
    buf_puts(path, in->failed ? ":fail" : ":complete");
    buf_free(&e1);
    return buf_steal(&b, len);
}

trace_call *trace_finish_attempt(trace_ctx *t, const principal *who, const trace_origin *o,
                                 const trace_attempt_in *in, trace_receipt_cb cb, void *arg)
{
    buf path = BUF_INIT;
    size_t len;
    char *text = attempt_text(in, &len, &path);
    trace_call *c = request_text(t, who, o, "POST", path.data, text, len, 1, NULL, arg);
    c->view = V_RECEIPT;
    c->tcb.receipt = cb;
    c->keep = KEEP_RECEIPT;
    buf_free(&path);
    return c;
}

void trace_finish_attempt_later(trace_ctx *t, const principal *who, const trace_origin *o,
                                const trace_attempt_in *in)
{
    buf path = BUF_INIT;
    size_t len;
    char *text = attempt_text(in, &len, &path);
    t->st.redeliveries++;
    request_text_ex(t, who, o, "POST", path.data, text, len, 1, NULL, NULL,
                    now_mono_ms() + TRACE_REDELIVER_MS);
    buf_free(&path);
}

/* ---- interaction lease cache ---- */

void trace_lease_key(const char *caller_key, const char *interaction_id, char out[65])
{
    buf k = BUF_INIT;
    put3(&k, caller_key, "\n", interaction_id);
    sha256_hex(k.data, k.len, out);
    buf_free(&k);
}

static lease_entry *lease_slot(trace_ctx *t, const char key[65])
{
    return &t->leases[strtoul(key + 56, NULL, 16) % LEASE_SLOTS];
}

int trace_lease_get(trace_ctx *t, const char key[65], const char *conversation_id, char *token,
                    size_t tokenlen, json_value **epoch)
{
    if (t->cfg.lease_ttl_s <= 0)
        return 0;
    lease_entry *e = lease_slot(t, key);
    if (strcmp(e->key, key) || e->expires_ms <= now_mono_ms() ||
        strcmp(e->conversation_id, conversation_id))
        return 0;
    snprintf(token, tokenlen, "%s", e->lease_token);
    *epoch = e->lease_epoch ? json_clone(e->lease_epoch) : NULL;
    return 1;
}

void trace_lease_put(trace_ctx *t, const char key[65], const char *conversation_id,
                     const char *token, const json_value *epoch)
{
    if (t->cfg.lease_ttl_s <= 0 || !token || !token[0])
        return;
    lease_entry *e = lease_slot(t, key);
    json_free(e->lease_epoch);
    memcpy(e->key, key, sizeof e->key);
    snprintf(e->conversation_id, sizeof e->conversation_id, "%s", conversation_id);
    snprintf(e->lease_token, sizeof e->lease_token, "%s", token);
    e->lease_epoch = epoch ? json_clone(epoch) : NULL;
    e->expires_ms = now_mono_ms() + (int64_t)t->cfg.lease_ttl_s * 1000;
}

void trace_lease_drop(trace_ctx *t, const char key[65])
{
    lease_entry *e = lease_slot(t, key);
    if (!strcmp(e->key, key)) {
        e->key[0] = '\0';
        json_free(e->lease_epoch);
        e->lease_epoch = NULL;
    }
}

/* ---- delivery, cancel, stats ---- */

static void call_event(evutil_socket_t fd, short what, void *arg)
{
    trace_call *c = arg;
    trace_ctx *t = c->t;
    if (c->phase == PH_BACKOFF) {
        c->phase = PH_IDLE;
        try_send(c);
        return;
    }
    c->in_cb = 1;
    t->depth++;
    if (c->kind == K_REQUEST && c->view != V_NONE)
        deliver_view(c);
    else if (c->kind == K_REQUEST && c->cb)
        c->cb(&c->reply, c->arg);
    else if (c->kind == K_POLICY && c->pcb)
        c->pcb(c->st, c->arg);
    else if (c->kind == K_PROBE && c->vcb)
        c->vcb(c->verdict, c->arg);
    t->depth--;
    call_free(c);
    if (t->dead && t->depth == 0)
        ctx_destroy(t);
}

void trace_cancel(trace_call *c)
{
    if (!c || c->in_cb)
        return;
    waiter_unlink(c); /* a policy entry's or the probe's */
    call_free(c);
}

void trace_stats(const trace_ctx *t, trace_stats_t *out)
{
    *out = t->st;
    out->breaker = t->breaker;
    if (t->breaker == TRACE_BREAKER_OPEN && now_mono_ms() >= t->open_until)
        out->breaker = TRACE_BREAKER_HALF_OPEN;
}

void trace_write_metrics(const trace_ctx *t, buf *out)
{
    trace_stats_t st;
    if (!t)
        return;
    trace_stats(t, &st);
    metrics_write_counter(out, "cl_trace_requests_total", "Trace Core requests.",
                          (double)st.requests);
    metrics_write_counter(out, "cl_trace_http_calls_total", "Trace Core HTTP tries.",
                          (double)st.http_calls);
    metrics_write_counter(out, "cl_trace_ok_total", "Trace Core requests that succeeded.",
                          (double)st.ok);
    metrics_write_counter(out, "cl_trace_api_errors_total",
                          "Trace Core requests refused by the API.", (double)st.api_errors);
    metrics_write_counter(out, "cl_trace_unavailable_total",
                          "Trace Core requests that found it unavailable.",
                          (double)st.unavailable);
    metrics_write_counter(out, "cl_trace_retries_total", "Extra Trace Core tries.",
                          (double)st.retries);
    metrics_write_counter(out, "cl_trace_fast_fails_total",
                          "Requests refused by the open breaker.", (double)st.fast_fails);
    metrics_write_gauge(out, "cl_trace_breaker_state", "Breaker: 0 closed, 1 open, 2 half-open.",
                        st.breaker == TRACE_BREAKER_OPEN        ? 1
                        : st.breaker == TRACE_BREAKER_HALF_OPEN ? 2
                                                                : 0);
    metrics_write_counter(out, "cl_trace_breaker_opens_total", "Times the breaker opened.",
                          (double)st.breaker_opens);
    metrics_write_counter(out, "cl_trace_probes_total", "Availability probe runs.",
                          (double)st.probes);
    metrics_write_counter(out, "cl_trace_probe_tries_total", "Availability probe tries.",
                          (double)st.probe_tries);
    metrics_write_counter(out, "cl_trace_probe_down_total",
                          "Probe runs that verified an outage.", (double)st.probe_down);
    metrics_write_counter(out, "cl_trace_redeliveries_total",
                          "Attempt finalizations sent again in the background after a failure.",
                          (double)st.redeliveries);
    metrics_write_counter(out, "cl_trace_redelivered_total",
                          "Background finalizations that got their receipt.",
                          (double)st.redelivered);
    metrics_write_counter(out, "cl_trace_redelivery_failed_total",
                          "Background finalizations that ended without a receipt.",
                          (double)st.redelivery_failed);
    metrics_write_counter(out, "cl_trace_policy_cache_hits_total",
                          "Capture policy lookups from cache.", (double)st.policy_hits);
    metrics_write_counter(out, "cl_trace_policy_cache_misses_total",
                          "Capture policy lookups sent to Core.", (double)st.policy_misses);
}
