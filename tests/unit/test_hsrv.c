/* Unit tests of the HTTP/1.1 server (hsrv.c): the head parser (request line, header
 * spans, lookup), chunked decoding, and a server on a loopback socket: a chunked
 * request split byte by byte, pipelined requests answered in order behind a slow one,
 * the limits (header block, header count, body), HTTP/1.0 and HEAD replies, and the
 * close callback of a request whose client hangs up. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "hsrv.h"
#include "util.h"

static void test_parse(void)
{
    char a[] = "POST /a/b?x=1&y HTTP/1.1\r\nHost: h\r\nX-Trim:   v a l  \t\r\n"
               "Content-Length: 3\r\n\r\n";
    hsrv_head h;
    CHECK(hsrv_parse_head(a, strlen(a), &h) == 0);
    CHECK_STR(h.method, "POST");
    CHECK_STR(h.path, "/a/b");
    CHECK_STR(h.query, "x=1&y");
    CHECK(h.http11 && !h.absolute && h.n_headers == 3);
    CHECK_STR(hsrv_head_find(&h, "x-trim"), "v a l");
    CHECK_STR(hsrv_head_find(&h, "HOST"), "h");
    CHECK_STR(hsrv_head_find(&h, "content-length"), "3");
    CHECK(hsrv_head_find(&h, "Hos") == NULL && hsrv_head_find(&h, "Origin") == NULL);
    CHECK(hsrv_head_connection(&h) == 0);
    CHECK(h.headers[1].name_len == 6 && !memcmp(h.headers[1].name, "X-Trim", 6));
    /* Connection: a list in any of its fields; close and keep-alive as tokens only */
    char ck[] = "GET / HTTP/1.1\r\nUser-Agent: close\r\nconnection: Keep-Alive\r\n\r\n";
    CHECK(hsrv_parse_head(ck, strlen(ck), &h) == 0);
    CHECK(hsrv_head_connection(&h) == HSRV_CONN_KEEP_ALIVE);
    char cl[] = "GET / HTTP/1.1\r\nConnection: x-keep-alive, upgrade\r\n"
                "CONNECTION:  te ,\tCLOSE \r\nConnection: keep-alive,\r\n\r\n";
    CHECK(hsrv_parse_head(cl, strlen(cl), &h) == 0);
    CHECK(hsrv_head_connection(&h) == (HSRV_CONN_CLOSE | HSRV_CONN_KEEP_ALIVE));
    char cm[] = "GET / HTTP/1.1\r\nConnection: closed, keep-alives,,\r\n\r\n";
    CHECK(hsrv_parse_head(cm, strlen(cm), &h) == 0);
    CHECK(hsrv_head_connection(&h) == 0);
    /* names of 8 and more bytes: case folded over each eight-byte word and the tail;
     * bytes 0x20 apart that are not letters stay different */
    char f[] = "GET / HTTP/1.1\r\nX-Forwarded-Proto: p\r\nBkn-Request-Id: r\r\n"
               "A@[^b-9!~: s\r\nAbcdefgh: w\r\nA\xe1"
               "cdefgh: x\r\n\r\n";
    CHECK(hsrv_parse_head(f, strlen(f), &h) == 0 && h.n_headers == 5);
    CHECK_STR(hsrv_head_find(&h, "x-forwarded-proto"), "p");
    CHECK_STR(hsrv_head_find(&h, "X-FORWARDED-PROTO"), "p");
    CHECK(hsrv_head_find(&h, "X-Forwarded-Prota") == NULL);
    CHECK(hsrv_head_find(&h, "X-Forwardxd-Proto") == NULL);
    CHECK_STR(hsrv_head_find(&h, "bkn-request-id"), "r");
    CHECK_STR(hsrv_head_find(&h, "a@[^B-9!~"), "s");
    CHECK(hsrv_head_find(&h, "a`[^b-9!~") == NULL);
    CHECK(hsrv_head_find(&h, "a@{^b-9!~") == NULL);
    CHECK(hsrv_head_find(&h, "a@[~b-9!~") == NULL);
    CHECK(hsrv_head_find(&h, "a@[^b\r9!~") == NULL);
    CHECK(hsrv_head_find(&h, "a@[^b-\x19!~") == NULL);
    CHECK_STR(hsrv_head_find(&h, "ABCDEFGH"), "w");
    CHECK(hsrv_head_find(&h, "A\xc2"
                             "CDEFGH") == NULL);
    CHECK_STR(hsrv_head_find(&h, "a\xe1"
                                 "CDEFGH"),
              "x");
    CHECK(hsrv_head_find(&h, "a\xc1"
                             "cdefgh") == NULL);

    char b[] = "GET http://h:80/p?q HTTP/1.0\n\n";
    CHECK(hsrv_parse_head(b, strlen(b), &h) == 0);
    CHECK_STR(h.path, "/p");
    CHECK_STR(h.query, "q");
    CHECK(h.absolute && !h.http11 && h.n_headers == 0);
    char c[] = "GET http://h HTTP/1.1\r\nHost: h\r\n\r\n";
    CHECK(hsrv_parse_head(c, strlen(c), &h) == 0);
    CHECK_STR(h.path, "");
    CHECK(h.query == NULL);
    char d[] = "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n";
    CHECK(hsrv_parse_head(d, strlen(d), &h) == 0);
    CHECK_STR(h.path, "*");
    char e[] = "GET /x? HTTP/1.1\r\nA:\r\nB: 2\r\n\r\n";
    CHECK(hsrv_parse_head(e, strlen(e), &h) == 0);
    CHECK_STR(h.query, "");
    CHECK_STR(hsrv_head_find(&h, "a"), "");
    CHECK_STR(hsrv_head_find(&h, "b"), "2");

    /* HSRV_MAX_HEADERS fields fit, one more does not */
    buf m = BUF_INIT;
    buf_puts(&m, "GET / HTTP/1.1\r\n");
    for (int i = 0; i < HSRV_MAX_HEADERS; i++)
        buf_printf(&m, "H%d: %d\r\n", i, i);
    buf_puts(&m, "\r\n");
    char *copy = strdup(m.data);
    CHECK(hsrv_parse_head(copy, strlen(copy), &h) == 0 && h.n_headers == HSRV_MAX_HEADERS);
    CHECK_STR(hsrv_head_find(&h, "h63"), "63");
    free(copy);
    m.len -= 2;
    buf_puts(&m, "Extra: 1\r\n\r\n");
    CHECK(hsrv_parse_head(m.data, m.len, &h) == -1);
    buf_free(&m);
}

