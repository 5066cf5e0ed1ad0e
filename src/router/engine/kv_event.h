/* kv_event.h - one prefill worker's KV cache events, whoever brought
 * them: POST /v1/kv-events (JSON, api/body_kv.c) or vLLM's ZMQ publisher
 * (msgpack, kv_msgpack.h). The shape of vLLM's KVEventBatch
 * (vllm/distributed/kv_events.py): BlockStored, BlockRemoved,
 * AllBlocksCleared. Block hashes are unsigned 64-bit: vLLM's int hashes
 * as they are (a negative one of older versions as its two's complement),
 * its bytes hashes (sha256, 32 bytes) as their low 64 bits, the value
 * vLLM itself sends as an int with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES. */
#ifndef ELDR_ROUTER_KV_EVENT_H
#define ELDR_ROUTER_KV_EVENT_H

#include <stdint.h>

#include "wire.h"

typedef enum kv_kind { KV_STORED = 0, KV_REMOVED, KV_CLEARED } kv_kind;
#define KV_KINDS 3

typedef struct kv_event {
    kv_kind kind;
    uint64_t *hashes;            /* [n] (malloc'd) */
    int n;
    int has_parent;
    uint64_t parent;
    int block_size;              /* 0 when not given */
    int32_t *tokens;             /* [n_tokens] (malloc'd), NULL when not given */
    int n_tokens;
} kv_event;

typedef struct kv_batch {
    char worker[RB_NAME_MAX];    /* "" when absent */
    double ts;
    kv_event *events;            /* [n] (malloc'd) */
    int n;
} kv_batch;

/* The low 64 bits of a big-endian byte string, as vLLM's
 * int.from_bytes(h, "big") & (2**64 - 1). */
uint64_t kv_hash_of_bytes(const uint8_t *p, size_t n);

void kv_event_free(kv_event *ev);
void kv_batch_free(kv_batch *b);

#endif
