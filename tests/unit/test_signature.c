/* test_signature.c - signatures (src/core/signature.h) against hand-computed
 * cases, the IDF formula, the layer mask, the one global norm, the zero
 * case, batch == per row, and a numpy oracle on the real gpt-oss-20b trace
 * (tests/fixtures/sig_oracle.txt, made by tests/fixtures/make_sig_oracle.py).
 *
 * The hand cases use L = 3 layers, E = 4 experts, 2 tokens, top-2, so every
 * layer's counts sum to 4 and no expert exceeds 2:
 *
 *           layer 0      layer 1      layer 2
 *   A     [2 1 1 0]    [0 2 2 0]    [1 0 1 2]
 *   B     [2 2 0 0]    [0 2 0 2]    [2 0 0 2]
 *   C     [1 1 2 0]    [2 2 0 0]    [0 0 2 2]
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "signature.h"
#include "trace.h"

#define TOL 1e-6

static const uint16_t ROW_A[12] = {2, 1, 1, 0, 0, 2, 2, 0, 1, 0, 1, 2};
static const uint16_t ROW_B[12] = {2, 2, 0, 0, 0, 2, 0, 2, 2, 0, 0, 2};
static const uint16_t ROW_C[12] = {1, 1, 2, 0, 2, 2, 0, 0, 0, 0, 2, 2};

static void expect_vec(const float *got, const double *want, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        if (fabs((double)got[j] - want[j]) > TOL) {
            print_error("entry %zu: got %.9g, want %.9g\n", j, (double)got[j], want[j]);
            fail();
        }
    }
}

/* A recipe over the hand geometry; fails the test on error. */
static void recipe(sig_recipe *r, sig_variant v, const int *layers, int n)
{
    char err[256];
    int rc = sig_recipe_init(r, v, 3, 4, layers, n, err, sizeof err);
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
}

/* The trace {A, B, C}, optionally with gate_prob. */
static trace_t *abc_trace(int with_gate)
{
    char err[256];
    trace_t *t = trace_new(3, 3, 4, 2, err, sizeof err);
    assert_non_null(t);
    memcpy(t->prefill_counts, ROW_A, sizeof ROW_A);
    memcpy(t->prefill_counts + 12, ROW_B, sizeof ROW_B);
    memcpy(t->prefill_counts + 24, ROW_C, sizeof ROW_C);
    for (int r = 0; r < 3; r++)
        t->prompt_tokens[r] = 2;
    if (with_gate) {
        assert_int_equal(trace_alloc_optional(t, TRACE_HAS_GATE_PROB, err, sizeof err), 0);
        for (int j = 0; j < 36; j++)
            t->gate_prob[j] = (float)t->prefill_counts[j] * 0.5f;
    }
    return t;
}

/* ---- names ---- */

/* ---- the bits, against a scalar twin ---- */

/* The row as signature.c documents its arithmetic, one element at a
 * time: the variant's value in float, the sum of squares in eight double
 * accumulators (element j into j mod 8 below n - n mod 8, the tail into
 * the first), added ((0+1)+(2+3))+((4+5)+(6+7)), then each value times
 * 1/sqrt(sum) in double, rounded to float. */
static void scalar_row(const sig_recipe *r, const uint16_t *c, float *out)
{
    size_t E = (size_t)r->E, n = sig_dim(r);
    for (int i = 0; i < r->n_layers; i++)
        for (size_t e = 0; e < E; e++) {
            float v = (float)c[(size_t)r->layers[i] * E + e];
            if (r->variant == SIG_SQRT_COUNT)
                v = sqrtf(v);
            else if (r->variant == SIG_BINARY)
                v = (float)(v != 0);
            else if (r->variant == SIG_COUNT_IDF)
                v = v * r->idf[(size_t)i * E + e];
            out[(size_t)i * E + e] = v;
        }
    double a[8] = {0};
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++)
            a[l] += (double)out[j + l] * out[j + l];
    for (; j < n; j++)
        a[0] += (double)out[j] * out[j];
    double ss = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    double inv = 1.0 / sqrt(ss);
    for (j = 0; j < n; j++)
        out[j] = (float)((double)out[j] * inv);
}

/* sig_from_counts (the AVX2 or the baseline build of its loops, whichever
 * this CPU runs) gives the scalar twin's floats to the bit, for every
 * count variant, on geometries whose rows are and are not a multiple of
 * eight, with large counts. */
