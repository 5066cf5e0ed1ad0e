/* util_tracefix.c - trace fixtures for the unit tests (see util_tracefix.h). */
#include "util_tracefix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5util.h"
#include "rng.h"

/* Pick k distinct experts of E (partial Fisher-Yates over perm). */
static void pick_distinct(rng_t *g, uint16_t *perm, int E, int k, uint16_t *out)
{
    for (int j = 0; j < k; j++) {
        int s = j + (int)rng_below(g, (uint64_t)(E - j));
        uint16_t tmp = perm[j];
        perm[j] = perm[s];
        perm[s] = tmp;
        out[j] = perm[j];
    }
}

/* Draw the token ids of one phase and fill counts, offsets, ids. */
static int fill_phase(rng_t *g, trace_t *t, const int32_t *tokens, uint16_t *counts,
                      int64_t **off_out, uint16_t **ids_out)
{
    size_t width = (size_t)t->L * (size_t)t->k;
    int64_t *off = calloc((size_t)t->n + 1, sizeof *off);
    if (!off)
        return -1;
    for (int64_t r = 0; r < t->n; r++)
        off[r + 1] = off[r] + tokens[r];
    uint16_t *ids = calloc((size_t)off[t->n] * width + 1, sizeof *ids);
    uint16_t *perm = malloc((size_t)t->E * sizeof *perm);
    if (!ids || !perm) {
        free(off);
        free(ids);
        free(perm);
        return -1;
    }
    for (int e = 0; e < t->E; e++)
        perm[e] = (uint16_t)e;
    for (int64_t r = 0; r < t->n; r++)
        for (int64_t tok = off[r]; tok < off[r + 1]; tok++)
            for (int l = 0; l < t->L; l++) {
                uint16_t *pick = ids + (size_t)tok * width + (size_t)l * (size_t)t->k;
                pick_distinct(g, perm, t->E, t->k, pick);
                for (int j = 0; j < t->k; j++)
                    TRACE_AT(counts, t, r, l, pick[j])++;
            }
    free(perm);
    *off_out = off;
    *ids_out = ids;
    return 0;
}

trace_t *tracefix_make(int64_t n, int L, int E, int k, uint64_t seed)
{
    static const char *const names[] = {"code", "math", "chat"};
    rng_t g;
    rng_seed(&g, seed);
    trace_t *t = trace_new(n, L, E, k, NULL, 0);
    if (!t || trace_alloc_optional(t, TRACE_HAS_DECODE | TRACE_HAS_GATE_PROB |
                                          TRACE_HAS_GATE_LOGIT | TRACE_HAS_LABEL |
                                          TRACE_HAS_ARRIVAL | TRACE_HAS_REQUEST_ID,
                                      NULL, 0) ||
        trace_set_label_names(t, 3, names, NULL, 0))
        goto fail;
    snprintf(t->model, sizeof t->model, "fixture-%dx%d", L, E);
    double clock = 0;
    for (int64_t r = 0; r < n; r++) {
        char id[32];
        t->prompt_tokens[r] = 1 + (int32_t)rng_below(&g, 24);
        t->decode_tokens[r] = (int32_t)rng_below(&g, 16);
        t->label[r] = (int32_t)rng_below(&g, 3);
        clock += rng_exp(&g);
        t->arrival_s[r] = clock;
        snprintf(id, sizeof id, "req-%lld", (long long)r);
        if (!(t->request_id[r] = strdup(id)))
            goto fail;
    }
    size_t cells = (size_t)n * TRACE_CELLS(t);
    for (size_t i = 0; i < cells; i++) {
        t->gate_prob[i] = (float)rng_uniform(&g);
        t->gate_logit[i] = (float)rng_normal(&g);
    }
    if (fill_phase(&g, t, t->prompt_tokens, t->prefill_counts, &t->prefill_offsets,
                   &t->prefill_experts) ||
        fill_phase(&g, t, t->decode_tokens, t->decode_counts, &t->decode_offsets,
                   &t->decode_experts))
        goto fail;
    size_t probs = (size_t)t->decode_offsets[n] * (size_t)L * (size_t)k;
    if (!(t->decode_probs = malloc((probs + 1) * sizeof(float))))
        goto fail;
    for (size_t i = 0; i < probs; i++)
        t->decode_probs[i] = (float)rng_uniform(&g);
    if (!(t->block_offsets = calloc((size_t)n + 1, sizeof(int64_t))))
        goto fail;
    for (int64_t r = 0; r < n; r++)
        t->block_offsets[r + 1] = t->block_offsets[r] + t->prompt_tokens[r] / 4;
    if (!(t->block_hashes = malloc(((size_t)t->block_offsets[n] + 1) * sizeof(uint64_t))))
        goto fail;
    for (int64_t b = 0; b < t->block_offsets[n]; b++)
        t->block_hashes[b] = rng_next(&g);
    return t;
fail:
    trace_free(t);
    return NULL;
}

