/* cmd_sim.c - `eldr sim trace.h5 [-m model.h5] --policy LIST ...`: the
 * what-if decode routing simulator (src/core/sim.h, docs/simulator.md).
 *
 * Splits the trace into calibration rows (the first ones) and evaluation
 * rows, gets a model (the given one, or one fitted on the calibration rows
 * with the default recipe), builds one workload of the evaluation rows and
 * runs every policy on it, then prints one table (or JSON) and, with
 * --csv, writes the time series. With --prefix-mode, ELDR runs once per
 * prefix-caching mode (src/core/sim_prefix.h) on the same workload, and
 * the report adds the prefix cache's hit rate and each mode's agreement
 * with cold signatures. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomicfile.h"
#include "cli.h"
#include "cli_sim.h"
#include "costmodel.h"
#include "err.h"
#include "grid.h"
#include "model.h"
#include "par.h"
#include "route.h"
#include "sim.h"
#include "sim_prefix.h"
#include "trace.h"
#include "trace_budget.h"
#include "trace_tokens.h"

#define CMD "sim"
#define DEFAULT_POLICIES "eldr,random,rr,jsq,p2c"

static void usage(void)
{
    printf(
        "usage: eldr sim TRACE.h5 [-m MODEL.h5] [--policy LIST] [options]\n"
        "\n"
        "Simulate K decode workers with continuous batching under each routing\n"
        "policy, on the same arrivals and the same expert activations, and report\n"
        "TPOT, queue wait, distinct experts per step, expert reuse and load\n"
        "imbalance. Step time comes from the cost model (docs/cost-model.md).\n"
        "A seeded random draw of the trace's rows is the calibration split (the\n"
        "model is fitted there when -m is not given; domain shares come from\n"
        "there); the other rows are simulated. With --seeds N every policy runs\n"
        "under N arrival/activation seeds and the table shows means with 95%%\n"
        "confidence intervals. \"vs best\" compares with the best of jsq, rr, p2c\n"
        "(the baselines of eldr advise and eldr dash); random and domain run for\n"
        "reference only. See docs/simulator.md.\n"
        "\n"
        "options:\n"
        "  -m, --model FILE       routing model (eldr-model); default: fit one on the\n"
        "                         calibration rows (count_idf, greedy layers, K)\n"
        "  --policy LIST          of eldr, eldr-online, eldr-cost, random, rr, jsq, p2c,\n"
        "                         domain (default " DEFAULT_POLICIES "); eldr-cost:\n"
        "                         the least predicted step-time increase (the cost\n"
        "                         rule, docs/routing.md; needs no model)\n"
        "  --refit-every S        eldr-online: refit the centroids every S seconds of\n"
        "                         simulated time (default 2.5)\n"
        "  --refit-window W       eldr-online: on the signatures of the last W seconds\n"
        "                         (default 5); it starts from the model's centroids\n"
        "  --workers K            decode workers (default: the model's K, else 4)\n"
        "  --tau T                locality band width (default: the model's, else 0.1)\n"
        "  --no-min2              turn off the min-two band rule\n"
        "  --rate R               Poisson arrivals at R requests/s\n"
        "  --concurrency C        closed loop: C requests in the system\n"
        "                         (default without either: the trace's arrival_s, or\n"
        "                         Poisson 20 req/s when it has none, said in the report)\n"
        "  --output-tokens N      tokens each request decodes (default: its\n"
        "                         decode_tokens)\n"
        "  --max-batch B          requests decoding at once per worker (default 256)\n"
        CLI_SPLIT_HELP
        "  --cost FILE            cost model file from `eldr costfit` (default: the\n"
        "                         documented defaults)\n"
        "  --sample-pool P        sampled token rows per request when the trace has no\n"
        "                         token-level experts (default 32)\n"
        "  --seed S               arrivals, sampled activations, seeded policies and\n"
        "                         the fit (default 1)\n"
        "  --seeds N              run every policy under seeds S, S+1, ... S+N-1\n"
        "                         (common random numbers across policies within a\n"
        "                         seed); report means and 95%% confidence intervals\n"
        "                         (default 1: no interval)\n"
        "  --threads T            policies (and seeds) simulated at once, and the\n"
        "                         sampled activations drawn on as many (default: the\n"
        "                         online CPUs); the results do not depend on it\n"
        "\n"
        "prefix caching what-if (needs tokens/block_hashes and tokens/prefill_experts,\n"
        "as written by eldr gen --prefix-groups G --tokens):\n"
        "  --prefix-mode LIST     of cold, cache, uncached, or all: run eldr once per\n"
        "                         mode, routing with signatures from the full prefill\n"
        "                         counts (cold), from cached block counts plus the\n"
        "                         computed tokens' (cache: equals cold exactly), or from\n"
        "                         the computed tokens alone (uncached: no signature\n"
        "                         cache). Rows eldr-MODE; adds the prefix hit rate, the\n"
        "                         cached share of prompt tokens, and each mode's\n"
        "                         signature cosine and same-worker share against cold\n"
        "  --prefix-cache BLOCKS  KV cache (= signature cache) capacity per prefill\n"
        "                         worker, LRU, in blocks (default 4096; 0 = no cache)\n"
        "  --prefill-workers P    prefill workers, each with its own cache (default 1)\n"
        "  --prefill-route R      rr (request i to worker i mod P, default) or prefix\n"
        "                         (by the first block's hash: a prefix group meets\n"
        "                         its own cache)\n"
        "  --block-size B         tokens per KV block of the trace's hashes (default 16)\n"
        "\n"
        "  --csv DIR              write time series: POLICY_steps.csv, _inflight.csv,\n"
        "                         _requests.csv, _heat.csv and summary.csv\n"
        "  --require-full-routing refuse a trace whose prompts lost rows of routing\n"
        "                         (prefill_unrouted_tokens, vLLM's prefix cache)\n"
        "  --max-memory BYTES     bound what is loaded (K, M, G suffixes; default half\n"
        "                         of physical memory): simulated rows beyond it are\n"
        "                         sampled by whole chunks, and the output says so;\n"
        "                         the sampled activation pools are kept only in what\n"
        "                         it leaves (else drawn at each admission: the same\n"
        "                         results, said too). Recorded token rows are read\n"
        "                         from the file as requests are admitted\n"
        "  --json                 machine-readable result on stdout\n"
        "  -h, --help             this text\n"
        "\n"
        "example: eldr sim ../shared/data/gptoss20b-routing.h5 --workers 4 --rate 4\n"
        "         eldr sim prefix.h5 --prefix-mode all --prefix-cache 512 --rate 40\n");
}

typedef struct sim_args {
    const char *trace, *model_path, *cost_path, *csv_dir;
    int kinds[ROUTE_N_KINDS], n_kinds;
    int workers;               /* 0 = default */
    double tau;                /* NAN = default */
    int min2, json, require_full;
    split_spec split;
    int seeds;
    int threads;               /* runs at once (0: the online CPUs) */
    int rate_default;          /* the trace has no arrival_s: SIM_DEFAULT_RATE */
    sim_config cfg;
    int modes[SIM_PREFIX_N_MODES], n_modes;   /* --prefix-mode, in cold..uncached order */
    int prefix_opts;                          /* a prefix option was given */
    sim_prefix_config prefix;
    size_t max_memory;                        /* --max-memory */
} sim_args;

static int parse_policies(sim_args *a, const char *list)
{
    char buf[256];
    if (strlen(list) >= sizeof buf)
        return cli_fail(CMD, "--policy: list too long");
    strcpy(buf, list);
    a->n_kinds = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int k = route_kind_parse(tok);
        if (k < 0)
            return cli_fail(CMD, "--policy: '%s' is not a policy (eldr, eldr-online, eldr-cost, "
                            "random, rr, jsq, p2c, domain)", tok);
        for (int i = 0; i < a->n_kinds; i++)
            if (a->kinds[i] == k)
                return cli_fail(CMD, "--policy: '%s' appears twice", tok);
        a->kinds[a->n_kinds++] = k;
    }
    if (a->n_kinds == 0)
        return cli_fail(CMD, "--policy: no policy given");
    return 0;
}

static int parse_modes(sim_args *a, const char *list)
{
    char bad[64];
    int on[SIM_PREFIX_N_MODES] = {0};
    if (sim_prefix_modes_parse(list, on, bad, sizeof bad))
        return cli_fail(CMD, "--prefix-mode: '%s' is not a mode (cold, cache, uncached, "
                        "all)", bad);
    a->n_modes = 0;
    for (int m = 0; m < SIM_PREFIX_N_MODES; m++)
        if (on[m])
            a->modes[a->n_modes++] = m;
    if (a->n_modes == 0)
        return cli_fail(CMD, "--prefix-mode: no mode given");
    return 0;
}

