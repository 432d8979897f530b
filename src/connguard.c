/* connguard: see connguard.h. */
#include "connguard.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/socket.h>
#include <unistd.h>

#include "framing.h"
#include "log.h"
#include "util.h"

#define BUCKETS 1024 /* power of two */

/* Where the framing gate of a connection is (see connguard.h). */
enum {
    G_HEAD,        /* collecting a request head in hold */
    G_BODY,        /* Content-Length body: body_left bytes go straight to evhttp */
    G_CHUNKS_HOLD, /* chunked body: head and chunks stay in hold until the last chunk */
    G_CHUNKS_PASS, /* chunked body after 100-continue: checked chunks go through */
    G_REFUSED      /* a request was refused: everything else is discarded */
};

typedef struct gconn {
    struct gconn *next, **pprev; /* bucket chain */
    struct bufferevent *bev;     /* evhttp's; one reference held here */
    connguard *g;
    struct evbuffer_cb_entry *gate; /* on the bufferevent's input buffer */
    int64_t window_start;           /* now_mono_ms() */
    unsigned served;                /* requests completed in this window */
    /* the framing gate */
    struct evbuffer *hold; /* received bytes not given to evhttp yet (created on use) */
    int state, in_gate;
    size_t scanned;     /* G_HEAD: bytes of hold searched for the end of the head */
    size_t held_head;   /* G_CHUNKS_HOLD: head bytes at the front of hold */
    size_t chunk_seen;  /* G_CHUNKS_HOLD: bytes after the head already checked */
    uint64_t body_left; /* G_BODY */
    framing_chunks chunks;
    unsigned released, answered; /* requests given to evhttp / handed to the callback */
    connguard_refusal refusal;   /* status 0: none */
    unsigned refused_at;         /* the request (count of released before it) refused */
} gconn;

struct connguard {
    struct event_base *base;
    int64_t window_ms;
    size_t max_head;
    uint64_t max_body;
    size_t max_conns;
    struct event *sweep;  /* once a second: drop freed connections, end windows */
    struct evbuffer *tmp; /* scratch for moving bytes between buffers */
    struct evconnlistener *listener;
    struct event *resume; /* re-enables the listener after descriptors ran out */
    int spare_fd;         /* descriptor in reserve for refusing at EMFILE */
    uint64_t closed, framing_refused, conns_refused;
    size_t live, peak; /* records; peak since memory was last returned */
    int trim_due;      /* return free heap to the kernel at the next sweep */
    uint64_t trims;
    gconn *buckets[BUCKETS];
};

static size_t bucket_of(const struct bufferevent *bev)
{
    return ((uintptr_t)bev >> 4) & (BUCKETS - 1);
}

/* Drops the record and the reference it holds on its bufferevent. */
static void drop(connguard *g, gconn *c)
{
    g->live--;
    *c->pprev = c->next;
    if (c->next)
        c->next->pprev = c->pprev;
    evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->gate);
    if (c->hold)
        evbuffer_free(c->hold);
    bufferevent_decref(c->bev);
    free(c);
}

/* evhttp freed the connection: bufferevent_free clears the callbacks, our reference
 * keeps the memory. */
static int is_dead(gconn *c)
{
    bufferevent_data_cb readcb = NULL;
    bufferevent_getcb(c->bev, &readcb, NULL, NULL, NULL);
    return !readcb || bufferevent_getfd(c->bev) < 0;
}

