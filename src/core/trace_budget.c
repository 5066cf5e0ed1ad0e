/* trace_budget.c - memory budgets and chunk samples (trace_budget.h). */
#include "trace_budget.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "h5util.h"
#include "import.h"
#include "rng.h"

size_t trace_budget_default(void)
{
    size_t mem = eldr_phys_mem();
    return mem ? mem / 2 : (size_t)1 << 30;
}

double trace_row_bytes(const trace_header_t *h, unsigned drop)
{
    double n = h->n > 0 ? (double)h->n : 1.0, cells = (double)h->L * (double)h->E;
    double width = (double)h->L * (double)h->k, b = 0;
    if (!(drop & TRACE_DROP_COUNTS)) {
        b += cells * 2.0 * (h->has & TRACE_HAS_DECODE ? 2 : 1);
        if (!(drop & TRACE_DROP_GATES))
            b += cells * 4.0 * (!!(h->has & TRACE_HAS_GATE_PROB) +
                                !!(h->has & TRACE_HAS_GATE_LOGIT));
        int tokens = !(drop & TRACE_DROP_TOKENS), prefill = tokens && !(drop & TRACE_DROP_PREFILL);
        if (prefill && h->has_tokens_prefill)
            b += (double)h->t_prefill / n * width * 2.0 + 8.0;
        if (tokens && h->has_tokens_decode)
            b += (double)h->t_decode / n * width * 2.0 + 8.0;
        if (tokens && !(drop & TRACE_DROP_PROBS) && h->has_decode_probs)
            b += (double)h->t_decode / n * width * 4.0;
        if (prefill && h->has_blocks)
            b += (double)h->n_blocks / n * 8.0 + 8.0;
    }
    /* tokens, label, arrival, unrouted; an id pointer and a short string */
    b += 4 + 4 + 4 + 8 + 4;
    if (!(drop & TRACE_DROP_IDS) && (h->has & TRACE_HAS_REQUEST_ID))
        b += 8 + 32;
    return b;
}

int trace_chunk_rows(const char *path, int64_t *rows, char *err, size_t errlen)
{
    *rows = 1;
    if (import_sniff(path) != IMPORT_UNKNOWN)
        return 0;
    hid_t f = h5u_open_read(path, err, errlen);
    if (f < 0)
        return -1;
    int rc = h5u_chunk_rows(f, "prefill_counts", rows, path, err, errlen);
    H5Fclose(f);
    return rc;
}

int64_t trace_sample_chunks(const int64_t *cand, int64_t n, int64_t chunk, int64_t keep,
                            uint64_t seed, int64_t *out)
{
    if (n <= 0 || keep <= 0)
        return 0;
    if (chunk < 1)
        chunk = 1;
    /* the chunks holding candidates, each as [first, end) into cand */
    int64_t n_chunks = 0;
    int64_t *first = malloc((size_t)n * sizeof *first), *order = NULL;
    uint8_t *take = NULL;
    for (int64_t i = 0; first && i < n; i++)
        if (i == 0 || cand[i] / chunk != cand[i - 1] / chunk)
            first[n_chunks++] = i;
    if (first) {
        order = malloc((size_t)n_chunks * sizeof *order);
        take = calloc((size_t)n_chunks, 1);
    }
    if (!first || !order || !take) {
        free(first), free(order), free(take);
        return -1;
    }
    rng_t g;
    rng_seed(&g, seed);
    for (int64_t c = 0; c < n_chunks; c++)
        order[c] = c;
    for (int64_t c = 0; c + 1 < n_chunks; c++) {
        int64_t j = c + (int64_t)rng_below(&g, (uint64_t)(n_chunks - c)), x = order[c];
        order[c] = order[j];
        order[j] = x;
    }
    int64_t got = 0, partial = -1;
    for (int64_t c = 0; c < n_chunks && got < keep; c++) {
        int64_t k = order[c], size = (k + 1 < n_chunks ? first[k + 1] : n) - first[k];
        if (got + size <= keep) {
            take[k] = 1;
            got += size;
        } else if (got == 0 && partial < 0) {
            partial = k;      /* even one chunk is too many: its first rows */
        }
    }
    int64_t m = 0;
    for (int64_t k = 0; k < n_chunks; k++) {
        int64_t a = first[k], b = k + 1 < n_chunks ? first[k + 1] : n;
        if (take[k])
            for (int64_t i = a; i < b; i++)
                out[m++] = cand[i];
        else if (got == 0 && k == partial)
            for (int64_t i = a; i < b && m < keep; i++)
                out[m++] = cand[i];
    }
    free(first), free(order), free(take);
    return m;
}
