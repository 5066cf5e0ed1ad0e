/* vsum.c - vectorised double sums over float rows (vsum.h).
 *
 * Written with GCC vector types of 8 doubles: each clone lowers them to
 * one zmm, two ymm or four xmm registers. Lane l of a sum takes the
 * elements j = l (mod 8) below d - d % 8 in increasing j; the lanes are
 * added pairwise (l, l+4), (l, l+2), (l, l+1), then the scalar tail. */
#include "vsum.h"

#include <string.h>

typedef double v8d __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

#define VSUM_CLONES __attribute__((target_clones("avx512f", "avx2,fma", "default")))

/* Loads as macros, not functions: a v8d argument or return value in the
 * baseline clone would change the ABI. */
#define LOAD_D(v, p) memcpy(&(v), (p), sizeof(v))
#define LOAD_F(v, p) do { v8f f_; memcpy(&f_, (p), sizeof f_); (v) = __builtin_convertvector(f_, v8d); } while (0)

/* The fixed-order reduction of 8 lanes. */
static double lanes(const double *s)
{
    double t[8];
    memcpy(t, s, sizeof t);
    for (int w = 4; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            t[l] += t[l + w];
    return t[0];
}

VSUM_CLONES
void vsum_add(double *acc, const float *row, int d, double sign)
{
    int j = 0;
    for (; j + 8 <= d; j += 8) {
        v8d a, r;
        LOAD_D(a, acc + j);
        LOAD_F(r, row + j);
        a += sign * r;
        memcpy(acc + j, &a, sizeof a);
    }
    for (; j < d; j++)
        acc[j] += sign * row[j];
}

VSUM_CLONES
double vsum_dot(const double *a, const float *b, int d)
{
    v8d s = {0};
    int j = 0;
    for (; j + 8 <= d; j += 8)
    {
        v8d va, vb;
        LOAD_D(va, a + j);
        LOAD_F(vb, b + j);
        s += va * vb;
    }
    double t = lanes((const double *)&s);
    for (; j < d; j++)
        t += a[j] * b[j];
    return t;
}

VSUM_CLONES
double vsum_norm2(const double *a, int d)
{
    v8d s = {0};
    int j = 0;
    for (; j + 8 <= d; j += 8) {
        v8d v;
        LOAD_D(v, a + j);
        s += v * v;
    }
    double t = lanes((const double *)&s);
    for (; j < d; j++)
        t += a[j] * a[j];
    return t;
}

VSUM_CLONES
double vsum_norm2_f(const float *row, int d)
{
    v8d s = {0};
    int j = 0;
    for (; j + 8 <= d; j += 8) {
        v8d v;
        LOAD_F(v, row + j);
        s += v * v;
    }
    double t = lanes((const double *)&s);
    for (; j < d; j++)
        t += (double)row[j] * row[j];
    return t;
}

VSUM_CLONES
double vsum_unit(float *mu, const double *a, int d, double nrm)
{
    v8d s = {0};
    int j = 0;
    for (; j + 8 <= d; j += 8) {
        v8d va, old;
        LOAD_D(va, a + j);
        LOAD_F(old, mu + j);
        v8f nu = __builtin_convertvector(va / nrm, v8f);
        v8d diff = __builtin_convertvector(nu, v8d) - old;
        s += diff * diff;
        memcpy(mu + j, &nu, sizeof nu);
    }
    double t = lanes((const double *)&s);
    for (; j < d; j++) {
        float nu = (float)(a[j] / nrm);
        t += ((double)nu - mu[j]) * ((double)nu - mu[j]);
        mu[j] = nu;
    }
    return t;
}
