/* test_router_kv.c - vLLM's KV events in eldrd: the msgpack batch as
 * vLLM's publisher encodes it (msgspec's map form and array form, built
 * here with msgpack-c's packer), block hashes of every kind (sha256
 * bytes, uint64 up to 2^64 - 1, negative ints), bad events dropped one by
 * one while their batch is kept, payloads that are no batch (garbage,
 * truncated, a container claiming more items than bytes); the sequence
 * numbers (next, gap, restart); the bounded hash map (against a shadow
 * under random operations, and its ageing); kv_apply on a real signature
 * cache (vLLM hashes mapped to eldrd's chained hashes, removal by vLLM
 * hash, chained parents across events, each reason a block stays
 * unmapped, AllBlocksCleared, kv_distrust); JSON integers >= 2^63 on
 * POST /v1/kv-events; and the subscriber thread against a publisher
 * played with libzmq: batches in order, a gap the replay socket fills, a
 * gap it leaves unanswered, a restart, bad messages and a bad event. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "blockhash.h"
#include "body.h"
#include "json_in.h"
#include "kv_apply.h"
#include "kv_msgpack.h"
#include "kv_sub.h"
#include "rng.h"

/* ---- msgpack payloads, as msgspec writes them ---- */

typedef struct pk {
    msgpack_sbuffer sb;
    msgpack_packer p;
} pk;

static void pk_init(pk *k)
{
    msgpack_sbuffer_init(&k->sb);
    msgpack_packer_init(&k->p, &k->sb, msgpack_sbuffer_write);
}

static void str(pk *k, const char *s)
{
    msgpack_pack_str(&k->p, strlen(s));
    msgpack_pack_str_body(&k->p, s, strlen(s));
}

static void u64s(pk *k, const uint64_t *v, int n)
{
    msgpack_pack_array(&k->p, (size_t)n);
    for (int i = 0; i < n; i++)
        msgpack_pack_uint64(&k->p, v[i]);
}

static void tokens(pk *k, int first, int n)
{
    msgpack_pack_array(&k->p, (size_t)n);
    for (int i = 0; i < n; i++)
        msgpack_pack_int(&k->p, first + i);
}

/* BlockStored as a map (vLLM's current encoding: tag "type" first, then
 * the fields in order; extra_keys one None per block) */
static void stored_map(pk *k, const uint64_t *h, int n, const uint64_t *parent, int tok0,
                       int bs)
{
    msgpack_pack_map(&k->p, 9);
    str(k, "type"), str(k, "BlockStored");
    str(k, "block_hashes"), u64s(k, h, n);
    str(k, "parent_block_hash");
    if (parent)
        msgpack_pack_uint64(&k->p, *parent);
    else
        msgpack_pack_nil(&k->p);
    str(k, "token_ids"), tokens(k, tok0, n * bs);
    str(k, "block_size"), msgpack_pack_int(&k->p, bs);
    str(k, "lora_id"), msgpack_pack_nil(&k->p);
    str(k, "medium"), str(k, "GPU");
    str(k, "lora_name"), msgpack_pack_nil(&k->p);
    str(k, "extra_keys");
    msgpack_pack_array(&k->p, (size_t)n);
    for (int i = 0; i < n; i++)
        msgpack_pack_nil(&k->p);
}

static void removed_map(pk *k, const uint64_t *h, int n)
{
    msgpack_pack_map(&k->p, 3);
    str(k, "type"), str(k, "BlockRemoved");
    str(k, "block_hashes"), u64s(k, h, n);
    str(k, "medium"), str(k, "GPU");
}

static void batch_map_head(pk *k, int n_events)
{
    msgpack_pack_map(&k->p, 3);
    str(k, "ts"), msgpack_pack_double(&k->p, 1718000000.25);
    str(k, "data_parallel_rank"), msgpack_pack_int(&k->p, 0);
    str(k, "events"), msgpack_pack_array(&k->p, (size_t)n_events);
}

static int decode(const pk *k, kv_batch *b, int *bad, char *why)
{
    return kv_msgpack_batch(k->sb.data, k->sb.size, b, bad, why, 256);
}

/* k decodes whole, no bad event: ts and n events */
static void decode_ok(const pk *k, kv_batch *b, double ts, int n)
{
    int bad;
    char why[256];
    assert_int_equal(decode(k, b, &bad, why), 0);
    assert_int_equal(bad, 0);
    assert_true(b->ts == ts);
    assert_int_equal(b->n, n);
}

