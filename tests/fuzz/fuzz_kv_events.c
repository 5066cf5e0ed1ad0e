/* fuzz_kv_events.c - libFuzzer harness: kv_body_parse, eldrd's POST
 * /v1/kv-events (vLLM's KVEventBatch as a JSON object or vLLM's
 * array-like form), and rb_parse_hash_text on the raw bytes.
 *
 * Promises checked: never a crash, overread or leak; a refusal has a
 * 4xx/5xx status and a message, and leaves the batch empty; an accepted
 * batch holds at most RB_EVENTS_MAX events of known kinds, each with at
 * most RB_HASHES_MAX hashes that are all there. */
#include "body.h"
#include "json_in.h"
#include "fuzz.h"

static void kv_check_ok(const kv_batch *b)
{
    fuzz_check(memchr(b->worker, '\0', RB_NAME_MAX) != NULL);
    fuzz_check(b->n >= 0 && b->n <= RB_EVENTS_MAX);
    fuzz_check(b->n == 0 || b->events != NULL);
    uint64_t x = 0;
    for (int i = 0; i < b->n; i++) {
        const kv_event *ev = &b->events[i];
        fuzz_check(ev->kind == KV_STORED || ev->kind == KV_REMOVED || ev->kind == KV_CLEARED);
        fuzz_check(ev->n >= 0 && ev->n <= RB_HASHES_MAX);
        fuzz_check(ev->n == 0 || ev->hashes != NULL);
        fuzz_check(ev->block_size >= 0 && ev->n_tokens >= 0);
        for (int j = 0; j < ev->n; j++)
            x ^= ev->hashes[j]; /* every hash is readable (ASan) */
    }
    (void)x;
}

static int fuzz_kv_events_one(const uint8_t *data, size_t size)
{
    kv_batch b;
    rb_err e;
    memset(&e, 0, sizeof e);
    if (kv_body_parse((const char *)data, size, &b, &e) == 0) {
        kv_check_ok(&b);
        kv_batch_free(&b);
    } else {
        fuzz_check(e.status >= 400 && e.status <= 599);
        fuzz_check(e.error[0] != '\0' && memchr(e.error, '\0', sizeof e.error));
        fuzz_check(b.n == 0 && b.events == NULL);
    }
    /* the hash text reader wants a C string */
    char s[64];
    size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, n);
    s[n] = '\0';
    uint64_t h;
    (void)rb_parse_hash_text(s, &h);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_kv_events_one(data, size);
}
#endif
