/* trace_mem.c - allocation, ownership and row selection of trace_t
 * (see trace.h). The HDF5 file side is in trace_io.c, the invariants in
 * trace_validate.c. */
#include "trace.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

#define MAX_LAYERS 4096
#define MAX_EXPERTS 65535

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Refuse sizes above physical memory before allocating: a header that
 * claims a terabyte must cost nothing. bytes_per_cell counts every
 * [n][L][E] array the caller intends to hold. */
static int check_size(int64_t n, int L, int E, size_t bytes_per_cell,
                      char *err, size_t errlen)
{
    double cells = (double)n * (double)L * (double)E;
    double need = cells * (double)bytes_per_cell + (double)n * 64.0;
    size_t mem = eldr_phys_mem();
    if (mem && need > (double)mem)
        return eldr_errf(err, errlen,
                         "trace of %lld requests x %d layers x %d experts needs %.1f GiB, "
                         "more than this machine's %.1f GiB of memory",
                         (long long)n, L, E, need / 1073741824.0,
                         (double)mem / 1073741824.0);
    return 0;
}

static int geometry_ok(int64_t n, int L, int E, int k, char *err, size_t errlen)
{
    if (n < 0 || L < 1 || L > MAX_LAYERS || E < 1 || E > MAX_EXPERTS || k < 1 || k > E)
        return eldr_errf(err, errlen,
                         "bad trace geometry: requests=%lld layers=%d experts=%d top_k=%d "
                         "(need requests >= 0, 1 <= layers <= %d, 1 <= experts <= %d, 1 <= "
                         "top_k <= experts)",
                         (long long)n, L, E, k, MAX_LAYERS, MAX_EXPERTS);
    return 0;
}

trace_t *trace_new(int64_t n, int L, int E, int k, char *err, size_t errlen)
{
    if (geometry_ok(n, L, E, k, err, errlen))
        return NULL;
    if (check_size(n, L, E, sizeof(uint16_t), err, errlen))
        return NULL;
    trace_t *t = calloc(1, sizeof *t);
    if (!t) {
        eldr_errf(err, errlen, "out of memory");
        return NULL;
    }
    t->n = n;
    t->L = L;
    t->E = E;
    t->k = k;
    t->prefill_counts = eldr_calloc((size_t)n * TRACE_CELLS(t), sizeof(uint16_t));
    t->prompt_tokens = eldr_calloc((size_t)n, sizeof(int32_t));
    if (!t->prefill_counts || !t->prompt_tokens) {
        trace_free(t);
        eldr_errf(err, errlen, "out of memory for %lld requests", (long long)n);
        return NULL;
    }
    return t;
}

trace_t *trace_new_index(int64_t n, int L, int E, int k, char *err, size_t errlen)
{
    if (geometry_ok(n, L, E, k, err, errlen) || check_size(n, 1, 1, 0, err, errlen))
        return NULL;
    trace_t *t = calloc(1, sizeof *t);
    if (!t || !(t->prompt_tokens = eldr_calloc((size_t)n + 1, sizeof(int32_t)))) {
        free(t);
        eldr_errf(err, errlen, "out of memory for an index of %lld requests", (long long)n);
        return NULL;
    }
    t->n = n;
    t->L = L;
    t->E = E;
    t->k = k;
    return t;
}

