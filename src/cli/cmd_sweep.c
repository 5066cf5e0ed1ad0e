/* cmd_sweep.c - `eldr sweep TRACE [-m MODEL] --tau LIST --workers LIST
 * --rate LIST`: what a tau, a K and a load would do to TPOT, as a grid.
 *
 * The trace is split (--calib-split, src/core/sim.h sim_calib_rows): the
 * first rows calibrate, the rest are evaluated, so no request is routed
 * by centroids fitted on itself. For each K a model is fitted on the
 * calibration rows with one recipe - the model file's variant and layer
 * mask when -m is given, else --variant and --layers (a greedy `auto`
 * mask is selected once, on the first K, and reused). For each (K, rate)
 * one workload is built (common random numbers: every policy sees the
 * same arrivals and activations), the baselines run once, and ELDR runs
 * at every tau. Each row reports the change of TPOT p50 against the best
 * load-balancing baseline of its (K, rate). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomicfile.h"
#include "cli.h"
#include "costmodel.h"
#include "err.h"
#include "model.h"
#include "route.h"
#include "sim.h"
#include "trace.h"

static const char *CMD = "sweep";

#define MAX_LIST 64

static void usage(void)
{
    printf("usage: eldr sweep TRACE [-m MODEL] [--tau LIST] [--workers LIST] [--rate LIST]\n"
           "                 [--calib-split N|F] [--csv FILE] [--json] [options]\n"
           "\n"
           "Grid of decode-routing simulations: for each K in --workers a model is fitted\n"
           "on the calibration rows with one recipe, and ELDR at each tau runs beside the\n"
           "baselines on the held-out rows at each arrival rate. Every policy of one\n"
           "(K, rate) cell sees the same arrivals and activations.\n"
           "\n"
           "  -m, --model FILE      take the recipe (variant, layer mask) and the default\n"
           "                        K and tau from this model; centroids are refitted\n"
           "  --tau LIST            band widths (default the model's tau, else\n"
           "                        0,0.05,0.1,0.2)\n"
           "  --workers LIST        decode workers K (default the model's K; required\n"
           "                        without -m)\n"
           "  --rate LIST           Poisson arrivals, requests/s; without it the trace's\n"
           "                        arrival_s are replayed\n"
           "  --calib-split N|F     calibration rows: a count (default 1000, capped at\n"
           "                        half the trace) or a fraction in (0, 1)\n"
           "  --variant V           signature variant without -m (default count_idf)\n"
           "  --layers auto|all|L   layer mask without -m (default auto: greedy, chosen\n"
           "                        once and reused for every K)\n"
           "  --baselines LIST      from random,rr,jsq,p2c,domain (default jsq,rr,p2c)\n"
           "  --output-tokens N     tokens per request (default: the trace's decode_tokens)\n"
           "  --max-batch N         requests decoding at once per worker (default %d)\n"
           "  --cost FILE           step-latency cost file (eldr costfit; default the\n"
           "                        documented model, docs/cost-model.md)\n"
           "  --no-min2             turn the min-two band rule off\n"
           "  --seed S              fits, arrivals, sampled activations (default 1)\n"
           "  --csv FILE            write the grid as CSV (atomically)\n"
           "  --json                the grid as JSON on stdout\n"
           "  -h, --help            this text\n"
           "\n"
           "example: eldr sweep ../shared/data/gptoss20b-routing.h5 --workers 2,4 \\\n"
           "           --rate 4,8 --tau 0,0.1 --output-tokens 256\n",
           SIM_DEFAULT_MAX_BATCH);
}

typedef struct sweep_opts {
    const char *trace, *model, *csv, *cost_file, *layers_arg;
    double tau[MAX_LIST], rate[MAX_LIST];
    int n_tau, n_rate;
    long long workers[MAX_LIST];
    int n_workers;
    double split;
    int variant, min2, json;
    int baselines[ROUTE_N_KINDS], n_base;
    long long output_tokens, max_batch, seed;
} sweep_opts;

/* One row of the grid. */
typedef struct sweep_row {
    int K;
    double rate;              /* 0 = trace arrivals */
    route_kind kind;
    double tau;               /* NaN for baselines */
    double tpot_p50, tpot_p99, queue_p50, distinct, reuse, imbalance;
    double vs_best;           /* % change of tpot_p50 against the best balancer */
} sweep_row;

