/* capture.h - `eldr capture` and eldr.capture{}: send a prompt set to a
 * running vLLM or SGLang engine that returns routed experts, and turn the
 * answers into an eldr-trace v1 (docs/capture.md).
 *
 * capture_run loads the prompts, asks the server what it is (engine and
 * model, GET /v1/models and /get_model_info), sends every prompt (C in
 * flight, optionally paced at R per second; a failed request is retried
 * twice), decodes each answer (routed.h) and assembles the trace
 * (capture_trace.c; the layers every answer leaves 0, vLLM's dense ones, are
 * left out and named: capture_dense.h). It stops sending when *stop becomes non-zero (Ctrl-C),
 * waits for the requests in flight, and returns what was captured.
 *
 * Returns 0 when the run took place: r->trace holds the captured requests
 * (NULL when none was), failures are counted and named in r. Returns -1
 * with err, and no trace, when it must not go on: bad options or prompts,
 * an answer without routed experts or with shapes that do not fit the
 * others; CAPTURE_UNREACHABLE with err when the server does not answer
 * at all (refused, unresolvable, timed out). No printing here. */
#ifndef ELDR_CAPTURE_H
#define ELDR_CAPTURE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "capture_prompts.h"
#include "trace.h"

/* done of total requests answered (captured or failed for good); errors:
 * failed attempts so far. Called from the capture loop at most ~10 times a
 * second, and once at the end. */
typedef void (*capture_progress_fn)(void *arg, int64_t done, int64_t total, int64_t errors);

typedef struct capture_opts {
    const char *server;          /* http://HOST:PORT of the engine */
    const char *prompts;         /* PROMPTS.jsonl */
    int engine;                  /* CAPTURE_ENGINE_* */
    int endpoint;                /* CAPTURE_EP_* */
    const char *model;           /* NULL: the server's */
    int experts;                 /* E; 0: largest id + 1 */
    int layers, top_k;           /* 0: from the answers (or the server's model info) */
    int max_tokens;              /* generated tokens per request */
    int concurrency;             /* requests in flight */
    double rate;                 /* new requests per second; 0: as fast as answered */
    double temperature;
    int64_t seed;                /* -1: none sent */
    double timeout_s;            /* per request */
    int require_full;            /* --require-full-routing: a prompt row of -1 stops the run */
    const char *api_key_file;    /* --api-key-file: its first line is sent as a bearer token */
    volatile sig_atomic_t *stop; /* may be NULL */
    capture_progress_fn progress;
    void *progress_arg;
} capture_opts;

/* Defaults of the options above (server and prompts NULL). */
void capture_opts_default(capture_opts *o);

#define CAPTURE_RETRIES 2

typedef struct capture_failure {
    char *request_id;
    int line;                    /* in the prompts file */
    char error[200];             /* the last attempt's */
} capture_failure;

typedef struct capture_result {
    trace_t *trace;              /* the captured requests, in prompt order (NULL: none) */
    int64_t total, captured, failed, unsent, attempts_failed;
    int interrupted;             /* *stop ended the run before every prompt was sent */
    int experts_inferred;        /* E = largest id + 1 (no --experts) */
    char engine[16], model[TRACE_MODEL_MAX], encoding[24];
    double seconds;              /* first send to last answer */
    int engine_layers;           /* layers in the answers (the trace's plus the dense ones) */
    int n_dense;                 /* layers left out: 0 for every token (capture_dense.h) */
    int *dense_layers;           /* [n_dense] their indices in the answers, ascending */
    capture_failure *failures;   /* [failed] */
} capture_result;

#define CAPTURE_UNREACHABLE (-3)   /* capture_run: the server did not answer at all */
int capture_run(const capture_opts *o, capture_result *r, char *err, size_t errlen);
void capture_result_free(capture_result *r);

/* "vllm", "sglang", "auto" <-> CAPTURE_ENGINE_*; -1 for an unknown name. */
int capture_engine_parse(const char *name);
const char *capture_engine_name(int engine);
/* "completions", "chat", "generate", "auto" -> CAPTURE_EP_*; -1 unknown. */
int capture_endpoint_parse(const char *name);

#endif
