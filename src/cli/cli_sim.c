/* cli_sim.c - shared options of the simulating commands (cli_sim.h). */
#include "cli_sim.h"
#include "trace_budget.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "err.h"
#include "insample.h"

int cli_split_option(const char *cmd, const char *opt, const char *arg, split_spec *s)
{
    long long v;
    if (!strcmp(opt, "--split")) {
        int m = split_mode_parse(arg);
        if (m < 0)
            return cli_fail(cmd, "--split: '%s' is not a split (random, head, stratified)", arg);
        s->mode = (split_mode)m;
        return 0;
    }
    if (!strcmp(opt, "--split-seed")) {
        if (cli_parse_int(cmd, "--split-seed", arg, 0, INT64_MAX, &v))
            return CLI_BADINPUT;
        s->seed = (uint64_t)v;
        s->pinned = 1;
        return 0;
    }
    /* --calib-split: a fraction when it has a '.' or an exponent, else a count */
    if (strpbrk(arg, ".eE")) {
        double f;
        if (cli_parse_double(cmd, "--calib-split", arg, 0, 1, &f))
            return CLI_BADINPUT;
        if (f <= 0 || f >= 1)
            return cli_fail(cmd, "--calib-split: fraction %g must be in (0, 1)", f);
        s->size = f;
        s->size_given = 1;
        return 0;
    }
    if (cli_parse_int(cmd, "--calib-split", arg, 0, 1LL << 40, &v))
        return CLI_BADINPUT;
    s->size = (double)v;
    s->size_given = 1;
    return 0;
}

static void load_progress(void *ctx, double frac)
{
    cli_progress_update(ctx, frac);
}

int cli_require_full_routing(const char *cmd, const char *path, const trace_t *t)
{
    int64_t first = -1, reqs = 0, toks = 0;
    for (int64_t r = 0; t->prefill_unrouted && r < t->n; r++)
        if (t->prefill_unrouted[r] > 0) {
            first = first < 0 ? r : first;
            reqs++;
            toks += t->prefill_unrouted[r];
        }
    if (first < 0)
        return 0;
    return cli_fail(cmd, "%s: prefill_unrouted_tokens row %lld: %d prompt tokens without routing "
                    "(%lld requests, %lld tokens in all; prefix-cache hits); "
                    "--require-full-routing refuses them", path, (long long)first,
                    t->prefill_unrouted[first], (long long)reqs, (long long)toks);
}

int cli_load_trace(const char *cmd, const char *path, trace_t **out)
{
    char err[ELDR_ERRLEN];
    cli_progress bar;
    cli_progress_start(&bar, "load");
    int rc = trace_load_progress(path, load_progress, &bar, out, err, sizeof err);
    cli_progress_done(&bar);
    return rc < 0 ? cli_fail(cmd, "%s", err) : 0;
}

int cli_load_some(const char *cmd, const char *path, trace_load_opts *o, trace_t **out)
{
    char err[ELDR_ERRLEN];
    cli_progress bar;
    cli_progress_start(&bar, "load");
    o->progress = load_progress;
    o->progress_ctx = &bar;
    int rc = trace_load_some(path, o, out, err, sizeof err);
    cli_progress_done(&bar);
    o->progress = NULL;
    o->progress_ctx = NULL;
    return rc < 0 ? cli_fail(cmd, "%s", err) : 0;
}

int cli_budget_rows(const char *cmd, const char *path, int64_t *rows, int64_t *n,
                    double per_row, size_t budget, double reserved, uint64_t seed, char *note,
                    size_t note_len)
{
    char err[ELDR_ERRLEN], b[32];
    if (note_len)
        note[0] = '\0';
    double room = (double)budget - reserved;
    double keep = per_row > 0 ? floor(room / per_row) : (double)*n;
    if (keep >= (double)*n)
        return 0;
    if (keep < 1)
        keep = 1;
    int64_t chunk;
    if (trace_chunk_rows(path, &chunk, err, sizeof err))
        return cli_fail(cmd, "%s", err);
    int64_t *out = malloc(((size_t)*n + 1) * sizeof *out);
    if (!out)
        return cli_error(cmd, "out of memory");
    int64_t m = trace_sample_chunks(rows, *n, chunk, (int64_t)keep, seed, out);
    if (m < 0) {
        free(out);
        return cli_error(cmd, "out of memory");
    }
    cli_format_bytes((double)budget, b, sizeof b);
    snprintf(note, note_len, "sampled %lld of %lld rows (budget %s)", (long long)m,
             (long long)*n, b);
    fprintf(stderr, "eldr %s: %s: %s, drawn as whole chunks of %lld row%s\n", cmd, path,
            note, (long long)chunk, chunk == 1 ? "" : "s");
    memcpy(rows, out, (size_t)m * sizeof *out);
    free(out);
    *n = m;
    return 1;
}

