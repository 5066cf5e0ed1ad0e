/* decide.h - the one decision path, whoever brings the request: POST
 * /v1/route (api), the proxy (pdproxy), and any later front end. It takes
 * the prompt's signal (expert counts for a count model, gate values for
 * a gate model, or none), the signature cache's part, and the workers the
 * caller may use (an eligibility mask: the pool leaves out ejected
 * workers), and returns the decode worker with its evidence.
 *
 * A signal may be absent or come later: a front end picks the prefill
 * instance first (pool_prefill_acquire, pool.h), and decides the decode
 * worker when the prefill's answer brings the counts, or with no counts
 * at all (the no-signature rule: least loaded). */
#ifndef ELDR_ROUTER_DECIDE_H
#define ELDR_ROUTER_DECIDE_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "wire.h"

/* What the signature cache did for one route, and where its signal came
 * from: rows = the prompt rows the signal was counted over, cached_rows
 * = how many of them the signature cache gave (a stock engine's
 * prefix-cached rows); note = why a signal is absent or partial ("" when
 * there is nothing to say). */
typedef struct cache_use {
    int prefill, hit, missing, stored;
    int origin;                  /* sig_origin */
    int owned;                   /* the front end finishes it itself (proxy, picker) */
    int rows, cached_rows;
    char note[160];
} cache_use;

/* A route's claim on the signature cache (POST /v1/route's fields): the
 * counts computed by the prefill [L*E]; the prompt's block hash chain, of
 * which the first cached_blocks came from the prefix cache; the counts of
 * each newly computed block [n_block_counts][L*E], to keep. */
typedef struct cache_claim {
    const uint16_t *counts;
    const uint64_t *hashes;
    int n_hashes, cached_blocks;
    const uint16_t *block_counts;
    int n_block_counts;
} cache_claim;

/* total = the cached prefix's counts + c->counts, from prefill worker
 * u->prefill's cache; the new blocks are stored. Claimed-cached blocks the
 * cache does not hold are reported as missing, never invented. -1 with e
 * (422). */
int decide_use_cache(engine_t *d, const cache_claim *c, uint16_t *total, cache_use *u,
                     rb_err *e);

/* The signal must be what the served model's variant reads: gates for a
 * gate model (probabilities never negative), counts otherwise. -1 with
 * e (422) naming what to send. */
int decide_check_signal(const mref_t *r, const uint16_t *counts, const float *gates, int E,
                        rb_err *e);

/* An engine's eldr_sig bytes (the authors' handoff: little-endian int16
 * counts [L*E], or float32 gate values for a gate model) read for model
 * r into counts or gates (the one its variant reads; the other may be
 * NULL). No bytes (sig NULL): all zero, the no-signature rule decides.
 * -1 with why naming the size or value that is wrong. */
int decide_read_sig(const engine_t *d, const mref_t *r, const uint8_t *sig, size_t len,
                    uint16_t *counts, float *gates, char *why, size_t whylen);

/* A stock engine's prefill answer (no eldr_sig), for a count model: the
 * prompt's counts [L*E] from the answer's routed experts (routed.h, the
 * one decoder): its prompt rows only. When the engine reports more
 * layers than the model has, its dense layers (all 0, routed.h) are left
 * out and the rest must match. Prompt rows the prefix cache served
 * (vLLM 0.21 marks them -1) are filled from prefill worker `prefill`'s
 * signature cache, keyed by eldrd's chained hash (blockhash.h) of the
 * answer's prompt token ids in blocks of --block-size; every full block
 * of rows the answer routed is stored for the prompts that come later.
 * Returns 1 with counts and u (origin SIG_ORIGIN_ROUTED, rows,
 * cached_rows, hit, stored), or 0 when the answer gives no usable
 * signal: u->origin SIG_ORIGIN_NONE and u->note saying why (no routed
 * experts, other layers, cached blocks the cache does not hold). A bad
 * answer never fails the request: it is routed without a signature. */
int decide_stock_counts(engine_t *d, int prefill, const char *answer, size_t len,
                        uint16_t *counts, cache_use *u);

/* Decide among the eligible workers (NULL: all; retry_of, the worker
 * that failed this request before, or -1, is named in the decision's
 * record), count the request in
 * flight on the chosen one and record the decision. counts = the
 * prompt's counts [L*E] for a count model, or gates = its gate values for
 * a gate model (the other NULL); both NULL: no signal. u = the signature
 * cache's use (NULL: none); *no_signature (if non-NULL) = 1 when the
 * signal was absent or all zero on the mask. -1 with e (409 the id is in
 * flight, 503 no eligible worker or no memory, ...). */
int route_request(engine_t *d, mref_t *m, const char *request_id, const uint16_t *counts,
                  const float *gates, int prefill, const cache_use *u, const uint8_t *eligible,
                  int retry_of, route_out *o, int *no_signature, rb_err *e);

#endif
