/* rho.c - pair sampling, pair distances and rho of a recipe (see rho.h). */
#include "rho.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rank.h"
#include "rng.h"

static int pairs_alloc(rho_pairs *out, int64_t n, char *err, size_t errlen)
{
    out->i = eldr_calloc((size_t)n, sizeof *out->i);
    out->j = eldr_calloc((size_t)n, sizeof *out->j);
    if (!out->i || !out->j) {
        rho_pairs_free(out);
        return eldr_errf(err, errlen, "rho: out of memory for %lld pairs", (long long)n);
    }
    return 0;
}

static int check_requests(int64_t n_req, char *err, size_t errlen)
{
    if (n_req < 2)
        return eldr_errf(err, errlen, "rho needs at least 2 requests, the trace has %lld",
                         (long long)n_req);
    if (n_req > INT32_MAX)
        return eldr_errf(err, errlen, "rho: %lld requests, more than the %d supported",
                         (long long)n_req, INT32_MAX);
    return 0;
}

int rho_pairs_sample(int64_t n_req, int64_t p, uint64_t seed, rho_pairs *out,
                     char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (check_requests(n_req, err, errlen))
        return -1;
    if (p < 1 || p > INT32_MAX)
        return eldr_errf(err, errlen, "rho: %lld pairs requested (need 1 to %d)",
                         (long long)p, INT32_MAX);
    if (pairs_alloc(out, p, err, errlen))
        return -1;
    rng_t r;
    rng_seed(&r, seed);
    int64_t kept = 0;
    for (int64_t k = 0; k < p; k++) {
        int32_t i = (int32_t)rng_below(&r, (uint64_t)n_req);
        int32_t j = (int32_t)rng_below(&r, (uint64_t)n_req);
        if (i == j)
            continue;    /* a request is not compared with itself */
        out->i[kept] = i;
        out->j[kept] = j;
        kept++;
    }
    out->n = kept;
    out->drawn = p;
    return 0;
}

int rho_pairs_all(int64_t n_req, rho_pairs *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (check_requests(n_req, err, errlen))
        return -1;
    double total = (double)n_req * (double)(n_req - 1) / 2;
    size_t mem = eldr_phys_mem();
    if (total > (double)INT32_MAX || (mem && total * 8 > (double)mem / 2))
        return eldr_errf(err, errlen,
                         "rho: all pairs of %lld requests are %.0f pairs, too many; "
                         "draw a sample of pairs instead", (long long)n_req, total);
    int64_t n = (int64_t)total;
    if (pairs_alloc(out, n, err, errlen))
        return -1;
    int64_t k = 0;
    for (int32_t i = 0; i < n_req; i++)
        for (int32_t j = i + 1; j < n_req; j++) {
            out->i[k] = i;
            out->j[k] = j;
            k++;
        }
    out->n = out->drawn = n;
    return 0;
}

void rho_pairs_free(rho_pairs *p)
{
    free(p->i);
    free(p->j);
    memset(p, 0, sizeof *p);
}

/* cos with a zero vector is defined as 0 (see rho.h) */
static inline double cos_or_zero(double dot, double na, double nb)
{
    return (na > 0 && nb > 0) ? dot / sqrt(na * nb) : 0.0;
}

/* Decode counts at most this large make 16 products sum in int32 without
 * overflow: 16 * 11585^2 < 2^31. */
#define DOT16_MAX_COUNT 11585

/* Exact dot product of two count rows. With every count <= DOT16_MAX_COUNT
 * (narrow), the products go 16 at a time through an int32 sum of int16
 * values, the shape compilers turn into SIMD multiply-adds (pmaddwd);
 * else one 64-bit sum. Same integer either way. (uint16_t and int16_t
 * may alias each other.) */
static uint64_t count_dot(const uint16_t *a, const uint16_t *b, size_t n, int narrow)
{
    uint64_t s = 0;
    size_t c = 0;
    if (narrow) {
        const int16_t *x = (const int16_t *)a, *y = (const int16_t *)b;
        for (; c + 16 <= n; c += 16) {
            int32_t part = 0;
            for (int k = 0; k < 16; k++)
                part += x[c + k] * y[c + k];
            s += (uint64_t)part;
        }
    }
    for (; c < n; c++)
        s += (uint64_t)a[c] * b[c];
    return s;
}

