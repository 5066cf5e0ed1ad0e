/* test_router_vllm.c - the Prometheus text parser and the --worker-urls
 * resolution of eldrd's --load-from vllm (src/router/load_vllm.h): vLLM's
 * and SGLang's series, the KV cache usage gauges, the engine told by the
 * names in the page. */
#include <math.h>
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
    assert_int_equal(r.engine, ENGINE_VLLM);
    assert_true(isnan(r.kv));   /* no KV gauge in the page: unknown, the load still counts */
    assert_null(r.kv_series);
}

/* vLLM's KV gauge: a fraction (1 = full) per engine (label set), averaged;
 * the name from vLLM 0.9 on wins over the deprecated one, which alone is
 * read from an older vLLM; a NaN gauge leaves the usage unknown, not the
 * load. */
static void test_vllm_kv(void **state)
{
    (void)state;
    const char *both =
        "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1.0\n"
        "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0.0\n"
        "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage.\n"
        "vllm:gpu_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.9\n"
        "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n"
        "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.75\n"
        "vllm:kv_cache_usage_perc_total_fake 5\n";
    vllm_report r;
    char why[200];
    assert_int_equal(parse(both, &r, why), 0);
    assert_true(r.kv == 0.5);
    assert_string_equal(r.kv_series, "vllm:kv_cache_usage_perc");
    const char *old = "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n"
                      "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.125\n";
    assert_int_equal(parse(old, &r, why), 0);
    assert_true(r.kv == 0.125);
    assert_string_equal(r.kv_series, "vllm:gpu_cache_usage_perc");
    const char *nan = "vllm:num_requests_running 3\nvllm:num_requests_waiting 2\n"
                      "vllm:kv_cache_usage_perc{engine=\"0\"} 0.5\n"
                      "vllm:kv_cache_usage_perc{engine=\"1\"} NaN\n";
    assert_int_equal(parse(nan, &r, why), 0);
    assert_true(r.running == 3 && r.waiting == 2);
    assert_true(isnan(r.kv));
    const char *broken = "vllm:num_requests_running 3\nvllm:num_requests_waiting 2\n"
                         "vllm:kv_cache_usage_perc{engine=\"0\"\n";
    assert_int_equal(parse(broken, &r, why), -1);
    assert_non_null(strstr(why, "vllm:kv_cache_usage_perc: unclosed label set on line 3"));
}

/* SGLang's page as prometheus_client's multiprocess collector writes it
 * (sorted labels, "Multiprocess metric" help, floats as 3.0): running =
 * sglang:num_running_reqs, waiting = sglang:num_queue_reqs plus the PD
 * decode queues (prealloc, transfer), KV usage = sglang:token_usage. */
static void test_sglang(void **state)
{
    (void)state;
    const char *page =
        "# HELP sglang:num_running_reqs Multiprocess metric\n"
        "# TYPE sglang:num_running_reqs gauge\n"
        "sglang:num_running_reqs{dp_rank=\"0\",engine_type=\"decode\",model_name=\"m\","
        "pp_rank=\"0\",tp_rank=\"0\"} 3.0\n"
        "sglang:num_running_reqs{dp_rank=\"1\",engine_type=\"decode\",model_name=\"m\","
        "pp_rank=\"0\",tp_rank=\"4\"} 2.0\n"
        "sglang:num_running_reqs_offline_batch{tp_rank=\"0\"} 40.0\n"
        "sglang:num_queue_reqs{dp_rank=\"0\",tp_rank=\"0\"} 1.0\n"
        "sglang:num_queue_reqs{dp_rank=\"1\",tp_rank=\"4\"} 0.0\n"
        "sglang:num_grammar_queue_reqs{tp_rank=\"0\"} 9.0\n"
        "sglang:num_decode_prealloc_queue_reqs{dp_rank=\"0\",tp_rank=\"0\"} 2.0\n"
        "sglang:num_decode_transfer_queue_reqs{dp_rank=\"1\",tp_rank=\"4\"} 1.0\n"
        "sglang:num_prefill_prealloc_queue_reqs{dp_rank=\"1\",tp_rank=\"4\"} 7.0\n"
        "sglang:token_usage{dp_rank=\"0\",tp_rank=\"0\"} 0.5\n"
        "sglang:token_usage{dp_rank=\"1\",tp_rank=\"4\"} 0.25\n"
        "sglang:swa_token_usage{tp_rank=\"0\"} 0.99\n";
    vllm_report r;
    char why[200];
    assert_int_equal(parse(page, &r, why), 0);
    assert_int_equal(r.engine, ENGINE_SGLANG);
    assert_string_equal(vllm_engine_name(r.engine), "sglang");
    assert_true(r.running == 5.0);
    assert_true(r.waiting == 4.0);   /* 1 queued + 2 prealloc + 1 transfer */
    assert_true(r.kv == 0.375);
    assert_string_equal(r.kv_series, "sglang:token_usage");
    /* without the PD gauges (an older SGLang) and without token usage */
    assert_int_equal(parse("sglang:num_running_reqs 2.0\nsglang:num_queue_reqs 3.0\n", &r, why),
                     0);
    assert_true(r.running == 2.0 && r.waiting == 3.0 && isnan(r.kv));
    assert_int_equal(parse("sglang:num_running_reqs 2.0\n", &r, why), -1);
    assert_non_null(strstr(why, "no sglang:num_queue_reqs"));
    assert_int_equal(parse("sglang:num_queue_reqs 2.0\nsglang:num_running_reqs -1\n", &r, why),
                     -1);
    assert_non_null(strstr(why, "sglang:num_running_reqs is -1 on line 2"));
    /* one engine per page: both is a misconfigured URL, not a sum */
    assert_int_equal(parse("sglang:num_running_reqs 2.0\nsglang:num_queue_reqs 3.0\n"
                           "vllm:num_requests_running 1\nvllm:num_requests_waiting 1\n",
                           &r, why), -1);
    assert_non_null(strstr(why, "both vLLM"));
}

static void test_unusable_pages(void **state)
{
    (void)state;
    static const struct {
        const char *page, *why;
    } cases[] = {
        {"", "no vllm:num_requests_running in the page (nor sglang:num_running_reqs)"},
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
        cmocka_unit_test(test_vllm_kv),
        cmocka_unit_test(test_sglang),
        cmocka_unit_test(test_unusable_pages),
        cmocka_unit_test(test_resolve_urls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