static void test_row_bits_against_scalar(void **state)
{
    (void)state;
    static const int geo[][2] = {{16, 64}, {24, 32}, {3, 4}, {5, 13}, {2, 7}, {48, 128}};
    static const sig_variant vars[] = {SIG_COUNT, SIG_COUNT_IDF, SIG_SQRT_COUNT, SIG_BINARY};
    rng_t g;
    rng_seed(&g, 41);
    char err[256];
    for (size_t gi = 0; gi < sizeof geo / sizeof *geo; gi++) {
        int L = geo[gi][0], E = geo[gi][1];
        size_t cells = (size_t)L * (size_t)E;
        uint16_t *c = malloc(cells * sizeof *c);
        float *idf = malloc(cells * sizeof *idf), *got = malloc(cells * sizeof *got),
              *want = malloc(cells * sizeof *want);
        int *layers = malloc((size_t)L * sizeof *layers), nl = 0;
        for (int l = 0; l < L; l++)
            if (l % 3 != 1 || L < 3)
                layers[nl++] = l;
        for (size_t v = 0; v < sizeof vars / sizeof *vars; v++)
            for (int it = 0; it < 20; it++) {
                for (size_t i = 0; i < cells; i++) {
                    c[i] = (uint16_t)(rng_below(&g, 3) ? 0 : rng_below(&g, it % 2 ? 60000 : 40));
                    idf[i] = (float)(rng_below(&g, 1000) / 137.0);
                }
                c[0] |= 1;   /* never all zero */
                sig_recipe r;
                assert_int_equal(sig_recipe_init(&r, vars[v], L, E, layers, nl, err, sizeof err),
                                 0);
                if (vars[v] == SIG_COUNT_IDF)
                    assert_int_equal(sig_recipe_set_idf(&r, idf, err, sizeof err), 0);
                assert_int_equal(sig_from_counts(&r, c, NULL, got, err, sizeof err), 0);
                scalar_row(&r, c, want);
                if (memcmp(got, want, sig_dim(&r) * sizeof *got))
                    fail_msg("L=%d E=%d variant %s: not the scalar twin's bits", L, E,
                             sig_variant_name(vars[v]));
                sig_recipe_free(&r);
            }
        free(c);
        free(idf);
        free(got);
        free(want);
        free(layers);
    }
}

static void test_variant_names(void **state)
{
    (void)state;
    const char *names[] = {"count", "count_idf", "sqrt_count", "binary", "gate_prob", "gate_logit"};
    for (int v = 0; v < SIG_N_VARIANTS; v++) {
        assert_string_equal(sig_variant_name((sig_variant)v), names[v]);
        assert_int_equal(sig_variant_parse(names[v]), v);
        assert_int_equal(sig_variant_uses_gate((sig_variant)v), v >= SIG_GATE_PROB);
    }
    assert_int_equal(sig_variant_parse("idf"), -1);
    assert_int_equal(sig_variant_parse("Count"), -1);
    assert_int_equal(sig_variant_parse(""), -1);
    assert_int_equal(sig_variant_parse(NULL), -1);
    assert_string_equal(sig_variant_name((sig_variant)99), "unknown");
}

/* ---- each variant by hand ---- */

static void test_count(void **state)
{
    (void)state;
    sig_recipe r;
    float out[12];
    char err[256];
    recipe(&r, SIG_COUNT, NULL, 0);
    assert_int_equal(r.n_layers, 3);
    assert_int_equal(sig_dim(&r), 12);
    /* sum c^2 = (4+1+1) + (4+4) + (1+1+4) = 20: 2 -> 2/sqrt(20), 1 -> 1/sqrt(20) */
    const double a = 0.447213595, b = 0.223606798;
    const double want[12] = {a, b, b, 0, 0, a, a, 0, b, 0, b, a};
    assert_int_equal(sig_from_counts(&r, ROW_A, NULL, out, err, sizeof err), 0);
    expect_vec(out, want, 12);
    sig_recipe_free(&r);
}

static void test_sqrt_count(void **state)
{
    (void)state;
    sig_recipe r;
    float out[12];
    char err[256];
    recipe(&r, SIG_SQRT_COUNT, NULL, 0);
    /* sum sqrt(c)^2 = sum c = 12: sqrt2 -> sqrt(2/12), 1 -> 1/sqrt(12) */
    const double a = 0.408248290, b = 0.288675135;
    const double want[12] = {a, b, b, 0, 0, a, a, 0, b, 0, b, a};
    assert_int_equal(sig_from_counts(&r, ROW_A, NULL, out, err, sizeof err), 0);
    expect_vec(out, want, 12);
    sig_recipe_free(&r);
}

static void test_binary(void **state)
{
    (void)state;
    sig_recipe r;
    float out[12];
    char err[256];
    recipe(&r, SIG_BINARY, NULL, 0);
    /* 8 nonzero cells: each 1/sqrt(8) */
    const double a = 0.353553391;
    const double want[12] = {a, a, a, 0, 0, a, a, 0, a, 0, a, a};
    assert_int_equal(sig_from_counts(&r, ROW_A, NULL, out, err, sizeof err), 0);
    expect_vec(out, want, 12);
    sig_recipe_free(&r);
}

