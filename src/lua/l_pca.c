/* l_pca.c - eldr.pca: a 2-D (or 1-/3-D) projection of a Signatures
 * matrix for plots, through src/core/pca.h (Gram matrix of the centred
 * sample, LAPACKE_dsyevr for the top eigenpairs). The Gram matrix is
 * n x n, so a large matrix is fitted on a seeded sample of `sample` rows
 * and every row is then projected on the fitted axes. */
#include <string.h>

#include "err.h"
#include "l_types.h"
#include "l_util.h"
#include "pca.h"
#include "rng.h"

#define L_PCA "eldr.PCA"

static int pca_gc(lua_State *L)
{
    pca_t *p = luaL_checkudata(L, 1, L_PCA);
    pca_free(p);
    memset(p, 0, sizeof *p);
    return 0;
}

/* eldr.pca(sigs [, {dims = 2, sample = 2000, seed = 1}]) */
static int l_pca(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "pca";
    static const char *const known[] = {"dims", "sample", "seed", NULL};
    l_sigs *s = l_checksigs(L, 1, fn, "sigs");
    l_checkopts(L, 2, fn, known);
    if (s->n < 2 || s->n > INT32_MAX || s->d > INT32_MAX)
        l_argerror(L, fn, "sigs", "2..%d rows expected, got %lld", INT32_MAX, (long long)s->n);
    int64_t sample = l_optint(L, 2, fn, "sample", 2, 20000, 2000);
    uint64_t seed = (uint64_t)l_optint(L, 2, fn, "seed", 0, INT64_MAX, 1);
    int64_t nfit = s->n < sample ? s->n : sample;
    int64_t side = nfit < s->d ? nfit : s->d;
    int dims = (int)l_optint(L, 2, fn, "dims", 1, side < 3 ? side : 3, side < 2 ? 1 : 2);
    const float *x = s->x;
    if (nfit < s->n) {
        /* a seeded sample of rows (partial Fisher-Yates), in row order */
        int64_t *perm = l_box(L, (size_t)s->n * sizeof *perm);
        uint8_t *pick = l_box(L, (size_t)s->n);
        for (int64_t i = 0; i < s->n; i++)
            perm[i] = i;
        rng_t rng;
        rng_seed(&rng, seed);
        for (int64_t i = 0; i < nfit; i++) {
            int64_t j = i + (int64_t)rng_below(&rng, (uint64_t)(s->n - i));
            int64_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
            pick[perm[i]] = 1;
        }
        float *sub = l_box(L, (size_t)nfit * (size_t)s->d * sizeof *sub);
        for (int64_t i = 0, k = 0; i < s->n; i++)
            if (pick[i])
                memcpy(sub + (k++) * s->d, s->x + i * s->d, (size_t)s->d * sizeof *sub);
        x = sub;
    }
    pca_t *p = lua_newuserdatauv(L, sizeof *p, 0);
    memset(p, 0, sizeof *p);
    luaL_setmetatable(L, L_PCA);
    char err[ELDR_ERRLEN];
    if (pca_fit(x, (int)nfit, (int)s->d, dims, p, err, sizeof err))
        return l_fail(L, fn, err);
    lua_newtable(L);
    const char *names[] = {"x", "y", "z"};
    double sc[3];
    lua_createtable(L, dims, 0);
    for (int c = 0; c < dims; c++) {
        lua_createtable(L, (int)s->n, 0);
        lua_rawseti(L, -2, c + 1);
    }
    for (int64_t i = 0; i < s->n; i++) {
        pca_project(p, s->x + i * s->d, sc);
        for (int c = 0; c < dims; c++) {
            lua_rawgeti(L, -1, c + 1);
            lua_pushnumber(L, sc[c]);
            lua_rawseti(L, -2, i + 1);
            lua_pop(L, 1);
        }
    }
    for (int c = 0; c < dims; c++) {
        lua_rawgeti(L, -1, c + 1);
        lua_setfield(L, -3, names[c]);
    }
    lua_setfield(L, -2, "components");
    lua_createtable(L, dims, 0);
    for (int c = 0; c < dims; c++) {
        lua_pushnumber(L, p->total_var > 0 ? p->var[c] / p->total_var : 0.0);
        lua_rawseti(L, -2, c + 1);
    }
    lua_setfield(L, -2, "explained");
    lua_pushinteger(L, nfit);
    lua_setfield(L, -2, "fitted_rows");
    return 1;
}

static const l_fn module_fns[] = {
    {"pca", l_pca, "eldr.pca(sigs [, {dims = 2, sample = 2000, seed = 1}]) -> {x, y [, z], "
                   "components, explained, fitted_rows}: principal-component scores for plots"},
    {NULL, NULL, NULL},
};

void l_open_pca(lua_State *L)
{
    luaL_newmetatable(L, L_PCA);
    lua_pushcfunction(L, pca_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
    l_register(L, module_fns, "eldr.");
}
