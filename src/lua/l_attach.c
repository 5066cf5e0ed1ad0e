/* l_attach.c - the live router in Lua: eldr.attach(url [, {timeout,
 * token_file}]) -> Router (a client of a running eldrd,
 * src/client/client.h; token_file: the admin token, sent on every call
 * as the daemon's --admin-token-file wants) with snapshot,
 * decisions, explain, set_tau, push, window and model; eldr.load_snapshot
 * (a saved /v1/snapshot as a Model, src/core/snapshot.h); and
 * eldr.hungarian (the K x K matching the refit helper, lua/eldr/refit.lua,
 * aligns new centroids with). JSON answers become Lua tables: objects
 * keyed by name, arrays as sequences, JSON null as nil in objects and
 * false inside arrays (so sequences keep their length). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../client/client.h"
#include "../client/push.h"
#include "err.h"
#include "hungarian.h"
#include "l_types.h"
#include "l_util.h"
#include "snapshot.h"

#define L_ROUTER "eldr.Router"

typedef struct l_router {
    client_t *c;
} l_router;

static client_t *check_router(lua_State *L, const char *fn)
{
    l_router *u = l_checkudata(L, 1, L_ROUTER, fn, "self");
    if (!u->c)
        l_argerror(L, fn, "self", "closed Router");
    return u->c;
}

/* Push a JSON value as Lua. */
static void push_json(lua_State *L, const json_t *v, int in_array)
{
    luaL_checkstack(L, 4, "JSON nested too deep");
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        lua_createtable(L, 0, (int)json_object_size(v));
        json_object_foreach((json_t *)v, k, x) {
            if (json_is_null(x))
                continue;
            push_json(L, x, 0);
            lua_setfield(L, -2, k);
        }
        return;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *x;
        lua_createtable(L, (int)json_array_size(v), 0);
        json_array_foreach(v, i, x) {
            push_json(L, x, 1);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        return;
    }
    case JSON_STRING: lua_pushstring(L, json_string_value(v)); return;
    case JSON_INTEGER: lua_pushinteger(L, (lua_Integer)json_integer_value(v)); return;
    case JSON_REAL: lua_pushnumber(L, json_real_value(v)); return;
    case JSON_TRUE: lua_pushboolean(L, 1); return;
    case JSON_FALSE: lua_pushboolean(L, 0); return;
    case JSON_NULL:
        if (in_array)
            lua_pushboolean(L, 0);
        else
            lua_pushnil(L);
        return;
    }
}

/* Push j (consumed) as Lua, or raise the client's error. */
static int push_answer(lua_State *L, const char *fn, int rc, json_t *j, const char *err)
{
    if (rc < 0)
        return l_fail(L, fn, err);
    push_json(L, j, 0);
    json_decref(j);
    return 1;
}

static int l_attach(lua_State *L)
{
    lua_settop(L, 2);
    const char *fn = "attach";
    static const char *const known[] = {"timeout", "token_file", NULL};
    const char *url = l_checkstr(L, 1, fn, "url");
    l_checkopts(L, 2, fn, known);
    double timeout = l_optnum(L, 2, fn, "timeout", 0.001, 3600, 5);
    const char *token_file = l_optstr(L, 2, fn, "token_file", NULL);
    l_router *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->c = NULL;
    luaL_setmetatable(L, L_ROUTER);
    char err[ELDR_ERRLEN];
    if (!(u->c = client_new(url, timeout, err, sizeof err)))
        return l_fail(L, fn, err);
    if (token_file && client_use_token_file(u->c, token_file, "token_file", err, sizeof err) < 0)
        return l_fail(L, fn, err);
    /* fail now, not at first use; "daemon unreachable" as the commands
     * say it (eldr replay, eldr dash --attach exit 3 with it) */
    long status = 0;
    if (client_call(u->c, "GET", "/healthz", NULL, 0, &status, NULL, err, sizeof err) < 0)
        return status ? l_fail(L, fn, err)
                      : luaL_error(L, "eldr.%s: daemon unreachable: %s", fn, err);
    return 1;
}

