/* test_tui_live.c - the dashboard's live mode without a daemon (src/tui/
 * live.c): a /v1/snapshot built here in the daemon's shape is opened like
 * a saved --router-snapshot, and every view's frame is checked for the
 * numbers the snapshot holds (each worker's in-flight and routed counts,
 * every decision's request id, rule and band, the drift figures, every
 * centroid on the scatter); a snapshot without centroids still opens;
 * malformed snapshots fail naming the key; attaching to a port nobody
 * listens on fails with the URL; every view at tiny and huge sizes; the
 * overview's Problems block at 80x24 (an ejected decoder, a dead prefill,
 * refusals, failures; the picker's addresses, a probing worker). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/tui/dash.h"
#include "../../src/tui/live.h"

#define NK 3
#define NL 2
#define NE 4

static const char *NAMES[NK] = {"dec0", "dec1", "dec2"};
static const int INFLIGHT[NK] = {7, 0, 12};
static const int ROUTED[NK] = {40, 25, 35};

/* Unit centroids of dim NL*NE: worker k leans on experts k and k+1. */
static json_t *centroids(void)
{
    json_t *a = json_array();
    for (int k = 0; k < NK; k++) {
        json_t *row = json_array();
        double v[NL * NE] = {0}, norm = 0;
        for (int i = 0; i < NL * NE; i++) {
            v[i] = (i % NE == k || i % NE == k + 1) ? 1.0 + i / 8.0 : 0.05;
            norm += v[i] * v[i];
        }
        for (int i = 0; i < NL * NE; i++)
            json_array_append_new(row, json_real(v[i] / sqrt(norm)));
        json_array_append_new(a, row);
    }
    return a;
}

static json_t *snapshot(int with_centroids)
{
    json_t *m = json_pack("{s:i, s:s, s:i, s:i, s:i, s:i, s:[i,i], s:[i,i,i], s:f}",
                          "generation", 3, "variant", "count", "L", NL, "E", NE, "k", 2, "K", NK,
                          "layer_mask", 0, 1, "sizes", 50, 30, 20, "rho", 0.5);
    if (with_centroids) {
        json_object_set_new(m, "centroids", centroids());
        json_object_set_new(m, "sig_idf", json_null());
    }
    json_t *ws = json_array();
    for (int k = 0; k < NK; k++)
        json_array_append_new(ws, json_pack("{s:s, s:i, s:i, s:i, s:i, s:{s:i}}", "name",
                                            NAMES[k], "index", k, "inflight", INFLIGHT[k],
                                            "routed", ROUTED[k], "finished",
                                            ROUTED[k] - INFLIGHT[k], "rules", "band-jsq",
                                            ROUTED[k]));
    json_t *dec = json_array();
    for (int i = 0; i < 5; i++)
        json_array_append_new(dec, json_pack("{s:s, s:i, s:i, s:s, s:s, s:f, s:[i,i], "
                                             "s:[i,i,i], s:b}", "request_id",
                                             i == 0 ? "req-newest" : i == 4 ? "req-oldest"
                                                    : i == 1 ? "req-b" : i == 2 ? "req-c"
                                                    : "req-d",
                                             "seq", 100 - i, "worker_index", i % NK, "worker",
                                             NAMES[i % NK], "rule", i == 2 ? "locality" : "min2",
                                             "sim_max", 0.9 - 0.1 * i, "band", i % NK, 2,
                                             "loads", 1, 2, 3, "finished", i == 4));
    json_t *drift = json_pack("{s:i, s:f, s:f, s:[f,f,f], s:[f,f,f], s:f, s:f, s:s}",
                              "window", 100, "mean_best_similarity", 0.6125,
                              "calibration_mean_similarity", 0.7,  "share", 0.6, 0.3, 0.1,
                              "calibration_share", 0.5, 0.3, 0.2, "share_tvd", 0.1,
                              "share_tvd_threshold", 0.123, "baseline",
                              "calibration nearest-centroid shares");
    return json_pack("{s:s, s:s, s:f, s:f, s:f, s:o, s:o, s:o, s:o}", "format",
                     "eldr-router-snapshot", "version", "0.1.0", "time", 1.7e9, "uptime_s",
                     42.0, "tau", 0.15, "model", m, "workers", ws, "decisions", dec, "drift",
                     drift);
}

static char *frame(dash_t *d, int view, int w, int h)
{
    canvas_t *c = canvas_new(w, h, 0, 0);
    assert_non_null(c);
    d->view = view;
    dash_render(d, c);
    char *s = canvas_to_string(c);
    canvas_free(c);
    assert_non_null(s);
    return s;
}

/* d opened on snap (taken: freed here). */
static void open_taken(dash_t *d, json_t *snap)
{
    char err[ELDR_ERRLEN];
    int rc = live_open_json(d, snap, "snap.json", err, sizeof err);
    json_decref(snap);
    if (rc)
        fail_msg("live_open_json: %s", err);
}

