/* master: binds the sockets, forks the workers and supervises them (master.h). */
#define _GNU_SOURCE /* pipe2 */
#include "master.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "httpd.h"
#include "log.h"
#include "mshare.h"
#include "sdnotify.h"
#include "util.h"

/* The mask before the master blocked its signals; workers restore it once their
 * evsignal handlers are in place (a signal sent meanwhile stays pending). */
static sigset_t g_orig_mask;
/* The session secret the master generated when none is configured, so that every
 * worker verifies every worker's session ids. */
static char g_secret[65];

typedef struct worker_slot {
    pid_t pid;          /* 0: not running */
    int ready;          /* reported ready since its last start */
    int fails;          /* quick deaths in a row (backoff) */
    int64_t started_ms; /* monotonic */
    int64_t restart_at; /* monotonic; 0: no restart pending */
} worker_slot;

static worker_slot g_slots[MASTER_MAX_WORKERS];

/* A master line about worker k that ended: "worker", "pid" and how:code. */
static log_line *worker_end_line(log_level level, const char *msg, int k, pid_t pid,
                                 const char *how, int code)
{
    log_line *l = log_begin(level, msg);
    log_int(l, "worker", k);
    log_int(l, "pid", (int)pid);
    log_int(l, how, code);
    return l;
}

/* Forks worker k; the child never returns from here. */
static void spawn_worker(settings *cfg, int k, int n, int listen_fd, int admin_fd, int ready[2],
                         int sfd, master_worker_fn run_worker)
{
    fflush(stdout);
    fflush(stderr);
    pid_t master = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        log_line *l = log_begin(LOG_ERROR, "fork failed");
        log_int(l, "worker", k);
        log_str(l, "error", strerror(errno));
        log_end(l);
        g_slots[k].restart_at = now_mono_ms() + 1000;
        return;
    }
    if (pid > 0) {
        g_slots[k].pid = pid;
        g_slots[k].ready = 0;
        g_slots[k].started_ms = now_mono_ms();
        g_slots[k].restart_at = 0;
        return;
    }
    /* the worker: nothing of libevent, curl or Lua exists yet in this process */
    close(sfd);
    close(ready[0]);
    if (k && admin_fd >= 0) {
        close(admin_fd);
        admin_fd = -1;
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* the master gone: drain and exit */
    if (getppid() != master)
        _exit(1);
    log_set_role(NULL);
    log_set_worker(k);
    worker_opts w = {k, n, listen_fd, ready[1], master, g_secret, &g_orig_mask};
    httpd_set_worker(k, n, listen_fd, admin_fd, master);
    int rc = run_worker(cfg, &w);
    fflush(stderr);
    exit(rc);
}

static int worker_of(pid_t pid, int n)
{
    for (int k = 0; k < n; k++)
        if (g_slots[k].pid == pid)
            return k;
    return -1;
}

static void signal_workers(int n, int sig, pid_t except)
{
    for (int k = 0; k < n; k++)
        if (g_slots[k].pid > 0 && g_slots[k].pid != except)
            kill(g_slots[k].pid, sig);
}

/* The master's state while it runs (master_run). */
typedef struct master {
    settings *cfg;
    int n;
    master_worker_fn run_worker;
    int sfd, lfd, afd, ready[2]; /* signals, listeners, the workers' ready pipe */
    int announced;               /* the "listening" lines went out */
    int stopping, startup;       /* draining; no worker was ready yet */
    int64_t stop_deadline;       /* monotonic: kill what is left after it */
    int rc;
} master;

static void spawn(master *m, int k)
{
    spawn_worker(m->cfg, k, m->n, m->lfd, m->afd, m->ready, m->sfd, m->run_worker);
}

/* Blocks the signals the master reads from its signalfd, binds the listeners, maps
 * the shared metrics slots and opens the ready pipe. 0, or -1 logged. */
