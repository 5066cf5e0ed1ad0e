/* fuzz.h - shared by the libFuzzer harnesses in tests/fuzz/ (and by the
 * unit tests that replay their corpora through the same entry points).
 *
 * fuzz_memfile: the loaders under test take a path, so the input goes
 * into a memfd and the path "/proc/self/fd/N" names it: no disk traffic,
 * no temporary left behind by a crash.
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
#include <sys/mman.h>
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

/* Put data into the one memfd of this process (created on first use)
 * and return its path; NULL if the memfd cannot be made. */
static inline const char *fuzz_memfile(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("eldr-fuzz", 0);
        if (fd < 0)
            return NULL;
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0)
        return NULL;
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0)
            return NULL;
        done += (size_t)w;
    }
    return path;
}

#endif
