/* info: self-description of an MCP surface (docs/info.md): GET /mcp/info,
 * /mcp-compact/info and /mcp/ptc/info. One document is built from exactly what
 * tools/list of that surface shows (mcp_list_entries) and is answered as JSON, or,
 * when the client prefers text/html, as a catalogue page for people rendered from the
 * same document. No external assets: inline CSS and script under a per-response CSP
 * nonce; every text from a tool file is HTML-escaped. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "log.h"
#include "proxytrust.h"
#include "server.h"
#include "surfaces.h"

/* Same list as mcp.c negotiates (newest first). */
static const char *const PROTOCOL_VERSIONS[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

/* ---- request facts ---- */

/* The page for people only when the client prefers text/html over JSON: a browser
 * does, an agent or curl (no Accept, * / *, application/json) gets JSON. */
static int wants_html(const char *accept)
{
    if (!accept || !*accept)
        return 0;
    double html = accept_q(accept, "text/html");
    double json = accept_q(accept, "application/json");
    return html > 0 && html > json;
}

static const char *surface_path(const char *surface)
{
    return !strcmp(surface, "compact") ? "/mcp-compact"
           : !strcmp(surface, "ptc")   ? "/mcp/ptc"
                                       : "/mcp";
}

static unsigned surface_bit(const char *surface)
{
    return !strcmp(surface, "compact") ? SURFACE_COMPACT
           : !strcmp(surface, "ptc")   ? SURFACE_PTC
                                       : SURFACE_MCP;
}

/* The endpoint as the caller reaches it (proxy_public_base: trusted_proxies,
 * public_url, the local address), then the prefix and the surface's path. */
static void endpoint_of(req_ctx *c, buf *out)
{
    char base[512];
    proxy_public_base(c->req, c->app->cfg->trusted_proxies, c->app->cfg->public_url, base,
                      sizeof base);
    buf_printf(out, "%s%s%s", base, c->app->prefix, surface_path(c->surface));
}

/* ---- the document ---- */

static json_value *str_v(const char *s)
{
    return json_new_str(s, strlen(s));
}

/* One tools/list entry flattened: name, title, group, group_title, order,
 * description, input_schema, output_schema (display fields omitted when unset). */
static json_value *flat_tool(const json_value *e)
{
    json_value *t = json_new_object();
    const json_value *meta = json_get(e, "_meta");
    const json_value *v;
    if ((v = json_get(e, "name")))
        json_set(t, "name", json_clone(v));
    if ((v = json_get(e, "title")))
        json_set(t, "title", json_clone(v));
    if (meta && (v = json_get(meta, "openbkn.ai/group")))
        json_set(t, "group", json_clone(v));
    if (meta && (v = json_get(meta, "openbkn.ai/group_title")))
        json_set(t, "group_title", json_clone(v));
    if (meta && (v = json_get(meta, "openbkn.ai/order")))
        json_set(t, "order", json_clone(v));
    if ((v = json_get(e, "description")))
        json_set(t, "description", json_clone(v));
    if ((v = json_get(e, "inputSchema")))
        json_set(t, "input_schema", json_clone(v));
    if ((v = json_get(e, "outputSchema")))
        json_set(t, "output_schema", json_clone(v));
    return t;
}

/* Paste-ready client configs. Placeholders only: the caller's token never appears.
 * The Claude Desktop entry passes the token through env so that no argument holds a
 * space (Claude Desktop and Cursor on Windows split such arguments). */
static json_value *client_config(const char *endpoint, const char *surface, const char *lang)
{
    char name[64];
    snprintf(name, sizeof name, "context-loader%s%s", strcmp(surface, "mcp") ? "-" : "",
             strcmp(surface, "mcp") ? surface : "");
    json_value *cfg = json_new_object();

    json_value *headers = json_new_object();
    json_set(headers, "Authorization", str_v("Bearer <access-token>"));
    json_set(headers, "Accept-Language", str_v(lang));
    json_value *server = json_new_object();
    json_set(server, "url", str_v(endpoint));
    json_set(server, "headers", headers);
    json_value *servers = json_new_object();
    json_set(servers, name, server);
    json_value *generic = json_new_object();
    json_set(generic, "mcpServers", servers);
    json_set(cfg, "generic", generic);

    json_value *args = json_new_array();
    json_push(args, str_v("-y"));
    json_push(args, str_v("mcp-remote"));
    json_push(args, str_v(endpoint));
    json_push(args, str_v("--transport"));
    json_push(args, str_v("http-only"));
    json_push(args, str_v("--header"));
    json_push(args, str_v("Authorization:${AUTH_HEADER}"));
    json_push(args, str_v("--header"));
    buf al = BUF_INIT;
    buf_printf(&al, "Accept-Language:%s", lang);
    json_push(args, json_new_str(al.data, al.len));
    buf_free(&al);
    if (!strncmp(endpoint, "http:", 5))
        json_push(args, str_v("--allow-http")); /* mcp-remote refuses plain http elsewhere */
    json_value *env = json_new_object();
    json_set(env, "AUTH_HEADER", str_v("Bearer <access-token>"));
    json_value *desk = json_new_object();
    json_set(desk, "command", str_v("npx"));
    json_set(desk, "args", args);
    json_set(desk, "env", env);
    json_value *dservers = json_new_object();
    json_set(dservers, name, desk);
    json_value *claude = json_new_object();
    json_set(claude, "mcpServers", dservers);
    json_set(cfg, "claude_desktop", claude);
    return cfg;
}

/* Builds the document; NULL with err filled when the listing cannot be read. */
static json_value *build_doc(req_ctx *c, char *err, size_t errlen)
{
    int en = c->lang == LANG_EN_US;
    const char *lang = lang_tag(c->lang);
    buf list = BUF_INIT, ep = BUF_INIT;
    json_value *doc = NULL, *entries = NULL;
    mcp_list_entries(c->app, surface_bit(c->surface), c->lang, !strcmp(c->surface, "ptc"), &list);
    entries = json_parse(list.data, list.len, NULL, err, errlen);
    if (!entries || json_typeof(entries) != JSON_ARRAY)
        goto done;
    endpoint_of(c, &ep);

    doc = json_new_object();
    json_set(doc, "service", str_v("context-loader"));
    json_set(doc, "version", str_v(CL_VERSION));
    json_set(doc, "surface", str_v(c->surface));
    json_set(doc, "endpoint", json_new_str(ep.data, ep.len));
    json_set(doc, "protocol", str_v("MCP Streamable HTTP"));
    json_value *pv = json_new_array();
    for (size_t i = 0; i < sizeof PROTOCOL_VERSIONS / sizeof PROTOCOL_VERSIONS[0]; i++)
        json_push(pv, str_v(PROTOCOL_VERSIONS[i]));
    json_set(doc, "protocol_versions", pv);
    json_set(doc, "transport",
             str_v(en ? "Streamable HTTP: POST one JSON-RPC 2.0 message (initialize, tools/list, "
                        "tools/call); GET opens an SSE stream; DELETE ends the session"
                      : "Streamable HTTP：POST 一条 JSON-RPC 2.0 消息（initialize、tools/list、"
                        "tools/call）；GET 打开 SSE 推送流；DELETE 结束会话"));
    json_value *auth = json_new_object();
    json_set(auth, "type", str_v("bearer"));
    json_set(auth, "header", str_v("Authorization: Bearer <token>"));
    json_value *tokens = json_new_array();
    json_push(tokens, str_v("oauth2_access_token"));
    json_push(tokens, str_v("bak_appkey"));
    json_set(auth, "tokens", tokens);
    json_set(auth, "description",
             str_v(en ? "Send Authorization: Bearer <token> on every request: an OAuth 2.0 access "
                        "token, or an AppKey starting with bak_. No other identity headers."
                      : "每个请求带 Authorization: Bearer <token>：OAuth 2.0 访问令牌，或以 bak_ "
                        "开头的 AppKey。无需其他身份头。"));
    json_set(doc, "auth", auth);
    json_set(doc, "language", str_v(lang));
    json_value *langs = json_new_array();
    for (int l = 0; l < LANG_COUNT; l++)
        json_push(langs, str_v(lang_tag((lang_id)l)));
    json_set(doc, "supported_languages", langs);
    const char *instr = c->app->instructions[c->lang];
    if (instr)
        json_set(doc, "instructions", str_v(instr));
    json_value *tools = json_new_array();
    for (size_t i = 0; i < json_count(entries); i++)
        json_push(tools, flat_tool(json_at(entries, i)));
    json_set(doc, "tool_count", json_new_int((int64_t)json_count(entries)));
    json_set(doc, "tools", tools);
    json_set(doc, "client_config", client_config(ep.data, c->surface, lang));
done:
    json_free(entries);
    buf_free(&list);
    buf_free(&ep);
    return doc;
}

/* ---- the page for people ---- */

static void esc_n(buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&':
            buf_puts(b, "&amp;");
            break;
        case '<':
            buf_puts(b, "&lt;");
            break;
        case '>':
            buf_puts(b, "&gt;");
            break;
        case '"':
            buf_puts(b, "&quot;");
            break;
        case '\'':
            buf_puts(b, "&#39;");
            break;
        default:
            buf_putc(b, s[i]);
        }
    }
}