static void open_snapshot(dash_t *d, int with_centroids)
{
    json_t *snap = snapshot(with_centroids);
    char err[ELDR_ERRLEN];
    int rc = live_open_json(d, snap, "snap.json", err, sizeof err);
    json_decref(snap);
    if (rc)
        fail_msg("live_open_json: %s", err);
}

static void assert_has(const char *s, const char *want)
{
    if (!strstr(s, want))
        fail_msg("frame lacks '%s':\n%s", want, s);
}

static void test_digest(void **state)
{
    (void)state;
    dash_t d;
    open_snapshot(&d, 1);
    assert_non_null(d.live);
    assert_int_equal(d.live->now.K, NK);
    assert_int_equal(d.live->now.generation, 3);
    assert_true(fabs(d.live->now.tau - 0.15) < 1e-12);
    assert_int_equal(d.live->n_hist, 1);
    for (int k = 0; k < NK; k++) {
        assert_string_equal(d.live->now.names[k], NAMES[k]);
        assert_int_equal(d.live->now.inflight[k], INFLIGHT[k]);
        assert_true(d.live->hist[k][DASH_BINS - 1] == INFLIGHT[k]);
    }
    assert_int_equal(d.live->now.n_dec, 5);
    assert_string_equal(d.live->now.dec[0].id, "req-newest");
    assert_string_equal(d.live->now.dec[0].band, "0,2");
    assert_string_equal(d.live->now.dec[0].loads, "1 2 3");
    assert_non_null(d.fit);
    assert_int_equal(d.fit->model->K, NK);
    assert_string_equal(d.fit->model->workers[2], "dec2");
    assert_int_equal(d.fit->sizes[0], 50);
    assert_non_null(d.fit->cent);
    dash_free(&d);
}

/* Proxy mode: the snapshot's pool marks an ejected decode worker, and
 * the queue view says so on its row; without a pool nothing is marked. */
static void test_queues_mark_ejected(void **state)
{
    (void)state;
    json_t *snap = snapshot(1);
    json_t *dec = json_array();
    for (int k = 0; k < NK; k++)
        json_array_append_new(dec, json_pack("{s:s, s:b, s:f}", "name", NAMES[k], "ejected",
                                             k == 1, "ejected_for_s", k == 1 ? 42.4 : 0.0));
    json_object_set_new(snap, "pool", json_pack("{s:o, s:[]}", "decode", dec, "prefill"));
    dash_t d;
    char err[ELDR_ERRLEN];
    if (live_open_json(&d, snap, "snap.json", err, sizeof err))
        fail_msg("live_open_json: %s", err);
    json_decref(snap);
    assert_int_equal(d.live->now.has_pool, 1);
    assert_int_equal(d.live->now.ejected[1], 1);
    assert_int_equal(d.live->now.ejected[0], 0);
    char *s = frame(&d, VIEW_QUEUES, 120, 30);
    assert_has(s, "EJECTED 42s");
    assert_has(s, "1 ejected (failing: no traffic)");
    /* on dec1's row, not another's */
    const char *row = strstr(s, NAMES[1]);
    assert_non_null(row);
    const char *eol = strchr(row, '\n');
    const char *tag = strstr(row, "EJECTED");
    assert_true(tag && eol && tag < eol);
    free(s);
    dash_free(&d);
    open_snapshot(&d, 1);
    s = frame(&d, VIEW_QUEUES, 120, 30);
    assert_null(strstr(s, "EJECTED"));
    assert_int_equal(d.live->now.has_pool, 0);
    free(s);
    dash_free(&d);
}

static void test_balance_and_overview(void **state)
{
    (void)state;
    dash_t d;
    open_snapshot(&d, 1);
    char *s = frame(&d, VIEW_BALANCE, 100, 30), want[64];
    for (int k = 0; k < NK; k++) {
        snprintf(want, sizeof want, "%-8s %6d", NAMES[k], (int)(k == 0 ? 50 : k == 1 ? 30 : 20));
        assert_has(s, want);
    }
    /* routed shares 40/100, 25/100, 35/100 and the in-flight column */
    assert_has(s, "40.0%");
    assert_has(s, "25.0%");
    assert_has(s, "35.0%");
    assert_has(s, "      12\n");
    assert_has(s, "routed 100 by eldrd");
    /* the header: totals of the snapshot */
    assert_has(s, "snapshot tau 0.15 K 3 gen 3 | in-flight 19, routed 100");
    free(s);
    s = frame(&d, VIEW_OVERVIEW, 100, 30);
    assert_has(s, "total     19    100       81      -");
    assert_has(s, "band-jsq 40");
    assert_has(s, "generation 3, count over layers 0,1");
    assert_has(s, "routing   tau 0.15, K 3 workers");   /* an eldrd that names no policy */
    free(s);
    dash_free(&d);
}

