/* cmd_capture.c - `eldr capture --server URL --prompts P.jsonl -o T.h5`:
 * record a calibration trace from a running vLLM or SGLang engine that
 * returns routed experts (docs/capture.md). The work is capture_run
 * (src/client/capture.h); this file is options, Ctrl-C, the progress bar
 * and the summary. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../client/capture.h"
#include "../client/capture_dense.h"
#include "cli.h"
#include "err.h"
#include "trace.h"

static const char *CMD = "capture";
#define CLI_INTERRUPTED 130
#define FAILURES_LISTED 10

static volatile sig_atomic_t stop_flag;

static void on_sigint(int sig)
{
    (void)sig;
    stop_flag = 1;
    signal(SIGINT, SIG_DFL);   /* a second Ctrl-C ends the process */
}

static void usage(void)
{
    printf("usage: eldr capture --server URL --prompts PROMPTS.jsonl -o TRACE.h5\n"
           "                    [--engine vllm|sglang|auto] [--experts E] [--max-tokens N]\n"
           "                    [--concurrency C] [--rate R] [--model NAME]\n"
           "                    [--endpoint completions|chat|generate] [--temperature T]\n"
           "                    [--seed S] [--layers L] [--top-k K] [--timeout S] [--json]\n"
           "                    [--require-full-routing] [--api-key-file FILE]\n"
           "\n"
           "Send every prompt to a running vLLM or SGLang engine started with\n"
           "--enable-return-routed-experts, read the experts each token was routed to,\n"
           "and write them as an eldr-trace v1: prefill and decode counts, per-token\n"
           "expert ids, arrival times, request ids and labels (docs/capture.md).\n"
           "PROMPTS.jsonl: one object per line, {\"prompt\": \"...\"} or {\"messages\":\n"
           "[...]}, optional \"id\" (the request_id; default: SHA-256 of the prompt) and\n"
           "\"label\". On a terminal a progress bar shows done/total, req/s and errors.\n"
           "\n"
           "options:\n"
           "  --server URL         the engine, http://HOST:PORT (required)\n"
           "  --prompts FILE       the prompts, JSON lines (required)\n"
           "  -o, --output FILE    the trace to write, atomically (required)\n"
           "  --engine E           vllm, sglang or auto (default: ask the server)\n"
           "  --endpoint P         completions, chat (OpenAI API) or generate (SGLang);\n"
           "                       default: generate on SGLang, completions on vLLM, chat\n"
           "                       for prompts given as messages\n"
           "  --model NAME         model name to request and record (default: the\n"
           "                       server's /v1/models)\n"
           "  --experts E          experts per layer (default: largest id seen + 1, with a\n"
           "                       warning: a rarely used expert may never show up)\n"
           "  --layers L, --top-k K  the routing geometry; needed for SGLang's flat\n"
           "                       buffer when the server's model info lacks it, else a\n"
           "                       check on every answer\n"
           "  --max-tokens N       tokens to generate per prompt (default 64)\n"
           "  --temperature T      sampling temperature (default 0)\n"
           "  --seed S             sampling seed sent with each request (default none)\n"
           "  --concurrency C      requests in flight, 1..1024 (default 16)\n"
           "  --rate R             send at most R new requests per second (default: as\n"
           "                       fast as the engine answers)\n"
           "  --timeout S          per request, seconds (default 300)\n"
           "  --require-full-routing  refuse (exit 2) an answer whose prompt rows have no\n"
           "                       routing (vLLM's prefix-cache hits, -1); by default\n"
           "                       the request is kept, its prefill counts from the\n"
           "                       routed rows, prefill_unrouted_tokens counting the others\n"
           "  --api-key-file FILE  the engine's API key (its --api-key): the file's first\n"
           "                       line, sent as 'Authorization: Bearer KEY'; never printed\n"
           "  --json               the summary as JSON\n"
           "  -h, --help           this text\n"
           "\n"
           "With top-k >= 2, layers whose ids are 0 for every token of every answer\n"
           "(vLLM leaves a dense, non-MoE layer's row 0) are left out of the trace and\n"
           "named in the summary and in the trace's capture_dense_layers attribute.\n"
           "A failed request is retried twice, then recorded as failed. Ctrl-C stops\n"
           "sending, waits for the requests in flight and writes what was captured.\n"
           "Exit: 0 every prompt captured, 1 some failed (the trace holds the others),\n"
           "130 interrupted (the trace holds what was captured), 2 bad input: options,\n"
           "prompts, an unreadable or empty --api-key-file, an engine that refuses the\n"
           "key (HTTP 401/403), answers without routed experts or with inconsistent\n"
           "shapes (nothing written), 3 a server that does not answer at all (nothing\n"
           "written).\n");
}

