/* route.h - decode routing decisions: ELDR's locality band and the
 * baseline policies behind one small interface, shared by the simulator
 * (sim.h) and the router daemon.
 *
 * ELDR (DESIGN.md section 1, "Locality-band routing"): sim_k = cos(s, mu_k)
 * over the K worker centroids; band = {k : sim_k >= max_k sim_k - tau};
 * when tau > 0 and the band holds a single worker, the second most similar
 * joins it (the min-two rule, on by default); the request goes to the band
 * member with the fewest in-flight requests, lowest index on ties. tau = 0
 * is pure locality, tau >= 2 is join-shortest-queue (cosines lie in
 * [-1, 1]). A request whose signature is all zero has no locality: it goes
 * to the least loaded worker of all (rule "no-signature").
 *
 * Baselines: random (uniform), rr (round robin), jsq (fewest in-flight,
 * seeded random tie-break), p2c (two distinct workers drawn at random, the
 * less loaded wins, the first drawn on ties) and domain (oracle labels: the
 * workers are split into one pool per label in proportion to the label's
 * calibration share, every label with a share > 0 getting at least one
 * worker when K allows; JSQ, lowest index on ties, inside the pool).
 *
 * A decision carries its evidence: the worker, the rule that decided, the
 * similarities (ELDR), the candidate set (band, pool or the p2c pair) and
 * the loads the policy saw. Deciding allocates nothing. A policy is not
 * thread-safe (rr and the seeded policies keep state): one per thread. */
#ifndef ELDR_ROUTE_H
#define ELDR_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "costmodel.h"
#include "rng.h"

#define ROUTE_MAX_WORKERS 256
/* The tau range every workbench option takes (sim, sweep, advise, fit,
 * dash, the Lua module): cosines lie in [-1, 1], so a band of 2 already
 * holds every worker (join-shortest-queue) and a wider one changes
 * nothing. K ranges over 1..ROUTE_MAX_WORKERS everywhere. */
#define ROUTE_TAU_MAX 2.0
#define ROUTE_TAU_JSQ 2.0          /* a band this wide holds every worker */

typedef enum route_kind {
    ROUTE_ELDR = 0,
    ROUTE_RANDOM,
    ROUTE_RR,
    ROUTE_JSQ,
    ROUTE_P2C,
    ROUTE_DOMAIN,
    ROUTE_ELDR_ONLINE,         /* ELDR whose centroids are refitted as it runs
                                * (online.h; the simulator refits, route.c
                                * decides exactly as for ELDR) */
    ROUTE_ELDR_COST,           /* the cost rule (costrule.h): least predicted
                                * step-time increase; decided by cost_decide,
                                * route_decide does not take it */
    ROUTE_N_KINDS
} route_kind;

/* "eldr", "random", "rr", "jsq", "p2c", "domain", "eldr-online",
 * "eldr-cost"; -1 when unknown. */
const char *route_kind_name(route_kind k);
int route_kind_parse(const char *name);
/* 1 for the load-balancing baselines (random, rr, jsq, p2c). */
int route_kind_is_balancer(route_kind k);
/* 1 for the kinds that route on centroids (eldr, eldr-online). */
int route_kind_has_centroids(route_kind k);

typedef enum route_rule {
    RULE_LOCALITY = 0,   /* band of one: the most similar worker */
    RULE_BAND_JSQ,       /* band of two or more: its least loaded member */
    RULE_MIN2,           /* band widened to two by the min-two rule */
    RULE_NO_SIGNATURE,   /* zero signature: least loaded of all */
    RULE_RANDOM,
    RULE_RR,
    RULE_JSQ,
    RULE_P2C,
    RULE_DOMAIN,         /* least loaded of the label's pool */
    RULE_UNLABELED,      /* domain policy, label unknown: least loaded of all */
    RULE_COST,           /* the cost rule: least predicted cost (costrule.h) */
    RULE_N
} route_rule;

/* "locality", "band-jsq", "min2", "no-signature", "random", "rr", "jsq",
 * "p2c", "domain", "unlabeled", "cost". */
const char *route_rule_name(route_rule r);

/* The dot product every ELDR similarity goes through (centroid . signature,
 * both unit rows, so a cosine): one loop, so that eldrd and the simulator
 * add the same terms in the same order and agree bit for bit. */
double route_dot(const float *a, const float *b, size_t n);

