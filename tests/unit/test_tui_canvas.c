/* test_tui_canvas.c - the dashboard's canvas (src/tui/canvas.h): clipping,
 * UTF-8 text, the text form, bars, ramps, sparklines and boxes; and the
 * core PCA (pca.h) the scatter view uses, against power iteration on the
 * covariance matrix written here in double. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/tui/canvas.h"
#include "../../src/tui/frame_file.h"
#include "pca.h"
#include "rng.h"

static int count_char(const char *s, char ch)
{
    int n = 0;
    for (; *s; s++)
        n += *s == ch;
    return n;
}

static void test_new_bounds(void **state)
{
    (void)state;
    assert_null(canvas_new(0, 5, 0, 0));
    assert_null(canvas_new(5, 0, 0, 0));
    assert_null(canvas_new(5000, 5, 0, 0));
    canvas_t *c = canvas_new(3, 2, 0, 0);
    assert_non_null(c);
    assert_null(canvas_at(c, 3, 0));
    assert_null(canvas_at(c, 0, -1));
    assert_non_null(canvas_at(c, 2, 1));
    canvas_free(c);
}

static void test_text_clips_and_trims(void **state)
{
    (void)state;
    canvas_t *c = canvas_new(8, 3, 0, 0);
    /* past the right edge: fitted by the one rule, never a cut word */
    assert_int_equal(canvas_text(c, 5, 0, cv_plain(), "abcdef"), 3);
    canvas_text(c, -2, 1, cv_plain(), "xyz");
    canvas_text(c, 0, 2, cv_plain(), "ab cd 0.161");   /* the number dropped whole */
    canvas_put(c, 100, 100, 'Q', cv_plain());   /* ignored */
    char *s = canvas_to_string(c);
    assert_string_equal(s, "     ...\nz\nab cd...\n");
    free(s);
    canvas_free(c);
}

/* canvas_wrap: words to the next line at the panel's edge, a word
 * longer than the panel cut, at most max_lines, multi-byte counted once. */
static void test_wrap(void **state)
{
    (void)state;
    canvas_t *c = canvas_new(12, 4, 1, 0);
    assert_int_equal(canvas_wrap(c, 1, 0, 10, 4, cv_plain(), "a, b: members; A \u00b1 centroid"),
                     3);
    char *s = canvas_to_string(c);
    assert_string_equal(s, " a, b:\n members; A\n \u00b1 centroid\n\n");
    free(s);
    canvas_clear(c);
    assert_int_equal(canvas_wrap(c, 0, 0, 4, 1, cv_plain(), "abcdefg hij"), 1);
    s = canvas_to_string(c);
    assert_string_equal(s, "a...\n\n\n\n");   /* cut with "...", and one line only */
    free(s);
    canvas_clear(c);
    assert_int_equal(canvas_wrap(c, 0, 0, 10, 1, cv_plain(), "TVD 0.161 over 600"), 1);
    s = canvas_to_string(c);
    assert_string_equal(s, "TVD 0.161\n\n\n\n");   /* no room for "...": whole words */
    free(s);
    canvas_clear(c);
    assert_int_equal(canvas_wrap(c, 0, 0, 12, 1, cv_plain(), "a, b: members of"), 1);
    s = canvas_to_string(c);
    assert_string_equal(s, "a, b:...\n\n\n\n");   /* left over: marked */
    free(s);
    assert_int_equal(canvas_wrap(c, 0, 0, 4, 2, cv_plain(), ""), 0);
    canvas_free(c);
}

static void test_utf8(void **state)
{
    (void)state;
    canvas_t *c = canvas_new(10, 1, 1, 0);
    /* e-acute and a full block are one column each; a stray byte is '?' */
    assert_int_equal(canvas_text(c, 0, 0, cv_plain(), "\xc3\xa9\xe2\x96\x88x\xff"), 4);
    assert_int_equal(canvas_at(c, 0, 0)->ch, 0xE9);
    assert_int_equal(canvas_at(c, 1, 0)->ch, 0x2588);
    assert_int_equal(canvas_at(c, 3, 0)->ch, '?');
    char *s = canvas_to_string(c);
    assert_string_equal(s, "\xc3\xa9\xe2\x96\x88x?\n");
    free(s);
    canvas_free(c);
}

