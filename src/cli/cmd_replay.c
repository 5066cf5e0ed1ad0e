/* cmd_replay.c - `eldr replay TRACE --to URL`: drive a running eldrd with
 * a trace (docs/replay.md). Each request is routed with its dense prefill
 * counts at its arrival (the trace's arrival_s, or Poisson at --rate),
 * and finished after its simulated decode time (decode_tokens x
 * --tpot-ms); --speed divides every time. Prints decisions/s, the route
 * latency percentiles, failures and the decisions per worker; exit 1
 * when any call failed. The engine is src/client/replay.c.
 *
 * Routes go to --to (eldrd's --listen); the snapshot (geometry, worker
 * names, the in-flight count after) is read from --admin when eldrd has
 * an --admin-listen listener, else from --to. A --to whose first routes
 * are answered 404 (eldrd's admin listener, another server) stops the run
 * there (replay.h, not_routing): one message, exit 2, not a run of failed
 * routes. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../client/client.h"
#include "../client/replay.h"
#include "cli.h"
#include "err.h"
#include "rng.h"
#include "trace.h"

static const char *CMD = "replay";

typedef struct replay_opts {
    const char *path, *url, *admin, *id_prefix, *token_file;
    double rate;                 /* Poisson arrivals per (trace) second; 0 = arrival_s */
    double speed, tpot_ms, max_seconds, timeout_s;
    long long requests, concurrency, seed, decode_tokens;
    int json;
} replay_opts;

static void usage(void)
{
    printf("usage: eldr replay TRACE --to URL [--admin URL] [--token-file F] [--rate R]\n"
           "                   [--speed X] [--requests N] [--concurrency C] [--tpot-ms T]\n"
           "                   [--max-seconds S] [--json]\n"
           "\n"
           "Drive a running eldrd with a trace: route each request (POST /v1/route,\n"
           "dense prefill counts) at its arrival, finish it (POST /v1/finish) after its\n"
           "simulated decode time, and report decisions/s and route latency. On a\n"
           "terminal, a progress bar on stderr shows the routing, then the drain (the\n"
           "wait for the requests still in flight); none when stderr is not a terminal.\n"
           "\n"
           "options:\n"
           "  --to URL             eldrd address, http://HOST:PORT (required): the\n"
           "                       listener that serves POST /v1/route (--listen)\n"
           "  --admin URL          where GET /v1/snapshot answers, when eldrd has an\n"
           "                       --admin-listen listener (default: --to)\n"
           "  --token-file F       send the token in F as Authorization: Bearer on the\n"
           "                       routes and finishes (eldrd --proxy\n"
           "                       --route-token-file)\n"
           "  --rate R             Poisson arrivals at R requests per second (default:\n"
           "                       the trace's arrival_s, or 50/s when it has none)\n"
           "  --speed X            run X times faster than the trace's clock (default 1):\n"
           "                       arrivals and decode times are divided by X\n"
           "  --requests N         requests to send (default: every row; rows repeat\n"
           "                       when N is larger)\n"
           "  --concurrency C      HTTP connections/threads, 1..64 (default 4)\n"
           "  --tpot-ms T          decode time per output token in ms (default 20)\n"
           "  --decode-tokens D    output tokens when the trace has no decode_tokens\n"
           "                       (default 64)\n"
           "  --max-seconds S      time bound: no route after S s, then everything in\n"
           "                       flight is finished (default 120)\n"
           "  --timeout S          per HTTP call (default 5)\n"
           "  --seed S             seed of the Poisson arrivals (default 1)\n"
           "  --id-prefix P        request ids are P0, P1, ... (default replay-PID-)\n"
           "  --json               the summary as JSON\n"
           "  -h, --help           this text\n"
           "\n"
           "Exit: 0 every call succeeded, 1 some route or finish failed, 2 bad input\n"
           "(also: a trace whose geometry the daemon does not serve; a --to that does\n"
           "not serve /v1/route, such as eldrd's admin listener; an eldrd with\n"
           "--admin-listen and no --admin), 3 the daemon does not answer at URL (the\n"
           "same status as eldr dash --attach).\n");
}

enum { O_TO = 256, O_RATE, O_SPEED, O_REQ, O_CONC, O_TPOT, O_DTOK, O_MAXS, O_TIMEOUT,
       O_SEED, O_PREFIX, O_JSON, O_ADMIN, O_TOKEN };

