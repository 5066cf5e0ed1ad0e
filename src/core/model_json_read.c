/* model_json_read.c - the reference implementation's fit JSON into a
 * model (model.h: model_from_json_text; model_json.h: model_from_json_value,
 * which snapshot.c's model_load_json uses too). It validates as
 * their loader does (k = m = K, the dtype of the variant, no mean-centred
 * or per-layer-normalised signatures, count over every layer when it has
 * no mask, count_idf weights >= 0 and not all 0) and as eldr's HDF5 loader
 * does (model_validate), naming the key; it keeps their provenance keys
 * and reads eldr's own extra keys. Unknown keys are ignored. The mapping
 * is in docs/model-format.md. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "model.h"
#include "model_json.h"

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

/* Every centroid row a list of |S|*e values: checked before the model is
 * allocated, so that a file's geometry cannot ask for more memory than
 * its rows hold (L and e of 10^5 with one short row asked for 7.5 GB). */
static int check_rows(const json_t *a, int n_layers, int E, const char *where, char *err,
                      size_t errlen)
{
    size_t dim = (size_t)n_layers * (size_t)E;
    for (size_t c = 0; c < json_array_size(a); c++) {
        json_t *row = json_array_get(a, c);
        if (!json_is_array(row))
            return eldr_errf(err, errlen, "%s: centroids[%zu] must be a list", where, c);
        if (json_array_size(row) != dim)
            return eldr_errf(err, errlen, "%s: centroids[%zu] has width %zu, expected |S|*e = "
                             "%d*%d = %zu", where, c, json_array_size(row), n_layers, E, dim);
    }
    return 0;
}

static int get_centroids(const json_t *a, model_t *m, const char *where, char *err,
                         size_t errlen)
{
    size_t dim = sig_dim(&m->recipe);
    if (check_rows(a, m->recipe.n_layers, m->recipe.E, where, err, errlen) < 0)
        return -1;
    for (int c = 0; c < m->K; c++) {
        char what[48];
        snprintf(what, sizeof what, "centroids[%d]", c);
        if (get_floats(json_array_get(a, (size_t)c), m->centroids + (size_t)c * dim, dim, where,
                       what, err, errlen) < 0)
            return -1;
    }
    return 0;
}

