/* cmd_sweep.c - `eldr sweep` and `eldr advise`: the grid of simulations
 * over tau x K x rate against the baselines, under N seeds
 * (src/core/grid.h), and advise's recommendation.
 *
 * The trace is split (src/core/split.h; a seeded random split by
 * default), so no request is routed by centroids fitted on itself. For
 * each K a model is fitted on the calibration rows with one recipe - the
 * model file's variant and layer mask when -m is given, else --variant
 * and --layers (a greedy `auto` mask is selected once, on the first K,
 * and reused). Every policy of one (K, rate, seed) sees the same
 * arrivals and activations; the improvement over the best baseline is
 * paired per seed, with a 95% confidence interval over the seeds. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomicfile.h"
#include "cli.h"
#include "cli_sim.h"
#include "costmodel.h"
#include "err.h"
#include "grid.h"
#include "online.h"
#include "model.h"
#include "route.h"
#include "sim.h"
#include "split.h"
#include "trace.h"
#include "verdict.h"

#define MAX_LIST GRID_MAX_LIST

typedef struct sweep_opts {
    const char *cmd;            /* "sweep" or "advise" */
    int advise;
    const char *trace, *model, *csv, *cost_file, *layers_arg;
    double tau[MAX_LIST], rate[MAX_LIST];
    int n_tau, n_rate;
    long long workers[MAX_LIST];
    int n_workers;
    split_spec split;
    int variant, min2, json;
    int baselines[ROUTE_N_KINDS], n_base;
    int online;                /* --online: eldr-online beside eldr at each tau */
    int cost_rule;             /* --cost-rule: eldr-cost in each cell */
    double refit_every, refit_window;
    long long output_tokens, max_batch, seed, seeds, threads;
    verdict_opts vo;           /* the verdict's margins (K set per verdict) */
    int compare_fleets;        /* advise --compare-fleets: K is a knob too */
    int rate_default;          /* no --rate and no arrival_s: SIM_DEFAULT_RATE */
    int n_workers_given;       /* --workers was given */
} sweep_opts;

static void usage(int advise)
{
    if (advise)
        printf("usage: eldr advise TRACE [-m MODEL] [--workers K] [--tau LIST] [--rate LIST]\n"
               "                  [--seeds N] [--json] [options]\n"
               "\n"
               "Which tau at this fleet's K? Simulates ELDR at each tau beside the\n"
               "baselines on the held-out rows, under N seeds (each with its own arrivals\n"
               "and calibration split). A setting wins only if, against every baseline,\n"
               "its TPOT p50 gains at least --min-gain, its p99 rises at most --p99-margin\n"
               "and its throughput (steady state) falls at most --tps-margin over the whole\n"
               "95%% interval, Bonferroni-corrected over the settings tried, and it is\n"
               "faster with every seed's split. Otherwise \"keep <baseline>\" (it does not\n"
               "pay) or \"tie\" (the seeds cannot tell), and why. The same verdict as\n"
               "eldr sweep, eldr.advise and the dashboard's view 7. Then it reruns the pick\n"
               "at half and twice the rate and at the trace's shortest output length, and\n"
               "says where it stops holding. See docs/advise.md.\n"
               "\n"
               "  --compare-fleets       let K vary too: every K of --workers competes\n"
               "                         (without it --workers is the fleet: one K)\n");
    else
        printf("usage: eldr sweep TRACE [-m MODEL] [--tau LIST] [--workers LIST] [--rate LIST]\n"
               "                 [--seeds N] [--csv FILE] [--json] [options]\n"
               "\n"
               "Grid of decode-routing simulations: for each K in --workers a model is fitted\n"
               "on the calibration rows with one recipe, and ELDR at each tau runs beside the\n"
               "baselines on the held-out rows at each arrival rate. Every policy of one\n"
               "(K, rate, seed) cell sees the same arrivals and activations. Under the\n"
               "grid, one verdict per K by the rule of eldr advise (docs/advise.md); with\n"
               "one seed (the default) each says \"no verdict\": one seed gives no interval.\n"
               "\n");
    printf("  -m, --model FILE       take the recipe (variant, layer mask) and the default\n"
           "                         K and tau from this model; centroids are refitted\n"
           "  --tau LIST             band widths (default the model's tau, else\n"
           "                         0,0.05,0.1,0.2)\n"
           "  --workers LIST         decode workers K (default the model's K; %s)\n"
           "  --min-gain PCT         verdict: the least TPOT p50 gain worth acting on\n"
           "                         (default %.1f)\n"
           "  --p99-margin PCT       verdict: the most TPOT p99 rise a win may cost\n"
           "                         (default %.1f)\n"
           "  --tps-margin PCT       verdict: the most throughput fall a win may cost\n"
           "                         (default %.1f; tokens/s at steady state: the first\n"
           "                         10%% of arrivals and the drain after the last cut)\n"
           "  --rate LIST            Poisson arrivals, requests/s; without it the trace's\n"
           "                         arrival_s are replayed, or, when it has none,\n"
           "                         Poisson 20 req/s (said in the report)\n"
           "  --seeds N              arrival/activation seeds --seed, --seed+1, ... (default\n"
           "                         %d); with N >= 2 each result has a 95%% confidence\n"
           "                         interval over the seeds\n"
           CLI_SPLIT_HELP
           "  --variant V            signature variant without -m (default count_idf)\n"
           "  --layers auto|all|L    layer mask without -m (default auto: greedy, chosen\n"
           "                         once and reused for every K)\n"
           "  --baselines LIST       from random,rr,jsq,p2c,domain (default %s)\n"
           "  --online               also run eldr-online (centroids refitted as simulated\n"
           "                         time passes) at each tau, in the row after eldr\n"
           "  --refit-every S        eldr-online: seconds between refits (default 2.5)\n"
           "  --refit-window W       eldr-online: seconds of signatures per refit (default 5)\n"
           "  --cost-rule            also run eldr-cost (the cost rule: the worker whose\n"
           "                         predicted step time grows least; no tau, no model) in\n"
           "                         each cell, after the taus, as one more ELDR setting\n"
           "  --output-tokens N      tokens per request (default: the trace's decode_tokens)\n"
           "  --max-batch B          requests decoding at once per worker (default %d)\n"
           "  --cost FILE            step-latency cost file (eldr costfit; default the\n"
           "                         documented model, docs/cost-model.md)\n"
           "  --no-min2              turn the min-two band rule off\n"
           "  --seed S               fits and the first simulation seed (default 1)\n"
           "  --threads T            cells simulated at once (default: the online CPUs)\n"
           "%s"
           "  --json                 the %s as JSON on stdout\n"
           "  -h, --help             this text\n"
           "\n"
           "example: eldr %s ../shared/data/gptoss20b-routing.h5 --workers %s \\\n"
           "           --rate 30,60 --tau 0,0.1%s\n",
           advise ? "else 4; the fleet's one K,\n                         a list only with --compare-fleets"
                  : "required without -m", VERDICT_P50_GAIN_PCT,
           VERDICT_P99_LOSS_PCT, VERDICT_TPS_LOSS_PCT, advise ? 5 : 1, GRID_DEFAULT_BASELINES,
           SIM_DEFAULT_MAX_BATCH,
           advise ? "" : "  --csv FILE             write the grid as CSV (atomically)\n",
           advise ? "verdict and the grid" : "grid and its verdicts",
           advise ? "advise" : "sweep", advise ? "4" : "2,4",
           advise ? " --seeds 5" : "");
}

