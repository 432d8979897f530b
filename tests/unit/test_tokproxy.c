/* test_tokproxy: the token estimate against the real o200k counts of the demo
 * results (tests/fixtures/tokproxy/pairs.json: compact JSON texts, their TOON texts,
 * both counted with gpt-tokenizer's o200k_base): the estimated TOON/JSON ratio stays
 * within 0.08 of the real one, and whenever tokproxy_prefer picks the TOON text it
 * costs no more real tokens than the JSON. Also the estimate's small rules. */
#include <math.h>
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
    return CHECK_DONE();
}