static int master_open(master *m)
{
    char err[512];
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &g_orig_mask);
    signal(SIGPIPE, SIG_IGN);
    m->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (m->sfd < 0) {
        log_fatal("signalfd: %s", strerror(errno));
        return -1;
    }
    /* The master binds both listeners: errors show before any fork, and the admin
     * port outlives restarts of worker 0 (connections wait in the backlog). */
    if (httpd_bind_socket(m->cfg->listen, &m->lfd, err, sizeof err) < 0 ||
        (*m->cfg->admin_listen &&
         httpd_bind_socket(m->cfg->admin_listen, &m->afd, err, sizeof err) < 0)) {
        log_fatal("%s", err);
        return -1;
    }
    if (pipe2(m->ready, O_CLOEXEC) < 0 || fcntl(m->ready[0], F_SETFL, O_NONBLOCK) < 0) {
        log_fatal("pipe: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Starts the workers whose restart is due; returns when the next one is (-1: none),
 * and while stopping, the kill deadline (killing what outlived the last one). */
static int64_t restarts_due(master *m, int live)
{
    int64_t now = now_mono_ms(), due = -1;
    for (int k = 0; k < m->n && !m->stopping; k++) {
        if (!g_slots[k].pid && g_slots[k].restart_at) {
            if (g_slots[k].restart_at <= now) {
                log_line *l = log_begin(LOG_INFO, "restarting worker");
                log_int(l, "worker", k);
                log_end(l);
                spawn(m, k);
                continue;
            }
            if (due < 0 || g_slots[k].restart_at < due)
                due = g_slots[k].restart_at;
        }
    }
    if (m->stopping) {
        if (now >= m->stop_deadline) {
            log_line *l = log_begin(LOG_WARN, "workers outlived the grace period: killing them");
            log_int(l, "workers", live);
            log_end(l);
            signal_workers(m->n, SIGKILL, 0);
            m->stop_deadline = now + 60000;
        }
        due = m->stop_deadline;
    }
    return due;
}

/* Reads the workers' ready reports; once every worker is serving, says so. */
static void read_ready(master *m)
{
    unsigned char idx[64];
    ssize_t got;
    while ((got = read(m->ready[0], idx, sizeof idx)) > 0) {
        for (ssize_t i = 0; i < got; i++) {
            int k = idx[i];
            if (k >= m->n || !g_slots[k].pid)
                continue;
            g_slots[k].ready = 1;
            log_line *l = log_begin(LOG_INFO, "worker ready");
            log_int(l, "worker", k);
            log_int(l, "pid", (int)g_slots[k].pid);
            log_end(l);
        }
    }
    if (m->announced)
        return;
    int all = 1;
    for (int k = 0; k < m->n; k++)
        all &= g_slots[k].ready;
    if (all && !m->stopping) {
        /* the line tests and scripts wait for: every worker is serving */
        httpd_log_listening(m->lfd, "public");
        if (m->afd >= 0)
            httpd_log_listening(m->afd, "admin");
        m->announced = 1;
        m->startup = 0;
        sd_notify_state("READY=1");
    }
}

/* Worker k (pid) ended with st: logged, and restarted after a backoff unless the
 * master is stopping; one that fails before any worker was ready stops the master. */
static void worker_ended(master *m, int k, pid_t pid, int st)
{
    int was_ready = g_slots[k].ready;
    int64_t up = now_mono_ms() - g_slots[k].started_ms;
    g_slots[k].pid = 0;
    g_slots[k].ready = 0;
    const char *how = WIFSIGNALED(st) ? "signal" : "status";
    int code = WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st);
    if (m->stopping) {
        log_end(worker_end_line(LOG_INFO, "worker exited", k, pid, how, code));
        return;
    }
    if (m->startup && !was_ready) {
        /* a configuration or tools error: restarting cannot help */
        log_end(worker_end_line(LOG_ERROR, "worker failed to start", k, pid, how, code));
        m->stopping = 1;
        m->stop_deadline = now_mono_ms() + 5000;
        signal_workers(m->n, SIGTERM, 0);
        m->rc = 1; /* as a single process that cannot start */
        return;
    }
    g_slots[k].fails = up >= 30000 ? 1 : g_slots[k].fails + 1;
    int shift = g_slots[k].fails - 1 < 7 ? g_slots[k].fails - 1 : 7;
    int64_t delay = (int64_t)100 << shift;
    if (delay > 10000)
        delay = 10000;
    g_slots[k].restart_at = now_mono_ms() + delay;
    log_line *l = worker_end_line(LOG_ERROR, "worker died", k, pid, how, code);
    log_int(l, "uptime_ms", up);
    log_int(l, "restart_in_ms", delay);
    log_end(l);
}

/* One signal the master read: a child's end, a stop or a reload. */
static void on_signal(master *m, const struct signalfd_siginfo *si)
{
    int sig = (int)si->ssi_signo;
    if (sig == SIGCHLD) {
        int st;
        pid_t pid;
        while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
            int k = worker_of(pid, m->n);
            if (k >= 0)
                worker_ended(m, k, pid, st);
        }
    } else if (sig == SIGTERM || sig == SIGINT) {
        if (!m->stopping) {
            m->stopping = 1;
            m->rc = 0;
            sd_notify_state("STOPPING=1");
            m->stop_deadline = now_mono_ms() + m->cfg->shutdown_grace_s * 1000 + 5000;
            /* connections go to no one from now on: refuse rather than queue */
            close(m->lfd);
            m->lfd = -1;
            if (m->afd >= 0)
                close(m->afd);
            m->afd = -1;
        }
        log_line *l = log_begin(LOG_INFO, "stopping");
        log_int(l, "signal", sig);
        log_end(l);
        signal_workers(m->n, sig, 0);
    } else if (sig == SIGHUP) {
        /* from worker 0 (/admin/reload, it reloaded itself) or an operator */
        pid_t from = worker_of((pid_t)si->ssi_pid, m->n) >= 0 ? (pid_t)si->ssi_pid : 0;
        log_line *l = log_begin(LOG_INFO, "reload forwarded");
        log_bool(l, "from_worker", from);
        log_end(l);
        signal_workers(m->n, SIGHUP, from);
    }
}

