/* fetch: the lean client (hclient.c) for http:// URLs with a numeric host, libcurl
 * multi driven by libevent for everything else (see fetch.h for the contract).
 *
 * Shape: curl tells us which sockets to watch (socket_cb) and when to wake it
 * (timer_cb); libevent events call curl_multi_socket_action. Finished transfers are
 * collected with curl_multi_info_read right after socket_action returns and pushed
 * onto a completion queue; a separate "deliver" event drains the queue, so user
 * callbacks never run inside curl or inside fetch_start and may start or cancel
 * requests (or free the whole context) freely. */
#include "fetch.h"
#include "hclient.h"
#include "util.h"

#include <ctype.h>
#include <curl/curl.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

/* Easy handles kept between requests: curl_easy_reset is cheaper than a new handle
 * (the allocation and defaults of curl_easy_init), and the multi handle keeps the
 * connections either way. */
#define FETCH_SPARE_EASY 32
/* Finished requests kept for the next ones: no allocation per request. */
#define FETCH_SPARE_REQS 64

enum req_state {
    REQ_RUNNING,    /* easy handle attached to the multi handle */
    REQ_QUEUED,     /* finished, waiting in the completion queue */
    REQ_DELIVERING, /* its callback is running right now */
};

struct fetch_req {
    fetch_ctx *ctx;
    CURL *easy;      /* NULL when the lean client serves the request */
    hc_req *hc;      /* the lean client's request while it runs */
    char *hdr_arena; /* owns the strings of resp_headers when set (lean client) */
    size_t hdr_arena_len;
    enum req_state state;
    fetch_cb cb;
    void *arg;
    struct curl_slist *req_headers; /* owned */
    char *body;                     /* owned copy of the request body */
    size_t max_response;
    int too_large;
    buf resp_body;
    fetch_header *resp_headers; /* owned names and values */
    size_t n_resp_headers, cap_resp_headers;
    int64_t started_ms;
    /* result, filled when the transfer completes */
    fetch_result result;
    long status;
    char errbuf[CURL_ERROR_SIZE];
    const char *error;           /* points into errbuf or at static text */
    TAILQ_ENTRY(fetch_req) link; /* in ctx->running or ctx->queue */
    fetch_req *next_spare;       /* in ctx->spare_reqs */
};

typedef struct sockinfo {
    struct event *ev;
    curl_socket_t fd;
    LIST_ENTRY(sockinfo) link; /* in ctx->socks */
} sockinfo;

typedef TAILQ_HEAD(req_list, fetch_req) req_list;

struct fetch_ctx {
    struct event_base *base;
    CURLM *multi;
    hc_ctx *hc; /* NULL when every request goes through libcurl */
    struct event *timer;
    struct event *deliver;
    fetch_config cfg;
    req_list running;
    req_list queue;
    LIST_HEAD(, sockinfo) socks;   /* every socket event we own, freed on fetch_free */
    size_t inflight;               /* running + queued */
    int dispatching;               /* inside deliver_cb */
    CURL *spare[FETCH_SPARE_EASY]; /* reset easy handles kept for the next requests */
    size_t n_spare;
    fetch_req *spare_reqs;
    size_t n_spare_reqs;
    int dead; /* fetch_free called during dispatch: free when it unwinds */
};

static int curl_inited = 0;

/* Byte classes of a request's method, header names and a path after a base URL: one
 * lookup per byte (made by fetch_new, before any request). */
enum { B_TOKEN = 1, B_PATH = 2 };
static unsigned char byte_class[256];

static void byte_classes_init(void)
{
    for (int c = '!'; c < 127; c++)
        byte_class[c] = (unsigned char)((c == ':' ? 0 : B_TOKEN) | (c == '#' ? 0 : B_PATH));
}

struct fetch_base {
    char *url;
    size_t url_len;
    int lean; /* target holds the parsed URL (pointers into url) */
    hc_target target;
};

