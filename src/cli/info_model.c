/* info_model.c - `eldr info MODEL.h5`: what a model file holds (called by
 * cmd_info.c for files whose format is eldr-model). Loading validates the
 * model (docs/model-format.md); a bad file is one line on stderr, exit 2. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "err.h"
#include "model.h"

int info_model(const char *path, int json);

/* Norms of the centroid rows and the most similar pair of centroids
 * (how far apart the workers' regions are). */
typedef struct centroid_stats {
    double norm_min, norm_max;
    double max_cos;           /* NaN when K == 1 */
    int pair_a, pair_b;
} centroid_stats;

static void centroid_summary(const model_t *m, centroid_stats *s)
{
    size_t dim = sig_dim(&m->recipe);
    s->norm_min = INFINITY;
    s->norm_max = -INFINITY;
    s->max_cos = NAN;
    s->pair_a = s->pair_b = -1;
    for (int a = 0; a < m->K; a++) {
        const float *x = m->centroids + (size_t)a * dim;
        double ss = 0;
        for (size_t j = 0; j < dim; j++)
            ss += (double)x[j] * x[j];
        s->norm_min = fmin(s->norm_min, sqrt(ss));
        s->norm_max = fmax(s->norm_max, sqrt(ss));
        for (int b = 0; b < a; b++) {
            const float *y = m->centroids + (size_t)b * dim;
            double d = 0;
            for (size_t j = 0; j < dim; j++)
                d += (double)x[j] * y[j];
            if (s->pair_a < 0 || d > s->max_cos) {
                s->max_cos = d;
                s->pair_a = b;
                s->pair_b = a;
            }
        }
    }
}

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *int_or_null(int64_t v)
{
    return v >= 0 ? json_integer(v) : json_null();
}

static void print_json(const char *path, const model_t *m, const centroid_stats *s)
{
    const sig_recipe *r = &m->recipe;
    json_t *o = json_object(), *mask = json_array(), *workers = json_array();
    for (int i = 0; i < r->n_layers; i++)
        json_array_append_new(mask, json_integer(r->layers[i]));
    for (int c = 0; c < m->K; c++)
        json_array_append_new(workers, json_string(m->workers[c]));
    json_object_set_new(o, "file", json_string(path));
    json_object_set_new(o, "format", json_string(MODEL_FORMAT));
    json_object_set_new(o, "version", json_integer(MODEL_VERSION));
    json_object_set_new(o, "valid", json_true());
    json_object_set_new(o, "variant", json_string(sig_variant_name(r->variant)));
    json_object_set_new(o, "layers", json_integer(r->L));
    json_object_set_new(o, "experts", json_integer(r->E));
    json_object_set_new(o, "top_k", m->k ? json_integer(m->k) : json_null());
    json_object_set_new(o, "mask", mask);
    json_object_set_new(o, "layer_select", json_string(m->layer_select));
    json_object_set_new(o, "signature_dim", json_integer((json_int_t)sig_dim(r)));
    json_object_set_new(o, "k", json_integer(m->K));
    json_object_set_new(o, "workers", workers);
    json_object_set_new(o, "tau", json_real(m->tau));
    json_object_set_new(o, "rho", num_or_null(m->rho));
    json_object_set_new(o, "n_star", json_integer(m->n_star));
    json_object_set_new(o, "objective", num_or_null(m->objective));
    if (m->sizes) {
        json_t *sizes = json_array();
        for (int c = 0; c < m->K; c++)
            json_array_append_new(sizes, json_integer(m->sizes[c]));
        json_object_set_new(o, "sizes", sizes);
    } else {
        json_object_set_new(o, "sizes", json_null());
    }
    json_t *near = m->nearest_share ? json_array() : json_null();
    for (int c = 0; near && m->nearest_share && c < m->K; c++)
        json_array_append_new(near, json_real(m->nearest_share[c]));
    json_object_set_new(o, "nearest_share", near);
    json_object_set_new(o, "seed", json_integer((json_int_t)m->seed));
    json_object_set_new(o, "iters", int_or_null(m->iters));
    json_object_set_new(o, "balanced", m->balanced < 0 ? json_null() : json_boolean(m->balanced));
    json_object_set_new(o, "calib_rows", int_or_null(m->calib_rows));
    json_object_set_new(o, "fit_rows", int_or_null(m->fit_rows));
    json_object_set_new(o, "zero_rows", int_or_null(m->zero_rows));
    json_object_set_new(o, "calib_sha256", json_string(m->calib_sha256));
    json_object_set_new(o, "calib_file", json_string(m->calib_file));
    json_object_set_new(o, "calib_split", json_string(m->calib_split));
    json_object_set_new(o, "created", json_string(m->created));
    json_object_set_new(o, "eldr_version", json_string(m->eldr_version));
    json_object_set_new(o, "model_name", json_string(m->model_name));
    json_object_set_new(o, "calibration_format", json_string(m->calib_format));
    json_object_set_new(o, "transform_sha256", json_string(m->transform_sha256));
    json_t *norms = json_object();
    json_object_set_new(norms, "min", json_real(s->norm_min));
    json_object_set_new(norms, "max", json_real(s->norm_max));
    json_object_set_new(norms, "ok", json_true());
    json_object_set_new(o, "centroid_norms", norms);
    json_object_set_new(o, "max_centroid_cos", num_or_null(s->max_cos));
    cli_print_json(o);
}

