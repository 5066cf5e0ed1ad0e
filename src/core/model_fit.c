/* model_fit.c - fit a model on a calibration trace: IDF, layer mask,
 * signatures, balanced spherical K-means (model.h, "fitting").
 *
 * Stages, each timed for the report:
 *   recipe      IDF over every row (count_idf only);
 *   selection   the mask: greedy by rho (layersel.h), all layers or a list;
 *               the rho of a given mask is measured on the same pairs;
 *   signatures  one per row; all-zero ones are left out of the fit;
 *   fit         kmeans_fit on the non-zero signatures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "kmeans.h"
#include "layersel.h"
#include "model.h"
#include "rho.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void model_fit_opts_default(model_fit_opts *o, int K)
{
    memset(o, 0, sizeof *o);
    o->variant = SIG_COUNT_IDF;
    o->K = K;
    o->layers = MODEL_LAYERS_AUTO;
    o->seed = 1;
    o->iters = KMEANS_DEFAULT_ITERS;
    o->balanced = 1;
    o->pairs = RHO_DEFAULT_PAIRS;
    o->tau = MODEL_TAU_DEFAULT;
}

void model_fit_report_free(model_fit_report *r)
{
    if (!r)
        return;
    free(r->zero_rows);
    free(r->assign);
    free(r->curve);
    free(r->order);
    memset(r, 0, sizeof *r);
}

/* Everything a fit allocates on its way, released in one place. */
typedef struct fit_state {
    float *idf_full;          /* [L][E] */
    rho_pairs pairs;
    int have_pairs;
    layersel_result sel;
    int have_sel;
    sig_recipe recipe;
    float *x;                 /* [n][dim], compacted to the non-zero rows */
    uint8_t *zero;            /* [n] */
    int64_t *fit_row;         /* [n_fit] trace row of each fitted signature */
    int *init;                /* [K] fit indices of the init rows */
    kmeans_result km;
    int have_km;
} fit_state;

static void state_free(fit_state *s)
{
    free(s->idf_full);
    if (s->have_pairs)
        rho_pairs_free(&s->pairs);
    if (s->have_sel)
        layersel_result_free(&s->sel);
    sig_recipe_free(&s->recipe);
    free(s->x);
    free(s->zero);
    free(s->fit_row);
    free(s->init);
    if (s->have_km)
        kmeans_result_free(&s->km);
}

static int check_opts(const trace_t *t, const model_fit_opts *o, char *err, size_t errlen)
{
    if (t->n < 1)
        return eldr_errf(err, errlen, "fit: the trace has no requests");
    if (t->n > INT32_MAX)
        return eldr_errf(err, errlen, "fit: %lld requests, at most %d can be clustered",
                         (long long)t->n, INT32_MAX);
    if ((unsigned)o->variant >= SIG_N_VARIANTS)
        return eldr_errf(err, errlen, "fit: unknown variant %d", (int)o->variant);
    if (o->K < 1)
        return eldr_errf(err, errlen, "fit: K = %d clusters, need at least 1", o->K);
    if (o->K > t->n)
        return eldr_errf(err, errlen, "fit: K = %d clusters exceeds the %lld requests", o->K,
                         (long long)t->n);
    if (o->iters < 0)
        return eldr_errf(err, errlen, "fit: iterations %d must be >= 0", o->iters);
    if (o->iters == 0 && !o->init_rows)
        return eldr_errf(err, errlen, "fit: 0 iterations needs the initial rows (init_rows)");
    if (!isfinite(o->tau) || o->tau < 0)
        return eldr_errf(err, errlen, "fit: tau %g must be finite and >= 0", o->tau);
    if (o->layers == MODEL_LAYERS_AUTO && !t->decode_counts)
        return eldr_errf(err, errlen, "fit: automatic layer selection needs decode_counts, "
                         "which the trace lacks; give the layers (all or a list)");
    return 0;
}

/* Pairs for rho: P seeded draws, or all pairs when P == 0. */
static int make_pairs(const trace_t *t, const model_fit_opts *o, fit_state *s, char *err,
                      size_t errlen)
{
    int rc = o->pairs > 0 ? rho_pairs_sample(t->n, o->pairs, o->seed, &s->pairs, err, errlen)
                          : rho_pairs_all(t->n, &s->pairs, err, errlen);
    s->have_pairs = rc == 0;
    return rc;
}

