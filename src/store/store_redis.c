/* store_redis: the shared backend of store.h (replicas share it), on hiredis's asynchronous
 * API and its libevent adapter.
 *
 * States: DOWN (waiting for the reconnect timer) -> RESOLVING (evdns, for host
 * names) -> CONNECTING (TCP) -> HANDSHAKE (AUTH, SELECT, SCRIPT LOAD pipelined) ->
 * READY. Only READY sends commands; in any other state an operation goes to a
 * failure queue that a deferred event answers with rc -1, so callers get a fast,
 * clear "unavailable" instead of a request stuck behind a dead connection.
 *
 * Each operation sent is kept in an in-flight list in send order; a watchdog timer
 * looks at the oldest one, and when it has waited command_timeout_ms the
 * connection is dropped (hiredis then answers every pending command with a NULL
 * reply, which becomes rc -1). An op is freed only in its hiredis callback (or in
 * the failure queue), so a cancelled op stays valid until hiredis is done with it. */
#include "store.h"
#include "log.h"

#include <arpa/inet.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <openssl/crypto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "util.h"

/* Scripts reply {1} when they acted, {0, current value or nil} when not. */
static const char SCRIPT_CLAIM[] =
    "local v = redis.call('GET', KEYS[1]) "
    "if v then return {0, v} end "
    "if tonumber(ARGV[2]) > 0 then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) "
    "else redis.call('SET', KEYS[1], ARGV[1]) end "
    "return {1}";
static const char SCRIPT_SET_IF[] =
    "local v = redis.call('GET', KEYS[1]) "
    "if v ~= ARGV[1] then return {0, v} end "
    "if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) "
    "else redis.call('SET', KEYS[1], ARGV[2]) end "
    "return {1}";
static const char SCRIPT_DEL_IF[] = "local v = redis.call('GET', KEYS[1]) "
                                    "if v ~= ARGV[1] then return {0, v} end "
                                    "redis.call('DEL', KEYS[1]) "
                                    "return {1}";

enum { SC_CLAIM, SC_SET_IF, SC_DEL_IF, SC_COUNT };
static const char *const SCRIPTS[SC_COUNT] = {SCRIPT_CLAIM, SCRIPT_SET_IF, SCRIPT_DEL_IF};

typedef enum { RS_DOWN, RS_RESOLVING, RS_CONNECTING, RS_HANDSHAKE, RS_READY } rstate;

#define MAX_ARGS 7

typedef struct rop {
    store_op base;         /* first */
    TAILQ_ENTRY(rop) link; /* in r->fly or r->fail */
    store_kind kind;
    store_get_cb get_cb;
    store_rc_cb rc_cb;
    void *arg;
    int cancelled;
    int retried; /* re-sent with EVAL after NOSCRIPT */
    int script;  /* SC_*, or -1 */
    int64_t sent_ms;
    int argc;
    char *argv[MAX_ARGS]; /* argv[1] is a placeholder for the script sha / text */
    size_t argvlen[MAX_ARGS];
} rop;

typedef struct rstore {
    store base; /* first */
    struct event_base *evb;
    store_redis_url url;
    char *prefix;
    long connect_timeout_ms, command_timeout_ms, backoff_min_ms, backoff_max_ms, backoff_ms;
    rstate state;
    redisAsyncContext *ac;
    int handshake_left;
    char sha[SC_COUNT][41];
    struct evdns_base *dns;
    struct evdns_getaddrinfo_request *dns_req;
    struct event *reconnect_ev, *connect_to_ev, *watchdog_ev, *fail_ev;
    TAILQ_HEAD(rop_list, rop) fail; /* failed before sending, answered in the next round */
    struct rop_list fly;            /* sent, in send order */
    int logged_down;                /* an outage was logged; log the recovery */
    int destroying;
} rstore;

static const store_vtable redis_vt;

static void log_store(log_level level, const char *msg, const char *detail)
{
    log_line *l = log_begin(level, msg);
    if (detail)
        log_strn(l, "error", detail, 200);
    log_end(l);
}

/* ---- URL ---- */

static int unhex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Copies [p, p+n) into out, %-decoding; -1 when it does not fit or is malformed. */
static int pct_decode(const char *p, size_t n, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)p[i];
        if (c == '%') {
            if (i + 2 >= n)
                return -1;
            int h = unhex(p[i + 1]), l = unhex(p[i + 2]);
            if (h < 0 || l < 0)
                return -1;
            c = h * 16 + l;
            i += 2;
        }
        if (c == 0 || o + 1 >= outlen)
            return -1;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return 0;
}