static int parse_double_list(const char *opt, const char *s, double lo, double hi,
                             double *out, int *n)
{
    char *copy = strdup(s), *save = NULL;
    if (!copy)
        return cli_error(CMD, "out of memory");
    *n = 0;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_LIST)
            rc = cli_fail(CMD, "%s: more than %d values", opt, MAX_LIST);
        else
            rc = cli_parse_double(CMD, opt, tok, lo, hi, &out[(*n)++]);
    }
    if (!rc && *n == 0)
        rc = cli_fail(CMD, "%s: empty list", opt);
    free(copy);
    return rc;
}

static int parse_baselines(const char *s, sweep_opts *o)
{
    char *copy = strdup(s), *save = NULL;
    if (!copy)
        return cli_error(CMD, "out of memory");
    int rc = 0;
    o->n_base = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        int k = route_kind_parse(tok);
        if (k < 0 || k == ROUTE_ELDR)
            rc = cli_fail(CMD, "--baselines: unknown baseline '%s' (random, rr, jsq, p2c, "
                          "domain)", tok);
        else if (o->n_base < ROUTE_N_KINDS)
            o->baselines[o->n_base++] = k;
    }
    free(copy);
    return rc;
}

static int parse_workers(const char *s, sweep_opts *o)
{
    long long *v = NULL;
    int n = 0;
    if (cli_parse_int_list(CMD, "--workers", s, 1, ROUTE_MAX_WORKERS, &v, &n))
        return CLI_BADINPUT;
    int rc = n > MAX_LIST ? cli_fail(CMD, "--workers: more than %d values", MAX_LIST) : 0;
    for (int i = 0; !rc && i < n; i++)
        o->workers[i] = v[i];
    o->n_workers = rc ? 0 : n;
    free(v);
    return rc;
}

enum { O_TAU = 256, O_WORKERS, O_RATE, O_SPLIT, O_VARIANT, O_LAYERS, O_BASE, O_OUT,
       O_BATCH, O_COST, O_NOMIN2, O_SEED, O_CSV, O_JSON };

static int parse_option(int c, const char *arg, sweep_opts *o)
{
    switch (c) {
    case 'm': o->model = arg; return 0;
    case O_TAU: return parse_double_list("--tau", arg, 0, 1e9, o->tau, &o->n_tau);
    case O_WORKERS: return parse_workers(arg, o);
    case O_RATE: return parse_double_list("--rate", arg, 1e-9, 1e9, o->rate, &o->n_rate);
    case O_SPLIT: return cli_parse_double(CMD, "--calib-split", arg, 1e-12, 1e15, &o->split);
    case O_VARIANT:
        o->variant = sig_variant_parse(arg);
        return o->variant < 0 ? cli_fail(CMD, "--variant: unknown variant '%s'", arg) : 0;
    case O_LAYERS: o->layers_arg = arg; return 0;
    case O_BASE: return parse_baselines(arg, o);
    case O_OUT: return cli_parse_int(CMD, "--output-tokens", arg, 1, 1 << 24, &o->output_tokens);
    case O_BATCH: return cli_parse_int(CMD, "--max-batch", arg, 1, 1 << 20, &o->max_batch);
    case O_COST: o->cost_file = arg; return 0;
    case O_NOMIN2: o->min2 = 0; return 0;
    case O_SEED: return cli_parse_int(CMD, "--seed", arg, 0, INT64_MAX, &o->seed);
    case O_CSV: o->csv = arg; return 0;
    case O_JSON: o->json = 1; return 0;
    }
    return CLI_BADINPUT;
}

