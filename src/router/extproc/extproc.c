/* extproc.c - the gateway's endpoint picker (extproc.h). */
#include "extproc.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decide.h"
#include "grpc_srv.h"
#include "http.h"
#include "log.h"
#include "readiness.h"
#include "routed.h"
#include "signature.h"
#include "wire.h"
#include "xp_join.h"
#include "xp_msg.h"
#include "xp_sig.h"

#define DEST "x-gateway-destination-endpoint"
#define DEST_NS "envoy.lb"
#define PROCESS_PATH "/envoy.service.ext_proc.v3.ExternalProcessor/Process"
#define HEALTH_PATH "/grpc.health.v1.Health/Check"

/* What a pick's signal came from, and how picks ended. */
enum { SRC_BODY, SRC_HEADER, SRC_ROUTED, SRC_NONE, N_SRC };
enum { OUT_PICKED, OUT_NO_ENDPOINT, OUT_BAD_SIGNAL, OUT_TOO_LARGE, OUT_DRAINING,
       OUT_REFUSED, OUT_BAD_MESSAGE, OUT_CANCELLED, N_OUT };
static const char *const src_name[N_SRC] = {"body", "header", "routed_experts", "none"};
/* The EPP-Profile of a call (llm-d's coordinator, gateway/paths.go). */
enum { PROF_DECODE, PROF_PREFILL, PROF_ENCODE, PROF_OTHER, N_PROF };
static const char *const prof_name[N_PROF] = {"decode", "prefill", "encode", "other"};
/* Why a prefill answer gave the join nothing. */
enum { UNREAD_STATUS, UNREAD_MODE, UNREAD_TOO_LARGE, UNREAD_NO_ROUTING, UNREAD_BAD,
       UNREAD_NO_KEY, N_UNREAD };
static const char *const unread_name[N_UNREAD] = {"status", "body_mode", "too_large",
                                                  "no_routing", "bad_routing", "no_key"};
static const char *const out_name[N_OUT] = {"picked", "no_endpoint", "bad_signal",
                                            "too_large", "draining", "refused",
                                            "bad_message", "cancelled"};

/* A worker's pick answer, packed once: it depends on the endpoint's
 * address alone, and is packed again when the endpoints file gives the
 * worker another. */
typedef struct pick_memo {
    char dest[EP_HOSTPORT_MAX];
    uint8_t *p;
    size_t len;
} pick_memo;

struct extproc {
    engine_t *d;
    evloop *l;
    endpoints_table *ep;
    grpc_srv *g;
    ev_timer poll;
    int draining;                /* on the loop's thread */
    atomic_int drain_flag;       /* for the health answer read elsewhere */
    uint64_t seq;
    size_t cells;
    uint16_t *counts;            /* scratch for one decision [L*E] (loop thread only) */
    uint16_t *total;             /* ... the counts completed from the signature cache */
    float *gates;
    xp_arena *arena;             /* the message being handled (loop thread only) */
    xp_buf pk;                   /* the answer being packed (loop thread only) */
    xp_buf sig;                  /* the body's signature, decoded (loop thread only) */
    pick_memo memo[ROUTE_MAX_WORKERS];   /* (loop thread only) */
    route_out out;
    xp_join *join;               /* prefill answers awaiting their decode call (loop thread) */
    atomic_ullong picks[N_SRC], outcomes[N_OUT], upstream_5xx, finished, chunks_out;
    atomic_ullong profiles[N_PROF], prefill_picks, unread[N_UNREAD];
    atomic_uint unread_logged;   /* the reasons logged once */
    atomic_long in_flight;       /* picked, not yet finished */
    /* the drain's hand-off */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int posted_done;
};

typedef enum { ST_HEADERS, ST_BODY, ST_PICKED, ST_DONE } xstate;

typedef struct xstream {
    extproc_t *x;
    grpc_stream *gs;
    xstate state;
    int resp_duplex;             /* echo the response body as streamed_response */
    int routed, finished, worker;
    int profile;                 /* PROF_* */
    int prefill;                 /* the prefill worker picked (-1: none), released once */
    int collect;                 /* keeping the prefill's answer (body, len) for the join */
    int has_rid;                 /* id came in x-request-id */
    char id[RB_ID_MAX];
    uint8_t *body;
    size_t len, cap;
    xp_buf hsig;                 /* x-eldr-signature, decoded */
    size_t hsig_len;
    int has_hsig, hsig_bad;
    int has_subset;
    uint8_t subset[ROUTE_MAX_WORKERS];
    int fail;                    /* a gRPC status to end the stream with, after the message */
    const char *fail_msg;
} xstream;

/* ---- answering ---- */

/* the answer packed into x->pk by an xp_pack_* that returned rc */
static void send_packed(xstream *s, int rc, size_t len)
{
    if (rc == 0)
        grpc_send(s->gs, s->x->pk.p, len);
}

static void send_continue(xstream *s, xp_kind kind)
{
    size_t n;
    int packed = xp_pack_continue(kind, &s->x->pk, &n);
    send_packed(s, packed, n);
}

/* The request is over for the load: once. */
static void finish_request(xstream *s)
{
    if (!s->routed || s->finished)
        return;
    s->finished = 1;
    int w;
    rb_err e;
    state_finish(s->x->d->st, s->id, &w, &e);
    atomic_fetch_sub(&s->x->in_flight, 1);
    atomic_fetch_add(&s->x->finished, 1);
}