static int parse_double_list(const char *cmd, const char *opt, const char *s, double lo,
                             double hi, double *out, int *n)
{
    char *copy = strdup(s), *save = NULL;
    if (!copy)
        return cli_error(cmd, "out of memory");
    *n = 0;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_LIST)
            rc = cli_fail(cmd, "%s: more than %d values", opt, MAX_LIST);
        else
            rc = cli_parse_double(cmd, opt, tok, lo, hi, &out[(*n)++]);
    }
    if (!rc && *n == 0)
        rc = cli_fail(cmd, "%s: empty list", opt);
    free(copy);
    return rc;
}

static int parse_baselines(const char *s, sweep_opts *o)
{
    char *copy = strdup(s), *save = NULL;
    if (!copy)
        return cli_error(o->cmd, "out of memory");
    int rc = 0;
    o->n_base = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        int k = route_kind_parse(tok);
        if (k < 0 || grid_kind_is_candidate((route_kind)k))
            rc = cli_fail(o->cmd, "--baselines: unknown baseline '%s' (random, rr, jsq, p2c, "
                          "domain; eldr-online is --online, eldr-cost is --cost-rule)", tok);
        else {
            for (int i = 0; i < o->n_base && !rc; i++)
                if (o->baselines[i] == k)
                    rc = cli_fail(o->cmd, "--baselines: '%s' appears twice", tok);
            if (!rc)
                o->baselines[o->n_base++] = k;
        }
    }
    if (!rc && o->n_base == 0)
        rc = cli_fail(o->cmd, "--baselines: empty list");
    free(copy);
    return rc;
}

static int parse_workers(const char *s, sweep_opts *o)
{
    long long *v = NULL;
    int n = 0;
    if (cli_parse_int_list(o->cmd, "--workers", s, 1, ROUTE_MAX_WORKERS, &v, &n))
        return CLI_BADINPUT;
    int rc = n > MAX_LIST ? cli_fail(o->cmd, "--workers: more than %d values", MAX_LIST) : 0;
    for (int i = 0; !rc && i < n; i++)
        o->workers[i] = v[i];
    o->n_workers = rc ? 0 : n;
    free(v);
    return rc;
}

enum { O_TAU = 256, O_WORKERS, O_RATE, O_SPLIT, O_SPLITMODE, O_SPLITSEED, O_VARIANT, O_LAYERS,
       O_BASE, O_OUT, O_BATCH, O_COST, O_NOMIN2, O_SEED, O_SEEDS, O_THREADS, O_CSV, O_JSON,
       O_ONLINE, O_REVERY, O_RWINDOW, O_MINGAIN, O_COSTRULE, O_P99M, O_TPSM, O_FLEETS };

static int parse_option(int c, const char *arg, sweep_opts *o)
{
    const char *cmd = o->cmd;
    switch (c) {
    case 'm': o->model = arg; return 0;
    case O_TAU: return parse_double_list(cmd, "--tau", arg, 0, ROUTE_TAU_MAX, o->tau,
                                              &o->n_tau);
    case O_WORKERS: o->n_workers_given = 1; return parse_workers(arg, o);
    case O_RATE: return parse_double_list(cmd, "--rate", arg, 1e-9, 1e9, o->rate, &o->n_rate);
    case O_SPLIT: return cli_split_option(cmd, "--calib-split", arg, &o->split);
    case O_SPLITMODE: return cli_split_option(cmd, "--split", arg, &o->split);
    case O_SPLITSEED: return cli_split_option(cmd, "--split-seed", arg, &o->split);
    case O_VARIANT:
        o->variant = sig_variant_parse(arg);
        return o->variant < 0 ? cli_fail(cmd, "--variant: unknown variant '%s'", arg) : 0;
    case O_LAYERS: o->layers_arg = arg; return 0;
    case O_BASE: return parse_baselines(arg, o);
    case O_OUT: return cli_parse_int(cmd, "--output-tokens", arg, 1, 1 << 24, &o->output_tokens);
    case O_BATCH: return cli_parse_int(cmd, "--max-batch", arg, 1, 1 << 20, &o->max_batch);
    case O_COST: o->cost_file = arg; return 0;
    case O_NOMIN2: o->min2 = 0; return 0;
    case O_SEED: return cli_parse_int(cmd, "--seed", arg, 0, INT64_MAX / 2, &o->seed);
    case O_SEEDS: return cli_parse_int(cmd, "--seeds", arg, 1, GRID_MAX_SEEDS, &o->seeds);
    case O_THREADS: return cli_parse_int(cmd, "--threads", arg, 1, 64, &o->threads);
    case O_CSV:
        if (o->advise)
            return CLI_BADINPUT;
        o->csv = arg;
        return 0;
    case O_JSON: o->json = 1; return 0;
    case O_ONLINE: o->online = 1; return 0;
    case O_COSTRULE: o->cost_rule = 1; return 0;
    case O_REVERY: return cli_parse_double(cmd, "--refit-every", arg, 1e-6, 1e9, &o->refit_every);
    case O_RWINDOW:
        return cli_parse_double(cmd, "--refit-window", arg, 1e-6, 1e9, &o->refit_window);
    case O_MINGAIN:
        return cli_parse_double(cmd, "--min-gain", arg, 0, 100, &o->vo.p50_gain_pct);
    case O_P99M: return cli_parse_double(cmd, "--p99-margin", arg, 0, 1000, &o->vo.p99_loss_pct);
    case O_TPSM: return cli_parse_double(cmd, "--tps-margin", arg, 0, 100, &o->vo.tps_loss_pct);
    case O_FLEETS: o->compare_fleets = 1; return 0;
    }
    return CLI_BADINPUT;
}

