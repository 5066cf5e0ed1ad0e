/* import_npz.c - the reference implementation's calibration capture (an
 * .npz of format eldr-calibration-v1, see docs/import.md) into a trace.
 *
 * libzip opens the archive and inflates entries; npy.c parses each array.
 * Entries are read one at a time, converted into the trace and released,
 * so the peak is the trace plus the largest entry. Every failure names the
 * file, the entry and, where there is one, the row (with its request id). */
#include "import.h"
#include "import_common.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "err.h"
#include "npy.h"

typedef struct npz {
    const char *path;
    zip_t *zip;
    trace_t *t;                    /* being filled; ids name rows in messages */
    int64_t n;
    int L, E, k;
    json_t *meta;
} npz;

typedef struct entry {
    const char *name;
    unsigned char *buf;
    npy_array_t a;
} entry;

static void entry_free(entry *e)
{
    npy_free(&e->a);
    free(e->buf);
    e->buf = NULL;
}

/* "row 3 (request 'abc')", or "row 3" before the ids are known. */
static const char *row_name(const npz *z, int64_t r, char *buf, size_t len)
{
    if (z->t && z->t->request_id && z->t->request_id[r])
        snprintf(buf, len, "row %lld (request '%s')", (long long)r, z->t->request_id[r]);
    else
        snprintf(buf, len, "row %lld", (long long)r);
    return buf;
}

/* ---- reading entries ---------------------------------------------------- */

static int read_bytes(npz *z, zip_int64_t idx, const char *fname, size_t size,
                      unsigned char *buf, char *err, size_t errlen)
{
    zip_file_t *f = zip_fopen_index(z->zip, (zip_uint64_t)idx, 0);
    if (!f)
        return eldr_errf(err, errlen, "%s: entry '%s': cannot open (%s)", z->path, fname,
                         zip_strerror(z->zip));
    size_t got = 0;
    for (;;) {
        unsigned char extra;
        /* one read past the stated size proves the end and lets libzip
         * check the CRC */
        zip_int64_t r = got < size ? zip_fread(f, buf + got, size - got) : zip_fread(f, &extra, 1);
        if (r < 0) {
            eldr_errf(err, errlen, "%s: entry '%s': corrupt data (%s)", z->path, fname,
                      zip_file_strerror(f));
            zip_fclose(f);
            return -1;
        }
        if (r == 0)
            break;
        if (got >= size) {
            zip_fclose(f);
            return eldr_errf(err, errlen, "%s: entry '%s': longer than its stated size",
                             z->path, fname);
        }
        got += (size_t)r;
    }
    zip_fclose(f);
    if (got != size)
        return eldr_errf(err, errlen, "%s: entry '%s': truncated (%zu of %zu bytes)", z->path,
                         fname, got, size);
    return 0;
}

/* Read NAME.npy and parse it. 1 found, 0 absent (when not required), -1 error. */
static int read_entry(npz *z, const char *name, int required, entry *e, char *err,
                      size_t errlen)
{
    char fname[64];
    snprintf(fname, sizeof fname, "%s.npy", name);
    memset(e, 0, sizeof *e);
    e->name = name;
    zip_int64_t idx = zip_name_locate(z->zip, fname, 0);
    if (idx < 0) {
        if (!required)
            return 0;
        return eldr_errf(err, errlen,
                         "%s: entry '%s' is missing (%s holds request_ids, prefill_counts, "
                         "gate_probabilities, decode_counts, prompt_tokens, decode_tokens, "
                         "metadata)", z->path, fname, IMPORT_NPZ_FORMAT);
    }
    zip_stat_t st;
    if (zip_stat_index(z->zip, (zip_uint64_t)idx, 0, &st) || !(st.valid & ZIP_STAT_SIZE))
        return eldr_errf(err, errlen, "%s: entry '%s': cannot read its size (%s)", z->path,
                         fname, zip_strerror(z->zip));
    size_t mem = eldr_phys_mem();
    if ((mem && st.size > mem) || st.size > SIZE_MAX / 2)
        return eldr_errf(err, errlen, "%s: entry '%s' is %.1f GiB, more than this machine's "
                         "memory", z->path, fname, (double)st.size / 1073741824.0);
    e->buf = malloc(st.size ? (size_t)st.size : 1);
    if (!e->buf)
        return eldr_errf(err, errlen, "%s: entry '%s': out of memory", z->path, fname);
    if (read_bytes(z, idx, fname, (size_t)st.size, e->buf, err, errlen)) {
        entry_free(e);
        return -1;
    }
    char msg[ELDR_ERRLEN];
    if (npy_parse(e->buf, (size_t)st.size, &e->a, msg, sizeof msg)) {
        entry_free(e);
        return eldr_errf(err, errlen, "%s: entry '%s': %s", z->path, fname, msg);
    }
    return 1;
}