static int one_opt(int c, const char *a, void *ctx)
{
    replay_opts *o = ctx;
    switch (c) {
    case O_TO: o->url = a; return 0;
    case O_ADMIN: o->admin = a; return 0;
    case O_TOKEN: o->token_file = a; return 0;
    case O_RATE: return cli_parse_double(CMD, "--rate", a, 1e-6, 1e7, &o->rate);
    case O_SPEED: return cli_parse_double(CMD, "--speed", a, 1e-6, 1e6, &o->speed);
    case O_REQ: return cli_parse_int(CMD, "--requests", a, 1, 100000000, &o->requests);
    case O_CONC: return cli_parse_int(CMD, "--concurrency", a, 1, 64, &o->concurrency);
    case O_TPOT: return cli_parse_double(CMD, "--tpot-ms", a, 0, 1e6, &o->tpot_ms);
    case O_DTOK: return cli_parse_int(CMD, "--decode-tokens", a, 0, 100000000, &o->decode_tokens);
    case O_MAXS: return cli_parse_double(CMD, "--max-seconds", a, 0.001, 86400, &o->max_seconds);
    case O_TIMEOUT: return cli_parse_double(CMD, "--timeout", a, 0.001, 3600, &o->timeout_s);
    case O_SEED: return cli_parse_int(CMD, "--seed", a, 0, (long long)1 << 62, &o->seed);
    case O_PREFIX:
        if (strlen(a) > 200)
            return cli_fail(CMD, "--id-prefix: longer than 200 bytes");
        o->id_prefix = a;
        return 0;
    case O_JSON: o->json = 1; return 0;
    }
    return CLI_BADINPUT;
}

/* 0 parsed, -1 --help shown, else the exit status. */
static int parse_args(int argc, char **argv, replay_opts *o)
{
    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'},           {"to", required_argument, 0, O_TO},
        {"rate", required_argument, 0, O_RATE},  {"speed", required_argument, 0, O_SPEED},
        {"requests", required_argument, 0, O_REQ},
        {"concurrency", required_argument, 0, O_CONC},
        {"tpot-ms", required_argument, 0, O_TPOT},
        {"decode-tokens", required_argument, 0, O_DTOK},
        {"max-seconds", required_argument, 0, O_MAXS},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"seed", required_argument, 0, O_SEED}, {"id-prefix", required_argument, 0, O_PREFIX},
        {"json", no_argument, 0, O_JSON},        {"admin", required_argument, 0, O_ADMIN},
        {"token-file", required_argument, 0, O_TOKEN}, {0, 0, 0, 0},
    };
    *o = (replay_opts){.speed = 1, .tpot_ms = 20, .max_seconds = 120, .timeout_s = 5,
                       .concurrency = 4, .seed = 1, .decode_tokens = 64};
    int rc = cli_getopt(CMD, argc, argv, ":h", longopts, usage, one_opt, o);
    if (rc)
        return rc;
    if (optind >= argc)
        return cli_usage_error(CMD, "no trace file given");
    if (optind + 1 < argc)
        return cli_usage_error(CMD, "one trace file expected, got '%s' too", argv[optind + 1]);
    o->path = argv[optind];
    if (!o->url)
        return cli_usage_error(CMD, "--to URL is required");
    return 0;
}

/* What the daemon serves, from /healthz and /v1/snapshot. */
typedef struct served {
    int L, E, K;
    char **names;                /* [K] */
    char variant[32];            /* the served model's signature variant */
} served;

static void served_free(served *s)
{
    for (int k = 0; s->names && k < s->K; k++)
        free(s->names[k]);
    free(s->names);
}

