/* sdnotify: the service manager's readiness protocol (systemd's sd_notify), in the
 * few lines it takes: one datagram to the AF_UNIX socket named by $NOTIFY_SOCKET
 * (a path, or an abstract name written with a leading '@'). Without the variable
 * every call is a no-op, so the service runs the same outside systemd.
 *
 * The unit uses Type=notify: READY=1 once the listeners are up and the tools loaded
 * (the single process after its start; the master once every worker is ready),
 * STOPPING=1 when a stop begins. */
#ifndef CL_SDNOTIFY_H
#define CL_SDNOTIFY_H

/* Sends state ("READY=1", "STOPPING=1", ...). 0 when sent or when there is no
 * manager to tell, -1 when the socket could not be reached. */
int sd_notify_state(const char *state);

#endif
