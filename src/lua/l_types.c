/* l_types.c - the userdata of the eldr Lua module (l_types.h): their
 * constructors and the argument checkers every binding file uses (a
 * Trace, a Model, Signatures, a Recipe, a variant name, a layer option).
 * They live here, not in the file that binds each class, so that a
 * binding file that takes a Trace does not call into l_trace.c and the
 * binding files call no one but this room and l_util.c
 * (tests/arch/rooms.py checks that no two of them call each other). */
#include <stdint.h>
#include <string.h>

#include "err.h"
#include "l_types.h"
#include "l_util.h"

/* A zeroed userdata of class cls pushed on the stack. */
static void *new_udata(lua_State *L, size_t size, const char *cls)
{
    void *u = lua_newuserdatauv(L, size, 0);
    memset(u, 0, size);
    luaL_setmetatable(L, cls);
    return u;
}

/* The userdata of class cls at idx; its object present (live != 0) or a
 * bad-argument error "empty Display". */
static void *check_live(lua_State *L, void *u, int live, const char *fn, const char *name,
                        const char *what)
{
    if (!live)
        l_argerror(L, fn, name, "%s", what);
    return u;
}

l_trace *l_newtrace(lua_State *L)
{
    return new_udata(L, sizeof(l_trace), L_TRACE);
}

l_recipe *l_newrecipe(lua_State *L)
{
    return new_udata(L, sizeof(l_recipe), L_RECIPE);
}

l_model *l_newmodel(lua_State *L)
{
    return new_udata(L, sizeof(l_model), L_MODEL);
}

l_sigs *l_newsigs(lua_State *L, int64_t n, int64_t d, const char *fn)
{
    l_sigs *u = new_udata(L, sizeof *u, L_SIGS);
    size_t phys = eldr_phys_mem();
    if (n < 0 || d < 0 || (d && (size_t)n > SIZE_MAX / sizeof(float) / (size_t)d) ||
        (phys && (size_t)n * (size_t)d * sizeof(float) > phys))
        luaL_error(L, "eldr.%s: %lld x %lld signatures exceed memory", fn, (long long)n,
                   (long long)d);
    u->x = eldr_calloc((size_t)(n * d) + 1, sizeof *u->x);
    u->zero = eldr_calloc((size_t)n + 1, 1);
    if (!u->x || !u->zero)
        luaL_error(L, "eldr.%s: out of memory for %lld x %lld signatures", fn, (long long)n,
                   (long long)d);
    u->n = n;
    u->d = d;
    return u;
}

trace_t *l_checktrace(lua_State *L, int idx, const char *fn, const char *name)
{
    l_trace *u = l_checkudata(L, idx, L_TRACE, fn, name);
    return ((l_trace *)check_live(L, u, u->t != NULL, fn, name, "empty Trace"))->t;
}

model_t *l_checkmodel(lua_State *L, int idx, const char *fn, const char *name)
{
    l_model *u = l_checkudata(L, idx, L_MODEL, fn, name);
    return ((l_model *)check_live(L, u, u->m != NULL, fn, name, "empty Model"))->m;
}

sig_recipe *l_checkrecipe(lua_State *L, int idx, const char *fn, const char *name)
{
    l_recipe *u = l_checkudata(L, idx, L_RECIPE, fn, name);
    return &((l_recipe *)check_live(L, u, u->ready, fn, name, "empty Recipe"))->r;
}

l_sigs *l_checksigs(lua_State *L, int idx, const char *fn, const char *name)
{
    l_sigs *u = l_checkudata(L, idx, L_SIGS, fn, name);
    return check_live(L, u, u->x != NULL, fn, name, "released Signatures");
}

sig_variant l_checkvariant(lua_State *L, const char *fn, const char *name)
{
    int v = sig_variant_parse(name);
    if (v < 0)
        l_argerror(L, fn, "variant", "count, count_idf, sqrt_count, binary, gate_prob or "
                   "gate_logit expected, got '%s'", name);
    return (sig_variant)v;
}

int l_checklayers(lua_State *L, int idx, const char *fn, const char *key, int nlayers,
                  const char *def, int **list, int *n)
{
    int t = l_getopt(L, idx, key);
    if (t == LUA_TNIL || t == LUA_TSTRING) {
        const char *s = t == LUA_TNIL ? def : lua_tostring(L, -1);
        lua_pop(L, 1);
        if (!strcmp(s, "all"))
            return 0;
        if (!strcmp(s, "auto"))
            return 1;
        return l_argerror(L, fn, key, "'all', 'auto' or a list of 0-based layers expected, "
                          "got '%s'", s);
    }
    int64_t len;
    int64_t *v = l_checkintlist(L, -1, fn, key, 0, nlayers - 1, &len);
    if (len < 1)
        l_argerror(L, fn, key, "a non-empty list of layers expected");
    int *out = l_box(L, (size_t)len * sizeof *out);
    for (int64_t i = 0; i < len; i++)
        out[i] = (int)v[i];
    /* keep the int box, drop the option value and the int64 box */
    lua_replace(L, -3);
    lua_pop(L, 1);
    *list = out;
    *n = (int)len;
    return 2;
}

const char *l_trace_path(lua_State *L, int idx)
{
    l_trace *u = luaL_testudata(L, idx, L_TRACE);
    return u ? u->path : NULL;
}

#define FITTED_ON "eldr.fitted_on"   /* registry: Model -> Trace, weak both ways */

static void push_fitted_on(lua_State *L)
{
    if (lua_getfield(L, LUA_REGISTRYINDEX, FITTED_ON) == LUA_TTABLE)
        return;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushstring(L, "kv");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, FITTED_ON);
}

void l_mark_fitted_on(lua_State *L, int model_idx, int trace_idx)
{
    model_idx = lua_absindex(L, model_idx);
    trace_idx = lua_absindex(L, trace_idx);
    push_fitted_on(L);
    lua_pushvalue(L, model_idx);
    lua_pushvalue(L, trace_idx);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

int l_fitted_on(lua_State *L, int model_idx, int trace_idx)
{
    if (!model_idx || !trace_idx)
        return 0;
    model_idx = lua_absindex(L, model_idx);
    trace_idx = lua_absindex(L, trace_idx);
    push_fitted_on(L);
    lua_pushvalue(L, model_idx);
    lua_rawget(L, -2);
    int same = lua_rawequal(L, -1, trace_idx);
    lua_pop(L, 2);
    return same;
}
