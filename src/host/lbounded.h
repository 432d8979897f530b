/* lbounded: the string, table and utf8 library functions whose work is not bounded
 * by what they allocate, rewritten so that their work is charged to the running
 * call's budget as it goes (the charge function, lvm_charge): string.rep, upper,
 * lower and reverse fill their result in chunks; table.insert, remove, move, concat
 * and unpack walk their range in chunks; table.sort charges every comparison;
 * utf8.len scans in chunks. A call over a huge range (table.move over 2^40 indexes,
 * table.insert on a table whose __len says 2^40) or a huge string is then stopped by
 * the instruction budget or the run-time slice like any Lua loop, instead of holding
 * the event loop inside one C call. Results and error messages are those of Lua 5.4's
 * libraries, but for table.sort's own errors ("invalid order function for sorting"),
 * which carry no position. */
#ifndef CL_LBOUNDED_H
#define CL_LBOUNDED_H

#include <lua.h>

/* Charges n units of work (about n VM instructions) to the running call; raises
 * when its budget or run-time slice is spent. */
typedef void (*lbounded_charge_fn)(lua_State *L, long n);

/* Replaces rep, upper, lower and reverse in the string library table at idx. */
void lbounded_install_string(lua_State *L, int idx, lbounded_charge_fn charge);
/* Replaces insert, remove, move, concat, unpack and sort in the table library at idx. */
void lbounded_install_table(lua_State *L, int idx, lbounded_charge_fn charge);
/* Replaces len in the utf8 library table at idx. */
void lbounded_install_utf8(lua_State *L, int idx, lbounded_charge_fn charge);

#endif
