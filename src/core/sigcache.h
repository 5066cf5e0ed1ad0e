/* sigcache.h - the signature cache: per-KV-block expert counts, keyed and
 * evicted like the KV cache (DESIGN.md section 1, docs/sigcache.md).
 *
 * A prompt is cut into blocks of B tokens; block i is named by its chained
 * hash h[i] = block_hash(h[i-1], tokens) (blockhash.h). When the prefill
 * worker computes a full block it stores that block's [L][E] expert counts
 * here under h[i], with h[i-1] as the parent. A later request sharing the
 * first m blocks finds them (sigcache_match), computes counts only for its
 * tokens from m*B on, and adds the cached blocks (sigcache_recover): the
 * sum equals, exactly, the counts of a cold prefill, because counts are
 * additive over tokens and a block hash fixes every token up to its end.
 * The partial last block (fewer than B tokens) has no hash and is never
 * cached.
 *
 * Storage: a block's count of one expert is at most B (a token picks k
 * distinct experts), so counts are stored as uint8 [L][E] for B <= 255:
 * L*E bytes per block (768 B for gpt-oss-20b, 6 KiB at L=48, E=128).
 * Capacity is in blocks; the least recently used block goes first.
 * Recency is kept parents-ahead-of-children along a request's chain, so
 * eviction takes the deepest blocks first and does not orphan children.
 * sigcache_remove mirrors a KV-cache eviction (the daemon's kv-events).
 *
 * Collisions: keys are 64-bit hashes; each entry also keeps its parent
 * hash and a match checks the whole chain, so a colliding or re-parented
 * block ends the match instead of contributing wrong counts.
 *
 * Not thread-safe: one owner (the router's request loop) at a time. */
#ifndef ELDR_SIGCACHE_H
#define ELDR_SIGCACHE_H

#include <stddef.h>
#include <stdint.h>

#define SIGCACHE_MAX_BLOCK 255

typedef struct sigcache sigcache_t;

typedef struct sigcache_stats {
    int64_t capacity, entries;
    int64_t lookups;        /* sigcache_match calls */
    int64_t hit_blocks;     /* blocks matched */
    int64_t miss_blocks;    /* first unmatched block of a lookup (0 or 1 each) */
    int64_t inserts, updates, evictions, removals;
    int64_t chain_mismatches; /* hash found with another parent */
} sigcache_stats;

/* A cache for L x E counts holding at most `capacity` blocks. Memory for
 * the counts grows as blocks arrive; a capacity whose full size exceeds
 * physical memory is refused. */
sigcache_t *sigcache_new(int L, int E, int64_t capacity, char *err, size_t errlen);
void sigcache_free(sigcache_t *c);

/* Store (or refresh) block `hash`, child of `parent`, with counts [L][E]
 * (each <= 255). An existing entry with another parent is replaced (and
 * counted as a chain mismatch). The block becomes most recently used;
 * a full cache evicts its least recently used block first. */
int sigcache_put(sigcache_t *c, uint64_t hash, uint64_t parent, const uint16_t *counts,
                 char *err, size_t errlen);

/* Drop a block (the KV cache evicted it). Returns 1 if it was cached. */
int sigcache_remove(sigcache_t *c, uint64_t hash);

/* 1 when the block is cached (no recency change). */
int sigcache_contains(const sigcache_t *c, uint64_t hash);

/* The longest prefix of hashes[0..n) that is cached with a verified chain
 * (block 0's parent is `root`, usually BLOCK_HASH_ROOT; block i's is
 * hashes[i-1]). The matched blocks become most recently used, block 0
 * first. */
int64_t sigcache_match(sigcache_t *c, const uint64_t *hashes, int64_t n, uint64_t root);

/* out[L][E] = fresh[L][E] + the cached counts of blocks hashes[0..m)
 * (fresh: the counts of the tokens from m*B on; NULL = zeros). Fails if
 * a block is missing or a sum overflows uint16. No recency change. */
int sigcache_recover(const sigcache_t *c, const uint64_t *hashes, int64_t m,
                     const uint16_t *fresh, uint16_t *out, char *err, size_t errlen);

/* Counts [L][E] (zeroed first) of ntok token rows of expert ids
 * [ntok][L][k] (the layout of tokens/prefill_experts). Ids >= E fail. */
int sigcache_token_counts(const uint16_t *experts, int64_t ntok, int L, int E, int k,
                          uint16_t *out, char *err, size_t errlen);

/* After a prefill: store the full blocks [from, to) of a prompt whose
 * token rows are `experts` (from token 0), hashes[i] naming block i, B
 * tokens per block, ntok prompt tokens (to <= ntok / B: the partial last
 * block is refused). Then blocks [0, from) that are cached are touched so
 * that the chain is most recent, parents ahead of children. */
int sigcache_store_blocks(sigcache_t *c, const uint64_t *hashes, int64_t from, int64_t to,
                          uint64_t root, const uint16_t *experts, int64_t ntok, int k, int B,
                          char *err, size_t errlen);

/* Up to max cached hashes from most to least recently used; returns the
 * number written. */
int64_t sigcache_lru_order(const sigcache_t *c, uint64_t *out, int64_t max);

void sigcache_get_stats(const sigcache_t *c, sigcache_stats *s);

#endif
