/* fuzz_hclient: libFuzzer target for the lean HTTP client's response parser
 * (src/upstream/hclient.c).
 *
 * Input: one selector byte, then bytes as a server would send them.
 *   bit 0: the request was HEAD;
 *   bits 1-3: piece size - 1 for the incremental feed;
 *   bits 4-5: body cap (16, 256, 4096 or 1 MiB bytes).
 *
 * Properties: feeding the bytes whole and in pieces (unconsumed bytes offered again
 * with the next ones, as a connection does) gives the same verdict, status, headers,
 * body and consumed count; a finished response has a status of 100..999, a body
 * within the cap (none after HEAD/204/304), lower-case header names without
 * whitespace; a failure has a reason. */
#include <string.h>

#include "fuzz_common.h"
#include "hclient.h"

#define T "fuzz_hclient"

static int feed_pieces(hc_parser *p, const char *d, size_t n, size_t step, size_t *consumed)
{
    buf pend = BUF_INIT;
    size_t pos = 0;
    int rc = HC_MORE;
    *consumed = 0;
    while (rc == HC_MORE && pos < n) {
        size_t k = n - pos < step ? n - pos : step;
        buf_append(&pend, d + pos, k);
        pos += k;
        size_t used = 0;
        rc = hc_parser_feed(p, pend.data, pend.len, &used);
        fuzz_must(used <= pend.len, T, "consumed bytes are inside the input");
        *consumed += used;
        memmove(pend.data, pend.data + used, pend.len - used);
        pend.len -= used;
    }
    buf_free(&pend);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const size_t caps[] = {16, 256, 4096, 1u << 20};
    int head = data[0] & 1;
    size_t step = (size_t)((data[0] >> 1) & 7) + 1;
    size_t cap = caps[(data[0] >> 4) & 3];
    const char *d = (const char *)data + 1;
    size_t n = size - 1;

    hc_parser a, b;
    hc_parser_init(&a, head, cap);
    hc_parser_init(&b, head, cap);
    size_t used_a = 0, used_b = 0;
    int ra = hc_parser_feed(&a, d, n, &used_a);
    int rb = feed_pieces(&b, d, n, step, &used_b);
    fuzz_must(used_a <= n, T, "consumed bytes are inside the input");
    fuzz_must(ra == rb, T, "same verdict whole and in pieces");
    if (ra == HC_DONE) {
        fuzz_must(used_a == used_b, T, "same consumed count whole and in pieces");
        fuzz_must(a.status == b.status && a.status >= 100 && a.status <= 999, T,
                  "same status, 100..999");
        fuzz_must(a.body.len == b.body.len &&
                      (!a.body.len || memcmp(a.body.data, b.body.data, a.body.len) == 0),
                  T, "same body whole and in pieces");
        fuzz_must(a.body.len <= cap, T, "body within the cap");
        fuzz_must(!a.body.len || (!head && a.status != 204 && a.status != 304), T,
                  "no body after HEAD, 204 or 304");
        fuzz_must(a.n_headers == b.n_headers && a.arena.len == b.arena.len &&
                      (!a.arena.len || memcmp(a.arena.data, b.arena.data, a.arena.len) == 0),
                  T, "same headers whole and in pieces");
        fetch_header *h = hc_parser_headers(&a);
        for (size_t i = 0; i < a.n_headers; i++) {
            fuzz_must(h[i].name[0] != '\0', T, "header names are not empty");
            for (const char *s = h[i].name; *s; s++)
                fuzz_must(!(*s >= 'A' && *s <= 'Z') && (unsigned char)*s > ' ', T,
                          "header names are lower-case without whitespace");
        }
        free(h);
    } else if (ra == HC_FAIL) {
        fuzz_must(a.error && *a.error && b.error && *b.error, T, "a failure has a reason");
    } else if (ra == HC_MORE) {
        /* At the end of the bytes: a close ends a close-delimited body only. */
        int ea = hc_parser_eof(&a), eb = hc_parser_eof(&b);
        fuzz_must(ea == eb, T, "same verdict at close whole and in pieces");
        if (ea == HC_DONE)
            fuzz_must(a.body.len == b.body.len && a.body.len <= cap, T,
                      "same close-delimited body within the cap");
    }
    hc_parser_free(&a);
    hc_parser_free(&b);
    return 0;
}
