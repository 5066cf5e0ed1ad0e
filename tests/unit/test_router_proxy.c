/* test_router_proxy.c - proxy mode's pure parts: BLAKE2b (RFC 7693's
 * vector and Python's hashlib as the oracle), the prefill ring (picks
 * computed by an independent Python re-implementation of the reference's
 * PrefixHashRouter), the JSON span scanner, and the proxy's messages: the
 * client's request refusals, eldr_sig cut from every place it can sit,
 * the decode body spliced from the prefill's answer (checked by parsing
 * it), the first events of a stream and the release body. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "jspan.h"
#include "proxy_msg.h"
#include "pool_ring.h"
#include "blake2b.h"
#include "util_replay.h"

#define FUZZ_NO_MAIN
#include "../fuzz/fuzz_proxy_answer.c"
#include "../fuzz/fuzz_proxy_request.c"

static void test_blake2b_rfc7693(void **state)
{
    (void)state;
    static const char want[] = "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
                               "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923";
    uint8_t d[64];
    char hex[129];
    blake2b(d, 64, "abc", 3);
    for (int i = 0; i < 64; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    assert_string_equal(hex, want);
}

/* int.from_bytes(hashlib.blake2b(x, digest_size=8).digest(), "big") */
static void test_blake2b_64_hashlib(void **state)
{
    (void)state;
    char a[300];
    memset(a, 'a', sizeof a);
    assert_true(blake2b_64("hello", 5) == 12085107955937391741ULL);
    assert_true(blake2b_64("http://x:1#3", 12) == 2609017043888245319ULL);
    assert_true(blake2b_64(a, 300) == 10032184493081897378ULL);   /* over two blocks */
    assert_true(blake2b_64(a, 128) == 17322607777553455322ULL);   /* one whole block */
    assert_true(blake2b_64("", 0) == 16476032584258269876ULL);
}

static const struct ring_case {
    const char *key;
    int pick[8];
} ring_cases[] = {
    {"request 0 about topic 0", {2, 2, 2, 0, 2, 2, 2, 2}},
    {"request 1 about topic 7", {0, 1, 0, 0, 0, 0, 0, 0}},
    {"request 2 about topic 14", {1, 1, 0, 1, 1, 1, 1, 1}},
    {"request 3 about topic 21", {0, 1, 0, 0, 0, 0, 0, 0}},
    {"request 4 about topic 28", {1, 1, 0, 1, 1, 1, 1, 1}},
    {"request 5 about topic 35", {2, 2, 2, 0, 2, 2, 2, 2}},
    {"request 6 about topic 42", {2, 2, 2, 0, 2, 2, 2, 2}},
    {"request 7 about topic 49", {1, 1, 0, 1, 1, 1, 1, 1}},
    {"request 8 about topic 56", {2, 2, 2, 0, 2, 2, 2, 2}},
    {"request 9 about topic 63", {0, 1, 0, 0, 0, 0, 0, 0}},
    {"request 10 about topic 70", {0, 1, 0, 0, 0, 0, 0, 0}},
    {"request 11 about topic 77", {1, 1, 0, 1, 1, 1, 1, 1}},
    {"request 12 about topic 84", {2, 2, 2, 0, 2, 2, 2, 2}},
    {"request 13 about topic 91", {1, 1, 0, 1, 1, 1, 1, 1}},
    {"request 14 about topic 98", {0, 1, 0, 0, 0, 0, 0, 0}},
    {"request 15 about topic 105", {0, 1, 0, 0, 0, 0, 0, 0}},
    {"request 16 about topic 112", {0, 1, 0, 0, 0, 0, 0, 0}},
    {"request 17 about topic 119", {2, 2, 2, 0, 2, 2, 2, 2}},
    {"request 18 about topic 126", {2, 2, 2, 0, 2, 2, 2, 2}},
    {"request 19 about topic 133", {1, 1, 0, 1, 1, 1, 1, 1}},
    {"request 20 about topic 140", {1, 1, 0, 1, 1, 1, 1, 1}},
    {"request 21 about topic 147", {2, 2, 2, 0, 2, 2, 2, 2}},
    {"request 22 about topic 154", {2, 2, 2, 0, 2, 2, 2, 2}},
    {"request 23 about topic 161", {0, 1, 0, 0, 0, 0, 0, 0}},
};

