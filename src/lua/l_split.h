/* l_split.h - the calibration/evaluation split in Lua (l_split.c), one
 * rule for eldr.calib_split, eldr.simulate, eldr.advise and Trace:split. */
#ifndef ELDR_L_SPLIT_H
#define ELDR_L_SPLIT_H

#include <stdint.h>

#include <lua.h>

#include "split.h"
#include "trace.h"

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

#endif
