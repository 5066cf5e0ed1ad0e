/* grid.c - the policy grid over seeds (grid.h). */
#include "grid.h"
#include "par.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "stats.h"

/* the per-seed metrics kept for each row */
enum { M_TPOT50, M_TPOT99, M_Q50, M_DISTINCT, M_REUSE, M_IMBAL, M_TPS, M_N };

void grid_spec_default(grid_spec *s)
{
    memset(s, 0, sizeof *s);
    model_fit_opts_default(&s->fit, 1);
    sim_config_default(&s->cfg);
    s->n_seeds = 1;
    static const route_kind base[] = {ROUTE_JSQ, ROUTE_RR, ROUTE_P2C};   /* as named */
    memcpy(s->baselines, base, sizeof base);
    s->n_base = 3;
    s->min2 = 1;
}

int grid_is_default_baseline(route_kind k)
{
    grid_spec d;
    grid_spec_default(&d);
    for (int i = 0; i < d.n_base; i++)
        if (d.baselines[i] == k)
            return 1;
    return 0;
}

/* What one split gives its cells: the rows, a model per K, the domain
 * baseline's label shares. One for the whole grid, or one per seed when
 * the split is redrawn (grid.h, "Calibration splits"). */
typedef struct grid_ctx {
    const trace_t *calib, *eval;
    trace_t *own_calib;             /* a redrawn split's calibration rows */
    int64_t *eval_rows;             /* NULL, or a redrawn split's evaluation
                                     * rows of eval (= s->all), simulated in
                                     * place (sim_workload_init_rows) */
    int64_t n_eval;
    model_t **models;               /* [n_workers] */
    unsigned char *owned;           /* [n_workers] 1: fitted here */
    double *shares;                 /* domain baseline: label counts of calib */
    int n_labels;
} grid_ctx;

typedef struct grid_run_state {
    const grid_spec *s;
    grid_result *r;
    double *raw;                /* [rows][seeds][M_N] */
    int n_policies, n_rates;
    int cell_threads;           /* a cell's policies run on this many */
    int64_t next, tasks, total, done;
    int failed;                 /* -1 error, -2 cancelled */
    char err[ELDR_ERRLEN];
    grid_ctx fixed;             /* the one split, without s->all */
    pthread_mutex_t lock;
} grid_run_state;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int check_spec(const grid_spec *s, char *err, size_t errlen)
{
    if (s->all ? s->all->n < 2 : (!s->eval || s->eval->n < 1))
        return eldr_errf(err, errlen, "grid: no evaluation rows");
    if (s->n_seeds < 1 || s->n_seeds > GRID_MAX_SEEDS)
        return eldr_errf(err, errlen, "grid: %d seeds (1 to %d)", s->n_seeds, GRID_MAX_SEEDS);
    if (s->n_workers < 1 || s->n_workers > GRID_MAX_LIST || s->n_rates < 0 ||
        s->n_rates > GRID_MAX_LIST || s->n_taus < 0 || s->n_taus > GRID_MAX_LIST ||
        s->n_base < 0 || s->n_base > ROUTE_N_KINDS)
        return eldr_errf(err, errlen, "grid: list sizes out of range");
    if (s->n_taus + s->n_base + (s->cost != 0) < 1)
        return eldr_errf(err, errlen, "grid: no policy (give taus or baselines)");
    for (int i = 0; i < s->n_base; i++)
        if ((unsigned)s->baselines[i] >= ROUTE_N_KINDS ||
            grid_kind_is_candidate(s->baselines[i]))
            return eldr_errf(err, errlen, "grid: baseline %d is not a baseline", i);
    for (int i = 0; i < s->n_taus; i++)
        if (!isfinite(s->taus[i]) || s->taus[i] < 0)
            return eldr_errf(err, errlen, "grid: tau %g must be >= 0", s->taus[i]);
    if (!s->all && !s->calib && (s->n_taus > 0 && !s->model))
        return eldr_errf(err, errlen, "grid: no calibration rows to fit on");
    if (s->seed0 && (s->seed0->n < 0 || s->seed0->n > GRID_SEED0_MAX))
        return eldr_errf(err, errlen, "grid: %d seed-0 runs (0 to %d)", s->seed0->n,
                         GRID_SEED0_MAX);
    for (int i = 0; s->seed0 && i < s->seed0->n; i++)
        if ((unsigned)s->seed0->kind[i] >= ROUTE_N_KINDS)
            return eldr_errf(err, errlen, "grid: seed-0 run %d: no such policy", i);
    return 0;
}

/* Seed si's model of K in an earlier resplit result r, or NULL. */
static model_t *reused(const grid_result *r, int si, int K)
{
    if (!r || !r->resplit || si >= r->n_seeds)
        return NULL;
    model_t *const *m = si == 0 ? r->models : r->seed_models + (size_t)si * r->n_models;
    for (int i = 0; m && i < r->n_models; i++)
        if (m[i] && m[i]->K == K)
            return m[i];
    return NULL;
}

