/* gen_sample.c - the generator's sampling kernels: softmax, normals, alias
 * tables, and k distinct experts per token.
 *
 * Top-k without replacement. Gumbel-top-k over logits z (the k largest of
 * z_e + Gumbel noise) picks the same k experts, in the same order
 * distribution, as sequential sampling without replacement from
 * softmax(z). We sample sequentially: draw from the full distribution
 * with an alias table (O(1)) and reject experts already picked, which is
 * exactly a draw from the distribution renormalised over the rest. When
 * the picked experts hold much of the mass (>= 3/4) rejection would be
 * slow, so the draw is done exactly instead by a scan over the unpicked
 * experts; a run of 16 rejections also falls back to the scan. Either way
 * each pick follows p restricted to the unpicked experts, exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "gen_internal.h"

#define REJECT_MASS 0.75
#define REJECT_TRIES 16

void gen_softmax(const float *z, int n, float *p)
{
    float mx = z[0];
    for (int i = 1; i < n; i++)
        if (z[i] > mx)
            mx = z[i];
    double sum = 0;
    for (int i = 0; i < n; i++) {
        p[i] = expf(z[i] - mx);
        sum += p[i];
    }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++)
        p[i] *= inv;
}

void gen_normals(rng_t *r, float *out, int n, float scale)
{
    for (int i = 0; i < n; i += 2) {
        double u1 = rng_uniform(r), u2 = rng_uniform(r);
        if (u1 < 1e-300)
            u1 = 1e-300;
        double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
        out[i] = scale * (float)(rad * cos(th));
        if (i + 1 < n)
            out[i + 1] = scale * (float)(rad * sin(th));
    }
}

int gen_alias_init(gen_alias_t *a, int n)
{
    a->n = n;
    a->p = NULL;
    a->thresh = eldr_calloc((size_t)n, sizeof(uint32_t));
    a->alias = eldr_calloc((size_t)n, sizeof(uint16_t));
    if (!a->thresh || !a->alias) {
        gen_alias_free(a);
        return -1;
    }
    return 0;
}

void gen_alias_free(gen_alias_t *a)
{
    free(a->thresh);
    free(a->alias);
    a->thresh = NULL;
    a->alias = NULL;
}

int gen_scratch_init(gen_scratch_t *s, int n)
{
    s->n = n;
    s->stamp = 0;
    s->q = eldr_calloc((size_t)n, sizeof(double));
    s->small = eldr_calloc((size_t)n, sizeof(int));
    s->large = eldr_calloc((size_t)n, sizeof(int));
    s->mark = eldr_calloc((size_t)n, sizeof(uint32_t));
    if (!s->q || !s->small || !s->large || !s->mark) {
        gen_scratch_free(s);
        return -1;
    }
    return 0;
}

void gen_scratch_free(gen_scratch_t *s)
{
    free(s->q);
    free(s->small);
    free(s->large);
    free(s->mark);
    s->q = NULL;
    s->small = s->large = NULL;
    s->mark = NULL;
}

static uint32_t to_thresh(double q)
{
    double t = q * 4294967296.0;
    return t >= 4294967295.0 ? UINT32_MAX : t <= 0 ? 0 : (uint32_t)t;
}

/* Vose's method: O(n), numerically stable. */
void gen_alias_build(gen_alias_t *a, const float *p, gen_scratch_t *s)
{
    int n = a->n, ns = 0, nl = 0;
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += p[i];
    for (int i = 0; i < n; i++) {
        s->q[i] = (double)p[i] * n / sum;
        if (s->q[i] < 1.0)
            s->small[ns++] = i;
        else
            s->large[nl++] = i;
    }
    while (ns && nl) {
        int sm = s->small[--ns], lg = s->large[--nl];
        a->thresh[sm] = to_thresh(s->q[sm]);
        a->alias[sm] = (uint16_t)lg;
        s->q[lg] = (s->q[lg] + s->q[sm]) - 1.0;
        if (s->q[lg] < 1.0)
            s->small[ns++] = lg;
        else
            s->large[nl++] = lg;
    }
    /* leftovers are 1 up to rounding: keep themselves */
    while (nl) {
        int i = s->large[--nl];
        a->thresh[i] = UINT32_MAX;
        a->alias[i] = (uint16_t)i;
    }
    while (ns) {
        int i = s->small[--ns];
        a->thresh[i] = UINT32_MAX;
        a->alias[i] = (uint16_t)i;
    }
    a->p = p;
}

/* Both table entries are loaded before choosing, so the choice compiles
 * to a conditional move: the coin is a coin flip for the branch
 * predictor, and a mispredict per pick would double the cost. */
static inline int alias_draw(rng_t *r, const uint32_t *thresh, const uint16_t *alias, uint64_t n)
{
    uint64_t x = rng_next(r);
    uint32_t i = (uint32_t)(((x >> 32) * n) >> 32);
    uint32_t th = thresh[i], al = alias[i];
    return (int)((uint32_t)x < th ? i : al);
}

/* One exact draw from p restricted to experts not marked with stamp;
 * `left` of them remain. */
static int exact_draw(rng_t *r, const gen_alias_t *a, const uint32_t *mark, uint32_t stamp,
                      int left)
{
    const float *p = a->p;
    double rem = 0;
    int last = -1;
    for (int e = 0; e < a->n; e++)
        if (mark[e] != stamp) {
            rem += p[e];
            if (p[e] > 0)
                last = e;
        }
    if (rem > 0) {
        double u = rng_uniform(r) * rem, acc = 0;
        for (int e = 0; e < a->n; e++)
            if (mark[e] != stamp && p[e] > 0) {
                acc += p[e];
                if (u < acc)
                    return e;
            }
        return last; /* rounding: u landed on the very end */
    }
    /* every unpicked expert has probability 0 (extreme logits): the
     * Gumbel order among -inf ties is uniform */
    int idx = (int)rng_below(r, (uint64_t)left);
    for (int e = 0; e < a->n; e++)
        if (mark[e] != stamp && idx-- == 0)
            return e;
    return -1; /* unreachable: left counts the unmarked experts */
}

void gen_pick_distinct(rng_t *r, const gen_alias_t *a, int k, uint16_t *out,
                       gen_scratch_t *s)
{
    uint32_t stamp = ++s->stamp;
    if (stamp == 0) { /* wrapped: clear the marks once every 2^32 tokens */
        memset(s->mark, 0, (size_t)s->n * sizeof *s->mark);
        stamp = s->stamp = 1;
    }
    const uint32_t *thresh = a->thresh;
    const uint16_t *alias = a->alias;
    const float *p = a->p;
    uint32_t *mark = s->mark;
    uint64_t n = (uint64_t)a->n;
    float taken = 0;
    for (int j = 0; j < k; j++) {
        int e = -1;
        if (taken < (float)REJECT_MASS)
            for (int t = 0; t < REJECT_TRIES; t++) {
                int c = alias_draw(r, thresh, alias, n);
                if (mark[c] != stamp) {
                    e = c;
                    break;
                }
            }
        if (e < 0)
            e = exact_draw(r, a, mark, stamp, a->n - j);
        mark[e] = stamp;
        out[j] = (uint16_t)e;
        taken += p[e];
    }
}
