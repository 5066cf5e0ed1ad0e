/* fuzz_proxy_answer.c - libFuzzer harness: eldrd's proxy reading a
 * prefill instance's answer (src/router/proxy_msg.h) - untrusted text
 * from upstream - and building the decode request and the client's first
 * events from it. The first byte picks the protocol (eldr prefill-first
 * or stock vLLM), the kind (completion or chat) and whether the client
 * streams; the rest is the answer body.
 *
 * Promises checked: never a crash or an overread (ASan); a refusal is one
 * line; an accepted answer's decode body and release body are valid JSON
 * objects whose kv_transfer_params carry no eldr_sig (numbers jansson
 * cannot hold are checked by the scanner instead), and the stream's
 * first events are "data: " lines. test_router_proxy replays the corpus. */
#include <jansson.h>

#include "proxy_msg.h"
#include "fuzz.h"

/* JSON that jansson cannot hold: a number past int64 or double, which
 * RFC 8259 allows and the proxy forwards as the prefill wrote it. Then
 * the scanner checks the text and the keys. */
static void check_big_numbers(const char *text, int want_kv)
{
    const char *end = text + strlen(text);
    jspan all = {text, (size_t)(end - text)}, m, kv = all, sig;
    fuzz_check(js_value(text, end) == end && *text == '{');
    fuzz_check(!want_kv || js_member(all, "kv_transfer_params", &m, &kv) >= 0);
    fuzz_check(kv.n == 0 || *kv.p != '{' || js_member(kv, "eldr_sig", &m, &sig) == 0);
}

static void check_json_object(const char *text, int want_kv)
{
    fuzz_check(text != NULL);
    json_error_t je;
    json_t *j = json_loads(text, JSON_ALLOW_NUL, &je);   /* \u0000 is JSON, if not jansson's default */
    if (!j && (strstr(je.text, "too big") || strstr(je.text, "overflow"))) {
        check_big_numbers(text, want_kv);
        return;
    }
    fuzz_check(json_is_object(j));
    json_t *kv = want_kv ? json_object_get(j, "kv_transfer_params") : j;
    fuzz_check(!kv || json_object_get(kv, "eldr_sig") == NULL);
    json_decref(j);
}

static int fuzz_proxy_one(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *client = data[0] & 4
                             ? "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
                               "\"stream\": true, \"stream_options\": {\"include_usage\": true}}"
                             : "{\"prompt\": \"abc\", \"max_tokens\": 8, \"stream\": false}";
    pm_client c;
    rb_err e;
    fuzz_check(pm_client_parse(client, strlen(client), data[0] & 4 ? PM_CHAT : PM_COMPLETIONS,
                               &c, &e) == 0);
    c.protocol = data[0] & 1 ? PM_VLLM : PM_ELDR;
    pm_prefill p;
    char why[256] = "";
    if (pm_prefill_parse((const char *)data + 1, size - 1, &c, &p, why, sizeof why) < 0) {
        fuzz_check_err(why, sizeof why);
        pm_client_free(&c);
        return 0;
    }
    char *body = pm_decode_body(&c, &p, "fuzz-id");
    if (body)
        check_json_object(body, 1);
    free(body);
    char *rel = pm_release_body(&p);
    if (rel)
        check_json_object(rel, 0);
    free(rel);
    if (c.protocol == PM_ELDR) {
        size_t n;
        char *ev = pm_first_events(&p, &c, &n);
        fuzz_check(!ev || (n >= 8 && !strncmp(ev, "data: ", 6) && strlen(ev) == n));
        free(ev);
    }
    pm_prefill_free(&p);
    pm_client_free(&c);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_proxy_one(data, size);
}
#endif