static int parse_args(int argc, char **argv, sweep_opts *o, int advise)
{
    static const struct option longs[] = {
        {"model", required_argument, 0, 'm'}, {"tau", required_argument, 0, O_TAU},
        {"workers", required_argument, 0, O_WORKERS}, {"rate", required_argument, 0, O_RATE},
        {"calib-split", required_argument, 0, O_SPLIT},
        {"split", required_argument, 0, O_SPLITMODE},
        {"split-seed", required_argument, 0, O_SPLITSEED},
        {"variant", required_argument, 0, O_VARIANT}, {"layers", required_argument, 0, O_LAYERS},
        {"baselines", required_argument, 0, O_BASE},
        {"output-tokens", required_argument, 0, O_OUT},
        {"max-batch", required_argument, 0, O_BATCH}, {"cost", required_argument, 0, O_COST},
        {"no-min2", no_argument, 0, O_NOMIN2}, {"seed", required_argument, 0, O_SEED},
        {"seeds", required_argument, 0, O_SEEDS}, {"threads", required_argument, 0, O_THREADS},
        {"csv", required_argument, 0, O_CSV}, {"json", no_argument, 0, O_JSON},
        {"online", no_argument, 0, O_ONLINE}, {"refit-every", required_argument, 0, O_REVERY},
        {"refit-window", required_argument, 0, O_RWINDOW},
        {"min-gain", required_argument, 0, O_MINGAIN},
        {"cost-rule", no_argument, 0, O_COSTRULE},
        {"p99-margin", required_argument, 0, O_P99M},
        {"tps-margin", required_argument, 0, O_TPSM},
        {"compare-fleets", no_argument, 0, O_FLEETS},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->advise = advise;
    o->cmd = advise ? "advise" : "sweep";
    split_spec_default(&o->split);
    o->variant = SIG_COUNT_IDF;
    o->min2 = 1;
    o->seed = 1;
    o->seeds = advise ? 5 : 1;
    o->max_batch = SIM_DEFAULT_MAX_BATCH;
    o->layers_arg = "auto";
    o->refit_every = ONLINE_DEFAULT_EVERY;
    o->refit_window = ONLINE_DEFAULT_WINDOW;
    verdict_opts_default(&o->vo);
    parse_baselines(GRID_DEFAULT_BASELINES, o);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":m:h", longs, NULL)) != -1) {
        if (c == 'h') {
            usage(advise);
            return -1;
        }
        if (c == ':')
            return cli_usage_error(o->cmd, "option '%s' needs a value", argv[optind - 1]);
        if (c == '?' || (c == O_CSV && advise) || (c == O_FLEETS && !advise))
            return cli_usage_error(o->cmd, "unknown option '%s'", argv[optind - 1]);
        int rc = parse_option(c, optarg, o);
        if (rc)
            return rc;
    }
    if (optind >= argc)
        return cli_usage_error(o->cmd, "missing TRACE");
    if (optind + 1 < argc)
        return cli_usage_error(o->cmd, "unexpected argument '%s'", argv[optind + 1]);
    o->trace = argv[optind];
    if (o->split.size == 0)
        return cli_fail(o->cmd, "--calib-split 0: the grid needs calibration rows to fit on");
    /* one seed draws the arrivals and the split unless --split-seed pins it */
    if (!o->split.pinned)
        o->split.seed = (uint64_t)o->seed;
    if (advise && o->n_workers > 1 && !o->compare_fleets)
        return cli_fail(o->cmd, "--workers: %d values, but the fleet has one K; give its K "
                        "(--workers N), or --compare-fleets to let K vary", o->n_workers);
    if (advise && o->seeds < 2)
        return cli_fail(o->cmd, "--seeds %lld: advise needs at least 2 seeds to tell a "
                        "difference from noise", o->seeds);
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
            return cli_fail(o->cmd, "--layers auto: %s has no decode_counts; give --layers all "
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
    if (cli_parse_int_list(o->cmd, "--layers", o->layers_arg, 0, t->L - 1, &v, &n))
        return CLI_BADINPUT;
    *list = malloc((size_t)n * sizeof **list);
    if (!*list) {
        free(v);
        return cli_error(o->cmd, "out of memory");
    }
    for (int i = 0; i < n; i++)
        (*list)[i] = (int)v[i];
    free(v);
    fo->layers = MODEL_LAYERS_LIST;
    fo->layer_list = *list;
    fo->n_layer_list = n;
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

/* "+-0.12" for a CI half-width, "" with one seed */
static void fmt_pm(char *buf, size_t n, const grid_stat *s, const char *fmt)
{
    if (isfinite(s->hi) && isfinite(s->lo)) {
        char v[32];
        snprintf(v, sizeof v, fmt, (s->hi - s->lo) / 2);
        snprintf(buf, n, "+-%s", v);
    } else {
        snprintf(buf, n, "-");
    }
}

static void print_table(const grid_result *g, const verdict *a)
{
    int pw = 7;                /* the widest name: eldr-online, eldr-cost */
    for (int i = 0; i < g->n; i++)
        if ((int)strlen(route_kind_name(g->rows[i].kind)) > pw)
            pw = (int)strlen(route_kind_name(g->rows[i].kind));
    printf("%4s %6s %-*s %5s %9s %7s %9s %9s %9s %6s %6s %8s %7s\n", "K", "rate", pw, "policy",
           "tau", "TPOT p50", "95% CI", "TPOT p99", "queue p50", "distinct", "reuse", "imbal",
           "vs best", "95% CI");
    printf("%4s %6s %-*s %5s %9s %7s %9s %9s %9s %6s %6s %8s %7s\n", "", "req/s", pw, "", "", "ms",
           "ms", "ms", "ms", "/layer-st", "", "", "TPOT", "pct pt");
    for (int i = 0; i < g->n; i++) {
        const grid_row *r = &g->rows[i];
        char rate[32], tau[16], vs[16], ci[48], vci[48];
        fmt_rate(rate, sizeof rate, r->rate);
        snprintf(tau, sizeof tau, isnan(r->tau) ? "-" : "%g", r->tau);
        snprintf(vs, sizeof vs, isnan(r->vs_best_pct.mean) ? "-" : "%+.1f%%",
                 r->vs_best_pct.mean);
        fmt_pm(ci, sizeof ci, &r->tpot_p50, "%.3f");
        fmt_pm(vci, sizeof vci, &r->vs_best_pct, "%.1f");
        const char *mark = a && a->row == i ? " <- advised" : "";
        printf("%4d %6s %-*s %5s %9.3f %7s %9.3f %9.3f %9.2f %6.2f %6.3f %8s %7s%s\n", r->K,
               rate, pw, route_kind_name(r->kind), tau, r->tpot_p50.mean, ci, r->tpot_p99.mean,
               r->queue_p50.mean, r->distinct.mean, r->reuse.mean, r->imbalance.mean, vs, vci,
               mark);
    }
}

static const char *CSV_HEAD = "K,rate,policy,tau,seeds,tpot_p50_ms,tpot_p50_ci95_lo,"
                              "tpot_p50_ci95_hi,tpot_p99_ms,queue_p50_ms,"
                              "distinct_experts_per_step,reuse,imbalance,vs_best_pct,"
                              "vs_best_ci95_lo,vs_best_ci95_hi\n";

static void csv_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, ",%.6f", v);
    else
        fputs(",", f);
}

