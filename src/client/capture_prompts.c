/* capture_prompts.c - PROMPTS.jsonl and the request bodies of `eldr
 * capture` (capture_prompts.h). Prompt files are small next to the
 * answers, so jansson reads them. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture_prompts.h"
#include "err.h"
#include "sha256.h"

void capture_prompts_free(capture_prompts *ps)
{
    for (int64_t i = 0; ps->p && i < ps->n; i++) {
        free(ps->p[i].text);
        free(ps->p[i].messages);
        free(ps->p[i].id);
    }
    free(ps->p);
    for (int i = 0; i < ps->n_labels; i++)
        free(ps->label_names[i]);
    free(ps->label_names);
    memset(ps, 0, sizeof *ps);
}

/* A string or integer field as a malloc'd string; NULL when absent. */
static int text_field(json_t *o, const char *key, char **out)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v))
        *out = strdup(json_string_value(v));
    else if (json_is_integer(v) && asprintf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(v)) < 0)
        *out = NULL;
    else if (!json_is_integer(v))
        return -1;
    return *out ? 0 : -2;
}

static int label_index(capture_prompts *ps, const char *name)
{
    for (int i = 0; i < ps->n_labels; i++)
        if (!strcmp(ps->label_names[i], name))
            return i;
    if (ps->n_labels >= 65536)
        return -1;
    char **nn = realloc(ps->label_names, (size_t)(ps->n_labels + 1) * sizeof *nn);
    if (!nn)
        return -1;
    ps->label_names = nn;
    if (!(nn[ps->n_labels] = strdup(name)))
        return -1;
    return ps->n_labels++;
}

