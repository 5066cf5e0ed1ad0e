/* l_sim.c - the decode routing simulator in Lua: eldr.simulate (what
 * `eldr sim` does, results as Lua tables) and eldr.sweep (the grid of
 * `eldr sweep`, written in Lua in lua/eldr/experiments.lua on top of
 * eldr.simulate; bound here so help and docs list it).
 *
 * eldr.simulate splits the trace like the CLI (src/core/split.h: a seeded
 * random split by default), or takes the calibration trace as `calib`;
 * uses the given Model or fits one on the calibration rows (a Model given
 * with no split option: no split, every row is simulated); builds one
 * workload of the evaluation rows (common random numbers) and runs every
 * policy, ELDR once per tau. With seeds = N > 1 the same policies run
 * again under N seeds on the grid engine (src/core/grid.h, as `eldr sim
 * --seeds N`), and each result carries the means and 95% confidence
 * intervals. With prefix_mode, ELDR runs once per prefix-caching mode
 * through the same core path as `eldr sim --prefix-mode` (sim_prefix_build,
 * sim_prefix_run) and info.prefix holds the replay's statistics. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel.h"
#include "err.h"
#include "insample.h"
#include "l_cost.h"
#include "l_gridrun.h"
#include "l_split.h"
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
            l_argerror(L, fn, "policy", "eldr, eldr-online, eldr-cost, random, rr, jsq, p2c "
                       "or domain expected, got '%s'", name ? name : "?");
        for (int j = 0; j < n; j++)
            if (kinds[j] == k)
                l_argerror(L, fn, "policy", "'%s' appears twice", name);
        kinds[n++] = k;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return n;
}

/* result.requests: one table per simulated request. */
static void push_requests(lua_State *L, const sim_result *r, const trace_t *t)
{
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

/* result.series: the in-flight series, {t, worker, inflight} each. */
static void push_series(lua_State *L, const sim_result *r)
{
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
    if (requests)
        push_requests(L, r, t);
    if (series)
        push_series(L, r);
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
    "output_tokens", "max_batch", "calib_split", "split", "split_seed", "seeds", "progress",
    "cost", "sample_pool", "seed", "requests", "series", "prefix_mode", "prefix_cache",
    "prefill_workers", "prefill_route", "block_size", "refit_every", "refit_window", NULL};

/* One policy (ELDR at tau) on the workload; pushes its result table. */
static void run_policy(lua_State *L, sim_state *s, route_kind kind, int K, uint64_t seed,
                       const model_t *model, double tau, int min2, const double *share,
                       int n_labels, const trace_t *eval, int want_req, int want_series,
                       const char *fn)
{
    char err[ELDR_ERRLEN];
    if (route_policy_init(&s->p, kind, K, seed, err, sizeof err))
        l_fail(L, fn, err);
    s->have_p = 1;
    int rc = 0;
    if (route_kind_has_centroids(kind))
        rc = route_policy_set_centroids(&s->p, model->centroids, s->w.dim, tau, min2, err,
                                        sizeof err);
    else if (kind == ROUTE_DOMAIN)
        rc = route_policy_set_domains(&s->p, share, n_labels, err, sizeof err);
    if (rc == 0)
        rc = sim_run(&s->w, &s->p, NULL, NULL, &s->r, err, sizeof err);
    route_policy_free(&s->p);
    s->have_p = 0;
    if (rc)
        l_fail(L, fn, err);
    s->have_r = 1;
    push_result(L, &s->r, eval, want_req, want_series);
    if (route_kind_has_centroids(kind))
        l_setnum(L, "tau", tau);
    if (kind == ROUTE_ELDR_ONLINE)
        l_setint(L, "refits", s->r.refits);
    sim_result_free(&s->r);
    s->have_r = 0;
}

/* progress(done, total) after one policy run of a single-seed simulation */
static void step_progress(lua_State *L, int progress, int done, int total)
{
    if (!progress)
        return;
    lua_pushvalue(L, progress);
    lua_pushinteger(L, done);
    lua_pushinteger(L, total);
    lua_call(L, 2, 0);
}

#define MAX_OUT (ROUTE_N_KINDS + GRID_MAX_LIST + SIM_PREFIX_N_MODES)

/* One call of eldr.simulate, from its options to its two results. Each
 * step below fills its part; what they push on the Lua stack (boxes, the
 * state, the results) stays there until the call returns. */
typedef struct sim_call {
    const char *fn;
    trace_t *all;                    /* argument 1 */
    sim_config cfg;
    int kinds[ROUTE_N_KINDS], nk, K;
    double taus[GRID_MAX_LIST];
    int ntau, min2, seeds, want_req, want_series, progress;
    split_spec sp;
    int split_given;
    prefix_opts po;
    model_t *model;                  /* given or fitted here */
    int model_idx;                   /* stack slot of the given Model, 0 */
    trace_t *calib_given;
    int calib_idx;                   /* stack slot of the given calib, 0 */
    int wants_eldr, wants_domain, wants_model;
    int whole;                       /* a model and no split: every row simulated */
    split_rows rows;
    const trace_t *calib, *eval;
    sim_state *s;
    int rate_default;
    int results, out;                /* the results table's slot, its length */
    route_kind *out_kind;
    double *out_tau;
    const char *baseline;
    int resplit;
    char covers[256];
    int64_t insample;                /* evaluated rows the model was fitted on; -1 unknown */
} sim_call;

/* The options of opts (slot 2) into c; nothing run yet. */
static void read_options(lua_State *L, sim_call *c)
{
    const char *fn = c->fn;
    sim_config_default(&c->cfg);
    c->cfg.no_heat = 1; /* eldr.simulate's result carries no heat matrix */
    c->nk = opt_policies(L, 2, c->kinds, fn);
    c->K = (int)l_optint(L, 2, fn, "workers", 1, ROUTE_MAX_WORKERS, 0);
    c->ntau = l_optnumlist(L, 2, fn, "tau", 0, ROUTE_TAU_MAX, c->taus, GRID_MAX_LIST);
    c->min2 = l_optbool(L, 2, fn, "min2", 1);
    sim_config *cfg = &c->cfg;
    cfg->rate = l_optnum(L, 2, fn, "rate", 1e-9, 1e12, 0);
    cfg->concurrency = (int)l_optint(L, 2, fn, "concurrency", 1, 1 << 30, 0);
    if (cfg->rate > 0 && cfg->concurrency > 0)
        luaL_error(L, "eldr.%s: rate and concurrency exclude each other", fn);
    cfg->arrivals = cfg->rate > 0 ? SIM_ARRIVE_POISSON
                  : cfg->concurrency > 0 ? SIM_ARRIVE_CLOSED : SIM_ARRIVE_TRACE;
    cfg->output_tokens = (int32_t)l_optint(L, 2, fn, "output_tokens", 1, 1 << 30, 0);
    cfg->max_batch = (int)l_optint(L, 2, fn, "max_batch", 1, 1 << 20, cfg->max_batch);
    cfg->sample_pool = (int)l_optint(L, 2, fn, "sample_pool", 1, 1 << 20, cfg->sample_pool);
    cfg->seed = (uint64_t)l_optint(L, 2, fn, "seed", 0, INT64_MAX / 2, 1);
    cfg->refit_every = l_optnum(L, 2, fn, "refit_every", 1e-6, 1e9, cfg->refit_every);
    cfg->refit_window = l_optnum(L, 2, fn, "refit_window", 1e-6, 1e9, cfg->refit_window);
    c->split_given = l_optsplit(L, 2, fn, &c->sp);
    if (!c->sp.pinned)           /* one seed draws the workload and the split */
        c->sp.seed = cfg->seed;
    c->seeds = (int)l_optint(L, 2, fn, "seeds", 1, GRID_MAX_SEEDS, 1);
    c->want_req = l_optbool(L, 2, fn, "requests", 0);
    c->want_series = l_optbool(L, 2, fn, "series", 0);
    l_optcost(L, 2, &cfg->cost, fn);
    opt_prefix(L, 2, &c->po, fn);
    if (l_getopt(L, 2, "model") != LUA_TNIL) {   /* stays on the stack */
        c->model = l_checkmodel(L, -1, fn, "model");
        c->model_idx = lua_gettop(L);
    } else
        lua_pop(L, 1);
    if (l_getopt(L, 2, "calib") != LUA_TNIL) {   /* stays on the stack */
        c->calib_given = l_checktrace(L, -1, fn, "calib");
        c->calib_idx = lua_gettop(L);
    } else
        lua_pop(L, 1);
    c->progress = l_optfn(L, 2, fn, "progress", "function(done, total)");
    for (int i = 0; i < c->nk; i++) {
        c->wants_eldr |= c->kinds[i] == ROUTE_ELDR;
        c->wants_model |= route_kind_has_centroids((route_kind)c->kinds[i]);
        c->wants_domain |= c->kinds[i] == ROUTE_DOMAIN;
    }
}

/* The options that exclude each other. */
static void check_options(lua_State *L, const sim_call *c)
{
    const char *fn = c->fn;
    char err[ELDR_ERRLEN];
    if (c->po.n_modes && !c->wants_eldr)
        l_argerror(L, fn, "prefix_mode", "needs the eldr policy in 'policy'");
    if (c->po.n_modes && c->seeds > 1)
        l_argerror(L, fn, "seeds", "%d, but the prefix-caching what-if runs one seed; drop "
                   "seeds or prefix_mode", c->seeds);
    if (c->po.n_modes && c->ntau > 1)
        l_argerror(L, fn, "tau", "one tau with prefix_mode, got %d", c->ntau);
    if (c->calib_given && c->split_given)
        l_argerror(L, fn, "calib", "a calibration trace and split, split_seed or calib_split "
                   "exclude each other");
    if (c->po.n_modes && sim_prefix_check_trace(c->all, c->po.cfg.block_size, err, sizeof err))
        l_fail(L, fn, err);
}

/* The calibration and evaluation traces: the given calib and the trace,
 * the whole trace (a model and no split), or the core split. Pushes the
 * state that owns them. */
static void make_split(lua_State *L, sim_call *c)
{
    const char *fn = c->fn;
    char err[ELDR_ERRLEN];
    /* A model given with no split asked for: its centroids already fix the
     * calibration, so the trace is taken as the rows to simulate - the
     * held-out rows of eldr.calibrate.run, say - and never split again
     * (the domain baseline's shares come from the same rows). */
    c->whole = c->model && !c->calib_given && !c->split_given;
    memset(&c->rows, 0, sizeof c->rows);
    if (!c->calib_given && !c->whole) {
        l_split_rows(L, c->all, &c->sp, -1, fn, "calib_split", &c->rows);
        if (c->rows.n_calib > 0 && c->rows.n_eval < 1)
            l_argerror(L, fn, "calib_split", "%lld calibration rows leave none of %lld to "
                       "simulate", (long long)c->rows.n_calib, (long long)c->all->n);
    }
    sim_state *s = c->s = lua_newuserdatauv(L, sizeof *s, 0);
    memset(s, 0, sizeof *s);
    luaL_setmetatable(L, L_SIMSTATE);
    if (c->calib_given || c->whole) {
        c->calib = c->calib_given ? c->calib_given : c->all;
        c->eval = c->all;
        return;
    }
    const split_rows *r = &c->rows;
    if (!(s->eval = trace_select(c->all, r->eval, r->n_eval, err, sizeof err)))
        l_fail(L, fn, err);
    /* no split (size 0): calibrate on the simulated rows (in-sample) */
    s->calib = r->n_calib ? trace_select(c->all, r->calib, r->n_calib, err, sizeof err)
                          : trace_select(c->all, r->eval, r->n_eval, err, sizeof err);
    if (!s->calib)
        l_fail(L, fn, err);
    c->calib = s->calib;
    c->eval = s->eval;
}

/* The model: the given one (checked against the trace and K), or one
 * fitted on the calibration rows when a policy needs centroids. */
static void get_model(lua_State *L, sim_call *c)
{
    const char *fn = c->fn;
    const model_t *m = c->model;
    if (m) {
        if (c->K && c->K != m->K)
            l_argerror(L, fn, "workers", "%d, but the model has K = %d workers", c->K, m->K);
        if (!model_fits_geometry(m, c->all->L, c->all->E, c->all->k))
            l_argerror(L, fn, "model", "geometry %d x %d top-%d does not match the trace's "
                       "%d x %d top-%d", m->recipe.L, m->recipe.E, m->k, c->all->L,
                       c->all->E, c->all->k);
        c->K = m->K;
    } else {
        c->K = c->K ? c->K : 4;
        if (c->wants_model) {
            char err[ELDR_ERRLEN];
            model_fit_opts o;
            model_fit_opts_default(&o, c->K);
            o.seed = c->cfg.seed;
            if (!c->calib->decode_counts)
                o.layers = MODEL_LAYERS_ALL;
            if (c->calib->n < c->K)
                l_argerror(L, fn, "workers", "%lld calibration rows cannot fit K = %d",
                           (long long)c->calib->n, c->K);
            if (model_fit(c->calib, &o, &c->s->fitted, NULL, err, sizeof err))
                luaL_error(L, "eldr.%s: fitting on the calibration rows: %s", fn, err);
            c->model = c->s->fitted;
        }
    }
    if (!c->ntau) {
        c->taus[0] = c->model ? c->model->tau : MODEL_TAU_DEFAULT;
        c->ntau = 1;
    }
}

/* How many of the evaluated rows the model was calibrated on: all of
 * them when calibration and evaluation are one Trace (calib = 0 here, or
 * the calib option naming the trace itself); for a model eldr.fit fitted
 * in this session, the rows its Trace and the simulated ones share (the
 * same Trace, or Traces cut from one loaded Trace: l_set_lineage); else
 * the file provenance of a loaded model against the file the trace was
 * loaded from (insample.h); -1 when that says "this file, rows unknown". */
static int64_t insample_of(lua_State *L, const sim_call *c)
{
    int64_t n_eval = c->eval->n;
    if (!c->model || !c->wants_model)
        return 0;
    if (c->s->fitted)   /* fitted here on the calibration rows */
        return (c->calib_given ? c->calib_given == c->all : c->rows.n_calib == 0) ? n_eval : 0;
    /* the evaluated rows as rows of argument 1 (NULL: its first n_eval) */
    int split = !c->calib_given && !c->whole;
    const int64_t *eval = split ? c->rows.eval : NULL;
    l_push_fitted_on(L, c->model_idx);
    if (!lua_isnil(L, -1)) {
        int64_t both = l_rows_shared(L, -1, 1, eval, n_eval);
        lua_pop(L, 1);
        return both;
    }
    lua_pop(L, 1);
    const char *path = l_trace_path(L, 1);
    if (!path)
        return 0;
    int64_t *rows = l_box(L, (size_t)n_eval * sizeof *rows);
    for (int64_t i = 0; i < n_eval; i++)
        rows[i] = eval ? eval[i] : i;
    return insample_rows(c->model, path, c->all, rows, n_eval, NULL);
}

#define WARNED "eldr.insample_warned"   /* registry: Model -> {Trace -> true}, weak */

/* 1 the first time the given Model is simulated in-sample on this Trace
 * (argument 1); a model fitted here is new every call. Marks the pair. */
static int first_warning(lua_State *L, const sim_call *c)
{
    if (!c->model_idx)
        return 1;
    l_pushweakreg(L, WARNED, "k");
    lua_pushvalue(L, c->model_idx);
    if (lua_rawget(L, -2) != LUA_TTABLE) {   /* this model's traces */
        lua_pop(L, 1);
        l_newweak(L, "k");
        lua_pushvalue(L, c->model_idx);
        lua_pushvalue(L, -2);
        lua_rawset(L, -4);
    }
    lua_pushvalue(L, 1);
    int seen = lua_rawget(L, -2) != LUA_TNIL;
    lua_pop(L, 1);
    lua_pushvalue(L, 1);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 2);
    return !seen;
}

