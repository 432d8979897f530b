/* info: self-description of an MCP surface (docs/info.md): GET /mcp/info,
 * /mcp-compact/info and /mcp/ptc/info. One document is built from exactly what
 * tools/list of that surface shows (mcp_list_entries) and is answered as JSON, or,
 * when the client prefers text/html, as a catalogue page for people that lua/page.lua
 * renders from the same document (and, without a token, its public shell) in the
 * current generation's Lua state, under the tools' budgets. This file routes, gathers
 * the data and writes the answer with the page's security headers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "accept.h"
#include "errenv.h"
#include "json_lua.h"
#include "log.h"
#include "lvm.h"
#include "mcp_era.h"
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

/* The endpoint as the caller reaches it (req_public_base: trusted_proxies,
 * public_url, the local address), then the prefix and the surface's path. */
static void endpoint_of(req_ctx *c, buf *out)
{
    char base[512];
    req_public_base(c, base, sizeof base);
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

    /* The stateless era (2026-07-28): a v2 SDK client pinned to it. */
    json_value *sh = json_new_object();
    json_set(sh, "Authorization", str_v("Bearer <access-token>"));
    json_set(sh, "Accept-Language", str_v(lang));
    json_value *init = json_new_object();
    json_set(init, "headers", sh);
    json_value *mode = json_new_object();
    json_set(mode, "pin", str_v(MCP_MODERN_VERSION));
    json_value *neg = json_new_object();
    json_set(neg, "mode", mode);
    json_value *sdk = json_new_object();
    json_set(sdk, "url", str_v(endpoint));
    json_set(sdk, "requestInit", init);
    json_set(sdk, "versionNegotiation", neg);
    json_set(cfg, "stateless_sdk", sdk);
    return cfg;
}

/* The protocol eras the endpoint serves, each with its versions, how a client
 * starts, and which client_config entries speak it. */
static json_value *eras_of(void)
{
    json_value *eras = json_new_array();
    json_value *s = json_new_object();
    json_set(s, "era", str_v("session"));
    json_value *v = json_new_array();
    for (size_t i = 0; i < sizeof PROTOCOL_VERSIONS / sizeof PROTOCOL_VERSIONS[0]; i++)
        json_push(v, str_v(PROTOCOL_VERSIONS[i]));
    json_set(s, "protocol_versions", v);
    json_set(s, "start", str_v("initialize, then Mcp-Session-Id on every request"));
    json_value *c = json_new_array();
    json_push(c, str_v("generic"));
    json_push(c, str_v("claude_desktop"));
    json_set(s, "client_config", c);
    json_push(eras, s);
    json_value *m = json_new_object();
    json_set(m, "era", str_v("stateless"));
    v = json_new_array();
    json_push(v, str_v(MCP_MODERN_VERSION));
    json_set(m, "protocol_versions", v);
    json_set(m, "start", str_v("no handshake: params._meta on every request; server/discover "
                               "describes the server"));
    c = json_new_array();
    json_push(c, str_v("stateless_sdk"));
    json_push(c, str_v("generic"));
    json_set(m, "client_config", c);
    json_push(eras, m);
    return eras;
}

/* Which tools a person confirms in this deployment (confirm.tools): the tool names
 * its rules name, in order and once each, the rules as written, and what a client
 * needs for it. */
static json_value *confirmation_of(const req_ctx *c)
{
    const char *spec = c->app->cfg->confirm_tools;
    json_value *o = json_new_object(), *tools = json_new_array(), *rules = json_new_array();
    for (const char *p = spec ? spec : ""; *p;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const char *e = end;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (e > p) {
            json_push(rules, json_new_str(p, (size_t)(e - p)));
            const char *at = memchr(p, '@', (size_t)(e - p));
            size_t n = (size_t)((at ? at : e) - p);
            int seen = 0;
            for (size_t i = 0; i < json_count(tools) && !seen; i++) {
                size_t l = 0;
                const char *t = json_get_str(json_at(tools, i), &l);
                seen = l == n && !memcmp(t, p, n);
            }
            if (!seen)
                json_push(tools, json_new_str(p, n));
        }
        p = comma ? comma + 1 : end;
    }
    int any = json_count(tools) > 0;
    json_set(o, "tools", tools);
    json_set(o, "rules", rules);
    if (any)
        json_set(o, "description", str_v(text_get(TEXT_INFO_CONFIRM, c->lang)));
    return o;
}

