/* l_cost.c - the step-latency cost model in Lua: eldr.costfit (least
 * squares on a measured profile, costfit.h), eldr.cost_model (load or
 * defaults) and eldr.step_time (costmodel.h). A cost model is a plain
 * table {t0, a, b, c, d} in seconds, which eldr.simulate takes as `cost`. */
#include <stdlib.h>
#include <string.h>

#include "costfit.h"
#include "costmodel.h"
#include "err.h"
#include "l_cost.h"
#include "l_types.h"
#include "l_util.h"

static void push_cost(lua_State *L, const cost_model *m)
{
    lua_createtable(L, 0, 5);
    const double v[] = {m->t0, m->a, m->b, m->c, m->d};
    const char *k[] = {"t0", "a", "b", "c", "d"};
    for (int i = 0; i < 5; i++) {
        lua_pushnumber(L, v[i]);
        lua_setfield(L, -2, k[i]);
    }
}

static void check_cost(lua_State *L, int idx, cost_model *m, const char *fn)
{
    static const char *const known[] = {"t0", "a", "b", "c", "d", NULL};
    if (!lua_istable(L, idx)) {
        char got[48];
        l_argerror(L, fn, "cost", "{t0, a, b, c, d} expected, got %s",
                   l_got(L, idx, got, sizeof got));
    }
    l_checkopts(L, idx, fn, known);
    cost_model_default(m);
    m->t0 = l_optnum(L, idx, fn, "t0", 0, 1e6, m->t0);
    m->a = l_optnum(L, idx, fn, "a", 0, 1e6, m->a);
    m->b = l_optnum(L, idx, fn, "b", 0, 1e6, m->b);
    m->c = l_optnum(L, idx, fn, "c", 0, 1e6, m->c);
    m->d = l_optnum(L, idx, fn, "d", 0, 1e6, m->d);
}

/* eldr.costfit(profile.csv [, {output = path}]) -> fit */
static int l_costfit(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "costfit";
    static const char *const known[] = {"output", NULL};
    const char *path = l_checkstr(L, 1, fn, "path");
    l_checkopts(L, 2, fn, known);
    const char *out = l_optstr(L, 2, fn, "output", NULL);
    costfit_profile p;
    costfit_result r;
    char err[ELDR_ERRLEN];
    if (costfit_read_csv(path, &p, err, sizeof err))
        return l_fail(L, fn, err);
    int rc = costfit_fit(&p, &r, err, sizeof err);
    int64_t n = p.n;
    int L_ = p.L;
    costfit_profile_free(&p);
    if (rc)
        return l_fail(L, fn, err);
    if (out && cost_model_save(out, &r.m, NULL, err, sizeof err)) {
        costfit_result_free(&r);
        return l_fail(L, fn, err);
    }
    costfit_result res = r;
    costfit_result_free(&r);
    push_cost(L, &res.m);
    lua_pushnumber(L, res.intercept);
    lua_setfield(L, -2, "intercept");
    lua_pushnumber(L, res.r2);
    lua_setfield(L, -2, "r2");
    lua_pushnumber(L, res.rmse);
    lua_setfield(L, -2, "rmse");
    lua_pushinteger(L, n);
    lua_setfield(L, -2, "n");
    lua_pushinteger(L, L_);
    lua_setfield(L, -2, "L");
    const char *lists[] = {"fitted", "clamped"};
    for (int w = 0; w < 2; w++) {
        lua_newtable(L);
        int k = 0;
        for (int i = 0; i < COSTFIT_NCOEF; i++)
            if ((w ? res.clamped : res.fitted)[i]) {
                lua_pushstring(L, costfit_coef_name(i));
                lua_rawseti(L, -2, ++k);
            }
        lua_setfield(L, -2, lists[w]);
    }
    return 1;
}

/* eldr.cost_model([path]) -> {t0, a, b, c, d}: a cost file, or the defaults */
static int l_cost_model(lua_State *L)
{
    lua_settop(L, 1); /* optional arguments stay at fixed slots */
    const char *fn = "cost_model";
    cost_model m;
    cost_model_default(&m);
    if (!lua_isnoneornil(L, 1)) {
        char err[ELDR_ERRLEN];
        if (cost_model_load(l_checkstr(L, 1, fn, "path"), &m, err, sizeof err))
            return l_fail(L, fn, err);
    }
    push_cost(L, &m);
    return 1;
}

/* eldr.step_time(cost, U, B [, kv_tokens]) -> seconds */
static int l_step_time(lua_State *L)
{
    lua_settop(L, 4); /* optional arguments stay at fixed slots */
    const char *fn = "step_time";
    cost_model m;
    check_cost(L, 1, &m, fn);
    int64_t nl;
    int64_t *u = l_checkintlist(L, 2, fn, "U", 0, 1 << 30, &nl);
    if (nl < 1)
        l_argerror(L, fn, "U", "one distinct-expert count per layer expected");
    int B = (int)l_checkint(L, 3, fn, "B", 0, 1 << 30);
    int64_t kv = lua_isnoneornil(L, 4) ? 0 : l_checkint(L, 4, fn, "kv_tokens", 0, INT64_MAX);
    int *U = l_box(L, (size_t)nl * sizeof *U);
    for (int64_t i = 0; i < nl; i++)
        U[i] = (int)u[i];
    lua_pushnumber(L, cost_step_time(&m, (int)nl, U, B, kv));
    return 1;
}

static const l_fn module_fns[] = {
    {"costfit", l_costfit, "eldr.costfit(profile_csv [, {output = cost_json}]) -> {t0, a, b, c, "
                           "d, intercept, r2, rmse, n, L, fitted, clamped}"},
    {"cost_model", l_cost_model, "eldr.cost_model([path]) -> {t0, a, b, c, d}: a cost file, or "
                                 "the documented defaults"},
    {"step_time", l_step_time, "eldr.step_time(cost, U, B [, kv_tokens]) -> seconds of one "
                               "decode step (U: distinct experts per layer)"},
    {NULL, NULL, NULL},
};

void l_optcost(lua_State *L, int opts, cost_model *c, const char *fn)
{
    int t = l_getopt(L, opts, "cost");
    int idx = lua_gettop(L);
    char err[ELDR_ERRLEN];
    if (t == LUA_TSTRING) {
        if (cost_model_load(lua_tostring(L, idx), c, err, sizeof err))
            l_fail(L, fn, err);
    } else if (t == LUA_TTABLE) {
        static const char *const known[] = {"t0", "a", "b", "c", "d", NULL};
        l_checkopts(L, idx, fn, known);
        c->t0 = l_optnum(L, idx, fn, "t0", 0, 1e6, c->t0);
        c->a = l_optnum(L, idx, fn, "a", 0, 1e6, c->a);
        c->b = l_optnum(L, idx, fn, "b", 0, 1e6, c->b);
        c->c = l_optnum(L, idx, fn, "c", 0, 1e6, c->c);
        c->d = l_optnum(L, idx, fn, "d", 0, 1e6, c->d);
    } else if (t != LUA_TNIL)
        l_argerror(L, fn, "cost", "cost file path or {t0, a, b, c, d} expected");
    lua_pop(L, 1);
}

void l_open_cost(lua_State *L)
{
    l_register(L, module_fns, "eldr.");
}