static void test_ring_matches_reference(void **state)
{
    (void)state;
    const char *urls[] = {"http://10.0.0.1:8100", "http://10.0.0.2:8100", "http://10.0.0.3:8100"};
    /* [3,2,2] and its turns: kept by the 1.25 gate (3 <= 8/3 x 1.25), not by 1.0 */
    const int64_t loads[8][3] = {{0, 0, 0}, {5, 0, 0}, {0, 5, 0}, {0, 0, 5},
                                 {3, 3, 2}, {3, 2, 2}, {2, 3, 2}, {2, 2, 3}};
    pring r;
    assert_int_equal(pring_init(&r, urls, 3), 0);
    int seen[3] = {0};
    for (size_t i = 0; i < sizeof ring_cases / sizeof ring_cases[0]; i++)
        for (int l = 0; l < 8; l++) {
            int got = pring_pick(&r, ring_cases[i].key, strlen(ring_cases[i].key), loads[l]);
            if (got != ring_cases[i].pick[l])
                fail_msg("key '%s', loads %d: picked %d, the reference %d", ring_cases[i].key,
                         l, got, ring_cases[i].pick[l]);
            seen[got]++;
        }
    assert_true(seen[0] && seen[1] && seen[2]);
    const int64_t idle[3] = {2, 1, 1};
    assert_int_equal(pring_pick(&r, "", 0, idle), 1);   /* no key: the least loaded */
    /* only the first 1024 bytes count */
    char a[2000], b[2000];
    memset(a, 'q', sizeof a);
    memcpy(b, a, sizeof b);
    b[1500] = 'z';
    const int64_t zero[3] = {0, 0, 0};
    assert_int_equal(pring_pick(&r, a, sizeof a, zero), pring_pick(&r, b, sizeof b, zero));
    pring_free(&r);
}

static jspan span(const char *s)
{
    jspan j = {s, strlen(s)};
    return j;
}

static void test_jspan(void **state)
{
    (void)state;
    jspan m, v;
    const char *obj = "{\"a\": 1, \"k\\\"x\": \"q\\\"\", \"b\" : [1, {\"c\": null}], \"d\":\"e\"}";
    assert_int_equal(js_member(span(obj), "b", &m, &v), 1);
    assert_int_equal(v.n, strlen("[1, {\"c\": null}]"));
    assert_memory_equal(v.p, "[1, {\"c\": null}]", v.n);
    assert_int_equal(js_array_len(v), 2);
    assert_int_equal(js_member(span(obj), "d", &m, &v), 1);
    assert_memory_equal(m.p, "\"d\":\"e\"", m.n);
    assert_int_equal(js_member(span(obj), "c", &m, &v), 0);      /* nested: not a member */
    assert_int_equal(js_member(span("{}"), "a", &m, &v), 0);
    assert_int_equal(js_array_len(span("[]")), 0);
    assert_int_equal(js_array_len(span("[ 1 , 2 ,3 ]")), 3);
    /* UTF-8 and escaped pairs are strings like any other */
    const char *good[] = {"[\"caf\xc3\xa9\"]", "[\"\xf0\x9f\x98\x80\"]",
                          "[\"\\ud83d\\ude00\"]", "[\"\\u00e9\\u0000\"]"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        if (js_array_len(span(good[i])) != 1)
            fail_msg("'%s' should be one string", good[i]);
    /* malformed */
    const char *bad[] = {"{\"a\" 1}", "{\"a\": }", "{\"a\": 1,}", "{\"a\": tru}", "{\"a\": \"x",
                         "{\"a\": [1, 2}", "{\"a\": \"\x01\"}", "[1 2]", "{a: 1}",
                         /* not UTF-8: a bad continuation, overlong, a surrogate, cut short */
                         "{\"a\": \"\xc3\x28\"}", "{\"a\": \"\xc0\xaf\"}",
                         "{\"a\": \"\xed\xa0\x80\"}", "{\"a\": \"\xe2\x82\"}",
                         /* a \u surrogate alone or reversed */
                         "{\"a\": \"\\ud83d\"}", "{\"a\": \"\\ude00\\ud83d\"}",
                         "{\"a\": \"\\ud83d\\u0041\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int got = bad[i][0] == '[' ? (int)js_array_len(span(bad[i]))
                                   : js_member(span(bad[i]), "zz", &m, &v);
        if (got != -1)
            fail_msg("'%s' should be malformed", bad[i]);
    }
    /* long strings (checked eight bytes at a time): one bad byte anywhere */
    for (int pos = 0; pos < 40; pos++) {
        char str[64];
        const unsigned char bytes[] = {0x1f, 0x01, 0xff, 0x80, 0x20, 0x7e, 0x7f};
        for (size_t b = 0; b < sizeof bytes; b++) {
            memset(str, 'a', sizeof str);
            str[0] = '[';
            str[1] = '"';
            str[2 + pos] = (char)bytes[b];
            memcpy(str + 42, "\"]", 3);
            int want = bytes[b] >= 0x20 && bytes[b] < 0x80 ? 1 : -1;
            if (js_array_len(span(str)) != want)
                fail_msg("byte 0x%02x at %d: wanted %d", bytes[b], pos, want);
        }
        memset(str, 'a', sizeof str);
        memcpy(str, "[\"", 2);
        memcpy(str + 2 + pos, "\xc3\xa9", 2);   /* two bytes of UTF-8 anywhere */
        memcpy(str + 44, "\"]", 3);
        assert_int_equal(js_array_len(span(str)), 1);
    }
    char deep[300];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 100);
    deep[300 - 1] = '\0';
    assert_null(js_value(deep, deep + strlen(deep)));             /* too deep / unbalanced */
}