/* The model of each K on ctx's calibration rows: the given one when K
 * matches (redrawing splits: for seed 0 only, whose split it was fitted
 * on), else a fit seeded fit_seed. The first automatic layer selection
 * is reused for the other K. */
/* Fit K on ctx's calibration rows with fo into ctx->models[i]. */
static int fit_one(const grid_spec *s, grid_ctx *ctx, const model_fit_opts *fo, int i,
                   char *err, size_t errlen)
{
    int K = s->workers[i];
    if (!ctx->calib)
        return eldr_errf(err, errlen, "grid: K = %d needs a fit, and there are no "
                         "calibration rows", K);
    model_fit_opts o = *fo;
    o.K = K;
    o.cancel = s->cancel;
    int rc = model_fit(ctx->calib, &o, &ctx->models[i], NULL, err, errlen);
    if (rc == MODEL_FIT_CANCELLED)
        return rc;
    if (rc < 0) {
        char why[ELDR_ERRLEN];
        snprintf(why, sizeof why, "%s", err);
        return eldr_errf(err, errlen, "fit K = %d on the calibration rows: %s", K, why);
    }
    ctx->owned[i] = 1;
    return 0;
}

static int fit_models(const grid_spec *s, grid_ctx *ctx, int si, char *err, size_t errlen)
{
    if (s->n_taus == 0)
        return 0;                /* baselines only: no model needed */
    model_fit_opts fo = s->fit;
    fo.seed = s->fit.seed + (uint64_t)si;
    int *layers = NULL;
    int rc = 0;
    for (int i = 0; i < s->n_workers && rc == 0; i++) {
        int K = s->workers[i];
        if (s->model && s->model->K == K && (!s->all || si == 0)) {
            ctx->models[i] = (model_t *)s->model;
            continue;
        }
        /* the same split and fit options in an earlier result: borrowed */
        model_t *again = s->all ? reused(s->reuse, si, K) : NULL;
        if (again)
            ctx->models[i] = again;
        else if ((rc = fit_one(s, ctx, &fo, i, err, errlen)) != 0)
            break;
        if (fo.layers == MODEL_LAYERS_AUTO) {
            const sig_recipe *rc0 = &ctx->models[i]->recipe;
            layers = malloc((size_t)rc0->n_layers * sizeof *layers);
            if (!layers)
                return eldr_errf(err, errlen, "grid: out of memory");
            memcpy(layers, rc0->layers, (size_t)rc0->n_layers * sizeof *layers);
            fo.layers = MODEL_LAYERS_LIST;
            fo.layer_list = layers;
            fo.n_layer_list = rc0->n_layers;
        }
    }
    free(layers);
    return rc;
}

static int domain_shares(const grid_spec *s, grid_ctx *ctx, char *err, size_t errlen)
{
    int wanted = 0;
    for (int i = 0; i < s->n_base; i++)
        wanted |= s->baselines[i] == ROUTE_DOMAIN;
    if (!wanted)
        return 0;
    const trace_t *c = ctx->calib;
    if (!c || !c->label || c->n_labels < 1)
        return eldr_errf(err, errlen, "baseline domain: the calibration rows have no labels");
    ctx->shares = calloc((size_t)c->n_labels, sizeof *ctx->shares);
    if (!ctx->shares)
        return eldr_errf(err, errlen, "grid: out of memory");
    for (int64_t i = 0; i < c->n; i++)
        ctx->shares[c->label[i]] += 1;
    ctx->n_labels = c->n_labels;
    return 0;
}

/* Free what ctx owns: its rows, shares and, unless they went to the
 * result, its models. */
static void ctx_free(grid_ctx *ctx, int n_models)
{
    for (int i = 0; ctx->models && i < n_models; i++)
        if (ctx->owned[i])
            model_free(ctx->models[i]);
    trace_free(ctx->own_calib);
    free(ctx->eval_rows);
    free(ctx->shares);
}

