/* verdict.c - which tau at this fleet's K (verdict.h). */
#include "verdict.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "stats.h"

enum { MET_P50, MET_P99, MET_TPS };

void verdict_opts_default(verdict_opts *o)
{
    o->p50_gain_pct = VERDICT_P50_GAIN_PCT;
    o->p99_loss_pct = VERDICT_P99_LOSS_PCT;
    o->tps_loss_pct = VERDICT_TPS_LOSS_PCT;
    o->K = 0;
}

static const double *per_seed(const grid_row *g, int metric)
{
    return metric == MET_P50 ? g->tpot_p50_ms : metric == MET_P99 ? g->tpot_p99_ms_seed
                                                                 : g->tokens_per_s_seed;
}

static int same_cell(const grid_row *a, const grid_row *b)
{
    return a->K == b->K && a->rate == b->rate;
}

static int in_fleet(const grid_row *g, int K)
{
    return K <= 0 || g->K == K;
}

int verdict_family(const grid_result *r, int K)
{
    int m = 0;
    for (int i = 0; i < r->n; i++)
        m += grid_kind_is_candidate(r->rows[i].kind) && in_fleet(&r->rows[i], K) &&
             isfinite(r->rows[i].tpot_p50.mean);
    return m;
}

/* Paired per-seed change of row a against row b, percent, with its
 * interval widened by Bonferroni over m. */
static void paired(const grid_row *a, const grid_row *b, int metric, int m, grid_stat *out)
{
    const double *x = per_seed(a, metric), *y = per_seed(b, metric);
    int n = a->n_seeds < b->n_seeds ? a->n_seeds : b->n_seeds;
    double d[GRID_MAX_SEEDS], half;
    *out = (grid_stat){NAN, NAN, NAN};
    if (!x || !y || n < 1)
        return;
    for (int s = 0; s < n; s++)
        d[s] = y[s] > 0 ? 100.0 * (x[s] - y[s]) / y[s] : NAN;
    stats_mean_ci95(d, n, &out->mean, &half);
    out->lo = out->mean - half;
    out->hi = out->mean + half;
    grid_widen(out, n, m, out);
}

/* s binds harder than cur: a higher upper bound (up, where a rise is the
 * loss) or a lower lower bound; the mean alone without intervals. */
static int binds(const grid_stat *s, const grid_stat *cur, int up)
{
    if (isfinite(s->hi) && isfinite(cur->hi))
        return up ? s->hi > cur->hi : s->lo < cur->lo;
    return up ? s->mean > cur->mean : s->mean < cur->mean;
}

void verdict_compare(const grid_result *r, int c, int m, const verdict_opts *o,
                     verdict_cmp *out)
{
    const grid_row *g = &r->rows[c];
    memset(out, 0, sizeof *out);
    out->p50 = out->p99 = out->tps = (grid_stat){NAN, NAN, NAN};
    out->p50_base = out->p99_base = out->tps_base = out->flip_base = out->flip_seed = -1;
    for (int b = 0; b < r->n; b++) {
        const grid_row *base = &r->rows[b];
        if (!grid_row_is_baseline(base) || !same_cell(g, base))
            continue;
        grid_stat s;
        paired(g, base, MET_P50, m, &s);
        if (out->p50_base < 0 || binds(&s, &out->p50, 1)) {
            out->p50 = s;
            out->p50_base = b;
        }
        paired(g, base, MET_P99, m, &s);
        if (out->p99_base < 0 || binds(&s, &out->p99, 1)) {
            out->p99 = s;
            out->p99_base = b;
        }
        paired(g, base, MET_TPS, m, &s);
        if (out->tps_base < 0 || binds(&s, &out->tps, 0)) {
            out->tps = s;
            out->tps_base = b;
        }
        /* the first seed, if any, whose split has this baseline faster */
        for (int si = 0; si < g->n_seeds && si < base->n_seeds; si++)
            if (out->flip_seed < 0 && !(g->tpot_p50_ms[si] < base->tpot_p50_ms[si])) {
                out->flip_seed = si;
                out->flip_base = b;
            }
    }
    if (out->p50_base < 0)
        out->why = VERDICT_NO_SETTING;
    else if (g->n_seeds < 2 || !isfinite(out->p50.hi))
        out->why = VERDICT_ONE_SEED;
    else if (!(out->p50.hi < 0 && out->p50.hi <= -o->p50_gain_pct))   /* a gain, and enough */
        out->why = out->p50.lo >= 0 || out->p50.lo > -o->p50_gain_pct ? VERDICT_NO_GAIN
                                                                        : VERDICT_UNSURE;
    else if (!(out->p99.hi <= o->p99_loss_pct))
        out->why = VERDICT_P99_LOSS;
    else if (!(out->tps.lo >= -o->tps_loss_pct))
        out->why = VERDICT_TPS_LOSS;
    else if (out->flip_seed >= 0)
        out->why = VERDICT_FLIPS;
    else
        out->why = VERDICT_OK;
}