static void esc(buf *b, const char *s)
{
    if (s)
        esc_n(b, s, strlen(s));
}

/* Indented JSON for display (the wire form has no whitespace). */
static void pretty(buf *b, const json_value *v, int depth)
{
    size_t n = json_count(v);
    json_type t = json_typeof(v);
    if ((t != JSON_OBJECT && t != JSON_ARRAY) || n == 0) {
        json_write(b, v, 0);
        return;
    }
    buf_putc(b, t == JSON_OBJECT ? '{' : '[');
    for (size_t i = 0; i < n; i++) {
        buf_printf(b, "%s\n%*s", i ? "," : "", 2 * (depth + 1), "");
        if (t == JSON_OBJECT) {
            size_t kl;
            const char *k = json_key_at(v, i, &kl);
            json_write_string(b, k, kl);
            buf_puts(b, ": ");
            pretty(b, json_val_at(v, i), depth + 1);
        } else {
            pretty(b, json_at(v, i), depth + 1);
        }
    }
    buf_printf(b, "\n%*s%c", 2 * depth, "", t == JSON_OBJECT ? '}' : ']');
}

typedef struct labels {
    const char *heading, *endpoint, *protocol, *auth, *language, *tools, *connect, *generic,
        *generic_note, *claude, *claude_note, *copy, *copied, *parameters, *param, *type, *required,
        *description, *no_params, *output, *definitions, *other, *default_, *values, *json_hint,
        *yes, *contents;
} labels;

