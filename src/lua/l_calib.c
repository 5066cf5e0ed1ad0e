/* l_calib.c - signature quality in Lua: eldr.rho (one recipe),
 * eldr.rho_variants (Figure 7), eldr.select_layers and eldr.rho_curve
 * (greedy selection, Figure 8). Same maths and defaults as `eldr rho`:
 * IDF over every row of the trace, 30000 seeded pairs or all pairs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "l_types.h"
#include "l_util.h"
#include "layersel.h"
#include "rho.h"

#define L_PAIRS "eldr.Pairs"

static int pairs_gc(lua_State *L)
{
    rho_pairs *p = luaL_checkudata(L, 1, L_PAIRS);
    rho_pairs_free(p);
    memset(p, 0, sizeof *p);
    return 0;
}

/* Pairs of the options {pairs = P | 'all', seed = S} in a GC-owned box. */
static rho_pairs *push_pairs(lua_State *L, int opts, const trace_t *t, const char *fn)
{
    int64_t p = RHO_DEFAULT_PAIRS;
    if (l_getopt(L, opts, "pairs") == LUA_TSTRING) {
        if (strcmp(lua_tostring(L, -1), "all"))
            l_argerror(L, fn, "pairs", "positive integer or 'all' expected, got '%s'",
                       lua_tostring(L, -1));
        p = 0;
    } else
        p = l_optint(L, opts, fn, "pairs", 1, INT32_MAX, p);
    lua_pop(L, 1);
    uint64_t seed = (uint64_t)l_optint(L, opts, fn, "seed", 0, INT64_MAX, RHO_DEFAULT_SEED);
    if (t->n < 2)
        luaL_error(L, "eldr.%s: rho needs at least 2 requests, the trace has %d", fn,
                   (int)t->n);
    rho_pairs *pr = lua_newuserdatauv(L, sizeof *pr, 0);
    memset(pr, 0, sizeof *pr);
    luaL_setmetatable(L, L_PAIRS);
    char err[ELDR_ERRLEN];
    int rc = p > 0 ? rho_pairs_sample(t->n, p, seed, pr, err, sizeof err)
                   : rho_pairs_all(t->n, pr, err, sizeof err);
    if (rc)
        l_fail(L, fn, err);
    return pr;
}

/* IDF over all rows into a box (count_idf), else NULL (nothing pushed). */
static float *push_idf(lua_State *L, const trace_t *t, sig_variant v, const char *fn)
{
    if (v != SIG_COUNT_IDF)
        return NULL;
    float *idf = l_box(L, TRACE_CELLS(t) * sizeof *idf);
    char err[ELDR_ERRLEN];
    if (sig_idf_fit(t, NULL, t->n, idf, err, sizeof err))
        l_fail(L, fn, err);
    return idf;
}

void l_push_selection(lua_State *L, const layersel_result *g)
{
    lua_createtable(L, 0, 5);
    l_pushints(L, g->order, g->L, 0);
    lua_setfield(L, -2, "order");
    lua_createtable(L, g->L, 0);
    for (int s = 0; s < g->L; s++) {
        l_pushnum_or_nil(L, g->curve[s]);
        lua_rawseti(L, -2, s + 1);
    }
    lua_setfield(L, -2, "curve");
    l_pushints(L, g->mask, g->n_star, 0);
    lua_setfield(L, -2, "mask");
    lua_pushinteger(L, g->n_star);
    lua_setfield(L, -2, "n_star");
    l_pushnum_or_nil(L, g->rho);
    lua_setfield(L, -2, "rho");
}

/* Greedy selection, reporting to pg (the progress option); pushes the
 * selection table. */
/* The greedy selection pushed as a table: 0, or -1 with err when the
 * selection itself fails (an undefined rho, say) and nothing is pushed;
 * a cancel or an error in the progress function is raised. */
