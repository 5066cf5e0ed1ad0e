/* sim.c - the workload and the event loop of the decode simulator
 * (sim.h). Events are arrivals and step ends; the next one is the
 * earliest (an arrival first on equal times, then the lowest worker), so
 * a run is a deterministic function of the workload and the policy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "online.h"
#include "costrule.h"
#include "sim_distinct.h"
#include "sim_internal.h"

void sim_config_default(sim_config *c)
{
    memset(c, 0, sizeof *c);
    c->max_batch = SIM_DEFAULT_MAX_BATCH;
    c->arrivals = SIM_ARRIVE_TRACE;
    c->seed = 1;
    c->sample_pool = SIM_DEFAULT_SAMPLE_POOL;
    c->pool_cache = SIM_DEFAULT_POOL_CACHE;
    c->sig_cache = SIZE_MAX;
    cost_model_default(&c->cost);
    c->refit_every = ONLINE_DEFAULT_EVERY;
    c->refit_window = ONLINE_DEFAULT_WINDOW;
    c->threads = 1;
}

/* ---- workload ---- */

static int check_config(const sim_config *c, char *err, size_t errlen)
{
    if (c->max_batch < 1)
        return eldr_errf(err, errlen, "sim: max batch %d must be >= 1", c->max_batch);
    if (c->output_tokens < 0)
        return eldr_errf(err, errlen, "sim: output tokens %d must be >= 0", c->output_tokens);
    if (c->sample_pool < 1)
        return eldr_errf(err, errlen, "sim: sample pool %d must be >= 1", c->sample_pool);
    return 0;
}

/* Above cfg.sig_cache: no matrix; the routing builds each signature at
 * arrival. Only the all-zero ones are counted now (sig_is_zero: the first
 * non-zero value ends a row). */
static int lazy_signatures(sim_workload *w, const sig_recipe *recipe, char *err,
                           size_t errlen)
{
    const trace_t *t = w->t;
    size_t cells = TRACE_CELLS(t);
    const float *g = recipe->variant == SIG_GATE_PROB    ? t->gate_prob
                     : recipe->variant == SIG_GATE_LOGIT ? t->gate_logit
                                                         : NULL;
    if (sig_variant_uses_gate(recipe->variant) && !g)
        return eldr_errf(err, errlen, "sim: variant %s needs dataset %s, the trace has none",
                         sig_variant_name(recipe->variant), sig_variant_name(recipe->variant));
    w->recipe = recipe;
    for (int64_t i = 0; i < w->n; i++) {
        int64_t row = w->row[i];
        w->n_sig_zero += sig_is_zero(recipe, trace_prefill_row(t, row),
                                     g ? g + (size_t)row * cells : NULL);
    }
    return 0;
}

static int build_signatures(sim_workload *w, const sig_recipe *recipe, char *err,
                            size_t errlen)
{
    if (recipe->L != w->L || recipe->E != w->E)
        return eldr_errf(err, errlen, "sim: the model is for %d layers x %d experts, the "
                         "trace has %d x %d", recipe->L, recipe->E, w->L, w->E);
    w->dim = sig_dim(recipe);
    if ((double)w->n * (double)w->dim * sizeof(float) > (double)w->cfg.sig_cache)
        return lazy_signatures(w, recipe, err, errlen);
    w->sig = malloc((size_t)(w->n ? w->n : 1) * w->dim * sizeof *w->sig);
    if (!w->sig)
        return eldr_errf(err, errlen, "sim: out of memory for %lld signatures of %zu floats",
                         (long long)w->n, w->dim);
    return sig_build_batch(w->t, recipe, w->row, w->n, w->sig, &w->n_sig_zero, NULL, err,
                           errlen);
}

/* Request i's place in the ascending row list (sim_workload_init_rows). */
static int keys_of(sim_workload *w, const int64_t *rows, int64_t n_rows, char *err,
                   size_t errlen)
{
    w->key = malloc((size_t)(w->n ? w->n : 1) * sizeof *w->key);
    if (!w->key)
        return eldr_errf(err, errlen, "sim: out of memory for %lld requests", (long long)w->n);
    for (int64_t i = 0; i < w->n; i++) {
        int64_t lo = 0, hi = n_rows;   /* rows[lo..hi) holds w->row[i] */
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            if (rows[mid] <= w->row[i])
                lo = mid;
            else
                hi = mid;
        }
        w->key[i] = lo;
    }
    return 0;
}

