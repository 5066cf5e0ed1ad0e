/* tradeoff.h - the numbers of the trade-off view (view 7): the tau x K
 * grid around the dashboard's current setting, simulated with the grid
 * engine (grid.h: every cell against the baselines, over opts.seeds
 * seeds), and the background job that computes it so the screen stays
 * live.
 *
 * Which cells: tau in {0, 0.05, 0.1, 0.2} plus the current tau; K in
 * {K/2, K, 2K} where valid (1 <= K, K <= DASH_K_MAX and the calibration
 * rows); the current arrivals. When the dashboard's policy is eldr-cost
 * (--policy eldr-cost, or p), each K also gets an eldr-cost cell (the
 * cost rule, grid_spec.cost), weighed by the verdict exactly as `eldr
 * advise --cost-rule` weighs it: one more setting in the Bonferroni
 * correction, the same baselines (GRID_DEFAULT_BASELINES) and margins. The current K uses the dashboard's own
 * model, so its cells are the header's numbers over the same seeds; the
 * other K are fitted on the calibration rows with the model's variant,
 * layers and seed (what `]` / `[` would refit).
 *
 * Sharing: the job works on its own copy of the model, and reads only
 * the dashboard's calibration and evaluation traces and its sim_config,
 * which never change after the open; so what-if changes (which replace
 * the model) may run alongside it. */
#ifndef ELDR_TRADEOFF_H
#define ELDR_TRADEOFF_H

#include <pthread.h>

#include "dash.h"
#include "verdict.h"

/* Build the job's inputs from d's current setting (copies what may
 * change). The spec's model, layer list and the copies are owned by
 * in; free with tradeoff_input_free. */
typedef struct tradeoff_input {
    grid_spec spec;
    model_t *model;              /* copy of d's model (spec.model) */
    int *layers;                 /* the fit's layer list */
    int K0;
    double tau0;
} tradeoff_input;
/* first: the first look's grid: one seed on the first look's rows (the
 * dashboard's split), bounded work whatever the trace. */
int tradeoff_input_make(const dash_t *d, int first, tradeoff_input *in, char *err,
                        size_t errlen);
void tradeoff_input_free(tradeoff_input *in);

/* Run the grid of `in` synchronously (for --frame) and store it in
 * d->trade (freeing an older one). Returns 0, -1 with err, -2 cancelled;
 * the result or the error is in d->trade either way. */
int tradeoff_compute(dash_t *d, int first, volatile int *cancel, char *err, size_t errlen);

/* The background job: one at a time. When the dashboard has a first
 * look (a sample of its rows), the job runs two grids: the first look's
 * (one seed on the sample: shown as soon as it is done, labelled), then
 * the full one, which replaces it; Esc during the second keeps the first
 * (labelled as such). */
typedef struct tradeoff_job {
    pthread_t th;
    int running;                 /* started and not yet collected */
    pthread_mutex_t mu;
    int done;                    /* under mu */
    int pass;                    /* under mu: 0 the first look's grid, 1 the full one */
    int first_done, first_taken; /* under mu: the first grid is ready / shown */
    int64_t n_done, n_total;     /* under mu: grid cells finished (this pass) */
    volatile int cancel;
    int two;                     /* two passes */
    tradeoff_input in, in2;      /* the first look's (when two) and the full grid */
    grid_result res, res2;
    int rc, rc1;
    char err[ELDR_ERRLEN];
} tradeoff_job;

void tradeoff_job_init(tradeoff_job *j);
void tradeoff_job_destroy(tradeoff_job *j);
/* Start on d's current setting; sets d->trade to running. */
int tradeoff_job_start(tradeoff_job *j, dash_t *d);
/* While running: copy the progress into d->trade. 1 when finished. */
int tradeoff_job_poll(tradeoff_job *j, dash_t *d);
/* Join the finished (or cancelled) job and move its result into d->trade. */
int tradeoff_job_collect(tradeoff_job *j, dash_t *d);
void tradeoff_job_cancel(tradeoff_job *j);

/* Rows of the ELDR cells of a grid, in table order (K, then tau, then
 * eldr-cost): their indices into g->rows; returns how many (at most
 * max, TRADE_MAX_ROWS holds them all). */
#define TRADE_MAX_ROWS (GRID_MAX_LIST * 4)
int tradeoff_eldr_rows(const grid_result *g, int *rows, int max);

/* What the view compares (key m cycles them): each cell against the best
 * baseline of its own K (grid.h: the baseline of lowest mean TPOT p50),
 * paired per seed, never absolute numbers across K. */
typedef enum trade_metric { TRADE_P50 = 0, TRADE_P99, TRADE_TPS, TRADE_N_METRICS } trade_metric;
const char *tradeoff_metric_name(int metric);      /* "TPOT p50", "TPOT p99", "tok/s" */
/* The cell's change against its baseline, percent, with its 95% CI. */
const grid_stat *tradeoff_change(const grid_row *r, int metric);
/* The mean change signed so that > 0 is better (lower TPOT, more tok/s). */
double tradeoff_gain(const grid_row *r, int metric);
/* The cell's own value of the metric (ms or tokens/s), mean over seeds. */
const grid_stat *tradeoff_value(const grid_row *r, int metric);

/* pareto[i] = 1 when ELDR row rows[i] beats its baseline on the metric
 * (tradeoff_gain > 0: a cell worse than the baseline is never on the
 * front) and no other such row is at least as good in both the gain and
 * the mean imbalance and better in one. */
void tradeoff_pareto(const grid_result *g, const int *rows, int n, int metric, int *pareto);

/* The view's answer: the one verdict (verdict.h, the rule of `eldr
 * advise` with its default margins and baselines) at the fleet's K, the
 * K the grid was made around (the other K are shown, not judged). Its
 * words in *t ("use tau 0.1 at K 4", "keep rr at K 4", "tie at K 4: keep
 * rr"; the reason; the rule). Returns the answer, or -1 (the error in
 * t->head) when the grid has no row at K. */
int tradeoff_verdict(const grid_result *g, int K, verdict *v, verdict_text *t);

/* ch widened by Bonferroni over the candidates of row r's K, as the
 * verdict corrects: the interval the view's better/even/worse reads. */
void tradeoff_corrected(const grid_result *g, const grid_row *r, const grid_stat *ch,
                        grid_stat *out);

/* What the grid's intervals cover (grid_ci_covers), for the view and
 * the JSON. */
void tradeoff_covers(const dash_t *d, char *buf, size_t n);

#endif
