/* test_json: unit tests for the JSON codec and runners for the JSON corpora.
 *
 *   test_json unit            C API tests (parser, writer, numbers, limits, Lua bridge)
 *   test_json corpus DIR      y_* must parse, n_* must fail, plus round-trip properties
 *   test_json suite DIR       the public JSONTestSuite (DIR/test_parsing, test_transform);
 *                             exits 77 (skipped) if DIR does not exist
 *   test_json decode DIR...   the direct Lua decoder against the tree path on every
 *                             file of the DIRs and on 5000 generated texts */
#include "json.h"
#include "json_lua.h"

#include <dirent.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "check.h"

/* ------------------------------------------------------------------ helpers */

static char last_err[256];

static json_value *parse(const char *s)
{
    return json_parse(s, strlen(s), NULL, last_err, sizeof last_err);
}

/* Parses s and writes it back (stored order, or canonical); static result. */
static const char *rt(const char *s, int canonical)
{
    static buf out = BUF_INIT;
    buf_reset(&out);
    json_value *v = parse(s);
    if (!v)
        return NULL;
    json_write(&out, v, canonical);
    json_free(v);
    return out.data;
}

/* The error message for a text that must fail (or "(parsed)"). */
static const char *perr(const char *s, size_t len, const json_limits *lim)
{
    json_value *v = json_parse(s, len, lim, last_err, sizeof last_err);
    if (v) {
        json_free(v);
        return "(parsed)";
    }
    return last_err;
}

static json_type type_of(const char *s)
{
    json_value *v = parse(s);
    json_type t = v ? json_typeof(v) : (json_type)-1;
    json_free(v);
    return t;
}

static int read_file(const char *path, buf *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char chunk[65536];
    size_t n;
    buf_reset(b);
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        buf_append(b, chunk, n);
    fclose(f);
    if (!b->data)
        buf_reserve(b, 0);
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted list of file names in dir (caller frees each and the array). */
static char **list_dir(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    *n = 0;
    if (!d)
        return NULL;
    char **names = NULL;
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            names = xrealloc(names, cap * sizeof *names);
        }
        names[(*n)++] = xstrdup(de->d_name);
    }
    closedir(d);
    qsort(names, *n, sizeof *names, name_cmp);
    return names;
}

/* write -> parse -> write is a fixed point, for stored and canonical order. */
static int fixed_point(const json_value *v)
{
    int ok = 1;
    for (int canonical = 0; canonical < 2; canonical++) {
        buf a = BUF_INIT, b = BUF_INIT;
        json_write(&a, v, canonical);
        json_value *v2 = json_parse(a.data, a.len, NULL, last_err, sizeof last_err);
        if (!v2) {
            ok = 0;
        } else {
            json_write(&b, v2, canonical);
            ok = ok && a.len == b.len && memcmp(a.data, b.data, a.len) == 0;
            json_free(v2);
        }
        buf_free(&a);
        buf_free(&b);
    }
    return ok;
}

/* ------------------------------------------------------------------ unit tests */

static void test_types(void)
{
    CHECK(type_of("null") == JSON_NULL);
    CHECK(type_of("true") == JSON_TRUE);
    CHECK(type_of("false") == JSON_FALSE);
    CHECK(type_of("0") == JSON_INT);
    CHECK(type_of("-0") == JSON_INT);
    CHECK(type_of("42") == JSON_INT);
    CHECK(type_of("1.5") == JSON_DOUBLE);
    CHECK(type_of("\"s\"") == JSON_STRING);
    CHECK(type_of("[]") == JSON_ARRAY);
    CHECK(type_of("{}") == JSON_OBJECT);

    json_value *v = parse("{\"a\":1,\"b\":[true,\"x\"],\"a\":2,\"s\":\"str\"}");
    CHECK(v != NULL);
    CHECK(json_count(v) == 4);
    CHECK(json_get_int(json_get(v, "a")) == 2); /* last duplicate wins in lookups */
    CHECK(json_count(json_get(v, "b")) == 2);
    CHECK(json_typeof(json_at(json_get(v, "b"), 1)) == JSON_STRING);
    CHECK(json_get(v, "zz") == NULL);
    CHECK_STR(json_get_string(v, "s"), "str");
    CHECK(json_get_string(v, "a") == NULL);
    size_t kl;
    CHECK_STR(json_key_at(v, 1, &kl), "b");
    CHECK(kl == 1);
    json_free(v);
}

static void test_numbers(void)
{
    json_value *v = parse("-9223372036854775808");
    CHECK(v && json_typeof(v) == JSON_INT && json_get_int(v) == INT64_MIN);
    json_free(v);
    v = parse("9223372036854775807");
    CHECK(v && json_typeof(v) == JSON_INT && json_get_int(v) == INT64_MAX);
    json_free(v);
    CHECK(type_of("9223372036854775808") == JSON_NUMTEXT);
    CHECK(type_of("-9223372036854775809") == JSON_NUMTEXT);
    CHECK(type_of("10000000000000000999") == JSON_NUMTEXT);
    CHECK(type_of("123456789012345678901234") == JSON_NUMTEXT);
    CHECK(type_of("10000000000000000000") == JSON_NUMTEXT); /* integers beyond int64 */
    CHECK(type_of("1.000000000000000005") == JSON_NUMTEXT);
    CHECK(type_of("1e400") == JSON_NUMTEXT);
    CHECK(type_of("-1e400") == JSON_NUMTEXT);
    CHECK(type_of("1e-400") == JSON_NUMTEXT);
    CHECK(type_of("5e-324") == JSON_NUMTEXT); /* %.15g gives 4.94065645841247e-324 */
    CHECK(type_of("0.1") == JSON_DOUBLE);
    CHECK(type_of("9007199254740993.0") == JSON_NUMTEXT); /* 16 digits, not a double */
    CHECK(type_of("9007199254740992.0") == JSON_DOUBLE);
    CHECK(type_of("0.12345678901234567") == JSON_NUMTEXT); /* reads back ...566 */
    CHECK(type_of("1e2") == JSON_DOUBLE);
    CHECK(type_of("1.0") == JSON_DOUBLE);
    CHECK(type_of("1E+2") == JSON_DOUBLE);
    CHECK(type_of("0.30000000000000004") == JSON_DOUBLE); /* 17 digits, exact shortest */
    CHECK(type_of("1.7976931348623157e308") == JSON_DOUBLE);
    CHECK(type_of("0e99999999999999999999") == JSON_DOUBLE);
    CHECK(type_of("123.4560000000000000000000") == JSON_DOUBLE); /* trailing zeros */

    CHECK_STR(rt("[1.5,0.1,1e2,1.0,-0.0,2.5e-3,100.0]", 0),
              "[1.5,0.1,100.0,1.0,-0.0,0.0025,100.0]");
    CHECK_STR(rt("[9007199254740993]", 0), "[9007199254740993]");
    CHECK_STR(rt("[12345678901234567890123]", 0), "[12345678901234567890123]");
    CHECK_STR(rt("[1.000000000000000005,1E400,-0]", 0), "[1.000000000000000005,1E400,0]");
    CHECK_STR(rt("1e100", 0), "1e+100");
    CHECK_STR(rt("0.30000000000000004", 0), "0.30000000000000004");

    buf b = BUF_INIT;
    json_write_double(&b, 3.0);
    CHECK_STR(b.data, "3.0");
    buf_reset(&b);
    json_write_double(&b, 0.1 + 0.2);
    CHECK_STR(b.data, "0.30000000000000004");
    buf_reset(&b);
    json_write_double(&b, 1.0 / 0.0);
    CHECK_STR(b.data, "null");
    buf_reset(&b);
    json_write_double(&b, 1e21);
    CHECK_STR(b.data, "1e+21");
    buf_free(&b);

    v = parse("12345678901234567890123");
    size_t len;
    CHECK_STR(json_get_str(v, &len), "12345678901234567890123");
    CHECK(json_get_double(v) > 1.2e22 && json_get_double(v) < 1.3e22);
    json_free(v);

    CHECK(json_number_valid("-1.5e+3", 7));
    CHECK(!json_number_valid("01", 2));
    CHECK(!json_number_valid("1.", 2));
    CHECK(!json_number_valid("", 0));
    CHECK(!json_number_valid("1 ", 2));
}

static void test_errors(void)
{
    CHECK_STR(perr("[1,2,]", 6, NULL), "unexpected character at byte 5");
    CHECK_STR(perr("{\"a\":1,}", 8, NULL), "expected string key at byte 7");
    CHECK_STR(perr("[01]", 4, NULL), "leading zero in number at byte 2");
    CHECK_STR(perr("[NaN]", 5, NULL), "unexpected character at byte 1");
    CHECK_STR(perr("[Infinity]", 10, NULL), "unexpected character at byte 1");
    CHECK_STR(perr("[1] // c", 8, NULL), "trailing characters after JSON value at byte 4");
    CHECK_STR(perr("[\"a\x01\"]", 6, NULL), "control character in string at byte 3");
    CHECK_STR(perr("[\"\\x\"]", 6, NULL), "invalid escape in string at byte 2");
    CHECK_STR(perr("[\"ab\\ud800\"]", 12, NULL), "lone high surrogate \\u escape at byte 4");
    CHECK_STR(perr("[\"\\udc00\"]", 10, NULL), "lone low surrogate \\u escape at byte 2");
    CHECK_STR(perr("[\"\\ud800\\u0041\"]", 16, NULL), "lone high surrogate \\u escape at byte 2");
    CHECK_STR(perr("[\"\\u12G4\"]", 10, NULL), "invalid \\u escape at byte 2");
    CHECK_STR(perr("\xef\xbb\xbf{}", 5, NULL), "byte order mark not allowed at byte 0");
    CHECK_STR(perr("{} x", 4, NULL), "trailing characters after JSON value at byte 3");
    CHECK_STR(perr("", 0, NULL), "unexpected end of input at byte 0");
    CHECK_STR(perr("   ", 3, NULL), "unexpected end of input at byte 3");
    CHECK_STR(perr("[1", 2, NULL), "unterminated array at byte 2");
    CHECK_STR(perr("{\"a\"", 4, NULL), "expected ':' at byte 4");
    CHECK_STR(perr("\"abc", 4, NULL), "unterminated string at byte 4");
    CHECK_STR(perr("[1.]", 4, NULL), "expected digit after decimal point at byte 3");
    CHECK_STR(perr("[1e+]", 5, NULL), "expected digit in exponent at byte 4");
    CHECK_STR(perr("[-]", 3, NULL), "invalid number at byte 2");
    CHECK_STR(perr("[tru]", 5, NULL), "invalid literal at byte 4");
    CHECK_STR(perr("{1:2}", 5, NULL), "expected string key at byte 1");
    CHECK_STR(perr("[1 2]", 5, NULL), "expected ',' or ']' at byte 3");
    CHECK_STR(perr("{\"a\":1 \"b\":2}", 13, NULL), "expected ',' or '}' at byte 7");
    /* Embedded NUL is not whitespace. */
    CHECK_STR(perr("[1]\0", 4, NULL), "trailing characters after JSON value at byte 3");
}

