/* fuzz_trace_h5.c - libFuzzer harness: the trace loader (trace_read_header,
 * trace_load, trace_load_rows and the validation behind them) fed HDF5
 * images that a structured generator builds from the fuzz input.
 *
 * Why a generator: mutating HDF5 bytes mostly exercises libhdf5's own
 * parser (not ours, and not hardened). Instead the input bytes drive the
 * choices of a small writer: geometry, which optional datasets exist,
 * per-token expert picks (counts are derived from them, so an unmutated
 * file is valid), and then "faults": attributes dropped, retyped or set to
 * hostile values (0, -1, 2^31, 2^40), datasets dropped, reshaped (a
 * dimension +-1, 0 or 2^40 rows, a rank more or less), retyped (int64,
 * float, string, opaque), or single values replaced (NaN, 65535, -1,
 * an out-of-range expert id). Input layout: byte 0 is the number of
 * faults (mod 8), then the choices of the valid file, two bytes for a row
 * range, then the faults; missing bytes read as 0 (the default choice). The image is built in memory (HDF5 core
 * driver) and handed to the loader through a memfd.
 *
 * Promises checked on every input:
 *  - no crash, overread or leak (ASan/UBSan), and no HDF5 id left open;
 *  - a failure is one line in err and *out stays NULL;
 *  - a file without faults loads, and holds exactly what was written;
 *  - a file that loads passes trace_validate and agrees with its header;
 *  - any row range of a file that loads loads too, equal to those rows. */
#include <hdf5.h>
#include <math.h>

#include "err.h"
#include "fuzz.h"
#include "trace.h"

/* ---- the input as a stream of choices -------------------------------- */

typedef struct th_in {
    const uint8_t *p;
    size_t n, i;
    int faulty;               /* a fault was applied: the file may be bad */
} th_in;

static unsigned th_byte(th_in *z)
{
    return z->i < z->n ? z->p[z->i++] : 0;
}

/* One of n valid variations (no fault). */
static unsigned th_pick(th_in *z, unsigned n)
{
    return th_byte(z) % n;
}

static uint64_t th_u64(th_in *z)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | th_byte(z);
    return v;
}

/* ---- the file being built -------------------------------------------- */

enum { TH_INT, TH_FLOAT, TH_STR, TH_HASH };   /* what a dataset holds */

#define TH_MAXDS 20
#define TH_BIG ((hsize_t)1 << 40)
#define TH_WRITE_MAX (1u << 16) /* elements: larger datasets stay unwritten */

typedef struct th_ds {
    char name[48];
    int kind;                 /* TH_* */
    hid_t ftype;              /* file type (owned when ftype_owned) */
    int ftype_owned;
    int rank;
    hsize_t dims[4];
    int64_t *iv;              /* TH_INT values */
    double *fv;               /* TH_FLOAT values */
    uint64_t *hv;             /* TH_HASH values */
    char **sv;                /* TH_STR values */
    size_t count;             /* elements held in the arrays */
    int as_group;             /* fault: a group where the dataset should be */
    int skip_write;           /* fault: data not written (fill values) */
} th_ds;

typedef struct th_attr {
    const char *name;
    int kind;                 /* 0 int, 1 string, 2 double, 3 two ints, -1 absent */
    int64_t iv;
    char sv[200];
    int fixed_str;            /* fixed-length rather than variable string */
} th_attr;

typedef struct th_file {
    int L, E, k;
    int64_t n;
    th_attr attr[6];
    th_ds ds[TH_MAXDS];
    int nds;
} th_file;

static th_ds *th_add(th_file *f, const char *name, int kind, hid_t ftype, int rank,
                     const hsize_t *dims)
{
    th_ds *d = &f->ds[f->nds++];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->kind = kind;
    d->ftype = ftype;
    d->rank = rank;
    d->count = 1;
    for (int i = 0; i < rank; i++) {
        d->dims[i] = dims[i];
        d->count *= dims[i];
    }
    size_t c = d->count ? d->count : 1;
    if (kind == TH_INT)
        d->iv = calloc(c, sizeof *d->iv);
    else if (kind == TH_FLOAT)
        d->fv = calloc(c, sizeof *d->fv);
    else if (kind == TH_HASH)
        d->hv = calloc(c, sizeof *d->hv);
    else
        d->sv = calloc(c, sizeof *d->sv);
    return d;
}