enum { O_POLICY = 256, O_WORKERS, O_TAU, O_NOMIN2, O_RATE, O_CONC, O_OUT, O_BATCH,
       O_SPLIT, O_COST, O_POOL, O_SEED, O_CSV, O_JSON, O_PMODE, O_PCACHE, O_PWORKERS,
       O_PROUTE, O_BSIZE, O_SPLITMODE, O_SPLITSEED, O_SEEDS, O_REVERY, O_RWINDOW, O_FULL,
       O_THREADS, O_MAXMEM };

/* Each *_option below reads option c (getopt_long's answer) with its
 * argument: 0 when read, 1 when c is not one of its options, else the
 * exit status of the error. */

/* The workload: arrivals, lengths, batch, sampling, seed, cost, refits. */
static int workload_option(int c, const char *arg, sim_args *a)
{
    sim_config *cfg = &a->cfg;
    long long v;
    switch (c) {
    case O_RATE:
        cfg->arrivals = SIM_ARRIVE_POISSON;
        return cli_parse_double(CMD, "--rate", arg, 1e-9, 1e12, &cfg->rate) ? CLI_BADINPUT : 0;
    case O_CONC:
        if (cli_parse_int(CMD, "--concurrency", arg, 1, 1 << 30, &v))
            return CLI_BADINPUT;
        cfg->concurrency = (int)v;
        cfg->arrivals = SIM_ARRIVE_CLOSED;
        return 0;
    case O_OUT:
        if (cli_parse_int(CMD, "--output-tokens", arg, 1, 1 << 30, &v))
            return CLI_BADINPUT;
        cfg->output_tokens = (int32_t)v;
        return 0;
    case O_BATCH:
        if (cli_parse_int(CMD, "--max-batch", arg, 1, 1 << 20, &v))
            return CLI_BADINPUT;
        cfg->max_batch = (int)v;
        return 0;
    case O_POOL:
        if (cli_parse_int(CMD, "--sample-pool", arg, 1, 1 << 20, &v))
            return CLI_BADINPUT;
        cfg->sample_pool = (int)v;
        return 0;
    case O_SEED:
        if (cli_parse_int(CMD, "--seed", arg, 0, INT64_MAX, &v))
            return CLI_BADINPUT;
        cfg->seed = (uint64_t)v;
        return 0;
    case O_REVERY:
        return cli_parse_double(CMD, "--refit-every", arg, 1e-6, 1e9, &cfg->refit_every)
                   ? CLI_BADINPUT : 0;
    case O_RWINDOW:
        return cli_parse_double(CMD, "--refit-window", arg, 1e-6, 1e9, &cfg->refit_window)
                   ? CLI_BADINPUT : 0;
    case O_COST: a->cost_path = arg; return 0;
    default: return 1;
    }
}

/* The prefix-caching what-if: --prefix-mode and the options it needs. */
static int prefix_option(int c, const char *arg, sim_args *a)
{
    long long v;
    int rc = 0;
    switch (c) {
    case O_PMODE: return parse_modes(a, arg);
    case O_PCACHE:
        if (!(rc = cli_parse_int(CMD, "--prefix-cache", arg, 0, 1LL << 40, &v)))
            a->prefix.capacity = v;
        break;
    case O_PWORKERS:
        if (!(rc = cli_parse_int(CMD, "--prefill-workers", arg, 1, 1 << 16, &v)))
            a->prefix.workers = (int)v;
        break;
    case O_PROUTE:
        if ((c = sim_prefill_route_parse(arg)) < 0)
            return cli_fail(CMD, "--prefill-route: '%s' is not rr or prefix", arg);
        a->prefix.route = (sim_prefill_route)c;
        break;
    case O_BSIZE:
        if (!(rc = cli_parse_int(CMD, "--block-size", arg, 1, 255, &v)))
            a->prefix.block_size = (int)v;
        break;
    default: return 1;
    }
    a->prefix_opts = 1;
    return rc ? CLI_BADINPUT : 0;
}

/* What runs and how it is reported: model, policies, workers, tau,
 * split, seeds, threads, outputs. */
static int run_option(int c, const char *arg, sim_args *a)
{
    long long v;
    switch (c) {
    case 'm': a->model_path = arg; return 0;
    case O_POLICY: return parse_policies(a, arg);
    case O_WORKERS:
        if (cli_parse_int(CMD, "--workers", arg, 1, ROUTE_MAX_WORKERS, &v))
            return CLI_BADINPUT;
        a->workers = (int)v;
        return 0;
    case O_TAU:
        return cli_parse_double(CMD, "--tau", arg, 0, ROUTE_TAU_MAX, &a->tau) ? CLI_BADINPUT : 0;
    case O_NOMIN2: a->min2 = 0; return 0;
    case O_SPLIT:
    case O_SPLITMODE:
    case O_SPLITSEED:
        return cli_split_option(CMD, c == O_SPLIT ? "--calib-split" : c == O_SPLITMODE
                                ? "--split" : "--split-seed", arg, &a->split);
    case O_SEEDS:
        if (cli_parse_int(CMD, "--seeds", arg, 1, GRID_MAX_SEEDS, &v))
            return CLI_BADINPUT;
        a->seeds = (int)v;
        return 0;
    case O_THREADS:
        if (cli_parse_int(CMD, "--threads", arg, 1, 64, &v))
            return CLI_BADINPUT;
        a->threads = (int)v;
        return 0;
    case O_CSV: a->csv_dir = arg; return 0;
    case O_JSON: a->json = 1; return 0;
    case O_FULL: a->require_full = 1; return 0;
    case O_MAXMEM:
        return cli_parse_bytes(CMD, "--max-memory", arg, &a->max_memory) ? CLI_BADINPUT : 0;
    default: return 1;
    }
}

/* The options that exclude or need each other, once all are read. */
static int check_options(sim_args *a)
{
    if (a->cfg.rate > 0 && a->cfg.concurrency > 0)
        return cli_fail(CMD, "--rate and --concurrency exclude each other");
    /* one seed draws the arrivals and the split unless --split-seed pins it */
    if (!a->split.pinned)
        a->split.seed = a->cfg.seed;
    if (a->prefix_opts && !a->n_modes)
        return cli_fail(CMD, "--prefix-cache, --prefill-workers, --prefill-route and "
                        "--block-size need --prefix-mode");
    int eldr = 0;
    for (int i = 0; i < a->n_kinds; i++)
        eldr |= a->kinds[i] == ROUTE_ELDR;
    if (a->n_modes && !eldr)
        return cli_fail(CMD, "--prefix-mode: the eldr policy must be in --policy");
    if (a->n_modes && a->seeds > 1)
        return cli_fail(CMD, "--seeds %d: the prefix-caching what-if runs one seed; drop "
                        "--seeds or --prefix-mode", a->seeds);
    return 0;
}

static int parse_options(int argc, char **argv, sim_args *a)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"policy", required_argument, 0, O_POLICY},
        {"workers", required_argument, 0, O_WORKERS}, {"tau", required_argument, 0, O_TAU},
        {"no-min2", no_argument, 0, O_NOMIN2}, {"rate", required_argument, 0, O_RATE},
        {"concurrency", required_argument, 0, O_CONC},
        {"output-tokens", required_argument, 0, O_OUT},
        {"max-batch", required_argument, 0, O_BATCH},
        {"calib-split", required_argument, 0, O_SPLIT}, {"cost", required_argument, 0, O_COST},
        {"sample-pool", required_argument, 0, O_POOL}, {"seed", required_argument, 0, O_SEED},
        {"csv", required_argument, 0, O_CSV}, {"json", no_argument, 0, O_JSON},
        {"require-full-routing", no_argument, 0, O_FULL},
        {"prefix-mode", required_argument, 0, O_PMODE},
        {"prefix-cache", required_argument, 0, O_PCACHE},
        {"prefill-workers", required_argument, 0, O_PWORKERS},
        {"prefill-route", required_argument, 0, O_PROUTE},
        {"block-size", required_argument, 0, O_BSIZE},
        {"split", required_argument, 0, O_SPLITMODE},
        {"split-seed", required_argument, 0, O_SPLITSEED},
        {"seeds", required_argument, 0, O_SEEDS},
        {"threads", required_argument, 0, O_THREADS},
        {"max-memory", required_argument, 0, O_MAXMEM},
        {"refit-every", required_argument, 0, O_REVERY},
        {"refit-window", required_argument, 0, O_RWINDOW},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    int c, rc;
    sim_config_default(&a->cfg);
    sim_prefix_config_default(&a->prefix);
    a->tau = NAN;
    a->min2 = 1;
    split_spec_default(&a->split);
    a->max_memory = trace_budget_default();
    a->seeds = 1;
    if ((rc = parse_policies(a, DEFAULT_POLICIES)))
        return rc;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage();
            return -1;
        }
        if (c == ':')
            return cli_usage_error(CMD, "option %s needs a value", argv[optind - 1]);
        if ((rc = run_option(c, optarg, a)) == 1 && (rc = workload_option(c, optarg, a)) == 1)
            rc = prefix_option(c, optarg, a);
        if (rc == 1)
            return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        if (rc)
            return rc;
    }
    if (optind != argc - 1)
        return cli_usage_error(CMD, optind >= argc ? "no trace file given"
                                                   : "one trace file expected");
    a->trace = argv[optind];
    return check_options(a);
}

