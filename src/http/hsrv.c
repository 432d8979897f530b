/* hsrv: see hsrv.h.
 *
 * A connection has one persistent read event. While no request is being answered
 * it reads into the connection's input buffer and parses; a complete request goes
 * to the request callback and the read event stays: bytes arriving meanwhile are
 * peeked at, an end of stream closes the connection (the close callback cancels the
 * work), bytes of a pipelined request pause reading until the reply is out. The
 * reply is written with one sendmsg; a write event is added only when the socket
 * would block. So a keep-alive request costs one read and one write in the common
 * case.
 *
 * The whole-request deadline (slow-loris defence): every connection gets a window
 * of deadline_s seconds; one that spends a whole window reading (head, body, or
 * nothing at all) without completing a request is shut down, one that completed a
 * request in the window, or is being answered, gets a new window. The windows are
 * checked by a once-a-second sweep, which also closes connections idle (or not
 * taking our reply) for idle_s, and hands freed heap back to the kernel (glibc
 * malloc_trim) once the number of connections has dropped by 1,024 since the last
 * time. */
#include "hsrv.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "framing.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

/* ---- the server ---- */

/* Reply headers the server adds unless the callback did, or reads. */
enum { O_TYPE = 1, O_LENGTH = 2, O_DATE = 4, O_CONN = 8, O_CACHE = 16, O_CONN_CLOSE = 32 };

enum {
    C_READ,   /* reading and parsing requests */
    C_APP,    /* a request is with the callback */
    C_STREAM, /* a streaming reply is open */
    C_WRITE   /* the reply is complete, its bytes are going out */
};

enum { P_HEAD, P_BODY, P_CHUNKS, P_REFUSED };

/* The input buffer of a connection: the parsed head's index, then the bytes. */
typedef struct inbuf {
    hsrv_head head;
    size_t cap;
    char data[];
} inbuf;

#define IN_BASE 4096
#define IN_KEEP 64 /* base-sized input buffers kept for the next connections */

struct hconn {
    hsrv *s;
    hconn *prev, *next;
    int fd;
    struct event *rev, *wev;
    struct sockaddr_storage peer;
    int state, parse;
    int busy, dead, in_dispatch, read_paused, close_after, head_method, chunked_out;
    int continue_sent, broken;
    inbuf *in;
    size_t in_len;
    size_t start;    /* where the current request begins */
    size_t scanned;  /* P_HEAD: bytes searched for the end of the head */
    size_t head_len; /* the head, bytes (P_BODY, P_CHUNKS) */
    uint64_t body_len;
    size_t chunk_at; /* P_CHUNKS: next byte to check */
    framing_chunks chunks;
    size_t req_end; /* the request's last byte + 1 (from the buffer's start) */
    const char *body;
    size_t body_n;
    int refusal_status;
    const char *refusal_reason;
    buf hdrs;             /* reply headers added by the callback */
    unsigned out_has;     /* O_* of the headers in hdrs */
    const char *conn_hdr; /* the request's Connection field, or NULL */
    int conn_close, conn_keep; /* its options hold close / keep-alive (not close) */
    buf out;              /* bytes not written yet */
    size_t out_at;
    void (*on_close)(void *arg);
    void *close_arg;
    void *user; /* hconn_set_user's, freed by user_free when the connection closes */
    void (*user_free)(void *user);
    int64_t window_start;
    unsigned served;
    uint64_t last_active; /* the server's tick */
};

struct hsrv {
    struct event_base *base;
    hsrv_request_cb cb;
    void *arg;
    const char *default_type;
    int64_t window_ms;
    int idle_s;
    size_t max_head;
    uint64_t max_body;
    size_t max_conns;
    int lfd;
    struct event *lev, *resume, *sweep;
    int spare_fd;
    hconn *conns;
    size_t live, peak;
    int closed_since_sweep, trim_due;
    uint64_t tick;
    uint64_t deadline_closed, framing_refused, conns_refused, trims;
};

static inbuf *g_in_kept[IN_KEEP];
static int g_in_nkept;

static inbuf *in_get(void)
{
    if (g_in_nkept)
        return g_in_kept[--g_in_nkept];
    inbuf *b = xmalloc(sizeof *b + IN_BASE);
    b->cap = IN_BASE;
    return b;
}

