/* rho.h - signature quality rho (the paper's Eq. 1; DESIGN.md section 1).
 *
 * rho is Spearman's rank correlation, over request pairs (i, j), i != j,
 * of the signature distance 1 - cos(s_i, s_j) against the decode distance
 * 1 - cos(p_i, p_j), where p_i is request i's decode counts over all L*E
 * entries. It asks: do requests whose prefill signatures look alike also
 * use the same experts while decoding? Ties get average ranks (rank.h).
 *
 * Pairs: either P pairs drawn with a seed (each of i and j uniform over
 * the N requests, independently, with replacement; draws with i == j are
 * dropped, so about P*(1 - 1/N) pairs remain), or all N(N-1)/2 pairs
 * i < j exactly.
 *
 * Zero vectors: the cosine with a zero vector is undefined; eldr defines
 * it as 0, i.e. distance 1 (a request without a signature under the mask
 * looks unlike everything). This holds for signatures and decode vectors.
 *
 * Decode cosines are exact: the dot products of uint16 counts are summed
 * in 64-bit integers. Signature dot products are summed in double.
 *
 * Ties: every distance is rounded to a grid of 2^-36 (about 1.5e-11)
 * before ranking (rho_grid). Two pairs whose distances are equal in exact
 * arithmetic (common with count and binary signatures) can differ in the
 * last bits when reached along different summation orders (per layer,
 * per thread, incremental or from scratch); on the grid they tie, as
 * they should, so rho does not depend on the order of additions. */
#ifndef ELDR_RHO_H
#define ELDR_RHO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "signature.h"
#include "trace.h"

#define RHO_DEFAULT_PAIRS 30000
#define RHO_DEFAULT_SEED 1

/* Round d (|d| < 2^15) to the nearest multiple of 2^-36: adding
 * 1.5 * 2^16, whose ulp is 2^-36, rounds in the FPU's nearest-even mode;
 * subtracting it back is exact. (Without -ffast-math the compiler may
 * not fold the two into nothing.) */
static inline double rho_grid(double d)
{
    const double big = 0x1.8p16;
    return (d + big) - big;
}

/* A sort key of rho_grid(d): the bits of d + 1.5 * 2^16, the very sum
 * rho_grid rounds with. For |d| < 2^15 that sum stays in one binade, where
 * the bits of a double count its steps of 2^-36, so keys order as the
 * grid values do and are equal exactly when those are. */
static inline uint64_t rho_grid_key(double d)
{
    const double big = 0x1.8p16;
    double v = d + big;
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

typedef struct rho_pairs {
    int64_t n;        /* pairs kept */
    int64_t drawn;    /* pairs drawn (== n for all pairs) */
    int32_t *i, *j;   /* [n] request rows */
} rho_pairs;

/* Draw p pairs over n_req requests with the seed, dropping i == j.
 * Deterministic for (n_req, p, seed). Needs n_req >= 2, p >= 1. */
int rho_pairs_sample(int64_t n_req, int64_t p, uint64_t seed, rho_pairs *out,
                     char *err, size_t errlen);
/* All n_req(n_req-1)/2 pairs i < j in row-major order. Refuses counts
 * above 2^31 or beyond physical memory (then draw pairs instead). */
int rho_pairs_all(int64_t n_req, rho_pairs *out, char *err, size_t errlen);
void rho_pairs_free(rho_pairs *p);

/* Decode distances 1 - cos(p_i, p_j) of every pair into out[pr->n].
 * Fails with "rho needs decode_counts" when the trace has none. */
int rho_decode_dist(const trace_t *t, const rho_pairs *pr, double *out,
                    char *err, size_t errlen);

/* The two halves of rho_decode_dist, for callers that spread the pairs
 * over threads: every request's squared decode norm (once), then the
 * distances of the pairs [from, to) into out[from..to). */
typedef struct rho_decode_norms {
    uint64_t *sq;   /* [t->n] exact squared norms */
    int narrow;     /* every count is small enough for 16-bit SIMD products */
} rho_decode_norms;

int rho_decode_norms_init(const trace_t *t, rho_decode_norms *dn, char *err, size_t errlen);
void rho_decode_norms_free(rho_decode_norms *dn);
void rho_decode_dist_range(const trace_t *t, const rho_pairs *pr, const rho_decode_norms *dn,
                           int64_t from, int64_t to, double *out);

/* Signature distances 1 - s_i . s_j from a row-major float matrix of
 * unit (or zero) signatures sig[rows][dim] (as sig_build_batch writes). */
void rho_sig_dist(const float *sig, size_t dim, const rho_pairs *pr, double *out);

/* Spearman of two distance lists; fails (naming `what`) when rho is
 * undefined because one side is constant. */
int rho_spearman(const double *sig_dist, const double *dec_dist, int64_t n,
                 const char *what, double *rho, char *err, size_t errlen);

/* rho of a recipe over all rows of t, in double straight from the
 * definition: the raw values of each masked layer (rho_layer_values),
 * their per-pair dots and per-request squared norms summed layer by layer,
 * cos = dot / sqrt(|a|^2 |b|^2). This is the same arithmetic, in the same
 * order, as layersel_rho_mask, so the two agree bit for bit; it does not
 * go through the float32 signatures of sig_build_batch (whose rounding
 * would break exact ties differently; rho_sig_dist serves those).
 * dec_dist may be precomputed (else NULL); sig_dist_out (NULL or
 * [pr->n]) receives the signature distances; *n_zero (if non-NULL) the
 * number of requests whose signature is zero under the recipe. Fails when
 * rho is undefined (constant distances). */
int rho_eval(const trace_t *t, const sig_recipe *r, const rho_pairs *pr,
             const double *dec_dist, double *sig_dist_out, double *rho,
             int64_t *n_zero, char *err, size_t errlen);

/* Building blocks shared with layersel.c. The raw (unnormalised) values
 * of request row in layer l as signature.c defines them per variant
 * (count, count * idf, sqrt(count), [count > 0], gate), in double;
 * idf_row is the layer's E idf weights (count_idf only). -1 when a value
 * is not finite or the trace lacks the variant's gate dataset. */
int rho_layer_values(const trace_t *t, sig_variant v, const float *idf_row, int64_t row,
                     int l, double *out);
/* Dot product of n doubles in a fixed order (four interleaved sums). */
double rho_dot(const double *a, const double *b, size_t n);
/* Four of them at once, out[q] = rho_dot(a[q], b[q], n) bit for bit:
 * one dot is a chain of dependent additions, four keep the FPU busy. */
void rho_dot_x4(const double *const a[4], const double *const b[4], size_t n, double out[4]);

/* Bootstrap percentile interval of Spearman's rho: B resamples of the n
 * pairs with replacement (seeded), interval [2.5%, 97.5%] for level 0.95
 * (linear interpolation between order statistics, as numpy.percentile).
 * Resamples whose rho is undefined are skipped. */
int rho_bootstrap(const double *sig_dist, const double *dec_dist, int64_t n, int B,
                  double level, uint64_t seed, double *lo, double *hi,
                  char *err, size_t errlen);

#endif
