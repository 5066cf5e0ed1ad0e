/* cmd_costfit.c - `eldr costfit PROFILE.csv -o cost.json`: fit the
 * step-latency model (src/core/costmodel.h) to measured decode steps by
 * least squares (src/core/costfit.h), report the coefficients, R^2 and
 * the worst residuals, and write the cost file `eldr sim --cost` takes.
 * The profile format and the identifiability rules are in
 * docs/cost-model.md. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "costfit.h"
#include "err.h"

static const char *CMD = "costfit";

static void usage(void)
{
    printf("usage: eldr costfit PROFILE.csv [-o COST.json] [--worst N] [--json]\n"
           "\n"
           "Fit the step-latency model\n"
           "    t_step = t0 + sum_l (a + b * U_l) + c * B + d * kv_tokens\n"
           "to measured decode steps by least squares (LAPACK dgels), print the\n"
           "coefficients with R^2 and the worst residuals, and write a cost file for\n"
           "'eldr sim --cost'.\n"
           "\n"
           "PROFILE.csv: a header row, then one row per measured step. Columns:\n"
           "  batch                requests in the batch (required)\n"
           "  step_ms | step_s     measured step time (exactly one)\n"
           "  U0,...,U{L-1}        distinct experts per layer, or\n"
           "  U_sum,layers         their sum over layers and the layer count\n"
           "  kv_tokens            KV-cache tokens of the batch (optional; fits d)\n"
           "Lines starting with # are comments.\n"
           "\n"
           "With one layer count in the profile only t0 + L*a is identifiable: it is\n"
           "fitted as one intercept and stored as t0 (a = 0). A 'layers' column that\n"
           "varies fits t0 and a apart. Coefficients are kept >= 0 (exact non-negative\n"
           "least squares when the plain fit goes negative; clamped ones are named).\n"
           "\n"
           "  -o, --output FILE   write the cost file (JSON, atomically)\n"
           "  --worst N           residual rows to show (default 5)\n"
           "  --json              machine-readable result on stdout\n"
           "  -h, --help          this text\n"
           "\n"
           "Exit: 0 ok, 2 bad input (unreadable or malformed CSV, rank-deficient profile).\n"
           "See docs/cost-model.md.\n");
}

typedef struct costfit_opts {
    const char *profile, *output;
    long long worst;
    int json;
} costfit_opts;

static int parse_args(int argc, char **argv, costfit_opts *o)
{
    static const struct option longs[] = {{"output", required_argument, 0, 'o'},
                                          {"worst", required_argument, 0, 'w'},
                                          {"json", no_argument, 0, 'j'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->worst = 5;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", longs, NULL)) != -1) {
        switch (c) {
        case 'o': o->output = optarg; break;
        case 'w':
            if (cli_parse_int(CMD, "--worst", optarg, 0, 1000000, &o->worst))
                return CLI_BADINPUT;
            break;
        case 'j': o->json = 1; break;
        case 'h': usage(); return -1;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "missing PROFILE.csv");
    if (optind + 1 < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind + 1]);
    o->profile = argv[optind];
    return 0;
}

/* Fit statistics stored in the cost file beside the coefficients. */
static char *extra_fields(const costfit_opts *o, const costfit_profile *p,
                          const costfit_result *r)
{
    json_t *x = json_pack("{s:s, s:s, s:I, s:i, s:f, s:f, s:f}", "source", "eldr costfit",
                          "profile", o->profile, "rows", (json_int_t)p->n, "layers", p->L,
                          "intercept_s", r->intercept, "r2", isfinite(r->r2) ? r->r2 : 0.0,
                          "rmse_s", r->rmse);
    if (x && !r->fitted[COSTFIT_A])
        json_object_set_new(x, "note", json_string("one layer count in the profile: only "
                                                   "t0 + L*a is identifiable; stored as t0 "
                                                   "with a = 0"));
    char *s = x ? json_dumps(x, JSON_COMPACT) : NULL;
    json_decref(x);
    return s;
}

