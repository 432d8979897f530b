/* route: the route table. For the path below the prefix it picks the surface
 * (MCP /mcp, /mcp-compact, /mcp/ptc; self-description; the PTC toolkit; REST
 * /kn/<tool> and the routes tools declare), refuses what routing alone decides (unknown
 * or gated paths 404, wrong methods 405, Origin 403) and returns the handler httpd
 * runs once the caller is authenticated. The routes tools declare (tools_info.routes)
 * are matched after the core's own. REST tool routes pin the tool generation here,
 * once. main registers route_request as app.route. */
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"
#include "surfaces.h"
#include "util.h"

/* A REST-style tool route: the tool must exist, be on the surface and not be gated
 * off - otherwise it is an unknown path - and take POST. Replies and returns -1 when
 * the request cannot go on. */
static int route_tool(req_ctx *c, const char *tool, unsigned surface, const char *post_only)
{
    c->kind = ROUTE_REST;
    str_copy(c->surface, sizeof c->surface, "rest");
    str_copy(c->tool, sizeof c->tool, tool);
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
    req_rest(c)->ti = ti;
    return 0;
}

/* One decoded {parameter} segment of a declared route: NULL (and *why set) unless it
 * is a plain id: not empty, not "." or "..", no "/" or NUL once percent-decoded
 * (either would make the call reach another resource than the one the caller named). */
static char *route_segment(const char *raw, size_t n, const char **why)
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

/* Whether path matches the route template tpl segment by segment ({name} matches any
 * non-empty segment). */
static int template_matches(const char *tpl, const char *path)
{
    while (*tpl == '/' && *path == '/') {
        tpl++, path++;
        size_t tn = strcspn(tpl, "/"), pn = strcspn(path, "/");
        if (pn == 0 || (tpl[0] != '{' && (tn != pn || strncmp(tpl, path, tn))))
            return 0;
        tpl += tn, path += pn;
    }
    return !*tpl && !*path;
}

/* The {name} segments of path under template tpl (template_matches holds), decoded,
 * into an object; NULL after a 400 naming the parameter (the reply frees c). */
static json_value *template_params(req_ctx *c, const char *tpl, const char *path)
{
    json_value *o = json_new_object();
    while (*tpl == '/') {
        tpl++, path++;
        size_t tn = strcspn(tpl, "/"), pn = strcspn(path, "/");
        if (tpl[0] == '{') {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(tn - 2), tpl + 1);
            const char *why = "is malformed";
            char *v = route_segment(path, pn, &why);
            if (!v) {
                char msg[256];
                snprintf(msg, sizeof msg, "%s in the path %s", name, why);
                req_reply_error(c, 400, NULL, msg);
                json_free(o);
                return NULL;
            }
            json_set(o, name, json_new_str(v, strlen(v)));
            free(v);
        }
        tpl += tn, path += pn;
    }
    return o;
}

/* A route a tool of the current generation declares (tools_info.routes): 0 when none
 * matches rest; 1 when one does (c->gen pinned, its rest_req's ti, route_params and
 * route_body set); -1 after a reply, which freed c (wrong method 405, a malformed
 * parameter 400, the tool gated off 404). */
static int route_declared(req_ctx *c, const char *rest)
{
    tools_gen *g = tools_host_acquire(c->app->tools);
    const tools_info *ti = NULL;
    const tools_route *r = NULL;
    for (size_t i = 0; g && !r && i < tools_gen_count(g); i++) {
        const tools_info *t = tools_gen_info(g, i);
        for (size_t k = 0; !r && k < t->n_routes; k++)
            if (template_matches(t->routes[k].path, rest))
                ti = t, r = &t->routes[k];
    }
    int rc = r ? -1 : 0;
    json_value *params = NULL;
    if (r) {
        c->kind = ROUTE_REST;
        str_copy(c->surface, sizeof c->surface, "rest");
    }
    if (!r) {
        /* not a declared route */
    } else if (!ti->gate_open) {
        req_not_found(c);
    } else if (strcmp(c->method, "POST")) {
        req_add_header(c, "Allow", "POST");
        req_reply_error(c, 405, NULL, "use POST on this route");
    } else if ((params = template_params(c, r->path, rest)) != NULL) {
        /* The generation is pinned here, once: the call runs on what routing saw. */
        req_rest(c)->route_params = params;
        c->gen = g;
        req_rest(c)->ti = ti;
        req_rest(c)->route_body = r->body;
        str_copy(c->tool, sizeof c->tool, ti->name);
        rc = 1;
    }
    if (rc != 1 && g)
        tools_gen_release(g);
    return rc;
}

route_handler route_request(req_ctx *c, const char *rest)
{
    route_handler handler = NULL;
    int declared;
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
        str_copy(c->surface, sizeof c->surface,
                 !strncmp(rest, "/mcp-compact", 12) ? "compact"
                 : !strncmp(rest, "/mcp/ptc", 8)    ? "ptc"
                                                    : "mcp");
    } else if (mcp_surface) {
        c->kind = ROUTE_MCP;
        handler = mcp_handle;
        str_copy(c->surface, sizeof c->surface, mcp_surface);
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
    } else if (!strncmp(rest, "/kn/", 4) && rest[4]) {
        if (route_tool(c, rest + 4, SURFACE_REST, "use POST on /kn routes") < 0)
            return NULL;
        handler = rest_handle;
    } else if ((declared = route_declared(c, rest)) != 0) {
        /* the routes tools declare never shadow the core's (lua/contract.lua) */
        if (declared < 0)
            return NULL;
        handler = rest_handle;
    } else {
        req_not_found(c);
        return NULL;
    }
    return handler;
}

void route_request_end(req_ctx *c)
{
    surface_req *s = req_surface(c);
    rest_req_end(&s->rest);
    mcp_req_end(&s->mcp);
}
