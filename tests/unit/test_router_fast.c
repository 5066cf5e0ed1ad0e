/* test_router_fast.c - eldrd's fast paths against their slow twins:
 * the base64 decoders (vector and table-driven) against a bit-by-bit
 * reference, the
 * jansson-free route and finish body parsers (body_fast.h) against the
 * jansson path on a corpus of valid and malformed bodies (escapes,
 * whitespace, key order, duplicate keys, unicode, control bytes, every
 * truncation) and on random mutations of it, and the direct route and
 * finish answers (answer.h) against json_dumps, byte for byte, and
 * their number formatting (g9.h) against printf's "%.9g"; and the
 * window of the routing state, which takes signatures by pointer swap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "b64.h"
#include "body.h"
#include "body_fast.h"
#include "g9.h"
#include "json_scan.h"
#include "window_stream.h"
#include <jansson.h>
#include "rng.h"

/* ---- base64 ---- */

/* The decoder as it was before the table: one character at a time. */
static int ref_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

static int ref_decode(const char *src, size_t n, uint8_t *out, size_t *outlen, size_t *bad_at)
{
    size_t body = n;
    if (n % 4 == 0) {
        if (body > 0 && src[body - 1] == '=')
            body--;
        if (body > 0 && src[body - 1] == '=')
            body--;
    }
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < body; i++) {
        int v = ref_value((unsigned char)src[i]);
        if (v < 0) {
            *bad_at = i;
            return -1;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (body % 4 == 1) {
        *bad_at = body - 1;
        return -1;
    }
    *outlen = o;
    return 0;
}

/* b64_decode (the vector path where the CPU has it), b64_decode_scalar
 * and the reference agree: bytes, length, or the offending offset. */
static void check_b64_same(const char *s, size_t n)
{
    enum { MAXB = 1200 };
    assert_true(n <= 4 * MAXB / 3);
    uint8_t a[MAXB], b[MAXB], c[MAXB];
    size_t alen = 0, blen = 0, clen = 0, abad = 0, bbad = 0, cbad = 0;
    int ra = b64_decode(s, n, a, &alen, &abad), rb = ref_decode(s, n, b, &blen, &bbad);
    int rc = b64_decode_scalar(s, n, c, &clen, &cbad);
    assert_int_equal(ra, rb);
    assert_int_equal(rc, rb);
    if (ra == 0) {
        assert_int_equal(alen, blen);
        assert_int_equal(clen, blen);
        assert_memory_equal(a, b, alen);
        assert_memory_equal(c, b, clen);
        assert_int_equal(b64_decoded_len(s, n), alen);
    } else {
        assert_int_equal(abad, bbad);
        assert_int_equal(cbad, bbad);
    }
    if (b64_decoded_len(s, n) == (size_t)-1)
        assert_int_equal(ra, -1);
}

static void test_b64_table_against_reference(void **state)
{
    (void)state;
    /* every byte value in every position of a quad, and as a lone tail */
    for (int c = 0; c < 256; c++)
        for (int pos = 0; pos < 4; pos++) {
            char q[8] = "QUJD";
            q[pos] = (char)c;
            check_b64_same(q, 4);
            memcpy(q, "QUJDRA", 6);
            q[4 + pos % 2] = (char)c;
            check_b64_same(q, 6);
        }
    /* random strings over a mixed alphabet, every length to 64 */
    static const char pool[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                               "+/====== \n\\\"-_.\x80\xff";
    rng_t r;
    rng_seed(&r, 11);
    for (int it = 0; it < 20000; it++) {
        char s[64];
        size_t n = rng_below(&r, 64);
        int clean = rng_below(&r, 2);
        for (size_t i = 0; i < n; i++)
            s[i] = pool[rng_below(&r, clean ? 64 : sizeof pool - 1)];
        check_b64_same(s, n);
    }
    /* the vector path decodes 16 characters a block: every byte value in
     * every position of the first two blocks of a 40-character string */
    for (int c = 0; c < 256; c++)
        for (int pos = 0; pos < 32; pos++) {
            char q[41] = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNk";
            q[pos] = (char)c;
            check_b64_same(q, 40);
        }
    /* long text as engines send it (a few kilobytes of counts), padded or
     * not, with one or two odd characters anywhere or a length no bytes
     * have */
    static const char odd[] = {' ', '\n', '=', '-', '_', '.', ':', '@', '[', '`', '{', '\0',
                               (char)0x80, (char)0xc3, (char)0xff, '*', ',', '%'};
    for (int it = 0; it < 5000; it++) {
        uint8_t raw[900];
        char enc[1204];
        size_t n = rng_below(&r, sizeof raw);
        for (size_t i = 0; i < n; i++)
            raw[i] = (uint8_t)rng_below(&r, 256);
        b64_encode(raw, n, enc);
        size_t len = strlen(enc);
        if (rng_below(&r, 2))
            while (len && enc[len - 1] == '=')
                len--;
        int flips = (int)rng_below(&r, 3);
        for (int f = 0; f < flips && len; f++)
            enc[rng_below(&r, len)] = odd[rng_below(&r, sizeof odd)];
        if (rng_below(&r, 8) == 0 && len)
            len -= 1 + rng_below(&r, len < 3 ? len : 3);
        check_b64_same(enc, len);
    }
}

/* ---- route and finish bodies ---- */

#define ML 3
#define ME 5

/* base64 of n int16 LE values */
static void enc_counts(const int16_t *v, size_t n, char *out)
{
    uint8_t raw[2 * 64];
    for (size_t i = 0; i < n; i++) {
        raw[2 * i] = (uint8_t)((uint16_t)v[i] & 0xff);
        raw[2 * i + 1] = (uint8_t)((uint16_t)v[i] >> 8);
    }
    b64_encode(raw, 2 * n, out);
}

static void same_body(const route_body *a, const route_body *b, size_t cells)
{
    assert_string_equal(a->request_id, b->request_id);
    assert_string_equal(a->prefill_worker, b->prefill_worker);
    assert_int_equal(!a->counts, !b->counts);
    assert_int_equal(!a->gates, !b->gates);
    if (a->counts)
        assert_memory_equal(a->counts, b->counts, cells * sizeof *a->counts);
    if (a->gates)
        assert_memory_equal(a->gates, b->gates, cells * sizeof *a->gates);
    assert_int_equal(a->n_hashes, b->n_hashes);
    assert_int_equal(a->cached_blocks, b->cached_blocks);
    assert_int_equal(a->n_block_counts, b->n_block_counts);
    if (a->n_hashes)
        assert_memory_equal(a->hashes, b->hashes, (size_t)a->n_hashes * sizeof *a->hashes);
    if (a->n_block_counts)
        assert_memory_equal(a->block_counts, b->block_counts,
                            (size_t)a->n_block_counts * cells * sizeof *a->block_counts);
}

/* route_body_parse (fast path first) and the jansson path agree: same
 * result, same struct or same error. Returns whether the fast path took
 * the body. */
static int route_agree(const char *text, size_t len, int L, int E)
{
    route_body a, b, f;
    rb_err ea, eb;
    memset(&ea, 0, sizeof ea);
    memset(&eb, 0, sizeof eb);
    int ra = route_body_parse(text, len, L, E, &a, &ea);
    int rb = route_body_parse_json(text, len, L, E, &b, &eb);
    int fast = route_body_fast(text, len, L, E, &f);
    if (ra != rb)
        fail_msg("route body '%.*s': parse %d, jansson %d (%s at %s)", (int)len, text, ra, rb,
                 rb ? eb.error : ea.error, rb ? eb.where : ea.where);
    if (fast)
        assert_int_equal(rb, 0);   /* the fast path never takes what jansson refuses */
    else
        assert_null(f.counts);
    if (ra == 0) {
        same_body(&a, &b, (size_t)L * (size_t)E);
        if (fast)
            same_body(&f, &b, (size_t)L * (size_t)E);
        route_body_free(&a);
        route_body_free(&b);
    } else {
        assert_int_equal(ea.status, eb.status);
        assert_string_equal(ea.error, eb.error);
        assert_string_equal(ea.where, eb.where);
        assert_null(a.counts);
    }
    if (fast)
        route_body_free(&f);
    return fast;
}

static int finish_agree(const char *text, size_t len)
{
    char a[RB_ID_MAX], b[RB_ID_MAX], f[RB_ID_MAX];
    rb_err ea, eb;
    memset(&ea, 0, sizeof ea);
    memset(&eb, 0, sizeof eb);
    int ra = finish_body_parse(text, len, a, &ea), rb = finish_body_parse_json(text, len, b, &eb);
    int fast = finish_body_fast(text, len, f);
    assert_int_equal(ra, rb);
    if (ra == 0) {
        assert_string_equal(a, b);
        if (fast)
            assert_string_equal(f, b);
    } else {
        assert_int_equal(fast, 0);
        assert_int_equal(ea.status, eb.status);
        assert_string_equal(ea.error, eb.error);
        assert_string_equal(ea.where, eb.where);
    }
    return fast;
}

static int route_agree_str(const char *text)
{
    return route_agree(text, strlen(text), ML, ME);
}

/* A body from a template: %C is replaced by the base64 counts. */
static char *fill(const char *tpl, const char *counts)
{
    static char out[2048];
    const char *at = strstr(tpl, "%C");
    if (!at) {
        snprintf(out, sizeof out, "%s", tpl);
        return out;
    }
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - tpl), tpl, counts, at + 2);
    return out;
}