/* ---- shape and dtype checks ------------------------------------------- */

static int need_kind(npz *z, entry *e, int (*ok)(const npy_array_t *), const char *what,
                     char *err, size_t errlen)
{
    if (ok(&e->a))
        return 0;
    return eldr_errf(err, errlen, "%s: entry '%s.npy': dtype '%s' is not %s", z->path, e->name,
                     e->a.descr, what);
}

/* The shape must be [N] (ndim 1) or [N, L, E] (ndim 3). */
static int need_shape(npz *z, entry *e, int ndim, char *err, size_t errlen)
{
    const npy_array_t *a = &e->a;
    int ok = a->ndim == ndim && a->shape[0] == z->n &&
             (ndim == 1 || (a->shape[1] == z->L && a->shape[2] == z->E));
    if (ok)
        return 0;
    char sh[256];
    if (ndim == 1)
        return eldr_errf(err, errlen, "%s: entry '%s.npy': shape %s is not [N] = (%lld,)",
                         z->path, e->name, npy_shape_str(a, sh, sizeof sh), (long long)z->n);
    return eldr_errf(err, errlen, "%s: entry '%s.npy': shape %s is not [N, L, E] = (%lld, %d, %d)",
                     z->path, e->name, npy_shape_str(a, sh, sizeof sh), (long long)z->n,
                     z->L, z->E);
}

/* ---- metadata --------------------------------------------------------- */

static int meta_int(npz *z, const char *key, int required, long long lo, long long hi,
                    long long *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(z->meta, key);
    if (!v) {
        if (required)
            return eldr_errf(err, errlen, "%s: entry 'metadata.npy': key '%s' is missing",
                             z->path, key);
        return 1;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return eldr_errf(err, errlen, "%s: entry 'metadata.npy': key '%s' is not an integer "
                         "in [%lld, %lld]", z->path, key, lo, hi);
    *out = json_integer_value(v);
    return 0;
}

static int read_metadata(npz *z, char *model, char *err, size_t errlen)
{
    entry e;
    if (read_entry(z, "metadata", 1, &e, err, errlen) < 0)
        return -1;
    int rc = -1;
    char *text = NULL;
    if (!npy_is_string(&e.a) || e.a.count != 1 || e.a.ndim > 1) {
        char sh[256];
        eldr_errf(err, errlen, "%s: entry 'metadata.npy': want a 0-d string array holding a "
                  "JSON object, got dtype '%s' shape %s", z->path, e.a.descr,
                  npy_shape_str(&e.a, sh, sizeof sh));
        goto out;
    }
    size_t cap = (size_t)e.a.itemsize + 1;
    char msg[ELDR_ERRLEN];
    text = malloc(cap);
    if (!text || npy_string_at(&e.a, 0, text, cap, msg, sizeof msg)) {
        eldr_errf(err, errlen, "%s: entry 'metadata.npy': %s", z->path,
                  text ? msg : "out of memory");
        goto out;
    }
    json_error_t je;
    z->meta = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!z->meta || !json_is_object(z->meta)) {
        eldr_errf(err, errlen, "%s: entry 'metadata.npy': not a JSON object (%s at column %d)",
                  z->path, z->meta ? "another JSON value" : je.text, je.column);
        goto out;
    }
    const char *fmt = json_string_value(json_object_get(z->meta, "format"));
    if (!fmt || strcmp(fmt, IMPORT_NPZ_FORMAT)) {
        eldr_errf(err, errlen, "%s: entry 'metadata.npy': key 'format' is %s%s%s, expected '%s'",
                  z->path, fmt ? "'" : "", fmt ? fmt : "missing or not a string", fmt ? "'" : "",
                  IMPORT_NPZ_FORMAT);
        goto out;
    }
    const char *m = json_string_value(json_object_get(z->meta, "model"));
    if (!m || strlen(m) >= TRACE_MODEL_MAX) {
        eldr_errf(err, errlen, "%s: entry 'metadata.npy': key 'model' is missing, not a string, "
                  "or longer than %d bytes", z->path, TRACE_MODEL_MAX - 1);
        goto out;
    }
    snprintf(model, TRACE_MODEL_MAX, "%s", m);
    long long k;
    if (meta_int(z, "top_k", 1, 1, 65535, &k, err, errlen))
        goto out;
    z->k = (int)k;
    rc = 0;
out:
    free(text);
    entry_free(&e);
    return rc;
}

