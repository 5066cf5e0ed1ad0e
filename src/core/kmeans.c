/* kmeans.c - balanced spherical K-means (see kmeans.h).
 *
 * One round is: similarities S = X mu^T (simdot, the O(N D K) part),
 * the assignment on cost = 1 - S (assign_balanced, exact, or argmax), and
 * the update (member sums kept in double and moved only by the rows that
 * changed cluster, renormalised; vsum.h). When fewer than K rows moved,
 * the next similarities come from the previous ones plus the dot products
 * with the moved rows alone. Every round streams X from memory once, which
 * at N = 1000, D = 6144 (24 MB) costs as much as the arithmetic. The objective is computed in double from the member sums
 * (sum_i x_i . mu_a(i) = sum_c acc_c . mu_c), so the numbers reported (and
 * the monotonicity the tests check) do not inherit float32 rounding from
 * the similarities. */
#include "kmeans.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assign.h"
#include "err.h"
#include "rng.h"
#include "simdot.h"
#include "vsum.h"

void kmeans_opts_default(kmeans_opts *o, int k)
{
    memset(o, 0, sizeof *o);
    o->k = k;
    o->iters = KMEANS_DEFAULT_ITERS;
    o->seed = 1;
    o->balanced = 1;
}

void kmeans_result_free(kmeans_result *res)
{
    if (!res)
        return;
    free(res->centroids);
    free(res->assign);
    free(res->sizes);
    memset(res, 0, sizeof *res);
}

static double dot_fd(const float *a, const float *b, int d)
{
    double s = 0.0;
    for (int j = 0; j < d; j++)
        s += (double)a[j] * (double)b[j];
    return s;
}

/* dst = src / |src| (src finite and not zero: check_opts saw to it). */
static void unit_copy(float *dst, const float *src, int d)
{
    double nrm = sqrt(dot_fd(src, src, d));
    for (int j = 0; j < d; j++)
        dst[j] = (float)((double)src[j] / nrm);
}

/* The norms first (one threaded pass over X), then the verdicts in row
 * order, so the first bad row is the one named. */
static int check_rows(const float *x, int n, int d, int threads, char *err, size_t errlen)
{
    double *norm2 = malloc((size_t)n * sizeof *norm2);
    if (!norm2)
        return eldr_errf(err, errlen, "kmeans: out of memory for the norms of %d rows", n);
    vsum_row_norms2(x, n, d, norm2, threads);
    for (int i = 0; i < n; i++) {
        const float *row = x + (size_t)i * (size_t)d;
        /* NaN/inf propagate into the norm */
        double nrm = sqrt(norm2[i]);
        const char *bad = NULL;
        int col = 0;
        for (int j = 0; !isfinite(nrm) && !bad && j < d; j++)
            if (!isfinite(row[j])) {
                bad = "non-finite";
                col = j;
            }
        if (bad)
            eldr_errf(err, errlen, "kmeans: row %d has a non-finite value at column %d", i, col);
        else if (nrm == 0.0)
            eldr_errf(err, errlen, "kmeans: row %d is all zero (no signature under the mask; leave it out)", i);
        else if (fabs(nrm - 1.0) > 1e-3)
            eldr_errf(err, errlen, "kmeans: row %d has L2 norm %.6g, not a unit row", i, nrm);
        else
            continue;
        free(norm2);
        return -1;
    }
    free(norm2);
    return 0;
}

