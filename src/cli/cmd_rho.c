/* cmd_rho.c - `eldr rho TRACE`: signature quality rho (the paper's Eq. 1),
 * greedy layer selection (Figure 8) and the variant comparison (Figure 7).
 *
 * One variant: rho with all layers, a given layer list, or the greedy
 * selection (--layers auto); --curve adds the cumulative rho against the
 * number of layers kept, as a table and a text plot with N* marked.
 * --all-variants: every variant with all layers and after greedy selection,
 * best first; variants whose data the trace lacks are listed as
 * unavailable. IDF (count_idf) is fitted on all rows of the trace: rho is a
 * diagnostic over the trace, not a held-out score. The maths is in
 * src/core/rho.h and layersel.h; docs/calibration.md explains it. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_sim.h"
#include "err.h"
#include "layersel.h"
#include "rho.h"
#include "signature.h"
#include "trace.h"
#include "trace_budget.h"

static const char *CMD = "rho";

enum { LAYERS_ALL, LAYERS_AUTO, LAYERS_LIST };

typedef struct rho_opts {
    const char *path;
    int variant;          /* sig_variant */
    int all_variants;
    int layers_mode;
    const char *layers_arg;
    long long pairs;      /* 0 = all pairs */
    long long seed;
    int ci, ci_samples;
    int curve, json, threads;
    int require_full;     /* --require-full-routing */
    size_t max_memory;    /* --max-memory */
} rho_opts;

/* What one variant produced. */
typedef struct vresult {
    sig_variant v;
    int available;
    double rho;           /* rho of the reported mask */
    double rho_all;       /* all layers (--all-variants) */
    int *mask, n_mask, n_star;
    int *order;           /* greedy order and curve, when greedy ran */
    double *curve;
    int n_curve;
    int has_ci;
    double ci_lo, ci_hi;
    int64_t n_zero;
} vresult;

static void usage(void)
{
    printf("usage: eldr rho TRACE [--variant V | --all-variants] [--layers all|auto|LIST]\n"
           "                [--pairs P|all] [--seed S] [--ci] [--curve] [--json]\n"
           "\n"
           "Signature quality rho (the ELDR paper's Eq. 1): Spearman's rank correlation,\n"
           "over request pairs, of the prefill-signature distance 1 - cos(s_i, s_j) against\n"
           "the decode distance 1 - cos(p_i, p_j) (p = decode counts over all layers).\n"
           "Needs a trace with decode_counts. IDF (count_idf) is fitted on all rows.\n"
           "\n"
           "  --variant V       count, count_idf (default), sqrt_count, binary, gate_prob,\n"
           "                    gate_logit (gate_prob_all: gate_prob)\n"
           "  --layers M        all (default): every layer; LIST: e.g. 0,3,8-11 (0-based);\n"
           "                    auto: greedy forward selection, keeping the layers up to\n"
           "                    the peak N* of the cumulative rho curve\n"
           "  --all-variants    every variant: rho with all layers and after greedy\n"
           "                    selection, best first; variants the trace lacks data for\n"
           "                    are listed as unavailable\n"
           "  --curve           the greedy curve (rho against layers kept) as a table and a\n"
           "                    text plot, N* marked\n"
           "  --pairs P|all     P random pairs (default %d; draws with i == j are dropped,\n"
           "                    so slightly fewer remain) or all N(N-1)/2 pairs\n"
           "  --seed S          seed of the pair sample and the bootstrap (default %d)\n"
           "  --ci              95%% bootstrap confidence interval (resampling pairs)\n"
           "  --ci-samples B    bootstrap resamples (default 1000)\n"
           "  --threads N       threads for the greedy search (default: all CPUs, max 8)\n"
           "  --require-full-routing  refuse a trace whose prompts lost rows of routing\n"
           "                    (prefill_unrouted_tokens, vLLM's prefix cache)\n"
           "  --max-memory B    bound what is loaded (K, M, G suffixes; default half of\n"
           "                    physical memory): a bigger trace is sampled by whole\n"
           "                    chunks of rows, and the output says so\n"
           "  --json            machine-readable output: variant, rho, mask, n_star, curve\n"
           "                    (a list of those with --all-variants)\n"
           "  -h, --help        this text\n"
           "\n"
           "On a terminal, greedy selection shows a progress bar on stderr (none when\n"
           "stderr is a pipe or a file; stdout never gets it).\n"
           "Exit status: 0 success; 2 bad input (one line on stderr); 1 other failure.\n"
           "See docs/calibration.md.\n",
           RHO_DEFAULT_PAIRS, RHO_DEFAULT_SEED);
}

