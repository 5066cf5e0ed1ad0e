/* l_sim.c - the decode routing simulator in Lua: eldr.simulate (what
 * `eldr sim` does, results as Lua tables) and eldr.sweep (the grid of
 * `eldr sweep`, written in Lua in lua/eldr/experiments.lua on top of
 * eldr.simulate and eldr.kmeans; bound here so help and docs list it).
 *
 * eldr.simulate splits the trace like the CLI (the first rows calibrate:
 * sim_calib_rows), or takes the calibration trace as `calib`; uses the
 * given Model or fits one on the calibration rows; builds one workload of
 * the evaluation rows (common random numbers) and runs every policy. With
 * prefix_mode, ELDR runs once per prefix-caching mode through the same
 * core path as `eldr sim --prefix-mode` (sim_prefix_build, sim_prefix_run)
 * and info.prefix holds the replay's statistics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel.h"
#include "err.h"
#include "l_types.h"
#include "l_util.h"
#include "model.h"
#include "route.h"
#include "sim.h"
#include "sim_prefix.h"

#define L_SIMSTATE "eldr.SimState"

/* Everything a simulation holds in C, freed by __gc whatever happens. */
typedef struct sim_state {
    trace_t *calib, *eval;     /* owned splits (NULL when borrowed) */
    model_t *fitted;           /* model fitted here */
    sim_workload w;
    int have_w;
    route_policy p;
    int have_p;
    sim_result r;
    int have_r;
    sim_prefix px;             /* the prefix replay (prefix_mode) */
    int have_px;
    sim_result mres[SIM_PREFIX_N_MODES];   /* ELDR per prefix mode */
    int have_mres;
} sim_state;

static int state_gc(lua_State *L)
{
    sim_state *s = luaL_checkudata(L, 1, L_SIMSTATE);
    if (s->have_r)
        sim_result_free(&s->r);
    for (int m = 0; s->have_mres && m < SIM_PREFIX_N_MODES; m++)
        sim_result_free(&s->mres[m]);
    if (s->have_px)
        sim_prefix_free(&s->px);
    if (s->have_p)
        route_policy_free(&s->p);
    if (s->have_w)
        sim_workload_free(&s->w);
    model_free(s->fitted);
    trace_free(s->calib);
    trace_free(s->eval);
    memset(s, 0, sizeof *s);
    return 0;
}

static trace_t *rows_of(lua_State *L, const trace_t *t, int64_t r0, int64_t r1, const char *fn)
{
    int64_t n = r1 - r0;
    int64_t *rows = l_box(L, (size_t)(n > 0 ? n : 1) * sizeof *rows);
    for (int64_t i = 0; i < n; i++)
        rows[i] = r0 + i;
    char err[ELDR_ERRLEN];
    trace_t *s = trace_select(t, rows, n, err, sizeof err);
    lua_pop(L, 1);
    if (!s)
        l_fail(L, fn, err);
    return s;
}

/* The cost option: a cost file path, or a table of coefficients. */
static void opt_cost(lua_State *L, int opts, cost_model *c, const char *fn)
{
    int t = l_getopt(L, opts, "cost");
    int idx = lua_gettop(L);
    char err[ELDR_ERRLEN];
    if (t == LUA_TSTRING) {
        if (cost_model_load(lua_tostring(L, idx), c, err, sizeof err))
            l_fail(L, fn, err);
    } else if (t == LUA_TTABLE) {
        static const char *const known[] = {"t0", "a", "b", "c", "d", NULL};
        l_checkopts(L, idx, fn, known);
        c->t0 = l_optnum(L, idx, fn, "t0", 0, 1e6, c->t0);
        c->a = l_optnum(L, idx, fn, "a", 0, 1e6, c->a);
        c->b = l_optnum(L, idx, fn, "b", 0, 1e6, c->b);
        c->c = l_optnum(L, idx, fn, "c", 0, 1e6, c->c);
        c->d = l_optnum(L, idx, fn, "d", 0, 1e6, c->d);
    } else if (t != LUA_TNIL)
        l_argerror(L, fn, "cost", "cost file path or {t0, a, b, c, d} expected");
    lua_pop(L, 1);
}

