/* fuzz_centroid_json.c - libFuzzer harness: model_from_json_text, the
 * reference implementation's centroid JSON (docs/model-format.md).
 *
 * Promises checked: never a crash, overread or leak; a refusal is one line
 * and leaves *out NULL; an accepted model passes model_validate; and the
 * documented round trip holds: the export of an imported export is
 * byte-identical to that export. */
#include "err.h"
#include "fuzz.h"
#include "model.h"

static int fuzz_centroid_json_one(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    model_t *m = (model_t *)1, *back = NULL;
    char err[ELDR_ERRLEN] = "", *once = NULL, *twice = NULL;
    if (model_from_json_text(text, "fuzz.json", &m, err, sizeof err) != 0) {
        fuzz_check(m == NULL);
        fuzz_check_err(err, sizeof err);
        free(text);
        return 0;
    }
    fuzz_check(m != NULL);
    fuzz_check(model_validate(m, "fuzz.json", MODEL_NAMES_JSON, err, sizeof err) == 0);
    fuzz_check(model_to_json_text(m, &once, err, sizeof err) == 0);
    fuzz_check(model_from_json_text(once, "once.json", &back, err, sizeof err) == 0);
    fuzz_check(model_to_json_text(back, &twice, err, sizeof err) == 0);
    fuzz_check(strcmp(once, twice) == 0);
    free(once);
    free(twice);
    model_free(back);
    model_free(m);
    free(text);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_centroid_json_one(data, size);
}
#endif
