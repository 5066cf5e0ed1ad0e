/* test_costrule.c - the cost rule (costrule.h).
 *
 * Oracles: the rule's algebra against a brute-force evaluation of the
 * cost model (every joint outcome of the members' independent expert
 * activations enumerated, its step time from cost_step_time, weighted by
 * its probability); the estimate after adds and removes against a state
 * built afresh from the survivors, and byte-equal to a fresh one once
 * every member left; hand arithmetic for the cells of a request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "costrule.h"
#include "err.h"
#include "rng.h"
#include "sim.h"
#include "util_tracefix.h"

#define REAL_DATA "../shared/data/gptoss20b-routing.h5"

static char err[ELDR_ERRLEN];

static void init_state(cost_state *s, int K, int L, int E, int max_batch)
{
    cost_model m;
    cost_model_default(&m);
    m.d = 2e-6;   /* every term in play, the KV one too */
    assert_int_equal(cost_state_init(s, K, L, E, &m, max_batch, err, sizeof err), 0);
}

static void set_req(cost_req *x, const uint16_t *c, int L, int E, int k)
{
    assert_int_equal(cost_req_set(x, c, L, E, k, err, sizeof err), 0);
}

static void test_req_cells(void **state)
{
    (void)state;
    /* L 3, E 4, top-2: layer 0 of a 3-token prompt, layer 1 empty (a
     * dense layer), layer 2 with an expert every token picks */
    uint16_t c[12] = {3, 2, 1, 0, 0, 0, 0, 0, 3, 1, 1, 1};
    cost_req x = {0};
    set_req(&x, c, 3, 4, 2);
    assert_int_equal(x.n, 7);
    assert_true(fabs(x.kv - 3.0) < 1e-12);
    const float want[12] = {1.0f, 2 / 3.0f, 1 / 3.0f, 0, 0, 0, 0, 0, 1.0f, 1 / 3.0f,
                            1 / 3.0f, 1 / 3.0f};
    for (int i = 0; i < 12; i++)
        assert_true(fabsf(x.dense[i] - want[i]) < 1e-6f);
    cost_req_sparse(&x);
    assert_int_equal(x.n, 7);
    const uint32_t idx[7] = {0, 1, 2, 8, 9, 10, 11};
    for (int i = 0; i < 7; i++) {
        assert_int_equal(x.idx[i], idx[i]);
        assert_true(fabsf(x.q[i] - want[idx[i]]) < 1e-6f);
    }
    /* all zero: nothing but B */
    uint16_t z[12] = {0};
    set_req(&x, z, 3, 4, 2);
    assert_int_equal(x.n, 0);
    assert_true(x.kv == 0);
    /* bad geometry is an error, not a crash */
    assert_int_equal(cost_req_set(&x, z, 0, 4, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "geometry"));
    cost_req_free(&x);
}

/* ---- brute force ---- */

#define BL 2
#define BE 2
#define BC (BL * BE)
#define BMAX 4   /* members + x */

/* q of a member by cell, in double, from its counts (the definition). */
static void q_of(const uint16_t *c, int k, double *q)
{
    for (int l = 0; l < BL; l++) {
        double sum = 0;
        for (int e = 0; e < BE; e++)
            sum += c[l * BE + e];
        for (int e = 0; e < BE; e++) {
            double v = sum > 0 ? k * c[l * BE + e] / sum : 0;
            q[l * BE + e] = v > 1 ? 1 : v;
        }
    }
}

/* E[t_step] over every joint outcome of n members' activations, the
 * batch counted as B requests holding kv tokens. */
static double expected_step(const cost_model *m, double q[][BC], int n, int B, int64_t kv)
{
    int bits = n * BC;
    double sum = 0;
    for (uint32_t o = 0; o < (1u << bits); o++) {
        double p = 1;
        int U[BL] = {0};
        int on[BC] = {0};
        for (int r = 0; r < n; r++)
            for (int c = 0; c < BC; c++) {
                int a = (o >> (r * BC + c)) & 1;
                p *= a ? q[r][c] : 1 - q[r][c];
                on[c] |= a;
            }
        if (p == 0)
            continue;
        for (int c = 0; c < BC; c++)
            U[c / BE] += on[c];
        sum += p * cost_step_time(m, BL, U, B, kv);
    }
    return sum;
}

