/* model_json.c - the reference implementation's centroid JSON: import and
 * export (model.h; key mapping in docs/model-format.md).
 *
 * Reference keys: L (layers), e (experts), k (top-k), variant, layer_mask
 * (0-based layer list, or a 0/1 list of length L), sig_idf (idf over the
 * mask, or the full L x E idf, or null) and centroids (K rows of |S|*e).
 * Everything else eldr writes (K, tau, workers, provenance) is an extra key
 * the reference ignores; on import unknown keys are ignored too. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomicfile.h"
#include "err.h"
#include "model.h"

/* Floats survive a round trip with 9 significant digits. */
#define JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

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
    bad = bad || json_object_set_new(o, "L", json_integer(r->L)) < 0 ||
          json_object_set_new(o, "e", json_integer(r->E)) < 0 ||
          json_object_set_new(o, "k", json_integer(m->k)) < 0 ||
          json_object_set_new(o, "variant", json_string(sig_variant_name(r->variant))) < 0 ||
          json_object_set_new(o, "layer_mask", mask) < 0 ||
          json_object_set_new(o, "sig_idf", r->idf ? float_array(r->idf, dim) : json_null()) < 0 ||
          json_object_set_new(o, "centroids", cent) < 0;
    return bad ? -1 : 0;
}

static int set_extra_keys(json_t *o, const model_t *m)
{
    json_t *workers = json_array(), *sizes = m->sizes ? json_array() : json_null();
    int bad = !workers || !sizes;
    for (int i = 0; !bad && i < m->K; i++)
        bad = json_array_append_new(workers, json_string(m->workers[i])) < 0 ||
              (m->sizes && json_array_append_new(sizes, json_integer(m->sizes[i])) < 0);
    bad = bad || json_object_set_new(o, "K", json_integer(m->K)) < 0 ||
          json_object_set_new(o, "tau", json_real(m->tau)) < 0 ||
          json_object_set_new(o, "workers", workers) < 0 ||
          json_object_set_new(o, "sizes", sizes) < 0 ||
          json_object_set_new(o, "seed", json_integer((json_int_t)m->seed)) < 0 ||
          json_object_set_new(o, "rho", real_or_null(m->rho)) < 0 ||
          json_object_set_new(o, "n_star", json_integer(m->n_star)) < 0 ||
          json_object_set_new(o, "objective", real_or_null(m->objective)) < 0 ||
          json_object_set_new(o, "calib_rows", json_integer(m->calib_rows)) < 0 ||
          json_object_set_new(o, "fit_rows", json_integer(m->fit_rows)) < 0 ||
          json_object_set_new(o, "zero_rows", json_integer(m->zero_rows)) < 0 ||
          json_object_set_new(o, "iters", json_integer(m->iters)) < 0 ||
          json_object_set_new(o, "balanced", json_integer(m->balanced)) < 0 ||
          json_object_set_new(o, "layer_select", json_string(m->layer_select)) < 0 ||
          json_object_set_new(o, "calib_sha256", json_string(m->calib_sha256)) < 0 ||
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

int model_save_json(const model_t *m, const char *path, char *err, size_t errlen)
{
    char *text;
    if (model_validate(m, path, MODEL_NAMES_JSON, err, errlen) < 0 ||
        model_to_json_text(m, &text, err, errlen) < 0)
        return -1;
    int rc = atomic_write_text(path, text, 1, err, errlen);
    free(text);
    return rc;
}

/* ---- import ---- */

static int get_int(const json_t *o, const char *key, int lo, int hi, int *out,
                   const char *where, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return eldr_errf(err, errlen, "%s: key %s missing", where, key);
    if (!json_is_integer(v))
        return eldr_errf(err, errlen, "%s: key %s must be an integer", where, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return eldr_errf(err, errlen, "%s: key %s = %lld is out of range [%d, %d]", where,
                         key, (long long)x, lo, hi);
    *out = (int)x;
    return 0;
}

/* Read n numbers of a JSON array (the caller checked its length). */
static int get_floats(const json_t *a, float *out, size_t n, const char *where,
                      const char *what, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_number(x))
            return eldr_errf(err, errlen, "%s: %s[%zu] is not a number", where, what, i);
        out[i] = (float)json_number_value(x);
    }
    return 0;
}

/* layer_mask: booleans, a 0/1 list of length L, or 0-based layer ids.
 * A list that reads as ascending layer ids is taken as such (this only
 * decides [0] for L = 1 and [0, 1] for L = 2). */