static void test_map_form(void **state)
{
    (void)state;
    pk k;
    pk_init(&k);
    uint64_t h[2] = {UINT64_MAX, 9223372036854775808ULL}, parent = 42;
    batch_map_head(&k, 3);
    stored_map(&k, h, 2, &parent, 100, 16);
    removed_map(&k, h + 1, 1);
    msgpack_pack_map(&k.p, 1), str(&k, "type"), str(&k, "AllBlocksCleared");
    kv_batch b;
    decode_ok(&k, &b, 1718000000.25, 3);
    assert_int_equal(b.events[0].kind, KV_STORED);
    assert_int_equal(b.events[0].n, 2);
    assert_true(b.events[0].hashes[0] == UINT64_MAX);
    assert_true(b.events[0].hashes[1] == 9223372036854775808ULL);
    assert_true(b.events[0].has_parent && b.events[0].parent == 42);
    assert_int_equal(b.events[0].block_size, 16);
    assert_int_equal(b.events[0].n_tokens, 32);
    assert_int_equal(b.events[0].tokens[31], 131);
    assert_int_equal(b.events[1].kind, KV_REMOVED);
    assert_true(b.events[1].hashes[0] == 9223372036854775808ULL);
    assert_int_equal(b.events[2].kind, KV_CLEARED);
    kv_batch_free(&b);
    msgpack_sbuffer_destroy(&k.sb);
}

/* the older array_like form: [ts, [tagged arrays], dp_rank]; sha256
 * bytes hashes and negative ints (Python's hash()) */
static void test_array_form(void **state)
{
    (void)state;
    pk k;
    pk_init(&k);
    uint8_t digest[32];
    for (int i = 0; i < 32; i++)
        digest[i] = (uint8_t)(0xa0 + i);
    msgpack_pack_array(&k.p, 3);
    msgpack_pack_double(&k.p, 2.5);
    msgpack_pack_array(&k.p, 3);
    msgpack_pack_array(&k.p, 7);                      /* BlockStored */
    str(&k, "BlockStored");
    msgpack_pack_array(&k.p, 2);
    msgpack_pack_bin(&k.p, 32), msgpack_pack_bin_body(&k.p, digest, 32);
    msgpack_pack_int64(&k.p, -5);
    msgpack_pack_nil(&k.p);                           /* no parent */
    tokens(&k, 7, 4);
    msgpack_pack_int(&k.p, 2);
    msgpack_pack_nil(&k.p), str(&k, "GPU");
    msgpack_pack_array(&k.p, 3), str(&k, "BlockRemoved"); /* BlockRemoved */
    msgpack_pack_array(&k.p, 1), msgpack_pack_int64(&k.p, -5), str(&k, "GPU");
    msgpack_pack_array(&k.p, 1), str(&k, "AllBlocksCleared");
    msgpack_pack_int(&k.p, 0);
    kv_batch b;
    decode_ok(&k, &b, 2.5, 3);
    /* vLLM's int form of a bytes hash: int.from_bytes(h, "big") & (2**64 - 1) */
    assert_true(b.events[0].hashes[0] == 0xb8b9babbbcbdbebfULL);
    assert_true(b.events[0].hashes[1] == (uint64_t)-5);
    assert_false(b.events[0].has_parent);
    assert_int_equal(b.events[0].n_tokens, 4);
    assert_int_equal(b.events[0].block_size, 2);
    assert_true(b.events[1].hashes[0] == (uint64_t)-5);
    assert_int_equal(b.events[2].kind, KV_CLEARED);
    kv_batch_free(&b);
    msgpack_sbuffer_destroy(&k.sb);

    /* an array batch of map events (vLLM's example subscriber's decoder) */
    pk_init(&k);
    uint64_t h = 9;
    msgpack_pack_array(&k.p, 2);
    msgpack_pack_int(&k.p, 3);                        /* an integer ts */
    msgpack_pack_array(&k.p, 1);
    removed_map(&k, &h, 1);
    decode_ok(&k, &b, 3.0, 1);
    assert_true(b.events[0].hashes[0] == 9);
    kv_batch_free(&b);
    msgpack_sbuffer_destroy(&k.sb);
    assert_true(kv_hash_of_bytes((const uint8_t *)"\x01\x02", 2) == 0x0102);
}

/* each bad event costs that event; the others of the batch stay, in order */
static void test_bad_events(void **state)
{
    (void)state;
    pk k;
    pk_init(&k);
    uint64_t h[1] = {11};
    batch_map_head(&k, 8);
    removed_map(&k, h, 1);                                            /* good */
    msgpack_pack_map(&k.p, 1), str(&k, "type"), str(&k, "BlockMoved"); /* unknown type */
    msgpack_pack_map(&k.p, 2), str(&k, "type"), str(&k, "BlockRemoved");
    str(&k, "block_hashes"), str(&k, "oops");                         /* not an array */
    msgpack_pack_int(&k.p, 7);                                        /* not an event */
    msgpack_pack_array(&k.p, 5), str(&k, "BlockStored");              /* token id < 0 */
    u64s(&k, h, 1), msgpack_pack_nil(&k.p);
    msgpack_pack_array(&k.p, 1), msgpack_pack_int(&k.p, -1), msgpack_pack_int(&k.p, 1);
    msgpack_pack_map(&k.p, 1), str(&k, "block_hashes"), u64s(&k, h, 1); /* no type */
    msgpack_pack_array(&k.p, 2), str(&k, "BlockRemoved");             /* a float hash */
    msgpack_pack_array(&k.p, 1), msgpack_pack_double(&k.p, 1.5);
    msgpack_pack_array(&k.p, 1), str(&k, "AllBlocksCleared");         /* good */
    kv_batch b;
    int bad;
    char why[256];
    assert_int_equal(decode(&k, &b, &bad, why), 0);
    assert_int_equal(bad, 6);
    assert_non_null(strstr(why, "events[1]"));
    assert_non_null(strstr(why, "BlockMoved"));
    assert_int_equal(b.n, 2);
    assert_int_equal(b.events[0].kind, KV_REMOVED);
    assert_int_equal(b.events[1].kind, KV_CLEARED);
    kv_batch_free(&b);
    msgpack_sbuffer_destroy(&k.sb);
}

