/* bench_sig.c - signatures/s of sig_build_batch at L=48, E=128 (count_idf,
 * all layers and a 12-layer mask, 1 and 2 threads) and of sig_from_counts,
 * the router's per-request call. The counts are built here: 5000 requests,
 * 16..48 prompt tokens, each token picking k=8 distinct experts per layer,
 * so every layer conserves tokens * k. Best of 3 runs per row. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "err.h"
#include "rng.h"
#include "signature.h"
#include "trace.h"

#define NREQ 5000
#define NLAYER 48
#define NEXP 128
#define TOPK 8
#define REPS 3

static trace_t *make_trace(void)
{
    char err[ELDR_ERRLEN];
    trace_t *t = trace_new(NREQ, NLAYER, NEXP, TOPK, err, sizeof err);
    if (!t) {
        fprintf(stderr, "bench_sig: %s\n", err);
        exit(1);
    }
    rng_t g;
    rng_seed(&g, 2024);
    int perm[NEXP];
    for (int e = 0; e < NEXP; e++)
        perm[e] = e;
    for (int64_t r = 0; r < NREQ; r++) {
        int tokens = 16 + (int)rng_below(&g, 33);
        t->prompt_tokens[r] = tokens;
        for (int l = 0; l < NLAYER; l++)
            for (int tok = 0; tok < tokens; tok++)
                for (int j = 0; j < TOPK; j++) {   /* partial Fisher-Yates: k distinct */
                    int s = j + (int)rng_below(&g, NEXP - j);
                    int x = perm[s];
                    perm[s] = perm[j];
                    perm[j] = x;
                    TRACE_AT(t->prefill_counts, t, r, l, x)++;
                }
    }
    return t;
}

static void bench_batch(const trace_t *t, const float *idf, int n_layers, int threads)
{
    char err[ELDR_ERRLEN], what[64], size[64];
    int layers[NLAYER];
    for (int i = 0; i < n_layers; i++)
        layers[i] = i * (NLAYER / n_layers);   /* spread over the depth */
    sig_recipe r;
    if (sig_recipe_init(&r, SIG_COUNT_IDF, NLAYER, NEXP, layers, n_layers, err, sizeof err) ||
        sig_recipe_set_idf(&r, idf, err, sizeof err)) {
        fprintf(stderr, "bench_sig: %s\n", err);
        exit(1);
    }
    float *out = malloc((size_t)NREQ * sig_dim(&r) * sizeof *out);
    if (!out) {
        fprintf(stderr, "bench_sig: out of memory\n");
        exit(1);
    }
    memset(out, 0, (size_t)NREQ * sig_dim(&r) * sizeof *out);
    double best = 1e30;
    for (int rep = 0; rep < REPS; rep++) {
        double t0 = bench_now();
        if (sig_build_batch_threads(t, &r, NULL, 0, out, NULL, NULL, threads, err, sizeof err)) {
            fprintf(stderr, "bench_sig: %s\n", err);
            exit(1);
        }
        double dt = bench_now() - t0;
        if (dt < best)
            best = dt;
    }
    snprintf(what, sizeof what, "signatures count_idf %d thread%s", threads, threads > 1 ? "s" : "");
    snprintf(size, sizeof size, "N=%d L=%d E=%d |S|=%d", NREQ, NLAYER, NEXP, n_layers);
    bench_row(what, size, best, NREQ / best, "sig/s");
    free(out);
    sig_recipe_free(&r);
}

/* The router's call: one request at a time into one reused buffer. */
static void bench_single(const trace_t *t, const float *idf)
{
    char err[ELDR_ERRLEN];
    sig_recipe r;
    if (sig_recipe_init(&r, SIG_COUNT_IDF, NLAYER, NEXP, NULL, 0, err, sizeof err) ||
        sig_recipe_set_idf(&r, idf, err, sizeof err)) {
        fprintf(stderr, "bench_sig: %s\n", err);
        exit(1);
    }
    float *out = calloc(sig_dim(&r), sizeof *out);
    double best = 1e30;
    for (int rep = 0; rep < REPS; rep++) {
        double t0 = bench_now();
        for (int64_t i = 0; i < NREQ; i++)
            if (sig_from_counts(&r, trace_prefill_row(t, i), NULL, out, err, sizeof err) < 0) {
                fprintf(stderr, "bench_sig: %s\n", err);
                exit(1);
            }
        double dt = bench_now() - t0;
        if (dt < best)
            best = dt;
    }
    bench_row("sig_from_counts count_idf (per request)", "N=5000 L=48 E=128 |S|=48", best,
              NREQ / best, "sig/s");
    free(out);
    sig_recipe_free(&r);
}

int main(void)
{
    char err[ELDR_ERRLEN];
    trace_t *t = make_trace();
    float *idf = malloc((size_t)NLAYER * NEXP * sizeof *idf);
    if (!idf || sig_idf_fit(t, NULL, 0, idf, err, sizeof err)) {
        fprintf(stderr, "bench_sig: %s\n", idf ? err : "out of memory");
        return 1;
    }
    bench_batch(t, idf, NLAYER, 1);
    bench_batch(t, idf, NLAYER, 2);
    bench_batch(t, idf, 12, 1);
    bench_batch(t, idf, 12, 2);
    bench_single(t, idf);
    free(idf);
    trace_free(t);
    return 0;
}
