/* cmd_gen.c - `eldr gen -o FILE [flags] [--json]`: write a synthetic trace.
 *
 * The flags are one table (name, kind, range, field of gen_params_t, help),
 * from which both the option parser and --help are made, so --help always
 * lists every flag with its real default. The model behind the flags is in
 * src/core/gen.h and docs/generator.md. */
#include <getopt.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "err.h"
#include "gen.h"
#include "trace.h"

static const char *CMD = "gen";

enum kind { K_I64, K_INT, K_U64, K_DBL, K_ON, K_STR, K_SHARES, K_GATES, K_NOGATES };

typedef struct flag {
    const char *name;
    enum kind kind;
    double lo, hi;
    size_t off;                /* field of gen_params_t */
    const char *arg, *help;
} flag_t;

#define F(field) offsetof(gen_params_t, field)
static const flag_t FLAGS[] = {
    {"requests", K_I64, 1, 1e9, F(requests), "N", "number of requests"},
    {"layers", K_INT, 1, 4096, F(layers), "L", "MoE layers"},
    {"experts", K_INT, 1, 65535, F(experts), "E", "experts per layer"},
    {"top-k", K_INT, 1, 65535, F(top_k), "k", "experts each token picks per layer (<= E)"},
    {"domains", K_INT, 1, GEN_MAX_DOMAINS, F(domains), "D", "request domains (the labels)"},
    {"seed", K_U64, 0, 9.2e18, F(seed), "S", "random seed (same seed, same trace, any --threads)"},
    {"model", K_STR, 0, 0, F(model), "NAME", "model name stored in the file"},
    {"domain-shares", K_SHARES, 0, 0, 0, "W,W,..", "domain weights, one per domain"},
    {"domain-strength", K_DBL, 0, 20, F(domain_strength), "X", "sd of a domain's logit shift at mid depth"},
    {"layer-floor", K_DBL, 0, 1, F(layer_floor), "X", "domain strength at the first/last layer, as a fraction"},
    {"generalists", K_INT, 0, 65535, F(generalists), "G", "generalist experts per layer (used by every domain)"},
    {"generalist-bump", K_DBL, -20, 20, F(generalist_bump), "X", "logit added to the generalists"},
    {"base-scale", K_DBL, 0, 20, F(base_scale), "X", "sd of the shared base logits"},
    {"mix-prob", K_DBL, 0, 1, F(mix_prob), "P", "probability that a request mixes in a second domain"},
    {"mix-weight", K_DBL, 0, 1, F(mix_weight), "W", "second domain's token share ~ U(0, W)"},
    {"request-noise", K_DBL, 0, 20, F(request_noise), "X", "sd of per-request logit noise"},
    {"decode-drift", K_DBL, 0, 20, F(decode_drift), "X", "sd of the decode logits' extra noise (and of the mix shift x 1/2)"},
    {"prompt-tokens", K_DBL, 1, 65535, F(prompt_tokens), "T", "mean prompt length"},
    {"decode-tokens", K_DBL, 0, 65535, F(decode_tokens), "T", "mean decode length (0 = no decode data)"},
    {"length-spread", K_DBL, 0, 3, F(length_spread), "S", "lognormal sigma of the lengths (0 = fixed)"},
    {"arrival-rate", K_DBL, 0, 1e9, F(arrival_rate), "R", "Poisson arrivals in req/s (0 = no arrival_s)"},
    {"burst-factor", K_DBL, 1e-6, 1e6, F(burst_factor), "F", "hot domain's share multiplier in each burst period"},
    {"burst-period", K_DBL, 1e-6, 1e12, F(burst_period), "S", "seconds per hot domain"},
    {"drift", K_DBL, 0, 1, F(drift), "F", "domain mix drifts across the trace: weight x (1-F + F*max(0, 1-|d-focus|)), focus from domain 0 to D-1"},
    {"gates", K_GATES, 0, 0, 0, NULL, "store gate_prob and gate_logit (4 bytes per cell each)"},
    {"gate-prob", K_ON, 0, 0, F(gate_prob), NULL, "store gate_prob only"},
    {"gate-logit", K_ON, 0, 0, F(gate_logit), NULL, "store gate_logit only"},
    {"no-gates", K_NOGATES, 0, 0, 0, NULL, "store neither gate dataset"},
    {"tokens", K_ON, 0, 0, F(tokens), NULL, "store tokens/* (per-token experts, decode probs, block hashes)"},
    {"prefix-groups", K_INT, 0, 1000000, F(prefix_groups), "G", "shared prompt prefixes (0 = none; implies --tokens)"},
    {"prefix-blocks", K_INT, 1, 65535, F(prefix_blocks), "P", "blocks in each shared prefix"},
    {"block-size", K_INT, 1, 65535, F(block_size), "B", "tokens per KV block"},
    {"threads", K_INT, 1, GEN_MAX_THREADS, F(threads), "N", "worker threads"},
};
#undef F
#define N_FLAGS (sizeof FLAGS / sizeof FLAGS[0])

enum { OPT_JSON = 1000, OPT_HELP, OPT_BASE = 2000 };

