/* opts.h - eldrd's command line (docs/eldrd.md). Parsing only: no
 * files are opened here. */
#ifndef ELDR_ROUTER_OPTS_H
#define ELDR_ROUTER_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct eldrd_opts {
    const char *model_path;      /* -m */
    char host[64];               /* --listen HOST:PORT */
    int port;
    char **workers;              /* --workers, NULL = the model's names */
    int n_workers;
    char **prefill;              /* --prefill-workers, default {"default"} */
    int n_prefill;
    double tau;                  /* --tau, NaN = the model's */
    int policy_cost;             /* --policy cost (0: band, the default) */
    int max_batch;               /* --max-batch: the cost rule's batch cap (default 256) */
    const char *cost_path;       /* --cost FILE: the cost rule's cost model (NULL: defaults) */
    int top_k;                   /* --top-k: the MoE router's top-k (0: the model's) */
    int threads;                 /* --threads (MHD thread pool) */
    const char *state_dir;       /* --state-dir, NULL = none */
    long long max_body;          /* --max-body bytes: routes and proxied requests */
    long long max_kv_body;       /* --max-kv-body bytes: POST /v1/kv-events */
    long long max_model_body;    /* --max-model-body bytes: PUT /v1/model */
    long long body_budget;       /* --body-budget bytes: bodies held at once, in all */
    int header_timeout;          /* --header-timeout: seconds for a request's headers */
    char admin_host[64];         /* --admin-listen HOST:PORT ("" = none) */
    int admin_port;
    const char *route_token_file; /* --route-token-file (proxy mode) */
    int route_api;               /* --route-api: proxy mode serves /v1/route and /v1/finish */
    int decisions;               /* --decisions: ring size */
    int window;                  /* --window: recent signatures kept */
    long long cache_blocks;      /* --cache-blocks per prefill worker */
    int block_size;              /* --block-size: tokens a KV block of the engines holds */
    int timeout;                 /* --timeout: idle connection seconds */
    int quiet;                   /* --quiet: no log lines on stderr */
    int load_vllm;               /* --load-from vllm (0: own in-flight counts) */
    const char *worker_urls;     /* --worker-urls URL,... or NAME=URL,... */
    int poll_ms;                 /* --poll-ms: /metrics poll interval */
    const char *admin_token_file; /* --admin-token-file (auth.h) */
    const char *kv_token_file;   /* --kv-token-file */
    int insecure;                /* --insecure: no token off loopback */
    double inflight_ttl;         /* --inflight-ttl seconds, 0 = never expire; default
                                  * 2 x (prefill + decode limits) */
    int max_conns;               /* --max-conns: open connections in all */
    int max_conns_per_ip;        /* --max-conns-per-ip */
    int deadline;                /* --request-deadline: seconds from headers to body end */
    double drain;                /* --drain: seconds SIGTERM waits for requests */
    int proxy;                   /* --proxy: serve the OpenAI paths in the request path */
    const char *prefill_urls;    /* --prefill URL,... (proxy mode) */
    const char *decode_urls;     /* --decode URL,..., K of them in worker order */
    double upstream_timeout;     /* --upstream-timeout: the default of the next three */
    int upstream_timeout_given;
    /* proxy mode: an upstream's time limits, each its own (docs/reliability.md,
     * "Timeouts"); a transfer past one is cut (504) and, before its first byte,
     * retried on another instance */
    double connect_timeout;      /* --connect-timeout: to connect */
    double prefill_timeout;      /* --prefill-timeout: a prefill's answer (first byte) */
    double decode_timeout;       /* --decode-timeout: a decoder's first byte */
    double stream_idle_timeout;  /* --stream-idle-timeout: silence once bytes flow */
    int pd_vllm;                 /* --pd-protocol vllm (0: eldr, the prefill-first handoff) */
    int stream_at_prefill;       /* --stream-start prefill (0: decoder, the default) */
    const char *upstream_key_file; /* --upstream-api-key-file: the key sent to every upstream */
    double refit_every;          /* --refit-every seconds, 0 = no online refit */
    double refit_window;         /* --refit-window seconds (default 5) */
    int refit_max_rows;          /* --refit-max-rows (default 4096) */
    /* proxy mode: upstream health (docs/reliability.md, "Dead upstreams") */
    int eject_after;             /* --eject-after N failures in a row (0: never eject) */
    double eject_time;           /* --eject-time S, the first ejection; doubles */
    double health_interval;      /* --health-interval S, active probes (0: off) */
    const char *health_path;     /* --health-path PATH (default /health) */
    long long stream_buffer;     /* --stream-buffer BYTES a client may leave unread */
    double upstream_idle;        /* --upstream-idle S a pooled connection may idle */
    /* the gateway's endpoint picker (docs/gateway.md) */
    char xp_host[64];            /* --ext-proc HOST:PORT ("" = none) */
    int xp_port;
    const char *endpoints_file;  /* --endpoints FILE: the decode pool's addresses */
    /* vLLM's KV events over ZMQ (docs/eldrd.md, "KV events") */
    const char *kv_events;       /* --kv-events URL,..., one per prefill worker */
    const char *kv_events_replay; /* --kv-events-replay URL,... (NULL: none) */
    const char *kv_events_topic; /* --kv-events-topic (NULL: "") */
    int join_max;                /* --join-max N prefill answers awaiting their decode call */
    double join_ttl;             /* --join-ttl S each may wait */
    int join_given;              /* either given (they need --ext-proc) */
    int help;                    /* --help given */
    int version;                 /* --version given */
} eldrd_opts;

/* Parse argv into o (defaults first). Returns 0, or -1 with one line in
 * err (no newline) naming the option. */
int opts_parse(int argc, char **argv, eldrd_opts *o, char *err, size_t errlen);
void opts_free(eldrd_opts *o);
void opts_usage(FILE *f);

/* Bytes of the valid UTF-8 character at p (1..4; NUL counts 1), or 0
 * when p does not start one. */
int opts_utf8_len(const unsigned char *p);

/* 1 when a worker name is valid UTF-8 without control characters (it
 * goes into Prometheus labels and JSON strings verbatim). */
int opts_name_ok(const char *s);

/* "a,b,c" into a malloc'd list of unique non-empty names. */
int opts_split_names(const char *s, const char *opt, char ***out, int *n, char *err,
                     size_t errlen);

#endif
