/* test_trace_tokens.c - decode token rows read from the file as they are
 * needed (trace_tokens.h): every request's rows equal the whole-array
 * load, in both id widths, for all rows and for a row list; a file that
 * stores 2-byte ids (E > 256) reads the same; bad ranges and rows fail
 * naming them; a file truncated or rewritten under an open reader gives
 * an error naming the request row, never wrong rows, and the simulator
 * stops with it; a reader's open
 * refuses a file without token rows or with other lengths; the simulator
 * given a reader (sim_config.tokens) gives exactly the results of the
 * trace holding its rows, at 1 and 2 policies' threads sharing one
 * reader; the pool cache a budget affords. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "h5util.h"
#include "route.h"
#include "sim.h"
#include "trace.h"
#include "trace_tokens.h"
#include "util_tracefix.h"

static char dir[64];
static char path[128];
static char err[ELDR_ERRLEN];

static int setup(void **state)
{
    (void)state;
    return tracefix_tmpdir("tokens", dir, sizeof dir, path, sizeof path);
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    rmdir(dir);
    return 0;
}

/* A saved fixture, and the same file's rows loaded without token rows
 * (rows NULL: all). */
static trace_t *save(int64_t n, int L, int E, int k, uint64_t seed)
{
    trace_t *t = tracefix_make(n, L, E, k, seed);
    assert_non_null(t);
    if (trace_save(t, path, err, sizeof err))
        fail_msg("save: %s", err);
    return t;
}

static trace_t *load_lean(const int64_t *rows, int64_t n)
{
    trace_load_opts o = {.drop = TRACE_DROP_TOKENS, .rows = rows, .n_rows = n};
    trace_t *t = NULL;
    if (trace_load_some(path, &o, &t, err, sizeof err))
        fail_msg("load: %s", err);
    assert_null(t->decode_experts);
    return t;
}

/* Every row of lean (file row rows[i]) read at both widths equals the
 * whole trace's rows. */
static void expect_rows_equal(const trace_t *whole, const trace_t *lean, const int64_t *rows)
{
    trace_tokens *tt;
    if (trace_tokens_open(path, lean, rows, &tt, err, sizeof err))
        fail_msg("open: %s", err);
    assert_int_equal(trace_tokens_n(tt), lean->n);
    size_t width = (size_t)whole->L * (size_t)whole->k;
    assert_true(trace_tokens_cache_bytes(tt) >= ((size_t)1 << 20));
    for (int64_t i = 0; i < lean->n; i++) {
        int64_t r = rows ? rows[i] : i, a = whole->decode_offsets[r];
        int32_t m = trace_tokens_count(tt, i);
        assert_int_equal(m, whole->decode_offsets[r + 1] - a);
        const uint16_t *want = whole->decode_experts + (size_t)a * width;
        uint16_t *w2 = malloc((size_t)m * width * 2 + 2);
        uint8_t *w1 = malloc((size_t)m * width + 1);
        assert_int_equal(trace_tokens_read(tt, i, trace_decode_row(lean, i), w2, 2, err,
                                           sizeof err), 0);
        assert_memory_equal(w2, want, (size_t)m * width * 2);
        if (whole->E <= 256) {
            assert_int_equal(trace_tokens_read(tt, i, trace_decode_row(lean, i), w1, 1, err,
                                               sizeof err), 0);
            for (size_t q = 0; q < (size_t)m * width; q++)
                assert_int_equal(w1[q], want[q]);
        }
        free(w1);
        free(w2);
    }
    trace_tokens_close(tt);
}

static void test_rows_equal_whole_load(void **state)
{
    (void)state;
    trace_t *t = save(150, 4, 8, 2, 3), *whole = NULL, *lean = load_lean(NULL, 0);
    if (trace_load(path, &whole, err, sizeof err))
        fail_msg("%s", err);
    expect_rows_equal(whole, lean, NULL);
    trace_free(lean);
    int64_t rows[150], n = 0;
    for (int64_t r = 0; r < 150; r++)
        if (r % 5 == 1 || r % 7 == 0)
            rows[n++] = r;
    lean = load_lean(rows, n);
    expect_rows_equal(whole, lean, rows);
    trace_free(lean);
    trace_free(whole);
    trace_free(t);
}

