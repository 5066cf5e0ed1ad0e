/* test_progress.c - the core's progress reports (progress.h): the rate
 * limiter lets a stage's first and last report through and thins the
 * rest; greedy layer selection reports its steps 0..L of L; model_fit
 * reports its stages in order, each ending at done == total, and the old
 * K-means callback still sees every round. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <time.h>

#include "err.h"
#include "layersel.h"
#include "model.h"
#include "progress.h"
#include "rho.h"
#include "util_tracefix.h"

#define MAX_LOG 4096

typedef struct logbook {
    int n;
    const char *what[MAX_LOG];
    int64_t done[MAX_LOG], total[MAX_LOG];
    int km_rounds;
} logbook;

static void record(void *ctx, const char *what, int64_t done, int64_t total)
{
    logbook *b = ctx;
    if (b->n < MAX_LOG) {
        b->what[b->n] = what;
        b->done[b->n] = done;
        b->total[b->n] = total;
        b->n++;
    }
}

static void test_rate_limit(void **state)
{
    (void)state;
    logbook b = {0};
    progress_t p;
    progress_init(&p, record, &b);
    /* 1000 reports in a tight loop (well under PROGRESS_MIN_INTERVAL):
     * only the first and the last get through */
    for (int i = 0; i <= 1000; i++)
        progress_tick(&p, "a", i, 1000);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.done[0], 0);
    assert_int_equal(b.done[1], 1000);
    /* a new stage always gets through */
    progress_tick(&p, "b", 0, 5);
    assert_int_equal(b.n, 3);
    assert_string_equal(b.what[2], "b");
    /* after the interval, a middle report passes */
    struct timespec ts = {0, (long)(PROGRESS_MIN_INTERVAL * 1.2e9)};
    nanosleep(&ts, NULL);
    progress_tick(&p, "b", 2, 5);
    assert_int_equal(b.n, 4);
    /* NULL reporter and NULL function: nothing, no crash */
    progress_tick(NULL, "c", 0, 1);
    progress_t none;
    progress_init(&none, NULL, NULL);
    progress_tick(&none, "c", 0, 1);
    assert_int_equal(b.n, 4);
}

static void test_layersel_steps(void **state)
{
    (void)state;
    trace_t *t = tracefix_make(60, 6, 8, 2, 3);
    assert_non_null(t);
    rho_pairs pr;
    char err[ELDR_ERRLEN];
    assert_int_equal(rho_pairs_sample(t->n, 500, 1, &pr, err, sizeof err), 0);
    logbook b = {0};
    layersel_result g;
    assert_int_equal(layersel_run_progress(t, SIG_COUNT, NULL, &pr, 1, NULL, record, &b, &g, err,
                                           sizeof err), 0);
    assert_true(b.n >= 2);
    assert_string_equal(b.what[0], LAYERSEL_WHAT);
    assert_int_equal(b.done[0], 0);
    assert_int_equal(b.done[b.n - 1], t->L);
    for (int i = 0; i < b.n; i++) {
        assert_int_equal(b.total[i], t->L);
        if (i)
            assert_true(b.done[i] >= b.done[i - 1]);
    }
    /* the same selection as without progress */
    layersel_result h;
    assert_int_equal(layersel_run(t, SIG_COUNT, NULL, &pr, 1, NULL, &h, err, sizeof err), 0);
    assert_int_equal(g.n_star, h.n_star);
    assert_memory_equal(g.order, h.order, (size_t)t->L * sizeof *g.order);
    layersel_result_free(&g);
    layersel_result_free(&h);
    rho_pairs_free(&pr);
    trace_free(t);
}

static void km_round(void *ctx, int iter, double objective)
{
    (void)iter;
    (void)objective;
    ((logbook *)ctx)->km_rounds++;
}

static void test_model_fit_stages(void **state)
{
    (void)state;
    trace_t *t = tracefix_make(80, 6, 8, 2, 5);
    assert_non_null(t);
    logbook b = {0};
    model_fit_opts o;
    model_fit_opts_default(&o, 3);
    o.variant = SIG_COUNT;
    o.pairs = 400;
    o.on_progress = record;
    o.on_progress_ctx = &b;
    o.progress = km_round;
    o.progress_ctx = &b;
    model_t *m = NULL;
    model_fit_report rep;
    char err[ELDR_ERRLEN];
    assert_int_equal(model_fit(t, &o, &m, &rep, err, sizeof err), 0);
    /* stages in order, each ending complete */
    const char *want[] = {LAYERSEL_WHAT, MODEL_FIT_SIGNATURES, MODEL_FIT_KMEANS};
    int s = 0;
    for (int i = 0; i < b.n; i++) {
        if (strcmp(b.what[i], want[s])) {
            assert_int_equal(b.done[i - 1], b.total[i - 1]); /* previous stage done */
            s++;
            assert_true(s < 3);
            assert_string_equal(b.what[i], want[s]);
        }
    }
    assert_int_equal(s, 2);
    assert_int_equal(b.done[b.n - 1], o.iters);
    assert_int_equal(b.total[b.n - 1], o.iters);
    /* the K-means callback still sees every round */
    assert_int_equal(b.km_rounds, rep.iterations);
    model_fit_report_free(&rep);
    model_free(m);
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rate_limit),
        cmocka_unit_test(test_layersel_steps),
        cmocka_unit_test(test_model_fit_stages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
