/* costmodel.h - the step-latency model of a MoE decode worker.
 *
 *   t_step = t0 + sum_l (a + b * U_l) + c * B + d * kv_tokens   (seconds)
 *
 * U_l is the number of distinct experts the batch activates in layer l, B
 * the batch size (requests decoding this step) and kv_tokens the tokens
 * held in the batch's KV cache. The default coefficients and their
 * sources are documented in docs/cost-model.md; `eldr costfit` fits them
 * to a measured profile by least squares. */
#ifndef ELDR_COSTMODEL_H
#define ELDR_COSTMODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct cost_model {
    double t0;  /* fixed per-step time, s */
    double a;   /* per-layer fixed time, s */
    double b;   /* per distinct expert loaded, per layer, s */
    double c;   /* per request in the batch, s */
    double d;   /* per KV-cache token in the batch, s (0 to ignore) */
} cost_model;

/* The documented defaults (docs/cost-model.md). */
void cost_model_default(cost_model *m);

/* Step time in seconds for one decode step. U has L entries. */
double cost_step_time(const cost_model *m, int L, const int *U, int B, int64_t kv_tokens);
/* The same with U summed over the L layers, B and kv_tokens as reals:
 * an expectation (the cost rule, costrule.h) is not a whole number. The
 * one formula; cost_step_time calls it. */
double cost_step_time_sum(const cost_model *m, int L, double U_sum, double B, double kv_tokens);

/* Cost file (JSON: {"format":"eldr-cost","version":1,"t0":...,"a":...,
 * "b":...,"c":...,"d":...} plus fit statistics) load/save; save is atomic. */
int cost_model_load(const char *path, cost_model *m, char *err, size_t errlen);
int cost_model_save(const char *path, const cost_model *m, const char *extra_json,
                    char *err, size_t errlen);

#endif
