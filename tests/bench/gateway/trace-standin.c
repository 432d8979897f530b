/* trace-standin: the canned Trace Core of the gateway benchmarks, a tiny HTTP/1.1
 * responder in one thread (epoll, level-triggered). Bench-only: not part of the product.
 *
 * Usage: trace-standin PORT TC_DIR   (listens on 127.0.0.1:PORT; runs until killed)
 *
 * TC_DIR holds the simulator's answers to one managed call (gateway/trace-capture.mjs).
 * Routes under /api/agent-observability/v1, whatever the ids in the path:
 *   GET  /capture-policy                                   TC_DIR/policy.json, read per request
 *   GET  /health                                           TC_DIR/health.json, read per request
 *   GET  /interactions/{id}                                interaction.json  \
 *   POST /conversations/{c}/interactions/{i}/operations:ensure  ensure.json    > read once at
 *   POST /operations/{op}/attempts/{n}:complete            complete.json     /  start
 * Anything else: 404 with a small JSON error envelope (405 for a known path with
 * another method). Every answer is 200 (or that error) with Content-Type
 * application/json and Content-Length.
 *
 * HTTP: keep-alive; request bodies framed by Content-Length only, read and discarded
 * (Transfer-Encoding -> 400 and close); "Connection: close" honoured (HTTP/1.0 closes
 * unless it asks for keep-alive); a malformed request -> 400 and close; a request over
 * MAX_REQUEST bytes -> 413 and close. Pipelining: each read answers every complete
 * request in the connection's input, in order, with one send() of all their answers;
 * what the socket does not take is sent on EPOLLOUT, and the connection is not read
 * while output waits. A request split over reads waits for its rest. After the last
 * answer of a closing connection the write side is shut and the input drained (up to
 * LINGER_MS) so that a close does not reset the answer away. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_REQUEST (1024u * 1024u) /* head + body of one request */
#define READ_CHUNK 16384u           /* free input space offered to each recv */
#define KEEP_BUF 65536u             /* idle buffers above this are released */
#define LINGER_MS 2000              /* a closing connection's input is drained this long */
#define PREFIX "/api/agent-observability/v1"

typedef struct {
    char *p;
    size_t len, cap;
} buf;

typedef struct {
    int fd;
    buf in, out;
    size_t out_off;    /* bytes of out already sent */
    int closing;       /* close once out is sent */
    int keep_alive_10; /* the request being answered is HTTP/1.0 asking for keep-alive */
    long linger_till;  /* draining before close (monotonic ms), 0 when not */
    uint32_t interest; /* the epoll events asked for */
} conn;

typedef struct {
    const char *method;
    const char *pattern; /* '*' one path segment, '#' digits, anything else itself */
    const char *file;    /* the answer's file in TC_DIR */
    int per_request;     /* read on each request (else loaded once at start) */
} route;

static const route routes[] = {
    {"GET", PREFIX "/capture-policy", "policy.json", 1},
    {"GET", PREFIX "/health", "health.json", 1},
    {"GET", PREFIX "/interactions/*", "interaction.json", 0},
    {"POST", PREFIX "/conversations/*/interactions/*/operations:ensure", "ensure.json", 0},
    {"POST", PREFIX "/operations/*/attempts/#:complete", "complete.json", 0},
};
#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))
static buf bodies[N_ROUTES];    /* the answers loaded at start */
static buf responses[N_ROUTES]; /* each as a whole keep-alive response */

static const char *tc_dir;
static int epfd;
static conn **conns; /* by fd */
static size_t n_conns_cap;
static int n_lingering;
static int spare_fd = -1; /* given up to accept and drop a connection at the fd limit */

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Makes room for n more bytes. */
static void buf_reserve(buf *b, size_t n)
{
    if (b->cap - b->len >= n)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < n)
        cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p)
        die("realloc");
    b->cap = cap;
}