static int write_csv(const char *path, const grid_result *g, char *err, size_t errlen)
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
        const grid_row *r = &g->rows[i];
        char rate[32], tau[32];
        fmt_rate(rate, sizeof rate, r->rate);
        snprintf(tau, sizeof tau, isnan(r->tau) ? "" : "%.17g", r->tau);
        fprintf(f, "%d,%s,%s,%s,%d", r->K, rate, route_kind_name(r->kind), tau, r->n_seeds);
        const double v[] = {r->tpot_p50.mean, r->tpot_p50.lo, r->tpot_p50.hi, r->tpot_p99.mean,
                            r->queue_p50.mean, r->distinct.mean, r->reuse.mean,
                            r->imbalance.mean, r->vs_best_pct.mean, r->vs_best_pct.lo,
                            r->vs_best_pct.hi};
        for (size_t j = 0; j < sizeof v / sizeof v[0]; j++)
            csv_num(f, v[j]);
        fputc('\n', f);
    }
    return atomic_file_commit(&out, err, errlen);
}

/* Row i of g; a candidate's interval is also given corrected over the
 * candidates of its K (the verdict's family, verdict.h). */
static json_t *row_json(const grid_result *g, int i)
{
    const grid_row *r = &g->rows[i];
    json_t *o = json_pack("{s:i, s:s}", "workers", r->K, "policy", route_kind_name(r->kind));
    json_object_set_new(o, "K", json_integer(r->K));
    json_object_set_new(o, "tau", cli_num_json(r->tau));
    json_object_set_new(o, "rate", r->rate > 0 ? json_real(r->rate) : json_string("trace"));
    cli_grid_stats_json(o, r);
    json_object_set_new(o, "vs_best_pct", cli_num_json(r->vs_best_pct.mean));
    json_object_set_new(o, "vs_best_pct_ci95", cli_ci_json(&r->vs_best_pct));
    json_object_set_new(o, "distinct_vs_best_pct", cli_num_json(r->distinct_vs_best_pct.mean));
    json_object_set_new(o, "p99_vs_best_pct", cli_num_json(r->p99_vs_best_pct.mean));
    json_object_set_new(o, "tokens_per_s_vs_best_pct", cli_num_json(r->tps_vs_best_pct.mean));
    if (grid_kind_is_candidate(r->kind)) {
        grid_stat adj;
        grid_bonferroni(r, verdict_family(g, r->K), &adj);
        json_object_set_new(o, "vs_best_pct_ci95_corrected", cli_ci_json(&adj));
    }
    return o;
}

/* ---- main ---- */

typedef struct sweep_state {
    trace_t *t, *calib, *eval;
    int32_t shortest;           /* the trace's shortest decode_tokens, 0 */
    split_rows rows;
    model_t *file_model;
    int *layer_list;
    grid_result g;
    cost_model cost;
} sweep_state;

static void state_free(sweep_state *s)
{
    trace_free(s->t);
    trace_free(s->calib);
    trace_free(s->eval);
    split_rows_free(&s->rows);
    model_free(s->file_model);
    free(s->layer_list);
    grid_result_free(&s->g);
}

static int32_t shortest_output(const trace_t *t);

static int load_inputs(sweep_opts *o, sweep_state *s, char *err, size_t errlen)
{
    const char *cmd = o->cmd;
    int rc = cli_load_trace(cmd, o->trace, &s->t);
    if (rc)
        return rc;
    if (o->model && model_load(o->model, &s->file_model, err, errlen) < 0)
        return cli_fail(cmd, "%s", err);
    cost_model_default(&s->cost);
    if (o->cost_file && cost_model_load(o->cost_file, &s->cost, err, errlen) < 0)
        return cli_fail(cmd, "%s", err);
    if (s->file_model && (s->file_model->recipe.L != s->t->L ||
                          s->file_model->recipe.E != s->t->E))
        return cli_fail(cmd, "%s: model for %d x %d, trace %s has %d x %d", o->model,
                        s->file_model->recipe.L, s->file_model->recipe.E, o->trace, s->t->L,
                        s->t->E);
    if (!o->n_workers && s->file_model)
        o->workers[o->n_workers++] = s->file_model->K;
    if (!o->n_workers && o->advise)
        o->workers[o->n_workers++] = 4;   /* the fleet's K, said in the output */
    if (!o->n_workers)
        return cli_fail(cmd, "--workers: give the K values (or a model with -m)");
    if (!o->n_tau && s->file_model && !o->advise)
        o->tau[o->n_tau++] = s->file_model->tau;
    if (!o->n_tau) {
        static const double def[] = {0, 0.05, 0.1, 0.2};
        memcpy(o->tau, def, sizeof def);
        o->n_tau = 4;
    }
    if (!o->n_rate && !s->t->arrival_s) {   /* the one default of every command */
        o->rate[o->n_rate++] = SIM_DEFAULT_RATE;
        o->rate_default = 1;
    }
    s->shortest = shortest_output(s->t);
    rc = cli_split(cmd, s->t, &o->split, 0, &s->rows, &s->calib, &s->eval);
    if (rc)
        return rc;
    for (int i = 0; i < o->n_workers; i++)
        if (o->workers[i] > s->rows.n_calib)
            return cli_fail(cmd, "--workers: K = %lld exceeds the %lld calibration rows",
                            o->workers[i], (long long)s->rows.n_calib);
    if (o->advise || o->model)   /* sweep refits; the warning is for a model's recipe */
        cli_warn_in_sample(cmd, o->trace, o->model, s->file_model, s->t, &s->rows);
    if (!grid_should_resplit(&o->split, (int)o->seeds)) {
        trace_free(s->t);      /* the seeds share one split: the rows are copied */
        s->t = NULL;
    }
    return 0;
}

