/* module.c - luaopen_eldr: the `eldr` table assembled from the binding
 * files (one per core area), the help functions over their registry, the
 * lazy loading of the pure-Lua helpers, and the Lua state of the front
 * ends (eldr_lua.h). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "eldr_lua.h"
#include "l_types.h"
#include "l_util.h"
#include "model.h"

const char *const eldr_lua_submodules[] = {"calibrate", "report", "experiments", NULL};

/* Merge the _help table of a loaded helper module (at idx) into the
 * registry, so :help lists the Lua helpers beside the C functions, and
 * map each helper function to its name ("eldr.report.print" is the field
 * "print" of the module) for help(eldr.report.print). */
static void merge_help(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx) || lua_getfield(L, idx, "_help") != LUA_TTABLE) {
        lua_pop(L, 1);
        return;
    }
    l_pushhelp(L);
    lua_pushnil(L);
    while (lua_next(L, -3)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, -4);
        const char *name = lua_tostring(L, -1);
        const char *field = name ? strrchr(name, '.') : NULL;
        if (field && lua_getfield(L, idx, field + 1) == LUA_TFUNCTION)
            l_sethelpfn(L, -1, name);
        if (field)
            lua_pop(L, 1);
    }
    lua_pop(L, 2);
}

/* __index of the module table: eldr.calibrate etc. are required on use. */
static int lazy_index(lua_State *L)
{
    const char *k = lua_tostring(L, 2);
    for (int i = 0; k && eldr_lua_submodules[i]; i++) {
        if (strcmp(k, eldr_lua_submodules[i]))
            continue;
        lua_getglobal(L, "require");
        lua_pushfstring(L, "eldr.%s", k);
        lua_call(L, 1, 1);
        merge_help(L, -1);
        lua_pushvalue(L, 2);
        lua_pushvalue(L, -2);
        lua_rawset(L, 1);
        return 1;
    }
    return 0;
}

/* Load every helper module (for a complete help listing); a helper that
 * fails to load is skipped here: using it reports the error. */
static void load_submodules(lua_State *L)
{
    for (int i = 0; eldr_lua_submodules[i]; i++) {
        lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
        lua_getfield(L, -1, "eldr");
        lua_remove(L, -2);
        lua_pushcfunction(L, lazy_index);
        lua_insert(L, -2);
        lua_pushstring(L, eldr_lua_submodules[i]);
        if (lua_pcall(L, 2, 1, 0) != LUA_OK) { /* index(eldr, name) */
        }
        lua_pop(L, 1);
    }
}

/* eldr.help_names() -> sorted list of every documented name */
static int l_help_names(lua_State *L)
{
    load_submodules(L);
    lua_newtable(L);
    int out = lua_gettop(L), n = 0;
    l_pushhelp(L);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, out, ++n);
    }
    lua_pop(L, 1);
    lua_getglobal(L, "table");
    lua_getfield(L, -1, "sort");
    lua_pushvalue(L, out);
    lua_call(L, 1, 0);
    lua_settop(L, out);
    return 1;
}

/* Does a full name (eldr.load, Trace:select) match a query? Exact, or
 * the part after the last '.' or ':', or the query with "eldr." added. */
static int name_matches(const char *full, const char *q)
{
    if (!strcmp(full, q))
        return 1;
    if (!strncmp(full, "eldr.", 5) && !strcmp(full + 5, q))
        return 1;
    const char *tail = strrchr(full, ':');
    const char *dot = strrchr(full, '.');
    if (!tail || (dot && dot > tail))
        tail = dot;
    return tail && !strcmp(tail + 1, q);
}

/* The areas of the full listing (eldr.help() and the REPL's :help), in
 * the order of docs/lua-api.md. A name belongs to the first area with a
 * pattern equal to it or, for a pattern ending in '.' or ':', starting
 * with it; the rest goes to the last area. */
static const struct help_area {
    const char *title;
    const char *const pat[12];
} help_areas[] = {
    {"Traces", {"eldr.load", "eldr.gen", "eldr.import", "eldr.capture", "eldr.info", "Trace:",
                NULL}},
    {"Signatures", {"eldr.recipe", "eldr.signatures", "eldr.matrix", "eldr.pca", "Recipe:",
                    "Signatures:", NULL}},
    {"Calibration", {"eldr.rho", "eldr.rho_variants", "eldr.select_layers", "eldr.rho_curve",
                     "eldr.kmeans", "eldr.hungarian", "eldr.calibrate", "eldr.calibrate.",
                     NULL}},
    {"Models", {"eldr.fit", "eldr.model", "eldr.load_model", "eldr.model_from_json", "Model:",
                NULL}},
    {"Simulation", {"eldr.simulate", "eldr.sweep", "eldr.calib_split", "eldr.costfit",
                    "eldr.cost_model", "eldr.step_time", "eldr.experiments",
                    "eldr.experiments.", NULL}},
    {"Live router and dashboard", {"eldr.attach", "eldr.load_snapshot", "Router:", "eldr.dash",
                                   NULL}},
    {"Reports and help", {NULL}},
};
#define N_AREAS (sizeof help_areas / sizeof help_areas[0])

