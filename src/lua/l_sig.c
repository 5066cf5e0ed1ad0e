/* l_sig.c - recipes and signature matrices in Lua: eldr.recipe,
 * eldr.signatures, eldr.matrix, and the Recipe and Signatures userdata.
 * A Signatures is a dense float32 matrix that stays in C: Lua reads its
 * dims, a row, a cosine, or (on request) the whole as a table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "l_types.h"
#include "l_util.h"
#include "layersel.h"
#include "rho.h"

/* ---- Recipe ---- */

static int recipe_gc(lua_State *L)
{
    l_recipe *u = luaL_checkudata(L, 1, L_RECIPE);
    if (u->ready)
        sig_recipe_free(&u->r);
    u->ready = 0;
    return 0;
}

static int recipe_tostring(lua_State *L)
{
    l_recipe *u = luaL_checkudata(L, 1, L_RECIPE);
    if (!u->ready)
        lua_pushstring(L, "Recipe<empty>");
    else
        lua_pushfstring(L, "Recipe<%s, %d of %d layers, dim %d>",
                        sig_variant_name(u->r.variant), u->r.n_layers, u->r.L,
                        (int)sig_dim(&u->r));
    return 1;
}

/* eldr.recipe(trace, {variant =, layers =, pairs =, seed =}) -> Recipe [, selection]
 * IDF (count_idf) is fitted on every row of trace, the calibration set. */
static int l_recipe_new(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "recipe";
    static const char *const known[] = {"variant", "layers", "pairs", "seed", "progress", NULL};
    trace_t *t = l_checktrace(L, 1, fn, "trace");
    l_checkopts(L, 2, fn, known);
    l_progress pg;
    l_progress_opt(L, 2, fn, &pg);
    sig_variant v = l_checkvariant(L, fn, l_optstr(L, 2, fn, "variant", "count_idf"));
    int64_t pairs = RHO_DEFAULT_PAIRS; /* 0 = all pairs */
    if (l_getopt(L, 2, "pairs") == LUA_TSTRING) {
        if (strcmp(lua_tostring(L, -1), "all"))
            l_argerror(L, fn, "pairs", "positive integer or 'all' expected, got '%s'",
                       lua_tostring(L, -1));
        pairs = 0;
    } else
        pairs = l_optint(L, 2, fn, "pairs", 1, INT32_MAX, pairs);
    lua_pop(L, 1);
    uint64_t seed = (uint64_t)l_optint(L, 2, fn, "seed", 0, INT64_MAX, RHO_DEFAULT_SEED);
    int *list = NULL, nl = 0;
    int mode = l_checklayers(L, 2, fn, "layers", t->L, "all", &list, &nl);
    char err[ELDR_ERRLEN];
    float *idf = NULL;
    if (v == SIG_COUNT_IDF) {
        idf = l_box(L, TRACE_CELLS(t) * sizeof *idf);
        if (sig_idf_fit(t, NULL, t->n, idf, err, sizeof err))
            return l_fail(L, fn, err);
    }
    int nres = 1;
    layersel_result g;
    memset(&g, 0, sizeof g);
    if (mode == 1) {
        rho_pairs pr;
        int rc = pairs > 0 ? rho_pairs_sample(t->n, pairs, seed, &pr, err, sizeof err)
                           : rho_pairs_all(t->n, &pr, err, sizeof err);
        if (rc)
            return l_fail(L, fn, err);
        rc = layersel_run_progress(t, v, idf, &pr, 0, l_progress_cancel(&pg), l_progress_call,
                                   &pg, &g, err, sizeof err);
        rho_pairs_free(&pr);
        if (pg.failed && rc == 0)
            layersel_result_free(&g);
        l_progress_check(L, &pg);
        if (rc == LAYERSEL_CANCELLED)
            return luaL_error(L, "eldr.%s: interrupted", fn);
        if (rc)
            return l_fail(L, fn, err);
        list = g.mask;
        nl = g.n_star;
    }
    l_recipe *u = l_newrecipe(L);
    int rc = sig_recipe_init(&u->r, v, t->L, t->E, mode ? list : NULL, mode ? nl : 0, err,
                             sizeof err);
    u->ready = rc == 0;
    if (rc == 0 && idf)
        rc = sig_recipe_set_idf(&u->r, idf, err, sizeof err);
    if (mode == 1) {
        if (rc == 0) {
            l_push_selection(L, &g);
            nres = 2;
        }
        layersel_result_free(&g);
    }
    if (rc)
        return l_fail(L, fn, err);
    return nres;
}

