/* test_trace.c - the eldr-trace v1 file (src/core/trace_io.c, trace_validate.c,
 * h5util.c): round trips of every dataset, row-range loads against slices of
 * full loads, one test per validation failure (corrupt files are made by
 * saving a good trace and editing it with the raw HDF5 API), atomic saves,
 * and the real gpt-oss-20b trace when it is present. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "h5util.h"
#include "trace.h"
#include "util_tracefix.h"

#define REAL_DATA "../shared/data/gptoss20b-routing.h5"

static char dir[64];
static char path[128];  /* the file each test works on */

static int setup(void **state)
{
    (void)state;
    return tracefix_tmpdir("trace", dir, sizeof dir, path, sizeof path);
}

static int teardown(void **state)
{
    (void)state;
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[sizeof dir + sizeof e->d_name + 2];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
    return 0;
}

/* Files in the test directory whose name contains ".tmp." */
static int count_temps(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

static void expect_same(const trace_t *a, const trace_t *b)
{
    char why[256];
    if (tracefix_diff(a, b, why, sizeof why)) {
        print_error("traces differ: %s\n", why);
        fail();
    }
}

/* Save the standard fixture to `path`. */
static trace_t *save_fixture(int64_t n, int L, int E, int k)
{
    char err[ELDR_ERRLEN];
    trace_t *t = tracefix_make(n, L, E, k, 42);
    assert_non_null(t);
    if (trace_save(t, path, err, sizeof err)) {
        print_error("save: %s\n", err);
        fail();
    }
    return t;
}

/* Loading `path` must fail, leave *out NULL, and say `want`. */
static void expect_load_error(const char *want)
{
    char err[ELDR_ERRLEN] = "";
    trace_t *t = (trace_t *)&err; /* any non-NULL value */
    int rc = trace_load(path, &t, err, sizeof err);
    if (rc != -1 || t != NULL || !strstr(err, want)) {
        print_error("rc %d, out %p, err '%s', wanted '%s'\n", rc, (void *)t, err, want);
        fail();
    }
    assert_null(strchr(err, '\n'));
}

/* --- raw HDF5 editing ------------------------------------------------ */

static hid_t open_rw(void)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    return f;
}

static void set_int_attr(hid_t f, const char *name, int64_t v)
{
    char err[ELDR_ERRLEN];
    assert_int_equal(h5u_write_int_attr(f, name, v, "test", err, sizeof err), 0);
}

/* Overwrite one element of a dataset (coords of its rank). */
static void poke(hid_t f, const char *name, hid_t mt, const hsize_t *coords, const void *v)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t fs = H5Dget_space(d);
    hsize_t one[H5U_MAXRANK] = {1, 1, 1, 1};
    hid_t ms = H5Screate_simple(1, one, NULL);
    assert_true(H5Sselect_hyperslab(fs, H5S_SELECT_SET, coords, NULL, one, NULL) >= 0);
    assert_true(H5Dwrite(d, mt, ms, fs, H5P_DEFAULT, v) >= 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
}

/* Replace a dataset by a contiguous one of the given type and shape. */
static void replace(hid_t f, const char *name, hid_t type, int rank, const hsize_t *dims,
                    const void *data)
{
    if (H5Lexists(f, name, H5P_DEFAULT) > 0)
        assert_true(H5Ldelete(f, name, H5P_DEFAULT) >= 0);
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(d >= 0);
    if (data)
        assert_true(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(d);
    H5Sclose(sp);
}

static size_t dataset_type_size(const char *name)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t t = H5Dget_type(d);
    size_t s = H5Tget_size(t);
    H5Tclose(t);
    H5Dclose(d);
    H5Fclose(f);
    return s;
}

/* --- round trips ----------------------------------------------------- */

static void test_round_trip_every_dataset(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = save_fixture(60, 3, 8, 2), *u = NULL;
    assert_int_equal(trace_load(path, &u, err, sizeof err), 0);
    expect_same(t, u);
    /* E <= 256: expert ids stored as one byte */
    assert_int_equal(dataset_type_size("tokens/decode_experts"), 1);
    assert_int_equal(dataset_type_size("tokens/prefill_experts"), 1);
    assert_int_equal(count_temps(), 0);
    trace_free(t);
    trace_free(u);
}