static void print_text(const char *path, const model_t *m, const centroid_stats *s)
{
    const sig_recipe *r = &m->recipe;
    if (m->snapshot)
        printf("%s: eldrd snapshot (the model it served)\n", path);
    else if (model_file_is_json(path))
        printf("%s: reference fit JSON\n", path);
    else
        printf("%s: eldr-model v%d\n", path, MODEL_VERSION);
    if (m->k)
        printf("  geometry     %d layers x %d experts, top-%d\n", r->L, r->E, m->k);
    else
        printf("  geometry     %d layers x %d experts, top-k unknown (any trace's is accepted)\n",
               r->L, r->E);
    if (m->model_name[0])
        printf("  model        %s\n", m->model_name);
    printf("  recipe       %s%s over %d layer%s (%s):", sig_variant_name(r->variant),
           r->variant == SIG_GATE_PROB ? " (the reference's gate_prob_all)" : "",
           r->n_layers, r->n_layers == 1 ? "" : "s",
           m->layer_select[0] ? m->layer_select : "given");
    for (int i = 0; i < r->n_layers; i++)
        printf("%s%d", i ? "," : " ", r->layers[i]);
    printf("\n  signature    %zu floats%s\n", sig_dim(r), r->idf ? ", idf over the mask" : "");
    printf("  clusters     K = %d, tau = %g\n", m->K, m->tau);
    printf("  workers     ");
    for (int c = 0; c < m->K; c++) {
        printf(" %s", m->workers[c]);
        if (m->sizes)
            printf(" (%lld)", (long long)m->sizes[c]);
    }
    printf("\n  drift base  ");
    for (int c = 0; m->nearest_share && c < m->K; c++)
        printf(" %.3f", m->nearest_share[c]);
    printf("%s\n", m->nearest_share ? " (calibration rows' nearest-centroid shares)"
                                     : " unknown: the model predates it; eldrd compares "
                                       "drift with the sizes");
    if (isfinite(m->rho))
        printf("  rho          %.4f   N* %d\n", m->rho, m->n_star);
    else
        printf("  rho          unknown   N* %d\n", m->n_star);
    if (isfinite(m->objective))
        printf("  objective    %.6f%s", m->objective, m->fit_rows > 0 ? "" : "\n");
    if (isfinite(m->objective) && m->fit_rows > 0)
        printf(" (mean cosine distance %.4f over %lld signatures)\n",
               m->objective / (double)m->fit_rows, (long long)m->fit_rows);
    if (m->calib_rows >= 0 && m->iters < 0) /* a reference fit: rows and algorithm only */
        printf("  calibration  %lld rows%s%s, %s K-means, seed %llu\n", (long long)m->calib_rows,
               m->calib_file[0] ? " of " : "", m->calib_file,
               m->balanced == 0 ? "unbalanced" : "balanced", (unsigned long long)m->seed);
    else if (m->calib_rows >= 0)
        printf("  calibration  %lld rows of %s, %lld all-zero left out, %s K-means, "
               "%d iterations, seed %llu\n",
               (long long)m->calib_rows, m->calib_file[0] ? m->calib_file : "?",
               (long long)(m->zero_rows > 0 ? m->zero_rows : 0),
               m->balanced == 0 ? "unbalanced" : "balanced", m->iters,
               (unsigned long long)m->seed);
    printf("  calib sha256 %s\n", m->calib_sha256[0] ? m->calib_sha256 : "unknown");
    printf("  calib rows   %s\n", m->calib_split[0] ? m->calib_split : "unknown");
    if (m->calib_format[0])
        printf("  calib format %s\n", m->calib_format);
    if (m->transform_sha256[0])
        printf("  transform    sha256 %s (recipe reused from that fit)\n", m->transform_sha256);
    printf("  created      %s by eldr %s\n", m->created[0] ? m->created : "?",
           m->eldr_version[0] ? m->eldr_version : "?");
    printf("  centroids    norms %.6f..%.6f (unit: ok)", s->norm_min, s->norm_max);
    if (s->pair_a >= 0)
        printf(", closest pair %s/%s cos %.4f", m->workers[s->pair_a], m->workers[s->pair_b],
               s->max_cos);
    printf("\n  valid        yes\n");
}

int info_model(const char *path, int json)
{
    char err[ELDR_ERRLEN];
    model_t *m = NULL;
    if (model_load(path, &m, err, sizeof err) < 0)
        return cli_fail("info", "%s", err);
    centroid_stats s;
    centroid_summary(m, &s);
    if (json)
        print_json(path, m, &s);
    else
        print_text(path, m, &s);
    model_free(m);
    return CLI_OK;
}