static void in_put(inbuf *b)
{
    if (b->cap == IN_BASE && g_in_nkept < IN_KEEP)
        g_in_kept[g_in_nkept++] = b;
    else
        free(b);
}

/* ---- closing ---- */

static void conn_user_free(hconn *c)
{
    if (c->user_free)
        c->user_free(c->user);
    c->user = NULL;
    c->user_free = NULL;
}

static void conn_free(hconn *c)
{
    conn_user_free(c);
    if (c->in)
        in_put(c->in);
    buf_free(&c->hdrs);
    buf_free(&c->out);
    event_free(c->rev);
    if (c->wev)
        event_free(c->wev);
    free(c);
}

/* notify: run the close callback (the connection went away under a request). */
static void conn_close(hconn *c, int notify)
{
    if (c->dead)
        return;
    c->dead = 1;
    void (*cb)(void *) = c->on_close;
    c->on_close = NULL;
    if (notify && cb)
        cb(c->close_arg);
    conn_user_free(c); /* at once, not when a busy connection is freed */
    hsrv *s = c->s;
    event_del(c->rev);
    if (c->wev)
        event_del(c->wev);
    close(c->fd);
    c->fd = -1;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->live--;
    s->closed_since_sweep = 1;
    if (!c->busy)
        conn_free(c);
}

/* ---- writing ---- */

static void on_write(evutil_socket_t fd, short what, void *arg);
static void conn_done(hconn *c);

/* Writes iov; what does not go out now is kept in c->out (the write event is then
 * added). 0, or -1 when the connection was closed. */
static int send_iov(hconn *c, struct iovec *iov, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    size_t sent = 0;
    if (c->broken)
        return -1;
    if (c->out.len == c->out_at) {
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = iov;
        m.msg_iovlen = (size_t)n;
        ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            /* closed from the read callback: the caller may be walking a list of
             * streams that the close callback would change */
            c->broken = 1;
            event_active(c->rev, EV_READ, 0);
            return -1;
        }
        sent = w > 0 ? (size_t)w : 0;
        if (sent)
            c->last_active = c->s->tick;
        if (sent == total)
            return 0;
    }
    if (c->out_at == c->out.len) {
        buf_reset(&c->out);
        c->out_at = 0;
    }
    for (int i = 0; i < n; i++) {
        size_t l = iov[i].iov_len;
        if (sent >= l) {
            sent -= l;
            continue;
        }
        buf_append(&c->out, (const char *)iov[i].iov_base + sent, l - sent);
        sent = 0;
    }
    if (!c->wev)
        c->wev = event_new(c->s->base, c->fd, EV_WRITE, on_write, c);
    event_add(c->wev, NULL);
    return 0;
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    hconn *c = arg;
    (void)what;
    ssize_t w = send(fd, c->out.data + c->out_at, c->out.len - c->out_at, MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        conn_close(c, 1);
        return;
    }
    if (w > 0) {
        c->out_at += (size_t)w;
        c->last_active = c->s->tick;
    }
    if (c->out_at < c->out.len) {
        event_add(c->wev, NULL);
        return;
    }
    buf_reset(&c->out);
    c->out_at = 0;
    if (c->state == C_WRITE)
        conn_done(c);
}

/* ---- reading and parsing ---- */

static void process(hconn *c);

/* The reply is out: the next request, or the end. */
static void conn_done(hconn *c)
{
    if (c->close_after) {
        conn_close(c, 0);
        return;
    }
    /* the request's bytes go; a pipelined one moves to the front */
    size_t rest = c->in_len - c->req_end;
    if (rest)
        memmove(c->in->data, c->in->data + c->req_end, rest);
    c->in_len = rest;
    c->req_end = c->start = c->scanned = 0;
    c->parse = P_HEAD;
    c->continue_sent = 0;
    c->state = C_READ;
    buf_reset(&c->hdrs);
    c->out_has = 0;
    if (!rest && c->in) {
        in_put(c->in);
        c->in = NULL;
    }
    if (c->read_paused) {
        c->read_paused = 0;
        event_add(c->rev, NULL);
    }
    if (rest && !c->in_dispatch)
        event_active(c->rev, EV_READ, 0);
}