typedef struct opts {
    capture_opts c;
    const char *out;
    int json;
} opts;

enum { O_SERVER = 256, O_PROMPTS, O_ENGINE, O_EXPERTS, O_MAXTOK, O_CONC, O_RATE, O_MODEL,
       O_ENDPOINT, O_TEMP, O_SEED, O_LAYERS, O_TOPK, O_TIMEOUT, O_JSON, O_FULL, O_KEYFILE };

static int int_opt(const char *name, const char *a, long long lo, long long hi, int *out)
{
    long long v;
    int rc = cli_parse_int(CMD, name, a, lo, hi, &v);
    *out = (int)v;
    return rc;
}

static int one_opt(int c, const char *a, void *ctx)
{
    opts *o = ctx;
    switch (c) {
    case O_SERVER: o->c.server = a; return 0;
    case O_PROMPTS: o->c.prompts = a; return 0;
    case 'o': o->out = a; return 0;
    case O_MODEL: o->c.model = a; return 0;
    case O_JSON: o->json = 1; return 0;
    case O_FULL: o->c.require_full = 1; return 0;
    case O_KEYFILE: o->c.api_key_file = a; return 0;
    case O_ENGINE:
        if ((o->c.engine = capture_engine_parse(a)) < 0)
            return cli_fail(CMD, "--engine: '%s' is not vllm, sglang or auto", a);
        return 0;
    case O_ENDPOINT:
        if ((o->c.endpoint = capture_endpoint_parse(a)) < 0)
            return cli_fail(CMD, "--endpoint: '%s' is not completions, chat or generate", a);
        return 0;
    case O_EXPERTS: return int_opt("--experts", a, 1, 65535, &o->c.experts);
    case O_MAXTOK: return int_opt("--max-tokens", a, 1, 1000000, &o->c.max_tokens);
    case O_CONC: return int_opt("--concurrency", a, 1, 1024, &o->c.concurrency);
    case O_LAYERS: return int_opt("--layers", a, 1, 4096, &o->c.layers);
    case O_TOPK: return int_opt("--top-k", a, 1, 4096, &o->c.top_k);
    case O_RATE: return cli_parse_double(CMD, "--rate", a, 1e-6, 1e7, &o->c.rate);
    case O_TEMP: return cli_parse_double(CMD, "--temperature", a, 0, 100, &o->c.temperature);
    case O_TIMEOUT: return cli_parse_double(CMD, "--timeout", a, 0.001, 86400, &o->c.timeout_s);
    case O_SEED: {
        long long v;
        int rc = cli_parse_int(CMD, "--seed", a, 0, (long long)1 << 62, &v);
        o->c.seed = v;
        return rc;
    }
    }
    return CLI_BADINPUT;
}

