/* test_sim_pool.c - the simulator's sampled activations and its count of
 * distinct experts, against oracles written apart from sim_activations.c
 * and sim.c:
 *
 * - every sampled token row is the documented draw: the stream
 *   (seed ^ SIM_SEED_TOKENS, trace row), layer by layer, pool rows in
 *   order, k distinct experts each (sim_sampler_draw), whatever the id
 *   width (one byte for E <= 256, two above) and wherever it is drawn
 *   (the shared pool or on admission);
 * - the shared pool is the same at 1 and 3 sampling threads, and a
 *   failure names the lowest failing row at any thread count;
 * - U_l of every step equals a set count over the rows of the requests
 *   that step decodes, rebuilt from the results alone (who ran on which
 *   worker from when to when), for geometries on both sides of the
 *   stamps' cache bound (row by row, layer by layer) and of both widths;
 * - the alias table's probabilities equal the counts' shares;
 * - no_heat leaves out the heat matrix and nothing else;
 * - the counter alone (sim_distinct.h), AVX2 bitmaps and stamps, against
 *   a set count, for E across the bitmaps' word bounds (1 to 4 words)
 *   and k with and without a tail of fewer than four ids. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rng.h"
#include "route.h"
#include "sim.h"
#include "sim_distinct.h"
#include "sim_internal.h"
#include "util_tracefix.h"

static char err[ELDR_ERRLEN];

static trace_t *sampled_trace(int64_t n, int L, int E, int k, uint64_t seed)
{
    trace_t *t = tracefix_make(n, L, E, k, seed);
    assert_non_null(t);
    tracefix_strip_tokens(t);
    return t;
}

static void config(sim_config *c)
{
    sim_config_default(c);
    c->cost = (cost_model){.t0 = 1e-3, .a = 2e-5, .b = 1e-5, .c = 2e-5, .d = 1e-8};
    c->arrivals = SIM_ARRIVE_POISSON;
    c->rate = 2000; /* batches of many requests */
    c->output_tokens = 13;
    c->sample_pool = 5; /* cycled */
}

/* The documented draws of request i of w: P rows of [L][k]. */
static uint16_t *oracle_rows(const sim_workload *w, int64_t i, int32_t P)
{
    const trace_t *t = w->t;
    int64_t r = w->row[i];
    int L = w->L, E = w->E, k = w->k;
    uint16_t *out = malloc((size_t)P * L * k * sizeof *out);
    assert_non_null(out);
    const uint16_t *prof = t->decode_tokens[r] > 0 ? trace_decode_row(t, r)
                                                   : trace_prefill_row(t, r);
    sim_sampler sp;
    assert_int_equal(sim_sampler_init(&sp, E, err, sizeof err), 0);
    rng_t g;
    rng_seed_stream(&g, w->cfg.seed ^ SIM_SEED_TOKENS, (uint64_t)r);
    for (int l = 0; l < L; l++) {
        assert_true(sim_sampler_load(&sp, prof + (size_t)l * E, E) >= k);
        for (int32_t p = 0; p < P; p++)
            sim_sampler_draw(&sp, &g, k, out + ((size_t)p * L + l) * k);
    }
    sim_sampler_free(&sp);
    return out;
}

static void check_rows(const sim_workload *w, int want_bytes)
{
    size_t width = (size_t)w->L * w->k;
    for (int64_t i = 0; i < w->n; i++) {
        sim_tokens s;
        assert_int_equal(sim_tokens_open(w, i, &s, err, sizeof err), 0);
        assert_int_equal(s.id_bytes, want_bytes);
        assert_int_equal(s.n_rows, w->cfg.sample_pool);
        uint16_t *o = oracle_rows(w, i, s.n_rows);
        for (size_t x = 0; x < (size_t)s.n_rows * width; x++)
            if (sim_tokens_id(&s, x) != o[x])
                fail_msg("request %lld id %zu: %d, the draw gave %d", (long long)i, x,
                         sim_tokens_id(&s, x), o[x]);
        free(o);
        sim_tokens_close(&s);
    }
}