static int r_info(lua_State *L)
{
    sig_recipe *r = l_checkrecipe(L, 1, "Recipe:info", "self");
    lua_newtable(L);
    lua_pushstring(L, sig_variant_name(r->variant));
    lua_setfield(L, -2, "variant");
    lua_pushinteger(L, r->L);
    lua_setfield(L, -2, "L");
    lua_pushinteger(L, r->E);
    lua_setfield(L, -2, "E");
    lua_pushinteger(L, (lua_Integer)sig_dim(r));
    lua_setfield(L, -2, "dim");
    l_pushints(L, r->layers, r->n_layers, 0);
    lua_setfield(L, -2, "layers");
    lua_pushboolean(L, r->idf != NULL);
    lua_setfield(L, -2, "has_idf");
    return 1;
}

/* ---- Signatures ---- */

static int sigs_gc(lua_State *L)
{
    l_sigs *u = luaL_checkudata(L, 1, L_SIGS);
    free(u->x);
    free(u->zero);
    u->x = NULL;
    u->zero = NULL;
    u->n = u->d = 0;
    return 0;
}

static int sigs_tostring(lua_State *L)
{
    l_sigs *u = luaL_checkudata(L, 1, L_SIGS);
    lua_pushfstring(L, "Signatures<%I x %I%s%s>", (lua_Integer)u->n, (lua_Integer)u->d,
                    u->variant[0] ? ", " : "", u->variant);
    return 1;
}

static int sigs_len(lua_State *L)
{
    lua_pushinteger(L, l_checksigs(L, 1, "Signatures:__len", "self")->n);
    return 1;
}

/* Build the signatures of 0-based rows (NULL = all) of t under r. */
static void build(lua_State *L, const trace_t *t, const sig_recipe *r, const int64_t *rows,
                  int64_t n, const char *fn)
{
    if (t->L != r->L || t->E != r->E)
        luaL_error(L, "eldr.%s: the trace has L=%d E=%d, the recipe L=%d E=%d", fn, t->L, t->E,
                   r->L, r->E);
    l_sigs *u = l_newsigs(L, n, (int64_t)sig_dim(r), fn);
    snprintf(u->variant, sizeof u->variant, "%s", sig_variant_name(r->variant));
    char err[ELDR_ERRLEN];
    if (sig_build_batch(t, r, rows, n, u->x, &u->n_zero, u->zero, err, sizeof err))
        l_fail(L, fn, err);
}

/* Rows argument (a list of 1-based rows, or nil for all) -> 0-based box. */
static const int64_t *opt_rows(lua_State *L, int idx, const trace_t *t, const char *fn,
                               int64_t *n)
{
    if (lua_isnoneornil(L, idx)) {
        *n = t->n;
        return NULL;
    }
    int64_t *rows = l_checkintlist(L, idx, fn, "rows", 1, t->n, n);
    for (int64_t i = 0; i < *n; i++)
        rows[i]--;
    return rows;
}

/* eldr.signatures(trace, recipe | opts [, rows]) -> Signatures */
static int l_signatures(lua_State *L)
{
    lua_settop(L, 3); /* optional arguments stay at fixed slots */
    const char *fn = "signatures";
    trace_t *t = l_checktrace(L, 1, fn, "trace");
    if (!luaL_testudata(L, 2, L_RECIPE)) {
        /* options: a recipe fitted on this trace */
        lua_pushcfunction(L, l_recipe_new);
        lua_pushvalue(L, 1);
        lua_pushvalue(L, 2);
        lua_call(L, 2, 1);
        lua_replace(L, 2);
    }
    sig_recipe *r = l_checkrecipe(L, 2, fn, "recipe");
    int64_t n;
    const int64_t *rows = opt_rows(L, 3, t, fn, &n);
    build(L, t, r, rows, n, fn);
    return 1;
}