fetch_base *fetch_base_new(const char *base_url)
{
    fetch_base *b = xcalloc(1, sizeof(*b));
    b->url = xstrdup(base_url ? base_url : "");
    b->url_len = strlen(b->url);
    /* A fragment would swallow the path appended to it: such a base goes the slow way,
     * its URL put together and parsed per request as any other. */
    b->lean = !strchr(b->url, '#') && hc_parse_url(b->url, &b->target) == 0;
    return b;
}

void fetch_base_free(fetch_base *b)
{
    if (!b)
        return;
    free(b->url);
    free(b);
}

int fetch_base_lean(const fetch_base *b)
{
    return b && b->lean;
}

static void req_destroy(fetch_req *r)
{
    fetch_ctx *ctx = r->ctx;
    /* Only detached handles come here (removed from the multi handle, or never added). */
    if (r->easy && ctx && !ctx->dead && ctx->n_spare < FETCH_SPARE_EASY) {
        curl_easy_reset(r->easy);
        ctx->spare[ctx->n_spare++] = r->easy;
    } else if (r->easy) {
        curl_easy_cleanup(r->easy);
    }
    curl_slist_free_all(r->req_headers);
    free(r->body);
    buf_free(&r->resp_body);
    if (r->hdr_arena)
        r->n_resp_headers = 0; /* the strings live in the arena */
    for (size_t i = 0; i < r->n_resp_headers; i++) {
        free((char *)r->resp_headers[i].name);
        free((char *)r->resp_headers[i].value);
    }
    free(r->hdr_arena);
    free(r->resp_headers);
    if (ctx && !ctx->dead && ctx->n_spare_reqs < FETCH_SPARE_REQS) {
        r->next_spare = ctx->spare_reqs;
        ctx->spare_reqs = r;
        ctx->n_spare_reqs++;
        return;
    }
    free(r);
}

/* Moves a finished request onto the completion queue. */
static void req_finished(fetch_req *r)
{
    fetch_ctx *ctx = r->ctx;
    TAILQ_REMOVE(&ctx->running, r, link);
    r->state = REQ_QUEUED;
    TAILQ_INSERT_TAIL(&ctx->queue, r, link);
    event_active(ctx->deliver, 0, 0);
}

/* The lean client's completion: takes the response over (no user code here). */
static void hc_done(hc_result *res, void *arg)
{
    fetch_req *r = arg;
    hc_parser *p = res->parser;
    r->hc = NULL;
    r->result = res->result;
    r->error = res->error;
    if (res->result == FETCH_OK) {
        r->status = p->status;
        r->resp_headers = hc_parser_headers(p);
        r->n_resp_headers = p->n_headers;
        r->hdr_arena = buf_steal(&p->arena, &r->hdr_arena_len);
        r->resp_body = p->body;
        memset(&p->body, 0, sizeof(p->body));
    }
    req_finished(r);
}

/* ---- curl callbacks (never call user code from here) ---- */

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    fetch_req *r = userdata;
    size_t n = size * nmemb;
    if (r->resp_body.len + n > r->max_response) {
        r->too_large = 1;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    buf_append(&r->resp_body, ptr, n);
    return n;
}

static void resp_headers_clear(fetch_req *r)
{
    for (size_t i = 0; i < r->n_resp_headers; i++) {
        free((char *)r->resp_headers[i].name);
        free((char *)r->resp_headers[i].value);
    }
    r->n_resp_headers = 0;
}

static size_t header_cb(char *ptr, size_t size, size_t nitems, void *userdata)
{
    fetch_req *r = userdata;
    size_t n = size * nitems;
    /* A status line starts a new header block (1xx interim responses). */
    if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) {
        resp_headers_clear(r);
        return n;
    }
    const char *colon = memchr(ptr, ':', n);
    if (!colon || colon == ptr)
        return n; /* blank line or malformed: ignore */
    size_t nlen = (size_t)(colon - ptr);
    const char *v = colon + 1, *end = ptr + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (r->n_resp_headers == r->cap_resp_headers) {
        r->cap_resp_headers = r->cap_resp_headers ? 2 * r->cap_resp_headers : 16;
        r->resp_headers = xrealloc(r->resp_headers, r->cap_resp_headers * sizeof(*r->resp_headers));
    }
    char *name = xstrndup(ptr, nlen);
    for (char *p = name; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    r->resp_headers[r->n_resp_headers].name = name;
    r->resp_headers[r->n_resp_headers].value = xstrndup(v, (size_t)(end - v));
    r->n_resp_headers++;
    return n;
}

