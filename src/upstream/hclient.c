/* hclient: lean HTTP/1.1 client on libevent (see hclient.h for the contract).
 *
 * Shape: one hc_host per address (numeric host:port) with its idle and busy
 * connections and a FIFO of requests waiting for a connection. A connection has one
 * event (write interest while connecting or sending, read interest while waiting for
 * the response or idle); an idle connection that turns readable was closed by the
 * server (or sent junk) and is dropped. Each request has its own total-timeout timer.
 * Requests never do I/O inside hc_start: the connection joins the context's kick list,
 * whose event the loop runs next, so every completion comes from the loop. A kept
 * connection keeps its read interest from idle through the next request (no event
 * change, hence no epoll_ctl, per request). */
#include "hclient.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/uio.h>
#include <unistd.h>

#define HC_MAX_HEAD (256u * 1024u) /* status line + headers (or trailers) of a response */
#define HC_MAX_LINE 4096u          /* a chunk-size line */
#define HC_READ_CHUNK 16384u
#define HC_IDLE_MAX_MS 50000 /* idle connections older than this are not reused */
/* Finished requests kept for the next ones (no allocation, timer event or head
 * buffer made per request), and the largest head buffer such a request keeps. */
#define HC_SPARE_REQS 64
#define HC_SPARE_OUT 16384u
/* Pipelined requests gathered for one write on one connection: at most this many,
 * of at most this many bytes together (so the server's answers never wait on a write
 * of ours that waits on them). */
#define HC_PIPELINE_MAX 16
#define HC_PIPELINE_BYTES (64u * 1024u)
/* The longest a gathering connection waits for the loop to run out of ready events
 * (a loop that never does, under a flood of other work, still writes it). */
#define HC_GATHER_WAIT_MAX_US 1000

/* ---- response parser ---- */

enum {
    P_STATUS,
    P_HEADERS,
    P_BODY_LEN,
    P_BODY_CLOSE,
    P_CHUNK_SIZE,
    P_CHUNK_DATA,
    P_CHUNK_CRLF,
    P_TRAILERS,
    P_DONE,
};

/* A response header name's bytes lower-cased, 0 for a byte a name may not hold. */
static unsigned char name_lower[256];

void hc_parser_init(hc_parser *p, int no_body, size_t max_body)
{
    if (!name_lower['!'])
        for (int c = '!'; c < 127; c++)
            name_lower[c] = (unsigned char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    memset(p, 0, sizeof(*p));
    p->no_body = no_body;
    p->max_body = max_body;
    p->state = P_STATUS;
}

void hc_parser_free(hc_parser *p)
{
    buf_free(&p->arena);
    buf_free(&p->body);
}

static int fail(hc_parser *p, const char *why)
{
    p->error = why;
    return HC_FAIL;
}

static int lower_eq(const char *s, size_t n, const char *lit)
{
    size_t i = 0;
    for (; i < n && lit[i]; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c + 32);
        if (c != lit[i])
            return 0;
    }
    return i == n && !lit[i];
}

/* Does the comma-separated list v (lower-cased or not) hold token tok? With last,
 * only its last element counts. */
static int list_has(const char *v, size_t n, const char *tok, int last)
{
    const char *end = v + n, *s = v;
    int found = 0;
    while (s < end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *e = comma ? comma : end;
        const char *a = s, *b = e;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        int eq = lower_eq(a, (size_t)(b - a), tok);
        if (last)
            found = eq;
        else if (eq)
            return 1;
        s = comma ? comma + 1 : end;
    }
    return found;
}

static int parse_status(hc_parser *p, const char *l, size_t n)
{
    /* HTTP/d.d SP ddd [SP reason] */
    if (n < 12 || memcmp(l, "HTTP/", 5) != 0 || l[5] < '0' || l[5] > '9' || l[6] != '.' ||
        l[7] < '0' || l[7] > '9' || l[8] != ' ')
        return fail(p, "malformed status line");
    for (int i = 9; i < 12; i++)
        if (l[i] < '0' || l[i] > '9')
            return fail(p, "malformed status line");
    if (n > 12 && l[12] != ' ')
        return fail(p, "malformed status line");
    p->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
    if (p->status < 100)
        return fail(p, "malformed status line");
    if (p->status < 200 && p->status != 100)
        p->no_reuse = 1; /* 101 (a protocol we never asked for), 102, 103, ... */
    p->http11 = l[5] > '1' || (l[5] == '1' && l[7] >= '1');
    p->conn_close = p->chunked = p->have_len = 0;
    p->remaining = 0;
    buf_reset(&p->arena);
    buf_reserve(&p->arena, 1024); /* a usual head at once, not grown header by header */
    p->n_headers = 0;
    p->state = P_HEADERS;
    return HC_MORE;
}

