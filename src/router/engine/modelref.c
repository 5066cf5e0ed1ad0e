/* modelref.c - refcounted model pointer and its holder (modelref.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "modelref.h"

/* Calibration reference for drift: the calibration signatures' own
 * nearest-centroid shares (model.h nearest_share; the statistic the
 * window measures), else the fit's cluster sizes (a model that predates
 * them: the balanced sizes, which differ from the nearest shares and
 * read as drift on calibration traffic; the drift JSON says so), and the
 * mean similarity 1 - objective / fit_rows. */
static void calibration(mref_t *r)
{
    const model_t *m = r->m;
    r->calib_sim = NAN;
    if (isfinite(m->objective) && m->fit_rows > 0)
        r->calib_sim = 1.0 - m->objective / (double)m->fit_rows;
    if (m->nearest_share) {
        if ((r->calib_share = calloc((size_t)m->K, sizeof *r->calib_share)))
            memcpy(r->calib_share, m->nearest_share, (size_t)m->K * sizeof *r->calib_share);
        return;
    }
    if (!m->sizes)
        return;
    r->calib_from_sizes = 1;
    double total = 0;
    for (int k = 0; k < m->K; k++)
        total += (double)m->sizes[k];
    if (!(total > 0) || !(r->calib_share = calloc((size_t)m->K, sizeof *r->calib_share)))
        return;
    for (int k = 0; k < m->K; k++)
        r->calib_share[k] = (double)m->sizes[k] / total;
}

mref_t *mref_new(model_t *m, const char *source, char *err, size_t errlen)
{
    mref_t *r = calloc(1, sizeof *r);
    if (!r) {
        model_free(m);
        eldr_errf(err, errlen, "out of memory for the model");
        return NULL;
    }
    r->m = m;
    r->dim = sig_dim(&m->recipe);
    snprintf(r->source, sizeof r->source, "%s", source);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->loaded_at = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    calibration(r);
    atomic_init(&r->refs, 1);
    return r;
}

void mref_put(mref_t *r)
{
    if (!r || atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    model_free(r->m);
    free(r->calib_share);
    free(r);
}

void mholder_init(mholder *h)
{
    pthread_mutex_init(&h->lock, NULL);
    h->cur = NULL;
    h->next_gen = 1;
}

void mholder_destroy(mholder *h)
{
    mref_put(h->cur);
    h->cur = NULL;
    pthread_mutex_destroy(&h->lock);
}

mref_t *mholder_get(mholder *h)
{
    pthread_mutex_lock(&h->lock);
    mref_t *r = h->cur;
    if (r)
        atomic_fetch_add(&r->refs, 1);
    pthread_mutex_unlock(&h->lock);
    return r;
}

void mholder_swap(mholder *h, mref_t *r)
{
    pthread_mutex_lock(&h->lock);
    mref_t *old = h->cur;
    r->gen = h->next_gen++;
    if (!r->refit_of)
        r->epoch = r->gen;
    h->cur = r;
    pthread_mutex_unlock(&h->lock);
    mref_put(old);
}

int mref_check_servable(const model_t *m, int K, char *err, size_t errlen)
{
    if (m->K != K)
        return eldr_errf(err, errlen, "model has K = %d centroids, the daemon serves %d workers",
                         m->K, K);
    if (m->K > 256)
        return eldr_errf(err, errlen, "model has K = %d workers, more than 256", m->K);
    return 0;
}
