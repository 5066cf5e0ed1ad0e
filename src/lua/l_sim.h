/* l_sim.h - what the simulation bindings share (l_sim.c: eldr.simulate;
 * l_split.c: the calibration split; l_grid.c: the grid over seeds and
 * eldr.advise). */
#ifndef ELDR_L_SIM_H
#define ELDR_L_SIM_H

#include <lua.h>

#include "costmodel.h"
#include "grid.h"
#include "split.h"
#include "trace.h"

/* ---- the split (l_split.c) ---- */

/* The split options of the options table at opts: `split` (random, head,
 * stratified), `split_seed`, `calib_split` (a count capped at half, a
 * fraction in (0, 1), 0 for none) into s (defaults: split_spec_default).
 * Returns 1 when any of them was given. */
int l_optsplit(lua_State *L, int opts, const char *fn, split_spec *s);

/* Split t (split_make, or split_make_count when count >= 0) into *r,
 * raising "bad argument 'arg'" on a bad size. The row lists live in two
 * boxes pushed on the stack (nothing to free). */
void l_split_rows(lua_State *L, const trace_t *t, const split_spec *s, int64_t count,
                  const char *fn, const char *arg, split_rows *r);

/* Push the two parts of r as new Traces (calibration, evaluation). */
void l_push_split_traces(lua_State *L, const trace_t *t, const split_rows *r,
                         const char *fn);

/* Push {mode, seed (nil for head), calib_rows, eval_rows, text}. */
void l_pushsplit(lua_State *L, const split_rows *r);

/* ---- the grid (l_grid.c) ---- */

/* Run s on the grid engine. The result lives in a userdata pushed on the
 * stack (freed by __gc). progress: stack index of a Lua function
 * progress(done, total), or 0; it runs on this thread only, between
 * cells. Ctrl-C (or an error in progress) stops the grid; the error is
 * raised here. */
grid_result *l_grid_run(lua_State *L, grid_spec *s, int progress, const char *fn);

/* t[k] = {lo, hi} for the table on top (nothing when the CI is NaN). */
void l_setci(lua_State *L, const char *k, const grid_stat *s);

/* Push row i of g as {policy, K, workers, rate, tau, seeds, tpot_p50_ms,
 * tpot_p50_ms_ci95, tpot_p50_ms_per_seed, ..., vs_best_pct,
 * vs_best_pct_ci95}. */
void l_push_grid_row(lua_State *L, const grid_result *g, int i);

/* ---- shared option readers (l_sim.c) ---- */

/* The cost option: a cost file path, or a table {t0, a, b, c, d}. */
void l_optcost(lua_State *L, int opts, cost_model *c, const char *fn);

/* A number or a list of numbers in [lo, hi] at option key: at most max
 * into out; returns the count (0 when absent). */
int l_optnumlist(lua_State *L, int opts, const char *fn, const char *key, double lo,
                 double hi, double *out, int max);


/* Set grid row r's statistics on the table on top: seeds, the means of
 * the metrics, tpot_p50_ms_ci95, tpot_p50_ms_per_seed, vs_best_pct and its
 * CI, distinct_vs_best_pct (eldr sim --seeds N; the rows of eldr.advise). */
void l_set_seed_stats(lua_State *L, const grid_row *r);

#endif
