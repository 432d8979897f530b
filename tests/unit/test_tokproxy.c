/* test_tokproxy: the token estimate against the real o200k counts of the demo
 * results (tests/fixtures/tokproxy/pairs.json: compact JSON texts, their TOON texts,
 * both counted with gpt-tokenizer's o200k_base): the estimated TOON/JSON ratio stays
 * within 0.08 of the real one, and whenever tokproxy_prefer picks the TOON text it
 * costs no more real tokens than the JSON. Also the estimate's small rules, and the
 * table-driven count against a plain byte-by-byte statement of the same rules. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json.h"
#include "tokproxy.h"
#include "util.h"

static size_t est(const char *s)
{
    return tokproxy_count(s, strlen(s));
}

static void test_rules(void)
{
    CHECK(est("") == 0);
    CHECK(est("name") == 1);
    CHECK(est("approval_date") == 3);   /* 13 word bytes: one token per started 6 past the first */
    CHECK(est("1234567") == 3);         /* digits by threes */
    CHECK(est("a b") == 2);             /* the space belongs to the word after it */
    CHECK(est("a  b") == 3);            /* a run of spaces is its own token */
    CHECK(est("\":\"") == 1);           /* a run of punctuation */
    CHECK(est("\n\n  x") == 3);         /* breaks, indentation, word */
    CHECK(est("阿司匹林") == 4);        /* one per CJK code point */
    CHECK(tokproxy_prefer("ab", 2, "{\"a\":\"b\"}", 9));
    CHECK(!tokproxy_prefer("{\"a\":\"b\"}", 9, "ab", 2));
}

/* The rules of tokproxy.h stated byte by byte (the estimate's first form): the
 * table-driven count must return the same number on every text. */
static int ref_word(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int ref_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static int ref_break(unsigned char c)
{
    return c == '\n' || c == '\r' || c == '\t';
}

static size_t ref_count(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0, i = 0;
    while (i < len) {
        unsigned char c = p[i];
        size_t j = i + 1;
        if (ref_word(c)) {
            while (j < len && ref_word(p[j]))
                j++;
            n += 1 + (j - i - 1) / 6;
        } else if (ref_digit(c)) {
            while (j < len && ref_digit(p[j]))
                j++;
            n += (j - i + 2) / 3;
        } else if (c == ' ') {
            while (j < len && p[j] == ' ')
                j++;
            if (!(j - i == 1 && j < len && (ref_word(p[j]) || ref_digit(p[j]))))
                n++;
        } else if (ref_break(c)) {
            while (j < len && ref_break(p[j]))
                j++;
            n++;
        } else if (c < 0x80) {
            while (j < len && p[j] < 0x80 && p[j] > ' ' && !ref_word(p[j]) && !ref_digit(p[j]))
                j++;
            n += 1 + (j - i - 1) / 3;
        } else {
            j = i + (c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1);
            n++;
        }
        i = j;
    }
    return n;
}

static int ref_prefer(const char *t, size_t tl, const char *j, size_t jl)
{
    return ref_count(t, tl) * 100 <= ref_count(j, jl) * TOKPROXY_PERCENT;
}

static void same_as_ref(const char *s, size_t len)
{
    size_t got = tokproxy_count(s, len), want = ref_count(s, len);
    if (got != want)
        fprintf(stderr, "count %zu, the rules give %zu (%zu bytes)\n", got, want, len);
    CHECK(got == want);
}

/* Every byte pair and triple, random texts over an alphabet of every class (and
 * stray UTF-8 lead bytes cut at the end), and the choice between two such texts. */
static void test_differential(void)
{
    unsigned char b[3];
    for (int x = 0; x < 256; x++)
        for (int y = 0; y < 256; y++) {
            b[0] = (unsigned char)x, b[1] = (unsigned char)y;
            same_as_ref((const char *)b, 1);
            same_as_ref((const char *)b, 2);
            for (int z = 0; z < 256; z += 17) {
                b[2] = (unsigned char)z;
                same_as_ref((const char *)b, 3);
            }
        }
    static const char alpha[] = "aZ_09 \n\r\t{}\":,.-\x01\x7f\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80";
    uint64_t r = 88172645463325252u;
    char t1[200], t2[200];
    for (int k = 0; k < 20000; k++) {
        size_t l1 = 0, l2 = 0;
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        size_t n1 = r % sizeof t1, n2 = (r >> 20) % sizeof t2;
        while (l1 < n1) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            t1[l1++] = alpha[r % (sizeof alpha - 1)];
        }
        while (l2 < n2) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            t2[l2++] = (r & 3) ? t1[r % (l1 ? l1 : 1)] : alpha[(r >> 8) % (sizeof alpha - 1)];
        }
        same_as_ref(t1, l1);
        same_as_ref(t2, l2);
        CHECK(tokproxy_prefer(t1, l1, t2, l2) == ref_prefer(t1, l1, t2, l2));
        CHECK(tokproxy_prefer(t2, l2, t1, l1) == ref_prefer(t2, l2, t1, l1));
    }
}

static void test_fixtures(void)
{
    char *text = NULL;
    size_t len = 0;
    const char *path = CL_SOURCE_DIR "/tests/fixtures/tokproxy/pairs.json";
    CHECK(read_file_max(path, 1 << 22, &text, &len) == 0);
    char err[200] = "";
    json_value *doc = text ? json_parse(text, len, NULL, err, sizeof err) : NULL;
    CHECK(doc != NULL);
    const json_value *pairs = json_get(doc, "pairs");
    CHECK(json_count(pairs) >= 10);
    for (size_t i = 0; i < json_count(pairs); i++) {
        const json_value *p = json_at(pairs, i);
        size_t jl, tl;
        const char *j = json_get_str(json_get(p, "json"), &jl);
        const char *t = json_get_str(json_get(p, "text"), &tl);
        double rj = (double)json_get_int(json_get(p, "o200k_json"));
        double rt = (double)json_get_int(json_get(p, "o200k_text"));
        double real = rt / rj;
        double guess = (double)tokproxy_count(t, tl) / (double)tokproxy_count(j, jl);
        if (fabs(guess - real) > 0.08)
            fprintf(stderr, "%s: estimated ratio %.3f, real %.3f\n",
                    json_get_string(p, "name"), guess, real);
        CHECK(fabs(guess - real) <= 0.08);
        same_as_ref(t, tl);
        same_as_ref(j, jl);
        CHECK(tokproxy_prefer(t, tl, j, jl) == ref_prefer(t, tl, j, jl));
        CHECK(tokproxy_prefer(j, jl, t, tl) == ref_prefer(j, jl, t, tl));
        if (tokproxy_prefer(t, tl, j, jl))
            CHECK(rt <= rj); /* the text chosen never costs more than the JSON */
    }
    json_free(doc);
    free(text);
}

int main(void)
{
    test_rules();
    test_fixtures();
    test_differential();
    return CHECK_DONE();
}
