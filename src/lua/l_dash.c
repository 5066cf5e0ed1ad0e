/* l_dash.c - eldr.dash: the dashboard (src/tui) opened from Lua.
 *
 *   eldr.dash(trace_or_path [, opts])     on a Trace or a trace file
 *   eldr.dash{attach = url [, ...]}       live on a running eldrd
 *   eldr.dash{snapshot = file [, ...]}    a saved /v1/snapshot, offline
 *
 * Interactive on the terminal (needs one; returns when the user quits),
 * or with frame = true one frame returned as text, no terminal needed (as
 * `eldr dash --frame -`; first = true: the first look's, as --first). A Trace or Model passed in is copied: the
 * dashboard owns its data and the Lua objects stay usable. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tui/live.h"
#include "../tui/tui.h"
#include "err.h"
#include "route.h"
#include "l_types.h"
#include "l_util.h"

static const char *const OPTS[] = {"attach", "snapshot", "model", "view", "worker", "zoom",
                                   "tau", "K", "policy", "frame", "width", "height",
                                   "interval", "timeout", "seed", "layer", "expert", "first",
                                   NULL};

/* The start settings shared by every mode. */
static void start_opts(lua_State *L, int idx, const char *fn, tui_start *st)
{
    tui_start_default(st);
    const char *view = l_optstr(L, idx, fn, "view", "overview");
    if ((st->view = dash_view_parse(view)) < 0)
        l_argerror(L, fn, "view", "overview, balance, heatmap, queues, scatter, rho, tradeoff, "
                   "decisions or drift expected, got '%s'", view);
    st->worker = (int)l_optint(L, idx, fn, "worker", 1, ROUTE_MAX_WORKERS, 1) - 1;
    st->zoom = l_optbool(L, idx, fn, "zoom", 0);
    /* the heatmap's cell cursor: 0-based ids like the CLI's --cell */
    st->cell_l = (int)l_optint(L, idx, fn, "layer", 0, 1 << 20, 0);
    st->cell_e = (int)l_optint(L, idx, fn, "expert", 0, 1 << 20, 0);
    st->tau = l_optnum(L, idx, fn, "tau", 0, ROUTE_TAU_MAX, -1);
    st->K = (int)l_optint(L, idx, fn, "K", 1, DASH_K_MAX, 0);
    const char *pol = l_optstr(L, idx, fn, "policy", "eldr");
    int k = route_kind_parse(pol);
    if (k < 0 || !dash_policy_shown((route_kind)k))
        l_argerror(L, fn, "policy", "%s expected, got '%s'", DASH_POLICIES, pol);
    st->policy = (route_kind)k;
}

static void need_terminal(lua_State *L, const char *fn)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        l_fail(L, fn, "the dashboard needs a terminal (pass {frame = true} for one frame as "
                      "text)");
}

/* Push the frame text (freed here) or raise err. */
static int push_frame(lua_State *L, const char *fn, int rc, dash_t *d, char *text,
                      const char *err)
{
    dash_free(d);
    if (rc) {
        free(text);
        return l_fail(L, fn, err);
    }
    lua_pushstring(L, text);
    free(text);
    return 1;
}

static int dash_live_mode(lua_State *L, const char *fn, int idx, int frame, int w, int h,
                          const tui_start *st)
{
    tui_live lo = {.interval_s = LIVE_DEFAULT_INTERVAL, .timeout_s = 2};
    lo.url = l_optstr(L, idx, fn, "attach", NULL);
    lo.snapshot_path = l_optstr(L, idx, fn, "snapshot", NULL);
    lo.interval_s = l_optnum(L, idx, fn, "interval", 0.05, 3600, lo.interval_s);
    lo.timeout_s = l_optnum(L, idx, fn, "timeout", 0.1, 600, lo.timeout_s);
    if (lo.url && lo.snapshot_path)
        l_argerror(L, fn, "opts", "attach and snapshot: give one of them");
    if (st->K > 0 || st->tau >= 0 || st->policy != ROUTE_ELDR)
        l_argerror(L, fn, "opts", "K, tau and policy do not apply live (the daemon's)");
    char err[ELDR_ERRLEN];
    if (frame) {
        dash_t d;
        char *text = NULL;
        int rc = tui_frame_live(&lo, st, w, h, &d, &text, err, sizeof err);
        return push_frame(L, fn, rc, &d, text, err);
    }
    need_terminal(L, fn);
    if (tui_run_live(&lo, st, err, sizeof err) < 0)
        return l_fail(L, fn, err);
    return 0;
}

