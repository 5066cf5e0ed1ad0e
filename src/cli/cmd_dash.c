/* cmd_dash.c - `eldr dash TRACE [-m MODEL]`, `eldr dash --attach URL` and
 * `eldr dash --router-snapshot FILE`: the ncurses dashboard (src/tui) on a
 * trace or live on eldrd, or with --frame one frame of it as plain text,
 * no terminal needed (for docs and tests). This file parses options and
 * writes the frame; the dashboard itself lives in src/tui (tui.h). */
#include <getopt.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tui/dash_tokens.h"
#include "../tui/live.h"
#include "../tui/tradeoff.h"
#include "../tui/tui.h"
#include "atomicfile.h"
#include "cli.h"
#include "cli_sim.h"
#include "err.h"
#include "sim.h"
#include "split.h"
#include "trace_budget.h"

#define CMD "dash"

static void usage(void)
{
    printf(
        "usage: eldr dash TRACE.h5 [-m MODEL.h5] [options]\n"
        "       eldr dash --attach URL [--interval S]       live, polling eldrd\n"
        "       eldr dash --router-snapshot FILE            a saved /v1/snapshot\n"
        "       eldr dash ... --frame FILE [--view NAME --width W --height H]\n"
        "\n"
        "The operator's dashboard: cluster balance, expert-reuse heatmaps, per-worker\n"
        "queues, a PCA scatter of the signatures and the greedy rho curve, with what-if\n"
        "controls for tau, K and the policy, and the tau x K trade-off (view 7). The\n"
        "trace is split like `eldr sim` splits it (a seeded random draw of 1000 rows,\n"
        "at most half, calibrates); the rest are simulated under the policy and under\n"
        "the load-balancers random, rr, jsq and p2c; the header compares the policy\n"
        "with the best of the baselines jsq, rr, p2c (eldr advise's; random is shown\n"
        "only): the mean change over --seeds simulation seeds with its 95%%\n"
        "confidence interval (+-). Without -m a model is fitted with the default\n"
        "recipe (count_idf, greedy layers, K=4). Keys: 1-7 or Tab views, +/-\n"
        "tau, [/] K, p policy, arrows worker (in the heatmap: its cell cursor; j/k\n"
        "worker), Enter zoom, s save the screen as text (eldr-frame-NNN.txt, here or\n"
        "in $ELDR_FRAME_DIR), ? help, q quit; in view 7 Up/Down pick a cell, Enter\n"
        "applies it, m cycles the metric, r recomputes; the view keeps a trail of the\n"
        "settings tried and gives the verdict of eldr advise at the model's K (use\n"
        "tau X, keep <baseline> or tie, and why; docs/advise.md); live: space pauses\n"
        "decisions. The first screen is a FIRST LOOK (one seed on at most 800 of the\n"
        "simulated rows; the footer says which) and refines in the background to every\n"
        "row and --seeds seeds, with a progress bar; every what-if change does the same.\n"
        "Esc stops the running job within a few ms; nothing restarts it by itself.\n"
        "\n"
        "Live (--attach): polls eldrd's GET /v1/snapshot every --interval seconds and\n"
        "shows its real in-flight counts and totals per worker (with a history of the\n"
        "polls), the recent decisions with their evidence (view 7), drift against the\n"
        "calibration (view 8) and the served centroids (scatter, heatmap). A failed poll\n"
        "shows in the header and is retried; a daemon that does not answer at the start\n"
        "exits 3, as in every command that talks to eldrd.\n"
        "--router-snapshot opens a snapshot saved with GET /v1/snapshot?centroids=1 as\n"
        "one frozen poll. With --frame, attach polls once and renders.\n"
        "\n"
        "options:\n"
        "  -m, --model FILE      a fitted model (eldr fit); its recipe is kept on refits\n"
        "  -k, --clusters K      K to start with (refits with the model's recipe; the\n"
        "                        default fit uses it directly; default 4 or the model's)\n"
        "  --tau T               tau to start with (default: the model's)\n"
        "  --policy P            eldr (default), eldr-cost (the cost rule: least\n"
        "                        predicted step-time increase), random, rr, jsq, p2c\n"
        "  --view NAME           overview (default), balance, heatmap, queues, scatter, rho,\n"
        "                        tradeoff (the tau x K grid, computed before the frame);\n"
        "                        live: decisions, drift instead of tradeoff\n"
        "  --push-to URL         key P pushes the model shown (K refits included) to\n"
        "                        eldrd's admin URL, lined up with its live workers as\n"
        "                        `eldr push` does; the plan first, y sends it\n"
        "  --token-file F        the admin token of --push-to (eldrd --admin-token-file)\n"
        "  --metric M            tradeoff: compare the cells on p50 (TPOT p50, default),\n"
        "                        p99 (TPOT p99) or tps (tokens/s); key m cycles them\n"
        "  --worker I            the selected worker (default 0); --zoom zooms on it\n"
        "  --cell L,E            heatmap: the cell under the cursor (layer, expert; 0,0)\n"
        "  --frame FILE          write one frame as text to FILE ('-': stdout), no terminal:\n"
        "                        the refined numbers (every simulated row, --seeds seeds)\n"
        "  --first               with --frame: the first look instead, what the screen\n"
        "                        shows first (one seed on a stratified sample of at most\n"
        "                        800 simulated rows; the footer says which)\n"
        "  --no-cache            neither read nor write the result cache (refined results\n"
        "                        by the trace's content and the settings, under\n"
        "                        $ELDR_CACHE_DIR, else $XDG_CACHE_HOME/eldr, else\n"
        "                        ~/.cache/eldr; never beside the trace)\n"
        "  --width W, --height H size of the frame (default 100 x 30)\n"
        "  --help-overlay        draw the help overlay into the frame\n"
        CLI_SPLIT_HELP
        "                         (0 is refused: the dashboard needs calibration rows)\n"
        "  --seeds N             simulation seeds behind the header's +- (95%% CI of the\n"
        "                        change against the best baseline) and the trade-off grid\n"
        "                        (default 5; 1 shows no interval)\n"
        "  --rate R              Poisson arrivals at R requests/s (default: the trace's\n"
        "                        arrival_s, or 20/s when it has none)\n"
        "  --seed S              seed of the fit, the baselines and the workload (1)\n"
        "  --max-memory BYTES    bound what is loaded (K, M, G suffixes; default half\n"
        "                        of physical memory): a bigger trace is sampled by\n"
        "                        whole chunks, and the output says so; activation\n"
        "                        pools over what it leaves are sampled at each\n"
        "                        admission (said once; the same numbers)\n"
        "  --json                with --frame FILE: the headline numbers on stdout as\n"
        "                        JSON (--frame - with --json is refused: both on stdout)\n"
        "  --attach URL          live mode on a running eldrd (http://HOST:PORT)\n"
        "  --router-snapshot FILE  a saved snapshot (GET /v1/snapshot?centroids=1), offline\n"
        "  --interval S          live: seconds between polls (default 0.5)\n"
        "  --timeout S           live: bound of each HTTP call (default 2)\n"
        "  -h, --help            this text\n"
        "\n"
        "Exit status: 0 success, 2 bad input, 3 --attach: the daemon does not answer,\n"
        "1 other failure.\n"
        "\n"
        "examples: eldr dash samples/small.h5 --frame - --view balance --width 80 --height 24\n"
        "          eldr dash samples/small.h5 --rate 60 --frame - --view tradeoff --seeds 3\n"
        "          eldr dash --attach http://127.0.0.1:8470 --frame - --view decisions\n");
}