static void test_rows_are_the_draws(void **state)
{
    (void)state;
    static const struct { int L, E, k, bytes; } geo[] = {
        {3, 12, 3, 1}, {2, 256, 4, 1}, {2, 257, 4, 2}, {2, 300, 5, 2}};
    for (size_t g = 0; g < sizeof geo / sizeof *geo; g++) {
        trace_t *t = sampled_trace(60, geo[g].L, geo[g].E, geo[g].k, 7 + g);
        sim_config c;
        config(&c);
        sim_workload pooled, admitted;
        assert_int_equal(sim_workload_init(&pooled, t, &c, NULL, err, sizeof err), 0);
        assert_non_null(pooled.pool);
        assert_int_equal(pooled.id_bytes, geo[g].bytes);
        check_rows(&pooled, geo[g].bytes);
        c.pool_cache = 0; /* on admission */
        assert_int_equal(sim_workload_init(&admitted, t, &c, NULL, err, sizeof err), 0);
        assert_null(admitted.pool);
        check_rows(&admitted, geo[g].bytes);
        sim_workload_free(&pooled);
        sim_workload_free(&admitted);
        trace_free(t);
    }
}

static void test_pool_threads(void **state)
{
    (void)state;
    trace_t *t = sampled_trace(700, 4, 40, 3, 3); /* 11 chunks of 64 */
    sim_config c;
    config(&c);
    sim_workload a, b;
    assert_int_equal(sim_workload_init(&a, t, &c, NULL, err, sizeof err), 0);
    c.threads = 3;
    assert_int_equal(sim_workload_init(&b, t, &c, NULL, err, sizeof err), 0);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.pool_off, b.pool_off, (size_t)(a.n + 1) * sizeof *a.pool_off);
    assert_memory_equal(a.pool, b.pool, (size_t)a.pool_off[a.n] * 4 * 3 * a.id_bytes);
    sim_workload_free(&a);
    sim_workload_free(&b);
    /* rows 300 and 650 cannot give k experts in layer 2: row 300 is the
     * one named, by one thread or three */
    for (int64_t r = 300; r <= 650; r += 350)
        for (int phase = 0; phase < 2; phase++) {
            uint16_t *d = t->decode_counts + (size_t)r * 4 * 40 + 2 * 40;
            if (phase)
                d = t->prefill_counts + (size_t)r * 4 * 40 + 2 * 40;
            memset(d, 0, 40 * sizeof *d);
            d[5] = 9;
            d[6] = 1;
        }
    for (int th = 1; th <= 3; th += 2) {
        c.threads = th;
        assert_int_equal(sim_workload_init(&a, t, &c, NULL, err, sizeof err), -1);
        assert_non_null(strstr(err, "row 300 layer 2 has 2 experts"));
    }
    trace_free(t);
}

/* ---- U_l against a set count rebuilt from the results ---- */

typedef struct step_rec {
    int worker, B;
    double t;
    int *U;                    /* [L] */
} step_rec;

typedef struct steps {
    step_rec *s;
    int64_t n, cap;
} steps;

static void on_step(void *ctx, int worker, double t, double dt, int B, const int *U, int L,
                    int64_t kv)
{
    (void)dt;
    (void)kv;
    steps *S = ctx;
    if (S->n == S->cap) {
        S->cap = S->cap ? 2 * S->cap : 256;
        S->s = realloc(S->s, (size_t)S->cap * sizeof *S->s);
        assert_non_null(S->s);
    }
    step_rec *r = &S->s[S->n++];
    r->worker = worker;
    r->B = B;
    r->t = t;
    r->U = malloc((size_t)L * sizeof *r->U);
    assert_non_null(r->U);
    memcpy(r->U, U, (size_t)L * sizeof *U);
}

/* Every step of every worker: its members are the requests of that
 * worker started at or before it and finished after it; a member's
 * token is the number of that worker's steps since its start. */
static void check_distinct(const sim_workload *w, const sim_result *res, const steps *S)
{
    int L = w->L, E = w->E, k = w->k;
    char *seen = malloc((size_t)E);
    int64_t *token = calloc((size_t)w->n, sizeof *token);
    sim_tokens *tok = calloc((size_t)w->n, sizeof *tok);
    assert_non_null(seen);
    assert_non_null(token);
    assert_non_null(tok);
    for (int64_t i = 0; i < w->n; i++)
        assert_int_equal(sim_tokens_open(w, i, &tok[i], err, sizeof err), 0);
    int64_t checked = 0;
    for (int64_t s = 0; s < S->n; s++) {
        const step_rec *st = &S->s[s];
        int B = 0;
        for (int l = 0; l < L; l++) {
            memset(seen, 0, (size_t)E);
            int u = 0;
            for (int64_t i = 0; i < w->n; i++) {
                const sim_request *q = &res->req[i];
                if (q->worker != st->worker || q->start > st->t || q->finish <= st->t)
                    continue;
                B += l == 0;
                size_t at = ((size_t)(token[i] % tok[i].n_rows) * L + l) * k;
                for (int j = 0; j < k; j++) {
                    int e = sim_tokens_id(&tok[i], at + j);
                    u += !seen[e];
                    seen[e] = 1;
                }
            }
            if (u != st->U[l])
                fail_msg("step %lld (worker %d, t %.6f) layer %d: U %d, the set count %d",
                         (long long)s, st->worker, st->t, l, st->U[l], u);
            checked++;
        }
        assert_int_equal(B, st->B);
        for (int64_t i = 0; i < w->n; i++) {
            const sim_request *q = &res->req[i];
            token[i] += q->worker == st->worker && q->start <= st->t && q->finish > st->t;
        }
    }
    for (int64_t i = 0; i < w->n; i++) {
        assert_int_equal(token[i], res->req[i].tokens);
        sim_tokens_close(&tok[i]);
    }
    assert_true(checked > 0);
    free(seen);
    free(token);
    free(tok);
}