/* The mask (into s->recipe, with its idf) and, where measurable, rho. */
static int choose_mask(const trace_t *t, const model_fit_opts *o, fit_state *s, model_t *tmp,
                       model_fit_report *rep, char *err, size_t errlen)
{
    const int *mask = NULL;
    int n_mask = 0;
    tmp->rho = NAN;
    int can_rho = t->decode_counts && t->n >= 2;
    if (can_rho && make_pairs(t, o, s, err, errlen) < 0)
        return -1;
    if (o->layers == MODEL_LAYERS_AUTO) {
        if (t->n < 2)
            return eldr_errf(err, errlen, "fit: automatic layer selection needs at least 2 "
                             "requests; give the layers");
        if (layersel_run_progress(t, o->variant, s->idf_full, &s->pairs, o->threads, o->cancel,
                                  o->on_progress, o->on_progress_ctx, &s->sel, err, errlen) < 0)
            return -1;
        s->have_sel = 1;
        mask = s->sel.mask;
        n_mask = s->sel.n_star;
        tmp->rho = s->sel.rho;
        rep->curve = malloc((size_t)t->L * sizeof *rep->curve);
        rep->order = malloc((size_t)t->L * sizeof *rep->order);
        if (!rep->curve || !rep->order)
            return eldr_errf(err, errlen, "fit: out of memory");
        memcpy(rep->curve, s->sel.curve, (size_t)t->L * sizeof *rep->curve);
        memcpy(rep->order, s->sel.order, (size_t)t->L * sizeof *rep->order);
    } else if (o->layers == MODEL_LAYERS_LIST) {
        mask = o->layer_list;
        n_mask = o->n_layer_list;
        if (n_mask < 1)
            return eldr_errf(err, errlen, "fit: the layer list is empty");
    }
    if (sig_recipe_init(&s->recipe, o->variant, t->L, t->E, mask, n_mask, err, errlen) < 0 ||
        (s->idf_full && sig_recipe_set_idf(&s->recipe, s->idf_full, err, errlen) < 0))
        return -1;
    tmp->n_star = s->recipe.n_layers;
    /* rho of a given mask: informational, NaN when undefined (constant
     * distances) */
    if (o->layers != MODEL_LAYERS_AUTO && can_rho &&
        rho_eval(t, &s->recipe, &s->pairs, NULL, NULL, &tmp->rho, NULL, NULL, 0) < 0)
        tmp->rho = NAN;
    return 0;
}

/* Signatures of every row, compacted to the non-zero ones. */
static int build_signatures(const trace_t *t, const model_fit_opts *o, fit_state *s,
                            model_fit_report *rep, int64_t *n_fit, char *err, size_t errlen)
{
    size_t dim = sig_dim(&s->recipe), n = (size_t)t->n;
    size_t phys = eldr_phys_mem();
    if (dim && n > SIZE_MAX / sizeof(float) / dim)
        return eldr_errf(err, errlen, "fit: %zu x %zu signatures overflow", n, dim);
    if (phys && n * dim * sizeof(float) > phys)
        return eldr_errf(err, errlen, "fit: %zu x %zu signatures exceed physical memory", n,
                         dim);
    s->x = eldr_calloc(n * dim, sizeof(float));
    s->zero = eldr_calloc(n, 1);
    s->fit_row = eldr_calloc(n, sizeof *s->fit_row);
    if (!s->x || !s->zero || !s->fit_row)
        return eldr_errf(err, errlen, "fit: out of memory for %zu signatures", n);
    int64_t nz = 0;
    if (sig_build_batch(t, &s->recipe, NULL, t->n, s->x, &nz, s->zero, err, errlen) < 0)
        return -1;
    rep->n_zero = nz;
    rep->zero_rows = eldr_calloc((size_t)nz, sizeof *rep->zero_rows);
    if (!rep->zero_rows)
        return eldr_errf(err, errlen, "fit: out of memory");
    int64_t j = 0, z = 0;
    for (size_t i = 0; i < n; i++) {
        if (s->zero[i]) {
            rep->zero_rows[z++] = (int64_t)i;
            continue;
        }
        if ((size_t)j != i)
            memcpy(s->x + (size_t)j * dim, s->x + i * dim, dim * sizeof(float));
        s->fit_row[j++] = (int64_t)i;
    }
    *n_fit = j;
    if (j < o->K)
        return eldr_errf(err, errlen, "fit: K = %d clusters exceeds the %lld requests with a "
                         "non-zero signature (%lld all zero under the mask)", o->K,
                         (long long)j, (long long)nz);
    return 0;
}

