/* capture.c - `eldr capture` from start to end (capture.h): prompts,
 * what the server is, the requests, the trace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "capture_http.h"
#include "capture_key.h"
#include "capture_trace.h"
#include "client.h"
#include "err.h"

void capture_opts_default(capture_opts *o)
{
    *o = (capture_opts){.engine = CAPTURE_ENGINE_AUTO, .endpoint = CAPTURE_EP_AUTO,
                        .max_tokens = 64, .concurrency = 16, .temperature = 0, .seed = -1,
                        .timeout_s = 300};
}

int capture_engine_parse(const char *name)
{
    return !strcmp(name, "auto")     ? CAPTURE_ENGINE_AUTO
           : !strcmp(name, "vllm")   ? CAPTURE_ENGINE_VLLM
           : !strcmp(name, "sglang") ? CAPTURE_ENGINE_SGLANG
                                     : -1;
}

const char *capture_engine_name(int engine)
{
    return engine == CAPTURE_ENGINE_VLLM     ? "vllm"
           : engine == CAPTURE_ENGINE_SGLANG ? "sglang"
                                             : "auto";
}

int capture_endpoint_parse(const char *name)
{
    return !strcmp(name, "auto")          ? CAPTURE_EP_AUTO
           : !strcmp(name, "completions") ? CAPTURE_EP_COMPLETIONS
           : !strcmp(name, "chat")        ? CAPTURE_EP_CHAT
           : !strcmp(name, "generate")    ? CAPTURE_EP_GENERATE
                                          : -1;
}

/* What the server says about itself. */
typedef struct server_info {
    int engine;
    char model[TRACE_MODEL_MAX];
    int L, k;                    /* from SGLang's model info when it has them */
} server_info;

/* An integer under key in j or in one of its object members. */
static int find_int(json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key), *x;
    const char *name;
    if (json_is_integer(v))
        return (int)json_integer_value(v);
    json_object_foreach(j, name, x) {
        v = json_is_object(x) ? json_object_get(x, key) : NULL;
        if (json_is_integer(v))
            return (int)json_integer_value(v);
    }
    return 0;
}

/* auth: the "Authorization: Bearer KEY" line, or NULL. */
static int probe(const capture_opts *o, const char *auth, server_info *si, char *err,
                 size_t errlen)
{
    char e[ELDR_ERRLEN];
    client_t *c = client_new(o->server, o->timeout_s < 10 ? o->timeout_s : 10, err, errlen);
    if (!c)
        return -1;
    if (auth && client_add_header(c, auth, err, errlen) < 0) {
        client_free(c);
        return -1;
    }
    memset(si, 0, sizeof *si);
    si->engine = o->engine;
    json_t *models = NULL, *info = NULL;
    long status = 0;
    int mrc = client_call(c, "GET", "/v1/models", NULL, 0, &status, &models, e, sizeof e);
    if (mrc < 0 && status == 0) {
        eldr_errf(err, errlen, "%s: server unreachable: %s", client_url(c), e);
        client_free(c);
        return CAPTURE_UNREACHABLE;
    }
    /* an engine started with --api-key guards /v1 (vLLM) or every path
     * (SGLang): its 401 is not "not an engine" */
    if (mrc < 0 && capture_key_refused(status)) {
        capture_key_error(client_url(c), "GET /v1/models", status, auth ? o->api_key_file : NULL,
                          err, errlen);
        client_free(c);
        return -1;
    }
    /* vLLM and SGLang both list their model there: a server that does not
     * is not an engine, and every prompt would fail the same way */
    long models_status = status;
    int models_ok = mrc == 0 && json_is_array(json_object_get(models, "data"));
    json_t *m0 = json_array_get(json_object_get(models, "data"), 0);
    const char *id = json_string_value(json_object_get(m0, "id"));
    const char *owner = json_string_value(json_object_get(m0, "owned_by"));
    if (id)
        snprintf(si->model, sizeof si->model, "%s", id);
    if (si->engine == CAPTURE_ENGINE_AUTO && owner && !strcmp(owner, "vllm"))
        si->engine = CAPTURE_ENGINE_VLLM;
    if (si->engine != CAPTURE_ENGINE_VLLM &&
        client_call(c, "GET", "/get_model_info", NULL, 0, &status, &info, e, sizeof e) == 0) {
        /* only SGLang serves this */
        if (si->engine == CAPTURE_ENGINE_AUTO)
            si->engine = CAPTURE_ENGINE_SGLANG;
        const char *path = json_string_value(json_object_get(info, "model_path"));
        if (!si->model[0] && path)
            snprintf(si->model, sizeof si->model, "%s", path);
        si->L = find_int(info, "num_hidden_layers");
        si->k = find_int(info, "num_experts_per_tok");
    }
    int sglang_info = info != NULL;
    json_decref(models);
    json_decref(info);
    if (!models_ok && !sglang_info) {
        eldr_errf(err, errlen, "%s: not an LLM engine: GET /v1/models answered %ld%s (vLLM "
                  "and SGLang list their model there); check --server", client_url(c),
                  models_status, mrc == 0 ? " without a model list" : "");
        client_free(c);
        return -1;
    }
    if (si->engine == CAPTURE_ENGINE_AUTO)
        si->engine = CAPTURE_ENGINE_VLLM;
    client_free(c);
    return 0;
}

