/* costfit.h - fit the step-latency model (costmodel.h) to a measured
 * profile by least squares (LAPACKE_dgels): `eldr costfit`.
 *
 * Profile CSV: a header row naming the columns, then one row per measured
 * decode step. Columns (any order; unknown columns are an error, so a
 * typo never silently drops a regressor):
 *
 *   batch               requests in the step's batch (B)           required
 *   step_ms | step_s    the measured step time (exactly one)       required
 *   U0, U1, ..., U{L-1} distinct experts per layer            } one of the
 *   U_sum, layers       sum over layers of U_l, and L          } two forms
 *   kv_tokens           KV-cache tokens of the batch                optional
 *
 * Identifiability. A whole-step timing sees t0 + L*a only through their
 * sum: with one L in the profile, the fit estimates the intercept
 * T0 = t0 + L*a and stores it as t0 with a = 0 (same predictions at that
 * L; the cost file records L and T0). When the `layers` column varies
 * (profiles of the same kernels at several depths), t0 and a are
 * separate columns and both are fitted. b multiplies sum_l U_l; c
 * multiplies batch; d is fitted when kv_tokens is present, else 0.
 *
 * Constraints: times are non-negative, so when the unconstrained solution
 * has a negative coefficient the fit is the exact non-negative least
 * squares solution, found by solving every subset of the (at most five)
 * columns and keeping the best feasible one; the clamped coefficients are
 * reported. A design that is rank-deficient (a constant batch, kv_tokens
 * proportional to batch, fewer rows than unknowns) is refused with a
 * message naming the column. */
#ifndef ELDR_COSTFIT_H
#define ELDR_COSTFIT_H

#include <stddef.h>
#include <stdint.h>

#include "costmodel.h"

typedef struct costfit_profile {
    int64_t n;            /* rows */
    int L;                /* layers (the constant value, or the max when varying) */
    int layers_vary;      /* the `layers` column takes more than one value */
    int has_kv;           /* kv_tokens present */
    double *batch;        /* [n] */
    double *kv;           /* [n] or NULL */
    double *u_sum;        /* [n] sum_l U_l */
    double *layers;       /* [n] */
    double *step_s;       /* [n] seconds */
    int64_t *line;        /* [n] 1-based line number in the file */
} costfit_profile;

/* Read and validate a profile CSV; errors name the file, line and column.
 * On failure p is left empty (nothing to free). */
int costfit_read_csv(const char *path, costfit_profile *p, char *err, size_t errlen);
void costfit_profile_free(costfit_profile *p);

enum { COSTFIT_T0, COSTFIT_A, COSTFIT_B, COSTFIT_C, COSTFIT_D, COSTFIT_NCOEF };

typedef struct costfit_result {
    cost_model m;         /* the fitted model as the cost file stores it */
    double intercept;     /* T0 = t0 + L*a at the profile's L (s) */
    int fitted[COSTFIT_NCOEF];  /* 1 when the coefficient was a column */
    int clamped[COSTFIT_NCOEF]; /* 1 when non-negativity fixed it at 0 */
    int n_params;         /* columns in the design */
    double r2;            /* 1 - RSS/TSS (1 when TSS = RSS = 0) */
    double rmse;          /* sqrt(RSS / n), seconds */
    double *pred;         /* [n] predicted step time, seconds (owned) */
} costfit_result;

/* Fit; on failure r holds nothing to free. */
int costfit_fit(const costfit_profile *p, costfit_result *r, char *err, size_t errlen);
void costfit_result_free(costfit_result *r);

/* Indices of the `want` rows with the largest |measured - predicted|,
 * largest first, into out (returns how many: min(want, n)). */
int costfit_worst(const costfit_profile *p, const costfit_result *r, int want, int64_t *out);

/* The name of coefficient i ("t0", "a", ...), and its value in m. */
const char *costfit_coef_name(int i);
double costfit_coef(const cost_model *m, int i);

#endif
