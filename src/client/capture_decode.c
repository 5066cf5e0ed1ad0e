/* capture_decode.c - routed experts out of an engine answer
 * (capture_decode.h). The answer is walked once with the in-place scanner
 * (capture_json.h), keeping only the spans of the fields that matter; the
 * spans are decoded afterwards, when the token counts are known (a raw
 * SGLang buffer needs them to find its item size, and the keys may come
 * in any order). */
#include <stdlib.h>
#include <string.h>

#include "../router/b64.h"
#include "capture_decode.h"
#include "capture_json.h"
#include "err.h"
#include "npy.h"

/* One decoded field: rows of L x k ids. */
typedef struct idbuf {
    uint16_t *ids;
    int64_t rows, cap;          /* rows held, rows allocated */
    int L, k;                   /* 0 until known */
    const char *encoding;
} idbuf;

typedef struct span {
    const char *p;
    size_t n;                   /* 0: absent (or null) */
} span;

/* What the walk found. */
typedef struct found {
    span prompt, gen, full;     /* vLLM prompt/generation arrays; a whole-sequence array */
    int full_is_sglang;         /* full covers P + C - 1 (SGLang) rather than P + C or P + C - 1 */
    int64_t usage_p, usage_c, meta_p, meta_c; /* -1: absent */
    const char *full_name;      /* the field's name, for messages */
} found;

static void idbuf_free(idbuf *b)
{
    free(b->ids);
    memset(b, 0, sizeof *b);
}

