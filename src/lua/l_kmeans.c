/* l_kmeans.c - eldr.kmeans: balanced (or plain) spherical K-means over a
 * Signatures matrix (kmeans.h). Ctrl-C in the REPL raises l_cancel_flag,
 * which kmeans_fit polls, so a long fit stops and returns to the prompt.
 * Rows are checked here first so that messages name 1-based rows. */
#include <math.h>
#include <string.h>

#include "err.h"
#include "kmeans.h"
#include "l_types.h"
#include "l_util.h"

/* A Lua progress function, called through pcall from inside the fit: an
 * error there must not longjmp through kmeans_fit, so it cancels the fit
 * and is re-raised afterwards. */
typedef struct progress_ctx {
    lua_State *L;
    int fn_idx;
    int failed;
    volatile int cancel;
} progress_ctx;

static void progress(void *ctx, int iter, double objective)
{
    progress_ctx *p = ctx;
    if (l_cancel_flag)
        p->cancel = 1;
    if (p->failed)
        return;
    lua_State *L = p->L;
    lua_pushvalue(L, p->fn_idx);
    lua_pushinteger(L, iter);
    lua_pushnumber(L, objective);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
        p->failed = lua_gettop(L); /* the error message stays on the stack */
        p->cancel = 1;
    }
}

/* The fit's cancel flag: raised by Ctrl-C or by a failing progress
 * function. kmeans polls one int, so a progress callback mirrors the
 * global flag into its own. */
static volatile int *cancel_flag(progress_ctx *p)
{
    return p->fn_idx ? &p->cancel : &l_cancel_flag;
}

static void check_rows(lua_State *L, const l_sigs *s, const char *fn)
{
    for (int64_t i = 0; i < s->n; i++) {
        const float *x = s->x + i * s->d;
        double nn = 0;
        for (int64_t j = 0; j < s->d; j++)
            nn += (double)x[j] * x[j];
        if (!isfinite(nn) || fabs(sqrt(nn) - 1) > 1e-3)
            l_argerror(L, fn, "sigs", "row %lld is %s; leave it out with sigs:sub(rows)",
                       (long long)i + 1, nn == 0 ? "an all-zero signature" : "not a unit row");
    }
}

/* eldr.kmeans(sigs, {k =, init =, iters =, seed =, balanced =, progress =}) */
static int l_kmeans(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "kmeans";
    static const char *const known[] = {"k", "init", "iters", "seed", "balanced", "progress",
                                        NULL};
    l_sigs *s = l_checksigs(L, 1, fn, "sigs");
    luaL_checktype(L, 2, LUA_TTABLE);
    l_checkopts(L, 2, fn, known);
    if (s->n < 1 || s->n > INT32_MAX || s->d > INT32_MAX)
        l_argerror(L, fn, "sigs", "1..%d rows expected, got %lld", INT32_MAX, (long long)s->n);
    int n = (int)s->n, d = (int)s->d;
    kmeans_opts o;
    l_getopt(L, 2, "k");
    kmeans_opts_default(&o, (int)l_checkint(L, -1, fn, "k", 1, n));
    lua_pop(L, 1);
    o.iters = (int)l_optint(L, 2, fn, "iters", 0, 1000000, KMEANS_DEFAULT_ITERS);
    o.seed = (uint64_t)l_optint(L, 2, fn, "seed", 0, INT64_MAX, 1);
    o.balanced = l_optbool(L, 2, fn, "balanced", 1);
    int *init = NULL;
    if (l_getopt(L, 2, "init") != LUA_TNIL) {
        int64_t ni;
        int64_t *rows = l_checkintlist(L, -1, fn, "init", 1, n, &ni);
        if (ni != o.k)
            l_argerror(L, fn, "init", "%d rows (one per cluster) expected, got %lld", o.k,
                       (long long)ni);
        init = l_box(L, (size_t)ni * sizeof *init);
        for (int64_t i = 0; i < ni; i++) {
            for (int64_t j = 0; j < i; j++)
                if (rows[j] == rows[i])
                    l_argerror(L, fn, "init", "rows must differ: init[%lld] and init[%lld] are "
                               "both row %lld", (long long)j + 1, (long long)i + 1,
                               (long long)rows[i]);
            init[i] = (int)rows[i] - 1;
        }
    } else if (o.iters == 0)
        l_argerror(L, fn, "iters", "0 needs init rows (it only assigns to given centroids)");
    o.init_rows = init;
    progress_ctx pc = {L, 0, 0, 0};
    if ((pc.fn_idx = l_optfn(L, 2, fn, "progress", "function(iter, objective)"))) {
        o.progress = progress;
        o.progress_ctx = &pc;
    }
    check_rows(L, s, fn);
    /* everything Lua owns is allocated before the fit, so that nothing
     * raises while the core's result is held */
    l_sigs *cent = l_newsigs(L, o.k, d, fn);
    int cent_idx = lua_gettop(L);
    int *assign = l_box(L, (size_t)n * sizeof *assign);
    int *sizes = l_box(L, (size_t)o.k * sizeof *sizes);
    o.cancel = cancel_flag(&pc);
    if (pc.fn_idx && l_cancel_flag)
        pc.cancel = 1;
    kmeans_result km;
    char err[ELDR_ERRLEN];
    int rc = kmeans_fit(s->x, n, d, &o, &km, err, sizeof err);
    if (pc.failed) {
        if (rc == 0)
            kmeans_result_free(&km);
        lua_pushvalue(L, pc.failed);
        return lua_error(L);
    }
    if (rc == KMEANS_CANCELLED)
        return luaL_error(L, "eldr.%s: interrupted", fn);
    if (rc)
        return l_fail(L, fn, err);
    memcpy(cent->x, km.centroids, (size_t)o.k * (size_t)d * sizeof *cent->x);
    memcpy(assign, km.assign, (size_t)n * sizeof *assign);
    memcpy(sizes, km.sizes, (size_t)o.k * sizeof *sizes);
    double objective = km.objective;
    int iterations = km.iterations, converged = km.converged;
    kmeans_result_free(&km);
    lua_createtable(L, 0, 6);
    lua_pushvalue(L, cent_idx);
    lua_setfield(L, -2, "centroids");
    l_pushints(L, assign, n, 1);
    lua_setfield(L, -2, "assignment");
    l_pushints(L, sizes, o.k, 0);
    lua_setfield(L, -2, "sizes");
    lua_pushnumber(L, objective);
    lua_setfield(L, -2, "objective");
    lua_pushinteger(L, iterations);
    lua_setfield(L, -2, "iterations");
    lua_pushboolean(L, converged);
    lua_setfield(L, -2, "converged");
    lua_pushboolean(L, o.balanced);
    lua_setfield(L, -2, "balanced");
    return 1;
}

static const l_fn module_fns[] = {
    {"kmeans", l_kmeans, "eldr.kmeans(sigs, {k =, init = {rows}, iters = 50, seed = 1, balanced "
                         "= true, progress = fn(iter, obj)}) -> {centroids, assignment, sizes, "
                         "objective, iterations, converged}"},
    {NULL, NULL, NULL},
};

void l_open_kmeans(lua_State *L)
{
    l_register(L, module_fns, "eldr.");
}