/* a before b: a lower corrected p50 upper bound, then a better mean (one
 * seed: the mean alone) */
static int closer(const verdict_cmp *a, const verdict_cmp *b)
{
    if (isfinite(a->p50.hi) != isfinite(b->p50.hi))
        return isfinite(a->p50.hi);
    if (isfinite(a->p50.hi) && a->p50.hi != b->p50.hi)
        return a->p50.hi < b->p50.hi;
    return a->p50.mean < b->p50.mean;
}

/* The cell's baseline of lowest mean TPOT p50, -1. */
static int best_baseline(const grid_result *r, const grid_row *cell)
{
    int best = -1;
    for (int b = 0; b < r->n; b++) {
        const grid_row *g = &r->rows[b];
        if (!grid_row_is_baseline(g) || !same_cell(g, cell) || !isfinite(g->tpot_p50.mean))
            continue;
        if (best < 0 || g->tpot_p50.mean < r->rows[best].tpot_p50.mean)
            best = b;
    }
    return best;
}

static verdict_answer answer_of(verdict_why w)
{
    switch (w) {
    case VERDICT_OK: return VERDICT_WIN;
    case VERDICT_UNSURE:
    case VERDICT_FLIPS: return VERDICT_TIE;
    case VERDICT_ONE_SEED: return VERDICT_NONE;
    default: return VERDICT_KEEP;
    }
}

int verdict_decide(const grid_result *r, const verdict_opts *opts, verdict *v, char *err,
                   size_t errlen)
{
    memset(v, 0, sizeof *v);
    v->opts = *opts;
    v->row = v->setting = v->baseline = -1;
    int any = 0;
    for (int i = 0; i < r->n; i++)
        any |= in_fleet(&r->rows[i], opts->K);
    if (!any)
        return eldr_errf(err, errlen, "verdict: the grid has no row at K %d", opts->K);
    v->n_compared = verdict_family(r, opts->K);
    verdict_cmp best = {0};
    for (int i = 0; i < r->n; i++) {
        const grid_row *g = &r->rows[i];
        if (!grid_kind_is_candidate(g->kind) || !in_fleet(g, opts->K) ||
            !isfinite(g->tpot_p50.mean))
            continue;
        verdict_cmp c;
        verdict_compare(r, i, v->n_compared, opts, &c);
        if (c.why == VERDICT_NO_SETTING)
            continue;
        v->n_wins += c.why == VERDICT_OK;
        /* a winner before any loser; then the best worst case */
        int c_ok = c.why == VERDICT_OK, b_ok = v->setting >= 0 && best.why == VERDICT_OK;
        if (v->setting < 0 || (c_ok && !b_ok) || (c_ok == b_ok && closer(&c, &best))) {
            v->setting = i;
            best = c;
        }
    }
    if (v->setting >= 0) {
        v->cmp = best;
        v->why = best.why;
        v->baseline = best_baseline(r, &r->rows[v->setting]);
    } else {
        v->why = VERDICT_NO_SETTING;
        for (int i = 0; i < r->n; i++)   /* the fleet's best baseline */
            if (grid_row_is_baseline(&r->rows[i]) && in_fleet(&r->rows[i], opts->K) &&
                isfinite(r->rows[i].tpot_p50.mean) &&
                (v->baseline < 0 || r->rows[i].tpot_p50.mean < r->rows[v->baseline].tpot_p50.mean))
                v->baseline = i;
    }
    v->answer = answer_of(v->why);
    v->row = v->answer == VERDICT_WIN ? v->setting : v->baseline;
    for (int i = 0; v->setting >= 0 && i < r->n; i++)
        v->n_baselines += grid_row_is_baseline(&r->rows[i]) &&
                          same_cell(&r->rows[i], &r->rows[v->setting]);
    if (v->row < 0)
        return eldr_errf(err, errlen, "verdict: no finite baseline at %s%d",
                         opts->K ? "K " : "any K", opts->K);
    return 0;
}

