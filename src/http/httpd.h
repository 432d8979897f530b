/* httpd process model: how main.c tells the HTTP layer that it runs as one of
 * several worker processes (config key `workers` > 1), and the pre-fork binding
 * of the listeners by the master.
 *
 * With workers = 1 none of this is called and httpd binds its own listeners.
 * With workers > 1 the master binds the public and admin sockets
 * (httpd_bind_socket), logs them once (httpd_log_listening), and every worker
 * calls httpd_set_worker before httpd_start: httpd_start then accepts on the
 * inherited public socket instead of binding and logs nothing; worker 0 (only)
 * gets the admin socket. /admin/reload in worker 0 also asks the master (SIGHUP)
 * to reload the other workers.
 *
 * Ownership: the descriptors belong to the caller until httpd_start, which hands
 * them to libevent (closed by httpd_stop_accepting / httpd_free). */
#ifndef CL_HTTPD_H
#define CL_HTTPD_H

#include <stddef.h>
#include <sys/types.h>

/* Binds and listens on addr ("host:port", "[v6]:port"; port 0 = ephemeral) with
 * a plain non-blocking socket (no event base exists yet). 0 with *fd set, or -1. */
int httpd_bind_socket(const char *addr, int *fd, char *err, size_t errlen);
/* The "listening" log line (the one tests and scripts parse) for a bound fd. */
void httpd_log_listening(int fd, const char *listener);
/* index 0..count-1; listen_fd: the inherited public socket; admin_fd: the admin
 * socket for worker 0, -1 for the others (or without admin_listen); master: its pid. */
void httpd_set_worker(int index, int count, int listen_fd, int admin_fd, pid_t master);
/* The shared /metrics slots (mshare.h) the master mapped before forking; each worker
 * publishes its series there every second and a scrape merges every worker's,
 * labelled worker="k". Borrowed for the life of the process. */
struct mshare;
void httpd_set_metrics_share(struct mshare *share);

#endif
