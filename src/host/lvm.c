/* lvm: one sandboxed lua_State. See lvm.h. */
#define _GNU_SOURCE /* gettid, SIGEV_THREAD_ID */
#include "lvm.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "json_lua.h"
#include "lbounded.h"
#include "lpattern.h"
#include "texts.h"
#include "toon_lua.h"
#include "util.h"

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

/* Registry keys (addresses are unique). */
static const char KEY_LIBS = 'g';     /* allow-listed globals but require and _G */
static const char KEY_READONLY = 'r'; /* weak set of tables rawset must refuse */
static const char KEY_PROXIES = 'p';  /* weak real -> proxy */
static const char KEY_GEN = 'n';      /* the current generation (see push_gen) */
static const char KEY_LOADING = 'i';  /* sentinel for circular requires */
static const char KEY_VIEWS = 'v';    /* weak view -> the table it shows */
static const char KEY_VIEWOF = 'o';   /* weak table -> its view */
static const char KEY_VIEWMT = 'm';   /* the metatable every view shares */

/* The class of a block of n bytes (1..LVM_POOL_CLASSES), 0 for a large one. */
static inline unsigned pool_class(size_t n)
{
    return LVM_POOL && n <= LVM_POOL_MAX_BLOCK ? (unsigned)((n + LVM_POOL_STEP - 1) / LVM_POOL_STEP)
                                               : 0;
}

static inline size_t pool_bound(const lvm *vm)
{
    return vm->calls >= (LVM_POOL_MAX - LVM_POOL_BYTES) / LVM_POOL_PER_CALL
               ? LVM_POOL_MAX
               : LVM_POOL_BYTES + vm->calls * LVM_POOL_PER_CALL;
}

static void *pool_get(lvm *vm, size_t n)
{
    unsigned c = pool_class(n);
    if (!c)
        return malloc(n);
    pool_block *b = vm->pool[c - 1];
    if (!b)
        return malloc((size_t)c * LVM_POOL_STEP);
    vm->pool[c - 1] = b->next;
    vm->pool_bytes -= (size_t)c * LVM_POOL_STEP;
    return b;
}

/* p: a block of at least n bytes from pool_get (or of a class above n's). */
static void pool_put(lvm *vm, void *p, size_t n)
{
    unsigned c = pool_class(n);
    size_t size = (size_t)c * LVM_POOL_STEP;
    if (!c || vm->pool_bytes + size > pool_bound(vm)) {
        free(p);
        return;
    }
    pool_block *b = p;
    b->next = vm->pool[c - 1];
    vm->pool[c - 1] = b;
    vm->pool_bytes += size;
}

/* Returns kept blocks to malloc, the largest classes first, until at most keep
 * bytes are left. */
static void pool_trim(lvm *vm, size_t keep)
{
    for (unsigned c = LVM_POOL_CLASSES; c > 0 && vm->pool_bytes > keep; c--) {
        while (vm->pool[c - 1] && vm->pool_bytes > keep) {
            pool_block *b = vm->pool[c - 1];
            vm->pool[c - 1] = b->next;
            vm->pool_bytes -= (size_t)c * LVM_POOL_STEP;
            free(b);
        }
    }
}

static void pool_drain(lvm *vm)
{
    pool_trim(vm, 0);
}

/* realloc through the pool: old is the block's size as Lua states it. A shrink
 * never fails (Lua relies on that): without memory for a smaller block the old one
 * stays, filed later under the smaller size (it is at least that large). */
static void *pool_realloc(lvm *vm, void *ptr, size_t old, size_t nsize)
{
    unsigned oc = ptr ? pool_class(old) : 0, nc = pool_class(nsize);
    if (!ptr)
        return pool_get(vm, nsize);
    if (oc && oc == nc)
        return ptr;
    if (!oc && !nc) {
        void *p = realloc(ptr, nsize);
        return p ? p : nsize <= old ? ptr : NULL;
    }
    void *p = pool_get(vm, nsize);
    if (!p)
        return nsize <= old ? ptr : NULL;
    memcpy(p, ptr, old < nsize ? old : nsize);
    pool_put(vm, ptr, old);
    return p;
}

static void *lvm_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    lvm *vm = ud;
    size_t old = ptr ? osize : 0;
    lvm_budget *b = vm->cur;
    void *p;

    if (nsize == 0) {
        if (ptr)
            pool_put(vm, ptr, old);
        vm->total -= old;
        if (b)
            b->mem_used = b->mem_used > old ? b->mem_used - old : 0;
        return NULL;
    }
    if (nsize > old) {
        size_t grow = nsize - old;
        if (vm->total + grow > vm->cap)
            return NULL;
        /* Only refuse: Lua retries after an emergency GC, so the kill is recorded
         * when LUA_ERRMEM actually surfaces (pcall wrappers, call.c). */
        if (b && b->mem_limit && (b->killed == LVM_KILL_MEM || b->mem_used + grow > b->mem_limit))
            return NULL;
        /* Past the slice a large growth fails (LUA_ERRMEM) and records a time kill,
         * which the pcall wrappers and call.c treat like any other kill. Sticky: Lua
         * retries a failed allocation after an emergency collection. */
        if (b && grow >= LVM_BIG_ALLOC && b->slice_end_ms &&
            (b->killed == LVM_KILL_TIME ||
             (!b->killed && (b->expired || lvm_coarse_ms() > b->slice_end_ms)))) {
            b->killed = LVM_KILL_TIME;
            return NULL;
        }
    }
    p = pool_realloc(vm, ptr, old, nsize);
    if (!p)
        return NULL;
    vm->total = vm->total - old + nsize;
    if (b) {
        if (nsize > old)
            b->mem_used += nsize - old;
        else
            b->mem_used = b->mem_used > old - nsize ? b->mem_used - (old - nsize) : 0;
    }
    return p;
}

lvm *lvm_of(lua_State *L)
{
    void *ud = NULL;
    /* a state lvm_new did not make (the sandbox module loaded into busted) has none */
    return lua_getallocf(L, &ud) == lvm_alloc ? ud : NULL;
}

lua_State *lvm_state(lvm *vm)
{
    return vm->L;
}

size_t lvm_mem_total(const lvm *vm)
{
    return vm->total;
}

size_t lvm_pool_bytes(const lvm *vm)
{
    return vm->pool_bytes;
}

void lvm_call_begin(lvm *vm)
{
    vm->calls++;
}

void lvm_call_end(lvm *vm)
{
    if (vm->calls)
        vm->calls--;
    /* No call in flight: keep one call's worth, hand back the rest. */
    if (!vm->calls && vm->pool_bytes > LVM_POOL_BYTES + LVM_POOL_PER_CALL)
        pool_trim(vm, LVM_POOL_BYTES + LVM_POOL_PER_CALL);
}