/* json_parse_keep: members not named are checked and skipped; a raw member is its
 * exact bytes; a refusal is json_parse's, message and offset. */
/* A parsed tree is packed (a string's bytes and an object's members and keys in the
 * node's own block): reading, growing, removing and freeing it still work. */
static void test_packed_tree(void)
{
    const char *text = "{\"a\":\"x\",\"k\\u00e9\\\"y\":{\"n\":\"\",\"e\":{}},\"\":[\"s\\n\"],\"z\":1}";
    char err[128];
    json_value *v = json_parse(text, strlen(text), NULL, err, sizeof err);
    CHECK(v != NULL);
    CHECK_STR(json_get_string(v, "a"), "x");
    const json_value *o = json_get(v, "k\xc3\xa9\"y");
    CHECK(o && json_count(o) == 2 && json_get_string(o, "n") && !*json_get_string(o, "n"));
    CHECK(json_count(json_get(o, "e")) == 0);
    CHECK_STR(json_get_str(json_at(json_get(v, ""), 0), NULL), "s\n");
    size_t klen;
    CHECK_STR(json_key_at(v, 1, &klen), "k\xc3\xa9\"y");
    CHECK(klen == 5);
    /* grows past its block: its members move, its keys stay */
    for (int i = 0; i < 9; i++) {
        char k[8];
        snprintf(k, sizeof k, "g%d", i);
        json_set(v, k, json_new_int(i));
    }
    json_set(v, "a", json_new_str("w", 1));
    CHECK(json_remove(v, "z") && !json_get(v, "z"));
    CHECK(json_remove(v, "g3") && json_count(v) == 11);
    json_value *c = json_clone(v);
    json_free(v);
    buf b = BUF_INIT;
    json_write(&b, c, 0);
    CHECK_STR(b.data, "{\"a\":\"w\",\"k\u00e9\\\"y\":{\"n\":\"\",\"e\":{}},\"\":[\"s\\n\"],\"g0\":0,"
                      "\"g1\":1,\"g2\":2,\"g4\":4,\"g5\":5,\"g6\":6,\"g7\":7,\"g8\":8}");
    buf_free(&b);
    json_free(c);
    /* removing from a parsed object that never grew */
    v = json_parse("{\"p\":\"q\",\"r\":{\"s\":1}}", 21, NULL, err, sizeof err);
    CHECK(v && json_remove(v, "p") && json_count(v) == 1 && json_get(v, "r"));
    json_free(v);
}

static void test_keep(void)
{
    static const json_keep op[] = {{"operation_id", NULL, 0}, {"attempt", NULL, 0}, {NULL, NULL, 0}};
    static const json_keep keep[] = {
        {"operation", op, 0}, {"receipt", NULL, 1}, {"execute", NULL, 0}, {NULL, NULL, 0}};
    const char *text = "{\"operation\":{\"operation_id\":\"op_1\",\"x\":[1,{\"y\":null}],\"attempt\":2},"
                       "\"created\":true, \"receipt\" : {\"id\":9007199254740993,\"e\":[],\"o\":{},"
                       "\"s\":\"\\u00e9\\\"\"} ,\"execute\":false,\"big\":1.5e300}";
    char err[128];
    json_value *v = json_parse_keep(text, strlen(text), NULL, keep, err, sizeof err);
    CHECK(v != NULL);
    buf b = BUF_INIT;
    json_write(&b, v, 0);
    CHECK_STR(b.data, "{\"operation\":{\"operation_id\":\"op_1\",\"attempt\":2},\"receipt\":"
                      "\"{\\\"id\\\":9007199254740993,\\\"e\\\":[],\\\"o\\\":{},\\\"s\\\":"
                      "\\\"\\\\u00e9\\\\\\\"\\\"}\",\"execute\":false}");
    buf_free(&b);
    json_free(v);
    /* an escaped key is compared decoded; a kept member that is not an object is whole */
    const char *t2 = "{\"\\u0065xecute\":true,\"operation\":[1]}";
    v = json_parse_keep(t2, strlen(t2), NULL, keep, err, sizeof err);
    CHECK(v && json_get(v, "execute") && json_typeof(json_get(v, "execute")) == JSON_TRUE);
    CHECK(v && json_count(json_get(v, "operation")) == 1);
    json_free(v);
    /* not an object at the top: parsed whole */
    v = json_parse_keep("[1,2]", 5, NULL, keep, err, sizeof err);
    CHECK(v && json_count(v) == 2);
    json_free(v);
    /* a list ended by JSON_KEEP_REST keeps what it does not name whole: only the
     * members it names are treated otherwise (here one kept as its text) */
    static const json_keep inner[] = {{"_meta", NULL, 1}, {NULL, NULL, JSON_KEEP_REST}};
    static const json_keep rest[] = {{"params", inner, 0}, {NULL, NULL, JSON_KEEP_REST}};
    const char *t3 =
        "{\"id\":1,\"params\":{\"name\":\"n\",\"_meta\":{\"a\":[1, {}]},\"x\":{\"y\":[]}},"
        "\"z\":null}";
    v = json_parse_keep(t3, strlen(t3), NULL, rest, err, sizeof err);
    CHECK(v != NULL);
    json_write(&b, v, 0);
    CHECK_STR(b.data, "{\"id\":1,\"params\":{\"name\":\"n\",\"_meta\":\"{\\\"a\\\":[1, {}]}\","
                      "\"x\":{\"y\":[]}},\"z\":null}");
    buf_free(&b);
    json_free(v);
    /* refusals inside skipped members: json_parse's words */
    static const char *const bad[] = {
        "{\"z\":[1,2,]}",        "{\"z\":\"a\x01\"}",      "{\"z\":\"\\ud800\"}",
        "{\"z\":01}",            "{\"z\":{\"a\" 1}}",      "{\"z\":tru}",
        "{\"z\":[1 2]}",         "{\"z\":\"\\x\"}",        "{\"receipt\":{\"a\":1,}}",
        "{\"z\":1} x",           "{\"z\":\"\xc3\x28\"}",   "{\"z\":[[[[1]]]]}",
        "{\"operation\":{\"q\":-}}", "{\"params\":{\"_meta\":[[[1]]]}}",
        "{\"params\":{\"_meta\":{\"a\":1,}}}", "{\"params\":{\"b\":[[[1]]]}}"};
    json_limits lim = {4, 0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char e1[128], e2[128], e3[128];
        json_value *a = json_parse(bad[i], strlen(bad[i]), &lim, e1, sizeof e1);
        json_value *k = json_parse_keep(bad[i], strlen(bad[i]), &lim, keep, e2, sizeof e2);
        json_value *r = json_parse_keep(bad[i], strlen(bad[i]), &lim, rest, e3, sizeof e3);
        CHECK(a == NULL && k == NULL && r == NULL);
        CHECK_STR(e2, e1);
        CHECK_STR(e3, e1);
    }
}

static void test_utf8(void)
{
    /* Boundaries of every valid sequence class parse and are copied verbatim. */
    const char *ok =
        "\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"";
    CHECK_STR(rt(ok, 0), ok);
    CHECK_STR(perr("\"\xc0\xaf\"", 4, NULL), "invalid UTF-8 in string at byte 1");
    CHECK_STR(perr("\"\xc1\xbf\"", 4, NULL), "invalid UTF-8 in string at byte 1");
    CHECK_STR(perr("\"\xe0\x9f\xbf\"", 5, NULL), "invalid UTF-8 in string at byte 2");
    CHECK_STR(perr("\"\xed\xa0\x80\"", 5, NULL), "invalid UTF-8 in string at byte 2");
    CHECK_STR(perr("\"\xf0\x8f\xbf\xbf\"", 6, NULL), "invalid UTF-8 in string at byte 2");
    CHECK_STR(perr("\"\xf4\x90\x80\x80\"", 6, NULL), "invalid UTF-8 in string at byte 2");
    CHECK_STR(perr("\"\xf5\x80\x80\x80\"", 6, NULL), "invalid UTF-8 in string at byte 1");
    CHECK_STR(perr("\"\x80\"", 3, NULL), "invalid UTF-8 in string at byte 1");
    CHECK_STR(perr("\"\xe2\x82\"", 4, NULL), "invalid UTF-8 in string at byte 3");
    CHECK_STR(perr("\"\xe2\x82", 3, NULL), "invalid UTF-8 in string at byte 3");
    CHECK_STR(perr("\"\xff\"", 3, NULL), "invalid UTF-8 in string at byte 1");
    CHECK_STR(perr("{\"k\xff\":1}", 7, NULL), "invalid UTF-8 in string at byte 3");
    /* Escapes decode to UTF-8; the writer escapes only what it must. */
    CHECK_STR(rt("\"\\u00e9\\ud83d\\ude00\\/\\u0001\\u001f\\u007f\"", 0),
              "\"\xc3\xa9\xf0\x9f\x98\x80/\\u0001\\u001f\x7f\"");
    json_value *v = parse("\"a\\u0000b\"");
    size_t len = 0;
    const char *s = json_get_str(v, &len);
    CHECK(len == 3 && s && memcmp(s, "a\0b", 3) == 0);
    json_free(v);
    CHECK(json_utf8_valid("abc\xc3\xa9", 5));
    CHECK(!json_utf8_valid("\xed\xbf\xbf", 3));
    CHECK(!json_utf8_valid("\xc3", 1));
}

