/* bench_sim.c - speed of routing decisions and of the decode simulator.
 *
 * Rows:
 *   one ELDR decision at |S|*E = 2560, K = 16 (target < 20 us);
 *   10000 requests x 512 decode tokens x 48 layers x top-8 on 16 workers,
 *   one policy, one core (target < 10 s);
 *   1000 requests re-simulated, as the dashboard does on a key press
 *   (target < 200 ms), with 128 and with 512 tokens each: the workload
 *   (arrivals, signatures, sampled pools) is built once, as there;
 *   the real gpt-oss-20b trace, every row, recorded activations;
 *   simulated decode tokens per second of `eldr sim --policy
 *   eldr,random,rr,jsq,p2c --rate 200` at the geometry of issue 34's
 *   20,000-request trace (L48 E128 k8, K = 8, decode lengths of mean
 *   128), on 5,000 requests so that the bench takes seconds (the rate
 *   is per token: the batches at 200 req/s are those of the big trace;
 *   the pool cache is scaled down with the requests, 64 MiB; no heat
 *   matrix, as eldr sim without --csv),
 *   with its floor beside it: the marks alone (tokens x L x k expert
 *   ids read from the same pools, each request's in its order, set as
 *   bits of their layers' bitmaps by the simulator's own counter, a mean
 *   batch at a time), and the figure of
 *   the simulator before the pools were shared (commit 23d7981, the
 *   same bench, this machine). CPU seconds, since the machine's cores
 *   are shared; one thread.
 * The synthetic trace is built here (8 domains with preferred experts;
 * a request's layer uses 2k..6k of them, 16..48 at k = 8); each count
 * profile is valid by construction (every token picks k distinct
 * experts). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "err.h"
#include "rng.h"
#include "route.h"
#include "sim.h"
#include "sim_distinct.h"
#include "sim_internal.h"
#include "trace.h"

#define REAL_DATA "../shared/data/gptoss20b-routing.h5"

static char err[ELDR_ERRLEN];

static void die(const char *what)
{
    fprintf(stderr, "bench_sim: %s: %s\n", what, err);
    exit(1);
}

/* Counts of T tokens in one layer: m distinct experts S drawn from the
 * domain's preference, token j picks S[(j + i) mod m], i < k. */
static void layer_counts(rng_t *g, const double *cum, int E, int k, int T, uint16_t *out)
{
    int S[64], m = 2 * k + (int)rng_below(g, 4 * (uint64_t)k + 1);
    for (int n = 0; n < m;) {
        double u = rng_uniform(g) * cum[E - 1];
        int e = 0;
        while (cum[e] <= u)
            e++;
        int dup = 0;
        for (int i = 0; i < n; i++)
            dup |= S[i] == e;
        if (!dup)
            S[n++] = e;
    }
    for (int j = 0; j < T; j++)
        for (int i = 0; i < k; i++)
            out[S[(j + i) % m]]++;
}

static trace_t *synthetic(int64_t n, int L, int E, int k, int D, int T, uint64_t seed)
{
    trace_t *t = trace_new(n, L, E, k, err, sizeof err);
    if (!t || trace_alloc_optional(t, TRACE_HAS_DECODE | TRACE_HAS_LABEL, err, sizeof err))
        die("trace");
    /* domain d prefers experts by a Zipf law over its own permutation */
    double *cum = malloc((size_t)D * L * E * sizeof *cum);
    rng_t g;
    rng_seed(&g, seed);
    for (int d = 0; d < D; d++)
        for (int l = 0; l < L; l++) {
            double *c = cum + ((size_t)d * L + l) * E, acc = 0;
            int *perm = malloc((size_t)E * sizeof *perm);
            for (int e = 0; e < E; e++)
                perm[e] = e;
            for (int e = E - 1; e > 0; e--) {
                int j = (int)rng_below(&g, (uint64_t)e + 1), x = perm[e];
                perm[e] = perm[j];
                perm[j] = x;
            }
            double *w = calloc((size_t)E, sizeof *w);
            for (int r = 0; r < E; r++)
                w[perm[r]] = 1.0 / (1.0 + r);
            for (int e = 0; e < E; e++)
                c[e] = acc += w[e];
            free(w);
            free(perm);
        }
    for (int64_t r = 0; r < n; r++) {
        int d = (int)rng_below(&g, (uint64_t)D);
        t->label[r] = d;
        t->prompt_tokens[r] = T;
        t->decode_tokens[r] = T;
        for (int l = 0; l < L; l++) {
            const double *c = cum + ((size_t)d * L + l) * E;
            layer_counts(&g, c, E, k, T, t->prefill_counts + ((size_t)r * L + l) * E);
            layer_counts(&g, c, E, k, T, t->decode_counts + ((size_t)r * L + l) * E);
        }
    }
    free(cum);
    return t;
}