/* One line's object into p. */
static int parse_line(capture_prompts *ps, json_t *o, capture_prompt *p, const char *path,
                      int line, char *err, size_t errlen)
{
    json_t *prompt = json_object_get(o, "prompt"), *msgs = json_object_get(o, "messages");
    char *label = NULL;
    if (!json_is_object(o))
        return eldr_errf(err, errlen, "%s line %d: not a JSON object", path, line);
    if ((prompt != NULL) == (msgs != NULL))
        return eldr_errf(err, errlen, "%s line %d: needs exactly one of \"prompt\" and "
                         "\"messages\"", path, line);
    if (prompt && !json_is_string(prompt))
        return eldr_errf(err, errlen, "%s line %d: \"prompt\" is not a string", path, line);
    if (msgs && (!json_is_array(msgs) || json_array_size(msgs) == 0))
        return eldr_errf(err, errlen, "%s line %d: \"messages\" is not a non-empty array", path,
                         line);
    p->line = line;
    p->label = -1;
    if (prompt)
        p->text = strdup(json_string_value(prompt));
    else
        p->messages = json_dumps(msgs, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
    int rc = text_field(o, "id", &p->id);
    if (rc == -1)
        return eldr_errf(err, errlen, "%s line %d: \"id\" is not a string or integer", path, line);
    if ((rc = text_field(o, "label", &label)) == -1)
        return eldr_errf(err, errlen, "%s line %d: \"label\" is not a string or integer", path,
                         line);
    if (rc == -2 || !(p->text || p->messages))
        return eldr_errf(err, errlen, "out of memory reading %s", path);
    if (!p->id) {
        const char *t = p->text ? p->text : p->messages;
        p->id = malloc(SHA256_HEX);
        if (!p->id)
            return free(label), eldr_errf(err, errlen, "out of memory reading %s", path);
        sha256_buf_hex(t, strlen(t), p->id);
    }
    if (label) {
        p->label = label_index(ps, label);
        free(label);
        if (p->label < 0)
            return eldr_errf(err, errlen, "%s line %d: more than 65536 labels", path, line);
    }
    return 0;
}

int capture_prompts_load(const char *path, capture_prompts *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f)
        return eldr_errf(err, errlen, "%s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0;
    ssize_t got;
    int line = 0, rc = 0, labelled = -1;
    int64_t room = 0;
    while (rc == 0 && (got = getline(&buf, &cap, f)) >= 0) {
        line++;
        size_t n = (size_t)got;
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
            n--;
        if (n == 0)
            continue;
        if (out->n == room) {
            room = room ? room * 2 : 256;
            capture_prompt *np = realloc(out->p, (size_t)room * sizeof *np);
            if (!np) {
                rc = eldr_errf(err, errlen, "out of memory reading %s", path);
                break;
            }
            out->p = np;
        }
        json_error_t je;
        json_t *o = json_loadb(buf, n, 0, &je);
        capture_prompt *p = &out->p[out->n];
        memset(p, 0, sizeof *p);
        if (!o) {
            rc = eldr_errf(err, errlen, "%s line %d: %s", path, line, je.text);
            break;
        }
        out->n++;
        rc = parse_line(out, o, p, path, line, err, errlen);
        json_decref(o);
        if (rc == 0 && labelled >= 0 && labelled != (p->label >= 0))
            rc = eldr_errf(err, errlen, "%s line %d: %s a label, but line %d %s (label every "
                           "line or none)", path, line, p->label >= 0 ? "has" : "has no",
                           out->p[0].line, labelled ? "has one" : "has none");
        labelled = p->label >= 0;
    }
    if (rc == 0 && ferror(f))
        rc = eldr_errf(err, errlen, "%s: %s", path, strerror(errno));
    if (rc == 0 && out->n == 0)
        rc = eldr_errf(err, errlen, "%s: no prompts in it", path);
    free(buf);
    fclose(f);
    if (rc < 0)
        capture_prompts_free(out);
    return rc;
}

int capture_endpoint_of(const capture_request_opts *o, const capture_prompt *p)
{
    if (o->endpoint != CAPTURE_EP_AUTO)
        return o->endpoint;
    if (p->messages)
        return CAPTURE_EP_CHAT;
    return o->engine == CAPTURE_ENGINE_SGLANG ? CAPTURE_EP_GENERATE : CAPTURE_EP_COMPLETIONS;
}

const char *capture_endpoint_path(int endpoint)
{
    return endpoint == CAPTURE_EP_CHAT       ? "/v1/chat/completions"
           : endpoint == CAPTURE_EP_GENERATE ? "/generate"
                                             : "/v1/completions";
}

const char *capture_endpoint_name(int endpoint)
{
    return endpoint == CAPTURE_EP_CHAT       ? "chat"
           : endpoint == CAPTURE_EP_GENERATE ? "generate"
           : endpoint == CAPTURE_EP_AUTO     ? "auto"
                                             : "completions";
}

char *capture_request_body(const capture_request_opts *o, const capture_prompt *p, size_t *len,
                           char *err, size_t errlen)
{
    int ep = capture_endpoint_of(o, p);
    json_t *b = json_object(), *msgs = NULL;
    if (p->messages && ep != CAPTURE_EP_CHAT) {
        json_decref(b);
        eldr_errf(err, errlen, "prompts line %d: \"messages\" need the chat endpoint, not %s",
                  p->line, capture_endpoint_name(ep));
        return NULL;
    }
    if (ep == CAPTURE_EP_GENERATE) {
        json_t *sp = json_pack("{s:i, s:f}", "max_new_tokens", o->max_tokens, "temperature",
                               o->temperature);
        if (sp && o->seed >= 0)
            json_object_set_new(sp, "sampling_seed", json_integer(o->seed));
        json_object_set_new(b, "text", json_string(p->text));
        json_object_set_new(b, "sampling_params", sp);
    } else {
        if (o->model && o->model[0])
            json_object_set_new(b, "model", json_string(o->model));
        if (ep == CAPTURE_EP_CHAT)
            msgs = p->messages ? json_loads(p->messages, 0, NULL)
                               : json_pack("[{s:s, s:s}]", "role", "user", "content", p->text);
        json_object_set_new(b, ep == CAPTURE_EP_CHAT ? "messages" : "prompt",
                            ep == CAPTURE_EP_CHAT ? msgs : json_string(p->text));
        json_object_set_new(b, "max_tokens", json_integer(o->max_tokens));
        json_object_set_new(b, "temperature", json_real(o->temperature));
        if (o->seed >= 0)
            json_object_set_new(b, "seed", json_integer(o->seed));
    }
    /* vLLM returns routing whenever the server has the flag; SGLang wants it asked for */
    if (o->engine == CAPTURE_ENGINE_SGLANG)
        json_object_set_new(b, "return_routed_experts", json_true());
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    if (!s) {
        eldr_errf(err, errlen, "prompts line %d: out of memory for the request", p->line);
        return NULL;
    }
    *len = strlen(s);
    return s;
}