static void buf_add(buf *b, const void *p, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void buf_release(buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* Appends the file's bytes to b; -1 when it cannot be read. */
static int read_file(const char *name, buf *b)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", tc_dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t start = b->len;
    for (;;) {
        buf_reserve(b, 4096);
        ssize_t n = read(fd, b->p + b->len, b->cap - b->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            close(fd);
            b->len = start;
            return -1;
        }
        if (n == 0)
            break;
        b->len += (size_t)n;
    }
    close(fd);
    return 0;
}

/* ---- answers ---- */

/* One response: status line, headers, then body unless the request was HEAD. */
static void respond(conn *c, int status, const char *body, size_t len, int head_only)
{
    const char *conn_hdr = c->closing         ? "Connection: close\r\n"
                           : c->keep_alive_10 ? "Connection: keep-alive\r\n"
                                              : "";
    const char *reason = status == 200   ? "OK"
                         : status == 400 ? "Bad Request"
                         : status == 404 ? "Not Found"
                         : status == 405 ? "Method Not Allowed"
                         : status == 413 ? "Content Too Large"
                                         : "Internal Server Error";
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: "
                     "%zu\r\n%s\r\n",
                     status, reason, len, conn_hdr);
    buf_add(&c->out, head, (size_t)n);
    if (!head_only)
        buf_add(&c->out, body, len);
}

static void respond_error(conn *c, int status, const char *code, const char *message, int head_only)
{
    char body[256];
    int n = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code,
                     message);
    respond(c, status, body, (size_t)n, head_only);
}

/* The path matches the route's pattern: '*' one or more bytes other than '/', '#' one
 * or more digits, any other byte itself. */
static int path_matches(const char *pat, const char *p, const char *end)
{
    for (; *pat; pat++) {
        if (*pat == '*' || *pat == '#') {
            const char *s = p;
            while (p < end && (*pat == '*' ? *p != '/' : (*p >= '0' && *p <= '9')))
                p++;
            if (p == s)
                return 0;
        } else if (p == end || *p++ != *pat) {
            return 0;
        }
    }
    return p == end;
}

static void answer(conn *c, const char *method, size_t mlen, const char *path, size_t plen)
{
    int head_only = mlen == 4 && !memcmp(method, "HEAD", 4);
    int known_path = 0;
    for (size_t i = 0; i < N_ROUTES; i++) {
        const route *r = &routes[i];
        if (!path_matches(r->pattern, path, path + plen))
            continue;
        known_path = 1;
        size_t rl = strlen(r->method);
        if (!(mlen == rl && !memcmp(method, r->method, rl)) &&
            !(head_only && !strcmp(r->method, "GET")))
            continue;
        if (!r->per_request && !c->closing && !c->keep_alive_10 && !head_only) {
            buf_add(&c->out, responses[i].p, responses[i].len); /* the usual case */
            return;
        }
        if (!r->per_request) {
            respond(c, 200, bodies[i].p, bodies[i].len, head_only);
            return;
        }
        buf file = {0};
        if (read_file(r->file, &file) < 0) {
            respond_error(c, 500, "internal", "answer file unreadable", head_only);
        } else {
            respond(c, 200, file.p, file.len, head_only);
        }
        buf_release(&file);
        return;
    }
    if (known_path) {
        respond_error(c, 405, "method_not_allowed", "method not allowed here", head_only);
    } else {
        respond_error(c, 404, "not_found", "no such route on the canned Trace Core", head_only);
    }
}

/* ---- request parsing ---- */

static int ieq(const char *a, size_t n, const char *lit)
{
    return strlen(lit) == n && !strncasecmp(a, lit, n);
}

/* The comma-separated list of tokens holds tok (case-insensitive). */
static int has_token(const char *v, const char *end, const char *tok)
{
    while (v < end) {
        while (v < end && (*v == ' ' || *v == '\t' || *v == ','))
            v++;
        const char *s = v;
        while (v < end && *v != ',')
            v++;
        const char *e = v;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (ieq(s, (size_t)(e - s), tok))
            return 1;
    }
    return 0;
}

typedef struct {
    const char *method, *path;
    size_t mlen, plen;
    size_t content_length;
    int close, keep_alive, http10;
} request;

static int is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* Parses the head h[0..n) (without its final CRLF CRLF): 0, or the status to refuse it
 * with (400). */
