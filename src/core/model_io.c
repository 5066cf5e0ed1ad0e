/* model_io.c - the eldr-model v1 HDF5 file: save and load (model.h,
 * docs/model-format.md). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "h5util.h"
#include "model.h"

/* ---- save ---- */

static int save_attrs(hid_t f, const model_t *m, const char *path, char *err, size_t errlen)
{
    const sig_recipe *r = &m->recipe;
    struct { const char *name; int64_t v; } ints[] = {
        {"version", MODEL_VERSION}, {"layers", r->L}, {"experts", r->E},
        {"top_k", m->k}, {"clusters", m->K}, {"signature_dim", (int64_t)sig_dim(r)},
        /* the seed is a uint64 stored bit for bit in an int64 attribute */
        {"seed", (int64_t)m->seed}, {"n_star", m->n_star},
        {"calib_rows", m->calib_rows}, {"fit_rows", m->fit_rows},
        {"zero_rows", m->zero_rows}, {"iters", m->iters}, {"balanced", m->balanced},
    };
    struct { const char *name; double v; } dbls[] = {
        {"tau", m->tau}, {"rho", m->rho}, {"objective", m->objective},
    };
    struct { const char *name; const char *v; } strs[] = {
        {"format", MODEL_FORMAT}, {"variant", sig_variant_name(r->variant)},
        {"layer_select", m->layer_select}, {"calib_sha256", m->calib_sha256},
        {"calib_file", m->calib_file}, {"calib_split", m->calib_split},
        {"created", m->created},
        {"eldr_version", m->eldr_version}, {"model_name", m->model_name},
        {"calibration_format", m->calib_format}, {"transform_sha256", m->transform_sha256},
    };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (h5u_write_str_attr(f, strs[i].name, strs[i].v, path, err, errlen) < 0)
            return -1;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (h5u_write_int_attr(f, ints[i].name, ints[i].v, path, err, errlen) < 0)
            return -1;
    for (size_t i = 0; i < sizeof dbls / sizeof dbls[0]; i++)
        if (h5u_write_double_attr(f, dbls[i].name, dbls[i].v, path, err, errlen) < 0)
            return -1;
    return 0;
}

static int save_data(hid_t f, const model_t *m, const char *path, char *err, size_t errlen)
{
    const sig_recipe *r = &m->recipe;
    hsize_t cdims[2] = {(hsize_t)m->K, (hsize_t)sig_dim(r)};
    hsize_t mdims[1] = {(hsize_t)r->n_layers};
    hsize_t idims[2] = {(hsize_t)r->n_layers, (hsize_t)r->E};
    hsize_t kdims[1] = {(hsize_t)m->K};
    if (h5u_write(f, "centroids", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, 2, cdims, 0,
                  m->centroids, path, err, errlen) < 0 ||
        h5u_write(f, "layer_mask", H5T_NATIVE_INT, H5T_STD_I32LE, 1, mdims, 0, r->layers,
                  path, err, errlen) < 0 ||
        (r->idf && h5u_write(f, "idf", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, 2, idims, 0, r->idf,
                             path, err, errlen) < 0) ||
        h5u_write_strings(f, "workers", (hsize_t)m->K, (const char *const *)m->workers, path,
                          err, errlen) < 0 ||
        (m->sizes && h5u_write(f, "sizes", H5T_NATIVE_INT64, H5T_STD_I64LE, 1, kdims, 0,
                               m->sizes, path, err, errlen) < 0) ||
        (m->nearest_share && h5u_write(f, "nearest_share", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE,
                                       1, kdims, 0, m->nearest_share, path, err, errlen) < 0))
        return -1;
    return 0;
}

int model_save(const model_t *m, const char *path, char *err, size_t errlen)
{
    if (model_validate(m, path, MODEL_NAMES_H5, err, errlen) < 0)
        return -1;
    h5u_silence();
    h5u_save_t s;
    if (h5u_save_begin(&s, path, err, errlen) < 0)
        return -1;
    if (save_attrs(s.file, m, path, err, errlen) < 0 ||
        save_data(s.file, m, path, err, errlen) < 0) {
        h5u_save_abort(&s);
        return -1;
    }
    return h5u_save_commit(&s, err, errlen);
}

