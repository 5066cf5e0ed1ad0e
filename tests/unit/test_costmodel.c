/* test_costmodel.c - the step-latency model (costmodel.h): the defaults
 * against the paper's numbers, the cost file, and the least-squares fit
 * (costfit.h).
 *
 * Oracles: hand arithmetic for the step time; known coefficients that a
 * synthetic profile was built from (exact recovery without noise, within
 * tolerance with noise); the KKT conditions of non-negative least squares
 * computed here from the residuals; a fixed-point of Little's law for the
 * paper's end-to-end TPOT. */
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

#include "costfit.h"
#include "costmodel.h"
#include "rng.h"

#define ERRLEN 512

static char tmpdir[] = "/tmp/eldr_test_costmodel.XXXXXX";

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", tmpdir, name);
    return buf[i];
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ---- defaults ---- */

static double layer_time(const cost_model *m, int U)
{
    return m->a + m->b * U;
}

/* Figure 2: one MoE layer is ~4.7x slower at 128 active experts than 16,
 * and (at fixed U) independent of the batch size. */
static void test_default_figure2(void **state)
{
    (void)state;
    cost_model m;
    cost_model_default(&m);
    double ratio = layer_time(&m, 128) / layer_time(&m, 16);
    assert_true(fabs(ratio - 4.7) < 0.05);
    int U1[1] = {64};
    /* one-layer step time minus the non-MoE part is the same at B=32, 128 */
    double t32 = cost_step_time(&m, 1, U1, 32, 0) - m.t0 - m.c * 32;
    double t128 = cost_step_time(&m, 1, U1, 128, 0) - m.t0 - m.c * 128;
    assert_true(fabs(t32 - t128) < 1e-15);
}

/* End to end: 48 layers, 128 experts, top-8, 16 decoders at 60 req/s,
 * 512 output tokens. Little's law per worker: B = (60/16) * 512 * TPOT;
 * uniform routing: U = E (1 - (1 - k/E)^B). The fixed point must land in
 * the paper's 22-27 ms. (The simulator's measured value is in the doc.) */
static void test_default_tpot(void **state)
{
    (void)state;
    cost_model m;
    cost_model_default(&m);
    int L = 48, E = 128, k = 8, U[48];
    double tpot = 0.02, B = 0;
    for (int it = 0; it < 200; it++) {
        B = 60.0 / 16 * 512 * tpot;
        double u = E * (1 - pow(1 - (double)k / E, B));
        for (int l = 0; l < L; l++)
            U[l] = (int)lround(u);
        tpot = cost_step_time(&m, L, U, (int)lround(B), 0);
    }
    assert_true(tpot > 0.022 && tpot < 0.027);
    assert_true(B > 30 && B < 70);
}

static void test_step_time_arithmetic(void **state)
{
    (void)state;
    cost_model m = {.t0 = 1e-3, .a = 2e-5, .b = 3e-6, .c = 4e-5, .d = 1e-9};
    int U[3] = {10, 20, 30};
    double want = 1e-3 + 3 * 2e-5 + 3e-6 * 60 + 4e-5 * 7 + 1e-9 * 5000;
    assert_true(fabs(cost_step_time(&m, 3, U, 7, 5000) - want) < 1e-15);
    assert_true(fabs(cost_step_time(&m, 0, U, 0, 0) - 1e-3) < 1e-18);
}

/* ---- cost file ---- */

static void test_file_round_trip(void **state)
{
    (void)state;
    char err[ERRLEN];
    cost_model m = {.t0 = 1.234567890123e-3, .a = 4.1e-5, .b = 3.3333333333e-6,
                    .c = 2.5e-5, .d = 7e-10}, back;
    const char *p = tmp_path("rt.json");
    assert_int_equal(cost_model_save(p, &m, "{\"r2\": 0.99, \"t0\": 99}", err, sizeof err), 0);
    assert_int_equal(cost_model_load(p, &back, err, sizeof err), 0);
    assert_true(back.t0 == m.t0 && back.a == m.a && back.b == m.b && back.c == m.c &&
                back.d == m.d);   /* extra "t0" never overrides the coefficient */
    cost_model def;
    cost_model_default(&def);
    assert_int_equal(cost_model_save(p, &def, NULL, err, sizeof err), 0);
    assert_int_equal(cost_model_load(p, &back, err, sizeof err), 0);
    assert_memory_equal(&back, &def, sizeof def);
}

static void expect_load_error(const char *text, const char *needle)
{
    char err[ERRLEN] = "";
    cost_model m = {0};
    const char *p = tmp_path("bad.json");
    write_file(p, text);
    assert_int_equal(cost_model_load(p, &m, err, sizeof err), -1);
    if (!strstr(err, needle))
        fail_msg("error '%s' lacks '%s'", err, needle);
    assert_null(strchr(err, '\n'));
}

