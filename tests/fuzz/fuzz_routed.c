/* fuzz_routed.c - libFuzzer harness: the routed-experts decoder of
 * `eldr capture` (src/core/routed.h) on arbitrary engine
 * answers. The first byte picks the hints (layers, top-k, experts known or
 * not); the rest is the answer body.
 *
 * Promises checked: never a crash or an overread (ASan); a refusal is one
 * line and leaves no ids; an accepted answer has a routing shape, P + D
 * rows with D = max(C - 1, 0), every id below E (or 65536), the k ids of
 * a token and layer distinct unless the layer is 0 in every row (a dense
 * layer, which vLLM leaves as zeros: routed.h), and max_id the largest
 * of them. */
#include <stdlib.h>

#include "../../src/core/routed.h"
#include "err.h"
#include "fuzz.h"

static int fuzz_routed_one(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    routed_hint h = {0};
    if (data[0] & 1)
        h.L = 1 + (data[0] >> 1 & 3);
    if (data[0] & 8)
        h.k = 1 + (data[0] >> 4 & 3);
    if (data[0] & 64)
        h.E = 8;
    routed_t r;
    char err[ELDR_ERRLEN] = "";
    if (routed_decode((const char *)data + 1, size - 1, &h, &r, err, sizeof err) < 0) {
        fuzz_check_err(err, sizeof err);
        fuzz_check(r.ids == NULL);
        return 0;
    }
    fuzz_check(r.L >= 1 && r.k >= 1 && r.ids);
    fuzz_check((!h.L || r.L == h.L) && (!h.k || r.k == h.k));
    fuzz_check(r.prompt_tokens >= 0 && r.completion_tokens >= 0);
    fuzz_check(r.decode_rows == (r.completion_tokens > 0 ? r.completion_tokens - 1 : 0));
    int64_t rows = r.prompt_tokens + r.decode_rows;
    int max = -1;
    /* dense[l]: layer l is 0 in every id of every row */
    uint8_t *dense = calloc((size_t)r.L, 1);
    fuzz_check(dense != NULL);
    for (int l = 0; l < r.L; l++) {
        dense[l] = 1;
        for (int64_t t = 0; t < rows && dense[l]; t++)
            for (int a = 0; a < r.k; a++)
                dense[l] &= r.ids[((size_t)t * (size_t)r.L + (size_t)l) * (size_t)r.k + a] == 0;
    }
    for (int64_t t = 0; t < rows; t++)
        for (int l = 0; l < r.L; l++) {
            const uint16_t *x = r.ids + ((size_t)t * (size_t)r.L + (size_t)l) * (size_t)r.k;
            for (int a = 0; a < r.k; a++) {
                fuzz_check(!h.E || x[a] < h.E);
                max = x[a] > max ? x[a] : max;
                for (int c = 0; c < a; c++)
                    fuzz_check(x[a] != x[c] || dense[l]);
            }
        }
    fuzz_check(max == r.max_id);
    free(dense);
    routed_free(&r);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_routed_one(data, size);
}
#endif
