/* dash.h - the dashboard's state (`eldr dash`) and what its views draw.
 *
 * A dashboard looks at one trace split like the simulator's (split.h: a
 * seeded random draw by default) into calibration rows (fit the model,
 * sizes, scatter, rho curve) and the rest, which are simulated (TPOT,
 * distinct experts per step, routing shares, queues, heat). Its numbers
 * live in three separately owned parts, so that a what-if change
 * recomputes only what it changes:
 *   dash_fit   the model, its calibration cluster sizes and the scatter;
 *   dash_sim   one simulation run (the current policy, or a baseline);
 *   the curve  the greedy rho curve (computed once; it does not depend on K);
 * plus the header's confidence intervals (dash_ci, with every run), the
 * trail of settings tried and the trade-off grid (dash_trade, tradeoff.h).
 * Views (view_*.c) read a dash_t and draw on a canvas; they never
 * compute anything slow. The slow parts (dash_data.c) run synchronously
 * for --frame and on the what-if thread (whatif.h) when interactive.
 *
 * Live mode (`eldr dash --attach URL | --router-snapshot FILE`) has no
 * trace: d->live holds what eldrd's /v1/snapshot said (live.h fills it),
 * d->fit the model it serves (centroids, calibration sizes, a PCA of the
 * centroids), and there are no simulations (cur and base stay NULL). Views
 * check d->live first.
 *
 * Ownership: a dash_t owns its traces, workload, fit, sims, curve and live
 * state; dash_free releases all of it. */
#ifndef ELDR_DASH_H
#define ELDR_DASH_H

#include <stddef.h>
#include <stdint.h>

#include "canvas.h"
#include "err.h"
#include "model.h"
#include "pca.h"
#include "route.h"
#include "grid.h"
#include "sim.h"
#include "split.h"
#include "trace.h"

typedef enum dash_view {
    VIEW_OVERVIEW = 0,
    VIEW_BALANCE,
    VIEW_HEATMAP,
    VIEW_QUEUES,
    VIEW_SCATTER,
    VIEW_RHO,
    VIEW_DECISIONS,              /* live: the recent decisions and their evidence */
    VIEW_DRIFT,                  /* live: similarity and shares against the calibration */
    VIEW_TRADEOFF,               /* trace: the tau x K grid (key 7 with a trace) */
    VIEW_N
} dash_view;

/* The policies a dashboard shows (--policy, p cycles them in this
 * order): eldr, eldr-cost and the four balancers; not domain (it needs
 * labels) nor eldr-online (its refits are the simulator's and eldrd's). */
#define DASH_POLICIES "eldr, eldr-cost, random, rr, jsq or p2c"
int dash_policy_shown(route_kind k);

/* "overview", "balance", ... ; -1 when unknown. */
const char *dash_view_name(int v);
int dash_view_parse(const char *name);

#define DASH_BINS 200            /* time bins of the queue histories */
#define DASH_SCATTER_MAX 600     /* signatures sampled for the scatter */
#define DASH_N_BASE 4            /* baselines: random, rr, jsq, p2c */
#define DASH_K_MAX ROUTE_MAX_WORKERS /* what-if K range: the one K range */
/* Seeds behind every "+-": 5 keeps a header CI (one K, one tau, the four
 * baselines) at about 0.2 s on the shared 449-row trace on 2 cores. */
#define DASH_SEEDS 5

/* One simulation run, digested for the views. */
typedef struct dash_sim {
    route_kind policy;
    double tau;                  /* eldr only */
    int K, L, E;
    sim_result res;              /* the simulator's own result (owned) */
    int64_t *routed;             /* [K] requests sent to each worker */
    double *layer_distinct;      /* [K][L] mean distinct experts per step */
    /* What a random batch of the same size would load: per step of B
     * requests, sum_e 1 - (1 - p[l][e])^B, p[l][e] the mean over the
     * simulated requests of the share of their decode tokens that use
     * expert e in layer l (each request adds one token to a step, drawn
     * independently). Averaged like layer_distinct, so the ratio of the
     * two is reuse beyond chance (< 1), not batch size. */
    double *layer_expected;      /* [K][L] */
    double distinct_all, expected_all; /* means over every step and layer */
    double t_end;                /* the histories span [0, t_end] */
    int nbins;
    float *inflight;             /* [K][nbins] mean in-flight per bin */
    float *running;              /* [K][nbins] mean batch (decoding) per bin */
} dash_sim;

