/* test_routed.c - the routed-experts decoder of `eldr capture`
 * (src/core/routed.h) and its JSON scanner: every encoding
 * (nested lists, vLLM's base64 object, base64 .npy, SGLang's raw buffer)
 * gives the same ids, rows and token alignment; every malformed answer is
 * refused with one line that says what was found, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/routed.h"
#include "json_scan.h"
#include "b64.h"
#include "err.h"
#include "util_replay.h"

#define FUZZ_NO_MAIN
#include "../fuzz/fuzz_routed.c"

/* The routing used throughout: P prompt tokens, G generated rows, L = 2
 * layers, top-2; token t layer l picks experts (t + l) % 8 and (t + l + 3) % 8. */
#define NL 2
#define NK 2
static int id_at(int t, int l, int j)
{
    return (t + l + 3 * j) % 8;
}

static char body[1 << 16];
static char err[ELDR_ERRLEN];

/* "[[[a,b],[c,d]], ...]" for tokens [t0, t1) */
static char *lists(char *p, int t0, int t1)
{
    p += sprintf(p, "[");
    for (int t = t0; t < t1; t++) {
        p += sprintf(p, "%s[", t > t0 ? "," : "");
        for (int l = 0; l < NL; l++)
            p += sprintf(p, "%s[%d,%d]", l ? "," : "", id_at(t, l, 0), id_at(t, l, 1));
        p += sprintf(p, "]");
    }
    return p + sprintf(p, "]");
}

/* base64 of tokens [t0, t1) as itemsize-byte little-endian integers */
static char *raw_b64(char *p, int t0, int t1, int itemsize)
{
    uint8_t buf[4096];
    size_t n = 0;
    for (int t = t0; t < t1; t++)
        for (int l = 0; l < NL; l++)
            for (int j = 0; j < NK; j++) {
                int v = id_at(t, l, j);
                for (int b = 0; b < itemsize; b++)
                    buf[n++] = (uint8_t)(b < 4 ? v >> (8 * b) : 0);
            }
    b64_encode(buf, n, p);
    return p + strlen(p);
}

/* base64 of a .npy of tokens [t0, t1), descr '<i2' or the like (the
 * digit is the item size), shape (T, NL, NK) or, ndim 2, (T, NL * NK) */
static char *npy_b64(char *p, int t0, int t1, const char *descr, int ndim)
{
    char hdr[128];
    int T = t1 - t0;
    int hl = ndim == 3 ? snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, "
                                  "'shape': (%d, %d, %d), }", descr, T, NL, NK)
                       : snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, "
                                  "'shape': (%d, %d), }", descr, T, NL * NK);
    while ((10 + hl + 1) % 64)
        hdr[hl++] = ' ';
    hdr[hl++] = '\n';
    uint8_t buf[4096];
    size_t n = 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)hl;
    buf[9] = 0;
    memcpy(buf + 10, hdr, (size_t)hl);
    n = 10 + (size_t)hl;
    for (int t = t0; t < t1; t++)
        for (int l = 0; l < NL; l++)
            for (int j = 0; j < NK; j++) {
                buf[n++] = (uint8_t)id_at(t, l, j);
                for (int b = 1; b < descr[2] - '0'; b++)
                    buf[n++] = 0;
            }
    b64_encode(buf, n, p);
    return p + strlen(p);
}

static int decode(const char *b, const routed_hint *h, routed_t *r)
{
    routed_hint none = {0};
    err[0] = 0;
    return routed_decode(b, strlen(b), h ? h : &none, r, err, sizeof err);
}

/* r holds P prompt rows then D = C - 1 decode rows of the routing above. */
static void expect_routes(const routed_t *r, int P, int C)
{
    assert_int_equal(r->L, NL);
    assert_int_equal(r->k, NK);
    assert_int_equal(r->prompt_tokens, P);
    assert_int_equal(r->completion_tokens, C);
    assert_int_equal(r->decode_rows, C > 0 ? C - 1 : 0);
    for (int t = 0; t < P + (C > 0 ? C - 1 : 0); t++)
        for (int l = 0; l < NL; l++)
            for (int j = 0; j < NK; j++)
                assert_int_equal(r->ids[(t * NL + l) * NK + j], id_at(t, l, j));
    int max = -1;
    for (int t = 0; t < P + (C > 0 ? C - 1 : 0); t++)
        for (int l = 0; l < NL; l++)
            for (int j = 0; j < NK; j++)
                max = id_at(t, l, j) > max ? id_at(t, l, j) : max;
    assert_int_equal(r->max_id, max);
}

