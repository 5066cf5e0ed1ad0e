/* h5util.c - small HDF5 helpers for the trace and model files (see
 * h5util.h). Every id opened here is closed here, on every path. */
#include "h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"

#define CHUNK_TARGET_BYTES (256u * 1024u)

void h5u_silence(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* Close every object with the file, so an error path that forgets one
 * cannot keep the file open (or unflushed). */
static hid_t strong_fapl(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0)
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    return fapl;
}

hid_t h5u_open_read(const char *path, char *err, size_t errlen)
{
    h5u_silence();
    struct stat st;
    if (stat(path, &st) != 0)
        return eldr_errf(err, errlen, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return eldr_errf(err, errlen, "%s: is a directory, not an HDF5 file", path);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return eldr_errf(err, errlen, "%s: %s", path, strerror(errno));
    close(fd);
    if (H5Fis_hdf5(path) <= 0)
        return eldr_errf(err, errlen, "%s: not an HDF5 file (or truncated before its header)",
                         path);
    hid_t fapl = strong_fapl();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0)
        return eldr_errf(err, errlen, "%s: damaged or truncated HDF5 file", path);
    return f;
}

int h5u_file_format(const char *path, char *buf, size_t len, char *err, size_t errlen)
{
    hid_t f = h5u_open_read(path, err, errlen);
    if (f < 0)
        return -1;
    int rc = 0;
    if (len)
        buf[0] = '\0';
    if (h5u_has_attr(f, "format"))
        rc = h5u_read_str_attr(f, "format", buf, len, path, err, errlen);
    H5Fclose(f);
    return rc;
}

int h5u_exists(hid_t loc, const char *name)
{
    char buf[512];
    size_t n = strlen(name);
    if (n == 0 || n >= sizeof buf)
        return 0;
    memcpy(buf, name, n + 1);
    /* check each prefix "a", "a/b", ... so a missing group is not an error */
    for (char *p = buf;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (H5Lexists(loc, buf, H5P_DEFAULT) <= 0)
                return 0;
            if (c == '\0')
                return 1;
            *p = c;
        }
    }
}

int h5u_has_attr(hid_t obj, const char *name)
{
    return H5Aexists(obj, name) > 0;
}

/* --- attributes ------------------------------------------------------ */

/* Open attribute `name` and check it holds one element of class cls (or
 * cls2, if not H5T_NO_CLASS). */
static hid_t open_attr(hid_t obj, const char *name, H5T_class_t cls, H5T_class_t cls2,
                       const char *what, const char *where, char *err, size_t errlen)
{
    if (!h5u_has_attr(obj, name))
        return eldr_errf(err, errlen, "%s: attribute '%s' missing", where, name);
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return eldr_errf(err, errlen, "%s: attribute '%s' unreadable", where, name);
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    H5T_class_t c = H5Tget_class(t);
    hssize_t npts = H5Sget_simple_extent_npoints(sp);
    H5Tclose(t);
    H5Sclose(sp);
    if (c != cls && (cls2 == H5T_NO_CLASS || c != cls2)) {
        H5Aclose(a);
        return eldr_errf(err, errlen, "%s: attribute '%s' is not %s", where, name, what);
    }
    if (npts != 1) {
        H5Aclose(a);
        return eldr_errf(err, errlen, "%s: attribute '%s' has %lld values, expected one",
                         where, name, (long long)npts);
    }
    return a;
}

