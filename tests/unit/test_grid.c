/* test_grid.c - the policy grid over seeds (grid.h) and its statistics
 * (stats.h).
 *
 * Student's t quantiles against scipy's values; mean and CI by hand;
 * one-seed grid cells equal an independent sim_run of each policy (the
 * grid adds nothing of its own to a result); seed s of an N-seed grid
 * equals a one-seed grid started at seed s (common random numbers are
 * per seed); results independent of the thread count; the paired
 * improvement recomputed from the per-seed values; per-seed p99 and
 * steady-state tokens/s equal a direct run's (tokens of the steps ending
 * between the arrival of request n/10 and the last arrival, counted here
 * on their own), and a closed loop falls back to the whole run's; K = 1
 * (every policy equal: improvement 0 with a zero CI, so the verdict keeps
 * the baseline; the verdict's own rule is tests/unit/test_verdict.c); the
 * cost rule as a candidate (grid.h: one eldr-cost row per cell, equal to
 * a direct sim_run, needing no model, refused as a baseline); the cancel
 * flag; refusals.
 *
 * The seed-0 hook (grid_seed0: a caller that reads seed 0's runs whole,
 * the dashboard's views, gets them from the grid's own runs): with it the
 * grid's numbers are bit for bit those without it, for one and two
 * threads, one split and a split redrawn per seed; each wanted run handed
 * to the caller equals a direct sim_run of seed 0 (TPOT percentiles,
 * whole-run tokens/s rather than the grid's steady-state figure,
 * per-request workers, the heat matrix kept for that cell only); a wanted
 * run the grid has no row for (p2c), or a second one of a kind (rr
 * twice), runs as an extra on the same workload; the caller's step
 * callback sees every step; begin and end run once per wanted run; a
 * failing begin or end fails the grid with its message; too many wanted
 * runs are refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "grid.h"
#include "model.h"
#include "route.h"
#include "sim.h"
#include "split.h"
#include "stats.h"
#include "verdict.h"
#include "util_tracefix.h"

static char err[ELDR_ERRLEN];

static void test_stats(void **state)
{
    (void)state;
    /* scipy.stats.t.ppf(0.975, df) */
    static const struct { int df; double q; } ref[] = {
        {1, 12.7062}, {2, 4.3027}, {10, 2.2281}, {30, 2.0423}, {31, 2.0395},
        {40, 2.0211}, {60, 2.0003}, {100, 1.9840}, {1000, 1.9623}};
    for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++)
        assert_true(fabs(stats_t975(ref[i].df) - ref[i].q) < 1e-3);
    assert_true(isnan(stats_t975(0)));
    /* scipy.stats.t.ppf(p, df): Bonferroni levels need more than 0.975 */
    static const struct { double p; int df; double q; } tq[] = {
        {0.975, 4, 2.7764451051977987}, {0.99375, 4, 4.314656048909503},
        {0.996875, 9, 3.5465084980786328}, {0.999, 2, 22.32712476997542},
        {0.999, 30, 3.385184866818216}, {0.9, 1, 3.0776835372078066},
        {0.995, 100, 2.6258905205863337}};
    for (size_t i = 0; i < sizeof tq / sizeof tq[0]; i++)
        assert_true(fabs(stats_t_quantile(tq[i].p, tq[i].df) - tq[i].q) < 1e-7 * tq[i].q);
    assert_true(isnan(stats_t_quantile(0.4, 3)) && isnan(stats_t_quantile(0.9, 0)));
    double x[] = {1, 2, 3, 4}, m, h;
    stats_mean_ci95(x, 4, &m, &h);
    assert_true(fabs(m - 2.5) < 1e-12);
    assert_true(fabs(h - 3.182 * sqrt(5.0 / 3.0) / 2.0) < 1e-9);
    stats_mean_ci95(x, 1, &m, &h);
    assert_true(m == 1 && isnan(h));
    double y[] = {1, NAN};
    stats_mean_ci95(y, 2, &m, &h);
    assert_true(isnan(m) && isnan(h));
    double z[] = {2, 2, 2};
    stats_mean_ci95(z, 3, &m, &h);
    assert_true(m == 2 && h == 0);
}

