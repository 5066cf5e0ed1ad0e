/* bench_route.c - the routing decision alone, as eldrd makes it: the
 * signature from a request's counts (count_idf over |S| layers, one L2
 * norm) and the ELDR decision over K centroids (K dot products and the
 * locality band). Target (issue 7): under 20 us at |S|*E = 2560, K = 16.
 * Rows: signature+decision, and the band rule alone on given similarities. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "err.h"
#include "route.h"
#include "rng.h"
#include "signature.h"

#define BL 48        /* MoE layers */
#define BE 128       /* experts per layer */
#define BS 20        /* layers in the mask: |S| * E = 2560 */
#define BK 16        /* decode workers */
#define BTOK 512     /* prompt tokens */
#define BTOPK 8
#define NREQ 256     /* distinct requests cycled through */

static void random_counts(rng_t *r, uint16_t *c)
{
    memset(c, 0, sizeof(uint16_t) * BL * BE);
    for (int t = 0; t < BTOK; t++)
        for (int l = 0; l < BL; l++)
            for (int j = 0; j < BTOPK; j++)   /* repeats allowed: only the cost matters */
                c[l * BE + (int)rng_below(r, BE)]++;
}

int main(void)
{
    char err[ELDR_ERRLEN];
    /* one decision per thread, as in eldrd: BLAS threads only add hand-offs */
    openblas_set_num_threads(1);
    rng_t r;
    rng_seed(&r, 2026);
    int layers[BS];
    for (int i = 0; i < BS; i++)
        layers[i] = i * 2;
    sig_recipe rec;
    float *idf_full = malloc(sizeof(float) * BL * BE);
    for (int i = 0; i < BL * BE; i++)
        idf_full[i] = (float)(0.1 + rng_uniform(&r));
    if (sig_recipe_init(&rec, SIG_COUNT_IDF, BL, BE, layers, BS, err, sizeof err) < 0 ||
        sig_recipe_set_idf(&rec, idf_full, err, sizeof err) < 0) {
        fprintf(stderr, "bench_route: %s\n", err);
        return 1;
    }
    size_t dim = sig_dim(&rec);
    float *cent = malloc(sizeof(float) * BK * dim), *sig = malloc(sizeof(float) * dim);
    for (int k = 0; k < BK; k++) {
        double ss = 0;
        for (size_t i = 0; i < dim; i++) {
            cent[k * dim + i] = (float)fabs(rng_normal(&r));
            ss += (double)cent[k * dim + i] * cent[k * dim + i];
        }
        for (size_t i = 0; i < dim; i++)
            cent[k * dim + i] = (float)(cent[k * dim + i] / sqrt(ss));
    }
    uint16_t *counts = malloc(sizeof(uint16_t) * NREQ * BL * BE);
    for (int q = 0; q < NREQ; q++)
        random_counts(&r, counts + (size_t)q * BL * BE);
    route_policy p;
    if (route_policy_init(&p, ROUTE_ELDR, BK, 1, err, sizeof err) < 0 ||
        route_policy_set_centroids(&p, cent, dim, 0.1, 1, err, sizeof err) < 0) {
        fprintf(stderr, "bench_route: %s\n", err);
        return 1;
    }
    int64_t load[BK] = {0};
    route_decision d;
    char size[64];
    snprintf(size, sizeof size, "|S|*E=%zu K=%d", dim, BK);

    /* signature + decision, with loads moving as in a live router */
    long n = 200000, checksum = 0;
    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
        const uint16_t *c = counts + (size_t)(i % NREQ) * BL * BE;
        sig_from_counts(&rec, c, NULL, sig, err, sizeof err);
        int w = route_decide(&p, sig, -1, load, &d);
        load[w]++;
        if (load[w] > 8)
            load[w] = 0;
        checksum += w;
    }
    double secs = bench_now() - t0;
    fprintf(stderr, "bench_route: %.2f us per decision (signature + decision), checksum %ld\n",
            secs / n * 1e6, checksum);
    bench_row("route: signature+decision", size, secs / n, n / secs, "decisions/s");

    /* the band rule alone on the similarities */
    double sim[BK];
    for (int k = 0; k < BK; k++)
        sim[k] = d.sim[k];
    long m = 5000000;
    t0 = bench_now();
    for (long i = 0; i < m; i++) {
        sim[i % BK] += 1e-9;
        checksum += route_band_decide(sim, BK, 0.1, 1, load, &d);
    }
    secs = bench_now() - t0;
    fprintf(stderr, "bench_route: %.3f us per band rule, checksum %ld\n", secs / m * 1e6,
            checksum);
    snprintf(size, sizeof size, "K=%d", BK);
    bench_row("route: band rule alone", size, secs / m, m / secs, "decisions/s");

    route_policy_free(&p);
    sig_recipe_free(&rec);
    free(idf_full);
    free(cent);
    free(sig);
    free(counts);
    return 0;
}
