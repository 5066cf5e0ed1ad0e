/* import.h - bring outside captures into an eldr trace.
 *
 * Four sources, all specified in docs/import.md:
 *  - the reference implementation's calibration capture: an .npz written by
 *    numpy's np.savez or np.savez_compressed, format "eldr-calibration-v1",
 *    arrays request_ids, prefill_counts, gate_probabilities, decode_counts,
 *    prompt_tokens, decode_tokens and metadata (a JSON object);
 *  - eldr's JSON-lines form: a header line, then one request per line;
 *  - a plain .npy [N, L, E] array of prefill counts (their fitter's input);
 *  - their proxy's --capture-output file: frames of a little-endian uint32
 *    byte length, then raw little-endian int16 [L, E] prefill counts.
 * The last two hold no top-k (and the frames no L and E): the caller gives
 * them in import_geometry; prompt_tokens is then each row's layer sum / k.
 *
 * All validate as they convert (unique request ids, conservation of
 * counts, decode_tokens == output_tokens - 1 where output_tokens is known,
 * shapes, finite values), then run trace_validate on the result. A failure
 * gives one line naming the file, the array or line, the key and the row;
 * *out is NULL and nothing leaks. On success *out is a new trace the
 * caller frees with trace_free. */
#ifndef ELDR_IMPORT_H
#define ELDR_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

#define IMPORT_NPZ_FORMAT "eldr-calibration-v1"
#define IMPORT_JSONL_FORMAT "eldr-trace-jsonl"
#define IMPORT_JSONL_VERSION 1
/* Longest JSON line accepted; a dense line at L=48, E=128 is ~100 KB. */
#define IMPORT_JSONL_MAX_LINE (16u << 20)
/* Longest request id or label name, in bytes of UTF-8. */
#define IMPORT_MAX_STRING 1024

typedef enum import_format {
    IMPORT_UNKNOWN = 0,
    IMPORT_NPZ,
    IMPORT_JSONL,
    IMPORT_NPY,
    IMPORT_FRAMES,
} import_format;

/* The reference's request ids: SHA-256 hex digests of the prompts. */
#define IMPORT_SHA256_ID_LEN 64

/* The format named by a file's extension (.npz; .jsonl, .ndjson; .npy;
 * .frames, .bin), or IMPORT_UNKNOWN. */
import_format import_format_of(const char *path);

/* The format of a file that is not an HDF5 trace but opens wherever a
 * trace does (trace_load routes these): a zip archive (by its magic) or a
 * .npz is IMPORT_NPZ, a .jsonl/.ndjson IMPORT_JSONL, a .npy image (by
 * magic or name) IMPORT_NPY; an HDF5 file (by its magic, whatever its
 * name) and anything else IMPORT_UNKNOWN. */
import_format import_sniff(const char *path);

/* "npz" / "jsonl" / "npy" / "frames" and back; IMPORT_UNKNOWN for an
 * unknown name. */
import_format import_format_parse(const char *name);
const char *import_format_name(import_format f);

/* What a bare count array does not say: top_k (npy and frames), layers
 * and experts (frames). 0 = not given. */
typedef struct import_geometry {
    int top_k, layers, experts;
} import_geometry;

int import_npz(const char *path, trace_t **out, char *err, size_t errlen);
int import_jsonl(const char *path, trace_t **out, char *err, size_t errlen);
int import_npy(const char *path, const import_geometry *g, trace_t **out, char *err,
               size_t errlen);
int import_frames(const char *path, const import_geometry *g, trace_t **out, char *err,
                  size_t errlen);

/* Dispatch on fmt (IMPORT_UNKNOWN: by extension). g may be NULL (then
 * npy and frames fail asking for the top-k). */
int import_file(const char *path, import_format fmt, trace_t **out, char *err, size_t errlen);
int import_file_geometry(const char *path, import_format fmt, const import_geometry *g,
                         trace_t **out, char *err, size_t errlen);

#endif