static int check_opts(int n, int d, const kmeans_opts *o, char *err, size_t errlen)
{
    if (n < 1 || d < 1)
        return eldr_errf(err, errlen, "kmeans: need at least one row and one column, got %d x %d", n, d);
    if (o->k < 1 || o->k > n)
        return eldr_errf(err, errlen, "kmeans: k = %d must be between 1 and the %d rows", o->k, n);
    if (o->iters < 0)
        return eldr_errf(err, errlen, "kmeans: iters = %d is negative", o->iters);
    if (o->iters == 0 && !o->init_rows && !o->init_centroids)
        return eldr_errf(err, errlen, "kmeans: iters = 0 needs init_rows or init_centroids (it only "
                         "assigns to given centroids)");
    if (o->init_rows && o->init_centroids)
        return eldr_errf(err, errlen, "kmeans: give init_rows or init_centroids, not both");
    for (int c = 0; o->init_centroids && c < o->k; c++) {
        const float *mu = o->init_centroids + (size_t)c * (size_t)d;
        double nrm2 = 0.0;
        for (int j = 0; j < d; j++)
            nrm2 += (double)mu[j] * (double)mu[j];
        if (!isfinite(nrm2) || nrm2 == 0.0)
            return eldr_errf(err, errlen, "kmeans: initial centroid %d is %s", c,
                             isfinite(nrm2) ? "all zero" : "not finite");
    }
    if (o->init_rows)
        for (int c = 0; c < o->k; c++) {
            if (o->init_rows[c] < 0 || o->init_rows[c] >= n)
                return eldr_errf(err, errlen, "kmeans: init row %d (index %d) is outside 0..%d",
                                 c, o->init_rows[c], n - 1);
            for (int c2 = 0; c2 < c; c2++)
                if (o->init_rows[c2] == o->init_rows[c])
                    return eldr_errf(err, errlen, "kmeans: init rows %d and %d are both row %d",
                                     c2, c, o->init_rows[c]);
        }
    return 0;
}

static int cancelled(const kmeans_opts *o)
{
    return o->cancel && *o->cancel;
}

/* k-means++: first centre uniform, each next one drawn with probability
 * proportional to the squared L2 distance to the nearest centre so far.
 * When every remaining distance is zero (duplicate rows), a random row not
 * yet used is taken, so k = n still gives every row its own centre. */
static int plusplus(const float *x, int n, int d, const kmeans_opts *o, float *mu,
                    char *err, size_t errlen)
{
    rng_t r;
    rng_seed(&r, o->seed);
    double *d2 = malloc((size_t)n * sizeof *d2);
    float *dots = malloc((size_t)n * sizeof *dots);
    char *used = calloc((size_t)n, 1);
    if (!d2 || !dots || !used) {
        free(d2); free(dots); free(used);
        return eldr_errf(err, errlen, "kmeans: out of memory for k-means++ over %d rows", n);
    }
    int pick = (int)rng_below(&r, (uint64_t)n);
    for (int i = 0; i < n; i++)
        d2[i] = INFINITY;
    for (int c = 0;; c++) {
        used[pick] = 1;
        const float *centre = x + (size_t)pick * (size_t)d;
        memcpy(mu + (size_t)c * (size_t)d, centre, (size_t)d * sizeof *mu);
        if (c + 1 == o->k)
            break;
        if (cancelled(o)) {
            free(d2); free(dots); free(used);
            eldr_errf(err, errlen, "kmeans: cancelled during k-means++ (centre %d of %d)", c + 1, o->k);
            return KMEANS_CANCELLED;
        }
        /* |x - c|^2 = |x|^2 + |c|^2 - 2 x.c, and the rows are unit. */
        simdot(SIMDOT_AUTO, x, n, d, centre, 1, dots, (size_t)n, o->threads);
        double total = 0.0;
        for (int i = 0; i < n; i++) {
            double dist = used[i] ? 0.0 : fmax(0.0, 2.0 - 2.0 * (double)dots[i]);
            if (dist < d2[i])
                d2[i] = dist;
            total += d2[i];
        }
        pick = -1;
        if (total > 0.0) {
            double u = rng_uniform(&r) * total, acc = 0.0;
            for (int i = 0; i < n; i++) {
                acc += d2[i];
                if (d2[i] > 0.0 && u < acc) {
                    pick = i;
                    break;
                }
            }
            for (int i = n - 1; pick < 0 && i >= 0; i--) /* u rounded past the end */
                if (d2[i] > 0.0)
                    pick = i;
        } else {
            int left = (int)rng_below(&r, (uint64_t)(n - c - 1));
            for (int i = 0; pick < 0; i++)
                if (!used[i] && left-- == 0)
                    pick = i;
        }
    }
    free(d2); free(dots); free(used);
    return 0;
}

