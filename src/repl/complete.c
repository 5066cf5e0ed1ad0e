/* complete.c - tab completion for the REPL, by context: after `x.` or
 * `x:` the fields (or methods) of the value x has in the Lua state now,
 * through its metatable's __index chain for userdata ("t:sel" ->
 * t:select, "res[1].tp" -> res[1].tpot_p50_ms, "eldr.lo" -> eldr.load),
 * never the globals; globals and keywords for a bare name; file names
 * inside an open string ('eldr.load("sam' -> "samples/"). x is a name
 * followed by .name and [literal] indexings: nothing is called to find it.
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

/* Push the value of a Lua primary expression made of a name and
 * indexings by a name or a literal key: a, a.b, a[1], a["k"].c, x['y'][2].
 * Nothing is called (no parentheses are accepted), so completing runs no
 * user code but metamethods (__index), and this runs under pcall. Returns
 * 0 and pushes nothing when expr is not of that form. */
static int push_path(lua_State *L, const char *expr)
{
    const char *p = expr, *q = expr;
    while (*q == '_' || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
           (q > p && *q >= '0' && *q <= '9'))
        q++;
    if (q == p)
        return 0;
    lua_pushglobaltable(L);
    lua_pushlstring(L, p, (size_t)(q - p));
    lua_gettable(L, -2);
    lua_remove(L, -2);
    for (p = q; *p;) {
        if (lua_isnil(L, -1))
            break;
        if (*p == '.') {
            for (q = ++p; *q && *q != '.' && *q != '['; q++)
                ;
            lua_pushlstring(L, p, (size_t)(q - p));
            if (!is_ident(lua_tostring(L, -1)))
                return lua_pop(L, 2), 0;
        } else if (*p == '[' && (p[1] == '"' || p[1] == '\'')) {
            const char *e = strchr(p + 2, p[1]);
            if (!e || e[1] != ']')
                return lua_pop(L, 1), 0;
            lua_pushlstring(L, p + 2, (size_t)(e - p - 2));
            q = e + 2;
        } else if (*p == '[') {
            char *e;
            double v = strtod(p + 1, &e);
            if (e == p + 1 || *e != ']')
                return lua_pop(L, 1), 0;
            if (v == (double)(lua_Integer)v)
                lua_pushinteger(L, (lua_Integer)v);
            else
                lua_pushnumber(L, v);
            q = e + 1;
        } else
            return lua_pop(L, 1), 0;
        lua_gettable(L, -2); /* may run __index: we are under pcall */
        lua_remove(L, -2);
        p = q;
    }
    return 1;
}

/* collect(expr, prefix, word, methods) -> list of candidates: the fields
 * of the value of expr (methods: functions only) starting with word, each
 * as prefix..field; with expr nil, the globals and keywords. */
static int collect(lua_State *L)
{
    const char *prefix = luaL_checkstring(L, 2), *word = luaL_checkstring(L, 3);
    int methods = lua_toboolean(L, 4);
    lua_newtable(L);
    int out = lua_gettop(L);
    if (lua_isnil(L, 1)) {
        lua_pushglobaltable(L);
        add_keys(L, lua_gettop(L), out, prefix, word, 0);
        lua_pop(L, 1);
        size_t wl = strlen(word);
        for (int i = 0; keywords[i]; i++)
            if (!strncmp(keywords[i], word, wl)) {
                lua_pushfstring(L, "%s%s", prefix, keywords[i]);
                lua_rawseti(L, out, (lua_Integer)lua_rawlen(L, out) + 1);
            }
        return 1;
    }
    if (push_path(L, lua_tostring(L, 1)) && !lua_isnil(L, -1))
        add_fields(L, -1, out, prefix, word, methods);
    lua_settop(L, out);
    return 1;
}

static int is_word_char(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* The start of the primary expression that ends at line[end) (before a
 * '.' or ':'): names, '.name' and '[...]' indexings, scanned backwards. */
static int expr_start(const char *line, int end)
{
    int i = end;
    while (i > 0) {
        if (line[i - 1] == ']') {
            int depth = 0;
            while (i > 0) {
                char c = line[--i];
                depth += c == ']' ? 1 : c == '[' ? -1 : 0;
                if (depth == 0)
                    break;
            }
            continue;
        }
        int j = i;
        while (j > 0 && is_word_char(line[j - 1]))
            j--;
        if (j == i)
            break;
        i = j;
        if (i > 0 && line[i - 1] == '.')
            i--;
        else
            break;
    }
    return i;
}

/* What is being completed in text (ending at line[end)): *expr (malloc'd,
 * NULL for a bare name), the word after the separator, and whether the
 * separator is ':' (methods). */
static void context_of(const char *text, int end, char **expr, const char **word,
                       int *methods)
{
    const char *line = rl_line_buffer;
    size_t tl = strlen(text);
    size_t wl = 0;
    while (wl < tl && is_word_char(text[tl - wl - 1]))
        wl++;
    *word = text + tl - wl;
    *expr = NULL;
    *methods = 0;
    int sep = end - (int)wl - 1;
    if (sep < 0 || (line[sep] != '.' && line[sep] != ':'))
        return;
    *methods = line[sep] == ':';
    int s = expr_start(line, sep);
    *expr = strndup(line + s, (size_t)(sep - s));
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

static int complete_end;       /* rl_point when completion started */

static char *generator(const char *text, int state)
{
    if (state == 0) {
        free_matches();
        int top = lua_gettop(CL);
        char *expr;
        const char *word;
        int methods;
        context_of(text, complete_end, &expr, &word, &methods);
        lua_pushcfunction(CL, collect);
        if (expr)
            lua_pushstring(CL, expr);
        else
            lua_pushnil(CL);
        lua_pushlstring(CL, text, (size_t)(word - text));
        lua_pushstring(CL, word);
        lua_pushboolean(CL, methods);
        free(expr);
        if (lua_pcall(CL, 4, 1, 0) == LUA_OK && lua_istable(CL, -1)) {
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
    complete_end = end;
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
