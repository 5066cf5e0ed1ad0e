/* dash_data.c - the dashboard's numbers: load and split the trace, fit or
 * load the model, the calibration sizes and scatter, the rho curve, and
 * simulation runs digested into per-worker histories (dash.h). Nothing
 * here draws; everything here may run on the what-if thread, reading the
 * dash_t but never writing it (dash_open excepted). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "dash.h"
#include "dash_cache.h"
#include "dash_free.h"
#include "dash_tokens.h"
#include "insample.h"
#include "par.h"
#include "err.h"
#include "kmeans.h"
#include "layersel.h"
#include "live.h"
#include "rho.h"
#include "sha256.h"

static const char *const VIEW_NAMES[VIEW_N] = {"overview", "balance", "heatmap", "queues",
                                               "scatter", "rho", "decisions", "drift",
                                               "tradeoff"};
static const route_kind BASE_KINDS[DASH_N_BASE] = {ROUTE_RANDOM, ROUTE_RR, ROUTE_JSQ,
                                                   ROUTE_P2C};

const char *dash_view_name(int v)
{
    return v >= 0 && v < VIEW_N ? VIEW_NAMES[v] : "?";
}

int dash_view_parse(const char *name)
{
    for (int v = 0; v < VIEW_N; v++)
        if (!strcmp(name, VIEW_NAMES[v]))
            return v;
    return -1;
}

void dash_opts_default(dash_opts *o)
{
    memset(o, 0, sizeof *o);
    o->K = 4;
    split_spec_default(&o->split);
    o->seed = 1;
    o->seeds = DASH_SEEDS;
    o->pool_cache = SIM_DEFAULT_POOL_CACHE;
}

static void report(dash_progress_fn fn, void *ctx, const char *stage, double frac)
{
    if (fn)
        fn(ctx, stage, frac);
}

/* ---- simulation runs ---- */

/* What a run's on_step callback gathers. */
/* Progress within a run, for a long one (19,000 rows of the reference
 * geometry take seconds): every PROGRESS_STEPS steps the run's simulated
 * time over the last arrival goes to tick(tick_ctx, slot, frac). */
#define PROGRESS_STEPS 4096
typedef void (*run_tick_fn)(void *ctx, int slot, double frac);

typedef struct step_log {
    int K, L;
    double *u_sum;               /* [K][L] */
    int64_t *steps;              /* [K] */
    struct step_rec { double t, dt; int32_t worker, B; } *rec;
    size_t n, cap;
    int oom;
    run_tick_fn tick;            /* may be NULL */
    void *tick_ctx;
    int slot;
    double t_last;               /* the last arrival, > 0 */
} step_log;

static void on_step(void *ctx, int worker, double t, double dt, int B, const int *U, int L,
                    int64_t kv)
{
    (void)kv;
    step_log *g = ctx;
    if (worker < 0 || worker >= g->K)
        return;
    for (int l = 0; l < L && l < g->L; l++)
        g->u_sum[(size_t)worker * g->L + l] += U[l];
    g->steps[worker]++;
    if (g->tick && g->n % PROGRESS_STEPS == 0)
        g->tick(g->tick_ctx, g->slot, t < g->t_last ? t / g->t_last : 1);
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 4096;
        void *p = realloc(g->rec, cap * sizeof *g->rec);
        if (!p) {
            g->oom = 1;
            return;
        }
        g->rec = p;
        g->cap = cap;
    }
    g->rec[g->n++] = (struct step_rec){t, dt, worker, B};
}

/* Add value over [a, b) to the bins of row (width bw from t0), weighted
 * by the overlap; divided by bw later, this is a time average. */
static void add_interval(double *row, int nbins, double t0, double bw, double a, double b,
                         double value)
{
    if (!(b > a) || value == 0)
        return;
    int i0 = (int)floor((a - t0) / bw), i1 = (int)floor((b - t0) / bw);
    if (i0 < 0)
        i0 = 0;
    if (i1 >= nbins)
        i1 = nbins - 1;
    for (int i = i0; i <= i1; i++) {
        double lo = t0 + i * bw, hi = lo + bw;
        double ov = (b < hi ? b : hi) - (a > lo ? a : lo);
        if (ov > 0)
            row[i] += value * ov;
    }
}

/* Histories: time-weighted mean in-flight and batch per bin. */
static int digest_histories(dash_sim *s, const step_log *g, double t0, double t1)
{
    int K = s->K, nb = DASH_BINS;
    double bw = (t1 - t0) / nb;
    if (!(bw > 0))
        bw = 1e-9;
    double *inf = eldr_calloc((size_t)K * nb, sizeof *inf);
    double *run = eldr_calloc((size_t)K * nb, sizeof *run);
    double *last_t = eldr_calloc((size_t)K, sizeof *last_t);
    int32_t *last_v = eldr_calloc((size_t)K, sizeof *last_v);
    s->inflight = eldr_calloc((size_t)K * nb, sizeof *s->inflight);
    s->running = eldr_calloc((size_t)K * nb, sizeof *s->running);
    int rc = -1;
    if (!inf || !run || !last_t || !last_v || !s->inflight || !s->running)
        goto done;
    for (int w = 0; w < K; w++)
        last_t[w] = t0;
    for (int64_t i = 0; i < s->res.n_series; i++) {
        const sim_point *p = &s->res.series[i];
        if (p->worker < 0 || p->worker >= K)
            continue;
        add_interval(inf + (size_t)p->worker * nb, nb, t0, bw, last_t[p->worker], p->t,
                     last_v[p->worker]);
        last_t[p->worker] = p->t;
        last_v[p->worker] = p->inflight;
    }
    for (int w = 0; w < K; w++)
        add_interval(inf + (size_t)w * nb, nb, t0, bw, last_t[w], t1, last_v[w]);
    for (size_t i = 0; i < g->n; i++)
        add_interval(run + (size_t)g->rec[i].worker * nb, nb, t0, bw, g->rec[i].t,
                     g->rec[i].t + g->rec[i].dt, g->rec[i].B);
    for (size_t i = 0; i < (size_t)K * nb; i++) {
        s->inflight[i] = (float)(inf[i] / bw);
        s->running[i] = (float)(run[i] / bw);
    }
    s->nbins = nb;
    rc = 0;
done:
    free(inf);
    free(run);
    free(last_t);
    free(last_v);
    return rc;
}

/* p[l][e]: the mean over the simulated requests of the share of a
 * request's decode tokens that use expert e in layer l; from the trace's
 * decode_counts, or else (per token, not per request) from the run's
 * heat: activations over tokens, tokens = activations / top-k. */
static int activation_probs(const dash_t *d, const trace_t *t, const dash_sim *s, double *p)
{
    int L = d->L, E = d->E;
    size_t LE = (size_t)L * E;
    /* the evaluation rows as an index of the whole trace: its counts */
    const int64_t *at = t == d->eval ? d->eval_rows : NULL;
    const trace_t *src = at ? d->all : t;
    if (src->decode_counts && t->decode_tokens) {
        int64_t n = 0;
        for (int64_t r = 0; r < t->n; r++) {
            if (t->decode_tokens[r] <= 0)
                continue;
            const uint16_t *c = src->decode_counts + (size_t)(at ? at[r] : r) * LE;
            for (size_t i = 0; i < LE; i++)
                p[i] += (double)c[i] / t->decode_tokens[r];
            n++;
        }
        for (size_t i = 0; i < LE && n; i++)
            p[i] /= n;
        return n > 0;
    }
    if (!s->res.heat || d->k < 1)
        return 0;
    for (int l = 0; l < L; l++) {
        double act = 0;
        for (int e = 0; e < E; e++) {
            double v = 0;
            for (int k = 0; k < s->K; k++)
                v += (double)s->res.heat[((size_t)k * L + l) * E + e];
            p[(size_t)l * E + e] = v;
            act += v;
        }
        double tokens = act / d->k;
        for (int e = 0; e < E; e++)
            p[(size_t)l * E + e] = tokens > 0 ? p[(size_t)l * E + e] / tokens : 0;
    }
    return 1;
}