int cli_load_within(const char *cmd, const char *path, const trace_header_t *h, unsigned drop,
                    double per_row, size_t budget, uint64_t seed, char *note, size_t note_len,
                    trace_t **out)
{
    trace_load_opts lo = {.drop = drop};
    if (note_len)
        note[0] = '\0';
    if ((double)h->n * per_row <= (double)budget)
        return cli_load_some(cmd, path, &lo, out);
    int64_t n = h->n, *rows = malloc(((size_t)n + 1) * sizeof *rows);
    if (!rows)
        return cli_error(cmd, "out of memory");
    for (int64_t i = 0; i < n; i++)
        rows[i] = i;
    int rc = cli_budget_rows(cmd, path, rows, &n, per_row, budget, 0, seed, note, note_len);
    lo.rows = rows;
    lo.n_rows = n;
    if (rc == 1)
        rc = cli_load_some(cmd, path, &lo, out);
    free(rows);
    return rc;
}

int cli_split_rows(const char *cmd, const trace_t *t, const split_spec *s, int allow_none,
                   split_rows *rows)
{
    char err[ELDR_ERRLEN];
    if (split_make(t, s, rows, err, sizeof err) < 0)
        return cli_fail(cmd, "--calib-split: %s", err);
    int none_ok = allow_none && rows->n_calib == 0;
    if (!none_ok && (rows->n_calib < 1 || rows->n_eval < 1)) {
        int rc = cli_fail(cmd, "--calib-split %g leaves %lld calibration and %lld evaluation "
                          "rows of %lld; both need rows", s->size, (long long)rows->n_calib,
                          (long long)rows->n_eval, (long long)t->n);
        split_rows_free(rows);
        return rc;
    }
    return 0;
}

int cli_split(const char *cmd, const trace_t *t, const split_spec *s, int allow_none,
              split_rows *rows, trace_t **calib, trace_t **eval)
{
    char err[ELDR_ERRLEN];
    int rc;
    *calib = *eval = NULL;
    if ((rc = cli_split_rows(cmd, t, s, allow_none, rows)))
        return rc;
    if (split_apply(t, rows, calib, eval, err, sizeof err) < 0) {
        split_rows_free(rows);
        return cli_error(cmd, "%s", err);
    }
    return 0;
}

int64_t cli_warn_in_sample(const char *cmd, const char *trace_path, const char *model_path,
                           const model_t *m, const trace_t *all, const split_rows *rows)
{
    char sha[13];
    int64_t both = insample_rows(m, trace_path, all, rows->eval, rows->n_eval, sha);
    if (both > 0)
        fprintf(stderr, "eldr %s: warning: model %s was fitted on this trace (calibration "
                "SHA-256 %s matches, rows: %s); %lld of the %lld evaluated rows are among "
                "its calibration rows, so the results are %sin-sample\n", cmd, model_path, sha,
                m->calib_split, (long long)both, (long long)rows->n_eval,
                both == rows->n_eval ? "" : "partly ");
    else if (both < 0)
        fprintf(stderr, "eldr %s: warning: model %s was fitted on %lld rows of this trace "
                "(calibration SHA-256 %s matches); the %lld evaluated rows may include them, "
                "so the results may be in-sample\n", cmd, model_path,
                (long long)(m->calib_rows < 0 ? 0 : m->calib_rows), sha,
                (long long)rows->n_eval);
    return both;
}

json_t *cli_num_json(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *cli_ci_json(const grid_stat *s)
{
    if (!isfinite(s->lo) || !isfinite(s->hi))
        return json_null();
    return json_pack("[f, f]", s->lo, s->hi);
}

json_t *cli_split_json(const split_rows *rows)
{
    char d[160];
    split_describe(rows, d, sizeof d);
    json_t *o = json_pack("{s:s, s:I, s:I, s:s}", "mode", split_mode_name(rows->mode),
                          "calib_rows", (json_int_t)rows->n_calib, "eval_rows",
                          (json_int_t)rows->n_eval, "text", d);
    json_object_set_new(o, "seed", rows->mode == SPLIT_HEAD ? json_null()
                                                            : json_integer((json_int_t)rows->seed));
    return o;
}

void cli_grid_stats_json(json_t *o, const grid_row *g)
{
    json_object_set_new(o, "seeds", json_integer(g->n_seeds));
    json_object_set_new(o, "tpot_p50_ms", cli_num_json(g->tpot_p50.mean));
    json_object_set_new(o, "tpot_p50_ms_ci95", cli_ci_json(&g->tpot_p50));
    /* per seed: what the verdict's paired comparisons are made of */
    const char *keys[] = {"tpot_p50_ms_per_seed", "tpot_p99_ms_per_seed",
                          "tokens_per_s_per_seed"};
    const double *vals[] = {g->tpot_p50_ms, g->tpot_p99_ms_seed, g->tokens_per_s_seed};
    for (int k = 0; k < 3; k++) {
        json_t *per = json_array();
        for (int i = 0; vals[k] && i < g->n_seeds; i++)
            json_array_append_new(per, cli_num_json(vals[k][i]));
        json_object_set_new(o, keys[k], per);
    }
    json_object_set_new(o, "tpot_p99_ms", cli_num_json(g->tpot_p99.mean));
    json_object_set_new(o, "queue_p50_ms", cli_num_json(g->queue_p50.mean));
    json_object_set_new(o, "distinct_experts_per_step", cli_num_json(g->distinct.mean));
    json_object_set_new(o, "reuse", cli_num_json(g->reuse.mean));
    json_object_set_new(o, "imbalance", cli_num_json(g->imbalance.mean));
    json_object_set_new(o, "tokens_per_s", cli_num_json(g->tokens_per_s.mean));
}