static int wants(const sim_args *a, route_kind k)
{
    for (int i = 0; i < a->n_kinds; i++)
        if (a->kinds[i] == (int)k)
            return 1;
    return 0;
}

/* eldr or eldr-online: a model is needed. */
static int wants_model(const sim_args *a)
{
    return wants(a, ROUTE_ELDR) || wants(a, ROUTE_ELDR_ONLINE);
}

/* ---- the inputs: trace split, model, label shares ---- */

typedef struct sim_inputs {
    trace_t *all;              /* the whole trace, or (read by rows) its index:
                                * the vectors, no count matrix */
    trace_t *calib, *eval;
    int calib_is_eval;         /* no split: calib is eval, not owned twice */
    trace_header_t h;
    int64_t n_calib;
    split_rows rows;           /* the split: eval rows name the file's rows */
    char sample[96];           /* "sampled N of M rows (budget B)", or "" */
    trace_tokens *tokens;      /* the simulated rows' recorded token rows,
                                * read at admission; NULL: held or none */
    double loaded;             /* bytes the inputs hold (the budget's price) */
    char pools[192];           /* why the activation pools are not kept, or "" */
    model_t *model;
    int fitted;                /* model fitted here */
    int K;
    double tau;
    double *share;             /* [n_labels] calibration label shares */
} sim_inputs;

static void inputs_free(sim_inputs *in)
{
    trace_tokens_close(in->tokens);
    trace_free(in->all);
    if (!in->calib_is_eval)
        trace_free(in->calib);
    trace_free(in->eval);
    split_rows_free(&in->rows);
    model_free(in->model);
    free(in->share);
}

/* The whole trace in memory: the prefix what-if reads every row's token
 * data, and a run that redraws its split per seed draws from every row.
 * Otherwise sim reads an index (the vectors), splits it and loads the
 * calibration and simulated rows alone (docs/memory.md). */
static int needs_all(const sim_args *a)
{
    return a->n_modes || (!a->model_path && grid_should_resplit(&a->split, a->seeds));
}

/* The variant the routing signatures use: the model's, or the fit's. */
static sig_variant variant_of(const sim_inputs *in)
{
    return in->model ? in->model->recipe.variant : SIG_COUNT_IDF;
}

/* Read by rows from an HDF5 trace with recorded decode token rows: they
 * are read from the file as each request is admitted (trace_tokens.h),
 * not loaded; an imported file's are in memory with the rest. */
static int reads_tokens(const sim_args *a, const sim_inputs *in)
{
    return !needs_all(a) && in->h.has_tokens_decode;
}

/* What the simulated rows need: counts, decode token rows (recorded
 * activations; read later when reads_tokens), the gate matrix only for a
 * gate variant, request ids only for the CSV files; never the prefill
 * token rows or decode_probs. */
static unsigned eval_drop(const sim_args *a, const sim_inputs *in)
{
    unsigned drop = TRACE_DROP_PREFILL | TRACE_DROP_PROBS;
    if (reads_tokens(a, in))
        drop |= TRACE_DROP_TOKENS;
    if (!a->csv_dir)
        drop |= TRACE_DROP_IDS;
    if (!sig_variant_uses_gate(variant_of(in)))
        drop |= TRACE_DROP_GATES;
    return drop;
}

/* The whole trace, or what the budget holds of it (a chunk sample). */
static int load_all(sim_args *a, sim_inputs *in)
{
    int rc;
    if ((double)in->h.n * trace_row_bytes(&in->h, 0) <= (double)a->max_memory)
        rc = cli_load_trace(CMD, a->trace, &in->all);   /* with its progress */
    else
        rc = cli_load_within(CMD, a->trace, &in->h, 0, trace_row_bytes(&in->h, 0),
                             a->max_memory, a->cfg.seed, in->sample, sizeof in->sample,
                             &in->all);
    /* the trace, then its split's two copies (split_trace) */
    if (!rc)
        in->loaded = 2.0 * (double)in->all->n * trace_row_bytes(&in->h, 0);
    return rc;
}

/* Bytes the token rows read at admission take at most at once, priced as
 * the budget prices rows: the reader's chunk cache, and the rows of the
 * requests a run holds at once (K workers' batches, each request its mean
 * rows, a byte an id when E <= 256) for every run at once. */
static int tokens_bytes(const sim_args *a, const sim_inputs *in, double *bytes)
{
    const trace_header_t *h = &in->h;
    char err[ELDR_ERRLEN];
    size_t cache;
    *bytes = 0;
    if (!reads_tokens(a, in) || h->n < 1)
        return 0;
    if (trace_tokens_cache_plan(a->trace, &cache, err, sizeof err))
        return cli_fail(CMD, "%s", err);
    double held = (double)in->K * a->cfg.max_batch;
    if (held > (double)in->rows.n_eval)
        held = (double)in->rows.n_eval;
    double row = (double)h->t_decode / (double)h->n * h->L * h->k * (h->E <= 256 ? 1 : 2);
    *bytes = (double)cache + held * row * par_threads(a->threads, a->n_kinds);
    return 0;
}

static int split_trace(const sim_args *a, sim_inputs *in)
{
    char err[ELDR_ERRLEN];
    int rc = cli_split(CMD, in->all, &a->split, 1, &in->rows, &in->calib, &in->eval);
    if (rc)
        return rc;
    in->n_calib = in->rows.n_calib;
    /* no split: calibrate on the simulated rows themselves (in-sample) */
    if (!in->calib && !(in->calib = trace_select(in->all, in->rows.eval, in->rows.n_eval, err,
                                                 sizeof err)))
        return cli_fail(CMD, "%s: %s", a->trace, err);
    return 0;
}

/* Read by rows: the simulated rows (within the budget, after the
 * calibration rows) and the calibration rows in one pass over the file
 * (two would inflate the chunks they share twice), the calibration rows
 * copied out, then the simulated ones kept in place (trace_keep_rows): the
 * index's split names them. */
static int load_parts(sim_args *a, sim_inputs *in)
{
    char err[ELDR_ERRLEN];
    in->n_calib = in->rows.n_calib;
    unsigned drop = eval_drop(a, in);
    double per_row = trace_row_bytes(&in->h, drop);
    double tok_bytes;
    if (tokens_bytes(a, in, &tok_bytes))
        return CLI_BADINPUT;
    double calib_bytes = (double)in->rows.n_calib * per_row + tok_bytes;
    int rc = cli_budget_rows(CMD, a->trace, in->rows.eval, &in->rows.n_eval, per_row,
                             a->max_memory, calib_bytes, a->cfg.seed, in->sample,
                             sizeof in->sample);
    if (rc < 0 || rc > 1)
        return rc;
    /* what the pools are weighed against: the calibration rows twice
     * (read with the others, then copied out) */
    in->loaded = calib_bytes + (double)(in->rows.n_calib + in->rows.n_eval) * per_row;
    /* the union, ascending, and where each part's rows sit in it */
    int64_t nc = in->rows.n_calib, ne = in->rows.n_eval, n = nc + ne;
    int64_t *all = malloc(((size_t)n + 1) * sizeof *all);
    int64_t *cpos = malloc(((size_t)nc + 1) * sizeof *cpos);
    int64_t *epos = malloc(((size_t)ne + 1) * sizeof *epos);
    if (!all || !cpos || !epos) {
        free(all), free(cpos), free(epos);
        return cli_error(CMD, "out of memory");
    }
    for (int64_t i = 0, j = 0, k = 0; k < n; k++) {
        int calib = j >= ne || (i < nc && in->rows.calib[i] < in->rows.eval[j]);
        if (calib)
            cpos[i] = k, all[k] = in->rows.calib[i++];
        else
            epos[j] = k, all[k] = in->rows.eval[j++];
    }
    trace_load_opts lo = {.drop = drop, .rows = all, .n_rows = n};
    rc = cli_load_some(CMD, a->trace, &lo, &in->eval);
    if (rc == 0 && nc > 0 &&
        !(in->calib = trace_select_some(in->eval, cpos, nc, TRACE_DROP_TOKENS, err, sizeof err)))
        rc = cli_fail(CMD, "%s: %s", a->trace, err);
    if (rc == 0 && trace_keep_rows(in->eval, epos, ne, err, sizeof err))
        rc = cli_fail(CMD, "%s: %s", a->trace, err);
    free(all), free(cpos), free(epos);
    if (rc == 0 && nc == 0) {   /* no split: calibrate on the simulated rows */
        in->calib = in->eval;
        in->calib_is_eval = 1;
    }
    if (rc == 0 && reads_tokens(a, in) &&
        trace_tokens_open(a->trace, in->eval, in->rows.eval, &in->tokens, err, sizeof err))
        rc = cli_fail(CMD, "%s", err);
    return rc;
}

