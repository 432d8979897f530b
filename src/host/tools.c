/* tools: Lua tool generations. See tools.h and docs/tools-host.md. */
#include "tools_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <lauxlib.h>

#include "json.h"
#include "json_lua.h"
#include "log.h"
#include "lvm.h"
#include "util.h"

#define TOOLS_DEFAULT_MEM ((size_t)64 << 20)
#define TOOLS_DEFAULT_INSTR 100000000L
#define TOOLS_MAX_FILE ((size_t)4 << 20)

/* ---- config copy ---- */

static void config_copy(tools_config *dst, tools_upstream **ups, const tools_config *src)
{
    size_t i;
    *dst = *src;
    dst->lua_dir = xstrdup(src->lua_dir ? src->lua_dir : CL_SOURCE_DIR "/lua");
    if (!dst->mem_cap_bytes)
        dst->mem_cap_bytes = TOOLS_DEFAULT_MEM;
    if (dst->instr_budget <= 0)
        dst->instr_budget = TOOLS_DEFAULT_INSTR;
    *ups = src->n_upstreams ? xcalloc(src->n_upstreams, sizeof **ups) : NULL;
    for (i = 0; i < src->n_upstreams; i++) {
        (*ups)[i].name = xstrdup(src->upstreams[i].name);
        (*ups)[i].base_url = xstrdup(src->upstreams[i].base_url);
        (*ups)[i].timeout_ms = src->upstreams[i].timeout_ms;
        (*ups)[i].caller_token = src->upstreams[i].caller_token;
        (*ups)[i].managed_proxy = src->upstreams[i].managed_proxy;
        (*ups)[i].parsed = fetch_base_new(src->upstreams[i].base_url);
    }
    dst->upstreams = *ups;
}

static void config_free(tools_config *cfg, tools_upstream *ups)
{
    size_t i;
    for (i = 0; i < cfg->n_upstreams; i++) {
        free((char *)ups[i].name);
        free((char *)ups[i].base_url);
        fetch_base_free(ups[i].parsed);
    }
    free(ups);
    free((char *)cfg->lua_dir);
}

/* ---- generation lifetime ---- */

static void info_free(tools_info *t)
{
    int l;
    free((char *)t->name);
    free((char *)t->version);
    free((char *)t->kind);
    free((char *)t->group);
    free((char *)t->gate);
    free((char *)t->rest_alias);
    for (size_t r = 0; r < t->n_routes; r++) {
        free((char *)t->routes[r].path);
        free((char *)t->routes[r].body);
    }
    free((tools_route *)t->routes);
    for (l = 0; l < LANG_COUNT; l++) {
        free((char *)t->list_json[l]);
        free((char *)t->compact_json[l]);
    }
}

const char *tools_entry_json(const tools_info *ti, unsigned surface, lang_id lang)
{
    return surface == SURFACE_COMPACT ? ti->compact_json[lang] : ti->list_json[lang];
}

static size_t g_live_gens;

size_t tools_gen_live(void)
{
    return g_live_gens;
}

static void gen_free(tools_gen *g)
{
    size_t i;
    if (!g)
        return;
    g_live_gens--;
    lvm_free(g->vm);
    for (i = 0; i < g->n; i++)
        info_free(&g->infos[i]);
    free(g->infos);
    for (i = 0; i < g->nfiles; i++)
        free(g->files[i].name);
    free(g->files);
    for (int l = 0; l < LANG_COUNT; l++)
        free(g->lifecycle_json[l]);
    free(g);
}

void tools_gen_ref(tools_gen *g)
{
    g->refs++;
}

void tools_gen_release(tools_gen *g)
{
    if (g && --g->refs == 0)
        gen_free(g);
}

unsigned tools_gen_id(const tools_gen *g)
{
    return g->id;
}

size_t tools_gen_count(const tools_gen *g)
{
    return g->n;
}

const tools_info *tools_gen_info(const tools_gen *g, size_t i)
{
    return i < g->n ? &g->infos[i] : NULL;
}

const tools_info *tools_gen_find(const tools_gen *g, const char *name)
{
    size_t i;
    for (i = 0; i < g->n; i++)
        if (strcmp(g->infos[i].name, name) == 0)
            return &g->infos[i];
    return NULL;
}

