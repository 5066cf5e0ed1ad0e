/* model.h - a fitted ELDR model: centroids, the signature recipe that
 * produced them, and the provenance of the fit. The file format
 * (eldr-model v1, HDF5) and the reference centroid JSON mapping are
 * specified in docs/model-format.md.
 *
 * The geometry of the MoE (L layers, E experts) lives in m->recipe (L, E);
 * the recipe's layer list is the mask S, its idf the weights over S
 * ([|S|][E], count_idf only). Centroids are K unit rows of |S|*E floats;
 * worker k serves cluster k.
 *
 * Ownership: a model_t owns every array and string it points to
 * (model_free releases all of it, including the recipe). */
#ifndef ELDR_MODEL_H
#define ELDR_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "progress.h"
#include "sha256.h"
#include "signature.h"
#include "version.h"

#define MODEL_FORMAT "eldr-model"
#define MODEL_VERSION 1
#define MODEL_WORKER_MAX 128     /* bytes of a worker name, NUL included */
#define MODEL_TAU_DEFAULT 0.1
#define MODEL_NORM_TOL 1e-3      /* |norm - 1| allowed for a centroid row */


typedef struct model {
    sig_recipe recipe;           /* variant, L, E, mask, idf over the mask */
    int k;                       /* top-k of the MoE router; 0 unknown (a
                                  * reference fit JSON has none): any
                                  * trace's top-k is then accepted */
    int K;                       /* clusters = decode workers */
    float *centroids;            /* [K][sig_dim(&recipe)], unit rows */
    char **workers;              /* [K] owned names, unique, non-empty */
    double tau;                  /* locality band width */
    uint64_t seed;               /* seed of the fit */

    /* Provenance of the fit. Unknown values (an imported JSON) are NaN,
     * -1, NULL or "" as noted. */
    double rho;                  /* signature quality of the recipe; NaN */
    int n_star;                  /* layers kept (N*: the greedy curve's
                                  * peak, or |S| for a given mask); 0 */
    double objective;            /* total cosine distance of the final
                                  * assignment; NaN */
    int64_t *sizes;              /* [K] members per cluster; NULL */
    double *nearest_share;       /* [K] share of the calibration signatures
                                  * whose nearest centroid (unconstrained
                                  * argmax cosine, drift.h) is each one: the
                                  * drift baseline. NULL unknown (a model
                                  * that predates it, a reference JSON) */
    int64_t calib_rows;          /* trace rows the IDF was fitted on; -1 */
    int64_t fit_rows;            /* signatures clustered; -1 */
    int64_t zero_rows;           /* all-zero signatures left out; -1 */
    int iters;                   /* K-means iterations run; -1 */
    int balanced;                /* 1 balanced, 0 unbalanced, -1 unknown */
    char layer_select[16];       /* "auto", "all", "list" or "" */
    char calib_sha256[SHA256_HEX]; /* SHA-256 of the calibration trace
                                    * file, lowercase hex; "" */
    char calib_file[256];        /* its base name; "" */
    char calib_split[64];        /* which of its rows: "all", or a split
                                  * spec (split.h split_spec_format, e.g.
                                  * "random 200 seed 1"); "" unknown */
    char created[32];            /* ISO 8601 UTC time of the fit; "" */
    /* Provenance the reference implementation's fit JSON carries
     * (docs/model-format.md); "" unknown */
    char model_name[128];        /* the MoE model calibrated on ("model") */
    char calib_format[64];       /* format of the calibration input,
                                  * e.g. "eldr-calibration-v1" */
    char transform_sha256[SHA256_HEX]; /* SHA-256 of the fit whose recipe
                                        * was reused (a transform template) */
    char eldr_version[32];       /* eldr that wrote it; "" */
    int snapshot;                /* read from an eldrd snapshot (snapshot.h) */
} model_t;

/* A new model for recipe r (copied) with K zero centroids, default worker
 * names "w0".."w{K-1}", tau 0.1, and unknown provenance (created and
 * eldr_version are set to now / this build). */
model_t *model_new(const sig_recipe *r, int k, int K, char *err, size_t errlen);
void model_free(model_t *m);
/* A deep copy (recipe, centroids, workers, sizes, provenance); NULL with
 * err out of memory. */
model_t *model_copy(const model_t *src, char *err, size_t errlen);

/* For loaders and importers: a model whose recipe takes the variant, L,
 * E, mask and idf ([n_mask][E] or NULL) exactly as given, unchecked and
 * unsorted, so that model_validate reports what the file holds. K zero
 * centroids, default workers, unknown provenance. Fails only when memory
 * (or physical memory) does not suffice; check with model_validate. */
