/* ptc: programmatic tool calling, the core's part (docs/ptc.md).
 *
 * - GET /mcp/ptc/toolkit and the deprecated GET /mcp/toolkit: {tools, stub,
 *   sandbox_mcp_url, version, digest}, rendered by lua/ptc.lua in the current
 *   generation's state from the tools/list entries of the tools it serves, cached per
 *   generation and language.
 * - The tools/list entries of the /mcp/ptc tools: run_code's description is the
 *   digest (the signature list of the sandbox functions), from the same rendering.
 * - The sandbox callback URL (ptc.sandbox_mcp_url, else derived from the listener),
 *   given to tools as ctx.config.ptc.sandbox_mcp_url. */
#include <arpa/inet.h>
#include <lauxlib.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "json_lua.h"
#include "log.h"
#include "lvm.h"
#include "accept.h"
#include "server.h"
#include "surfaces.h"

static char g_sandbox_url[600];

/* One rendering per language of the current generation. Strings owned here; replaced
 * as a whole when the generation changes. */
typedef struct kit_lang {
    int built;
    char *body;     /* the toolkit document */
    size_t n;       /* /mcp/ptc tools */
    char **names;   /* their names */
    char **entries; /* their tools/list entries, description from the toolkit */
} kit_lang;

static struct {
    unsigned gen_id;
    kit_lang lang[LANG_COUNT];
} g_kit;

static void kit_lang_free(kit_lang *k)
{
    free(k->body);
    for (size_t i = 0; i < k->n; i++) {
        free(k->names[i]);
        free(k->entries[i]);
    }
    free(k->names);
    free(k->entries);
    memset(k, 0, sizeof *k);
}

static void kit_reset(unsigned gen_id)
{
    for (int l = 0; l < LANG_COUNT; l++)
        kit_lang_free(&g_kit.lang[l]);
    g_kit.gen_id = gen_id;
}

/* ---- sandbox URL ---- */

const char *ptc_sandbox_url(void)
{
    return g_sandbox_url;
}

void ptc_init(app *a)
{
    const char *conf_url = a->cfg->ptc_sandbox_mcp_url;
    if (conf_url && *conf_url) {
        size_t n = strlen(conf_url);
        /* the trailing slash avoids a redirect that urllib would not re-POST */
        snprintf(g_sandbox_url, sizeof g_sandbox_url, "%s%s", conf_url,
                 conf_url[n - 1] == '/' ? "" : "/");
    } else {
        char host[256] = "127.0.0.1";
        int port = 0;
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = httpd_listen_fd(a);
        if (fd >= 0 && getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
            if (ss.ss_family == AF_INET) {
                struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
                port = ntohs(sin->sin_port);
                if (sin->sin_addr.s_addr != htonl(INADDR_ANY))
                    inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
                else if (gethostname(host, sizeof host) != 0)
                    snprintf(host, sizeof host, "127.0.0.1");
            } else if (ss.ss_family == AF_INET6) {
                struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
                char a6[INET6_ADDRSTRLEN];
                port = ntohs(sin6->sin6_port);
                if (IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr)) {
                    if (gethostname(host, sizeof host) != 0)
                        snprintf(host, sizeof host, "127.0.0.1");
                } else {
                    inet_ntop(AF_INET6, &sin6->sin6_addr, a6, sizeof a6);
                    snprintf(host, sizeof host, "[%s]", a6);
                }
            }
        }
        snprintf(g_sandbox_url, sizeof g_sandbox_url, "http://%s:%d%s/mcp/", host, port, a->prefix);
    }
    if (a->ctx_config) {
        json_value *p = json_new_object();
        json_set(p, "sandbox_mcp_url", json_new_str(g_sandbox_url, strlen(g_sandbox_url)));
        json_set(a->ctx_config, "ptc", p);
    }
}

/* ---- rendering ---- */

