/* trace_budget.h - what a memory budget holds of a trace, and which rows
 * a command keeps when the trace is bigger (--max-memory, docs/memory.md).
 *
 * A command first reads the header and the per-request vectors (an index,
 * TRACE_DROP_COUNTS), picks its rows (the split), prices them with
 * trace_row_bytes plus its own per-row working memory, and when they do
 * not fit, keeps a sample drawn as whole chunks of the file's count
 * matrices: a row sample spread evenly would inflate nearly every chunk
 * (at 21 rows a chunk, a 10% row sample touches about 89% of them), a
 * chunk sample inflates only the chunks it keeps. The sample is seeded:
 * the same (file, rows, budget, seed) gives the same rows everywhere. */
#ifndef ELDR_TRACE_BUDGET_H
#define ELDR_TRACE_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

/* Half of physical memory: the default --max-memory (1 GiB when the
 * machine does not say). */
size_t trace_budget_default(void);

/* Bytes one loaded row holds on average in memory: the count and gate
 * matrices it keeps (stored width), its token rows and block hashes (the
 * file's mean per request), its vectors. drop as for trace_load_some. */
double trace_row_bytes(const trace_header_t *h, unsigned drop);

/* Rows of one chunk of the file's prefill_counts (1 when contiguous; the
 * chunk of an importable file is 1). */
int trace_chunk_rows(const char *path, int64_t *rows, char *err, size_t errlen);

/* At most `keep` of the n ascending candidate rows cand[], drawn as whole
 * chunks (file rows [c*chunk, (c+1)*chunk)) in a seeded random order,
 * skipping a chunk that would overshoot: written ascending to out (room
 * for n), the count returned (>= 1 when keep >= 1 and n >= 1: a chunk
 * bigger than keep is cut to keep rows). -1 when out of memory. */
int64_t trace_sample_chunks(const int64_t *cand, int64_t n, int64_t chunk, int64_t keep,
                            uint64_t seed, int64_t *out);

#endif
