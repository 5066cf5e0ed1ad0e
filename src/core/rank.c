/* rank.c - radix-sorted average ranks and Spearman's rho (see rank.h). */
#include "rank.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

#define RANK_MAX ((size_t)UINT32_MAX)
#define RANK_REF_MAX ((size_t)INT32_MAX)   /* rank2 <= 2n must fit in uint32 */

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

/* ---- LSD radix sort ------------------------------------------------------ */

/* Digits of at most 9 bits: a scatter pass costs about the same per
 * element up to 8-9 bits and grows beyond (more write streams than the
 * caches hold), so 36 varying bits sort fastest in 4 passes of 9. */
#define RADIX_MAX_BITS 9
#define RADIX_MAX_PASSES 8   /* 64 bits / 9, rounded up */

/* The digits of an LSD sort over key bits [lo, lo + bits). */
typedef struct radix_plan {
    int lo, passes, width;
    uint64_t mask;
} radix_plan;

static radix_plan plan_digits(int lo, int bits)
{
    radix_plan p = {.lo = lo};
    p.passes = (bits + RADIX_MAX_BITS - 1) / RADIX_MAX_BITS;
    p.width = p.passes ? (bits + p.passes - 1) / p.passes : 0;
    p.mask = (UINT64_C(1) << p.width) - 1;
    return p;
}

typedef uint32_t radix_hist[RADIX_MAX_PASSES][1 << RADIX_MAX_BITS];

/* Count every digit of every key in one pass. */
static void count_digits(const uint64_t *k, size_t n, const radix_plan *p, radix_hist h)
{
    for (int b = 0; b < p->passes; b++)
        memset(h[b], 0, ((size_t)p->mask + 1) * sizeof h[b][0]);
    for (size_t i = 0; i < n; i++) {
        uint64_t key = k[i] >> p->lo;
        for (int b = 0; b < p->passes; b++)
            h[b][(key >> (b * p->width)) & p->mask]++;
    }
}

/* Exclusive prefix sums of pass b's digit counts into pos; 0 when the
 * pass can be skipped (one digit holds every key: nothing to reorder). */
static int digit_starts(const radix_hist h, int b, const radix_plan *p, size_t n,
                        uint32_t *pos)
{
    uint32_t sum = 0;
    for (uint64_t d = 0; d <= p->mask; d++) {
        if (h[b][d] == n)
            return 0;
        pos[d] = sum;
        sum += h[b][d];
    }
    return 1;
}

/* Stable sort of *k[0..n) with payload *v over the key bits set in vary
 * (the bits that differ between the keys). *k2, *v2 are scratch of n; the
 * buffers ping-pong, and on return *k and *v point at the sorted data. */
static void radix_sort_pairs(uint64_t **k, uint32_t **v, uint64_t **k2, uint32_t **v2,
                             size_t n, uint64_t vary)
{
    if (n < 2 || !vary)
        return;   /* all keys equal: already "sorted", in input order */
    int lo = __builtin_ctzll(vary), hi = 63 - __builtin_clzll(vary);
    radix_plan p = plan_digits(lo, hi - lo + 1);
    static _Thread_local radix_hist h;
    count_digits(*k, n, &p, h);
    for (int b = 0; b < p.passes; b++) {
        uint32_t pos[1 << RADIX_MAX_BITS];
        if (!digit_starts(h, b, &p, n, pos))
            continue;
        int shift = p.lo + b * p.width;
        uint64_t *ks = *k, *kd = *k2;
        uint32_t *vs = *v, *vd = *v2;
        for (size_t i = 0; i < n; i++) {
            uint32_t d = pos[(ks[i] >> shift) & p.mask]++;
            kd[d] = ks[i];
            vd[d] = vs[i];
        }
        *k = kd;
        *k2 = ks;
        *v = vd;
        *v2 = vs;
    }
}

/* Stable sort of the words *a[0..n) by their bits [lo, lo + bits), with
 * scratch *tmp; on return *a points at the sorted words. */
static void radix_sort_words(uint64_t **a, uint64_t **tmp, size_t n, int lo, int bits)
{
    if (n < 2 || bits < 1)
        return;
    radix_plan p = plan_digits(lo, bits);
    static _Thread_local radix_hist h;
    count_digits(*a, n, &p, h);
    for (int b = 0; b < p.passes; b++) {
        uint32_t pos[1 << RADIX_MAX_BITS];
        if (!digit_starts(h, b, &p, n, pos))
            continue;
        int shift = p.lo + b * p.width;
        uint64_t *s = *a, *d = *tmp;
        for (size_t i = 0; i < n; i++)
            d[pos[(s[i] >> shift) & p.mask]++] = s[i];
        *a = d;
        *tmp = s;
    }
}

static uint64_t varying_bits(const uint64_t *k, size_t n)
{
    uint64_t any = 0, all = ~UINT64_C(0);
    for (size_t i = 0; i < n; i++) {
        any |= k[i];
        all &= k[i];
    }
    return any ^ all;
}