/* Where a dashboard's model came from: fitted here with the default
 * recipe at open, the -m model file as loaded, or refitted here with a
 * what-if K (the recipe of either of the first two). */
typedef enum dash_origin { DASH_FIT_DEFAULT = 0, DASH_FIT_FILE, DASH_FIT_REFIT } dash_origin;

/* The header's numbers over seeds: the grid engine (grid.h) run on the
 * shown (K, policy, tau) and the four baselines under opts.seeds seeds
 * (common random numbers; seed 0 is the dashboard's own run). The change
 * against the best baseline is paired per seed, so its 95% CI is the
 * noise of the comparison, not of each TPOT. valid = 0: not computed
 * (one seed, or not yet). */
typedef struct dash_ci {
    int valid;
    route_kind policy;
    double tau;
    int K, n_seeds;
    route_kind best;             /* the best baseline by mean TPOT p50 */
    grid_stat tpot_p50, tpot_p99, distinct;        /* of the policy: the header's
                                  * numbers, as the trade-off cell and the trail */
    grid_stat vs_best_pct, distinct_vs_best_pct;   /* paired, percent */
    grid_stat p99_vs_best_pct;   /* paired, percent */
    double tpot_p50_first;       /* seed 0: equals the dashboard's run */
    int resplit;                 /* 1: each seed drew its own calibration split */
    double seconds;
} dash_ci;

/* One setting tried this session, in the order applied (the trade-off
 * view lists them, so a what-if change does not erase what was seen). */
typedef struct dash_trail {
    route_kind policy;
    double tau;
    int K;
    double tpot_p50;             /* the shown run, ms */
    double vs_best, vs_half;     /* mean change vs the best baseline and its
                                  * CI half-width (NaN without) */
} dash_trail;
#define DASH_TRAIL_MAX 64

/* The trade-off view's grid (tradeoff.h computes it). */
typedef enum dash_trade_state {
    DASH_TRADE_NONE = 0,         /* not asked for yet */
    DASH_TRADE_RUNNING,
    DASH_TRADE_DONE,
    DASH_TRADE_FAILED            /* err says why (or "cancelled") */
} dash_trade_state;
typedef struct dash_trade {
    dash_trade_state state;
    double progress;             /* running: share of the cells done, < 0 fitting */
    grid_result g;               /* done */
    model_t *model;              /* the copy of the model g's current-K rows used */
    int K0;                      /* the K it is centred on */
    double tau0;
    char err[ELDR_ERRLEN];
    int cursor;                  /* the selected ELDR cell (table order) */
    int cost;                    /* the grid has eldr-cost cells (grid_spec.cost) */
    /* The first look's grid (done): one seed on the first look's rows,
     * while the full grid computes (refine in [0, 1], < 0 not known yet)
     * or after it was cancelled (refine_off). */
    int first;
    int64_t rows;                /* simulated rows the grid rests on */
    double refine;
    int refine_off;
} dash_trade;
void dash_trade_clear(dash_trade *t);

/* A model and what the views show about its fit. */
typedef struct dash_fit {
    model_t *model;
    dash_origin origin;
    /* The model's own cluster sizes: the members of each cluster in the
     * fit that made the centroids (a model file's `sizes`; the
     * assignment for a fit made here). */
    int64_t *sizes;              /* [K]; zeros when !have_sizes */
    int have_sizes;              /* 0: the model file holds no sizes */
    int64_t n_fit;               /* their sum: signatures clustered */
    /* A model from a file was fitted on rows the dashboard cannot know:
     * its centroids re-assign this trace's calibration rows (nearest
     * centroid). Shown as its own column, never as the model's sizes.
     * NULL for a fit made here (it would equal sizes). */
    int64_t *reassigned;         /* [K] or NULL */
    int64_t n_reassigned;
    int n_pts;                   /* scatter points (0 when PCA failed) */
    double *pts;                 /* [n_pts][2] PCA scores */
    int *pt_cluster;             /* [n_pts] */
    double *cent;                /* [K][2] centroids on the same axes */
    double explained[2];         /* variance share of each axis */
    char note[ELDR_ERRLEN + 64];              /* why there is no scatter, or "" */
} dash_fit;