/* Counts of a prompt of tokens tokens with top-2 picks per layer (so the
 * KV, tokens, is whole): random, sometimes an expert every token takes. */
static void random_prompt(rng_t *r, uint16_t *c, int tokens)
{
    memset(c, 0, sizeof(uint16_t) * BC);
    for (int l = 0; l < BL; l++)
        for (int t = 0; t < tokens; t++) {
            /* top-2 of 2 experts: both, so skew comes from top-1 runs */
            if (rng_below(r, 3) == 0) {
                c[l * BE + 0]++;
                c[l * BE + 1]++;
            } else {
                c[l * BE + (int)rng_below(r, BE)] += 2;
            }
        }
}

static void test_brute_force(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 33);
    for (int round = 0; round < 60; round++) {
        int max_batch = round % 3 == 0 ? 2 : 256;
        cost_state s;
        init_state(&s, 3, BL, BE, max_batch);
        uint16_t c[BMAX][BC];
        double q[3][BMAX][BC];
        int B[3], tokens[3][BMAX];
        int64_t load[3], kv[3] = {0};
        cost_req x = {0};
        for (int k = 0; k < 3; k++) {
            B[k] = (int)rng_below(&r, 4);   /* 0..3 members */
            load[k] = B[k];
            for (int j = 0; j < B[k]; j++) {
                tokens[k][j] = 1 + (int)rng_below(&r, 5);
                random_prompt(&r, c[j], tokens[k][j]);
                q_of(c[j], 2, q[k][j]);
                set_req(&x, c[j], BL, BE, 2);
                cost_state_add(&s, k, &x);
                kv[k] += tokens[k][j];
            }
        }
        uint16_t cx[BC];
        int tx = 1 + (int)rng_below(&r, 5);
        random_prompt(&r, cx, tx);
        set_req(&x, cx, BL, BE, 2);
        route_decision d;
        cost_terms terms[3];
        int w = cost_decide(&s, &x, load, NULL, &d, terms);
        assert_int_equal(d.rule, RULE_COST);
        assert_true(d.has_cost);
        for (int k = 0; k < 3; k++) {
            /* the oracle: members, then members + x */
            double qq[BMAX][BC];
            for (int j = 0; j < B[k]; j++)
                memcpy(qq[j], q[k][j], sizeof qq[j]);
            q_of(cx, 2, qq[B[k]]);
            int M = max_batch, b = B[k] < M ? B[k] : M - 1;
            double before = B[k] ? expected_step(&s.m, qq, B[k], b, kv[k]) : 0;
            double after = expected_step(&s.m, qq, B[k] + 1, b + 1, kv[k] + tx);
            double wait = B[k] < M ? 0 : (B[k] - M + 1) * expected_step(&s.m, qq, B[k], M, kv[k]);
            double want = ((b + 1) * after - b * before + wait) * 1e3;
            assert_true(fabs(d.cost[k] - want) <= 1e-5 * want);
            assert_true(fabs(terms[k].cost - want) <= 1e-5 * want);
            assert_true(d.cost[w] <= d.cost[k] + 1e-9 * fabs(d.cost[k]));
            if (B[k] >= M)
                assert_true(terms[k].wait > 0);
        }
        cost_req_free(&x);
        cost_state_free(&s);
    }
}

/* ---- the estimate ---- */

#define SL 3
#define SE 8
#define SC (SL * SE)

static void random_counts(rng_t *r, uint16_t *c)
{
    memset(c, 0, sizeof(uint16_t) * SC);
    int tokens = 1 + (int)rng_below(r, 6);
    for (int l = 0; l < SL; l++) {
        if (rng_below(r, 7) == 0)
            continue;   /* a layer without counts */
        for (int t = 0; t < tokens; t++) {
            int a = (int)rng_below(r, SE), b = (a + 1 + (int)rng_below(r, SE - 1)) % SE;
            if (rng_below(r, 4) == 0)
                a = 0;   /* expert 0 often taken by every token: q = 1 */
            if (b == a)
                b = (a + 1) % SE;
            c[l * SE + a]++;
            c[l * SE + b]++;
        }
    }
}

