/* route.c - the locality band and the baseline policies (route.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "route.h"

/* Stream of rng_seed_stream for each kind, so that a seed gives random,
 * jsq and p2c independent draws (and rng's other users other streams). */
#define ROUTE_STREAM_BASE 0x726f757465000000ull /* "route" */

static const char *const kind_names[ROUTE_N_KINDS] = {
    "eldr", "random", "rr", "jsq", "p2c", "domain", "eldr-online", "eldr-cost",
};

static const char *const rule_names[RULE_N] = {
    "locality", "band-jsq", "min2", "no-signature", "random",
    "rr", "jsq", "p2c", "domain", "unlabeled", "cost",
};

const char *route_kind_name(route_kind k)
{
    return (unsigned)k < ROUTE_N_KINDS ? kind_names[k] : "?";
}

int route_kind_parse(const char *name)
{
    for (int k = 0; k < ROUTE_N_KINDS; k++)
        if (!strcmp(name, kind_names[k]))
            return k;
    return -1;
}

int route_kind_is_balancer(route_kind k)
{
    return k == ROUTE_RANDOM || k == ROUTE_RR || k == ROUTE_JSQ || k == ROUTE_P2C;
}

int route_kind_has_centroids(route_kind k)
{
    return k == ROUTE_ELDR || k == ROUTE_ELDR_ONLINE;
}

const char *route_rule_name(route_rule r)
{
    return (unsigned)r < RULE_N ? rule_names[r] : "?";
}

int route_policy_init(route_policy *p, route_kind kind, int K, uint64_t seed,
                      char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if ((unsigned)kind >= ROUTE_N_KINDS)
        return eldr_errf(err, errlen, "route: unknown policy %d", (int)kind);
    if (K < 1 || K > ROUTE_MAX_WORKERS)
        return eldr_errf(err, errlen, "route: workers K = %d outside 1..%d", K,
                         ROUTE_MAX_WORKERS);
    p->kind = kind;
    p->K = K;
    p->tau = 0.1;
    p->min2 = 1;
    rng_seed_stream(&p->rng, seed, ROUTE_STREAM_BASE + (uint64_t)kind);
    return 0;
}

void route_policy_free(route_policy *p)
{
    if (!p)
        return;
    free(p->pool_start);
    free(p->pool_size);
    p->pool_start = p->pool_size = NULL;
}

int route_policy_set_centroids(route_policy *p, const float *centroids, size_t dim,
                               double tau, int min2, char *err, size_t errlen)
{
    if (!centroids || dim == 0)
        return eldr_errf(err, errlen, "route: eldr needs centroids");
    if (!isfinite(tau) || tau < 0)
        return eldr_errf(err, errlen, "route: tau %g must be finite and >= 0", tau);
    p->centroids = centroids;
    p->dim = dim;
    p->tau = tau;
    p->min2 = min2 ? 1 : 0;
    return 0;
}

/* Proportional split of K workers over the labels (see route.h). */
static void split_pools(route_policy *p, const double *share, int n)
{
    int *size = p->pool_size, *start = p->pool_start, K = p->K, npos = 0;
    for (int j = 0; j < n; j++)
        npos += share[j] > 0;
    if (npos > K) {
        /* more labels than workers: one worker per label, labels placed
         * largest share first on the worker with the least share so far
         * (longest-processing-time-first bin packing) */
        double load[ROUTE_MAX_WORKERS] = {0};
        for (int j = 0; j < n; j++)
            size[j] = 0;
        for (int done = 0; done < npos; done++) {
            int big = -1, w = 0;
            for (int j = 0; j < n; j++)
                if (share[j] > 0 && !size[j] && (big < 0 || share[j] > share[big]))
                    big = j;
            for (int k = 1; k < K; k++)
                if (load[k] < load[w])
                    w = k;
            size[big] = 1;
            start[big] = w;
            load[w] += share[big];
        }
        return;
    }
    for (int j = 0; j < n; j++)
        size[j] = share[j] > 0;
    for (int left = K - npos; left > 0; left--) {
        int best = -1;
        for (int j = 0; j < n; j++)
            if (share[j] > 0 && (best < 0 || share[j] / size[j] > share[best] / size[best]))
                best = j;
        size[best]++;
    }
    for (int j = 0, s = 0; j < n; j++) {
        start[j] = s;
        s += size[j];
    }
}

