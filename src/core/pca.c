/* pca.c - leading principal components through the Gram matrix (pca.h). */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "pca.h"

void pca_free(pca_t *p)
{
    if (!p)
        return;
    free(p->mean);
    free(p->axes);
    free(p->var);
    free(p->scores);
    memset(p, 0, sizeof *p);
}

/* Centred copy of x in double; the mean to p->mean. */
static int centre(const float *x, int n, int d, pca_t *p, double **xc, char *err,
                  size_t errlen)
{
    double *c = eldr_calloc((size_t)n * (size_t)d, sizeof *c);
    if (!c)
        return eldr_errf(err, errlen, "pca: out of memory for %d x %d", n, d);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++) {
            double v = x[(size_t)i * d + j];
            if (!isfinite(v)) {
                free(c);
                return eldr_errf(err, errlen, "pca: row %d, column %d is not finite", i, j);
            }
            c[(size_t)i * d + j] = v;
            p->mean[j] += v;
        }
    for (int j = 0; j < d; j++)
        p->mean[j] /= n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++)
            c[(size_t)i * d + j] -= p->mean[j];
    *xc = c;
    return 0;
}

/* Axis c from the eigenvector u (n) of the Gram matrix; scores too. */
static void make_axis(pca_t *p, const double *xc, const double *u, double lambda, int c)
{
    int n = p->n, d = p->d;
    double *axis = p->axes + (size_t)c * d;
    if (!(lambda > 1e-12 * (p->total_var * n + 1e-300))) {
        memset(axis, 0, (size_t)d * sizeof *axis);
        for (int i = 0; i < n; i++)
            p->scores[(size_t)i * p->ncomp + c] = 0;
        p->var[c] = 0;
        return;
    }
    double s = sqrt(lambda);
    cblas_dgemv(CblasRowMajor, CblasTrans, n, d, 1.0 / s, xc, d, u, 1, 0.0, axis, 1);
    int big = 0;
    for (int j = 1; j < d; j++)
        if (fabs(axis[j]) > fabs(axis[big]))
            big = j;
    double sign = axis[big] < 0 ? -1.0 : 1.0;
    for (int j = 0; j < d; j++)
        axis[j] *= sign;
    for (int i = 0; i < n; i++)
        p->scores[(size_t)i * p->ncomp + c] = sign * u[i] * s;
    p->var[c] = lambda / n;
}

int pca_fit(const float *x, int n, int d, int ncomp, pca_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (n < 2 || d < 1 || ncomp < 1 || ncomp > n || ncomp > d)
        return eldr_errf(err, errlen, "pca: need n >= 2 and 1 <= ncomp <= min(n, d) "
                         "(n %d, d %d, ncomp %d)", n, d, ncomp);
    pca_t p = {.n = n, .d = d, .ncomp = ncomp};
    p.mean = eldr_calloc((size_t)d, sizeof *p.mean);
    p.axes = eldr_calloc((size_t)ncomp * d, sizeof *p.axes);
    p.var = eldr_calloc((size_t)ncomp, sizeof *p.var);
    p.scores = eldr_calloc((size_t)n * ncomp, sizeof *p.scores);
    double *g = eldr_calloc((size_t)n * n, sizeof *g);
    double *w = eldr_calloc((size_t)n, sizeof *w);
    double *z = eldr_calloc((size_t)n * ncomp, sizeof *z);
    int *isuppz = eldr_calloc((size_t)2 * ncomp, sizeof *isuppz);
    double *xc = NULL;
    int rc = -1;
    if (!p.mean || !p.axes || !p.var || !p.scores || !g || !w || !z || !isuppz) {
        eldr_errf(err, errlen, "pca: out of memory for %d rows", n);
        goto done;
    }
    if (centre(x, n, d, &p, &xc, err, errlen))
        goto done;
    for (size_t i = 0; i < (size_t)n * d; i++)
        p.total_var += xc[i] * xc[i];
    p.total_var /= n;
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, n, d, 1.0, xc, d, 0.0, g, n);
    /* eigenvalues are ascending: ask for the top ncomp by index */
    lapack_int m = 0;
    lapack_int info = LAPACKE_dsyevr(LAPACK_ROW_MAJOR, 'V', 'I', 'U', n, g, n, 0, 0,
                                     n - ncomp + 1, n, 0.0, &m, w, z, ncomp, isuppz);
    if (info != 0 || m != ncomp) {
        eldr_errf(err, errlen, "pca: eigen-decomposition failed (info %d)", (int)info);
        goto done;
    }
    double *u = malloc((size_t)n * sizeof *u);
    if (!u) {
        eldr_errf(err, errlen, "pca: out of memory");
        goto done;
    }
    for (int c = 0; c < ncomp; c++) {
        int col = ncomp - 1 - c;   /* largest first */
        for (int i = 0; i < n; i++)
            u[i] = z[(size_t)i * ncomp + col];
        make_axis(&p, xc, u, w[col], c);
    }
    free(u);
    rc = 0;
done:
    free(g);
    free(w);
    free(z);
    free(isuppz);
    free(xc);
    if (rc)
        pca_free(&p);
    else
        *out = p;
    return rc;
}

void pca_project(const pca_t *p, const float *v, double *out)
{
    for (int c = 0; c < p->ncomp; c++) {
        const double *axis = p->axes + (size_t)c * p->d;
        double s = 0;
        for (int j = 0; j < p->d; j++)
            s += ((double)v[j] - p->mean[j]) * axis[j];
        out[c] = s;
    }
}
