/* trace_io.c - the eldr-trace v1 HDF5 file (docs/trace-format.md): read
 * the header, load all rows or a row range, save atomically.
 *
 * Loading goes in a fixed order so that a lying file costs nothing:
 * format and geometry attributes, then every dataset's shape against
 * them (no data read yet), then a memory estimate against the machine,
 * and only then allocation and reading. The result is validated
 * (trace_validate.c) before it is handed out; on any failure everything
 * is freed and *out stays NULL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "h5util.h"
#include "import.h"
#include "trace.h"

#define MAX_GEOM 65535
#define COUNT_CHUNK_BYTES (256 * 1024)
#define COUNT_CHUNK_MAX_ROWS 64

/* Names of the datasets, in one place. */
#define DS_PREFILL "prefill_counts"
#define DS_PROMPT "prompt_tokens"
#define DS_DECODE "decode_counts"
#define DS_DECODE_TOK "decode_tokens"
#define DS_GATE_PROB "gate_prob"
#define DS_GATE_LOGIT "gate_logit"
#define DS_LABEL "label"
#define DS_LABEL_NAMES "label_names"
#define DS_ARRIVAL "arrival_s"
#define DS_UNROUTED "prefill_unrouted_tokens"
#define DS_REQUEST_ID "request_id"
#define DS_P_EXPERTS "tokens/prefill_experts"
#define DS_P_OFFSETS "tokens/prefill_offsets"
#define DS_D_EXPERTS "tokens/decode_experts"
#define DS_D_OFFSETS "tokens/decode_offsets"
#define DS_D_PROBS "tokens/decode_probs"
#define DS_B_HASHES "tokens/block_hashes"
#define DS_B_OFFSETS "tokens/block_offsets"

/* The most label names a trace may hold (the importers' cap too). The
 * memory check alone lets a file claim 2^31 - 1 names on a machine with
 * 100 GB; no labelling of requests needs more than this. */
#define TRACE_MAX_LABELS 65536

/* --- header ---------------------------------------------------------- */

static int read_geometry_attr(hid_t f, const char *name, int64_t hi, int *out,
                              const char *path, char *err, size_t errlen)
{
    int64_t v;
    if (h5u_read_int_attr(f, name, &v, path, err, errlen))
        return -1;
    if (v < 1 || v > hi)
        return eldr_errf(err, errlen, "%s: attribute '%s' = %lld outside [1, %lld]", path, name,
                         (long long)v, (long long)hi);
    *out = (int)v;
    return 0;
}

/* Dataset `name` must have exactly shape want (rank `rank`); `why` says
 * where the expectation comes from. Fills *found when it exists. */
static int expect_shape(hid_t f, const char *name, int rank, const hsize_t *want, const char *why,
                        const char *path, char *err, size_t errlen)
{
    hsize_t got[H5U_MAXRANK];
    int got_rank;
    if (h5u_shape(f, name, &got_rank, got, path, err, errlen))
        return -1;
    int same = got_rank == rank;
    for (int i = 0; same && i < rank; i++)
        same = got[i] == want[i];
    if (same)
        return 0;
    char g[96] = "", w[96] = "";
    size_t og = 0, ow = 0;
    for (int i = 0; i < got_rank; i++)
        og += (size_t)snprintf(g + og, sizeof g - og, "%s%llu", i ? ", " : "",
                               (unsigned long long)got[i]);
    for (int i = 0; i < rank; i++)
        ow += (size_t)snprintf(w + ow, sizeof w - ow, "%s%llu", i ? ", " : "",
                               (unsigned long long)want[i]);
    return eldr_errf(err, errlen, "%s: dataset %s has shape [%s], expected [%s] (%s)", path, name,
                     g, w, why);
}

/* The first axis of a rank-`rank` dataset whose other axes are fixed. */
static int rows_of(hid_t f, const char *name, int rank, const hsize_t *tail, const char *why,
                   int64_t *rows, const char *path, char *err, size_t errlen)
{
    hsize_t got[H5U_MAXRANK], want[H5U_MAXRANK];
    int got_rank;
    if (h5u_shape(f, name, &got_rank, got, path, err, errlen))
        return -1;
    want[0] = got[0];
    for (int i = 1; i < rank; i++)
        want[i] = tail[i - 1];
    if (expect_shape(f, name, rank, want, why, path, err, errlen))
        return -1;
    *rows = (int64_t)got[0];
    return 0;
}

/* A pair "data needs its companion": both or neither. */
static int require_pair(hid_t f, const char *a, const char *b, const char *path, char *err,
                        size_t errlen)
{
    if (h5u_exists(f, a) && !h5u_exists(f, b))
        return eldr_errf(err, errlen, "%s: dataset %s present without %s", path, a, b);
    return 0;
}

/* Token-level datasets: experts [T, L, k] with offsets [N+1]. */
static int header_tokens(hid_t f, const char *experts, const char *offsets, trace_header_t *h,
                         int64_t *T, const char *path, char *err, size_t errlen)
{
    hsize_t tail[2] = {(hsize_t)h->L, (hsize_t)h->k}, off[1] = {(hsize_t)h->n + 1};
    if (require_pair(f, experts, offsets, path, err, errlen) ||
        require_pair(f, offsets, experts, path, err, errlen))
        return -1;
    if (!h5u_exists(f, experts))
        return 0;
    if (rows_of(f, experts, 3, tail, "token rows x layers x top_k", T, path, err, errlen) ||
        expect_shape(f, offsets, 1, off, "N + 1", path, err, errlen))
        return -1;
    return 1;
}

