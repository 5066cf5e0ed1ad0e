/* cmd_push.c - `eldr push MODEL --to URL`: a new model to a running eldrd,
 * lined up with its workers first (docs/eldrd.md, "Pushing a model").
 * Reads the live model, aligns the new centroids to the live workers by
 * the online refit's Hungarian rule (src/client/push.h, one piece with
 * Lua's Router:push), shows the diff, asks, then PUT /v1/model. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../client/push.h"
#include "cli.h"
#include "err.h"

static const char *CMD = "push";

typedef struct push_opts {
    const char *path, *url, *token_file;
    double timeout_s;
    int yes, dry_run, json;
} push_opts;

static void usage(void)
{
    printf("usage: eldr push MODEL --to URL [--token-file F] [--yes] [--dry-run] [--json]\n"
           "\n"
           "Send a model to a running eldrd (PUT /v1/model), lined up with its workers:\n"
           "the new centroids are matched to the live ones by the Hungarian method on\n"
           "their cosine distances, as eldrd's online refit matches its refits, so each\n"
           "worker keeps the traffic most like its own; the model goes out under the\n"
           "live workers' names, in their order. The diff comes first (per live worker:\n"
           "the new cluster it gets, the cosine between its live and new centroid, the\n"
           "sizes; a changed variant, layer mask, idf or top-k is named), then a\n"
           "question on the terminal.\n"
           "\n"
           "MODEL: an eldr model (.h5), a centroid JSON (eldr model export, the\n"
           "reference's fit JSON) or a saved /v1/snapshot?centroids=1.\n"
           "\n"
           "options:\n"
           "  --to URL             the eldrd listener that serves the admin endpoints:\n"
           "                       its --admin-listen address when it has one, else\n"
           "                       its --listen address (required)\n"
           "  --token-file F       send the admin token in F (the file given to eldrd's\n"
           "                       --admin-token-file) as Authorization: Bearer\n"
           "  --yes                push without asking (needed when stdin is not a\n"
           "                       terminal)\n"
           "  --dry-run            show the diff only; nothing is sent\n"
           "  --timeout S          per HTTP call (default 10)\n"
           "  --json               the diff (and eldrd's answer) as JSON\n"
           "  -h, --help           this text\n"
           "\n"
           "Exit: 0 pushed (or the dry run shown), 2 bad input (the model file, the\n"
           "token file, a model whose L, E or K differ from the router's, the public\n"
           "listener of an eldrd with --admin-listen, no terminal and no --yes),\n"
           "3 the daemon does not answer at URL, 1 other failures (eldrd refused the\n"
           "push: its message is printed; declined at the question).\n");
}

enum { O_TO = 256, O_TOKEN, O_YES, O_DRY, O_TIMEOUT, O_JSON };

static int one_opt(int c, const char *a, void *ctx)
{
    push_opts *o = ctx;
    switch (c) {
    case O_TO: o->url = a; return 0;
    case O_TOKEN: o->token_file = a; return 0;
    case O_YES: o->yes = 1; return 0;
    case O_DRY: o->dry_run = 1; return 0;
    case O_TIMEOUT: return cli_parse_double(CMD, "--timeout", a, 0.001, 3600, &o->timeout_s);
    case O_JSON: o->json = 1; return 0;
    }
    return CLI_BADINPUT;
}

/* 0 parsed, -1 --help shown, else the exit status. */
static int parse_args(int argc, char **argv, push_opts *o)
{
    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'},
        {"to", required_argument, 0, O_TO},
        {"token-file", required_argument, 0, O_TOKEN},
        {"yes", no_argument, 0, O_YES},
        {"dry-run", no_argument, 0, O_DRY},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"json", no_argument, 0, O_JSON},
        {0, 0, 0, 0},
    };
    *o = (push_opts){.timeout_s = 10};
    int rc = cli_getopt(CMD, argc, argv, ":h", longopts, usage, one_opt, o);
    if (rc)
        return rc;
    if (optind >= argc)
        return cli_usage_error(CMD, "no model file given");
    if (optind + 1 < argc)
        return cli_usage_error(CMD, "one model file expected, got '%s' too", argv[optind + 1]);
    o->path = argv[optind];
    if (!o->url)
        return cli_usage_error(CMD, "--to URL is required");
    return 0;
}

