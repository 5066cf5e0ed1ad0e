/* test_import.c - the importers (src/core/import*.c) and the .npy parser
 * (src/core/npy.c).
 *
 * The fixtures under tests/fixtures/import/ come from an independent
 * writer (numpy, tests/fixtures/make_import_fixtures.py); expected.json
 * holds the values of each good fixture and the words each bad fixture's
 * error must contain. The .npy header edge cases are built here, in
 * memory, byte by byte as the format specifies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "import.h"
#include "import_common.h"
#include "npy.h"
#include "rng.h"
#include "trace.h"

#define FIXDIR "tests/fixtures/import/"

/* ---- fixtures from numpy -------------------------------------------------- */

static json_t *expected(void)
{
    json_error_t je;
    json_t *e = json_load_file(FIXDIR "expected.json", 0, &je);
    if (!e)
        fail_msg("cannot read " FIXDIR "expected.json: %s (run the tests from the repo root)",
                 je.text);
    return e;
}

static void expect_ints(const char *file, const char *key, json_t *want, size_t n,
                        int64_t (*get)(const trace_t *, size_t), const trace_t *t)
{
    if (!want)
        return;
    if (json_array_size(want) != n)
        fail_msg("%s: %s has %zu values, expected.json %zu", file, key, n,
                 json_array_size(want));
    for (size_t i = 0; i < n; i++)
        if (get(t, i) != json_integer_value(json_array_get(want, i)))
            fail_msg("%s: %s[%zu] = %lld, numpy wrote %lld", file, key, i, (long long)get(t, i),
                     (long long)json_integer_value(json_array_get(want, i)));
}

static int64_t get_prompt(const trace_t *t, size_t i) { return t->prompt_tokens[i]; }
static int64_t get_decode(const trace_t *t, size_t i) { return t->decode_tokens[i]; }
static int64_t get_pre(const trace_t *t, size_t i) { return t->prefill_counts[i]; }
static int64_t get_dec(const trace_t *t, size_t i) { return t->decode_counts[i]; }
static int64_t get_label(const trace_t *t, size_t i) { return t->label[i]; }

static void check_good(const char *file, json_t *e, const trace_t *t)
{
    size_t n = (size_t)json_integer_value(json_object_get(e, "requests"));
    assert_int_equal(t->n, n);
    assert_int_equal(t->L, json_integer_value(json_object_get(e, "layers")));
    assert_int_equal(t->E, json_integer_value(json_object_get(e, "experts")));
    assert_int_equal(t->k, json_integer_value(json_object_get(e, "top_k")));
    assert_string_equal(t->model, json_string_value(json_object_get(e, "model")));
    size_t cells = n * TRACE_CELLS(t);
    expect_ints(file, "prompt_tokens", json_object_get(e, "prompt_tokens"), n, get_prompt, t);
    expect_ints(file, "prefill_counts", json_object_get(e, "prefill_counts"), cells, get_pre, t);

    json_t *dt = json_object_get(e, "decode_tokens");
    assert_true((dt != NULL) == (t->decode_tokens != NULL));
    expect_ints(file, "decode_tokens", dt, n, get_decode, t);
    expect_ints(file, "decode_counts", json_object_get(e, "decode_counts"), cells, get_dec, t);

    json_t *gp = json_object_get(e, "gate_prob");
    assert_true((gp != NULL) == (t->gate_prob != NULL));
    for (size_t i = 0; gp && i < cells; i++) {
        /* numpy stored the float32 value; its double is exact */
        double want = json_number_value(json_array_get(gp, i));
        if ((double)t->gate_prob[i] != want)
            fail_msg("%s: gate_prob[%zu] = %.9g, numpy %.9g", file, i, (double)t->gate_prob[i],
                     want);
    }

    json_t *ids = json_object_get(e, "request_ids");
    assert_true((ids != NULL) == (t->request_id != NULL));
    for (size_t i = 0; ids && i < n; i++)
        assert_string_equal(t->request_id[i], json_string_value(json_array_get(ids, i)));

    json_t *names = json_object_get(e, "label_names");
    assert_true((names != NULL) == (t->label != NULL));
    if (names) {
        assert_int_equal(t->n_labels, json_array_size(names));
        for (int i = 0; i < t->n_labels; i++)
            assert_string_equal(t->label_names[i], json_string_value(json_array_get(names, (size_t)i)));
        expect_ints(file, "label", json_object_get(e, "label"), n, get_label, t);
    }

    json_t *arr = json_object_get(e, "arrival_s");
    assert_true((arr != NULL) == (t->arrival_s != NULL));
    for (size_t i = 0; arr && i < n; i++)
        assert_true(t->arrival_s[i] == json_number_value(json_array_get(arr, i)));
}

