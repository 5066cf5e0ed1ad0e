/* fuzz_npz.c - libFuzzer harness: import_npz (the reference calibration
 * capture, a zip of .npy arrays) on arbitrary bytes.
 *
 * Promises checked: never a crash, overread or leak; a refusal is one line
 * and leaves *out NULL; an accepted capture is a trace that passes
 * trace_validate.
 *
 * Byte mutations of a zip mostly break its CRCs, so the arrays inside
 * would never change. A custom mutator (libFuzzer only) therefore opens
 * the zip, mutates one entry's bytes (a .npy: its header or its data),
 * and writes the zip again with correct CRCs; one mutation in four stays
 * a plain byte mutation, for the zip layer itself. The seeds are real
 * captures (tests/fixtures/import). */
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
#include <zip.h>

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max, unsigned int seed);

#define NPZ_MAX_ENTRIES 16
#define NPZ_GROW 256 /* bytes an entry may grow by in one mutation */

/* Read every entry of the zip in data; -1 when it is not a readable zip. */
static int npz_entries(const uint8_t *data, size_t size, char **names, uint8_t **bytes,
                       size_t *lens, int *n)
{
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(data, size, 0, &ze);
    zip_t *z = src ? zip_open_from_source(src, ZIP_RDONLY, &ze) : NULL;
    if (!z) {
        if (src)
            zip_source_free(src);
        zip_error_fini(&ze);
        return -1;
    }
    zip_int64_t count = zip_get_num_entries(z, 0);
    int rc = count > 0 && count <= NPZ_MAX_ENTRIES ? 0 : -1;
    *n = 0;
    for (zip_int64_t i = 0; rc == 0 && i < count; i++) {
        zip_stat_t st;
        zip_file_t *f = NULL;
        if (zip_stat_index(z, (zip_uint64_t)i, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) ||
            st.size > (1u << 20) || !(f = zip_fopen_index(z, (zip_uint64_t)i, 0))) {
            rc = -1;
            break;
        }
        bytes[i] = malloc(st.size + NPZ_GROW);
        names[i] = strdup(st.name);
        lens[i] = (size_t)st.size;
        *n = (int)i + 1;
        if (zip_fread(f, bytes[i], st.size) != (zip_int64_t)st.size)
            rc = -1;
        zip_fclose(f);
    }
    zip_close(z);
    zip_error_fini(&ze);
    return rc;
}

/* Write the entries as a stored zip into out (at most max bytes). */
static size_t npz_write(char **names, uint8_t **bytes, size_t *lens, int n, uint8_t *out,
                        size_t max)
{
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(NULL, 0, 0, &ze);
    size_t got = 0;
    if (!src)
        return 0;
    zip_source_keep(src);
    zip_t *z = zip_open_from_source(src, ZIP_TRUNCATE, &ze);
    for (int i = 0; z && i < n; i++) {
        zip_source_t *e = zip_source_buffer(z, bytes[i], lens[i], 0);
        zip_int64_t idx = e ? zip_file_add(z, names[i], e, ZIP_FL_ENC_UTF_8) : -1;
        if (idx < 0) {
            zip_source_free(e);
            zip_discard(z);
            z = NULL;
        } else {
            zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_STORE, 0);
        }
    }
    zip_stat_t st;
    if (z && zip_close(z) == 0 && zip_source_open(src) == 0) {
        if (zip_source_stat(src, &st) == 0 && st.size <= max)
            got = zip_source_read(src, out, st.size) == (zip_int64_t)st.size ? st.size : 0;
        zip_source_close(src);
    } else if (z) {
        zip_discard(z);
    }
    zip_source_free(src);
    zip_error_fini(&ze);
    return got;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max, unsigned int seed)
{
    char *names[NPZ_MAX_ENTRIES] = {0};
    uint8_t *bytes[NPZ_MAX_ENTRIES] = {0};
    size_t lens[NPZ_MAX_ENTRIES], out = 0;
    int n = 0;
    if (seed % 4 != 0 && npz_entries(data, size, names, bytes, lens, &n) == 0) {
        int i = (int)(seed / 4 % (unsigned)n);
        lens[i] = LLVMFuzzerMutate(bytes[i], lens[i], lens[i] + NPZ_GROW);
        out = npz_write(names, bytes, lens, n, data, max);
    }
    for (int i = 0; i < n; i++) {
        free(names[i]);
        free(bytes[i]);
    }
    return out ? out : LLVMFuzzerMutate(data, size, max);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_npz_one(data, size);
}
#endif
