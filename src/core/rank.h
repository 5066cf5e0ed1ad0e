/* rank.h - average ranks with ties, and Spearman's rank correlation.
 *
 * Ranks are 1-based; tied values share the mean of the ranks they span
 * (the "average" method of scipy.stats.rankdata). Spearman's rho is the
 * Pearson correlation of the two average-rank vectors, which is exact
 * with ties (the 1 - 6*sum(d^2)/(n^3-n) shortcut is not). It is NaN when
 * either side is constant or n < 2: callers decide what that means.
 *
 * The sort is an LSD radix sort over the IEEE-754 bits of the doubles,
 * restricted to the bits that vary (digits of up to 11 bits), so ranking
 * costs O(n) and the same input always gives the same order. -0.0 and
 * +0.0 are one value. Inputs must not hold NaN (rank_average and
 * rank_spearman check; the rank_ref hot path trusts its caller).
 * Sizes are limited to 2^32 - 1 values. */
#ifndef ELDR_RANK_H
#define ELDR_RANK_H

#include <stddef.h>
#include <stdint.h>

/* Scratch buffers for sorting up to cap values; one per thread. */
typedef struct rank_work {
    size_t cap;
    uint64_t *key, *key2;
    uint32_t *idx, *idx2;
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
    double *centred;   /* [n] average rank of y minus (n+1)/2 */
    double ss;         /* sum of centred^2 */
} rank_ref;

int rank_ref_init(rank_ref *ref, const double *y, size_t n, char *err, size_t errlen);
void rank_ref_free(rank_ref *ref);

/* Spearman's rho of x (ref->n finite values) against the reference;
 * NaN when x or the reference is constant. w->cap >= ref->n. */
double rank_ref_spearman(const rank_ref *ref, const double *x, rank_work *w);

#endif
