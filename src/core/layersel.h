/* layersel.h - greedy forward layer selection by signature quality rho
 * (DESIGN.md section 1; the paper's Figure 8).
 *
 * Start with no layer; at each step add the layer whose addition gives
 * the highest rho (rho.h) of the cumulative signature; record the curve
 * rho(1..L); keep the prefix of the order up to the curve's peak, N*.
 * Ties go to the lower layer index; N* is the first maximum (fewest
 * layers). A candidate whose rho is undefined (constant distances) ranks
 * below every defined one.
 *
 * The incremental trick. A signature is the concatenation of per-layer
 * raw values a_l (counts, idf-weighted counts, ...) divided by one global
 * norm, so for a layer set S
 *     cos(s_i, s_j) = sum_{l in S} dot_l(i,j)
 *                     / sqrt(sum_{l in S} |a_il|^2 * sum_{l in S} |a_jl|^2).
 * layersel_prepare computes the decode distances, every per-layer pair
 * dot dot_l(i,j) and every per-layer squared norm |a_il|^2 once
 * (O(pairs * L * E), on the threads), and ranks the decode side once. A
 * greedy step then keeps running sums, and a candidate costs O(pairs) for
 * its distances plus O(pairs) ranking: first bounds on its rho from a
 * histogram of the distances (rank_ref_spearman_bounds), then, only for
 * the candidates those bounds cannot rule out (about one in ten), the
 * exact radix-sorted rho. The result is the one exhaustive exact
 * evaluation of every candidate gives. Everything is in double; the raw
 * values are derived here from
 * counts, IDF and gates exactly as signature.c defines them (count, c*idf,
 * sqrt(c), [c>0], gate), in double rather than float, so a rho from here
 * and one from sig_build_batch signatures agree to ~1e-6, not bit for bit.
 *
 * Candidates of a step are evaluated on `threads` threads; the result does
 * not depend on the thread count. */
#ifndef ELDR_LAYERSEL_H
#define ELDR_LAYERSEL_H

#include <stddef.h>

#include "progress.h"
#include "rho.h"
#include "signature.h"
#include "trace.h"

typedef struct layersel_ctx layersel_ctx;

/* Precompute per-layer pair dots and norms for variant v over all rows of
 * t and the pairs pr (which must outlive the context). idf_full ([L][E],
 * from sig_idf_fit) is required for count_idf and ignored otherwise.
 * threads: 0 = the online CPUs (at most 8). Fails on a trace without
 * decode_counts, without the gate dataset the variant reads, or when the
 * [L][pairs] table would not fit in memory. */
layersel_ctx *layersel_prepare(const trace_t *t, sig_variant v, const float *idf_full,
                               const rho_pairs *pr, int threads, char *err, size_t errlen);
void layersel_free(layersel_ctx *c);

/* The decode distances of the pairs (computed by prepare). */
const double *layersel_decode_dist(const layersel_ctx *c);

/* rho of the layer set layers[0..n) (any order, distinct, in range); the
 * signature distances go to dist_out[pairs] when non-NULL. *rho is NaN
 * when undefined (constant distances). */
int layersel_rho_mask(const layersel_ctx *c, const int *layers, int n, double *dist_out,
                      double *rho, char *err, size_t errlen);

typedef struct layersel_result {
    int L;
    int *order;       /* [L] layers in the order greedy added them */
    double *curve;    /* [L] rho after adding order[0..s]; NaN if undefined */
    int n_star;       /* layers kept: 1 + the index of the curve's first peak */
    int *mask;        /* [n_star] the kept layers, ascending */
    double rho;       /* curve[n_star - 1] */
} layersel_result;

/* A flag the greedy steps poll (Ctrl-C, Esc, another thread): when it is
 * set, layersel_greedy stops before its next step and returns
 * LAYERSEL_CANCELLED. NULL (the default) never cancels. */
#define LAYERSEL_CANCELLED (-2)
void layersel_set_cancel(layersel_ctx *c, volatile int *cancel);

/* Progress of the greedy steps (progress.h): stage LAYERSEL_WHAT, done =
 * steps finished of L, reported before each step and after the last. fn
 * NULL (the default) reports nothing. */
#define LAYERSEL_WHAT "layer selection"
void layersel_set_progress(layersel_ctx *c, progress_fn fn, void *ctx);

/* Run the greedy selection over all L steps. */
int layersel_greedy(const layersel_ctx *c, layersel_result *out, char *err, size_t errlen);
void layersel_result_free(layersel_result *r);

/* prepare + greedy + free in one call (what `eldr fit --layers auto` needs);
 * cancel as in layersel_set_cancel (may be NULL). */
int layersel_run(const trace_t *t, sig_variant v, const float *idf_full,
                 const rho_pairs *pr, int threads, volatile int *cancel,
                 layersel_result *out, char *err, size_t errlen);
/* The same, with progress reports to fn/fn_ctx (may be NULL). */
int layersel_run_progress(const trace_t *t, sig_variant v, const float *idf_full,
                          const rho_pairs *pr, int threads, volatile int *cancel,
                          progress_fn fn, void *fn_ctx, layersel_result *out, char *err,
                          size_t errlen);

#endif