static int r_snapshot(lua_State *L)
{
    lua_settop(L, 2);
    const char *fn = "Router:snapshot";
    static const char *const known[] = {"centroids", "decisions", NULL};
    client_t *c = check_router(L, fn);
    l_checkopts(L, 2, fn, known);
    int cent = l_optbool(L, 2, fn, "centroids", 0);
    int n = (int)l_optint(L, 2, fn, "decisions", 0, 1 << 20, 50);
    char err[ELDR_ERRLEN];
    json_t *j;
    int rc = client_snapshot(c, cent, n, &j, err, sizeof err);
    return push_answer(L, fn, rc, j, err);
}

static int r_decisions(lua_State *L)
{
    const char *fn = "Router:decisions";
    client_t *c = check_router(L, fn);
    int n = lua_isnoneornil(L, 2) ? 50 : (int)l_checkint(L, 2, fn, "n", 0, 1 << 20);
    char err[ELDR_ERRLEN];
    json_t *j;
    if (client_snapshot(c, 0, n, &j, err, sizeof err) < 0)
        return l_fail(L, fn, err);
    push_json(L, json_object_get(j, "decisions"), 0);
    json_decref(j);
    return 1;
}

static int r_explain(lua_State *L)
{
    const char *fn = "Router:explain";
    client_t *c = check_router(L, fn);
    const char *id = l_checkstr(L, 2, fn, "request_id");
    char err[ELDR_ERRLEN];
    json_t *j;
    int rc = client_explain(c, id, &j, err, sizeof err);
    return push_answer(L, fn, rc, j, err);
}

static int r_set_tau(lua_State *L)
{
    const char *fn = "Router:set_tau";
    client_t *c = check_router(L, fn);
    double tau = l_checknum(L, 2, fn, "tau");
    if (!isfinite(tau) || tau < 0)
        l_argerror(L, fn, "tau", "finite number >= 0 expected, got %g", tau);
    char err[ELDR_ERRLEN];
    if (client_set_tau(c, tau, err, sizeof err) < 0)
        return l_fail(L, fn, err);
    lua_pushnumber(L, tau);
    return 1;
}

/* push(model [, {dry_run}]) -> the plan (and eldrd's answer): the same
 * alignment and PUT as eldr push (src/client/push.h) */
static int r_push(lua_State *L)
{
    lua_settop(L, 3);
    const char *fn = "Router:push";
    static const char *const known[] = {"dry_run", NULL};
    client_t *c = check_router(L, fn);
    model_t *m = l_checkmodel(L, 2, fn, "model");
    l_checkopts(L, 3, fn, known);
    int dry = l_optbool(L, 3, fn, "dry_run", 0);
    char err[ELDR_ERRLEN];
    push_plan p;
    if (push_prepare(c, m, &p, NULL, err, sizeof err) < 0)
        return l_fail(L, fn, err);
    json_t *j = NULL;
    if (!dry && push_send(c, &p, &j, NULL, err, sizeof err) < 0) {
        push_plan_free(&p);
        return l_fail(L, fn, err);
    }
    /* the answer's keys, then the plan's */
    if (j)
        push_json(L, j, 0);
    else
        lua_createtable(L, 0, 8);
    json_decref(j);
    const model_align *a = &p.align;
    double cost_given = 0;
    for (int i = 0; i < a->K; i++)
        cost_given += 1 - a->cos_as_given[i];
    lua_pushboolean(L, !dry);
    lua_setfield(L, -2, "pushed");
    lua_pushinteger(L, (lua_Integer)p.live_generation);
    lua_setfield(L, -2, "live_generation");
    l_pushints(L, a->perm, a->K, 1);
    lua_setfield(L, -2, "perm");
    l_pushnums(L, a->cos, a->K);
    lua_setfield(L, -2, "cos");
    l_pushnums(L, a->cos_as_given, a->K);
    lua_setfield(L, -2, "cos_as_given");
    lua_pushnumber(L, a->cost);
    lua_setfield(L, -2, "align_cost");
    lua_pushnumber(L, cost_given);
    lua_setfield(L, -2, "cost_as_given");
    lua_pushinteger(L, a->moved);
    lua_setfield(L, -2, "moved");
    lua_pushstring(L, a->what_changed);
    lua_setfield(L, -2, "what_changed");
    push_plan_free(&p);
    return 1;
}