/* Seed si's own split of s->all, and its models on it. */
static int ctx_resplit(const grid_spec *s, int si, grid_ctx *ctx, model_t **models,
                       unsigned char *owned, char *err, size_t errlen)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->models = models;
    ctx->owned = owned;
    split_spec sp = s->split;
    sp.seed = s->split.seed + (uint64_t)si;
    split_rows rows;
    char why[ELDR_ERRLEN];
    if (split_make(s->all, &sp, &rows, why, sizeof why) < 0)
        return eldr_errf(err, errlen, "split seed %llu: %s", (unsigned long long)sp.seed, why);
    int rc = 0;
    if (rows.n_calib < 1 || rows.n_eval < 1)
        rc = eldr_errf(err, errlen, "split seed %llu: %lld calibration, %lld evaluation rows; "
                       "both need rows", (unsigned long long)sp.seed, (long long)rows.n_calib,
                       (long long)rows.n_eval);
    /* the fits read a copy of the calibration rows, without token rows;
     * the evaluation rows (most of the trace) are simulated in place,
     * not copied per seed (docs/memory.md) */
    else if (!(ctx->own_calib = trace_select_some(s->all, rows.calib, rows.n_calib,
                                                  TRACE_DROP_TOKENS, err, errlen)))
        rc = -1;
    if (rc == 0) {
        ctx->eval_rows = rows.eval;   /* taken over from rows */
        ctx->n_eval = rows.n_eval;
        rows.eval = NULL;
    }
    split_rows_free(&rows);
    if (rc < 0)
        return -1;
    ctx->calib = ctx->own_calib;
    ctx->eval = s->all;
    if (domain_shares(s, ctx, err, errlen) < 0)
        return -1;
    rc = fit_models(s, ctx, si, err, errlen);
    if (rc == 0) {   /* the cells read the models and shares, not these rows */
        trace_free(ctx->own_calib);
        ctx->own_calib = NULL;
        ctx->calib = NULL;
    }
    return rc;
}

/* Policies per cell: the baselines, eldr (and eldr-online) per tau, and
 * eldr-cost with s->cost. */
static int policies_per_cell(const grid_spec *s)
{
    return s->n_base + s->n_taus * (s->online ? 2 : 1) + (s->cost != 0);
}

/* Policy p of a cell: the baselines, then per tau eldr (and eldr-online
 * after it with s->online), then eldr-cost with s->cost. */
static route_kind policy_at(const grid_spec *s, int p, double *tau)
{
    *tau = NAN;
    if (p < s->n_base)
        return s->baselines[p];
    int q = p - s->n_base, per = s->online ? 2 : 1;
    if (q >= s->n_taus * per)
        return ROUTE_ELDR_COST;
    *tau = s->taus[q / per];
    return q % per ? ROUTE_ELDR_ONLINE : ROUTE_ELDR;
}

/* Tokens emitted by steps ending in (t0, t1]: a step emits one token per
 * member at its end (sim.c, end_step). */
typedef struct steady_count {
    double t0, t1;
    int64_t tokens;
} steady_count;

static void count_step(void *ctx, int worker, double t, double dt, int B, const int *U, int L,
                       int64_t kv)
{
    (void)worker, (void)U, (void)L, (void)kv;
    steady_count *c = ctx;
    if (t + dt > c->t0 && t + dt <= c->t1)
        c->tokens += B;
}

/* The steady window of workload w (grid.h, GRID_WARMUP_FRAC); 0 when it
 * has none (closed loop, or too few arrivals to span time). */
static int steady_window(const sim_workload *w, steady_count *c)
{
    memset(c, 0, sizeof *c);
    if (!w->arrival || w->n < 2)
        return 0;
    c->t0 = w->arrival[(int64_t)(GRID_WARMUP_FRAC * (double)w->n)];
    c->t1 = w->arrival[w->n - 1];
    return c->t1 > c->t0;
}

/* The grid's step counting and a seed-0 caller's own callback, chained. */
typedef struct step_chain {
    steady_count *sc;           /* NULL: no steady window */
    sim_step_fn fn;             /* the caller's (grid_seed0), or NULL */
    void *ctx;
} step_chain;

static void chain_step(void *ctx, int worker, double t, double dt, int B, const int *U, int L,
                       int64_t kv)
{
    step_chain *c = ctx;
    if (c->sc)
        count_step(c->sc, worker, t, dt, B, U, L, kv);
    if (c->fn)
        c->fn(c->ctx, worker, t, dt, B, U, L, kv);
}

/* One policy on workload w; fn (may be NULL) is a seed-0 caller's step
 * callback, called beside the grid's own counting. *tps is the grid's
 * throughput (at steady state when there is one, grid.h); res is the
 * run's own, untouched (a seed-0 caller reads it whole). */
static int run_policy(const grid_spec *s, const grid_ctx *ctx, const sim_workload *w,
                      route_kind kind, int K, double tau, const model_t *m, uint64_t seed,
                      sim_step_fn fn, void *fn_ctx, sim_result *res, double *tps, char *err,
                      size_t errlen)
{
    route_policy p;
    if (route_policy_init(&p, kind, K, seed, err, errlen) < 0)
        return -1;
    int rc = 0;
    if (route_kind_has_centroids(kind) && !m)
        rc = eldr_errf(err, errlen, "grid: %s needs a model", route_kind_name(kind));
    else if (route_kind_has_centroids(kind))
        rc = route_policy_set_centroids(&p, m->centroids, sig_dim(&m->recipe), tau, s->min2,
                                        err, errlen);
    else if (kind == ROUTE_DOMAIN)
        rc = route_policy_set_domains(&p, ctx->shares, ctx->n_labels, err, errlen);
    steady_count sc;
    int steady = steady_window(w, &sc);
    step_chain ch = {steady ? &sc : NULL, fn, fn_ctx};
    if (rc == 0)   /* SIM_CANCELLED is the grid's -2 */
        rc = sim_run_cancel(w, &p, steady || fn ? chain_step : NULL, &ch, s->cancel, res, err,
                            errlen);
    if (rc == 0)
        *tps = steady ? (double)sc.tokens / (sc.t1 - sc.t0) : res->tokens_per_s;
    route_policy_free(&p);
    return rc;
}

