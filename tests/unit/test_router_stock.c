/* test_router_stock.c - a stock engine's prefill answer as the prompt's
 * counts (decide_stock_counts, src/router/engine/decide_stock.c), on an
 * engine with one signature cache and nothing else. The oracle is a
 * brute-force count of the routing the test wrote: a cold answer, an
 * answer whose head the prefix cache served (-1 rows, vLLM 0.21) filled
 * from the cache to exactly the cold counts, a cache that lacks those
 * blocks, dense layers, and the answers that give no signal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decide.h"

#define NL 3      /* the model's layers */
#define NE 16
#define NK 2
#define B 4       /* --block-size */

static char body[1 << 16];

/* Token t's ids at layer l: a function of the prompt up to t (tokens),
 * as a real model's routing is; k distinct. */
static void ids_of(const int *tok, int t, int l, int *a, int *b)
{
    unsigned h = 2166136261u;
    for (int i = 0; i <= t; i++)
        h = (h ^ (unsigned)tok[i]) * 16777619u;
    *a = (int)((h >> 3) + (unsigned)l * 5) % NE;
    *b = (*a + 1 + (int)((h >> 11) % (NE - 1))) % NE;
}

/* A vLLM 0.21 answer for prompt tok[0..n): prompt_routed_experts with the
 * first `cached` rows -1, layer `dense` (or -1 none) all 0 among layers
 * (NL + (dense >= 0)), prompt_token_ids when ids; want[NL][NE] gets the
 * brute-force counts of every row (cached ones too). */
static void answer(const int *tok, int n, int cached, int dense, int ids, uint16_t *want)
{
    int L = NL + (dense >= 0);
    char *p = body + sprintf(body, "{\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":1},"
                             "\"prompt_routed_experts\":[", n);
    memset(want, 0, NL * NE * sizeof *want);
    for (int t = 0; t < n; t++) {
        p += sprintf(p, "%s[", t ? "," : "");
        for (int l = 0, m = 0; l < L; l++) {
            int a, b;
            if (l == dense) {
                a = b = 0;
            } else {
                ids_of(tok, t, m, &a, &b);
                want[m * NE + a]++;
                want[m * NE + b]++;
                m++;
            }
            if (t < cached)
                a = b = -1;
            p += sprintf(p, "%s[%d,%d]", l ? "," : "", a, b);
        }
        p += sprintf(p, "]");
    }
    p += sprintf(p, "],\"choices\":[{\"text\":\"x\",\"routed_experts\":[[");
    for (int l = 0; l < L; l++)
        p += sprintf(p, "%s[1,2]", l ? "," : "");
    p += sprintf(p, "]]");
    if (ids) {
        p += sprintf(p, ",\"prompt_token_ids\":[");
        for (int t = 0; t < n; t++)
            p += sprintf(p, "%s%d", t ? "," : "", tok[t]);
        p += sprintf(p, "]");
    }
    sprintf(p, "}]}");
}

typedef struct fixture {
    engine_t d;
    eldrd_opts o;
    pcache pc;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char err[256];
    f->o.block_size = B;
    f->d.o = &f->o;
    f->d.L = NL;
    f->d.E = NE;
    f->pc.c = sigcache_new(NL, NE, 1024, err, sizeof err);
    pthread_mutex_init(&f->pc.lock, NULL);
    f->d.caches = &f->pc;
    f->d.n_caches = 1;
    *state = f;
    return f->pc.c ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    sigcache_free(f->pc.c);
    pthread_mutex_destroy(&f->pc.lock);
    free(f);
    return 0;
}

static int stock(fixture *f, uint16_t *counts, cache_use *u)
{
    memset(u, 0, sizeof *u);
    return decide_stock_counts(&f->d, 0, body, strlen(body), counts, u);
}