static void check_like_fresh(const cost_state *s, int K, uint16_t (*c)[SC], const int *where,
                             int n)
{
    cost_state f;
    init_state(&f, K, SL, SE, 256);
    cost_req x = {0};
    for (int i = 0; i < n; i++)
        if (where[i] >= 0) {
            set_req(&x, c[i], SL, SE, 2);
            cost_state_add(&f, where[i], &x);
        }
    for (int k = 0; k < K; k++) {
        assert_int_equal(s->members[k], f.members[k]);
        assert_true(fabs(s->kv[k] - f.kv[k]) < 1e-9);
        assert_true(fabs(cost_state_expected_u(s, k) - cost_state_expected_u(&f, k)) < 1e-4);
        assert_true(cost_state_expected_u(s, k) >= 0);
        for (size_t cc = 0; cc < f.cells; cc++) {
            float p = s->P[(size_t)k * f.cells + cc];
            assert_true(p >= 0.0f && p <= 1.0f);
            assert_true(fabsf(p - f.P[(size_t)k * f.cells + cc]) < 1e-5f);
        }
    }
    cost_req_free(&x);
    cost_state_free(&f);
}

static void assert_fresh(const cost_state *s)
{
    cost_state f;
    init_state(&f, s->K, s->L, s->E, s->max_batch);
    size_t n = (size_t)s->K * s->cells;
    assert_memory_equal(s->prod, f.prod, n * sizeof *f.prod);
    assert_memory_equal(s->shift, f.shift, n * sizeof *f.shift);
    assert_memory_equal(s->sure, f.sure, n * sizeof *f.sure);
    assert_memory_equal(s->P, f.P, n * sizeof *f.P);
    assert_memory_equal(s->sumP, f.sumP, (size_t)s->K * sizeof *f.sumP);
    assert_memory_equal(s->members, f.members, (size_t)s->K * sizeof *f.members);
    assert_memory_equal(s->kv, f.kv, (size_t)s->K * sizeof *f.kv);
    /* a scattered sparse request leaves the scratch row zero again */
    assert_memory_equal(s->scratch, f.scratch, s->cells * sizeof *f.scratch);
    cost_state_free(&f);
}

static void test_add_remove(void **state)
{
    (void)state;
    enum { K = 3, N = 400 };
    rng_t r;
    rng_seed(&r, 7);
    static uint16_t c[N][SC];
    int where[N];
    cost_state s;
    init_state(&s, K, SL, SE, 256);
    cost_req x = {0}, kept = {0};
    int n = 0;
    for (int step = 0; step < 1500; step++) {
        int live = 0;
        for (int i = 0; i < n; i++)
            live += where[i] >= 0;
        if (n < N && (live == 0 || rng_below(&r, 5) < 3)) {
            random_counts(&r, c[n]);
            where[n] = (int)rng_below(&r, K);
            set_req(&x, c[n], SL, SE, 2);
            cost_state_add(&s, where[n], &x);
            n++;
        } else if (live) {
            int i;
            do
                i = (int)rng_below(&r, (uint64_t)n);
            while (where[i] < 0);
            set_req(&x, c[i], SL, SE, 2);
            if (step % 2) {
                /* a router's stored copy: sparse, no dense row (scattered
                 * by the core when it covers more than a third of the row) */
                cost_req_sparse(&x);
                kept = (cost_req){.n = x.n, .idx = x.idx, .q = x.q, .kv = x.kv};
                cost_state_remove(&s, where[i], &kept);
            } else {
                cost_state_remove(&s, where[i], &x);
            }
            where[i] = -1;
        }
        if (step % 50 == 0)
            check_like_fresh(&s, K, c, where, n);
    }
    check_like_fresh(&s, K, c, where, n);
    for (int i = 0; i < n; i++)
        if (where[i] >= 0) {
            set_req(&x, c[i], SL, SE, 2);
            cost_state_remove(&s, where[i], &x);
            where[i] = -1;
        }
    assert_fresh(&s);
    /* a remove with no member never drives anything negative */
    set_req(&x, c[0], SL, SE, 2);
    cost_state_remove(&s, 1, &x);
    assert_fresh(&s);
    /* reset = every member removed */
    cost_state_add(&s, 2, &x);
    cost_state_add(&s, 2, &x);
    cost_state_reset(&s, 2);
    assert_fresh(&s);
    cost_req_free(&x);
    cost_state_free(&s);
}