static const labels LABELS[LANG_COUNT] = {
    [LANG_ZH_CN] =
        {
            .heading = "MCP 服务目录",
            .endpoint = "端点",
            .protocol = "协议",
            .auth = "鉴权",
            .language = "语言",
            .tools = "个工具",
            .connect = "接入配置",
            .generic = "通用配置（Cursor、Claude Code 等）",
            .generic_note = "把 <access-token> 换成你的 OAuth 访问令牌或 bak_ 开头的 AppKey。",
            .claude = "Claude Desktop（通过 npx mcp-remote）",
            .claude_note = "在 env 里把 <access-token> 换成你的令牌；需要 Node.js。",
            .copy = "复制",
            .copied = "已复制",
            .parameters = "输入参数",
            .param = "参数",
            .type = "类型",
            .required = "必填",
            .description = "说明",
            .no_params = "无参数",
            .output = "输出结构",
            .definitions = "引用的定义",
            .other = "其他",
            .default_ = "默认",
            .values = "可选值",
            .json_hint =
                "同一地址以 Accept: application/json 请求即得到机器可读的 JSON（供 Agent 自举）。",
            .yes = "是",
            .contents = "目录",
        },
    [LANG_EN_US] =
        {
            .heading = "MCP service catalogue",
            .endpoint = "Endpoint",
            .protocol = "Protocol",
            .auth = "Authentication",
            .language = "Language",
            .tools = "tools",
            .connect = "Connect a client",
            .generic = "Generic entry (Cursor, Claude Code, …)",
            .generic_note = "Replace <access-token> with your OAuth access token or a bak_ AppKey.",
            .claude = "Claude Desktop (through npx mcp-remote)",
            .claude_note = "Replace <access-token> in env with your token; needs Node.js.",
            .copy = "Copy",
            .copied = "Copied",
            .parameters = "Input",
            .param = "Parameter",
            .type = "Type",
            .required = "Required",
            .description = "Description",
            .no_params = "No parameters",
            .output = "Output schema",
            .definitions = "Referenced definitions",
            .other = "Other",
            .default_ = "default",
            .values = "one of",
            .json_hint = "The same address answers Accept: application/json with the "
                         "machine-readable JSON (for "
                         "agents to bootstrap).",
            .yes = "yes",
            .contents = "Contents",
        },
};

/* A short type label: string, integer, array<string>, object, a | b, → def. */
static void type_label(buf *b, const json_value *s)
{
    const json_value *t = json_get(s, "type");
    const char *ref = json_get_string(s, "$ref");
    if (ref) {
        const char *slash = strrchr(ref, '/');
        buf_puts(b, "→ ");
        esc(b, slash ? slash + 1 : ref);
        return;
    }
    if (t && json_typeof(t) == JSON_STRING) {
        const char *ts = json_get_str(t, NULL);
        esc(b, ts);
        const json_value *items = json_get(s, "items");
        if (!strcmp(ts, "array") && items && json_typeof(items) == JSON_OBJECT) {
            buf_puts(b, "&lt;");
            type_label(b, items);
            buf_puts(b, "&gt;");
        }
        return;
    }
    if (t && json_typeof(t) == JSON_ARRAY) {
        for (size_t i = 0; i < json_count(t); i++) {
            if (i)
                buf_puts(b, " | ");
            esc(b, json_get_str(json_at(t, i), NULL));
        }
        return;
    }
    static const char *const alts[] = {"oneOf", "anyOf"};
    for (size_t a = 0; a < 2; a++) {
        const json_value *l = json_get(s, alts[a]);
        if (l && json_typeof(l) == JSON_ARRAY) {
            for (size_t i = 0; i < json_count(l); i++) {
                if (i)
                    buf_puts(b, " | ");
                type_label(b, json_at(l, i));
            }
            return;
        }
    }
    buf_puts(b, json_get(s, "enum") ? "enum" : "any");
}

static int is_required(const json_value *schema, const char *name)
{
    const json_value *r = json_get(schema, "required");
    for (size_t i = 0; r && i < json_count(r); i++) {
        const char *s = json_get_str(json_at(r, i), NULL);
        if (s && !strcmp(s, name))
            return 1;
    }
    return 0;
}

/* A value shown inline (enum members, defaults): compact JSON, escaped. */
static void inline_json(buf *b, const json_value *v)
{
    buf t = BUF_INIT;
    json_write(&t, v, 0);
    buf_puts(b, "<code>");
    esc_n(b, t.data, t.len);
    buf_puts(b, "</code>");
    buf_free(&t);
}

/* Rows of a property table: required properties first, nested objects (and
 * arrays of objects) as indented rows named parent.child / parent[].child. */
