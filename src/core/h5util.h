/* h5util.h - the small HDF5 toolkit shared by the trace and model files.
 *
 * What it adds over the raw HDF5 API:
 *   - the HDF5 error stack is silenced (it would print pages to stderr);
 *     every failure becomes one line in err, prefixed with `where` (the
 *     file name) and naming the attribute or dataset;
 *   - reads check rank, shape and type before touching memory, so a file
 *     that lies costs nothing and never overruns a buffer;
 *   - writes are chunked along the first (row) axis and deflated;
 *   - saves are atomic: everything goes to "<path>.tmp.<pid>", which is
 *     fsync'ed and renamed over path only when the whole file is written.
 *
 * Dataset names may contain one level of group ("tokens/decode_experts");
 * writes create the group on the way. All functions follow err.h: 0 / -1
 * with one line in err. Internal to src/core (it exposes hid_t). */
#ifndef ELDR_H5UTIL_H
#define ELDR_H5UTIL_H

#include <hdf5.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "atomicfile.h"

#define H5U_MAXRANK 4
#define H5U_DEFLATE 4

/* Turn off HDF5's automatic error printing (idempotent). */
void h5u_silence(void);

/* Open an existing file read-only. Returns a file id >= 0, or -1 with
 * "PATH: No such file or directory", "PATH: not an HDF5 file" or
 * "PATH: damaged or truncated HDF5 file". Close with H5Fclose. */
hid_t h5u_open_read(const char *path, char *err, size_t errlen);

/* The root `format` attribute of an HDF5 file ("" when it has none), so
 * a front end can tell a trace from a model before loading either. */
int h5u_file_format(const char *path, char *buf, size_t len, char *err, size_t errlen);

/* 1 if a link (attribute for h5u_has_attr) exists, 0 if not. Intermediate
 * groups of a path are checked one by one, so "a/b" with no "a" is 0. */
int h5u_exists(hid_t loc, const char *name);
int h5u_has_attr(hid_t obj, const char *name);

/* Root (or any object's) attributes. Readers accept scalar or
 * one-element attributes; strings may be variable or fixed length.
 * A missing attribute is an error naming it. */
int h5u_read_str_attr(hid_t obj, const char *name, char *buf, size_t len,
                      const char *where, char *err, size_t errlen);
int h5u_read_int_attr(hid_t obj, const char *name, int64_t *v,
                      const char *where, char *err, size_t errlen);
int h5u_read_double_attr(hid_t obj, const char *name, double *v,
                         const char *where, char *err, size_t errlen);
int h5u_write_str_attr(hid_t obj, const char *name, const char *s,
                       const char *where, char *err, size_t errlen);
int h5u_write_int_attr(hid_t obj, const char *name, int64_t v,
                       const char *where, char *err, size_t errlen);
int h5u_write_double_attr(hid_t obj, const char *name, double v,
                          const char *where, char *err, size_t errlen);

/* Check the root attributes `format` == format and `version` == version,
 * with messages like "PATH: format is 'x', expected 'eldr-trace'" or
 * "PATH: no 'format' attribute (not an eldr-trace file)". */
int h5u_check_format(hid_t file, const char *format, int version,
                     const char *where, char *err, size_t errlen);

/* Rank and dims of a dataset ("PATH: dataset NAME missing" if absent). */
int h5u_shape(hid_t loc, const char *name, int *rank, hsize_t dims[H5U_MAXRANK],
              const char *where, char *err, size_t errlen);

/* Read rows [r0, r1) of the first axis of dataset `name` into buf (which
 * holds (r1 - r0) * prod(dims[1..])) elements of mem_type). `dims` is the
 * shape the caller expects the whole dataset to have; rank, shape and
 * type are checked first. The type check is "readable without loss":
 * same class, and an integer file type must fit the memory type (uint8
 * into uint16 is fine, int64 into uint16 is not). */
int h5u_read_rows(hid_t loc, const char *name, hid_t mem_type, int rank,
                  const hsize_t *dims, hsize_t r0, hsize_t r1, void *buf,
                  const char *where, char *err, size_t errlen);
/* The whole dataset: h5u_read_rows over [0, dims[0]). */
int h5u_read(hid_t loc, const char *name, hid_t mem_type, int rank,
             const hsize_t *dims, void *buf, const char *where, char *err,
             size_t errlen);

