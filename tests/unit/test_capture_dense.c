/* test_capture_dense.c - the dense layers of `eldr capture`
 * (src/client/capture_dense.h) through the trace they end up in
 * (capture_trace.h): vLLM's capturer leaves a non-MoE layer's ids 0 for
 * every token (k = 2 here). The dense layers leave the trace, the others
 * are copied and counted exactly; a layer 0 in some answers only, or a
 * capture with no routing at all, is refused; top-1 keeps its zeros; the
 * saved trace names the dense layers in its attributes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/client/capture_dense.h"
#include "../../src/client/capture_trace.h"
#include "err.h"
#include "h5util.h"
#include "trace.h"

#define NL 5
#define NK 2
#define NE 8

static char err[ELDR_ERRLEN];

/* token t layer l: experts (t + l) % NE and (t + l + 3) % NE, or 0s in a
 * dense layer */
static uint16_t id_at(int t, int l, int j, unsigned dense)
{
    return dense >> l & 1 ? 0 : (uint16_t)((t + l + 3 * j) % NE);
}

/* Two answered jobs (P prompt and D decode rows each) and a failed one;
 * dense: a bit per layer. */
typedef struct fix {
    capture_job jobs[3];
    capture_prompt p[3];
    capture_prompts ps;
} fix;

static void make(fix *f, unsigned dense)
{
    static const int P[3] = {4, 3, 2}, D[3] = {2, 0, 1};
    static char *ids[3] = {"a", "b", "c"};
    memset(f, 0, sizeof *f);
    for (int i = 0; i < 3; i++) {
        routed_t *cr = &f->jobs[i].routes;
        f->jobs[i].state = i == 2 ? JOB_FAILED : JOB_OK;
        f->jobs[i].sent_s = i;
        cr->L = NL;
        cr->k = NK;
        cr->prompt_tokens = P[i];
        cr->decode_rows = D[i];
        cr->completion_tokens = D[i] + 1;
        cr->ids = calloc((size_t)(P[i] + D[i]) * NL * NK, sizeof *cr->ids);
        assert_non_null(cr->ids);
        for (int t = 0; t < P[i] + D[i]; t++)
            for (int l = 0; l < NL; l++)
                for (int j = 0; j < NK; j++)
                    cr->ids[((size_t)t * NL + l) * NK + j] = id_at(t + 10 * i, l, j, dense);
        cr->max_id = NE - 1;
        f->p[i] = (capture_prompt){.id = ids[i], .label = -1, .line = i + 1};
    }
    f->ps = (capture_prompts){.p = f->p, .n = 3};
}

/* The trace of f's answers: capture_trace_build's return code. */
static int build(fix *f, trace_t **t, capture_dense *d)
{
    int inferred = 0;
    *t = NULL;
    return capture_trace_build(f->jobs, &f->ps, NE, "m", t, &inferred, d, err, sizeof err);
}

static void unmake(fix *f)
{
    for (int i = 0; i < 3; i++)
        free(f->jobs[i].routes.ids);
}

static void test_dense_layers_leave(void **state)
{
    (void)state;
    fix f;
    make(&f, 1u << 0 | 1u << 3);
    trace_t *t;
    capture_dense d;
    assert_int_equal(build(&f, &t, &d), 0);
    assert_non_null(t);
    assert_int_equal(d.L, NL);
    assert_int_equal(d.n, 2);
    assert_int_equal(d.layers[0], 0);
    assert_int_equal(d.layers[1], 3);
    assert_int_equal(t->L, NL - 2);
    assert_int_equal(t->n, 2);
    static const int kept[3] = {1, 2, 4};
    /* ids: the kept layers, in order; counts summed from them */
    for (int r = 0; r < 2; r++) {
        int P = (int)f.jobs[r].routes.prompt_tokens;
        for (int tok = 0; tok < P; tok++)
            for (int l = 0; l < 3; l++)
                for (int j = 0; j < NK; j++)
                    assert_int_equal(
                        t->prefill_experts[((size_t)(t->prefill_offsets[r] + tok) * 3 + l) * NK + j],
                        id_at(tok + 10 * r, kept[l], j, 0));
        for (int l = 0; l < 3; l++) {
            int sum = 0;
            for (int e = 0; e < NE; e++)
                sum += t->prefill_counts[((size_t)r * 3 + l) * NE + e];
            assert_int_equal(sum, P * NK);
        }
    }
    assert_int_equal(t->decode_offsets[2], 2);
    assert_int_equal(t->decode_experts[0], id_at(4, 1, 0, 0));   /* decode row 0 = token 4 */
    char list[64];
    capture_dense_list(&d, list, sizeof list);
    assert_string_equal(list, "0,3");
    capture_dense_list(&d, list, 3);
    assert_string_equal(list, "..");
    /* the saved trace names them */
    char path[] = "/tmp/eldr-test-dense-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(capture_dense_save(t, path, &d, err, sizeof err), 0);
    hid_t h = h5u_open_read(path, err, sizeof err);
    assert_true(h >= 0);
    char v[64];
    int64_t n = 0;
    assert_int_equal(h5u_read_str_attr(h, CAPTURE_ATTR_DENSE_LAYERS, v, sizeof v, path, err,
                                       sizeof err), 0);
    assert_string_equal(v, "0,3");
    assert_int_equal(h5u_read_int_attr(h, CAPTURE_ATTR_ENGINE_LAYERS, &n, path, err,
                                       sizeof err), 0);
    assert_int_equal(n, NL);
    H5Fclose(h);
    trace_t *back = NULL;
    assert_int_equal(trace_load(path, &back, err, sizeof err), 0);   /* still a trace */
    assert_int_equal(back->L, 3);
    trace_free(back);
    unlink(path);
    /* a save that cannot be written leaves nothing behind */
    assert_int_equal(capture_dense_save(t, "/nonexistent-dir/x.h5", &d, err, sizeof err), -1);
    trace_free(t);
    capture_dense_free(&d);
    unmake(&f);
}

