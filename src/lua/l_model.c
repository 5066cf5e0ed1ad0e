/* l_model.c - models in Lua: eldr.fit, eldr.load_model,
 * eldr.model_from_json, eldr.model (from a Lua-side k-means) and the
 * Model userdata: info, save, save_json, to_json, route (one decision
 * with its evidence, route.h), signatures, centroids, workers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "l_types.h"
#include "l_util.h"
#include "model.h"
#include "rho.h"
#include "route.h"

static int model_gc(lua_State *L)
{
    l_model *u = luaL_checkudata(L, 1, L_MODEL);
    model_free(u->m);
    u->m = NULL;
    return 0;
}

static int model_tostring(lua_State *L)
{
    l_model *u = luaL_checkudata(L, 1, L_MODEL);
    if (!u->m)
        lua_pushstring(L, "Model<empty>");
    else
        lua_pushfstring(L, "Model<K=%d, %s, %d of %d layers, E=%d, tau=%f>", u->m->K,
                        sig_variant_name(u->m->recipe.variant), u->m->recipe.n_layers,
                        u->m->recipe.L, u->m->recipe.E, u->m->tau);
    return 1;
}

static void setstr(lua_State *L, const char *k, const char *v)
{
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

static void push_workers(lua_State *L, const model_t *m)
{
    lua_createtable(L, m->K, 0);
    for (int c = 0; c < m->K; c++) {
        lua_pushstring(L, m->workers[c]);
        lua_rawseti(L, -2, c + 1);
    }
}

void l_push_model_info(lua_State *L, const model_t *m)
{
    lua_newtable(L);
    setstr(L, "kind", "model");
    setstr(L, "variant", sig_variant_name(m->recipe.variant));
    l_setint(L, "L", m->recipe.L);
    l_setint(L, "E", m->recipe.E);
    l_setint(L, "k", m->k);
    l_setint(L, "K", m->K);
    l_setint(L, "dim", (lua_Integer)sig_dim(&m->recipe));
    l_pushints(L, m->recipe.layers, m->recipe.n_layers, 0);
    lua_setfield(L, -2, "layers");
    l_setnum(L, "tau", m->tau);
    l_setint(L, "seed", (lua_Integer)m->seed);
    l_setnum(L, "rho", m->rho);
    l_setint(L, "n_star", m->n_star);
    l_setnum(L, "objective", m->objective);
    if (m->sizes) {
        l_pushint64s(L, m->sizes, m->K, 0);
        lua_setfield(L, -2, "sizes");
    }
    if (m->nearest_share) {   /* the drift baseline (absent: unknown) */
        l_pushnums(L, m->nearest_share, m->K);
        lua_setfield(L, -2, "nearest_share");
    }
    push_workers(L, m);
    lua_setfield(L, -2, "workers");
    l_setint(L, "calib_rows", m->calib_rows);
    l_setint(L, "fit_rows", m->fit_rows);
    l_setint(L, "zero_rows", m->zero_rows);
    l_setint(L, "iters", m->iters);
    if (m->balanced >= 0) {
        lua_pushboolean(L, m->balanced);
        lua_setfield(L, -2, "balanced");
    }
    setstr(L, "layer_select", m->layer_select);
    setstr(L, "calib_sha256", m->calib_sha256);
    setstr(L, "calib_file", m->calib_file);
    setstr(L, "calib_split", m->calib_split);
    setstr(L, "created", m->created);
    setstr(L, "eldr_version", m->eldr_version);
}

/* Worker names from a Lua list of K strings, into a box of pointers
 * (the strings stay alive in the options table). */
