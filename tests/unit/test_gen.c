/* test_gen.c - the synthetic trace generator (gen.h) and the block hash
 * (blockhash.h).
 *
 * Laws checked on generated traces: conservation per layer (prefill and
 * decode), k distinct in-range experts per token and layer, token datasets
 * that recount to the count matrices, gate_prob summing to the prompt
 * length per layer, the loader's own validation; determinism for a seed
 * across thread counts; label shares, arrival gaps and burst shares near
 * their expected values (3 sigma); prefix groups that share routing and
 * hashes; real domain structure, weaker at the edge layers; decode drift.
 * The top-k sampler is checked against exact inclusion probabilities of
 * sequential sampling without replacement, enumerated by brute force. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockhash.h"
#include "err.h"
#include "gen.h"
#include "gen_internal.h"
#include "trace.h"

static gen_params_t small_params(void)
{
    gen_params_t p;
    gen_defaults(&p);
    p.requests = 300;
    p.layers = 6;
    p.experts = 16;
    p.top_k = 3;
    p.domains = 3;
    p.prompt_tokens = 40;
    p.decode_tokens = 20;
    p.seed = 5;
    return p;
}

static trace_t *gen(const gen_params_t *p)
{
    char err[ELDR_ERRLEN] = "";
    trace_t *t = NULL;
    int rc = gen_run(p, &t, err, sizeof err);
    if (rc)
        fail_msg("gen_run: %s", err);
    assert_non_null(t);
    return t;
}

static void assert_valid(const trace_t *t)
{
    char err[ELDR_ERRLEN] = "";
    if (trace_validate(t, "gen", err, sizeof err))
        fail_msg("trace_validate: %s", err);
}

/* Conservation and the per-expert bound of one count matrix. */
static void check_counts(const trace_t *t, const uint16_t *c, const int32_t *tok)
{
    for (int64_t r = 0; r < t->n; r++)
        for (int l = 0; l < t->L; l++) {
            long sum = 0;
            for (int e = 0; e < t->E; e++) {
                int v = TRACE_AT(c, t, r, l, e);
                assert_true(v <= tok[r]);
                sum += v;
            }
            assert_int_equal(sum, (long)tok[r] * t->k);
        }
}

/* Token rows: k distinct ids < E per token and layer, and recounting
 * them gives the count matrix exactly. */
static void check_tokens(const trace_t *t, const int64_t *off, const uint16_t *rows,
                         const uint16_t *counts, const int32_t *tok)
{
    size_t cells = TRACE_CELLS(t);
    uint16_t *re = calloc(cells, sizeof *re);
    assert_non_null(re);
    assert_int_equal(off[0], 0);
    for (int64_t r = 0; r < t->n; r++) {
        assert_int_equal(off[r + 1] - off[r], tok[r]);
        memset(re, 0, cells * sizeof *re);
        for (int64_t i = off[r]; i < off[r + 1]; i++)
            for (int l = 0; l < t->L; l++) {
                const uint16_t *x = rows + ((size_t)i * t->L + l) * t->k;
                for (int j = 0; j < t->k; j++) {
                    assert_true(x[j] < t->E);
                    for (int j2 = 0; j2 < j; j2++)
                        assert_int_not_equal(x[j], x[j2]);
                    re[(size_t)l * t->E + x[j]]++;
                }
            }
        assert_memory_equal(re, counts + (size_t)r * cells, cells * sizeof *re);
    }
    free(re);
}