/* Options from the command line. */
/* A question drawn over the view (push_key.h: the push plan): its
 * lines, and the answer keys in the last one. */
#define DASH_CONFIRM_LINES 24
typedef struct dash_confirm {
    int on;
    char title[96];              /* "confirm: push to URL": what the box asks */
    char keys[64];               /* on its bottom border: the answer keys */
    int n;
    char line[DASH_CONFIRM_LINES][160];
} dash_confirm;

/* The first look (issue 34): the dashboard's first screen rests on a
 * bounded sample of the simulated rows and one seed; it then refines in
 * the background to every simulated row and opts.seeds seeds. A level
 * names the rows a run rests on. */
typedef enum dash_level { DASH_LEVEL_FIRST = 0, DASH_LEVEL_FULL, DASH_N_LEVELS } dash_level;
/* Rows of the first look: at most this many simulated rows (a stratified
 * draw, or with the trace's own arrival times the first arrivals, which
 * keeps the load). 800 rows of the reference geometry simulate five
 * policies in about a second on 2 cores. */
#define DASH_FIRST_ROWS 800
typedef struct dash_rows {
    trace_t *t;                  /* FIRST: owned sample (NULL: the first look
                                  * uses every row); FULL: d->eval, borrowed */
    sim_workload work;
    int have_work;
    char how[96];                /* "stratified 800 of 19000 rows", for labels */
} dash_rows;

/* The readers of the recorded decode token rows (dash_tokens.h), one per
 * trace the dashboard simulates: t[i]'s row j is r[i]'s row j. */
#define DASH_TOKENS_MAX 3
typedef struct dash_tokens {
    const trace_t *t[DASH_TOKENS_MAX];
    trace_tokens *r[DASH_TOKENS_MAX];
    int n;
    int64_t *eval_file;          /* NULL, or the file row of each evaluation
                                  * row (eval a copy, or kept in place) */
} dash_tokens;

typedef struct dash_opts {
    const char *trace_path;
    const char *model_path;      /* NULL: fit with the default recipe */
    int K;                       /* K of the default fit (4) */
    split_spec split;            /* calibration rows: seeded random by default */
    double rate;                 /* > 0: Poisson arrivals at this rate */
    uint64_t seed;
    int seeds;                   /* simulation seeds of the header's CIs and
                                  * the trade-off grid (DASH_SEEDS) */
    const char *push_to;         /* key P pushes the model shown here (eldrd's
                                  * admin URL); NULL: no push */
    const char *push_token_file; /* its admin token, or NULL */
    int first_rows;              /* the first look's bound (DASH_FIRST_ROWS) */
    int no_cache;                /* 1: neither read nor write the result cache
                                  * (dash_cache.h) */
    const char *sha256;          /* the trace file's SHA-256 when the caller
                                  * hashed it (alongside the load), or NULL */
    int no_first;                /* 1: the caller refines at once (a refined
                                  * frame): dash_open_first makes no first-look
                                  * runs, nor its rows and workload until a
                                  * what-if change needs them (dash_first_work),
                                  * and cur stays NULL unless the cache
                                  * answered */
    size_t pool_cache;           /* the activation pools' cap: what
                                  * --max-memory leaves beside the loaded rows
                                  * (sim_pool_cache_within); pools above it are
                                  * sampled at each admission, the same
                                  * numbers (SIM_DEFAULT_POOL_CACHE) */
    int read_tokens;             /* 1: the trace was loaded from trace_path
                                  * without its decode token rows
                                  * (dash_load_trace): its simulations read
                                  * them from the file (dash_tokens.h) */
} dash_opts;
void dash_opts_default(dash_opts *o);

/* ---- live mode ---- */

#define DASH_DEC_MAX 64          /* recent decisions kept from a snapshot */
#define DASH_NAME_MAX 32         /* worker names (longer ones are cut) */

/* One routing decision of the daemon's ring (an explain record). */
typedef struct dash_decision {
    char id[64];                 /* request id (cut at 63 bytes) */
    int64_t seq;
    int worker;                  /* index */
    char rule[16];               /* locality, band-jsq, min2, no-signature */
    double sim_max;              /* best similarity; NaN without a signature */
    char band[64];               /* "2,3": the indices the rule chose among */
    char loads[96];              /* "0 0 1 2": the in-flight counts it saw */
    int finished;
    /* The cost rule (rule "cost"; eldrd's "costs" and "cost_terms"):
     * each worker's predicted cost, ms ("-" for one it could not use),
     * and, when the record has them, its terms B/U/dU (in flight,
     * expected distinct experts per step, what this request adds). */
    int has_cost;
    char costs[160];             /* "2.71 3.05 - 2.98" (cut to fit) */
    char terms[224];             /* "3/412.5/+21.3 2/380.0/+25.1 ..." or "" */
} dash_decision;

