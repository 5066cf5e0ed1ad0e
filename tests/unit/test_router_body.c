/* test_router_body.c - eldrd's pure parts: base64 (against a brute-force
 * round trip), the route body (dense, sparse, block hashes and block
 * counts, and every refusal with its status and where), finish/config
 * bodies, vLLM KV event batches in both JSON forms, the in-flight table
 * (against a brute-force shadow under random insert/remove) and the
 * command line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "body.h"
#include "idmap.h"
#include "opts.h"
#include "err.h"
#include "rng.h"
#include "state.h"

#define L 3
#define E 4

/* base64 of L*E int16 LE values */
static char *dense_b64(const int16_t *v, size_t n)
{
    uint8_t *raw = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        raw[2 * i] = (uint8_t)((uint16_t)v[i] & 0xff);
        raw[2 * i + 1] = (uint8_t)((uint16_t)v[i] >> 8);
    }
    char *s = malloc(b64_encoded_size(n * 2));
    b64_encode(raw, n * 2, s);
    free(raw);
    return s;
}

static void test_b64_round_trip(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 3);
    for (size_t n = 0; n < 64; n++) {
        uint8_t in[64], out[64 + 3];
        for (size_t i = 0; i < n; i++)
            in[i] = (uint8_t)rng_below(&r, 256);
        char enc[100];
        b64_encode(in, n, enc);
        assert_int_equal(strlen(enc), 4 * ((n + 2) / 3));
        size_t got, bad;
        assert_int_equal(b64_decode(enc, strlen(enc), out, &got, &bad), 0);
        assert_int_equal(got, n);
        assert_memory_equal(in, out, n);
        /* without padding too */
        size_t len = strlen(enc);
        while (len && enc[len - 1] == '=')
            len--;
        assert_int_equal(b64_decode(enc, len, out, &got, &bad), 0);
        assert_int_equal(got, n);
    }
    size_t got, bad;
    uint8_t out[16];
    assert_int_equal(b64_decode("TWFu", 4, out, &got, &bad), 0);
    assert_memory_equal(out, "Man", 3);
    assert_int_equal(b64_decode("TW Fu", 5, out, &got, &bad), -1);
    assert_int_equal(bad, 2);
    assert_int_equal(b64_decode("TWFuA", 5, out, &got, &bad), -1);
}

static int parse(const char *json, route_body *b, rb_err *e)
{
    return route_body_parse(json, strlen(json), L, E, b, e);
}

static void test_route_dense(void **state)
{
    (void)state;
    int16_t v[L * E];
    for (int i = 0; i < L * E; i++)
        v[i] = (int16_t)(i * 1000 + 7);   /* values above 255 exercise the high byte */
    char *b64 = dense_b64(v, L * E), json[512];
    snprintf(json, sizeof json, "{\"request_id\":\"x1\",\"counts\":\"%s\",\"prefill_worker\":\"p0\"}",
             b64);
    route_body b;
    rb_err e;
    assert_int_equal(parse(json, &b, &e), 0);
    assert_string_equal(b.request_id, "x1");
    assert_string_equal(b.prefill_worker, "p0");
    for (int i = 0; i < L * E; i++)
        assert_int_equal(b.counts[i], v[i]);
    assert_int_equal(b.n_hashes, 0);
    route_body_free(&b);

    v[5] = -3;   /* negative count */
    free(b64);
    b64 = dense_b64(v, L * E);
    snprintf(json, sizeof json, "{\"counts\":\"%s\"}", b64);
    assert_int_equal(parse(json, &b, &e), -1);
    assert_int_equal(e.status, 422);
    assert_string_equal(e.where, "counts");
    assert_non_null(strstr(e.error, "layer 1 expert 1"));
    free(b64);

    /* wrong geometry: one cell short */
    b64 = dense_b64(v, L * E - 1);
    snprintf(json, sizeof json, "{\"counts\":\"%s\"}", b64);
    assert_int_equal(parse(json, &b, &e), -1);
    assert_int_equal(e.status, 422);
    assert_non_null(strstr(e.error, "expected L*E*2 = 24"));
    free(b64);

    assert_int_equal(parse("{\"counts\":\"@@@@\"}", &b, &e), -1);
    assert_int_equal(e.status, 400);
    assert_int_equal(parse("{\"counts\":5}", &b, &e), -1);
    assert_int_equal(e.status, 400);
}

