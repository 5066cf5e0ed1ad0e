/* l_util.c - argument checking, help registry and classes for the eldr
 * Lua module (l_util.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "l_util.h"

#define HELP_KEY "eldr.help"
#define HELPFN_KEY "eldr.helpfn"   /* function value -> its full name */

volatile int l_cancel_flag;

void l_cancel_reset(void)
{
    l_cancel_flag = 0;
}

/* ---- errors ---- */

int l_argerror(lua_State *L, const char *fn, const char *name, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return luaL_error(L, "eldr.%s: bad argument '%s' (%s)", fn, name, what);
}

int l_fail(lua_State *L, const char *fn, const char *msg)
{
    return luaL_error(L, "eldr.%s: %s", fn, msg);
}

const char *l_got(lua_State *L, int idx, char *buf, size_t len)
{
    if (lua_isinteger(L, idx))
        snprintf(buf, len, "%lld", (long long)lua_tointeger(L, idx));
    else if (lua_type(L, idx) == LUA_TNUMBER)
        snprintf(buf, len, "%.6g", lua_tonumber(L, idx));
    else if (lua_type(L, idx) == LUA_TSTRING)
        snprintf(buf, len, "'%.30s'", lua_tostring(L, idx));
    else if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) {
        const char *n = lua_tostring(L, -1);
        const char *dot = strrchr(n, '.');
        snprintf(buf, len, "%s", dot ? dot + 1 : n);
        lua_pop(L, 1);
    } else
        snprintf(buf, len, "%s", luaL_typename(L, idx));
    return buf;
}

/* ---- the coercion rule (l_util.h) ---- */

int l_coerce(lua_State *L, int idx, l_kind kind, lua_Integer *i, double *d)
{
    int t = lua_type(L, idx);
    switch (kind) {
    case L_INT: {
        if (t != LUA_TNUMBER)
            return 0;
        int ok;
        lua_Integer v = lua_tointegerx(L, idx, &ok);   /* a number: exact or not at all */
        if (ok && i)
            *i = v;
        return ok;
    }
    case L_NUM:
        if (t != LUA_TNUMBER || !isfinite(lua_tonumber(L, idx)))
            return 0;
        if (d)
            *d = lua_tonumber(L, idx);
        return 1;
    case L_BOOL:
        return t == LUA_TBOOLEAN;
    case L_STR:
        return t == LUA_TSTRING;
    }
    return 0;
}

/* "got X", and why when X is a string that reads as a number. */
static const char *got_why(lua_State *L, int idx, l_kind kind, char *buf, size_t len)
{
    char g[48];
    l_got(L, idx, g, sizeof g);
    if ((kind == L_INT || kind == L_NUM) && lua_type(L, idx) == LUA_TSTRING &&
        lua_stringtonumber(L, lua_tostring(L, idx))) {
        lua_pop(L, 1);
        snprintf(buf, len, "%s, a string: write the number without quotes", g);
    } else if (kind == L_INT && lua_type(L, idx) == LUA_TNUMBER && !lua_isinteger(L, idx) &&
               isfinite(lua_tonumber(L, idx)) && lua_tonumber(L, idx) == floor(lua_tonumber(L, idx)))
        snprintf(buf, len, "%s, beyond the integers", g);
    else
        snprintf(buf, len, "%s", g);
    return buf;
}

lua_Integer l_checkint(lua_State *L, int idx, const char *fn, const char *name,
                       lua_Integer lo, lua_Integer hi)
{
    lua_Integer v = 0;
    if (!l_coerce(L, idx, L_INT, &v, NULL) || v < lo || v > hi) {
        char got[96];
        l_argerror(L, fn, name, "integer %lld..%lld expected, got %s", (long long)lo,
                   (long long)hi, got_why(L, idx, L_INT, got, sizeof got));
    }
    return v;
}

double l_checknumin(lua_State *L, int idx, const char *fn, const char *name, double lo,
                    double hi)
{
    double v = 0;
    if (!l_coerce(L, idx, L_NUM, NULL, &v) || v < lo || v > hi) {
        char got[96];
        if (lo == -HUGE_VAL && hi == HUGE_VAL)
            l_argerror(L, fn, name, "finite number expected, got %s",
                       got_why(L, idx, L_NUM, got, sizeof got));
        l_argerror(L, fn, name, "number %g..%g expected, got %s", lo, hi,
                   got_why(L, idx, L_NUM, got, sizeof got));
    }
    return v;
}

/* ---- positional arguments ---- */

void *l_checkudata(lua_State *L, int idx, const char *cls, const char *fn, const char *name)
{
    void *p = luaL_testudata(L, idx, cls);
    if (!p) {
        char got[48];
        const char *dot = strrchr(cls, '.');
        l_argerror(L, fn, name, "%s expected, got %s", dot ? dot + 1 : cls,
                   l_got(L, idx, got, sizeof got));
    }
    return p;
}

double l_checknum(lua_State *L, int idx, const char *fn, const char *name)
{
    return l_checknumin(L, idx, fn, name, -HUGE_VAL, HUGE_VAL);
}

