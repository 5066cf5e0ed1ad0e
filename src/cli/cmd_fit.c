/* cmd_fit.c - `eldr fit trace.h5 -k K -o model.h5`: calibrate ELDR on a
 * trace (recipe, layer mask, signatures, balanced spherical K-means) and
 * write the model file (docs/model-format.md). The work is model_fit in
 * the core; this file parses options, loads the calibration rows, times
 * the stages and reports. */
#include <getopt.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_sim.h"
#include "err.h"
#include "route.h"
#include "import.h"
#include "model.h"
#include "sha256.h"
#include "trace.h"
#include "trace_budget.h"

#define CMD "fit"

static void usage(void)
{
    printf(
        "usage: eldr fit TRACE.h5 -k K -o MODEL.h5 [options]\n"
        "\n"
        "Fit ELDR's decode-worker centroids on a calibration trace: IDF over the\n"
        "calibration rows, the layer mask (greedy by signature quality rho), the\n"
        "signatures, balanced spherical K-means; then write the model atomically.\n"
        "Requests whose signature is all zero under the mask are left out (counted\n"
        "on stderr). Prints cluster sizes, the objective (total cosine distance of\n"
        "the final assignment), rho, N* and the time of each stage. On a terminal, a\n"
        "progress bar on stderr shows the stages (layer selection, signatures,\n"
        "k-means); none when stderr is a pipe or a file.\n"
        "\n"
        "options:\n"
        "  -k, --clusters K      clusters = decode workers (1 <= K <= requests)\n"
        "  -o, --output FILE     model file to write (optional with --iters 0)\n"
        "  --variant V           count_idf (default), count, sqrt_count, binary,\n"
        "                        gate_prob (also: gate_prob_all), gate_logit\n"
        "  --layers auto|all|LIST  mask: greedy selection (default; needs\n"
        "                        decode_counts), all layers, or e.g. 0,3,5-7\n"
        "  --calib-split N|F     calibrate on N rows, or a fraction F in (0, 1] of\n"
        "                        them (default: all rows), drawn by --split\n"
        "  --split MODE          which rows: random (default: a seeded random draw,\n"
        "                        the same rows as eldr sim --split random with the\n"
        "                        same size and seed), head (the first rows) or\n"
        "                        stratified (the same share of every label). The\n"
        "                        model records it, so that eldr sim can tell\n"
        "                        whether it evaluates on the model's own rows\n"
        "  --split-seed S        seed of the random and stratified draws (default 1)\n"
        "  --seed S              seed of the rho pairs and k-means++ (default 1)\n"
        "  --iters I             K-means rounds (default 50); 0 with --init-rows\n"
        "                        only computes the optimal balanced assignment for\n"
        "                        those centroids and reports its objective\n"
        "  --init-rows I1,...,IK initial centroids = the signatures of these rows\n"
        "  --unbalanced          plain spherical K-means (the ablation)\n"
        "  --pairs P|all         request pairs for rho (default 30000)\n"
        "  --tau T               locality band width stored in the model (0.1)\n"
        "  --workers A,B,...     worker names, K of them (default w0..w{K-1})\n"
        "  --require-full-routing  refuse a trace whose prompts lost rows of routing\n"
        "                        (prefill_unrouted_tokens, vLLM's prefix cache)\n"
        "  --max-memory BYTES    bound what is loaded (K, M, G suffixes; default half\n"
        "                        of physical memory; a row costs its counts plus a\n"
        "                        float signature over every layer): a bigger trace\n"
        "                        is sampled by whole chunks, and the output says so\n"
        "  --json                machine-readable result on stdout\n"
        "  -h, --help            this text\n"
        "\n"
        "example: eldr fit ../shared/data/gptoss20b-routing.h5 -k 4 -o model.h5\n");
}

typedef struct fit_args {
    const char *trace, *output;
    model_fit_opts o;
    const char *layers_arg, *split_arg, *init_arg, *workers_arg;
    int json, require_full;
    int64_t calib_n;          /* rows to load */
    split_spec split;         /* --split, --split-seed (size: calib_n) */
    char provenance[64];      /* the model's calib_split */
    size_t max_memory;        /* --max-memory */
    char sample[96];          /* "sampled N of M rows (budget B)", or "" */
    int *layer_list;
    int64_t *init_rows;
    char **workers;           /* [K] pointers into workers_buf */
    char *workers_buf;
} fit_args;