/* Unit centroids = the normalised mean signature of each label. */
static float *label_centroids(const sim_workload *w, int D)
{
    float *mu = calloc((size_t)D * w->dim, sizeof *mu);
    for (int64_t i = 0; i < w->n; i++) {
        float *m = mu + (size_t)w->t->label[w->row[i]] * w->dim;
        const float *s = w->sig + (size_t)i * w->dim;
        for (size_t j = 0; j < w->dim; j++)
            m[j] += s[j];
    }
    for (int d = 0; d < D; d++) {
        double s = 0;
        float *m = mu + (size_t)d * w->dim;
        for (size_t j = 0; j < w->dim; j++)
            s += (double)m[j] * m[j];
        for (size_t j = 0; j < w->dim; j++)
            m[j] = (float)(m[j] / sqrt(s));
    }
    return mu;
}

static void bench_decision(void)
{
    enum { K = 16, D = 2560, N = 512, REPS = 200000 };
    float *mu = malloc((size_t)K * D * sizeof *mu), *sig = malloc((size_t)N * D * sizeof *sig);
    rng_t g;
    rng_seed(&g, 1);
    for (int i = 0; i < K * D; i++)
        mu[i] = (float)fabs(rng_normal(&g));
    for (int i = 0; i < N * D; i++)
        sig[i] = (float)fabs(rng_normal(&g));
    for (int r = 0; r < K + N; r++) {
        float *v = r < K ? mu + (size_t)r * D : sig + (size_t)(r - K) * D;
        double s = 0;
        for (int j = 0; j < D; j++)
            s += (double)v[j] * v[j];
        for (int j = 0; j < D; j++)
            v[j] = (float)(v[j] / sqrt(s));
    }
    route_policy p;
    if (route_policy_init(&p, ROUTE_ELDR, K, 1, err, sizeof err) ||
        route_policy_set_centroids(&p, mu, D, 0.1, 1, err, sizeof err))
        die("policy");
    static route_decision dec;
    int64_t load[K] = {0};
    double t0 = bench_now();
    for (int i = 0; i < REPS; i++) {
        int w = route_decide(&p, sig + (size_t)(i % N) * D, -1, load, &dec);
        load[w]++;
        load[i % K] -= load[i % K] > 0;
    }
    double s = bench_now() - t0;
    bench_row("route eldr decision", "|S|*E=2560 K=16", s / REPS, s / REPS * 1e6,
              "us/decision");
    route_policy_free(&p);
    free(mu);
    free(sig);
}

static double sim_once(const sim_workload *w, route_kind kind, int K, const float *mu,
                       sim_result *res)
{
    route_policy p;
    if (route_policy_init(&p, kind, K, 1, err, sizeof err) ||
        (mu && route_policy_set_centroids(&p, mu, w->dim, 0.1, 1, err, sizeof err)))
        die("policy");
    double t0 = bench_now();
    if (sim_run(w, &p, NULL, NULL, res, err, sizeof err))
        die("sim_run");
    double s = bench_now() - t0;
    route_policy_free(&p);
    return s;
}

static void bench_big(void)
{
    trace_t *t = synthetic(10000, 48, 128, 8, 8, 16, 7);
    sim_config c;
    sim_config_default(&c);
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = 60;
    c.output_tokens = 512;
    sim_workload w;
    double t0 = bench_now();
    if (sim_workload_init(&w, t, &c, NULL, err, sizeof err))
        die("workload");
    double init = bench_now() - t0;
    sim_result r;
    double s = init + sim_once(&w, ROUTE_JSQ, 16, NULL, &r);
    fprintf(stderr, "bench_sim: 10000 x 512: workload (arrivals, sampled pools) %.2f s, "
            "run %.2f s\n", init, s - init);
    fprintf(stderr, "bench_sim: 10000 x 512: %lld steps, mean batch %.1f, TPOT p50 %.2f ms, "
            "%.2f distinct/step\n", (long long)r.steps, r.mean_batch, r.tpot_p50_ms,
            r.distinct_per_step);
    bench_row("sim jsq, sampled, with workload build", "10000 req x 512 tok L48 E128 k8 K16", s,
              (double)r.activations / s / 1e6, "M activations/s");
    sim_result_free(&r);
    sim_workload_free(&w);
    trace_free(t);
}