static void test_laws_with_tokens(void **state)
{
    (void)state;
    gen_params_t p = small_params();
    p.tokens = 1;
    p.gate_prob = p.gate_logit = 1;
    trace_t *t = gen(&p);
    assert_valid(t);
    check_counts(t, t->prefill_counts, t->prompt_tokens);
    check_counts(t, t->decode_counts, t->decode_tokens);
    check_tokens(t, t->prefill_offsets, t->prefill_experts, t->prefill_counts, t->prompt_tokens);
    check_tokens(t, t->decode_offsets, t->decode_experts, t->decode_counts, t->decode_tokens);
    /* every token's probabilities sum to 1, so gate_prob sums to the
     * prompt length in every layer; picked probabilities are in (0, 1]
     * and the k of one token sum to at most 1 */
    for (int64_t r = 0; r < t->n; r++)
        for (int l = 0; l < t->L; l++) {
            double s = 0;
            for (int e = 0; e < t->E; e++) {
                s += TRACE_AT(t->gate_prob, t, r, l, e);
                assert_true(isfinite(TRACE_AT(t->gate_logit, t, r, l, e)));
            }
            assert_true(fabs(s - t->prompt_tokens[r]) < 1e-3 * t->prompt_tokens[r]);
        }
    for (int64_t i = 0; i < t->decode_offsets[t->n]; i++)
        for (int l = 0; l < t->L; l++) {
            double s = 0;
            for (int j = 0; j < t->k; j++) {
                float v = t->decode_probs[((size_t)i * t->L + l) * t->k + j];
                assert_true(v > 0 && v <= 1);
                s += v;
            }
            assert_true(s <= 1.0 + 1e-5);
        }
    /* labels, ids, names */
    assert_int_equal(t->n_labels, 3);
    assert_string_equal(t->label_names[0], "code");
    assert_string_equal(t->label_names[2], "chat");
    assert_string_equal(t->request_id[7], "req-000007");
    assert_null(t->arrival_s);
    trace_free(t);
}

/* k == E: every token picks every expert (the exact fallback path). */
static void test_k_equals_e(void **state)
{
    (void)state;
    gen_params_t p = small_params();
    p.experts = p.top_k = 4;
    p.generalists = 1;
    p.tokens = 1;
    p.domain_strength = 15; /* extreme logits: zero-probability experts */
    trace_t *t = gen(&p);
    assert_valid(t);
    for (int64_t r = 0; r < t->n; r++)
        for (int e = 0; e < 4; e++)
            assert_int_equal(TRACE_AT(t->prefill_counts, t, r, 2, e), t->prompt_tokens[r]);
    check_tokens(t, t->prefill_offsets, t->prefill_experts, t->prefill_counts, t->prompt_tokens);
    trace_free(t);
}

static void assert_same_trace(const trace_t *a, const trace_t *b)
{
    size_t cells = (size_t)a->n * TRACE_CELLS(a);
    assert_int_equal(a->n, b->n);
    assert_memory_equal(a->prefill_counts, b->prefill_counts, cells * 2);
    assert_memory_equal(a->decode_counts, b->decode_counts, cells * 2);
    assert_memory_equal(a->prompt_tokens, b->prompt_tokens, (size_t)a->n * 4);
    assert_memory_equal(a->decode_tokens, b->decode_tokens, (size_t)a->n * 4);
    assert_memory_equal(a->label, b->label, (size_t)a->n * 4);
    assert_memory_equal(a->arrival_s, b->arrival_s, (size_t)a->n * 8);
    assert_memory_equal(a->gate_prob, b->gate_prob, cells * 4);
    size_t tp = (size_t)a->prefill_offsets[a->n] * a->L * a->k;
    size_t td = (size_t)a->decode_offsets[a->n] * a->L * a->k;
    assert_memory_equal(a->prefill_experts, b->prefill_experts, tp * 2);
    assert_memory_equal(a->decode_experts, b->decode_experts, td * 2);
    assert_memory_equal(a->decode_probs, b->decode_probs, td * 4);
    assert_memory_equal(a->block_hashes, b->block_hashes, (size_t)a->block_offsets[a->n] * 8);
}

static void test_determinism(void **state)
{
    (void)state;
    gen_params_t p = small_params();
    p.requests = 101; /* not a multiple of the work chunk */
    p.tokens = 1;
    p.gate_prob = 1;
    p.arrival_rate = 10;
    p.prefix_groups = 3;
    p.prefix_blocks = 2;
    p.block_size = 8;
    p.threads = 1;
    trace_t *a = gen(&p);
    p.threads = 2;
    trace_t *b = gen(&p);
    p.threads = 5;
    trace_t *c = gen(&p);
    assert_same_trace(a, b);
    assert_same_trace(a, c);
    p.seed = 6;
    trace_t *d = gen(&p);
    assert_memory_not_equal(a->prefill_counts, d->prefill_counts, (size_t)a->n * TRACE_CELLS(a) * 2);
    trace_free(a);
    trace_free(b);
    trace_free(c);
    trace_free(d);
}

