/* util_tracefix.h - test fixtures for traces: a small random trace that
 * holds every dataset of the format and obeys every invariant, and a
 * dataset-by-dataset comparison. Linked into every unit test binary. */
#ifndef ELDR_UTIL_TRACEFIX_H
#define ELDR_UTIL_TRACEFIX_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

/* n requests, geometry L x E, top-k; each request has 1..24 prompt and
 * 0..15 decode tokens whose per-token expert ids (k distinct per layer)
 * are summed into the count matrices, so the trace is valid by
 * construction. Every optional dataset is filled: gate_prob (>= 0),
 * gate_logit, 3 labels, arrival_s, request_id, token ids and offsets,
 * decode_probs, block hashes (one per 4 prompt tokens). Deterministic
 * for a seed. NULL if allocation fails. */
trace_t *tracefix_make(int64_t n, int L, int E, int k, uint64_t seed);

/* Drop t's token-level decode rows (tokens/decode_*), as a trace without
 * them is read: the simulator then samples its activations. */
void tracefix_strip_tokens(trace_t *t);

/* 0 when a and b hold the same datasets with the same contents (floats
 * bit for bit); otherwise 1 with the first difference described in why. */
int tracefix_diff(const trace_t *a, const trace_t *b, char *why, size_t len);

/* A test's scratch: a fresh directory /tmp/eldr-test-TAG-XXXXXX into
 * dir and "DIR/t.h5" into path, HDF5's error printing off. 0, or -1
 * when the directory cannot be made. */
int tracefix_tmpdir(const char *tag, char *dir, size_t dir_len, char *path, size_t path_len);

#endif