static void test_no_dense_layer(void **state)
{
    (void)state;
    fix f;
    make(&f, 0);
    trace_t *t;
    capture_dense d;
    assert_int_equal(build(&f, &t, &d), 0);
    assert_int_equal(d.n, 0);
    assert_null(d.layers);
    assert_int_equal(t->L, NL);
    char list[8] = "x";
    capture_dense_list(&d, list, sizeof list);
    assert_string_equal(list, "");
    trace_free(t);
    capture_dense_free(&d);
    unmake(&f);
}

/* a layer 0 for every token of one answer but routing the others' is
 * neither dense nor routing: refused, naming the answer and the layer */
static void test_partly_zero_refused(void **state)
{
    (void)state;
    fix f;
    make(&f, 1u << 0);
    routed_t *b = &f.jobs[1].routes;   /* job b: layer 2 all 0 */
    for (int64_t t = 0; t < b->prompt_tokens + b->decode_rows; t++)
        for (int j = 0; j < NK; j++)
            b->ids[((size_t)t * NL + 2) * NK + j] = 0;
    trace_t *t;
    capture_dense d;
    assert_int_equal(build(&f, &t, &d), -1);
    assert_null(t);
    assert_non_null(strstr(err, "layer 2 is 0 for every token of request 'b' (line 2) but "
                                "routes the tokens of 1 other answers"));
    assert_null(d.layers);
    unmake(&f);
}

/* top-1: a 0 is a pick of expert 0, never a dense layer (as the proxy
 * decides, so that capture and proxy size signatures alike) */
static void test_top1_keeps_zero_layers(void **state)
{
    (void)state;
    fix f;
    make(&f, 1u << 1);
    for (int i = 0; i < 3; i++) {
        routed_t *r = &f.jobs[i].routes;
        int64_t rows = r->prompt_tokens + r->decode_rows;
        for (int64_t t = 0; t < rows; t++)   /* keep the first id of each layer: k = 1 */
            for (int l = 0; l < NL; l++)
                r->ids[(size_t)t * NL + l] = r->ids[((size_t)t * NL + l) * NK];
        r->k = 1;
    }
    trace_t *t;
    capture_dense d;
    assert_int_equal(build(&f, &t, &d), 0);
    assert_int_equal(d.n, 0);
    assert_int_equal(t->L, NL);
    assert_int_equal(t->k, 1);
    int P = (int)f.jobs[0].routes.prompt_tokens;
    assert_int_equal(t->prefill_counts[(size_t)1 * NE + 0], P);   /* layer 1: all on expert 0 */
    trace_free(t);
    capture_dense_free(&d);
    unmake(&f);
}

static void test_all_zero_refused(void **state)
{
    (void)state;
    fix f;
    make(&f, (1u << NL) - 1);
    trace_t *t;
    capture_dense d;
    assert_int_equal(build(&f, &t, &d), -1);
    assert_non_null(strstr(err, "every id of all 5 layers is 0 in every answer"));
    assert_null(t);
    unmake(&f);
}

/* the failed job's rows do not count: only answered ones decide */
static void test_failed_jobs_ignored(void **state)
{
    (void)state;
    fix f;
    make(&f, 1u << 4);
    f.jobs[2].routes.ids[4] = 5;   /* the failed job's layer 4 (token 0) has an id */
    trace_t *t;
    capture_dense d;
    assert_int_equal(build(&f, &t, &d), 0);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.layers[0], 4);
    trace_free(t);
    capture_dense_free(&d);
    unmake(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_layers_leave),
        cmocka_unit_test(test_no_dense_layer),
        cmocka_unit_test(test_partly_zero_refused),
        cmocka_unit_test(test_top1_keeps_zero_layers),
        cmocka_unit_test(test_all_zero_refused),
        cmocka_unit_test(test_failed_jobs_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
