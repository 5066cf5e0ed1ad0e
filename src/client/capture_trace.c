/* capture_trace.c - captured answers -> eldr-trace v1 (capture_trace.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture_trace.h"
#include "err.h"
#include "routed.h"

/* Rows [0, rows) of ids ([rows][L][k], the answer's layers) into dst
 * ([rows][t->L][k]), the layers keep leaves out left out. */
static void copy_kept(uint16_t *dst, const uint16_t *ids, int64_t rows, int L, int k,
                      const uint8_t *keep)
{
    for (int64_t t = 0; t < rows; t++)
        for (int l = 0; l < L; l++)
            if (keep[l]) {
                memcpy(dst, ids + ((size_t)t * L + l) * k, (size_t)k * sizeof *ids);
                dst += k;
            }
}

/* One request's row of the trace; keep[l]: the answer's layer l is in it. */
static int fill_row(trace_t *t, int64_t r, const routed_t *cr, const uint8_t *keep, char *err,
                    size_t errlen)
{
    size_t row = (size_t)t->L * (size_t)t->k, cells = TRACE_CELLS(t);
    char e[ELDR_ERRLEN];
    if (cr->prompt_tokens > INT32_MAX || cr->decode_rows > INT32_MAX)
        return eldr_errf(err, errlen, "request %lld: too many tokens", (long long)r);
    t->prompt_tokens[r] = (int32_t)cr->prompt_tokens;
    if (t->prefill_unrouted)
        t->prefill_unrouted[r] = (int32_t)cr->unrouted;
    t->decode_tokens[r] = (int32_t)cr->decode_rows;
    copy_kept(t->prefill_experts + (size_t)t->prefill_offsets[r] * row, cr->ids,
              cr->prompt_tokens, cr->L, cr->k, keep);
    copy_kept(t->decode_experts + (size_t)t->decode_offsets[r] * row,
              cr->ids + (size_t)cr->prompt_tokens * cr->L * cr->k, cr->decode_rows, cr->L,
              cr->k, keep);
    /* the counts over the kept layers: the one counter of src/core/routed.h */
    if (routed_counts(cr, 0, cr->prompt_tokens, keep, t->E,
                      t->prefill_counts + (size_t)r * cells, e, sizeof e) < 0 ||
        routed_counts(cr, cr->prompt_tokens, cr->decode_rows, keep, t->E,
                      t->decode_counts + (size_t)r * cells, e, sizeof e) < 0)
        return eldr_errf(err, errlen, "request %lld: %s (uint16 counts)", (long long)r, e);
    return 0;
}

int capture_trace_build(const capture_job *jobs, const capture_prompts *ps, int experts,
                        const char *model, trace_t **out, int *inferred, capture_dense *dense,
                        char *err, size_t errlen)
{
    int64_t n = 0, tp = 0, td = 0;
    int L = 0, k = 0, max_id = -1, unrouted = 0;
    *out = NULL;
    for (int64_t i = 0; i < ps->n; i++)
        if (jobs[i].state == JOB_OK) {
            const routed_t *cr = &jobs[i].routes;
            n++;
            tp += cr->prompt_tokens;
            td += cr->decode_rows;
            L = cr->L;
            k = cr->k;
            max_id = cr->max_id > max_id ? cr->max_id : max_id;
            unrouted |= cr->unrouted > 0;
        }
    memset(dense, 0, sizeof *dense);
    if (n == 0)
        return 0;
    if (capture_dense_find(jobs, ps, L, k, dense, err, errlen) < 0)
        return -1;
    int E = experts > 0 ? experts : max_id + 1;
    *inferred = experts <= 0;
    if (E < k)
        E = k;   /* ids 0..k-1 at least: k distinct ids per token */
    trace_t *t = trace_new(n, L - dense->n, E, k, err, errlen);
    if (!t) {
        capture_dense_free(dense);
        return -1;
    }
    snprintf(t->model, sizeof t->model, "%s", model ? model : "");
    unsigned flags = TRACE_HAS_DECODE | TRACE_HAS_ARRIVAL | TRACE_HAS_REQUEST_ID |
                     (ps->n_labels ? TRACE_HAS_LABEL : 0) | (unrouted ? TRACE_HAS_UNROUTED : 0);
    size_t row = (size_t)t->L * (size_t)k;
    uint8_t *keep = malloc((size_t)L);
    int rc = keep ? trace_alloc_optional(t, flags, err, errlen) : eldr_errf(err, errlen,
                                                                            "out of memory");
    for (int l = 0; keep && l < L; l++)
        keep[l] = !dense->is_dense[l];
    if (rc == 0 && ps->n_labels)
        rc = trace_set_label_names(t, ps->n_labels, (const char *const *)ps->label_names, err,
                                   errlen);
    if (rc == 0) {
        t->prefill_offsets = calloc((size_t)n + 1, sizeof *t->prefill_offsets);
        t->decode_offsets = calloc((size_t)n + 1, sizeof *t->decode_offsets);
        t->prefill_experts = malloc(((size_t)tp * row + 1) * sizeof *t->prefill_experts);
        t->decode_experts = malloc(((size_t)td * row + 1) * sizeof *t->decode_experts);
        if (!t->prefill_offsets || !t->decode_offsets || !t->prefill_experts ||
            !t->decode_experts)
            rc = eldr_errf(err, errlen, "out of memory for %lld captured requests", (long long)n);
    }
    for (int64_t i = 0, r = 0; rc == 0 && i < ps->n; i++) {
        if (jobs[i].state != JOB_OK)
            continue;
        const routed_t *cr = &jobs[i].routes;
        t->prefill_offsets[r + 1] = t->prefill_offsets[r] + cr->prompt_tokens;
        t->decode_offsets[r + 1] = t->decode_offsets[r] + cr->decode_rows;
        t->arrival_s[r] = jobs[i].sent_s;
        if (!(t->request_id[r] = strdup(ps->p[i].id)))
            rc = eldr_errf(err, errlen, "out of memory");
        if (t->label)
            t->label[r] = ps->p[i].label;
        if (rc == 0)
            rc = fill_row(t, r, cr, keep, err, errlen);
        r++;
    }
    free(keep);
    if (rc == 0)
        rc = trace_validate(t, "captured trace", err, errlen);
    if (rc < 0) {
        trace_free(t);
        capture_dense_free(dense);
        return -1;
    }
    *out = t;
    return 0;
}
