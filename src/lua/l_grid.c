/* l_grid.c - the policy grid over seeds in Lua (src/core/grid.h):
 * eldr.advise, which answers "which tau at this fleet's K?" as `eldr
 * advise` does (grid_run through l_gridrun.c, then the one verdict,
 * verdict.h), and eldr._sweep_grid, the engine of eldr.sweep
 * (lua/eldr/experiments.lua) on every path - one seed, a model, a pinned
 * split, online refits - so its verdicts are `eldr sweep`'s: the same
 * grid, the same verdict_decide, "no verdict at K 4" with one seed. */
#include <math.h>
#include <string.h>

#include "err.h"
#include "l_cost.h"
#include "l_gridrun.h"
#include "l_split.h"
#include "l_types.h"
#include "l_util.h"
#include "model.h"
#include "route.h"
#include "verdict.h"

/* ---- eldr.advise ---- */

/* workers: an integer or a list of integers 1..ROUTE_MAX_WORKERS */
static int opt_workers(lua_State *L, int opts, const char *fn, int *out)
{
    double v[GRID_MAX_LIST];
    int n = l_optnumlist(L, opts, fn, "workers", 1, ROUTE_MAX_WORKERS, v, GRID_MAX_LIST);
    for (int i = 0; i < n; i++) {
        if (v[i] != floor(v[i]))
            l_argerror(L, fn, "workers", "integers expected, got %g", v[i]);
        out[i] = (int)v[i];
    }
    return n;
}

