/* test_confirm: which calls confirm.tools makes a person confirm (plain, narrowed
 * to a knowledge network and an action type, execute_tool's inner call), and the
 * confirmation state: bound to the principal, the tool, the arguments, the
 * interaction and the secret; every character counts; an expired state is told
 * apart from a forged one. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "confirm.h"
#include "util.h"

static json_value *parse(const char *s)
{
    return json_parse(s, strlen(s), NULL, NULL, 0);
}

static void test_rules(void)
{
    json_value *ops = parse("{\"kn_id\":\"kn_ops\",\"at_id\":\"at_restart\"}");
    json_value *med = parse("{\"kn_id\":\"kn_med\",\"at_id\":\"at_restart\"}");
    CHECK(!confirm_applies("", "execute_action", ops));
    CHECK(!confirm_applies(NULL, "execute_action", ops));
    CHECK(confirm_applies("execute_action", "execute_action", ops));
    CHECK(confirm_applies(" execute_skill , execute_action ", "execute_action", ops));
    CHECK(!confirm_applies("execute_action", "execute_skill", ops));
    CHECK(!confirm_applies("execute_actions", "execute_action", ops));
    CHECK(confirm_applies("execute_action@kn_ops", "execute_action", ops));
    CHECK(!confirm_applies("execute_action@kn_ops", "execute_action", med));
    CHECK(!confirm_applies("execute_action@kn_ops", "execute_action", NULL));
    CHECK(confirm_applies("execute_action@kn_ops/at_restart", "execute_action", ops));
    CHECK(!confirm_applies("execute_action@kn_ops/at_other", "execute_action", ops));
    CHECK(confirm_applies("execute_action@*/at_restart", "execute_action", med));
    CHECK(confirm_applies("execute_action@kn_x,execute_action@kn_med", "execute_action", med));
    CHECK(confirm_names_tool("execute_action@kn_ops/at_x", "execute_action"));
    CHECK(!confirm_names_tool("execute_action@kn_ops/at_x", "execute_skill"));
    CHECK(!confirm_may_apply("", "execute_tool"));
    CHECK(!confirm_may_apply(NULL, "execute_action"));
    CHECK(!confirm_may_apply("execute_action", "query_object_instance"));
    CHECK(confirm_may_apply("execute_action@kn_ops/at_x", "execute_action"));
    CHECK(confirm_may_apply("execute_action", "execute_tool")); /* judged as its inner call */
    CHECK(!confirm_may_apply("execute_actions", "execute_action"));

    json_value *via =
        parse("{\"tool_id\":\"execute_action\",\"arguments\":{\"kn_id\":\"kn_ops\"}}");
    const char *t;
    const json_value *ta;
    confirm_target("execute_tool", via, &t, &ta);
    CHECK_STR(t, "execute_action");
    CHECK_STR(json_get_string(ta, "kn_id"), "kn_ops");
    json_value *skill = parse("{\"skill_id\":\"s1\",\"arguments\":{}}");
    confirm_target("execute_tool", skill, &t, &ta);
    CHECK_STR(t, "execute_skill");
    confirm_target("query_object_instance", ops, &t, &ta);
    CHECK_STR(t, "query_object_instance");
    CHECK(ta == ops);
    json_free(ops);
    json_free(med);
    json_free(via);
    json_free(skill);
}

static principal who(const char *key)
{
    principal p;
    memset(&p, 0, sizeof p);
    str_copy(p.key, sizeof p.key, key);
    return p;
}

