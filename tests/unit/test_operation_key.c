/* test_operation_key: the operation key (flow_operation_key) and the idempotency input hash
 * (idem_input_hash) are functions of the normalized input: member order,
 * nested too, never matters; every value does. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "flow.h"
#include "idem.h"
#include "json.h"
#include "util.h"

/* Hash of a JSON text, parsed as the server parses a request body. */
static void hash_of(const char *text, char out[65])
{
    char err[200] = "";
    json_value *v = json_parse(text, strlen(text), NULL, err, sizeof err);
    if (!v)
        fprintf(stderr, "parse failed: %s: %s\n", err, text);
    CHECK(v != NULL);
    idem_input_hash(v, out);
    json_free(v);
}

/* Operation key of a call without an invocation id: it depends on the input hash. */
static void opkey_of(const char *text, char out[40])
{
    char h[65];
    hash_of(text, h);
    flow_operation_key("conv_1", "int_1", "rest", "query_object_instance", NULL, "req_abcdefgh", h,
                       out);
}

static const char BASE[] =
    "{\"kn_id\":\"kn_medical\",\"ot_id\":\"ot_drug\",\"limit\":5,"
    "\"condition\":{\"operation\":\"and\",\"sub_conditions\":["
    "{\"field\":\"name\",\"operation\":\"==\",\"value\":\"a\"},"
    "{\"field\":\"drug_id\",\"operation\":\">\",\"value\":9007199254740993}]},"
    "\"properties\":[\"name\",\"drug_id\"],\"extra\":{\"x\":{\"y\":1,\"z\":[true,null]}}}";

/* The same members, top-level and nested objects in other orders, other whitespace. */
static const char *const REORDERED[] = {
    "{\"properties\":[\"name\",\"drug_id\"],\"limit\":5,\"ot_id\":\"ot_drug\","
    "\"extra\":{\"x\":{\"z\":[true,null],\"y\":1}},\"kn_id\":\"kn_medical\","
    "\"condition\":{\"sub_conditions\":[{\"value\":\"a\",\"operation\":\"==\",\"field\":\"name\"},"
    "{\"value\":9007199254740993,\"field\":\"drug_id\",\"operation\":\">\"}],\"operation\":\"and\"}"
    "}",
    "{ \"condition\" : { \"operation\" : \"and\" , \"sub_conditions\" : [ { \"operation\":\"==\","
    "\"field\":\"name\",\"value\":\"a\"}, {\"operation\":\">\",\"value\":9007199254740993,"
    "\"field\":\"drug_id\"} ] },\n\"extra\":{\"x\":{\"y\":1,\"z\":[true,null]}},\"limit\":5,"
    "\"kn_id\":\"kn_medical\",\"ot_id\":\"ot_drug\",\"properties\":[\"name\",\"drug_id\"]}",
};