int store_redis_parse_url(const char *url, store_redis_url *out, char *err, size_t errlen)
{
    int rc = -1;
    memset(out, 0, sizeof *out);
    out->port = 6379;
    if (!url || strncmp(url, "redis://", 8) != 0) {
        snprintf(err, errlen, "expected redis://[[user]:password@]host[:port][/db]");
        goto done;
    }
    const char *p = url + 8;
    const char *end = p + strcspn(p, "/?#");
    const char *at = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == '@')
            at = q; /* the last one: a password may contain '@' only %-encoded, but be lenient */
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *uend = colon ? colon : at;
        if (pct_decode(p, (size_t)(uend - p), out->user, sizeof out->user) < 0 ||
            (colon &&
             pct_decode(colon + 1, (size_t)(at - colon - 1), out->pass, sizeof out->pass) < 0)) {
            snprintf(err, errlen, "bad user or password in the URL");
            goto done;
        }
        if (!colon) { /* redis://secret@host: a bare credential is the password */
            memcpy(out->pass, out->user,
                   sizeof out->pass < sizeof out->user ? sizeof out->pass : sizeof out->user);
            out->user[0] = '\0';
        }
        p = at + 1;
    }
    const char *hend;
    const char *port = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb) {
            snprintf(err, errlen, "unterminated [ in the host");
            goto done;
        }
        if ((size_t)(rb - p - 1) >= sizeof out->host || rb == p + 1)
            goto bad_host;
        memcpy(out->host, p + 1, (size_t)(rb - p - 1));
        hend = rb + 1;
        if (hend < end && *hend != ':')
            goto bad_host;
        port = hend < end ? hend + 1 : NULL;
    } else {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        hend = colon ? colon : end;
        if (hend == p || (size_t)(hend - p) >= sizeof out->host)
            goto bad_host;
        memcpy(out->host, p, (size_t)(hend - p));
        port = colon ? colon + 1 : NULL;
    }
    if (port) {
        long v = 0;
        if (port == end)
            goto bad_port;
        for (const char *q = port; q < end; q++) {
            if (*q < '0' || *q > '9' || (v = v * 10 + (*q - '0')) > 65535)
                goto bad_port;
        }
        if (v == 0)
            goto bad_port;
        out->port = (int)v;
    }
    if (*end == '/' && end[1]) {
        long v = 0;
        for (const char *q = end + 1; *q; q++) {
            if (*q < '0' || *q > '9' || (v = v * 10 + (*q - '0')) > 100000) {
                snprintf(err, errlen, "the database must be a number (redis://host:port/0)");
                goto done;
            }
        }
        out->db = (int)v;
    } else if (*end && !(*end == '/' && !end[1])) {
        snprintf(err, errlen, "unexpected '%c' after the host", *end);
        goto done;
    }
    rc = 0;
    goto done;
bad_host:
    snprintf(err, errlen, "missing or bad host");
    goto done;
bad_port:
    snprintf(err, errlen, "bad port (1..65535)");
done:
    return rc;
}

/* ---- operations ---- */

static void op_free(rop *op)
{
    /* A script op's argv[0] and argv[1] are borrowed (command name, sha / text). */
    for (int i = op->script >= 0 ? 2 : 0; i < op->argc; i++)
        free(op->argv[i]);
    free(op);
}

static void op_answer(rstore *r, rop *op, int rc, const char *val, size_t len)
{
    r->base.ops++;
    if (rc < 0)
        r->base.errors++;
    if (op->cancelled || r->destroying)
        return;
    if (op->kind == STORE_GET) {
        if (op->get_cb)
            op->get_cb(rc, val, len, op->arg);
    } else if (op->rc_cb) {
        op->rc_cb(rc, val, len, op->arg);
    }
}

static void fail_later(rstore *r, rop *op)
{
    TAILQ_INSERT_TAIL(&r->fail, op, link);
    event_active(r->fail_ev, EV_TIMEOUT, 0);
}