static int parse_args(int argc, char **argv, sweep_opts *o)
{
    static const struct option longs[] = {
        {"model", required_argument, 0, 'm'}, {"tau", required_argument, 0, O_TAU},
        {"workers", required_argument, 0, O_WORKERS}, {"rate", required_argument, 0, O_RATE},
        {"calib-split", required_argument, 0, O_SPLIT},
        {"variant", required_argument, 0, O_VARIANT}, {"layers", required_argument, 0, O_LAYERS},
        {"baselines", required_argument, 0, O_BASE},
        {"output-tokens", required_argument, 0, O_OUT},
        {"max-batch", required_argument, 0, O_BATCH}, {"cost", required_argument, 0, O_COST},
        {"no-min2", no_argument, 0, O_NOMIN2}, {"seed", required_argument, 0, O_SEED},
        {"csv", required_argument, 0, O_CSV}, {"json", no_argument, 0, O_JSON},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->split = SIM_DEFAULT_CALIB;
    o->variant = SIG_COUNT_IDF;
    o->min2 = 1;
    o->seed = 1;
    o->max_batch = SIM_DEFAULT_MAX_BATCH;
    o->layers_arg = "auto";
    parse_baselines("jsq,rr,p2c", o);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":m:h", longs, NULL)) != -1) {
        if (c == 'h') {
            usage();
            return -1;
        }
        if (c == ':')
            return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        if (c == '?')
            return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        int rc = parse_option(c, optarg, o);
        if (rc)
            return rc;
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "missing TRACE");
    if (optind + 1 < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind + 1]);
    o->trace = argv[optind];
    if (o->split > 1 && o->split != floor(o->split))
        return cli_fail(CMD, "--calib-split: %g is neither a row count nor a fraction", o->split);
    return 0;
}

/* ---- the recipe ---- */

/* Fit options shared by every K: from the model file, or the flags. */
static int recipe_options(const sweep_opts *o, const model_t *file_model, model_fit_opts *fo,
                          int **list, const trace_t *t)
{
    model_fit_opts_default(fo, 1);
    fo->seed = (uint64_t)o->seed;
    *list = NULL;
    if (file_model) {
        fo->variant = file_model->recipe.variant;
        fo->layers = MODEL_LAYERS_LIST;
        fo->layer_list = file_model->recipe.layers;
        fo->n_layer_list = file_model->recipe.n_layers;
        return 0;
    }
    fo->variant = (sig_variant)o->variant;
    if (!strcmp(o->layers_arg, "auto")) {
        if (!t->decode_counts)
            return cli_fail(CMD, "--layers auto: %s has no decode_counts; give --layers all "
                            "or a list", o->trace);
        fo->layers = MODEL_LAYERS_AUTO;
        return 0;
    }
    if (!strcmp(o->layers_arg, "all")) {
        fo->layers = MODEL_LAYERS_ALL;
        return 0;
    }
    long long *v = NULL;
    int n = 0;
    if (cli_parse_int_list(CMD, "--layers", o->layers_arg, 0, t->L - 1, &v, &n))
        return CLI_BADINPUT;
    *list = malloc((size_t)n * sizeof **list);
    if (!*list) {
        free(v);
        return cli_error(CMD, "out of memory");
    }
    for (int i = 0; i < n; i++)
        (*list)[i] = (int)v[i];
    free(v);
    fo->layers = MODEL_LAYERS_LIST;
    fo->layer_list = *list;
    fo->n_layer_list = n;
    return 0;
}

/* ---- one (K, rate) cell ---- */

static void fill_row(sweep_row *r, int K, double rate, route_kind kind, double tau,
                     const sim_result *s)
{
    r->K = K;
    r->rate = rate;
    r->kind = kind;
    r->tau = tau;
    r->tpot_p50 = s->tpot_p50_ms;
    r->tpot_p99 = s->tpot_p99_ms;
    r->queue_p50 = s->queue_p50_ms;
    r->distinct = s->distinct_per_step;
    r->reuse = s->reuse;
    r->imbalance = s->imbalance;
    r->vs_best = NAN;
}

/* Label shares of the calibration rows, for the domain baseline. */
static int domain_shares(const trace_t *calib, route_policy *p, char *err, size_t errlen)
{
    if (!calib->label || calib->n_labels < 1)
        return eldr_errf(err, errlen, "baseline domain: the trace has no labels");
    double *share = calloc((size_t)calib->n_labels, sizeof *share);
    if (!share)
        return eldr_errf(err, errlen, "out of memory");
    for (int64_t r = 0; r < calib->n; r++)
        share[calib->label[r]] += 1;
    int rc = route_policy_set_domains(p, share, calib->n_labels, err, errlen);
    free(share);
    return rc;
}

static int run_policy(const sim_workload *w, route_kind kind, int K, double tau,
                      const sweep_opts *o, const model_t *m, const trace_t *calib,
                      sim_result *res, char *err, size_t errlen)
{
    route_policy p;
    if (route_policy_init(&p, kind, K, (uint64_t)o->seed, err, errlen) < 0)
        return -1;
    int rc = 0;
    if (kind == ROUTE_ELDR)
        rc = route_policy_set_centroids(&p, m->centroids, sig_dim(&m->recipe), tau, o->min2,
                                        err, errlen);
    else if (kind == ROUTE_DOMAIN)
        rc = domain_shares(calib, &p, err, errlen);
    if (rc == 0)
        rc = sim_run(w, &p, NULL, NULL, res, err, errlen);
    route_policy_free(&p);
    return rc;
}

