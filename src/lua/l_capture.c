/* l_capture.c - eldr.capture{server = URL, prompts = PATH, ...}: record a
 * trace from a running vLLM or SGLang engine (docs/capture.md), the Lua
 * face of `eldr capture` (src/client/capture.h). Returns the Trace and a
 * summary table; Ctrl-C in the REPL stops sending and returns what was
 * captured (summary.interrupted). */
#include <stdlib.h>
#include <string.h>

#include "../client/capture.h"
#include "../client/capture_dense.h"
#include "err.h"
#include "l_types.h"
#include "l_util.h"

static const char *FN = "capture";

static void push_summary(lua_State *L, const capture_result *r)
{
    lua_newtable(L);
    l_setint(L, "requests", r->total);
    l_setint(L, "captured", r->captured);
    l_setint(L, "failed", r->failed);
    l_setint(L, "unsent", r->unsent);
    l_setint(L, "failed_attempts", r->attempts_failed);
    l_setnum(L, "seconds", r->seconds);
    lua_pushboolean(L, r->interrupted);
    lua_setfield(L, -2, "interrupted");
    lua_pushboolean(L, r->experts_inferred);
    lua_setfield(L, -2, "experts_inferred");
    lua_pushstring(L, r->engine);
    lua_setfield(L, -2, "engine");
    lua_pushstring(L, r->model);
    lua_setfield(L, -2, "model");
    lua_pushstring(L, r->encoding);
    lua_setfield(L, -2, "encoding");
    l_setint(L, "engine_layers", r->engine_layers);
    lua_createtable(L, r->n_dense, 0);
    for (int i = 0; i < r->n_dense; i++) {
        lua_pushinteger(L, r->dense_layers[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "dense_layers");
    lua_createtable(L, (int)r->failed, 0);
    for (int64_t i = 0; i < r->failed; i++) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, r->failures[i].request_id ? r->failures[i].request_id : "");
        lua_setfield(L, -2, "request_id");
        l_setint(L, "line", r->failures[i].line);
        lua_pushstring(L, r->failures[i].error);
        lua_setfield(L, -2, "error");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "failures");
}

static int choice(lua_State *L, const char *key, const char *def, int (*parse)(const char *),
                  const char *what)
{
    const char *s = l_optstr(L, 1, FN, key, def);
    int v = parse(s);
    if (v < 0)
        l_argerror(L, FN, key, "%s expected, got '%s'", what, s);
    return v;
}

static int l_capture(lua_State *L)
{
    static const char *const known[] = {"server", "prompts", "engine", "endpoint", "model",
                                        "experts", "layers", "top_k", "max_tokens",
                                        "concurrency", "rate", "temperature", "seed", "timeout",
                                        "output", "api_key_file", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    l_checkopts(L, 1, FN, known);
    capture_opts o;
    capture_opts_default(&o);
    o.server = l_optstr(L, 1, FN, "server", NULL);
    o.prompts = l_optstr(L, 1, FN, "prompts", NULL);
    if (!o.server || !o.prompts)
        l_argerror(L, FN, o.server ? "prompts" : "server", "required");
    o.engine = choice(L, "engine", "auto", capture_engine_parse, "vllm, sglang or auto");
    o.endpoint = choice(L, "endpoint", "auto", capture_endpoint_parse,
                        "completions, chat, generate or auto");
    o.model = l_optstr(L, 1, FN, "model", NULL);
    o.experts = (int)l_optint(L, 1, FN, "experts", 1, 65535, 0);
    o.layers = (int)l_optint(L, 1, FN, "layers", 1, 4096, 0);
    o.top_k = (int)l_optint(L, 1, FN, "top_k", 1, 4096, 0);
    o.max_tokens = (int)l_optint(L, 1, FN, "max_tokens", 1, 1000000, o.max_tokens);
    o.concurrency = (int)l_optint(L, 1, FN, "concurrency", 1, 1024, o.concurrency);
    o.rate = l_optnum(L, 1, FN, "rate", 0, 1e7, 0);
    o.temperature = l_optnum(L, 1, FN, "temperature", 0, 100, 0);
    o.seed = l_optint(L, 1, FN, "seed", 0, (lua_Integer)1 << 62, -1);
    o.timeout_s = l_optnum(L, 1, FN, "timeout", 0.001, 86400, o.timeout_s);
    o.api_key_file = l_optstr(L, 1, FN, "api_key_file", NULL);
    const char *output = l_optstr(L, 1, FN, "output", NULL);
    o.stop = (volatile sig_atomic_t *)&l_cancel_flag;

    l_trace *u = l_newtrace(L);   /* owns the trace from here, whatever happens */
    capture_result r;
    char err[ELDR_ERRLEN];
    l_cancel_reset();
    if (capture_run(&o, &r, err, sizeof err) < 0)
        return l_fail(L, FN, err);
    l_cancel_reset();
    u->t = r.trace;
    r.trace = NULL;
    push_summary(L, &r);
    if (!u->t) {
        snprintf(err, sizeof err, "no prompt was captured (%lld failed%s%s)",
                 (long long)r.failed, r.failed ? "; first: " : "",
                 r.failed ? r.failures[0].error : "");
        capture_result_free(&r);
        return l_fail(L, FN, err);
    }
    capture_dense dl = {.L = r.engine_layers, .n = r.n_dense, .layers = r.dense_layers};
    int rc = output && capture_dense_save(u->t, output, &dl, err, sizeof err) < 0;
    capture_result_free(&r);
    if (rc)
        return l_fail(L, FN, err);
    return 2;
}

static const l_fn fns[] = {
    {"capture", l_capture, "eldr.capture{server = URL, prompts = PATH [, engine, endpoint, "
                           "model, experts, layers, top_k, max_tokens, concurrency, rate, "
                           "temperature, seed, timeout, output, api_key_file]} -> Trace, summary: "
                           "record a "
                           "trace from a vLLM/SGLang engine that returns routed experts"},
    {NULL, NULL, NULL},
};

void l_open_capture(lua_State *L)
{
    l_register(L, fns, "eldr.");
}
