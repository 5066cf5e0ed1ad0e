/* gen_internal.h - the pieces of the generator shared by its files
 * (gen.c orchestration, gen_model.c router logits, gen_sample.c top-k
 * sampling, gen_plan.c lengths/domains/arrivals). Not a public API. */
#ifndef ELDR_GEN_INTERNAL_H
#define ELDR_GEN_INTERNAL_H

#include <stdint.h>

#include "gen.h"
#include "rng.h"

/* Stream numbers of the shared draws, counted down from the top so they
 * never meet request streams (request r uses stream r). */
#define GEN_STREAM_MODEL UINT64_MAX
#define GEN_STREAM_ARRIVAL (UINT64_MAX - 1)
#define GEN_STREAM_GROUP(g) (UINT64_MAX - 16 - (uint64_t)(g))

/* ---- gen_model.c: the shared router model ---- */

/* Logits of domain d at layer l = base[l] + shift[d][l] (base already
 * carries the generalist bumps; shift is already scaled by s_l). */
typedef struct gen_model {
    int L, E, D;
    float *base;               /* [L][E] */
    float *shift;              /* [D][L][E] */
} gen_model_t;

int gen_model_build(gen_model_t *m, const gen_params_t *p, char *err, size_t errlen);
void gen_model_free(gen_model_t *m);

/* z[e] = base[l][e] + shift[d][l][e] + noise[e] (noise may be NULL) */
void gen_model_logits(const gen_model_t *m, int d, int l, const float *noise, float *z);

/* ---- gen_sample.c: softmax, alias tables, k distinct experts ---- */

void gen_softmax(const float *z, int n, float *p);

/* Walker/Vose alias table over n <= 65535 outcomes: draw i uniformly,
 * keep it when the low 32 bits of the same random word are below
 * thresh[i], else take alias[i]. */
typedef struct gen_alias {
    int n;
    const float *p;            /* the probabilities (not owned) */
    uint32_t *thresh;          /* [n] */
    uint16_t *alias;           /* [n] */
} gen_alias_t;

/* Scratch for building tables and for marking picked experts. */
typedef struct gen_scratch {
    int n;
    double *q;                 /* [n] */
    int *small, *large;        /* [n] */
    uint32_t *mark;            /* [n] stamps of picked experts */
    uint32_t stamp;
} gen_scratch_t;

int gen_alias_init(gen_alias_t *a, int n);
void gen_alias_free(gen_alias_t *a);
int gen_scratch_init(gen_scratch_t *s, int n);
void gen_scratch_free(gen_scratch_t *s);
void gen_alias_build(gen_alias_t *a, const float *p, gen_scratch_t *s);

/* k distinct outcomes of a's distribution into out[0..k), in the order of
 * sequential sampling without replacement (= Gumbel-top-k order). */
void gen_pick_distinct(rng_t *r, const gen_alias_t *a, int k, uint16_t *out,
                       gen_scratch_t *s);

/* Two independent standard normals per call pair (Box-Muller on the
 * project's rng); fills out[0..n). */
void gen_normals(rng_t *r, float *out, int n, float scale);

/* ---- gen_plan.c: per-request lengths, domains, arrivals ---- */

typedef struct gen_req {
    rng_t rng;                 /* the request's stream, after planning */
    int32_t prompt, own;       /* prompt tokens; own = those after the prefix */
    int32_t decode;
    int32_t d1, d2;            /* primary and secondary domain (-1 none) */
    float w, w_dec;            /* secondary weight in prefill, in decode */
    int32_t group;             /* prefix group, -1 none */
} gen_req_t;

/* Plan every request (serial, cheap): fills req[n], arrival (may be NULL
 * when rate is 0) and the labels. */
int gen_plan(const gen_params_t *p, gen_req_t *req, double *arrival,
             char *err, size_t errlen);

/* Lognormal length with the given mean and sigma, rounded and clamped to
 * [lo, 65535]. */
int32_t gen_length(rng_t *r, double mean, double sigma, int32_t lo);

#endif