/* The warning on stderr, once per model and trace (info.in_sample says
 * it every time). */
static void warn_insample(lua_State *L, const sim_call *c)
{
    if (!c->insample || !first_warning(L, c))
        return;
    if (c->insample > 0)
        fprintf(stderr, "eldr.%s: warning: %lld of the %lld simulated rows are the model's "
                "own calibration rows: the results are %sin-sample\n", c->fn,
                (long long)c->insample, (long long)c->eval->n,
                c->insample == c->eval->n ? "" : "partly ");
    else
        fprintf(stderr, "eldr.%s: warning: the model was fitted on this trace's file and "
                "does not say on which rows: the results may be in-sample\n", c->fn);
}

/* The workload of the evaluation rows (and the prefix replay). */
static void make_workload(lua_State *L, sim_call *c)
{
    char err[ELDR_ERRLEN];
    sim_state *s = c->s;
    /* the one default: the trace's arrivals, else SIM_DEFAULT_RATE, said in info */
    c->rate_default = sim_default_arrivals(&c->cfg, c->eval);
    if (sim_workload_init(&s->w, c->eval, &c->cfg, c->model ? &c->model->recipe : NULL, err,
                          sizeof err))
        l_fail(L, c->fn, err);
    s->have_w = 1;
    if (c->po.n_modes) {
        if (sim_prefix_build(&s->px, &s->w, &c->model->recipe, &c->po.cfg, err, sizeof err))
            l_fail(L, c->fn, err);
        s->have_px = 1;
    }
}