static void args_free(fit_args *a)
{
    free(a->layer_list);
    free(a->init_rows);
    free(a->workers);
    free(a->workers_buf);
}

enum { O_VARIANT = 256, O_LAYERS, O_SPLIT, O_SEED, O_ITERS, O_INIT, O_UNBAL, O_PAIRS,
       O_TAU, O_WORKERS, O_JSON, O_SPLITMODE, O_SPLITSEED, O_FULL, O_MAXMEM };

/* The numeric options: -k, --seed, --iters, --pairs, --tau. 1 when c is
 * not one of them, 0 when read, else the exit status of the error. */
static int number_option(int c, const char *arg, fit_args *a)
{
    long long v;
    switch (c) {
    case 'k':
        if (cli_parse_int(CMD, "-k", arg, 1, ROUTE_MAX_WORKERS, &v))
            return CLI_BADINPUT;
        a->o.K = (int)v;
        return 0;
    case O_SEED:
        if (cli_parse_int(CMD, "--seed", arg, 0, INT64_MAX, &v))
            return CLI_BADINPUT;
        a->o.seed = (uint64_t)v;
        return 0;
    case O_ITERS:
        if (cli_parse_int(CMD, "--iters", arg, 0, 100000, &v))
            return CLI_BADINPUT;
        a->o.iters = (int)v;
        return 0;
    case O_PAIRS:
        if (!strcmp(arg, "all"))
            a->o.pairs = 0;
        else if (cli_parse_int(CMD, "--pairs", arg, 1, 1LL << 40, &v))
            return CLI_BADINPUT;
        else
            a->o.pairs = v;
        return 0;
    case O_TAU:
        return cli_parse_double(CMD, "--tau", arg, 0, ROUTE_TAU_MAX, &a->o.tau)
                   ? CLI_BADINPUT : 0;
    default:
        return 1;
    }
}

/* One option c (getopt_long's answer) with its argument: 0 when read, -1
 * after --help, else the exit status of the error. */
static int one_option(int c, const char *arg, fit_args *a)
{
    int rc = number_option(c, arg, a);
    if (rc != 1)
        return rc;
    switch (c) {
    case 'o': a->output = arg; break;
    case O_VARIANT:
        if ((c = sig_variant_parse(arg)) < 0)
            return cli_fail(CMD, "--variant: '%s' is not a variant (count, count_idf, "
                            "sqrt_count, binary, gate_prob (alias gate_prob_all), "
                            "gate_logit)", arg);
        a->o.variant = (sig_variant)c;
        break;
    case O_LAYERS: a->layers_arg = arg; break;
    case O_SPLIT: a->split_arg = arg; break;
    case O_SPLITMODE:
    case O_SPLITSEED:
        if (cli_split_option(CMD, c == O_SPLITMODE ? "--split" : "--split-seed", arg,
                             &a->split))
            return CLI_BADINPUT;
        break;
    case O_INIT: a->init_arg = arg; break;
    case O_UNBAL: a->o.balanced = 0; break;
    case O_WORKERS: a->workers_arg = arg; break;
    case O_JSON: a->json = 1; break;
    case O_FULL: a->require_full = 1; break;
    case O_MAXMEM:
        return cli_parse_bytes(CMD, "--max-memory", arg, &a->max_memory) ? CLI_BADINPUT : 0;
    case 'h': usage(); return -1;
    }
    return 0;
}

static int parse_options(int argc, char **argv, fit_args *a)
{
    static const struct option opts[] = {
        {"clusters", required_argument, 0, 'k'}, {"output", required_argument, 0, 'o'},
        {"variant", required_argument, 0, O_VARIANT}, {"layers", required_argument, 0, O_LAYERS},
        {"calib-split", required_argument, 0, O_SPLIT}, {"seed", required_argument, 0, O_SEED},
        {"iters", required_argument, 0, O_ITERS}, {"init-rows", required_argument, 0, O_INIT},
        {"unbalanced", no_argument, 0, O_UNBAL}, {"pairs", required_argument, 0, O_PAIRS},
        {"tau", required_argument, 0, O_TAU}, {"workers", required_argument, 0, O_WORKERS},
        {"json", no_argument, 0, O_JSON}, {"help", no_argument, 0, 'h'},
        {"require-full-routing", no_argument, 0, O_FULL},
        {"split", required_argument, 0, O_SPLITMODE},
        {"split-seed", required_argument, 0, O_SPLITSEED},
        {"max-memory", required_argument, 0, O_MAXMEM}, {0, 0, 0, 0},
    };
    int c, have_k = 0;
    model_fit_opts_default(&a->o, 0);
    split_spec_default(&a->split);
    a->max_memory = trace_budget_default();
    a->layers_arg = "auto";
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":k:o:h", opts, NULL)) != -1) {
        if (c == ':')
            return cli_usage_error(CMD, "option %s needs a value", argv[optind - 1]);
        if (c == '?')
            return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        int rc = one_option(c, optarg, a);
        if (rc)
            return rc;
        have_k |= c == 'k';
    }
    if (optind != argc - 1)
        return cli_usage_error(CMD, optind >= argc ? "no trace file given"
                                                   : "one trace file expected");
    a->trace = argv[optind];
    if (!have_k)
        return cli_usage_error(CMD, "-k K (the number of clusters) is required");
    if (!a->output && a->o.iters > 0)
        return cli_usage_error(CMD, "-o MODEL.h5 is required (except with --iters 0)");
    if (a->o.iters == 0 && !a->init_arg)
        return cli_fail(CMD, "--iters 0 needs --init-rows (the centroids to assign to)");
    return 0;
}