static void test_route_corpus(void **state)
{
    (void)state;
    int16_t v[ML * ME];
    for (int i = 0; i < ML * ME; i++)
        v[i] = (int16_t)(i * 997 % 3000);
    char c[128], neg[128], shortc[128];
    enc_counts(v, ML * ME, c);   /* 30 bytes: 40 characters, no padding */
    v[7] = -1;
    enc_counts(v, ML * ME, neg);
    enc_counts(v, ML * ME - 1, shortc);

    /* the plain shape: the fast path takes these, and agrees */
    static const char *const plain[] = {
        "{\"request_id\":\"a\",\"counts\":\"%C\"}",
        "{\"counts\":\"%C\"}",
        "{\"counts\":\"%C\",\"request_id\":\"t1-9\",\"prefill_worker\":\"p0\"}",
        "{\"prefill_worker\":\"p0\",\"counts\":\"%C\",\"request_id\":\"x y/z\"}",
        " \n{ \"request_id\" : \"a\" ,\t\"counts\"\r\n:\"%C\" } \n",
        "{\"request_id\":null,\"prefill_worker\":null,\"counts\":\"%C\"}",
        "{\"request_id\":\"~!@#$%^&*()_+`-={}[]|:;'<>?,./\",\"counts\":\"%C\"}",
    };
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
        if (!route_agree_str(fill(plain[i], c)))
            fail_msg("fast path did not take plain body %zu: %s", i, fill(plain[i], c));

    /* everything else: the fast path steps aside, the answers agree */
    static const char *const other[] = {
        "{\"request_id\":\"a\",\"counts\":\"\\u0041%C\"}",   /* escape in the base64 */
        "{\"request_id\":\"a\",\"counts\":\"%C\\/\"}",
        "{\"request_id\":\"a\\\"b\",\"counts\":\"%C\"}",      /* escaped quote */
        "{\"request_id\":\"a\\/b\",\"counts\":\"%C\"}",
        "{\"request_id\":\"\\u00e9\",\"counts\":\"%C\"}",     /* unicode, escaped */
        "{\"request_id\":\"\xc3\xa9\",\"counts\":\"%C\"}",    /* unicode, raw UTF-8 */
        "{\"request_id\":\"\xff\xfe\",\"counts\":\"%C\"}",    /* not UTF-8 */
        "{\"request_id\":\"a\x01\",\"counts\":\"%C\"}",       /* control byte */
        "{\"request_id\":\"a\x7f\",\"counts\":\"%C\"}",       /* DEL: JSON allows it */
        "{\"request_id\":\"\\u0000\",\"counts\":\"%C\"}",
        "{\"request\\u005fid\":\"k\",\"counts\":\"%C\"}",     /* escaped key */
        "{\"counts\":\"%C\",\"counts\":\"%C\"}",              /* duplicate keys */
        "{\"request_id\":\"a\",\"request_id\":\"b\",\"counts\":\"%C\"}",
        "{\"request_id\":\"\",\"counts\":\"%C\"}",            /* empty id */
        "{\"prefill_worker\":\"\",\"counts\":\"%C\"}",
        "{\"request_id\":5,\"counts\":\"%C\"}",
        "{\"request_id\":nul,\"counts\":\"%C\"}",
        "{\"request_id\":nulll,\"counts\":\"%C\"}",
        "{\"request_id\":true,\"counts\":\"%C\"}",
        "{\"Counts\":\"%C\"}",
        "{\"counts\":\"%C\",\"foo\":1}",                      /* unknown key */
        "{\"counts\":\"%C\",\"sparse\":[]}",
        "{\"gates\":[[0,1,0.5]]}",                          /* a gate model's body */
        "{\"request_id\":\"g\",\"gates\":\"%C\"}",            /* wrong length for float32 */
        "{\"counts\":\"%C\",\"gates\":[]}",
        "{\"counts\":\"%C\",\"block_hashes\":[1,2],\"cached_blocks\":0}",
        "{\"counts\":\"%C\",\"block_hashes\":null}",
        "{\"counts\":\"%C\"}x",                               /* trailing garbage */
        "{\"counts\":\"%C\"}{}",
        "{\"counts\":\"%C\",}",
        "{,\"counts\":\"%C\"}",
        "{\"counts\" \"%C\"}",
        "{\"counts\":\"%C\" \"request_id\":\"a\"}",
        "[\"counts\",\"%C\"]",
        "{\"counts\":[\"%C\"]}",
        "{\"counts\":null}",
        "{\"counts\":5}",
        "{\"request_id\":\"a\"}",
        "{}",
        "",
        " ",
        "{\"counts\":\"@@@@\"}",
        "{\"counts\":\"%C=\"}",
        "{\"counts\":\"=%C\"}",
        "{\"counts\":\" %C\"}",
        "{\"counts\":\"%C\n\"}",
        "{\"counts\":\"%CAAAA\"}",
        "\xef\xbb\xbf{\"counts\":\"%C\"}",                    /* BOM */
    };
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
        char once[2048], twice[2048];
        snprintf(once, sizeof once, "%s", fill(other[i], c));
        snprintf(twice, sizeof twice, "%s", fill(once, c));   /* the duplicate keys' second %C */
        if (route_agree_str(twice))
            fail_msg("fast path took body %zu: %s", i, twice);
    }
    /* refusals of the counts themselves */
    assert_int_equal(route_agree_str(fill("{\"counts\":\"%C\"}", neg)), 0);
    assert_int_equal(route_agree_str(fill("{\"counts\":\"%C\"}", shortc)), 0);

    /* a NUL inside the length, and every truncation of a plain body */
    char body[256];
    int n = snprintf(body, sizeof body, "{\"request_id\":\"r1\",\"counts\":\"%s\"}", c);
    assert_int_equal(route_agree(body, (size_t)n + 1, ML, ME), 0);
    for (int cut = 0; cut < n; cut++)
        assert_int_equal(route_agree(body, (size_t)cut, ML, ME), 0);
    assert_int_equal(route_agree(body, (size_t)n, ML, ME), 1);

    /* names at and over their limits */
    char big[600];
    for (int len = RB_ID_MAX - 2; len <= RB_ID_MAX; len++) {
        int k = snprintf(big, sizeof big, "{\"request_id\":\"");
        memset(big + k, 'i', (size_t)len);
        snprintf(big + k + len, sizeof big - (size_t)(k + len), "\",\"counts\":\"%s\"}", c);
        assert_int_equal(route_agree_str(big), len < RB_ID_MAX);
    }
    for (int len = RB_NAME_MAX - 2; len <= RB_NAME_MAX; len++) {
        int k = snprintf(big, sizeof big, "{\"prefill_worker\":\"");
        memset(big + k, 'p', (size_t)len);
        snprintf(big + k + len, sizeof big - (size_t)(k + len), "\",\"counts\":\"%s\"}", c);
        assert_int_equal(route_agree_str(big), len < RB_NAME_MAX);
    }
}

