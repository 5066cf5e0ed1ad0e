/* whatif.c - one background job at a time on a pthread (whatif.h). */
#include <stdio.h>
#include <string.h>

#include "kmeans.h"
#include "whatif.h"

static const route_kind BASE_KINDS[DASH_N_BASE] = {ROUTE_RANDOM, ROUTE_RR, ROUTE_JSQ,
                                                   ROUTE_P2C};

void whatif_init(whatif_t *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
}

void whatif_destroy(whatif_t *w)
{
    pthread_mutex_destroy(&w->mu);
}

static void on_progress(void *ctx, const char *stage, double frac)
{
    whatif_t *w = ctx;
    pthread_mutex_lock(&w->mu);
    snprintf(w->stage, sizeof w->stage, "%s", stage);
    w->frac = frac;
    pthread_mutex_unlock(&w->mu);
}

static void finish(whatif_t *w, int rc)
{
    pthread_mutex_lock(&w->mu);
    w->rc = rc;
    w->done = 1;
    pthread_mutex_unlock(&w->mu);
}

static int cancelled(whatif_t *w)
{
    if (!w->cancel)
        return 0;
    snprintf(w->err, sizeof w->err, "cancelled");
    return 1;
}

static int run_change(whatif_t *w)
{
    const dash_t *d = w->d;
    const model_t *m = d->fit->model;
    if (w->K != m->K && d->home && w->K == d->home->model->K) {
        /* back to the opened model's K: that model, not a new k-means
         * (which would give other centroids and lose the file's recipe) */
        w->fit = d->home;
        m = w->fit->model;
    } else if (w->K != m->K) {
        int rc = dash_refit(d, w->K, &w->cancel, on_progress, w, &w->fit, w->err,
                            sizeof w->err);
        if (rc)
            return rc;
        m = w->fit->model;
    }
    if (cancelled(w))
        return KMEANS_CANCELLED;
    on_progress(w, "simulate", 0);
    if (dash_simulate(d, m, w->policy, w->tau, w->K, &w->cur, w->err, sizeof w->err))
        return -1;
    for (int i = 0; w->fit && i < DASH_N_BASE; i++) {
        if (cancelled(w))
            return KMEANS_CANCELLED;
        on_progress(w, "simulate baselines", (i + 1.0) / (DASH_N_BASE + 1));
        if (dash_simulate(d, m, BASE_KINDS[i], w->tau, w->K, &w->base[i], w->err,
                          sizeof w->err))
            return -1;
    }
    /* the header's +-: every change gets its own CIs, so a number is
     * never shown with the interval of another setting */
    int rc = dash_compute_ci(d, m, w->policy, w->tau, &w->cancel, on_progress, w, &w->ci,
                             w->err, sizeof w->err);
    return rc == -2 ? KMEANS_CANCELLED : rc;
}

static void *thread_main(void *arg)
{
    whatif_t *w = arg;
    int rc;
    if (w->kind == WHATIF_OPEN) {
        dash_opts o = w->d->opts;
        rc = dash_open_trace(w->d, &o, w->t, w->m, on_progress, w, w->err, sizeof w->err);
        w->t = NULL;
        w->m = NULL;
    } else {
        rc = run_change(w);
    }
    finish(w, rc);
    return NULL;
}

static int start(whatif_t *w)
{
    w->done = 0;
    w->cancel = 0;
    w->rc = 0;
    w->err[0] = '\0';
    w->frac = -1;
    snprintf(w->stage, sizeof w->stage, "%s", w->kind == WHATIF_OPEN ? "opening" : "working");
    w->fit = NULL;
    w->cur = NULL;
    memset(w->base, 0, sizeof w->base);
    memset(&w->ci, 0, sizeof w->ci);
    if (pthread_create(&w->th, NULL, thread_main, w)) {
        snprintf(w->err, sizeof w->err, "cannot start the what-if thread");
        return -1;
    }
    w->running = 1;
    return 0;
}

int whatif_start_open(whatif_t *w, dash_t *d, const dash_opts *o, trace_t *t, model_t *m)
{
    if (w->running)
        return -1;
    w->kind = WHATIF_OPEN;
    w->d = d;
    d->opts = *o;   /* read by the thread as the options to open with */
    w->t = t;
    w->m = m;
    return start(w);
}

int whatif_start_change(whatif_t *w, dash_t *d, int K, route_kind policy, double tau)
{
    if (w->running)
        return -1;
    w->kind = WHATIF_CHANGE;
    w->d = d;
    w->K = K;
    w->policy = policy;
    w->tau = tau;
    return start(w);
}

int whatif_done(whatif_t *w)
{
    pthread_mutex_lock(&w->mu);
    int done = w->running && w->done;
    pthread_mutex_unlock(&w->mu);
    return done;
}

void whatif_progress(whatif_t *w, char *stage, size_t n, double *frac)
{
    pthread_mutex_lock(&w->mu);
    snprintf(stage, n, "%s", w->stage);
    *frac = w->frac;
    pthread_mutex_unlock(&w->mu);
}

void whatif_cancel(whatif_t *w)
{
    w->cancel = 1;
}

int whatif_collect(whatif_t *w)
{
    if (!w->running)
        return -1;
    pthread_join(w->th, NULL);
    w->running = 0;
    dash_t *d = w->d;
    if (w->kind == WHATIF_OPEN || w->rc) {
        dash_fit_release(d, w->fit);
        dash_sim_free(w->cur);
        for (int i = 0; i < DASH_N_BASE; i++)
            dash_sim_free(w->base[i]);
    } else {
        if (w->fit) {
            dash_fit_release(d, d->fit);
            d->fit = w->fit;
            for (int i = 0; i < DASH_N_BASE; i++) {
                dash_sim_free(d->base[i]);
                d->base[i] = w->base[i];
            }
        }
        dash_sim_free(d->cur);
        d->cur = w->cur;
        d->ci = w->ci;
        dash_trail_add(d);
    }
    w->fit = NULL;
    w->cur = NULL;
    memset(w->base, 0, sizeof w->base);
    return w->rc;
}