static void immediate(xstream *s, int code, int outcome, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void immediate(xstream *s, int code, int outcome, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    atomic_fetch_add(&s->x->outcomes[outcome], 1);
    /* the client reads it as any OpenAI error (docs/http-api.md, "Errors") */
    json_t *j = http_error_json(code, NULL, msg);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    size_t n;
    int packed = xp_pack_immediate(code, text ? text : msg, text ? "application/json" : NULL,
                                   "eldr_picker", &s->x->pk, &n);
    free(text);
    send_packed(s, packed, n);
    s->state = ST_DONE;
}

/* The body, as it came, in streamed_response chunks of at most
 * XP_CHUNK_MAX bytes; end_of_stream on the last when eos. */
static void echo(xstream *s, int response_side, const uint8_t *p, size_t n, int eos)
{
    do {
        size_t k = n < XP_CHUNK_MAX ? n : XP_CHUNK_MAX;
        uint8_t head[XP_CHUNK_HEAD_MAX], tail[2];
        grpc_part parts[3] = {{head, 0}, {p, k}, {tail, 0}};
        xp_frame_stream_chunk(response_side, k, eos && k == n, head, &parts[0].n, tail,
                              &parts[2].n);
        grpc_sendv(s->gs, parts, 3);
        atomic_fetch_add(&s->x->chunks_out, 1);
        p += k;
        n -= k;
    } while (n);
}

/* The pick's answer for worker s->worker at dest: the memo's bytes, packed
 * (and kept) when the worker's address is not the memo's. */
static void send_pick(xstream *s, const char *dest)
{
    pick_memo *pm = &s->x->memo[s->worker];
    if (strcmp(pm->dest, dest)) {
        size_t len;
        if (xp_pack_pick(DEST, DEST_NS, dest, &s->x->pk, &len) < 0)
            return;
        uint8_t *p = malloc(len);
        if (!p) {   /* send it anyway, unkept */
            grpc_send(s->gs, s->x->pk.p, len);
            return;
        }
        free(pm->p);
        memcpy(p, s->x->pk.p, len);
        pm->p = p;
        pm->len = len;
        snprintf(pm->dest, sizeof pm->dest, "%s", dest);
    }
    grpc_send(s->gs, pm->p, pm->len);
}

/* ---- the pick ---- */

/* The endpoints file maps onto the model's workers: a pick has somewhere
 * to go. (Readiness, which the health service answers, is more: readiness.h.) */
static int mapped(extproc_t *x)
{
    return endpoints_table_k(x->ep) == x->d->K;
}

/* The signal: the body's eldr_sig, else the header's; -1 when the one
 * given is malformed (answered). *sig points into x->sig or s->hsig;
 * *claim: the body's kv_transfer_params when it carries the signature
 * cache's claim (xp_body_sig). */
static int signal_bytes(xstream *s, const uint8_t *body, size_t n, const uint8_t **sig,
                        size_t *len, int *src, jspan *claim)
{
    char why[256];
    int rc = xp_body_sig((const char *)body, n, &s->x->sig, len, claim, why, sizeof why);
    *sig = rc > 0 ? s->x->sig.p : NULL;
    if (rc < 0) {
        immediate(s, 400, OUT_BAD_SIGNAL, "eldr picker: %s", why);
        return -1;
    }
    *src = rc ? SRC_BODY : SRC_NONE;
    if (!rc && s->hsig_bad) {
        immediate(s, 400, OUT_BAD_SIGNAL, "eldr picker: x-eldr-signature is not base64");
        return -1;
    }
    if (!rc && s->has_hsig) {
        *sig = s->hsig.p;
        *len = s->hsig_len;
        *src = SRC_HEADER;
    }
    return 0;
}

/* The workers this request may use: the pool's eligible ones, within the
 * subset hint when one came. NULL: all. -1 when none is left. */
static int eligible(xstream *s, uint8_t *ok, const uint8_t **mask)
{
    extproc_t *x = s->x;
    const uint8_t *pm = pool_decode_eligible(&x->d->pool, mono_now(), -1, ok);
    if (!s->has_subset) {
        *mask = pm;
        return 0;
    }
    int any = 0;
    for (int k = 0; k < x->d->K; k++) {
        ok[k] = s->subset[k] && (!pm || pm[k]);
        any |= ok[k];
    }
    *mask = ok;
    return any ? 0 : -1;
}

static void new_id(xstream *s)
{
    snprintf(s->id, sizeof s->id, "xp-%llu", (unsigned long long)++s->x->seq);
}

/* counts: the prompt's (eldr_sig's, or completed from the signature
 * cache, u); NULL for a gate model, which routes on x->gates. */
static int route(xstream *s, mref_t *m, const uint16_t *counts, const cache_use *u,
                 const uint8_t *mask, int *nosig, rb_err *e)
{
    extproc_t *x = s->x;
    /* the picker finishes its requests itself (the response's end): the
     * in-flight TTL is for /v1/route's callers */
    cache_use own = u ? *u : (cache_use){.prefill = -1};
    own.owned = 1;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (route_request(x->d, m, s->id, counts, counts ? NULL : x->gates, own.prefill, &own,
                          mask, -1, &x->out, nosig, e) == 0)
            return 0;
        if (e->status != 409 || attempt)
            return -1;
        /* the client's x-request-id is in flight already (a client's
         * retry that arrived before its first try finished): both are
         * real requests, so the second gets an id of its own */
        char was[RB_ID_MAX];
        snprintf(was, sizeof was, "%s", s->id);
        snprintf(s->id, sizeof s->id, "%.200s#%llu", was, (unsigned long long)++x->seq);
    }
    return -1;
}

/* The counts to route with: eldr_sig's (x->counts), or, when the handoff
 * claims prefix-cached blocks (claim: kv_transfer_params, which names
 * eldr_block_hashes; empty: none), those completed from the signature
 * cache (x->total, *u filled, *up = u); NULL for a gate model. -1
 * answered. */