#define DIFF(...) (snprintf(why, len, __VA_ARGS__), 1)

/* Compare two optional arrays of count elements of esize bytes. */
static int diff_array(const char *name, const void *a, const void *b, size_t count, size_t esize,
                      char *why, size_t len)
{
    if (!a != !b)
        return DIFF("%s present in one trace only", name);
    if (!a)
        return 0;
    for (size_t i = 0; i < count; i++)
        if (memcmp((const char *)a + i * esize, (const char *)b + i * esize, esize))
            return DIFF("%s differs at element %zu", name, i);
    return 0;
}

static int diff_strings(const char *name, char *const *a, char *const *b, int64_t n, char *why,
                        size_t len)
{
    if (!a != !b)
        return DIFF("%s present in one trace only", name);
    for (int64_t i = 0; a && i < n; i++)
        if (strcmp(a[i] ? a[i] : "", b[i] ? b[i] : ""))
            return DIFF("%s[%lld]: '%s' vs '%s'", name, (long long)i, a[i], b[i]);
    return 0;
}

int tracefix_diff(const trace_t *a, const trace_t *b, char *why, size_t len)
{
    if (a->n != b->n || a->L != b->L || a->E != b->E || a->k != b->k)
        return DIFF("geometry %lld/%d/%d/%d vs %lld/%d/%d/%d", (long long)a->n, a->L, a->E,
                    a->k, (long long)b->n, b->L, b->E, b->k);
    if (strcmp(a->model, b->model))
        return DIFF("model '%s' vs '%s'", a->model, b->model);
    if (a->n_labels != b->n_labels)
        return DIFF("n_labels %d vs %d", a->n_labels, b->n_labels);
    size_t n = (size_t)a->n, cells = n * TRACE_CELLS(a), w = (size_t)a->L * (size_t)a->k;
    size_t tp = a->prefill_offsets ? (size_t)a->prefill_offsets[n] : 0;
    size_t td = a->decode_offsets ? (size_t)a->decode_offsets[n] : 0;
    size_t nb = a->block_offsets ? (size_t)a->block_offsets[n] : 0;
    return diff_array("prefill_counts", a->prefill_counts, b->prefill_counts, cells, 2, why, len) ||
           diff_array("prompt_tokens", a->prompt_tokens, b->prompt_tokens, n, 4, why, len) ||
           diff_array("decode_counts", a->decode_counts, b->decode_counts, cells, 2, why, len) ||
           diff_array("decode_tokens", a->decode_tokens, b->decode_tokens, n, 4, why, len) ||
           diff_array("gate_prob", a->gate_prob, b->gate_prob, cells, 4, why, len) ||
           diff_array("gate_logit", a->gate_logit, b->gate_logit, cells, 4, why, len) ||
           diff_array("label", a->label, b->label, n, 4, why, len) ||
           diff_strings("label_names", a->label_names, b->label_names, a->n_labels, why, len) ||
           diff_array("arrival_s", a->arrival_s, b->arrival_s, n, 8, why, len) ||
           diff_strings("request_id", a->request_id, b->request_id, a->n, why, len) ||
           diff_array("prefill_offsets", a->prefill_offsets, b->prefill_offsets, n + 1, 8, why,
                      len) ||
           diff_array("prefill_experts", a->prefill_experts, b->prefill_experts, tp * w, 2, why,
                      len) ||
           diff_array("decode_offsets", a->decode_offsets, b->decode_offsets, n + 1, 8, why,
                      len) ||
           diff_array("decode_experts", a->decode_experts, b->decode_experts, td * w, 2, why,
                      len) ||
           diff_array("decode_probs", a->decode_probs, b->decode_probs, td * w, 4, why, len) ||
           diff_array("block_offsets", a->block_offsets, b->block_offsets, n + 1, 8, why, len) ||
           diff_array("block_hashes", a->block_hashes, b->block_hashes, nb, 8, why, len);
}

void tracefix_strip_tokens(trace_t *t)
{
    free(t->decode_experts);
    free(t->decode_offsets);
    free(t->decode_probs);
    t->decode_experts = NULL;
    t->decode_offsets = NULL;
    t->decode_probs = NULL;
}

int tracefix_tmpdir(const char *tag, char *dir, size_t dir_len, char *path, size_t path_len)
{
    snprintf(dir, dir_len, "/tmp/eldr-test-%s-XXXXXX", tag);
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, path_len, "%s/t.h5", dir);
    h5u_silence();
    return 0;
}