static void test_hbar_ascii(void **state)
{
    (void)state;
    canvas_t *c = canvas_new(20, 4, 0, 0);
    canvas_hbar(c, 0, 0, 10, 1.0, cv_plain());
    canvas_hbar(c, 0, 1, 10, 0.5, cv_plain());
    canvas_hbar(c, 0, 2, 10, 0.0, cv_plain());
    canvas_hbar(c, 0, 3, 10, 7.0, cv_plain());   /* clamped */
    char *s = canvas_to_string(c);
    assert_string_equal(s, "##########\n#####\n\n##########\n");
    free(s);
    canvas_free(c);
}

static void test_hbar_unicode_eighths(void **state)
{
    (void)state;
    canvas_t *c = canvas_new(4, 1, 1, 0);
    canvas_hbar(c, 0, 0, 4, 3.0 / 32.0, cv_plain());   /* 3 eighths of one cell */
    assert_int_equal(canvas_at(c, 0, 0)->ch, 0x258D);
    assert_int_equal(canvas_at(c, 1, 0)->ch, ' ');
    canvas_hbar(c, 0, 0, 4, 1.0, cv_plain());
    for (int i = 0; i < 4; i++)
        assert_int_equal(canvas_at(c, i, 0)->ch, 0x2588);
    canvas_free(c);
}

static void test_ramp_monotone(void **state)
{
    (void)state;
    assert_int_equal(canvas_ramp(0), ' ');
    assert_int_equal(canvas_ramp(NAN), ' ');
    assert_int_equal(canvas_ramp(1e-9), '.');
    assert_int_equal(canvas_ramp(1), '@');
    assert_int_equal(canvas_ramp(5), '@');
    int last = 0;
    for (int i = 1; i <= 100; i++) {
        const char *p = strchr(CANVAS_RAMP, (int)canvas_ramp(i / 100.0));
        assert_non_null(p);
        assert_true(p - CANVAS_RAMP >= last);
        last = (int)(p - CANVAS_RAMP);
    }
    assert_int_equal(last, 9);
}

static void test_spark(void **state)
{
    (void)state;
    canvas_t *a = canvas_new(1, 1, 0, 0), *u = canvas_new(1, 1, 1, 0);
    assert_int_equal(canvas_spark(a, 0), ' ');
    assert_int_equal(canvas_spark(a, 1), '#');
    assert_int_equal(canvas_spark(u, 1), 0x2588);
    assert_int_equal(canvas_spark(u, 0.01), 0x2581);
    assert_true(canvas_spark(u, 0.5) > canvas_spark(u, 0.2));
    canvas_free(a);
    canvas_free(u);
}

static void test_box(void **state)
{
    (void)state;
    canvas_t *c = canvas_new(12, 3, 0, 0);
    canvas_box(c, 0, 0, 12, 3, cv_plain(), "a very long title");
    char *s = canvas_to_string(c);
    assert_int_equal(s[0], '+');
    assert_int_equal(s[11], '+');   /* the title never eats the corner */
    assert_int_equal(count_char(s, '+'), 4);
    assert_int_equal(count_char(s, '|'), 2);
    assert_non_null(strstr(s, "+- a... ---+"));   /* whole words, marked cut */
    free(s);
    canvas_free(c);
}

/* canvas_fit: whole words and numbers or an ellipsis; never "0.16" for
 * 0.161; lists cut after a comma; the tail kept for ids; columns, not
 * bytes, counted. */