/* Trace rows of the initial centroids -> indices among the fitted rows. */
static int map_init_rows(const trace_t *t, const model_fit_opts *o, fit_state *s, char *err,
                         size_t errlen)
{
    if (!o->init_rows)
        return 0;
    if (!(s->init = eldr_calloc((size_t)o->K, sizeof *s->init)))
        return eldr_errf(err, errlen, "fit: out of memory");
    for (int c = 0; c < o->K; c++) {
        int64_t r = o->init_rows[c];
        if (r < 0 || r >= t->n)
            return eldr_errf(err, errlen, "fit: initial row %lld (centroid %d) is out of "
                             "range [0, %lld)", (long long)r, c, (long long)t->n);
        if (s->zero[r])
            return eldr_errf(err, errlen, "fit: initial row %lld (centroid %d) has an all-zero "
                             "signature", (long long)r, c);
        /* rank of r among the non-zero rows = r minus the zero rows before it */
        int64_t before = 0;
        for (int64_t i = 0; i < r; i++)
            before += s->zero[i];
        s->init[c] = (int)(r - before);
    }
    return 0;
}

/* kmeans reports (iter, objective) to one callback: this one passes it on
 * to the caller's K-means callback and to the stage progress. */
typedef struct km_relay {
    const model_fit_opts *o;
    progress_t pg;
    int total;                /* rounds at most (1 for iters = 0) */
} km_relay;

static void km_relay_fn(void *ctx, int iter, double objective)
{
    km_relay *r = ctx;
    if (r->o->progress)
        r->o->progress(r->o->progress_ctx, iter, objective);
    progress_tick(&r->pg, MODEL_FIT_KMEANS, iter < r->total ? iter : r->total, r->total);
}

static int run_kmeans(const model_fit_opts *o, fit_state *s, int64_t n_fit, char *err,
                      size_t errlen)
{
    kmeans_opts ko;
    kmeans_opts_default(&ko, o->K);
    ko.iters = o->iters;
    ko.seed = o->seed;
    ko.balanced = o->balanced;
    ko.init_rows = s->init;
    int total = o->iters > 0 ? o->iters : 1;
    km_relay relay = {.o = o, .total = total};
    progress_init(&relay.pg, o->on_progress, o->on_progress_ctx);
    progress_tick(&relay.pg, MODEL_FIT_KMEANS, 0, total);
    ko.progress = km_relay_fn;
    ko.progress_ctx = &relay;
    ko.cancel = o->cancel;
    int rc = kmeans_fit(s->x, (int)n_fit, (int)sig_dim(&s->recipe), &ko, &s->km, err, errlen);
    s->have_km = rc == 0;
    if (rc == 0) /* converged early, or iters = 0: the stage is complete */
        progress_tick(&relay.pg, MODEL_FIT_KMEANS, total, total);
    return rc == 0 ? 0 : -1;
}

/* The model and the per-row assignment from the finished state. */
static model_t *assemble(const trace_t *t, const model_fit_opts *o, fit_state *s,
                         const model_t *tmp, int64_t n_fit, model_fit_report *rep, char *err,
                         size_t errlen)
{
    model_t *m = model_new(&s->recipe, t->k, o->K, err, errlen);
    if (!m)
        return NULL;
    memcpy(m->centroids, s->km.centroids, (size_t)o->K * sig_dim(&s->recipe) * sizeof(float));
    int64_t *sizes = eldr_calloc((size_t)o->K, sizeof *sizes);
    rep->assign = eldr_calloc((size_t)t->n, sizeof *rep->assign);
    if (!sizes || !rep->assign ||
        (o->workers && model_set_workers(m, o->workers, o->K, err, errlen) < 0)) {
        free(sizes);
        model_free(m);
        eldr_errf(err, errlen, "fit: out of memory or bad worker names");
        return NULL;
    }
    for (int c = 0; c < o->K; c++)
        sizes[c] = s->km.sizes[c];
    model_set_sizes(m, sizes, err, errlen);
    free(sizes);
    /* the drift baseline: the calibration signatures' own nearest centroid
     * (not the balanced sizes: eldrd's window measures live traffic by the
     * unconstrained argmax, and so must its reference) */
    if (model_measure_nearest_share(m, s->x, n_fit, err, errlen) < 0) {
        model_free(m);
        return NULL;
    }
    for (int64_t i = 0; i < t->n; i++)
        rep->assign[i] = -1;
    for (int64_t j = 0; j < n_fit; j++)
        rep->assign[s->fit_row[j]] = s->km.assign[j];
    m->tau = o->tau;
    m->seed = o->seed;
    m->rho = tmp->rho;
    m->n_star = tmp->n_star;
    m->objective = s->km.objective;
    m->calib_rows = t->n;
    m->fit_rows = n_fit;
    m->zero_rows = rep->n_zero;
    m->iters = s->km.iterations;
    m->balanced = o->balanced != 0;
    static const char *const sel[] = {"auto", "all", "list"};
    snprintf(m->layer_select, sizeof m->layer_select, "%s", sel[o->layers % 3]);
    snprintf(m->calib_sha256, sizeof m->calib_sha256, "%s", o->calib_sha256 ? o->calib_sha256 : "");
    snprintf(m->calib_file, sizeof m->calib_file, "%s", o->calib_file ? o->calib_file : "");
    snprintf(m->model_name, sizeof m->model_name, "%s", t->model);
    rep->iterations = s->km.iterations;
    rep->converged = s->km.converged;
    return m;
}