static void test_order_and_canonical(void)
{
    const char *doc =
        "{\"z\":1,\"a\":{\"y\":[],\"b\":{}},\"m\":[{\"k\":1,\"c\":2}],\"aa\":null,\"\":0}";
    CHECK_STR(rt(doc, 0), doc);
    CHECK_STR(rt(doc, 1),
              "{\"\":0,\"a\":{\"b\":{},\"y\":[]},\"aa\":null,\"m\":[{\"c\":2,\"k\":1}],\"z\":1}");
    CHECK_STR(rt(" [ ] ", 0), "[]");
    CHECK_STR(rt("{ }", 0), "{}");
    CHECK_STR(rt("[[],{},[[]],{\"a\":{}}]", 0), "[[],{},[[]],{\"a\":{}}]");
    CHECK_STR(rt("{\"a\":1,\"a\":2}", 0), "{\"a\":1,\"a\":2}");
    /* Bytewise: uppercase before lowercase, UTF-8 after ASCII, prefix first. */
    CHECK_STR(rt("{\"b\":1,\"\xc3\xa9\":2,\"B\":3,\"ba\":4}", 1),
              "{\"B\":3,\"b\":1,\"ba\":4,\"\xc3\xa9\":2}");
}

static void test_limits(void)
{
    char deep[2000];
    for (int n = 511; n <= 513; n++) {
        memset(deep, '[', (size_t)n);
        memset(deep + n, ']', (size_t)n);
        json_value *v = json_parse(deep, 2 * (size_t)n, NULL, last_err, sizeof last_err);
        if (n <= 512) {
            CHECK(v != NULL);
        } else {
            CHECK(v == NULL);
            CHECK_STR(last_err, "nesting too deep at byte 512");
        }
        json_free(v);
    }
    json_limits lim = {3, 0};
    CHECK_STR(perr("[[[1]]]", 7, &lim), "(parsed)");
    CHECK_STR(perr("[[[[1]]]]", 9, &lim), "nesting too deep at byte 3");
    CHECK_STR(perr("{\"a\":{\"b\":{\"c\":{}}}}", 20, &lim), "nesting too deep at byte 15");
    json_limits sz = {0, 10};
    CHECK_STR(perr("[1,2,3,4]", 9, &sz), "(parsed)");
    CHECK_STR(perr("[1,2,3,4,5]", 11, &sz), "document exceeds size limit at byte 10");
    /* A deep unterminated input frees everything (ASan checks this). */
    memset(deep, '[', 1000);
    CHECK(json_parse(deep, 1000, NULL, last_err, sizeof last_err) == NULL);
    CHECK_STR(perr("[{\"a\":[1,{\"b\":\"x\"},", 19, NULL), "unexpected end of input at byte 19");
}

/* Containers with more children than the parser holds before it grows its stacks
 * (objects of objects, arrays of arrays, each past 32 and 64 children, nested, and
 * siblings after a large one), written back unchanged; a failure past the growth
 * frees everything (ASan). */
static void test_wide(void)
{
    for (int n = 1; n <= 140; n += (n < 70 ? 1 : 23)) {
        buf doc = BUF_INIT;
        buf_putc(&doc, '{');
        for (int i = 0; i < n; i++) {
            buf_printf(&doc, "%s\"k%d\":[", i ? "," : "", i);
            for (int j = 0; j < (i % 3 ? 2 : n); j++)
                buf_printf(&doc, "%s{\"a%d\":%d,\"b\":[%d,\"x\"]}", j ? "," : "", j, j, i);
            buf_putc(&doc, ']');
        }
        buf_puts(&doc, ",\"after\":{\"z\":[1,2,3]}}");
        CHECK_STR(rt(doc.data, 0), doc.data);
        json_value *v = parse(doc.data);
        CHECK(v != NULL && json_count(v) == (size_t)n + 1);
        CHECK(v != NULL && json_count(json_get(v, "k0")) == (size_t)n);
        json_free(v);
        doc.len -= 2; /* cut inside the last member: the stacks hold everything */
        doc.data[doc.len] = '\0';
        CHECK(json_parse(doc.data, doc.len, NULL, last_err, sizeof last_err) == NULL);
        buf_free(&doc);
    }
}

/* A copy is one block per object and per string, as a parsed tree is: it can grow,
 * lose members and be changed like any tree; json_new_object_of builds such an object
 * from its keys and values; json_get_n finds a member by key and length (the last of
 * duplicates, a key holding \0). */
static void test_packed_copies(void)
{
    char err[128];
    const char *text = "{\"a\":\"x\",\"b\":{\"c\":[1,\"d\"],\"e\":{}},\"a\":\"y\",\"n\":12345678901234567890}";
    json_value *v = json_parse(text, strlen(text), NULL, err, sizeof err);
    CHECK(v != NULL);
    json_value *c = json_clone(v);
    json_free(v);
    CHECK_STR(json_get_str(json_get_n(c, "a", 1), NULL), "y");
    CHECK(json_get_n(c, "ab", 1) == json_get(c, "a"));
    CHECK(json_get_n(c, "zz", 2) == NULL && json_get_n(json_get(c, "a"), "a", 1) == NULL);
    CHECK(json_typeof(json_get(c, "n")) == JSON_NUMTEXT);
    for (int i = 0; i < 9; i++) {
        char k[8];
        snprintf(k, sizeof k, "g%d", i);
        json_set(c, k, json_new_int(i));
    }
    json_set((json_value *)json_get(c, "b"), "e", json_new_str("f", 1));
    CHECK(json_remove(c, "a") && json_remove(c, "g4"));
    buf b = BUF_INIT;
    json_write(&b, c, 0);
    CHECK_STR(b.data, "{\"b\":{\"c\":[1,\"d\"],\"e\":\"f\"},\"n\":12345678901234567890,\"g0\":0,"
                      "\"g1\":1,\"g2\":2,\"g3\":3,\"g5\":5,\"g6\":6,\"g7\":7,\"g8\":8}");
    json_free(c);
    const char *keys[] = {"k", "l\0m", ""};
    size_t klens[] = {1, 3, 0};
    json_value *vals[] = {json_new_str("v", 1), json_new_array(), json_new_null()};
    json_value *o = json_new_object_of(3, keys, klens, vals);
    CHECK(json_get_n(o, "l\0m", 3) == vals[1] && json_get_n(o, "l", 1) == NULL);
    CHECK(json_get_n(o, "", 0) == vals[2]);
    const json_value *got = NULL;
    CHECK(json_key_is(o, 1, "l\0m", 3, &got) && got == vals[1]);
    CHECK(!json_key_is(o, 1, "l", 1, &got) && !json_key_is(o, 0, "l\0m", 3, &got));
    CHECK(!json_key_is(o, 3, "k", 1, &got) && !json_key_is(vals[1], 0, "k", 1, &got));
    CHECK(json_key_is(o, 2, "", 0, &got) && got == vals[2]);
    json_obj_append(o, "p", 1, json_new_int(7));
    buf_reset(&b);
    json_write(&b, o, 0);
    CHECK_STR(b.data, "{\"k\":\"v\",\"l\\u0000m\":[],\"\":null,\"p\":7}");
    json_value *e = json_new_object_of(0, NULL, NULL, NULL);
    json_obj_append(e, "q", 1, json_clone(o));
    json_free(o);
    buf_reset(&b);
    json_write(&b, e, 0);
    CHECK_STR(b.data, "{\"q\":{\"k\":\"v\",\"l\\u0000m\":[],\"\":null,\"p\":7}}");
    json_free(e);
    /* a value taken out of an array or an object leaves a hole: the container is freed
     * without it, the value lives on */
    v = json_parse("{\"a\":[1,\"s\"],\"b\":{\"c\":\"d\"}}", 27, NULL, err, sizeof err);
    CHECK(v != NULL);
    json_value *s = json_take_at((json_value *)json_get(v, "a"), 1);
    json_value *bv = json_take_at(v, 1);
    CHECK(json_take_at(v, 2) == NULL && json_take_at(s, 0) == NULL);
    CHECK(json_get(v, "b") == NULL && json_count(v) == 2);
    json_free(v);
    CHECK_STR(json_get_str(s, NULL), "s");
    CHECK_STR(json_get_string(bv, "c"), "d");
    json_free(s);
    json_free(bv);
    buf_free(&b);
}

static void test_builders(void)
{
    json_value *o = json_new_object();
    json_set(o, "z", json_new_int(1));
    json_set(o, "a", json_new_array());
    json_push((json_value *)json_get(o, "a"), json_new_str("x\"y", 3));
    json_push((json_value *)json_get(o, "a"), json_new_double(2.0));
    json_push((json_value *)json_get(o, "a"), json_new_numtext("1e999", 5));
    json_set(o, "n", json_new_null());
    json_set(o, "z", json_new_bool(1)); /* replaces in place */
    json_set(o, "o", json_new_object());
    buf b = BUF_INIT;
    json_write(&b, o, 0);
    CHECK_STR(b.data, "{\"z\":true,\"a\":[\"x\\\"y\",2.0,1e999],\"n\":null,\"o\":{}}");
    CHECK(json_remove(o, "n") == 1);
    CHECK(json_remove(o, "n") == 0);
    json_value *c = json_clone(o);
    json_free(o);
    buf_reset(&b);
    json_write(&b, c, 1);
    CHECK_STR(b.data, "{\"a\":[\"x\\\"y\",2.0,1e999],\"o\":{},\"z\":true}");
    json_free(c);
    buf_free(&b);
}

/* Standard libraries plus cljson (also as a global) in L. */
static void open_cljson(lua_State *L)
{
    luaL_openlibs(L);
    luaL_requiref(L, "cljson", luaopen_cljson, 1);
    lua_pop(L, 1);
}

/* Parses doc, pushes its tree (left on the stack) and encodes it into b (stored
 * order); 0 or -1. */
static int push_encode(lua_State *L, const char *doc, buf *b)
{
    char err[256];
    json_value *v = parse(doc);
    CHECK(v != NULL);
    if (!v)
        return -1;
    cljson_push(L, v);
    json_free(v);
    return cljson_encode(L, -1, b, 0, err, sizeof err);
}

