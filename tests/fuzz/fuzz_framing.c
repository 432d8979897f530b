/* fuzz_framing: libFuzzer target for the HTTP/1.1 request framing checker
 * (src/http/framing.c) and the server's indexing of the heads and chunked bodies it
 * accepts (src/http/hsrv_head.c).
 *
 * Input: one selector byte, then bytes as a client would send them.
 *   bit 0: the bytes are a chunked body (else a request head);
 *   bits 1-3: piece size - 1 for the incremental feeds.
 *
 * Properties: the end of a head found by feeding the bytes in pieces is the one
 * found at once; an accepted head has no folded line, no bare CR, no whitespace
 * before a colon, a body length within the limit; a refusal has a known status and
 * a reason. A chunked body gives the same verdict and the same consumed count fed
 * whole or in pieces, and an accepted body is within the limit.
 * Indexing an accepted head: it fails only past HSRV_MAX_HEADERS fields; the method
 * is the request line's first word, every field is found by its name (the first of
 * that name, ASCII case ignored) with a value free of CR, LF and NUL, the path lies
 * in the target. Decoding an accepted chunked body gives as many bytes as the chunk
 * sizes add up to. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "framing.h"
#include "fuzz_common.h"
#include "hsrv.h"

#define T "fuzz_framing"

static const framing_limits LIM = {2048, 4096};

static void check_error(const framing_error *e)
{
    int s = e->status;
    fuzz_must(s == 400 || s == 413 || s == 414 || s == 417 || s == 501 || s == 505, T,
              "a refusal has a known status");
    fuzz_must(e->reason && *e->reason, T, "a refusal has a reason");
}

static void index_head(const char *p, size_t end)
{
    char *copy = malloc(end + 1);
    memcpy(copy, p, end);
    copy[end] = '\0';
    size_t lines = 0;
    for (size_t i = 0; i < end; i++)
        lines += p[i] == '\n';
    hsrv_head *h = malloc(sizeof *h);
    int rc = hsrv_parse_head(copy, end, h);
    /* lines: the request line, the fields, the empty line */
    fuzz_must(rc == 0 || lines - 2 > HSRV_MAX_HEADERS, T, "indexing fails only past the cap");
    if (rc == 0) {
        size_t mlen = strcspn(p, " ");
        fuzz_must(mlen < sizeof h->method && strlen(h->method) == mlen &&
                      !memcmp(h->method, p, mlen),
                  T, "the method is the first word");
        fuzz_must(h->n_headers == lines - 2, T, "every field is indexed");
        fuzz_must(!*h->path || (h->path > copy && h->path < copy + end), T,
                  "the path is in the target");
        for (size_t i = 0; i < h->n_headers; i++) {
            char name[64];
            const hsrv_header *f = &h->headers[i];
            if (f->name_len >= sizeof name)
                continue;
            memcpy(name, f->name, f->name_len);
            name[f->name_len] = '\0';
            const char *v = hsrv_head_find(h, name);
            fuzz_must(v != NULL, T, "a field is found by its name");
            fuzz_must(!strpbrk(v, "\r\n"), T, "a value holds no CR or LF");
            for (size_t k = 0; k < i; k++)
                if (h->headers[k].name_len == f->name_len &&
                    !strncasecmp(h->headers[k].name, name, f->name_len)) {
                    fuzz_must(v == h->headers[k].value, T, "the first field of a name is found");
                    break;
                }
        }
    }
    free(h);
    free(copy);
}

static void fuzz_head(const char *p, size_t n, size_t step)
{
    size_t scanned = 0;
    size_t end = framing_head_end(p, n, &scanned);
    fuzz_must(end <= n, T, "the end is inside the bytes");
    size_t s2 = 0, end2 = 0;
    for (size_t k = step; !end2; k += step) {
        size_t upto = k < n ? k : n;
        end2 = framing_head_end(p, upto, &s2);
        if (upto == n)
            break;
    }
    fuzz_must(end == end2, T, "the end found in pieces is the end found at once");
    framing_error e = {0, NULL};
    framing_head h;
    if (!end) {
        if (framing_check_partial(p, n, &LIM, &e) == FRAMING_BAD)
            check_error(&e);
        else
            fuzz_must(n <= LIM.max_head, T, "an incomplete head over the limit is refused");
        return;
    }
    if (framing_check_head(p, end, &LIM, &h, &e) != FRAMING_OK) {
        check_error(&e);
        return;
    }
    fuzz_must(h.head_len == end && end <= LIM.max_head, T, "an accepted head is within the limit");
    index_head(p, end);
    fuzz_must(h.body != FRAMING_BODY_LENGTH || (h.length > 0 && h.length <= LIM.max_body), T,
              "an accepted length is within the limit");
    for (size_t i = 0; i < end; i++) {
        if (p[i] == '\r')
            fuzz_must(i + 1 < end && p[i + 1] == '\n', T, "no bare CR in an accepted head");
        if (p[i] == '\n' && i + 1 < end)
            fuzz_must(p[i + 1] != ' ' && p[i + 1] != '\t', T, "no folded line in an accepted head");
        if (p[i] == '\0')
            fuzz_must(0, T, "no NUL in an accepted head");
    }
}

static void fuzz_chunks(const char *p, size_t n, size_t step)
{
    framing_chunks a, b;
    framing_error ea = {0, NULL}, eb = {0, NULL};
    framing_rc ra, rb = FRAMING_MORE;
    framing_chunks_init(&a);
    framing_chunks_init(&b);
    size_t used_a = framing_chunks_feed(&a, p, n, &LIM, &ra, &ea);
    size_t used_b = 0;
    while (used_b < n && rb == FRAMING_MORE) {
        size_t k = n - used_b < step ? n - used_b : step;
        used_b += framing_chunks_feed(&b, p + used_b, k, &LIM, &rb, &eb);
    }
    fuzz_must(ra == rb && used_a == used_b, T, "chunks: the same verdict whole or in pieces");
    fuzz_must(used_a <= n, T, "chunks: never consumes more than given");
    if (ra == FRAMING_BAD)
        check_error(&ea);
    if (ra == FRAMING_OK) {
        fuzz_must(a.total <= LIM.max_body, T, "chunks: an accepted body is within the limit");
        char *copy = malloc(used_a + 1);
        memcpy(copy, p, used_a);
        fuzz_must(hsrv_dechunk(copy, used_a) == a.total, T,
                  "chunks: decoding gives the sizes' sum");
        free(copy);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned sel = data[0];
    const char *p = (const char *)data + 1;
    size_t n = size - 1, step = ((sel >> 1) & 7) + 1;
    if (sel & 1)
        fuzz_chunks(p, n, step);
    else
        fuzz_head(p, n, step);
    return 0;
}
