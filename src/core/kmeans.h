/* kmeans.h - balanced spherical K-means (DESIGN.md section 1), the fit of
 * ELDR's decode-worker centroids.
 *
 * Input: N unit rows (signatures) of dimension D, float32 row-major.
 * Seeded k-means++ (squared L2) or caller-given initial rows; then up to
 * `iters` rounds of
 *   assignment: balanced = the optimal assignment with every cluster
 *               holding at most ceil(N/K) points (assign.h, exact);
 *               unbalanced = each point to its most similar centroid
 *               (lowest index on ties), for the ablation;
 *   update:     each centroid = mean of its members renormalised to unit
 *               length; an empty cluster keeps its centroid;
 * stopping when the assignment repeats or no centroid moves by more than
 * KMEANS_EPS (L2). Similarities X * mu^T go through simdot.h (an AVX-512
 * or AVX2 kernel on 2+ threads, cblas_sgemm on other CPUs).
 *
 * Rows must be finite and unit-norm (|norm - 1| <= 1e-3); an all-zero row
 * (a request with no counts under the layer mask) is refused with an error
 * naming it: the caller leaves such rows out and says so. */
#ifndef ELDR_KMEANS_H
#define ELDR_KMEANS_H

#include <stddef.h>
#include <stdint.h>

#define KMEANS_DEFAULT_ITERS 50
#define KMEANS_EPS 1e-6
/* kmeans_fit's return value when opts.cancel was raised (err says where). */
#define KMEANS_CANCELLED (-2)

/* Called after each assignment step with the 1-based iteration and the
 * objective of that assignment against the centroids it was made for. In
 * balanced and unbalanced mode alike this never increases. */
typedef void (*kmeans_progress_fn)(void *ctx, int iter, double objective);

typedef struct kmeans_opts {
    int k;                  /* clusters, 1 <= k <= n */
    int iters;              /* at most this many rounds (KMEANS_DEFAULT_ITERS) */
    uint64_t seed;          /* k-means++ seed */
    int balanced;           /* 1: capacity ceil(n/k); 0: plain spherical K-means */
    const int *init_rows;   /* k distinct row indices for the initial centroids, or NULL */
    const float *init_centroids; /* or [k][d] finite rows to start from (renormalised to
                               unit length; e.g. the current centroids of a refit), or NULL;
                               not both */
    kmeans_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    volatile int *cancel;   /* when non-NULL and set, the fit stops at the next check */
    int threads;            /* for the similarities; 0 = the CPUs we may use (at most 8).
                               The result does not depend on it. */
} kmeans_opts;

/* k, iters = 50, seed = 1, balanced, no init rows, no progress, no cancel,
 * default threads. */
void kmeans_opts_default(kmeans_opts *o, int k);

typedef struct kmeans_result {
    int n, d, k;
    float *centroids;   /* [k][d], unit rows */
    int *assign;        /* [n], cluster of each row */
    int *sizes;         /* [k] */
    double objective;   /* sum_i (1 - x_i . mu_assign[i]) over the returned
                           centroids and assignment, in double */
    int iterations;     /* assignment steps run */
    int converged;      /* 1 when it stopped because nothing moved */
} kmeans_result;

/* Fit. iters = 0 requires init_rows or init_centroids and computes only the assignment for
 * those centroids (balanced: the optimal one) and its objective; the
 * centroids returned are the initial ones. Returns 0; -1 with err on bad
 * input (zero, non-unit or non-finite row, bad k or init row) or out of
 * memory; KMEANS_CANCELLED when cancelled. On failure res holds nothing
 * to free. */
int kmeans_fit(const float *x, int n, int d, const kmeans_opts *o,
               kmeans_result *res, char *err, size_t errlen);

void kmeans_result_free(kmeans_result *res);

#endif