/* Objects pushed from a tree keep their key order whether the order string stays
 * short or grows past the pusher's stack buffer (long keys, many keys, a duplicate). */
static void test_push_order(void)
{
    lua_State *L = luaL_newstate();
    open_cljson(L);
    for (int nkeys = 1; nkeys <= 40; nkeys += 3) {
        buf doc = BUF_INIT, want = BUF_INIT;
        buf_puts(&doc, "{");
        buf_puts(&want, "{");
        for (int i = 0; i < nkeys; i++) {
            /* descending names: a sorted encoding would reverse them */
            buf_printf(&doc, "%s\"%c%0*d\":%d", i ? "," : "", 'z' - i % 26, 5 + i * 3, nkeys - i,
                       i);
            buf_printf(&want, "%s\"%c%0*d\":%d", i ? "," : "", 'z' - i % 26, 5 + i * 3, nkeys - i,
                       i == 0 && nkeys > 1 ? 99 : i);
        }
        if (nkeys > 1) /* the first key again: its first position, the last value */
            buf_printf(&doc, ",\"%c%0*d\":99", 'z', 5, nkeys);
        buf_puts(&doc, "}");
        buf_puts(&want, "}");
        buf b = BUF_INIT;
        CHECK(push_encode(L, doc.data, &b) == 0);
        CHECK_STR(b.data, want.data);
        lua_pop(L, 1);
        buf_free(&b);
        buf_free(&doc);
        buf_free(&want);
    }
    lua_close(L);
}

/* The C bridge to Lua: push, to_value, encode; exercised without busted. */
static void test_lua_bridge(void)
{
    lua_State *L = luaL_newstate();
    open_cljson(L);
    const char *doc = "{\"drug_id\":9007199254740993,\"batch_no\":12345678901234567890123,"
                      "\"tags\":[],\"ext\":{},\"f\":1.0,\"n\":null,\"s\":\"\xc3\xa9\"}";
    buf b = BUF_INIT;
    char err[256];
    CHECK(push_encode(L, doc, &b) == 0);
    CHECK_STR(b.data, doc);
    buf_reset(&b);
    CHECK(cljson_encode(L, -1, &b, 1, err, sizeof err) == 0);
    CHECK_STR(b.data, "{\"batch_no\":12345678901234567890123,\"drug_id\":9007199254740993,"
                      "\"ext\":{},\"f\":1.0,\"n\":null,\"s\":\"\xc3\xa9\",\"tags\":[]}");
    json_value *back = cljson_to_value(L, -1, err, sizeof err);
    CHECK(back != NULL);
    CHECK(json_typeof(json_get(back, "tags")) == JSON_ARRAY);
    CHECK(json_typeof(json_get(back, "batch_no")) == JSON_NUMTEXT);
    CHECK(json_get_int(json_get(back, "drug_id")) == 9007199254740993LL);
    json_free(back);
    lua_pop(L, 1);

    /* Errors come back as messages, never as a longjmp through C. */
    CHECK(luaL_dostring(L, "t = {a = {}}; t.a.self = t; return t") == LUA_OK);
    buf_reset(&b);
    CHECK(cljson_encode(L, -1, &b, 0, err, sizeof err) == -1);
    CHECK_STR(err, "cycle in table at $.a.self");
    CHECK(cljson_to_value(L, -1, err, sizeof err) == NULL);
    lua_pop(L, 1);
    CHECK(luaL_dostring(L, "return {1, 2, {x = 0/0}}") == LUA_OK);
    CHECK(cljson_encode(L, -1, &b, 0, err, sizeof err) == -1);
    CHECK_STR(err, "cannot encode a non-finite number at $[3].x");
    lua_pop(L, 1);
    CHECK(lua_gettop(L) == 0);
    buf_free(&b);
    lua_close(L);
}

/* Random Lua values for the encoder equivalence test: every shape the Lua model
 * has, plus (rarely) each encode error. Deterministic per seed. */
static const char *const gen_lua =
    "local cj = require 'cljson'\n"
    "local R\n"
    "local strs = {'', 'a', 'caf\\xc3\\xa9', '\\0\\1\\31 \"q\" \\\\ \\b\\f\\n\\r\\t/', "
    "'\\xe2\\x82\\xac\\xf0\\x9f\\x98\\x80', 'x\\127y', 'drug_id', 'k', '1', 'Z', 'aa', 'a\\0b'}\n"
    "local floats = {1.0, 0.1, -0.0, 1e300, 5e-324, -2.5, 1e21, 123456789.125, 2^53, 1/3}\n"
    "local ints = {0, -1, 1, math.maxinteger, math.mininteger, 9007199254740993, 42}\n"
    "local nums = {'12345678901234567890123', '-1.5e+10', '0', '1E400', '-0.0'}\n"
    "local function key() if R(3) == 1 then return strs[R(#strs)] end\n"
    "  if R(30) == 1 then return string.rep('l', 38 + R(6)) end\n"
    "  return string.char(96 + R(26)) .. (R(2) == 1 and tostring(R(99)) or '') end\n"
    "local val\n"
    /* around 16 keys: objects whose keys fit the encoder's inline array and
     * objects that do not, unordered or with some keys remembered */
    "local function big(d, bad) local ks, t = {}, {}\n"
    "  for i = 1, 12 + R(9) do ks[i] = key() t[ks[i]] = val(d + 1, bad) end\n"
    "  if R(4) == 1 then t[key()] = cj.raw('[1,{\"b\":null}]') end\n"
    "  if R(2) == 1 then t = cj.object(t, {table.unpack(ks, 1, R(#ks))}) end\n"
    "  return t end\n"
    "function val(d, bad)\n"
    "  if d < 3 and R(12) == 1 then return big(d, bad) end\n"
    "  local r = R(d > 4 and 9 or 16)\n"
    "  if bad and R(40) == 1 then local b = R(12)\n"
    "    if b == 1 then return 0/0 elseif b == 2 then return -math.huge\n"
    "    elseif b == 3 then return print elseif b == 4 then return coroutine.create(print)\n"
    "    elseif b == 5 then return 'bad\\xff' elseif b == 6 then return {['k\\xc0'] = 1}\n"
    "    elseif b == 7 then return {1, a = 2} elseif b == 8 then return {[1] = 1, [3] = 3}\n"
    "    elseif b == 9 then return {[true] = 1}\n"
    "    elseif b == 10 then return setmetatable({text = 'abc'}, cj.number_mt)\n"
    "    elseif b == 11 then return setmetatable({x = 1, text = R(2) == 1 and '12' or nil}, "
    "cj.number_mt)\n"
    "    else local t = {} local c = t for _ = 1, 600 do c[1] = {} c = c[1] end return t end end\n"
    "  if r == 1 then return cj.null elseif r == 2 then return R(2) == 1\n"
    "  elseif r == 3 then return ints[R(#ints)] elseif r == 4 then return R(1000000) - 500000\n"
    "  elseif r == 5 then return floats[R(#floats)] elseif r == 6 then return (R(2^30) - 2^29) / "
    "R(1000) + 0.5\n"
    "  elseif r == 7 then return strs[R(#strs)] elseif r == 8 then return "
    "cj.number(nums[R(#nums)])\n"
    "  elseif r == 9 then return key()\n"
    "  elseif r <= 11 then local t = {} for i = 1, R(6) - 1 do t[i] = val(d + 1, bad) end return "
    "t\n"
    "  elseif r == 12 then local t = cj.array() for i = 1, R(5) - 1 do t[i] = val(d + 1, bad) end "
    "return t\n"
    "  elseif r == 13 then local t = {} for _ = 1, R(6) - 1 do t[key()] = val(d + 1, bad) end "
    "return t\n"
    "  elseif r == 14 then local ks, t = {}, {} for i = 1, R(5) do ks[i] = key() t[ks[i]] = val(d "
    "+ 1, bad) end\n"
    "    t = cj.object(t, ks) for _ = 1, R(3) - 1 do t[key()] = val(d + 1, bad) end\n"
    "    if R(3) == 1 then t[ks[1]] = nil end return t\n"
    "  elseif r == 15 then local t = cj.decode('{\"z\":1,\"a\":[],\"m\":{},\"a\":2,\"k\":null}')\n"
    "    if R(2) == 1 then t[({'z', 'a', 'm', 'k'})[R(4)]] = nil end\n"
    "    for _ = 1, R(4) - 1 do t[key()] = val(d + 1, bad) end return t\n"
    "  elseif r == 16 and R(2) == 1 then\n"
    "    local rows = cj.decode('[{\"b\":1,\"a\":2,\"c\":{\"y\":1,\"x\":2}},{\"b\":3,\"a\":4,'\n"
    "      .. '\"c\":{\"y\":0,\"x\":1}},{\"b\":5,\"a\":6,\"c\":{}}]')\n"
    "    if R(2) == 1 then rows[1].c.w = 1 rows[2].c.x = nil end\n"
    "    local row = rows[R(3)] row[({'a', 'b', 'c'})[R(3)]] = nil row[key()] = val(d + 1, bad)\n"
    "    return rows\n"
    "  else local t = {} t.self = (R(30) == 1 and bad) and t or val(d + 1, bad) return t end\n"
    "end\n"
    "return function(seed, bad) math.randomseed(seed) R = math.random return val(0, bad) end\n";

/* The reference encoder in json_lua.c (json_value tree, then json_write); a test
 * hook, not part of json_lua.h. */
int cljson_encode_tree(lua_State *L, int idx, buf *out, int canonical, char *err, size_t errlen);

/* The direct encoder (cljson_encode) must give exactly the bytes of the tree path,
 * and the same error messages, for every value. */