static void test_route_sparse(void **state)
{
    (void)state;
    route_body b;
    rb_err e;
    assert_int_equal(parse("{\"sparse\":[[0,1,5],[2,3,7],[0,1,2]]}", &b, &e), 0);
    assert_int_equal(b.request_id[0], '\0');
    for (int i = 0; i < L * E; i++)
        assert_int_equal(b.counts[i], i == 1 ? 7 : i == 2 * E + 3 ? 7 : 0);
    route_body_free(&b);
    assert_int_equal(parse("{\"sparse\":[]}", &b, &e), 0);
    route_body_free(&b);

    static const struct {
        const char *json;
        int status;
        const char *where;
    } bad[] = {
        {"{\"sparse\":[[3,0,1]]}", 422, "sparse[0][0]"},           /* layer out of range */
        {"{\"sparse\":[[0,4,1]]}", 422, "sparse[0][1]"},           /* expert out of range */
        {"{\"sparse\":[[0,0,-1]]}", 422, "sparse[0][2]"},          /* negative */
        {"{\"sparse\":[[0,0,40000]]}", 422, "sparse[0][2]"},       /* huge */
        {"{\"sparse\":[[0,0,30000],[0,0,30000]]}", 422, "sparse[1]"}, /* adds up too high */
        {"{\"sparse\":[[0,0]]}", 400, "sparse[0]"},
        {"{\"sparse\":[[0,0,1.5]]}", 400, "sparse[0][2]"},
        {"{\"sparse\":{}}", 400, "sparse"},
        {"{}", 400, "counts"},
        {"{\"sparse\":[],\"counts\":\"\"}", 400, "counts"},
        {"[1,2]", 400, "body"},
        {"{\"sparse\":[]", 400, "line 1 column 12"},
        {"{\"sparse\":[],\"sparse\":[]}", 400, "line 1 column 21"},
        {"{\"sparse\":[],\"request_id\":\"\"}", 422, "request_id"},
        {"{\"sparse\":[],\"request_id\":7}", 400, "request_id"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.status = 0;
        assert_int_equal(parse(bad[i].json, &b, &e), -1);
        if (e.status != bad[i].status || strcmp(e.where, bad[i].where))
            fail_msg("%s: got %d at '%s' (%s), want %d at '%s'", bad[i].json, e.status, e.where,
                     e.error, bad[i].status, bad[i].where);
    }
}

static void test_route_blocks(void **state)
{
    (void)state;
    route_body b;
    rb_err e;
    const char *ok =
        "{\"sparse\":[[0,0,4],[1,2,3]],\"block_hashes\":[1,\"18446744073709551615\",-1,\"-2\"],"
        "\"cached_blocks\":2,\"block_counts\":[[[0,0,3]],[[1,2,3],[0,0,1]]]}";
    assert_int_equal(parse(ok, &b, &e), 0);
    assert_int_equal(b.n_hashes, 4);
    assert_true(b.hashes[0] == 1);
    assert_true(b.hashes[1] == UINT64_MAX);
    assert_true(b.hashes[2] == UINT64_MAX);          /* -1: two's complement */
    assert_true(b.hashes[3] == UINT64_MAX - 1);
    assert_int_equal(b.cached_blocks, 2);
    assert_int_equal(b.n_block_counts, 2);
    assert_int_equal(b.block_counts[0], 3);
    assert_int_equal(b.block_counts[L * E + 0], 1);
    assert_int_equal(b.block_counts[L * E + E + 2], 3);
    route_body_free(&b);

    static const struct {
        const char *json;
        int status;
        const char *where;
    } bad[] = {
        {"{\"sparse\":[],\"block_hashes\":[1],\"cached_blocks\":2}", 422, "cached_blocks"},
        {"{\"sparse\":[],\"cached_blocks\":-1}", 422, "cached_blocks"},
        {"{\"sparse\":[],\"block_hashes\":[\"18446744073709551616\"]}", 422, "block_hashes[0]"},
        {"{\"sparse\":[],\"block_hashes\":[\"12x\"]}", 422, "block_hashes[0]"},
        {"{\"sparse\":[],\"block_hashes\":[1.5]}", 400, "block_hashes[0]"},
        {"{\"sparse\":[],\"block_hashes\":5}", 400, "block_hashes"},
        /* more computed blocks than hashes after the cached ones */
        {"{\"sparse\":[],\"block_hashes\":[1,2],\"cached_blocks\":1,\"block_counts\":[[],[]]}",
         422, "block_counts"},
        /* a block's counts exceed the computed counts */
        {"{\"sparse\":[[0,0,1]],\"block_hashes\":[1],\"block_counts\":[[[0,0,2]]]}", 422,
         "block_counts"},
        {"{\"sparse\":[],\"block_hashes\":[1],\"block_counts\":[[[9,0,2]]]}", 422,
         "block_counts[0][0][0]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.status = 0;
        assert_int_equal(parse(bad[i].json, &b, &e), -1);
        if (e.status != bad[i].status || strcmp(e.where, bad[i].where))
            fail_msg("%s: got %d at '%s' (%s), want %d at '%s'", bad[i].json, e.status, e.where,
                     e.error, bad[i].status, bad[i].where);
    }
    /* a hash with control characters is quoted on one line */
    assert_int_equal(parse("{\"sparse\":[],\"block_hashes\":[\"12\\n\\t\\u007f3\"]}", &b, &e), -1);
    assert_int_equal(e.status, 422);
    assert_non_null(strstr(e.error, "'12???3'"));
}

/* A gate model's body: "gates", dense (base64 LE float32) or sparse. */
static void test_route_gates(void **state)
{
    (void)state;
    float g[L * E];
    uint8_t raw[4 * L * E];
    for (int i = 0; i < L * E; i++) {
        g[i] = (float)i / 3.0f - 1.0f;   /* negative too: logits are gates */
        uint32_t bits;
        memcpy(&bits, &g[i], 4);
        for (int j = 0; j < 4; j++)
            raw[4 * i + j] = (uint8_t)(bits >> (8 * j));
    }
    char enc[4 * L * E * 2], json[1024];
    b64_encode(raw, sizeof raw, enc);
    snprintf(json, sizeof json, "{\"request_id\":\"g1\",\"gates\":\"%s\"}", enc);
    route_body b;
    rb_err e;
    assert_int_equal(parse(json, &b, &e), 0);
    assert_null(b.counts);
    assert_memory_equal(b.gates, g, sizeof g);
    route_body_free(&b);

    assert_int_equal(parse("{\"gates\":[[0,1,0.5],[1,2,0.25],[0,1,0.25]]}", &b, &e), 0);
    for (int i = 0; i < L * E; i++)
        assert_true(b.gates[i] == (i == 1 ? 0.75f : i == E + 2 ? 0.25f : 0.0f));
    route_body_free(&b);

    static const struct { const char *body, *where, *word; int status; } bad[] = {
        {"{\"gates\":\"AAAA\"}", "gates", "expected L*E*4", 422},
        {"{\"gates\":\"A!AA\"}", "gates", "invalid base64", 400},
        {"{\"gates\":[[0,9,1]]}", "gates[0][1]", "expert 9 outside", 422},
        {"{\"gates\":[[0,1,\"x\"]]}", "gates[0]", "value must be a number", 400},
        {"{\"gates\":[[0,1]]}", "gates[0]", "[layer, expert, value]", 400},
        {"{\"gates\":[[0,1,1e39]]}", "gates[0]", "not finite", 422},
        {"{\"gates\":7}", "gates", "base64 string", 400},
        {"{\"gates\":[],\"counts\":\"AAAA\"}", "gates", "not both", 400},
        {"{\"gates\":[],\"cached_blocks\":0}", "cached_blocks", "keeps counts", 422},
        {"{}", "counts", "or gates", 400},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&e, 0, sizeof e);
        assert_int_equal(parse(bad[i].body, &b, &e), -1);
        if (e.status != bad[i].status || strcmp(e.where, bad[i].where) ||
            !strstr(e.error, bad[i].word))
            fail_msg("%s: got %d at '%s': %s", bad[i].body, e.status, e.where, e.error);
        assert_null(b.gates);
    }
}

static void test_finish_config(void **state)
{
    (void)state;
    char id[RB_ID_MAX];
    rb_err e;
    assert_int_equal(finish_body_parse("{\"request_id\":\"q\"}", 18, id, &e), 0);
    assert_string_equal(id, "q");
    assert_int_equal(finish_body_parse("{}", 2, id, &e), -1);
    assert_int_equal(e.status, 400);
    char long_id[600];
    memset(long_id, 'a', sizeof long_id);
    memcpy(long_id, "{\"request_id\":\"", 15);
    memcpy(long_id + sizeof long_id - 3, "\"}", 3);
    assert_int_equal(finish_body_parse(long_id, strlen(long_id), id, &e), -1);
    assert_int_equal(e.status, 422);
    double tau;
    int pol;
    assert_int_equal(config_body_parse("{\"tau\":0.25}", 12, &tau, &pol, &e), 0);
    assert_true(tau == 0.25);
    assert_int_equal(pol, -1);
    assert_int_equal(config_body_parse("{\"tau\":-1}", 10, &tau, &pol, &e), -1);
    assert_int_equal(e.status, 422);
    assert_int_equal(config_body_parse("{\"tau\":\"x\"}", 11, &tau, &pol, &e), -1);
    assert_int_equal(e.status, 400);
    assert_int_equal(config_body_parse("{\"policy\":\"cost\"}", 17, &tau, &pol, &e), 0);
    assert_true(isnan(tau));
    assert_int_equal(pol, STATE_POLICY_COST);
    assert_int_equal(config_body_parse("{\"policy\":\"fast\"}", 17, &tau, &pol, &e), -1);
    assert_int_equal(e.status, 422);
    assert_string_equal(e.where, "policy");
    assert_int_equal(config_body_parse("{\"policy\":1}", 12, &tau, &pol, &e), -1);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.where, "policy");
    assert_int_equal(config_body_parse("{}", 2, &tau, &pol, &e), -1);
    assert_int_equal(e.status, 400);
}