/* Append the result table on top to the results, as policy kind at tau. */
static void add_result(lua_State *L, sim_call *c, route_kind kind, double tau)
{
    c->out_kind[c->out] = kind;
    c->out_tau[c->out] = tau;
    lua_rawseti(L, c->results, ++c->out);
}

/* ELDR once per prefix-caching mode (one tau). */
static void run_prefix_modes(lua_State *L, sim_call *c)
{
    char err[ELDR_ERRLEN];
    sim_state *s = c->s;
    double same[SIM_PREFIX_N_MODES];
    sim_prefix_router router = {c->K, c->cfg.seed, c->model->centroids, c->taus[0], c->min2};
    s->have_mres = 1;
    if (sim_prefix_run(&s->px, &s->w, c->po.modes, c->po.n_modes, &router, NULL, NULL,
                       s->mres, same, err, sizeof err))
        l_fail(L, c->fn, err);
    for (int j = 0; j < c->po.n_modes; j++) {
        push_result(L, &s->mres[j], c->eval, c->want_req, c->want_series);
        set_mode_fields(L, &s->px, c->po.modes[j], same[j]);
        l_setnum(L, "tau", c->taus[0]);
        sim_result_free(&s->mres[j]);
        add_result(L, c, ROUTE_ELDR, c->taus[0]);
    }
    s->have_mres = 0;
}