static int parse_args(int argc, char **argv, rho_opts *o)
{
    static const struct option longopts[] = {
        {"variant", required_argument, NULL, 'v'},
        {"all-variants", no_argument, NULL, 'A'},
        {"layers", required_argument, NULL, 'l'},
        {"pairs", required_argument, NULL, 'p'},
        {"seed", required_argument, NULL, 's'},
        {"ci", no_argument, NULL, 'c'},
        {"ci-samples", required_argument, NULL, 'B'},
        {"curve", no_argument, NULL, 'C'},
        {"threads", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},
        {"require-full-routing", no_argument, NULL, 'F'},
        {"max-memory", required_argument, NULL, 'M'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (rho_opts){.variant = SIG_COUNT_IDF, .layers_mode = LAYERS_ALL,
                    .pairs = RHO_DEFAULT_PAIRS, .seed = RHO_DEFAULT_SEED, .ci_samples = 1000,
                    .max_memory = trace_budget_default()};
    int variant_given = 0, layers_given = 0, c;
    long long v;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'v':
            o->variant = sig_variant_parse(optarg);
            if (o->variant < 0)
                return cli_fail(CMD, "--variant: unknown variant '%s' (count, count_idf, "
                                "sqrt_count, binary, gate_prob (alias gate_prob_all), "
                                "gate_logit)", optarg);
            variant_given = 1;
            break;
        case 'A': o->all_variants = 1; break;
        case 'l':
            layers_given = 1;
            o->layers_arg = optarg;
            o->layers_mode = !strcmp(optarg, "all") ? LAYERS_ALL
                           : !strcmp(optarg, "auto") ? LAYERS_AUTO : LAYERS_LIST;
            break;
        case 'p':
            if (!strcmp(optarg, "all")) {
                o->pairs = 0;
                break;
            }
            if (cli_parse_int(CMD, "--pairs", optarg, 1, INT32_MAX, &o->pairs))
                return CLI_BADINPUT;
            break;
        case 's':
            if (cli_parse_int(CMD, "--seed", optarg, 0, INT64_MAX, &o->seed))
                return CLI_BADINPUT;
            break;
        case 'c': o->ci = 1; break;
        case 'B':
            if (cli_parse_int(CMD, "--ci-samples", optarg, 10, 1000000, &v))
                return CLI_BADINPUT;
            o->ci_samples = (int)v;
            break;
        case 'C': o->curve = 1; break;
        case 't':
            if (cli_parse_int(CMD, "--threads", optarg, 1, 8, &v))
                return CLI_BADINPUT;
            o->threads = (int)v;
            break;
        case 'j': o->json = 1; break;
        case 'F': o->require_full = 1; break;
        case 'M':
            if (cli_parse_bytes(CMD, "--max-memory", optarg, &o->max_memory))
                return CLI_BADINPUT;
            break;
        case 'h': usage(); return -1;
        case ':': return cli_usage_error(CMD, "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "no trace file given");
    if (optind + 1 < argc)
        return cli_usage_error(CMD, "one trace file expected, got '%s' too", argv[optind + 1]);
    o->path = argv[optind];
    if (o->all_variants && variant_given)
        return cli_fail(CMD, "--all-variants and --variant exclude each other");
    if (o->all_variants && layers_given && o->layers_mode != LAYERS_AUTO)
        return cli_fail(CMD, "--all-variants reports all layers and the greedy selection "
                        "of each variant; --layers %s does not apply", o->layers_arg);
    if (o->all_variants)
        o->layers_mode = LAYERS_AUTO;
    return 0;
}

/* A core failure is the input's fault (exit 2) unless memory ran out. */
static int core_fail(const char *err)
{
    if (strstr(err, "out of memory"))
        return cli_error(CMD, "%s", err);
    return cli_fail(CMD, "%s", err);
}

static void vresult_free(vresult *r)
{
    free(r->mask);
    free(r->order);
    free(r->curve);
    memset(r, 0, sizeof *r);
}

static int *int_copy(const int *a, int n)
{
    int *c = malloc((size_t)(n > 0 ? n : 1) * sizeof *c);
    if (c && n > 0)
        memcpy(c, a, (size_t)n * sizeof *c);
    return c;
}

/* Everything shared by the variants of one run. */
typedef struct run_ctx {
    const trace_t *t;
    const rho_opts *o;
    const rho_pairs *pr;
    const double *dec_dist;
    const float *idf_full;
    const int *list;      /* --layers LIST, sorted by the recipe */
    int n_list;
    cli_progress *bar;    /* greedy selection's progress */
    char what[SIG_N_VARIANTS][48]; /* its stage name per variant */
} run_ctx;

/* The greedy steps on the bar, under the variant's stage name. */
typedef struct sel_progress {
    cli_progress *bar;
    const char *what;
} sel_progress;

static void on_select(void *ctx, const char *what, int64_t done, int64_t total)
{
    sel_progress *s = ctx;
    (void)what;
    cli_progress_count(s->bar, s->what, done, total, " steps/s");
}

/* rho of one recipe (mask), with signature distances into sd. */
static int eval_mask(const run_ctx *x, sig_variant v, const int *mask, int n, double *sd,
                     double *rho, int64_t *n_zero, char *err, size_t errlen)
{
    sig_recipe r;
    if (sig_recipe_init(&r, v, x->t->L, x->t->E, mask, n, err, errlen))
        return -1;
    int rc = (v == SIG_COUNT_IDF && sig_recipe_set_idf(&r, x->idf_full, err, errlen))
             || rho_eval(x->t, &r, x->pr, x->dec_dist, sd, rho, n_zero, err, errlen) ? -1 : 0;
    sig_recipe_free(&r);
    return rc;
}

/* One variant: greedy when asked (auto, --curve, --all-variants), the rho
 * of the reported mask, the all-layer rho, and the bootstrap interval. */
static int run_variant(const run_ctx *x, sig_variant v, vresult *out, char *err, size_t errlen)
{
    const trace_t *t = x->t;
    const rho_opts *o = x->o;
    memset(out, 0, sizeof *out);
    out->v = v;
    double *sd = eldr_calloc((size_t)x->pr->n, sizeof *sd);
    int *all = eldr_calloc((size_t)t->L, sizeof *all);
    int rc = -1;
    if (!sd || !all) {
        eldr_errf(err, errlen, "out of memory for %lld pairs", (long long)x->pr->n);
        goto out;
    }
    for (int l = 0; l < t->L; l++)
        all[l] = l;
    if (o->layers_mode == LAYERS_AUTO || o->curve) {
        layersel_result g;
        sel_progress sp = {x->bar, x->what[v]};
        int grc = layersel_run_progress(t, v, x->idf_full, x->pr, o->threads, NULL, on_select,
                                        &sp, &g, err, errlen);
        cli_progress_done(x->bar);
        if (grc)
            goto out;
        out->order = g.order;
        out->curve = g.curve;
        out->n_curve = g.L;
        if (o->layers_mode == LAYERS_AUTO) {
            out->mask = g.mask;
            out->n_mask = out->n_star = g.n_star;
            g.mask = NULL;
        }
        g.order = NULL;
        g.curve = NULL;
        layersel_result_free(&g);
    }
    if (o->layers_mode == LAYERS_ALL)
        out->mask = int_copy(all, out->n_mask = t->L);
    else if (o->layers_mode == LAYERS_LIST)
        out->mask = int_copy(x->list, out->n_mask = x->n_list);
    if (!out->mask) {
        eldr_errf(err, errlen, "out of memory");
        goto out;
    }
    if (o->layers_mode != LAYERS_AUTO)
        out->n_star = out->n_mask;
    double rho_mask;
    if (eval_mask(x, v, out->mask, out->n_mask, sd, &rho_mask, &out->n_zero, err, errlen))
        goto out;
    /* greedy: report the curve's value at N*, which is what selected the
     * mask (a from-scratch rho of the mask equals it up to the order of
     * additions); otherwise the from-scratch rho */
    out->rho = o->layers_mode == LAYERS_AUTO ? out->curve[out->n_star - 1] : rho_mask;
    if (o->all_variants) {
        if (eval_mask(x, v, all, t->L, NULL, &out->rho_all, NULL, err, errlen))
            goto out;
    }
    if (o->ci) {
        if (rho_bootstrap(sd, x->dec_dist, x->pr->n, o->ci_samples, 0.95, (uint64_t)o->seed,
                          &out->ci_lo, &out->ci_hi, err, errlen))
            goto out;
        out->has_ci = 1;
    }
    out->available = 1;
    rc = 0;
out:
    free(sd);
    free(all);
    if (rc)
        vresult_free(out);
    return rc;
}

/* Why a variant cannot run on this trace, or NULL when it can. */
static const char *unavailable(const trace_t *t, sig_variant v)
{
    if (v == SIG_GATE_PROB && !t->gate_prob)
        return "the trace has no gate_prob";
    if (v == SIG_GATE_LOGIT && !t->gate_logit)
        return "the trace has no gate_logit";
    return NULL;
}

/* ---- output --------------------------------------------------------------- */

static json_t *int_array(const int *a, int n)
{
    json_t *j = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(j, json_integer(a[i]));
    return j;
}

/* NaN (an undefined rho) becomes null: JSON has no NaN. */
static json_t *real_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *vresult_json(const vresult *r, const rho_opts *o)
{
    json_t *j = json_object();
    json_object_set_new(j, "variant", json_string(sig_variant_name(r->v)));
    if (!r->available) {
        json_object_set_new(j, "available", json_false());
        json_object_set_new(j, "reason", json_string(r->v == SIG_GATE_PROB
                                                         ? "the trace has no gate_prob"
                                                         : "the trace has no gate_logit"));
        json_object_set_new(j, "rho", json_null());
        json_object_set_new(j, "mask", json_array());
        json_object_set_new(j, "n_star", json_integer(0));
        json_object_set_new(j, "curve", json_array());
        return j;
    }
    json_object_set_new(j, "rho", real_or_null(r->rho));
    json_object_set_new(j, "mask", int_array(r->mask, r->n_mask));
    json_object_set_new(j, "n_star", json_integer(r->n_star));
    json_t *c = json_array();
    for (int s = 0; s < r->n_curve; s++)
        json_array_append_new(c, real_or_null(r->curve[s]));
    json_object_set_new(j, "curve", c);
    if (r->order)
        json_object_set_new(j, "order", int_array(r->order, r->n_curve));
    if (o->all_variants) {
        json_object_set_new(j, "available", json_true());
        json_object_set_new(j, "rho_all", real_or_null(r->rho_all));
    }
    json_object_set_new(j, "zero_signatures", json_integer(r->n_zero));
    if (r->has_ci) {
        json_t *ci = json_array();
        json_array_append_new(ci, json_real(r->ci_lo));
        json_array_append_new(ci, json_real(r->ci_hi));
        json_object_set_new(j, "ci", ci);
        json_object_set_new(j, "ci_level", json_real(0.95));
        json_object_set_new(j, "ci_samples", json_integer(o->ci_samples));
    }
    return j;
}

static void add_run_info(json_t *j, const run_ctx *x, double secs)
{
    json_object_set_new(j, "trace", json_string(x->o->path));
    json_object_set_new(j, "requests", json_integer(x->t->n));
    json_object_set_new(j, "trace_layers", json_integer(x->t->L));
    json_object_set_new(j, "pairs", json_integer(x->pr->n));
    json_object_set_new(j, "pairs_drawn", json_integer(x->pr->drawn));
    json_object_set_new(j, "pair_mode", json_string(x->o->pairs ? "sample" : "all"));
    json_object_set_new(j, "seed", json_integer(x->o->seed));
    json_object_set_new(j, "seconds", json_real(secs));
}

static void print_mask(const char *label, const int *m, int n)
{
    printf("%s", label);
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? "," : "", m[i]);
    printf("\n");
}

/* The greedy curves as a text plot: one column (or two) per step, rho on
 * the vertical axis; series k drawn with marks[k], its N* point in
 * peaks[k]. */
static void plot_curves(const vresult *rs, int n, const char *marks, const char *peaks, int L)
{
    enum { H = 12 };
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < n; k++)
        for (int s = 0; s < rs[k].n_curve; s++)
            if (isfinite(rs[k].curve[s])) {
                lo = fmin(lo, rs[k].curve[s]);
                hi = fmax(hi, rs[k].curve[s]);
            }
    if (!(hi >= lo))
        return;
    if (hi - lo < 1e-6) {
        lo -= 0.005;
        hi += 0.005;
    }
    int cw = L <= 40 ? 2 : 1, W = L * cw;
    char grid[H][2 * 4096 + 1];
    if (W > 2 * 4096)
        return;
    for (int r = 0; r < H; r++) {
        memset(grid[r], ' ', (size_t)W);
        grid[r][W] = 0;
    }
    for (int k = 0; k < n; k++)
        for (int s = 0; s < rs[k].n_curve; s++) {
            double y = rs[k].curve[s];
            if (!isfinite(y))
                continue;
            int r = (int)lround((hi - y) / (hi - lo) * (H - 1));
            char *cell = &grid[r][s * cw + cw - 1];
            /* N* wins its cell; otherwise the first series drawn keeps it */
            if (s == rs[k].n_star - 1)
                *cell = peaks[k];
            else if (*cell == ' ')
                *cell = marks[k];
        }
    printf("\n rho\n");
    for (int r = 0; r < H; r++) {
        double y = hi - (hi - lo) * r / (H - 1);
        if (r == 0 || r == H - 1 || r == H / 2)
            printf("%7.4f |%s\n", y, grid[r]);
        else
            printf("        |%s\n", grid[r]);
    }
    printf("        +");
    for (int c = 0; c < W; c++)
        putchar('-');
    /* step numbers under their marks: 1, 5, 10, ... */
    char axis[2 * 4096 + 8];
    memset(axis, ' ', sizeof axis);
    for (int s = 1; s <= L; s++)
        if (s == 1 || s % 5 == 0) {
            int col = (s - 1) * cw + cw - 1;
            char lab[16];
            int len = snprintf(lab, sizeof lab, "%d", s);
            if (col + len <= W + 4)
                memcpy(axis + col, lab, (size_t)len);
        }
    axis[W + 4] = 0;
    printf("\n         %s", axis);
    printf("  layers kept\n");
}

static void print_curve_table(const vresult *r)
{
    printf("\n step  layer  rho\n");
    for (int s = 0; s < r->n_curve; s++)
        printf(" %4d  %5d  %.6f%s\n", s + 1, r->order[s], r->curve[s],
               s == r->n_star - 1 && r->n_curve ? "  <- N*" : "");
}

static void print_header(const run_ctx *x)
{
    const trace_t *t = x->t;
    printf("trace %s: %lld requests, %d layers x %d experts, top-%d\n", x->o->path,
           (long long)t->n, t->L, t->E, t->k);
    if (x->o->pairs)
        printf("pairs: %lld of %lld drawn (seed %lld; %lld with i == j dropped)\n",
               (long long)x->pr->n, (long long)x->pr->drawn, x->o->seed,
               (long long)(x->pr->drawn - x->pr->n));
    else
        printf("pairs: all %lld\n", (long long)x->pr->n);
}

static void print_one(const run_ctx *x, const vresult *r)
{
    const rho_opts *o = x->o;
    print_header(x);
    printf("variant %s, layers %s", sig_variant_name(r->v),
           o->layers_mode == LAYERS_ALL ? "all" : o->layers_mode == LAYERS_AUTO ? "auto" : "list");
    if (o->layers_mode == LAYERS_AUTO)
        printf(": greedy kept N* = %d of %d layers", r->n_star, x->t->L);
    printf("\n");
    print_mask("mask: ", r->mask, r->n_mask);
    printf("rho = %.6f", r->rho);
    if (r->has_ci)
        printf("   95%% CI [%.4f, %.4f] (%d bootstrap resamples of the pairs)", r->ci_lo,
               r->ci_hi, o->ci_samples);
    printf("\n");
    if (r->n_zero)
        printf("note: %lld requests have an all-zero signature under this mask "
               "(distance 1 to every other request)\n", (long long)r->n_zero);
    if (o->curve && r->order) {
        print_curve_table(r);
        plot_curves(r, 1, "o", "*", x->t->L);
        printf("         * = N* (%d layers, rho %.6f)\n", r->n_star, r->curve[r->n_star - 1]);
    }
}

static void print_all(const run_ctx *x, const vresult *rs, int n)
{
    print_header(x);
    printf("\n%-11s %9s %11s %4s  %s\n", "variant", "rho(all)", "rho(greedy)", "N*", "mask");
    for (int k = 0; k < n; k++) {
        const vresult *r = &rs[k];
        if (!r->available) {
            printf("%-11s unavailable: %s\n", sig_variant_name(r->v), unavailable(x->t, r->v));
            continue;
        }
        printf("%-11s %9.4f %11.4f %4d  ", sig_variant_name(r->v), r->rho_all, r->rho, r->n_star);
        print_mask("", r->mask, r->n_mask);
        if (r->has_ci)
            printf("%-11s 95%% CI of rho(greedy): [%.4f, %.4f]\n", "", r->ci_lo, r->ci_hi);
    }
    /* the first row is often count, above the default: say why the
     * default stays (issue 30, item 6; measured in docs/signatures.md) */
    printf("\nbest first by rho. eldr fit's default stays count_idf: rho does not rank the\n"
           "variants by their routing gain on held-out rows (docs/signatures.md); to\n"
           "compare two on this trace: eldr fit --variant V --calib-split 0.5, then eldr sim -m\n");
    if (!x->o->curve)
        return;
    static const char marks[] = "abcdef", peaks[] = "ABCDEF";
    char m[8] = {0}, p[8] = {0};
    int na = 0;
    vresult shown[SIG_N_VARIANTS];
    printf("\n step");
    for (int k = 0; k < n; k++)
        if (rs[k].available) {
            printf("  %11s", sig_variant_name(rs[k].v));
            m[na] = marks[na];
            p[na] = peaks[na];
            shown[na++] = rs[k];
        }
    printf("\n");
    for (int s = 0; s < x->t->L; s++) {
        printf(" %4d", s + 1);
        for (int k = 0; k < na; k++)
            printf("  %10.6f%c", shown[k].curve[s], s == shown[k].n_star - 1 ? '*' : ' ');
        printf("\n");
    }
    plot_curves(shown, na, m, p, x->t->L);
    printf("         ");
    for (int k = 0; k < na; k++)
        printf("%c = %s  ", m[k], sig_variant_name(shown[k].v));
    printf("(capital letter = its N*)\n");
}

static int by_rho_desc(const void *a, const void *b)
{
    const vresult *x = a, *y = b;
    if (x->available != y->available)
        return y->available - x->available;
    if (x->available && x->rho != y->rho)
        return x->rho < y->rho ? 1 : -1;
    return (int)x->v - (int)y->v;
}

/* ---- the command ----------------------------------------------------------- */

/* The rows rho reads, within the budget: counts (and the gates a variant
 * reads), never token rows or ids. A row costs what it loads plus the
 * greedy search's per-request sums (L doubles). When they exceed the
 * budget, a chunk sample (note says so). */
static int load_rows(const rho_opts *o, trace_t **t, char *note, size_t note_len)
{
    char err[ELDR_ERRLEN];
    trace_header_t h;
    if (trace_read_header(o->path, &h, err, sizeof err))
        return core_fail(err);
    unsigned drop = TRACE_DROP_TOKENS | TRACE_DROP_IDS;
    if (!o->all_variants && !sig_variant_uses_gate((sig_variant)o->variant))
        drop |= TRACE_DROP_GATES;
    double per_row = trace_row_bytes(&h, drop) + (double)h.L * sizeof(double);
    return cli_load_within(CMD, o->path, &h, drop, per_row, o->max_memory, (uint64_t)o->seed,
                           note, note_len, t);
}

int cmd_rho(int argc, char **argv)
{
    rho_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    double t0 = cli_now();
    char err[ELDR_ERRLEN];
    trace_t *t = NULL;
    rho_pairs pr = {0};
    float *idf = NULL;
    double *dec = NULL;
    long long *list = NULL;
    int *ilist = NULL, n_list = 0;
    vresult rs[SIG_N_VARIANTS];
    int n_res = 0;
    memset(rs, 0, sizeof rs);

    char note[96] = "";
    if ((rc = load_rows(&o, &t, note, sizeof note)))
        goto out;
    if (o.require_full && (rc = cli_require_full_routing(CMD, o.path, t)))
        goto out;
    if (!t->decode_counts) {
        rc = cli_fail(CMD, "%s: rho needs decode_counts, which this trace lacks", o.path);
        goto out;
    }
    if (o.layers_mode == LAYERS_LIST) {
        if ((rc = cli_parse_int_list(CMD, "--layers", o.layers_arg, 0, t->L - 1, &list, &n_list)))
            goto out;
        ilist = malloc((size_t)n_list * sizeof *ilist);
        if (!ilist) {
            rc = cli_error(CMD, "out of memory");
            goto out;
        }
        for (int i = 0; i < n_list; i++)
            ilist[i] = (int)list[i];
        sig_recipe chk;   /* sorts, and rejects duplicates with a clear message */
        if (sig_recipe_init(&chk, SIG_COUNT, t->L, t->E, ilist, n_list, err, sizeof err)) {
            rc = cli_fail(CMD, "--layers: %s", err);
            goto out;
        }
        memcpy(ilist, chk.layers, (size_t)n_list * sizeof *ilist);
        sig_recipe_free(&chk);
    }
    if (!o.all_variants && unavailable(t, (sig_variant)o.variant)) {
        rc = cli_fail(CMD, "%s: variant %s needs dataset %s, which this trace lacks", o.path,
                      sig_variant_name((sig_variant)o.variant),
                      sig_variant_name((sig_variant)o.variant));
        goto out;
    }
    int prc = o.pairs ? rho_pairs_sample(t->n, o.pairs, (uint64_t)o.seed, &pr, err, sizeof err)
                      : rho_pairs_all(t->n, &pr, err, sizeof err);
    idf = eldr_calloc(TRACE_CELLS(t), sizeof *idf);
    dec = eldr_calloc((size_t)pr.n, sizeof *dec);
    if (prc || !idf || !dec
        || sig_idf_fit(t, NULL, t->n, idf, err, sizeof err)
        || rho_decode_dist(t, &pr, dec, err, sizeof err)) {
        rc = prc || (idf && dec) ? core_fail(err) : cli_error(CMD, "out of memory");
        goto out;
    }
    cli_progress bar;
    cli_progress_start(&bar, CMD);
    run_ctx x = {.t = t, .o = &o, .pr = &pr, .dec_dist = dec, .idf_full = idf,
                 .list = ilist, .n_list = n_list, .bar = &bar};
    for (int v = 0; v < SIG_N_VARIANTS; v++)
        snprintf(x.what[v], sizeof x.what[v], o.all_variants ? "layer selection (%s)"
                 : "layer selection", sig_variant_name((sig_variant)v));
    for (int v = 0; v < SIG_N_VARIANTS; v++) {
        if (!o.all_variants && v != o.variant)
            continue;
        if (o.all_variants && unavailable(t, (sig_variant)v)) {
            rs[n_res].v = (sig_variant)v;
            rs[n_res++].available = 0;
            continue;
        }
        if (run_variant(&x, (sig_variant)v, &rs[n_res], err, sizeof err)) {
            rc = core_fail(err);
            goto out;
        }
        n_res++;
    }
    double secs = cli_now() - t0;
    if (note[0] && !o.json)
        printf("rho on a chunk sample: %s\n", note);
    if (o.all_variants) {
        qsort(rs, (size_t)n_res, sizeof rs[0], by_rho_desc);
        if (o.json) {
            json_t *a = json_array();
            for (int k = 0; k < n_res; k++) {
                json_t *j = vresult_json(&rs[k], &o);
                add_run_info(j, &x, secs);
                json_object_set_new(j, "sample", note[0] ? json_string(note) : json_null());
                json_array_append_new(a, j);
            }
            cli_print_json(a);
        } else {
            print_all(&x, rs, n_res);
        }
    } else if (o.json) {
        json_t *j = vresult_json(&rs[0], &o);
        add_run_info(j, &x, secs);
        json_object_set_new(j, "sample", note[0] ? json_string(note) : json_null());
        cli_print_json(j);
    } else {
        print_one(&x, &rs[0]);
    }
    rc = CLI_OK;
out:
    for (int k = 0; k < n_res; k++)
        vresult_free(&rs[k]);
    free(list);
    free(ilist);
    free(idf);
    free(dec);
    rho_pairs_free(&pr);
    trace_free(t);
    return rc;
}
