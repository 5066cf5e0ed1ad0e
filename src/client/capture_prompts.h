/* capture_prompts.h - the prompt set of `eldr capture` (docs/capture.md)
 * and the engine request that each prompt becomes.
 *
 * PROMPTS.jsonl: one JSON object per line, {"prompt": "..."} or
 * {"messages": [...]}, optional "id" (string or integer) and "label"
 * (string or integer). Blank lines are skipped. request_id is the id, else
 * the SHA-256 hex of the prompt text (of the compact, key-sorted JSON of
 * the messages for a chat prompt). Labels: every line or none; their names
 * are numbered in order of first appearance. */
#ifndef ELDR_CAPTURE_PROMPTS_H
#define ELDR_CAPTURE_PROMPTS_H

#include <stddef.h>
#include <stdint.h>

enum { CAPTURE_EP_AUTO, CAPTURE_EP_COMPLETIONS, CAPTURE_EP_CHAT, CAPTURE_EP_GENERATE };
enum { CAPTURE_ENGINE_AUTO, CAPTURE_ENGINE_VLLM, CAPTURE_ENGINE_SGLANG };

typedef struct capture_prompt {
    char *text;          /* the prompt, or NULL for a chat prompt */
    char *messages;      /* compact JSON of the messages array, or NULL */
    char *id;            /* request_id */
    int label;           /* index into label_names, -1 without labels */
    int line;            /* 1-based line in the file, for messages */
} capture_prompt;

typedef struct capture_prompts {
    capture_prompt *p;
    int64_t n;
    char **label_names;
    int n_labels;
} capture_prompts;

int capture_prompts_load(const char *path, capture_prompts *out, char *err, size_t errlen);
void capture_prompts_free(capture_prompts *ps);

/* How requests are made. */
typedef struct capture_request_opts {
    int engine;          /* CAPTURE_ENGINE_VLLM or _SGLANG (resolved) */
    int endpoint;        /* CAPTURE_EP_* (AUTO: per prompt, see below) */
    const char *model;   /* may be "" */
    int max_tokens;
    double temperature;
    int64_t seed;        /* -1: none */
} capture_request_opts;

/* The endpoint a prompt goes to: the one asked for, else SGLang's
 * /generate for a text prompt, vLLM's /v1/completions for a text prompt,
 * and /v1/chat/completions for messages. */
int capture_endpoint_of(const capture_request_opts *o, const capture_prompt *p);
const char *capture_endpoint_path(int endpoint);
const char *capture_endpoint_name(int endpoint);

/* The JSON body of p's request (malloc'd, NUL-terminated, length in
 * *len); NULL with err (naming the line) when the prompt does not fit the
 * endpoint (messages to /v1/completions or /generate). */
char *capture_request_body(const capture_request_opts *o, const capture_prompt *p, size_t *len,
                           char *err, size_t errlen);

#endif
