/* answer.c - the route and finish answers, through jansson and direct
 * (answer.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "g9.h"
#include "strbuf.h"

json_t *route_answer_json(const route_answer_in *a)
{
    const route_out *o = a->o;
    const route_decision *dc = &o->d;
    json_t *j = json_object();
    if (!j || decision_fields(j, a->workers, a->K, dc->worker, dc->rule, o->tau, dc->has_sim,
                              dc->sim, dc->sim_max, dc->n_cand, dc->cand, dc->load, o->policy,
                              dc->has_cost ? dc->cost : NULL) < 0) {
        json_decref(j);
        return NULL;
    }
    json_object_set_new(j, "request_id", json_string(o->request_id));
    json_object_set_new(j, "seq", json_integer((json_int_t)o->seq));
    json_object_set_new(j, "model_generation", json_integer((json_int_t)a->model_gen));
    json_object_set_new(
        j, "cache",
        json_pack("{s:s, s:i, s:i, s:i, s:i, s:b}", "prefill_worker", a->prefill_name,
                  "blocks", a->n_hashes, "hit_blocks", a->u.hit, "missing_blocks",
                  a->u.missing, "stored_blocks", a->u.stored, "complete", a->u.missing == 0));
    return j;
}

json_t *finish_answer_json(const char *id, const char *worker, int index)
{
    return json_pack("{s:s, s:s, s:i}", "request_id", id, "worker", worker, "worker_index",
                     index);
}

/* A growing text (strbuf.h); oom also once anything could not be written
 * as jansson would write it. */
typedef strbuf jw;

static void put(jw *w, const char *s, size_t n)
{
    sb_put(w, s, n);
}

static void put_lit(jw *w, const char *s)
{
    put(w, s, strlen(s));
}

/* A string jansson writes verbatim, in quotes; anything else is bad. */
static void put_str(jw *w, const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x20 || (unsigned char)s[n] > 0x7e || s[n] == '"' ||
            s[n] == '\\') {
            w->oom = 1;
            return;
        }
    put(w, "\"", 1);
    put(w, s, n);
    put(w, "\"", 1);
}

/* Decimal, as "%lld" writes it (without printf: an answer has dozens). */
static void put_int(jw *w, long long v)
{
    char b[24];
    put(w, b, (size_t)g9_int(v, b));
}

/* A real as jansson's dumper writes it with JSON_REAL_PRECISION(9):
 * "%.9g", ".0" appended when it would read back as an integer, and the
 * exponent without '+' or leading zeros (1e+20 -> 1e20, 1e-05 -> 1e-5).
 * eldrd never sets a locale, so the decimal point is '.'. */
static void put_real(jw *w, double v)
{
    if (!isfinite(v)) {   /* json_real refuses these */
        w->oom = 1;
        return;
    }
    char b[40];
    int n = g9_format(v, b);   /* "%.9g" */
    if (!strchr(b, '.') && !strchr(b, 'e')) {
        memcpy(b + n, ".0", 3);
        n += 2;
    }
    char *start = strchr(b, 'e');   /* jansson's own steps, in its order */
    if (start) {
        char *end = ++start + 1;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, (size_t)n - (size_t)(end - b) + 1);
            n -= (int)(end - start);
        }
    }
    put(w, b, (size_t)n);
}

static char *finish_text(jw *w)
{
    if (w->oom) {
        free(w->s);
        return NULL;
    }
    return w->s;
}

char *route_answer_text(const route_answer_in *a)
{
    const route_out *o = a->o;
    const route_decision *dc = &o->d;
    jw w = {0};
    if (dc->has_sim) {
        put_lit(&w, "{\"similarities\":[");
        for (int k = 0; k < a->K; k++) {
            if (k)
                put(&w, ",", 1);
            put_real(&w, dc->sim[k]);
        }
        put(&w, "]", 1);
    } else {
        put_lit(&w, "{\"similarities\":null");
    }
    put_lit(&w, ",\"band\":[");
    for (int i = 0; i < dc->n_cand; i++) {
        if (i)
            put(&w, ",", 1);
        put_int(&w, dc->cand[i]);
    }
    put_lit(&w, "],\"loads\":[");
    for (int k = 0; k < a->K; k++) {
        if (k)
            put(&w, ",", 1);
        put_int(&w, (long long)dc->load[k]);
    }
    put_lit(&w, "],\"worker\":");
    put_str(&w, a->workers[dc->worker]);
    put_lit(&w, ",\"worker_index\":");
    put_int(&w, dc->worker);
    put_lit(&w, ",\"rule\":");
    put_str(&w, route_rule_name((route_rule)dc->rule));
    put_lit(&w, ",\"tau\":");
    put_real(&w, o->tau);
    put_lit(&w, ",\"sim_max\":");
    if (dc->has_sim)
        put_real(&w, dc->sim_max);
    else
        put_lit(&w, "null");
    put_lit(&w, ",\"policy\":");
    put_str(&w, state_policy_name(o->policy));
    if (dc->has_cost) {
        put_lit(&w, ",\"costs\":[");
        for (int k = 0; k < a->K; k++) {
            if (k)
                put(&w, ",", 1);
            if (isfinite(dc->cost[k]))
                put_real(&w, dc->cost[k]);
            else
                put_lit(&w, "null");
        }
        put(&w, "]", 1);
    }
    put_lit(&w, ",\"request_id\":");
    put_str(&w, o->request_id);
    put_lit(&w, ",\"seq\":");
    put_int(&w, (long long)o->seq);
    put_lit(&w, ",\"model_generation\":");
    put_int(&w, (long long)a->model_gen);
    put_lit(&w, ",\"cache\":{\"prefill_worker\":");
    put_str(&w, a->prefill_name);
    put_lit(&w, ",\"blocks\":");
    put_int(&w, a->n_hashes);
    put_lit(&w, ",\"hit_blocks\":");
    put_int(&w, a->u.hit);
    put_lit(&w, ",\"missing_blocks\":");
    put_int(&w, a->u.missing);
    put_lit(&w, ",\"stored_blocks\":");
    put_int(&w, a->u.stored);
    put_lit(&w, a->u.missing == 0 ? ",\"complete\":true}}" : ",\"complete\":false}}");
    return finish_text(&w);
}

char *finish_answer_text(const char *id, const char *worker, int index)
{
    jw w = {0};
    put_lit(&w, "{\"request_id\":");
    put_str(&w, id);
    put_lit(&w, ",\"worker\":");
    put_str(&w, worker);
    put_lit(&w, ",\"worker_index\":");
    put_int(&w, index);
    put(&w, "}", 1);
    return finish_text(&w);
}