static void prop_rows(buf *b, const labels *L, const json_value *schema, const char *prefix,
                      int depth)
{
    const json_value *props = json_get(schema, "properties");
    if (!props || json_typeof(props) != JSON_OBJECT)
        return;
    /* Required, then optional; the turn context, the same on every business tool,
     * comes last so that each table opens with what is particular to the tool. */
    for (int pass = 0; pass < 3; pass++) {
        for (size_t i = 0; i < json_count(props); i++) {
            size_t kl;
            const char *k = json_key_at(props, i, &kl);
            const json_value *p = json_val_at(props, i);
            int req = is_required(schema, k);
            int last = depth == 0 && !strcmp(k, "bkn_context");
            if (json_typeof(p) != JSON_OBJECT || (pass == 2) != last ||
                (!last && req != (pass == 0)))
                continue;
            buf_printf(b, "<tr class=\"d%d\"><td><code>", depth > 3 ? 3 : depth);
            esc(b, prefix);
            esc_n(b, k, kl);
            buf_puts(b, "</code></td><td class=\"ty\">");
            type_label(b, p);
            buf_printf(b, "</td><td class=\"rq\">%s</td><td>", req ? L->yes : "");
            const char *d = json_get_string(p, "description");
            if (d)
                esc(b, d);
            const json_value *en = json_get(p, "enum");
            if (en && json_typeof(en) == JSON_ARRAY) {
                buf_printf(b, "<div class=\"meta\">%s: ", L->values);
                for (size_t j = 0; j < json_count(en); j++) {
                    if (j)
                        buf_puts(b, " ");
                    inline_json(b, json_at(en, j));
                }
                buf_puts(b, "</div>");
            }
            const json_value *dv = json_get(p, "default");
            if (dv) {
                buf_printf(b, "<div class=\"meta\">%s: ", L->default_);
                inline_json(b, dv);
                buf_puts(b, "</div>");
            }
            buf_puts(b, "</td></tr>\n");
            if (depth >= 3)
                continue; /* deeper levels stay in the JSON */
            buf sub = BUF_INIT;
            const json_value *items = json_get(p, "items");
            if (json_get(p, "properties")) {
                buf_printf(&sub, "%s%.*s.", prefix, (int)kl, k);
                prop_rows(b, L, p, sub.data, depth + 1);
            } else if (items && json_typeof(items) == JSON_OBJECT &&
                       json_get(items, "properties")) {
                buf_printf(&sub, "%s%.*s[].", prefix, (int)kl, k);
                prop_rows(b, L, items, sub.data, depth + 1);
            }
            buf_free(&sub);
        }
    }
}

static void schema_table(buf *b, const labels *L, const json_value *schema)
{
    const json_value *props = json_get(schema, "properties");
    if (!props || json_count(props) == 0) {
        buf_printf(b, "<p class=\"none\">%s</p>\n", L->no_params);
        return;
    }
    buf_printf(b,
               "<div class=\"tw\"><table><thead><tr><th>%s</th><th>%s</th><th>%s</th>"
               "<th>%s</th></tr></thead><tbody>\n",
               L->param, L->type, L->required, L->description);
    prop_rows(b, L, schema, "", 0);
    buf_puts(b, "</tbody></table></div>\n");
    const json_value *defs = json_get(schema, "$defs");
    if (defs && json_typeof(defs) == JSON_OBJECT && json_count(defs)) {
        buf_printf(b, "<details class=\"defs\"><summary>%s</summary>\n", L->definitions);
        for (size_t i = 0; i < json_count(defs); i++) {
            size_t kl;
            const char *k = json_key_at(defs, i, &kl);
            const json_value *d = json_val_at(defs, i);
            buf_puts(b, "<h5><code>");
            esc_n(b, k, kl);
            buf_puts(b, "</code> <span class=\"ty\">");
            type_label(b, d);
            buf_puts(b, "</span></h5>");
            const char *dd = json_get_string(d, "description");
            if (dd) {
                buf_puts(b, "<p>");
                esc(b, dd);
                buf_puts(b, "</p>");
            }
            if (json_get(d, "properties")) {
                buf_printf(b,
                           "<div class=\"tw\"><table><thead><tr><th>%s</th><th>%s</th>"
                           "<th>%s</th><th>%s</th></tr></thead><tbody>\n",
                           L->param, L->type, L->required, L->description);
                prop_rows(b, L, d, "", 1);
                buf_puts(b, "</tbody></table></div>\n");
            }
        }
        buf_puts(b, "</details>\n");
    }
}

static void copy_block(buf *b, const labels *L, const char *id, const char *title, const char *note,
                       const json_value *v, const char *text)
{
    buf body = BUF_INIT;
    if (v)
        pretty(&body, v, 0);
    else
        buf_puts(&body, text);
    buf_puts(b, "<div class=\"cfg\"><div class=\"cfgh\"><span>");
    esc(b, title);
    buf_printf(b,
               "</span><button type=\"button\" data-copy=\"%s\" data-label=\"%s\" "
               "data-done=\"%s\">%s</button></div>",
               id, L->copy, L->copied, L->copy);
    buf_printf(b, "<pre id=\"%s\">", id);
    esc_n(b, body.data ? body.data : "", body.len);
    buf_puts(b, "</pre>");
    if (note) {
        buf_puts(b, "<p class=\"note\">");
        esc(b, note);
        buf_puts(b, "</p>");
    }
    buf_puts(b, "</div>\n");
    buf_free(&body);
}