static int header_optional(hid_t f, trace_header_t *h, const char *path, char *err, size_t errlen)
{
    hsize_t cube[3] = {(hsize_t)h->n, (hsize_t)h->L, (hsize_t)h->E}, vec[1] = {(hsize_t)h->n};
    const char *cube_why = "N x layers x experts", *vec_why = "N = rows of prefill_counts";
    static const struct { const char *name; unsigned flag; int cube; } opt[] = {
        {DS_DECODE, TRACE_HAS_DECODE, 1},        {DS_DECODE_TOK, TRACE_HAS_DECODE, 0},
        {DS_GATE_PROB, TRACE_HAS_GATE_PROB, 1},  {DS_GATE_LOGIT, TRACE_HAS_GATE_LOGIT, 1},
        {DS_LABEL, TRACE_HAS_LABEL, 0},          {DS_ARRIVAL, TRACE_HAS_ARRIVAL, 0},
        {DS_REQUEST_ID, TRACE_HAS_REQUEST_ID, 0}, {DS_UNROUTED, TRACE_HAS_UNROUTED, 0},
    };
    if (require_pair(f, DS_DECODE, DS_DECODE_TOK, path, err, errlen) ||
        require_pair(f, DS_DECODE_TOK, DS_DECODE, path, err, errlen) ||
        require_pair(f, DS_LABEL, DS_LABEL_NAMES, path, err, errlen) ||
        require_pair(f, DS_D_PROBS, DS_D_EXPERTS, path, err, errlen))
        return -1;
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
        if (!h5u_exists(f, opt[i].name))
            continue;
        if (opt[i].cube ? expect_shape(f, opt[i].name, 3, cube, cube_why, path, err, errlen)
                        : expect_shape(f, opt[i].name, 1, vec, vec_why, path, err, errlen))
            return -1;
        h->has |= opt[i].flag;
    }
    if (h->has & TRACE_HAS_LABEL) {
        hsize_t none[1];
        int64_t m;
        if (rows_of(f, DS_LABEL_NAMES, 1, none, "one name per label", &m, path, err, errlen))
            return -1;
        if (m > INT32_MAX)
            return eldr_errf(err, errlen, "%s: dataset %s has %lld names, too many", path,
                             DS_LABEL_NAMES, (long long)m);
        h->n_labels = (int)m;
    }
    return 0;
}

static int header_token_level(hid_t f, trace_header_t *h, const char *path, char *err,
                              size_t errlen)
{
    int rc = header_tokens(f, DS_P_EXPERTS, DS_P_OFFSETS, h, &h->t_prefill, path, err, errlen);
    if (rc < 0)
        return -1;
    h->has_tokens_prefill = rc;
    rc = header_tokens(f, DS_D_EXPERTS, DS_D_OFFSETS, h, &h->t_decode, path, err, errlen);
    if (rc < 0)
        return -1;
    h->has_tokens_decode = rc;
    if (h5u_exists(f, DS_D_PROBS)) {
        hsize_t want[3] = {(hsize_t)h->t_decode, (hsize_t)h->L, (hsize_t)h->k};
        if (expect_shape(f, DS_D_PROBS, 3, want, "same shape as " DS_D_EXPERTS, path, err,
                         errlen))
            return -1;
        h->has_decode_probs = 1;
    }
    if (require_pair(f, DS_B_HASHES, DS_B_OFFSETS, path, err, errlen) ||
        require_pair(f, DS_B_OFFSETS, DS_B_HASHES, path, err, errlen))
        return -1;
    if (h5u_exists(f, DS_B_HASHES)) {
        hsize_t none[1], off[1] = {(hsize_t)h->n + 1};
        if (rows_of(f, DS_B_HASHES, 1, none, "one hash per block", &h->n_blocks, path, err,
                    errlen) ||
            expect_shape(f, DS_B_OFFSETS, 1, off, "N + 1", path, err, errlen))
            return -1;
        h->has_blocks = 1;
    }
    return 0;
}

static int read_header(hid_t f, trace_header_t *h, const char *path, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    if (h5u_check_format(f, TRACE_FORMAT, TRACE_VERSION, path, err, errlen))
        return -1;
    if (h5u_has_attr(f, "model") &&
        h5u_read_str_attr(f, "model", h->model, sizeof h->model, path, err, errlen))
        return -1;
    if (read_geometry_attr(f, "layers", MAX_GEOM, &h->L, path, err, errlen) ||
        read_geometry_attr(f, "experts", MAX_GEOM, &h->E, path, err, errlen) ||
        read_geometry_attr(f, "top_k", h->E, &h->k, path, err, errlen))
        return -1;
    hsize_t tail[2] = {(hsize_t)h->L, (hsize_t)h->E};
    if (rows_of(f, DS_PREFILL, 3, tail, "N x layers x experts from the attributes", &h->n, path,
                err, errlen))
        return -1;
    hsize_t vec[1] = {(hsize_t)h->n};
    if (expect_shape(f, DS_PROMPT, 1, vec, "N = rows of prefill_counts", path, err, errlen))
        return -1;
    return header_optional(f, h, path, err, errlen) ||
                   header_token_level(f, h, path, err, errlen)
               ? -1
               : 0;
}

/* --- files that are not HDF5 traces ----------------------------------- */

/* A capture (.npz) or JSON-lines trace opens wherever a trace does: it is
 * imported in memory (validated as `eldr import` would). A bare .npy has
 * no top-k, so it must go through `eldr import --top-k` first. */
static int foreign_import(const char *path, import_format fmt, trace_t **t, char *err,
                          size_t errlen)
{
    if (fmt == IMPORT_NPY)
        return eldr_errf(err, errlen, "%s: a bare .npy count array holds no top-k: convert it "
                         "with 'eldr import %s --top-k K -o TRACE.h5'", path, path);
    return import_file(path, fmt, t, err, errlen);
}