/* Every policy once (ELDR once per tau) into a new results table; then
 * vs_best_pct against the best of the baselines jsq, rr, p2c (random is
 * reference only, as in eldr sim, eldr advise and the dashboard). */
static void run_policies(lua_State *L, sim_call *c)
{
    int total = 0, done = 0, best_at = -1;
    for (int i = 0; i < c->nk; i++)
        total += route_kind_has_centroids((route_kind)c->kinds[i]) && !c->po.n_modes
                 ? c->ntau : 1;
    double *share = c->wants_domain ? shares_of(L, c->calib, c->fn) : NULL;
    c->out_kind = l_box(L, MAX_OUT * sizeof *c->out_kind);
    c->out_tau = l_box(L, MAX_OUT * sizeof *c->out_tau);
    lua_createtable(L, total, 0);
    c->results = lua_gettop(L);
    int progress = c->seeds > 1 ? 0 : c->progress;   /* the grid reports the seeds */
    double best = INFINITY;
    for (int i = 0; i < c->nk; i++) {
        route_kind kind = (route_kind)c->kinds[i];
        if (kind == ROUTE_ELDR && c->po.n_modes) {
            run_prefix_modes(L, c);
            step_progress(L, progress, ++done, total);
            continue;
        }
        int nt = route_kind_has_centroids(kind) ? c->ntau : 1;
        for (int j = 0; j < nt; j++) {
            double tau = route_kind_has_centroids(kind) ? c->taus[j] : NAN;
            run_policy(L, c->s, kind, c->K, c->cfg.seed, c->model, tau, c->min2, share,
                       c->calib->n_labels, c->eval, c->want_req, c->want_series, c->fn);
            lua_getfield(L, -1, "tpot_p50_ms");
            double v = lua_tonumber(L, -1);
            lua_pop(L, 1);
            if (grid_is_default_baseline(kind) && v < best) {
                best = v;
                best_at = c->out;
            }
            add_result(L, c, kind, tau);
            step_progress(L, progress, ++done, total);
        }
    }
    /* change of TPOT p50 against the best load-balancing baseline */
    for (int i = 0; i < c->out && isfinite(best) && best > 0; i++) {
        lua_rawgeti(L, c->results, i + 1);
        lua_getfield(L, -1, "tpot_p50_ms");
        double v = lua_tonumber(L, -1);
        lua_pop(L, 1);
        l_setnum(L, "vs_best_pct", (v - best) / best * 100.0);
        lua_pop(L, 1);
    }
    c->baseline = best_at >= 0 ? route_kind_name(c->out_kind[best_at]) : NULL;
}