static void print_diff(FILE *f, const push_opts *o, const model_t *cand, const push_plan *p)
{
    const model_t *lv = p->live;
    const model_align *a = &p->align;
    fprintf(f, "push %s -> %s\n", o->path, o->url);
    fprintf(f, "  live: generation %lld%s%s, K %d, L %d E %d, %s over %d layers\n",
            (long long)p->live_generation, p->live_origin[0] ? " " : "", p->live_origin, lv->K,
            lv->recipe.L, lv->recipe.E, sig_variant_name(lv->recipe.variant),
            lv->recipe.n_layers);
    fprintf(f, "  new:  %s over %d layers%s%s\n", sig_variant_name(cand->recipe.variant),
            cand->recipe.n_layers, cand->created[0] ? ", fitted " : "", cand->created);
    if (a->recipe_changed)
        fprintf(f, "  recipe changed: %s; centroids compared over the %d shared layers\n",
                a->what_changed, a->shared_layers);
    else
        fprintf(f, "  recipe unchanged (variant, layers, idf, top-k)\n");
    if (a->shared_layers == 0) {
        fprintf(f, "  no layer in common: the centroids cannot be compared; the file's order "
                "is kept\n");
    }
    fprintf(f, "  %-16s %-20s %9s %9s %15s\n", "worker", "gets new cluster", "cos", "as given",
            "size live->new");
    double as_given = 0;
    for (int i = 0; i < a->K; i++) {
        int j = a->perm[i];
        char gets[64], sz[48];
        snprintf(gets, sizeof gets, "%d (%.12s)", j, cand->workers[j]);
        if (lv->sizes || cand->sizes) {
            char x[20] = "-", y[20] = "-";
            if (lv->sizes)
                snprintf(x, sizeof x, "%lld", (long long)lv->sizes[i]);
            if (cand->sizes)
                snprintf(y, sizeof y, "%lld", (long long)cand->sizes[j]);
            snprintf(sz, sizeof sz, "%s->%s", x, y);
        } else {
            snprintf(sz, sizeof sz, "-");
        }
        fprintf(f, "  %-16.16s %-20s %9.4f %9.4f %15s\n", lv->workers[i], gets, a->cos[i],
                a->cos_as_given[i], sz);
        as_given += 1 - a->cos_as_given[i];
    }
    fprintf(f, "  %d of %d workers get a cluster other than their own index; summed cosine "
            "distance %.4f aligned, %.4f in the file's order\n", a->moved, a->K, a->cost,
            as_given);
}

static json_t *diff_json(const push_opts *o, const model_t *cand, const push_plan *p)
{
    const model_t *lv = p->live;
    const model_align *a = &p->align;
    json_t *w = json_array();
    for (int i = 0; i < a->K; i++) {
        int j = a->perm[i];
        json_array_append_new(
            w, json_pack("{s:s, s:i, s:s, s:f, s:f, s:o, s:o}", "name", lv->workers[i],
                         "new_cluster", j, "new_cluster_name", cand->workers[j], "cos",
                         a->cos[i], "cos_as_given", a->cos_as_given[i], "size_live",
                         lv->sizes ? json_integer(lv->sizes[i]) : json_null(), "size_new",
                         cand->sizes ? json_integer(cand->sizes[j]) : json_null()));
    }
    return json_pack("{s:s, s:s, s:I, s:s, s:i, s:i, s:i, s:b, s:o, s:i, s:f, s:i, s:o}",
                     "model", o->path, "to", o->url, "live_generation",
                     (json_int_t)p->live_generation, "live_variant",
                     sig_variant_name(lv->recipe.variant), "K", lv->K, "L", lv->recipe.L, "E",
                     lv->recipe.E, "recipe_changed", a->recipe_changed, "what_changed",
                     a->recipe_changed ? json_string(a->what_changed) : json_null(),
                     "shared_layers", a->shared_layers, "align_cost", a->cost, "moved",
                     a->moved, "workers", w);
}

