/* bench_stock.c - a stock engine's signature: the CPU time of
 * routed_decode + routed_counts (src/core/routed.h, what eldrd's proxy and
 * picker run on a stock prefill's answer) on one vLLM >= 0.22 answer of a
 * 4,096-token prompt at L = 48, k = 8, E = 128: choices[0].routed_experts
 * the base64 of a uint8 .npy (4096, 48, 8), 2.1 MB of text. Best of 20
 * runs, CPU time of this process. The answer and the time are left in
 * $TMPDIR/eldr_bench_stock.{json,cpu} for tests/bench/stock_peer.py, which
 * times numpy on the same bytes in the same `make bench` (np.load +
 * bincount) and prints the ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "bench.h"
#include "err.h"
#include "rng.h"
#include "routed.h"

#define P 4096
#define NL 48
#define K 8
#define NE 128
#define REPS 20

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* {"choices":[{"routed_experts": B64(.npy)}], "usage": ...} */
static char *make_answer(size_t *len)
{
    static const char hdr_fmt[] = "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d, %d), }";
    char hdr[128];
    int hl = snprintf(hdr, sizeof hdr, hdr_fmt, P, NL, K);
    while ((10 + hl + 1) % 64)
        hdr[hl++] = ' ';
    hdr[hl++] = '\n';
    size_t n = 10 + (size_t)hl + (size_t)P * NL * K;
    uint8_t *npy = malloc(n);
    char *b64 = malloc(b64_encoded_size(n) + 1);
    char *body = malloc(b64_encoded_size(n) + 256);
    if (!npy || !b64 || !body)
        exit(1);
    memcpy(npy, "\x93NUMPY\x01\x00", 8);
    npy[8] = (uint8_t)hl;
    npy[9] = 0;
    memcpy(npy + 10, hdr, (size_t)hl);
    rng_t g;
    rng_seed(&g, 29);
    uint8_t *x = npy + 10 + hl, perm[NE];
    for (int e = 0; e < NE; e++)
        perm[e] = (uint8_t)e;
    for (int t = 0; t < P * NL; t++)
        for (int j = 0; j < K; j++) {   /* k distinct: partial Fisher-Yates */
            int s = j + (int)rng_below(&g, NE - j);
            uint8_t v = perm[s];
            perm[s] = perm[j];
            perm[j] = v;
            *x++ = v;
        }
    b64_encode(npy, n, b64);
    *len = (size_t)sprintf(body, "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":"
                           "[{\"index\":0,\"text\":\"T\",\"routed_experts\":\"%s\"}],\"usage\":"
                           "{\"prompt_tokens\":%d,\"completion_tokens\":1,\"total_tokens\":%d}}",
                           b64, P, P + 1);
    free(npy);
    free(b64);
    return body;
}

int main(void)
{
    size_t len;
    char *body = make_answer(&len), err[ELDR_ERRLEN];
    uint16_t *counts = malloc((size_t)NL * NE * sizeof *counts);
    routed_hint h = {.E = NE};
    double best = 1e9;
    for (int rep = 0; rep < REPS; rep++) {
        routed_t r;
        double t0 = cpu_now();
        if (routed_decode(body, len, &h, &r, err, sizeof err) < 0 ||
            routed_counts(&r, 0, r.prompt_tokens, NULL, NE, counts, err, sizeof err) < 0) {
            fprintf(stderr, "bench_stock: %s\n", err);
            return 1;
        }
        double t = cpu_now() - t0;
        best = t < best ? t : best;
        routed_free(&r);
    }
    bench_row("stock signature: routed_decode + routed_counts (CPU, best of 20)",
              "4096 tok, L48 k8 E128, .npy b64", best, best * 1e3, "ms CPU");
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char path[512];
    snprintf(path, sizeof path, "%s/eldr_bench_stock.json", dir);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(body, 1, len, f);
        fclose(f);
        snprintf(path, sizeof path, "%s/eldr_bench_stock.cpu", dir);
        if ((f = fopen(path, "w"))) {
            fprintf(f, "%.9f\n", best);
            fclose(f);
        }
    }
    free(body);
    free(counts);
    return 0;
}