/* What the seeds' intervals cover (info.ci_covers, split_redrawn). */
static void describe_cover(sim_call *c)
{
    int redraw = grid_should_resplit(&c->sp, c->seeds);
    c->resplit = !c->calib_given && !c->whole && (c->s->fitted || !c->wants_model) && redraw;
    const char *fixed =
        c->calib_given ? "one split (the calibration trace is given)"
        : c->whole ? "no split (the model is given: every row of the trace is simulated)"
        : c->model && !c->s->fitted && redraw
            ? "one split (the model is given: its centroids fix the calibration)"
            : NULL;
    grid_ci_covers(c->seeds, c->cfg.seed, c->resplit, &c->sp, fixed, c->covers,
                   sizeof c->covers);
}

/* seeds > 1: every policy under seeds seed .. seed + N - 1 (the first
 * repeats the single run), means and 95% CIs set on the results, as eldr
 * sim --seeds N. */
static void run_seeds(lua_State *L, sim_call *c)
{
    grid_spec g;
    grid_spec_default(&g);
    g.calib = c->calib;
    g.eval = c->eval;
    g.model = c->model;
    g.cfg = c->cfg;
    g.n_seeds = c->seeds;
    grid_spec_policies(&g, c->K, c->kinds, c->nk, c->taus, c->ntau);
    g.min2 = c->min2;
    /* a model fitted here: each seed draws its own split and fit (the
     * first repeats the run above) */
    if (c->resplit)
        grid_spec_resplit(&g, c->all, &c->sp, c->K, c->cfg.seed);
    grid_result *gr = l_grid_run(L, &g, c->progress, c->fn);
    c->baseline = NULL;
    for (int o = 0; o < c->out; o++)
        for (int j = 0; j < gr->n; j++) {
            const grid_row *r = &gr->rows[j];
            if (r->kind != c->out_kind[o] ||
                (route_kind_has_centroids(r->kind) && r->tau != c->out_tau[o]))
                continue;
            lua_rawgeti(L, c->results, o + 1);
            l_set_seed_stats(L, r);
            lua_pop(L, 1);
            if (r->best_baseline >= 0)
                c->baseline = route_kind_name(gr->rows[r->best_baseline].kind);
            break;
        }
    lua_pop(L, 1);    /* the grid result */
}

