/* lvm_alloc: the state's allocator and its pool of small blocks (lvm_impl.h). */
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

void lvm_pool_drain(lvm *vm)
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

void *lvm_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
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
    return lvm_of_state(L);
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