static int area_of(const char *name)
{
    for (size_t a = 0; a + 1 < N_AREAS; a++)
        for (const char *const *p = help_areas[a].pat; *p; p++) {
            size_t n = strlen(*p);
            int prefix = (*p)[n - 1] == '.' || (*p)[n - 1] == ':';
            if (prefix ? !strncmp(name, *p, n) : !strcmp(name, *p))
                return (int)a;
        }
    return (int)N_AREAS - 1;
}

/* Every help line, under the title of its area, areas apart by a blank
 * line. */
static int help_grouped(lua_State *L, int names, int help)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    int first = 1, titled = 0;
    for (size_t a = 0; a < N_AREAS * 2; a++) {
        /* each area twice: its functions (eldr.x), then its methods (T:x) */
        int methods = a % 2;
        if (!methods)
            titled = 0;
        for (lua_Integer i = 1; lua_rawgeti(L, names, i) != LUA_TNIL; i++) {
            const char *full = lua_tostring(L, -1);
            if (area_of(full) != (int)(a / 2) || (strchr(full, ':') != NULL) != methods) {
                lua_pop(L, 1);
                continue;
            }
            lua_getfield(L, help, full);
            const char *line = lua_tostring(L, -1);
            lua_pop(L, 2);
            if (!titled) {
                if (!first)
                    luaL_addstring(&b, "\n\n");
                luaL_addstring(&b, help_areas[a / 2].title);
                titled = 1;
                first = 0;
            }
            luaL_addstring(&b, "\n  ");
            luaL_addstring(&b, line);
        }
        lua_pop(L, 1);
    }
    luaL_pushresult(&b);
    return 1;
}

/* Help of a value: a documented function's line; for a module table or
 * an object (its metatable's __index), the lines of the documented
 * functions it holds, sorted. Pushes the text or nil. */
static int help_value(lua_State *L, int v, int help)
{
    l_pushhelpfn(L);
    int byfn = lua_gettop(L);
    if (lua_type(L, v) == LUA_TFUNCTION) {
        lua_pushvalue(L, v);
        if (lua_rawget(L, byfn) != LUA_TSTRING)
            return 1; /* nil: not one of ours */
        lua_getfield(L, help, lua_tostring(L, -1));
        return 1;
    }
    int tbl = 0;
    if (lua_type(L, v) == LUA_TTABLE)
        tbl = v;
    else if (luaL_getmetafield(L, v, "__index") == LUA_TTABLE)
        tbl = lua_gettop(L);
    if (!tbl) {
        lua_pushnil(L);
        return 1;
    }
    lua_newtable(L); /* the names found */
    int found = lua_gettop(L), n = 0;
    lua_pushnil(L);
    while (lua_next(L, tbl)) {
        if (lua_type(L, -1) == LUA_TFUNCTION && lua_rawget(L, byfn) == LUA_TSTRING)
            lua_rawseti(L, found, ++n);
        else
            lua_pop(L, 1);
    }
    if (!n) {
        lua_pushnil(L);
        return 1;
    }
    lua_getglobal(L, "table");
    lua_getfield(L, -1, "sort");
    lua_pushvalue(L, found);
    lua_call(L, 1, 0);
    lua_pop(L, 1);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, found, i);
        lua_gettable(L, help);
        if (i > 1)
            luaL_addchar(&b, '\n');
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    return 1;
}

/* eldr.check(value, kind, fn, name [, lo, hi]) -> value: the coercion
 * rule (l_util.h) for the functions written in Lua (lua/eldr/), so
 * that they take and refuse what the C bindings do, with the same error. */
static int l_check(lua_State *L)
{
    static const char *const kinds[] = {"integer", "number", "boolean", "string", NULL};
    int k = luaL_checkoption(L, 2, NULL, kinds);
    const char *fn = luaL_checkstring(L, 3), *name = luaL_checkstring(L, 4);
    if (!strncmp(fn, "eldr.", 5))
        fn += 5;
    switch ((l_kind)k) {
    case L_INT:
        lua_pushinteger(L, l_checkint(L, 1, fn, name, (lua_Integer)luaL_optinteger(L, 5, LUA_MININTEGER),
                                      (lua_Integer)luaL_optinteger(L, 6, LUA_MAXINTEGER)));
        return 1;
    case L_NUM:
        lua_pushnumber(L, l_checknumin(L, 1, fn, name, luaL_optnumber(L, 5, -HUGE_VAL),
                                       luaL_optnumber(L, 6, HUGE_VAL)));
        return 1;
    case L_BOOL:
    case L_STR:
        if (!l_coerce(L, 1, (l_kind)k, NULL, NULL)) {
            char got[48];
            l_argerror(L, fn, name, "%s expected, got %s", kinds[k], l_got(L, 1, got, sizeof got));
        }
        lua_pushvalue(L, 1);
        return 1;
    }
    return 0;
}

