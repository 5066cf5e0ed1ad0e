/* trace_tokens.h - a trace's recorded decode token rows
 * (tokens/decode_experts) read from its file as they are needed, not held
 * whole: what `eldr sim` gives the simulator instead of loading them
 * (docs/memory.md, docs/trace-format.md "Reading token rows").
 *
 * A reader is opened on a file and on the rows of a trace the caller
 * loaded from it (without its token rows): row i of that trace is file
 * row rows[i]. It keeps the file and the dataset open, each row's first
 * token row and count (12 bytes a row) and HDF5's chunk cache of the
 * dataset, sized to a few of its chunks and bounded (TRACE_TOKENS_CACHE_MAX):
 * read in the file's order, each chunk is inflated about once.
 *
 * A request's rows are read in the file's width (a byte an id when the
 * file stores uint8) and checked as the loader checks them (every id < E,
 * k distinct per token and layer, together they give the request's
 * decode_counts), so a file truncated or rewritten while it is read gives
 * an error naming the request row and its token rows, never wrong rows.
 *
 * Threads: reads may come from several threads at once (the policies and
 * seeds of one simulation); every HDF5 call holds h5u_lock. */
#ifndef ELDR_TRACE_TOKENS_H
#define ELDR_TRACE_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

/* The most bytes of HDF5 chunk cache a reader keeps (more only when one
 * chunk alone is bigger: a chunk the cache cannot hold is inflated again
 * by every read that touches it). */
#define TRACE_TOKENS_CACHE_MAX ((size_t)16 << 20)
/* Chunks the cache holds when they fit: a request's rows span one or two,
 * and concurrent runs read at nearby places. */
#define TRACE_TOKENS_CACHE_CHUNKS 8

typedef struct trace_tokens trace_tokens;

/* Open the decode token rows of file `path` for trace t, whose row i is
 * file row rows[i] (rows NULL: row i). t gives the geometry and, per row,
 * decode_tokens (each row's token rows must number that) and the
 * decode_counts the rows are checked against. Fails naming the file when
 * it has no tokens/decode_experts, its geometry differs from t's, or its
 * offsets are bad. *out is NULL on failure. */
int trace_tokens_open(const char *path, const trace_t *t, const int64_t *rows,
                      trace_tokens **out, char *err, size_t errlen);
/* The same with a chunk cache of up to cache_max bytes, as many chunks as
 * fit (at least one; 0: the default above): for a caller that reads the
 * same rows in many runs (the dashboard's grids), whose chunks are then
 * inflated once while they fit, not once a run. */
int trace_tokens_open_cache(const char *path, const trace_t *t, const int64_t *rows,
                            size_t cache_max, trace_tokens **out, char *err, size_t errlen);
void trace_tokens_close(trace_tokens *tt);

/* The bytes of chunk cache a reader of file `path` would keep (for a
 * budget priced before the reader is opened). */
int trace_tokens_cache_plan(const char *path, size_t *bytes, char *err, size_t errlen);

/* Rows of the trace the reader serves (t->n at open). */
int64_t trace_tokens_n(const trace_tokens *tt);
/* Token rows of trace row i. */
int32_t trace_tokens_count(const trace_tokens *tt, int64_t i);
/* Bytes an id takes in the file (1 or 2). */
int trace_tokens_file_bytes(const trace_tokens *tt);
/* Bytes of HDF5's chunk cache the reader keeps. */
size_t trace_tokens_cache_bytes(const trace_tokens *tt);

/* The token rows of trace row i, trace_tokens_count(tt, i) rows of [L][k]
 * ids each id_bytes (1 or 2) wide, into out; checked against
 * counts ([L][E], the row's decode_counts). Errors name the dataset, the
 * file's token rows and its request row, not the file (the caller names
 * it, as it names the trace in any simulator error). */
int trace_tokens_read(trace_tokens *tt, int64_t i, const uint16_t *counts, void *out,
                      int id_bytes, char *err, size_t errlen);

/* File token rows [a, b) of the dataset as stored, unchecked, into out
 * (id_bytes wide): what trace_tokens_read reads, for tests and tools.
 * A range outside [0, T) fails naming it. */
int trace_tokens_read_range(trace_tokens *tt, int64_t a, int64_t b, void *out, int id_bytes,
                            char *err, size_t errlen);

#endif