/* no_heat leaves the heat matrix out and nothing else: every other
 * result is the same as with it. */
static void test_no_heat(void **state)
{
    (void)state;
    trace_t *t = sampled_trace(150, 3, 20, 3, 4);
    sim_config c;
    config(&c);
    sim_result r[2];
    for (int off = 0; off <= 1; off++) {
        c.no_heat = off;
        sim_workload w;
        assert_int_equal(sim_workload_init(&w, t, &c, NULL, err, sizeof err), 0);
        route_policy p;
        assert_int_equal(route_policy_init(&p, ROUTE_P2C, 3, 5, err, sizeof err), 0);
        assert_int_equal(sim_run(&w, &p, NULL, NULL, &r[off], err, sizeof err), 0);
        route_policy_free(&p);
        sim_workload_free(&w);
    }
    assert_non_null(r[0].heat);
    assert_null(r[1].heat);
    uint64_t sum = 0;
    for (size_t i = 0; i < (size_t)3 * 3 * 20; i++)
        sum += r[0].heat[i];
    assert_int_equal(sum, (uint64_t)r[0].tokens * 3 * 3);
    assert_memory_equal(r[0].req, r[1].req, (size_t)r[0].n * sizeof *r[0].req);
    assert_int_equal(r[0].steps, r[1].steps);
    assert_true(r[0].tpot_p99_ms == r[1].tpot_p99_ms);
    assert_true(r[0].distinct_per_step == r[1].distinct_per_step);
    assert_memory_equal(r[0].served, r[1].served, 3 * sizeof *r[0].served);
    sim_result_free(&r[0]);
    sim_result_free(&r[1]);
    trace_free(t);
}

static void test_distinct_oracle(void **state)
{
    (void)state;
    /* stamps of L*E*4 bytes: 144 B and 2.4 KB (row by row), 72 KB and
     * 70 KB (layer by layer); ids of 1, 2, 2 and 1 bytes */
    static const struct { int L, E, k; } geo[] = {{3, 12, 3}, {2, 300, 4}, {2, 9000, 4},
                                                  {70, 256, 2}};
    for (size_t g = 0; g < sizeof geo / sizeof *geo; g++) {
        trace_t *t = sampled_trace(120, geo[g].L, geo[g].E, geo[g].k, 21 + g);
        sim_config c;
        config(&c);
        sim_workload w;
        assert_int_equal(sim_workload_init(&w, t, &c, NULL, err, sizeof err), 0);
        route_policy p;
        assert_int_equal(route_policy_init(&p, ROUTE_RANDOM, 3, 5, err, sizeof err), 0);
        steps S = {0};
        sim_result res;
        assert_int_equal(sim_run(&w, &p, on_step, &S, &res, err, sizeof err), 0);
        assert_int_equal(S.n, res.steps);
        assert_true(res.mean_batch > 2); /* members share steps */
        check_distinct(&w, &res, &S);
        for (int64_t s = 0; s < S.n; s++)
            free(S.s[s].U);
        free(S.s);
        sim_result_free(&res);
        route_policy_free(&p);
        sim_workload_free(&w);
        trace_free(t);
    }
}

/* The alias table's own probabilities: slot i yields id[i] with
 * prob[i] / 2^32 and id[alias[i]] otherwise, each slot 1/n; they must be
 * the counts' shares, for profiles of every shape, loaded one after
 * another into one sampler (a slot left from the last load would show). */
