/* upstream_req: the checks and encodings of a tool's upstream request: methods,
 * paths (traversal, escapes), header names, values and the reserved set, query
 * order and encoding, and the child traceparent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "upstream_req.h"
#include "util.h"

static void test_methods(void)
{
    CHECK(upstream_method_valid("GET"));
    CHECK(upstream_method_valid("POST"));
    CHECK(upstream_method_valid("PUT"));
    CHECK(upstream_method_valid("PATCH"));
    CHECK(upstream_method_valid("DELETE"));
    CHECK(upstream_method_valid("HEAD"));
    CHECK(!upstream_method_valid("get"));
    CHECK(!upstream_method_valid("OPTIONS"));
    CHECK(!upstream_method_valid("CONNECT"));
    CHECK(!upstream_method_valid(""));
    CHECK(!upstream_method_valid(NULL));
}

static void test_paths(void)
{
    /* accepted */
    CHECK(upstream_check_path("/") == NULL);
    CHECK(upstream_check_path("/api/v1/objects") == NULL);
    CHECK(upstream_check_path("/a/.hidden/b..c/...") == NULL);
    CHECK(upstream_check_path("/kn/a%20b/x:y@z;p=1,2") == NULL);
    CHECK(upstream_check_path("/a/%2e%2e%2e") == NULL); /* three dots: a name */
    CHECK(upstream_check_path("//double") == NULL);
    /* the start */
    CHECK_STR(upstream_check_path(""), "path must start with '/'");
    CHECK_STR(upstream_check_path("a/b"), "path must start with '/'");
    CHECK_STR(upstream_check_path("http://evil/x"), "path must start with '/'");
    /* traversal, plain */
    const char *dots = "path must not contain '.' or '..' segments";
    CHECK_STR(upstream_check_path("/.."), dots);
    CHECK_STR(upstream_check_path("/a/../b"), dots);
    CHECK_STR(upstream_check_path("/a/./b"), dots);
    CHECK_STR(upstream_check_path("/a/."), dots);
    CHECK_STR(upstream_check_path("/a/.."), dots);
    /* traversal, percent-encoded in any case and mix */
    const char *enc = "path must not contain encoded '.' or '..' segments";
    CHECK_STR(upstream_check_path("/a/%2e%2e/b"), enc);
    CHECK_STR(upstream_check_path("/a/%2E%2E"), enc);
    CHECK_STR(upstream_check_path("/a/.%2e/b"), enc);
    CHECK_STR(upstream_check_path("/a/%2E./b"), enc);
    CHECK_STR(upstream_check_path("/%2e"), enc);
    /* characters that must be escaped, and bad escapes */
    const char *chr = "path contains a character that must be percent-encoded (or use query=)";
    CHECK_STR(upstream_check_path("/a?b=1"), chr);
    CHECK_STR(upstream_check_path("/a#frag"), chr);
    CHECK_STR(upstream_check_path("/a b"), chr);
    CHECK_STR(upstream_check_path("/a\\b"), chr);
    CHECK_STR(upstream_check_path("/caf\xc3\xa9"), chr);
    CHECK_STR(upstream_check_path("/a\r\nHost: x"), chr);
    const char *pct = "path contains an invalid percent-encoding";
    CHECK_STR(upstream_check_path("/a%zz"), pct);
    CHECK_STR(upstream_check_path("/a%4"), pct);
    CHECK_STR(upstream_check_path("/a%"), pct);
}

/* Every byte, against the character sets written out: a path character (RFC 3986
 * unreserved, sub-delims, ':', '@', '/', '%' with two hex digits), a token character
 * of a header name (RFC 9110), and what the percent-encoding leaves alone
 * (unreserved). */
