/* fuzz_npz.c - libFuzzer harness: import_npz (the reference calibration
 * capture, a zip of .npy arrays) on arbitrary bytes.
 *
 * Promises checked: never a crash, overread or leak; a refusal is one line
 * and leaves *out NULL; an accepted capture is a trace that passes
 * trace_validate. The seeds are real captures (tests/fixtures/import), so
 * mutations reach the array and metadata checks, not only the zip layer. */
#include "err.h"
#include "fuzz.h"
#include "import.h"
#include "trace.h"

static int fuzz_npz_one(const uint8_t *data, size_t size)
{
    const char *path = fuzz_memfile(data, size);
    if (!path)
        return 0;
    trace_t *t = (trace_t *)1;
    char err[ELDR_ERRLEN] = "";
    if (import_npz(path, &t, err, sizeof err) != 0) {
        fuzz_check(t == NULL);
        fuzz_check_err(err, sizeof err);
        return 0;
    }
    fuzz_check(t != NULL);
    fuzz_check(trace_validate(t, "fuzz", err, sizeof err) == 0);
    trace_free(t);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_npz_one(data, size);
}
#endif