static int r_signatures(lua_State *L)
{
    lua_settop(L, 3); /* optional arguments stay at fixed slots */
    const char *fn = "Recipe:signatures";
    sig_recipe *r = l_checkrecipe(L, 1, fn, "self");
    trace_t *t = l_checktrace(L, 2, fn, "trace");
    int64_t n;
    const int64_t *rows = opt_rows(L, 3, t, fn, &n);
    build(L, t, r, rows, n, fn);
    return 1;
}

/* eldr.matrix(rows [, {normalize = true}]) -> Signatures from a Lua table */
static int l_matrix(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "matrix";
    static const char *const known[] = {"normalize", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    l_checkopts(L, 2, fn, known);
    int norm = l_optbool(L, 2, fn, "normalize", 1);
    int64_t n = (int64_t)lua_rawlen(L, 1), d = -1;
    if (n < 1)
        l_argerror(L, fn, "rows", "a non-empty list of rows expected");
    double **rowv = l_box(L, (size_t)n * sizeof *rowv);
    for (int64_t i = 0; i < n; i++) {
        lua_rawgeti(L, 1, i + 1);
        int64_t len;
        char what[32];
        snprintf(what, sizeof what, "rows[%lld]", (long long)i + 1);
        rowv[i] = l_checknumlist(L, -1, fn, what, &len);
        if (d >= 0 && len != d)
            l_argerror(L, fn, what, "%lld numbers expected (as row 1), got %lld",
                       (long long)d, (long long)len);
        if (len < 1)
            l_argerror(L, fn, what, "a non-empty row expected");
        d = len;
        lua_replace(L, -2); /* keep the box, drop the row table */
    }
    l_sigs *u = l_newsigs(L, n, d, fn);
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int64_t j = 0; j < d; j++)
            s += rowv[i][j] * rowv[i][j];
        double scale = norm && s > 0 ? 1 / sqrt(s) : 1;
        u->zero[i] = s == 0;
        u->n_zero += s == 0;
        for (int64_t j = 0; j < d; j++)
            u->x[i * d + j] = (float)(rowv[i][j] * scale);
    }
    return 1;
}

static int s_dims(lua_State *L)
{
    l_sigs *u = l_checksigs(L, 1, "Signatures:dims", "self");
    lua_pushinteger(L, u->n);
    lua_pushinteger(L, u->d);
    return 2;
}

static int s_row(lua_State *L)
{
    const char *fn = "Signatures:row";
    l_sigs *u = l_checksigs(L, 1, fn, "self");
    int64_t i = l_checkint(L, 2, fn, "i", 1, u->n) - 1;
    lua_createtable(L, (int)u->d, 0);
    for (int64_t j = 0; j < u->d; j++) {
        lua_pushnumber(L, u->x[i * u->d + j]);
        lua_rawseti(L, -2, j + 1);
    }
    return 1;
}

/* cos(i, j) in double; 0 when either row is zero (rho.h's convention). */
static int s_cos(lua_State *L)
{
    const char *fn = "Signatures:cos";
    l_sigs *u = l_checksigs(L, 1, fn, "self");
    int64_t i = l_checkint(L, 2, fn, "i", 1, u->n) - 1;
    int64_t j = l_checkint(L, 3, fn, "j", 1, u->n) - 1;
    const float *a = u->x + i * u->d, *b = u->x + j * u->d;
    double ab = 0, aa = 0, bb = 0;
    for (int64_t e = 0; e < u->d; e++) {
        ab += (double)a[e] * b[e];
        aa += (double)a[e] * a[e];
        bb += (double)b[e] * b[e];
    }
    lua_pushnumber(L, aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0);
    return 1;
}