static void test_client_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        int chat;
        const char *where;
    } cases[] = {
        {"{nope", 0, "body"},
        {"[1]", 0, "body"},
        {"{\"prompt\": 3}", 0, "prompt"},
        {"{\"prompt\": []}", 0, "prompt"},
        {"{\"prompt\": [\"a\"]}", 0, "prompt"},
        {"{}", 0, "prompt"},
        {"{\"messages\": []}", 1, "messages"},
        {"{\"messages\": [3]}", 1, "messages"},
        {"{\"prompt\": \"x\", \"n\": 2}", 0, "n"},
        {"{\"prompt\": \"x\", \"best_of\": 3}", 0, "best_of"},
        {"{\"prompt\": \"x\", \"echo\": true}", 0, "echo"},
        {"{\"prompt\": \"x\", \"kv_transfer_params\": {}}", 0, "kv_transfer_params"},
        {"{\"prompt\": \"x\", \"max_tokens\": 0}", 0, "max_tokens"},
        {"{\"prompt\": \"x\", \"stream\": \"yes\"}", 0, "stream"},
        {"{\"prompt\": \"x\", \"prompt\": \"y\"}", 0, "body"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pm_client c;
        rb_err e;
        int rc = pm_client_parse(cases[i].body, strlen(cases[i].body),
                                 cases[i].chat ? PM_CHAT : PM_COMPLETIONS, &c, &e);
        if (rc != -1 || e.status != 400 || strcmp(e.where, cases[i].where))
            fail_msg("'%s': rc %d status %d where '%s', wanted 400 at '%s'", cases[i].body, rc,
                     e.status, e.where, cases[i].where);
    }
    pm_client c;
    rb_err e;
    assert_int_equal(pm_client_parse("{\"prompt\": [12, 3, 45]}", 23, PM_COMPLETIONS, &c, &e), 0);
    assert_string_equal(c.key, "12345");     /* the reference's "".join(str(t)) */
    pm_client_free(&c);
    const char *chat = "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, "
                       "{\"role\": \"user\", \"content\": \"hi\"}], \"stream\": true}";
    assert_int_equal(pm_client_parse(chat, strlen(chat), PM_CHAT, &c, &e), 0);
    assert_string_equal(c.key, "be briefhi");
    assert_int_equal(c.stream, 1);
    pm_client_free(&c);
}

/* The text reader and the tree reader of a client's request agree, on
 * bodies the proxy accepts and on each kind of refusal: status, where,
 * message, stream, the prompt key and the flags read later. */
