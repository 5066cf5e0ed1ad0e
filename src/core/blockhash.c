/* blockhash.c - chained KV block hashes (see blockhash.h). */
#include "blockhash.h"

#include <stddef.h>

static uint64_t fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

uint64_t block_hash(uint64_t parent, const int32_t *tokens, int n)
{
    uint64_t x = fmix64(parent ^ ((uint64_t)(uint32_t)n * 0x9e3779b97f4a7c15ULL));
    for (int i = 0; i < n; i++)
        x = fmix64(x ^ ((uint64_t)(uint32_t)tokens[i] + 0x632be59bd9b4e019ULL));
    return x;
}

int block_hash_chain(uint64_t parent, const int32_t *tokens, int n, int block,
                     uint64_t *out)
{
    int nb = block > 0 ? n / block : 0;
    for (int i = 0; i < nb; i++)
        out[i] = parent = block_hash(parent, tokens + (size_t)i * block, block);
    return nb;
}