/* info.split: the core split, or what stood in for one. */
static void push_split_info(lua_State *L, const sim_call *c)
{
    if (!c->calib_given && !c->whole) {
        l_pushsplit(L, &c->rows);
        return;
    }
    char text[160];
    if (c->whole)
        snprintf(text, sizeof text, "no split: the model is given; all %lld rows simulated",
                 (long long)c->eval->n);
    else
        snprintf(text, sizeof text, "calibration trace given: %lld calibration, %lld "
                 "evaluation rows", (long long)c->calib->n, (long long)c->eval->n);
    lua_createtable(L, 0, 4);
    lua_pushstring(L, c->whole ? "none" : "given");
    lua_setfield(L, -2, "mode");
    l_setint(L, "calib_rows", c->whole ? 0 : c->calib->n);
    l_setint(L, "eval_rows", c->eval->n);
    lua_pushstring(L, text);
    lua_setfield(L, -2, "text");
}

static void set_bool(lua_State *L, const char *k, int v)
{
    lua_pushboolean(L, v);
    lua_setfield(L, -2, k);
}

/* Push the info table (the second result). */
static void push_info(lua_State *L, sim_call *c)
{
    sim_state *s = c->s;
    lua_newtable(L);
    l_setint(L, "K", c->K);
    l_setnum(L, "tau", c->taus[0]);
    l_pushnums(L, c->taus, c->ntau);
    lua_setfield(L, -2, "taus");
    l_setint(L, "calib_rows", c->whole ? 0 : c->calib->n);
    l_setint(L, "eval_rows", s->w.n);
    l_setint(L, "skipped_rows", s->w.n_skipped);
    l_setint(L, "seeds", c->seeds);
    l_setint(L, "seed", (lua_Integer)c->cfg.seed);
    lua_pushstring(L, c->covers);
    lua_setfield(L, -2, "ci_covers");
    set_bool(L, "split_redrawn", c->resplit);
    set_bool(L, "rate_default", c->rate_default);
    if (c->cfg.arrivals == SIM_ARRIVE_POISSON)
        l_setnum(L, "rate", c->cfg.rate);
    if (c->baseline) {
        lua_pushstring(L, c->baseline);
        lua_setfield(L, -2, "baseline");
    }
    push_split_info(L, c);
    lua_setfield(L, -2, "split");
    set_bool(L, "in_sample", c->insample != 0);
    if (c->insample > 0)
        l_setint(L, "in_sample_rows", c->insample);
    set_bool(L, "fitted", s->fitted != NULL);
    set_bool(L, "recorded_activations", s->w.recorded);
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
}

