/* err.h - how errors travel in eldr's core.
 *
 * Every fallible core function takes (char *err, size_t errlen) last and
 * returns 0 on success, -1 on failure with one line in err (no trailing
 * newline) that names what failed and where (file, dataset, row, layer).
 * Nothing in the core prints or exits; the front ends decide. */
#ifndef ELDR_ERR_H
#define ELDR_ERR_H

#include <stddef.h>

#define ELDR_ERRLEN 512

/* Format into err (if non-NULL) and return -1, so call sites read
 * `return eldr_errf(err, errlen, "...", ...);`. */
int eldr_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Physical memory of this machine in bytes (0 if unknown). Loaders refuse
 * sizes above it before allocating anything. */
size_t eldr_phys_mem(void);

/* calloc that refuses (returns NULL) when n*size overflows. */
void *eldr_calloc(size_t n, size_t size);

#endif
