/* l_split.c - the calibration/evaluation split in Lua, one rule with the
 * CLI (src/core/split.h: a seeded random split by default, head, or
 * stratified by label): eldr.calib_split, and the helpers that
 * eldr.simulate, eldr.advise and Trace:split share (l_split.h). */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "l_split.h"
#include "l_types.h"
#include "l_util.h"

static split_mode check_mode(lua_State *L, const char *fn, const char *arg, int idx)
{
    int m = lua_type(L, idx) == LUA_TSTRING ? split_mode_parse(lua_tostring(L, idx)) : -1;
    if (m < 0) {
        char got[48];
        l_argerror(L, fn, arg, "'random', 'head' or 'stratified' expected, got %s",
                   l_got(L, idx, got, sizeof got));
    }
    return (split_mode)m;
}

/* A size: a count >= 1, a fraction in (0, 1), or 0. */
static double check_size(lua_State *L, int idx, const char *fn, const char *arg)
{
    double v;
    if (!l_coerce(L, idx, L_NUM, NULL, &v) || v < 0 || v > 1e15) {
        char got[48];
        l_argerror(L, fn, arg, "a count >= 1, a fraction in (0, 1) or 0 expected, got %s",
                   l_got(L, idx, got, sizeof got));
    }
    return v;
}

int l_optsplit(lua_State *L, int opts, const char *fn, split_spec *s)
{
    split_spec_default(s);
    int given = 0;
    if (l_getopt(L, opts, "split") != LUA_TNIL) {
        s->mode = check_mode(L, fn, "split", -1);
        given = 1;
    }
    lua_pop(L, 1);
    if (l_getopt(L, opts, "calib_split") != LUA_TNIL) {
        s->size = check_size(L, -1, fn, "calib_split");
        s->size_given = 1;
        given = 1;
    }
    lua_pop(L, 1);
    if (l_getopt(L, opts, "split_seed") != LUA_TNIL)
        given = s->pinned = 1;
    lua_pop(L, 1);
    s->seed = (uint64_t)l_optint(L, opts, fn, "split_seed", 0, INT64_MAX, (lua_Integer)s->seed);
    return given;
}

void l_split_rows(lua_State *L, const trace_t *t, const split_spec *s, int64_t count,
                  const char *fn, const char *arg, split_rows *r)
{
    char err[ELDR_ERRLEN];
    /* the boxes first, so that copying cannot raise while r owns memory */
    int64_t *cb = l_box(L, ((size_t)t->n + 1) * sizeof *cb);
    int64_t *eb = l_box(L, ((size_t)t->n + 1) * sizeof *eb);
    split_rows tmp;
    int rc = count >= 0 ? split_make_count(t, s->mode, s->seed, count, &tmp, err, sizeof err)
                        : split_make(t, s, &tmp, err, sizeof err);
    if (rc < 0)
        l_argerror(L, fn, arg, "%s", err);
    if (tmp.n_calib)
        memcpy(cb, tmp.calib, (size_t)tmp.n_calib * sizeof *cb);
    if (tmp.n_eval)
        memcpy(eb, tmp.eval, (size_t)tmp.n_eval * sizeof *eb);
    *r = tmp;
    r->calib = cb;
    r->eval = eb;
    free(tmp.calib);
    free(tmp.eval);
}

void l_push_split_traces(lua_State *L, const trace_t *t, const split_rows *r, const char *fn)
{
    char err[ELDR_ERRLEN];
    l_trace *a = l_newtrace(L);
    if (!(a->t = trace_select(t, r->calib, r->n_calib, err, sizeof err)))
        l_fail(L, fn, err);
    l_trace *b = l_newtrace(L);
    if (!(b->t = trace_select(t, r->eval, r->n_eval, err, sizeof err)))
        l_fail(L, fn, err);
}

void l_pushsplit(lua_State *L, const split_rows *r)
{
    char text[160];
    split_describe(r, text, sizeof text);
    lua_createtable(L, 0, 5);
    lua_pushstring(L, split_mode_name(r->mode));
    lua_setfield(L, -2, "mode");
    if (r->mode != SPLIT_HEAD)
        l_setint(L, "seed", (lua_Integer)r->seed);
    l_setint(L, "calib_rows", r->n_calib);
    l_setint(L, "eval_rows", r->n_eval);
    lua_pushstring(L, text);
    lua_setfield(L, -2, "text");
}

/* eldr.calib_split(trace [, size | {size, mode, seed}]) -> calib, eval, info */
static int l_calib_split(lua_State *L)
{
    const char *fn = "calib_split";
    lua_settop(L, 2);
    trace_t *t = l_checktrace(L, 1, fn, "trace");
    split_spec s;
    split_spec_default(&s);
    if (lua_istable(L, 2)) {
        static const char *const known[] = {"size", "mode", "seed", NULL};
        l_checkopts(L, 2, fn, known);
        if (l_getopt(L, 2, "size") != LUA_TNIL) {
            s.size = check_size(L, -1, fn, "size");
            s.size_given = 1;
        }
        lua_pop(L, 1);
        if (l_getopt(L, 2, "mode") != LUA_TNIL)
            s.mode = check_mode(L, fn, "mode", -1);
        lua_pop(L, 1);
        s.seed = (uint64_t)l_optint(L, 2, fn, "seed", 0, INT64_MAX, (lua_Integer)s.seed);
    } else if (!lua_isnil(L, 2)) {
        s.size = check_size(L, 2, fn, "spec");
        s.size_given = 1;
    }
    split_rows r;
    l_split_rows(L, t, &s, -1, fn, "spec", &r);
    l_push_split_traces(L, t, &r, fn);
    l_set_lineage(L, -2, 1, r.calib, r.n_calib);   /* for eldr.simulate's in-sample check */
    l_set_lineage(L, -1, 1, r.eval, r.n_eval);
    l_pushsplit(L, &r);
    l_pushint64s(L, r.calib, r.n_calib, 1);
    lua_setfield(L, -2, "calib");
    l_pushint64s(L, r.eval, r.n_eval, 1);
    lua_setfield(L, -2, "eval");
    return 3;
}

static const l_fn module_fns[] = {
    {"calib_split", l_calib_split,
     "eldr.calib_split(trace [, size | {size = 1000, mode = 'random'|'head'|'stratified', "
     "seed = 1}]) -> calib, eval, info: the split of eldr sim (a seeded random draw by "
     "default; size a count capped at half, a fraction, or 0 = none)"},
    {NULL, NULL, NULL},
};

void l_open_split(lua_State *L)
{
    l_register(L, module_fns, "eldr.");
}