typedef struct dash_args {
    dash_opts o;
    tui_live live;
    tui_start st;
    const char *frame;
    int width, height, json;
    int split_given;             /* 1: a split option, 2: --seeds (not for live) */
    size_t max_memory;           /* --max-memory */
} dash_args;

/* --metric: what the trade-off view compares (key m cycles it); -1 unknown. */
static int metric_parse(const char *s)
{
    static const char *names[TRADE_N_METRICS] = {"p50", "p99", "tps"};
    for (int i = 0; i < TRADE_N_METRICS; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

/* Live mode takes no trace and none of the what-if options. */
static int check_live(int argc, char **argv, dash_args *a)
{
    if (a->live.url && a->live.snapshot_path)
        return cli_fail(CMD, "--attach and --router-snapshot: give one of them");
    const char *mode = a->live.url ? "--attach" : "--router-snapshot";
    if (optind < argc)
        return cli_fail(CMD, "%s: takes no trace (got '%s')", mode, argv[optind]);
    if (a->o.model_path)
        return cli_fail(CMD, "%s: -m does not apply (the model is the daemon's)", mode);
    if (a->st.K > 0 || a->st.tau >= 0 || a->st.policy != ROUTE_ELDR)
        return cli_fail(CMD, "%s: -k, --tau and --policy do not apply (use PUT /v1/config "
                        "on the daemon)", mode);
    if (a->split_given)
        return cli_fail(CMD, "%s: --split, --split-seed, --calib-split and --seeds apply to "
                        "a trace only", mode);
    if (a->st.first || a->o.no_cache)
        return cli_fail(CMD, "%s: --first and --no-cache apply to a trace only", mode);
    return 0;
}

static int parse(int argc, char **argv, dash_args *a)
{
    enum { O_TAU = 256, O_POLICY, O_VIEW, O_WORKER, O_ZOOM, O_FRAME, O_WIDTH, O_HEIGHT,
           O_HELPOV, O_SPLIT, O_RATE, O_SEED, O_JSON, O_ATTACH, O_SNAP, O_INTERVAL,
           O_TIMEOUT, O_CELL, O_SPLITMODE, O_SPLITSEED, O_SEEDS, O_METRIC, O_PUSHTO,
           O_TOKEN, O_MAXMEM, O_FIRST, O_NOCACHE };
    static const struct option longopts[] = {
        {"model", required_argument, 0, 'm'},   {"clusters", required_argument, 0, 'k'},
        {"tau", required_argument, 0, O_TAU},   {"policy", required_argument, 0, O_POLICY},
        {"view", required_argument, 0, O_VIEW}, {"worker", required_argument, 0, O_WORKER},
        {"zoom", no_argument, 0, O_ZOOM},       {"frame", required_argument, 0, O_FRAME},
        {"width", required_argument, 0, O_WIDTH}, {"height", required_argument, 0, O_HEIGHT},
        {"help-overlay", no_argument, 0, O_HELPOV},
        {"calib-split", required_argument, 0, O_SPLIT},
        {"split", required_argument, 0, O_SPLITMODE},
        {"split-seed", required_argument, 0, O_SPLITSEED},
        {"seeds", required_argument, 0, O_SEEDS},
        {"rate", required_argument, 0, O_RATE}, {"seed", required_argument, 0, O_SEED},
        {"json", no_argument, 0, O_JSON},       {"attach", required_argument, 0, O_ATTACH},
        {"router-snapshot", required_argument, 0, O_SNAP},
        {"interval", required_argument, 0, O_INTERVAL},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"cell", required_argument, 0, O_CELL},
        {"metric", required_argument, 0, O_METRIC},
        {"push-to", required_argument, 0, O_PUSHTO},
        {"token-file", required_argument, 0, O_TOKEN},
        {"max-memory", required_argument, 0, O_MAXMEM},
        {"first", no_argument, 0, O_FIRST},     {"no-cache", no_argument, 0, O_NOCACHE},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    long long v;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:k:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            usage();
            return -1;
        case 'm':
            a->o.model_path = optarg;
            break;
        case 'k':
            if (cli_parse_int(CMD, "--clusters", optarg, 1, DASH_K_MAX, &v))
                return CLI_BADINPUT;
            a->st.K = (int)v;
            break;
        case O_TAU:
            if (cli_parse_double(CMD, "--tau", optarg, 0, ROUTE_TAU_MAX, &a->st.tau))
                return CLI_BADINPUT;
            break;
        case O_POLICY: {
            int k = route_kind_parse(optarg);
            if (k < 0 || !dash_policy_shown((route_kind)k))
                return cli_fail(CMD, "--policy '%s': expected %s", optarg, DASH_POLICIES);
            a->st.policy = (route_kind)k;
            break;
        }
        case O_VIEW:
            if ((a->st.view = dash_view_parse(optarg)) < 0)
                return cli_fail(CMD, "--view '%s': expected overview, balance, heatmap, "
                                "queues, scatter, rho, tradeoff, decisions or drift", optarg);
            break;
        case O_WORKER:
            if (cli_parse_int(CMD, "--worker", optarg, 0, ROUTE_MAX_WORKERS - 1, &v))
                return CLI_BADINPUT;
            a->st.worker = (int)v;
            break;
        case O_ZOOM:
            a->st.zoom = 1;
            break;
        case O_CELL: {
            int l, e, n = 0;
            if (sscanf(optarg, "%d,%d%n", &l, &e, &n) != 2 || optarg[n] || l < 0 || e < 0)
                return cli_fail(CMD, "--cell '%s': expected LAYER,EXPERT (two integers "
                                ">= 0)", optarg);
            a->st.cell_l = l;
            a->st.cell_e = e;
            break;
        }
        case O_HELPOV:
            a->st.help = 1;
            break;
        case O_METRIC:
            if ((a->st.metric = metric_parse(optarg)) < 0)
                return cli_fail(CMD, "--metric '%s': expected p50, p99 or tps", optarg);
            break;
        case O_FRAME:
            a->frame = optarg;
            break;
        case O_WIDTH:
            if (cli_parse_int(CMD, "--width", optarg, 40, 1000, &v))
                return CLI_BADINPUT;
            a->width = (int)v;
            break;
        case O_HEIGHT:
            if (cli_parse_int(CMD, "--height", optarg, 10, 1000, &v))
                return CLI_BADINPUT;
            a->height = (int)v;
            break;
        case O_SPLIT:
            if (cli_split_option(CMD, "--calib-split", optarg, &a->o.split))
                return CLI_BADINPUT;
            if (a->o.split.size == 0)
                return cli_fail(CMD, "--calib-split 0: the dashboard needs calibration rows");
            a->split_given = 1;
            break;
        case O_SPLITMODE:
        case O_SPLITSEED:
            if (cli_split_option(CMD, c == O_SPLITMODE ? "--split" : "--split-seed", optarg,
                                 &a->o.split))
                return CLI_BADINPUT;
            a->split_given = 1;
            break;
        case O_SEEDS:
            if (cli_parse_int(CMD, "--seeds", optarg, 1, GRID_MAX_SEEDS, &v))
                return CLI_BADINPUT;
            a->o.seeds = (int)v;
            a->split_given |= 2;
            break;
        case O_RATE:
            if (cli_parse_double(CMD, "--rate", optarg, 1e-6, 1e9, &a->o.rate))
                return CLI_BADINPUT;
            break;
        case O_SEED:
            if (cli_parse_int(CMD, "--seed", optarg, 0, (long long)(~0ULL >> 1), &v))
                return CLI_BADINPUT;
            a->o.seed = (uint64_t)v;
            break;
        case O_JSON:
            a->json = 1;
            break;
        case O_MAXMEM:
            if (cli_parse_bytes(CMD, "--max-memory", optarg, &a->max_memory))
                return CLI_BADINPUT;
            break;
        case O_ATTACH:
            a->live.url = optarg;
            break;
        case O_SNAP:
            a->live.snapshot_path = optarg;
            break;
        case O_INTERVAL:
            if (cli_parse_double(CMD, "--interval", optarg, 0.05, 3600, &a->live.interval_s))
                return CLI_BADINPUT;
            break;
        case O_TIMEOUT:
            if (cli_parse_double(CMD, "--timeout", optarg, 0.1, 600, &a->live.timeout_s))
                return CLI_BADINPUT;
            break;
        case O_FIRST:
            a->st.first = 1;
            break;
        case O_NOCACHE:
            a->o.no_cache = 1;
            break;
        case O_PUSHTO:
            a->o.push_to = optarg;
            break;
        case O_TOKEN:
            a->o.push_token_file = optarg;
            break;
        case ':':
            return cli_usage_error(CMD, "option %s needs a value", argv[optind - 1]);
        default:
            return cli_usage_error(CMD, "unknown option %s", argv[optind - 1]);
        }
    }
    if (a->json && !a->frame)
        return cli_fail(CMD, "--json needs --frame (the interactive dashboard prints nothing)");
    /* both would go to stdout, and a frame followed by JSON parses as
     * neither: the frame goes to a file when the JSON is wanted */
    if (a->json && !strcmp(a->frame, "-"))
        return cli_fail(CMD, "--frame - and --json both write stdout: give --frame FILE "
                        "with --json");
    if (a->st.first && !a->frame)
        return cli_fail(CMD, "--first needs --frame (the screen shows the first look "
                        "anyway, then refines)");
    if (a->o.push_token_file && !a->o.push_to)
        return cli_fail(CMD, "--token-file is the admin token of --push-to: give --push-to URL");
    if (a->o.push_to && (a->frame || a->live.url || a->live.snapshot_path))
        return cli_fail(CMD, "--push-to: key P of the interactive dashboard on a trace "
                        "(not with --frame, --attach or --router-snapshot)");
    if (a->live.url || a->live.snapshot_path)
        return check_live(argc, argv, a);
    if (optind != argc - 1)
        return cli_usage_error(CMD, optind >= argc ? "missing TRACE.h5 (or --attach URL)"
                                                   : "expected one TRACE.h5, got more");
    a->o.trace_path = argv[optind];
    if (a->st.K > 0 && !a->o.model_path)
        a->o.K = a->st.K;
    return 0;
}