/* window([n]) -> {model_generation, dim, ids, nearest, sim_max, sigs} */
static int r_window(lua_State *L)
{
    const char *fn = "Router:window";
    client_t *c = check_router(L, fn);
    int n = lua_isnoneornil(L, 2) ? -1 : (int)l_checkint(L, 2, fn, "n", 0, 1 << 20);
    char err[ELDR_ERRLEN];
    json_t *j;
    if (client_window(c, n, &j, err, sizeof err) < 0)
        return l_fail(L, fn, err);
    json_t *items = json_object_get(j, "signatures");
    int64_t rows = (int64_t)json_array_size(items);
    int64_t dim = (int64_t)json_integer_value(json_object_get(j, "dim"));
    /* the Signatures userdata is Lua's before anything can raise; j is
     * released on every path below */
    l_sigs *s = rows > 0 && dim > 0 ? l_newsigs(L, rows, dim, fn) : NULL;
    int sigs_idx = lua_gettop(L);
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, (lua_Integer)json_integer_value(json_object_get(j, "model_generation")));
    lua_setfield(L, -2, "model_generation");
    lua_pushinteger(L, (lua_Integer)dim);
    lua_setfield(L, -2, "dim");
    lua_createtable(L, (int)rows, 0);
    lua_createtable(L, (int)rows, 0);
    lua_createtable(L, (int)rows, 0);
    for (int64_t i = 0; i < rows; i++) {
        json_t *it = json_array_get(items, (size_t)i), *sig = json_object_get(it, "signature");
        lua_pushstring(L, json_string_value(json_object_get(it, "request_id")));
        lua_rawseti(L, -4, i + 1);
        lua_pushinteger(L, (lua_Integer)json_integer_value(json_object_get(it, "nearest")) + 1);
        lua_rawseti(L, -3, i + 1);
        lua_pushnumber(L, json_number_value(json_object_get(it, "sim_max")));
        lua_rawseti(L, -2, i + 1);
        for (int64_t d = 0; s && d < dim; d++)
            s->x[i * dim + d] = (float)json_number_value(json_array_get(sig, (size_t)d));
    }
    json_decref(j);
    lua_setfield(L, -4, "sim_max");
    lua_setfield(L, -3, "nearest");
    lua_setfield(L, -2, "ids");
    if (s) {
        lua_pushvalue(L, sigs_idx);
        lua_setfield(L, -2, "sigs");
    }
    return 1;
}

/* model() -> Model: what the daemon serves now (its centroids, idf, tau
 * and worker names) */
static int r_model(lua_State *L)
{
    const char *fn = "Router:model";
    client_t *c = check_router(L, fn);
    char err[ELDR_ERRLEN];
    json_t *j;
    if (client_snapshot(c, 1, 0, &j, err, sizeof err) < 0)
        return l_fail(L, fn, err);
    l_model *u = l_newmodel(L);
    int rc = snapshot_model_json(j, client_url(c), &u->m, err, sizeof err);
    json_decref(j);
    if (rc < 0)
        return l_fail(L, fn, err);
    return 1;
}

static int r_url(lua_State *L)
{
    lua_pushstring(L, client_url(check_router(L, "Router:url")));
    return 1;
}

static int router_gc(lua_State *L)
{
    l_router *u = luaL_checkudata(L, 1, L_ROUTER);
    client_free(u->c);
    u->c = NULL;
    return 0;
}

static int router_tostring(lua_State *L)
{
    l_router *u = luaL_checkudata(L, 1, L_ROUTER);
    lua_pushfstring(L, "Router<%s>", u->c ? client_url(u->c) : "closed");
    return 1;
}