static th_ds *th_find(th_file *f, const char *name)
{
    for (int i = 0; i < f->nds; i++)
        if (!strcmp(f->ds[i].name, name))
            return &f->ds[i];
    return NULL;
}

static void th_free(th_file *f)
{
    for (int i = 0; i < f->nds; i++) {
        th_ds *d = &f->ds[i];
        if (d->sv)
            for (size_t j = 0; j < d->count; j++)
                free(d->sv[j]);
        free(d->iv);
        free(d->fv);
        free(d->hv);
        free(d->sv);
        if (d->ftype_owned)
            H5Tclose(d->ftype);
    }
}

/* ---- a valid file from the choices ----------------------------------- */

/* Token picks: for each token and layer, k distinct experts (base + j)
 * mod E. Counts [n][L][E] accumulate them; ids [T][L][k] record them. */
static void th_tokens(th_in *z, th_file *f, const int64_t *tokens, int64_t *counts,
                      int64_t *ids, int64_t *offsets)
{
    int64_t row = 0;
    for (int64_t r = 0; r < f->n; r++) {
        offsets[r] = row;
        for (int64_t t = 0; t < tokens[r]; t++, row++)
            for (int l = 0; l < f->L; l++) {
                unsigned base = th_pick(z, (unsigned)f->E);
                for (int j = 0; j < f->k; j++) {
                    int e = (int)((base + (unsigned)j) % (unsigned)f->E);
                    counts[(r * f->L + l) * f->E + e]++;
                    ids[(row * f->L + l) * f->k + j] = e;
                }
            }
    }
    offsets[f->n] = row;
}

static void th_token_set(th_in *z, th_file *f, const char *counts_name, const char *tok_name,
                         const char *ex_name, const char *off_name, int with_tokens)
{
    hsize_t vec[1] = {(hsize_t)f->n}, cube[3] = {(hsize_t)f->n, (hsize_t)f->L, (hsize_t)f->E};
    th_ds *tok = th_add(f, tok_name, TH_INT, H5T_STD_I32LE, 1, vec);
    int64_t T = 0;
    for (int64_t r = 0; r < f->n; r++)
        T += tok->iv[r] = th_pick(z, 4);
    th_ds *cnt = th_add(f, counts_name, TH_INT, H5T_STD_U16LE, 3, cube);
    hsize_t ex[3] = {(hsize_t)T, (hsize_t)f->L, (hsize_t)f->k}, off[1] = {(hsize_t)f->n + 1};
    int64_t *ids = calloc((size_t)(T ? T : 1) * (size_t)(f->L * f->k), sizeof *ids);
    int64_t *offs = calloc((size_t)f->n + 1, sizeof *offs);
    th_tokens(z, f, tok->iv, cnt->iv, ids, offs);
    if (with_tokens) {
        /* uint8 or uint16 ids: both are valid */
        th_ds *e = th_add(f, ex_name, TH_INT, th_pick(z, 2) ? H5T_STD_U8LE : H5T_STD_U16LE, 3, ex);
        memcpy(e->iv, ids, e->count * sizeof *ids);
        th_ds *o = th_add(f, off_name, TH_INT, H5T_STD_I64LE, 1, off);
        memcpy(o->iv, offs, o->count * sizeof *offs);
    }
    free(ids);
    free(offs);
}

static void th_attr_int(th_attr *a, const char *name, int64_t v)
{
    memset(a, 0, sizeof *a);
    a->name = name;
    a->iv = v;
}

static void th_attr_str(th_attr *a, const char *name, const char *v, int fixed)
{
    memset(a, 0, sizeof *a);
    a->name = name;
    a->kind = 1;
    a->fixed_str = fixed;
    snprintf(a->sv, sizeof a->sv, "%s", v);
}