/* Geometries whose counts need padding: with it, without, and with
 * bits left over in the last character. */
static void test_route_padding(void **state)
{
    (void)state;
    static const int geo[][2] = {{1, 1}, {2, 5}, {1, 3}, {4, 8}};
    for (size_t g = 0; g < sizeof geo / sizeof *geo; g++) {
        int L = geo[g][0], E = geo[g][1];
        int16_t v[64];
        for (int i = 0; i < L * E; i++)
            v[i] = (int16_t)(i * 31 + 1);
        char c[128], body[256];
        enc_counts(v, (size_t)(L * E), c);
        snprintf(body, sizeof body, "{\"counts\":\"%s\"}", c);
        assert_int_equal(route_agree(body, strlen(body), L, E), 1);
        char *eq = strchr(c, '=');
        if (!eq)
            continue;
        *eq = '\0';   /* unpadded */
        snprintf(body, sizeof body, "{\"counts\":\"%s\"}", c);
        assert_int_equal(route_agree(body, strlen(body), L, E), 1);
        /* the last character's unused low bits set: both decoders ignore them */
        size_t last = strlen(c) - 1;
        c[last] = c[last] == 'A' ? 'B' : c[last] == 'Q' ? 'R' : c[last];
        snprintf(body, sizeof body, "{\"counts\":\"%s\"}", c);
        route_agree(body, strlen(body), L, E);
    }
}