/* One value changed each (array order is a value: it is kept). */
static const char *const CHANGED[] = {
    "{\"kn_id\":\"kn_ops\",\"ot_id\":\"ot_drug\",\"limit\":5,"
    "\"condition\":{\"operation\":\"and\",\"sub_conditions\":["
    "{\"field\":\"name\",\"operation\":\"==\",\"value\":\"a\"},"
    "{\"field\":\"drug_id\",\"operation\":\">\",\"value\":9007199254740993}]},"
    "\"properties\":[\"name\",\"drug_id\"],\"extra\":{\"x\":{\"y\":1,\"z\":[true,null]}}}",
    "{\"kn_id\":\"kn_medical\",\"ot_id\":\"ot_drug\",\"limit\":6,"
    "\"condition\":{\"operation\":\"and\",\"sub_conditions\":["
    "{\"field\":\"name\",\"operation\":\"==\",\"value\":\"a\"},"
    "{\"field\":\"drug_id\",\"operation\":\">\",\"value\":9007199254740993}]},"
    "\"properties\":[\"name\",\"drug_id\"],\"extra\":{\"x\":{\"y\":1,\"z\":[true,null]}}}",
    /* a big integer one above: exact numbers */
    "{\"kn_id\":\"kn_medical\",\"ot_id\":\"ot_drug\",\"limit\":5,"
    "\"condition\":{\"operation\":\"and\",\"sub_conditions\":["
    "{\"field\":\"name\",\"operation\":\"==\",\"value\":\"a\"},"
    "{\"field\":\"drug_id\",\"operation\":\">\",\"value\":9007199254740994}]},"
    "\"properties\":[\"name\",\"drug_id\"],\"extra\":{\"x\":{\"y\":1,\"z\":[true,null]}}}",
    "{\"kn_id\":\"kn_medical\",\"ot_id\":\"ot_drug\",\"limit\":5,"
    "\"condition\":{\"operation\":\"and\",\"sub_conditions\":["
    "{\"field\":\"name\",\"operation\":\"==\",\"value\":\"b\"},"
    "{\"field\":\"drug_id\",\"operation\":\">\",\"value\":9007199254740993}]},"
    "\"properties\":[\"name\",\"drug_id\"],\"extra\":{\"x\":{\"y\":1,\"z\":[true,null]}}}",
    "{\"kn_id\":\"kn_medical\",\"ot_id\":\"ot_drug\",\"limit\":5,"
    "\"condition\":{\"operation\":\"and\",\"sub_conditions\":["
    "{\"field\":\"name\",\"operation\":\"==\",\"value\":\"a\"},"
    "{\"field\":\"drug_id\",\"operation\":\">\",\"value\":9007199254740993}]},"
    "\"properties\":[\"drug_id\",\"name\"],\"extra\":{\"x\":{\"y\":1,\"z\":[true,null]}}}",
    "{\"kn_id\":\"kn_medical\",\"ot_id\":\"ot_drug\",\"limit\":5,"
    "\"condition\":{\"operation\":\"and\",\"sub_conditions\":["
    "{\"field\":\"name\",\"operation\":\"==\",\"value\":\"a\"},"
    "{\"field\":\"drug_id\",\"operation\":\">\",\"value\":9007199254740993}]},"
    "\"properties\":[\"name\",\"drug_id\"],\"extra\":{\"x\":{\"y\":2,\"z\":[true,null]}}}",
    "{\"kn_id\":\"kn_medical\",\"ot_id\":\"ot_drug\",\"limit\":5,"
    "\"condition\":{\"operation\":\"and\",\"sub_conditions\":["
    "{\"field\":\"name\",\"operation\":\"==\",\"value\":\"a\"},"
    "{\"field\":\"drug_id\",\"operation\":\">\",\"value\":9007199254740993}]},"
    "\"properties\":[\"name\",\"drug_id\"],\"extra\":{\"x\":{\"y\":1,\"z\":[false,null]}}}",
    /* a member added (deep) */
    "{\"kn_id\":\"kn_medical\",\"ot_id\":\"ot_drug\",\"limit\":5,"
    "\"condition\":{\"operation\":\"and\",\"sub_conditions\":["
    "{\"field\":\"name\",\"operation\":\"==\",\"value\":\"a\"},"
    "{\"field\":\"drug_id\",\"operation\":\">\",\"value\":9007199254740993}]},"
    "\"properties\":[\"name\",\"drug_id\"],\"extra\":{\"x\":{\"y\":1,\"z\":[true,null],\"w\":0}}}",
    /* a string "5" instead of the number 5 */
    "{\"kn_id\":\"kn_medical\",\"ot_id\":\"ot_drug\",\"limit\":\"5\","
    "\"condition\":{\"operation\":\"and\",\"sub_conditions\":["
    "{\"field\":\"name\",\"operation\":\"==\",\"value\":\"a\"},"
    "{\"field\":\"drug_id\",\"operation\":\">\",\"value\":9007199254740993}]},"
    "\"properties\":[\"name\",\"drug_id\"],\"extra\":{\"x\":{\"y\":1,\"z\":[true,null]}}}",
};

static void test_order_does_not_matter(void)
{
    char h0[65], h1[65], k0[40], k1[40];
    hash_of(BASE, h0);
    opkey_of(BASE, k0);
    CHECK(strlen(h0) == 64);
    CHECK(strncmp(k0, "op_", 3) == 0 && strlen(k0) == 35);
    for (size_t i = 0; i < sizeof REORDERED / sizeof *REORDERED; i++) {
        hash_of(REORDERED[i], h1);
        opkey_of(REORDERED[i], k1);
        CHECK_STR(h1, h0);
        CHECK_STR(k1, k0);
    }
}