static int parse_header(hc_parser *p, const char *l, size_t n)
{
    if (l[0] == ' ' || l[0] == '\t')
        return fail(p, "folded header line");
    if (memchr(l, '\0', n))
        return fail(p, "NUL in a header line"); /* the arena is NUL-separated */
    const char *colon = memchr(l, ':', n);
    if (!colon || colon == l)
        return fail(p, "malformed header line");
    size_t nlen = (size_t)(colon - l);
    const char *v = colon + 1, *end = l + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t vlen = (size_t)(end - v);
    if (p->arena.cap - p->arena.len < nlen + vlen + 3)
        buf_reserve(&p->arena, nlen + vlen + 2);
    char *o = p->arena.data + p->arena.len;
    /* checked and lower-cased in one pass; the arena's length moves only after */
    for (size_t i = 0; i < nlen; i++) {
        unsigned char c = name_lower[(unsigned char)l[i]];
        if (!c)
            return fail(p, "malformed header name");
        o[i] = (char)c;
    }
    o[nlen] = '\0';
    memcpy(o + nlen + 1, v, vlen);
    o[nlen + 1 + vlen] = '\0';
    p->arena.len += nlen + vlen + 2;
    p->arena.data[p->arena.len] = '\0';
    p->n_headers++;
    if (nlen == 14 && memcmp(o, "content-length", 14) == 0) {
        uint64_t len = 0;
        if (!vlen)
            return fail(p, "bad Content-Length");
        for (size_t i = 0; i < vlen; i++) {
            if (v[i] < '0' || v[i] > '9' || len > (UINT64_MAX - 9) / 10)
                return fail(p, "bad Content-Length");
            len = len * 10 + (uint64_t)(v[i] - '0');
        }
        if (p->have_len && p->remaining != len)
            return fail(p, "conflicting Content-Length");
        p->have_len = 1;
        p->remaining = len;
    } else if (nlen == 17 && memcmp(o, "transfer-encoding", 17) == 0) {
        /* Only a final "chunked" frames the body; anything else ends at close. */
        p->chunked = list_has(v, vlen, "chunked", 1) ? 1 : -1;
    } else if (nlen == 10 && memcmp(o, "connection", 10) == 0) {
        if (list_has(v, vlen, "close", 0))
            p->conn_close = 1;
    }
    return HC_MORE;
}

/* The blank line after the headers: decides how the body is framed. */
static int end_of_head(hc_parser *p)
{
    if (p->status < 200 && p->status != 101) {
        p->state = P_STATUS; /* interim response: its headers are dropped */
        return HC_MORE;
    }
    if (p->have_len && p->chunked)
        p->no_reuse = 1; /* Content-Length with Transfer-Encoding: framing in doubt */
    if (p->no_body || p->status == 204 || p->status == 304 || p->status == 101) {
        /* A body it claims may still come. HEAD and 304 answers may state the
         * representation's Content-Length; a 204 states none, and none is chunked. */
        if (p->chunked || (p->status == 204 && p->have_len && p->remaining > 0))
            p->no_reuse = 1;
        p->state = P_DONE;
        return HC_DONE;
    }
    if (p->chunked == 1) {
        p->state = P_CHUNK_SIZE;
        p->remaining = 0;
        return HC_MORE;
    }
    if (p->chunked == -1 || !p->have_len) {
        p->close_framed = 1;
        p->state = P_BODY_CLOSE;
        return HC_MORE;
    }
    if (p->remaining > p->max_body)
        return HC_TOO_LARGE;
    p->state = p->remaining ? P_BODY_LEN : P_DONE;
    return p->remaining ? HC_MORE : HC_DONE;
}

static int parse_chunk_size(hc_parser *p, const char *l, size_t n)
{
    uint64_t size = 0;
    size_t i = 0;
    for (; i < n; i++) {
        char c = l[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            break;
        if (size >> 59)
            return fail(p, "chunk size too large");
        size = size * 16 + (uint64_t)d;
    }
    if (i == 0)
        return fail(p, "malformed chunk size");
    while (i < n && (l[i] == ' ' || l[i] == '\t'))
        i++;
    if (i < n && l[i] != ';')
        return fail(p, "malformed chunk size");
    if (size == 0) {
        p->state = P_TRAILERS;
        return HC_MORE;
    }
    if (size > p->max_body - p->body.len)
        return HC_TOO_LARGE;
    p->remaining = size;
    p->state = P_CHUNK_DATA;
    return HC_MORE;
}

static int is_line_state(int s)
{
    return s == P_STATUS || s == P_HEADERS || s == P_CHUNK_SIZE || s == P_CHUNK_CRLF ||
           s == P_TRAILERS;
}

int hc_parser_feed(hc_parser *p, const char *data, size_t len, size_t *used)
{
    size_t pos = 0;
    int rc = HC_MORE;
    while (rc == HC_MORE && pos < len && p->state != P_DONE) {
        if (is_line_state(p->state)) {
            const char *nl = memchr(data + pos, '\n', len - pos);
            size_t avail = nl ? (size_t)(nl - (data + pos)) : len - pos;
            size_t limit = p->state == P_CHUNK_SIZE || p->state == P_CHUNK_CRLF
                               ? HC_MAX_LINE
                               : HC_MAX_HEAD - p->head_bytes;
            if (avail > limit || (!nl && avail == limit)) {
                rc = fail(p, "response header or chunk line too long");
                break;
            }
            if (!nl)
                break; /* wait for the rest of the line */
            const char *l = data + pos;
            size_t n = avail;
            pos += avail + 1;
            if (p->state != P_CHUNK_SIZE && p->state != P_CHUNK_CRLF)
                p->head_bytes += avail + 1;
            if (n && l[n - 1] == '\r')
                n--;
            switch (p->state) {
            case P_STATUS:
                rc = parse_status(p, l, n);
                break;
            case P_HEADERS:
                rc = n ? parse_header(p, l, n) : end_of_head(p);
                break;
            case P_CHUNK_SIZE:
                rc = parse_chunk_size(p, l, n);
                break;
            case P_CHUNK_CRLF:
                if (n)
                    rc = fail(p, "missing CRLF after chunk data");
                else
                    p->state = P_CHUNK_SIZE;
                break;
            case P_TRAILERS:
                if (!n) {
                    p->state = P_DONE;
                    rc = HC_DONE;
                }
                break;
            }
            continue;
        }
        size_t n = len - pos;
        if (p->state != P_BODY_CLOSE && n > p->remaining)
            n = (size_t)p->remaining;
        if (n > p->max_body - p->body.len) {
            rc = HC_TOO_LARGE;
            break;
        }
        buf_append(&p->body, data + pos, n);
        pos += n;
        if (p->state == P_BODY_CLOSE)
            continue;
        p->remaining -= n;
        if (p->remaining == 0) {
            if (p->state == P_CHUNK_DATA) {
                p->state = P_CHUNK_CRLF;
            } else {
                p->state = P_DONE;
                rc = HC_DONE;
            }
        }
    }
    if (rc == HC_MORE && p->state == P_DONE)
        rc = HC_DONE;
    *used = pos;
    return rc;
}

int hc_parser_eof(hc_parser *p)
{
    if (p->state == P_BODY_CLOSE || p->state == P_DONE) {
        p->state = P_DONE;
        return HC_DONE;
    }
    return fail(p, "connection closed before the response was complete");
}

fetch_header *hc_parser_headers(const hc_parser *p)
{
    fetch_header *h = xmalloc((p->n_headers ? p->n_headers : 1) * sizeof(*h));
    const char *s = p->arena.data;
    for (size_t i = 0; i < p->n_headers; i++) {
        h[i].name = s;
        s += strlen(s) + 1;
        h[i].value = s;
        s += strlen(s) + 1;
    }
    return h;
}

/* ---- URL ---- */

int hc_parse_url(const char *url, hc_target *t)
{
    if (!str_istartswith(url, "http://"))
        return -1;
    const char *a = url + 7;
    size_t alen = strcspn(a, "/?#");
    const char *end = a + alen;
    char host[64];
    const char *hend;
    const char *port = NULL;
    memset(t, 0, sizeof(*t));
    if (memchr(a, '@', alen) || alen == 0)
        return -1;
    if (*a == '[') {
        const char *rb = memchr(a, ']', alen);
        if (!rb || (size_t)(rb - a - 1) >= sizeof(host))
            return -1;
        memcpy(host, a + 1, (size_t)(rb - a - 1));
        host[rb - a - 1] = '\0';
        hend = rb + 1;
    } else {
        const char *colon = memchr(a, ':', alen);
        hend = colon ? colon : end;
        if ((size_t)(hend - a) >= sizeof(host))
            return -1;
        memcpy(host, a, (size_t)(hend - a));
        host[hend - a] = '\0';
    }
    if (hend < end) {
        if (*hend != ':' || hend + 1 == end)
            return -1;
        port = hend + 1;
    }
    long pn = 80;
    if (port) {
        pn = 0;
        for (const char *s = port; s < end; s++) {
            if (*s < '0' || *s > '9' || pn > 65535)
                return -1;
            pn = pn * 10 + (*s - '0');
        }
        if (pn < 1 || pn > 65535)
            return -1;
    }
    struct sockaddr_in *v4 = (struct sockaddr_in *)&t->addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&t->addr;
    if (*a != '[' && inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)pn);
        t->addrlen = sizeof(*v4);
    } else if (*a == '[' && inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)pn);
        t->addrlen = sizeof(*v6);
    } else {
        return -1; /* a name: resolved by libcurl */
    }
    t->authority = a;
    t->authority_len = alen;
    t->path = end;
    t->path_len = strcspn(end, "#");
    for (size_t i = 0; i < t->path_len; i++)
        if ((unsigned char)end[i] <= ' ' || (unsigned char)end[i] >= 127)
            return -1;
    return 0;
}