/* Optional "layers"/"experts" in metadata must agree with the shapes. */
static int check_meta_geometry(npz *z, char *err, size_t errlen)
{
    long long v;
    int r = meta_int(z, "layers", 0, 1, 1 << 30, &v, err, errlen);
    if (r < 0)
        return -1;
    if (r == 0 && v != z->L)
        return eldr_errf(err, errlen, "%s: entry 'metadata.npy': key 'layers' is %lld but "
                         "prefill_counts has %d layers", z->path, v, z->L);
    r = meta_int(z, "experts", 0, 1, 1 << 30, &v, err, errlen);
    if (r < 0)
        return -1;
    if (r == 0 && v != z->E)
        return eldr_errf(err, errlen, "%s: entry 'metadata.npy': key 'experts' is %lld but "
                         "prefill_counts has %d experts", z->path, v, z->E);
    if (z->k > z->E)
        return eldr_errf(err, errlen, "%s: entry 'metadata.npy': key 'top_k' is %d, more than "
                         "the %d experts", z->path, z->k, z->E);
    return 0;
}

/* ---- arrays ------------------------------------------------------------ */

/* The reference's request id: 64 lowercase hex digits. */
static int is_sha256_hex(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return 0;
    return n == IMPORT_SHA256_ID_LEN;
}

/* request_ids: [N] strings, each the SHA-256 hex of its prompt, unique.
 * Fixes N. */
static int read_ids(npz *z, entry *e, char ***ids_out, char *err, size_t errlen)
{
    const npy_array_t *a = &e->a;
    if (a->ndim != 1)
        return eldr_errf(err, errlen, "%s: entry 'request_ids.npy': want a 1-d array [N], got "
                         "%d dimensions", z->path, a->ndim);
    if (!npy_is_string(a))
        return eldr_errf(err, errlen, "%s: entry 'request_ids.npy': dtype '%s' is not a string "
                         "type (the ids are SHA-256 hex digests of the prompts)", z->path,
                         a->descr);
    z->n = a->shape[0];
    if (z->n == 0)
        return eldr_errf(err, errlen, "%s: entry 'request_ids.npy': the capture holds no requests",
                         z->path);
    char **ids = eldr_calloc((size_t)z->n, sizeof *ids);
    if (!ids)
        return eldr_errf(err, errlen, "%s: out of memory for %lld request ids", z->path,
                         (long long)z->n);
    *ids_out = ids;
    size_t cap = (size_t)a->itemsize + 1;
    char msg[ELDR_ERRLEN];
    for (int64_t r = 0; r < z->n; r++) {
        if (!(ids[r] = malloc(cap)))
            return eldr_errf(err, errlen, "%s: out of memory for request ids", z->path);
        if (npy_string_at(a, r, ids[r], cap, msg, sizeof msg))
            return eldr_errf(err, errlen, "%s: entry 'request_ids.npy': %s", z->path, msg);
        if (!is_sha256_hex(ids[r]))
            return eldr_errf(err, errlen, "%s: entry 'request_ids.npy' row %lld: id '%.80s' is "
                             "not a SHA-256 hex digest (64 of 0-9a-f)", z->path, (long long)r,
                             ids[r]);
    }
    int64_t i, j;
    int dup = import_find_duplicate(ids, z->n, &i, &j);
    if (dup < 0)
        return eldr_errf(err, errlen, "%s: out of memory checking request ids", z->path);
    if (dup)
        return eldr_errf(err, errlen, "%s: entry 'request_ids.npy' row %lld: request id '%s' "
                         "repeats row %lld", z->path, (long long)j, ids[j], (long long)i);
    return 0;
}