int h5u_read_str_attr(hid_t obj, const char *name, char *buf, size_t len,
                      const char *where, char *err, size_t errlen)
{
    hid_t a = open_attr(obj, name, H5T_STRING, H5T_NO_CLASS, "a string", where, err, errlen);
    if (a < 0)
        return -1;
    hid_t ft = H5Aget_type(a), mt = H5Tcopy(H5T_C_S1);
    int rc = -1;
    H5Tset_cset(mt, H5Tget_cset(ft)); /* HDF5 will not convert ASCII <-> UTF-8 */
    if (H5Tis_variable_str(ft) > 0) {
        char *s = NULL;
        H5Tset_size(mt, H5T_VARIABLE);
        if (H5Aread(a, mt, &s) >= 0) {
            snprintf(buf, len, "%s", s ? s : "");
            H5free_memory(s);
            rc = 0;
        }
    } else {
        size_t sz = H5Tget_size(ft);
        char *s = calloc(1, sz + 1);
        H5Tset_size(mt, sz + 1); /* room for the terminator HDF5 adds */
        if (s && H5Aread(a, mt, s) >= 0) {
            snprintf(buf, len, "%s", s);
            rc = 0;
        }
        free(s);
    }
    H5Tclose(mt);
    H5Tclose(ft);
    H5Aclose(a);
    if (rc)
        return eldr_errf(err, errlen, "%s: attribute '%s' unreadable", where, name);
    return 0;
}

int h5u_read_int_attr(hid_t obj, const char *name, int64_t *v,
                      const char *where, char *err, size_t errlen)
{
    hid_t a = open_attr(obj, name, H5T_INTEGER, H5T_NO_CLASS, "an integer", where, err, errlen);
    if (a < 0)
        return -1;
    herr_t rc = H5Aread(a, H5T_NATIVE_INT64, v);
    H5Aclose(a);
    if (rc < 0)
        return eldr_errf(err, errlen, "%s: attribute '%s' unreadable", where, name);
    return 0;
}

int h5u_read_double_attr(hid_t obj, const char *name, double *v,
                         const char *where, char *err, size_t errlen)
{
    hid_t a = open_attr(obj, name, H5T_FLOAT, H5T_INTEGER, "a number", where, err, errlen);
    if (a < 0)
        return -1;
    herr_t rc = H5Aread(a, H5T_NATIVE_DOUBLE, v);
    H5Aclose(a);
    if (rc < 0)
        return eldr_errf(err, errlen, "%s: attribute '%s' unreadable", where, name);
    return 0;
}

/* Write one scalar attribute of type ft from mem (type mt), replacing an
 * existing one. */
static int write_attr(hid_t obj, const char *name, hid_t ft, hid_t mt, const void *mem,
                      const char *where, char *err, size_t errlen)
{
    if (h5u_has_attr(obj, name))
        H5Adelete(obj, name);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, ft, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a >= 0 ? H5Awrite(a, mt, mem) : -1;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    if (rc < 0)
        return eldr_errf(err, errlen, "%s: cannot write attribute '%s'", where, name);
    return 0;
}

int h5u_write_str_attr(hid_t obj, const char *name, const char *s,
                       const char *where, char *err, size_t errlen)
{
    /* variable-length UTF-8, as h5py writes str attributes */
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    int rc = write_attr(obj, name, t, t, &s, where, err, errlen);
    H5Tclose(t);
    return rc;
}

int h5u_write_int_attr(hid_t obj, const char *name, int64_t v,
                       const char *where, char *err, size_t errlen)
{
    return write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v, where, err, errlen);
}

int h5u_write_double_attr(hid_t obj, const char *name, double v,
                          const char *where, char *err, size_t errlen)
{
    return write_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v, where, err, errlen);
}

int h5u_check_format(hid_t file, const char *format, int version,
                     const char *where, char *err, size_t errlen)
{
    char got[128];
    int64_t v;
    if (!h5u_has_attr(file, "format"))
        return eldr_errf(err, errlen, "%s: no 'format' attribute (not an %s file)", where,
                         format);
    if (h5u_read_str_attr(file, "format", got, sizeof got, where, err, errlen))
        return -1;
    if (strcmp(got, format))
        return eldr_errf(err, errlen, "%s: format is '%s', expected '%s'", where, got, format);
    if (!h5u_has_attr(file, "version"))
        return eldr_errf(err, errlen, "%s: no 'version' attribute", where);
    if (h5u_read_int_attr(file, "version", &v, where, err, errlen))
        return -1;
    if (v != version)
        return eldr_errf(err, errlen, "%s: %s version %lld not supported (this eldr reads version %d)",
                         where, format, (long long)v, version);
    return 0;
}