/* Between stages: has the caller asked to stop? */
static int cancelled(const model_fit_opts *o, char *err, size_t errlen)
{
    if (!o->cancel || !*o->cancel)
        return 0;
    eldr_errf(err, errlen, "fit: cancelled");
    return 1;
}

/* owned: t itself, writable, when its decode counts may go after the
 * selection stage; else NULL. */
static int fit(const trace_t *t, trace_t *owned, const model_fit_opts *o, model_t **out,
               model_fit_report *rep, char *err, size_t errlen)
{
    model_fit_report local;
    fit_state s;
    model_t tmp;        /* rho and n_star on their way to the model */
    int64_t n_fit = 0;
    *out = NULL;
    if (!rep)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    memset(&s, 0, sizeof s);
    memset(&tmp, 0, sizeof tmp);
    if (check_opts(t, o, err, errlen) < 0)
        return -1;
    rep->n_rows = t->n;
    double t0 = now_s();
    if (o->variant == SIG_COUNT_IDF &&
        (!(s.idf_full = eldr_calloc(TRACE_CELLS(t), sizeof(float))) ||
         sig_idf_fit(t, NULL, t->n, s.idf_full, err, errlen) < 0)) {
        if (!s.idf_full)
            eldr_errf(err, errlen, "fit: out of memory");
        goto fail;
    }
    double t1 = now_s();
    rep->t_recipe = t1 - t0;
    if (cancelled(o, err, errlen) || choose_mask(t, o, &s, &tmp, rep, err, errlen) < 0)
        goto fail;
    if (owned && !owned->decode_experts) {
        /* both, so that the trace stays valid (they come together) */
        free(owned->decode_counts);
        free(owned->decode_tokens);
        owned->decode_counts = NULL;
        owned->decode_tokens = NULL;
    }
    double t2 = now_s();
    rep->t_selection = t2 - t1;
    progress_t pg;
    progress_init(&pg, o->on_progress, o->on_progress_ctx);
    progress_tick(&pg, MODEL_FIT_SIGNATURES, 0, 1);
    if (cancelled(o, err, errlen) || build_signatures(t, o, &s, rep, &n_fit, err, errlen) < 0 ||
        map_init_rows(t, o, &s, err, errlen) < 0)
        goto fail;
    progress_tick(&pg, MODEL_FIT_SIGNATURES, 1, 1);
    double t3 = now_s();
    rep->t_signatures = t3 - t2;
    if (cancelled(o, err, errlen) || run_kmeans(o, &s, n_fit, err, errlen) < 0)
        goto fail;
    rep->t_fit = now_s() - t3;
    *out = assemble(t, o, &s, &tmp, n_fit, rep, err, errlen);
    if (!*out)
        goto fail;
    state_free(&s);
    if (rep == &local)
        model_fit_report_free(rep);
    return 0;
fail:
    state_free(&s);
    model_fit_report_free(rep);
    return o->cancel && *o->cancel ? MODEL_FIT_CANCELLED : -1;
}

int model_fit(const trace_t *t, const model_fit_opts *o, model_t **out, model_fit_report *rep,
              char *err, size_t errlen)
{
    return fit(t, NULL, o, out, rep, err, errlen);
}

int model_fit_release(trace_t *t, const model_fit_opts *o, model_t **out,
                      model_fit_report *rep, char *err, size_t errlen)
{
    return fit(t, t, o, out, rep, err, errlen);
}
