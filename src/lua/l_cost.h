/* l_cost.h - the cost model option of the simulation bindings (l_cost.c,
 * beside eldr.cost_fit and eldr.cost_model). */
#ifndef ELDR_L_COST_H
#define ELDR_L_COST_H

#include <lua.h>

#include "costmodel.h"

/* The cost option of the options table at opts: a cost file path, or a
 * table {t0, a, b, c, d}; absent leaves c as it is. */
void l_optcost(lua_State *L, int opts, cost_model *c, const char *fn);

#endif