static int cached_counts(xstream *s, mref_t *m, jspan claim, const uint16_t **counts,
                         cache_use *u, const cache_use **up)
{
    extproc_t *x = s->x;
    int gate = sig_variant_uses_gate(m->m->recipe.variant);
    rb_blocks bl;
    char pw[RB_NAME_MAX];
    rb_err e;
    *counts = gate ? NULL : x->counts;
    *up = NULL;
    int c = xp_body_claim(claim, x->d->L, x->d->E, x->counts, &bl, pw, sizeof pw, &e);
    if (c <= 0) {
        if (c < 0)
            immediate(s, e.status, OUT_BAD_SIGNAL, "eldr picker: %s (%s)", e.error, e.where);
        return c;
    }
    int rc = -1;
    memset(u, 0, sizeof *u);
    u->prefill = engine_prefill_index(x->d, pw);
    cache_claim cc = {x->counts, bl.hashes, bl.n_hashes, bl.cached_blocks, bl.block_counts,
                      bl.n_block_counts};
    if (gate)
        immediate(s, 422, OUT_BAD_SIGNAL, "eldr picker: the signature cache keeps counts; a "
                  "gate model's handoff sends its whole prompt's gates and no eldr_block_*");
    else if (u->prefill < 0)
        immediate(s, 422, OUT_BAD_SIGNAL, "eldr picker: unknown prefill worker '%s' "
                  "(eldr_prefill_worker)", pw);
    else if (decide_use_cache(x->d, &cc, x->total, u, &e) < 0)
        immediate(s, e.status, OUT_BAD_SIGNAL, "eldr picker: %s (%s)", e.error, e.where);
    else {
        *counts = x->total;
        *up = u;
        rc = 0;
    }
    rb_blocks_free(&bl);
    return rc;
}

/* The signal's origin for explain: eldr_sig's, or none; *up is set to u
 * when cached_counts left it NULL. Returns 1. */
static int signal_origin(cache_use *u, const cache_use **up, const uint8_t *sig)
{
    if (!*up) {
        memset(u, 0, sizeof *u);
        u->prefill = -1;
        *up = u;
    }
    u->origin = sig ? SIG_ORIGIN_ELDR_SIG : SIG_ORIGIN_NONE;
    return 1;
}

/* A decode call joined to its prefill's answer (xp_join.h): by the
 * client's x-request-id, else by the transfer ids the coordinator copied
 * into kv_transfer_params. 1 with the prompt's counts in x->counts and *u
 * naming the prefill worker; 0 none (a gate model routes on gates, which
 * no engine's answer holds). */
static int joined_counts(xstream *s, mref_t *m, const uint8_t *body, size_t n, cache_use *u)
{
    extproc_t *x = s->x;
    jspan eng = {NULL, 0}, req = {NULL, 0};
    xp_joined info;
    if (sig_variant_uses_gate(m->m->recipe.variant))
        return 0;
    if (body)
        xp_transfer_ids((const char *)body, n, &eng, &req);
    if (!xp_join_take(x->join, s->has_rid ? s->id : NULL, eng.p, eng.n, req.p, req.n, x->counts,
                      &info, mono_now()))
        return 0;
    *u = info.u;
    return 1;
}

/* The prefill profile: a prefill endpoint on the pool's prefill ring (the
 * prompt's text hashed, so that one prompt's prefix meets its prefix
 * cache again; the load gate sends it on when that instance is 1.25x the
 * least loaded; pool.h), and the response phases read for the join. */
static void pick_prefill(xstream *s, const uint8_t *body, size_t n)
{
    extproc_t *x = s->x;
    char dest[EP_HOSTPORT_MAX];
    if (endpoints_table_n_prefill(x->ep) <= 0) {
        immediate(s, 503, OUT_NO_ENDPOINT, "eldr picker: EPP-Profile prefill, but --endpoints "
                  "names no prefill endpoint (labels llm-d.ai/role: prefill)");
        return;
    }
    jspan key = body ? xp_prompt_key((const char *)body, n) : (jspan){"", 0};
    int i = pool_prefill_acquire(&x->d->pool, key.p, key.n, mono_now(), -1);
    if (endpoints_table_prefill_hostport(x->ep, i, dest) < 0) {
        pool_prefill_release(&x->d->pool, i);
        immediate(s, 503, OUT_NO_ENDPOINT, "eldr picker: prefill worker %d has no endpoint", i);
        return;
    }
    s->prefill = i;
    size_t len;
    int packed = xp_pack_pick(DEST, DEST_NS, dest, &x->pk, &len);
    send_packed(s, packed, len);
    atomic_fetch_add(&x->prefill_picks, 1);
    atomic_fetch_add(&x->outcomes[OUT_PICKED], 1);
    s->state = ST_PICKED;
}

static void release_prefill(xstream *s)
{
    if (s->prefill >= 0)
        pool_prefill_release(&s->x->d->pool, s->prefill);
    s->prefill = -1;
}

/* Decide on the request's body (n bytes; none: NULL, 0) and headers. */
static void pick(xstream *s, const uint8_t *body, size_t n)
{
    extproc_t *x = s->x;
    if (s->profile == PROF_PREFILL) {
        pick_prefill(s, body, n);
        return;
    }
    const uint8_t *sig = NULL;
    uint8_t ok[ROUTE_MAX_WORKERS];
    size_t siglen = 0;
    int src = SRC_NONE, nosig = 0, have = 0;
    jspan claim;
    char why[256], dest[EP_HOSTPORT_MAX];
    const uint8_t *mask;
    const uint16_t *counts = NULL;
    cache_use u;
    const cache_use *up = NULL;
    mref_t *m = mholder_get(&x->d->model);
    rb_err e;
    if (!mapped(x)) {
        immediate(s, 503, OUT_NO_ENDPOINT, "eldr picker: the endpoints file does not map "
                  "onto the model's %d workers", x->d->K);
    } else if (joined_counts(s, m, body, n, &u)) {
        counts = x->counts;
        up = &u;
        src = SRC_ROUTED;
        have = 1;
    } else if (signal_bytes(s, body, n, &sig, &siglen, &src, &claim) < 0) {
        /* answered */
    } else if (decide_read_sig(x->d, m, sig, siglen, x->counts, x->gates, why, sizeof why) < 0) {
        immediate(s, 422, OUT_BAD_SIGNAL, "eldr picker: %s", why);
    } else if (cached_counts(s, m, claim, &counts, &u, &up) == 0) {
        have = 1;
    }
    if (!have) {
        /* answered */
    } else if ((src == SRC_ROUTED || signal_origin(&u, &up, sig)) && eligible(s, ok, &mask) < 0) {
        immediate(s, 503, OUT_NO_ENDPOINT, "eldr picker: no endpoint of the subset hint is "
                  "eligible");
    } else if (route(s, m, counts, up, mask, &nosig, &e) < 0) {
        immediate(s, e.status, e.status == 503 ? OUT_NO_ENDPOINT : OUT_REFUSED,
                  "eldr picker: %s (%s)", e.error, e.where);
    } else if (endpoints_table_hostport(x->ep, x->out.d.worker, dest) < 0) {
        /* the file was replaced between the check and here: cannot be on
         * one thread, but a pick never goes out without its address */
        s->routed = 1;
        s->worker = x->out.d.worker;
        atomic_fetch_add(&x->in_flight, 1);
        finish_request(s);
        immediate(s, 503, OUT_NO_ENDPOINT, "eldr picker: worker %d has no endpoint",
                  x->out.d.worker);
    } else {
        s->routed = 1;
        s->worker = x->out.d.worker;
        atomic_fetch_add(&x->in_flight, 1);
        atomic_fetch_add(&x->picks[nosig ? SRC_NONE : src], 1);
        atomic_fetch_add(&x->outcomes[OUT_PICKED], 1);
        send_pick(s, dest);
        s->state = ST_PICKED;
    }
    mref_put(m);
}

