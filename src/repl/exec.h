/* exec.h - running Lua chunks for the front ends (`eldr run`, `eldr
 * repl`): a traceback on error, and Ctrl-C turned into a Lua error.
 *
 * Ctrl-C, as the standalone lua interpreter does it: while a chunk runs,
 * SIGINT installs a debug hook that raises "interrupted" at the next Lua
 * instruction, and raises l_cancel_flag, which long C computations poll
 * (k-means), so both Lua loops and C work stop. The error is then one
 * line, no traceback: "interrupted", or the binding's own ("eldr.gen:
 * interrupted"). A second Ctrl-C before the hook fires kills the process
 * (the default action is restored), the way out of a computation that
 * does not poll. */
#ifndef ELDR_REPL_EXEC_H
#define ELDR_REPL_EXEC_H

#include <stdio.h>

#include <lua.h>

/* The error a Ctrl-C raises in Lua code (exec_call). */
#define EXEC_INTERRUPTED "interrupted"

/* Call the function below narg arguments on the stack, in protected mode
 * with a traceback handler and the Ctrl-C hook; nres results (or the
 * error message with its traceback) are left on the stack. */
int exec_call(lua_State *L, int narg, int nres);

/* Report the error message at the top to stderr ("eldr: msg") and pop
 * it; returns 1 (the exit status of a failed script). */
int exec_report(lua_State *L, const char *prog);

/* Set the global `arg` as the lua interpreter does: arg[0] = script,
 * arg[1..] = args, arg[-1] = the program; and push the args for `...`.
 * Returns the number pushed. */
int exec_setargs(lua_State *L, const char *prog, const char *script, int argc,
                 char **argv);

/* Load a script ("-" = standard input) and run it with the given args;
 * 0 on success, 1 after reporting an error at run time, 2 when the file
 * cannot be read or does not compile (reported as one line). */
int exec_script(lua_State *L, const char *prog, const char *script, int argc,
                char **argv);

#endif