typedef struct fixture {
    trace_t *all, *calib, *eval; /* calib: rows 0-59 of all, eval: 60-159 */
    model_t *m2;               /* K = 2 on calib */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    trace_t *t = tracefix_make(160, 4, 16, 2, 21);
    if (!f || !t)
        return -1;
    int64_t rows[160];
    for (int i = 0; i < 160; i++)
        rows[i] = i;
    f->calib = trace_select(t, rows, 60, err, sizeof err);
    f->eval = trace_select(t, rows + 60, 100, err, sizeof err);
    f->all = t;
    model_fit_opts o;
    model_fit_opts_default(&o, 2);
    o.layers = MODEL_LAYERS_ALL;
    if (!f->calib || !f->eval || model_fit(f->calib, &o, &f->m2, NULL, err, sizeof err))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    trace_free(f->all);
    trace_free(f->calib);
    trace_free(f->eval);
    model_free(f->m2);
    free(f);
    return 0;
}

static void spec_for(const fixture *f, grid_spec *g, int seeds)
{
    grid_spec_default(g);
    g->calib = f->calib;
    g->eval = f->eval;
    g->model = f->m2;
    g->fit.layers = MODEL_LAYERS_ALL;
    g->cfg.arrivals = SIM_ARRIVE_POISSON;
    g->cfg.rate = 300;
    g->cfg.seed = 5;
    g->cfg.cost = (cost_model){.t0 = 1e-3, .a = 2e-5, .b = 1e-5, .c = 2e-5, .d = 1e-8};
    g->n_seeds = seeds;
    g->workers[0] = 2;
    g->n_workers = 1;
    g->taus[0] = 0;
    g->taus[1] = 0.1;
    g->n_taus = 2;
    g->baselines[0] = ROUTE_RR;
    g->baselines[1] = ROUTE_JSQ;
    g->baselines[2] = ROUTE_RANDOM;
    g->n_base = 3;
}

/* Tokens of the steps that end in (t0, t1], counted here on their own. */
typedef struct window_tokens {
    double t0, t1;
    int64_t n;
} window_tokens;

static void on_step(void *ctx, int worker, double t, double dt, int B, const int *U, int L,
                    int64_t kv)
{
    (void)worker, (void)U, (void)L, (void)kv;
    window_tokens *w = ctx;
    w->n += t + dt > w->t0 && t + dt <= w->t1 ? B : 0;
}

typedef struct direct {
    double p50, p99, tps_steady, tps_whole;
} direct;

/* The same policy, run by hand: workload, policy, sim_run; throughput
 * from the arrival of request n/10 to the last arrival (grid.h). */
static direct direct_run(const fixture *f, const grid_spec *g, route_kind kind, double tau,
                         uint64_t seed)
{
    sim_config c = g->cfg;
    c.seed = seed;
    sim_workload w;
    assert_int_equal(sim_workload_init(&w, f->eval, &c, &f->m2->recipe, err, sizeof err), 0);
    route_policy p;
    assert_int_equal(route_policy_init(&p, kind, 2, seed, err, sizeof err), 0);
    if (kind == ROUTE_ELDR)
        assert_int_equal(route_policy_set_centroids(&p, f->m2->centroids,
                                                    sig_dim(&f->m2->recipe), tau, 1, err,
                                                    sizeof err), 0);
    sim_result r;
    window_tokens win = {w.arrival[w.n / 10], w.arrival[w.n - 1], 0};
    assert_int_equal(sim_run(&w, &p, on_step, &win, &r, err, sizeof err), 0);
    direct d = {r.tpot_p50_ms, r.tpot_p99_ms, (double)win.n / (win.t1 - win.t0),
                r.tokens_per_s};
    sim_result_free(&r);
    route_policy_free(&p);
    sim_workload_free(&w);
    return d;
}