/* ---- the request phase ---- */

/* "ip:port" marks that decode worker; a bare "ip", every one there. */
static void subset_entry(void *cls, const char *str, size_t n)
{
    xstream *s = cls;
    if (endpoints_table_k(s->x->ep) == s->x->d->K)
        endpoints_table_subset(s->x->ep, str, n, s->subset);
}

/* EPP-Profile (llm-d-router's header-profile-handler: the header's value,
 * trimmed; absent or blank is its default profile, decode). -1 answered. */
static int read_profile(xstream *s, const xp_in *in)
{
    size_t n;
    const char *v = xp_header(in, "epp-profile", &n);
    while (v && n && (*v == ' ' || *v == '\t'))
        v++, n--;
    while (v && n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    s->profile = PROF_DECODE;
    if (v && n) {
        s->profile = PROF_OTHER;
        for (int p = 0; p < PROF_OTHER; p++)
            if (strlen(prof_name[p]) == n && !memcmp(v, prof_name[p], n))
                s->profile = p;
    }
    atomic_fetch_add(&s->x->profiles[s->profile], 1);
    if (s->profile == PROF_ENCODE) {
        immediate(s, 503, OUT_NO_ENDPOINT, "eldr picker: EPP-Profile encode is not served here: "
                  "eldrd picks prefill and decode endpoints; give the encode calls a picker of "
                  "their own");
        return -1;
    }
    if (s->profile == PROF_OTHER) {
        immediate(s, 400, OUT_BAD_MESSAGE, "eldr picker: EPP-Profile \"%.*s\" is not a profile "
                  "eldrd serves (prefill, decode)", (int)(n < 64 ? n : 64), v);
        return -1;
    }
    return 0;
}

static void on_request_headers(xstream *s, const xp_in *in)
{
    extproc_t *x = s->x;
    size_t n;
    const char *v;
    if (in->has_config && in->request_body_mode != XP_MODE_FULL_DUPLEX &&
        in->request_body_mode != XP_MODE_NONE) {
        s->fail = GRPC_FAILED_PRECONDITION;
        s->fail_msg = "eldrd's picker takes the request body in FULL_DUPLEX_STREAMED mode "
                      "(request_body_mode 4) or none (0), as the Gateway API Inference "
                      "Extension configures Envoy";
        return;
    }
    s->resp_duplex = !in->has_config || in->response_body_mode == XP_MODE_FULL_DUPLEX;
    if (x->draining) {
        immediate(s, 503, OUT_DRAINING, "eldr picker: draining (shutting down)");
        return;
    }
    if ((v = xp_header(in, "x-request-id", &n)) && n > 0 && n < RB_ID_MAX &&
        !memchr(v, '\0', n)) {
        memcpy(s->id, v, n);
        s->id[n] = '\0';
        s->has_rid = 1;
    } else {
        new_id(s);
    }
    if ((v = xp_header(in, "x-eldr-signature", &n))) {
        if (xp_text_sig(v, n, &s->hsig, &s->hsig_len, (char[8]){0}, 8) < 0)
            s->hsig_bad = 1;
        else
            s->has_hsig = 1;
    }
    if (read_profile(s, in) < 0)
        return;
    int hint = xp_subset(in, subset_entry, s);
    if (hint < 0) {
        immediate(s, 400, OUT_NO_ENDPOINT, "eldr picker: the subset hint is neither a list "
                  "of strings nor a string");
        return;
    }
    s->has_subset = hint;
    if (in->end_of_stream || (in->has_config && in->request_body_mode == XP_MODE_NONE))
        pick(s, NULL, 0);   /* no body: decide on the headers */
    else
        s->state = ST_BODY;
}

/* The bytes of bodies held count against --body-budget with the HTTP
 * API's (the engine's metrics hold the one count): growing a buffer takes
 * its growth, and freeing it gives its size back. */
static void body_free(xstream *s)
{
    if (s->cap)
        atomic_fetch_sub(&s->x->d->met.body_bytes, (uint64_t)s->cap);
    free(s->body);
    s->body = NULL;
    s->len = s->cap = 0;
}

/* Append p[n] to s->body, within --max-body and --body-budget: 0, or
 * GROW_TOO_LARGE, GROW_BUDGET, GROW_NO_MEMORY (nothing appended). */
enum { GROW_TOO_LARGE = -1, GROW_BUDGET = -2, GROW_NO_MEMORY = -3 };
static int grow_body(xstream *s, const uint8_t *p, size_t n)
{
    long long max = s->x->d->o->max_body;
    if ((long long)(s->len + n) > max)
        return GROW_TOO_LARGE;
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : 16384;
        while (cap < s->len + n)
            cap *= 2;
        if (cap > (size_t)max)
            cap = (size_t)max;
        if (metrics_body_take(&s->x->d->met, cap - s->cap, s->x->d->o->body_budget) < 0) {
            atomic_fetch_add(&s->x->d->met.body_refusals, 1);
            return GROW_BUDGET;
        }
        uint8_t *b = realloc(s->body, cap);
        if (!b) {
            atomic_fetch_sub(&s->x->d->met.body_bytes, (uint64_t)(cap - s->cap));
            return GROW_NO_MEMORY;
        }
        s->body = b;
        s->cap = cap;
    }
    if (n)
        memcpy(s->body + s->len, p, n);
    s->len += n;
    return 0;
}