/* -1 with err and *status (404: not served at c) when the snapshot fails. */
static int ask_daemon(client_t *c, served *s, long *status, char *err, size_t errlen)
{
    json_t *snap;
    memset(s, 0, sizeof *s);
    if (client_call(c, "GET", "/v1/snapshot?centroids=0&decisions=0", NULL, 0, status, &snap,
                    err, errlen) < 0)
        return -1;
    json_t *m = json_object_get(snap, "model"), *w = json_object_get(snap, "workers");
    s->L = (int)json_integer_value(json_object_get(m, "L"));
    s->E = (int)json_integer_value(json_object_get(m, "E"));
    s->K = (int)json_array_size(w);
    const char *v = json_string_value(json_object_get(m, "variant"));
    snprintf(s->variant, sizeof s->variant, "%s", v ? v : "");
    if (s->L < 1 || s->E < 1 || s->K < 1 || s->K > REPLAY_MAX_WORKERS) {
        json_decref(snap);
        return eldr_errf(err, errlen, "%s/v1/snapshot: no model geometry or workers in it",
                         client_url(c));
    }
    s->names = calloc((size_t)s->K, sizeof *s->names);
    for (int k = 0; s->names && k < s->K; k++) {
        const char *n = json_string_value(json_object_get(json_array_get(w, (size_t)k), "name"));
        s->names[k] = strdup(n ? n : "?");
    }
    json_decref(snap);
    return s->names ? 0 : eldr_errf(err, errlen, "out of memory");
}

/* Sum of the daemon's in-flight counts (-1 when the snapshot fails). */
static long long daemon_inflight(client_t *c)
{
    char err[ELDR_ERRLEN];
    json_t *snap;
    if (client_snapshot(c, 0, 0, &snap, err, sizeof err) < 0)
        return -1;
    long long sum = 0;
    json_t *w = json_object_get(snap, "workers"), *x;
    size_t i;
    json_array_foreach(w, i, x) sum += json_integer_value(json_object_get(x, "inflight"));
    json_decref(snap);
    return sum;
}

/* Arrival and decode wall times of the N requests, and their rows. */
static int plan_times(const replay_opts *o, const trace_t *t, int64_t n, double *arrive,
                      double *decode, int64_t *row)
{
    rng_t rng;
    rng_seed(&rng, (uint64_t)o->seed);
    double a0 = INFINITY, a1 = -INFINITY, clock = 0;
    for (int64_t r = 0; t->arrival_s && r < t->n; r++) {
        a0 = fmin(a0, t->arrival_s[r]);
        a1 = fmax(a1, t->arrival_s[r]);
    }
    /* a repeated pass starts one mean gap after the previous one ended */
    double span = t->arrival_s ? (a1 - a0) * (1 + 1.0 / (double)t->n) : 0;
    double rate = o->rate > 0 ? o->rate : 50;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i % t->n;
        row[i] = r;
        if (o->rate > 0 || !t->arrival_s) {
            clock += rng_exp(&rng) / rate;
            arrive[i] = clock / o->speed;
        } else {
            arrive[i] = (t->arrival_s[r] - a0 + (double)(i / t->n) * span) / o->speed;
        }
        double tokens = t->decode_tokens ? t->decode_tokens[r] : (double)o->decode_tokens;
        decode[i] = tokens * o->tpot_ms * 1e-3 / o->speed;
    }
    /* the engine wants arrivals ascending; the trace's may not be */
    for (int64_t i = 1; i < n; i++)
        if (arrive[i] < arrive[i - 1])
            return -1;
    return 0;
}

/* Routing shows requests/s; the drain (waiting for the decode times of
 * the requests still in flight to run out) shows how many are left. */
static void on_progress(void *arg, const char *what, int64_t done, int64_t total)
{
    cli_progress_count(arg, what, done, total,
                       strcmp(what, REPLAY_DRAIN) ? " req/s" : " finished/s");
}

static json_t *result_json(const replay_opts *o, const served *s, const replay_result *r,
                           int64_t n, long long after)
{
    const double *lat = r->latency_ms;
    double span = r->last_route - r->first_route;
    json_t *w = json_object(), *rules = json_object();
    for (int k = 0; k < s->K; k++)
        json_object_set_new(w, s->names[k], json_integer(r->per_worker[k]));
    for (int i = 0; i < r->n_rules; i++)
        json_object_set_new(rules, r->rule_name[i], json_integer(r->rule_count[i]));
    json_t *j = json_pack(
        "{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:I}", "trace", o->path, "to",
        o->url, "requests", (json_int_t)n, "routed", (json_int_t)r->routed, "finished",
        (json_int_t)r->finished, "route_errors", (json_int_t)r->route_errors, "finish_errors",
        (json_int_t)r->finish_errors, "skipped", (json_int_t)r->skipped, "seconds", r->seconds,
        "speed", o->speed, "decisions_per_s",
        r->routed > 1 && span > 0 ? (double)(r->routed - 1) / span : 0.0, "max_inflight",
        (json_int_t)r->max_inflight);
    json_t *l = json_object();
    const char *qn[] = {"p50", "p90", "p99"};
    const double qv[] = {0.5, 0.9, 0.99};
    for (int i = 0; i < 3; i++) {
        double v = replay_quantile(lat, r->routed, qv[i]);
        json_object_set_new(l, qn[i], isfinite(v) ? json_real(v) : json_null());
    }
    json_object_set_new(l, "max", r->routed ? json_real(lat[r->routed - 1]) : json_null());
    json_object_set_new(j, "route_latency_ms", l);
    json_object_set_new(j, "admin", o->admin ? json_string(o->admin) : json_null());
    json_object_set_new(j, "workers", w);
    json_object_set_new(j, "rules", rules);
    json_object_set_new(j, "daemon_inflight_after", after >= 0 ? json_integer(after) : json_null());
    json_object_set_new(j, "first_error", r->first_error[0] ? json_string(r->first_error)
                                                            : json_null());
    return j;
}