static void test_client_readers_agree(void **state)
{
    (void)state;
    static const char *const completions[] = {
        "{\"prompt\": \"abc\", \"max_tokens\": 4}",
        "{\"prompt\": \"a\\n\\u00e9\\ud83d\\ude00\\\"q\\\"\", \"stream\": null}",
        "{\"prompt\": \"caf\xc3\xa9\", \"return_token_ids\": true, \"stream\": true, "
        "\"stream_options\": {\"include_usage\": true, \"continuous_usage_stats\": true}}",
        "{\"prompt\": [1, -2, 30000000000], \"n\": 1, \"best_of\": null, \"echo\": false}",
        "{\"prompt\": [7], \"stream_options\": {\"include_usage\": 1}, \"logit_bias\": "
        "{\"1\": 2, \"3\": -1}, \"response_format\": {\"type\": \"json\"}}",
        "  {\"prompt\": \"x\"}  \n",
        "{\"pr\\u006fmpt\": \"escaped key\"}",
        "{\"prompt\": \"x\", \"stream_options\": [true]}",
        "{\"prompt\": \"x\", \"suffix\": null, \"prompt_embeds\": false}",
        /* refusals */
        "{nope", "", "[1]", "\"s\"", "{\"prompt\": 3}", "{\"prompt\": []}",
        "{\"prompt\": [\"a\"]}", "{\"prompt\": [1, 2.5]}", "{\"prompt\": [1, true]}", "{}",
        "{\"prompt\": \"x\", \"n\": 2}", "{\"prompt\": \"x\", \"n\": 1.0}",
        "{\"prompt\": \"x\", \"best_of\": \"1\"}", "{\"prompt\": \"x\", \"echo\": true}",
        "{\"prompt\": \"x\", \"echo\": 0}", "{\"prompt\": \"x\", \"use_beam_search\": true}",
        "{\"prompt\": \"x\", \"kv_transfer_params\": {}}",
        "{\"prompt\": \"x\", \"max_tokens\": 0}", "{\"prompt\": \"x\", \"max_tokens\": -3}",
        "{\"prompt\": \"x\", \"max_tokens\": 1e3}", "{\"prompt\": \"x\", \"stream\": \"yes\"}",
        "{\"prompt\": \"x\", \"stream\": 1}", "{\"prompt\": \"x\"} x",
        "{\"prompt\": \"x\", \"prompt\": \"y\"}",
        "{\"prompt\": \"x\", \"o\": {\"a\": 1, \"a\": 2}}",
        "{\"prompt\": \"x\", \"o\": [{\"b\": 1}, {\"c\": 1, \"c\": 1}]}",
        "{\"prompt\": \"\xff\"}", "{\"prompt\": \"\\udc00\"}",
        "{\"prompt\": \"x\", \"stream\": true, \"n\": 3}",
    };
    static const char *const chats[] = {
        "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"content\": [1]}, "
        "{\"content\": \"t\\u0041b\"}], \"stream\": false}",
        "{\"messages\": [{}]}",
        "{\"messages\": []}", "{\"messages\": [3]}", "{\"messages\": {}}", "{}",
        "{\"messages\": [{\"content\": \"a\", \"content\": \"b\"}]}",
    };
    for (int chat = 0; chat < 2; chat++) {
        const char *const *set = chat ? chats : completions;
        size_t n = chat ? sizeof chats / sizeof *chats : sizeof completions / sizeof *completions;
        for (size_t i = 0; i < n; i++) {
            pm_client a, b;
            rb_err ea = {0}, eb = {0};
            size_t len = strlen(set[i]);
            pm_kind kind = chat ? PM_CHAT : PM_COMPLETIONS;
            int ra = pm_client_parse(set[i], len, kind, &a, &ea);
            int rb = pm_client_parse_tree(set[i], len, kind, &b, &eb);
            if (ra != rb || ea.status != eb.status || strcmp(ea.where, eb.where))
                fail_msg("'%s': text reader %d %d '%s' (%s), tree %d %d '%s' (%s)", set[i], ra,
                         ea.status, ea.where, ea.error, rb, eb.status, eb.where, eb.error);
            if (ra < 0) {
                if (strcmp(ea.where, "body") && strcmp(ea.error, eb.error))
                    fail_msg("'%s': '%s' vs '%s'", set[i], ea.error, eb.error);
                continue;
            }
            if (a.stream != b.stream || a.key_len != b.key_len ||
                (a.key_len && memcmp(a.key, b.key, a.key_len)) || a.return_ids != b.return_ids ||
                a.include_usage != b.include_usage || a.continuous_usage != b.continuous_usage)
                fail_msg("'%s': the readers differ (key '%s' vs '%s')", set[i], a.key, b.key);
            pm_client_free(&a);
            pm_client_free(&b);
        }
    }
}

/* A prefill answer with eldr_sig placed at `where` (0 first, 1 middle,
 * 2 last, 3 alone) of kv_transfer_params, in Python's json.dumps style
 * (", " and ": ") or indented. */
static char *prefill_answer(int where, int indent, const char *sig, int continues)
{
    char members[3][200];
    snprintf(members[0], 200, "\"remote_block_ids\": [1, 2]");
    snprintf(members[1], 200, "\"prefill_first_token_id\": 9, \"prefill_prompt_tokens\": 3");
    snprintf(members[2], 200, "\"prefill_continues\": %s", continues ? "true" : "false");
    char sigm[4200];
    snprintf(sigm, sizeof sigm, "\"eldr_sig\": \"%s\"", sig);
    const char *sep = indent ? ",\n      " : ", ";
    char kv[6000] = "";
    if (where == 3) {
        snprintf(kv, sizeof kv, "{%s%s}", indent ? "\n      " : "", sigm);
    } else {
        strcat(kv, "{");
        for (int i = 0, n = 0; i < 4; i++) {
            const char *part = i == where ? sigm : members[i < where ? i : i - 1];
            if (i == 3 && where == 3)
                break;
            if (n++)
                strcat(kv, sep);
            strcat(kv, part);
        }
        strcat(kv, "}");
    }
    char *out = malloc(8000);
    snprintf(out, 8000,
             "{\"id\": \"c\", \"created\": 1700000001, \"choices\": [{\"index\": 0, "
             "\"token_ids\": [9], \"prompt_token_ids\": [5, 6, 7], \"text\": \"x\"}], "
             "\"usage\": {\"prompt_tokens\": 3}, \"kv_transfer_params\": %s}",
             kv);
    return out;
}