/* ---- load ---- */

/* The header attributes a model needs before its datasets can be read. */
typedef struct head {
    int L, E, k;
    sig_variant variant;
    double tau;
} head_t;

static int read_int_in(hid_t f, const char *name, long long lo, long long hi, int *out,
                       const char *path, char *err, size_t errlen)
{
    int64_t v;
    if (h5u_read_int_attr(f, name, &v, path, err, errlen) < 0)
        return -1;
    if (v < lo || v > hi)
        return eldr_errf(err, errlen, "%s: attribute %s = %lld is out of range [%lld, %lld]",
                         path, name, (long long)v, lo, hi);
    *out = (int)v;
    return 0;
}

static int read_head(hid_t f, head_t *h, const char *path, char *err, size_t errlen)
{
    char variant[64];
    if (h5u_check_format(f, MODEL_FORMAT, MODEL_VERSION, path, err, errlen) < 0 ||
        read_int_in(f, "layers", 1, INT_MAX, &h->L, path, err, errlen) < 0 ||
        read_int_in(f, "experts", 1, INT_MAX, &h->E, path, err, errlen) < 0 ||
        read_int_in(f, "top_k", 0, h->E, &h->k, path, err, errlen) < 0 ||
        h5u_read_str_attr(f, "variant", variant, sizeof variant, path, err, errlen) < 0 ||
        h5u_read_double_attr(f, "tau", &h->tau, path, err, errlen) < 0)
        return -1;
    int v = sig_variant_parse(variant);
    if (v < 0)
        return eldr_errf(err, errlen, "%s: attribute variant '%s' is not a known variant",
                         path, variant);
    h->variant = (sig_variant)v;
    return 0;
}

/* Optional provenance: absent attributes leave the defaults (unknown). */
static int read_optional(hid_t f, model_t *m, const char *path, char *err, size_t errlen)
{
    struct { const char *name; int64_t *v; } i64[] = {
        {"calib_rows", &m->calib_rows}, {"fit_rows", &m->fit_rows},
        {"zero_rows", &m->zero_rows},
    };
    struct { const char *name; int *v; } i32[] = {
        {"n_star", &m->n_star}, {"iters", &m->iters}, {"balanced", &m->balanced},
    };
    struct { const char *name; double *v; } dbl[] = {
        {"rho", &m->rho}, {"objective", &m->objective},
    };
    struct { const char *name; char *v; size_t len; } str[] = {
        {"layer_select", m->layer_select, sizeof m->layer_select},
        {"calib_sha256", m->calib_sha256, sizeof m->calib_sha256},
        {"calib_file", m->calib_file, sizeof m->calib_file},
        {"calib_split", m->calib_split, sizeof m->calib_split},
        {"created", m->created, sizeof m->created},
        {"eldr_version", m->eldr_version, sizeof m->eldr_version},
        {"model_name", m->model_name, sizeof m->model_name},
        {"calibration_format", m->calib_format, sizeof m->calib_format},
        {"transform_sha256", m->transform_sha256, sizeof m->transform_sha256},
    };
    int64_t v;
    for (size_t i = 0; i < sizeof i64 / sizeof i64[0]; i++)
        if (h5u_has_attr(f, i64[i].name) &&
            h5u_read_int_attr(f, i64[i].name, i64[i].v, path, err, errlen) < 0)
            return -1;
    for (size_t i = 0; i < sizeof i32 / sizeof i32[0]; i++)
        if (h5u_has_attr(f, i32[i].name) &&
            read_int_in(f, i32[i].name, -1, INT_MAX, i32[i].v, path, err, errlen) < 0)
            return -1;
    for (size_t i = 0; i < sizeof dbl / sizeof dbl[0]; i++)
        if (h5u_has_attr(f, dbl[i].name) &&
            h5u_read_double_attr(f, dbl[i].name, dbl[i].v, path, err, errlen) < 0)
            return -1;
    for (size_t i = 0; i < sizeof str / sizeof str[0]; i++) {
        str[i].v[0] = '\0';
        if (h5u_has_attr(f, str[i].name) &&
            h5u_read_str_attr(f, str[i].name, str[i].v, str[i].len, path, err, errlen) < 0)
            return -1;
    }
    if (h5u_has_attr(f, "seed")) {
        if (h5u_read_int_attr(f, "seed", &v, path, err, errlen) < 0)
            return -1;
        m->seed = (uint64_t)v;
    }
    return 0;
}