static void dispatch(hconn *c)
{
    c->state = C_APP;
    c->served++;
    c->busy++;
    c->in_dispatch = 1;
    c->s->cb(c, c->s->arg);
    c->in_dispatch = 0;
    c->busy--;
}

/* A request refused by the framing check or the cap: it stands in as a request the
 * callback answers (then the connection closes); what follows is discarded. */
static void refuse(hconn *c, int status, const char *reason)
{
    c->s->framing_refused++;
    if (!c->refusal_status) {
        c->refusal_status = status;
        c->refusal_reason = reason;
    }
    c->parse = P_REFUSED;
    c->in_len = 0;
    c->req_end = 0;
    hsrv_head *h = &c->in->head;
    memset(h, 0, offsetof(hsrv_head, headers));
    memcpy(h->method, "GET", 4);
    h->path = "/.refused";
    h->http11 = 1;
    c->body = "";
    c->body_n = 0;
    c->head_len = 0;
    c->conn_hdr = NULL;
    c->conn_close = c->conn_keep = 0;
    c->close_after = 1;
    dispatch(c);
}

/* A bad chunk after 100-continue: the head has been taken, no place for an answer. */
static void cut(hconn *c)
{
    c->s->framing_refused++;
    conn_close(c, 0);
}

static int grow(hconn *c, size_t need)
{
    if (need <= c->in->cap)
        return 0;
    size_t cap = c->in->cap;
    while (cap < need)
        cap *= 2;
    inbuf *b = xrealloc(c->in, sizeof *b + cap);
    b->cap = cap;
    c->in = b;
    return 0;
}

/* The request is whole: index the head, decide keep-alive, hand it over. */
static void complete(hconn *c)
{
    hsrv_head *h = &c->in->head;
    char *p = c->in->data + c->start;
    if (hsrv_parse_head(p, c->head_len, h) < 0) {
        refuse(c, 413, "request header block exceeds limits.max_header_bytes");
        return;
    }
    c->head_method = !strcmp(h->method, "HEAD");
    const char *conn = c->conn_hdr = hsrv_head_find(h, "Connection");
    /* Connection holds a list of options ("close, x"): the tokens count, in any field */
    unsigned opts = conn ? hsrv_head_connection(h) : 0;
    c->conn_close = (opts & HSRV_CONN_CLOSE) != 0;
    c->conn_keep = !c->conn_close && (opts & HSRV_CONN_KEEP_ALIVE);
    if (h->absolute) /* as evhttp: a proxy request, closed unless Proxy-Connection */
        conn = hsrv_head_find(h, "Proxy-Connection"),
        c->close_after = !conn || strcasecmp(conn, "keep-alive") != 0;
    else if (h->http11)
        c->close_after = c->conn_close;
    else
        c->close_after = !c->conn_keep;
    if (c->s->max_conns && c->refusal_status) /* the cap: the first request answers it */
        c->close_after = 1;
    dispatch(c);
}

static void send_continue(hconn *c)
{
    static const char CONT[] = "HTTP/1.1 100 Continue\r\n\r\n";
    struct iovec v = {(void *)CONT, sizeof CONT - 1};
    c->continue_sent = 1;
    send_iov(c, &v, 1);
}