/* 0 parsed, -1 --help shown, else the exit status. */
static int parse_args(int argc, char **argv, opts *o)
{
    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'},             {"server", required_argument, 0, O_SERVER},
        {"prompts", required_argument, 0, O_PROMPTS}, {"output", required_argument, 0, 'o'},
        {"engine", required_argument, 0, O_ENGINE}, {"experts", required_argument, 0, O_EXPERTS},
        {"max-tokens", required_argument, 0, O_MAXTOK},
        {"concurrency", required_argument, 0, O_CONC}, {"rate", required_argument, 0, O_RATE},
        {"model", required_argument, 0, O_MODEL},  {"endpoint", required_argument, 0, O_ENDPOINT},
        {"temperature", required_argument, 0, O_TEMP}, {"seed", required_argument, 0, O_SEED},
        {"layers", required_argument, 0, O_LAYERS}, {"top-k", required_argument, 0, O_TOPK},
        {"timeout", required_argument, 0, O_TIMEOUT}, {"json", no_argument, 0, O_JSON},
        {"require-full-routing", no_argument, 0, O_FULL},
        {"api-key-file", required_argument, 0, O_KEYFILE},
        {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
    capture_opts_default(&o->c);
    int rc = cli_getopt(CMD, argc, argv, ":ho:", longopts, usage, one_opt, o);
    if (rc)
        return rc;
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (!o->c.server || !o->c.prompts || !o->out)
        return cli_usage_error(CMD, "--server, --prompts and -o are required");
    /* a capture may take hours: find out now that the output cannot be written */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", o->out);
    if (access(dirname(dir), W_OK) < 0)
        return cli_fail(CMD, "-o %s: cannot write in that directory: %s", o->out,
                        strerror(errno));
    return 0;
}

static void on_progress(void *arg, int64_t done, int64_t total, int64_t errors)
{
    static char unit[64];
    snprintf(unit, sizeof unit, " req/s  %lld error%s", (long long)errors, errors == 1 ? "" : "s");
    cli_progress_count(arg, "requests", done, total, unit);
}

static json_t *summary_json(const opts *o, const capture_result *r)
{
    const trace_t *t = r->trace;
    json_t *fails = json_array();
    for (int64_t i = 0; i < r->failed; i++)
        json_array_append_new(fails, json_pack("{s:s, s:i, s:s}", "request_id",
                                               r->failures[i].request_id ? r->failures[i].request_id : "",
                                               "line", r->failures[i].line, "error",
                                               r->failures[i].error));
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:b, s:f, s:f}",
                          "server", o->c.server, "output", t ? o->out : "", "engine", r->engine,
                          "model", r->model, "encoding", r->encoding, "requests",
                          (json_int_t)r->total, "captured", (json_int_t)r->captured, "failed",
                          (json_int_t)r->failed, "unsent", (json_int_t)r->unsent,
                          "failed_attempts", (json_int_t)r->attempts_failed, "interrupted",
                          r->interrupted, "seconds", r->seconds, "requests_per_s",
                          r->seconds > 0 ? (double)(r->captured + r->failed) / r->seconds : 0.0);
    json_object_set_new(j, "layers", json_integer(t ? t->L : 0));
    json_object_set_new(j, "experts", json_integer(t ? t->E : 0));
    json_object_set_new(j, "top_k", json_integer(t ? t->k : 0));
    json_object_set_new(j, "experts_inferred", json_boolean(r->experts_inferred));
    int64_t un_req = 0, un_tok = 0;
    for (int64_t i = 0; t && t->prefill_unrouted && i < t->n; i++)
        un_req += t->prefill_unrouted[i] > 0, un_tok += t->prefill_unrouted[i];
    json_t *dense = json_array();
    for (int i = 0; i < r->n_dense; i++)
        json_array_append_new(dense, json_integer(r->dense_layers[i]));
    json_object_set_new(j, "dense_layers", dense);
    json_object_set_new(j, "engine_layers", json_integer(t ? r->engine_layers : 0));
    json_object_set_new(j, "unrouted_requests", json_integer(un_req));
    json_object_set_new(j, "unrouted_tokens", json_integer(un_tok));
    json_object_set_new(j, "failures", fails);
    if (!t)
        json_object_set_new(j, "output", json_null());
    return j;
}