static void grid_progress(void *ctx, int64_t done, int64_t total)
{
    cli_progress_update(ctx, (double)done / (double)total);
}

/* The grid of the options; the regime reruns change a copy. */
static void make_spec(const sweep_opts *o, const sweep_state *s, const model_fit_opts *fo,
                      grid_spec *g)
{
    grid_spec_default(g);
    g->calib = s->calib;
    g->eval = s->eval;
    if (s->t) {                 /* kept: each seed draws its own split */
        g->all = s->t;
        g->split = o->split;
    }
    g->fit = *fo;
    g->cfg.cost = s->cost;
    g->cfg.seed = (uint64_t)o->seed;
    g->cfg.max_batch = (int)o->max_batch;
    g->cfg.output_tokens = (int32_t)o->output_tokens;
    g->n_seeds = (int)o->seeds;
    g->n_workers = o->n_workers;
    for (int i = 0; i < o->n_workers; i++)
        g->workers[i] = (int)o->workers[i];
    g->n_rates = o->n_rate;
    memcpy(g->rates, o->rate, sizeof o->rate);
    g->n_taus = o->n_tau;
    memcpy(g->taus, o->tau, sizeof o->tau);
    g->n_base = o->n_base;
    for (int i = 0; i < o->n_base; i++)
        g->baselines[i] = (route_kind)o->baselines[i];
    g->min2 = o->min2;
    g->online = o->online;
    g->cost = o->cost_rule;
    g->cfg.refit_every = o->refit_every;
    g->cfg.refit_window = o->refit_window;
    g->threads = (int)o->threads;
}

static int run_grid(const sweep_opts *o, sweep_state *s, const model_fit_opts *fo, char *err,
                    size_t errlen)
{
    grid_spec g;
    make_spec(o, s, fo, &g);
    cli_progress bar;
    cli_progress_start(&bar, o->cmd);
    g.progress = grid_progress;
    g.progress_ctx = &bar;
    int rc = grid_run(&g, &s->g, err, errlen);
    cli_progress_done(&bar);
    if (rc < 0)
        return cli_fail(o->cmd, "%s: %s", o->trace, err);
    return 0;
}

/* ---- advise: where the recommendation holds ---- */

/* One condition the pick is rerun under: half or twice its rate, or the
 * trace's shortest output length. */
typedef struct regime {
    char what[48];             /* "30 req/s (1/2 x)", "output 128 tokens" */
    const char *key;           /* JSON: half_rate, double_rate, shortest_output */
    double rate;               /* req/s, 0: the trace's arrivals */
    int32_t output_tokens;     /* 0: the trace's */
    int ran;                   /* 0: not applicable (skip says why) */
    char skip[96];
    grid_stat vs;              /* the pick's p50 change vs the binding baseline */
    route_kind best;           /* that baseline */
    int holds;                 /* it wins there by the verdict's rule */
    verdict_why why;
} regime;

#define N_REGIMES 3

static int32_t shortest_output(const trace_t *t)
{
    int32_t m = 0;
    for (int64_t i = 0; t && t->decode_tokens && i < t->n; i++)
        if (t->decode_tokens[i] > 0 && (m == 0 || t->decode_tokens[i] < m))
            m = t->decode_tokens[i];
    return m;
}

/* Rerun ELDR row e of the grid (its K, tau, kind) beside the baselines
 * under condition r; one pre-chosen comparison, so the plain 95% CI. */
static int run_regime(const sweep_opts *o, sweep_state *s, const model_fit_opts *fo,
                      const grid_row *e, regime *r, char *err, size_t errlen)
{
    grid_spec g;
    make_spec(o, s, fo, &g);
    g.n_workers = 1;
    g.workers[0] = e->K;
    g.n_taus = e->kind == ROUTE_ELDR_COST ? 0 : 1;
    g.taus[0] = e->tau;
    g.online = e->kind == ROUTE_ELDR_ONLINE;
    g.cost = e->kind == ROUTE_ELDR_COST;
    g.n_rates = r->rate > 0 ? 1 : 0;
    g.rates[0] = r->rate;
    if (r->output_tokens)
        g.cfg.output_tokens = r->output_tokens;
    g.reuse = &s->g;            /* the same splits and fits: not fitted again */
    grid_result res;
    if (grid_run(&g, &res, err, errlen) < 0)
        return cli_fail(o->cmd, "%s: regime %s: %s", o->trace, r->what, err);
    /* one comparison fixed in advance: the verdict's rule, no correction */
    for (int i = 0; i < res.n; i++)
        if (res.rows[i].kind == e->kind) {
            verdict_cmp c;
            verdict_compare(&res, i, 1, &o->vo, &c);
            if (c.p50_base < 0)
                continue;
            r->vs = c.p50;
            r->best = res.rows[c.p50_base].kind;
            r->why = c.why;
            r->holds = c.why == VERDICT_OK;
            r->ran = 1;
        }
    grid_result_free(&res);
    return 0;
}

