/* bench_trace.c - trace load speed: MB/s of decoded arrays (counted in the
 * file's own dtypes, so that tests/bench/trace_peer.py counts the same
 * bytes), best of 3, for the real gpt-oss-20b trace and for a bigger
 * synthetic one (2000 requests, L=48, E=128, k=8, with gate_prob) that
 * this bench writes to BIG_PATH for the peer to read too. Also a 100-row
 * range of the big file, which reads only its chunks. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "err.h"
#include "rng.h"
#include "trace.h"

#define REAL_PATH "../shared/data/gptoss20b-routing.h5"
#define BIG_PATH "/tmp/eldr-bench-trace.h5"
#define BIG_N 2000
#define BIG_L 48
#define BIG_E 128
#define BIG_K 8

/* Bytes of the numeric datasets the loader reads, in file dtypes. */
static double decoded_bytes(const trace_t *t)
{
    double n = (double)t->n, cells = n * (double)TRACE_CELLS(t), w = (double)t->L * t->k;
    double id = t->E <= 256 ? 1 : 2, b = cells * 2 + n * 4;
    if (t->decode_counts)
        b += cells * 2 + n * 4;
    b += (t->gate_prob ? cells * 4 : 0) + (t->gate_logit ? cells * 4 : 0);
    b += (t->label ? n * 4 : 0) + (t->arrival_s ? n * 8 : 0);
    if (t->prefill_experts)
        b += (double)t->prefill_offsets[t->n] * w * id + (n + 1) * 8;
    if (t->decode_experts)
        b += (double)t->decode_offsets[t->n] * w * id + (n + 1) * 8;
    if (t->decode_probs)
        b += (double)t->decode_offsets[t->n] * w * 4;
    if (t->block_hashes)
        b += (double)t->block_offsets[t->n] * 8 + (n + 1) * 8;
    return b;
}

/* Counts that conserve: each token adds k distinct experts per layer. */
static void fill_phase(rng_t *g, trace_t *t, uint16_t *counts, const int32_t *tokens)
{
    int perm[BIG_E];
    for (int64_t r = 0; r < t->n; r++)
        for (int l = 0; l < t->L; l++) {
            uint16_t *cell = counts + ((size_t)r * (size_t)t->L + (size_t)l) * (size_t)t->E;
            for (int e = 0; e < t->E; e++)
                perm[e] = e;
            for (int tok = 0; tok < tokens[r]; tok++)
                for (int j = 0; j < t->k; j++) {
                    int s = j + (int)rng_below(g, (uint64_t)(t->E - j)), x = perm[j];
                    perm[j] = perm[s];
                    perm[s] = x;
                    cell[perm[j]]++;
                }
        }
}

static int make_big(char *err, size_t errlen)
{
    rng_t g;
    rng_seed(&g, 2024);
    trace_t *t = trace_new(BIG_N, BIG_L, BIG_E, BIG_K, err, errlen);
    if (!t || trace_alloc_optional(t, TRACE_HAS_DECODE | TRACE_HAS_GATE_PROB | TRACE_HAS_LABEL,
                                   err, errlen)) {
        trace_free(t);
        return -1;
    }
    static const char *const names[] = {"a", "b", "c", "d"};
    trace_set_label_names(t, 4, names, err, errlen);
    snprintf(t->model, sizeof t->model, "bench-synthetic");
    for (int64_t r = 0; r < t->n; r++) {
        t->prompt_tokens[r] = 32 + (int32_t)rng_below(&g, 64);
        t->decode_tokens[r] = 16 + (int32_t)rng_below(&g, 32);
        t->label[r] = (int32_t)rng_below(&g, 4);
    }
    fill_phase(&g, t, t->prefill_counts, t->prompt_tokens);
    fill_phase(&g, t, t->decode_counts, t->decode_tokens);
    size_t cells = (size_t)t->n * TRACE_CELLS(t);
    for (size_t i = 0; i < cells; i++)
        t->gate_prob[i] = (float)(t->prefill_counts[i] * (0.1 + 0.2 * rng_uniform(&g)));
    int rc = trace_save(t, BIG_PATH, err, errlen);
    trace_free(t);
    return rc;
}

static void bench_load(const char *path, int64_t r0, int64_t r1, const char *what,
                       const char *size)
{
    char err[ELDR_ERRLEN];
    double best = 1e30, bytes = 0;
    for (int i = 0; i < 3; i++) {
        trace_t *t = NULL;
        double t0 = bench_now();
        int rc = r1 < 0 ? trace_load(path, &t, err, sizeof err)
                        : trace_load_rows(path, r0, r1, &t, err, sizeof err);
        double dt = bench_now() - t0;
        if (rc) {
            fprintf(stderr, "bench_trace: %s\n", err);
            return;
        }
        bytes = decoded_bytes(t);
        best = dt < best ? dt : best;
        trace_free(t);
    }
    bench_row(what, size, best, bytes / best / 1e6, "MB/s");
}

int main(void)
{
    char err[ELDR_ERRLEN];
    if (access(REAL_PATH, R_OK) == 0)
        bench_load(REAL_PATH, 0, -1, "trace load (eldr)", "gptoss20b 449x24x32");
    else
        fprintf(stderr, "bench_trace: %s absent, real-data row skipped\n", REAL_PATH);
    trace_header_t h;
    if (trace_read_header(BIG_PATH, &h, err, sizeof err) || h.n != BIG_N || h.L != BIG_L ||
        h.E != BIG_E || strcmp(h.model, "bench-synthetic")) {
        if (make_big(err, sizeof err)) {
            fprintf(stderr, "bench_trace: %s\n", err);
            return 1;
        }
    }
    bench_load(BIG_PATH, 0, -1, "trace load (eldr)", "synthetic 2000x48x128");
    bench_load(BIG_PATH, 1000, 1100, "trace load rows (eldr)", "100 of 2000x48x128");
    return 0;
}