static const char PAGE_CSS[] =
    ":root{--bg:#f6f7f9;--fg:#1d2330;--mut:#5d6575;--card:#fff;--line:#e2e5ea;--acc:#2f5bd3;"
    "--accbg:#eef2fd;--code:#f1f3f6}"
    "@media (prefers-color-scheme:dark){:root{--bg:#14171c;--fg:#e4e7ec;--mut:#9aa3b2;"
    "--card:#1c2028;--line:#2c323d;--acc:#8aa8ff;--accbg:#1f2940;--code:#232833}}"
    "*{box-sizing:border-box}"
    "body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.55 system-ui,-apple-system,"
    "'Segoe UI',Roboto,'Noto Sans','PingFang SC','Microsoft YaHei',sans-serif}"
    "main{max-width:1080px;margin:0 auto;padding:28px 20px 60px}"
    "header h1{margin:0 0 4px;font-size:26px}"
    "header .sub{color:var(--mut);margin:0 0 18px}"
    ".badge{display:inline-block;background:var(--accbg);color:var(--acc);border-radius:999px;"
    "padding:1px 10px;font-size:13px;font-weight:600;vertical-align:middle;margin-left:6px}"
    "dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:6px 16px;margin:0;"
    "background:var(--card);border:1px solid var(--line);border-radius:10px;padding:14px 18px}"
    "dl.facts dt{color:var(--mut)}dl.facts dd{margin:0;overflow-wrap:anywhere}"
    "code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}"
    "code{background:var(--code);border-radius:4px;padding:1px 5px}"
    "h2{font-size:20px;margin:34px 0 12px;padding-bottom:6px;border-bottom:1px solid var(--line)}"
    "h2 .gid{color:var(--mut);font-weight:400;font-size:14px;margin-left:8px}"
    ".cfgs{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:14px}"
    ".cfg{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 14px;"
    "min-width:0}"
    ".cfgh{display:flex;justify-content:space-between;align-items:center;gap:8px;font-weight:600;"
    "margin-bottom:8px}"
    /* wrapped, not scrolled: a long endpoint URL stays visible in the config boxes */
    "pre{background:var(--code);border-radius:8px;padding:10px 12px;margin:0;overflow:auto;"
    "white-space:pre-wrap;overflow-wrap:anywhere}"
    "button{font:inherit;font-size:13px;border:1px solid var(--acc);color:var(--acc);"
    "background:transparent;border-radius:6px;padding:3px 12px;cursor:pointer}"
    "button:hover{background:var(--accbg)}"
    ".note{color:var(--mut);font-size:13px;margin:8px 0 0}"
    "nav.toc{background:var(--card);border:1px solid var(--line);border-radius:10px;"
    "padding:12px 18px;margin-top:14px}"
    "nav.toc ul{margin:4px 0;padding-left:18px}nav.toc li{margin:2px 0}"
    "nav.toc .g{font-weight:600;margin-top:6px}"
    "nav.toc .cols{columns:3 240px;column-gap:24px}nav.toc .grp{break-inside:avoid}"
    "a{color:var(--acc);text-decoration:none}a:hover{text-decoration:underline}"
    "article.tool{background:var(--card);border:1px solid var(--line);border-radius:10px;"
    "padding:14px 18px;margin:12px 0}"
    "article.tool h3{margin:0;font-size:17px}"
    "article.tool .name{margin-left:8px;font-weight:400}"
    "article.tool .desc{white-space:pre-line;margin:8px 0 10px}"
    "article.tool h4{font-size:13px;text-transform:uppercase;letter-spacing:.04em;color:var(--mut);"
    "margin:12px 0 6px}"
    ".tw{overflow-x:auto}"
    "table{border-collapse:collapse;width:100%;font-size:14px}"
    "th,td{text-align:left;vertical-align:top;padding:6px 8px;border-bottom:1px solid var(--line)}"
    "th{color:var(--mut);font-weight:600;font-size:13px}"
    "td.ty{color:var(--acc);white-space:nowrap;font-family:ui-monospace,Menlo,Consolas,monospace;"
    "font-size:13px}"
    "td.rq{color:#c2410c;white-space:nowrap}"
    "tr.d1 td:first-child{padding-left:22px}tr.d2 td:first-child{padding-left:38px}"
    "tr.d3 td:first-child{padding-left:54px}"
    ".meta{color:var(--mut);font-size:13px;margin-top:2px}"
    ".none{color:var(--mut);margin:4px 0}"
    "details{margin-top:8px}summary{cursor:pointer;color:var(--mut);font-size:14px}"
    "details h5{margin:10px 0 4px;font-size:14px}"
    "footer{color:var(--mut);font-size:13px;margin-top:36px}"
    "@media (max-width:640px){main{padding:18px 12px 40px}dl.facts{grid-template-columns:1fr}"
    "dl.facts dt{margin-top:6px}td.ty{white-space:normal}}";

/* Copy with the Clipboard API where the page is a secure context, else the
 * execCommand fallback (plain http on a LAN address). */
static const char PAGE_JS[] =
    "document.addEventListener('click',function(e){"
    "var b=e.target.closest('button[data-copy]');if(!b)return;"
    "var t=document.getElementById(b.getAttribute('data-copy')).textContent;"
    "function done(){b.textContent=b.getAttribute('data-done');"
    "setTimeout(function(){b.textContent=b.getAttribute('data-label');},1500);}"
    "function fallback(){var a=document.createElement('textarea');a.value=t;"
    "a.setAttribute('readonly','');a.style.position='fixed';a.style.top='-1000px';"
    "document.body.appendChild(a);a.select();"
    "try{if(document.execCommand('copy'))done();}catch(x){}document.body.removeChild(a);}"
    "if(navigator.clipboard&&window.isSecureContext){navigator.clipboard.writeText(t)"
    ".then(done,fallback);}else{fallback();}});";