static void test_lua_encode_equivalence(void)
{
    lua_State *L = luaL_newstate();
    open_cljson(L);
    CHECK(luaL_dostring(L, gen_lua) == LUA_OK);
    int genf = lua_gettop(L);
    buf t = BUF_INIT, d = BUF_INIT;
    char e1[320], e2[320];
    int mismatches = 0, oks = 0, errs = 0;
    for (int seed = 1; seed <= 6000; seed++) {
        lua_pushvalue(L, genf);
        lua_pushinteger(L, seed);
        lua_pushboolean(L, seed % 3 == 0);
        if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
            fprintf(stderr, "generator failed: %s\n", lua_tostring(L, -1));
            mismatches++;
            lua_pop(L, 1);
            continue;
        }
        for (int canonical = 0; canonical <= 1; canonical++) {
            buf_reset(&t);
            buf_reset(&d);
            buf_append(&d, "prefix", 6);
            e1[0] = e2[0] = 0;
            int rt = cljson_encode_tree(L, -1, &t, canonical, e1, sizeof e1);
            int rc = cljson_encode(L, -1, &d, canonical, e2, sizeof e2);
            int same = rc == rt;
            if (same && rc == 0)
                same = d.len == t.len + 6 && memcmp(d.data + 6, t.data, t.len) == 0;
            else if (same)
                same = strcmp(e1, e2) == 0 && d.len == 6;
            if (!same && mismatches++ < 3)
                fprintf(stderr, "seed %d canonical %d:\n tree:   %.*s %s\n direct: %.*s %s\n", seed,
                        canonical, (int)t.len, t.data ? t.data : "", e1, (int)d.len, d.data, e2);
            if (canonical == 0) {
                /* text and tree in one walk: the same text, and a tree that writes it */
                buf b = BUF_INIT, w = BUF_INIT;
                json_value *tree = NULL;
                char e3[320] = "";
                int rb = cljson_encode_both(L, -1, &b, &tree, e3, sizeof e3);
                if (rb == 0)
                    json_write(&w, tree, 0);
                int both_same = rb == rc && (rb != 0 ? strcmp(e3, e2) == 0 && b.len == 0 && !tree
                                                     : b.len == t.len && w.len == t.len &&
                                                           !memcmp(b.data, t.data, t.len) &&
                                                           !memcmp(w.data, t.data, t.len));
                if (!both_same && mismatches++ < 3)
                    fprintf(stderr, "seed %d: encode_both differs: %.*s %s\n", seed, (int)b.len,
                            b.data ? b.data : "", e3);
                json_free(tree);
                buf_free(&b);
                buf_free(&w);
            }
            if (rc == 0)
                oks++;
            else
                errs++;
        }
        lua_pop(L, 1);
    }
    CHECK(mismatches == 0);
    CHECK(oks > 6000 && errs > 200); /* both outcomes were really exercised */
    CHECK(lua_gettop(L) == genf);
    /* Objects with a remembered order check key types lazily; the first error
     * must still be the eager one: non-string keys fail before any member. */
    static const char lazy_keys[] =
        "local cj = require 'cljson'\n"
        "local NS = 'table with non-string keys is neither an array nor an object at '\n"
        "local function err(v) local ok, e = pcall(cj.encode, v) assert(not ok) return e end\n"
        "local t = cj.decode('{\"a\":\"x\",\"b\":1}') t.a = '\\255' t[1] = true\n"
        "assert(err(t) == 'cljson: ' .. NS .. '$', err(t))\n"
        "t = cj.decode('{\"o\":{\"a\":1},\"p\":2}') t.o.a = print t.o[true] = 1\n"
        "assert(err(t) == 'cljson: ' .. NS .. '$.o', err(t))\n"
        "t[2] = 1 assert(err(t) == 'cljson: ' .. NS .. '$', err(t))\n"
        "t = cj.decode('{\"a\":1}') t[2.5] = 1 assert(err(t) == 'cljson: ' .. NS .. '$')\n"
        "t = cj.decode('{\"a\":{\"b\":\"x\"}}') t.a.b = '\\255'\n"
        "assert(err(t) == 'cljson: invalid UTF-8 in string at $.a.b', err(t))\n"
        "t = cj.decode('{\"b\":1,\"a\":2}') t.c = 3 t.b = nil\n"
        "assert(cj.encode(t) == '{\"a\":2,\"c\":3}')\n"
        "return true\n";
    int lazy_ok = luaL_dostring(L, lazy_keys) == LUA_OK;
    if (!lazy_ok)
        fprintf(stderr, "lazy key check: %s\n", lua_tostring(L, -1));
    CHECK(lazy_ok && lua_toboolean(L, -1));
    lua_settop(L, genf);
    buf_free(&t);
    buf_free(&d);
    lua_close(L);
}

/* Objects of many keys, deep values and number boxes through cljson_encode
 * against text built in Lua (keys sorted by table.sort): an oracle that shares
 * no code with the encoder, unlike the tree path above. Each value is encoded
 * twice: the first encode of a remembered order builds its key list. */
static void test_lua_encode_wide(void)
{
    static const char cases[] =
        "local cj = require 'cljson'\n"
        "local out = {}\n"
        "local function add(v, text) out[#out + 1] = v out[#out + 1] = text end\n"
        "local function obj(n, long, listed)\n"
        "  local t, ks = {}, {}\n"
        "  for i = n, 1, -1 do\n"
        "    local k = (long and string.rep('w', 40) or 'k') .. string.format('%02d', (i * 7) % "
        "n)\n"
        "    ks[#ks + 1] = k t[k] = i\n"
        "  end\n"
        "  local first = {}\n"
        "  if listed then for i = 1, listed do first[i] = ks[i] end t = cj.object(t, first) end\n"
        "  local rest = {}\n"
        "  for k in pairs(t) do\n"
        "    local seen = false\n"
        "    for _, f in ipairs(first) do seen = seen or f == k end\n"
        "    if not seen then rest[#rest + 1] = k end\n"
        "  end\n"
        "  table.sort(rest)\n"
        "  local parts = {}\n"
        "  for _, k in ipairs(first) do parts[#parts + 1] = '\"' .. k .. '\":' .. t[k] end\n"
        "  for _, k in ipairs(rest) do parts[#parts + 1] = '\"' .. k .. '\":' .. t[k] end\n"
        "  return t, '{' .. table.concat(parts, ',') .. '}'\n"
        "end\n"
        "for _, n in ipairs({1, 2, 15, 16, 17, 18, 40}) do\n"
        "  for _, long in ipairs({false, true}) do\n"
        "    add(obj(n, long))\n"
        "    if n > 2 then add(obj(n, long, 2)) add(obj(n, long, n - 1)) end\n"
        "  end\n"
        "end\n"
        /* objects of 16 keys nested in each other: each level holds its keys and
         * values on the stack while the next one is written */
        "local function nest(d)\n"
        "  if d == 0 then return 0, '0' end\n"
        "  local t, ks = {}, {}\n"
        "  for i = 1, 16 do ks[i] = string.format('n%02d', i) end\n"
        "  local inner, itext = nest(d - 1)\n"
        "  local parts = {}\n"
        "  for i = 16, 1, -1 do t[ks[i]] = i == 16 and inner or cj.array() end\n"
        "  for i = 1, 15 do parts[i] = '\"' .. ks[i] .. '\":[]' end\n"
        "  parts[16] = '\"n16\":' .. itext\n"
        "  return t, '{' .. table.concat(parts, ',') .. '}'\n"
        "end\n"
        "add(nest(45))\n"
        "local deep, dtext = {}, '{}'\n"
        "for _ = 1, 70 do deep = {x = deep} dtext = '{\"x\":' .. dtext .. '}' end\n"
        "add(deep, dtext)\n"
        "add({setmetatable({x = 1, text = '12'}, cj.number_mt), setmetatable({tex = 'a', "
        "text = '-1.5e+10', texts = 'b'}, cj.number_mt)}, '[12,-1.5e+10]')\n"
        "add({setmetatable({x = '7'}, cj.number_mt)}, false)\n"
        "add({setmetatable({text = 7}, cj.number_mt)}, false)\n"
        "return out\n";
    lua_State *L = luaL_newstate();
    open_cljson(L);
    int ok = luaL_dostring(L, cases) == LUA_OK;
    if (!ok)
        fprintf(stderr, "wide cases: %s\n", lua_tostring(L, -1));
    CHECK(ok);
    int list = lua_gettop(L);
    lua_Integer n = (lua_Integer)lua_rawlen(L, list);
    CHECK(n > 40);
    int bad = 0;
    for (lua_Integer i = 1; i + 1 <= n; i += 2) {
        lua_rawgeti(L, list, i);
        lua_rawgeti(L, list, i + 1);
        const char *want = lua_isstring(L, -1) ? lua_tostring(L, -1) : NULL;
        for (int round = 0; round < 2; round++) {
            buf b = BUF_INIT;
            char err[320] = "";
            int rc = cljson_encode(L, -2, &b, 0, err, sizeof err);
            int same = want ? rc == 0 && b.len == strlen(want) && memcmp(b.data, want, b.len) == 0
                            : rc < 0 && strstr(err, "invalid cljson.number text") && b.len == 0;
            if (!same && bad++ < 3)
                fprintf(stderr, "case %lld round %d: want %s\n got %.*s %s\n", (long long)i, round,
                        want ? want : "(error)", (int)b.len, b.data ? b.data : "", err);
            buf_free(&b);
        }
        lua_pop(L, 2);
    }
    CHECK(bad == 0);
    CHECK(lua_gettop(L) == list);
    lua_close(L);
}

/* The former decoder (json_parse + cljson_push), a test hook in json_lua.c with
 * pdecode's contract. */
int cljson_pdecode_tree(lua_State *L);
unsigned long cljson_decode_fallbacks(void);

/* JSON texts for the decoder equivalence test: valid documents of every shape
 * (deep nesting, big and exotic numbers, duplicate keys, escapes, repeated row
 * shapes) and damaged ones (truncated, a byte changed or inserted, invalid
 * UTF-8). Deterministic per seed; returns text [, limits]. */