static void test_no_underflow(void **state)
{
    (void)state;
    /* 400 members each idle on cell 0 with probability 1/1000: the
     * product 1e-1200 is far below a double's range; removing all but
     * one must give 1/1000 back */
    cost_state s;
    init_state(&s, 1, 1, 2, 256);
    uint16_t c[2] = {999, 1001};   /* top-2, 1000 tokens: q = 0.999, 1.0 */
    cost_req x = {0};
    set_req(&x, c, 1, 2, 2);
    for (int i = 0; i < 400; i++)
        cost_state_add(&s, 0, &x);
    assert_true(s.P[0] == 0.0f);
    assert_true(s.shift[0] > 0);
    for (int i = 0; i < 399; i++)
        cost_state_remove(&s, 0, &x);
    double want = 1.0 - (double)x.dense[0];
    assert_true(fabs(s.P[0] - want) < 1e-6 * want + 1e-9);
    assert_int_equal(s.shift[0], 0);
    assert_true(s.P[1] == 0.0f);   /* q = 1: never idle while a member has it */
    cost_req_free(&x);
    cost_state_free(&s);
}

/* ---- decisions ---- */

static void test_balances_when_alike(void **state)
{
    (void)state;
    /* every worker holds the same kind of request: the rule is JSQ */
    enum { K = 4 };
    cost_state s;
    init_state(&s, K, SL, SE, 256);
    uint16_t c[SC];
    rng_t r;
    rng_seed(&r, 5);
    random_counts(&r, c);
    cost_req x = {0};
    set_req(&x, c, SL, SE, 2);
    int64_t load[K] = {3, 1, 2, 1};
    for (int k = 0; k < K; k++)
        for (int j = 0; j < load[k]; j++)
            cost_state_add(&s, k, &x);
    route_decision d;
    assert_int_equal(cost_decide(&s, &x, load, NULL, &d, NULL), 1);  /* least, lowest index */
    uint8_t elig[K] = {1, 0, 1, 1};
    assert_int_equal(cost_decide(&s, &x, load, elig, &d, NULL), 3);
    assert_true(isnan(d.cost[1]));
    assert_int_equal(d.n_cand, 3);
    uint8_t none[K] = {0};
    assert_int_equal(cost_decide(&s, &x, load, none, &d, NULL), -1);
    /* all empty: a tie of equal costs, the lowest index */
    cost_state e;
    init_state(&e, K, SL, SE, 256);
    int64_t zero[K] = {0};
    assert_int_equal(cost_decide(&e, &x, zero, NULL, &d, NULL), 0);
    for (int k = 1; k < K; k++)
        assert_true(d.cost[k] == d.cost[0]);
    /* a full batch waits: with worker 0 past max batch it is avoided
     * even when the others hold more */
    cost_state f;
    init_state(&f, 2, SL, SE, 2);
    int64_t lf[2] = {5, 1};
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < lf[k]; j++)
            cost_state_add(&f, k, &x);
    cost_terms t[2];
    assert_int_equal(cost_decide(&f, &x, lf, NULL, &d, t), 1);
    assert_true(t[0].wait > 0 && t[1].wait == 0);
    cost_req_free(&x);
    cost_state_free(&s);
    cost_state_free(&e);
    cost_state_free(&f);
}

static void test_locality_at_load(void **state)
{
    (void)state;
    /* two workers with 40 requests each: worker 1 holds requests on the
     * experts x uses, worker 0 on the others; x goes to worker 1, and
     * still does when worker 1 holds one more; with one request each
     * the extra one decides (low load: balance) */
    enum { L = 2, E = 16 };
    uint16_t a[L * E] = {0}, b[L * E] = {0};
    for (int l = 0; l < L; l++)
        for (int e = 0; e < 4; e++) {
            a[l * E + e] = 8;        /* x's kind: experts 0..3 */
            b[l * E + 8 + e] = 8;    /* the other kind: experts 8..11 */
        }
    cost_state s;
    init_state(&s, 2, L, E, 256);
    cost_req x = {0}, y = {0};
    set_req(&x, a, L, E, 2);
    set_req(&y, b, L, E, 2);
    for (int j = 0; j < 40; j++) {
        cost_state_add(&s, 0, &y);
        cost_state_add(&s, 1, &x);
    }
    route_decision d;
    int64_t eq[2] = {40, 40}, more[2] = {40, 41};
    assert_int_equal(cost_decide(&s, &x, eq, NULL, &d, NULL), 1);
    cost_state_add(&s, 1, &x);
    assert_int_equal(cost_decide(&s, &x, more, NULL, &d, NULL), 1);
    cost_state_reset(&s, 0);
    cost_state_reset(&s, 1);
    cost_state_add(&s, 0, &y);
    cost_state_add(&s, 1, &x);
    cost_state_add(&s, 1, &x);
    int64_t low[2] = {1, 2};
    assert_int_equal(cost_decide(&s, &x, low, NULL, &d, NULL), 0);
    cost_req_free(&x);
    cost_req_free(&y);
    cost_state_free(&s);
}