/* layer_expected and the two overall means, from the recorded steps. */
static int digest_expected(const dash_t *d, const trace_t *t, dash_sim *s, const step_log *g)
{
    int K = s->K, L = s->L, E = s->E, bmax = 0;
    for (size_t i = 0; i < g->n; i++)
        bmax = g->rec[i].B > bmax ? g->rec[i].B : bmax;
    double *p = eldr_calloc((size_t)L * E, sizeof *p);
    double *table = eldr_calloc((size_t)(bmax + 1) * L, sizeof *table);   /* [B][L] */
    double *sum = eldr_calloc((size_t)K * L, sizeof *sum);
    int64_t *steps = eldr_calloc((size_t)K, sizeof *steps);
    s->layer_expected = eldr_calloc((size_t)K * L, sizeof *s->layer_expected);
    int rc = -1;
    if (!p || !table || !sum || !steps || !s->layer_expected)
        goto done;
    rc = 0;
    if (!activation_probs(d, t, s, p)) {   /* nothing to compare with: NaN */
        for (size_t i = 0; i < (size_t)K * L; i++)
            s->layer_expected[i] = NAN;
        s->expected_all = NAN;
        goto done;
    }
    for (int B = 1; B <= bmax; B++)
        for (int l = 0; l < L; l++) {
            double u = 0;
            for (int e = 0; e < E; e++)
                u += 1 - pow(1 - p[(size_t)l * E + e], B);
            table[(size_t)B * L + l] = u;
        }
    for (size_t i = 0; i < g->n; i++) {
        int w = g->rec[i].worker, B = g->rec[i].B;
        steps[w]++;
        for (int l = 0; l < L; l++)
            sum[(size_t)w * L + l] += table[(size_t)B * L + l];
    }
    double all = 0, allu = 0;
    int64_t nall = 0;
    for (int w = 0; w < K; w++) {
        for (int l = 0; l < L; l++) {
            s->layer_expected[(size_t)w * L + l] =
                steps[w] ? sum[(size_t)w * L + l] / steps[w] : 0;
            all += sum[(size_t)w * L + l];
            allu += g->u_sum[(size_t)w * L + l];
        }
        nall += steps[w];
    }
    s->expected_all = nall ? all / ((double)nall * L) : NAN;
    s->distinct_all = nall ? allu / ((double)nall * L) : NAN;
done:
    free(p);
    free(table);
    free(sum);
    free(steps);
    return rc;
}

static int digest(const dash_t *d, const trace_t *t, dash_sim *s, const step_log *g, char *err,
                  size_t errlen)
{
    int K = s->K, L = s->L;
    s->routed = eldr_calloc((size_t)K, sizeof *s->routed);
    s->layer_distinct = eldr_calloc((size_t)K * L, sizeof *s->layer_distinct);
    if (!s->routed || !s->layer_distinct || g->oom)
        return eldr_errf(err, errlen, "dash: out of memory digesting the simulation");
    for (int64_t i = 0; i < s->res.n; i++)
        if (s->res.req[i].worker >= 0 && s->res.req[i].worker < K)
            s->routed[s->res.req[i].worker]++;
    for (int w = 0; w < K; w++)
        for (int l = 0; l < L; l++)
            s->layer_distinct[(size_t)w * L + l] =
                g->steps[w] ? g->u_sum[(size_t)w * L + l] / (double)g->steps[w] : 0;
    double t0 = s->res.n ? s->res.req[0].arrival : 0;
    for (int64_t i = 1; i < s->res.n; i++)
        if (s->res.req[i].arrival < t0)
            t0 = s->res.req[i].arrival;
    s->t_end = s->res.makespan_s;
    if (digest_histories(s, g, t0, s->t_end))
        return eldr_errf(err, errlen, "dash: out of memory for the queue histories");
    if (digest_expected(d, t, s, g))
        return eldr_errf(err, errlen, "dash: out of memory for the random-batch expectation");
    return 0;
}

/* A run's step log on workload w (tick, may be NULL, gets its progress). */
static int log_init(step_log *g, const dash_t *d, const sim_workload *w, int K, run_tick_fn tick,
                    void *tick_ctx, int slot, char *err, size_t errlen)
{
    double t_last = w->arrival && w->n > 0 ? w->arrival[w->n - 1] : 0;
    *g = (step_log){.K = K, .L = d->L, .tick = t_last > 0 ? tick : NULL, .tick_ctx = tick_ctx,
                    .slot = slot, .t_last = t_last};
    g->u_sum = eldr_calloc((size_t)K * d->L, sizeof *g->u_sum);
    g->steps = eldr_calloc((size_t)K, sizeof *g->steps);
    if (!g->u_sum || !g->steps)
        return eldr_errf(err, errlen, "dash: out of memory for a simulation");
    return 0;
}

static void log_free(step_log *g)
{
    free(g->u_sum);
    free(g->steps);
    free(g->rec);
    memset(g, 0, sizeof *g);
}

/* The dash_sim of a finished run of (policy, tau) at K over t's rows:
 * res moved in (zeroed), digested with its step log g. */
