/* test_router_readiness.c - the one readiness answer (readiness.h) that
 * /healthz and the picker's grpc.health.v1 both give, on an engine built
 * by hand (options, pool, endpoints table; no model needed): the roles
 * each mode needs and shows, ejections, the picker's prefill pods (shown,
 * never needed), an endpoints file that does not map, and the drain. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "endpoints_file.h"
#include "log.h"
#include "readiness.h"

typedef struct fixture {
    eldrd_opts o;
    engine_t d;
    char path[64];
} fixture;

static const char *const prefill[] = {"p0", "p1"};
static const char *const decode[] = {"w0", "w1", "w2", "w3"};

/* An engine of K = 4 decode and 2 prefill instances; proxy or picker
 * (with an endpoints file of the 4 decode pods and, when pd, the 2
 * prefill pods too). */
static void setup(fixture *f, int proxy, int picker, int pd)
{
    memset(f, 0, sizeof *f);
    f->o.proxy = proxy;
    f->d.o = &f->o;
    f->d.K = 4;
    atomic_init(&f->d.draining, 0);
    char err[256];
    assert_int_equal(pool_init(&f->d.pool, prefill, 2, decode, 4, err, sizeof err), 0);
    pool_set_policy(&f->d.pool, 1, 30);
    if (!picker)
        return;
    snprintf(f->path, sizeof f->path, "/tmp/eldr_readiness_XXXXXX");
    int fd = mkstemp(f->path);
    assert_true(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    fprintf(fp, "{\"endpoints\": [");
    for (int k = 0; k < 4; k++)
        fprintf(fp, "%s{\"name\": \"w%d\", \"address\": \"10.0.0.%d\", \"port\": \"8000\"}",
                k ? ", " : "", k, k + 1);
    for (int i = 0; pd && i < 2; i++)
        fprintf(fp, ", {\"name\": \"p%d\", \"address\": \"10.0.1.%d\", \"port\": \"8000\", "
                "\"labels\": {\"llm-d.ai/role\": \"prefill\"}}", i, i + 1);
    fprintf(fp, "]}\n");
    fclose(fp);
    f->d.ep = endpoints_table_open(f->path, (char *const *)decode, 4, mono_now(), err,
                                   sizeof err);
    assert_non_null(f->d.ep);
    assert_int_equal(endpoints_table_set_prefill(f->d.ep, (char *const *)prefill, 2, err,
                                                 sizeof err), 0);
}

static void teardown(fixture *f)
{
    if (f->d.ep) {
        endpoints_table_free(f->d.ep);
        unlink(f->path);
    }
    pool_free(&f->d.pool);
}

static void eject_all(fixture *f, pool_role role, int n)
{
    for (int i = 0; i < n; i++)
        pool_eject(&f->d.pool, role, i, mono_now() + 30);
}

/* Without a front end that sends to instances, nothing is needed: ready
 * whatever the pool says; the drain alone makes it not ready. */
static void test_plain(void **state)
{
    (void)state;
    fixture f;
    setup(&f, 0, 0, 0);
    readiness r;
    eject_all(&f, POOL_DECODE, 4);
    readiness_get(&f.d, &r);
    assert_int_equal(r.ready, 1);
    assert_null(r.why);
    assert_int_equal(r.shown[POOL_PREFILL] + r.shown[POOL_DECODE], 0);
    atomic_store(&f.d.draining, 1);
    readiness_get(&f.d, &r);
    assert_int_equal(r.ready, 0);
    assert_string_equal(r.why, "draining");
    teardown(&f);
}

/* Proxy mode needs both roles; the first role with none is named, with
 * the seconds until its first ejection runs out. */
static void test_proxy(void **state)
{
    (void)state;
    fixture f;
    setup(&f, 1, 0, 0);
    readiness r;
    readiness_get(&f.d, &r);
    assert_int_equal(r.ready, 1);
    assert_true(r.shown[POOL_PREFILL] && r.need[POOL_PREFILL]);
    assert_true(r.shown[POOL_DECODE] && r.need[POOL_DECODE]);
    assert_int_equal(r.in[POOL_PREFILL], 2);
    assert_int_equal(r.of[POOL_DECODE], 4);
    eject_all(&f, POOL_PREFILL, 2);
    readiness_get(&f.d, &r);
    assert_int_equal(r.ready, 0);
    assert_string_equal(r.why, "prefill");
    assert_true(r.back > 25 && r.back <= 30);
    pool_restore(&f.d.pool, POOL_PREFILL, 1);
    eject_all(&f, POOL_DECODE, 3);
    readiness_get(&f.d, &r);
    assert_int_equal(r.ready, 1);
    assert_int_equal(r.in[POOL_DECODE], 1);
    eject_all(&f, POOL_DECODE, 4);
    readiness_get(&f.d, &r);
    assert_string_equal(r.why, "decode");
    teardown(&f);
}

/* The picker needs decode alone: a prefill-less fleet is ready and shows
 * no prefill role; prefill pods are shown, and all of them ejected leave
 * it ready; every decode worker ejected does not. */
static void test_picker(void **state)
{
    (void)state;
    fixture f;
    setup(&f, 0, 1, 0);
    readiness r;
    readiness_get(&f.d, &r);
    assert_int_equal(r.ready, 1);
    assert_int_equal(r.shown[POOL_PREFILL], 0);
    assert_true(r.shown[POOL_DECODE] && r.need[POOL_DECODE]);
    eject_all(&f, POOL_PREFILL, 2);   /* no prefill pods: not looked at */
    readiness_get(&f.d, &r);
    assert_int_equal(r.ready, 1);
    eject_all(&f, POOL_DECODE, 4);
    readiness_get(&f.d, &r);
    assert_int_equal(r.ready, 0);
    assert_string_equal(r.why, "decode");
    assert_int_equal(r.in[POOL_DECODE], 0);
    teardown(&f);

    setup(&f, 0, 1, 1);
    readiness_get(&f.d, &r);
    assert_int_equal(r.ready, 1);
    assert_true(r.shown[POOL_PREFILL] && !r.need[POOL_PREFILL]);
    assert_int_equal(r.in[POOL_PREFILL], 2);
    eject_all(&f, POOL_PREFILL, 2);
    readiness_get(&f.d, &r);
    assert_int_equal(r.ready, 1);
    assert_int_equal(r.in[POOL_PREFILL], 0);
    eject_all(&f, POOL_DECODE, 4);
    readiness_get(&f.d, &r);
    assert_string_equal(r.why, "decode");
    atomic_store(&f.d.draining, 1);
    readiness_get(&f.d, &r);
    assert_string_equal(r.why, "draining");
    teardown(&f);
}

/* An endpoints table whose mapping is not the model's K. */
static void test_unmapped(void **state)
{
    (void)state;
    fixture f;
    setup(&f, 0, 1, 0);
    f.d.K = 5;   /* the model the table was mapped for had 4 */
    readiness r;
    readiness_get(&f.d, &r);
    assert_int_equal(r.ready, 0);
    assert_string_equal(r.why, "endpoints");
    f.d.K = 4;
    teardown(&f);
}

int main(void)
{
    log_set_quiet(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_proxy),
        cmocka_unit_test(test_picker),
        cmocka_unit_test(test_unmapped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