const tools_info *tools_gen_find_rest(const tools_gen *g, const char *name)
{
    size_t i;
    for (i = 0; i < g->n; i++)
        if (strcmp(g->infos[i].name, name) == 0 ||
            (g->infos[i].rest_alias && strcmp(g->infos[i].rest_alias, name) == 0))
            return &g->infos[i];
    return NULL;
}

lvm *tools_gen_vm(tools_gen *g)
{
    return g->vm;
}

int tools_gen_host_ref(tools_gen *g)
{
    return g->host_ref;
}

const tools_config *tools_gen_config(tools_gen *g)
{
    return g->cfg;
}

/* ---- loading ---- */

typedef struct src_file {
    char *name;  /* without .lua */
    char *fname; /* with .lua */
    char *text;
    size_t len;
    double mtime; /* seconds: of two files that collide, the later one is named first */
    char hash[65];
} src_file;

static int cmp_src(const void *a, const void *b)
{
    return strcmp(((const src_file *)a)->name, ((const src_file *)b)->name);
}

/* Tool files: dir/<name>.lua, regular, not hidden ("."), not "_"-prefixed (reserved
 * for _lib and helpers), so editor temp files (".x.swp", "x.lua~", "#x.lua#") are
 * never taken for tools. */
static int scan_dir(const char *dir, src_file **out, size_t *n_out, buf *errs)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    src_file *v = NULL;
    size_t n = 0, cap = 0;
    if (!d) {
        buf_printf(errs, "%s: cannot open the tools directory: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        char *path;
        struct stat st;
        src_file f;
        if (len <= 4 || e->d_name[0] == '.' || e->d_name[0] == '_' ||
            strcmp(e->d_name + len - 4, ".lua") != 0)
            continue;
        path = xmalloc(strlen(dir) + len + 2);
        sprintf(path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(path);
            continue;
        }
        memset(&f, 0, sizeof f);
        if (read_file_max(path, TOOLS_MAX_FILE, &f.text, &f.len) != 0) {
            buf_printf(errs, "%s:1: cannot read the file (missing, unreadable or over %zu bytes)\n",
                       e->d_name, TOOLS_MAX_FILE);
            free(path);
            continue;
        }
        free(path);
        f.mtime = (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec / 1e9;
        f.fname = xstrdup(e->d_name);
        f.name = xstrndup(e->d_name, len - 4);
        sha256_hex(f.text, f.len, f.hash);
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            v = xrealloc(v, cap * sizeof *v);
        }
        v[n++] = f;
    }
    closedir(d);
    if (n)
        qsort(v, n, sizeof *v, cmp_src);
    *out = v;
    *n_out = n;
    return 0;
}

static void src_files_free(src_file *v, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].fname);
        free(v[i].text);
    }
    free(v);
}

/* The line of the last top-level "return" (the tool table), else 1: where contract
 * errors point. */
static int return_line(const char *text, size_t len)
{
    int line = 1, found = 1;
    size_t i = 0;
    while (i < len) {
        if (strncmp(text + i, "return", 6) == 0 &&
            (i + 6 >= len || text[i + 6] == ' ' || text[i + 6] == '{' || text[i + 6] == '\n' ||
             text[i + 6] == '\t' || text[i + 6] == '\r'))
            found = line;
        while (i < len && text[i] != '\n')
            i++;
        i++;
        line++;
    }
    return found;
}

/* The directory as error lines name it: without trailing slashes ("tools/" -> "tools"). */
static size_t dir_len(const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    return n;
}

/* Adds "dir/file:line: message" for a message about file fname of dir. A message
 * that already names a place in dir ("dir/..." from lua/host.lua) is kept; one that
 * starts with "fname:" (Lua's own errors: chunks are named by the file name) gets the
 * directory in front. fname NULL: a message about the directory ("dir: message"). */
static void add_error(buf *errs, const char *dir, const char *fname, int line, const char *msg)
{
    size_t dl = dir_len(dir), fl = fname ? strlen(fname) : 0;
    if (strncmp(msg, dir, dl) == 0 && msg[dl] == '/')
        buf_printf(errs, "%s\n", msg);
    else if (!fname)
        buf_printf(errs, "%.*s: %s\n", (int)dl, dir, msg);
    else if (strncmp(msg, fname, fl) == 0 && msg[fl] == ':')
        buf_printf(errs, "%.*s/%s\n", (int)dl, dir, msg);
    else
        buf_printf(errs, "%.*s/%s:%d: %s\n", (int)dl, dir, fname, line, msg);
}