/* Write text to path atomically (temp + rename), or to stdout for "-". */
static int write_frame(const char *path, const char *text)
{
    char err[ELDR_ERRLEN];
    if (!strcmp(path, "-"))
        return fputs(text, stdout) < 0 ? cli_error(CMD, "cannot write the frame") : 0;
    if (atomic_write_text(path, text, 0, err, sizeof err))
        return cli_fail(CMD, "--frame %s", err);
    return 0;
}

static json_t *sim_json(const dash_sim *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "policy", json_string(route_kind_name(s->policy)));
    if (s->policy == ROUTE_ELDR)
        json_object_set_new(o, "tau", json_real(s->tau));
    json_object_set_new(o, "tpot_p50_ms", json_real(s->res.tpot_p50_ms));
    json_object_set_new(o, "tpot_p99_ms", json_real(s->res.tpot_p99_ms));
    json_object_set_new(o, "distinct_per_step", json_real(s->res.distinct_per_step));
    json_object_set_new(o, "queue_p99_ms", json_real(s->res.queue_p99_ms));
    json_t *r = json_array();
    for (int k = 0; k < s->K; k++)
        json_array_append_new(r, json_integer(s->routed[k]));
    json_object_set_new(o, "routed", r);
    return o;
}

static json_t *num(double v)
{
    return v == v ? json_real(v) : json_null();
}