static void th_valid(th_in *z, th_file *f)
{
    memset(f, 0, sizeof *f);
    f->L = 1 + (int)th_pick(z, 3);
    f->E = 2 + (int)th_pick(z, 5);
    f->k = 1 + (int)th_pick(z, (unsigned)(f->E < 3 ? f->E : 3));
    f->n = 1 + th_pick(z, 4);
    th_attr_str(&f->attr[0], "format", TRACE_FORMAT, (int)th_pick(z, 2));
    th_attr_int(&f->attr[1], "version", TRACE_VERSION);
    th_attr_str(&f->attr[2], "model", th_pick(z, 2) ? "fuzz-moe" : "", (int)th_pick(z, 2));
    th_attr_int(&f->attr[3], "layers", f->L);
    th_attr_int(&f->attr[4], "experts", f->E);
    th_attr_int(&f->attr[5], "top_k", f->k);

    unsigned has = th_pick(z, 256);
    int tok_p = has & 1, decode = has & 2, tok_d = decode && (has & 4);
    th_token_set(z, f, "prefill_counts", "prompt_tokens", "tokens/prefill_experts",
                 "tokens/prefill_offsets", tok_p);
    if (decode)
        th_token_set(z, f, "decode_counts", "decode_tokens", "tokens/decode_experts",
                     "tokens/decode_offsets", tok_d);
    if (tok_d && (has & 8)) {
        th_ds *pe = th_find(f, "tokens/decode_experts");
        th_ds *p = th_add(f, "tokens/decode_probs", TH_FLOAT, H5T_IEEE_F32LE, 3, pe->dims);
        for (size_t i = 0; i < p->count; i++)
            p->fv[i] = th_pick(z, 256) / 255.0;
    }
    hsize_t vec[1] = {(hsize_t)f->n}, cube[3] = {(hsize_t)f->n, (hsize_t)f->L, (hsize_t)f->E};
    if (has & 16) {
        th_ds *g = th_add(f, "gate_prob", TH_FLOAT, H5T_IEEE_F32LE, 3, cube);
        for (size_t i = 0; i < g->count; i++)
            g->fv[i] = th_pick(z, 256) / 64.0;
        g = th_add(f, "gate_logit", TH_FLOAT, H5T_IEEE_F32LE, 3, cube);
        for (size_t i = 0; i < g->count; i++)
            g->fv[i] = ((double)th_pick(z, 256) - 128) / 16.0;
    }
    if (has & 32) {
        unsigned m = 1 + th_pick(z, 3);
        hsize_t nm[1] = {m};
        th_ds *names = th_add(f, "label_names", TH_STR, H5T_C_S1, 1, nm);
        for (unsigned i = 0; i < m; i++)
            names->sv[i] = strdup(i == 0 ? "mmlu" : i == 1 ? "gpqa" : "sorry");
        th_ds *lab = th_add(f, "label", TH_INT, H5T_STD_I32LE, 1, vec);
        for (int64_t r = 0; r < f->n; r++)
            lab->iv[r] = th_pick(z, m);
    }
    if (has & 64) {
        th_ds *a = th_add(f, "arrival_s", TH_FLOAT, H5T_IEEE_F64LE, 1, vec);
        double t = 0;
        for (int64_t r = 0; r < f->n; r++)
            a->fv[r] = t += th_pick(z, 256) / 100.0;
        th_ds *ids = th_add(f, "request_id", TH_STR, H5T_C_S1, 1, vec);
        for (int64_t r = 0; r < f->n; r++) {
            char s[32];
            snprintf(s, sizeof s, "req-%lld", (long long)r);
            ids->sv[r] = strdup(s);
        }
    }
    if (has & 128) {
        hsize_t off[1] = {(hsize_t)f->n + 1};
        int64_t nb[8], total = 0;
        for (int64_t r = 0; r < f->n; r++)
            total += nb[r] = th_pick(z, 3);
        hsize_t hd[1] = {(hsize_t)total};
        th_ds *h = th_add(f, "tokens/block_hashes", TH_HASH, H5T_STD_U64LE, 1, hd);
        for (size_t i = 0; i < h->count; i++)
            h->hv[i] = th_u64(z);
        th_ds *o = th_add(f, "tokens/block_offsets", TH_INT, H5T_STD_I64LE, 1, off);
        for (int64_t r = 0; r < f->n; r++)
            o->iv[r + 1] = o->iv[r] + nb[r];
    }
}

/* ---- faults ---------------------------------------------------------- */

static const int64_t th_hostile[] = {0, -1, 65536, INT32_MAX, (int64_t)1 << 31,
                                     (int64_t)1 << 40, INT64_MIN, 2};