static void test_round_trip_uint16_ids(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = save_fixture(12, 2, 300, 3), *u = NULL;
    assert_int_equal(dataset_type_size("tokens/decode_experts"), 2);
    assert_int_equal(trace_load(path, &u, err, sizeof err), 0);
    expect_same(t, u);
    /* some id really needs the second byte */
    int big = 0;
    for (int64_t i = 0; i < t->decode_offsets[t->n] * t->L * t->k; i++)
        big |= t->decode_experts[i] > 255;
    assert_true(big);
    trace_free(t);
    trace_free(u);
}

static void test_round_trip_required_only_and_empty(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = trace_new(3, 2, 4, 2, err, sizeof err), *u = NULL;
    assert_non_null(t);
    for (int64_t r = 0; r < 3; r++) {
        t->prompt_tokens[r] = (int32_t)r + 1;
        for (int l = 0; l < 2; l++) {
            TRACE_AT(t->prefill_counts, t, r, l, 0) = (uint16_t)(r + 1);
            TRACE_AT(t->prefill_counts, t, r, l, 3) = (uint16_t)(r + 1);
        }
    }
    assert_int_equal(trace_save(t, path, err, sizeof err), 0);
    assert_int_equal(trace_load(path, &u, err, sizeof err), 0);
    expect_same(t, u);
    trace_free(t);
    trace_free(u);

    t = trace_new(0, 4, 16, 2, err, sizeof err);
    assert_int_equal(trace_save(t, path, err, sizeof err), 0);
    assert_int_equal(trace_load(path, &u, err, sizeof err), 0);
    assert_int_equal(u->n, 0);
    assert_int_equal(u->E, 16);
    trace_free(t);
    trace_free(u);
}

static void test_read_header(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = save_fixture(20, 3, 8, 2);
    trace_header_t h;
    assert_int_equal(trace_read_header(path, &h, err, sizeof err), 0);
    assert_string_equal(h.model, t->model);
    assert_int_equal(h.n, 20);
    assert_int_equal(h.L, 3);
    assert_int_equal(h.E, 8);
    assert_int_equal(h.k, 2);
    assert_int_equal(h.n_labels, 3);
    unsigned all = TRACE_HAS_DECODE | TRACE_HAS_GATE_PROB | TRACE_HAS_GATE_LOGIT |
                   TRACE_HAS_LABEL | TRACE_HAS_ARRIVAL | TRACE_HAS_REQUEST_ID;
    assert_int_equal(h.has, all);
    assert_true(h.has_tokens_prefill && h.has_tokens_decode && h.has_decode_probs && h.has_blocks);
    assert_int_equal(h.t_prefill, t->prefill_offsets[20]);
    assert_int_equal(h.t_decode, t->decode_offsets[20]);
    assert_int_equal(h.n_blocks, t->block_offsets[20]);
    trace_free(t);
}

/* --- row ranges ------------------------------------------------------ */

static void expect_rows_equal_slice(const trace_t *full, int64_t r0, int64_t r1)
{
    char err[ELDR_ERRLEN];
    int64_t rows[256];
    for (int64_t i = r0; i < r1; i++)
        rows[i - r0] = i;
    trace_t *want = trace_select(full, rows, r1 - r0, err, sizeof err), *got = NULL;
    assert_non_null(want);
    if (trace_load_rows(path, r0, r1, &got, err, sizeof err)) {
        print_error("rows [%lld, %lld): %s\n", (long long)r0, (long long)r1, err);
        fail();
    }
    expect_same(want, got);
    trace_free(want);
    trace_free(got);
}

static void test_row_range_equals_slice(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = save_fixture(200, 3, 8, 2), *u = NULL;
    expect_rows_equal_slice(t, 7, 23);
    expect_rows_equal_slice(t, 0, 1);
    expect_rows_equal_slice(t, 150, 200);  /* across chunk boundaries, to the end */
    expect_rows_equal_slice(t, 0, 200);
    expect_rows_equal_slice(t, 40, 40);    /* empty range */
    assert_int_equal(trace_load_rows(path, 5, 201, &u, err, sizeof err), -1);
    assert_null(u);
    assert_non_null(strstr(err, "outside"));
    assert_int_equal(trace_load_rows(path, 9, 3, &u, err, sizeof err), -1);
    assert_int_equal(trace_load_rows(path, -1, 3, &u, err, sizeof err), -1);
    trace_free(t);
}