static void test_dechunk(void)
{
    char a[] = "5\r\nhello\r\n1\r\n \r\nA\nabcdefghij\n0\r\n\r\n";
    size_t n = hsrv_dechunk(a, strlen(a));
    CHECK(n == 16 && !memcmp(a, "hello abcdefghij", 16));
    char b[] = "0\r\n\r\n";
    CHECK(hsrv_dechunk(b, strlen(b)) == 0);
}

/* ---- a server on a loopback socket ---- */

static struct event_base *g_base;
static int g_closed_cbs;        /* close callbacks run */
static struct event *g_slow_ev; /* the one slow request's timer */

static void on_gone(void *arg)
{
    (void)arg;
    g_closed_cbs++;
    event_free(g_slow_ev);
    g_slow_ev = NULL;
}

static void slow_reply(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    event_free(g_slow_ev);
    g_slow_ev = NULL;
    hconn_reply(arg, 200, "OK", "slow", 4);
}

static int g_users_freed; /* connection values freed */

static void user_gone(void *user)
{
    g_users_freed++;
    free(user);
}

/* Echoes "METHOD path ?query |body" (or the refusal's reason); "/slow" answers 50 ms
 * later and watches for a hang-up meanwhile; "/count" answers how many requests of its
 * connection asked for it (a value kept with the connection). */