/* One record: 1 if it was dropped. */
static int check(connguard *g, gconn *c, int64_t now)
{
    if (is_dead(c)) {
        drop(g, c);
        return 1;
    }
    evutil_socket_t s = bufferevent_getfd(c->bev);
    if (now - c->window_start < g->window_ms)
        return 0;
    if (!c->served && (bufferevent_get_enabled(c->bev) & EV_READ)) {
        /* A whole window spent reading without a complete request. The EOF this
         * causes makes evhttp free the connection through its usual path. */
        shutdown(s, SHUT_RDWR);
        g->closed++;
    }
    c->served = 0;
    c->window_start = now;
    return 0;
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    connguard *g = arg;
    (void)fd;
    (void)what;
    int64_t now = now_mono_ms();
    int dropped = 0;
    for (size_t i = 0; i < BUCKETS; i++) {
        for (gconn *c = g->buckets[i], *next; c; c = next) {
            next = c->next;
            dropped |= check(g, c, now);
        }
    }
#ifdef __GLIBC__
    /* Thousands of connections closing leave their buffers in free heap that glibc
     * keeps; give it back once the count has dropped by a good margin (a trim of a
     * large heap takes a few milliseconds, so not on every small dip), and only at a
     * sweep that dropped nothing: the burst is over, and libevent has finalized the
     * bufferevents dropped before (it frees them on a later loop iteration). */
    if (g->peak >= g->live + 1024)
        g->trim_due = 1;
    if (g->trim_due && !dropped) {
        malloc_trim(0);
        g->trim_due = 0;
        g->peak = g->live;
        g->trims++;
    }
#endif
}

/* ---- the framing gate ---- */

/* Stands in for a refused request: evhttp parses it like any other, the request
 * callback recognises it by its place (connguard_request_done) and answers the
 * refusal. Its path routes nowhere. */
static const char MARKER[] =
    "GET /.refused HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

static void refuse(gconn *c, struct evbuffer *in, int status, const char *reason)
{
    evbuffer_drain(c->hold, evbuffer_get_length(c->hold));
    c->state = G_REFUSED;
    c->g->framing_refused++;
    if (!c->refusal.status) {
        c->refusal.status = status;
        c->refusal.reason = reason;
        c->refused_at = c->released;
    }
    evbuffer_add(in, MARKER, sizeof MARKER - 1);
    c->released++;
}

/* A bad chunk after evhttp has the head (100-continue): no place for an answer. */
static void cut(gconn *c)
{
    evbuffer_drain(c->hold, evbuffer_get_length(c->hold));
    c->state = G_REFUSED;
    c->g->framing_refused++;
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    if (fd >= 0)
        shutdown(fd, SHUT_RDWR); /* evhttp sees the end and frees the connection */
}

/* Empty lines before a request line are ignored (RFC 9112 section 2.2). */
static void skip_empty_lines(struct evbuffer *b)
{
    for (;;) {
        unsigned char two[2];
        ev_ssize_t n = evbuffer_copyout(b, two, 2);
        if (n >= 1 && two[0] == '\n')
            evbuffer_drain(b, 1);
        else if (n == 2 && two[0] == '\r' && two[1] == '\n')
            evbuffer_drain(b, 2);
        else
            return;
    }
}

/* Feeds hold's bytes from offset `from` to the chunk checker; returns how many it
 * consumed (a bounded number of buffer pieces per call). */
static size_t feed_chunks(gconn *c, size_t from, const framing_limits *lim, framing_rc *rc,
                          framing_error *err)
{
    struct evbuffer_ptr at;
    struct evbuffer_iovec v[16];
    size_t used = 0;
    *rc = FRAMING_MORE;
    if (evbuffer_ptr_set(c->hold, &at, from, EVBUFFER_PTR_SET) < 0)
        return 0;
    int nv = evbuffer_peek(c->hold, -1, &at, v, 16);
    for (int i = 0; i < nv && i < 16; i++) {
        used += framing_chunks_feed(&c->chunks, v[i].iov_base, v[i].iov_len, lim, rc, err);
        if (*rc != FRAMING_MORE)
            break;
    }
    return used;
}

