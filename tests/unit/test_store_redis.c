/* Unit tests of the Redis backend of the state store (store.h) against a real
 * redis-server that the test starts on 127.0.0.1 (free port, temp dir) and stops
 * by PID. Exits 77 (skipped) when redis-server is not installed. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "store.h"
#include "util.h"

static char tmpdir[] = "/tmp/cl-redis-test-XXXXXX";

/* ---- redis-server ---- */

typedef struct srv {
    pid_t pid;
    int port;
} srv;

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t n = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &n) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static redisContext *sync_conn(int port, const char *pass)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    if (pass) {
        redisReply *r = redisCommand(c, "AUTH %s", pass);
        freeReplyObject(r);
    }
    return c;
}

/* Starts redis-server on port (0 = a free one); waits until it answers. */
static int srv_start(srv *s, int port, const char *requirepass)
{
    s->port = port ? port : free_port();
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", s->port);
    char logfile[128];
    snprintf(logfile, sizeof logfile, "%s/redis.log", tmpdir);
    s->pid = fork();
    if (s->pid == 0) {
        const char *argv[20] = {
            "redis-server", "--port",     portstr,   "--bind",       "127.0.0.1", "--dir",
            tmpdir,         "--save",     "",        "--appendonly", "no",        "--daemonize",
            "no",           "--loglevel", "warning", "--logfile",    logfile,     NULL};
        if (requirepass) {
            argv[17] = "--requirepass";
            argv[18] = requirepass;
            argv[19] = NULL;
        }
        execvp("redis-server", (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 100; i++) {
        redisContext *c = sync_conn(s->port, requirepass);
        if (c) {
            redisReply *r = redisCommand(c, "PING");
            int ok = r && (r->type == REDIS_REPLY_STATUS);
            freeReplyObject(r);
            redisFree(c);
            if (ok)
                return 0;
        }
        usleep(20000);
    }
    return -1;
}

static void srv_stop(srv *s, int sig)
{
    if (s->pid > 0) {
        kill(s->pid, sig);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

/* ---- loop helpers ---- */

static void guard_cb(evutil_socket_t fd, short what, void *arg)
{
    *(int *)arg = 1;
}

static int run_until(struct event_base *b, const int *counter, int target, long max_ms)
{
    /* gives up after max_ms, longer on a loaded machine (check_wait in check.h): a
     * 10 ms tick bounds a turn */
    int ticked = 0;
    struct event *g = event_new(b, -1, EV_PERSIST, guard_cb, &ticked);
    struct timeval tv = {0, 10000};
    check_wait w = check_wait_start(max_ms);
    evtimer_add(g, &tv);
    while (*counter < target && check_wait_on(&w))
        event_base_loop(b, EVLOOP_ONCE);
    event_free(g);
    return *counter >= target;
}

static void run_for(struct event_base *b, long ms)
{
    int never = 0;
    run_until(b, &never, 1, ms);
}

/* Runs the loop until the store is connected (or max_ms). */
static int wait_ready(struct event_base *b, store *s, long max_ms)
{
    check_wait w = check_wait_start(max_ms);
    while (!store_redis_ready(s) && check_wait_on(&w))
        run_for(b, 10);
    return store_redis_ready(s);
}

typedef struct rec {
    int calls, rc, had_val, order;
    char val[256];
    size_t len;
} rec;

static int seq, done_count;

static void on_any(int rc, const char *val, size_t len, void *arg)
{
    rec *r = arg;
    r->calls++;
    r->rc = rc;
    r->had_val = val != NULL;
    r->len = len;
    memset(r->val, 0, sizeof r->val);
    if (val && len < sizeof r->val)
        memcpy(r->val, val, len);
    r->order = ++seq;
    done_count++;
}

static int wait_n(struct event_base *b, int n)
{
    int target = done_count + n;
    return run_until(b, &done_count, target, 30000); /* liveness only */
}

static int get_sync(struct event_base *b, store *s, const char *key, rec *r)
{
    memset(r, 0, sizeof *r);
    store_get(s, key, on_any, r);
    CHECK(wait_n(b, 1));
    return r->rc;
}

static store *mk(struct event_base *b, const char *url, const char *prefix)
{
    store_redis_config cfg;
    char err[200];
    memset(&cfg, 0, sizeof cfg);
    cfg.url = url;
    cfg.key_prefix = prefix;
    cfg.command_timeout_ms = 300;
    cfg.connect_timeout_ms = 300;
    cfg.reconnect_max_ms = 200;
    store *s = store_redis_new(b, &cfg, err, sizeof err);
    if (!s)
        fprintf(stderr, "store_redis_new(%s): %s\n", url, err);
    return s;
}

/* ---- tests ---- */

static void test_url(void)
{
    store_redis_url u;
    char err[200];
    CHECK(store_redis_parse_url("redis://127.0.0.1:6380/2", &u, err, sizeof err) == 0);
    CHECK_STR(u.host, "127.0.0.1");
    CHECK(u.port == 6380 && u.db == 2 && !u.user[0] && !u.pass[0]);
    CHECK(store_redis_parse_url("redis://redis.internal", &u, err, sizeof err) == 0);
    CHECK(u.port == 6379 && u.db == 0);
    CHECK_STR(u.host, "redis.internal");
    CHECK(store_redis_parse_url("redis://:s%40cret@h:1/", &u, err, sizeof err) == 0);
    CHECK_STR(u.pass, "s@cret");
    CHECK(!u.user[0] && u.port == 1);
    CHECK(store_redis_parse_url("redis://app:pw@h/3", &u, err, sizeof err) == 0);
    CHECK_STR(u.user, "app");
    CHECK_STR(u.pass, "pw");
    CHECK(u.db == 3);
    CHECK(store_redis_parse_url("redis://pw@h", &u, err, sizeof err) == 0);
    CHECK_STR(u.pass, "pw");
    CHECK(!u.user[0]);
    CHECK(store_redis_parse_url("redis://[::1]:7000/1", &u, err, sizeof err) == 0);
    CHECK_STR(u.host, "::1");
    CHECK(u.port == 7000 && u.db == 1);
    const char *bad[] = {
        "memory",      "rediss://h",   "redis://",     "redis://h:0",    "redis://h:70000",
        "redis://h:x", "redis://h/db", "redis://[::1", "redis://:%zz@h", "redis://h?x=1",
        NULL};
    for (int i = 0; bad[i]; i++) {
        err[0] = '\0';
        int rc = store_redis_parse_url(bad[i], &u, err, sizeof err);
        CHECK(rc == -1 && err[0]);
        if (rc == 0)
            fprintf(stderr, "  accepted: %s\n", bad[i]);
    }
    struct event_base *b = event_base_new();
    store_redis_config cfg = {"redis://h:99999", 0, 0, 0, 0, NULL};
    CHECK(store_redis_new(b, &cfg, err, sizeof err) == NULL);
    event_base_free(b);
}

static void test_semantics(int port)
{
    struct event_base *b = event_base_new();
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", port);
    store *s = mk(b, url, "t1:");
    rec r1, r2, r3;
    CHECK(s && wait_ready(b, s, 30000));

    memset(&r1, 0, sizeof r1);
    store_op *op = store_get(s, "k", on_any, &r1);
    CHECK(op != NULL && r1.calls == 0); /* never synchronous */
    CHECK(wait_n(b, 1));
    CHECK(r1.rc == 1 && !r1.had_val);

    const char bin[] = {'a', '\0', 'b', '\0', '\xff'};
    memset(&r2, 0, sizeof r2);
    store_set(s, "k", bin, sizeof bin, 0, on_any, &r2);
    CHECK(wait_n(b, 1) && r2.rc == 0);
    CHECK(get_sync(b, s, "k", &r3) == 0);
    CHECK(r3.len == sizeof bin && memcmp(r3.val, bin, sizeof bin) == 0);
    store_set(s, "empty", "", 0, 0, NULL, NULL);
    CHECK(get_sync(b, s, "empty", &r3) == 0 && r3.len == 0 && r3.had_val);

    /* claim: first wins, second sees the current value; order kept. */
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    store_claim(s, "c", "one", 3, 0, on_any, &r1);
    store_claim(s, "c", "two", 3, 0, on_any, &r2);
    CHECK(wait_n(b, 2));
    CHECK(r1.rc == 0 && !r1.had_val);
    CHECK(r2.rc == 1 && r2.len == 3 && !memcmp(r2.val, "one", 3));
    CHECK(r1.order < r2.order);

    /* set_if: mismatch -> current value; match replaces; absent -> NULL. */
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    memset(&r3, 0, sizeof r3);
    store_set_if(s, "c", "two", 3, "x", 1, 0, on_any, &r1);
    store_set_if(s, "c", "one", 3, "three", 5, 0, on_any, &r2);
    store_set_if(s, "nokey", "one", 3, "z", 1, 0, on_any, &r3);
    CHECK(wait_n(b, 3));
    CHECK(r1.rc == 1 && r1.len == 3 && !memcmp(r1.val, "one", 3));
    CHECK(r2.rc == 0);
    CHECK(r3.rc == 1 && !r3.had_val);
    CHECK(get_sync(b, s, "c", &r3) == 0 && r3.len == 5 && !memcmp(r3.val, "three", 5));
    /* binary expect (a NUL inside) compares all bytes */
    store_set(s, "bin", bin, sizeof bin, 0, NULL, NULL);
    memset(&r1, 0, sizeof r1);
    store_set_if(s, "bin", bin, 2, "no", 2, 0, on_any, &r1);
    CHECK(wait_n(b, 1) && r1.rc == 1 && r1.len == sizeof bin);
    memset(&r1, 0, sizeof r1);
    store_del_if(s, "bin", bin, sizeof bin, on_any, &r1);
    CHECK(wait_n(b, 1) && r1.rc == 0);

    /* del / del_if */
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    memset(&r3, 0, sizeof r3);
    store_del_if(s, "c", "nope", 4, on_any, &r1);
    store_del_if(s, "c", "three", 5, on_any, &r2);
    store_del(s, "c", on_any, &r3);
    CHECK(wait_n(b, 3));
    CHECK(r1.rc == 1 && r1.len == 5);
    CHECK(r2.rc == 0);
    CHECK(r3.rc == 1 && !r3.had_val);
    memset(&r1, 0, sizeof r1);
    store_del(s, "k", on_any, &r1);
    CHECK(wait_n(b, 1) && r1.rc == 0);

    /* TTLs: claim / set / set_if with a TTL expire; without one they stay. */
    store_claim(s, "ttl1", "v", 1, 150, NULL, NULL);
    store_set(s, "ttl2", "v", 1, 150, NULL, NULL);
    store_set(s, "ttl3", "v", 1, 0, NULL, NULL);
    store_set_if(s, "ttl3", "v", 1, "w", 1, 150, NULL, NULL);
    store_set(s, "keep", "v", 1, 0, NULL, NULL);
    CHECK(get_sync(b, s, "ttl1", &r1) == 0);
    run_for(b, 350);
    CHECK(get_sync(b, s, "ttl1", &r1) == 1);
    CHECK(get_sync(b, s, "ttl2", &r1) == 1);
    CHECK(get_sync(b, s, "ttl3", &r1) == 1);
    CHECK(get_sync(b, s, "keep", &r1) == 0);

    /* cancel drops the callback, the write still applies */
    memset(&r1, 0, sizeof r1);
    store_op *o = store_set(s, "cancelled", "x", 1, 0, on_any, &r1);
    store_cancel(o);
    CHECK(get_sync(b, s, "cancelled", &r2) == 0);
    CHECK(r1.calls == 0);

    /* keys carry the prefix on the server */
    redisContext *c = sync_conn(port, NULL);
    CHECK(c != NULL);
    if (c) {
        redisReply *rep = redisCommand(c, "GET t1:keep");
        CHECK(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, "v"));
        freeReplyObject(rep);
        /* NOSCRIPT (scripts flushed): the op is re-sent with EVAL and still works */
        rep = redisCommand(c, "SCRIPT FLUSH");
        freeReplyObject(rep);
        redisFree(c);
    }
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    store_claim(s, "after-flush", "a", 1, 0, on_any, &r1);
    store_claim(s, "after-flush", "b", 1, 0, on_any, &r2);
    CHECK(wait_n(b, 2));
    CHECK(r1.rc == 0 && r2.rc == 1 && r2.len == 1 && r2.val[0] == 'a');

    store_stats_t st;
    store_stats(s, &st);
    CHECK(st.ops > 20 && st.errors == 0);
    store_free(s);
    event_base_free(b);
}

/* Two stores (two "instances") racing on the same keys: one winner per key. */
static void test_two_clients(int port)
{
    struct event_base *b = event_base_new();
    char url[64];
    snprintf(url, sizeof url, "redis://localhost:%d", port); /* also resolves a name */
    store *s1 = mk(b, url, "t2:");
    store *s2 = mk(b, url, "t2:");
    CHECK(s1 && s2 && wait_ready(b, s1, 2000) && wait_ready(b, s2, 2000));
    enum { N = 50 };
    static rec a[N], c[N];
    memset(a, 0, sizeof a);
    memset(c, 0, sizeof c);
    for (int i = 0; i < N; i++) {
        char k[32];
        snprintf(k, sizeof k, "race%d", i);
        store_claim(s1, k, "s1", 2, 0, on_any, &a[i]);
        store_claim(s2, k, "s2", 2, 0, on_any, &c[i]);
    }
    CHECK(wait_n(b, 2 * N));
    int wins = 0, bad = 0;
    for (int i = 0; i < N; i++) {
        wins += (a[i].rc == 0) + (c[i].rc == 0);
        if (!((a[i].rc == 0 && c[i].rc == 1 && !memcmp(c[i].val, "s1", 2)) ||
              (c[i].rc == 0 && a[i].rc == 1 && !memcmp(a[i].val, "s2", 2))))
            bad++;
    }
    CHECK(wins == N && bad == 0);
    store_free(s1);
    store_free(s2);
    event_base_free(b);
}

static void test_auth_and_db(void)
{
    srv p;
    if (srv_start(&p, 0, "s3cr3t") < 0) {
        CHECK(!"redis-server with requirepass did not start");
        srv_stop(&p, SIGKILL);
        return;
    }
    struct event_base *b = event_base_new();
    char url[128];
    rec r;
    snprintf(url, sizeof url, "redis://:s3cr3t@127.0.0.1:%d/1", p.port);
    store *ok = mk(b, url, "");
    snprintf(url, sizeof url, "redis://default:s3cr3t@127.0.0.1:%d/0", p.port);
    store *acl = mk(b, url, "");
    snprintf(url, sizeof url, "redis://:wrong@127.0.0.1:%d/1", p.port);
    store *bad = mk(b, url, "");
    CHECK(wait_ready(b, ok, 2000));
    CHECK(wait_ready(b, acl, 2000));
    run_for(b, 200);
    CHECK(!store_redis_ready(bad));
    memset(&r, 0, sizeof r);
    store_set(bad, "x", "1", 1, 0, on_any, &r);
    CHECK(wait_n(b, 1) && r.rc == -1);
    /* SELECT: db 1 and db 0 are separate */
    memset(&r, 0, sizeof r);
    store_set(ok, "db", "one", 3, 0, on_any, &r);
    CHECK(wait_n(b, 1) && r.rc == 0);
    CHECK(get_sync(b, ok, "db", &r) == 0);
    CHECK(get_sync(b, acl, "db", &r) == 1);
    store_free(ok);
    store_free(acl);
    store_free(bad);
    event_base_free(b);
    srv_stop(&p, SIGTERM);
}

/* Outage: kill, fail fast, restart on the same port, recover without a new store.
 * Then a hung server (SIGSTOP): the command timeout answers -1, SIGCONT recovers. */
static void test_outage(void)
{
    srv p;
    CHECK(srv_start(&p, 0, NULL) == 0);
    struct event_base *b = event_base_new();
    char url[64];
    rec r;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", p.port);
    store *s = mk(b, url, "t3:");
    CHECK(wait_ready(b, s, 30000));
    memset(&r, 0, sizeof r);
    store_set(s, "k", "v", 1, 0, on_any, &r);
    CHECK(wait_n(b, 1) && r.rc == 0);

    srv_stop(&p, SIGKILL);
    /* the first op may still be sent on the dead socket; all answer -1, quickly: on
     * the lost connection, none by waiting out the command timeout (counted, not
     * timed: a loaded machine is slow, it does not add timeouts) */
    store_stats_t st0, st1;
    store_stats(s, &st0);
    int64_t t0 = now_mono_ms();
    for (int i = 0; i < 3; i++) {
        memset(&r, 0, sizeof r);
        store_get(s, "k", on_any, &r);
        CHECK(wait_n(b, 1) && r.rc == -1);
    }
    int64_t took = now_mono_ms() - t0;
    fprintf(stderr, "outage: 3 ops failed in %lld ms\n", (long long)took);
    store_stats(s, &st1);
    CHECK(st1.timeouts == st0.timeouts);
    CHECK(!store_redis_ready(s));
    memset(&r, 0, sizeof r);
    store_op *o = store_claim(s, "k2", "v", 1, 0, on_any, &r);
    CHECK(o != NULL && r.calls == 0); /* fail-fast is still asynchronous */
    CHECK(wait_n(b, 1) && r.rc == -1);

    CHECK(srv_start(&p, p.port, NULL) == 0);
    t0 = now_mono_ms();
    CHECK(wait_ready(b, s, 30000));
    fprintf(stderr, "outage: reconnected %lld ms after the restart\n",
            (long long)(now_mono_ms() - t0));
    memset(&r, 0, sizeof r);
    store_claim(s, "k2", "v", 1, 0, on_any, &r);
    CHECK(wait_n(b, 1) && r.rc == 0);

    /* hung server */
    kill(p.pid, SIGSTOP);
    store_stats(s, &st0);
    t0 = now_mono_ms();
    memset(&r, 0, sizeof r);
    store_get(s, "k2", on_any, &r);
    CHECK(wait_n(b, 1) && r.rc == -1);
    took = now_mono_ms() - t0;
    fprintf(stderr, "hung server: op failed after %lld ms (command timeout 300)\n",
            (long long)took);
    store_stats(s, &st1);
    CHECK(took >= 250);                         /* it waited for the command timeout */
    CHECK(st1.timeouts == st0.timeouts + 1);    /* and the timeout ended it */
    kill(p.pid, SIGCONT);
    CHECK(wait_ready(b, s, 30000));
    CHECK(get_sync(b, s, "k2", &r) == 0);

    store_stats_t st;
    store_stats(s, &st);
    CHECK(st.errors >= 5);
    store_free(s);
    event_base_free(b);
    srv_stop(&p, SIGTERM);
}

/* store_free with operations in flight and queued: no callbacks, no leaks. */
static void test_free_pending(int port)
{
    struct event_base *b = event_base_new();
    char url[64];
    rec r, early;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    store *s = mk(b, url, "t4:");
    memset(&r, 0, sizeof r);
    memset(&early, 0, sizeof early);
    store_get(s, "x", on_any, &early); /* before the handshake: fails fast */
    CHECK(wait_ready(b, s, 30000));
    CHECK(early.calls == 1 && early.rc == -1);
    store_get(s, "x", on_any, &r);
    store_set(s, "x", "1", 1, 0, on_any, &r);
    store_free(s);
    run_for(b, 50);
    CHECK(r.calls == 0);
    event_base_free(b);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_url();
    if (system("command -v redis-server >/dev/null 2>&1") != 0) {
        fprintf(stderr, "SKIP: redis-server is not installed (apt-get install redis-server)\n");
        return 77;
    }
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    srv main_srv;
    if (srv_start(&main_srv, 0, NULL) < 0) {
        fprintf(stderr, "redis-server did not start\n");
        srv_stop(&main_srv, SIGKILL);
        return 1;
    }
    test_semantics(main_srv.port);
    test_two_clients(main_srv.port);
    test_free_pending(main_srv.port);
    srv_stop(&main_srv, SIGTERM);
    test_auth_and_db();
    test_outage();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return CHECK_DONE();
}
