/* rank.h - average ranks with ties, and Spearman's rank correlation.
 *
 * Ranks are 1-based; tied values share the mean of the ranks they span
 * (the "average" method of scipy.stats.rankdata). Spearman's rho is the
 * Pearson correlation of the two average-rank vectors, which is exact
 * with ties (the 1 - 6*sum(d^2)/(n^3-n) shortcut is not). It is NaN when
 * either side is constant or n < 2: callers decide what that means.
 *
 * Sorting is an LSD radix sort over the IEEE-754 bits of the doubles,
 * restricted to the bits that vary (digits of up to 10 bits), so ranking
 * costs O(n) and the same input always gives the same order. -0.0 and
 * +0.0 are one value. Inputs must not hold NaN (rank_average and
 * rank_spearman check; the rank_ref hot path trusts its caller).
 * Sizes are limited to 2^32 - 1 values (rank_ref: 2^31 - 1).
 *
 * Correlating many x against one fixed y (rank_ref) is the hot path of
 * layer selection. There the reference's ranks (twice the average rank,
 * an integer) ride in the low bits of each 64-bit sort key, so one array
 * of n words is sorted in a few passes of narrow digits, and the ranks of
 * x are read off the sorted order. Pearson's sums are exact integers
 * (twice a centred average rank is an integer), independent of the order
 * of addition; only the final quotient is rounded. */
#ifndef ELDR_RANK_H
#define ELDR_RANK_H

#include <stddef.h>
#include <stdint.h>

/* Scratch buffers for sorting up to cap values; one per thread. */
typedef struct rank_work {
    size_t cap;
    uint64_t *key, *key2;
    uint32_t *idx, *idx2;
    uint32_t *bucket;   /* [2^bucket_bits + 1] counts, for the bounds */
    int bucket_bits;
} rank_work;

int rank_work_init(rank_work *w, size_t cap, char *err, size_t errlen);
void rank_work_free(rank_work *w);

/* Sort x[0..n) ascending (stable). On return w->key[0..n) holds the
 * sorted keys (equal keys <=> equal values) and w->idx[0..n) the
 * positions in x they came from. n <= w->cap. */
void rank_sort(const double *x, size_t n, rank_work *w);

/* Average ranks of x into rank[0..n). */
int rank_average(const double *x, size_t n, double *rank, char *err, size_t errlen);

/* Spearman's rho of x and y (each n values) into *rho (NaN when either
 * side is constant or n < 2). */
int rank_spearman(const double *x, const double *y, size_t n, double *rho,
                  char *err, size_t errlen);

/* A fixed reference side whose ranks are computed once, for correlating
 * many x against the same y (layer selection ranks the decode distances
 * once, then only each candidate's signature distances). */
typedef struct rank_ref {
    size_t n;
    uint32_t *rank2;   /* [n] twice the average rank of y: an integer in [2, 2n] */
    double ss;         /* sum of (rank2 - (n + 1))^2 */
} rank_ref;

int rank_ref_init(rank_ref *ref, const double *y, size_t n, char *err, size_t errlen);
void rank_ref_free(rank_ref *ref);

/* Spearman's rho of x (ref->n finite values) against the reference;
 * NaN when x or the reference is constant. w->cap >= ref->n. */
double rank_ref_spearman(const rank_ref *ref, const double *x, rank_work *w);

/* The same for values already given as sort keys: key[i] < key[j] iff
 * x_i < x_j, equal keys iff tied values; kmin and kmax are the least and
 * greatest key. (Layer selection's distances on the 2^-36 grid are their
 * own keys: see rho_grid_key.) */
double rank_ref_spearman_keys(const rank_ref *ref, const uint64_t *key, uint64_t kmin,
                              uint64_t kmax, rank_work *w);

/* Bounds *lo <= rho <= *hi on rank_ref_spearman_keys of the same keys,
 * found without sorting: the keys are counted into about n buckets of
 * equal key width, and a value's rank is known to within its bucket's
 * count, which bounds Pearson's sums (rank.c). About 1e-4 wide at 30000
 * grid distances, at half the cost of the exact rho; layer selection
 * computes the exact rho only of candidates whose *hi reaches the best
 * *lo. Both NaN when rho is undefined. */
void rank_ref_spearman_bounds(const rank_ref *ref, const uint64_t *key, uint64_t kmin,
                              uint64_t kmax, rank_work *w, double *lo, double *hi);

#endif