/* [N, L, E] integer counts into uint16. */
static int copy_counts(npz *z, entry *e, uint16_t *dst, char *err, size_t errlen)
{
    if (need_kind(z, e, npy_is_integer, "an integer type", err, errlen) ||
        need_shape(z, e, 3, err, errlen))
        return -1;
    size_t cells = TRACE_CELLS(z->t);
    for (int64_t i = 0; i < e->a.count; i++) {
        int64_t v;
        if (npy_int_at(&e->a, i, &v) || v < 0 || v > UINT16_MAX) {
            char rn[IMPORT_MAX_STRING + 64];
            int64_t r = i / (int64_t)cells;
            int l = (int)(i % (int64_t)cells / z->E), x = (int)(i % z->E);
            return eldr_errf(err, errlen, "%s: entry '%s.npy' %s layer %d expert %d: count %lld "
                             "outside [0, 65535]", z->path, e->name, row_name(z, r, rn, sizeof rn),
                             l, x, (long long)v);
        }
        dst[i] = (uint16_t)v;
    }
    return 0;
}

/* [N] integers into int32 within [lo, INT32_MAX]. */
static int copy_tokens(npz *z, entry *e, int64_t lo, int32_t *dst, char *err, size_t errlen)
{
    if (need_kind(z, e, npy_is_integer, "an integer type", err, errlen) ||
        need_shape(z, e, 1, err, errlen))
        return -1;
    for (int64_t r = 0; r < z->n; r++) {
        int64_t v;
        if (npy_int_at(&e->a, r, &v) || v < lo || v > INT32_MAX) {
            char rn[IMPORT_MAX_STRING + 64];
            return eldr_errf(err, errlen, "%s: entry '%s.npy' %s: %lld is outside [%lld, %d]",
                             z->path, e->name, row_name(z, r, rn, sizeof rn), (long long)v,
                             (long long)lo, INT32_MAX);
        }
        dst[r] = (int32_t)v;
    }
    return 0;
}

/* [N, L, E] finite non-negative numbers into float32. */
static int is_float(const npy_array_t *a)
{
    return a->kind == 'f';
}

static int copy_gates(npz *z, entry *e, float *dst, char *err, size_t errlen)
{
    if (need_kind(z, e, is_float, "a float type", err, errlen) ||
        need_shape(z, e, 3, err, errlen))
        return -1;
    size_t cells = TRACE_CELLS(z->t);
    for (int64_t i = 0; i < e->a.count; i++) {
        float v = (float)npy_double_at(&e->a, i);
        if (!isfinite(v) || v < 0) {
            char rn[IMPORT_MAX_STRING + 64];
            int64_t r = i / (int64_t)cells;
            int l = (int)(i % (int64_t)cells / z->E), x = (int)(i % z->E);
            return eldr_errf(err, errlen, "%s: entry '%s.npy' %s layer %d expert %d: %s value %g",
                             z->path, e->name, row_name(z, r, rn, sizeof rn), l, x,
                             isfinite(v) ? "negative" : "non-finite (in float32)",
                             npy_double_at(&e->a, i));
        }
        dst[i] = v;
    }
    return 0;
}

/* ---- cross-array checks ----------------------------------------------- */

static int check_conservation(npz *z, const char *name, const uint16_t *counts,
                              const int32_t *tokens, char *err, size_t errlen)
{
    size_t cells = TRACE_CELLS(z->t);
    char msg[ELDR_ERRLEN], rn[IMPORT_MAX_STRING + 64];
    for (int64_t r = 0; r < z->n; r++)
        if (import_check_counts(counts + (size_t)r * cells, z->L, z->E, z->k, tokens[r], msg,
                                sizeof msg))
            return eldr_errf(err, errlen, "%s: entry '%s.npy' %s %s", z->path, name,
                             row_name(z, r, rn, sizeof rn), msg);
    return 0;
}

/* The summed prefill softmax of every layer adds up to prompt_tokens (each
 * token's probabilities sum to 1), within the reference's tolerance:
 * |sum - tokens| <= GATE_ATOL + GATE_RTOL * tokens, as numpy's allclose. */