int master_run(settings *cfg, int n, master_worker_fn run_worker)
{
    log_set_role("master");
    master m = {.cfg = cfg, .n = n, .run_worker = run_worker, .sfd = -1, .lfd = -1, .afd = -1,
                .ready = {-1, -1}, .startup = 1, .rc = 1};
    mshare *share = NULL;
    if (master_open(&m) < 0)
        goto done;
    /* every worker's /metrics series, so that a scrape sees the whole service */
    share = mshare_new(n, (size_t)1 << 20);
    if (!share)
        log_end(log_begin(LOG_WARN, "cannot map the shared metrics slots: /metrics shows one "
                                    "worker"));
    else
        httpd_set_metrics_share(share);
    if (!*cfg->session_secret) {
        unsigned char rnd[32];
        random_bytes(rnd, sizeof rnd);
        hex_encode(rnd, sizeof rnd, g_secret);
        log_end(log_begin(LOG_WARN, MASTER_SHARED_NO_SECRET));
    }
    log_line *l = log_begin(LOG_INFO, "starting workers");
    log_int(l, "workers", n);
    log_int(l, "pid", (int)getpid());
    log_end(l);
    for (int k = 0; k < n; k++)
        spawn(&m, k);
    for (;;) {
        int live = 0;
        for (int k = 0; k < n; k++)
            live += g_slots[k].pid > 0;
        if (m.stopping && !live)
            break;
        int64_t due = restarts_due(&m, live), now = now_mono_ms();
        struct pollfd pf[2] = {{m.sfd, POLLIN, 0}, {m.ready[0], POLLIN, 0}};
        int timeout = due < 0 ? -1 : (int)(due > now ? due - now : 0);
        if (poll(pf, 2, timeout) < 0 && errno != EINTR) {
            log_fatal("poll: %s", strerror(errno));
            goto done;
        }
        read_ready(&m);
        struct signalfd_siginfo si;
        while (read(m.sfd, &si, sizeof si) == (ssize_t)sizeof si)
            on_signal(&m, &si);
    }
    l = log_begin(LOG_INFO, "shutdown");
    log_int(l, "status", m.rc);
    log_end(l);
done:
    if (m.sfd >= 0)
        close(m.sfd);
    if (m.lfd >= 0)
        close(m.lfd);
    if (m.afd >= 0)
        close(m.afd);
    if (m.ready[0] >= 0)
        close(m.ready[0]);
    if (m.ready[1] >= 0)
        close(m.ready[1]);
    mshare_free(share);
    conf_free(cfg);
    return m.rc;
}