static void default_text(const flag_t *f, const gen_params_t *d, char *buf, size_t len)
{
    const char *base = (const char *)d;
    switch (f->kind) {
    case K_I64: snprintf(buf, len, "%lld", (long long)*(const int64_t *)(base + f->off)); break;
    case K_INT: snprintf(buf, len, "%d", *(const int *)(base + f->off)); break;
    case K_U64: snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)(base + f->off)); break;
    case K_DBL: snprintf(buf, len, "%g", *(const double *)(base + f->off)); break;
    case K_STR: snprintf(buf, len, "%s", base + f->off); break;
    case K_SHARES: snprintf(buf, len, "uniform"); break;
    default: snprintf(buf, len, "off"); break;
    }
}

static void usage(void)
{
    gen_params_t d;
    gen_defaults(&d);
    printf("usage: eldr gen -o FILE [flags] [--json]\n"
           "\n"
           "Generate a synthetic MoE activation trace (eldr-trace v1) whose routing\n"
           "behaves like a real router: token-level top-k over router logits with\n"
           "domain structure, generalist experts, request noise and decode drift.\n"
           "The model and every flag are explained in docs/generator.md.\n"
           "\n"
           "  -o, --output FILE        the trace to write (atomically)\n");
    for (size_t i = 0; i < N_FLAGS; i++) {
        char left[48], def[64];
        snprintf(left, sizeof left, "--%s%s%s", FLAGS[i].name, FLAGS[i].arg ? " " : "",
                 FLAGS[i].arg ? FLAGS[i].arg : "");
        default_text(&FLAGS[i], &d, def, sizeof def);
        printf("  %-24s %s (default %s)\n", left, FLAGS[i].help, def);
    }
    printf("  --json                   print the summary as JSON\n"
           "  -h, --help               this text\n"
           "\n"
           "Exit status: 0 written; 2 bad flags or unwritable FILE (one line on stderr).\n");
}

/* "0.5,0.3,0.2" into a malloc'd array. */
static int parse_shares(const char *s, double **out, int *n)
{
    int cap = 1;
    for (const char *c = s; *c; c++)
        cap += *c == ',';
    double *v = calloc((size_t)cap, sizeof *v);
    if (!v)
        return cli_error(CMD, "out of memory");
    int cnt = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        v[cnt] = strtod(p, &end);
        if (end == p || errno || !isfinite(v[cnt]) || v[cnt] < 0 || (*end && *end != ',')) {
            free(v);
            return cli_fail(CMD, "--domain-shares: '%s' is not a list of weights >= 0 like 0.5,0.3,0.2", s);
        }
        cnt++;
        if (!*end)
            break;
        p = end + 1;
    }
    free(*out);
    *out = v;
    *n = cnt;
    return 0;
}

static int set_flag(const flag_t *f, const char *val, gen_params_t *p, double **shares, int *n_shares)
{
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", f->name);
    char *base = (char *)p;
    long long iv;
    double dv;
    switch (f->kind) {
    case K_I64:
    case K_INT:
    case K_U64:
        if (cli_parse_int(CMD, opt, val, (long long)f->lo, (long long)f->hi, &iv))
            return CLI_BADINPUT;
        if (f->kind == K_I64)
            *(int64_t *)(base + f->off) = iv;
        else if (f->kind == K_INT)
            *(int *)(base + f->off) = (int)iv;
        else
            *(uint64_t *)(base + f->off) = (uint64_t)iv;
        return 0;
    case K_DBL:
        if (cli_parse_double(CMD, opt, val, f->lo, f->hi, &dv))
            return CLI_BADINPUT;
        *(double *)(base + f->off) = dv;
        return 0;
    case K_STR:
        if (strlen(val) >= TRACE_MODEL_MAX)
            return cli_fail(CMD, "%s: longer than %d characters", opt, TRACE_MODEL_MAX - 1);
        snprintf(base + f->off, TRACE_MODEL_MAX, "%s", val);
        return 0;
    case K_ON:
        *(int *)(base + f->off) = 1;
        return 0;
    case K_GATES:
        p->gate_prob = p->gate_logit = 1;
        return 0;
    case K_NOGATES:
        p->gate_prob = p->gate_logit = 0;
        return 0;
    case K_SHARES:
        return parse_shares(val, shares, n_shares);
    }
    return 0;
}

static void progress(double frac, void *ctx)
{
    cli_progress_update(ctx, frac);
}

static json_t *dataset_list(const trace_t *t)
{
    json_t *a = json_array();
    const struct { const void *p; const char *name; } ds[] = {
        {t->prefill_counts, "prefill_counts"}, {t->prompt_tokens, "prompt_tokens"},
        {t->decode_counts, "decode_counts"},   {t->decode_tokens, "decode_tokens"},
        {t->gate_prob, "gate_prob"},           {t->gate_logit, "gate_logit"},
        {t->label, "label"},                   {t->label_names, "label_names"},
        {t->arrival_s, "arrival_s"},           {t->request_id, "request_id"},
        {t->prefill_experts, "tokens/prefill_experts"}, {t->prefill_offsets, "tokens/prefill_offsets"},
        {t->decode_experts, "tokens/decode_experts"},   {t->decode_offsets, "tokens/decode_offsets"},
        {t->decode_probs, "tokens/decode_probs"},       {t->block_hashes, "tokens/block_hashes"},
        {t->block_offsets, "tokens/block_offsets"},
    };
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
        if (ds[i].p)
            json_array_append_new(a, json_string(ds[i].name));
    return a;
}

