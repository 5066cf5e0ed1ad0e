/* trace.h - activation traces in memory, and the eldr-trace v1 HDF5 file.
 *
 * A trace holds, for N requests of a MoE model with L layers, E experts per
 * layer and top-k routing, the per-request expert counts of prefill (and
 * optionally decode), plus optional gate values, labels, arrival times, ids,
 * per-token expert ids and KV block hashes. The file format is specified in
 * docs/trace-format.md (the authoritative copy of DESIGN.md section 2).
 *
 * Ownership: a trace_t owns every array it points to; trace_free releases
 * all of it. Optional arrays are NULL when absent. Count matrices are
 * row-major [n][L][E]; index with TRACE_AT(t, r, l, e) or trace_row(). */
#ifndef ELDR_TRACE_H
#define ELDR_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_FORMAT "eldr-trace"
#define TRACE_VERSION 1
#define TRACE_MODEL_MAX 128

typedef struct trace {
    char model[TRACE_MODEL_MAX];   /* model name ("" if unknown) */
    int L, E, k;                   /* layers, experts per layer, top-k */
    int64_t n;                     /* requests */

    /* required */
    uint16_t *prefill_counts;      /* [n][L][E] */
    int32_t *prompt_tokens;        /* [n] */

    /* optional: decode_counts and decode_tokens come together */
    uint16_t *decode_counts;       /* [n][L][E] */
    int32_t *decode_tokens;        /* [n] */
    float *gate_prob;              /* [n][L][E] */
    float *gate_logit;             /* [n][L][E] */

    int32_t *label;                /* [n], each in [0, n_labels) */
    int n_labels;
    char **label_names;            /* [n_labels], owned strings */

    double *arrival_s;             /* [n] */
    /* prompt rows the engine returned no routing for (vLLM's prefix-cache
     * hits, -1): the prompt had prompt_tokens + prefill_unrouted tokens,
     * and prefill_counts and tokens/ hold the prompt_tokens routed ones */
    int32_t *prefill_unrouted;     /* [n], >= 0; NULL: every row was routed */
    char **request_id;             /* [n], owned strings */

    /* token level: request r owns token rows [off[r], off[r+1]);
     * off[0] == 0 in memory (rebased when a row range is loaded).
     * Each token row is [L][k] expert ids. */
    int64_t *prefill_offsets;      /* [n+1] */
    uint16_t *prefill_experts;     /* [T_prefill][L][k] */
    int64_t *decode_offsets;       /* [n+1] */
    uint16_t *decode_experts;      /* [T_decode][L][k] */
    float *decode_probs;           /* [T_decode][L][k], needs decode_experts */

    /* KV block hash chain of each prompt: request r owns hashes
     * [block_offsets[r], block_offsets[r+1]) */
    int64_t *block_offsets;        /* [n+1] */
    uint64_t *block_hashes;        /* [block_offsets[n]] */
} trace_t;

#define TRACE_CELLS(t) ((size_t)(t)->L * (size_t)(t)->E)
#define TRACE_AT(a, t, r, l, e) \
    ((a)[((size_t)(r) * (size_t)(t)->L + (size_t)(l)) * (size_t)(t)->E + (size_t)(e)])

/* Allocate an empty trace with geometry and the required arrays zeroed
 * (prefill_counts, prompt_tokens). Optional arrays stay NULL; allocate
 * them with trace_alloc_optional. NULL (with err) on bad geometry or
 * when the size would exceed physical memory. */
trace_t *trace_new(int64_t n, int L, int E, int k, char *err, size_t errlen);

/* Flags for trace_alloc_optional. */
enum {
    TRACE_HAS_DECODE = 1 << 0,     /* decode_counts + decode_tokens */
    TRACE_HAS_GATE_PROB = 1 << 1,
    TRACE_HAS_GATE_LOGIT = 1 << 2,
    TRACE_HAS_LABEL = 1 << 3,      /* label array (names set separately) */
    TRACE_HAS_ARRIVAL = 1 << 4,
    TRACE_HAS_REQUEST_ID = 1 << 5, /* array of NULL pointers to fill */
    TRACE_HAS_UNROUTED = 1 << 6,   /* prefill_unrouted_tokens */
};
int trace_alloc_optional(trace_t *t, unsigned flags, char *err, size_t errlen);

/* Set label names (copied). */
int trace_set_label_names(trace_t *t, int n_labels, const char *const *names,
                          char *err, size_t errlen);

/* An index trace (TRACE_DROP_COUNTS): geometry and prompt_tokens only,
 * prefill_counts NULL; refused only when its vectors exceed memory. */
trace_t *trace_new_index(int64_t n, int L, int E, int k, char *err, size_t errlen);

void trace_free(trace_t *t);

/* Load a whole trace file, validating it (see trace_validate). On failure
 * *out is NULL, nothing is leaked, and err names file, dataset, row. */
int trace_load(const char *path, trace_t **out, char *err, size_t errlen);

/* The same, calling fn(ctx, fraction) as the count matrices are read (in
 * slabs of about 16 MB; fractions ascend and end with 1.0): for a
 * progress bar on big traces. fn may be NULL. */