static int init(sim_workload *w, const trace_t *t, const int64_t *rows, int64_t n_rows,
                const sim_config *c, const sig_recipe *recipe, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    if (check_config(c, err, errlen))
        return -1;
    if (!c->output_tokens && !t->decode_tokens)
        return eldr_errf(err, errlen, "sim: the trace has no decode_tokens; give the output "
                         "length (--output-tokens N)");
    int64_t n = rows ? n_rows : t->n;
    for (int64_t j = 0; rows && j < n; j++)
        if (rows[j] < 0 || rows[j] >= t->n || (j > 0 && rows[j] <= rows[j - 1]))
            return eldr_errf(err, errlen, "sim: row list entry %lld (row %lld) is not an "
                             "ascending row of the trace's %lld", (long long)j,
                             (long long)rows[j], (long long)t->n);
    w->t = t;
    w->cfg = *c;
    w->L = t->L;
    w->E = t->E;
    w->k = t->k;
    /* the trace's own rows win; a reader serves a trace without them */
    int held = t->decode_experts && t->decode_offsets;
    w->cfg.tokens = held ? NULL : c->tokens;
    if (w->cfg.tokens && trace_tokens_n(w->cfg.tokens) != t->n)
        return eldr_errf(err, errlen, "sim: the token row reader serves %lld rows, the trace "
                         "has %lld", (long long)trace_tokens_n(w->cfg.tokens), (long long)t->n);
    w->recorded = held || w->cfg.tokens;
    /* the trace's rows are uint16_t; sampled ones and ones read from the
     * file need no more than a byte when E <= 256, which halves the pools
     * (and lets the pools of a larger trace fit the cache, shared by
     * every run) and the rows of the requests in flight */
    w->id_bytes = held || w->E > 256 ? 2 : 1;
    w->row = malloc((size_t)(n ? n : 1) * sizeof *w->row);
    w->out_tokens = malloc((size_t)(n ? n : 1) * sizeof *w->out_tokens);
    if (!w->row || !w->out_tokens) {
        sim_workload_free(w);
        return eldr_errf(err, errlen, "sim: out of memory for %lld requests", (long long)n);
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t r = rows ? rows[j] : j;
        int32_t out = c->output_tokens ? c->output_tokens : t->decode_tokens[r];
        if (out <= 0) {
            w->n_skipped++;
            continue;
        }
        w->row[w->n] = r;
        w->out_tokens[w->n++] = out;
        w->total_tokens += out;
    }
    if (w->n == 0) {
        sim_workload_free(w);
        return eldr_errf(err, errlen, "sim: no request has a token to decode");
    }
    /* the keys follow the arrival order; the pools are drawn by them */
    if (sim_arrivals_build(w, err, errlen) ||
        (rows && keys_of(w, rows, n, err, errlen)) ||
        (!w->recorded && sim_pools_build(w, err, errlen)) ||
        (recipe && build_signatures(w, recipe, err, errlen))) {
        sim_workload_free(w);
        return -1;
    }
    return 0;
}

int sim_workload_init(sim_workload *w, const trace_t *t, const sim_config *c,
                      const sig_recipe *recipe, char *err, size_t errlen)
{
    return init(w, t, NULL, 0, c, recipe, err, errlen);
}

int sim_workload_init_rows(sim_workload *w, const trace_t *t, const int64_t *rows,
                           int64_t n_rows, const sim_config *c, const sig_recipe *recipe,
                           char *err, size_t errlen)
{
    if (!rows || n_rows < 0)
        return eldr_errf(err, errlen, "sim: no row list");
    return init(w, t, rows, n_rows, c, recipe, err, errlen);
}

void sim_workload_free(sim_workload *w)
{
    if (!w)
        return;
    free(w->row);
    free(w->key);
    free(w->out_tokens);
    free(w->arrival);
    free(w->sig);
    free(w->pool);
    free(w->pool_off);
    memset(w, 0, sizeof *w);
}