/* vLLM: prompt_routed_experts + choices[0].routed_experts with gen rows */
static char *vllm_two(int P, int C, int G, const char *kind)
{
    char *p = body + sprintf(body, "{\"id\":\"x\",\"usage\":{\"prompt_tokens\":%d,"
                             "\"completion_tokens\":%d},\"prompt_routed_experts\":", P, C);
    if (!strcmp(kind, "lists"))
        p = lists(p, 0, P);
    else {
        p += sprintf(p, "{\"encoding\":\"base64\",\"dtype\":\"int16\",\"shape\":[%d,%d,%d],"
                     "\"data\":\"", P, NL, NK);
        p = raw_b64(p, 0, P, 2);
        p += sprintf(p, "\"}");
    }
    p += sprintf(p, ",\"choices\":[{\"index\":0,\"text\":\"a \\\"q\\\" \\u00e9\","
                 "\"routed_experts\":");
    if (!strcmp(kind, "lists"))
        p = lists(p, P, P + G);
    else {
        p += sprintf(p, "{\"dtype\":\"torch.int16\",\"shape\":[%d,%d,%d],\"data\":\"", G, NL, NK);
        p = raw_b64(p, P, P + G, 2);
        p += sprintf(p, "\"}");
    }
    sprintf(p, "}],\"model\":\"m\"}");
    return body;
}

static void vllm_lists_and_object(void **state)
{
    (void)state;
    const char *kinds[] = {"lists", "object"};
    for (int i = 0; i < 2; i++)
        for (int G = 4; G <= 5; G++) {  /* C rows (last one dropped) or C - 1 */
            routed_t r;
            assert_int_equal(decode(vllm_two(3, 5, G, kinds[i]), NULL, &r), 0);
            expect_routes(&r, 3, 5);
            assert_string_equal(r.encoding, i ? "base64" : "json");
            routed_free(&r);
        }
}

static void vllm_one_token(void **state)
{
    (void)state;
    routed_t r;
    /* one generated token: nothing is fed forward, no decode rows */
    assert_int_equal(decode(vllm_two(2, 1, 1, "lists"), NULL, &r), 0);
    expect_routes(&r, 2, 1);
    routed_free(&r);
    assert_int_equal(decode(vllm_two(2, 1, 0, "lists"), NULL, &r), 0);
    expect_routes(&r, 2, 1);
    routed_free(&r);
}

static void vllm_npy_whole_sequence(void **state)
{
    (void)state;
    routed_t r;
    for (int T = 6; T <= 7; T++) {  /* P + C or P + C - 1 rows */
        char *p = body + sprintf(body, "{\"choices\":[{\"routed_experts\":\"");
        p = npy_b64(p, 0, T, "<i2", 3);
        sprintf(p, "\"}],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}");
        assert_int_equal(decode(body, NULL, &r), 0);
        expect_routes(&r, 4, 3);
        assert_string_equal(r.encoding, "npy");
        routed_free(&r);
    }
}

/* body = head + base64 of tokens [0, 7) as itemsize-byte ids + tail */
static void sgl_body(const char *head, int itemsize, const char *tail)
{
    char *p = body + sprintf(body, "%s", head);
    p = raw_b64(p, 0, 7, itemsize);
    sprintf(p, "%s", tail);
}