/* ---- words ---- */

const char *verdict_answer_name(verdict_answer a)
{
    return a == VERDICT_WIN ? "win" : a == VERDICT_TIE ? "tie" : a == VERDICT_NONE ? "none"
                                                                                  : "keep";
}

const char *verdict_why_name(verdict_why w)
{
    static const char *names[] = {"ok", "no_gain", "unsure", "p99_loss", "tps_loss", "flips",
                                  "one_seed", "no_setting"};
    return (unsigned)w < sizeof names / sizeof names[0] ? names[w] : "?";
}

static const char *kind_of(const grid_result *r, int row)
{
    return row >= 0 ? route_kind_name(r->rows[row].kind) : "?";
}

/* " at 60 req/s" (nothing for the trace's arrivals) */
static void at_rate(const grid_row *g, char *buf, size_t n)
{
    if (g->rate > 0)
        snprintf(buf, n, " at %g req/s", g->rate);
    else
        buf[0] = '\0';
}

void verdict_head(const grid_result *r, const verdict *v, char *buf, size_t n)
{
    const grid_row *g = &r->rows[v->row];
    char name[64];
    if (v->answer == VERDICT_WIN) {
        grid_setting_name(g, name, sizeof name);
        snprintf(buf, n, "use %s at K %d", name, g->K);
    } else if (v->answer == VERDICT_KEEP) {
        snprintf(buf, n, "keep %s at K %d", route_kind_name(g->kind), g->K);
    } else if (v->answer == VERDICT_NONE) {
        snprintf(buf, n, "no verdict at K %d", g->K);   /* nothing to weigh: no "keep" */
    } else {
        snprintf(buf, n, "tie at K %d: keep %s", g->K, route_kind_name(g->kind));
    }
}

/* "-2.2% (corrected -3.1% to -1.3%) vs rr" */
static void change_text(const grid_result *r, const grid_stat *s, int base, char *buf, size_t n)
{
    if (isfinite(s->lo))
        snprintf(buf, n, "%+.1f%% (corrected %+.1f%% to %+.1f%%) vs %s", s->mean, s->lo, s->hi,
                 kind_of(r, base));
    else
        snprintf(buf, n, "%+.1f%% vs %s", s->mean, kind_of(r, base));
}

