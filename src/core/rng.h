/* rng.h - the one pseudo-random generator of eldr.
 *
 * xoshiro256** seeded through splitmix64. Every seeded feature (generator,
 * rho pair sampling, k-means++, baselines) uses this, so a seed means the
 * same thing everywhere and results do not depend on the C library.
 * Streams: rng_seed_stream(seed, i) gives independent generators for
 * parallel work (request i of a generator run), deterministic whatever
 * the thread count. */
#ifndef ELDR_RNG_H
#define ELDR_RNG_H

#include <stdint.h>

typedef struct rng { uint64_t s[4]; } rng_t;

void rng_seed(rng_t *r, uint64_t seed);
void rng_seed_stream(rng_t *r, uint64_t seed, uint64_t stream);
uint64_t rng_next(rng_t *r);
/* uniform in [0, 1) with 53 random bits */
double rng_uniform(rng_t *r);
/* uniform integer in [0, n), unbiased (Lemire); n > 0 */
uint64_t rng_below(rng_t *r, uint64_t n);
/* standard normal (Box-Muller, one value per call) */
double rng_normal(rng_t *r);
/* exponential with rate 1 */
double rng_exp(rng_t *r);

#endif