static void print_text(const replay_opts *o, const served *s, const replay_result *r, int64_t n,
                       long long after)
{
    const double *lat = r->latency_ms;
    double span = r->last_route - r->first_route;
    printf("replay %s -> %s: %lld requests in %.2f s (speed %g)\n", o->path, o->url,
           (long long)n, r->seconds, o->speed);
    if (o->admin)
        printf("  snapshot from %s\n", o->admin);
    printf("  routed %lld, finished %lld, route errors %lld, finish errors %lld, skipped %lld\n",
           (long long)r->routed, (long long)r->finished, (long long)r->route_errors,
           (long long)r->finish_errors, (long long)r->skipped);
    printf("  decisions/s %.1f, most in flight %lld, daemon in flight after %lld\n",
           r->routed > 1 && span > 0 ? (double)(r->routed - 1) / span : 0.0,
           (long long)r->max_inflight, after);
    if (r->routed)
        printf("  route latency ms: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n",
               replay_quantile(lat, r->routed, 0.5), replay_quantile(lat, r->routed, 0.9),
               replay_quantile(lat, r->routed, 0.99), lat[r->routed - 1]);
    else
        printf("  route latency ms: none (no route succeeded)\n");
    printf("  per worker:");
    for (int k = 0; k < s->K; k++)
        printf(" %s %lld", s->names[k], (long long)r->per_worker[k]);
    printf("\n  rules:");
    for (int i = 0; i < r->n_rules; i++)
        printf(" %s %lld", r->rule_name[i], (long long)r->rule_count[i]);
    printf("\n");
}

/* The snapshot from --admin (or --to): what the daemon serves. */
static int ask(const replay_opts *o, client_t *a, served *s)
{
    char err[ELDR_ERRLEN];
    long st = 0;
    if (ask_daemon(a, s, &st, err, sizeof err) == 0)
        return 0;
    const char *from = o->admin ? o->admin : o->url;
    if (st == 404 && strstr(err, "--admin-listen"))   /* eldrd's public listener */
        return o->admin ? cli_fail(CMD, "--admin %s is eldrd's public listener (GET "
                                   "/v1/snapshot answers on its --admin-listen listener only): "
                                   "give --admin the admin address and --to this one", from)
                        : cli_fail(CMD, "%s answers GET /v1/snapshot on its --admin-listen "
                                   "listener: give that address as --admin URL", from);
    if (st == 404)
        return cli_fail(CMD, "%s/v1/snapshot: HTTP 404, no eldrd snapshot there: give --to "
                        "eldrd's --listen address (and, with --admin-listen, --admin its admin "
                        "address)", from);
    return cli_error(CMD, "%s", err);
}

