/* import.c - what both importers share (see import.h): format names and
 * dispatch, and the duplicate-id check. */
#include "import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "err.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcasecmp(s + n - m, suffix);
}

static const char *const format_names[] = {"unknown", "npz", "jsonl", "npy", "frames"};

import_format import_format_of(const char *path)
{
    if (ends_with(path, ".npz"))
        return IMPORT_NPZ;
    if (ends_with(path, ".jsonl") || ends_with(path, ".ndjson"))
        return IMPORT_JSONL;
    if (ends_with(path, ".npy"))
        return IMPORT_NPY;
    if (ends_with(path, ".frames") || ends_with(path, ".bin"))
        return IMPORT_FRAMES;
    return IMPORT_UNKNOWN;
}

import_format import_sniff(const char *path)
{
    unsigned char magic[8] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(magic, 1, sizeof magic, f) : 0;
    if (f)
        fclose(f);
    /* an HDF5 file is a trace whatever its name */
    if (got == 8 && !memcmp(magic, "\x89HDF\r\n\x1a\n", 8))
        return IMPORT_UNKNOWN;
    if (got >= 4 && !memcmp(magic, "PK\x03\x04", 4))
        return IMPORT_NPZ;
    if (got >= 6 && !memcmp(magic, "\x93NUMPY", 6))
        return IMPORT_NPY;
    import_format by_name = import_format_of(path);
    return by_name == IMPORT_FRAMES ? IMPORT_UNKNOWN : by_name;
}

import_format import_format_parse(const char *name)
{
    for (int f = IMPORT_NPZ; f <= IMPORT_FRAMES; f++)
        if (!strcmp(name, format_names[f]))
            return (import_format)f;
    return IMPORT_UNKNOWN;
}

const char *import_format_name(import_format f)
{
    return f >= IMPORT_NPZ && f <= IMPORT_FRAMES ? format_names[f] : "unknown";
}

int import_file_geometry(const char *path, import_format fmt, const import_geometry *g,
                         trace_t **out, char *err, size_t errlen)
{
    static const import_geometry none = {0, 0, 0};
    *out = NULL;
    if (fmt == IMPORT_UNKNOWN)
        fmt = import_format_of(path);
    switch (fmt) {
    case IMPORT_NPZ: return import_npz(path, out, err, errlen);
    case IMPORT_JSONL: return import_jsonl(path, out, err, errlen);
    case IMPORT_NPY: return import_npy(path, g ? g : &none, out, err, errlen);
    case IMPORT_FRAMES: return import_frames(path, g ? g : &none, out, err, errlen);
    default:
        return eldr_errf(err, errlen, "%s: unknown import format (name it .npz, .jsonl, .npy "
                         "or .frames, or say --format npz|jsonl|npy|frames)", path);
    }
}

int import_file(const char *path, import_format fmt, trace_t **out, char *err, size_t errlen)
{
    return import_file_geometry(path, fmt, NULL, out, err, errlen);
}