static int keep_body(xstream *s, const uint8_t *p, size_t n)
{
    int rc = grow_body(s, p, n);
    if (rc == GROW_TOO_LARGE)
        immediate(s, 413, OUT_TOO_LARGE, "eldr picker: the body is over --max-body (%lld "
                  "bytes)", s->x->d->o->max_body);
    else if (rc == GROW_BUDGET)
        immediate(s, 503, OUT_REFUSED, "eldr picker: the request bodies held reached "
                  "--body-budget (%lld bytes)", s->x->d->o->body_budget);
    else if (rc == GROW_NO_MEMORY)
        immediate(s, 503, OUT_REFUSED, "eldr picker: out of memory");
    return rc < 0 ? -1 : 0;
}

static void on_request_body(xstream *s, const xp_in *in)
{
    if (s->state != ST_BODY) {
        if (s->state == ST_PICKED)   /* a body after a headers-only pick: pass it on */
            echo(s, 0, in->body, in->body_len, in->end_of_stream);
        return;
    }
    if (!s->len && in->end_of_stream) {
        /* the whole body in one message (a body under Envoy's chunk
         * size): decided on and echoed from the message, not copied */
        pick(s, in->body, in->body_len);
        if (s->state == ST_PICKED)
            echo(s, 0, in->body, in->body_len, 1);
        return;
    }
    if (keep_body(s, in->body, in->body_len) < 0 || !in->end_of_stream)
        return;
    pick(s, s->body, s->len);
    if (s->state == ST_PICKED)
        echo(s, 0, s->body, s->len, 1);
    body_free(s);
}

/* Trailers end the request body without an end_of_stream chunk. */
static void on_request_trailers(xstream *s)
{
    if (s->state == ST_BODY) {
        pick(s, s->body, s->len);
        if (s->state == ST_PICKED && s->len)
            echo(s, 0, s->body, s->len, 0);
        body_free(s);
    }
    if (s->state != ST_DONE)
        send_continue(s, XP_REQUEST_TRAILERS);
}

/* ---- the response phase ---- */

/* A prefill answer that gave the join nothing: counted by reason, and
 * the first of each reason logged with its why. */
static void unread(xstream *s, int reason, const char *why)
{
    extproc_t *x = s->x;
    atomic_fetch_add(&x->unread[reason], 1);
    if (!(atomic_fetch_or(&x->unread_logged, 1u << reason) & (1u << reason)))
        log_msg("ext_proc: a prefill answer (x-request-id %s) gives no routing to join: %s%s%s "
                "(logged once; eldr_extproc_prefill_unread_total counts them)", s->id,
                unread_name[reason], why ? ": " : "", why ? why : "");
}

/* The prefill's answer, whole (s->body): its counts kept for the decode
 * call, under the x-request-id and the transfer ids it hands over. */
static void read_answer(xstream *s)
{
    extproc_t *x = s->x;
    jspan eng, req;
    xp_joined info = {.by = 0};
    s->collect = 0;
    const char *ans = (const char *)s->body;
    int ids = ans ? xp_transfer_ids(ans, s->len, &eng, &req) : 0;
    mref_t *m = mholder_get(&x->d->model);
    int gate = sig_variant_uses_gate(m->m->recipe.variant);
    mref_put(m);
    memset(&info.u, 0, sizeof info.u);
    info.u.prefill = s->prefill;
    /* an answer without the field is an engine not asked to return it */
    int has = ans && memmem(ans, s->len, "routed_experts", 14);
    int rc = gate || !has ? 0 : decide_stock_counts(x->d, s->prefill, ans, s->len, x->total,
                                                   &info.u);
    if (gate) {
        unread(s, UNREAD_NO_ROUTING, "a gate model routes on gate values, which no engine's "
               "answer holds");
    } else if (!has) {
        unread(s, UNREAD_NO_ROUTING, ROUTED_NO_ROUTES_HINT);
    } else if (rc <= 0) {
        unread(s, UNREAD_BAD, info.u.note);
    } else if (!s->has_rid && !ids) {
        unread(s, UNREAD_NO_KEY, "no x-request-id and no remote_engine_id/remote_request_id");
    } else {
        if (xp_join_put(x->join, s->has_rid ? s->id : NULL, ids ? eng.p : NULL, eng.n,
                        ids ? req.p : NULL, req.n, x->total, &info, mono_now()) < 0)
            unread(s, UNREAD_NO_KEY, "out of memory");
    }
    body_free(s);
}

/* The upstream's answer: a 5xx counts against the endpoint that served
 * (Envoy says which when it fell back to another), anything else for it. */
static void on_response_headers(xstream *s, const xp_in *in)
{
    size_t n;
    const char *st = xp_header(in, ":status", &n);
    int code = st && n == 3 ? (st[0] - '0') * 100 + (st[1] - '0') * 10 + (st[2] - '0') : 0;
    int worker = s->worker;
    const char *served = xp_served(in, &n);
    if (served) {
        int k = endpoints_table_worker_of(s->x->ep, served, n);
        if (k >= 0)
            worker = k;
    }
    if (s->routed && code >= 100 && code <= 599) {
        if (code >= 500)
            atomic_fetch_add(&s->x->upstream_5xx, 1);
        pool_report(&s->x->d->pool, POOL_DECODE, worker, code < 500, mono_now());
    }
    if (s->prefill >= 0 && code >= 100 && code <= 599) {
        if (code >= 500)
            atomic_fetch_add(&s->x->upstream_5xx, 1);
        pool_report(&s->x->d->pool, POOL_PREFILL, s->prefill, code < 500, mono_now());
        if (code != 200)
            unread(s, UNREAD_STATUS, NULL);
        else if (!s->resp_duplex)   /* Envoy will not send the body: GIE's config does */
            unread(s, UNREAD_MODE, NULL);
        else
            s->collect = 1;
    }
    send_continue(s, XP_RESPONSE_HEADERS);
    if (in->end_of_stream) {
        if (s->collect)
            read_answer(s);
        release_prefill(s);
        finish_request(s);
    }
}