typedef struct build_args {
    const json_value *catalog;
    const json_value *ptc_tools;
    const char *lang;
    buf digest, stub, tools;
    char err[256];
} build_args;

/* ptc.toolkit(catalog, ptc_tools, lang, cljson) -> digest, stub, tools */
static int build_p(lua_State *L)
{
    build_args *b = lua_touserdata(L, 1);
    size_t len;
    const char *s;
    lvm_require(L, "ptc");
    lua_getfield(L, -1, "toolkit");
    cljson_push(L, b->catalog);
    cljson_push(L, b->ptc_tools);
    lua_pushstring(L, b->lang);
    lvm_require(L, "cljson");
    lua_call(L, 4, 3);
    s = luaL_checklstring(L, -3, &len);
    buf_append(&b->digest, s, len);
    s = luaL_checklstring(L, -2, &len);
    buf_append(&b->stub, s, len);
    if (cljson_encode(L, -1, &b->tools, 0, b->err, sizeof b->err) != 0)
        return luaL_error(L, "toolkit tools: %s", b->err);
    return 0;
}

static int usable(app *a, const tools_info *ti, unsigned surface)
{
    return (ti->surfaces & surface) && ti->gate_open;
}

/* Renders g's toolkit for lang into k. Returns 0, or -1 (logged). */
static int kit_build(app *a, tools_gen *g, lang_id lang, kit_lang *k)
{
    int rc = -1;
    char *err = NULL;
    json_value *catalog = json_new_array(), *ptc_tools = json_new_array(), *tools = NULL;
    build_args b;
    memset(&b, 0, sizeof b);
    size_t n = tools_gen_count(g);
    for (size_t i = 0; i < n; i++) {
        const tools_info *ti = tools_gen_info(g, i);
        /* the stub calls back /mcp: the tools listed there, never REST-only ones */
        json_value *target = usable(a, ti, SURFACE_MCP)   ? catalog
                             : usable(a, ti, SURFACE_PTC) ? ptc_tools
                                                          : NULL;
        if (!target)
            continue;
        json_value *e = json_parse(ti->list_json[lang], strlen(ti->list_json[lang]), NULL, NULL, 0);
        if (e)
            json_push(target, e);
    }
    b.catalog = catalog;
    b.ptc_tools = ptc_tools;
    b.lang = lang_tag(lang);
    if (lvm_cpcall(lvm_state(tools_gen_vm(g)), build_p, &b, &err) != 0) {
        log_line *l = log_begin(LOG_ERROR, "ptc toolkit rendering failed");
        log_int(l, "generation", tools_gen_id(g));
        log_str(l, "error", err ? err : "?");
        log_end(l);
        goto done;
    }
    tools = json_parse(b.tools.data, b.tools.len, NULL, NULL, 0);
    if (!tools || json_typeof(tools) != JSON_ARRAY)
        goto done;

    /* version: a hash of everything a client caches */
    buf h = BUF_INIT;
    buf_append(&h, b.digest.data, b.digest.len);
    buf_putc(&h, '\0');
    buf_append(&h, b.stub.data, b.stub.len);
    buf_putc(&h, '\0');
    buf_append(&h, b.tools.data, b.tools.len);
    buf_putc(&h, '\0');
    buf_puts(&h, g_sandbox_url);
    char hex[65];
    sha256_hex(h.data, h.len, hex);
    buf_free(&h);

    buf body = BUF_INIT;
    buf_puts(&body, "{\"tools\":");
    buf_append(&body, b.tools.data, b.tools.len);
    buf_puts(&body, ",\"stub\":");
    json_write_string(&body, b.stub.data, b.stub.len);
    buf_puts(&body, ",\"sandbox_mcp_url\":");
    json_write_string(&body, g_sandbox_url, strlen(g_sandbox_url));
    buf_printf(&body, ",\"version\":\"sha256:%s\",\"digest\":", hex);
    json_write_string(&body, b.digest.data, b.digest.len);
    buf_putc(&body, '}');
    k->body = buf_steal(&body, NULL);

    /* the /mcp/ptc tools/list entries: the description the toolkit gives them */
    size_t np = json_count(ptc_tools);
    k->names = xcalloc(np ? np : 1, sizeof *k->names);
    k->entries = xcalloc(np ? np : 1, sizeof *k->entries);
    for (size_t i = 0; i < np; i++) {
        json_value *e = json_clone(json_at(ptc_tools, i));
        const char *name = json_get_string(e, "name");
        for (size_t j = 0; name && j < json_count(tools); j++) {
            const json_value *t = json_at(tools, j);
            const char *tn = json_get_string(t, "name");
            const json_value *d = json_get(t, "description");
            if (tn && !strcmp(tn, name) && d && json_typeof(d) == JSON_STRING)
                json_set(e, "description", json_clone(d));
        }
        buf eb = BUF_INIT;
        json_write(&eb, e, 0);
        k->names[k->n] = xstrdup(name ? name : "");
        k->entries[k->n] = buf_steal(&eb, NULL);
        k->n++;
        json_free(e);
    }
    k->built = 1;
    rc = 0;
done:
    free(err);
    json_free(catalog);
    json_free(ptc_tools);
    json_free(tools);
    buf_free(&b.digest);
    buf_free(&b.stub);
    buf_free(&b.tools);
    return rc;
}