static int fit_model(const sim_args *a, sim_inputs *in)
{
    char err[ELDR_ERRLEN];
    model_fit_opts o;
    model_fit_opts_default(&o, in->K);
    o.seed = a->cfg.seed;
    if (!in->calib->decode_counts)
        o.layers = MODEL_LAYERS_ALL;
    if (in->calib->n < in->K)
        return cli_fail(CMD, "%s: %lld calibration rows cannot fit K = %d workers (raise "
                        "--calib-split or lower --workers)", a->trace,
                        (long long)in->calib->n, in->K);
    if (model_fit(in->calib, &o, &in->model, NULL, err, sizeof err))
        return cli_fail(CMD, "%s: fitting on the calibration rows: %s", a->trace, err);
    in->fitted = 1;
    return 0;
}

/* The given model (-m), checked against the trace's header. */
static int load_model(const sim_args *a, sim_inputs *in)
{
    char err[ELDR_ERRLEN];
    in->K = a->workers ? a->workers : 4;
    if (!a->model_path)
        return 0;
    if (model_load(a->model_path, &in->model, err, sizeof err))
        return cli_fail(CMD, "%s", err);
    const model_t *m = in->model;
    const trace_header_t *h = &in->h;
    if (a->workers && a->workers != m->K)
        return cli_fail(CMD, "--workers %d: the model %s has K = %d workers", a->workers,
                        a->model_path, m->K);
    if (m->K > ROUTE_MAX_WORKERS)
        return cli_fail(CMD, "%s: K = %d is above %d workers", a->model_path, m->K,
                        ROUTE_MAX_WORKERS);
    if (!model_fits_geometry(m, h->L, h->E, h->k))
        return cli_fail(CMD, "%s: model geometry %d layers x %d experts top-%d does not match "
                        "the trace's %d x %d top-%d", a->model_path, m->recipe.L, m->recipe.E,
                        m->k, h->L, h->E, h->k);
    if (sig_variant_uses_gate(m->recipe.variant) &&
        !(h->has & (m->recipe.variant == SIG_GATE_PROB ? TRACE_HAS_GATE_PROB
                                                        : TRACE_HAS_GATE_LOGIT)))
        return cli_fail(CMD, "%s: the model's variant %s needs %s, which the trace lacks",
                        a->model_path, sig_variant_name(m->recipe.variant),
                        sig_variant_name(m->recipe.variant));
    in->K = m->K;
    return 0;
}

static int label_shares(const sim_args *a, sim_inputs *in)
{
    if (!wants(a, ROUTE_DOMAIN))
        return 0;
    const trace_t *c = in->calib;
    if (!c->label || c->n_labels < 1)
        return cli_fail(CMD, "%s: the domain policy needs labels (the trace has no 'label' "
                        "dataset)", a->trace);
    in->share = calloc((size_t)c->n_labels, sizeof *in->share);
    if (!in->share)
        return cli_error(CMD, "out of memory");
    for (int64_t r = 0; r < c->n; r++)
        in->share[c->label[r]] += 1.0 / (double)c->n;
    return 0;
}

static int prepare(sim_args *a, sim_inputs *in)
{
    char err[ELDR_ERRLEN];
    int rc, whole = needs_all(a);
    if (trace_read_header(a->trace, &in->h, err, sizeof err) < 0)
        return cli_fail(CMD, "%s", err);
    trace_load_opts io = {.drop = TRACE_DROP_COUNTS | TRACE_DROP_IDS};
    if ((rc = whole ? load_all(a, in) : cli_load_some(CMD, a->trace, &io, &in->all)) ||
        (a->require_full && (rc = cli_require_full_routing(CMD, a->trace, in->all))))
        return rc;
    if (a->n_modes &&
        sim_prefix_check_trace(in->all, a->prefix.block_size, err, sizeof err))
        return cli_fail(CMD, "%s: --prefix-mode: %s", a->trace, err);
    if (a->cost_path && cost_model_load(a->cost_path, &a->cfg.cost, err, sizeof err))
        return cli_fail(CMD, "--cost: %s", err);
    a->rate_default = sim_default_arrivals(&a->cfg, in->all);
    /* signatures are built at each arrival, not held: 4 bytes a cell of
     * the mask for every simulated row otherwise (docs/memory.md) */
    a->cfg.sig_cache = 0;
    if ((rc = load_model(a, in)))
        return rc;
    if (whole)
        rc = split_trace(a, in);
    else if (!(rc = cli_split_rows(CMD, in->all, &a->split, 1, &in->rows)))
        rc = load_parts(a, in);
    if (rc)
        return rc;
    if (in->model)
        cli_warn_in_sample(CMD, a->trace, a->model_path, in->model, in->all, &in->rows);
    else if (wants_model(a) && (rc = fit_model(a, in)))
        return rc;
    if ((rc = label_shares(a, in)))
        return rc;
    in->tau = isfinite(a->tau) ? a->tau : in->model ? in->model->tau : MODEL_TAU_DEFAULT;
    return 0;
}

/* The activation pools are kept when they fit what --max-memory leaves
 * beside the loaded rows (cfg.pool_cache, at most SIM_DEFAULT_POOL_CACHE);
 * otherwise each request's are sampled on admission (the same rows, the
 * same results), said on stderr, in the report and in --json. */
static void pools_note(const sim_args *a, sim_inputs *in, const sim_workload *w)
{
    size_t need = sim_pools_bytes(w);
    char nb[32], cb[32], bb[32];
    in->pools[0] = '\0';
    if (w->pool || !need)
        return;
    cli_format_bytes((double)need, nb, sizeof nb);
    cli_format_bytes((double)a->cfg.pool_cache, cb, sizeof cb);
    cli_format_bytes((double)a->max_memory, bb, sizeof bb);
    if (a->cfg.pool_cache < SIM_DEFAULT_POOL_CACHE)
        snprintf(in->pools, sizeof in->pools, "activation pools (%s) sampled on admission, "
                 "not kept: %s of the budget %s is left beside the loaded rows", nb, cb, bb);
    else
        snprintf(in->pools, sizeof in->pools, "activation pools (%s) sampled on admission, "
                 "not kept: over the %s pool cap", nb, cb);
    fprintf(stderr, "eldr %s: %s: %s\n", CMD, a->trace, in->pools);
}

/* ---- CSV files, written to a temporary and renamed when complete ---- */

typedef struct csv_out {
    atomic_file out;
    FILE *f;                   /* over out; NULL when closed */
    char err[ELDR_ERRLEN];     /* why open or commit failed */
} csv_out;

static int csv_open(csv_out *c, const char *dir, const char *policy, const char *what)
{
    char path[4096];
    if (policy)
        snprintf(path, sizeof path, "%s/%s_%s.csv", dir, policy, what);
    else
        snprintf(path, sizeof path, "%s/%s.csv", dir, what);
    c->f = NULL;
    if (atomic_file_begin(&c->out, path, c->err, sizeof c->err))
        return -1;
    if (!(c->f = atomic_file_stream(&c->out))) {
        atomic_file_abort(&c->out);
        eldr_errf(c->err, sizeof c->err, "%s: out of memory", path);
        return -1;
    }
    return 0;
}

static void csv_abort(csv_out *c)
{
    if (c->f)
        atomic_file_abort(&c->out);
    c->f = NULL;
}

/* Close and rename into place; -1 (temporary removed) on a write error. */
static int csv_commit(csv_out *c)
{
    c->f = NULL;
    return atomic_file_commit(&c->out, c->err, sizeof c->err);
}

static void on_step_csv(void *ctx, int worker, double t, double dt, int B, const int *U,
                        int L, int64_t kv)
{
    double u = 0;
    for (int l = 0; l < L; l++)
        u += U[l];
    fprintf((FILE *)ctx, "%.9f,%d,%.6f,%d,%lld,%.4f\n", t, worker, dt * 1e3, B, (long long)kv,
            u / L);
}

static void write_series(FILE *f, const sim_result *r, const trace_t *t, const int64_t *file_row)
{
    (void)file_row;
    fprintf(f, "t_s,worker,inflight\n");
    for (int64_t i = 0; i < r->n_series; i++)
        fprintf(f, "%.9f,%d,%d\n", r->series[i].t, r->series[i].worker, r->series[i].inflight);
    (void)t;
}

/* file_row maps a simulated row to its row in the input file (the split
 * draws the evaluation rows from anywhere in the file). */
