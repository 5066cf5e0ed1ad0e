/* complete.c - tab completion for the REPL: globals and keywords, the
 * fields of tables ("eldr.lo" -> eldr.load), the methods of objects
 * through their metatables' __index tables ("t:sel" -> t:select), and
 * file names inside an open string ('eldr.load("sam' -> "samples/").
 *
 * The candidates are collected by a C function run under lua_pcall, so a
 * metamethod that raises cannot longjmp through readline. */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <readline/readline.h>

#include "repl.h"

static lua_State *CL;

static const char *const keywords[] = {
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
    "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
    NULL};

void complete_init(lua_State *L)
{
    CL = L;
    rl_attempted_completion_function = complete_attempt;
    /* '.' and ':' are part of the word being completed */
    rl_completer_word_break_characters = " \t\n\"\\'`@$><=;|&{(,+-*/%^#~[]";
    rl_basic_word_break_characters = rl_completer_word_break_characters;
    /* readline finds an unclosed quote itself and then completes the whole
     * quoted text (slashes included), telling us the quote it found */
    rl_completer_quote_characters = "\"'";
}

static int is_ident(const char *s)
{
    if (!s || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
        return 0;
    for (s++; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

/* Add "prefix..key" to the result list (at index out) for every string
 * key of the table at idx starting with word; functions only when
 * methods. */
static void add_keys(lua_State *L, int idx, int out, const char *prefix, const char *word,
                     int methods)
{
    size_t wl = strlen(word);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (k && is_ident(k) && !strncmp(k, word, wl) &&
            (!methods || lua_type(L, -1) == LUA_TFUNCTION)) {
            lua_pushfstring(L, "%s%s", prefix, k);
            lua_rawseti(L, out, (lua_Integer)lua_rawlen(L, out) + 1);
        }
        lua_pop(L, 1);
    }
}

/* Fields of the value at idx, then of its metatable's __index chain. */
static void add_fields(lua_State *L, int idx, int out, const char *prefix, const char *word,
                       int methods)
{
    idx = lua_absindex(L, idx);
    lua_pushvalue(L, idx);
    for (int depth = 0; depth < 8; depth++) {
        int v = lua_gettop(L);
        if (lua_type(L, v) == LUA_TTABLE)
            add_keys(L, v, out, prefix, word, methods);
        if (!lua_getmetatable(L, v))
            break;
        lua_getfield(L, -1, "__index");
        lua_remove(L, -2);
        lua_remove(L, v);
        if (!lua_istable(L, -1))
            break;
    }
    lua_pop(L, 1);
}

/* collect(text) -> list of candidates */
static int collect(lua_State *L)
{
    const char *text = luaL_checkstring(L, 1);
    lua_newtable(L);
    int out = lua_gettop(L);
    const char *sep = NULL;
    for (const char *p = text; *p; p++)
        if (*p == '.' || *p == ':')
            sep = p;
    if (!sep) {
        lua_pushglobaltable(L);
        add_keys(L, lua_gettop(L), out, "", text, 0);
        lua_pop(L, 1);
        size_t tl = strlen(text);
        for (int i = 0; keywords[i]; i++)
            if (!strncmp(keywords[i], text, tl)) {
                lua_pushstring(L, keywords[i]);
                lua_rawseti(L, out, (lua_Integer)lua_rawlen(L, out) + 1);
            }
        return 1;
    }
    /* walk the path before the separator: a.b.c */
    lua_pushglobaltable(L);
    const char *p = text;
    while (p < sep) {
        const char *q = p;
        while (q < sep && *q != '.' && *q != ':')
            q++;
        lua_pushlstring(L, p, (size_t)(q - p));
        if (!is_ident(lua_tostring(L, -1)) || lua_isnil(L, -2))
            return 1;
        lua_gettable(L, -2); /* may run __index: we are under pcall */
        lua_remove(L, -2);
        p = q + 1;
    }
    if (lua_isnil(L, -1))
        return 1;
    lua_pushlstring(L, text, (size_t)(sep - text) + 1);
    add_fields(L, -2, out, lua_tostring(L, -1), sep + 1, *sep == ':');
    lua_pop(L, 2);
    return 1;
}

static char **matches;
static int n_matches, next_match;

static void free_matches(void)
{
    for (int i = next_match; i < n_matches; i++)
        free(matches[i]);
    free(matches);
    matches = NULL;
    n_matches = next_match = 0;
}

static char *generator(const char *text, int state)
{
    if (state == 0) {
        free_matches();
        int top = lua_gettop(CL);
        lua_pushcfunction(CL, collect);
        lua_pushstring(CL, text);
        if (lua_pcall(CL, 1, 1, 0) == LUA_OK && lua_istable(CL, -1)) {
            int n = (int)lua_rawlen(CL, -1);
            matches = calloc((size_t)n + 1, sizeof *matches);
            for (int i = 0; matches && i < n; i++) {
                lua_rawgeti(CL, -1, i + 1);
                matches[n_matches++] = strdup(lua_tostring(CL, -1));
                lua_pop(CL, 1);
            }
        }
        lua_settop(CL, top);
    }
    if (next_match < n_matches)
        return matches[next_match++]; /* readline frees it */
    return NULL;
}

char **complete_attempt(const char *text, int start, int end)
{
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1; /* never fall back on our own */
    rl_completion_append_character = '\0';
    if (rl_completion_quote_character) {
        /* inside a string: a path (eldr.load("sam -> samples/); readline
         * marks directories with '/', closes the quote after a file, and
         * must not backslash-quote anything inside a Lua string */
        rl_filename_completion_desired = 1;
        rl_filename_quoting_desired = 0;
        return rl_completion_matches(text, rl_filename_completion_function);
    }
    return rl_completion_matches(text, generator);
}