static json_t *ci_pair(const grid_stat *s)
{
    return isfinite(s->lo) ? json_pack("[f,f]", s->lo, s->hi) : json_null();
}

/* The trade-off grid's ELDR cells (--view tradeoff), in table order. */
/* The trade-off grid: each cell's changes against its K's best baseline
 * (p50, p99, tokens/s with CIs), the front on the metric shown, the
 * verdict and what the intervals cover. */
static json_t *tradeoff_json(const dash_t *d)
{
    const grid_result *g = &d->trade.g;
    int rows[TRADE_MAX_ROWS], pareto[TRADE_MAX_ROWS];
    int n = tradeoff_eldr_rows(g, rows, TRADE_MAX_ROWS);
    tradeoff_pareto(g, rows, n, d->trade_metric, pareto);
    json_t *cells = json_array();
    for (int i = 0; i < n; i++) {
        const grid_row *r = &g->rows[rows[i]];
        const char *base = r->best_baseline >= 0 ? route_kind_name(g->rows[r->best_baseline].kind)
                                                 : "";
        json_t *c = json_pack(
            "{s:s, s:o, s:i, s:f, s:o, s:f, s:o, s:s, s:f, s:f, s:b}", "policy",
            route_kind_name(r->kind), "tau", num(r->tau), "workers", r->K,
            "tpot_p50_ms", r->tpot_p50.mean, "tpot_p50_ms_ci95", ci_pair(&r->tpot_p50),
            "vs_best_baseline_pct", r->vs_best_pct.mean, "ci95", ci_pair(&r->vs_best_pct),
            "best_baseline", base, "imbalance", r->imbalance.mean, "distinct_per_step",
            r->distinct.mean, "pareto", pareto[i]);
        json_object_set_new(c, "p99_vs_best_baseline_pct", json_real(r->p99_vs_best_pct.mean));
        json_object_set_new(c, "p99_ci95", ci_pair(&r->p99_vs_best_pct));
        json_object_set_new(c, "tps_vs_best_baseline_pct", json_real(r->tps_vs_best_pct.mean));
        json_object_set_new(c, "tps_ci95", ci_pair(&r->tps_vs_best_pct));
        json_array_append_new(cells, c);
    }
    verdict v;
    verdict_text t;
    char cov[300], base[96], tp[200];
    int ans = tradeoff_verdict(g, d->trade.K0, &v, &t);
    tradeoff_covers(d, cov, sizeof cov);
    verdict_baselines(g, base, sizeof base);
    grid_throughput_phrase(g, tp, sizeof tp);
    json_t *o = json_pack("{s:i, s:f, s:s, s:s, s:b, s:s, s:b, s:o}", "seeds", g->n_seeds,
                          "seconds", g->seconds, "metric", tradeoff_metric_name(d->trade_metric),
                          "verdict", t.head, "eldr_wins", ans == VERDICT_WIN, "ci_covers", cov,
                          "split_redrawn", g->resplit, "cells", cells);
    json_object_set_new(o, "answer", json_string(ans < 0 ? "none"
                                                 : verdict_answer_name((verdict_answer)ans)));
    json_object_set_new(o, "reason", json_string(t.reason));
    json_object_set_new(o, "rule", json_string(t.rule));
    json_object_set_new(o, "baselines", json_string(base));
    json_object_set_new(o, "throughput", json_string(tp));
    json_object_set_new(o, "K", json_integer(d->trade.K0));
    return o;
}