static void fail_drain_cb(evutil_socket_t fd, short what, void *arg)
{
    rstore *r = arg;
    /* ops failed by the callbacks run here go to the next round */
    struct rop_list list = TAILQ_HEAD_INITIALIZER(list);
    TAILQ_CONCAT(&list, &r->fail, link);
    for (rop *op; (op = TAILQ_FIRST(&list));) {
        TAILQ_REMOVE(&list, op, link);
        op_answer(r, op, -1, NULL, 0);
        op_free(op);
    }
}

static void conn_drop(rstore *r, const char *why);
static int op_send(rstore *r, rop *op);

static void watchdog_arm(rstore *r, long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(r->watchdog_ev, &tv);
}

static void watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
    rstore *r = arg;
    if (TAILQ_EMPTY(&r->fly))
        return;
    int64_t waited = now_mono_ms() - TAILQ_FIRST(&r->fly)->sent_ms;
    if (waited >= r->command_timeout_ms) {
        r->base.timeouts++;
        conn_drop(r, "command timeout");
        return;
    }
    watchdog_arm(r, (long)(r->command_timeout_ms - waited));
}

/* Is this error reply NOSCRIPT (the server lost our scripts: flush, failover)? */
static int is_noscript(const redisReply *rep)
{
    return rep->type == REDIS_REPLY_ERROR && rep->str && !strncmp(rep->str, "NOSCRIPT", 8);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    rstore *r = ac->data;
    rop *op = privdata;
    const redisReply *rep = reply;
    TAILQ_REMOVE(&r->fly, op, link);
    if (!rep) { /* connection lost or dropped */
        op_answer(r, op, -1, NULL, 0);
        goto done;
    }
    if (op->script >= 0 && !op->retried && is_noscript(rep) && r->ac == ac &&
        r->state == RS_READY) {
        op->retried = 1;
        if (op_send(r, op) == 0)
            return; /* still ours: answered by the retry */
        op_answer(r, op, -1, NULL, 0);
        goto done;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        log_store(LOG_WARN, "state store command failed", rep->str);
        op_answer(r, op, -1, NULL, 0);
        goto done;
    }
    switch (op->kind) {
    case STORE_GET:
        if (rep->type == REDIS_REPLY_STRING)
            op_answer(r, op, 0, rep->str, rep->len);
        else if (rep->type == REDIS_REPLY_NIL)
            op_answer(r, op, 1, NULL, 0);
        else
            op_answer(r, op, -1, NULL, 0);
        break;
    case STORE_SET:
        op_answer(r, op, rep->type == REDIS_REPLY_STATUS ? 0 : -1, NULL, 0);
        break;
    case STORE_DEL:
        if (rep->type == REDIS_REPLY_INTEGER)
            op_answer(r, op, rep->integer > 0 ? 0 : 1, NULL, 0);
        else
            op_answer(r, op, -1, NULL, 0);
        break;
    default: /* scripts */
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
            rep->element[0]->type != REDIS_REPLY_INTEGER) {
            op_answer(r, op, -1, NULL, 0);
        } else if (rep->element[0]->integer == 1) {
            op_answer(r, op, 0, NULL, 0);
        } else if (rep->elements >= 2 && rep->element[1]->type == REDIS_REPLY_STRING) {
            op_answer(r, op, 1, rep->element[1]->str, rep->element[1]->len);
        } else {
            op_answer(r, op, 1, NULL, 0);
        }
        break;
    }
done:
    op_free(op);
}

/* Sends op on the ready connection: 0, or -1 (the caller fails it). */
static int op_send(rstore *r, rop *op)
{
    if (op->script >= 0) {
        op->argv[0] = op->retried ? "EVAL" : "EVALSHA";
        op->argv[1] = op->retried ? (char *)SCRIPTS[op->script] : r->sha[op->script];
        op->argvlen[0] = strlen(op->argv[0]);
        op->argvlen[1] = strlen(op->argv[1]);
    }
    if (redisAsyncCommandArgv(r->ac, on_reply, op, op->argc, (const char **)op->argv,
                              op->argvlen) != REDIS_OK)
        return -1;
    op->sent_ms = now_mono_ms();
    TAILQ_INSERT_TAIL(&r->fly, op, link);
    if (!evtimer_pending(r->watchdog_ev, NULL))
        watchdog_arm(r, r->command_timeout_ms);
    return 0;
}

static void arg_set(rop *op, int i, const char *p, size_t n)
{
    op->argv[i] = xmalloc(n + 1);
    if (n)
        memcpy(op->argv[i], p, n);
    op->argv[i][n] = '\0';
    op->argvlen[i] = n;
}

