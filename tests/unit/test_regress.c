/* test_regress.c - regression tests for what fuzzing found, and a replay
 * of every seed and regression input of the core harnesses.
 *
 * The harnesses of tests/fuzz/ are included here with FUZZ_NO_MAIN, so
 * their entry points run under the ordinary (gcc, ASan) build on every
 * file of tests/fuzz/corpus/<harness>/: an input that once crashed, added
 * there, stays fixed. The router harnesses have their own replay
 * (test_router_regress.c), which links the router library. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#define FUZZ_NO_MAIN
#include "../fuzz/fuzz_centroid_json.c"
#include "../fuzz/fuzz_jsonl.c"
#include "../fuzz/fuzz_npy.c"
#include "../fuzz/fuzz_npz.c"
#include "../fuzz/fuzz_trace_h5.c"

/* Run fn on every file of tests/fuzz/corpus/<name>; returns the count. */
static int replay(const char *name, int (*fn)(const uint8_t *, size_t))
{
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", name);
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("%s: cannot open (run from the repository root)", dir);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
        assert_non_null(buf);
        assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
        fclose(f);
        fn(buf, (size_t)len);
        free(buf);
        n++;
    }
    closedir(d);
    assert_true(n > 0);
    return n;
}

static void test_replay_npy(void **state)
{
    (void)state;
    replay("npy", fuzz_npy_one);
}

static void test_replay_npz(void **state)
{
    (void)state;
    replay("npz", fuzz_npz_one);
}

static void test_replay_jsonl(void **state)
{
    (void)state;
    replay("jsonl", fuzz_jsonl_one);
}

static void test_replay_centroid_json(void **state)
{
    (void)state;
    replay("centroid_json", fuzz_centroid_json_one);
}

static void test_replay_trace_h5(void **state)
{
    (void)state;
    replay("trace_h5", fuzz_trace_h5_one);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_npy),
        cmocka_unit_test(test_replay_npz),
        cmocka_unit_test(test_replay_jsonl),
        cmocka_unit_test(test_replay_centroid_json),
        cmocka_unit_test(test_replay_trace_h5),
        cmocka_unit_test(test_trace_h5_valid_files_load),
        cmocka_unit_test(test_npy_newline_in_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