static void on_request(hconn *c, void *arg)
{
    int status;
    const char *reason;
    (void)arg;
    if (hconn_refusal(c, &status, &reason)) {
        hconn_add_header(c, "Connection", "close");
        hconn_reply(c, status, "Refused", reason, strlen(reason));
        return;
    }
    if (!strcmp(hconn_path(c), "/slow")) {
        struct timeval tv = {0, 50000};
        hconn_on_close(c, on_gone, c);
        g_slow_ev = evtimer_new(g_base, slow_reply, c);
        evtimer_add(g_slow_ev, &tv);
        return;
    }
    if (!strcmp(hconn_path(c), "/count")) {
        int *seen = hconn_user(c);
        if (!seen) {
            seen = xcalloc(1, sizeof *seen);
            hconn_set_user(c, seen, user_gone);
        }
        char text[32];
        int len = snprintf(text, sizeof text, "count=%d", ++*seen);
        hconn_reply(c, 200, "OK", text, (size_t)len);
        return;
    }
    size_t n;
    const char *body = hconn_body(c, &n);
    buf b = BUF_INIT;
    buf_printf(&b, "%s %s ?%s |%.*s", hconn_method(c), hconn_path(c),
               hconn_query(c) ? hconn_query(c) : "-", (int)n, body);
    hconn_add_header(c, "X-Echo", "1");
    hconn_reply(c, 200, "OK", b.data, b.len);
    buf_free(&b);
}

static int listen_on(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 16) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) < 0)
        return -1;
    *port = ntohs(sa.sin_port);
    return fd;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        return -1;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* Runs the loop for about ms, reading what the server sends into out; 1 when the
 * server closed the connection. */
static int pump(int fd, buf *out, int ms)
{
    for (int i = 0; i < ms; i++) {
        event_base_loop(g_base, EVLOOP_NONBLOCK);
        char tmp[4096];
        ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n > 0)
            buf_append(out, tmp, (size_t)n);
        else if (n == 0)
            return 1;
        else if (errno != EAGAIN)
            return 1;
        usleep(1000);
    }
    return 0;
}

static int count(const buf *b, const char *what)
{
    int n = 0;
    const char *p = b->data;
    while (p && (p = strstr(p, what)) != NULL)
        n++, p++;
    return n;
}

/* Sends req (in pieces of `piece` bytes, 0: at once); returns the answer. */
static int exchange(int port, const char *req, size_t piece, buf *out, int ms)
{
    int fd = connect_to(port);
    size_t len = strlen(req);
    buf_reset(out);
    for (size_t at = 0; at < len;) {
        size_t n = piece && len - at > piece ? piece : len - at;
        if (send(fd, req + at, n, MSG_NOSIGNAL) != (ssize_t)n)
            break;
        at += n;
        pump(fd, out, 1);
    }
    int closed = pump(fd, out, ms);
    buf_putc(out, '\0');
    out->len--;
    close(fd);
    return closed;
}