static int s_to_table(lua_State *L)
{
    l_sigs *u = l_checksigs(L, 1, "Signatures:to_table", "self");
    lua_createtable(L, (int)u->n, 0);
    for (int64_t i = 0; i < u->n; i++) {
        lua_createtable(L, (int)u->d, 0);
        for (int64_t j = 0; j < u->d; j++) {
            lua_pushnumber(L, u->x[i * u->d + j]);
            lua_rawseti(L, -2, j + 1);
        }
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int s_zero_rows(lua_State *L)
{
    l_sigs *u = l_checksigs(L, 1, "Signatures:zero_rows", "self");
    lua_newtable(L);
    int64_t k = 0;
    for (int64_t i = 0; i < u->n; i++)
        if (u->zero[i]) {
            lua_pushinteger(L, i + 1);
            lua_rawseti(L, -2, ++k);
        }
    return 1;
}

/* sigs:sub(i | rows) -> Signatures of those rows */
static int s_sub(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "Signatures:sub";
    l_sigs *u = l_checksigs(L, 1, fn, "self");
    int64_t n, one;
    int64_t *rows;
    if (lua_type(L, 2) == LUA_TNUMBER) {   /* one row (5 or 5.0: the coercion rule) */
        one = l_checkint(L, 2, fn, "rows", 1, u->n);
        rows = &one;
        n = 1;
    } else
        rows = l_checkintlist(L, 2, fn, "rows", 1, u->n, &n);
    l_sigs *s = l_newsigs(L, n, u->d, fn);
    memcpy(s->variant, u->variant, sizeof s->variant);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = rows[i] - 1;
        memcpy(s->x + i * u->d, u->x + r * u->d, (size_t)u->d * sizeof *s->x);
        s->zero[i] = u->zero[r];
        s->n_zero += u->zero[r];
    }
    return 1;
}

static int s_variant(lua_State *L)
{
    l_sigs *u = l_checksigs(L, 1, "Signatures:variant", "self");
    if (u->variant[0])
        lua_pushstring(L, u->variant);
    else
        lua_pushnil(L);
    return 1;
}

static const l_fn module_fns[] = {
    {"recipe", l_recipe_new, "eldr.recipe(trace, {variant = 'count_idf', layers = 'all'|'auto'|{...}, "
                         "pairs = P|'all', seed, progress}) -> Recipe [, selection]: IDF fitted on the trace"},
    {"signatures", l_signatures, "eldr.signatures(trace, recipe | recipe_opts [, rows]) -> "
                                 "Signatures: unit rows, one per request"},
    {"matrix", l_matrix, "eldr.matrix({{...}, ...} [, {normalize = true}]) -> Signatures from "
                         "Lua rows (L2-normalised unless normalize = false)"},
    {NULL, NULL, NULL},
};

static const l_fn recipe_methods[] = {
    {"info", r_info, "recipe:info() -> {variant, L, E, layers (0-based), dim, has_idf}"},
    {"signatures", r_signatures, "recipe:signatures(trace [, rows]) -> Signatures of the trace "
                                 "(all rows, or a list of 1-based rows)"},
    {NULL, NULL, NULL},
};

static const l_fn sigs_methods[] = {
    {"dims", s_dims, "sigs:dims() -> n, d: rows and dimension"},
    {"row", s_row, "sigs:row(i) -> {d numbers}: row i as a table"},
    {"cos", s_cos, "sigs:cos(i, j) -> cosine of rows i and j (0 with a zero row)"},
    {"to_table", s_to_table, "sigs:to_table() -> {{...}, ...}: the whole matrix as Lua tables"},
    {"zero_rows", s_zero_rows, "sigs:zero_rows() -> {rows}: rows whose signature is all zero"},
    {"sub", s_sub, "sigs:sub(i | {rows}) -> Signatures of those rows"},
    {"variant", s_variant, "sigs:variant() -> the recipe's variant name, or nil"},
    {NULL, NULL, NULL},
};

void l_open_sig(lua_State *L)
{
    l_newclass(L, L_RECIPE, "Recipe", recipe_methods, recipe_gc, recipe_tostring, NULL);
    l_newclass(L, L_SIGS, "Signatures", sigs_methods, sigs_gc, sigs_tostring, sigs_len);
    l_register(L, module_fns, "eldr.");
}
