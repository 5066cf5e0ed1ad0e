/* drift.c - nearest-centroid shares, their TVD, and its noise threshold
 * (drift.h). */
#include "drift.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "route.h"

int drift_nearest(const float *centroids, int K, size_t dim, const float *sig)
{
    /* the same products and the same strict '>' as eldrd's window
     * (state.c record_window over decide.c's similarities) */
    int best = 0;
    double bs = route_dot(centroids, sig, dim);
    for (int k = 1; k < K; k++) {
        double v = route_dot(centroids + (size_t)k * dim, sig, dim);
        if (v > bs) {
            bs = v;
            best = k;
        }
    }
    return best;
}

int drift_nearest_shares(const float *centroids, int K, size_t dim, const float *x, int64_t n,
                         double *share)
{
    if (n < 1 || K < 1)
        return -1;
    for (int k = 0; k < K; k++)
        share[k] = 0;
    for (int64_t i = 0; i < n; i++)
        share[drift_nearest(centroids, K, dim, x + (size_t)i * dim)] += 1;
    for (int k = 0; k < K; k++)
        share[k] /= (double)n;
    return 0;
}

double drift_tvd(const double *a, const double *b, int K)
{
    double t = 0;
    for (int k = 0; k < K; k++)
        t += fabs(a[k] - b[k]);
    return 0.5 * t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One replicate, exact: n draws by the cumulative shares. */
static double draw_exact(rng_t *r, int64_t n, const double *p, const double *cum, int K,
                         int64_t *cnt)
{
    memset(cnt, 0, (size_t)K * sizeof *cnt);
    for (int64_t i = 0; i < n; i++) {
        double u = rng_uniform(r);
        int lo = 0, hi = K - 1;   /* first k with cum[k] > u */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cum[mid] > u)
                hi = mid;
            else
                lo = mid + 1;
        }
        cnt[lo]++;
    }
    double t = 0;
    for (int k = 0; k < K; k++)
        t += fabs((double)cnt[k] / (double)n - p[k]);
    return 0.5 * t;
}

/* One replicate from the Gaussian limit: sqrt(n) (phat - p) ~ N(0,
 * diag(p) - p p^T), drawn as Z_k = sqrt(p_k) g_k - p_k sum_j sqrt(p_j) g_j. */
static double draw_gauss(rng_t *r, int64_t n, const double *p, int K, double *g)
{
    double s = 0;
    for (int k = 0; k < K; k++) {
        g[k] = sqrt(p[k]) * rng_normal(r);   /* sqrt(p_k) g_k */
        s += g[k];                           /* sum_j sqrt(p_j) g_j */
    }
    double t = 0;
    for (int k = 0; k < K; k++)
        t += fabs(g[k] - p[k] * s);
    return 0.5 * t / sqrt((double)n);
}

static double compute_threshold(int64_t n, const double *p, int K)
{
    double *v = malloc(DRIFT_MC_REPLICATES * sizeof *v);
    double *cum = malloc((size_t)K * sizeof *cum), *g = malloc((size_t)K * sizeof *g);
    int64_t *cnt = malloc((size_t)K * sizeof *cnt);
    double q = NAN;
    if (v && cum && g && cnt) {
        double c = 0;
        for (int k = 0; k < K; k++)
            cum[k] = c += p[k];
        cum[K - 1] = INFINITY;   /* rounding never leaves u past the last */
        rng_t r;
        rng_seed(&r, DRIFT_MC_SEED);
        for (int i = 0; i < DRIFT_MC_REPLICATES; i++)
            v[i] = n <= DRIFT_EXACT_MAX ? draw_exact(&r, n, p, cum, K, cnt)
                                        : draw_gauss(&r, n, p, K, g);
        qsort(v, DRIFT_MC_REPLICATES, sizeof *v, cmp_double);
        q = v[(int)ceil(DRIFT_QUANTILE * DRIFT_MC_REPLICATES) - 1];
    }
    free(v);
    free(cum);
    free(g);
    free(cnt);
    return q;
}

/* A few (n, p) entries, replaced round robin: a window that fills asks
 * for each n once; a full one asks for the same n on every poll. */
#define CACHE_N 16
#define CACHE_K 256
static struct {
    int64_t n;
    int K;
    double p[CACHE_K];
    double q;
} cache[CACHE_N];
static int cache_next;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

double drift_tvd_threshold(int64_t n, const double *p, int K)
{
    if (n < 1 || K < 1 || !p)
        return NAN;
    double sum = 0;
    for (int k = 0; k < K; k++) {
        if (!(p[k] >= 0) || !isfinite(p[k]))
            return NAN;
        sum += p[k];
    }
    if (fabs(sum - 1) > 1e-6)
        return NAN;
    int cacheable = K <= CACHE_K;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; cacheable && i < CACHE_N; i++)
        if (cache[i].K == K && cache[i].n == n &&
            !memcmp(cache[i].p, p, (size_t)K * sizeof *p)) {
            double q = cache[i].q;
            pthread_mutex_unlock(&cache_lock);
            return q;
        }
    pthread_mutex_unlock(&cache_lock);
    double q = compute_threshold(n, p, K);
    if (cacheable && q == q) {
        pthread_mutex_lock(&cache_lock);
        int i = cache_next;
        cache_next = (cache_next + 1) % CACHE_N;
        cache[i].n = n;
        cache[i].K = K;
        memcpy(cache[i].p, p, (size_t)K * sizeof *p);
        cache[i].q = q;
        pthread_mutex_unlock(&cache_lock);
    }
    return q;
}
