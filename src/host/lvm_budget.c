/* lvm_budget: lazy instruction counting, the run-time slice and protected calls (lvm_impl.h). */
#define _GNU_SOURCE /* gettid, SIGEV_THREAD_ID */
#include "lvm_impl.h"

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
lua_State *lvm_switch_running(lua_State *L, lua_State *co)
{
    lvm *vm = lvm_of_state(L);
    lua_State *prev = vm ? vm->running : NULL;
    if (!vm || !vm->cur)
        return prev;
    vm->running = co;
    if (vm->cur->counting)
        count_on(co);
    return prev;
}

void lvm_restore_running(lua_State *L, lua_State *prev)
{
    lvm *vm = lvm_of_state(L);
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
    lvm *vm = lvm_of_state(L);
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
int lvm_must_rethrow(lua_State *L, int status)
{
    lvm *vm = lvm_of_state(L);
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