typedef struct load_ctx {
    tools_gen *g;
    const char *dir; /* the tools directory as given: error lines name files under it */
    src_file *f;
    int line;
    buf *errs;
    tools_info *info;       /* filled by info_p */
    const tools_info *same; /* the previous generation's info for an unchanged file */
    int unchanged;          /* same bytes and runtime as in the previous generation */
} load_ctx;

static int host_p(lua_State *L)
{
    tools_gen *g = lua_touserdata(L, 1);
    lvm_require(L, "host");
    if (!lua_istable(L, -1))
        return luaL_error(L, "lua/host.lua must return a table");
    g->host_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    if (g->cfg->n_upstreams) { /* host.configure{upstreams = {names...}} */
        lua_rawgeti(L, LUA_REGISTRYINDEX, g->host_ref);
        lua_getfield(L, -1, "configure");
        lua_createtable(L, 0, 1);
        lua_createtable(L, (int)g->cfg->n_upstreams, 0);
        for (size_t i = 0; i < g->cfg->n_upstreams; i++) {
            lua_pushstring(L, g->cfg->upstreams[i].name);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        lua_setfield(L, -2, "upstreams");
        lua_call(L, 1, 0);
        lua_pop(L, 1);
    }
    return 0;
}

/* Pushes host[fname]. */
static void push_host_fn(lua_State *L, tools_gen *g, const char *fname)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, g->host_ref);
    lua_getfield(L, -1, fname);
    lua_remove(L, -2);
}

static void add_error_list(lua_State *L, int idx, buf *errs, const char *dir, const char *fname,
                           int line)
{
    lua_Integer i, n;
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx)) {
        add_error(errs, dir, fname, line, lua_isstring(L, idx) ? lua_tostring(L, idx) : "invalid");
        return;
    }
    n = (lua_Integer)lua_rawlen(L, idx);
    for (i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, i);
        add_error(errs, dir, fname, line,
                  lua_isstring(L, -1) ? lua_tostring(L, -1) : "(invalid message)");
        lua_pop(L, 1);
    }
    if (n == 0)
        add_error(errs, dir, fname, line, "rejected by the contract check");
}

/* Pushes {path = "dir/fname", source = the text, mtime = seconds, line = c->line}:
 * what host.register needs to point errors at the offending key's line. */
static void push_file(lua_State *L, const load_ctx *c)
{
    const src_file *f = c->f;
    lua_createtable(L, 0, 4);
    lua_pushlstring(L, c->dir, dir_len(c->dir));
    lua_pushfstring(L, "/%s", f->fname);
    lua_concat(L, 2);
    lua_setfield(L, -2, "path");
    lua_pushlstring(L, f->text, f->len);
    lua_setfield(L, -2, "source");
    lua_pushnumber(L, f->mtime);
    lua_setfield(L, -2, "mtime");
    lua_pushinteger(L, c->line);
    lua_setfield(L, -2, "line");
}

/* Loads one file, runs it, registers it with host.register. Errors go to c->errs;
 * raising is reserved for unexpected failures. */
static int load_file_p(lua_State *L)
{
    load_ctx *c = lua_touserdata(L, 1);
    src_file *f = c->f;
    char chunk[300];
    snprintf(chunk, sizeof chunk, "@%s", f->fname);
    if (lvm_load(L, f->text, f->len, chunk) != 0) {
        add_error(c->errs, c->dir, f->fname, 1, lua_tostring(L, -1));
        return 0;
    }
    if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        add_error(c->errs, c->dir, f->fname, 1, m ? m : "the file raised a non-string error");
        return 0;
    }
    push_host_fn(L, c->g, "register");
    lua_pushstring(L, f->name);
    lua_pushvalue(L, -3);
    lua_pushboolean(L, c->unchanged);
    push_file(L, c);
    if (lua_pcall(L, 4, 2, 0) != LUA_OK) {
        add_error(c->errs, c->dir, f->fname, c->line, lua_tostring(L, -1));
        return 0;
    }
    if (lua_isnil(L, -2))
        add_error_list(L, -1, c->errs, c->dir, f->fname, c->line);
    return 0;
}