#define DASH_URL_MAX 80           /* instance URLs (longer ones are cut) */
#define DASH_PREFILL_MAX 16      /* prefill instances listed (all are counted) */

/* An instance's health in the pool (pool_view.h "state"). */
typedef enum dash_inst_state {
    DASH_IN_ROTATION = 0,
    DASH_EJECTED,                /* out until ejected_for runs out */
    DASH_PROBING,                /* back after an ejection; one failure ejects again */
} dash_inst_state;

/* A prefill instance (the snapshot's pool.prefill[i]). */
typedef struct dash_prefill {
    char name[DASH_URL_MAX];     /* a URL in proxy mode, else a name */
    int state;                   /* dash_inst_state */
    double ejected_for;          /* seconds left */
    int64_t in_flight, failures;
} dash_prefill;

/* What went wrong for clients (the snapshot's "failures"; counts since
 * the daemon started, -1 where the snapshot has none). */
typedef struct dash_failures {
    int known;                   /* 0: an eldrd without "failures" */
    int64_t ans_4xx, ans_5xx;
    char codes[96];              /* "502 x9, 504 x3, 401 x2": error codes, most first */
    int64_t per_ip, max_conns, body_budget, unauthorized; /* refusals */
    int64_t header_timeouts, deadline_cuts, protocol_errors;
    int64_t failed_routed;       /* routes that failed at their decode worker */
    int proxy;                   /* the proxy's keys are there */
    int64_t up_error, up_timeout, refused;            /* proxy outcomes 502, 504, 409/503 */
    int64_t timeouts[4];         /* upstream cuts: connect, prefill, decode, idle */
    int64_t retries[2];          /* prefill, decode */
} dash_failures;

/* One /v1/snapshot, digested. K is fixed for a session (eldrd keeps K
 * across model swaps). Unknown numbers are NaN. */
typedef struct dash_live_now {
    int K;
    double time, uptime_s, tau;
    int64_t generation;
    char variant[24], load_from[16];
    char policy[8];              /* eldrd's decision rule: band, cost; "" an older eldrd */
    double rho;
    char names[ROUTE_MAX_WORKERS][DASH_NAME_MAX];
    int64_t inflight[ROUTE_MAX_WORKERS], routed[ROUTE_MAX_WORKERS],
        finished[ROUTE_MAX_WORKERS];
    char rules[ROUTE_MAX_WORKERS][64];          /* "band-jsq 80, min2 40" */
    int64_t sizes[ROUTE_MAX_WORKERS];           /* calibration members; -1 unknown */
    /* proxy mode (the snapshot's "pool"): a decode worker out of rotation
     * and for how long yet; has_pool 0 when the daemon does not proxy */
    int has_pool;
    uint8_t ejected[ROUTE_MAX_WORKERS];
    double ejected_for[ROUTE_MAX_WORKERS];
    uint8_t probing[ROUTE_MAX_WORKERS];
    int64_t up_failures[ROUTE_MAX_WORKERS];     /* failures the pool saw of it */
    char url[ROUTE_MAX_WORKERS][DASH_URL_MAX];  /* "" unknown (no pool URL, no endpoint) */
    int64_t failed[ROUTE_MAX_WORKERS];          /* routes that failed there; -1 unknown */
    char load_src[ROUTE_MAX_WORKERS][8];        /* own, vllm, stale */
    int n_prefill;               /* in the pool (prefill[] holds the first DASH_PREFILL_MAX) */
    int prefill_ejected;         /* of them, out of rotation now */
    dash_prefill prefill[DASH_PREFILL_MAX];
    dash_failures fail;
    /* drift over the daemon's window of recent signatures */
    int64_t window;
    double mean_sim, calib_sim, tvd;
    double tvd_thr;              /* the 99% noise level of the TVD for this
                                  * window (drift.h); NaN unknown */
    char baseline[80];           /* what calib_share is (eldrd's "baseline");
                                  * "" an older eldrd */
    double share[ROUTE_MAX_WORKERS], calib_share[ROUTE_MAX_WORKERS];
    int n_dec;                   /* newest first */
    dash_decision dec[DASH_DEC_MAX];
} dash_live_now;