static void arg_str(rop *op, int i, const char *s)
{
    arg_set(op, i, s, strlen(s));
}

static void arg_key(rstore *r, rop *op, int i, const char *key)
{
    size_t pl = strlen(r->prefix), kl = strlen(key);
    op->argv[i] = xmalloc(pl + kl + 1);
    memcpy(op->argv[i], r->prefix, pl);
    memcpy(op->argv[i] + pl, key, kl + 1);
    op->argvlen[i] = pl + kl;
}

static store_op *redis_submit(store *s, const store_request *req)
{
    rstore *r = (rstore *)s;
    rop *op = xcalloc(1, sizeof *op);
    char ttl[32];
    snprintf(ttl, sizeof ttl, "%ld", req->ttl_ms > 0 ? req->ttl_ms : 0);
    const char *val = req->val ? req->val : "";
    size_t len = req->val ? req->len : 0;
    const char *exp = req->expect ? req->expect : "";
    size_t elen = req->expect ? req->expect_len : 0;
    op->base.s = s;
    op->kind = req->kind;
    op->get_cb = req->get_cb;
    op->rc_cb = req->rc_cb;
    op->arg = req->arg;
    op->script = -1;
    switch (req->kind) {
    case STORE_GET:
    case STORE_DEL:
        arg_str(op, 0, req->kind == STORE_GET ? "GET" : "DEL");
        arg_key(r, op, 1, req->key);
        op->argc = 2;
        break;
    case STORE_SET:
        arg_str(op, 0, "SET");
        arg_key(r, op, 1, req->key);
        arg_set(op, 2, val, len);
        op->argc = 3;
        if (req->ttl_ms > 0) {
            arg_str(op, 3, "PX");
            arg_str(op, 4, ttl);
            op->argc = 5;
        }
        break;
    case STORE_CLAIM:  /* EVALSHA sha 1 key val ttl */
    case STORE_SET_IF: /* EVALSHA sha 1 key expect val ttl */
    case STORE_DEL_IF: /* EVALSHA sha 1 key expect */
        op->script = req->kind == STORE_CLAIM    ? SC_CLAIM
                     : req->kind == STORE_SET_IF ? SC_SET_IF
                                                 : SC_DEL_IF;
        arg_str(op, 2, "1");
        arg_key(r, op, 3, req->key);
        op->argc = 4;
        if (req->kind != STORE_CLAIM)
            arg_set(op, op->argc++, exp, elen);
        if (req->kind != STORE_DEL_IF) {
            arg_set(op, op->argc++, val, len);
            arg_str(op, op->argc++, ttl);
        }
        break;
    }
    if (op->script >= 0)
        op->argv[0] = NULL; /* filled by op_send; argv[1] is borrowed, never freed */
    int ok = r->state == RS_READY && op_send(r, op) == 0;
    if (!ok)
        fail_later(r, op);
    return (op->get_cb || op->rc_cb) ? &op->base : NULL;
}

/* ---- the connection ---- */

static void reconnect_schedule(rstore *r)
{
    struct timeval tv = {r->backoff_ms / 1000, (r->backoff_ms % 1000) * 1000};
    evtimer_add(r->reconnect_ev, &tv);
    r->backoff_ms = r->backoff_ms * 2 > r->backoff_max_ms ? r->backoff_max_ms : r->backoff_ms * 2;
}

/* Any state -> DOWN: pending ops answer -1 (hiredis runs their callbacks with NULL
 * replies while the context is freed), then a reconnect is scheduled. */
static void conn_drop(rstore *r, const char *why)
{
    redisAsyncContext *ac = r->ac;
    int was_ready = r->state == RS_READY;
    r->ac = NULL;
    r->state = RS_DOWN;
    evtimer_del(r->connect_to_ev);
    evtimer_del(r->watchdog_ev);
    if (r->dns_req) {
        struct evdns_getaddrinfo_request *q = r->dns_req;
        r->dns_req = NULL;
        evdns_getaddrinfo_cancel(q);
    }
    if (!r->logged_down || was_ready) {
        log_store(LOG_WARN, "state store unavailable", why);
        r->logged_down = 1;
    }
    if (ac)
        redisAsyncFree(ac); /* deferred by hiredis when called inside its callback */
    if (!r->destroying)
        reconnect_schedule(r);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    rstore *r = ac->data;
    if (r->ac != ac)
        return;   /* we dropped it ourselves */
    r->ac = NULL; /* hiredis frees it after this callback */
    conn_drop(r, status == REDIS_OK ? "connection closed" : ac->errstr);
}