static void sglang_raw(void **state)
{
    (void)state;
    routed_hint h = {.L = NL, .k = NK, .from = "--layers/--top-k"};
    routed_t r;
    const int sizes[] = {4, 2, 1, 8};
    const char *names[] = {"raw-int32", "raw-uint16", "raw-uint8", "raw-int64"};
    for (int i = 0; i < 4; i++) {
        char *p = body + sprintf(body, "{\"text\":\"x\",\"meta_info\":{\"routed_experts\":\"");
        p = raw_b64(p, 0, 5 + 3 - 1, sizes[i]);
        sprintf(p, "\",\"prompt_tokens\":5,\"completion_tokens\":3,\"id\":\"q\"}}");
        assert_int_equal(decode(body, &h, &r), 0);
        expect_routes(&r, 5, 3);
        assert_string_equal(r.encoding, names[i]);
        routed_free(&r);
    }
    /* no geometry: refused, asking for it */
    sgl_body("{\"meta_info\":{\"prompt_tokens\":5,\"completion_tokens\":3,\"routed_experts\":\"",
             4, "\"}}");
    assert_int_equal(decode(body, NULL, &r), -1);
    assert_non_null(strstr(err, "give --layers and --top-k"));
    /* a byte length that fits no item size */
    h.L = 3;
    assert_int_equal(decode(body, &h, &r), -1);
    assert_non_null(strstr(err, "inconsistent shapes"));
    /* SGLang's OpenAI endpoints: the response-level sglext (counts in usage),
     * and choices[0].meta_info with return_meta_info (counts beside it) */
    h.L = NL;
    sgl_body("{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\"}}],"
             "\"sglext\":{\"routed_experts\":\"", 4,
             "\"},\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3}}");
    assert_int_equal(decode(body, &h, &r), 0);
    expect_routes(&r, 5, 3);
    routed_free(&r);
    sgl_body("{\"choices\":[{\"index\":0,\"meta_info\":{\"prompt_tokens\":5,"
             "\"completion_tokens\":3,\"routed_experts\":\"", 2,
             "\"}}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":9}}");
    assert_int_equal(decode(body, &h, &r), 0);
    expect_routes(&r, 5, 3);
    assert_string_equal(r.encoding, "raw-uint16");
    routed_free(&r);
    /* choices[0].sgl_ext is written by no SGLang: not read */
    sgl_body("{\"choices\":[{\"sgl_ext\":{\"routed_experts\":\"", 4,
             "\"}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3}}");
    assert_int_equal(decode(body, &h, &r), -1);
    assert_non_null(strstr(err, ROUTED_NO_ROUTES_HINT));
}

/* vLLM 0.21 with prefix caching: prompt rows served from the cache are -1
 * throughout; they leave the prompt and are counted, unless require_full.
 * A -1 in a row that has routing, or in a decode row, is refused. */
/* routed_counts against a brute force over the ids, with and without a
 * layer mask; the prompt rows' counts keep the trace's conservation
 * (each layer sums to tokens x k); ids past E and rows past the answer
 * are refused. */
static void counts_of_rows(void **state)
{
    (void)state;
    routed_t r;
    char *p = body + sprintf(body, "{\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":4},"
                             "\"choices\":[{\"routed_experts\":\"");
    p = npy_b64(p, 0, 10, "<u2", 3);
    sprintf(p, "\"}]}");
    assert_int_equal(decode(body, NULL, &r), 0);
    expect_routes(&r, 7, 4);
    uint16_t c[NL * 8], want[NL * 8];
    for (int row0 = 0; row0 < 3; row0++) {
        int n = 7 - row0;
        assert_int_equal(routed_counts(&r, row0, n, NULL, 8, c, err, sizeof err), 0);
        memset(want, 0, sizeof want);
        for (int t = row0; t < row0 + n; t++)
            for (int l = 0; l < NL; l++)
                for (int j = 0; j < NK; j++)
                    want[l * 8 + id_at(t, l, j)]++;
        assert_memory_equal(c, want, sizeof want);
        for (int l = 0; l < NL; l++) {
            int sum = 0;
            for (int e = 0; e < 8; e++)
                sum += c[l * 8 + e];
            assert_int_equal(sum, n * NK);
        }
    }
    const uint8_t keep[NL] = {0, 1};
    assert_int_equal(routed_counts(&r, 0, 7, keep, 8, c, err, sizeof err), 0);
    assert_int_equal(routed_counts(&r, 0, 7, NULL, 8, want, err, sizeof err), 0);
    assert_memory_equal(c, want + 8, 8 * sizeof *c);
    assert_int_equal(routed_counts(&r, 0, 7, NULL, 5, c, err, sizeof err), -1);
    assert_non_null(strstr(err, "but the model has 5 experts"));
    assert_int_equal(routed_counts(&r, 8, 5, NULL, 8, c, err, sizeof err), -1);
    assert_non_null(strstr(err, "outside the answer's 10 rows"));
    routed_free(&r);
}

