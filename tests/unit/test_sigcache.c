/* test_sigcache.c - the signature cache (sigcache.h).
 *
 * The central law: for every request of a generated trace with shared
 * prompt prefixes (gen.h, --prefix-groups --tokens), counts recovered as
 * cached blocks + fresh counts of the uncached tokens equal the trace's
 * cold-prefill counts exactly, at any capacity, with real hits. Then
 * LRU order, capacity, removal, chain verification on a colliding hash,
 * parents outliving children, and the refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "blockhash.h"
#include "gen.h"
#include "sigcache.h"
#include "trace.h"

#define ERRLEN 512
#define ROOT BLOCK_HASH_ROOT

static trace_t *prefix_trace(void)
{
    gen_params_t p;
    gen_defaults(&p);
    p.requests = 400;
    p.layers = 6;
    p.experts = 16;
    p.top_k = 2;
    p.domains = 3;
    p.prompt_tokens = 70;
    p.decode_tokens = 0;
    p.prefix_groups = 6;
    p.prefix_blocks = 3;
    p.block_size = 16;
    p.tokens = 1;
    p.threads = 1;
    p.seed = 21;
    char err[ERRLEN];
    trace_t *t = NULL;
    if (gen_run(&p, &t, err, sizeof err) < 0)
        fail_msg("gen: %s", err);
    assert_non_null(t->block_hashes);
    assert_non_null(t->prefill_experts);
    return t;
}

/* Route every request through a cache of `capacity` blocks; returns the
 * blocks hit. Each recovered row must equal the cold prefill counts. */
static int64_t replay(const trace_t *t, int64_t capacity)
{
    char err[ERRLEN];
    const int B = 16;
    size_t cells = TRACE_CELLS(t), stride = (size_t)t->L * (size_t)t->k;
    sigcache_t *c = sigcache_new(t->L, t->E, capacity, err, sizeof err);
    assert_non_null(c);
    uint16_t *fresh = malloc(cells * sizeof *fresh), *out = malloc(cells * sizeof *out);
    assert_non_null(fresh);
    assert_non_null(out);
    int64_t hits = 0;
    for (int64_t r = 0; r < t->n; r++) {
        const uint64_t *h = t->block_hashes + t->block_offsets[r];
        int64_t nb = t->block_offsets[r + 1] - t->block_offsets[r];
        int64_t ntok = t->prompt_tokens[r];
        assert_int_equal(nb, ntok / B);   /* only full blocks are hashed */
        const uint16_t *ex = t->prefill_experts + (size_t)t->prefill_offsets[r] * stride;
        int64_t m = sigcache_match(c, h, nb, ROOT);
        assert_true(m >= 0 && m <= nb);
        hits += m;
        /* the prefill computes only tokens m*B .. ntok */
        assert_int_equal(sigcache_token_counts(ex + (size_t)(m * B) * stride, ntok - m * B,
                                               t->L, t->E, t->k, fresh, err, sizeof err), 0);
        assert_int_equal(sigcache_recover(c, h, m, fresh, out, err, sizeof err), 0);
        assert_memory_equal(out, trace_prefill_row(t, r), cells * sizeof *out);
        assert_int_equal(sigcache_store_blocks(c, h, m, nb, ROOT, ex, ntok, t->k, B, err,
                                               sizeof err), 0);
        sigcache_stats st;
        sigcache_get_stats(c, &st);
        assert_true(st.entries <= capacity);
    }
    free(fresh);
    free(out);
    sigcache_free(c);
    return hits;
}

static void test_recovery_exact(void **state)
{
    (void)state;
    trace_t *t = prefix_trace();
    int64_t big = replay(t, 1 << 16);
    int64_t small = replay(t, 12);
    int64_t tiny = replay(t, 1);
    /* 400 requests in 6 groups sharing 3 blocks: nearly all hit */
    assert_true(big >= 3 * (400 - 6));
    assert_true(small > 0 && small <= big);
    assert_true(tiny <= small);
    trace_free(t);
}

static void make_counts(uint16_t *c, size_t cells, unsigned v)
{
    for (size_t i = 0; i < cells; i++)
        c[i] = (uint16_t)((v + i) % 7);
}