/* E > 256: the file stores 2-byte ids. */
static void test_wide_ids(void **state)
{
    (void)state;
    trace_t *t = save(40, 2, 300, 3, 9), *whole = NULL, *lean = load_lean(NULL, 0);
    if (trace_load(path, &whole, err, sizeof err))
        fail_msg("%s", err);
    trace_tokens *tt;
    assert_int_equal(trace_tokens_open(path, lean, NULL, &tt, err, sizeof err), 0);
    assert_int_equal(trace_tokens_file_bytes(tt), 2);
    trace_tokens_close(tt);
    expect_rows_equal(whole, lean, NULL);
    trace_free(lean);
    trace_free(whole);
    trace_free(t);
}

static void test_bad_ranges(void **state)
{
    (void)state;
    trace_t *t = save(30, 4, 8, 2, 5), *lean = load_lean(NULL, 0);
    trace_tokens *tt;
    assert_int_equal(trace_tokens_open(path, lean, NULL, &tt, err, sizeof err), 0);
    assert_int_equal(trace_tokens_file_bytes(tt), 1);
    int64_t T = t->decode_offsets[t->n];
    uint16_t buf[4096];
    int64_t bad[][2] = {{-1, 2}, {3, 2}, {0, T + 1}, {T, T + 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(trace_tokens_read_range(tt, bad[i][0], bad[i][1], buf, 2, err,
                                                 sizeof err), -1);
        assert_non_null(strstr(err, "outside [0, "));
        assert_non_null(strstr(err, "tokens/decode_experts"));
    }
    assert_int_equal(trace_tokens_read_range(tt, T, T, buf, 2, err, sizeof err), 0);
    assert_int_equal(trace_tokens_read_range(tt, 0, 1, buf, 3, err, sizeof err), -1);
    assert_int_equal(trace_tokens_read(tt, t->n, trace_decode_row(lean, 0), buf, 2, err,
                                       sizeof err), -1);
    assert_non_null(strstr(err, "outside the reader's"));
    trace_tokens_close(tt);
    /* a row list naming a row past the file */
    int64_t rows[30];
    for (int i = 0; i < 30; i++)
        rows[i] = i < 29 ? i : 30;
    assert_int_equal(trace_tokens_open(path, lean, rows, &tt, err, sizeof err), -1);
    assert_null(tt);
    assert_non_null(strstr(err, "file row 30, outside [0, 30)"));
    trace_free(lean);
    trace_free(t);
}

/* The open refuses what it cannot serve, naming the file. */
static void test_open_refusals(void **state)
{
    (void)state;
    trace_t *t = save(20, 4, 8, 2, 6), *lean = load_lean(NULL, 0);
    trace_tokens *tt;
    /* other lengths than the trace in memory says */
    int32_t keep = lean->decode_tokens[4];
    lean->decode_tokens[4] = keep + 1;
    assert_int_equal(trace_tokens_open(path, lean, NULL, &tt, err, sizeof err), -1);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "tokens/decode_offsets row 4:"));
    lean->decode_tokens[4] = keep;
    /* another geometry */
    lean->k = 3;
    assert_int_equal(trace_tokens_open(path, lean, NULL, &tt, err, sizeof err), -1);
    assert_non_null(strstr(err, "top-2, the trace in memory"));
    lean->k = 2;
    /* no token rows in the file */
    tracefix_strip_tokens(t);
    if (trace_save(t, path, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(trace_tokens_open(path, lean, NULL, &tt, err, sizeof err), -1);
    assert_non_null(strstr(err, "no dataset tokens/decode_experts"));
    trace_free(lean);
    trace_free(t);
}

/* Read every row of an open reader; the first failure's message. */
static int read_all(trace_tokens *tt, const trace_t *lean)
{
    uint16_t *buf = malloc(64 * 1024 * sizeof *buf);
    int rc = 0;
    for (int64_t i = 0; i < lean->n && !rc; i++)
        rc = trace_tokens_read(tt, i, trace_decode_row(lean, i), buf, 2, err, sizeof err);
    free(buf);
    return rc;
}

static void test_truncated_or_rewritten(void **state)
{
    (void)state;
    /* big enough that the token rows span many chunks */
    trace_t *t = save(400, 16, 64, 4, 7), *lean = load_lean(NULL, 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    trace_tokens *tt;
    /* truncated under the open reader: past its first chunks */
    assert_int_equal(trace_tokens_open(path, lean, NULL, &tt, err, sizeof err), 0);
    assert_int_equal(truncate(path, st.st_size / 3), 0);
    assert_int_equal(read_all(tt, lean), -1);
    assert_non_null(strstr(err, "tokens/decode_experts"));
    assert_non_null(strstr(err, "request row "));
    trace_tokens_close(tt);
    /* rewritten in place under the open reader: the bytes of every
     * chunk of the token rows, found where the file says they are */
    if (trace_save(t, path, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(trace_tokens_open(path, lean, NULL, &tt, err, sizeof err), 0);
    hid_t f = h5u_open_read(path, err, sizeof err), d = H5Dopen2(f, "tokens/decode_experts",
                                                                  H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    hsize_t chunks = 0;
    assert_true(H5Dget_num_chunks(d, sp, &chunks) >= 0 && chunks >= 1);
    haddr_t addr[64];
    hsize_t size[64];
    assert_true(chunks <= 64);
    for (hsize_t c = 0; c < chunks; c++) {
        hsize_t off[3];
        unsigned mask;
        assert_true(H5Dget_chunk_info(d, sp, c, off, &mask, &addr[c], &size[c]) >= 0);
    }
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    for (hsize_t c = 0; c < chunks; c++) {
        assert_int_equal(fseek(fp, (long)addr[c], SEEK_SET), 0);
        for (hsize_t b = 0; b < size[c]; b++)
            fputc((int)((b * 131 + 7) & 0xff), fp);
    }
    fclose(fp);
    assert_int_equal(read_all(tt, lean), -1);
    assert_non_null(strstr(err, "tokens/decode_experts"));
    assert_non_null(strstr(err, "request row "));
    /* the simulator stops at the first admission that cannot be read,
     * with that line, and frees what it held (ASan) */
    sim_config c;
    sim_config_default(&c);
    c.arrivals = SIM_ARRIVE_POISSON;
    c.rate = 100;
    c.tokens = tt;
    sim_workload w;
    assert_int_equal(sim_workload_init(&w, lean, &c, NULL, err, sizeof err), 0);
    route_policy p;
    sim_result res;
    assert_int_equal(route_policy_init(&p, ROUTE_RR, 2, 1, err, sizeof err), 0);
    assert_int_equal(sim_run(&w, &p, NULL, NULL, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "could not be read"));
    assert_non_null(strstr(err, "of request row "));
    route_policy_free(&p);
    sim_workload_free(&w);
    trace_tokens_close(tt);
    trace_free(lean);
    trace_free(t);
}

/* ---- the simulator with a reader ---- */

static void config(sim_config *c, trace_tokens *tt)
{
    sim_config_default(c);
    c->cost = (cost_model){.t0 = 1e-3, .a = 2e-5, .b = 1e-5, .c = 2e-5, .d = 1e-8};
    c->arrivals = SIM_ARRIVE_POISSON;
    c->rate = 900;
    c->tokens = tt;
}

typedef struct job {
    const sim_workload *w;
    route_kind kind;
    sim_result res;
    int rc;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    route_policy p;
    char e[ELDR_ERRLEN];
    assert_int_equal(route_policy_init(&p, j->kind, 3, 1, e, sizeof e), 0);
    j->rc = sim_run(j->w, &p, NULL, NULL, &j->res, e, sizeof e);
    route_policy_free(&p);
    return NULL;
}

static void same_result(const sim_result *a, const sim_result *b)
{
    assert_int_equal(a->n, b->n);
    assert_memory_equal(a->req, b->req, (size_t)a->n * sizeof *a->req);
    assert_memory_equal(a->heat, b->heat, (size_t)a->K * a->L * a->E * sizeof *a->heat);
    assert_int_equal(a->steps, b->steps);
    assert_int_equal(a->distinct_loaded, b->distinct_loaded);
    assert_true(a->tpot_p99_ms == b->tpot_p99_ms);
    assert_true(a->imbalance == b->imbalance);
}

static void test_sim_with_reader(void **state)
{
    (void)state;
    trace_t *t = save(200, 4, 16, 2, 11), *whole = NULL;
    if (trace_load(path, &whole, err, sizeof err))
        fail_msg("%s", err);
    int64_t rows[200], n = 0;
    for (int64_t r = 0; r < 200; r++)
        if (r % 3)
            rows[n++] = r;
    trace_t *lean = load_lean(rows, n);
    trace_t *held = trace_select(whole, rows, n, err, sizeof err);
    assert_non_null(held);
    trace_tokens *tt;
    assert_int_equal(trace_tokens_open(path, lean, rows, &tt, err, sizeof err), 0);
    sim_config c;
    sim_workload wh, wr;
    config(&c, NULL);
    assert_int_equal(sim_workload_init(&wh, held, &c, NULL, err, sizeof err), 0);
    config(&c, tt);
    assert_int_equal(sim_workload_init(&wr, lean, &c, NULL, err, sizeof err), 0);
    assert_true(wh.recorded && wr.recorded);
    assert_int_equal(wh.id_bytes, 2);
    assert_int_equal(wr.id_bytes, 1);
    assert_int_equal(sim_pools_bytes(&wr), 0);
    /* two policies on two threads sharing the reader, against the held rows */
    route_kind kinds[2] = {ROUTE_RR, ROUTE_P2C};
    job jr[2], jh[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        jr[i] = (job){.w = &wr, .kind = kinds[i]};
        jh[i] = (job){.w = &wh, .kind = kinds[i]};
        assert_int_equal(pthread_create(&th[i], NULL, run_job, &jr[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        run_job(&jh[i]);
        assert_int_equal(jr[i].rc, 0);
        assert_int_equal(jh[i].rc, 0);
        same_result(&jr[i].res, &jh[i].res);
        sim_result_free(&jr[i].res);
        sim_result_free(&jh[i].res);
    }
    /* a reader of other rows is refused */
    sim_workload wx;
    config(&c, tt);
    assert_int_equal(sim_workload_init(&wx, whole, &c, NULL, err, sizeof err), 0);
    assert_null(wx.cfg.tokens);   /* the trace holds its rows: they win */
    sim_workload_free(&wx);
    trace_t *other = trace_select_some(whole, rows, 10, TRACE_DROP_TOKENS, err, sizeof err);
    assert_int_equal(sim_workload_init(&wx, other, &c, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "serves 133 rows, the trace has 10"));
    trace_free(other);
    sim_workload_free(&wh);
    sim_workload_free(&wr);
    trace_tokens_close(tt);
    trace_free(held);
    trace_free(lean);
    trace_free(whole);
    trace_free(t);
}

static void test_pool_cache_within(void **state)
{
    (void)state;
    assert_int_equal(sim_pool_cache_within(1000, 400), 600);
    assert_int_equal(sim_pool_cache_within(1000, 1000), 0);
    assert_int_equal(sim_pool_cache_within(1000, 5000), 0);
    assert_int_equal(sim_pool_cache_within((size_t)64 << 30, 1e6), SIM_DEFAULT_POOL_CACHE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rows_equal_whole_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wide_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_or_rewritten, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_with_reader, setup, teardown),
        cmocka_unit_test(test_pool_cache_within),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