typedef struct grid {
    sweep_row *rows;
    int n, cap;
} grid;

static sweep_row *grid_add(grid *g)
{
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 32;
        sweep_row *r = realloc(g->rows, (size_t)cap * sizeof *r);
        if (!r)
            return NULL;
        g->rows = r;
        g->cap = cap;
    }
    return &g->rows[g->n++];
}

/* Baselines then ELDR at every tau on one workload; fills vs_best. */
static int run_cell(const sim_workload *w, int K, double rate, const sweep_opts *o,
                    const model_t *m, const trace_t *calib, grid *g, char *err, size_t errlen)
{
    int first = g->n;
    double best = INFINITY;
    for (int b = 0; b < o->n_base + o->n_tau; b++) {
        route_kind kind = b < o->n_base ? (route_kind)o->baselines[b] : ROUTE_ELDR;
        double tau = b < o->n_base ? NAN : o->tau[b - o->n_base];
        sim_result res;
        if (run_policy(w, kind, K, tau, o, m, calib, &res, err, errlen) < 0)
            return -1;
        sweep_row *r = grid_add(g);
        if (r)
            fill_row(r, K, rate, kind, tau, &res);
        sim_result_free(&res);
        if (!r)
            return eldr_errf(err, errlen, "out of memory");
        if (route_kind_is_balancer(kind) && r->tpot_p50 < best)
            best = r->tpot_p50;
    }
    for (int i = first; isfinite(best) && i < g->n; i++)
        g->rows[i].vs_best = 100.0 * (g->rows[i].tpot_p50 - best) / best;
    return 0;
}

/* ---- output ---- */

static void fmt_rate(char *buf, size_t n, double rate)
{
    if (rate > 0)
        snprintf(buf, n, "%g", rate);
    else
        snprintf(buf, n, "trace");
}

static void print_table(const grid *g)
{
    printf("%4s %8s %-7s %5s %10s %10s %10s %9s %7s %7s %8s\n", "K", "rate", "policy", "tau",
           "tpot_p50", "tpot_p99", "queue_p50", "distinct", "reuse", "imbal", "vs_best");
    for (int i = 0; i < g->n; i++) {
        const sweep_row *r = &g->rows[i];
        char rate[32], tau[16], vs[16];
        fmt_rate(rate, sizeof rate, r->rate);
        snprintf(tau, sizeof tau, isnan(r->tau) ? "-" : "%g", r->tau);
        snprintf(vs, sizeof vs, isnan(r->vs_best) ? "-" : "%+.1f%%", r->vs_best);
        printf("%4d %8s %-7s %5s %10.3f %10.3f %10.3f %9.2f %7.2f %7.3f %8s\n", r->K, rate,
               route_kind_name(r->kind), tau, r->tpot_p50, r->tpot_p99, r->queue_p50,
               r->distinct, r->reuse, r->imbalance, vs);
    }
}

static const char *CSV_HEAD = "K,rate,policy,tau,tpot_p50_ms,tpot_p99_ms,queue_p50_ms,"
                              "distinct_experts_per_step,reuse,imbalance,vs_best_pct\n";

