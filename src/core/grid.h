/* grid.h - the policy grid over seeds: K x rate x (baselines + ELDR at
 * each tau), each cell simulated under N arrival/activation seeds, with
 * means, 95% confidence intervals and the comparison against the best
 * baseline. One engine for `eldr sweep`, `eldr advise`, eldr.sweep and
 * eldr.advise in Lua, and the dashboard's trade-off view.
 *
 * Common random numbers: within one (K, rate, seed) every policy runs on
 * the same workload (arrivals, lengths, activations) and seeded policies
 * use that seed too, so a difference between two policies of one seed is
 * the policies' alone. Across seeds everything is drawn anew; the CI of a
 * policy's TPOT is over seeds, and the improvement over the best baseline
 * is a paired difference per seed, so the common noise cancels.
 *
 * With `online`, every tau gives two rows: eldr, then eldr-online (the
 * same model as its start, refitted as simulated time passes); advise
 * weighs both kinds as ELDR settings. With `cost`, each cell ends with
 * one eldr-cost row (the cost rule, costrule.h; no tau, no model: it
 * predicts with cfg.cost, the simulator's own cost model), which advise
 * weighs as one more ELDR setting: the same baselines, the same
 * Bonferroni correction over every candidate row, the same margin.
 *
 * Models: for each K, the given model when its K matches, else one fitted
 * on the calibration rows with spec->fit (greedy layers are selected once,
 * on the first K fitted, and reused for the others, as `eldr sweep`
 * always did). The cells run one at a time, each cell's policies on
 * `threads` threads sharing its workload (one seed's activation pools at
 * once); redrawing splits, a seed's split and fits come before its cells,
 * and its evaluation rows are simulated in place in `all`, not copied
 * (sim_workload_init_rows). The result does not depend on the thread
 * count.
 *
 * Calibration splits. Which rows calibrate moves the result as much as
 * the arrivals do (on the shared gpt-oss trace, five pinned splits give
 * TPOT changes from -1.3% to -2.9% whose seed-only intervals do not
 * overlap). With `all` set, seed i draws its own split of `all` (mode and
 * size of `split`, seed split.seed + i), fits its own models on its
 * calibration rows (fit seed fit.seed + i) and simulates its own
 * evaluation rows: the interval then covers arrivals, activations, the
 * split and the fit. calib/eval are ignored then; `model` (when its K is
 * in the grid) serves seed 0 only, whose split it must have been fitted
 * on (split.seed's draw, fit.seed): the first seed then repeats the
 * caller's own run exactly. Without `all` every
 * seed uses calib/eval: the interval covers arrivals and activations
 * only (a pinned split, a head split, a given model). */
#ifndef ELDR_GRID_H
#define ELDR_GRID_H

#include <stdint.h>

#include "model.h"
#include "split.h"
#include "route.h"
#include "sim.h"
#include "trace.h"

#define GRID_MAX_LIST 64
#define GRID_MAX_SEEDS 1000

/* Seed 0's runs, handed to the caller (grid_spec.seed0): a caller that
 * reads whole runs (the dashboard's views: per-request results, steps,
 * heat) gets them and the grid's seeds from one set of runs, instead of
 * simulating seed 0 once more on its own. Seed 0 of the first cell (the
 * first K, the first rate) runs each wanted (kind[i], tau[i]) as the
 * grid's own policy of that kind (and tau, for kinds with centroids)
 * when it has one not yet claimed by an earlier i, else as an extra run
 * on the same workload whose numbers go to the caller only. Each wanted
 * run calls, on the thread that runs it,
 *   begin(ctx, i, w, &fn, &fn_ctx, err, errlen) before it starts: fn (may
 *     stay NULL) is called at every step beside the grid's own counting;
 *     < 0 fails the grid with err;
 *   end(ctx, i, fn_ctx, res, err, errlen) after it: res is the run's
 *     result, the caller's to move out (zeroing *res) or to leave, which
 *     the grid then frees; res is NULL when the run failed (end only
 *     releases fn_ctx then); < 0 fails the grid with err.
 * That cell keeps the heat matrix (sim_result.heat) unless cfg.no_heat;
 * the others never do. The grid's numbers are those of a run without
 * the hook (tests/unit/test_grid.c). */
