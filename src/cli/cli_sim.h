/* cli_sim.h - options and checks that every simulating command shares
 * (sim, sweep, advise, dash): the calibration split, and the warning for a
 * model evaluated on its own calibration rows. */
#ifndef ELDR_CLI_SIM_H
#define ELDR_CLI_SIM_H

#include <jansson.h>

#include "grid.h"
#include "model.h"
#include "split.h"
#include "trace.h"

/* The --help lines of --split, --split-seed and --calib-split. */
#define CLI_SPLIT_HELP                                                                    \
    "  --split MODE           calibration rows: random (default: a seeded random\n"     \
    "                         draw), head (the first rows: for a trace in arrival\n"    \
    "                         order) or stratified (the same share of every label)\n"   \
    "  --split-seed S         seed of the random and stratified draws (default 1)\n"    \
    "  --calib-split N|F      how many calibration rows: a count (default 1000,\n"      \
    "                         capped at half the trace), a fraction in (0, 1), or 0\n"  \
    "                         for none (every row simulated, in-sample)\n"

/* Parse one split option's value into s: opt is "--split", "--split-seed"
 * or "--calib-split". 0, or CLI_BADINPUT after one line on stderr. */
int cli_split_option(const char *cmd, const char *opt, const char *arg, split_spec *s);

/* Load a trace with a progress bar on a terminal ("load"); 0, or
 * CLI_BADINPUT after one line naming the file. */
int cli_load_trace(const char *cmd, const char *path, trace_t **out);

/* The same for the rows and datasets of o (trace_load_some); o's
 * progress fields are the bar's. */
int cli_load_some(const char *cmd, const char *path, trace_load_opts *o, trace_t **out);

/* Keep of the ascending file rows rows[0..*n) what `budget` bytes hold
 * at per_row bytes each, after `reserved` bytes other rows take (at
 * least one row): a seeded sample of whole chunks of the file
 * (trace_sample_chunks), rewritten in place. When it samples, prints
 * "eldr CMD: sampled N of M rows (budget B)" on stderr and fills note
 * (that phrase, for reports; "" otherwise). 1 sampled, 0 all kept, or
 * CLI_BADINPUT after a message. */
int cli_budget_rows(const char *cmd, const char *path, int64_t *rows, int64_t *n,
                    double per_row, size_t budget, double reserved, uint64_t seed, char *note,
                    size_t note_len);

/* Every row of the file (h its header) with the datasets `drop` leaves,
 * or, when n rows at per_row bytes exceed budget, a chunk sample of them
 * (cli_budget_rows: said on stderr and in note). 0, or CLI_BADINPUT. */
int cli_load_within(const char *cmd, const char *path, const trace_header_t *h, unsigned drop,
                    double per_row, size_t budget, uint64_t seed, char *note, size_t note_len,
                    trace_t **out);

/* --require-full-routing: CLI_BADINPUT, naming the first row, when some
 * request of t had prompt rows without routing (prefill_unrouted_tokens,
 * vLLM's prefix-cache hits); else 0. Without the option such traces are
 * used as they are: their counts cover the routed rows, and signatures
 * are normalised. */
int cli_require_full_routing(const char *cmd, const char *path, const trace_t *t);

/* The split's rows alone (no copy of either part), with cli_split's
 * checks and messages. */
int cli_split_rows(const char *cmd, const trace_t *t, const split_spec *s, int allow_none,
                   split_rows *rows);

/* Split t; the message names the option on failure (both parts must have
 * rows unless allow_none and size 0). */
int cli_split(const char *cmd, const trace_t *t, const split_spec *s, int allow_none,
              split_rows *rows, trace_t **calib, trace_t **eval);

/* When model m was fitted on trace_path (same SHA-256) and some of the
 * evaluated rows (rows->eval of trace `all`) were among its calibration
 * rows, print a warning on stderr saying how many, and return that count
 * (0: none, or another trace). The model's calib_split names its rows
 * exactly (eldr fit records it); a model without it is judged by its
 * calib_rows alone ("may include"). */
int64_t cli_warn_in_sample(const char *cmd, const char *trace_path, const char *model_path,
                           const model_t *m, const trace_t *all, const split_rows *rows);

/* The split as JSON: {mode, seed (null for head), calib_rows, eval_rows,
 * text}. */
json_t *cli_split_json(const split_rows *rows);

/* Set a grid row's statistics on a JSON object: seeds, the means of
 * tpot_p50_ms, tpot_p99_ms, queue_p50_ms, distinct_experts_per_step,
 * reuse, imbalance and tokens_per_s, tpot_p50_ms_ci95 ([lo, hi] or null)
 * and tpot_p50_ms_per_seed. */
void cli_grid_stats_json(json_t *o, const grid_row *g);

/* A real, or null when it is not finite (NaN: unknown). */
json_t *cli_num_json(double v);

/* [lo, hi] of s, or null (one seed). */
json_t *cli_ci_json(const grid_stat *s);

#endif