static int try_greedy(lua_State *L, const trace_t *t, sig_variant v, const float *idf,
                      const rho_pairs *pr, const char *fn, l_progress *pg, char *err,
                      size_t errlen)
{
    layersel_result g;
    int rc = layersel_run_progress(t, v, idf, pr, 0, l_progress_cancel(pg), l_progress_call, pg,
                                   &g, err, errlen);
    if (pg->failed && rc == 0)
        layersel_result_free(&g);
    l_progress_check(L, pg);
    if (rc == LAYERSEL_CANCELLED)
        luaL_error(L, "eldr.%s: interrupted", fn);
    if (rc)
        return -1;
    l_push_selection(L, &g);
    layersel_result_free(&g);
    return 0;
}

static void push_greedy(lua_State *L, const trace_t *t, sig_variant v, const float *idf,
                        const rho_pairs *pr, const char *fn, l_progress *pg)
{
    char err[ELDR_ERRLEN];
    if (try_greedy(L, t, v, idf, pr, fn, pg, err, sizeof err))
        l_fail(L, fn, err);
}

/* rho of a mask (NULL = all layers); sd (may be NULL) gets the distances. */
static int eval_mask(const trace_t *t, sig_variant v, const float *idf, const int *mask,
                     int n, const rho_pairs *pr, const double *dec, double *sd, double *rho,
                     int64_t *n_zero, char *err, size_t errlen)
{
    sig_recipe r;
    if (sig_recipe_init(&r, v, t->L, t->E, mask, n, err, errlen))
        return -1;
    int rc = (v == SIG_COUNT_IDF && sig_recipe_set_idf(&r, idf, err, errlen)) ||
             rho_eval(t, &r, pr, dec, sd, rho, n_zero, err, errlen) ? -1 : 0;
    sig_recipe_free(&r);
    return rc;
}

static const char *const rho_keys[] = {"variant", "layers", "pairs", "seed", "ci",
                                       "ci_samples", "progress", NULL};