/* eldr.help([name | value]) -> text: every line grouped by area; those
 * matching name; or the help of a function, module or object (nil when
 * nothing matches) */
static int l_help(lua_State *L)
{
    lua_settop(L, 1);
    if (!lua_isnoneornil(L, 1) && lua_type(L, 1) != LUA_TSTRING) {
        load_submodules(L);
        l_pushhelp(L);
        return help_value(L, 1, lua_gettop(L));
    }
    const char *q = luaL_optstring(L, 1, NULL);
    l_help_names(L);
    int names = lua_gettop(L);
    l_pushhelp(L);
    int help = lua_gettop(L);
    if (!q)
        return help_grouped(L, names, help);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    int found = 0;
    for (lua_Integer i = 1; lua_rawgeti(L, names, i) != LUA_TNIL; i++) {
        const char *full = lua_tostring(L, -1);
        if (!q || name_matches(full, q)) {
            lua_getfield(L, help, full);
            const char *line = lua_tostring(L, -1);
            lua_pop(L, 2);
            if (found++)
                luaL_addchar(&b, '\n');
            luaL_addstring(&b, line);
        } else
            lua_pop(L, 1);
    }
    lua_pop(L, 1);
    luaL_pushresult(&b);
    if (!found)
        lua_pushnil(L);
    return 1;
}

void l_open_dash(lua_State *L);   /* l_dash.c (helper M2): eldr.dash */
void l_open_capture(lua_State *L);   /* l_capture.c: eldr.capture */

int luaopen_eldr(lua_State *L)
{
    lua_newtable(L);
    l_open_trace(L);
    l_open_sig(L);
    l_open_calib(L);
    l_open_kmeans(L);
    l_open_model(L);
    l_open_sim(L);
    l_open_split(L);
    l_open_grid(L);
    l_open_cost(L);
    l_open_pca(L);
    l_open_attach(L);
    l_open_dash(L);   /* l_dash.c: eldr.dash, the dashboard */
    l_open_capture(L);
    static const l_fn fns[] = {
        {"help", l_help, "eldr.help([name | value]) -> text: every function's one-line help "
                         "grouped by area, those called name, or the help of a function, "
                         "module or object (help(eldr.fit))"},
        {"help_names", l_help_names, "eldr.help_names() -> {names}: every documented function "
                                     "and method"},
        {"check", l_check, "eldr.check(value, kind, fn, name [, lo, hi]) -> value: the one "
                           "coercion rule of every binding (kind 'integer', 'number', "
                           "'boolean' or 'string'), for functions written in Lua; raises the "
                           "bindings' error naming fn and name"},
        {NULL, NULL, NULL},
    };
    l_register(L, fns, "eldr.");
    l_open_pprint(L);
    lua_pushstring(L, ELDR_VERSION);
    lua_setfield(L, -2, "version");
    l_sethelp(L, "eldr.calibrate", "eldr.calibrate: the calibration pipeline in a few calls "
                                   "(lua/eldr/calibrate.lua)");
    l_sethelp(L, "eldr.report", "eldr.report: aligned tables and CSV (lua/eldr/report.lua)");
    l_sethelp(L, "eldr.experiments", "eldr.experiments: tau and K grids "
                                      "(lua/eldr/experiments.lua)");
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, lazy_index);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    return 1;
}

/* Prepend dir/?.lua;dir/?/init.lua to package.path. */
static void add_path(lua_State *L, const char *dir)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
}

static void set_paths(lua_State *L)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            char dir[PATH_MAX + 32];
            /* added in reverse: the last one added is searched first */
            snprintf(dir, sizeof dir, "%s/../share/eldr/lua", exe);
            add_path(L, dir);
            snprintf(dir, sizeof dir, "%s/../lua", exe);
            add_path(L, dir);
        }
    }
    const char *env = getenv("ELDR_LUA_PATH");
    if (env && *env)
        add_path(L, env);
}

static int open_all(lua_State *L)
{
    luaL_openlibs(L);
    set_paths(L);
    luaL_requiref(L, "eldr", luaopen_eldr, 1);
    lua_pop(L, 1);
    return 0;
}

lua_State *eldr_lua_new(void)
{
    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, "eldr: cannot create a Lua state (out of memory)\n");
        return NULL;
    }
    lua_pushcfunction(L, open_all);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
        fprintf(stderr, "eldr: %s\n", lua_tostring(L, -1));
        lua_close(L);
        return NULL;
    }
    return L;
}