static void test_prefill_sig_cut_everywhere(void **state)
{
    (void)state;
    const uint8_t raw[6] = {1, 0, 2, 0, 0x34, 0x12};
    char sig[16];
    b64_encode(raw, sizeof raw, sig);
    const char *client = "{\"prompt\": \"abc\", \"max_tokens\": 4, \"temperature\": 0.5}";
    pm_client c;
    rb_err e;
    assert_int_equal(pm_client_parse(client, strlen(client), PM_COMPLETIONS, &c, &e), 0);
    for (int where = 0; where < 3; where++)
        for (int indent = 0; indent < 2; indent++) {
            char *a = prefill_answer(where, indent, sig, 1);
            pm_prefill p;
            char why[256];
            if (pm_prefill_parse(a, strlen(a), &c, &p, why, sizeof why) < 0)
                fail_msg("eldr_sig at %d (indent %d): %s\n%s", where, indent, why, a);
            assert_int_equal(p.sig_len, 6);
            assert_memory_equal(p.sig, raw, 6);
            assert_true(p.kv.n > 0 && !memmem(p.kv.p, p.kv.n, "eldr_sig", 8));
            assert_null(p.result);   /* no tree on the non-streaming path */
            assert_int_equal(p.continues, 1);
            /* the decode body, spliced: valid JSON with what the decoder needs */
            char *body = pm_decode_body(&c, &p, "rid-1");
            json_error_t je;
            json_t *d = json_loads(body, JSON_REJECT_DUPLICATES, &je);
            if (!d)
                fail_msg("decode body is not JSON (%s): %s", je.text, body);
            json_t *kv = json_object_get(d, "kv_transfer_params");
            json_t *ids = json_pack("[iii]", 5, 6, 7);
            assert_true(json_equal(json_object_get(d, "prompt"), ids));
            json_decref(ids);
            assert_true(json_is_false(json_object_get(d, "add_special_tokens")));
            assert_string_equal(json_string_value(json_object_get(d, "request_id")), "rid-1");
            assert_int_equal(json_integer_value(json_object_get(d, "max_tokens")), 4);
            assert_null(json_object_get(kv, "eldr_sig"));
            assert_int_equal(json_integer_value(json_object_get(kv, "prefill_created")),
                             1700000001);
            assert_true(json_is_true(json_object_get(kv, "prefill_continues")));
            assert_int_equal(json_object_size(kv), 5);
            json_decref(d);
            free(body);
            char *rel = pm_release_body(&p);
            json_t *r = json_loads(rel, 0, &je);
            assert_non_null(r);
            assert_null(json_object_get(r, "eldr_sig"));
            assert_int_equal(json_object_size(r), 4);
            json_decref(r);
            free(rel);
            pm_prefill_free(&p);
            free(a);
        }
    /* eldr_sig alone in the transfer */
    char *a = prefill_answer(3, 0, sig, 1);
    pm_prefill p;
    char why[256];
    assert_int_equal(pm_prefill_parse(a, strlen(a), &c, &p, why, sizeof why), -1);
    assert_non_null(strstr(why, "token history"));   /* it lacks the rest of the handoff */
    free(a);
    /* eldr_sig null: no signature, and cut all the same */
    const char *nul = "{\"choices\": [{\"token_ids\": [2], \"prompt_token_ids\": [1]}], "
                      "\"kv_transfer_params\": {\"prefill_first_token_id\": 2, \"eldr_sig\": null, "
                      "\"prefill_continues\": true, \"prefill_prompt_tokens\": 1}}";
    assert_int_equal(pm_prefill_parse(nul, strlen(nul), &c, &p, why, sizeof why), 0);
    assert_null(p.sig);
    char *body = pm_decode_body(&c, &p, "rid-2");
    assert_non_null(body);
    assert_null(strstr(body, "eldr_sig"));
    free(body);
    pm_prefill_free(&p);
    pm_client_free(&c);
}