static int get_mask(const json_t *o, int L, int **mask, int *n, const char *where, char *err,
                    size_t errlen)
{
    json_t *a = json_object_get(o, "layer_mask");
    if (!json_is_array(a))
        return eldr_errf(err, errlen, "%s: key layer_mask %s", where,
                         a ? "must be a list" : "missing");
    size_t len = json_array_size(a);
    int all_bool = len > 0, all_01 = len == (size_t)L, ascending = 1;
    for (size_t i = 0; i < len; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_boolean(x))
            all_bool = 0;
        if (!json_is_integer(x) && !json_is_boolean(x))
            return eldr_errf(err, errlen, "%s: layer_mask[%zu] is not an integer", where, i);
        json_int_t v = json_is_integer(x) ? json_integer_value(x) : -1;
        if (v != 0 && v != 1)
            all_01 = 0;
        if (v < 0 || v >= L || (i && v <= json_integer_value(json_array_get(a, i - 1))))
            ascending = 0;
    }
    if (!all_bool)
        for (size_t i = 0; i < len; i++)
            if (json_is_boolean(json_array_get(a, i)))
                return eldr_errf(err, errlen, "%s: layer_mask[%zu] is a boolean in a list "
                                 "of layer numbers", where, i);
    int as_flags = all_bool || (all_01 && len == (size_t)L && !ascending);
    if (all_bool && len != (size_t)L)
        return eldr_errf(err, errlen, "%s: layer_mask has %zu flags, expected L = %d", where,
                         len, L);
    if (!(*mask = eldr_calloc(len, sizeof(int))))
        return eldr_errf(err, errlen, "%s: out of memory for layer_mask", where);
    *n = 0;
    for (size_t i = 0; i < len; i++) {
        json_t *x = json_array_get(a, i);
        if (as_flags) {
            if (json_is_true(x) || (json_is_integer(x) && json_integer_value(x) == 1))
                (*mask)[(*n)++] = (int)i;
        } else {
            json_int_t v = json_integer_value(x);
            if (v < INT32_MIN || v > INT32_MAX)
                return eldr_errf(err, errlen, "%s: layer_mask[%zu] = %lld is out of range "
                                 "[0, %d)", where, i, (long long)v, L);
            (*mask)[(*n)++] = (int)v;
        }
    }
    return 0;
}

/* Flatten a list (flat, or nested one level) of numbers into out, which
 * holds cap floats; *n gets the count, *rows the outer length. */
static int flatten(const json_t *a, float *out, size_t cap, size_t *n, size_t *rows,
                   const char *where, const char *key, char *err, size_t errlen)
{
    *n = 0;
    *rows = json_array_size(a);
    for (size_t i = 0; i < *rows; i++) {
        json_t *x = json_array_get(a, i);
        size_t m = json_is_array(x) ? json_array_size(x) : 1;
        for (size_t j = 0; j < m; j++) {
            json_t *y = json_is_array(x) ? json_array_get(x, j) : x;
            if (!json_is_number(y))
                return eldr_errf(err, errlen, "%s: %s[%zu]%s is not a number", where, key, i,
                                 json_is_array(x) ? "[..]" : "");
            if (*n < cap)
                out[*n] = (float)json_number_value(y);
            (*n)++;
        }
    }
    return 0;
}

/* sig_idf: null, the idf over the mask (|S|*E, flat or |S| rows), or the
 * full L x E idf (flat or L rows), which is sliced to the mask. */
static int get_idf(const json_t *o, const model_t *m, float **idf, const char *where,
                   char *err, size_t errlen)
{
    const sig_recipe *r = &m->recipe;
    json_t *a = json_object_get(o, "sig_idf");
    *idf = NULL;
    if (!a || json_is_null(a))
        return 0;
    if (!json_is_array(a))
        return eldr_errf(err, errlen, "%s: key sig_idf must be a list or null", where);
    size_t full = (size_t)r->L * (size_t)r->E, dim = sig_dim(r), n, rows;
    float *buf = eldr_calloc(full > dim ? full : dim, sizeof(float));
    if (!buf)
        return eldr_errf(err, errlen, "%s: out of memory for sig_idf", where);
    if (flatten(a, buf, full > dim ? full : dim, &n, &rows, where, "sig_idf", err, errlen) < 0) {
        free(buf);
        return -1;
    }
    if (n == full && n != dim) {
        /* the full L x E idf: keep the masked layers (mask checked already) */
        for (int i = 0; i < r->n_layers; i++)
            memmove(buf + (size_t)i * r->E, buf + (size_t)r->layers[i] * r->E,
                    (size_t)r->E * sizeof(float));
    } else if (n != dim) {
        free(buf);
        return eldr_errf(err, errlen, "%s: sig_idf has %zu values, expected |S|*e = %d*%d = "
                         "%zu (or the full L*e = %zu)", where, n, r->n_layers, r->E, dim, full);
    }
    *idf = buf;
    return 0;
}