static int sim_of(const dash_t *d, const trace_t *t, route_kind policy, double tau, int K,
                  sim_result *res, const step_log *g, dash_sim **out, char *err, size_t errlen)
{
    *out = NULL;
    dash_sim *s = calloc(1, sizeof *s);
    if (!s) {
        sim_result_free(res);
        return eldr_errf(err, errlen, "dash: out of memory for a simulation");
    }
    s->policy = policy;
    s->tau = tau;
    s->K = K;
    s->L = d->L;
    s->E = d->E;
    s->res = *res;
    memset(res, 0, sizeof *res);
    if (digest(d, t, s, g, err, errlen)) {
        dash_sim_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

/* One run on workload w over trace t's rows (the rows of a level). */
static int simulate_on(const dash_t *d, const sim_workload *w, const trace_t *t,
                       const model_t *m, route_kind policy, double tau, int K,
                       volatile int *cancel, run_tick_fn tick, void *tick_ctx, int slot,
                       dash_sim **out, char *err, size_t errlen)
{
    *out = NULL;
    route_policy p;
    int have_p = 0, rc = -1;
    step_log g;
    sim_result res;
    if (log_init(&g, d, w, K, tick, tick_ctx, slot, err, errlen))
        goto done;
    if (route_policy_init(&p, policy, K, d->opts.seed, err, errlen))
        goto done;
    have_p = 1;
    if (policy == ROUTE_ELDR &&
        route_policy_set_centroids(&p, m->centroids, sig_dim(&m->recipe), tau, 1, err, errlen))
        goto done;
    if ((rc = sim_run_cancel(w, &p, on_step, &g, cancel, &res, err, errlen)))
        goto done;
    rc = sim_of(d, t, policy, tau, K, &res, &g, out, err, errlen);
done:
    if (have_p)
        route_policy_free(&p);
    log_free(&g);
    return rc;
}

static const trace_t *level_trace(const dash_t *d, dash_level level)
{
    return level == DASH_LEVEL_FIRST && d->rows[DASH_LEVEL_FIRST].t
               ? d->rows[DASH_LEVEL_FIRST].t : d->eval;
}

dash_level dash_first_level(const dash_t *d)
{
    return d->rows[DASH_LEVEL_FIRST].t ? DASH_LEVEL_FIRST : DASH_LEVEL_FULL;
}

int dash_simulate(const dash_t *d, const model_t *m, route_kind policy, double tau, int K,
                  dash_level level, volatile int *cancel, dash_sim **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    if (!d->rows[level].have_work)
        return eldr_errf(err, errlen, "dash: no workload for these rows");
    return simulate_on(d, &d->rows[level].work, level_trace(d, level), m, policy, tau, K,
                       cancel, NULL, NULL, 0, out, err, errlen);
}

/* The runs of one setting, shared by up to two threads: each takes the
 * next run; the first failure stops the others at their next check. */
typedef struct sim_set {
    const dash_t *d;
    const sim_workload *w;
    const trace_t *t;
    const model_t *m;
    route_kind kinds[1 + DASH_N_BASE];
    double tau;
    int n, next, rc;
    dash_sim *out[1 + DASH_N_BASE];
    volatile int *cancel;
    dash_progress_fn progress;
    void *pctx;
    const char *stage;
    double part[1 + DASH_N_BASE]; /* under mu: each run's share done */
    step_log log[1 + DASH_N_BASE];  /* dash_refine: each run's, in the grid */
    pthread_mutex_t mu;
    char err[ELDR_ERRLEN];
} sim_set;

/* A run's progress: the set's share done, reported. */
static void set_tick(void *ctx, int slot, double frac)
{
    sim_set *S = ctx;
    pthread_mutex_lock(&S->mu);
    S->part[slot] = frac;
    double sum = 0;
    for (int i = 0; i < S->n; i++)
        sum += S->part[i];
    report(S->progress, S->pctx, S->stage, sum / S->n);
    pthread_mutex_unlock(&S->mu);
}

static void *sim_set_main(void *arg)
{
    sim_set *S = arg;
    char err[ELDR_ERRLEN];
    for (;;) {
        pthread_mutex_lock(&S->mu);
        int i = S->rc || (S->cancel && *S->cancel) ? S->n : S->next++;
        pthread_mutex_unlock(&S->mu);
        if (i >= S->n)
            return NULL;
        dash_sim *out = NULL;
        /* a run polls the caller's flag (a failure elsewhere only stops
         * the next runs from starting) */
        int rc = simulate_on(S->d, S->w, S->t, S->m, S->kinds[i], S->tau, S->m->K, S->cancel,
                             S->progress ? set_tick : NULL, S, i, &out, err, sizeof err);
        pthread_mutex_lock(&S->mu);
        S->out[i] = out;
        if (rc && !S->rc) {
            S->rc = rc;
            snprintf(S->err, sizeof S->err, "%s", err);
        }
        pthread_mutex_unlock(&S->mu);
        if (!rc)
            set_tick(S, i, 1);
    }
}

static int simulate_set_on(const dash_t *d, const sim_workload *w, const trace_t *t,
                           const model_t *m, route_kind policy, double tau,
                           volatile int *cancel, dash_progress_fn progress, void *pctx,
                           dash_sim **cur, dash_sim **base, char *err, size_t errlen)
{
    sim_set S = {.d = d, .w = w, .t = t, .m = m, .tau = tau, .n = base ? 1 + DASH_N_BASE : 1,
                 .cancel = cancel, .progress = progress, .pctx = pctx,
                 .stage = t == d->eval ? "every row" : "simulate"};
    S.kinds[0] = policy;
    for (int i = 0; i < DASH_N_BASE; i++)
        S.kinds[1 + i] = BASE_KINDS[i];
    pthread_mutex_init(&S.mu, NULL);
    report(progress, pctx, S.stage, 0);
    par_run(par_threads(2, S.n), sim_set_main, &S);
    pthread_mutex_destroy(&S.mu);
    if (!S.rc && cancel && *cancel) {
        S.rc = SIM_CANCELLED;
        snprintf(S.err, sizeof S.err, "cancelled");
    }
    if (S.rc) {
        for (int i = 0; i < S.n; i++)
            dash_sim_free(S.out[i]);
        eldr_errf(err, errlen, "%s", S.err);
        return S.rc == SIM_CANCELLED ? SIM_CANCELLED : -1;
    }
    *cur = S.out[0];
    for (int i = 0; base && i < DASH_N_BASE; i++)
        base[i] = S.out[1 + i];
    return 0;
}

int dash_simulate_set(const dash_t *d, const model_t *m, route_kind policy, double tau,
                      dash_level level, volatile int *cancel, dash_progress_fn progress,
                      void *pctx, dash_sim **cur, dash_sim **base, char *err, size_t errlen)
{
    if (!d->rows[level].have_work)
        return eldr_errf(err, errlen, "dash: no workload for these rows");
    return simulate_set_on(d, &d->rows[level].work, level_trace(d, level), m, policy, tau,
                           cancel, progress, pctx, cur, base, err, errlen);
}

/* ---- the header's confidence intervals ---- */

int dash_grid_splits(const dash_t *d, grid_spec *g)
{
    if (!d->all || (d->home && d->home->origin == DASH_FIT_FILE))
        return 0;
    g->all = d->all;
    g->split = d->opts.split;
    /* the default fit's recipe, selected anew on each seed's split */
    model_fit_opts_default(&g->fit, 1);
    g->fit.seed = d->opts.seed;
    if (!d->all->decode_counts)
        g->fit.layers = MODEL_LAYERS_ALL;
    return 1;
}

typedef struct ci_progress {
    dash_progress_fn fn;
    void *ctx;
} ci_progress;

static void ci_tick(void *ctx, int64_t done, int64_t total)
{
    ci_progress *p = ctx;
    report(p->fn, p->ctx, "seeds", total > 0 ? (double)done / total : -1);
}

/* The grid's seed-0 hook (grid_seed0) for the refine: run i of the set
 * S (the policy, then the baselines shown) logs its steps like a run of
 * the dashboard's own, and is digested into S->out[i] as it ends. */
static int refine_begin(void *ctx, int i, const sim_workload *w, sim_step_fn *fn, void **fn_ctx,
                        char *err, size_t errlen)
{
    sim_set *S = ctx;
    if (log_init(&S->log[i], S->d, w, S->m->K, S->progress ? set_tick : NULL, S, i, err,
                 errlen)) {
        log_free(&S->log[i]);
        return -1;
    }
    *fn = on_step;
    *fn_ctx = &S->log[i];
    return 0;
}

static int refine_end(void *ctx, int i, void *fn_ctx, sim_result *res, char *err,
                      size_t errlen)
{
    sim_set *S = ctx;
    int rc = 0;
    if (res) {
        rc = sim_of(S->d, S->t, S->kinds[i], S->tau, S->m->K, res, fn_ctx, &S->out[i], err,
                    errlen);
        if (!rc)
            set_tick(S, i, 1);
    }
    log_free(fn_ctx);
    return rc;
}

/* The refined runs of (policy, tau) on m: the grid over opts.seeds seeds
 * (at least one) whose seed 0 is the views' runs (hook; the set S takes
 * them), and with two seeds or more the header's CIs into *out. Returns
 * -2 when cancelled. */
static int refine_grid(const dash_t *d, const model_t *m, route_kind policy, double tau,
                       volatile int *cancel, dash_progress_fn progress, void *pctx,
                       const grid_seed0 *hook, dash_ci *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    grid_spec g;
    grid_spec_default(&g);
    g.calib = d->calib;
    g.eval = d->eval;
    g.model = m;
    g.cfg = d->cfg;              /* seed i runs with cfg.seed + i: seed 0 is ours */
    g.n_seeds = d->opts.seeds > 1 ? d->opts.seeds : 1;
    g.seed0 = hook;
    dash_grid_splits(d, &g);     /* m serves seed 0, whose split it was fitted on */
    g.cfg.tokens = dash_tokens_of(d, g.all ? g.all : g.eval);
    g.workers[0] = m->K;
    g.n_workers = 1;
    /* the baselines of the verdict (GRID_DEFAULT_BASELINES, as view 7 and
     * eldr advise): the overview also shows random, which is no baseline */
    if (policy == ROUTE_ELDR) {
        g.taus[0] = tau;
        g.n_taus = 1;
    }
    g.cost = policy == ROUTE_ELDR_COST;   /* the cost rule's row, beside the baselines */
    ci_progress cp = {progress, pctx};
    g.progress = ci_tick;
    g.progress_ctx = &cp;
    g.cancel = cancel;
    grid_result r;
    int rc = grid_run(&g, &r, err, errlen);
    if (rc)
        return rc;
    if (d->opts.seeds < 2) {     /* one seed: the views' runs only, no interval */
        grid_result_free(&r);
        return 0;
    }
    int row = -1;
    for (int i = 0; i < r.n && row < 0; i++)
        if (r.rows[i].kind == policy)
            row = i;
    const grid_row *p = row >= 0 ? &r.rows[row] : NULL;
    if (p && p->best_baseline >= 0) {
        const grid_row *b = &r.rows[p->best_baseline];
        out->valid = 1;
        out->policy = policy;
        out->tau = tau;
        out->K = m->K;
        out->n_seeds = r.n_seeds;
        out->best = b->kind;
        out->tpot_p50 = p->tpot_p50;
        out->tpot_p99 = p->tpot_p99;
        out->distinct = p->distinct;
        out->vs_best_pct = p->vs_best_pct;
        out->distinct_vs_best_pct = p->distinct_vs_best_pct;
        out->p99_vs_best_pct = p->p99_vs_best_pct;
        out->tpot_p50_first = p->tpot_p50_ms[0];
        out->resplit = r.resplit;
        out->seconds = r.seconds;
    }
    grid_result_free(&r);
    return 0;
}

void dash_trail_add(dash_t *d)
{
    if (!d->cur)
        return;
    /* one entry a setting: the refined numbers replace its first look's */
    const dash_trail *last = d->n_trail ? &d->trail[d->n_trail - 1] : NULL;
    if (last && last->policy == d->cur->policy && last->K == d->cur->K &&
        last->tau == d->cur->tau)
        d->n_trail--;
    if (d->n_trail == DASH_TRAIL_MAX) {
        memmove(d->trail, d->trail + 1, (DASH_TRAIL_MAX - 1) * sizeof *d->trail);
        d->n_trail--;
    }
    dash_trail *t = &d->trail[d->n_trail++];
    const dash_sim *b = dash_best_base(d);
    t->policy = d->cur->policy;
    t->tau = d->cur->tau;
    t->K = d->cur->K;
    t->tpot_p50 = d->cur->res.tpot_p50_ms;
    if (d->ci.valid) {   /* the header's and the trade-off cell's number */
        t->tpot_p50 = d->ci.tpot_p50.mean;
        t->vs_best = d->ci.vs_best_pct.mean;
        t->vs_half = (d->ci.vs_best_pct.hi - d->ci.vs_best_pct.lo) / 2;
    } else {
        t->vs_best = b && b->res.tpot_p50_ms > 0
            ? 100.0 * (t->tpot_p50 - b->res.tpot_p50_ms) / b->res.tpot_p50_ms : NAN;
        t->vs_half = NAN;
    }
}

const dash_ci *dash_shown_ci(const dash_t *d)
{
    const dash_ci *ci = &d->ci;
    const dash_sim *s = d->cur;
    if (!ci->valid || !s || ci->policy != s->policy || ci->K != s->K ||
        (s->policy == ROUTE_ELDR && fabs(ci->tau - s->tau) > 1e-12))
        return NULL;
    return ci;
}

const dash_sim *dash_best_base(const dash_t *d)
{
    /* the header's baseline when it has its seeds: the overview's star,
     * the JSON and the header must name one and the same */
    const dash_ci *ci = dash_shown_ci(d);
    for (int i = 0; ci && i < DASH_N_BASE; i++)
        if (d->base[i] && d->base[i]->policy == ci->best)
            return d->base[i];
    const dash_sim *best = NULL;
    for (int i = 0; i < DASH_N_BASE; i++)
        if (d->base[i] && grid_is_default_baseline(d->base[i]->policy) &&
            (!best || d->base[i]->res.tpot_p50_ms < best->res.tpot_p50_ms))
            best = d->base[i];
    return best;
}

int dash_cursor_bin(const dash_t *d, const dash_sim *s)
{
    if (!s || s->nbins < 1)
        return 0;
    int b = (int)floor(d->cursor * (s->nbins - 1) + 0.5);
    return b < 0 ? 0 : b >= s->nbins ? s->nbins - 1 : b;
}

double dash_inflight_now(const dash_t *d, const dash_sim *s, int w)
{
    if (!s || !s->inflight || w < 0 || w >= s->K)
        return 0;
    return s->inflight[(size_t)w * s->nbins + dash_cursor_bin(d, s)];
}

/* ---- fits ---- */

void dash_fit_release(const dash_t *d, dash_fit *f)
{
    if (f && f != d->home)
        dash_fit_free(f);
}

/* Calibration signatures under m's recipe: sig [n][dim], zero [n]. */
static int calib_signatures(const dash_t *d, const model_t *m, float **sig, uint8_t **zero,
                            char *err, size_t errlen)
{
    size_t dim = sig_dim(&m->recipe);
    *sig = eldr_calloc((size_t)d->calib->n * dim, sizeof **sig);
    *zero = eldr_calloc((size_t)d->calib->n, 1);
    if (!*sig || !*zero) {
        free(*sig);
        free(*zero);
        *sig = NULL;
        *zero = NULL;
        return eldr_errf(err, errlen, "dash: out of memory for %lld calibration signatures",
                         (long long)d->calib->n);
    }
    if (sig_build_batch(d->calib, &m->recipe, NULL, d->calib->n, *sig, NULL, *zero, err,
                        errlen)) {
        free(*sig);
        free(*zero);
        *sig = NULL;
        *zero = NULL;
        return -1;
    }
    return 0;
}

/* 2-D PCA of an evenly strided sample of the non-zero signatures, with
 * the centroids on the same axes. Failure leaves a note, not an error:
 * the dashboard stays useful without a picture. */
static void make_scatter(dash_fit *f, const float *sig, const uint8_t *zero, const int *assign,
                         int64_t n, size_t dim)
{
    int64_t nz = 0;
    for (int64_t i = 0; i < n; i++)
        nz += !zero[i];
    if (nz < 3 || dim < 2) {
        snprintf(f->note, sizeof f->note, "too few signatures for a scatter (%lld)",
                 (long long)nz);
        return;
    }
    int m = nz < DASH_SCATTER_MAX ? (int)nz : DASH_SCATTER_MAX;
    float *x = eldr_calloc((size_t)m * dim, sizeof *x);
    int *cl = eldr_calloc((size_t)m, sizeof *cl);
    double *cent = eldr_calloc((size_t)f->model->K * 2, sizeof *cent);
    pca_t p;
    char err[ELDR_ERRLEN];
    if (!x || !cl || !cent) {
        snprintf(f->note, sizeof f->note, "out of memory for the scatter");
        goto fail;
    }
    /* sample j is the (j * nz / m)-th non-zero row: one pass, ascending */
    for (int64_t i = 0, seen = 0, j = 0; i < n && j < m; i++) {
        if (zero[i])
            continue;
        if (seen++ != (int64_t)j * nz / m)
            continue;
        memcpy(x + (size_t)j * dim, sig + (size_t)i * dim, dim * sizeof *x);
        cl[j] = assign ? assign[i] : model_nearest(f->model, sig + (size_t)i * dim, NULL);
        j++;
    }
    if (pca_fit(x, m, (int)dim, 2, &p, err, sizeof err)) {
        snprintf(f->note, sizeof f->note, "%s", err);
        goto fail;
    }
    f->pts = malloc((size_t)m * 2 * sizeof *f->pts);
    if (!f->pts) {
        pca_free(&p);
        goto fail;
    }
    memcpy(f->pts, p.scores, (size_t)m * 2 * sizeof *f->pts);
    for (int k = 0; k < f->model->K; k++)
        pca_project(&p, f->model->centroids + (size_t)k * dim, cent + 2 * k);
    for (int c = 0; c < 2; c++)
        f->explained[c] = p.total_var > 0 ? p.var[c] / p.total_var : 0;
    pca_free(&p);
    free(x);
    f->n_pts = m;
    f->pt_cluster = cl;
    f->cent = cent;
    return;
fail:
    free(x);
    free(cl);
    free(cent);
}

/* A dash_fit around model m (taken over) from calibration signatures.
 * A fit made here passes its assignment ([n_calib], -1 for zero rows):
 * the sizes are its members. A model file passes NULL: its sizes are the
 * file's own, and the calibration rows are re-assigned to the nearest
 * centroid into a separate count (the file's fit saw other rows, or the
 * same rows split differently, so the two must not be confused). */
static int build_fit(const dash_t *d, model_t *m, dash_origin origin, const float *sig,
                     const uint8_t *zero, const int *assign, dash_fit **out, char *err,
                     size_t errlen)
{
    dash_fit *f = calloc(1, sizeof *f);
    if (f)
        f->sizes = eldr_calloc((size_t)m->K, sizeof *f->sizes);
    if (f && !assign)
        f->reassigned = eldr_calloc((size_t)m->K, sizeof *f->reassigned);
    if (!f || !f->sizes || (!assign && !f->reassigned)) {
        if (f) {
            free(f->sizes);
            free(f);
        }
        model_free(m);
        return eldr_errf(err, errlen, "dash: out of memory");
    }
    f->model = m;
    f->origin = origin;
    size_t dim = sig_dim(&m->recipe);
    int64_t *count = assign ? f->sizes : f->reassigned;
    int64_t n = 0;
    for (int64_t i = 0; i < d->calib->n; i++) {
        if (zero[i])
            continue;
        int c = assign ? assign[i] : model_nearest(m, sig + (size_t)i * dim, NULL);
        if (c >= 0 && c < m->K) {
            count[c]++;
            n++;
        }
    }
    if (assign) {
        f->have_sizes = 1;
        f->n_fit = n;
    } else {
        f->n_reassigned = n;
        f->have_sizes = m->sizes != NULL;
        for (int k = 0; k < m->K && m->sizes; k++) {
            f->sizes[k] = m->sizes[k];
            f->n_fit += m->sizes[k];
        }
    }
    make_scatter(f, sig, zero, assign, d->calib->n, dim);
    *out = f;
    return 0;
}

typedef struct km_progress {
    dash_progress_fn fn;
    void *ctx;
    int iters;
    const char *stage;
} km_progress;

static void km_tick(void *ctx, int iter, double objective)
{
    (void)objective;
    km_progress *k = ctx;
    report(k->fn, k->ctx, k->stage, (double)iter / k->iters);
}

int dash_refit(const dash_t *d, int K, volatile int *cancel, dash_progress_fn progress,
               void *pctx, dash_fit **out, char *err, size_t errlen)
{
    *out = NULL;
    const model_t *old = d->fit->model;
    size_t dim = sig_dim(&old->recipe);
    float *sig = NULL, *x = NULL;
    uint8_t *zero = NULL;
    int *assign = NULL, rc = -1;
    kmeans_result km = {0};
    int have_km = 0;
    model_t *m = NULL;
    report(progress, pctx, "signatures", 0);
    if (calib_signatures(d, old, &sig, &zero, err, errlen))
        return -1;
    int64_t n = d->calib->n, nz = 0;
    for (int64_t i = 0; i < n; i++)
        nz += !zero[i];
    if (K < 1 || K > nz || K > ROUTE_MAX_WORKERS) {
        eldr_errf(err, errlen, "K = %d: must be between 1 and %lld (the calibration "
                  "signatures)", K, (long long)(nz < ROUTE_MAX_WORKERS ? nz : ROUTE_MAX_WORKERS));
        goto done;
    }
    x = eldr_calloc((size_t)nz * dim, sizeof *x);
    assign = eldr_calloc((size_t)n, sizeof *assign);
    if (!x || !assign) {
        eldr_errf(err, errlen, "dash: out of memory for the refit");
        goto done;
    }
    for (int64_t i = 0, j = 0; i < n; i++)
        if (!zero[i])
            memcpy(x + (size_t)j++ * dim, sig + (size_t)i * dim, dim * sizeof *x);
    kmeans_opts ko;
    kmeans_opts_default(&ko, K);
    ko.seed = old->seed ? old->seed : d->opts.seed;
    km_progress kp = {progress, pctx, ko.iters, "k-means"};
    ko.progress = km_tick;
    ko.progress_ctx = &kp;
    ko.cancel = cancel;
    int kr = kmeans_fit(x, (int)nz, (int)dim, &ko, &km, err, errlen);
    if (kr) {
        rc = kr;
        goto done;
    }
    have_km = 1;
    m = model_new(&old->recipe, old->k, K, err, errlen);
    if (!m)
        goto done;
    memcpy(m->centroids, km.centroids, (size_t)K * dim * sizeof *m->centroids);
    m->tau = old->tau;
    m->seed = ko.seed;
    m->rho = old->rho;
    m->n_star = old->n_star;
    m->objective = km.objective;
    m->iters = km.iterations;
    m->balanced = 1;
    m->calib_rows = n;
    m->fit_rows = nz;
    m->zero_rows = n - nz;
    snprintf(m->layer_select, sizeof m->layer_select, "%s", old->layer_select);
    for (int64_t i = 0, j = 0; i < n; i++)
        assign[i] = zero[i] ? -1 : km.assign[j++];
    {
        int64_t sz[ROUTE_MAX_WORKERS] = {0};
        for (int64_t i = 0; i < n; i++)
            if (assign[i] >= 0 && assign[i] < K)
                sz[assign[i]]++;
        if (model_set_sizes(m, sz, err, errlen))
            goto done;
    }
    rc = build_fit(d, m, DASH_FIT_REFIT, sig, zero, assign, out, err, errlen);
    m = NULL;
done:
    model_free(m);
    if (have_km)
        kmeans_result_free(&km);
    free(sig);
    free(zero);
    free(x);
    free(assign);
    return rc;
}

/* ---- opening ---- */

void dash_trade_clear(dash_trade *t)
{
    if (t->state == DASH_TRADE_DONE)
        grid_result_free(&t->g);
    model_free(t->model);
    memset(t, 0, sizeof *t);
}

void dash_free(dash_t *d)
{
    if (!d)
        return;
    dash_trade_clear(&d->trade);
    for (int l = 0; l < DASH_N_LEVELS; l++) {
        if (d->rows[l].have_work)
            sim_workload_free(&d->rows[l].work);
        if (l == DASH_LEVEL_FIRST)
            trace_free(d->rows[l].t);
    }
    trace_free(d->calib);
    trace_free(d->eval);
    free(d->eval_rows);
    trace_free(d->all);
    dash_tokens_free(&d->tok);
    dash_fit_release(d, d->fit);
    dash_fit_free(d->home);
    free(d->curve);
    free(d->order);
    dash_sim_free(d->cur);
    for (int i = 0; i < DASH_N_BASE; i++)
        dash_sim_free(d->base[i]);
    dash_live_free(d->live);
    memset(d, 0, sizeof *d);
}

/* A model fitted on this very trace file (its calibration SHA-256 is the
 * file's) may be simulated on rows it was fitted on: the numbers are then
 * in-sample, and the overview says how many (insample.h, as `eldr sim`
 * warns). */
static void check_in_sample(dash_t *d, const model_t *m, const trace_t *t, const split_rows *r)
{
    char sha[13];
    int64_t both = insample_rows_hex(m, d->sha256, t, r->eval, r->n_eval, sha);
    if (both > 0)
        snprintf(d->in_sample, sizeof d->in_sample, "%s: %lld of %lld simulated rows "
                 "calibrated it (%s)", both == r->n_eval ? "in-sample" : "partly in-sample",
                 (long long)both, (long long)r->n_eval, m->calib_split);
    else if (both < 0)
        snprintf(d->in_sample, sizeof d->in_sample, "maybe in-sample: the model was fitted on "
                 "%lld rows of this trace", (long long)(m->calib_rows < 0 ? 0 : m->calib_rows));
}

/* The core's split (split.h), the same rows `eldr sim` would use with
 * the same options: seeded random by default, since traces are often
 * written in label order and "the first rows" would then calibrate on
 * other domains than the ones simulated. */
static int split(dash_t *d, trace_t *t, int keep, const model_t *m, char *err, size_t errlen)
{
    split_rows rows;
    if (split_make(t, &d->opts.split, &rows, err, errlen) < 0)
        return -1;
    check_in_sample(d, m, t, &rows);
    d->split_mode = rows.mode;
    d->split_seed = rows.seed;
    d->n_calib = rows.n_calib;
    if (rows.n_calib < 2 || rows.n_eval < 1) {
        split_rows_free(&rows);
        return eldr_errf(err, errlen, "%s: %lld rows are too few to calibrate on some and "
                         "simulate the rest", d->trace_name, (long long)t->n);
    }
    int rc;
    int64_t first = d->opts.first_rows > 0 ? d->opts.first_rows : DASH_FIRST_ROWS;
    if (keep && rows.n_eval > first) {
        /* t stays (d->all): the calibration rows copied, the evaluation
         * rows an index of t, read in place (docs/memory.md); a first
         * look and the trade-off read copies of their own rows */
        d->calib = trace_select(t, rows.calib, rows.n_calib, err, errlen);
        d->eval = d->calib ? trace_select_some(t, rows.eval, rows.n_eval, TRACE_DROP_COUNTS,
                                               err, errlen)
                           : NULL;
        rc = d->eval ? 0 : -1;
        if (rc == 0) {
            d->eval_rows = rows.eval;
            rows.eval = NULL;
        }
        /* the workloads read all in place: its reader (row i: file row i) */
        if (rc == 0)
            rc = dash_tokens_add(d, t, NULL, err, errlen);
    } else if (keep) {           /* few rows: copies of both parts */
        rc = split_apply(t, &rows, &d->calib, &d->eval, err, errlen);
        /* the CIs' seeds simulate all, the views eval: a reader each */
        if (rc == 0)
            rc = dash_tokens_add(d, t, NULL, err, errlen);
        if (rc == 0)
            rc = dash_tokens_add(d, d->eval, rows.eval, err, errlen);
    } else {
        /* t is ours to shrink: the calibration rows copied out, the
         * evaluation rows kept in place (as `eldr sim` does): no second
         * copy of the trace at once (docs/memory.md) */
        d->calib = trace_select(t, rows.calib, rows.n_calib, err, errlen);
        rc = d->calib && trace_keep_rows(t, rows.eval, rows.n_eval, err, errlen) == 0 ? 0 : -1;
        if (rc == 0)
            d->eval = t;
        if (rc == 0)             /* eval's row i is file row rows.eval[i] */
            rc = dash_tokens_add(d, t, rows.eval, err, errlen);
    }
    if (rc == 0 && d->opts.read_tokens && rows.eval) {
        d->tok.eval_file = rows.eval;   /* a first look's picks name eval rows */
        rows.eval = NULL;
    }
    split_rows_free(&rows);
    return rc < 0 || !d->calib || !d->eval ? -1 : 0;
}

const char *dash_irrelevant(const dash_t *d, char *buf, size_t n)
{
    const dash_sim *s = d->cur;
    if (!s || d->live)
        return NULL;
    if (s->K <= 1)
        snprintf(buf, n, "routing is moot: K 1, one worker takes every request");
    else if (s->res.mean_batch < 1.5)
        snprintf(buf, n, "routing is moot: mean batch %.1f, requests decode alone; raise "
                 "the rate (--rate)", s->res.mean_batch);
    else if (s->policy == ROUTE_ELDR && d->tau >= ROUTE_TAU_MAX)
        snprintf(buf, n, "tau %.2f: the band holds every worker, ELDR is join-shortest-queue",
                 d->tau);
    else
        return NULL;
    return buf;
}

void dash_split_text(const dash_t *d, char *buf, size_t n)
{
    char how[48];
    if (d->split_mode == SPLIT_HEAD)
        snprintf(how, sizeof how, "head (the first rows)");
    else
        snprintf(how, sizeof how, "%s (seed %llu)", split_mode_name(d->split_mode),
                 (unsigned long long)d->split_seed);
    snprintf(buf, n, "%s: %lld calibrate, %lld simulated", how, (long long)d->n_calib,
             (long long)(d->n_rows - d->n_calib));
}

/* The greedy curve for a loaded model's variant on the calibration rows. */
static void compute_curve(dash_t *d, sig_variant v)
{
    float *idf = NULL;
    rho_pairs pr;
    layersel_result sel;
    char err[ELDR_ERRLEN];
    if (!d->calib->decode_counts) {
        snprintf(d->curve_note, sizeof d->curve_note, "no rho curve: the trace has no "
                 "decode_counts");
        return;
    }
    idf = eldr_calloc((size_t)d->L * d->E, sizeof *idf);
    if (!idf || sig_idf_fit(d->calib, NULL, d->calib->n, idf, err, sizeof err) ||
        rho_pairs_sample(d->calib->n, RHO_DEFAULT_PAIRS, RHO_DEFAULT_SEED, &pr, err,
                         sizeof err)) {
        snprintf(d->curve_note, sizeof d->curve_note, "no rho curve: %s", idf ? err : "no memory");
        free(idf);
        return;
    }
    if (layersel_run(d->calib, v, idf, &pr, 0, NULL, &sel, err, sizeof err)) {
        snprintf(d->curve_note, sizeof d->curve_note, "no rho curve: %s", err);
    } else {
        d->curve = sel.curve;
        d->order = sel.order;
        d->curve_n = sel.L;
        d->curve_nstar = sel.n_star;
        sel.curve = NULL;
        sel.order = NULL;
        layersel_result_free(&sel);
    }
    rho_pairs_free(&pr);
    free(idf);
}

typedef struct fit_progress {
    dash_progress_fn fn;
    void *ctx;
} fit_progress;

static void fit_tick(void *ctx, int iter, double objective)
{
    (void)objective;
    fit_progress *f = ctx;
    report(f->fn, f->ctx, "fit: k-means", (double)iter / KMEANS_DEFAULT_ITERS);
}

/* Fit the default recipe on the calibration rows (no -m given). */
static int fit_default(dash_t *d, dash_progress_fn progress, void *pctx, char *err,
                       size_t errlen)
{
    model_fit_opts o;
    model_fit_opts_default(&o, d->opts.K);
    o.seed = d->opts.seed;
    if (!d->calib->decode_counts)
        o.layers = MODEL_LAYERS_ALL;
    fit_progress fp = {progress, pctx};
    o.progress = fit_tick;
    o.progress_ctx = &fp;
    o.calib_file = d->trace_name;
    model_t *m = NULL;
    model_fit_report rep = {0};
    /* the same trace content, split, K and seed fit the same model: the
     * cache has it from an earlier open (dash_cache.h) */
    char key[DASH_CACHE_KEY];
    int keyed = dash_fit_cache_key(d, key);
    if (!keyed ||
        dash_fit_cache_load(d, key, &m, &rep, d->cache_note, sizeof d->cache_note) <= 0) {
        report(progress, pctx, "fit: layer selection", -1);
        if (model_fit(d->calib, &o, &m, &rep, err, errlen))
            return -1;
        char note[ELDR_ERRLEN + 64];
        if (keyed && dash_fit_cache_store(d, key, m, &rep, note, sizeof note) &&
            !d->cache_note[0])
            snprintf(d->cache_note, sizeof d->cache_note, "%s", note);
    }
    if (rep.curve) {
        d->curve = rep.curve;
        d->order = rep.order;
        d->curve_n = d->L;
        d->curve_nstar = m->n_star;
        rep.curve = NULL;
        rep.order = NULL;
    } else {
        snprintf(d->curve_note, sizeof d->curve_note, "no rho curve: the trace has no "
                 "decode_counts (all layers used)");
    }
    float *sig = NULL;
    uint8_t *zero = NULL;
    int rc = calib_signatures(d, m, &sig, &zero, err, errlen);
    if (!rc)
        rc = build_fit(d, m, DASH_FIT_DEFAULT, sig, zero, rep.assign, &d->fit, err, errlen);
    else
        model_free(m);
    free(sig);
    free(zero);
    model_fit_report_free(&rep);
    return rc;
}

static int adopt_model(dash_t *d, model_t *m, dash_progress_fn progress, void *pctx,
                       char *err, size_t errlen)
{
    if (m->recipe.L != d->L || m->recipe.E != d->E) {
        int L = m->recipe.L, E = m->recipe.E;
        model_free(m);
        return eldr_errf(err, errlen, "%s: model geometry L=%d E=%d does not match the "
                         "trace's L=%d E=%d", d->model_name, L, E, d->L, d->E);
    }
    if (m->K > ROUTE_MAX_WORKERS) {
        model_free(m);
        return eldr_errf(err, errlen, "%s: K=%d workers exceeds %d", d->model_name, m->K,
                         ROUTE_MAX_WORKERS);
    }
    report(progress, pctx, "rho curve", -1);
    compute_curve(d, m->recipe.variant);
    float *sig = NULL;
    uint8_t *zero = NULL;
    if (calib_signatures(d, m, &sig, &zero, err, errlen)) {
        model_free(m);
        return -1;
    }
    int rc = build_fit(d, m, DASH_FIT_FILE, sig, zero, NULL, &d->fit, err, errlen);
    free(sig);
    free(zero);
    return rc;
}

static int setup_config(dash_t *d, char *err, size_t errlen)
{
    sim_config_default(&d->cfg);
    d->cfg.seed = d->opts.seed;
    /* the grid's cells (the CIs, the trade-off) keep their signatures up
     * to the cap, above it build them at each arrival (the same floats) */
    d->cfg.sig_cache = SIM_DEFAULT_SIG_CACHE;
    d->cfg.pool_cache = d->opts.pool_cache;   /* the grid's cells take it too */
    if (d->opts.rate > 0) {
        d->cfg.arrivals = SIM_ARRIVE_POISSON;
        d->cfg.rate = d->opts.rate;
        snprintf(d->arrivals, sizeof d->arrivals, "Poisson %.3g req/s", d->cfg.rate);
    } else if (sim_default_arrivals(&d->cfg, d->eval)) {   /* the one default rule */
        snprintf(d->arrivals, sizeof d->arrivals, "Poisson %.3g req/s (default: no arrival_s)",
                 d->cfg.rate);
    } else {
        snprintf(d->arrivals, sizeof d->arrivals, "the trace's arrival_s");
    }
    if (!d->eval->decode_tokens)
        return eldr_errf(err, errlen, "%s: the simulation needs decode_tokens (how many "
                         "tokens each request emits)", d->trace_name);
    return 0;
}

static int cmp_arrival(const void *a, const void *b, void *ctx)
{
    const double *t = ctx;
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    return t[i] < t[j] ? -1 : t[i] > t[j] ? 1 : (i > j) - (i < j);
}

static int cmp_row(const void *a, const void *b)
{
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    return (i > j) - (i < j);
}

/* The first look's rows: at most opts.first_rows of the eval rows. With
 * the trace's own arrival times a draw would thin the load (the same
 * span, fewer requests), so those are the first arrivals; otherwise the
 * arrivals are generated at the same rate whatever the rows, and a
 * stratified draw (every label its share; split.h) keeps the mix. */
static int first_rows(dash_t *d, char *err, size_t errlen)
{
    dash_rows *r = &d->rows[DASH_LEVEL_FIRST];
    int64_t n = d->eval->n, c = d->opts.first_rows > 0 ? d->opts.first_rows : DASH_FIRST_ROWS;
    if (n <= c)
        return 0;
    int64_t *pick = NULL;
    split_rows sr = {0};
    if (d->cfg.arrivals == SIM_ARRIVE_TRACE && d->eval->arrival_s) {
        pick = eldr_calloc((size_t)n, sizeof *pick);
        if (!pick)
            return eldr_errf(err, errlen, "dash: out of memory for the first look's rows");
        for (int64_t i = 0; i < n; i++)
            pick[i] = i;
        qsort_r(pick, (size_t)n, sizeof *pick, cmp_arrival, d->eval->arrival_s);
        qsort(pick, (size_t)c, sizeof *pick, cmp_row);
        snprintf(r->how, sizeof r->how, "the first %lld arrivals of %lld rows", (long long)c,
                 (long long)n);
    } else {
        if (split_make_count(d->eval, SPLIT_STRATIFIED, d->opts.seed, c, &sr, err, errlen) < 0)
            return -1;
        pick = sr.calib;
        snprintf(r->how, sizeof r->how, "%s %lld of %lld rows",
                 sr.mode == SPLIT_STRATIFIED ? "stratified" : "random", (long long)c,
                 (long long)n);
    }
    if (d->eval_rows)            /* ascending rows of eval: ascending rows of all */
        for (int64_t i = 0; i < c; i++)
            pick[i] = d->eval_rows[pick[i]];
    r->t = trace_select(d->eval_rows ? d->all : d->eval, pick, c, err, errlen);
    if (r->t && d->opts.read_tokens && !d->eval_rows) {   /* picks of eval: file rows */
        for (int64_t i = 0; i < c; i++)
            pick[i] = dash_tokens_eval_file_row(d, pick[i]);
    }
    /* the copy holds no token rows (its source had none): its own reader */
    if (r->t && dash_tokens_add(d, r->t, pick, err, errlen)) {
        trace_free(r->t);
        r->t = NULL;
    }
    if (pick == sr.calib)
        split_rows_free(&sr);
    else
        free(pick);
    return r->t ? 0 : -1;
}

/* The dashboard's own workloads keep no signature matrix: the views read
 * none, and only the eldr run of a set routes by them, so building each at
 * its arrival costs what building them up front did (docs/memory.md). */
static void own_config(const dash_t *d, sim_config *c)
{
    *c = d->cfg;
    c->sig_cache = 0;
}

static int build_work(dash_t *d, dash_level level, char *err, size_t errlen)
{
    dash_rows *r = &d->rows[level];
    sim_config cfg;
    own_config(d, &cfg);
    const trace_t *t = level_trace(d, level);
    const sig_recipe *rc = &d->fit->model->recipe;
    cfg.tokens = dash_tokens_of(d, t == d->eval && d->eval_rows ? d->all : t);
    if (t == d->eval && d->eval_rows
            ? sim_workload_init_rows(&r->work, d->all, d->eval_rows, t->n, &cfg, rc, err, errlen)
            : sim_workload_init(&r->work, t, &cfg, rc, err, errlen))
        return -1;
    r->have_work = 1;
    return 0;
}

int dash_first_work(dash_t *d, char *err, size_t errlen)
{
    if (!d->first_made) {
        if (first_rows(d, err, errlen))
            return -1;
        d->first_made = 1;
    }
    dash_level lv = dash_first_level(d);
    return d->rows[lv].have_work ? 0 : build_work(d, lv, err, errlen);
}

/* The refined results of (policy, tau) on m, from the cache or computed:
 * every simulated row, seed 0 for the views, opts.seeds for the CIs. */
int dash_refine(const dash_t *d, const model_t *m, route_kind policy, double tau,
                volatile int *cancel, dash_progress_fn progress, void *pctx,
                dash_refined *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char key[DASH_CACHE_KEY];
    int keyed = dash_cache_key(d, m, policy, tau, key);
    if (keyed) {
        if (dash_cache_load(d, key, out, out->cache_note, sizeof out->cache_note) > 0)
            return 0;
    }
    /* one set of runs: the grid's seed 0 is the views' (grid_seed0), not
     * simulated once more here */
    sim_set S = {.d = d, .t = d->eval, .m = m, .tau = tau, .n = 1 + DASH_N_BASE,
                 .cancel = cancel, .progress = progress, .pctx = pctx, .stage = "every row"};
    grid_seed0 h = {.n = S.n, .begin = refine_begin, .end = refine_end, .ctx = &S};
    S.kinds[0] = policy;
    for (int i = 0; i < DASH_N_BASE; i++)
        S.kinds[1 + i] = BASE_KINDS[i];
    for (int i = 0; i < S.n; i++) {
        h.kind[i] = S.kinds[i];
        h.tau[i] = tau;
    }
    pthread_mutex_init(&S.mu, NULL);
    report(progress, pctx, S.stage, 0);
    int rc = refine_grid(d, m, policy, tau, cancel, progress, pctx, &h, &out->ci, err, errlen);
    pthread_mutex_destroy(&S.mu);
    for (int i = 0; rc == 0 && i < S.n; i++)
        if (!S.out[i])
            rc = eldr_errf(err, errlen, "dash: the grid ran no %s for the views",
                           route_kind_name(S.kinds[i]));
    if (rc) {
        for (int i = 0; i < S.n; i++)
            dash_sim_free(S.out[i]);
        return rc == -2 ? SIM_CANCELLED : -1;
    }
    out->cur = S.out[0];
    for (int i = 0; i < DASH_N_BASE; i++)
        out->base[i] = S.out[1 + i];
    if (keyed)
        dash_cache_store(d, key, out, out->cache_note, sizeof out->cache_note);
    return 0;
}

void dash_refined_free(dash_refined *r)
{
    dash_sim_free(r->cur);
    for (int i = 0; i < DASH_N_BASE; i++)
        dash_sim_free(r->base[i]);
    memset(r, 0, sizeof *r);
}

void dash_refined_apply(dash_t *d, dash_refined *r)
{
    dash_sim_free(d->cur);
    d->cur = r->cur;
    for (int i = 0; i < DASH_N_BASE; i++) {
        dash_sim_free(d->base[i]);
        d->base[i] = r->base[i];
    }
    d->ci = r->ci;
    if (r->cache_note[0])        /* else an earlier note (the fit's) stays */
        snprintf(d->cache_note, sizeof d->cache_note, "%s", r->cache_note);
    d->level = DASH_LEVEL_FULL;
    d->refined = 1;
    d->from_cache = r->from_cache;
    r->cur = NULL;
    memset(r->base, 0, sizeof r->base);
    dash_refined_free(r);
}

void dash_rests_on(const dash_t *d, char *buf, size_t n)
{
    int64_t rows = d->eval ? d->eval->n : 0;
    int seeds = d->ci.valid ? d->ci.n_seeds : 1;
    if (d->level == DASH_LEVEL_FIRST && d->rows[DASH_LEVEL_FIRST].t)
        snprintf(buf, n, "first look: %s, 1 seed", d->rows[DASH_LEVEL_FIRST].how);
    else if (!d->refined && d->opts.seeds > 1)
        snprintf(buf, n, "first look: %lld rows, 1 seed", (long long)rows);
    else
        snprintf(buf, n, "%lld rows, %d seed%s", (long long)rows, seeds, seeds == 1 ? "" : "s");
}

static const char *base_name(const char *path);

int dash_open_first(dash_t *d, const dash_opts *o, trace_t *t, model_t *m,
                    dash_progress_fn progress, void *pctx, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->opts = *o;
    d->opts.sha256 = NULL;       /* the caller's buffer: d->sha256 keeps it */
    d->policy = ROUTE_ELDR;
    d->cursor = 0.5;
    d->progress = -1;
    snprintf(d->trace_name, sizeof d->trace_name, "%s",
             o->trace_path ? base_name(o->trace_path) : "trace");
    snprintf(d->model_name, sizeof d->model_name, "%s",
             o->model_path ? base_name(o->model_path) : "");
    d->L = t->L;
    d->E = t->E;
    d->k = t->k;
    d->n_rows = t->n;
    /* the file's content: the cache's key and the in-sample check; read
     * once (a 166 MB trace takes about a second) */
    if (o->sha256 && strlen(o->sha256) == 64) {
        snprintf(d->sha256, sizeof d->sha256, "%s", o->sha256);
    } else if (o->trace_path && (!o->no_cache || (m && m->calib_sha256[0]))) {
        report(progress, pctx, "hash trace", -1);
        char e2[ELDR_ERRLEN];
        if (sha256_file(o->trace_path, d->sha256, e2, sizeof e2) < 0)
            d->sha256[0] = '\0';
    }
    /* one seed draws the workload and the split unless --split-seed pins it */
    if (!d->opts.split.pinned)
        d->opts.split.seed = d->opts.seed;
    int keep = !m && grid_should_resplit(&d->opts.split, d->opts.seeds);
    int rc = split(d, t, keep, m, err, errlen);
    if (rc == 0 && keep)
        d->all = t;              /* the header's seeds redraw the split */
    else if (d->eval != t)       /* else it became the evaluation rows */
        trace_free(t);
    if (rc) {
        model_free(m);
        return -1;
    }
    rc = m ? adopt_model(d, m, progress, pctx, err, errlen)
           : fit_default(d, progress, pctx, err, errlen);
    if (rc)
        return -1;
    d->home = d->fit;
    d->tau = d->fit->model->tau;
    d->rows[DASH_LEVEL_FULL].t = d->eval;
    if (setup_config(d, err, errlen))
        return -1;
    /* the what-if changes look first at the lowest level: its workload
     * is built even when the cache answers, unless the caller refines at
     * once (then the first what-if change builds it) */
    if (!d->opts.no_first && dash_first_work(d, err, errlen))
        return -1;
    dash_level lv = dash_first_level(d);
    const model_t *fm = d->fit->model;
    dash_refined r;
    char key[DASH_CACHE_KEY];
    if (dash_cache_key(d, fm, d->policy, d->tau, key)) {
        report(progress, pctx, "cache", -1);
        int hit = dash_cache_load(d, key, &r, d->cache_note, sizeof d->cache_note);
        if (hit > 0) {
            dash_refined_apply(d, &r);
            dash_trail_add(d);
            report(progress, pctx, "ready", 1);
            return 0;
        }
    }
    d->level = lv;
    if (d->opts.no_first) {      /* the caller refines at once */
        report(progress, pctx, "ready", 1);
        return 0;
    }
    if (dash_simulate_set(d, fm, d->policy, d->tau, lv, NULL, progress, pctx, &d->cur, d->base,
                          err, errlen))
        return -1;
    d->refined = lv == DASH_LEVEL_FULL && d->opts.seeds < 2;
    dash_trail_add(d);
    report(progress, pctx, "ready", 1);
    return 0;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int dash_open_trace(dash_t *d, const dash_opts *o, trace_t *t, model_t *m,
                    dash_progress_fn progress, void *pctx, char *err, size_t errlen)
{
    dash_opts oo = *o;
    oo.no_first = 1;
    if (dash_open_first(d, &oo, t, m, progress, pctx, err, errlen))
        return -1;
    if (d->refined)
        return 0;
    dash_refined r;
    if (dash_refine(d, d->fit->model, d->policy, d->tau, NULL, progress, pctx, &r, err,
                    errlen))
        return -1;
    dash_refined_apply(d, &r);
    dash_trail_add(d);
    return 0;
}

int dash_open(dash_t *d, const dash_opts *o, dash_progress_fn progress, void *pctx,
              char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    trace_t *t = NULL;
    model_t *m = NULL;
    report(progress, pctx, "load trace", -1);
    dash_opts oo = *o;
    if (dash_load_trace(o->trace_path, &t, &oo.read_tokens, err, errlen))
        return -1;
    if (o->model_path && model_load(o->model_path, &m, err, errlen)) {
        trace_free(t);
        return -1;
    }
    return dash_open_trace(d, &oo, t, m, progress, pctx, err, errlen);
}