/* vLLM's capturer leaves a dense layer's rows 0: the layer is found and
 * its zeros are not "expert 0 picked twice"; a routed layer's duplicate
 * still is. */
static void dense_layer_rows(void **state)
{
    (void)state;
    routed_t r;
    snprintf(body, sizeof body, "{\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1},"
             "\"choices\":[{\"routed_experts\":[[[0,0],[3,4]],[[0,0],[5,1]]]}]}");
    assert_int_equal(decode(body, NULL, &r), 0);
    uint8_t dense[2];
    assert_int_equal(routed_dense_layers(&r, dense), 1);
    assert_int_equal(dense[0], 1);
    assert_int_equal(dense[1], 0);
    assert_int_equal(r.max_id, 5);
    routed_free(&r);
    /* one row of the layer routed: the zeros of the other are a duplicate */
    snprintf(body, sizeof body, "{\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1},"
             "\"choices\":[{\"routed_experts\":[[[0,0],[3,4]],[[2,6],[5,1]]]}]}");
    assert_int_equal(decode(body, NULL, &r), -1);
    assert_non_null(strstr(err, "prompt token 0 layer 0: expert 0 picked twice"));
}

/* Top-8 rows take the SIMD pair check (routed.c, distinct8): every
 * position of a duplicate is found, ids past 255 too, and a row of 8
 * distinct ids passes; checked against the pairs by brute force. */
static void top8_duplicates(void **state)
{
    (void)state;
    routed_t r;
    for (int i = 0; i < 8; i++)
        for (int j = i + 1; j < 8; j++)
            for (int big = 0; big < 2; big++) {
                int ids[8];
                for (int a = 0; a < 8; a++)
                    ids[a] = a * 3 + (big ? 300 : 1);
                ids[j] = ids[i];
                snprintf(body, sizeof body, "{\"usage\":{\"prompt_tokens\":1,"
                         "\"completion_tokens\":1},\"choices\":[{\"routed_experts\":"
                         "[[[1,2,3,4,5,6,7,8],[%d,%d,%d,%d,%d,%d,%d,%d]]]}]}", ids[0], ids[1],
                         ids[2], ids[3], ids[4], ids[5], ids[6], ids[7]);
                assert_int_equal(decode(body, NULL, &r), -1);
                char want[64];
                snprintf(want, sizeof want, "layer 1: expert %d picked twice", ids[i]);
                assert_non_null(strstr(err, want));
            }
    snprintf(body, sizeof body, "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1},"
             "\"choices\":[{\"routed_experts\":[[[8,7,6,5,4,3,2,1],[0,9,300,301,65535,12,"
             "13,14]]]}]}");
    assert_int_equal(decode(body, NULL, &r), 0);
    assert_int_equal(r.max_id, 65535);
    routed_free(&r);
}

