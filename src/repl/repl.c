/* repl.c - the interactive prompt (repl.h): readline's callback interface
 * so that Ctrl-C at the prompt can drop the line cleanly, chunks that
 * continue over lines, values printed, :help, persistent history. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        repl_show(lua_tostring(L, -1)); /* grouped by area, paged */
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
    /* timestamps ("#" lines) mark where each entry starts, which is what
     * keeps multi-line chunks whole in the file */
    history_comment_char = '#';
    history_write_timestamps = 1;
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

/* ---- the prompt loop ----
 *
 * readline calls on_line for every finished line, with the terminal back
 * in its normal mode; the line is handled (and Lua runs) right there. The
 * handler stays installed: readline may already hold typed-ahead keys,
 * and it keeps feeding them to the handler after it returns. */

static volatile sig_atomic_t prompt_sigint;
static struct sigaction prompt_sa;
static lua_State *RL;
static char *chunk;            /* the unfinished chunk, or NULL */
static int use_hist, done, dropped;

static void on_prompt_sigint(int sig)
{
    (void)sig;
    prompt_sigint = 1;
}

/* Append line to the chunk being built (a malloc'd string). */
static char *chunk_add(char *c, const char *line)
{
    size_t a = c ? strlen(c) : 0, b = strlen(line);
    char *n = realloc(c, a + b + 2);
    if (!n) {
        free(c);
        return NULL;
    }
    if (a)
        n[a++] = '\n';
    memcpy(n + a, line, b + 1);
    return n;
}

/* Handle one finished line: quit, continue the chunk, or run it. */
static void handle_line(char *line)
{
    if (!chunk && (!strcmp(line, ":quit") || !strcmp(line, ":q"))) {
        done = 1;
        return;
    }
    if (!(chunk = chunk_add(chunk, line)))
        return;
    if (*chunk != ':') {
        int top = lua_gettop(RL);
        int more = incomplete(RL, compile(RL, chunk));
        lua_settop(RL, top);
        if (more)
            return; /* keep reading: continuation prompt */
    }
    if (use_hist && strspn(chunk, " \t\n") < strlen(chunk))
        history_add(chunk);
    repl_eval(RL, chunk);
    free(chunk);
    chunk = NULL;
}

static void on_line(char *line)
{
    if (!line) {
        done = 1;
        fputs("\n", stdout);
    } else {
        struct sigaction old;
        sigaction(SIGINT, NULL, &old);
        handle_line(line);
        sigaction(SIGINT, &prompt_sa, NULL); /* exec_call restored the old one */
        free(line);
    }
    if (done)
        rl_callback_handler_remove();
    else
        rl_set_prompt(chunk ? PROMPT2 : PROMPT1);
}

/* Ctrl-C at the prompt: readline's read() returns EINTR (our handler is
 * installed without SA_RESTART) and readline calls this hook, outside
 * the signal handler, where it is safe to reset the line. */
static int on_signal_event(void)
{
    if (!prompt_sigint)
        return 0;
    prompt_sigint = 0;
    rl_replace_line("", 0);
    rl_point = rl_end = 0;
    fputs("^C\n", stdout);
    free(chunk);
    chunk = NULL;
    rl_set_prompt(PROMPT1);
    rl_on_new_line();
    rl_redisplay();
    dropped = 1;
    return 0;
}

int repl_interactive(lua_State *L, int use_history)
{
    RL = L;
    use_hist = use_history;
    done = 0;
    if (use_history)
        history_open();
    complete_init(L);
    rl_catch_signals = 0;      /* we handle SIGINT ourselves */
    rl_signal_event_hook = on_signal_event;
    rl_readline_name = "eldr";
    lua_getglobal(L, "eldr");
    lua_getfield(L, -1, "version");
    printf("eldr %s, Lua 5.4 - :help lists the functions, Tab completes, Ctrl-D leaves\n",
           lua_isstring(L, -1) ? lua_tostring(L, -1) : "?");
    lua_pop(L, 2);
    fflush(stdout);
    struct sigaction old;
    memset(&prompt_sa, 0, sizeof prompt_sa);
    prompt_sa.sa_handler = on_prompt_sigint; /* no SA_RESTART: read() must see EINTR */
    sigemptyset(&prompt_sa.sa_mask);
    sigaction(SIGINT, &prompt_sa, &old);
    rl_callback_handler_install(PROMPT1, on_line);
    while (!done)
        rl_callback_read_char();
    sigaction(SIGINT, &old, NULL);
    free(chunk);
    chunk = NULL;
    (void)dropped;
    fflush(stdout);
    return 0;
}