model_t *model_new_raw(sig_variant v, int L, int E, int k, int K, const int *mask,
                       int n_mask, const float *idf, char *err, size_t errlen);

/* Replace the worker names (n must equal K; names copied). Validation of
 * uniqueness happens in model_validate. */
int model_set_workers(model_t *m, const char *const *names, int n, char *err,
                      size_t errlen);

/* Sizes array (copied). */
int model_set_sizes(model_t *m, const int64_t *sizes, char *err, size_t errlen);

/* The drift baseline (copied; NULL clears it). */
int model_set_nearest_share(model_t *m, const double *share, char *err, size_t errlen);

/* The drift baseline measured on n unit signatures x ([n][sig_dim]) of
 * the model's recipe against its centroids (drift_nearest_shares). n < 1
 * clears it (unknown). */
int model_measure_nearest_share(model_t *m, const float *x, int64_t n, char *err,
                                size_t errlen);

/* How model_validate names the parts of a model in its messages: the
 * HDF5 dataset names or the reference JSON keys. */
typedef enum model_naming { MODEL_NAMES_H5 = 0, MODEL_NAMES_JSON } model_naming;

/* Check every invariant a loaded model must meet; the first failure is
 * one line "WHERE: PART ...", PART the dataset/key and row:
 *   L, E >= 1, 1 <= k <= E, K >= 1;
 *   layer mask non-empty, each in [0, L), strictly ascending;
 *   idf present with |S|*E finite values iff the variant is count_idf;
 *   centroids finite with unit L2 norm (|norm - 1| < MODEL_NORM_TOL);
 *   worker names non-empty, shorter than MODEL_WORKER_MAX, unique;
 *   tau finite and >= 0; sizes (if any) >= 0; nearest_share (if any)
 *   finite, in [0, 1], summing to 1 within 1e-6. */
int model_validate(const model_t *m, const char *where, model_naming naming,
                   char *err, size_t errlen);

/* Just the layer-mask part of model_validate (importers check the mask
 * before they slice a full idf with it). */
int model_validate_mask(const model_t *m, const char *where, model_naming naming, char *err,
                        size_t errlen);

/* 1 when a trace of L layers, E experts and top-k k can be routed by m:
 * L and E equal, and the top-k equal unless the model's is unknown (0). */
int model_fits_geometry(const model_t *m, int L, int E, int k);

/* Index of the most similar centroid (cosine) for a unit signature of
 * sig_dim floats, with its similarity; a convenience for reports. */
int model_nearest(const model_t *m, const float *sig, double *sim);

/* eldr-model v1 HDF5 file (model_io.c). Save validates first, then
 * writes atomically (temp + rename). Load validates; on failure *out is
 * NULL and err names the file and the dataset or attribute (and row).
 * Load also reads a fit JSON (model_file_is_json: model_load_json), and
 * the probe says yes to one. */
int model_save(const model_t *m, const char *path, char *err, size_t errlen);
int model_load(const char *path, model_t **out, char *err, size_t errlen);

/* 1 when path is an HDF5 file whose format attribute is "eldr-model",
 * 0 otherwise (no error: a probe for `eldr info`). */
int model_file_probe(const char *path);

/* Reference centroid JSON (model_json.c); see docs/model-format.md for
 * the key mapping. Import validates like model_load, naming the key;
 * `where` prefixes messages (the file name). Export writes the reference
 * keys plus eldr's own extras (tau, workers, ...), which the reference
 * ignores. Writing a file is atomic (temp + rename). */
int model_to_json_text(const model_t *m, char **text, char *err, size_t errlen);
int model_from_json_text(const char *text, const char *where, model_t **out,
                         char *err, size_t errlen);
int model_save_json(const model_t *m, const char *path, char *err, size_t errlen);
/* A fit JSON file, or a saved eldrd snapshot taken with centroids (its
 * "format" names it); defined in snapshot.c. */
int model_load_json(const char *path, model_t **out, char *err, size_t errlen);
/* model_save_json without the refusal: every variant, for eldr's own use
 * (PUT /v1/model takes this JSON); the reference may not load it. */
int model_save_json_any(const model_t *m, const char *path, char *err, size_t errlen);

/* 0 when the reference implementation's loader can express m (variant
 * count over every layer, count_idf with non-negative, not all-zero idf,
 * or gate_prob, i.e. their gate_prob_all); else -1 with one line naming
 * what it cannot express. model_save_json (a file for their tools) checks
 * it; model_to_json_text (eldr to eldr: eldrd, the dashboard) does not. */