/* What a bare count file does not say (expected.json "geometry"), or NULL. */
static const import_geometry *geometry_of(json_t *e, const char *file, import_geometry *g)
{
    json_t *o = json_object_get(json_object_get(e, "geometry"), file);
    if (!o)
        return NULL;
    g->top_k = (int)json_integer_value(json_object_get(o, "top_k"));
    g->layers = (int)json_integer_value(json_object_get(o, "layers"));
    g->experts = (int)json_integer_value(json_object_get(o, "experts"));
    return g;
}

static void test_good_fixtures(void **state)
{
    (void)state;
    json_t *e = expected();
    const char *file;
    json_t *want;
    int seen = 0;
    json_object_foreach(json_object_get(e, "good"), file, want) {
        char path[512], err[ELDR_ERRLEN] = "";
        snprintf(path, sizeof path, FIXDIR "%s", file);
        trace_t *t = NULL;
        import_geometry g;
        if (import_file_geometry(path, IMPORT_UNKNOWN, geometry_of(e, file, &g), &t, err,
                                 sizeof err))
            fail_msg("%s: %s", file, err);
        check_good(file, want, t);
        assert_int_equal(trace_validate(t, file, err, sizeof err), 0);
        trace_free(t);
        seen++;
    }
    assert_true(seen >= 6);
    json_decref(e);
}

static void test_bad_fixtures(void **state)
{
    (void)state;
    json_t *e = expected();
    const char *file;
    json_t *words;
    int seen = 0;
    json_object_foreach(json_object_get(e, "bad"), file, words) {
        char path[512], err[ELDR_ERRLEN] = "";
        snprintf(path, sizeof path, FIXDIR "%s", file);
        trace_t *t = (trace_t *)1;
        import_geometry g;
        if (import_file_geometry(path, IMPORT_UNKNOWN, geometry_of(e, file, &g), &t, err,
                                 sizeof err) == 0)
            fail_msg("%s: imported, but it is bad", file);
        assert_null(t);
        assert_null(strchr(err, '\n'));
        assert_non_null(strstr(err, file)); /* names the file */
        size_t i;
        json_t *w;
        json_array_foreach(words, i, w)
            if (!strstr(err, json_string_value(w)))
                fail_msg("%s: error lacks '%s': %s", file, json_string_value(w), err);
        seen++;
    }
    assert_true(seen >= 30);
    json_decref(e);
}

/* ---- .npy from memory -------------------------------------------------- */

/* A .npy image the way numpy writes one: magic, version, header length,
 * the dict padded with spaces to a multiple of 64 and ended by "\n",
 * then the data. *len gets the size; free() the result. */
static unsigned char *mk_npy(int version, const char *dict, const void *data, size_t dlen,
                             size_t *len)
{
    size_t pre = version == 1 ? 10 : 12, hlen = strlen(dict) + 1;
    hlen += (64 - (pre + hlen) % 64) % 64;
    unsigned char *b = malloc(pre + hlen + dlen + 1);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)version;
    b[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        b[8 + i] = (unsigned char)(hlen >> (8 * i));
    memset(b + pre, ' ', hlen);
    memcpy(b + pre, dict, strlen(dict));
    b[pre + hlen - 1] = '\n';
    if (dlen)
        memcpy(b + pre + hlen, data, dlen);
    *len = pre + hlen + dlen;
    return b;
}