static char *opt_field(lua_State *L, int idx, const char *key)
{
    char *s = NULL;
    if (lua_getfield(L, idx, key) == LUA_TSTRING)
        s = xstrdup(lua_tostring(L, -1));
    lua_pop(L, 1);
    return s;
}

/* Copies the routes of the info table on top of the stack into t (checked by
 * contract.lua). */
static void info_routes(lua_State *L, tools_info *t)
{
    lua_getfield(L, -1, "routes");
    size_t n = lua_istable(L, -1) ? (size_t)lua_rawlen(L, -1) : 0;
    tools_route *r = n ? xcalloc(n, sizeof *r) : NULL;
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        r[i].path = opt_field(L, -1, "path");
        r[i].body = opt_field(L, -1, "body");
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    t->routes = r;
    t->n_routes = n;
}

/* Copies host.info(name) and the per-language list entries into c->info. */
static int info_p(lua_State *L)
{
    load_ctx *c = lua_touserdata(L, 1);
    tools_info *t = c->info;
    int l;
    lua_Integer i, n;
    char err[256];
    buf b = BUF_INIT;

    push_host_fn(L, c->g, "info");
    lua_pushstring(L, c->f->name);
    lua_call(L, 1, 1);
    t->name = opt_field(L, -1, "name");
    t->version = opt_field(L, -1, "version");
    t->kind = opt_field(L, -1, "kind");
    t->group = opt_field(L, -1, "group");
    t->gate = opt_field(L, -1, "gate");
    /* the one evaluation of the gate: direct calls read gate_open, ctx.invoke and
     * ctx.list_tools the same answer handed to host.set_gate */
    t->gate_open = conf_gate_open(c->g->cfg->settings, t->gate);
    if (t->gate) {
        push_host_fn(L, c->g, "set_gate");
        lua_pushstring(L, c->f->name);
        lua_pushboolean(L, t->gate_open);
        lua_call(L, 2, 0);
    }
    t->rest_alias = opt_field(L, -1, "rest_alias");
    if (!t->name)
        t->name = xstrdup(c->f->name);
    if (!t->version)
        t->version = xstrdup("");
    if (!t->kind)
        t->kind = xstrdup("read");
    lua_getfield(L, -1, "order");
    t->order = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 0;
    lua_pop(L, 1);
    lua_getfield(L, -1, "toon");
    t->toon = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, -1, "surfaces");
    n = lua_istable(L, -1) ? (lua_Integer)lua_rawlen(L, -1) : 0;
    for (i = 1; i <= n; i++) {
        const char *s;
        lua_rawgeti(L, -1, i);
        s = lua_tostring(L, -1);
        if (s && strcmp(s, "mcp") == 0)
            t->surfaces |= SURFACE_MCP;
        else if (s && strcmp(s, "compact") == 0)
            t->surfaces |= SURFACE_COMPACT;
        else if (s && strcmp(s, "rest") == 0)
            t->surfaces |= SURFACE_REST;
        else if (s && strcmp(s, "ptc") == 0)
            t->surfaces |= SURFACE_PTC;
        else if (s && strcmp(s, "proxy") == 0)
            t->surfaces |= SURFACE_PROXY;
        else if (s && strcmp(s, "gateway") == 0)
            t->surfaces |= SURFACE_GATEWAY;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    info_routes(L, t);
    lua_pop(L, 1);
    for (l = 0; l < 2 * LANG_COUNT; l++) {
        int compact = l >= LANG_COUNT, lang = l % LANG_COUNT;
        const char **slot = compact ? &t->compact_json[lang] : &t->list_json[lang];
        const char *same = !c->same  ? NULL
                           : compact ? c->same->compact_json[lang]
                                     : c->same->list_json[lang];
        if (same) {
            /* Same file, same runtime: the entry would come out byte for byte the same. */
            *slot = xstrdup(same);
            continue;
        }
        push_host_fn(L, c->g, "list_entry");
        lua_pushstring(L, c->f->name);
        lua_pushstring(L, lang_tag(lang));
        lua_pushboolean(L, compact);
        lua_call(L, 3, 1);
        buf_reset(&b);
        if (cljson_encode(L, -1, &b, 1, err, sizeof err) != 0) {
            buf_free(&b);
            return luaL_error(L, "tools/list entry: %s", err);
        }
        lua_pop(L, 1);
        *slot = xstrndup(b.data ? b.data : "", b.len);
    }
    buf_free(&b);
    return 0;
}