static int get_centroids(const json_t *o, model_t *m, const char *where, char *err,
                         size_t errlen)
{
    json_t *a = json_object_get(o, "centroids");
    size_t dim = sig_dim(&m->recipe);
    for (int c = 0; c < m->K; c++) {
        json_t *row = json_array_get(a, (size_t)c);
        char what[48];
        snprintf(what, sizeof what, "centroids[%d]", c);
        if (!json_is_array(row))
            return eldr_errf(err, errlen, "%s: %s must be a list", where, what);
        if (json_array_size(row) != dim)
            return eldr_errf(err, errlen, "%s: %s has width %zu, expected |S|*e = %d*%d = %zu",
                             where, what, json_array_size(row), m->recipe.n_layers,
                             m->recipe.E, dim);
        if (get_floats(row, m->centroids + (size_t)c * dim, dim, where, what, err, errlen) < 0)
            return -1;
    }
    return 0;
}

/* Optional extras; a wrong type is an error, absence keeps the default. */
static int get_extras(const json_t *o, model_t *m, const char *where, char *err, size_t errlen)
{
    json_t *v;
    if ((v = json_object_get(o, "K")) && (!json_is_integer(v) || json_integer_value(v) != m->K))
        return eldr_errf(err, errlen, "%s: key K does not match the %d rows of centroids",
                         where, m->K);
    if ((v = json_object_get(o, "tau")) && !json_is_null(v)) {
        if (!json_is_number(v))
            return eldr_errf(err, errlen, "%s: key tau must be a number", where);
        m->tau = json_number_value(v);
    }
    if ((v = json_object_get(o, "workers")) && !json_is_null(v)) {
        if (!json_is_array(v) || json_array_size(v) != (size_t)m->K)
            return eldr_errf(err, errlen, "%s: key workers must list %d names", where, m->K);
        for (int i = 0; i < m->K; i++) {
            json_t *s = json_array_get(v, (size_t)i);
            if (!json_is_string(s))
                return eldr_errf(err, errlen, "%s: workers[%d] is not a string", where, i);
            free(m->workers[i]);
            if (!(m->workers[i] = strdup(json_string_value(s))))
                return eldr_errf(err, errlen, "%s: out of memory", where);
        }
    }
    if ((v = json_object_get(o, "sizes")) && !json_is_null(v)) {
        if (!json_is_array(v) || json_array_size(v) != (size_t)m->K)
            return eldr_errf(err, errlen, "%s: key sizes must list %d counts", where, m->K);
        if (!(m->sizes = eldr_calloc((size_t)m->K, sizeof *m->sizes)))
            return eldr_errf(err, errlen, "%s: out of memory", where);
        for (int i = 0; i < m->K; i++) {
            json_t *s = json_array_get(v, (size_t)i);
            if (!json_is_integer(s))
                return eldr_errf(err, errlen, "%s: sizes[%d] is not an integer", where, i);
            m->sizes[i] = json_integer_value(s);
        }
    }
    struct { const char *key; double *v; } dbl[] = {{"rho", &m->rho},
                                                     {"objective", &m->objective}};
    for (size_t i = 0; i < 2; i++)
        if ((v = json_object_get(o, dbl[i].key)) && json_is_number(v))
            *dbl[i].v = json_number_value(v);
    struct { const char *key; int64_t *v; } i64[] = {
        {"calib_rows", &m->calib_rows}, {"fit_rows", &m->fit_rows}, {"zero_rows", &m->zero_rows}};
    for (size_t i = 0; i < 3; i++)
        if ((v = json_object_get(o, i64[i].key)) && json_is_integer(v))
            *i64[i].v = json_integer_value(v);
    struct { const char *key; int *v; } i32[] = {
        {"n_star", &m->n_star}, {"iters", &m->iters}, {"balanced", &m->balanced}};
    for (size_t i = 0; i < 3; i++)
        if ((v = json_object_get(o, i32[i].key)) && json_is_integer(v) &&
            json_integer_value(v) >= -1 && json_integer_value(v) <= INT32_MAX)
            *i32[i].v = (int)json_integer_value(v);
    if ((v = json_object_get(o, "seed")) && json_is_integer(v))
        m->seed = (uint64_t)json_integer_value(v);
    struct { const char *key; char *v; size_t len; } str[] = {
        {"layer_select", m->layer_select, sizeof m->layer_select},
        {"calib_sha256", m->calib_sha256, sizeof m->calib_sha256},
        {"calib_file", m->calib_file, sizeof m->calib_file},
        {"calib_split", m->calib_split, sizeof m->calib_split},
        {"created", m->created, sizeof m->created},
        {"eldr_version", m->eldr_version, sizeof m->eldr_version}};
    for (size_t i = 0; i < sizeof str / sizeof str[0]; i++) {
        /* a model made elsewhere has no eldr provenance unless it says so */
        if (!strcmp(str[i].key, "created") || !strcmp(str[i].key, "eldr_version"))
            str[i].v[0] = '\0';
        if ((v = json_object_get(o, str[i].key)) && json_is_string(v))
            snprintf(str[i].v, str[i].len, "%s", json_string_value(v));
    }
    return 0;
}