static void expect_no_batch(const void *buf, size_t len, const char *what)
{
    kv_batch b;
    int bad;
    char why[256];
    assert_int_equal(kv_msgpack_batch(buf, len, &b, &bad, why, sizeof why), -1);
    assert_int_equal(b.n, 0);
    assert_null(b.events);
    if (!strstr(why, what))
        fail_msg("'%s' lacks '%s'", why, what);
}

static void test_not_a_batch(void **state)
{
    (void)state;
    expect_no_batch("", 0, "not one msgpack value");
    expect_no_batch("\xc1", 1, "not one msgpack value");               /* never used */
    /* array32 claiming 2^32 - 1 items in 5 bytes: refused before msgpack-c allocates */
    expect_no_batch("\xdd\xff\xff\xff\xff", 5, "not one msgpack value");
    expect_no_batch("\xdf\xff\xff\xff\xff", 5, "not one msgpack value");
    expect_no_batch("\x92\xcb\x00", 3, "not one msgpack value");       /* truncated */
    expect_no_batch("\x92\x01\x90\x01", 4, "not one msgpack value");   /* trailing byte */
    expect_no_batch("\x81\xa2ts\x01", 5, "no events array");           /* map without events */
    expect_no_batch("\x92\x01\x02", 3, "no events array");             /* events not an array */
    expect_no_batch("\x07", 1, "no events array");
    /* more values than KV_MSGPACK_MAX_VALUES, however few bytes each */
    size_t nv = (size_t)KV_MSGPACK_MAX_VALUES + 1;
    uint8_t *many = malloc(5 + nv);
    memcpy(many, "\xdd", 1);
    for (int i = 0; i < 4; i++)
        many[1 + i] = (uint8_t)(nv >> (24 - 8 * i));
    memset(many + 5, 0x01, nv);
    expect_no_batch(many, 5 + nv, "at most 4194304 values");
    free(many);
    /* every prefix of a good payload is refused, never read past */
    pk k;
    pk_init(&k);
    uint64_t h[3] = {1, 2, 3};
    batch_map_head(&k, 1);
    stored_map(&k, h, 3, NULL, 0, 16);
    for (size_t n = 0; n < k.sb.size; n++) {
        char *cut = malloc(n ? n : 1);
        memcpy(cut, k.sb.data, n);
        expect_no_batch(cut, n, "not one msgpack value");
        free(cut);
    }
    msgpack_sbuffer_destroy(&k.sb);
}

static void test_sequence(void **state)
{
    (void)state;
    assert_int_equal(kvseq_classify(0, 0, 17), KVSEQ_NEXT);   /* the first: as it comes */
    assert_int_equal(kvseq_classify(1, 4, 5), KVSEQ_NEXT);
    assert_int_equal(kvseq_classify(1, 4, 7), KVSEQ_GAP);
    assert_int_equal(kvseq_classify(1, 4, 4), KVSEQ_RESTART); /* the same again */
    assert_int_equal(kvseq_classify(1, 4, 0), KVSEQ_RESTART); /* a new process */
    assert_int_equal(kvseq_classify(1, UINT64_MAX - 1, UINT64_MAX), KVSEQ_NEXT);
}

/* the map against a shadow table under random puts, takes and gets, at a
 * capacity that never ages (all keys fit) */
static void test_kvmap_shadow(void **state)
{
    (void)state;
    enum { KEYS = 300 };
    kvmap *m = kvmap_new(KEYS);
    assert_non_null(m);
    uint64_t val[KEYS];
    int has[KEYS] = {0};
    rng_t r;
    rng_seed(&r, 29);
    for (int step = 0; step < 200000; step++) {
        int i = (int)(rng_next(&r) % KEYS);
        /* keys crowd a few home slots: small multiples of 2^47 */
        uint64_t key = (uint64_t)i << 47, v;
        switch (rng_next(&r) % 3) {
        case 0:
            val[i] = rng_next(&r);
            has[i] = 1;
            kvmap_put(m, key, val[i]);
            break;
        case 1:
            assert_int_equal(kvmap_take(m, key, &v), has[i]);
            if (has[i])
                assert_true(v == val[i]);
            has[i] = 0;
            break;
        default:
            assert_int_equal(kvmap_get(m, key, &v), has[i]);
            if (has[i])
                assert_true(v == val[i]);
        }
    }
    size_t n = 0;
    for (int i = 0; i < KEYS; i++)
        n += (size_t)has[i];
    assert_int_equal(kvmap_size(m), n);
    kvmap_clear(m);
    assert_int_equal(kvmap_size(m), 0);
    kvmap_free(m);
}

