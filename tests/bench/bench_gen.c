/* bench_gen.c - generator throughput: requests/s at L=48, E=128, top-8,
 * 256 prompt and 128 decode tokens (counts only, no token datasets),
 * on 2 threads. `bench_gen N` times N requests instead of 2000. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "gen.h"

int main(int argc, char **argv)
{
    gen_params_t p;
    gen_defaults(&p);
    p.requests = argc > 1 ? atoll(argv[1]) : 2000;
    p.layers = 48;
    p.experts = 128;
    p.top_k = 8;
    p.domains = 8;
    p.prompt_tokens = 256;
    p.decode_tokens = 128;
    p.threads = 2;
    char err[512], size[64];
    trace_t *t = NULL;
    double t0 = bench_now();
    if (gen_run(&p, &t, err, sizeof err)) {
        fprintf(stderr, "bench_gen: %s\n", err);
        return 1;
    }
    double secs = bench_now() - t0;
    trace_free(t);
    snprintf(size, sizeof size, "%lld req L48 E128 k8 256+128 tok", (long long)p.requests);
    bench_row("gen requests/s (2 threads)", size, secs, (double)p.requests / secs, "req/s");
    return 0;
}