static void th_fault_attr(th_in *z, th_file *f)
{
    th_attr *a = &f->attr[th_pick(z, 6)];
    switch (th_pick(z, 6)) {
    case 0: a->kind = -1; break;                                   /* absent */
    case 1: snprintf(a->sv, sizeof a->sv, "%lld", (long long)a->iv); a->kind = 1; break;
    case 2: a->kind = 2; break;                                    /* as a double */
    case 3: a->kind = 3; break;                                    /* two values */
    case 4:
        if (a->kind == 1) {                                        /* a long string */
            memset(a->sv, 'x', sizeof a->sv - 1);
            a->sv[sizeof a->sv - 1] = '\0';
        } else {
            /* one off, saturating: a hostile INT64_MIN may be here */
            if (th_byte(z) & 1)
                a->iv += a->iv < INT64_MAX;
            else
                a->iv -= a->iv > INT64_MIN;
        }
        break;
    default:
        a->kind = 0;
        a->iv = th_hostile[th_pick(z, sizeof th_hostile / sizeof th_hostile[0])];
    }
}

static void th_fault_shape(th_in *z, th_ds *d)
{
    unsigned what = th_pick(z, 6);
    if (what == 4 && d->rank < 4) {          /* one axis more */
        d->dims[d->rank++] = 1 + th_pick(z, 2);
    } else if (what == 5 && d->rank > 1) {   /* one axis less */
        d->rank--;
    } else {
        int i = (int)th_pick(z, (unsigned)d->rank);
        hsize_t v = d->dims[i];
        d->dims[i] = what == 0   ? v + 1
                     : what == 1 ? (v ? v - 1 : 1)
                     : what == 2 ? 0
                     : (th_byte(z) & 1) ? TH_BIG
                                        : (hsize_t)INT32_MAX;
    }
    /* the values follow the new shape: repeated cyclically, or none at all */
    double elems = 1;
    for (int i = 0; i < d->rank; i++)
        elems *= (double)d->dims[i];
    if (elems > TH_WRITE_MAX) {
        d->skip_write = 1;
        return;
    }
    size_t count = (size_t)elems;
    size_t old = d->count, c = count ? count : 1;
    if (d->kind == TH_STR) {
        char **sv = calloc(c, sizeof *sv);
        for (size_t j = 0; j < count; j++)
            sv[j] = strdup(old && d->sv[j % old] ? d->sv[j % old] : "s");
        for (size_t j = 0; j < old; j++)
            free(d->sv[j]);
        free(d->sv);
        d->sv = sv;
    } else {
        size_t es = d->kind == TH_INT ? sizeof(int64_t) : sizeof(double);
        void *src = d->kind == TH_INT ? (void *)d->iv : d->kind == TH_FLOAT ? (void *)d->fv
                                                                             : (void *)d->hv;
        unsigned char *dst = calloc(c, es);
        for (size_t j = 0; old && j < count; j++)
            memcpy(dst + j * es, (unsigned char *)src + (j % old) * es, es);
        free(src);
        d->iv = NULL;
        d->fv = NULL;
        d->hv = NULL;
        if (d->kind == TH_INT)
            d->iv = (int64_t *)dst;
        else if (d->kind == TH_FLOAT)
            d->fv = (double *)dst;
        else
            d->hv = (uint64_t *)dst;
    }
    d->count = count;
}

static void th_fault_type(th_in *z, th_ds *d)
{
    static const struct { int kind; int which; } types[] = {
        {TH_INT, 0}, {TH_INT, 1}, {TH_INT, 2}, {TH_INT, 3}, {TH_FLOAT, 0}, {TH_FLOAT, 1},
        {TH_STR, 0}, {-1, 0},
    };
    unsigned t = th_pick(z, sizeof types / sizeof types[0]);
    hid_t ints[] = {H5T_STD_I8LE, H5T_STD_I64LE, H5T_STD_U32BE, H5T_STD_U64LE};
    hid_t floats[] = {H5T_IEEE_F32BE, H5T_IEEE_F64LE};
    if (d->ftype_owned)         /* a second type fault on this dataset */
        H5Tclose(d->ftype);
    d->ftype_owned = 0;
    if (types[t].kind == TH_INT && d->kind != TH_STR)
        d->ftype = ints[types[t].which];
    else if (types[t].kind == TH_FLOAT && d->kind != TH_STR)
        d->ftype = floats[types[t].which];
    else {
        /* a string type for numbers, a number type for strings, or opaque:
         * written without data (the loader must refuse on the type alone) */
        d->ftype = types[t].kind == -1 ? H5Tcreate(H5T_OPAQUE, 4)
                   : d->kind == TH_STR ? H5Tcopy(H5T_STD_I32LE)
                                       : H5Tcopy(H5T_C_S1);
        d->ftype_owned = 1;
        d->skip_write = 1;
    }
}