static void test_gate_prob(void **state)
{
    (void)state;
    sig_recipe r;
    float out[12];
    char err[256];
    recipe(&r, SIG_GATE_PROB, NULL, 0);
    /* sum g^2 = (.25+.0625+.0625) + (1+.25+.25) + (.0625+.0625+.25) = 2.25,
     * norm 1.5: 0.5 -> 1/3, 0.25 -> 1/6, 1 -> 2/3 */
    const float gate[12] = {0.5f, 0.25f, 0.25f, 0, 0, 1, 0.5f, 0.5f, 0.25f, 0, 0.25f, 0.5f};
    const double t = 1.0 / 3, s = 1.0 / 6, f = 2.0 / 3;
    const double want[12] = {t, s, s, 0, 0, f, t, t, s, 0, s, t};
    /* counts are not read by a gate variant */
    assert_int_equal(sig_from_counts(&r, NULL, gate, out, err, sizeof err), 0);
    expect_vec(out, want, 12);
    sig_recipe_free(&r);
}

static void test_gate_logit(void **state)
{
    (void)state;
    sig_recipe r;
    float out[12];
    char err[256];
    recipe(&r, SIG_GATE_LOGIT, NULL, 0);
    /* negative logits keep their sign: (-3, 4) has norm 5 */
    const float gate[12] = {-3, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0};
    const double want[12] = {-0.6, 0, 0, 0, 0, 0.8, 0, 0, 0, 0, 0, 0};
    assert_int_equal(sig_from_counts(&r, ROW_A, gate, out, err, sizeof err), 0);
    expect_vec(out, want, 12);
    sig_recipe_free(&r);
}

/* ---- IDF ---- */

static void test_idf_formula(void **state)
{
    (void)state;
    char err[256];
    trace_t *t = abc_trace(0);
    float idf[12];
    assert_int_equal(sig_idf_fit(t, NULL, 0, idf, err, sizeof err), 0);
    /* |C| = 3: idf = log(4 / (df+1)); df=3 -> 0, df=2 -> log(4/3), df=1 -> log 2,
     * df=0 (layer 0 expert 3 and layer 2 expert 1: no row uses them) -> log 4 */
    const double l43 = 0.287682072, l2 = 0.693147181, l4 = 1.386294361;
    const double want[12] = {0, 0, l43, l4, l2, 0, l2, l2, l43, l4, l43, 0};
    expect_vec(idf, want, 12);
    assert_true(fabs(idf[3] - log(3.0 + 1.0)) < TOL);

    /* count_idf of A: A * idf = [0 0 l43 0 | 0 0 2 l2 0 | l43 0 l43 0];
     * norm^2 = 3 l43^2 + 4 l2^2 */
    sig_recipe r;
    float out[12];
    recipe(&r, SIG_COUNT_IDF, NULL, 0);
    assert_int_equal(sig_recipe_set_idf(&r, idf, err, sizeof err), 0);
    const double a = 0.195287042, b = 0.941057338;
    const double wsig[12] = {0, 0, a, 0, 0, 0, b, 0, a, 0, a, 0};
    assert_int_equal(sig_from_counts(&r, ROW_A, NULL, out, err, sizeof err), 0);
    expect_vec(out, wsig, 12);
    sig_recipe_free(&r);
    trace_free(t);
}

static void test_idf_fit_on_a_apply_to_b(void **state)
{
    (void)state;
    char err[256];
    trace_t *t = abc_trace(0);
    float idf[12];
    const int64_t calib[2] = {0, 1};   /* fit on {A, B} */
    assert_int_equal(sig_idf_fit(t, calib, 2, idf, err, sizeof err), 0);
    /* |C| = 2: idf = log(3 / (df+1)); df=2 -> 0, df=1 -> log 1.5, df=0 -> log 3 */
    const double l15 = 0.405465108, l3 = 1.098612289;
    const double want[12] = {0, 0, l15, l3, l3, 0, l15, l15, 0, l3, l15, 0};
    expect_vec(idf, want, 12);

    /* applied to C (row 2, not in the calibration set):
     * C * idf = [0 0 2 l15 0 | 2 l3 0 0 0 | 0 0 2 l15 0]; norm^2 = 8 l15^2 + 4 l3^2 */
    sig_recipe r;
    recipe(&r, SIG_COUNT_IDF, NULL, 0);
    assert_int_equal(sig_recipe_set_idf(&r, idf, err, sizeof err), 0);
    const double a = 0.327184574, b = 0.886510298;
    const double wsig[12] = {0, 0, a, 0, b, 0, 0, 0, 0, 0, a, 0};
    float out[12];
    const int64_t apply[1] = {2};
    int64_t nz = -1;
    assert_int_equal(sig_build_batch(t, &r, apply, 1, out, &nz, NULL, err, sizeof err), 0);
    assert_int_equal(nz, 0);
    expect_vec(out, wsig, 12);
    sig_recipe_free(&r);
    trace_free(t);
}

