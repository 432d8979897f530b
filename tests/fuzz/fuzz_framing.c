/* fuzz_framing: libFuzzer target for the HTTP/1.1 request framing checker
 * (src/framing.c).
 *
 * Input: one selector byte, then bytes as a client would send them.
 *   bit 0: the bytes are a chunked body (else a request head);
 *   bits 1-3: piece size - 1 for the incremental feeds.
 *
 * Properties: the end of a head found by feeding the bytes in pieces is the one
 * found at once; an accepted head has no folded line, no bare CR, no whitespace
 * before a colon, a body length within the limit; a refusal has a known status and
 * a reason. A chunked body gives the same verdict and the same consumed count fed
 * whole or in pieces, and an accepted body is within the limit. */
#include <string.h>

#include "framing.h"
#include "fuzz_common.h"

#define T "fuzz_framing"

static const framing_limits LIM = {2048, 4096};

static void check_error(const framing_error *e)
{
    int s = e->status;
    fuzz_must(s == 400 || s == 413 || s == 414 || s == 417 || s == 501 || s == 505, T,
              "a refusal has a known status");
    fuzz_must(e->reason && *e->reason, T, "a refusal has a reason");
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
    if (ra == FRAMING_OK)
        fuzz_must(a.total <= LIM.max_body, T, "chunks: an accepted body is within the limit");
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
