/* toon-bench FILE ITERATIONS...: times JSON text -> TOON text with the project's
 * codec (json_parse + toon_encode + free, as a tool response would pay it), after a
 * warm-up. Prints one line per file: "file json_bytes toon_bytes iterations seconds
 * ops_per_s mb_per_s" (MB/s of JSON input, MB = 1e6 bytes). Used by toon-bench.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "toon.h"
#include "util.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int one(const char *text, size_t len, buf *out)
{
    char err[256];
    json_value *v = json_parse(text, len, NULL, err, sizeof err);
    if (!v) {
        fprintf(stderr, "toon-bench: %s\n", err);
        return -1;
    }
    buf_reset(out);
    int rc = toon_encode(out, v, NULL, err, sizeof err);
    if (rc < 0)
        fprintf(stderr, "toon-bench: %s\n", err);
    json_free(v);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = 1;
    buf in = BUF_INIT, out = BUF_INIT;
    if (argc < 3 || argc % 2 == 0) {
        fprintf(stderr, "usage: toon-bench FILE ITERATIONS [FILE ITERATIONS...]\n");
        goto done;
    }
    for (int a = 1; a + 1 < argc; a += 2) {
        FILE *f = fopen(argv[a], "rb");
        if (!f) {
            perror(argv[a]);
            goto done;
        }
        char chunk[65536];
        size_t n;
        buf_reset(&in);
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
            buf_append(&in, chunk, n);
        fclose(f);
        long iters = atol(argv[a + 1]);
        if (iters < 1)
            iters = 1;
        for (long i = 0; i < iters / 10 + 1; i++) /* warm-up: caches, allocator */
            if (one(in.data, in.len, &out) < 0)
                goto done;
        double t0 = now_s();
        for (long i = 0; i < iters; i++)
            if (one(in.data, in.len, &out) < 0)
                goto done;
        double dt = now_s() - t0;
        printf("%s %zu %zu %ld %.6f %.1f %.2f\n", argv[a], in.len, out.len, iters, dt,
               (double)iters / dt, (double)in.len * (double)iters / dt / 1e6);
    }
    rc = 0;
done:
    buf_free(&in);
    buf_free(&out);
    return rc;
}
