/* model_align.c - a new model lined up with the live one (model_align.h). */
#include "model_align.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "online.h"

static int mask_index(const sig_recipe *r, int layer)
{
    for (int i = 0; i < r->n_layers; i++)
        if (r->layers[i] == layer)
            return i;
    return -1;
}

/* "0,5,6" (cut with "..." when long). */
static void mask_text(const sig_recipe *r, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->n_layers && at + 16 < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? "," : "", r->layers[i]);
    if (at + 16 >= len)
        snprintf(buf + at, len - at, ",...");
}

static void add_change(model_align *a, const char *fmt, const char *x, const char *y)
{
    size_t at = strlen(a->what_changed);
    snprintf(a->what_changed + at, sizeof a->what_changed - at, "%s", at ? "; " : "");
    at = strlen(a->what_changed);
    snprintf(a->what_changed + at, sizeof a->what_changed - at, fmt, x, y);
    a->recipe_changed = 1;
}

static void name_changes(const model_t *live, const model_t *cand, model_align *a)
{
    const sig_recipe *lr = &live->recipe, *cr = &cand->recipe;
    if (lr->variant != cr->variant)
        add_change(a, "variant %s -> %s", sig_variant_name(lr->variant),
                   sig_variant_name(cr->variant));
    int same_mask = lr->n_layers == cr->n_layers &&
                    !memcmp(lr->layers, cr->layers, (size_t)lr->n_layers * sizeof(int));
    if (!same_mask) {
        char x[120], y[120];
        mask_text(lr, x, sizeof x);
        mask_text(cr, y, sizeof y);
        add_change(a, "layers %s -> %s", x, y);
    } else if (lr->variant == cr->variant && (!lr->idf != !cr->idf ||
               (lr->idf && memcmp(lr->idf, cr->idf, sig_dim(lr) * sizeof(float))))) {
        add_change(a, "idf %s%s", lr->idf && cr->idf ? "reweighted" : cr->idf ? "added" : "dropped",
                   "");
    }
    if (live->k && cand->k && live->k != cand->k) {
        char x[16], y[16];
        snprintf(x, sizeof x, "%d", live->k);
        snprintf(y, sizeof y, "%d", cand->k);
        add_change(a, "top-k %s -> %s", x, y);
    }
}

/* The K rows of m over the shared layers (sl: positions in m's mask),
 * each renormalised (a row with nothing there stays zero). */
static void gather(const model_t *m, const int *sl, int ns, int K, float *out)
{
    size_t E = (size_t)m->recipe.E, dim = sig_dim(&m->recipe), d = (size_t)ns * E;
    for (int k = 0; k < K; k++) {
        float *o = out + (size_t)k * d;
        for (int s = 0; s < ns; s++)
            memcpy(o + (size_t)s * E, m->centroids + (size_t)k * dim + (size_t)sl[s] * E,
                   E * sizeof *o);
        double n2 = route_dot(o, o, d);
        if (n2 > 0)
            for (size_t j = 0; j < d; j++)
                o[j] = (float)(o[j] / sqrt(n2));
    }
}

int model_align_plan(const model_t *live, const model_t *cand, model_align *a, char *err,
                     size_t errlen)
{
    memset(a, 0, sizeof *a);
    const sig_recipe *lr = &live->recipe, *cr = &cand->recipe;
    if (lr->L != cr->L || lr->E != cr->E || live->K != cand->K) {
        eldr_errf(err, errlen, "the new model has L=%d E=%d K=%d, the router serves L=%d E=%d "
                  "K=%d (a push keeps the geometry and the number of workers)", cr->L, cr->E,
                  cand->K, lr->L, lr->E, live->K);
        return MODEL_ALIGN_MISMATCH;
    }
    int K = live->K;
    if (K < 1 || K > ROUTE_MAX_WORKERS)
        return eldr_errf(err, errlen, "K = %d workers: align supports 1..%d", K,
                         ROUTE_MAX_WORKERS);
    a->K = K;
    name_changes(live, cand, a);
    int *ls = malloc(((size_t)lr->n_layers + 1) * sizeof *ls);
    int *cs = malloc(((size_t)lr->n_layers + 1) * sizeof *cs), ns = 0;
    if (!ls || !cs) {
        free(ls);
        free(cs);
        return eldr_errf(err, errlen, "align: out of memory for %d layers", lr->n_layers);
    }
    for (int i = 0; i < lr->n_layers; i++) {
        int j = mask_index(cr, lr->layers[i]);
        if (j >= 0) {
            ls[ns] = i;
            cs[ns++] = j;
        }
    }
    a->shared_layers = ns;
    if (ns == 0) {                /* nothing to compare: the file's order */
        free(ls);
        free(cs);
        for (int i = 0; i < K; i++)
            a->perm[i] = i;
        return 0;
    }
    size_t d = (size_t)ns * (size_t)lr->E;
    float *lv = malloc((size_t)K * d * sizeof *lv), *cv = malloc((size_t)K * d * sizeof *cv);
    if (lv && cv) {
        gather(live, ls, ns, K, lv);
        gather(cand, cs, ns, K, cv);
    }
    free(ls);
    free(cs);
    if (!lv || !cv) {
        free(lv);
        free(cv);
        return eldr_errf(err, errlen, "align: out of memory for 2 x %d x %zu centroids", K, d);
    }
    int rc = online_align(lv, cv, K, d, a->perm, &a->cost, err, errlen);
    for (int i = 0; rc == 0 && i < K; i++) {
        a->cos[i] = route_dot(lv + (size_t)i * d, cv + (size_t)a->perm[i] * d, d);
        a->cos_as_given[i] = route_dot(lv + (size_t)i * d, cv + (size_t)i * d, d);
        a->moved += a->perm[i] != i;
    }
    free(lv);
    free(cv);
    return rc;
}

model_t *model_align_apply(const model_t *live, const model_t *cand, const model_align *a,
                           char *err, size_t errlen)
{
    model_t *m = model_copy(cand, err, errlen);
    if (!m)
        return NULL;
    size_t dim = sig_dim(&cand->recipe);
    for (int i = 0; i < a->K; i++) {
        memcpy(m->centroids + (size_t)i * dim, cand->centroids + (size_t)a->perm[i] * dim,
               dim * sizeof *m->centroids);
        if (m->sizes)
            m->sizes[i] = cand->sizes[a->perm[i]];
        if (m->nearest_share)   /* the drift baseline follows its centroid */
            m->nearest_share[i] = cand->nearest_share[a->perm[i]];
    }
    if (model_set_workers(m, (const char *const *)live->workers, live->K, err, errlen) < 0) {
        model_free(m);
        return NULL;
    }
    return m;
}