int route_policy_set_domains(route_policy *p, const double *share, int n_labels,
                             char *err, size_t errlen)
{
    if (n_labels < 1 || !share)
        return eldr_errf(err, errlen, "route: domain policy needs label shares");
    double sum = 0;
    for (int j = 0; j < n_labels; j++) {
        if (!isfinite(share[j]) || share[j] < 0)
            return eldr_errf(err, errlen, "route: label %d share %g must be finite and >= 0",
                             j, share[j]);
        sum += share[j];
    }
    if (!(sum > 0))
        return eldr_errf(err, errlen, "route: every label share is zero");
    free(p->pool_start);
    free(p->pool_size);
    p->pool_start = calloc((size_t)n_labels, sizeof *p->pool_start);
    p->pool_size = calloc((size_t)n_labels, sizeof *p->pool_size);
    if (!p->pool_start || !p->pool_size) {
        route_policy_free(p);
        return eldr_errf(err, errlen, "route: out of memory for %d label pools", n_labels);
    }
    p->n_labels = n_labels;
    split_pools(p, share, n_labels);
    return 0;
}

/* Least loaded of cand[0..n), lowest index on ties (cand ascending). */
static int least_loaded(const int *cand, int n, const int64_t *load)
{
    int best = cand[0];
    for (int i = 1; i < n; i++)
        if (load[cand[i]] < load[best])
            best = cand[i];
    return best;
}

void route_decision_begin(route_decision *d, int K, const int64_t *load)
{
    d->K = K;
    d->has_sim = 0;
    d->has_cost = 0;
    d->sim_max = 0;
    d->n_cand = 0;
    memcpy(d->load, load, (size_t)K * sizeof *load);
}

static void all_candidates(route_decision *d)
{
    d->n_cand = d->K;
    for (int k = 0; k < d->K; k++)
        d->cand[k] = k;
}

int route_band_decide(const double *sim, int K, double tau, int min2, const int64_t *load,
                      route_decision *d)
{
    return route_band_decide_among(sim, K, tau, min2, load, NULL, d);
}

/* The band over the eligible workers only: an ineligible one is neither
 * the top, nor in the band, nor the min-two second. Everything else is
 * route_band_decide's rule, so with every worker eligible the two agree
 * bit for bit. */
int route_band_decide_among(const double *sim, int K, double tau, int min2,
                            const int64_t *load, const uint8_t *eligible, route_decision *d)
{
    route_decision_begin(d, K, load);
    d->has_sim = 1;
    int top = -1, n_ok = 0;
    for (int k = 0; k < K; k++) {
        d->sim[k] = sim[k];
        if (eligible && !eligible[k])
            continue;
        n_ok++;
        if (top < 0 || sim[k] > sim[top])
            top = k;
    }
    if (top < 0) {
        d->sim_max = 0;
        d->rule = RULE_LOCALITY;
        return d->worker = -1;
    }
    d->sim_max = sim[top];
    double floor_ = sim[top] - tau;
    for (int k = 0; k < K; k++)
        if ((!eligible || eligible[k]) && sim[k] >= floor_)
            d->cand[d->n_cand++] = k;
    if (d->n_cand >= 2) {
        d->rule = RULE_BAND_JSQ;
    } else if (tau > 0 && min2 && n_ok >= 2) {
        int second = -1;
        for (int k = 0; k < K; k++)
            if (k != top && (!eligible || eligible[k]) && (second < 0 || sim[k] > sim[second]))
                second = k;
        d->n_cand = 2;
        d->cand[0] = top < second ? top : second;
        d->cand[1] = top < second ? second : top;
        d->rule = RULE_MIN2;
    } else {
        d->rule = RULE_LOCALITY;
    }
    d->worker = least_loaded(d->cand, d->n_cand, load);
    return d->worker;
}

int route_nosig_decide_among(int K, const int64_t *load, const uint8_t *eligible,
                             route_decision *d)
{
    route_decision_begin(d, K, load);
    for (int k = 0; k < K; k++)
        if (!eligible || eligible[k])
            d->cand[d->n_cand++] = k;
    d->rule = RULE_NO_SIGNATURE;
    if (d->n_cand == 0)
        return d->worker = -1;
    return d->worker = least_loaded(d->cand, d->n_cand, load);
}

static int is_zero(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] != 0.0f)
            return 0;
    return 1;
}