/* Builds the document; NULL with err filled when the listing cannot be read. */
static json_value *build_doc(req_ctx *c, char *err, size_t errlen)
{
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
    json_set(doc, "eras", eras_of());
    json_set(doc, "transport", str_v(text_get(TEXT_INFO_TRANSPORT, c->lang)));
    json_value *auth = json_new_object();
    json_set(auth, "type", str_v("bearer"));
    json_set(auth, "header", str_v("Authorization: Bearer <token>"));
    json_value *tokens = json_new_array();
    json_push(tokens, str_v("oauth2_access_token"));
    json_push(tokens, str_v("bak_appkey"));
    json_set(auth, "tokens", tokens);
    json_set(auth, "description", str_v(text_get(TEXT_INFO_AUTH, c->lang)));
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
    json_set(doc, "confirmation", confirmation_of(c));
    json_set(doc, "tool_count", json_new_int((int64_t)json_count(entries)));
    json_set(doc, "tools", tools);
    if (strcmp(c->surface, "ptc")) {
        /* the REST and gateway tools: no tools/list shows them; execute_tool runs them */
        buf gw = BUF_INIT;
        mcp_gateway_entries(c->app, surface_bit(c->surface), c->lang, &gw);
        json_value *gentries = json_parse(gw.data, gw.len, NULL, err, errlen);
        buf_free(&gw);
        if (!gentries || json_typeof(gentries) != JSON_ARRAY) {
            json_free(gentries);
            json_free(doc);
            doc = NULL;
            goto done;
        }
        json_value *gtools = json_new_array();
        for (size_t i = 0; i < json_count(gentries); i++) {
            json_value *t = flat_tool(json_at(gentries, i));
            const char *name = json_get_string(json_at(gentries, i), "name");
            buf rp = BUF_INIT;
            buf_printf(&rp, "%s/kn/%s", c->app->prefix, name ? name : "");
            json_set(t, "rest", json_new_str(rp.data, rp.len));
            buf_free(&rp);
            json_set(t, "call_via", str_v("execute_tool"));
            json_push(gtools, t);
        }
        json_free(gentries);
        json_set(doc, "gateway_tools", gtools);
    }
    json_set(doc, "client_config", client_config(ep.data, c->surface, lang));
done:
    json_free(entries);
    buf_free(&list);
    buf_free(&ep);
    return doc;
}

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

/* A fresh nonce for a page's inline style and script. */
static void page_nonce(char nonce[33])
{
    unsigned char rnd[16];
    random_bytes(rnd, sizeof rnd);
    hex_encode(rnd, sizeof rnd, nonce);
}

/* The headers every page carries: a CSP that admits only its nonce's style and script
 * (connect: also fetch to the same origin), no sniffing, no referrer. */
static void page_security(req_ctx *c, const char *nonce, int connect)
{
    buf csp = BUF_INIT;
    buf_printf(&csp,
               "default-src 'none'; style-src 'nonce-%s'; script-src 'nonce-%s'; %s"
               "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
               nonce, nonce, connect ? "connect-src 'self'; " : "");
    req_add_header(c, "Content-Security-Policy", csp.data);
    req_add_header(c, "X-Content-Type-Options", "nosniff");
    req_add_header(c, "Referrer-Policy", "no-referrer");
    buf_free(&csp);
}

/* ---- the page, rendered by lua/page.lua ---- */

/* Lua run time of a rendering before its instructions are counted (as for a tool
 * call: most renderings finish inside it and never pay for the count hook). */
#define PAGE_UNCOUNTED_US 2000

typedef struct page_args {
    const json_value *doc; /* the document (catalogue), or NULL (shell) */
    const char *path;      /* the surface's path */
    const char *lang;
    const char *nonce;
    buf *out; /* receives the page */
} page_args;