/* --- datasets -------------------------------------------------------- */

static void type_name(hid_t t, char *buf, size_t len)
{
    size_t bits = 8 * H5Tget_size(t);
    switch (H5Tget_class(t)) {
    case H5T_INTEGER:
        snprintf(buf, len, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", bits);
        break;
    case H5T_FLOAT:
        snprintf(buf, len, "float%zu", bits);
        break;
    case H5T_STRING:
        snprintf(buf, len, "string");
        break;
    default:
        snprintf(buf, len, "a non-numeric type");
    }
}

/* Can values of file type ft be read into mt without loss? */
static int type_fits(hid_t ft, hid_t mt)
{
    H5T_class_t fc = H5Tget_class(ft), mc = H5Tget_class(mt);
    if (fc != mc)
        return 0;
    if (fc == H5T_FLOAT)
        return 1;
    if (fc != H5T_INTEGER)
        return 0;
    size_t fs = H5Tget_size(ft), ms = H5Tget_size(mt);
    H5T_sign_t fsg = H5Tget_sign(ft), msg = H5Tget_sign(mt);
    if (fsg == msg)
        return fs <= ms;
    return fsg == H5T_SGN_NONE && fs < ms; /* unsigned into a wider signed */
}

static void dims_str(int rank, const hsize_t *d, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < rank && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%llu", i ? ", " : "[",
                              (unsigned long long)d[i]);
    if (o < len)
        snprintf(buf + o, len - o, "]");
}

/* Open dataset `name`, checking it exists and has rank `rank`; fills dims. */
static hid_t open_dataset(hid_t loc, const char *name, int *rank, hsize_t *dims,
                          const char *where, char *err, size_t errlen)
{
    if (!h5u_exists(loc, name))
        return eldr_errf(err, errlen, "%s: dataset %s missing", where, name);
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
    if (d < 0)
        return eldr_errf(err, errlen, "%s: %s is not a readable dataset", where, name);
    hid_t sp = H5Dget_space(d);
    int r = H5Sget_simple_extent_ndims(sp);
    if (r < 1 || r > H5U_MAXRANK) {
        H5Sclose(sp);
        H5Dclose(d);
        return eldr_errf(err, errlen, "%s: dataset %s has rank %d, expected 1 to %d", where,
                         name, r, H5U_MAXRANK);
    }
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    *rank = r;
    return d;
}

int h5u_shape(hid_t loc, const char *name, int *rank, hsize_t dims[H5U_MAXRANK],
              const char *where, char *err, size_t errlen)
{
    hid_t d = open_dataset(loc, name, rank, dims, where, err, errlen);
    if (d < 0)
        return -1;
    H5Dclose(d);
    return 0;
}

/* Rank, shape and type of an open dataset against what the caller wants. */
static int check_dataset(hid_t d, const char *name, hid_t mem_type, int rank, const hsize_t *want,
                         int got_rank, const hsize_t *got, const char *where, char *err,
                         size_t errlen)
{
    char a[96], b[96];
    if (got_rank != rank || memcmp(got, want, (size_t)rank * sizeof *got)) {
        dims_str(got_rank, got, a, sizeof a);
        dims_str(rank, want, b, sizeof b);
        return eldr_errf(err, errlen, "%s: dataset %s has shape %s, expected %s", where, name,
                         a, b);
    }
    hid_t ft = H5Dget_type(d);
    int ok = type_fits(ft, mem_type);
    type_name(ft, a, sizeof a);
    H5Tclose(ft);
    if (!ok) {
        type_name(mem_type, b, sizeof b);
        return eldr_errf(err, errlen, "%s: dataset %s has type %s, which does not fit %s", where,
                         name, a, b);
    }
    return 0;
}

/* Open dataset `name` and check its rank, shape and type against the
 * caller's: the dataset, or -1 with err. */
static hid_t open_checked(hid_t loc, const char *name, hid_t mem_type, int rank,
                          const hsize_t *dims, const char *where, char *err, size_t errlen)
{
    hsize_t got[H5U_MAXRANK];
    int got_rank;
    hid_t d = open_dataset(loc, name, &got_rank, got, where, err, errlen);
    if (d < 0)
        return -1;
    if (check_dataset(d, name, mem_type, rank, dims, got_rank, got, where, err, errlen)) {
        H5Dclose(d);
        return -1;
    }
    return d;
}

/* One hyperslab [r0, r1) of the first axis into buf. */
static herr_t read_span(hid_t d, hid_t mem_type, int rank, const hsize_t *dims, hsize_t r0,
                        hsize_t r1, void *buf)
{
    hsize_t start[H5U_MAXRANK] = {0}, count[H5U_MAXRANK];
    for (int i = 0; i < rank; i++)
        count[i] = i ? dims[i] : r1 - r0;
    if (r1 == r0)
        return 0;
    start[0] = r0;
    hid_t fsp = H5Dget_space(d), msp = H5Screate_simple(rank, count, NULL);
    herr_t rc = H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL);
    if (rc >= 0)
        rc = H5Dread(d, mem_type, msp, fsp, H5P_DEFAULT, buf);
    H5Sclose(msp);
    H5Sclose(fsp);
    return rc;
}