/* Moves what hold has that is checked into evhttp's input buffer. */
static void gate_run(gconn *c, struct evbuffer *in)
{
    connguard *g = c->g;
    framing_limits lim = {g->max_head, g->max_body};
    framing_error err;
    framing_rc rc;
    for (;;) {
        size_t len = evbuffer_get_length(c->hold);
        if (c->state == G_REFUSED) {
            evbuffer_drain(c->hold, len);
            return;
        }
        if (c->state == G_BODY) {
            size_t n = (uint64_t)len < c->body_left ? len : (size_t)c->body_left;
            evbuffer_remove_buffer(c->hold, in, n);
            c->body_left -= n;
            if (c->body_left)
                return;
            c->state = G_HEAD;
            continue;
        }
        if (c->state == G_HEAD) {
            if (c->scanned == 0) {
                skip_empty_lines(c->hold);
                len = evbuffer_get_length(c->hold);
            }
            if (!len)
                return;
            size_t want = len < g->max_head + 1 ? len : g->max_head + 1;
            const char *p = (const char *)evbuffer_pullup(c->hold, (ev_ssize_t)want);
            size_t end = framing_head_end(p, want, &c->scanned);
            framing_head h;
            if (!end) {
                if (framing_check_partial(p, want, &lim, &err) == FRAMING_BAD)
                    refuse(c, in, err.status, err.reason);
                else
                    return;
                continue;
            }
            c->scanned = 0;
            if (framing_check_head(p, end, &lim, &h, &err) != FRAMING_OK) {
                refuse(c, in, err.status, err.reason);
                continue;
            }
            if (h.body == FRAMING_BODY_CHUNKED)
                framing_chunks_init(&c->chunks);
            if (h.body == FRAMING_BODY_CHUNKED && !h.expect_continue) {
                c->state = G_CHUNKS_HOLD;
                c->held_head = end;
                c->chunk_seen = 0;
                continue;
            }
            evbuffer_remove_buffer(c->hold, in, end);
            c->released++;
            c->state = h.body == FRAMING_BODY_LENGTH    ? G_BODY
                       : h.body == FRAMING_BODY_CHUNKED ? G_CHUNKS_PASS
                                                        : G_HEAD;
            c->body_left = h.length;
            continue;
        }
        /* chunked */
        int hold_all = c->state == G_CHUNKS_HOLD;
        size_t from = hold_all ? c->held_head + c->chunk_seen : 0;
        if (from >= len)
            return;
        size_t used = feed_chunks(c, from, &lim, &rc, &err);
        if (rc == FRAMING_BAD) {
            if (hold_all)
                refuse(c, in, err.status, err.reason);
            else
                cut(c);
            continue;
        }
        if (hold_all) {
            c->chunk_seen += used;
            /* one-byte chunks cost five bytes of framing each: bound what is held */
            if (c->chunk_seen > 2 * g->max_body + 4096) {
                refuse(c, in, 413, "chunked body framing exceeds limits.max_body_bytes");
                continue;
            }
            if (rc == FRAMING_OK) {
                evbuffer_remove_buffer(c->hold, in, c->held_head + c->chunk_seen);
                c->released++;
                c->state = G_HEAD;
            }
        } else {
            evbuffer_remove_buffer(c->hold, in, used);
            if (rc == FRAMING_OK)
                c->state = G_HEAD;
        }
        if (rc == FRAMING_MORE && from + used >= len)
            return;
    }
}

/* The last n bytes of in (just received) move to the end of hold. */
static void take_tail(connguard *g, struct evbuffer *in, struct evbuffer *hold, size_t n)
{
    size_t keep = evbuffer_get_length(in) - n;
    if (keep == 0) {
        evbuffer_add_buffer(hold, in);
        return;
    }
    evbuffer_remove_buffer(in, g->tmp, keep);
    evbuffer_add_buffer(hold, in);
    evbuffer_add_buffer(in, g->tmp);
}

/* Runs when bytes arrive in a connection's input buffer, before evhttp's read
 * callback looks at them. */
static void on_input(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
    gconn *c = arg;
    if (c->in_gate || info->n_added == 0)
        return;
    c->in_gate = 1;
    size_t fresh = info->n_added, total = evbuffer_get_length(in);
    if (fresh > total)
        fresh = total;
    if (c->state == G_BODY) {
        /* body bytes of a Content-Length body stay where they are */
        size_t pass = (uint64_t)fresh < c->body_left ? fresh : (size_t)c->body_left;
        c->body_left -= pass;
        fresh -= pass;
        if (!c->body_left)
            c->state = G_HEAD;
    }
    if (fresh) {
        if (!c->hold)
            c->hold = evbuffer_new();
        take_tail(c->g, in, c->hold, fresh);
        gate_run(c, in);
    }
    c->in_gate = 0;
}