const char *l_checkstr(lua_State *L, int idx, const char *fn, const char *name)
{
    if (!l_coerce(L, idx, L_STR, NULL, NULL)) {
        char got[48];
        l_argerror(L, fn, name, "string expected, got %s", l_got(L, idx, got, sizeof got));
    }
    return lua_tostring(L, idx);
}

/* ---- option tables ---- */

void l_checkopts(lua_State *L, int idx, const char *fn, const char *const *known)
{
    if (lua_isnoneornil(L, idx))
        return;
    if (!lua_istable(L, idx)) {
        char got[48];
        l_argerror(L, fn, "options", "table expected, got %s", l_got(L, idx, got, sizeof got));
    }
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        int found = 0;
        for (int i = 0; k && known[i]; i++)
            found |= !strcmp(k, known[i]);
        if (!found) {
            luaL_Buffer b;
            luaL_buffinit(L, &b);
            for (int i = 0; known[i]; i++) {
                if (i)
                    luaL_addstring(&b, ", ");
                luaL_addstring(&b, known[i]);
            }
            luaL_pushresult(&b);
            char got[48];
            luaL_error(L, "eldr.%s: unknown option %s (known: %s)", fn,
                       l_got(L, -2, got, sizeof got), lua_tostring(L, -1));
        }
    }
}

int l_getopt(lua_State *L, int idx, const char *key)
{
    if (!lua_istable(L, idx)) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    return lua_getfield(L, idx, key);
}

lua_Integer l_optint(lua_State *L, int idx, const char *fn, const char *key, lua_Integer lo,
                     lua_Integer hi, lua_Integer def)
{
    if (l_getopt(L, idx, key) == LUA_TNIL) {
        lua_pop(L, 1);
        return def;
    }
    lua_Integer v = l_checkint(L, -1, fn, key, lo, hi);
    lua_pop(L, 1);
    return v;
}

double l_optnum(lua_State *L, int idx, const char *fn, const char *key, double lo, double hi,
                double def)
{
    if (l_getopt(L, idx, key) == LUA_TNIL) {
        lua_pop(L, 1);
        return def;
    }
    double v = l_checknumin(L, -1, fn, key, lo, hi);
    lua_pop(L, 1);
    return v;
}

int l_optbool(lua_State *L, int idx, const char *fn, const char *key, int def)
{
    int t = l_getopt(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return def;
    }
    if (!l_coerce(L, -1, L_BOOL, NULL, NULL)) {
        char got[48];
        l_argerror(L, fn, key, "boolean expected, got %s", l_got(L, -1, got, sizeof got));
    }
    int v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* The string stays valid: it is a field of the options table, which is
 * on the caller's stack. */
const char *l_optstr(lua_State *L, int idx, const char *fn, const char *key, const char *def)
{
    int t = l_getopt(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return def;
    }
    if (!l_coerce(L, -1, L_STR, NULL, NULL)) {
        char got[48];
        l_argerror(L, fn, key, "string expected, got %s", l_got(L, -1, got, sizeof got));
    }
    const char *s = lua_tostring(L, -1);
    lua_pop(L, 1);
    return s;
}

int l_optfn(lua_State *L, int idx, const char *fn, const char *key, const char *what)
{
    if (l_getopt(L, idx, key) == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    if (!lua_isfunction(L, -1)) {
        char got[48];
        l_argerror(L, fn, key, "%s expected, got %s", what, l_got(L, -1, got, sizeof got));
    }
    return lua_gettop(L);
}

int l_optnumlist(lua_State *L, int opts, const char *fn, const char *key, double lo,
                 double hi, double *out, int max)
{
    int t = l_getopt(L, opts, key), n = 0;
    int idx = lua_gettop(L);
    if (t == LUA_TNUMBER) {
        lua_createtable(L, 1, 0);
        lua_pushvalue(L, idx);
        lua_rawseti(L, -2, 1);
        lua_replace(L, idx);
    } else if (t != LUA_TNIL && t != LUA_TTABLE) {
        char got[48];
        l_argerror(L, fn, key, "a number or a list of numbers expected, got %s",
                   l_got(L, idx, got, sizeof got));
    }
    if (t != LUA_TNIL) {
        n = (int)lua_rawlen(L, idx);
        if (n < 1 || n > max)
            l_argerror(L, fn, key, "a number or a list of 1..%d numbers expected", max);
        for (int i = 0; i < n; i++) {
            lua_rawgeti(L, idx, i + 1);
            double v = 0;
            if (!l_coerce(L, -1, L_NUM, NULL, &v) || !(v >= lo && v <= hi)) {
                char got[96];
                l_argerror(L, fn, key, "numbers in [%g, %g] expected, got %s at [%d]", lo, hi,
                           got_why(L, -1, L_NUM, got, sizeof got), i + 1);
            }
            out[i] = v;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    return n;
}

/* ---- weak tables ---- */

void l_newweak(lua_State *L, const char *mode)
{
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushstring(L, mode);
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
}

void l_pushweakreg(lua_State *L, const char *key, const char *mode)
{
    if (lua_getfield(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE)
        return;
    lua_pop(L, 1);
    l_newweak(L, mode);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, key);
}

/* ---- lists ---- */

void *l_box(lua_State *L, size_t n)
{
    void *p = lua_newuserdatauv(L, n ? n : 1, 0);
    memset(p, 0, n ? n : 1);
    return p;
}

int64_t *l_checkintlist(lua_State *L, int idx, const char *fn, const char *what, int64_t lo,
                        int64_t hi, int64_t *n)
{
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx)) {
        char got[48];
        l_argerror(L, fn, what, "list of integers expected, got %s",
                   l_got(L, idx, got, sizeof got));
    }
    lua_Integer len = (lua_Integer)lua_rawlen(L, idx);
    int64_t *a = l_box(L, (size_t)len * sizeof *a);
    for (lua_Integer i = 1; i <= len; i++) {
        lua_rawgeti(L, idx, i);
        char name[96];
        snprintf(name, sizeof name, "%s[%lld]", what, (long long)i);
        a[i - 1] = l_checkint(L, -1, fn, name, lo, hi);
        lua_pop(L, 1);
    }
    *n = len;
    return a;
}

double *l_checknumlist(lua_State *L, int idx, const char *fn, const char *what, int64_t *n)
{
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx)) {
        char got[48];
        l_argerror(L, fn, what, "list of numbers expected, got %s",
                   l_got(L, idx, got, sizeof got));
    }
    lua_Integer len = (lua_Integer)lua_rawlen(L, idx);
    double *a = l_box(L, (size_t)len * sizeof *a);
    for (lua_Integer i = 1; i <= len; i++) {
        lua_rawgeti(L, idx, i);
        char name[96];
        snprintf(name, sizeof name, "%s[%lld]", what, (long long)i);
        a[i - 1] = l_checknum(L, -1, fn, name);
        lua_pop(L, 1);
    }
    *n = len;
    return a;
}