static const char *const gen_json_lua =
    "local R\n"
    "local strs = {'\"\"', '\"a\"', '\"caf\\xc3\\xa9\"', '\"\\\\u00e9\\\\ud83d\\\\ude00\"', "
    "'\"\\\\\"q\\\\\\\\ \\\\/\\\\b\\\\f\\\\n\\\\r\\\\t\\\\u0000\\\\u001f\"', "
    "'\"\\xe4\\xb8\\xad\\xe6\\x96\\x87"
    "\\xf0\\x9f\\x98\\x80\"', '\"x\\x7fy\"', '\"abcdefghijklmnopqrstuvwxyz0123456789\"'}\n"
    "local nums = {'0', '-0', '1', '-1', '42', '9223372036854775807', '-9223372036854775808', "
    "'9223372036854775808', '-9223372036854775809', '12345678901234567890123', '1.5', '-0.0', "
    "'0.1', '1e2', '1E+2', '1e400', '-1e400', '1e-400', '5e-324', '0.30000000000000004', "
    "'9007199254740993.0', '1.000000000000000005', '0e99999999999999999999', "
    "'123.4560000000000000000000', '1.7976931348623157e308', '2.5e-3', '100.0', "
    "'0.12345678901234567', '1e300', '1e-300', '123456789012345.6', '1234567890123456.7'}\n"
    "local keys = {'a', 'b', 'drug_id', 'name', '', 'z', 'a\\\\u0000b', '\\xc3\\xa9', 'k1', 'k2'}\n"
    "local bad = {'\\xff', '\\xc0\\xaf', '\\xed\\xa0\\x80', '\\xf4\\x90\\x80\\x80', '\\xe2\\x82', "
    "'\\\\ud800', '\\\\udc00', '\\\\x', '\\x01', 'NaN', ',', ']', '}', '01', '1.', '-', 'tru', "
    "'\\xef\\xbb\\xbf', ' ', '\\t', '\\\"', '[', '{', ':', '1e+', '\\\\u12G4'}\n"
    "local function q(s) return '\"' .. s .. '\"' end\n"
    "local val\n"
    "local function obj(d)\n"
    "  local t = {} for i = 1, R(6) - 1 do t[i] = q(keys[R(#keys)]) .. ':' .. val(d + 1) end\n"
    "  return '{' .. table.concat(t, R(4) == 1 and ' , ' or ',') .. '}' end\n"
    "function val(d)\n"
    "  local r = R(d > 6 and 4 or 9)\n"
    "  if r == 1 then return nums[R(#nums)] elseif r == 2 then return strs[R(#strs)]\n"
    "  elseif r == 3 then return ({'true', 'false', 'null'})[R(3)]\n"
    "  elseif r == 4 then return tostring(R(2^31) - 2^30) .. (R(2) == 1 and ('.' .. R(999)) or "
    "'')\n"
    "  elseif r <= 6 then local t = {} for i = 1, R(6) - 1 do t[i] = val(d + 1) end\n"
    "    return '[' .. table.concat(t, ',') .. ']'\n"
    "  elseif r == 7 then return obj(d)\n"
    "  elseif r == 8 then local row = obj(d + 1) local t = {} for i = 1, R(5) do t[i] = row end\n"
    "    return '[' .. table.concat(t, ',') .. ']'\n"
    "  else local n = R(40) return string.rep('[', n) .. val(d + 1) .. string.rep(']', n) end\n"
    "end\n"
    "return function(seed)\n"
    "  math.randomseed(seed) R = math.random\n"
    "  local s = (R(3) == 1 and ' ' or '') .. val(0) .. (R(3) == 1 and '\\n' or '')\n"
    "  local m = R(8)\n"
    "  if m == 1 then s = s:sub(1, R(#s))\n"
    "  elseif m == 2 then local i = R(#s) s = s:sub(1, i - 1) .. bad[R(#bad)] .. s:sub(i + 1)\n"
    "  elseif m == 3 then local i = R(#s + 1) s = s:sub(1, i - 1) .. bad[R(#bad)] .. s:sub(i)\n"
    "  elseif m == 4 then local n = 500 + R(30) s = string.rep('[', n) .. s .. string.rep(']', n)\n"
    "  end\n"
    "  local lim\n"
    "  if R(10) == 1 then lim = {max_depth = R(8)} elseif R(20) == 1 then lim = {max_size = R(#s + "
    "5)} end\n"
    "  return s, lim\n"
    "end\n";

/* Decodes the text and limits at the top two stack slots with f, then encodes
 * the result (and, if it is an object, the result after adding and removing
 * members) into out; "E:" and the message on a decode error. */
static void decode_and_encode(lua_State *L, lua_CFunction f, buf *out)
{
    int top = lua_gettop(L);
    lua_pushcfunction(L, f);
    lua_pushvalue(L, top - 1);
    lua_pushvalue(L, top);
    char err[320];
    buf_reset(out);
    if (lua_pcall(L, 2, 2, 0) != LUA_OK) {
        buf_printf(out, "raised: %s", lua_tostring(L, -1));
    } else if (lua_isnil(L, -2)) {
        buf_printf(out, "E:%s", lua_tostring(L, -1));
    } else {
        lua_pop(L, 1);
        if (cljson_encode(L, -1, out, 0, err, sizeof err) < 0)
            buf_printf(out, "encode: %s", err);
        /* Keys added and removed after decoding: remembered order, then the rest. */
        if (lua_type(L, -1) == LUA_TTABLE) {
            CHECK(luaL_dostring(
                      L, "local cj = require 'cljson'\n"
                         "return function(t) if cj.is_object(t) then\n"
                         "  local k = cj.keys(t) t[k[1] or 'q'] = nil t.zz = 1 t.b = 2\n"
                         "  for _, v in pairs(t) do if cj.is_object(v) then v.new = 0 end end\n"
                         "end return t end") == LUA_OK);
            lua_pushvalue(L, -2);
            CHECK(lua_pcall(L, 1, 1, 0) == LUA_OK);
            buf_putc(out, '|');
            if (cljson_encode(L, -1, out, 0, err, sizeof err) < 0)
                buf_printf(out, "encode: %s", err);
        }
    }
    lua_settop(L, top);
}

/* The direct decoder (pdecode) against the tree path, on one text. */
static int decode_same(lua_State *L, buf *a, buf *b, const char *what)
{
    lua_getglobal(L, "cljson_pdecode");
    lua_CFunction fast = lua_tocfunction(L, -1);
    lua_pop(L, 1);
    decode_and_encode(L, fast, a);
    decode_and_encode(L, cljson_pdecode_tree, b);
    int same = a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
    if (!same)
        fprintf(stderr, "decoders differ on %s:\n direct: %.300s\n tree:   %.300s\n", what, a->data,
                b->data);
    return same;
}

/* The raw option against the plain decoder: the text twice as the rows of
 * {"datas":[...]}, decoded with raw = "datas" and without (limits shifted by the
 * two levels added). Same accept/reject and error, same stored and canonical
 * encodings, and the tree of cljson_encode_both writes the same text. */
static const char *const wrap_decode_lua =
    "local cj = require 'cljson'\n"
    "return function(s, lim, raw)\n"
    "  local o = {}\n"
    "  if lim and lim.max_depth then o.max_depth = lim.max_depth + 2 end\n"
    "  if raw then o.raw = 'datas' end\n"
    "  local v, e = cj.pdecode('{\"datas\":[' .. s .. ',' .. s .. ']}', o)\n"
    "  local c = v ~= nil and cj.encode_canonical(v) or e\n"
    "  return v, e, c\n"
    "end\n";

static int wrapped_decode(lua_State *L, int raw)
{
    lua_settop(L, 2);
    lua_getglobal(L, "wrap_decode");
    lua_insert(L, 1);
    lua_pushboolean(L, raw);
    lua_call(L, 3, 2);
    return 2;
}

static int wrapped_plain(lua_State *L)
{
    return wrapped_decode(L, 0);
}

static int wrapped_raw(lua_State *L)
{
    return wrapped_decode(L, 1);
}

/* Canonical text of the wrapped decoding (raw or not) of the text and limits at
 * the top two slots into out; for the raw one, checks the encode_both tree too. */
static int wrapped_canonical(lua_State *L, int raw, buf *out)
{
    int top = lua_gettop(L), ok = 1;
    lua_getglobal(L, "wrap_decode");
    lua_pushvalue(L, top - 1);
    lua_pushvalue(L, top);
    lua_pushboolean(L, raw);
    CHECK(lua_pcall(L, 3, 3, 0) == LUA_OK);
    buf_reset(out);
    buf_puts(out, lua_tostring(L, -1));
    if (raw && !lua_isnil(L, -3)) {
        char err[320];
        buf t = BUF_INIT, w = BUF_INIT;
        json_value *tree = NULL;
        ok = cljson_encode_both(L, -3, &t, &tree, err, sizeof err) == 0 && tree;
        if (ok) {
            json_write(&w, tree, 0);
            ok = w.len == t.len && memcmp(w.data, t.data, t.len) == 0;
        }
        json_free(tree);
        buf_free(&t);
        buf_free(&w);
    }
    lua_settop(L, top);
    return ok;
}

static int raw_same(lua_State *L, buf *a, buf *b, const char *what)
{
    decode_and_encode(L, wrapped_plain, a);
    decode_and_encode(L, wrapped_raw, b);
    int same = a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
    if (same) {
        int tree_ok = wrapped_canonical(L, 0, a) && wrapped_canonical(L, 1, b);
        same = tree_ok && a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
    }
    if (!same)
        fprintf(stderr, "raw rows differ on %s:\n plain: %.300s\n raw:   %.300s\n", what, a->data,
                b->data);
    return same;
}

static void decode_dir(lua_State *L, const char *dir, buf *a, buf *b, int *n, int *bad)
{
    size_t cnt = 0;
    char **names = list_dir(dir, &cnt);
    buf text = BUF_INIT;
    for (size_t i = 0; i < cnt; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (read_file(path, &text) == 0) {
            lua_pushlstring(L, text.data, text.len);
            lua_pushnil(L);
            if (!decode_same(L, a, b, names[i]) || !raw_same(L, a, b, names[i]))
                (*bad)++;
            (*n)++;
            lua_pop(L, 2);
        }
        free(names[i]);
    }
    free(names);
    buf_free(&text);
}

/* Same accept/reject, error text and value (encoded, so key order counts) from
 * the direct decoder and the tree path: the corpora given plus generated texts. */