/* The policy runs of one cell, shared by st->cell_threads threads: each
 * takes the next run; the first failure stops the others from starting
 * one. Runs 0..n_policies-1 are the grid's policies; with the seed-0 hook
 * (grid_seed0) the hook's extra runs follow, and want[] says which
 * wanted run of the hook each run is (-1: none). */
typedef struct cell_runs {
    grid_run_state *st;
    const grid_ctx *ctx;
    const sim_workload *w;
    const model_t *m;
    int K, ki, ri, si, next, rc, n_runs;
    int want[ROUTE_N_KINDS + GRID_MAX_LIST * 2 + 1 + GRID_SEED0_MAX];
    uint64_t seed;
    pthread_mutex_t mu;
    char err[ELDR_ERRLEN];
} cell_runs;

/* Seed 0's wanted runs (grid_seed0) in a cell of nP policies: each is
 * the first policy of its kind (and tau) not yet claimed, else an extra
 * run after the policies. Returns the cell's number of runs. */
static int seed0_match(const grid_spec *s, int nP, int *want)
{
    const grid_seed0 *h = s->seed0;
    int n = nP;
    for (int p = 0; p < nP; p++)
        want[p] = -1;
    for (int i = 0; i < h->n; i++) {
        int found = -1;
        for (int p = 0; p < nP && found < 0; p++) {
            double tau;
            route_kind k = policy_at(s, p, &tau);
            if (want[p] < 0 && k == h->kind[i] &&
                (!route_kind_has_centroids(k) || tau == h->tau[i]))
                found = p;
        }
        want[found >= 0 ? found : n++] = i;
    }
    return n;
}

/* Run r of cell c: a grid policy (its numbers into st->raw) or a hook's
 * extra; a wanted run goes through the hook's begin and end. */
static int cell_run(cell_runs *c, int r, char *err, size_t errlen)
{
    const grid_spec *s = c->st->s;
    int nS = s->n_seeds, nR = c->st->n_rates, nP = c->st->n_policies;
    const grid_seed0 *h = s->seed0;
    int want = c->want[r];
    double tau;
    route_kind kind = r < nP ? policy_at(s, r, &tau) : h->kind[want];
    if (r >= nP)
        tau = route_kind_has_centroids(kind) ? h->tau[want] : NAN;
    sim_step_fn fn = NULL;
    void *fn_ctx = NULL;
    if (want >= 0 && h->begin && h->begin(h->ctx, want, c->w, &fn, &fn_ctx, err, errlen) < 0)
        return -1;
    sim_result res;
    double tps = NAN;
    int rc = run_policy(s, c->ctx, c->w, kind, c->K, tau, c->m, c->seed, fn, fn_ctx, &res, &tps,
                        err, errlen);
    if (rc == 0 && r < nP) {
        int row = (c->ki * nR + c->ri) * nP + r;   /* a slot of its own: no lock */
        double *v = c->st->raw + ((size_t)row * nS + c->si) * M_N;
        v[M_TPOT50] = res.tpot_p50_ms;
        v[M_TPOT99] = res.tpot_p99_ms;
        v[M_Q50] = res.queue_p50_ms;
        v[M_DISTINCT] = res.distinct_per_step;
        v[M_REUSE] = res.reuse;
        v[M_IMBAL] = res.imbalance;
        v[M_TPS] = tps;
    }
    int ran = rc == 0;
    if (want >= 0 && h->end) {
        char why[ELDR_ERRLEN];
        int e = h->end(h->ctx, want, fn_ctx, ran ? &res : NULL, why, sizeof why);
        if (ran && e < 0)
            rc = eldr_errf(err, errlen, "%s", why);
    }
    if (ran)
        sim_result_free(&res);   /* what the hook left */
    return rc;
}

static void *cell_main(void *arg)
{
    cell_runs *c = arg;
    char err[ELDR_ERRLEN];
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int r = c->rc ? c->n_runs : c->next++;
        pthread_mutex_unlock(&c->mu);
        if (r >= c->n_runs)
            return NULL;
        int rc = cell_run(c, r, err, sizeof err);
        if (rc < 0) {
            pthread_mutex_lock(&c->mu);
            if (!c->rc) {
                c->rc = rc;
                snprintf(c->err, sizeof c->err, "%s", err);
            }
            pthread_mutex_unlock(&c->mu);
        }
    }
}

