/* sim_distinct.c - distinct experts per layer of a step's token rows
 * (sim_distinct.h). */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "sim_distinct.h"

/* Largest stamp array ([L][E] words) read row by row: it stays in the
 * core's cache while the rows stream through. */
#define STAMPS_BY_ROW ((size_t)64 << 10)

int sim_distinct_init(sim_distinct *d, int L, int E, int k, int id_bytes, int simd_ok,
                      char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->L = L;
    d->E = E;
    d->k = k;
    d->id_bytes = id_bytes;
    d->simd = simd_ok && id_bytes == 1 && E <= 256 && __builtin_cpu_supports("avx2") &&
              __builtin_cpu_supports("popcnt");
    if (d->simd)
        return 0;
    d->by_row = (size_t)L * E * sizeof *d->stamp <= STAMPS_BY_ROW;
    d->stamp = calloc((size_t)L * E, sizeof *d->stamp);
    if (!d->stamp)
        return eldr_errf(err, errlen, "sim: out of memory for %d x %d expert stamps", L, E);
    return 0;
}

void sim_distinct_free(sim_distinct *d)
{
    free(d->stamp);
    memset(d, 0, sizeof *d);
}

/* ---- AVX2: a layer's experts as W words of bits in registers ---- */

/* Bits of the four one-byte ids of v (zero-extended to 64-bit lanes)
 * into acc[0..W): word c takes 1 << (id - 64c), and a variable shift by
 * 64 or more (a negative difference included, as unsigned) gives 0, so
 * each id lands in its own word alone. */
__attribute__((target("avx2,popcnt"), always_inline)) static inline void
or_bits(__m256i *acc, __m256i v, int W)
{
    const __m256i one = _mm256_set1_epi64x(1);
    for (int c = 0; c < W; c++)
        acc[c] = _mm256_or_si256(
            acc[c], _mm256_sllv_epi64(one, _mm256_sub_epi64(v, _mm256_set1_epi64x(64 * c))));
}

__attribute__((target("avx2,popcnt"), always_inline)) static inline void
count_simd(const sim_distinct *d, const uint8_t *const *rows, int nb, int *U, int W)
{
    int L = d->L, k = d->k, k4 = k & ~3, tail = k - k4;
    /* lanes past the tail's ids: 1 << 16, a shift no word keeps */
    const __m256i pad = _mm256_set_epi64x(tail < 4 ? 1 << 16 : 0, tail < 3 ? 1 << 16 : 0,
                                          tail < 2 ? 1 << 16 : 0, 0);
    for (int l = 0; l < L; l++) {
        __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                          _mm256_setzero_si256(), _mm256_setzero_si256()};
        size_t at = (size_t)l * k;
        for (int b = 0; b < nb; b++) {
            const uint8_t *p = rows[b] + at;
            uint32_t x;
            for (int j = 0; j < k4; j += 4) {
                memcpy(&x, p + j, 4);
                or_bits(acc, _mm256_cvtepu8_epi64(_mm_cvtsi32_si128((int)x)), W);
            }
            if (tail) { /* never read past the row */
                x = 0;
                memcpy(&x, p + k4, (size_t)tail);
                __m256i v = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128((int)x));
                or_bits(acc, _mm256_or_si256(v, pad), W);
            }
        }
        int u = 0;
        for (int c = 0; c < W; c++) {
            __m128i o = _mm_or_si128(_mm256_castsi256_si128(acc[c]),
                                     _mm256_extracti128_si256(acc[c], 1));
            u += __builtin_popcountll((uint64_t)_mm_cvtsi128_si64(o) |
                                      (uint64_t)_mm_extract_epi64(o, 1));
        }
        U[l] = u;
    }
}

/* One body per word count, so that the loop over words unrolls. */
__attribute__((target("avx2,popcnt"))) static void simd_count(const sim_distinct *d,
                                                             const uint8_t *const *rows,
                                                             int nb, int *U)
{
    switch ((d->E + 63) / 64) {
    case 1:
        count_simd(d, rows, nb, U, 1);
        break;
    case 2:
        count_simd(d, rows, nb, U, 2);
        break;
    case 3:
        count_simd(d, rows, nb, U, 3);
        break;
    default:
        count_simd(d, rows, nb, U, 4);
        break;
    }
}

/* ---- stamps ---- */

/* One layer of one row through that layer's stamps st. */
#define STAMP_IDS(T, p)                                                          \
    do {                                                                       \
        const T *ids_ = (const T *)(p);                                        \
        for (int j = 0; j < k; j++) {                                          \
            u += st[ids_[j]] != gen;                                           \
            st[ids_[j]] = gen;                                                 \
        }                                                                      \
    } while (0)

/* id_bytes is a constant where this is inlined. The order of the marks
 * does not change the counts, only the memory traffic: row by row each
 * row is read once, front to back; layer by layer one layer's stamps
 * stay in cache while every row's ids of that layer go through them. */
static inline __attribute__((always_inline)) void
count_stamped(sim_distinct *d, const char *const *rows, int nb, int *U, int id_bytes)
{
    int L = d->L, E = d->E, k = d->k;
    size_t lw = (size_t)k * id_bytes; /* bytes of one layer of a row */
    if (++d->gen == 0) {
        memset(d->stamp, 0, (size_t)L * E * sizeof *d->stamp);
        d->gen = 1;
    }
    uint32_t gen = d->gen;
    if (d->by_row) {
        memset(U, 0, (size_t)L * sizeof *U);
        for (int b = 0; b < nb; b++)
            for (int l = 0; l < L; l++) {
                uint32_t *st = d->stamp + (size_t)l * E;
                int u = 0;
                if (id_bytes == 1)
                    STAMP_IDS(uint8_t, rows[b] + l * lw);
                else
                    STAMP_IDS(uint16_t, rows[b] + l * lw);
                U[l] += u;
            }
        return;
    }
    for (int l = 0; l < L; l++) {
        uint32_t *st = d->stamp + (size_t)l * E;
        int u = 0;
        for (int b = 0; b < nb; b++) {
            if (id_bytes == 1)
                STAMP_IDS(uint8_t, rows[b] + l * lw);
            else
                STAMP_IDS(uint16_t, rows[b] + l * lw);
        }
        U[l] = u;
    }
}

void sim_distinct_count(sim_distinct *d, const void *const *rows, int nb, int *U)
{
    if (d->simd)
        simd_count(d, (const uint8_t *const *)rows, nb, U);
    else if (d->id_bytes == 1)
        count_stamped(d, (const char *const *)rows, nb, U, 1);
    else
        count_stamped(d, (const char *const *)rows, nb, U, 2);
}