/* --layers against the trace's L. */
static int parse_layers(fit_args *a, int L)
{
    if (!strcmp(a->layers_arg, "auto")) {
        a->o.layers = MODEL_LAYERS_AUTO;
        return 0;
    }
    if (!strcmp(a->layers_arg, "all")) {
        a->o.layers = MODEL_LAYERS_ALL;
        return 0;
    }
    long long *v;
    int n;
    if (cli_parse_int_list(CMD, "--layers", a->layers_arg, 0, L - 1, &v, &n))
        return CLI_BADINPUT;
    a->layer_list = malloc((size_t)n * sizeof *a->layer_list);
    for (int i = 0; a->layer_list && i < n; i++)
        a->layer_list[i] = (int)v[i];
    free(v);
    if (!a->layer_list)
        return cli_error(CMD, "out of memory");
    a->o.layers = MODEL_LAYERS_LIST;
    a->o.layer_list = a->layer_list;
    a->o.n_layer_list = n;
    return 0;
}

/* --calib-split: a row count, or a fraction when it has a '.' or 'e'. */
static int parse_split(fit_args *a, int64_t n)
{
    a->calib_n = n;
    if (!a->split_arg)
        return 0;
    if (strpbrk(a->split_arg, ".eE")) {
        double f;
        if (cli_parse_double(CMD, "--calib-split", a->split_arg, 0, 1, &f))
            return CLI_BADINPUT;
        if (f <= 0)
            return cli_fail(CMD, "--calib-split: fraction %g must be in (0, 1]", f);
        a->calib_n = (int64_t)floor(f * (double)n);
        if (a->calib_n < 1)
            return cli_fail(CMD, "--calib-split: %g of %lld requests is no row", f, (long long)n);
        return 0;
    }
    long long v;
    if (cli_parse_int(CMD, "--calib-split", a->split_arg, 1, n, &v))
        return CLI_BADINPUT;
    a->calib_n = v;
    return 0;
}