static void test_alias_table(void **state)
{
    (void)state;
    enum { E = 200 };
    sim_sampler sp;
    assert_int_equal(sim_sampler_init(&sp, E, err, sizeof err), 0);
    rng_t g;
    rng_seed(&g, 5);
    for (int rep = 0; rep < 3000; rep++) {
        uint16_t counts[E];
        int shape = rep % 6;
        double total = 0;
        for (int e = 0; e < E; e++) {
            int x = (int)rng_below(&g, 1000), c;
            if (shape == 0)
                c = x < 500 ? 0 : 1 + x % 7; /* sparse */
            else if (shape == 1)
                c = 3; /* flat */
            else if (shape == 2)
                c = e == 7 ? 60000 : x < 100; /* one big */
            else if (shape == 3)
                c = e < 2 ? 1000 : e % 3 ? 1 : 0; /* two big */
            else if (shape == 4)
                c = 1 + x * x % 4000; /* skewed */
            else
                c = x % 5 ? 0 : 1 + x % 3; /* few, small: rounding at the end */
            counts[e] = (uint16_t)c;
            total += counts[e];
        }
        for (int i = 0; i < E; i++) /* poison: every slot must be written */
            sp.prob[i] = 12345, sp.alias[i] = (uint16_t)(E - 1 - i);
        int n = sim_sampler_load(&sp, counts, E);
        double got[E] = {0};
        for (int i = 0; i < n; i++) {
            double keep = sp.prob[i] / 4294967296.0;
            got[sp.id[i]] += keep / n;
            got[sp.id[sp.alias[i]]] += (1 - keep) / n;
        }
        for (int e = 0; e < E; e++)
            if (fabs(got[e] - counts[e] / total) > 1e-6)
                fail_msg("shape %d expert %d: the table gives %.9f, the counts %.9f", shape, e,
                         got[e], counts[e] / total);
    }
    sim_sampler_free(&sp);
}

static void test_counter(void **state)
{
    (void)state;
    static const struct { int L, E, k; } geo[] = {
        {3, 8, 2}, {4, 64, 4}, {5, 65, 3}, {2, 128, 8}, {3, 129, 5}, {2, 192, 7},
        {3, 193, 6}, {2, 256, 8}, {2, 256, 9}, {1, 256, 1}, {2, 300, 4}};
    rng_t g;
    rng_seed(&g, 99);
    for (size_t x = 0; x < sizeof geo / sizeof *geo; x++) {
        int L = geo[x].L, E = geo[x].E, k = geo[x].k, bytes = E <= 256 ? 1 : 2;
        enum { NB = 37 };
        /* each row its own allocation, so a read past a row's end is
         * ASan's to see */
        void *rows[NB];
        for (int b = 0; b < NB; b++) {
            rows[b] = malloc((size_t)L * k * bytes);
            assert_non_null(rows[b]);
            for (int i = 0; i < L * k; i++) {
                /* skewed towards the ends of the range: the words' edges */
                int e = (int)rng_below(&g, 4) ? (int)rng_below(&g, (uint64_t)E)
                                             : E - 1 - (int)rng_below(&g, 3 < E ? 3 : 1);
                if (bytes == 1)
                    ((uint8_t *)rows[b])[i] = (uint8_t)e;
                else
                    ((uint16_t *)rows[b])[i] = (uint16_t)e;
            }
        }
        for (int simd_ok = 0; simd_ok <= 1; simd_ok++) {
            sim_distinct d;
            assert_int_equal(sim_distinct_init(&d, L, E, k, bytes, simd_ok, err, sizeof err), 0);
            if (!simd_ok)
                assert_false(d.simd);
            for (int nb = 1; nb <= NB; nb += 9)
                for (int rep = 0; rep < 2; rep++) { /* a second count starts clean */
                    int U[8];
                    sim_distinct_count(&d, (const void *const *)rows, nb, U);
                    for (int l = 0; l < L; l++) {
                        char seen[300] = {0};
                        int u = 0;
                        for (int b = 0; b < nb; b++)
                            for (int j = 0; j < k; j++) {
                                size_t at = (size_t)l * k + j;
                                int e = bytes == 1 ? ((uint8_t *)rows[b])[at]
                                                   : ((uint16_t *)rows[b])[at];
                                u += !seen[e];
                                seen[e] = 1;
                            }
                        if (U[l] != u)
                            fail_msg("L %d E %d k %d simd %d nb %d layer %d: %d, the set "
                                     "count %d", L, E, k, d.simd, nb, l, U[l], u);
                    }
                }
            sim_distinct_free(&d);
        }
        for (int b = 0; b < NB; b++)
            free(rows[b]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_are_the_draws),
        cmocka_unit_test(test_pool_threads),
        cmocka_unit_test(test_distinct_oracle),
        cmocka_unit_test(test_no_heat),
        cmocka_unit_test(test_counter),
        cmocka_unit_test(test_alias_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
