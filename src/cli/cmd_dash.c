/* cmd_dash.c - `eldr dash TRACE [-m MODEL]`: the ncurses dashboard
 * (src/tui), or with --frame one frame of it as plain text, no terminal
 * needed (for docs and tests). This file parses options and writes the
 * frame; the dashboard itself lives in src/tui (tui.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tui/tui.h"
#include "atomicfile.h"
#include "cli.h"
#include "err.h"

#define CMD "dash"

static void usage(void)
{
    printf(
        "usage: eldr dash TRACE.h5 [-m MODEL.h5] [options]\n"
        "       eldr dash TRACE.h5 [-m MODEL.h5] --frame FILE [--view NAME --width W --height H]\n"
        "\n"
        "The operator's dashboard: cluster balance, expert-reuse heatmaps, per-worker\n"
        "queues, a PCA scatter of the signatures and the greedy rho curve, with what-if\n"
        "controls for tau, K and the policy. The first rows of the trace calibrate\n"
        "(like `eldr sim`: 1000 rows, at most half); the rest are simulated under the\n"
        "policy and under the load-balancing baselines (random, rr, jsq, p2c); the\n"
        "header compares the policy with the best of them. Without -m a model is\n"
        "fitted with the default recipe (count_idf, greedy layers, K=4). Keys: 1-6 or\n"
        "Tab views, +/- tau, [/] K, p policy, arrows worker, Enter zoom, ? help, q quit.\n"
        "\n"
        "options:\n"
        "  -m, --model FILE      a fitted model (eldr fit); its recipe is kept on refits\n"
        "  -k, --clusters K      K to start with (refits with the model's recipe; the\n"
        "                        default fit uses it directly; default 4 or the model's)\n"
        "  --tau T               tau to start with (default: the model's)\n"
        "  --policy P            eldr (default), random, rr, jsq, p2c\n"
        "  --view NAME           overview (default), balance, heatmap, queues, scatter, rho\n"
        "  --worker I            the selected worker (default 0); --zoom zooms on it\n"
        "  --frame FILE          write one frame as text to FILE ('-': stdout), no terminal\n"
        "  --width W, --height H size of the frame (default 100 x 30)\n"
        "  --help-overlay        draw the help overlay into the frame\n"
        "  --calib-split N|F     calibration rows: a count (capped at half) or a fraction\n"
        "                        (default 1000)\n"
        "  --rate R              Poisson arrivals at R requests/s (default: the trace's\n"
        "                        arrival_s, or 20/s when it has none)\n"
        "  --seed S              seed of the fit, the baselines and the workload (1)\n"
        "  --json                with --frame: the headline numbers on stdout as JSON\n"
        "  --attach URL, --router-snapshot FILE\n"
        "                        live mode against eldrd (needs the router daemon)\n"
        "  -h, --help            this text\n"
        "\n"
        "example: eldr dash samples/small.h5 --frame - --view balance --width 80 --height 24\n");
}

typedef struct dash_args {
    dash_opts o;
    tui_start st;
    const char *frame;
    int width, height, json;
} dash_args;

static int parse(int argc, char **argv, dash_args *a)
{
    enum { O_TAU = 256, O_POLICY, O_VIEW, O_WORKER, O_ZOOM, O_FRAME, O_WIDTH, O_HEIGHT,
           O_HELPOV, O_SPLIT, O_RATE, O_SEED, O_JSON, O_ATTACH, O_SNAP };
    static const struct option longopts[] = {
        {"model", required_argument, 0, 'm'},   {"clusters", required_argument, 0, 'k'},
        {"tau", required_argument, 0, O_TAU},   {"policy", required_argument, 0, O_POLICY},
        {"view", required_argument, 0, O_VIEW}, {"worker", required_argument, 0, O_WORKER},
        {"zoom", no_argument, 0, O_ZOOM},       {"frame", required_argument, 0, O_FRAME},
        {"width", required_argument, 0, O_WIDTH}, {"height", required_argument, 0, O_HEIGHT},
        {"help-overlay", no_argument, 0, O_HELPOV},
        {"calib-split", required_argument, 0, O_SPLIT},
        {"rate", required_argument, 0, O_RATE}, {"seed", required_argument, 0, O_SEED},
        {"json", no_argument, 0, O_JSON},       {"attach", required_argument, 0, O_ATTACH},
        {"router-snapshot", required_argument, 0, O_SNAP},
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
            if (cli_parse_double(CMD, "--tau", optarg, 0, 2, &a->st.tau))
                return CLI_BADINPUT;
            break;
        case O_POLICY: {
            int k = route_kind_parse(optarg);
            if (k < 0 || k == ROUTE_DOMAIN)
                return cli_fail(CMD, "--policy '%s': expected eldr, random, rr, jsq or p2c",
                                optarg);
            a->st.policy = (route_kind)k;
            break;
        }
        case O_VIEW:
            if ((a->st.view = dash_view_parse(optarg)) < 0)
                return cli_fail(CMD, "--view '%s': expected overview, balance, heatmap, "
                                "queues, scatter or rho", optarg);
            break;
        case O_WORKER:
            if (cli_parse_int(CMD, "--worker", optarg, 0, ROUTE_MAX_WORKERS - 1, &v))
                return CLI_BADINPUT;
            a->st.worker = (int)v;
            break;
        case O_ZOOM:
            a->st.zoom = 1;
            break;
        case O_HELPOV:
            a->st.help = 1;
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
            if (cli_parse_double(CMD, "--calib-split", optarg, 0, 1e12, &a->o.calib))
                return CLI_BADINPUT;
            if (a->o.calib == 0)
                return cli_fail(CMD, "--calib-split 0: the dashboard needs calibration rows");
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
        case O_ATTACH:
        case O_SNAP:
            return cli_fail(CMD, "%s: live mode needs the router daemon's snapshot API, "
                            "which this build does not have yet",
                            c == O_ATTACH ? "--attach" : "--router-snapshot");
        case ':':
            return cli_usage_error(CMD, "option %s needs a value", argv[optind - 1]);
        default:
            return cli_usage_error(CMD, "unknown option %s", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error(CMD, optind >= argc ? "missing TRACE.h5"
                                                   : "expected one TRACE.h5, got more");
    a->o.trace_path = argv[optind];
    if (a->st.K > 0 && !a->o.model_path)
        a->o.K = a->st.K;
    if (a->json && !a->frame)
        return cli_fail(CMD, "--json needs --frame (the interactive dashboard prints nothing)");
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

static void print_json(const dash_t *d, const dash_args *a)
{
    json_t *o = json_object();
    json_object_set_new(o, "view", json_string(dash_view_name(d->view)));
    json_object_set_new(o, "width", json_integer(a->width));
    json_object_set_new(o, "height", json_integer(a->height));
    json_object_set_new(o, "calib_rows", json_integer(d->n_calib));
    json_object_set_new(o, "sim_rows", json_integer(d->n_rows - d->n_calib));
    json_object_set_new(o, "K", json_integer(d->fit->model->K));
    json_t *sz = json_array();
    for (int k = 0; k < d->fit->model->K; k++)
        json_array_append_new(sz, json_integer(d->fit->sizes[k]));
    json_object_set_new(o, "sizes", sz);
    json_object_set_new(o, "n_star", json_integer(d->curve ? d->curve_nstar : 0));
    json_object_set_new(o, "current", sim_json(d->cur));
    const dash_sim *b = dash_best_base(d);
    if (b)
        json_object_set_new(o, "best_baseline", sim_json(b));
    cli_print_json(o);
}

int cmd_dash(int argc, char **argv)
{
    dash_args a;
    memset(&a, 0, sizeof a);
    dash_opts_default(&a.o);
    tui_start_default(&a.st);
    a.width = 100;
    a.height = 30;
    int rc = parse(argc, argv, &a);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    char err[ELDR_ERRLEN];
    if (!a.frame) {
        if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
            return cli_fail(CMD, "the dashboard needs a terminal (use --frame FILE without one)");
        rc = tui_run(&a.o, &a.st, err, sizeof err);
        if (rc < 0)
            return cli_fail(CMD, "%s", err);
        return rc;
    }
    dash_t d;
    char *text = NULL;
    if (tui_frame(&a.o, &a.st, a.width, a.height, &d, &text, err, sizeof err)) {
        dash_free(&d);
        return cli_fail(CMD, "%s", err);
    }
    rc = write_frame(a.frame, text);
    if (!rc && a.json)
        print_json(&d, &a);
    free(text);
    dash_free(&d);
    return rc;
}