static void test_lru_and_capacity(void **state)
{
    (void)state;
    char err[ERRLEN];
    uint16_t cnt[2 * 3];
    sigcache_t *c = sigcache_new(2, 3, 3, err, sizeof err);
    assert_non_null(c);
    for (uint64_t h = 1; h <= 3; h++) {
        make_counts(cnt, 6, (unsigned)h);
        assert_int_equal(sigcache_put(c, h, ROOT, cnt, err, sizeof err), 0);
    }
    uint64_t order[8];
    assert_int_equal(sigcache_lru_order(c, order, 8), 3);
    assert_true(order[0] == 3 && order[1] == 2 && order[2] == 1);
    uint64_t one = 1;
    assert_int_equal(sigcache_match(c, &one, 1, ROOT), 1);   /* 1 becomes MRU */
    assert_int_equal(sigcache_put(c, 4, ROOT, cnt, err, sizeof err), 0); /* evicts 2 */
    assert_false(sigcache_contains(c, 2));
    assert_int_equal(sigcache_lru_order(c, order, 8), 3);
    assert_true(order[0] == 4 && order[1] == 1 && order[2] == 3);
    for (uint64_t h = 10; h < 110; h++)
        assert_int_equal(sigcache_put(c, h, ROOT, cnt, err, sizeof err), 0);
    sigcache_stats st;
    sigcache_get_stats(c, &st);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.evictions, 101);
    assert_int_equal(sigcache_lru_order(c, order, 8), 3);
    assert_true(order[0] == 109 && order[1] == 108 && order[2] == 107);
    /* the stored counts survive the churn */
    uint16_t out[6], want[6];
    uint64_t h109 = 109;
    make_counts(want, 6, 3);
    assert_int_equal(sigcache_recover(c, &h109, 1, NULL, out, err, sizeof err), 0);
    assert_memory_equal(out, want, sizeof out);
    sigcache_free(c);
}