/* policy: a name or a list of names -> kinds */
static int opt_policies(lua_State *L, int opts, int *kinds, const char *fn)
{
    static const int defaults[] = {ROUTE_ELDR, ROUTE_RANDOM, ROUTE_RR, ROUTE_JSQ, ROUTE_P2C};
    int t = l_getopt(L, opts, "policy"), n = 0;
    if (t == LUA_TNIL) {
        memcpy(kinds, defaults, sizeof defaults);
        lua_pop(L, 1);
        return 5;
    }
    int idx = lua_gettop(L);
    int len = t == LUA_TSTRING ? 1 : t == LUA_TTABLE ? (int)lua_rawlen(L, idx) : 0;
    if (len < 1 || len > ROUTE_N_KINDS)
        l_argerror(L, fn, "policy", "a policy name or a list of 1..%d names expected",
                   ROUTE_N_KINDS);
    for (int i = 0; i < len; i++) {
        if (t == LUA_TTABLE)
            lua_rawgeti(L, idx, i + 1);
        else
            lua_pushvalue(L, idx);
        const char *name = lua_tostring(L, -1);
        int k = name ? route_kind_parse(name) : -1;
        if (k < 0)
            l_argerror(L, fn, "policy", "eldr, random, rr, jsq, p2c or domain expected, got "
                       "'%s'", name ? name : "?");
        for (int j = 0; j < n; j++)
            if (kinds[j] == k)
                l_argerror(L, fn, "policy", "'%s' appears twice", name);
        kinds[n++] = k;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return n;
}

static void push_result(lua_State *L, const sim_result *r, const trace_t *t, int requests,
                        int series)
{
    lua_newtable(L);
    lua_pushstring(L, r->policy);
    lua_setfield(L, -2, "policy");
    l_setint(L, "K", r->K);
    l_setint(L, "n", r->n);
    l_setnum(L, "tpot_p50_ms", r->tpot_p50_ms);
    l_setnum(L, "tpot_p95_ms", r->tpot_p95_ms);
    l_setnum(L, "tpot_p99_ms", r->tpot_p99_ms);
    l_setnum(L, "tpot_mean_ms", r->tpot_mean_ms);
    l_setnum(L, "queue_p50_ms", r->queue_p50_ms);
    l_setnum(L, "queue_p99_ms", r->queue_p99_ms);
    l_setnum(L, "queue_mean_ms", r->queue_mean_ms);
    l_setint(L, "steps", r->steps);
    l_setint(L, "tokens", r->tokens);
    l_setint(L, "activations", r->activations);
    l_setint(L, "distinct_loaded", r->distinct_loaded);
    l_setnum(L, "distinct_per_step", r->distinct_per_step);
    l_setnum(L, "reuse", r->reuse);
    l_setnum(L, "mean_batch", r->mean_batch);
    l_setnum(L, "makespan_s", r->makespan_s);
    l_setnum(L, "throughput_rps", r->throughput_rps);
    l_setnum(L, "tokens_per_s", r->tokens_per_s);
    l_setnum(L, "mean_in_system", r->mean_in_system);
    l_setnum(L, "mean_sojourn_s", r->mean_sojourn_s);
    l_setnum(L, "imbalance", r->imbalance);
    lua_newtable(L);
    for (int i = 0; i < RULE_N; i++)
        if (r->rule_count[i]) {
            lua_pushinteger(L, r->rule_count[i]);
            lua_setfield(L, -2, route_rule_name((route_rule)i));
        }
    lua_setfield(L, -2, "rules");
    l_pushint64s(L, r->served, r->K, 0);
    lua_setfield(L, -2, "served");
    l_pushint64s(L, r->worker_steps, r->K, 0);
    lua_setfield(L, -2, "worker_steps");
    l_pushnums(L, r->worker_busy_s, r->K);
    lua_setfield(L, -2, "worker_busy_s");
    l_pushnums(L, r->worker_distinct, r->K);
    lua_setfield(L, -2, "worker_distinct");
    l_pushnums(L, r->inflight_mean, r->K);
    lua_setfield(L, -2, "inflight_mean");
    if (requests) {
        lua_createtable(L, (int)r->n, 0);
        for (int64_t i = 0; i < r->n; i++) {
            const sim_request *q = &r->req[i];
            lua_createtable(L, 0, 8);
            l_setint(L, "row", q->row + 1);
            if (t->request_id && t->request_id[q->row]) {
                lua_pushstring(L, t->request_id[q->row]);
                lua_setfield(L, -2, "id");
            }
            l_setint(L, "worker", q->worker + 1);
            lua_pushstring(L, route_rule_name(q->rule));
            lua_setfield(L, -2, "rule");
            l_setint(L, "tokens", q->tokens);
            l_setnum(L, "arrival", q->arrival);
            l_setnum(L, "start", q->start);
            l_setnum(L, "finish", q->finish);
            lua_rawseti(L, -2, i + 1);
        }
        lua_setfield(L, -2, "requests");
    }
    if (series) {
        lua_createtable(L, (int)r->n_series, 0);
        for (int64_t i = 0; i < r->n_series; i++) {
            lua_createtable(L, 3, 0);
            lua_pushnumber(L, r->series[i].t);
            lua_rawseti(L, -2, 1);
            lua_pushinteger(L, r->series[i].worker + 1);
            lua_rawseti(L, -2, 2);
            lua_pushinteger(L, r->series[i].inflight);
            lua_rawseti(L, -2, 3);
            lua_rawseti(L, -2, i + 1);
        }
        lua_setfield(L, -2, "series");
    }
}

/* Label shares of the calibration rows (domain policy). */
static double *shares_of(lua_State *L, const trace_t *c, const char *fn)
{
    if (!c->label || c->n_labels < 1)
        luaL_error(L, "eldr.%s: the domain policy needs labels (the trace has no 'label' "
                   "dataset)", fn);
    double *share = l_box(L, (size_t)c->n_labels * sizeof *share);
    for (int64_t r = 0; r < c->n; r++)
        share[c->label[r]] += 1.0 / (double)c->n;
    return share;
}

/* The prefix-caching options (the CLI's --prefix-mode ...). */
typedef struct prefix_opts {
    int modes[SIM_PREFIX_N_MODES], n_modes;   /* in cold..uncached order; 0 = off */
    sim_prefix_config cfg;
} prefix_opts;

/* prefix_mode: a name, a comma list or a list of names (cold, cache,
 * uncached, all), read by the CLI's parser (sim_prefix_modes_parse). */
static void opt_modes(lua_State *L, int opts, prefix_opts *po, const char *fn)
{
    int on[SIM_PREFIX_N_MODES] = {0};
    int t = l_getopt(L, opts, "prefix_mode");
    int idx = lua_gettop(L);
    int len = t == LUA_TSTRING ? 1 : t == LUA_TTABLE ? (int)lua_rawlen(L, idx) : 0;
    if (t != LUA_TNIL && len < 1) {
        char got[48];
        l_argerror(L, fn, "prefix_mode", "cold, cache, uncached or all expected, got %s",
                   t == LUA_TTABLE ? "an empty table" : l_got(L, idx, got, sizeof got));
    }
    for (int i = 0; i < len; i++) {
        char bad[48];
        if (t == LUA_TTABLE)
            lua_rawgeti(L, idx, i + 1);
        else
            lua_pushvalue(L, idx);
        const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (!name)
            l_argerror(L, fn, "prefix_mode", "cold, cache, uncached or all expected, got %s "
                       "at [%d]", l_got(L, -1, bad, sizeof bad), i + 1);
        if (sim_prefix_modes_parse(name, on, bad, sizeof bad))
            l_argerror(L, fn, "prefix_mode", "cold, cache, uncached or all expected, got "
                       "'%s'", bad);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    po->n_modes = 0;
    for (int m = 0; m < SIM_PREFIX_N_MODES; m++)
        if (on[m])
            po->modes[po->n_modes++] = m;
    if (t != LUA_TNIL && po->n_modes == 0)
        l_argerror(L, fn, "prefix_mode", "no mode named");
}

/* The prefix options; those of the cache need prefix_mode (as in the CLI). */
static void opt_prefix(lua_State *L, int opts, prefix_opts *po, const char *fn)
{
    static const char *const keys[] = {"prefix_cache", "prefill_workers", "prefill_route",
                                       "block_size", NULL};
    sim_prefix_config *c = &po->cfg;
    sim_prefix_config_default(c);
    opt_modes(L, opts, po, fn);
    for (int i = 0; keys[i] && !po->n_modes; i++) {
        int t = l_getopt(L, opts, keys[i]);
        lua_pop(L, 1);
        if (t != LUA_TNIL)
            luaL_error(L, "eldr.%s: option '%s' needs prefix_mode", fn, keys[i]);
    }
    c->capacity = l_optint(L, opts, fn, "prefix_cache", 0, 1LL << 40, c->capacity);
    c->workers = (int)l_optint(L, opts, fn, "prefill_workers", 1, 1 << 16, c->workers);
    c->block_size = (int)l_optint(L, opts, fn, "block_size", 1, 255, c->block_size);
    const char *route = l_optstr(L, opts, fn, "prefill_route", "rr");
    int r = sim_prefill_route_parse(route);
    if (r < 0)
        l_argerror(L, fn, "prefill_route", "rr or prefix expected, got '%s'", route);
    c->route = (sim_prefill_route)r;
}

/* The per-mode fields of an eldr-MODE result (on the table on top). */
static void set_mode_fields(lua_State *L, const sim_prefix *px, int m, double same)
{
    lua_pushstring(L, sim_prefix_mode_name((sim_prefix_mode)m));
    lua_setfield(L, -2, "prefix_mode");
    l_setnum(L, "signature_cosine_vs_cold", px->cos_mean[m]);
    l_setnum(L, "same_worker_as_cold", same);
    l_setint(L, "zero_signatures", px->n_zero[m]);
}

/* info.prefix: the replay's statistics (the CLI's --json "prefix"), and
 * per simulated request the blocks served from the cache. */
static void push_prefix_info(lua_State *L, const sim_prefix *px)
{
    lua_createtable(L, 0, 14);
    l_setint(L, "capacity_blocks", px->cfg.capacity);
    l_setint(L, "prefill_workers", px->cfg.workers);
    lua_pushstring(L, sim_prefill_route_name(px->cfg.route));
    lua_setfield(L, -2, "prefill_route");
    l_setint(L, "block_size", px->cfg.block_size);
    l_setint(L, "blocks", px->blocks);
    l_setint(L, "hit_blocks", px->hit_blocks);
    l_setnum(L, "hit_rate", px->hit_rate);
    l_setint(L, "prompt_tokens", px->tokens);
    l_setint(L, "cached_tokens", px->cached_tokens);
    l_setnum(L, "cached_token_fraction", px->cached_frac_mean);
    l_setint(L, "evictions", px->evictions);
    l_setint(L, "recovered_equal_cold", px->n - px->mismatches);
    l_setint(L, "recovered_mismatches", px->mismatches);
    lua_createtable(L, px->n > 0 ? (int)px->n : 0, 0);
    for (int64_t i = 0; i < px->n; i++) {
        lua_pushinteger(L, px->hit[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "hit");
}

static const char *const sim_keys[] = {
    "model", "calib", "policy", "workers", "tau", "min2", "rate", "concurrency",
    "output_tokens", "max_batch", "calib_split", "cost", "sample_pool", "seed", "requests",
    "series", "prefix_mode", "prefix_cache", "prefill_workers", "prefill_route",
    "block_size", NULL};

/* eldr.simulate(trace [, opts]) -> results (list, one per policy), info */
static int l_simulate(lua_State *L)
{
    const char *fn = "simulate";
    trace_t *all = l_checktrace(L, 1, fn, "trace");
    l_checkopts(L, 2, fn, sim_keys);
    lua_settop(L, 2);
    sim_config cfg;
    sim_config_default(&cfg);
    int kinds[ROUTE_N_KINDS];
    int nk = opt_policies(L, 2, kinds, fn);
    int K = (int)l_optint(L, 2, fn, "workers", 1, ROUTE_MAX_WORKERS, 0);
    double tau = l_optnum(L, 2, fn, "tau", 0, 1e9, NAN);
    int min2 = l_optbool(L, 2, fn, "min2", 1);
    cfg.rate = l_optnum(L, 2, fn, "rate", 1e-9, 1e12, 0);
    cfg.concurrency = (int)l_optint(L, 2, fn, "concurrency", 1, 1 << 30, 0);
    if (cfg.rate > 0 && cfg.concurrency > 0)
        luaL_error(L, "eldr.%s: rate and concurrency exclude each other", fn);
    cfg.arrivals = cfg.rate > 0 ? SIM_ARRIVE_POISSON
                 : cfg.concurrency > 0 ? SIM_ARRIVE_CLOSED : SIM_ARRIVE_TRACE;
    cfg.output_tokens = (int32_t)l_optint(L, 2, fn, "output_tokens", 1, 1 << 30, 0);
    cfg.max_batch = (int)l_optint(L, 2, fn, "max_batch", 1, 1 << 20, cfg.max_batch);
    cfg.sample_pool = (int)l_optint(L, 2, fn, "sample_pool", 1, 1 << 20, cfg.sample_pool);
    cfg.seed = (uint64_t)l_optint(L, 2, fn, "seed", 0, INT64_MAX, 1);
    double split = l_optnum(L, 2, fn, "calib_split", 0, 1e15, SIM_DEFAULT_CALIB);
    int want_req = l_optbool(L, 2, fn, "requests", 0);
    int want_series = l_optbool(L, 2, fn, "series", 0);
    opt_cost(L, 2, &cfg.cost, fn);
    prefix_opts po;
    opt_prefix(L, 2, &po, fn);
    model_t *model = NULL;
    if (l_getopt(L, 2, "model") != LUA_TNIL)
        model = l_checkmodel(L, -1, fn, "model");
    lua_pop(L, 1);
    trace_t *calib_given = NULL;
    if (l_getopt(L, 2, "calib") != LUA_TNIL)
        calib_given = l_checktrace(L, -1, fn, "calib");
    lua_pop(L, 1);
    int wants_eldr = 0, wants_domain = 0;
    for (int i = 0; i < nk; i++) {
        wants_eldr |= kinds[i] == ROUTE_ELDR;
        wants_domain |= kinds[i] == ROUTE_DOMAIN;
    }
    char err[ELDR_ERRLEN];
    if (po.n_modes && !wants_eldr)
        l_argerror(L, fn, "prefix_mode", "needs the eldr policy in 'policy'");
    if (po.n_modes && sim_prefix_check_trace(all, po.cfg.block_size, err, sizeof err))
        return l_fail(L, fn, err);

    sim_state *s = lua_newuserdatauv(L, sizeof *s, 0);
    memset(s, 0, sizeof *s);
    luaL_setmetatable(L, L_SIMSTATE);
    /* the split: calibration = the given trace, or the first rows */
    const trace_t *calib, *eval;
    int64_t n_calib = 0;
    if (calib_given) {
        calib = calib_given;
        eval = all;
    } else {
        n_calib = sim_calib_rows(all->n, split, err, sizeof err);
        if (n_calib < 0)
            l_argerror(L, fn, "calib_split", "%s", err);
        if (n_calib > 0 && n_calib >= all->n)
            l_argerror(L, fn, "calib_split", "%lld calibration rows leave none of %lld to "
                       "simulate", (long long)n_calib, (long long)all->n);
        s->eval = rows_of(L, all, n_calib, all->n, fn);
        s->calib = rows_of(L, all, 0, n_calib ? n_calib : all->n, fn);
        calib = s->calib;
        eval = s->eval;
    }
    /* the model: given, or fitted on the calibration rows */
    if (model) {
        if (K && K != model->K)
            l_argerror(L, fn, "workers", "%d, but the model has K = %d workers", K, model->K);
        if (model->recipe.L != all->L || model->recipe.E != all->E || model->k != all->k)
            l_argerror(L, fn, "model", "geometry %d x %d top-%d does not match the trace's "
                       "%d x %d top-%d", model->recipe.L, model->recipe.E, model->k, all->L,
                       all->E, all->k);
        K = model->K;
    } else {
        K = K ? K : 4;
        if (wants_eldr) {
            model_fit_opts o;
            model_fit_opts_default(&o, K);
            o.seed = cfg.seed;
            if (!calib->decode_counts)
                o.layers = MODEL_LAYERS_ALL;
            if (calib->n < K)
                l_argerror(L, fn, "workers", "%lld calibration rows cannot fit K = %d",
                           (long long)calib->n, K);
            if (model_fit(calib, &o, &s->fitted, NULL, err, sizeof err))
                luaL_error(L, "eldr.%s: fitting on the calibration rows: %s", fn, err);
            model = s->fitted;
        }
    }
    if (!isfinite(tau))
        tau = model ? model->tau : MODEL_TAU_DEFAULT;
    double *share = wants_domain ? shares_of(L, calib, fn) : NULL;
    if (sim_workload_init(&s->w, eval, &cfg, model ? &model->recipe : NULL, err, sizeof err))
        return l_fail(L, fn, err);
    s->have_w = 1;
    if (po.n_modes) {
        if (sim_prefix_build(&s->px, &s->w, &model->recipe, &po.cfg, err, sizeof err))
            return l_fail(L, fn, err);
        s->have_px = 1;
    }

    lua_createtable(L, nk, 0);
    int results = lua_gettop(L), out = 0;
    double best = INFINITY;
    for (int i = 0; i < nk; i++) {
        if (kinds[i] == ROUTE_ELDR && po.n_modes) {
            double same[SIM_PREFIX_N_MODES];
            sim_prefix_router router = {K, cfg.seed, model->centroids, tau, min2};
            s->have_mres = 1;
            if (sim_prefix_run(&s->px, &s->w, po.modes, po.n_modes, &router, NULL, NULL,
                               s->mres, same, err, sizeof err))
                return l_fail(L, fn, err);
            for (int j = 0; j < po.n_modes; j++) {
                push_result(L, &s->mres[j], eval, want_req, want_series);
                set_mode_fields(L, &s->px, po.modes[j], same[j]);
                sim_result_free(&s->mres[j]);
                lua_rawseti(L, results, ++out);
            }
            s->have_mres = 0;
            continue;
        }
        if (route_policy_init(&s->p, (route_kind)kinds[i], K, cfg.seed, err, sizeof err))
            return l_fail(L, fn, err);
        s->have_p = 1;
        int rc = 0;
        if (kinds[i] == ROUTE_ELDR)
            rc = route_policy_set_centroids(&s->p, model->centroids, s->w.dim, tau, min2, err,
                                            sizeof err);
        else if (kinds[i] == ROUTE_DOMAIN)
            rc = route_policy_set_domains(&s->p, share, calib->n_labels, err, sizeof err);
        if (rc == 0)
            rc = sim_run(&s->w, &s->p, NULL, NULL, &s->r, err, sizeof err);
        route_policy_free(&s->p);
        s->have_p = 0;
        if (rc)
            return l_fail(L, fn, err);
        s->have_r = 1;
        push_result(L, &s->r, eval, want_req, want_series);
        if (route_kind_is_balancer((route_kind)kinds[i]) && s->r.tpot_p50_ms < best)
            best = s->r.tpot_p50_ms;
        sim_result_free(&s->r);
        s->have_r = 0;
        lua_rawseti(L, results, ++out);
    }
    /* change of TPOT p50 against the best load-balancing baseline */
    for (int i = 0; i < out && isfinite(best) && best > 0; i++) {
        lua_rawgeti(L, results, i + 1);
        lua_getfield(L, -1, "tpot_p50_ms");
        double v = lua_tonumber(L, -1);
        lua_pop(L, 1);
        l_setnum(L, "vs_best_pct", (v - best) / best * 100.0);
        lua_pop(L, 1);
    }
    lua_newtable(L);
    l_setint(L, "K", K);
    l_setnum(L, "tau", tau);
    l_setint(L, "calib_rows", calib->n);
    l_setint(L, "eval_rows", s->w.n);
    l_setint(L, "skipped_rows", s->w.n_skipped);
    lua_pushboolean(L, s->fitted != NULL);
    lua_setfield(L, -2, "fitted");
    lua_pushboolean(L, s->w.recorded);
    lua_setfield(L, -2, "recorded_activations");
    if (s->fitted) {
        l_model *mu = l_newmodel(L);
        mu->m = s->fitted;
        s->fitted = NULL;
        lua_setfield(L, -2, "model");
    }
    if (s->have_px) {
        push_prefix_info(L, &s->px);
        lua_setfield(L, -2, "prefix");
    }
    return 2;
}

/* eldr.calib_split(trace [, spec]) -> calib, eval: the simulator's split */
static int l_calib_split(lua_State *L)
{
    const char *fn = "calib_split";
    lua_settop(L, 2);
    trace_t *t = l_checktrace(L, 1, fn, "trace");
    double spec = lua_isnil(L, 2) ? SIM_DEFAULT_CALIB : l_checknum(L, 2, fn, "spec");
    char err[ELDR_ERRLEN];
    int64_t c = sim_calib_rows(t->n, spec, err, sizeof err);
    if (c < 0)
        l_argerror(L, fn, "spec", "%s", err);
    l_trace *a = l_newtrace(L);
    a->t = rows_of(L, t, 0, c, fn);
    l_trace *b = l_newtrace(L);
    b->t = rows_of(L, t, c, t->n, fn);
    return 2;
}

/* eldr.sweep: the grid lives in lua/eldr/experiments.lua */
static int l_sweep(lua_State *L)
{
    lua_getglobal(L, "require");
    lua_pushstring(L, "eldr.experiments");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "sweep");
    lua_insert(L, 1);
    lua_pop(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

static const l_fn module_fns[] = {
    {"simulate", l_simulate,
     "eldr.simulate(trace [, {model, calib, policy, workers, tau, min2, rate, concurrency, "
     "output_tokens, max_batch, calib_split, cost, sample_pool, seed, requests, series, "
     "prefix_mode, prefix_cache, prefill_workers, prefill_route, block_size}]) -> "
     "results, info"},
    {"calib_split", l_calib_split,
     "eldr.calib_split(trace [, spec = 1000]) -> calib, eval: the first rows (a count capped at "
     "half, a fraction, or 0 = none) as eldr sim splits"},
    {"sweep", l_sweep,
     "eldr.sweep(trace, {model, tau = {...}, workers = {...}, rate = {...}, calib_split, "
     "variant, layers, baselines, output_tokens, max_batch, cost, min2, seed}) -> rows"},
    {NULL, NULL, NULL},
};

void l_open_sim(lua_State *L)
{
    luaL_newmetatable(L, L_SIMSTATE);
    lua_pushcfunction(L, state_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
    l_register(L, module_fns, "eldr.");
}
