/* bench_sim.c - speed of routing decisions and of the decode simulator.
 *
 * Rows:
 *   one ELDR decision at |S|*E = 2560, K = 16 (target < 20 us);
 *   10000 requests x 512 decode tokens x 48 layers x top-8 on 16 workers,
 *   one policy, one core (target < 10 s);
 *   1000 requests re-simulated, as the dashboard does on a key press
 *   (target < 200 ms), with 128 and with 512 tokens each: the workload
 *   (arrivals, signatures, sampled pools) is built once, as there;
 *   the real gpt-oss-20b trace, every row, recorded activations.
 * The synthetic trace is built here (8 domains with preferred experts;
 * a request's layer uses 2k..6k of them, 16..48 at k = 8); each count
 * profile is valid by construction (every token picks k distinct
 * experts). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "err.h"
#include "rng.h"
#include "route.h"
#include "sim.h"
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

int main(void)
{
    bench_decision();
    bench_rerun(128);
    bench_rerun(512);
    bench_real();
    bench_big();
    return 0;
}