static int run_regimes(const sweep_opts *o, sweep_state *s, const model_fit_opts *fo,
                       const grid_row *e, regime *rg)
{
    char err[ELDR_ERRLEN];
    memset(rg, 0, N_REGIMES * sizeof *rg);
    rg[0].key = "half_rate";
    rg[1].key = "double_rate";
    rg[2].key = "shortest_output";
    for (int i = 0; i < 2; i++) {
        rg[i].rate = e->rate * (i ? 2 : 0.5);
        snprintf(rg[i].what, sizeof rg[i].what, "%g req/s (%s)", rg[i].rate, i ? "2 x" : "1/2 x");
        if (e->rate <= 0)
            snprintf(rg[i].skip, sizeof rg[i].skip, "the trace's own arrivals: give --rate to "
                     "vary the rate");
    }
    int32_t shortest = s->shortest;
    rg[2].rate = e->rate;
    rg[2].output_tokens = shortest;
    snprintf(rg[2].what, sizeof rg[2].what, "output %d tokens", (int)shortest);
    if (shortest <= 0)
        snprintf(rg[2].skip, sizeof rg[2].skip, "the trace has no decode_tokens");
    else if (o->output_tokens && o->output_tokens <= shortest)
        snprintf(rg[2].skip, sizeof rg[2].skip, "--output-tokens %lld is already as short",
                 o->output_tokens);
    for (int i = 0; i < N_REGIMES; i++) {
        if (rg[i].skip[0])
            continue;
        int rc = run_regime(o, s, fo, e, &rg[i], err, sizeof err);
        if (rc)
            return rc;
    }
    return 0;
}

/* Where the pick holds, in one line: "holds at 60 req/s with the
 * trace's output lengths; stops holding at 30 req/s (1/2 x)". */
static void regime_summary(const sweep_opts *o, const grid_row *e, int wins, const regime *rg,
                           char *buf, size_t n)
{
    char rate[48], fails[160] = "", gains[160] = "";
    if (e->rate > 0)
        snprintf(rate, sizeof rate, "%g req/s", e->rate);
    else
        snprintf(rate, sizeof rate, "the trace's arrivals");
    for (int i = 0; i < N_REGIMES; i++) {
        if (!rg[i].ran)
            continue;
        char *dst = rg[i].holds ? gains : fails;
        size_t len = strlen(dst);
        snprintf(dst + len, sizeof fails - len, "%s%s", len ? ", " : "", rg[i].what);
    }
    const char *out = o->output_tokens ? "the given output length" : "the trace's output lengths";
    if (wins && fails[0])
        snprintf(buf, n, "holds at %s with %s; stops holding at %s", rate, out, fails);
    else if (wins)
        snprintf(buf, n, "holds at %s with %s%s%s", rate, out, gains[0] ? ", and at " : "",
                 gains);
    else
        snprintf(buf, n, "no win at %s with %s%s%s", rate, out,
                 gains[0] ? "; the closest setting would hold at " : "", gains);
}

static void print_regimes(const sweep_opts *o, const grid_result *g, const verdict *a,
                          const regime *rg)
{
    const grid_row *e = &g->rows[a->setting];
    char name[64];
    if (e->kind == ROUTE_ELDR_COST)
        snprintf(name, sizeof name, "eldr-cost, K %d (", e->K);
    else
        snprintf(name, sizeof name, "tau %g, K %d (%s; ", e->tau, e->K,
                 route_kind_name(e->kind));
    printf("regime of %s%srerun beside the baselines, 95%% CI over %d seeds; holds = it "
           "wins there by the same rule, one comparison, no correction):\n",
           a->answer == VERDICT_WIN ? "" : "the closest, ", name, g->n_seeds);
    for (int i = 0; i < N_REGIMES; i++) {
        if (!rg[i].ran) {
            printf("  %-22s -  (%s)\n", rg[i].what, rg[i].skip[0] ? rg[i].skip : "no result");
            continue;
        }
        char ci[32];
        fmt_pm(ci, sizeof ci, &rg[i].vs, "%.1f");
        printf("  %-22s TPOT p50 %+.1f%% %s vs %s: %s%s%s\n", rg[i].what, rg[i].vs.mean, ci,
               route_kind_name(rg[i].best), rg[i].holds ? "holds" : "does not hold",
               rg[i].holds ? "" : ", ", rg[i].holds ? "" : verdict_why_name(rg[i].why));
    }
    char sum[400];
    regime_summary(o, e, a->answer == VERDICT_WIN, rg, sum, sizeof sum);
    printf("  %s\n", sum);
}

static json_t *regimes_json(const sweep_opts *o, const grid_result *g, const verdict *a,
                            const regime *rg)
{
    json_t *arr = json_array();
    for (int i = 0; i < N_REGIMES; i++) {
        json_t *r = json_object();
        json_object_set_new(r, "condition", json_string(rg[i].key));
        json_object_set_new(r, "text", json_string(rg[i].what));
        json_object_set_new(r, "rate", rg[i].rate > 0 ? json_real(rg[i].rate)
                                                      : json_string("trace"));
        json_object_set_new(r, "output_tokens", rg[i].output_tokens
                                                    ? json_integer(rg[i].output_tokens)
                                                    : json_string("trace"));
        json_object_set_new(r, "ran", json_boolean(rg[i].ran));
        if (rg[i].ran) {
            json_object_set_new(r, "vs_best_baseline_pct", cli_num_json(rg[i].vs.mean));
            json_object_set_new(r, "ci95", cli_ci_json(&rg[i].vs));
            json_object_set_new(r, "best_baseline", json_string(route_kind_name(rg[i].best)));
            json_object_set_new(r, "holds", json_boolean(rg[i].holds));
            json_object_set_new(r, "why", json_string(verdict_why_name(rg[i].why)));
        } else {
            json_object_set_new(r, "why_not", json_string(rg[i].skip));
        }
        json_array_append_new(arr, r);
    }
    char sum[400];
    regime_summary(o, &g->rows[a->setting], a->answer == VERDICT_WIN, rg, sum, sizeof sum);
    json_t *o2 = json_object();
    json_object_set_new(o2, "setting", json_integer(a->setting));
    json_object_set_new(o2, "conditions", arr);
    json_object_set_new(o2, "text", json_string(sum));
    return o2;
}

