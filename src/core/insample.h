/* insample.h - is a model being evaluated on its own calibration rows?
 *
 * A model records the SHA-256 of the trace file it was fitted on and
 * which of its rows (calib_split: "all", "head 224", "random 224 seed 1";
 * split.h split_provenance). Given the file a simulation reads and the
 * rows it evaluates, the overlap is exact: the model's rows are drawn
 * again with the same rule. One check for eldr sim, sweep, advise and the
 * dashboard. */
#ifndef ELDR_INSAMPLE_H
#define ELDR_INSAMPLE_H

#include <stdint.h>

#include "model.h"
#include "trace.h"

/* How many of eval[0..n_eval) (ascending rows of trace `all`, which was
 * read from trace_path) model m was calibrated on: 0 when m was fitted on
 * another file (or its SHA-256 is unknown) or on rows disjoint from eval;
 * -1 when m was fitted on this very file but does not say on which rows
 * (older models, imports): the overlap is then unknown. *sha (may be
 * NULL) gets the file's SHA-256 prefix for messages. */
int64_t insample_rows(const model_t *m, const char *trace_path, const trace_t *all,
                      const int64_t *eval, int64_t n_eval, char sha[13]);
/* The same with the file's SHA-256 (64 hex digits) already computed, or
 * "" when unknown: for a caller that hashes the file anyway (the
 * dashboard's cache key), so a large trace is read once. */
int64_t insample_rows_hex(const model_t *m, const char *file_hex, const trace_t *all,
                          const int64_t *eval, int64_t n_eval, char sha[13]);

#endif