static void summary_text(const opts *o, const capture_result *r)
{
    const trace_t *t = r->trace;
    printf("capture %s -> %s: %lld of %lld prompts captured in %.2f s (%.1f req/s)\n",
           o->c.server, t ? o->out : "(nothing written)", (long long)r->captured,
           (long long)r->total, r->seconds,
           r->seconds > 0 ? (double)(r->captured + r->failed) / r->seconds : 0.0);
    printf("  engine %s, model '%s', encoding %s", r->engine, r->model,
           r->encoding[0] ? r->encoding : "-");
    if (t)
        printf(", %d layers x %d experts, top-%d%s", t->L, t->E, t->k,
               r->experts_inferred ? " (E inferred)" : "");
    if (r->n_dense) {
        char list[1024];
        capture_dense dl = {.L = r->engine_layers, .n = r->n_dense, .layers = r->dense_layers};
        capture_dense_list(&dl, list, sizeof list);
        printf("\n  %d of the answers' %d layers left out as dense (every id 0 in every "
               "answer): %s", r->n_dense, r->engine_layers, list);
    }
    int64_t un_req = 0, un_tok = 0;
    for (int64_t i = 0; t && t->prefill_unrouted && i < t->n; i++)
        un_req += t->prefill_unrouted[i] > 0, un_tok += t->prefill_unrouted[i];
    if (un_req)
        printf("\n  %lld requests had %lld prompt tokens without routing (prefix-cache hits): "
               "kept, counted in prefill_unrouted_tokens", (long long)un_req, (long long)un_tok);
    printf("\n  failed %lld, unsent %lld, failed attempts %lld%s\n", (long long)r->failed,
           (long long)r->unsent, (long long)r->attempts_failed,
           r->interrupted ? ", interrupted" : "");
    for (int64_t i = 0; i < r->failed && i < FAILURES_LISTED; i++)
        printf("  failed: %s (line %d): %s\n", r->failures[i].request_id, r->failures[i].line,
               r->failures[i].error);
    if (r->failed > FAILURES_LISTED)
        printf("  ... and %lld more failed (--json lists them all)\n",
               (long long)(r->failed - FAILURES_LISTED));
}

int cmd_capture(int argc, char **argv)
{
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    char err[ELDR_ERRLEN];
    cli_progress progress;
    cli_progress_start(&progress, CMD);
    stop_flag = 0;
    o.c.stop = &stop_flag;
    o.c.progress = on_progress;
    o.c.progress_arg = &progress;
    struct sigaction sa = {.sa_handler = on_sigint}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    capture_result r;
    int run = capture_run(&o.c, &r, err, sizeof err);
    sigaction(SIGINT, &old, NULL);
    cli_progress_done(&progress);
    if (run == CAPTURE_UNREACHABLE) {
        /* as every command that finds nothing at its address (cli_reach) */
        fprintf(stderr, "eldr %s: %s\n", CMD, err);
        return CLI_UNREACHABLE;
    }
    if (run < 0)
        return cli_fail(CMD, "%s", err);
    capture_dense dl = {.L = r.engine_layers, .n = r.n_dense, .layers = r.dense_layers};
    if (r.trace && capture_dense_save(r.trace, o.out, &dl, err, sizeof err) < 0) {
        capture_result_free(&r);
        return cli_error(CMD, "%s", err);
    }
    if (r.trace && r.experts_inferred)
        fprintf(stderr, "eldr capture: warning: E = %d is the largest expert id seen + 1 (give "
                "--experts to be sure)\n", r.trace->E);
    if (o.json)
        cli_print_json(summary_json(&o, &r));
    else
        summary_text(&o, &r);
    rc = r.interrupted ? CLI_INTERRUPTED : (r.failed || !r.trace) ? CLI_RUNTIME : CLI_OK;
    if (!r.trace && !r.interrupted)
        fprintf(stderr, "eldr capture: no prompt was captured; %s not written\n", o.out);
    capture_result_free(&r);
    return rc;
}
