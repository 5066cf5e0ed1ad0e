/* signature.h - expert signatures (DESIGN.md section 1, "Signature recipe").
 *
 * A recipe is a variant, a layer mask S (ascending layer list) and, for
 * count_idf, IDF weights over the masked layers. A request's signature is
 * its per-layer values for the layers in S (times IDF where the variant has
 * it), concatenated to |S|*E floats and divided by one global L2 norm. A
 * request whose vector is all zero gets a zero signature and is reported
 * (the return value / n_zero), never divided by zero. */
#ifndef ELDR_SIGNATURE_H
#define ELDR_SIGNATURE_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

typedef enum sig_variant {
    SIG_COUNT = 0,
    SIG_COUNT_IDF,
    SIG_SQRT_COUNT,
    SIG_BINARY,
    SIG_GATE_PROB,
    SIG_GATE_LOGIT,
    SIG_N_VARIANTS
} sig_variant;

/* "count", "count_idf", ... */
const char *sig_variant_name(sig_variant v);
/* -1 when unknown. "gate_prob_all", the reference implementation's name
 * of the gate_prob recipe, parses as SIG_GATE_PROB. */
#define SIG_GATE_PROB_ALL "gate_prob_all"
int sig_variant_parse(const char *name);
/* 1 when the variant reads gate_prob/gate_logit instead of counts */
int sig_variant_uses_gate(sig_variant v);

typedef struct sig_recipe {
    sig_variant variant;
    int L, E;
    int n_layers;      /* |S| */
    int *layers;       /* [n_layers] ascending, distinct, each in [0, L) */
    float *idf;        /* [n_layers][E] for SIG_COUNT_IDF, else NULL */
} sig_recipe;

/* A recipe over the given layers (NULL layers = all L). Copies layers
 * (sorting them); rejects duplicates and out-of-range layers. idf stays
 * NULL until sig_idf_fit or sig_recipe_set_idf. */
int sig_recipe_init(sig_recipe *r, sig_variant v, int L, int E,
                    const int *layers, int n_layers, char *err, size_t errlen);
void sig_recipe_free(sig_recipe *r);
int sig_recipe_copy(sig_recipe *dst, const sig_recipe *src, char *err, size_t errlen);
/* dimension of a signature: n_layers * E */
static inline size_t sig_dim(const sig_recipe *r)
{
    return (size_t)r->n_layers * (size_t)r->E;
}

/* IDF over calibration rows (all rows when rows == NULL):
 * idf[l][e] = log((|C|+1) / (df[l][e]+1)), df = #rows with prefill c > 0.
 * Fills idf_full, [L][E], for every layer (so a mask can be chosen after).
 * The trace's geometry must match L, E of any recipe it is used with. */
int sig_idf_fit(const trace_t *t, const int64_t *rows, int64_t nrows,
                float *idf_full, char *err, size_t errlen);

/* Copy the masked part of idf_full ([L][E]) into the recipe (allocating). */
int sig_recipe_set_idf(sig_recipe *r, const float *idf_full, char *err, size_t errlen);

/* One signature from raw per-request values: counts [L][E] for the count
 * variants, gate [L][E] for gate_prob/gate_logit (counts may be NULL then).
 * Writes sig_dim(r) floats to out. Returns 0, or 1 when the vector is all
 * zero (out is then all zero), or -1 on error (missing idf/gate). */
int sig_from_counts(const sig_recipe *r, const uint16_t *counts,
                    const float *gate, float *out, char *err, size_t errlen);

/* 1 when sig_from_counts would give a zero signature (every value its
 * kernel writes is zero), else 0; it stops at the first non-zero value,
 * so a simulator that builds signatures at arrival can count the zero
 * ones up front for a fraction of the cost. Same inputs as
 * sig_from_counts (gate for the gate variants, counts otherwise). */
int sig_is_zero(const sig_recipe *r, const uint16_t *counts, const float *gate);

/* Signatures of the given trace rows (all rows when rows == NULL) into a
 * dense row-major float32 matrix out[nrows][sig_dim]. The trace must carry
 * what the variant reads. *n_zero (if non-NULL) gets the number of zero
 * signatures, and zero_rows (if non-NULL, [nrows]) is set to 1 for them. */
int sig_build_batch(const trace_t *t, const sig_recipe *r, const int64_t *rows,
                    int64_t nrows, float *out, int64_t *n_zero, uint8_t *zero_rows,
                    char *err, size_t errlen);

/* sig_build_batch with an explicit number of threads: 0 = automatic (2
 * when the batch is large and the machine has 2+ cores, else 1), or 1..64.
 * Rows are split into contiguous blocks; the output is identical for any
 * thread count. */
int sig_build_batch_threads(const trace_t *t, const sig_recipe *r, const int64_t *rows,
                            int64_t nrows, float *out, int64_t *n_zero, uint8_t *zero_rows,
                            int n_threads, char *err, size_t errlen);

#endif
