/* routed.h - the routed experts in one engine answer: which
 * encoding it is, and the expert ids of every prompt token and of the
 * generated tokens that were fed forward. The one decoder of stock
 * engines' routing: `eldr capture` (docs/capture.md), eldrd's proxy and
 * its endpoint picker (docs/eldrd.md, docs/gateway.md) all call it.
 *
 * Answers understood (the field is found by where it sits):
 *   vLLM /v1/completions and /v1/chat/completions: the response-level
 *     `prompt_routed_experts` [prompt, L, k] and `choices[0].routed_experts`
 *     [generated, L, k]; or, without the former, `choices[0].routed_experts`
 *     covering prompt + generated tokens (split at usage.prompt_tokens).
 *   SGLang /generate: `meta_info.routed_experts`, prompt + completion - 1
 *     tokens, with meta_info.prompt_tokens / completion_tokens; SGLang's
 *     OpenAI endpoints: the response-level `sglext.routed_experts` (counts
 *     in `usage`), or `choices[0].meta_info.routed_experts` when the
 *     request asked return_meta_info. A `routed_experts_dtype` beside the
 *     buffer names its item type.
 * Each field may be encoded as
 *   - nested JSON lists [[[id, ...], ...], ...];
 *   - an object {"encoding": "base64", "dtype": "int16", "shape": [T, L, k],
 *     "data": BASE64} (dtype int8..int64, unsigned too; "encoding" optional);
 *   - a base64 string of a .npy file (integer dtype, shape [T, L, k]);
 *   - a base64 string of raw little-endian integers [T * L * k] (SGLang):
 *     L and k must be known (hints), T follows from the token counts, and
 *     the item size from the byte length (tokens x L x k x itemsize):
 *     4 int32, 2 uint16, 1 uint8 (SGLang's wire types), 8 int64.
 * Anything else is refused with a message that quotes what was there.
 *
 * Token alignment: the last generated token is never fed forward, so an
 * answer with C generated tokens gives C - 1 decode rows (0 when C is 0);
 * a generation array of C rows loses its last row.
 *
 * Prompt rows: vLLM 0.21 answers -1 throughout a row it served from the
 * prefix cache. Such a row is left out (counted in unrouted) unless
 * require_full; a -1 anywhere else is refused.
 *
 * Ids are checked: >= 0 (but for those rows), below 65536 and below E when
 * E is given, and the k ids of a token in a layer distinct, but in a
 * layer that is 0 in every row (a dense layer, routed_dense_layers). No printing,
 * no HTTP; one line in err on failure. */
#ifndef ELDR_ROUTED_H
#define ELDR_ROUTED_H

#include <stddef.h>
#include <stdint.h>

typedef struct routed_hint {
    int L, k;          /* layers and top-k when known (0: take the answer's) */
    int E;             /* experts when known (0: any id below 65536) */
    const char *from;  /* where L and k came from, for messages ("--layers/--top-k") */
    int require_full;  /* --require-full-routing: a prompt row of -1 is an error */
    int unrouted_ok;   /* the decoder's own: this field may hold -1 (vLLM prompt rows) */
} routed_hint;

/* An id of -1 while decoding: the engine has no routing for the position. */
#define ROUTED_NO_ROUTE 0xFFFFu

typedef struct routed_t {
    int L, k;
    int64_t prompt_tokens;      /* P: prefill rows with routing */
    int64_t unrouted;           /* prompt rows without (vLLM's prefix-cache hits, all -1) */
    int64_t unrouted_lead;      /* of those, the ones before the first routed prompt row
                                 * (a prefix cache serves a prompt's head: normally all) */
    int64_t completion_tokens;  /* C: as the engine reported it */
    int64_t decode_rows;        /* D = max(C - 1, 0) */
    uint16_t *ids;              /* [(P + D)][L][k]: prompt rows, then decode rows */
    int max_id;                 /* largest id seen (-1 when there were none) */
    const char *encoding;       /* "json", "base64", "npy", "raw-int32", ... (static) */
} routed_t;

/* Decode one answer body. 0, or -1 with err (and *out zeroed). */
int routed_decode(const char *body, size_t len, const routed_hint *hint,
                   routed_t *out, char *err, size_t errlen);

void routed_free(routed_t *r);

/* Dense layers: vLLM's capturer keeps rows for every hidden layer and
 * leaves the rows of a layer without experts 0 (only MoE layers write
 * theirs). A layer is dense here when k >= 2 and every kept row holds 0 in
 * all k places (a routed layer's k ids are distinct, so never all 0).
 * dense[L] gets 1 for those; returns how many. */
int routed_dense_layers(const routed_t *r, uint8_t *dense);

/* The counts c[l][e] of rows [row0, row0 + n) over the layers whose keep
 * is 1 (keep NULL: all r->L), in that order: out[nkept][E], zeroed
 * first. Exactly the trace format's prefill_counts for the prompt rows
 * (row0 0, n prompt_tokens). -1 with err when an id is >= E or a count
 * passes 65535. */
int routed_counts(const routed_t *r, int64_t row0, int64_t n, const uint8_t *keep, int E,
                  uint16_t *out, char *err, size_t errlen);

/* What to tell the operator when an answer has no routed experts. */
#define ROUTED_NO_ROUTES_HINT "start the engine with --enable-return-routed-experts"

#endif