static void test_state(void)
{
    session_ctx *s = session_new("secret-one", 3600, NULL);
    session_ctx *other = session_new("secret-two", 3600, NULL);
    principal a = who("aaaa"), b = who("bbbb");
    json_value *args = parse("{\"b\":1,\"a\":{\"y\":2,\"x\":[1,2]},\"bkn_context\":"
                             "{\"conversation_id\":\"c1\",\"interaction_id\":\"i1\"}}");
    json_value *same = parse("{\"bkn_context\":{\"interaction_id\":\"i1\",\"conversation_id\":"
                             "\"c1\"},\"a\":{\"x\":[1,2],\"y\":2},\"b\":1}");
    char h[65], h2[65], st[CONFIRM_STATE_LEN + 1], nonce[33];
    long long exp = 0;
    confirm_args_hash(args, h);
    confirm_args_hash(same, h2);
    CHECK_STR(h, h2); /* key order does not matter */
    CHECK_STR(confirm_interaction(args), "i1");
    confirm_state_mint(s, &a, "execute_action", h, "i1", 60, st);
    CHECK(strlen(st) == CONFIRM_STATE_LEN);
    CHECK(confirm_state_check(s, &a, "execute_action", h, "i1", st, nonce, &exp) == CONFIRM_OK);
    CHECK(strlen(nonce) == 32 && !memcmp(nonce, st + 4, 32));
    CHECK(exp > now_wall_ms() / 1000);
    CHECK(confirm_state_check(s, &b, "execute_action", h, "i1", st, nonce, NULL) ==
          CONFIRM_INVALID);
    CHECK(confirm_state_check(other, &a, "execute_action", h, "i1", st, nonce, NULL) ==
          CONFIRM_INVALID);
    CHECK(confirm_state_check(s, &a, "execute_skill", h, "i1", st, nonce, NULL) == CONFIRM_INVALID);
    CHECK(confirm_state_check(s, &a, "execute_action", h, "i2", st, nonce, NULL) ==
          CONFIRM_INVALID);
    char h3[65];
    confirm_args_hash(NULL, h3);
    CHECK(confirm_state_check(s, &a, "execute_action", h3, "i1", st, nonce, NULL) ==
          CONFIRM_INVALID);
    CHECK(confirm_state_check(s, &a, "execute_action", h, "i1", NULL, nonce, NULL) ==
          CONFIRM_INVALID);
    CHECK(confirm_state_check(s, &a, "execute_action", h, "i1", "cs1.x", nonce, NULL) ==
          CONFIRM_INVALID);
    for (size_t i = 0; i < CONFIRM_STATE_LEN; i++) {
        char bad[CONFIRM_STATE_LEN + 1];
        memcpy(bad, st, sizeof bad);
        bad[i] = bad[i] == 'a' ? 'b' : 'a';
        CHECK(confirm_state_check(s, &a, "execute_action", h, "i1", bad, nonce, NULL) ==
              CONFIRM_INVALID);
    }
    /* a ttl <= 0 takes the default (ten minutes) */
    char old[CONFIRM_STATE_LEN + 1];
    confirm_state_mint(s, &a, "execute_action", h, "i1", -1, old);
    CHECK(confirm_state_check(s, &a, "execute_action", h, "i1", old, nonce, NULL) == CONFIRM_OK);
    json_free(args);
    json_free(same);
    session_free(s);
    session_free(other);
}

static void test_describe(void)
{
    json_value *args =
        parse("{\"kn_id\":\"kn_ops\",\"at_id\":\"at_restart\",\"_instance_identities\":"
              "[{\"id\":1},{\"id\":2},{\"id\":3},{\"id\":4},{\"id\":5},{\"id\":6}],"
              "\"dynamic_params\":{\"grace\":7}}");
    buf m = BUF_INIT, sc = BUF_INIT;
    confirm_describe("execute_action", args, LANG_EN_US, &m, &sc);
    CHECK(strstr(m.data, "\"at_restart\"") && strstr(m.data, "\"kn_ops\""));
    CHECK(strstr(m.data, "6 instance(s)") && strstr(m.data, "and 1 more"));
    CHECK(strstr(m.data, "{\"grace\":7}"));
    json_value *schema = parse(sc.data);
    CHECK(schema && json_get(json_get(json_get(schema, "properties"), "confirm"), "type"));
    json_free(schema);
    buf_reset(&m);
    buf_reset(&sc);
    confirm_describe("execute_action", args, LANG_ZH_CN, &m, &sc);
    CHECK(strstr(m.data, "6 个实例"));
    buf_free(&m);
    buf_free(&sc);
    json_free(args);
}

/* The session era's elicitation capability rides in the session id, under its tag. */
static void test_session_flag(void)
{
    session_ctx *s = session_new("secret-one", 3600, NULL);
    principal a = who("aaaa");
    char yes[SESSION_ID_LEN + 1], no[SESSION_ID_LEN + 1];
    for (int i = 0; i < 16; i++) {
        session_mint_flags(s, &a, SESSION_FLAG_ELICITATION, yes);
        session_mint(s, &a, no);
        CHECK(session_check_id(s, &a, yes) == SESSION_OK);
        CHECK(session_check_id(s, &a, no) == SESSION_OK);
        CHECK(session_id_flags(yes) == SESSION_FLAG_ELICITATION);
        CHECK(session_id_flags(no) == 0);
        /* setting the flag by hand breaks the id */
        char forged[SESSION_ID_LEN + 1];
        memcpy(forged, no, sizeof forged);
        forged[31] =
            "0123456789abcdef"[(strchr("0123456789abcdef", no[31]) - "0123456789abcdef") | 1];
        CHECK(session_check_id(s, &a, forged) == SESSION_INVALID);
    }
    session_free(s);
}

int main(void)
{
    test_session_flag();
    test_rules();
    test_state();
    test_describe();
    return CHECK_DONE();
}