int model_reference_expressible(const model_t *m, char *err, size_t errlen);

/* 1 when the file at path starts (after white space) with '{': a centroid
 * JSON, which model_load then reads with model_load_json. */
int model_file_is_json(const char *path);

/* ---- fitting (model_fit.c) ----
 *
 * The offline half of the method on one calibration trace: IDF on all its
 * rows (load only the calibration rows, e.g. with trace_load_rows), the
 * layer mask (greedy selection by rho, all layers, or a list), the
 * signatures, balanced spherical K-means, and a model carrying all of it.
 * All-zero signatures are left out of the K-means (counted and listed in
 * the report). Deterministic for the options (the seed). */

typedef enum model_layers { MODEL_LAYERS_AUTO = 0, MODEL_LAYERS_ALL, MODEL_LAYERS_LIST } model_layers;

typedef struct model_fit_opts {
    sig_variant variant;
    int K;                       /* clusters, 1 <= K <= non-zero signatures */
    model_layers layers;         /* auto needs decode_counts */
    const int *layer_list;       /* MODEL_LAYERS_LIST: the layers */
    int n_layer_list;
    uint64_t seed;               /* pairs and k-means++ */
    int iters;                   /* K-means rounds; 0 needs init_rows */
    int balanced;                /* 1 capacity ceil(N/K); 0 plain */
    const int64_t *init_rows;    /* K trace rows for the initial centroids */
    int64_t pairs;               /* rho pairs; 0 = all N(N-1)/2 */
    double tau;
    const char *const *workers;  /* K names, or NULL for w0.. */
    const char *calib_sha256;    /* provenance, may be NULL */
    const char *calib_file;
    int threads;                 /* for selection; 0 = the online CPUs */
    void (*progress)(void *ctx, int iter, double objective); /* K-means */
    void *progress_ctx;
    progress_fn on_progress;     /* every long stage (progress.h), may be NULL:
                                  * LAYERSEL_WHAT steps of L (auto layers),
                                  * MODEL_FIT_SIGNATURES 0/1 then 1/1, and
                                  * MODEL_FIT_KMEANS rounds of iters (the last
                                  * report is iters/iters, also on early
                                  * convergence) */
    void *on_progress_ctx;
    volatile int *cancel;        /* when non-NULL and set (a signal handler,
                                  * another thread), the fit stops at its
                                  * next check: between stages and in every
                                  * K-means round; model_fit then returns
                                  * MODEL_FIT_CANCELLED */
} model_fit_opts;

/* Stage names of model_fit_opts.on_progress besides LAYERSEL_WHAT. */
#define MODEL_FIT_SIGNATURES "signatures"
#define MODEL_FIT_KMEANS "k-means"

/* model_fit's return value when opts.cancel was raised (err says so). */
#define MODEL_FIT_CANCELLED (-2)

/* Defaults: count_idf, auto layers, seed 1, 50 iterations, balanced,
 * 30000 pairs, tau 0.1. */
void model_fit_opts_default(model_fit_opts *o, int K);

typedef struct model_fit_report {
    double t_recipe, t_selection, t_signatures, t_fit; /* seconds */
    int64_t n_rows;              /* calibration rows */
    int64_t n_zero;              /* all-zero signatures left out */
    int64_t *zero_rows;          /* [n_zero] their trace rows */
    int *assign;                 /* [n_rows] cluster of each row, -1 if left out */
    double *curve;               /* [L] greedy rho curve (auto), else NULL */
    int *order;                  /* [L] greedy order (auto), else NULL */
    int iterations, converged;
} model_fit_report;
void model_fit_report_free(model_fit_report *r);

/* Fit on every row of t. On success *out owns the model and rep (if
 * non-NULL) is filled (free with model_fit_report_free). */
int model_fit(const trace_t *t, const model_fit_opts *o, model_t **out,
              model_fit_report *rep, char *err, size_t errlen);

/* The same on a trace the caller gives up its decode counts of: once the
 * layer mask is chosen (the only stage that reads them) t->decode_counts
 * and decode_tokens are freed and set to NULL, before the float
 * signatures are allocated (not when t has token rows, which need them).
 * A command that fits and exits then never holds both (docs/memory.md:
 * 12 KB a request less at L=48, E=128). Results equal model_fit's. */
int model_fit_release(trace_t *t, const model_fit_opts *o, model_t **out,
                      model_fit_report *rep, char *err, size_t errlen);

#endif