/* The rendering of g for lang (built on first use), or NULL when it failed. */
static kit_lang *kit_get(app *a, tools_gen *g, lang_id lang)
{
    if (!g || lang < 0 || lang >= LANG_COUNT)
        return NULL;
    if (g_kit.gen_id != tools_gen_id(g))
        kit_reset(tools_gen_id(g));
    kit_lang *k = &g_kit.lang[lang];
    if (!k->built && kit_build(a, g, lang, k) < 0) {
        kit_lang_free(k);
        return NULL;
    }
    return k;
}

const char *ptc_list_json(app *a, tools_gen *g, const tools_info *ti, lang_id lang)
{
    if (!(ti->surfaces & SURFACE_PTC))
        return ti->list_json[lang];
    kit_lang *k = kit_get(a, g, lang);
    for (size_t i = 0; k && i < k->n; i++)
        if (!strcmp(k->names[i], ti->name))
            return k->entries[i];
    return ti->list_json[lang];
}

void ptc_free(void)
{
    kit_reset(0);
}

void toolkit_handle(req_ctx *c)
{
    tools_gen *g = tools_host_acquire(c->app->tools);
    kit_lang *k = kit_get(c->app, g, c->lang);
    if (!k) {
        if (g)
            tools_gen_release(g);
        req_reply_error(c, 500, "agentRetrieval.InternalServerError.PTCToolkitBuildFailed",
                        "the PTC toolkit could not be rendered");
        return;
    }
    c->outcome = "ok";
    if (strstr(c->path, "/mcp/ptc/toolkit") == NULL) {
        /* GET /mcp/toolkit: the same body byte for byte, marked as deprecated by the
         * standard Deprecation and Link headers */
        buf link = BUF_INIT;
        size_t plen = strlen(c->app->prefix);
        buf_printf(&link, "<%s/mcp/ptc/toolkit>; rel=\"successor-version\"",
                   !strncmp(c->path, c->app->prefix, plen) ? c->app->prefix : "");
        req_add_header(c, "Deprecation", "true");
        req_add_header(c, "Link", link.data);
        buf_free(&link);
    }
    req_add_header(c, "Content-Language", lang_tag(c->lang));
    req_add_header(c, "Vary", "Accept-Language");
    /* copy: the reply may outlive a rebuild triggered later on the loop */
    char *body = xstrdup(k->body);
    tools_gen_release(g);
    req_reply(c, 200, "application/json; charset=utf-8", body, strlen(body));
    free(body);
}