static const char *group_label(const json_value *t, const labels *L)
{
    const char *g = json_get_string(t, "group_title");
    if (!g)
        g = json_get_string(t, "group");
    return g ? g : L->other;
}

static const char *group_id(const json_value *t)
{
    const char *g = json_get_string(t, "group");
    return g ? g : "other";
}

static void render_html(const json_value *doc, lang_id lang, const char *nonce, buf *b)
{
    const labels *L = &LABELS[lang < LANG_COUNT ? lang : 0];
    const json_value *tools = json_get(doc, "tools");
    const json_value *cfg = json_get(doc, "client_config");
    const json_value *auth = json_get(doc, "auth");
    size_t n = json_count(tools);
    /* Groups in the order of their first tool: the listing is sorted by order. */
    const char *groups[64];
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        const char *g = group_id(json_at(tools, i));
        size_t j = 0;
        while (j < ng && strcmp(groups[j], g))
            j++;
        if (j == ng && ng < sizeof groups / sizeof groups[0])
            groups[ng++] = g;
    }

    buf_printf(b, "<!DOCTYPE html>\n<html lang=\"%s\"><head><meta charset=\"utf-8\">\n",
               lang_tag(lang));
    buf_puts(b, "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
                "<meta name=\"robots\" content=\"noindex\">\n<title>Context Loader · ");
    esc(b, surface_path(json_get_string(doc, "surface")));
    buf_printf(b, " · %s</title>\n<style nonce=\"%s\">%s</style></head>\n<body><main>\n",
               L->heading, nonce, PAGE_CSS);

    buf_puts(b, "<header><h1>Context Loader<span class=\"badge\">");
    esc(b, surface_path(json_get_string(doc, "surface")));
    buf_printf(b, "</span></h1><p class=\"sub\">%s · %zu %s</p>\n", L->heading, n, L->tools);
    buf_printf(b, "<dl class=\"facts\"><dt>%s</dt><dd><code id=\"endpoint\">", L->endpoint);
    esc(b, json_get_string(doc, "endpoint"));
    buf_printf(b,
               "</code> <button type=\"button\" data-copy=\"endpoint\" data-label=\"%s\" "
               "data-done=\"%s\">%s</button></dd>",
               L->copy, L->copied, L->copy);
    buf_printf(b, "<dt>%s</dt><dd>", L->protocol);
    esc(b, json_get_string(doc, "protocol"));
    const json_value *pv = json_get(doc, "protocol_versions");
    for (size_t i = 0; i < json_count(pv); i++) {
        buf_puts(b, i ? ", " : " (");
        esc(b, json_get_str(json_at(pv, i), NULL));
    }
    buf_puts(b, json_count(pv) ? ")</dd>" : "</dd>");
    buf_printf(b, "<dt>%s</dt><dd>", L->auth);
    esc(b, auth ? json_get_string(auth, "description") : NULL);
    buf_printf(b, "</dd><dt>%s</dt><dd>", L->language);
    esc(b, json_get_string(doc, "language"));
    buf_puts(b, " (");
    const json_value *sl = json_get(doc, "supported_languages");
    for (size_t i = 0; i < json_count(sl); i++) {
        if (i)
            buf_puts(b, ", ");
        esc(b, json_get_str(json_at(sl, i), NULL));
    }
    buf_puts(b, ")</dd></dl></header>\n");

    buf_printf(b, "<section><h2>%s</h2><div class=\"cfgs\">\n", L->connect);
    if (cfg) {
        copy_block(b, L, "cfg-generic", L->generic, L->generic_note, json_get(cfg, "generic"),
                   NULL);
        copy_block(b, L, "cfg-claude", L->claude, L->claude_note, json_get(cfg, "claude_desktop"),
                   NULL);
    }
    buf_puts(b, "</div></section>\n");

    buf_printf(b, "<nav class=\"toc\"><div class=\"g\">%s</div><div class=\"cols\">\n",
               L->contents);
    for (size_t g = 0; g < ng; g++) {
        int first = 1;
        for (size_t i = 0; i < n; i++) {
            const json_value *t = json_at(tools, i);
            if (strcmp(group_id(t), groups[g]))
                continue;
            if (first) {
                buf_puts(b, "<div class=\"grp\"><div class=\"g\">");
                esc(b, group_label(t, L));
                buf_puts(b, "</div><ul>");
                first = 0;
            }
            const char *name = json_get_string(t, "name");
            const char *title = json_get_string(t, "title");
            buf_puts(b, "<li><a href=\"#tool-");
            esc(b, name);
            buf_puts(b, "\">");
            esc(b, title ? title : name);
            buf_puts(b, "</a></li>");
        }
        if (!first)
            buf_puts(b, "</ul></div>\n");
    }
    buf_puts(b, "</div></nav>\n");

    for (size_t g = 0; g < ng; g++) {
        int first = 1;
        for (size_t i = 0; i < n; i++) {
            const json_value *t = json_at(tools, i);
            if (strcmp(group_id(t), groups[g]))
                continue;
            if (first) {
                buf_puts(b, "<section class=\"group\" id=\"group-");
                esc(b, groups[g]);
                buf_puts(b, "\"><h2>");
                esc(b, group_label(t, L));
                buf_puts(b, "<span class=\"gid\">");
                esc(b, groups[g]);
                buf_puts(b, "</span></h2>\n");
                first = 0;
            }
            const char *name = json_get_string(t, "name");
            const char *title = json_get_string(t, "title");
            buf_puts(b, "<article class=\"tool\" id=\"tool-");
            esc(b, name);
            buf_puts(b, "\"><h3>");
            esc(b, title ? title : name);
            buf_puts(b, "<code class=\"name\">");
            esc(b, name);
            buf_puts(b, "</code></h3>\n<div class=\"desc\">");
            esc(b, json_get_string(t, "description"));
            buf_printf(b, "</div>\n<h4>%s</h4>\n", L->parameters);
            const json_value *in = json_get(t, "input_schema");
            if (in)
                schema_table(b, L, in);
            else
                buf_printf(b, "<p class=\"none\">%s</p>\n", L->no_params);
            const json_value *out = json_get(t, "output_schema");
            if (out) {
                buf_printf(b, "<details><summary>%s</summary>\n", L->output);
                schema_table(b, L, out);
                buf_puts(b, "</details>\n");
            }
            buf_puts(b, "</article>\n");
        }
        if (!first)
            buf_puts(b, "</section>\n");
    }
    buf_printf(b, "<footer>%s · context-loader ", L->json_hint);
    esc(b, json_get_string(doc, "version"));
    buf_printf(b, "</footer>\n</main>\n<script nonce=\"%s\">%s</script>\n</body></html>\n", nonce,
               PAGE_JS);
}

