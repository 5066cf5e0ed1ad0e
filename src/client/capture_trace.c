/* capture_trace.c - captured answers -> eldr-trace v1 (capture_trace.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture_trace.h"
#include "err.h"

/* counts[l][e] += 1 for every id of rows [0, rows) of ids ([rows][L][k]). */
static int add_counts(uint16_t *counts, const uint16_t *ids, int64_t rows, int L, int E, int k,
                      const char *what, int64_t row, char *err, size_t errlen)
{
    for (int64_t t = 0; t < rows; t++)
        for (int l = 0; l < L; l++)
            for (int j = 0; j < k; j++) {
                uint16_t *c = &counts[(size_t)l * (size_t)E + ids[((size_t)t * L + l) * k + j]];
                if (*c == UINT16_MAX)
                    return eldr_errf(err, errlen, "request %lld: more than 65535 %s tokens on "
                                     "one expert (uint16 counts)", (long long)row, what);
                (*c)++;
            }
    return 0;
}

static int fill_row(trace_t *t, int64_t r, const routed_t *cr, char *err, size_t errlen)
{
    size_t row = (size_t)t->L * (size_t)t->k, cells = TRACE_CELLS(t);
    if (cr->prompt_tokens > INT32_MAX || cr->decode_rows > INT32_MAX)
        return eldr_errf(err, errlen, "request %lld: too many tokens", (long long)r);
    t->prompt_tokens[r] = (int32_t)cr->prompt_tokens;
    if (t->prefill_unrouted)
        t->prefill_unrouted[r] = (int32_t)cr->unrouted;
    t->decode_tokens[r] = (int32_t)cr->decode_rows;
    int64_t p0 = t->prefill_offsets[r], d0 = t->decode_offsets[r];
    memcpy(t->prefill_experts + (size_t)p0 * row, cr->ids,
           (size_t)cr->prompt_tokens * row * sizeof *cr->ids);
    memcpy(t->decode_experts + (size_t)d0 * row, cr->ids + (size_t)cr->prompt_tokens * row,
           (size_t)cr->decode_rows * row * sizeof *cr->ids);
    if (add_counts(t->prefill_counts + (size_t)r * cells, cr->ids, cr->prompt_tokens, t->L, t->E,
                   t->k, "prompt", r, err, errlen) < 0)
        return -1;
    return add_counts(t->decode_counts + (size_t)r * cells,
                      cr->ids + (size_t)cr->prompt_tokens * row, cr->decode_rows, t->L, t->E,
                      t->k, "decode", r, err, errlen);
}

int capture_trace_build(const capture_job *jobs, const capture_prompts *ps, int experts,
                        const char *model, trace_t **out, int *inferred, char *err,
                        size_t errlen)
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
    if (n == 0)
        return 0;
    int E = experts > 0 ? experts : max_id + 1;
    *inferred = experts <= 0;
    if (E < k)
        E = k;   /* ids 0..k-1 at least: k distinct ids per token */
    trace_t *t = trace_new(n, L, E, k, err, errlen);
    if (!t)
        return -1;
    snprintf(t->model, sizeof t->model, "%s", model ? model : "");
    unsigned flags = TRACE_HAS_DECODE | TRACE_HAS_ARRIVAL | TRACE_HAS_REQUEST_ID |
                     (ps->n_labels ? TRACE_HAS_LABEL : 0) | (unrouted ? TRACE_HAS_UNROUTED : 0);
    size_t row = (size_t)L * (size_t)k;
    int rc = trace_alloc_optional(t, flags, err, errlen);
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
            rc = fill_row(t, r, cr, err, errlen);
        r++;
    }
    if (rc == 0)
        rc = trace_validate(t, "captured trace", err, errlen);
    if (rc < 0) {
        trace_free(t);
        return -1;
    }
    *out = t;
    return 0;
}