static void test_fit(void **state)
{
    (void)state;
    char s[128];
    strcpy(s, "drift: TVD 0.161 > threshold 0.061");
    assert_int_equal(canvas_fit(s, 80), 34);
    assert_string_equal(s, "drift: TVD 0.161 > threshold 0.061");
    for (int w = 4; w < 34; w++) {   /* at every width: a whole prefix of words */
        strcpy(s, "drift: TVD 0.161 > threshold 0.061");
        int n = canvas_fit(s, w);
        assert_true(n <= w);
        assert_int_equal(n, canvas_cols(s));
        assert_non_null(strstr(s, "..."));
        assert_null(strstr(s, "0.16."));
        assert_null(strstr(s, "0.06."));
        size_t head = strlen(s) - 3;
        assert_true(head == 0 || !strncmp(s, "drift: TVD 0.161 > threshold 0.061", head));
        assert_true(head == 0 || s[head - 1] != ' ');
    }
    strcpy(s, "drift: TVD 0.161 > threshold");
    canvas_fit(s, 16);
    assert_string_equal(s, "drift: TVD...");   /* 0.161 would not fit whole */
    strcpy(s, "0,1,2,3,4,5,6");
    canvas_fit(s, 10);
    assert_string_equal(s, "0,1,2...");
    strcpy(s, "123456789");
    canvas_fit(s, 6);
    assert_string_equal(s, "...");               /* a number: dropped, not cut */
    strcpy(s, "activations");
    canvas_fit(s, 8);
    assert_string_equal(s, "activ...");
    strcpy(s, "p50 ±1.2 w");                /* the sign is two bytes, one column */
    assert_int_equal(canvas_fit(s, 10), 10);
    strcpy(s, "replay-8163-591");
    assert_int_equal(canvas_fit_tail(s, 10), 10);
    assert_string_equal(s, "...163-591");
    strcpy(s, "decode-1.vllm.svc:8000");
    canvas_fit_url(s, 16);
    assert_string_equal(s, "decode-1...:8000");
    canvas_t *c = canvas_new(20, 1, 0, 0);
    assert_int_equal(canvas_put_fitf(c, 2, 0, 12, cv_plain(), "TVD %.3f over %d", 0.161, 600), 12);
    char *t = canvas_to_string(c);
    assert_string_equal(t, "  TVD 0.161...\n");
    free(t);
    canvas_free(c);
}

