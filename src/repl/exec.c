/* exec.c - protected calls with traceback and the Ctrl-C hook (exec.h). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "exec.h"
#include "../lua/l_util.h"

static lua_State *running;
static int interrupted;        /* the last exec_call ended by Ctrl-C */

/* The hook SIGINT installs: raise at the next instruction, once; the
 * bare word, no position (nothing went wrong at that line). */
static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    lua_pushstring(L, EXEC_INTERRUPTED);
    lua_error(L);
}

/* Signal handler: only async-signal-safe work; lua_sethook is, by
 * design, safe to call from a signal handler. */
static void on_sigint(int sig)
{
    signal(sig, SIG_DFL); /* a second Ctrl-C kills */
    l_cancel_flag = 1;
    lua_sethook(running, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT,
                1);
}

/* The message handler: the error with its traceback, except after
 * Ctrl-C, when the user knows why it stopped: then the message alone
 * ("interrupted", or a binding's "eldr.kmeans: interrupted"). */
static int traceback(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (l_cancel_flag && msg)
        return 1;
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int exec_call(lua_State *L, int narg, int nres)
{
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, traceback);
    lua_insert(L, base);
    running = L;
    l_cancel_reset();
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    int status = lua_pcall(L, narg, nres, base);
    interrupted = status != LUA_OK && l_cancel_flag;
    sigaction(SIGINT, &old, NULL);
    lua_sethook(L, NULL, 0, 0); /* an interrupt that came too late */
    l_cancel_reset();
    lua_remove(L, base);
    return status;
}

int exec_report(lua_State *L, const char *prog)
{
    const char *msg = lua_tostring(L, -1);
    /* after Ctrl-C the terminal has echoed "^C" where the cursor was:
     * the one line replaces it */
    if (interrupted && isatty(2))
        fputs("\r\033[K", stderr);
    interrupted = 0;
    fprintf(stderr, "%s: %s\n", prog, msg ? msg : "(error object is not a string)");
    fflush(stderr);
    lua_pop(L, 1);
    return 1;
}

int exec_setargs(lua_State *L, const char *prog, const char *script, int argc, char **argv)
{
    lua_createtable(L, argc, 2);
    lua_pushstring(L, prog);
    lua_rawseti(L, -2, -1);
    lua_pushstring(L, script);
    lua_rawseti(L, -2, 0);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setglobal(L, "arg");
    luaL_checkstack(L, argc + 3, "too many arguments to the script");
    for (int i = 0; i < argc; i++)
        lua_pushstring(L, argv[i]);
    return argc;
}

int exec_script(lua_State *L, const char *prog, const char *script, int argc, char **argv)
{
    const char *fname = strcmp(script, "-") ? script : NULL;
    if (luaL_loadfile(L, fname) != LUA_OK) {
        fprintf(stderr, "%s: %s\n", prog, lua_tostring(L, -1));
        lua_pop(L, 1);
        return 2;
    }
    int n = exec_setargs(L, "eldr", script, argc, argv);
    if (exec_call(L, n, 0) != LUA_OK)
        return exec_report(L, prog);
    return 0;
}
