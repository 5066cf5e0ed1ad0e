/* model.c - the model in memory: construction and validation (model.h). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "drift.h"
#include "err.h"

/* What each part is called in messages: HDF5 dataset / JSON key. */
static const struct part_names {
    const char *centroids, *mask, *idf, *workers, *sizes, *L, *E, *k, *tau;
} NAMES[2] = {
    [MODEL_NAMES_H5] = {"centroids", "layer_mask", "idf", "workers", "sizes",
                        "attribute layers", "attribute experts", "attribute top_k",
                        "attribute tau"},
    [MODEL_NAMES_JSON] = {"centroids", "layer_mask", "sig_idf", "workers", "sizes",
                          "L", "e", "k", "tau"},
};

static void now_iso(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int default_workers(model_t *m, char *err, size_t errlen)
{
    m->workers = eldr_calloc((size_t)m->K, sizeof *m->workers);
    if (!m->workers)
        return eldr_errf(err, errlen, "model: out of memory for %d worker names", m->K);
    for (int i = 0; i < m->K; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%d", i);
        if (!(m->workers[i] = strdup(name)))
            return eldr_errf(err, errlen, "model: out of memory for worker names");
    }
    return 0;
}

/* Unknown provenance, defaults, and the zero centroid matrix. */
static int init_common(model_t *m, int k, int K, char *err, size_t errlen)
{
    m->k = k;
    m->K = K;
    m->tau = MODEL_TAU_DEFAULT;
    m->rho = NAN;
    m->objective = NAN;
    m->calib_rows = m->fit_rows = m->zero_rows = -1;
    m->iters = m->balanced = -1;
    now_iso(m->created, sizeof m->created);
    snprintf(m->eldr_version, sizeof m->eldr_version, "%s", ELDR_VERSION);
    size_t dim = sig_dim(&m->recipe);
    size_t phys = eldr_phys_mem();
    if (K < 0 || (dim && (size_t)K > SIZE_MAX / sizeof(float) / dim) ||
        (phys && (size_t)K * dim * sizeof(float) > phys))
        return eldr_errf(err, errlen, "model: centroid matrix %d x %zu is too large", K, dim);
    m->centroids = eldr_calloc((size_t)K * dim, sizeof(float));
    if (!m->centroids)
        return eldr_errf(err, errlen, "model: out of memory for %d x %zu centroids", K, dim);
    return default_workers(m, err, errlen);
}

model_t *model_new_raw(sig_variant v, int L, int E, int k, int K, const int *mask,
                       int n_mask, const float *idf, char *err, size_t errlen)
{
    model_t *m = calloc(1, sizeof *m);
    if (!m) {
        eldr_errf(err, errlen, "model: out of memory");
        return NULL;
    }
    sig_recipe *r = &m->recipe;
    r->variant = v;
    r->L = L;
    r->E = E;
    r->n_layers = n_mask > 0 ? n_mask : 0;
    size_t dim = sig_dim(r);
    if (E < 0 || (r->n_layers && !(r->layers = eldr_calloc((size_t)r->n_layers, sizeof(int)))) ||
        (idf && !(r->idf = eldr_calloc(dim, sizeof(float))))) {
        eldr_errf(err, errlen, "model: out of memory for a %d-layer mask", n_mask);
        model_free(m);
        return NULL;
    }
    if (r->n_layers)
        memcpy(r->layers, mask, (size_t)r->n_layers * sizeof(int));
    if (idf)
        memcpy(r->idf, idf, dim * sizeof(float));
    if (init_common(m, k, K, err, errlen) < 0) {
        model_free(m);
        return NULL;
    }
    return m;
}

model_t *model_new(const sig_recipe *r, int k, int K, char *err, size_t errlen)
{
    if (K < 1) {
        eldr_errf(err, errlen, "model: K = %d clusters, need at least 1", K);
        return NULL;
    }
    model_t *m = calloc(1, sizeof *m);
    if (!m) {
        eldr_errf(err, errlen, "model: out of memory");
        return NULL;
    }
    if (sig_recipe_copy(&m->recipe, r, err, errlen) < 0) {
        free(m);
        return NULL;
    }
    if (init_common(m, k, K, err, errlen) < 0) {
        model_free(m);
        return NULL;
    }
    return m;
}

static void free_workers(char **w, int n)
{
    if (!w)
        return;
    for (int i = 0; i < n; i++)
        free(w[i]);
    free(w);
}

void model_free(model_t *m)
{
    if (!m)
        return;
    sig_recipe_free(&m->recipe);
    free(m->centroids);
    free_workers(m->workers, m->K);
    free(m->sizes);
    free(m->nearest_share);
    free(m);
}

int model_set_workers(model_t *m, const char *const *names, int n, char *err, size_t errlen)
{
    if (n != m->K)
        return eldr_errf(err, errlen, "model: %d worker names for K = %d clusters", n, m->K);
    char **w = eldr_calloc((size_t)n, sizeof *w);
    if (!w)
        return eldr_errf(err, errlen, "model: out of memory for worker names");
    for (int i = 0; i < n; i++)
        if (!(w[i] = strdup(names[i] ? names[i] : ""))) {
            free_workers(w, n);
            return eldr_errf(err, errlen, "model: out of memory for worker names");
        }
    free_workers(m->workers, m->K);
    m->workers = w;
    return 0;
}

int model_set_sizes(model_t *m, const int64_t *sizes, char *err, size_t errlen)
{
    int64_t *s = eldr_calloc((size_t)m->K, sizeof *s);
    if (!s)
        return eldr_errf(err, errlen, "model: out of memory for cluster sizes");
    memcpy(s, sizes, (size_t)m->K * sizeof *s);
    free(m->sizes);
    m->sizes = s;
    return 0;
}

int model_set_nearest_share(model_t *m, const double *share, char *err, size_t errlen)
{
    double *s = NULL;
    if (share) {
        if (!(s = eldr_calloc((size_t)m->K, sizeof *s)))
            return eldr_errf(err, errlen, "model: out of memory for the nearest shares");
        memcpy(s, share, (size_t)m->K * sizeof *s);
    }
    free(m->nearest_share);
    m->nearest_share = s;
    return 0;
}

int model_measure_nearest_share(model_t *m, const float *x, int64_t n, char *err,
                                size_t errlen)
{
    if (n < 1)
        return model_set_nearest_share(m, NULL, err, errlen);
    double *s = eldr_calloc((size_t)m->K, sizeof *s);
    if (!s)
        return eldr_errf(err, errlen, "model: out of memory for the nearest shares");
    drift_nearest_shares(m->centroids, m->K, sig_dim(&m->recipe), x, n, s);
    free(m->nearest_share);
    m->nearest_share = s;
    return 0;
}

model_t *model_copy(const model_t *src, char *err, size_t errlen)
{
    model_t *m = model_new(&src->recipe, src->k, src->K, err, errlen);
    if (!m)
        return NULL;
    /* everything by value, then the owned parts of the new one put back */
    sig_recipe recipe = m->recipe;
    float *cent = m->centroids;
    char **workers = m->workers;
    *m = *src;
    m->recipe = recipe;
    m->centroids = cent;
    m->workers = NULL;
    m->sizes = NULL;
    m->nearest_share = NULL;
    memcpy(cent, src->centroids, (size_t)src->K * sig_dim(&src->recipe) * sizeof *cent);
    int rc = model_set_workers(m, (const char *const *)src->workers, src->K, err, errlen);
    free_workers(workers, src->K);
    if (rc < 0 || (src->sizes && model_set_sizes(m, src->sizes, err, errlen) < 0) ||
        (src->nearest_share &&
         model_set_nearest_share(m, src->nearest_share, err, errlen) < 0)) {
        model_free(m);
        return NULL;
    }
    return m;
}

int model_fits_geometry(const model_t *m, int L, int E, int k)
{
    return m->recipe.L == L && m->recipe.E == E && (m->k == 0 || m->k == k);
}

static int validate_geometry(const model_t *m, const char *where, const struct part_names *nm,
                             char *err, size_t errlen)
{
    const sig_recipe *r = &m->recipe;
    if (r->L < 1)
        return eldr_errf(err, errlen, "%s: %s = %d, need at least 1 layer", where, nm->L, r->L);
    if (r->E < 1)
        return eldr_errf(err, errlen, "%s: %s = %d, need at least 1 expert", where, nm->E, r->E);
    if (m->k < 0 || m->k > r->E)
        return eldr_errf(err, errlen, "%s: %s = %d, top-k must be in [1, %d] (or 0: unknown)",
                         where, nm->k, m->k, r->E);
    if (m->K < 1)
        return eldr_errf(err, errlen, "%s: %s: K = %d clusters, need at least 1", where,
                         nm->centroids, m->K);
    if ((unsigned)r->variant >= SIG_N_VARIANTS)
        return eldr_errf(err, errlen, "%s: variant %d unknown", where, (int)r->variant);
    if (!isfinite(m->tau) || m->tau < 0)
        return eldr_errf(err, errlen, "%s: %s = %g, must be finite and >= 0", where, nm->tau,
                         m->tau);
    return 0;
}

static int validate_mask(const model_t *m, const char *where, const struct part_names *nm,
                         char *err, size_t errlen)
{
    const sig_recipe *r = &m->recipe;
    if (r->n_layers < 1 || !r->layers)
        return eldr_errf(err, errlen, "%s: %s is empty, need at least one layer", where,
                         nm->mask);
    for (int i = 0; i < r->n_layers; i++) {
        if (r->layers[i] < 0 || r->layers[i] >= r->L)
            return eldr_errf(err, errlen, "%s: %s[%d] = %d is out of range [0, %d)", where,
                             nm->mask, i, r->layers[i], r->L);
        if (i > 0 && r->layers[i] <= r->layers[i - 1])
            return eldr_errf(err, errlen,
                             "%s: %s[%d] = %d does not ascend (previous %d)", where,
                             nm->mask, i, r->layers[i], r->layers[i - 1]);
    }
    return 0;
}

static int validate_idf(const model_t *m, const char *where, const struct part_names *nm,
                        char *err, size_t errlen)
{
    const sig_recipe *r = &m->recipe;
    int wants = r->variant == SIG_COUNT_IDF;
    if (!wants && r->idf)
        return eldr_errf(err, errlen, "%s: %s given, but variant %s has no idf", where,
                         nm->idf, sig_variant_name(r->variant));
    if (wants && !r->idf)
        return eldr_errf(err, errlen, "%s: %s missing, variant count_idf needs %zu values",
                         where, nm->idf, sig_dim(r));
    if (!r->idf)
        return 0;
    for (size_t i = 0; i < sig_dim(r); i++)
        if (!isfinite(r->idf[i]))
            return eldr_errf(err, errlen, "%s: %s[%zu] (layer %d, expert %zu) is not finite",
                             where, nm->idf, i, r->layers[i / (size_t)r->E],
                             i % (size_t)r->E);
    return 0;
}

static int validate_centroids(const model_t *m, const char *where, const struct part_names *nm,
                              char *err, size_t errlen)
{
    size_t dim = sig_dim(&m->recipe);
    if (!m->centroids)
        return eldr_errf(err, errlen, "%s: %s missing", where, nm->centroids);
    for (int c = 0; c < m->K; c++) {
        const float *row = m->centroids + (size_t)c * dim;
        double ss = 0;
        for (size_t j = 0; j < dim; j++) {
            if (!isfinite(row[j]))
                return eldr_errf(err, errlen, "%s: %s row %d, column %zu is not finite",
                                 where, nm->centroids, c, j);
            ss += (double)row[j] * row[j];
        }
        double norm = sqrt(ss);
        if (fabs(norm - 1.0) >= MODEL_NORM_TOL)
            return eldr_errf(err, errlen,
                             "%s: %s row %d has L2 norm %.6g, expected 1 (within %g)", where,
                             nm->centroids, c, norm, MODEL_NORM_TOL);
    }
    return 0;
}

static int validate_workers(const model_t *m, const char *where, const struct part_names *nm,
                            char *err, size_t errlen)
{
    if (!m->workers)
        return eldr_errf(err, errlen, "%s: %s missing", where, nm->workers);
    for (int i = 0; i < m->K; i++) {
        const char *w = m->workers[i];
        if (!w || !*w)
            return eldr_errf(err, errlen, "%s: %s[%d] is empty", where, nm->workers, i);
        if (strlen(w) >= MODEL_WORKER_MAX)
            return eldr_errf(err, errlen, "%s: %s[%d] is longer than %d bytes", where,
                             nm->workers, i, MODEL_WORKER_MAX - 1);
        /* K is the number of decode workers: small, so the quadratic scan
         * is cheaper than building a hash set. */
        for (int j = 0; j < i; j++)
            if (!strcmp(w, m->workers[j]))
                return eldr_errf(err, errlen, "%s: %s[%d] '%s' repeats %s[%d]", where,
                                 nm->workers, i, w, nm->workers, j);
    }
    if (m->sizes)
        for (int i = 0; i < m->K; i++)
            if (m->sizes[i] < 0)
                return eldr_errf(err, errlen, "%s: %s[%d] = %lld is negative", where,
                                 nm->sizes, i, (long long)m->sizes[i]);
    if (m->nearest_share) {
        double sum = 0;
        for (int i = 0; i < m->K; i++) {
            double v = m->nearest_share[i];
            if (!isfinite(v) || v < 0 || v > 1)
                return eldr_errf(err, errlen, "%s: nearest_share[%d] = %g is not a share in "
                                 "[0, 1]", where, i, v);
            sum += v;
        }
        if (fabs(sum - 1) > 1e-6)
            return eldr_errf(err, errlen, "%s: nearest_share sums to %.9g, expected 1",
                             where, sum);
    }
    return 0;
}

int model_validate(const model_t *m, const char *where, model_naming naming, char *err,
                   size_t errlen)
{
    const struct part_names *nm = &NAMES[naming == MODEL_NAMES_JSON];
    if (validate_geometry(m, where, nm, err, errlen) < 0 ||
        validate_mask(m, where, nm, err, errlen) < 0 ||
        validate_idf(m, where, nm, err, errlen) < 0 ||
        validate_centroids(m, where, nm, err, errlen) < 0 ||
        validate_workers(m, where, nm, err, errlen) < 0)
        return -1;
    return 0;
}

int model_validate_mask(const model_t *m, const char *where, model_naming naming, char *err,
                        size_t errlen)
{
    return validate_mask(m, where, &NAMES[naming == MODEL_NAMES_JSON], err, errlen);
}

int model_nearest(const model_t *m, const float *sig, double *sim)
{
    size_t dim = sig_dim(&m->recipe);
    int best = 0;
    double bs = -INFINITY;
    for (int c = 0; c < m->K; c++) {
        const float *mu = m->centroids + (size_t)c * dim;
        double d = 0;
        for (size_t j = 0; j < dim; j++)
            d += (double)sig[j] * mu[j];
        if (d > bs) {
            bs = d;
            best = c;
        }
    }
    if (sim)
        *sim = bs;
    return best;
}
