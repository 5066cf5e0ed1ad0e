/* xp_sig.h - where the gateway's decode request carries its signature
 * (router/extproc): llm-d's coordinator copies every key of the prefill's
 * kv_transfer_params into the decode body, so an engine that returns
 * eldr_sig (the authors' patched engine) hands it over in
 * kv_transfer_params.eldr_sig; a gateway may also put the same base64
 * text in a header, x-eldr-signature. The bytes are read for the model by
 * decide_read_sig (decide.h), as the proxy reads them. */
#ifndef ELDR_ROUTER_XP_SIG_H
#define ELDR_ROUTER_XP_SIG_H

#include <stddef.h>
#include <stdint.h>

#include "json_in.h"
#include "jspan.h"

#include "xp_msg.h"

/* The body's kv_transfer_params.eldr_sig: 1 with the bytes in sig->p
 * (grown as needed) and *len; 0 when there is none (not a JSON object, no
 * kv_transfer_params, no eldr_sig, or null); -1 with why when it is there
 * but is not a base64 string (or is given twice). *claim: the span of
 * kv_transfer_params when the same walk met its eldr_block_hashes and the
 * whole body was JSON as far as the walk checks it (xp_body_claim reads
 * it), else empty. */
int xp_body_sig(const char *body, size_t n, xp_buf *sig, size_t *len, jspan *claim,
                char *why, size_t whylen);

/* A header's base64 text: 1 with the bytes in sig->p and *len, -1 with
 * why. */
int xp_text_sig(const char *text, size_t n, xp_buf *sig, size_t *len, char *why,
                size_t whylen);

/* The signature cache's claim beside eldr_sig, for a prefill whose
 * prefix cache served the prompt's first blocks (eldr_sig then counts
 * only the tokens it computed): in kv (kv_transfer_params' span, as
 * xp_body_sig gives it), eldr_block_hashes, eldr_cached_blocks and
 * eldr_block_counts, read as POST /v1/route reads block_hashes,
 * cached_blocks and block_counts (eldr_-prefixed, as eldr_sig is), and
 * eldr_prefill_worker (whose cache; "" when absent). counts [L*E]:
 * eldr_sig's, which the new blocks must be part of. 1 read into *b
 * (rb_blocks_free it); 0 none (kv empty, or eldr_block_hashes null); -1
 * with e. */
int xp_body_claim(jspan kv, int L, int E, const uint16_t *counts, rb_blocks *b, char *prefill,
                  size_t plen, rb_err *e);

/* The transfer's own ids in a body's kv_transfer_params, as vLLM's
 * NixlConnector writes them in the prefill's answer and llm-d's
 * coordinator copies them into the decode body: remote_engine_id and
 * remote_request_id, each a JSON string (the text between its quotes,
 * escapes left as they are: both sides see the same bytes). 1 with both
 * (either may be empty when absent), 0 when neither is there. */
int xp_transfer_ids(const char *body, size_t n, jspan *engine, jspan *request);

/* What the prefill ring hashes for a prefill call (pool_prefill_acquire):
 * the raw text of the body's prompt (completions), messages (chat) or
 * token_ids (vLLM's generate), else the whole body. */
jspan xp_prompt_key(const char *body, size_t n);

#endif
