/* kv_apply.h - the one path by which KV cache events reach a prefill
 * worker's signature cache, whoever brought them (POST /v1/kv-events, the
 * ZMQ subscriber kv_sub.h), and the counters of what arrived.
 *
 * The signature cache keys blocks by eldrd's own chained hash of the
 * prompt's token ids (blockhash.h), not by the engine's hashes. So:
 * - BlockStored with its token_ids and a block size equal to eldrd's
 *   (kv_side.block_size: --block-size, 16 by default as vLLM's)
 *   is hashed eldrd's way, chained from the parent's eldrd hash (the
 *   root when it has no parent), and each engine hash is mapped to the
 *   eldrd hash of the same block (kvmap.h). Blocks that cannot be hashed
 *   (another block size, token_ids missing or not n * block_size long,
 *   a parent the map does not know) are counted as unmapped, by reason.
 *   The expert counts of a block still come with the route that
 *   computed it (POST /v1/route block_counts, or the proxy).
 * - BlockRemoved: each hash the map knows removes its eldrd block;
 *   a hash it does not know is removed as it is (a sender that uses
 *   eldrd's hashes already: the authors' patched engine).
 * - AllBlocksCleared: the worker's signature cache and map are emptied.
 *
 * Every function takes the prefill worker's cache lock (engine.h
 * pcache.lock) itself: the signature cache keeps its single owner. */
#ifndef ELDR_ROUTER_KV_APPLY_H
#define ELDR_ROUTER_KV_APPLY_H

#include <stdint.h>

#include "engine.h"
#include "kv_event.h"
#include "kvmap.h"
#include "strbuf.h"

/* Why BlockStored blocks were not mapped. */
enum { KV_UNMAPPED_BLOCK_SIZE = 0, KV_UNMAPPED_TOKENS, KV_UNMAPPED_PARENT, KV_UNMAPPED_WHYS };

/* What the subscriber notes beside the events (kv_note). */
typedef enum kv_note_kind {
    KV_NOTE_BAD_EVENT = 0,       /* an event dropped, its batch kept */
    KV_NOTE_BAD_MESSAGE,         /* a message that is not a KV event batch */
    KV_NOTE_GAP,                 /* a jump in the sequence numbers */
    KV_NOTE_MISSED,              /* sequence numbers the jump skipped */
    KV_NOTE_REPLAYED,            /* batches the replay socket gave back */
    KV_NOTE_RESET_GAP,           /* cache distrusted: a gap not replayed */
    KV_NOTE_RESET_RESTART,       /* cache distrusted: the sequence restarted */
    KV_NOTES
} kv_note_kind;

/* One prefill worker's KV event state (engine.h pcache.kv). */
typedef struct kv_side {
    kvmap *map;
    int block_size;              /* eldrd's block size B */
    uint64_t events[KV_KINDS];   /* events applied, by kind */
    uint64_t unmapped[KV_UNMAPPED_WHYS]; /* BlockStored blocks not mapped */
    uint64_t notes[KV_NOTES];
} kv_side;

/* map capacity: twice the signature cache's (vLLM's KV cache may hold
 * blocks whose counts eldrd never got), within [4096, 4M] entries */
kv_side *kv_side_new(long long cache_blocks, int block_size);
void kv_side_free(kv_side *k);

/* What one kv_apply did. */
typedef struct kv_applied {
    int events[KV_KINDS];
    int64_t removed_blocks;      /* signature cache blocks removed */
    int64_t mapped_blocks;       /* engine hashes mapped to eldrd's */
    int64_t entries;             /* the cache's blocks afterwards */
} kv_applied;

/* Apply events ev[0..n) to prefill worker p's cache (in order, under its
 * lock). out may be NULL. */
void kv_apply(engine_t *d, int p, const kv_event *ev, int n, kv_applied *out);

/* The worker's cache cannot be trusted (events were lost): empty its
 * signature cache and map, counted under why (KV_NOTE_RESET_*). */
void kv_distrust(engine_t *d, int p, kv_note_kind why);

/* Add n to a subscriber counter of worker p. */
void kv_note(engine_t *d, int p, kv_note_kind what, uint64_t n);

/* eldr_kv_events_total{prefill,kind} and the other eldr_kv_* series. */
void kv_metrics(engine_t *d, strbuf *b);

#endif