int rho_decode_norms_init(const trace_t *t, rho_decode_norms *dn, char *err, size_t errlen)
{
    memset(dn, 0, sizeof *dn);
    if (!t->decode_counts)
        return eldr_errf(err, errlen, "rho needs decode_counts, which the trace lacks");
    size_t cells = TRACE_CELLS(t);
    dn->sq = eldr_calloc((size_t)t->n, sizeof *dn->sq);
    if (!dn->sq)
        return eldr_errf(err, errlen, "rho: out of memory for %lld requests", (long long)t->n);
    uint16_t most = 0;
    for (size_t c = 0; c < (size_t)t->n * cells; c++)
        most = t->decode_counts[c] > most ? t->decode_counts[c] : most;
    dn->narrow = most <= DOT16_MAX_COUNT;
    for (int64_t r = 0; r < t->n; r++) {
        const uint16_t *d = trace_decode_row(t, r);
        dn->sq[r] = count_dot(d, d, cells, dn->narrow);
    }
    return 0;
}

void rho_decode_norms_free(rho_decode_norms *dn)
{
    free(dn->sq);
    memset(dn, 0, sizeof *dn);
}

void rho_decode_dist_range(const trace_t *t, const rho_pairs *pr, const rho_decode_norms *dn,
                           int64_t from, int64_t to, double *out)
{
    size_t cells = TRACE_CELLS(t);
    for (int64_t p = from; p < to; p++) {
        const uint16_t *a = trace_decode_row(t, pr->i[p]), *b = trace_decode_row(t, pr->j[p]);
        uint64_t dot = count_dot(a, b, cells, dn->narrow);
        out[p] = rho_grid(1.0 - cos_or_zero((double)dot, (double)dn->sq[pr->i[p]],
                                             (double)dn->sq[pr->j[p]]));
    }
}

int rho_decode_dist(const trace_t *t, const rho_pairs *pr, double *out,
                    char *err, size_t errlen)
{
    rho_decode_norms dn;
    if (rho_decode_norms_init(t, &dn, err, errlen))
        return -1;
    rho_decode_dist_range(t, pr, &dn, 0, pr->n, out);
    rho_decode_norms_free(&dn);
    return 0;
}

void rho_sig_dist(const float *sig, size_t dim, const rho_pairs *pr, double *out)
{
    for (int64_t p = 0; p < pr->n; p++) {
        const float *a = sig + (size_t)pr->i[p] * dim, *b = sig + (size_t)pr->j[p] * dim;
        double dot = 0;
        for (size_t c = 0; c < dim; c++)
            dot += (double)a[c] * (double)b[c];
        /* unit rows: the dot is the cosine; a zero row gives 0 by itself */
        out[p] = rho_grid(1.0 - dot);
    }
}

static int all_equal(const double *x, int64_t n)
{
    for (int64_t k = 1; k < n; k++)
        if (x[k] != x[0])
            return 0;
    return 1;
}

int rho_spearman(const double *sig_dist, const double *dec_dist, int64_t n,
                 const char *what, double *rho, char *err, size_t errlen)
{
    if (n < 2)
        return eldr_errf(err, errlen, "%s: rho needs at least 2 pairs, got %lld",
                         what, (long long)n);
    if (rank_spearman(sig_dist, dec_dist, (size_t)n, rho, err, errlen))
        return -1;
    if (isnan(*rho))
        return eldr_errf(err, errlen, "%s: rho is undefined: the %s distances of all %lld "
                         "pairs are equal", what,
                         all_equal(dec_dist, n) ? "decode" : "signature", (long long)n);
    return 0;
}

