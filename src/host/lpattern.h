/* lpattern: string.find, string.match, string.gmatch and string.gsub whose pattern
 * matching counts against the running call's budget (the charge function, lvm_charge): a
 * backtracking pattern is stopped by the instruction budget or the run-time slice like any Lua
 * loop, instead of holding the event loop inside one C call. Same semantics,
 * results and error messages as Lua 5.4's string library otherwise. */
#ifndef CL_LPATTERN_H
#define CL_LPATTERN_H

#include <lua.h>

/* Charges n units of matching work to the running call; may raise (budget spent). */
typedef void (*lpattern_charge_fn)(lua_State *L, long n);

/* Replaces find, match, gmatch and gsub in the table at idx (the string library); their
 * work is charged through charge (the sandbox passes lvm_charge). */
void lpattern_install(lua_State *L, int idx, lpattern_charge_fn charge);

#endif