#define GOOD_HEAD "{\"format\":\"eldr-cost\",\"version\":1,"

static void test_file_validation(void **state)
{
    (void)state;
    expect_load_error(GOOD_HEAD "\"t0\":1,\"a\":1,\"b\":1,\"c\":1}", "missing key \"d\"");
    expect_load_error(GOOD_HEAD "\"t0\":1,\"a\":-1,\"b\":1,\"c\":1,\"d\":0}", "\"a\"");
    expect_load_error(GOOD_HEAD "\"t0\":1,\"a\":1,\"b\":\"x\",\"c\":1,\"d\":0}",
                      "\"b\" is not a number");
    expect_load_error("{\"format\":\"eldr-model\",\"version\":1,\"t0\":1,\"a\":1,\"b\":1,"
                      "\"c\":1,\"d\":0}", "format");
    expect_load_error("{\"format\":\"eldr-cost\",\"version\":2,\"t0\":1,\"a\":1,\"b\":1,"
                      "\"c\":1,\"d\":0}", "version");
    expect_load_error("{\"format\":\"eldr-cost\",", "bad.json");
    expect_load_error("[1,2]", "not a JSON object");
    expect_load_error(GOOD_HEAD "\"t0\":1,\"t0\":2,\"a\":1,\"b\":1,\"c\":1,\"d\":0}",
                      "duplicate");
    char err[ERRLEN];
    cost_model m;
    assert_int_equal(cost_model_load(tmp_path("absent.json"), &m, err, sizeof err), -1);
}

/* A failed save leaves the old file intact and no temporary behind. */
static void test_save_atomic(void **state)
{
    (void)state;
    char err[ERRLEN];
    cost_model good, bad, back;
    cost_model_default(&good);
    bad = good;
    bad.c = NAN;
    const char *p = tmp_path("atomic.json");
    assert_int_equal(cost_model_save(p, &good, NULL, err, sizeof err), 0);
    assert_int_equal(cost_model_save(p, &bad, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "c"));
    assert_int_equal(cost_model_save(p, &good, "[not an object]", err, sizeof err), -1);
    assert_int_equal(cost_model_load(p, &back, err, sizeof err), 0);
    assert_memory_equal(&back, &good, sizeof good);
    assert_int_equal(cost_model_save(tmp_path("no/such/dir.json"), &good, NULL, err,
                                     sizeof err), -1);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", tmpdir);
    assert_int_not_equal(system(cmd), 0);
}

/* ---- costfit ---- */

typedef struct synth {
    cost_model truth;
    int L, rows, per_layer, kv, vary_layers;
    double noise_s;
    uint64_t seed;
} synth;

