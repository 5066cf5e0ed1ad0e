/* rank.c - radix-sorted average ranks and Spearman's rho (see rank.h). */
#include "rank.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

#define RANK_MAX ((size_t)UINT32_MAX)

int rank_work_init(rank_work *w, size_t cap, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    if (cap > RANK_MAX)
        return eldr_errf(err, errlen, "rank: %zu values, more than the %zu supported",
                         cap, RANK_MAX);
    w->key = eldr_calloc(cap, sizeof *w->key);
    w->key2 = eldr_calloc(cap, sizeof *w->key2);
    w->idx = eldr_calloc(cap, sizeof *w->idx);
    w->idx2 = eldr_calloc(cap, sizeof *w->idx2);
    if (!w->key || !w->key2 || !w->idx || !w->idx2) {
        rank_work_free(w);
        return eldr_errf(err, errlen, "rank: out of memory for %zu values", cap);
    }
    w->cap = cap;
    return 0;
}

void rank_work_free(rank_work *w)
{
    free(w->key);
    free(w->key2);
    free(w->idx);
    free(w->idx2);
    memset(w, 0, sizeof *w);
}

/* A uint64 whose unsigned order is the numeric order of x: flip every
 * bit of negatives, only the sign bit of positives. -0.0 becomes +0.0
 * first so that the two zeros tie, as they compare equal. */
static inline uint64_t sort_key(double x)
{
    uint64_t u;
    if (x == 0)
        x = 0.0;
    memcpy(&u, &x, sizeof u);
    return (u >> 63) ? ~u : u | (UINT64_C(1) << 63);
}

/* LSD radix sort over only the bits that differ between the keys:
 * distances rounded to a grid and spread over a few binades vary in ~40
 * of the 64 bits, which 4 passes of 10-bit digits cover, instead of 8
 * byte passes. */
#define RADIX_MAX_BITS 11
#define RADIX_MAX_PASSES 6   /* 64 bits / 11, rounded up */

void rank_sort(const double *x, size_t n, rank_work *w)
{
    uint64_t any = 0, all = ~UINT64_C(0);
    for (size_t i = 0; i < n; i++) {
        uint64_t k = sort_key(x[i]);
        w->key[i] = k;
        w->idx[i] = (uint32_t)i;
        any |= k;
        all &= k;
    }
    uint64_t vary = any ^ all;
    if (n < 2 || !vary)
        return;   /* all keys equal: already "sorted", in input order */
    int lo = __builtin_ctzll(vary), hi = 63 - __builtin_clzll(vary);
    int bits = hi - lo + 1;
    int passes = (bits + RADIX_MAX_BITS - 1) / RADIX_MAX_BITS;
    int width = (bits + passes - 1) / passes;
    uint64_t mask = (UINT64_C(1) << width) - 1;
    static _Thread_local uint32_t hist[RADIX_MAX_PASSES][1 << RADIX_MAX_BITS];
    memset(hist, 0, sizeof hist[0] * (size_t)passes);
    for (size_t i = 0; i < n; i++) {
        uint64_t k = w->key[i] >> lo;
        for (int b = 0; b < passes; b++)
            hist[b][(k >> (b * width)) & mask]++;
    }
    for (int b = 0; b < passes; b++) {
        int shift = lo + b * width;
        /* a digit that is the same in every key cannot reorder anything */
        if (hist[b][(w->key[0] >> shift) & mask] == n)
            continue;
        uint32_t pos[1 << RADIX_MAX_BITS], sum = 0;
        for (uint64_t d = 0; d <= mask; d++) {
            pos[d] = sum;
            sum += hist[b][d];
        }
        uint64_t *ks = w->key, *kd = w->key2;
        uint32_t *is = w->idx, *id = w->idx2;
        for (size_t i = 0; i < n; i++) {
            uint32_t p = pos[(ks[i] >> shift) & mask]++;
            kd[p] = ks[i];
            id[p] = is[i];
        }
        w->key = kd;
        w->key2 = ks;
        w->idx = id;
        w->idx2 = is;
    }
}

