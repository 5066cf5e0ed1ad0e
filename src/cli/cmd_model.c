/* cmd_model.c - `eldr model export|import`: convert between the eldr-model
 * HDF5 file and the reference implementation's centroid JSON (keys L, e,
 * k, variant, layer_mask, sig_idf, centroids; docs/model-format.md).
 * Both directions validate (unit rows, finite values, geometry) and write
 * atomically. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "err.h"
#include "route.h"
#include "model.h"
#include "trace.h"

#define CMD "model"

static void usage(void)
{
    printf(
        "usage: eldr model export MODEL.h5 -o CENTROIDS.json [--any-variant] [--json]\n"
        "       eldr model import CENTROIDS.json -o MODEL.h5 [--tau T]\n"
        "                         [--workers A,B,...] [--top-k K | --trace T] [--json]\n"
        "\n"
        "Convert a model between eldr's HDF5 file (format eldr-model) and the\n"
        "reference implementation's fit JSON (keys L, e, k = m = K centroids,\n"
        "variant, layer_mask, sig_idf, sig_dtype, centroids and its provenance:\n"
        "model, algo, n_fit, layer_select, fit_peak_rho, seed, training_sha256,\n"
        "calibration_format, transform_sha256). Export adds eldr's extra keys\n"
        "(top_k, K, tau, workers, n_star, sizes, ...), which the reference\n"
        "ignores, and refuses a model the reference cannot express (sqrt_count,\n"
        "binary, gate_logit, count over a subset of layers). gate_prob is written\n"
        "as their gate_prob_all. Both directions validate the model and write\n"
        "atomically. Their JSON has no top-k: import takes it from --top-k, from\n"
        "--trace, or from eldr's top_k key; else it stays unknown and any trace's\n"
        "top-k is accepted. A fit JSON also opens directly wherever a model does\n"
        "(eldr info, sim -m, eldrd -m).\n"
        "\n"
        "options:\n"
        "  -o, --output FILE   file to write (required)\n"
        "  --tau T             import: set the band width tau (default: the\n"
        "                      JSON's tau, else 0.1)\n"
        "  --workers A,B,...   import: worker names, one per centroid\n"
        "  --any-variant       export: write any variant (eldr's own JSON, e.g. for\n"
        "                      PUT /v1/model), even one the reference cannot load\n"
        "  --top-k K           import: the router's top-k\n"
        "  --trace T           import: take the top-k from trace T (its layers and\n"
        "                      experts must match the model's)\n"
        "  --json              print a summary as JSON\n"
        "  -h, --help          this text\n"
        "\n"
        "See docs/model-format.md for the key mapping.\n");
}

/* --workers for import: exactly K names. */
static int set_workers(model_t *m, const char *arg)
{
    char *buf = strdup(arg);
    const char **names = calloc((size_t)m->K + 1, sizeof *names);
    char err[ELDR_ERRLEN];
    int n = 0, rc = 0;
    if (!buf || !names) {
        rc = cli_error(CMD, "out of memory");
        goto out;
    }
    /* strtok_r would merge empty names; split by hand */
    for (char *p = buf;; n++) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (n < m->K)
            names[n] = p;
        if (!comma)
            break;
        p = comma + 1;
    }
    n++;
    if (n != m->K) {
        rc = cli_fail(CMD, "--workers: %d names given for K = %d centroids", n, m->K);
        goto out;
    }
    if (model_set_workers(m, names, n, err, sizeof err) < 0 ||
        model_validate(m, "--workers", MODEL_NAMES_JSON, err, sizeof err) < 0)
        rc = cli_fail(CMD, "%s", err);
out:
    free(buf);
    free(names);
    return rc;
}

/* --top-k K or --trace T for import: the top-k the reference JSON lacks. */
static int set_top_k(model_t *m, int top_k, const char *trace)
{
    char err[ELDR_ERRLEN];
    if (trace) {
        trace_header_t h;
        if (trace_read_header(trace, &h, err, sizeof err) < 0)
            return cli_fail(CMD, "--trace: %s", err);
        if (h.L != m->recipe.L || h.E != m->recipe.E)
            return cli_fail(CMD, "--trace %s: %d layers x %d experts, the model has %d x %d",
                            trace, h.L, h.E, m->recipe.L, m->recipe.E);
        top_k = h.k;
    }
    if (m->k && m->k != top_k)
        return cli_fail(CMD, "%s gives top-k %d, the JSON's top_k key says %d",
                        trace ? "--trace" : "--top-k", top_k, m->k);
    if (top_k > m->recipe.E)
        return cli_fail(CMD, "--top-k %d is more than the model's %d experts", top_k,
                        m->recipe.E);
    m->k = top_k;
    return 0;
}