void l_pushints(lua_State *L, const int *a, int64_t n, int base)
{
    lua_createtable(L, (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)a[i] + base);
        lua_rawseti(L, -2, i + 1);
    }
}

void l_pushint64s(lua_State *L, const int64_t *a, int64_t n, int base)
{
    lua_createtable(L, (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)a[i] + base);
        lua_rawseti(L, -2, i + 1);
    }
}

void l_pushnum_or_nil(lua_State *L, double x)
{
    if (isnan(x))
        lua_pushnil(L);
    else
        lua_pushnumber(L, x);
}

void l_setnum(lua_State *L, const char *k, double v)
{
    l_pushnum_or_nil(L, v);
    lua_setfield(L, -2, k);
}

void l_setint(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

void l_pushnums(lua_State *L, const double *a, int64_t n)
{
    lua_createtable(L, (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
        lua_pushnumber(L, a[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* ---- classes and help ---- */

void l_pushhelp(lua_State *L)
{
    if (lua_getfield(L, LUA_REGISTRYINDEX, HELP_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_setfield(L, LUA_REGISTRYINDEX, HELP_KEY);
    }
}

void l_sethelp(lua_State *L, const char *name, const char *help)
{
    l_pushhelp(L);
    lua_pushstring(L, help);
    lua_setfield(L, -2, name);
    lua_pop(L, 1);
}

void l_pushhelpfn(lua_State *L)
{
    if (lua_getfield(L, LUA_REGISTRYINDEX, HELPFN_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_setfield(L, LUA_REGISTRYINDEX, HELPFN_KEY);
    }
}

void l_sethelpfn(lua_State *L, int fn_idx, const char *name)
{
    fn_idx = lua_absindex(L, fn_idx);
    l_pushhelpfn(L);
    lua_pushvalue(L, fn_idx);
    if (lua_rawget(L, -2) == LUA_TNIL) { /* the first name a function got wins */
        lua_pushvalue(L, fn_idx);
        lua_pushstring(L, name);
        lua_rawset(L, -4);
    }
    lua_pop(L, 2);
}

void l_register(lua_State *L, const l_fn *fns, const char *prefix)
{
    for (const l_fn *f = fns; f->name; f++) {
        char full[128];
        snprintf(full, sizeof full, "%s%s", prefix, f->name);
        lua_pushcfunction(L, f->fn);
        l_sethelpfn(L, -1, full); /* so that help(eldr.fit) finds "eldr.fit" */
        lua_setfield(L, -2, f->name);
        l_sethelp(L, full, f->help);
    }
}

void l_newclass(lua_State *L, const char *cls, const char *display, const l_fn *methods,
                lua_CFunction gc, lua_CFunction tostring, lua_CFunction len)
{
    luaL_newmetatable(L, cls);
    lua_newtable(L);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s:", display);
    l_register(L, methods, prefix);
    lua_setfield(L, -2, "__index");
    if (gc) {
        lua_pushcfunction(L, gc);
        lua_setfield(L, -2, "__gc");
    }
    if (tostring) {
        lua_pushcfunction(L, tostring);
        lua_setfield(L, -2, "__tostring");
    }
    if (len) {
        lua_pushcfunction(L, len);
        lua_setfield(L, -2, "__len");
    }
    lua_pop(L, 1);
}