static void write_requests(FILE *f, const sim_result *r, const trace_t *t, const int64_t *file_row)
{
    fprintf(f, "row,request_id,worker,rule,tokens,arrival_s,start_s,finish_s,queue_ms,"
            "tpot_ms\n");
    for (int64_t i = 0; i < r->n; i++) {
        const sim_request *q = &r->req[i];
        fprintf(f, "%lld,%s,%d,%s,%d,%.9f,%.9f,%.9f,%.4f,%.4f\n", (long long)file_row[q->row],
                t->request_id && t->request_id[q->row] ? t->request_id[q->row] : "",
                q->worker, route_rule_name(q->rule), q->tokens, q->arrival, q->start,
                q->finish, (q->start - q->arrival) * 1e3,
                (q->finish - q->start) / q->tokens * 1e3);
    }
}

static void write_heat(FILE *f, const sim_result *r, const trace_t *t, const int64_t *file_row)
{
    (void)t;
    (void)file_row;
    fprintf(f, "worker,layer,expert,activations\n");
    for (int w = 0; w < r->K; w++)
        for (int l = 0; l < r->L; l++)
            for (int e = 0; e < r->E; e++) {
                uint64_t h = r->heat[((size_t)w * r->L + l) * r->E + e];
                if (h)
                    fprintf(f, "%d,%d,%d,%llu\n", w, l, e, (unsigned long long)h);
            }
}

/* ---- running the policies ---- */

#define MAX_RUNS (ROUTE_N_KINDS + SIM_PREFIX_N_MODES)

typedef struct run_set {
    sim_result res[MAX_RUNS];
    int mode[MAX_RUNS];        /* prefix mode of an eldr run, -1 for none */
    double same[MAX_RUNS];     /* share routed as eldr-cold routed; NAN */
    int n;
    csv_out steps[MAX_RUNS];
    int baseline;              /* index of the best balancer by TPOT p50, -1 */
    sim_prefix px;             /* the prefix replay (--prefix-mode) */
    grid_result seeds;         /* --seeds N > 1: every policy under N seeds */
    const grid_row *stat[MAX_RUNS]; /* its row of each run, or NULL */
} run_set;

/* Run one policy on workload w into res, named `name` (which also names
 * its CSV files); steps is NULL without --csv. A failure's line goes to
 * why (the caller prints it: runs on threads print only one). */
static int run_one(const sim_args *a, const sim_inputs *in, const sim_workload *w,
                   route_kind kind, const char *name, sim_result *res, csv_out *steps,
                   char *why, size_t why_len)
{
    char err[ELDR_ERRLEN];
    route_policy p;
    if (route_policy_init(&p, kind, in->K, a->cfg.seed, err, sizeof err))
        return eldr_errf(why, why_len, "%s", err);
    int rc = 0;
    if (route_kind_has_centroids(kind))
        rc = route_policy_set_centroids(&p, in->model->centroids, w->dim, in->tau, a->min2,
                                        err, sizeof err);
    else if (kind == ROUTE_DOMAIN)
        rc = route_policy_set_domains(&p, in->share, in->calib->n_labels, err, sizeof err);
    if (rc) {
        route_policy_free(&p);
        return eldr_errf(why, why_len, "%s", err);
    }
    if (steps) {
        if (csv_open(steps, a->csv_dir, name, "steps")) {
            route_policy_free(&p);
            return eldr_errf(why, why_len, "--csv: %s", steps->err);
        }
        fprintf(steps->f, "t_s,worker,step_ms,batch,kv_tokens,distinct_per_layer\n");
    }
    rc = sim_run(w, &p, steps ? on_step_csv : NULL, steps ? steps->f : NULL, res, err,
                 sizeof err);
    route_policy_free(&p);
    if (rc)
        return eldr_errf(why, why_len, "%s: %s", a->trace, err);
    snprintf(res->policy, sizeof res->policy, "%s", name);
    return 0;
}

/* ELDR once per prefix mode (sim_prefix_run), each on the workload seen
 * through that mode's signatures, with every mode's same-worker share
 * against cold; with --csv each run's steps file is opened first. */
static int run_modes(const sim_args *a, const sim_inputs *in, const sim_workload *w,
                     run_set *rs)
{
    char err[ELDR_ERRLEN];
    void *ctx[SIM_PREFIX_N_MODES] = {0};
    int i0 = rs->n;
    for (int j = 0; a->csv_dir && j < a->n_modes; j++) {
        char name[16];
        csv_out *c = &rs->steps[i0 + j];
        snprintf(name, sizeof name, "eldr-%s", sim_prefix_mode_name(a->modes[j]));
        if (csv_open(c, a->csv_dir, name, "steps"))
            return cli_fail(CMD, "--csv: %s", c->err);
        fprintf(c->f, "t_s,worker,step_ms,batch,kv_tokens,distinct_per_layer\n");
        ctx[j] = c->f;
    }
    sim_prefix_router router = {in->K, a->cfg.seed, in->model->centroids, in->tau, a->min2};
    if (sim_prefix_run(&rs->px, w, a->modes, a->n_modes, &router,
                       a->csv_dir ? on_step_csv : NULL, ctx, &rs->res[i0], &rs->same[i0], err,
                       sizeof err))
        return cli_fail(CMD, "%s: %s", a->trace, err);
    for (int j = 0; j < a->n_modes; j++)
        rs->mode[i0 + j] = a->modes[j];
    rs->n += a->n_modes;
    return 0;
}

/* The policies of one --seeds 1 run, shared by the threads that run
 * them: each takes the next index, runs it into its own slot, and the
 * slots are read in --policy order after the join, so the report does
 * not depend on the thread count (every run draws from its own seeded
 * streams). */
typedef struct run_pool {
    const sim_args *a;
    const sim_inputs *in;
    const sim_workload *w;
    run_set *rs;
    pthread_mutex_t lock;
    int next, done, failed;
    int rc[ROUTE_N_KINDS];
    char why[ROUTE_N_KINDS][ELDR_ERRLEN];   /* each failure's line */
    cli_progress *bar;
} run_pool;

static void *run_pool_main(void *arg)
{
    run_pool *P = arg;
    for (;;) {
        pthread_mutex_lock(&P->lock);
        int i = P->failed ? P->a->n_kinds : P->next++;
        pthread_mutex_unlock(&P->lock);
        if (i >= P->a->n_kinds)
            return NULL;
        route_kind kind = (route_kind)P->a->kinds[i];
        int rc = run_one(P->a, P->in, P->w, kind, route_kind_name(kind), &P->rs->res[i],
                         P->a->csv_dir ? &P->rs->steps[i] : NULL, P->why[i], ELDR_ERRLEN);
        pthread_mutex_lock(&P->lock);
        P->rc[i] = rc;
        P->failed |= rc != 0;
        cli_progress_update(P->bar, (double)++P->done / P->a->n_kinds);
        pthread_mutex_unlock(&P->lock);
    }
}

/* The policies on up to --threads threads (no prefix modes). */
static int run_threaded(const sim_args *a, const sim_inputs *in, const sim_workload *w,
                        run_set *rs, cli_progress *bar)
{
    run_pool P = {.a = a, .in = in, .w = w, .rs = rs, .bar = bar};
    pthread_mutex_init(&P.lock, NULL);
    par_run(par_threads(a->threads, a->n_kinds), run_pool_main, &P);
    pthread_mutex_destroy(&P.lock);
    int rc = 0;
    for (int i = 0; i < a->n_kinds && !rc; i++)   /* the first policy's failure, alone */
        if (P.rc[i])
            rc = cli_fail(CMD, "%s", P.why[i]);
    if (!rc) {
        rs->n = a->n_kinds;
        return 0;
    }
    /* a failure drops every result: the command reports the error only */
    for (int i = 0; i < P.next && i < a->n_kinds; i++)
        if (!P.rc[i])
            sim_result_free(&rs->res[i]);
    rs->n = 0;
    return rc;
}

/* Every policy of --policy, in order (ELDR per prefix mode with
 * --prefix-mode, those one after the other). */
static int run_all(const sim_args *a, const sim_inputs *in, const sim_workload *w,
                   run_set *rs)
{
    cli_progress bar;
    int rc = 0;
    for (int i = 0; i < MAX_RUNS; i++) {
        rs->mode[i] = -1;
        rs->same[i] = NAN;
    }
    cli_progress_start(&bar, "sim");
    if (!a->n_modes) {
        rc = run_threaded(a, in, w, rs, &bar);
        cli_progress_done(&bar);
        return rc;
    }
    for (int i = 0; !rc && i < a->n_kinds; i++) {
        route_kind kind = (route_kind)a->kinds[i];
        if (kind == ROUTE_ELDR && a->n_modes) {
            rc = run_modes(a, in, w, rs);
        } else {
            int j = rs->n;
            char why[ELDR_ERRLEN];
            if (run_one(a, in, w, kind, route_kind_name(kind), &rs->res[j],
                        a->csv_dir ? &rs->steps[j] : NULL, why, sizeof why))
                rc = cli_fail(CMD, "%s", why);
            rs->n += !rc;
        }
        cli_progress_update(&bar, (double)(i + 1) / a->n_kinds);
    }
    cli_progress_done(&bar);
    return rc;
}