static void test_every_byte(void)
{
    for (int c = 1; c < 256; c++) {
        int alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        int unreserved = alnum || (c < 128 && strchr("-._~", c));
        int pathc = unreserved || (c < 128 && strchr("!$&'()*+,;=:@/", c));
        int tchar = alnum || (c < 128 && strchr("!#$%&'*+-.^_`|~", c));
        char path[8] = {'/', 'a', (char)c, 'b', 0};
        if (c == '%')
            memcpy(path + 2, "%41", 4);
        CHECK((upstream_check_path(path) == NULL) == (pathc || c == '%'));
        char name[4] = {'x', (char)c, 'y', 0};
        CHECK(upstream_header_name_valid(name) == tchar);
        buf b = BUF_INIT;
        char one = (char)c, want[4];
        upstream_pct_encode(&b, &one, 1);
        if (unreserved)
            snprintf(want, sizeof want, "%c", c);
        else
            snprintf(want, sizeof want, "%%%02X", c);
        CHECK_STR(b.data, want);
        buf_free(&b);
    }
    buf b = BUF_INIT; /* NUL is a byte like any other in a value */
    upstream_pct_encode(&b, "a\0b", 3);
    CHECK_STR(b.data, "a%00b");
    buf_free(&b);
}

static void test_headers(void)
{
    /* the reserved set, without case */
    const char *reserved[] = {"Authorization",   "HOST",           "x-account-id",
                              "X-Account-Type",  "x-tenant-id",    "X-Business-Domain",
                              "bkn-request-id",  "X-Request-Id",   "TraceParent",
                              "Accept-Language", "content-length", "Transfer-Encoding",
                              "connection",      "Cookie"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        CHECK(upstream_header_reserved(reserved[i]));
    CHECK(!upstream_header_reserved("x-http-method-override"));
    CHECK(!upstream_header_reserved("content-type"));
    CHECK(!upstream_header_reserved("authorization2"));
    CHECK(!upstream_header_reserved("x-account"));
    /* names: RFC 9110 tokens */
    CHECK(upstream_header_name_valid("X-Custom_1.a!#$%&'*+^`|~"));
    CHECK(!upstream_header_name_valid(""));
    CHECK(!upstream_header_name_valid("x custom"));
    CHECK(!upstream_header_name_valid("x:custom"));
    CHECK(!upstream_header_name_valid("x\r\nhost"));
    CHECK(!upstream_header_name_valid("(x)"));
    CHECK(!upstream_header_name_valid("caf\xc3\xa9"));
    /* values: no CR, LF or NUL anywhere in the given length */
    CHECK(upstream_header_value_valid("", 0));
    CHECK(upstream_header_value_valid("a b\tc \xc3\xa9", 8));
    CHECK(!upstream_header_value_valid("a\rb", 3));
    CHECK(!upstream_header_value_valid("a\nb", 3));
    CHECK(!upstream_header_value_valid("ab\0", 3));
    CHECK(!upstream_header_value_valid("x\r\nInjected: 1", 14));
    CHECK(upstream_header_value_valid("ok\r\n", 2)); /* only the given bytes count */
}

static char *query(const upstream_query_pair *p, size_t n)
{
    buf b = BUF_INIT;
    buf_puts(&b, "http://u/x");
    upstream_query_append(&b, p, n);
    return buf_steal(&b, NULL);
}

static void test_query(void)
{
    char *q;
    /* nothing at all: no "?" */
    q = query(NULL, 0);
    CHECK_STR(q, "http://u/x");
    free(q);
    /* keys in byte order (upper case before lower, a prefix first) */
    upstream_query_pair order[] = {
        {"b", "2", 1}, {"aa", "3", 1}, {"a", "1", 1}, {"B", "0", 1}, {"a_", "4", 1}};
    q = query(order, 5);
    CHECK_STR(q, "http://u/x?B=0&a=1&a_=4&aa=3&b=2");
    free(q);
    CHECK_STR(order[0].key, "b"); /* the input is not changed */
    /* an array repeats its key, its elements in order, wherever they were given */
    upstream_query_pair arr[] = {
        {"tag", "z", 1}, {"id", "9", 1}, {"tag", "a", 1}, {"limit", "10", 2}, {"tag", "m", 1}};
    q = query(arr, 5);
    CHECK_STR(q, "http://u/x?id=9&limit=10&tag=z&tag=a&tag=m");
    free(q);
    /* a scalar and an empty value */
    upstream_query_pair empty[] = {{"q", "", 0}};
    q = query(empty, 1);
    CHECK_STR(q, "http://u/x?q=");
    free(q);
    /* reserved and other bytes are encoded in keys and values; unreserved pass */
    upstream_query_pair enc[] = {{"a b&c=d", "x y+z/?#%&=", 11},
                                 {"k", "AZaz09-._~", 10},
                                 {"u", "caf\xc3\xa9", 5},
                                 {"z", "n\0l", 3}};
    q = query(enc, 4);
    CHECK_STR(q, "http://u/x?a%20b%26c%3Dd=x%20y%2Bz%2F%3F%23%25%26%3D&k=AZaz09-._~&u=caf%C3%A9"
                 "&z=n%00l");
    free(q);
    /* many pairs (more than fit the small index array), same key kept stable */
    upstream_query_pair many[40];
    char vals[40][4];
    for (int i = 0; i < 40; i++) {
        snprintf(vals[i], sizeof vals[i], "%d", i);
        many[i].key = i % 2 ? "o" : "e";
        many[i].value = vals[i];
        many[i].value_len = strlen(vals[i]);
    }
    q = query(many, 40);
    buf want = BUF_INIT;
    buf_puts(&want, "http://u/x");
    for (int i = 0; i < 40; i += 2)
        buf_printf(&want, "%ce=%d", i ? '&' : '?', i);
    for (int i = 1; i < 40; i += 2)
        buf_printf(&want, "&o=%d", i);
    CHECK_STR(q, want.data);
    buf_free(&want);
    free(q);
}

static void test_pct_encode(void)
{
    buf b = BUF_INIT;
    unsigned char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    upstream_pct_encode(&b, (const char *)all, sizeof all);
    /* 66 unreserved bytes pass, the other 190 become %XX */
    CHECK(b.len == 66 + 190 * 3);
    CHECK(strncmp(b.data, "%00%01", 6) == 0);
    CHECK(strstr(b.data, "%2C-.%2F0123456789%3A") != NULL);
    CHECK(strstr(b.data, "Z%5B%5C%5D%5E_%60a") != NULL);
    CHECK(strstr(b.data, "z%7B%7C%7D~%7F%80") != NULL);
    CHECK(strcmp(b.data + b.len - 3, "%FF") == 0);
    buf_free(&b);
}

static void test_traceparent(void)
{
    const char *span = "00f067aa0ba902b7";
    char out[56];
    /* a valid inbound header: its trace id and flags, our span */
    CHECK(upstream_traceparent_child("00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01",
                                     span, out));
    CHECK_STR(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    /* a later version is answered as 00; flags are kept */
    CHECK(upstream_traceparent_child("01-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-00",
                                     span, out));
    CHECK_STR(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
    /* refused: out is not touched */
    const char *bad[] = {
        NULL,
        "",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01",  /* version ff */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-b7ad6b7169203331-01",  /* upper case */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-0",   /* short */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-011", /* long */
        "00_4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01",  /* separator */
        "00-4bf92f3577b34da6a3ce929d0e0e473g-b7ad6b7169203331-01",  /* not hex */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-0x",  /* flags */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        strcpy(out, "untouched");
        CHECK(!upstream_traceparent_child(bad[i], span, out));
        CHECK_STR(out, "untouched");
    }
    upstream_traceparent_new("4bf92f3577b34da6a3ce929d0e0e4736", span, out);
    CHECK_STR(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
}

int main(void)
{
    test_methods();
    test_paths();
    test_headers();
    test_every_byte();
    test_query();
    test_pct_encode();
    test_traceparent();
    return CHECK_DONE();
}
