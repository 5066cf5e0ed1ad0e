/* b64.c - base64 decoding and encoding (b64.h). */
#include "b64.h"

#include <string.h>

static const char ALPHABET[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* 6-bit value of each byte; BAD (high bit set) outside the alphabet, so
 * four lookups OR'ed together tell at once whether a quad is clean. */
#define BAD 0x80
#define R4(x) x, x, x, x
#define R16(x) R4(x), R4(x), R4(x), R4(x)
static const uint8_t VALUE[256] = {
    R16(BAD), R16(BAD),                                     /* 0x00-0x1f */
    R4(BAD), R4(BAD), BAD, BAD, BAD, 62, BAD, BAD, BAD, 63, /* 0x20-0x2f: + / */
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, BAD, BAD, BAD, BAD, BAD, BAD, /* 0-9 */
    BAD, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,                /* A-O */
    15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, BAD, BAD, BAD, BAD, BAD,  /* P-Z */
    BAD, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,      /* a-o */
    41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, BAD, BAD, BAD, BAD, BAD,  /* p-z */
    R16(BAD), R16(BAD), R16(BAD), R16(BAD), R16(BAD), R16(BAD), R16(BAD), R16(BAD),
};

/* The same values placed where they go in a quad's 24 bits, one table
 * per position, so that a quad decodes with four lookups and three ORs;
 * a byte outside the alphabet sets bit 24 in every table (DBAD), so one
 * test of the OR tells whether the quad is clean. Built by the compiler. */
#define DBAD 0x01000000u
#define B64V(c)                                                                            \
    ((c) >= 'A' && (c) <= 'Z'   ? (c) - 'A'                                                \
     : (c) >= 'a' && (c) <= 'z' ? (c) - 'a' + 26                                           \
     : (c) >= '0' && (c) <= '9' ? (c) - '0' + 52                                           \
     : (c) == '+'               ? 62                                                       \
     : (c) == '/'               ? 63                                                       \
                                : -1)
#define AT(c, sh) (B64V(c) < 0 ? DBAD : (uint32_t)B64V(c) << (sh))
#define T4(c, sh) AT(c, sh), AT((c) + 1, sh), AT((c) + 2, sh), AT((c) + 3, sh)
#define T16(c, sh) T4(c, sh), T4((c) + 4, sh), T4((c) + 8, sh), T4((c) + 12, sh)
#define T64(c, sh) T16(c, sh), T16((c) + 16, sh), T16((c) + 32, sh), T16((c) + 48, sh)
#define T256(sh) T64(0, sh), T64(64, sh), T64(128, sh), T64(192, sh)
static const uint32_t D0[256] = {T256(18)}, D1[256] = {T256(12)}, D2[256] = {T256(6)},
                      D3[256] = {T256(0)};

/* Characters before the padding: at most two '=', and only when they
 * complete a quad. */
static size_t unpadded(const char *src, size_t n)
{
    size_t body = n;
    if (n % 4 == 0) {
        if (body > 0 && src[body - 1] == '=')
            body--;
        if (body > 0 && src[body - 1] == '=')
            body--;
    }
    return body;
}

size_t b64_decoded_len(const char *src, size_t n)
{
    size_t body = unpadded(src, n);
    if (body % 4 == 1)   /* 6 bits cannot end a byte */
        return (size_t)-1;
    return body / 4 * 3 + (body % 4 ? body % 4 - 1 : 0);
}

static size_t first_bad(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n && !(VALUE[s[i]] & BAD))
        i++;
    return i;
}