/* A byte-wide unsigned file type read into uint16 (eldr's expert ids):
 * HDF5's own conversion goes through its type-conversion buffer a
 * megabyte at a time, gathering and scattering; reading the bytes as they
 * are and widening them here is a plain loop. */
static int widen_u8(hid_t d, hid_t mem_type)
{
    hid_t ft = H5Dget_type(d);
    int yes = H5Tequal(mem_type, H5T_NATIVE_UINT16) > 0 && H5Tget_class(ft) == H5T_INTEGER &&
              H5Tget_size(ft) == 1 && H5Tget_sign(ft) == H5T_SGN_NONE;
    H5Tclose(ft);
    return yes;
}

/* Rows [r0, r1) of a uint8 dataset into uint16 buf, in slabs of about
 * 1 MB through one byte scratch. */
static herr_t read_span_widened(hid_t d, int rank, const hsize_t *dims, hsize_t r0, hsize_t r1,
                                void *buf)
{
    size_t row = 1;
    for (int i = 1; i < rank; i++)
        row *= dims[i];
    hsize_t slab = row >= ((size_t)1 << 20) ? 1 : ((size_t)1 << 20) / row;
    uint8_t *tmp = malloc((size_t)(slab < r1 - r0 ? slab : r1 - r0) * row + 1);
    if (!tmp)
        return -1;
    herr_t rc = 0;
    uint16_t *out = buf;
    for (hsize_t a = r0; a < r1 && rc >= 0; a += slab) {
        hsize_t b = a + slab < r1 ? a + slab : r1;
        rc = read_span(d, H5T_NATIVE_UINT8, rank, dims, a, b, tmp);
        size_t n = (size_t)(b - a) * row;
        uint16_t *o = out + (size_t)(a - r0) * row;
        for (size_t i = 0; rc >= 0 && i < n; i++)
            o[i] = tmp[i];
    }
    free(tmp);
    return rc;
}

int h5u_read_rows(hid_t loc, const char *name, hid_t mem_type, int rank,
                  const hsize_t *dims, hsize_t r0, hsize_t r1, void *buf,
                  const char *where, char *err, size_t errlen)
{
    hid_t d = open_checked(loc, name, mem_type, rank, dims, where, err, errlen);
    if (d < 0)
        return -1;
    if (r0 > r1 || r1 > dims[0]) {
        H5Dclose(d);
        return eldr_errf(err, errlen, "%s: dataset %s: rows [%llu, %llu) outside [0, %llu)",
                         where, name, (unsigned long long)r0, (unsigned long long)r1,
                         (unsigned long long)dims[0]);
    }
    herr_t rc = widen_u8(d, mem_type) ? read_span_widened(d, rank, dims, r0, r1, buf)
                                      : read_span(d, mem_type, rank, dims, r0, r1, buf);
    H5Dclose(d);
    if (rc < 0)
        return eldr_errf(err, errlen, "%s: dataset %s: read failed (damaged file?)", where, name);
    return 0;
}