static int parse_head(const char *h, size_t n, request *rq)
{
    const char *end = h + n, *p = h;
    memset(rq, 0, sizeof(*rq));
    rq->method = p;
    while (p < end && is_tchar((unsigned char)*p))
        p++;
    rq->mlen = (size_t)(p - rq->method);
    if (!rq->mlen || p == end || *p++ != ' ')
        return 400;
    rq->path = p;
    while (p < end && (unsigned char)*p > ' ' && *p != 0x7f)
        p++;
    rq->plen = (size_t)(p - rq->path);
    if (!rq->plen || *rq->path != '/' || p == end || *p++ != ' ')
        return 400;
    /* "HTTP/1.0" or "HTTP/1.1", then the end of the head or CRLF and the headers */
    if (end - p < 8 || memcmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1'))
        return 400;
    rq->http10 = p[7] == '0';
    const char *q = memchr(rq->path, '?', rq->plen);
    if (q)
        rq->plen = (size_t)(q - rq->path);
    p += 8;
    int seen_length = 0;
    while (p < end) {
        if (end - p < 2 || memcmp(p, "\r\n", 2))
            return 400;
        p += 2;
        const char *line = p, *eol = memchr(p, '\r', (size_t)(end - p));
        if (!eol)
            eol = end;
        const char *name = line;
        while (p < eol && is_tchar((unsigned char)*p))
            p++;
        size_t nlen = (size_t)(p - name);
        if (!nlen || p == eol || *p != ':')
            return 400;
        const char *v = p + 1;
        for (const char *s = v; s < eol; s++)
            if ((unsigned char)*s < ' ' && *s != '\t')
                return 400; /* a bare LF or another control byte */
        while (v < eol && (*v == ' ' || *v == '\t'))
            v++;
        const char *ve = eol;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        if (ieq(name, nlen, "content-length")) {
            size_t cl = 0;
            if (v == ve)
                return 400;
            for (const char *s = v; s < ve; s++) {
                if (*s < '0' || *s > '9')
                    return 400;
                cl = cl > MAX_REQUEST ? cl : cl * 10 + (size_t)(*s - '0');
            }
            if (seen_length && cl != rq->content_length)
                return 400;
            seen_length = 1;
            rq->content_length = cl;
        } else if (ieq(name, nlen, "transfer-encoding")) {
            return 400; /* only Content-Length frames a body here */
        } else if (ieq(name, nlen, "connection")) {
            rq->close |= has_token(v, ve, "close");
            rq->keep_alive |= has_token(v, ve, "keep-alive");
        }
        p = eol;
    }
    return 0;
}

/* ---- connections ---- */

static void set_interest(conn *c, uint32_t events)
{
    if (c->interest == events)
        return;
    c->interest = events;
    struct epoll_event ev = {.events = events, .data.fd = c->fd};
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        die("epoll_ctl");
}

static void conn_free(conn *c)
{
    if (c->linger_till)
        n_lingering--;
    close(c->fd); /* leaves the epoll set with it */
    conns[c->fd] = NULL;
    buf_release(&c->in);
    buf_release(&c->out);
    free(c);
}

/* The last answer is out: shut the write side and drain the input before closing. */
static void conn_linger(conn *c)
{
    if (shutdown(c->fd, SHUT_WR) < 0) {
        conn_free(c);
        return;
    }
    c->linger_till = now_ms() + LINGER_MS;
    n_lingering++;
    c->in.len = 0;
    set_interest(c, EPOLLIN);
}

/* Sends what waits in out (one send); 0, or -1 when the connection was freed. */
static int conn_flush(conn *c)
{
    if (c->out_off < c->out.len) {
        ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            conn_free(c);
            return -1;
        }
        if (n > 0)
            c->out_off += (size_t)n;
    }
    if (c->out_off < c->out.len) {
        set_interest(c, EPOLLOUT);
        return 0;
    }
    c->out.len = c->out_off = 0;
    if (c->out.cap > KEEP_BUF)
        buf_release(&c->out);
    if (c->closing) {
        conn_linger(c);
        return -1;
    }
    return 0;
}

/* Answers every complete request at the front of the input, in order; leaves an
 * incomplete one (and stops after one that closes the connection). */
static void conn_answer_all(conn *c)
{
    size_t off = 0;
    while (!c->closing && off < c->in.len) {
        const char *h = c->in.p + off;
        size_t avail = c->in.len - off;
        const char *e = memmem(h, avail, "\r\n\r\n", 4);
        if (!e) {
            if (avail >= MAX_REQUEST) {
                c->closing = 1;
                respond_error(c, 413, "too_large", "request head too large", 0);
            }
            break;
        }
        size_t head_len = (size_t)(e - h) + 4;
        request rq;
        int bad = parse_head(h, head_len - 4, &rq);
        if (bad) {
            c->closing = 1;
            respond_error(c, bad, "bad_request", "malformed or unsupported request", 0);
            break;
        }
        if (head_len > MAX_REQUEST || rq.content_length > MAX_REQUEST - head_len) {
            c->closing = 1;
            respond_error(c, 413, "too_large", "request too large", 0);
            break;
        }
        if (avail < head_len + rq.content_length)
            break; /* its body is still on its way */
        c->closing = rq.close || (rq.http10 && !rq.keep_alive);
        c->keep_alive_10 = rq.http10 && !c->closing;
        answer(c, rq.method, rq.mlen, rq.path, rq.plen);
        off += head_len + rq.content_length;
    }
    if (off) {
        memmove(c->in.p, c->in.p + off, c->in.len - off);
        c->in.len -= off;
    }
}