/* ---- lazy instruction counting and the slice end ----
 *
 * A count hook makes the VM trap on every instruction (luaG_traceexec), which costs
 * more than most tool calls' own work. So a budget may start uncounted: the hook is
 * installed only once the call has run Lua for uncounted_us of wall-clock time in
 * total. A one-shot POSIX timer, aimed at the loop thread, raises LVM_SLICE_SIGNAL
 * at that point; its handler installs the hook on the running thread (lua_sethook is
 * safe in a signal handler). From then on the budget counts and every later entry
 * installs the hook at once. coroutine.resume and coroutine.wrap keep `running`
 * current, so a loop inside a tool's own coroutine is reached too.
 *
 * The same timer marks the end of the run-time slice: its handler then sets the
 * budget's `expired` and makes the hook fire at the very next instruction, so the
 * stop does not wait for a thousand instructions that may each be a long C call (a
 * comparison of two long strings, utf8.len of a large one). C loops that charge the
 * budget (lvm_charge: pattern matching, lbounded's library functions) see `expired`
 * at their next charge; the allocator refuses large blocks once it is set. Without
 * the timer the hook and the charges read the clock themselves. */
#define LVM_SLICE_SIGNAL SIGRTMIN

static struct {
    int ready; /* 1 ok, -1 unavailable (counting starts at once), 0 not tried */
    timer_t id;
} slice_timer;
static lvm *volatile live_vm; /* the state running Lua under a timed budget */
/* When the armed timer fires (monotonic us; 0 = not armed). Leaving does not disarm
 * it - a signal that finds no live_vm is ignored - so an entry arms it only when it
 * would fire too late for this budget or has fired already: one timer_settime per
 * few entries instead of two per entry. Firing early only makes the handler re-arm
 * it for the next due point. */
static int64_t timer_due_us;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void lvm_hook(lua_State *L, lua_Debug *ar);
static int64_t mono_us(void);
static void slice_timer_set(long us);

/* Arms the timer for `due` (monotonic us) unless it fires before then already. */
static void timer_want(int64_t now, int64_t due)
{
    if (timer_due_us <= now || timer_due_us > due) {
        slice_timer_set(due > now ? (long)(due - now) : 1);
        timer_due_us = due;
    }
}

static void on_slice_signal(int sig)
{
    int saved = errno;
    lvm *vm = live_vm;
    (void)sig;
    if (vm && vm->cur && vm->running) {
        lvm_budget *b = vm->cur;
        int64_t now = mono_us(), next = 0;
        timer_due_us = 0; /* this shot is spent */
        if (!b->counting) {
            if (now >= vm->count_at_us) {
                b->counting = 1;
                lua_sethook(vm->running, lvm_hook, LUA_MASKCOUNT, LVM_HOOK_EVERY);
            } else {
                next = vm->count_at_us;
            }
        }
        if (vm->stop_at_us && now >= vm->stop_at_us) {
            b->expired = 1;
            lua_sethook(vm->running, lvm_hook, LUA_MASKCOUNT, 1);
        } else if (vm->stop_at_us && (!next || vm->stop_at_us < next)) {
            next = vm->stop_at_us;
        }
        if (next)
            timer_want(now, next);
    }
    errno = saved;
}

/* Timers do not survive fork: a worker makes its own on first use. */
static void slice_timer_forget(void)
{
    slice_timer.ready = 0;
    live_vm = NULL;
    timer_due_us = 0;
}

static void slice_timer_atfork(void)
{
    pthread_atfork(NULL, NULL, slice_timer_forget);
}

static int slice_timer_ready(void)
{
    struct sigaction sa;
    struct sigevent sev;
    if (slice_timer.ready)
        return slice_timer.ready > 0;
    pthread_once(&atfork_once, slice_timer_atfork);
    slice_timer.ready = -1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_slice_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(LVM_SLICE_SIGNAL, &sa, NULL) != 0)
        return 0;
    /* a mask inherited from whoever started us must not hold the signal back */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, LVM_SLICE_SIGNAL);
    if (pthread_sigmask(SIG_UNBLOCK, &set, NULL) != 0)
        return 0;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = LVM_SLICE_SIGNAL;
    sev._sigev_un._tid = gettid();
    if (timer_create(CLOCK_MONOTONIC, &sev, &slice_timer.id) != 0)
        return 0;
    slice_timer.ready = 1;
    return 1;
}

static void slice_timer_set(long us)
{
    struct itimerspec it;
    memset(&it, 0, sizeof it);
    it.it_value.tv_sec = us / 1000000;
    it.it_value.tv_nsec = (us % 1000000) * 1000;
    timer_settime(slice_timer.id, 0, &it, NULL);
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Installs the count hook unless L has it: setting it again would restart the
 * thread's count, and threads that hand control to each other more often than every
 * LVM_HOOK_EVERY instructions would never reach a tick. */
static void count_on(lua_State *L)
{
    if (lua_gethook(L) != lvm_hook)
        lua_sethook(L, lvm_hook, LUA_MASKCOUNT, LVM_HOOK_EVERY);
}

void lvm_enter(lvm *vm, lvm_budget *b, lua_State *on)
{
    int lazy;
    if (vm->cur)
        lvm_leave(vm);
    vm->cur = b;
    vm->entry = vm->running = on ? on : vm->L;
    if (!b)
        return;
    lazy = !b->counting && b->uncounted_us > 0;
    if ((lazy || b->slice_end_ms) && slice_timer_ready()) {
        int64_t now = mono_us(), due;
        vm->entered_us = now;
        vm->count_at_us = lazy ? now + b->uncounted_us : 0;
        /* the coarse clock passes slice_end_ms within a millisecond after this */
        vm->stop_at_us = b->slice_end_ms ? (b->slice_end_ms + 1) * 1000 : 0;
        due = vm->count_at_us;
        if (vm->stop_at_us && (!due || vm->stop_at_us < due))
            due = vm->stop_at_us;
        timer_want(now, due); /* before live_vm: no handler re-arms it meanwhile */
        vm->armed = 1;
        live_vm = vm;
        if (lazy)
            return;
    }
    b->counting = 1;
    count_on(vm->running);
}

void lvm_leave(lvm *vm)
{
    lvm_budget *b = vm->cur;
    if (vm->armed) {
        live_vm = NULL; /* the timer stays armed: see timer_due_us */
        vm->armed = 0;
        if (b && !b->counting && vm->count_at_us) {
            int64_t used = mono_us() - vm->entered_us;
            b->uncounted_us = used < b->uncounted_us ? b->uncounted_us - (long)used : 0;
        }
    }
    if (b && b->counting) {
        /* the main thread serves every call: it must not keep counting for the next */
        lua_sethook(vm->L, NULL, 0, 0);
        if (vm->entry && vm->entry != vm->L)
            lua_sethook(vm->entry, NULL, 0, 0);
    }
    vm->cur = NULL;
    vm->entry = vm->running = NULL;
}

void lvm_set_budget(lvm *vm, lvm_budget *b)
{
    if (b)
        lvm_enter(vm, b, NULL);
    else
        lvm_leave(vm);
}

/* coroutine.resume / coroutine.wrap: co runs now; returns the thread to restore. */
static lua_State *switch_running(lua_State *L, lua_State *co)
{
    lvm *vm = lvm_of(L);
    lua_State *prev = vm ? vm->running : NULL;
    if (!vm || !vm->cur)
        return prev;
    vm->running = co;
    if (vm->cur->counting)
        count_on(co);
    return prev;
}

static void restore_running(lua_State *L, lua_State *prev)
{
    lvm *vm = lvm_of(L);
    if (!vm || !vm->cur)
        return;
    vm->running = prev;
    if (vm->cur->counting && prev)
        count_on(prev);
}

lvm_budget *lvm_budget_current(lvm *vm)
{
    return vm->cur;
}

const char *lvm_kill_text(int killed)
{
    switch (killed) {
    case LVM_KILL_MEM:
        return "memory limit exceeded";
    case LVM_KILL_TIME:
        return "run time limit exceeded";
    default:
        return "instruction budget exceeded";
    }
}

int64_t lvm_coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void lvm_budget_slice(lvm_budget *b, long ms)
{
    /* +1: the coarse clock may be a tick behind the moment the slice starts */
    b->slice_end_ms = ms > 0 ? lvm_coarse_ms() + ms + 1 : 0;
    b->expired = 0;
}

void lvm_charge(lua_State *L, long n)
{
    lvm *vm = lvm_of(L);
    lvm_budget *b = vm ? vm->cur : NULL;
    if (!b)
        return;
    if (!b->killed) {
        if (b->instr_limit > 0 && (b->instr_used += n) > b->instr_limit)
            b->killed = LVM_KILL_INSTR;
        else if (b->slice_end_ms &&
                 (b->expired || ((++b->ticks & (LVM_CLOCK_EVERY - 1)) == 0 &&
                                 lvm_coarse_ms() > b->slice_end_ms)))
            b->killed = LVM_KILL_TIME;
    }
    if (b->killed)
        luaL_error(L, "%s", lvm_kill_text(b->killed)); /* sticky: raised at every tick */
}

static void lvm_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lvm_charge(L, LVM_HOOK_EVERY);
}

