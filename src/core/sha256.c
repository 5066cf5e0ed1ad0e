/* sha256.c - SHA-256 per FIPS 180-4 (see sha256.h). */
#include "sha256.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "err.h"

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
};

static inline uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress(uint32_t h[8], const uint8_t blk[64])
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)blk[4 * i] << 24 | (uint32_t)blk[4 * i + 1] << 16 |
               (uint32_t)blk[4 * i + 2] << 8 | (uint32_t)blk[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    uint32_t e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) +
                      K256[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d;
    h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

/* ---- the SHA extensions (x86 SHA-NI): the same compression, two rounds
 * an instruction, about five times the portable code. The state is kept
 * as the instructions want it, ABEF and CDGH. ---- */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define SHA256_NI 1

__attribute__((target("sha,sse4.1"))) static void compress_ni(uint32_t h[8], const uint8_t *p,
                                                              size_t blocks)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1); /* CDAB */
    __m128i st1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B); /* EFGH */
    __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);                                    /* ABEF */
    st1 = _mm_blend_epi16(st1, tmp, 0xF0);                                         /* CDGH */
    for (; blocks > 0; blocks--, p += 64) {
        __m128i abef = st0, cdgh = st1, w[4];
        for (int g = 0; g < 16; g++) { /* rounds 4g .. 4g+3 */
            __m128i *m = &w[g & 3];
            if (g < 4)
                *m = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
            else /* W[t-16] + s0(W[t-15]) + W[t-7], then + s1(W[t-2]) */
                *m = _mm_sha256msg2_epu32(
                    _mm_add_epi32(_mm_sha256msg1_epu32(*m, w[(g + 1) & 3]),
                                  _mm_alignr_epi8(w[(g + 3) & 3], w[(g + 2) & 3], 4)),
                    w[(g + 3) & 3]);
            __m128i k = _mm_add_epi32(*m, _mm_loadu_si128((const __m128i *)&K256[4 * g]));
            st1 = _mm_sha256rnds2_epu32(st1, st0, k);
            st0 = _mm_sha256rnds2_epu32(st0, st1, _mm_shuffle_epi32(k, 0x0E));
        }
        st0 = _mm_add_epi32(st0, abef);
        st1 = _mm_add_epi32(st1, cdgh);
    }
    tmp = _mm_shuffle_epi32(st0, 0x1B);     /* FEBA */
    st1 = _mm_shuffle_epi32(st1, 0xB1);     /* DCHG */
    st0 = _mm_blend_epi16(tmp, st1, 0xF0);  /* DCBA */
    st1 = _mm_alignr_epi8(st1, tmp, 8);     /* HGFE */
    _mm_storeu_si128((__m128i *)&h[0], st0);
    _mm_storeu_si128((__m128i *)&h[4], st1);
}

/* CPUID: SHA (leaf 7, EBX bit 29) and SSE4.1 (leaf 1, ECX bit 19); asked
 * directly, as not every compiler's __builtin_cpu_supports knows "sha",
 * and once (CPUID may trap to a hypervisor), every thread finding the
 * same answer. */
static int has_sha_ni(void)
{
    static _Atomic int known = -1;
    int v = atomic_load_explicit(&known, memory_order_relaxed);
    if (v >= 0)
        return v;
    unsigned a, b, c, d;
    v = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)) &&
        __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
    atomic_store_explicit(&known, v, memory_order_relaxed);
    return v;
}
#endif

/* blocks whole 64-byte blocks of p into h, by the SHA extensions when
 * the CPU has them (the in-sample check hashes whole traces: 166 MB for
 * issue 34's), else the portable code. */
static void compress_blocks(uint32_t h[8], const uint8_t *p, size_t blocks)
{
#ifdef SHA256_NI
    if (has_sha_ni()) {
        compress_ni(h, p, blocks);
        return;
    }
#endif
    for (; blocks > 0; blocks--, p += 64)
        compress(h, p);
}

void sha256_init(sha256_ctx *c)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->bytes = 0;
    c->nbuf = 0;
}

void sha256_update(sha256_ctx *c, const void *data, size_t n)
{
    const uint8_t *p = data;
    c->bytes += n;
    if (c->nbuf) {
        size_t take = 64 - c->nbuf < n ? 64 - c->nbuf : n;
        memcpy(c->buf + c->nbuf, p, take);
        c->nbuf += take;
        p += take;
        n -= take;
        if (c->nbuf < 64)
            return;
        compress_blocks(c->h, c->buf, 1);
        c->nbuf = 0;
    }
    compress_blocks(c->h, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
    memcpy(c->buf, p, n);
    c->nbuf = n;
}

void sha256_final(sha256_ctx *c, uint8_t digest[SHA256_DIGEST])
{
    uint64_t bits = c->bytes * 8;
    /* pad: 0x80, zeros to 56 mod 64, then the bit length big-endian */
    c->buf[c->nbuf++] = 0x80;
    if (c->nbuf > 56) {
        memset(c->buf + c->nbuf, 0, 64 - c->nbuf);
        compress_blocks(c->h, c->buf, 1);
        c->nbuf = 0;
    }
    memset(c->buf + c->nbuf, 0, 56 - c->nbuf);
    for (int i = 0; i < 8; i++)
        c->buf[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    compress_blocks(c->h, c->buf, 1);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(c->h[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        digest[4 * i + 3] = (uint8_t)c->h[i];
    }
}

void sha256_hex(const uint8_t digest[SHA256_DIGEST], char hex[SHA256_HEX])
{
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < SHA256_DIGEST; i++) {
        hex[2 * i] = d[digest[i] >> 4];
        hex[2 * i + 1] = d[digest[i] & 15];
    }
    hex[2 * SHA256_DIGEST] = '\0';
}

void sha256_buf_hex(const void *data, size_t n, char hex[SHA256_HEX])
{
    sha256_ctx c;
    uint8_t dg[SHA256_DIGEST];
    sha256_init(&c);
    sha256_update(&c, data, n);
    sha256_final(&c, dg);
    sha256_hex(dg, hex);
}

int sha256_file(const char *path, char hex[SHA256_HEX], char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return eldr_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    sha256_ctx c;
    uint8_t buf[1 << 16], dg[SHA256_DIGEST];
    size_t n;
    sha256_init(&c);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        sha256_update(&c, buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad)
        return eldr_errf(err, errlen, "%s: read error while hashing", path);
    sha256_final(&c, dg);
    sha256_hex(dg, hex);
    return 0;
}