/* What the views read in live mode: the latest snapshot, the history of
 * successive polls (newest last; the last n_hist of DASH_BINS are valid),
 * and the state of the connection. */
typedef struct dash_live {
    char source[512];            /* the URL, or the snapshot file */
    int attached;                /* 1: polling eldrd; 0: a saved snapshot */
    double interval_s;           /* between polls */
    dash_live_now now;
    int n_hist;
    float hist[ROUTE_MAX_WORKERS][DASH_BINS];   /* in-flight at each poll */
    float hist_sim[DASH_BINS];                  /* mean best similarity (NaN unknown) */
    /* 1 at the poll that found the daemon restarted: its uptime went
     * back, or its counters did (a restarted eldrd starts from 0). The
     * histories keep the points before it; the views mark it. */
    uint8_t hist_restart[DASH_BINS];
    int64_t restarts;            /* restarts seen this session */
    double restart_from, restart_to; /* uptime_s before and after the last */
    double at;                   /* monotonic time of the last poll taken; NaN */
    double rate;                 /* routes/s between the last two polls; NaN unknown */
    int64_t polls, failures;
    char error[ELDR_ERRLEN];     /* the last poll's error; "" when it succeeded */
    double age_s;                /* since the last answer (good poll) */
    /* The decisions list, paused (space): the list as it was, while the
     * polls go on underneath; n_newer counts what arrived since. */
    int paused;
    int n_frozen;
    dash_decision frozen[DASH_DEC_MAX];
} dash_live;

/* Progress of a slow step, reported from whatever thread runs it.
 * stage: a short label; frac in [0, 1] or < 0 when unknown. */
typedef void (*dash_progress_fn)(void *ctx, const char *stage, double frac);

typedef struct dash {
    dash_opts opts;
    char trace_name[256], model_name[256];
    int L, E, k;
    int64_t n_rows, n_calib;     /* trace rows; n_calib of them calibrate */
    split_mode split_mode;       /* the split used (split.h), and its seed */
    uint64_t split_seed;
    char in_sample[256];         /* -m fitted on this trace file: why the
                                  * simulated rows may be in-sample; or "" */
    trace_t *calib, *eval;
    trace_t *all;                /* the whole trace, kept when the CIs redraw the
                                  * split per seed (dash_grid_splits); or NULL */
    int64_t *eval_rows;          /* NULL, or (with all, more rows than a first
                                  * look's) eval is an index of these rows of
                                  * all: its vectors, no count matrix; counts
                                  * and workloads read all in place (no copy
                                  * of the evaluation rows beside the trace) */
    dash_tokens tok;             /* with opts.read_tokens: the token rows'
                                  * readers (dash_tokens.h) */
    sim_config cfg;
    /* The simulated rows at each level: [FIRST] the first look's sample
     * (t NULL when every row is few enough), [FULL] every eval row (its
     * workload built only when it is the first look's level: a refine
     * runs in the grid, dash_refine). Signatures of the recipe. */
    dash_rows rows[DASH_N_LEVELS];
    int first_made;              /* 1: the first look's rows were chosen
                                  * (dash_first_work) */
    dash_level level;            /* the rows cur and base rest on */
    int refined;                 /* 1: cur, base and ci are final (every row,
                                  * opts.seeds seeds) */
    int from_cache;              /* 1: the refined results came from the cache */
    char sha256[65];             /* the trace file's (cache key, in-sample), or "" */
    char cache_note[ELDR_ERRLEN + 64];        /* a cache entry ignored, and why; or "" */
    char arrivals[64];           /* how requests arrive, for the overview */

    dash_fit *fit;
    /* The fit as opened (the -m model or the default fit), kept while a
     * what-if K shows a refit, so that going back to its K restores it
     * exactly (centroids, recipe, sizes) instead of fitting again. fit
     * points to it or to a refit; dash_fit_release frees only refits. */
    dash_fit *home;
    double *curve;               /* [L] greedy rho curve, NULL if none */
    int *order;                  /* [L] greedy order */
    int curve_n, curve_nstar;
    char curve_note[ELDR_ERRLEN + 64];        /* why there is no curve, or "" */

    route_kind policy;
    double tau;
    dash_sim *cur;               /* the current policy's run */
    dash_sim *base[DASH_N_BASE]; /* the baselines at the current K */
    dash_ci ci;                  /* the header's means and CIs */
    dash_trail trail[DASH_TRAIL_MAX];
    int n_trail;                 /* the oldest drop out after DASH_TRAIL_MAX */
    dash_trade trade;            /* view 7 */

    /* what the user is looking at */
    int view, worker, zoom;
    int hl, he;                  /* heatmap cell cursor: layer, expert */
    double cursor;               /* "now" as a fraction of t_end */
    int help;                    /* help overlay shown */
    dash_confirm confirm;        /* a question on top of the view (key P) */
    int trade_metric;            /* view 7 compares on it (trade_metric, key m) */
    char status[ELDR_ERRLEN + 64];            /* job in progress / last message */
    double progress;             /* < 0: none */
    int busy;                    /* a what-if job is running */

    dash_live *live;             /* live mode; NULL for a trace */
} dash_t;