int rho_layer_values(const trace_t *t, sig_variant v, const float *idf_row, int64_t row,
                     int l, double *out)
{
    size_t E = (size_t)t->E, off = ((size_t)row * (size_t)t->L + (size_t)l) * E;
    const uint16_t *c = t->prefill_counts + off;
    const float *g = v == SIG_GATE_PROB ? t->gate_prob : v == SIG_GATE_LOGIT ? t->gate_logit : NULL;
    if ((sig_variant_uses_gate(v) && !g) || (v == SIG_COUNT_IDF && !idf_row))
        return -1;
    /* one loop per variant: this runs for every request of every layer */
    switch (v) {
    case SIG_COUNT:
        for (size_t e = 0; e < E; e++)
            out[e] = c[e];
        return 0;   /* counts are finite */
    case SIG_COUNT_IDF:
        for (size_t e = 0; e < E; e++)
            out[e] = (double)c[e] * (double)idf_row[e];
        break;
    case SIG_SQRT_COUNT:
        for (size_t e = 0; e < E; e++)
            out[e] = sqrt((double)c[e]);
        return 0;
    case SIG_BINARY:
        for (size_t e = 0; e < E; e++)
            out[e] = c[e] != 0;
        return 0;
    case SIG_GATE_PROB:
    case SIG_GATE_LOGIT:
        for (size_t e = 0; e < E; e++)
            out[e] = g[off + e];
        break;
    default:
        return -1;
    }
    for (size_t e = 0; e < E; e++)
        if (!isfinite(out[e]))
            return -1;
    return 0;
}

double rho_dot(const double *a, const double *b, size_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;   /* four chains pipeline */
    size_t e = 0;
    for (; e + 4 <= n; e += 4) {
        s0 += a[e] * b[e];
        s1 += a[e + 1] * b[e + 1];
        s2 += a[e + 2] * b[e + 2];
        s3 += a[e + 3] * b[e + 3];
    }
    for (; e < n; e++)
        s0 += a[e] * b[e];
    return (s0 + s1) + (s2 + s3);
}

/* Written out so that the sixteen sums stay in registers; each dot's
 * four chains see the very operations of rho_dot, in the same order. */
void rho_dot_x4(const double *const a[4], const double *const b[4], size_t n, double out[4])
{
    const double *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    const double *b0 = b[0], *b1 = b[1], *b2 = b[2], *b3 = b[3];
    double s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
    double s20 = 0, s21 = 0, s22 = 0, s23 = 0, s30 = 0, s31 = 0, s32 = 0, s33 = 0;
    size_t e = 0;
    for (; e + 4 <= n; e += 4) {
        s00 += a0[e] * b0[e];
        s01 += a0[e + 1] * b0[e + 1];
        s02 += a0[e + 2] * b0[e + 2];
        s03 += a0[e + 3] * b0[e + 3];
        s10 += a1[e] * b1[e];
        s11 += a1[e + 1] * b1[e + 1];
        s12 += a1[e + 2] * b1[e + 2];
        s13 += a1[e + 3] * b1[e + 3];
        s20 += a2[e] * b2[e];
        s21 += a2[e + 1] * b2[e + 1];
        s22 += a2[e + 2] * b2[e + 2];
        s23 += a2[e + 3] * b2[e + 3];
        s30 += a3[e] * b3[e];
        s31 += a3[e + 1] * b3[e + 1];
        s32 += a3[e + 2] * b3[e + 2];
        s33 += a3[e + 3] * b3[e + 3];
    }
    for (; e < n; e++) {
        s00 += a0[e] * b0[e];
        s10 += a1[e] * b1[e];
        s20 += a2[e] * b2[e];
        s30 += a3[e] * b3[e];
    }
    out[0] = (s00 + s01) + (s02 + s03);
    out[1] = (s10 + s11) + (s12 + s13);
    out[2] = (s20 + s21) + (s22 + s23);
    out[3] = (s30 + s31) + (s32 + s33);
}

/* What rho_eval needs from the recipe and the trace. */
static int check_recipe(const trace_t *t, const sig_recipe *r, char *err, size_t errlen)
{
    if (!r->layers || r->n_layers < 1)
        return eldr_errf(err, errlen, "rho: recipe has no layers");
    if (r->L != t->L || r->E != t->E)
        return eldr_errf(err, errlen, "rho: trace has %d layers x %d experts, recipe expects %d x %d",
                         t->L, t->E, r->L, r->E);
    if (r->variant == SIG_COUNT_IDF && !r->idf)
        return eldr_errf(err, errlen, "rho: count_idf recipe has no idf weights (fit them first)");
    if ((r->variant == SIG_GATE_PROB && !t->gate_prob) || (r->variant == SIG_GATE_LOGIT && !t->gate_logit))
        return eldr_errf(err, errlen, "rho: variant %s needs dataset %s, the trace has none",
                         sig_variant_name(r->variant), sig_variant_name(r->variant));
    return 0;
}