/* ---- connections ---- */

/* Drops the records of connections evhttp has freed (at the cap, before refusing). */
static void prune(connguard *g)
{
    for (size_t i = 0; i < BUCKETS; i++)
        for (gconn *c = g->buckets[i], *next; c; c = next) {
            next = c->next;
            if (is_dead(c))
                drop(g, c);
        }
}

static struct bufferevent *make_bev(struct event_base *base, void *arg)
{
    connguard *g = arg;
    /* BEV_OPT_CLOSE_ON_FREE: the socket closes when the last reference goes, i.e. at
     * most a sweep after evhttp freed the connection. Were evhttp to close it at once, a
     * new connection could reuse the descriptor while this freed bufferevent still had
     * its read event registered on it, and that event would steal the new bytes. */
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        return NULL; /* evhttp makes its own (unguarded) */
    if (g->max_conns && g->live >= g->max_conns)
        prune(g);
    bufferevent_incref(bev);
    gconn *c = xcalloc(1, sizeof *c);
    if (++g->live > g->peak)
        g->peak = g->live;
    c->bev = bev;
    c->g = g;
    c->window_start = now_mono_ms();
    c->gate = evbuffer_add_cb(bufferevent_get_input(bev), on_input, c);
    if (g->max_conns && g->live > g->max_conns) {
        c->refusal.status = 503;
        c->refusal.reason = "connection limit reached (limits.max_connections)";
        g->conns_refused++;
    }
    gconn **head = &g->buckets[bucket_of(bev)];
    c->next = *head;
    if (c->next)
        c->next->pprev = &c->next;
    c->pprev = head;
    *head = c;
    return bev;
}

connguard *connguard_new(struct event_base *base, const connguard_limits *lim)
{
    connguard *g = xcalloc(1, sizeof *g);
    g->base = base;
    g->window_ms = (int64_t)(lim->deadline_s > 0 ? lim->deadline_s : 30) * 1000;
    g->max_head = lim->max_head ? lim->max_head : 16384;
    g->max_body = lim->max_body;
    g->max_conns = lim->max_conns;
    g->tmp = evbuffer_new();
    g->spare_fd = -1;
    g->sweep = event_new(base, -1, EV_PERSIST, on_sweep, g);
    struct timeval tick = {1, 0};
    event_add(g->sweep, &tick);
    return g;
}

void connguard_attach(connguard *g, struct evhttp *http)
{
    evhttp_set_bevcb(http, make_bev, g);
}

/* ---- descriptors exhausted ---- */

/* The answer at EMFILE, written straight to the socket (no request context, so no
 * language: the en-US texts); the envelope of errenv.h, its wait agreeing with
 * Retry-After. */
#define REFUSAL_BODY                                                                               \
    "{\"code\":\"Public.ServiceUnavailable.TooManyConnections\",\"description\":"                  \
    "\"Service unavailable\",\"solution\":\"Retry later\",\"details\":"                            \
    "\"no file descriptor left for a new connection\",\"retryable\":true,"                         \
    "\"retry_after_ms\":1000,\"required_action\":\"retry_later\"}"
static const char REFUSAL[] = "HTTP/1.1 503 Service Unavailable\r\n"
                              "Content-Type: application/json; charset=utf-8\r\n"
                              "Cache-Control: no-store\r\n"
                              "Retry-After: 1\r\n"
                              "Connection: close\r\n"
                              "Content-Length: %zu\r\n\r\n%s";

/* Listeners whose accept failures a guard handles (libevent hands the error callback
 * the evhttp's pointer, not ours). */
static struct {
    struct evconnlistener *l;
    connguard *g;
} g_listeners[4];

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    connguard *g = arg;
    (void)fd;
    (void)what;
    if (g->listener)
        evconnlistener_enable(g->listener);
}

