/* cmd_info.c - `eldr info FILE [--json]`: what a trace (or model) file
 * holds and whether it is valid.
 *
 * For a trace: model, geometry, N, token totals, label shares, optional
 * datasets present, validation verdict. The header is read first, so a
 * file whose data fails validation still shows its geometry on stdout
 * while the error goes to stderr (one line) and the exit status is 2.
 * Model files (format "eldr-model") are handed to info_model(), which
 * lives with the model code (src/cli/info_model.c). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "err.h"
#include "h5util.h"
#include "import.h"
#include "model.h"
#include "trace.h"

/* Weak until the model side provides it: a build without it still links
 * and says so instead of failing. */
int info_model(const char *path, int json) __attribute__((weak));

static const char *CMD = "info";

static void usage(void)
{
    printf("usage: eldr info FILE [--json]\n"
           "\n"
           "Show what an eldr trace or model file holds, and validate it.\n"
           "For a trace: model, geometry (layers, experts, top-k), requests,\n"
           "prompt and decode token totals, label shares, the optional datasets\n"
           "present, and the validation verdict (docs/trace-format.md).\n"
           "\n"
           "  --json     machine-readable output on stdout\n"
           "  -h, --help this text\n"
           "\n"
           "Exit status: 0 valid; 2 unreadable or invalid file (one line on stderr).\n");
}

/* What is in the file beyond the required datasets, in file order. */
static json_t *optional_datasets(const trace_header_t *h)
{
    static const struct { unsigned flag; const char *names; } dense[] = {
        {TRACE_HAS_DECODE, "decode_counts decode_tokens"},
        {TRACE_HAS_GATE_PROB, "gate_prob"},
        {TRACE_HAS_GATE_LOGIT, "gate_logit"},
        {TRACE_HAS_LABEL, "label label_names"},
        {TRACE_HAS_ARRIVAL, "arrival_s"},
        {TRACE_HAS_REQUEST_ID, "request_id"},
        {TRACE_HAS_UNROUTED, "prefill_unrouted_tokens"},
    };
    json_t *a = json_array();
    char buf[64];
    for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) {
        if (!(h->has & dense[i].flag))
            continue;
        snprintf(buf, sizeof buf, "%s", dense[i].names);
        for (char *s = strtok(buf, " "); s; s = strtok(NULL, " "))
            json_array_append_new(a, json_string(s));
    }
    if (h->has_tokens_prefill) {
        json_array_append_new(a, json_string("tokens/prefill_experts"));
        json_array_append_new(a, json_string("tokens/prefill_offsets"));
    }
    if (h->has_tokens_decode) {
        json_array_append_new(a, json_string("tokens/decode_experts"));
        json_array_append_new(a, json_string("tokens/decode_offsets"));
    }
    if (h->has_decode_probs)
        json_array_append_new(a, json_string("tokens/decode_probs"));
    if (h->has_blocks) {
        json_array_append_new(a, json_string("tokens/block_hashes"));
        json_array_append_new(a, json_string("tokens/block_offsets"));
    }
    return a;
}

static json_t *token_totals(const int32_t *tok, int64_t n)
{
    long long sum = 0, lo = 0, hi = 0;
    for (int64_t r = 0; r < n; r++) {
        sum += tok[r];
        lo = r == 0 || tok[r] < lo ? tok[r] : lo;
        hi = r == 0 || tok[r] > hi ? tok[r] : hi;
    }
    return json_pack("{s:I, s:f, s:I, s:I}", "total", (json_int_t)sum, "mean",
                     n ? (double)sum / (double)n : 0.0, "min", (json_int_t)lo, "max",
                     (json_int_t)hi);
}

/* Prompt rows without routing (prefix-cache hits): how many, in how
 * many requests. */
