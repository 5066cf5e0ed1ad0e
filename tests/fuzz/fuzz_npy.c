/* fuzz_npy.c - libFuzzer harness: npy_parse on arbitrary bytes.
 *
 * Promises checked: never a crash or an overread (ASan); a refusal is one
 * line; an accepted array's data lies inside the input (or its own copy)
 * and every element can be read back through the accessors. */
#include <math.h>

#include "err.h"
#include "fuzz.h"
#include "npy.h"

static void npy_touch_all(const npy_array_t *a)
{
    char s[4096], err[ELDR_ERRLEN];
    double sum = 0;
    for (int64_t i = 0; i < a->count; i++) {
        if (npy_is_string(a)) {
            if (npy_string_at(a, i, s, sizeof s, err, sizeof err) == 0)
                fuzz_check(strlen(s) < sizeof s);
            else
                fuzz_check_err(err, sizeof err);
        } else if (npy_is_integer(a)) {
            int64_t v;
            if (npy_int_at(a, i, &v) == 0)
                sum += (double)v;
        } else {
            sum += npy_double_at(a, i);
        }
    }
    (void)sum;
}

static int fuzz_npy_one(const uint8_t *data, size_t size)
{
    npy_array_t a;
    char err[ELDR_ERRLEN] = "";
    if (npy_parse(data, size, &a, err, sizeof err) != 0) {
        fuzz_check_err(err, sizeof err);
        return 0;
    }
    fuzz_check(a.ndim >= 0 && a.ndim <= NPY_MAX_DIMS);
    fuzz_check(a.itemsize > 0 && a.count >= 0);
    int64_t prod = 1;
    for (int i = 0; i < a.ndim; i++) {
        fuzz_check(a.shape[i] >= 0);
        prod *= a.shape[i];
    }
    fuzz_check(prod == a.count);
    size_t bytes = (size_t)a.count * (size_t)a.itemsize;
    if (!a.owned)
        fuzz_check(a.data >= data && a.data + bytes == data + size);
    char shape[256];
    npy_shape_str(&a, shape, sizeof shape);
    fuzz_check(strlen(shape) < sizeof shape);
    npy_touch_all(&a);
    npy_free(&a);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_npy_one(data, size);
}
#endif