/* ---- entry ---- */

/* ---- RFC 9728 protected resource metadata ---- */

void info_well_known(req_ctx *c, const char *path)
{
    static const char ROOT[] = "/.well-known/oauth-protected-resource";
    const char *servers = c->app->cfg->oauth_authorization_servers;
    const char *rest = !strncmp(path, ROOT, sizeof ROOT - 1) ? path + sizeof ROOT - 1 : NULL;
    const char *surface = NULL;
    size_t plen = strlen(c->app->prefix);
    if (rest && !*rest)
        surface = "mcp"; /* the service as a whole: its MCP endpoint */
    else if (rest && !strncmp(rest, c->app->prefix, plen)) {
        static const char *const SURFACES[] = {"mcp", "compact", "ptc"};
        for (size_t i = 0; i < sizeof SURFACES / sizeof SURFACES[0]; i++)
            if (!strcmp(rest + plen, surface_path(SURFACES[i])))
                surface = SURFACES[i];
    }
    if (!surface || !*servers) {
        req_not_found(c);
        return;
    }
    if (strcmp(c->method, "GET") && strcmp(c->method, "HEAD")) {
        req_add_header(c, "Allow", "GET");
        req_reply_error(c, 405, NULL, "use GET on the resource metadata");
        return;
    }
    snprintf(c->surface, sizeof c->surface, "%s", surface);
    buf ep = BUF_INIT, b = BUF_INIT;
    endpoint_of(c, &ep);
    json_value *doc = json_new_object();
    json_set(doc, "resource", json_new_str(ep.data, ep.len));
    json_value *list = json_new_array();
    for (const char *p = servers; *p;) {
        p += strspn(p, " ,");
        size_t n = strcspn(p, " ,");
        if (n)
            json_push(list, json_new_str(p, n));
        p += n;
    }
    json_set(doc, "authorization_servers", list);
    json_value *methods = json_new_array();
    json_push(methods, str_v("header"));
    json_set(doc, "bearer_methods_supported", methods);
    json_set(doc, "resource_name", str_v("Context Loader"));
    json_write(&b, doc, 0);
    json_free(doc);
    /* public, static metadata: any page may read it */
    req_add_header(c, "Access-Control-Allow-Origin", "*");
    req_add_header(c, "Cache-Control", "max-age=300");
    req_reply(c, 200, "application/json; charset=utf-8", b.data, b.len);
    buf_free(&ep);
    buf_free(&b);
}

/* A fresh nonce for a page's inline style and script, and the headers every page
 * carries: a CSP that admits only them (connect: also fetch to the same origin), no
 * sniffing, no referrer. */
static void page_security(req_ctx *c, char nonce[33], int connect)
{
    unsigned char rnd[16];
    buf csp = BUF_INIT;
    random_bytes(rnd, sizeof rnd);
    hex_encode(rnd, sizeof rnd, nonce);
    buf_printf(&csp,
               "default-src 'none'; style-src 'nonce-%s'; script-src 'nonce-%s'; %s"
               "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
               nonce, nonce, connect ? "connect-src 'self'; " : "");
    req_add_header(c, "Content-Security-Policy", csp.data);
    req_add_header(c, "X-Content-Type-Options", "nosniff");
    req_add_header(c, "Referrer-Policy", "no-referrer");
    buf_free(&csp);
}

/* ---- the public page shell ---- */

int info_shell_wanted(req_ctx *c)
{
    return !strcmp(c->method, "GET") && !req_header(c, "Authorization") &&
           wants_html(req_header(c, "Accept"));
}