static void test_label_shares(void **state)
{
    (void)state;
    gen_params_t p = small_params();
    double shares[4] = {5, 3, 1.5, 0.5}; /* normalised: 0.5, 0.3, 0.15, 0.05 */
    p.requests = 6000;
    p.domains = 4;
    p.domain_shares = shares;
    p.layers = 1;
    p.prompt_tokens = 2;
    p.decode_tokens = 0;
    trace_t *t = gen(&p);
    assert_null(t->decode_counts);
    long cnt[4] = {0};
    for (int64_t r = 0; r < t->n; r++) {
        assert_true(t->label[r] >= 0 && t->label[r] < 4);
        cnt[t->label[r]]++;
    }
    for (int d = 0; d < 4; d++) {
        double s = shares[d] / 10.0, mu = s * p.requests, sd = sqrt(p.requests * s * (1 - s));
        if (fabs(cnt[d] - mu) > 3 * sd)
            fail_msg("domain %d: %ld requests, expected %.0f +- %.0f", d, cnt[d], mu, 3 * sd);
    }
    trace_free(t);
}

static void test_arrivals(void **state)
{
    (void)state;
    gen_params_t p = small_params();
    p.requests = 5000;
    p.layers = 1;
    p.prompt_tokens = 2;
    p.arrival_rate = 50;
    trace_t *t = gen(&p);
    assert_non_null(t->arrival_s);
    assert_true(t->arrival_s[0] > 0);
    for (int64_t r = 1; r < t->n; r++)
        assert_true(t->arrival_s[r] > t->arrival_s[r - 1]);
    double mean = t->arrival_s[t->n - 1] / (double)t->n, want = 1.0 / 50;
    if (fabs(mean - want) > 3 * want / sqrt((double)t->n))
        fail_msg("mean gap %g, expected %g", mean, want);
    trace_free(t);
}

/* With bursts, the hot domain of each period dominates it: the share of
 * the most common label per period is near F/(F+D-1), far above 1/D. */
static void test_bursts(void **state)
{
    (void)state;
    gen_params_t p = small_params();
    p.requests = 6000;
    p.layers = 1;
    p.prompt_tokens = 2;
    p.domains = 4;
    p.arrival_rate = 100;
    p.burst_factor = 9;
    p.burst_period = 5;
    trace_t *t = gen(&p);
    int periods = 0;
    double top_share = 0;
    for (int64_t r0 = 0; r0 < t->n;) {
        int64_t per = (int64_t)(t->arrival_s[r0] / 5), r1 = r0;
        long cnt[4] = {0};
        while (r1 < t->n && (int64_t)(t->arrival_s[r1] / 5) == per)
            cnt[t->label[r1++]]++;
        long mx = 0;
        for (int d = 0; d < 4; d++)
            mx = cnt[d] > mx ? cnt[d] : mx;
        if (r1 - r0 >= 100) { /* whole periods only */
            top_share += (double)mx / (double)(r1 - r0);
            periods++;
        }
        r0 = r1;
    }
    assert_true(periods >= 5);
    top_share /= periods;
    if (fabs(top_share - 0.75) > 0.06)
        fail_msg("mean top share per period %g, expected about 9/12", top_share);
    trace_free(t);
}