static void cold_then_cached(void **state)
{
    fixture *f = *state;
    int a[14], b[11];
    for (int i = 0; i < 14; i++)
        a[i] = 100 + i;
    memcpy(b, a, 8 * sizeof *b);            /* two blocks shared */
    b[8] = 7, b[9] = 8, b[10] = 9;
    uint16_t want[NL * NE], got[NL * NE];
    cache_use u;
    /* cold: the counts of every row; blocks 0..2 stored (14 / 4) */
    answer(a, 14, 0, -1, 1, want);
    assert_int_equal(stock(f, got, &u), 1);
    assert_memory_equal(got, want, sizeof want);
    assert_int_equal(u.origin, SIG_ORIGIN_ROUTED);
    assert_int_equal(u.rows, 14);
    assert_int_equal(u.cached_rows, 0);
    assert_int_equal(u.stored, 3);
    /* b's first 8 rows -1: filled from a's blocks, exactly the cold counts */
    answer(b, 11, 8, -1, 1, want);
    assert_int_equal(stock(f, got, &u), 1);
    assert_memory_equal(got, want, sizeof want);
    assert_int_equal(u.cached_rows, 8);
    assert_int_equal(u.hit, 2);
    assert_int_equal(u.missing, 0);
    assert_int_equal(u.stored, 0);           /* b's only full block past the head: none */
    /* a prompt whose head the engine cached and eldrd never saw */
    int c[9] = {50, 51, 52, 53, 54, 55, 56, 57, 58};
    answer(c, 9, 4, -1, 1, want);
    assert_int_equal(stock(f, got, &u), 0);
    assert_int_equal(u.origin, SIG_ORIGIN_NONE);
    assert_int_equal(u.missing, 1);
    assert_non_null(strstr(u.note, "the signature cache holds 0 of the 1 prefix-cached blocks"));
}

static void no_signal(void **state)
{
    fixture *f = *state;
    int a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t want[NL * NE], got[NL * NE];
    cache_use u;
    /* cached rows that are not whole blocks of --block-size */
    answer(a, 6, 2, -1, 1, want);
    assert_int_equal(stock(f, got, &u), 0);
    assert_non_null(strstr(u.note, "not whole blocks of 4 tokens"));
    /* cached rows and no prompt_token_ids to find them by */
    answer(a, 6, 4, -1, 0, want);
    assert_int_equal(stock(f, got, &u), 0);
    assert_non_null(strstr(u.note, "no prompt_token_ids"));
    /* ids that are not the prompt's rows */
    answer(a, 6, 0, -1, 1, want);
    char *at = strstr(body, "\"prompt_token_ids\":[1,");
    memmove(at + 20, at + 22, strlen(at + 22) + 1);   /* drop the first id */
    assert_int_equal(stock(f, got, &u), 0);
    assert_non_null(strstr(u.note, "prompt_token_ids do not match its 6 prompt rows"));
    /* no routing at all: a stock engine without the flag */
    strcpy(body, "{\"choices\":[{\"text\":\"x\"}],\"usage\":{\"prompt_tokens\":3}}");
    assert_int_equal(stock(f, got, &u), 0);
    assert_non_null(strstr(u.note, "--enable-return-routed-experts"));
    /* an engine with other layers */
    strcpy(body, "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1},\"choices\":[{"
                 "\"routed_experts\":[[[1,2],[3,4]]]}]}");
    assert_int_equal(stock(f, got, &u), 0);
    assert_non_null(strstr(u.note, "cover 2 layers (0 of them dense), the model has 3"));
}

/* vLLM's capturer writes a row for every hidden layer, 0 for a dense one:
 * left out, the rest are the model's layers */
static void dense_layer(void **state)
{
    fixture *f = *state;
    int a[5] = {9, 8, 7, 6, 5};
    uint16_t want[NL * NE], got[NL * NE];
    cache_use u;
    for (int dense = 0; dense <= NL; dense++) {
        answer(a, 5, 0, dense, 0, want);
        assert_int_equal(stock(f, got, &u), 1);
        assert_memory_equal(got, want, sizeof want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(cold_then_cached, setup, teardown),
        cmocka_unit_test_setup_teardown(no_signal, setup, teardown),
        cmocka_unit_test_setup_teardown(dense_layer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
