/* lvm_impl.h: what the files of the lvm module share (lvm.c: building the state;
 * lvm_alloc.c: the allocator and its pool; lvm_budget.c: instruction counting, the
 * run-time slice and protected calls; lvm_sandbox.c: the base library replacements,
 * proxies, environments and read-only views; lvm_gen.c: generations and the two
 * requires). Not for other modules: lvm.h is the module's face. */
#ifndef CL_LVM_IMPL_H
#define CL_LVM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "lvm.h"

#define LVM_HOOK_EVERY 1000
#define LVM_DEFAULT_CAP ((size_t)1 << 30)
#define LVM_MAX_SOURCE ((size_t)4 << 20)
/* Growth from which the allocator checks the run-time slice: a large block is filled
 * or copied by one C call (concatenation, string.rep, table.concat, ...) that the
 * instruction hook never sees. */
#define LVM_BIG_ALLOC ((size_t)64 << 10)
/* Charges (hook ticks of LVM_HOOK_EVERY instructions) between two reads of the clock:
 * a read every 4000 instructions or so, tens of microseconds apart. Power of 2. */
#define LVM_CLOCK_EVERY 4u

/* The state's small blocks (up to LVM_POOL_MAX_BLOCK bytes, in classes of
 * LVM_POOL_STEP) are kept on per-class free lists when Lua frees them, up to
 * LVM_POOL_BYTES plus LVM_POOL_PER_CALL for each call in flight (lvm_call_begin)
 * in all, and reused: a call allocates and frees a few hundred small objects, each
 * a malloc/free pair otherwise. With many calls in flight the collector frees the
 * garbage of all of them at once; kept, it serves the next calls instead of going
 * back to malloc (whose free lists, under that load, cost hundreds of instructions
 * per block). When calls end, the blocks over the lower bound go back to malloc.
 * Sanitizer builds go to malloc directly so that a use after free is still caught. */
#define LVM_POOL_STEP 16
#define LVM_POOL_MAX_BLOCK 1024
#define LVM_POOL_CLASSES (LVM_POOL_MAX_BLOCK / LVM_POOL_STEP)
#define LVM_POOL_BYTES ((size_t)256 << 10)
#define LVM_POOL_PER_CALL ((size_t)1 << 20)
#define LVM_POOL_MAX ((size_t)32 << 20)
#if defined(__SANITIZE_ADDRESS__)
#define LVM_POOL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LVM_POOL 0
#endif
#endif
#ifndef LVM_POOL
#define LVM_POOL 1
#endif

typedef struct pool_block {
    struct pool_block *next;
} pool_block;

struct lvm {
    lua_State *L;
    pool_block *pool[LVM_POOL_CLASSES]; /* owned: free blocks of class i + 1 */
    size_t pool_bytes;
    size_t calls; /* in flight: lvm_call_begin minus lvm_call_end */
    size_t total;
    size_t cap;
    lvm_budget *cur;
    lua_State *entry;   /* the thread lvm_enter named */
    lua_State *running; /* the thread running now (coroutine.resume/wrap switch it) */
    int armed;          /* the slice timer runs for cur (live_vm is this state) */
    int64_t entered_us;
    int64_t count_at_us; /* monotonic us at which counting starts (0: counting) */
    int64_t stop_at_us;  /* monotonic us past which the slice is spent (0: no slice) */
};

/* The slots of a generation table (lvm_gen.c). */
enum {
    GEN_SOURCES = 1, /* module name -> {text, chunkname} */
    GEN_LOADED,      /* module name -> raw value (runtime chunks and tools/_lib) */
    GEN_PUBLIC,      /* public module name -> read-only facade given to tool code */
    GEN_TOOL_ENV,    /* globals behind a tool chunk's _ENV (public require) */
    GEN_RT_ENV,      /* globals behind a runtime chunk's _ENV (private require) */
};

/* Registry keys (addresses are unique; defined in lvm.c). */
extern const char KEY_LIBS; /* allow-listed globals but require and _G */
extern const char KEY_READONLY; /* weak set of tables rawset must refuse */
extern const char KEY_PROXIES; /* weak real -> proxy */
extern const char KEY_GEN; /* the current generation (see push_gen) */
extern const char KEY_LOADING; /* sentinel for circular requires */
extern const char KEY_VIEWS; /* weak view -> the table it shows */
extern const char KEY_VIEWOF; /* weak table -> its view */
extern const char KEY_VIEWMT; /* the metatable every view shares */

/* Shared between the module's files (each defined in one of them). */
void *lvm_alloc(void *ud, void *ptr, size_t osize, size_t nsize);

/* lvm_of for the module's own files: inlined (it runs on every protected call,
 * coroutine switch and charge). */
static inline lvm *lvm_of_state(lua_State *L)
{
    void *ud = NULL;
    /* a state lvm_new did not make (the sandbox module loaded into busted) has none */
    return lua_getallocf(L, &ud) == lvm_alloc ? ud : NULL;
}

int lvm_is_readonly(lua_State *L, int idx);
int lvm_load_in(lua_State *L, int gen, const char *text, size_t len, const char *chunkname,
                int runtime);
void lvm_mark_readonly(lua_State *L, int idx);
void lvm_pool_drain(lvm *vm);
int lvm_rt_readonly(lua_State *L);
void lvm_seal(lua_State *L, lua_CFunction newindex);
int lvm_env_unknown(lua_State *L);
int lvm_ro_newindex(lua_State *L);
int lvm_rt_is_view(lua_State *L);
int lvm_rt_metatable(lua_State *L);
int lvm_rt_object_size(lua_State *L);
int lvm_sb_cowrap_catch(lua_State *L);
int lvm_sb_load(lua_State *L);
int lvm_sb_pcall(lua_State *L);
int lvm_sb_rawset(lua_State *L);
int lvm_sb_require_private(lua_State *L);
int lvm_sb_require_public(lua_State *L);
int lvm_sb_running(lua_State *L);
int lvm_sb_setmetatable(lua_State *L);
int lvm_sb_type(lua_State *L);
int lvm_sb_wrap(lua_State *L);
int lvm_sb_xpcall(lua_State *L);
int lvm_view_index(lua_State *L);
int lvm_view_len(lua_State *L);
int lvm_view_newindex(lua_State *L);
int lvm_view_pairs(lua_State *L);

void lvm_set_env_upvalue(lua_State *L, int fidx, int envidx);
int lvm_env_newindex(lua_State *L);
int lvm_must_rethrow(lua_State *L, int status);
void lvm_restore_running(lua_State *L, lua_State *prev);
lua_State *lvm_switch_running(lua_State *L, lua_State *co);

#endif