static void print_footer(const sweep_opts *o, const sweep_state *s)
{
    char d[160];
    split_describe(&s->rows, d, sizeof d);
    const model_t *m = NULL;
    for (int i = 0; i < s->g.n_models && !m; i++)
        m = s->g.models[i];
    char cov[256];
    grid_ci_covers(s->g.n_seeds, (uint64_t)o->seed, s->g.resplit, &o->split, NULL, cov,
                   sizeof cov);
    printf("%s%s; %s%s", d, s->g.resplit ? " (the first seed's)" : "", cov,
           s->g.n_seeds == 1 ? " (--seeds 5 for one)" : "");
    if (m)
        printf("; variant %s, %d layers", sig_variant_name(m->recipe.variant),
               m->recipe.n_layers);
    if (o->csv)
        printf("; csv %s", o->csv);
    printf("; %.2f s\n", s->g.seconds);
    if (!o->advise) {           /* advise says it in its conditions */
        char tp[200];
        grid_throughput_phrase(&s->g, tp, sizeof tp);
        printf("%s\n", tp);
    }
    if (o->rate_default)
        printf("rate: %g req/s, the default (%s has no arrival_s; --rate LIST to change)\n",
               SIM_DEFAULT_RATE, o->trace);
}

/* One verdict (verdict.h) in words: advise has one, sweep one per K. */
typedef struct vwords {
    verdict v;
    verdict_text t;
} vwords;

static void words_of(const grid_result *g, vwords *w)
{
    verdict_words(g, &w->v, &w->t);
}

/* What advise prints beside the grid. */
typedef struct advise_out {
    vwords w;
    char conditions[900];
    regime rg[N_REGIMES];
    int have_regime;
} advise_out;

/* sweep: a verdict for each K of the grid (the fleet's K fixed in each) */
typedef struct sweep_verdicts {
    vwords w[GRID_MAX_LIST];
    int n;
} sweep_verdicts;

static json_t *ci_or_null(const grid_stat *s)
{
    return isfinite(s->lo) ? cli_ci_json(s) : json_null();
}

static json_t *verdict_json(const grid_result *g, const vwords *w)
{
    const verdict *v = &w->v;
    json_t *o = json_object();
    json_object_set_new(o, "answer", json_string(verdict_answer_name(v->answer)));
    json_object_set_new(o, "why", json_string(verdict_why_name(v->why)));
    json_object_set_new(o, "head", json_string(w->t.head));
    json_object_set_new(o, "reason", json_string(w->t.reason));
    json_object_set_new(o, "rule", json_string(w->t.rule));
    json_object_set_new(o, "K", v->opts.K ? json_integer(v->opts.K) : json_string("every"));
    json_object_set_new(o, "grid_index", json_integer(v->row));
    json_object_set_new(o, "setting", v->setting >= 0 ? json_integer(v->setting) : json_null());
    json_object_set_new(o, "baseline", v->baseline >= 0
                                           ? json_string(route_kind_name(g->rows[v->baseline].kind))
                                           : json_null());
    char base[96];
    verdict_baselines(g, base, sizeof base);
    json_object_set_new(o, "baselines", json_string(base));
    json_object_set_new(o, "comparisons", json_integer(v->n_compared));
    json_object_set_new(o, "wins", json_integer(v->n_wins));
    json_object_set_new(o, "p50_gain_pct", json_real(v->opts.p50_gain_pct));
    json_object_set_new(o, "p99_margin_pct", json_real(v->opts.p99_loss_pct));
    json_object_set_new(o, "tps_margin_pct", json_real(v->opts.tps_loss_pct));
    if (v->setting >= 0) {
        json_object_set_new(o, "p50_change_pct", cli_num_json(v->cmp.p50.mean));
        json_object_set_new(o, "p50_ci_corrected", ci_or_null(&v->cmp.p50));
        json_object_set_new(o, "p99_change_pct", cli_num_json(v->cmp.p99.mean));
        json_object_set_new(o, "p99_ci_corrected", ci_or_null(&v->cmp.p99));
        json_object_set_new(o, "tps_change_pct", cli_num_json(v->cmp.tps.mean));
        json_object_set_new(o, "tps_ci_corrected", ci_or_null(&v->cmp.tps));
    }
    char tp[200];
    grid_throughput_phrase(g, tp, sizeof tp);
    json_object_set_new(o, "throughput", json_string(tp));
    return o;
}

static void print_json(const sweep_opts *o, const grid_result *g, const split_rows *rows,
                       const advise_out *ad, const sweep_verdicts *sv)
{
    const verdict *a = ad ? &ad->w.v : NULL;
    json_t *grid = json_array();
    for (int i = 0; i < g->n; i++)
        json_array_append_new(grid, row_json(g, i));
    json_t *root = json_object();
    json_object_set_new(root, "split", cli_split_json(rows));
    json_object_set_new(root, "calib_rows", json_integer(rows->n_calib));
    json_object_set_new(root, "eval_rows", json_integer(rows->n_eval));
    json_object_set_new(root, "seeds", json_integer(g->n_seeds));
    json_object_set_new(root, "first_seed", json_integer(o->seed));
    char cov[256];
    grid_ci_covers(g->n_seeds, (uint64_t)o->seed, g->resplit, &o->split, NULL, cov, sizeof cov);
    json_object_set_new(root, "ci_covers", json_string(cov));
    json_object_set_new(root, "split_redrawn", json_boolean(g->resplit));
    json_object_set_new(root, "rate_default", json_boolean(o->rate_default));
    json_object_set_new(root, "seconds", json_real(g->seconds));
    const model_t *m = NULL;
    for (int i = 0; i < g->n_models && !m; i++)
        m = g->models[i];
    if (m) {
        json_t *mask = json_array();
        for (int i = 0; i < m->recipe.n_layers; i++)
            json_array_append_new(mask, json_integer(m->recipe.layers[i]));
        json_object_set_new(root, "variant", json_string(sig_variant_name(m->recipe.variant)));
        json_object_set_new(root, "mask", mask);
    }
    if (a) {
        const grid_row *r = &g->rows[a->row];
        json_t *rec = json_object();
        json_object_set_new(rec, "policy", json_string(route_kind_name(r->kind)));
        json_object_set_new(rec, "tau", cli_num_json(r->tau));
        json_object_set_new(rec, "workers", json_integer(r->K));
        json_object_set_new(rec, "rate", r->rate > 0 ? json_real(r->rate) : json_string("trace"));
        json_object_set_new(rec, "tpot_p50_ms", cli_num_json(r->tpot_p50.mean));
        json_object_set_new(rec, "tpot_p50_ms_ci95", cli_ci_json(&r->tpot_p50));
        json_object_set_new(rec, "tpot_p99_ms", cli_num_json(r->tpot_p99.mean));
        json_object_set_new(rec, "tokens_per_s", cli_num_json(r->tokens_per_s.mean));
        json_object_set_new(rec, "eldr_beats_baseline", json_boolean(a->answer == VERDICT_WIN));
        json_object_set_new(rec, "grid_index", json_integer(a->row));
        json_object_set_new(rec, "sentence", json_string(ad->w.t.reason));
        json_object_set_new(rec, "conditions", json_string(ad->conditions));
        json_object_set_new(rec, "correction", json_string("bonferroni"));
        json_object_set_new(root, "recommendation", rec);
        json_object_set_new(root, "verdict", verdict_json(g, &ad->w));
        json_object_set_new(root, "grid", grid);
        if (ad->have_regime)
            json_object_set_new(root, "regime", regimes_json(o, g, a, ad->rg));
    } else {
        json_object_set_new(root, "rows", grid);
        json_object_set_new(root, "csv", o->csv ? json_string(o->csv) : json_null());
        json_t *vs = json_array();
        for (int i = 0; sv && i < sv->n; i++)
            json_array_append_new(vs, verdict_json(g, &sv->w[i]));
        json_object_set_new(root, "verdicts", vs);
    }
    cli_print_json(root);
}