static void seeds_progress(void *ctx, int64_t done, int64_t total)
{
    cli_progress_update(ctx, (double)done / (double)total);
}

/* Redraw the split per seed: not with a given model (its centroids fix
 * the calibration) nor a pinned, head or empty split. */
static int resplit(const sim_args *a)
{
    return !a->model_path && grid_should_resplit(&a->split, a->seeds);
}

/* What the intervals cover, for the reports. */
static void ci_covers(const sim_args *a, char *buf, size_t n)
{
    grid_ci_covers(a->seeds, a->cfg.seed, resplit(a), &a->split,
                   a->model_path && grid_should_resplit(&a->split, a->seeds)
                       ? "one split (the model is given: its centroids fix the calibration)"
                       : NULL, buf, n);
}

/* --seeds N: the same policies under N seeds on the grid engine (the
 * first seed repeats the detailed run), for means and CIs. */
static int run_seeds(const sim_args *a, const sim_inputs *in, run_set *rs)
{
    char err[ELDR_ERRLEN];
    grid_spec g;
    grid_spec_default(&g);
    g.calib = in->calib;
    g.eval = in->eval;
    g.model = in->model;
    g.cfg = a->cfg;
    g.cfg.threads = 1; /* the cells run on the threads, each samples its own pools */
    /* the grid runs one seed's cell at a time (grid.h): one seed's pools */
    g.threads = a->threads;
    g.n_seeds = a->seeds;
    if (resplit(a))            /* each seed its own split and fit, as the first */
        grid_spec_resplit(&g, in->all, &a->split, in->K, a->cfg.seed);
    grid_spec_policies(&g, in->K, a->kinds, a->n_kinds, &in->tau, 1);
    g.min2 = a->min2;
    cli_progress bar;
    cli_progress_start(&bar, "seeds");
    g.progress = seeds_progress;
    g.progress_ctx = &bar;
    int rc = grid_run(&g, &rs->seeds, err, sizeof err);
    cli_progress_done(&bar);
    if (rc < 0)
        return cli_fail(CMD, "%s: --seeds: %s", a->trace, err);
    for (int i = 0; i < rs->n; i++)
        for (int j = 0; j < rs->seeds.n; j++)
            if (!strcmp(route_kind_name(rs->seeds.rows[j].kind), rs->res[i].policy))
                rs->stat[i] = &rs->seeds.rows[j];
    return 0;
}

/* 1 for a policy the comparison weighs: one of GRID_DEFAULT_BASELINES
 * (jsq, rr, p2c), the baselines of eldr advise, eldr sweep and the
 * dashboard. random and domain run beside them for reference only. */
static int is_baseline(const char *policy)
{
    int k = route_kind_parse(policy);
    return k >= 0 && grid_is_default_baseline((route_kind)k);
}

/* "baseline", "reference" (random, domain) or "candidate" (eldr...) */
static const char *role_of(const char *policy)
{
    int k = route_kind_parse(policy);
    return is_baseline(policy) ? "baseline"   /* eldr-uncached...: the prefix what-if's eldr */
           : k < 0 || grid_kind_is_candidate((route_kind)k) ? "candidate" : "reference";
}

/* The line under the table: what "vs best" compares with, and the
 * policies shown for reference only. */
static void print_comparison(const run_set *rs)
{
    char ref[128] = "";
    size_t len = 0;
    for (int i = 0; i < rs->n; i++)
        if (!strcmp(role_of(rs->res[i].policy), "reference") && len < sizeof ref)
            len += (size_t)snprintf(ref + len, sizeof ref - len, "%s%s", len ? ", " : "",
                                    rs->res[i].policy);
    if (rs->baseline >= 0)
        printf("vs best: against %s, the best of the baselines %s given (as eldr advise and "
               "eldr dash)", rs->res[rs->baseline].policy, GRID_DEFAULT_BASELINES);
    else
        printf("vs best: no baseline among the policies: give one of %s (--policy)",
               GRID_DEFAULT_BASELINES);
    if (ref[0])
        printf("; %s: reference only, never the baseline", ref);
    printf("\n");
}

static void pick_baseline(run_set *rs)
{
    rs->baseline = -1;
    if (rs->seeds.n) {         /* by the mean over seeds, as the grid chose */
        for (int i = 0; i < rs->n; i++)
            if (rs->stat[i] && rs->stat[i]->best_baseline >= 0)
                for (int j = 0; j < rs->n; j++)
                    if (rs->stat[j] == &rs->seeds.rows[rs->stat[i]->best_baseline])
                        rs->baseline = j;
        return;
    }
    for (int i = 0; i < rs->n; i++) {   /* of jsq, rr, p2c: the verdict's baselines */
        if (!is_baseline(rs->res[i].policy))
            continue;
        if (rs->baseline < 0 || rs->res[i].tpot_p50_ms < rs->res[rs->baseline].tpot_p50_ms)
            rs->baseline = i;
    }
}

static double change_pct(const run_set *rs, int i)
{
    if (rs->baseline < 0)
        return NAN;
    if (rs->stat[i])
        return rs->stat[i]->vs_best_pct.mean;
    double b = rs->res[rs->baseline].tpot_p50_ms;
    return b > 0 ? (rs->res[i].tpot_p50_ms - b) / b * 100.0 : NAN;
}

/* ---- reports ---- */

static const char *arrivals_text(const sim_args *a, char *buf, size_t len)
{
    const sim_config *c = &a->cfg;
    if (c->arrivals == SIM_ARRIVE_POISSON && a->rate_default)
        snprintf(buf, len, "Poisson %g req/s (the default: the trace has no arrival_s; "
                 "--rate R)", c->rate);
    else if (c->arrivals == SIM_ARRIVE_POISSON)
        snprintf(buf, len, "Poisson %g req/s", c->rate);
    else if (c->arrivals == SIM_ARRIVE_CLOSED)
        snprintf(buf, len, "closed loop, concurrency %d", c->concurrency);
    else
        snprintf(buf, len, "trace arrival_s");
    return buf;
}

/* The prefix-caching block of the text report. */
static void print_prefix(const sim_args *a, const run_set *rs)
{
    const sim_prefix *px = &rs->px;
    printf("\nprefix caching: %d prefill worker%s (%s), KV cache %lld blocks each, blocks of "
           "%d tokens\n", a->prefix.workers, a->prefix.workers == 1 ? "" : "s",
           sim_prefill_route_name(a->prefix.route), (long long)a->prefix.capacity,
           a->prefix.block_size);
    printf("  hit rate %.1f%% of %lld blocks; %.1f%% of prompt tokens cached per request "
           "(mean); %lld evictions\n", 100 * px->hit_rate, (long long)px->blocks,
           100 * px->cached_frac_mean, (long long)px->evictions);
    printf("  recovered counts equal cold prefill counts in %lld of %lld requests\n",
           (long long)(px->n - px->mismatches), (long long)px->n);
    printf("\n%-14s %10s %12s %9s %9s %9s\n", "mode", "sig cos", "same worker",
           "experts/", "tpot p50", "zero sig");
    printf("%-14s %10s %12s %9s %9s %9s\n", "", "vs cold", "as cold", "step", "ms", "");
    for (int i = 0; i < rs->n; i++) {
        int m = rs->mode[i];
        if (m < 0)
            continue;
        printf("%-14s %10.4f %11.1f%% %9.2f %9.2f %9lld\n", rs->res[i].policy,
               px->cos_mean[m], 100 * rs->same[i], rs->res[i].distinct_per_step,
               rs->res[i].tpot_p50_ms, (long long)px->n_zero[m]);
    }
}

static void fmt_half(char *buf, size_t n, const grid_stat *s, int digits)
{
    if (isfinite(s->lo) && isfinite(s->hi))
        snprintf(buf, n, "+-%.*f", digits, (s->hi - s->lo) / 2);
    else
        snprintf(buf, n, "-");
}

/* The table with --seeds: means over the seeds, with 95% CIs. */
static void print_seeds_table(const run_set *rs, int pw)
{
    printf("\n%-*s %9s %8s %9s %9s %9s %7s %9s %9s %8s\n", pw, "policy", "tpot p50", "95% CI",
           "tpot p99", "queue p50", "experts/", "reuse", "imbalance", "vs best", "95% CI");
    printf("%-*s %9s %8s %9s %9s %9s %7s %9s %9s %8s\n", pw, "", "ms", "ms", "ms", "ms", "step",
           "", "max/mean", rs->baseline >= 0 ? rs->res[rs->baseline].policy : "(none)", "pct pt");
    for (int i = 0; i < rs->n; i++) {
        const grid_row *g = rs->stat[i];
        if (!g)
            continue;
        char ci[32], vs[32], vci[32];
        fmt_half(ci, sizeof ci, &g->tpot_p50, 3);
        fmt_half(vci, sizeof vci, &g->vs_best_pct, 1);
        snprintf(vs, sizeof vs, isfinite(g->vs_best_pct.mean) ? "%+.1f%%" : "-",
                 g->vs_best_pct.mean);
        printf("%-*s %9.3f %8s %9.2f %9.2f %9.2f %7.2f %9.2f %9s %8s\n", pw, rs->res[i].policy,
               g->tpot_p50.mean, ci, g->tpot_p99.mean, g->queue_p50.mean, g->distinct.mean,
               g->reuse.mean, g->imbalance.mean, vs, vci);
    }
}