/* ---- the event loop ---- */

typedef struct worker_state {
    int *batch;                /* workload indices decoding, nb of them */
    int nb;
    int64_t qhead, qtail;      /* FIFO of waiting requests via run.next */
    int busy;
    double t_end;              /* end of the current step */
    int64_t kv;                /* prompt + generated tokens of the batch */
    double u_sum;              /* sum over steps of sum_l U_l */
} worker_state;

typedef struct run {
    const sim_workload *w;
    route_policy *p;
    sim_result *res;
    sim_step_fn on_step;
    void *ctx;
    volatile int *cancel;      /* polled every SIM_CANCEL_EVERY events; may be NULL */
    int K, L, E, k;
    worker_state *ws;
    int *batch_mem;            /* [K][max_batch] */
    int64_t *next;             /* [n] queue links */
    int32_t *done;             /* [n] tokens emitted */
    sim_tokens *tok;           /* [n] open while decoding */
    sim_distinct distinct;     /* U_l of a step */
    int *U;                    /* [L] */
    const void **rows;         /* [max_batch] current token row of each member */
    sim_load load;
    int64_t next_arrival, finished;
    double u_total, batch_total;
    route_decision dec;
    sim_online *online;        /* eldr-online, else NULL */
    cost_state *cost;          /* eldr-cost: what the rule knows, else NULL */
    cost_req creq;             /* eldr-cost: scratch, one request's cells */
    float *sig;                /* [dim]: a signature built at arrival */
    char *err;
    size_t errlen;
} run;

static void enqueue(run *R, int wk, int64_t i)
{
    worker_state *s = &R->ws[wk];
    R->next[i] = -1;
    if (s->qtail < 0)
        s->qhead = i;
    else
        R->next[s->qtail] = i;
    s->qtail = i;
}

static int64_t dequeue(run *R, int wk)
{
    worker_state *s = &R->ws[wk];
    int64_t i = s->qhead;
    if (i >= 0) {
        s->qhead = R->next[i];
        if (s->qhead < 0)
            s->qtail = -1;
    }
    return i;
}

/* Distinct experts per layer of the batch's current tokens into R->U.
 * The members' rows lie far apart in the pool, a cache miss each: all
 * of them are asked for before the first is read. */
static void count_distinct(run *R, const worker_state *s)
{
    size_t width = (size_t)R->L * R->k;
    const void **rows = R->rows;
    for (int b = 0; b < s->nb; b++) {
        int64_t i = s->batch[b];
        const sim_tokens *tk = &R->tok[i];
        size_t bytes = width * tk->id_bytes;
        const char *row = (const char *)tk->rows + (size_t)(R->done[i] % tk->n_rows) * bytes;
        for (size_t o = 0; o < bytes; o += 64)
            __builtin_prefetch(row + o);
        rows[b] = row;
    }
    sim_distinct_count(&R->distinct, rows, s->nb, R->U);
}

/* Admit waiting requests up to max_batch, then start a step at t (or go
 * idle with nothing to do). */
static int start_step(run *R, int wk, double t)
{
    worker_state *s = &R->ws[wk];
    const sim_workload *w = R->w;
    while (s->nb < w->cfg.max_batch) {
        int64_t i = dequeue(R, wk);
        if (i < 0)
            break;
        if (sim_tokens_open(w, i, &R->tok[i], R->err, R->errlen))
            return -1;
        R->res->req[i].start = t;
        s->kv += R->w->t->prompt_tokens[w->row[i]];
        s->batch[s->nb++] = (int)i;
    }
    if (s->nb == 0) {
        s->busy = 0;
        return 0;
    }
    count_distinct(R, s);
    double dt = cost_step_time(&w->cfg.cost, R->L, R->U, s->nb, s->kv);
    if (R->on_step)
        R->on_step(R->ctx, wk, t, dt, s->nb, R->U, R->L, s->kv);
    int64_t u = 0;
    for (int l = 0; l < R->L; l++)
        u += R->U[l];
    s->u_sum += (double)u;
    R->u_total += (double)u;
    R->batch_total += s->nb;
    R->res->steps++;
    R->res->worker_steps[wk]++;
    R->res->worker_busy_s[wk] += dt;
    R->res->activations += (int64_t)s->nb * R->L * R->k;
    s->busy = 1;
    s->t_end = t + dt;
    return 0;
}