/* ---- client ---- */

enum { C_CONNECTING, C_WRITING, C_READING, C_IDLE };

typedef struct hc_host hc_host;
typedef struct hc_conn hc_conn;

TAILQ_HEAD(hc_req_list, hc_req);
TAILQ_HEAD(hc_conn_list, hc_conn);

struct hc_conn {
    hc_host *host;
    int fd;
    int state;
    int connect_err; /* errno of a connect that failed at once */
    int ev_added;    /* ev is pending */
    short ev_what;   /* what ev is assigned for */
    int kicked;      /* in ctx->kicks (1) or ctx->later (2) */
    struct event *ev;
    struct hc_req_list reqs; /* in the order written: the first is answered next */
    hc_req *unsent;          /* the first request not wholly written; NULL when all are */
    unsigned n_reqs;         /* on reqs, abandoned ones included */
    size_t unsent_bytes;     /* of the requests gathered for one write */
    unsigned nreq;           /* responses completed on this connection */
    int64_t idle_since;
    buf in;
    size_t in_off;
    TAILQ_ENTRY(hc_conn) link;      /* in host->idle or host->busy */
    TAILQ_ENTRY(hc_conn) kick_link; /* in ctx->kicks */
};

struct hc_req {
    hc_ctx *ctx;
    hc_host *host;
    hc_conn *conn;
    buf out; /* the whole request */
    size_t out_off;
    int idempotent, retried, on_reused, queued, no_body;
    int pipeline;  /* may be written behind others on one connection */
    int abandoned; /* cancelled or timed out while others on its connection wait: its
                      answer is read and dropped */
    size_t got;    /* response bytes parsed for it on the current connection */
    size_t max_response;
    hc_parser p;
    struct event *timer;
    hc_done_cb cb;
    void *arg;
    TAILQ_ENTRY(hc_req) link;  /* in host->pending */
    TAILQ_ENTRY(hc_req) clink; /* in conn->reqs */
    hc_req *next_spare;        /* in ctx->spare */
};

struct hc_host {
    hc_ctx *ctx;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    long n_conns; /* connecting + busy + idle */
    TAILQ_HEAD(, hc_conn) idle, busy;
    struct hc_req_list pending;
    hc_conn *gather; /* a reused connection whose write is still to come: pipelined
                        requests join it and go out in the same write */
    hc_host *next;
};

struct hc_ctx {
    struct event_base *base;
    struct event *kick_ev;      /* runs the kicked connections */
    struct hc_conn_list kicks;  /* connections to write (or fail) next */
    struct event *later_ev;     /* a timer due at once, at idle priority (hc_new) */
    struct event *later_max_ev; /* the same, HC_GATHER_WAIT_MAX_US on, at normal priority */
    struct hc_conn_list later;  /* gathering connections, written when either fires */
    long max_conns;
    hc_host *hosts;
    size_t opened;
    hc_req *spare; /* finished requests kept with their timer event and head buffer */
    size_t n_spare;
};

