/* costrule.c - the cost rule's state and decision (costrule.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costrule.h"
#include "err.h"

#define RESCALE 0x1p512   /* a product below 1/RESCALE is multiplied by it */
#define RESUM_EVERY 4096  /* updates of a worker between exact sums of P */

/* Room for cells in r's arrays; -1 out of memory. */
static int req_room(cost_req *r, int32_t cells)
{
    if (r->cap >= cells)
        return 0;
    uint32_t *idx = realloc(r->idx, (size_t)cells * sizeof *idx);
    if (idx)
        r->idx = idx;
    float *q = realloc(r->q, (size_t)cells * sizeof *q);
    if (q)
        r->q = q;
    float *dense = realloc(r->dense, (size_t)cells * sizeof *dense);
    if (dense)
        r->dense = dense;
    if (!idx || !q || !dense)
        return -1;
    r->cap = cells;
    return 0;
}

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint32_t v8u32 __attribute__((vector_size(32)));

/* Written with GCC vector types (as vsum.c): -O2's vectoriser leaves
 * loops of unknown length alone, and each clone lowers a v8f to one ymm
 * or two xmm registers with the same lanes, so every CPU computes the
 * same values. */
#define COST_CLONES __attribute__((target_clones("avx2", "default")))

/* One layer's counts summed. */
COST_CLONES
static uint32_t layer_sum(const uint16_t *c, int E)
{
    v8u32 acc = {0};
    int e = 0;
    for (; e + 8 <= E; e += 8) {
        v8u16 v;
        memcpy(&v, c + e, sizeof v);
        acc += __builtin_convertvector(v, v8u32);
    }
    uint32_t sum = 0;
    for (int j = 0; j < 8; j++)
        sum += acc[j];
    for (; e < E; e++)
        sum += c[e];
    return sum;
}

/* One layer's q = min(1, c * per) into dense; returns the cells > 0. */
COST_CLONES
static int32_t fill_layer(const uint16_t *c, int E, float per, float *dense)
{
    const v8f one = {1, 1, 1, 1, 1, 1, 1, 1}, zero = {0};
    v8i nz = {0};
    int e = 0;
    for (; e + 8 <= E; e += 8) {
        v8u16 v;
        memcpy(&v, c + e, sizeof v);
        v8f q = __builtin_convertvector(v, v8f) * per;
        v8i lt = q < one;   /* -1 where q < 1 */
        v8i qi, onei;
        memcpy(&qi, &q, sizeof qi);
        memcpy(&onei, &one, sizeof onei);
        v8i r = (qi & lt) | (onei & ~lt);
        memcpy(dense + e, &r, sizeof r);
        nz -= q > zero;
    }
    int32_t n = 0;
    for (int j = 0; j < 8; j++)
        n += nz[j];
    for (; e < E; e++) {
        float q = (float)c[e] * per;
        dense[e] = q < 1.0f ? q : 1.0f;
        n += dense[e] > 0.0f;
    }
    return n;
}

int cost_req_set(cost_req *r, const uint16_t *counts, int L, int E, int top_k, char *err,
                 size_t errlen)
{
    if (L < 1 || E < 1 || top_k < 1 || (size_t)L * (size_t)E > INT32_MAX)
        return eldr_errf(err, errlen, "cost rule: geometry L %d, E %d, top-k %d", L, E, top_k);
    int32_t cells = L * E;
    if (req_room(r, cells) < 0)
        return eldr_errf(err, errlen, "cost rule: out of memory for %d cells", cells);
    r->n = 0;
    r->kv = 0;
    r->sparse = 0;
    r->cells = cells;
    for (int l = 0; l < L; l++) {
        const uint16_t *c = counts + (size_t)l * E;
        float *d = r->dense + (size_t)l * E;
        uint32_t sum = layer_sum(c, E);
        if (!sum) {
            memset(d, 0, (size_t)E * sizeof *d);   /* a dense layer, or no signal */
            continue;
        }
        /* sum = tokens * top_k: q is the expected picks of e per token */
        double tokens = (double)sum / top_k;
        if (tokens > r->kv)
            r->kv = tokens;
        r->n += fill_layer(c, E, (float)(top_k / (double)sum), d);
    }
    return 0;
}

