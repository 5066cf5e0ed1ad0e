/* dash_tokens.h - the dashboard's recorded decode token rows
 * (tokens/decode_experts) read from the trace file as its simulations
 * admit requests, as `eldr sim` reads them (trace_tokens.h), not held
 * whole: on a trace with token rows they are most of what a load holds
 * (docs/memory.md, "The dashboard's token rows").
 *
 * The rule: a trace the dashboard loads from its path (tui_frame,
 * tui_run, dash_open) is loaded without its tokens/ datasets and
 * opts.read_tokens is set; every trace it then simulates (the evaluation
 * rows, the whole trace whose split the CIs redraw, the first look's
 * sample copy) gets a reader whose row i is that trace's row i. A trace
 * handed in already loaded (tui_frame_trace, tui_run_trace from Lua or
 * --max-memory's sample) keeps its rows in memory: read_tokens is 0 and
 * nothing here opens a reader. The rows a run reads are the same either
 * way, so are the frames. */
#ifndef ELDR_DASH_TOKENS_H
#define ELDR_DASH_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "dash.h"

/* The chunk cache of each reader: every run of a refine or a trade-off
 * grid (25 to a few hundred) reads the same rows, so a reader keeps the
 * inflated chunks of up to this many bytes of token rows (the file's
 * width; the real trace's 449 requests take 12.8 MB): within it each chunk
 * is inflated once, not once a run (docs/memory.md). */
#define DASH_TOKENS_CACHE ((size_t)64 << 20)

/* Load the trace at path as the dashboard simulates it: without its
 * tokens/ datasets when it has decode token rows (*reads = 1: the caller
 * sets opts.read_tokens), else whole (*reads = 0). */
int dash_load_trace(const char *path, trace_t **t, int *reads, char *err, size_t errlen);

/* For --max-memory's price of a trace the dashboard loads from its path:
 * the bytes a row holds (without its tokens/ datasets when it has decode
 * token rows, else every dataset), and the bytes its token row readers may
 * keep beside the rows (DASH_TOKENS_MAX chunk caches, each the token rows
 * in the file's width up to DASH_TOKENS_CACHE; 0 without token rows). */
double dash_row_bytes(const trace_header_t *h);
double dash_tokens_bytes(const trace_header_t *h);

/* With d->opts.read_tokens: open a reader of d->opts.trace_path for t,
 * whose row i is file row file_rows[i] (NULL: row i), kept in d->tok
 * until dash_free. Without read_tokens: nothing, 0. */
int dash_tokens_add(dash_t *d, const trace_t *t, const int64_t *file_rows, char *err,
                    size_t errlen);

/* The reader serving trace t (a sim_config's tokens for a workload of
 * t), or NULL: t holds its rows, or has none. */
trace_tokens *dash_tokens_of(const dash_t *d, const trace_t *t);

/* The file row of evaluation row i (a first look's pick). */
int64_t dash_tokens_eval_file_row(const dash_t *d, int64_t i);

/* A reader's error names the dataset and the rows, not the file (its
 * caller names it, trace_tokens.h): with opts.read_tokens an error that
 * begins with the dataset's name gets "PATH: " in front. */
void dash_tokens_name_err(const dash_t *d, char *err, size_t errlen);

void dash_tokens_free(dash_tokens *k);

#endif