/* Eight float partial sums: independent chains the compiler can keep in
 * vector registers, summed in double. A hand loop rather than BLAS, whose
 * thread pool costs more than one small product (and spins on the cores
 * the simulator needs), and whose fallback kernels on CPUs it does not
 * recognise are slower than this loop. Compiled for AVX2 too (picked at
 * load time by the CPU): the eight sums are then one register instead of
 * two, each lane the same multiplications and additions in the same order
 * (no fused multiply-add), so the result is the same to the bit. */
__attribute__((target_clones("avx2", "default")))
static double dot_clones(const float *a, const float *b, size_t n)
{
    float acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[i + j] * b[i + j];
    double s = 0;
    for (int j = 0; j < 8; j++)
        s += acc[j];
    for (; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* A plain symbol over the clones: other files call it, and clang (the
 * fuzz build) leaves a cross-file call to a target_clones function
 * unresolved. */
double route_dot(const float *a, const float *b, size_t n)
{
    return dot_clones(a, b, n);
}

static int decide_eldr(route_policy *p, const float *sig, const int64_t *load,
                       route_decision *d)
{
    if (!sig || !p->centroids || is_zero(sig, p->dim)) {
        route_decision_begin(d, p->K, load);
        all_candidates(d);
        d->rule = RULE_NO_SIGNATURE;
        return d->worker = least_loaded(d->cand, d->n_cand, load);
    }
    double sim[ROUTE_MAX_WORKERS];
    for (int k = 0; k < p->K; k++)
        sim[k] = route_dot(p->centroids + (size_t)k * p->dim, sig, p->dim);
    return route_band_decide(sim, p->K, p->tau, p->min2, load, d);
}

/* Fewest in-flight, uniform among ties (reservoir sampling, one pass). */
static int decide_jsq(route_policy *p, const int64_t *load, route_decision *d)
{
    route_decision_begin(d, p->K, load);
    all_candidates(d);
    d->rule = RULE_JSQ;
    int best = 0;
    uint64_t ties = 1;
    for (int k = 1; k < p->K; k++) {
        if (load[k] < load[best]) {
            best = k;
            ties = 1;
        } else if (load[k] == load[best] && rng_below(&p->rng, ++ties) == 0) {
            best = k;
        }
    }
    return d->worker = best;
}

static int decide_p2c(route_policy *p, const int64_t *load, route_decision *d)
{
    route_decision_begin(d, p->K, load);
    d->rule = RULE_P2C;
    if (p->K == 1) {
        d->n_cand = 1;
        d->cand[0] = 0;
        return d->worker = 0;
    }
    int a = (int)rng_below(&p->rng, (uint64_t)p->K);
    int b = (int)rng_below(&p->rng, (uint64_t)p->K - 1);
    if (b >= a)
        b++;
    d->n_cand = 2;
    d->cand[0] = a < b ? a : b;
    d->cand[1] = a < b ? b : a;
    return d->worker = load[b] < load[a] ? b : a;
}

static int decide_domain(route_policy *p, int label, const int64_t *load,
                         route_decision *d)
{
    route_decision_begin(d, p->K, load);
    if (label < 0 || label >= p->n_labels || p->pool_size[label] == 0) {
        all_candidates(d);
        d->rule = RULE_UNLABELED;
    } else {
        d->n_cand = p->pool_size[label];
        for (int i = 0; i < d->n_cand; i++)
            d->cand[i] = p->pool_start[label] + i;
        d->rule = RULE_DOMAIN;
    }
    return d->worker = least_loaded(d->cand, d->n_cand, load);
}

int route_decide(route_policy *p, const float *sig, int label, const int64_t *load,
                 route_decision *d)
{
    switch (p->kind) {
    case ROUTE_ELDR:
    case ROUTE_ELDR_ONLINE:
        return decide_eldr(p, sig, load, d);
    case ROUTE_RANDOM:
        route_decision_begin(d, p->K, load);
        all_candidates(d);
        d->rule = RULE_RANDOM;
        return d->worker = (int)rng_below(&p->rng, (uint64_t)p->K);
    case ROUTE_RR:
        route_decision_begin(d, p->K, load);
        all_candidates(d);
        d->rule = RULE_RR;
        return d->worker = (int)(p->rr_next++ % (uint64_t)p->K);
    case ROUTE_JSQ:
        return decide_jsq(p, load, d);
    case ROUTE_P2C:
        return decide_p2c(p, load, d);
    case ROUTE_DOMAIN:
        return decide_domain(p, label, load, d);
    default:
        route_decision_begin(d, p->K, load);
        d->rule = RULE_JSQ;
        return d->worker = 0;
    }
}