/* Load the trace, split it, fit or load the model, compute the curve and
 * the scatter, build the workload and run the current policy and the
 * baselines: everything a frame needs. progress may be NULL. */
int dash_open(dash_t *d, const dash_opts *o, dash_progress_fn progress, void *pctx,
              char *err, size_t errlen);
/* The same on a trace already in memory (taken over: freed by dash_free)
 * and an optional model (taken over too); for tests and the Lua module. */
int dash_open_trace(dash_t *d, const dash_opts *o, trace_t *t, model_t *m,
                    dash_progress_fn progress, void *pctx, char *err, size_t errlen);
void dash_free(dash_t *d);

/* The first look only: everything dash_open does, but the current
 * policy and the baselines are simulated on the first look's rows with
 * one seed (d->level, d->refined 0), unless the cache holds the refined
 * results (then d->refined is 1). dash_open is this and dash_refine. */
int dash_open_first(dash_t *d, const dash_opts *o, trace_t *t, model_t *m,
                    dash_progress_fn progress, void *pctx, char *err, size_t errlen);

/* What refining a setting gives: the runs on every simulated row and
 * the header's CIs over opts.seeds seeds; from the cache when it has
 * them (the refined results of the same trace content and settings). */
typedef struct dash_refined {
    dash_sim *cur, *base[DASH_N_BASE];
    dash_ci ci;
    int from_cache;
    char cache_note[ELDR_ERRLEN + 64];
} dash_refined;
/* Refine (policy, tau) on m (K = m->K). Reads d (never writes it); the
 * what-if thread runs it. cancel (may be NULL) stops it within a few ms
 * (SIM_CANCELLED). */
int dash_refine(const dash_t *d, const model_t *m, route_kind policy, double tau,
                volatile int *cancel, dash_progress_fn progress, void *pctx,
                dash_refined *out, char *err, size_t errlen);
/* Move r's results into d (d->refined = 1), freeing what they replace. */
void dash_refined_apply(dash_t *d, dash_refined *r);
void dash_refined_free(dash_refined *r);
/* "19000 rows, 5 seeds" or "first look: stratified 800 of 19000 rows, 1
 * seed": what the shown numbers rest on. */
void dash_rests_on(const dash_t *d, char *buf, size_t n);

/* The pieces, for the what-if thread. A refit keeps the model's recipe
 * and changes K; cancel (may be NULL) stops its K-means. A simulation
 * runs on the rows of level (d->rows[level] must have its workload);
 * cancel (may be NULL) stops it (SIM_CANCELLED). */
int dash_refit(const dash_t *d, int K, volatile int *cancel, dash_progress_fn progress,
               void *pctx, dash_fit **out, char *err, size_t errlen);
int dash_simulate(const dash_t *d, const model_t *m, route_kind policy, double tau, int K,
                  dash_level level, volatile int *cancel, dash_sim **out, char *err,
                  size_t errlen);
/* The current policy and the baselines on the rows of level, on up to
 * two threads (common random numbers: one workload). base may be NULL
 * (the policy alone). Returns 0, -1 with err, SIM_CANCELLED. */
int dash_simulate_set(const dash_t *d, const model_t *m, route_kind policy, double tau,
                      dash_level level, volatile int *cancel, dash_progress_fn progress,
                      void *pctx, dash_sim **cur, dash_sim **base, char *err, size_t errlen);