static json_t *unrouted(const trace_t *t)
{
    json_t *o = token_totals(t->prefill_unrouted, t->n);
    json_int_t reqs = 0;
    for (int64_t r = 0; r < t->n; r++)
        reqs += t->prefill_unrouted[r] > 0;
    json_object_set_new(o, "requests", json_integer(reqs));
    return o;
}

static json_t *label_shares(const trace_t *t)
{
    json_t *a = json_array();
    int64_t *count = calloc((size_t)t->n_labels + 1, sizeof *count);
    if (!count)
        return a;
    for (int64_t r = 0; r < t->n; r++)
        count[t->label[r]]++;
    for (int i = 0; i < t->n_labels; i++)
        json_array_append_new(a, json_pack("{s:s, s:I, s:f}", "name", t->label_names[i], "count",
                                           (json_int_t)count[i], "share",
                                           t->n ? (double)count[i] / (double)t->n : 0.0));
    free(count);
    return a;
}

/* The whole report as one JSON object: the text form is printed from it,
 * so the two can never disagree. t is NULL when validation failed. */
static json_t *report(const char *path, const trace_header_t *h, const trace_t *t,
                      const char *error)
{
    json_t *o = json_pack("{s:s, s:s, s:i, s:s, s:i, s:i, s:i, s:I}", "file", path, "format",
                          TRACE_FORMAT, "version", TRACE_VERSION, "model", h->model, "layers",
                          h->L, "experts", h->E, "top_k", h->k, "requests", (json_int_t)h->n);
    /* a capture or JSON lines, converted in memory */
    import_format from = import_sniff(path);
    json_object_set_new(o, "imported_from",
                        from == IMPORT_UNKNOWN ? json_null() : json_string(import_format_name(from)));
    json_object_set_new(o, "datasets", optional_datasets(h));
    if (h->has_tokens_prefill || h->has_tokens_decode)
        json_object_set_new(o, "token_rows",
                            json_pack("{s:I, s:I}", "prefill", (json_int_t)h->t_prefill,
                                      "decode", (json_int_t)h->t_decode));
    if (h->has_blocks)
        json_object_set_new(o, "blocks", json_integer(h->n_blocks));
    if (t) {
        json_object_set_new(o, "prompt_tokens", token_totals(t->prompt_tokens, t->n));
        if (t->decode_tokens)
            json_object_set_new(o, "decode_tokens", token_totals(t->decode_tokens, t->n));
        if (t->prefill_unrouted)
            json_object_set_new(o, "prefill_unrouted", unrouted(t));
        if (t->label)
            json_object_set_new(o, "labels", label_shares(t));
        if (t->arrival_s && t->n > 0) {
            double lo = t->arrival_s[0], hi = t->arrival_s[0];
            for (int64_t r = 1; r < t->n; r++) {
                lo = t->arrival_s[r] < lo ? t->arrival_s[r] : lo;
                hi = t->arrival_s[r] > hi ? t->arrival_s[r] : hi;
            }
            json_object_set_new(o, "arrival_s", json_pack("{s:f, s:f}", "first", lo, "last", hi));
        }
    }
    json_object_set_new(o, "valid", json_boolean(!error));
    json_object_set_new(o, "error", error ? json_string(error) : json_null());
    return o;
}

static void print_tokens(const char *what, json_t *tok)
{
    if (!tok)
        return;
    printf("%-10s %lld total, mean %.1f, min %lld, max %lld\n", what,
           (long long)json_integer_value(json_object_get(tok, "total")),
           json_real_value(json_object_get(tok, "mean")),
           (long long)json_integer_value(json_object_get(tok, "min")),
           (long long)json_integer_value(json_object_get(tok, "max")));
}

