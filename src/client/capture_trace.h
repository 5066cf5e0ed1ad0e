/* capture_trace.h - the eldr-trace of a capture: the answered jobs, in
 * prompt order, become rows with their counts (summed from the per-token
 * ids), token counts, per-token ids with offsets, arrival_s (the first
 * send of each request), request_id and, when the prompts have them,
 * labels. E is `experts` when given (ids were checked against it), else
 * the largest id + 1 (*inferred = 1). The result passes trace_validate. */
#ifndef ELDR_CAPTURE_TRACE_H
#define ELDR_CAPTURE_TRACE_H

#include "capture_http.h"
#include "capture_prompts.h"
#include "trace.h"

int capture_trace_build(const capture_job *jobs, const capture_prompts *ps, int experts,
                        const char *model, trace_t **out, int *inferred, char *err,
                        size_t errlen);

#endif
