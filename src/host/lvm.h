/* lvm: one sandboxed lua_State (docs/tools-host.md).
 *
 * A state opens only base, string, table, math, utf8 and coroutine, plus an `os`
 * reduced to time/clock/date and the preloaded "cljson". There is no io, package
 * or debug; dofile/loadfile/print/collectgarbage are gone; `load` takes text chunks
 * only and needs an explicit env; pcall/xpcall/coroutine.resume/coroutine.close
 * re-raise budget and memory kills; rawset refuses read-only tables; setmetatable
 * refuses metatables with __gc (finalizers would run outside any budget).
 *
 * Every chunk (tool file, lua/ module, tools/_lib module) runs with its own _ENV:
 * reading an unknown global or assigning any global raises. Shared library tables
 * (string, table, math, ..., required modules) are seen through read-only proxies.
 *
 * `require` resolves only against a snapshot taken at lvm_new: lua_dir/<name>.lua
 * and lib_dir/<x>.lua as "_lib.<x>" (flat directories), plus "cljson" and the
 * allow-listed library names. Later edits on disk never leak into a live state.
 * There are two requires: runtime chunks (lua/) get every module; tool chunks (tool
 * files and tools/_lib) get only the public ones - cljson, cltoon, "_lib.<x>", the
 * libraries, and read-only facades of catalog, errors, ptc and sqlguard (a fixed
 * list of fields each, see PUBLIC_MODULES); any other lua/ module is refused as
 * private to the runtime. lvm_load gives a tool chunk's _ENV.
 *
 * Memory: one allocator per state that tracks bytes, refuses growth past the state
 * cap, and charges growth to the current budget (lvm_set_budget) while a call runs.
 * Over budget, allocation fails softly (LUA_ERRMEM) and the kill is sticky.
 * Instructions: a count hook charges the current budget; past the limit it raises
 * "instruction budget exceeded" and keeps raising at every tick (sticky). The hook
 * makes the VM trap on every instruction, so it is installed lazily: a budget with
 * uncounted_us > 0 first runs that much Lua wall-clock time (summed over its entries)
 * without it; then a one-shot timer signal installs the hook on the running thread
 * (coroutine.resume/wrap keep track of it) and every later entry of that budget
 * counts from its first instruction.
 * Run time: a budget may carry a slice end on the coarse monotonic clock
 * (lvm_budget_slice, set before each resume); the same hook stops the call once the
 * clock passes it ("run time limit exceeded", sticky), so no single resume holds the
 * event loop much longer than the slice. The check reads only the budget and the
 * clock, never how long the hook has been installed: the hook may be set late (after
 * a first wall-clock slice) without changing what it enforces. The lazy-count timer
 * also fires at the slice end: it marks the budget expired and makes the hook fire at
 * the next instruction, so a loop of long C calls stops after the one running.
 * Pattern matching (string.find/match/gmatch/gsub, lpattern.c) and the library
 * functions whose work allocation does not bound (lbounded.c: string.rep/upper/
 * lower/reverse, table.insert/remove/move/concat/unpack/sort, utf8.len) charge the
 * same budget through lvm_charge as they work.
 * After a stop nothing of the tool runs (Lua leaves hooks off on the thread the hook
 * raised on, until a pcall boundary restores them): xpcall's message handler is
 * skipped, coroutine.wrap leaves a coroutine that died of a stop unclosed (its
 * __close handlers would run with hooks off), coroutine.resume/close refuse; __gc is
 * refused at setmetatable (finalizers always run with hooks off).
 *
 * Ownership: lvm_new returns a state the caller frees with lvm_free. The budget
 * passed to lvm_set_budget is borrowed until it is replaced or cleared. */
#ifndef CL_LVM_H
#define CL_LVM_H

#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#include <lua.h>

/* The fields of a tool call's ctx that the call module makes on their first read
 * (most calls read none), listed once here: call.c has one maker per name
 * (ctx_make_<name>, index i from 1 in this order for host.ctx_fn), and every
 * generation's runtime finds the names, in this order, in clruntime.ctx_fields, from
 * which lua/host.lua adds them to its own first-read fields (and to the list a
 * read-only view's pairs makes first). */
#define LVM_CTX_FIELDS(X) \
    X(log)                \
    X(now_ms)             \
    X(generation)         \
    X(deadline_ms)        \
    X(request_id)         \
    X(principal)          \
    X(request)            \
    X(surface)            \
    X(config)

enum { LVM_KILL_NONE = 0, LVM_KILL_INSTR = 1, LVM_KILL_MEM = 2, LVM_KILL_TIME = 3 };