/* The first bytes of a value, printable, for "found ..." messages. */
static const char *quote(const char *p, size_t n, char *buf, size_t cap)
{
    size_t m = n < 48 ? n : 48, j = 0;
    for (size_t i = 0; i < m && j + 1 < cap; i++)
        buf[j++] = (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
    if (n > m && j + 4 < cap) {
        memcpy(buf + j, "...", 3);
        j += 3;
    }
    buf[j] = 0;
    return buf;
}

static int grow(idbuf *b, int64_t rows, char *err, size_t errlen)
{
    size_t row = (size_t)b->L * (size_t)b->k;
    if (rows <= b->cap)
        return 0;
    int64_t cap = b->cap ? b->cap : 64;
    while (cap < rows)
        cap *= 2;
    if ((uint64_t)cap > SIZE_MAX / 2 / (row ? row : 1))
        return eldr_errf(err, errlen, "routed experts: %lld tokens is too many", (long long)rows);
    uint16_t *ids = realloc(b->ids, (size_t)cap * row * sizeof *ids);
    if (!ids)
        return eldr_errf(err, errlen, "routed experts: out of memory for %lld tokens",
                         (long long)rows);
    b->ids = ids;
    b->cap = cap;
    return 0;
}

/* Check one id. */
static inline int check_id(idbuf *b, int64_t v, int E, const char *name, int64_t row, int l,
                           char *err, size_t errlen)
{
    if (v < 0)
        return eldr_errf(err, errlen,
                         "%s token %lld layer %d: expert id %lld (the engine has no routing "
                         "for this position; a prefix-cache hit?)",
                         name, (long long)row, l, (long long)v);
    if (v > 65535 || (E > 0 && v >= E))
        return eldr_errf(err, errlen, "%s token %lld layer %d: expert id %lld is not below %d%s",
                         name, (long long)row, l, (long long)v, E > 0 ? E : 65536,
                         E > 0 ? " (--experts)" : "");
    (void)b;
    return 0;
}

static int set_geometry(idbuf *b, int64_t L, int64_t k, const capture_hint *h, const char *name,
                        char *err, size_t errlen)
{
    if (L < 1 || k < 1 || L > 4096 || k > 4096)
        return eldr_errf(err, errlen, "%s: %lld layers x top-%lld is not a routing shape", name,
                         (long long)L, (long long)k);
    if ((h->L && h->L != L) || (h->k && h->k != k))
        return eldr_errf(err, errlen,
                         "%s: %lld layers x top-%lld, but %s says %d layers x top-%d "
                         "(inconsistent shapes)",
                         name, (long long)L, (long long)k, h->from ? h->from : "the first answer",
                         h->L, h->k);
    b->L = (int)L;
    b->k = (int)k;
    return 0;
}

/* The k ids of one layer, after its '[': plain decimal ids below limit,
 * separated by commas (spaces allowed), then ']'. 1 and s past the ']'
 * when so; 0 and s untouched for anything else, which the general path
 * then parses to say what is wrong. The tight loop of a lists answer. */
static int ids_fast(cj_t *s, uint16_t *dst, int k, uint32_t limit)
{
    const char *p = s->p, *end = s->end;
    for (int j = 0; j < k; j++) {
        while (p < end && *p == ' ')
            p++;
        const char *d0 = p;
        uint32_t v = 0;
        while (p < end && *p >= '0' && *p <= '9' && p - d0 < 6)
            v = v * 10 + (uint32_t)(*p++ - '0');
        if (p == d0 || (*d0 == '0' && p - d0 > 1) || v >= limit)
            return 0;
        while (p < end && *p == ' ')
            p++;
        if (p >= end || *p != (j == k - 1 ? ']' : ','))
            return 0;
        p++;
        dst[j] = (uint16_t)v;
    }
    s->p = p;
    return 1;
}

/* Nested lists [[[id, ...] x k] x L] x T. */
static int decode_lists(cj_t *s, const capture_hint *h, const char *name, idbuf *b, char *err,
                        size_t errlen)
{
    int nt = 0, r;
    b->encoding = "json";
    if (cj_expect(s, '[') < 0)
        return -1;
    while ((r = cj_next_item(s, &nt)) == 1) {
        int64_t row = b->rows;
        int nl = 0, rl, l = 0;
        if (cj_expect(s, '[') < 0)
            return eldr_errf(err, errlen, "%s token %lld: not a list of layers", name,
                             (long long)row);
        while ((rl = cj_next_item(s, &nl)) == 1) {
            int nk = 0, rk, j = 0;
            if (cj_expect(s, '[') < 0)
                return eldr_errf(err, errlen, "%s token %lld layer %d: not a list of ids", name,
                                 (long long)row, l);
            if (b->L && l < b->L &&
                ids_fast(s, b->ids + ((size_t)row * (size_t)b->L + (size_t)l) * (size_t)b->k,
                         b->k, h->E > 0 ? (uint32_t)h->E : 65536)) {
                l++;
                continue;
            }
            while ((rk = cj_next_item(s, &nk)) == 1) {
                int64_t v;
                if (cj_int(s, &v) < 0)
                    return eldr_errf(err, errlen, "%s token %lld layer %d: not an integer id",
                                     name, (long long)row, l);
                if (row == 0 && !b->L) {
                    /* the first token fixes the shape: count it, store later */
                    if (j >= 4096)
                        return eldr_errf(err, errlen, "%s: more than 4096 ids per layer", name);
                } else if (j >= b->k) {
                    return eldr_errf(err, errlen,
                                     "%s token %lld layer %d: more than %d ids (inconsistent "
                                     "shapes)", name, (long long)row, l, b->k);
                } else {
                    if (check_id(b, v, h->E, name, row, l, err, errlen) < 0)
                        return -1;
                    b->ids[((size_t)row * (size_t)b->L + (size_t)l) * (size_t)b->k + (size_t)j] =
                        (uint16_t)v;
                }
                j++;
            }
            if (rk < 0)
                return -1;
            if (row == 0 && !b->L) {
                /* first layer of the first token: k known; L grows */
                if (l == 0)
                    b->k = j;
                else if (j != b->k)
                    return eldr_errf(err, errlen, "%s token 0 layer %d: %d ids, layer 0 has %d "
                                     "(inconsistent shapes)", name, l, j, b->k);
            } else if (j != b->k) {
                return eldr_errf(err, errlen, "%s token %lld layer %d: %d ids, expected %d "
                                 "(inconsistent shapes)", name, (long long)row, l, j, b->k);
            }
            l++;
            if (row > 0 && l > b->L)
                return eldr_errf(err, errlen, "%s token %lld: more than %d layers (inconsistent "
                                 "shapes)", name, (long long)row, b->L);
        }
        if (rl < 0)
            return -1;
        if (row == 0 && !b->L) {
            /* the first token set the shape: parse it again, storing */
            if (set_geometry(b, l, b->k, h, name, err, errlen) < 0)
                return -1;
            if (grow(b, 1, err, errlen) < 0)
                return -1;
            b->rows = 0;
            nt = 0;
            s->p = s->start;   /* rewound below by the caller's span */
            return 2;          /* ask the caller to restart now that L and k are known */
        }
        if (l != b->L)
            return eldr_errf(err, errlen, "%s token %lld: %d layers, expected %d (inconsistent "
                             "shapes)", name, (long long)row, l, b->L);
        b->rows++;
        if (grow(b, b->rows + 1, err, errlen) < 0)
            return -1;
    }
    return r < 0 ? -1 : 0;
}

/* Element i of raw integers of itemsize bytes, as int64. */
static int64_t raw_at(const uint8_t *d, size_t i, int itemsize, int is_signed, int big)
{
    const uint8_t *q = d + i * (size_t)itemsize;
    uint64_t u = 0;
    for (int j = 0; j < itemsize; j++)
        u |= (uint64_t)q[big ? itemsize - 1 - j : j] << (8 * j);
    if (is_signed && itemsize < 8 && (u >> (8 * itemsize - 1)) & 1)
        return (int64_t)(u | (~UINT64_C(0) << (8 * itemsize)));
    if (!is_signed && itemsize == 8 && u > (uint64_t)INT64_MAX)
        return INT64_MAX;
    return (int64_t)u;
}

/* Raw integers of itemsize bytes, rows x L x k. The common cases (little-
 * endian int16 from vLLM, int32 from SGLang) take a tight loop that only
 * notes whether some id is out of range; the general loop then finds it
 * and says which. */
static int store_raw(idbuf *b, const uint8_t *d, int itemsize, int is_signed, int big,
                     const capture_hint *h, const char *name, char *err, size_t errlen)
{
    size_t row = (size_t)b->L * (size_t)b->k, n = (size_t)b->rows * row;
    if (grow(b, b->rows ? b->rows : 1, err, errlen) < 0)
        return -1;
    uint32_t limit = h->E > 0 ? (uint32_t)h->E : 65536;
    if (!big && is_signed && (itemsize == 2 || itemsize == 4)) {
        uint32_t over = 0;
        for (size_t i = 0; i < n; i++) {
            int32_t v;
            if (itemsize == 2) {
                int16_t x;
                memcpy(&x, d + 2 * i, 2);
                v = x;
            } else {
                memcpy(&v, d + 4 * i, 4);
            }
            over |= (uint32_t)v >= limit;   /* negative ids wrap above the limit */
            b->ids[i] = (uint16_t)v;
        }
        if (!over)
            return 0;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t v = raw_at(d, i, itemsize, is_signed, big);
        if (check_id(b, v, h->E, name, (int64_t)(i / row), (int)(i % row / (size_t)b->k), err,
                     errlen) < 0)
            return -1;
        b->ids[i] = (uint16_t)v;
    }
    return 0;
}

/* Base64 text -> malloc'd bytes. */
static uint8_t *unbase64(const char *p, size_t n, size_t *outlen, const char *name, char *err,
                         size_t errlen)
{
    size_t want = b64_decoded_len(p, n), bad = 0;
    char q[64];
    if (want == (size_t)-1) {
        eldr_errf(err, errlen, "%s: found \"%s\", not base64 (%zu characters cannot encode "
                  "whole bytes)", name, quote(p, n, q, sizeof q), n);
        return NULL;
    }
    uint8_t *d = malloc(want ? want : 1);
    if (!d) {
        eldr_errf(err, errlen, "%s: out of memory for %zu bytes", name, want);
        return NULL;
    }
    if (b64_decode(p, n, d, outlen, &bad) < 0) {
        free(d);
        eldr_errf(err, errlen, "%s: found \"%s\", not base64 (character %zu)", name,
                  quote(p, n, q, sizeof q), bad);
        return NULL;
    }
    return d;
}

/* "int16", "<i2", "torch.int16", "i2" -> item size and signedness. */
static int parse_dtype(const char *p, size_t n, int *itemsize, int *is_signed, int *big)
{
    char d[24];
    if (n == 0 || n >= sizeof d)
        return -1;
    memcpy(d, p, n);
    d[n] = 0;
    const char *s = d;
    *big = 0;
    if (!strncmp(s, "torch.", 6))
        s += 6;
    else if (!strncmp(s, "numpy.", 6))
        s += 6;
    if (*s == '<' || *s == '|' || *s == '=')
        s++;
    else if (*s == '>')
        *big = 1, s++;
    static const struct { const char *a, *b; int size, sgn; } t[] = {
        {"int8", "i1", 1, 1},   {"uint8", "u1", 1, 0},  {"int16", "i2", 2, 1},
        {"uint16", "u2", 2, 0}, {"int32", "i4", 4, 1},  {"uint32", "u4", 4, 0},
        {"int64", "i8", 8, 1},  {"uint64", "u8", 8, 0}, {"short", "", 2, 1},
        {"int", "", 4, 1},      {"long", "", 8, 1},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(s, t[i].a) || (t[i].b[0] && !strcmp(s, t[i].b))) {
            *itemsize = t[i].size;
            *is_signed = t[i].sgn;
            return 0;
        }
    return -1;
}

/* {"encoding": "base64", "dtype": ..., "shape": [T, L, k], "data": ...} */
static int decode_object(cj_t *s, const capture_hint *h, const char *name, idbuf *b, char *err,
                         size_t errlen)
{
    const char *key, *dt = NULL, *data = NULL, *enc = NULL;
    size_t kl, dtn = 0, datan = 0, encn = 0;
    int64_t shape[3];
    int n = 0, r, ndim = -1;
    char q[64];
    cj_expect(s, '{');
    while ((r = cj_next_key(s, &n, &key, &kl)) == 1) {
        if (cj_key_is(key, kl, "dtype") && cj_peek(s) == '"') {
            if (cj_string(s, &dt, &dtn) < 0)
                return -1;
        } else if (cj_key_is(key, kl, "data") && cj_peek(s) == '"') {
            if (cj_string(s, &data, &datan) < 0)
                return -1;
        } else if (cj_key_is(key, kl, "encoding") && cj_peek(s) == '"') {
            if (cj_string(s, &enc, &encn) < 0)
                return -1;
        } else if (cj_key_is(key, kl, "shape") && cj_peek(s) == '[') {
            int m = 0, ri;
            ndim = 0;
            cj_expect(s, '[');
            while ((ri = cj_next_item(s, &m)) == 1) {
                int64_t v;
                if (cj_int(s, &v) < 0 || ndim >= 3 || v < 0)
                    return eldr_errf(err, errlen, "%s: \"shape\" is not 3 sizes [tokens, "
                                     "layers, top_k]", name);
                shape[ndim++] = v;
            }
            if (ri < 0)
                return -1;
        } else if (cj_skip(s) < 0) {
            return -1;
        }
    }
    if (r < 0)
        return -1;
    if (enc && !(encn == 6 && !memcmp(enc, "base64", 6)))
        return eldr_errf(err, errlen, "%s: encoding \"%s\" (only base64 is understood)", name,
                         quote(enc, encn, q, sizeof q));
    if (!data || !dt || ndim < 0)
        return eldr_errf(err, errlen, "%s: an object without %s (expected encoding, dtype, "
                         "shape, data)", name, !data ? "\"data\"" : !dt ? "\"dtype\"" : "\"shape\"");
    if (ndim != 3)
        return eldr_errf(err, errlen, "%s: shape has %d sizes, expected [tokens, layers, top_k]",
                         name, ndim);
    int isz, sgn, big;
    if (parse_dtype(dt, dtn, &isz, &sgn, &big) < 0)
        return eldr_errf(err, errlen, "%s: dtype \"%s\" is not an integer type", name,
                         quote(dt, dtn, q, sizeof q));
    size_t len;
    uint8_t *d = unbase64(data, datan, &len, name, err, errlen);
    if (!d)
        return -1;
    b->encoding = "base64";
    int rc = set_geometry(b, shape[1], shape[2], h, name, err, errlen);
    if (rc == 0 && (shape[0] > (int64_t)(SIZE_MAX / 8 / 4096 / 4096) ||
                    (size_t)shape[0] * (size_t)shape[1] * (size_t)shape[2] * (size_t)isz != len))
        rc = eldr_errf(err, errlen, "%s: shape [%lld, %lld, %lld] of %d-byte ids needs %.0f "
                       "bytes, data has %zu (inconsistent shapes)", name, (long long)shape[0],
                       (long long)shape[1], (long long)shape[2], isz,
                       (double)shape[0] * (double)shape[1] * (double)shape[2] * isz, len);
    if (rc == 0) {
        b->rows = shape[0];
        rc = store_raw(b, d, isz, sgn, big, h, name, err, errlen);
    }
    free(d);
    return rc;
}

/* A .npy image. */
static int decode_npy(const uint8_t *d, size_t len, const capture_hint *h, const char *name,
                      idbuf *b, char *err, size_t errlen)
{
    npy_array_t a;
    char e[ELDR_ERRLEN], sh[128];
    if (npy_parse(d, len, &a, e, sizeof e) < 0)
        return eldr_errf(err, errlen, "%s: base64 .npy: %s", name, e);
    int rc = 0;
    if (!npy_is_integer(&a) || a.kind == 'b')
        rc = eldr_errf(err, errlen, "%s: base64 .npy of dtype '%s', expected integers", name,
                       a.descr);
    else if (a.ndim != 3)
        rc = eldr_errf(err, errlen, "%s: base64 .npy of shape %s, expected [tokens, layers, "
                       "top_k]", name, npy_shape_str(&a, sh, sizeof sh));
    else
        rc = set_geometry(b, a.shape[1], a.shape[2], h, name, err, errlen);
    if (rc == 0) {
        b->rows = a.shape[0];
        b->encoding = "npy";
        rc = store_raw(b, a.data, a.itemsize, a.kind == 'i', a.big_endian, h, name, err, errlen);
    }
    npy_free(&a);
    return rc;
}

/* A raw buffer (SGLang): rows must be one of want[0..nwant), L and k the hint's. */
static int decode_flat(const uint8_t *d, size_t len, const capture_hint *h, const int64_t *want,
                       int nwant, const char *name, idbuf *b, char *err, size_t errlen)
{
    static const char *const names[9] = {NULL,        "raw-int8", "raw-int16", NULL, "raw-int32",
                                         NULL,        NULL,       NULL,        "raw-int64"};
    static const int sizes[4] = {4, 2, 1, 8};
    if (!h->L || !h->k)
        return eldr_errf(err, errlen, "%s: a flat buffer of %zu bytes without its shape: give "
                         "--layers and --top-k", name, len);
    size_t row = (size_t)h->L * (size_t)h->k;
    for (int w = 0; w < nwant; w++)
        for (int i = 0; i < 4; i++)
            if (want[w] >= 0 && (size_t)want[w] * row * (size_t)sizes[i] == len) {
                b->L = h->L;
                b->k = h->k;
                b->rows = want[w];
                b->encoding = names[sizes[i]];
                return store_raw(b, d, sizes[i], 1, 0, h, name, err, errlen);
            }
    return eldr_errf(err, errlen, "%s: %zu bytes is not %lld tokens x %d layers x top-%d of 1, 2, "
                     "4 or 8-byte ids (inconsistent shapes)", name, len, (long long)want[0], h->L,
                     h->k);
}

/* Decode one field's span. want: the row counts a flat buffer may have. */
static int decode_field_in(span f, const capture_hint *h, const int64_t *want, int nwant,
                        const char *name, idbuf *b, char *err, size_t errlen)
{
    cj_t s;
    char q[64];
    memset(b, 0, sizeof *b);
    cj_init(&s, f.p, f.n);
    int c = cj_peek(&s), rc;
    if (c == '[') {
        if ((rc = decode_lists(&s, h, name, b, err, errlen)) == 2) {
            cj_init(&s, f.p, f.n);
            rc = decode_lists(&s, h, name, b, err, errlen);
        }
        if (rc < 0 && !err[0])
            eldr_errf(err, errlen, "%s: bad JSON at byte %zu of the field", name, cj_where(&s));
        if (rc == 0 && b->rows == 0 && !b->L && h->L && h->k) {
            b->L = h->L;   /* [] : no tokens; the geometry comes from elsewhere */
            b->k = h->k;
        }
        return rc;
    }
    if (c == '{') {
        err[0] = 0;
        rc = decode_object(&s, h, name, b, err, errlen);
        if (rc < 0 && !err[0])
            eldr_errf(err, errlen, "%s: bad JSON at byte %zu of the field", name, cj_where(&s));
        return rc;
    }
    if (c == '"') {
        const char *p;
        size_t n, len;
        if (cj_string(&s, &p, &n) < 0)
            return eldr_errf(err, errlen, "%s: bad JSON string", name);
        uint8_t *d = unbase64(p, n, &len, name, err, errlen);
        if (!d)
            return -1;
        if (len >= 6 && !memcmp(d, "\x93NUMPY", 6))
            rc = decode_npy(d, len, h, name, b, err, errlen);
        else
            rc = decode_flat(d, len, h, want, nwant, name, b, err, errlen);
        free(d);
        return rc;
    }
    return eldr_errf(err, errlen, "%s: found %s, not routed experts (lists, a base64 object or "
                     "string)", name, quote(f.p, f.n, q, sizeof q));
}

/* The same; on failure b holds nothing. */
static int decode_field(span f, const capture_hint *h, const int64_t *want, int nwant,
                        const char *name, idbuf *b, char *err, size_t errlen)
{
    int rc = decode_field_in(f, h, want, nwant, name, b, err, errlen);
    if (rc < 0)
        idbuf_free(b);
    return rc;
}

/* ---- the walk ---- */

static int read_counts(cj_t *s, int64_t *p, int64_t *c, span *routes)
{
    const char *key;
    size_t kl;
    int n = 0, r;
    cj_expect(s, '{');
    while ((r = cj_next_key(s, &n, &key, &kl)) == 1) {
        int is_p = cj_key_is(key, kl, "prompt_tokens"), is_c = cj_key_is(key, kl, "completion_tokens");
        if ((is_p || is_c) && cj_peek(s) != 'n') {
            if (cj_int(s, is_p ? p : c) < 0)
                return -1;
        } else if (routes && cj_key_is(key, kl, "routed_experts")) {
            const char *v = s->p;
            if (cj_skip_span(s) < 0)
                return -1;
            routes->p = v;
            routes->n = (size_t)(s->p - v);
        } else if (cj_skip(s) < 0) {
            return -1;
        }
    }
    return r;
}

static void keep(span *sp, const char *from, const cj_t *s)
{
    while (from < s->p && (*from == ' ' || *from == '\n' || *from == '\r' || *from == '\t'))
        from++;
    sp->p = from;
    sp->n = (size_t)(s->p - from);
    if (sp->n == 4 && !memcmp(from, "null", 4))
        sp->n = 0;
}

static int walk_choice(cj_t *s, found *f)
{
    const char *key;
    size_t kl;
    int n = 0, r;
    if (cj_peek(s) != '{')
        return cj_skip(s);
    cj_expect(s, '{');
    while ((r = cj_next_key(s, &n, &key, &kl)) == 1) {
        const char *v = s->p;
        if (cj_key_is(key, kl, "routed_experts")) {
            if (cj_skip_span(s) < 0)
                return -1;
            keep(&f->gen, v, s);
        } else if (cj_key_is(key, kl, "sgl_ext") && cj_peek(s) == '{') {
            span sg = {0};
            int64_t dummy_p = -1, dummy_c = -1;
            if (read_counts(s, &dummy_p, &dummy_c, &sg) < 0)
                return -1;
            if (sg.n) {
                cj_t t = {sg.p, sg.p + sg.n, sg.p + sg.n};
                keep(&f->full, sg.p, &t);
                f->full_is_sglang = 1;
                f->full_name = "choices[0].sgl_ext.routed_experts";
            }
        } else if (cj_skip(s) < 0) {
            return -1;
        }
    }
    return r;
}

static int walk(cj_t *s, found *f)
{
    const char *key;
    size_t kl;
    int n = 0, r;
    if (cj_expect(s, '{') < 0)
        return -1;
    while ((r = cj_next_key(s, &n, &key, &kl)) == 1) {
        const char *v = s->p;
        if (cj_key_is(key, kl, "prompt_routed_experts")) {
            if (cj_skip_span(s) < 0)
                return -1;
            keep(&f->prompt, v, s);
        } else if (cj_key_is(key, kl, "choices") && cj_peek(s) == '[') {
            int m = 0, ri;
            cj_expect(s, '[');
            while ((ri = cj_next_item(s, &m)) == 1)
                if ((m == 1 ? walk_choice(s, f) : cj_skip(s)) < 0)
                    return -1;
            if (ri < 0)
                return -1;
        } else if (cj_key_is(key, kl, "usage") && cj_peek(s) == '{') {
            if (read_counts(s, &f->usage_p, &f->usage_c, NULL) < 0)
                return -1;
        } else if (cj_key_is(key, kl, "meta_info") && cj_peek(s) == '{') {
            span sg = {0};
            if (read_counts(s, &f->meta_p, &f->meta_c, &sg) < 0)
                return -1;
            if (sg.n) {
                cj_t t = {sg.p, sg.p + sg.n, sg.p + sg.n};
                keep(&f->full, sg.p, &t);
                f->full_is_sglang = 1;
                f->full_name = "meta_info.routed_experts";
            }
        } else if (cj_skip(s) < 0) {
            return -1;
        }
    }
    if (r < 0)
        return -1;
    return cj_peek(s) == -1 ? 0 : -1;
}

/* ---- putting the rows together ---- */

/* The k ids of a token in a layer are distinct; max_id is over the rows
 * kept (not the dropped last generated row, whose contents are junk).
 * Distinctness with a bitset over the id range: k marks and k clears per
 * token and layer, not k^2 comparisons. */
static int check_ids(capture_routes *o, char *err, size_t errlen)
{
    static _Thread_local uint64_t seen[65536 / 64];
    int64_t rows = o->prompt_tokens + o->decode_rows;
    const uint16_t *x = o->ids;
    unsigned max = 0;
    for (int64_t t = 0; t < rows; t++)
        for (int l = 0; l < o->L; l++, x += o->k) {
            int dup = -1;
            for (int a = 0; a < o->k; a++) {
                uint64_t bit = UINT64_C(1) << (x[a] & 63), *w = &seen[x[a] >> 6];
                if (*w & bit)
                    dup = x[a];
                *w |= bit;
                max = x[a] > max ? x[a] : max;
            }
            for (int a = 0; a < o->k; a++)
                seen[x[a] >> 6] = 0;
            if (dup >= 0)
                return eldr_errf(err, errlen, "%s token %lld layer %d: expert %d picked "
                                 "twice (top-k ids must be distinct)",
                                 t < o->prompt_tokens ? "prompt" : "decode",
                                 (long long)(t < o->prompt_tokens ? t : t - o->prompt_tokens), l,
                                 dup);
        }
    o->max_id = rows ? (int)max : -1;
    return 0;
}

/* out gets P prompt rows from a and D decode rows from g starting at row g0. */
static int assemble(capture_routes *o, const idbuf *a, int64_t P, const idbuf *g, int64_t g0,
                    int64_t C, char *err, size_t errlen)
{
    if (g->L != a->L || g->k != a->k)
        return eldr_errf(err, errlen, "prompt routing is %d layers x top-%d, generation %d x "
                         "top-%d (inconsistent shapes)", a->L, a->k, g->L, g->k);
    o->L = a->L;
    o->k = a->k;
    o->prompt_tokens = P;
    o->completion_tokens = C;
    o->decode_rows = C > 0 ? C - 1 : 0;
    o->encoding = a->encoding ? a->encoding : g->encoding;
    size_t row = (size_t)o->L * (size_t)o->k;
    o->ids = malloc(((size_t)(P + o->decode_rows) * row + 1) * sizeof *o->ids);
    if (!o->ids)
        return eldr_errf(err, errlen, "out of memory for %lld tokens",
                         (long long)(P + o->decode_rows));
    if (P)
        memcpy(o->ids, a->ids, (size_t)P * row * sizeof *o->ids);
    if (o->decode_rows)
        memcpy(o->ids + (size_t)P * row, g->ids + (size_t)g0 * row,
               (size_t)o->decode_rows * row * sizeof *o->ids);
    return check_ids(o, err, errlen);
}

/* vLLM with separate prompt and generation arrays. */
static int split_two(const found *f, const capture_hint *h, capture_routes *o, char *err,
                     size_t errlen)
{
    idbuf a, g;
    const char *pn = "prompt_routed_experts", *gn = "choices[0].routed_experts";
    int64_t pw[1] = {f->usage_p}, gw[2] = {f->usage_c >= 1 ? f->usage_c - 1 : f->usage_c,
                                           f->usage_c};
    int rc = decode_field(f->prompt, h, pw, 1, pn, &a, err, errlen);
    if (rc == 0) {
        capture_hint h2 = *h;
        h2.L = a.L;
        h2.k = a.k;
        h2.from = pn;
        rc = decode_field(f->gen, a.L ? &h2 : h, gw, 2, gn, &g, err, errlen);
        if (rc < 0) {
            idbuf_free(&a);
            return -1;
        }
    } else {
        return -1;
    }
    int64_t C = f->usage_c >= 0 ? f->usage_c : g.rows;
    if (f->usage_p >= 0 && a.rows != f->usage_p)
        rc = eldr_errf(err, errlen, "%s has %lld tokens, usage.prompt_tokens says %lld "
                       "(inconsistent shapes)", pn, (long long)a.rows, (long long)f->usage_p);
    else if (g.rows > C || g.rows < (C > 0 ? C - 1 : 0))
        rc = eldr_errf(err, errlen, "%s has %lld tokens for %lld completion tokens (expected %lld "
                       "or %lld; inconsistent shapes)", gn, (long long)g.rows, (long long)C,
                       (long long)(C > 0 ? C - 1 : 0), (long long)C);
    else if (!a.L && !g.L)
        rc = eldr_errf(err, errlen, "%s and %s are both empty", pn, gn);
    else {
        if (!a.L)
            a.L = g.L, a.k = g.k;
        if (!g.L)
            g.L = a.L, g.k = a.k;
        rc = assemble(o, &a, a.rows, &g, 0, C, err, errlen);
    }
    idbuf_free(&a);
    idbuf_free(&g);
    return rc;
}

/* One array over the whole sequence: prompt rows, then generated ones. */
static int split_full(const found *f, span full, const char *name, int64_t P, int64_t C,
                      const char *pname, const capture_hint *h, capture_routes *o, char *err,
                      size_t errlen)
{
    if (P < 0 || C < 0)
        return eldr_errf(err, errlen, "%s covers prompt and completion, but the answer has no "
                         "%s.prompt_tokens and completion_tokens to split it", name, pname);
    int64_t want[2] = {C > 0 ? P + C - 1 : P, P + C};
    idbuf b;
    if (decode_field(full, h, want, f->full_is_sglang ? 1 : 2, name, &b, err, errlen) < 0)
        return -1;
    int rc;
    if (b.rows != want[0] && b.rows != want[1])
        rc = eldr_errf(err, errlen, "%s has %lld tokens; %lld prompt + %lld completion tokens "
                       "make %lld (or %lld) (inconsistent shapes)", name, (long long)b.rows,
                       (long long)P, (long long)C, (long long)want[0], (long long)want[1]);
    else if (!b.L)
        rc = eldr_errf(err, errlen, "%s is empty", name);
    else
        rc = assemble(o, &b, P, &b, P, C, err, errlen);
    idbuf_free(&b);
    return rc;
}

int capture_decode(const char *body, size_t len, const capture_hint *hint, capture_routes *out,
                   char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->max_id = -1;
    found f = {.usage_p = -1, .usage_c = -1, .meta_p = -1, .meta_c = -1};
    cj_t s;
    cj_init(&s, body, len);
    if (cj_peek(&s) != '{') {
        char q[64];
        return eldr_errf(err, errlen, "the answer is not a JSON object: %s",
                         quote(body, len, q, sizeof q));
    }
    if (walk(&s, &f) < 0)
        return eldr_errf(err, errlen, "the answer is not valid JSON (byte %zu of %zu)",
                         cj_where(&s), len);
    err[0] = 0;
    int rc;
    if (f.full.n && f.full_is_sglang && f.meta_p >= 0)
        rc = split_full(&f, f.full, f.full_name, f.meta_p, f.meta_c, "meta_info", hint, out, err,
                        errlen);
    else if (f.full.n)
        rc = split_full(&f, f.full, f.full_name, f.usage_p, f.usage_c, "usage", hint, out, err,
                        errlen);
    else if (f.gen.n && f.prompt.n)
        rc = split_two(&f, hint, out, err, errlen);
    else if (f.gen.n) {
        f.full_is_sglang = 0;
        rc = split_full(&f, f.gen, "choices[0].routed_experts", f.usage_p, f.usage_c, "usage",
                        hint, out, err, errlen);
    } else
        return eldr_errf(err, errlen, "the answer has no routed experts (%s)",
                         CAPTURE_NO_ROUTES_HINT);
    if (rc < 0) {
        capture_routes_free(out);
        if (!err[0])
            eldr_errf(err, errlen, "routed experts: bad answer");
    }
    return rc;
}

void capture_routes_free(capture_routes *r)
{
    free(r->ids);
    memset(r, 0, sizeof *r);
    r->max_id = -1;
}