/* One step on the buffered bytes: 1 when it may go on. */
static int step(hconn *c)
{
    hsrv *s = c->s;
    framing_limits lim = {s->max_head, s->max_body};
    framing_error err;
    if (c->parse == P_REFUSED) {
        c->in_len = 0;
        return 0;
    }
    if (c->parse == P_HEAD) {
        /* empty lines before a request line are ignored (RFC 9112 section 2.2) */
        if (c->scanned == 0) {
            while (c->start < c->in_len) {
                char ch = c->in->data[c->start];
                if (ch == '\n')
                    c->start++;
                else if (ch == '\r' && c->start + 1 < c->in_len &&
                         c->in->data[c->start + 1] == '\n')
                    c->start += 2;
                else
                    break;
            }
        }
        size_t len = c->in_len - c->start;
        if (!len)
            return 0;
        size_t want = len < s->max_head + 1 ? len : s->max_head + 1;
        const char *p = c->in->data + c->start;
        size_t end = framing_head_end(p, want, &c->scanned);
        if (!end) {
            if (framing_check_partial(p, want, &lim, &err) == FRAMING_BAD)
                refuse(c, err.status, err.reason);
            return 0;
        }
        framing_head fh;
        c->scanned = 0;
        if (framing_check_head(p, end, &lim, &fh, &err) != FRAMING_OK) {
            refuse(c, err.status, err.reason);
            return 0;
        }
        c->head_len = end;
        c->body_len = fh.length;
        if (fh.body == FRAMING_BODY_NONE) {
            c->req_end = c->start + end;
            c->body = "";
            c->body_n = 0;
            complete(c);
            return 0;
        }
        if (fh.expect_continue && len == end)
            send_continue(c);
        if (c->dead)
            return 0;
        if (fh.body == FRAMING_BODY_CHUNKED) {
            framing_chunks_init(&c->chunks);
            c->chunk_at = c->start + end;
            c->parse = P_CHUNKS;
        } else {
            c->parse = P_BODY;
        }
        return 1;
    }
    if (c->parse == P_BODY) {
        size_t need = c->start + c->head_len + (size_t)c->body_len;
        if (c->in_len < need) {
            grow(c, need);
            return 0;
        }
        c->req_end = need;
        c->body = c->in->data + c->start + c->head_len;
        c->body_n = (size_t)c->body_len;
        complete(c);
        return 0;
    }
    /* P_CHUNKS */
    framing_rc rc;
    size_t used = framing_chunks_feed(&c->chunks, c->in->data + c->chunk_at,
                                      c->in_len - c->chunk_at, &lim, &rc, &err);
    c->chunk_at += used;
    size_t framed = c->chunk_at - (c->start + c->head_len);
    if (rc == FRAMING_BAD) {
        if (c->continue_sent)
            cut(c);
        else
            refuse(c, err.status, err.reason);
        return 0;
    }
    /* one-byte chunks cost five bytes of framing each: bound what is held */
    if (framed > 2 * s->max_body + 4096) {
        if (c->continue_sent)
            cut(c);
        else
            refuse(c, 413, "chunked body framing exceeds limits.max_body_bytes");
        return 0;
    }
    if (rc == FRAMING_MORE)
        return 0;
    c->req_end = c->chunk_at;
    char *body = c->in->data + c->start + c->head_len;
    c->body = body;
    c->body_n = hsrv_dechunk(body, framed);
    complete(c);
    return 0;
}

/* Parses what is buffered while no request is being answered. */
static void process(hconn *c)
{
    c->busy++;
    while (!c->dead && c->state == C_READ && c->in && c->in_len > c->start) {
        size_t before = c->in_len;
        int again = step(c);
        if (c->dead || c->state != C_READ)
            break;
        if (!again && c->in_len == before && c->state == C_READ)
            break; /* needs more bytes */
    }
    c->busy--;
    if (c->dead && !c->busy)
        conn_free(c);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    hconn *c = arg;
    (void)what;
    if (c->broken) {
        conn_close(c, 1);
        return;
    }
    if (c->state != C_READ) {
        /* a request is being answered: an end of stream is a hang-up, bytes are a
         * pipelined request (they wait) */
        char byte;
        ssize_t n = recv(fd, &byte, 1, MSG_PEEK);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        if (n > 0) {
            event_del(c->rev);
            c->read_paused = 1;
            return;
        }
        conn_close(c, 1);
        return;
    }
    if (!c->in) {
        c->in = in_get();
        c->in_len = 0;
    }
    if (c->in_len == c->in->cap)
        grow(c, c->in->cap * 2);
    ssize_t n = recv(fd, c->in->data + c->in_len, c->in->cap - c->in_len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        if (c->in_len > c->start) {
            process(c); /* woken to parse a pipelined request */
        } else if (!c->in_len) {
            in_put(c->in);
            c->in = NULL;
        }
        return;
    }
    if (n <= 0) {
        conn_close(c, 1);
        return;
    }
    c->in_len += (size_t)n;
    c->last_active = c->s->tick;
    if (c->parse == P_REFUSED) {
        c->in_len = 0;
        return;
    }
    process(c);
}