static void th_fault_value(th_in *z, th_ds *d)
{
    if (!d->count || d->skip_write)
        return;
    size_t hi = th_byte(z), i = (hi << 8 | th_byte(z)) % d->count;
    unsigned v = th_pick(z, 8);
    if (d->kind == TH_INT) {
        static const int64_t iv[] = {-1, 65535, 1, 0, 255, INT32_MAX, 7, 1 << 20};
        d->iv[i] = v < 2 ? iv[v] : (v < 4 ? d->iv[i] + (v == 2 ? 1 : -1) : iv[v]);
    } else if (d->kind == TH_FLOAT) {
        static const double fv[] = {NAN, INFINITY, -INFINITY, -1, 2, 1e30, 0, -0.0};
        d->fv[i] = fv[v];
    } else if (d->kind == TH_HASH) {
        d->hv[i] = th_u64(z);
    } else {
        free(d->sv[i]);
        d->sv[i] = strdup(v == 0 ? "" : v == 1 ? "\xff\xfe" : "dup");
    }
}

static void th_faults(th_in *z, th_file *f, unsigned nfaults)
{
    static const char *extra[] = {"subject", "tokens", "prefill_counts", "label_names"};
    for (unsigned i = 0; i < nfaults; i++) {
        unsigned op = th_pick(z, 7);
        th_ds *d = f->nds ? &f->ds[th_pick(z, (unsigned)f->nds)] : NULL;
        z->faulty = 1;
        switch (op) {
        case 0: th_fault_attr(z, f); break;
        case 1: if (d) d->as_group = 1; break;                       /* dropped */
        case 2: if (d) th_fault_shape(z, d); break;
        case 3: if (d) th_fault_type(z, d); break;
        case 4: if (d) d->as_group = 2; break;                       /* a group */
        case 5: {                                                    /* an extra */
            const char *name = extra[th_pick(z, 4)];
            if (f->nds < TH_MAXDS && !th_find(f, name)) {
                hsize_t one[1] = {1};
                th_add(f, name, TH_INT, H5T_STD_I32LE, 1, one);
            }
            break;
        }
        default: if (d) th_fault_value(z, d);
        }
    }
}

/* ---- writing the image ----------------------------------------------- */

static void th_write_attr(hid_t file, const th_attr *a)
{
    if (a->kind < 0)
        return;
    hsize_t two[1] = {2};
    hid_t sp = a->kind == 3 ? H5Screate_simple(1, two, NULL) : H5Screate(H5S_SCALAR);
    hid_t t, mt;
    const void *mem;
    int64_t pair[2] = {a->iv, a->iv};
    double dv = (double)a->iv;
    const char *s = a->sv;
    if (a->kind == 1) {
        t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, a->fixed_str ? strlen(a->sv) + 1 : H5T_VARIABLE);
        mt = t;
        mem = a->fixed_str ? (const void *)a->sv : (const void *)&s;
    } else if (a->kind == 2) {
        t = H5Tcopy(H5T_IEEE_F64LE);
        mt = H5T_NATIVE_DOUBLE;
        mem = &dv;
    } else {
        t = H5Tcopy(H5T_STD_I64LE);
        mt = H5T_NATIVE_INT64;
        mem = pair;
    }
    hid_t at = H5Acreate2(file, a->name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (at >= 0) {
        H5Awrite(at, mt, mem);
        H5Aclose(at);
    }
    H5Tclose(t);
    H5Sclose(sp);
}

