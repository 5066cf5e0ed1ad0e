/* drift.h - is the live traffic still the calibration's? The baseline
 * and the alarm of the drift statistic that eldrd serves (GET /v1/drift,
 * the snapshot's "drift") and the dashboard's drift view draws.
 *
 * The statistic: each signature of a window goes to its nearest centroid
 * (the unconstrained argmax of the cosine, lowest index on a tie, exactly
 * as eldrd's window counts a routed signature); the window's shares are
 * compared with the calibration's shares measured the same way (the
 * model's nearest_share, computed at fit time by drift_nearest_shares) by
 * their total variation distance. A window of n signatures drawn from the
 * calibration's own distribution still shows a TVD above 0 (sampling
 * noise); drift_tvd_threshold gives the level that noise stays under 99%
 * of the time, so a TVD above it is drift, not chance (docs/dashboard.md,
 * "Drift"). */
#ifndef ELDR_DRIFT_H
#define ELDR_DRIFT_H

#include <stddef.h>
#include <stdint.h>

/* Monte Carlo replicates and seed of the threshold (fixed: one answer
 * for the same n and shares on every screen and in every process). */
#define DRIFT_MC_REPLICATES 4000
#define DRIFT_MC_SEED 0x5eedd41f7ULL
/* Up to this n the null is sampled exactly (n categorical draws per
 * replicate); above, from the multinomial's Gaussian limit, whose 99%
 * point is within 1% of the exact one from n = 256 on (numpy, 200000
 * draws, p = 0.312/0.294/0.305/0.089: 0.0919 vs 0.0912 at 256, 0.0458 vs
 * 0.0457 at 1024) and costs K normals per replicate instead of n draws
 * (exact at n = 4096, K = 8 took 320 ms). */
#define DRIFT_EXACT_MAX 256
#define DRIFT_QUANTILE 0.99

/* Shares of the n signatures x ([n][dim], unit rows) nearest to each of
 * the K centroids ([K][dim]): share[k] = (members of k) / n. n >= 1;
 * returns -1 when n < 1 (share untouched). */
int drift_nearest_shares(const float *centroids, int K, size_t dim, const float *x, int64_t n,
                         double *share);

/* The index of the centroid nearest to sig by route_dot, lowest on a tie. */
int drift_nearest(const float *centroids, int K, size_t dim, const float *sig);

/* Total variation distance 0.5 * sum |a_k - b_k|. */
double drift_tvd(const double *a, const double *b, int K);

/* The DRIFT_QUANTILE point of the TVD between the shares of a multinomial
 * sample of size n from p (K shares, summing to 1) and p itself: a window
 * of n signatures of the calibration's distribution shows a TVD above it
 * 1% of the time. NaN when n < 1 or p is not a distribution. Cached per
 * (n, p) (a few entries, thread safe): at most about 15 ms the first time
 * (n = 256, exact), then a lookup. */
double drift_tvd_threshold(int64_t n, const double *p, int K);

#endif