/* eldr-cost: request i's cells (from its prefill counts) into R->creq,
 * at its arrival and again at its finish (the same values: removed
 * exactly as added, with no copy kept). */
static int cost_cells(run *R, int64_t i)
{
    const sim_workload *w = R->w;
    return cost_req_set(&R->creq, trace_prefill_row(w->t, w->row[i]), R->L, R->E, R->k,
                        R->err, R->errlen);
}

static int arrive(run *R, int64_t i, double t)
{
    const sim_workload *w = R->w;
    int64_t row = w->row[i];
    const float *sig = w->sig ? w->sig + (size_t)i * w->dim : NULL;
    if (R->sig) {   /* not kept (cfg.sig_cache): built now, the same floats */
        const trace_t *t = w->t;
        size_t cells = TRACE_CELLS(t);
        const float *g = w->recipe->variant == SIG_GATE_PROB    ? t->gate_prob
                         : w->recipe->variant == SIG_GATE_LOGIT ? t->gate_logit
                                                                : NULL;
        if (sig_from_counts(w->recipe, trace_prefill_row(t, row), g ? g + (size_t)row * cells : NULL,
                            R->sig, R->err, R->errlen) < 0)
            return -1;
        sig = R->sig;
    }
    int label = w->t->label ? w->t->label[row] : -1;
    int wk;
    if (R->cost) {
        /* the rule sees the prefill counts of what is in flight, never
         * the batch's sampled experts or the output lengths */
        if (cost_cells(R, i))
            return -1;
        wk = cost_decide(R->cost, &R->creq, R->load.inflight, NULL, &R->dec, NULL);
        cost_state_add(R->cost, wk, &R->creq);
    } else {
        wk = route_decide(R->p, sig, label, R->load.inflight, &R->dec);
    }
    sim_request *q = &R->res->req[i];
    *q = (sim_request){sim_key(w, i), wk, R->dec.rule, 0, t, NAN, NAN};
    R->res->rule_count[R->dec.rule]++;
    sim_load_change(&R->load, t, wk, +1);
    enqueue(R, wk, i);
    if (R->online && sig && sim_online_observe(R->online, t, sig, R->err, R->errlen) < 0)
        return -1;
    worker_state *s = &R->ws[wk];
    if (!s->busy) {
        /* wake the idle worker with an empty step ending now: arrivals at
         * the same instant (processed first) join its first batch */
        s->busy = 1;
        s->t_end = t;
    }
    return 0;
}

static int finish(run *R, int wk, int64_t i, double t)
{
    const sim_workload *w = R->w;
    if (R->cost) {
        if (cost_cells(R, i))
            return -1;
        cost_state_remove(R->cost, wk, &R->creq);
    }
    sim_request *q = &R->res->req[i];
    q->finish = t;
    q->tokens = R->done[i];
    R->res->served[wk]++;
    if (R->res->heat)
        sim_tokens_heat(&R->tok[i], R->L, R->E, R->k, R->done[i],
                        R->res->heat + (size_t)wk * R->L * R->E);
    sim_tokens_close(&R->tok[i]);
    R->ws[wk].kv -= w->t->prompt_tokens[w->row[i]] + R->done[i];
    sim_load_change(&R->load, t, wk, -1);
    R->finished++;
    return 0;
}

/* Worker wk's step ends: every member emits its token, finished ones
 * leave (in a closed loop each is replaced by the next request, routed
 * now), then the next step starts. */
static int end_step(run *R, int wk)
{
    worker_state *s = &R->ws[wk];
    double t = s->t_end;
    int freed = 0;
    s->kv += s->nb;
    for (int b = s->nb - 1; b >= 0; b--) {
        int64_t i = s->batch[b];
        if (++R->done[i] < R->w->out_tokens[i])
            continue;
        if (finish(R, wk, i, t))
            return -1;
        s->batch[b] = s->batch[--s->nb];
        freed++;
    }
    if (!R->w->arrival)
        for (; freed > 0 && R->next_arrival < R->w->n; freed--)
            if (arrive(R, R->next_arrival++, t))
                return -1;
    return start_step(R, wk, t);
}