static void conn_cb(evutil_socket_t fd, short what, void *arg);

static void conn_watch(hc_conn *c, short what)
{
    if (c->ev_added && c->ev_what == what)
        return;
    if (c->ev_added)
        event_del(c->ev);
    if (c->ev_what != what) {
        event_assign(c->ev, c->host->ctx->base, c->fd, what | EV_PERSIST, conn_cb, c);
        c->ev_what = what;
    }
    event_add(c->ev, NULL);
    c->ev_added = 1;
}

/* Runs conn_cb from the loop as if the socket were writable (the socket's event stays
 * as it is): on this pass, or with later once the loop has run the events that are
 * ready, so that the requests those start join a gathering connection's write. A timer
 * due at once fires on the next pass, where an activated event runs on this one; at
 * idle priority (a loop with CL_EV_PRIORITIES) it waits for a pass with nothing else
 * ready, and at most HC_GATHER_WAIT_MAX_US. A connection waiting for later that is
 * kicked for this pass moves to this pass. */
static void conn_kick(hc_conn *c, int later)
{
    hc_ctx *ctx = c->host->ctx;
    if (c->kicked == 2 && !later)
        TAILQ_REMOVE(&ctx->later, c, kick_link);
    else if (c->kicked)
        return;
    c->kicked = later ? 2 : 1;
    TAILQ_INSERT_TAIL(later ? &ctx->later : &ctx->kicks, c, kick_link);
    if (!later) {
        event_active(ctx->kick_ev, 0, 0);
    } else if (!evtimer_pending(ctx->later_ev, NULL)) {
        struct timeval now = {0, 0}, max = {0, HC_GATHER_WAIT_MAX_US};
        evtimer_add(ctx->later_ev, &now);
        evtimer_add(ctx->later_max_ev, &max);
    }
}

static void run_kicked(struct hc_conn_list *q)
{
    hc_conn *c;
    while ((c = TAILQ_FIRST(q))) {
        TAILQ_REMOVE(q, c, kick_link);
        c->kicked = 0;
        conn_cb(c->fd, EV_WRITE, c);
    }
}

static void kick_cb(evutil_socket_t fd, short what, void *arg)
{
    run_kicked(&((hc_ctx *)arg)->kicks);
}

static void later_cb(evutil_socket_t fd, short what, void *arg)
{
    hc_ctx *ctx = arg;
    evtimer_del(ctx->later_ev);
    evtimer_del(ctx->later_max_ev);
    run_kicked(&ctx->later);
}

static void req_free(hc_req *r)
{
    hc_ctx *ctx = r->ctx;
    hc_parser_free(&r->p);
    if (r->timer && ctx->n_spare < HC_SPARE_REQS) {
        evtimer_del(r->timer);
        if (r->out.cap > HC_SPARE_OUT)
            buf_free(&r->out);
        else if (r->out.len) /* a kept head holds no credentials */
            memset(r->out.data, 0, r->out.len);
        r->next_spare = ctx->spare;
        ctx->spare = r;
        ctx->n_spare++;
        return;
    }
    if (r->timer)
        event_free(r->timer);
    buf_free(&r->out);
    free(r);
}

/* Takes r off its connection (which stays as it is otherwise). */
static void conn_remove(hc_conn *c, hc_req *r)
{
    if (c->unsent == r)
        c->unsent = TAILQ_NEXT(r, clink);
    TAILQ_REMOVE(&c->reqs, r, clink);
    c->n_reqs--;
    r->conn = NULL;
}

/* Frees the connection and the abandoned requests on it; a live request still on it
 * stays alive, detached. */
static void conn_destroy(hc_conn *c)
{
    hc_host *h = c->host;
    hc_req *r;
    while ((r = TAILQ_FIRST(&c->reqs))) {
        conn_remove(c, r);
        if (r->abandoned)
            req_free(r);
    }
    if (c->state == C_IDLE)
        TAILQ_REMOVE(&h->idle, c, link);
    else
        TAILQ_REMOVE(&h->busy, c, link);
    if (h->gather == c)
        h->gather = NULL;
    if (c->kicked)
        TAILQ_REMOVE(c->kicked == 2 ? &h->ctx->later : &h->ctx->kicks, c, kick_link);
    event_free(c->ev);
    if (c->fd >= 0)
        close(c->fd);
    buf_free(&c->in);
    free(c);
    h->n_conns--;
}

