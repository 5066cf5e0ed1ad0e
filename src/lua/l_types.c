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
    l_pushweakreg(L, FITTED_ON, "kv");
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

void l_push_fitted_on(lua_State *L, int model_idx)
{
    if (!model_idx) {
        lua_pushnil(L);
        return;
    }
    model_idx = lua_absindex(L, model_idx);
    push_fitted_on(L);
    lua_pushvalue(L, model_idx);
    lua_rawget(L, -2);
    lua_remove(L, -2);
}

/* ---- lineage: which rows of which loaded Trace a derived one holds ---- */

#define LINEAGE "eldr.lineage"   /* registry: Trace -> {root, rows}, weak keys */

static void push_lineage(lua_State *L)
{
    l_pushweakreg(L, LINEAGE, "k");
}

/* Push the root Trace of the Trace at idx (itself when it has no
 * lineage); *rows: its rows in the root (NULL: the identity), *n their
 * count. */
static void push_root(lua_State *L, int idx, const int64_t **rows, int64_t *n)
{
    idx = lua_absindex(L, idx);
    push_lineage(L);
    lua_pushvalue(L, idx);
    if (lua_rawget(L, -2) == LUA_TTABLE) {
        lua_getfield(L, -1, "rows");
        *rows = lua_touserdata(L, -1);
        *n = (int64_t)(lua_rawlen(L, -1) / sizeof **rows);
        lua_getfield(L, -2, "root");
        lua_replace(L, -4);
        lua_pop(L, 2);
        return;
    }
    lua_pop(L, 2);
    lua_pushvalue(L, idx);
    l_trace *u = luaL_testudata(L, idx, L_TRACE);
    *rows = NULL;
    *n = u && u->t ? u->t->n : 0;
}

void l_set_lineage(lua_State *L, int child, int parent, const int64_t *rows, int64_t n)
{
    child = lua_absindex(L, child);
    parent = lua_absindex(L, parent);
    const int64_t *prow;
    int64_t pn;
    push_root(L, parent, &prow, &pn);                 /* root */
    lua_createtable(L, 0, 2);
    lua_insert(L, -2);
    lua_setfield(L, -2, "root");                      /* {root} */
    int64_t *own = lua_newuserdatauv(L, (size_t)n * sizeof *own, 0);   /* its size is n */
    for (int64_t i = 0; i < n; i++)
        own[i] = prow ? prow[rows[i]] : rows[i];
    lua_setfield(L, -2, "rows");
    push_lineage(L);
    lua_pushvalue(L, child);
    lua_pushvalue(L, -3);
    lua_rawset(L, -3);
    lua_pop(L, 2);
}

int64_t l_rows_shared(lua_State *L, int a, int b, const int64_t *rows_b, int64_t n)
{
    a = lua_absindex(L, a);
    b = lua_absindex(L, b);
    const int64_t *ra, *rb;
    int64_t na, nb, both = 0;
    push_root(L, a, &ra, &na);
    push_root(L, b, &rb, &nb);
    int same = lua_rawequal(L, -1, -2);
    l_trace *root = luaL_testudata(L, -1, L_TRACE);
    int64_t root_n = root && root->t ? root->t->n : 0;
    lua_pop(L, 2);
    if (!same || !root_n)
        return 0;
    uint8_t *in_a = l_box(L, (size_t)root_n);
    for (int64_t i = 0; i < na; i++)
        in_a[ra ? ra[i] : i] = 1;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = rows_b ? rows_b[i] : i;
        both += in_a[rb ? rb[r] : r];
    }
    lua_pop(L, 1);
    return both;
}