static int write_csv(const char *path, const grid *g, char *err, size_t errlen)
{
    atomic_file out;
    if (atomic_file_begin(&out, path, err, errlen))
        return -1;
    FILE *f = atomic_file_stream(&out);
    if (!f) {
        atomic_file_abort(&out);
        return eldr_errf(err, errlen, "%s: out of memory", path);
    }
    fputs(CSV_HEAD, f);
    for (int i = 0; i < g->n; i++) {
        const sweep_row *r = &g->rows[i];
        char rate[32], tau[32], vs[32];
        fmt_rate(rate, sizeof rate, r->rate);
        snprintf(tau, sizeof tau, isnan(r->tau) ? "" : "%.17g", r->tau);
        snprintf(vs, sizeof vs, isnan(r->vs_best) ? "" : "%.6f", r->vs_best);
        fprintf(f, "%d,%s,%s,%s,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%s\n", r->K, rate,
                route_kind_name(r->kind), tau, r->tpot_p50, r->tpot_p99, r->queue_p50,
                r->distinct, r->reuse, r->imbalance, vs);
    }
    return atomic_file_commit(&out, err, errlen);
}

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static void print_json(const grid *g, int64_t n_cal, int64_t n_eval, const model_t *m,
                       const char *csv)
{
    json_t *rows = json_array(), *mask = json_array();
    for (int i = 0; i < m->recipe.n_layers; i++)
        json_array_append_new(mask, json_integer(m->recipe.layers[i]));
    for (int i = 0; i < g->n; i++) {
        const sweep_row *r = &g->rows[i];
        json_t *o = json_pack("{s:i, s:s, s:f, s:f, s:f, s:f, s:f, s:f}", "K", r->K, "policy",
                              route_kind_name(r->kind), "tpot_p50_ms", r->tpot_p50,
                              "tpot_p99_ms", r->tpot_p99, "queue_p50_ms", r->queue_p50,
                              "distinct_experts_per_step", r->distinct, "reuse", r->reuse,
                              "imbalance", r->imbalance);
        json_object_set_new(o, "rate", r->rate > 0 ? json_real(r->rate) : json_string("trace"));
        json_object_set_new(o, "tau", num_or_null(r->tau));
        json_object_set_new(o, "vs_best_pct", num_or_null(r->vs_best));
        json_array_append_new(rows, o);
    }
    json_t *root = json_pack("{s:I, s:I, s:s, s:o, s:o}", "calib_rows", (json_int_t)n_cal,
                             "eval_rows", (json_int_t)n_eval, "variant",
                             sig_variant_name(m->recipe.variant), "mask", mask, "rows", rows);
    json_object_set_new(root, "csv", csv ? json_string(csv) : json_null());
    cli_print_json(root);
}

/* ---- main ---- */

typedef struct sweep_state {
    trace_t *t, *calib, *eval;
    model_t *file_model;
    int *layer_list;
    grid g;
    cost_model cost;
} sweep_state;

static void state_free(sweep_state *s)
{
    trace_free(s->t);
    trace_free(s->calib);
    trace_free(s->eval);
    model_free(s->file_model);
    free(s->layer_list);
    free(s->g.rows);
}

static trace_t *row_range(const trace_t *t, int64_t r0, int64_t r1, char *err, size_t errlen)
{
    int64_t *rows = malloc((size_t)(r1 - r0) * sizeof *rows);
    if (!rows) {
        eldr_errf(err, errlen, "out of memory");
        return NULL;
    }
    for (int64_t r = r0; r < r1; r++)
        rows[r - r0] = r;
    trace_t *s = trace_select(t, rows, r1 - r0, err, errlen);
    free(rows);
    return s;
}

static int load_inputs(sweep_opts *o, sweep_state *s, char *err, size_t errlen)
{
    if (trace_load(o->trace, &s->t, err, errlen) < 0)
        return cli_fail(CMD, "%s", err);
    if (o->model && model_load(o->model, &s->file_model, err, errlen) < 0)
        return cli_fail(CMD, "%s", err);
    cost_model_default(&s->cost);
    if (o->cost_file && cost_model_load(o->cost_file, &s->cost, err, errlen) < 0)
        return cli_fail(CMD, "%s", err);
    if (s->file_model && (s->file_model->recipe.L != s->t->L ||
                          s->file_model->recipe.E != s->t->E))
        return cli_fail(CMD, "%s: model for %d x %d, trace %s has %d x %d", o->model,
                        s->file_model->recipe.L, s->file_model->recipe.E, o->trace, s->t->L,
                        s->t->E);
    if (!o->n_workers && !s->file_model)
        return cli_fail(CMD, "--workers: give the K values (or a model with -m)");
    if (!o->n_workers)
        o->workers[o->n_workers++] = s->file_model->K;
    if (!o->n_tau && s->file_model)
        o->tau[o->n_tau++] = s->file_model->tau;
    if (!o->n_tau) {
        static const double def[] = {0, 0.05, 0.1, 0.2};
        memcpy(o->tau, def, sizeof def);
        o->n_tau = 4;
    }
    if (!o->n_rate && !s->t->arrival_s)
        return cli_fail(CMD, "--rate: %s has no arrival_s; give the rates", o->trace);
    int64_t n_cal = sim_calib_rows(s->t->n, o->split, err, errlen);
    if (n_cal < 1 || n_cal >= s->t->n)
        return cli_fail(CMD, "--calib-split %g leaves %lld calibration and %lld evaluation "
                        "rows of %lld; both need rows", o->split, (long long)(n_cal < 0 ? 0 : n_cal),
                        (long long)(s->t->n - (n_cal < 0 ? 0 : n_cal)), (long long)s->t->n);
    for (int i = 0; i < o->n_workers; i++)
        if (o->workers[i] > n_cal)
            return cli_fail(CMD, "--workers: K = %lld exceeds the %lld calibration rows",
                            o->workers[i], (long long)n_cal);
    s->calib = row_range(s->t, 0, n_cal, err, errlen);
    s->eval = s->calib ? row_range(s->t, n_cal, s->t->n, err, errlen) : NULL;
    if (!s->eval)
        return cli_error(CMD, "%s", err);
    trace_free(s->t);
    s->t = NULL;
    return 0;
}

