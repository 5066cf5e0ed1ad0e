/* online.c - the online refit: its window, its clock and one refit
 * (online.h). */
#include "online.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "hungarian.h"
#include "kmeans.h"
#include "route.h"

/* ---- window ---- */

int online_window_init(online_window *w, size_t dim, int max_rows, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    if (dim < 1)
        return eldr_errf(err, errlen, "online: signature dimension 0");
    if (max_rows < 1)
        return eldr_errf(err, errlen, "online: window capacity %d must be >= 1", max_rows);
    w->dim = dim;
    w->max_rows = max_rows;
    return 0;
}

void online_window_free(online_window *w)
{
    free(w->t);
    free(w->rows);
    memset(w, 0, sizeof *w);
}

void online_window_clear(online_window *w)
{
    w->n = w->head = 0;
}

static float *slot(const online_window *w, int i)
{
    return w->rows + (size_t)((w->head + i) % w->cap) * w->dim;
}

/* Room for one more: double the slots (up to max_rows), unrolling the
 * ring so that the oldest is slot 0 again. */
static int grow(online_window *w)
{
    int cap = w->cap ? 2 * w->cap : 64;
    if (cap > w->max_rows)
        cap = w->max_rows;
    double *t = malloc((size_t)cap * sizeof *t);
    float *rows = malloc((size_t)cap * w->dim * sizeof *rows);
    if (!t || !rows) {
        free(t);
        free(rows);
        return -1;
    }
    for (int i = 0; i < w->n; i++) {
        t[i] = w->t[(w->head + i) % w->cap];
        memcpy(rows + (size_t)i * w->dim, slot(w, i), w->dim * sizeof *rows);
    }
    free(w->t);
    free(w->rows);
    w->t = t;
    w->rows = rows;
    w->cap = cap;
    w->head = 0;
    return 0;
}

int online_window_push(online_window *w, double t, const float *sig)
{
    size_t j = 0;
    while (j < w->dim && sig[j] == 0.0f)
        j++;
    if (j == w->dim)
        return 0;
    if (w->n == w->cap && w->cap < w->max_rows && grow(w) < 0)
        return -1;
    if (w->n == w->cap) {        /* full at max_rows: the oldest goes */
        w->head = (w->head + 1) % w->cap;
        w->n--;
        w->overflowed++;
    }
    int at = (w->head + w->n) % w->cap;
    w->t[at] = t;
    memcpy(w->rows + (size_t)at * w->dim, sig, w->dim * sizeof *sig);
    w->n++;
    w->pushed++;
    return 1;
}

void online_window_evict(online_window *w, double now, double span)
{
    double cutoff = now - span;
    while (w->n > 0 && w->t[w->head] < cutoff) {
        w->head = (w->head + 1) % w->cap;
        w->n--;
    }
}

int online_window_copy(const online_window *w, float **out)
{
    *out = NULL;
    if (w->n == 0)
        return 0;
    float *rows = malloc((size_t)w->n * w->dim * sizeof *rows);
    if (!rows)
        return -1;
    /* at most two runs: head..end of the ring, then its start */
    int first = w->cap - w->head < w->n ? w->cap - w->head : w->n;
    memcpy(rows, slot(w, 0), (size_t)first * w->dim * sizeof *rows);
    if (first < w->n)
        memcpy(rows + (size_t)first * w->dim, w->rows,
               (size_t)(w->n - first) * w->dim * sizeof *rows);
    *out = rows;
    return w->n;
}

/* ---- clock ---- */

int online_clock_init(online_clock *c, double every, double window, char *err, size_t errlen)
{
    if (!isfinite(every) || every <= 0)
        return eldr_errf(err, errlen, "refit every %g s: must be a finite number > 0", every);
    if (!isfinite(window) || window <= 0)
        return eldr_errf(err, errlen, "refit window %g s: must be a finite number > 0", window);
    c->every = every;
    c->window = window;
    online_clock_reset(c);
    return 0;
}

void online_clock_reset(online_clock *c)
{
    c->first = c->last = NAN;
}

void online_clock_seen(online_clock *c, double t)
{
    if (isnan(c->first))
        c->first = t;
}

int online_clock_due(const online_clock *c, double now, int n_rows, int K)
{
    if (isnan(c->first) || now - c->first < c->window)
        return 0;                /* the first window is not full yet */
    if (!isnan(c->last) && now - c->last < c->every)
        return 0;
    return n_rows >= K && K >= 1;
}

void online_clock_started(online_clock *c, double now)
{
    c->last = now;
}

/* ---- one refit ---- */

int online_align(const float *cur, const float *fitted, int K, size_t dim, int *perm,
                 double *cost, char *err, size_t errlen)
{
    double *m = malloc((size_t)K * K * sizeof *m);
    if (!m)
        return eldr_errf(err, errlen, "online: out of memory for a %d x %d alignment", K, K);
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++)
            m[(size_t)i * K + j] = 1.0 - route_dot(cur + (size_t)i * dim,
                                                   fitted + (size_t)j * dim, dim);
    int rc = hungarian_solve(m, K, K, perm, cost, err, errlen);
    free(m);
    return rc;
}

int online_refit(const float *rows, int n, size_t dim, const float *cur, int K, int threads,
                 float *out, int *sizes, int *perm, online_stats *st, char *err,
                 size_t errlen)
{
    memset(st, 0, sizeof *st);
    if (K < 1 || n < K)
        return eldr_errf(err, errlen, "online: %d signatures in the window, a refit of K = %d "
                         "needs at least %d", n, K, K < 1 ? 1 : K);
    if (dim > (size_t)INT32_MAX)
        return eldr_errf(err, errlen, "online: signature dimension %zu too large", dim);
    kmeans_opts o;
    kmeans_opts_default(&o, K);
    o.init_centroids = cur;
    o.threads = threads;
    kmeans_result km;
    if (kmeans_fit(rows, n, (int)dim, &o, &km, err, errlen) != 0)
        return -1;
    int own_perm[ROUTE_MAX_WORKERS], *p = perm ? perm : own_perm;
    if (!perm && K > ROUTE_MAX_WORKERS) {
        kmeans_result_free(&km);
        return eldr_errf(err, errlen, "online: K = %d is above %d", K, ROUTE_MAX_WORKERS);
    }
    double cost;
    if (online_align(cur, km.centroids, K, dim, p, &cost, err, errlen) < 0) {
        kmeans_result_free(&km);
        return -1;
    }
    st->rows = n;
    st->iterations = km.iterations;
    st->converged = km.converged;
    st->objective = km.objective;
    st->mean_sim = 1.0 - km.objective / n;
    st->align_cost = cost;
    for (int i = 0; i < K; i++) {
        const float *src = km.centroids + (size_t)p[i] * dim;
        memcpy(out + (size_t)i * dim, src, dim * sizeof *out);
        if (sizes)
            sizes[i] = km.sizes[p[i]];
        double move = 1.0 - route_dot(cur + (size_t)i * dim, src, dim);
        if (move > st->max_move)
            st->max_move = move;
    }
    kmeans_result_free(&km);
    return 0;
}