/* Random edits of plain bodies: both parsers see the same bytes. */
static void test_route_mutations(void **state)
{
    (void)state;
    static const char bytes[] = "\"\\ ,:{}=A/+n\n\t\x01\xc3\xa9\xffu0-";
    rng_t r;
    rng_seed(&r, 5);
    int fast = 0, runs = 30000;
    for (int it = 0; it < runs; it++) {
        int16_t v[ML * ME];
        for (int i = 0; i < ML * ME; i++)
            v[i] = rng_below(&r, 100) ? (int16_t)rng_below(&r, 32768)
                                      : (int16_t)-(int)rng_below(&r, 100) - 1;
        char c[128], body[512];
        enc_counts(v, ML * ME, c);
        int n = snprintf(body, sizeof body,
                         rng_below(&r, 2) ? "{\"request_id\":\"q%d\",\"counts\":\"%s\"}"
                                          : "{ \"counts\" : \"%2$s\", \"prefill_worker\": \"w%1$d\" }",
                         it, c);
        int edits = (int)rng_below(&r, 3);
        for (int k = 0; k < edits && n > 1; k++) {
            int at = (int)rng_below(&r, (uint64_t)n);
            char ch = bytes[rng_below(&r, sizeof bytes - 1)];
            switch (rng_below(&r, 4)) {
            case 0:
                body[at] = ch;
                break;
            case 1:   /* insert */
                if (n + 1 < (int)sizeof body) {
                    memmove(body + at + 1, body + at, (size_t)(n - at));
                    body[at] = ch;
                    n++;
                }
                break;
            case 2:   /* delete */
                memmove(body + at, body + at + 1, (size_t)(n - at - 1));
                n--;
                break;
            default:  /* truncate */
                n = at;
            }
        }
        fast += route_agree(body, (size_t)n, ML, ME);
    }
    /* the unedited third of the runs, and some edits, stay plain */
    assert_true(fast > runs / 4);
    assert_true(fast < runs);
}