/* Records a memory kill for the running budget when a protected region ended in
 * LUA_ERRMEM, and says whether the error must be re-raised. */
static int must_rethrow(lua_State *L, int status)
{
    lvm *vm = lvm_of(L);
    lvm_budget *b = vm ? vm->cur : NULL;
    if (!b)
        return 0;
    if (status == LUA_ERRMEM && !b->killed)
        b->killed = LVM_KILL_MEM;
    return b->killed != LVM_KILL_NONE;
}

int lvm_traceback(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg)
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    luaL_traceback(L, L, msg, 1);
    return 1;
}

typedef struct cp_args {
    lua_CFunction f;
    void *ud;
} cp_args;

static int cpcall_tramp(lua_State *L)
{
    cp_args *a = lua_touserdata(L, 1);
    lua_CFunction f = a->f;
    lua_settop(L, 0);
    lua_pushlightuserdata(L, a->ud);
    return f(L);
}

int lvm_cpcall(lua_State *L, lua_CFunction f, void *ud, char **err)
{
    cp_args a = {f, ud};
    int top = lua_gettop(L);
    int rc = 0;

    if (err)
        *err = NULL;
    if (!lua_checkstack(L, 4)) {
        if (err)
            *err = xstrdup("Lua stack overflow");
        return -1;
    }
    lua_pushcfunction(L, cpcall_tramp);
    lua_pushlightuserdata(L, &a);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        if (err)
            *err = xstrdup(m ? m : "(error object is not a string)");
        rc = -1;
    }
    lua_settop(L, top);
    return rc;
}

/* ---- base library replacements ---- */

static int finish_pcall(lua_State *L, int status, lua_KContext extra)
{
    if (status != LUA_OK && status != LUA_YIELD) {
        if (must_rethrow(L, status))
            return lua_error(L); /* error object is on top */
        lua_pushboolean(L, 0);
        lua_pushvalue(L, -2);
        return 2;
    }
    return lua_gettop(L) - (int)extra;
}

static int sb_pcall(lua_State *L)
{
    int status;
    luaL_checkany(L, 1);
    lua_pushboolean(L, 1);
    lua_insert(L, 1);
    status = lua_pcallk(L, lua_gettop(L) - 2, LUA_MULTRET, 0, 0, finish_pcall);
    return finish_pcall(L, status, 0);
}

/* xpcall's message handler runs where the error was raised, before any pcall
 * catches it: after a stop raised by the hook, Lua runs it with hooks off (the hook
 * never returned to switch them on again), so a loop in it would never be stopped.
 * The tool's handler (upvalue 1) therefore runs only for errors that are not a stop;
 * after a stop the error object goes on as it is. */
static int sb_msgh(lua_State *L)
{
    lvm *vm = lvm_of(L);
    if (vm && vm->cur && vm->cur->killed)
        return 1;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static int sb_xpcall(lua_State *L)
{
    int status;
    int n = lua_gettop(L);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, sb_msgh, 1);
    lua_replace(L, 2);
    lua_pushboolean(L, 1);
    lua_pushvalue(L, 1);
    lua_rotate(L, 3, 2);
    status = lua_pcallk(L, n - 2, LUA_MULTRET, 2, 2, finish_pcall);
    return finish_pcall(L, status, 2);
}

/* coroutine.resume / coroutine.close catch errors too: re-raise kills. Both run
 * the coroutine's code, so it becomes the running thread meanwhile. */
static int sb_cowrap_catch(lua_State *L)
{
    int n = lua_gettop(L);
    lua_State *co = lua_tothread(L, 1);
    lvm *vm = lvm_of(L);
    lua_State *prev;
    int rc;
    if (vm && vm->cur && vm->cur->killed) /* nothing of the tool runs after a stop */
        return luaL_error(L, "%s", lvm_kill_text(vm->cur->killed));
    prev = co ? switch_running(L, co) : NULL;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    rc = lua_pcall(L, n, LUA_MULTRET, 0);
    if (co)
        restore_running(L, prev);
    if (rc != LUA_OK) {
        must_rethrow(L, rc);
        return lua_error(L); /* argument errors of the library function */
    }
    if (lua_gettop(L) >= 2 && lua_isboolean(L, 1) && !lua_toboolean(L, 1)) {
        const char *m = lua_tostring(L, 2);
        int status = (m && strcmp(m, "not enough memory") == 0) ? LUA_ERRMEM : LUA_ERRRUN;
        if (must_rethrow(L, status)) {
            lua_pushvalue(L, 2);
            return lua_error(L);
        }
    }
    return lua_gettop(L);
}

/* coroutine.wrap's function (upvalue 1: its coroutine), written here rather than
 * the library's: that one closes a coroutine that died of an error, running its
 * pending __close handlers - after a stop raised by the hook, with hooks off for
 * good on that thread, where a loop would never be stopped. After a stop the dead
 * coroutine is left as it is (its to-be-closed variables stay open; the collector
 * frees it). The coroutine is the running thread while it runs. */
