/* pool_ring.h - which prefill instance takes a request (the pool, pool.h).
 *
 * Consistent hashing on the prompt's first bytes, with a load gate, as
 * the reference deployment does it (its PrefixHashRouter): every instance
 * URL owns 160 points of a 64-bit ring, at BLAKE2b-64("URL#v"); a prompt
 * goes to the owner of the first point at or after BLAKE2b-64 of its
 * first 1024 bytes (wrapping around), so the same prefix meets the same
 * prefill instance and its KV cache. The gate: when that instance holds
 * more than 1.25 x the mean load (counting this request), the least loaded
 * instance takes it instead (lowest index on ties). An empty prompt goes
 * to the least loaded. Same URLs, same prompt bytes: the same choice as
 * theirs. */
#ifndef ELDR_ROUTER_POOL_RING_H
#define ELDR_ROUTER_POOL_RING_H

#include <stddef.h>
#include <stdint.h>

#define RING_VNODES 160
#define RING_PREFIX_BYTES 1024
#define RING_LOAD_FACTOR 1.25

typedef struct pring {
    int n;                       /* instances */
    size_t points;               /* n * RING_VNODES */
    uint64_t *pos;               /* [points] ascending */
    int *owner;                  /* [points] instance index */
} pring;

/* A ring over n instance URLs (the ring's identity). -1 on no memory. */
int pring_init(pring *r, const char *const *urls, int n);
void pring_free(pring *r);

/* The instance for a prompt key (its bytes; the first RING_PREFIX_BYTES
 * are hashed) given the instances' loads [n]. */
int pring_pick(const pring *r, const void *key, size_t len, const int64_t *loads);

/* The same over the instances with ok[i] != 0 (NULL: all): an
 * ineligible owner's points fall to the next eligible point on the ring,
 * and the load gate's mean is over the eligible ones. -1 when none is
 * eligible. With all eligible it is pring_pick. */
int pring_pick_among(const pring *r, const void *key, size_t len, const int64_t *loads,
                     const uint8_t *ok);

#endif