static void on_response_body(xstream *s, const xp_in *in)
{
    if (s->collect && grow_body(s, in->body, in->body_len) < 0) {
        s->collect = 0;   /* the answer goes on to the caller all the same */
        body_free(s);
        unread(s, UNREAD_TOO_LARGE, NULL);
    }
    if (s->resp_duplex)
        echo(s, 1, in->body, in->body_len, in->end_of_stream);
    else
        send_continue(s, XP_RESPONSE_BODY);
    if (in->end_of_stream) {
        if (s->collect)
            read_answer(s);
        release_prefill(s);
        finish_request(s);
    }
}

/* ---- the stream ---- */

static void *xs_open(void *cls, grpc_stream *gs)
{
    xstream *s = calloc(1, sizeof *s);
    if (s) {
        s->x = cls;
        s->gs = gs;
        s->worker = -1;
        s->prefill = -1;
    }
    return s;
}

static void xs_free(xstream *s)
{
    finish_request(s);
    release_prefill(s);
    body_free(s);
    xp_buf_free(&s->hsig);
    free(s);
}

static void xs_message(void *cls, void *st, grpc_stream *gs, const uint8_t *msg, size_t len)
{
    (void)cls, (void)gs;
    xstream *s = st;
    xp_in in;
    char why[160];
    if (xp_read(s->x->arena, msg, len, &in, why, sizeof why) < 0) {
        atomic_fetch_add(&s->x->outcomes[OUT_BAD_MESSAGE], 1);
        grpc_finish(s->gs, GRPC_INVALID_ARGUMENT, why);
        xs_free(s);
        return;
    }
    int first = s->state == ST_HEADERS;
    if (first && in.kind != XP_REQUEST_HEADERS && in.kind != XP_RESPONSE_HEADERS) {
        atomic_fetch_add(&s->x->outcomes[OUT_BAD_MESSAGE], 1);
        grpc_finish(s->gs, GRPC_INVALID_ARGUMENT, "the stream's first message must be "
                    "request_headers");
        xp_in_free(&in);
        xs_free(s);
        return;
    }
    switch (in.kind) {
    case XP_REQUEST_HEADERS:
        if (first)
            on_request_headers(s, &in);
        break;
    case XP_REQUEST_BODY:
        on_request_body(s, &in);
        break;
    case XP_REQUEST_TRAILERS:
        on_request_trailers(s);
        break;
    case XP_RESPONSE_HEADERS:
        on_response_headers(s, &in);
        break;
    case XP_RESPONSE_BODY:
        on_response_body(s, &in);
        break;
    case XP_RESPONSE_TRAILERS:
        send_continue(s, XP_RESPONSE_TRAILERS);
        if (s->collect)   /* the answer ended with trailers, not end_of_stream */
            read_answer(s);
        release_prefill(s);
        finish_request(s);
        break;
    }
    xp_in_free(&in);
    if (s->fail) {
        grpc_finish(s->gs, s->fail, s->fail_msg);
        xs_free(s);
    }
}

/* Envoy half-closes when the exchange is over: the request is finished
 * (if the response phase did not say so already) and the stream ends. */
static void xs_half_close(void *cls, void *st, grpc_stream *gs)
{
    (void)cls;
    xstream *s = st;
    if (s->state == ST_HEADERS || s->state == ST_BODY)   /* gone before its body ended */
        atomic_fetch_add(&s->x->outcomes[OUT_CANCELLED], 1);
    grpc_finish(gs, GRPC_OK, NULL);
    xs_free(s);
}

/* Cancelled, reset, or the connection went: the request is finished. */
static void xs_gone(void *cls, void *st)
{
    (void)cls;
    xstream *s = st;
    if (s->state != ST_DONE && !s->finished)
        atomic_fetch_add(&s->x->outcomes[OUT_CANCELLED], 1);
    xs_free(s);
}

/* ---- grpc.health.v1 ---- */

typedef struct hstream {
    char svc[128];
    int got, bad;
} hstream;

static void *hs_open(void *cls, grpc_stream *gs)
{
    (void)cls, (void)gs;
    return calloc(1, sizeof(hstream));
}

static void hs_message(void *cls, void *st, grpc_stream *gs, const uint8_t *msg, size_t len)
{
    (void)cls, (void)gs;
    hstream *h = st;
    h->bad |= h->got || xp_read_health(msg, len, h->svc, sizeof h->svc) < 0;
    h->got = 1;
}

/* "" and the ext_proc service: ready (readiness.h: not draining, the
 * endpoints mapped, a decode worker in rotation), the answer /healthz
 * gives; GIE's "readiness" the same; "liveness": the process answers. */
static void hs_half_close(void *cls, void *st, grpc_stream *gs)
{
    extproc_t *x = cls;
    hstream *h = st;
    int status = -1;
    if (h->bad || !h->got) {
        grpc_finish(gs, GRPC_INVALID_ARGUMENT, "one HealthCheckRequest expected");
    } else if (!strcmp(h->svc, "liveness")) {
        status = 1;
    } else if (!h->svc[0] || !strcmp(h->svc, "readiness") ||
               !strcmp(h->svc, "envoy.service.ext_proc.v3.ExternalProcessor")) {
        readiness r;
        readiness_get(x->d, &r);
        status = !x->draining && r.ready ? 1 : 2;
    } else {
        grpc_finish(gs, GRPC_NOT_FOUND, "unknown service");
    }
    if (status > 0) {
        xp_buf b = {0};
        size_t n;
        if (xp_pack_health(status, &b, &n) == 0)
            grpc_send(gs, b.p, n);
        xp_buf_free(&b);
        grpc_finish(gs, GRPC_OK, NULL);
    }
    free(h);
}