static void test_idf_bad_input(void **state)
{
    (void)state;
    char err[256];
    trace_t *t = abc_trace(0);
    float idf[12];
    const int64_t bad[2] = {0, 3};
    assert_int_equal(sig_idf_fit(t, bad, 2, idf, err, sizeof err), -1);
    assert_non_null(strstr(err, "row 3"));
    const int64_t neg[1] = {-1};
    assert_int_equal(sig_idf_fit(t, neg, 1, idf, err, sizeof err), -1);
    assert_int_equal(sig_idf_fit(t, bad, 0, idf, err, sizeof err), -1);
    assert_non_null(strstr(err, "no calibration rows"));
    trace_free(t);

    /* set_idf: only count_idf has weights, and they must be finite */
    sig_recipe r;
    float w[12] = {0};
    recipe(&r, SIG_COUNT, NULL, 0);
    assert_int_equal(sig_recipe_set_idf(&r, w, err, sizeof err), -1);
    sig_recipe_free(&r);
    recipe(&r, SIG_COUNT_IDF, NULL, 0);
    w[7] = NAN;
    assert_int_equal(sig_recipe_set_idf(&r, w, err, sizeof err), -1);
    assert_non_null(strstr(err, "layer 1 expert 3"));
    assert_null(r.idf);
    sig_recipe_free(&r);
}

/* ---- layer mask ---- */

static void test_layer_mask(void **state)
{
    (void)state;
    char err[256];
    sig_recipe r;
    /* unsorted input is sorted: {2, 0} -> {0, 2}; A's layers 0 and 2 give
     * [2 1 1 0 | 1 0 1 2], norm^2 = 12 */
    const int l20[2] = {2, 0};
    recipe(&r, SIG_COUNT, l20, 2);
    assert_int_equal(r.n_layers, 2);
    assert_int_equal(r.layers[0], 0);
    assert_int_equal(r.layers[1], 2);
    assert_int_equal(sig_dim(&r), 8);
    float out[8];
    const double a = 0.577350269, b = 0.288675135;
    const double want[8] = {a, b, b, 0, b, 0, b, a};
    assert_int_equal(sig_from_counts(&r, ROW_A, NULL, out, err, sizeof err), 0);
    expect_vec(out, want, 8);

    /* the masked idf is taken in mask order */
    sig_recipe_free(&r);
    recipe(&r, SIG_COUNT_IDF, l20, 2);
    const float full[12] = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23};
    assert_int_equal(sig_recipe_set_idf(&r, full, err, sizeof err), 0);
    const double widf[8] = {0, 1, 2, 3, 20, 21, 22, 23};
    expect_vec(r.idf, widf, 8);
    sig_recipe_free(&r);

    const int dup[3] = {1, 0, 1}, high[2] = {0, 3}, neg[1] = {-1};
    assert_int_equal(sig_recipe_init(&r, SIG_COUNT, 3, 4, dup, 3, err, sizeof err), -1);
    assert_non_null(strstr(err, "layer 1 listed twice"));
    assert_int_equal(sig_recipe_init(&r, SIG_COUNT, 3, 4, high, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "layer 3 out of range"));
    assert_int_equal(sig_recipe_init(&r, SIG_COUNT, 3, 4, neg, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "layer -1 out of range"));
    assert_int_equal(sig_recipe_init(&r, SIG_COUNT, 3, 4, l20, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "empty"));
    assert_int_equal(sig_recipe_init(&r, (sig_variant)7, 3, 4, NULL, 0, err, sizeof err), -1);
    assert_int_equal(sig_recipe_init(&r, SIG_COUNT, 0, 4, NULL, 0, err, sizeof err), -1);
    sig_recipe_free(&r);   /* a failed init leaves nothing to free */
}

