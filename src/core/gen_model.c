/* gen_model.c - the generator's shared router model: a base logit per
 * (layer, expert), generalist bumps, and one shift per domain whose scale
 * follows the layer profile (see docs/generator.md). */
#include <math.h>
#include <stdlib.h>

#include "err.h"
#include "gen_internal.h"

double gen_layer_strength(int l, int L, double floor)
{
    return floor + (1.0 - floor) * sin(M_PI * ((double)l + 0.5) / (double)L);
}

/* Mark `count` distinct experts of one layer as generalists (a partial
 * Fisher-Yates shuffle, so each set of experts is equally likely). */
static void add_generalists(rng_t *r, float *base_l, int E, int count, float bump, int *perm)
{
    for (int e = 0; e < E; e++)
        perm[e] = e;
    for (int i = 0; i < count; i++) {
        int j = i + (int)rng_below(r, (uint64_t)(E - i));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        base_l[perm[i]] += bump;
    }
}

int gen_model_build(gen_model_t *m, const gen_params_t *p, char *err, size_t errlen)
{
    int L = p->layers, E = p->experts, D = p->domains;
    size_t cells = (size_t)L * (size_t)E;
    m->L = L;
    m->E = E;
    m->D = D;
    m->base = eldr_calloc(cells, sizeof(float));
    m->shift = eldr_calloc(cells * (size_t)D, sizeof(float));
    int *perm = eldr_calloc((size_t)E, sizeof(int));
    if (!m->base || !m->shift || !perm) {
        free(perm);
        gen_model_free(m);
        return eldr_errf(err, errlen, "out of memory for the router model (%d domains x %d layers x %d experts)",
                         D, L, E);
    }
    rng_t r;
    rng_seed_stream(&r, p->seed, GEN_STREAM_MODEL);
    gen_normals(&r, m->base, (int)cells, (float)p->base_scale);
    for (int l = 0; l < L; l++)
        add_generalists(&r, m->base + (size_t)l * E, E, p->generalists,
                        (float)p->generalist_bump, perm);
    for (int d = 0; d < D; d++)
        for (int l = 0; l < L; l++) {
            double s = p->domain_strength * gen_layer_strength(l, L, p->layer_floor);
            gen_normals(&r, m->shift + ((size_t)d * L + l) * E, E, (float)s);
        }
    free(perm);
    return 0;
}

void gen_model_free(gen_model_t *m)
{
    free(m->base);
    free(m->shift);
    m->base = m->shift = NULL;
}

void gen_model_logits(const gen_model_t *m, int d, int l, const float *noise, float *z)
{
    const float *b = m->base + (size_t)l * m->E;
    const float *s = m->shift + ((size_t)d * m->L + l) * m->E;
    if (noise)
        for (int e = 0; e < m->E; e++)
            z[e] = b[e] + s[e] + noise[e];
    else
        for (int e = 0; e < m->E; e++)
            z[e] = b[e] + s[e];
}