static void handshake_done(rstore *r)
{
    r->state = RS_READY;
    r->backoff_ms = r->backoff_min_ms;
    evtimer_del(r->connect_to_ev);
    if (r->logged_down) {
        log_store(LOG_INFO, "state store connected", NULL);
        r->logged_down = 0;
    }
}

static void on_handshake(redisAsyncContext *ac, void *reply, void *privdata)
{
    rstore *r = ac->data;
    const redisReply *rep = reply;
    intptr_t step = (intptr_t)privdata; /* -1 AUTH/SELECT, else the script index */
    if (!rep || r->ac != ac || r->state != RS_HANDSHAKE)
        return;
    if (rep->type == REDIS_REPLY_ERROR) {
        char why[300];
        snprintf(why, sizeof why, "%s: %s", step < 0 ? "AUTH/SELECT" : "SCRIPT LOAD", rep->str);
        conn_drop(r, why); /* frees ac once this callback returns */
        return;
    }
    if (step >= 0 && step < SC_COUNT && rep->type == REDIS_REPLY_STRING && rep->len == 40)
        memcpy(r->sha[step], rep->str, 41);
    if (--r->handshake_left == 0)
        handshake_done(r);
}

static void on_connect(const redisAsyncContext *cac, int status)
{
    rstore *r = cac->data;
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    if (r->ac != ac)
        return;
    if (status != REDIS_OK) {
        r->ac = NULL; /* hiredis frees it */
        conn_drop(r, ac->errstr[0] ? ac->errstr : "connect failed");
        return;
    }
    r->state = RS_HANDSHAKE;
    r->handshake_left = 0;
    if (r->url.pass[0]) {
        /* AUTH password, or AUTH user password (Redis 6 ACL users). */
        int with_user = r->url.user[0] != '\0';
        const char *av[3] = {"AUTH", with_user ? r->url.user : r->url.pass, r->url.pass};
        redisAsyncCommandArgv(ac, on_handshake, (void *)(intptr_t)-1, with_user ? 3 : 2, av, NULL);
        r->handshake_left++;
    }
    if (r->url.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", r->url.db);
        const char *av[2] = {"SELECT", db};
        redisAsyncCommandArgv(ac, on_handshake, (void *)(intptr_t)-1, 2, av, NULL);
        r->handshake_left++;
    }
    for (intptr_t i = 0; i < SC_COUNT; i++) {
        const char *av[3] = {"SCRIPT", "LOAD", SCRIPTS[i]};
        redisAsyncCommandArgv(ac, on_handshake, (void *)i, 3, av, NULL);
        r->handshake_left++;
    }
}