typedef struct progress_log {
    double frac[64];
    int n;
} progress_log;

static void log_progress(void *ctx, double frac)
{
    progress_log *p = ctx;
    if (p->n < 64)
        p->frac[p->n] = frac;
    p->n++;
}

/* trace_load_progress: the same trace as trace_load, fractions that
 * ascend to exactly 1; a trace of more than 16 MB per matrix is read in
 * several slabs (uint16 rows of 2 x 2048 cells: 2048 rows a slab). */
static void test_load_progress(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    int sizes[][4] = {{60, 3, 8, 2}, {2100, 2, 2048, 2}};
    for (int z = 0; z < 2; z++) {
        trace_t *t = save_fixture(sizes[z][0], sizes[z][1], sizes[z][2], sizes[z][3]), *u = NULL;
        progress_log p = {{0}, 0};
        assert_int_equal(trace_load_progress(path, log_progress, &p, &u, err, sizeof err), 0);
        expect_same(t, u);
        /* small: one slab per matrix (4 of them), then 1.0; big: 2048 rows a
         * slab of the two uint16 matrices, 1024 of the two float ones */
        assert_int_equal(p.n, z == 0 ? 5 : 2 * 2 + 2 * 3 + 1);
        for (int i = 1; i < p.n; i++)
            assert_true(p.frac[i] > p.frac[i - 1]);
        assert_true(p.frac[p.n - 1] == 1.0);
        assert_true(p.frac[0] > 0);
        trace_free(t);
        trace_free(u);
    }
    /* a failed load reports no completion */
    progress_log p = {{0}, 0};
    trace_t *u = NULL;
    assert_int_equal(trace_load_progress("/nonexistent/x.h5", log_progress, &p, &u, err,
                                         sizeof err), -1);
    assert_null(u);
    assert_int_equal(p.n, 0);
}

/* A row-range load names rows as numbered in the file. */
static void test_row_range_reports_file_rows(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_free(save_fixture(40, 3, 8, 2));
    hid_t f = open_rw();
    int32_t bad = 7;
    hsize_t at[1] = {25};
    poke(f, "label", H5T_NATIVE_INT32, at, &bad);
    H5Fclose(f);
    trace_t *u = NULL;
    assert_int_equal(trace_load_rows(path, 0, 20, &u, err, sizeof err), 0); /* row 25 not read */
    trace_free(u);
    assert_int_equal(trace_load_rows(path, 20, 30, &u, err, sizeof err), -1);
    assert_non_null(strstr(err, "label row 25: 7 outside label_names [0, 3)"));
}

/* --- validation failures, one each ----------------------------------- */

static void test_not_hdf5(void **state)
{
    (void)state;
    FILE *fp = fopen(path, "w");
    fputs("request,expert\n1,2\n", fp);
    fclose(fp);
    expect_load_error("not an HDF5 file");
    unlink(path);
    expect_load_error("No such file or directory");
}

static void test_truncated(void **state)
{
    (void)state;
    trace_free(save_fixture(100, 3, 8, 2));
    FILE *fp = fopen(path, "r");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fclose(fp);
    assert_int_equal(truncate(path, size / 2), 0);
    expect_load_error("truncated");
}

static void test_format_wrong_or_missing(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_free(save_fixture(10, 3, 8, 2));
    hid_t f = open_rw();
    assert_int_equal(h5u_write_str_attr(f, "format", "eldr-model", "t", err, sizeof err), 0);
    H5Fclose(f);
    expect_load_error("format is 'eldr-model', expected 'eldr-trace'");
    f = open_rw();
    H5Adelete(f, "format");
    H5Fclose(f);
    expect_load_error("no 'format' attribute");
}