static void print_text(const costfit_opts *o, const costfit_profile *p,
                       const costfit_result *r, const int64_t *worst, int nw)
{
    static const char *const units[] = {"ms", "us", "us", "us", "ns"};
    static const double scale[] = {1e3, 1e6, 1e6, 1e6, 1e9};
    static const char *const what[] = {"per step", "per layer", "per distinct expert per layer",
                                       "per request in the batch", "per KV token"};
    printf("profile: %s: %lld rows, L = %d%s%s\n", o->profile, (long long)p->n, p->L,
           p->layers_vary ? " (varies)" : "", p->has_kv ? ", kv_tokens" : "");
    for (int j = 0; j < COSTFIT_NCOEF; j++) {
        double v = costfit_coef(&r->m, j);
        const char *tag = r->clamped[j] ? "  (clamped at 0: the free fit was negative)"
                          : r->fitted[j] ? "" : "  (not fitted)";
        if (j == COSTFIT_T0 && !r->fitted[COSTFIT_A])
            tag = "  (= t0 + L*a: not separable from one L; a stored as 0)";
        printf("  %-3s %12.6g %s  %s%s\n", costfit_coef_name(j), v * scale[j], units[j],
               what[j], tag);
    }
    printf("intercept t0 + L*a = %.6g ms at L = %d\n", r->intercept * 1e3, p->L);
    printf("R^2 %.6f   RMSE %.6g ms\n", r->r2, r->rmse * 1e3);
    if (nw > 0)
        printf("worst residuals:\n  %8s %12s %12s %12s\n", "line", "measured_ms",
               "predicted_ms", "residual_ms");
    for (int i = 0; i < nw; i++) {
        int64_t k = worst[i];
        printf("  %8lld %12.6g %12.6g %+12.4g\n", (long long)p->line[k], p->step_s[k] * 1e3,
               r->pred[k] * 1e3, (p->step_s[k] - r->pred[k]) * 1e3);
    }
    if (o->output)
        printf("wrote %s\n", o->output);
}

static void print_json(const costfit_opts *o, const costfit_profile *p,
                       const costfit_result *r, const int64_t *worst, int nw)
{
    json_t *coef = json_object(), *fitted = json_array(), *clamped = json_array();
    json_t *w = json_array();
    for (int j = 0; j < COSTFIT_NCOEF; j++) {
        json_object_set_new(coef, costfit_coef_name(j), json_real(costfit_coef(&r->m, j)));
        if (r->fitted[j])
            json_array_append_new(fitted, json_string(costfit_coef_name(j)));
        if (r->clamped[j])
            json_array_append_new(clamped, json_string(costfit_coef_name(j)));
    }
    for (int i = 0; i < nw; i++) {
        int64_t k = worst[i];
        json_array_append_new(w, json_pack("{s:I, s:f, s:f, s:f}", "line", (json_int_t)p->line[k],
                                           "measured_ms", p->step_s[k] * 1e3, "predicted_ms",
                                           r->pred[k] * 1e3, "residual_ms",
                                           (p->step_s[k] - r->pred[k]) * 1e3));
    }
    json_t *root = json_pack("{s:s, s:I, s:i, s:b, s:o, s:f, s:o, s:o, s:f, s:f, s:o}",
                             "profile", o->profile, "rows", (json_int_t)p->n, "layers", p->L,
                             "layers_vary", p->layers_vary, "coefficients", coef,
                             "intercept_s", r->intercept, "fitted", fitted, "clamped", clamped,
                             "r2", isfinite(r->r2) ? r->r2 : 0.0, "rmse_ms", r->rmse * 1e3,
                             "worst", w);
    json_object_set_new(root, "output", o->output ? json_string(o->output) : json_null());
    cli_print_json(root);
}

int cmd_costfit(int argc, char **argv)
{
    costfit_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    char err[ELDR_ERRLEN];
    costfit_profile p;
    if (costfit_read_csv(o.profile, &p, err, sizeof err) < 0)
        return cli_fail(CMD, "%s", err);
    costfit_result r;
    if (costfit_fit(&p, &r, err, sizeof err) < 0) {
        costfit_profile_free(&p);
        return cli_fail(CMD, "%s: %s", o.profile, err);
    }
    int64_t *worst = calloc((size_t)o.worst + 1, sizeof *worst);
    int nw = worst ? costfit_worst(&p, &r, (int)o.worst, worst) : 0;
    rc = CLI_OK;
    if (o.output) {
        char *extra = extra_fields(&o, &p, &r);
        if (cost_model_save(o.output, &r.m, extra, err, sizeof err) < 0)
            rc = cli_fail(CMD, "%s", err);
        free(extra);
    }
    if (rc == CLI_OK) {
        if (o.json)
            print_json(&o, &p, &r, worst, nw);
        else
            print_text(&o, &p, &r, worst, nw);
    }
    free(worst);
    costfit_result_free(&r);
    costfit_profile_free(&p);
    return rc;
}