static void print_text(const sim_args *a, const sim_inputs *in, const sim_workload *w,
                       const run_set *rs)
{
    char arr[96];
    char split[160];
    split_describe(&in->rows, split, sizeof split);
    printf("sim: %s, %lld requests simulated; %s%s\n", a->trace, (long long)w->n, split,
           resplit(a) ? " (the first seed's; each seed draws its own)" : "");
    if (in->sample[0])
        printf("%s: a chunk sample of the trace, within --max-memory\n", in->sample);
    if (in->pools[0])
        printf("%s\n", in->pools);
    printf("workers %d, max batch %d, %s, tokens %s, activations %s, seed %llu", in->K,
           a->cfg.max_batch, arrivals_text(a, arr, sizeof arr),
           a->cfg.output_tokens ? "fixed" : "from trace",
           w->recorded ? "recorded" : "sampled", (unsigned long long)a->cfg.seed);
    if (a->seeds > 1) {
        char cov[256];
        ci_covers(a, cov, sizeof cov);
        printf(" to %llu: means, %s",
               (unsigned long long)a->cfg.seed + (unsigned long long)a->seeds - 1, cov);
    }
    printf("\n");
    if (in->model)
        printf("model: %s (%s, %d of %d layers), tau %g, min2 %s\n",
               in->fitted ? "fitted on the calibration rows" : a->model_path,
               sig_variant_name(in->model->recipe.variant), in->model->recipe.n_layers,
               in->model->recipe.L, in->tau, a->min2 ? "on" : "off");
    if (w->n_skipped)
        printf("skipped %lld requests with no token to decode\n", (long long)w->n_skipped);
    if (w->n_sig_zero)
        printf("%lld requests have an all-zero signature (routed by load)\n",
               (long long)w->n_sig_zero);
    for (int i = 0; i < rs->n; i++)
        if (!strcmp(rs->res[i].policy, route_kind_name(ROUTE_ELDR_ONLINE)))
            printf("eldr-online: refit every %g s on the last %g s of signatures, %lld refits%s\n",
                   a->cfg.refit_every, a->cfg.refit_window, (long long)rs->res[i].refits,
                   rs->seeds.n ? " (first seed)" : "");
    if (wants(a, ROUTE_ELDR_COST))
        printf("eldr-cost: predicts with the simulated cost model (%s), max batch %d, from "
               "the in-flight prefill counts only\n", a->cost_path ? a->cost_path
                                                    : "the documented defaults", a->cfg.max_batch);
    int pw = 8;                /* the widest name: eldr-online, eldr-cost, eldr-uncached */
    for (int i = 0; i < rs->n; i++)
        if ((int)strlen(rs->res[i].policy) > pw)
            pw = (int)strlen(rs->res[i].policy);
    if (rs->seeds.n) {
        print_seeds_table(rs, pw);
    } else {
    printf("\n%-*s %9s %9s %9s %9s %9s %9s %7s %9s %9s\n", pw, "policy", "tpot p50", "tpot p95",
           "tpot p99", "queue p50", "queue p99", "experts/", "reuse", "imbalance", "vs best");
    printf("%-*s %9s %9s %9s %9s %9s %9s %7s %9s %9s\n", pw, "", "ms", "ms", "ms", "ms", "ms",
           "step", "", "max/mean",
           rs->baseline >= 0 ? rs->res[rs->baseline].policy : "(none)");
    for (int i = 0; i < rs->n; i++) {
        const sim_result *r = &rs->res[i];
        double c = change_pct(rs, i);
        char cbuf[32];
        if (isfinite(c))
            snprintf(cbuf, sizeof cbuf, "%+.1f%%", c);
        else
            snprintf(cbuf, sizeof cbuf, "-");
        printf("%-*s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %7.2f %9.2f %9s\n", pw, r->policy,
               r->tpot_p50_ms, r->tpot_p95_ms, r->tpot_p99_ms, r->queue_p50_ms,
               r->queue_p99_ms, r->distinct_per_step, r->reuse, r->imbalance, cbuf);
    }
    }
    print_comparison(rs);
    printf("\nserved per worker%s:\n", rs->seeds.n ? " (first seed)" : "");
    for (int i = 0; i < rs->n; i++) {
        printf("  %-*s", pw, rs->res[i].policy);
        for (int k = 0; k < rs->res[i].K; k++)
            printf(" %lld", (long long)rs->res[i].served[k]);
        printf("\n");
    }
    if (a->n_modes)
        print_prefix(a, rs);
    if (a->csv_dir)
        printf("wrote time series to %s/\n", a->csv_dir);
}

static json_t *policy_json(const run_set *rs, int i)
{
    const sim_result *r = &rs->res[i];
    json_t *o = json_object(), *served = json_array(), *infl = json_array();
    json_t *wdist = json_array(), *rules = json_object();
    for (int k = 0; k < r->K; k++) {
        json_array_append_new(served, json_integer(r->served[k]));
        json_array_append_new(infl, cli_num_json(r->inflight_mean[k]));
        json_array_append_new(wdist, cli_num_json(r->worker_distinct[k]));
    }
    for (int u = 0; u < RULE_N; u++)
        if (r->rule_count[u])
            json_object_set_new(rules, route_rule_name((route_rule)u),
                                json_integer(r->rule_count[u]));
    json_object_set_new(o, "name", json_string(r->policy));
    json_object_set_new(o, "tpot_p50_ms", cli_num_json(r->tpot_p50_ms));
    json_object_set_new(o, "tpot_p95_ms", cli_num_json(r->tpot_p95_ms));
    json_object_set_new(o, "tpot_p99_ms", cli_num_json(r->tpot_p99_ms));
    json_object_set_new(o, "tpot_mean_ms", cli_num_json(r->tpot_mean_ms));
    json_object_set_new(o, "queue_p50_ms", cli_num_json(r->queue_p50_ms));
    json_object_set_new(o, "queue_p99_ms", cli_num_json(r->queue_p99_ms));
    json_object_set_new(o, "distinct_experts_per_step", cli_num_json(r->distinct_per_step));
    json_object_set_new(o, "reuse", cli_num_json(r->reuse));
    json_object_set_new(o, "imbalance", cli_num_json(r->imbalance));
    if (!strcmp(r->policy, route_kind_name(ROUTE_ELDR_ONLINE)))
        json_object_set_new(o, "refits", json_integer(r->refits));
    json_object_set_new(o, "served", served);
    json_object_set_new(o, "inflight_mean", infl);
    json_object_set_new(o, "worker_distinct_experts_per_step", wdist);
    json_object_set_new(o, "rules", rules);
    json_object_set_new(o, "steps", json_integer(r->steps));
    json_object_set_new(o, "mean_batch", cli_num_json(r->mean_batch));
    json_object_set_new(o, "tokens", json_integer(r->tokens));
    json_object_set_new(o, "makespan_s", cli_num_json(r->makespan_s));
    json_object_set_new(o, "throughput_rps", cli_num_json(r->throughput_rps));
    json_object_set_new(o, "tokens_per_s", cli_num_json(r->tokens_per_s));
    json_object_set_new(o, "mean_in_system", cli_num_json(r->mean_in_system));
    json_object_set_new(o, "vs_baseline_tpot_p50_pct", cli_num_json(change_pct(rs, i)));
    json_object_set_new(o, "role", json_string(role_of(r->policy)));
    const grid_row *g = rs->stat[i];
    json_object_set_new(o, "tpot_p50_ms_ci95", json_null());
    json_object_set_new(o, "vs_baseline_tpot_p50_pct_ci95",
                        g ? cli_ci_json(&g->vs_best_pct) : json_null());
    if (g)                     /* means over the seeds; the rest is the first seed's */
        cli_grid_stats_json(o, g);
    int m = rs->mode[i];
    if (m >= 0) {
        const sim_prefix *px = &rs->px;
        json_object_set_new(o, "prefix_mode", json_string(sim_prefix_mode_name(m)));
        json_object_set_new(o, "signature_cosine_vs_cold", cli_num_json(px->cos_mean[m]));
        json_object_set_new(o, "same_worker_as_cold", cli_num_json(rs->same[i]));
        json_object_set_new(o, "zero_signatures", json_integer(px->n_zero[m]));
        json_object_set_new(o, "prefix_hit_rate", cli_num_json(px->hit_rate));
        json_object_set_new(o, "cached_token_fraction", cli_num_json(px->cached_frac_mean));
    }
    return o;
}