static int loop(run *R)
{
    const sim_workload *w = R->w;
    if (!w->arrival) {
        int64_t c = w->cfg.concurrency < w->n ? w->cfg.concurrency : w->n;
        while (R->next_arrival < c)
            if (arrive(R, R->next_arrival++, 0.0))
                return -1;
    }
    for (unsigned events = 0; R->finished < w->n; events++) {
        if (R->cancel && events % SIM_CANCEL_EVERY == 0 && *R->cancel)
            return (eldr_errf(R->err, R->errlen, "cancelled"), SIM_CANCELLED);
        double ta = w->arrival && R->next_arrival < w->n ? w->arrival[R->next_arrival]
                                                         : INFINITY;
        int wk = -1;
        double te = INFINITY;
        for (int k = 0; k < R->K; k++)
            if (R->ws[k].busy && R->ws[k].t_end < te) {
                te = R->ws[k].t_end;
                wk = k;
            }
        if (ta <= te && ta < INFINITY) {
            if (arrive(R, R->next_arrival++, ta))
                return -1;
        } else if (wk >= 0) {
            if (end_step(R, wk))
                return -1;
        } else {
            return eldr_errf(R->err, R->errlen, "sim: stalled with %lld of %lld requests "
                             "finished", (long long)R->finished, (long long)w->n);
        }
    }
    return 0;
}

void sim_result_free(sim_result *r)
{
    if (!r)
        return;
    free(r->req);
    free(r->served);
    free(r->worker_steps);
    free(r->worker_busy_s);
    free(r->worker_distinct);
    free(r->inflight_mean);
    free(r->heat);
    free(r->series);
    memset(r, 0, sizeof *r);
}

static int alloc_run(run *R, const sim_workload *w, int K, char *err, size_t errlen)
{
    sim_result *res = R->res;
    size_t n = (size_t)w->n;
    res->req = calloc(n, sizeof *res->req);
    res->served = calloc((size_t)K, sizeof *res->served);
    res->worker_steps = calloc((size_t)K, sizeof *res->worker_steps);
    res->worker_busy_s = calloc((size_t)K, sizeof *res->worker_busy_s);
    res->worker_distinct = calloc((size_t)K, sizeof *res->worker_distinct);
    res->inflight_mean = calloc((size_t)K, sizeof *res->inflight_mean);
    if (!w->cfg.no_heat)
        res->heat = eldr_calloc((size_t)K * w->L * w->E, sizeof *res->heat);
    R->ws = calloc((size_t)K, sizeof *R->ws);
    R->batch_mem = eldr_calloc((size_t)K * w->cfg.max_batch, sizeof *R->batch_mem);
    R->next = calloc(n, sizeof *R->next);
    R->done = calloc(n, sizeof *R->done);
    R->tok = calloc(n, sizeof *R->tok);
    R->U = calloc((size_t)w->L, sizeof *R->U);
    R->rows = calloc((size_t)w->cfg.max_batch, sizeof *R->rows);
    if (!res->req || !res->served || !res->worker_steps || !res->worker_busy_s ||
        !res->worker_distinct || !res->inflight_mean || (!res->heat && !w->cfg.no_heat) ||
        !R->ws || !R->batch_mem || !R->next || !R->done || !R->tok || !R->U || !R->rows)
        return eldr_errf(err, errlen, "sim: out of memory for %lld requests on %d workers",
                         (long long)w->n, K);
    for (int k = 0; k < K; k++) {
        R->ws[k].batch = R->batch_mem + (size_t)k * w->cfg.max_batch;
        R->ws[k].qhead = R->ws[k].qtail = -1;
    }
    if (sim_distinct_init(&R->distinct, w->L, w->E, w->k, w->id_bytes, 1, err, errlen))
        return -1;
    return sim_load_init(&R->load, K, 2 * w->n, err, errlen);
}

static void free_run(run *R)
{
    if (R->tok)
        for (int64_t i = 0; i < R->w->n; i++)
            sim_tokens_close(&R->tok[i]);
    free(R->ws);
    free(R->batch_mem);
    free(R->next);
    free(R->done);
    free(R->tok);
    sim_distinct_free(&R->distinct);
    free(R->U);
    free(R->rows);
    free(R->sig);
    sim_load_free(&R->load);
}