#define GRID_SEED0_MAX 8
typedef struct grid_seed0 {
    int n;                              /* wanted runs, <= GRID_SEED0_MAX */
    route_kind kind[GRID_SEED0_MAX];
    double tau[GRID_SEED0_MAX];         /* read for kinds with centroids */
    int (*begin)(void *ctx, int i, const sim_workload *w, sim_step_fn *fn, void **fn_ctx,
                 char *err, size_t errlen);
    int (*end)(void *ctx, int i, void *fn_ctx, sim_result *res, char *err, size_t errlen);
    void *ctx;
} grid_seed0;

typedef struct grid_spec {
    const trace_t *calib;       /* fits and the domain baseline's shares */
    const trace_t *eval;        /* the simulated rows */
    const trace_t *all;         /* NULL, or: redraw the split per seed (above) */
    split_spec split;           /* with all: mode, size, first seed */
    const struct grid_result *reuse; /* with all: an earlier result over the same
                                 * splits, fit options and seeds; a K it fitted
                                 * is taken from it, not fitted again */
    const model_t *model;       /* may be NULL */
    model_fit_opts fit;         /* recipe for the fits (K is set per cell) */
    sim_config cfg;             /* base; seed i uses cfg.seed + i */
    int n_seeds;                /* >= 1 */
    int workers[GRID_MAX_LIST], n_workers;
    double rates[GRID_MAX_LIST]; /* req/s; <= 0: cfg's own arrivals */
    int n_rates;                /* 0: one column with cfg's arrivals */
    double taus[GRID_MAX_LIST];
    int n_taus;
    route_kind baselines[ROUTE_N_KINDS];
    int n_base;
    int min2;
    int online;                 /* 1: each tau also runs eldr-online (refits per
                                 * cfg.refit_every / refit_window), in the row
                                 * after that tau's eldr */
    int cost;                   /* 1: one eldr-cost row per cell, after the taus */
    int reference_only;         /* 1: baselines outside GRID_DEFAULT_BASELINES
                                 * (random, domain) run beside the others for
                                 * reference only: never a cell's best
                                 * baseline, not weighed by the verdict (eldr
                                 * sim --seeds, eldr.simulate{seeds}: the
                                 * baselines of advise and view 7) */
    int threads;                /* 0 = the online CPUs */
    void (*progress)(void *ctx, int64_t done, int64_t total);
    void *progress_ctx;         /* progress is called under a lock */
    volatile int *cancel;       /* set: stop within a few ms (the running
                                 * simulations poll it too), return -2 */
    const grid_seed0 *seed0;    /* NULL, or seed 0's runs to the caller (above) */
} grid_spec;

/* The baselines every front end compares with unless told otherwise
 * (eldr advise/sweep --baselines, eldr.advise/eldr.sweep baselines, the
 * dashboard's view 7), named on every screen. */
#define GRID_DEFAULT_BASELINES "jsq,rr,p2c"

/* Throughput at steady state: the tokens emitted by steps ending after
 * the arrival of the first GRID_WARMUP_FRAC of the requests (warm-up) and
 * by the last arrival (after it the fleet only drains), over that span.
 * Closed-loop runs have no arrival schedule: the whole run's tokens/s. */
#define GRID_WARMUP_FRAC 0.10

/* 1 when k is one of GRID_DEFAULT_BASELINES. */
int grid_is_default_baseline(route_kind k);

/* Defaults: no lists, one seed, baselines GRID_DEFAULT_BASELINES, min2. */
void grid_spec_default(grid_spec *s);

/* A mean with its 95% CI ([lo, hi] NaN with one seed). */
typedef struct grid_stat {
    double mean, lo, hi;
} grid_stat;

typedef struct grid_row {
    int K;
    double rate;                /* 0: the trace's arrivals */
    route_kind kind;
    double tau;                 /* NaN for baselines */
    int n_seeds;
    double *tpot_p50_ms;        /* [n_seeds] per seed */
    double *tpot_p99_ms_seed;   /* [n_seeds] per seed */
    double *tokens_per_s_seed;  /* [n_seeds] per seed, at steady state (above) */
    grid_stat tpot_p50, tpot_p99, queue_p50, distinct, reuse, imbalance, tokens_per_s;
    /* against the cell's best baseline (lowest mean TPOT p50), per seed
     * 100 (x - b) / b, then mean and CI; NaN without a baseline */
    grid_stat vs_best_pct, distinct_vs_best_pct;
    grid_stat p99_vs_best_pct, tps_vs_best_pct; /* TPOT p99, tokens/s: the same */
    int best_baseline;          /* row index of that baseline, -1 */
    int reference;              /* 1: a reference row (spec reference_only) */
} grid_row;

