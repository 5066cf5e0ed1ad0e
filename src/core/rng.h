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
/* the next 64 bits; inline, as the simulator's samplers draw hundreds of
 * millions of them */
static inline uint64_t rng_next(rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5, result = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}
/* uniform in [0, 1) with 53 random bits */
double rng_uniform(rng_t *r);
/* uniform integer in [0, n), unbiased (Lemire); n > 0 */
uint64_t rng_below(rng_t *r, uint64_t n);
/* standard normal (Box-Muller, one value per call) */
double rng_normal(rng_t *r);
/* exponential with rate 1 */
double rng_exp(rng_t *r);

#endif