void cost_req_sparse(cost_req *r)
{
    if (r->sparse || !r->dense)
        return;
    int32_t n = 0;
    for (int32_t c = 0; c < r->cells; c++) {
        r->idx[n] = (uint32_t)c;
        r->q[n] = r->dense[c];
        n += r->dense[c] > 0.0f;
    }
    r->n = n;
    r->sparse = 1;
}

void cost_req_free(cost_req *r)
{
    if (!r)
        return;
    free(r->idx);
    free(r->q);
    free(r->dense);
    memset(r, 0, sizeof *r);
}

int cost_state_init(cost_state *s, int K, int L, int E, const cost_model *m, int max_batch,
                    char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (K < 1 || K > ROUTE_MAX_WORKERS)
        return eldr_errf(err, errlen, "cost rule: workers K = %d outside 1..%d", K,
                         ROUTE_MAX_WORKERS);
    if (L < 1 || E < 1 || (size_t)L * (size_t)E > INT32_MAX)
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
    s->prod = malloc(n * sizeof *s->prod);
    s->shift = malloc(n * sizeof *s->shift);
    s->sure = malloc(n * sizeof *s->sure);
    s->P = malloc(n * sizeof *s->P);
    s->sumP = malloc((size_t)K * sizeof *s->sumP);
    s->members = malloc((size_t)K * sizeof *s->members);
    s->kv = malloc((size_t)K * sizeof *s->kv);
    s->updates = malloc((size_t)K * sizeof *s->updates);
    s->scratch = calloc(s->cells, sizeof *s->scratch);
    if (!s->prod || !s->shift || !s->sure || !s->P || !s->sumP || !s->members || !s->kv ||
        !s->updates || !s->scratch) {
        cost_state_free(s);
        return eldr_errf(err, errlen, "cost rule: out of memory for %d x %zu cells", K,
                         n / (size_t)K);
    }
    for (int k = 0; k < K; k++)
        cost_state_reset(s, k);
    return 0;
}

void cost_state_free(cost_state *s)
{
    if (!s)
        return;
    free(s->prod);
    free(s->shift);
    free(s->sure);
    free(s->P);
    free(s->sumP);
    free(s->members);
    free(s->kv);
    free(s->updates);
    free(s->scratch);
    memset(s, 0, sizeof *s);
}

void cost_state_reset(cost_state *s, int k)
{
    size_t base = (size_t)k * s->cells;
    for (size_t c = 0; c < s->cells; c++) {
        s->prod[base + c] = 1.0;
        s->shift[base + c] = 0;
        s->sure[base + c] = 0;
        s->P[base + c] = 1.0f;
    }
    s->sumP[k] = (double)s->cells;
    s->members[k] = 0;
    s->kv[k] = 0;
    s->updates[k] = 0;
}

/* One cell's product times (1 - q) (sign > 0) or over it (sign < 0),
 * rescaled so that it neither underflows nor, once divided back, keeps a
 * scale it no longer needs. */
static void update_cell(cost_state *s, size_t c, float q, int sign)
{
    if (q >= 1.0f) {
        if (sign > 0)
            s->sure[c]++;
        else if (s->sure[c])
            s->sure[c]--;
        return;
    }
    double f = 1.0 - (double)q;
    if (sign > 0) {
        s->prod[c] *= f;
        if (s->prod[c] < 1.0 / RESCALE) {
            s->prod[c] *= RESCALE;
            s->shift[c]++;
        }
    } else {
        s->prod[c] /= f;
        if (s->shift[c] > 0 && s->prod[c] >= 1.0) {
            s->prod[c] /= RESCALE;
            s->shift[c]--;
        } else if (s->shift[c] == 0 && s->prod[c] > 1.0) {
            s->prod[c] = 1.0;   /* rounding: idle never above certain */
        }
    }
}