static void vllm_prefix_cache_rows(void **state)
{
    (void)state;
    routed_t r;
    const char *gen = "\"choices\":[{\"routed_experts\":[[[1,2],[3,4]],[[5,6],[7,0]]]}]";
    /* P 3 (rows 0, 1 cached), C 2 */
    snprintf(body, sizeof body, "{\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2},"
             "\"prompt_routed_experts\":[[[-1,-1],[-1,-1]],[[-1,-1],[-1,-1]],[[4,5],[6,7]]],%s}",
             gen);
    assert_int_equal(decode(body, NULL, &r), 0);
    assert_int_equal(r.prompt_tokens, 1);
    assert_int_equal(r.unrouted, 2);
    assert_int_equal(r.unrouted_lead, 2);
    assert_int_equal(r.decode_rows, 1);
    const int want[8] = {4, 5, 6, 7, 1, 2, 3, 4};
    for (int i = 0; i < 8; i++)
        assert_int_equal(r.ids[i], want[i]);
    assert_int_equal(r.max_id, 7);
    routed_free(&r);
    routed_hint full = {.require_full = 1};
    assert_int_equal(decode(body, &full, &r), -1);
    assert_non_null(strstr(err, "prompt_routed_experts token 0 layer 0: expert id -1"));
    /* a -1 beside routed ids: not a cached row */
    snprintf(body, sizeof body, "{\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":2},"
             "\"prompt_routed_experts\":[[[4,5],[6,7]],[[-1,-1],[6,7]]],%s}", gen);
    assert_int_equal(decode(body, NULL, &r), -1);
    assert_non_null(strstr(err, "prompt token 1 layer 0: expert id -1 in a token that has "
                            "routing in other layers"));
    /* a -1 in a generated row */
    snprintf(body, sizeof body, "{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2},"
             "\"prompt_routed_experts\":[[[4,5],[6,7]]],\"choices\":[{\"routed_experts\":"
             "[[[-1,-1],[-1,-1]],[[5,6],[7,0]]]}]}");
    assert_int_equal(decode(body, NULL, &r), -1);
    assert_non_null(strstr(err, "choices[0].routed_experts token 0 layer 0: expert id -1"));
    /* a whole-sequence int32 .npy can carry them too: its prompt rows only */
    uint8_t raw[256];
    const char *hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 1, 2), }";
    int hl = (int)strlen(hdr);
    size_t n = 0;
    memcpy(raw, "\x93NUMPY\x01\x00", 8);
    int pad = 64 - (10 + hl + 1) % 64;
    raw[8] = (uint8_t)(hl + pad + 1);
    raw[9] = 0;
    memcpy(raw + 10, hdr, (size_t)hl);
    n = 10 + (size_t)hl;
    memset(raw + n, ' ', (size_t)pad);
    n += (size_t)pad;
    raw[n++] = '\n';
    const int32_t v[6] = {-1, -1, 3, 4, 5, 6};
    memcpy(raw + n, v, sizeof v);
    n += sizeof v;
    char b64[400];
    b64_encode(raw, n, b64);
    snprintf(body, sizeof body, "{\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":2},"
             "\"choices\":[{\"routed_experts\":\"%s\"}]}", b64);
    assert_int_equal(decode(body, NULL, &r), 0);
    assert_int_equal(r.prompt_tokens, 1);
    assert_int_equal(r.unrouted, 1);
    assert_int_equal(r.decode_rows, 1);
    assert_int_equal(r.ids[0], 3);
    assert_int_equal(r.ids[3], 6);
    routed_free(&r);
}

/* body = a /generate answer: P, C, the bytes as base64, dtype named or not */
static void meta_body(const uint8_t *bytes, size_t n, int P, int C, const char *dtype)
{
    char b64[64], named[64] = "";
    b64_encode(bytes, n, b64);
    if (dtype)
        snprintf(named, sizeof named, "\"routed_experts_dtype\":\"%s\",", dtype);
    snprintf(body, sizeof body, "{\"meta_info\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,"
             "%s\"routed_experts\":\"%s\"}}", P, C, named, b64);
}

/* SGLang's narrow wire types are unsigned: uint8 ids up to 255, uint16 ids
 * up to 65,535; a dtype the answer names is taken as named. */