static int check_opts(const capture_opts *o, char *err, size_t errlen)
{
    if (!o->server || !o->prompts)
        return eldr_errf(err, errlen, "capture needs a server and a prompts file");
    if (o->concurrency < 1 || o->concurrency > 1024)
        return eldr_errf(err, errlen, "concurrency %d: must be in [1, 1024]", o->concurrency);
    if (o->max_tokens < 1)
        return eldr_errf(err, errlen, "max tokens %d: must be >= 1", o->max_tokens);
    if (o->experts < 0 || o->experts > 65535 || o->layers < 0 || o->top_k < 0)
        return eldr_errf(err, errlen, "experts, layers and top-k must be >= 0");
    if (!(o->rate >= 0) || !(o->timeout_s > 0))
        return eldr_errf(err, errlen, "rate must be >= 0 and the timeout > 0");
    return 0;
}

static int make_jobs(const capture_opts *o, const capture_prompts *ps, int engine,
                     const char *model, capture_job *jobs, char *err, size_t errlen)
{
    capture_request_opts ro = {.engine = engine, .endpoint = o->endpoint, .model = model,
                               .max_tokens = o->max_tokens, .temperature = o->temperature,
                               .seed = o->seed};
    for (int64_t i = 0; i < ps->n; i++) {
        jobs[i].path = capture_endpoint_path(capture_endpoint_of(&ro, &ps->p[i]));
        if (!(jobs[i].body = capture_request_body(&ro, &ps->p[i], &jobs[i].len, err, errlen)))
            return -1;
        jobs[i].routes.max_id = -1;
    }
    return 0;
}

static int collect_failures(capture_result *r, const capture_job *jobs,
                            const capture_prompts *ps)
{
    r->failures = calloc((size_t)(r->failed + 1), sizeof *r->failures);
    if (!r->failures)
        return -1;
    int64_t f = 0;
    for (int64_t i = 0; i < ps->n && f < r->failed; i++)
        if (jobs[i].state == JOB_FAILED) {
            capture_failure *x = &r->failures[f++];
            x->request_id = strdup(ps->p[i].id);
            x->line = ps->p[i].line;
            snprintf(x->error, sizeof x->error, "%s", jobs[i].error);
        }
    return 0;
}

int capture_run(const capture_opts *o, capture_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    capture_prompts ps;
    server_info si;
    char auth[CAPTURE_KEY_MAX + 64];
    const char *key = o->api_key_file ? auth : NULL;
    if (check_opts(o, err, errlen) < 0 ||
        (key && capture_key_header(o->api_key_file, auth, sizeof auth, err, errlen) < 0))
        return -1;
    if (capture_prompts_load(o->prompts, &ps, err, errlen) < 0) {
        explicit_bzero(auth, sizeof auth);
        return -1;
    }
    int prc = probe(o, key, &si, err, errlen);
    if (prc < 0) {
        explicit_bzero(auth, sizeof auth);
        capture_prompts_free(&ps);
        return prc;   /* -1, or CAPTURE_UNREACHABLE */
    }
    const char *model = o->model ? o->model : si.model;
    capture_job *jobs = calloc((size_t)ps.n, sizeof *jobs);
    client_t *c = client_new(o->server, 1, err, errlen);
    int rc = jobs && c ? make_jobs(o, &ps, si.engine, model, jobs, err, errlen)
                       : (c ? eldr_errf(err, errlen, "out of memory") : -1);
    capture_drive d = {.url = c ? client_url(c) : "", .jobs = jobs, .n = ps.n,
                       .concurrency = o->concurrency, .rate = o->rate, .timeout_s = o->timeout_s,
                       .stop = o->stop, .progress = o->progress, .progress_arg = o->progress_arg,
                       .auth = key, .key_file = o->api_key_file};
    d.hint = (routed_hint){.L = o->layers ? o->layers : si.L, .k = o->top_k ? o->top_k : si.k,
                           .E = o->experts, .require_full = o->require_full,
                           .from = o->layers || o->top_k ? "--layers/--top-k"
                                                         : "the server's model info"};
    if (rc == 0)
        rc = capture_drive_run(&d, err, errlen);
    if (rc == 0) {
        r->total = ps.n;
        r->captured = d.ok;
        r->failed = d.failed;
        r->unsent = d.unsent;
        r->attempts_failed = d.attempts_failed;
        r->interrupted = d.interrupted;
        r->seconds = d.seconds;
        snprintf(r->engine, sizeof r->engine, "%s", capture_engine_name(si.engine));
        snprintf(r->model, sizeof r->model, "%s", model);
        for (int64_t i = 0; i < ps.n && !r->encoding[0]; i++)
            if (jobs[i].state == JOB_OK)
                snprintf(r->encoding, sizeof r->encoding, "%s", jobs[i].routes.encoding);
        capture_dense dense;
        rc = capture_trace_build(jobs, &ps, o->experts, model, &r->trace, &r->experts_inferred,
                                 &dense, err, errlen);
        if (rc == 0 && r->trace) {
            r->engine_layers = dense.L;
            r->n_dense = dense.n;
            r->dense_layers = dense.layers;   /* taken over */
            dense.layers = NULL;
            capture_dense_free(&dense);
        }
    }
    if (rc == 0 && collect_failures(r, jobs, &ps) < 0)
        rc = eldr_errf(err, errlen, "out of memory");
    for (int64_t i = 0; jobs && i < ps.n; i++) {
        free(jobs[i].body);
        routed_free(&jobs[i].routes);
    }
    free(jobs);
    client_free(c);
    capture_prompts_free(&ps);
    explicit_bzero(auth, sizeof auth);
    if (rc < 0)
        capture_result_free(r);
    return rc;
}

void capture_result_free(capture_result *r)
{
    trace_free(r->trace);
    free(r->dense_layers);
    for (int64_t i = 0; r->failures && i < r->failed; i++)
        free(r->failures[i].request_id);
    free(r->failures);
    memset(r, 0, sizeof *r);
}
