/* repl.c - the interactive prompt (repl.h): readline's callback interface
 * so that Ctrl-C at the prompt can drop the line cleanly, chunks that
 * continue over lines, values printed, :help, persistent history. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

#include <lauxlib.h>
#include <readline/history.h>
#include <readline/readline.h>

#include "exec.h"
#include "../lua/l_types.h"
#include "repl.h"

#define PROMPT1 "eldr> "
#define PROMPT2 "  >> "
#define PP_DEPTH 4
#define PP_WIDTH 24

/* ---- evaluation ---- */

/* Is the error at the top a syntax error at the end of the input, i.e.
 * an incomplete chunk? (lua.c's test.) */
static int incomplete(lua_State *L, int status)
{
    if (status != LUA_ERRSYNTAX)
        return 0;
    size_t lmsg;
    const char *msg = lua_tolstring(L, -1, &lmsg);
    const char *eof = "<eof>";
    size_t le = strlen(eof);
    return lmsg >= le && !strcmp(msg + lmsg - le, eof);
}

/* Compile a chunk: "return <chunk>" first, so that expressions print,
 * then the chunk as statements. */
static int compile(lua_State *L, const char *chunk)
{
    if (chunk[0] == '=')
        chunk++;
    const char *ret = lua_pushfstring(L, "return %s;", chunk);
    int status = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
    lua_remove(L, -2);
    if (status == LUA_OK)
        return status;
    lua_pop(L, 1);
    return luaL_loadbuffer(L, chunk, strlen(chunk), "=stdin");
}

/* Print the values above base, pretty, separated by tabs. */
static void print_results(lua_State *L, int base)
{
    int n = lua_gettop(L) - base;
    for (int i = 1; i <= n; i++) {
        l_pprint(L, base + i, PP_DEPTH, PP_WIDTH);
        fputs(lua_tostring(L, -1), stdout);
        fputs(i < n ? "\t" : "\n", stdout);
        lua_pop(L, 1);
    }
    fflush(stdout);
}

static int help_command(lua_State *L, const char *arg)
{
    while (*arg == ' ' || *arg == '\t')
        arg++;
    size_t n = strlen(arg);
    while (n && (arg[n - 1] == ' ' || arg[n - 1] == '\t' || arg[n - 1] == '\n'))
        n--;
    lua_getglobal(L, "eldr");
    lua_getfield(L, -1, "help");
    lua_remove(L, -2);
    if (n)
        lua_pushlstring(L, arg, n);
    else
        lua_pushnil(L);
    if (exec_call(L, 1, 1) != LUA_OK)
        return exec_report(L, "eldr");
    if (lua_isnil(L, -1))
        printf("no help for '%.*s' (:help lists everything)\n", (int)n, arg);
    else
        printf("%s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    fflush(stdout);
    return 0;
}

int repl_eval(lua_State *L, const char *chunk)
{
    if (!strncmp(chunk, ":help", 5) && (chunk[5] == 0 || chunk[5] == ' '))
        return help_command(L, chunk + 5);
    int base = lua_gettop(L);
    if (compile(L, chunk) != LUA_OK)
        return exec_report(L, "eldr");
    if (exec_call(L, 0, LUA_MULTRET) != LUA_OK)
        return exec_report(L, "eldr");
    print_results(L, base);
    lua_settop(L, base);
    return 0;
}

/* ---- history ---- */

static char history_path[4096];

static void history_open(void)
{
    const char *home = getenv("HOME");
    if (!home || !*home)
        return;
    snprintf(history_path, sizeof history_path, "%s/.eldr_history", home);
    history_write_timestamps = 1;   /* needed to keep multi-line entries whole */
    history_multiline_entries = 1;
    using_history();
    stifle_history(REPL_HISTORY_MAX);
    if (read_history(history_path) != 0)
        write_history(history_path); /* create it, so appends work */
}

static void history_add(const char *chunk)
{
    HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1)
                                          : NULL;
    if (last && !strcmp(last->line, chunk))
        return;
    add_history(chunk);
    if (history_path[0] && append_history(1, history_path) == 0)
        history_truncate_file(history_path, REPL_HISTORY_MAX);
}