static int run_decode_equivalence(int ndirs, char **dirs)
{
    lua_State *L = luaL_newstate();
    open_cljson(L);
    lua_getglobal(L, "cljson");
    lua_getfield(L, -1, "pdecode");
    lua_setglobal(L, "cljson_pdecode");
    lua_pop(L, 1);
    CHECK(luaL_dostring(L, wrap_decode_lua) == LUA_OK);
    lua_setglobal(L, "wrap_decode");
    buf a = BUF_INIT, b = BUF_INIT;
    int n = 0, bad = 0, accepted = 0, rejected = 0;
    for (int i = 0; i < ndirs; i++)
        decode_dir(L, dirs[i], &a, &b, &n, &bad);
    CHECK(luaL_dostring(L, gen_json_lua) == LUA_OK);
    int genf = lua_gettop(L);
    for (int seed = 1; seed <= 5000; seed++) {
        lua_pushvalue(L, genf);
        lua_pushinteger(L, seed);
        CHECK(lua_pcall(L, 1, 2, 0) == LUA_OK);
        char what[32];
        snprintf(what, sizeof what, "seed %d", seed);
        int same = decode_same(L, &a, &b, what);
        if (a.data && a.data[0] == 'E' && a.data[1] == ':')
            rejected++;
        else
            accepted++;
        if ((!same || !raw_same(L, &a, &b, what)) && bad++ > 5)
            break;
        n++;
        lua_pop(L, 2);
    }
    lua_settop(L, genf - 1);
    CHECK(bad == 0);
    CHECK(cljson_decode_fallbacks() == 0);     /* never rejected what json_parse accepts */
    CHECK(accepted > 1500 && rejected > 1000); /* both outcomes really exercised */
    printf("decoder equivalence: %d texts, %d generated accepted, %d rejected\n", n, accepted,
           rejected);
    buf_free(&a);
    buf_free(&b);
    lua_close(L);
    return CHECK_DONE();
}

/* A Lua allocator with a byte budget, to make every allocation point fail once. */
typedef struct {
    size_t used, cap;
} capped;

static void *capped_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    capped *c = ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        c->used -= old;
        return NULL;
    }
    if (nsize > old && c->used + (nsize - old) > c->cap)
        return NULL;
    void *p = realloc(ptr, nsize);
    if (p)
        c->used = c->used - old + nsize;
    return p;
}

/* The direct encoder under memory pressure: errors come back as -1 (never a crash
 * or leak, which ASan would report), and with enough memory the text is right. */
static void test_lua_encode_oom(void)
{
    const char *src = "local cj = require 'cljson'\n"
                      "local t = cj.decode('{\"b\":[1,2.5,{\"x\":null}],\"a\":\"s\"}')\n"
                      "t.z = {k = {1, 2, 3}, j = cj.number('1e400')} t.y = 'q' return t";
    const char *want = "{\"b\":[1,2.5,{\"x\":null}],\"a\":\"s\",\"y\":\"q\","
                       "\"z\":{\"j\":1e400,\"k\":[1,2,3]}}";
    int ok_seen = 0, fail_seen = 0;
    for (size_t extra = 0; extra < 65536 && !ok_seen; extra += 128) {
        capped c = {0, (size_t)1 << 30};
        lua_State *L = lua_newstate(capped_alloc, &c);
        CHECK(L != NULL);
        open_cljson(L);
        CHECK(luaL_dostring(L, src) == LUA_OK);
        lua_gc(L, LUA_GCCOLLECT);
        c.cap = c.used + extra;
        buf b = BUF_INIT;
        char err[320];
        if (cljson_encode(L, -1, &b, 0, err, sizeof err) == 0) {
            ok_seen = 1;
            CHECK(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0);
        } else {
            fail_seen = 1;
            CHECK(b.len == 0);
        }
        c.cap = (size_t)1 << 30;
        buf_free(&b);
        lua_close(L);
    }
    CHECK(ok_seen && fail_seen);
}

/* The direct decoder under memory pressure: a Lua memory error at any point
 * leaks nothing (ASan) and with enough memory the value is right. */
static void test_lua_decode_oom(void)
{
    const char *src = "local cj = require 'cljson'\n"
                      "local s = '[{\"a\\\\n\":\"x\\\\u00e9y\",\"b\":[1,2.5,1e400,"
                      "123456789012345678901]},{\"a\\\\n\":\"z\",\"b\":{}}]'\n"
                      "return function() return cj.encode(cj.decode(s)) end";
    const char *want = "[{\"a\\n\":\"x\xc3\xa9y\",\"b\":[1,2.5,1e400,123456789012345678901]},"
                       "{\"a\\n\":\"z\",\"b\":{}}]";
    int ok_seen = 0, fail_seen = 0;
    for (size_t extra = 0; extra < 65536 && !ok_seen; extra += 64) {
        capped c = {0, (size_t)1 << 30};
        lua_State *L = lua_newstate(capped_alloc, &c);
        open_cljson(L);
        CHECK(luaL_dostring(L, src) == LUA_OK);
        lua_gc(L, LUA_GCCOLLECT);
        c.cap = c.used + extra;
        if (lua_pcall(L, 0, 1, 0) == LUA_OK) {
            ok_seen = 1;
            CHECK_STR(lua_tostring(L, -1), want);
        } else {
            fail_seen = 1;
        }
        c.cap = (size_t)1 << 30;
        lua_close(L);
    }
    CHECK(ok_seen && fail_seen);
}

/* Remembered key order (order strings in a weak table, key lists cached for
 * the encoder): explicit expected texts for decoded-then-modified objects, through
 * both decoders (the direct one and the tree path), past the list cache's limit
 * and across full collections. The chunk returns nil or what went wrong. */
static const char *const order_checks =
    "local cj, tree = require 'cljson', ...\n"
    "local function eq(got, want, what)\n"
    "  if got ~= want then error(what .. ': got ' .. tostring(got) .. ' want ' .. want, 2) end "
    "end\n"
    "for _, dec in ipairs({cj.pdecode, tree}) do\n"
    "  local function d(s) return assert(dec(s)) end\n"
    "  -- duplicates: first position, last value; then removed, re-added, added keys\n"
    "  local o = d('{\"b\":1,\"a\":2,\"c\":3,\"b\":4}')\n"
    "  eq(cj.encode(o), '{\"b\":4,\"a\":2,\"c\":3}', 'dup')\n"
    "  eq(table.concat(cj.keys(o), ','), 'b,a,c', 'keys')\n"
    "  o.a = nil o.d = 5 o['0'] = 6\n"
    "  eq(cj.encode(o), '{\"b\":4,\"c\":3,\"0\":6,\"d\":5}', 'removed/added')\n"
    "  o.a = 7\n"
    "  eq(cj.encode(o), '{\"b\":4,\"a\":7,\"c\":3,\"0\":6,\"d\":5}', 're-added')\n"
    "  eq(table.concat(cj.keys(o), ','), 'b,a,c,0,d', 'keys after')\n"
    "  eq(cj.encode_canonical(o), '{\"0\":6,\"a\":7,\"b\":4,\"c\":3,\"d\":5}', 'canonical')\n"
    "  -- duplicates among few members: same lengths, prefixes, not the first key\n"
    "  eq(cj.encode(d('{\"zb\":1,\"zc\":2,\"z\":3,\"zcb\":4,\"zc\":5,\"z\":6,\"y\":7}')),\n"
    "     '{\"zb\":1,\"zc\":5,\"z\":6,\"zcb\":4,\"y\":7}', 'dup few')\n"
    "  eq(cj.encode(d('{\"b\":1,\"c\":2,\"a\":3}')), '{\"b\":1,\"c\":2,\"a\":3}', 'no dup')\n"
    "  -- 14 to 18 members, a duplicate of a middle key last\n"
    "  for m = 14, 18 do\n"
    "    local p, want = {}, {}\n"
    "    for i = m - 1, 1, -1 do\n"
    "      p[#p + 1] = string.format('\"q%d\":%d', i, i)\n"
    "      want[#want + 1] = string.format('\"q%d\":%d', i, i == 5 and 0 or i)\n"
    "    end\n"
    "    p[#p + 1] = '\"q5\":0'\n"
    "    eq(cj.encode(d('{' .. table.concat(p, ',') .. '}')), '{' .. table.concat(want, ',') .. "
    "'}',\n"
    "       'dup of ' .. m)\n"
    "  end\n"
    "  -- rows share an order: changing one row changes no other\n"
    "  local rows = d('[{\"y\":1,\"x\":2},{\"y\":3,\"x\":4},{\"y\":5,\"x\":6,\"y\":7}]')\n"
    "  rows[1].x = nil rows[1].a = 0\n"
    "  eq(cj.encode(rows), '[{\"y\":1,\"a\":0},{\"y\":3,\"x\":4},{\"y\":7,\"x\":6}]', 'rows')\n"
    "  -- an object of more than 512 members (several flushes) with duplicates\n"
    "  local p, want = {}, {}\n"
    "  for i = 1200, 1, -1 do p[#p + 1] = string.format('\"k%d\":%d', i, i) end\n"
    "  p[#p + 1] = '\"k700\":0' p[#p + 1] = '\"k1\":-1'\n"
    "  for i = 1200, 1, -1 do want[#want + 1] = string.format('\"k%d\":%d', i, "
    "i == 700 and 0 or i == 1 and -1 or i) end\n"
    "  local big = d('{' .. table.concat(p, ',') .. '}')\n"
    "  eq(cj.encode(big), '{' .. table.concat(want, ',') .. '}', 'big')\n"
    "  -- long keys (two-byte lengths), NUL and multi-byte keys, long order strings\n"
    "  local lk = string.rep('x', 300)\n"
    "  local t = '{\"z\":1,\"' .. lk .. '\":2,\"a\\\\u0000b\":3,\"\\xc3\\xa9\":4,\"' .. lk .. "
    "'y\":5,\"\":6}'\n"
    "  eq(cj.encode(d(t)), t, 'long keys')\n"
    "  -- more orders than the list cache holds, encoded twice, across collections\n"
    "  local many = {}\n"
    "  for i = 1, 5000 do many[i] = d(string.format('{\"s%d_b\":1,\"s%d_a\":2}', i, i)) end\n"
    "  for pass = 1, 2 do\n"
    "    for i = 1, 5000, 7 do\n"
    "      eq(cj.encode(many[i]), string.format('{\"s%d_b\":1,\"s%d_a\":2}', i, i), 'many')\n"
    "    end\n"
    "    collectgarbage() collectgarbage()\n"
    "  end\n"
    "end\n"
    "-- object(t, keys): duplicates in keys, keys not in t, a stated invalid UTF-8 key\n"
    "local o = cj.object({c = 1, a = 2, x = 3}, {'c', 'q', 'a', 'c'})\n"
    "eq(cj.encode(o), '{\"c\":1,\"a\":2,\"x\":3}', 'object()')\n"
    "local ok, err = pcall(cj.encode, cj.object({['\\xff'] = 1}, {'\\xff'}))\n"
    "eq(err, 'cljson: invalid UTF-8 in object key at $.?', 'bad key')\n"
    "-- an empty stated order is no order\n"
    "eq(cj.encode(cj.object({b = 1, a = 2}, {})), '{\"a\":2,\"b\":1}', 'empty order')\n";