/* On a terminal: ask. 1 yes, 0 no; CLI_BADINPUT when nobody can be asked. */
static int confirm(const push_opts *o, const push_plan *p)
{
    if (!isatty(STDIN_FILENO))
        return cli_fail(CMD, "stdin is not a terminal, so nobody can confirm the push: give "
                        "--yes to push without asking (or --dry-run to see the diff only)");
    fprintf(stderr, "replace generation %lld at %s with the aligned model? [y/N] ",
            (long long)p->live_generation, o->url);
    fflush(stderr);
    char line[64];
    if (!fgets(line, sizeof line, stdin))
        return 0;
    return !strcmp(line, "y\n") || !strcmp(line, "Y\n") || !strcmp(line, "yes\n");
}

/* A call that failed: eldrd answered with an error (1), or nothing
 * answered (3, as cli_reach says it). */
static int call_failed(long status, const char *err)
{
    if (status)
        return cli_error(CMD, "%s", err);
    fprintf(stderr, "eldr %s: daemon unreachable: %s\n", CMD, err);
    return CLI_UNREACHABLE;
}

static int push(const push_opts *o, client_t *c, const model_t *cand)
{
    char err[ELDR_ERRLEN];
    push_plan p;
    long status = 0;
    int rc = push_prepare(c, cand, &p, &status, err, sizeof err);
    if (rc == PUSH_MISMATCH || (rc < 0 && status == 404))
        return cli_fail(CMD, "%s", err);
    if (rc < 0)
        return call_failed(status, err);
    json_t *j = o->json ? diff_json(o, cand, &p) : NULL;
    int ask = !o->dry_run && !o->yes;
    if (!o->json || ask)
        print_diff(o->json ? stderr : stdout, o, cand, &p);
    rc = CLI_OK;
    if (ask) {
        int yes = confirm(o, &p);
        if (yes != 1) {
            rc = yes == 0 ? cli_error(CMD, "not pushed") : yes;
            goto out;
        }
    }
    json_t *answer = NULL;
    if (!o->dry_run && push_send(c, &p, &answer, &status, err, sizeof err) < 0) {
        rc = call_failed(status, err);
        goto out;
    }
    if (o->json) {
        json_object_set_new(j, "dry_run", json_boolean(o->dry_run));
        json_object_set_new(j, "answer", answer ? answer : json_null());
        cli_print_json(j);
        j = NULL;
    } else if (o->dry_run) {
        printf("dry run: nothing sent\n");
    } else {
        json_t *per = json_object_get(answer, "persisted");
        printf("pushed: generation %lld, K %lld, dim %lld%s%s\n",
               (long long)json_integer_value(json_object_get(answer, "model_generation")),
               (long long)json_integer_value(json_object_get(answer, "K")),
               (long long)json_integer_value(json_object_get(answer, "dim")),
               json_is_string(per) ? ", persisted to " : "",
               json_is_string(per) ? json_string_value(per) : "");
        json_decref(answer);
    }
out:
    json_decref(j);
    push_plan_free(&p);
    return rc;
}

int cmd_push(int argc, char **argv)
{
    push_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    char err[ELDR_ERRLEN];
    model_t *m = NULL;
    if (model_load(o.path, &m, err, sizeof err) < 0)
        return cli_fail(CMD, "%s", err);
    client_t *c = client_new(o.url, o.timeout_s, err, sizeof err);
    if (!c)
        rc = cli_fail(CMD, "--to: %s", err);
    else if (o.token_file && client_use_token_file(c, o.token_file, "--token-file", err,
                                                   sizeof err) < 0)
        rc = cli_fail(CMD, "%s", err);
    else if (!(rc = cli_reach(CMD, o.url, o.timeout_s)))
        rc = push(&o, c, m);
    client_free(c);
    model_free(m);
    return rc;
}