/* ---- the prompt loop ---- */

static volatile sig_atomic_t prompt_sigint;
static char *pending;          /* a line readline handed over */
static int got_line, got_eof;

static void on_prompt_sigint(int sig)
{
    (void)sig;
    prompt_sigint = 1;
}

static void on_line(char *line)
{
    rl_callback_handler_remove();
    if (!line)
        got_eof = 1;
    else {
        pending = line;
        got_line = 1;
    }
}

/* Append line to the chunk being built (a malloc'd string). */
static char *chunk_add(char *chunk, const char *line)
{
    size_t a = chunk ? strlen(chunk) : 0, b = strlen(line);
    char *c = realloc(chunk, a + b + 2);
    if (!c) {
        free(chunk);
        return NULL;
    }
    if (a)
        c[a++] = '\n';
    memcpy(c + a, line, b + 1);
    return c;
}

/* Handle a finished line; returns 1 when the prompt should end. */
static int handle_line(lua_State *L, char **chunk, int use_history)
{
    char *line = pending;
    pending = NULL;
    if (!*chunk && (!strcmp(line, ":quit") || !strcmp(line, ":q"))) {
        free(line);
        return 1;
    }
    *chunk = chunk_add(*chunk, line);
    free(line);
    if (!*chunk)
        return 0;
    if (**chunk != ':') {
        int top = lua_gettop(L);
        int status = compile(L, *chunk);
        int more = incomplete(L, status);
        lua_settop(L, top);
        if (more)
            return 0; /* keep reading: continuation prompt */
    }
    if (use_history && strspn(*chunk, " \t\n") < strlen(*chunk))
        history_add(*chunk);
    repl_eval(L, *chunk);
    free(*chunk);
    *chunk = NULL;
    return 0;
}

int repl_interactive(lua_State *L, int use_history)
{
    if (use_history)
        history_open();
    complete_init(L);
    rl_catch_signals = 0;      /* we handle SIGINT ourselves */
    rl_readline_name = "eldr";
    lua_getglobal(L, "eldr");
    lua_getfield(L, -1, "version");
    printf("eldr %s, Lua 5.4 - :help lists the functions, Tab completes, Ctrl-D leaves\n",
           lua_isstring(L, -1) ? lua_tostring(L, -1) : "?");
    lua_pop(L, 2);
    fflush(stdout);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_prompt_sigint;
    sigemptyset(&sa.sa_mask);
    char *chunk = NULL;
    int done = 0;
    while (!done) {
        sigaction(SIGINT, &sa, &old);
        rl_callback_handler_install(chunk ? PROMPT2 : PROMPT1, on_line);
        got_line = got_eof = 0;
        while (!got_line && !got_eof) {
            fd_set fds;
            FD_ZERO(&fds);
            FD_SET(fileno(rl_instream ? rl_instream : stdin), &fds);
            int r = select(fileno(rl_instream ? rl_instream : stdin) + 1, &fds, NULL, NULL,
                           NULL);
            if (r < 0 && errno == EINTR) {
                if (prompt_sigint) {
                    /* Ctrl-C at the prompt: drop the line and the chunk */
                    prompt_sigint = 0;
                    rl_free_line_state();
                    rl_callback_sigcleanup();
                    rl_replace_line("", 0);
                    rl_callback_handler_remove();
                    fputs("^C\n", stdout);
                    free(chunk);
                    chunk = NULL;
                    rl_callback_handler_install(PROMPT1, on_line);
                }
                continue;
            }
            if (r > 0)
                rl_callback_read_char();
        }
        sigaction(SIGINT, &old, NULL);
        if (got_eof) {
            fputs("\n", stdout);
            break;
        }
        done = handle_line(L, &chunk, use_history);
    }
    free(chunk);
    rl_callback_handler_remove();
    fflush(stdout);
    return 0;
}