/* The centroid rows: "centroids", or (older reference fits) "micro_centroids". */
static json_t *centroid_rows(const json_t *o)
{
    json_t *a = json_object_get(o, "centroids");
    return a && !json_is_null(a) ? a : json_object_get(o, "micro_centroids");
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
    if ((v = json_object_get(o, "nearest_share")) && !json_is_null(v)) {
        if (!json_is_array(v) || json_array_size(v) != (size_t)m->K)
            return eldr_errf(err, errlen, "%s: key nearest_share must list %d shares", where,
                             m->K);
        if (!(m->nearest_share = eldr_calloc((size_t)m->K, sizeof *m->nearest_share)))
            return eldr_errf(err, errlen, "%s: out of memory", where);
        for (int i = 0; i < m->K; i++) {
            json_t *s = json_array_get(v, (size_t)i);
            if (!json_is_number(s))
                return eldr_errf(err, errlen, "%s: nearest_share[%d] is not a number", where,
                                 i);
            m->nearest_share[i] = json_number_value(s);
        }
    }
    /* "rho" and "fit_rows" are the names older eldr exports used for
     * fit_peak_rho and n_fit (read in get_provenance, which wins) */
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
    struct { const char *key; char *v; size_t len; } str[] = {
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

/* A string key of at most len - 1 bytes into out; absent or null keeps out. */
static int get_str(const json_t *o, const char *key, char *out, size_t len, const char *where,
                   char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || strlen(json_string_value(v)) >= len)
        return eldr_errf(err, errlen, "%s: key %s must be a string of at most %zu bytes", where,
                         key, len - 1);
    snprintf(out, len, "%s", json_string_value(v));
    return 0;
}

/* The reference's provenance keys (docs/model-format.md has the mapping). */
static int get_provenance(const json_t *o, model_t *m, const char *where, char *err,
                          size_t errlen)
{
    json_t *v;
    if ((v = json_object_get(o, "fit_peak_rho")) && !json_is_null(v)) {
        if (!json_is_number(v))
            return eldr_errf(err, errlen, "%s: key fit_peak_rho must be a number", where);
        m->rho = json_number_value(v);
    }
    if ((v = json_object_get(o, "n_fit")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return eldr_errf(err, errlen, "%s: key n_fit must be an integer >= 0", where);
        m->fit_rows = json_integer_value(v);
    }
    if ((v = json_object_get(o, "seed")) && !json_is_null(v)) {
        if (!json_is_integer(v))
            return eldr_errf(err, errlen, "%s: key seed must be an integer", where);
        m->seed = (uint64_t)json_integer_value(v);
    }
    if ((v = json_object_get(o, "algo")) && !json_is_null(v)) {
        const char *a = json_string_value(v);
        if (!a || (strcmp(a, "kmbal") && strcmp(a, "km")))
            return eldr_errf(err, errlen, "%s: key algo must be \"kmbal\" (balanced) or \"km\"",
                             where);
        m->balanced = !strcmp(a, "kmbal");
    }
    char sel[sizeof m->layer_select] = "";
    if (get_str(o, "layer_select", sel, sizeof sel, where, err, errlen) < 0 ||
        get_str(o, "model", m->model_name, sizeof m->model_name, where, err, errlen) < 0 ||
        get_str(o, "calibration_format", m->calib_format, sizeof m->calib_format, where, err,
                errlen) < 0 ||
        get_str(o, "training_sha256", m->calib_sha256, sizeof m->calib_sha256, where, err,
                errlen) < 0 ||
        get_str(o, "transform_sha256", m->transform_sha256, sizeof m->transform_sha256, where,
                err, errlen) < 0)
        return -1;
    if (sel[0])
        snprintf(m->layer_select, sizeof m->layer_select, "%s", mj_layer_select(sel, 0));
    /* the reference fits on every row of its training file */
    if (json_object_get(o, "training_sha256") && !json_object_get(o, "calib_split"))
        snprintf(m->calib_split, sizeof m->calib_split, "all");
    if (json_object_get(o, "n_fit") && !json_object_get(o, "calib_rows"))
        m->calib_rows = m->fit_rows;
    return 0;
}

/* K from the centroid rows; k (and m) must equal it, except in the files
 * of eldr before 0.3, which wrote the top-k as k (they carry K and
 * eldr_version, and no m). *top_k gets that legacy top-k, else eldr's own
 * top_k key, else 0 (unknown). */
static int get_k(const json_t *o, int E, size_t rows, int *top_k, const char *where, char *err,
                 size_t errlen)
{
    json_t *k = json_object_get(o, "k"), *mk = json_object_get(o, "m"),
           *K = json_object_get(o, "K"), *tk = json_object_get(o, "top_k");
    *top_k = 0;
    if (k && !json_is_integer(k))
        return eldr_errf(err, errlen, "%s: key k must be an integer", where);
    int legacy = k && !mk && json_is_integer(K) && (size_t)json_integer_value(K) == rows &&
                 json_object_get(o, "eldr_version") && !tk;
    if (k && (size_t)json_integer_value(k) != rows) {
        if (!legacy)
            return eldr_errf(err, errlen, "%s: key k = %lld differs from the %zu rows of "
                             "centroids (k is K, the number of centroids, not the top-k)",
                             where, (long long)json_integer_value(k), rows);
        json_int_t v = json_integer_value(k);
        if (v < 1 || v > E)
            return eldr_errf(err, errlen, "%s: key k = %lld (an older eldr export's top-k) is "
                             "out of range [1, %d]", where, (long long)v, E);
        *top_k = (int)v;
    }
    if (mk && (!json_is_integer(mk) || (size_t)json_integer_value(mk) != rows))
        return eldr_errf(err, errlen, "%s: key m differs from the %zu rows of centroids", where,
                         rows);
    if (tk && !json_is_null(tk)) {
        if (!json_is_integer(tk) || json_integer_value(tk) < 0 || json_integer_value(tk) > E)
            return eldr_errf(err, errlen, "%s: key top_k must be an integer in [0, %d]", where, E);
        *top_k = (int)json_integer_value(tk);
    }
    return 0;
}

/* What the reference loader refuses and eldr cannot express either: a
 * mean-centred or per-layer-normalised signature, or a dtype that does
 * not belong to the variant. */
static int check_transform(const json_t *o, sig_variant v, const char *where, char *err,
                           size_t errlen)
{
    static const char *const mean[] = {"sig_mean", "_mean"};
    static const char *const per_layer[] = {"sig_per_layer_norm", "_per_layer_norm"};
    for (int i = 0; i < 2; i++) {
        json_t *x = json_object_get(o, mean[i]);
        if (x && !json_is_null(x))
            return eldr_errf(err, errlen, "%s: key %s: mean-centred signatures are not "
                             "supported (eldr, like the reference, uses one global L2 norm)",
                             where, mean[i]);
        x = json_object_get(o, per_layer[i]);
        if (x && !json_is_null(x) && !json_is_false(x) &&
            !(json_is_integer(x) && json_integer_value(x) == 0))
            return eldr_errf(err, errlen, "%s: key %s: per-layer normalisation is not "
                             "supported (eldr, like the reference, uses one global L2 norm)",
                             where, per_layer[i]);
    }
    json_t *dt = json_object_get(o, "sig_dtype");
    if (dt && !json_is_null(dt) &&
        (!json_is_string(dt) || strcmp(json_string_value(dt), mj_sig_dtype_of(v))))
        return eldr_errf(err, errlen, "%s: key sig_dtype is %s%s%s, expected \"%s\" for variant %s",
                         where, json_is_string(dt) ? "\"" : "",
                         json_is_string(dt) ? json_string_value(dt) : "not a string",
                         json_is_string(dt) ? "\"" : "", mj_sig_dtype_of(v), mj_ref_variant_name(v));
    return 0;
}

/* count_idf weights as the reference requires them: non-negative, not all 0. */
static int check_idf(const model_t *m, const char *where, char *err, size_t errlen)
{
    char msg[ELDR_ERRLEN];
    if (m->recipe.variant != SIG_COUNT_IDF || !m->recipe.idf ||
        mj_idf_check(&m->recipe, msg, sizeof msg) == 0)
        return 0;
    return eldr_errf(err, errlen, "%s: %s", where, msg);
}

static model_t *from_object(const json_t *o, const char *where, char *err, size_t errlen)
{
    int L, E, k, *mask = NULL, n_mask = 0;
    float *idf = NULL;
    model_t *m = NULL;
    if (!json_is_object(o)) {
        eldr_errf(err, errlen, "%s: top level must be a JSON object", where);
        return NULL;
    }
    json_t *var = json_object_get(o, "variant"), *cent = centroid_rows(o);
    if (get_int(o, "L", 1, 1 << 20, &L, where, err, errlen) < 0 ||
        get_int(o, "e", 1, 1 << 20, &E, where, err, errlen) < 0)
        return NULL;
    /* no variant means count, as in the reference loader */
    const char *vname = var ? json_string_value(var) : "count";
    if (!vname || sig_variant_parse(vname) < 0) {
        eldr_errf(err, errlen, "%s: key variant is not a known variant (count, count_idf, "
                  "sqrt_count, binary, gate_prob or gate_prob_all, gate_logit)", where);
        return NULL;
    }
    sig_variant v = (sig_variant)sig_variant_parse(vname);
    if (!json_is_array(cent) || json_array_size(cent) < 1 || json_array_size(cent) > INT32_MAX) {
        eldr_errf(err, errlen, "%s: key centroids %s", where,
                  !cent ? "missing" : "must be a non-empty list of rows");
        return NULL;
    }
    if (get_k(o, E, json_array_size(cent), &k, where, err, errlen) < 0 ||
        check_transform(o, v, where, err, errlen) < 0)
        return NULL;
    if (!json_object_get(o, "layer_mask") && v == SIG_COUNT) {
        /* the reference's count signature: every layer */
        if (!(mask = eldr_calloc((size_t)L, sizeof *mask))) {
            eldr_errf(err, errlen, "%s: out of memory for layer_mask", where);
            return NULL;
        }
        for (n_mask = 0; n_mask < L; n_mask++)
            mask[n_mask] = n_mask;
    } else if (get_mask(o, L, &mask, &n_mask, where, err, errlen) < 0)
        goto out;
    if (n_mask > 0 && check_rows(cent, n_mask, E, where, err, errlen) < 0)
        goto out;
    m = model_new_raw(v, L, E, k, (int)json_array_size(cent), mask, n_mask, NULL, err, errlen);
    /* the mask must be sound before the idf can be sliced by it */
    if (!m || model_validate_mask(m, where, MODEL_NAMES_JSON, err, errlen) < 0 ||
        get_idf(o, m, &idf, where, err, errlen) < 0)
        goto fail;
    m->recipe.idf = idf;
    /* a given mask keeps all its layers */
    m->n_star = m->recipe.n_layers;
    if (get_centroids(cent, m, where, err, errlen) < 0 || get_extras(o, m, where, err, errlen) < 0 ||
        get_provenance(o, m, where, err, errlen) < 0 || check_idf(m, where, err, errlen) < 0 ||
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

int model_from_json_value(const json_t *o, const char *where, model_t **out, char *err,
                          size_t errlen)
{
    *out = from_object(o, where, err, errlen);
    return *out ? 0 : -1;
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