static void test_one_global_norm(void **state)
{
    (void)state;
    char err[256];
    sig_recipe r;
    const int l01[2] = {0, 1};
    recipe(&r, SIG_COUNT, l01, 2);
    float out[8];
    assert_int_equal(sig_from_counts(&r, ROW_A, NULL, out, err, sizeof err), 0);
    /* one norm over [2 1 1 0 | 0 2 2 0]: sqrt(6 + 8) = sqrt 14, so 2 -> 2/sqrt 14
     * = 0.534522484. Per-layer norms (sqrt 6, sqrt 8), then one more over the
     * two unit halves, would give 2/sqrt 6/sqrt 2 = 0.577350269 instead. */
    assert_true(fabs(out[0] - 0.534522484) < TOL);
    assert_true(fabs(out[0] - 0.577350269) > 1e-2);
    assert_true(fabs(out[5] - 0.534522484) < TOL);
    /* and no mean-centring: zeros stay zero */
    assert_true(out[3] == 0.0f && out[4] == 0.0f);
    double ss = 0;
    for (int j = 0; j < 8; j++)
        ss += (double)out[j] * out[j];
    assert_true(fabs(ss - 1.0) < 1e-6);
    sig_recipe_free(&r);
}

/* ---- zero signatures and errors ---- */

static void test_zero_signature(void **state)
{
    (void)state;
    char err[256];
    sig_recipe r;
    float out[12];
    const uint16_t none[12] = {0};
    recipe(&r, SIG_COUNT, NULL, 0);
    memset(out, 0x7f, sizeof out);
    assert_int_equal(sig_from_counts(&r, none, NULL, out, err, sizeof err), 1);
    for (int j = 0; j < 12; j++)
        assert_true(out[j] == 0.0f && !signbit(out[j]));
    sig_recipe_free(&r);

    /* gate_logit of -0.0 values is a zero vector too */
    const float negz[12] = {-0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f,
                            -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f};
    recipe(&r, SIG_GATE_LOGIT, NULL, 0);
    assert_int_equal(sig_from_counts(&r, NULL, negz, out, err, sizeof err), 1);
    for (int j = 0; j < 12; j++)
        assert_true(out[j] == 0.0f && !signbit(out[j]));
    sig_recipe_free(&r);

    /* Nonzero counts, zero signature: under the {A,B,C} idf, layer 0's
     * experts 0 and 1 are used by every row (idf 0), and B uses only those
     * in layer 0. In a batch it is counted and flagged. */
    trace_t *t = abc_trace(0);
    float idf[12];
    assert_int_equal(sig_idf_fit(t, NULL, 0, idf, err, sizeof err), 0);
    const int l0[1] = {0};
    recipe(&r, SIG_COUNT_IDF, l0, 1);
    assert_int_equal(sig_recipe_set_idf(&r, idf, err, sizeof err), 0);
    float m[3 * 4];
    int64_t nz = -1;
    uint8_t zr[3] = {9, 9, 9};
    assert_int_equal(sig_build_batch(t, &r, NULL, 0, m, &nz, zr, err, sizeof err), 0);
    assert_int_equal(nz, 1);
    assert_int_equal(zr[0], 0);
    assert_int_equal(zr[1], 1);
    assert_int_equal(zr[2], 0);
    for (int e = 0; e < 4; e++)
        assert_true(m[4 + e] == 0.0f);
    /* A in layer 0: only expert 2 has weight -> unit vector on it */
    const double wa[4] = {0, 0, 1, 0};
    expect_vec(m, wa, 4);
    sig_recipe_free(&r);
    trace_free(t);
}

static void test_errors(void **state)
{
    (void)state;
    char err[256];
    sig_recipe r;
    float out[36];   /* room for a whole batch of the 3 rows */
    trace_t *t = abc_trace(0);

    /* gate variants without gate data */
    recipe(&r, SIG_GATE_PROB, NULL, 0);
    assert_int_equal(sig_from_counts(&r, ROW_A, NULL, out, err, sizeof err), -1);
    assert_non_null(strstr(err, "gate"));
    assert_int_equal(sig_build_batch(t, &r, NULL, 0, out, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "gate_prob"));
    sig_recipe_free(&r);
    recipe(&r, SIG_GATE_LOGIT, NULL, 0);
    assert_int_equal(sig_build_batch(t, &r, NULL, 0, out, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "gate_logit"));
    /* a NaN gate is an error, not a NaN signature */
    float g[12] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    g[5] = NAN;
    assert_int_equal(sig_from_counts(&r, NULL, g, out, err, sizeof err), -1);
    g[5] = INFINITY;
    assert_int_equal(sig_from_counts(&r, NULL, g, out, err, sizeof err), -1);
    sig_recipe_free(&r);

    /* count variants need counts; count_idf needs its idf */
    recipe(&r, SIG_COUNT, NULL, 0);
    assert_int_equal(sig_from_counts(&r, NULL, NULL, out, err, sizeof err), -1);
    sig_recipe_free(&r);
    recipe(&r, SIG_COUNT_IDF, NULL, 0);
    assert_int_equal(sig_from_counts(&r, ROW_A, NULL, out, err, sizeof err), -1);
    assert_non_null(strstr(err, "idf"));
    assert_int_equal(sig_build_batch(t, &r, NULL, 0, out, NULL, NULL, err, sizeof err), -1);
    sig_recipe_free(&r);

    /* batch: rows out of range, geometry mismatch, thread count */
    recipe(&r, SIG_COUNT, NULL, 0);
    const int64_t rows[2] = {1, 5};
    assert_int_equal(sig_build_batch(t, &r, rows, 2, out, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "row 5"));
    assert_int_equal(sig_build_batch_threads(t, &r, NULL, 0, out, NULL, NULL, 65, err, sizeof err), -1);
    sig_recipe_free(&r);
    assert_int_equal(sig_recipe_init(&r, SIG_COUNT, 3, 5, NULL, 0, err, sizeof err), 0);
    assert_int_equal(sig_build_batch(t, &r, NULL, 0, out, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "recipe expects 3 x 5"));
    sig_recipe_free(&r);

    /* an uninitialised (zeroed) recipe is refused, not dereferenced */
    memset(&r, 0, sizeof r);
    assert_int_equal(sig_from_counts(&r, ROW_A, NULL, out, err, sizeof err), -1);
    trace_free(t);
}