int rho_eval(const trace_t *t, const sig_recipe *r, const rho_pairs *pr,
             const double *dec_dist, double *sig_dist_out, double *rho,
             int64_t *n_zero, char *err, size_t errlen)
{
    if (check_recipe(t, r, err, errlen))
        return -1;
    size_t E = (size_t)t->E, n = (size_t)t->n, P = (size_t)pr->n;
    double *vals = eldr_calloc(n * E, sizeof *vals);   /* one layer of every request */
    double *cum_dot = eldr_calloc(P, sizeof *cum_dot), *cum_sq = eldr_calloc(n, sizeof *cum_sq);
    double *sd = sig_dist_out ? sig_dist_out : eldr_calloc(P, sizeof *sd);
    double *dd = dec_dist ? NULL : eldr_calloc(P, sizeof *dd);
    int rc = -1;
    if (!vals || !cum_dot || !cum_sq || !sd || (!dec_dist && !dd)) {
        eldr_errf(err, errlen, "rho: out of memory for %lld requests x %zu experts",
                  (long long)t->n, E);
        goto out;
    }
    if (!dec_dist) {
        if (rho_decode_dist(t, pr, dd, err, errlen))
            goto out;
        dec_dist = dd;
    }
    for (int m = 0; m < r->n_layers; m++) {
        int l = r->layers[m];
        const float *idf_row = r->idf ? r->idf + (size_t)m * E : NULL;
        for (size_t q = 0; q < n; q++) {
            double *row = vals + q * E;
            if (rho_layer_values(t, r->variant, idf_row, (int64_t)q, l, row)) {
                eldr_errf(err, errlen, "rho: %s value of row %zu layer %d is not finite",
                          sig_variant_name(r->variant), q, l);
                goto out;
            }
            cum_sq[q] += rho_dot(row, row, E);
        }
        for (size_t p = 0; p < P; p++)
            cum_dot[p] += rho_dot(vals + (size_t)pr->i[p] * E, vals + (size_t)pr->j[p] * E, E);
    }
    int64_t zeros = 0;
    for (size_t q = 0; q < n; q++) {
        zeros += cum_sq[q] == 0;
        cum_sq[q] = cum_sq[q] > 0 ? 1.0 / sqrt(cum_sq[q]) : 0.0;   /* now 1/|a|, 0 for zero */
    }
    for (size_t p = 0; p < P; p++)
        sd[p] = rho_grid(1.0 - cum_dot[p] * cum_sq[pr->i[p]] * cum_sq[pr->j[p]]);
    if (n_zero)
        *n_zero = zeros;
    char what[64];
    snprintf(what, sizeof what, "%s over %d layers", sig_variant_name(r->variant), r->n_layers);
    rc = rho_spearman(sd, dec_dist, pr->n, what, rho, err, errlen);
out:
    free(vals);
    free(cum_dot);
    free(cum_sq);
    if (sd != sig_dist_out)
        free(sd);
    free(dd);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* numpy.percentile's default ("linear") of sorted v[0..m), q in [0, 1] */
static double percentile(const double *v, int m, double q)
{
    double pos = q * (double)(m - 1);
    int lo = (int)floor(pos);
    if (lo >= m - 1)
        return v[m - 1];
    double f = pos - lo;
    return v[lo] + f * (v[lo + 1] - v[lo]);
}

/* One side of the bootstrap: the sorted order of the values, and where
 * each group of equal values starts in it. */
typedef struct sorted_side {
    uint32_t *order;      /* [n] indices in ascending value order */
    uint8_t *starts;      /* [n] 1 where a tie group starts */
} sorted_side;

static int side_init(sorted_side *s, const double *x, size_t n, rank_work *w,
                     char *err, size_t errlen)
{
    s->order = eldr_calloc(n, sizeof *s->order);
    s->starts = eldr_calloc(n, sizeof *s->starts);
    if (!s->order || !s->starts)
        return eldr_errf(err, errlen, "rho bootstrap: out of memory for %zu pairs", n);
    rank_sort(x, n, w);
    for (size_t k = 0; k < n; k++) {
        s->order[k] = w->idx[k];
        s->starts[k] = k == 0 || w->key[k] != w->key[k - 1];
    }
    return 0;
}

static void side_free(sorted_side *s)
{
    free(s->order);
    free(s->starts);
}

/* Average ranks, within a resample where original k appears m[k] times,
 * of each original present: a group of equal values holding G draws,
 * after C draws of smaller values, spans ranks C+1 .. C+G. */
static void resample_ranks(const sorted_side *s, size_t n, const uint32_t *m, double *rank)
{
    size_t k = 0;
    uint64_t below = 0;
    while (k < n) {
        size_t e = k + 1;
        while (e < n && !s->starts[e])
            e++;
        uint64_t g = 0;
        for (size_t q = k; q < e; q++)
            g += m[s->order[q]];
        double avg = (double)below + 0.5 * (double)(g + 1);
        for (size_t q = k; q < e; q++)
            rank[s->order[q]] = avg;
        below += g;
        k = e;
    }
}

/* The resamples are not re-sorted: a resample is the original pairs with
 * multiplicities, so its average ranks follow from the original sorted
 * orders in O(n) (resample_ranks), and Spearman is the multiplicity-
 * weighted Pearson of those ranks. Same value as ranking each resample. */
int rho_bootstrap(const double *sig_dist, const double *dec_dist, int64_t n, int B,
                  double level, uint64_t seed, double *lo, double *hi,
                  char *err, size_t errlen)
{
    if (n < 2 || B < 1 || !(level > 0 && level < 1))
        return eldr_errf(err, errlen, "rho bootstrap: need >= 2 pairs, >= 1 resample and "
                         "0 < level < 1 (got %lld, %d, %g)", (long long)n, B, level);
    size_t N = (size_t)n;
    sorted_side sx = {0}, sy = {0};
    rank_work w = {0};
    uint32_t *m = eldr_calloc(N, sizeof *m);
    double *rx = eldr_calloc(N, sizeof *rx), *ry = eldr_calloc(N, sizeof *ry);
    double *vals = eldr_calloc((size_t)B, sizeof *vals);
    int rc = -1, nv = 0;
    if (!m || !rx || !ry || !vals) {
        eldr_errf(err, errlen, "rho bootstrap: out of memory for %lld pairs", (long long)n);
        goto out;
    }
    if (rank_work_init(&w, N, err, errlen) || side_init(&sx, sig_dist, N, &w, err, errlen)
        || side_init(&sy, dec_dist, N, &w, err, errlen))
        goto out;
    rng_t r;
    rng_seed(&r, seed);
    double mean = 0.5 * ((double)N + 1.0);
    for (int b = 0; b < B; b++) {
        memset(m, 0, N * sizeof *m);
        for (size_t k = 0; k < N; k++)
            m[rng_below(&r, (uint64_t)N)]++;
        resample_ranks(&sx, N, m, rx);
        resample_ranks(&sy, N, m, ry);
        double sxy = 0, sxx = 0, syy = 0;
        for (size_t k = 0; k < N; k++) {
            if (!m[k])
                continue;
            double dx = rx[k] - mean, dy = ry[k] - mean, mk = m[k];
            sxy += mk * dx * dy;
            sxx += mk * dx * dx;
            syy += mk * dy * dy;
        }
        if (sxx > 0 && syy > 0)
            vals[nv++] = sxy / sqrt(sxx * syy);
    }
    if (nv == 0) {
        eldr_errf(err, errlen, "rho bootstrap: rho is undefined in every resample");
        goto out;
    }
    qsort(vals, (size_t)nv, sizeof *vals, cmp_double);
    *lo = percentile(vals, nv, (1 - level) / 2);
    *hi = percentile(vals, nv, 1 - (1 - level) / 2);
    rc = 0;
out:
    side_free(&sx);
    side_free(&sy);
    rank_work_free(&w);
    free(m);
    free(rx);
    free(ry);
    free(vals);
    return rc;
}
