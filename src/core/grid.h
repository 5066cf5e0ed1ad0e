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
 * always did). The cells run on `threads` threads; the result does not
 * depend on the thread count.
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
    int threads;                /* 0 = the online CPUs */
    void (*progress)(void *ctx, int64_t done, int64_t total);
    void *progress_ctx;         /* progress is called under a lock */
    volatile int *cancel;       /* set: stop at the next cell, return -2 */
} grid_spec;

/* Defaults: no lists, one seed, baselines random, rr, jsq, p2c, min2. */
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
    grid_stat tpot_p50, tpot_p99, queue_p50, distinct, reuse, imbalance, tokens_per_s;
    /* against the cell's best baseline (lowest mean TPOT p50), per seed
     * 100 (x - b) / b, then mean and CI; NaN without a baseline */
    grid_stat vs_best_pct, distinct_vs_best_pct;
    grid_stat p99_vs_best_pct, tps_vs_best_pct; /* TPOT p99, tokens/s: the same */
    int best_baseline;          /* row index of that baseline, -1 */
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
};

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

/* Run the grid. Returns 0, -1 with err, or -2 when cancelled. */
int grid_run(const grid_spec *s, grid_result *out, char *err, size_t errlen);
void grid_result_free(grid_result *r);

/* The recommendation of `eldr advise`.
 *
 * Trying m ELDR settings at once, one of them beats the baseline by luck
 * far more often than 5% of the time. So each ELDR row's 95% interval of
 * its improvement is widened by Bonferroni over the m ELDR rows of the
 * grid: the t quantile 1 - 0.025 / m (n_seeds - 1 df) instead of 0.975,
 * a family-wise 95% (grid_bonferroni). An ELDR row qualifies when its
 * whole corrected interval lies at least min_gain_pct below 0 (upper
 * bound <= -min_gain_pct); of those, the one with the lowest corrected
 * upper bound - the best worst case - is recommended (ties: the better
 * mean). When none qualifies (or one seed gives no interval), the
 * recommendation is the best baseline of the cell of the closest ELDR row
 * (the lowest corrected upper bound; the best mean with one seed), and
 * `eldr_wins` is 0. */
/* The least worthwhile gain, percent: advise's --min-gain default and the
 * dashboard's trade-off verdict. */
#define GRID_MIN_GAIN_PCT 1.0

typedef struct grid_advice {
    int row;                    /* index into rows */
    int eldr_wins;              /* 1 ELDR beats the best baseline by min_gain */
    int closest_eldr;           /* the recommended ELDR row, else the closest; -1 */
    int n_candidates;           /* ELDR rows that qualify */
    int n_compared;             /* m: the ELDR rows the correction is over */
    double min_gain_pct;
    grid_stat adj;              /* closest_eldr's corrected interval */
} grid_advice;
int grid_advise(const grid_result *r, double min_gain_pct, grid_advice *a);

/* 1 for a row advise weighs as an ELDR setting: eldr, eldr-online or
 * eldr-cost (any kind but the baselines). */
int grid_kind_is_candidate(route_kind k);

/* "tau 0.1", "eldr-online, tau 0.1" or "eldr-cost": how the reports name
 * a candidate row. */
void grid_setting_name(const grid_row *g, char *buf, size_t n);

/* 1 when interval ci (of a change, percent) lies wholly below 0 and at
 * least min_gain_pct below it: a gain worth acting on. */
int grid_gains(const grid_stat *ci, double min_gain_pct);

/* Row g's improvement interval, Bonferroni-corrected over m comparisons
 * (NaN bounds with one seed; m <= 1: the 95% interval itself). */
void grid_bonferroni(const grid_row *g, int m, grid_stat *out);

/* One sentence, e.g. "tau 0.05, K 8: TPOT p50 -6.1% +-1.2% vs jsq at
 * 60 req/s (corrected over 8 settings: -8.0% to -4.2%); p99 -3.0%,
 * throughput +0.2%; distinct experts -9.0%; imbalance 1.30", or "keep
 * rr (K 4, 60 req/s): ...: the closest, ..., falls short because ...". */
void grid_advice_sentence(const grid_result *r, const grid_advice *a, char *buf, size_t n);

/* Why: the rule that picked the row, in one line. */
void grid_advice_why(const grid_result *r, const grid_advice *a, char *buf, size_t n);

#endif