/* Rows of the first axis per chunk (1 for a contiguous dataset). */
static hsize_t chunk_rows_of(hid_t d)
{
    hsize_t chunk[H5U_MAXRANK] = {1};
    hid_t pl = H5Dget_create_plist(d);
    if (pl >= 0 && H5Pget_layout(pl) == H5D_CHUNKED &&
        H5Pget_chunk(pl, H5U_MAXRANK, chunk) < 1)
        chunk[0] = 1;
    if (pl >= 0)
        H5Pclose(pl);
    return chunk[0] ? chunk[0] : 1;
}

int h5u_chunk_rows(hid_t loc, const char *name, int64_t *rows, const char *where, char *err,
                   size_t errlen)
{
    hsize_t dims[H5U_MAXRANK];
    int rank;
    hid_t d = open_dataset(loc, name, &rank, dims, where, err, errlen);
    if (d < 0)
        return -1;
    *rows = (int64_t)chunk_rows_of(d);
    H5Dclose(d);
    return 0;
}

static pthread_mutex_t h5_lock = PTHREAD_MUTEX_INITIALIZER;

void h5u_lock(void)
{
    pthread_mutex_lock(&h5_lock);
}

void h5u_unlock(void)
{
    pthread_mutex_unlock(&h5_lock);
}

/* The smallest prime >= n: HDF5 hashes chunks into nslots slots and asks
 * for a prime about 100 times the chunks the cache holds. */
static size_t prime_at_least(size_t n)
{
    for (;; n++) {
        size_t d = 2;
        while (d * d <= n && n % d)
            d++;
        if (n >= 2 && d * d > n)
            return n;
    }
}

hid_t h5u_open_rows(hid_t loc, const char *name, hid_t mem_type, int rank, const hsize_t *dims,
                    int chunks, size_t max_bytes, size_t *cache_bytes, size_t *file_bytes,
                    const char *where, char *err, size_t errlen)
{
    hid_t d = open_checked(loc, name, mem_type, rank, dims, where, err, errlen);
    if (d < 0)
        return -1;
    hid_t ft = H5Dget_type(d);
    *file_bytes = H5Tget_size(ft);
    H5Tclose(ft);
    size_t chunk = *file_bytes * chunk_rows_of(d);
    for (int i = 1; i < rank; i++)
        chunk *= dims[i];
    H5Dclose(d);
    size_t want = chunk * (size_t)(chunks > 0 ? chunks : 1), lo = (size_t)1 << 20;
    if (want < lo)
        want = lo;
    if (want > max_bytes)
        want = max_bytes > chunk ? max_bytes : chunk;
    /* w0 stays HDF5's default 0.75: at 1.0 (evict fully read chunks
     * first) libhdf5 1.10.8 kept every partly read chunk past the cache's
     * size, 208 MB against a 2 MiB cache reading every other request */
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (dapl < 0 ||
        H5Pset_chunk_cache(dapl, prime_at_least(100 * (want / (chunk ? chunk : 1)) + 1), want,
                           0.75) < 0 ||
        (d = H5Dopen2(loc, name, dapl)) < 0) {
        if (dapl >= 0)
            H5Pclose(dapl);
        return eldr_errf(err, errlen, "%s: %s is not a readable dataset", where, name);
    }
    H5Pclose(dapl);
    *cache_bytes = want;
    return d;
}

