/* route: the route table. For the path below the prefix it picks the surface
 * (MCP /mcp, /mcp-compact, /mcp/ptc; self-description; the PTC toolkit; REST
 * /kn/<tool> and the MCP proxy route), refuses what routing alone decides (unknown
 * or gated paths 404, wrong methods 405, Origin 403) and returns the handler httpd
 * runs once the caller is authenticated. REST tool routes pin the tool generation
 * here, once. main registers route_request as app.route. */
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"
#include "surfaces.h"

/* A REST-style tool route: the tool must exist, be on the surface and not be gated
 * off - otherwise it is an unknown path - and take POST. Replies and returns -1 when
 * the request cannot go on. */
static int route_tool(req_ctx *c, const char *tool, unsigned surface, const char *post_only)
{
    c->kind = ROUTE_REST;
    snprintf(c->surface, sizeof c->surface, "rest");
    snprintf(c->tool, sizeof c->tool, "%s", tool);
    /* The generation is pinned here, once: the call runs on what routing saw. */
    c->gen = tools_host_acquire(c->app->tools);
    const tools_info *ti = c->gen ? tools_gen_find_rest(c->gen, c->tool) : NULL;
    int visible = ti && (ti->surfaces & surface) && ti->gate_open;
    if (!visible) {
        c->tool[0] = '\0';
        if (c->gen)
            tools_gen_release(c->gen);
        c->gen = NULL;
        req_not_found(c);
        return -1;
    }
    if (strcmp(c->method, "POST")) {
        tools_gen_release(c->gen);
        c->gen = NULL;
        req_add_header(c, "Allow", "POST");
        req_reply_error(c, 405, NULL, post_only);
        return -1;
    }
    c->ti = ti;
    return 0;
}

/* One decoded proxy path segment: NULL (and *why set) unless it is a plain id: not
 * empty, not "." or "..", no "/" or NUL once percent-decoded (either would make the
 * call reach another MCP server or tool than the one the caller named). */
static char *proxy_segment(const char *raw, size_t n, const char **why)
{
    char tmp[512];
    size_t len = 0;
    if (n == 0 || n >= sizeof tmp) {
        *why = n ? "is too long" : "is empty";
        return NULL;
    }
    snprintf(tmp, sizeof tmp, "%.*s", (int)n, raw);
    char *v = evhttp_uridecode(tmp, 0, &len);
    if (v && (len != strlen(v) || strchr(v, '/') || !strcmp(v, ".") || !strcmp(v, ".."))) {
        *why = "must be a plain id: no \"/\", NUL, \".\" or \"..\" once percent-decoded";
        free(v);
        v = NULL;
    }
    return v;
}

/* "{mcp_id}/tools/{tool_name}/call" -> the two decoded ids; -1 when the path does not
 * have that shape (404), -2 after a 400 naming the field. */
static int parse_proxy_path(req_ctx *c, const char *p)
{
    const char *slash = strchr(p, '/');
    if (!slash || slash == p || strncmp(slash, "/tools/", 7) != 0)
        return -1;
    const char *name = slash + 7, *end = strchr(name, '/');
    if (!end || end == name || strcmp(end, "/call") != 0)
        return -1;
    const char *why = "is malformed", *field = "mcp_id";
    char *id = proxy_segment(p, (size_t)(slash - p), &why), *tool = NULL;
    if (id) {
        field = "tool_name";
        tool = proxy_segment(name, (size_t)(end - name), &why);
    }
    int rc = -2;
    if (id && tool && strlen(id) < sizeof c->proxy_mcp_id && strlen(tool) < sizeof c->proxy_tool) {
        snprintf(c->proxy_mcp_id, sizeof c->proxy_mcp_id, "%s", id);
        snprintf(c->proxy_tool, sizeof c->proxy_tool, "%s", tool);
        rc = 0;
    } else {
        char msg[160];
        snprintf(msg, sizeof msg, "%s in the proxy path %s", field,
                 id && tool ? "is too long" : why);
        req_reply_error(c, 400, NULL, msg);
    }
    free(id);
    free(tool);
    return rc;
}

route_handler route_request(req_ctx *c, const char *rest)
{
    route_handler handler = NULL;
    if (!strncmp(rest, "/.well-known/", 13)) { /* public metadata: answered here */
        info_well_known(c, rest);
        return NULL;
    }
    int ptc_on = c->app->cfg->execute_skill_enabled;
    const char *mcp_surface = !strcmp(rest, "/mcp") || !strcmp(rest, "/mcp/") ? "mcp"
                              : !strcmp(rest, "/mcp-compact") || !strcmp(rest, "/mcp-compact/")
                                  ? "compact"
                              : ptc_on && (!strcmp(rest, "/mcp/ptc") || !strcmp(rest, "/mcp/ptc/"))
                                  ? "ptc" /* gated: off, it is an unknown path */
                                  : NULL;
    if (!strcmp(c->method, "GET") &&
        (!strcmp(rest, "/mcp/info") || !strcmp(rest, "/mcp-compact/info") ||
         !strcmp(rest, "/mcp/ptc/info") || !strcmp(rest, "/mcp/ptc/toolkit") ||
         !strcmp(rest, "/mcp/toolkit"))) {
        /* Self-description and the PTC toolkit: authenticated GETs, never gated. */
        c->kind = strstr(rest, "toolkit") ? ROUTE_TOOLKIT : ROUTE_INFO;
        handler = c->kind == ROUTE_TOOLKIT ? toolkit_handle : info_handle;
        if (c->kind == ROUTE_INFO && info_shell_wanted(c)) {
            info_shell(c); /* public: the shell holds no data */
            return NULL;
        }
        snprintf(c->surface, sizeof c->surface, "%s",
                 !strncmp(rest, "/mcp-compact", 12) ? "compact"
                 : !strncmp(rest, "/mcp/ptc", 8)    ? "ptc"
                                                    : "mcp");
    } else if (mcp_surface) {
        c->kind = ROUTE_MCP;
        handler = mcp_handle;
        snprintf(c->surface, sizeof c->surface, "%s", mcp_surface);
        if (strcmp(c->method, "POST") && strcmp(c->method, "GET") && strcmp(c->method, "DELETE")) {
            req_add_header(c, "Allow", "GET, POST, DELETE");
            req_reply_error(c, 405, NULL, "use POST, GET or DELETE on the MCP endpoint");
            return NULL;
        }
        if (!req_origin_allowed(c)) {
            req_reply_error(c, 403, "Public.Forbidden.OriginRejected",
                            "Origin or Host header not allowed (DNS rebinding protection)");
            return NULL;
        }
    } else if (!strncmp(rest, "/mcp/proxy/", 11)) {
        int prc = parse_proxy_path(c, rest + 11);
        if (prc < 0) {
            if (prc == -1)
                req_not_found(c);
            return NULL;
        }
        c->proxy = 1;
        if (route_tool(c, "mcp_proxy_call", SURFACE_PROXY, "use POST on the MCP proxy route") < 0)
            return NULL;
        handler = rest_handle;
    } else if (!strncmp(rest, "/kn/", 4) && rest[4]) {
        if (route_tool(c, rest + 4, SURFACE_REST, "use POST on /kn routes") < 0)
            return NULL;
        handler = rest_handle;
    } else {
        req_not_found(c);
        return NULL;
    }
    return handler;
}
