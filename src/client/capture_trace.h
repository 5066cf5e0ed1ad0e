/* capture_trace.h - the eldr-trace of a capture: the answered jobs, in
 * prompt order, become rows with their counts (summed from the per-token
 * ids), token counts, per-token ids with offsets, arrival_s (the first
 * send of each request), request_id and, when the prompts have them,
 * labels. E is `experts` when given (ids were checked against it), else
 * the largest id + 1 (*inferred = 1). The layers dense in every answer
 * (capture_dense.h) are left out of it and named in *dense (freed with
 * capture_dense_free; zeroed when nothing was captured). The result
 * passes trace_validate. */
#ifndef ELDR_CAPTURE_TRACE_H
#define ELDR_CAPTURE_TRACE_H

#include "capture_dense.h"
#include "capture_http.h"
#include "capture_prompts.h"
#include "trace.h"

int capture_trace_build(const capture_job *jobs, const capture_prompts *ps, int experts,
                        const char *model, trace_t **out, int *inferred, capture_dense *dense,
                        char *err, size_t errlen);

#endif
