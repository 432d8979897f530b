/* test_util: util.c's buffer (buf_printf's one or two passes, the 2-16 kB blocks kept
 * for reuse, none under AddressSanitizer) and its identifier bytes. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "util.h"

/* Identifier bytes: distinct draws, and a forked child (a worker) does not repeat
 * what its parent draws next. */
static void test_id_random(void)
{
    unsigned char a[16], b[16], parent[16], child[16];
    id_random_bytes(a, sizeof a);
    id_random_bytes(b, sizeof b);
    CHECK(memcmp(a, b, sizeof a) != 0);
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        id_random_bytes(child, sizeof child);
        ssize_t w = write(fds[1], child, sizeof child);
        _exit(w == (ssize_t)sizeof child ? 0 : 1);
    }
    CHECK(pid > 0);
    id_random_bytes(parent, sizeof parent);
    CHECK(read(fds[0], child, sizeof child) == (ssize_t)sizeof child);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(memcmp(parent, child, sizeof parent) != 0);
    close(fds[0]);
    close(fds[1]);
    unsigned char odd[13] = {0};
    id_random_bytes(odd, sizeof odd); /* lengths that are not a multiple of 8 */
    int nonzero = 0;
    for (size_t i = 8; i < sizeof odd; i++)
        nonzero |= odd[i];
    CHECK(nonzero);
}

/* buf_printf writes in one pass when the text fits the spare room, else grows and
 * writes again; either way the text is appended whole and NUL-terminated. */
static void test_buf_printf(void)
{
    buf b = BUF_INIT;
    buf_printf(&b, "%s", ""); /* empty into an empty buffer */
    CHECK(b.len == 0);
    buf_printf(&b, "%d-%s", 42, "x");
    CHECK(b.len == 4 && !strcmp(b.data, "42-x"));
    buf_reserve(&b, 100);
    size_t cap = b.cap;
    buf_printf(&b, "%s", "fits");
    CHECK(b.cap == cap && !strcmp(b.data, "42-xfits"));
    char big[300];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    buf_printf(&b, "[%s]", big); /* longer than the spare room: grows */
    CHECK(b.len == 8 + 301 && b.data[8] == '[' && b.data[b.len - 1] == ']' && b.data[b.len] == 0);
    while (b.cap - b.len - 1 != 3) /* exactly three bytes of room */
        buf_putc(&b, 'z');
    size_t before = b.len;
    buf_printf(&b, "%s", "abc"); /* fits exactly (with the NUL) */
    CHECK(b.len == before + 3 && !strcmp(b.data + before, "abc"));
    before = b.len;
    buf_printf(&b, "%s", "defg"); /* one byte too long for the room */
    CHECK(b.len == before + 4 && !strcmp(b.data + before, "defg"));
    buf_free(&b);
}

/* A freed buffer block of 2 to 16 kB is kept (four per size) and taken by the next
 * buffer that grows to that size, its text carried over. Under AddressSanitizer none
 * is kept: a freed block is poisoned, so a use after free is seen. */
#if !BUF_REUSE
#include <sanitizer/asan_interface.h>
#endif
static void test_buf_blocks(void)
{
    enum { N = 5 };
    buf x[N];
    char *p[N];
    for (int i = 0; i < N; i++) {
        x[i] = (buf)BUF_INIT;
        buf_reserve(&x[i], 3000); /* 4 kB */
        CHECK(x[i].cap == 4096);
        p[i] = x[i].data;
    }
#if !BUF_REUSE
    for (int i = 0; i < N; i++) {
        buf_free(&x[i]);
        CHECK(__asan_address_is_poisoned(p[i]));
    }
#else
    for (int i = 0; i < N; i++)
        buf_free(&x[i]);
    /* the first four were kept (the fifth freed): they come back, latest first */
    for (int i = 0; i < N - 1; i++) {
        x[i] = (buf)BUF_INIT;
        buf_reserve(&x[i], 3000);
        CHECK(x[i].data == p[N - 2 - i]);
    }
    for (int i = 0; i < N - 1; i++)
        buf_free(&x[i]);
#endif
    /* a buffer growing past 2 kB takes a 4 kB block (a kept one, with its text) */
    buf g = BUF_INIT;
    for (int i = 0; i < 2100; i++)
        buf_putc(&g, (char)('a' + i % 26));
    CHECK(g.cap == 4096 && g.len == 2100 && g.data[2100] == '\0');
#if BUF_REUSE
    CHECK(g.data == p[0]);
    int same = 1;
    for (int i = 0; i < 2100; i++)
        same &= g.data[i] == (char)('a' + i % 26);
    CHECK(same);
#endif
    buf_free(&g);
}

int main(void)
{
    test_buf_printf();
    test_buf_blocks();
    test_id_random();
    return CHECK_DONE();
}
