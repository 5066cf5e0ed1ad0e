/* kvmap.h - a prefill worker's map from the engine's block hash (vLLM's,
 * whatever its hash algorithm) to eldrd's own chained hash of the same
 * block (blockhash.h), learnt from BlockStored events, so that a
 * BlockRemoved, which names vLLM's hashes only, can drop the right
 * signature cache blocks.
 *
 * Bounded: at most cap entries; when full, the entry put longest ago
 * goes first (a put of an existing key refreshes it), so the map ages
 * out blocks whose removal never came (a lost event) instead of growing.
 * Open addressing, linear probing, backward-shift deletion (no
 * tombstones), with a ring of (key, stamp) in put order for the age
 * (2 cap long, compacted when full: constant time a put).
 * Not thread-safe: the prefill worker's cache lock guards it. */
#ifndef ELDR_ROUTER_KVMAP_H
#define ELDR_ROUTER_KVMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct kvmap kvmap;

/* NULL when out of memory; cap >= 1. */
kvmap *kvmap_new(size_t cap);
void kvmap_free(kvmap *m);

/* Map key to val (refreshing its age); the oldest entry goes when full.
 * Allocates nothing (the memory is taken by kvmap_new). */
void kvmap_put(kvmap *m, uint64_t key, uint64_t val);
/* 1 and *val when key is mapped, else 0. */
int kvmap_get(const kvmap *m, uint64_t key, uint64_t *val);
/* As kvmap_get, and the entry is dropped. */
int kvmap_take(kvmap *m, uint64_t key, uint64_t *val);
void kvmap_clear(kvmap *m);
size_t kvmap_size(const kvmap *m);
/* Entries aged out for capacity since creation. */
uint64_t kvmap_aged(const kvmap *m);

#endif