static void test_version_wrong(void **state)
{
    (void)state;
    trace_free(save_fixture(10, 3, 8, 2));
    hid_t f = open_rw();
    set_int_attr(f, "version", 2);
    H5Fclose(f);
    expect_load_error("version 2 not supported");
    f = open_rw();
    H5Adelete(f, "version");
    H5Fclose(f);
    expect_load_error("no 'version' attribute");
}

static void test_required_dataset_missing(void **state)
{
    (void)state;
    trace_free(save_fixture(10, 3, 8, 2));
    hid_t f = open_rw();
    H5Ldelete(f, "prompt_tokens", H5P_DEFAULT);
    H5Fclose(f);
    expect_load_error("dataset prompt_tokens missing");
    trace_free(save_fixture(10, 3, 8, 2));
    f = open_rw();
    H5Ldelete(f, "prefill_counts", H5P_DEFAULT);
    H5Fclose(f);
    expect_load_error("dataset prefill_counts missing");
}

static void test_geometry_attribute_mismatch(void **state)
{
    (void)state;
    trace_free(save_fixture(10, 3, 8, 2));
    hid_t f = open_rw();
    set_int_attr(f, "experts", 9);
    H5Fclose(f);
    expect_load_error("dataset prefill_counts has shape [10, 3, 8], expected [10, 3, 9]");
    f = open_rw();
    set_int_attr(f, "experts", 8);
    set_int_attr(f, "layers", 0);
    H5Fclose(f);
    expect_load_error("attribute 'layers' = 0 outside");
}

static void test_per_request_length(void **state)
{
    (void)state;
    trace_free(save_fixture(10, 3, 8, 2));
    hid_t f = open_rw();
    int32_t v[9] = {0};
    hsize_t d[1] = {9};
    replace(f, "decode_tokens", H5T_NATIVE_INT32, 1, d, v);
    H5Fclose(f);
    expect_load_error("dataset decode_tokens has shape [9], expected [10]");
}

static void test_wrong_type(void **state)
{
    (void)state;
    trace_free(save_fixture(4, 3, 8, 2));
    hid_t f = open_rw();
    hsize_t d[3] = {4, 3, 8};
    replace(f, "prefill_counts", H5T_NATIVE_DOUBLE, 3, d, NULL);
    H5Fclose(f);
    expect_load_error("dataset prefill_counts has type float64, which does not fit uint16");
}

static void test_conservation_broken(void **state)
{
    (void)state;
    trace_t *t = save_fixture(20, 3, 8, 2);
    hid_t f = open_rw();
    hsize_t at[3] = {12, 1, 5};
    uint16_t v = (uint16_t)(TRACE_AT(t->prefill_counts, t, 12, 1, 5) + 1);
    poke(f, "prefill_counts", H5T_NATIVE_UINT16, at, &v);
    H5Fclose(f);
    char want[128];
    snprintf(want, sizeof want,
             "prefill_counts row 12 layer 1: counts sum to %d, expected prompt_tokens*top_k = %d",
             t->prompt_tokens[12] * 2 + 1, t->prompt_tokens[12] * 2);
    expect_load_error(want);
    trace_free(t);
}

static void test_expert_above_tokens(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    /* 2 tokens, top-2: [4 0 0 0] sums right (4) but one expert has 4 > 2 */
    trace_t *t = trace_new(2, 1, 4, 2, err, sizeof err);
    t->prompt_tokens[0] = t->prompt_tokens[1] = 2;
    TRACE_AT(t->prefill_counts, t, 0, 0, 0) = 2;
    TRACE_AT(t->prefill_counts, t, 0, 0, 1) = 2;
    TRACE_AT(t->prefill_counts, t, 1, 0, 0) = 2;
    TRACE_AT(t->prefill_counts, t, 1, 0, 2) = 2;
    assert_int_equal(trace_save(t, path, err, sizeof err), 0);
    hid_t f = open_rw();
    uint16_t four = 4, zero = 0;
    hsize_t a[3] = {1, 0, 0}, b[3] = {1, 0, 2};
    poke(f, "prefill_counts", H5T_NATIVE_UINT16, a, &four);
    poke(f, "prefill_counts", H5T_NATIVE_UINT16, b, &zero);
    H5Fclose(f);
    expect_load_error("prefill_counts row 1 layer 0 expert 0: 4 counts, more than the 2 "
                      "prompt_tokens");
    trace_free(t);
}