/* baselines: a name or a list of random, rr, jsq, p2c, domain */
static int opt_baselines(lua_State *L, int opts, const char *fn, route_kind *out)
{
    int t = l_getopt(L, opts, "baselines");
    if (t == LUA_TNIL) {          /* GRID_DEFAULT_BASELINES, as every front end */
        lua_pop(L, 1);
        grid_spec d;
        grid_spec_default(&d);
        memcpy(out, d.baselines, (size_t)d.n_base * sizeof *out);
        return d.n_base;
    }
    int idx = lua_gettop(L);
    int len = t == LUA_TSTRING ? 1 : t == LUA_TTABLE ? (int)lua_rawlen(L, idx) : 0;
    if (len < 1 || len >= ROUTE_N_KINDS)
        l_argerror(L, fn, "baselines", "a baseline name or a list of 1..%d names expected",
                   ROUTE_N_KINDS - 1);
    for (int i = 0; i < len; i++) {
        if (t == LUA_TTABLE)
            lua_rawgeti(L, idx, i + 1);
        else
            lua_pushvalue(L, idx);
        const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
        int k = route_kind_parse(name);
        if (k < 0 || grid_kind_is_candidate((route_kind)k))
            l_argerror(L, fn, "baselines", "random, rr, jsq, p2c or domain expected, got "
                       "'%s'%s", name, k == ROUTE_ELDR_COST ? " (eldr-cost is cost_rule = true)"
                                                            : "");
        for (int j = 0; j < i; j++)
            if (out[j] == (route_kind)k)
                l_argerror(L, fn, "baselines", "'%s' appears twice", name);
        out[i] = (route_kind)k;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return len;
}

/* The verdict (verdict.h) as {answer, why, head, reason, rule, K,
 * setting, baseline, baselines, comparisons, wins, margins, changes}. */
static void push_verdict(lua_State *L, const grid_result *g, const verdict *v)
{
    verdict_text t;
    char base[96], tp[200];
    verdict_words(g, v, &t);
    verdict_baselines(g, base, sizeof base);
    grid_throughput_phrase(g, tp, sizeof tp);
    lua_createtable(L, 0, 20);
    const char *strs[][2] = {{"answer", verdict_answer_name(v->answer)},
                             {"why", verdict_why_name(v->why)}, {"head", t.head},
                             {"reason", t.reason}, {"rule", t.rule}, {"baselines", base},
                             {"throughput", tp}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        lua_pushstring(L, strs[i][1]);
        lua_setfield(L, -2, strs[i][0]);
    }
    if (v->opts.K > 0)
        l_setint(L, "K", v->opts.K);
    l_setint(L, "grid_index", v->row + 1);
    if (v->setting >= 0)
        l_setint(L, "setting", v->setting + 1);
    if (v->baseline >= 0) {
        lua_pushstring(L, route_kind_name(g->rows[v->baseline].kind));
        lua_setfield(L, -2, "baseline");
    }
    l_setint(L, "comparisons", v->n_compared);
    l_setint(L, "wins", v->n_wins);
    l_setnum(L, "p50_gain_pct", v->opts.p50_gain_pct);
    l_setnum(L, "p99_margin_pct", v->opts.p99_loss_pct);
    l_setnum(L, "tps_margin_pct", v->opts.tps_loss_pct);
    if (v->setting >= 0) {
        l_setnum(L, "p50_change_pct", v->cmp.p50.mean);
        l_setci(L, "p50_ci_corrected", &v->cmp.p50);
        l_setnum(L, "p99_change_pct", v->cmp.p99.mean);
        l_setci(L, "p99_ci_corrected", &v->cmp.p99);
        l_setnum(L, "tps_change_pct", v->cmp.tps.mean);
        l_setci(L, "tps_ci_corrected", &v->cmp.tps);
    }
}

static void push_recommendation(lua_State *L, const grid_result *g, const verdict *v)
{
    char reason[768];
    verdict_reason(g, v, reason, sizeof reason);
    const grid_row *r = &g->rows[v->row];
    lua_createtable(L, 0, 12);
    lua_pushstring(L, route_kind_name(r->kind));
    lua_setfield(L, -2, "policy");
    l_setnum(L, "tau", r->tau);
    l_setint(L, "workers", r->K);
    l_setint(L, "K", r->K);
    if (r->rate > 0)
        l_setnum(L, "rate", r->rate);
    else {
        lua_pushstring(L, "trace");
        lua_setfield(L, -2, "rate");
    }
    l_setnum(L, "tpot_p50_ms", r->tpot_p50.mean);
    l_setci(L, "tpot_p50_ms_ci95", &r->tpot_p50);
    l_setnum(L, "tpot_p99_ms", r->tpot_p99.mean);
    l_setnum(L, "tokens_per_s", r->tokens_per_s.mean);
    lua_pushboolean(L, v->answer == VERDICT_WIN);
    lua_setfield(L, -2, "eldr_beats_baseline");
    l_setint(L, "grid_index", v->row + 1);
    lua_pushstring(L, reason);   /* the verdict's reason, as eldr advise --json */
    lua_setfield(L, -2, "sentence");
}

static const char *const advise_keys[] = {
    "model", "workers", "tau", "rate", "seeds", "seed", "split", "split_seed", "calib_split",
    "variant", "layers", "baselines", "output_tokens", "max_batch", "cost", "min2",
    "sample_pool", "threads", "progress", "min_gain", "cost_rule", "p99_margin", "tps_margin",
    "compare_fleets", NULL};
/* eldr.sweep's: advise's, and what only its grid takes (online refits,
 * a closed loop) */
static const char *const sweep_keys[] = {
    "model", "workers", "tau", "rate", "seeds", "seed", "split", "split_seed", "calib_split",
    "variant", "layers", "baselines", "output_tokens", "max_batch", "cost", "min2",
    "sample_pool", "threads", "progress", "min_gain", "cost_rule", "p99_margin", "tps_margin",
    "compare_fleets", "online", "refit_every", "refit_window", "concurrency", NULL};

/* sweep's options beyond advise's: eldr-online rows and a closed loop */
static void sweep_options(lua_State *L, const char *fn, grid_spec *g)
{
    g->online = l_optbool(L, 2, fn, "online", 0);
    g->cfg.refit_every = l_optnum(L, 2, fn, "refit_every", 1e-6, 1e9, g->cfg.refit_every);
    g->cfg.refit_window = l_optnum(L, 2, fn, "refit_window", 1e-6, 1e9, g->cfg.refit_window);
    g->cfg.concurrency = (int)l_optint(L, 2, fn, "concurrency", 1, 1 << 30, 0);
    if (g->cfg.concurrency > 0) {
        if (g->n_rates)
            l_argerror(L, fn, "concurrency", "rate and concurrency exclude each other");
        g->cfg.arrivals = SIM_ARRIVE_CLOSED;
    }
}

/* eldr.advise(trace [, opts]) -> {recommendation, grid, split, ...};
 * sweep: eldr._sweep_grid, one seed allowed (its verdicts say "no
 * verdict") and sweep_options read. */
static int grid_call(lua_State *L, const char *fn, int sweep)
{
    lua_settop(L, 2);
    trace_t *t = l_checktrace(L, 1, fn, "trace");
    l_checkopts(L, 2, fn, sweep ? sweep_keys : advise_keys);
    grid_spec g;
    grid_spec_default(&g);
    model_t *model = NULL;
    if (l_getopt(L, 2, "model") != LUA_TNIL)
        model = l_checkmodel(L, -1, fn, "model");
    lua_pop(L, 1);
    if (model && !model_fits_geometry(model, t->L, t->E, t->k))
        l_argerror(L, fn, "model", "geometry %d x %d top-%d does not match the trace's "
                   "%d x %d top-%d", model->recipe.L, model->recipe.E, model->k, t->L, t->E,
                   t->k);
    g.n_workers = opt_workers(L, 2, fn, g.workers);
    if (!g.n_workers && model)
        g.workers[g.n_workers++] = model->K;
    if (!g.n_workers)
        g.workers[g.n_workers++] = 4;     /* as eldr advise: the default fleet */
    int fleets = l_optbool(L, 2, fn, "compare_fleets", 0);
    if (g.n_workers > 1 && !fleets)
        l_argerror(L, fn, "workers", "%d values, but the fleet has one K; give its K, or "
                   "compare_fleets = true to let K vary", g.n_workers);
    g.n_taus = l_optnumlist(L, 2, fn, "tau", 0, ROUTE_TAU_MAX, g.taus, GRID_MAX_LIST);
    if (!g.n_taus) {
        static const double def[] = {0, 0.05, 0.1, 0.2};
        memcpy(g.taus, def, sizeof def);
        g.n_taus = 4;
    }
    g.n_rates = l_optnumlist(L, 2, fn, "rate", 1e-9, 1e9, g.rates, GRID_MAX_LIST);
    if (sweep)
        sweep_options(L, fn, &g);
    int rate_default = !g.n_rates && !t->arrival_s &&    /* the one default rule */
                       g.cfg.arrivals != SIM_ARRIVE_CLOSED;
    if (rate_default)
        g.rates[g.n_rates++] = SIM_DEFAULT_RATE;
    g.n_seeds = (int)l_optint(L, 2, fn, "seeds", sweep ? 1 : 2, GRID_MAX_SEEDS, sweep ? 1 : 5);
    g.cfg.seed = (uint64_t)l_optint(L, 2, fn, "seed", 0, INT64_MAX / 2, 1);
    g.cfg.output_tokens = (int32_t)l_optint(L, 2, fn, "output_tokens", 1, 1 << 24, 0);
    g.cfg.max_batch = (int)l_optint(L, 2, fn, "max_batch", 1, 1 << 20, g.cfg.max_batch);
    g.cfg.sample_pool = (int)l_optint(L, 2, fn, "sample_pool", 1, 1 << 20, g.cfg.sample_pool);
    g.min2 = l_optbool(L, 2, fn, "min2", 1);
    g.threads = (int)l_optint(L, 2, fn, "threads", 0, 64, 0);
    verdict_opts vo;
    verdict_opts_default(&vo);
    vo.p50_gain_pct = l_optnum(L, 2, fn, "min_gain", 0, 100, vo.p50_gain_pct);
    vo.p99_loss_pct = l_optnum(L, 2, fn, "p99_margin", 0, 1000, vo.p99_loss_pct);
    vo.tps_loss_pct = l_optnum(L, 2, fn, "tps_margin", 0, 100, vo.tps_loss_pct);
    vo.K = fleets ? 0 : g.workers[0];
    l_optcost(L, 2, &g.cfg.cost, fn);
    g.n_base = opt_baselines(L, 2, fn, g.baselines);
    g.cost = l_optbool(L, 2, fn, "cost_rule", 0);   /* eldr-cost: one more candidate */
    /* the recipe: the model's variant and mask, else variant and layers */
    g.fit.seed = g.cfg.seed;
    if (model) {
        static const char *const own[] = {"variant", "layers", NULL};
        for (int i = 0; own[i]; i++) {
            int ty = l_getopt(L, 2, own[i]);
            lua_pop(L, 1);
            if (ty != LUA_TNIL)
                l_argerror(L, fn, own[i], "the model gives the recipe; drop '%s' or 'model'",
                           own[i]);
        }
        g.fit.variant = model->recipe.variant;
        g.fit.layers = MODEL_LAYERS_LIST;
        g.fit.layer_list = model->recipe.layers;
        g.fit.n_layer_list = model->recipe.n_layers;
    } else {
        g.fit.variant = l_checkvariant(L, fn, l_optstr(L, 2, fn, "variant", "count_idf"));
        int *list = NULL, nl = 0;
        int mode = l_checklayers(L, 2, fn, "layers", t->L, "auto", &list, &nl);
        if (mode == 1 && !t->decode_counts)
            l_argerror(L, fn, "layers", "'auto' needs decode_counts; give 'all' or a list");
        g.fit.layers = mode == 0 ? MODEL_LAYERS_ALL : mode == 1 ? MODEL_LAYERS_AUTO
                                                                : MODEL_LAYERS_LIST;
        g.fit.layer_list = list;          /* a box on the stack */
        g.fit.n_layer_list = nl;
    }
    split_spec sp;
    l_optsplit(L, 2, fn, &sp);
    if (!sp.pinned)              /* one seed draws the workload and the split */
        sp.seed = g.cfg.seed;
    if (sp.size == 0)
        l_argerror(L, fn, "calib_split", "0 leaves no calibration rows to fit on");
    int progress = l_optfn(L, 2, fn, "progress", "function(done, total)");
    split_rows rows;
    l_split_rows(L, t, &sp, -1, fn, "calib_split", &rows);
    if (rows.n_calib < 1 || rows.n_eval < 1)
        l_argerror(L, fn, "calib_split", "%lld calibration and %lld evaluation rows of %lld; "
                   "both need rows", (long long)rows.n_calib, (long long)rows.n_eval,
                   (long long)t->n);
    for (int i = 0; i < g.n_workers; i++)
        if (g.workers[i] > rows.n_calib)
            l_argerror(L, fn, "workers", "K = %d exceeds the %lld calibration rows",
                       g.workers[i], (long long)rows.n_calib);
    l_push_split_traces(L, t, &rows, fn);
    g.calib = ((l_trace *)lua_touserdata(L, -2))->t;
    g.eval = ((l_trace *)lua_touserdata(L, -1))->t;
    if (grid_should_resplit(&sp, g.n_seeds)) {   /* each seed its own split and fits */
        g.all = t;
        g.split = sp;
    }
    grid_result *res = l_grid_run(L, &g, progress, fn);
    verdict v;
    char err[ELDR_ERRLEN];
    if (verdict_decide(res, &vo, &v, err, sizeof err) < 0)
        return l_fail(L, fn, err);

    lua_createtable(L, 0, 12);
    push_recommendation(L, res, &v);
    lua_setfield(L, -2, "recommendation");
    push_verdict(L, res, &v);
    lua_setfield(L, -2, "verdict");
    lua_createtable(L, g.n_workers, 0);   /* one per K, each K fixed (eldr sweep's) */
    for (int i = 0; i < g.n_workers; i++) {
        verdict_opts one = vo;
        one.K = g.workers[i];
        verdict vk;
        if (verdict_decide(res, &one, &vk, err, sizeof err) < 0)
            return l_fail(L, fn, err);
        push_verdict(L, res, &vk);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "verdicts");
    lua_createtable(L, res->n, 0);
    for (int i = 0; i < res->n; i++) {
        l_push_grid_row(L, res, i);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "grid");
    l_pushsplit(L, &rows);
    lua_setfield(L, -2, "split");
    l_setint(L, "calib_rows", rows.n_calib);
    l_setint(L, "eval_rows", rows.n_eval);
    l_setint(L, "seeds", res->n_seeds);
    l_setint(L, "first_seed", (lua_Integer)g.cfg.seed);
    char covers[256];
    grid_ci_covers(res->n_seeds, g.cfg.seed, res->resplit, &sp, NULL, covers, sizeof covers);
    lua_pushstring(L, covers);
    lua_setfield(L, -2, "ci_covers");
    lua_pushboolean(L, res->resplit);
    lua_setfield(L, -2, "split_redrawn");
    lua_pushboolean(L, rate_default);
    lua_setfield(L, -2, "rate_default");
    l_setnum(L, "seconds", res->seconds);
    const model_t *m = NULL;
    for (int i = 0; i < res->n_models && !m; i++)
        m = res->models[i];
    if (m) {
        lua_pushstring(L, sig_variant_name(m->recipe.variant));
        lua_setfield(L, -2, "variant");
        l_pushints(L, m->recipe.layers, m->recipe.n_layers, 0);
        lua_setfield(L, -2, "mask");
    }
    return 1;
}

static int l_advise(lua_State *L)
{
    return grid_call(L, "advise", 0);
}

/* eldr._sweep_grid(trace, opts): eldr.sweep's engine (experiments.lua
 * maps its rows and names its errors eldr.sweep's) */
static int l_sweep_grid(lua_State *L)
{
    return grid_call(L, "sweep", 1);
}

static const l_fn module_fns[] = {
    {"advise", l_advise,
     "eldr.advise(trace [, {workers = 4, tau = {0, 0.05, 0.1, 0.2}, rate, seeds = 5, "
     "model, split, split_seed, calib_split, variant, layers, baselines = {'jsq', 'rr', "
     "'p2c'}, output_tokens, max_batch, cost, min2, seed, sample_pool, threads, progress, "
     "min_gain = 1.0, p99_margin = 5.0, tps_margin = 1.0, compare_fleets, cost_rule}]) -> "
     "{verdict, recommendation, grid, split, ...}: which tau at the fleet's K, the verdict of "
     "eldr advise --json (verdict.head, .reason, .rule; without its regime reruns; "
     "compare_fleets = true: a list of K competes; cost_rule = true: eldr-cost as one more "
     "setting)"},
    {"_sweep_grid", l_sweep_grid,
     "eldr._sweep_grid(trace, opts) -> the table of eldr.advise, one seed allowed: the engine "
     "of eldr.sweep (internal: call eldr.sweep, which maps its rows)"},
    {NULL, NULL, NULL},
};

void l_open_grid(lua_State *L)
{
    l_register(L, module_fns, "eldr.");
}