static int check_set_p(lua_State *L)
{
    load_ctx *c = lua_touserdata(L, 1);
    push_host_fn(L, c->g, "check_set");
    lua_call(L, 0, 2);
    if (lua_isnil(L, -2))
        add_error_list(L, -1, c->errs, c->dir, NULL, 1);
    return 0;
}

static int cmp_info(const void *a, const void *b)
{
    const tools_info *x = a, *y = b;
    if (x->order != y->order) {
        if (x->order == 0)
            return 1;
        if (y->order == 0)
            return -1;
        return x->order < y->order ? -1 : 1;
    }
    return strcmp(x->name, y->name);
}

/* ---- the lifecycle tools (lua/lifecycle.lua) ---- */

static const char *const LIFECYCLE_TOOLS[] = {"bkn_start_interaction", "bkn_finish_interaction"};

/* Fills g->lifecycle_json from lifecycle.list_entry. */
static int lifecycle_entries_p(lua_State *L)
{
    tools_gen *g = lua_touserdata(L, 1);
    char err[256];
    buf b = BUF_INIT;
    lvm_require(L, "lifecycle");
    for (int l = 0; l < LANG_COUNT; l++) {
        buf_reset(&b);
        for (size_t i = 0; i < sizeof LIFECYCLE_TOOLS / sizeof *LIFECYCLE_TOOLS; i++) {
            lua_getfield(L, -1, "list_entry");
            lua_pushstring(L, LIFECYCLE_TOOLS[i]);
            lua_pushstring(L, lang_tag((lang_id)l));
            lua_call(L, 2, 1);
            if (i)
                buf_putc(&b, ',');
            if (cljson_encode(L, -1, &b, 1, err, sizeof err) != 0) {
                buf_free(&b);
                return luaL_error(L, "%s entry: %s", LIFECYCLE_TOOLS[i], err);
            }
            lua_pop(L, 1);
        }
        g->lifecycle_json[l] = xstrndup(b.data ? b.data : "", b.len);
    }
    buf_free(&b);
    return 0;
}

const char *tools_gen_lifecycle_json(const tools_gen *g, lang_id lang)
{
    return g->lifecycle_json[lang];
}

typedef struct lifecycle_check {
    const char *name;
    const json_value *args;
    lang_id lang;
    int host_key;
    json_value *refusal;
    char err[256];
} lifecycle_check;

static int lifecycle_check_p(lua_State *L)
{
    lifecycle_check *c = lua_touserdata(L, 1);
    lvm_require(L, "lifecycle");
    lua_getfield(L, -1, "check");
    lua_pushstring(L, c->name);
    if (c->args)
        cljson_push(L, c->args);
    else
        lua_newtable(L);
    lua_pushstring(L, lang_tag(c->lang));
    lua_pushboolean(L, c->host_key);
    lua_call(L, 4, 1);
    if (!lua_isnil(L, -1) && !(c->refusal = cljson_to_value(L, -1, c->err, sizeof c->err)))
        return luaL_error(L, "refusal: %s", c->err);
    return 0;
}

int tools_gen_lifecycle_check(tools_gen *g, const char *name, const json_value *args, lang_id lang,
                              int host_key, json_value **refusal, char *err, size_t errlen)
{
    lifecycle_check c = {name, args, lang, host_key, NULL, ""};
    lvm_budget budget;
    char *msg = NULL;
    memset(&budget, 0, sizeof budget);
    budget.instr_limit = g->cfg->instr_budget;
    budget.mem_limit = g->cfg->mem_cap_bytes;
    lvm_budget_slice(&budget, g->cfg->max_run_ms);
    lvm_set_budget(g->vm, &budget);
    int rc = lvm_cpcall(lvm_state(g->vm), lifecycle_check_p, &c, &msg);
    lvm_set_budget(g->vm, NULL);
    *refusal = c.refusal;
    if (rc != 0) {
        snprintf(err, errlen, "lifecycle check: %s", msg ? msg : "failed");
        json_free(c.refusal);
        *refusal = NULL;
    }
    free(msg);
    return rc != 0 ? -1 : c.refusal != NULL;
}