static int check_input(const double *x, size_t n, const char *what, char *err, size_t errlen)
{
    if (n > RANK_MAX)
        return eldr_errf(err, errlen, "rank: %zu values, more than the %zu supported",
                         n, RANK_MAX);
    for (size_t i = 0; i < n; i++)
        if (isnan(x[i]))
            return eldr_errf(err, errlen, "rank: %s[%zu] is NaN", what, i);
    return 0;
}

/* Walk the sorted keys of w in groups of equal keys; every member of a
 * group gets the group's average rank. */
static void ranks_from_sorted(const rank_work *w, size_t n, double *rank)
{
    size_t s = 0;
    while (s < n) {
        size_t e = s + 1;
        while (e < n && w->key[e] == w->key[s])
            e++;
        double avg = 0.5 * (double)(s + 1 + e);
        for (size_t k = s; k < e; k++)
            rank[w->idx[k]] = avg;
        s = e;
    }
}

int rank_average(const double *x, size_t n, double *rank, char *err, size_t errlen)
{
    if (check_input(x, n, "value", err, errlen))
        return -1;
    rank_work w;
    if (rank_work_init(&w, n, err, errlen))
        return -1;
    rank_sort(x, n, &w);
    ranks_from_sorted(&w, n, rank);
    rank_work_free(&w);
    return 0;
}

int rank_ref_init(rank_ref *ref, const double *y, size_t n, char *err, size_t errlen)
{
    memset(ref, 0, sizeof *ref);
    ref->centred = eldr_calloc(n, sizeof *ref->centred);
    if (!ref->centred)
        return eldr_errf(err, errlen, "rank: out of memory for %zu values", n);
    if (rank_average(y, n, ref->centred, err, errlen)) {
        rank_ref_free(ref);
        return -1;
    }
    double mean = 0.5 * ((double)n + 1.0), ss = 0;
    for (size_t i = 0; i < n; i++) {
        ref->centred[i] -= mean;
        ss += ref->centred[i] * ref->centred[i];
    }
    ref->n = n;
    ref->ss = ss;
    return 0;
}

void rank_ref_free(rank_ref *ref)
{
    free(ref->centred);
    memset(ref, 0, sizeof *ref);
}

/* Pearson of the average ranks of x with the reference: since the
 * reference ranks are centred, sum((rx - m) * cy) over a tie group is
 * (avg - m) * sum(cy) over its members; no rank array is needed. */
double rank_ref_spearman(const rank_ref *ref, const double *x, rank_work *w)
{
    size_t n = ref->n;
    if (n < 2 || ref->ss <= 0)
        return NAN;
    rank_sort(x, n, w);
    double mean = 0.5 * ((double)n + 1.0), sxy = 0, sxx = 0;
    size_t s = 0;
    while (s < n) {
        size_t e = s + 1;
        while (e < n && w->key[e] == w->key[s])
            e++;
        double d = 0.5 * (double)(s + 1 + e) - mean, cy = 0;
        for (size_t k = s; k < e; k++)
            cy += ref->centred[w->idx[k]];
        sxy += d * cy;
        sxx += d * d * (double)(e - s);
        s = e;
    }
    if (sxx <= 0)
        return NAN;
    return sxy / sqrt(sxx * ref->ss);
}

int rank_spearman(const double *x, const double *y, size_t n, double *rho,
                  char *err, size_t errlen)
{
    if (check_input(x, n, "x", err, errlen))
        return -1;
    rank_ref ref;
    if (rank_ref_init(&ref, y, n, err, errlen))
        return -1;
    rank_work w;
    if (rank_work_init(&w, n, err, errlen)) {
        rank_ref_free(&ref);
        return -1;
    }
    *rho = rank_ref_spearman(&ref, x, &w);
    rank_work_free(&w);
    rank_ref_free(&ref);
    return 0;
}