static int sb_wrapped(lua_State *L)
{
    lua_State *co = lua_tothread(L, lua_upvalueindex(1));
    int narg = lua_gettop(L), nres, status;
    lua_State *prev;
    if (!lua_checkstack(co, narg))
        return luaL_error(L, "too many arguments to resume");
    lua_xmove(L, co, narg);
    prev = switch_running(L, co);
    status = lua_resume(co, L, narg, &nres);
    restore_running(L, prev);
    if (status == LUA_OK || status == LUA_YIELD) {
        if (!lua_checkstack(L, nres + 1)) {
            lua_pop(co, nres);
            return luaL_error(L, "too many results to resume");
        }
        lua_xmove(co, L, nres);
        return nres;
    }
    if (must_rethrow(L, status)) {
        lua_xmove(co, L, 1);
        return lua_error(L);
    }
    status = lua_status(co);
    if (status != LUA_OK && status != LUA_YIELD) { /* the coroutine died: close it */
        prev = switch_running(L, co);
#if LUA_VERSION_RELEASE_NUM >= 50406
        status = lua_closethread(co, L);
#else
        status = lua_resetthread(co);
#endif
        restore_running(L, prev);
        lua_xmove(co, L, 1);
        if (must_rethrow(L, status))
            return lua_error(L);
    } else {
        lua_xmove(co, L, 1); /* resuming failed (dead, running, too deep) */
    }
    if (status != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
        luaL_where(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
    }
    return lua_error(L);
}

/* coroutine.running: the call's own coroutine, once a tool holds it, must not serve
 * a later call (the tool could resume or close it there), so the budget notes it. */
static int sb_running(lua_State *L)
{
    lvm *vm = lvm_of(L);
    if (vm && vm->cur && vm->entry == L)
        vm->cur->co_exposed = 1;
    lua_pushboolean(L, lua_pushthread(L));
    return 2;
}

static int sb_wrap(lua_State *L)
{
    lua_State *co;
    luaL_checktype(L, 1, LUA_TFUNCTION);
    co = lua_newthread(L);
    lua_pushvalue(L, 1);
    lua_xmove(L, co, 1);
    lua_pushcclosure(L, sb_wrapped, 1);
    return 1;
}

static int is_readonly(lua_State *L, int idx)
{
    int r;
    idx = lua_absindex(L, idx);
    /* A view is known by its metatable (one a tool cannot set): views, made per
     * call, stay out of the weak set, whose rehashes grow with its size. */
    if (lua_getmetatable(L, idx)) {
        lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_VIEWMT);
        r = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
        if (r)
            return 1;
    }
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_READONLY);
    lua_pushvalue(L, idx);
    r = lua_rawget(L, -2) != LUA_TNIL;
    lua_pop(L, 2);
    return r;
}

/* type(v): the base library's, with the names kept as upvalues (no C-string
 * lookup per call; tools and the runtime ask it dozens of times per call). */
static int sb_type(lua_State *L)
{
    int t = lua_type(L, 1);
    luaL_argcheck(L, t != LUA_TNONE, 1, "value expected");
    lua_pushvalue(L, lua_upvalueindex(t + 1));
    return 1;
}

static int sb_rawset(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    luaL_checkany(L, 3);
    if (is_readonly(L, 1))
        return luaL_error(L, "attempt to modify a read-only table");
    lua_settop(L, 3);
    lua_rawset(L, 1);
    return 1;
}

static int sb_setmetatable(lua_State *L)
{
    int t = lua_type(L, 2);
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (is_readonly(L, 1))
        return luaL_error(L, "cannot change the metatable of a read-only table");
    if (t == LUA_TTABLE) {
        /* raw, as Lua reads it: an __index on the metatable must not answer nil for a
         * field it adds meanwhile */
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "__gc metamethods are not allowed in tools");
        lua_pop(L, 1);
    }
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return luaL_error(L, "cannot change a protected metatable");
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

static void set_env_upvalue(lua_State *L, int fidx, int envidx)
{
    fidx = lua_absindex(L, fidx);
    envidx = lua_absindex(L, envidx);
    lua_pushvalue(L, envidx);
    if (!lua_setupvalue(L, fidx, 1))
        lua_pop(L, 1);
}

static int sb_load(lua_State *L)
{
    size_t len;
    const char *s;
    const char *chunkname = luaL_optstring(L, 2, "=(load)");
    if (lua_type(L, 1) != LUA_TSTRING)
        return luaL_error(L, "load: only text chunks given as strings are allowed");
    if (lua_isnoneornil(L, 4))
        return luaL_error(L, "load: an explicit env table (4th argument) is required");
    luaL_checktype(L, 4, LUA_TTABLE);
    s = lua_tolstring(L, 1, &len);
    if (luaL_loadbufferx(L, s, len, chunkname, "t") != LUA_OK) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    set_env_upvalue(L, -1, 4);
    return 1;
}

/* ---- proxies and environments ---- */

static int ro_newindex(lua_State *L)
{
    return luaL_error(L, "attempt to modify a read-only table (field '%s')",
                      lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
}

static int proxy_next(lua_State *L)
{
    /* upvalue 1: the real table; arguments: (proxy, key) */
    lua_settop(L, 2);
    if (lua_next(L, lua_upvalueindex(1)))
        return 2;
    lua_pushnil(L);
    return 1;
}

static int proxy_pairs(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushcclosure(L, proxy_next, 1);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

static int proxy_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)lua_rawlen(L, lua_upvalueindex(1)));
    return 1;
}

static void mark_readonly(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_READONLY);
    lua_pushvalue(L, idx);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

/* Finishes the metatable on top for the table just below it: writes go to
 * newindex (which raises), the metatable is locked, and rawset refuses the table.
 * Pops the metatable. */
static void seal(lua_State *L, lua_CFunction newindex)
{
    lua_pushcfunction(L, newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    mark_readonly(L, -1);
}

/* Pushes map[value at idx] (map: a registry table) and returns 1 when it is a table;
 * else pushes nothing and returns 0. */
static int map_get(lua_State *L, const void *map, int idx)
{
    idx = lua_absindex(L, idx);
    lua_rawgetp(L, LUA_REGISTRYINDEX, map);
    lua_pushvalue(L, idx);
    if (lua_rawget(L, -2) == LUA_TTABLE) {
        lua_remove(L, -2);
        return 1;
    }
    lua_pop(L, 2);
    return 0;
}

/* map[value at k] = value at v (map: a registry table). */
static void map_set(lua_State *L, const void *map, int k, int v)
{
    k = lua_absindex(L, k);
    v = lua_absindex(L, v);
    lua_rawgetp(L, LUA_REGISTRYINDEX, map);
    lua_pushvalue(L, k);
    lua_pushvalue(L, v);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

void lvm_push_proxy(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    if (is_readonly(L, idx)) { /* already a proxy (or an env) */
        lua_pushvalue(L, idx);
        return;
    }
    if (map_get(L, &KEY_PROXIES, idx))
        return;
    lua_newtable(L);          /* proxy */
    lua_createtable(L, 0, 5); /* its metatable */
    lua_pushvalue(L, idx);
    lua_setfield(L, -2, "__index");
    lua_pushvalue(L, idx);
    lua_pushcclosure(L, proxy_pairs, 1);
    lua_setfield(L, -2, "__pairs");
    lua_pushvalue(L, idx);
    lua_pushcclosure(L, proxy_len, 1);
    lua_setfield(L, -2, "__len");
    seal(L, ro_newindex);
    map_set(L, &KEY_PROXIES, idx, -1); /* proxies[real] = proxy */
}

/* __index of the globals copy behind every _ENV: only misses get here, since the
 * VM resolves known globals through the table itself without calling C. */
static int env_unknown(lua_State *L)
{
    return luaL_error(L, "unknown global '%s'",
                      lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
}

static int env_newindex(lua_State *L)
{
    return luaL_error(L, "assignment to global '%s' (tools define no globals; use local)",
                      lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
}

/* ---- generations: module sources, caches and the two requires ----
 *
 * A generation is one Lua table (GEN_* slots) that the requires and chunk loaders
 * carry as an upvalue: the server makes one per state; the busted module makes one
 * per sandbox. KEY_GEN names the state's current one for the C API. */
enum {
    GEN_SOURCES = 1, /* module name -> {text, chunkname} */
    GEN_LOADED,      /* module name -> raw value (runtime chunks and tools/_lib) */
    GEN_PUBLIC,      /* public module name -> read-only facade given to tool code */
    GEN_TOOL_ENV,    /* globals behind a tool chunk's _ENV (public require) */
    GEN_RT_ENV,      /* globals behind a runtime chunk's _ENV (private require) */
};

/* The runtime's modules tool code may require, and the fields each shows; the rest
 * of lua/ (host, contract, schema, ...) stays private to the runtime. Kept in step
 * with docs/writing-tools.md. */
static const char *const PUBLIC_CATALOG[] = {
    "text", "error_text", "status_name", "default_language", "languages", NULL};
static const char *const PUBLIC_ERRORS[] = {
    "UPSTREAM_CODES", "RETRY_AFTER_MS", "body_of", "envelope", "from_status",
    "transport",      "upstream",       "next_of", "link",     "platform",
    "is_2xx",         "bad_gateway",    "json_of", "fetch",    NULL};
static const char *const PUBLIC_PTC[] = {
    "timeout_schema", "output_schema", "blank_error", "wrap_code",
    "stub_for",       "execute",       "result",      NULL};
static const char *const PUBLIC_SQLGUARD[] = {"check", NULL};
static const struct {
    const char *name;
    const char *const *fields;
} PUBLIC_MODULES[] = {{"catalog", PUBLIC_CATALOG},
                      {"errors", PUBLIC_ERRORS},
                      {"ptc", PUBLIC_PTC},
                      {"sqlguard", PUBLIC_SQLGUARD},
                      {NULL, NULL}};

/* Library names require gives back (the allow-listed tables themselves). */
static const char *const BUILTIN_MODULES[] = {"string",    "table", "math", "utf8",
                                              "coroutine", "os",    NULL};
/* C modules tool code may require; cltexts and clruntime stay with the runtime. */
static const char *const PUBLIC_C_MODULES[] = {"cljson", "cltoon", NULL};

static int in_list(const char *const *list, const char *name)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], name) == 0)
            return 1;
    return 0;
}