void tools_lib_dir(const char *dir, char **out)
{
    *out = xmalloc(strlen(dir) + 6);
    sprintf(*out, "%s/_lib", dir);
}

static int lua_file_filter(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    return n > 4 && e->d_name[0] != '.' && strcmp(e->d_name + n - 4, ".lua") == 0;
}

/* Appends "name sha256\n" for every dir/<name>.lua, in name order. */
static void digest_dir(const char *dir, buf *out)
{
    struct dirent **list = NULL;
    int n = scandir(dir, &list, lua_file_filter, alphasort);
    for (int i = 0; i < n; i++) {
        char *path = xmalloc(strlen(dir) + strlen(list[i]->d_name) + 2);
        char *text = NULL, h[65];
        size_t len = 0;
        sprintf(path, "%s/%s", dir, list[i]->d_name);
        if (read_file_max(path, TOOLS_MAX_FILE, &text, &len) == 0) {
            sha256_hex(text, len, h);
            buf_printf(out, "%s %s\n", list[i]->d_name, h);
        }
        free(text);
        free(path);
        free(list[i]);
    }
    free(list);
}

/* Digest of everything a tool's catalogue entry can depend on besides its own file:
 * the trusted runtime (lua/) and the shared helpers (tools/_lib/). */
static void runtime_digest(const char *lua_dir, const char *lib_dir, char out[65])
{
    buf b = BUF_INIT;
    buf_puts(&b, "lua\n");
    digest_dir(lua_dir, &b);
    buf_puts(&b, "_lib\n");
    digest_dir(lib_dir, &b);
    sha256_hex(b.data ? b.data : "", b.len, out);
    buf_free(&b);
}

static const tools_info *find_info(const tools_gen *g, const char *name)
{
    for (size_t i = 0; g && i < g->n; i++)
        if (!strcmp(g->infos[i].name, name))
            return &g->infos[i];
    return NULL;
}

tools_gen *tools_gen_build(const tools_config *cfg, const char *dir, const tools_gen *prev,
                           buf *errs)
{
    tools_gen *g = xcalloc(1, sizeof *g);
    src_file *files = NULL;
    size_t nfiles = 0, i;
    char *lib_dir = NULL;
    char *err = NULL;
    lvm_budget budget;
    size_t before = errs->len;
    load_ctx c;

    g_live_gens++;
    g->cfg = cfg;
    g->refs = 1;
    g->host_ref = LUA_NOREF;
    if (scan_dir(dir, &files, &nfiles, errs) != 0)
        goto done;
    if (nfiles == 0 && errs->len == before) {
        buf_printf(errs, "%s: no tool files (*.lua) found\n", dir);
        goto done;
    }
    tools_lib_dir(dir, &lib_dir);
    runtime_digest(cfg->lua_dir, lib_dir, g->runtime);
    if (prev && strcmp(prev->runtime, g->runtime) != 0)
        prev = NULL; /* the runtime changed: every entry is rebuilt */
    /* the state may hold a few calls at their cap plus the generation itself */
    g->vm = lvm_new(cfg->lua_dir, lib_dir, cfg->mem_cap_bytes * 8 + ((size_t)256 << 20), &err);
    if (!g->vm) {
        buf_printf(errs, "%s\n", err);
        goto done;
    }
    /* Building is allocation-heavy and short: collect once at the end instead of
     * incrementally all along (measurably faster reloads of large directories). */
    lua_gc(lvm_state(g->vm), LUA_GCSTOP);
    if (lvm_cpcall(lvm_state(g->vm), host_p, g, &err) != 0) {
        buf_printf(errs, "host.lua:1: %s\n", err);
        goto done;
    }
    g->files = xcalloc(nfiles ? nfiles : 1, sizeof *g->files);
    g->infos = xcalloc(nfiles ? nfiles : 1, sizeof *g->infos);
    for (i = 0; i < nfiles; i++) {
        g->files[i].name = xstrdup(files[i].name);
        memcpy(g->files[i].hash, files[i].hash, 65);
        g->nfiles++;
        memset(&c, 0, sizeof c);
        c.g = g;
        c.dir = dir;
        c.f = &files[i];
        c.errs = errs;
        c.line = return_line(files[i].text, files[i].len);
        const char *prev_hash = prev ? tools_gen_file_hash(prev, files[i].name) : NULL;
        c.unchanged = prev_hash && !strcmp(prev_hash, files[i].hash);
        /* a top-level infinite loop must not hang a reload */
        memset(&budget, 0, sizeof budget);
        budget.instr_limit = cfg->instr_budget;
        budget.mem_limit = cfg->mem_cap_bytes;
        lvm_budget_slice(&budget, cfg->max_run_ms * 20); /* loads: operator code, rarer */
        lvm_set_budget(g->vm, &budget);
        if (lvm_cpcall(lvm_state(g->vm), load_file_p, &c, &err) != 0) {
            add_error(errs, dir, files[i].fname, 1, err);
            free(err);
            err = NULL;
        }
        lvm_set_budget(g->vm, NULL);
    }
    /* the rules across files run even when a file failed, over every file that
     * returned a table: one pass reports every error of the directory */
    memset(&c, 0, sizeof c);
    c.g = g;
    c.dir = dir;
    c.errs = errs;
    if (lvm_cpcall(lvm_state(g->vm), check_set_p, &c, &err) != 0) {
        buf_printf(errs, "tools:1: %s\n", err);
        goto done;
    }
    if (errs->len != before)
        goto done;
    for (i = 0; i < nfiles; i++) {
        c.f = &files[i];
        c.info = &g->infos[g->n];
        const char *old_hash = prev ? tools_gen_file_hash(prev, files[i].name) : NULL;
        c.same =
            old_hash && !strcmp(old_hash, files[i].hash) ? find_info(prev, files[i].name) : NULL;
        if (lvm_cpcall(lvm_state(g->vm), info_p, &c, &err) != 0) {
            add_error(errs, dir, files[i].fname, c.line, err);
            free(err);
            err = NULL;
            info_free(c.info);
            memset(c.info, 0, sizeof *c.info);
            continue;
        }
        g->n++;
    }
    qsort(g->infos, g->n, sizeof *g->infos, cmp_info);
    if (lvm_cpcall(lvm_state(g->vm), lifecycle_entries_p, g, &err) != 0)
        buf_printf(errs, "lifecycle.lua:1: %s\n", err);
done:
    if (g->vm) {
        lua_gc(lvm_state(g->vm), LUA_GCRESTART);
        lua_gc(lvm_state(g->vm), LUA_GCCOLLECT);
    }
    free(err);
    free(lib_dir);
    src_files_free(files, nfiles);
    if (errs->len != before) {
        gen_free(g);
        return NULL;
    }
    return g;
}