static void connect_addr(rstore *r, const char *ip)
{
    redisAsyncContext *ac = redisAsyncConnect(ip, r->url.port);
    if (!ac || ac->err) {
        char why[200];
        snprintf(why, sizeof why, "%s", ac ? ac->errstr : "out of memory");
        if (ac)
            redisAsyncFree(ac);
        conn_drop(r, why);
        return;
    }
    ac->data = r;
    r->ac = ac;
    r->state = RS_CONNECTING;
    redisLibeventAttach(ac, r->evb);
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

static void on_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
    rstore *r = arg;
    if (result == EVUTIL_EAI_CANCEL) {
        if (res)
            evutil_freeaddrinfo(res);
        return;
    }
    r->dns_req = NULL;
    char ip[INET6_ADDRSTRLEN] = "";
    if (result == 0 && res) {
        const void *a = res->ai_family == AF_INET6
                            ? (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr
                            : (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr;
        evutil_inet_ntop(res->ai_family, a, ip, sizeof ip);
    }
    if (res)
        evutil_freeaddrinfo(res);
    if (r->state != RS_RESOLVING)
        return;
    if (!ip[0]) {
        char why[300];
        snprintf(why, sizeof why, "cannot resolve %s: %s", r->url.host,
                 result ? evutil_gai_strerror(result) : "no address");
        conn_drop(r, why);
        return;
    }
    connect_addr(r, ip);
}

static void conn_start(rstore *r)
{
    struct timeval tv = {r->connect_timeout_ms / 1000, (r->connect_timeout_ms % 1000) * 1000};
    unsigned char tmp[16];
    evtimer_add(r->connect_to_ev, &tv);
    if (inet_pton(AF_INET, r->url.host, tmp) == 1 || inet_pton(AF_INET6, r->url.host, tmp) == 1) {
        connect_addr(r, r->url.host);
        return;
    }
    /* hiredis would resolve a name with a blocking getaddrinfo: resolve it here. */
    if (!r->dns)
        r->dns = evdns_base_new(r->evb, EVDNS_BASE_INITIALIZE_NAMESERVERS);
    if (!r->dns) {
        conn_drop(r, "cannot set up the DNS resolver");
        return;
    }
    struct evutil_addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    r->state = RS_RESOLVING;
    struct evdns_getaddrinfo_request *q =
        evdns_getaddrinfo(r->dns, r->url.host, NULL, &hints, on_resolved, r);
    if (q && r->state == RS_RESOLVING)
        r->dns_req = q;
}

static void reconnect_cb(evutil_socket_t fd, short what, void *arg)
{
    conn_start(arg);
}

static void connect_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    rstore *r = arg;
    if (r->state != RS_READY)
        conn_drop(r, "connect timeout");
}

/* ---- vtable ---- */

static void redis_cancel(store_op *o)
{
    ((rop *)o)->cancelled = 1;
}

static size_t redis_entries(const store *s)
{
    return 0;
}

static void redis_destroy(store *s)
{
    rstore *r = (rstore *)s;
    r->destroying = 1;
    redisAsyncContext *ac = r->ac;
    r->ac = NULL;
    if (r->dns_req) {
        struct evdns_getaddrinfo_request *q = r->dns_req;
        r->dns_req = NULL;
        evdns_getaddrinfo_cancel(q);
    }
    if (ac)
        redisAsyncFree(ac); /* runs the pending callbacks (silenced), which free the ops */
    fail_drain_cb(-1, 0, r);
    if (r->dns)
        evdns_base_free(r->dns, 1);
    event_free(r->reconnect_ev);
    event_free(r->connect_to_ev);
    event_free(r->watchdog_ev);
    event_free(r->fail_ev);
    free(r->prefix);
    OPENSSL_cleanse(r->url.pass, sizeof r->url.pass);
    free(r);
}

static const store_vtable redis_vt = {redis_submit, redis_cancel, redis_entries, redis_destroy};

store *store_redis_new(struct event_base *base, const store_redis_config *cfg, char *err,
                       size_t errlen)
{
    store_redis_url u;
    if (store_redis_parse_url(cfg ? cfg->url : NULL, &u, err, errlen) < 0)
        return NULL;
    rstore *r = xcalloc(1, sizeof *r);
    TAILQ_INIT(&r->fail);
    TAILQ_INIT(&r->fly);
    r->base.vt = &redis_vt;
    r->evb = base;
    r->url = u;
    r->prefix = xstrdup(cfg->key_prefix ? cfg->key_prefix : "");
    r->connect_timeout_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 1000;
    r->command_timeout_ms = cfg->command_timeout_ms > 0 ? cfg->command_timeout_ms : 1000;
    r->backoff_min_ms = cfg->reconnect_min_ms > 0 ? cfg->reconnect_min_ms : 50;
    r->backoff_max_ms = cfg->reconnect_max_ms > 0 ? cfg->reconnect_max_ms : 2000;
    if (r->backoff_max_ms < r->backoff_min_ms)
        r->backoff_max_ms = r->backoff_min_ms;
    r->backoff_ms = r->backoff_min_ms;
    r->reconnect_ev = evtimer_new(base, reconnect_cb, r);
    r->connect_to_ev = evtimer_new(base, connect_timeout_cb, r);
    r->watchdog_ev = evtimer_new(base, watchdog_cb, r);
    r->fail_ev = event_new(base, -1, 0, fail_drain_cb, r);
    if (!r->reconnect_ev || !r->connect_to_ev || !r->watchdog_ev || !r->fail_ev)
        abort(); /* allocation failure, like xmalloc */
    r->state = RS_DOWN;
    conn_start(r);
    return &r->base;
}

int store_redis_ready(const store *s)
{
    return s && s->vt == &redis_vt && ((const rstore *)s)->state == RS_READY;
}