/* the entry put longest ago goes first; a put refreshes */
static void test_kvmap_ageing(void **state)
{
    (void)state;
    kvmap *m = kvmap_new(3);
    uint64_t v;
    kvmap_put(m, 1, 10);
    kvmap_put(m, 2, 20);
    kvmap_put(m, 3, 30);
    kvmap_put(m, 1, 11);          /* refresh 1: 2 is now the oldest */
    kvmap_put(m, 4, 40);
    assert_false(kvmap_get(m, 2, &v));
    assert_true(kvmap_get(m, 1, &v) && v == 11);
    assert_true(kvmap_get(m, 3, &v) && v == 30);
    assert_true(kvmap_get(m, 4, &v) && v == 40);
    assert_int_equal(kvmap_size(m), 3);
    assert_int_equal(kvmap_aged(m), 1);
    for (uint64_t k = 100; k < 1100; k++)
        kvmap_put(m, k, k);
    assert_int_equal(kvmap_size(m), 3);
    assert_true(kvmap_get(m, 1099, &v) && v == 1099);
    assert_false(kvmap_get(m, 1096, &v));
    kvmap_free(m);
}

/* full most of the time: against a shadow that drops the entry put
 * longest ago */
static void test_kvmap_shadow_full(void **state)
{
    (void)state;
    enum { KEYS = 200, CAP = 50 };
    kvmap *m = kvmap_new(CAP);
    uint64_t val[KEYS], put_at[KEYS], clock = 0, aged = 0;
    int has[KEYS] = {0}, n = 0;
    rng_t r;
    rng_seed(&r, 5);
    for (int step = 0; step < 50000; step++) {
        int i = (int)(rng_next(&r) % KEYS);
        uint64_t key = (uint64_t)i * 1000003u, v;
        if (rng_next(&r) % 5 == 0) {
            assert_int_equal(kvmap_take(m, key, &v), has[i]);
            n -= has[i];
            has[i] = 0;
            continue;
        }
        if (!has[i] && n == CAP) {  /* the oldest put goes */
            int old = -1;
            for (int j = 0; j < KEYS; j++)
                if (has[j] && (old < 0 || put_at[j] < put_at[old]))
                    old = j;
            has[old] = 0;
            n--;
            aged++;
        }
        n += !has[i];
        has[i] = 1;
        val[i] = rng_next(&r);
        put_at[i] = ++clock;
        kvmap_put(m, key, val[i]);
        for (int j = 0; j < KEYS; j += 7) {
            assert_int_equal(kvmap_get(m, (uint64_t)j * 1000003u, &v), has[j]);
            if (has[j])
                assert_true(v == val[j]);
        }
        assert_int_equal(kvmap_size(m), (size_t)n);
    }
    assert_int_equal(kvmap_aged(m), aged);
    assert_true(aged > 1000);
    kvmap_free(m);
}

/* ---- kv_apply on a real signature cache ---- */

#define L 2
#define E 4
#define B 16

typedef struct rig {
    engine_t d;
    pcache pc;
} rig;

static void rig_init(rig *r)
{
    memset(r, 0, sizeof *r);
    char err[256];
    r->pc.name = "p0";
    pthread_mutex_init(&r->pc.lock, NULL);
    r->pc.c = sigcache_new(L, E, 64, err, sizeof err);
    r->pc.kv = kv_side_new(64, B);
    assert_non_null(r->pc.c);
    assert_non_null(r->pc.kv);
    r->d.caches = &r->pc;
    r->d.n_caches = 1;
}

static void rig_free(rig *r)
{
    sigcache_free(r->pc.c);
    kv_side_free(r->pc.kv);
    pthread_mutex_destroy(&r->pc.lock);
}

/* the prompt's tokens 0..n*B-1 from first; eldrd's chain of them into h;
 * its blocks stored in the cache (counts: one expert per layer) */
static void store_prompt(rig *r, int first, int n, uint64_t *h)
{
    int32_t tok[8 * B];
    for (int i = 0; i < n * B; i++)
        tok[i] = first + i;
    assert_int_equal(block_hash_chain(BLOCK_HASH_ROOT, tok, n * B, B, h), n);
    uint16_t counts[L * E] = {B, 0, 0, 0, 0, B, 0, 0};
    char err[256];
    for (int i = 0; i < n; i++)
        assert_int_equal(sigcache_put(r->pc.c, h[i], i ? h[i - 1] : BLOCK_HASH_ROOT, counts,
                                      err, sizeof err), 0);
}