/* ---- completion ---- */

static fetch_result map_curl_error(CURLcode rc, fetch_req *r)
{
    switch (rc) {
    case CURLE_OK:
        return FETCH_OK;
    case CURLE_OPERATION_TIMEDOUT:
        return FETCH_TIMEOUT;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return FETCH_CONNECT;
    case CURLE_WRITE_ERROR:
        return r->too_large ? FETCH_TOO_LARGE : FETCH_ERROR;
    default:
        return FETCH_ERROR;
    }
}

static void check_multi_info(fetch_ctx *ctx)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(ctx->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *easy = msg->easy_handle;
        CURLcode rc = msg->data.result;
        fetch_req *r = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&r);
        if (!r || r->state != REQ_RUNNING)
            continue;
        r->result = map_curl_error(rc, r);
        if (r->result == FETCH_OK) {
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &r->status);
            r->error = NULL;
        } else if (r->result == FETCH_TOO_LARGE) {
            r->error = "response body exceeds the size limit";
        } else {
            r->error = r->errbuf[0] ? r->errbuf : curl_easy_strerror(rc);
        }
        curl_multi_remove_handle(ctx->multi, easy);
        req_finished(r);
    }
}

static void deliver_cb(evutil_socket_t fd, short what, void *arg)
{
    fetch_ctx *ctx = arg;
    ctx->dispatching = 1;
    fetch_req *r;
    while (!ctx->dead && (r = TAILQ_FIRST(&ctx->queue))) {
        TAILQ_REMOVE(&ctx->queue, r, link);
        r->state = REQ_DELIVERING;
        fetch_response resp = {
            .result = r->result,
            .error = r->error,
            .status = r->result == FETCH_OK ? r->status : 0,
            .headers = r->resp_headers,
            .n_headers = r->n_resp_headers,
            .packed_headers = r->hdr_arena,
            .packed_headers_len = r->hdr_arena_len,
            .body = r->resp_body.data ? r->resp_body.data : "",
            .body_len = r->resp_body.len,
            .elapsed_ms = now_mono_ms() - r->started_ms,
        };
        r->cb(&resp, r->arg);
        ctx->inflight--;
        req_destroy(r);
    }
    ctx->dispatching = 0;
    if (ctx->dead)
        fetch_free(ctx);
}

/* ---- socket and timer plumbing ---- */

static void event_cb(evutil_socket_t fd, short what, void *arg)
{
    fetch_ctx *ctx = arg;
    int flags = 0, running = 0;
    if (what & EV_READ)
        flags |= CURL_CSELECT_IN;
    if (what & EV_WRITE)
        flags |= CURL_CSELECT_OUT;
    curl_multi_socket_action(ctx->multi, fd, flags, &running);
    check_multi_info(ctx);
}

static void timer_ev_cb(evutil_socket_t fd, short what, void *arg)
{
    fetch_ctx *ctx = arg;
    int running = 0;
    curl_multi_socket_action(ctx->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_multi_info(ctx);
}

static int multi_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    fetch_ctx *ctx = userp;
    if (timeout_ms < 0) {
        evtimer_del(ctx->timer);
        return 0;
    }
    /* Even a 0 ms timeout goes through the loop: socket_action must not be called
     * from inside this callback. */
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(ctx->timer, &tv);
    return 0;
}

