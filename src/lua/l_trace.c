/* l_trace.c - traces in Lua: eldr.load, eldr.gen, eldr.import, eldr.info
 * and the Trace userdata (info, save, select, split, row, counts). The
 * counts stay in C; Lua gets tables only for what it asks for. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "gen.h"
#include "import.h"
#include "l_split.h"
#include "l_types.h"
#include "l_util.h"

/* ---- the userdata ---- */

static int trace_gc(lua_State *L)
{
    l_trace *u = luaL_checkudata(L, 1, L_TRACE);
    trace_free(u->t);
    free(u->path);
    u->t = NULL;
    u->path = NULL;
    return 0;
}

static int trace_tostring(lua_State *L)
{
    l_trace *u = luaL_checkudata(L, 1, L_TRACE);
    if (!u->t)
        lua_pushstring(L, "Trace<empty>");
    else
        lua_pushfstring(L, "Trace<%I req, L=%d E=%d k=%d>", (lua_Integer)u->t->n, u->t->L,
                        u->t->E, u->t->k);
    return 1;
}

static int trace_len(lua_State *L)
{
    lua_pushinteger(L, l_checktrace(L, 1, "Trace:__len", "self")->n);
    return 1;
}

/* ---- info ---- */

static void set_int(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

static void push_datasets(lua_State *L, const trace_t *t)
{
    struct { const void *p; const char *name; } ds[] = {
        {t->decode_counts, "decode_counts"}, {t->gate_prob, "gate_prob"},
        {t->gate_logit, "gate_logit"}, {t->label, "label"}, {t->arrival_s, "arrival_s"},
        {t->request_id, "request_id"}, {t->prefill_experts, "tokens/prefill_experts"},
        {t->decode_experts, "tokens/decode_experts"}, {t->decode_probs, "tokens/decode_probs"},
        {t->block_hashes, "tokens/block_hashes"},
    };
    lua_newtable(L);
    int n = 0;
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
        if (ds[i].p) {
            lua_pushstring(L, ds[i].name);
            lua_rawseti(L, -2, ++n);
        }
}

/* Info table of an in-memory trace. */
static void push_trace_info(lua_State *L, const trace_t *t)
{
    lua_newtable(L);
    lua_pushstring(L, "trace");
    lua_setfield(L, -2, "kind");
    lua_pushstring(L, t->model);
    lua_setfield(L, -2, "model");
    set_int(L, "n", t->n);
    set_int(L, "L", t->L);
    set_int(L, "E", t->E);
    set_int(L, "k", t->k);
    int64_t pt = 0, dt = 0;
    for (int64_t r = 0; r < t->n; r++) {
        pt += t->prompt_tokens[r];
        dt += t->decode_tokens ? t->decode_tokens[r] : 0;
    }
    set_int(L, "prompt_tokens", pt);
    set_int(L, "decode_tokens", dt);
    if (t->arrival_s && t->n > 0) {
        lua_pushnumber(L, t->arrival_s[t->n - 1] - t->arrival_s[0]);
        lua_setfield(L, -2, "span_s");
    }
    push_datasets(L, t);
    lua_setfield(L, -2, "datasets");
    lua_newtable(L);
    for (int j = 0; t->label && j < t->n_labels; j++) {
        int64_t c = 0;
        for (int64_t r = 0; r < t->n; r++)
            c += t->label[r] == j;
        lua_newtable(L);
        lua_pushstring(L, t->label_names[j]);
        lua_setfield(L, -2, "name");
        set_int(L, "count", c);
        lua_pushnumber(L, t->n ? (double)c / (double)t->n : 0.0);
        lua_setfield(L, -2, "share");
        lua_rawseti(L, -2, j + 1);
    }
    lua_setfield(L, -2, "labels");
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "valid");
}