static void conn_readable(conn *c)
{
    if (c->linger_till) {
        char sink[16384];
        ssize_t n = recv(c->fd, sink, sizeof(sink), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            conn_free(c);
        return;
    }
    buf_reserve(&c->in, READ_CHUNK);
    ssize_t n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        conn_free(c);
        return;
    }
    c->in.len += (size_t)n;
    conn_answer_all(c);
    if (conn_flush(c) < 0)
        return;
    if (c->in.len == 0 && c->in.cap > KEEP_BUF)
        buf_release(&c->in);
}

static void conn_writable(conn *c)
{
    if (conn_flush(c) < 0 || c->out_off < c->out.len)
        return;
    set_interest(c, EPOLLIN);
}

static void conn_new(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if ((size_t)fd >= n_conns_cap) {
        size_t cap = n_conns_cap ? n_conns_cap : 1024;
        while (cap <= (size_t)fd)
            cap *= 2;
        conns = realloc(conns, cap * sizeof(*conns));
        if (!conns)
            die("realloc");
        memset(conns + n_conns_cap, 0, (cap - n_conns_cap) * sizeof(*conns));
        n_conns_cap = cap;
    }
    conn *c = calloc(1, sizeof(*c));
    if (!c)
        die("calloc");
    c->fd = fd;
    c->interest = EPOLLIN;
    conns[fd] = c;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        die("epoll_ctl");
}

static void accept_all(int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            conn_new(fd);
            continue;
        }
        if ((errno == EMFILE || errno == ENFILE) && spare_fd >= 0) {
            /* at the fd limit: accept the connection and close it at once, rather
             * than leave it pending (the listener would stay readable) */
            close(spare_fd);
            fd = accept(lfd, NULL, NULL);
            if (fd >= 0)
                close(fd);
            spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            fprintf(stderr, "trace-standin: out of file descriptors, a connection dropped\n");
            continue;
        }
        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
            perror("accept4");
        return;
    }
}

/* Closes the lingering connections whose time is up. */
static void sweep_lingering(void)
{
    long now = now_ms();
    for (size_t fd = 0; fd < n_conns_cap && n_lingering; fd++)
        if (conns[fd] && conns[fd]->linger_till && conns[fd]->linger_till <= now)
            conn_free(conns[fd]);
}

/* ---- start ---- */

static void load_answers(void)
{
    for (size_t i = 0; i < N_ROUTES; i++) {
        buf *b = &bodies[i];
        if (routes[i].per_request)
            continue;
        if (read_file(routes[i].file, b) < 0) {
            fprintf(stderr, "trace-standin: cannot read %s/%s: %s\n", tc_dir, routes[i].file,
                    strerror(errno));
            exit(1);
        }
        while (b->len && strchr(" \t\r\n", b->p[b->len - 1]))
            b->len--; /* as captured, without a trailing newline */
        conn tmp = {0};
        respond(&tmp, 200, b->p, b->len, 0);
        responses[i] = tmp.out;
    }
}

static int listen_on(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
        die("bind");
    if (listen(fd, 4096) < 0)
        die("listen");
    return fd;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PORT TC_DIR\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    if (port <= 0 || port > 65535) {
        fprintf(stderr, "trace-standin: bad port %s\n", argv[1]);
        return 2;
    }
    tc_dir = argv[2];
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    load_answers();
    int lfd = listen_on(port);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        die("epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev) < 0)
        die("epoll_ctl");
    spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    long last_sweep = 0;
    for (;;) {
        struct epoll_event evs[256];
        int n = epoll_wait(epfd, evs, 256, n_lingering ? 500 : -1);
        if (n < 0 && errno != EINTR)
            die("epoll_wait");
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == lfd) {
                accept_all(lfd);
                continue;
            }
            conn *c = (size_t)fd < n_conns_cap ? conns[fd] : NULL;
            if (!c)
                continue; /* freed earlier in this batch */
            if (evs[i].events & EPOLLOUT)
                conn_writable(c);
            else if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                conn_readable(c);
        }
        if (n_lingering && now_ms() - last_sweep >= 500) {
            sweep_lingering();
            last_sweep = now_ms();
        }
    }
}