static void test_finish_corpus(void **state)
{
    (void)state;
    assert_int_equal(finish_agree("{\"request_id\":\"t1-2\"}", 21), 1);
    assert_int_equal(finish_agree(" { \"request_id\" :\n\"q\" } ", 24), 1);
    static const char *const other[] = {
        "{\"request_id\":\"a\\\"b\"}", "{\"request_id\":\"\\u00e9\"}", "{\"request_id\":\"\"}",
        "{\"request_id\":null}",      "{\"request_id\":5}",          "{}",
        "{\"request_id\":\"a\",\"request_id\":\"b\"}", "{\"request_id\":\"a\",\"x\":1}",
        "{\"request_id\":\"a\"}x",    "{\"request_id\":\"a\x01\"}",   "",
        "[\"request_id\"]",           "{\"request_id\":\"\xc3\xa9\"}", "{\"request_id\":\"a\"",
    };
    for (size_t i = 0; i < sizeof other / sizeof *other; i++)
        if (finish_agree(other[i], strlen(other[i])))
            fail_msg("fast path took finish body %zu: %s", i, other[i]);
    char big[600];
    for (int len = RB_ID_MAX - 2; len <= RB_ID_MAX; len++) {
        int k = snprintf(big, sizeof big, "{\"request_id\":\"");
        memset(big + k, 'i', (size_t)len);
        snprintf(big + k + len, sizeof big - (size_t)(k + len), "\"}");
        assert_int_equal(finish_agree(big, strlen(big)), len < RB_ID_MAX);
    }
    const char *ok = "{\"request_id\":\"abc\"}";
    for (size_t cut = 0; cut < strlen(ok); cut++)
        assert_int_equal(finish_agree(ok, cut), 0);
}

/* ---- "%.9g" without printf ---- */

static void g9_same(double v)
{
    char got[40], want[40];
    int n = g9_format(v, got);
    snprintf(want, sizeof want, "%.9g", v);
    if (strcmp(got, want) || n != (int)strlen(want))
        fail_msg("%.17g: g9 '%s', printf '%s'", v, got, want);
}

/* ---- the scanner's strings ---- */

/* cj_string's check of a string's bytes (sixteen at a time with SSE2)
 * against jansson's: random strings without escapes over ASCII, control
 * bytes, DEL, valid UTF-8 of every length, and bytes that break it
 * (lone continuations, overlong forms, surrogates, past U+10FFFF,
 * truncated sequences), at every offset of strings up to 200 bytes. */
