/* master: with workers > 1, the process that binds the public (and admin) socket,
 * forks the workers and supervises them: SIGTERM/SIGINT are forwarded (graceful
 * stop, then exit 0 once every worker has exited), SIGHUP is forwarded (reload), a
 * worker that dies is logged and restarted after a backoff (100 ms doubling to 10 s;
 * a worker that dies before the first "listening" line stops the whole service).
 * Signals are read from a signalfd, so nothing runs in signal context. The master
 * creates no event base, curl or Lua state: workers must not inherit one. */
#ifndef CL_MASTER_H
#define CL_MASTER_H

#include <signal.h>
#include <sys/types.h>

#include "conf.h"

#define MASTER_MAX_WORKERS 64

#define MASTER_SHARED_NO_SECRET                                                                    \
    "state_store is shared but session_secret is empty: session ids work only on the instance "    \
    "that minted them"

/* A worker's place, given to the worker function in the forked child. Pointers are
 * the master's (inherited memory), valid for the life of the process. */
typedef struct worker_opts {
    int index, count;
    int listen_fd; /* inherited public socket */
    int ready_fd;  /* write end of the master's readiness pipe */
    pid_t master;
    const char *secret;        /* session secret the master generated ("" if configured) */
    const sigset_t *orig_mask; /* restore once the worker's signal handlers are in place */
} worker_opts;

/* Runs the service in the worker; its return value is the worker's exit status. */
typedef int (*master_worker_fn)(settings *cfg, const worker_opts *w);

/* Runs the master for n workers until it is stopped; takes cfg. Returns the exit
 * status (0 after a requested stop, 1 when it cannot start). */
int master_run(settings *cfg, int n, master_worker_fn run_worker);

#endif