static void bench_rerun(int out_tokens)
{
    trace_t *t = synthetic(1000, 48, 128, 8, 8, 16, 9);
    sig_recipe rec;
    int layers[16];
    for (int i = 0; i < 16; i++)
        layers[i] = 2 + 3 * i;
    if (sig_recipe_init(&rec, SIG_COUNT, 48, 128, layers, 16, err, sizeof err))
        die("recipe");
    sim_config c;
    sim_config_default(&c);
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = 60;
    c.output_tokens = out_tokens;
    sim_workload w;
    if (sim_workload_init(&w, t, &c, &rec, err, sizeof err))
        die("workload");
    float *mu = label_centroids(&w, 8);
    sim_result r;
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double s = sim_once(&w, ROUTE_ELDR, 8, mu, &r);
        if (s < best)
            best = s;
        sim_result_free(&r);
    }
    char size[64];
    snprintf(size, sizeof size, "1000 req x %d tok L48 E128 k8 K8", out_tokens);
    bench_row("sim eldr re-run (dashboard)", size, best, 1.0 / best, "runs/s");
    free(mu);
    sim_workload_free(&w);
    sig_recipe_free(&rec);
    trace_free(t);
}

static void bench_real(void)
{
    trace_t *t = NULL;
    if (access(REAL_DATA, R_OK) != 0 || trace_load(REAL_DATA, &t, err, sizeof err)) {
        fprintf(stderr, "bench_sim: %s not available, row skipped\n", REAL_DATA);
        return;
    }
    sim_config c;
    sim_config_default(&c);
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = 60;
    sim_workload w;
    if (sim_workload_init(&w, t, &c, NULL, err, sizeof err))
        die("workload");
    sim_result r;
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double s = sim_once(&w, ROUTE_JSQ, 4, NULL, &r);
        if (s < best)
            best = s;
        sim_result_free(&r);
    }
    bench_row("sim jsq, recorded activations", "gpt-oss-20b 449 req K4", best, 1.0 / best,
              "runs/s");
    sim_workload_free(&w);
    trace_free(t);
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The floor of `runs` simulations of w: every token's L x k ids read
 * from its request's rows (cycled, as the simulator reads them), counted
 * by the simulator's own counter (sim_distinct.h) `batch` tokens at a
 * time: the marks alone, with no events, routing, sampling or queues.
 * Returns CPU seconds; *sum gets the counts' total, so that nothing is
 * optimised away. */
static double marks_floor(const sim_workload *w, int runs, int batch, int64_t *sum)
{
    int L = w->L;
    sim_distinct d;
    if (sim_distinct_init(&d, L, w->E, w->k, w->id_bytes, 1, err, sizeof err))
        die("distinct");
    sim_tokens *tok = calloc((size_t)w->n, sizeof *tok);
    const void **rows = calloc((size_t)batch, sizeof *rows);
    int *U = calloc((size_t)L, sizeof *U);
    for (int64_t i = 0; i < w->n; i++)
        if (sim_tokens_open(w, i, &tok[i], err, sizeof err))
            die("tokens");
    int64_t total = 0;
    int nb = 0;
    double t0 = cpu_now();
    for (int run = 0; run < runs; run++)
        for (int64_t i = 0; i < w->n; i++) {
            const sim_tokens *s = &tok[i];
            size_t width = (size_t)L * w->k * s->id_bytes;
            for (int32_t t = 0; t < w->out_tokens[i]; t++) {
                rows[nb++] = (const char *)s->rows + (size_t)(t % s->n_rows) * width;
                if (nb < batch)
                    continue;
                sim_distinct_count(&d, rows, nb, U);
                for (int l = 0; l < L; l++)
                    total += U[l];
                nb = 0;
            }
        }
    double secs = cpu_now() - t0;
    for (int64_t i = 0; i < w->n; i++)
        sim_tokens_close(&tok[i]);
    free(tok);
    free(rows);
    free(U);
    sim_distinct_free(&d);
    *sum = total;
    return secs;
}