static void test_gate_not_finite(void **state)
{
    (void)state;
    trace_free(save_fixture(10, 3, 8, 2));
    hid_t f = open_rw();
    float nan = NAN, inf = -INFINITY;
    hsize_t at[3] = {5, 2, 3};
    poke(f, "gate_prob", H5T_NATIVE_FLOAT, at, &nan);
    H5Fclose(f);
    expect_load_error("gate_prob row 5 layer 2 expert 3: NaN");
    trace_free(save_fixture(10, 3, 8, 2));
    f = open_rw();
    poke(f, "gate_logit", H5T_NATIVE_FLOAT, at, &inf);
    H5Fclose(f);
    expect_load_error("gate_logit row 5 layer 2 expert 3: infinite");
}

static void test_label_out_of_range(void **state)
{
    (void)state;
    trace_free(save_fixture(10, 3, 8, 2));
    hid_t f = open_rw();
    int32_t nine = 9;
    hsize_t at[1] = {7};
    poke(f, "label", H5T_NATIVE_INT32, at, &nine);
    H5Fclose(f);
    expect_load_error("label row 7: 9 outside label_names [0, 3)");
}

/* prefill_unrouted_tokens (prompt rows without routing, vLLM's prefix
 * cache): saved and loaded whole, by row range and through trace_select;
 * a negative count is refused; a file without it (every older trace)
 * loads with none. */
static void test_prefill_unrouted(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = save_fixture(10, 3, 8, 2), *u = NULL;
    assert_int_equal(trace_load(path, &u, err, sizeof err), 0);
    assert_null(u->prefill_unrouted);
    trace_free(u);
    assert_int_equal(trace_alloc_optional(t, TRACE_HAS_UNROUTED, err, sizeof err), 0);
    for (int64_t r = 0; r < t->n; r++)
        t->prefill_unrouted[r] = (int32_t)(r % 3 == 1 ? 16 * r : 0);
    assert_int_equal(trace_save(t, path, err, sizeof err), 0);
    assert_int_equal(trace_load(path, &u, err, sizeof err), 0);
    assert_non_null(u->prefill_unrouted);
    for (int64_t r = 0; r < t->n; r++)
        assert_int_equal(u->prefill_unrouted[r], t->prefill_unrouted[r]);
    trace_free(u);
    assert_int_equal(trace_load_rows(path, 4, 8, &u, err, sizeof err), 0);
    assert_int_equal(u->prefill_unrouted[0], 64);
    assert_int_equal(u->prefill_unrouted[3], 112);
    trace_free(u);
    int64_t rows[2] = {7, 1};
    u = trace_select(t, rows, 2, err, sizeof err);
    assert_non_null(u);
    assert_int_equal(u->prefill_unrouted[0], 112);
    assert_int_equal(u->prefill_unrouted[1], 16);
    trace_free(u);
    trace_free(t);
    hid_t f = open_rw();
    int32_t neg = -3;
    hsize_t at[1] = {5};
    poke(f, "prefill_unrouted_tokens", H5T_NATIVE_INT32, at, &neg);
    H5Fclose(f);
    expect_load_error("prefill_unrouted_tokens row 5: -3, must be >= 0");
}

static void test_token_ids_bad(void **state)
{
    (void)state;
    trace_t *t = save_fixture(10, 3, 8, 2);
    hid_t f = open_rw();
    /* the second pick of token 0, layer 1 repeats the first */
    uint16_t first = t->decode_experts[1 * 2 + 0];
    hsize_t at[3] = {0, 1, 1};
    poke(f, "tokens/decode_experts", H5T_NATIVE_UINT16, at, &first);
    H5Fclose(f);
    expect_load_error("picked twice");
    trace_free(t);
    t = save_fixture(10, 3, 8, 2);
    f = open_rw();
    uint16_t big = 8;
    poke(f, "tokens/prefill_experts", H5T_NATIVE_UINT16, at, &big);
    H5Fclose(f);
    expect_load_error("expert 8 outside [0, 8)");
    trace_free(t);
}

