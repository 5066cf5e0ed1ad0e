/* test_regress.c - regression tests for what fuzzing found, and a replay
 * of every seed and regression input of the core harnesses.
 *
 * The harnesses of tests/fuzz/ are included here with FUZZ_NO_MAIN, so
 * their entry points run under the ordinary (gcc, ASan) build on every
 * file of tests/fuzz/corpus/<harness>/: an input that once crashed, added
 * there, stays fixed. The router harnesses have their own replay
 * (test_router_regress.c), which links the router library. */
#include <dirent.h>
#include <sys/resource.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "util_replay.h"

#define FUZZ_NO_MAIN
#include "../fuzz/fuzz_centroid_json.c"
#include "../fuzz/fuzz_jsonl.c"
#include "../fuzz/fuzz_npy.c"
#include "../fuzz/fuzz_npz.c"
#include "../fuzz/fuzz_trace_h5.c"

static void test_replay_npy(void **state)
{
    (void)state;
    corpus_replay("npy", fuzz_npy_one);
}

static void test_replay_npz(void **state)
{
    (void)state;
    corpus_replay("npz", fuzz_npz_one);
}

static void test_replay_jsonl(void **state)
{
    (void)state;
    corpus_replay("jsonl", fuzz_jsonl_one);
}

static void test_replay_centroid_json(void **state)
{
    (void)state;
    corpus_replay("centroid_json", fuzz_centroid_json_one);
}

static void test_replay_trace_h5(void **state)
{
    (void)state;
    corpus_replay("trace_h5", fuzz_trace_h5_one);
}

/* The structured generator with no faults writes a valid file: it must
 * load (a refusal would be the loader rejecting good input). All-zero
 * choices and a few fixed ones. */
static void test_trace_h5_valid_files_load(void **state)
{
    (void)state;
    for (int seed = 0; seed < 64; seed++) {
        uint8_t in[400];
        in[0] = 0; /* no faults */
        for (size_t i = 1; i < sizeof in; i++)
            in[i] = (uint8_t)((seed * 131 + (int)i * 29) ^ (seed << 3));
        fuzz_trace_h5_one(in, sizeof in);
    }
}

/* Found by fuzz_npy: a header key holding a newline was echoed into the
 * message, which then spanned two lines (the CLI promises one). */
static void test_npy_newline_in_key(void **state)
{
    (void)state;
    static const char hdr[] = "{'descr': '<i2', 'fortran_order': False, 'shape': (1,), "
                              "'x\ny': 1, }";
    uint8_t buf[256] = "\x93NUMPY\x01\x00";
    size_t hl = 118; /* header padded so that 10 + hl is a multiple of 64 */
    buf[8] = (uint8_t)hl;
    buf[9] = 0;
    memset(buf + 10, ' ', hl);
    memcpy(buf + 10, hdr, sizeof hdr - 1);
    buf[10 + hl - 1] = '\n';
    npy_array_t a;
    char err[ELDR_ERRLEN] = "";
    assert_int_equal(npy_parse(buf, 10 + hl + 2, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "unexpected key"));
    assert_null(strchr(err, '\n'));
}

/* Found by the terabyte fault test (tests/cli/faults.sh): label_names
 * claiming 2^31 - 1 entries made trace_load allocate a pointer and a
 * string per claimed name (24 GB resident before the kernel killed it).
 * It must be refused by the memory check, naming the dataset. */
static void test_trace_label_names_claim(void **state)
{
    (void)state;
    uint8_t zeros[64] = {0};
    th_in z = {.p = zeros, .n = sizeof zeros};
    th_file f;
    th_valid(&z, &f);
    hsize_t vec[1] = {(hsize_t)f.n}, names[1] = {(hsize_t)INT32_MAX};
    th_add(&f, "label", TH_INT, H5T_STD_I32LE, 1, vec);
    th_ds *d = th_add(&f, "label_names", TH_STR, H5T_C_S1, 1, (hsize_t[1]){1});
    d->dims[0] = names[0];
    d->skip_write = 1;
    size_t n;
    void *img = th_image(&f, &n);
    assert_non_null(img);
    const char *path = fuzz_memfile(img, n);
    free(img);
    assert_non_null(path);
    trace_t *t = (trace_t *)1;
    char err[ELDR_ERRLEN] = "";
    assert_int_equal(trace_load(path, &t, err, sizeof err), -1);
    assert_null(t);
    if (!strstr(err, "label_names") || !strstr(err, "GiB"))
        fail_msg("unexpected message: %s", err);
    th_free(&f);
}

/* Should a claim-of-memory regression come back, it must fail this test,
 * not take the machine down: 8 GB of address space (plain build), or
 * ASan's RSS limit (ASan reserves terabytes of address space). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "hard_rss_limit_mb=4096";
}

int main(void)
{
#ifndef __SANITIZE_ADDRESS__
    struct rlimit cap = {8ul << 30, 8ul << 30};
    setrlimit(RLIMIT_AS, &cap);
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_npy),
        cmocka_unit_test(test_replay_npz),
        cmocka_unit_test(test_replay_jsonl),
        cmocka_unit_test(test_replay_centroid_json),
        cmocka_unit_test(test_replay_trace_h5),
        cmocka_unit_test(test_trace_h5_valid_files_load),
        cmocka_unit_test(test_npy_newline_in_key),
        cmocka_unit_test(test_trace_label_names_claim),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