static void test_kv_events(void **state)
{
    (void)state;
    kv_batch b;
    rb_err e;
    const char *obj =
        "{\"ts\":12.5,\"worker\":\"p1\",\"events\":["
        "{\"type\":\"BlockStored\",\"block_hashes\":[10,11],\"parent_block_hash\":9,"
        "\"token_ids\":[1,2,3,4],\"block_size\":2,\"lora_id\":null,\"medium\":\"GPU\"},"
        "{\"type\":\"BlockRemoved\",\"block_hashes\":[\"11\"],\"medium\":\"GPU\"},"
        "{\"type\":\"AllBlocksCleared\"}]}";
    assert_int_equal(kv_body_parse(obj, strlen(obj), &b, &e), 0);
    assert_string_equal(b.worker, "p1");
    assert_true(b.ts == 12.5);
    assert_int_equal(b.n, 3);
    assert_int_equal(b.events[0].kind, KV_STORED);
    assert_int_equal(b.events[0].n, 2);
    assert_true(b.events[0].has_parent && b.events[0].parent == 9);
    assert_int_equal(b.events[0].block_size, 2);
    assert_int_equal(b.events[0].n_tokens, 4);
    assert_int_equal(b.events[1].kind, KV_REMOVED);
    assert_true(b.events[1].hashes[0] == 11);
    assert_int_equal(b.events[2].kind, KV_CLEARED);
    kv_batch_free(&b);

    /* vLLM's msgspec array_like form: [ts, [tagged events], dp_rank] */
    const char *arr = "[1.0,[[\"BlockStored\",[5],null,[7,8],2,null,\"GPU\"],"
                      "[\"BlockRemoved\",[5],\"GPU\"],[\"AllBlocksCleared\"]],0]";
    assert_int_equal(kv_body_parse(arr, strlen(arr), &b, &e), 0);
    assert_int_equal(b.worker[0], '\0');
    assert_int_equal(b.n, 3);
    assert_int_equal(b.events[0].kind, KV_STORED);
    assert_false(b.events[0].has_parent);
    assert_int_equal(b.events[1].kind, KV_REMOVED);
    assert_int_equal(b.events[2].kind, KV_CLEARED);
    kv_batch_free(&b);

    static const struct {
        const char *json;
        int status;
        const char *where;
    } bad[] = {
        {"{\"events\":[{\"type\":\"BlockMoved\"}]}", 422, "events[0].type"},
        {"{\"events\":[{\"type\":\"BlockRemoved\"}]}", 400, "events[0].block_hashes"},
        {"{\"events\":[{\"type\":\"BlockStored\",\"block_hashes\":[1],\"block_size\":0}]}", 422,
         "events[0].block_size"},
        {"{\"events\":[{\"type\":\"BlockRemoved\",\"block_hashes\":[1]}, 7]}", 400, "events[1]"},
        {"{\"ts\":1}", 400, "events"},
        {"\"x\"", 400, "line 1 column 3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.status = 0;
        assert_int_equal(kv_body_parse(bad[i].json, strlen(bad[i].json), &b, &e), -1);
        if (e.status != bad[i].status || strcmp(e.where, bad[i].where))
            fail_msg("%s: got %d at '%s' (%s), want %d at '%s'", bad[i].json, e.status, e.where,
                     e.error, bad[i].status, bad[i].where);
    }
}

/* The table against a brute-force shadow: random puts and takes over a
 * small key space, so probes collide, runs wrap, and the table grows. */
static void test_idmap_shadow(void **state)
{
    (void)state;
    enum { KEYS = 3000, OPS = 60000 };
    static int shadow[KEYS];
    for (int i = 0; i < KEYS; i++)
        shadow[i] = -1;
    idmap m;
    assert_int_equal(idmap_init(&m), 0);
    rng_t r;
    rng_seed(&r, 11);
    size_t live = 0;
    for (int op = 0; op < OPS; op++) {
        int k = (int)rng_below(&r, KEYS);
        char key[32];
        snprintf(key, sizeof key, "req-%d", k);
        if (rng_below(&r, 2)) {
            int v = (int)rng_below(&r, 16);
            int rc = idmap_put(&m, key, v, (uint64_t)op, 0, NULL);
            assert_int_equal(rc, shadow[k] >= 0 ? 1 : 0);
            if (rc == 0) {
                shadow[k] = v;
                live++;
            }
        } else {
            uint64_t aux;
            assert_int_equal(idmap_take(&m, key, &aux, NULL), shadow[k]);
            if (shadow[k] >= 0)
                live--;
            shadow[k] = -1;
        }
        assert_int_equal(m.n, live);
    }
    for (int k = 0; k < KEYS; k++) {
        char key[32];
        snprintf(key, sizeof key, "req-%d", k);
        assert_int_equal(idmap_get(&m, key), shadow[k]);
    }
    idmap_free(&m);
}

static void test_opts(void **state)
{
    (void)state;
    eldrd_opts o;
    char err[ELDR_ERRLEN];
    char *ok[] = {"eldrd", "-m", "m.h5", "--listen", "0.0.0.0:9000", "--workers", "a,b,c",
                  "--tau", "0.2", "--threads", "4", "--decisions", "10", NULL};
    assert_int_equal(opts_parse(13, ok, &o, err, sizeof err), 0);
    assert_string_equal(o.host, "0.0.0.0");
    assert_int_equal(o.port, 9000);
    assert_int_equal(o.n_workers, 3);
    assert_string_equal(o.workers[2], "c");
    assert_true(o.tau == 0.2);
    assert_int_equal(o.threads, 4);
    assert_int_equal(o.n_prefill, 1);
    assert_string_equal(o.prefill[0], "default");
    opts_free(&o);

    static const char *const bad[][5] = {
        {"eldrd", "-m", "m", "--listen", "nope"},
        {"eldrd", "-m", "m", "--listen", "h:70000"},
        {"eldrd", "-m", "m", "--workers", "a,,b"},
        {"eldrd", "-m", "m", "--workers", "a,b,a"},
        {"eldrd", "-m", "m", "--tau", "-1"},
        {"eldrd", "-m", "m", "--threads", "0"},
        {"eldrd", "-m", "m", "--bogus", "1"},
        {"eldrd", "--tau", "0.1", "--threads", "2"},   /* no model */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(opts_parse(5, (char **)bad[i], &o, err, sizeof err), -1);
        assert_true(strlen(err) > 0 && !strchr(err, '\n'));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64_round_trip), cmocka_unit_test(test_route_dense),
        cmocka_unit_test(test_route_sparse),   cmocka_unit_test(test_route_blocks),
        cmocka_unit_test(test_route_gates),
        cmocka_unit_test(test_finish_config),  cmocka_unit_test(test_kv_events),
        cmocka_unit_test(test_idmap_shadow),   cmocka_unit_test(test_opts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