static void sglang_unsigned(void **state)
{
    (void)state;
    routed_hint h = {.L = 1, .k = 2, .from = "--layers/--top-k"};
    routed_t r;
    uint8_t raw[16];
    /* 2 tokens (P 2, C 1) x 1 layer x top-2, uint8: 200, 129 / 255, 0 */
    const uint8_t u8[4] = {200, 129, 255, 0};
    meta_body(u8, 4, 2, 1, NULL);
    assert_int_equal(decode(body, &h, &r), 0);
    assert_int_equal(r.ids[0], 200);
    assert_int_equal(r.ids[1], 129);
    assert_int_equal(r.ids[2], 255);
    assert_int_equal(r.max_id, 255);
    assert_string_equal(r.encoding, "raw-uint8");
    routed_free(&r);
    /* uint16: 65535 and 40000 */
    const uint16_t u16[4] = {65535, 40000, 1, 2};
    for (int i = 0; i < 4; i++)
        raw[2 * i] = (uint8_t)u16[i], raw[2 * i + 1] = (uint8_t)(u16[i] >> 8);
    meta_body(raw, 8, 2, 1, NULL);
    assert_int_equal(decode(body, &h, &r), 0);
    assert_int_equal(r.ids[0], 65535);
    assert_int_equal(r.ids[1], 40000);
    assert_int_equal(r.max_id, 65535);
    routed_free(&r);
    /* named: 8 bytes as "uint8" are 8 ids = 4 tokens, not 2 tokens of uint16 */
    const uint8_t u8b[8] = {1, 2, 3, 4, 5, 6, 7, 9};
    meta_body(u8b, 8, 3, 2, "uint8");
    assert_int_equal(decode(body, &h, &r), 0);
    assert_int_equal(r.ids[0], 1);
    assert_int_equal(r.ids[7], 9);
    assert_int_equal(r.prompt_tokens + r.decode_rows, 4);
    assert_string_equal(r.encoding, "raw");
    routed_free(&r);
    meta_body(u8b, 8, 2, 1, "uint8");
    assert_int_equal(decode(body, &h, &r), -1);
    assert_non_null(strstr(err, "of 1-byte ids (its routed_experts_dtype; inconsistent shapes)"));
    meta_body(u8b, 8, 2, 1, "float32");
    assert_int_equal(decode(body, &h, &r), -1);
    assert_non_null(strstr(err, "routed_experts_dtype \"float32\" is not"));
    /* above --experts: named, where */
    h.E = 256;
    assert_int_equal(decode("{\"meta_info\":{\"prompt_tokens\":2,\"completion_tokens\":1,"
                            "\"routed_experts\":\"//9AnAEAAgA=\"}}", &h, &r), -1);
    assert_non_null(strstr(err, "meta_info.routed_experts token 0 layer 0: expert id 65535 is "
                            "not below 256"));
}

/* body must be refused with a message holding want. */
static void refused(const char *b, const routed_hint *h, const char *want)
{
    routed_t r;
    if (decode(b, h, &r) != -1)
        fail_msg("accepted: %s", b);
    assert_null(r.ids);
    if (!strstr(err, want))
        fail_msg("message '%s' lacks '%s' (body %.80s)", err, want, b);
    assert_null(strchr(err, '\n'));
}