/* One cell (K index ki, rate index ri, seed si): its workload and every
 * policy on it, the policies on st->cell_threads threads sharing the one
 * workload (its activation pools are a cell's biggest allocation: one
 * cell at a time holds one set, docs/memory.md). */
static int run_cell(grid_run_state *st, const grid_ctx *ctx, int ki, int ri, int si,
                    char *err, size_t errlen)
{
    const grid_spec *s = st->s;
    sim_config cfg = s->cfg;
    cfg.seed = s->cfg.seed + (uint64_t)si;
    /* a cell reads no signature itself: above the cap they are built at
     * each arrival, not held per seed and thread (docs/memory.md) */
    if (cfg.sig_cache > SIM_DEFAULT_SIG_CACHE)
        cfg.sig_cache = SIM_DEFAULT_SIG_CACHE;
    /* and no cell reads the heat matrix (sim.h), but a seed-0 caller's */
    int hook = s->seed0 && si == 0 && ki == 0 && ri == 0;
    if (!hook)
        cfg.no_heat = 1;
    if (st->cell_threads > cfg.threads)
        cfg.threads = st->cell_threads;   /* the pools do not depend on it */
    double rate = s->n_rates ? s->rates[ri] : 0;
    if (rate > 0) {
        cfg.arrivals = SIM_ARRIVE_POISSON;
        cfg.rate = rate;
    }
    sim_workload w;
    const sig_recipe *recipe = ctx->models[ki] ? &ctx->models[ki]->recipe : NULL;
    if ((ctx->eval_rows ? sim_workload_init_rows(&w, ctx->eval, ctx->eval_rows, ctx->n_eval,
                                                 &cfg, recipe, err, errlen)
                        : sim_workload_init(&w, ctx->eval, &cfg, recipe, err, errlen)) < 0)
        return -1;
    cell_runs c = {.st = st, .ctx = ctx, .w = &w, .m = ctx->models[ki], .K = s->workers[ki],
                   .ki = ki, .ri = ri, .si = si, .seed = cfg.seed, .n_runs = st->n_policies};
    if (hook)
        c.n_runs = seed0_match(s, st->n_policies, c.want);
    else
        for (int p = 0; p < st->n_policies; p++)
            c.want[p] = -1;
    pthread_mutex_init(&c.mu, NULL);
    par_run(par_threads(st->cell_threads, c.n_runs), cell_main, &c);
    pthread_mutex_destroy(&c.mu);
    sim_workload_free(&w);
    if (c.rc < 0)
        snprintf(err, errlen, "%s", c.err);
    return c.rc;
}

/* A cell finished: count it, report progress. */
static void cell_done(grid_run_state *st)
{
    pthread_mutex_lock(&st->lock);
    st->done++;
    if (st->s->progress)
        st->s->progress(st->s->progress_ctx, st->done, st->total);
    pthread_mutex_unlock(&st->lock);
}

static int cancelled(const grid_run_state *st)
{
    return st->s->cancel && *st->s->cancel;
}

/* One task: a cell of the fixed split, or, redrawing splits, one seed:
 * its split, its fits, then its cells. Seed 0's models go to the result. */
static int run_task(grid_run_state *st, int64_t task, char *err, size_t errlen)
{
    const grid_spec *s = st->s;
    int nS = s->n_seeds, nR = st->n_rates;
    if (!s->all) {
        int si = (int)(task % nS), ri = (int)(task / nS % nR), ki = (int)(task / nS / nR);
        int rc = run_cell(st, &st->fixed, ki, ri, si, err, errlen);
        if (rc == 0)
            cell_done(st);
        return rc;
    }
    int si = (int)task, nW = s->n_workers;
    model_t *models[GRID_MAX_LIST] = {0};
    unsigned char owned[GRID_MAX_LIST] = {0};
    grid_ctx ctx;
    int rc = ctx_resplit(s, si, &ctx, models, owned, err, errlen);
    if (rc == MODEL_FIT_CANCELLED)
        rc = -2;
    for (int ki = 0; rc == 0 && ki < nW; ki++)
        for (int ri = 0; rc == 0 && ri < nR; ri++) {
            if (cancelled(st))
                rc = -2;
            else if ((rc = run_cell(st, &ctx, ki, ri, si, err, errlen)) == 0)
                cell_done(st);
        }
    if (rc == 0) {              /* only this task writes its seed's models */
        grid_result *r = st->r;
        model_t **to = si == 0 ? r->models : r->seed_models + (size_t)si * nW;
        unsigned char *own = si == 0 ? r->model_owned : r->seed_owned + (size_t)si * nW;
        memcpy(to, models, (size_t)nW * sizeof *models);
        memcpy(own, owned, (size_t)nW);
        memset(owned, 0, sizeof owned);
    }
    ctx_free(&ctx, nW);
    return rc;
}