/* eldr.rho(trace [, opts]) -> rho, details */
static int l_rho(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "rho";
    trace_t *t = l_checktrace(L, 1, fn, "trace");
    l_checkopts(L, 2, fn, rho_keys);
    sig_variant v = l_checkvariant(L, fn, l_optstr(L, 2, fn, "variant", "count_idf"));
    int ci = l_optbool(L, 2, fn, "ci", 0);
    int B = (int)l_optint(L, 2, fn, "ci_samples", 10, 1000000, 1000);
    uint64_t seed = (uint64_t)l_optint(L, 2, fn, "seed", 0, INT64_MAX, RHO_DEFAULT_SEED);
    int *list = NULL, nl = 0;
    int mode = l_checklayers(L, 2, fn, "layers", t->L, "all", &list, &nl);
    if (!t->decode_counts)
        luaL_error(L, "eldr.%s: rho needs decode_counts, which the trace lacks", fn);
    l_progress pg;
    l_progress_opt(L, 2, fn, &pg);
    rho_pairs *pr = push_pairs(L, 2, t, fn);
    float *idf = push_idf(L, t, v, fn);
    double *dec = l_box(L, (size_t)pr->n * sizeof *dec);
    double *sd = l_box(L, (size_t)pr->n * sizeof *sd);
    char err[ELDR_ERRLEN];
    if (rho_decode_dist(t, pr, dec, err, sizeof err))
        return l_fail(L, fn, err);
    lua_newtable(L); /* details */
    int details = lua_gettop(L);
    double rho;
    int64_t n_zero = 0;
    if (mode == 1) {
        push_greedy(L, t, v, idf, pr, fn, &pg);
        lua_getfield(L, -1, "curve");
        lua_setfield(L, details, "curve");
        lua_getfield(L, -1, "order");
        lua_setfield(L, details, "order");
        lua_getfield(L, -1, "n_star");
        nl = (int)lua_tointeger(L, -1);
        lua_pop(L, 1);
        list = l_box(L, (size_t)nl * sizeof *list);
        lua_getfield(L, -2, "mask");
        for (int i = 0; i < nl; i++) {
            lua_rawgeti(L, -1, i + 1);
            list[i] = (int)lua_tointeger(L, -1);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    if (eval_mask(t, v, idf, mode ? list : NULL, mode ? nl : 0, pr, dec, sd, &rho, &n_zero,
                  err, sizeof err))
        return l_fail(L, fn, err);
    if (mode == 1) {
        /* the greedy curve's value at N* selected the mask: report it */
        lua_getfield(L, -2, "rho");
        rho = lua_isnil(L, -1) ? NAN : lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
    lua_pushstring(L, sig_variant_name(v));
    lua_setfield(L, details, "variant");
    l_pushnum_or_nil(L, rho);
    lua_setfield(L, details, "rho");
    if (mode) {
        l_pushints(L, list, nl, 0);
    } else {
        lua_createtable(L, t->L, 0);
        for (int l = 0; l < t->L; l++) {
            lua_pushinteger(L, l);
            lua_rawseti(L, -2, l + 1);
        }
    }
    lua_setfield(L, details, "mask");
    lua_pushinteger(L, mode ? nl : t->L);
    lua_setfield(L, details, "n_star");
    lua_pushinteger(L, n_zero);
    lua_setfield(L, details, "zero_signatures");
    lua_pushinteger(L, pr->n);
    lua_setfield(L, details, "pairs");
    if (ci) {
        double lo, hi;
        if (rho_bootstrap(sd, dec, pr->n, B, 0.95, seed, &lo, &hi, err, sizeof err))
            return l_fail(L, fn, err);
        lua_createtable(L, 2, 0);
        lua_pushnumber(L, lo);
        lua_rawseti(L, -2, 1);
        lua_pushnumber(L, hi);
        lua_rawseti(L, -2, 2);
        lua_setfield(L, details, "ci");
    }
    l_pushnum_or_nil(L, rho);
    lua_pushvalue(L, details);
    return 2;
}

/* One variant of rho_variants into the table on top: rho_all and the
 * greedy selection's fields. Returns its rho, or NaN with err saying why
 * (a selection that fails, or rho undefined for this variant). */
static double variant_rho(lua_State *L, const trace_t *t, sig_variant v, const float *idf,
                          const rho_pairs *pr, const double *dec, const char *fn,
                          l_progress *pg, char *err, size_t errlen)
{
    double all;
    if (eval_mask(t, v, idf, NULL, 0, pr, dec, NULL, &all, NULL, err, errlen))
        return NAN;
    l_pushnum_or_nil(L, all);
    lua_setfield(L, -2, "rho_all");
    if (try_greedy(L, t, v, idf, pr, fn, pg, err, errlen))
        return NAN;
    const char *keys[] = {"rho", "mask", "n_star", "curve", "order"};
    for (int i = 0; i < 5; i++) {
        lua_getfield(L, -1, keys[i]);
        lua_setfield(L, -3, keys[i]);
    }
    lua_getfield(L, -1, "rho");
    double rho = lua_isnil(L, -1) ? NAN : lua_tonumber(L, -1);
    lua_pop(L, 2);
    if (isnan(rho))
        snprintf(err, errlen, "rho is undefined for %s on this trace (no pair's distances "
                 "vary with the decode distances)", sig_variant_name(v));
    return rho;
}

/* eldr.rho_variants(trace [, {pairs, seed}]) -> list, best first; a
 * variant whose rho is nil says why in `why` */
static int l_rho_variants(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "rho_variants";
    static const char *const known[] = {"pairs", "seed", "progress", NULL};
    trace_t *t = l_checktrace(L, 1, fn, "trace");
    l_checkopts(L, 2, fn, known);
    l_progress pg;
    l_progress_opt(L, 2, fn, &pg);
    if (!t->decode_counts)
        luaL_error(L, "eldr.%s: rho needs decode_counts, which the trace lacks", fn);
    rho_pairs *pr = push_pairs(L, 2, t, fn);
    double *dec = l_box(L, (size_t)pr->n * sizeof *dec);
    char err[ELDR_ERRLEN];
    if (rho_decode_dist(t, pr, dec, err, sizeof err))
        return l_fail(L, fn, err);
    float *idf = push_idf(L, t, SIG_COUNT_IDF, fn);
    lua_newtable(L);
    int list = lua_gettop(L);
    double score[SIG_N_VARIANTS];
    for (int v = 0; v < SIG_N_VARIANTS; v++) {
        lua_newtable(L);
        lua_pushstring(L, sig_variant_name((sig_variant)v));
        lua_setfield(L, -2, "variant");
        const char *why = v == SIG_GATE_PROB && !t->gate_prob   ? "the trace has no gate_prob"
                        : v == SIG_GATE_LOGIT && !t->gate_logit ? "the trace has no gate_logit"
                                                                : NULL;
        lua_pushboolean(L, why == NULL);
        lua_setfield(L, -2, "available");
        score[v] = -INFINITY;
        if (!why)
            score[v] = variant_rho(L, t, (sig_variant)v, idf, pr, dec, fn, &pg, err, sizeof err);
        if (why || isnan(score[v])) {   /* rho is nil: say why (issue 22) */
            lua_pushstring(L, why ? why : err);
            lua_setfield(L, -2, "why");
            lua_pushstring(L, why ? why : err);
            lua_setfield(L, -2, "reason");   /* the older name of why */
            score[v] = -INFINITY;
        }
        lua_rawseti(L, list, v + 1);
    }
    /* best first (stable: variant order on ties) */
    int order[SIG_N_VARIANTS];
    for (int i = 0; i < SIG_N_VARIANTS; i++) {
        int j = i;
        while (j > 0 && score[order[j - 1]] < score[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    lua_createtable(L, SIG_N_VARIANTS, 0);
    for (int i = 0; i < SIG_N_VARIANTS; i++) {
        lua_rawgeti(L, list, order[i] + 1);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static void greedy_common(lua_State *L, const char *fn)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    static const char *const known[] = {"variant", "pairs", "seed", "progress", NULL};
    trace_t *t = l_checktrace(L, 1, fn, "trace");
    l_checkopts(L, 2, fn, known);
    sig_variant v = l_checkvariant(L, fn, l_optstr(L, 2, fn, "variant", "count_idf"));
    if (!t->decode_counts)
        luaL_error(L, "eldr.%s: layer selection needs decode_counts, which the trace lacks", fn);
    l_progress pg;
    l_progress_opt(L, 2, fn, &pg);
    rho_pairs *pr = push_pairs(L, 2, t, fn);
    float *idf = push_idf(L, t, v, fn);
    push_greedy(L, t, v, idf, pr, fn, &pg);
}

/* eldr.select_layers(trace [, opts]) -> {mask, n_star, rho, order, curve} */
static int l_select_layers(lua_State *L)
{
    greedy_common(L, "select_layers");
    return 1;
}

/* eldr.rho_curve(trace [, opts]) -> curve, n_star, order */
static int l_rho_curve(lua_State *L)
{
    greedy_common(L, "rho_curve");
    int g = lua_gettop(L);
    lua_getfield(L, g, "curve");
    lua_getfield(L, g, "n_star");
    lua_getfield(L, g, "order");
    return 3;
}

static const l_fn module_fns[] = {
    {"rho", l_rho, "eldr.rho(trace [, {variant, layers = 'all'|'auto'|{...}, pairs = P|'all', "
                   "seed, ci, ci_samples, progress}]) -> rho, details {mask, n_star, ci, ...}"},
    {"rho_variants", l_rho_variants, "eldr.rho_variants(trace [, {pairs, seed, progress}]) -> "
                                     "list of {variant, rho_all, rho, mask, n_star}, best first "
                                     "(Fig. 7)"},
    {"select_layers", l_select_layers, "eldr.select_layers(trace [, {variant, pairs, seed, "
                                       "progress = fn(done, total, what)}]) -> {mask, n_star, "
                                       "rho, order, curve}: greedy selection"},
    {"rho_curve", l_rho_curve, "eldr.rho_curve(trace [, {variant, pairs, seed, progress}]) -> "
                               "curve, n_star, order: cumulative rho per layers kept (Fig. 8)"},
    {NULL, NULL, NULL},
};

void l_open_calib(lua_State *L)
{
    luaL_newmetatable(L, L_PAIRS);
    lua_pushcfunction(L, pairs_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
    l_register(L, module_fns, "eldr.");
}