#define GATE_RTOL 1e-4
#define GATE_ATOL 1e-3
static int check_gate_sums(npz *z, char *err, size_t errlen)
{
    const trace_t *t = z->t;
    char rn[IMPORT_MAX_STRING + 64];
    for (int64_t r = 0; r < t->n; r++)
        for (int l = 0; l < t->L; l++) {
            const float *g = t->gate_prob + ((size_t)r * (size_t)t->L + (size_t)l) * (size_t)t->E;
            double sum = 0, tokens = t->prompt_tokens[r];
            for (int e = 0; e < t->E; e++)
                sum += g[e];
            if (fabs(sum - tokens) > GATE_ATOL + GATE_RTOL * tokens)
                return eldr_errf(err, errlen, "%s: entry 'gate_probabilities.npy' %s layer %d: "
                                 "probabilities sum to %.6g, expected prompt_tokens %d (within "
                                 "rtol %g, atol %g)", z->path, row_name(z, r, rn, sizeof rn),
                                 l, sum, t->prompt_tokens[r], GATE_RTOL, GATE_ATOL);
        }
    return 0;
}

/* output_tokens comes from an entry or from metadata, never both; where
 * known, decode_tokens == output_tokens - 1 (the prefill emits the first
 * output token; every later one is a decode step). */
static int check_output_tokens(npz *z, char *err, size_t errlen)
{
    entry e;
    int have = read_entry(z, "output_tokens", 0, &e, err, errlen);
    if (have < 0)
        return -1;
    json_t *jm = json_object_get(z->meta, "output_tokens");
    int rc = -1;
    if (have && jm) {
        eldr_errf(err, errlen, "%s: output_tokens is given both as an entry and in metadata",
                  z->path);
        goto out;
    }
    if (!have && !jm)
        return 0;
    if (have && (need_kind(z, &e, npy_is_integer, "an integer type", err, errlen) ||
                 need_shape(z, &e, 1, err, errlen)))
        goto out;
    /* the reference writes one integer: every request generated that many */
    int scalar = jm && json_is_integer(jm);
    if (scalar && json_integer_value(jm) < 2) {
        eldr_errf(err, errlen, "%s: entry 'metadata.npy': key 'output_tokens' is %lld, need >= 2 "
                  "(the prefill's token and at least one decode step)", z->path,
                  (long long)json_integer_value(jm));
        goto out;
    }
    if (jm && !scalar && (!json_is_array(jm) || (int64_t)json_array_size(jm) != z->n)) {
        eldr_errf(err, errlen, "%s: entry 'metadata.npy': key 'output_tokens' is neither an "
                  "integer nor an array of %lld integers", z->path, (long long)z->n);
        goto out;
    }
    const char *src = have ? "entry 'output_tokens.npy'" : "metadata key 'output_tokens'";
    for (int64_t r = 0; r < z->n; r++) {
        int64_t out = 0;
        char rn[IMPORT_MAX_STRING + 64];
        json_t *v = scalar ? jm : jm ? json_array_get(jm, (size_t)r) : NULL;
        if (jm && !json_is_integer(v)) {
            eldr_errf(err, errlen, "%s: %s %s: not an integer", z->path, src,
                      row_name(z, r, rn, sizeof rn));
            goto out;
        }
        if (jm)
            out = json_integer_value(v);
        else if (npy_int_at(&e.a, r, &out))
            out = -1;
        if (z->t->decode_tokens[r] != out - 1) {
            eldr_errf(err, errlen, "%s: entry 'decode_tokens.npy' %s: decode_tokens %d != "
                      "output_tokens %lld - 1 (from %s)", z->path, row_name(z, r, rn, sizeof rn),
                      z->t->decode_tokens[r], (long long)out, src);
            goto out;
        }
    }
    rc = 0;
out:
    if (have)
        entry_free(&e);
    return rc;
}

/* Optional arrival_s [N]: finite seconds >= 0. */
static int read_arrival(npz *z, char *err, size_t errlen)
{
    entry e;
    char rn[IMPORT_MAX_STRING + 64];
    int have = read_entry(z, "arrival_s", 0, &e, err, errlen);
    if (have < 0)
        return -1;
    if (have) {
        if (need_kind(z, &e, npy_is_number, "a numeric type", err, errlen) ||
            need_shape(z, &e, 1, err, errlen) ||
            trace_alloc_optional(z->t, TRACE_HAS_ARRIVAL, err, errlen))
            goto fail;
        for (int64_t r = 0; r < z->n; r++) {
            double v = npy_double_at(&e.a, r);
            if (!isfinite(v) || v < 0) {
                eldr_errf(err, errlen, "%s: entry 'arrival_s.npy' %s: %g is not a finite time "
                          ">= 0", z->path, row_name(z, r, rn, sizeof rn), v);
                goto fail;
            }
            z->t->arrival_s[r] = v;
        }
        entry_free(&e);
    }
    return 0;
fail:
    entry_free(&e);
    return -1;
}

