/* body.h - the JSON request bodies of eldrd, parsed and checked.
 *
 * Pure functions (no daemon state): text in, a filled struct or one error
 * out. An error carries the HTTP status it deserves (400 for a body that
 * is not the JSON shape asked for, 422 for well-formed values that are
 * wrong: geometry, range), a message and where in the body it is (a JSON
 * path such as "sparse[3][2]"). The wire format is docs/http-api.md. */
#ifndef ELDR_ROUTER_BODY_H
#define ELDR_ROUTER_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "kv_event.h"
#include "wire.h"

/* POST /v1/route. counts covers the prompt tokens the prefill computed
 * (all of them when no block was served from cache); block i < cached
 * came from the prefix cache; block_counts[j] are the counts of block
 * cached + j, newly computed, for the signature cache to keep.
 * A gate model's request sends "gates" instead: the summed prefill router
 * probabilities (or logits) [L*E], finite; then counts is NULL and there
 * are no block fields (the signature cache keeps counts). */
typedef struct route_body {
    char request_id[RB_ID_MAX];  /* "" when absent */
    char prefill_worker[RB_NAME_MAX]; /* "" when absent */
    uint16_t *counts;            /* [L*E], or NULL when gates were sent */
    float *gates;                /* [L*E], or NULL when counts were sent */
    uint64_t *hashes;            /* [n_hashes] the prompt's block hash chain */
    int n_hashes;
    int cached_blocks;           /* leading hashes served from the prefix cache */
    uint16_t *block_counts;      /* [n_block_counts][L*E] */
    int n_block_counts;
} route_body;

int route_body_parse(const char *text, size_t len, int L, int E, route_body *b, rb_err *e);
/* The same through jansson alone, without the fast path of the plain
 * bodies (body_fast.h) that route_body_parse tries first; for the
 * differential tests. */
int route_body_parse_json(const char *text, size_t len, int L, int E, route_body *b,
                          rb_err *e);
void route_body_free(route_body *b);

/* POST /v1/finish {"request_id": "..."} */
int finish_body_parse(const char *text, size_t len, char id[RB_ID_MAX], rb_err *e);
int finish_body_parse_json(const char *text, size_t len, char id[RB_ID_MAX], rb_err *e);

/* PUT /v1/config {"tau": x, "policy": "band"|"cost"}, either or both:
 * x finite and >= 0 (*tau NAN when absent), *policy STATE_POLICY_* (-1
 * when absent). */
int config_body_parse(const char *text, size_t len, double *tau, int *policy, rb_err *e);

/* POST /v1/kv-events: vLLM's KVEventBatch as JSON, either an object
 * {"ts": t, "events": [...], "worker": "prefill name"} or vLLM's
 * array-like form [ts, [events...], dp_rank]. Each event is an object
 * with "type" (BlockStored, BlockRemoved, AllBlocksCleared) and vLLM's
 * fields, or the tagged array form ["BlockStored", block_hashes,
 * parent_block_hash, token_ids, block_size, lora_id, medium]. Types in
 * kv_event.h (freed with kv_batch_free). Integers up to 2^64 - 1 are
 * read as block hashes (rb_load). */
int kv_body_parse(const char *text, size_t len, kv_batch *b, rb_err *e);

#endif