static int l_load_snapshot(lua_State *L)
{
    const char *fn = "load_snapshot";
    const char *path = l_checkstr(L, 1, fn, "path");
    char err[ELDR_ERRLEN];
    l_model *u = l_newmodel(L);
    if (snapshot_model_load(path, &u->m, err, sizeof err) < 0)
        return l_fail(L, fn, err);
    return 1;
}

/* hungarian(cost) -> assignment (row i -> column, 1-based), total */
static int l_hungarian(lua_State *L)
{
    const char *fn = "hungarian";
    luaL_checktype(L, 1, LUA_TTABLE);
    int64_t n = (int64_t)lua_rawlen(L, 1), m = -1;
    if (n < 1 || n > 4096)
        l_argerror(L, fn, "cost", "1..4096 rows expected, got %lld", (long long)n);
    double **rows = l_box(L, (size_t)n * sizeof *rows);
    for (int64_t i = 0; i < n; i++) {
        char what[32];
        int64_t len;
        snprintf(what, sizeof what, "cost[%lld]", (long long)i + 1);
        lua_rawgeti(L, 1, i + 1);
        rows[i] = l_checknumlist(L, -1, fn, what, &len);
        if ((m >= 0 && len != m) || len < n)
            l_argerror(L, fn, what, "%lld numbers expected (>= rows, as row 1), got %lld",
                       (long long)(m >= 0 ? m : n), (long long)len);
        m = len;
        lua_replace(L, -2);
    }
    double *cost = l_box(L, (size_t)(n * m) * sizeof *cost);
    int *col = l_box(L, (size_t)n * sizeof *col);
    for (int64_t i = 0; i < n; i++)
        memcpy(cost + i * m, rows[i], (size_t)m * sizeof *cost);
    double total;
    char err[ELDR_ERRLEN];
    if (hungarian_solve(cost, (int)n, (int)m, col, &total, err, sizeof err) < 0)
        return l_fail(L, fn, err);
    l_pushints(L, col, n, 1);
    lua_pushnumber(L, total);
    return 2;
}

static const l_fn module_fns[] = {
    {"attach", l_attach, "eldr.attach(url [, {timeout = 5, token_file}]) -> Router: a client of "
                         "a running eldrd (checked with /healthz); token_file: its admin token"},
    {"load_snapshot", l_load_snapshot, "eldr.load_snapshot(path) -> Model: the model of a saved "
                                       "/v1/snapshot?centroids=1 (its live tau and workers)"},
    {"hungarian", l_hungarian, "eldr.hungarian(cost) -> assignment, total: minimum-cost matching "
                               "of rows to distinct columns (1-based)"},
    {NULL, NULL, NULL},
};

static const l_fn router_methods[] = {
    {"snapshot", r_snapshot, "router:snapshot([{centroids = false, decisions = 50}]) -> table: "
                             "GET /v1/snapshot"},
    {"decisions", r_decisions, "router:decisions([n = 50]) -> {decision, ...}: the newest n "
                               "decisions, newest first"},
    {"explain", r_explain, "router:explain(request_id) -> table: why that request went where it "
                           "went"},
    {"set_tau", r_set_tau, "router:set_tau(tau) -> tau: PUT /v1/config"},
    {"push", r_push, "router:push(model [, {dry_run = false}]) -> {model_generation, K, dim, "
                     "persisted, pushed, perm, cos, cos_as_given, moved, what_changed}: aligned "
                     "to the live workers (as eldr push), then PUT /v1/model"},
    {"window", r_window, "router:window([n]) -> {sigs, ids, nearest, sim_max, dim, "
                         "model_generation}: recent signatures for a refit"},
    {"model", r_model, "router:model() -> Model: the model the daemon serves now"},
    {"url", r_url, "router:url() -> the daemon's base URL"},
    {NULL, NULL, NULL},
};

void l_open_attach(lua_State *L)
{
    l_newclass(L, L_ROUTER, "Router", router_methods, router_gc, router_tostring, NULL);
    l_register(L, module_fns, "eldr.");
}