typedef struct route_decision {
    int worker;
    route_rule rule;
    int K;
    int has_sim;                     /* sim[] filled (ELDR) */
    double sim[ROUTE_MAX_WORKERS];   /* cos(s, mu_k) */
    double sim_max;
    int n_cand;                      /* candidates considered */
    int cand[ROUTE_MAX_WORKERS];     /* ascending worker indices */
    int64_t load[ROUTE_MAX_WORKERS]; /* in-flight counts seen */
    int has_cost;                    /* cost[] filled (the cost rule) */
    double cost[ROUTE_MAX_WORKERS];  /* predicted cost per worker, ms; NAN
                                      * for a worker it could not use */
} route_decision;

/* A decision started: K, the loads seen, no similarities, no costs, no
 * candidates yet. Every rule (route.c, costrule.c) fills d from here. */
void route_decision_begin(route_decision *d, int K, const int64_t *load);

typedef struct route_policy {
    route_kind kind;
    int K;
    /* ELDR */
    const float *centroids;          /* [K][dim] unit rows, borrowed */
    size_t dim;
    double tau;
    int min2;
    /* rr */
    uint64_t rr_next;
    /* random, jsq, p2c */
    rng_t rng;
    /* eldr-cost: the cost model the rule predicts with (borrowed); NULL:
     * the simulator's own (sim_config.cost), eldrd's --cost */
    const cost_model *cost_rule;
    /* domain: pool of label j = workers [pool_start[j], +pool_size[j]) */
    int n_labels;
    int *pool_start, *pool_size;
} route_policy;

/* A policy of the given kind over K workers (1..ROUTE_MAX_WORKERS);
 * seed drives random, jsq and p2c (each kind draws from its own stream of
 * the seed). ELDR needs route_policy_set_centroids, domain needs
 * route_policy_set_domains before the first decision. tau defaults to
 * 0.1, min2 to on. */
int route_policy_init(route_policy *p, route_kind kind, int K, uint64_t seed,
                      char *err, size_t errlen);
void route_policy_free(route_policy *p);

/* ELDR: K unit centroid rows of dim floats (borrowed: they must outlive
 * the policy), the band width tau (finite, >= 0) and the min-two rule. */
int route_policy_set_centroids(route_policy *p, const float *centroids, size_t dim,
                               double tau, int min2, char *err, size_t errlen);

/* domain: the calibration share of each of n_labels labels (>= 0, finite,
 * not all zero; normalised here). Workers are split greedily: every label
 * with a share > 0 first gets one worker, then each further worker goes
 * to the label with the highest share per worker (lowest label on ties);
 * pools are contiguous in label order. When K is below the number of
 * labels with a share, each such label gets one worker: largest share
 * first, onto the worker with the least share so far (lowest index on
 * ties), so that workers carry shares as even as whole labels allow.
 * A label with share 0 has no pool: its requests go JSQ over all. */
int route_policy_set_domains(route_policy *p, const double *share, int n_labels,
                             char *err, size_t errlen);

/* Decide for one request. sig: its unit signature (dim floats; ELDR only,
 * may be NULL otherwise; an all-zero one means "no signature"), label: its
 * label for the domain policy (-1 when unknown), load: the K in-flight
 * counts. Fills d and returns the worker. */
int route_decide(route_policy *p, const float *sig, int label, const int64_t *load,
                 route_decision *d);

/* The band rule alone, on given similarities: what route_decide does for
 * ELDR once the similarities are known (exposed for tests and for
 * explaining decisions). Fills d (its sim[] too) and returns the worker. */
int route_band_decide(const double *sim, int K, double tau, int min2, const int64_t *load,
                      route_decision *d);

/* The same over the workers with eligible[k] != 0 (NULL: all of them; a
 * router leaves out a worker it knows to be down): the top, the band and
 * the min-two second are taken among them. Returns -1 (d->worker -1) when
 * none is eligible. With every worker eligible it is route_band_decide. */
int route_band_decide_among(const double *sim, int K, double tau, int min2,
                            const int64_t *load, const uint8_t *eligible, route_decision *d);

/* The no-signature rule (least loaded, lowest index on ties) over the
 * eligible workers; -1 when none is. */
int route_nosig_decide_among(int K, const int64_t *load, const uint8_t *eligible,
                             route_decision *d);

#endif
