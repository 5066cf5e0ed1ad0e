/* costrule.c - the cost rule's state and decision (costrule.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costrule.h"
#include "err.h"

int cost_req_set(cost_req *r, const uint16_t *counts, int L, int E, int top_k, char *err,
                 size_t errlen)
{
    if (L < 1 || E < 1 || top_k < 1 || (size_t)L * (size_t)E > UINT32_MAX)
        return eldr_errf(err, errlen, "cost rule: geometry L %d, E %d, top-k %d", L, E, top_k);
    int32_t cells = L * E;
    if (r->cap < cells) {
        uint32_t *idx = realloc(r->idx, (size_t)cells * sizeof *idx);
        if (idx)
            r->idx = idx;
        float *q = realloc(r->q, (size_t)cells * sizeof *q);
        if (q)
            r->q = q;
        float *lq = realloc(r->lq, (size_t)cells * sizeof *lq);
        if (lq)
            r->lq = lq;
        if (!idx || !q || !lq)
            return eldr_errf(err, errlen, "cost rule: out of memory for %d cells", cells);
        r->cap = cells;
    }
    r->n = 0;
    r->kv = 0;
    for (int l = 0; l < L; l++) {
        const uint16_t *c = counts + (size_t)l * E;
        double sum = 0;
        for (int e = 0; e < E; e++)
            sum += c[e];
        if (sum <= 0)
            continue;   /* a dense layer, or no signal in it */
        /* sum = tokens * top_k: q is the expected picks of e per token */
        double tokens = sum / top_k;
        if (tokens > r->kv)
            r->kv = tokens;
        for (int e = 0; e < E; e++) {
            if (!c[e])
                continue;
            double q = c[e] / tokens;
            if (q >= 1.0)
                q = 1.0;
            r->idx[r->n] = (uint32_t)(l * E + e);
            r->q[r->n] = (float)q;
            r->lq[r->n] = q >= 1.0 ? 0.0f : (float)log1p(-(double)(float)q);
            r->n++;
        }
    }
    return 0;
}

void cost_req_free(cost_req *r)
{
    if (!r)
        return;
    free(r->idx);
    free(r->q);
    free(r->lq);
    memset(r, 0, sizeof *r);
}

int cost_state_init(cost_state *s, int K, int L, int E, const cost_model *m, int max_batch,
                    char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (K < 1 || K > ROUTE_MAX_WORKERS)
        return eldr_errf(err, errlen, "cost rule: workers K = %d outside 1..%d", K,
                         ROUTE_MAX_WORKERS);
    if (L < 1 || E < 1 || (size_t)L * (size_t)E > UINT32_MAX)
        return eldr_errf(err, errlen, "cost rule: geometry L %d, E %d", L, E);
    if (max_batch < 1)
        return eldr_errf(err, errlen, "cost rule: max batch %d must be >= 1", max_batch);
    s->K = K;
    s->L = L;
    s->E = E;
    s->cells = (size_t)L * E;
    s->m = *m;
    s->max_batch = max_batch;
    size_t n = (size_t)K * s->cells;
    s->logp = malloc(n * sizeof *s->logp);
    s->sure = malloc(n * sizeof *s->sure);
    s->P = malloc(n * sizeof *s->P);
    s->sumP = malloc((size_t)K * sizeof *s->sumP);
    s->members = malloc((size_t)K * sizeof *s->members);
    s->kv = malloc((size_t)K * sizeof *s->kv);
    if (!s->logp || !s->sure || !s->P || !s->sumP || !s->members || !s->kv) {
        cost_state_free(s);
        return eldr_errf(err, errlen, "cost rule: out of memory for %d x %zu cells", K,
                         s->cells);
    }
    for (int k = 0; k < K; k++)
        cost_state_reset(s, k);
    return 0;
}

void cost_state_free(cost_state *s)
{
    if (!s)
        return;
    free(s->logp);
    free(s->sure);
    free(s->P);
    free(s->sumP);
    free(s->members);
    free(s->kv);
    memset(s, 0, sizeof *s);
}

void cost_state_reset(cost_state *s, int k)
{
    size_t base = (size_t)k * s->cells;
    for (size_t c = 0; c < s->cells; c++) {
        s->logp[base + c] = 0;
        s->sure[base + c] = 0;
        s->P[base + c] = 1.0f;
    }
    s->sumP[k] = (double)s->cells;
    s->members[k] = 0;
    s->kv[k] = 0;
}

