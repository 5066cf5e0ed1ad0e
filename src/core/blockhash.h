/* blockhash.h - the chained hash of KV-cache blocks.
 *
 * A prompt is cut into blocks of B consecutive token ids (B = 16 by
 * default); only full blocks are hashed. Block i's hash depends on its own
 * token ids and on the hash of block i-1, so two prompts share a block hash
 * exactly when they share every token up to the end of that block - the
 * way a paged KV cache names its blocks. The chain starts from
 * BLOCK_HASH_ROOT.
 *
 *     h[0] = block_hash(BLOCK_HASH_ROOT, tok[0..B), B)
 *     h[i] = block_hash(h[i-1], tok[i*B..(i+1)*B), B)
 *
 * The function (fixed forever, since hashes are stored in trace files and
 * used as cache keys by the signature cache):
 *
 *     x = fmix64(parent ^ (n * 0x9e3779b97f4a7c15))
 *     for each token t (as uint32):  x = fmix64(x ^ (t + 0x632be59bd9b4e019))
 *     return x
 *
 * with fmix64 the MurmurHash3 64-bit finaliser. Not cryptographic: a
 * well-mixed 64-bit key, collisions ~2^-64 per pair. n is mixed in so
 * that blocks of different sizes never collide by construction. */
#ifndef ELDR_BLOCKHASH_H
#define ELDR_BLOCKHASH_H

#include <stdint.h>

#define BLOCK_HASH_ROOT 0xcbf29ce484222325ULL
#define BLOCK_SIZE_DEFAULT 16

uint64_t block_hash(uint64_t parent, const int32_t *tokens, int n);

/* Hash the full blocks of a prompt of n tokens into out[n / block]
 * (chained from parent, usually BLOCK_HASH_ROOT); returns the number of
 * hashes written. */
int block_hash_chain(uint64_t parent, const int32_t *tokens, int n, int block,
                     uint64_t *out);

#endif