static void header_of(const trace_t *t, trace_header_t *h)
{
    memset(h, 0, sizeof *h);
    snprintf(h->model, sizeof h->model, "%s", t->model);
    h->L = t->L;
    h->E = t->E;
    h->k = t->k;
    h->n = t->n;
    h->has = (t->decode_counts ? TRACE_HAS_DECODE : 0) | (t->gate_prob ? TRACE_HAS_GATE_PROB : 0) |
             (t->gate_logit ? TRACE_HAS_GATE_LOGIT : 0) | (t->label ? TRACE_HAS_LABEL : 0) |
             (t->arrival_s ? TRACE_HAS_ARRIVAL : 0) | (t->request_id ? TRACE_HAS_REQUEST_ID : 0) |
             (t->prefill_unrouted ? TRACE_HAS_UNROUTED : 0);
    h->n_labels = t->n_labels;
}

/* Rows [r0, r1) of t, as a new trace. */
static trace_t *select_range(const trace_t *t, int64_t r0, int64_t r1, char *err, size_t errlen)
{
    int64_t n = r1 - r0, *rows = eldr_calloc((size_t)n + 1, sizeof *rows);
    if (!rows) {
        eldr_errf(err, errlen, "out of memory for %lld rows", (long long)n);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        rows[i] = r0 + i;
    trace_t *part = trace_select(t, rows, n, err, errlen);
    free(rows);
    return part;
}

/* A row list must ascend inside the file's n rows. */
static int check_row_list(const int64_t *rows, int64_t n_rows, int64_t n, const char *path,
                          char *err, size_t errlen)
{
    for (int64_t i = 0; i < n_rows; i++)
        if (rows[i] < 0 || rows[i] >= n || (i && rows[i] <= rows[i - 1]))
            return eldr_errf(err, errlen, "%s: row list entry %lld (row %lld) is not "
                             "ascending inside [0, %lld)", path, (long long)i,
                             (long long)rows[i], (long long)n);
    return 0;
}

/* Load rows [r0, r1) (r1 < 0: all) of an importable file. */
static int foreign_load(const char *path, import_format fmt, int64_t r0, int64_t r1,
                        const trace_load_opts *o, trace_t **out, char *err, size_t errlen)
{
    trace_t *t;
    if (foreign_import(path, fmt, &t, err, errlen))
        return -1;
    if (o->rows) {   /* an import is converted whole: then the rows */
        if (check_row_list(o->rows, o->n_rows, t->n, path, err, errlen)) {
            trace_free(t);
            return -1;
        }
        trace_t *part = trace_select_some(t, o->rows, o->n_rows, o->drop & 7u, err, errlen);
        trace_free(t);
        if (!part)
            return -1;
        t = part;
        r0 = 0, r1 = t->n;
    }
    if (r1 < 0)
        r1 = t->n;
    if (r0 < 0 || r1 < r0 || r1 > t->n) {
        eldr_errf(err, errlen, "%s: rows [%lld, %lld) outside the file's [0, %lld)", path,
                  (long long)r0, (long long)r1, (long long)t->n);
        trace_free(t);
        return -1;
    }
    if (r0 > 0 || r1 < t->n) {
        trace_t *part = select_range(t, r0, r1, err, errlen);
        trace_free(t);
        if (!part)
            return -1;
        t = part;
    }
    if (o->progress)
        o->progress(o->progress_ctx, 1.0);
    *out = t;
    return 0;
}


int trace_read_header(const char *path, trace_header_t *h, char *err, size_t errlen)
{
    import_format fmt = import_sniff(path);
    if (fmt != IMPORT_UNKNOWN) {
        trace_t *t;
        if (foreign_import(path, fmt, &t, err, errlen))
            return -1;
        header_of(t, h);
        trace_free(t);
        return 0;
    }
    hid_t f = h5u_open_read(path, err, errlen);
    if (f < 0)
        return -1;
    int rc = read_header(f, h, path, err, errlen);
    H5Fclose(f);
    return rc;
}

/* --- loading --------------------------------------------------------- */

typedef struct load {
    hid_t f;
    const char *path;
    trace_header_t h;
    int64_t r0, r1;          /* rows being loaded: [r0, r1), or the list */
    const int64_t *rows;     /* ascending file rows, NULL: [r0, r1) */
    int64_t nrows;           /* rows loaded (r1 - r0 without a list) */
    unsigned drop;           /* TRACE_DROP_* datasets not read */
    double planned;          /* bytes this load will allocate so far */
    trace_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    double cube_bytes, cube_done; /* of the count/gate matrices */
    char *err;
    size_t errlen;
} load_t;

/* Add `bytes` to the plan and refuse when the plan exceeds the machine's
 * memory: called before each allocation, so a lying header allocates
 * nothing. */
static int reserve(load_t *ld, double bytes, const char *what)
{
    double mem = (double)eldr_phys_mem();
    ld->planned += bytes;
    if (mem > 0 && ld->planned > mem)
        return eldr_errf(ld->err, ld->errlen,
                         "%s: loading %s needs %.1f GiB (%.1f GiB in all), more than this "
                         "machine's %.1f GiB of memory",
                         ld->path, what, bytes / 1073741824.0, ld->planned / 1073741824.0,
                         mem / 1073741824.0);
    return 0;
}

static int reserve_dense(load_t *ld)
{
    const trace_header_t *h = &ld->h;
    double rows = (double)ld->nrows;
    /* per request: tokens, label, arrival, id pointer and a short id
     * string, three offsets */
    double per_row = 4 + 4 + 4 + 8 + 8 + 24 + 3 * 8;
    char what[128];
    snprintf(what, sizeof what, "%lld requests x %d layers x %d experts",
             (long long)ld->nrows, h->L, h->E);
    return reserve(ld, ld->cube_bytes + rows * per_row, what);
}

/* trace_new with the file name in front of its message. */
static trace_t *new_trace(load_t *ld)
{
    char why[ELDR_ERRLEN];
    trace_t *t = ld->drop & TRACE_DROP_COUNTS
                     ? trace_new_index(ld->nrows, ld->h.L, ld->h.E, ld->h.k, why, sizeof why)
                     : trace_new(ld->nrows, ld->h.L, ld->h.E, ld->h.k, why, sizeof why);
    if (!t)
        eldr_errf(ld->err, ld->errlen, "%s: %s", ld->path, why);
    return t;
}

/* Without a progress callback one read; with one, slabs of about 16 MB
 * (a few chunks each: deflate is per chunk, so slabs cost little). */
static int read_cube(load_t *ld, const char *name, hid_t mt, void *buf)
{
    hsize_t d[3] = {(hsize_t)ld->h.n, (hsize_t)ld->h.L, (hsize_t)ld->h.E};
    if (ld->rows)
        return h5u_read_row_list(ld->f, name, mt, 3, d, ld->rows, ld->nrows, buf, ld->path,
                                 ld->err, ld->errlen);
    if (!ld->progress)
        return h5u_read_rows(ld->f, name, mt, 3, d, (hsize_t)ld->r0, (hsize_t)ld->r1, buf,
                             ld->path, ld->err, ld->errlen);
    size_t row_bytes = H5Tget_size(mt) * (size_t)ld->h.L * (size_t)ld->h.E;
    int64_t slab = (int64_t)((16u << 20) / (row_bytes ? row_bytes : 1));
    if (slab < 1)
        slab = 1;
    for (int64_t r = ld->r0; r < ld->r1; r += slab) {
        int64_t e = r + slab < ld->r1 ? r + slab : ld->r1;
        if (h5u_read_rows(ld->f, name, mt, 3, d, (hsize_t)r, (hsize_t)e,
                          (char *)buf + (size_t)(r - ld->r0) * row_bytes, ld->path, ld->err,
                          ld->errlen))
            return -1;
        ld->cube_done += (double)(e - r) * (double)row_bytes;
        if (ld->cube_bytes > 0)
            ld->progress(ld->progress_ctx, 0.95 * ld->cube_done / ld->cube_bytes);
    }
    return 0;
}

static int read_vec(load_t *ld, const char *name, hid_t mt, void *buf)
{
    hsize_t d[1] = {(hsize_t)ld->h.n};
    if (ld->rows) {
        /* a vector is 4 or 8 bytes a request: read its span, then gather */
        if (!ld->nrows)
            return 0;
        size_t es = H5Tget_size(mt);
        hsize_t a = (hsize_t)ld->rows[0], b = (hsize_t)ld->rows[ld->nrows - 1] + 1;
        char *all = malloc((size_t)(b - a) * es);
        if (!all)
            return eldr_errf(ld->err, ld->errlen, "%s: out of memory for %s", ld->path, name);
        int rc = h5u_read_rows(ld->f, name, mt, 1, d, a, b, all, ld->path, ld->err, ld->errlen);
        for (int64_t i = 0; rc == 0 && i < ld->nrows; i++)
            memcpy((char *)buf + (size_t)i * es, all + (size_t)((hsize_t)ld->rows[i] - a) * es,
                   es);
        free(all);
        return rc;
    }
    return h5u_read_rows(ld->f, name, mt, 1, d, (hsize_t)ld->r0, (hsize_t)ld->r1, buf, ld->path,
                         ld->err, ld->errlen);
}

/* Request ids of the listed rows: the span's strings, the others freed. */
static int read_ids(load_t *ld, trace_t *t)
{
    if (!ld->rows)
        return h5u_read_strings(ld->f, DS_REQUEST_ID, (hsize_t)ld->h.n, (hsize_t)ld->r0,
                                (hsize_t)ld->r1, &t->request_id, ld->path, ld->err, ld->errlen);
    if (!(t->request_id = eldr_calloc((size_t)ld->nrows + 1, sizeof *t->request_id)))
        return eldr_errf(ld->err, ld->errlen, "%s: out of memory for %s", ld->path,
                         DS_REQUEST_ID);
    if (!ld->nrows)
        return 0;
    hsize_t a = (hsize_t)ld->rows[0], b = (hsize_t)ld->rows[ld->nrows - 1] + 1;
    char **span;
    if (h5u_read_strings(ld->f, DS_REQUEST_ID, (hsize_t)ld->h.n, a, b, &span, ld->path,
                         ld->err, ld->errlen))
        return -1;
    for (int64_t i = 0; i < ld->nrows; i++) {
        char **s = &span[(hsize_t)ld->rows[i] - a];
        t->request_id[i] = *s;
        *s = NULL;
    }
    for (hsize_t i = 0; i < b - a; i++)
        free(span[i]);
    free(span);
    return 0;
}

/* The datasets this load reads, from the header and the drop flags. */
static unsigned loaded(const load_t *ld)
{
    unsigned has = ld->h.has;
    if (ld->drop & TRACE_DROP_GATES)
        has &= ~(unsigned)(TRACE_HAS_GATE_PROB | TRACE_HAS_GATE_LOGIT);
    if (ld->drop & TRACE_DROP_IDS)
        has &= ~(unsigned)TRACE_HAS_REQUEST_ID;
    return has;
}

static int read_dense(load_t *ld, trace_t *t)
{
    unsigned has = loaded(ld);
    int cubes = !(ld->drop & TRACE_DROP_COUNTS);
    memcpy(t->model, ld->h.model, sizeof t->model);
    unsigned alloc = has & ~(unsigned)TRACE_HAS_REQUEST_ID;
    if (!cubes)  /* an index: the vectors, no matrix */
        alloc &= ~(unsigned)(TRACE_HAS_GATE_PROB | TRACE_HAS_GATE_LOGIT | TRACE_HAS_DECODE);
    if (trace_alloc_optional(t, alloc, ld->err, ld->errlen))
        return -1;
    if (!cubes && (has & TRACE_HAS_DECODE) &&
        !(t->decode_tokens = eldr_calloc((size_t)ld->nrows + 1, sizeof *t->decode_tokens)))
        return eldr_errf(ld->err, ld->errlen, "%s: out of memory for %s", ld->path,
                         DS_DECODE_TOK);
    if ((cubes && read_cube(ld, DS_PREFILL, H5T_NATIVE_UINT16, t->prefill_counts)) ||
        read_vec(ld, DS_PROMPT, H5T_NATIVE_INT32, t->prompt_tokens))
        return -1;
    if ((has & TRACE_HAS_DECODE) &&
        ((cubes && read_cube(ld, DS_DECODE, H5T_NATIVE_UINT16, t->decode_counts)) ||
         read_vec(ld, DS_DECODE_TOK, H5T_NATIVE_INT32, t->decode_tokens)))
        return -1;
    if (cubes && (has & TRACE_HAS_GATE_PROB) &&
        read_cube(ld, DS_GATE_PROB, H5T_NATIVE_FLOAT, t->gate_prob))
        return -1;
    if (cubes && (has & TRACE_HAS_GATE_LOGIT) &&
        read_cube(ld, DS_GATE_LOGIT, H5T_NATIVE_FLOAT, t->gate_logit))
        return -1;
    if ((has & TRACE_HAS_ARRIVAL) && read_vec(ld, DS_ARRIVAL, H5T_NATIVE_DOUBLE, t->arrival_s))
        return -1;
    if ((has & TRACE_HAS_UNROUTED) &&
        read_vec(ld, DS_UNROUTED, H5T_NATIVE_INT32, t->prefill_unrouted))
        return -1;
    if (has & TRACE_HAS_LABEL) {
        /* the names are not rows: a header claiming 2^31 of them must be
         * refused here, before h5u_read_strings allocates a pointer and a
         * string for each (a pointer, a small string, HDF5's own copy).
         * The memory check first, so a wild claim is told the size it
         * asks for; then the format's fixed cap. */
        if (reserve(ld, (double)ld->h.n_labels * 48.0, DS_LABEL_NAMES))
            return -1;
        if (ld->h.n_labels > TRACE_MAX_LABELS)
            return eldr_errf(ld->err, ld->errlen,
                             "%s: dataset %s has %d names, more than the limit of %d", ld->path,
                             DS_LABEL_NAMES, ld->h.n_labels, TRACE_MAX_LABELS);
        if (read_vec(ld, DS_LABEL, H5T_NATIVE_INT32, t->label) ||
            h5u_read_strings(ld->f, DS_LABEL_NAMES, (hsize_t)ld->h.n_labels, 0,
                             (hsize_t)ld->h.n_labels, &t->label_names, ld->path, ld->err,
                             ld->errlen))
            return -1;
        t->n_labels = ld->h.n_labels;
    }
    if ((has & TRACE_HAS_REQUEST_ID) && read_ids(ld, t))
        return -1;
    return 0;
}

/* Read offsets [r0, r1] of an offsets dataset with `total` data rows,
 * check them (they decide which rows get read), and rebase them to 0.
 * *first is the file row of the first data row. */
static int read_offsets(load_t *ld, const char *name, int64_t total, int64_t **out, int64_t *first)
{
    int64_t rows = ld->r1 - ld->r0;
    hsize_t d[1] = {(hsize_t)ld->h.n + 1};
    int64_t *off = eldr_calloc((size_t)rows + 1, sizeof *off);
    if (!off)
        return eldr_errf(ld->err, ld->errlen, "%s: out of memory for %s", ld->path, name);
    if (h5u_read_rows(ld->f, name, H5T_NATIVE_INT64, 1, d, (hsize_t)ld->r0,
                      (hsize_t)ld->r1 + 1, off, ld->path, ld->err, ld->errlen))
        goto fail;
    if (ld->r0 == 0 && off[0] != 0) {
        eldr_errf(ld->err, ld->errlen, "%s: %s row 0: %lld, expected 0", ld->path, name,
                  (long long)off[0]);
        goto fail;
    }
    for (int64_t i = 0; i <= rows; i++) {
        if (off[i] < 0 || off[i] > total || (i > 0 && off[i] < off[i - 1])) {
            eldr_errf(ld->err, ld->errlen,
                      "%s: %s row %lld: %lld is not in [previous offset, %lld data rows]",
                      ld->path, name, (long long)(ld->r0 + i), (long long)off[i],
                      (long long)total);
            goto fail;
        }
    }
    if (ld->r1 == ld->h.n && off[rows] != total) {
        eldr_errf(ld->err, ld->errlen, "%s: %s row %lld: last offset %lld, expected %lld data rows",
                  ld->path, name, (long long)ld->h.n, (long long)off[rows], (long long)total);
        goto fail;
    }
    *first = off[0];
    for (int64_t i = rows; i >= 0; i--)
        off[i] -= off[0];
    *out = off;
    return 0;
fail:
    free(off);
    return -1;
}

/* Rows [first, first + count) of a [T, L, k] dataset. */
static int read_token_rows(load_t *ld, const char *name, int64_t T, hid_t mt, size_t esize,
                           int64_t first, int64_t count, void **out)
{
    size_t width = (size_t)ld->h.L * (size_t)ld->h.k;
    char what[160];
    snprintf(what, sizeof what, "%s (%lld token rows)", name, (long long)count);
    if (reserve(ld, (double)count * (double)width * (double)esize, what))
        return -1;
    void *buf = eldr_calloc((size_t)count * width, esize);
    if (!buf)
        return eldr_errf(ld->err, ld->errlen, "%s: out of memory for %s", ld->path, name);
    hsize_t d[3] = {(hsize_t)T, (hsize_t)ld->h.L, (hsize_t)ld->h.k};
    if (h5u_read_rows(ld->f, name, mt, 3, d, (hsize_t)first, (hsize_t)(first + count), buf,
                      ld->path, ld->err, ld->errlen)) {
        free(buf);
        return -1;
    }
    *out = buf;
    return 0;
}

/* A token-level set (offsets, then data rows of width `width` elements
 * of esize bytes) for the listed rows: all offsets, checked, then the
 * data of each run of consecutive listed rows in one read. */
static int read_token_list(load_t *ld, const char *off_name, int64_t total, const char *name,
                           hid_t mt, size_t esize, size_t width, int64_t **out_off, void **out,
                           const char *probs_name, float **probs_out)
{
    int64_t *all = NULL, first, n = ld->nrows;
    const int64_t *rows = ld->rows;
    int64_t r0 = ld->r0, r1 = ld->r1;
    ld->r0 = 0, ld->r1 = ld->h.n, ld->rows = NULL;
    int rc = read_offsets(ld, off_name, total, &all, &first);
    ld->r0 = r0, ld->r1 = r1, ld->rows = rows;
    if (rc)
        return -1;
    int64_t *off = eldr_calloc((size_t)n + 1, sizeof *off);
    if (!off) {
        free(all);
        return eldr_errf(ld->err, ld->errlen, "%s: out of memory for %s", ld->path, off_name);
    }
    for (int64_t i = 0; i < n; i++)
        off[i + 1] = off[i] + all[rows[i] + 1] - all[rows[i]];
    char what[160];
    snprintf(what, sizeof what, "%s (%lld token rows)", name, (long long)off[n]);
    void *buf = NULL;
    float *pb = NULL;
    hsize_t d[3] = {(hsize_t)total, (hsize_t)ld->h.L, (hsize_t)ld->h.k};
    int rank = width == 1 ? 1 : 3;
    if (reserve(ld, (double)off[n] * (double)width * (double)(esize + (probs_out ? 4 : 0)),
                what) ||
        !(buf = eldr_calloc((size_t)off[n] * width + 1, esize)) ||
        (probs_out && !(pb = eldr_calloc((size_t)off[n] * width + 1, sizeof *pb)))) {
        if (!buf || (probs_out && !pb))
            eldr_errf(ld->err, ld->errlen, "%s: out of memory for %s", ld->path, name);
        goto fail;
    }
    for (int64_t i = 0; i < n;) {
        int64_t j = i;
        while (j + 1 < n && rows[j + 1] == rows[j] + 1)
            j++;
        hsize_t a = (hsize_t)all[rows[i]], b = (hsize_t)all[rows[j] + 1];
        if (b > a &&
            (h5u_read_rows(ld->f, name, mt, rank, d, a, b,
                           (char *)buf + (size_t)off[i] * width * esize, ld->path, ld->err,
                           ld->errlen) ||
             (pb && h5u_read_rows(ld->f, probs_name, H5T_NATIVE_FLOAT, rank, d, a, b,
                                  pb + (size_t)off[i] * width, ld->path, ld->err,
                                  ld->errlen))))
            goto fail;
        i = j + 1;
    }
    free(all);
    *out_off = off;
    *out = buf;
    if (probs_out)
        *probs_out = pb;
    return 0;
fail:
    free(all);
    free(off);
    free(buf);
    free(pb);
    return -1;
}

static int read_tokens_list(load_t *ld, trace_t *t)
{
    const trace_header_t *h = &ld->h;
    size_t width = (size_t)h->L * (size_t)h->k;
    unsigned drop = ld->drop;
    int prefill = !(drop & (TRACE_DROP_TOKENS | TRACE_DROP_PREFILL));
    int probs = h->has_decode_probs && !(drop & (TRACE_DROP_TOKENS | TRACE_DROP_PROBS));
    if (prefill && h->has_tokens_prefill &&
        read_token_list(ld, DS_P_OFFSETS, h->t_prefill, DS_P_EXPERTS, H5T_NATIVE_UINT16,
                        sizeof(uint16_t), width, &t->prefill_offsets,
                        (void **)&t->prefill_experts, NULL, NULL))
        return -1;
    if (!(drop & TRACE_DROP_TOKENS) && h->has_tokens_decode &&
        read_token_list(ld, DS_D_OFFSETS, h->t_decode, DS_D_EXPERTS, H5T_NATIVE_UINT16,
                        sizeof(uint16_t), width, &t->decode_offsets, (void **)&t->decode_experts,
                        DS_D_PROBS, probs ? &t->decode_probs : NULL))
        return -1;
    if (prefill && h->has_blocks &&
        read_token_list(ld, DS_B_OFFSETS, h->n_blocks, DS_B_HASHES, H5T_NATIVE_UINT64,
                        sizeof(uint64_t), 1, &t->block_offsets, (void **)&t->block_hashes, NULL,
                        NULL))
        return -1;
    return 0;
}

static int read_tokens(load_t *ld, trace_t *t)
{
    if (ld->drop & TRACE_DROP_COUNTS)   /* token rows need their counts */
        return 0;
    if (ld->rows)
        return read_tokens_list(ld, t);
    unsigned drop = ld->drop;
    int prefill = !(drop & (TRACE_DROP_TOKENS | TRACE_DROP_PREFILL));
    int probs = !(drop & (TRACE_DROP_TOKENS | TRACE_DROP_PROBS));
    int64_t first, rows = ld->r1 - ld->r0;
    const trace_header_t *h = &ld->h;
    if (prefill && h->has_tokens_prefill &&
        (read_offsets(ld, DS_P_OFFSETS, h->t_prefill, &t->prefill_offsets, &first) ||
         read_token_rows(ld, DS_P_EXPERTS, h->t_prefill, H5T_NATIVE_UINT16, sizeof(uint16_t),
                         first, t->prefill_offsets[rows], (void **)&t->prefill_experts)))
        return -1;
    if (!(drop & TRACE_DROP_TOKENS) && h->has_tokens_decode &&
        (read_offsets(ld, DS_D_OFFSETS, h->t_decode, &t->decode_offsets, &first) ||
         read_token_rows(ld, DS_D_EXPERTS, h->t_decode, H5T_NATIVE_UINT16, sizeof(uint16_t),
                         first, t->decode_offsets[rows], (void **)&t->decode_experts)))
        return -1;
    if (probs && h->has_decode_probs && h->has_tokens_decode &&
        read_token_rows(ld, DS_D_PROBS, h->t_decode, H5T_NATIVE_FLOAT, sizeof(float), first,
                        t->decode_offsets[rows], (void **)&t->decode_probs))
        return -1;
    if (!prefill || !h->has_blocks)
        return 0;
    if (read_offsets(ld, DS_B_OFFSETS, h->n_blocks, &t->block_offsets, &first))
        return -1;
    int64_t count = t->block_offsets[rows];
    if (reserve(ld, (double)count * 8.0, DS_B_HASHES))
        return -1;
    if (!(t->block_hashes = eldr_calloc((size_t)count, sizeof(uint64_t))))
        return eldr_errf(ld->err, ld->errlen, "%s: out of memory for %s", ld->path, DS_B_HASHES);
    hsize_t d[1] = {(hsize_t)h->n_blocks};
    return h5u_read_rows(ld->f, DS_B_HASHES, H5T_NATIVE_UINT64, 1, d, (hsize_t)first,
                         (hsize_t)(first + count), t->block_hashes, ld->path, ld->err,
                         ld->errlen);
}

/* Bytes of the count and gate matrices of the rows being loaded. */
static double cube_bytes(const load_t *ld)
{
    if (ld->drop & TRACE_DROP_COUNTS)
        return 0;
    unsigned has = loaded(ld);
    double per_cell = 2.0 + (has & TRACE_HAS_DECODE ? 2.0 : 0.0) +
                      (has & TRACE_HAS_GATE_PROB ? 4.0 : 0.0) +
                      (has & TRACE_HAS_GATE_LOGIT ? 4.0 : 0.0);
    return (double)ld->nrows * ld->h.L * ld->h.E * per_cell;
}


/* Rows [r0, r1) (r1 < 0: to the end), or o->rows, of a file. */
static int load(const char *path, int64_t r0, int64_t r1, const trace_load_opts *o,
                trace_t **out, char *err, size_t errlen)
{
    load_t ld = {.path = path, .r0 = r0, .r1 = r1, .err = err, .errlen = errlen,
                 .progress = o->progress, .progress_ctx = o->progress_ctx, .rows = o->rows,
                 .nrows = o->n_rows, .drop = o->drop};
    trace_t *t = NULL;
    int rc = -1;
    *out = NULL;
    import_format fmt = import_sniff(path);
    if (fmt != IMPORT_UNKNOWN)
        return foreign_load(path, fmt, r0, r1, o, out, err, errlen);
    ld.f = h5u_open_read(path, err, errlen);
    if (ld.f < 0)
        return -1;
    if (read_header(ld.f, &ld.h, path, err, errlen))
        goto done;
    if (ld.r1 < 0)
        ld.r1 = ld.h.n;
    if (ld.r0 < 0 || ld.r1 < ld.r0 || ld.r1 > ld.h.n) {
        eldr_errf(err, errlen, "%s: rows [%lld, %lld) outside the file's [0, %lld)", path,
                  (long long)r0, (long long)r1, (long long)ld.h.n);
        goto done;
    }
    if (!ld.rows)
        ld.nrows = ld.r1 - ld.r0;
    else if (check_row_list(ld.rows, ld.nrows, ld.h.n, path, err, errlen))
        goto done;
    ld.cube_bytes = cube_bytes(&ld);
    /* a list's rows are named by their place in it: row0 0 */
    if (reserve_dense(&ld) || !(t = new_trace(&ld)) || read_dense(&ld, t) ||
        read_tokens(&ld, t) ||
        (ld.drop & TRACE_DROP_COUNTS ? trace_validate_index(t, path, err, errlen)
                                     : trace_validate_at(t, ld.rows ? 0 : ld.r0, path, err,
                                                         errlen)))
        goto done;
    if (ld.progress)
        ld.progress(ld.progress_ctx, 1.0);
    rc = 0;
done:
    H5Fclose(ld.f);
    if (rc)
        trace_free(t);
    else
        *out = t;
    return rc;
}

int trace_load_some(const char *path, const trace_load_opts *o, trace_t **out, char *err,
                    size_t errlen)
{
    return load(path, 0, -1, o, out, err, errlen);
}

int trace_load(const char *path, trace_t **out, char *err, size_t errlen)
{
    trace_load_opts o = {0};
    return load(path, 0, -1, &o, out, err, errlen);
}

int trace_load_progress(const char *path, trace_progress_fn fn, void *ctx, trace_t **out,
                        char *err, size_t errlen)
{
    trace_load_opts o = {.progress = fn, .progress_ctx = ctx};
    return load(path, 0, -1, &o, out, err, errlen);
}

int trace_load_rows(const char *path, int64_t r0, int64_t r1, trace_t **out, char *err,
                    size_t errlen)
{
    if (r1 < 0) {
        *out = NULL;
        return eldr_errf(err, errlen, "%s: bad row range [%lld, %lld)", path, (long long)r0,
                         (long long)r1);
    }
    trace_load_opts o = {0};
    return load(path, r0, r1, &o, out, err, errlen);
}

/* --- saving ---------------------------------------------------------- */

typedef struct save {
    hid_t f;
    const trace_t *t;
    const char *path;
    hsize_t cube_chunk;      /* request rows per chunk of [N, L, E] */
    char *err;
    size_t errlen;
} save_t;

static int write_cube(save_t *s, const char *name, hid_t mt, hid_t ft, const void *buf)
{
    hsize_t d[3] = {(hsize_t)s->t->n, (hsize_t)s->t->L, (hsize_t)s->t->E};
    return h5u_write(s->f, name, mt, ft, 3, d, s->cube_chunk, buf, s->path, s->err, s->errlen);
}

static int write_vec(save_t *s, const char *name, hsize_t n, hid_t mt, hid_t ft, const void *buf)
{
    return h5u_write(s->f, name, mt, ft, 1, &n, 0, buf, s->path, s->err, s->errlen);
}

static int write_attrs(save_t *s)
{
    const trace_t *t = s->t;
    return h5u_write_str_attr(s->f, "format", TRACE_FORMAT, s->path, s->err, s->errlen) ||
                   h5u_write_int_attr(s->f, "version", TRACE_VERSION, s->path, s->err,
                                      s->errlen) ||
                   h5u_write_str_attr(s->f, "model", t->model, s->path, s->err, s->errlen) ||
                   h5u_write_int_attr(s->f, "layers", t->L, s->path, s->err, s->errlen) ||
                   h5u_write_int_attr(s->f, "experts", t->E, s->path, s->err, s->errlen) ||
                   h5u_write_int_attr(s->f, "top_k", t->k, s->path, s->err, s->errlen)
               ? -1
               : 0;
}

static int write_dense(save_t *s)
{
    const trace_t *t = s->t;
    hsize_t n = (hsize_t)t->n;
    if (write_cube(s, DS_PREFILL, H5T_NATIVE_UINT16, H5T_STD_U16LE, t->prefill_counts) ||
        write_vec(s, DS_PROMPT, n, H5T_NATIVE_INT32, H5T_STD_I32LE, t->prompt_tokens))
        return -1;
    if (t->decode_counts &&
        (write_cube(s, DS_DECODE, H5T_NATIVE_UINT16, H5T_STD_U16LE, t->decode_counts) ||
         write_vec(s, DS_DECODE_TOK, n, H5T_NATIVE_INT32, H5T_STD_I32LE, t->decode_tokens)))
        return -1;
    if (t->gate_prob &&
        write_cube(s, DS_GATE_PROB, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, t->gate_prob))
        return -1;
    if (t->gate_logit &&
        write_cube(s, DS_GATE_LOGIT, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, t->gate_logit))
        return -1;
    if (t->label &&
        (write_vec(s, DS_LABEL, n, H5T_NATIVE_INT32, H5T_STD_I32LE, t->label) ||
         h5u_write_strings(s->f, DS_LABEL_NAMES, (hsize_t)t->n_labels,
                           (const char *const *)t->label_names, s->path, s->err, s->errlen)))
        return -1;
    if (t->arrival_s &&
        write_vec(s, DS_ARRIVAL, n, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, t->arrival_s))
        return -1;
    if (t->prefill_unrouted &&
        write_vec(s, DS_UNROUTED, n, H5T_NATIVE_INT32, H5T_STD_I32LE, t->prefill_unrouted))
        return -1;
    if (t->request_id && h5u_write_strings(s->f, DS_REQUEST_ID, n,
                                           (const char *const *)t->request_id, s->path, s->err,
                                           s->errlen))
        return -1;
    return 0;
}

static int write_token_set(save_t *s, const char *ex_name, const char *off_name,
                           const int64_t *off, const uint16_t *experts)
{
    const trace_t *t = s->t;
    hsize_t d[3] = {(hsize_t)off[t->n], (hsize_t)t->L, (hsize_t)t->k};
    /* ids fit a byte for E <= 256: half the bytes, and readers take either */
    hid_t ft = t->E <= 256 ? H5T_STD_U8LE : H5T_STD_U16LE;
    return h5u_write(s->f, ex_name, H5T_NATIVE_UINT16, ft, 3, d, 0, experts, s->path, s->err,
                     s->errlen) ||
                   write_vec(s, off_name, (hsize_t)t->n + 1, H5T_NATIVE_INT64, H5T_STD_I64LE, off)
               ? -1
               : 0;
}

static int write_tokens(save_t *s)
{
    const trace_t *t = s->t;
    if (t->prefill_experts &&
        write_token_set(s, DS_P_EXPERTS, DS_P_OFFSETS, t->prefill_offsets, t->prefill_experts))
        return -1;
    if (t->decode_experts &&
        write_token_set(s, DS_D_EXPERTS, DS_D_OFFSETS, t->decode_offsets, t->decode_experts))
        return -1;
    if (t->decode_probs) {
        hsize_t d[3] = {(hsize_t)t->decode_offsets[t->n], (hsize_t)t->L, (hsize_t)t->k};
        if (h5u_write(s->f, DS_D_PROBS, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, 3, d, 0, t->decode_probs,
                      s->path, s->err, s->errlen))
            return -1;
    }
    if (t->block_hashes &&
        (write_vec(s, DS_B_HASHES, (hsize_t)t->block_offsets[t->n], H5T_NATIVE_UINT64,
                   H5T_STD_U64LE, t->block_hashes) ||
         write_vec(s, DS_B_OFFSETS, (hsize_t)t->n + 1, H5T_NATIVE_INT64, H5T_STD_I64LE,
                   t->block_offsets)))
        return -1;
    return 0;
}

int trace_save(const trace_t *t, const char *path, char *err, size_t errlen)
{
    /* the loader would refuse an invalid trace: never write one */
    char where[PATH_MAX + 16];
    snprintf(where, sizeof where, "%s (not saved)", path);
    if (trace_validate(t, where, err, errlen))
        return -1;
    if (t->label && t->n_labels > TRACE_MAX_LABELS)
        return eldr_errf(err, errlen, "%s: %d label names, more than the limit of %d", where,
                         t->n_labels, TRACE_MAX_LABELS);
    h5u_save_t hs;
    if (h5u_save_begin(&hs, path, err, errlen))
        return -1;
    size_t row_bytes = TRACE_CELLS(t) * sizeof(uint16_t);
    hsize_t chunk = row_bytes >= COUNT_CHUNK_BYTES ? 1 : COUNT_CHUNK_BYTES / row_bytes;
    save_t s = {.f = hs.file, .t = t, .path = path, .err = err, .errlen = errlen,
                .cube_chunk = chunk < COUNT_CHUNK_MAX_ROWS ? chunk : COUNT_CHUNK_MAX_ROWS};
    if (write_attrs(&s) || write_dense(&s) || write_tokens(&s)) {
        h5u_save_abort(&hs);
        return -1;
    }
    return h5u_save_commit(&hs, err, errlen);
}