/* The whole of a small file, or "" (static buffer). */
static const char *slurp(const char *path)
{
    static char buf[4096];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* frame_file_save: the canvas's text in $ELDR_FRAME_DIR, numbered from
 * 001, a file that exists (anyone's) skipped, never rewritten; no
 * temporary left; a directory that is not there: -1 and a message. */
static void test_frame_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/eldr-frames-XXXXXX", path[4200], err[256], p1[4200];
    assert_non_null(mkdtemp(dir));
    setenv("ELDR_FRAME_DIR", dir, 1);
    assert_string_equal(frame_file_dir(), dir);
    canvas_t *c = canvas_new(10, 2, 0, 0);
    canvas_text(c, 0, 0, cv_plain(), "TVD 0.161");
    assert_int_equal(frame_file_save(c, path, sizeof path, err, sizeof err), 0);
    snprintf(p1, sizeof p1, "%s/eldr-frame-001.txt", dir);
    assert_string_equal(path, p1);
    assert_string_equal(slurp(path), "TVD 0.161\n\n");
    snprintf(p1, sizeof p1, "%s/eldr-frame-002.txt", dir);
    FILE *f = fopen(p1, "w");   /* someone else's file */
    fputs("mine\n", f);
    fclose(f);
    assert_int_equal(frame_file_save(c, path, sizeof path, err, sizeof err), 0);
    assert_non_null(strstr(path, "eldr-frame-003.txt"));
    assert_string_equal(slurp(p1), "mine\n");
    char status[128];
    frame_file_key(c, status, sizeof status);
    assert_non_null(strstr(status, "frame saved: "));
    snprintf(p1, sizeof p1, "frame saved: eldr-frame-004.txt (10x2) in %s", dir);
    assert_string_equal(status, p1);
    for (int i = 1; i <= 4; i++) {   /* nothing but the four */
        snprintf(p1, sizeof p1, "%s/eldr-frame-%03d.txt", dir, i);
        assert_int_equal(unlink(p1), 0);
    }
    assert_int_equal(rmdir(dir), 0);   /* empty: no temporary left */
    setenv("ELDR_FRAME_DIR", "/nonexistent/eldr-frames", 1);
    assert_int_equal(frame_file_save(c, path, sizeof path, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/eldr-frames"));
    frame_file_key(c, status, sizeof status);
    assert_non_null(strstr(status, "save frame: cannot write in /nonexistent/eldr-frames"));
    unsetenv("ELDR_FRAME_DIR");
    assert_string_equal(frame_file_dir(), ".");
    canvas_free(c);
}

/* ---- pca ---- */

/* Top eigenvector of the covariance by power iteration (with deflation
 * against prev when given), in double. */
static double power_axis(const double *cov, int d, const double *prev, double *v)
{
    for (int j = 0; j < d; j++)
        v[j] = 1.0 / (j + 1);
    double lambda = 0;
    double *t = malloc((size_t)d * sizeof *t);
    for (int it = 0; it < 3000; it++) {
        if (prev) {
            double p = 0;
            for (int j = 0; j < d; j++)
                p += v[j] * prev[j];
            for (int j = 0; j < d; j++)
                v[j] -= p * prev[j];
        }
        for (int i = 0; i < d; i++) {
            t[i] = 0;
            for (int j = 0; j < d; j++)
                t[i] += cov[i * d + j] * v[j];
        }
        double n = 0;
        for (int i = 0; i < d; i++)
            n += t[i] * t[i];
        n = sqrt(n);
        lambda = n;
        for (int i = 0; i < d; i++)
            v[i] = t[i] / n;
    }
    free(t);
    return lambda;
}

static void test_pca_against_power_iteration(void **state)
{
    (void)state;
    enum { N = 60, D = 7 };
    float x[N * D];
    rng_t r;
    rng_seed(&r, 5);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)   /* decreasing spread per column, mixed */
            x[i * D + j] = (float)(rng_normal(&r) * (D - j) + (j ? 0.3 * x[i * D] : 0) + 2.0);
    pca_t p;
    char err[256];
    assert_int_equal(pca_fit(x, N, D, 2, &p, err, sizeof err), 0);
    double mean[D] = {0}, cov[D * D] = {0};
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            mean[j] += x[i * D + j] / (double)N;
    for (int i = 0; i < N; i++)
        for (int a = 0; a < D; a++)
            for (int b = 0; b < D; b++)
                cov[a * D + b] += (x[i * D + a] - mean[a]) * (x[i * D + b] - mean[b]) / N;
    double v1[D], v2[D];
    double l1 = power_axis(cov, D, NULL, v1), l2 = power_axis(cov, D, v1, v2);
    assert_true(fabs(p.var[0] - l1) < 1e-6 * l1);
    assert_true(fabs(p.var[1] - l2) < 1e-6 * l1);
    double d1 = 0, d2 = 0, tr = 0;
    for (int j = 0; j < D; j++) {
        d1 += p.axes[j] * v1[j];
        d2 += p.axes[D + j] * v2[j];
        tr += cov[j * D + j];
    }
    assert_true(fabs(fabs(d1) - 1) < 1e-6);
    assert_true(fabs(fabs(d2) - 1) < 1e-6);
    assert_true(fabs(p.total_var - tr) < 1e-9 * tr);
    /* scores are the projections of the rows, as pca_project computes */
    for (int i = 0; i < N; i += 7) {
        double s[2];
        pca_project(&p, x + i * D, s);
        assert_true(fabs(s[0] - p.scores[i * 2]) < 1e-6 * sqrt(l1));
        assert_true(fabs(s[1] - p.scores[i * 2 + 1]) < 1e-6 * sqrt(l1));
    }
    pca_free(&p);
}

static void test_pca_rank_deficient_and_bad(void **state)
{
    (void)state;
    float x[4 * 3] = {1, 2, 3, 2, 4, 6, 3, 6, 9, 4, 8, 12};   /* one direction only */
    pca_t p;
    char err[256];
    assert_int_equal(pca_fit(x, 4, 3, 2, &p, err, sizeof err), 0);
    assert_true(p.var[0] > 0);
    assert_true(p.var[1] == 0);
    for (int i = 0; i < 4; i++)
        assert_true(p.scores[i * 2 + 1] == 0);
    pca_free(&p);
    assert_int_equal(pca_fit(x, 1, 3, 1, &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "pca"));
    x[5] = NAN;
    assert_int_equal(pca_fit(x, 4, 3, 1, &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "row 1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_bounds),
        cmocka_unit_test(test_text_clips_and_trims),
        cmocka_unit_test(test_wrap),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_hbar_ascii),
        cmocka_unit_test(test_hbar_unicode_eighths),
        cmocka_unit_test(test_ramp_monotone),
        cmocka_unit_test(test_spark),
        cmocka_unit_test(test_box),
        cmocka_unit_test(test_fit),
        cmocka_unit_test(test_frame_file),
        cmocka_unit_test(test_pca_against_power_iteration),
        cmocka_unit_test(test_pca_rank_deficient_and_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