/* One cell of worker k (at index c of its rows) takes or gives back q. */
static double apply_cell(cost_state *s, size_t c, float q, int sign)
{
    update_cell(s, c, q, sign);
    float old = s->P[c];
    float now = s->sure[c] || s->shift[c] ? 0.0f : (float)s->prod[c];
    s->P[c] = now;
    return (double)now - old;
}

typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef int64_t v4l __attribute__((vector_size(32)));

/* Eight cells of worker row c.. take or give back q[0..8) at once: the
 * common case (every q below 1, no member with q = 1 and no rescale on
 * these cells, no product leaving [2^-512, 1]) in vector registers, any
 * other cell of the block one by one (apply_cell). A q of 0 multiplies
 * by 1 and changes nothing. Returns the change of the cells' P sum. */
COST_CLONES
static double apply_block(cost_state *s, size_t c, const float *q, int sign)
{
    v8f qv;
    memcpy(&qv, q, sizeof qv);
    const v8f zero = {0}, one = {1, 1, 1, 1, 1, 1, 1, 1};
    v8i nz = qv > zero, full = qv >= one;
    v8i sure, shift;
    memcpy(&sure, s->sure + c, sizeof sure);
    memcpy(&shift, s->shift + c, sizeof shift);
    int any = 0, odd = 0;
    for (int j = 0; j < 8; j++) {
        any |= nz[j];
        odd |= full[j] | sure[j] | shift[j];
    }
    if (!any)
        return 0;
    if (!odd) {
        v4f q0 = {qv[0], qv[1], qv[2], qv[3]}, q1 = {qv[4], qv[5], qv[6], qv[7]};
        const v4d oned = {1, 1, 1, 1};
        v4d f0 = oned - __builtin_convertvector(q0, v4d);
        v4d f1 = oned - __builtin_convertvector(q1, v4d);
        v4d p0, p1;
        memcpy(&p0, s->prod + c, sizeof p0);
        memcpy(&p1, s->prod + c + 4, sizeof p1);
        if (sign > 0) {
            p0 *= f0;
            p1 *= f1;
        } else {
            p0 /= f0;
            p1 /= f1;
        }
        const v4d tiny = {1.0 / RESCALE, 1.0 / RESCALE, 1.0 / RESCALE, 1.0 / RESCALE};
        v4l low0 = p0 < tiny, low1 = p1 < tiny;
        int low = 0;
        for (int j = 0; j < 4; j++)
            low |= (int)(low0[j] | low1[j]);
        if (!low) {
            /* idle is never above certain: rounding of a divide, clamped */
            for (int j = 0; j < 4; j++) {
                p0[j] = p0[j] > 1.0 ? 1.0 : p0[j];
                p1[j] = p1[j] > 1.0 ? 1.0 : p1[j];
            }
            v4f n0 = __builtin_convertvector(p0, v4f), n1 = __builtin_convertvector(p1, v4f);
            v4f o0, o1;
            memcpy(&o0, s->P + c, sizeof o0);
            memcpy(&o1, s->P + c + 4, sizeof o1);
            v4d d = (__builtin_convertvector(n0, v4d) - __builtin_convertvector(o0, v4d)) +
                    (__builtin_convertvector(n1, v4d) - __builtin_convertvector(o1, v4d));
            memcpy(s->prod + c, &p0, sizeof p0);
            memcpy(s->prod + c + 4, &p1, sizeof p1);
            memcpy(s->P + c, &n0, sizeof n0);
            memcpy(s->P + c + 4, &n1, sizeof n1);
            return (d[0] + d[1]) + (d[2] + d[3]);
        }
    }
    double dsum = 0;
    for (int j = 0; j < 8; j++)
        if (q[j] > 0.0f)
            dsum += apply_cell(s, c + (size_t)j, q[j], sign);
    return dsum;
}