/* ---- host ---- */

tools_host *tools_host_new(const tools_config *cfg)
{
    tools_host *h = xcalloc(1, sizeof *h);
    config_copy(&h->cfg, &h->ups, cfg);
    h->next_id = 1;
    return h;
}

void tools_host_free(tools_host *h)
{
    if (!h)
        return;
    tools_reload_free(h);
    tools_gen_release(h->current);
    config_free(&h->cfg, h->ups);
    free(h);
}

const char *tools_gen_file_hash(const tools_gen *g, const char *name)
{
    size_t i;
    if (!g)
        return NULL;
    for (i = 0; i < g->nfiles; i++)
        if (strcmp(g->files[i].name, name) == 0)
            return g->files[i].hash;
    return NULL;
}

tools_gen *tools_host_acquire(tools_host *h)
{
    if (!h->current)
        return NULL;
    h->current->refs++;
    return h->current;
}

int tools_check_dir(const tools_config *cfg, const char *dir, char **report)
{
    tools_config copy;
    tools_upstream *ups = NULL;
    buf errs = BUF_INIT;
    tools_gen *g;
    int nerr = 0;
    size_t i;

    config_copy(&copy, &ups, cfg);
    copy.fetch = NULL;
    copy.base = NULL;
    g = tools_gen_build(&copy, dir, NULL, &errs);
    if (g) {
        buf r = BUF_INIT;
        buf_printf(&r, "%s: %zu tools OK", dir, g->n);
        gen_free(g);
        if (report)
            *report = buf_steal(&r, NULL);
        buf_free(&r);
    } else {
        for (i = 0; i < errs.len; i++)
            if (errs.data[i] == '\n')
                nerr++;
        if (nerr == 0)
            nerr = 1;
        if (report)
            *report = buf_steal(&errs, NULL);
    }
    buf_free(&errs);
    config_free(&copy, ups);
    return nerr;
}