static void parse_ok(int version, const char *dict, const void *data, size_t dlen,
                     npy_array_t *a, unsigned char **buf)
{
    size_t len;
    char err[ELDR_ERRLEN] = "";
    *buf = mk_npy(version, dict, data, dlen, &len);
    if (npy_parse(*buf, len, a, err, sizeof err))
        fail_msg("%s: %s", dict, err);
}

static void parse_fails(int version, const char *dict, const void *data, size_t dlen,
                        const char *word)
{
    size_t len;
    char err[ELDR_ERRLEN] = "";
    npy_array_t a;
    unsigned char *buf = mk_npy(version, dict, data, dlen, &len);
    if (npy_parse(buf, len, &a, err, sizeof err) == 0)
        fail_msg("%s parsed, but should fail with '%s'", dict, word);
    if (!strstr(err, word))
        fail_msg("%s: error lacks '%s': %s", dict, word, err);
    free(buf);
}

static void test_npy_versions(void **state)
{
    (void)state;
    const uint16_t v[6] = {0, 1, 2, 300, 65535, 7};
    for (int version = 1; version <= 3; version++) {
        npy_array_t a;
        unsigned char *buf;
        parse_ok(version, "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }", v,
                 sizeof v, &a, &buf);
        assert_int_equal(a.version, version);
        assert_int_equal(a.kind, 'u');
        assert_int_equal(a.itemsize, 2);
        assert_int_equal(a.ndim, 2);
        assert_int_equal(a.shape[0], 2);
        assert_int_equal(a.shape[1], 3);
        assert_int_equal(a.count, 6);
        for (int i = 0; i < 6; i++) {
            int64_t x;
            assert_int_equal(npy_int_at(&a, i, &x), 0);
            assert_int_equal(x, v[i]);
        }
        npy_free(&a);
        free(buf);
    }
    /* key order is free; double quotes are legal Python */
    npy_array_t a;
    unsigned char *buf;
    parse_ok(1, "{\"shape\": (6,), \"fortran_order\": False, \"descr\": \"<u2\"}", v, sizeof v,
             &a, &buf);
    assert_int_equal(a.ndim, 1);
    assert_int_equal(a.count, 6);
    free(buf);
}

static void test_npy_big_endian(void **state)
{
    (void)state;
    /* -2 and 70000 as big-endian int32; 1.5 and -0.25 as big-endian f8 */
    const unsigned char i4[8] = {0xff, 0xff, 0xff, 0xfe, 0x00, 0x01, 0x11, 0x70};
    const unsigned char f8[16] = {0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0xbf, 0xd0, 0, 0, 0, 0, 0, 0};
    npy_array_t a;
    unsigned char *buf;
    int64_t x;
    parse_ok(1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", i4, sizeof i4, &a,
             &buf);
    assert_true(a.big_endian);
    assert_int_equal(npy_int_at(&a, 0, &x), 0);
    assert_int_equal(x, -2);
    assert_int_equal(npy_int_at(&a, 1, &x), 0);
    assert_int_equal(x, 70000);
    assert_true(npy_double_at(&a, 0) == -2.0);
    free(buf);
    parse_ok(1, "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", f8, sizeof f8, &a,
             &buf);
    assert_true(npy_double_at(&a, 0) == 1.5);
    assert_true(npy_double_at(&a, 1) == -0.25);
    free(buf);
    /* float32 little-endian 3.25 = 0x40500000 */
    const unsigned char f4[4] = {0, 0, 0x50, 0x40};
    parse_ok(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f4, sizeof f4, &a,
             &buf);
    assert_int_equal(a.ndim, 0);
    assert_int_equal(a.count, 1);
    assert_true(npy_double_at(&a, 0) == 3.25);
    free(buf);
}

