/* tradeoff.c - the trade-off grid and its background job (tradeoff.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "dash_tokens.h"
#include "tradeoff.h"

static const double TAUS[] = {0, 0.05, 0.1, 0.2};
#define N_TAUS ((int)(sizeof TAUS / sizeof TAUS[0]))

/* A copy of m's recipe and centroids: the job must not read the
 * dashboard's model, which a what-if change may free meanwhile. */
static model_t *model_dup(const model_t *m, char *err, size_t errlen)
{
    model_t *c = model_new(&m->recipe, m->k, m->K, err, errlen);
    if (!c)
        return NULL;
    memcpy(c->centroids, m->centroids, (size_t)m->K * sig_dim(&m->recipe) * sizeof *c->centroids);
    c->tau = m->tau;
    c->seed = m->seed;
    c->rho = m->rho;
    c->n_star = m->n_star;
    c->balanced = m->balanced;
    return c;
}

static void add_tau(grid_spec *g, double tau)
{
    for (int i = 0; i < g->n_taus; i++)
        if (fabs(g->taus[i] - tau) < 1e-9)
            return;
    int i = g->n_taus++;
    while (i > 0 && g->taus[i - 1] > tau) {   /* keep them ascending */
        g->taus[i] = g->taus[i - 1];
        i--;
    }
    g->taus[i] = tau;
}

int tradeoff_input_make(const dash_t *d, int first, tradeoff_input *in, char *err,
                        size_t errlen)
{
    memset(in, 0, sizeof *in);
    const model_t *m = d->fit->model;
    in->model = model_dup(m, err, errlen);
    if (!in->model)
        return -1;
    in->layers = malloc((size_t)(m->recipe.n_layers > 0 ? m->recipe.n_layers : 1) *
                        sizeof *in->layers);
    if (!in->layers) {
        tradeoff_input_free(in);
        return eldr_errf(err, errlen, "dash: out of memory");
    }
    memcpy(in->layers, m->recipe.layers, (size_t)m->recipe.n_layers * sizeof *in->layers);
    in->K0 = m->K;
    in->tau0 = d->tau;
    grid_spec *g = &in->spec;
    grid_spec_default(g);
    g->calib = d->calib;
    g->eval = first && d->rows[DASH_LEVEL_FIRST].t ? d->rows[DASH_LEVEL_FIRST].t : d->eval;
    g->model = in->model;
    g->cfg = d->cfg;
    g->n_seeds = first ? 1 : d->opts.seeds;
    if (d->cfg.arrivals == SIM_ARRIVE_POISSON) {   /* the same arrivals, the rate on
                                                    * the rows: the verdict names it */
        g->n_rates = 1;
        g->rates[0] = d->cfg.rate;
    }
    /* the other K are fitted as a refit would: same variant, layers, seed */
    model_fit_opts_default(&g->fit, m->K);
    g->fit.variant = m->recipe.variant;
    g->fit.layers = MODEL_LAYERS_LIST;
    g->fit.layer_list = in->layers;
    g->fit.n_layer_list = m->recipe.n_layers;
    g->fit.seed = m->seed ? m->seed : d->opts.seed;
    g->fit.balanced = m->balanced != 0;
    if (!first)
        dash_grid_splits(d, g);  /* redrawn per seed: the default recipe per split */
    g->cfg.tokens = dash_tokens_of(d, g->all ? g->all : g->eval);   /* its cells' rows */
    int64_t kmax = d->fit->n_fit < DASH_K_MAX ? d->fit->n_fit : DASH_K_MAX;
    if (kmax > ROUTE_MAX_WORKERS)
        kmax = ROUTE_MAX_WORKERS;
    int Ks[3] = {m->K / 2, m->K, 2 * m->K};
    for (int i = 0; i < 3; i++)
        if (Ks[i] >= 1 && Ks[i] <= kmax && (i == 1 || Ks[i] != m->K))
            g->workers[g->n_workers++] = Ks[i];
    for (int i = 0; i < N_TAUS; i++)
        add_tau(g, TAUS[i]);
    add_tau(g, d->tau);
    /* the cost rule is a candidate when the dashboard runs it, as advise
     * weighs it with --cost-rule: one row per K, after the taus */
    g->cost = d->policy == ROUTE_ELDR_COST;
    return 0;
}

void tradeoff_input_free(tradeoff_input *in)
{
    model_free(in->model);
    free(in->layers);
    memset(in, 0, sizeof *in);
}

/* Move a finished grid into d->trade: it keeps the model copy the
 * current-K rows borrowed. */