static int is_lib_name(const char *name)
{
    return strncmp(name, "_lib.", 5) == 0;
}

/* Pushes a fresh _ENV for one chunk of generation gen: a tool chunk's (tool code
 * and tools/_lib) or a runtime chunk's (lua/). */
static void push_env(lua_State *L, int gen, int runtime)
{
    gen = lua_absindex(L, gen);
    lua_newtable(L);
    lua_createtable(L, 0, 3);
    lua_rawgeti(L, gen, runtime ? GEN_RT_ENV : GEN_TOOL_ENV);
    lua_setfield(L, -2, "__index");
    seal(L, env_newindex);
}

static int load_in(lua_State *L, int gen, const char *text, size_t len, const char *chunkname,
                   int runtime)
{
    gen = lua_absindex(L, gen);
    if (luaL_loadbufferx(L, text, len, chunkname, "t") != LUA_OK)
        return -1;
    push_env(L, gen, runtime);
    set_env_upvalue(L, -2, -1);
    lua_pop(L, 1);
    return 0;
}

int lvm_load(lua_State *L, const char *text, size_t len, const char *chunkname)
{
    int rc;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_GEN);
    rc = load_in(L, -1, text, len, chunkname, 0);
    lua_remove(L, -2);
    return rc;
}

/* Pushes the raw value of module name in generation gen, loading it once. */
static void require_in(lua_State *L, int gen, const char *name)
{
    int t;
    const char *text;
    const char *chunk;
    size_t len;

    gen = lua_absindex(L, gen);
    if (in_list(BUILTIN_MODULES, name)) {
        lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_LIBS);
        lua_getfield(L, -1, name);
        lua_remove(L, -2);
        return;
    }
    lua_rawgeti(L, gen, GEN_LOADED);
    t = lua_getfield(L, -1, name);
    if (t == LUA_TLIGHTUSERDATA && lua_touserdata(L, -1) == (void *)&KEY_LOADING)
        luaL_error(L, "circular require of module '%s'", name);
    if (t != LUA_TNIL) {
        lua_remove(L, -2);
        return;
    }
    lua_pop(L, 1);
    lua_rawgeti(L, gen, GEN_SOURCES);
    if (lua_getfield(L, -1, name) != LUA_TTABLE)
        luaL_error(L,
                   "module '%s' not found (only lua/ and tools/_lib/ modules, cljson and "
                   "cltoon can be required)",
                   name);
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    text = lua_tolstring(L, -2, &len);
    chunk = lua_tostring(L, -1);
    if (load_in(L, gen, text, len, chunk, !is_lib_name(name)) != 0)
        lua_error(L);
    /* stack: loaded, sources, src, text, chunk, fn */
    lua_pushlightuserdata(L, (void *)&KEY_LOADING);
    lua_setfield(L, -7, name);
    lua_pushstring(L, name);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        lua_pushnil(L);
        lua_setfield(L, -7, name); /* forget the sentinel, keep the error */
        lua_error(L);
    }
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -7, name);
    lua_replace(L, -6);
    lua_pop(L, 4);
}

void lvm_require(lua_State *L, const char *name)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_GEN);
    require_in(L, -1, name);
    lua_remove(L, -2);
}

/* Pushes a read-only copy of the value at idx: tables are copied (nested ones
 * too, down to a few levels) and shown through proxies, other values as they are. */
static void push_frozen(lua_State *L, int idx, int depth)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE || depth > 8 || is_readonly(L, idx)) {
        lua_pushvalue(L, idx);
        return;
    }
    luaL_checkstack(L, 6, NULL);
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        push_frozen(L, -1, depth + 1);
        lua_remove(L, -2);
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
    lvm_push_proxy(L, -1);
    lua_remove(L, -2);
}

/* Pushes the facade of public runtime module name (cached per generation). */
static void push_facade(lua_State *L, int gen, const char *name, const char *const *fields)
{
    gen = lua_absindex(L, gen);
    lua_rawgeti(L, gen, GEN_PUBLIC);
    if (lua_getfield(L, -1, name) == LUA_TTABLE) {
        lua_remove(L, -2);
        return;
    }
    lua_pop(L, 1);
    require_in(L, gen, name);
    lua_newtable(L);
    for (int i = 0; fields[i]; i++) {
        if (lua_type(L, -2) == LUA_TTABLE)
            lua_getfield(L, -2, fields[i]);
        else
            lua_pushnil(L);
        push_frozen(L, -1, 0);
        lua_remove(L, -2);
        lua_setfield(L, -2, fields[i]);
    }
    lvm_push_proxy(L, -1);
    lua_replace(L, -3); /* facades, proxy, table */
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, name);
    lua_remove(L, -2);
}

/* require for runtime chunks (lua/): every module of the generation. Upvalue 1: gen. */
static int sb_require_private(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    require_in(L, lua_upvalueindex(1), name);
    if (lua_type(L, -1) == LUA_TTABLE)
        lvm_push_proxy(L, -1);
    return 1;
}

/* require for tool chunks (tools/ and tools/_lib/): the public modules only, each
 * through a read-only proxy. Upvalue 1: gen. */