static kv_event stored_ev(uint64_t *vh, int n, const uint64_t *parent, int32_t *tok, int first,
                          int bs)
{
    for (int i = 0; i < n * bs; i++)
        tok[i] = first + i;
    return (kv_event){.kind = KV_STORED, .hashes = vh, .n = n, .has_parent = parent != NULL,
                      .parent = parent ? *parent : 0, .block_size = bs, .tokens = tok,
                      .n_tokens = n * bs};
}

static void test_apply(void **state)
{
    (void)state;
    rig r;
    rig_init(&r);
    uint64_t h[4], vh[4] = {0xdead0001, 0xdead0002, UINT64_MAX, 9223372036854775808ULL};
    store_prompt(&r, 500, 4, h);
    int32_t tok[4 * B];
    /* blocks 0, 1 in one event, blocks 2, 3 in the next, chained by vLLM's
     * parent hash (the map gives eldrd's) */
    kv_event ev[3];
    ev[0] = stored_ev(vh, 2, NULL, tok, 500, B);
    kv_applied a;
    kv_apply(&r.d, 0, ev, 1, &a);
    assert_int_equal(a.mapped_blocks, 2);
    int32_t tok2[2 * B];
    ev[1] = stored_ev(vh + 2, 2, &vh[1], tok2, 500 + 2 * B, B);
    uint64_t gone[2] = {vh[3], vh[0]};
    ev[2] = (kv_event){.kind = KV_REMOVED, .hashes = gone, .n = 2};
    kv_apply(&r.d, 0, ev + 1, 2, &a);
    assert_int_equal(a.mapped_blocks, 2);
    assert_int_equal(a.removed_blocks, 2);  /* eldrd's blocks 3 and 0, by vLLM's hashes */
    assert_int_equal(a.entries, 2);
    assert_int_equal(a.events[KV_STORED], 1);
    assert_int_equal(a.events[KV_REMOVED], 1);
    assert_true(sigcache_contains(r.pc.c, h[1]) && sigcache_contains(r.pc.c, h[2]));
    assert_false(sigcache_contains(r.pc.c, h[0]) || sigcache_contains(r.pc.c, h[3]));
    assert_int_equal(kvmap_size(r.pc.kv->map), 2);
    /* a hash the map does not know is taken as eldrd's own */
    ev[0] = (kv_event){.kind = KV_REMOVED, .hashes = &h[1], .n = 1};
    kv_apply(&r.d, 0, ev, 1, &a);
    assert_int_equal(a.removed_blocks, 1);

    /* the reasons a block stays unmapped */
    uint64_t unknown = 77, x[2] = {1, 2};
    ev[0] = stored_ev(x, 1, &unknown, tok, 0, B);                   /* parent unknown */
    ev[1] = stored_ev(x, 2, NULL, tok, 0, 8);                       /* another block size */
    ev[2] = stored_ev(x, 2, NULL, tok, 0, B);
    ev[2].n_tokens = B;                                             /* a null block's hash left out */
    kv_apply(&r.d, 0, ev, 3, &a);
    assert_int_equal(a.mapped_blocks, 0);
    assert_int_equal(r.pc.kv->unmapped[KV_UNMAPPED_PARENT], 1);
    assert_int_equal(r.pc.kv->unmapped[KV_UNMAPPED_BLOCK_SIZE], 2);
    assert_int_equal(r.pc.kv->unmapped[KV_UNMAPPED_TOKENS], 2);
    ev[0] = stored_ev(x, 1, NULL, tok, 0, B);
    ev[0].tokens = NULL;                                            /* no token_ids */
    kv_apply(&r.d, 0, ev, 1, &a);
    assert_int_equal(r.pc.kv->unmapped[KV_UNMAPPED_TOKENS], 3);

    /* AllBlocksCleared empties cache and map; kv_distrust too, counted */
    ev[0] = (kv_event){.kind = KV_CLEARED};
    kv_apply(&r.d, 0, ev, 1, &a);
    assert_int_equal(a.entries, 0);
    assert_int_equal(a.removed_blocks, 1);
    assert_int_equal(kvmap_size(r.pc.kv->map), 0);
    store_prompt(&r, 900, 3, h);
    kv_distrust(&r.d, 0, KV_NOTE_RESET_RESTART);
    sigcache_stats st;
    sigcache_get_stats(r.pc.c, &st);
    assert_int_equal(st.entries, 0);
    assert_int_equal(r.pc.kv->notes[KV_NOTE_RESET_RESTART], 1);
    kv_note(&r.d, 0, KV_NOTE_MISSED, 5);
    strbuf sb = {0};
    kv_metrics(&r.d, &sb);
    assert_false(sb.oom);
    assert_non_null(strstr(sb.s, "# TYPE eldr_kv_events_total counter\n"));
    assert_non_null(strstr(sb.s, "eldr_kv_events_total{prefill=\"p0\",kind=\"stored\"} 6\n"));
    assert_non_null(strstr(sb.s, "eldr_kv_events_total{prefill=\"p0\",kind=\"cleared\"} 1\n"));
    assert_non_null(strstr(sb.s, "eldr_kv_events_missed_total{prefill=\"p0\"} 5\n"));
    assert_non_null(strstr(sb.s, "eldr_kv_cache_resets_total{prefill=\"p0\",reason=\"restart\"} 1\n"));
    free(sb.s);
    rig_free(&r);
}