static void adopt(dash_t *d, tradeoff_input *in, grid_result *g, int rc, const char *err,
                  int first)
{
    dash_trade_clear(&d->trade);
    dash_trade *t = &d->trade;
    t->K0 = in->K0;
    t->tau0 = in->tau0;
    t->first = first;
    t->rows = in->spec.eval->n;
    t->refine = -1;
    if (rc == 0) {
        t->state = DASH_TRADE_DONE;
        t->g = *g;
        t->model = in->model;
        in->model = NULL;
        /* the cursor starts on the current setting */
        t->cost = in->spec.cost;
        int rows[TRADE_MAX_ROWS];
        int n = tradeoff_eldr_rows(&t->g, rows, TRADE_MAX_ROWS);
        for (int i = 0; i < n; i++) {
            const grid_row *r = &t->g.rows[rows[i]];
            if (r->K == in->K0 && (in->spec.cost ? r->kind == ROUTE_ELDR_COST
                                                 : fabs(r->tau - in->tau0) < 1e-9))
                t->cursor = i;
        }
    } else {
        t->state = DASH_TRADE_FAILED;
        snprintf(t->err, sizeof t->err, "%s", rc == -2 ? "cancelled" : err);
    }
    memset(g, 0, sizeof *g);
    tradeoff_input_free(in);
}

int tradeoff_compute(dash_t *d, int first, volatile int *cancel, char *err, size_t errlen)
{
    tradeoff_input in;
    first = first && d->rows[DASH_LEVEL_FIRST].t;
    if (tradeoff_input_make(d, first, &in, err, errlen))
        return -1;
    in.spec.cancel = cancel;
    grid_result g;
    int rc = grid_run(&in.spec, &g, err, errlen);
    adopt(d, &in, &g, rc, err, first);
    if (first)
        d->trade.refine_off = 1;   /* a frame of the first look: nothing refines it */
    return rc;
}

/* ---- the job ---- */

void tradeoff_job_init(tradeoff_job *j)
{
    memset(j, 0, sizeof *j);
    pthread_mutex_init(&j->mu, NULL);
}

void tradeoff_job_destroy(tradeoff_job *j)
{
    pthread_mutex_destroy(&j->mu);
}

static void on_cells(void *ctx, int64_t done, int64_t total)
{
    tradeoff_job *j = ctx;
    pthread_mutex_lock(&j->mu);
    j->n_done = done;
    j->n_total = total;
    pthread_mutex_unlock(&j->mu);
}