static int sweep_k(const sweep_opts *o, sweep_state *s, model_fit_opts *fo, int K,
                   model_t **mout, char *err, size_t errlen)
{
    fo->K = K;
    if (model_fit(s->calib, fo, mout, NULL, err, errlen) < 0)
        return cli_fail(CMD, "fit K = %d on the calibration rows: %s", K, err);
    if (fo->layers == MODEL_LAYERS_AUTO) {   /* select once, reuse for every K */
        free(s->layer_list);
        s->layer_list = malloc((size_t)(*mout)->recipe.n_layers * sizeof *s->layer_list);
        if (!s->layer_list)
            return cli_error(CMD, "out of memory");
        memcpy(s->layer_list, (*mout)->recipe.layers,
               (size_t)(*mout)->recipe.n_layers * sizeof *s->layer_list);
        fo->layers = MODEL_LAYERS_LIST;
        fo->layer_list = s->layer_list;
        fo->n_layer_list = (*mout)->recipe.n_layers;
    }
    int n_rates = o->n_rate ? o->n_rate : 1;
    for (int ri = 0; ri < n_rates; ri++) {
        sim_config cfg;
        sim_config_default(&cfg);
        cfg.cost = s->cost;
        cfg.seed = (uint64_t)o->seed;
        cfg.max_batch = (int)o->max_batch;
        cfg.output_tokens = (int32_t)o->output_tokens;
        double rate = o->n_rate ? o->rate[ri] : 0;
        if (rate > 0) {
            cfg.arrivals = SIM_ARRIVE_POISSON;
            cfg.rate = rate;
        }
        sim_workload w;
        if (sim_workload_init(&w, s->eval, &cfg, &(*mout)->recipe, err, errlen) < 0)
            return cli_fail(CMD, "%s: %s", o->trace, err);
        int rc = run_cell(&w, K, rate, o, *mout, s->calib, &s->g, err, errlen);
        sim_workload_free(&w);
        if (rc < 0)
            return cli_fail(CMD, "K = %d: %s", K, err);
    }
    return 0;
}

int cmd_sweep(int argc, char **argv)
{
    sweep_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    char err[ELDR_ERRLEN];
    sweep_state s = {0};
    model_fit_opts fo;
    model_t *last = NULL;
    rc = load_inputs(&o, &s, err, sizeof err);
    if (!rc)
        rc = recipe_options(&o, s.file_model, &fo, &s.layer_list, s.calib);
    for (int i = 0; !rc && i < o.n_workers; i++) {
        model_free(last);
        last = NULL;
        rc = sweep_k(&o, &s, &fo, (int)o.workers[i], &last, err, sizeof err);
    }
    if (!rc && o.csv && write_csv(o.csv, &s.g, err, sizeof err) < 0)
        rc = cli_fail(CMD, "%s", err);
    if (!rc && o.json)
        print_json(&s.g, s.calib->n, s.eval->n, last, o.csv);
    else if (!rc)
        print_table(&s.g);
    if (!rc && !o.json)
        printf("calibration rows %lld, evaluation rows %lld, variant %s, %d layers%s%s\n",
               (long long)s.calib->n, (long long)s.eval->n,
               sig_variant_name(last->recipe.variant), last->recipe.n_layers,
               o.csv ? ", csv " : "", o.csv ? o.csv : "");
    model_free(last);
    state_free(&s);
    return rc;
}