/* The lowest level with rows: where a what-if change looks first. */
dash_level dash_first_level(const dash_t *d);
/* The first look's rows and the workload of the lowest level, made once:
 * dash_open_first makes them unless opts.no_first (a refined frame needs
 * neither: on the 20,000-request trace they are 29 MB), and a what-if
 * change makes them first (whatif_start_change). */
int dash_first_work(dash_t *d, char *err, size_t errlen);
/* Free f unless it is d's home fit (which dash_free frees). */
void dash_fit_release(const dash_t *d, dash_fit *f);
/* Append the shown setting (d->cur, d->ci) to the trail. */
void dash_trail_add(dash_t *d);

/* Point a grid at d's whole trace so that each seed draws its own split
 * and fits (grid.h, "Calibration splits"), when the dashboard fitted its
 * model here on a seeded split that --split-seed did not pin; else leave
 * g on d's one split. Returns 1 when it did. */
int dash_grid_splits(const dash_t *d, grid_spec *g);

/* Why routing cannot matter for the shown run, or NULL when it can: a
 * mean batch of about 1 (every request decodes alone, so every policy
 * steps alike), one worker, or a band that holds every worker (ELDR is
 * then join-shortest-queue). The dashboard says this instead of printing
 * changes of 0.0 +-0.0 as if they were measured. */
const char *dash_irrelevant(const dash_t *d, char *buf, size_t n);

/* "random (seed 1): 224 calibrate, 225 simulated", for the overview. */
void dash_split_text(const dash_t *d, char *buf, size_t n);

/* The best baseline: with the header's seeds (dash_shown_ci), the one
 * of lowest mean TPOT p50 over them, which the header names; else the
 * lowest TPOT p50 of the one run (NULL if none). */
const dash_sim *dash_best_base(const dash_t *d);
/* Bin of the time cursor in a run's histories. */
int dash_cursor_bin(const dash_t *d, const dash_sim *s);
/* In-flight of worker w at the cursor (the bin's mean, rounded). */
double dash_inflight_now(const dash_t *d, const dash_sim *s, int w);
/* The CIs of the shown run (d->ci when it matches d->cur), or NULL. */
const dash_ci *dash_shown_ci(const dash_t *d);

/* ---- drawing ---- */

/* Lines of the live overview's Problems block (an ejected or probing
 * decoder, a dead prefill, refusals, error answers, failed routes, cut
 * connections): the header names them on every view. */
int dash_live_problems(const dash_live_now *n);

/* The whole screen for the current view: header, view, footer, overlay. */
void dash_render(const dash_t *d, canvas_t *c);
/* The views draw into the rectangle (x, y, w, h). */
typedef void (*dash_view_fn)(const dash_t *d, canvas_t *c, int x, int y, int w, int h);
void view_overview(const dash_t *d, canvas_t *c, int x, int y, int w, int h);
void view_balance(const dash_t *d, canvas_t *c, int x, int y, int w, int h);
void view_heatmap(const dash_t *d, canvas_t *c, int x, int y, int w, int h);
void view_queues(const dash_t *d, canvas_t *c, int x, int y, int w, int h);
void view_scatter(const dash_t *d, canvas_t *c, int x, int y, int w, int h);
void view_rho(const dash_t *d, canvas_t *c, int x, int y, int w, int h);
void view_decisions(const dash_t *d, canvas_t *c, int x, int y, int w, int h);
void view_drift(const dash_t *d, canvas_t *c, int x, int y, int w, int h);
void view_tradeoff(const dash_t *d, canvas_t *c, int x, int y, int w, int h);

/* The frame's (view_common.c); what the views share is view_util.h's. */
/* " +-1.2" (" \u00b11.2" on a Unicode canvas): a CI's half-width, or "". */
void dash_fmt_pm(const canvas_t *c, char *buf, size_t n, const grid_stat *st);
/* Views the tabs offer, in tab order: for a trace the first six and the
 * trade-off (key 7), live the first eight. dash_view_at(d, i) is the view
 * of tab i (0-based), dash_view_tab(d, v) the tab of view v or -1. */
int dash_n_views(const dash_t *d);
int dash_view_at(const dash_t *d, int i);
int dash_view_tab(const dash_t *d, int v);

#endif