/* ---- replies ---- */

static unsigned out_flag(const char *name, size_t n, const char *value)
{
    switch (n) {
    case 4:
        return !strncasecmp(name, "Date", 4) ? O_DATE : 0;
    case 10:
        return !strncasecmp(name, "Connection", 10)
                   ? O_CONN | (strncasecmp(value, "close", 5) ? 0u : (unsigned)O_CONN_CLOSE)
                   : 0;
    case 12:
        return !strncasecmp(name, "Content-Type", 12) ? O_TYPE : 0;
    case 13:
        return !strncasecmp(name, "Cache-Control", 13) ? O_CACHE : 0;
    case 14:
        return !strncasecmp(name, "Content-Length", 14) ? O_LENGTH : 0;
    default:
        return 0;
    }
}

void hconn_add_header(hconn *c, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    c->out_has |= out_flag(name, nl, value);
    buf_reserve(&c->hdrs, nl + vl + 4);
    char *p = c->hdrs.data + c->hdrs.len;
    memcpy(p, name, nl);
    memcpy(p + nl, ": ", 2);
    memcpy(p + nl + 2, value, vl);
    memcpy(p + nl + 2 + vl, "\r\n", 2);
    c->hdrs.len += nl + vl + 4;
}

/* The header named name in the block b (lines "Name: value\r\n"). */
static const char *find_out(const buf *b, const char *name)
{
    size_t n = strlen(name);
    const char *p = b->data, *end = b->data + b->len;
    while (p && p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if ((size_t)(end - p) > n && p[n] == ':' && !strncasecmp(p, name, n))
            return p;
        p = e ? e + 1 : NULL;
    }
    return NULL;
}

int hconn_has_header(const hconn *c, const char *name)
{
    unsigned f = out_flag(name, strlen(name), "");
    return f ? (c->out_has & f) != 0 : find_out(&c->hdrs, name) != NULL;
}