static void malformed(void **state)
{
    (void)state;
    routed_hint h3 = {.L = 3, .k = NK, .from = "--layers/--top-k"}, e4 = {.E = 4};
    const char *u = "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}";
    char b[512];
    refused("[1,2]", NULL, "not a JSON object: [1,2]");
    refused("{\"choices\":[{\"routed_experts\":[[[1,2]]]}", NULL, "not valid JSON");
    refused("{\"choices\":[],}", NULL, "not valid JSON");
    refused("{\"choices\":[{\"text\":\"x\"}]}", NULL, ROUTED_NO_ROUTES_HINT);
    refused("{\"choices\":[{\"routed_experts\":null}]}", NULL, ROUTED_NO_ROUTES_HINT);
    refused("{\"choices\":[{\"routed_experts\":[[[1,2]]]}]}", NULL, "no usage.prompt_tokens");
#define BAD(routes, hint, want)                                                            \
    do {                                                                                   \
        snprintf(b, sizeof b, "{%s,\"choices\":[{\"routed_experts\":%s}]}", u, routes);   \
        refused(b, hint, want);                                                            \
    } while (0)
    BAD("[[[1,2],[3,4]],[[1,2],[3]]]", NULL, "token 1 layer 1: 1 ids, expected 2");
    BAD("[[[1,2],[3,4]],[[1,2]]]", NULL, "token 1: 1 layers, expected 2");
    BAD("[[[1,2],[3,4]],[[1,2],[3,4],[5,6]]]", NULL, "more than 2 layers");
    BAD("[[[1,2],[3,4,5]],[[1,2],[3,4]]]", NULL, "token 0 layer 1: 3 ids, layer 0 has 2");
    BAD("[[[1,2.5],[3,4]],[[1,2],[3,4]]]", NULL, "not an integer id");
    BAD("[[[1,\"2\"],[3,4]],[[1,2],[3,4]]]", NULL, "not an integer id");
    BAD("[[[1,-1],[3,4]],[[1,2],[3,4]]]", NULL, "expert id -1");
    BAD("[[[1,2],[3,4]],[[1,2],[3,70000]]]", NULL, "expert id 70000 is not below 65536");
    BAD("[[[1,2],[3,4]],[[1,2],[3,4]]]", &e4, "expert id 4 is not below 4 (--experts)");
    BAD("[[[1,1],[3,4]],[[1,2],[3,4]]]", NULL, "expert 1 picked twice");
    BAD("[[[1,2],[3,4]],[[1,2],[3,4]]]", &h3, "2 layers x top-2, but --layers/--top-k says 3");
    BAD("[[[1,2],[3,4]]]", NULL, "has 1 tokens; 1 prompt + 2 completion tokens make 2 (or 3)");
    BAD("[[[]]]", NULL, "not a routing shape");
    BAD("[[[1,2],[3,4]],[1,2]]", NULL, "token 1 layer 0: not a list of ids");
    BAD("42", NULL, "found 42, not routed experts");
    BAD("true", NULL, "found true");
    BAD("\"hello, world\"", NULL, "found \"hello, world\", not base64");
    BAD("\"aGVsbG8=\"", NULL, "give --layers and --top-k");
    BAD("{\"encoding\":\"hex\",\"dtype\":\"int16\",\"shape\":[3,1,1],\"data\":\"AAAA\"}", NULL,
        "encoding \"hex\"");
    BAD("{\"dtype\":\"float32\",\"shape\":[3,1,1],\"data\":\"AAAA\"}", NULL,
        "dtype \"float32\" is not an integer type");
    BAD("{\"dtype\":\"int16\",\"shape\":[3,1],\"data\":\"AAAA\"}", NULL, "shape has 2 sizes");
    BAD("{\"dtype\":\"int16\",\"shape\":[3,1,1,1],\"data\":\"AAAA\"}", NULL, "is not 3 sizes");
    BAD("{\"dtype\":\"int16\",\"shape\":[3,1,1],\"data\":\"AAAA\"}", NULL,
        "needs 6 bytes, data has 3");
    BAD("{\"dtype\":\"int16\",\"shape\":[3,1,1]}", NULL, "without \"data\"");
    BAD("{\"dtype\":\"int16\",\"shape\":[3,1,1],\"data\":\"A!AA\"}", NULL, "not base64");
    BAD("{\"dtype\":\"int16\",\"shape\":[9223372036854775807,4096,4096],\"data\":\"AAAA\"}",
        NULL, "inconsistent shapes");
#undef BAD
    /* a .npy that is not integers, or not 3-D */
    char *p = b + sprintf(b, "{%s,\"choices\":[{\"routed_experts\":\"", u);
    p = npy_b64(p, 0, 3, "<f4", 3);
    sprintf(p, "\"}]}");
    refused(b, NULL, "base64 .npy of dtype '<f4'");
    p = b + sprintf(b, "{%s,\"choices\":[{\"routed_experts\":\"", u);
    p = npy_b64(p, 0, 3, "<i2", 2);
    sprintf(p, "\"}]}");
    refused(b, NULL, "base64 .npy of shape (3, 4)");
    /* prompt and generation disagree */
    refused("{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2},"
            "\"prompt_routed_experts\":[[[1,2],[3,4]]],"
            "\"choices\":[{\"routed_experts\":[[[1,2]],[[1,2]]]}]}", NULL,
            "1 layers x top-2, but prompt_routed_experts says 2");
    refused("{\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":2},"
            "\"prompt_routed_experts\":[[[1,2],[3,4]]],"
            "\"choices\":[{\"routed_experts\":[[[1,2],[3,4]]]}]}", NULL,
            "usage.prompt_tokens says 2");
    refused("{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":5},"
            "\"prompt_routed_experts\":[[[1,2],[3,4]]],"
            "\"choices\":[{\"routed_experts\":[[[1,2],[3,4]]]}]}", NULL,
            "1 tokens for 5 completion tokens");
}

