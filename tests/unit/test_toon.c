/* Unit tests for the TOON encoder (src/codec/toon.c): each feature with exact text,
 * numbers and big integers, key folding, nesting limits, invalid input. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json.h"
#include "toon.h"
#include "util.h"

static char last_err[256];

/* Encodes JSON text with options JSON (NULL = defaults); returns a malloc'd string,
 * or NULL on error (message in last_err). */
static char *enc(const char *json, const char *opts_json)
{
    char err[256];
    json_value *v = json_parse(json, strlen(json), NULL, err, sizeof err);
    if (!v) {
        fprintf(stderr, "bad test JSON %s: %s\n", json, err);
        return NULL;
    }
    toon_options o;
    toon_options_init(&o);
    if (opts_json) {
        json_value *ov = json_parse(opts_json, strlen(opts_json), NULL, err, sizeof err);
        int rc = ov ? toon_options_from_json(ov, &o, last_err, sizeof last_err) : -1;
        json_free(ov);
        if (rc < 0) {
            json_free(v);
            return NULL;
        }
    }
    buf out = BUF_INIT;
    buf_puts(&out, ""); /* a non-NULL, empty buffer */
    int rc = toon_encode(&out, v, &o, last_err, sizeof last_err);
    json_free(v);
    if (rc < 0) {
        CHECK(out.len == 0); /* restored on error */
        buf_free(&out);
        return NULL;
    }
    return buf_steal(&out, NULL);
}

#define EXPECT(json, opts, want)                                                                   \
    do {                                                                                           \
        char *got_ = enc(json, opts);                                                              \
        CHECK_STR(got_, want);                                                                     \
        free(got_);                                                                                \
    } while (0)

#define EXPECT_FAIL(json, opts, msgpart)                                                           \
    do {                                                                                           \
        last_err[0] = 0;                                                                           \
        char *got_ = enc(json, opts);                                                              \
        CHECK(got_ == NULL);                                                                       \
        CHECK(strstr(last_err, msgpart) != NULL);                                                  \
        free(got_);                                                                                \
    } while (0)

static void test_primitives(void)
{
    EXPECT("\"hello\"", NULL, "hello");
    EXPECT("\"\"", NULL, "\"\"");
    EXPECT("true", NULL, "true");
    EXPECT("null", NULL, "null");
    EXPECT("\"true\"", NULL, "\"true\"");
    EXPECT("\"42\"", NULL, "\"42\"");
    EXPECT("\"05\"", NULL, "\"05\"");
    EXPECT("\"1e-6\"", NULL, "\"1e-6\"");
    EXPECT("\"12a\"", NULL, "12a");
    EXPECT("\"-x\"", NULL, "\"-x\"");
    EXPECT("\" pad\"", NULL, "\" pad\"");
    EXPECT("\"a:b\"", NULL, "\"a:b\"");
    EXPECT("\"[x]\"", NULL, "\"[x]\"");
    EXPECT("\"a,b\"", NULL, "\"a,b\"");
    EXPECT("\"a|b\"", NULL, "a|b");
    EXPECT("\"line\\nbreak\\t\\\"q\\\" \\\\ \\u0001\"", NULL,
           "\"line\\nbreak\\t\\\"q\\\" \\\\ \\u0001\"");
    EXPECT("\"caf\\u00e9 \\ud83d\\ude00\"", NULL, "café 😀");
    EXPECT("\"\\u00a0nbsp\"", NULL, "\"\u00a0nbsp\""); /* JS trim() whitespace */
    EXPECT("\"ideo\\u3000\"", NULL, "\"ideo\u3000\"");
}

static void test_numbers(void)
{
    EXPECT(
        "[0, -0, -0.0, 1.0, 1.5000, 1e6, 1E+2, 0.000001, 1e-7, 1.5e-7, 1e20, 1e21, 123.456e2]",
        NULL,
        "[13]: 0,0,0,1,1.5,1000000,100,0.000001,1e-7,1.5e-7,100000000000000000000,1e+21,12345.6");
    EXPECT("[0.1, 0.30000000000000004, -2.5, 9007199254740993, -9223372036854775808]", NULL,
           "[5]: 0.1,0.30000000000000004,-2.5,9007199254740993,-9223372036854775808");
    /* Beyond int64 / double: exact, from the text. */
    EXPECT("[12345678901234567890123, -12345678901234567890123, 100000000000000000000000]", NULL,
           "[3]: 12345678901234567890123,-12345678901234567890123,100000000000000000000000");
    EXPECT("[1.23456789012345678901e5, 1.000000000000000005, 12345678901234567890123.5e0]", NULL,
           "[3]: 123456.789012345678901,1.000000000000000005,12345678901234567890123.5");
    EXPECT("[1.00000000000000000000001e-9, 1.2345678901234567891e30, 1e400, -1e-400, 0e400]", NULL,
           "[5]: 1.00000000000000000000001e-9,1.2345678901234567891e+30,1e+400,-1e-400,0");
    EXPECT("[0.00000123456789012345678901]", NULL, "[1]: 0.00000123456789012345678901");
    EXPECT("{\"big\":12345678901234567890123}", NULL, "big: 12345678901234567890123");

    /* Builders: non-finite doubles become null; an invalid number text fails. */
    json_value *a = json_new_array();
    json_push(a, json_new_double(1.0 / 0.0));
    json_push(a, json_new_double(-0.0));
    buf out = BUF_INIT;
    char err[128];
    CHECK(toon_encode(&out, a, NULL, err, sizeof err) == 0);
    CHECK_STR(out.data, "[2]: null,0");
    json_free(a);
    buf_reset(&out);
    a = json_new_numtext("01", 2);
    CHECK(toon_encode(&out, a, NULL, err, sizeof err) == -1);
    CHECK(strstr(err, "number") != NULL);
    json_free(a);
    buf_free(&out);
}

