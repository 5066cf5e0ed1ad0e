/* fuzz.h - shared by the libFuzzer harnesses in tests/fuzz/ (and by the
 * unit tests that replay their corpora through the same entry points).
 *
 * fuzz_memfile: the loaders under test take a path, so the input goes
 * into a scratch file first.
 *
 * fuzz_check: a broken promise is a crash (abort), so libFuzzer keeps the
 * input that shows it. The promises checked on every input are those of
 * err.h: a failure leaves one non-empty line (no newline) in err, and the
 * output pointer NULL. */
#ifndef ELDR_FUZZ_H
#define ELDR_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define fuzz_check(cond)                                                                \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: broken promise: %s\n", __FILE__, __LINE__, #cond);  \
            abort();                                                                    \
        }                                                                               \
    } while (0)

/* The message of a failed call: non-empty, one line, NUL-terminated
 * inside its buffer. */
static inline void fuzz_check_err(const char *err, size_t errlen)
{
    size_t n = strnlen(err, errlen);
    fuzz_check(n > 0 && n < errlen);
    fuzz_check(!memchr(err, '\n', n));
}

/* Put data into this process's scratch file and return its path (NULL
 * if it cannot be written). A file, not a memfd: libhdf5 resolves the
 * real path of what it opens, and "/proc/self/fd/N" of a memfd has none.
 * It lives in $TMPDIR (tests/fuzz/run.sh points that into build-fuzz/)
 * and is removed at exit. */
static char fuzz_path[4096];

static inline void fuzz_memfile_remove(void)
{
    unlink(fuzz_path);
}

static inline const char *fuzz_memfile(const uint8_t *data, size_t size)
{
    if (!fuzz_path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(fuzz_path, sizeof fuzz_path, "%s/eldr-fuzz.%d", dir && *dir ? dir : "/tmp",
                 (int)getpid());
        atexit(fuzz_memfile_remove);
    }
    FILE *f = fopen(fuzz_path, "wb");
    if (!f)
        return NULL;
    size_t w = fwrite(data, 1, size, f);
    if (fclose(f) != 0 || w != size)
        return NULL;
    return fuzz_path;
}

#endif