static char *put_uint(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while (v /= 10);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static void put(buf *b, const char *s)
{
    buf_puts(b, s);
}

/* The status line and headers, as evhttp laid them out: the callback's headers in
 * order, then Date (HTTP/1.1), Connection: keep-alive (a keep-alive HTTP/1.0
 * request), Content-Length (unless a stream), the default Content-Type, and
 * Connection: close when the request asked for it. */
static void make_head(hconn *c, buf *b, int status, const char *reason, int stream, size_t len)
{
    const hsrv_head *h = &c->in->head;
    int needs_body = status != 204 && status != 304 && status >= 200 && !c->head_method;
    /* a refused request stands for one that asked to close */
    int input_close = c->parse == P_REFUSED || c->conn_close;
    int keepalive = c->conn_keep;
    buf_reset(b);
    buf_reserve(b, c->hdrs.len + 256);
    char *p = b->data;
    memcpy(p, h->http11 ? "HTTP/1.1 " : "HTTP/1.0 ", 9);
    p = put_uint(p + 9, (uint64_t)status);
    *p++ = ' ';
    b->len = (size_t)(p - b->data);
    put(b, reason);
    buf_append(b, "\r\n", 2);
    if (c->hdrs.len) {
        if ((h->absolute || input_close) && (c->out_has & O_CONN)) {
            /* ours goes: none, or the one at the end */
            const char *q = c->hdrs.data, *end = c->hdrs.data + c->hdrs.len;
            while (q < end) {
                const char *e = memchr(q, '\n', (size_t)(end - q)) + 1;
                if (strncasecmp(q, "Connection:", 11))
                    buf_append(b, q, (size_t)(e - q));
                q = e;
            }
        } else {
            buf_append(b, c->hdrs.data, c->hdrs.len);
        }
    }
    if (stream && h->http11 && needs_body && !(c->out_has & O_LENGTH)) {
        put(b, "Transfer-Encoding: chunked\r\n");
        c->chunked_out = 1;
    }
    if (h->http11 && !(c->out_has & O_DATE)) {
        const char *d = hsrv_date_now();
        if (d) {
            put(b, "Date: ");
            put(b, d);
            buf_append(b, "\r\n", 2);
        }
    }
    if (!h->http11 && keepalive)
        put(b, "Connection: keep-alive\r\n");
    if ((h->http11 || keepalive) && needs_body && !stream && !(c->out_has & O_LENGTH)) {
        buf_reserve(b, 48);
        memcpy(b->data + b->len, "Content-Length: ", 16);
        char *q = put_uint(b->data + b->len + 16, (uint64_t)len);
        b->len = (size_t)(q - b->data);
        buf_append(b, "\r\n", 2);
    }
    if (needs_body && !(c->out_has & O_TYPE) && c->s->default_type) {
        put(b, "Content-Type: ");
        put(b, c->s->default_type);
        buf_append(b, "\r\n", 2);
    }
    if (!h->absolute && input_close)
        put(b, "Connection: close\r\n");
    buf_append(b, "\r\n", 2);
    /* as evhttp: a Connection: close of ours closes too; HTTP/1.0 closes unless
     * keep-alive */
    if (c->out_has & O_CONN_CLOSE)
        c->close_after = 1;
}

static buf g_head; /* the reply head being written (one at a time) */

void hconn_reply(hconn *c, int status, const char *reason, const char *body, size_t len)
{
    c->on_close = NULL;
    make_head(c, &g_head, status, reason, 0, len);
    struct iovec v[2] = {{g_head.data, g_head.len}, {(void *)body, len}};
    c->state = C_WRITE;
    if (send_iov(c, v, len && !c->head_method ? 2 : 1) < 0)
        return;
    if (c->out.len == c->out_at)
        conn_done(c);
}

void hconn_stream_begin(hconn *c, int status, const char *reason)
{
    c->chunked_out = 0;
    make_head(c, &g_head, status, reason, 1, 0);
    c->state = C_STREAM;
    if (!c->chunked_out) /* HTTP/1.0: the end of the stream is the end of the reply */
        c->close_after = 1;
    struct iovec v = {g_head.data, g_head.len};
    send_iov(c, &v, 1);
}

void hconn_stream_write(hconn *c, const char *data, size_t len)
{
    if (c->dead || !len || c->head_method)
        return;
    char size[24];
    int n = snprintf(size, sizeof size, "%zx\r\n", len);
    struct iovec v[3] = {{size, (size_t)n}, {(void *)data, len}, {(void *)"\r\n", 2}};
    if (c->chunked_out)
        send_iov(c, v, 3);
    else
        send_iov(c, v + 1, 1);
}

void hconn_stream_end(hconn *c)
{
    c->on_close = NULL;
    if (c->dead)
        return;
    c->state = C_WRITE;
    if (c->chunked_out && !c->head_method) {
        struct iovec v = {(void *)"0\r\n\r\n", 5};
        if (send_iov(c, &v, 1) < 0)
            return;
    }
    if (c->out.len == c->out_at)
        conn_done(c);
}

void hconn_on_close(hconn *c, void (*cb)(void *arg), void *arg)
{
    c->on_close = cb;
    c->close_arg = arg;
}

void *hconn_user(const hconn *c)
{
    return c->user;
}

void hconn_set_user(hconn *c, void *user, void (*user_free)(void *user))
{
    conn_user_free(c);
    c->user = user;
    c->user_free = user_free;
}

/* ---- the request's accessors ---- */

int hconn_refusal(const hconn *c, int *status, const char **reason)
{
    if (!c->refusal_status)
        return 0;
    *status = c->refusal_status;
    *reason = c->refusal_reason;
    return 1;
}

const char *hconn_method(const hconn *c)
{
    return c->in->head.method;
}

const char *hconn_path(const hconn *c)
{
    return c->in->head.path;
}

const char *hconn_query(const hconn *c)
{
    return c->in->head.query;
}

int hconn_http11(const hconn *c)
{
    return c->in->head.http11;
}

const char *hconn_header(const hconn *c, const char *name)
{
    return hsrv_head_find(&c->in->head, name);
}

const char *hconn_body(const hconn *c, size_t *len)
{
    *len = c->body_n;
    return c->body_n ? c->body : "";
}

const struct sockaddr *hconn_peer(const hconn *c)
{
    return (const struct sockaddr *)&c->peer;
}

int hconn_fd(const hconn *c)
{
    return c->fd;
}

/* ---- accepting ---- */

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

static void refuse_at_emfile(hsrv *s)
{
    /* The connection waiting in the backlog would make the listener fire again at
     * once (a busy loop): accept it with the reserve descriptor, answer 503, close. */
    if (s->spare_fd >= 0)
        close(s->spare_fd);
    s->spare_fd = -1;
    int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
        s->conns_refused++;
    }
    s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || s->spare_fd < 0) {
        /* nothing to refuse with: pause accepting for a second instead of spinning */
        event_del(s->lev);
        struct timeval sec = {1, 0};
        event_add(s->resume, &sec);
    }
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    hsrv *s = arg;
    (void)fd;
    (void)what;
    if (s->lev)
        event_add(s->lev, NULL);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    hsrv *s = arg;
    (void)what;
    for (int k = 0; k < 64; k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                refuse_at_emfile(s);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                       errno != ECONNABORTED) {
                log_line *ln = log_begin(LOG_WARN, "accept failed");
                log_str(ln, "error", strerror(errno));
                log_end(ln);
            }
            return;
        }
        hconn *c = xcalloc(1, sizeof *c);
        c->s = s;
        c->fd = fd;
        memcpy(&c->peer, &ss, sl < sizeof ss ? sl : sizeof ss);
        c->window_start = now_mono_ms();
        c->last_active = s->tick;
        c->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, on_read, c);
        if (++s->live > s->peak)
            s->peak = s->live;
        if (s->max_conns && s->live > s->max_conns) {
            c->refusal_status = 503;
            c->refusal_reason = "connection limit reached (limits.max_connections)";
            s->conns_refused++;
        }
        c->next = s->conns;
        if (c->next)
            c->next->prev = c;
        s->conns = c;
        event_add(c->rev, NULL);
    }
}

