/* xp_msg.h - Envoy's ext_proc messages as eldrd reads and writes them
 * (router/extproc). The bytes are protobuf (xp.proto, Envoy's field
 * numbers): read on the wire where they are as Envoy writes them, else
 * by protobuf-c, and packed by protobuf-c (body chunks framed by hand);
 * this file is the one place that knows their shape, so the picker
 * (extproc.c) deals in a plain view: which phase a message is, its
 * headers, its body chunk, the subset hint.
 *
 * A message is checked before protobuf-c sees it: google.protobuf.Struct
 * nests without bound (a Value holds a Struct holds a Value ...), and
 * protobuf-c's decoder recurses once per level, so a few megabytes of
 * nesting would overflow the loop thread's stack. xp_read refuses more
 * than XP_MAX_DEPTH levels, with a reason. */
#ifndef ELDR_ROUTER_XP_MSG_H
#define ELDR_ROUTER_XP_MSG_H

#include <stddef.h>
#include <stdint.h>

#define XP_MAX_DEPTH 32
/* Envoy's BodySendMode (processing_mode.proto) */
#define XP_MODE_NONE 0
#define XP_MODE_FULL_DUPLEX 4
/* the largest streamed_response chunk (llm-d's chunking.go: 62,000 bytes,
 * under gRPC's and Envoy's per-message defaults with room for framing) */
#define XP_CHUNK_MAX 62000

typedef enum xp_kind {
    XP_REQUEST_HEADERS, XP_RESPONSE_HEADERS, XP_REQUEST_BODY, XP_RESPONSE_BODY,
    XP_REQUEST_TRAILERS, XP_RESPONSE_TRAILERS
} xp_kind;

/* A growing byte buffer that is reused: the answers are packed into one
 * and the signature decoded into one, instead of a malloc each. */
typedef struct xp_buf {
    uint8_t *p;
    size_t cap;
} xp_buf;
/* At least n bytes in b->p; -1 when out of memory (b unchanged). */
int xp_buf_reserve(xp_buf *b, size_t n);
void xp_buf_free(xp_buf *b);

/* Where a decoded message lives: its view's arrays (the headers, the
 * subset hint's entries) and, when protobuf-c decodes it, every field
 * protobuf-c allocates: a pointer bump, all given back at once by
 * xp_in_free, instead of some 20 malloc/free pairs a message. One xp_in
 * at a time per arena. */
typedef struct xp_arena xp_arena;
xp_arena *xp_arena_new(void);
void xp_arena_free(xp_arena *a);

/* A span of bytes in the message or the arena (not NUL-terminated). */
typedef struct xp_span {
    const char *p;
    size_t n;
} xp_span;

typedef struct xp_hdr {
    xp_span key, value;          /* value: its raw_value, else its value */
} xp_hdr;

/* A ProcessingRequest as the picker sees it. */
typedef struct xp_in {
    xp_arena *arena;             /* where it lives */
    void *pb;                    /* protobuf-c's message when it decoded this one */
    int live;                    /* read and not yet freed */
    xp_kind kind;
    int end_of_stream;           /* headers: no body follows; body: the last chunk */
    const uint8_t *body;         /* a body chunk (in the message or the arena) */
    size_t body_len;
    int has_config;              /* protocol_config present (the stream's first message) */
    int request_body_mode, response_body_mode;
    int observability;           /* observability_mode: answers are ignored */
    const xp_hdr *headers;       /* a headers message's headers, in order */
    size_t n_headers;
    int subset;                  /* the subset hint: 0 absent, 1 given, -1 not strings */
    const xp_span *subset_items; /* its strings (a list's, or the one) */
    size_t n_subset_items;
    xp_span served;              /* the served endpoint (p NULL: absent) */
} xp_in;

/* Decode one ProcessingRequest in arena a. -1 with why (one line) when
 * the bytes are not one, nest too deep, or carry no phase. The view (body,
 * headers, strings) stays valid until xp_in_free, and points into msg:
 * msg must outlive it.
 *
 * A message as Envoy writes it (each field once, strings without NUL,
 * booleans 0 or 1) is read on the wire, where it lies; any other goes
 * through protobuf-c (xp_read_pb), whose reading is the reference: the
 * two give the same view (the fuzz harness holds them to it). */
int xp_read(xp_arena *a, const uint8_t *msg, size_t len, xp_in *in, char *why,
            size_t whylen);
/* The same through protobuf-c alone. */
int xp_read_pb(xp_arena *a, const uint8_t *msg, size_t len, xp_in *in, char *why,
               size_t whylen);
void xp_in_free(xp_in *in);

/* A header of a headers message (Envoy lowercases names): its raw_value,
 * else its value; NULL when absent. *len its length. */
const char *xp_header(const xp_in *in, const char *name, size_t *len);

/* The subset hint: filter_metadata["envoy.lb.subset_hint"]
 * ["x-gateway-destination-endpoint-subset"], a list of "ip:port" strings
 * or one comma-separated string. Calls each(cls, entry, len) per entry
 * and returns 1, or 0 when the hint is absent. A hint whose value is
 * neither: -1 (and no call). */
int xp_subset(const xp_in *in, void (*each)(void *cls, const char *s, size_t n), void *cls);

/* filter_metadata["envoy.lb"]["x-gateway-destination-endpoint-served"]:
 * the endpoint that served the request (response phase), or NULL. */
const char *xp_served(const xp_in *in, size_t *len);

/* ---- answers: each packs one ProcessingResponse into out->p (grown as
 * needed, *len bytes); -1 when out of memory ---- */

/* The pick: a request_headers answer setting header `name` to value
 * (replacing any), clear_route_cache, and dynamic_metadata
 * {ns: {name: value}}. */
int xp_pack_pick(const char *name, const char *ns, const char *value, xp_buf *out,
                 size_t *len);
/* A body chunk going on: request_body / response_body with
 * body_mutation.streamed_response {body, end_of_stream}, framed around
 * the n body bytes instead of packed with them (a chunk is kilobytes,
 * and goes into the stream's queue with one copy): the message is
 * head[0..*head_len), the body, tail[0..*tail_len). The bytes are the
 * ones protobuf-c packs for the same message (test_router_xpmsg holds
 * them to it). */
#define XP_CHUNK_HEAD_MAX 64
void xp_frame_stream_chunk(int response_side, size_t n, int eos,
                           uint8_t head[XP_CHUNK_HEAD_MAX], size_t *head_len, uint8_t tail[2],
                           size_t *tail_len);
/* CONTINUE, nothing changed, for a message of this kind. */
int xp_pack_continue(xp_kind kind, xp_buf *out, size_t *len);
/* immediate_response: HTTP status code, a body, details; with
 * content_type (NULL: none) a Content-Type header set on the answer. */
int xp_pack_immediate(int code, const char *body, const char *content_type,
                      const char *details, xp_buf *out, size_t *len);

/* grpc.health.v1: the service asked (NUL-terminated copy into svc), and
 * the answer. */
int xp_read_health(const uint8_t *msg, size_t len, char *svc, size_t n);
int xp_pack_health(int status, xp_buf *out, size_t *len);

#endif