/* ---- the subscriber (kv_sub.c) against a publisher played here ----
 * with libzmq on loopback, as vLLM's ZmqEventPublisher behaves
 * (vllm/distributed/kv_events.py at commit 0181ea3173e5): multipart
 * (topic, 8-byte big-endian sequence, msgpack batch) on a PUB socket
 * (XPUB here, to see the subscription arrive), and a ROUTER replay socket
 * that answers [identity, "", seq, payload] per buffered batch from the
 * asked start, then [identity, "", -1, ""]. */

typedef struct zrig {
    rig r;
    void *ctx, *pub, *router;
    char pub_ep[128], router_ep[128];
    pk last;                     /* the last payload built */
} zrig;

static void zrig_init(zrig *z)
{
    rig_init(&z->r);
    z->ctx = zmq_ctx_new();
    z->pub = zmq_socket(z->ctx, ZMQ_XPUB);
    z->router = zmq_socket(z->ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(z->pub, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(z->router, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_bind(z->pub, "tcp://127.0.0.1:*"), 0);
    assert_int_equal(zmq_bind(z->router, "tcp://127.0.0.1:*"), 0);
    size_t n = sizeof z->pub_ep;
    zmq_getsockopt(z->pub, ZMQ_LAST_ENDPOINT, z->pub_ep, &n);
    n = sizeof z->router_ep;
    zmq_getsockopt(z->router, ZMQ_LAST_ENDPOINT, z->router_ep, &n);
    pk_init(&z->last);
}

static void zrig_free(zrig *z)
{
    zmq_close(z->pub);
    zmq_close(z->router);
    zmq_ctx_term(z->ctx);
    msgpack_sbuffer_destroy(&z->last.sb);
    rig_free(&z->r);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* the worker's numbers, read under its lock (the subscriber writes them) */
static uint64_t note(rig *r, kv_note_kind k)
{
    pthread_mutex_lock(&r->pc.lock);
    uint64_t v = r->pc.kv->notes[k];
    pthread_mutex_unlock(&r->pc.lock);
    return v;
}

static int64_t entries(rig *r)
{
    sigcache_stats st;
    pthread_mutex_lock(&r->pc.lock);
    sigcache_get_stats(r->pc.c, &st);
    pthread_mutex_unlock(&r->pc.lock);
    return st.entries;
}

static size_t mapped(rig *r)
{
    pthread_mutex_lock(&r->pc.lock);
    size_t n = kvmap_size(r->pc.kv->map);
    pthread_mutex_unlock(&r->pc.lock);
    return n;
}

/* wait (at most 5 s) until expr == want */
#define WAIT_EQ(expr, want)                                                                    \
    do {                                                                                       \
        for (int w_ = 0; w_ < 500 && (expr) != (want); w_++)                                   \
            sleep_ms(10);                                                                      \
        assert_true((expr) == (want));                                                         \
    } while (0)

/* the payload of a batch (map form) of one event: stored (the tokens from
 * tok0, n blocks, hashes h) when tok0 >= 0, else removed h[0..n); bad: a
 * bad event before it */
static void build(zrig *z, const uint64_t *h, int n, int tok0, int bad)
{
    msgpack_sbuffer_clear(&z->last.sb);
    batch_map_head(&z->last, 1 + bad);
    if (bad)
        msgpack_pack_map(&z->last.p, 1), str(&z->last, "type"), str(&z->last, "BlockExploded");
    if (tok0 >= 0)
        stored_map(&z->last, h, n, NULL, tok0, B);
    else
        removed_map(&z->last, h, n);
}

static void seq_bytes(uint64_t seq, uint8_t out[8])
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(seq >> (56 - 8 * i));
}

/* send frames f[0..n) as one message */
static void send_frames(void *sock, const void *const *f, const size_t *len, int n)
{
    for (int i = 0; i < n; i++)
        zmq_send(sock, f[i], len[i], i + 1 < n ? ZMQ_SNDMORE : 0);
}

/* publish the last payload built as sequence seq */
static void publish(zrig *z, uint64_t seq)
{
    uint8_t sb[8];
    seq_bytes(seq, sb);
    const void *f[3] = {"", sb, z->last.sb.data};
    size_t len[3] = {0, 8, z->last.sb.size};
    send_frames(z->pub, f, len, 3);
}

/* answer one replay request (within 5 s) with payload as seq, then the
 * end marker; returns the start asked for */
static uint64_t answer_replay(zrig *z, uint64_t seq, const msgpack_sbuffer *payload)
{
    zmq_pollitem_t it = {z->router, 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&it, 1, 5000), 1);
    uint8_t id[256], empty[8], start[16];
    int nid = zmq_recv(z->router, id, sizeof id, 0);
    assert_int_equal(zmq_recv(z->router, empty, sizeof empty, 0), 0);
    assert_int_equal(zmq_recv(z->router, start, sizeof start, 0), 8);
    assert_true(nid > 0);
    uint64_t from = 0;
    for (int i = 0; i < 8; i++)
        from = (from << 8) | start[i];
    uint8_t sb[8], end[8];
    seq_bytes(seq, sb);
    memset(end, 0xff, 8);
    const void *f[4] = {id, "", sb, payload->data}, *g[4] = {id, "", end, ""};
    size_t len[4] = {(size_t)nid, 0, 8, payload->size}, glen[4] = {(size_t)nid, 0, 8, 0};
    send_frames(z->router, f, len, 4);
    send_frames(z->router, g, glen, 4);
    return from;
}

/* batches in order; a gap the replay socket fills (the lost batch applied
 * before the next); a bad event inside a good batch; messages that are no
 * batch; a gap left unanswered (the cache emptied after a second); a
 * publisher restart (sequence 0 again: emptied) */
static void test_subscriber(void **state)
{
    (void)state;
    zrig z;
    zrig_init(&z);
    rig *r = &z.r;
    char err[256];
    kvsub_t *s = kvsub_start(&r->d, z.pub_ep, z.router_ep, "", err, sizeof err);
    assert_non_null(s);
    /* the subscription arrives at the XPUB: [1, topic ""] */
    zmq_pollitem_t it = {z.pub, 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&it, 1, 5000), 1);
    char sub[8];
    assert_int_equal(zmq_recv(z.pub, sub, sizeof sub, 0), 1);
    assert_int_equal(sub[0], 1);

    uint64_t v[4] = {0xa1, 0xa2, 0xa3, 0xa4}, h[4];
    store_prompt(r, 100, 4, h);
    build(&z, v, 4, 100, 0);
    publish(&z, 0);
    WAIT_EQ(mapped(r), 4);

    /* seq 1 (remove a1) is lost; seq 2 (remove a2) shows the gap */
    msgpack_sbuffer lost;
    msgpack_sbuffer_init(&lost);
    build(&z, v, 1, -1, 0);
    msgpack_sbuffer_write(&lost, z.last.sb.data, z.last.sb.size);
    build(&z, v + 1, 1, -1, 0);
    publish(&z, 2);
    assert_true(answer_replay(&z, 1, &lost) == 1);
    WAIT_EQ(entries(r), 2);
    assert_int_equal(note(r, KV_NOTE_GAP), 1);
    assert_int_equal(note(r, KV_NOTE_MISSED), 1);
    assert_int_equal(note(r, KV_NOTE_REPLAYED), 1);
    assert_int_equal(note(r, KV_NOTE_RESET_GAP), 0);
    assert_int_equal(mapped(r), 2);

    build(&z, v + 2, 1, -1, 1);
    publish(&z, 3);
    WAIT_EQ(entries(r), 1);
    assert_int_equal(note(r, KV_NOTE_BAD_EVENT), 1);

    uint8_t four[4] = {0, 0, 0, 4};
    const void *two[2] = {"", "x"}, *short_seq[3] = {"", four, z.last.sb.data};
    size_t two_len[2] = {0, 1}, short_len[3] = {0, 4, z.last.sb.size};
    send_frames(z.pub, two, two_len, 2);
    send_frames(z.pub, short_seq, short_len, 3);
    WAIT_EQ(note(r, KV_NOTE_BAD_MESSAGE), 2);

    build(&z, v + 3, 1, -1, 0);
    publish(&z, 6);                    /* 4 and 5 lost, and not given back */
    WAIT_EQ(note(r, KV_NOTE_RESET_GAP), 1);
    zmq_pollitem_t rq = {z.router, 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&rq, 1, 0), 1);   /* it was asked */
    assert_int_equal(entries(r), 0);
    assert_int_equal(mapped(r), 0);
    assert_int_equal(note(r, KV_NOTE_MISSED), 3);

    store_prompt(r, 300, 2, h);
    build(&z, v, 2, 300, 0);
    publish(&z, 0);
    WAIT_EQ(note(r, KV_NOTE_RESET_RESTART), 1);
    WAIT_EQ(mapped(r), 2);
    assert_int_equal(entries(r), 0);
    assert_int_equal(r->pc.kv->events[KV_STORED], 2);
    kvsub_stop(s);
    msgpack_sbuffer_destroy(&lost);
    zrig_free(&z);
}