static void test_npy_integers(void **state)
{
    (void)state;
    npy_array_t a;
    unsigned char *buf;
    int64_t x;
    const int8_t i1[3] = {-1, -128, 127};
    parse_ok(1, "{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }", i1, sizeof i1, &a,
             &buf);
    assert_int_equal(npy_int_at(&a, 0, &x), 0);
    assert_int_equal(x, -1);
    assert_int_equal(npy_int_at(&a, 1, &x), 0);
    assert_int_equal(x, -128);
    free(buf);
    const uint64_t u8[2] = {UINT64_MAX, 5};
    parse_ok(1, "{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }", u8, sizeof u8, &a,
             &buf);
    assert_int_equal(npy_int_at(&a, 0, &x), -1); /* above INT64_MAX */
    assert_int_equal(npy_int_at(&a, 1, &x), 0);
    assert_int_equal(x, 5);
    free(buf);
    const int64_t i8[1] = {-5000000000LL};
    parse_ok(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", i8, sizeof i8, &a,
             &buf);
    assert_int_equal(npy_int_at(&a, 0, &x), 0);
    assert_int_equal(x, -5000000000LL);
    free(buf);
    const uint8_t b1[2] = {1, 0};
    parse_ok(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", b1, sizeof b1, &a,
             &buf);
    assert_true(npy_is_integer(&a));
    free(buf);
    /* an empty array is legal */
    parse_ok(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (0, 3), }", NULL, 0, &a,
             &buf);
    assert_int_equal(a.count, 0);
    free(buf);
}

static void test_npy_strings(void **state)
{
    (void)state;
    npy_array_t a;
    unsigned char *buf;
    char s[64], err[ELDR_ERRLEN];
    /* 0-d '<U4' "hé😀" plus one NUL pad */
    const uint32_t u[4] = {'h', 0xE9, 0x1F600, 0};
    parse_ok(3, "{'descr': '<U4', 'fortran_order': False, 'shape': (), }", u, sizeof u, &a,
             &buf);
    assert_int_equal(a.ndim, 0);
    assert_int_equal(a.itemsize, 16);
    assert_int_equal(npy_string_at(&a, 0, s, sizeof s, err, sizeof err), 0);
    assert_string_equal(s, "h\xc3\xa9\xf0\x9f\x98\x80");
    /* too small a buffer is an error, not an overflow */
    assert_int_equal(npy_string_at(&a, 0, s, 4, err, sizeof err), -1);
    free(buf);
    /* big-endian UTF-32 */
    const unsigned char ube[8] = {0, 0, 0, 'o', 0, 0, 0, 'k'};
    parse_ok(1, "{'descr': '>U2', 'fortran_order': False, 'shape': (1,), }", ube, sizeof ube,
             &a, &buf);
    assert_int_equal(npy_string_at(&a, 0, s, sizeof s, err, sizeof err), 0);
    assert_string_equal(s, "ok");
    free(buf);
    /* '|S4': trailing NULs stripped; an element filling the width exactly */
    const char sb[8] = {'a', 'b', 0, 0, 'w', 'x', 'y', 'z'};
    parse_ok(1, "{'descr': '|S4', 'fortran_order': False, 'shape': (2,), }", sb, sizeof sb, &a,
             &buf);
    assert_int_equal(npy_string_at(&a, 0, s, 5, err, sizeof err), 0);
    assert_string_equal(s, "ab");
    assert_int_equal(npy_string_at(&a, 1, s, 5, err, sizeof err), 0);
    assert_string_equal(s, "wxyz");
    free(buf);
    /* invalid code points */
    const uint32_t bad[2] = {0x110000, 0xD800};
    parse_ok(1, "{'descr': '<U1', 'fortran_order': False, 'shape': (2,), }", bad, sizeof bad, &a,
             &buf);
    assert_int_equal(npy_string_at(&a, 0, s, sizeof s, err, sizeof err), -1);
    assert_non_null(strstr(err, "code point"));
    assert_int_equal(npy_string_at(&a, 1, s, sizeof s, err, sizeof err), -1);
    free(buf);
}

