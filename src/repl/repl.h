/* repl.h - the interactive eldr Lua prompt (readline).
 *
 * Lines are Lua: `=expr` and bare expressions print their values (tables
 * pretty-printed through eldr.pp, eldr objects through __tostring); an
 * incomplete chunk continues on the next line (">>"), as in lua.c, by
 * recognising the "<eof>" syntax error; `:help [name]` prints the help
 * registry; `:quit` or Ctrl-D leaves. Tab completes globals, table fields
 * and methods (complete.c). Ctrl-C at the prompt drops the line (and any
 * unfinished chunk); during a computation it interrupts it (exec.h).
 * History persists in $HOME/.eldr_history, at most REPL_HISTORY_MAX
 * entries, multi-line chunks kept whole. */
#ifndef ELDR_REPL_H
#define ELDR_REPL_H

#include <lua.h>

#define REPL_HISTORY_MAX 1000

/* Run the prompt on the terminal until EOF or :quit. Returns 0. */
int repl_interactive(lua_State *L, int use_history);

/* Handle one complete chunk of input as the prompt does (print values of
 * expressions, :help): for tests and for piped input. Returns 0, or 1
 * when the chunk failed (the error was printed). */
int repl_eval(lua_State *L, const char *chunk);

/* Completion (complete.c): the state to complete against, and readline's
 * attempted-completion function. */
void complete_init(lua_State *L);

/* help.c: the global help(x) of the REPL (help(eldr.fit) prints the
 * function's documentation, help() everything, grouped), and text on the
 * terminal wrapped to its width and paged when taller than it (Space,
 * Enter, q); printed as it is when stdout is not a terminal. */
void repl_help_open(lua_State *L);
void repl_show(const char *text);
char **complete_attempt(const char *text, int start, int end);

#endif