static void test_server(void)
{
    int port = 0;
    int lfd = listen_on(&port);
    CHECK(lfd >= 0);
    g_base = event_base_new();
    hsrv_limits lim = {30, 30, 512, 64, 0};
    hsrv *s = hsrv_new(g_base, &lim, on_request, NULL, "text/plain");
    hsrv_listen(s, lfd);
    buf out = BUF_INIT;

    /* a chunked body, split byte by byte, decoded */
    exchange(port,
             "POST /c?k=v HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
             "Connection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
             1, &out, 100);
    CHECK(strstr(out.data, "HTTP/1.1 200 OK\r\n") == out.data);
    CHECK(strstr(out.data, "\r\n\r\nPOST /c ?k=v |hello world") != NULL);
    CHECK(strstr(out.data, "X-Echo: 1\r\n") && strstr(out.data, "Content-Length: 25\r\n") &&
          strstr(out.data, "Content-Type: text/plain\r\n") &&
          strstr(out.data, "Connection: close\r\n"));

    /* pipelined, in one packet, behind a slow request: answered in order */
    int closed = exchange(port,
                          "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n"
                          "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
                          "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n"
                          "Connection: close\r\n\r\nhi",
                          0, &out, 300);
    CHECK(closed && count(&out, "HTTP/1.1 200") == 3);
    const char *p1 = strstr(out.data, "slow"), *p2 = strstr(out.data, "GET /a ?- |"),
               *p3 = strstr(out.data, "POST /b ?- |hi");
    CHECK(p1 && p2 && p3 && p1 < p2 && p2 < p3);

    /* the same, byte by byte */
    closed = exchange(port,
                      "\r\nGET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n"
                      "Connection: close\r\n\r\n",
                      1, &out, 100);
    CHECK(closed && count(&out, "HTTP/1.1 200") == 2 && strstr(out.data, "GET /b ?- |"));

    /* limits: the header block, the number of fields, the body */
    buf big = BUF_INIT;
    buf_puts(&big, "GET / HTTP/1.1\r\nHost: h\r\nX: ");
    for (int i = 0; i < 600; i++)
        buf_putc(&big, 'a');
    buf_puts(&big, "\r\n\r\n");
    closed = exchange(port, big.data, 0, &out, 100);
    CHECK(closed && strstr(out.data, "HTTP/1.1 413 Refused\r\n") &&
          strstr(out.data, "request header block exceeds limits.max_header_bytes"));
    buf_reset(&big);
    buf_puts(&big, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 0; i < HSRV_MAX_HEADERS; i++)
        buf_puts(&big, "a:1\r\n");
    buf_puts(&big, "\r\n");
    closed = exchange(port, big.data, 0, &out, 100);
    CHECK(closed && strstr(out.data, "HTTP/1.1 413 Refused\r\n"));
    buf_free(&big);
    closed =
        exchange(port, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65\r\n\r\n", 0, &out, 100);
    CHECK(closed && strstr(out.data, "413") &&
          strstr(out.data, "request body exceeds limits.max_body_bytes"));
    closed = exchange(port,
                      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "20\r\n0123456789abcdef0123456789abcdef\r\n"
                      "21\r\n0123456789abcdef0123456789abcdef0\r\n0\r\n\r\n",
                      0, &out, 100);
    CHECK(closed && strstr(out.data, "request body exceeds limits.max_body_bytes"));
    /* the framing check's refusals, and nothing after them is served */
    closed = exchange(
        port, "GET / HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\nGET /a HTTP/1.1\r\nHost: h\r\n\r\n", 0,
        &out, 100);
    CHECK(closed && count(&out, "HTTP/1.1") == 1 && strstr(out.data, "more than one Host"));

    /* a value kept with the connection: across its requests, freed when it closes,
     * and a new connection starts without one */
    int freed = g_users_freed;
    closed = exchange(port,
                      "GET /count HTTP/1.1\r\nHost: h\r\n\r\n"
                      "GET /count HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
                      0, &out, 100);
    CHECK(closed && strstr(out.data, "count=1") && strstr(out.data, "count=2"));
    CHECK(g_users_freed == freed + 1);
    closed =
        exchange(port, "GET /count HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", 0, &out, 100);
    CHECK(closed && strstr(out.data, "count=1") && g_users_freed == freed + 2);

    /* HTTP/1.0: no Date, no keep-alive; HEAD: no body */
    closed = exchange(port, "GET /x HTTP/1.0\r\n\r\n", 0, &out, 100);
    CHECK(closed && strstr(out.data, "HTTP/1.0 200 OK\r\n") == out.data &&
          !strstr(out.data, "Date:") && strstr(out.data, "|"));
    closed =
        exchange(port, "HEAD /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", 0, &out, 100);
    CHECK(closed && strstr(out.data, "Date: ") && !strstr(out.data, "|"));
    /* HTTP/1.0 keep-alive: kept open, a second request is served */
    closed = exchange(port,
                      "GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                      "GET /y HTTP/1.0\r\n\r\n",
                      0, &out, 100);
    CHECK(closed && count(&out, "HTTP/1.0 200") == 2 &&
          strstr(out.data, "Connection: keep-alive\r\n"));

    /* a client gone while its request waits: the close callback runs */
    int fd = connect_to(port);
    send(fd, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n", 31, 0);
    pump(fd, &out, 5);
    close(fd);
    int before = g_closed_cbs;
    for (int i = 0; i < 20; i++) {
        event_base_loop(g_base, EVLOOP_NONBLOCK);
        usleep(1000);
    }
    CHECK(g_closed_cbs == before + 1);
    CHECK(hsrv_open(s) == 0);
    CHECK(hsrv_framing_refused(s) == 5);

    hsrv_free(s);
    event_base_free(g_base);
    buf_free(&out);
}

int main(void)
{
    test_parse();
    test_dechunk();
    test_server();
    return CHECK_DONE();
}