static const char **opt_workers(lua_State *L, int opts, int K, const char *fn)
{
    if (l_getopt(L, opts, "workers") == LUA_TNIL) {
        lua_pop(L, 1);
        return NULL;
    }
    int w = lua_gettop(L);
    if (!lua_istable(L, w) || (int)lua_rawlen(L, w) != K)
        l_argerror(L, fn, "workers", "a list of %d names expected", K);
    const char **names = l_box(L, (size_t)K * sizeof *names);
    for (int c = 0; c < K; c++) {
        lua_rawgeti(L, w, c + 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            l_argerror(L, fn, "workers", "names (strings) expected");
        names[c] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    return names;
}

/* eldr.fit(trace, opts) -> Model, report */
static int l_fit(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "fit";
    static const char *const known[] = {"k", "variant", "layers", "seed", "iters", "balanced",
                                        "init", "pairs", "tau", "workers", "threads",
                                        "progress", NULL};
    trace_t *t = l_checktrace(L, 1, fn, "trace");
    luaL_checktype(L, 2, LUA_TTABLE);
    l_checkopts(L, 2, fn, known);
    model_fit_opts o;
    l_getopt(L, 2, "k");
    model_fit_opts_default(&o, (int)l_checkint(L, -1, fn, "k", 1,
                                                 t->n < ROUTE_MAX_WORKERS ? t->n : ROUTE_MAX_WORKERS));
    lua_pop(L, 1);
    o.variant = l_checkvariant(L, fn, l_optstr(L, 2, fn, "variant", "count_idf"));
    int *list = NULL, nl = 0;
    int mode = l_checklayers(L, 2, fn, "layers", t->L, "auto", &list, &nl);
    o.layers = mode == 0 ? MODEL_LAYERS_ALL : mode == 1 ? MODEL_LAYERS_AUTO : MODEL_LAYERS_LIST;
    o.layer_list = list;
    o.n_layer_list = nl;
    o.seed = (uint64_t)l_optint(L, 2, fn, "seed", 0, INT64_MAX, 1);
    o.iters = (int)l_optint(L, 2, fn, "iters", 0, 1000000, o.iters);
    o.balanced = l_optbool(L, 2, fn, "balanced", 1);
    o.tau = l_optnum(L, 2, fn, "tau", 0, ROUTE_TAU_MAX, o.tau);
    o.threads = (int)l_optint(L, 2, fn, "threads", 0, 64, 0);
    if (l_getopt(L, 2, "pairs") == LUA_TSTRING) {
        if (strcmp(lua_tostring(L, -1), "all"))
            l_argerror(L, fn, "pairs", "positive integer or 'all' expected");
        o.pairs = 0;
    } else
        o.pairs = l_optint(L, 2, fn, "pairs", 1, INT32_MAX, o.pairs);
    lua_pop(L, 1);
    if (l_getopt(L, 2, "init") != LUA_TNIL) {
        int64_t ni;
        int64_t *rows = l_checkintlist(L, -1, fn, "init", 1, t->n, &ni);
        if (ni != o.K)
            l_argerror(L, fn, "init", "%d rows (one per cluster) expected, got %lld", o.K,
                       (long long)ni);
        for (int64_t i = 0; i < ni; i++)
            rows[i]--;
        o.init_rows = rows;
    } else if (o.iters == 0)
        l_argerror(L, fn, "iters", "0 needs init rows (it only assigns to given centroids)");
    o.workers = opt_workers(L, 2, o.K, fn);
    l_progress pg;
    l_progress_opt(L, 2, fn, &pg);
    l_model *u = l_newmodel(L);
    int mi = lua_gettop(L);
    l_mark_fitted_on(L, mi, 1);   /* eldr.simulate warns when run on these rows */
    model_fit_report rep;
    memset(&rep, 0, sizeof rep);
    char err[ELDR_ERRLEN];
    o.cancel = l_progress_cancel(&pg); /* Ctrl-C in the REPL stops the fit */
    o.on_progress = l_progress_call;
    o.on_progress_ctx = &pg;
    int rc = model_fit(t, &o, &u->m, &rep, err, sizeof err);
    if (pg.failed && rc == 0)
        model_fit_report_free(&rep); /* the model itself belongs to u (GC) */
    l_progress_check(L, &pg);
    if (rc == MODEL_FIT_CANCELLED)
        return luaL_error(L, "eldr.%s: interrupted", fn);
    if (rc) {
        model_fit_report_free(&rep);
        return l_fail(L, fn, err);
    }
    /* copy the report into boxes first: nothing may raise while it is held */
    int64_t *assign = l_box(L, (size_t)t->n * sizeof *assign);
    int64_t *zero = l_box(L, ((size_t)rep.n_zero + 1) * sizeof *zero);
    double *curve = l_box(L, (size_t)t->L * sizeof *curve);
    int *order = l_box(L, (size_t)t->L * sizeof *order);
    for (int64_t i = 0; i < t->n; i++)
        assign[i] = rep.assign[i] + 1; /* left-out rows: 0 */
    memcpy(zero, rep.zero_rows, (size_t)rep.n_zero * sizeof *zero);
    int has_curve = rep.curve != NULL;
    if (has_curve) {
        memcpy(curve, rep.curve, (size_t)t->L * sizeof *curve);
        memcpy(order, rep.order, (size_t)t->L * sizeof *order);
    }
    model_fit_report r = rep;
    model_fit_report_free(&rep);
    const model_t *m = u->m;
    lua_newtable(L);
    l_pushint64s(L, assign, t->n, 0);
    lua_setfield(L, -2, "assignment");
    l_pushint64s(L, zero, r.n_zero, 1);
    lua_setfield(L, -2, "zero_rows");
    if (has_curve) {
        lua_createtable(L, t->L, 0);
        for (int s = 0; s < t->L; s++) {
            l_pushnum_or_nil(L, curve[s]);
            lua_rawseti(L, -2, s + 1);
        }
        lua_setfield(L, -2, "curve");
        l_pushints(L, order, t->L, 0);
        lua_setfield(L, -2, "order");
    }
    l_pushint64s(L, m->sizes, m->K, 0);
    lua_setfield(L, -2, "sizes");
    l_setnum(L, "objective", m->objective);
    l_setnum(L, "rho", m->rho);
    l_pushints(L, m->recipe.layers, m->recipe.n_layers, 0);
    lua_setfield(L, -2, "mask");
    l_setint(L, "n_star", m->n_star);
    l_setint(L, "iterations", r.iterations);
    lua_pushboolean(L, r.converged);
    lua_setfield(L, -2, "converged");
    lua_newtable(L);
    l_setnum(L, "recipe", r.t_recipe);
    l_setnum(L, "selection", r.t_selection);
    l_setnum(L, "signatures", r.t_signatures);
    l_setnum(L, "fit", r.t_fit);
    lua_setfield(L, -2, "seconds");
    lua_pushvalue(L, mi);
    lua_insert(L, -2);
    return 2;
}

/* eldr.load_model(path): eldr-model HDF5, or the reference JSON (.json) */
static int l_load_model(lua_State *L)
{
    const char *fn = "load_model";
    const char *path = l_checkstr(L, 1, fn, "path");
    size_t n = strlen(path);
    int json = n >= 5 && !strcmp(path + n - 5, ".json");
    char err[ELDR_ERRLEN];
    l_model *u = l_newmodel(L);
    if ((json ? model_load_json(path, &u->m, err, sizeof err)
              : model_load(path, &u->m, err, sizeof err)))
        return l_fail(L, fn, err);
    return 1;
}

static int l_model_from_json(lua_State *L)
{
    const char *fn = "model_from_json";
    const char *text = l_checkstr(L, 1, fn, "text");
    char err[ELDR_ERRLEN];
    l_model *u = l_newmodel(L);
    if (model_from_json_text(text, "json", &u->m, err, sizeof err))
        return l_fail(L, fn, err);
    return 1;
}

/* eldr.model(recipe, centroids, {top_k =, tau =, workers =, seed =,
 * calibration =}): calibration, the Signatures the centroids were fitted
 * on, gives the model its drift baseline (nearest_share, drift.h) */
static int l_model_new(lua_State *L)
{
    lua_settop(L, 3); /* optional arguments stay at fixed slots */
    const char *fn = "model";
    static const char *const known[] = {"top_k", "tau", "workers", "seed", "calibration",
                                        NULL};
    sig_recipe *r = l_checkrecipe(L, 1, fn, "recipe");
    l_sigs *c = l_checksigs(L, 2, fn, "centroids");
    luaL_checktype(L, 3, LUA_TTABLE);
    l_checkopts(L, 3, fn, known);
    if (c->d != (int64_t)sig_dim(r))
        l_argerror(L, fn, "centroids", "rows of dimension %d (the recipe's) expected, got %lld",
                   (int)sig_dim(r), (long long)c->d);
    if (c->n < 1 || c->n > ROUTE_MAX_WORKERS)
        l_argerror(L, fn, "centroids", "1..%d rows expected, got %lld", ROUTE_MAX_WORKERS,
                   (long long)c->n);
    l_getopt(L, 3, "top_k");
    int k = (int)l_checkint(L, -1, fn, "top_k", 1, r->E);
    lua_pop(L, 1);
    double tau = l_optnum(L, 3, fn, "tau", 0, ROUTE_TAU_MAX, MODEL_TAU_DEFAULT);
    uint64_t seed = (uint64_t)l_optint(L, 3, fn, "seed", 0, INT64_MAX, 1);
    const char **workers = opt_workers(L, 3, (int)c->n, fn);
    l_sigs *cal = NULL;
    if (l_getopt(L, 3, "calibration") != LUA_TNIL) {
        cal = l_checksigs(L, -1, fn, "calibration");
        if (cal->d != c->d || cal->n < 1)
            l_argerror(L, fn, "calibration", "signatures of dimension %lld expected, got "
                       "%lld x %lld", (long long)c->d, (long long)cal->n, (long long)cal->d);
    }
    lua_pop(L, 1);   /* cal stays referenced by the options table */
    char err[ELDR_ERRLEN];
    l_model *u = l_newmodel(L);
    if (!(u->m = model_new(r, k, (int)c->n, err, sizeof err)))
        return l_fail(L, fn, err);
    memcpy(u->m->centroids, c->x, (size_t)(c->n * c->d) * sizeof(float));
    u->m->tau = tau;
    u->m->seed = seed;
    snprintf(u->m->layer_select, sizeof u->m->layer_select, "list");
    u->m->n_star = r->n_layers;
    if ((workers && model_set_workers(u->m, workers, (int)c->n, err, sizeof err)) ||
        (cal && model_measure_nearest_share(u->m, cal->x, cal->n, err, sizeof err)) ||
        model_validate(u->m, "model", MODEL_NAMES_H5, err, sizeof err))
        return l_fail(L, fn, err);
    return 1;
}

static int m_info(lua_State *L)
{
    l_push_model_info(L, l_checkmodel(L, 1, "Model:info", "self"));
    return 1;
}

static int m_save(lua_State *L)
{
    const char *fn = "Model:save";
    model_t *m = l_checkmodel(L, 1, fn, "self");
    const char *path = l_checkstr(L, 2, fn, "path");
    char err[ELDR_ERRLEN];
    if (model_save(m, path, err, sizeof err))
        return l_fail(L, fn, err);
    lua_settop(L, 1);
    return 1;
}

static int m_save_json(lua_State *L)
{
    const char *fn = "Model:save_json";
    model_t *m = l_checkmodel(L, 1, fn, "self");
    const char *path = l_checkstr(L, 2, fn, "path");
    char err[ELDR_ERRLEN];
    if (model_save_json(m, path, err, sizeof err))
        return l_fail(L, fn, err);
    lua_settop(L, 1);
    return 1;
}

static int m_to_json(lua_State *L)
{
    const char *fn = "Model:to_json";
    model_t *m = l_checkmodel(L, 1, fn, "self");
    char err[ELDR_ERRLEN], *text = NULL;
    if (model_to_json_text(m, &text, err, sizeof err))
        return l_fail(L, fn, err);
    lua_pushstring(L, text); /* may raise on OOM: text is then lost, rarely */
    free(text);
    return 1;
}

/* The signature argument of route: a Lua list of dim numbers, or a
 * one-row Signatures. Returns floats in a box (or the matrix row). */
static const float *check_sig(lua_State *L, int idx, size_t dim, const char *fn)
{
    if (luaL_testudata(L, idx, L_SIGS)) {
        l_sigs *s = l_checksigs(L, idx, fn, "signature");
        if (s->n != 1 || s->d != (int64_t)dim)
            l_argerror(L, fn, "signature", "1 x %zu Signatures expected, got %lld x %lld", dim,
                       (long long)s->n, (long long)s->d);
        return s->x;
    }
    int64_t n;
    double *v = l_checknumlist(L, idx, fn, "signature", &n);
    if (n != (int64_t)dim)
        l_argerror(L, fn, "signature", "%zu numbers expected, got %lld", dim, (long long)n);
    float *f = l_box(L, dim * sizeof *f);
    double nn = 0;
    for (size_t i = 0; i < dim; i++)
        nn += v[i] * v[i];
    /* a raw vector is normalised here, as the router does */
    for (size_t i = 0; i < dim; i++)
        f[i] = nn > 0 ? (float)(v[i] / sqrt(nn)) : 0.0f;
    return f;
}

/* model:route(signature, loads [, tau]) -> decision */
static int m_route(lua_State *L)
{
    lua_settop(L, 4); /* optional arguments stay at fixed slots */
    const char *fn = "Model:route";
    model_t *m = l_checkmodel(L, 1, fn, "self");
    size_t dim = sig_dim(&m->recipe);
    const float *sig = check_sig(L, 2, dim, fn);
    int64_t nl;
    int64_t *loads = l_checkintlist(L, 3, fn, "loads", 0, INT64_MAX, &nl);
    if (nl != m->K)
        l_argerror(L, fn, "loads", "%d in-flight counts (one per worker) expected, got %lld",
                   m->K, (long long)nl);
    double tau = lua_isnoneornil(L, 4) ? m->tau : l_checknum(L, 4, fn, "tau");
    if (tau < 0)
        l_argerror(L, fn, "tau", "number >= 0 expected, got %g", tau);
    if (m->K > ROUTE_MAX_WORKERS)
        return luaL_error(L, "eldr.%s: %d workers, at most %d", fn, m->K, ROUTE_MAX_WORKERS);
    route_policy p;
    route_decision *d = l_box(L, sizeof *d);
    char err[ELDR_ERRLEN];
    if (route_policy_init(&p, ROUTE_ELDR, m->K, m->seed, err, sizeof err))
        return l_fail(L, fn, err);
    int rc = route_policy_set_centroids(&p, m->centroids, dim, tau, 1, err, sizeof err);
    if (rc == 0)
        route_decide(&p, sig, -1, loads, d);
    route_policy_free(&p);
    if (rc)
        return l_fail(L, fn, err);
    lua_newtable(L);
    l_setint(L, "worker", d->worker + 1);
    setstr(L, "name", m->workers[d->worker]);
    setstr(L, "rule", route_rule_name(d->rule));
    l_setnum(L, "tau", tau);
    if (d->has_sim) {
        l_pushnums(L, d->sim, d->K);
        lua_setfield(L, -2, "sim");
        l_setnum(L, "sim_max", d->sim_max);
    }
    l_pushints(L, d->cand, d->n_cand, 1);
    lua_setfield(L, -2, "band");
    l_pushint64s(L, d->load, d->K, 0);
    lua_setfield(L, -2, "loads");
    return 1;
}

/* A Recipe userdata holding a copy of the model's recipe. */
static sig_recipe *push_recipe_copy(lua_State *L, const model_t *m, const char *fn)
{
    l_recipe *r = l_newrecipe(L);
    char err[ELDR_ERRLEN];
    if (sig_recipe_copy(&r->r, &m->recipe, err, sizeof err))
        l_fail(L, fn, err);
    r->ready = 1;
    return &r->r;
}

static int m_recipe(lua_State *L)
{
    push_recipe_copy(L, l_checkmodel(L, 1, "Model:recipe", "self"), "Model:recipe");
    return 1;
}

/* model:signatures(trace [, rows]) = model:recipe():signatures(...) */
static int m_signatures(lua_State *L)
{
    const char *fn = "Model:signatures";
    model_t *m = l_checkmodel(L, 1, fn, "self");
    l_checktrace(L, 2, fn, "trace");
    lua_settop(L, 3);
    push_recipe_copy(L, m, fn);
    lua_replace(L, 1);
    lua_getfield(L, 1, "signatures"); /* Recipe:signatures through __index */
    lua_insert(L, 1);
    lua_call(L, 3, 1);
    return 1;
}

static int m_centroids(lua_State *L)
{
    const char *fn = "Model:centroids";
    model_t *m = l_checkmodel(L, 1, fn, "self");
    size_t dim = sig_dim(&m->recipe);
    l_sigs *s = l_newsigs(L, m->K, (int64_t)dim, fn);
    memcpy(s->x, m->centroids, (size_t)m->K * dim * sizeof *s->x);
    snprintf(s->variant, sizeof s->variant, "%s", sig_variant_name(m->recipe.variant));
    return 1;
}

static int m_workers(lua_State *L)
{
    push_workers(L, l_checkmodel(L, 1, "Model:workers", "self"));
    return 1;
}

/* model:nearest(sigs) -> clusters, similarities (1-based, per row) */
static int m_nearest(lua_State *L)
{
    const char *fn = "Model:nearest";
    model_t *m = l_checkmodel(L, 1, fn, "self");
    l_sigs *s = l_checksigs(L, 2, fn, "sigs");
    if (s->d != (int64_t)sig_dim(&m->recipe))
        l_argerror(L, fn, "sigs", "rows of dimension %d (the model's) expected, got %lld",
                   (int)sig_dim(&m->recipe), (long long)s->d);
    lua_createtable(L, (int)s->n, 0);
    lua_createtable(L, (int)s->n, 0);
    for (int64_t i = 0; i < s->n; i++) {
        double sim;
        int c = model_nearest(m, s->x + i * s->d, &sim);
        lua_pushinteger(L, c + 1);
        lua_rawseti(L, -3, i + 1);
        lua_pushnumber(L, sim);
        lua_rawseti(L, -2, i + 1);
    }
    return 2;
}

static int m_set_tau(lua_State *L)
{
    const char *fn = "Model:set_tau";
    model_t *m = l_checkmodel(L, 1, fn, "self");
    double tau = l_checknum(L, 2, fn, "tau");
    if (tau < 0)
        l_argerror(L, fn, "tau", "number >= 0 expected, got %g", tau);
    m->tau = tau;
    lua_settop(L, 1);
    return 1;
}

static const l_fn module_fns[] = {
    {"fit", l_fit, "eldr.fit(trace, {k =, variant, layers = 'auto'|'all'|{...}, seed, iters, "
                   "balanced, init, pairs, tau, workers, progress = fn(done, total, what)}) -> Model, report"},
    {"load_model", l_load_model, "eldr.load_model(path) -> Model: an eldr-model file, or the "
                                 "reference centroid JSON when path ends in .json"},
    {"model_from_json", l_model_from_json, "eldr.model_from_json(text) -> Model: parse the "
                                           "reference centroid JSON"},
    {"model", l_model_new, "eldr.model(recipe, centroids, {top_k =, tau, workers, seed, "
                       "calibration}) -> Model from a recipe and a centroid matrix (e.g. "
                       "eldr.kmeans); calibration: the signatures fitted on (drift baseline)"},
    {NULL, NULL, NULL},
};

static const l_fn methods[] = {
    {"info", m_info, "model:info() -> table: recipe, K, tau, rho, N*, sizes, provenance"},
    {"save", m_save, "model:save(path) -> model: write the eldr-model HDF5 file atomically"},
    {"save_json", m_save_json, "model:save_json(path) -> model: write the reference centroid "
                               "JSON"},
    {"to_json", m_to_json, "model:to_json() -> string: the reference centroid JSON"},
    {"route", m_route, "model:route(signature, loads [, tau]) -> {worker, name, rule, sim, band, "
                       "loads}: one ELDR decision with its evidence"},
    {"recipe", m_recipe, "model:recipe() -> Recipe: the model's variant, mask and idf"},
    {"signatures", m_signatures, "model:signatures(trace [, rows]) -> Signatures under the "
                                 "model's recipe"},
    {"centroids", m_centroids, "model:centroids() -> Signatures: the K centroid rows"},
    {"workers", m_workers, "model:workers() -> {names}: worker of each cluster"},
    {"nearest", m_nearest, "model:nearest(sigs) -> clusters, sims: the most similar centroid "
                           "of each row (1-based) and its cosine"},
    {"set_tau", m_set_tau, "model:set_tau(tau) -> model: change the locality band width"},
    {NULL, NULL, NULL},
};

void l_open_model(lua_State *L)
{
    l_newclass(L, L_MODEL, "Model", methods, model_gc, model_tostring, NULL);
    l_register(L, module_fns, "eldr.");
}
