/* rank.c - radix-sorted average ranks and Spearman's rho (see rank.h). */
#include "rank.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

#define RANK_MAX ((size_t)UINT32_MAX)
#define RANK_REF_MAX ((size_t)INT32_MAX)   /* rank2 <= 2n must fit in uint32 */
#define BUCKET_BITS_MAX 20                 /* bounds: at most 4 MiB of counts */

static int bit_length(uint64_t x)
{
    return x ? 64 - __builtin_clzll(x) : 0;
}

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
    w->bucket_bits = bit_length(cap) < BUCKET_BITS_MAX ? bit_length(cap) : BUCKET_BITS_MAX;
    w->bucket = eldr_calloc(((size_t)1 << w->bucket_bits) + 1, sizeof *w->bucket);
    if (!w->key || !w->key2 || !w->idx || !w->idx2 || !w->bucket) {
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
    free(w->bucket);
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

/* Digits of at most 10 bits: a scatter pass costs about the same per
 * element up to 8-10 bits and grows beyond (more write streams than the
 * caches hold). */
#define RADIX_MAX_BITS 10
#define RADIX_MAX_PASSES 7   /* 64 bits / 10, rounded up */

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

/* The scatter passes of an LSD sort of the words *a[0..n) whose digits
 * plan p counted into h; scratch *tmp; on return *a points at the sorted
 * words. */
static void scatter_words(uint64_t **a, uint64_t **tmp, size_t n, const radix_plan *p,
                          const radix_hist h)
{
    for (int b = 0; b < p->passes; b++) {
        uint32_t pos[1 << RADIX_MAX_BITS];
        if (!digit_starts(h, b, p, n, pos))
            continue;
        int shift = p->lo + b * p->width;
        uint64_t *s = *a, *d = *tmp;
        for (size_t i = 0; i < n; i++)
            d[pos[(s[i] >> shift) & p->mask]++] = s[i];
        *a = d;
        *tmp = s;
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
    scatter_words(a, tmp, n, &p, h);
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

/* Pearson's sums reach n^3 (2^93 for 2^31 values): kept in 128 bits. */
__extension__ typedef __int128 rank_i128;

/* sum over n values of (twice the centred average rank)^2, given
 * ties = sum over tie groups of g^3 - g: (n^3 - n - ties) / 3 (below). */
static rank_i128 sum_sq_centred(size_t n, rank_i128 ties)
{
    rank_i128 nn = (rank_i128)n;
    return (nn * nn * nn - nn - ties) / 3;
}

/* How many terms of size below 2n^2 add up in int64 without overflow:
 * all n of them up to about a million values; the sums go to 128 bits
 * block by block. */
static size_t safe_block(size_t n)
{
    uint64_t sq = (uint64_t)n * (uint64_t)n;
    uint64_t k = sq ? (UINT64_C(1) << 62) / sq : n;
    return k >= n ? (n ? n : 1) : (k ? (size_t)k : 1);
}

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
    rank_i128 ties = 0;
    size_t s = 0;
    while (s < n) {
        size_t e = s + 1;
        while (e < n && w.key[e] == w.key[s])
            e++;
        uint32_t r2 = (uint32_t)(s + 1 + e);   /* twice the group's average rank */
        for (size_t k = s; k < e; k++)
            ref->rank2[w.idx[k]] = r2;
        rank_i128 g = (rank_i128)(e - s);
        ties += g * g * g - g;
        s = e;
    }
    rank_work_free(&w);
    ref->n = n;
    ref->ss = (double)sum_sq_centred(n, ties);
    return 0;
}

void rank_ref_free(rank_ref *ref)
{
    free(ref->rank2);
    memset(ref, 0, sizeof *ref);
}

/* ---- Spearman against the reference ------------------------------------------
 *
 * The sorted x are walked as 64-bit words: the key (its offset from the
 * least key, or its tie-group number) in the high bits, the reference's
 * rank2 in the low pb bits. Pearson's sums are exact integers, each 4x
 * the textbook one (twice each centred rank): at 0-based sorted position
 * k, twice the centred rank of x is 2k + 1 - n when x_k is not tied, so
 *     sxy = sum_k (2k + 1 - n) (rank2_k - n - 1)
 *         = 2 sum_k k rank2_k + (1 - n) n (n + 1)
 * (sum rank2 = n (n + 1) and sum (2k + 1 - n) = 0), and
 *     sxx = sum_k (2k + 1 - n)^2 = (n^3 - n) / 3.
 * A tie group at positions s..e-1 replaces 2k + 1 - n by s + e - n for
 * its g = e - s members: sxy gains sum (s + e - 1 - 2k) rank2_k and sxx
 * loses (g^3 - g) / 3. So the walk is one multiply-add per value, with
 * a rare detour for ties. */

typedef struct pearson_sums {
    rank_i128 dot;    /* sum over positions k of k * rank2_k */
    rank_i128 corr;   /* tie groups: sum (s + e - 1 - 2k) rank2_k */
    rank_i128 ties;   /* tie groups: sum (g^3 - g) */
} pearson_sums;

/* Add the fully sorted words a[0..m), the first at overall position base. */
static void add_sorted(pearson_sums *ps, const uint64_t *a, size_t m, size_t base, int pb)
{
    uint64_t low = (UINT64_C(1) << pb) - 1;
    size_t i = 0;
    while (i < m) {
        size_t e = i + 1;
        while (e < m && a[e] >> pb == a[i] >> pb)
            e++;
        int64_t s2e1 = (int64_t)(2 * base + i + e) - 1;   /* s + e - 1, overall */
        for (size_t q = i; q < e; q++) {
            uint64_t pos = base + q, r2 = a[q] & low;
            ps->dot += (rank_i128)(pos * r2);
            if (e - i > 1)
                ps->corr += (rank_i128)(s2e1 - 2 * (int64_t)pos) * (int64_t)r2;
        }
        if (e - i > 1) {
            rank_i128 g = (rank_i128)(e - i);
            ps->ties += g * g * g - g;
        }
        i = e;
    }
}

/* Insertion sort of a few words by their bits from pb up. */
static void insertion_sort(uint64_t *a, size_t m, int pb)
{
    for (size_t i = 1; i < m; i++) {
        uint64_t x = a[i], k = x >> pb;
        size_t j = i;
        for (; j > 0 && a[j - 1] >> pb > k; j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
}

/* Sort a run of words that share their top key bits by the key bits
 * [pb, pb + bits) below; returns the sorted buffer (a or tmp). */
static uint64_t *sort_run(uint64_t *a, uint64_t *tmp, size_t m, int pb, int bits)
{
    if (m <= 16) {
        insertion_sort(a, m, pb);
        return a;
    }
    uint64_t vary = varying_bits(a, m) >> pb & ((UINT64_C(1) << bits) - 1);
    if (vary)   /* else the run is one tie group */
        radix_sort_words(&a, &tmp, m, pb, bits);
    return a;
}

/* Walk words sorted by their top `top` key bits (of kb): values rarely
 * share those, and a run that does is ordered before it is added: a pair
 * here (most runs are pairs), a longer run by sort_run (with scratch
 * tmp). */
static void add_top_sorted(pearson_sums *ps, uint64_t *a, uint64_t *tmp, size_t n, int pb,
                           int kb, int top)
{
    int shift = pb + kb - top;
    uint64_t low = (UINT64_C(1) << pb) - 1;
    rank_i128 dot = 0;
    uint64_t part = 0;   /* the last `left` products, each below 2n^2 */
    size_t block = safe_block(n), left = block;
    size_t i = 0;
    while (i < n) {
        uint64_t t = a[i] >> shift;
        if (i + 1 == n || a[i + 1] >> shift != t) {
            part += (uint64_t)i * (a[i] & low);
            i++;
            if (--left == 0) {
                dot += part;
                part = 0;
                left = block;
            }
            continue;
        }
        size_t e = i + 2;
        while (e < n && a[e] >> shift == t)
            e++;
        if (e - i > 2) {
            add_sorted(ps, sort_run(a + i, tmp + i, e - i, pb, kb - top), e - i, i, pb);
        } else {
            uint64_t x = a[i], y = a[i + 1];
            if (x >> pb > y >> pb) {
                uint64_t z = x;
                x = y;
                y = z;
            }
            dot += (rank_i128)((uint64_t)i * (x & low)) + (rank_i128)((uint64_t)(i + 1) * (y & low));
            if (x >> pb == y >> pb) {   /* a tie group of two: see add_sorted */
                ps->corr += (rank_i128)(x & low) - (rank_i128)(y & low);
                ps->ties += 6;
            }
        }
        i = e;
    }
    ps->dot += dot + part;
}

/* Keys that fit beside rank2: pack (key - kmin) << pb | rank2, radix-sort
 * the words by their top log2(n) + 5 key bits only, at most two digits
 * (2 passes at 30000 values instead of 4 for all ~36 bits of grid
 * distances), and let the walk order the few runs that share those.
 * The digits are counted as the words are packed. */
static void sums_packed(const rank_ref *ref, const uint64_t *key, uint64_t kmin, int kb,
                        int pb, rank_work *w, pearson_sums *ps)
{
    size_t n = ref->n;
    int top = bit_length(n) + 5;
    top = top < 2 * RADIX_MAX_BITS ? top : 2 * RADIX_MAX_BITS;
    top = top < kb ? top : kb;
    radix_plan p = plan_digits(pb + kb - top, top);
    static _Thread_local radix_hist h;
    memset(h[0], 0, ((size_t)p.mask + 1) * sizeof h[0][0]);
    memset(h[1], 0, ((size_t)p.mask + 1) * sizeof h[1][0]);
    uint64_t *a = w->key, *tmp = w->key2;
    for (size_t i = 0; i < n; i++) {
        uint64_t word = (key[i] - kmin) << pb | ref->rank2[i], d = word >> p.lo;
        a[i] = word;
        h[0][d & p.mask]++;
        h[1][(d >> p.width) & p.mask]++;   /* all zero when there is one pass */
    }
    scatter_words(&a, &tmp, n, &p, h);
    add_top_sorted(ps, a, tmp, n, pb, kb, top);
}

/* Keys too wide to share a word with rank2: sort the keys with rank2 as
 * payload, then number the tie groups and walk (group << pb | rank2). */
static void sums_wide(const rank_ref *ref, const uint64_t *key, int pb, rank_work *w,
                      pearson_sums *ps)
{
    size_t n = ref->n;
    memcpy(w->key, key, n * sizeof *key);
    memcpy(w->idx, ref->rank2, n * sizeof *ref->rank2);
    uint64_t *k = w->key, *k2 = w->key2;
    uint32_t *v = w->idx, *v2 = w->idx2;
    radix_sort_pairs(&k, &v, &k2, &v2, n, varying_bits(k, n));
    uint64_t group = 0;
    for (size_t i = 0; i < n; i++) {
        group += i > 0 && k[i] != k[i - 1];
        k2[i] = group << pb | v[i];
    }
    add_sorted(ps, k2, n, 0, pb);
}

double rank_ref_spearman_keys(const rank_ref *ref, const uint64_t *key, uint64_t kmin,
                              uint64_t kmax, rank_work *w)
{
    size_t n = ref->n;
    if (n < 2 || ref->ss <= 0 || kmin == kmax)
        return NAN;   /* a constant side */
    int kb = bit_length(kmax - kmin), pb = bit_length(2 * (uint64_t)n);
    pearson_sums ps = {0, 0, 0};
    if (kb + pb <= 64)
        sums_packed(ref, key, kmin, kb, pb, w, &ps);
    else
        sums_wide(ref, key, pb, w, &ps);
    rank_i128 nn = (rank_i128)n;
    rank_i128 sxy = 2 * ps.dot + (1 - nn) * nn * (nn + 1) + ps.corr;
    rank_i128 sxx = sum_sq_centred(n, ps.ties);
    if (sxx <= 0)
        return NAN;
    return (double)sxy / sqrt((double)sxx * ref->ss);
}

/* ---- bounds without sorting ----------------------------------------------------
 *
 * Count the keys into buckets of equal key width (bucket b holds m_b
 * values after C_b smaller ones). Ties share a bucket, so a value's
 * average rank r lies in [C_b + 1, C_b + m_b], and twice it is within
 * m_b - 1 of 2 C_b + m_b + 1. In the 4x sums of rank_ref_spearman_keys:
 *     sxy = sum (2r - n - 1) cy2  is within  E = sum (m_b - 1) |cy2|
 *           of  sum (2 C_b + m_b - n) cy2,
 *     sxx lies between (n^3 - n - sum_b (m_b^3 - m_b)) / 3 (every bucket
 *           one tie group) and (n^3 - n) / 3 (no ties at all),
 * with cy2 = rank2 - n - 1 the reference's twice-centred rank. */
void rank_ref_spearman_bounds(const rank_ref *ref, const uint64_t *key, uint64_t kmin,
                              uint64_t kmax, rank_work *w, double *lo, double *hi)
{
    size_t n = ref->n;
    *lo = *hi = NAN;
    if (n < 2 || ref->ss <= 0 || kmin == kmax)
        return;
    int shift = bit_length(kmax - kmin) - w->bucket_bits;
    shift = shift > 0 ? shift : 0;
    size_t nb = (size_t)((kmax - kmin) >> shift) + 1;
    uint32_t *start = w->bucket;
    memset(start, 0, (nb + 1) * sizeof *start);
    for (size_t i = 0; i < n; i++)
        start[(key[i] - kmin) >> shift]++;
    rank_i128 crowd = 0;   /* sum of m_b^3 - m_b */
    uint32_t below = 0;
    for (size_t b = 0; b < nb; b++) {
        uint32_t m = start[b];
        start[b] = below;
        below += m;
        if (m > 1)
            crowd += (rank_i128)m * m * m - m;
    }
    start[nb] = below;
    rank_i128 sxy = 0, e = 0;
    int64_t n1 = (int64_t)n + 1;
    size_t block = safe_block(n);
    for (size_t i0 = 0; i0 < n; i0 += block) {
        size_t i1 = n - i0 < block ? n : i0 + block;
        int64_t bxy = 0, be = 0;   /* each term is below n^2 in size */
        for (size_t i = i0; i < i1; i++) {
            size_t b = (size_t)((key[i] - kmin) >> shift);
            int64_t c = start[b], m = (int64_t)start[b + 1] - c;
            int64_t cy2 = (int64_t)ref->rank2[i] - n1;
            bxy += (2 * c + m - (int64_t)n) * cy2;
            be += (m - 1) * (cy2 < 0 ? -cy2 : cy2);
        }
        sxy += bxy;
        e += be;
    }
    double sxx_hi = (double)sum_sq_centred(n, 0), sxx_lo = (double)sum_sq_centred(n, crowd);
    double top = (double)(sxy + e), bottom = (double)(sxy - e);
    /* a larger |sxy| over a smaller sxx is the extreme; sxx_lo may be 0 */
    double up = top >= 0 ? top / sqrt(sxx_lo * ref->ss) : top / sqrt(sxx_hi * ref->ss);
    double down = bottom >= 0 ? bottom / sqrt(sxx_hi * ref->ss) : bottom / sqrt(sxx_lo * ref->ss);
    /* widen by far more than the rounding of either computation */
    *hi = !(up < 1) ? 1.0 : up + 1e-12;
    *lo = !(down > -1) ? -1.0 : down - 1e-12;
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