typedef struct lvm_budget {
    long instr_limit; /* VM instructions; <= 0 = unlimited */
    long instr_used;
    size_t mem_limit; /* bytes of net growth charged while current; 0 = unlimited */
    size_t mem_used;
    int64_t slice_end_ms; /* lvm_coarse_ms() past which the run stops; 0 = no limit */
    unsigned ticks;       /* charges so far; the clock is read every LVM_CLOCK_EVERY */
    int killed;           /* LVM_KILL_*; once set it stays set */
    /* Wall-clock microseconds of Lua run time (summed over entries) before
     * instructions are counted; 0 = count from the first instruction. */
    long uncounted_us;
    volatile sig_atomic_t counting; /* instructions are being counted (set by lvm) */
    volatile sig_atomic_t expired;  /* the slice's end has passed (set by lvm's timer) */
    int co_exposed; /* coroutine.running gave the entry thread to Lua (set by lvm) */
} lvm_budget;

typedef struct lvm lvm;

/* lua_dir must exist; lib_dir may be NULL or missing. state_cap: total bytes of the
 * state (0 = 1 GiB). On error returns NULL and *err (caller frees) says why. */
lvm *lvm_new(const char *lua_dir, const char *lib_dir, size_t state_cap, char **err);
void lvm_free(lvm *vm);
lua_State *lvm_state(lvm *vm);
lvm *lvm_of(lua_State *L); /* any thread of the state */
size_t lvm_mem_total(const lvm *vm);
/* Bytes of freed small blocks the state keeps for reuse (bounded; 0 in sanitizer
 * builds, where every block goes back to malloc). */
size_t lvm_pool_bytes(const lvm *vm);
/* A call on this state starts / has ended: the bound of the kept blocks grows with
 * the calls in flight, and lvm_call_end hands back what exceeds the lower bound. */
void lvm_call_begin(lvm *vm);
void lvm_call_end(lvm *vm);

/* Makes b the budget charged by the allocator and the hook, with `on` the thread
 * about to run Lua (NULL: the main thread); replaces any current budget. */
void lvm_enter(lvm *vm, lvm_budget *b, lua_State *on);
/* Ends the current budget's run: no budget is charged until the next enter. */
void lvm_leave(lvm *vm);
/* lvm_enter(vm, b, NULL), or lvm_leave when b is NULL. */
void lvm_set_budget(lvm *vm, lvm_budget *b);
lvm_budget *lvm_budget_current(lvm *vm);

/* Monotonic milliseconds from the coarse clock (a tick or so of resolution, cheap). */
int64_t lvm_coarse_ms(void);
/* Starts a run slice of ms milliseconds on b (ms <= 0: no run-time limit). */
void lvm_budget_slice(lvm_budget *b, long ms);
/* Charges n units of work (about n VM instructions) to the current budget and checks
 * the run-time slice; raises the budget's kill error when either is spent. No-op
 * without a current budget. */
void lvm_charge(lua_State *L, long n);
/* The kill's message ("instruction budget exceeded", ...). */
const char *lvm_kill_text(int killed);

/* Message handler: appends a traceback to the error message. */
int lvm_traceback(lua_State *L);

/* Runs f(ud) as a protected call on L with nothing else on the stack changed.
 * Returns 0, or -1 with *err (caller frees; NULL allowed) = error message. */
int lvm_cpcall(lua_State *L, lua_CFunction f, void *ud, char **err);

/* The functions below may raise: call them from protected code. */

/* Loads a text chunk and gives it a fresh sandbox _ENV; pushes the function.
 * Returns 0, or -1 with the error message pushed instead. */
int lvm_load(lua_State *L, const char *text, size_t len, const char *chunkname);
/* Pushes the raw value of module `name` (loading it once per state). Raises. */
void lvm_require(lua_State *L, const char *name);
/* Pushes a read-only proxy of the table at idx (the same proxy every time). */
void lvm_push_proxy(lua_State *L, int idx);
/* Pushes a deep read-only view of the table at idx (the same view every time; tables
 * read through it come back as views; nothing is copied). Other values are pushed
 * as they are. The state keeps the view -> table link (weakly). */
void lvm_push_view(lua_State *L, int idx);

/* The sandbox as a Lua C module for a foreign state (busted): see lvm.c. */
int luaopen_clsandbox(lua_State *L);

/* Generation internals shared by tools.c and call.c (not part of tools.h). */
struct tools_gen;
struct tools_config;
lvm *tools_gen_vm(struct tools_gen *g);
int tools_gen_host_ref(struct tools_gen *g); /* registry ref of lua/host.lua's table */
const struct tools_config *tools_gen_config(struct tools_gen *g);
void tools_gen_ref(struct tools_gen *g);
size_t tools_gen_live(void); /* generations not yet closed (tests, metrics) */

#endif