/* Write a synthetic profile; U per layer drawn at random. */
static const char *write_profile(const char *name, const synth *s)
{
    const char *p = tmp_path(name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    rng_t g;
    rng_seed(&g, s->seed);
    fprintf(f, "# synthetic\nbatch%s", s->kv ? ",kv_tokens" : "");
    if (s->per_layer)
        for (int l = 0; l < s->L; l++)
            fprintf(f, ",U%d", l);
    else
        fprintf(f, ",U_sum,layers");
    fprintf(f, ",step_s\n");
    for (int r = 0; r < s->rows; r++) {
        int B = 1 + (int)rng_below(&g, 200);
        long kv = s->kv ? (long)B * (long)(100 + rng_below(&g, 3000)) : 0;
        int L = s->vary_layers ? 2 + (int)rng_below(&g, (uint64_t)s->L - 1) : s->L;
        long usum = 0;
        fprintf(f, "%d", B);
        if (s->kv)
            fprintf(f, ",%ld", kv);
        for (int l = 0; l < L; l++) {
            int u = 4 + (int)rng_below(&g, 120);
            usum += u;
            if (s->per_layer)
                fprintf(f, ",%d", u);
        }
        if (!s->per_layer)
            fprintf(f, ",%ld,%d", usum, L);
        double t = s->truth.t0 + L * s->truth.a + s->truth.b * (double)usum +
                   s->truth.c * B + s->truth.d * (double)kv;
        fprintf(f, ",%.17g\n", t + s->noise_s * rng_normal(&g));
    }
    fclose(f);
    return p;
}

static int fit_file(const char *p, costfit_profile *prof, costfit_result *res, char *err)
{
    if (costfit_read_csv(p, prof, err, ERRLEN) < 0)
        return -1;
    int rc = costfit_fit(prof, res, err, ERRLEN);
    if (rc < 0)
        costfit_profile_free(prof);
    return rc;
}

static void assert_rel(double got, double want, double tol, const char *what)
{
    double e = fabs(got - want) / fmax(fabs(want), 1e-300);
    if (e > tol)
        fail_msg("%s: got %.17g want %.17g (rel err %.3g > %.3g)", what, got, want, e, tol);
}

static void test_fit_exact_per_layer(void **state)
{
    (void)state;
    synth s = {.truth = {.t0 = 1.1e-3, .a = 3e-5, .b = 3.5e-6, .c = 2.7e-5, .d = 4e-9},
               .L = 12, .rows = 60, .per_layer = 1, .kv = 1, .seed = 3};
    costfit_profile p;
    costfit_result r;
    char err[ERRLEN];
    assert_int_equal(fit_file(write_profile("exact.csv", &s), &p, &r, err), 0);
    assert_int_equal(p.L, 12);
    assert_int_equal(r.n_params, 4);
    assert_false(r.fitted[COSTFIT_A]);
    assert_rel(r.intercept, s.truth.t0 + 12 * s.truth.a, 1e-9, "T0");
    assert_rel(r.m.t0, s.truth.t0 + 12 * s.truth.a, 1e-9, "t0 holds T0");
    assert_true(r.m.a == 0);
    assert_rel(r.m.b, s.truth.b, 1e-9, "b");
    assert_rel(r.m.c, s.truth.c, 1e-9, "c");
    assert_rel(r.m.d, s.truth.d, 1e-9, "d");
    assert_true(r.r2 > 1 - 1e-12);
    costfit_result_free(&r);
    costfit_profile_free(&p);
}

static void test_fit_exact_varying_depth(void **state)
{
    (void)state;
    synth s = {.truth = {.t0 = 8e-4, .a = 5e-5, .b = 3e-6, .c = 3e-5},
               .L = 40, .rows = 50, .vary_layers = 1, .seed = 4};
    costfit_profile p;
    costfit_result r;
    char err[ERRLEN];
    assert_int_equal(fit_file(write_profile("depth.csv", &s), &p, &r, err), 0);
    assert_true(p.layers_vary);
    assert_true(r.fitted[COSTFIT_A] && !r.fitted[COSTFIT_D]);
    assert_rel(r.m.t0, s.truth.t0, 1e-9, "t0");
    assert_rel(r.m.a, s.truth.a, 1e-9, "a");
    assert_rel(r.m.b, s.truth.b, 1e-9, "b");
    assert_rel(r.m.c, s.truth.c, 1e-9, "c");
    assert_true(r.m.d == 0);
    costfit_result_free(&r);
    costfit_profile_free(&p);
}

static void test_fit_noisy(void **state)
{
    (void)state;
    synth s = {.truth = {.t0 = 1.5e-3, .b = 3.5e-6, .c = 3e-5, .d = 2e-9},
               .L = 24, .rows = 2000, .per_layer = 0, .kv = 1, .noise_s = 5e-5, .seed = 5};
    costfit_profile p;
    costfit_result r;
    char err[ERRLEN];
    assert_int_equal(fit_file(write_profile("noisy.csv", &s), &p, &r, err), 0);
    assert_rel(r.intercept, s.truth.t0, 0.05, "T0");
    assert_rel(r.m.b, s.truth.b, 0.02, "b");
    assert_rel(r.m.c, s.truth.c, 0.03, "c");
    assert_rel(r.m.d, s.truth.d, 0.03, "d");
    assert_rel(r.rmse, s.noise_s, 0.1, "rmse ~ noise sd");
    assert_true(r.r2 > 0.99 && r.r2 < 1);
    /* worst residuals: sorted by |residual|, and none larger elsewhere */
    int64_t w[5];
    assert_int_equal(costfit_worst(&p, &r, 5, w), 5);
    double prev = INFINITY, fifth;
    for (int i = 0; i < 5; i++) {
        double e = fabs(p.step_s[w[i]] - r.pred[w[i]]);
        assert_true(e <= prev);
        prev = e;
    }
    fifth = prev;
    int above = 0;
    for (int64_t i = 0; i < p.n; i++)
        above += fabs(p.step_s[i] - r.pred[i]) > fifth;
    assert_true(above <= 4);
    costfit_result_free(&r);
    costfit_profile_free(&p);
}

/* True d = 0 with noise: when the free fit makes d negative, the result
 * must satisfy the NNLS optimality (KKT) conditions. */
static void test_fit_nonnegative(void **state)
{
    (void)state;
    int clamped_seen = 0;
    for (uint64_t seed = 10; seed < 30; seed++) {
        synth s = {.truth = {.t0 = 1e-3, .b = 3e-6, .c = 2e-5, .d = 0}, .L = 4, .rows = 40,
                   .per_layer = 1, .kv = 1, .noise_s = 2e-4, .seed = seed};
        costfit_profile p;
        costfit_result r;
        char err[ERRLEN];
        assert_int_equal(fit_file(write_profile("nn.csv", &s), &p, &r, err), 0);
        double grad[4] = {0}, beta[4] = {r.m.t0, r.m.b, r.m.c, r.m.d};
        for (int64_t i = 0; i < p.n; i++) {
            double res = p.step_s[i] - r.pred[i];
            double x[4] = {1, p.u_sum[i], p.batch[i], p.kv[i]};
            for (int j = 0; j < 4; j++)
                grad[j] += x[j] * res;   /* -1/2 dRSS/dbeta_j */
        }
        double scale[4] = {(double)p.n, 1e3 * (double)p.n, 1e2 * (double)p.n, 1e5 * (double)p.n};
        for (int j = 0; j < 4; j++) {
            assert_true(beta[j] >= 0);
            if (beta[j] > 0)
                assert_true(fabs(grad[j]) / scale[j] < 1e-9);
            else
                assert_true(grad[j] / scale[j] < 1e-9);
        }
        clamped_seen += r.clamped[COSTFIT_D];
        costfit_result_free(&r);
        costfit_profile_free(&p);
    }
    assert_true(clamped_seen > 0);   /* the constrained path was exercised */
}

static void expect_fit_error(const char *csv, const char *needle)
{
    const char *p = tmp_path("err.csv");
    write_file(p, csv);
    costfit_profile prof;
    costfit_result r;
    char err[ERRLEN] = "";
    assert_int_equal(fit_file(p, &prof, &r, err), -1);
    if (!strstr(err, needle))
        fail_msg("error '%s' lacks '%s'", err, needle);
    assert_null(strchr(err, '\n'));
}

static void test_fit_rank_deficient(void **state)
{
    (void)state;
    expect_fit_error("batch,U_sum,layers,step_ms\n64,100,8,5\n64,200,8,6\n64,300,8,7\n"
                     "64,150,8,5.5\n", "\"batch\" is constant");
    expect_fit_error("batch,kv_tokens,U0,step_ms\n1,3,10,5\n2,6,20,6\n3,9,15,7\n4,12,30,8\n"
                     "5,15,9,9\n", "\"kv_tokens\" is a linear combination");
    expect_fit_error("batch,U0,step_ms\n1,10,5\n2,20,6\n", "2 rows for 3 unknowns");
    expect_fit_error("batch,U0,step_ms\n1,0,5\n2,0,6\n3,0,7\n", "\"U\" is constant");
}

static void test_csv_errors(void **state)
{
    (void)state;
    expect_fit_error("batch,U0,stepms\n1,2,3\n", "unknown column \"stepms\"");
    expect_fit_error("batch,U0,U2,step_ms\n1,2,3,4\n", "U1 is missing");
    expect_fit_error("batch,U0,step_ms\n1,2,3\n1,x,3\n", "line 3: column \"U0\": \"x\"");
    expect_fit_error("batch,U0,step_ms\n1,2,3\n1,2\n", "line 3: 2 fields, the header has 3");
    expect_fit_error("batch,U0,step_ms,step_s\n1,2,3,4\n", "exactly one");
    expect_fit_error("batch,step_ms\n1,3\n", "missing expert columns");
    expect_fit_error("U0,step_ms\n1,3\n", "missing column \"batch\"");
    expect_fit_error("", "empty file");
    expect_fit_error("batch,U0,step_ms\n", "no data rows");
    expect_fit_error("batch,U0,step_ms\n1,-2,3\n", "line 2: column \"U0\"");
    expect_fit_error("batch,U_sum,layers,step_ms\n1,2,0,3\n", "\"layers\"");
    expect_fit_error("batch,U0,U0,step_ms\n1,2,2,3\n", "appears twice");
    expect_fit_error("batch,U0,U_sum,layers,step_ms\n1,2,2,1,3\n", "not both");
    expect_fit_error("batch,U0,step_ms\n1,2,0\n", "must be > 0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_figure2),
        cmocka_unit_test(test_default_tpot),
        cmocka_unit_test(test_step_time_arithmetic),
        cmocka_unit_test(test_file_round_trip),
        cmocka_unit_test(test_file_validation),
        cmocka_unit_test(test_save_atomic),
        cmocka_unit_test(test_fit_exact_per_layer),
        cmocka_unit_test(test_fit_exact_varying_depth),
        cmocka_unit_test(test_fit_noisy),
        cmocka_unit_test(test_fit_nonnegative),
        cmocka_unit_test(test_fit_rank_deficient),
        cmocka_unit_test(test_csv_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
