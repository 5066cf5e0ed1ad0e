/* split.h - the calibration/evaluation split of a trace, one rule for
 * every front end (eldr sim, sweep, advise, dash, the Lua module).
 *
 * Why random by default: traces are often written in label order (the
 * shared gpt-oss trace is sorted by benchmark), so "the first rows
 * calibrate" evaluates a model on a domain it never saw. A seeded random
 * split gives an in-distribution estimate; `head` keeps the old rule
 * (calibrate on the past, evaluate on the future: the honest choice for a
 * trace in arrival order); `stratified` draws the same share of every
 * label.
 *
 * Size: spec >= 1 is a row count; the default count (1000, the paper's)
 * is capped at n / 2 (half of a small trace), a count the user gave is
 * taken as given (split_make refuses one that leaves no evaluation row,
 * rather than silently calibrating on fewer); 0 < spec < 1 a fraction of
 * n (floor); 0 = no split: no calibration row, every row is evaluated.
 * Both parts keep trace order. */
#ifndef ELDR_SPLIT_H
#define ELDR_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

typedef enum split_mode { SPLIT_RANDOM = 0, SPLIT_HEAD, SPLIT_STRATIFIED } split_mode;

#define SPLIT_DEFAULT_SIZE 1000
#define SPLIT_DEFAULT_SEED 1

typedef struct split_spec {
    split_mode mode;
    double size;                /* count, fraction or 0, as above */
    uint64_t seed;              /* random and stratified */
    int pinned;                 /* 1: the seed was given (--split-seed): a run
                                 * over several seeds keeps this one split;
                                 * 0: each seed s draws its own split, seeded
                                 * s (grid.h, "Calibration splits") */
    int size_given;             /* 1: size came from the user: a count is not
                                 * capped at half the trace (it must leave
                                 * evaluation rows); 0: the default 1000,
                                 * capped at half */
} split_spec;

/* random, 1000 rows capped at half, seed 1, not pinned */
void split_spec_default(split_spec *s);

/* "random", "head", "stratified" -> mode, or -1 */
int split_mode_parse(const char *name);
const char *split_mode_name(split_mode m);

/* Number of calibration rows of an n-row trace for size spec (a count
 * capped at n / 2: the default's rule), or -1 with err when spec is
 * negative or not finite. split_make applies s->size_given. */
int64_t split_calib_count(int64_t n, double size, char *err, size_t errlen);

typedef struct split_rows {
    int64_t *calib, n_calib;    /* ascending trace rows */
    int64_t *eval, n_eval;      /* ascending: every other row */
    split_mode mode;            /* the mode used: stratified without labels
                                 * falls back to random */
    uint64_t seed;
} split_rows;

/* Split t's n rows. The same (n, labels, spec) gives the same rows on
 * every machine. Fails with err on a bad size or out of memory. */
int split_make(const trace_t *t, const split_spec *s, split_rows *out, char *err,
               size_t errlen);
/* The same with an exact calibration count c in [0, n] (no cap): what
 * Trace:split{count = N | fraction = F} uses in Lua, and what a model's
 * provenance (split_provenance) names. */
int split_make_count(const trace_t *t, split_mode mode, uint64_t seed, int64_t c,
                     split_rows *out, char *err, size_t errlen);
void split_rows_free(split_rows *r);

/* The two parts as new traces (trace_select); *calib is NULL when the
 * split has no calibration row. */
int split_apply(const trace_t *t, const split_rows *r, trace_t **calib, trace_t **eval,
                char *err, size_t errlen);

/* A split as provenance text, for a model: "head 224", "random 224 seed
 * 1" (the exact row count); parse reads it back: 0, or 1 for "all" (every
 * row calibrated), or -1 when it is neither. */
void split_provenance(const split_rows *r, char *buf, size_t n);
int split_provenance_parse(const char *text, split_mode *mode, int64_t *n_calib,
                           uint64_t *seed);

/* One phrase for reports: "random split (seed 1): 224 calibration, 225
 * evaluation rows", "head split: ...", "no split: 449 rows evaluated
 * in-sample". */
void split_describe(const split_rows *r, char *buf, size_t n);

#endif
