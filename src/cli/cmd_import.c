/* cmd_import.c - `eldr import FILE.npz|FILE.jsonl -o trace.h5`: convert a
 * calibration capture or a JSON-lines trace into an eldr trace file.
 *
 * The input is read and validated completely (src/core/import_*.c) before
 * anything is written; the output is written atomically by trace_save, so
 * a bad input or a failed write never leaves a torn file. */
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "err.h"
#include "import.h"
#include "trace.h"

static const char *CMD = "import";

static void usage(void)
{
    printf("usage: eldr import FILE -o TRACE.h5 [--format npz|jsonl|npy|frames]\n"
           "                   [--top-k K] [--layers L --experts E] [--json]\n"
           "\n"
           "Convert an outside capture into an eldr trace (docs/import.md):\n"
           "  .npz     the reference implementation's calibration capture, format\n"
           "           eldr-calibration-v1 (np.savez or np.savez_compressed): arrays\n"
           "           request_ids, prefill_counts, gate_probabilities, decode_counts,\n"
           "           prompt_tokens, decode_tokens, metadata\n"
           "  .jsonl   a header line, then one request per line\n"
           "  .npy     a plain [N, L, E] integer array of prefill counts (needs --top-k)\n"
           "  .frames  (or .bin) the reference proxy's --capture-output file: frames of a\n"
           "           little-endian uint32 length, then int16 [L, E] prefill counts\n"
           "           (needs --layers, --experts and --top-k)\n"
           "The input is validated in full (unique SHA-256 ids, counts conservation,\n"
           "gate sums, shapes, finite values, decode_tokens == output_tokens - 1)\n"
           "before the trace is written, atomically. A .npy or frames trace holds\n"
           "prefill counts and prompt_tokens (= each row's layer sum / top-k) only.\n"
           "\n"
           "  -o, --output FILE   the trace to write (required)\n"
           "  --format F          npz, jsonl, npy or frames (default: from the\n"
           "                      extension)\n"
           "  --top-k K           the router's top-k (npy, frames)\n"
           "  --layers L          MoE layers (frames; npy: checked against the shape)\n"
           "  --experts E         experts per layer (frames; npy: checked)\n"
           "  --json              the summary as JSON on stdout\n"
           "  -h, --help          this text\n"
           "\n"
           "Exit status: 0 imported; 2 bad input (one line on stderr names the file,\n"
           "the array or line, and the row); 1 the output could not be written.\n");
}

static json_t *datasets(const trace_t *t)
{
    json_t *a = json_array();
    const struct {
        const void *p;
        const char *name;
    } opt[] = {
        {t->decode_counts, "decode_counts"}, {t->decode_tokens, "decode_tokens"},
        {t->gate_prob, "gate_prob"},         {t->gate_logit, "gate_logit"},
        {t->label, "label"},                 {t->label, "label_names"},
        {t->arrival_s, "arrival_s"},         {t->request_id, "request_id"},
    };
    json_array_append_new(a, json_string("prefill_counts"));
    json_array_append_new(a, json_string("prompt_tokens"));
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
        if (opt[i].p)
            json_array_append_new(a, json_string(opt[i].name));
    return a;
}

static long long total(const int32_t *v, int64_t n)
{
    long long s = 0;
    for (int64_t i = 0; v && i < n; i++)
        s += v[i];
    return s;
}

static json_t *summary(const char *in, import_format fmt, const char *out, const trace_t *t,
                       double secs)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:i, s:i, s:I}", "input", in, "format",
                          import_format_name(fmt), "output", out, "model", t->model, "requests",
                          (json_int_t)t->n, "layers", t->L, "experts", t->E, "top_k", t->k,
                          "prompt_tokens", (json_int_t)total(t->prompt_tokens, t->n));
    if (t->decode_tokens)
        json_object_set_new(o, "decode_tokens", json_integer(total(t->decode_tokens, t->n)));
    if (t->label)
        json_object_set_new(o, "labels", json_integer(t->n_labels));
    json_object_set_new(o, "datasets", datasets(t));
    json_object_set_new(o, "seconds", json_real(secs));
    return o;
}