/* `eldr sim` before its pools were shared (commit 23d7981): this bench
 * built against that commit's core library, on this machine, in CPU
 * seconds (best of 3 runs of the bench, the cores shared). */
#define SIM_TOKENS_EARLIER 5.32e5 /* 3,245,170 tokens in 6.10 CPU s */

static void bench_issue34(void)
{
    enum { N = 5000, L = 48, E = 128, k = 8, K = 8, D = 8 };
    static const route_kind kinds[] = {ROUTE_ELDR, ROUTE_RANDOM, ROUTE_RR, ROUTE_JSQ,
                                       ROUTE_P2C};
    int n_kinds = (int)(sizeof kinds / sizeof *kinds);
    trace_t *t = synthetic(N, L, E, k, D, 16, 11);
    rng_t g;
    rng_seed(&g, 34);
    for (int64_t r = 0; r < N; r++) /* decode lengths 16..240, mean 128 */
        t->decode_tokens[r] = 16 + (int32_t)rng_below(&g, 225);
    sig_recipe rec;
    int layers[16];
    for (int i = 0; i < 16; i++)
        layers[i] = 2 + 3 * i;
    if (sig_recipe_init(&rec, SIG_COUNT, L, E, layers, 16, err, sizeof err))
        die("recipe");
    sim_config c;
    sim_config_default(&c);
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = 200;
    /* the pool cache scaled as the requests are (a quarter): the pools
     * stand to it as the big trace's stand to the default */
    c.pool_cache = SIM_DEFAULT_POOL_CACHE / 20000 * N;
    c.no_heat = 1; /* as eldr sim without --csv */
    sim_workload w;
    double best = 1e30, batch = 0, build = 0, best_build = 0;
    int64_t tokens = 0;
    for (int rep = 0; rep < 2; rep++) {
        double t0 = cpu_now();
        if (sim_workload_init(&w, t, &c, &rec, err, sizeof err))
            die("workload");
        build = cpu_now() - t0;
        float *mu = label_centroids(&w, D);
        double mb = 0;
        for (int i = 0; i < n_kinds; i++) {
            sim_result r;
            sim_once(&w, kinds[i], K, kinds[i] == ROUTE_ELDR ? mu : NULL, &r);
            mb += r.mean_batch / n_kinds;
            sim_result_free(&r);
        }
        double s = cpu_now() - t0;
        free(mu);
        if (s < best)
            best = s, best_build = build;
        batch = mb;
        tokens = w.total_tokens * n_kinds;
        if (rep < 1)
            sim_workload_free(&w);
    }
    double floor_s = 1e30;
    int64_t sum = 0;
    for (int rep = 0; rep < 2; rep++) {
        double s = marks_floor(&w, n_kinds, (int)(batch + 0.5), &sum);
        if (s < floor_s)
            floor_s = s;
    }
    fprintf(stderr, "bench_sim: issue 34 shape: %lld tokens in %d runs, mean batch %.1f, "
            "%.2f CPU s (the workload: arrivals, signatures, pools %.2f s); the marks alone "
            "%.2f CPU s (%lld distinct)\n", (long long)tokens, n_kinds, batch, best,
            best_build, floor_s, (long long)sum);
    char unit[160];
    if (SIM_TOKENS_EARLIER > 0)
        snprintf(unit, sizeof unit, "M decode tok/s (floor %.1f, earlier %.2f)",
                 (double)tokens / floor_s / 1e6, SIM_TOKENS_EARLIER / 1e6);
    else
        snprintf(unit, sizeof unit, "M decode tok/s (floor %.1f)",
                 (double)tokens / floor_s / 1e6);
    bench_row("sim 5 policies + pools, CPU time", "5000 req L48 E128 k8 K8 200 req/s", best,
              (double)tokens / best / 1e6, unit);
    sim_workload_free(&w);
    sig_recipe_free(&rec);
    trace_free(t);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--issue34")) { /* that row alone */
        bench_issue34();
        return 0;
    }
    bench_issue34();
    bench_decision();
    bench_rerun(128);
    bench_rerun(512);
    bench_real();
    bench_big();
    return 0;
}