static void test_removal(void **state)
{
    (void)state;
    char err[ERRLEN];
    uint16_t cnt[4] = {1, 2, 3, 4}, out[4];
    sigcache_t *c = sigcache_new(1, 4, 8, err, sizeof err);
    uint64_t chain[4];
    uint64_t parent = ROOT;
    for (int i = 0; i < 4; i++) {
        chain[i] = 1000 + (uint64_t)i * 0x10000;  /* crowd one probe run */
        assert_int_equal(sigcache_put(c, chain[i], parent, cnt, err, sizeof err), 0);
        parent = chain[i];
    }
    assert_int_equal(sigcache_match(c, chain, 4, ROOT), 4);
    assert_int_equal(sigcache_remove(c, chain[2]), 1);
    assert_int_equal(sigcache_remove(c, chain[2]), 0);
    assert_false(sigcache_contains(c, chain[2]));
    assert_true(sigcache_contains(c, chain[3]));   /* backward shift kept it findable */
    assert_int_equal(sigcache_match(c, chain, 4, ROOT), 2);
    assert_int_equal(sigcache_recover(c, chain, 3, NULL, out, err, sizeof err), -1);
    assert_non_null(strstr(err, "block 2"));
    assert_int_equal(sigcache_put(c, chain[2], chain[1], cnt, err, sizeof err), 0);
    assert_int_equal(sigcache_match(c, chain, 4, ROOT), 4);
    assert_int_equal(sigcache_recover(c, chain, 4, NULL, out, err, sizeof err), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(out[i], 4 * cnt[i]);
    sigcache_stats st;
    sigcache_get_stats(c, &st);
    assert_int_equal(st.removals, 1);
    assert_int_equal(st.entries, 4);
    sigcache_free(c);
}

/* The same 64-bit key under another parent must not count as a hit. */
static void test_collision_chain(void **state)
{
    (void)state;
    char err[ERRLEN];
    uint16_t cnt[2] = {5, 6};
    sigcache_t *c = sigcache_new(1, 2, 4, err, sizeof err);
    uint64_t x = 0xabcdef, other_parent = 0x1234;
    assert_int_equal(sigcache_put(c, x, other_parent, cnt, err, sizeof err), 0);
    assert_int_equal(sigcache_match(c, &x, 1, ROOT), 0);
    uint64_t chain[2] = {0x77, x};
    assert_int_equal(sigcache_put(c, 0x77, ROOT, cnt, err, sizeof err), 0);
    assert_int_equal(sigcache_match(c, chain, 2, ROOT), 1);   /* stops at x */
    sigcache_stats st;
    sigcache_get_stats(c, &st);
    assert_int_equal(st.chain_mismatches, 2);
    assert_int_equal(sigcache_put(c, x, 0x77, cnt, err, sizeof err), 0);  /* re-parent */
    assert_int_equal(sigcache_match(c, chain, 2, ROOT), 2);
    sigcache_free(c);
}

/* After a request, its chain is most recent with parents ahead of
 * children, so eviction takes the deepest block first. */
static void test_parents_outlive_children(void **state)
{
    (void)state;
    char err[ERRLEN];
    const int L = 1, E = 4, k = 1, B = 2;
    uint16_t ex[8] = {0, 1, 2, 3, 0, 0, 1, 1}; /* 8 tokens: 4 blocks */
    int32_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t h[4];
    assert_int_equal(block_hash_chain(ROOT, tok, 8, B, h), 4);
    sigcache_t *c = sigcache_new(L, E, 4, err, sizeof err);
    assert_int_equal(sigcache_store_blocks(c, h, 0, 2, ROOT, ex, 8, k, B, err, sizeof err), 0);
    assert_int_equal(sigcache_match(c, h, 4, ROOT), 2);
    assert_int_equal(sigcache_store_blocks(c, h, 2, 4, ROOT, ex, 8, k, B, err, sizeof err), 0);
    uint64_t order[4];
    assert_int_equal(sigcache_lru_order(c, order, 4), 4);
    for (int i = 0; i < 4; i++)
        assert_true(order[i] == h[i]);
    uint16_t cnt[4] = {0};
    assert_int_equal(sigcache_put(c, 42, ROOT, cnt, err, sizeof err), 0);
    assert_false(sigcache_contains(c, h[3]));
    assert_true(sigcache_contains(c, h[0]));
    uint16_t out[4];
    assert_int_equal(sigcache_recover(c, h, 3, NULL, out, err, sizeof err), 0);
    uint16_t want[4] = {3, 1, 1, 1};   /* tokens 0..5 picked 0,1,2,3,0,0 */
    assert_memory_equal(out, want, sizeof want);
    sigcache_free(c);
}

static void test_refusals(void **state)
{
    (void)state;
    char err[ERRLEN];
    assert_null(sigcache_new(0, 4, 4, err, sizeof err));
    assert_null(sigcache_new(2, 4, 0, err, sizeof err));
    assert_non_null(strstr(err, "capacity"));
    assert_null(sigcache_new(4096, 4096, (int64_t)1 << 39, err, sizeof err));
    sigcache_t *c = sigcache_new(1, 4, 4, err, sizeof err);
    uint16_t big[4] = {0, 256, 0, 0}, ex[5] = {0, 1, 2, 3, 9};
    assert_int_equal(sigcache_put(c, 1, ROOT, big, err, sizeof err), -1);
    assert_non_null(strstr(err, "exceeds 255"));
    uint64_t h[3] = {1, 2, 3};
    /* 5 tokens, B = 2: two full blocks; the partial third is refused */
    assert_int_equal(sigcache_store_blocks(c, h, 0, 3, ROOT, ex, 5, 1, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "2 full blocks"));
    assert_int_equal(sigcache_store_blocks(c, h, 0, 2, ROOT, ex, 4, 1, 300, err, sizeof err), -1);
    uint16_t out[4];
    assert_int_equal(sigcache_token_counts(ex, 5, 1, 4, 1, out, err, sizeof err), -1);
    assert_non_null(strstr(err, "expert id 9"));
    sigcache_stats st;
    sigcache_get_stats(c, &st);
    assert_int_equal(st.entries, 0);
    sigcache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recovery_exact),
        cmocka_unit_test(test_lru_and_capacity),
        cmocka_unit_test(test_removal),
        cmocka_unit_test(test_collision_chain),
        cmocka_unit_test(test_parents_outlive_children),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