static void test_prefill_refusals(void **state)
{
    (void)state;
    pm_client c = {.kind = PM_COMPLETIONS, .protocol = PM_ELDR};
    const char *cases[][2] = {
        {"not json", "not a JSON object"},
        {"[1]", "not a JSON object"},
        {"{\"choices\": []}", "handoff"},
        {"{\"choices\": [{\"token_ids\": [1]}], \"kv_transfer_params\": {\"prefill_first_token_id"
         "\": 2, \"prefill_continues\": true, \"prefill_prompt_tokens\": 0}}", "token history"},
        {"{\"choices\": [{\"token_ids\": [2], \"prompt_token_ids\": [1]}], \"kv_transfer_params"
         "\": {\"prefill_first_token_id\": 2, \"prefill_continues\": true, "
         "\"prefill_prompt_tokens\": 2}}", "prompt_token_ids"},
        {"{\"choices\": [{\"token_ids\": [2], \"prompt_token_ids\": [1]}], \"kv_transfer_params"
         "\": {\"prefill_first_token_id\": 2, \"prefill_continues\": 1, "
         "\"prefill_prompt_tokens\": 1}}", "token history"},
        {"{\"choices\": [{\"token_ids\": [2], \"prompt_token_ids\": [1]}], \"kv_transfer_params"
         "\": {\"prefill_first_token_id\": 2, \"prefill_continues\": true, "
         "\"prefill_prompt_tokens\": 1, \"eldr_sig\": \"***\"}}", "base64"},
        {"{\"choices\": [{\"token_ids\": [2], \"prompt_token_ids\": [1]}], \"kv_transfer_params"
         "\": {\"prefill_first_token_id\": 2, \"prefill_continues\": true, "
         "\"prefill_prompt_tokens\": 1, \"eldr_sig\": 5}}", "base64"},
        {"{\"choices\": [{\"token_ids\": [2], \"prompt_token_ids\": [1]}], \"kv_transfer_params"
         "\": {\"prefill_first_token_id\": 2, \"prefill_continues\": true, "
         "\"prefill_prompt_tokens\": 1, \"eldr_sig\": null, \"eldr_sig\": \"AAAA\"}}", "twice"},
        {"{\"choices\": [{\"token_ids\": [2], \"prompt_token_ids\": [\"1\"]}], "
         "\"kv_transfer_params\": {\"prefill_first_token_id\": 2, \"prefill_continues\": true, "
         "\"prefill_prompt_tokens\": 1}}", "prompt_token_ids"},
        {"{\"choices\": [{\"token_ids\": [2.0], \"prompt_token_ids\": [1]}], "
         "\"kv_transfer_params\": {\"prefill_first_token_id\": 2, \"prefill_continues\": true, "
         "\"prefill_prompt_tokens\": 1}}", "token history"},
        {"{\"choices\": [{\"token_ids\": [2], \"prompt_token_ids\": [1]}], "
         "\"kv_transfer_params\": {\"prefill_first_token_id\": 2, \"prefill_continues\": true, "
         "\"prefill_prompt_tokens\": 1}} x", "not a JSON object"},
        {"{\"choices\": [{\"token_ids\": [2], \"prompt_token_ids\": [1]}, {}], "
         "\"kv_transfer_params\": {\"prefill_first_token_id\": 2, \"prefill_continues\": true, "
         "\"prefill_prompt_tokens\": 1}}", "handoff"},
        /* strings the decoder gets must be JSON: UTF-8, surrogates in pairs */
        {"{\"choices\": [{\"token_ids\": [2], \"prompt_token_ids\": [1]}], "
         "\"kv_transfer_params\": {\"remote_host\": \"h\xff\", \"prefill_first_token_id\": 2, "
         "\"prefill_continues\": true, \"prefill_prompt_tokens\": 1}}", "not a JSON object"},
        {"{\"choices\": [{\"token_ids\": [2], \"prompt_token_ids\": [1]}], "
         "\"kv_transfer_params\": {\"remote_host\": \"\\udc00\", \"prefill_first_token_id\": 2, "
         "\"prefill_continues\": true, \"prefill_prompt_tokens\": 1}}", "not a JSON object"},
        /* a doubled key: the spliced span and the checked value would differ */
        {"{\"kv_transfer_params\": 5, \"choices\": [{\"token_ids\": [2], \"prompt_token_ids"
         "\": [1]}], \"kv_transfer_params\": {\"prefill_first_token_id\": 2, "
         "\"prefill_continues\": true, \"prefill_prompt_tokens\": 1}}", "duplicate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pm_prefill p;
        char why[256] = "";
        if (pm_prefill_parse(cases[i][0], strlen(cases[i][0]), &c, &p, why,
                             sizeof why) != -1 ||
            !strstr(why, cases[i][1]))
            fail_msg("case %zu: wanted a refusal naming '%s', got '%s'", i, cases[i][1], why);
    }
}

/* The prefill and decode bodies are spliced from the client's text; the
 * oracle builds them as a tree (jansson) from the parsed client body. */
static void test_bodies_spliced(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        pm_kind kind;
    } clients[] = {
        {"{\"prompt\": \"abc\", \"max_tokens\": 4, \"temperature\": 0.5}", PM_COMPLETIONS},
        {"{ \"prompt\" : [1, 2, 3], \"stream\": true, \"stream_options\": {\"include_usage\": true},"
         " \"request_id\": \"client-rid\", \"kv_transfer_params\": null, \"truncate_prompt_tokens\": 9,"
         " \"add_special_tokens\": true, \"return_token_ids\": false}", PM_COMPLETIONS},
        {"{\"pr\\u006fmpt\": \"x\", \"max_tokens\": 2, \"str\\u0065am\": true}", PM_COMPLETIONS},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi \\\"q\\\" caf\xc3\xa9\"}],"
         "\n \"max_tokens\": 3}", PM_CHAT},
        {"{\"messages\": [{\"content\": \"x\"}]}", PM_CHAT},
    };
    const char *answer = "{\"created\": 1700000005, \"choices\": [{\"token_ids\": [2], "
                         "\"prompt_token_ids\": [11, 12]}], \"kv_transfer_params\": {"
                         "\"remote_block_ids\": [4], \"prefill_first_token_id\": 2, "
                         "\"prefill_continues\": true, \"prefill_prompt_tokens\": 2}}";
    const char *rid = "r\"id\\1";
    for (size_t i = 0; i < sizeof clients / sizeof clients[0]; i++) {
        pm_client c;
        rb_err e;
        assert_int_equal(pm_client_parse(clients[i].body, strlen(clients[i].body), clients[i].kind,
                                         &c, &e), 0);
        /* the prefill body */
        json_t *want = json_loads(c.text, 0, NULL);
        json_object_set_new(want, "stream", json_false());
        json_object_del(want, "stream_options");
        json_object_set_new(want, "request_id", json_string(rid));
        json_object_set_new(want, "return_token_ids", json_true());
        json_object_set_new(want, "kv_transfer_params",
                            json_pack("{s:b, s:b, s:s, s:b}", "do_remote_decode", 1,
                                      "do_remote_prefill", 0, "transfer_id", "xfer-r\"id\\1",
                                      "prefill_first", 1));
        char *body = pm_prefill_body(&c, rid);
        json_error_t je;
        json_t *got = json_loads(body, JSON_REJECT_DUPLICATES, &je);
        if (!got || !json_equal(got, want))
            fail_msg("client %zu: prefill body %s (%s)", i, body, got ? "differs" : je.text);
        json_decref(got);
        json_decref(want);
        free(body);
        /* the decode body */
        pm_prefill p;
        char why[256];
        assert_int_equal(pm_prefill_parse(answer, strlen(answer), &c, &p, why, sizeof why), 0);
        want = json_loads(c.text, 0, NULL);
        json_object_set_new(want, "request_id", json_string(rid));
        if (clients[i].kind == PM_COMPLETIONS) {
            json_object_set_new(want, "prompt", json_pack("[ii]", 11, 12));
            json_object_set_new(want, "add_special_tokens", json_false());
            json_object_del(want, "truncate_prompt_tokens");
        }
        json_object_set_new(want, "kv_transfer_params",
                            json_pack("{s:[i], s:i, s:b, s:i, s:i}", "remote_block_ids", 4,
                                      "prefill_first_token_id", 2, "prefill_continues", 1,
                                      "prefill_prompt_tokens", 2, "prefill_created", 1700000005));
        body = pm_decode_body(&c, &p, rid);
        got = json_loads(body, JSON_REJECT_DUPLICATES, &je);
        if (!got || !json_equal(got, want))
            fail_msg("client %zu: decode body %s (%s)", i, body, got ? "differs" : je.text);
        json_decref(got);
        json_decref(want);
        free(body);
        pm_prefill_free(&p);
        pm_client_free(&c);
    }
}

