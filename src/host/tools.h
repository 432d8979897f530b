/* tools: Lua tool generations (docs/tools-host.md).
 *
 * A generation is one sandboxed lua_State holding every tools/NAME.lua file of a
 * directory, loaded and validated together (lua/contract.lua, lua/schema.lua).
 * The host keeps a current generation; callers acquire it for the length of a
 * call (refcount) so that a reload never changes code under a running call; a
 * retired generation is closed when its last reference is released. Building a new
 * generation and swapping it in, on start and for operators: reload.h.
 *
 * Ownership: tools_info pointers and their strings belong to the generation and
 * live as long as the caller holds a reference to it. */
#ifndef CL_TOOLS_H
#define CL_TOOLS_H

#include "texts.h"

#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "fetch.h"
#include "json.h"

enum {
    SURFACE_MCP = 1,     /* listed on /mcp */
    SURFACE_COMPACT = 2, /* listed on /mcp-compact */
    SURFACE_REST = 4,    /* POST /kn/<name> */
    SURFACE_PTC = 8,     /* /mcp/ptc */
    SURFACE_PROXY = 16,  /* reached only through the routes it declares (tools_info.routes) */
    SURFACE_GATEWAY = 32 /* listed on no MCP surface; reached through search_capabilities/execute_tool */
};

/* A route a tool declares (lua/contract.lua `routes`): POST on path, below the public
 * prefix. */
typedef struct tools_route {
    const char *path; /* literal segments and {parameter} segments, e.g. "/a/{id}/b" */
    const char *body; /* the object parameter the request body becomes, or NULL (the
                         body is the arguments) */
} tools_route;

typedef struct tools_info {
    const char *name;
    const char *version;
    const char *kind;          /* "read" | "execute" */
    const char *group;         /* may be NULL */
    int order;                 /* 0 = unordered */
    const char *gate;          /* feature switch name, or NULL */
    int gate_open;             /* the switch, resolved once when the generation loads */
    const char *rest_alias;    /* extra REST name (e.g. "logic-property-resolver"), or NULL */
    unsigned surfaces;         /* SURFACE_* bits */
    const tools_route *routes; /* the routes it declares (n_routes of them) */
    size_t n_routes;
    int toon; /* 1 when "toon" is among formats */
    /* The tools/list entry of this tool as a JSON object text, per language:
     * name, title, description, inputSchema, outputSchema (when declared),
     * annotations, _meta {openbkn.ai/group, group_title, order}. Schemas are written
     * with sorted keys. */
    const char *list_json[LANG_COUNT];
    /* The same tool's /mcp-compact entry, per language: list_json with the terse
     * prose (short description, shared sub-schemas and outputSchema without their
     * descriptions); everything else identical. */
    const char *compact_json[LANG_COUNT];
} tools_info;

/* The entry of ti that the listing surface (SURFACE_MCP or SURFACE_COMPACT) shows.
 * Borrowed from ti. */
const char *tools_entry_json(const tools_info *ti, unsigned surface, lang_id lang);

typedef struct tools_upstream {
    const char *name;     /* e.g. "ontology_query" */
    const char *base_url; /* e.g. "http://127.0.0.1:9100/api/ontology-query" (no trailing /) */
    long timeout_ms;
    int caller_token;  /* ctx.http may forward the caller's bearer token (caller_token) */
    int managed_proxy; /* ctx.http GETs may go out as a managed proxy account */
    /* base_url parsed once, by the tool host's copy of the config (left NULL by
     * whoever fills the config in): ctx.http appends a call's path and query to it */
    fetch_base *parsed;
} tools_upstream;

typedef struct tools_config {
    const char *lua_dir;     /* trusted runtime dir (lua/) */
    size_t mem_cap_bytes;    /* per call; 0 -> 64 MiB */
    long instr_budget;       /* per call, VM instructions; 0 -> 100 million */
    long max_run_ms;         /* longest run of Lua without yielding (one resume, one tool
                                file's load), wall clock; 0 = no limit */
    size_t max_output_bytes; /* most bytes of a tool's encoded result; 0 = no limit */
    const tools_upstream *upstreams;
    size_t n_upstreams;
    size_t max_response_bytes; /* cap for ctx.http responses; 0 -> fetch default */
    fetch_ctx *fetch;          /* NULL in offline checks */
    struct event_base *base;   /* NULL in offline checks */
    const settings *settings;  /* for the tools' gates; not copied, outlives the host;
                                  may be NULL (conf_gate_open) */
} tools_config;

typedef struct tools_host tools_host;
typedef struct tools_gen tools_gen;

/* cfg is copied (strings too). */
tools_host *tools_host_new(const tools_config *cfg);
/* Frees the host; every generation must have been released. */
void tools_host_free(tools_host *h);

/* Current generation with a reference taken (NULL before the first load). */
tools_gen *tools_host_acquire(tools_host *h);
/* One more reference to g (released with tools_gen_release). */
void tools_gen_ref(tools_gen *g);
void tools_gen_release(tools_gen *g);
unsigned tools_gen_id(const tools_gen *g);
size_t tools_gen_count(const tools_gen *g);
/* Ordered by order (unordered last), then name. */
const tools_info *tools_gen_info(const tools_gen *g, size_t i);
const tools_info *tools_gen_find(const tools_gen *g, const char *name);
/* Finds by name or rest_alias. */
const tools_info *tools_gen_find_rest(const tools_gen *g, const char *name);

/* The tools/list entries of the two lifecycle tools (declared in lua/lifecycle.lua),
 * as two JSON objects separated by one comma, for lang. Borrowed from g. */
const char *tools_gen_lifecycle_json(const tools_gen *g, lang_id lang);
/* Checks the arguments (an object, or NULL = {}) of lifecycle tool name against its
 * declaration (lua/lifecycle.lua, with lua/schema.lua) on g's state. Returns 0 when
 * they pass; 1 with *refusal set (the error object {code, message, retryable,
 * required_action, details}; the caller frees it) when they do not; -1 with err set
 * when the check itself failed. host_key: the call carries a host conversation key. */
int tools_gen_lifecycle_check(tools_gen *g, const char *name, const json_value *args, lang_id lang,
                              int host_key, json_value **refusal, char *err, size_t errlen);

/* Offline validation (--check-tools): loads dir with the same loader and contract.
 * Returns the number of errors (0 = valid); *report lists them, or a summary. */
int tools_check_dir(const tools_config *cfg, const char *dir, char **report);

#endif