static void print_json(const dash_t *d, const dash_args *a)
{
    json_t *o = json_object();
    json_object_set_new(o, "view", json_string(dash_view_name(d->view)));
    json_object_set_new(o, "width", json_integer(a->width));
    json_object_set_new(o, "height", json_integer(a->height));
    json_object_set_new(o, "split", json_pack("{s:s, s:I}", "mode", split_mode_name(d->split_mode),
                                              "seed", (json_int_t)d->split_seed));
    json_object_set_new(o, "calib_rows", json_integer(d->n_calib));
    json_object_set_new(o, "sim_rows", json_integer(d->n_rows - d->n_calib));
    json_object_set_new(o, "K", json_integer(d->fit->model->K));
    /* sizes: the model's own clusters (null when its file has none);
     * reassigned: this trace's calibration rows by nearest centroid,
     * only for a model file */
    const dash_fit *f = d->fit;
    json_t *sz = f->have_sizes ? json_array() : json_null();
    json_t *re = f->reassigned ? json_array() : NULL;
    for (int k = 0; k < f->model->K; k++) {
        if (f->have_sizes)
            json_array_append_new(sz, json_integer(f->sizes[k]));
        if (re)
            json_array_append_new(re, json_integer(f->reassigned[k]));
    }
    json_object_set_new(o, "sizes", sz);
    if (re)
        json_object_set_new(o, "reassigned", re);
    json_object_set_new(o, "model_source", json_string(f->origin == DASH_FIT_FILE ? "file"
                                                       : f->origin == DASH_FIT_REFIT
                                                       ? "refit" : "default"));
    json_object_set_new(o, "n_star", json_integer(d->curve ? d->curve_nstar : 0));
    json_object_set_new(o, "current", sim_json(d->cur));
    const dash_sim *b = dash_best_base(d);
    if (b)
        json_object_set_new(o, "best_baseline", sim_json(b));
    json_object_set_new(o, "seeds", json_integer(d->opts.seeds));
    /* what the numbers rest on: the first look's rows and one seed, or
     * every simulated row and the seeds */
    char on[160];
    dash_rests_on(d, on, sizeof on);
    int first = d->level == DASH_LEVEL_FIRST && d->rows[DASH_LEVEL_FIRST].t;
    json_object_set_new(o, "rests_on", json_pack(
        "{s:b, s:I, s:i, s:s, s:b}", "refined", d->refined, "rows",
        (json_int_t)(first ? d->rows[DASH_LEVEL_FIRST].t->n : d->eval->n), "seeds",
        d->ci.valid ? d->ci.n_seeds : 1, "text", on, "from_cache", d->from_cache));
    if (d->trade.state == DASH_TRADE_DONE)
        json_object_set_new(o, "tradeoff", tradeoff_json(d));
    const dash_ci *ci = dash_shown_ci(d);
    if (ci)
        json_object_set_new(o, "vs_best_baseline", json_pack(
            "{s:s, s:f, s:f, s:[f,f], s:f, s:[f,f], s:f}", "baseline", route_kind_name(ci->best),
            "tpot_p50_ms", ci->tpot_p50.mean,
            "tpot_p50_pct", ci->vs_best_pct.mean, "tpot_p50_pct_ci95", ci->vs_best_pct.lo,
            ci->vs_best_pct.hi, "distinct_pct", ci->distinct_vs_best_pct.mean,
            "distinct_pct_ci95", ci->distinct_vs_best_pct.lo, ci->distinct_vs_best_pct.hi,
            "seconds", ci->seconds));
    cli_print_json(o);
}