static void test_objects(void)
{
    EXPECT("{}", NULL, "");
    EXPECT("{\"b\":1,\"a\":{\"z\":\"x\",\"y\":{}},\"c\":[]}", NULL,
           "b: 1\na:\n  z: x\n  y:\nc: []");
    EXPECT("{\"my-key\":1,\"a.b\":2,\"_ok9\":3,\"9x\":4,\"\":5}", NULL,
           "\"my-key\": 1\na.b: 2\n_ok9: 3\n\"9x\": 4\n\"\": 5");
    EXPECT("{\"a\":\"x,y\"}", "{\"delimiter\":\"|\"}", "a: x,y");
    EXPECT("{\"a\":\"x|y\"}", "{\"delimiter\":\"|\"}", "a: \"x|y\"");
    EXPECT("{\"a\":{\"b\":{\"c\":1}}}", "{\"indent\":4}", "a:\n    b:\n        c: 1");
    /* Duplicate keys are written as stored. */
    EXPECT("{\"a\":1,\"a\":2}", NULL, "a: 1\na: 2");
}

static void test_arrays(void)
{
    EXPECT("[]", NULL, "[]");
    EXPECT("[1,\"a\",true,null]", NULL, "[4]: 1,a,true,null");
    EXPECT("{\"t\":[\"a b\",\"\"]}", NULL, "t[2]: a b,\"\"");
    EXPECT("{\"t\":[1,2]}", "{\"delimiter\":\"\\t\"}", "t[2\t]: 1\t2");
    EXPECT("{\"t\":[\"a,b\",\"c\"]}", "{\"delimiter\":\"|\"}", "t[2|]: a,b|c");
    /* Tabular: field order of the first row, others may differ in order. */
    EXPECT("{\"u\":[{\"id\":1,\"n\":\"A\"},{\"n\":\"B\",\"id\":2}]}", NULL,
           "u[2]{id,n}:\n  1,A\n  2,B");
    EXPECT("[{\"a\":1},{\"a\":2}]", "{\"delimiter\":\"|\"}", "[2|]{a}:\n  1\n  2");
    /* Not tabular: different keys, nested values, empty objects. */
    EXPECT("{\"u\":[{\"a\":1},{\"b\":2}]}", NULL, "u[2]:\n  - a: 1\n  - b: 2");
    EXPECT("{\"u\":[{\"a\":[1]},{\"a\":[2]}]}", NULL, "u[2]:\n  - a[1]: 1\n  - a[1]: 2");
    EXPECT("[{},{}]", NULL, "[2]:\n  -\n  -");
    /* Arrays of arrays, mixed lists, nested non-primitive arrays. */
    EXPECT("{\"m\":[[1,2],[],[\"x\"]]}", NULL, "m[3]:\n  - [2]: 1,2\n  - [0]:\n  - [1]: x");
    EXPECT("[1,[2],{\"a\":3}]", NULL, "[3]:\n  - 1\n  - [1]: 2\n  - a: 3");
    EXPECT("[[[1]],[{\"a\":1},{\"a\":2}]]", NULL,
           "[2]:\n  - [1]:\n    - [1]: 1\n  - [2]:\n    - a: 1\n    - a: 2");
    /* Objects as list items (§10). */
    EXPECT("[{\"rows\":[{\"a\":1},{\"a\":2}],\"n\":2}]", NULL,
           "[1]:\n  - rows[2]{a}:\n      1\n      2\n    n: 2");
    EXPECT("[{\"e\":[],\"o\":{},\"p\":{\"q\":1},\"l\":[{\"a\":1},2]}]", NULL,
           "[1]:\n  - e: []\n    o:\n    p:\n      q: 1\n    l[2]:\n      - a: 1\n      - 2");
    EXPECT("[{\"l\":[{\"a\":1},2],\"o\":{\"q\":1}}]", NULL,
           "[1]:\n  - l[2]:\n      - a: 1\n      - 2\n    o:\n      q: 1");
}