static void test_first_events(void **state)
{
    (void)state;
    const char *client = "{\"prompt\": \"abc\", \"stream\": true, \"stream_options\": "
                         "{\"include_usage\": true}}";
    pm_client c;
    rb_err e;
    assert_int_equal(pm_client_parse(client, strlen(client), PM_COMPLETIONS, &c, &e), 0);
    char *a = prefill_answer(1, 0, "AQA=", 0);
    pm_prefill p;
    char why[256];
    assert_int_equal(pm_prefill_parse(a, strlen(a), &c, &p, why, sizeof why), 0);
    size_t n;
    char *ev = pm_first_events(&p, &c, &n);
    assert_int_equal(strlen(ev), n);
    /* the first token, a usage event (include_usage), [DONE]: the prefill ended it */
    assert_true(!strncmp(ev, "data: {", 7));
    assert_non_null(strstr(ev, "\n\ndata: {"));
    assert_non_null(strstr(ev, "\"choices\":[]"));
    assert_true(n > 14 && !strcmp(ev + n - 14, "data: [DONE]\n\n"));
    assert_null(strstr(ev, "kv_transfer_params"));
    assert_null(strstr(ev, "prompt_token_ids"));   /* not asked for */
    free(ev);
    /* the prefill's body for this client: not a stream, the handoff asked */
    char *pb = pm_prefill_body(&c, "r9");
    json_error_t je;
    json_t *j = json_loads(pb, 0, &je);
    assert_true(json_is_false(json_object_get(j, "stream")));
    assert_null(json_object_get(j, "stream_options"));
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(j, "kv_transfer_params"), "transfer_id")),
                        "xfer-r9");
    json_decref(j);
    free(pb);
    pm_prefill_free(&p);
    free(a);
    pm_client_free(&c);
}

/* Stock vLLM's handoff: the prefill asked for one token with null remote
 * fields; the decode gets the request as the client sent it plus the
 * prefill's transfer (or none). */