static hc_conn *conn_open(hc_host *h)
{
    hc_conn *c = xcalloc(1, sizeof(*c));
    c->host = h;
    c->state = C_CONNECTING;
    TAILQ_INIT(&c->reqs);
    c->fd = socket(h->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        c->connect_err = errno ? errno : EMFILE;
    } else {
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(c->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        if (connect(c->fd, (struct sockaddr *)&h->addr, h->addrlen) != 0 && errno != EINPROGRESS)
            c->connect_err = errno ? errno : ECONNREFUSED;
    }
    c->ev = event_new(h->ctx->base, c->fd, EV_WRITE | EV_PERSIST, conn_cb, c);
    if (!c->ev)
        abort(); /* allocation failure, like xmalloc */
    c->ev_what = EV_WRITE;
    h->n_conns++;
    h->ctx->opened++;
    TAILQ_INSERT_TAIL(&h->busy, c, link);
    return c;
}

/* Puts r last on c; c is written from the loop (or once connected). */
static void req_attach(hc_req *r, hc_conn *c)
{
    r->conn = c;
    r->on_reused = c->nreq > 0;
    r->out_off = 0;
    r->got = 0;
    TAILQ_INSERT_TAIL(&c->reqs, r, clink);
    c->n_reqs++;
    if (!c->unsent) {
        c->unsent = r;
        c->unsent_bytes = 0;
    }
    c->unsent_bytes += r->out.len;
    if (c->state == C_CONNECTING) {
        if (c->connect_err)
            conn_kick(c, 0);
        else
            conn_watch(c, EV_WRITE);
        return;
    }
    c->state = C_WRITING;
    /* a reused connection gathers while others may follow in its write; full, it goes */
    conn_kick(c, r->pipeline && c->nreq > 0 && c->n_reqs < HC_PIPELINE_MAX);
}

/* The connection r may join: the host's gathering one while it has room. */
static hc_conn *gather_for(hc_host *h, const hc_req *r)
{
    hc_conn *g = h->gather;
    if (!r->pipeline || !g || g->n_reqs >= HC_PIPELINE_MAX ||
        g->unsent_bytes + r->out.len > HC_PIPELINE_BYTES)
        return NULL;
    return g;
}

/* Gives r a connection: the gathering one, an idle one, a new one, or a place in
 * the queue. */
static void req_dispatch(hc_req *r)
{
    hc_host *h = r->host;
    hc_conn *c = gather_for(h, r);
    if (c) {
        req_attach(r, c);
        return;
    }
    int64_t now = now_mono_ms();
    while ((c = TAILQ_FIRST(&h->idle))) {
        if (now - c->idle_since > HC_IDLE_MAX_MS) {
            conn_destroy(c);
            continue;
        }
        TAILQ_REMOVE(&h->idle, c, link);
        TAILQ_INSERT_TAIL(&h->busy, c, link);
        req_attach(r, c);
        if (r->pipeline) /* a reused connection: others may follow in its write */
            h->gather = c;
        return;
    }
    if (h->n_conns < h->ctx->max_conns) {
        req_attach(r, conn_open(h));
        return;
    }
    r->queued = 1;
    TAILQ_INSERT_TAIL(&h->pending, r, link);
}

/* Serves waiting requests while a connection is available. */
static void host_pump(hc_host *h)
{
    hc_req *r;
    while ((r = TAILQ_FIRST(&h->pending)) &&
           (!TAILQ_EMPTY(&h->idle) || h->n_conns < h->ctx->max_conns || gather_for(h, r))) {
        TAILQ_REMOVE(&h->pending, r, link);
        r->queued = 0;
        req_dispatch(r);
    }
}

/* Runs r's callback (none for an abandoned request) and frees r, which is on no
 * connection or queue any more. */
static void req_done(hc_req *r, fetch_result res, const char *error)
{
    if (!r->abandoned) {
        hc_result out = {res, res == FETCH_OK ? NULL : error, &r->p};
        r->cb(&out, r->arg);
    }
    req_free(r);
}

/* Whether a request the connection failed under may go to a new one: once, when the
 * connection was a reused one (the server may have closed it while idle), nothing of
 * the answer came, and the method is idempotent or nothing of the request was sent. */
static int may_retry(const hc_req *r)
{
    return r->on_reused && !r->retried && !r->got && (r->idempotent || r->out_off == 0);
}

/* r again, on a new connection when one may be opened (else first in the queue). */
static void req_retry(hc_req *r)
{
    hc_host *h = r->host;
    r->retried = 1;
    r->pipeline = 0; /* alone: after a failed connection nothing is written behind it */
    hc_parser_free(&r->p);
    hc_parser_init(&r->p, r->no_body, r->max_response);
    if (h->n_conns < h->ctx->max_conns) {
        req_attach(r, conn_open(h));
    } else {
        r->queued = 1;
        TAILQ_INSERT_HEAD(&h->pending, r, link);
    }
}

/* The connection cannot go on: every request on it is retried (may_retry, or, with
 * announced, a request the server said it would not read: it announced the close in
 * the answer before it) or fails - the first with (res, why), the ones written
 * behind it with behind_why - and the connection is closed. */
static void conn_drop(hc_conn *c, fetch_result res, const char *why, const char *behind_why,
                      int announced)
{
    hc_host *h = c->host;
    struct hc_req_list retry, failed;
    TAILQ_INIT(&retry);
    TAILQ_INIT(&failed);
    hc_req *first = TAILQ_FIRST(&c->reqs), *r; /* NULL once known abandoned (freed) */
    while ((r = TAILQ_FIRST(&c->reqs))) {
        conn_remove(c, r);
        if (r->abandoned) {
            if (r == first)
                first = NULL;
            req_free(r);
        } else if (announced || may_retry(r))
            TAILQ_INSERT_TAIL(&retry, r, link);
        else
            TAILQ_INSERT_TAIL(&failed, r, link);
    }
    conn_destroy(c);
    while ((r = TAILQ_FIRST(&retry))) {
        TAILQ_REMOVE(&retry, r, link);
        req_retry(r);
    }
    host_pump(h);
    while ((r = TAILQ_FIRST(&failed))) {
        TAILQ_REMOVE(&failed, r, link);
        if (r == first && why)
            req_done(r, res, why);
        else
            req_done(r, res == FETCH_TOO_LARGE ? FETCH_ERROR : res, behind_why);
    }
}

/* Whether a request on c other than except (may be NULL) still waits for its answer
 * (one not abandoned). */
static int conn_has_live(const hc_conn *c, const hc_req *except)
{
    for (const hc_req *o = TAILQ_FIRST(&c->reqs); o; o = TAILQ_NEXT(o, clink))
        if (o != except && !o->abandoned)
            return 1;
    return 0;
}

/* Detaches r from its connection or the queue. Returns 1 when r is free to go, 0 when
 * it stays on its connection, abandoned, because other requests written there still
 * wait for their answers behind or after it. A connection left with no live request
 * is closed (its answers would have no taker). */
static int req_release(hc_req *r)
{
    hc_host *h = r->host;
    hc_conn *c = r->conn;
    if (r->queued) {
        TAILQ_REMOVE(&h->pending, r, link);
        r->queued = 0;
        return 1;
    }
    if (!c)
        return 1;
    if (r->out_off > 0 && conn_has_live(c, r)) {
        r->abandoned = 1; /* written: its answer will come, and must not go to another */
        evtimer_del(r->timer);
        return 0;
    }
    conn_remove(c, r); /* never sent (nobody will answer it), or the last live one */
    if (conn_has_live(c, NULL))
        return 1;
    conn_destroy(c);
    host_pump(h);
    return 1;
}

/* r, first on c, has its answer, but c cannot serve the requests behind it (an answer
 * that leaves the connection unusable, or only placeholders left): they are retried or
 * fail as conn_drop says (announced: the server announced the close in r's answer),
 * then r completes. */
static void conn_answered_drop_rest(hc_conn *c, hc_req *r, int announced)
{
    conn_remove(c, r);
    conn_drop(c, FETCH_ERROR, NULL,
              "connection closed before the answer to a request written behind another", announced);
    req_done(r, FETCH_OK, NULL);
}

/* The last request on c has its answer: the connection goes back to the pool (or
 * serves the next waiting request) when the answer allows it, else it is closed. */
static void conn_finish(hc_conn *c, int reusable)
{
    hc_req *r = TAILQ_FIRST(&c->reqs);
    hc_host *h = c->host;
    conn_remove(c, r);
    if (!reusable) {
        conn_destroy(c);
    } else {
        c->nreq++;
        c->in.len = c->in_off = 0;
        c->state = C_IDLE;
        c->idle_since = now_mono_ms();
        TAILQ_REMOVE(&h->busy, c, link);
        TAILQ_INSERT_HEAD(&h->idle, c, link); /* LIFO: the warmest first */
        conn_watch(c, EV_READ);
    }
    host_pump(h);
    req_done(r, FETCH_OK, NULL);
}

/* Nothing readable and no end on a pooled connection: what is readable there now
 * would be taken for the next request's answer. */
static int conn_quiet(hc_conn *c)
{
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Parses the bytes read into the answers of the requests on c, in their order.
 * Returns 1 while c waits for more bytes, 0 when c is done with (pooled, serving the
 * next request, or closed). */
static int conn_parse(hc_conn *c)
{
    while (c->in_off < c->in.len) {
        hc_req *r = TAILQ_FIRST(&c->reqs);
        hc_parser *p = &r->p;
        size_t used = 0;
        int rc = hc_parser_feed(p, c->in.data + c->in_off, c->in.len - c->in_off, &used);
        c->in_off += used;
        r->got += used;
        if (rc == HC_MORE)
            break;
        if (rc != HC_DONE) {
            conn_drop(c, rc == HC_TOO_LARGE ? FETCH_TOO_LARGE : FETCH_ERROR,
                      rc == HC_TOO_LARGE ? "response body exceeds the size limit" : p->error,
                      "connection closed after a bad answer to an earlier request on it", 0);
            return 0;
        }
        int clean = p->http11 && !p->conn_close && !p->close_framed && !p->no_reuse;
        if (!TAILQ_NEXT(r, clink)) {
            if (c->in_off != c->in.len && !p->no_body) {
                /* Bytes beyond the last answer: nothing was written after its request,
                 * so the server sent two answers to one request, and which one is this
                 * request's cannot be told. (After HEAD they are the body some servers
                 * send anyway: the connection is closed.) */
                conn_drop(c, FETCH_ERROR, "the server sent more than one response",
                          "the server sent more than one response", 0);
                return 0;
            }
            conn_finish(c, clean && c->in_off == c->in.len);
            return 0;
        }
        /* The requests written behind r have no answer to trust on this connection
         * when r's leaves it unusable (a server that announced the close has not read
         * them); with only placeholders left, which have no timer, their answers may
         * never come. */
        if (!clean || !conn_has_live(c, r)) {
            conn_answered_drop_rest(c, r, p->conn_close);
            return 0;
        }
        conn_remove(c, r);
        c->nreq++; /* the next answer starts in the bytes that follow */
        req_done(r, FETCH_OK, NULL);
    }
    if (c->in_off == c->in.len) {
        c->in.len = c->in_off = 0;
    } else if (c->in_off) {
        memmove(c->in.data, c->in.data + c->in_off, c->in.len - c->in_off);
        c->in.len -= c->in_off;
        c->in_off = 0;
    }
    return 1;
}

/* The connection ended (clean) or failed while answers were awaited. */
static void conn_ended(hc_conn *c, int clean)
{
    hc_req *r = TAILQ_FIRST(&c->reqs);
    if (clean && hc_parser_eof(&r->p) == HC_DONE) {
        if (TAILQ_NEXT(r, clink)) /* a close-delimited answer, requests behind it */
            conn_answered_drop_rest(c, r, 0);
        else
            conn_finish(c, 0);
        return;
    }
    conn_drop(c, FETCH_ERROR,
              clean ? (r->p.error ? r->p.error : "connection closed before the response")
                    : "connection reset while reading the response",
              clean ? "connection closed before the response"
                    : "connection reset while reading the response",
              0);
}

static void on_readable(hc_conn *c)
{
    for (;;) {
        buf_reserve(&c->in, HC_READ_CHUNK);
        size_t room = c->in.cap - c->in.len - 1;
        ssize_t n = recv(c->fd, c->in.data + c->in.len, room, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        if (n <= 0) {
            conn_ended(c, n == 0);
            return;
        }
        c->in.len += (size_t)n;
        if (!conn_parse(c))
            return;
        if ((size_t)n < room)
            return; /* drained; the next readiness brings more */
    }
}

static void on_writable(hc_conn *c)
{
    hc_host *h = c->host;
    if (h->gather == c)
        h->gather = NULL; /* this write takes what gathered */
    hc_req *first = TAILQ_FIRST(&c->reqs);
    if (c->nreq > 0 && first == c->unsent && first->out_off == 0 && !conn_quiet(c)) {
        /* the server sent something (or closed) while the connection was pooled: close
         * it, the requests go to a new connection */
        conn_drop(c, FETCH_ERROR, "unexpected data on a pooled connection",
                  "unexpected data on a pooled connection", 0);
        return;
    }
    while (c->unsent) {
        struct iovec iov[HC_PIPELINE_MAX];
        int n_iov = 0;
        for (hc_req *r = c->unsent; r && n_iov < HC_PIPELINE_MAX; r = TAILQ_NEXT(r, clink)) {
            iov[n_iov].iov_base = r->out.data + r->out_off;
            iov[n_iov].iov_len = r->out.len - r->out_off;
            n_iov++;
        }
        struct msghdr msg = {0};
        msg.msg_iov = iov;
        msg.msg_iovlen = (size_t)n_iov;
        ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            conn_watch(c, EV_WRITE);
            return;
        }
        if (n < 0) {
            conn_drop(c, FETCH_ERROR, "connection lost while sending the request",
                      "connection lost while sending the request", 0);
            return;
        }
        size_t left = (size_t)n;
        while (left && c->unsent) {
            hc_req *r = c->unsent;
            size_t take = r->out.len - r->out_off;
            if (take > left)
                take = left;
            r->out_off += take;
            left -= take;
            if (r->out_off == r->out.len)
                c->unsent = TAILQ_NEXT(r, clink);
        }
    }
    c->state = C_READING;
    conn_watch(c, EV_READ);
}

static void conn_cb(evutil_socket_t fd, short what, void *arg)
{
    hc_conn *c = arg;
    hc_host *h = c->host;
    if (c->state == C_IDLE) {
        conn_destroy(c); /* closed by the server (or unexpected bytes) */
        host_pump(h);
        return;
    }
    if (c->state == C_CONNECTING) {
        int err = c->connect_err;
        socklen_t len = sizeof(err);
        if (!err && getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
        if (err) {
            conn_drop(c, FETCH_CONNECT, "could not connect to the server",
                      "could not connect to the server", 0);
            return;
        }
        c->state = C_WRITING;
    }
    if (c->state == C_WRITING)
        on_writable(c);
    else if (c->state == C_READING && (what & EV_READ))
        on_readable(c);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    hc_req *r = arg;
    int gone = req_release(r);
    hc_result out = {FETCH_TIMEOUT, "request timed out", &r->p};
    r->cb(&out, r->arg);
    if (gone)
        req_free(r);
}

hc_ctx *hc_new(struct event_base *base, long max_conns)
{
    hc_ctx *ctx = xcalloc(1, sizeof(*ctx));
    ctx->base = base;
    ctx->max_conns = max_conns > 0 ? max_conns : 64;
    TAILQ_INIT(&ctx->kicks);
    TAILQ_INIT(&ctx->later);
    ctx->kick_ev = event_new(base, -1, 0, kick_cb, ctx);
    ctx->later_ev = evtimer_new(base, later_cb, ctx);
    ctx->later_max_ev = evtimer_new(base, later_cb, ctx);
    if (!ctx->kick_ev || !ctx->later_ev || !ctx->later_max_ev) {
        if (ctx->kick_ev)
            event_free(ctx->kick_ev);
        if (ctx->later_ev)
            event_free(ctx->later_ev);
        if (ctx->later_max_ev)
            event_free(ctx->later_max_ev);
        free(ctx);
        return NULL;
    }
    if (event_base_get_npriorities(base) >= CL_EV_PRIORITIES)
        event_priority_set(ctx->later_ev, CL_EV_PRIO_IDLE);
    return ctx;
}

void hc_free(hc_ctx *ctx)
{
    if (!ctx)
        return;
    hc_host *h;
    while ((h = ctx->hosts)) {
        ctx->hosts = h->next;
        hc_req *r;
        while ((r = TAILQ_FIRST(&h->pending))) {
            TAILQ_REMOVE(&h->pending, r, link);
            req_free(r);
        }
        hc_conn *c;
        while ((c = TAILQ_FIRST(&h->busy))) {
            while ((r = TAILQ_FIRST(&c->reqs))) {
                conn_remove(c, r);
                req_free(r);
            }
            conn_destroy(c);
        }
        while ((c = TAILQ_FIRST(&h->idle)))
            conn_destroy(c);
        free(h);
    }
    hc_req *r;
    while ((r = ctx->spare)) {
        ctx->spare = r->next_spare;
        event_free(r->timer);
        buf_free(&r->out);
        free(r);
    }
    event_free(ctx->kick_ev);
    event_free(ctx->later_ev);
    event_free(ctx->later_max_ev);
    free(ctx);
}

static hc_host *host_get(hc_ctx *ctx, const hc_target *t)
{
    for (hc_host *h = ctx->hosts; h; h = h->next)
        if (h->addrlen == t->addrlen && memcmp(&h->addr, &t->addr, t->addrlen) == 0)
            return h;
    hc_host *h = xcalloc(1, sizeof(*h));
    h->ctx = ctx;
    memcpy(&h->addr, &t->addr, t->addrlen);
    h->addrlen = t->addrlen;
    TAILQ_INIT(&h->idle);
    TAILQ_INIT(&h->busy);
    TAILQ_INIT(&h->pending);
    h->next = ctx->hosts;
    ctx->hosts = h;
    return h;
}

static int is_idempotent(const char *m)
{
    switch (m[0]) { /* one comparison, not one per idempotent method */
    case 'G':
        return strcmp(m, "GET") == 0;
    case 'H':
        return strcmp(m, "HEAD") == 0;
    case 'P':
        return strcmp(m, "PUT") == 0;
    case 'D':
        return strcmp(m, "DELETE") == 0;
    case 'O':
        return strcmp(m, "OPTIONS") == 0;
    case 'T':
        return strcmp(m, "TRACE") == 0;
    default:
        return 0;
    }
}

/* What a tool's header name is to the client: a framing header it writes itself
 * (Content-Length, Transfer-Encoding, Expect), one it adds when missing (Host,
 * Accept, Content-Type), or another. Told apart by length first: a request carries
 * a dozen names and most are none of these. */
enum { HN_OTHER, HN_FRAMING, HN_HOST, HN_ACCEPT, HN_CTYPE };

static int header_kind(const char *name, size_t n)
{
    switch (n) {
    case 4:
        return lower_eq(name, n, "host") ? HN_HOST : HN_OTHER;
    case 6:
        return lower_eq(name, n, "accept")   ? HN_ACCEPT
               : lower_eq(name, n, "expect") ? HN_FRAMING
                                             : HN_OTHER;
    case 12:
        return lower_eq(name, n, "content-type") ? HN_CTYPE : HN_OTHER;
    case 14:
        return lower_eq(name, n, "content-length") ? HN_FRAMING : HN_OTHER;
    case 17:
        return lower_eq(name, n, "transfer-encoding") ? HN_FRAMING : HN_OTHER;
    default:
        return HN_OTHER;
    }
}

/* The head is written through a cursor into room reserved beforehand: one bound
 * check per header instead of one per piece. */
static char *put(char *o, const void *s, size_t n)
{
    memcpy(o, s, n);
    return o + n;
}
#define PUT(o, lit) put((o), (lit), sizeof(lit) - 1)

static char *put_size(char *o, size_t v)
{
    char d[24];
    size_t i = sizeof(d);
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return put(o, d + i, sizeof(d) - i);
}

/* Room for n more bytes after o (the buffer may move): returns where o is now. */
static char *room(buf *b, char *o, size_t n)
{
    size_t used = (size_t)(o - b->data);
    if (b->cap - used > n)
        return o;
    b->len = used;
    buf_reserve(b, n);
    return b->data + used;
}

/* A spare request (its timer event and head buffer kept) or a new one. */
static hc_req *req_new(hc_ctx *ctx)
{
    hc_req *r = ctx->spare;
    if (!r) {
        r = xcalloc(1, sizeof(*r));
        r->ctx = ctx;
        r->timer = evtimer_new(ctx->base, timer_cb, r);
        return r;
    }
    ctx->spare = r->next_spare;
    ctx->n_spare--;
    struct event *timer = r->timer;
    buf out = r->out;
    memset(r, 0, sizeof(*r));
    r->ctx = ctx;
    r->timer = timer;
    r->out = out;
    r->out.len = 0;
    return r;
}

hc_req *hc_start(hc_ctx *ctx, const hc_target *t, const char *path, size_t path_len,
                 const char *method, const fetch_header *headers, size_t n_headers,
                 const char *body, size_t body_len, int send_body, int pipeline, long timeout_ms,
                 size_t max_response, hc_done_cb cb, void *arg, const char **err)
{
    if (!ctx || !t || !method || !cb) {
        *err = "missing context, target, method or callback";
        return NULL;
    }
    hc_req *r = req_new(ctx);
    if (!r->timer) {
        *err = "cannot create the request timer";
        free(r);
        return NULL;
    }
    r->cb = cb;
    r->arg = arg;
    r->no_body = strcmp(method, "HEAD") == 0;
    r->idempotent = is_idempotent(method);
    r->pipeline = pipeline && !r->no_body;
    r->max_response = max_response;
    hc_parser_init(&r->p, r->no_body, max_response);

    buf *b = &r->out;
    size_t mlen = strlen(method);
    if (!send_body)
        body_len = 0;
    /* what follows the header lines (Host, Accept, framing, body) fits in tail */
    size_t tail = 160 + t->authority_len + body_len;
    buf_reserve(b, 32 + mlen + t->path_len + path_len + tail);
    char *o = put(b->data, method, mlen);
    *o++ = ' ';
    char first = t->path_len ? t->path[0] : path_len ? path[0] : '\0';
    if (first != '/')
        *o++ = '/';
    o = put(o, t->path, t->path_len);
    if (path_len)
        o = put(o, path, path_len);
    o = PUT(o, " HTTP/1.1\r\n");
    int have_host = 0, have_accept = 0, have_ctype = 0;
    for (size_t i = 0; i < n_headers; i++) {
        const char *name = headers[i].name;
        size_t nlen = strlen(name);
        int kind = header_kind(name, nlen);
        if (kind == HN_FRAMING)
            continue; /* the client frames the body itself */
        have_host |= kind == HN_HOST;
        have_accept |= kind == HN_ACCEPT;
        have_ctype |= kind == HN_CTYPE;
        size_t vlen = strlen(headers[i].value);
        o = room(b, o, nlen + vlen + 4 + tail);
        o = put(o, name, nlen);
        o = PUT(o, ": ");
        o = put(o, headers[i].value, vlen);
        o = PUT(o, "\r\n");
    }
    if (!have_host) {
        o = PUT(o, "Host: ");
        o = put(o, t->authority, t->authority_len);
        o = PUT(o, "\r\n");
    }
    if (!have_accept)
        o = PUT(o, "Accept: */*\r\n");
    if (send_body) {
        if (!have_ctype) /* what libcurl sends for a POST body without one */
            o = PUT(o, "Content-Type: application/x-www-form-urlencoded\r\n");
        o = PUT(o, "Content-Length: ");
        o = put_size(o, body_len);
        o = PUT(o, "\r\n\r\n");
        if (body_len)
            o = put(o, body, body_len);
    } else {
        o = PUT(o, "\r\n");
    }
    b->len = (size_t)(o - b->data);
    b->data[b->len] = '\0';

    evtimer_assign(r->timer, ctx->base, timer_cb, r);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(r->timer, &tv);
    r->host = host_get(ctx, t);
    req_dispatch(r);
    return r;
}

void hc_cancel(hc_req *r)
{
    if (r && req_release(r))
        req_free(r);
}

size_t hc_connections_opened(const hc_ctx *ctx)
{
    return ctx ? ctx->opened : 0;
}