typedef struct grid_result grid_result;
struct grid_result {
    grid_row *rows;             /* K-major, then rate, then baselines, taus
                                 * (eldr[, eldr-online] per tau)[, eldr-cost] */
    int n;
    int n_seeds;
    model_t **models;           /* [n_workers] the model of each K */
    unsigned char *model_owned; /* [n_workers] 0: spec->model, borrowed */
    int n_models;
    int resplit;                /* 1: each seed had its own split and fits
                                 * (models[] are the first seed's) */
    model_t **seed_models;      /* resplit: [n_seeds][n_models], seeds >= 1 */
    unsigned char *seed_owned;
    double seconds;             /* wall time of grid_run */
    uint64_t first_seed;        /* cfg.seed: seed index i is first_seed + i */
    int steady;                 /* 1: tokens_per_s at steady state (open loop) */
};

/* How the grid's throughput was measured, one phrase for every screen:
 * "throughput at steady state: the first 10% of arrivals (warm-up) and
 * the drain after the last arrival cut" or, closed loop, "throughput
 * over the whole run (closed loop)". */
void grid_throughput_phrase(const grid_result *r, char *buf, size_t n);

/* What a result's intervals cover, one phrase for every front end, e.g.
 * "95% CI over 5 seeds (1-5), each drawing its arrivals and its random
 * calibration split" or "95% CI over 5 arrival seeds (1-5); one split:
 * random, seed 3 (pinned)". fixed_why names why the split is fixed when
 * it is (NULL: say what the split is: pinned, head). */
void grid_ci_covers(int n_seeds, uint64_t first_seed, int resplit, const split_spec *sp,
                    const char *fixed_why, char *buf, size_t n);

/* 1 when a front end should redraw the split per seed: more than one
 * seed, a seeded split (random or stratified) with calibration rows, and
 * the seed not pinned. */
int grid_should_resplit(const split_spec *sp, int n_seeds);

/* The spec of `eldr sim --seeds N` and eldr.simulate{seeds = N}: one
 * K, and the given policies (route_kind values) sorted into the grid's
 * baselines, its taus (any kind with centroids: eldr, with eldr-online
 * beside each tau when asked) and its eldr-cost row; reference_only set
 * (random and domain are shown, never the baseline compared with). */
void grid_spec_policies(grid_spec *s, int K, const int *kinds, int n_kinds, const double *taus,
                        int n_taus);

/* Each seed draws its own split of `all` and fits its own model of K
 * (fit seed `seed`, the first repeating the caller's own fit): the
 * interval covers the calibration rows too. A trace without decode
 * counts fits on every layer. */
void grid_spec_resplit(grid_spec *s, const trace_t *all, const split_spec *sp, int K,
                       uint64_t seed);

/* Run the grid. Returns 0, -1 with err, or -2 when cancelled. */
int grid_run(const grid_spec *s, grid_result *out, char *err, size_t errlen);
void grid_result_free(grid_result *r);

/* 1 for a row the verdict (verdict.h) weighs as an ELDR setting: eldr, eldr-online or
 * eldr-cost (any kind but the baselines). */
int grid_kind_is_candidate(route_kind k);

/* 1 for a row that is a baseline: not a candidate, not a reference row. */
int grid_row_is_baseline(const grid_row *g);

/* "tau 0.1", "eldr-online, tau 0.1" or "eldr-cost": how the reports name
 * a candidate row. */
void grid_setting_name(const grid_row *g, char *buf, size_t n);

/* 1 when interval ci (of a change, percent) lies wholly below 0 and at
 * least min_gain_pct below it: a gain worth acting on. */
int grid_gains(const grid_stat *ci, double min_gain_pct);

/* A 95% interval of a mean over n_seeds, widened by Bonferroni over m
 * comparisons: t(1 - 0.025 / m, n - 1) instead of t(0.975, n - 1). */
void grid_widen(const grid_stat *ci, int n_seeds, int m, grid_stat *out);

/* Row g's improvement interval, Bonferroni-corrected over m comparisons
 * (NaN bounds with one seed; m <= 1: the 95% interval itself). */
void grid_bonferroni(const grid_row *g, int m, grid_stat *out);

#endif