static void sock_unlink_free(fetch_ctx *ctx, sockinfo *si)
{
    LIST_REMOVE(si, link);
    event_free(si->ev);
    free(si);
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    fetch_ctx *ctx = userp;
    sockinfo *si = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (si) {
            curl_multi_assign(ctx->multi, s, NULL);
            sock_unlink_free(ctx, si);
        }
        return 0;
    }
    short kind = EV_PERSIST;
    if (what & CURL_POLL_IN)
        kind |= EV_READ;
    if (what & CURL_POLL_OUT)
        kind |= EV_WRITE;
    if (!si) {
        si = xcalloc(1, sizeof(*si));
        si->fd = s;
        si->ev = event_new(ctx->base, s, kind, event_cb, ctx);
        if (!si->ev) {
            free(si);
            return -1;
        }
        LIST_INSERT_HEAD(&ctx->socks, si, link);
        curl_multi_assign(ctx->multi, s, si);
    } else {
        event_del(si->ev);
        event_assign(si->ev, ctx->base, s, kind, event_cb, ctx);
    }
    event_add(si->ev, NULL);
    return 0;
}

/* ---- public API ---- */

fetch_ctx *fetch_new(struct event_base *base, const fetch_config *cfg, const char **err)
{
    fetch_ctx *ctx = NULL;
    if (!base) {
        *err = "no event base";
        goto fail;
    }
    /* Called from the main thread before any worker exists, so a plain flag is
     * enough; the global state is never torn down (other users may share it). */
    if (!curl_inited) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            *err = "curl_global_init failed";
            goto fail;
        }
        curl_inited = 1;
    }
    byte_classes_init();
    ctx = xcalloc(1, sizeof(*ctx));
    TAILQ_INIT(&ctx->running);
    TAILQ_INIT(&ctx->queue);
    LIST_INIT(&ctx->socks);
    ctx->base = base;
    if (cfg)
        ctx->cfg = *cfg;
    if (ctx->cfg.default_timeout_ms <= 0)
        ctx->cfg.default_timeout_ms = 10000;
    if (ctx->cfg.default_max_response == 0)
        ctx->cfg.default_max_response = 16u << 20;
    if (ctx->cfg.max_host_connections <= 0)
        ctx->cfg.max_host_connections = 64;
    ctx->multi = curl_multi_init();
    ctx->timer = evtimer_new(base, timer_ev_cb, ctx);
    ctx->deliver = event_new(base, -1, 0, deliver_cb, ctx);
    if (!ctx->multi || !ctx->timer || !ctx->deliver) {
        *err = "cannot create the curl multi handle or its events";
        goto fail;
    }
    curl_multi_setopt(ctx->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(ctx->multi, CURLMOPT_SOCKETDATA, ctx);
    curl_multi_setopt(ctx->multi, CURLMOPT_TIMERFUNCTION, multi_timer_cb);
    curl_multi_setopt(ctx->multi, CURLMOPT_TIMERDATA, ctx);
    curl_multi_setopt(ctx->multi, CURLMOPT_MAX_HOST_CONNECTIONS, ctx->cfg.max_host_connections);
    /* Keep enough idle connections around for the per-host limit to be reused. */
    curl_multi_setopt(ctx->multi, CURLMOPT_MAXCONNECTS, ctx->cfg.max_host_connections * 4);
    if (ctx->cfg.client == FETCH_CLIENT_LEAN &&
        !(ctx->hc = hc_new(base, ctx->cfg.max_host_connections))) {
        *err = "cannot create the lean HTTP client";
        goto fail;
    }
    return ctx;
fail:
    if (ctx) {
        if (ctx->multi)
            curl_multi_cleanup(ctx->multi);
        if (ctx->timer)
            event_free(ctx->timer);
        if (ctx->deliver)
            event_free(ctx->deliver);
        free(ctx);
    }
    return NULL;
}