/* metadata "label_names": unique non-empty strings, interned in order. */
static int meta_label_names(npz *z, json_t *names, import_labels *lab, char *err, size_t errlen)
{
    if (!json_is_array(names))
        return eldr_errf(err, errlen, "%s: entry 'metadata.npy': key 'label_names' is not an "
                         "array of strings", z->path);
    for (size_t i = 0; i < json_array_size(names); i++) {
        const char *s = json_string_value(json_array_get(names, i));
        int before = lab->n;
        if (!s || !*s || strlen(s) > IMPORT_MAX_STRING || import_label_index(lab, s) != before)
            return eldr_errf(err, errlen, "%s: entry 'metadata.npy': key 'label_names' entry %zu "
                             "is not a new non-empty string", z->path, i);
    }
    return 0;
}

/* labels [N]: names, or indices into metadata's label_names, which (when
 * given) also fixes the order of the names; otherwise names are numbered
 * in order of first appearance. */
static int read_labels(npz *z, char *err, size_t errlen)
{
    entry e;
    int have = read_entry(z, "labels", 0, &e, err, errlen);
    if (have <= 0)
        return have;
    import_labels lab = {0};
    char *name = NULL, msg[ELDR_ERRLEN], rn[IMPORT_MAX_STRING + 64];
    json_t *names = json_object_get(z->meta, "label_names");
    int rc = -1, fixed = names != NULL;
    if (fixed && meta_label_names(z, names, &lab, err, errlen))
        goto out;
    if (!npy_is_string(&e.a) && !(fixed && npy_is_integer(&e.a))) {
        eldr_errf(err, errlen, "%s: entry 'labels.npy': dtype '%s' is not a string type (or "
                  "integer, with label_names in metadata)", z->path, e.a.descr);
        goto out;
    }
    if (need_shape(z, &e, 1, err, errlen) ||
        trace_alloc_optional(z->t, TRACE_HAS_LABEL, err, errlen))
        goto out;
    size_t cap = npy_is_string(&e.a) ? (size_t)e.a.itemsize + 1 : 1;
    if (!(name = malloc(cap))) {
        eldr_errf(err, errlen, "%s: out of memory for labels", z->path);
        goto out;
    }
    for (int64_t r = 0; r < z->n; r++) {
        int64_t idx;
        if (npy_is_integer(&e.a)) {
            if (npy_int_at(&e.a, r, &idx) || idx < 0 || idx >= lab.n) {
                eldr_errf(err, errlen, "%s: entry 'labels.npy' %s: index outside label_names "
                          "[0, %d)", z->path, row_name(z, r, rn, sizeof rn), lab.n);
                goto out;
            }
        } else {
            if (npy_string_at(&e.a, r, name, cap, msg, sizeof msg)) {
                eldr_errf(err, errlen, "%s: entry 'labels.npy': %s", z->path, msg);
                goto out;
            }
            int before = lab.n;
            idx = import_label_index(&lab, name);
            if (idx < 0 || (fixed && lab.n != before)) {
                eldr_errf(err, errlen, "%s: entry 'labels.npy' %s: label '%s' %s", z->path,
                          row_name(z, r, rn, sizeof rn), name,
                          idx < 0 ? "is one too many distinct labels"
                                  : "is not in metadata's label_names");
                goto out;
            }
        }
        z->t->label[r] = (int32_t)idx;
    }
    rc = trace_set_label_names(z->t, lab.n, (const char *const *)lab.names, err, errlen);
out:
    free(name);
    import_labels_free(&lab);
    entry_free(&e);
    return rc;
}

/* ---- the whole capture ------------------------------------------------- */