static void report(const char *path, const trace_t *t, const gen_params_t *p, double gen_s,
                   double save_s, int json)
{
    long long tp = 0, td = 0;
    for (int64_t r = 0; r < t->n; r++) {
        tp += t->prompt_tokens[r];
        td += t->decode_tokens ? t->decode_tokens[r] : 0;
    }
    struct stat st;
    long long bytes = stat(path, &st) == 0 ? (long long)st.st_size : -1;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "file", json_string(path));
        json_object_set_new(o, "requests", json_integer(t->n));
        json_object_set_new(o, "layers", json_integer(t->L));
        json_object_set_new(o, "experts", json_integer(t->E));
        json_object_set_new(o, "top_k", json_integer(t->k));
        json_object_set_new(o, "domains", json_integer(p->domains));
        json_object_set_new(o, "seed", json_integer((json_int_t)p->seed));
        json_object_set_new(o, "prompt_tokens", json_integer(tp));
        json_object_set_new(o, "decode_tokens", json_integer(td));
        json_object_set_new(o, "datasets", dataset_list(t));
        json_object_set_new(o, "seconds", json_real(gen_s + save_s));
        json_object_set_new(o, "gen_seconds", json_real(gen_s));
        json_object_set_new(o, "save_seconds", json_real(save_s));
        json_object_set_new(o, "bytes", json_integer(bytes));
        cli_print_json(o);
        return;
    }
    printf("wrote %s: %lld requests, L=%d E=%d k=%d, %d domains, %lld prompt + %lld decode tokens, "
           "%.2f s (generate %.2f, save %.2f), %.2f MB\n",
           path, (long long)t->n, t->L, t->E, t->k, p->domains, tp, td, gen_s + save_s, gen_s, save_s,
           (double)bytes / 1e6);
}

int cmd_gen(int argc, char **argv)
{
    struct option lo[N_FLAGS + 4];
    for (size_t i = 0; i < N_FLAGS; i++)
        lo[i] = (struct option){FLAGS[i].name, FLAGS[i].arg ? required_argument : no_argument, NULL,
                                OPT_BASE + (int)i};
    lo[N_FLAGS] = (struct option){"output", required_argument, NULL, 'o'};
    lo[N_FLAGS + 1] = (struct option){"json", no_argument, NULL, OPT_JSON};
    lo[N_FLAGS + 2] = (struct option){"help", no_argument, NULL, 'h'};
    lo[N_FLAGS + 3] = (struct option){0, 0, 0, 0};

    gen_params_t p;
    gen_defaults(&p);
    const char *out = NULL;
    int json = 0, n_shares = 0, rc = CLI_OK, c;
    double *shares = NULL;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:h", lo, NULL)) != -1) {
        if (c == 'h') {
            usage();
            goto done;
        } else if (c == 'o') {
            out = optarg;
        } else if (c == OPT_JSON) {
            json = 1;
        } else if (c >= OPT_BASE && c < OPT_BASE + (int)N_FLAGS) {
            if ((rc = set_flag(&FLAGS[c - OPT_BASE], optarg, &p, &shares, &n_shares)))
                goto done;
        } else if (c == ':') {
            rc = cli_usage_error(CMD, "%s needs a value", argv[optind - 1]);
            goto done;
        } else {
            rc = cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
            goto done;
        }
    }
    if (optind < argc) {
        rc = cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    if (!out) {
        rc = cli_usage_error(CMD, "missing -o FILE");
        goto done;
    }
    if (shares && n_shares != p.domains) {
        rc = cli_fail(CMD, "--domain-shares has %d values but --domains is %d", n_shares, p.domains);
        goto done;
    }
    p.domain_shares = shares;
    char err[ELDR_ERRLEN];
    if (gen_check(&p, err, sizeof err)) {
        rc = cli_fail(CMD, "%s", err);
        goto done;
    }
    cli_progress bar;
    cli_progress_start(&bar, "gen");
    p.progress = progress;
    p.progress_ctx = &bar;
    double t0 = cli_now();
    trace_t *t = NULL;
    if (gen_run(&p, &t, err, sizeof err)) {
        /* the flags passed gen_check: what is left is a size this machine
         * cannot hold, refused before allocating - still the input's fault */
        cli_progress_done(&bar);
        rc = cli_fail(CMD, "%s", err);
        goto done;
    }
    cli_progress_done(&bar);
    double t1 = cli_now();
    if (trace_save(t, out, err, sizeof err)) {
        trace_free(t);
        rc = cli_fail(CMD, "%s", err);
        goto done;
    }
    report(out, t, &p, t1 - t0, cli_now() - t1, json);
    trace_free(t);
done:
    free(shares);
    return rc;
}