static int sb_require_public(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    int i;
    for (i = 0; PUBLIC_MODULES[i].name; i++) {
        if (strcmp(name, PUBLIC_MODULES[i].name) == 0) {
            push_facade(L, lua_upvalueindex(1), name, PUBLIC_MODULES[i].fields);
            return 1;
        }
    }
    if (!in_list(BUILTIN_MODULES, name) && !in_list(PUBLIC_C_MODULES, name) && !is_lib_name(name)) {
        lua_rawgeti(L, lua_upvalueindex(1), GEN_SOURCES);
        int runtime = lua_getfield(L, -1, name) == LUA_TTABLE || strcmp(name, "cltexts") == 0 ||
                      strcmp(name, "clruntime") == 0;
        lua_pop(L, 2);
        if (runtime)
            return luaL_error(L,
                              "module '%s' is private to the runtime (tool code may require "
                              "cljson, cltoon, _lib.<name>, catalog, errors, ptc and sqlguard)",
                              name);
        return luaL_error(L,
                          "module '%s' not found (tool code may require cljson, cltoon, "
                          "_lib.<name>, catalog, errors, ptc and sqlguard)",
                          name);
    }
    require_in(L, lua_upvalueindex(1), name);
    if (lua_type(L, -1) == LUA_TTABLE)
        lvm_push_proxy(L, -1);
    return 1;
}

/* ---- read-only views (ctx) ----
 *
 * A view is an empty table with one shared metatable; KEY_VIEWS maps it to the
 * table it shows. Reads go through to that table, and a table read through a view
 * comes back as a view of it (made on first read, then the same one); writes and
 * rawset raise. Nothing is copied. A field the table lacks is asked of its own
 * metatable's __index, which may make it on first read (the runtime's lazy ctx
 * fields); the keys listed in that metatable's __lazy are made before pairs. */
static int view_real(lua_State *L, int view)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_VIEWS);
    lua_pushvalue(L, view);
    lua_rawget(L, -2);
    lua_remove(L, -2);
    return lua_type(L, -1) == LUA_TTABLE;
}

/* Replaces the value on top with its view when it is a table that is not read-only. */
static void wrap_top(lua_State *L)
{
    if (lua_type(L, -1) != LUA_TTABLE)
        return;
    if (map_get(L, &KEY_VIEWOF, -1)) { /* read before: its view (the common case) */
        lua_remove(L, -2);
        return;
    }
    if (!is_readonly(L, -1)) {
        lvm_push_view(L, -1);
        lua_remove(L, -2);
    }
}

static int view_index(lua_State *L)
{
    if (!view_real(L, 1))
        return 0;
    lua_pushvalue(L, 2);
    if (lua_rawget(L, -2) == LUA_TNIL && lua_getmetatable(L, -2)) {
        /* a field the real table makes on first read (its metatable's __index) */
        lua_pop(L, 2);
        lua_pushvalue(L, 2);
        lua_gettable(L, -2);
    }
    wrap_top(L);
    return 1;
}

static int view_newindex(lua_State *L)
{
    return luaL_error(L,
                      "attempt to modify a read-only table (field '%s'): ctx and its tables "
                      "are read-only; keep per-call state in locals",
                      lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
}

static int view_next(lua_State *L)
{
    /* upvalue 1: the real table; arguments: (view, key) */
    lua_settop(L, 2);
    if (!lua_next(L, lua_upvalueindex(1))) {
        lua_pushnil(L);
        return 1;
    }
    wrap_top(L);
    return 2;
}

static int view_pairs(lua_State *L)
{
    if (!view_real(L, 1))
        return luaL_error(L, "not a read-only view");
    int lazy = luaL_getmetafield(L, -1, "__lazy");
    if (lazy == LUA_TTABLE) {
        /* the fields made on first read are made now, so that pairs lists them */
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            lua_gettable(L, -3);
            lua_pop(L, 1);
        }
    }
    if (lazy != LUA_TNIL)
        lua_pop(L, 1);
    lua_pushcclosure(L, view_next, 1);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

static int view_len(lua_State *L)
{
    lua_pushinteger(L, view_real(L, 1) ? (lua_Integer)lua_rawlen(L, -1) : 0);
    return 1;
}

void lvm_push_view(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE || is_readonly(L, idx)) {
        lua_pushvalue(L, idx);
        return;
    }
    if (map_get(L, &KEY_VIEWOF, idx))
        return;
    lua_newtable(L);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_VIEWMT);
    lua_setmetatable(L, -2);          /* read-only by it (is_readonly) */
    map_set(L, &KEY_VIEWOF, idx, -1); /* viewof[real] = view */
    map_set(L, &KEY_VIEWS, -1, idx);  /* views[view] = real */
}

static int rt_readonly(lua_State *L)
{
    luaL_checkany(L, 1);
    lvm_push_view(L, 1);
    return 1;
}

/* is_view(v): v is a view the runtime made (a tool cannot forge one). */
static int rt_is_view(lua_State *L)
{
    lua_pushboolean(L, lua_type(L, 1) == LUA_TTABLE && view_real(L, 1));
    return 1;
}

/* clruntime.object_size(t) -> its number of members (raw, every key kind): one C
 * call where Lua would call next once per member just to count them. */
static int rt_object_size(lua_State *L)
{
    lua_Integer n = 0;
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pop(L, 1);
        n++;
    }
    lua_pushinteger(L, n);
    return 1;
}

/* clruntime.metatable(v) -> v's metatable or nil, as lua_getmetatable gives it: the
 * runtime compares metatables with cljson's marks several times per call, and
 * getmetatable's __metatable look-up costs more than the rest of the check. Only the
 * runtime's own modules reach clruntime. */
static int rt_metatable(lua_State *L)
{
    luaL_checkany(L, 1);
    if (!lua_getmetatable(L, 1))
        lua_pushnil(L);
    return 1;
}

/* ---- building the state ---- */

typedef struct snap_args {
    const char *dir;
    const char *prefix;    /* module name prefix ("" or "_lib.") */
    const char *chunk_dir; /* chunkname dir ("" or "_lib/") */
    int optional;
    int compile; /* compile each file now: a runtime module that does not parse stops the
                    generation here instead of failing the first request that needs it */
} snap_args;

/* Reads every dir/<name>.lua into the sources of the generation at stack index 2:
 * sources[prefix..name] = {text, "@chunk_dir/name.lua"}. */
static int snapshot_into(lua_State *L, const snap_args *a, int gen)
{
    DIR *d = opendir(a->dir);
    struct dirent *e;
    if (!d) {
        if (a->optional && errno == ENOENT)
            return 0;
        return luaL_error(L, "%s: cannot open directory: %s", a->dir, strerror(errno));
    }
    lua_rawgeti(L, gen, GEN_SOURCES);
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        char *path;
        char *text = NULL;
        size_t len = 0;
        struct stat st;
        if (n <= 4 || e->d_name[0] == '.' || strcmp(e->d_name + n - 4, ".lua") != 0)
            continue;
        path = xmalloc(strlen(a->dir) + n + 2);
        sprintf(path, "%s/%s", a->dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
            read_file_max(path, LVM_MAX_SOURCE, &text, &len) != 0) {
            free(path);
            continue;
        }
        free(path);
        lua_createtable(L, 2, 0);
        lua_pushfstring(L, "@%s%s", a->chunk_dir, e->d_name);
        if (a->compile && luaL_loadbufferx(L, text, len, lua_tostring(L, -1), "t") != LUA_OK) {
            free(text);
            closedir(d);
            return luaL_error(L, "%s/%s", a->dir, lua_tostring(L, -1));
        }
        if (a->compile)
            lua_pop(L, 1);
        lua_rawseti(L, -2, 2);
        lua_pushlstring(L, text, len);
        free(text);
        lua_rawseti(L, -2, 1);
        lua_pushstring(L, a->prefix);
        lua_pushlstring(L, e->d_name, n - 4); /* module name: file name without .lua */
        lua_concat(L, 2);
        lua_insert(L, -2);
        lua_rawset(L, -3);
    }
    closedir(d);
    lua_pop(L, 1);
    return 0;
}