static void print_text(json_t *o)
{
    printf("imported %s (%s) -> %s\n", json_string_value(json_object_get(o, "input")),
           json_string_value(json_object_get(o, "format")),
           json_string_value(json_object_get(o, "output")));
    printf("  model          %s\n", json_string_value(json_object_get(o, "model")));
    printf("  requests       %lld\n", (long long)json_integer_value(json_object_get(o, "requests")));
    printf("  geometry       %lld layers x %lld experts, top-%lld\n",
           (long long)json_integer_value(json_object_get(o, "layers")),
           (long long)json_integer_value(json_object_get(o, "experts")),
           (long long)json_integer_value(json_object_get(o, "top_k")));
    printf("  prompt tokens  %lld\n",
           (long long)json_integer_value(json_object_get(o, "prompt_tokens")));
    if (json_object_get(o, "decode_tokens"))
        printf("  decode tokens  %lld\n",
               (long long)json_integer_value(json_object_get(o, "decode_tokens")));
    if (json_object_get(o, "labels"))
        printf("  labels         %lld\n", (long long)json_integer_value(json_object_get(o, "labels")));
    printf("  datasets      ");
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(o, "datasets"), i, d)
        printf(" %s", json_string_value(d));
    printf("\n  time           %.3f s\n", json_real_value(json_object_get(o, "seconds")));
    json_decref(o);
}

/* The output's directory must exist: a typo there is the user's input. */
static int check_output(const char *in, const char *out)
{
    struct stat si, so;
    if (!stat(in, &si) && !stat(out, &so) && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        return cli_fail(CMD, "%s: the output would overwrite the input", out);
    char *copy = strdup(out);
    if (!copy)
        return cli_error(CMD, "out of memory");
    const char *dir = dirname(copy);
    struct stat sd;
    int ok = !stat(dir, &sd) && S_ISDIR(sd.st_mode);
    int rc = ok ? 0 : cli_fail(CMD, "%s: directory '%s' does not exist", out, dir);
    free(copy);
    return rc;
}

/* --top-k, --layers or --experts (option letter opt) into g. */
static int parse_geometry(import_geometry *g, int opt, const char *arg)
{
    long long v;
    const char *name = opt == 'k' ? "--top-k" : opt == 'L' ? "--layers" : "--experts";
    if (cli_parse_int(CMD, name, arg, 1, opt == 'L' ? 1 << 20 : 65535, &v))
        return CLI_BADINPUT;
    *(opt == 'k' ? &g->top_k : opt == 'L' ? &g->layers : &g->experts) = (int)v;
    return 0;
}

int cmd_import(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"format", required_argument, NULL, 'f'},
        {"top-k", required_argument, NULL, 'k'},
        {"layers", required_argument, NULL, 'L'},
        {"experts", required_argument, NULL, 'E'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    const char *out = NULL;
    import_format fmt = IMPORT_UNKNOWN;
    import_geometry geo = {0, 0, 0};
    int json = 0, c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:f:k:L:E:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case 'f':
            fmt = import_format_parse(optarg);
            if (fmt == IMPORT_UNKNOWN)
                return cli_fail(CMD, "--format '%s': want npz, jsonl, npy or frames", optarg);
            break;
        case 'k':
        case 'L':
        case 'E':
            if (parse_geometry(&geo, c, optarg))
                return CLI_BADINPUT;
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            usage();
            return CLI_OK;
        case ':':
            return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default:
            return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "missing the input file (FILE.npz, .jsonl, .npy or .frames)");
    if (optind + 1 < argc)
        return cli_usage_error(CMD, "one input file only, got also '%s'", argv[optind + 1]);
    if (!out)
        return cli_usage_error(CMD, "missing -o TRACE.h5");
    const char *in = argv[optind];
    if (fmt == IMPORT_UNKNOWN)
        fmt = import_format_of(in);
    if (fmt == IMPORT_UNKNOWN)
        return cli_fail(CMD, "%s: cannot tell the format from the name (want .npz, .jsonl, "
                        ".npy or .frames, or say --format npz|jsonl|npy|frames)", in);
    if ((fmt == IMPORT_NPZ || fmt == IMPORT_JSONL) && (geo.top_k || geo.layers || geo.experts))
        return cli_usage_error(CMD, "--top-k, --layers and --experts are for npy and frames "
                               "(a %s file says its own geometry)", import_format_name(fmt));
    int rc = check_output(in, out);
    if (rc)
        return rc;

    char err[ELDR_ERRLEN];
    double t0 = cli_now();
    trace_t *t;
    if (import_file_geometry(in, fmt, &geo, &t, err, sizeof err))
        return cli_fail(CMD, "%s", err);
    if (trace_save(t, out, err, sizeof err)) {
        trace_free(t);
        return cli_error(CMD, "%s", err);
    }
    json_t *o = summary(in, fmt, out, t, cli_now() - t0);
    trace_free(t);
    if (json)
        cli_print_json(o);
    else
        print_text(o);
    return CLI_OK;
}