static void test_recipe_copy(void **state)
{
    (void)state;
    char err[256];
    sig_recipe a, b;
    const int l[2] = {2, 1};
    const float full[12] = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23};
    recipe(&a, SIG_COUNT_IDF, l, 2);
    assert_int_equal(sig_recipe_set_idf(&a, full, err, sizeof err), 0);
    assert_int_equal(sig_recipe_copy(&b, &a, err, sizeof err), 0);
    assert_int_equal(b.variant, SIG_COUNT_IDF);
    assert_int_equal(b.n_layers, 2);
    assert_ptr_not_equal(b.layers, a.layers);
    assert_ptr_not_equal(b.idf, a.idf);
    a.idf[0] = 99;
    assert_true(b.idf[0] == 10.0f && b.idf[7] == 23.0f);
    sig_recipe_free(&a);
    sig_recipe_free(&b);
    sig_recipe_free(&b);   /* freeing twice is harmless */
}

/* ---- batch against per-row, on a random conserving trace ---- */

static trace_t *random_trace(int64_t n, int L, int E, int k, uint64_t seed)
{
    char err[256];
    trace_t *t = trace_new(n, L, E, k, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(trace_alloc_optional(t, TRACE_HAS_GATE_PROB | TRACE_HAS_GATE_LOGIT,
                                          err, sizeof err), 0);
    rng_t g;
    rng_seed(&g, seed);
    int *perm = malloc((size_t)E * sizeof *perm);
    for (int64_t r = 0; r < n; r++) {
        /* every 10th request is empty: zero signatures in the batch */
        int tokens = r % 10 == 9 ? 0 : 1 + (int)rng_below(&g, 12);
        t->prompt_tokens[r] = tokens;
        for (int l = 0; l < L; l++) {
            for (int tok = 0; tok < tokens; tok++) {
                for (int e = 0; e < E; e++)
                    perm[e] = e;
                for (int j = 0; j < k; j++) {   /* k distinct experts */
                    int s = j + (int)rng_below(&g, (uint64_t)(E - j));
                    int x = perm[s];
                    perm[s] = perm[j];
                    perm[j] = x;
                    TRACE_AT(t->prefill_counts, t, r, l, x)++;
                }
            }
            for (int e = 0; e < E; e++) {
                float c = TRACE_AT(t->prefill_counts, t, r, l, e);
                TRACE_AT(t->gate_prob, t, r, l, e) = c * (float)rng_uniform(&g);
                TRACE_AT(t->gate_logit, t, r, l, e) = tokens ? (float)rng_normal(&g) : 0.0f;
            }
        }
    }
    free(perm);
    assert_int_equal(trace_validate(t, "random", err, sizeof err), 0);
    return t;
}

static void test_batch_equals_rows(void **state)
{
    (void)state;
    char err[256];
    const int64_t N = 300;
    trace_t *t = random_trace(N, 6, 16, 3, 42);
    float *idf = malloc(6 * 16 * sizeof *idf);
    const int64_t calib[4] = {0, 1, 2, 3};
    assert_int_equal(sig_idf_fit(t, calib, 4, idf, err, sizeof err), 0);
    const int masks[3][3] = {{0, 1, 2}, {5, 1, 3}, {4, 0, 0}};
    const int nmask[3] = {3, 3, 1};
    /* a subset with a repeat and a reversed order */
    int64_t sub[50];
    for (int i = 0; i < 50; i++)
        sub[i] = (N - 1 - 6 * i) % N;
    sub[7] = sub[3];

    for (int v = 0; v < SIG_N_VARIANTS; v++) {
        for (int mi = 0; mi < 4; mi++) {
            sig_recipe r;
            int rc = sig_recipe_init(&r, (sig_variant)v, 6, 16, mi < 3 ? masks[mi] : NULL,
                                     mi < 3 ? nmask[mi] : 0, err, sizeof err);
            assert_int_equal(rc, 0);
            if (v == SIG_COUNT_IDF)
                assert_int_equal(sig_recipe_set_idf(&r, idf, err, sizeof err), 0);
            size_t dim = sig_dim(&r);
            float *want = malloc((size_t)N * dim * sizeof *want);
            float *got = malloc((size_t)N * dim * sizeof *got);
            uint8_t *wz = calloc((size_t)N, 1), *gz = calloc((size_t)N, 1);
            int64_t wn = 0;
            for (int64_t i = 0; i < N; i++) {
                const float *gate = v == SIG_GATE_PROB ? t->gate_prob : t->gate_logit;
                rc = sig_from_counts(&r, trace_prefill_row(t, i), gate + i * 96,
                                     want + (size_t)i * dim, err, sizeof err);
                assert_true(rc == 0 || rc == 1);
                wz[i] = (uint8_t)rc;
                wn += rc;
                /* unit length or all zero: the norm is the global one */
                double ss = 0;
                for (size_t j = 0; j < dim; j++)
                    ss += (double)want[(size_t)i * dim + j] * want[(size_t)i * dim + j];
                assert_true(fabs(ss - (rc ? 0.0 : 1.0)) < 1e-5);
            }
            assert_true(wn >= N / 10);   /* the empty requests */
            for (int nt = 0; nt <= 3; nt++) {
                int64_t gn = -1;
                memset(got, 0xff, (size_t)N * dim * sizeof *got);
                assert_int_equal(sig_build_batch_threads(t, &r, NULL, 0, got, &gn, gz, nt,
                                                         err, sizeof err), 0);
                assert_int_equal(gn, wn);
                assert_memory_equal(got, want, (size_t)N * dim * sizeof *got);
                assert_memory_equal(gz, wz, (size_t)N);
                /* the subset, rows in the given order */
                assert_int_equal(sig_build_batch_threads(t, &r, sub, 50, got, &gn, NULL, nt,
                                                         err, sizeof err), 0);
                for (int i = 0; i < 50; i++)
                    assert_memory_equal(got + (size_t)i * dim, want + (size_t)sub[i] * dim,
                                        dim * sizeof *got);
            }
            free(want);
            free(got);
            free(wz);
            free(gz);
            sig_recipe_free(&r);
        }
    }
    free(idf);
    trace_free(t);
}

/* ---- numpy oracle on the real trace ---- */

#define ORACLE_DIM 96   /* layers {0, 5, 23} x 32 experts */

typedef struct oracle_line {
    char name[32];
    int row;
    double v[ORACLE_DIM];
} oracle_line;

/* Parse tests/fixtures/sig_oracle.txt; returns the number of lines. */
static int load_oracle(const char *path, oracle_line *lines, int max)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        print_error("cannot open %s\n", path);
        return -1;
    }
    char buf[8192];
    int n = 0;
    while (fgets(buf, sizeof buf, f) && n < max) {
        if (buf[0] == '#' || buf[0] == '\n')
            continue;
        char *p = buf;
        int used;
        if (sscanf(p, "%31s %d%n", lines[n].name, &lines[n].row, &used) != 2)
            break;
        p += used;
        int j = 0;
        for (; j < ORACLE_DIM; j++) {
            if (sscanf(p, "%lf%n", &lines[n].v[j], &used) != 1)
                break;
            p += used;
        }
        if (j != ORACLE_DIM) {
            print_error("%s: line %d has %d values\n", path, n + 2, j);
            fclose(f);
            return -1;
        }
        n++;
    }
    fclose(f);
    return n;
}

