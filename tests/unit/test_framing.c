/* Unit tests of the HTTP/1.1 framing check (framing.c): heads, long lines, the end
 * of a head, chunked bodies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "framing.h"

static const framing_limits LIM = {4096, 2048};

/* Checks a whole head (the text must hold the empty line); returns the rc. */
static framing_rc head(const char *text, framing_head *h, framing_error *e)
{
    size_t scanned = 0, len = strlen(text);
    size_t end = framing_head_end(text, len, &scanned);
    if (!end)
        return framing_check_partial(text, len, &LIM, e);
    return framing_check_head(text, end, &LIM, h, e);
}

static int refused(const char *text, int status, const char *reason_part)
{
    framing_head h;
    framing_error e = {0, NULL};
    if (head(text, &h, &e) != FRAMING_BAD) {
        fprintf(stderr, "accepted: %s\n", text);
        return 0;
    }
    if (e.status != status || !strstr(e.reason, reason_part)) {
        fprintf(stderr, "%d %s for: %s\n", e.status, e.reason, text);
        return 0;
    }
    return 1;
}

#define POST "POST /kn/x HTTP/1.1\r\nHost: a\r\n"

static void test_heads(void)
{
    framing_head h;
    framing_error e;
    CHECK(head("GET / HTTP/1.1\r\nHost: a\r\n\r\n", &h, &e) == FRAMING_OK);
    CHECK(h.body == FRAMING_BODY_NONE && h.head_len == 27);
    CHECK(head(POST "Content-Length: 12\r\n\r\nbody", &h, &e) == FRAMING_OK);
    CHECK(h.body == FRAMING_BODY_LENGTH && h.length == 12);
    CHECK(head(POST "Transfer-Encoding: Chunked\r\nExpect: 100-continue\r\n\r\n", &h, &e) ==
          FRAMING_OK);
    CHECK(h.body == FRAMING_BODY_CHUNKED && h.expect_continue);
    CHECK(head("GET / HTTP/1.0\n\n", &h, &e) == FRAMING_OK); /* bare LF, no Host in 1.0 */
    CHECK(head("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", &h, &e) == FRAMING_OK);
    CHECK(head("GET http://a/b?c=%20 HTTP/1.1\r\nHost: a\r\n\r\n", &h, &e) == FRAMING_OK);
    CHECK(head(POST "Content-Length: 0\r\n\r\n", &h, &e) == FRAMING_OK && !h.body);
    CHECK(head("GET / HTTP/1.1\r\nHost: a\r\n", &h, &e) == FRAMING_MORE);

    /* ambiguous lengths and codings */
    CHECK(refused(POST "Content-Length: 2\r\nContent-Length: 51\r\n\r\n", 400, "Content-Length"));
    CHECK(refused(POST "Content-Length: 5\r\ncontent-length: 5\r\n\r\n", 400, "Content-Length"));
    CHECK(refused(POST "Content-Length: +51\r\n\r\n", 400, "Content-Length"));
    CHECK(refused(POST "Content-Length: 5, 5\r\n\r\n", 400, "Content-Length"));
    CHECK(refused(POST "Content-Length: \t5\r\n\r\n", 400, "Content-Length"));
    CHECK(refused(POST "Content-Length: 0x10\r\n\r\n", 400, "Content-Length"));
    CHECK(refused(POST "Content-Length: 99999999999999999999\r\n\r\n", 400, "Content-Length"));
    CHECK(refused(POST "Content-Length: 4096\r\n\r\n", 413, "max_body_bytes"));
    CHECK(refused(POST "Transfer-Encoding : chunked\r\n\r\n", 400, "colon"));
    CHECK(refused(POST "Transfer-Encoding:\tchunked\r\n\r\n", 501, "transfer coding"));
    CHECK(refused(POST "Transfer-Encoding: gzip, chunked\r\n\r\n", 501, "transfer coding"));
    CHECK(refused(POST "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400,
                  "both Transfer-Encoding and Content-Length"));
    CHECK(refused(POST "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
                  "Transfer-Encoding"));
    CHECK(refused("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "HTTP/1.0"));
    CHECK(refused("HEAD / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n", 400, "HEAD"));
    /* header syntax */
    CHECK(refused(POST "X-A: 1\r\n  folded\r\n\r\n", 400, "folding"));
    CHECK(refused(POST "\tX-A: 1\r\n\r\n", 400, "folding"));
    CHECK(refused(POST "X A: 1\r\n\r\n", 400, "header name"));
    CHECK(refused(POST ": 1\r\n\r\n", 400, "field name"));
    CHECK(refused(POST "X-A 1\r\n\r\n", 400, "colon"));
    CHECK(refused(POST "X-A: a\x01b\r\n\r\n", 400, "header value"));
    CHECK(refused(POST "X-A: a\rb\r\n\r\n", 400, "bare CR"));
    CHECK(refused(POST "Authorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n", 400,
                  "Authorization"));
    CHECK(refused(POST "Host: b\r\n\r\n", 400, "Host"));
    /* a repeated name in any case, matched over its first eight bytes and the rest */
    CHECK(refused(POST "MCP-PROTOCOL-VERSION: a\r\nmcp-protocol-version: b\r\n\r\n", 400,
                  "Mcp-Protocol-Version"));
    CHECK(refused(POST "content-LENGTH: 1\r\nContent-Length: 1\r\n\r\n", 400, "Content-Length"));
    /* the stateless MCP era compares these with the body: one value each */
    CHECK(refused(POST "Mcp-Method: tools/list\r\nmcp-method: tools/call\r\n\r\n", 400,
                  "Mcp-Method"));
    CHECK(refused(POST "Mcp-Name: a\r\nMCP-NAME: b\r\n\r\n", 400, "Mcp-Name"));
    CHECK(refused(POST "HOST: b\r\n\r\n", 400, "Host"));
    CHECK(refused(POST "x-authorizatioN: a\r\nX-Authorization: b\r\n\r\n", 400, "X-Authorization"));
    /* same length, one byte apart (in the word, in the tail): different names */
    CHECK(head(POST "Content-Lengtx: 1\r\nContent-Length: 0\r\n\r\n", &h, &e) == FRAMING_OK);
    CHECK(head(POST "Content-Tength: 1\r\nContent-Length: 0\r\n\r\n", &h, &e) == FRAMING_OK);
    CHECK(refused("GET / HTTP/1.1\r\n\r\n", 400, "Host"));
    CHECK(refused(POST "Origin: http://a\r\nOrigin: http://b\r\n\r\n", 400, "Origin"));
    CHECK(refused(POST "Expect: nothing\r\n\r\n", 417, "expectation"));
    /* request line */
    CHECK(refused("GET /\r\n\r\n", 400, "HTTP/0.9"));
    CHECK(refused("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, "version"));
    CHECK(refused("GET / HTTP/1.1x\r\nHost: a\r\n\r\n", 400, "version"));
    CHECK(refused("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "request line"));
    CHECK(refused("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400, "request line"));
    CHECK(refused("BREW / HTTP/1.1\r\nHost: a\r\n\r\n", 501, "method"));
    CHECK(refused("get / HTTP/1.1\r\nHost: a\r\n\r\n", 501, "method"));
    CHECK(refused("TRACE / HTTP/1.1\r\nHost: a\r\n\r\n", 501, "method"));
    CHECK(refused("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "method"));
    CHECK(refused("GET /a\"b HTTP/1.1\r\nHost: a\r\n\r\n", 400, "target"));
    CHECK(refused("GET /a%2 HTTP/1.1\r\nHost: a\r\n\r\n", 400, "percent"));
    CHECK(refused("GET a HTTP/1.1\r\nHost: a\r\n\r\n", 400, "target"));
    CHECK(refused("GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400, "target"));
    CHECK(head("GET https://[::1]:8443/x HTTP/1.1\r\nHost: a\r\n\r\n", &h, &e) == FRAMING_OK);
    CHECK(head("GET http://a.example HTTP/1.1\r\nHost: a\r\n\r\n", &h, &e) == FRAMING_OK);
    CHECK(refused("GET http://[zz]/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, "authority"));
    CHECK(refused("GET http://a:b/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, "authority"));
    CHECK(refused("GET http://a:99999999/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, "authority"));
    CHECK(refused("GET http://a@b/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, "authority"));
    CHECK(refused("GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", 400, "authority"));
    CHECK(refused("GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", 400, "target"));

    /* sizes: the request line, then the block */
    static char big[9000];
    memset(big, 'a', sizeof big - 1);
    memcpy(big, "GET /", 5);
    CHECK(refused(big, 414, "request line"));
    snprintf(big, sizeof big, "GET / HTTP/1.1\r\nX: %05000d", 0);
    CHECK(refused(big, 413, "header block"));
    strcat(big, "\r\n\r\n");
    CHECK(refused(big, 413, "header block"));
}

static void test_head_end(void)
{
    const char *t = "GET / HTTP/1.1\r\nHost: a\r\n\r\nrest";
    size_t scanned = 0;
    /* fed a byte at a time, the end is found once, where it is */
    size_t found = 0;
    for (size_t n = 1; n <= strlen(t) && !found; n++)
        found = framing_head_end(t, n, &scanned);
    CHECK(found == strlen(t) - 4);
}

/* Feeds text in pieces of `step` bytes; returns the rc and the bytes consumed. */
static framing_rc chunks(const char *text, size_t step, size_t *used, framing_error *e)
{
    framing_chunks st;
    framing_chunks_init(&st);
    framing_rc rc = FRAMING_MORE;
    size_t len = strlen(text), pos = 0;
    while (pos < len && rc == FRAMING_MORE) {
        size_t n = len - pos < step ? len - pos : step;
        pos += framing_chunks_feed(&st, text + pos, n, &LIM, &rc, e);
    }
    *used = pos;
    return rc;
}

static void test_chunks(void)
{
    framing_error e;
    size_t used;
    const char *ok = "5\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\nGET / HTTP/1.1";
    for (size_t step = 1; step < 40; step += 6) {
        CHECK(chunks(ok, step, &used, &e) == FRAMING_OK);
        CHECK(used == strlen(ok) - strlen("GET / HTTP/1.1"));
    }
    CHECK(chunks("5\nhello\n0\n\n", 3, &used, &e) == FRAMING_OK);
    CHECK(chunks("5\r\nhel", 2, &used, &e) == FRAMING_MORE);
    CHECK(chunks("zz\r\n", 1, &used, &e) == FRAMING_BAD && e.status == 400 &&
          strstr(e.reason, "chunk size"));
    CHECK(chunks("\r\n", 1, &used, &e) == FRAMING_BAD && strstr(e.reason, "chunk size"));
    CHECK(chunks("5;a=b\r\nhello\r\n0\r\n\r\n", 4, &used, &e) == FRAMING_BAD &&
          strstr(e.reason, "extension"));
    CHECK(chunks("5 \r\nhello\r\n0\r\n\r\n", 4, &used, &e) == FRAMING_BAD);
    CHECK(chunks("5\r\nhelloX\r\n0\r\n\r\n", 4, &used, &e) == FRAMING_BAD &&
          strstr(e.reason, "CRLF"));
    CHECK(chunks("0\r\nX-Trailer: 1\r\n\r\n", 4, &used, &e) == FRAMING_BAD &&
          strstr(e.reason, "trailer"));
    CHECK(chunks("5\rhello", 4, &used, &e) == FRAMING_BAD);
    CHECK(chunks("801\r\n", 4, &used, &e) == FRAMING_BAD && e.status == 413); /* 2049 > 2048 */
    CHECK(chunks("400\r\n", 4, &used, &e) == FRAMING_MORE);
    CHECK(chunks("ffffffffffffffffff\r\n", 4, &used, &e) == FRAMING_BAD && e.status == 413);
}

/* A control byte anywhere in a long header line (each offset, so every place in an
 * eight-byte word and the tail), in its value or its name: refused with the same
 * reason as a short line; tabs and bytes from 0x80 in a value pass. */
static void test_long_lines(void)
{
    static const char value[] = "Bearer 0123456789abcdefghijklmnopqrstuvwxyz-0123456789";
    char text[512];
    framing_head h;
    framing_error e = {0, NULL};
    for (size_t at = 0; at < sizeof value - 1; at++) {
        static const struct {
            char c;
            const char *reason;
        } bad[] = {{'\x01', "header value"},
                   {'\x7f', "header value"},
                   {'\r', "bare CR"},
                   {'\x1f', "header value"},
                   {'\0', "header value"}};
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            char v[sizeof value];
            memcpy(v, value, sizeof value);
            v[at] = bad[k].c;
            int n = snprintf(text, sizeof text, POST "X-Long: ");
            memcpy(text + n, v, sizeof value - 1);
            n += (int)sizeof value - 1;
            memcpy(text + n, "\r\n\r\n", 5);
            size_t len = (size_t)n + 4;
            e.status = 0;
            e.reason = NULL;
            framing_rc rc = framing_check_head(text, len, &LIM, &h, &e);
            CHECK(rc == FRAMING_BAD);
            CHECK(e.reason && strstr(e.reason, bad[k].reason));
        }
        char v[sizeof value];
        memcpy(v, value, sizeof value);
        v[at] = at % 2 ? '\t' : '\xe9';
        snprintf(text, sizeof text, POST "X-Long: %s\r\n\r\n", v);
        CHECK(head(text, &h, &e) == FRAMING_OK);
    }
    /* names of every length to 40 (letters, digits, '-' and other tchars), a byte that
     * is not a tchar at each position: refused; the name alone: accepted, and a
     * SINGLE name found whatever its length */
    static const char name_chars[] = "Ab-9_z!Z0~x.Q'y*W|m^n`o#p$q%r&s+tuvwxyzab";
    static const char not_tchar[] = {'(', '@', '[', '{', '"', '/', '\x80', '\xff', ',', '\x01'};
    int misread = 0;
    for (size_t len = 1; len <= 40; len++) {
        char name[48];
        for (size_t i = 0; i < len; i++)
            name[i] = i % 3 == 1 ? name_chars[i] : (char)('a' + (i * 7) % 26);
        snprintf(text, sizeof text, POST "%.*s: v\r\n\r\n", (int)len, name);
        misread += head(text, &h, &e) != FRAMING_OK;
        for (size_t at = 0; at < len; at++)
            for (size_t k = 0; k < sizeof not_tchar; k++) {
                char bad[48];
                memcpy(bad, name, len);
                bad[at] = not_tchar[k];
                snprintf(text, sizeof text, POST "%.*s: v\r\n\r\n", (int)len, bad);
                misread += !refused(text, 400, "field name");
            }
    }
    CHECK(misread == 0);
    CHECK(refused(POST "Mcp-Protocol-Version: a\r\nMCP-protocol-VERSION: b\r\n\r\n", 400,
                  "Mcp-Protocol-Version"));
    CHECK(refused(POST "X-Long-Name\x01"
                       "abcdefghij: v\r\n\r\n",
                  400, "field name"));
    CHECK(refused(POST "X-Long: abcdefg\x7f"
                       "\r\n\r\n",
                  400, "header value"));
}

int main(void)
{
    test_heads();
    test_long_lines();
    test_head_end();
    test_chunks();
    return CHECK_DONE();
}