static void test_prefix_groups(void **state)
{
    (void)state;
    gen_params_t p = small_params();
    p.requests = 120;
    p.prefix_groups = 4;
    p.prefix_blocks = 3;
    p.block_size = 8;
    trace_t *t = gen(&p); /* prefixes imply the token datasets */
    assert_valid(t);
    assert_non_null(t->prefill_experts);
    check_tokens(t, t->prefill_offsets, t->prefill_experts, t->prefill_counts, t->prompt_tokens);
    size_t stride = (size_t)t->L * t->k, plen = 24;
    int same_group = 0, cross_group = 0;
    for (int64_t r = 0; r < t->n; r++) {
        assert_true(t->prompt_tokens[r] > (int)plen);
        assert_int_equal(t->block_offsets[r + 1] - t->block_offsets[r], t->prompt_tokens[r] / 8);
    }
    for (int64_t a = 0; a < t->n; a++)
        for (int64_t b = a + 1; b < t->n; b++) {
            const uint64_t *ha = t->block_hashes + t->block_offsets[a];
            const uint64_t *hb = t->block_hashes + t->block_offsets[b];
            const uint16_t *xa = t->prefill_experts + (size_t)t->prefill_offsets[a] * stride;
            const uint16_t *xb = t->prefill_experts + (size_t)t->prefill_offsets[b] * stride;
            int same_prefix = ha[2] == hb[2];
            if (same_prefix) { /* one group: identical hashes and routing */
                same_group++;
                assert_memory_equal(ha, hb, 3 * sizeof *ha);
                assert_memory_equal(xa, xb, plen * stride * sizeof *xa);
                /* the own part is fresh: its first block differs */
                if (t->prompt_tokens[a] >= 32 && t->prompt_tokens[b] >= 32)
                    assert_true(ha[3] != hb[3]);
            } else {
                cross_group++;
                assert_true(ha[0] != hb[0]);
                assert_memory_not_equal(xa, xb, plen * stride * sizeof *xa);
            }
        }
    assert_true(same_group > 0 && cross_group > 0);
    trace_free(t);
}

/* Block hashes: pinned values (the function is a file-format contract),
 * chaining, sensitivity to each input. */
static void test_block_hash(void **state)
{
    (void)state;
    int32_t tok[32];
    for (int i = 0; i < 32; i++)
        tok[i] = i * 7 + 1;
    uint64_t h[2];
    assert_int_equal(block_hash_chain(BLOCK_HASH_ROOT, tok, 32, 16, h), 2);
    assert_true(h[0] == block_hash(BLOCK_HASH_ROOT, tok, 16));
    assert_true(h[1] == block_hash(h[0], tok + 16, 16));
    /* values of the formula in blockhash.h, computed independently in
     * Python (big integers masked to 64 bits) */
    assert_true(h[0] == 0xb56502b3b64e3b84ULL);
    assert_true(h[1] == 0xaea81ee49a22e272ULL);
    assert_int_equal(block_hash_chain(BLOCK_HASH_ROOT, tok, 31, 16, h), 1);
    assert_true(block_hash(1, tok, 16) != block_hash(2, tok, 16));
    assert_true(block_hash(BLOCK_HASH_ROOT, tok, 15) != block_hash(BLOCK_HASH_ROOT, tok, 16));
    int32_t t2[16];
    memcpy(t2, tok, sizeof t2);
    t2[9] ^= 1;
    assert_true(block_hash(BLOCK_HASH_ROOT, tok, 16) != block_hash(BLOCK_HASH_ROOT, t2, 16));
}

static double cosine(const uint16_t *a, const uint16_t *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb);
}

/* Mean cosine of one layer's (or all layers', l < 0) prefill counts over
 * same-label and cross-label pairs. */
static void domain_cosines(const trace_t *t, int l, double *same, double *cross)
{
    double s = 0, c = 0;
    long ns = 0, nc = 0;
    size_t n = l < 0 ? TRACE_CELLS(t) : (size_t)t->E;
    size_t at = l < 0 ? 0 : (size_t)l * t->E;
    for (int64_t a = 0; a < t->n; a++)
        for (int64_t b = a + 1; b < t->n; b++) {
            double v = cosine(trace_prefill_row(t, a) + at, trace_prefill_row(t, b) + at, n);
            if (t->label[a] == t->label[b]) {
                s += v;
                ns++;
            } else {
                c += v;
                nc++;
            }
        }
    *same = s / ns;
    *cross = c / nc;
}

static void test_domain_structure(void **state)
{
    (void)state;
    gen_params_t p = small_params();
    p.requests = 240;
    p.layers = 9;
    p.experts = 32;
    p.top_k = 4;
    p.prompt_tokens = 64;
    p.decode_tokens = 0;
    p.layer_floor = 0.2;
    trace_t *t = gen(&p);
    double same, cross, s0, c0, s4, c4;
    domain_cosines(t, -1, &same, &cross);
    if (!(same > cross + 0.05))
        fail_msg("same-domain cosine %g not above cross-domain %g", same, cross);
    /* the shift is weakest at the first layer, strongest mid-depth */
    domain_cosines(t, 0, &s0, &c0);
    domain_cosines(t, 4, &s4, &c4);
    if (!(s4 - c4 > 2 * (s0 - c0)))
        fail_msg("domain gap at layer 4 (%g) not well above layer 0 (%g)", s4 - c4, s0 - c0);
    trace_free(t);
    /* no domain strength: no structure (gap within noise) */
    p.domain_strength = 0;
    t = gen(&p);
    domain_cosines(t, -1, &same, &cross);
    assert_true(fabs(same - cross) < 0.01);
    trace_free(t);
}

