/* bench_costrule.c - one decision's CPU, band rule against cost rule, at
 * K 4 and K 16 on the reference geometry (L 48, E 128, top-8, 512-token
 * prompts), as eldrd makes it (issue 33, item 5; target: cost <= 10 us
 * at K 16).
 *
 * band: the signature from the counts (count_idf over 20 layers) and the
 *       K dot products and the band (what bench_route times);
 * cost: the request's cells from its counts (cost_req_set) and the cost
 *       of every worker (cost_decide), each worker holding 32 requests;
 * update: what a route and its finish add to the estimate
 *       (cost_state_add + cost_state_remove), under eldrd's state lock. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "costrule.h"
#include "err.h"
#include "rng.h"
#include "route.h"
#include "signature.h"

#define BL 48
#define BE 128
#define BS 20
#define BTOK 512
#define BTOPK 8
#define NREQ 256
#define INFLIGHT 32  /* requests in flight per worker */

/* A prompt's counts: BTOK tokens, each picking BTOPK distinct experts per
 * layer from a skewed profile (a few hot experts, as real routers). */
static void random_counts(rng_t *r, uint16_t *c)
{
    memset(c, 0, sizeof(uint16_t) * BL * BE);
    for (int t = 0; t < BTOK; t++)
        for (int l = 0; l < BL; l++) {
            uint16_t *row = c + l * BE;
            int picked[BTOPK], n = 0;
            while (n < BTOPK) {
                double u = rng_uniform(r);
                int e = (int)(u * u * BE);   /* skewed toward low ids */
                int dup = 0;
                for (int j = 0; j < n; j++)
                    dup |= picked[j] == e;
                if (!dup)
                    picked[n++] = e;
            }
            for (int j = 0; j < BTOPK; j++)
                row[picked[j]]++;
        }
}

static int bench_band(int K, const uint16_t *counts, rng_t *r)
{
    char err[ELDR_ERRLEN];
    int layers[BS];
    for (int i = 0; i < BS; i++)
        layers[i] = i * 2;
    sig_recipe rec;
    float *idf = malloc(sizeof(float) * BL * BE);
    for (int i = 0; i < BL * BE; i++)
        idf[i] = (float)(0.1 + rng_uniform(r));
    if (sig_recipe_init(&rec, SIG_COUNT_IDF, BL, BE, layers, BS, err, sizeof err) < 0 ||
        sig_recipe_set_idf(&rec, idf, err, sizeof err) < 0) {
        fprintf(stderr, "bench_costrule: %s\n", err);
        return -1;
    }
    size_t dim = sig_dim(&rec);
    float *cent = malloc(sizeof(float) * K * dim), *sig = malloc(sizeof(float) * dim);
    for (int k = 0; k < K; k++) {
        double ss = 0;
        for (size_t i = 0; i < dim; i++) {
            cent[k * dim + i] = (float)fabs(rng_normal(r));
            ss += (double)cent[k * dim + i] * cent[k * dim + i];
        }
        for (size_t i = 0; i < dim; i++)
            cent[k * dim + i] = (float)(cent[k * dim + i] / sqrt(ss));
    }
    route_policy p;
    if (route_policy_init(&p, ROUTE_ELDR, K, 1, err, sizeof err) < 0 ||
        route_policy_set_centroids(&p, cent, dim, 0.1, 1, err, sizeof err) < 0) {
        fprintf(stderr, "bench_costrule: %s\n", err);
        return -1;
    }
    int64_t load[ROUTE_MAX_WORKERS];
    for (int k = 0; k < K; k++)
        load[k] = INFLIGHT;
    route_decision d;
    long n = 100000, checksum = 0;
    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
        sig_from_counts(&rec, counts + (size_t)(i % NREQ) * BL * BE, NULL, sig, err,
                        sizeof err);
        checksum += route_decide(&p, sig, -1, load, &d);
    }
    double secs = bench_now() - t0;
    char size[64];
    snprintf(size, sizeof size, "K=%d L=%d E=%d", K, BL, BE);
    fprintf(stderr, "bench_costrule: band %.2f us per decision at K %d, checksum %ld\n",
            secs / n * 1e6, K, checksum);
    bench_row("decision: band (signature+band)", size, secs / n, n / secs, "decisions/s");
    route_policy_free(&p);
    sig_recipe_free(&rec);
    free(idf);
    free(cent);
    free(sig);
    return 0;
}

static int bench_cost(int K, const uint16_t *counts)
{
    char err[ELDR_ERRLEN];
    cost_model m;
    cost_model_default(&m);
    cost_state s;
    cost_req x = {0};
    if (cost_state_init(&s, K, BL, BE, &m, 256, err, sizeof err) < 0)
        goto fail;
    int64_t load[ROUTE_MAX_WORKERS];
    for (int k = 0; k < K; k++) {
        for (int j = 0; j < INFLIGHT; j++) {
            if (cost_req_set(&x, counts + (size_t)((k * INFLIGHT + j) % NREQ) * BL * BE, BL,
                             BE, BTOPK, err, sizeof err) < 0)
                goto fail;
            cost_state_add(&s, k, &x);
        }
        load[k] = INFLIGHT;
    }
    route_decision d;
    long n = 20000, checksum = 0;
    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
        cost_req_set(&x, counts + (size_t)(i % NREQ) * BL * BE, BL, BE, BTOPK, err,
                     sizeof err);
        checksum += cost_decide(&s, &x, load, NULL, &d, NULL);
    }
    double secs = bench_now() - t0;
    char size[64];
    snprintf(size, sizeof size, "K=%d L=%d E=%d", K, BL, BE);
    fprintf(stderr, "bench_costrule: cost %.2f us per decision at K %d (%d cells of x), "
            "checksum %ld\n", secs / n * 1e6, K, x.n, checksum);
    bench_row("decision: cost (cells+costs)", size, secs / n, n / secs, "decisions/s");

    /* the estimate's update a route and its finish make */
    long u = 5000;
    t0 = bench_now();
    for (long i = 0; i < u; i++) {
        int k = (int)(i % K);
        cost_state_add(&s, k, &x);
        cost_state_remove(&s, k, &x);
    }
    secs = bench_now() - t0;
    fprintf(stderr, "bench_costrule: %.2f us per add+remove of %d cells\n", secs / u * 1e6,
            x.n);
    bench_row("decision: cost estimate add+remove", size, secs / u, u / secs, "requests/s");
    cost_req_free(&x);
    cost_state_free(&s);
    return 0;
fail:
    fprintf(stderr, "bench_costrule: %s\n", err);
    cost_req_free(&x);
    cost_state_free(&s);
    return -1;
}

int main(void)
{
    openblas_set_num_threads(1);
    rng_t r;
    rng_seed(&r, 2027);
    uint16_t *counts = malloc(sizeof(uint16_t) * NREQ * BL * BE);
    for (int q = 0; q < NREQ; q++)
        random_counts(&r, counts + (size_t)q * BL * BE);
    int rc = 0;
    int Ks[2] = {4, 16};
    for (int i = 0; i < 2 && !rc; i++)
        rc = bench_band(Ks[i], counts, &r) || bench_cost(Ks[i], counts);
    free(counts);
    return rc ? 1 : 0;
}
