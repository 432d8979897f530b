#include "confirm.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the rule ---- */

/* Whether the entry [e, end) (surrounding blanks trimmed) names tool and, when
 * narrowed, kn and at (match_args: else any narrowing matches). */
static int entry_matches(const char *e, const char *end, const char *tool, const char *kn,
                         const char *at, int match_args)
{
    while (e < end && (*e == ' ' || *e == '\t'))
        e++;
    while (end > e && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    const char *at_sign = memchr(e, '@', (size_t)(end - e));
    const char *tend = at_sign ? at_sign : end;
    if ((size_t)(tend - e) != strlen(tool) || memcmp(e, tool, (size_t)(tend - e)) != 0)
        return 0;
    if (!at_sign || !match_args)
        return 1;
    const char *k = at_sign + 1;
    const char *slash = memchr(k, '/', (size_t)(end - k));
    const char *kend = slash ? slash : end;
    size_t kl = (size_t)(kend - k);
    if (!(kl == 1 && *k == '*') && (!kn || strlen(kn) != kl || memcmp(k, kn, kl) != 0))
        return 0;
    if (!slash)
        return 1;
    const char *a = slash + 1;
    size_t al = (size_t)(end - a);
    return (al == 1 && *a == '*') || (at && strlen(at) == al && memcmp(a, at, al) == 0);
}

static int spec_match(const char *spec, const char *tool, const json_value *args, int match_args)
{
    if (!spec || !*spec || !tool)
        return 0;
    const char *kn = args ? json_get_string(args, "kn_id") : NULL;
    const char *at = args ? json_get_string(args, "at_id") : NULL;
    for (const char *p = spec; *p;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        if (entry_matches(p, end, tool, kn, at, match_args))
            return 1;
        p = comma ? comma + 1 : end;
    }
    return 0;
}

int confirm_applies(const char *spec, const char *tool, const json_value *args)
{
    return spec_match(spec, tool, args, 1);
}

void confirm_target(const char *tool, const json_value *args, const char **target,
                    const json_value **target_args)
{
    *target = tool;
    *target_args = args;
    if (strcmp(tool, "execute_tool") || !args || json_typeof(args) != JSON_OBJECT)
        return;
    if (json_get_string(args, "skill_id")) {
        *target = "execute_skill";
        return;
    }
    const char *key = json_get_string(args, "tool_id");
    if (!key)
        key = json_get_string(args, "name");
    if (key) {
        *target = key;
        *target_args = json_get(args, "arguments");
    }
}

int confirm_names_tool(const char *spec, const char *tool)
{
    return spec_match(spec, tool, NULL, 0);
}

int confirm_may_apply(const char *spec, const char *tool)
{
    if (!spec || !*spec || !tool)
        return 0;
    return !strcmp(tool, "execute_tool") || spec_match(spec, tool, NULL, 0);
}

void confirm_args_hash(const json_value *args, char out[65])
{
    buf b = BUF_INIT;
    if (args)
        json_write(&b, args, 1);
    else
        buf_puts(&b, "{}");
    sha256_hex(b.data, b.len, out);
    buf_free(&b);
}

const char *confirm_interaction(const json_value *args)
{
    const json_value *ctx = args ? json_get(args, "bkn_context") : NULL;
    const char *id =
        ctx && json_typeof(ctx) == JSON_OBJECT ? json_get_string(ctx, "interaction_id") : NULL;
    return id ? id : "";
}

/* ---- the question ---- */

#define SHOWN_MAX 600 /* bytes of JSON shown per value before it is cut */

/* Appends v as compact JSON, cut after SHOWN_MAX bytes. */
static void put_json(buf *out, const json_value *v)
{
    buf b = BUF_INIT;
    json_write(&b, v, 0);
    if (b.len > SHOWN_MAX) {
        size_t n = SHOWN_MAX;
        while (n > 0 && ((unsigned char)b.data[n] & 0xC0) == 0x80) /* whole characters */
            n--;
        buf_append(out, b.data, n);
        buf_puts(out, "…");
    } else {
        buf_append(out, b.data ? b.data : "", b.len);
    }
    buf_free(&b);
}

/* The arguments without bkn_context (the bookkeeping, not what happens). */
static json_value *shown_args(const json_value *args)
{
    json_value *o = args && json_typeof(args) == JSON_OBJECT ? json_clone(args) : json_new_object();
    json_remove(o, "bkn_context");
    return o;
}

static void describe_action(const json_value *args, int zh, buf *m)
{
    const char *kn = json_get_string(args, "kn_id");
    const char *at = json_get_string(args, "at_id");
    const json_value *ids = json_get(args, "_instance_identities");
    const json_value *dyn = json_get(args, "dynamic_params");
    size_t n = ids && json_typeof(ids) == JSON_ARRAY ? json_count(ids) : 0;
    if (zh)
        buf_printf(m, "执行前请确认：execute_action 将在知识网络「%s」上执行行动类「%s」，",
                   kn ? kn : "?", at ? at : "?");
    else
        buf_printf(m,
                   "Confirm before it runs: execute_action will run action type \"%s\" on "
                   "knowledge network \"%s\", ",
                   at ? at : "?", kn ? kn : "?");
    if (n == 0) {
        buf_puts(m,
                 zh ? "目标实例未列出：由行动类自身的条件选出。"
                    : "on the instances the action type's own conditions select (none listed). ");
    } else {
        buf_printf(m, zh ? "作用于 %zu 个实例：" : "on %zu instance(s): ", n);
        size_t shown = n < 5 ? n : 5;
        for (size_t i = 0; i < shown; i++) {
            if (i)
                buf_puts(m, zh ? "；" : "; ");
            put_json(m, json_at(ids, i));
        }
        if (n > shown)
            buf_printf(m, zh ? "；另有 %zu 个" : "; and %zu more", n - shown);
        buf_puts(m, zh ? "。" : ". ");
    }
    buf_puts(m, zh ? "参数：" : "Parameters: ");
    if (dyn)
        put_json(m, dyn);
    else
        buf_puts(m, zh ? "无" : "none");
    buf_puts(m, zh ? "。" : ". ");
}

void confirm_describe(const char *tool, const json_value *args, lang_id lang, buf *message,
                      buf *schema)
{
    int zh = lang == LANG_ZH_CN;
    if (!strcmp(tool, "execute_action") && args && json_typeof(args) == JSON_OBJECT) {
        describe_action(args, zh, message);
    } else {
        json_value *shown = shown_args(args);
        const char *skill = args ? json_get_string(args, "skill_id") : NULL;
        if (skill)
            buf_printf(message,
                       zh ? "执行前请确认：%s 将运行技能「%s」，参数："
                          : "Confirm before it runs: %s will run skill \"%s\" with: ",
                       tool, skill);
        else
            buf_printf(message,
                       zh ? "执行前请确认：将调用 %s，参数："
                          : "Confirm before it runs: %s will be called with: ",
                       tool);
        put_json(message, shown);
        buf_puts(message, zh ? "。" : ". ");
        json_free(shown);
    }
    buf_puts(message, zh ? "接受之前不会执行任何操作。" : "Nothing runs until you accept.");
    buf_puts(schema, "{\"type\":\"object\",\"properties\":{\"" CONFIRM_INPUT_KEY
                     "\":{\"type\":\"boolean\",\"title\":");
    const char *title = zh ? "确认执行" : "Run it";
    const char *desc = zh ? "勾选并接受即执行；拒绝或取消则不执行"
                          : "Tick and accept to run it; decline or cancel and nothing runs";
    json_write_string(schema, title, strlen(title));
    buf_puts(schema, ",\"description\":");
    json_write_string(schema, desc, strlen(desc));
    buf_puts(schema, ",\"default\":true}},\"required\":[\"" CONFIRM_INPUT_KEY "\"]}");
}

/* ---- the state ---- */

static void state_tag(session_ctx *s, const char *nonce, const char *exp_hex, const principal *who,
                      const char *tool, const char *args_hash, const char *interaction,
                      char tag[65])
{
    buf m = BUF_INIT;
    buf_printf(&m, "confirm|%s|%s|%s|%s|%s|%s", nonce, exp_hex, who->key, tool, args_hash,
               interaction);
    session_sign(s, m.data, m.len, tag);
    buf_free(&m);
}

void confirm_state_mint(session_ctx *s, const principal *who, const char *tool,
                        const char *args_hash, const char *interaction, long ttl_s, char *out)
{
    unsigned char rnd[16];
    char nonce[33], exp_hex[9], tag[65];
    random_bytes(rnd, sizeof rnd);
    hex_encode(rnd, sizeof rnd, nonce);
    snprintf(
        exp_hex, sizeof exp_hex, "%08x",
        (unsigned)((uint64_t)(now_wall_ms() / 1000 + (ttl_s > 0 ? ttl_s : 600)) & 0xffffffffu));
    state_tag(s, nonce, exp_hex, who, tool, args_hash, interaction, tag);
    snprintf(out, CONFIRM_STATE_LEN + 1, "cs1.%s.%s.%s", nonce, exp_hex, tag);
}

static int all_hex(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return 0;
    return 1;
}

confirm_status confirm_state_check(session_ctx *s, const principal *who, const char *tool,
                                   const char *args_hash, const char *interaction,
                                   const char *state, char nonce[33], long long *expires_s)
{
    if (!state || strlen(state) != CONFIRM_STATE_LEN || memcmp(state, "cs1.", 4) != 0 ||
        state[36] != '.' || state[45] != '.' || !all_hex(state + 4, 32) ||
        !all_hex(state + 37, 8) || !all_hex(state + 46, 64))
        return CONFIRM_INVALID;
    char exp_hex[9], tag[65];
    memcpy(nonce, state + 4, 32);
    nonce[32] = '\0';
    memcpy(exp_hex, state + 37, 8);
    exp_hex[8] = '\0';
    state_tag(s, nonce, exp_hex, who, tool, args_hash, interaction, tag);
    if (CRYPTO_memcmp(tag, state + 46, 64) != 0)
        return CONFIRM_INVALID;
    long long exp = strtoll(exp_hex, NULL, 16);
    if (expires_s)
        *expires_s = exp;
    return exp > now_wall_ms() / 1000 ? CONFIRM_OK : CONFIRM_EXPIRED;
}