static void test_vllm_protocol(void **state)
{
    (void)state;
    const char *client = "{\"prompt\": \"abc\", \"max_tokens\": 40, \"min_tokens\": 5, "
                         "\"max_completion_tokens\": 40, \"stream\": true, "
                         "\"stream_options\": {\"include_usage\": true}}";
    pm_client c;
    rb_err e;
    assert_int_equal(pm_client_parse(client, strlen(client), PM_COMPLETIONS, &c, &e), 0);
    c.protocol = PM_VLLM;
    char *pb = pm_prefill_body(&c, "r1");
    json_error_t je;
    json_t *j = json_loads(pb, 0, &je);
    json_t *kv = json_object_get(j, "kv_transfer_params");
    assert_int_equal(json_integer_value(json_object_get(j, "max_tokens")), 1);
    assert_int_equal(json_integer_value(json_object_get(j, "max_completion_tokens")), 1);
    assert_null(json_object_get(j, "min_tokens"));
    assert_null(json_object_get(j, "stream_options"));
    /* the prompt's token ids key a stock engine's blocks (decide_stock_counts) */
    assert_true(json_is_true(json_object_get(j, "return_token_ids")));
    assert_true(json_is_true(json_object_get(kv, "do_remote_decode")));
    assert_true(json_is_null(json_object_get(kv, "remote_engine_id")));
    assert_null(json_object_get(kv, "prefill_first"));
    json_decref(j);
    free(pb);
    const char *answer = "{\"id\": \"x\", \"created\": 5, \"choices\": [{\"text\": \"a\"}], "
                         "\"kv_transfer_params\": {\"do_remote_prefill\": true, \"eldr_sig\": "
                         "\"AQA=\", \"remote_engine_id\": \"e1\", \"remote_block_ids\": [4]}}";
    pm_prefill p;
    char why[256];
    assert_int_equal(pm_prefill_parse(answer, strlen(answer), &c, &p, why, sizeof why), 0);
    assert_int_equal(p.continues, 1);
    assert_int_equal(p.sig_len, 2);
    char *db = pm_decode_body(&c, &p, "r1");
    j = json_loads(db, JSON_REJECT_DUPLICATES, &je);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "prompt")), "abc");
    assert_int_equal(json_integer_value(json_object_get(j, "max_tokens")), 40);
    assert_int_equal(json_integer_value(json_object_get(j, "min_tokens")), 5);
    assert_true(json_is_true(json_object_get(j, "stream")));
    kv = json_object_get(j, "kv_transfer_params");
    assert_int_equal(json_object_size(kv), 3);      /* eldr_sig out, no prefill_created */
    assert_string_equal(json_string_value(json_object_get(kv, "remote_engine_id")), "e1");
    json_decref(j);
    free(db);
    pm_prefill_free(&p);
    /* no handoff: the decode gets the plain request */
    const char *bare = "{\"id\": \"x\", \"choices\": [], \"kv_transfer_params\": null}";
    assert_int_equal(pm_prefill_parse(bare, strlen(bare), &c, &p, why, sizeof why), 0);
    db = pm_decode_body(&c, &p, "r1");
    j = json_loads(db, 0, &je);
    assert_non_null(j);
    assert_null(json_object_get(j, "kv_transfer_params"));
    json_decref(j);
    free(db);
    pm_prefill_free(&p);
    const char *badkv = "{\"kv_transfer_params\": [1]}";
    assert_int_equal(pm_prefill_parse(badkv, strlen(badkv), &c, &p, why, sizeof why), -1);
    /* checked on the text, with no tree: every value, anywhere, as jansson
     * would; a key eldrd reads given twice */
    static const struct { const char *answer, *why; } refused[] = {
        {"{\"kv_transfer_params\": {}, \"kv_transfer_params\": null}", "twice"},
        {"{\"choices\": [{\"text\": \"a\x01\"}]}", "invalid JSON near byte"},
        {"{\"choices\": [{\"routed_experts\": [[[1, 2]]], \"x\": tru}]}", "invalid JSON"},
        {"{\"a\": 1} x", "invalid JSON"},
        {"{\"a\": \"\xff\"}", "invalid JSON"},
        {"[1]", "another JSON value"},
        {"nope", "not JSON"},
        {"{\"kv_transfer_params\": 3}", "not an object"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        const char *a = refused[i].answer;
        assert_int_equal(pm_prefill_parse(a, strlen(a), &c, &p, why, sizeof why), -1);
        if (!strstr(why, refused[i].why))
            fail_msg("%s: %s", a, why);
    }
    pm_client_free(&c);
}

/* The fuzz harness's corpus (tests/fuzz/corpus/proxy_answer: the seeds
 * and what the fuzzer found, a newline in a refusal) through its checks. */
static void test_fuzz_corpus(void **state)
{
    (void)state;
    assert_true(corpus_replay("proxy_answer", fuzz_proxy_one) >= 5);
    assert_true(corpus_replay("proxy_request", fuzz_request_one) >= 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blake2b_rfc7693),
        cmocka_unit_test(test_blake2b_64_hashlib),
        cmocka_unit_test(test_ring_matches_reference),
        cmocka_unit_test(test_jspan),
        cmocka_unit_test(test_client_refusals),
        cmocka_unit_test(test_prefill_sig_cut_everywhere),
        cmocka_unit_test(test_prefill_refusals),
        cmocka_unit_test(test_first_events),
        cmocka_unit_test(test_vllm_protocol),
        cmocka_unit_test(test_bodies_spliced),
        cmocka_unit_test(test_client_readers_agree),
        cmocka_unit_test(test_fuzz_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
