/* costrule.h - the cost rule: send a request to the worker whose decode
 * time it raises least (docs/routing.md, "The cost rule", derives it).
 *
 * For worker k with B_k requests in flight, the rule predicts the
 * increase of the worker's summed per-token time, in ms:
 *
 *   cost_k = (B_k + 1) * t_step(k + x) - B_k * t_step(k)
 *
 * with t_step the cost model's (costmodel.h, every term):
 *   t_step = t0 + L a + b U + c B + d kv,
 * U the expected distinct experts of one decode step of k's batch summed
 * over the L layers, and kv the prompt tokens its requests hold.
 *
 * U is an expectation, not a set difference: request r's normalised
 * prefill counts are taken as its per-token expert distribution, so that
 * one decode token of r activates expert e of layer l with probability
 *   q_r(l, e) = min(1, top_k * counts(l, e) / sum_e' counts(l, e')),
 * independently of the other requests. Expert (l, e) is then idle in a
 * step with probability P_k(l, e) = prod_r (1 - q_r(l, e)), and
 *   U_k = sum_{l,e} (1 - P_k(l, e)),   U_{k+x} = U_k + sum_{l,e} P_k(l, e) q_x(l, e).
 * The state keeps P per worker, updated at every add and remove, so a
 * decision is K products of L*E floats and nothing in it depends on B.
 *
 * A full batch (B_k >= max_batch) takes the request only when a member
 * leaves: the marginal cost is taken at max_batch, and the wait of its
 * B_k - max_batch + 1 positions, each at least one step of the full
 * batch, is added.
 *
 * Ties (costs within 1e-9 relative) go to the fewest in flight, then the
 * lowest index, as the band rule's least-loaded member.
 *
 * What the rule reads is what a router has at decision time: the prefill
 * counts of the requests in flight on each worker, the in-flight counts
 * and the cost model. Never a batch's true experts, never output lengths.
 *
 * Thread safety: none; eldrd holds its state lock around every call. */
#ifndef ELDR_COSTRULE_H
#define ELDR_COSTRULE_H

#include <stddef.h>
#include <stdint.h>

#include "costmodel.h"
#include "route.h"

/* One request's per-token expert inclusion probabilities over the L*E
 * cells (l*E + e): dense, as cost_req_set builds it (what a decision and
 * an update read), and sparse (idx, q ascending) once cost_req_sparse
 * ran: what a router keeps of a request in flight. A cost_req pointing
 * at stored copies of n, idx, q and kv, with dense NULL, removes it.
 * Owns its arrays; zero-initialise and reuse (cost_req_set keeps the
 * room), free with cost_req_free. */
typedef struct cost_req {
    int32_t n;                   /* cells with q > 0 */
    int32_t cap;                 /* room of each array, cells */
    int32_t cells;               /* L*E of dense */
    int sparse;                  /* idx and q hold the n cells */
    uint32_t *idx;               /* [n] */
    float *q;                    /* [n] in (0, 1] */
    float *dense;                /* [cells] q by cell, 0 elsewhere */
    double kv;                   /* the prompt's tokens: its KV in the batch */
} cost_req;

/* From a prompt's prefill counts [L*E] and the router's top-k (>= 1): the
 * dense row, n and kv. A layer with no counts contributes nothing (a
 * dense layer, or no signal). All-zero counts give n = 0: the request
 * adds only its B and its kv (0). -1 with err out of memory or bad
 * geometry. */
int cost_req_set(cost_req *r, const uint16_t *counts, int L, int E, int top_k, char *err,
                 size_t errlen);
/* idx and q from the dense row (once; room is there since cost_req_set). */
void cost_req_sparse(cost_req *r);
void cost_req_free(cost_req *r);

/* The per-worker state the rule decides on. P(cell idle) is kept as a
 * product, multiplied by (1 - q) at an add and divided at a remove (no
 * logarithms: an update is a multiply per cell); a product that falls
 * below 2^-512 is rescaled (shift counts the rescales) so that it never
 * underflows and a remove restores it. A cell some member uses with q = 1
 * is idle with probability 0 (sure counts them). */
typedef struct cost_state {
    int K, L, E;
    size_t cells;                /* L*E */
    cost_model m;
    int max_batch;
    double *prod;                /* [K][cells] product of (1 - q), times 2^(512 shift) */
    int32_t *shift;              /* [K][cells] */
    uint32_t *sure;              /* [K][cells] members with q = 1 */
    float *P;                    /* [K][cells] P(cell idle in a step) */
    double *sumP;                /* [K] sum of P over the cells */
    int64_t *members;            /* [K] requests added and not removed */
    double *kv;                  /* [K] their prompt tokens */
    uint32_t *updates;           /* [K] since sumP was last summed afresh */
    float *scratch;              /* [cells] zero between calls: a large sparse
                                  * request is scattered into it (apply) */
} cost_state;

/* K workers (1..ROUTE_MAX_WORKERS) of an L-layer, E-expert MoE, the cost
 * model and the batch cap (>= 1). Every worker starts empty. */
int cost_state_init(cost_state *s, int K, int L, int E, const cost_model *m, int max_batch,
                    char *err, size_t errlen);
void cost_state_free(cost_state *s);
/* Worker k empty again (eldrd's admin clear); cost_state_remove of each
 * member gives the same. */
void cost_state_reset(cost_state *s, int k);

/* x went to worker k / left it. A remove with no member on k does
 * nothing; when the last member leaves, k is reset exactly, so rounding
 * never accumulates across busy periods and nothing goes negative. */
void cost_state_add(cost_state *s, int k, const cost_req *x);
void cost_state_remove(cost_state *s, int k, const cost_req *x);

/* Expected distinct experts of one decode step of k's batch, summed over
 * the layers (0 for an empty worker). */
double cost_state_expected_u(const cost_state *s, int k);

/* One worker's terms of a decision (explain shows them). Times in ms. */
typedef struct cost_terms {
    int64_t B;                   /* in flight (the load the decision saw) */
    double U;                    /* expected distinct experts per step, all layers */
    double dU;                   /* what x adds to it */
    double kv;                   /* prompt tokens in flight */
    double t_before;             /* t_step(k) */
    double t_after;              /* t_step(k + x) */
    double wait;                 /* full batch: the wait for a slot */
    double cost;                 /* the predicted increase, ms */
} cost_terms;

/* Decide for x among the eligible workers (eligible NULL: all), with
 * load[K] the in-flight counts B_k. Fills d (rule RULE_COST, has_cost,
 * cost[] per worker in ms, NAN for an ineligible one, cand = the
 * eligible workers) and terms[K] when non-NULL; returns the worker, -1
 * when none is eligible. */
int cost_decide(const cost_state *s, const cost_req *x, const int64_t *load,
                const uint8_t *eligible, route_decision *d, cost_terms *terms);

/* The terms of worker k for x at load B (what cost_decide computes). */
void cost_worker_terms(const cost_state *s, int k, const cost_req *x, int64_t B,
                       cost_terms *t);

#endif