static void deep_and_truncated(void **state)
{
    (void)state;
    /* nesting far beyond the scanner's bound, in a field that is skipped */
    char *p = body + sprintf(body, "{\"x\":");
    for (int i = 0; i < 5000; i++)
        *p++ = '[';
    for (int i = 0; i < 5000; i++)
        *p++ = ']';
    sprintf(p, "}");
    refused(body, NULL, "not valid JSON");
    /* every prefix of a good answer is refused cleanly */
    vllm_two(3, 5, 5, "object");
    size_t n = strlen(body);
    for (size_t cut = 0; cut < n; cut += 7) {
        routed_t r;
        char save = body[cut];
        body[cut] = 0;
        assert_int_equal(decode(body, NULL, &r), -1);
        assert_true(err[0] != 0);
        body[cut] = save;
    }
}

static void scanner(void **state)
{
    (void)state;
    const char *t = " {\"a\\\"b\": \"x\\u00e9\\n\", \"c\": [1, -2, 3e5, {\"d\": null}], \"e\": true} ";
    cj_t s;
    cj_init(&s, t, strlen(t));
    int n = 0;
    const char *k, *v;
    size_t kl, vl;
    assert_int_equal(cj_expect(&s, '{'), 0);
    assert_int_equal(cj_next_key(&s, &n, &k, &kl), 1);
    assert_int_equal(kl, 4);
    assert_int_equal(cj_string(&s, &v, &vl), 0);
    assert_int_equal(vl, 9);
    assert_int_equal(cj_next_key(&s, &n, &k, &kl), 1);
    assert_true(cj_key_is(k, kl, "c"));
    assert_int_equal(cj_skip(&s), 0);
    assert_int_equal(cj_next_key(&s, &n, &k, &kl), 1);
    assert_int_equal(cj_skip(&s), 0);
    assert_int_equal(cj_next_key(&s, &n, &k, &kl), 0);
    assert_int_equal(cj_peek(&s), -1);
    const char *bad[] = {"\"a\\x\"", "\"a", "[1,]", "[1 2]", "01", "-", "1.", "tru", "{\"a\" 1}",
                         "\"\x01\"", "1e", "\"\\u12g4\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cj_init(&s, bad[i], strlen(bad[i]));
        int rc = cj_skip(&s);
        if (rc == 0 && cj_peek(&s) == -1)
            fail_msg("accepted '%s'", bad[i]);
    }
    int64_t v64;
    cj_init(&s, "9223372036854775807", 19);
    assert_int_equal(cj_int(&s, &v64), 0);
    assert_true(v64 == INT64_MAX);
    cj_init(&s, "9223372036854775808", 19);
    assert_int_equal(cj_int(&s, &v64), -1);
    cj_init(&s, "-9223372036854775808", 20);
    assert_int_equal(cj_int(&s, &v64), 0);
    assert_true(v64 == INT64_MIN);
}

/* The harness's corpus (tests/fuzz/corpus/routed) through its checks;
 * the seeds themselves decode (they are meant to reach deep). */
static void fuzz_corpus(void **state)
{
    (void)state;
    assert_true(corpus_replay("routed", fuzz_routed_one) >= 5);
    const char *seeds[] = {"vllm_lists", "vllm_object", "vllm_npy", "sglang_raw", "sglang_openai"};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/fuzz/corpus/routed/%s", seeds[i]);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        size_t n = fread(body, 1, sizeof body - 1, f);
        fclose(f);
        routed_hint h = {0};
        if (body[0] & 1)
            h.L = 1 + (body[0] >> 1 & 3);
        if (body[0] & 8)
            h.k = 1 + (body[0] >> 4 & 3);
        routed_t r;
        if (routed_decode(body + 1, n - 1, &h, &r, err, sizeof err) < 0)
            fail_msg("seed %s refused: %s", seeds[i], err);
        expect_routes(&r, 3, 3);
        routed_free(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vllm_lists_and_object), cmocka_unit_test(vllm_one_token),
        cmocka_unit_test(vllm_npy_whole_sequence), cmocka_unit_test(sglang_raw),
        cmocka_unit_test(sglang_unsigned),
        cmocka_unit_test(vllm_prefix_cache_rows), cmocka_unit_test(counts_of_rows),
        cmocka_unit_test(dense_layer_rows), cmocka_unit_test(top8_duplicates),
        cmocka_unit_test(malformed), cmocka_unit_test(deep_and_truncated),
        cmocka_unit_test(scanner), cmocka_unit_test(fuzz_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