/* The scalar decoder from quad q0 on (the vector path did those before). */
static int decode_from(const unsigned char *src, size_t body, size_t q0, uint8_t *out,
                       size_t *outlen, size_t *bad_at)
{
    size_t quads = body / 4, tail = body % 4, o = q0 * 3;
    const unsigned char *s = src + q0 * 4;
    for (size_t q = q0; q < quads; q++, s += 4) {
        uint32_t v = D0[s[0]] | D1[s[1]] | D2[s[2]] | D3[s[3]];
        if (v & DBAD) {
            *bad_at = q * 4 + first_bad(s, 4);
            return -1;
        }
        out[o] = (uint8_t)(v >> 16);
        out[o + 1] = (uint8_t)(v >> 8);
        out[o + 2] = (uint8_t)v;
        o += 3;
    }
    size_t bad = first_bad(s, tail);
    if (bad < tail) {
        *bad_at = quads * 4 + bad;
        return -1;
    }
    if (tail == 1) {
        *bad_at = body - 1;
        return -1;
    }
    if (tail >= 2) {
        uint32_t v = (uint32_t)VALUE[s[0]] << 18 | (uint32_t)VALUE[s[1]] << 12 |
                     (tail == 3 ? (uint32_t)VALUE[s[2]] << 6 : 0);
        out[o++] = (uint8_t)(v >> 16);
        if (tail == 3)
            out[o++] = (uint8_t)(v >> 8);
    }
    *outlen = o;
    return 0;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <tmmintrin.h>
#define B64_VECTOR 1

/* Sixteen characters at a time with SSSE3 (every x86-64 made since 2008
 * has it; checked at run time): each byte's two nibbles look up whether
 * it is in the alphabet and what to add to it to get its 6-bit value
 * (Mula and Lemire's method, "Faster Base64 Encoding and Decoding Using
 * AVX2 Instructions", 2018); two multiply-adds pack four values into 24
 * bits and a shuffle puts the 12 bytes in order. A block with any
 * character outside the alphabet is left to the scalar decoder, which
 * names it. Returns the quads decoded (a multiple of four). */
__attribute__((target("ssse3"))) static size_t decode_vector(const unsigned char *s,
                                                              size_t quads, uint8_t *out)
{
    const __m128i lut_lo = _mm_setr_epi8(0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
                                         0x11, 0x13, 0x1a, 0x1b, 0x1b, 0x1b, 0x1a);
    const __m128i lut_hi = _mm_setr_epi8(0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10,
                                         0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10);
    const __m128i lut_roll = _mm_setr_epi8(0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0,
                                           0, 0);
    const __m128i nib = _mm_set1_epi8(0x2f), zero = _mm_setzero_si128();
    const __m128i ab_bc = _mm_set1_epi32(0x01400140), abcd = _mm_set1_epi32(0x00011000);
    const __m128i order = _mm_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
    size_t q = 0;
    for (; q + 4 <= quads; q += 4, s += 16, out += 12) {
        __m128i in = _mm_loadu_si128((const __m128i *)(const void *)s);
        /* nib keeps bits 0-3 (the index) and bit 5, which pshufb ignores */
        __m128i hi = _mm_and_si128(_mm_srli_epi32(in, 4), nib), lo = _mm_and_si128(in, nib);
        __m128i bad = _mm_and_si128(_mm_shuffle_epi8(lut_lo, lo), _mm_shuffle_epi8(lut_hi, hi));
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(bad, zero)) != 0xffff)
            break;
        __m128i roll = _mm_shuffle_epi8(lut_roll, _mm_add_epi8(_mm_cmpeq_epi8(in, nib), hi));
        __m128i v = _mm_add_epi8(in, roll);
        v = _mm_madd_epi16(_mm_maddubs_epi16(v, ab_bc), abcd);
        v = _mm_shuffle_epi8(v, order);
        _mm_storel_epi64((__m128i *)(void *)out, v);
        uint32_t last = (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(v, 8));
        memcpy(out + 8, &last, 4);
    }
    return q;
}
#endif

int b64_decode(const char *src, size_t n, uint8_t *out, size_t *outlen, size_t *bad_at)
{
    size_t body = unpadded(src, n), q0 = 0;
#ifdef B64_VECTOR
    if (__builtin_cpu_supports("ssse3"))
        q0 = decode_vector((const unsigned char *)src, body / 4, out);
#endif
    return decode_from((const unsigned char *)src, body, q0, out, outlen, bad_at);
}

int b64_decode_scalar(const char *src, size_t n, uint8_t *out, size_t *outlen,
                      size_t *bad_at)
{
    return decode_from((const unsigned char *)src, unpadded(src, n), 0, out, outlen, bad_at);
}

void b64_encode(const uint8_t *src, size_t n, char *dst)
{
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
        dst[o++] = ALPHABET[v >> 18];
        dst[o++] = ALPHABET[(v >> 12) & 63];
        dst[o++] = ALPHABET[(v >> 6) & 63];
        dst[o++] = ALPHABET[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)src[i] << 16 | (i + 1 < n ? (uint32_t)src[i + 1] << 8 : 0);
        dst[o++] = ALPHABET[v >> 18];
        dst[o++] = ALPHABET[(v >> 12) & 63];
        dst[o++] = i + 1 < n ? ALPHABET[(v >> 6) & 63] : '=';
        dst[o++] = '=';
    }
    dst[o] = '\0';
}