int trace_alloc_optional(trace_t *t, unsigned flags, char *err, size_t errlen)
{
    size_t cells = (size_t)t->n * TRACE_CELLS(t), n = (size_t)t->n;
    size_t per_cell = 0;
    if (flags & TRACE_HAS_DECODE)
        per_cell += sizeof(uint16_t);
    if (flags & TRACE_HAS_GATE_PROB)
        per_cell += sizeof(float);
    if (flags & TRACE_HAS_GATE_LOGIT)
        per_cell += sizeof(float);
    /* an index (no prefill_counts) holds no matrix: its vectors only */
    if (t->prefill_counts ? check_size(t->n, t->L, t->E, per_cell + sizeof(uint16_t), err, errlen)
                          : check_size(t->n, 1, 1, 0, err, errlen))
        return -1;
#define ALLOC(flag, field, count, type)                                     \
    if ((flags & (flag)) && !t->field) {                                     \
        t->field = eldr_calloc((count), sizeof(type));                       \
        if (!t->field)                                                       \
            return eldr_errf(err, errlen, "out of memory for " #field);      \
    }
    ALLOC(TRACE_HAS_DECODE, decode_counts, cells, uint16_t)
    ALLOC(TRACE_HAS_DECODE, decode_tokens, n, int32_t)
    ALLOC(TRACE_HAS_GATE_PROB, gate_prob, cells, float)
    ALLOC(TRACE_HAS_GATE_LOGIT, gate_logit, cells, float)
    ALLOC(TRACE_HAS_LABEL, label, n, int32_t)
    ALLOC(TRACE_HAS_ARRIVAL, arrival_s, n, double)
    ALLOC(TRACE_HAS_UNROUTED, prefill_unrouted, n, int32_t)
    ALLOC(TRACE_HAS_REQUEST_ID, request_id, n, char *)
#undef ALLOC
    return 0;
}

static void free_strings(char **s, int64_t n)
{
    if (!s)
        return;
    for (int64_t i = 0; i < n; i++)
        free(s[i]);
    free(s);
}

int trace_set_label_names(trace_t *t, int n_labels, const char *const *names,
                          char *err, size_t errlen)
{
    char **copy = eldr_calloc((size_t)(n_labels > 0 ? n_labels : 1), sizeof(char *));
    if (!copy)
        return eldr_errf(err, errlen, "out of memory for label_names");
    for (int i = 0; i < n_labels; i++) {
        copy[i] = xstrdup(names[i] ? names[i] : "");
        if (!copy[i]) {
            free_strings(copy, i);
            return eldr_errf(err, errlen, "out of memory for label_names");
        }
    }
    free_strings(t->label_names, t->n_labels);
    t->label_names = copy;
    t->n_labels = n_labels;
    return 0;
}

void trace_free(trace_t *t)
{
    if (!t)
        return;
    free(t->prefill_counts);
    free(t->prompt_tokens);
    free(t->decode_counts);
    free(t->decode_tokens);
    free(t->gate_prob);
    free(t->gate_logit);
    free(t->label);
    free_strings(t->label_names, t->n_labels);
    free(t->arrival_s);
    free(t->prefill_unrouted);
    free_strings(t->request_id, t->n);
    free(t->prefill_offsets);
    free(t->prefill_experts);
    free(t->decode_offsets);
    free(t->decode_experts);
    free(t->decode_probs);
    free(t->block_offsets);
    free(t->block_hashes);
    free(t);
}

/* Copy token rows of the selected requests, building new offsets. `width`
 * is the number of elements per token row (L*k), esize the element size.
 * probs (may be NULL) is sliced alongside with the same offsets. */
static int select_tokens(const int64_t *src_off, const void *src, const float *src_probs,
                         size_t width, size_t esize, const int64_t *rows, int64_t nrows,
                         int64_t **dst_off, void **dst, float **dst_probs)
{
    int64_t *off = malloc(((size_t)nrows + 1) * sizeof *off);
    if (!off)
        return -1;
    off[0] = 0;
    for (int64_t i = 0; i < nrows; i++)
        off[i + 1] = off[i] + (src_off[rows[i] + 1] - src_off[rows[i]]);
    size_t total = (size_t)off[nrows];
    char *d = eldr_calloc(total * width, esize);
    float *p = src_probs ? eldr_calloc(total * width, sizeof(float)) : NULL;
    if (!d || (src_probs && !p)) {
        free(off);
        free(d);
        free(p);
        return -1;
    }
    for (int64_t i = 0; i < nrows; i++) {
        size_t cnt = (size_t)(off[i + 1] - off[i]) * width;
        size_t from = (size_t)src_off[rows[i]] * width;
        memcpy(d + (size_t)off[i] * width * esize, (const char *)src + from * esize, cnt * esize);
        if (p)
            memcpy(p + (size_t)off[i] * width, src_probs + from, cnt * sizeof(float));
    }
    *dst_off = off;
    *dst = d;
    if (dst_probs)
        *dst_probs = p;
    return 0;
}

static void copy_cells(void *dst, const void *src, const trace_t *t, const int64_t *rows,
                       int64_t nrows, size_t esize)
{
    size_t row_bytes = TRACE_CELLS(t) * esize;
    for (int64_t i = 0; i < nrows; i++)
        memcpy((char *)dst + (size_t)i * row_bytes,
               (const char *)src + (size_t)rows[i] * row_bytes, row_bytes);
}

trace_t *trace_select(const trace_t *src, const int64_t *rows, int64_t nrows,
                      char *err, size_t errlen)
{
    return trace_select_some(src, rows, nrows, 0, err, errlen);
}

trace_t *trace_select_some(const trace_t *src, const int64_t *rows, int64_t nrows,
                           unsigned drop, char *err, size_t errlen)
{
    int probs = !(drop & (TRACE_DROP_PROBS | TRACE_DROP_TOKENS));
    for (int64_t i = 0; i < nrows; i++)
        if (rows[i] < 0 || rows[i] >= src->n) {
            eldr_errf(err, errlen, "row %lld out of range [0, %lld)",
                      (long long)rows[i], (long long)src->n);
            return NULL;
        }
    int index = (drop & TRACE_DROP_COUNTS) != 0;   /* vectors only */
    trace_t *t = index ? trace_new_index(nrows, src->L, src->E, src->k, err, errlen)
                       : trace_new(nrows, src->L, src->E, src->k, err, errlen);
    if (!t)
        return NULL;
    memcpy(t->model, src->model, sizeof t->model);
    unsigned flags = (src->decode_counts && !index ? TRACE_HAS_DECODE : 0) |
                     (src->gate_prob && !index ? TRACE_HAS_GATE_PROB : 0) |
                     (src->gate_logit && !index ? TRACE_HAS_GATE_LOGIT : 0) |
                     (src->label ? TRACE_HAS_LABEL : 0) |
                     (src->arrival_s ? TRACE_HAS_ARRIVAL : 0) |
                     (src->prefill_unrouted ? TRACE_HAS_UNROUTED : 0) |
                     (src->request_id ? TRACE_HAS_REQUEST_ID : 0);
    if (trace_alloc_optional(t, flags, err, errlen))
        goto fail;
    if (index && src->decode_tokens &&
        !(t->decode_tokens = calloc((size_t)nrows + 1, sizeof *t->decode_tokens)))
        goto oom;
    if (!index)
        copy_cells(t->prefill_counts, src->prefill_counts, src, rows, nrows, sizeof(uint16_t));
    if (src->decode_counts && !index)
        copy_cells(t->decode_counts, src->decode_counts, src, rows, nrows, sizeof(uint16_t));
    if (src->gate_prob && !index)
        copy_cells(t->gate_prob, src->gate_prob, src, rows, nrows, sizeof(float));
    if (src->gate_logit && !index)
        copy_cells(t->gate_logit, src->gate_logit, src, rows, nrows, sizeof(float));
    for (int64_t i = 0; i < nrows; i++) {
        int64_t r = rows[i];
        t->prompt_tokens[i] = src->prompt_tokens[r];
        if (src->decode_tokens)
            t->decode_tokens[i] = src->decode_tokens[r];
        if (src->label)
            t->label[i] = src->label[r];
        if (src->arrival_s)
            t->arrival_s[i] = src->arrival_s[r];
        if (src->prefill_unrouted)
            t->prefill_unrouted[i] = src->prefill_unrouted[r];
        if (src->request_id && !(t->request_id[i] = xstrdup(src->request_id[r] ? src->request_id[r] : "")))
            goto oom;
    }
    if (src->label_names &&
        trace_set_label_names(t, src->n_labels, (const char *const *)src->label_names, err, errlen))
        goto fail;
    size_t width = (size_t)src->L * (size_t)src->k;
    if (drop & (TRACE_DROP_TOKENS | TRACE_DROP_COUNTS))
        return t;
    int prefill = !(drop & TRACE_DROP_PREFILL);
    if (prefill && src->prefill_experts &&
        select_tokens(src->prefill_offsets, src->prefill_experts, NULL, width, sizeof(uint16_t),
                      rows, nrows, &t->prefill_offsets, (void **)&t->prefill_experts, NULL))
        goto oom;
    if (src->decode_experts &&
        select_tokens(src->decode_offsets, src->decode_experts,
                      probs ? src->decode_probs : NULL, width, sizeof(uint16_t), rows, nrows,
                      &t->decode_offsets, (void **)&t->decode_experts,
                      probs ? &t->decode_probs : NULL))
        goto oom;
    if (prefill && src->block_hashes &&
        select_tokens(src->block_offsets, src->block_hashes, NULL, 1, sizeof(uint64_t), rows,
                      nrows, &t->block_offsets, (void **)&t->block_hashes, NULL))
        goto oom;
    return t;
oom:
    eldr_errf(err, errlen, "out of memory selecting %lld rows", (long long)nrows);
fail:
    trace_free(t);
    return NULL;
}

/* Rows keep[] of an [n][width] array of esize bytes, moved down in place
 * (keep ascending: a row never moves up), then the array shrunk. */
static void *keep_cells(void *a, const int64_t *keep, int64_t n, size_t row_bytes)
{
    if (!a)
        return NULL;
    for (int64_t j = 0; j < n; j++)
        if (keep[j] != j)
            memmove((char *)a + (size_t)j * row_bytes, (char *)a + (size_t)keep[j] * row_bytes,
                    row_bytes);
    void *b = realloc(a, (size_t)(n ? n : 1) * row_bytes);
    return b ? b : a;   /* a failed shrink keeps the (larger) block */
}

/* Token-level rows of the kept requests moved down, offsets rebuilt. */
static void keep_tokens(int64_t *off, void **data, float **probs, const int64_t *keep, int64_t n,
                        size_t width, size_t esize)
{
    int64_t to = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t a = off[keep[j]], len = off[keep[j] + 1] - a;
        if (to != a) {
            memmove((char *)*data + (size_t)to * width * esize,
                    (char *)*data + (size_t)a * width * esize, (size_t)len * width * esize);
            if (probs && *probs)
                memmove(*probs + (size_t)to * width, *probs + (size_t)a * width,
                        (size_t)len * width * sizeof **probs);
        }
        off[j] = to;
        to += len;
    }
    off[n] = to;
    void *d = realloc(*data, (size_t)(to ? to : 1) * width * esize);
    if (d)
        *data = d;
    if (probs && *probs) {
        float *p = realloc(*probs, (size_t)(to ? to : 1) * width * sizeof *p);
        if (p)
            *probs = p;
    }
}

