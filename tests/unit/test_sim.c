/* test_sim.c - the decode simulator (sim.h).
 *
 * Conservation (every request emits exactly its tokens; the heat matrix,
 * summed from token rows at finish, equals an oracle that replays each
 * request's rows on the worker it was served by; total activations =
 * tokens * k * L), k <= U_l <= min(E, B*k) at every step, the batch cap,
 * K = 1 making all policies equal, determinism, common random numbers,
 * a trace whose domains use disjoint experts (ELDR strictly fewer distinct
 * experts per step than rr), Little's law on a long run, the closed loop,
 * the sampler, quantiles, refusals, and the real gpt-oss-20b trace (ELDR
 * fewer distinct experts per step than rr and jsq at K = 4). A workload
 * of a row list (sim_workload_init_rows) is that of a copy of the rows:
 * arrivals, lengths, activations and every run's result (request rows
 * numbered as in the copy), sampled or recorded token rows, pools kept or
 * sampled on admission, the trace's or Poisson arrivals; a bad list is
 * refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "model.h"
#include "rng.h"
#include "route.h"
#include "sim.h"
#include "sim_internal.h"
#include "split.h"
#include "util_tracefix.h"

#define REAL_DATA "../shared/data/gptoss20b-routing.h5"

static char err[ELDR_ERRLEN];

/* A cost model with every term, so that U, B and kv all matter. */
static void test_cost(sim_config *c)
{
    c->cost = (cost_model){.t0 = 1e-3, .a = 2e-5, .b = 1e-5, .c = 2e-5, .d = 1e-8};
}

/* n requests of D domains over disjoint expert blocks (domain d uses
 * experts [d*E/D, (d+1)*E/D)); decode length 4 + r % 13; token rows
 * stored when `tokens`; labels = domains; arrival_s every 10 ms. */