static int snapshot_p(lua_State *L)
{
    snap_args *a = lua_touserdata(L, 1);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_GEN);
    return snapshot_into(L, a, lua_gettop(L));
}

static void new_weak_table(lua_State *L, const char *mode, const void *key)
{
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushstring(L, mode);
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_rawsetp(L, LUA_REGISTRYINDEX, key);
}

static const char *const BASE_ALLOWED[] = {
    "assert", "error",    "ipairs",   "next", "pairs",        "rawequal", "rawget", "rawlen",
    "select", "tonumber", "tostring", "type", "getmetatable", "_VERSION", NULL};

static void copy_fields(lua_State *L, int from, int to, const char *const *names)
{
    int i;
    for (i = 0; names[i]; i++) {
        lua_getfield(L, from, names[i]);
        lua_setfield(L, to, names[i]);
    }
}

/* Pushes a fresh copy of library lib: in a state of our own the loaded one (then
 * changed in place), in a foreign one (busted) a new table, so the host's own
 * libraries and the string metatable stay as they were. */
static void push_lib(lua_State *L, const char *name, lua_CFunction open, int own)
{
    if (own) {
        luaL_requiref(L, name, open, 0);
        return;
    }
    if (open == luaopen_string) {
        lua_pushliteral(L, "");
        lua_getmetatable(L, -1);
        lua_remove(L, -2);
        lua_pushcfunction(L, open);
        lua_call(L, 0, 1);
        lua_pushliteral(L, "");
        lua_pushvalue(L, -3);
        lua_setmetatable(L, -2); /* the host's string metatable back */
        lua_pop(L, 1);
        lua_remove(L, -2);
        return;
    }
    lua_pushcfunction(L, open);
    lua_call(L, 0, 1);
}

/* The allow-listed libraries and base functions, shared by every generation of the
 * state: KEY_LIBS (everything a chunk's globals hold but require and _G), the
 * readonly/proxy/view tables. own: the state is ours (lvm_new), not busted's. */
static void setup_libs(lua_State *L, int own)
{
    static const char *const os_allowed[] = {"time", "clock", "date", NULL};
    static const luaL_Reg libs[] = {
        {LUA_STRLIBNAME, luaopen_string},   {LUA_TABLIBNAME, luaopen_table},
        {LUA_MATHLIBNAME, luaopen_math},    {LUA_UTF8LIBNAME, luaopen_utf8},
        {LUA_COLIBNAME, luaopen_coroutine}, {NULL, NULL}};
    static const luaL_Reg view_mt[] = {{"__index", view_index},
                                       {"__newindex", view_newindex},
                                       {"__pairs", view_pairs},
                                       {"__len", view_len},
                                       {NULL, NULL}};
    int g, real, i;

    new_weak_table(L, "k", &KEY_READONLY);
    new_weak_table(L, "k", &KEY_PROXIES);
    new_weak_table(L, "k", &KEY_VIEWS);
    new_weak_table(L, "k", &KEY_VIEWOF);
    luaL_newlib(L, view_mt);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &KEY_VIEWMT);

    luaL_requiref(L, LUA_GNAME, luaopen_base, 0);
    real = lua_gettop(L);
    lua_newtable(L);
    g = lua_gettop(L);
    copy_fields(L, real, g, BASE_ALLOWED);

    for (i = 0; i < LUA_NUMTYPES; i++)
        lua_pushstring(L, lua_typename(L, i));
    lua_pushcclosure(L, sb_type, LUA_NUMTYPES);
    lua_setfield(L, g, "type");
    lua_pushcfunction(L, sb_pcall);
    lua_setfield(L, g, "pcall");
    lua_pushcfunction(L, sb_xpcall);
    lua_setfield(L, g, "xpcall");
    lua_pushcfunction(L, sb_rawset);
    lua_setfield(L, g, "rawset");
    lua_pushcfunction(L, sb_setmetatable);
    lua_setfield(L, g, "setmetatable");
    lua_pushcfunction(L, sb_load);
    lua_setfield(L, g, "load");

    for (i = 0; libs[i].name; i++) {
        push_lib(L, libs[i].name, libs[i].func, own);
        if (strcmp(libs[i].name, LUA_STRLIBNAME) == 0) {
            lpattern_install(L, -1, lvm_charge); /* pattern matching under the budget */
            lbounded_install_string(L, -1, lvm_charge);
        }
        if (strcmp(libs[i].name, LUA_TABLIBNAME) == 0)
            lbounded_install_table(L, -1, lvm_charge);
        if (strcmp(libs[i].name, LUA_UTF8LIBNAME) == 0)
            lbounded_install_utf8(L, -1, lvm_charge);
        if (strcmp(libs[i].name, LUA_COLIBNAME) == 0) {
            lua_getfield(L, -1, "resume");
            lua_pushcclosure(L, sb_cowrap_catch, 1);
            lua_setfield(L, -2, "resume");
            lua_getfield(L, -1, "close");
            lua_pushcclosure(L, sb_cowrap_catch, 1);
            lua_setfield(L, -2, "close");
            lua_pushcfunction(L, sb_wrap);
            lua_setfield(L, -2, "wrap");
            lua_pushcfunction(L, sb_running);
            lua_setfield(L, -2, "running");
        }
        lvm_push_proxy(L, -1);
        lua_setfield(L, g, libs[i].name);
        lua_pop(L, 1);
    }
    luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 0);
    lua_newtable(L);
    copy_fields(L, -2, lua_gettop(L), os_allowed);
    lvm_push_proxy(L, -1);
    lua_setfield(L, g, "os");
    lua_pop(L, 2);

    if (own) {
        /* the string metatable stays reachable only as the __index of strings */
        lua_pushliteral(L, "");
        lua_getmetatable(L, -1);
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "__metatable");
        lua_pop(L, 2);
    }
    lua_pushvalue(L, g);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &KEY_LIBS);
    lua_settop(L, real - 1);
}

/* Pushes base (KEY_LIBS) with require = fn(gen) and _G, behind a table whose misses
 * raise: what a chunk's _ENV reads through. Never reachable from Lua (_ENV's
 * metatable is locked). */
static void push_env_base(lua_State *L, int gen, lua_CFunction require)
{
    int g;
    gen = lua_absindex(L, gen);
    lua_createtable(L, 0, 32);
    g = lua_gettop(L);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_LIBS);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, g);
    }
    lua_pop(L, 1);
    lua_pushvalue(L, gen);
    lua_pushcclosure(L, require, 1);
    lua_setfield(L, g, "require");
    /* _G: the same globals again, read-only (a real table behind it, so misses are nil) */
    lua_createtable(L, 0, 32);
    lua_pushnil(L);
    while (lua_next(L, g)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
    lvm_push_proxy(L, -1);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "_G");
    lua_setfield(L, g, "_G");
    lua_pop(L, 1);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, env_unknown);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, g);
    mark_readonly(L, g);
}