static int parse_init_rows(fit_args *a)
{
    if (!a->init_arg)
        return 0;
    long long *v;
    int n;
    if (cli_parse_int_list(CMD, "--init-rows", a->init_arg, 0, a->calib_n - 1, &v, &n))
        return CLI_BADINPUT;
    if (n != a->o.K) {
        free(v);
        return cli_fail(CMD, "--init-rows: %d rows given for K = %d clusters", n, a->o.K);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (v[i] == v[j]) {
                free(v);
                return cli_fail(CMD, "--init-rows: row %lld appears twice", v[i]);
            }
    a->init_rows = malloc((size_t)n * sizeof *a->init_rows);
    for (int i = 0; a->init_rows && i < n; i++)
        a->init_rows[i] = v[i];
    free(v);
    if (!a->init_rows)
        return cli_error(CMD, "out of memory");
    a->o.init_rows = a->init_rows;
    return 0;
}

static int parse_workers(fit_args *a)
{
    if (!a->workers_arg)
        return 0;
    a->workers_buf = strdup(a->workers_arg);
    a->workers = calloc((size_t)a->o.K + 1, sizeof *a->workers);
    if (!a->workers_buf || !a->workers)
        return cli_error(CMD, "out of memory");
    int n = 0;
    char *p = a->workers_buf;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (!*p)
            return cli_fail(CMD, "--workers: name %d is empty", n);
        if (strlen(p) >= MODEL_WORKER_MAX)
            return cli_fail(CMD, "--workers: name %d is longer than %d bytes", n,
                            MODEL_WORKER_MAX - 1);
        for (int j = 0; j < n && j < a->o.K; j++)
            if (!strcmp(a->workers[j], p))
                return cli_fail(CMD, "--workers: '%s' appears twice", p);
        if (n < a->o.K)
            a->workers[n] = p;
        n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (n != a->o.K)
        return cli_fail(CMD, "--workers: %d names given for K = %d clusters", n, a->o.K);
    a->o.workers = (const char *const *)a->workers;
    return 0;
}

/* ---- report ---- */

typedef struct stage_times {
    double load, write, total;
} stage_times;

static json_t *real_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static void print_json(const fit_args *a, const model_t *m, const model_fit_report *r,
                       const stage_times *st)
{
    json_t *o = json_object(), *sizes = json_array(), *mask = json_array();
    json_t *workers = json_array(), *zero = json_array(), *secs = json_object();
    for (int c = 0; c < m->K; c++) {
        json_array_append_new(sizes, json_integer(m->sizes[c]));
        json_array_append_new(workers, json_string(m->workers[c]));
    }
    for (int i = 0; i < m->recipe.n_layers; i++)
        json_array_append_new(mask, json_integer(m->recipe.layers[i]));
    for (int64_t i = 0; i < r->n_zero; i++)
        json_array_append_new(zero, json_integer(r->zero_rows[i]));
    json_object_set_new(o, "k", json_integer(m->K));
    json_object_set_new(o, "sizes", sizes);
    json_object_set_new(o, "objective", json_real(m->objective));
    json_object_set_new(o, "rho", real_or_null(m->rho));
    json_object_set_new(o, "mask", mask);
    json_object_set_new(o, "n_star", json_integer(m->n_star));
    if (r->curve) {
        json_t *curve = json_array();
        for (int i = 0; i < m->recipe.L; i++)
            json_array_append_new(curve, real_or_null(r->curve[i]));
        json_object_set_new(o, "curve", curve);
    }
    json_object_set_new(secs, "load", json_real(st->load));
    json_object_set_new(secs, "recipe", json_real(r->t_recipe));
    json_object_set_new(secs, "selection", json_real(r->t_selection));
    json_object_set_new(secs, "signatures", json_real(r->t_signatures));
    json_object_set_new(secs, "fit", json_real(r->t_fit));
    json_object_set_new(secs, "write", json_real(st->write));
    json_object_set_new(secs, "total", json_real(st->total));
    json_object_set_new(o, "seconds", secs);
    json_object_set_new(o, "variant", json_string(sig_variant_name(m->recipe.variant)));
    json_object_set_new(o, "layer_select", json_string(m->layer_select));
    json_object_set_new(o, "balanced", json_boolean(m->balanced == 1));
    json_object_set_new(o, "iterations", json_integer(r->iterations));
    json_object_set_new(o, "converged", json_boolean(r->converged));
    json_object_set_new(o, "calib_rows", json_integer(r->n_rows));
    json_object_set_new(o, "sample", a->sample[0] ? json_string(a->sample) : json_null());
    json_object_set_new(o, "fit_rows", json_integer(m->fit_rows));
    json_object_set_new(o, "zero_rows", zero);
    json_object_set_new(o, "workers", workers);
    json_object_set_new(o, "tau", json_real(m->tau));
    json_object_set_new(o, "seed", json_integer((json_int_t)m->seed));
    json_object_set_new(o, "calib_sha256", json_string(m->calib_sha256));
    json_object_set_new(o, "output", a->output ? json_string(a->output) : json_null());
    cli_print_json(o);
}

static void print_text(const fit_args *a, const model_t *m, const model_fit_report *r,
                       const stage_times *st, int64_t n_total)
{
    printf("fit: %s, %lld calibration rows of %lld, variant %s\n", a->trace,
           (long long)r->n_rows, (long long)n_total, sig_variant_name(m->recipe.variant));
    if (a->sample[0])
        printf("%s: a chunk sample of the calibration rows, within --max-memory\n",
               a->sample);
    printf("mask: %d of %d layers (%s):", m->recipe.n_layers, m->recipe.L, m->layer_select);
    for (int i = 0; i < m->recipe.n_layers; i++)
        printf("%s%d", i ? "," : " ", m->recipe.layers[i]);
    printf("\nrho: %s", isfinite(m->rho) ? "" : "n/a (no decode_counts or undefined)");
    if (isfinite(m->rho))
        printf("%.4f", m->rho);
    printf("   N*: %d\n", m->n_star);
    printf("clusters: K = %d, %s, %d iteration%s%s\n", m->K,
           m->balanced ? "balanced (cap ceil(N/K))" : "unbalanced", r->iterations,
           r->iterations == 1 ? "" : "s", r->converged ? ", converged" : "");
    printf("sizes:");
    for (int c = 0; c < m->K; c++)
        printf(" %s=%lld", m->workers[c], (long long)m->sizes[c]);
    printf("\nobjective: %.6f (total cosine distance; mean %.6f over %lld signatures)\n",
           m->objective, m->fit_rows ? m->objective / (double)m->fit_rows : 0.0,
           (long long)m->fit_rows);
    printf("seconds: load %.3f  recipe %.3f  selection %.3f  signatures %.3f  fit %.3f  "
           "write %.3f  total %.3f\n",
           st->load, r->t_recipe, r->t_selection, r->t_signatures, r->t_fit, st->write,
           st->total);
    if (a->output)
        printf("wrote %s\n", a->output);
    else
        printf("no model written (--iters 0 without -o)\n");
}

static void report_zero(const model_fit_report *r)
{
    if (r->n_zero == 0)
        return;
    fprintf(stderr, "eldr fit: left out %lld request%s with an all-zero signature under the "
            "mask (row%s", (long long)r->n_zero, r->n_zero == 1 ? "" : "s",
            r->n_zero == 1 ? "" : "s");
    for (int64_t i = 0; i < r->n_zero && i < 10; i++)
        fprintf(stderr, "%s%lld", i ? ", " : " ", (long long)r->zero_rows[i]);
    fprintf(stderr, "%s)\n", r->n_zero > 10 ? ", ..." : "");
}

/* ---- the command ---- */

/* The datasets a fit reads: counts (and the gate matrix its variant
 * reads), labels, tokens; never token rows or request ids. */
static unsigned fit_drop(const fit_args *a)
{
    unsigned drop = TRACE_DROP_TOKENS | TRACE_DROP_IDS;
    if (!sig_variant_uses_gate(a->o.variant))
        drop |= TRACE_DROP_GATES;
    return drop;
}

/* The calibration rows as file rows (ascending), into *rows: the drawn
 * split (from an index of the file: no count is read for it), the head,
 * or every row. */
static int calibration_rows(fit_args *a, const trace_header_t *h, int64_t **rows)
{
    char err[ELDR_ERRLEN];
    int64_t n = a->calib_n;
    if (n == h->n || a->split.mode == SPLIT_HEAD) {
        if (!(*rows = malloc(((size_t)n + 1) * sizeof **rows)))
            return cli_error(CMD, "out of memory");
        for (int64_t i = 0; i < n; i++)
            (*rows)[i] = i;
        if (n < h->n)
            snprintf(a->provenance, sizeof a->provenance, "head %lld", (long long)n);
        return 0;
    }
    trace_t *idx = NULL;
    trace_load_opts io = {.drop = TRACE_DROP_COUNTS | TRACE_DROP_IDS};
    split_rows sr;
    if (trace_load_some(a->trace, &io, &idx, err, sizeof err) < 0)
        return cli_fail(CMD, "%s", err);
    int rc = split_make_count(idx, a->split.mode, a->split.seed, n, &sr, err, sizeof err);
    trace_free(idx);
    if (rc < 0)
        return cli_fail(CMD, "%s: %s", a->trace, err);
    split_provenance(&sr, a->provenance, sizeof a->provenance);
    *rows = sr.calib;        /* taken: the eval rows go */
    a->calib_n = sr.n_calib;
    sr.calib = NULL;
    split_rows_free(&sr);
    return 0;
}

static int load_calibration(fit_args *a, trace_t **t, int64_t *n_total, char *sha)
{
    char err[ELDR_ERRLEN];
    trace_header_t h;
    int rc;
    if (trace_read_header(a->trace, &h, err, sizeof err) < 0)
        return cli_fail(CMD, "%s", err);
    *n_total = h.n;
    if ((rc = parse_layers(a, h.L)) || (rc = parse_split(a, h.n)) ||
        (rc = parse_init_rows(a)) || (rc = parse_workers(a)))
        return rc;
    if (a->o.K > a->calib_n)
        return cli_fail(CMD, "-k: K = %d exceeds the %lld calibration requests", a->o.K,
                        (long long)a->calib_n);
    if (a->o.layers == MODEL_LAYERS_AUTO && !(h.has & TRACE_HAS_DECODE))
        return cli_fail(CMD, "%s has no decode_counts, which --layers auto needs; pass "
                        "--layers all or a list", a->trace);
    if (sha256_file(a->trace, sha, err, sizeof err) < 0)
        return cli_fail(CMD, "%s", err);
    snprintf(a->provenance, sizeof a->provenance, "all");
    int64_t *rows = NULL;
    if ((rc = calibration_rows(a, &h, &rows)))
        return rc;
    /* the budget prices a row at what it loads plus its float signature
     * over every layer (the mask is not chosen yet): the fit's peak */
    trace_load_opts lo = {.drop = fit_drop(a), .rows = rows, .n_rows = a->calib_n};
    double per_row = trace_row_bytes(&h, lo.drop) + (double)h.L * h.E * sizeof(float);
    rc = cli_budget_rows(CMD, a->trace, rows, &lo.n_rows, per_row, a->max_memory, 0,
                         a->split.seed, a->sample, sizeof a->sample);
    if (rc == 1) {
        snprintf(a->provenance, sizeof a->provenance, "sampled %lld of %lld",
                 (long long)lo.n_rows, (long long)a->calib_n);
        a->calib_n = lo.n_rows;
        rc = 0;
    }
    if (rc == 0 && lo.n_rows == h.n)
        lo.rows = NULL;      /* every row: one read a dataset */
    if (rc == 0)
        rc = cli_load_some(CMD, a->trace, &lo, t);
    free(rows);
    if (rc == 0 && a->o.K > (*t)->n)
        return cli_fail(CMD, "-k: K = %d exceeds the %lld sampled calibration requests "
                        "(raise --max-memory)", a->o.K, (long long)(*t)->n);
    return rc;
}

int cmd_fit(int argc, char **argv)
{
    fit_args a;
    memset(&a, 0, sizeof a);
    int rc = parse_options(argc, argv, &a);
    if (rc) {
        args_free(&a);
        return rc < 0 ? CLI_OK : rc;
    }
    char err[ELDR_ERRLEN], sha[SHA256_HEX];
    stage_times st = {0};
    double t0 = cli_now();
    trace_t *t = NULL;
    int64_t n_total = 0;
    if ((rc = load_calibration(&a, &t, &n_total, sha)) ||
        (a.require_full && (rc = cli_require_full_routing(CMD, a.trace, t)))) {
        trace_free(t);
        args_free(&a);
        return rc;
    }
    st.load = cli_now() - t0;
    char *tr = strdup(a.trace);
    a.o.calib_sha256 = sha;
    a.o.calib_file = tr ? basename(tr) : "";
    /* every stage on the bar: layer selection, signatures, k-means */
    cli_progress bar;
    cli_progress_start(&bar, CMD);
    a.o.on_progress = cli_progress_core;
    a.o.on_progress_ctx = &bar;
    model_t *m = NULL;
    model_fit_report rep;
    /* the decode counts go once the mask is chosen: never with the
     * signatures at once */
    rc = model_fit_release(t, &a.o, &m, &rep, err, sizeof err);
    cli_progress_done(&bar);
    if (rc < 0) {
        rc = cli_fail(CMD, "%s: %s", a.trace, err);
        goto out;
    }
    snprintf(m->calib_split, sizeof m->calib_split, "%s", a.provenance);
    /* what the calibration file was: eldr's trace or their capture */
    import_format fmt = import_sniff(a.trace);
    snprintf(m->calib_format, sizeof m->calib_format, "%s",
             fmt == IMPORT_NPZ ? IMPORT_NPZ_FORMAT : fmt == IMPORT_JSONL ? IMPORT_JSONL_FORMAT
                                                                        : TRACE_FORMAT);
    report_zero(&rep);
    double tw = cli_now();
    if (a.output && model_save(m, a.output, err, sizeof err) < 0) {
        rc = cli_fail(CMD, "%s", err);
        model_fit_report_free(&rep);
        goto out;
    }
    st.write = cli_now() - tw;
    st.total = cli_now() - t0;
    if (a.json)
        print_json(&a, m, &rep, &st);
    else
        print_text(&a, m, &rep, &st, n_total);
    model_fit_report_free(&rep);
    rc = CLI_OK;
out:
    model_free(m);
    trace_free(t);
    free(tr);
    args_free(&a);
    return rc;
}