/* Mean cosine of each request's prefill and decode counts. */
static double prefill_decode_cos(const gen_params_t *p)
{
    trace_t *t = gen(p);
    double s = 0;
    for (int64_t r = 0; r < t->n; r++)
        s += cosine(trace_prefill_row(t, r), trace_decode_row(t, r), TRACE_CELLS(t));
    s /= (double)t->n;
    trace_free(t);
    return s;
}

static void test_decode_drift(void **state)
{
    (void)state;
    gen_params_t p = small_params();
    p.requests = 100;
    p.prompt_tokens = p.decode_tokens = 200;
    p.length_spread = 0;
    p.decode_drift = 0;
    double c0 = prefill_decode_cos(&p);
    p.decode_drift = 1.5;
    double c1 = prefill_decode_cos(&p);
    if (!(c0 > c1 + 0.03))
        fail_msg("drift 0 cosine %g not above drift 1.5 cosine %g", c0, c1);
}

static void test_lengths(void **state)
{
    (void)state;
    gen_params_t p = small_params();
    p.length_spread = 0;
    p.prompt_tokens = 33;
    p.decode_tokens = 7;
    trace_t *t = gen(&p);
    for (int64_t r = 0; r < t->n; r++) {
        assert_int_equal(t->prompt_tokens[r], 33);
        assert_int_equal(t->decode_tokens[r], 7);
    }
    trace_free(t);
    p.length_spread = 0.6;
    p.requests = 2000;
    p.layers = 1;
    t = gen(&p);
    double m = 0;
    for (int64_t r = 0; r < t->n; r++)
        m += t->prompt_tokens[r];
    m /= (double)t->n;
    /* lognormal mean 33, sd 33*sqrt(e^0.36 - 1); rounding adds < 0.5 */
    double sd = 33 * sqrt(exp(0.36) - 1) / sqrt((double)t->n);
    if (fabs(m - 33) > 3 * sd + 0.5)
        fail_msg("mean prompt %g, expected 33", m);
    trace_free(t);
    /* the uint16 ceiling */
    p.requests = 10;
    p.experts = 2;
    p.top_k = 1;
    p.generalists = 0;
    p.prompt_tokens = 60000;
    p.decode_tokens = 0;
    p.length_spread = 1.5;
    t = gen(&p);
    int hit = 0;
    for (int64_t r = 0; r < t->n; r++) {
        assert_true(t->prompt_tokens[r] >= 1 && t->prompt_tokens[r] <= 65535);
        hit |= t->prompt_tokens[r] == 65535;
    }
    assert_true(hit);
    check_counts(t, t->prefill_counts, t->prompt_tokens);
    trace_free(t);
}

static void expect_bad(const gen_params_t *p, const char *needle)
{
    char err[ELDR_ERRLEN] = "";
    trace_t *t = (trace_t *)1;
    assert_int_equal(gen_run(p, &t, err, sizeof err), -1);
    assert_null(t);
    if (!strstr(err, needle))
        fail_msg("error '%s' lacks '%s'", err, needle);
}

static void test_bad_params(void **state)
{
    (void)state;
    gen_params_t p = small_params();
    p.mix_prob = 1.5;
    expect_bad(&p, "--mix-prob");
    p = small_params();
    p.top_k = 17;
    expect_bad(&p, "--top-k");
    p = small_params();
    p.burst_factor = 4;
    expect_bad(&p, "--arrival-rate");
    p = small_params();
    double zero[3] = {0, 0, 0}, neg[3] = {1, -1, 1};
    p.domain_shares = zero;
    expect_bad(&p, "--domain-shares");
    p.domain_shares = neg;
    expect_bad(&p, "--domain-shares");
    p = small_params();
    p.prefix_groups = 2;
    p.prefix_blocks = 5000;
    expect_bad(&p, "--prefix-blocks");
    p = small_params();
    p.requests = 0;
    expect_bad(&p, "--requests");
}