/* The overview says which rule eldrd decides with (the snapshot's policy). */
static void test_overview_policy(void **state)
{
    (void)state;
    const char *pol[2] = {"band", "cost"};
    const char *want[2] = {"routing   band rule, tau 0.15, K 3 workers",
                           "routing   cost rule (tau 0.15 unused), K 3 workers"};
    for (int i = 0; i < 2; i++) {
        json_t *snap = snapshot(1);
        json_object_set_new(snap, "policy", json_string(pol[i]));
        dash_t d;
        open_taken(&d, snap);
        char *s = frame(&d, VIEW_OVERVIEW, 100, 30);
        assert_has(s, want[i]);
        free(s);
        dash_free(&d);
    }
}

static void test_decisions(void **state)
{
    (void)state;
    dash_t d;
    open_snapshot(&d, 1);
    char *s = frame(&d, VIEW_DECISIONS, 120, 30);
    const char *ids[] = {"req-newest", "req-b", "req-c", "req-d", "req-oldest"};
    const char *prev = s;
    for (int i = 0; i < 5; i++) {   /* every id, newest first */
        const char *p = strstr(s, ids[i]);
        if (!p || p < prev)
            fail_msg("decision %s missing or out of order:\n%s", ids[i], s);
        prev = p;
    }
    assert_has(s, "locality");
    assert_has(s, "0.9000");
    assert_has(s, "(finished)");
    free(s);
    /* zoom: only the selected worker's decisions (0 and 3) */
    d.worker = 1;
    d.zoom = 1;
    s = frame(&d, VIEW_DECISIONS, 120, 30);
    assert_has(s, "req-b");
    assert_null(strstr(s, "req-newest"));
    assert_null(strstr(s, "req-c"));
    free(s);
    dash_free(&d);
}

/* Every worker's load stays whole at any width: on the decision's row
 * when it has room, else on the line under it ("loads seen dec0..dec2:"),
 * the row saying "(below)"; a band of three or more in a row is a range. */
static void test_decisions_loads_whole(void **state)
{
    (void)state;
    json_t *snap = snapshot(1);
    json_array_insert_new(json_object_get(snap, "decisions"), 0, json_pack(
        "{s:s, s:i, s:i, s:s, s:s, s:f, s:[i,i,i], s:[i,i,i]}", "request_id", "req-busy",
        "seq", 101, "worker_index", 2, "worker", NAMES[2], "rule", "band-jsq", "sim_max", 0.5,
        "band", 0, 1, 2, "loads", 1234, 5678, 9012));
    dash_t d;
    open_taken(&d, snap);
    char *s = frame(&d, VIEW_DECISIONS, 120, 30);
    assert_has(s, " 0-2 ");
    assert_has(s, "1234 5678 9012\n");       /* on its row */
    free(s);
    for (int w = 40; w <= 60; w += 20) {
        s = frame(&d, VIEW_DECISIONS, w, 20);
        const char *row = strstr(s, "req-busy"), *ll = strstr(s, "1234 5678 9012");
        if (!row || !ll || strchr(row, '\n') > ll || strchr(strchr(row, '\n') + 1, '\n') < ll)
            fail_msg("at %d columns the loads are not whole on the line under their row:\n%s",
                     w, s);
        assert_non_null(strstr(s, w == 60 ? "loads seen dec0..dec2: 1234 5678 9012"
                                          : "loads seen: 1234 5678 9012"));
        for (const char *l = s; *l; l = strchr(l, '\n') + 1) {   /* nothing past the width */
            assert_true(strchr(l, '\n') - l <= w);
            if (!strchr(l, '\n')[1])
                break;
        }
        free(s);
    }
    dash_free(&d);
}

/* A cost decision (eldrd --policy cost: "policy" and "rule" "cost",
 * "costs" per worker in ms, null for one it could not use, and
 * "cost_terms" per worker, as src/router/engine/state_json.c writes
 * them): the decisions view shows the costs and the terms B/U/dU on a
 * second line, and without "cost_terms" the costs alone. */