/* The conditions the grid's numbers hold under, in one line. */
static void conditions_text(const sweep_opts *o, const grid_result *g, const grid_row *r,
                            char *buf, size_t n)
{
    char rate[80], cov[256], out[48], tp[200];
    if (r->rate > 0)
        snprintf(rate, sizeof rate, "Poisson %g req/s%s", r->rate,
                 o->rate_default ? " (the default: no arrival_s)" : "");
    else
        snprintf(rate, sizeof rate, "the trace's arrivals");
    if (o->output_tokens)
        snprintf(out, sizeof out, "%lld output tokens each", o->output_tokens);
    else
        snprintf(out, sizeof out, "the trace's output lengths");
    grid_ci_covers(g->n_seeds, (uint64_t)o->seed, g->resplit, &o->split, NULL, cov, sizeof cov);
    grid_throughput_phrase(g, tp, sizeof tp);
    snprintf(buf, n, "%s, %s, K %d%s, max batch %lld; %s; %s", rate, out, r->K,
             o->compare_fleets ? " (fleets compared)" : o->n_workers_given ? " (--workers)"
             : o->model ? " (the model's)" : " (the default fleet: --workers N for yours)",
             o->max_batch, cov, tp);
}

static int advise_run(const sweep_opts *o, sweep_state *s, const model_fit_opts *fo,
                      advise_out *ad)
{
    verdict *a = &ad->w.v;
    verdict_opts vo = o->vo;
    vo.K = o->compare_fleets ? 0 : o->workers[0];
    char err[ELDR_ERRLEN];
    if (verdict_decide(&s->g, &vo, a, err, sizeof err) < 0)
        return cli_fail(o->cmd, "%s: %s", o->trace, err);
    words_of(&s->g, &ad->w);
    int at = a->setting >= 0 ? a->setting : a->row;
    conditions_text(o, &s->g, &s->g.rows[at], ad->conditions, sizeof ad->conditions);
    if (a->setting < 0)
        return 0;
    cli_progress bar;
    cli_progress_start(&bar, "regime");
    int rc = run_regimes(o, s, fo, &s->g.rows[a->setting], ad->rg);
    cli_progress_done(&bar);
    ad->have_regime = rc == 0;
    return rc;
}

/* sweep: one verdict per K of the grid. */
static int sweep_verdicts_run(const sweep_opts *o, const grid_result *g, sweep_verdicts *sv)
{
    char err[ELDR_ERRLEN];
    sv->n = 0;
    for (int i = 0; i < o->n_workers; i++) {
        verdict_opts vo = o->vo;
        vo.K = (int)o->workers[i];
        vwords *w = &sv->w[sv->n];
        if (verdict_decide(g, &vo, &w->v, err, sizeof err) < 0)
            return cli_fail(o->cmd, "%s: %s", o->trace, err);
        words_of(g, w);
        sv->n++;
    }
    return 0;
}

static void print_verdict(const vwords *w)
{
    printf("verdict: %s: %s\n", w->t.head, w->t.reason);
}

static int run(int argc, char **argv, int advise)
{
    sweep_opts o;
    int rc = parse_args(argc, argv, &o, advise);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    char err[ELDR_ERRLEN];
    sweep_state s = {0};
    model_fit_opts fo;
    advise_out *ad = advise ? calloc(1, sizeof *ad) : NULL;
    sweep_verdicts *sv = advise ? NULL : calloc(1, sizeof *sv);
    if (advise ? !ad : !sv)
        return cli_error(o.cmd, "out of memory");
    rc = load_inputs(&o, &s, err, sizeof err);
    if (!rc)
        rc = recipe_options(&o, s.file_model, &fo, &s.layer_list, s.calib);
    if (!rc)
        rc = run_grid(&o, &s, &fo, err, sizeof err);
    if (!rc && advise)
        rc = advise_run(&o, &s, &fo, ad);
    if (!rc && !advise)
        rc = sweep_verdicts_run(&o, &s.g, sv);
    if (!rc && o.csv && write_csv(o.csv, &s.g, err, sizeof err) < 0)
        rc = cli_fail(o.cmd, "%s", err);
    if (!rc && o.json) {
        print_json(&o, &s.g, &s.rows, ad, sv);
    } else if (!rc) {
        print_table(&s.g, advise ? &ad->w.v : NULL);
        print_footer(&o, &s);
        if (advise) {
            print_verdict(&ad->w);
            printf("rule: %s\n", ad->w.t.rule);
            printf("conditions: %s\n", ad->conditions);
            if (ad->have_regime)
                print_regimes(&o, &s.g, &ad->w.v, ad->rg);
        } else {
            for (int i = 0; i < sv->n; i++)
                print_verdict(&sv->w[i]);
            if (sv->n) {   /* the rule once: each K is judged on its own */
                verdict each = sv->w[0].v;
                char rule[640];
                each.opts.K = -1;
                verdict_rule(&s.g, &each, rule, sizeof rule);
                printf("rule: %s\n", rule);
            }
        }
    }
    free(ad);
    free(sv);
    state_free(&s);
    return rc;
}

int cmd_sweep(int argc, char **argv)
{
    return run(argc, argv, 0);
}

int cmd_advise(int argc, char **argv)
{
    return run(argc, argv, 1);
}