/* Headline numbers from the counters of a finished run. */
static int summarise(run *R)
{
    sim_result *res = R->res;
    int K = R->K, L = R->L;
    double end = 0;
    for (int64_t i = 0; i < res->n; i++) {
        res->tokens += res->req[i].tokens;
        if (res->req[i].finish > end)
            end = res->req[i].finish;
    }
    sim_load_advance(&R->load, end);
    res->makespan_s = end;
    res->distinct_loaded = (int64_t)R->u_total;
    res->distinct_per_step = res->steps ? R->u_total / ((double)res->steps * L) : 0;
    res->reuse = R->u_total > 0 ? (double)res->activations / R->u_total : 0;
    res->mean_batch = res->steps ? R->batch_total / (double)res->steps : 0;
    res->throughput_rps = end > 0 ? (double)res->n / end : 0;
    res->tokens_per_s = end > 0 ? (double)res->tokens / end : 0;
    res->mean_in_system = end > 0 ? R->load.area_total / end : 0;
    res->imbalance = R->load.busy_t > 0 ? R->load.area_ratio / R->load.busy_t : 1;
    for (int k = 0; k < K; k++) {
        res->inflight_mean[k] = end > 0 ? R->load.area_w[k] / end : 0;
        res->worker_distinct[k] =
            res->worker_steps[k] ? R->ws[k].u_sum / ((double)res->worker_steps[k] * L) : 0;
    }
    res->series = R->load.series;
    res->n_series = R->load.n_series;
    R->load.series = NULL;
    return sim_metrics_requests(res, R->err, R->errlen);
}

int sim_run(const sim_workload *w, route_policy *p, sim_step_fn on_step, void *ctx,
            sim_result *res, char *err, size_t errlen)
{
    return sim_run_cancel(w, p, on_step, ctx, NULL, res, err, errlen);
}

int sim_run_cancel(const sim_workload *w, route_policy *p, sim_step_fn on_step, void *ctx,
                   volatile int *cancel, sim_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    if (route_kind_has_centroids(p->kind) &&
        ((!w->sig && !w->recipe) || !p->centroids || p->dim != w->dim))
        return eldr_errf(err, errlen, "sim: the %s policy needs a model whose signatures "
                         "match the workload's", route_kind_name(p->kind));
    run R = {.w = w, .p = p, .res = res, .on_step = on_step, .ctx = ctx, .cancel = cancel,
             .K = p->K, .L = w->L, .E = w->E, .k = w->k, .err = err, .errlen = errlen};
    sim_online online;
    const float *given = p->centroids;
    if (p->kind == ROUTE_ELDR_ONLINE) {
        if (sim_online_init(&online, w, p, err, errlen) < 0)
            return -1;
        R.online = &online;
    }
    cost_state cost;
    if (p->kind == ROUTE_ELDR_COST) {
        if (cost_state_init(&cost, p->K, w->L, w->E, p->cost_rule ? p->cost_rule : &w->cfg.cost,
                            w->cfg.max_batch, err, errlen) < 0)
            return -1;
        R.cost = &cost;
    }
    snprintf(res->policy, sizeof res->policy, "%s", route_kind_name(p->kind));
    res->K = p->K;
    res->L = w->L;
    res->E = w->E;
    res->k = w->k;
    res->n = w->n;
    int rc = alloc_run(&R, w, p->K, err, errlen);
    if (!rc && !w->sig && w->recipe && route_kind_has_centroids(p->kind) &&
        !(R.sig = malloc(w->dim * sizeof *R.sig)))
        rc = eldr_errf(err, errlen, "sim: out of memory for a signature");
    if (!rc)
        rc = loop(&R);
    if (!rc)
        rc = summarise(&R);
    if (R.online) {
        res->refits = online.refits;
        sim_online_free(&online);
        p->centroids = given;
    }
    if (R.cost) {
        cost_state_free(&cost);
        cost_req_free(&R.creq);
    }
    free_run(&R);
    if (rc)
        sim_result_free(res);
    return rc;
}