/* layer_mask [S] int32 and idf ([S][E] or [S*E]) as the file has them. */
static int read_recipe_arrays(hid_t f, const head_t *h, int **mask, int *n_mask, float **idf,
                              const char *path, char *err, size_t errlen)
{
    int rank;
    hsize_t dims[H5U_MAXRANK];
    if (h5u_shape(f, "layer_mask", &rank, dims, path, err, errlen) < 0)
        return -1;
    if (rank != 1 || dims[0] > (hsize_t)h->L * 4 + 1024)
        return eldr_errf(err, errlen, "%s: dataset layer_mask must be a list of at most %d "
                         "layers", path, h->L);
    *n_mask = (int)dims[0];
    if (!(*mask = eldr_calloc(dims[0], sizeof(int))))
        return eldr_errf(err, errlen, "%s: out of memory for layer_mask", path);
    if (dims[0] && h5u_read(f, "layer_mask", H5T_NATIVE_INT, 1, dims, *mask, path, err,
                            errlen) < 0)
        return -1;
    if (!h5u_exists(f, "idf"))
        return 0;
    if (h5u_shape(f, "idf", &rank, dims, path, err, errlen) < 0)
        return -1;
    hsize_t have = rank == 1 ? dims[0] : rank == 2 ? dims[0] * dims[1] : 0;
    hsize_t want = (hsize_t)*n_mask * (hsize_t)h->E;
    if ((rank != 1 && rank != 2) || have != want ||
        (rank == 2 && dims[1] != (hsize_t)h->E))
        return eldr_errf(err, errlen,
                         "%s: dataset idf has %llu values (rank %d), expected |S|*E = %d*%d "
                         "= %llu",
                         path, (unsigned long long)have, rank, *n_mask, h->E,
                         (unsigned long long)want);
    if (!(*idf = eldr_calloc(want, sizeof(float))))
        return eldr_errf(err, errlen, "%s: out of memory for idf", path);
    if (want && h5u_read(f, "idf", H5T_NATIVE_FLOAT, rank, dims, *idf, path, err, errlen) < 0)
        return -1;
    return 0;
}

/* centroids [K][|S|*E]: the shape is checked before anything is allocated. */
static int centroid_shape(hid_t f, const head_t *h, int n_mask, int *K, const char *path,
                          char *err, size_t errlen)
{
    int rank;
    hsize_t dims[H5U_MAXRANK];
    if (h5u_shape(f, "centroids", &rank, dims, path, err, errlen) < 0)
        return -1;
    if (rank != 2)
        return eldr_errf(err, errlen, "%s: dataset centroids has rank %d, expected 2 "
                         "[K, |S|*E]", path, rank);
    hsize_t width = (hsize_t)n_mask * (hsize_t)h->E;
    if (dims[1] != width)
        return eldr_errf(err, errlen,
                         "%s: dataset centroids has width %llu, expected |S|*E = %d*%d = %llu",
                         path, (unsigned long long)dims[1], n_mask, h->E,
                         (unsigned long long)width);
    if (dims[0] < 1 || dims[0] > INT_MAX)
        return eldr_errf(err, errlen, "%s: dataset centroids has %llu rows, need K >= 1",
                         path, (unsigned long long)dims[0]);
    size_t phys = eldr_phys_mem();
    if (phys && dims[0] * dims[1] * sizeof(float) > phys)
        return eldr_errf(err, errlen, "%s: dataset centroids (%llu x %llu) exceeds memory",
                         path, (unsigned long long)dims[0], (unsigned long long)dims[1]);
    *K = (int)dims[0];
    if (h5u_has_attr(f, "clusters")) {
        int64_t c;
        if (h5u_read_int_attr(f, "clusters", &c, path, err, errlen) < 0)
            return -1;
        if (c != *K)
            return eldr_errf(err, errlen, "%s: attribute clusters = %lld but dataset "
                             "centroids has %d rows", path, (long long)c, *K);
    }
    return 0;
}