static void test_folding(void)
{
    const char *safe = "{\"keyFolding\":\"safe\"}";
    EXPECT("{\"a\":{\"b\":{\"c\":1}}}", safe, "a.b.c: 1");
    EXPECT("{\"a\":{\"b\":{\"c\":1}}}", "{\"keyFolding\":\"safe\",\"flattenDepth\":2}",
           "a.b:\n  c: 1");
    EXPECT("{\"a\":{\"b\":{\"c\":1}}}", "{\"keyFolding\":\"safe\",\"flattenDepth\":0}",
           "a:\n  b:\n    c: 1");
    EXPECT("{\"a\":{\"b\":[1,2]},\"x\":{\"y\":{}}}", safe, "a.b[2]: 1,2\nx.y:");
    EXPECT("{\"a\":{\"b\":{\"c\":1,\"d\":2}}}", safe, "a.b:\n  c: 1\n  d: 2");
    EXPECT("{\"d\":{\"full-name\":{\"x\":1}}}", safe, "d:\n  \"full-name\":\n    x: 1");
    /* Collisions: with a sibling literal key, and with a root dotted key. */
    EXPECT("{\"a\":{\"b\":1},\"a.b\":2}", safe, "a:\n  b: 1\na.b: 2");
    EXPECT("{\"r\":{\"a\":{\"b\":1},\"z\":0},\"r.a.b\":2}", safe,
           "r:\n  a:\n    b: 1\n  z: 0\nr.a.b: 2");
    EXPECT("{\"a\":{\"b\":{\"c\":{\"d\":1}}}}", "{\"keyFolding\":\"off\"}",
           "a:\n  b:\n    c:\n      d: 1");
}

static void test_limits_and_errors(void)
{
    /* Deep nesting: the default limit (1024) passes 600 levels, a lower limit fails. */
    json_value *root = json_new_array(), *cur = root;
    for (int i = 0; i < 600; i++) {
        json_value *n = json_new_array();
        json_push(cur, n);
        cur = n;
    }
    json_push(cur, json_new_int(7));
    buf out = BUF_INIT;
    char err[128];
    CHECK(toon_encode(&out, root, NULL, err, sizeof err) == 0);
    CHECK(out.len > 600 && strstr(out.data, "- [1]: 7") != NULL);
    toon_options o;
    toon_options_init(&o);
    o.max_depth = 100;
    size_t before = out.len;
    CHECK(toon_encode(&out, root, &o, err, sizeof err) == -1);
    CHECK(strstr(err, "nesting") != NULL);
    CHECK(out.len == before); /* appended text rolled back */
    json_free(root);

    json_value *obj = json_new_object();
    cur = obj;
    for (int i = 0; i < 200; i++) {
        json_value *n = json_new_object();
        json_set(cur, "k", n);
        cur = n;
    }
    buf_reset(&out);
    CHECK(toon_encode(&out, obj, &o, err, sizeof err) == -1);
    /* Folded, the chain is one line: no nesting to limit. */
    o.key_folding = TOON_FOLD_SAFE;
    buf_reset(&out);
    CHECK(toon_encode(&out, obj, &o, err, sizeof err) == 0);
    o.max_depth = 0;
    CHECK(toon_encode(&out, obj, &o, err, sizeof err) == 0);
    CHECK(strncmp(out.data, "k.k.k.", 6) == 0);
    json_free(obj);

    /* Invalid UTF-8 from a builder, in a value and in a key. */
    json_value *s = json_new_str("a\xff", 2);
    buf_reset(&out);
    CHECK(toon_encode(&out, s, NULL, err, sizeof err) == -1);
    CHECK(strstr(err, "UTF-8") != NULL);
    json_free(s);
    obj = json_new_object();
    json_obj_append(obj, "\xc0\x80", 2, json_new_int(1));
    CHECK(toon_encode(&out, obj, NULL, err, sizeof err) == -1);
    json_free(obj);

    /* Bad arguments and options. */
    CHECK(toon_encode(&out, NULL, NULL, err, sizeof err) == -1);
    toon_options_init(&o);
    o.delimiter = ';';
    json_value *n = json_new_int(1);
    CHECK(toon_encode(&out, n, &o, err, sizeof err) == -1);
    toon_options_init(&o);
    o.indent = 40;
    CHECK(toon_encode(&out, n, &o, err, sizeof err) == -1);
    json_free(n);
    EXPECT_FAIL("1", "{\"delimiter\":\";\"}", "delimiter");
    EXPECT_FAIL("1", "{\"indent\":0}", "indent");
    EXPECT_FAIL("1", "{\"keyFolding\":\"on\"}", "keyFolding");
    EXPECT_FAIL("1", "{\"flattenDepth\":-1}", "flattenDepth");
    EXPECT_FAIL("1", "[1]", "object");
    buf_free(&out);
}

int main(void)
{
    test_primitives();
    test_numbers();
    test_objects();
    test_arrays();
    test_folding();
    test_limits_and_errors();
    return CHECK_DONE();
}