static void print_text(json_t *o)
{
    const char *model = json_string_value(json_object_get(o, "model"));
    printf("file       %s\n", json_string_value(json_object_get(o, "file")));
    const char *from = json_string_value(json_object_get(o, "imported_from"));
    printf("format     %s v%d%s%s%s\n", TRACE_FORMAT, TRACE_VERSION,
           from ? " (imported in memory from " : "", from ? from : "", from ? ")" : "");
    printf("model      %s\n", model && *model ? model : "(unknown)");
    printf("geometry   %lld layers x %lld experts, top-%lld\n",
           (long long)json_integer_value(json_object_get(o, "layers")),
           (long long)json_integer_value(json_object_get(o, "experts")),
           (long long)json_integer_value(json_object_get(o, "top_k")));
    printf("requests   %lld\n", (long long)json_integer_value(json_object_get(o, "requests")));
    print_tokens("prompt", json_object_get(o, "prompt_tokens"));
    print_tokens("decode", json_object_get(o, "decode_tokens"));
    json_t *un = json_object_get(o, "prefill_unrouted");
    if (un)
        printf("unrouted   %lld prompt tokens without routing (prefix-cache hits) in %lld "
               "requests; prompt counts cover the routed rows\n",
               (long long)json_integer_value(json_object_get(un, "total")),
               (long long)json_integer_value(json_object_get(un, "requests")));
    json_t *tr = json_object_get(o, "token_rows");
    if (tr)
        printf("tokens/    %lld prefill rows, %lld decode rows\n",
               (long long)json_integer_value(json_object_get(tr, "prefill")),
               (long long)json_integer_value(json_object_get(tr, "decode")));
    json_t *arr = json_object_get(o, "arrival_s");
    if (arr)
        printf("arrivals   %.3f s to %.3f s\n", json_real_value(json_object_get(arr, "first")),
               json_real_value(json_object_get(arr, "last")));
    json_t *labels = json_object_get(o, "labels"), *v;
    size_t i;
    if (labels) {
        printf("labels     %zu\n", json_array_size(labels));
        json_array_foreach(labels, i, v)
            printf("  %-20s %8lld  %5.1f%%\n", json_string_value(json_object_get(v, "name")),
                   (long long)json_integer_value(json_object_get(v, "count")),
                   100.0 * json_real_value(json_object_get(v, "share")));
    }
    printf("optional  ");
    json_t *ds = json_object_get(o, "datasets");
    json_array_foreach(ds, i, v)
        printf(" %s", json_string_value(v));
    printf("%s\n", json_array_size(ds) ? "" : " (none)");
    const char *error = json_string_value(json_object_get(o, "error"));
    printf("validation %s\n", error ? "INVALID (see the error)" : "valid");
}

static int info_trace(const char *path, int json)
{
    char err[ELDR_ERRLEN];
    trace_header_t h;
    trace_t *t = NULL;
    if (trace_read_header(path, &h, err, sizeof err))
        return cli_fail(CMD, "%s", err);
    int bad = trace_load(path, &t, err, sizeof err);
    json_t *o = report(path, &h, t, bad ? err : NULL);
    if (json)
        cli_print_json(o);
    else {
        print_text(o);
        json_decref(o);
    }
    trace_free(t);
    fflush(stdout);
    return bad ? cli_fail(CMD, "%s", err) : CLI_OK;
}

int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'j':
            json = 1;
            break;
        case 'h':
            usage();
            return CLI_OK;
        default:
            return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(CMD, "expected one FILE, got %d", argc - optind);
    const char *path = argv[optind];
    char format[64], err[ELDR_ERRLEN];
    /* the reference's fit JSON is a model; its captures (and JSON lines)
     * are traces, imported in memory */
    if (model_file_is_json(path) && info_model)
        return info_model(path, json);
    if (import_sniff(path) != IMPORT_UNKNOWN)
        return info_trace(path, json);
    if (h5u_file_format(path, format, sizeof format, err, sizeof err))
        return cli_fail(CMD, "%s", err);
    if (!strcmp(format, "eldr-model")) {
        if (!info_model)
            return cli_fail(CMD, "model files are not supported yet");
        return info_model(path, json);
    }
    return info_trace(path, json);
}