/* eldr.simulate(trace [, opts]) -> results (list, one per policy), info */
static int l_simulate(lua_State *L)
{
    sim_call call, *c = &call;
    memset(c, 0, sizeof *c);
    c->fn = "simulate";
    c->all = l_checktrace(L, 1, c->fn, "trace");
    l_checkopts(L, 2, c->fn, sim_keys);
    lua_settop(L, 2);
    read_options(L, c);
    check_options(L, c);
    make_split(L, c);
    get_model(L, c);
    c->insample = insample_of(L, c);
    make_workload(L, c);
    run_policies(L, c);
    describe_cover(c);
    if (c->seeds > 1)
        run_seeds(L, c);
    warn_insample(L, c);
    push_info(L, c);
    lua_pushvalue(L, c->results);
    lua_insert(L, -2);
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
     "eldr.simulate(trace [, {model, calib, policy, workers, tau (a number or a list), min2, "
     "rate, concurrency, output_tokens, max_batch, split = 'random'|'head'|'stratified', "
     "split_seed, calib_split, seeds, progress, cost, sample_pool, seed, requests, series, "
     "prefix_mode, prefix_cache, prefill_workers, prefill_route, block_size, refit_every, "
     "refit_window}]) -> results, info (policy eldr-online: refits as simulated time passes; "
     "eldr-cost: the cost rule, no model needed)"},
    {"sweep", l_sweep,
     "eldr.sweep(trace, {model, tau = {...}, workers = {...}, rate = {...}, split, split_seed, "
     "calib_split, seeds, progress, variant, layers, baselines, output_tokens, max_batch, "
     "cost, min2, seed, online, cost_rule}) -> rows (online = true: eldr-online beside "
     "eldr; cost_rule = true: eldr-cost in each cell)"},
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