int h5u_read_open(hid_t d, hid_t mem_type, int rank, const hsize_t *dims, hsize_t r0, hsize_t r1,
                  void *buf)
{
    if (r0 > r1 || r1 > dims[0])
        return -1;
    return read_span(d, mem_type, rank, dims, r0, r1, buf) < 0 ? -1 : 0;
}

int h5u_read_row_list(hid_t loc, const char *name, hid_t mem_type, int rank,
                      const hsize_t *dims, const int64_t *rows, int64_t nrows, void *buf,
                      const char *where, char *err, size_t errlen)
{
    hid_t d = open_checked(loc, name, mem_type, rank, dims, where, err, errlen);
    if (d < 0)
        return -1;
    size_t row_bytes = H5Tget_size(mem_type);
    for (int i = 1; i < rank; i++)
        row_bytes *= dims[i];
    for (int64_t i = 0; i < nrows; i++)
        if (rows[i] < 0 || (hsize_t)rows[i] >= dims[0] || (i && rows[i] <= rows[i - 1])) {
            H5Dclose(d);
            return eldr_errf(err, errlen, "%s: dataset %s: row list entry %lld (row %lld) is "
                             "not ascending inside [0, %llu)", where, name, (long long)i,
                             (long long)rows[i], (unsigned long long)dims[0]);
        }
    /* slabs of whole chunks, about 16 MB: each chunk is inflated once,
     * and only the chunks that hold a wanted row are touched */
    hsize_t chunk = chunk_rows_of(d), slab = chunk;
    while (slab * 2 * row_bytes <= ((size_t)16 << 20))
        slab *= 2;
    char *scratch = NULL;
    herr_t rc = 0;
    for (int64_t i = 0; i < nrows && rc >= 0;) {
        hsize_t s1 = ((hsize_t)rows[i] / slab + 1) * slab;
        int64_t j = i;
        while (j + 1 < nrows && (hsize_t)rows[j + 1] < s1)
            j++;
        char *dst = (char *)buf + (size_t)i * row_bytes;
        hsize_t a = (hsize_t)rows[i], b = (hsize_t)rows[j] + 1;
        if (b - a == (hsize_t)(j - i + 1)) {      /* contiguous: straight in */
            rc = read_span(d, mem_type, rank, dims, a, b, dst);
        } else {
            if (!scratch && !(scratch = malloc((size_t)slab * row_bytes))) {
                H5Dclose(d);
                return eldr_errf(err, errlen, "%s: out of memory reading %s", where, name);
            }
            rc = read_span(d, mem_type, rank, dims, a, b, scratch);
            for (int64_t r = i; r <= j && rc >= 0; r++)
                memcpy((char *)buf + (size_t)r * row_bytes,
                       scratch + (size_t)((hsize_t)rows[r] - a) * row_bytes, row_bytes);
        }
        i = j + 1;
    }
    free(scratch);
    H5Dclose(d);
    if (rc < 0)
        return eldr_errf(err, errlen, "%s: dataset %s: read failed (damaged file?)", where, name);
    return 0;
}

int h5u_read(hid_t loc, const char *name, hid_t mem_type, int rank,
             const hsize_t *dims, void *buf, const char *where, char *err,
             size_t errlen)
{
    return h5u_read_rows(loc, name, mem_type, rank, dims, 0, dims[0], buf, where, err, errlen);
}

/* Dataset creation: chunked by rows and deflated, or contiguous if empty. */
static hid_t make_dcpl(int rank, const hsize_t *dims, hsize_t chunk_rows, size_t esize)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t row = esize, chunk[H5U_MAXRANK];
    int empty = 0;
    for (int i = 0; i < rank; i++) {
        chunk[i] = dims[i];
        empty |= dims[i] == 0;
        if (i)
            row *= dims[i];
    }
    if (empty)
        return dcpl;
    if (chunk_rows == 0)
        chunk_rows = row >= CHUNK_TARGET_BYTES ? 1 : CHUNK_TARGET_BYTES / row;
    chunk[0] = chunk_rows < dims[0] ? chunk_rows : dims[0];
    H5Pset_chunk(dcpl, rank, chunk);
    /* byte shuffle groups the high bytes of small counts together:
     * smaller files and faster inflate, and every HDF5 reader has it */
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, H5U_DEFLATE);
    return dcpl;
}