static void print_live_json(const dash_t *d, const dash_args *a)
{
    const dash_live *L = d->live;
    const dash_live_now *n = &L->now;
    json_t *o = json_object(), *ws = json_array(), *dec = json_array();
    json_object_set_new(o, "view", json_string(dash_view_name(d->view)));
    json_object_set_new(o, "width", json_integer(a->width));
    json_object_set_new(o, "height", json_integer(a->height));
    json_object_set_new(o, "mode", json_string(L->attached ? "attach" : "snapshot"));
    json_object_set_new(o, "source", json_string(L->source));
    json_object_set_new(o, "K", json_integer(n->K));
    json_object_set_new(o, "tau", num(n->tau));
    json_object_set_new(o, "generation", json_integer(n->generation));
    for (int k = 0; k < n->K; k++)
        json_array_append_new(ws, json_pack("{s:s, s:I, s:I, s:I}", "name", n->names[k],
                                            "inflight", (json_int_t)n->inflight[k], "routed",
                                            (json_int_t)n->routed[k], "finished",
                                            (json_int_t)n->finished[k]));
    json_object_set_new(o, "workers", ws);
    for (int i = 0; i < n->n_dec; i++)
        json_array_append_new(dec, json_pack("{s:s, s:I, s:i, s:s, s:o}", "request_id",
                                             n->dec[i].id, "seq", (json_int_t)n->dec[i].seq,
                                             "worker_index", n->dec[i].worker, "rule",
                                             n->dec[i].rule, "sim_max", num(n->dec[i].sim_max)));
    json_object_set_new(o, "decisions", dec);
    json_object_set_new(o, "drift", json_pack("{s:I, s:o, s:o, s:o, s:o}", "window",
                                              (json_int_t)n->window, "mean_best_similarity",
                                              num(n->mean_sim), "calibration_mean_similarity",
                                              num(n->calib_sim), "share_tvd", num(n->tvd),
                                              "share_tvd_threshold", num(n->tvd_thr)));
    cli_print_json(o);
}