/* eldr.info(path | Trace | Model) */
static int l_info(lua_State *L)
{
    lua_settop(L, 1); /* optional arguments stay at fixed slots */
    const char *fn = "info";
    char err[ELDR_ERRLEN];
    if (luaL_testudata(L, 1, L_TRACE)) {
        push_trace_info(L, l_checktrace(L, 1, fn, "x"));
        return 1;
    }
    if (luaL_testudata(L, 1, L_MODEL)) {
        l_push_model_info(L, l_checkmodel(L, 1, fn, "x"));
        return 1;
    }
    if (lua_type(L, 1) != LUA_TSTRING) {
        char got[48];
        l_argerror(L, fn, "x", "path, Trace or Model expected, got %s",
                   l_got(L, 1, got, sizeof got));
    }
    const char *path = lua_tostring(L, 1);
    if (model_file_probe(path)) {
        l_model *u = l_newmodel(L);
        if (model_load(path, &u->m, err, sizeof err))
            return l_fail(L, fn, err);
        l_push_model_info(L, u->m);
        return 1;
    }
    trace_header_t h;
    if (trace_read_header(path, &h, err, sizeof err))
        return l_fail(L, fn, err);
    /* full load = validation; a bad file still gets its header shown */
    l_trace *u = l_newtrace(L);
    if (trace_load(path, &u->t, err, sizeof err) == 0) {
        push_trace_info(L, u->t);
    } else {
        lua_newtable(L);
        lua_pushstring(L, "trace");
        lua_setfield(L, -2, "kind");
        lua_pushstring(L, h.model);
        lua_setfield(L, -2, "model");
        set_int(L, "n", h.n);
        set_int(L, "L", h.L);
        set_int(L, "E", h.E);
        set_int(L, "k", h.k);
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "valid");
        lua_pushstring(L, err);
        lua_setfield(L, -2, "error");
    }
    lua_pushstring(L, path);
    lua_setfield(L, -2, "path");
    return 1;
}

static int m_info(lua_State *L)
{
    push_trace_info(L, l_checktrace(L, 1, "Trace:info", "self"));
    return 1;
}

/* ---- load, import, gen, save ---- */