/* A copy of a Model through its JSON form (owned by the caller). */
static model_t *copy_model(lua_State *L, const char *fn, const model_t *m)
{
    char *json = NULL, err[ELDR_ERRLEN];
    model_t *out = NULL;
    if (model_to_json_text(m, &json, err, sizeof err) ||
        model_from_json_text(json, "model", &out, err, sizeof err)) {
        free(json);
        l_fail(L, fn, err);
    }
    free(json);
    return out;
}

static int copy_trace(const trace_t *src, trace_t **out, char *err, size_t errlen)
{
    int64_t *rows = eldr_calloc((size_t)src->n, sizeof *rows);
    if (!rows)
        return eldr_errf(err, errlen, "out of memory copying the trace");
    for (int64_t i = 0; i < src->n; i++)
        rows[i] = i;
    *out = trace_select(src, rows, src->n, err, errlen);
    free(rows);
    return *out ? 0 : -1;
}

static int dash_trace_mode(lua_State *L, const char *fn, int frame, int w, int h,
                           const tui_start *st)
{
    dash_opts o;
    dash_opts_default(&o);
    o.seed = (uint64_t)l_optint(L, 2, fn, "seed", 0, INT64_MAX, 1);
    if (st->K > 0)
        o.K = st->K;
    const char *path = lua_type(L, 1) == LUA_TSTRING ? lua_tostring(L, 1) : NULL;
    const trace_t *src = path ? NULL : l_checktrace(L, 1, fn, "trace");
    const model_t *msrc = NULL;
    const char *mpath = NULL;
    if (l_getopt(L, 2, "model") == LUA_TSTRING)
        mpath = lua_tostring(L, -1);
    else if (!lua_isnil(L, -1))
        msrc = l_checkmodel(L, lua_gettop(L), fn, "model");
    lua_pop(L, 1);
    char err[ELDR_ERRLEN];
    trace_t *t = NULL;
    /* the model first (copy_model may raise while nothing is owned yet);
     * after that every failure frees what it owns before raising */
    model_t *m = msrc ? copy_model(L, fn, msrc) : NULL;
    if (mpath && model_load(mpath, &m, err, sizeof err))
        return l_fail(L, fn, err);
    if (path ? trace_load(path, &t, err, sizeof err) : copy_trace(src, &t, err, sizeof err)) {
        model_free(m);
        return l_fail(L, fn, err);
    }
    o.trace_path = path ? path : "(Lua Trace)";
    o.model_path = mpath;
    if (frame) {
        dash_t d;
        char *text = NULL;
        int rc = tui_frame_trace(&o, st, t, m, w, h, &d, &text, err, sizeof err);
        return push_frame(L, fn, rc, &d, text, err);
    }
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        trace_free(t);
        model_free(m);
        need_terminal(L, fn);
    }
    if (tui_run_trace(&o, st, t, m, err, sizeof err) < 0)
        return l_fail(L, fn, err);
    return 0;
}

static int l_dash(lua_State *L)
{
    const char *fn = "dash";
    int live = lua_istable(L, 1);
    int idx = live ? 1 : 2;
    if (!live && lua_type(L, 1) != LUA_TSTRING)
        l_checktrace(L, 1, fn, "trace");
    l_checkopts(L, idx, fn, OPTS);
    int has_live = l_getopt(L, idx, "attach") != LUA_TNIL;
    has_live |= l_getopt(L, idx, "snapshot") != LUA_TNIL;
    lua_pop(L, 2);
    if (live && !has_live)
        l_argerror(L, fn, "opts", "a table needs attach = URL or snapshot = FILE (or pass a "
                   "Trace or a path)");
    if (!live && has_live)
        l_argerror(L, fn, "opts", "attach/snapshot take no trace: eldr.dash{attach = url}");
    tui_start st;
    start_opts(L, idx, fn, &st);
    int frame = l_optbool(L, idx, fn, "frame", 0);
    /* the first look instead of the refined frame (--first) */
    st.first = l_optbool(L, idx, fn, "first", 0);
    int w = (int)l_optint(L, idx, fn, "width", 40, 1000, 100);
    int h = (int)l_optint(L, idx, fn, "height", 10, 1000, 30);
    return live ? dash_live_mode(L, fn, idx, frame, w, h, &st)
                : dash_trace_mode(L, fn, frame, w, h, &st);
}

void l_open_dash(lua_State *L)
{
    static const l_fn fns[] = {
        {"dash", l_dash, "eldr.dash(trace_or_path [, opts]) / eldr.dash{attach = url | "
                         "snapshot = file} -> nil, or the frame text with frame = true: the "
                         "dashboard (opts: model, view, worker, zoom, tau, K, policy, width, "
                         "height, interval, timeout, seed, first: the first look's frame)"},
        {NULL, NULL, NULL},
    };
    l_register(L, fns, "eldr.");
}
