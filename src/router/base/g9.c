/* g9.c - "%.9g" without printf (g9.h).
 *
 * For 1e-10 <= |v| < 1e15, v = m * 2^e exactly (m < 2^53). With X the
 * decimal exponent of v, the digits are D = round(v * 10^(8 - X)), an
 * integer in [1e8, 1e9): computed as a quotient and remainder of 128-bit
 * integers, so the rounding is exact. Then %g's layout: fixed notation
 * for -4 <= X < 9, else d.dddddddde±XX; trailing zeros dropped. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "g9.h"

typedef unsigned __int128 u128;

static const uint64_t POW10[] = {1ULL,
                                 10ULL,
                                 100ULL,
                                 1000ULL,
                                 10000ULL,
                                 100000ULL,
                                 1000000ULL,
                                 10000000ULL,
                                 100000000ULL,
                                 1000000000ULL,
                                 10000000000ULL,
                                 100000000000ULL,
                                 1000000000000ULL,
                                 10000000000000ULL,
                                 100000000000000ULL,
                                 1000000000000000ULL,
                                 10000000000000000ULL,
                                 100000000000000000ULL,
                                 1000000000000000000ULL,
                                 10000000000000000000ULL};

/* q = floor(m * 2^e * 10^k), and how the rest compares with one half:
 * -1 below, 0 equal, 1 above. k in -7..19, e in -86..-3. */
static uint64_t scaled(uint64_t m, int e, int k, int *half)
{
    u128 num = m, den = (u128)1 << -e;
    if (k >= 0)
        num *= POW10[k];
    else
        den *= POW10[-k];
    u128 q = num / den, r = num % den;
    u128 twice = r * 2;   /* r < den < 2^72: no overflow */
    *half = twice < den ? -1 : twice == den ? 0 : 1;
    return (uint64_t)q;
}

/* The 9 digits and decimal exponent of x (1e-10 <= x < 1e15). */
static uint64_t digits9(double x, int *X)
{
    int e2;
    double f = frexp(x, &e2);                 /* x = f * 2^e2, f in [0.5, 1) */
    uint64_t m = (uint64_t)ldexp(f, 53);      /* exact: x = m * 2^(e2 - 53) */
    int e = e2 - 53;
    int x10 = (int)floor(log10(x)), half;
    uint64_t q;
    for (;;) {   /* log10 may be one off next to a power of ten */
        q = scaled(m, e, 8 - x10, &half);
        if (q >= POW10[9])
            x10++;
        else if (q < POW10[8])
            x10--;
        else
            break;
    }
    if (half > 0 || (half == 0 && (q & 1)))
        q++;
    if (q == POW10[9]) {
        q = POW10[8];
        x10++;
    }
    *X = x10;
    return q;
}

/* Drop trailing zeros after a '.', and the '.' if nothing is left. */
static int trim(char *s, int n)
{
    if (!memchr(s, '.', (size_t)n))
        return n;
    while (s[n - 1] == '0')
        n--;
    if (s[n - 1] == '.')
        n--;
    return n;
}

int g9_format(double v, char *out)
{
    double x = fabs(v);
    if (!(x >= 1e-10 && x < 1e15))
        return snprintf(out, 32, "%.9g", v);   /* zero, tiny, huge: rare */
    int X;
    uint64_t q = digits9(x, &X);
    char d[9];
    for (int i = 8; i >= 0; i--, q /= 10)
        d[i] = (char)('0' + q % 10);
    int n = 0;
    if (v < 0)
        out[n++] = '-';
    if (X < -4 || X >= 9) {
        out[n++] = d[0];
        out[n++] = '.';
        memcpy(out + n, d + 1, 8);
        n = trim(out, n + 8);
        int ax = X < 0 ? -X : X;   /* 5..11 or 9..15: two digits */
        out[n++] = 'e';
        out[n++] = X < 0 ? '-' : '+';
        out[n++] = (char)('0' + ax / 10);
        out[n++] = (char)('0' + ax % 10);
        out[n] = '\0';
        return n;
    }
    if (X >= 0) {
        memcpy(out + n, d, (size_t)X + 1);
        n += X + 1;
        out[n++] = '.';
        memcpy(out + n, d + X + 1, (size_t)(8 - X));
        n += 8 - X;
    } else {
        out[n++] = '0';
        out[n++] = '.';
        for (int i = 0; i < -X - 1; i++)
            out[n++] = '0';
        memcpy(out + n, d, 9);
        n += 9;
    }
    n = trim(out, n);
    out[n] = '\0';
    return n;
}

int g9_int(long long v, char *out)
{
    char b[24], *p = b + sizeof b;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do
        *--p = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--p = '-';
    int n = (int)(b + sizeof b - p);
    memcpy(out, p, (size_t)n);
    out[n] = '\0';
    return n;
}
