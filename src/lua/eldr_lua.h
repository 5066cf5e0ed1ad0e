/* eldr_lua.h - the `eldr` Lua module, as the front ends (the REPL and
 * `eldr run`) see it.
 *
 * eldr_lua_new creates a Lua state with the standard libraries, the
 * module preloaded (require "eldr") and bound to the global `eldr`, and
 * package.path extended with the pure-Lua helpers (lua/eldr/NAME.lua):
 *   <bindir>/../lua/?.lua and ?/init.lua   (a build tree: bin/eldr)
 *   <bindir>/../share/eldr/lua/...         (an install under PREFIX)
 * where <bindir> is the directory of /proc/self/exe; $ELDR_LUA_PATH, if
 * set, comes first. The helpers load lazily: eldr.calibrate,
 * eldr.report and eldr.experiments are required on first use. */
#ifndef ELDR_LUA_H
#define ELDR_LUA_H

#include <lua.h>

int luaopen_eldr(lua_State *L);

/* A ready state, or NULL (with a message on stderr) when Lua cannot
 * start. */
lua_State *eldr_lua_new(void);

/* The names of the lazily loaded helper modules, NULL-terminated. */
extern const char *const eldr_lua_submodules[];

#endif