/* Worker row base takes or gives back a dense row of q, eight cells at a
 * time; the change of its P sum. */
static double apply_dense(cost_state *s, size_t base, const float *dense, int sign)
{
    double dsum = 0;
    size_t c = 0;
    for (; c + 8 <= s->cells; c += 8)
        dsum += apply_block(s, base + c, dense + c, sign);
    for (; c < s->cells; c++)
        if (dense[c] > 0.0f)
            dsum += apply_cell(s, base + c, dense[c], sign);
    return dsum;
}

/* A sparse request (a router's stored cells) that covers more than a
 * third of the row goes through the dense path, scattered into the
 * state's zeroed scratch row and zeroed again after: 1.3 ns a cell there
 * against 3.6 ns a cell one by one, and the same products cell by cell. */
static int scatter_pays(const cost_state *s, const cost_req *x)
{
    return (size_t)x->n * 3 > s->cells;
}

static void apply(cost_state *s, int k, const cost_req *x, int sign)
{
    size_t base = (size_t)k * s->cells;
    double dsum = 0;
    if (!x->sparse && x->dense && x->cells == (int32_t)s->cells) {
        dsum = apply_dense(s, base, x->dense, sign);
    } else if (!x->sparse && x->dense) {
        return;   /* a dense row of another geometry is not this state's */
    } else if (scatter_pays(s, x)) {
        for (int32_t i = 0; i < x->n; i++)
            s->scratch[x->idx[i]] = x->q[i];
        dsum = apply_dense(s, base, s->scratch, sign);
        for (int32_t i = 0; i < x->n; i++)
            s->scratch[x->idx[i]] = 0.0f;
    } else {
        for (int32_t i = 0; i < x->n; i++)
            dsum += apply_cell(s, base + x->idx[i], x->q[i], sign);
    }
    s->sumP[k] += dsum;
    s->kv[k] += sign * x->kv;
    if (++s->updates[k] >= RESUM_EVERY) {
        /* the running sum's rounding, cleared now and then */
        double sum = 0;
        for (size_t c = 0; c < s->cells; c++)
            sum += s->P[base + c];
        s->sumP[k] = sum;
        s->updates[k] = 0;
    }
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

/* A product of n floats: two v8f partial sums (16 lanes), added lane by
 * lane, then the tail. */
COST_CLONES
static double dot_f(const float *a, const float *b, size_t n)
{
    v8f s0 = {0}, s1 = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v8f x0, y0, x1, y1;
        memcpy(&x0, a + i, sizeof x0);
        memcpy(&y0, b + i, sizeof y0);
        memcpy(&x1, a + i + 8, sizeof x1);
        memcpy(&y1, b + i + 8, sizeof y1);
        s0 += x0 * y0;
        s1 += x1 * y1;
    }
    s0 += s1;
    double s = 0;
    for (int j = 0; j < 8; j++)
        s += s0[j];
    for (; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* sum over x's cells of P_k * q: the distinct experts x adds in
 * expectation; over the dense row when there is one (one contiguous
 * product), else gathered. */
static double added_u(const cost_state *s, int k, const cost_req *x)
{
    const float *P = s->P + (size_t)k * s->cells;
    if (x->dense && x->cells == (int32_t)s->cells)
        return dot_f(P, x->dense, s->cells);
    double sum = 0;
    for (int32_t i = 0; i < x->n; i++)
        sum += (double)P[x->idx[i]] * x->q[i];
    return sum;
}

void cost_worker_terms(const cost_state *s, int k, const cost_req *x, int64_t B,
                       cost_terms *t)
{
    const cost_model *m = &s->m;
    int M = s->max_batch, L = s->L;
    double U = cost_state_expected_u(s, k);
    double dU = added_u(s, k, x);
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
    route_decision_begin(d, K, load);
    d->has_cost = 1;
    d->rule = RULE_COST;
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