int h5u_write(hid_t loc, const char *name, hid_t mem_type, hid_t file_type,
              int rank, const hsize_t *dims, hsize_t chunk_rows, const void *buf,
              const char *where, char *err, size_t errlen)
{
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = make_dcpl(rank, dims, chunk_rows, H5Tget_size(file_type));
    hid_t d = H5Dcreate2(loc, name, file_type, sp, lcpl, dcpl, H5P_DEFAULT);
    herr_t rc = d < 0 ? -1 : 0;
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    if (d >= 0 && n > 0)
        rc = H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    if (d >= 0 && H5Dclose(d) < 0)
        rc = -1;
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    H5Sclose(sp);
    if (rc < 0)
        return eldr_errf(err, errlen, "%s: cannot write dataset %s", where, name);
    return 0;
}

/* --- strings --------------------------------------------------------- */

static void free_strings(char **s, hsize_t n)
{
    if (!s)
        return;
    for (hsize_t i = 0; i < n; i++)
        free(s[i]);
    free(s);
}

static char *dup_n(const char *s, size_t max)
{
    size_t n = s ? strnlen(s, max) : 0;
    char *d = malloc(n + 1);
    if (d) {
        if (n)
            memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Read the selected rows of an open string dataset into owned strings. */
static int read_string_rows(hid_t d, hid_t ft, hid_t fsp, hid_t msp, hsize_t cnt, char **out)
{
    hid_t mt = H5Tcopy(H5T_C_S1);
    int rc = -1;
    if (H5Tis_variable_str(ft) > 0) {
        char **raw = calloc(cnt, sizeof *raw);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(ft));
        if (raw && H5Dread(d, mt, msp, fsp, H5P_DEFAULT, raw) >= 0) {
            rc = 0;
            for (hsize_t i = 0; i < cnt; i++)
                if (!(out[i] = dup_n(raw[i], (size_t)-1)))
                    rc = -1;
            H5Dvlen_reclaim(mt, msp, H5P_DEFAULT, raw);
        }
        free(raw);
    } else {
        size_t sz = H5Tget_size(ft);
        char *raw = calloc(cnt, sz);
        H5Tset_size(mt, sz);
        H5Tset_cset(mt, H5Tget_cset(ft));
        H5Tset_strpad(mt, H5T_STR_NULLPAD);
        if (raw && H5Dread(d, mt, msp, fsp, H5P_DEFAULT, raw) >= 0) {
            rc = 0;
            for (hsize_t i = 0; i < cnt; i++)
                if (!(out[i] = dup_n(raw + i * sz, sz)))
                    rc = -1;
        }
        free(raw);
    }
    H5Tclose(mt);
    return rc;
}

int h5u_read_strings(hid_t loc, const char *name, hsize_t n, hsize_t r0, hsize_t r1,
                     char ***out, const char *where, char *err, size_t errlen)
{
    hsize_t dims[H5U_MAXRANK];
    int rank;
    *out = NULL;
    hid_t d = open_dataset(loc, name, &rank, dims, where, err, errlen);
    if (d < 0)
        return -1;
    hid_t ft = H5Dget_type(d);
    int rc = -1;
    if (H5Tget_class(ft) != H5T_STRING)
        eldr_errf(err, errlen, "%s: dataset %s is not a string dataset", where, name);
    else if (rank != 1 || dims[0] != n)
        eldr_errf(err, errlen, "%s: dataset %s has %llu entries, expected %llu", where, name,
                  rank == 1 ? (unsigned long long)dims[0] : 0ull, (unsigned long long)n);
    else if (r0 > r1 || r1 > n)
        eldr_errf(err, errlen, "%s: dataset %s: rows [%llu, %llu) outside [0, %llu)", where,
                  name, (unsigned long long)r0, (unsigned long long)r1, (unsigned long long)n);
    else
        rc = 0;
    hsize_t cnt = r1 - r0;
    char **s = rc ? NULL : calloc(cnt ? cnt : 1, sizeof *s);
    if (!rc && !s)
        rc = eldr_errf(err, errlen, "%s: out of memory for %s", where, name);
    if (!rc && cnt > 0) {
        hid_t fsp = H5Dget_space(d), msp = H5Screate_simple(1, &cnt, NULL);
        if (H5Sselect_hyperslab(fsp, H5S_SELECT_SET, &r0, NULL, &cnt, NULL) < 0 ||
            read_string_rows(d, ft, fsp, msp, cnt, s) < 0)
            rc = eldr_errf(err, errlen, "%s: dataset %s: read failed (damaged file?)", where,
                           name);
        H5Sclose(msp);
        H5Sclose(fsp);
    }
    H5Tclose(ft);
    H5Dclose(d);
    if (rc) {
        free_strings(s, cnt);
        return -1;
    }
    *out = s;
    return 0;
}

int h5u_write_strings(hid_t loc, const char *name, hsize_t n, const char *const *s,
                      const char *where, char *err, size_t errlen)
{
    const char **v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return eldr_errf(err, errlen, "%s: out of memory writing %s", where, name);
    for (hsize_t i = 0; i < n; i++)
        v[i] = s[i] ? s[i] : "";
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    /* vlen strings live in the global heap; chunking only groups their
     * references, so a modest chunk is plenty */
    int rc = h5u_write(loc, name, t, t, 1, &n, 4096, v, where, err, errlen);
    H5Tclose(t);
    free(v);
    return rc;
}

/* --- atomic save ----------------------------------------------------- */

#define IMAGE_INCREMENT (4u << 20)

int h5u_save_begin(h5u_save_t *s, const char *path, char *err, size_t errlen)
{
    h5u_silence();
    s->file = -1;
    if (atomic_file_begin(&s->out, path, err, errlen))
        return -1;
    /* the core driver without backing store: the file lives in memory */
    hid_t fapl = strong_fapl();
    H5Pset_fapl_core(fapl, IMAGE_INCREMENT, 0);
    s->file = H5Fcreate(s->out.tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (s->file < 0) {
        h5u_save_abort(s);
        return eldr_errf(err, errlen, "%s: cannot create an HDF5 file", path);
    }
    return 0;
}

void h5u_save_abort(h5u_save_t *s)
{
    if (s->file >= 0)
        H5Fclose(s->file);
    s->file = -1;
    atomic_file_abort(&s->out);
}

/* The in-memory file's bytes, then the file closed; NULL on failure. */
static char *take_image(h5u_save_t *s, size_t *size)
{
    char *img = NULL;
    ssize_t n = -1;
    if (H5Fflush(s->file, H5F_SCOPE_GLOBAL) >= 0)
        n = H5Fget_file_image(s->file, NULL, 0);
    if (n > 0 && (img = malloc((size_t)n)) && H5Fget_file_image(s->file, img, (size_t)n) != n) {
        free(img);
        img = NULL;
    }
    if (H5Fclose(s->file) < 0) {
        free(img);
        img = NULL;
    }
    s->file = -1;
    *size = (size_t)(n > 0 ? n : 0);
    return img;
}

int h5u_save_commit(h5u_save_t *s, char *err, size_t errlen)
{
    size_t size;
    char *img = take_image(s, &size);
    if (!img) {
        h5u_save_abort(s);
        return eldr_errf(err, errlen, "%s: cannot build the HDF5 file (out of memory?)",
                         s->out.path);
    }
    int rc = atomic_file_write(&s->out, img, size, err, errlen);
    free(img);
    return rc ? rc : atomic_file_commit(&s->out, err, errlen);
}