static void test_string_bytes_against_jansson(void **state)
{
    (void)state;
    static const char *const pieces[] = {
        "a", "Z", " ", "~", "\x7f", "\x01", "\x1f", "\t", "\n", "\xc3\xa9", "\xe2\x82\xac",
        "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", "\x80", "\xbf", "\xc0\xaf", "\xc1\xbf",
        "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xc3",
        "\xe2\x82", "\xf0\x9f\x98", "\xff", "\xfe",
    };
    rng_t r;
    rng_seed(&r, 23);
    for (int it = 0; it < 30000; it++) {
        char text[1024];
        size_t n = 1;
        text[0] = '"';
        size_t want = rng_below(&r, 200);
        int plain = rng_below(&r, 3) == 0;   /* mostly ASCII: one odd piece, or none */
        size_t odd_at = rng_below(&r, want + 1);
        while (n < want + 1) {
            const char *p = plain && n != odd_at ? "x"
                                                 : pieces[rng_below(&r, sizeof pieces / sizeof *pieces)];
            if (!plain && rng_below(&r, 4))
                p = "q";
            size_t k = strlen(p);
            memcpy(text + n, p, k);
            n += k;
        }
        text[n++] = '"';
        cj_t sc;
        cj_init(&sc, text, n);
        const char *str;
        size_t len;
        int ours = cj_string(&sc, &str, &len) == 0;
        json_error_t je;
        json_t *j = json_loadb(text, n, JSON_DECODE_ANY, &je);
        int theirs = j != NULL;
        json_decref(j);
        if (ours != theirs)
            fail_msg("cj_string %s, jansson %s: string of %zu bytes (iteration %d)",
                     ours ? "accepts" : "refuses", theirs ? "accepts" : "refuses", n, it);
        if (ours)
            assert_int_equal(len, n - 2);
    }
}

/* g9_int against printf's "%lld": the edges, every power of ten and its
 * neighbours, and random values of every width, both signs. */
static void int_same(long long v)
{
    char a[32], b[32];
    int n = g9_int(v, a);
    snprintf(b, sizeof b, "%lld", v);
    assert_string_equal(a, b);
    assert_int_equal(n, (int)strlen(b));
}

static void test_g9_int_against_printf(void **state)
{
    (void)state;
    static const long long edge[] = {0, 1, -1, 9, 10, -10, LLONG_MAX, LLONG_MIN,
                                     LLONG_MIN + 1, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++)
        int_same(edge[i]);
    long long p = 1;
    for (int j = 0; j < 19; j++) {   /* 1 .. 10^18 */
        int_same(p);
        int_same(p - 1);
        int_same(-p);
        int_same(-(p + 1));
        if (j < 18)
            p *= 10;
    }
    rng_t r;
    rng_seed(&r, 29);
    for (int it = 0; it < 20000; it++) {
        unsigned long long u = ((unsigned long long)rng_below(&r, 1u << 31) << 33) ^
                               ((unsigned long long)rng_below(&r, 1u << 31) << 2) ^
                               rng_below(&r, 4);
        long long v = (long long)(u >> (1 + rng_below(&r, 63)));   /* >= 0: -v is defined */
        int_same(rng_below(&r, 2) ? v : -v);
    }
}

static void test_g9_against_printf(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 13);
    for (int it = 0; it < 200000; it++) {
        /* any magnitude around the exact range, either sign */
        double v = ldexp(0.5 + rng_uniform(&r) / 2, (int)rng_below(&r, 100) - 42);
        g9_same(rng_below(&r, 2) ? v : -v);
        g9_same((double)(float)(2 * rng_uniform(&r) - 1));   /* a similarity */
        /* ties at the tenth digit: n + 1/2, n + j/8, 10-digit integers ending in 5 */
        uint64_t n = 100000000 + rng_below(&r, 900000000);
        g9_same((double)n + 0.5);
        g9_same((double)(n / 100) + (double)rng_below(&r, 8) / 8);
        g9_same((double)(n * 10 + 5));
        g9_same((double)(n * 10 + 5) * 100000);
    }
    for (int j = -12; j <= 16; j++) {   /* powers of ten, their neighbours, round-ups */
        double p = pow(10, j);
        g9_same(p);
        g9_same(nextafter(p, 0));
        g9_same(nextafter(p, INFINITY));
        g9_same(p * (1 - 5e-10));
        g9_same(p * (1 - 4.9e-10));
        g9_same(p * (1 - 5.1e-10));
        g9_same(-p * 0.99999999995);
    }
    static const double special[] = {0.0, -0.0, 1e-10, 1e15, 9.99999999e14, 5e-324,
                                     2.2250738585072014e-308, 1.7976931348623157e308, 0.1,
                                     0.5, 1.0, 123456789.0, 1234567890.0, 999999999.5,
                                     0.0001, 0.00001, 0.000099999999995};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        g9_same(special[i]);
}

/* ---- answers ---- */

static char *dumped(json_t *j)
{
    assert_non_null(j);
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(j);
    assert_non_null(s);
    return s;
}

