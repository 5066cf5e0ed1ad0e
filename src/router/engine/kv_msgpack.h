/* kv_msgpack.h - vLLM's KVEventBatch as its ZMQ publisher sends it: the
 * msgpack payload (msgspec's encoding) of the multipart message
 * (topic, 8-byte big-endian sequence number, payload), read with
 * msgpack-c (Debian's libmsgpack-dev).
 *
 * Followed: vllm-project/vllm, vllm/distributed/kv_events.py at commit
 * 0181ea3173e53eea8cf04a86891488e3dc89bb34 (EventBatch, KVCacheEvent,
 * BlockStored, BlockRemoved, AllBlocksCleared, ZmqEventPublisher) and
 * vllm/v1/core/kv_cache_utils.py (ExternalBlockHash = bytes | int,
 * maybe_convert_block_hash). Both of msgspec's encodings are read:
 * - the map form (current vLLM: no array_like): the batch
 *   {"ts": float, "events": [...], "data_parallel_rank": int}; an event
 *   {"type": "BlockStored", "block_hashes": [...], "parent_block_hash": h
 *   | nil, "token_ids": [...], "block_size": n, "lora_id", "medium",
 *   "lora_name", ...} (omit_defaults leaves out fields at their default);
 * - the array form (older vLLM, array_like=True): the batch
 *   [ts, [events...], data_parallel_rank?], an event a tagged array,
 *   the tag first: ["BlockStored", block_hashes, parent_block_hash,
 *   token_ids, block_size, lora_id, medium, ...], ["BlockRemoved",
 *   block_hashes, medium, ...], ["AllBlocksCleared"].
 * The batch and each event may use either form. Fields eldrd does not
 * use, and fields of newer versions, are skipped.
 * A block hash is a msgpack integer (unsigned 64-bit; a negative one, as
 * Python's hash() of older versions gives, as its two's complement) or
 * bytes (the sha256 digest: its low 64 bits, kv_hash_of_bytes). */
#ifndef ELDR_ROUTER_KV_MSGPACK_H
#define ELDR_ROUTER_KV_MSGPACK_H

#include <stddef.h>

#include "kv_event.h"

/* Values (scalars and containers) in one payload, at most: msgpack-c
 * builds each as a 24-byte object, so a payload costs at most ~100 MB
 * however it is made; a BlockStored of a 1M-token prompt is ~1.1M values. */
#define KV_MSGPACK_MAX_VALUES (1 << 22)

/* Decode payload buf[0..len) into b (every event that reads well, in
 * order; *bad = the events dropped, why = the first one's reason, naming
 * it as events[i]). -1 with why when the payload is no batch at all
 * (not msgpack, no events array, a container that claims more items
 * than bytes are left, more than KV_MSGPACK_MAX_VALUES values); then b
 * is empty. */
int kv_msgpack_batch(const void *buf, size_t len, kv_batch *b, int *bad, char *why,
                     size_t whylen);

#endif