/* --attach / --router-snapshot */
static int run_live(dash_args *a)
{
    char err[ELDR_ERRLEN];
    int rc;
    if (!a->frame && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
        return cli_fail(CMD, "the dashboard needs a terminal (use --frame FILE without one)");
    /* a daemon that does not answer: the same exit status as in replay */
    if (a->live.url && (rc = cli_reach(CMD, a->live.url, a->live.timeout_s)))
        return rc;
    if (!a->frame) {
        rc = tui_run_live(&a->live, &a->st, err, sizeof err);
        return rc < 0 ? cli_fail(CMD, "%s", err) : rc;
    }
    dash_t d;
    char *text = NULL;
    if (tui_frame_live(&a->live, &a->st, a->width, a->height, &d, &text, err, sizeof err)) {
        dash_free(&d);
        return cli_fail(CMD, "%s", err);
    }
    rc = write_frame(a->frame, text);
    if (!rc && a->json)
        print_live_json(&d, a);
    free(text);
    dash_free(&d);
    return rc;
}

/* The activation pools get what --max-memory leaves beside the rows
 * the dashboard holds: n rows and its copy of the calibration rows (as
 * eldr sim prices them), and extra bytes (its token row readers). Above
 * that cap the pools are sampled at each admission: the same numbers,
 * more CPU; said once on stderr, unless the trace records its decode
 * token rows (then its runs replay those and sample no pool). */
static void pools_within(dash_args *a, const trace_header_t *h, int64_t n, double per_row,
                         double extra)
{
    char err[ELDR_ERRLEN];
    int64_t calib = split_calib_count(n, a->o.split.size, err, sizeof err);
    double loaded = (double)(n + (calib > 0 ? calib : 0)) * per_row + extra;
    a->o.pool_cache = sim_pool_cache_within(a->max_memory, loaded);
    if (a->o.pool_cache >= SIM_DEFAULT_POOL_CACHE || h->has_tokens_decode)
        return;
    char cb[32], bb[32], room[64] = "no room";
    cli_format_bytes((double)a->max_memory, bb, sizeof bb);
    if (a->o.pool_cache) {
        cli_format_bytes((double)a->o.pool_cache, cb, sizeof cb);
        snprintf(room, sizeof room, "%s", cb);
    }
    fprintf(stderr, "eldr %s: note: %s: activation pools over %s are sampled at each "
            "admission, not kept: the budget %s leaves %s beside the loaded rows (the same "
            "numbers, more CPU)\n", CMD, a->o.trace_path, a->o.pool_cache ? cb : "0 B", bb,
            room);
}

/* --max-memory: a trace whose rows exceed it is loaded here as a chunk
 * sample (the message says so) and handed to the dashboard, which then
 * reads no file itself; within the budget *t stays NULL and the
 * dashboard loads the trace as always. Loaded from its path the trace
 * comes without its decode token rows (read from the file: dash_tokens.h),
 * so they are priced as the readers' caches, not as rows; a sample is
 * handed over loaded, token rows and all, and priced with them. */
static int load_within(dash_args *a, trace_t **t, model_t **m)
{
    char err[ELDR_ERRLEN], note[96];
    trace_header_t h;
    if (trace_read_header(a->o.trace_path, &h, err, sizeof err))
        return cli_fail(CMD, "%s", err);
    double per_row = trace_row_bytes(&h, 0);
    double own_row = dash_row_bytes(&h), readers = dash_tokens_bytes(&h);
    if ((double)h.n * own_row + readers <= (double)a->max_memory) {
        pools_within(a, &h, h.n, own_row, readers);
        return 0;
    }
    int rc = cli_load_within(CMD, a->o.trace_path, &h, 0, per_row, a->max_memory, a->o.seed,
                             note, sizeof note, t);
    if (rc)
        return rc;
    pools_within(a, &h, (*t)->n, per_row, 0);
    if (a->o.model_path && model_load(a->o.model_path, m, err, sizeof err)) {
        trace_free(*t);
        *t = NULL;
        return cli_fail(CMD, "%s", err);
    }
    return 0;
}

int cmd_dash(int argc, char **argv)
{
    dash_args a;
    memset(&a, 0, sizeof a);
    dash_opts_default(&a.o);
    tui_start_default(&a.st);
    a.max_memory = trace_budget_default();
    a.width = 100;
    a.height = 30;
    a.live.interval_s = LIVE_DEFAULT_INTERVAL;
    a.live.timeout_s = 2;
    int rc = parse(argc, argv, &a);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    if (a.live.url || a.live.snapshot_path)
        return run_live(&a);
    char err[ELDR_ERRLEN];
    trace_t *t = NULL;
    model_t *m = NULL;
    if (!a.frame && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
        return cli_fail(CMD, "the dashboard needs a terminal (use --frame FILE without one)");
#ifdef M_MMAP_THRESHOLD
    /* blocks of a megabyte and more are mapped, and unmapped when freed:
     * glibc would raise this bound with each big block freed (up to 32
     * MiB) and keep the load's slabs and a seed's copies in its heap after
     * their free (43 MB of the t20k peak without -m; docs/memory.md) */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
    if ((rc = load_within(&a, &t, &m)))
        return rc;
    if (!a.frame) {
        rc = t ? tui_run_trace(&a.o, &a.st, t, m, err, sizeof err)
               : tui_run(&a.o, &a.st, err, sizeof err);
        if (rc < 0)
            return cli_fail(CMD, "%s", err);
        return rc;
    }
    dash_t d;
    char *text = NULL;
    if (t ? tui_frame_trace(&a.o, &a.st, t, m, a.width, a.height, &d, &text, err, sizeof err)
          : tui_frame(&a.o, &a.st, a.width, a.height, &d, &text, err, sizeof err)) {
        dash_free(&d);
        return cli_fail(CMD, "%s", err);
    }
    if (d.in_sample[0])
        fprintf(stderr, "eldr dash: warning: %s: %s\n", a.o.model_path, d.in_sample);
    if (d.cache_note[0])   /* an unusable or unwritable cache entry: a note, not a failure */
        fprintf(stderr, "eldr dash: note: %s\n", d.cache_note);
    rc = write_frame(a.frame, text);
    if (!rc && a.json)
        print_json(&d, &a);
    free(text);
    dash_free(&d);
    return rc;
}