static double any_real(rng_t *r)
{
    static const double special[] = {0.0, -0.0, 1.0, -1.0, 0.1, 1e-5, 1.5e-5, 1e20, 1e-300,
                                     123456789.0, 1234567890.0, 1e9, 1e-4, 0.000123456789,
                                     5e-324, 1.7976931348623157e308, 2.0, 100.0};
    switch (rng_below(r, 4)) {
    case 0:
        return special[rng_below(r, sizeof special / sizeof *special)];
    case 1:
        return (double)(float)(2 * rng_uniform(r) - 1);   /* a similarity */
    case 2:
        return (2 * rng_uniform(r) - 1) * pow(10, (double)rng_below(r, 60) - 30);
    default:
        return 2 * rng_uniform(r) - 1;
    }
}

static void test_answers_match_jansson(void **state)
{
    (void)state;
    char *names[ROUTE_MAX_WORKERS];
    char namebuf[ROUTE_MAX_WORKERS][24];
    for (int k = 0; k < ROUTE_MAX_WORKERS; k++) {
        snprintf(namebuf[k], sizeof namebuf[k], "decode-%d", k);
        names[k] = namebuf[k];
    }
    rng_t r;
    rng_seed(&r, 9);
    route_out o;
    for (int it = 0; it < 3000; it++) {
        memset(&o, 0, sizeof o);
        int K = 1 + (int)rng_below(&r, 24);
        route_decision *d = &o.d;
        d->K = K;
        d->worker = (int)rng_below(&r, (uint64_t)K);
        d->rule = (route_rule)rng_below(&r, RULE_N);
        d->has_sim = rng_below(&r, 5) != 0;
        for (int k = 0; k < K; k++) {
            d->sim[k] = any_real(&r);
            d->load[k] = rng_below(&r, 3) ? (int64_t)rng_below(&r, 1000)
                                          : (int64_t)(rng_below(&r, UINT64_MAX) - INT64_MAX);
        }
        if (it % 7 == 0)
            d->load[0] = INT64_MIN;
        if (it % 11 == 0)
            d->load[K - 1] = INT64_MAX;
        d->sim_max = any_real(&r);
        d->n_cand = (int)rng_below(&r, (uint64_t)K + 1);
        for (int i = 0; i < d->n_cand; i++)
            d->cand[i] = i;
        o.tau = fabs(any_real(&r));
        o.seq = rng_below(&r, UINT64_MAX / 2);
        snprintf(o.request_id, sizeof o.request_id, "req-%d", it);
        route_answer_in a = {names, K, &o, it % 2 ? "prefill-0" : "p",
                             (int)rng_below(&r, 100),
                             {.hit = (int)rng_below(&r, 9), .missing = (int)rng_below(&r, 3), .stored = (int)rng_below(&r, 9)},
                             rng_below(&r, 1000)};
        char *text = route_answer_text(&a), *want = dumped(route_answer_json(&a));
        assert_non_null(text);
        assert_string_equal(text, want);
        free(text);
        free(want);
    }
    /* strings jansson would escape or check: the direct writer declines */
    static const char *const odd[] = {"a\"b", "a\\b", "tab\t", "caf\xc3\xa9", "\x7f"};
    route_answer_in a = {names, 1, &o, "p", 0, {.prefill = 0}, 1};
    memset(&o, 0, sizeof o);
    o.d.K = 1;
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        snprintf(o.request_id, sizeof o.request_id, "%s", odd[i]);
        assert_null(route_answer_text(&a));
        assert_null(finish_answer_text(odd[i], "w", 0));
        assert_null(finish_answer_text("id", odd[i], 0));
    }
    /* a non-finite similarity: declined (json_real refuses it too) */
    snprintf(o.request_id, sizeof o.request_id, "x");
    o.d.has_sim = 1;
    o.d.sim[0] = NAN;
    assert_null(route_answer_text(&a));
    o.d.sim[0] = 0.5;
    char *text = route_answer_text(&a), *want = dumped(route_answer_json(&a));
    assert_string_equal(text, want);
    free(text);
    free(want);

    text = finish_answer_text("t1-7", "decode-3", 3);
    want = dumped(finish_answer_json("t1-7", "decode-3", 3));
    assert_string_equal(text, want);
    free(text);
    free(want);
}

/* ---- the window takes signatures by a pointer swap ---- */

static float *sig_of(float v, size_t dim)
{
    float *s = malloc(dim * sizeof *s);
    assert_non_null(s);
    for (size_t i = 0; i < dim; i++)
        s[i] = v + (float)i / 100;
    return s;
}