static void test_lua_key_order(void)
{
    lua_State *L = luaL_newstate();
    open_cljson(L);
    CHECK(luaL_loadstring(L, order_checks) == LUA_OK);
    lua_pushcfunction(L, cljson_pdecode_tree);
    int st = lua_pcall(L, 1, 0, 0);
    if (st != LUA_OK)
        fprintf(stderr, "key order: %s\n", lua_tostring(L, -1));
    CHECK(st == LUA_OK);
    lua_close(L);
}

/* The byte-by-byte escape the word-at-a-time loops must match. */
static void ref_escape(buf *b, const unsigned char *s, size_t n)
{
    buf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned c = s[i];
        if (c == '"' || c == '\\')
            buf_printf(b, "\\%c", c);
        else if (c == '\n')
            buf_append(b, "\\n", 2);
        else if (c < 0x20 && c != '\b' && c != '\f' && c != '\r' && c != '\t')
            buf_printf(b, "\\u%04x", c);
        else if (c < 0x20)
            buf_printf(b, "\\%c", c == '\b' ? 'b' : c == '\f' ? 'f' : c == '\r' ? 'r' : 't');
        else
            buf_append(b, (const char *)&s[i], 1);
    }
    buf_append(b, "\"", 1);
}

/* Strings of every length up to 40 with a byte to escape (or a multi-byte
 * character) at every position, so each word and tail boundary is crossed: the
 * writer, the Lua encoder, the Lua decoder and the parser agree with the
 * byte-by-byte rules. */
static void test_string_words(void)
{
    static const char *const inserts[] = {"\"", "\\",   "\n",       "\x01",         "\x1f",
                                          " ",  "\x7f", "\xc3\xa9", "\xe4\xb8\xad", "\t"};
    lua_State *L = luaL_newstate();
    open_cljson(L);
    int bad = 0;
    for (size_t len = 0; len <= 40; len++) {
        for (size_t at = 0; at <= len; at++) {
            for (size_t k = 0; k < sizeof inserts / sizeof inserts[0]; k++) {
                char s[64];
                size_t n = 0, il = strlen(inserts[k]);
                for (size_t i = 0; i < len; i++) {
                    if (i == at) {
                        memcpy(s + n, inserts[k], il);
                        n += il;
                    }
                    s[n++] = (char)('a' + i % 26);
                }
                if (at == len) {
                    memcpy(s + n, inserts[k], il);
                    n += il;
                }
                buf want = {0}, got = {0};
                ref_escape(&want, (const unsigned char *)s, n);
                json_write_string(&got, s, n);
                if (got.len != want.len || memcmp(got.data, want.data, want.len) != 0)
                    bad++;
                lua_getglobal(L, "cljson");
                lua_getfield(L, -1, "encode");
                lua_pushlstring(L, s, n);
                if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_isstring(L, -1) ||
                    lua_rawlen(L, -1) != want.len ||
                    memcmp(lua_tostring(L, -1), want.data, want.len))
                    bad++;
                lua_pop(L, 1);
                lua_getfield(L, -1, "decode");
                lua_pushlstring(L, want.data, want.len);
                if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_isstring(L, -1) ||
                    lua_rawlen(L, -1) != n || memcmp(lua_tostring(L, -1), s, n))
                    bad++;
                lua_pop(L, 2);
                size_t pl = 0;
                json_value *pv = parse(want.data);
                const char *ps = pv ? json_get_str(pv, &pl) : NULL;
                if (!ps || pl != n || memcmp(ps, s, n) != 0)
                    bad++;
                json_free(pv);
                buf_free(&want);
                buf_free(&got);
            }
        }
    }
    CHECK(bad == 0);
    lua_close(L);
}

/* Strings dense in bytes to escape - several in one word, every byte of a word,
 * runs across the writer's slices of 4096 bytes - and bytes that differ from '"',
 * '\\' or 0x20 only in bit 7 or in one low bit: the writer matches the
 * byte-by-byte rules. */
static void test_string_dense(void)
{
    static const unsigned char alphabet[] = {'"',  '\\', '\n', 0x01, 0x1f, 0x00, 'a',  ' ',
                                             0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc,
                                             0xa0, 0x9f, 0xff, ':',  '{',  ','};
    uint32_t seed = 12345;
    int bad = 0;
    for (int round = 0; round < 3000; round++) {
        size_t n = round < 2000 ? (size_t)(round % 97) : (size_t)(round % 9001);
        unsigned char *s = malloc(n + 1);
        /* 0: any of the alphabet, 1: '"' only, 2: 0x01 only, 3: JSON-like, 4: '"' and
         * '\\' among letters, no control byte */
        int mode = round % 5;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            unsigned r = seed >> 16;
            s[i] = mode == 1   ? '"'
                   : mode == 2 ? 0x01
                   : mode == 3 ? (r % 7 == 0 ? '"' : (unsigned char)('a' + r % 26))
                   : mode == 4 ? (r % 5 == 0   ? '"'
                                  : r % 5 == 1 ? '\\'
                                               : (unsigned char)('a' + r % 26))
                               : alphabet[r % sizeof alphabet];
        }
        buf want = {0}, got = {0};
        buf_puts(&got, "x"); /* appended after what the buffer holds */
        ref_escape(&want, s, n);
        json_write_string(&got, (const char *)s, n);
        if (got.len != want.len + 1 || memcmp(got.data + 1, want.data, want.len) != 0 ||
            got.data[got.len] != '\0')
            bad++;
        buf_free(&want);
        buf_free(&got);
        free(s);
    }
    CHECK(bad == 0);
}

static int run_unit(void)
{
    test_string_words();
    test_string_dense();
    test_types();
    test_numbers();
    test_errors();
    test_keep();
    test_packed_tree();
    test_utf8();
    test_order_and_canonical();
    test_limits();
    test_wide();
    test_builders();
    test_packed_copies();
    test_lua_bridge();
    test_push_order();
    test_lua_encode_equivalence();
    test_lua_encode_wide();
    test_lua_key_order();
    test_lua_encode_oom();
    test_lua_decode_oom();
    return CHECK_DONE();
}

/* ------------------------------------------------------------------ corpora */

/* Runs y_ / n_ / i_ files of dir. y_ must parse and reach a write fixed point,
 * n_ must fail with an offset; i_ outcomes are printed. Returns files seen. */
static size_t run_parsing_dir(const char *dir, int print_i)
{
    size_t n = 0;
    char **names = list_dir(dir, &n);
    buf b = BUF_INIT;
    for (size_t i = 0; i < n; i++) {
        char path[8192];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path)
            continue;
        CHECK(read_file(path, &b) == 0);
        json_value *v = json_parse(b.data, b.len, NULL, last_err, sizeof last_err);
        char kind = names[i][0];
        if (kind == 'y') {
            if (!v)
                fprintf(stderr, "%s: rejected: %s\n", names[i], last_err);
            CHECK(v != NULL);
            if (v)
                CHECK(fixed_point(v));
        } else if (kind == 'n') {
            if (v)
                fprintf(stderr, "%s: accepted but must be rejected\n", names[i]);
            CHECK(v == NULL);
            if (!v)
                CHECK(strstr(last_err, " at byte ") != NULL);
        } else if (kind == 'i' && print_i) {
            buf w = BUF_INIT;
            if (v) {
                json_write(&w, v, 0);
                if (w.len > 60)
                    w.len = 60, w.data[60] = '\0';
                CHECK(fixed_point(v));
            }
            printf("%-50s %s %s\n", names[i], v ? "accepted" : "rejected", v ? w.data : last_err);
            buf_free(&w);
        }
        json_free(v);
        free(names[i]);
    }
    free(names);
    buf_free(&b);
    return n;
}

static int run_corpus(const char *dir)
{
    size_t n = run_parsing_dir(dir, 1);
    CHECK(n >= 20);
    return CHECK_DONE();
}

/* test_transform: every file parses or is rejected cleanly; accepted ones reach
 * a fixed point. Prints what the codec writes back. */
static void run_transform(const char *dir)
{
    size_t n = 0;
    char **names = list_dir(dir, &n);
    buf b = BUF_INIT, w = BUF_INIT;
    for (size_t i = 0; i < n; i++) {
        char path[8192];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path)
            continue;
        CHECK(read_file(path, &b) == 0);
        json_value *v = json_parse(b.data, b.len, NULL, last_err, sizeof last_err);
        buf_reset(&w);
        if (v) {
            json_write(&w, v, 0);
            CHECK(fixed_point(v));
        }
        printf("transform %-45s %s\n", names[i], v ? w.data : last_err);
        json_free(v);
        free(names[i]);
    }
    free(names);
    buf_free(&b);
    buf_free(&w);
}

static int run_suite(const char *root)
{
    struct stat st;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/test_parsing", root);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "JSONTestSuite not found at %s: skipped\n", root);
        return 77;
    }
    size_t n = run_parsing_dir(dir, 1);
    CHECK(n >= 300);
    snprintf(dir, sizeof dir, "%s/test_transform", root);
    if (stat(dir, &st) == 0)
        run_transform(dir);
    return CHECK_DONE();
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "unit") == 0)
        return run_unit();
    if (argc >= 3 && strcmp(argv[1], "corpus") == 0)
        return run_corpus(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "suite") == 0)
        return run_suite(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "decode") == 0)
        return run_decode_equivalence(argc - 2, argv + 2);
    fprintf(stderr, "usage: test_json unit | corpus DIR | suite DIR\n");
    return 2;
}