static void hs_gone(void *cls, void *st)
{
    (void)cls;
    free(st);
}

/* ---- life ---- */

static void poll_endpoints(evloop *l, ev_timer *t)
{
    extproc_t *x = t->cls;
    char err[512];
    int rc = endpoints_table_poll(x->ep, mono_now(), err, sizeof err);
    if (rc < 0) {
        log_msg("--endpoints: %s; the previous endpoints stay", err);
    } else if (rc > 0) {
        ep_stats st;
        endpoints_table_stats(x->ep, &st);
        log_msg("--endpoints: reloaded, %d endpoints (generation %llu)", st.n,
                (unsigned long long)st.generation);
    }
    evloop_timer_start(l, t, 1.0);
}

extproc_t *extproc_start(engine_t *d, evloop *l, endpoints_table *ep, char *err,
                         size_t errlen)
{
    extproc_t *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    x->d = d;
    x->l = l;
    x->ep = ep;
    x->cells = (size_t)d->L * (size_t)d->E;
    x->counts = malloc(x->cells * sizeof *x->counts);
    x->total = malloc(x->cells * sizeof *x->total);
    x->gates = malloc(x->cells * sizeof *x->gates);
    x->arena = xp_arena_new();
    x->join = xp_join_new((size_t)d->o->join_max, d->o->join_ttl, x->cells);
    pthread_mutex_init(&x->lock, NULL);
    pthread_cond_init(&x->cond, NULL);
    grpc_config cfg = {.host = d->o->xp_host, .port = d->o->xp_port,
                       .max_message = (size_t)d->o->max_body + 4096,
                       .max_conns = d->o->max_conns,
                       .preface_timeout = d->o->header_timeout,
                       .met = &d->met, .listener = "ext_proc"};
    int mem = x->counts && x->total && x->gates && x->arena && x->join;
    if (!mem || !(x->g = grpc_new(l, &cfg, err, errlen))) {
        if (!mem)
            snprintf(err, errlen, "out of memory");
        extproc_free(x);
        return NULL;
    }
    grpc_method process = {PROCESS_PATH, xs_open, xs_message, xs_half_close, xs_gone, x};
    grpc_method health = {HEALTH_PATH, hs_open, hs_message, hs_half_close, hs_gone, x};
    grpc_add_method(x->g, &process);
    grpc_add_method(x->g, &health);
    evloop_timer_init(&x->poll, poll_endpoints, x);
    evloop_timer_start(l, &x->poll, 1.0);
    return x;
}

int extproc_port(const extproc_t *x)
{
    return grpc_port(x->g);
}

static void quiesce_on_loop(void *cls)
{
    extproc_t *x = cls;
    x->draining = 1;
    atomic_store(&x->drain_flag, 1);
    grpc_quiesce(x->g);
    pthread_mutex_lock(&x->lock);
    x->posted_done = 1;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->lock);
}

int extproc_quiesce(extproc_t *x, int loop_running, double grace)
{
    if (!x)
        return 0;
    if (!loop_running || evloop_post(x->l, quiesce_on_loop, x) < 0) {
        quiesce_on_loop(x);
        return 0;
    }
    double t0 = mono_now();
    pthread_mutex_lock(&x->lock);
    while (!x->posted_done && mono_now() - t0 < 5)
        wait_for(&x->cond, &x->lock, 0.1);
    pthread_mutex_unlock(&x->lock);
    grpc_stats st;
    for (;;) {
        grpc_get_stats(x->g, &st);
        if (!st.streams || mono_now() - t0 >= grace)
            break;
        pthread_mutex_lock(&x->lock);
        wait_for(&x->cond, &x->lock, 0.05);
        pthread_mutex_unlock(&x->lock);
    }
    return (int)st.streams;
}

void extproc_free(extproc_t *x)
{
    if (!x)
        return;
    if (x->g) {
        evloop_timer_stop(x->l, &x->poll);
        grpc_free(x->g);
    }
    pthread_mutex_destroy(&x->lock);
    pthread_cond_destroy(&x->cond);
    free(x->counts);
    free(x->total);
    free(x->gates);
    xp_arena_free(x->arena);
    xp_join_free(x->join);
    xp_buf_free(&x->pk);
    xp_buf_free(&x->sig);
    for (int k = 0; k < ROUTE_MAX_WORKERS; k++)
        free(x->memo[k].p);
    free(x);
}

/* The prefill profile and the join (docs/gateway.md, "The join"). */
static void join_metrics(extproc_t *x, strbuf *b)
{
    xp_join_stats js;
    xp_join_get_stats(x->join, &js);
    metrics_head(b, "eldr_extproc_profile_total", "counter",
                 "Calls by their EPP-Profile header (absent: decode).");
    for (int i = 0; i < N_PROF; i++)
        sb_printf(b, "eldr_extproc_profile_total{profile=\"%s\"} %llu\n", prof_name[i],
                  atomic_load(&x->profiles[i]));
    metrics_series(b, "eldr_extproc_prefill_picks_total", "counter",
                   "Prefill endpoints picked (EPP-Profile prefill).",
                   atomic_load(&x->prefill_picks));
    metrics_head(b, "eldr_extproc_prefill_unread_total", "counter",
                 "Prefill answers that gave the join no routing, by reason.");
    for (int i = 0; i < N_UNREAD; i++)
        sb_printf(b, "eldr_extproc_prefill_unread_total{reason=\"%s\"} %llu\n", unread_name[i],
                  atomic_load(&x->unread[i]));
    metrics_series(b, "eldr_extproc_join_pending", "gauge",
                   "Prefill answers awaiting their decode call.", (uint64_t)js.pending);
    metrics_series(b, "eldr_extproc_join_stored_total", "counter",
                   "Prefill answers kept for their decode call.", js.stored);
    metrics_head(b, "eldr_extproc_joins_total", "counter",
                 "Decode calls joined to their prefill's answer, by the key that found it.");
    sb_printf(b, "eldr_extproc_joins_total{key=\"request_id\"} %llu\n"
              "eldr_extproc_joins_total{key=\"transfer\"} %llu\n",
              (unsigned long long)js.by_request_id, (unsigned long long)js.by_transfer);
    metrics_series(b, "eldr_extproc_join_evictions_total", "counter",
                   "Pending joins evicted by --join-max.", js.evicted);
    metrics_series(b, "eldr_extproc_join_expiries_total", "counter",
                   "Pending joins dropped after --join-ttl.", js.expired);
    metrics_series(b, "eldr_extproc_join_replaced_total", "counter",
                   "Pending joins replaced by a later prefill of the same key.", js.replaced);
}

