/* npy.h - numpy's .npy array format, parsed from a memory buffer.
 *
 * A .npy file is the magic "\x93NUMPY", a version (1.0, 2.0 or 3.0), a
 * header length (2 bytes in 1.0, 4 in 2.0/3.0, little-endian), a Python
 * dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}, then
 * the raw elements. npy_parse understands the dtypes eldr's importers
 * need: bool (b1), signed and unsigned integers of 1, 2, 4 and 8 bytes,
 * float32/float64, fixed unicode '<U n' (UTF-32) and bytes '|S n', in
 * either byte order. Object arrays ('|O', which need pickle), structured
 * dtypes and anything else are refused with a message saying so. A
 * Fortran-ordered array is converted to C order.
 *
 * Ownership: the parsed array points into the caller's buffer, which must
 * outlive it, unless it had to be reordered (fortran_order True), in which
 * case it owns a copy; npy_free releases that copy. Messages name only
 * what is wrong inside the array; callers prefix the file and entry. */
#ifndef ELDR_NPY_H
#define ELDR_NPY_H

#include <stddef.h>
#include <stdint.h>

#define NPY_MAX_DIMS 32

typedef struct npy_array {
    char kind;                     /* 'b' bool, 'i', 'u', 'f', 'U', 'S' */
    int itemsize;                  /* bytes per element (U: 4 per char) */
    int big_endian;                /* 1 when the descr said '>' */
    char descr[32];                /* the descr as written, for messages */
    int version;                   /* major format version: 1, 2 or 3 */
    int ndim;                      /* 0 for a scalar (shape ()) */
    int64_t shape[NPY_MAX_DIMS];
    int64_t count;                 /* product of shape (1 when ndim == 0) */
    const unsigned char *data;     /* count * itemsize bytes, C order */
    unsigned char *owned;          /* non-NULL when data is our own copy */
} npy_array_t;

/* Parse a whole .npy image of len bytes. The data must be exactly
 * count * itemsize bytes long: short data is a truncated file, extra
 * bytes mean the header lies about the shape. */
int npy_parse(const void *buf, size_t len, npy_array_t *out, char *err, size_t errlen);

void npy_free(npy_array_t *a);

/* "(3, 4, 8)": the shape as numpy prints it, into buf. */
const char *npy_shape_str(const npy_array_t *a, char *buf, size_t buflen);

static inline int npy_is_integer(const npy_array_t *a)
{
    return a->kind == 'i' || a->kind == 'u' || a->kind == 'b';
}
static inline int npy_is_number(const npy_array_t *a)
{
    return npy_is_integer(a) || a->kind == 'f';
}
static inline int npy_is_string(const npy_array_t *a)
{
    return a->kind == 'U' || a->kind == 'S';
}

/* Element i (flat, C order) of an integer array. Returns -1 only for an
 * unsigned 8-byte value above INT64_MAX. */
int npy_int_at(const npy_array_t *a, int64_t i, int64_t *out);

/* Element i of a numeric array as a double (integers convert exactly up
 * to 2^53). */
double npy_double_at(const npy_array_t *a, int64_t i);

/* Element i of a string array as UTF-8 into out (NUL-terminated), with
 * numpy's trailing NULs dropped. -1 with a message when the text is not
 * valid (a code point outside Unicode, an embedded NUL) or does not fit
 * in outlen bytes. */
int npy_string_at(const npy_array_t *a, int64_t i, char *out, size_t outlen,
                  char *err, size_t errlen);

#endif