static double direct_tpot(const fixture *f, const grid_spec *g, route_kind kind, double tau,
                          uint64_t seed)
{
    return direct_run(f, g, kind, tau, seed).p50;
}

static void test_one_seed_equals_sim(void **state)
{
    fixture *f = *state;
    grid_spec g;
    spec_for(f, &g, 1);
    grid_result r;
    assert_int_equal(grid_run(&g, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 5);
    assert_ptr_equal(r.models[0], f->m2);    /* K matches: the given model */
    for (int i = 0; i < r.n; i++) {
        const grid_row *row = &r.rows[i];
        direct d = direct_run(f, &g, row->kind, row->tau, 5);
        assert_true(row->tpot_p50.mean == d.p50);
        assert_true(row->tpot_p50_ms[0] == d.p50 && row->tpot_p99_ms_seed[0] == d.p99);
        /* throughput at steady state: warm-up and drain cut, not the run's */
        assert_true(row->tokens_per_s.mean == d.tps_steady);
        assert_true(row->tokens_per_s_seed[0] == d.tps_steady);
        assert_true(d.tps_steady > 0 && d.tps_steady != d.tps_whole);
        assert_true(isnan(row->tpot_p50.lo) && isnan(row->vs_best_pct.hi));
    }
    /* rows: baselines in order, then the taus */
    assert_int_equal(r.rows[0].kind, ROUTE_RR);
    assert_int_equal(r.rows[3].kind, ROUTE_ELDR);
    assert_true(r.rows[4].tau == 0.1);
    assert_true(isnan(r.rows[0].tau));
    assert_true(r.steady && r.first_seed == 5);
    char tp[200];
    grid_throughput_phrase(&r, tp, sizeof tp);
    assert_non_null(strstr(tp, "the first 10% of arrivals (warm-up) and the drain after the "
                           "last arrival cut"));
    grid_result_free(&r);
}

/* reference_only (eldr sim --seeds, eldr.simulate{seeds}): random runs
 * beside rr and jsq on the same workloads, but is never a cell's best
 * baseline nor weighed by the verdict; without it, it is a baseline. */
static void test_reference_only(void **state)
{
    fixture *f = *state;
    grid_spec g;
    spec_for(f, &g, 3);
    grid_result a, b;
    assert_int_equal(grid_run(&g, &a, err, sizeof err), 0);
    g.reference_only = 1;
    assert_int_equal(grid_run(&g, &b, err, sizeof err), 0);
    assert_int_equal(a.n, b.n);
    char base_a[96], base_b[96];
    verdict_baselines(&a, base_a, sizeof base_a);
    verdict_baselines(&b, base_b, sizeof base_b);
    assert_string_equal(base_a, "rr,jsq,random");
    assert_string_equal(base_b, "rr,jsq");
    int rr = 0, jsq = 1;
    int best = b.rows[rr].tpot_p50.mean <= b.rows[jsq].tpot_p50.mean ? rr : jsq;
    for (int i = 0; i < b.n; i++) {
        const grid_row *r = &b.rows[i];
        assert_int_equal(r->reference, r->kind == ROUTE_RANDOM);
        assert_int_equal(a.rows[i].reference, 0);
        assert_true(r->tpot_p50.mean == a.rows[i].tpot_p50.mean);   /* the same runs */
        assert_int_equal(r->best_baseline, best);
        assert_int_equal(grid_row_is_baseline(r), r->kind == ROUTE_RR || r->kind == ROUTE_JSQ);
    }
    verdict_opts vo;
    verdict_opts_default(&vo);
    vo.K = 2;
    verdict v;
    assert_int_equal(verdict_decide(&b, &vo, &v, err, sizeof err), 0);
    assert_int_equal(v.n_baselines, 2);
    assert_true(b.rows[v.baseline].kind != ROUTE_RANDOM);
    grid_spec p;
    grid_spec_default(&p);
    static const int kinds[] = {ROUTE_ELDR, ROUTE_RANDOM, ROUTE_JSQ};
    double tau = 0.1;
    grid_spec_policies(&p, 4, kinds, 3, &tau, 1);
    assert_int_equal(p.reference_only, 1);     /* eldr sim --seeds' spec */
    grid_result_free(&a);
    grid_result_free(&b);
}

static void test_seeds_threads_paired(void **state)
{
    fixture *f = *state;
    grid_spec g;
    spec_for(f, &g, 4);
    g.threads = 1;
    grid_result a, b;
    assert_int_equal(grid_run(&g, &a, err, sizeof err), 0);
    g.threads = 2;
    assert_int_equal(grid_run(&g, &b, err, sizeof err), 0);
    for (int i = 0; i < a.n; i++) {
        assert_memory_equal(a.rows[i].tpot_p50_ms, b.rows[i].tpot_p50_ms, 4 * sizeof(double));
        assert_true(a.rows[i].vs_best_pct.mean == b.rows[i].vs_best_pct.mean ||
                    (isnan(a.rows[i].vs_best_pct.mean) && isnan(b.rows[i].vs_best_pct.mean)));
    }
    /* seed s of the N-seed grid = a one-seed grid at seed 5 + s */
    grid_spec one;
    spec_for(f, &one, 1);
    one.cfg.seed = 7;
    grid_result c;
    assert_int_equal(grid_run(&one, &c, err, sizeof err), 0);
    for (int i = 0; i < a.n; i++)
        assert_true(a.rows[i].tpot_p50_ms[2] == c.rows[i].tpot_p50.mean);
    /* the best baseline has the lowest mean; paired change recomputed */
    int best = a.rows[0].best_baseline;
    assert_true(best >= 0 && best < 3);
    for (int i = 0; i < 3; i++)
        assert_true(a.rows[best].tpot_p50.mean <= a.rows[i].tpot_p50.mean);
    for (int i = 0; i < a.n; i++) {
        double x[4], m, h;
        for (int s = 0; s < 4; s++)
            x[s] = 100 * (a.rows[i].tpot_p50_ms[s] - a.rows[best].tpot_p50_ms[s]) /
                   a.rows[best].tpot_p50_ms[s];
        stats_mean_ci95(x, 4, &m, &h);
        assert_true(fabs(m - a.rows[i].vs_best_pct.mean) < 1e-9);
        assert_true(fabs(a.rows[i].vs_best_pct.hi - (m + h)) < 1e-9);
        double tm, th;
        stats_mean_ci95(a.rows[i].tpot_p50_ms, 4, &tm, &th);
        assert_true(fabs(a.rows[i].tpot_p50.lo - (tm - th)) < 1e-9);
    }
    assert_true(a.rows[best].vs_best_pct.mean == 0 && a.rows[best].vs_best_pct.hi == 0);
    grid_result_free(&a);
    grid_result_free(&b);
    grid_result_free(&c);
}

static void test_k1_keeps_baseline(void **state)
{
    fixture *f = *state;
    grid_spec g;
    spec_for(f, &g, 3);
    g.workers[0] = 1;            /* no model of K 1: fitted here */
    grid_result r;
    assert_int_equal(grid_run(&g, &r, err, sizeof err), 0);
    assert_non_null(r.models[0]);
    assert_int_equal(r.models[0]->K, 1);
    for (int i = 0; i < r.n; i++) {
        assert_true(r.rows[i].tpot_p50.mean == r.rows[0].tpot_p50.mean);
        assert_true(r.rows[i].vs_best_pct.mean == 0 && r.rows[i].vs_best_pct.hi == 0);
    }
    verdict_opts o;
    verdict_opts_default(&o);
    o.K = 1;
    o.p50_gain_pct = 0;
    verdict v;
    assert_int_equal(verdict_decide(&r, &o, &v, err, sizeof err), 0);
    assert_int_equal(v.answer, VERDICT_KEEP);   /* 0 +- 0: even the best case gains nothing */
    assert_int_equal(v.why, VERDICT_NO_GAIN);
    assert_int_equal(v.n_wins, 0);
    assert_true(!grid_kind_is_candidate(r.rows[v.row].kind));
    grid_result_free(&r);
}

/* A closed loop has no arrival schedule to cut warm-up and drain by: the
 * grid's tokens/s is then the run's own (makespan), and it says so. */
static void test_closed_loop_throughput(void **state)
{
    fixture *f = *state;
    grid_spec g;
    spec_for(f, &g, 1);
    g.cfg.arrivals = SIM_ARRIVE_CLOSED;
    g.cfg.concurrency = 8;
    g.n_taus = 0;
    grid_result r;
    assert_int_equal(grid_run(&g, &r, err, sizeof err), 0);
    assert_int_equal(r.steady, 0);
    sim_workload w;
    sim_config c = g.cfg;
    c.seed = 5;
    assert_int_equal(sim_workload_init(&w, f->eval, &c, NULL, err, sizeof err), 0);
    route_policy p;
    assert_int_equal(route_policy_init(&p, ROUTE_RR, 2, 5, err, sizeof err), 0);
    sim_result res;
    assert_int_equal(sim_run(&w, &p, NULL, NULL, &res, err, sizeof err), 0);
    assert_int_equal(r.rows[0].kind, ROUTE_RR);
    assert_true(r.rows[0].tokens_per_s.mean == res.tokens_per_s);
    char tp[200];
    grid_throughput_phrase(&r, tp, sizeof tp);
    assert_non_null(strstr(tp, "over the whole run (closed loop"));
    sim_result_free(&res);
    route_policy_free(&p);
    sim_workload_free(&w);
    grid_result_free(&r);
}

static void test_cost_candidate(void **state)
{
    fixture *f = *state;
    grid_spec g;
    spec_for(f, &g, 1);
    g.cost = 1;
    grid_result r;
    assert_int_equal(grid_run(&g, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 6);    /* 3 baselines, 2 taus, then eldr-cost */
    assert_int_equal(r.rows[4].kind, ROUTE_ELDR);
    assert_int_equal(r.rows[5].kind, ROUTE_ELDR_COST);
    assert_true(isnan(r.rows[5].tau));
    assert_true(r.rows[5].tpot_p50.mean == direct_tpot(f, &g, ROUTE_ELDR_COST, NAN, 5));
    /* the other rows are what they are without it */
    grid_spec g0;
    spec_for(f, &g0, 1);
    grid_result r0;
    assert_int_equal(grid_run(&g0, &r0, err, sizeof err), 0);
    for (int i = 0; i < r0.n; i++)
        assert_true(r.rows[i].tpot_p50.mean == r0.rows[i].tpot_p50.mean);
    assert_true(r.rows[5].tpot_p50.mean != r0.rows[0].tpot_p50.mean);
    grid_result_free(&r0);
    grid_result_free(&r);
    /* alone, with no model and no calibration rows: nothing is fitted */
    spec_for(f, &g, 1);
    g.cost = 1;
    g.n_taus = 0;
    g.model = NULL;
    g.calib = NULL;
    assert_int_equal(grid_run(&g, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 4);
    assert_null(r.models[0]);
    assert_int_equal(r.rows[3].kind, ROUTE_ELDR_COST);
    assert_true(r.rows[3].tpot_p50.mean == direct_tpot(f, &g, ROUTE_ELDR_COST, NAN, 5));
    grid_result_free(&r);
    /* eldr-cost is no baseline: it is the candidate g.cost adds */
    spec_for(f, &g, 1);
    g.baselines[2] = ROUTE_ELDR_COST;
    assert_int_equal(grid_run(&g, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a baseline"));
    assert_true(grid_kind_is_candidate(ROUTE_ELDR_COST) && grid_kind_is_candidate(ROUTE_ELDR) &&
                grid_kind_is_candidate(ROUTE_ELDR_ONLINE) && !grid_kind_is_candidate(ROUTE_JSQ));
}

static void test_setting_names(void **state)
{
    (void)state;
    grid_row row = {.kind = ROUTE_ELDR, .tau = 0.1};
    char name[64];
    grid_setting_name(&row, name, sizeof name);
    assert_string_equal(name, "tau 0.1");
    row.kind = ROUTE_ELDR_ONLINE;
    grid_setting_name(&row, name, sizeof name);
    assert_string_equal(name, "eldr-online, tau 0.1");
    row.kind = ROUTE_ELDR_COST;
    grid_setting_name(&row, name, sizeof name);
    assert_string_equal(name, "eldr-cost");
}

static volatile int cancel_now = 1;

static void test_cancel_and_refusals(void **state)
{
    fixture *f = *state;
    grid_spec g;
    grid_result r;
    spec_for(f, &g, 2);
    g.cancel = &cancel_now;
    assert_int_equal(grid_run(&g, &r, err, sizeof err), -2);
    assert_null(r.rows);
    spec_for(f, &g, 0);
    assert_int_equal(grid_run(&g, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "seeds"));
    spec_for(f, &g, 1);
    g.n_taus = g.n_base = 0;
    assert_int_equal(grid_run(&g, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "no policy"));
    spec_for(f, &g, 1);
    g.taus[0] = -1;
    assert_int_equal(grid_run(&g, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "tau"));
    spec_for(f, &g, 1);
    g.workers[0] = 3;
    g.calib = NULL;              /* K 3 needs a fit and has nothing to fit on */
    assert_int_equal(grid_run(&g, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "calibration"));
}

/* What the hook received: each wanted run's result and step count. */
typedef struct taken {
    pthread_mutex_t mu;
    int begins[GRID_SEED0_MAX], ends[GRID_SEED0_MAX];
    int64_t steps[GRID_SEED0_MAX];
    sim_result res[GRID_SEED0_MAX];
    int have[GRID_SEED0_MAX];
    int fail_begin, fail_end;   /* wanted run that fails there, or -1 */
} taken;

static void count_steps(void *ctx, int worker, double t, double dt, int B, const int *U, int L,
                        int64_t kv)
{
    (void)worker, (void)t, (void)dt, (void)B, (void)U, (void)L, (void)kv;
    ++*(int64_t *)ctx;
}

static int on_begin(void *ctx, int i, const sim_workload *w, sim_step_fn *fn, void **fn_ctx,
                    char *e, size_t elen)
{
    taken *t = ctx;
    assert_non_null(w);
    pthread_mutex_lock(&t->mu);
    t->begins[i]++;
    pthread_mutex_unlock(&t->mu);
    if (i == t->fail_begin)
        return eldr_errf(e, elen, "begin %d refused", i);
    *fn = count_steps;
    *fn_ctx = &t->steps[i];
    return 0;
}

static int on_end(void *ctx, int i, void *fn_ctx, sim_result *res, char *e, size_t elen)
{
    taken *t = ctx;
    assert_ptr_equal(fn_ctx, &t->steps[i]);
    pthread_mutex_lock(&t->mu);
    t->ends[i]++;
    pthread_mutex_unlock(&t->mu);
    if (!res)
        return 0;
    if (i == t->fail_end)
        return eldr_errf(e, elen, "end %d refused", i);
    t->res[i] = *res;             /* moved out: the grid frees nothing of it */
    memset(res, 0, sizeof *res);
    t->have[i] = 1;
    return 0;
}

static void taken_free(taken *t)
{
    for (int i = 0; i < GRID_SEED0_MAX; i++)
        if (t->have[i])
            sim_result_free(&t->res[i]);
}

/* The wanted runs: eldr tau 0.1 (a grid row), random (a row), p2c (no
 * row: an extra), rr twice (the row, then an extra). */
static void want(grid_seed0 *h, taken *t)
{
    memset(h, 0, sizeof *h);
    static const route_kind k[] = {ROUTE_ELDR, ROUTE_RANDOM, ROUTE_P2C, ROUTE_RR, ROUTE_RR};
    h->n = 5;
    for (int i = 0; i < h->n; i++) {
        h->kind[i] = k[i];
        h->tau[i] = 0.1;
    }
    h->begin = on_begin;
    h->end = on_end;
    h->ctx = t;
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    t->fail_begin = t->fail_end = -1;
}

/* seed 0's run of (kind, tau), by hand, on eval with model m */
static void direct_full(const trace_t *eval, const model_t *m, const grid_spec *g, route_kind kind,
                   double tau, sim_result *r)
{
    sim_workload w;
    assert_int_equal(sim_workload_init(&w, eval, &g->cfg, &m->recipe, err, sizeof err), 0);
    route_policy p;
    assert_int_equal(route_policy_init(&p, kind, 2, g->cfg.seed, err, sizeof err), 0);
    if (kind == ROUTE_ELDR)
        assert_int_equal(route_policy_set_centroids(&p, m->centroids, sig_dim(&m->recipe), tau,
                                                    1, err, sizeof err), 0);
    assert_int_equal(sim_run(&w, &p, NULL, NULL, r, err, sizeof err), 0);
    route_policy_free(&p);
    sim_workload_free(&w);
}

static void same_rows(const grid_result *a, const grid_result *b)
{
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        size_t n = (size_t)a->n_seeds * sizeof(double);
        assert_memory_equal(a->rows[i].tpot_p50_ms, b->rows[i].tpot_p50_ms, n);
        assert_memory_equal(a->rows[i].tpot_p99_ms_seed, b->rows[i].tpot_p99_ms_seed, n);
        assert_memory_equal(a->rows[i].tokens_per_s_seed, b->rows[i].tokens_per_s_seed, n);
        assert_memory_equal(&a->rows[i].distinct, &b->rows[i].distinct, sizeof(grid_stat));
        assert_memory_equal(&a->rows[i].imbalance, &b->rows[i].imbalance, sizeof(grid_stat));
        assert_memory_equal(&a->rows[i].queue_p50, &b->rows[i].queue_p50, sizeof(grid_stat));
    }
}

/* Each taken run equals seed 0's direct run; the grid's rows of seed 0
 * are those runs' numbers. */
static void check_taken(const taken *t, const grid_seed0 *h, const grid_result *r,
                        const trace_t *eval, const model_t *m, const grid_spec *g)
{
    for (int i = 0; i < h->n; i++) {
        assert_int_equal(t->begins[i], 1);
        assert_int_equal(t->ends[i], 1);
        assert_true(t->have[i]);
        const sim_result *a = &t->res[i];
        sim_result b;
        direct_full(eval, m, g, h->kind[i], h->tau[i], &b);
        assert_int_equal(a->n, b.n);
        assert_true(a->tpot_p50_ms == b.tpot_p50_ms && a->tpot_p99_ms == b.tpot_p99_ms);
        assert_true(a->tokens_per_s == b.tokens_per_s);   /* the run's own, not steady */
        assert_true(a->distinct_per_step == b.distinct_per_step);
        assert_int_equal(t->steps[i], b.steps);
        for (int64_t q = 0; q < a->n; q++)
            assert_int_equal(a->req[q].worker, b.req[q].worker);
        /* the heat matrix: kept for the caller, the same counts */
        assert_non_null(a->heat);
        assert_non_null(b.heat);
        assert_memory_equal(a->heat, b.heat,
                            (size_t)2 * eval->L * eval->E * sizeof *a->heat);
        /* a grid row of the same kind (and tau) has these numbers at seed 0 */
        for (int row = 0; row < r->n; row++)
            if (r->rows[row].kind == h->kind[i] &&
                (h->kind[i] != ROUTE_ELDR || r->rows[row].tau == h->tau[i]))
                assert_true(r->rows[row].tpot_p50_ms[0] == b.tpot_p50_ms);
        sim_result_free(&b);
    }
}

/* g run without and with the hook (seed 0's split: eval and m): the
 * same rows, and the taken runs are seed 0's. */
static void hooked_vs_plain(grid_spec *g, const trace_t *eval, const model_t *m)
{
    grid_result plain, hooked;
    assert_int_equal(grid_run(g, &plain, err, sizeof err), 0);
    grid_seed0 h;
    taken t;
    want(&h, &t);
    g->seed0 = &h;
    assert_int_equal(grid_run(g, &hooked, err, sizeof err), 0);
    g->seed0 = NULL;
    assert_int_equal(hooked.resplit, g->all != NULL);
    same_rows(&plain, &hooked);
    check_taken(&t, &h, &hooked, eval, m, g);
    taken_free(&t);
    pthread_mutex_destroy(&t.mu);
    grid_result_free(&plain);
    grid_result_free(&hooked);
}

static void test_seed0_one_split(void **state)
{
    fixture *f = *state;
    for (int threads = 1; threads <= 2; threads++) {
        grid_spec g;
        spec_for(f, &g, 3);
        g.threads = threads;
        hooked_vs_plain(&g, f->eval, f->m2);
    }
}

/* A split redrawn per seed: seed 0 is the caller's own split and model. */
static void test_seed0_resplit(void **state)
{
    fixture *f = *state;
    split_spec sp;
    split_spec_default(&sp);
    sp.size = 60;
    sp.seed = 9;
    split_rows rows;
    assert_int_equal(split_make(f->all, &sp, &rows, err, sizeof err), 0);
    trace_t *calib = NULL, *eval = NULL;
    assert_int_equal(split_apply(f->all, &rows, &calib, &eval, err, sizeof err), 0);
    split_rows_free(&rows);
    model_fit_opts o;
    model_fit_opts_default(&o, 2);
    o.layers = MODEL_LAYERS_ALL;
    o.seed = 4;
    model_t *m = NULL;
    assert_int_equal(model_fit(calib, &o, &m, NULL, err, sizeof err), 0);
    for (int threads = 1; threads <= 2; threads++) {
        grid_spec g;
        spec_for(f, &g, 3);
        g.threads = threads;
        g.calib = g.eval = NULL;
        g.model = m;
        grid_spec_resplit(&g, f->all, &sp, 2, 4);
        g.fit.layers = MODEL_LAYERS_ALL;
        hooked_vs_plain(&g, eval, m);
    }
    model_free(m);
    trace_free(calib);
    trace_free(eval);
}

static void test_seed0_failures(void **state)
{
    fixture *f = *state;
    grid_spec g;
    spec_for(f, &g, 2);
    g.threads = 2;
    grid_seed0 h;
    taken t;
    grid_result r;
    want(&h, &t);
    g.seed0 = &h;
    t.fail_begin = 2;
    assert_int_equal(grid_run(&g, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "begin 2 refused"));
    taken_free(&t);
    pthread_mutex_destroy(&t.mu);
    want(&h, &t);
    t.fail_end = 0;
    assert_int_equal(grid_run(&g, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "end 0 refused"));
    for (int i = 0; i < h.n; i++)   /* every started run was ended (fn_ctx released) */
        assert_int_equal(t.begins[i], t.ends[i]);
    taken_free(&t);
    pthread_mutex_destroy(&t.mu);
    want(&h, &t);
    h.n = GRID_SEED0_MAX + 1;
    assert_int_equal(grid_run(&g, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "seed-0 runs"));
    pthread_mutex_destroy(&t.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats),
        cmocka_unit_test_setup_teardown(test_one_seed_equals_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seeds_threads_paired, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reference_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_k1_keeps_baseline, setup, teardown),
        cmocka_unit_test(test_setting_names),
        cmocka_unit_test_setup_teardown(test_closed_loop_throughput, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cost_candidate, setup, teardown),
        
        cmocka_unit_test_setup_teardown(test_cancel_and_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed0_one_split, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed0_resplit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed0_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