static void test_offsets_bad(void **state)
{
    (void)state;
    trace_t *t = save_fixture(10, 3, 8, 2);
    hid_t f = open_rw();
    int64_t huge = 1000000;
    hsize_t at[1] = {4};
    poke(f, "tokens/decode_offsets", H5T_NATIVE_INT64, at, &huge);
    H5Fclose(f);
    expect_load_error("tokens/decode_offsets row 4");
    trace_free(t);
}

static void test_unpaired_dataset(void **state)
{
    (void)state;
    trace_free(save_fixture(10, 3, 8, 2));
    hid_t f = open_rw();
    H5Ldelete(f, "decode_tokens", H5P_DEFAULT);
    H5Fclose(f);
    expect_load_error("dataset decode_counts present without decode_tokens");
}

/* label_names is capped at 65,536 names (like the importers): the memory
 * check alone would let a file claim 2^31 - 1 of them on a big machine.
 * n names "l0", "l1", ... written as a vlen string dataset. */
static char **label_name_list(int n)
{
    char **names = calloc((size_t)n, sizeof *names);
    assert_non_null(names);
    for (int i = 0; i < n; i++) {
        names[i] = malloc(16);
        assert_non_null(names[i]);
        snprintf(names[i], 16, "l%d", i);
    }
    return names;
}

static void free_name_list(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static void write_label_names(int n)
{
    char **names = label_name_list(n);
    hid_t f = open_rw(), vstr = H5Tcopy(H5T_C_S1);
    assert_true(H5Tset_size(vstr, H5T_VARIABLE) >= 0);
    hsize_t d[1] = {(hsize_t)n};
    replace(f, "label_names", vstr, 1, d, names);
    H5Tclose(vstr);
    H5Fclose(f);
    free_name_list(names, n);
}

static void test_label_names_cap(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN], want[256];
    trace_t *t = save_fixture(10, 3, 8, 2), *u = NULL;
    /* 65,536 names: the limit itself loads, every name intact */
    write_label_names(65536);
    assert_int_equal(trace_load(path, &u, err, sizeof err), 0);
    assert_int_equal(u->n_labels, 65536);
    assert_string_equal(u->label_names[65535], "l65535");
    trace_free(u);
    /* one more: refused, naming the file and the dataset */
    write_label_names(65537);
    snprintf(want, sizeof want, "%s: dataset label_names has 65537 names, more than the limit "
             "of 65536", path);
    expect_load_error(want);
    /* and eldr never writes such a file */
    char **names = label_name_list(65537), p[160];
    assert_int_equal(trace_set_label_names(t, 65537, (const char *const *)names, err, sizeof err),
                     0);
    free_name_list(names, 65537);
    snprintf(p, sizeof p, "%s/many.h5", dir);
    assert_int_equal(trace_save(t, p, err, sizeof err), -1);
    assert_non_null(strstr(err, "65537 label names, more than the limit of 65536"));
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(count_temps(), 0);
    trace_free(t);
}

/* A header claiming 10^9 requests at L=48, E=128 (12 TB of counts) is
 * refused from its shape alone: fast, and before any allocation. */