typedef struct work {
    int threads;    /* for simdot */
    float *sim;     /* [k][n] similarity of every row to every centroid */
    double *cost;   /* [n][k] 1 - sim, for the balanced assignment */
    int *prev;      /* [n] the previous round's assignment */
    double *acc;    /* [k][d] member sums of the current assignment */
    double *norm;   /* [k] |acc_c| */
    char *kept;     /* [k] centroid left as it was (no members, or they cancel) */
    double *proj;   /* [k][n] x_i . acc_c, valid when proj_ok */
    int proj_ok;
    int *moved;     /* [n] rows whose cluster changed in the last round */
    int *from, *to; /* [n] their clusters before and after */
    int n_moved;
    float *gather;  /* [k-1][d] those rows, when fewer than k */
    float *q;       /* [k-1][n] their similarities to every row */
} work;

static void work_free(work *w)
{
    free(w->sim); free(w->cost); free(w->prev); free(w->acc); free(w->norm); free(w->kept);
    free(w->proj); free(w->moved); free(w->from); free(w->to); free(w->gather); free(w->q);
}

/* Similarities of every row to the centroids mu, one pass over X
 * (simdot.h), stored centroid-major: sim[c][i]. */
static void sims_full(const float *x, int n, int d, int k, const float *mu, work *w)
{
    simdot(SIMDOT_AUTO, x, n, d, mu, k, w->sim, (size_t)n, w->threads);
}

/* After an update that moved fewer than k rows: mu_c = acc_c / |acc_c|,
 * so x_i . mu_c = (x_i . acc_c) / |acc_c|, and x_i . acc_c changes only by
 * the moved rows' similarities to x_i: one pass of width n_moved instead
 * of k. Kept centroids did not move, and neither do their columns. */
static void sims_incremental(const float *x, int n, int d, int k, const int *assign, work *w)
{
    int m = w->n_moved;
    for (int t = 0; t < m; t++)
        memcpy(w->gather + (size_t)t * d, x + (size_t)w->moved[t] * d, (size_t)d * sizeof *x);
    simdot(SIMDOT_AUTO, x, n, d, w->gather, m, w->q, (size_t)n, w->threads);
    for (int t = 0; t < m; t++) {
        int row = w->moved[t];
        const float *qt = w->q + (size_t)t * n;
        double *from = w->proj + (size_t)w->prev[row] * n, *to = w->proj + (size_t)assign[row] * n;
        for (int i = 0; i < n; i++) {
            from[i] -= qt[i];
            to[i] += qt[i];
        }
    }
    for (int c = 0; c < k; c++) {
        if (w->kept[c])
            continue;
        const double *pc = w->proj + (size_t)c * n;
        float *sc = w->sim + (size_t)c * n;
        for (int i = 0; i < n; i++)
            sc[i] = (float)(pc[i] / w->norm[c]);
    }
}

/* Similarities for the centroids just updated: incremental when few rows
 * moved and the projections are current, else full (and the projections
 * are rebuilt from it). */
static void sims_refresh(const float *x, int n, int d, int k, const float *mu, const int *assign,
                         work *w)
{
    if (w->proj_ok && w->n_moved < k) {
        sims_incremental(x, n, d, k, assign, w);
        return;
    }
    sims_full(x, n, d, k, mu, w);
    for (int c = 0; c < k; c++) {
        double *pc = w->proj + (size_t)c * n;
        const float *sc = w->sim + (size_t)c * n;
        for (int i = 0; i < n; i++)
            pc[i] = w->kept[c] ? 0.0 : (double)sc[i] * w->norm[c];
    }
    w->proj_ok = 1;
}

static int assign_from_sims(int n, const kmeans_opts *o, work *w, int *assign,
                            char *err, size_t errlen)
{
    int k = o->k;
    if (!o->balanced) {
        for (int i = 0; i < n; i++) {
            int best = 0;
            for (int c = 1; c < k; c++)
                if (w->sim[(size_t)c * n + i] > w->sim[(size_t)best * n + i])
                    best = c;
            assign[i] = best;
        }
        return 0;
    }
    for (int c = 0; c < k; c++)
        for (int i = 0; i < n; i++)
            w->cost[(size_t)i * k + c] = 1.0 - (double)w->sim[(size_t)c * n + i];
    return assign_balanced(w->cost, n, k, assign_default_cap(n, k), assign, NULL, err, errlen);
}

/* Member sums in w->acc follow the assignment: all rows the first time
 * (prev == NULL, on threads), afterwards only the rows that changed cluster (listed
 * in w->moved), which late in a fit are few. */