static void print_summary(const char *verb, const char *in, const char *out, const model_t *m,
                          int json)
{
    if (!json) {
        printf("%s %s -> %s: K = %d, variant %s, %d of %d layers, e = %d, ", verb, in, out,
               m->K, sig_variant_name(m->recipe.variant), m->recipe.n_layers, m->recipe.L,
               m->recipe.E);
        if (m->k)
            printf("top-%d\n", m->k);
        else
            printf("top-k unknown\n");
        return;
    }
    json_t *o = json_object(), *mask = json_array();
    for (int i = 0; i < m->recipe.n_layers; i++)
        json_array_append_new(mask, json_integer(m->recipe.layers[i]));
    json_object_set_new(o, "action", json_string(verb));
    json_object_set_new(o, "input", json_string(in));
    json_object_set_new(o, "output", json_string(out));
    json_object_set_new(o, "k", json_integer(m->K));
    json_object_set_new(o, "variant", json_string(sig_variant_name(m->recipe.variant)));
    json_object_set_new(o, "mask", mask);
    json_object_set_new(o, "L", json_integer(m->recipe.L));
    json_object_set_new(o, "e", json_integer(m->recipe.E));
    json_object_set_new(o, "top_k", m->k ? json_integer(m->k) : json_null());
    json_object_set_new(o, "tau", json_real(m->tau));
    cli_print_json(o);
}

int cmd_model(int argc, char **argv)
{
    enum { O_TAU = 256, O_WORKERS, O_JSON, O_TOPK, O_TRACE, O_ANY };
    static const struct option opts[] = {
        {"any-variant", no_argument, 0, O_ANY},
        {"output", required_argument, 0, 'o'}, {"tau", required_argument, 0, O_TAU},
        {"top-k", required_argument, 0, O_TOPK}, {"trace", required_argument, 0, O_TRACE},
        {"workers", required_argument, 0, O_WORKERS}, {"json", no_argument, 0, O_JSON},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *output = NULL, *workers = NULL, *trace = NULL;
    double tau = NAN;
    int json = 0, c, top_k = 0, any_variant = 0;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': output = optarg; break;
        case O_TAU:
            if (cli_parse_double(CMD, "--tau", optarg, 0, ROUTE_TAU_MAX, &tau))
                return CLI_BADINPUT;
            break;
        case O_WORKERS: workers = optarg; break;
        case O_TOPK: {
            long long v;
            if (cli_parse_int(CMD, "--top-k", optarg, 1, 65535, &v))
                return CLI_BADINPUT;
            top_k = (int)v;
            break;
        }
        case O_TRACE: trace = optarg; break;
        case O_ANY: any_variant = 1; break;
        case O_JSON: json = 1; break;
        case 'h': usage(); return CLI_OK;
        case ':': return cli_usage_error(CMD, "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 2)
        return cli_usage_error(CMD, "expected 'export MODEL.h5' or 'import CENTROIDS.json'");
    const char *verb = argv[optind], *in = argv[optind + 1];
    int exporting = !strcmp(verb, "export");
    if (!exporting && strcmp(verb, "import"))
        return cli_usage_error(CMD, "unknown action '%s' (export or import)", verb);
    if (!output)
        return cli_usage_error(CMD, "-o FILE is required");
    if (exporting && (workers || !isnan(tau) || top_k || trace))
        return cli_usage_error(CMD, "--tau, --workers, --top-k and --trace apply to import only");
    if (!exporting && any_variant)
        return cli_usage_error(CMD, "--any-variant applies to export only");
    if (top_k && trace)
        return cli_usage_error(CMD, "--top-k and --trace both give the top-k: use one");

    char err[ELDR_ERRLEN];
    model_t *m = NULL;
    int rc = exporting ? model_load(in, &m, err, sizeof err)
                       : model_load_json(in, &m, err, sizeof err);
    if (rc < 0)
        return cli_fail(CMD, "%s", err);
    if (!isnan(tau))
        m->tau = tau;
    if ((top_k || trace) && (rc = set_top_k(m, top_k, trace))) {
        model_free(m);
        return rc;
    }
    if (workers && (rc = set_workers(m, workers))) {
        model_free(m);
        return rc;
    }
    rc = !exporting     ? model_save(m, output, err, sizeof err)
         : any_variant ? model_save_json_any(m, output, err, sizeof err)
                       : model_save_json(m, output, err, sizeof err);
    if (rc < 0) {
        model_free(m);
        return cli_fail(CMD, "%s", err);
    }
    print_summary(verb, in, output, m, json);
    model_free(m);
    return CLI_OK;
}