/* The shell a browser gets without a token: a form for one, then the script fetches
 * this same URL with it (Authorization header, never the URL) and shows the catalogue
 * in place. Styles and scripts of the fetched page get the shell's nonce, so the
 * shell's CSP (which also allows fetch to 'self') covers them. The token is kept in
 * memory only. */
void info_shell(req_ctx *c)
{
    int en = c->lang == LANG_EN_US;
    char nonce[33];
    page_security(c, nonce, 1);
    buf b = BUF_INIT;
    buf_printf(
        &b,
        "<!doctype html>\n<html lang=\"%s\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<title>Context Loader</title><style nonce=\"%s\">"
        "body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1c2430}"
        "main{max-width:36rem;margin:12vh auto;padding:2rem;background:#fff;border-radius:12px;"
        "box-shadow:0 2px 12px rgba(0,0,0,.08)}h1{font-size:1.4rem;margin:0 0 .5rem}"
        "label{display:block;margin:1rem 0 .3rem;font-weight:600}"
        "input{width:100%%;box-sizing:border-box;padding:.6rem;font:inherit;border:1px solid "
        "#c8ced8;"
        "border-radius:8px}button{margin-top:1rem;padding:.6rem 1.2rem;font:inherit;border:0;"
        "border-radius:8px;background:#2855d8;color:#fff;cursor:pointer}"
        "#err{color:#b3261e;min-height:1.5em}</style></head>\n<body><main>"
        "<h1>Context Loader</h1><p>%s</p>"
        "<form id=\"f\"><label for=\"t\">%s</label>"
        "<input id=\"t\" type=\"password\" autocomplete=\"off\" spellcheck=\"false\" required>"
        "<button type=\"submit\">%s</button><p id=\"err\" role=\"alert\"></p></form></main>\n"
        "<script nonce=\"%s\">(function(){"
        "var nonce=document.currentScript.nonce;"
        "var msg={401:%s,403:%s};"
        "document.getElementById('f').addEventListener('submit',function(e){"
        "e.preventDefault();var err=document.getElementById('err');err.textContent='';"
        "var tok=document.getElementById('t').value.trim();"
        "fetch(location.pathname,{headers:{'Authorization':'Bearer '+tok,'Accept':'text/html'},"
        "cache:'no-store',credentials:'omit'}).then(function(r){"
        "if(!r.ok){err.textContent=msg[r.status]||('HTTP '+r.status);return null;}"
        "return r.text();}).then(function(html){if(!html)return;"
        "var d=new DOMParser().parseFromString(html,'text/html');"
        "d.querySelectorAll('style').forEach(function(s){s.setAttribute('nonce',nonce);});"
        "var scripts=[];d.querySelectorAll('script').forEach(function(s){"
        "scripts.push(s.textContent);s.remove();});"
        "document.replaceChild(document.adoptNode(d.documentElement),document.documentElement);"
        "scripts.forEach(function(t){var s=document.createElement('script');s.nonce=nonce;"
        "s.textContent=t;document.body.appendChild(s);});"
        "}).catch(function(x){err.textContent=String(x);});});})();</script>\n</body></html>\n",
        lang_tag(c->lang), nonce,
        en ? "This catalogue lists the tools of this MCP endpoint. Paste an access token to open "
             "it: it is sent in the Authorization header and kept in this page only."
           : "此目录列出本 MCP 端点的工具。请粘贴访问令牌后打开：令牌仅通过 Authorization "
             "请求头发送，只保存在本页面中。",
        en ? "Access token" : "访问令牌", en ? "Open the catalogue" : "打开目录", nonce,
        en ? "'The token was not accepted.'" : "'令牌未通过认证。'",
        en ? "'This token may not read the catalogue.'" : "'该令牌无权读取目录。'");
    req_add_header(c, "Cache-Control", "no-store");
    req_add_header(c, "Vary", "Accept, Accept-Language, Authorization");
    req_add_header(c, "Content-Language", lang_tag(c->lang));
    c->outcome = "shell";
    req_reply(c, 200, "text/html; charset=utf-8", b.data, b.len);
    buf_free(&b);
}

void info_handle(req_ctx *c)
{
    char err[256] = "";
    buf out = BUF_INIT;
    json_value *doc = build_doc(c, err, sizeof err);
    req_add_header(c, "Vary", "Accept, Accept-Language");
    req_add_header(c, "Content-Language", lang_tag(c->lang));
    if (!doc) {
        log_line *l = log_begin(LOG_ERROR, "info");
        char what[300];
        snprintf(what, sizeof what, "listing: %s", err);
        log_str(l, "error", what);
        log_end(l);
        req_reply_error(c, 500, "Public.InternalServerError.InfoBuildFailed",
                        "cannot build the self-description");
        goto done;
    }
    c->outcome = "ok";
    if (wants_html(req_header(c, "Accept"))) {
        char nonce[33];
        page_security(c, nonce, 0);
        render_html(doc, c->lang, nonce, &out);
        req_reply(c, 200, "text/html; charset=utf-8", out.data, out.len);
    } else {
        json_write(&out, doc, 0);
        req_reply(c, 200, "application/json; charset=utf-8", out.data, out.len);
    }
done:
    json_free(doc);
    buf_free(&out);
}
