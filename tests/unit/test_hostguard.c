/* Unit tests of hostguard.c: exact Host/Origin parsing, loopback listeners and the
 * admin token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "hostguard.h"

static void test_hosts(void)
{
    CHECK(hostguard_host_is_loopback("localhost"));
    CHECK(hostguard_host_is_loopback("LOCALHOST:30779"));
    CHECK(hostguard_host_is_loopback("127.0.0.1:1"));
    CHECK(hostguard_host_is_loopback("[::1]:8080"));
    CHECK(!hostguard_host_is_loopback("localhost:31822.evil.com"));
    CHECK(!hostguard_host_is_loopback("localhost:1@evil.com"));
    CHECK(!hostguard_host_is_loopback("evil.com:80:localhost"));
    CHECK(!hostguard_host_is_loopback("localhost.evil.com"));
    CHECK(!hostguard_host_is_loopback("localhost:"));
    CHECK(!hostguard_host_is_loopback("localhost:123456"));
    CHECK(!hostguard_host_is_loopback(""));
    CHECK(!hostguard_host_is_loopback(NULL));

    CHECK(hostguard_origin_is_loopback("http://localhost:31822"));
    CHECK(hostguard_origin_is_loopback("https://127.0.0.1"));
    CHECK(hostguard_origin_is_loopback("http://[::1]:1"));
    CHECK(!hostguard_origin_is_loopback("http://localhost:1@evil.com"));
    CHECK(!hostguard_origin_is_loopback("http://localhost:31822.evil.com"));
    CHECK(!hostguard_origin_is_loopback("http://localhost/"));
    CHECK(!hostguard_origin_is_loopback("ftp://localhost"));
    CHECK(!hostguard_origin_is_loopback("http://evil.com#localhost"));

    CHECK(hostguard_origin_allowed(NULL, ""));
    CHECK(!hostguard_origin_allowed("", ""));
    CHECK(!hostguard_origin_allowed("null", ""));
    CHECK(!hostguard_origin_allowed("http://evil", ""));
    CHECK(hostguard_origin_allowed("https://app.example", "http://x, https://APP.example"));
    CHECK(!hostguard_origin_allowed("https://app.example.evil", "https://app.example"));
    CHECK(hostguard_origin_allowed("http://anything", " * "));
    CHECK(hostguard_origin_allowed("http://localhost:3000", "https://app.example"));

    CHECK(hostguard_listen_is_loopback("127.0.0.1:30780"));
    CHECK(hostguard_listen_is_loopback("127.1.2.3:0"));
    CHECK(hostguard_listen_is_loopback("[::1]:30780"));
    CHECK(hostguard_listen_is_loopback("localhost:1"));
    CHECK(!hostguard_listen_is_loopback("0.0.0.0:30780"));
    CHECK(!hostguard_listen_is_loopback(":30780"));
    CHECK(!hostguard_listen_is_loopback("10.0.0.1:30780"));
    CHECK(!hostguard_listen_is_loopback("[::]:30780"));
    CHECK(!hostguard_listen_is_loopback("127.0.0.1.evil:1"));
}

static void test_admin_token(void)
{
    admin_token t;
    char err[512];
    CHECK(admin_token_load(&t, "127.0.0.1:1", "", err, sizeof err) == 0 && !t.set);
    CHECK(admin_token_ok(&t, NULL));
    CHECK(admin_token_load(&t, "0.0.0.0:30780", "", err, sizeof err) < 0);
    CHECK(strstr(err, "admin_listen: 0.0.0.0:30780 is not a loopback address") &&
          strstr(err, "admin.token_file"));
    CHECK(admin_token_load(&t, "", "", err, sizeof err) == 0); /* admin listener off */
    CHECK(admin_token_load(&t, "127.0.0.1:1", "/nonexistent/token", err, sizeof err) < 0);
    CHECK(strstr(err, "admin.token_file") != NULL);

    char path[] = "/tmp/cl-admin-token-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, "  short\n", 8) == 8);
    CHECK(admin_token_load(&t, "0.0.0.0:1", path, err, sizeof err) < 0);
    CHECK(strstr(err, "at least 16") != NULL);
    CHECK(ftruncate(fd, 0) == 0 && lseek(fd, 0, SEEK_SET) == 0);
    CHECK(write(fd, "0123456789abcdef-token\n", 23) == 23);
    close(fd);
    CHECK(admin_token_load(&t, "0.0.0.0:1", path, err, sizeof err) == 0 && t.set);
    CHECK(admin_token_ok(&t, "Bearer 0123456789abcdef-token"));
    CHECK(admin_token_ok(&t, "bearer  0123456789abcdef-token"));
    CHECK(!admin_token_ok(&t, "Bearer 0123456789abcdef-toke"));
    CHECK(!admin_token_ok(&t, "Bearer 0123456789abcdef-tokenX"));
    CHECK(!admin_token_ok(&t, "0123456789abcdef-token"));
    CHECK(!admin_token_ok(&t, NULL));
    unlink(path);
}

int main(void)
{
    test_hosts();
    test_admin_token();
    return CHECK_DONE();
}