static void *worker_main(void *arg)
{
    grid_run_state *st = arg;
    char err[ELDR_ERRLEN];
    for (;;) {
        pthread_mutex_lock(&st->lock);
        int stop = st->failed || st->next >= st->tasks;
        if (!stop && cancelled(st)) {
            st->failed = -2;
            stop = 1;
        }
        int64_t task = st->next++;
        pthread_mutex_unlock(&st->lock);
        if (stop)
            break;
        int rc = run_task(st, task, err, sizeof err);
        pthread_mutex_lock(&st->lock);
        if (rc == -2 && !st->failed)
            st->failed = -2;
        else if (rc < 0 && !st->failed) {
            st->failed = -1;
            snprintf(st->err, sizeof st->err, "%s", err);
        }
        pthread_mutex_unlock(&st->lock);
    }
    return NULL;
}

static void stat_of(const double *raw, int nS, int metric, grid_stat *out)
{
    double x[GRID_MAX_SEEDS], half;
    for (int i = 0; i < nS; i++)
        x[i] = raw[(size_t)i * M_N + metric];
    stats_mean_ci95(x, nS, &out->mean, &half);
    out->lo = out->mean - half;
    out->hi = out->mean + half;
}

/* Paired per-seed change of `metric` against row b, in percent. */
static void paired_pct(const double *raw_a, const double *raw_b, int nS, int metric,
                       grid_stat *out)
{
    double x[GRID_MAX_SEEDS], half;
    for (int i = 0; i < nS; i++) {
        double a = raw_a[(size_t)i * M_N + metric], b = raw_b[(size_t)i * M_N + metric];
        x[i] = b > 0 ? 100.0 * (a - b) / b : NAN;
    }
    stats_mean_ci95(x, nS, &out->mean, &half);
    out->lo = out->mean - half;
    out->hi = out->mean + half;
}

static int summarise(grid_run_state *st, char *err, size_t errlen)
{
    const grid_spec *s = st->s;
    grid_result *r = st->r;
    int nS = s->n_seeds, nP = st->n_policies;
    for (int row = 0; row < r->n; row++) {
        grid_row *g = &r->rows[row];
        int p = row % nP, ri = row / nP % st->n_rates, ki = row / nP / st->n_rates;
        g->K = s->workers[ki];
        g->rate = s->n_rates && s->rates[ri] > 0 ? s->rates[ri] : 0;
        g->kind = policy_at(s, p, &g->tau);
        g->reference = s->reference_only && p < s->n_base && !grid_is_default_baseline(g->kind);
        g->n_seeds = nS;
        g->tpot_p50_ms = malloc((size_t)nS * sizeof *g->tpot_p50_ms);
        g->tpot_p99_ms_seed = malloc((size_t)nS * sizeof *g->tpot_p99_ms_seed);
        g->tokens_per_s_seed = malloc((size_t)nS * sizeof *g->tokens_per_s_seed);
        if (!g->tpot_p50_ms || !g->tpot_p99_ms_seed || !g->tokens_per_s_seed)
            return eldr_errf(err, errlen, "grid: out of memory");
        const double *raw = st->raw + (size_t)row * nS * M_N;
        for (int i = 0; i < nS; i++) {
            g->tpot_p50_ms[i] = raw[(size_t)i * M_N + M_TPOT50];
            g->tpot_p99_ms_seed[i] = raw[(size_t)i * M_N + M_TPOT99];
            g->tokens_per_s_seed[i] = raw[(size_t)i * M_N + M_TPS];
        }
        stat_of(raw, nS, M_TPOT50, &g->tpot_p50);
        stat_of(raw, nS, M_TPOT99, &g->tpot_p99);
        stat_of(raw, nS, M_Q50, &g->queue_p50);
        stat_of(raw, nS, M_DISTINCT, &g->distinct);
        stat_of(raw, nS, M_REUSE, &g->reuse);
        stat_of(raw, nS, M_IMBAL, &g->imbalance);
        stat_of(raw, nS, M_TPS, &g->tokens_per_s);
    }
    /* the best baseline of each cell, then the paired comparisons */
    for (int cell = 0; cell < r->n / nP; cell++) {
        int best = -1;
        for (int p = 0; p < s->n_base; p++) {
            int row = cell * nP + p;
            if (!route_kind_is_balancer(s->baselines[p]) || r->rows[row].reference ||
                !isfinite(r->rows[row].tpot_p50.mean))
                continue;
            if (best < 0 || r->rows[row].tpot_p50.mean < r->rows[best].tpot_p50.mean)
                best = row;
        }
        for (int p = 0; p < nP; p++) {
            grid_row *g = &r->rows[cell * nP + p];
            g->best_baseline = best;
            g->vs_best_pct = g->distinct_vs_best_pct = (grid_stat){NAN, NAN, NAN};
            g->p99_vs_best_pct = g->tps_vs_best_pct = (grid_stat){NAN, NAN, NAN};
            if (best < 0)
                continue;
            const double *a = st->raw + (size_t)(cell * nP + p) * nS * M_N;
            const double *b = st->raw + (size_t)best * nS * M_N;
            paired_pct(a, b, nS, M_TPOT50, &g->vs_best_pct);
            paired_pct(a, b, nS, M_DISTINCT, &g->distinct_vs_best_pct);
            paired_pct(a, b, nS, M_TPOT99, &g->p99_vs_best_pct);
            paired_pct(a, b, nS, M_TPS, &g->tps_vs_best_pct);
        }
    }
    return 0;
}