static void test_subscriber_start_errors(void **state)
{
    (void)state;
    rig r;
    rig_init(&r);
    char err[256];
    assert_null(kvsub_start(&r.d, "tcp://127.0.0.1:1,tcp://127.0.0.1:2", NULL, "", err,
                            sizeof err));
    assert_non_null(strstr(err, "--kv-events: 2 endpoints for 1 prefill worker"));
    assert_null(kvsub_start(&r.d, "tcp://127.0.0.1:1", "a,b", "", err, sizeof err));
    assert_non_null(strstr(err, "--kv-events-replay: 2 endpoints"));
    assert_null(kvsub_start(&r.d, "bogus", NULL, "", err, sizeof err));
    assert_non_null(strstr(err, "'bogus'"));
    assert_null(kvsub_start(&r.d, "tcp://127.0.0.1:1", "tcp://", "", err, sizeof err));
    assert_non_null(strstr(err, "--kv-events-replay: 'tcp://'"));
    kvsub_stop(NULL);
    rig_free(&r);
}

/* ---- JSON: integers 2^63 .. 2^64 - 1 are block hashes ---- */

static void test_json_big_ints(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;    /* out NULL: no copy made */
    } q[] = {
        {"[18446744073709551615, 9223372036854775808]",
         "[\"18446744073709551615\", \"9223372036854775808\"]"},
        {"[9223372036854775807,-9223372036854775808,1e300,0.5]", NULL},
        {"18446744073709551616", NULL},                       /* past 2^64 - 1 */
        {"{\"s\":\"18446744073709551615\",\"t\":\"a\\\"18446744073709551615\"}", NULL},
        {"{\"a\":18446744073709551615}", "{\"a\":\"18446744073709551615\"}"},
        {"[99999999999999999999]", NULL},
        {"[18446744073709551615 0\"]", "[\"18446744073709551615\" 0\"]"}, /* a string left open */
        {"[9223372036854775808,\"\\", "[\"9223372036854775808\",\"\\"},  /* ... on a backslash */
    };
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
        char *out;
        size_t n;
        assert_int_equal(rb_quote_big_ints(q[i].in, strlen(q[i].in), &out, &n), 0);
        if (!q[i].out) {
            assert_null(out);
            continue;
        }
        assert_non_null(out);
        assert_int_equal(n, strlen(q[i].out));
        assert_memory_equal(out, q[i].out, n);
        free(out);
    }
    kv_batch b;
    rb_err e;
    const char *body = "{\"worker\":\"p0\",\"events\":[{\"type\":\"BlockRemoved\",\"block_hashes\":"
                       "[18446744073709551615,9223372036854775808,-1]},{\"type\":\"BlockStored\","
                       "\"block_hashes\":[12345678901234567890],\"parent_block_hash\":"
                       "10000000000000000000,\"token_ids\":[1,2],\"block_size\":2}]}";
    assert_int_equal(kv_body_parse(body, strlen(body), &b, &e), 0);
    assert_int_equal(b.n, 2);
    assert_true(b.events[0].hashes[0] == UINT64_MAX);
    assert_true(b.events[0].hashes[1] == 9223372036854775808ULL);
    assert_true(b.events[0].hashes[2] == UINT64_MAX);
    assert_true(b.events[1].hashes[0] == 12345678901234567890ULL);
    assert_true(b.events[1].parent == 10000000000000000000ULL);
    assert_int_equal(b.events[1].n_tokens, 2);
    assert_int_equal(b.events[1].tokens[1], 2);
    kv_batch_free(&b);
    /* beyond 2^64 - 1 is still refused, naming where */
    const char *over = "{\"events\":[{\"type\":\"BlockRemoved\",\"block_hashes\":[18446744073709551616]}]}";
    assert_int_equal(kv_body_parse(over, strlen(over), &b, &e), -1);
    assert_int_equal(e.status, 400);
    /* a big integer where no hash goes is a type error */
    const char *ts = "{\"ts\":18446744073709551615,\"events\":[]}";
    assert_int_equal(kv_body_parse(ts, strlen(ts), &b, &e), -1);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.where, "ts");
    /* token ids outside 0..2^31-1 */
    const char *tk = "{\"events\":[{\"type\":\"BlockStored\",\"block_hashes\":[1],\"token_ids\":[1,-2]}]}";
    assert_int_equal(kv_body_parse(tk, strlen(tk), &b, &e), -1);
    assert_int_equal(e.status, 422);
    assert_string_equal(e.where, "events[0].token_ids[1]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_form),     cmocka_unit_test(test_array_form),
        cmocka_unit_test(test_bad_events),   cmocka_unit_test(test_not_a_batch),
        cmocka_unit_test(test_sequence),     cmocka_unit_test(test_kvmap_shadow),
        cmocka_unit_test(test_kvmap_ageing), cmocka_unit_test(test_kvmap_shadow_full),
        cmocka_unit_test(test_apply),
        cmocka_unit_test(test_json_big_ints), cmocka_unit_test(test_subscriber),
        cmocka_unit_test(test_subscriber_start_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