static void on_accept_error(struct evconnlistener *l, void *arg)
{
    int err = EVUTIL_SOCKET_ERROR();
    connguard *g = NULL;
    (void)arg;
    for (size_t i = 0; i < sizeof g_listeners / sizeof g_listeners[0]; i++)
        if (g_listeners[i].l == l)
            g = g_listeners[i].g;
    if (!g || (err != EMFILE && err != ENFILE)) {
        log_line *ln = log_begin(LOG_WARN, "accept failed");
        log_str(ln, "error", strerror(err));
        log_end(ln);
        return;
    }
    /* The connection waiting in the backlog would make the listener fire again at
     * once (a busy loop): accept it with the reserve descriptor, answer 503, close. */
    if (g->spare_fd >= 0)
        close(g->spare_fd);
    g->spare_fd = -1;
    int fd = accept4(evconnlistener_get_fd(l), NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
        char sink[4096], out[sizeof REFUSAL + sizeof REFUSAL_BODY + 16];
        /* what already arrived is read, so that the close is a FIN, not a reset */
        for (int k = 0; k < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; k++)
            ;
        int n = snprintf(out, sizeof out, REFUSAL, sizeof REFUSAL_BODY - 1, REFUSAL_BODY);
        /* best effort (a fresh socket's send buffer is empty): the close comes anyway */
        if (n > 0)
            send(fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        close(fd);
        g->conns_refused++;
    }
    g->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || g->spare_fd < 0) {
        /* nothing to refuse with: pause accepting for a second instead of spinning */
        evconnlistener_disable(l);
        struct timeval sec = {1, 0};
        event_add(g->resume, &sec);
    }
}

void connguard_listener(connguard *g, struct evhttp_bound_socket *s)
{
    struct evconnlistener *l = s ? evhttp_bound_socket_get_listener(s) : NULL;
    if (!g)
        return;
    if (!l) { /* the listener goes away */
        for (size_t i = 0; i < sizeof g_listeners / sizeof g_listeners[0]; i++)
            if (g_listeners[i].g == g)
                g_listeners[i].l = NULL, g_listeners[i].g = NULL;
        g->listener = NULL;
        if (g->resume)
            event_del(g->resume);
        return;
    }
    for (size_t i = 0; i < sizeof g_listeners / sizeof g_listeners[0]; i++) {
        if (g_listeners[i].l && g_listeners[i].l != l)
            continue;
        g_listeners[i].l = l;
        g_listeners[i].g = g;
        g->listener = l;
        if (g->spare_fd < 0)
            g->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (!g->resume)
            g->resume = evtimer_new(g->base, on_resume, g);
        evconnlistener_set_error_cb(l, on_accept_error);
        return;
    }
}

int connguard_request_done(connguard *g, struct evhttp_request *req, connguard_refusal *why)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    if (!g || !bev)
        return 0;
    for (gconn *c = g->buckets[bucket_of(bev)]; c; c = c->next) {
        if (c->bev != bev)
            continue;
        c->served++;
        unsigned k = c->answered++;
        if (!c->refusal.status || k != c->refused_at)
            return 0;
        *why = c->refusal;
        return 1;
    }
    return 0;
}

uint64_t connguard_closed(const connguard *g)
{
    return g ? g->closed : 0;
}

uint64_t connguard_open(const connguard *g)
{
    return g ? g->live : 0;
}

uint64_t connguard_trims(const connguard *g)
{
    return g ? g->trims : 0;
}

uint64_t connguard_framing_refused(const connguard *g)
{
    return g ? g->framing_refused : 0;
}

uint64_t connguard_conns_refused(const connguard *g)
{
    return g ? g->conns_refused : 0;
}

void connguard_free(connguard *g)
{
    if (!g)
        return;
    event_free(g->sweep);
    if (g->resume)
        event_free(g->resume);
    for (size_t i = 0; i < sizeof g_listeners / sizeof g_listeners[0]; i++)
        if (g_listeners[i].g == g)
            g_listeners[i].l = NULL, g_listeners[i].g = NULL;
    if (g->spare_fd >= 0)
        close(g->spare_fd);
    for (size_t i = 0; i < BUCKETS; i++)
        while (g->buckets[i])
            drop(g, g->buckets[i]);
    evbuffer_free(g->tmp);
    free(g);
}
