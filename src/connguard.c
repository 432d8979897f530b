/* connguard: see connguard.h. */
#include "connguard.h"

#include <event2/bufferevent.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/socket.h>

#include "util.h"

#define BUCKETS 1024 /* power of two */

typedef struct gconn {
    struct gconn *next, **pprev; /* bucket chain */
    struct bufferevent *bev;     /* evhttp's; one reference held here */
    int64_t window_start;        /* now_mono_ms() */
    unsigned served;             /* requests completed in this window */
} gconn;

struct connguard {
    struct event_base *base;
    int64_t window_ms;
    struct event *sweep; /* once a second: drop freed connections, end windows */
    uint64_t closed;
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
    bufferevent_decref(c->bev);
    free(c);
}

/* One record: 1 if it was dropped. */
static int check(connguard *g, gconn *c, int64_t now)
{
    /* bufferevent_free clears the callbacks; our reference keeps the memory */
    bufferevent_data_cb readcb = NULL;
    bufferevent_getcb(c->bev, &readcb, NULL, NULL, NULL);
    evutil_socket_t s = bufferevent_getfd(c->bev);
    if (!readcb || s < 0) {
        drop(g, c);
        return 1;
    }
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
    bufferevent_incref(bev);
    gconn *c = xcalloc(1, sizeof *c);
    if (++g->live > g->peak)
        g->peak = g->live;
    c->bev = bev;
    c->window_start = now_mono_ms();
    gconn **head = &g->buckets[bucket_of(bev)];
    c->next = *head;
    if (c->next)
        c->next->pprev = &c->next;
    c->pprev = head;
    *head = c;
    return bev;
}

connguard *connguard_new(struct event_base *base, int deadline_s)
{
    connguard *g = xcalloc(1, sizeof *g);
    g->base = base;
    g->window_ms = (int64_t)(deadline_s > 0 ? deadline_s : 30) * 1000;
    g->sweep = event_new(base, -1, EV_PERSIST, on_sweep, g);
    struct timeval tick = {1, 0};
    event_add(g->sweep, &tick);
    return g;
}

void connguard_attach(connguard *g, struct evhttp *http)
{
    evhttp_set_bevcb(http, make_bev, g);
}

void connguard_request_done(connguard *g, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    if (!g || !bev)
        return;
    for (gconn *c = g->buckets[bucket_of(bev)]; c; c = c->next) {
        if (c->bev == bev) {
            c->served++;
            return;
        }
    }
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

void connguard_free(connguard *g)
{
    if (!g)
        return;
    event_free(g->sweep);
    for (size_t i = 0; i < BUCKETS; i++)
        while (g->buckets[i])
            drop(g, g->buckets[i]);
    free(g);
}