int trace_keep_rows(trace_t *t, const int64_t *keep, int64_t n, char *err, size_t errlen)
{
    for (int64_t j = 0; j < n; j++)
        if (keep[j] < 0 || keep[j] >= t->n || (j && keep[j] <= keep[j - 1]))
            return eldr_errf(err, errlen, "keep rows: entry %lld (row %lld) is not ascending "
                             "inside [0, %lld)", (long long)j, (long long)keep[j],
                             (long long)t->n);
    size_t cells = TRACE_CELLS(t), width = (size_t)t->L * (size_t)t->k;
    if (t->prefill_experts)
        keep_tokens(t->prefill_offsets, (void **)&t->prefill_experts, NULL, keep, n, width,
                    sizeof(uint16_t));
    if (t->decode_experts)
        keep_tokens(t->decode_offsets, (void **)&t->decode_experts, &t->decode_probs, keep, n,
                    width, sizeof(uint16_t));
    if (t->block_hashes)
        keep_tokens(t->block_offsets, (void **)&t->block_hashes, NULL, keep, n, 1,
                    sizeof(uint64_t));
    if (t->request_id) {   /* the dropped ids go */
        int64_t j = 0;
        for (int64_t r = 0; r < t->n; r++) {
            if (j < n && keep[j] == r)
                t->request_id[j++] = t->request_id[r];
            else
                free(t->request_id[r]);
        }
    }
    t->prefill_counts = keep_cells(t->prefill_counts, keep, n, cells * sizeof(uint16_t));
    t->decode_counts = keep_cells(t->decode_counts, keep, n, cells * sizeof(uint16_t));
    t->gate_prob = keep_cells(t->gate_prob, keep, n, cells * sizeof(float));
    t->gate_logit = keep_cells(t->gate_logit, keep, n, cells * sizeof(float));
    t->prompt_tokens = keep_cells(t->prompt_tokens, keep, n, sizeof(int32_t));
    t->decode_tokens = keep_cells(t->decode_tokens, keep, n, sizeof(int32_t));
    t->label = keep_cells(t->label, keep, n, sizeof(int32_t));
    t->arrival_s = keep_cells(t->arrival_s, keep, n, sizeof(double));
    t->prefill_unrouted = keep_cells(t->prefill_unrouted, keep, n, sizeof(int32_t));
    t->n = n;
    /* the offset arrays hold n + 1 entries now; their tails are unused */
    return 0;
}
