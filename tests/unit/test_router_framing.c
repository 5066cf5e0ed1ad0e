/* test_router_framing.c - the request framing verdict (framing.h): each
 * rule on the values libmicrohttpd gives, the length read, and the fuzz
 * harness's corpus replayed through its own checks (tests/fuzz/
 * fuzz_framing.c) under the ordinary and ASan builds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "framing.h"
#include "util_replay.h"

#define FUZZ_NO_MAIN
#include "../fuzz/fuzz_framing.c"

/* The verdict on up to four header lines (NULL name ends them). */
static int judge(const char *const *lines, framing *f, framing_verdict *v)
{
    framing_init(f);
    for (int i = 0; i < 8 && lines[i]; i += 2)
        framing_header(f, lines[i], lines[i + 1]);
    return framing_judge(f, v);
}

typedef struct verdict_case {
    const char *lines[9];
    int status;
    const char *param;
    const char *says;            /* a piece of the message */
} verdict_case;

static void test_verdicts(void **state)
{
    (void)state;
    static const verdict_case cases[] = {
        {{"Content-Length", "5", NULL}, 0, NULL, NULL},
        {{"content-length", "0", NULL}, 0, NULL, NULL},
        {{"Content-Length", " \t42", NULL}, 0, NULL, NULL},          /* leading OWS */
        {{"Host", "x", "Accept", "*/*", NULL}, 0, NULL, NULL},       /* no body */
        {{"Transfer-Encoding", "chunked", NULL}, 0, NULL, NULL},
        {{"Transfer-Encoding", "Chunked ; ext=1", NULL}, 0, NULL, NULL},
        {{"Transfer-Encoding", ", chunked,", NULL}, 0, NULL, NULL},  /* empty elements */
        {{"Content-Length", "+5", NULL}, 400, "Content-Length", "'+5' is not a number"},
        {{"Content-Length", "-1", NULL}, 400, "Content-Length", "'-1'"},
        {{"Content-Length", "5x", NULL}, 400, "Content-Length", "'5x'"},
        {{"Content-Length", "1 2", NULL}, 400, "Content-Length", "'1 2'"},
        {{"Content-Length", "5 ", NULL}, 400, "Content-Length", "'5 '"},
        {{"Content-Length", "", NULL}, 400, "Content-Length", "''"},
        {{"Content-Length", "0x5", NULL}, 400, "Content-Length", "'0x5'"},
        {{"Content-Length", "5, 5", NULL}, 400, "Content-Length", "'5, 5'"},
        {{"Content-Length", "5\r\n", NULL}, 400, "Content-Length", "'5?" "?'"},
        {{"Content-Length", "18446744073709551616", NULL}, 413, "Content-Length", "2^64-1"},
        {{"Content-Length", "99999999999999999999999", NULL}, 413, "Content-Length", "past"},
        {{"Content-Length", "5", "Content-Length", "5", NULL}, 400, "Content-Length",
         "2 Content-Length headers"},
        {{"Content-Length", "5", "Transfer-Encoding", "chunked", NULL}, 400,
         "Transfer-Encoding", "both given"},
        {{"Transfer-Encoding", "chunked", "Content-Length", "+5", NULL}, 400,
         "Transfer-Encoding", "both given"},
        {{"Transfer-Encoding", "chunked, identity", NULL}, 400, "Transfer-Encoding", "last"},
        {{"Transfer-Encoding", "chunked, chunked", NULL}, 400, "Transfer-Encoding", "once"},
        {{"Transfer-Encoding", "chunked", "Transfer-Encoding", "chunked", NULL}, 400,
         "Transfer-Encoding", "once"},
        {{"Transfer-Encoding", "", NULL}, 400, "Transfer-Encoding", "last"},
        {{"Transfer-Encoding", "gzip, chunked", NULL}, 501, "Transfer-Encoding", "'gzip'"},
        {{"Transfer-Encoding", "gzip", "Transfer-Encoding", "chunked", NULL}, 501,
         "Transfer-Encoding", "'gzip'"},
        {{"Transfer-Encoding", "xchunked", NULL}, 501, "Transfer-Encoding", "'xchunked'"},
        {{"Transfer-Encoding", "identity", NULL}, 501, "Transfer-Encoding", "'identity'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const verdict_case *c = &cases[i];
        framing f;
        framing_verdict v;
        int st = judge(c->lines, &f, &v);
        if (st != c->status)
            fail_msg("case %zu (%s: %s): status %d, wanted %d (%s)", i, c->lines[0],
                     c->lines[1], st, c->status, v.msg);
        if (!c->status) {
            assert_null(v.param);
            continue;
        }
        assert_string_equal(v.param, c->param);
        if (!strstr(v.msg, c->says))
            fail_msg("case %zu: '%s' lacks '%s'", i, v.msg, c->says);
    }
}

/* The length as read: the largest there is, and the first of two lines. */
static void test_length(void **state)
{
    (void)state;
    framing f;
    framing_verdict v;
    const char *max[] = {"Content-Length", "18446744073709551615", NULL};
    assert_int_equal(judge(max, &f, &v), 0);
    assert_true(f.length == 18446744073709551615ULL);
    const char *padded[] = {"Content-Length", "000123", NULL};
    assert_int_equal(judge(padded, &f, &v), 0);
    assert_true(f.length == 123);
    const char *two[] = {"Content-Length", "7", "Content-Length", "9", NULL};
    assert_int_equal(judge(two, &f, &v), 400);
    assert_true(f.lengths == 2 && f.length == 7);
}

static void test_replay_framing(void **state)
{
    (void)state;
    assert_true(corpus_replay("framing", fuzz_framing_one) >= 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_length),
        cmocka_unit_test(test_replay_framing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