static void accumulate(const float *x, int n, int d, const int *assign, const int *prev,
                       const int *sizes, int k, work *w)
{
    w->n_moved = 0;
    if (!prev) {
        for (int i = 0; i < n; i++)
            w->moved[i] = i;
        vsum_move_rows(w->acc, x, d, w->moved, NULL, assign, n, w->threads);
        w->n_moved = 0;
    } else {
        for (int i = 0; i < n; i++)
            if (prev[i] != assign[i]) {
                w->from[w->n_moved] = prev[i];
                w->to[w->n_moved] = assign[i];
                w->moved[w->n_moved++] = i;
            }
        vsum_move_rows(w->acc, x, d, w->moved, w->from, w->to, w->n_moved, w->threads);
    }
    for (int c = 0; c < k; c++) /* no rounding residue survives an emptied cluster */
        if (sizes[c] == 0)
            memset(w->acc + (size_t)c * (size_t)d, 0, (size_t)d * sizeof *w->acc);
}

/* sum_i (1 - x_i . mu_a(i)) = n - sum_c acc_c . mu_c: O(k d) instead of
 * O(n d), in double, for the assignment the sums follow. */
static double objective_from_sums(int n, int d, int k, const float *mu, const work *w)
{
    double total = (double)n;
    for (int c = 0; c < k; c++) {
        total -= vsum_dot(w->acc + (size_t)c * (size_t)d, mu + (size_t)c * (size_t)d, d);
    }
    return total;
}

/* Each centroid with members becomes its normalised member sum, in place;
 * returns the largest L2 move of a centroid. */
static double renormalise(int d, int k, float *mu, const int *sizes, work *w)
{
    double shift = 0.0;
    for (int c = 0; c < k; c++) {
        const double *a = w->acc + (size_t)c * (size_t)d;
        float *mc = mu + (size_t)c * (size_t)d;
        double nrm = sqrt(vsum_norm2(a, d));
        w->norm[c] = nrm;
        /* An empty cluster, or members that cancel out, keep the centroid. */
        w->kept[c] = sizes[c] == 0 || nrm == 0.0;
        if (w->kept[c])
            continue;
        double move = vsum_unit(mc, a, d, nrm);
        if (sqrt(move) > shift)
            shift = sqrt(move);
    }
    return shift;
}

static double objective_of(const float *x, int n, int d, const float *mu, const int *assign)
{
    double total = 0.0;
    for (int i = 0; i < n; i++)
        total += 1.0 - dot_fd(x + (size_t)i * (size_t)d, mu + (size_t)assign[i] * (size_t)d, d);
    return total;
}

static void count_sizes(const int *assign, int n, int k, int *sizes)
{
    memset(sizes, 0, (size_t)k * sizeof *sizes);
    for (int i = 0; i < n; i++)
        sizes[assign[i]]++;
}

static int result_alloc(kmeans_result *res, int n, int d, int k)
{
    memset(res, 0, sizeof *res);
    res->n = n;
    res->d = d;
    res->k = k;
    res->centroids = eldr_calloc((size_t)k * (size_t)d, sizeof *res->centroids);
    res->assign = eldr_calloc((size_t)n, sizeof *res->assign);
    res->sizes = eldr_calloc((size_t)k, sizeof *res->sizes);
    if (!res->centroids || !res->assign || !res->sizes) {
        kmeans_result_free(res);
        return -1;
    }
    return 0;
}

static int work_alloc(work *w, int n, int d, int k)
{
    size_t nk = (size_t)n * (size_t)k, kd = (size_t)k * (size_t)d;
    size_t few = (size_t)(k > 1 ? k - 1 : 1); /* the incremental path's rows */
    w->sim = eldr_calloc(nk, sizeof *w->sim);
    w->cost = eldr_calloc(nk, sizeof *w->cost);
    w->prev = eldr_calloc((size_t)n, sizeof *w->prev);
    w->acc = eldr_calloc(kd, sizeof *w->acc);
    w->norm = eldr_calloc((size_t)k, sizeof *w->norm);
    w->kept = eldr_calloc((size_t)k, 1);
    w->proj = eldr_calloc(nk, sizeof *w->proj);
    w->moved = eldr_calloc((size_t)n, sizeof *w->moved);
    w->from = eldr_calloc((size_t)n, sizeof *w->from);
    w->to = eldr_calloc((size_t)n, sizeof *w->to);
    w->gather = eldr_calloc(few * (size_t)d, sizeof *w->gather);
    w->q = eldr_calloc(few * (size_t)n, sizeof *w->q);
    if (!w->sim || !w->cost || !w->prev || !w->acc || !w->norm || !w->kept || !w->proj ||
        !w->moved || !w->from || !w->to || !w->gather || !w->q) {
        work_free(w);
        return -1;
    }
    return 0;
}