/* The idle probability of one cell from its log sum and sure count. */
static float idle_prob(double logp, uint32_t sure)
{
    if (sure)
        return 0.0f;
    return logp >= 0 ? 1.0f : (float)exp(logp);
}

static void apply(cost_state *s, int k, const cost_req *x, int sign)
{
    size_t base = (size_t)k * s->cells;
    double dsum = 0;
    for (int32_t i = 0; i < x->n; i++) {
        size_t c = base + x->idx[i];
        if (x->q[i] >= 1.0f) {
            if (sign > 0)
                s->sure[c]++;
            else if (s->sure[c])
                s->sure[c]--;
        } else {
            s->logp[c] += sign * (double)x->lq[i];
        }
        float old = s->P[c], now = idle_prob(s->logp[c], s->sure[c]);
        s->P[c] = now;
        dsum += (double)now - old;
    }
    s->sumP[k] += dsum;
    s->kv[k] += sign * x->kv;
}

void cost_state_add(cost_state *s, int k, const cost_req *x)
{
    apply(s, k, x, +1);
    s->members[k]++;
}

void cost_state_remove(cost_state *s, int k, const cost_req *x)
{
    if (s->members[k] <= 0)
        return;
    if (--s->members[k] == 0) {
        cost_state_reset(s, k);   /* exact: no rounding carried over */
        return;
    }
    apply(s, k, x, -1);
}

double cost_state_expected_u(const cost_state *s, int k)
{
    if (s->members[k] <= 0)
        return 0;
    double u = (double)s->cells - s->sumP[k];
    return u > 0 ? u : 0;
}

/* sum over x's cells of P_k * q: the distinct experts x adds in
 * expectation. Four partial sums, so that the gathers overlap. */
static double added_u(const float *P, const cost_req *x)
{
    float acc[4] = {0};
    int32_t i = 0, n = x->n;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++)
            acc[j] += P[x->idx[i + j]] * x->q[i + j];
    double s = (double)acc[0] + acc[1] + acc[2] + acc[3];
    for (; i < n; i++)
        s += (double)P[x->idx[i]] * x->q[i];
    return s;
}

void cost_worker_terms(const cost_state *s, int k, const cost_req *x, int64_t B,
                       cost_terms *t)
{
    const cost_model *m = &s->m;
    int M = s->max_batch, L = s->L;
    double U = cost_state_expected_u(s, k);
    double dU = added_u(s->P + (size_t)k * s->cells, x);
    double kv = s->kv[k] > 0 ? s->kv[k] : 0;
    /* a full batch takes x when a member leaves: x joins a batch of M */
    double b = B < M ? (double)B : (double)(M - 1);
    double before = cost_step_time_sum(m, L, U, b, kv);
    double after = cost_step_time_sum(m, L, U + dU, b + 1, kv + x->kv);
    double wait = B < M ? 0 : (double)(B - M + 1) * cost_step_time_sum(m, L, U, M, kv);
    t->B = B;
    t->U = U;
    t->dU = dU;
    t->kv = kv;
    t->t_before = before * 1e3;
    t->t_after = after * 1e3;
    t->wait = wait * 1e3;
    t->cost = ((b + 1) * after - (b > 0 ? b * before : 0) + wait) * 1e3;
}

int cost_decide(const cost_state *s, const cost_req *x, const int64_t *load,
                const uint8_t *eligible, route_decision *d, cost_terms *terms)
{
    int K = s->K, best = -1;
    d->K = K;
    d->has_sim = 0;
    d->sim_max = 0;
    d->n_cand = 0;
    d->has_cost = 1;
    d->rule = RULE_COST;
    memcpy(d->load, load, (size_t)K * sizeof *load);
    for (int k = 0; k < K; k++) {
        if (eligible && !eligible[k]) {
            d->cost[k] = NAN;
            if (terms)
                memset(&terms[k], 0, sizeof terms[k]);
            continue;
        }
        cost_terms t;
        cost_worker_terms(s, k, x, load[k], &t);
        if (terms)
            terms[k] = t;
        d->cost[k] = t.cost;
        d->cand[d->n_cand++] = k;
        if (best < 0) {
            best = k;
            continue;
        }
        double tol = 1e-9 * fabs(d->cost[best]);
        if (t.cost < d->cost[best] - tol ||
            (t.cost <= d->cost[best] + tol && load[k] < load[best]))
            best = k;
    }
    return d->worker = best;
}