static int read_per_cluster(hid_t f, model_t *m, const char *path, char *err, size_t errlen)
{
    hsize_t cdims[2] = {(hsize_t)m->K, (hsize_t)sig_dim(&m->recipe)};
    hsize_t kdims[1] = {(hsize_t)m->K};
    if (h5u_read(f, "centroids", H5T_NATIVE_FLOAT, 2, cdims, m->centroids, path, err,
                 errlen) < 0)
        return -1;
    if (h5u_exists(f, "workers")) {
        int rank;
        hsize_t dims[H5U_MAXRANK];
        char **w = NULL;
        if (h5u_shape(f, "workers", &rank, dims, path, err, errlen) < 0)
            return -1;
        if (rank != 1 || dims[0] != (hsize_t)m->K)
            return eldr_errf(err, errlen, "%s: dataset workers has %llu names for K = %d "
                             "centroids", path, (unsigned long long)dims[0], m->K);
        if (h5u_read_strings(f, "workers", dims[0], 0, dims[0], &w, path, err, errlen) < 0)
            return -1;
        int rc = model_set_workers(m, (const char *const *)w, m->K, err, errlen);
        for (int i = 0; i < m->K; i++)
            free(w[i]);
        free(w);
        if (rc < 0)
            return -1;
    }
    if (h5u_exists(f, "sizes")) {
        if (!(m->sizes = eldr_calloc((size_t)m->K, sizeof *m->sizes)))
            return eldr_errf(err, errlen, "%s: out of memory for sizes", path);
        if (h5u_read(f, "sizes", H5T_NATIVE_INT64, 1, kdims, m->sizes, path, err, errlen) < 0)
            return -1;
    }
    /* optional (absent before the drift baseline): NULL = unknown */
    if (h5u_exists(f, "nearest_share")) {
        if (!(m->nearest_share = eldr_calloc((size_t)m->K, sizeof *m->nearest_share)))
            return eldr_errf(err, errlen, "%s: out of memory for nearest_share", path);
        if (h5u_read(f, "nearest_share", H5T_NATIVE_DOUBLE, 1, kdims, m->nearest_share, path,
                     err, errlen) < 0)
            return -1;
    }
    return 0;
}

static model_t *load_open(hid_t f, const char *path, char *err, size_t errlen)
{
    head_t h;
    int *mask = NULL, n_mask = 0, K = 0;
    float *idf = NULL;
    model_t *m = NULL;
    if (read_head(f, &h, path, err, errlen) < 0 ||
        read_recipe_arrays(f, &h, &mask, &n_mask, &idf, path, err, errlen) < 0 ||
        centroid_shape(f, &h, n_mask, &K, path, err, errlen) < 0)
        goto out;
    m = model_new_raw(h.variant, h.L, h.E, h.k, K, mask, n_mask, idf, err, errlen);
    if (!m)
        goto out;
    m->tau = h.tau;
    if (read_optional(f, m, path, err, errlen) < 0 ||
        read_per_cluster(f, m, path, err, errlen) < 0 ||
        model_validate(m, path, MODEL_NAMES_H5, err, errlen) < 0) {
        model_free(m);
        m = NULL;
    }
out:
    free(mask);
    free(idf);
    return m;
}

int model_load(const char *path, model_t **out, char *err, size_t errlen)
{
    *out = NULL;
    /* the reference implementation's fit JSON opens wherever a model does */
    if (model_file_is_json(path))
        return model_load_json(path, out, err, errlen);
    h5u_silence();
    hid_t f = h5u_open_read(path, err, errlen);
    if (f < 0)
        return -1;
    *out = load_open(f, path, err, errlen);
    H5Fclose(f);
    return *out ? 0 : -1;
}

int model_file_probe(const char *path)
{
    if (model_file_is_json(path))
        return 1;
    char fmt[64];
    h5u_silence();
    hid_t f = h5u_open_read(path, NULL, 0);
    if (f < 0)
        return 0;
    int is = h5u_read_str_attr(f, "format", fmt, sizeof fmt, path, NULL, 0) == 0 &&
             !strcmp(fmt, MODEL_FORMAT);
    H5Fclose(f);
    return is;
}