/* page.catalogue(doc, path, nonce) or page.shell(lang, nonce), its string into out. */
static int page_call_p(lua_State *L)
{
    page_args *a = lua_touserdata(L, 1);
    const char *fn = a->doc ? "catalogue" : "shell";
    size_t len;
    lvm_require(L, "page");
    lua_getfield(L, -1, fn);
    if (a->doc) {
        cljson_push(L, a->doc);
        lua_pushstring(L, a->path);
    } else {
        lua_pushstring(L, a->lang);
    }
    lua_pushstring(L, a->nonce);
    lua_call(L, a->doc ? 3 : 2, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
        return luaL_error(L, "page.%s returned a %s, not a string", fn, luaL_typename(L, -1));
    const char *s = lua_tolstring(L, -1, &len);
    buf_append(a->out, s, len);
    return 0;
}

/* page_call_p under lvm_traceback, as a tool runs: an error carries its stack. A
 * memory error is recorded as the budget's kill (the allocator only refuses). */
static int page_p(lua_State *L)
{
    void *a = lua_touserdata(L, 1);
    lua_pushcfunction(L, lvm_traceback);
    lua_pushcfunction(L, page_call_p);
    lua_pushlightuserdata(L, a);
    int status = lua_pcall(L, 1, 0, 2);
    if (status == LUA_OK)
        return 0;
    lvm_budget *b = lvm_budget_current(lvm_of(L));
    if (status == LUA_ERRMEM && b && !b->killed)
        b->killed = LVM_KILL_MEM;
    return lua_error(L);
}

/* Renders a page in the current generation under the tools' budgets (instructions,
 * memory, run time). Returns 0, or -1 with *err (caller frees) saying why. */
static int render_page(req_ctx *c, page_args *a, char **err)
{
    const settings *cfg = c->app->cfg;
    tools_gen *g = tools_host_acquire(c->app->tools);
    lvm_budget b;
    int rc = -1;
    *err = NULL;
    memset(&b, 0, sizeof b);
    b.instr_limit = cfg->lua_instruction_budget;
    b.mem_limit = (size_t)cfg->lua_memory_cap_mb * 1024 * 1024;
    b.uncounted_us = PAGE_UNCOUNTED_US;
    lvm_budget_slice(&b, cfg->lua_max_run_ms);
    if (!g) {
        *err = xstrdup("no tool generation is loaded");
        goto done;
    }
    lvm_enter(tools_gen_vm(g), &b, NULL);
    rc = lvm_cpcall(lvm_state(tools_gen_vm(g)), page_p, a, err);
    lvm_leave(tools_gen_vm(g));
    if (rc != 0 && b.killed) {
        buf m = BUF_INIT;
        buf_printf(&m, "page stopped: %s", lvm_kill_text(b.killed));
        free(*err);
        *err = buf_steal(&m, NULL);
    }
done:
    if (g)
        tools_gen_release(g);
    return rc;
}

/* A rendering failed: the error and its traceback go to the log under a fresh
 * incident id, the caller gets the 500 envelope naming that id. */
static void page_failed(req_ctx *c, const char *err)
{
    unsigned char rnd[8];
    char incident[24] = "inc_", details[64], extra[64];
    const char *e = err ? err : "?";
    const char *tb = strstr(e, "\nstack traceback:");
    buf b = BUF_INIT;
    random_bytes(rnd, sizeof rnd);
    hex_encode(rnd, sizeof rnd, incident + 4);
    log_line *l = log_begin(LOG_ERROR, "page rendering failed");
    log_str(l, "incident_id", incident);
    log_strn(l, "error", e, tb ? (size_t)(tb - e) : strlen(e));
    if (tb)
        log_str(l, "traceback", tb + 1);
    log_end(l);
    snprintf(details, sizeof details, "incident %s", incident);
    snprintf(extra, sizeof extra, "\"incident_id\":\"%s\"", incident);
    err_write(&b, 500, c->lang, "Public.InternalServerError.PageRenderFailed", NULL,
              text_get(TEXT_ERR_INCIDENT_SOLUTION, c->lang), details, NULL, extra);
    req_reply(c, 500, "application/json; charset=utf-8", b.data, b.len);
    buf_free(&b);
}

/* ---- the public page shell ---- */

int info_shell_wanted(req_ctx *c)
{
    return !strcmp(c->method, "GET") && !req_header(c, "Authorization") &&
           wants_html(req_header(c, "Accept"));
}

/* Renders the page for doc (the catalogue) or, with doc NULL, the shell, and answers
 * with it and the page's security headers; a failed rendering answers the 500. */
static void send_page(req_ctx *c, const json_value *doc, int connect, const char *outcome)
{
    char nonce[33], *err = NULL;
    buf out = BUF_INIT;
    page_args a = {doc, surface_path(c->surface), lang_tag(c->lang), nonce, &out};
    page_nonce(nonce);
    if (render_page(c, &a, &err) != 0) {
        page_failed(c, err);
        goto done;
    }
    page_security(c, nonce, connect);
    c->outcome = outcome;
    req_reply(c, 200, "text/html; charset=utf-8", out.data, out.len);
done:
    free(err);
    buf_free(&out);
}

/* The shell a browser gets without a token (page.shell): a form for one; its script
 * fetches this same URL with it and shows the catalogue in place, so its CSP also
 * allows fetch to 'self'. */
void info_shell(req_ctx *c)
{
    req_add_header(c, "Cache-Control", "no-store");
    req_add_header(c, "Vary", "Accept, Accept-Language, Authorization");
    req_add_header(c, "Content-Language", lang_tag(c->lang));
    send_page(c, NULL, 1, "shell");
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
    if (wants_html(req_header(c, "Accept"))) {
        send_page(c, doc, 0, "ok");
    } else {
        c->outcome = "ok";
        json_write(&out, doc, 0);
        req_reply(c, 200, "application/json; charset=utf-8", out.data, out.len);
    }
done:
    json_free(doc);
    buf_free(&out);
}