static void *job_main(void *arg)
{
    tradeoff_job *j = arg;
    if (j->two) {
        j->rc1 = grid_run(&j->in.spec, &j->res, j->err, sizeof j->err);
        pthread_mutex_lock(&j->mu);
        j->first_done = 1;
        j->pass = 1;
        j->n_done = j->n_total = 0;
        pthread_mutex_unlock(&j->mu);
    }
    int rc = j->two && j->rc1 ? j->rc1
                              : grid_run(&j->in2.spec, &j->res2, j->err, sizeof j->err);
    pthread_mutex_lock(&j->mu);
    j->rc = rc;
    j->done = 1;
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

static int make_input(tradeoff_job *j, tradeoff_input *in, const dash_t *d, int first)
{
    if (tradeoff_input_make(d, first, in, j->err, sizeof j->err))
        return -1;
    in->spec.progress = on_cells;
    in->spec.progress_ctx = j;
    in->spec.cancel = &j->cancel;
    return 0;
}

int tradeoff_job_start(tradeoff_job *j, dash_t *d)
{
    if (j->running)
        return -1;
    j->done = 0;
    j->pass = 0;
    j->first_done = j->first_taken = 0;
    j->n_done = j->n_total = 0;
    j->cancel = 0;
    j->rc = j->rc1 = 0;
    j->err[0] = '\0';
    memset(&j->res, 0, sizeof j->res);
    memset(&j->res2, 0, sizeof j->res2);
    /* the first look's grid first when the dashboard has a first look */
    j->two = d->rows[DASH_LEVEL_FIRST].t != NULL;
    memset(&j->in, 0, sizeof j->in);
    if ((j->two && make_input(j, &j->in, d, 1)) || make_input(j, &j->in2, d, 0)) {
        tradeoff_input_free(&j->in);
        return -1;
    }
    if (pthread_create(&j->th, NULL, job_main, j)) {
        tradeoff_input_free(&j->in);
        tradeoff_input_free(&j->in2);
        snprintf(j->err, sizeof j->err, "cannot start the trade-off thread");
        return -1;
    }
    j->running = 1;
    dash_trade_clear(&d->trade);
    d->trade.state = DASH_TRADE_RUNNING;
    d->trade.progress = -1;
    d->trade.K0 = j->in2.K0;
    d->trade.tau0 = j->in2.tau0;
    d->trade.first = j->two;     /* computing the first look's grid */
    d->trade.rows = (j->two ? j->in.spec.eval : j->in2.spec.eval)->n;
    return 0;
}

int tradeoff_job_poll(tradeoff_job *j, dash_t *d)
{
    if (!j->running)
        return 0;
    pthread_mutex_lock(&j->mu);
    int done = j->done, first = j->first_done && !j->first_taken, pass = j->pass;
    double frac = j->n_total > 0 ? (double)j->n_done / (double)j->n_total : -1;
    if (first)
        j->first_taken = 1;
    pthread_mutex_unlock(&j->mu);
    if (first && j->rc1 == 0)   /* the thread is past the first grid: show it */
        adopt(d, &j->in, &j->res, 0, "", 1);
    else if (first)
        tradeoff_input_free(&j->in);
    if (pass == 0 || (j->two && j->rc1))
        d->trade.progress = frac;
    else if (d->trade.first)
        d->trade.refine = frac;
    else
        d->trade.progress = frac;
    return done;
}

int tradeoff_job_collect(tradeoff_job *j, dash_t *d)
{
    if (!j->running)
        return -1;
    pthread_join(j->th, NULL);
    j->running = 0;
    tradeoff_job_poll(j, d);     /* a first grid not yet taken */
    int rc = j->rc;
    if (rc == -2 && d->trade.first && d->trade.state == DASH_TRADE_DONE) {
        /* Esc during the full grid: the first look stays, labelled */
        d->trade.refine_off = 1;
        grid_result_free(&j->res2);
        tradeoff_input_free(&j->in2);
        return rc;
    }
    adopt(d, &j->in2, &j->res2, rc, j->err, 0);
    return rc;
}

void tradeoff_job_cancel(tradeoff_job *j)
{
    j->cancel = 1;
}

/* ---- reading the grid ---- */

int tradeoff_eldr_rows(const grid_result *g, int *rows, int max)
{
    int n = 0;
    for (int i = 0; i < g->n && n < max; i++)
        if (grid_kind_is_candidate(g->rows[i].kind))
            rows[n++] = i;
    return n;
}

static const char *METRIC_NAMES[TRADE_N_METRICS] = {"TPOT p50", "TPOT p99", "tok/s"};

const char *tradeoff_metric_name(int metric)
{
    return metric >= 0 && metric < TRADE_N_METRICS ? METRIC_NAMES[metric] : "?";
}

const grid_stat *tradeoff_change(const grid_row *r, int metric)
{
    return metric == TRADE_P99 ? &r->p99_vs_best_pct
           : metric == TRADE_TPS ? &r->tps_vs_best_pct : &r->vs_best_pct;
}

double tradeoff_gain(const grid_row *r, int metric)
{
    double m = tradeoff_change(r, metric)->mean;
    return metric == TRADE_TPS ? m : -m;
}

const grid_stat *tradeoff_value(const grid_row *r, int metric)
{
    return metric == TRADE_P99 ? &r->tpot_p99 : metric == TRADE_TPS ? &r->tokens_per_s
                                                                    : &r->tpot_p50;
}

void tradeoff_pareto(const grid_result *g, const int *rows, int n, int metric, int *pareto)
{
    for (int i = 0; i < n; i++) {
        const grid_row *a = &g->rows[rows[i]];
        double ag = tradeoff_gain(a, metric), ai = a->imbalance.mean;
        pareto[i] = isfinite(ag) && isfinite(ai) && ag > 0;
        for (int j = 0; j < n && pareto[i]; j++) {
            const grid_row *b = &g->rows[rows[j]];
            double bg = tradeoff_gain(b, metric), bi = b->imbalance.mean;
            if (j != i && bg > 0 && bg >= ag && bi <= ai && (bg > ag || bi < ai))
                pareto[i] = 0;
        }
    }
}

int tradeoff_verdict(const grid_result *g, int K, verdict *v, verdict_text *t)
{
    verdict_opts o;
    verdict_opts_default(&o);
    o.K = K;
    if (verdict_decide(g, &o, v, t->head, sizeof t->head) < 0) {
        t->reason[0] = t->rule[0] = '\0';
        return -1;
    }
    verdict_words(g, v, t);
    return (int)v->answer;
}

void tradeoff_corrected(const grid_result *g, const grid_row *r, const grid_stat *ch,
                        grid_stat *out)
{
    grid_widen(ch, r->n_seeds, verdict_family(g, r->K), out);
}

void tradeoff_covers(const dash_t *d, char *buf, size_t n)
{
    const grid_result *g = &d->trade.g;
    grid_ci_covers(g->n_seeds, d->cfg.seed, g->resplit, &d->opts.split,
                   !g->resplit && d->home && d->home->origin == DASH_FIT_FILE
                       ? "one split (the model is given: its centroids fix the calibration)"
                       : NULL, buf, n);
}