static int l_load(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "load";
    static const char *const known[] = {"rows", NULL};
    const char *path = l_checkstr(L, 1, fn, "path");
    l_checkopts(L, 2, fn, known);
    char err[ELDR_ERRLEN];
    int64_t r0 = -1, r1 = -1;
    if (l_getopt(L, 2, "rows") != LUA_TNIL) {
        int64_t n;
        int64_t *rr = l_checkintlist(L, -1, fn, "rows", 1, INT64_MAX, &n);
        if (n != 2 || rr[1] < rr[0])
            l_argerror(L, fn, "rows", "{first, last} with first <= last expected");
        r0 = rr[0] - 1;
        r1 = rr[1];
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    l_trace *u = l_newtrace(L);
    int rc = r0 < 0 ? trace_load(path, &u->t, err, sizeof err)
                    : trace_load_rows(path, r0, r1, &u->t, err, sizeof err);
    if (rc)
        return l_fail(L, fn, err);
    if (r0 < 0)   /* its rows are the file's: an in-sample check can compare */
        u->path = strdup(path);
    return 1;
}

static int l_import(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "import";
    static const char *const known[] = {"format", "top_k", "layers", "experts", NULL};
    const char *path = l_checkstr(L, 1, fn, "path");
    l_checkopts(L, 2, fn, known);
    const char *fmt_name = l_optstr(L, 2, fn, "format", NULL);
    import_format fmt = IMPORT_UNKNOWN;
    if (fmt_name && (fmt = import_format_parse(fmt_name)) == IMPORT_UNKNOWN)
        l_argerror(L, fn, "format", "'npz', 'jsonl', 'npy' or 'frames' expected, got '%s'",
                   fmt_name);
    /* what a bare count file does not say (npy, frames) */
    import_geometry g = {(int)l_optint(L, 2, fn, "top_k", 1, 65535, 0),
                         (int)l_optint(L, 2, fn, "layers", 1, 1 << 20, 0),
                         (int)l_optint(L, 2, fn, "experts", 1, 65535, 0)};
    char err[ELDR_ERRLEN];
    l_trace *u = l_newtrace(L);
    if (import_file_geometry(path, fmt, &g, &u->t, err, sizeof err))
        return l_fail(L, fn, err);
    return 1;
}

static const char *const gen_keys[] = {
    "requests", "layers", "experts", "top_k", "domains", "seed", "model", "base_scale",
    "generalists", "generalist_bump", "domain_strength", "layer_floor", "domain_shares",
    "mix_prob", "mix_weight", "request_noise", "decode_drift", "prompt_tokens",
    "decode_tokens", "length_spread", "arrival_rate", "burst_factor", "burst_period",
    "gates", "gate_prob", "gate_logit", "tokens", "prefix_groups", "prefix_blocks",
    "block_size", "threads", "progress", NULL};

/* gen_check names CLI flags ("--mix-prob is 2, ..."): turn the flag into
 * the Lua option name so the message names what the caller wrote. */
static int gen_error(lua_State *L, const char *err)
{
    if (strncmp(err, "--", 2))
        return l_fail(L, "gen", err);
    char key[64];
    size_t i = 0;
    const char *p = err + 2;
    for (; *p && *p != ' ' && *p != ':' && i + 1 < sizeof key; p++)
        key[i++] = *p == '-' ? '_' : *p;
    key[i] = 0;
    while (*p == ':' || *p == ' ')
        p++;
    return luaL_error(L, "eldr.gen: bad argument '%s' (%s)", key, p);
}

/* eldr.gen's progress: the caller's function, or a bar on a terminal;
 * either way Ctrl-C is looked at with every report. */
typedef struct gen_watch {
    l_progress lp;
    l_tty_bar bar;
    int64_t requests;
} gen_watch;

static void gen_tick(double frac, void *ctx)
{
    gen_watch *w = ctx;
    if (w->lp.fn_idx)
        l_progress_call(&w->lp, "requests", (int64_t)(frac * (double)w->requests), w->requests);
    else
        l_tty_bar_draw(&w->bar, frac);
}

static int l_gen(lua_State *L)
{
    lua_settop(L, 1); /* optional arguments stay at fixed slots */
    const char *fn = "gen";
    l_checkopts(L, 1, fn, gen_keys);
    gen_params_t p;
    gen_defaults(&p);
    const lua_Integer BIG = (lua_Integer)1 << 40;
    p.requests = l_optint(L, 1, fn, "requests", 1, BIG, p.requests);
    p.layers = (int)l_optint(L, 1, fn, "layers", 1, 4096, p.layers);
    p.experts = (int)l_optint(L, 1, fn, "experts", 1, 65535, p.experts);
    p.top_k = (int)l_optint(L, 1, fn, "top_k", 1, 65535, p.top_k);
    p.domains = (int)l_optint(L, 1, fn, "domains", 1, GEN_MAX_DOMAINS, p.domains);
    p.seed = (uint64_t)l_optint(L, 1, fn, "seed", 0, INT64_MAX, (lua_Integer)p.seed);
    snprintf(p.model, sizeof p.model, "%s", l_optstr(L, 1, fn, "model", p.model));
#define NUM(key) p.key = l_optnum(L, 1, fn, #key, -HUGE_VAL, HUGE_VAL, p.key)
    NUM(base_scale);
    NUM(generalist_bump);
    NUM(domain_strength);
    NUM(layer_floor);
    NUM(mix_prob);
    NUM(mix_weight);
    NUM(request_noise);
    NUM(decode_drift);
    NUM(prompt_tokens);
    NUM(decode_tokens);
    NUM(length_spread);
    NUM(arrival_rate);
    NUM(burst_factor);
    NUM(burst_period);
#undef NUM
    p.generalists = (int)l_optint(L, 1, fn, "generalists", 0, 65535, p.generalists);
    int gates = l_optbool(L, 1, fn, "gates", 0);
    p.gate_prob = l_optbool(L, 1, fn, "gate_prob", gates);
    p.gate_logit = l_optbool(L, 1, fn, "gate_logit", gates);
    p.tokens = l_optbool(L, 1, fn, "tokens", 0);
    p.prefix_groups = (int)l_optint(L, 1, fn, "prefix_groups", 0, 1 << 24, p.prefix_groups);
    p.prefix_blocks = (int)l_optint(L, 1, fn, "prefix_blocks", 0, 1 << 24, p.prefix_blocks);
    p.block_size = (int)l_optint(L, 1, fn, "block_size", 1, 1 << 20, p.block_size);
    p.threads = (int)l_optint(L, 1, fn, "threads", 1, GEN_MAX_THREADS, p.threads);
    if (l_getopt(L, 1, "domain_shares") != LUA_TNIL) {
        int64_t n;
        p.domain_shares = l_checknumlist(L, -1, fn, "domain_shares", &n);
        if (n != p.domains)
            l_argerror(L, fn, "domain_shares", "%d shares (one per domain) expected, got %lld",
                       p.domains, (long long)n);
    }
    char err[ELDR_ERRLEN];
    if (gen_check(&p, err, sizeof err))
        return gen_error(L, err);
    gen_watch gw = {.requests = p.requests};
    l_progress_opt(L, 1, fn, &gw.lp);
    l_tty_bar_start(&gw.bar, fn);
    p.progress = gen_tick;
    p.progress_ctx = &gw;
    p.cancel = l_progress_cancel(&gw.lp);   /* Ctrl-C stops the threads, not the next line */
    l_trace *u = l_newtrace(L);
    int rc = gen_run(&p, &u->t, err, sizeof err);
    if (rc == 0)   /* the last requests may have finished on another thread */
        gen_tick(1.0, &gw);
    l_tty_bar_done(&gw.bar);
    l_progress_check(L, &gw.lp);
    if (rc == -2)
        return luaL_error(L, "eldr.%s: interrupted", fn);
    if (rc)
        return gen_error(L, err);
    return 1;
}

static int m_save(lua_State *L)
{
    const char *fn = "Trace:save";
    trace_t *t = l_checktrace(L, 1, fn, "self");
    const char *path = l_checkstr(L, 2, fn, "path");
    char err[ELDR_ERRLEN];
    if (trace_save(t, path, err, sizeof err))
        return l_fail(L, fn, err);
    lua_settop(L, 1);
    return 1;
}

/* ---- rows ---- */

/* Push a new Trace of the given 0-based rows of t, the Trace at slot 1. */
static void push_selected(lua_State *L, const trace_t *t, const int64_t *rows, int64_t n,
                          const char *fn)
{
    char err[ELDR_ERRLEN];
    l_trace *u = l_newtrace(L);
    if (!(u->t = trace_select(t, rows, n, err, sizeof err)))
        l_fail(L, fn, err);
    l_set_lineage(L, -1, 1, rows, n);   /* t is argument 1 (self) */
}

static int label_of(lua_State *L, const trace_t *t, int idx, const char *fn)
{
    const char *name = l_checkstr(L, idx, fn, "label");
    for (int j = 0; j < t->n_labels; j++)
        if (!strcmp(t->label_names[j], name))
            return j;
    return l_argerror(L, fn, "label", "no label '%s' in the trace", name);
}

/* Push the row table {row, prompt_tokens, decode_tokens, label, arrival, id}. */
static void push_row(lua_State *L, const trace_t *t, int64_t r)
{
    lua_createtable(L, 0, 6);
    set_int(L, "row", r + 1);
    set_int(L, "prompt_tokens", t->prompt_tokens[r]);
    if (t->decode_tokens)
        set_int(L, "decode_tokens", t->decode_tokens[r]);
    if (t->label) {
        lua_pushstring(L, t->label_names[t->label[r]]);
        lua_setfield(L, -2, "label");
    }
    if (t->arrival_s) {
        lua_pushnumber(L, t->arrival_s[r]);
        lua_setfield(L, -2, "arrival");
    }
    if (t->request_id && t->request_id[r]) {
        lua_pushstring(L, t->request_id[r]);
        lua_setfield(L, -2, "id");
    }
}

/* trace:select(rows | {label = name | {names}} | function(row) -> bool) */
static int m_select(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "Trace:select";
    trace_t *t = l_checktrace(L, 1, fn, "self");
    int64_t *rows, n = 0;
    if (lua_isfunction(L, 2)) {
        rows = l_box(L, (size_t)t->n * sizeof *rows);
        for (int64_t r = 0; r < t->n; r++) {
            lua_pushvalue(L, 2);
            push_row(L, t, r);
            lua_call(L, 1, 1);
            if (lua_toboolean(L, -1))
                rows[n++] = r;
            lua_pop(L, 1);
        }
    } else if (lua_istable(L, 2) && lua_getfield(L, 2, "label") != LUA_TNIL) {
        if (!t->label)
            l_argerror(L, fn, "label", "the trace has no labels");
        uint8_t *want = l_box(L, (size_t)t->n_labels + 1);
        if (lua_type(L, -2) == LUA_TSTRING) {
            want[label_of(L, t, -2, fn)] = 1;
        } else if (lua_istable(L, -2)) {
            for (lua_Integer i = 1; lua_rawgeti(L, -2, i) != LUA_TNIL; i++) {
                if (lua_type(L, -1) != LUA_TSTRING)
                    l_argerror(L, fn, "label", "label names expected");
                want[label_of(L, t, -1, fn)] = 1;
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
        } else {
            char got[48];
            l_argerror(L, fn, "label", "name or list of names expected, got %s",
                       l_got(L, -2, got, sizeof got));
        }
        rows = l_box(L, (size_t)t->n * sizeof *rows);
        for (int64_t r = 0; r < t->n; r++)
            if (want[t->label[r]])
                rows[n++] = r;
    } else if (lua_istable(L, 2)) {
        rows = l_checkintlist(L, 2, fn, "rows", 1, t->n, &n);
        for (int64_t i = 0; i < n; i++)
            rows[i]--;
    } else {
        char got[48];
        return l_argerror(L, fn, "selection",
                          "list of rows, {label = ...} or function expected, got %s",
                          l_got(L, 2, got, sizeof got));
    }
    push_selected(L, t, rows, n, fn);
    return 1;
}

/* trace:split{count = N | fraction = F | time = T [, mode, seed, stratified]}
 * -> calibration, evaluation. count and fraction are the core split
 * (split_make_count: head by default for a count, a seeded random draw by
 * default for a fraction, or `mode`); time splits on arrival. */
static int m_split(lua_State *L)
{
    lua_settop(L, 2); /* optional arguments stay at fixed slots */
    const char *fn = "Trace:split";
    static const char *const known[] = {"count", "fraction", "seed", "time", "mode",
                                        "stratified", NULL};
    trace_t *t = l_checktrace(L, 1, fn, "self");
    luaL_checktype(L, 2, LUA_TTABLE);
    l_checkopts(L, 2, fn, known);
    int has_count = l_getopt(L, 2, "count") != LUA_TNIL;
    int has_frac = l_getopt(L, 2, "fraction") != LUA_TNIL;
    int has_time = l_getopt(L, 2, "time") != LUA_TNIL;
    int has_mode = l_getopt(L, 2, "mode") != LUA_TNIL;
    lua_pop(L, 4);
    if (has_count + has_frac + has_time != 1)
        return luaL_error(L, "eldr.%s: give exactly one of count, fraction, time", fn);
    int strat = l_optbool(L, 2, fn, "stratified", 0);
    if (has_time) {
        if (has_mode || strat)
            l_argerror(L, fn, has_mode ? "mode" : "stratified", "a time split has no mode");
        if (!t->arrival_s)
            l_argerror(L, fn, "time", "the trace has no arrival_s");
        double when = l_optnum(L, 2, fn, "time", -HUGE_VAL, HUGE_VAL, 0);
        int64_t *rows = l_box(L, ((size_t)t->n + 1) * sizeof *rows);
        int64_t nc = 0;
        for (int64_t r = 0; r < t->n; r++)
            if (t->arrival_s[r] < when)
                rows[nc++] = r;
        int64_t ne = nc;
        for (int64_t r = 0; r < t->n; r++)
            if (!(t->arrival_s[r] < when))
                rows[ne++] = r;
        push_selected(L, t, rows, nc, fn);
        push_selected(L, t, rows + nc, ne - nc, fn);
        return 2;
    }
    split_spec s;
    split_spec_default(&s);
    s.mode = has_count ? SPLIT_HEAD : SPLIT_RANDOM;
    if (has_mode) {
        const char *m = l_optstr(L, 2, fn, "mode", "random");
        int mode = split_mode_parse(m);
        if (mode < 0)
            l_argerror(L, fn, "mode", "'random', 'head' or 'stratified' expected, got '%s'", m);
        if (strat && mode != SPLIT_STRATIFIED)
            l_argerror(L, fn, "stratified", "contradicts mode '%s'", m);
        s.mode = (split_mode)mode;
    }
    if (strat)
        s.mode = SPLIT_STRATIFIED;
    s.seed = (uint64_t)l_optint(L, 2, fn, "seed", 0, INT64_MAX, 1);
    int64_t c;
    if (has_count)
        c = l_optint(L, 2, fn, "count", 0, t->n, 0);
    else
        c = (int64_t)floor(l_optnum(L, 2, fn, "fraction", 0, 1, 0) * (double)t->n);
    split_rows r;
    l_split_rows(L, t, &s, c, fn, has_count ? "count" : "fraction", &r);
    l_push_split_traces(L, t, &r, fn);
    l_set_lineage(L, -2, 1, r.calib, r.n_calib);
    l_set_lineage(L, -1, 1, r.eval, r.n_eval);
    return 2;
}

static int m_row(lua_State *L)
{
    const char *fn = "Trace:row";
    trace_t *t = l_checktrace(L, 1, fn, "self");
    int64_t r = l_checkint(L, 2, fn, "row", 1, t->n) - 1;
    push_row(L, t, r);
    return 1;
}

/* trace:counts(row, layer [, "prefill" | "decode"]) -> {E counts} */
static int m_counts(lua_State *L)
{
    lua_settop(L, 4); /* optional arguments stay at fixed slots */
    const char *fn = "Trace:counts";
    trace_t *t = l_checktrace(L, 1, fn, "self");
    int64_t r = l_checkint(L, 2, fn, "row", 1, t->n) - 1;
    int l = (int)l_checkint(L, 3, fn, "layer", 0, t->L - 1);
    const char *which = lua_isnoneornil(L, 4) ? "prefill" : l_checkstr(L, 4, fn, "which");
    const uint16_t *c;
    if (!strcmp(which, "prefill"))
        c = trace_prefill_row(t, r);
    else if (!strcmp(which, "decode")) {
        if (!(c = trace_decode_row(t, r)))
            l_argerror(L, fn, "which", "the trace has no decode_counts");
    } else
        return l_argerror(L, fn, "which", "'prefill' or 'decode' expected, got '%s'", which);
    lua_createtable(L, t->E, 0);
    for (int e = 0; e < t->E; e++) {
        lua_pushinteger(L, c[(size_t)l * (size_t)t->E + (size_t)e]);
        lua_rawseti(L, -2, e + 1);
    }
    return 1;
}

static int m_labels(lua_State *L)
{
    trace_t *t = l_checktrace(L, 1, "Trace:labels", "self");
    lua_createtable(L, t->n_labels, 0);
    for (int j = 0; t->label && j < t->n_labels; j++) {
        lua_pushstring(L, t->label_names[j]);
        lua_rawseti(L, -2, j + 1);
    }
    return 1;
}

static int m_geometry(lua_State *L)
{
    trace_t *t = l_checktrace(L, 1, "Trace:geometry", "self");
    lua_pushinteger(L, t->L);
    lua_pushinteger(L, t->E);
    lua_pushinteger(L, t->k);
    return 3;
}

static const l_fn module_fns[] = {
    {"load", l_load, "eldr.load(path [, {rows = {first, last}}]) -> Trace: load an eldr-trace "
                     "file, validated (all rows or a 1-based inclusive row range)"},
    {"gen", l_gen, "eldr.gen{requests=, layers=, experts=, top_k=, domains=, seed=, ...} -> "
                   "Trace: synthetic trace (every option of `eldr gen`, '-' -> '_'; progress = "
                   "function(done, total, what), else a bar on a terminal; Ctrl-C stops it)"},
    {"import", l_import, "eldr.import(path [, {format = 'npz'|'jsonl'|'npy'|'frames', top_k =, "
                         "layers =, experts =}]) -> Trace: import a calibration capture, JSON "
                         "lines, a count array or proxy frames"},
    {"info", l_info, "eldr.info(path | Trace | Model) -> table: geometry, counts, labels, "
                     "datasets, validation verdict (valid, error)"},
    {NULL, NULL, NULL},
};

static const l_fn methods[] = {
    {"info", m_info, "trace:info() -> table: what eldr.info reports for this trace"},
    {"save", m_save, "trace:save(path) -> trace: write an eldr-trace file atomically"},
    {"select", m_select, "trace:select(rows | {label = name|{names}} | function(row) -> bool) -> "
                         "Trace: the chosen rows (1-based), in that order"},
    {"split", m_split, "trace:split{count = N | fraction = F | time = T [, mode = "
     "'head'|'random'|'stratified', seed = 1]} -> calib, "
                       "eval: the first N rows, a seeded random fraction (the core split), "
                       "or arrival < T"},
    {"row", m_row, "trace:row(i) -> {row, prompt_tokens, decode_tokens, label, arrival, id}"},
    {"counts", m_counts, "trace:counts(i, layer [, 'prefill'|'decode']) -> {E counts} of row i "
                         "in a 0-based layer"},
    {"labels", m_labels, "trace:labels() -> {names}: the label names"},
    {"geometry", m_geometry, "trace:geometry() -> L, E, k"},
    {NULL, NULL, NULL},
};

void l_open_trace(lua_State *L)
{
    l_newclass(L, L_TRACE, "Trace", methods, trace_gc, trace_tostring, trace_len);
    l_register(L, module_fns, "eldr.");
}