static const char *real_trace_path(char *buf, size_t n)
{
    const char *env = getenv("ELDR_REAL_TRACE");
    if (env)
        return env;
    const char *root = getenv("ROOT");
    snprintf(buf, n, "%s/../shared/data/gptoss20b-routing.h5", root ? root : ".");
    return buf;
}

static void expect_oracle(const float *got, const double *want, const char *what, int row)
{
    for (int j = 0; j < ORACLE_DIM; j++) {
        if (fabs((double)got[j] - want[j]) > 1e-5) {
            print_error("%s row %d entry %d: got %.9g, numpy %.9g\n", what, row, j,
                        (double)got[j], want[j]);
            fail();
        }
    }
}

static void test_numpy_oracle(void **state)
{
    (void)state;
    char err[512], pbuf[4096], obuf[4096];
    const char *path = real_trace_path(pbuf, sizeof pbuf);
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        print_message("real trace %s absent: skipped\n", path);
        skip();
    }
    fclose(probe);
    const char *root = getenv("ROOT");
    snprintf(obuf, sizeof obuf, "%s/tests/fixtures/sig_oracle.txt", root ? root : ".");
    static oracle_line lines[64];
    int nl = load_oracle(obuf, lines, 64);
    assert_true(nl >= 32);

    trace_t *t = NULL;
    int rc = trace_load(path, &t, err, sizeof err);
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(t->L, 24);
    assert_int_equal(t->E, 32);

    float *idf_all = malloc(24 * 32 * sizeof *idf_all);
    float *idf_300 = malloc(24 * 32 * sizeof *idf_300);
    int64_t first300[300];
    for (int i = 0; i < 300; i++)
        first300[i] = i;
    assert_int_equal(sig_idf_fit(t, NULL, 0, idf_all, err, sizeof err), 0);
    assert_int_equal(sig_idf_fit(t, first300, 300, idf_300, err, sizeof err), 0);

    const int S[3] = {0, 5, 23};
    sig_recipe r_all, r_300;
    assert_int_equal(sig_recipe_init(&r_all, SIG_COUNT_IDF, 24, 32, S, 3, err, sizeof err), 0);
    assert_int_equal(sig_recipe_set_idf(&r_all, idf_all, err, sizeof err), 0);
    assert_int_equal(sig_recipe_init(&r_300, SIG_COUNT_IDF, 24, 32, S, 3, err, sizeof err), 0);
    assert_int_equal(sig_recipe_set_idf(&r_300, idf_300, err, sizeof err), 0);

    /* count_idf over all rows, in one batch */
    float *all = malloc((size_t)t->n * ORACLE_DIM * sizeof *all);
    int64_t nz = -1;
    assert_int_equal(sig_build_batch(t, &r_all, NULL, 0, all, &nz, NULL, err, sizeof err), 0);
    assert_int_equal(nz, 0);

    int checked = 0;
    float one[ORACLE_DIM];
    for (int i = 0; i < nl; i++) {
        oracle_line *o = &lines[i];
        if (strcmp(o->name, "idf_all") == 0) {
            expect_oracle(r_all.idf, o->v, o->name, o->row);
        } else if (strcmp(o->name, "idf_first300") == 0) {
            expect_oracle(r_300.idf, o->v, o->name, o->row);
        } else if (strcmp(o->name, "count_idf_all") == 0) {
            expect_oracle(all + (size_t)o->row * ORACLE_DIM, o->v, o->name, o->row);
        } else if (strcmp(o->name, "count_idf_first300") == 0) {
            assert_int_equal(sig_from_counts(&r_300, trace_prefill_row(t, o->row), NULL, one,
                                             err, sizeof err), 0);
            expect_oracle(one, o->v, o->name, o->row);
        } else {
            int v = sig_variant_parse(o->name);
            assert_true(v >= 0);
            sig_recipe r;
            assert_int_equal(sig_recipe_init(&r, (sig_variant)v, 24, 32, S, 3, err, sizeof err), 0);
            const float *gate = t->gate_prob ? t->gate_prob + (size_t)o->row * 24 * 32 : NULL;
            assert_int_equal(sig_from_counts(&r, trace_prefill_row(t, o->row), gate, one,
                                             err, sizeof err), 0);
            expect_oracle(one, o->v, o->name, o->row);
            sig_recipe_free(&r);
        }
        checked++;
    }
    assert_int_equal(checked, nl);
    free(all);
    free(idf_all);
    free(idf_300);
    sig_recipe_free(&r_all);
    sig_recipe_free(&r_300);
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variant_names),
        cmocka_unit_test(test_row_bits_against_scalar),
        cmocka_unit_test(test_count),
        cmocka_unit_test(test_sqrt_count),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_gate_prob),
        cmocka_unit_test(test_gate_logit),
        cmocka_unit_test(test_idf_formula),
        cmocka_unit_test(test_idf_fit_on_a_apply_to_b),
        cmocka_unit_test(test_idf_bad_input),
        cmocka_unit_test(test_layer_mask),
        cmocka_unit_test(test_one_global_norm),
        cmocka_unit_test(test_zero_signature),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_recipe_copy),
        cmocka_unit_test(test_batch_equals_rows),
        cmocka_unit_test(test_numpy_oracle),
    };
    return cmocka_run_group_tests_name("signature", tests, NULL, NULL);
}
