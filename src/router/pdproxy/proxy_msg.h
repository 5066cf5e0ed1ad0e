/* proxy_msg.h - the JSON of proxy mode (docs/eldrd.md, "Proxy mode"):
 * what eldrd checks in a client's request, sends the prefill instance,
 * takes from its answer, gives the client first, and sends the decode
 * instance. Pure functions over jansson values: no sockets, no state.
 *
 * The protocol is the reference deployment's (casys-kaist/ELDR, its
 * proxy with prefill-first delivery): the prefill instance generates the
 * first token and answers with kv_transfer_params holding the KV handoff
 * and eldr_sig, the prompt's expert counts; the decode instance resumes
 * from the transferred KV. */
#ifndef ELDR_ROUTER_PROXY_MSG_H
#define ELDR_ROUTER_PROXY_MSG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"
#include "jspan.h"

typedef enum pm_kind { PM_COMPLETIONS = 0, PM_CHAT } pm_kind;

/* The handoff the prefill instances speak (--pd-protocol):
 * PM_ELDR  the reference deployment's prefill-first handoff: the prefill
 *          generates the first token, which eldrd streams at once, and
 *          says whether the request continues; the decode resumes from the
 *          prompt's token ids.
 * PM_VLLM  stock vLLM's P/D handoff (its NixlConnector proxy example): the
 *          prefill runs with max_tokens 1 and answers the KV handoff; the
 *          decode gets the client's request as sent plus that handoff and
 *          answers everything. */
typedef enum pm_protocol { PM_ELDR = 0, PM_VLLM } pm_protocol;

/* A client's request, parsed and checked. */
typedef struct pm_client {
    char *text;                  /* owned: the body as sent, NUL-terminated (the bodies
                                  * upstream are spliced from it) */
    size_t text_len;
    int plain_keys;              /* no key holds an escape (\u...): a key's text is its
                                  * name, so splicing can tell keys by their text */
    pm_kind kind;
    pm_protocol protocol;        /* PM_ELDR unless the caller sets it */
    int stream;                  /* "stream": true */
    int return_ids;              /* "return_token_ids": true */
    int include_usage;           /* "stream_options": {"include_usage": true} */
    int continuous_usage;        /* "stream_options": {"continuous_usage_stats": true} */
    char *key;                   /* malloc'd prompt key for the prefill ring */
    size_t key_len;
} pm_client;

/* Parse and check a body for path kind. Refused (400, where names the
 * key): not a JSON object; a completion without "prompt" as a string or
 * a non-empty list of token ids (one prompt); a chat without a non-empty
 * "messages" array; n or best_of other than 1; echo, use_beam_search,
 * prompt_embeds, suffix or kv_transfer_params given (a client cannot set
 * the KV handoff). The prompt key is the prompt text (token ids written
 * one after another in decimal, as the reference does), or for a chat
 * the messages' string contents one after another. */
int pm_client_parse(const char *text, size_t len, pm_kind kind, pm_client *c, rb_err *e);
/* The same through a jansson tree, as pm_client_parse itself reads a
 * body it cannot judge on its text (an escaped key): for the tests, which
 * check that both readers agree. */
int pm_client_parse_tree(const char *text, size_t len, pm_kind kind, pm_client *c, rb_err *e);
void pm_client_free(pm_client *c);

/* Control characters to spaces, so that a message quoting upstream or
 * client text stays one line. */
void pm_one_line(char *s);

/* The body for the prefill instance: the payload with stream false,
 * stream_options dropped and request_id set; for PM_ELDR return_token_ids
 * true and kv_transfer_params {do_remote_decode: true, do_remote_prefill:
 * false, transfer_id: "xfer-ID", prefill_first: true}; for PM_VLLM
 * max_tokens (and max_completion_tokens when given) 1, min_tokens and
 * min_completion_tokens dropped, and kv_transfer_params
 * {do_remote_decode: true, do_remote_prefill: false, remote_engine_id,
 * remote_block_ids, remote_host, remote_port: null}. malloc'd text or
 * NULL. */
char *pm_prefill_body(const pm_client *c, const char *request_id);

/* What the prefill's answer gives. */
typedef struct pm_prefill {
    char *text;                  /* owned: the answer's text, eldr_sig cut out */
    size_t text_len;
    jspan kv, ids, created;      /* spans in text: kv_transfer_params, the prompt's
                                  * token ids (n = 0: none), created (n = 0: none) */
    json_t *result;              /* owned: text parsed, for PM_ELDR's stream or an
                                  * answer the prefill ended (else NULL) */
    int continues;               /* prefill_continues */
    uint8_t *sig;                /* malloc'd decoded eldr_sig bytes, NULL when absent */
    size_t sig_len;
} pm_prefill;

/* Check the prefill's answer as the reference does: kv_transfer_params
 * an object, one choice, token_ids == [prefill_first_token_id], the
 * prompt ids a list of prefill_prompt_tokens integers (completions),
 * prefill_continues a boolean; eldr_sig (optional, null for none) valid
 * base64. Takes eldr_sig out of the transfer: it is found and cut from
 * the text (a long string that jansson would copy and check character by
 * character), and decoded straight from the text. The prefill-first
 * checks run on the text too (json_scan.h), with no tree: one is parsed
 * only when the client's first answer is made from it (a stream, or an
 * answer the prefill ended), never for PM_VLLM, whose answer (a stock
 * engine's routed experts: up to megabytes) is checked on its text as
 * valid JSON, an object, kv_transfer_params an object or null. A key the
 * proxy reads or
 * splices given twice is refused (the spliced and the checked values
 * could differ). -1 with why (the answer is then bad: 502). */
int pm_prefill_parse(const char *text, size_t len, const pm_client *c, pm_prefill *p,
                     char *why, size_t whylen);
void pm_prefill_free(pm_prefill *p);

/* The client's first answer from the prefill's: kv_transfer_params
 * dropped; token ids dropped unless the client asked for them; with
 * continues, finish_reason and stop_reason null (the decode finishes).
 * New reference. */
json_t *pm_public_first(const pm_prefill *p, const pm_client *c);

/* The SSE events that open a stream: "data: FIRST\n\n" (usage only with
 * stream_options.continuous_usage_stats) and, when the prefill ended the
 * request, the usage event (include_usage) and "data: [DONE]\n\n".
 * malloc'd text, *len its length; NULL on no memory. */
char *pm_first_events(const pm_prefill *p, const pm_client *c, size_t *len);

/* The non-streaming answer when the prefill ended the request. */
char *pm_first_answer(const pm_prefill *p, const pm_client *c, size_t *len);

/* The body for the decode instance: the payload with, for a completion
 * under PM_ELDR, prompt = the prompt's token ids, add_special_tokens
 * false and truncate_prompt_tokens dropped; request_id set;
 * kv_transfer_params = the prefill's transfer (eldr_sig already out)
 * plus, under PM_ELDR, prefill_created. PM_VLLM checks only that the
 * answer is an object; a missing or null transfer is forwarded as
 * absent (the decoder then computes the prompt itself), and the request
 * always continues. */
char *pm_decode_body(const pm_client *c, const pm_prefill *p, const char *request_id);

/* The release body (the transfer) when decode was never sent. */
char *pm_release_body(const pm_prefill *p);

#endif
