/* cmd_repl.c - `eldr repl [script.lua]` (the interactive Lua prompt) and
 * `eldr run script.lua [args...]` (a script, `arg` as in lua). Both give
 * Lua 5.4 with the `eldr` module (docs/lua-api.md); docs/repl.md
 * describes the prompt. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <lua.h>

#include "cli.h"
#include "../lua/eldr_lua.h"
#include "../repl/exec.h"
#include "../repl/repl.h"

static void repl_usage(void)
{
    printf("usage: eldr repl [--no-history] [script.lua [args...]]\n"
           "\n"
           "Lua 5.4 with the eldr module (global `eldr`) and readline: Tab completes\n"
           "globals, fields and methods, and file names inside a string; an unfinished\n"
           "chunk continues on the next line; `=expr` and bare expressions print their\n"
           "values; `:help` lists the functions grouped by area (paged: Space, Enter,\n"
           "q), `:help name` one of them, and `help(eldr.fit)` the documentation of a\n"
           "function, object or module; Ctrl-C interrupts a computation (or drops the\n"
           "line); Ctrl-D or :quit leaves. History: $HOME/.eldr_history (last %d\n"
           "entries).\n"
           "\n"
           "A script given first runs before the prompt (its `arg` as with eldr run).\n"
           "When standard input is not a terminal, it is read as one script, without\n"
           "prompts; the exit status is then 1 if it failed.\n"
           "\n"
           "  --no-history   neither read nor write the history file\n"
           "  -h, --help     this text\n"
           "\n"
           "Nothing is printed as JSON here: scripts print what they want (eldr.pp).\n"
           "See docs/repl.md and docs/lua-api.md.\n",
           REPL_HISTORY_MAX);
}

int cmd_repl(int argc, char **argv)
{
    int history = 1, i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            repl_usage();
            return CLI_OK;
        } else if (!strcmp(argv[i], "--no-history"))
            history = 0;
        else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else
            return cli_usage_error("repl", "unknown option '%s'", argv[i]);
    }
    lua_State *L = eldr_lua_new();
    if (!L)
        return CLI_RUNTIME;
    repl_help_open(L); /* help(eldr.fit) at the prompt */
    int rc = 0;
    if (i < argc) {
        rc = exec_script(L, "eldr repl", argv[i], argc - i - 1, argv + i + 1);
        if (rc == 2) {
            lua_close(L);
            return CLI_BADINPUT;
        }
    }
    if (isatty(STDIN_FILENO))
        rc = repl_interactive(L, history);
    else
        rc = exec_script(L, "eldr repl", "-", 0, NULL) ? 1 : rc;
    lua_close(L);
    return rc;
}

static void run_usage(void)
{
    printf("usage: eldr run script.lua [args...]\n"
           "\n"
           "Run a Lua 5.4 script with the eldr module (global `eldr`, also\n"
           "require \"eldr\"). The script sees arg[0] = its path, arg[1..] = args, and\n"
           "the args as `...`. '-' reads the script from standard input.\n"
           "\n"
           "Exit status: 0 success; 1 the script raised an error (message and\n"
           "traceback on stderr); 2 the script cannot be read or does not compile\n"
           "(one line on stderr). Ctrl-C interrupts it. Scripts print their own\n"
           "results (e.g. eldr.pp, or eldr.report for tables and CSV), so there is no\n"
           "--json. See docs/lua-api.md.\n"
           "\n"
           "  -h, --help   this text\n");
}

int cmd_run(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("run", "no script given");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        run_usage();
        return CLI_OK;
    }
    int first = 1;
    if (!strcmp(argv[1], "--")) {
        if (argc < 3)
            return cli_usage_error("run", "no script given");
        first = 2;
    } else if (argv[1][0] == '-' && argv[1][1])
        return cli_usage_error("run", "unknown option '%s'", argv[1]);
    lua_State *L = eldr_lua_new();
    if (!L)
        return CLI_RUNTIME;
    int rc = exec_script(L, "eldr run", argv[first], argc - first - 1, argv + first + 1);
    lua_close(L);
    return rc == 2 ? CLI_BADINPUT : rc;
}
