/* l_gridrun.h - the grid engine run from Lua (l_gridrun.c), shared by
 * eldr.advise (l_grid.c) and eldr.simulate{seeds = N} (l_sim.c). */
#ifndef ELDR_L_GRIDRUN_H
#define ELDR_L_GRIDRUN_H

#include <lua.h>

#include "grid.h"

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

/* Set grid row r's statistics on the table on top: seeds, the means of
 * the metrics, tpot_p50_ms_ci95, tpot_p50_ms_per_seed, vs_best_pct and its
 * CI, distinct_vs_best_pct (eldr sim --seeds N; the rows of eldr.advise). */
void l_set_seed_stats(lua_State *L, const grid_row *r);

#endif