void fetch_free(fetch_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->dispatching) {
        /* Called from a fetch callback: the request being delivered is still in use;
         * cancel the rest now and finish when deliver_cb unwinds. */
        ctx->dead = 1;
        while (TAILQ_FIRST(&ctx->running))
            fetch_cancel(TAILQ_FIRST(&ctx->running));
        while (TAILQ_FIRST(&ctx->queue))
            fetch_cancel(TAILQ_FIRST(&ctx->queue));
        return;
    }
    while (TAILQ_FIRST(&ctx->running))
        fetch_cancel(TAILQ_FIRST(&ctx->running));
    while (TAILQ_FIRST(&ctx->queue))
        fetch_cancel(TAILQ_FIRST(&ctx->queue));
    while (ctx->n_spare)
        curl_easy_cleanup(ctx->spare[--ctx->n_spare]);
    fetch_req *r;
    while ((r = ctx->spare_reqs)) {
        ctx->spare_reqs = r->next_spare;
        free(r);
    }
    hc_free(ctx->hc);
    curl_multi_cleanup(ctx->multi); /* may still report sockets to socket_cb */
    while (!LIST_EMPTY(&ctx->socks))
        sock_unlink_free(ctx, LIST_FIRST(&ctx->socks));
    event_free(ctx->timer);
    event_free(ctx->deliver);
    free(ctx);
}

static int method_has_body(const char *m)
{
    return strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0 || strcmp(m, "PATCH") == 0;
}

static int valid_token(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!(byte_class[(unsigned char)*s] & B_TOKEN))
            return 0;
    return 1;
}

/* 1 when the path appended to a lean base keeps the URL one the lean client serves
 * as it is: visible ASCII, no fragment. */
static int path_plain(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(byte_class[(unsigned char)p[i]] & B_PATH))
            return 0;
    return 1;
}

static fetch_req *start(fetch_ctx *ctx, const fetch_request *req, fetch_cb cb, void *arg,
                        const char **err);

fetch_req *fetch_start(fetch_ctx *ctx, const fetch_request *req, fetch_cb cb, void *arg,
                       const char **err)
{
    if (!req || req->url || !req->base)
        return start(ctx, req, cb, arg, err);
    if (ctx && ctx->hc && req->base->lean && (req->path || !req->path_len) &&
        path_plain(req->path, req->path_len))
        return start(ctx, req, cb, arg, err);
    /* Anything else is served as the whole URL would be. */
    buf url = BUF_INIT;
    buf_reserve(&url, req->base->url_len + req->path_len);
    buf_append(&url, req->base->url, req->base->url_len);
    if (req->path_len)
        buf_append(&url, req->path, req->path_len);
    fetch_request whole = *req;
    whole.url = url.data;
    whole.base = NULL;
    fetch_req *r = start(ctx, &whole, cb, arg, err);
    buf_free(&url);
    return r;
}

