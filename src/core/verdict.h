/* verdict.h - the one answer to "which tau, at this fleet's K?" from a
 * policy grid (grid.h). `eldr advise`, `eldr sweep`, the dashboard's
 * trade-off view (view 7) and eldr.advise / eldr.sweep in Lua all call
 * verdict_decide and print its words, so they cannot disagree.
 *
 * The rule. A candidate is an ELDR row (eldr, eldr-online, eldr-cost) of
 * the fleet's K. Each is compared with EVERY baseline row of its cell
 * (same K and rate), paired per seed: x_s = 100 (c_s - b_s) / b_s, its
 * mean and Student-t interval over the seeds, widened by Bonferroni over
 * the m candidates (t(1 - 0.025 / m, N - 1) instead of t(0.975, N - 1)).
 * With the split redrawn per seed (grid.h, "Calibration splits") the
 * interval covers the split and the fit as well as the arrivals. A
 * candidate wins only when, against every baseline,
 *   1. TPOT p50: the whole corrected interval lies at least p50_gain_pct
 *      below 0 (upper bound <= -p50_gain_pct);
 *   2. TPOT p99: the corrected upper bound rises at most p99_loss_pct;
 *   3. throughput (tokens/s at steady state, grid.h): the corrected lower
 *      bound falls at most tps_loss_pct;
 *   4. every seed (each its own split): it is faster on TPOT p50 than
 *      that seed's every baseline; a recommendation that flips with the
 *      split is a tie.
 * Of the winners the best worst case (lowest p50 upper bound, then the
 * better mean) is the answer. Otherwise the closest candidate (the same
 * order) says why, and the answer keeps the cell's best baseline (lowest
 * mean TPOT p50):
 *   - "keep": even its best case gains less than the margin (the
 *     interval's lower bound is above -p50_gain_pct), or it gains p50 but
 *     loses p99 or throughput beyond their margins;
 *   - "tie": its interval straddles the margin (the seeds cannot tell)
 *     or it flips with the split;
 *   - "none": one seed gives no interval, so there is nothing to weigh:
 *     "no verdict at K 4", said as such on every screen rather than
 *     dressed as a tie (the closest setting's single-run change is in the
 *     reason, for information only).
 *
 * K. With opts.K > 0 only that K's rows take part: the fleet's size is
 * not a knob the verdict turns. opts.K = 0 compares fleets (every K, each
 * candidate against the baselines of its own K), which front ends offer
 * only behind an explicit option. */
#ifndef ELDR_VERDICT_H
#define ELDR_VERDICT_H

#include <stddef.h>

#include "grid.h"

/* The margins' defaults: the least TPOT p50 gain worth acting on, the
 * most TPOT p99 rise and throughput fall a win may cost, percent. */
#define VERDICT_P50_GAIN_PCT 1.0
#define VERDICT_P99_LOSS_PCT 5.0
#define VERDICT_TPS_LOSS_PCT 1.0

typedef struct verdict_opts {
    double p50_gain_pct;
    double p99_loss_pct;
    double tps_loss_pct;
    int K;                      /* the fleet's K; 0: compare fleets */
} verdict_opts;

void verdict_opts_default(verdict_opts *o);

typedef enum verdict_answer {
    VERDICT_WIN = 0,            /* use the setting */
    VERDICT_KEEP,               /* keep the baseline: ELDR does not pay */
    VERDICT_TIE,                /* keep the baseline: the seeds cannot tell */
    VERDICT_NONE,               /* no verdict: one seed, no interval to weigh */
} verdict_answer;

/* Why a candidate falls short (VERDICT_OK: it wins). */
typedef enum verdict_why {
    VERDICT_OK = 0,
    VERDICT_NO_GAIN,            /* keep: its best case gains less than the margin */
    VERDICT_UNSURE,             /* tie: the interval straddles the margin */
    VERDICT_P99_LOSS,           /* keep: p99 may rise beyond its margin */
    VERDICT_TPS_LOSS,           /* keep: throughput may fall beyond its margin */
    VERDICT_FLIPS,              /* tie: some seed's split has a faster baseline */
    VERDICT_ONE_SEED,           /* none: no interval */
    VERDICT_NO_SETTING,         /* keep: no candidate row at this K */
} verdict_why;

/* One candidate against every baseline of its cell: for each metric the
 * corrected interval of the change against the baseline that binds (p50:
 * the highest upper bound; p99: the highest upper bound; throughput: the
 * lowest lower bound) and that baseline's row. */
typedef struct verdict_cmp {
    grid_stat p50, p99, tps;
    int p50_base, p99_base, tps_base;
    int flip_seed, flip_base;   /* VERDICT_FLIPS: the seed index and baseline row */
    verdict_why why;
} verdict_cmp;

typedef struct verdict {
    verdict_answer answer;
    verdict_why why;
    int row;                    /* the answer's row: the setting, or the kept baseline */
    int setting;                /* the winning or closest candidate row, -1 */
    int baseline;               /* the best baseline (lowest mean p50) of setting's cell */
    int n_compared;             /* m: the candidates of the correction */
    int n_wins;                 /* candidates that win */
    int n_baselines;            /* baseline rows per cell */
    verdict_cmp cmp;            /* setting's comparison */
    verdict_opts opts;
} verdict;

/* Decide on grid r. Returns 0, or -1 with err when no row of opts->K
 * (or no finite baseline) is in the grid. */
int verdict_decide(const grid_result *r, const verdict_opts *opts, verdict *v, char *err,
                   size_t errlen);

/* The answer in a few words, the same on every screen: "use tau 0.1 at
 * K 4", "use eldr-cost at K 4", "keep rr at K 4", "tie at K 4: keep rr",
 * "no verdict at K 4" (one seed). */
void verdict_head(const grid_result *r, const verdict *v, char *buf, size_t n);

/* Why, in one sentence with the numbers: the setting's corrected p50
 * interval against the binding baseline, its p99 and throughput worst
 * cases, or what stopped it. */
void verdict_reason(const grid_result *r, const verdict *v, char *buf, size_t n);

/* The rule as applied: the baselines, the margins, the correction (m,
 * confidence, t and df), the split rule and K. */
void verdict_rule(const grid_result *r, const verdict *v, char *buf, size_t n);

/* All three, as every front end prints them. */
typedef struct verdict_text {
    char head[160], reason[768], rule[640];
} verdict_text;
void verdict_words(const grid_result *r, const verdict *v, verdict_text *t);

/* "win", "keep", "tie", "none": the answer's word (JSON, Lua). */
const char *verdict_answer_name(verdict_answer a);
/* "ok", "no_gain", "unsure", "p99_loss", "tps_loss", "flips", "one_seed",
 * "no_setting" */
const char *verdict_why_name(verdict_why w);

/* The baselines of r's cells, "jsq, rr, p2c" (the grid's order). */
void verdict_baselines(const grid_result *r, char *buf, size_t n);

/* The corrected interval of candidate row c against every baseline of
 * its cell, m comparisons (what the dashboard's cells are judged by). */
void verdict_compare(const grid_result *r, int c, int m, const verdict_opts *o,
                     verdict_cmp *out);

/* m for candidate row c: the candidates with c's K (or every K, K 0). */
int verdict_family(const grid_result *r, int K);

#endif