/* Inclusion probabilities of sequential sampling of k without replacement
 * from p, by enumeration of every ordered pick sequence. */
static void exact_inclusion(const double *p, int n, int k, int depth, double prob,
                            int *used, double *incl)
{
    if (depth == k)
        return;
    double rest = 0;
    int left = 0;
    for (int i = 0; i < n; i++)
        if (!used[i]) {
            rest += p[i];
            left++;
        }
    for (int i = 0; i < n; i++) {
        if (used[i])
            continue;
        double q = rest > 0 ? p[i] / rest : 1.0 / left;
        if (q == 0)
            continue;
        incl[i] += prob * q;
        used[i] = 1;
        exact_inclusion(p, n, k, depth + 1, prob * q, used, incl);
        used[i] = 0;
    }
}

static void check_sampler(const float *pf, int n, int k)
{
    gen_alias_t a;
    gen_scratch_t s;
    assert_int_equal(gen_alias_init(&a, n), 0);
    assert_int_equal(gen_scratch_init(&s, n), 0);
    gen_alias_build(&a, pf, &s);
    double p[16], incl[16] = {0}, first[16] = {0};
    int used[16] = {0};
    long got[16] = {0}, got1[16] = {0};
    for (int i = 0; i < n; i++)
        p[i] = pf[i];
    exact_inclusion(p, n, k, 0, 1.0, used, incl);
    double tot = 0;
    for (int i = 0; i < n; i++)
        tot += p[i];
    for (int i = 0; i < n; i++)
        first[i] = p[i] / tot;
    rng_t r;
    rng_seed(&r, 99);
    enum { DRAWS = 200000 };
    uint16_t out[16];
    for (int d = 0; d < DRAWS; d++) {
        gen_pick_distinct(&r, &a, k, out, &s);
        got1[out[0]]++;
        for (int j = 0; j < k; j++) {
            for (int j2 = 0; j2 < j; j2++)
                assert_int_not_equal(out[j], out[j2]);
            got[out[j]]++;
        }
    }
    for (int i = 0; i < n; i++) {
        double f = (double)got[i] / DRAWS, sd = sqrt(incl[i] * (1 - incl[i]) / DRAWS);
        if (fabs(f - incl[i]) > 5 * sd + 1e-9)
            fail_msg("expert %d included %.5f, exact %.5f (n=%d k=%d)", i, f, incl[i], n, k);
        double f1 = (double)got1[i] / DRAWS, sd1 = sqrt(first[i] * (1 - first[i]) / DRAWS);
        if (fabs(f1 - first[i]) > 5 * sd1 + 1e-9)
            fail_msg("expert %d first %.5f, exact %.5f", i, f1, first[i]);
    }
    gen_alias_free(&a);
    gen_scratch_free(&s);
}

static void test_sampler_exact(void **state)
{
    (void)state;
    const float flat[6] = {0.1f, 0.2f, 0.3f, 0.15f, 0.15f, 0.1f};
    check_sampler(flat, 6, 3);
    /* one expert holds most mass: the exact scan takes over */
    const float peaked[7] = {0.85f, 0.05f, 0.04f, 0.03f, 0.02f, 0.007f, 0.003f};
    check_sampler(peaked, 7, 4);
    /* zero-probability experts are picked only when nothing else is left */
    const float zeros[5] = {0.7f, 0.3f, 0.0f, 0.0f, 0.0f};
    check_sampler(zeros, 5, 2);
    check_sampler(zeros, 5, 4);
    /* softmax of random logits, larger n */
    float z[16], pz[16];
    rng_t r;
    rng_seed(&r, 3);
    gen_normals(&r, z, 16, 1.5f);
    gen_softmax(z, 16, pz);
    check_sampler(pz, 16, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_laws_with_tokens),
        cmocka_unit_test(test_k_equals_e),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_label_shares),
        cmocka_unit_test(test_arrivals),
        cmocka_unit_test(test_bursts),
        cmocka_unit_test(test_prefix_groups),
        cmocka_unit_test(test_block_hash),
        cmocka_unit_test(test_domain_structure),
        cmocka_unit_test(test_decode_drift),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_sampler_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