/* The rounds after initialisation; res->centroids holds the initial ones. */
static int iterate(const float *x, int n, int d, const kmeans_opts *o, kmeans_result *res,
                   work *w, char *err, size_t errlen)
{
    int k = o->k;
    sims_full(x, n, d, k, res->centroids, w);
    for (int it = 1; it <= o->iters; it++) {
        if (cancelled(o)) {
            eldr_errf(err, errlen, "kmeans: cancelled before iteration %d", it);
            return KMEANS_CANCELLED;
        }
        if (assign_from_sims(n, o, w, res->assign, err, errlen) < 0)
            return -1;
        res->iterations = it;
        /* The same members give the same means: nothing can move. */
        int same = it > 1 && !memcmp(w->prev, res->assign, (size_t)n * sizeof *w->prev);
        if (!same) {
            count_sizes(res->assign, n, k, res->sizes);
            accumulate(x, n, d, res->assign, it > 1 ? w->prev : NULL, res->sizes, k, w);
        }
        res->objective = objective_from_sums(n, d, k, res->centroids, w);
        if (o->progress)
            o->progress(o->progress_ctx, it, res->objective);
        if (same) {
            res->converged = 1;
            break;
        }
        double shift = renormalise(d, k, res->centroids, res->sizes, w);
        res->objective = objective_from_sums(n, d, k, res->centroids, w);
        if (shift <= KMEANS_EPS) {
            res->converged = 1;
            break;
        }
        if (it < o->iters)
            sims_refresh(x, n, d, k, res->centroids, res->assign, w);
        memcpy(w->prev, res->assign, (size_t)n * sizeof *w->prev);
    }
    return 0;
}

int kmeans_fit(const float *x, int n, int d, const kmeans_opts *o,
               kmeans_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    if (check_opts(n, d, o, err, errlen) < 0 || check_rows(x, n, d, o->threads, err, errlen) < 0)
        return -1;
    double need = (double)n * o->k * (2 * sizeof(float) + 2 * sizeof(double)) +
                  (double)o->k * d * (sizeof(double) + 2 * sizeof(float)) + 4.0 * n * sizeof(int);
    size_t mem = eldr_phys_mem();
    if (mem && need > (double)mem / 2)
        return eldr_errf(err, errlen, "kmeans: n=%d k=%d d=%d needs %.0f MB of working memory, too much",
                         n, o->k, d, need / 1e6);
    work w = {.threads = o->threads};
    if (result_alloc(res, n, d, o->k) < 0 || work_alloc(&w, n, d, o->k) < 0) {
        kmeans_result_free(res);
        return eldr_errf(err, errlen, "kmeans: out of memory for n=%d k=%d d=%d", n, o->k, d);
    }

    int rc = 0;
    if (o->init_rows) {
        for (int c = 0; c < o->k; c++)
            memcpy(res->centroids + (size_t)c * (size_t)d, x + (size_t)o->init_rows[c] * (size_t)d,
                   (size_t)d * sizeof *x);
    } else if (o->init_centroids) {
        for (int c = 0; c < o->k; c++)
            unit_copy(res->centroids + (size_t)c * (size_t)d,
                      o->init_centroids + (size_t)c * (size_t)d, d);
    } else {
        rc = plusplus(x, n, d, o, res->centroids, err, errlen);
    }
    if (rc == 0 && o->iters == 0) {
        sims_full(x, n, d, o->k, res->centroids, &w);
        rc = assign_from_sims(n, o, &w, res->assign, err, errlen);
    }
    else if (rc == 0)
        rc = iterate(x, n, d, o, res, &w, err, errlen);
    work_free(&w);
    if (rc != 0) {
        kmeans_result_free(res);
        return rc;
    }
    if (o->iters == 0) {
        count_sizes(res->assign, n, o->k, res->sizes);
        res->objective = objective_of(x, n, d, res->centroids, res->assign);
    }
    return 0;
}