static void test_npy_fortran(void **state)
{
    (void)state;
    /* a 2 x 3 x 4 array with value 100*i + 10*j + k, laid out in Fortran
     * order (first index fastest), must read back in C order */
    int32_t f[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                f[i + 2 * (j + 3 * k)] = 100 * i + 10 * j + k;
    npy_array_t a;
    unsigned char *buf;
    parse_ok(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }", f, sizeof f,
             &a, &buf);
    assert_non_null(a.owned);
    for (int i = 0, c = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++, c++) {
                int64_t x;
                npy_int_at(&a, c, &x);
                assert_int_equal(x, 100 * i + 10 * j + k);
            }
    npy_free(&a);
    free(buf);
}

static void test_npy_rejects(void **state)
{
    (void)state;
    const uint8_t d[64] = {0};
    const char *F = "'fortran_order': False";
    char dict[256];
#define DICT(descr, shape) (snprintf(dict, sizeof dict, "{'descr': %s, %s, 'shape': %s, }", \
                                     descr, F, shape), dict)
    parse_fails(1, DICT("'|O'", "(2,)"), d, 16, "pickle");
    parse_fails(1, DICT("[('a', '<i4')]", "(2,)"), d, 8, "structured");
    parse_fails(1, DICT("'<f2'", "(2,)"), d, 4, "float32");
    parse_fails(1, DICT("'<c16'", "(1,)"), d, 16, "not supported");
    parse_fails(1, DICT("'<M8[ns]'", "(1,)"), d, 8, "not supported");
    parse_fails(1, DICT("'<i3'", "(1,)"), d, 3, "integers");
    parse_fails(1, DICT("'u2'", "(1,)"), d, 2, "byte-order");
    /* shape against data length: short, long */
    parse_fails(1, DICT("'<u2'", "(2, 3)"), d, 10, "truncated");
    parse_fails(2, DICT("'<u2'", "(2, 3)"), d, 14, "holds 14");
    parse_fails(1, DICT("'<u2'", "()"), d, 4, "holds 4");
    parse_fails(1, DICT("'<u2'", "(-1,)"), d, 2, "non-negative");
    parse_fails(1, DICT("'<u2'", "(99999999999999999999,)"), d, 2, "too large");
    parse_fails(1, DICT("'<u1'", "(4294967296, 4294967296, 4294967296)"), d, 2, "too large");
    parse_fails(1, "{'descr': '<u2', 'fortran_order': False}", d, 2, "lacks 'shape'");
    parse_fails(1, "{'descr': '<u2', 'fortran_order': 0, 'shape': (1,)}", d, 2, "True or False");
    parse_fails(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), 'x': 1}", d, 2,
                "unexpected key");
    parse_fails(1, "['descr']", d, 2, "dict");
#undef DICT

    char err[ELDR_ERRLEN];
    npy_array_t a;
    size_t len;
    unsigned char *buf = mk_npy(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }",
                                d, 2, &len);
    buf[0] = 'X';
    assert_int_equal(npy_parse(buf, len, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "magic"));
    buf[0] = 0x93;
    buf[6] = 4;
    assert_int_equal(npy_parse(buf, len, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "version 4"));
    buf[6] = 1;
    assert_int_equal(npy_parse(buf, 40, &a, err, sizeof err), -1); /* cut in the header */
    assert_non_null(strstr(err, "truncated"));
    assert_int_equal(npy_parse(buf, 5, &a, err, sizeof err), -1);
    free(buf);
}

/* ---- the rest --------------------------------------------------------- */

