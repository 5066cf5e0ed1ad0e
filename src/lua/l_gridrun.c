/* l_gridrun.c - the grid engine (src/core/grid.h) run from Lua, shared by
 * eldr.advise (l_grid.c) and eldr.simulate{seeds = N} (l_sim.c), and the
 * tables both build from its rows. Neither binding file calls the other:
 * what they share lives here (docs/architecture.md, the workbench rooms).
 *
 * Threads and Lua. grid_run simulates cells on several threads; only the
 * calling thread may touch the Lua state. The progress function therefore
 * runs when a cell finishes on the calling thread (the others only record
 * the count), through pcall: an error there, or Ctrl-C, raises the grid's
 * cancel flag, and the error is raised once grid_run has returned and
 * every thread has stopped. The result lives in a userdata, freed by __gc
 * whatever happens next. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "err.h"
#include "l_gridrun.h"
#include "l_util.h"
#include "route.h"

#define L_GRIDRES "eldr.GridResult"

typedef struct l_gridres {
    grid_result g;
    int have;
} l_gridres;

static int gridres_gc(lua_State *L)
{
    l_gridres *u = luaL_checkudata(L, 1, L_GRIDRES);
    if (u->have)
        grid_result_free(&u->g);
    u->have = 0;
    return 0;
}

typedef struct grid_progress {
    lua_State *L;
    int fn_idx;                 /* 0: no Lua function */
    pthread_t self;             /* the thread that owns L */
    int failed;                 /* stack index of the error, 0 */
    int64_t reported;           /* last done count given to Lua */
    volatile int cancel;
} grid_progress;

static void call_progress(grid_progress *p, int64_t done, int64_t total)
{
    lua_State *L = p->L;
    lua_pushvalue(L, p->fn_idx);
    lua_pushinteger(L, done);
    lua_pushinteger(L, total);
    p->reported = done;
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
        p->failed = lua_gettop(L);   /* the message stays on the stack */
        p->cancel = 1;
    }
}

/* grid_spec.progress: called under the grid's lock, from any thread. */
static void on_progress(void *ctx, int64_t done, int64_t total)
{
    grid_progress *p = ctx;
    if (l_cancel_flag)
        p->cancel = 1;
    if (p->fn_idx && !p->failed && !p->cancel && pthread_equal(pthread_self(), p->self))
        call_progress(p, done, total);
}

grid_result *l_grid_run(lua_State *L, grid_spec *s, int progress, const char *fn)
{
    if (progress)
        luaL_checktype(L, progress, LUA_TFUNCTION);
    if (luaL_newmetatable(L, L_GRIDRES)) {   /* the first run registers the class */
        lua_pushcfunction(L, gridres_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    l_gridres *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    luaL_setmetatable(L, L_GRIDRES);
    grid_progress p = {L, progress, pthread_self(), 0, 0, 0};
    p.cancel = l_cancel_flag;
    s->progress = on_progress;
    s->progress_ctx = &p;
    /* without a Lua function, Ctrl-C reaches the fits and cells directly;
     * with one, on_progress mirrors it into p.cancel (an error raised in
     * the function cancels too) */
    s->cancel = progress ? &p.cancel : &l_cancel_flag;
    char err[ELDR_ERRLEN];
    int rc = grid_run(s, &u->g, err, sizeof err);
    u->have = rc == 0;
    s->progress = NULL;
    s->cancel = NULL;
    if (p.failed) {
        lua_pushvalue(L, p.failed);
        lua_error(L);
    }
    if (rc == -2 || (rc < 0 && (p.cancel || l_cancel_flag)))
        luaL_error(L, "eldr.%s: interrupted", fn);
    if (rc < 0)
        l_fail(L, fn, err);
    /* the last cell may have finished on another thread */
    int64_t total = (int64_t)s->n_workers * (s->n_rates ? s->n_rates : 1) * s->n_seeds;
    if (progress && p.reported < total) {
        call_progress(&p, total, total);
        if (p.failed) {
            lua_pushvalue(L, p.failed);
            lua_error(L);
        }
    }
    return &u->g;
}

void l_setci(lua_State *L, const char *k, const grid_stat *s)
{
    if (!isfinite(s->lo) || !isfinite(s->hi))
        return;
    lua_createtable(L, 2, 0);
    lua_pushnumber(L, s->lo);
    lua_rawseti(L, -2, 1);
    lua_pushnumber(L, s->hi);
    lua_rawseti(L, -2, 2);
    lua_setfield(L, -2, k);
}

void l_push_grid_row(lua_State *L, const grid_result *g, int i)
{
    const grid_row *r = &g->rows[i];
    lua_createtable(L, 0, 24);
    lua_pushstring(L, route_kind_name(r->kind));
    lua_setfield(L, -2, "policy");
    l_setint(L, "K", r->K);
    l_setint(L, "workers", r->K);
    if (r->rate > 0)
        l_setnum(L, "rate", r->rate);
    else {
        lua_pushstring(L, "trace");
        lua_setfield(L, -2, "rate");
    }
    l_setnum(L, "tau", r->tau);            /* NaN (a baseline): nil */
    l_set_seed_stats(L, r);
    if (r->best_baseline >= 0) {
        lua_pushstring(L, route_kind_name(g->rows[r->best_baseline].kind));
        lua_setfield(L, -2, "best_baseline");
    }
}

void l_set_seed_stats(lua_State *L, const grid_row *r)
{
    l_setint(L, "seeds", r->n_seeds);
    l_setnum(L, "tpot_p50_ms", r->tpot_p50.mean);
    l_setci(L, "tpot_p50_ms_ci95", &r->tpot_p50);
    l_pushnums(L, r->tpot_p50_ms, r->n_seeds);
    lua_setfield(L, -2, "tpot_p50_ms_per_seed");
    l_setnum(L, "tpot_p99_ms", r->tpot_p99.mean);
    l_setnum(L, "queue_p50_ms", r->queue_p50.mean);
    l_setnum(L, "distinct_per_step", r->distinct.mean);
    l_setnum(L, "reuse", r->reuse.mean);
    l_setnum(L, "imbalance", r->imbalance.mean);
    l_setnum(L, "tokens_per_s", r->tokens_per_s.mean);
    l_setnum(L, "vs_best_pct", r->vs_best_pct.mean);
    l_setci(L, "vs_best_pct_ci95", &r->vs_best_pct);
    l_setnum(L, "distinct_vs_best_pct", r->distinct_vs_best_pct.mean);
}