static void test_cost_decisions(void **state)
{
    (void)state;
    json_t *snap = snapshot(1);
    json_t *dec = json_object_get(snap, "decisions");
    json_t *terms = json_pack(
        "[{s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f}, n, {s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f}]",
        "B", 2, "U", 410.5, "dU", 21.25, "kv", 640.0, "t_before_ms", 3.0, "t_after_ms", 3.1,
        "wait_ms", 0.0, "cost_ms", 3.3, "B", 1, "U", 380.0, "dU", 25.0, "kv", 320.0,
        "t_before_ms", 2.5, "t_after_ms", 2.6, "wait_ms", 0.0, "cost_ms", 2.75);
    json_array_insert_new(dec, 0, json_pack(
        "{s:s, s:i, s:i, s:s, s:s, s:s, s:n, s:n, s:[i,i], s:[i,i,i], s:[f,n,f], s:o}",
        "request_id", "req-cost", "seq", 101, "worker_index", 2, "worker", NAMES[2], "policy",
        "cost", "rule", "cost", "sim_max", "similarities", "band", 0, 2, "loads", 2, 0, 1,
        "costs", 3.3, 2.75, "cost_terms", terms));
    json_array_insert_new(dec, 0, json_pack(
        "{s:s, s:i, s:i, s:s, s:s, s:n, s:[i,i,i], s:[i,i,i], s:[f,f,f]}", "request_id",
        "req-cost-bare", "seq", 102, "worker_index", 1, "worker", NAMES[1], "rule", "cost",
        "sim_max", "band", 0, 1, 2, "loads", 2, 1, 1, "costs", 4.0, 1.5, 2.0));
    dash_t d;
    char err[ELDR_ERRLEN];
    int rc = live_open_json(&d, snap, "snap.json", err, sizeof err);
    json_decref(snap);
    if (rc)
        fail_msg("live_open_json: %s", err);
    assert_int_equal(d.live->now.dec[1].has_cost, 1);
    assert_int_equal(d.live->now.dec[2].has_cost, 0);   /* a band decision */
    char *s = frame(&d, VIEW_DECISIONS, 120, 30);
    assert_has(s, "req-cost-bare");
    assert_has(s, "cost ms 4.000 1.500 2.000\n");
    assert_has(s, "cost ms 3.300 - 2.750  B/U/dU 2/410.5/+21.2 - 1/380.0/+25.0");
    assert_has(s, "B/U/dU: in flight, expected experts/step, what it adds");
    /* each cost line sits right under its decision */
    const char *a = strstr(s, "req-cost "), *b = strstr(s, "cost ms 3.300");
    assert_non_null(a);
    assert_non_null(b);
    assert_null(memchr(strchr(a, '\n') + 1, '\n', (size_t)(b - strchr(a, '\n') - 1)));
    free(s);
    /* at 60 columns the lines are cut, never wrapped into the next */
    s = frame(&d, VIEW_DECISIONS, 60, 20);
    assert_has(s, "cost ms 3.300 - 2.750");
    free(s);
    dash_free(&d);
}

static void test_drift_scatter_heatmap(void **state)
{
    (void)state;
    dash_t d;
    open_snapshot(&d, 1);
    char *s = frame(&d, VIEW_DRIFT, 100, 30);
    assert_has(s, "live 0.6125   calibration 0.7000   change -12.5%");
    assert_has(s, "60.0%");
    assert_has(s, "+10.0");
    assert_has(s, "-10.0");
    assert_has(s, "drift: TVD 0.100 <= threshold 0.123 (99% noise, n 100): within noise");
    assert_has(s, "baseline: calibration nearest-centroid shares");
    free(s);
    s = frame(&d, VIEW_SCATTER, 100, 30);
    assert_has(s, "PCA of the 3 centroids");
    for (int k = 0; k < NK; k++)
        assert_non_null(strchr(s, 'A' + k));
    free(s);
    s = frame(&d, VIEW_HEATMAP, 100, 30);
    assert_has(s, "dec0: centroid weight");
    assert_has(s, "legend:");
    free(s);
    s = frame(&d, VIEW_RHO, 100, 30);
    assert_has(s, "no rho curve in live mode");
    free(s);
    dash_free(&d);
}

/* The screen at 80x24: TVD 0.161 keeps its three decimals beside
 * the threshold and the verdict; an old eldrd's baseline is named; an
 * empty window (just after a refit or push) says so and shows no nan. */
static void test_drift_80x24(void **state)
{
    (void)state;
    dash_t d;
    open_snapshot(&d, 1);
    dash_live_now *n = &d.live->now;
    n->window = 1024;
    n->tvd = 0.161;
    n->tvd_thr = 0.0454;
    snprintf(n->baseline, sizeof n->baseline, "balanced sizes (model predates calibration "
             "shares)");
    char *s = frame(&d, VIEW_DRIFT, 80, 24);
    assert_has(s, "drift: TVD 0.161 > threshold 0.045 (99% noise, n 1024): DRIFT");
    assert_has(s, "baseline: balanced sizes (model predates calibration shares)");
    assert_null(strstr(s, "nan"));
    free(s);
    /* the overview states the same verdict, word for word */
    s = frame(&d, VIEW_OVERVIEW, 120, 40);
    assert_has(s, "drift: TVD 0.161 > threshold 0.045 (99% noise, n 1024): DRIFT (8 drift)");
    free(s);
    n->tvd = 0.02;
    s = frame(&d, VIEW_OVERVIEW, 120, 40);
    assert_has(s, "drift: TVD 0.020 <= threshold 0.045 (99% noise, n 1024): within noise");
    free(s);
    n->tvd = NAN;
    s = frame(&d, VIEW_OVERVIEW, 120, 40);
    assert_has(s, "drift: no TVD (the model has no calibration shares)");
    assert_null(strstr(s, "nan"));
    free(s);
    n->tvd = 0.161;
    /* a model without a baseline: the balance view's zoom says so */
    for (int k = 0; k < n->K; k++)
        n->calib_share[k] = NAN;
    d.zoom = 1;
    s = frame(&d, VIEW_BALANCE, 80, 24);
    assert_has(s, "(calibration unknown)");
    assert_null(strstr(s, "nan"));
    free(s);
    d.zoom = 0;
    n->window = 0;
    n->mean_sim = n->calib_sim = n->tvd = n->tvd_thr = NAN;
    for (int k = 0; k < n->K; k++)
        n->share[k] = n->calib_share[k] = NAN;
    for (int w = 80; w <= 120; w += 40) {
        s = frame(&d, VIEW_DRIFT, w, w == 80 ? 24 : 40);
        assert_has(s, "drift: no signatures yet");
        if (strstr(s, "nan") || strstr(s, "NaN"))
            fail_msg("a nan in the empty drift view:\n%s", s);
        free(s);
    }
    dash_free(&d);
}