void rank_sort(const double *x, size_t n, rank_work *w)
{
    for (size_t i = 0; i < n; i++) {
        w->key[i] = sort_key(x[i]);
        w->idx[i] = (uint32_t)i;
    }
    radix_sort_pairs(&w->key, &w->idx, &w->key2, &w->idx2, n, varying_bits(w->key, n));
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

/* ---- the fixed reference side -------------------------------------------- */

int rank_ref_init(rank_ref *ref, const double *y, size_t n, char *err, size_t errlen)
{
    memset(ref, 0, sizeof *ref);
    if (n > RANK_REF_MAX)
        return eldr_errf(err, errlen, "rank: %zu values, more than the %zu supported",
                         n, RANK_REF_MAX);
    if (check_input(y, n, "value", err, errlen))
        return -1;
    rank_work w;
    if (rank_work_init(&w, n, err, errlen))
        return -1;
    ref->rank2 = eldr_calloc(n, sizeof *ref->rank2);
    if (!ref->rank2) {
        rank_work_free(&w);
        return eldr_errf(err, errlen, "rank: out of memory for %zu values", n);
    }
    rank_sort(y, n, &w);
    double ss = 0;
    size_t s = 0;
    while (s < n) {
        size_t e = s + 1;
        while (e < n && w.key[e] == w.key[s])
            e++;
        uint32_t r2 = (uint32_t)(s + 1 + e);   /* twice the group's average rank */
        double c = (double)r2 - ((double)n + 1);
        for (size_t k = s; k < e; k++)
            ref->rank2[w.idx[k]] = r2;
        ss += c * c * (double)(e - s);
        s = e;
    }
    rank_work_free(&w);
    ref->n = n;
    ref->ss = ss;
    return 0;
}

void rank_ref_free(rank_ref *ref)
{
    free(ref->rank2);
    memset(ref, 0, sizeof *ref);
}

/* Pearson's sums over the sorted x, each 4x the textbook one (twice each
 * centred rank). A tie group at 0-based positions s..e-1 has average rank
 * (s + 1 + e) / 2, twice centred s + e - n; over the group,
 * sum((rx - m)(ry - m)) is that times the sum of its members' centred
 * reference ranks, so no rank array is needed. */
typedef struct pearson_sums {
    double sxy, sxx;
} pearson_sums;

static void add_group(pearson_sums *a, size_t s, size_t e, uint64_t rank2_sum, size_t n)
{
    double dx = (double)(s + e) - (double)n, g = (double)(e - s);
    a->sxy += dx * ((double)rank2_sum - g * ((double)n + 1));
    a->sxx += dx * dx * g;
}

/* Packed: (key - kmin) in the high bits, rank2 in the low pb bits; one
 * array of words to sort, and equal high parts are the tie groups. */
static void sums_packed(const rank_ref *ref, const uint64_t *key, uint64_t kmin, int kb,
                        int pb, rank_work *w, pearson_sums *a)
{
    size_t n = ref->n;
    uint64_t *s = w->key, *tmp = w->key2, low = (UINT64_C(1) << pb) - 1;
    for (size_t i = 0; i < n; i++)
        s[i] = (key[i] - kmin) << pb | ref->rank2[i];
    radix_sort_words(&s, &tmp, n, pb, kb);
    size_t g = 0;
    while (g < n) {
        size_t e = g + 1;
        uint64_t hi = s[g] >> pb, sum = s[g] & low;
        while (e < n && s[e] >> pb == hi)
            sum += s[e++] & low;
        add_group(a, g, e, sum, n);
        g = e;
    }
}

/* Keys too wide to share a word with rank2: sort keys with rank2 as payload. */
static void sums_pairs(const rank_ref *ref, const uint64_t *key, rank_work *w, pearson_sums *a)
{
    size_t n = ref->n;
    memcpy(w->key, key, n * sizeof *key);
    memcpy(w->idx, ref->rank2, n * sizeof *ref->rank2);
    uint64_t *k = w->key, *k2 = w->key2;
    uint32_t *v = w->idx, *v2 = w->idx2;
    radix_sort_pairs(&k, &v, &k2, &v2, n, varying_bits(k, n));
    size_t g = 0;
    while (g < n) {
        size_t e = g + 1;
        uint64_t sum = v[g];
        while (e < n && k[e] == k[g])
            sum += v[e++];
        add_group(a, g, e, sum, n);
        g = e;
    }
}

static int bit_length(uint64_t x)
{
    return x ? 64 - __builtin_clzll(x) : 0;
}

double rank_ref_spearman_keys(const rank_ref *ref, const uint64_t *key, uint64_t kmin,
                              uint64_t kmax, rank_work *w)
{
    size_t n = ref->n;
    if (n < 2 || ref->ss <= 0 || kmin == kmax)
        return NAN;   /* a constant side */
    int kb = bit_length(kmax - kmin), pb = bit_length(2 * (uint64_t)n);
    pearson_sums a = {0, 0};
    if (kb + pb <= 64)
        sums_packed(ref, key, kmin, kb, pb, w, &a);
    else
        sums_pairs(ref, key, w, &a);
    if (a.sxx <= 0)
        return NAN;
    return a.sxy / sqrt(a.sxx * ref->ss);
}

double rank_ref_spearman(const rank_ref *ref, const double *x, rank_work *w)
{
    size_t n = ref->n;
    if (n < 2)
        return NAN;
    uint64_t kmin = UINT64_MAX, kmax = 0;
    uint64_t *key = w->key2;   /* the sums copy keys out of key2 before reusing it */
    for (size_t i = 0; i < n; i++) {
        uint64_t k = sort_key(x[i]);
        key[i] = k;
        kmin = k < kmin ? k : kmin;
        kmax = k > kmax ? k : kmax;
    }
    return rank_ref_spearman_keys(ref, key, kmin, kmax, w);
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