/* ---- the sweep ---- */

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    hsrv *s = arg;
    (void)fd;
    (void)what;
    int64_t now = now_mono_ms();
    s->tick++;
    for (hconn *c = s->conns, *next; c; c = next) {
        next = c->next;
        int reading = c->state == C_READ;
        if (reading && s->idle_s > 0 && s->tick - c->last_active > (uint64_t)s->idle_s) {
            conn_close(c, 1); /* idle keep-alive connection */
            continue;
        }
        if (c->out.len > c->out_at && s->idle_s > 0 &&
            s->tick - c->last_active > (uint64_t)s->idle_s) {
            conn_close(c, 1); /* the client does not take our reply */
            continue;
        }
        if (now - c->window_start < s->window_ms)
            continue;
        if (!c->served && reading) {
            /* a whole window spent reading without a complete request */
            s->deadline_closed++;
            conn_close(c, 1);
            continue;
        }
        c->served = 0;
        c->window_start = now;
    }
#ifdef __GLIBC__
    /* Thousands of connections closing leave their buffers in free heap that glibc
     * keeps; give it back once the count has dropped by a good margin (a trim of a
     * large heap takes a few milliseconds, so not on every small dip), and only at a
     * sweep with no connection closed since the last one: the burst is over. */
    if (s->peak >= s->live + 1024)
        s->trim_due = 1;
    if (s->trim_due && !s->closed_since_sweep) {
        while (g_in_nkept > 0)
            free(g_in_kept[--g_in_nkept]);
        malloc_trim(0);
        s->trim_due = 0;
        s->peak = s->live;
        s->trims++;
    }
#endif
    s->closed_since_sweep = 0;
}

/* ---- the server ---- */

hsrv *hsrv_new(struct event_base *base, const hsrv_limits *lim, hsrv_request_cb cb, void *arg,
               const char *default_type)
{
    hsrv *s = xcalloc(1, sizeof *s);
    s->base = base;
    s->cb = cb;
    s->arg = arg;
    s->default_type = default_type;
    s->window_ms = (int64_t)(lim->deadline_s > 0 ? lim->deadline_s : 30) * 1000;
    s->idle_s = lim->idle_s;
    s->max_head = lim->max_head ? lim->max_head : 16384;
    s->max_body = lim->max_body;
    s->max_conns = lim->max_conns;
    s->lfd = -1;
    s->spare_fd = -1;
    s->sweep = event_new(base, -1, EV_PERSIST, on_sweep, s);
    struct timeval tick = {1, 0};
    event_add(s->sweep, &tick);
    return s;
}