static void test_without_centroids(void **state)
{
    (void)state;
    dash_t d;
    open_snapshot(&d, 0);
    assert_null(d.fit);
    char *s = frame(&d, VIEW_SCATTER, 100, 30);
    assert_has(s, "no centroids in this snapshot");
    free(s);
    s = frame(&d, VIEW_BALANCE, 100, 30);
    assert_has(s, "dec2");
    free(s);
    dash_free(&d);
}

/* Open a mutated snapshot; expect failure with `want` in the message. */
static void expect_bad(json_t *snap, const char *want)
{
    dash_t d;
    char err[ELDR_ERRLEN] = "";
    int rc = live_open_json(&d, snap, "bad.json", err, sizeof err);
    json_decref(snap);
    dash_free(&d);
    if (rc == 0)
        fail_msg("accepted a bad snapshot (wanted '%s')", want);
    if (!strstr(err, want) || !strstr(err, "bad.json"))
        fail_msg("error '%s' lacks '%s' or the file name", err, want);
}

static void test_bad_snapshots(void **state)
{
    (void)state;
    json_t *s = snapshot(1);
    json_object_set_new(s, "format", json_string("something-else"));
    expect_bad(s, "key format");
    s = snapshot(1);
    json_object_del(s, "workers");
    expect_bad(s, "key workers");
    s = snapshot(1);
    json_object_del(json_array_get(json_object_get(s, "workers"), 1), "inflight");
    expect_bad(s, "workers[1]");
    s = snapshot(1);
    json_object_del(s, "model");
    expect_bad(s, "key model");
    s = snapshot(1);   /* 2 centroids for 3 workers */
    json_array_remove(json_object_get(json_object_get(s, "model"), "centroids"), 2);
    expect_bad(s, "bad.json");
    s = snapshot(1);   /* a centroid that is not unit length */
    json_array_set_new(json_array_get(json_object_get(json_object_get(s, "model"), "centroids"),
                                      0), 0, json_real(5.0));
    expect_bad(s, "bad.json");
    dash_t d;
    char err[ELDR_ERRLEN];
    assert_int_equal(live_open_file(&d, "/nonexistent/snap.json", err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/snap.json"));
    dash_free(&d);
}

static void test_attach_unreachable(void **state)
{
    (void)state;
    /* a port that was free a moment ago: connection refused */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    char url[64], err[ELDR_ERRLEN];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(a.sin_port));
    dash_t d;
    live_t *l = NULL;
    assert_int_equal(live_attach(&d, url, 0.5, 2, &l, err, sizeof err), -1);
    assert_null(l);
    assert_non_null(strstr(err, url));
    dash_free(&d);
    live_stop(NULL);
}

/* The fixture snapshot as a later poll: uptime and time moved on by dt,
 * every worker's routed count plus `more`, the window's similarity sim,
 * and (seq > 0) one newer decision "req-new" with that seq. */
static json_t *later(double dt, double uptime, int more, double sim, int seq)
{
    json_t *snap = snapshot(0);
    json_object_set_new(snap, "time", json_real(1.7e9 + dt));
    json_object_set_new(snap, "uptime_s", json_real(uptime));
    json_t *ws = json_object_get(snap, "workers");
    for (int k = 0; k < NK; k++)
        json_object_set_new(json_array_get(ws, (size_t)k), "routed",
                            json_integer(ROUTED[k] + more));
    json_object_set_new(json_object_get(snap, "drift"), "mean_best_similarity", json_real(sim));
    if (seq > 0)
        json_array_insert_new(json_object_get(snap, "decisions"), 0,
                              json_pack("{s:s, s:i, s:i, s:s, s:f, s:[i], s:[i,i,i]}",
                                        "request_id", "req-new", "seq", seq, "worker_index", 0,
                                        "rule", "min2", "sim_max", 0.5, "band", 0, "loads", 1,
                                        1, 1));
    return snap;
}

static void absorb(dash_t *d, json_t *snap, double at)
{
    char err[ELDR_ERRLEN];
    int rc = live_absorb_json(d, snap, "poll", at, err, sizeof err);
    json_decref(snap);
    if (rc)
        fail_msg("live_absorb_json: %s", err);
}

/* Issue 14: a daemon restart (uptime back, start time moved, counters
 * back) is detected and marked '!' in the histories; an ordinary next
 * poll is not. */
static void test_restart_marked(void **state)
{
    (void)state;
    dash_t d;
    open_snapshot(&d, 1);
    absorb(&d, later(1, 43, 5, 0.6125, 0), 1.0);
    assert_int_equal(d.live->restarts, 0);
    assert_int_equal(d.live->hist_restart[DASH_BINS - 1], 0);
    char *s = frame(&d, VIEW_QUEUES, 100, 30);
    assert_null(strstr(s, "daemon restart"));
    free(s);
    /* restarted 5 s later: uptime 2 s, counters from 0 again */
    absorb(&d, later(6, 2, -20, 0.6125, 0), 2.0);
    assert_int_equal(d.live->restarts, 1);
    assert_int_equal(d.live->hist_restart[DASH_BINS - 1], 1);
    assert_true(d.live->rate != d.live->rate);   /* no rate across a restart */
    absorb(&d, later(7, 3, -19, 0.6125, 0), 3.0);
    assert_int_equal(d.live->restarts, 1);
    assert_int_equal(d.live->hist_restart[DASH_BINS - 2], 1);   /* moved with the history */
    s = frame(&d, VIEW_QUEUES, 100, 30);
    char line[256];
    for (int k = 0; k < NK; k++) {   /* each worker's history marks it */
        const char *p = strstr(s, NAMES[k]);
        assert_non_null(p);
        const char *e = strchr(p, '\n');
        snprintf(line, sizeof line, "%.*s", (int)(e - p), p);
        if (!strchr(line, '!'))
            fail_msg("no restart mark in '%s'", line);
    }
    assert_has(s, "! daemon restart");
    free(s);
    s = frame(&d, VIEW_OVERVIEW, 100, 30);
    assert_has(s, "restarts  1 seen");
    assert_has(s, "uptime 43 s -> 2 s");
    free(s);
    s = frame(&d, VIEW_DRIFT, 100, 30);
    assert_has(s, "; ! restart;");
    free(s);
    dash_free(&d);

    /* each sign alone */
    dash_live_now a = {0}, b = {0};
    a.K = b.K = 1;
    a.time = 1000;
    a.uptime_s = 100;
    b.time = 1000;      /* eldrd's coarse time may stand still ... */
    b.uptime_s = 101;   /* ... while uptime grows: one daemon */
    assert_int_equal(live_restarted(&a, &b), 0);
    b.uptime_s = 99;
    assert_int_equal(live_restarted(&a, &b), 1);
    b.uptime_s = 101;
    a.routed[0] = 10;
    b.routed[0] = 3;
    assert_int_equal(live_restarted(&a, &b), 1);
    b.routed[0] = 10;
    a.finished[0] = 5;
    assert_int_equal(live_restarted(&a, &b), 1);
    b.finished[0] = 5;
    assert_int_equal(live_restarted(&a, &b), 0);
}

/* Issue 14: the drift history is auto-scaled (0.6125 vs 0.6140 must not
 * be the same glyph) and prints its axis. */
static void test_drift_autoscaled(void **state)
{
    (void)state;
    dash_t d;
    open_snapshot(&d, 1);
    absorb(&d, later(1, 43, 0, 0.6130, 0), 1.0);
    absorb(&d, later(2, 44, 0, 0.6140, 0), 2.0);
    char *s = frame(&d, VIEW_DRIFT, 100, 30);
    assert_has(s, "auto-scaled");
    assert_has(s, "axis 0.612");
    assert_has(s, "..0.614");
    assert_has(s, "calibration 0.7000 above");
    /* the last 3 columns of the chart's rows: not all alike */
    const char *p = strstr(s, "history");
    assert_non_null(p);
    char rows[3][4];
    for (int r = 0; r < 3; r++) {
        const char *e = strchr(p, '\n');
        assert_non_null(e);
        memcpy(rows[r], e - 3, 3);
        rows[r][3] = '\0';
        p = e + 1;
    }
    if (!strcmp(rows[0], "   ") && rows[1][0] == rows[1][2] && rows[2][0] == rows[2][2])
        fail_msg("small changes do not show:\n%s", s);
    assert_true(rows[2][0] != ' ');   /* the lowest poll still shows */
    free(s);
    dash_free(&d);
}

/* Issue 14: space pauses the decisions list while the polls go on. */
static void test_decisions_pause(void **state)
{
    (void)state;
    dash_t d;
    open_snapshot(&d, 1);
    live_pause(d.live, 1);
    absorb(&d, later(1, 43, 1, 0.6125, 101), 1.0);
    assert_int_equal(d.live->now.n_dec, 6);   /* the poll was taken */
    char *s = frame(&d, VIEW_DECISIONS, 120, 30);
    assert_null(strstr(s, "req-new "));
    assert_has(s, "req-newest");
    assert_has(s, "PAUSED: space resumes; 1 newer");
    assert_has(s, "decisions PAUSED");   /* the footer */
    free(s);
    assert_has(s = frame(&d, VIEW_BALANCE, 100, 30), "routed 103 by eldrd");
    free(s);
    live_pause(d.live, 0);
    s = frame(&d, VIEW_DECISIONS, 120, 30);
    assert_has(s, "req-new ");
    assert_null(strstr(s, "PAUSED"));
    assert_has(s, "space pause");
    free(s);
    dash_free(&d);
}

/* Issue 14: how long since the daemon last answered, also while it does
 * not answer. */
static void test_last_answer(void **state)
{
    (void)state;
    dash_t d;
    open_snapshot(&d, 1);
    d.live->attached = 1;
    d.live->age_s = 0.4;
    char *s = frame(&d, VIEW_BALANCE, 120, 30);
    assert_has(s, "last answer 0.4s ago");
    assert_has(s, "(calib 0.700)");
    free(s);
    s = frame(&d, VIEW_BALANCE, 84, 30);   /* short of room: the age stays */
    assert_has(s, "last answer 0.4s ago");
    assert_null(strstr(s, "(calib 0.700)"));
    free(s);
    d.live->age_s = 7.2;
    d.live->failures = 3;
    snprintf(d.live->error, sizeof d.live->error, "connection refused");
    s = frame(&d, VIEW_BALANCE, 120, 30);
    assert_has(s, "NO ANSWER, retrying; 3 failed");
    assert_has(s, "last answer 7s ago");
    free(s);
    dash_free(&d);
}

/* A proxy's snapshot with decoder dec1 ejected (its URL from the pool),
 * the only prefill ejected, refusals, 5xx answers and failed routes: the
 * 80x24 overview names each in its Problems block, before the tables,
 * with no line past the width and no number cut. */
static json_t *failing_snapshot(void)
{
    json_t *snap = snapshot(1);
    json_t *ws = json_object_get(snap, "workers");
    json_object_set_new(json_array_get(ws, 1), "failed", json_integer(9));
    json_object_set_new(json_array_get(ws, 0), "failed", json_integer(0));
    json_object_set_new(json_array_get(ws, 2), "failed", json_integer(0));
    json_t *dec = json_array();
    for (int k = 0; k < NK; k++) {
        char url[64];
        snprintf(url, sizeof url, "http://decode-%d.vllm.svc.cluster.local:8000", k);
        json_array_append_new(dec, json_pack("{s:s, s:s, s:s, s:s, s:b, s:f, s:i, s:i}", "name",
                                             url, "url", url, "worker", NAMES[k], "state",
                                             k == 1 ? "ejected" : "in_rotation", "ejected",
                                             k == 1, "ejected_for_s", k == 1 ? 37.4 : 0.0,
                                             "failures", k == 1 ? 12 : 0, "in_flight", 0));
    }
    json_t *pre = json_pack("[{s:s, s:s, s:s, s:b, s:f, s:i, s:i}]", "name",
                            "http://prefill-0:8000", "url", "http://prefill-0:8000", "state",
                            "ejected", "ejected", 1, "ejected_for_s", 4.6, "failures", 3,
                            "in_flight", 0);
    json_object_set_new(snap, "pool", json_pack("{s:o, s:o}", "decode", dec, "prefill", pre));
    json_object_set_new(
        snap, "failures",
        json_pack("{s:{s:i, s:i, s:{s:i, s:i, s:i}}, s:{s:i, s:i, s:i, s:i}, s:{s:i, s:i}, s:i, "
                  "s:i, s:{s:i, s:i, s:i}, s:{s:i, s:i, s:i, s:i}, s:{s:i, s:i}}",
                  "answered", "4xx", 2, "5xx", 1531, "by_code", "502", 1500, "503", 31, "400",
                  2, "refusals", "per_ip", 1518, "max_conns", 7, "body_budget", 3, "unauthorized", 0,
                  "timeouts", "header", 0, "request_deadline", 0, "protocol_errors", 0,
                  "failed_after_routing", 9, "proxy", "upstream_error", 1500,
                  "upstream_timeout", 0, "refused", 31, "upstream_timeouts", "connect", 4,
                  "prefill", 0, "decode", 1, "idle", 0, "retries", "prefill", 0, "decode",
                  9));
    return snap;
}

static void test_overview_problems(void **state)
{
    (void)state;
    dash_t d;
    open_taken(&d, failing_snapshot());
    char *s = frame(&d, VIEW_OVERVIEW, 80, 24);
    /* every line within 80 columns, 24 of them */
    int lines = 0, col = 0;
    for (const char *p = s; *p; p++) {
        col = *p == '\n' ? 0 : col + 1;
        lines += *p == '\n';
        if (col > 80)
            fail_msg("a line past 80 columns:\n%s", s);
    }
    assert_int_equal(lines, 24);
    const char *prob = strstr(s, "Problems"), *router = strstr(s, "Router");
    if (!prob || !router || prob > router)
        fail_msg("no Problems block before the Router block:\n%s", s);
    /* the URL cut in the middle: its host's start and its port whole */
    assert_has(s, "ejected   dec1, out 37 s more, 12 failures: decode-1.vllm.svc.cluste...:8000");
    assert_has(s, "prefill   ejected, the only one (out 5 s more): prefill-0:8000");
    assert_has(s, "refused   1518 connections (--max-conns-per-ip), 7 ext_proc (--max-conns)");
    assert_has(s, "refused   3 bodies (--body-budget)");
    assert_has(s, "answered  1531 5xx, 2 4xx: 502 x1500, 503 x31, 400 x2");
    assert_has(s, "failed    9 routes at a decoder, 9 retried; timeouts: connect 4, decode 1");
    free(s);
    /* the worker row: its failed routes, state, load source, the URL cut
     * in the middle (at 24 rows the Problems block, first, pushes the
     * workers below the screen's end) */
    s = frame(&d, VIEW_OVERVIEW, 80, 32);
    assert_has(s, "dec1       0     25       25      9  ejected 37s own   decode-1.vllm...:8000");
    assert_has(s, "Prefill (1, 0 in rotation)");
    free(s);
    /* every view's header says there are problems, and where to look */
    for (int v = 0; v < VIEW_N; v++) {
        if (v == VIEW_TRADEOFF)
            continue;
        s = frame(&d, v, 80, 24);
        assert_has(s, "| 6 PROBLEMS (1)");
        free(s);
    }
    /* without a pool or failures (an eldrd that only routes): no block */
    dash_free(&d);
    open_snapshot(&d, 1);
    s = frame(&d, VIEW_OVERVIEW, 80, 24);
    assert_null(strstr(s, "Problems"));
    assert_null(strstr(s, "PROBLEM"));
    free(s);
    dash_free(&d);
}

/* The gateway picker: the pool's instances are names (url null), the
 * addresses are ext_proc's endpoints by worker index; a worker back on
 * trial after an ejection is "probing", in the Problems block and on
 * its row. */
static void test_overview_picker_probing(void **state)
{
    (void)state;
    json_t *snap = snapshot(1), *dec = json_array(), *eps = json_array();
    for (int k = 0; k < NK; k++) {
        json_array_append_new(dec, json_pack("{s:s, s:n, s:s, s:s, s:b, s:f, s:i}", "name",
                                             NAMES[k], "url", "worker", NAMES[k], "state",
                                             k == 2 ? "probing" : "in_rotation", "ejected", 0,
                                             "ejected_for_s", 0.0, "failures", k == 2 ? 4 : 0));
        char addr[32];
        snprintf(addr, sizeof addr, "10.0.0.%d:8000", 10 + k);
        json_array_append_new(eps, json_pack("{s:i, s:s, s:s, s:s}", "worker", k, "name",
                                             NAMES[k], "namespace", "default", "address", addr));
    }
    json_object_set_new(snap, "pool", json_pack("{s:o, s:[]}", "decode", dec, "prefill"));
    json_object_set_new(snap, "ext_proc", json_pack("{s:o}", "endpoints", eps));
    dash_t d;
    open_taken(&d, snap);
    char *s = frame(&d, VIEW_OVERVIEW, 80, 24);
    assert_has(s, "probing   dec2, back on trial (a failure ejects it): 10.0.0.12:8000");
    assert_has(s, "dec0       7     40       33      -  in rotation own   10.0.0.10:8000");
    assert_has(s, "dec2      12     35       23      -  probing     own   10.0.0.12:8000");
    assert_null(strstr(s, "Prefill ("));   /* none in the pool: no prefill lines */
    free(s);
    dash_free(&d);
}

static void test_every_size(void **state)
{
    (void)state;
    dash_t d;
    open_snapshot(&d, 1);
    static const int sizes[][2] = {{40, 10}, {80, 24}, {300, 90}, {41, 11}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int z = 0; z < 2; z++)
            for (int v = 0; v < VIEW_N; v++) {
                d.zoom = z;
                d.help = v == 0;
                char *s = frame(&d, v, sizes[i][0], sizes[i][1]);
                int lines = 0;
                for (const char *p = s; *p; p++)
                    lines += *p == '\n';
                assert_int_equal(lines, sizes[i][1]);
                free(s);
            }
    assert_int_equal(dash_n_views(&d), VIEW_DRIFT + 1);   /* no trade-off live */
    dash_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digest),
        cmocka_unit_test(test_queues_mark_ejected),
        cmocka_unit_test(test_balance_and_overview),
        cmocka_unit_test(test_overview_policy),
        cmocka_unit_test(test_overview_problems),
        cmocka_unit_test(test_overview_picker_probing),
        cmocka_unit_test(test_decisions),
        cmocka_unit_test(test_decisions_loads_whole),
        cmocka_unit_test(test_cost_decisions),
        cmocka_unit_test(test_drift_scatter_heatmap),
        cmocka_unit_test(test_drift_80x24),
        cmocka_unit_test(test_without_centroids),
        cmocka_unit_test(test_bad_snapshots),
        cmocka_unit_test(test_attach_unreachable),
        cmocka_unit_test(test_every_size),
        cmocka_unit_test(test_restart_marked),
        cmocka_unit_test(test_drift_autoscaled),
        cmocka_unit_test(test_decisions_pause),
        cmocka_unit_test(test_last_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