/* The same for a list of rows: rows[0..nrows) ascending and distinct,
 * into buf in that order. Read in slabs of whole chunks (about 16 MB),
 * each slab only when it holds a wanted row, so a sparse list inflates
 * only the chunks it touches and the scratch stays one slab. */
int h5u_read_row_list(hid_t loc, const char *name, hid_t mem_type, int rank,
                      const hsize_t *dims, const int64_t *rows, int64_t nrows, void *buf,
                      const char *where, char *err, size_t errlen);

/* Open dataset `name` for many small reads of its rows (h5u_read_open):
 * rank, shape and type checked as h5u_read_rows does, and a chunk cache
 * of its own that holds `chunks` of its chunks (a chunk the cache cannot
 * hold is inflated again by every read that touches it), within
 * [1 MiB, max_bytes] unless one chunk alone is bigger. The dataset id
 * (close with H5Dclose), or -1 with err; *cache_bytes gets the cache's
 * size and *file_bytes the width of one stored element. */
hid_t h5u_open_rows(hid_t loc, const char *name, hid_t mem_type, int rank, const hsize_t *dims,
                    int chunks, size_t max_bytes, size_t *cache_bytes, size_t *file_bytes,
                    const char *where, char *err, size_t errlen);
/* Rows [r0, r1) of a dataset opened by h5u_open_rows into buf as
 * mem_type; dims as given there. 0, or -1 when HDF5 fails (a chunk that
 * no longer inflates: the caller names the file and rows). */
int h5u_read_open(hid_t d, hid_t mem_type, int rank, const hsize_t *dims, hsize_t r0, hsize_t r1,
                  void *buf);

/* The lock of every HDF5 call made while another thread may make one:
 * Debian's libhdf5 is the serial build, not thread safe. The loaders run
 * before any thread starts and do not take it; what reads on threads
 * (trace_tokens.c) does. */
void h5u_lock(void);
void h5u_unlock(void);

/* Rows of the first axis in one chunk of dataset `name` (1 when it is
 * contiguous): what a sampler draws whole to touch few chunks. */
int h5u_chunk_rows(hid_t loc, const char *name, int64_t *rows, const char *where, char *err,
                   size_t errlen);

/* Create dataset `name` with file type file_type and shape dims, chunked
 * as [chunk_rows, dims[1], ...] (chunk_rows 0 picks about 256 KiB per
 * chunk, clamped to the row count) with deflate level H5U_DEFLATE, and
 * write buf (mem_type) into it. Empty datasets are written contiguous. */
int h5u_write(hid_t loc, const char *name, hid_t mem_type, hid_t file_type,
              int rank, const hsize_t *dims, hsize_t chunk_rows, const void *buf,
              const char *where, char *err, size_t errlen);

/* 1-D variable-length UTF-8 string datasets. Reading rows [r0, r1) gives
 * *out, a malloc'd array of r1 - r0 malloc'd strings (NULL entries become
 * ""); fixed-length string datasets are read too. */
int h5u_read_strings(hid_t loc, const char *name, hsize_t n, hsize_t r0, hsize_t r1,
                     char ***out, const char *where, char *err, size_t errlen);
int h5u_write_strings(hid_t loc, const char *name, hsize_t n, const char *const *s,
                      const char *where, char *err, size_t errlen);

/* Atomic save. begin creates "<path>.tmp.<pid>" (failing cleanly when the
 * directory does not exist or is not writable) and sets s->file, an
 * HDF5 file held in memory; write into s->file; then commit (the image
 * is written to the temporary with plain write(2), fsync'ed, renamed over
 * path, and the directory fsync'ed) or abort (the temporary is removed;
 * an old file at path is untouched). commit aborts by itself when it
 * fails. The file is built in memory because HDF5 1.10 cannot survive a
 * failed H5Fclose (disk full leaves a dangling id that crashes at exit);
 * in memory it never fails, and disk errors come back as errno. */
typedef struct h5u_save {
    hid_t file;
    atomic_file out;         /* the temporary the image goes to */
} h5u_save_t;
int h5u_save_begin(h5u_save_t *s, const char *path, char *err, size_t errlen);
int h5u_save_commit(h5u_save_t *s, char *err, size_t errlen);
void h5u_save_abort(h5u_save_t *s);

#endif
