/* fuzz_kv_msgpack.c - libFuzzer harness: kv_msgpack_batch, the payload
 * of vLLM's KV event messages as eldrd's --kv-events subscriber reads it
 * (msgpack, msgspec's map and array forms).
 *
 * Promises checked: never a crash, overread, leak or allocation beyond
 * the input's few times (msgpack-c allocates containers before reading
 * them: kv_msgpack refuses a container that claims more items than bytes
 * are left); a refusal has a reason and leaves the batch empty; an
 * accepted batch holds at most RB_EVENTS_MAX events of known kinds, the
 * hashes and tokens all there. */
#include "fuzz.h"
#include "kv_msgpack.h"

static int fuzz_kv_msgpack_one(const uint8_t *data, size_t size)
{
    kv_batch b;
    int bad;
    char why[256];
    if (kv_msgpack_batch(data, size, &b, &bad, why, sizeof why) == 0) {
        fuzz_check(b.n >= 0 && b.n <= RB_EVENTS_MAX && bad >= 0);
        fuzz_check(bad == 0 || why[0] != '\0');
        uint64_t x = 0;
        for (int i = 0; i < b.n; i++) {
            const kv_event *ev = &b.events[i];
            fuzz_check(ev->kind == KV_STORED || ev->kind == KV_REMOVED || ev->kind == KV_CLEARED);
            fuzz_check(ev->n >= 0 && ev->n <= RB_HASHES_MAX && (ev->n == 0 || ev->hashes));
            fuzz_check(ev->n_tokens >= 0 && (ev->n_tokens == 0 || ev->tokens));
            for (int j = 0; j < ev->n; j++)
                x ^= ev->hashes[j];
            for (int j = 0; j < ev->n_tokens; j++)
                fuzz_check(ev->tokens[j] >= 0);
        }
        (void)x;
        kv_batch_free(&b);
    } else {
        fuzz_check(why[0] != '\0' && b.n == 0 && b.events == NULL);
    }
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_kv_msgpack_one(data, size);
}
#endif