static void test_terabyte_header_refused(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    h5u_write_str_attr(f, "format", "eldr-trace", "t", err, sizeof err);
    set_int_attr(f, "version", 1);
    set_int_attr(f, "layers", 48);
    set_int_attr(f, "experts", 128);
    set_int_attr(f, "top_k", 8);
    /* chunked datasets allocate nothing until written: the file is tiny */
    hsize_t cube[3] = {1000000000ull, 48, 128}, chunk[3] = {1, 48, 128};
    hsize_t vec[1] = {1000000000ull}, vchunk[1] = {4096};
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), sp = H5Screate_simple(3, cube, NULL);
    H5Pset_chunk(dcpl, 3, chunk);
    H5Dclose(H5Dcreate2(f, "prefill_counts", H5T_STD_U16LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5Sclose(sp);
    H5Pset_chunk(dcpl, 1, vchunk);
    sp = H5Screate_simple(1, vec, NULL);
    H5Dclose(H5Dcreate2(f, "prompt_tokens", H5T_STD_I32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Fclose(f);

    trace_header_t h;
    assert_int_equal(trace_read_header(path, &h, err, sizeof err), 0);
    assert_int_equal(h.n, 1000000000ll);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    expect_load_error("more than this machine's");
    clock_gettime(CLOCK_MONOTONIC, &b);
    double secs = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    assert_true(secs < 0.5);
    /* the same file's first rows load: a row range needs only its rows */
    trace_t *u = NULL;
    assert_int_equal(trace_load_rows(path, 0, 3, &u, err, sizeof err), 0);
    assert_int_equal(u->n, 3);
    trace_free(u);
}

static void test_unknown_datasets_ignored(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = save_fixture(10, 3, 8, 2), *u = NULL;
    hid_t f = open_rw();
    uint8_t flags[10] = {1, 0, 1};
    hsize_t d[1] = {10}, d2[1] = {3};
    replace(f, "finished", H5T_NATIVE_UINT8, 1, d, flags);
    replace(f, "subject", H5T_NATIVE_UINT8, 1, d2, flags);
    H5Fclose(f);
    assert_int_equal(trace_load(path, &u, err, sizeof err), 0);
    expect_same(t, u);
    trace_free(t);
    trace_free(u);
}

/* --- atomic save ----------------------------------------------------- */

static void test_save_to_missing_directory(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN], p[160];
    trace_t *t = tracefix_make(5, 2, 4, 2, 1);
    snprintf(p, sizeof p, "%s/no/such/dir/t.h5", dir);
    assert_int_equal(trace_save(t, p, err, sizeof err), -1);
    assert_non_null(strstr(err, "No such file or directory"));
    assert_int_equal(access(p, F_OK), -1);
    trace_free(t);
}

static void expect_old_file(const trace_t *old)
{
    char err[ELDR_ERRLEN];
    trace_t *u = NULL;
    assert_int_equal(trace_load(path, &u, err, sizeof err), 0);
    expect_same(old, u);
    trace_free(u);
    assert_int_equal(count_temps(), 0);
}

/* A write that fails half way (file size limit: the disk-full case)
 * removes its temporary and leaves the old file as it was. */
static void test_failed_save_keeps_old_file(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *old = save_fixture(10, 3, 8, 2);
    trace_t *big = tracefix_make(3000, 8, 64, 4, 7);
    assert_non_null(big);

    struct rlimit saved, small;
    getrlimit(RLIMIT_FSIZE, &saved);
    small = saved;
    small.rlim_cur = 64 * 1024;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    int rc = trace_save(big, path, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, prev);
    assert_int_equal(rc, -1);
    print_message("save under a 64 KiB file size limit: %s\n", err);
    assert_non_null(strstr(err, "write failed: File too large"));
    expect_old_file(old);

    /* an invalid trace is refused before anything is written */
    TRACE_AT(big->prefill_counts, big, 3, 0, 0) += 1;
    assert_int_equal(trace_save(big, path, err, sizeof err), -1);
    assert_non_null(strstr(err, "(not saved): prefill_counts row 3 layer 0"));
    expect_old_file(old);
    trace_free(old);
    trace_free(big);
}

/* --- the real gpt-oss-20b trace -------------------------------------- */

/* trace_select_some with TRACE_DROP_COUNTS: an index of the rows, their
 * vectors and nothing else (the dashboard's evaluation rows read in
 * place). */
static void test_select_index(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    trace_t *t = tracefix_make(50, 3, 8, 2, 4);
    assert_non_null(t);
    int64_t rows[] = {1, 7, 20, 49};
    trace_t *x = trace_select_some(t, rows, 4, TRACE_DROP_COUNTS, err, sizeof err);
    assert_non_null(x);
    assert_int_equal(x->n, 4);
    assert_null(x->prefill_counts);
    assert_null(x->decode_counts);
    assert_null(x->decode_experts);
    assert_null(x->decode_offsets);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(x->prompt_tokens[i], t->prompt_tokens[rows[i]]);
        assert_int_equal(x->decode_tokens[i], t->decode_tokens[rows[i]]);
        if (t->label)
            assert_int_equal(x->label[i], t->label[rows[i]]);
        if (t->arrival_s)
            assert_true(x->arrival_s[i] == t->arrival_s[rows[i]]);
    }
    assert_int_equal(trace_validate_index(x, "index", err, sizeof err), 0);
    trace_free(x);
    trace_free(t);
}

static void test_real_data(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN];
    if (access(REAL_DATA, R_OK) != 0)
        skip();
    trace_t *t = NULL;
    if (trace_load(REAL_DATA, &t, err, sizeof err)) {
        print_error("%s\n", err);
        fail();
    }
    assert_int_equal(t->n, 449);
    assert_int_equal(t->L, 24);
    assert_int_equal(t->E, 32);
    assert_int_equal(t->k, 4);
    assert_string_equal(t->model, "gpt-oss-20b");
    assert_int_equal(t->n_labels, 6);
    assert_string_equal(t->label_names[0], "gpqa");
    assert_non_null(t->decode_counts);
    assert_non_null(t->decode_probs);
    /* conservation, recounted here rather than trusted to the validator */
    int64_t prefill_total = 0, decode_total = 0;
    for (int64_t r = 0; r < t->n; r++) {
        prefill_total += t->prompt_tokens[r];
        decode_total += t->decode_tokens[r];
        for (int l = 0; l < t->L; l++) {
            int64_t sp = 0, sd = 0;
            for (int e = 0; e < t->E; e++) {
                sp += TRACE_AT(t->prefill_counts, t, r, l, e);
                sd += TRACE_AT(t->decode_counts, t, r, l, e);
            }
            assert_int_equal(sp, (int64_t)t->prompt_tokens[r] * 4);
            assert_int_equal(sd, (int64_t)t->decode_tokens[r] * 4);
        }
    }
    assert_int_equal(t->prefill_offsets[t->n], prefill_total);
    assert_int_equal(t->decode_offsets[t->n], decode_total);
    assert_int_equal(prefill_total, 449 * 32);

    /* a row range of the real file equals the slice of the full load */
    int64_t rows[50];
    for (int i = 0; i < 50; i++)
        rows[i] = 300 + i;
    trace_t *want = trace_select(t, rows, 50, err, sizeof err), *got = NULL;
    assert_int_equal(trace_load_rows(REAL_DATA, 300, 350, &got, err, sizeof err), 0);
    expect_same(want, got);
    trace_free(want);
    trace_free(got);
    trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_dataset),
        cmocka_unit_test(test_round_trip_uint16_ids),
        cmocka_unit_test(test_prefill_unrouted),
        cmocka_unit_test(test_round_trip_required_only_and_empty),
        cmocka_unit_test(test_read_header),
        cmocka_unit_test(test_row_range_equals_slice),
        cmocka_unit_test(test_load_progress),
        cmocka_unit_test(test_row_range_reports_file_rows),
        cmocka_unit_test(test_not_hdf5),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_format_wrong_or_missing),
        cmocka_unit_test(test_version_wrong),
        cmocka_unit_test(test_required_dataset_missing),
        cmocka_unit_test(test_geometry_attribute_mismatch),
        cmocka_unit_test(test_per_request_length),
        cmocka_unit_test(test_wrong_type),
        cmocka_unit_test(test_conservation_broken),
        cmocka_unit_test(test_expert_above_tokens),
        cmocka_unit_test(test_gate_not_finite),
        cmocka_unit_test(test_label_out_of_range),
        cmocka_unit_test(test_label_names_cap),
        cmocka_unit_test(test_token_ids_bad),
        cmocka_unit_test(test_offsets_bad),
        cmocka_unit_test(test_unpaired_dataset),
        cmocka_unit_test(test_terabyte_header_refused),
        cmocka_unit_test(test_unknown_datasets_ignored),
        cmocka_unit_test(test_save_to_missing_directory),
        cmocka_unit_test(test_failed_save_keeps_old_file),
        cmocka_unit_test(test_select_index),
        cmocka_unit_test(test_real_data),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
