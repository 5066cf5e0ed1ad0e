/* model_json.c - the reference implementation's fit JSON (the centroid
 * file their fitter writes and their loader reads): export, and what the
 * reader (model_json_read.c) shares, in model_json.h. The key mapping is
 * in docs/model-format.md.
 *
 * Their keys: L, e, k and m (both K, the number of centroids: the file
 * has no top-k), variant (count, count_idf, gate_prob_all), layer_mask,
 * sig_idf (count_idf only), sig_dtype ("<i2" counts, "<f4" gates),
 * centroids, and provenance (model, algo, n_fit, layer_select,
 * fit_peak_rho, seed, training_sha256, calibration_format,
 * transform_sha256). eldr adds its own keys (top_k, K, tau, workers, ...),
 * which their loader ignores. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomicfile.h"
#include "err.h"
#include "model.h"
#include "model_json.h"

/* Floats survive a round trip with 9 significant digits. */
#define JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

/* eldr's layer_select values and the reference's names for them */
static const struct { const char *eldr, *ref; } layer_select_names[] = {
    {"auto", "forward_greedy"}, {"all", "all"}, {"list", "list"},
};

/* ---- export ---- */

static json_t *float_array(const float *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_real(v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* NaN (unknown) becomes null: JSON has no NaN. */
static json_t *real_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

const char *mj_ref_variant_name(sig_variant v)
{
    return v == SIG_GATE_PROB ? SIG_GATE_PROB_ALL : sig_variant_name(v);
}

const char *mj_sig_dtype_of(sig_variant v)
{
    return sig_variant_uses_gate(v) ? "<f4" : "<i2";
}

const char *mj_layer_select(const char *name, int to_ref)
{
    for (size_t i = 0; i < sizeof layer_select_names / sizeof layer_select_names[0]; i++)
        if (!strcmp(name, to_ref ? layer_select_names[i].eldr : layer_select_names[i].ref))
            return to_ref ? layer_select_names[i].ref : layer_select_names[i].eldr;
    return name;
}

int mj_idf_check(const sig_recipe *r, char *msg, size_t len)
{
    int any = 0;
    for (size_t i = 0; r->idf && i < sig_dim(r); i++) {
        if (r->idf[i] < 0)
            return eldr_errf(msg, len, "sig_idf[%zu] = %g is negative", i, r->idf[i]);
        any |= r->idf[i] > 0;
    }
    return any ? 0 : eldr_errf(msg, len, "sig_idf is all zero");
}

int model_reference_expressible(const model_t *m, char *err, size_t errlen)
{
    const sig_recipe *r = &m->recipe;
    const char *name = sig_variant_name(r->variant);
    switch (r->variant) {
    case SIG_COUNT:
        if (r->n_layers != r->L)
            return eldr_errf(err, errlen, "variant count over %d of %d layers: the reference "
                             "fit JSON's count uses every layer (fit with --layers all, or "
                             "use count_idf)", r->n_layers, r->L);
        return 0;
    case SIG_COUNT_IDF: {
        char msg[ELDR_ERRLEN];
        if (mj_idf_check(r, msg, sizeof msg) < 0)
            return eldr_errf(err, errlen, "variant count_idf: %s, which the reference fit JSON "
                             "refuses", msg);
        return 0;
    }
    case SIG_GATE_PROB:
        return 0;
    default:
        return eldr_errf(err, errlen, "variant %s: the reference fit JSON cannot express it "
                         "(it knows count over all layers, count_idf and gate_prob_all)", name);
    }
}

static int set_str_if(json_t *o, const char *key, const char *v)
{
    return v[0] ? json_object_set_new(o, key, json_string(v)) : 0;
}

static int set_reference_keys(json_t *o, const model_t *m)
{
    const sig_recipe *r = &m->recipe;
    size_t dim = sig_dim(r);
    json_t *mask = json_array(), *cent = json_array();
    int bad = !mask || !cent;
    for (int i = 0; !bad && i < r->n_layers; i++)
        bad = json_array_append_new(mask, json_integer(r->layers[i])) < 0;
    for (int c = 0; !bad && c < m->K; c++)
        bad = json_array_append_new(cent, float_array(m->centroids + (size_t)c * dim, dim)) < 0;
    /* k and m are both K; the top-k goes to eldr's own key top_k */
    bad = bad || json_object_set_new(o, "L", json_integer(r->L)) < 0 ||
          json_object_set_new(o, "e", json_integer(r->E)) < 0 ||
          json_object_set_new(o, "k", json_integer(m->K)) < 0 ||
          json_object_set_new(o, "m", json_integer(m->K)) < 0 ||
          json_object_set_new(o, "variant", json_string(mj_ref_variant_name(r->variant))) < 0 ||
          json_object_set_new(o, "layer_mask", mask) < 0 ||
          json_object_set_new(o, "sig_dtype", json_string(mj_sig_dtype_of(r->variant))) < 0 ||
          (r->idf && json_object_set_new(o, "sig_idf", float_array(r->idf, dim)) < 0) ||
          json_object_set_new(o, "centroids", cent) < 0 ||
          json_object_set_new(o, "seed", json_integer((json_int_t)m->seed)) < 0;
    /* provenance under the reference's names, when known */
    const char *sel = mj_layer_select(m->layer_select, 1);
    bad = bad || set_str_if(o, "model", m->model_name) < 0 ||
          (m->balanced >= 0 &&
           json_object_set_new(o, "algo", json_string(m->balanced ? "kmbal" : "km")) < 0) ||
          (m->fit_rows >= 0 && json_object_set_new(o, "n_fit", json_integer(m->fit_rows)) < 0) ||
          set_str_if(o, "layer_select", sel) < 0 ||
          (isfinite(m->rho) && json_object_set_new(o, "fit_peak_rho", json_real(m->rho)) < 0) ||
          set_str_if(o, "training_sha256", m->calib_sha256) < 0 ||
          set_str_if(o, "calibration_format", m->calib_format) < 0 ||
          set_str_if(o, "transform_sha256", m->transform_sha256) < 0;
    return bad ? -1 : 0;
}

static int set_extra_keys(json_t *o, const model_t *m)
{
    json_t *workers = json_array(), *sizes = m->sizes ? json_array() : json_null(),
           *near = m->nearest_share ? json_array() : json_null();
    int bad = !workers || !sizes || !near;
    for (int i = 0; !bad && i < m->K; i++)
        bad = json_array_append_new(workers, json_string(m->workers[i])) < 0 ||
              (m->sizes && json_array_append_new(sizes, json_integer(m->sizes[i])) < 0) ||
              (m->nearest_share &&
               json_array_append_new(near, json_real(m->nearest_share[i])) < 0);
    if (bad) {
        json_decref(workers);
        json_decref(sizes);
        json_decref(near);
        return -1;
    }
    bad = bad || (m->k > 0 && json_object_set_new(o, "top_k", json_integer(m->k)) < 0) ||
          json_object_set_new(o, "K", json_integer(m->K)) < 0 ||
          json_object_set_new(o, "tau", json_real(m->tau)) < 0 ||
          json_object_set_new(o, "workers", workers) < 0 ||
          json_object_set_new(o, "sizes", sizes) < 0 ||
          json_object_set_new(o, "nearest_share", near) < 0 ||
          json_object_set_new(o, "n_star", json_integer(m->n_star)) < 0 ||
          json_object_set_new(o, "objective", real_or_null(m->objective)) < 0 ||
          json_object_set_new(o, "calib_rows", json_integer(m->calib_rows)) < 0 ||
          json_object_set_new(o, "zero_rows", json_integer(m->zero_rows)) < 0 ||
          json_object_set_new(o, "iters", json_integer(m->iters)) < 0 ||
          json_object_set_new(o, "calib_file", json_string(m->calib_file)) < 0 ||
          json_object_set_new(o, "calib_split", json_string(m->calib_split)) < 0 ||
          json_object_set_new(o, "created", json_string(m->created)) < 0 ||
          json_object_set_new(o, "eldr_version", json_string(m->eldr_version)) < 0;
    return bad ? -1 : 0;
}

int model_to_json_text(const model_t *m, char **text, char *err, size_t errlen)
{
    *text = NULL;
    if (model_validate(m, "model", MODEL_NAMES_JSON, err, errlen) < 0)
        return -1;
    json_t *o = json_object();
    if (!o || set_reference_keys(o, m) < 0 || set_extra_keys(o, m) < 0 ||
        !(*text = json_dumps(o, JSON_FLAGS))) {
        json_decref(o);
        return eldr_errf(err, errlen, "model: out of memory (or invalid UTF-8 in a worker "
                         "name) while encoding JSON");
    }
    json_decref(o);
    return 0;
}

int model_save_json_any(const model_t *m, const char *path, char *err, size_t errlen)
{
    char *text;
    if (model_validate(m, path, MODEL_NAMES_JSON, err, errlen) < 0 ||
        model_to_json_text(m, &text, err, errlen) < 0)
        return -1;
    int rc = atomic_write_text(path, text, 1, err, errlen);
    free(text);
    return rc;
}

int model_save_json(const model_t *m, const char *path, char *err, size_t errlen)
{
    char msg[ELDR_ERRLEN];
    if (model_validate(m, path, MODEL_NAMES_JSON, err, errlen) < 0)
        return -1;
    if (model_reference_expressible(m, msg, sizeof msg) < 0)
        return eldr_errf(err, errlen, "%s: %s", path, msg);
    return model_save_json_any(m, path, err, errlen);
}

int model_file_is_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    int c;
    while ((c = fgetc(f)) == ' ' || c == '\t' || c == '\n' || c == '\r')
        ;
    fclose(f);
    return c == '{';
}