/* Without s->all: the one split's models (into the result) and shares. */
static int prepare_fixed(grid_run_state *st, char *err, size_t errlen)
{
    const grid_spec *s = st->s;
    grid_ctx *ctx = &st->fixed;
    ctx->calib = s->calib;
    ctx->eval = s->eval;
    ctx->models = st->r->models;
    ctx->owned = st->r->model_owned;
    if (domain_shares(s, ctx, err, errlen) < 0)
        return -1;
    return fit_models(s, ctx, 0, err, errlen);
}

int grid_run(const grid_spec *s, grid_result *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    double t0 = now_s();
    if (check_spec(s, err, errlen) < 0)
        return -1;
    grid_run_state st = {.s = s, .r = out};
    st.n_policies = policies_per_cell(s);
    st.n_rates = s->n_rates ? s->n_rates : 1;
    out->n_seeds = s->n_seeds;
    out->resplit = s->all != NULL;
    out->first_seed = s->cfg.seed;
    out->steady = s->cfg.arrivals != SIM_ARRIVE_CLOSED || s->n_rates > 0;
    for (int i = 0; i < s->n_rates; i++)   /* a rate <= 0 keeps cfg's arrivals */
        out->steady &= s->cfg.arrivals != SIM_ARRIVE_CLOSED || s->rates[i] > 0;
    out->n = s->n_workers * st.n_rates * st.n_policies;
    out->rows = calloc((size_t)out->n, sizeof *out->rows);
    out->models = calloc((size_t)s->n_workers, sizeof *out->models);
    out->model_owned = calloc((size_t)s->n_workers, 1);
    out->n_models = s->n_workers;
    st.raw = malloc((size_t)out->n * (size_t)s->n_seeds * M_N * sizeof *st.raw);
    if (s->all) {
        size_t nm = (size_t)s->n_seeds * (size_t)s->n_workers;
        out->seed_models = calloc(nm, sizeof *out->seed_models);
        out->seed_owned = calloc(nm, 1);
    }
    int rc = (out->rows && st.raw && out->models && out->model_owned &&
              (!s->all || (out->seed_models && out->seed_owned)))
                 ? 0 : eldr_errf(err, errlen, "grid: out of memory");
    if (rc == 0 && !s->all)
        rc = prepare_fixed(&st, err, errlen);
    if (rc == 0) {
        st.total = (int64_t)s->n_workers * st.n_rates * s->n_seeds;
        st.tasks = s->all ? s->n_seeds : st.total;
        /* the cells one at a time (redrawing splits, a seed's split and
         * fits first), each one's policies on the threads: one seed's
         * pools at once (on t20k without a model, seeds two at a time on
         * the threads peaked 255 MB higher and ran no faster) */
        st.cell_threads = par_threads(s->threads, st.n_policies);
        pthread_mutex_init(&st.lock, NULL);
        par_run(1, worker_main, &st);
        pthread_mutex_destroy(&st.lock);
        if (st.failed == -2)
            rc = (eldr_errf(err, errlen, "grid: cancelled"), -2);
        else if (st.failed)
            rc = eldr_errf(err, errlen, "%s", st.err);
    }
    if (rc == 0)
        rc = summarise(&st, err, errlen);
    free(st.raw);
    free(st.fixed.shares);
    if (rc != 0)
        grid_result_free(out);
    else
        out->seconds = now_s() - t0;
    return rc;
}

void grid_result_free(grid_result *r)
{
    for (int i = 0; r->rows && i < r->n; i++) {
        free(r->rows[i].tpot_p50_ms);
        free(r->rows[i].tpot_p99_ms_seed);
        free(r->rows[i].tokens_per_s_seed);
    }
    free(r->rows);
    for (int i = 0; r->models && i < r->n_models; i++)
        if (r->model_owned && r->model_owned[i])
            model_free(r->models[i]);
    free(r->models);
    free(r->model_owned);
    for (int i = 0; r->seed_models && i < r->n_seeds * r->n_models; i++)
        if (r->seed_owned && r->seed_owned[i])
            model_free(r->seed_models[i]);
    free(r->seed_models);
    free(r->seed_owned);
    memset(r, 0, sizeof *r);
}