void hsrv_listen(hsrv *s, int fd)
{
    s->lfd = fd;
    s->lev = event_new(s->base, fd, EV_READ | EV_PERSIST, on_accept, s);
    s->resume = evtimer_new(s->base, on_resume, s);
    s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    event_add(s->lev, NULL);
}

int hsrv_listen_fd(const hsrv *s)
{
    return s ? s->lfd : -1;
}

void hsrv_stop_accepting(hsrv *s)
{
    if (!s || s->lfd < 0)
        return;
    event_free(s->lev);
    s->lev = NULL;
    event_free(s->resume);
    s->resume = NULL;
    close(s->lfd);
    s->lfd = -1;
    if (s->spare_fd >= 0)
        close(s->spare_fd);
    s->spare_fd = -1;
}

void hsrv_free(hsrv *s)
{
    if (!s)
        return;
    hsrv_stop_accepting(s);
    while (s->conns)
        conn_close(s->conns, 1);
    event_free(s->sweep);
    free(s);
    while (g_in_nkept > 0)
        free(g_in_kept[--g_in_nkept]);
    buf_free(&g_head);
}

uint64_t hsrv_framing_refused(const hsrv *s)
{
    return s ? s->framing_refused : 0;
}

uint64_t hsrv_conns_refused(const hsrv *s)
{
    return s ? s->conns_refused : 0;
}

uint64_t hsrv_deadline_closed(const hsrv *s)
{
    return s ? s->deadline_closed : 0;
}

uint64_t hsrv_open(const hsrv *s)
{
    return s ? s->live : 0;
}

uint64_t hsrv_trims(const hsrv *s)
{
    return s ? s->trims : 0;
}

void hsrv_write_metrics(const hsrv *pub, const hsrv *admin, buf *out)
{
    metrics_write_gauge(out, "cl_connections_open",
                        "Client connections of the public listener open now.",
                        (double)hsrv_open(pub));
    metrics_write_counter(out, "cl_connections_deadline_closed_total",
                          "Connections shut down for reading a whole window without a request.",
                          (double)hsrv_deadline_closed(pub));
    metrics_write_counter(
        out, "cl_requests_framing_refused_total",
        "Requests refused by the framing check (answered with an error, connection closed).",
        (double)(hsrv_framing_refused(pub) + hsrv_framing_refused(admin)));
    metrics_write_counter(
        out, "cl_connections_refused_total",
        "Connections refused at limits.max_connections or for want of file descriptors.",
        (double)hsrv_conns_refused(pub));
    metrics_write_counter(out, "cl_heap_trims_total",
                          "Times free heap went back to the kernel after many connections closed.",
                          (double)hsrv_trims(pub));
}

/* ---- Date ---- */

static char *put2(char *p, int v, char after)
{
    p[0] = (char)('0' + v / 10 % 10);
    p[1] = (char)('0' + v % 10);
    p[2] = after;
    return p + 3;
}

const char *hsrv_date_now(void)
{
    static const char days[] = "SunMonTueWedThuFriSat";
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    static time_t at = (time_t)-1;
    static char text[32];
    time_t t = time(NULL);
    struct tm tm;
    if (t == at)
        return text;
    int year = 1900 + (gmtime_r(&t, &tm) ? tm.tm_year : -1900);
    if (year < 1000 || year > 9999)
        return NULL;
    char *p = text;
    memcpy(p, days + 3 * tm.tm_wday, 3);
    memcpy(p + 3, ", ", 2);
    p = put2(p + 5, tm.tm_mday, ' ');
    memcpy(p, months + 3 * tm.tm_mon, 3);
    p[3] = ' ';
    p = put2(p + 4, year / 100, '\0') - 1;
    p = put2(p, year % 100, ' ');
    p = put2(p, tm.tm_hour, ':');
    p = put2(p, tm.tm_min, ':');
    p = put2(p, tm.tm_sec, ' ');
    memcpy(p, "GMT", 4);
    at = t;
    return text;
}