static int load(npz *z, char *err, size_t errlen)
{
    char model[TRACE_MODEL_MAX];
    entry e;
    char **ids = NULL;
    if (read_metadata(z, model, err, errlen))
        return -1;

    /* request_ids fix N; prefill_counts fixes L and E */
    if (read_entry(z, "request_ids", 1, &e, err, errlen) < 0)
        return -1;
    int rc = read_ids(z, &e, &ids, err, errlen);
    entry_free(&e);
    if (rc)
        goto fail_ids;
    if (read_entry(z, "prefill_counts", 1, &e, err, errlen) < 0)
        goto fail_ids;
    if (e.a.ndim != 3 || e.a.shape[1] < 1 || e.a.shape[2] < 1 || e.a.shape[1] > 1 << 20 ||
        e.a.shape[2] > 65535) {
        char sh[256];
        eldr_errf(err, errlen, "%s: entry 'prefill_counts.npy': shape %s is not [N, L, E]",
                  z->path, npy_shape_str(&e.a, sh, sizeof sh));
        goto fail_entry;
    }
    z->L = (int)e.a.shape[1];
    z->E = (int)e.a.shape[2];
    if (check_meta_geometry(z, err, errlen))
        goto fail_entry;
    char msg[ELDR_ERRLEN];
    if (!(z->t = trace_new(z->n, z->L, z->E, z->k, msg, sizeof msg)) ||
        trace_alloc_optional(z->t, TRACE_HAS_DECODE | TRACE_HAS_GATE_PROB | TRACE_HAS_REQUEST_ID,
                             msg, sizeof msg)) {
        eldr_errf(err, errlen, "%s: %s", z->path, msg);
        goto fail_entry;
    }
    snprintf(z->t->model, sizeof z->t->model, "%s", model);
    /* the trace owns the ids from here on */
    free(z->t->request_id);
    z->t->request_id = ids;
    ids = NULL;
    if (copy_counts(z, &e, z->t->prefill_counts, err, errlen))
        goto fail_entry;
    entry_free(&e);

    if (read_entry(z, "prompt_tokens", 1, &e, err, errlen) < 0 ||
        copy_tokens(z, &e, 1, z->t->prompt_tokens, err, errlen))
        goto fail_entry;
    entry_free(&e);
    if (read_entry(z, "decode_tokens", 1, &e, err, errlen) < 0 ||
        copy_tokens(z, &e, 1, z->t->decode_tokens, err, errlen))
        goto fail_entry;
    entry_free(&e);
    if (read_entry(z, "decode_counts", 1, &e, err, errlen) < 0 ||
        copy_counts(z, &e, z->t->decode_counts, err, errlen))
        goto fail_entry;
    entry_free(&e);
    if (read_entry(z, "gate_probabilities", 1, &e, err, errlen) < 0 ||
        copy_gates(z, &e, z->t->gate_prob, err, errlen))
        goto fail_entry;
    entry_free(&e);

    if (check_conservation(z, "prefill_counts", z->t->prefill_counts, z->t->prompt_tokens, err,
                           errlen) ||
        check_conservation(z, "decode_counts", z->t->decode_counts, z->t->decode_tokens, err,
                           errlen) ||
        check_gate_sums(z, err, errlen) || check_output_tokens(z, err, errlen) ||
        read_arrival(z, err, errlen) ||
        read_labels(z, err, errlen) ||
        trace_validate(z->t, z->path, err, errlen))
        return -1;
    return 0;

fail_entry:
    entry_free(&e);
fail_ids:
    if (ids)
        for (int64_t r = 0; r < z->n; r++)
            free(ids[r]);
    free(ids);
    return -1;
}

int import_npz(const char *path, trace_t **out, char *err, size_t errlen)
{
    *out = NULL;
    int zerr = 0;
    zip_t *zip = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
    if (!zip) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        eldr_errf(err, errlen, "%s: not a readable .npz (zip) archive: %s%s", path,
                  zip_error_strerror(&ze),
                  zerr == ZIP_ER_NOZIP || zerr == ZIP_ER_INCONS ? " (truncated or not a zip?)"
                                                                : "");
        zip_error_fini(&ze);
        return -1;
    }
    npz z = {.path = path, .zip = zip};
    int rc = load(&z, err, errlen);
    zip_discard(zip);
    json_decref(z.meta);
    if (rc) {
        trace_free(z.t);
        return -1;
    }
    *out = z.t;
    return 0;
}