static json_t *prefix_json(const sim_args *a, const sim_prefix *px)
{
    json_t *o = json_object();
    json_object_set_new(o, "capacity_blocks", json_integer(a->prefix.capacity));
    json_object_set_new(o, "prefill_workers", json_integer(a->prefix.workers));
    json_object_set_new(o, "prefill_route",
                        json_string(sim_prefill_route_name(a->prefix.route)));
    json_object_set_new(o, "block_size", json_integer(a->prefix.block_size));
    json_object_set_new(o, "blocks", json_integer(px->blocks));
    json_object_set_new(o, "hit_blocks", json_integer(px->hit_blocks));
    json_object_set_new(o, "hit_rate", cli_num_json(px->hit_rate));
    json_object_set_new(o, "prompt_tokens", json_integer(px->tokens));
    json_object_set_new(o, "cached_tokens", json_integer(px->cached_tokens));
    json_object_set_new(o, "cached_token_fraction", cli_num_json(px->cached_frac_mean));
    json_object_set_new(o, "evictions", json_integer(px->evictions));
    json_object_set_new(o, "recovered_equal_cold", json_integer(px->n - px->mismatches));
    json_object_set_new(o, "recovered_mismatches", json_integer(px->mismatches));
    return o;
}

static void print_json(const sim_args *a, const sim_inputs *in, const sim_workload *w,
                       const run_set *rs)
{
    char arr[96];
    json_t *o = json_object(), *pol = json_array();
    json_object_set_new(o, "trace", json_string(a->trace));
    json_object_set_new(o, "workers", json_integer(in->K));
    json_object_set_new(o, "requests", json_integer(w->n));
    json_object_set_new(o, "skipped", json_integer(w->n_skipped));
    json_object_set_new(o, "calib_rows", json_integer(in->n_calib));
    json_object_set_new(o, "split", cli_split_json(&in->rows));
    json_object_set_new(o, "sample", in->sample[0] ? json_string(in->sample) : json_null());
    json_object_set_new(o, "pools", in->pools[0] ? json_string(in->pools) : json_null());
    json_object_set_new(o, "seeds", json_integer(a->seeds));
    char cov[256];
    ci_covers(a, cov, sizeof cov);
    json_object_set_new(o, "ci_covers", json_string(cov));
    json_object_set_new(o, "split_redrawn", json_boolean(resplit(a)));
    json_object_set_new(o, "arrivals", json_string(arrivals_text(a, arr, sizeof arr)));
    json_object_set_new(o, "rate_default", json_boolean(a->rate_default));
    json_object_set_new(o, "max_batch", json_integer(a->cfg.max_batch));
    json_object_set_new(o, "activations", json_string(w->recorded ? "recorded" : "sampled"));
    json_object_set_new(o, "seed", json_integer((json_int_t)a->cfg.seed));
    json_object_set_new(o, "tau", cli_num_json(in->tau));
    json_object_set_new(o, "min2", json_boolean(a->min2));
    if (wants(a, ROUTE_ELDR_ONLINE)) {
        json_object_set_new(o, "refit_every_s", cli_num_json(a->cfg.refit_every));
        json_object_set_new(o, "refit_window_s", cli_num_json(a->cfg.refit_window));
    }
    json_object_set_new(o, "model", in->model ? json_string(in->fitted ? "fitted"
                                                                         : a->model_path)
                                              : json_null());
    json_object_set_new(o, "baseline", rs->baseline >= 0
                                           ? json_string(rs->res[rs->baseline].policy)
                                           : json_null());
    json_object_set_new(o, "baselines", json_string(GRID_DEFAULT_BASELINES));
    json_t *refs = json_array();
    for (int i = 0; i < rs->n; i++)
        if (!strcmp(role_of(rs->res[i].policy), "reference"))
            json_array_append_new(refs, json_string(rs->res[i].policy));
    json_object_set_new(o, "reference_only", refs);
    for (int i = 0; i < rs->n; i++)
        json_array_append_new(pol, policy_json(rs, i));
    json_object_set_new(o, "policies", pol);
    if (a->n_modes)
        json_object_set_new(o, "prefix", prefix_json(a, &rs->px));
    cli_print_json(o);
}

/* Every series file of every policy, then summary.csv; on any failure
 * nothing half-written stays behind. */
static int write_csv(const sim_args *a, const sim_inputs *in, run_set *rs)
{
    static void (*const writers[])(FILE *, const sim_result *, const trace_t *,
                                    const int64_t *) = {
        write_series, write_requests, write_heat};
    static const char *const names[] = {"inflight", "requests", "heat"};
    for (int i = 0; i < rs->n; i++) {
        if (csv_commit(&rs->steps[i]))
            return cli_error(CMD, "--csv: %s", rs->steps[i].err);
        for (int j = 0; j < 3; j++) {
            csv_out c;
            if (csv_open(&c, a->csv_dir, rs->res[i].policy, names[j]))
                return cli_error(CMD, "--csv: %s", c.err);
            writers[j](c.f, &rs->res[i], in->eval, in->rows.eval);
            if (csv_commit(&c))
                return cli_error(CMD, "--csv: %s", c.err);
        }
    }
    csv_out c;
    if (csv_open(&c, a->csv_dir, NULL, "summary"))
        return cli_error(CMD, "--csv: %s", c.err);
    fprintf(c.f, "policy,tpot_p50_ms,tpot_p95_ms,tpot_p99_ms,queue_p50_ms,queue_p99_ms,"
            "distinct_experts_per_step,reuse,imbalance,makespan_s,vs_baseline_pct\n");
    for (int i = 0; i < rs->n; i++) {
        const sim_result *r = &rs->res[i];
        fprintf(c.f, "%s,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.6f,%.2f\n", r->policy,
                r->tpot_p50_ms, r->tpot_p95_ms, r->tpot_p99_ms, r->queue_p50_ms,
                r->queue_p99_ms, r->distinct_per_step, r->reuse, r->imbalance, r->makespan_s,
                change_pct(rs, i));
    }
    if (csv_commit(&c))
        return cli_error(CMD, "--csv: %s", c.err);
    return 0;
}

static int check_csv_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0 : cli_fail(CMD, "--csv: %s is not a directory", dir);
    if (mkdir(dir, 0777))
        return cli_fail(CMD, "--csv: cannot create %s: %s", dir, strerror(errno));
    return 0;
}

int cmd_sim(int argc, char **argv)
{
    sim_args a;
    memset(&a, 0, sizeof a);
    int rc = parse_options(argc, argv, &a);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    if (a.csv_dir && (rc = check_csv_dir(a.csv_dir)))
        return rc;
    sim_inputs in;
    memset(&in, 0, sizeof in);
    sim_workload w;
    memset(&w, 0, sizeof w);
    run_set *rs = calloc(1, sizeof *rs);
    if (!rs)
        return cli_error(CMD, "out of memory");
    char err[ELDR_ERRLEN];
    if ((rc = prepare(&a, &in)))
        goto out;
    const sig_recipe *recipe = in.model && wants_model(&a) ? &in.model->recipe : NULL;
    a.cfg.threads = a.threads; /* the pools are sampled on them too */
    a.cfg.no_heat = !a.csv_dir; /* only the _heat.csv files read it */
    a.cfg.tokens = in.tokens;
    a.cfg.pool_cache = sim_pool_cache_within(a.max_memory, in.loaded);
    if (sim_workload_init(&w, in.eval, &a.cfg, recipe, err, sizeof err)) {
        rc = cli_fail(CMD, "%s: %s", a.trace, err);
        goto out;
    }
    pools_note(&a, &in, &w);
    if (a.n_modes && sim_prefix_build(&rs->px, &w, recipe, &a.prefix, err, sizeof err)) {
        rc = cli_fail(CMD, "%s: %s", a.trace, err);
        goto out;
    }
    if ((rc = run_all(&a, &in, &w, rs)))
        goto out;
    if (a.seeds > 1)   /* the grid samples its own; these are done */
        sim_pools_drop(&w);
    if (a.seeds > 1 && (rc = run_seeds(&a, &in, rs)))
        goto out;
    pick_baseline(rs);
    if (a.csv_dir && (rc = write_csv(&a, &in, rs)))
        goto out;
    if (a.json)
        print_json(&a, &in, &w, rs);
    else
        print_text(&a, &in, &w, rs);
out:
    for (int i = 0; i < MAX_RUNS; i++) {
        csv_abort(&rs->steps[i]);
        sim_result_free(&rs->res[i]);
    }
    sim_prefix_free(&rs->px);
    grid_result_free(&rs->seeds);
    free(rs);
    sim_workload_free(&w);
    inputs_free(&in);
    return rc;
}
