/* routed_field.c - one routed-experts field into rows of ids
 * (routed_field.h): nested lists, vLLM's base64 object, a base64 .npy,
 * or a raw little-endian buffer whose item size follows from its length. */
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "b64.h"
#include "routed_field.h"
#include "json_scan.h"
#include "err.h"
#include "npy.h"

void routed_idbuf_free(idbuf *b)
{
    free(b->ids);
    memset(b, 0, sizeof *b);
}

/* The first bytes of a value, printable, for "found ..." messages. */
const char *routed_quote(const char *p, size_t n, char *buf, size_t cap)
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
static inline int check_id(int64_t v, int E, const char *name, int64_t row, int l,
                           char *err, size_t errlen)
{
    if (v < 0)
        return eldr_errf(err, errlen,
                         "%s token %lld layer %d: expert id %lld (the engine has no routing "
                         "for this position)", name, (long long)row, l, (long long)v);
    if (v > 65535 || (E > 0 && v >= E))
        return eldr_errf(err, errlen, "%s token %lld layer %d: expert id %lld is not below %d%s",
                         name, (long long)row, l, (long long)v, E > 0 ? E : 65536,
                         E > 0 ? " (--experts)" : "");
    return 0;
}

static int set_geometry(idbuf *b, int64_t L, int64_t k, const routed_hint *h, const char *name,
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
static int decode_lists(cj_t *s, const routed_hint *h, const char *name, idbuf *b, char *err,
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
                    if (v == -1 && h->unrouted_ok)
                        b->minus1 = 1, v = ROUTED_NO_ROUTE;
                    else if (check_id(v, h->E, name, row, l, err, errlen) < 0)
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
            return 2;          /* the caller parses the field again, now storing */
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
 * endian uint8/uint16 from vLLM and SGLang, int16 and int32) take a tight loop that only
 * notes whether some id is out of range; the general loop then finds it
 * and says which. */
static int store_raw(idbuf *b, const uint8_t *d, int itemsize, int is_signed, int big,
                     const routed_hint *h, const char *name, char *err, size_t errlen)
{
    size_t row = (size_t)b->L * (size_t)b->k, n = (size_t)b->rows * row;
    if (grow(b, b->rows ? b->rows : 1, err, errlen) < 0)
        return -1;
    uint32_t limit = h->E > 0 ? (uint32_t)h->E : 65536;
    if (!big && !is_signed && itemsize <= 2) {
        /* vLLM's and SGLang's narrow wire types: every value is an id below 65536 */
        /* one loop per width, so that each is a plain widening copy the
         * compiler vectorises (a 4,096-token answer at L 48, k 8 is 1.6M ids) */
        uint32_t over = 0;
        uint16_t *restrict o = b->ids;
        const uint8_t *restrict s = d;
        if (itemsize == 1) {
            uint8_t top = 0;
            size_t i = 0;
#if defined(__SSE2__)
            /* 16 ids at a time: widened by an unpack with zero, the top
             * kept by an unsigned byte max (vLLM's uint8 answers) */
            __m128i z = _mm_setzero_si128(), mx = z;
            for (; i + 16 <= n; i += 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
                mx = _mm_max_epu8(mx, v);
                _mm_storeu_si128((__m128i *)(void *)(o + i), _mm_unpacklo_epi8(v, z));
                _mm_storeu_si128((__m128i *)(void *)(o + i + 8), _mm_unpackhi_epi8(v, z));
            }
            uint8_t lanes[16];
            _mm_storeu_si128((__m128i *)(void *)lanes, mx);
            for (int j = 0; j < 16; j++)
                top = lanes[j] > top ? lanes[j] : top;
#endif
            for (; i < n; i++) {
                top = s[i] > top ? s[i] : top;
                o[i] = s[i];
            }
            over = top >= limit;
        } else {
            uint16_t top = 0;
            for (size_t i = 0; i < n; i++) {
                uint16_t v = (uint16_t)(s[2 * i] | s[2 * i + 1] << 8);
                top = v > top ? v : top;
                o[i] = v;
            }
            over = top >= limit;
        }
        if (!over)
            return 0;
    } else if (!big && is_signed && (itemsize == 2 || itemsize == 4)) {
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
        if (v == -1 && h->unrouted_ok)
            b->minus1 = 1, v = ROUTED_NO_ROUTE;
        else if (check_id(v, h->E, name, (int64_t)(i / row), (int)(i % row / (size_t)b->k), err,
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
                  "whole bytes)", name, routed_quote(p, n, q, sizeof q), n);
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
                  routed_quote(p, n, q, sizeof q), bad);
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
static int decode_object(cj_t *s, const routed_hint *h, const char *name, idbuf *b, char *err,
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
                         routed_quote(enc, encn, q, sizeof q));
    if (!data || !dt || ndim < 0)
        return eldr_errf(err, errlen, "%s: an object without %s (expected encoding, dtype, "
                         "shape, data)", name, !data ? "\"data\"" : !dt ? "\"dtype\"" : "\"shape\"");
    if (ndim != 3)
        return eldr_errf(err, errlen, "%s: shape has %d sizes, expected [tokens, layers, top_k]",
                         name, ndim);
    int isz, sgn, big;
    if (parse_dtype(dt, dtn, &isz, &sgn, &big) < 0)
        return eldr_errf(err, errlen, "%s: dtype \"%s\" is not an integer type", name,
                         routed_quote(dt, dtn, q, sizeof q));
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
static int decode_npy(const uint8_t *d, size_t len, const routed_hint *h, const char *name,
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

/* A raw buffer (SGLang): rows must be one of want[0..nwant), L and k the
 * hint's. SGLang sends int32, or uint16/uint8 when the server runs with
 * SGLANG_ROUTED_EXPERTS_DTYPE (routed_experts_capturer.py): one dtype per
 * item size, so the byte length tells which, and narrow ids are unsigned
 * (uint8 id 200 is expert 200, not -56). A dtype the answer names
 * (meta_info.routed_experts_dtype) is taken as named and must fit. */
static int decode_flat(const uint8_t *d, size_t len, const routed_hint *h, const int64_t *want,
                       int nwant, span dtype, const char *name, idbuf *b, char *err,
                       size_t errlen)
{
    static const struct { int size, sgn; const char *name; } kinds[4] = {
        {4, 1, "raw-int32"}, {2, 0, "raw-uint16"}, {1, 0, "raw-uint8"}, {8, 1, "raw-int64"}};
    char q[64];
    int nk = 4, named_size = 0, named_sgn = 0, big = 0;
    if (!h->L || !h->k)
        return eldr_errf(err, errlen, "%s: a flat buffer of %zu bytes without its shape: give "
                         "--layers and --top-k", name, len);
    if (dtype.n && (parse_dtype(dtype.p, dtype.n, &named_size, &named_sgn, &big) < 0 || big))
        return eldr_errf(err, errlen, "%s: routed_experts_dtype \"%s\" is not a little-endian "
                         "integer type", name, routed_quote(dtype.p, dtype.n, q, sizeof q));
    size_t row = (size_t)h->L * (size_t)h->k;
    for (int w = 0; w < nwant; w++)
        for (int i = 0; i < nk; i++) {
            int size = dtype.n ? named_size : kinds[i].size;
            if (want[w] < 0 || (size_t)want[w] * row * (size_t)size != len)
                continue;
            b->L = h->L;
            b->k = h->k;
            b->rows = want[w];
            b->encoding = dtype.n ? "raw" : kinds[i].name;
            return store_raw(b, d, size, dtype.n ? named_sgn : kinds[i].sgn, 0, h, name, err,
                             errlen);
        }
    if (dtype.n)
        return eldr_errf(err, errlen, "%s: %zu bytes is not %lld tokens x %d layers x top-%d of "
                         "%d-byte ids (its routed_experts_dtype; inconsistent shapes)", name, len,
                         (long long)want[0], h->L, h->k, named_size);
    return eldr_errf(err, errlen, "%s: %zu bytes is not %lld tokens x %d layers x top-%d of 1, 2, "
                     "4 or 8-byte ids (inconsistent shapes)", name, len, (long long)want[0], h->L,
                     h->k);
}

/* Decode one field's span (routed_field.h). */
static int decode_field_in(span f, const routed_hint *h, const int64_t *want, int nwant,
                           span dtype, const char *name, idbuf *b, char *err, size_t errlen)
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
            rc = decode_flat(d, len, h, want, nwant, dtype, name, b, err, errlen);
        free(d);
        return rc;
    }
    return eldr_errf(err, errlen, "%s: found %s, not routed experts (lists, a base64 object or "
                     "string)", name, routed_quote(f.p, f.n, q, sizeof q));
}

int routed_decode_field(span f, const routed_hint *h, const int64_t *want, int nwant,
                         span dtype, const char *name, idbuf *b, char *err, size_t errlen)
{
    int rc = decode_field_in(f, h, want, nwant, dtype, name, b, err, errlen);
    if (rc < 0)
        routed_idbuf_free(b);
    return rc;
}
