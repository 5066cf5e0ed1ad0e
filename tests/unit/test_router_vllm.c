/* test_router_vllm.c - the Prometheus text parser and the --worker-urls
 * resolution of eldrd's --load-from vllm (src/router/load_vllm.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "load_vllm.h"

static int parse(const char *text, vllm_report *r, char *why)
{
    return vllm_parse_metrics(text, strlen(text), r, why, 200);
}

static void test_sums_label_sets(void **state)
{
    (void)state;
    const char *page =
        "# HELP vllm:num_requests_running Running.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 3\n"
        "  vllm:num_requests_running{model_name=\"a}b\\\"c\",engine=\"1\"} 4 1718000000000\r\n"
        "vllm:num_requests_running_total_fake 999\n"
        "vllm:num_requests_waiting_by_reason{reason=\"x\"} 77\n"
        "vllm:num_requests_waiting 2.5e0\n"
        "other_metric{a=\"vllm:num_requests_waiting\"} 100\n";
    vllm_report r;
    char why[200];
    assert_int_equal(parse(page, &r, why), 0);
    assert_true(r.running == 7.0);
    assert_true(r.waiting == 2.5);
    assert_int_equal(r.n_running, 2);
    assert_int_equal(r.n_waiting, 1);
}

static void test_unusable_pages(void **state)
{
    (void)state;
    static const struct {
        const char *page, *why;
    } cases[] = {
        {"", "no vllm:num_requests_running"},
        {"vllm:num_requests_running 1\n", "no vllm:num_requests_waiting"},
        {"vllm:num_requests_running NaN\nvllm:num_requests_waiting 1\n", "is nan"},
        {"vllm:num_requests_running +Inf\nvllm:num_requests_waiting 1\n", "is inf"},
        {"vllm:num_requests_running -1\nvllm:num_requests_waiting 1\n", "is -1"},
        {"vllm:num_requests_running{a=\"}\n", "unclosed label set on line 1"},
        {"vllm:num_requests_running{a=\"b\"}\nvllm:num_requests_waiting 1\n", "no number on line 1"},
        {"vllm:num_requests_running 1x\nvllm:num_requests_waiting 1\n", "no number on line 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vllm_report r;
        char why[200] = "";
        assert_int_equal(parse(cases[i].page, &r, why), -1);
        if (!strstr(why, cases[i].why))
            fail_msg("case %zu: '%s' lacks '%s'", i, why, cases[i].why);
    }
}

static void test_resolve_urls(void **state)
{
    (void)state;
    char *workers[] = {"a", "b"};
    char **urls;
    char err[256];
    assert_int_equal(vllm_resolve_urls("http://h:1,http://h:2/metrics", workers, 2, &urls, err,
                                       sizeof err), 0);
    assert_string_equal(urls[0], "http://h:1/metrics");
    assert_string_equal(urls[1], "http://h:2/metrics");
    vllm_free_urls(urls, 2);
    assert_int_equal(vllm_resolve_urls("b=http://h:2/x/,a=http://h:1", workers, 2, &urls, err,
                                       sizeof err), 0);
    assert_string_equal(urls[0], "http://h:1/metrics");
    assert_string_equal(urls[1], "http://h:2/x/metrics");
    vllm_free_urls(urls, 2);
    assert_int_equal(vllm_resolve_urls("http://h:1", workers, 2, &urls, err, sizeof err), -1);
    assert_non_null(strstr(err, "1 entries for 2 workers"));
    assert_int_equal(vllm_resolve_urls("a=http://h:1,a=http://h:2", workers, 2, &urls, err,
                                       sizeof err), -1);
    assert_non_null(strstr(err, "given twice"));
    assert_int_equal(vllm_resolve_urls("a=http://h:1,c=http://h:2", workers, 2, &urls, err,
                                       sizeof err), -1);
    assert_non_null(strstr(err, "'c' is not a decode worker"));
    assert_int_equal(vllm_resolve_urls("ftp://h,http://h", workers, 2, &urls, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "not an http:// URL"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sums_label_sets),
        cmocka_unit_test(test_unusable_pages),
        cmocka_unit_test(test_resolve_urls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