static void test_values_matter(void)
{
    char h0[65], k0[40];
    hash_of(BASE, h0);
    opkey_of(BASE, k0);
    for (size_t i = 0; i < sizeof CHANGED / sizeof *CHANGED; i++) {
        char h[65], k[40];
        hash_of(CHANGED[i], h);
        opkey_of(CHANGED[i], k);
        if (!strcmp(h, h0))
            fprintf(stderr, "CHANGED[%zu] hashes like BASE\n", i);
        CHECK(strcmp(h, h0) != 0);
        CHECK(strcmp(k, k0) != 0);
        /* and every changed input differs from every other */
        for (size_t j = 0; j < i; j++) {
            char hj[65];
            hash_of(CHANGED[j], hj);
            CHECK(strcmp(h, hj) != 0);
        }
    }
}

/* Every other component of the operation key counts too; with an invocation id the
 * key names that id, not the request id. */
static void test_key_components(void)
{
    char h[65], k0[40], k[40];
    hash_of(BASE, h);
    flow_operation_key("conv_1", "int_1", "rest", "t", NULL, "req_abcdefgh", h, k0);
    flow_operation_key("conv_1", "int_1", "rest", "t", NULL, "req_abcdefgh", h, k);
    CHECK_STR(k, k0); /* deterministic */
    flow_operation_key("conv_2", "int_1", "rest", "t", NULL, "req_abcdefgh", h, k);
    CHECK(strcmp(k, k0) != 0);
    flow_operation_key("conv_1", "int_2", "rest", "t", NULL, "req_abcdefgh", h, k);
    CHECK(strcmp(k, k0) != 0);
    flow_operation_key("conv_1", "int_1", "mcp", "t", NULL, "req_abcdefgh", h, k);
    CHECK(strcmp(k, k0) != 0);
    flow_operation_key("conv_1", "int_1", "rest", "u", NULL, "req_abcdefgh", h, k);
    CHECK(strcmp(k, k0) != 0);
    flow_operation_key("conv_1", "int_1", "rest", "t", NULL, "req_abcdefgi", h, k);
    CHECK(strcmp(k, k0) != 0);
    char inv1[40], inv2[40], inv3[40];
    flow_operation_key("conv_1", "int_1", "rest", "t", "inv-1", "req_abcdefgh", h, inv1);
    flow_operation_key("conv_1", "int_1", "rest", "t", "inv-1", "req_other123", h, inv2);
    flow_operation_key("conv_1", "int_1", "rest", "t", "inv-2", "req_abcdefgh", h, inv3);
    CHECK(strcmp(inv1, k0) != 0);
    CHECK_STR(inv2, inv1); /* the invocation id wins over the request id */
    CHECK(strcmp(inv3, inv1) != 0);
}

/* The normalized input as flow builds it ({"arguments", "bkn_context"}): nested
 * key order of both parts does not matter. */
static void test_wrapped_input(void)
{
    char a[65], b[65], c[65];
    hash_of("{\"arguments\":{\"b\":{\"d\":1,\"c\":2},\"a\":[{\"y\":1,\"x\":2}]},"
            "\"bkn_context\":{\"interaction_id\":\"int_1\",\"conversation_id\":\"conv_1\"}}",
            a);
    hash_of("{\"bkn_context\":{\"conversation_id\":\"conv_1\",\"interaction_id\":\"int_1\"},"
            "\"arguments\":{\"a\":[{\"x\":2,\"y\":1}],\"b\":{\"c\":2,\"d\":1}}}",
            b);
    hash_of("{\"bkn_context\":{\"conversation_id\":\"conv_1\",\"interaction_id\":\"int_2\"},"
            "\"arguments\":{\"a\":[{\"x\":2,\"y\":1}],\"b\":{\"c\":2,\"d\":1}}}",
            c);
    CHECK_STR(a, b);
    CHECK(strcmp(a, c) != 0);
    /* NULL hashes as {} */
    char e[65], n[65];
    hash_of("{}", e);
    idem_input_hash(NULL, n);
    CHECK_STR(n, e);
}

/* The keys written as text are the hashes of the canonical JSON of the objects they
 * name: the same as a tree of those members written canonically and hashed
 * (escapes, a causation list, a parent, a query, either format). */