static void th_write_ds(hid_t file, const th_ds *d)
{
    if (d->as_group == 1)
        return;
    if (!strncmp(d->name, "tokens/", 7) && !H5Lexists(file, "tokens", H5P_DEFAULT))
        H5Gclose(H5Gcreate2(file, "tokens", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (d->as_group == 2) {
        hid_t g = H5Gcreate2(file, d->name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g >= 0)
            H5Gclose(g);
        return;
    }
    hsize_t maxd[4] = {H5S_UNLIMITED, H5S_UNLIMITED, H5S_UNLIMITED, H5S_UNLIMITED}, chunk[4];
    for (int i = 0; i < d->rank; i++)
        chunk[i] = d->dims[i] == 0 ? 1 : d->dims[i] > 64 ? 64 : d->dims[i];
    hid_t sp = H5Screate_simple(d->rank, d->dims, maxd);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, d->rank, chunk);
    hid_t ft = d->ftype, vstr = -1;
    if (d->kind == TH_STR && !d->ftype_owned) {
        vstr = H5Tcopy(H5T_C_S1);
        H5Tset_size(vstr, H5T_VARIABLE);
        H5Tset_cset(vstr, H5T_CSET_UTF8);
        ft = vstr;
    }
    hid_t ds = H5Dcreate2(file, d->name, ft, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds >= 0 && !d->skip_write && d->count > 0) {
        if (d->kind == TH_INT)
            H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, d->iv);
        else if (d->kind == TH_FLOAT)
            H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, d->fv);
        else if (d->kind == TH_HASH)
            H5Dwrite(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, d->hv);
        else
            H5Dwrite(ds, vstr, H5S_ALL, H5S_ALL, H5P_DEFAULT, d->sv);
    }
    if (ds >= 0)
        H5Dclose(ds);
    if (vstr >= 0)
        H5Tclose(vstr);
    H5Pclose(dcpl);
    H5Sclose(sp);
}

/* The file as an HDF5 image in a malloc'd buffer. */
static void *th_image(th_file *f, size_t *size)
{
    static unsigned seq;
    char name[64];
    snprintf(name, sizeof name, "fuzz-%u.h5", seq++);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 16, 0);
    hid_t file = H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (file < 0)
        return NULL;
    for (int i = 0; i < 6; i++)
        th_write_attr(file, &f->attr[i]);
    for (int i = 0; i < f->nds; i++)
        th_write_ds(file, &f->ds[i]);
    H5Fflush(file, H5F_SCOPE_GLOBAL);
    void *buf = NULL;
    ssize_t n = H5Fget_file_image(file, NULL, 0);
    if (n > 0 && (buf = malloc((size_t)n)) && H5Fget_file_image(file, buf, (size_t)n) != n) {
        free(buf);
        buf = NULL;
    }
    H5Fclose(file);
    /* the faulty datatypes are written: close them now, so that the
     * checks below count only what the loader leaves open */
    for (int i = 0; i < f->nds; i++)
        if (f->ds[i].ftype_owned) {
            H5Tclose(f->ds[i].ftype);
            f->ds[i].ftype_owned = 0;
        }
    *size = n > 0 ? (size_t)n : 0;
    return buf;
}

/* ---- the checks ------------------------------------------------------ */

/* An unmutated file must come back exactly as written. */
static void th_same_as_written(th_file *f, const trace_t *t)
{
    fuzz_check(t->n == f->n && t->L == f->L && t->E == f->E && t->k == f->k);
    const th_ds *pc = th_find(f, "prefill_counts"), *pt = th_find(f, "prompt_tokens");
    for (size_t i = 0; i < pc->count; i++)
        fuzz_check(t->prefill_counts[i] == pc->iv[i]);
    for (int64_t r = 0; r < t->n; r++)
        fuzz_check(t->prompt_tokens[r] == pt->iv[r]);
    const th_ds *pe = th_find(f, "tokens/prefill_experts");
    fuzz_check(!pe == !t->prefill_experts);
    for (size_t i = 0; pe && i < pe->count; i++)
        fuzz_check(t->prefill_experts[i] == pe->iv[i]);
    const th_ds *dc = th_find(f, "decode_counts");
    fuzz_check(!dc == !t->decode_counts);
    for (size_t i = 0; dc && i < dc->count; i++)
        fuzz_check(t->decode_counts[i] == dc->iv[i]);
    const th_ds *bh = th_find(f, "tokens/block_hashes");
    fuzz_check(!bh == !t->block_hashes);
    for (size_t i = 0; bh && i < bh->count; i++)
        fuzz_check(t->block_hashes[i] == bh->hv[i]);
    const th_ds *ids = th_find(f, "request_id");
    fuzz_check(!ids == !t->request_id);
    for (int64_t r = 0; ids && r < t->n; r++)
        fuzz_check(!strcmp(t->request_id[r], ids->sv[r]));
}