void grid_widen(const grid_stat *ci, int n_seeds, int m, grid_stat *out)
{
    *out = *ci;
    if (m <= 1 || n_seeds < 2 || !isfinite(ci->hi))
        return;
    /* the 95% half-width was t975 * se: rescale to the corrected quantile */
    int df = n_seeds - 1;
    double half = (ci->hi - ci->lo) / 2;
    double wide = half * stats_t_quantile(1 - 0.025 / m, df) / stats_t975(df);
    out->lo = out->mean - wide;
    out->hi = out->mean + wide;
}

void grid_bonferroni(const grid_row *g, int m, grid_stat *out)
{
    grid_widen(&g->vs_best_pct, g->n_seeds, m, out);
}

int grid_kind_is_candidate(route_kind k)
{
    return route_kind_has_centroids(k) || k == ROUTE_ELDR_COST;
}

int grid_row_is_baseline(const grid_row *g)
{
    return !grid_kind_is_candidate(g->kind) && !g->reference;
}

void grid_setting_name(const grid_row *g, char *buf, size_t n)
{
    if (g->kind == ROUTE_ELDR_COST)
        snprintf(buf, n, "eldr-cost");
    else
        snprintf(buf, n, "%stau %g", g->kind == ROUTE_ELDR_ONLINE ? "eldr-online, " : "",
                 g->tau);
}

int grid_gains(const grid_stat *ci, double min_gain_pct)
{
    return isfinite(ci->hi) && ci->hi < 0 && ci->hi <= -min_gain_pct;
}

void grid_throughput_phrase(const grid_result *r, char *buf, size_t n)
{
    if (r->steady)
        snprintf(buf, n, "throughput at steady state: the first %.0f%% of arrivals (warm-up) "
                 "and the drain after the last arrival cut", 100 * GRID_WARMUP_FRAC);
    else
        snprintf(buf, n, "throughput over the whole run (closed loop: no arrival schedule)");
}

int grid_should_resplit(const split_spec *sp, int n_seeds)
{
    return n_seeds > 1 && !sp->pinned && sp->mode != SPLIT_HEAD && sp->size != 0;
}

void grid_ci_covers(int n_seeds, uint64_t first_seed, int resplit, const split_spec *sp,
                    const char *fixed_why, char *buf, size_t n)
{
    unsigned long long a = (unsigned long long)first_seed,
                       b = (unsigned long long)first_seed + (unsigned long long)n_seeds - 1;
    if (n_seeds < 2) {
        snprintf(buf, n, "one seed (%llu): no interval", a);
        return;
    }
    if (resplit) {
        snprintf(buf, n, "95%% CI over %d seeds (%llu-%llu), each drawing its arrivals and its "
                 "%s calibration split", n_seeds, a, b, split_mode_name(sp->mode));
        return;
    }
    char why[96];
    if (fixed_why)
        snprintf(why, sizeof why, "%s", fixed_why);
    else if (sp->mode == SPLIT_HEAD)
        snprintf(why, sizeof why, "the head split");
    else if (sp->size == 0)
        snprintf(why, sizeof why, "no split");
    else
        snprintf(why, sizeof why, "one %s split, seed %llu (pinned)",
                 split_mode_name(sp->mode), (unsigned long long)sp->seed);
    snprintf(buf, n, "95%% CI over %d arrival seeds (%llu-%llu); %s: the split's own "
             "variation is not in it", n_seeds, a, b, why);
}

void grid_spec_policies(grid_spec *s, int K, const int *kinds, int n_kinds, const double *taus,
                        int n_taus)
{
    s->workers[0] = K;
    s->n_workers = 1;
    s->n_base = 0;
    s->reference_only = 1;
    for (int i = 0; i < n_kinds; i++) {
        route_kind kind = (route_kind)kinds[i];
        if (kind == ROUTE_ELDR_COST)
            s->cost = 1;           /* a candidate row, after the taus */
        else if (!route_kind_has_centroids(kind))
            s->baselines[s->n_base++] = kind;
        else {
            s->online |= kind == ROUTE_ELDR_ONLINE;
            memcpy(s->taus, taus, (size_t)n_taus * sizeof *taus);
            s->n_taus = n_taus;
        }
    }
}

void grid_spec_resplit(grid_spec *s, const trace_t *all, const split_spec *sp, int K,
                       uint64_t seed)
{
    s->all = all;
    s->split = *sp;
    model_fit_opts_default(&s->fit, K);
    s->fit.seed = seed;
    if (!all->decode_counts)
        s->fit.layers = MODEL_LAYERS_ALL;
}