static void ref_opkey(const char *cid, const char *iid, const char *surface, const char *tool,
                      const char *inv, const char *req, const char *h, char out[40])
{
    json_value *o = json_new_object();
    buf id = BUF_INIT, text = BUF_INIT;
    char d[65];
    if (inv && *inv) {
        sha256_hex(inv, strlen(inv), d);
        buf_printf(&id, "inv:%s", d);
    } else {
        buf_printf(&id, "req:%s:%s", req, h);
    }
    json_set(o, "tool", json_new_str(tool, strlen(tool)));
    json_set(o, "surface", json_new_str(surface, strlen(surface)));
    json_set(o, "interaction_id", json_new_str(iid, strlen(iid)));
    json_set(o, "identity", json_new_str(id.data, id.len));
    json_set(o, "conversation_id", json_new_str(cid, strlen(cid)));
    json_write(&text, o, 1);
    sha256_hex(text.data, text.len, d);
    snprintf(out, 40, "op_%.32s", d);
    buf_free(&text);
    buf_free(&id);
    json_free(o);
}

static void test_text_keys_match_trees(void)
{
    static const char *const ids[] = {"conv_1", "c\"\\x\xc3\xa9\n", ""};
    char a[65], b[65];
    for (size_t i = 0; i < 3; i++) {
        flow_operation_key(ids[i], "int_1", "mcp", "t\"", NULL, "req_1", "abc", a);
        ref_opkey(ids[i], "int_1", "mcp", "t\"", NULL, "req_1", "abc", b);
        CHECK_STR(a, b);
        flow_operation_key("conv_1", ids[i], "rest", "tool", "inv-1", "req_1", "abc", a);
        ref_opkey("conv_1", ids[i], "rest", "tool", "inv-1", "req_1", "abc", b);
        CHECK_STR(a, b);
    }
    const char *args_text = "{\"z\":1,\"a\":[{\"y\":9007199254740993,\"b\":\"\\u00e9\"}],\"e\":{}}";
    json_value *args = json_parse(args_text, strlen(args_text), NULL, NULL, 0);
    json_value *causes = json_parse("[\"e1\",\"e2\"]", 11, NULL, NULL, 0);
    json_value *query = json_parse("{\"q\":\"1\",\"a\":\"2\"}", 17, NULL, NULL, 0);
    buf canon = BUF_INIT;
    json_write(&canon, args, 1);
    for (int k = 0; k < 8; k++) {
        bkn_context ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.adhoc = k == 0;
        snprintf(ctx.conversation_id, sizeof ctx.conversation_id, "conv_\"%d", k);
        snprintf(ctx.interaction_id, sizeof ctx.interaction_id, "int_%d", k);
        if (k & 2)
            snprintf(ctx.parent_operation_id, sizeof ctx.parent_operation_id, "op_p");
        ctx.causation_event_ids = k & 4 ? causes : NULL;
        int toon = k & 1;
        const json_value *q = k >= 6 ? query : NULL;
        flow_input_hash(canon.data, canon.len, &ctx, toon, q, a);
        json_value *in = json_new_object();
        json_set(in, "arguments", json_clone(args));
        if (!ctx.adhoc) {
            json_value *cx = json_new_object();
            json_set(cx, "conversation_id",
                     json_new_str(ctx.conversation_id, strlen(ctx.conversation_id)));
            json_set(cx, "interaction_id",
                     json_new_str(ctx.interaction_id, strlen(ctx.interaction_id)));
            if (ctx.parent_operation_id[0])
                json_set(cx, "parent_operation_id",
                         json_new_str(ctx.parent_operation_id, strlen(ctx.parent_operation_id)));
            if (ctx.causation_event_ids)
                json_set(cx, "causation_event_ids", json_clone(ctx.causation_event_ids));
            json_set(in, "bkn_context", cx);
        }
        json_set(in, "response_format", json_new_str(toon ? "toon" : "json", 4));
        if (q)
            json_set(in, "query", json_clone(q));
        char h[65];
        idem_input_hash(in, h);
        CHECK_STR(a, h);
        json_free(in);
    }
    buf_free(&canon);
    json_free(args);
    json_free(causes);
    json_free(query);
}

int main(void)
{
    test_order_does_not_matter();
    test_values_matter();
    test_key_components();
    test_wrapped_input();
    test_text_keys_match_trees();
    return CHECK_DONE();
}