/* Rows [r0, r1) loaded alone equal those rows of the whole trace. */
static void th_check_rows(const char *path, const trace_t *all, int64_t r0, int64_t r1)
{
    trace_t *t = NULL;
    char err[ELDR_ERRLEN] = "";
    if (trace_load_rows(path, r0, r1, &t, err, sizeof err) != 0) {
        fprintf(stderr, "rows [%lld, %lld): %s\n", (long long)r0, (long long)r1, err);
        fuzz_check(!"a row range of a loadable file loads");
    }
    size_t cells = TRACE_CELLS(all);
    fuzz_check(t->n == r1 - r0);
    fuzz_check(!memcmp(t->prefill_counts, all->prefill_counts + (size_t)r0 * cells,
                       (size_t)(r1 - r0) * cells * sizeof *t->prefill_counts));
    if (all->prefill_experts) {
        int64_t a = all->prefill_offsets[r0], b = all->prefill_offsets[r1];
        fuzz_check(t->prefill_offsets[0] == 0 && t->prefill_offsets[r1 - r0] == b - a);
        size_t w = (size_t)all->L * (size_t)all->k;
        fuzz_check(!memcmp(t->prefill_experts, all->prefill_experts + (size_t)a * w,
                           (size_t)(b - a) * w * sizeof *t->prefill_experts));
    }
    if (all->block_hashes) {
        int64_t a = all->block_offsets[r0], b = all->block_offsets[r1];
        fuzz_check(!memcmp(t->block_hashes, all->block_hashes + a,
                           (size_t)(b - a) * sizeof *t->block_hashes));
    }
    trace_free(t);
}

/* No HDF5 file, group, dataset, attribute or datatype left open: each
 * would leak for the life of a daemon. */
static void th_check_no_open_ids(const char *after)
{
    ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (n != 0)
        fprintf(stderr, "%zd HDF5 ids open after %s\n", n, after);
    fuzz_check(n == 0);
}

static int fuzz_trace_h5_one(const uint8_t *data, size_t size)
{
    th_in z = {.p = data, .n = size};
    th_file f;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    unsigned nfaults = th_byte(&z) % 8;
    th_valid(&z, &f);
    unsigned r0 = th_byte(&z), r1 = th_byte(&z);
    th_faults(&z, &f, nfaults);
    size_t n;
    void *img = th_image(&f, &n);
    const char *path = img ? fuzz_memfile(img, n) : NULL;
    free(img);
    if (!path) {
        th_free(&f);
        return 0;
    }
    th_check_no_open_ids("th_image");

    trace_header_t h;
    char err[ELDR_ERRLEN] = "";
    int hrc = trace_read_header(path, &h, err, sizeof err);
    if (hrc)
        fuzz_check_err(err, sizeof err);
    th_check_no_open_ids("trace_read_header");

    trace_t *t = (trace_t *)1;
    err[0] = '\0';
    if (trace_load(path, &t, err, sizeof err) != 0) {
        fuzz_check(t == NULL);
        fuzz_check_err(err, sizeof err);
        if (!z.faulty)
            fprintf(stderr, "valid file refused: %s\n", err);
        fuzz_check(z.faulty);
    } else {
        fuzz_check(hrc == 0 && h.n == t->n && h.L == t->L && h.E == t->E && h.k == t->k);
        fuzz_check(trace_validate(t, "fuzz", err, sizeof err) == 0);
        if (!z.faulty)
            th_same_as_written(&f, t);
        int64_t a = (int64_t)(r0 % (t->n + 1)), b = (int64_t)(r1 % (t->n + 1));
        if (a > b) {
            int64_t s = a;
            a = b;
            b = s;
        }
        if (a < b)
            th_check_rows(path, t, a, b);
        trace_free(t);
    }
    th_check_no_open_ids("trace_load");
    th_free(&f);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_trace_h5_one(data, size);
}
#endif