static fetch_req *start(fetch_ctx *ctx, const fetch_request *req, fetch_cb cb, void *arg,
                        const char **err)
{
    fetch_req *r = NULL;
    buf line = BUF_INIT;
    if (!ctx || !req || !cb || (!req->url && !req->base) || !req->method) {
        *err = "missing context, request, url, method or callback";
        goto fail;
    }
    if (ctx->dead) {
        *err = "fetch context is being freed";
        goto fail;
    }
    if (req->url && !str_istartswith(req->url, "http://") &&
        !str_istartswith(req->url, "https://")) {
        *err = "url must be absolute http(s)";
        goto fail;
    }
    if (!valid_token(req->method)) {
        *err = "invalid method";
        goto fail;
    }
    if (req->body_len && !req->body) {
        *err = "body_len without body";
        goto fail;
    }
    for (size_t i = 0; i < req->n_headers; i++) {
        const fetch_header *h = &req->headers[i];
        if (!h->name || !valid_token(h->name) || !h->value || strpbrk(h->value, "\r\n")) {
            *err = "invalid request header";
            goto fail;
        }
    }
    if ((r = ctx->spare_reqs)) {
        ctx->spare_reqs = r->next_spare;
        ctx->n_spare_reqs--;
        memset(r, 0, sizeof(*r));
    } else {
        r = xcalloc(1, sizeof(*r));
    }
    r->ctx = ctx;
    r->cb = cb;
    r->arg = arg;
    r->max_response = req->max_response ? req->max_response : ctx->cfg.default_max_response;
    long timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : ctx->cfg.default_timeout_ms;
    int is_head = strcmp(req->method, "HEAD") == 0;
    hc_target parsed;
    const hc_target *target = NULL;
    if (!req->url) /* a lean base with a plain path (fetch_start) */
        target = &req->base->target;
    else if (ctx->hc && hc_parse_url(req->url, &parsed) == 0)
        target = &parsed;
    if (target) {
        r->started_ms = now_mono_ms();
        r->state = REQ_RUNNING;
        r->hc = hc_start(ctx->hc, target, req->url ? NULL : req->path, req->url ? 0 : req->path_len,
                         req->method, req->headers, req->n_headers, req->body, req->body_len,
                         !is_head && (req->body || method_has_body(req->method)), req->pipeline,
                         timeout_ms, r->max_response, hc_done, r, err);
        if (!r->hc)
            goto fail;
        TAILQ_INSERT_TAIL(&ctx->running, r, link);
        ctx->inflight++;
        return r;
    }
    r->easy = ctx->n_spare ? ctx->spare[--ctx->n_spare] : curl_easy_init();
    if (!r->easy) {
        *err = "curl_easy_init failed";
        goto fail;
    }
    for (size_t i = 0; i < req->n_headers; i++) {
        const fetch_header *h = &req->headers[i];
        buf_reset(&line);
        /* "Name;" is curl's way to send a header with an empty value. */
        buf_puts(&line, h->name); /* per header of every upstream call: no printf */
        if (h->value[0]) {
            buf_append(&line, ": ", 2);
            buf_puts(&line, h->value);
        } else {
            buf_putc(&line, ';');
        }
        r->req_headers = curl_slist_append(r->req_headers, line.data);
    }
    r->req_headers = curl_slist_append(r->req_headers, "Expect:");

    CURL *e = r->easy;
    curl_easy_setopt(e, CURLOPT_URL, req->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROXY, ""); /* ignore http_proxy & co. from env */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->req_headers);
    if (is_head) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (req->body || method_has_body(req->method)) {
        /* An owned copy rather than COPYPOSTFIELDS: the body may contain NULs. */
        r->body = xmalloc(req->body_len + 1);
        if (req->body_len)
            memcpy(r->body, req->body, req->body_len);
        r->body[req->body_len] = '\0';
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
    } else if (strcmp(req->method, "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
    }
    r->started_ms = now_mono_ms();
    r->state = REQ_RUNNING;
    if (curl_multi_add_handle(ctx->multi, e) != CURLM_OK) {
        *err = "curl_multi_add_handle failed";
        goto fail;
    }
    TAILQ_INSERT_TAIL(&ctx->running, r, link);
    ctx->inflight++;
    buf_free(&line);
    return r;
fail:
    buf_free(&line);
    if (r)
        req_destroy(r);
    return NULL;
}

void fetch_cancel(fetch_req *r)
{
    if (!r)
        return;
    fetch_ctx *ctx = r->ctx;
    switch (r->state) {
    case REQ_RUNNING:
        if (r->hc)
            hc_cancel(r->hc);
        else
            curl_multi_remove_handle(ctx->multi, r->easy);
        TAILQ_REMOVE(&ctx->running, r, link);
        break;
    case REQ_QUEUED:
        TAILQ_REMOVE(&ctx->queue, r, link);
        break;
    case REQ_DELIVERING:
        return; /* its own callback is running; deliver_cb frees it afterwards */
    }
    ctx->inflight--;
    req_destroy(r);
}

size_t fetch_inflight(const fetch_ctx *ctx)
{
    return ctx ? ctx->inflight : 0;
}

const char *fetch_response_header(const fetch_response *resp, const char *name)
{
    if (!resp || !name)
        return NULL;
    for (size_t i = 0; i < resp->n_headers; i++)
        if (str_ieq(resp->headers[i].name, name))
            return resp->headers[i].value;
    return NULL;
}