/* Check, plan, run, report: routes to c, the snapshot from a. */
static int replay(const replay_opts *o, const trace_t *t, client_t *c, client_t *a,
                  const char *auth)
{
    char err[ELDR_ERRLEN], prefix[256];
    served s;
    int rc = ask(o, a, &s);
    if (rc)
        return rc;
    int64_t n = o->requests ? o->requests : t->n;
    double *arrive = malloc((size_t)n * sizeof *arrive), *decode = malloc((size_t)n * sizeof *decode);
    int64_t *row = malloc((size_t)n * sizeof *row);
    replay_result res = {0};
    if (s.L != t->L || s.E != t->E) {
        rc = cli_fail(CMD, "%s: trace has L=%d E=%d, but %s serves L=%d E=%d", o->path, t->L,
                      t->E, o->url, s.L, s.E);
        goto out;
    }
    /* a gate model routes on gate values: send the trace's */
    const float *gates = NULL;
    if (!strcmp(s.variant, "gate_prob") || !strcmp(s.variant, "gate_logit")) {
        gates = !strcmp(s.variant, "gate_prob") ? t->gate_prob : t->gate_logit;
        if (!gates) {
            rc = cli_fail(CMD, "%s serves a %s model, which routes on gate values, but %s has "
                          "no %s dataset", o->url, s.variant, o->path, s.variant);
            goto out;
        }
    }
    if (!arrive || !decode || !row) {
        rc = cli_error(CMD, "out of memory for %lld requests", (long long)n);
        goto out;
    }
    if (plan_times(o, t, n, arrive, decode, row) < 0) {
        rc = cli_fail(CMD, "%s: arrival_s is not in ascending order (use --rate)", o->path);
        goto out;
    }
    if (o->id_prefix)
        snprintf(prefix, sizeof prefix, "%s", o->id_prefix);
    else
        snprintf(prefix, sizeof prefix, "replay-%ld-", (long)getpid());
    cli_progress progress;
    cli_progress_start(&progress, CMD);
    replay_plan p = {.url = client_url(c), .n = n, .arrive_s = arrive, .decode_s = decode,
                     .counts = t->prefill_counts, .gates = gates, .row = row,
                     .cells = TRACE_CELLS(t),
                     .id_prefix = prefix, .auth_header = auth,
                     .concurrency = (int)o->concurrency,
                     .timeout_s = o->timeout_s, .max_seconds = o->max_seconds, .K = s.K,
                     .progress = on_progress, .progress_arg = &progress};
    int run_rc = replay_run(&p, &res, err, sizeof err);
    cli_progress_done(&progress);
    if (run_rc < 0) {
        rc = cli_error(CMD, "%s", err);
        goto out;
    }
    if (res.not_routing) {       /* one line, no summary of a run that did not happen */
        rc = cli_fail(CMD, "%s does not serve POST /v1/route (%s): is it eldrd's admin "
                      "listener? give --to the --listen address%s", o->url, res.first_error,
                      o->admin ? "" : " and --admin the --admin-listen one");
        goto out;
    }
    long long after = daemon_inflight(a);
    if (o->json)
        cli_print_json(result_json(o, &s, &res, n, after));
    else
        print_text(o, &s, &res, n, after);
    if (res.route_errors || res.finish_errors)
        rc = cli_error(CMD, "%lld of %lld calls failed; first: %s",
                       (long long)(res.route_errors + res.finish_errors),
                       (long long)(2 * n - res.skipped), res.first_error);
out:
    replay_result_free(&res);
    free(arrive);
    free(decode);
    free(row);
    served_free(&s);
    return rc;
}

int cmd_replay(int argc, char **argv)
{
    replay_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    char err[ELDR_ERRLEN], auth[CLIENT_TOKEN_HEADER_MAX];
    client_t *c = client_new(o.url, o.timeout_s, err, sizeof err), *a = NULL;
    if (!c)
        return cli_fail(CMD, "--to: %s", err);
    if (o.admin && !(a = client_new(o.admin, o.timeout_s, err, sizeof err))) {
        client_free(c);
        return cli_fail(CMD, "--admin: %s", err);
    }
    trace_t *t = NULL;
    if (o.token_file && client_token_header(o.token_file, "--token-file", auth, sizeof auth,
                                            err, sizeof err) < 0)
        rc = cli_fail(CMD, "%s", err);
    else if (trace_load(o.path, &t, err, sizeof err) < 0)
        rc = cli_fail(CMD, "%s", err);
    else if ((rc = cli_reach(CMD, o.url, o.timeout_s)) ||
             (o.admin && (rc = cli_reach(CMD, o.admin, o.timeout_s))))
        ; /* one line said so; CLI_UNREACHABLE */
    else if (t->n == 0)
        rc = cli_fail(CMD, "%s: the trace has no requests", o.path);
    else
        rc = replay(&o, t, c, a ? a : c, o.token_file ? auth : NULL);
    trace_free(t);
    client_free(c);
    client_free(a);
    return rc;
}