static void test_find_duplicate(void **state)
{
    (void)state;
    char *none[] = {"a", "b", "c"};
    int64_t i = -1, j = -1;
    assert_int_equal(import_find_duplicate(none, 3, &i, &j), 0);
    assert_int_equal(import_find_duplicate(none, 0, &i, &j), 0);
    /* b repeats at 3 before a repeats at 4: report (1, 3) */
    char *ids[] = {"a", "b", "c", "b", "a", "b"};
    assert_int_equal(import_find_duplicate(ids, 6, &i, &j), 1);
    assert_int_equal(i, 1);
    assert_int_equal(j, 3);
}

/* A capture or JSON lines opens wherever a trace does: trace_load,
 * trace_load_rows and trace_read_header import it in memory; a bare .npy
 * (no top-k) is refused with a pointer to eldr import. */
static void test_trace_load_routes(void **state)
{
    (void)state;
    char err[ELDR_ERRLEN] = "";
    trace_t *t = NULL, *direct = NULL, *part = NULL;
    assert_int_equal(import_sniff(FIXDIR "good_reference.npz"), IMPORT_NPZ);
    assert_int_equal(import_sniff(FIXDIR "good.jsonl"), IMPORT_JSONL);
    assert_int_equal(import_sniff(FIXDIR "good_counts.npy"), IMPORT_NPY);
    assert_int_equal(import_sniff(FIXDIR "good_capture.frames"), IMPORT_UNKNOWN);
    /* an HDF5 trace stays one whatever its name */
    char h5[64];
    snprintf(h5, sizeof h5, "/tmp/eldr_test_import_%d.npz", (int)getpid());
    FILE *in = fopen("samples/small.h5", "rb"), *out = fopen(h5, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
    assert_int_equal(import_sniff(h5), IMPORT_UNKNOWN);
    assert_int_equal(trace_load(h5, &t, err, sizeof err), 0);
    trace_free(t);
    unlink(h5);
    if (trace_load(FIXDIR "good_reference.npz", &t, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(import_npz(FIXDIR "good_reference.npz", &direct, err, sizeof err), 0);
    assert_int_equal(t->n, direct->n);
    assert_memory_equal(t->prefill_counts, direct->prefill_counts,
                        (size_t)t->n * TRACE_CELLS(t) * sizeof *t->prefill_counts);
    trace_header_t h;
    assert_int_equal(trace_read_header(FIXDIR "good_reference.npz", &h, err, sizeof err), 0);
    assert_int_equal(h.n, t->n);
    assert_int_equal(h.k, t->k);
    assert_true(h.has & TRACE_HAS_DECODE && h.has & TRACE_HAS_GATE_PROB);
    assert_int_equal(trace_load_rows(FIXDIR "good_reference.npz", 2, 5, &part, err, sizeof err), 0);
    assert_int_equal(part->n, 3);
    assert_string_equal(part->request_id[0], t->request_id[2]);
    assert_memory_equal(part->prefill_counts, trace_prefill_row(t, 2),
                        3 * TRACE_CELLS(t) * sizeof *t->prefill_counts);
    trace_free(part);
    assert_int_equal(trace_load_rows(FIXDIR "good_reference.npz", 4, 99, &part, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "outside the file's [0, 6)"));
    assert_int_equal(trace_load(FIXDIR "good_counts.npy", &part, err, sizeof err), -1);
    assert_null(part);
    assert_non_null(strstr(err, "--top-k K"));
    trace_free(t);
    trace_free(direct);
}

static void test_format_names(void **state)
{
    (void)state;
    assert_int_equal(import_format_of("x/cap.npz"), IMPORT_NPZ);
    assert_int_equal(import_format_of("CAP.NPZ"), IMPORT_NPZ);
    assert_int_equal(import_format_of("t.jsonl"), IMPORT_JSONL);
    assert_int_equal(import_format_of("t.ndjson"), IMPORT_JSONL);
    assert_int_equal(import_format_of("t.h5"), IMPORT_UNKNOWN);
    assert_int_equal(import_format_parse("npz"), IMPORT_NPZ);
    assert_int_equal(import_format_parse("csv"), IMPORT_UNKNOWN);
    trace_t *t;
    char err[ELDR_ERRLEN];
    assert_int_equal(import_file("t.h5", IMPORT_UNKNOWN, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "--format"));
    assert_int_equal(import_file("/nonexistent/x.jsonl", IMPORT_UNKNOWN, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot open"));
    assert_int_equal(import_file("/nonexistent/x.npz", IMPORT_UNKNOWN, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/x.npz"));
    /* a JSON-lines file read as npz is not a zip */
    assert_int_equal(import_file(FIXDIR "good.jsonl", IMPORT_NPZ, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a readable"));
}

/* A line past IMPORT_JSONL_MAX_LINE is refused with its number, without
 * holding more than the limit. */
static void test_jsonl_long_line(void **state)
{
    (void)state;
    char path[] = "/tmp/eldr_test_import_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("{\"format\":\"eldr-trace-jsonl\",\"version\":1,\"layers\":1,\"experts\":2,"
          "\"top_k\":1}\n{\"prompt_tokens\":1,\"prefill\":[[1,0]]}\n{\"x\":\"",
          f);
    for (size_t i = 0; i < IMPORT_JSONL_MAX_LINE / 64 + 1; i++)
        fputs("0123456789012345678901234567890123456789012345678901234567890123", f);
    fputs("\"}\n", f);
    fclose(f);
    trace_t *t = NULL;
    char err[ELDR_ERRLEN];
    assert_int_equal(import_jsonl(path, &t, err, sizeof err), -1);
    assert_null(t);
    assert_non_null(strstr(err, "line 3"));
    assert_non_null(strstr(err, "longer than"));
    unlink(path);
}

/* L = 2, E = 4 by hand: dense and sparse forms, an empty request, gate_logit,
 * labels named on the fly, blank lines and no final newline. */
static void test_jsonl_by_hand(void **state)
{
    (void)state;
    char path[] = "/tmp/eldr_test_import_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("\n  {\"format\":\"eldr-trace-jsonl\",\"version\":1,\"layers\":2,\"experts\":4,"
          "\"top_k\":2}\n"
          "{\"prompt_tokens\":3,\"prefill\":[[3,2,1,0],[0,3,3,0]],\"gate_logit\":"
          "[[0,0,-1.5],[1,3,2]],\"label\":\"b\"}\n"
          "\n"
          "{\"prompt_tokens\":0,\"prefill\":[],\"gate_logit\":[],\"label\":\"a\"}",
          f);
    fclose(f);
    trace_t *t = NULL;
    char err[ELDR_ERRLEN];
    if (import_jsonl(path, &t, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(t->n, 2);
    const uint16_t want[8] = {3, 2, 1, 0, 0, 3, 3, 0};
    assert_memory_equal(t->prefill_counts, want, sizeof want);
    assert_true(t->gate_logit[0] == -1.5f);
    assert_true(t->gate_logit[7] == 2.0f);
    assert_true(t->gate_logit[1] == 0.0f);
    assert_null(t->gate_prob);
    assert_null(t->decode_counts);
    assert_null(t->request_id);
    assert_int_equal(t->n_labels, 2);
    assert_string_equal(t->label_names[0], "b");
    assert_int_equal(t->label[1], 1);
    trace_free(t);
    unlink(path);
}


/* ---- robustness: damaged inputs never crash, never half-load --------- */

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = malloc(*len);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

/* Flip, drop or cut bytes of a good fixture many times over: each import
 * either succeeds with a valid trace or fails with one line and no trace.
 * Under ASan this is the check that no damaged input reads out of bounds. */
static void mutate_and_import(const char *fixture, const char *suffix, int rounds, uint64_t seed)
{
    size_t len;
    unsigned char *orig = slurp(fixture, &len), *b = malloc(len);
    char path[64];
    snprintf(path, sizeof path, "/tmp/eldr_test_mut_%d%s", (int)getpid(), suffix);
    rng_t r;
    rng_seed(&r, seed);
    int failed = 0;
    for (int i = 0; i < rounds; i++) {
        memcpy(b, orig, len);
        size_t n = len;
        int what = (int)rng_below(&r, 3);
        if (what == 0) /* flip a few bytes */
            for (int j = 0; j < 1 + (int)rng_below(&r, 4); j++)
                b[rng_below(&r, len)] ^= (unsigned char)(1 + rng_below(&r, 255));
        else if (what == 1) /* cut */
            n = (size_t)rng_below(&r, len);
        else /* a digit becomes another digit */
            for (size_t j = rng_below(&r, len); j < len; j++)
                if (b[j] >= '0' && b[j] <= '9') {
                    b[j] = (unsigned char)('0' + rng_below(&r, 10));
                    break;
                }
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fwrite(b, 1, n, f);
        fclose(f);
        trace_t *t = NULL;
        char err[ELDR_ERRLEN] = "";
        if (import_file(path, IMPORT_UNKNOWN, &t, err, sizeof err)) {
            assert_null(t);
            assert_true(strlen(err) > 0);
            assert_null(strchr(err, '\n'));
            failed++;
        } else {
            assert_int_equal(trace_validate(t, path, err, sizeof err), 0);
            trace_free(t);
        }
    }
    assert_true(failed > rounds / 4); /* the damage was noticed */
    unlink(path);
    free(orig);
    free(b);
}

static void test_damaged_npz(void **state)
{
    (void)state;
    mutate_and_import(FIXDIR "good_savez.npz", ".npz", 300, 11);
    mutate_and_import(FIXDIR "good_compressed.npz", ".npz", 300, 12);
}

static void test_damaged_jsonl(void **state)
{
    (void)state;
    mutate_and_import(FIXDIR "good.jsonl", ".jsonl", 300, 13);
}

/* Random bytes in a valid .npy image: npy_parse never reads past it. */
static void test_npy_damaged(void **state)
{
    (void)state;
    const int32_t d[24] = {0};
    size_t len;
    unsigned char *good = mk_npy(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }",
                                 d, sizeof d, &len);
    rng_t r;
    rng_seed(&r, 5);
    for (int i = 0; i < 5000; i++) {
        size_t n = 1 + (size_t)rng_below(&r, len);
        unsigned char *b = malloc(n); /* exact size, so ASan sees any overread */
        memcpy(b, good, n);
        for (int j = 0; j < 1 + (int)rng_below(&r, 3); j++)
            b[rng_below(&r, n < 80 ? n : 80)] = (unsigned char)rng_below(&r, 256);
        npy_array_t a;
        char err[ELDR_ERRLEN];
        if (npy_parse(b, n, &a, err, sizeof err) == 0) {
            for (int64_t k = 0; k < a.count && npy_is_number(&a); k++)
                (void)npy_double_at(&a, k);
            npy_free(&a);
        }
        free(b);
    }
    free(good);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_fixtures),  cmocka_unit_test(test_bad_fixtures),
        cmocka_unit_test(test_npy_versions),   cmocka_unit_test(test_npy_big_endian),
        cmocka_unit_test(test_npy_integers),   cmocka_unit_test(test_npy_strings),
        cmocka_unit_test(test_npy_fortran),    cmocka_unit_test(test_npy_rejects),
        cmocka_unit_test(test_find_duplicate), cmocka_unit_test(test_format_names),
        cmocka_unit_test(test_trace_load_routes),
        cmocka_unit_test(test_jsonl_long_line), cmocka_unit_test(test_jsonl_by_hand),
        cmocka_unit_test(test_npy_damaged),    cmocka_unit_test(test_damaged_npz),
        cmocka_unit_test(test_damaged_jsonl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