void extproc_metrics(void *cls, strbuf *b)
{
    extproc_t *x = cls;
    grpc_stats st;
    grpc_get_stats(x->g, &st);
    metrics_series(b, "eldr_extproc_streams", "gauge", "Envoy ext_proc streams open now.",
                   (uint64_t)st.streams);
    metrics_series(b, "eldr_extproc_connections", "gauge",
                   "HTTP/2 connections from Envoy open now.", (uint64_t)st.conns);
    metrics_series(b, "eldr_extproc_in_flight", "gauge",
                   "Picked requests whose response has not ended.",
                   (uint64_t)atomic_load(&x->in_flight));
    metrics_head(b, "eldr_extproc_picks_total", "counter",
                 "Endpoints picked, by where the prompt's signal came from.");
    for (int i = 0; i < N_SRC; i++)
        sb_printf(b, "eldr_extproc_picks_total{signal=\"%s\"} %llu\n", src_name[i],
                  atomic_load(&x->picks[i]));
    metrics_head(b, "eldr_extproc_requests_total", "counter",
                 "ext_proc requests by how the picker answered them.");
    for (int i = 0; i < N_OUT; i++)
        sb_printf(b, "eldr_extproc_requests_total{outcome=\"%s\"} %llu\n", out_name[i],
                  atomic_load(&x->outcomes[i]));
    metrics_series(b, "eldr_extproc_upstream_5xx_total", "counter",
                   "Picked endpoints that answered 5xx (passive health).",
                   atomic_load(&x->upstream_5xx));
    metrics_series(b, "eldr_extproc_streams_total", "counter", "ext_proc streams opened.",
                   st.streams_total);
    metrics_series(b, "eldr_extproc_stream_resets_total", "counter",
                   "ext_proc streams reset by either side.", st.resets);
    metrics_series(b, "eldr_extproc_bad_frames_total", "counter",
                   "HTTP/2 or gRPC frames refused as malformed.", st.bad_frames);
    metrics_series(b, "eldr_extproc_preface_timeouts_total", "counter",
                   "Connections closed for not sending the HTTP/2 preface in time.",
                   st.preface_timeouts);
    join_metrics(x, b);
    ep_stats es;
    endpoints_table_stats(x->ep, &es);
    metrics_series(b, "eldr_endpoints", "gauge", "Endpoints in the --endpoints file.",
                   (uint64_t)es.n);
    metrics_series(b, "eldr_endpoints_generation", "gauge",
                   "The endpoints set in use (it counts up with each reload taken).", es.generation);
    metrics_series(b, "eldr_endpoints_reloads_total", "counter",
                   "Replacements of the endpoints file read in.", es.reloads);
    metrics_series(b, "eldr_endpoints_reload_failures_total", "counter",
                   "Replacements of the endpoints file refused (the previous endpoints stay).",
                   es.failed);
}

static void endpoint_json(void *cls, int k, const endpoint *e)
{
    json_t *a = cls;
    json_array_append_new(a, json_pack("{s:i, s:s, s:s, s:s}", "worker", k, "name", e->name,
                                       "namespace", e->ns, "address", e->hostport));
}

json_t *extproc_snapshot(void *cls)
{
    extproc_t *x = cls;
    grpc_stats st;
    grpc_get_stats(x->g, &st);
    json_t *o = json_object(), *picks = json_object(), *outs = json_object();
    for (int i = 0; i < N_SRC; i++)
        json_object_set_new(picks, src_name[i], json_integer((json_int_t)atomic_load(
                                                    &x->picks[i])));
    for (int i = 0; i < N_OUT; i++)
        json_object_set_new(outs, out_name[i], json_integer((json_int_t)atomic_load(
                                                   &x->outcomes[i])));
    json_object_set_new(o, "port", json_integer(grpc_port(x->g)));
    json_object_set_new(o, "draining", json_boolean(atomic_load(&x->drain_flag)));
    json_object_set_new(o, "streams", json_integer(st.streams));
    json_object_set_new(o, "connections", json_integer(st.conns));
    json_object_set_new(o, "in_flight", json_integer(atomic_load(&x->in_flight)));
    json_object_set_new(o, "picks", picks);
    json_object_set_new(o, "requests", outs);
    json_object_set_new(o, "upstream_5xx", json_integer((json_int_t)atomic_load(
                                               &x->upstream_5xx)));
    xp_join_stats js;
    xp_join_get_stats(x->join, &js);
    json_object_set_new(o, "prefill_picks", json_integer((json_int_t)atomic_load(
                                                &x->prefill_picks)));
    json_object_set_new(o, "join", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "pending",
                                             (json_int_t)js.pending, "stored",
                                             (json_int_t)js.stored, "by_request_id",
                                             (json_int_t)js.by_request_id, "by_transfer",
                                             (json_int_t)js.by_transfer, "evicted",
                                             (json_int_t)js.evicted, "expired",
                                             (json_int_t)js.expired));
    ep_stats es;
    endpoints_table_stats(x->ep, &es);
    json_t *eps = json_array();
    endpoints_table_each(x->ep, endpoint_json, eps);
    json_object_set_new(o, "endpoints", eps);
    json_object_set_new(o, "endpoints_generation", json_integer((json_int_t)es.generation));
    json_object_set_new(o, "endpoints_reload_failures", json_integer((json_int_t)es.failed));
    return o;
}