static void test_state_window_swaps(void **state)
{
    (void)state;
    const char *const workers[] = {"a", "b"};
    char err[256];
    rstate *st = state_new(2, workers, 0.1, 8, 3, err, sizeof err);
    assert_non_null(st);
    mref_t model = {.dim = 4, .gen = 1}, other = {.dim = 4, .gen = 2};
    state_model_changed(st, &model);
    double sim[2] = {0.9, 0.2};
    route_out o;
    rb_err e;
    for (int i = 0; i < 10; i++) {
        float *mine = sig_of((float)i, model.dim);
        char id[16];
        snprintf(id, sizeof id, "q%d", i);
        route_in in = {id, &model, sim, mine, 0, 0, 0, 0, NULL, -1, 0, 0, 0, NULL, 0, NULL, NULL};
        assert_int_equal(state_route(st, &in, &o, &e), 0);
        assert_ptr_not_equal(in.sig, mine);   /* the window kept it */
        if (i < 3) {
            assert_null(in.sig);              /* an empty slot gave nothing back */
        } else {
            for (size_t j = 0; j < model.dim; j++)   /* the dropped one: i - 3 */
                assert_true(in.sig[j] == (float)(i - 3) + (float)j / 100);
        }
        free(in.sig);
        int w;
        assert_int_equal(state_finish(st, id, &w, &e), 0);
    }
    /* another model generation, or no signature: the window keeps nothing */
    float *mine = sig_of(99, model.dim);
    route_in in = {"x1", &other, sim, mine, 0, 0, 0, 0, NULL, -1, 0, 0, 0, NULL, 0, NULL, NULL};
    assert_int_equal(state_route(st, &in, &o, &e), 0);
    assert_ptr_equal(in.sig, mine);
    route_in zero = {"x2", &model, NULL, mine, 0, 0, 0, 0, NULL, -1, 0, 0, 0, NULL, 0, NULL, NULL};
    assert_int_equal(state_route(st, &zero, &o, &e), 0);
    assert_ptr_equal(zero.sig, mine);
    free(mine);
    /* newest first: q9, q8, q7 with their own signatures; the streamed
     * text (read 7 bytes at a time) is byte for byte jansson's compact dump
     * of the same records */
    window_copy wc;
    assert_int_equal(state_window_copy(st, 10, &wc), 0);
    json_t *items = json_array();
    for (int i = 0; i < wc.n; i++) {
        json_t *sig = json_array();
        for (size_t j = 0; j < wc.dim; j++)
            json_array_append_new(sig, json_real(wc.rec[i].sig[j]));
        json_array_append_new(items, json_pack("{s:s, s:I, s:i, s:f, s:o}", "request_id",
                                               wc.rec[i].id, "seq", (json_int_t)wc.rec[i].seq,
                                               "nearest", wc.rec[i].nearest, "sim_max",
                                               wc.rec[i].sim_max, "signature", sig));
    }
    json_t *ref = json_pack("{s:I, s:I, s:i, s:o}", "model_generation", (json_int_t)wc.gen,
                            "dim", (json_int_t)wc.dim, "capacity", wc.cap, "signatures", items);
    char *want_text = json_dumps(ref, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(ref);
    window_stream *ws = window_stream_new(&wc);
    assert_non_null(ws);
    char *text = NULL;
    size_t len = 0;
    for (;;) {
        char buf[7];
        ssize_t n = window_stream_read(ws, len, buf, sizeof buf);
        if (n < 0)
            break;
        text = realloc(text, len + (size_t)n + 1);
        memcpy(text + len, buf, (size_t)n);
        len += (size_t)n;
        text[len] = '\0';
    }
    window_stream_free(ws);
    assert_string_equal(text, want_text);
    free(want_text);
    json_t *win = json_loads(text, 0, NULL), *sigs = json_object_get(win, "signatures");
    free(text);
    assert_int_equal(json_array_size(sigs), 3);
    for (int k = 0; k < 3; k++) {
        json_t *one = json_array_get(sigs, (size_t)k);
        char want[16];
        snprintf(want, sizeof want, "q%d", 9 - k);
        assert_string_equal(json_string_value(json_object_get(one, "request_id")), want);
        json_t *v = json_object_get(one, "signature");
        assert_int_equal(json_array_size(v), model.dim);
        for (size_t j = 0; j < model.dim; j++)
            assert_true((float)json_real_value(json_array_get(v, j)) == (float)(9 - k) + (float)j / 100);
    }
    json_decref(win);
    state_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64_table_against_reference),
        cmocka_unit_test(test_route_corpus),
        cmocka_unit_test(test_route_padding),
        cmocka_unit_test(test_route_mutations),
        cmocka_unit_test(test_finish_corpus),
        cmocka_unit_test(test_string_bytes_against_jansson),
        cmocka_unit_test(test_g9_against_printf),
        cmocka_unit_test(test_g9_int_against_printf),
        cmocka_unit_test(test_answers_match_jansson),
        cmocka_unit_test(test_state_window_swaps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