static trace_t *disjoint_trace(int64_t n, int L, int E, int k, int D, int tokens,
                               uint64_t seed)
{
    trace_t *t = trace_new(n, L, E, k, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(trace_alloc_optional(t, TRACE_HAS_DECODE | TRACE_HAS_LABEL |
                                          TRACE_HAS_ARRIVAL, err, sizeof err), 0);
    const char *names[16];
    char buf[16][16];
    for (int d = 0; d < D; d++) {
        snprintf(buf[d], sizeof buf[d], "d%d", d);
        names[d] = buf[d];
    }
    assert_int_equal(trace_set_label_names(t, D, names, err, sizeof err), 0);
    int64_t T = 0;
    for (int64_t r = 0; r < n; r++)
        T += 4 + r % 13;
    if (tokens) {
        t->decode_offsets = calloc((size_t)n + 1, sizeof *t->decode_offsets);
        t->decode_experts = malloc((size_t)T * L * k * sizeof *t->decode_experts);
        assert_non_null(t->decode_offsets);
        assert_non_null(t->decode_experts);
    }
    rng_t g;
    rng_seed(&g, seed);
    int block = E / D;
    int64_t row = 0;
    for (int64_t r = 0; r < n; r++) {
        int d = (int)rng_below(&g, (uint64_t)D);
        t->label[r] = d;
        t->arrival_s[r] = 0.01 * (double)r;
        t->prompt_tokens[r] = 8;
        t->decode_tokens[r] = 4 + (int32_t)(r % 13);
        uint16_t *pc = t->prefill_counts + (size_t)r * L * E;
        uint16_t *dc = t->decode_counts + (size_t)r * L * E;
        for (int phase = 0; phase < 2; phase++) {
            int nt = phase ? t->decode_tokens[r] : t->prompt_tokens[r];
            for (int tok = 0; tok < nt; tok++)
                for (int l = 0; l < L; l++) {
                    int pick[16], np = 0;
                    while (np < k) { /* k distinct experts of the block */
                        int e = d * block + (int)rng_below(&g, (uint64_t)block);
                        int dup = 0;
                        for (int i = 0; i < np; i++)
                            dup |= pick[i] == e;
                        if (!dup)
                            pick[np++] = e;
                    }
                    for (int i = 0; i < k; i++) {
                        (phase ? dc : pc)[l * E + pick[i]]++;
                        if (phase && tokens)
                            t->decode_experts[((row + tok) * L + l) * k + i] = (uint16_t)pick[i];
                    }
                }
            if (phase && tokens) {
                row += nt;
                t->decode_offsets[r + 1] = row;
            }
        }
    }
    if (trace_validate(t, "fixture", err, sizeof err))
        fail_msg("%s", err);
    return t;
}

static int workload(sim_workload *w, const trace_t *t, const sim_config *c,
                    const sig_recipe *r)
{
    int rc = sim_workload_init(w, t, c, r, err, sizeof err);
    if (rc)
        fail_msg("sim_workload_init: %s", err);
    return rc;
}

static void run(const sim_workload *w, route_policy *p, sim_result *res)
{
    if (sim_run(w, p, NULL, NULL, res, err, sizeof err))
        fail_msg("sim_run: %s", err);
}

static void policy(route_policy *p, route_kind kind, int K)
{
    assert_int_equal(route_policy_init(p, kind, K, 11, err, sizeof err), 0);
}

/* Oracle: replay each request's token rows (cycled) on its worker. */
static uint64_t *heat_oracle(const sim_workload *w, const sim_result *res)
{
    int L = w->L, E = w->E, k = w->k;
    uint64_t *h = calloc((size_t)res->K * L * E, sizeof *h);
    assert_non_null(h);
    for (int64_t i = 0; i < res->n; i++) {
        const sim_request *q = &res->req[i];
        int64_t wi = -1;
        for (int64_t j = 0; j < w->n; j++)
            if (w->row[j] == q->row)
                wi = j;
        assert_true(wi >= 0);
        sim_tokens s;
        assert_int_equal(sim_tokens_open(w, wi, &s, err, sizeof err), 0);
        for (int32_t tk = 0; tk < q->tokens; tk++) {
            size_t row = (size_t)(tk % s.n_rows) * L * k;
            for (int l = 0; l < L; l++)
                for (int j = 0; j < k; j++)
                    h[((size_t)q->worker * L + l) * E + sim_tokens_id(&s, row + l * k + j)]++;
        }
        sim_tokens_close(&s);
    }
    return h;
}

static void check_conservation(const sim_workload *w, const sim_result *res)
{
    int64_t want_tokens = 0;
    for (int64_t i = 0; i < w->n; i++) {
        assert_int_equal(res->req[i].row, w->row[i]);
        assert_int_equal(res->req[i].tokens, w->out_tokens[i]);
        assert_true(res->req[i].arrival <= res->req[i].start);
        assert_true(res->req[i].start < res->req[i].finish);
        want_tokens += w->out_tokens[i];
    }
    assert_int_equal(res->tokens, want_tokens);
    int64_t act = want_tokens * w->k * w->L;
    assert_int_equal(res->activations, act);
    uint64_t sum = 0;
    size_t cells = (size_t)res->K * w->L * w->E;
    for (size_t c = 0; c < cells; c++)
        sum += res->heat[c];
    assert_int_equal(sum, (uint64_t)act);
    uint64_t *h = heat_oracle(w, res);
    assert_memory_equal(h, res->heat, cells * sizeof *h);
    free(h);
    int64_t served = 0;
    for (int k = 0; k < res->K; k++)
        served += res->served[k];
    assert_int_equal(served, w->n);
}

static void test_conservation_recorded(void **state)
{
    (void)state;
    trace_t *t = tracefix_make(300, 5, 16, 3, 21);
    assert_non_null(t);
    sim_config c;
    sim_config_default(&c);
    test_cost(&c);
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = 2000;
    c.max_batch = 8;
    for (int out = 0; out <= 37; out += 37) { /* trace lengths, then cycling */
        c.output_tokens = out;
        sim_workload w;
        workload(&w, t, &c, NULL);
        assert_true(w.recorded);
        if (!out)
            assert_true(w.n_skipped > 0); /* tracefix has 0-token requests */
        for (int kind = ROUTE_RANDOM; kind <= ROUTE_P2C; kind++) {
            route_policy p;
            sim_result res;
            policy(&p, (route_kind)kind, 3);
            run(&w, &p, &res);
            check_conservation(&w, &res);
            sim_result_free(&res);
            route_policy_free(&p);
        }
        sim_workload_free(&w);
    }
    trace_free(t);
}

/* Drops the token-level datasets so that activations are sampled. */
typedef struct step_check {
    int E, k, max_batch;
    int64_t steps;
    int bad;
    char why[128];
} step_check;

static void on_step(void *ctx, int worker, double t, double dt, int B, const int *U, int L,
                    int64_t kv)
{
    step_check *s = ctx;
    (void)worker;
    (void)t;
    s->steps++;
    int hi = B * s->k < s->E ? B * s->k : s->E;
    if (B < 1 || B > s->max_batch || !(dt > 0) || kv < 0) {
        s->bad = 1;
        snprintf(s->why, sizeof s->why, "B %d dt %g kv %lld", B, dt, (long long)kv);
    }
    for (int l = 0; l < L; l++)
        if (U[l] < s->k || U[l] > hi) {
            s->bad = 1;
            snprintf(s->why, sizeof s->why, "U[%d] = %d outside [%d, %d] at B %d", l, U[l],
                     s->k, hi, B);
        }
}

static void test_sampled_and_bounds(void **state)
{
    (void)state;
    trace_t *t = tracefix_make(250, 4, 12, 3, 5);
    assert_non_null(t);
    tracefix_strip_tokens(t);
    sim_config c;
    sim_config_default(&c);
    test_cost(&c);
    c.arrivals = SIM_ARRIVE_CLOSED;
    c.concurrency = 40;
    c.max_batch = 6;
    c.output_tokens = 50; /* longer than the pool: cycles */
    c.sample_pool = 7;
    sim_workload w;
    workload(&w, t, &c, NULL);
    assert_false(w.recorded);
    /* sampled rows: k distinct experts, each with counts in the profile */
    for (int64_t i = 0; i < w.n; i++) {
        sim_tokens s;
        assert_int_equal(sim_tokens_open(&w, i, &s, err, sizeof err), 0);
        assert_int_equal(s.n_rows, 7);
        int64_t r = w.row[i];
        const uint16_t *prof = t->decode_tokens[r] > 0 ? trace_decode_row(t, r)
                                                       : trace_prefill_row(t, r);
        for (int p = 0; p < s.n_rows; p++)
            for (int l = 0; l < 4; l++) {
                size_t at = ((size_t)p * 4 + l) * 3;
                for (int j = 0; j < 3; j++) {
                    assert_true(prof[l * 12 + sim_tokens_id(&s, at + j)] > 0);
                    for (int m = 0; m < j; m++)
                        assert_int_not_equal(sim_tokens_id(&s, at + j),
                                             sim_tokens_id(&s, at + m));
                }
            }
        sim_tokens_close(&s);
    }
    for (int kind = ROUTE_RANDOM; kind <= ROUTE_P2C; kind++) {
        route_policy p;
        sim_result res;
        step_check sc = {.E = 12, .k = 3, .max_batch = 6};
        policy(&p, (route_kind)kind, 4);
        assert_int_equal(sim_run(&w, &p, on_step, &sc, &res, err, sizeof err), 0);
        if (sc.bad)
            fail_msg("%s: %s", route_kind_name((route_kind)kind), sc.why);
        assert_int_equal(sc.steps, res.steps);
        check_conservation(&w, &res);
        /* closed loop: never more than C in the system, and exactly C at
         * some point */
        int64_t inflight[4] = {0}, total, max_total = 0;
        for (int64_t i = 0; i < res.n_series; i++) {
            inflight[res.series[i].worker] = res.series[i].inflight;
            total = inflight[0] + inflight[1] + inflight[2] + inflight[3];
            if (total > max_total)
                max_total = total;
        }
        assert_int_equal(max_total, 40);
        /* a batch cap of 6 with 40 in the system: some requests wait */
        assert_true(res.queue_p99_ms > 0);
        assert_true(res.distinct_per_step >= 3 && res.distinct_per_step <= 12);
        assert_true(res.reuse >= 1.0);
        sim_result_free(&res);
        route_policy_free(&p);
    }
    sim_workload_free(&w);
    trace_free(t);
}

static void test_k1_all_equal(void **state)
{
    (void)state;
    trace_t *t = disjoint_trace(200, 3, 16, 2, 4, 1, 3);
    float mu[3 * 16];
    sig_recipe rec;
    assert_int_equal(sig_recipe_init(&rec, SIG_COUNT, 3, 16, NULL, 0, err, sizeof err), 0);
    for (int j = 0; j < 48; j++)
        mu[j] = (float)(1.0 / sqrt(48.0));
    double share[4] = {0.25, 0.25, 0.25, 0.25};
    sim_config c;
    sim_config_default(&c);
    test_cost(&c);
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = 500;
    sim_workload w;
    workload(&w, t, &c, &rec);
    sim_result ref;
    for (int kind = 0; kind < ROUTE_N_KINDS; kind++) {
        route_policy p;
        sim_result res;
        policy(&p, (route_kind)kind, 1);
        if (route_kind_has_centroids((route_kind)kind))
            assert_int_equal(route_policy_set_centroids(&p, mu, 48, 0.1, 1, err, sizeof err), 0);
        if (kind == ROUTE_DOMAIN)
            assert_int_equal(route_policy_set_domains(&p, share, 4, err, sizeof err), 0);
        run(&w, &p, kind ? &res : &ref);
        if (kind) {
            for (int64_t i = 0; i < w.n; i++) {
                assert_int_equal(res.req[i].worker, 0);
                assert_true(res.req[i].start == ref.req[i].start);
                assert_true(res.req[i].finish == ref.req[i].finish);
            }
            assert_true(res.tpot_p50_ms == ref.tpot_p50_ms);
            assert_true(res.distinct_per_step == ref.distinct_per_step);
            assert_int_equal(res.steps, ref.steps);
            sim_result_free(&res);
        }
        route_policy_free(&p);
    }
    sim_result_free(&ref);
    sim_workload_free(&w);
    sig_recipe_free(&rec);
    trace_free(t);
}

static void same_result(const sim_result *a, const sim_result *b)
{
    assert_int_equal(a->n, b->n);
    assert_memory_equal(a->req, b->req, (size_t)a->n * sizeof *a->req);
    assert_memory_equal(a->heat, b->heat, (size_t)a->K * a->L * a->E * sizeof *a->heat);
    assert_int_equal(a->n_series, b->n_series);
    assert_memory_equal(a->series, b->series, (size_t)a->n_series * sizeof *a->series);
    assert_true(a->tpot_p99_ms == b->tpot_p99_ms);
    assert_true(a->imbalance == b->imbalance);
}

/* n requests of 4 layers x 16 experts, top-2, no token rows (sampled
 * activations), and Poisson arrivals at 800/s of out tokens each. */
static trace_t *sampled_fixture(int64_t n)
{
    trace_t *t = tracefix_make(n, 4, 16, 2, 8);
    tracefix_strip_tokens(t);
    return t;
}

static void poisson_config(sim_config *c, int32_t out)
{
    sim_config_default(c);
    test_cost(c);
    c->arrivals = SIM_ARRIVE_POISSON;
    c->rate = 800;
    c->output_tokens = out;
}

static void test_determinism_and_crn(void **state)
{
    (void)state;
    trace_t *t = sampled_fixture(200);
    sim_config c;
    poisson_config(&c, 20);
    sim_workload w1, w2, w3;
    workload(&w1, t, &c, NULL);
    assert_non_null(w1.pool);
    c.pool_cache = 0; /* sampled on admission: the same rows */
    workload(&w2, t, &c, NULL);
    assert_null(w2.pool);
    c.seed = 2;
    workload(&w3, t, &c, NULL);
    /* a seed fixes arrivals and activations; another seed moves them */
    assert_memory_equal(w1.arrival, w2.arrival, (size_t)w1.n * sizeof *w1.arrival);
    assert_true(w1.arrival[5] != w3.arrival[5]);
    sim_tokens a, b;
    assert_int_equal(sim_tokens_open(&w1, 3, &a, err, sizeof err), 0);
    assert_int_equal(sim_tokens_open(&w2, 3, &b, err, sizeof err), 0);
    assert_int_equal(a.id_bytes, 1); /* 16 experts: a byte an id */
    assert_int_equal(b.id_bytes, 1);
    assert_int_equal(a.n_rows, b.n_rows);
    assert_memory_equal(a.rows, b.rows, (size_t)a.n_rows * 4 * 2 * a.id_bytes);
    sim_tokens_close(&a);
    sim_tokens_close(&b);
    route_policy p, q;
    sim_result r1, r2;
    policy(&p, ROUTE_P2C, 3);
    policy(&q, ROUTE_P2C, 3);
    run(&w1, &p, &r1);
    run(&w2, &q, &r2);
    same_result(&r1, &r2);
    sim_result_free(&r1);
    sim_result_free(&r2);
    route_policy_free(&p);
    route_policy_free(&q);
    /* common random numbers: policies differ, arrivals do not */
    policy(&p, ROUTE_RR, 3);
    policy(&q, ROUTE_JSQ, 3);
    run(&w1, &p, &r1);
    run(&w1, &q, &r2);
    for (int64_t i = 0; i < w1.n; i++)
        assert_true(r1.req[i].arrival == r2.req[i].arrival);
    sim_result_free(&r1);
    sim_result_free(&r2);
    route_policy_free(&p);
    route_policy_free(&q);
    sim_workload_free(&w1);
    sim_workload_free(&w2);
    sim_workload_free(&w3);
    trace_free(t);
}

/* Rows r % 3 != 0 of t, in place and as a copy: the same workload and
 * the same runs (rr, p2c, and eldr by the signatures of recipe). */
static void rows_as_copy(const trace_t *t, const sim_config *c, const model_t *m)
{
    int64_t rows[300], n = 0;
    for (int64_t r = 0; r < t->n && n < 300; r++)
        if (r % 3)
            rows[n++] = r;
    trace_t *copy = trace_select(t, rows, n, err, sizeof err);
    assert_non_null(copy);
    sim_workload a, b;
    workload(&a, copy, c, &m->recipe);
    assert_int_equal(sim_workload_init_rows(&b, t, rows, n, c, &m->recipe, err, sizeof err), 0);
    assert_int_equal(a.n, b.n);
    assert_int_equal(a.n_skipped, b.n_skipped);
    assert_null(a.key);
    for (int64_t i = 0; i < a.n; i++) {
        assert_int_equal(b.key[i], a.row[i]);        /* numbered as in the copy */
        assert_int_equal(b.row[i], rows[a.row[i]]);  /* read in place */
        assert_int_equal(a.out_tokens[i], b.out_tokens[i]);
        assert_true(a.arrival[i] == b.arrival[i]);
        sim_tokens x, y;
        assert_int_equal(sim_tokens_open(&a, i, &x, err, sizeof err), 0);
        assert_int_equal(sim_tokens_open(&b, i, &y, err, sizeof err), 0);
        assert_int_equal(x.n_rows, y.n_rows);
        assert_memory_equal(x.rows, y.rows, (size_t)x.n_rows * t->L * t->k * x.id_bytes);
        sim_tokens_close(&x);
        sim_tokens_close(&y);
    }
    static const route_kind kinds[] = {ROUTE_RR, ROUTE_P2C, ROUTE_ELDR};
    for (int k = 0; k < 3; k++) {
        route_policy p, q;
        policy(&p, kinds[k], 3);
        policy(&q, kinds[k], 3);
        if (kinds[k] == ROUTE_ELDR) {
            size_t dim = sig_dim(&m->recipe);
            assert_int_equal(route_policy_set_centroids(&p, m->centroids, dim, 0.1, 1, err,
                                                        sizeof err), 0);
            assert_int_equal(route_policy_set_centroids(&q, m->centroids, dim, 0.1, 1, err,
                                                        sizeof err), 0);
        }
        sim_result r1, r2;
        run(&a, &p, &r1);
        run(&b, &q, &r2);
        same_result(&r1, &r2);
        sim_result_free(&r1);
        sim_result_free(&r2);
        route_policy_free(&p);
        route_policy_free(&q);
    }
    sim_workload_free(&a);
    sim_workload_free(&b);
    trace_free(copy);
}

static void test_rows_in_place(void **state)
{
    (void)state;
    trace_t *rec = tracefix_make(240, 4, 16, 2, 9);   /* recorded token rows */
    trace_t *smp = sampled_fixture(240);              /* sampled activations */
    model_t *m = NULL;
    model_fit_opts o;
    model_fit_opts_default(&o, 3);
    o.layers = MODEL_LAYERS_ALL;
    assert_int_equal(model_fit(smp, &o, &m, NULL, err, sizeof err), 0);
    sim_config c;
    poisson_config(&c, 0);
    c.output_tokens = 0;                              /* the trace's lengths */
    rows_as_copy(smp, &c, m);
    c.pool_cache = 0;                                 /* sampled on admission */
    rows_as_copy(smp, &c, m);
    c.arrivals = SIM_ARRIVE_TRACE;                    /* the trace's arrival_s */
    rows_as_copy(rec, &c, m);
    c.sig_cache = 0;                                  /* signatures at arrival */
    rows_as_copy(smp, &c, m);
    /* a bad list: one error naming the entry, nothing leaked */
    sim_workload w;
    int64_t bad[] = {3, 2, 7}, out[] = {1, 240};
    assert_int_equal(sim_workload_init_rows(&w, smp, bad, 3, &c, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "row list entry 1 (row 2)"));
    assert_int_equal(sim_workload_init_rows(&w, smp, out, 2, &c, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "row list entry 1 (row 240)"));
    assert_int_equal(sim_workload_init_rows(&w, smp, NULL, 2, &c, NULL, err, sizeof err), -1);
    model_free(m);
    trace_free(rec);
    trace_free(smp);
}

static void test_disjoint_domains(void **state)
{
    (void)state;
    trace_t *t = disjoint_trace(800, 3, 32, 2, 4, 0, 17);
    int64_t nc = split_calib_count(t->n, 400, err, sizeof err);
    assert_int_equal(nc, 400);
    int64_t *rows = malloc((size_t)t->n * sizeof *rows);
    for (int64_t i = 0; i < t->n; i++)
        rows[i] = i;
    trace_t *calib = trace_select(t, rows, nc, err, sizeof err);
    trace_t *eval = trace_select(t, rows + nc, t->n - nc, err, sizeof err);
    free(rows);
    assert_non_null(calib);
    assert_non_null(eval);
    model_fit_opts o;
    model_fit_opts_default(&o, 4);
    model_t *m = NULL;
    if (model_fit(calib, &o, &m, NULL, err, sizeof err))
        fail_msg("model_fit: %s", err);
    sim_config c;
    sim_config_default(&c);
    test_cost(&c);
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = 3000;
    sim_workload w;
    workload(&w, eval, &c, &m->recipe);
    route_policy pe, pr, pd;
    sim_result re, rr, rd;
    policy(&pe, ROUTE_ELDR, 4);
    assert_int_equal(route_policy_set_centroids(&pe, m->centroids, w.dim, 0.1, 1, err,
                                                sizeof err), 0);
    policy(&pr, ROUTE_RR, 4);
    policy(&pd, ROUTE_DOMAIN, 4);
    double share[4] = {1, 1, 1, 1};
    assert_int_equal(route_policy_set_domains(&pd, share, 4, err, sizeof err), 0);
    run(&w, &pe, &re);
    run(&w, &pr, &rr);
    run(&w, &pd, &rd);
    print_message("disjoint domains: distinct experts/step eldr %.3f, domain %.3f, rr %.3f\n",
                  re.distinct_per_step, rd.distinct_per_step, rr.distinct_per_step);
    assert_true(re.distinct_per_step < rr.distinct_per_step);
    /* pure locality (tau = 0) keeps each domain on its worker, as the
     * oracle pools do: at most 8 experts per layer */
    sim_result r0;
    assert_int_equal(route_policy_set_centroids(&pe, m->centroids, w.dim, 0.0, 1, err,
                                                sizeof err), 0);
    run(&w, &pe, &r0);
    assert_true(r0.distinct_per_step <= 8.0);
    assert_int_equal(r0.rule_count[RULE_LOCALITY], r0.n);
    sim_result_free(&r0);
    /* the oracle pools each domain on one worker: at most 8 experts */
    assert_true(rd.distinct_per_step <= 8.0);
    for (int64_t i = 0; i < rd.n; i++)
        assert_int_equal(rd.req[i].worker, eval->label[rd.req[i].row]);
    check_conservation(&w, &re);
    sim_result_free(&re);
    sim_result_free(&rr);
    sim_result_free(&rd);
    route_policy_free(&pe);
    route_policy_free(&pr);
    route_policy_free(&pd);
    sim_workload_free(&w);
    model_free(m);
    trace_free(calib);
    trace_free(eval);
    trace_free(t);
}

/* Refits of eldr-online at the arrivals where the clock (online.h) says
 * so, counted here from the arrival times alone. */
static int64_t refits_expected(const sim_workload *w, double every, double window)
{
    int64_t n = 0;
    double last = NAN;
    for (int64_t i = 0; i < w->n; i++) {
        double t = w->arrival[i];
        if (t - w->arrival[0] >= window && (isnan(last) || t - last >= every)) {
            n++;
            last = t;
        }
    }
    return n;
}

/* eldr-online: with a window longer than the run it never refits and
 * routes exactly as eldr; with short periods it refits where the clock
 * says, deterministically, conserving work, and hands the caller's
 * centroids back untouched. */
static void test_eldr_online(void **state)
{
    (void)state;
    trace_t *t = disjoint_trace(600, 3, 32, 2, 4, 0, 23);
    model_fit_opts o;
    model_fit_opts_default(&o, 4);
    model_t *m = NULL;
    if (model_fit(t, &o, &m, NULL, err, sizeof err))
        fail_msg("model_fit: %s", err);
    size_t size = (size_t)m->K * sig_dim(&m->recipe) * sizeof(float);
    float *given = malloc(size);
    memcpy(given, m->centroids, size);
    sim_config c;
    sim_config_default(&c);
    test_cost(&c);
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = 200;
    c.refit_window = 1e6;        /* never a full window: no refit */
    sim_workload w;
    workload(&w, t, &c, &m->recipe);
    route_policy pe, po;
    sim_result re, ro, ro2;
    policy(&pe, ROUTE_ELDR, 4);
    policy(&po, ROUTE_ELDR_ONLINE, 4);
    assert_int_equal(route_policy_set_centroids(&pe, m->centroids, w.dim, 0.1, 1, err,
                                                sizeof err), 0);
    assert_int_equal(route_policy_set_centroids(&po, m->centroids, w.dim, 0.1, 1, err,
                                                sizeof err), 0);
    run(&w, &pe, &re);
    run(&w, &po, &ro);
    assert_int_equal(ro.refits, 0);
    same_result(&re, &ro);
    assert_string_equal(ro.policy, "eldr-online");
    sim_result_free(&ro);
    sim_workload_free(&w);

    c.refit_every = 0.25;
    c.refit_window = 0.5;
    workload(&w, t, &c, &m->recipe);
    run(&w, &po, &ro);
    run(&w, &po, &ro2);
    int64_t want = refits_expected(&w, 0.25, 0.5);
    print_message("eldr-online: %lld refits over %.2f s\n", (long long)ro.refits,
                  w.arrival[w.n - 1]);
    assert_true(want >= 5);
    assert_int_equal(ro.refits, want);
    same_result(&ro, &ro2);
    check_conservation(&w, &ro);
    assert_ptr_equal(po.centroids, m->centroids);
    assert_memory_equal(m->centroids, given, size);
    sim_result_free(&re);
    sim_result_free(&ro);
    sim_result_free(&ro2);
    route_policy_free(&pe);
    route_policy_free(&po);
    sim_workload_free(&w);
    free(given);
    model_free(m);
    trace_free(t);
}

static void test_littles_law(void **state)
{
    (void)state;
    trace_t *t = disjoint_trace(4000, 2, 16, 2, 4, 0, 23);
    sim_config c;
    sim_config_default(&c);
    test_cost(&c);
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = 600;
    c.max_batch = 16;
    sim_workload w;
    workload(&w, t, &c, NULL);
    route_policy p;
    sim_result r;
    policy(&p, ROUTE_JSQ, 3);
    run(&w, &p, &r);
    /* whole run: the time integral of in-flight equals the summed sojourn */
    assert_true(fabs(r.mean_in_system - r.throughput_rps * r.mean_sojourn_s) <
                1e-9 * r.mean_in_system);
    /* a window in the middle, from the in-flight change points on one
     * side and the requests on the other */
    double t1 = 0.25 * r.makespan_s, t2 = 0.75 * r.makespan_s;
    double area = 0, last = t1;
    int64_t inflight[3] = {0}, total = 0;
    for (int64_t i = 0; i < r.n_series; i++) {
        double tt = r.series[i].t;
        if (tt > t1 && last < t2) {
            double a = tt < t2 ? tt : t2;
            area += (double)total * (a - last);
            last = a;
        }
        total += r.series[i].inflight - inflight[r.series[i].worker];
        inflight[r.series[i].worker] = r.series[i].inflight;
    }
    area += (double)total * (t2 - last > 0 ? t2 - last : 0);
    double L_mean = area / (t2 - t1);
    int64_t arrived = 0;
    double soj = 0;
    for (int64_t i = 0; i < r.n; i++)
        if (r.req[i].arrival >= t1 && r.req[i].arrival < t2) {
            arrived++;
            soj += r.req[i].finish - r.req[i].arrival;
        }
    double lambda = (double)arrived / (t2 - t1), W = soj / (double)arrived;
    print_message("little: L %.4f, lambda*W %.4f (lambda %.1f/s, W %.2f ms)\n", L_mean,
                  lambda * W, lambda, W * 1e3);
    assert_true(L_mean > 1.0);
    assert_true(fabs(L_mean - lambda * W) < 0.03 * L_mean);
    sim_result_free(&r);
    route_policy_free(&p);
    sim_workload_free(&w);
    trace_free(t);
}

static void test_sampler(void **state)
{
    (void)state;
    uint16_t counts[7] = {5, 0, 1, 3, 0, 1, 0}; /* sum 10 */
    sim_sampler sp;
    assert_int_equal(sim_sampler_init(&sp, 7, err, sizeof err), 0);
    assert_int_equal(sim_sampler_load(&sp, counts, 7), 4);
    rng_t r;
    rng_seed(&r, 4);
    int first[7] = {0}, n = 60000;
    for (int i = 0; i < n; i++) {
        uint16_t out[3];
        sim_sampler_draw(&sp, &r, 3, out);
        first[out[0]]++;
        for (int j = 0; j < 3; j++) {
            assert_true(counts[out[j]] > 0);
            for (int m = 0; m < j; m++)
                assert_int_not_equal(out[j], out[m]);
        }
    }
    /* the first pick is proportional to the counts */
    for (int e = 0; e < 7; e++) {
        double p = counts[e] / 10.0;
        assert_true(fabs(first[e] - n * p) <= 5 * sqrt(n * p * (1 - p)) + 1e-9);
    }
    /* four experts with counts and k = 4: all of them, every time */
    uint16_t out[4];
    sim_sampler_draw(&sp, &r, 4, out);
    int seen = 0;
    for (int j = 0; j < 4; j++)
        seen |= 1 << out[j];
    assert_int_equal(seen, 1 | 4 | 8 | 32);
    /* a skewed profile over many experts: single draws against the
     * counts by a chi-square bound (the alias table is exact) */
    enum { E = 100 };
    uint16_t big[E];
    double chi = 0;
    int hist[E] = {0}, m = 200000;
    for (int e = 0; e < E; e++)
        big[e] = (uint16_t)(e % 3 ? 1 + 400 / (e + 1) : 0);
    sim_sampler_free(&sp);
    assert_int_equal(sim_sampler_init(&sp, E, err, sizeof err), 0);
    int nz = sim_sampler_load(&sp, big, E);
    double tot = 0;
    for (int e = 0; e < E; e++)
        tot += big[e];
    for (int i = 0; i < m; i++) {
        uint16_t o;
        sim_sampler_draw(&sp, &r, 1, &o);
        hist[o]++;
    }
    for (int e = 0; e < E; e++) {
        if (!big[e]) {
            assert_int_equal(hist[e], 0);
            continue;
        }
        double want = m * big[e] / tot;
        chi += (hist[e] - want) * (hist[e] - want) / want;
    }
    /* dof = nz - 1 = 65; P(chi2 > 120) is about 4e-5 */
    print_message("sampler chi-square %.1f on %d degrees of freedom\n", chi, nz - 1);
    assert_true(chi < 120);
    sim_sampler_free(&sp);
}

static void test_quantile(void **state)
{
    (void)state;
    double v[] = {4, 1, 3, 2, 5};
    assert_true(sim_quantile(v, 5, 0.5) == 3);
    assert_true(sim_quantile(v, 5, 0.0) == 1);
    assert_true(sim_quantile(v, 5, 1.0) == 5);
    assert_true(fabs(sim_quantile(v, 5, 0.9) - 4.6) < 1e-12);
    double one[] = {7};
    assert_true(sim_quantile(one, 1, 0.99) == 7);
    assert_true(isnan(sim_quantile(v, 0, 0.5)));
    assert_int_equal(split_calib_count(449, 1000, err, sizeof err), 224);
    assert_int_equal(split_calib_count(10000, 1000, err, sizeof err), 1000);
    assert_int_equal(split_calib_count(1000, 0.25, err, sizeof err), 250);
    assert_int_equal(split_calib_count(1000, 0, err, sizeof err), 0);
    assert_int_equal(split_calib_count(1000, -1, err, sizeof err), -1);
}

static void test_refusals(void **state)
{
    (void)state;
    trace_t *t = tracefix_make(20, 2, 8, 2, 1);
    sim_config c;
    sim_config_default(&c);
    sim_workload w;
    /* trace arrivals without arrival_s */
    double *arr = t->arrival_s;
    t->arrival_s = NULL;
    assert_int_equal(sim_workload_init(&w, t, &c, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "arrival_s"));
    t->arrival_s = arr;
    /* no decode lengths and no output length */
    int32_t *dt = t->decode_tokens;
    t->decode_tokens = NULL;
    assert_int_equal(sim_workload_init(&w, t, &c, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "--output-tokens"));
    t->decode_tokens = dt;
    c.max_batch = 0;
    assert_int_equal(sim_workload_init(&w, t, &c, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "max batch"));
    c.max_batch = 4;
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = -1;
    assert_int_equal(sim_workload_init(&w, t, &c, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "rate"));
    /* eldr without signatures */
    c.rate = 10;
    assert_int_equal(sim_workload_init(&w, t, &c, NULL, err, sizeof err), 0);
    route_policy p;
    sim_result r;
    float mu[16] = {1};
    policy(&p, ROUTE_ELDR, 1);
    assert_int_equal(route_policy_set_centroids(&p, mu, 16, 0.1, 1, err, sizeof err), 0);
    assert_int_equal(sim_run(&w, &p, NULL, NULL, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "model"));
    route_policy_free(&p);
    sim_workload_free(&w);
    trace_free(t);
}

/* sim_run_cancel: a flag that stays 0 changes nothing; a flag set before
 * the run stops it at once; a flag set during the run (here by the step
 * callback, so the point is deterministic) stops it within
 * SIM_CANCEL_EVERY events, with SIM_CANCELLED, "cancelled" and an empty
 * result (nothing left to free). */
typedef struct cancel_probe {
    volatile int *flag;
    int64_t steps, set_at;
} cancel_probe;

static void cancel_step(void *ctx, int worker, double t, double dt, int B, const int *U,
                        int L, int64_t kv)
{
    (void)worker, (void)t, (void)dt, (void)B, (void)U, (void)L, (void)kv;
    cancel_probe *c = ctx;
    if (++c->steps == c->set_at)
        *c->flag = 1;
}

static void test_cancel(void **state)
{
    (void)state;
    trace_t *t = sampled_fixture(400);
    sim_config c;
    poisson_config(&c, 30);
    sim_workload w;
    workload(&w, t, &c, NULL);
    route_policy p;
    sim_result r1, r2;
    volatile int flag = 0;
    policy(&p, ROUTE_JSQ, 3);
    run(&w, &p, &r1);
    route_policy_free(&p);
    policy(&p, ROUTE_JSQ, 3);
    assert_int_equal(sim_run_cancel(&w, &p, NULL, NULL, &flag, &r2, err, sizeof err), 0);
    same_result(&r1, &r2);
    sim_result_free(&r2);
    route_policy_free(&p);
    flag = 1;
    policy(&p, ROUTE_JSQ, 3);
    assert_int_equal(sim_run_cancel(&w, &p, NULL, NULL, &flag, &r2, err, sizeof err),
                     SIM_CANCELLED);
    assert_string_equal(err, "cancelled");
    assert_null(r2.req);
    route_policy_free(&p);
    /* set at step 100 of a run of many more: it stops within the poll period */
    assert_true(r1.steps > 100 + 4 * SIM_CANCEL_EVERY);
    flag = 0;
    cancel_probe cp = {&flag, 0, 100};
    policy(&p, ROUTE_JSQ, 3);
    assert_int_equal(sim_run_cancel(&w, &p, cancel_step, &cp, &flag, &r2, err, sizeof err),
                     SIM_CANCELLED);
    assert_true(cp.steps >= 100 && cp.steps <= 100 + SIM_CANCEL_EVERY);
    route_policy_free(&p);
    sim_result_free(&r1);
    sim_workload_free(&w);
    trace_free(t);
}

static void test_real_trace(void **state)
{
    (void)state;
    if (access(REAL_DATA, R_OK) != 0) {
        print_message("skipping: %s not found\n", REAL_DATA);
        skip();
    }
    trace_t *t = NULL;
    if (trace_load(REAL_DATA, &t, err, sizeof err))
        fail_msg("%s", err);
    int64_t nc = split_calib_count(t->n, SIM_DEFAULT_CALIB, err, sizeof err);
    int64_t *rows = malloc((size_t)t->n * sizeof *rows);
    for (int64_t i = 0; i < t->n; i++)
        rows[i] = i;
    trace_t *calib = trace_select(t, rows, nc, err, sizeof err);
    trace_t *eval = trace_select(t, rows + nc, t->n - nc, err, sizeof err);
    free(rows);
    model_fit_opts o;
    model_fit_opts_default(&o, 4);
    model_t *m = NULL;
    if (model_fit(calib, &o, &m, NULL, err, sizeof err))
        fail_msg("model_fit: %s", err);
    sim_config c;
    sim_config_default(&c); /* the documented cost model */
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = 60;
    sim_workload w;
    workload(&w, eval, &c, &m->recipe);
    assert_true(w.recorded);
    route_kind kinds[3] = {ROUTE_ELDR, ROUTE_RR, ROUTE_JSQ};
    double u[3];
    for (int i = 0; i < 3; i++) {
        route_policy p;
        sim_result r;
        policy(&p, kinds[i], 4);
        if (kinds[i] == ROUTE_ELDR)
            assert_int_equal(route_policy_set_centroids(&p, m->centroids, w.dim, m->tau, 1,
                                                        err, sizeof err), 0);
        run(&w, &p, &r);
        check_conservation(&w, &r);
        u[i] = r.distinct_per_step;
        sim_result_free(&r);
        route_policy_free(&p);
    }
    print_message("gpt-oss-20b, K = 4, 60 req/s, %lld requests: distinct experts/step eldr "
                  "%.3f, rr %.3f (%+.1f%%), jsq %.3f (%+.1f%%)\n", (long long)w.n, u[0], u[1],
                  (u[0] / u[1] - 1) * 100, u[2], (u[0] / u[2] - 1) * 100);
    assert_true(u[0] < u[1]);
    assert_true(u[0] < u[2]);
    sim_workload_free(&w);
    model_free(m);
    trace_free(calib);
    trace_free(eval);
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conservation_recorded),
        cmocka_unit_test(test_sampled_and_bounds),
        cmocka_unit_test(test_k1_all_equal),
        cmocka_unit_test(test_determinism_and_crn),
        cmocka_unit_test(test_rows_in_place),
        cmocka_unit_test(test_disjoint_domains),
        cmocka_unit_test(test_eldr_online),
        cmocka_unit_test(test_littles_law),
        cmocka_unit_test(test_sampler),
        cmocka_unit_test(test_quantile),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_real_trace),
        cmocka_unit_test(test_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
