/* sdnotify: the datagram reaches a path socket and an abstract one; nothing is sent
 * without NOTIFY_SOCKET. With the binary's path as argv[1] (and the source dir as
 * argv[2]) also the service itself: READY=1 once it serves, STOPPING=1 on SIGTERM,
 * exit 0. */
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "sdnotify.h"

/* A datagram socket bound to name ('@' = abstract); -1 on failure. */
static int listen_at(const char *name)
{
    struct sockaddr_un sa;
    size_t n = strlen(name);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, name, n);
    if (name[0] == '@')
        sa.sun_path[0] = '\0';
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa,
                       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0)
        return -1;
    return fd;
}

/* The next datagram within ms, NUL-terminated into out; 0 or -1. */
static int receive(int fd, char *out, size_t outlen, int ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, ms) != 1)
        return -1;
    ssize_t n = recv(fd, out, outlen - 1, 0);
    if (n < 0)
        return -1;
    out[n] = '\0';
    return 0;
}

static void test_protocol(void)
{
    char path[64], got[128];
    snprintf(path, sizeof path, "/tmp/cl_sdnotify_%d", (int)getpid());
    unlink(path);
    int fd = listen_at(path);
    CHECK(fd >= 0);
    unsetenv("NOTIFY_SOCKET");
    CHECK(sd_notify_state("READY=1") == 0); /* no manager: nothing to do */
    CHECK(receive(fd, got, sizeof got, 50) == -1);
    setenv("NOTIFY_SOCKET", path, 1);
    CHECK(sd_notify_state("READY=1") == 0);
    CHECK(receive(fd, got, sizeof got, 2000) == 0);
    CHECK_STR(got, "READY=1");
    close(fd);
    unlink(path);

    char abstract[64];
    snprintf(abstract, sizeof abstract, "@cl_sdnotify_%d", (int)getpid());
    fd = listen_at(abstract);
    CHECK(fd >= 0);
    setenv("NOTIFY_SOCKET", abstract, 1);
    CHECK(sd_notify_state("STOPPING=1") == 0);
    CHECK(receive(fd, got, sizeof got, 2000) == 0);
    CHECK_STR(got, "STOPPING=1");
    close(fd);

    setenv("NOTIFY_SOCKET", "relative/name", 1);
    CHECK(sd_notify_state("READY=1") == -1);
    unsetenv("NOTIFY_SOCKET");
}

static void test_service(const char *bin, const char *src)
{
    char path[64], got[128], tools[512], lua[512];
    snprintf(path, sizeof path, "/tmp/cl_sdnotify_svc_%d", (int)getpid());
    unlink(path);
    int fd = listen_at(path);
    CHECK(fd >= 0);
    snprintf(tools, sizeof tools, "%s/tools", src);
    snprintf(lua, sizeof lua, "%s/lua", src);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("NOTIFY_SOCKET", path, 1);
        setenv("CL_LISTEN", "127.0.0.1:0", 1);
        setenv("CL_ADMIN_LISTEN", "", 1);
        setenv("CL_TOOLS_DIR", tools, 1);
        setenv("CL_LUA_DIR", lua, 1);
        setenv("CL_ACCESS_LOG", "false", 1);
        execl(bin, bin, (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0);
    CHECK(receive(fd, got, sizeof got, 20000) == 0);
    CHECK_STR(got, "READY=1");
    kill(pid, SIGTERM);
    CHECK(receive(fd, got, sizeof got, 20000) == 0);
    CHECK_STR(got, "STOPPING=1");
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(fd);
    unlink(path);
}

int main(int argc, char **argv)
{
    test_protocol();
    if (argc >= 3)
        test_service(argv[1], argv[2]);
    return CHECK_DONE();
}