/* ---- in the simulator ---- */

/* Mean TPOT p50 (ms) of eldr-cost over seeds 1..n_seeds, the rule
 * predicting with rule (NULL: the simulator's own model). */
static double sim_p50(const trace_t *t, int K, double rate, int n_seeds, const cost_model *rule)
{
    double sum = 0;
    for (int seed = 1; seed <= n_seeds; seed++) {
        sim_config c;
        sim_config_default(&c);
        c.arrivals = SIM_ARRIVE_POISSON;
        c.rate = rate;
        c.seed = (uint64_t)seed;
        sim_workload w;
        if (sim_workload_init(&w, t, &c, NULL, err, sizeof err))
            fail_msg("sim_workload_init: %s", err);
        route_policy p;
        assert_int_equal(route_policy_init(&p, ROUTE_ELDR_COST, K, (uint64_t)seed, err,
                                           sizeof err), 0);
        p.cost_rule = rule;
        sim_result r;
        if (sim_run(&w, &p, NULL, NULL, &r, err, sizeof err))
            fail_msg("sim_run: %s", err);
        /* every decision is the rule's, every request served whole */
        assert_int_equal(r.rule_count[RULE_COST], w.n);
        int64_t served = 0;
        for (int k = 0; k < K; k++)
            served += r.served[k];
        assert_int_equal(served, w.n);
        for (int64_t i = 0; i < r.n; i++)
            assert_int_equal(r.req[i].tokens, w.out_tokens[i]);
        sum += r.tpot_p50_ms;
        sim_result_free(&r);
        route_policy_free(&p);
        sim_workload_free(&w);
    }
    return sum / n_seeds;
}

static void test_sim_fixture(void **state)
{
    (void)state;
    trace_t *t = tracefix_make(150, 4, 16, 3, 19);
    assert_non_null(t);
    double p = sim_p50(t, 3, 400, 2, NULL);
    assert_true(isfinite(p) && p > 0);
    trace_free(t);
}

/* The rule predicting with a model 30% off in one coefficient, against
 * the simulator's own: the loss on the real trace at K 4, 120 req/s
 * (docs/routing.md states it). */
static void test_misjudged_model(void **state)
{
    (void)state;
    if (access(REAL_DATA, R_OK) != 0) {
        print_message("skipping: %s not found\n", REAL_DATA);
        skip();
    }
    trace_t *t = NULL;
    if (trace_load(REAL_DATA, &t, err, sizeof err))
        fail_msg("%s", err);
    enum { SEEDS = 5 };
    double exact = sim_p50(t, 4, 120, SEEDS, NULL);
    const char *name[4] = {"t0", "a", "b", "c"};
    double worst = 0;
    for (int coef = 0; coef < 4; coef++)
        for (int sgn = -1; sgn <= 1; sgn += 2) {
            cost_model m;
            cost_model_default(&m);
            double *v[4] = {&m.t0, &m.a, &m.b, &m.c};
            *v[coef] *= 1 + 0.3 * sgn;
            double p = sim_p50(t, 4, 120, SEEDS, &m);
            double loss = (p / exact - 1) * 100;
            print_message("rule's %s %+d%%: TPOT p50 %.4f ms, %+.2f%% against the exact "
                          "model's %.4f ms\n", name[coef], 30 * sgn, p, loss, exact);
            if (loss > worst)
                worst = loss;
        }
    print_message("worst loss %.2f%%\n", worst);
    assert_true(worst < 2.0);
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_req_cells),
        cmocka_unit_test(test_brute_force),
        cmocka_unit_test(test_add_remove),
        cmocka_unit_test(test_no_underflow),
        cmocka_unit_test(test_balances_when_alike),
        cmocka_unit_test(test_locality_at_load),
        cmocka_unit_test(test_sim_fixture),
        cmocka_unit_test(test_misjudged_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