void verdict_reason(const grid_result *r, const verdict *v, char *buf, size_t n)
{
    if (v->setting < 0) {
        snprintf(buf, n, "no ELDR setting was simulated at K %d; %s has the lowest TPOT p50 "
                 "(%.3f ms)", r->rows[v->row].K, kind_of(r, v->row),
                 r->rows[v->row].tpot_p50.mean);
        return;
    }
    const grid_row *g = &r->rows[v->setting];
    const verdict_cmp *c = &v->cmp;
    const verdict_opts *o = &v->opts;
    char name[64], p50[128], rate[40];
    grid_setting_name(g, name, sizeof name);
    change_text(r, &c->p50, c->p50_base, p50, sizeof p50);
    at_rate(g, rate, sizeof rate);
    switch (v->why) {
    case VERDICT_OK: {
        char others[96] = "";
        if (v->n_wins > 1)   /* the pick is the best worst case of several */
            snprintf(others, sizeof others, "; %d of %d settings win, this one by the most at "
                     "worst", v->n_wins, v->n_compared);
        snprintf(buf, n, "%s gains TPOT p50 %s, the least gain over %s%s; p99 %+.1f%% (worst "
                 "%+.1f%%, margin +%.1f%%), throughput %+.1f%% (worst %+.1f%%, margin -%.1f%%); "
                 "faster than every baseline with every seed's split%s", name, p50,
                 v->n_baselines > 1 ? "every baseline" : "the baseline", rate, c->p99.mean,
                 c->p99.hi, o->p99_loss_pct, c->tps.mean, c->tps.lo, o->tps_loss_pct, others);
        return;
    }
    case VERDICT_NO_GAIN:
        snprintf(buf, n, "no setting gains %.1f%% on TPOT p50%s: the closest, %s, gives %s, "
                 "at best %+.1f%%", o->p50_gain_pct, rate, name, p50, c->p50.lo);
        return;
    case VERDICT_UNSURE:
        snprintf(buf, n, "the seeds cannot tell a %.1f%% TPOT p50 gain from none%s: the "
                 "closest, %s, gives %s (more seeds narrow it)", o->p50_gain_pct, rate, name,
                 p50);
        return;
    case VERDICT_P99_LOSS:
        snprintf(buf, n, "%s gains TPOT p50 %s but its TPOT p99 may rise %+.1f%% vs %s (mean "
                 "%+.1f%%; margin +%.1f%%)", name, p50, c->p99.hi, kind_of(r, c->p99_base),
                 c->p99.mean, o->p99_loss_pct);
        return;
    case VERDICT_TPS_LOSS:
        snprintf(buf, n, "%s gains TPOT p50 %s but its throughput may fall %+.1f%% vs %s "
                 "(mean %+.1f%%; margin -%.1f%%)", name, p50, c->tps.lo, kind_of(r, c->tps_base),
                 c->tps.mean, o->tps_loss_pct);
        return;
    case VERDICT_FLIPS: {
        const grid_row *b = &r->rows[c->flip_base];
        snprintf(buf, n, "%s gains TPOT p50 %s, but with seed %llu%s %s is as fast or faster "
                 "(%.3f vs %.3f ms): the answer flips with the %s", name, p50,
                 (unsigned long long)(r->first_seed + (uint64_t)c->flip_seed),
                 r->resplit ? " and its split" : "", route_kind_name(b->kind),
                 b->tpot_p50_ms[c->flip_seed], g->tpot_p50_ms[c->flip_seed],
                 r->resplit ? "split" : "seed");
        return;
    }
    case VERDICT_ONE_SEED:
        snprintf(buf, n, "one seed gives no interval: the closest, %s, gives TPOT p50 %s in "
                 "one run, which cannot tell a gain from noise (give 5 seeds or more)", name, p50);
        return;
    default:
        snprintf(buf, n, "no comparison");
    }
}

void verdict_baselines(const grid_result *r, char *buf, size_t n)
{
    int seen[ROUTE_N_KINDS] = {0};
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->n && len < n; i++) {
        route_kind k = r->rows[i].kind;
        if (!grid_row_is_baseline(&r->rows[i]) || seen[k])
            continue;
        seen[k] = 1;
        len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? "," : "", route_kind_name(k));
    }
}

void verdict_rule(const grid_result *r, const verdict *v, char *buf, size_t n)
{
    const verdict_opts *o = &v->opts;
    char base[96], level[96] = "", fleet[64];
    verdict_baselines(r, base, sizeof base);
    int df = r->n_seeds - 1, m = v->n_compared;
    if (o->K < 0)
        snprintf(level, sizeof level, " (m: the settings of that K)");
    else if (df >= 1)
        snprintf(level, sizeof level, ", each at %.2f%% (t %.2f, %d df)",
                 100 * (1 - 0.05 / (m > 1 ? m : 1)), stats_t_quantile(1 - 0.025 / (m > 1 ? m : 1),
                                                                       df), df);
    if (o->K > 0)
        snprintf(fleet, sizeof fleet, "K fixed at %d", o->K);
    else if (o->K < 0)
        snprintf(fleet, sizeof fleet, "each K judged on its own");
    else
        snprintf(fleet, sizeof fleet, "fleets compared (every K)");
    snprintf(buf, n, "a setting wins when, against every baseline (%s), its TPOT p50 gains "
             ">= %.1f%%, its p99 rises <= %.1f%% and its throughput falls <= %.1f%% over the "
             "whole 95%% interval, Bonferroni-corrected over %d setting%s%s, and it is faster "
             "with every seed's split; %s", base, o->p50_gain_pct, o->p99_loss_pct,
             o->tps_loss_pct, m, m == 1 ? "" : "s", level, fleet);
}

void verdict_words(const grid_result *r, const verdict *v, verdict_text *t)
{
    verdict_head(r, v, t->head, sizeof t->head);
    verdict_reason(r, v, t->reason, sizeof t->reason);
    verdict_rule(r, v, t->rule, sizeof t->rule);
}