/* cljson's marker metatables are the real ones (the encoder compares them by
 * identity), so their proxies hand them out as they are. Guard them: a field they
 * lack cannot be added (array_mt and object_mt have none: a tool cannot give every
 * JSON array or object an __index), rawset refuses them, and their own metatable is
 * locked. Fields they have (number_mt's __tostring, ...) stay as they are. */
static void guard_cljson_metatables(lua_State *L, int cljson)
{
    static const char *const mts[] = {"array_mt", "object_mt", "number_mt", "raw_mt", NULL};
    for (int i = 0; mts[i]; i++) {
        if (lua_getfield(L, cljson, mts[i]) == LUA_TTABLE && !is_readonly(L, -1) &&
            !lua_getmetatable(L, -1)) {
            lua_createtable(L, 0, 2);
            seal(L, ro_newindex);
        }
        lua_settop(L, cljson);
    }
}

static void preload(lua_State *L, int loaded, const char *name, lua_CFunction open)
{
    luaL_requiref(L, name, open, 0);
    lua_setfield(L, loaded, name);
}

/* Pushes a new generation: empty sources, the C modules preloaded, both envs. */
static void push_gen(lua_State *L)
{
    static const luaL_Reg runtime[] = {{"readonly", rt_readonly},
                                       {"is_view", rt_is_view},
                                       {"object_size", rt_object_size},
                                       {"metatable", rt_metatable},
                                       {NULL, NULL}};
    int gen, loaded;
    lua_createtable(L, GEN_RT_ENV, 0);
    gen = lua_gettop(L);
    lua_newtable(L);
    lua_rawseti(L, gen, GEN_SOURCES);
    lua_newtable(L);
    loaded = lua_gettop(L);
    preload(L, loaded, "cljson", luaopen_cljson);
    lua_getfield(L, loaded, "cljson");
    guard_cljson_metatables(L, lua_gettop(L));
    lua_pop(L, 1);
    preload(L, loaded, "cltoon", luaopen_cltoon);
    preload(L, loaded, "cltexts", luaopen_cltexts);
    luaL_newlib(L, runtime);
    lua_setfield(L, loaded, "clruntime");
    lua_rawseti(L, gen, GEN_LOADED);
    lua_newtable(L);
    lua_rawseti(L, gen, GEN_PUBLIC);
    push_env_base(L, gen, sb_require_public);
    lua_rawseti(L, gen, GEN_TOOL_ENV);
    push_env_base(L, gen, sb_require_private);
    lua_rawseti(L, gen, GEN_RT_ENV);
}

static int setup_p(lua_State *L)
{
    setup_libs(L, 1);
    push_gen(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &KEY_GEN);

    /* Nothing sandboxed sees the real global table; empty it anyway. */
    lua_pushglobaltable(L);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_pushnil(L);
        lua_rawset(L, -4);
    }
    lua_pop(L, 1);
    lua_settop(L, 0);
    return 0;
}

/* ---- the sandbox as a Lua C module (clsandbox.so, for busted) ----
 *
 * clsandbox.new(lua_dir [, lib_dir]) installs the server's sandbox into the calling
 * state (its libraries once; they leave the host's own untouched) and makes a new
 * generation of lua_dir's and lib_dir's modules. It returns a table:
 *   require(name)         the runtime's private require (every lua/ module)
 *   tool_require(name)    the require tool code gets
 *   load(text, chunkname) -> function | nil, err: a tool chunk with its own _ENV
 * clsandbox.readonly(t) is the read-only view the runtime gives tools as ctx. There
 * is no budget: pcall and friends behave as in a server call that never runs out. */
static int mod_load(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    const char *chunk = luaL_optstring(L, 2, "=(tool)");
    if (load_in(L, lua_upvalueindex(1), text, len, chunk, 0) != 0) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    return 1;
}

static int mod_new(lua_State *L)
{
    static const luaL_Reg fns[] = {{"require", sb_require_private},
                                   {"tool_require", sb_require_public},
                                   {"load", mod_load},
                                   {NULL, NULL}};
    snap_args sa;
    const char *lua_dir = luaL_checkstring(L, 1);
    const char *lib_dir = luaL_optstring(L, 2, NULL);
    int gen;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_LIBS);
    if (lua_isnil(L, -1))
        setup_libs(L, 0);
    lua_pop(L, 1);
    push_gen(L);
    gen = lua_gettop(L);
    sa = (snap_args){lua_dir, "", "", 0, 1};
    snapshot_into(L, &sa, gen);
    if (lib_dir) {
        sa = (snap_args){lib_dir, "_lib.", "_lib/", 1, 0};
        snapshot_into(L, &sa, gen);
    }
    lua_pushvalue(L, gen);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &KEY_GEN);
    luaL_newlibtable(L, fns);
    lua_pushvalue(L, gen);
    luaL_setfuncs(L, fns, 1); /* each closes over the generation */
    return 1;
}

static int mod_readonly(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &KEY_LIBS);
    if (lua_isnil(L, -1))
        setup_libs(L, 0);
    lua_settop(L, 1);
    return rt_readonly(L);
}

int luaopen_clsandbox(lua_State *L)
{
    static const luaL_Reg fns[] = {{"new", mod_new},
                                   {"readonly", mod_readonly},
                                   {"object_size", rt_object_size},
                                   {"metatable", rt_metatable},
                                   {NULL, NULL}};
    luaL_newlib(L, fns);
    return 1;
}

lvm *lvm_new(const char *lua_dir, const char *lib_dir, size_t state_cap, char **err)
{
    lvm *vm = xcalloc(1, sizeof *vm);
    snap_args sa;
    *err = NULL;
    vm->cap = state_cap ? state_cap : LVM_DEFAULT_CAP;
    vm->L = lua_newstate(lvm_alloc, vm);
    if (!vm->L) {
        *err = xstrdup("cannot create a Lua state");
        goto fail;
    }
    /* Tool calls make short-lived garbage on top of a large, long-lived heap
     * (modules, schemas, catalogue): the generational collector's young collections
     * fit that shape. Incremental (pause 300, step multiplier 400) counted fewer
     * instructions with 256 calls in flight, but on the wall clock it served REST
     * reads at 16 connections about 25% slower (a larger heap, colder caches) and
     * gained nothing at 256; the pool keeps what the collector frees for the next
     * calls. */
    lua_gc(vm->L, LUA_GCGEN, 0, 0);
    if (lvm_cpcall(vm->L, setup_p, vm, err) != 0)
        goto fail;
    sa = (snap_args){lua_dir, "", "", 0, 1};
    if (lvm_cpcall(vm->L, snapshot_p, &sa, err) != 0)
        goto fail;
    if (lib_dir) {
        sa = (snap_args){lib_dir, "_lib.", "_lib/", 1, 0};
        if (lvm_cpcall(vm->L, snapshot_p, &sa, err) != 0)
            goto fail;
    }
    return vm;
fail:
    lvm_free(vm);
    return NULL;
}

void lvm_free(lvm *vm)
{
    if (!vm)
        return;
    vm->cur = NULL;
    if (vm->L)
        lua_close(vm->L);
    pool_drain(vm);
    free(vm);
}
