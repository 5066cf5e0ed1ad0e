/* pca.h - principal component analysis of a small sample of vectors, for
 * pictures (the dashboard's signature scatter) rather than for modelling.
 *
 * n rows of dimension d (float32, row-major) are centred on their mean;
 * the leading components come from the n x n Gram matrix G = Xc Xc^T
 * (cblas_dsyrk, then LAPACKE_dsyevr for the top eigenpairs only): with
 * G u = lambda u, the row scores are u * sqrt(lambda) and the unit axis
 * is Xc^T u / sqrt(lambda). For a sample (n of a few hundred to a few
 * thousand) and signatures of |S|*E floats this is cheaper than an SVD of
 * the n x d matrix when d > n, and exact either way. Each axis's sign is
 * fixed so that its largest-magnitude coordinate is positive, so the
 * picture does not flip between runs. Everything is in double. */
#ifndef ELDR_PCA_H
#define ELDR_PCA_H

#include <stddef.h>

typedef struct pca {
    int n, d, ncomp;
    double *mean;       /* [d] */
    double *axes;       /* [ncomp][d] unit rows */
    double *var;        /* [ncomp] variance along each axis (lambda / n) */
    double *scores;     /* [n][ncomp] projections of the input rows */
    double total_var;   /* trace of the covariance, for "explained" shares */
} pca_t;

/* Fit ncomp components (1 <= ncomp <= min(n, d), n >= 2). Rows must be
 * finite. A component with zero variance (rank below ncomp) gets a zero
 * axis and zero scores. On failure out holds nothing to free. */
int pca_fit(const float *x, int n, int d, int ncomp, pca_t *out, char *err, size_t errlen);

/* Scores of one further row v[d] on the fitted axes: out[ncomp]. */
void pca_project(const pca_t *p, const float *v, double *out);

void pca_free(pca_t *p);

#endif