static model_t *from_object(const json_t *o, const char *where, char *err, size_t errlen)
{
    int L, E, k, *mask = NULL, n_mask = 0;
    float *idf = NULL;
    model_t *m = NULL;
    json_t *var = json_object_get(o, "variant"), *cent = json_object_get(o, "centroids");
    if (!json_is_object(o)) {
        eldr_errf(err, errlen, "%s: top level must be a JSON object", where);
        return NULL;
    }
    if (get_int(o, "L", 1, 1 << 20, &L, where, err, errlen) < 0 ||
        get_int(o, "e", 1, 1 << 20, &E, where, err, errlen) < 0 ||
        get_int(o, "k", 1, E, &k, where, err, errlen) < 0)
        return NULL;
    if (!json_is_string(var) || sig_variant_parse(json_string_value(var)) < 0) {
        eldr_errf(err, errlen, "%s: key variant %s", where,
                  !var ? "missing" : "is not a known variant (count, count_idf, sqrt_count, "
                                     "binary, gate_prob, gate_logit)");
        return NULL;
    }
    if (!json_is_array(cent) || json_array_size(cent) < 1 || json_array_size(cent) > INT32_MAX) {
        eldr_errf(err, errlen, "%s: key centroids %s", where,
                  !cent ? "missing" : "must be a non-empty list of rows");
        return NULL;
    }
    if (get_mask(o, L, &mask, &n_mask, where, err, errlen) < 0)
        goto out;
    sig_variant v = (sig_variant)sig_variant_parse(json_string_value(var));
    m = model_new_raw(v, L, E, k, (int)json_array_size(cent), mask, n_mask, NULL, err, errlen);
    /* the mask must be sound before the idf can be sliced by it */
    if (!m || model_validate_mask(m, where, MODEL_NAMES_JSON, err, errlen) < 0 ||
        get_idf(o, m, &idf, where, err, errlen) < 0)
        goto fail;
    m->recipe.idf = idf;
    if (get_centroids(o, m, where, err, errlen) < 0 || get_extras(o, m, where, err, errlen) < 0 ||
        model_validate(m, where, MODEL_NAMES_JSON, err, errlen) < 0)
        goto fail;
    goto out;
fail:
    model_free(m);
    m = NULL;
out:
    free(mask);
    return m;
}

int model_from_json_text(const char *text, const char *where, model_t **out, char *err,
                         size_t errlen)
{
    json_error_t je;
    *out = NULL;
    json_t *o = json_loads(text, 0, &je);
    if (!o)
        return eldr_errf(err, errlen, "%s: line %d column %d: %s", where, je.line, je.column,
                         je.text);
    *out = from_object(o, where, err, errlen);
    json_decref(o);
    return *out ? 0 : -1;
}

int model_load_json(const char *path, model_t **out, char *err, size_t errlen)
{
    json_error_t je;
    *out = NULL;
    json_t *o = json_load_file(path, 0, &je);
    if (!o) {
        if (je.line < 1)
            return eldr_errf(err, errlen, "%s: %s", path, je.text);
        return eldr_errf(err, errlen, "%s: line %d column %d: %s", path, je.line, je.column,
                         je.text);
    }
    *out = from_object(o, path, err, errlen);
    json_decref(o);
    return *out ? 0 : -1;
}
