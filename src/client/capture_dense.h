/* capture_dense.h - the dense layers of a capture (docs/capture.md, "Dense
 * layers").
 *
 * vLLM's capturer (vllm/model_executor/layers/fused_moe/
 * routed_experts_capturer.py) keeps one zero-filled buffer of
 * (tokens, num_hidden_layers, num_experts_per_tok) ids, and only the MoE
 * layers write into it: a dense (non-MoE) layer - DeepSeek's first
 * first_k_dense_replace layers, Llama 4's interleaved ones - answers 0 for
 * every id of every token. A layer is dense here when it is in every
 * captured answer by the decoder's own rule (routed_dense_layers in
 * src/core/routed.h, the rule eldrd's proxy drops layers by): top-k >= 2
 * and every id of every row, prompt and decode, 0.
 *
 * Such layers are left out of the trace: its layers are the model's MoE
 * layers (docs/trace-format.md), the k ids of a token in a layer must be
 * distinct there, and a layer of zeros would put tokens x k picks on
 * "expert 0" in every signature. The trace keeps the engine's layer
 * count and the dropped indices as root attributes (capture_dense_mark).
 *
 * A layer 0 throughout some answers but routing in others is an error,
 * not a dense layer. With top-1 a 0 is a real pick of expert 0: no layer
 * is called dense (as in the proxy), so both size signatures alike. No
 * printing, no HTTP. */
#ifndef ELDR_CAPTURE_DENSE_H
#define ELDR_CAPTURE_DENSE_H

#include <stddef.h>
#include <stdint.h>

#include "capture_http.h"
#include "capture_prompts.h"
#include "trace.h"

/* root attributes of the trace */
#define CAPTURE_ATTR_ENGINE_LAYERS "capture_engine_layers"
#define CAPTURE_ATTR_DENSE_LAYERS "capture_dense_layers"

typedef struct capture_dense {
    int L;               /* the answers' layers (the engine's) */
    int n;               /* dense layers found */
    int *layers;         /* [n] their indices, ascending (malloc'd; NULL when n is 0) */
    uint8_t *is_dense;   /* [L] (malloc'd) */
} capture_dense;

/* Find the dense layers over the answered jobs (state JOB_OK) of ps->n
 * jobs, all of L layers and top-k. -1 with err when a layer is dense in
 * some answers only (the message names the first such request and the
 * layer) or when every layer is dense (no routing at all); *d then holds
 * nothing to free. */
int capture_dense_find(const capture_job *jobs, const capture_prompts *ps, int L, int k,
                       capture_dense *d, char *err, size_t errlen);
void capture_dense_free(capture_dense *d);

/* "0, 1, 2" into buf (truncated with "..." when it does not fit). */
void capture_dense_list(const capture_dense *d, char *buf, size_t len);

/* Write the two root attributes into the saved trace at path:
 * capture_engine_layers (int) and capture_dense_layers ("0,1,2", "" when
 * none). */
int capture_dense_mark(const char *path, const capture_dense *d, char *err, size_t errlen);

/* Save t at path with those attributes, atomically: written and marked
 * beside it under a temporary name, then renamed over path, so that a
 * failure leaves any old file as it was. */
int capture_dense_save(const trace_t *t, const char *path, const capture_dense *d, char *err,
                       size_t errlen);

#endif