typedef void (*trace_progress_fn)(void *ctx, double fraction);
int trace_load_progress(const char *path, trace_progress_fn fn, void *ctx, trace_t **out,
                        char *err, size_t errlen);

/* A load that reads only what its command needs: the rows of a list
 * and not the dropped datasets (TRACE_DROP_* below). Counts stay in
 * their stored width (uint16); nothing is widened. With a row list the
 * count matrices are read in slabs of whole chunks and only the chunks
 * holding a listed row are inflated (h5u_read_row_list), so the peak is
 * the rows kept plus one slab, never the file. Validation names rows by
 * their place in the list. */
typedef struct trace_load_opts {
    unsigned drop;                 /* TRACE_DROP_* */
    const int64_t *rows;           /* ascending, distinct file rows; NULL: all */
    int64_t n_rows;
    trace_progress_fn progress;    /* may be NULL */
    void *progress_ctx;
} trace_load_opts;
int trace_load_some(const char *path, const trace_load_opts *o, trace_t **out, char *err,
                    size_t errlen);

/* Load rows [r0, r1) only; the other rows are not read. Token-level and
 * block datasets are sliced with their offsets and rebased to 0. */
int trace_load_rows(const char *path, int64_t r0, int64_t r1, trace_t **out,
                    char *err, size_t errlen);

/* Read only the header (geometry, n, which datasets exist) without the
 * bulk data: for `eldr info` on huge files and for memory checks. */
typedef struct trace_header {
    char model[TRACE_MODEL_MAX];
    int L, E, k;
    int64_t n;
    unsigned has;                  /* TRACE_HAS_* flags */
    int has_tokens_prefill, has_tokens_decode, has_decode_probs, has_blocks;
    int64_t t_prefill, t_decode, n_blocks; /* token rows, block hashes */
    int n_labels;
} trace_header_t;
int trace_read_header(const char *path, trace_header_t *h, char *err, size_t errlen);

/* Save atomically: written to "<path>.tmp.<pid>" then renamed over path.
 * A failed write removes the temporary and leaves any old file intact.
 * Chunked by request rows, deflate level 4. */
int trace_save(const trace_t *t, const char *path, char *err, size_t errlen);

/* Check the in-memory invariants the loader enforces: geometry, counts
 * conservation (sum_e c[r][l][e] == tokens[r] * k in every layer), no
 * expert above tokens[r], finite gates, labels in range, offsets monotone
 * and consistent with token counts, expert ids < E and distinct per token.
 * `where` prefixes the message (the file name, or "trace"). */
int trace_validate(const trace_t *t, const char *where, char *err, size_t errlen);
/* The same, naming rows as row0 + r: a row-range load reports rows as
 * they are numbered in the file. */
int trace_validate_at(const trace_t *t, int64_t row0, const char *where, char *err,
                      size_t errlen);

/* The checks of an index trace: its vectors (labels in range, finite
 * arrivals, tokens >= 0). */
int trace_validate_index(const trace_t *t, const char *where, char *err, size_t errlen);

/* Row views. */
static inline const uint16_t *trace_prefill_row(const trace_t *t, int64_t r)
{
    return t->prefill_counts + (size_t)r * TRACE_CELLS(t);
}
static inline const uint16_t *trace_decode_row(const trace_t *t, int64_t r)
{
    return t->decode_counts ? t->decode_counts + (size_t)r * TRACE_CELLS(t) : NULL;
}

/* A new trace holding the given rows (in that order) of src, every
 * dataset included. */
trace_t *trace_select(const trace_t *src, const int64_t *rows, int64_t nrows,
                      char *err, size_t errlen);

/* The same without some token-level datasets, which are most of a big
 * trace's bytes: what the grid's per-seed splits copy (a calibration part
 * needs no token rows; the simulator reads tokens/decode_experts only). */
#define TRACE_DROP_TOKENS 1u   /* every tokens/ dataset */
#define TRACE_DROP_PROBS 2u    /* tokens/decode_probs */
#define TRACE_DROP_PREFILL 4u  /* tokens/prefill_experts and the block hashes */
#define TRACE_DROP_GATES 8u    /* gate_prob and gate_logit (trace_load_some) */
#define TRACE_DROP_IDS 16u     /* request_id (trace_load_some) */
/* An index of the rows (trace_load_some, trace_select_some): every
 * per-request vector (tokens, labels, arrivals, ids), no count or gate
 * matrix and no token row (prefill_counts is NULL): what a command
 * chooses its rows from (the split, a sample) before it loads them, or
 * reads of rows it keeps in place in another trace (the dashboard). */
#define TRACE_DROP_COUNTS 32u
trace_t *trace_select_some(const trace_t *src, const int64_t *rows, int64_t nrows,
                           unsigned drop, char *err, size_t errlen);

/* Keep only rows keep[0..n) of t (ascending, distinct, each < t->n), in
 * place: every dataset's kept rows move down over the dropped ones and
 * the arrays shrink (token rows and offsets too). No second copy: what a
 * command does with the rows it loaded once when it wants a part of them
 * (sim's simulated rows, after its calibration rows were copied out).
 * Fails only on a bad list (t unchanged). */
int trace_keep_rows(trace_t *t, const int64_t *keep, int64_t n, char *err, size_t errlen);

#endif
