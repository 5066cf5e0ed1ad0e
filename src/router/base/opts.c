/* opts.c - eldrd's command line (opts.h). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"
#include "err.h"
#include "online.h"
#include "opts.h"
#include "sigcache.h"

void opts_usage(FILE *f)
{
    fprintf(f,
            "usage: eldrd -m model.h5 [options]\n"
            "\n"
            "eldrd: the ELDR decode router, an HTTP/JSON daemon (docs/eldrd.md,\n"
            "docs/http-api.md).\n"
            "\n"
            "options:\n"
            "  -m, --model FILE          eldr-model file, or the reference's fit JSON\n"
            "                            (a model in --state-dir wins)\n"
            "  --listen HOST:PORT        address to serve (default 127.0.0.1:8470)\n"
            "  --workers NAME,...        decode worker names, K of them (default: the model's)\n"
            "  --prefill-workers NAME,.. prefill workers, one signature cache each\n"
            "                            (default: one named 'default')\n"
            "  --tau T                   locality band width (default: the model's)\n"
            "  --policy band|cost        decision rule (default band): the locality band,\n"
            "                            or the cost rule, the least predicted increase of\n"
            "                            the worker's summed per-token time (docs/routing.md);\n"
            "                            PUT /v1/config {\"policy\"} switches it at run time\n"
            "  --max-batch N             the cost rule: a worker's batch cap (default 256):\n"
            "                            past it a request waits for a slot\n"
            "  --cost FILE               the cost rule's cost model (eldr-cost JSON, as\n"
            "                            eldr sim --cost; default: docs/cost-model.md's)\n"
            "  --top-k N                 the MoE router's top-k the cost rule reads counts\n"
            "                            with (default: the model's; needed for a reference\n"
            "                            fit JSON, which does not say)\n"
            "  --threads N               HTTP thread pool size (default 2; proxy mode\n"
            "                            runs one event loop instead)\n"
            "  --state-dir DIR           keep the last PUT model there (model.h5)\n"
            "  --max-body BYTES          largest body of a route or a proxied request\n"
            "                            (default 8388608); larger gets 413\n"
            "  --max-kv-body BYTES       largest POST /v1/kv-events body (default 1048576)\n"
            "  --max-model-body BYTES    largest PUT /v1/model body (default 33554432)\n"
            "  --body-budget BYTES       request bodies held in memory at once, all\n"
            "                            connections together (default 134217728); a body\n"
            "                            that would pass it gets 503\n"
            "  --decisions N             recent decisions kept for explain (default 4096)\n"
            "  --window N                recent signatures kept for refit/drift (default 1024)\n"
            "  --cache-blocks N          signature cache capacity per prefill worker,\n"
            "                            in blocks (default 65536)\n"
            "  --block-size N            tokens in a KV block of the prefill engines (default\n"
            "                            16, as vLLM's): the signature cache keys a stock\n"
            "                            engine's prompt by blocks of N of its token ids\n"
            "  --timeout S               idle connection timeout in seconds (default 10)\n"
            "  --header-timeout S        a request's headers must be complete within S\n"
            "                            seconds of the connection's start (or of its\n"
            "                            previous request's end); else it is closed\n"
            "                            (default 10)\n"
            "  --load-from own|vllm      load signal: eldrd's own in-flight counts (default),\n"
            "                            or each worker's running + waiting requests from\n"
            "                            its /metrics: vLLM's vllm:num_requests_*, or\n"
            "                            SGLang's sglang:num_running_reqs + queues (told\n"
            "                            by the names); KV cache usage shown, not routed on\n"
            "  --worker-urls LIST        with vllm: URL,... in --workers order, or\n"
            "                            NAME=URL,...; '/metrics' is appended\n"
            "  --poll-ms N               with vllm: poll interval (default 100)\n"
            "  --admin-token-file FILE   PUT /v1/model, PUT /v1/config, POST /v1/kv-events\n"
            "                            and POST /v1/inflight/clear need\n"
            "                            'Authorization: Bearer TOKEN' (the file's first\n"
            "                            line, 16+ characters); 401 without it\n"
            "  --kv-token-file FILE      a separate token for POST /v1/kv-events (the\n"
            "                            engines send those)\n"
            "  --insecure                serve the admin endpoints on a non-loopback\n"
            "                            address without an admin token (refused otherwise)\n"
            "  --admin-listen HOST:PORT  a second listener for the admin and introspection\n"
            "                            endpoints (model, config, in-flight clear,\n"
            "                            kv-events, snapshot, explain, window); they then\n"
            "                            answer 404 on --listen; /healthz and /metrics on both\n"
            "  --route-api               proxy mode: serve POST /v1/route and /v1/finish\n"
            "                            too (off by default: eldrd routes its own\n"
            "                            requests, and anyone reaching the port could pin\n"
            "                            load with them)\n"
            "  --route-token-file FILE   proxy mode: POST /v1/route and /v1/finish on\n"
            "                            --listen, with 'Authorization: Bearer TOKEN'\n"
            "  --max-conns N             open connections in all, on each listener (default\n"
            "                            1000); past it an HTTP connection waits in the\n"
            "                            kernel's accept queue, an ext_proc one is closed\n"
            "                            (/metrics: eldr_listener_*,\n"
            "                            eldr_connections_refused_total)\n"
            "  --max-conns-per-ip N      open connections from one address (default 64; an\n"
            "                            IPv6 /64 counts as one address); more are closed\n"
            "                            at once, so that one client cannot crowd out the\n"
            "                            others\n"
            "  --request-deadline S      a request's body must arrive within S seconds of\n"
            "                            its headers, however slowly it trickles\n"
            "                            (default 30; the connection is cut otherwise)\n"
            "  --drain S                 on SIGTERM, wait up to S seconds for requests in\n"
            "                            progress (default 10); exit 1 if any was cut\n"
            "  --inflight-ttl S          forget a /v1/route request after S seconds when\n"
            "                            its finish never comes (default: twice the\n"
            "                            prefill and decode limits, 2400 s; 0 never); the\n"
            "                            requests eldrd proxies or picks it finishes itself\n"
            "  --proxy                   proxy mode: serve POST /v1/completions and\n"
            "                            /v1/chat/completions in the request path, prefill\n"
            "                            then decode (docs/eldrd.md, \"Proxy mode\")\n"
            "  --prefill URL,...         proxy mode: the prefill instances\n"
            "  --decode URL,...          proxy mode: the decode instances, K of them, in\n"
            "                            worker order\n"
            "  --connect-timeout S       proxy mode: an upstream connection not made in S\n"
            "                            seconds is given up, and the request tried on\n"
            "                            another instance (default 5, Envoy's)\n"
            "  --prefill-timeout S       proxy mode: a prefill's answer may take S seconds\n"
            "                            (a long prompt's prefill is slow by right;\n"
            "                            default: --upstream-timeout)\n"
            "  --decode-timeout S        proxy mode: a decoder's first byte may take S\n"
            "                            seconds (a non-streamed answer's first byte is\n"
            "                            the whole answer; default: --upstream-timeout)\n"
            "  --stream-idle-timeout S   proxy mode: once an answer flows, silence longer\n"
            "                            than S cuts it (default 60, nginx's\n"
            "                            proxy_read_timeout; --upstream-timeout when given)\n"
            "  --stream-start decoder|prefill\n"
            "                            proxy mode, eldr handoff: a stream's status and\n"
            "                            first token go out once its decoder answered\n"
            "                            (decoder, the default: a failure is a status, not\n"
            "                            an error event), or as soon as the prefill's\n"
            "                            first token is there (prefill: the reference's\n"
            "                            prefill-first delivery, the lower TTFB)\n"
            "  --upstream-timeout S      proxy mode: the default of the prefill, decode and\n"
            "                            stream-idle limits (default 600); past a limit\n"
            "                            the client gets 504, or an error event in a stream\n"
            "  --eject-after N           proxy mode: N failures in a row (connect error,\n"
            "                            reset, 5xx, silence, all before the first byte)\n"
            "                            take an instance out of rotation (default 3; 0:\n"
            "                            never); with --ext-proc, N 5xx answers in a row\n"
            "                            that Envoy reports\n"
            "  --eject-time S            proxy mode, --ext-proc: for S seconds the first time, doubled\n"
            "                            each time it fails again (at most 64 x S; default\n"
            "                            5)\n"
            "  --health-interval S       proxy mode: probe every instance each S seconds\n"
            "                            (GET --health-path; default 0: no probes)\n"
            "  --health-path PATH        the probes' path (default /health)\n"
            "  --stream-buffer BYTES     proxy mode: stream bytes a client may leave unread\n"
            "                            before its decoder is not read (default 1048576)\n"
            "  --upstream-idle S         proxy mode: a pooled upstream connection idle S\n"
            "                            seconds is closed (default 60)\n"
            "  --pd-protocol eldr|vllm   proxy mode: the prefill handoff; eldr (default):\n"
            "                            prefill-first, as the ELDR reference deployment;\n"
            "                            vllm: stock vLLM's (prefill max_tokens 1)\n"
            "  --upstream-api-key-file FILE  proxy mode: send 'Authorization: Bearer KEY'\n"
            "                            to every prefill and decode instance (engines\n"
            "                            started with --api-key; the file's first line, as\n"
            "                            --admin-token-file). Without it the client's own\n"
            "                            Authorization header is forwarded\n"
            "  --ext-proc HOST:PORT      serve Envoy's ext_proc (gRPC, cleartext HTTP/2) as\n"
            "                            the endpoint picker of a Kubernetes inference\n"
            "                            gateway's P/D pool (EPP-Profile prefill and\n"
            "                            decode), beside the HTTP API; needs\n"
            "                            --endpoints (docs/gateway.md)\n"
            "  --endpoints FILE          the endpoints in llm-d's file-discovery format\n"
            "                            (YAML or JSON): K decode ones (role decode or no\n"
            "                            role label), in worker order or by name, and the\n"
            "                            prefill ones (labels llm-d.ai/role or role:\n"
            "                            prefill), one per --prefill-workers name, for the\n"
            "                            EPP-Profile: prefill calls; reloaded when replaced\n"
            "  --join-max N              --ext-proc: prefill answers kept for their decode\n"
            "                            call (default 4096; past it the oldest is evicted)\n"
            "  --join-ttl S              --ext-proc: how long one is kept (default 60 s)\n"
            "  --kv-events URL,...       subscribe to vLLM's KV cache events (ZMQ PUB,\n"
            "                            vLLM's --kv-events-config endpoint), one\n"
            "                            tcp://HOST:PORT per prefill worker in\n"
            "                            --prefill-workers order; they keep the signature\n"
            "                            caches in step with the KV caches (as POST\n"
            "                            /v1/kv-events does)\n"
            "  --kv-events-replay URL,...  the publishers' replay sockets (vLLM's\n"
            "                            replay_endpoint), same order: a gap in the\n"
            "                            sequence is asked for there; without them a gap\n"
            "                            empties that worker's signature cache\n"
            "  --kv-events-topic T       the topic subscribed (default empty: vLLM's)\n"
            "  --refit-every S           online refit (off by default): every S seconds,\n"
            "                            refit the centroids on the recent signatures, each\n"
            "                            worker keeping the new centroid nearest its old\n"
            "                            one; each refit is a model generation\n"
            "  --refit-window W          with --refit-every: the signatures of the last W\n"
            "                            seconds (default 5)\n"
            "  --refit-max-rows N        with --refit-every: at most N signatures in that\n"
            "                            window, the newest (default 4096)\n"
            "  --quiet                   no log lines on stderr\n"
            "  -V, --version             print \"eldrd VERSION\" and exit\n"
            "  -h, --help                this text\n"
            "\n"
            "signals: SIGTERM/SIGINT drain in-flight HTTP requests and exit 0;\n"
            "SIGHUP reloads the model file (the state dir's, else -m).\n"
            "\n"
            "Exit status: 0 drained and stopped (also --help, --version); 1 the\n"
            "drain cut requests still in progress (--drain); 2 eldrd refuses to\n"
            "start: bad options, model or files, an address it cannot listen on\n"
            "(one line on stderr). See docs/eldrd.md, man eldrd.\n");
}

static int parse_ll(const char *opt, const char *s, long long lo, long long hi, long long *out,
                    char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return eldr_errf(err, errlen, "%s: '%s' is not an integer in %lld..%lld", opt, s, lo, hi);
    *out = v;
    return 0;
}

/* HOST:PORT, where an IPv6 host is written in brackets: [::1]:8470. */
static int parse_listen(const char *opt, const char *s, char *host, size_t hostlen, int *port,
                        char *err, size_t errlen)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= hostlen)
        return eldr_errf(err, errlen, "%s: '%s' is not HOST:PORT", opt, s);
    char what[32];
    snprintf(what, sizeof what, "%s port", opt);
    long long p;
    if (parse_ll(what, colon + 1, 1, 65535, &p, err, errlen) < 0)
        return -1;
    const char *h = s;
    size_t n = (size_t)(colon - s);
    if (h[0] == '[') {
        if (n < 3 || h[n - 1] != ']')
            return eldr_errf(err, errlen, "%s: '%s': a bracketed IPv6 host must end in "
                             "']' before the port", opt, s);
        h++;
        n -= 2;
    } else if (memchr(h, ':', n)) {
        return eldr_errf(err, errlen, "%s: '%s': write an IPv6 host in brackets, "
                         "[::1]:8470", opt, s);
    }
    memcpy(host, h, n);
    host[n] = '\0';
    *port = (int)p;
    return 0;
}

int opts_utf8_len(const unsigned char *p)
{
    unsigned c = *p;
    int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2
          : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (n < 0 || c == 0xc0 || c == 0xc1 || c > 0xf4)
        return 0;
    unsigned cp = n ? c & (0x3f >> n) : c;
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    /* overlong forms, surrogates, beyond U+10FFFF */
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n + 1;
}

int opts_name_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = opts_utf8_len(p);
        if (n == 0 || *p < 0x20 || *p == 0x7f)
            return 0;
        p += n;
    }
    return 1;
}

static void free_names(char **names, int n)
{
    for (int i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

int opts_split_names(const char *s, const char *opt, char ***out, int *n, char *err,
                     size_t errlen)
{
    int cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    char **names = calloc((size_t)cap, sizeof *names);
    if (!names)
        return eldr_errf(err, errlen, "%s: out of memory", opt);
    int k = 0;
    for (const char *p = s;; k++) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= RB_NAME_MAX) {
            free_names(names, k);
            return eldr_errf(err, errlen, "%s: name %d is %s", opt, k + 1,
                             len ? "too long" : "empty");
        }
        names[k] = strndup(p, len);
        if (!names[k]) {
            free_names(names, k);
            return eldr_errf(err, errlen, "%s: out of memory", opt);
        }
        if (!opts_name_ok(names[k])) {
            free_names(names, k + 1);
            return eldr_errf(err, errlen, "%s: name %d is not printable UTF-8", opt, k + 1);
        }
        for (int j = 0; j < k; j++)
            if (!strcmp(names[j], names[k])) {
                eldr_errf(err, errlen, "%s: name '%s' given twice", opt, names[k]);
                free_names(names, k + 1);
                return -1;
            }
        if (!p[len])
            break;
        p += len + 1;
    }
    *out = names;
    *n = k + 1;
    return 0;
}

static void defaults(eldrd_opts *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->host, sizeof o->host, "127.0.0.1");
    o->port = 8470;
    o->tau = NAN;
    o->threads = 2;
    o->max_body = 8 << 20;
    o->max_kv_body = 1 << 20;
    o->max_model_body = 32 << 20;
    o->body_budget = 128 << 20;
    o->header_timeout = 10;
    o->decisions = 4096;
    o->window = 1024;
    o->cache_blocks = 65536;
    o->block_size = 16;
    o->timeout = 10;
    o->poll_ms = 100;
    o->max_conns = 1000;
    o->max_conns_per_ip = 64;
    o->deadline = 30;
    o->drain = 10;
    o->upstream_timeout = 600;
    o->connect_timeout = 5;
    o->prefill_timeout = o->decode_timeout = o->stream_idle_timeout = NAN;
    o->inflight_ttl = NAN;
    o->eject_after = 3;
    o->eject_time = 5;
    o->health_path = "/health";
    o->stream_buffer = 1 << 20;
    o->upstream_idle = 60;
    o->join_max = 4096;
    o->join_ttl = 60;
    o->refit_window = NAN;       /* given or not: --refit-window needs --refit-every */
    o->refit_max_rows = -1;
    o->max_batch = 256;
}

enum { O_LISTEN = 256, O_WORKERS, O_PREFILL, O_TAU, O_THREADS, O_STATE, O_MAXBODY,
       O_DECISIONS, O_WINDOW, O_CACHE, O_BLOCKSIZE, O_TIMEOUT, O_QUIET, O_LOADFROM, O_URLS, O_POLL,
       O_ADMINTOK, O_KVTOK, O_UPKEY, O_INSECURE, O_TTL, O_MAXCONNS, O_PERIP, O_DEADLINE, O_DRAIN,
       O_PROXY, O_PFURLS, O_DECURLS, O_UPTIMEOUT, O_PDPROTO, O_CONN_TO, O_PF_TO, O_DEC_TO,
       O_IDLE_TO, O_STREAM_START,
       O_REFIT_EVERY, O_REFIT_WINDOW, O_REFIT_ROWS, O_MAXKV, O_MAXMODEL, O_BUDGET,
       O_HEADERTIMEOUT, O_ADMINLISTEN, O_ROUTETOK, O_ROUTEAPI, O_EXTPROC, O_ENDPOINTS,
       O_EJECT_AFTER, O_EJECT_TIME, O_HEALTH_INT, O_HEALTH_PATH, O_STREAM_BUF, O_UP_IDLE,
       O_KVEV, O_KVEV_REPLAY, O_KVEV_TOPIC, O_JOIN_MAX, O_JOIN_TTL, O_POLICY, O_MAXBATCH,
       O_COST, O_TOPK };

/* A number of seconds in [lo, hi]. */
static int parse_secs(const char *opt, const char *arg, double lo, double hi, double *out,
                      char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double t = strtod(arg, &end);
    if (errno || end == arg || *end || !isfinite(t) || t < lo || t > hi)
        return eldr_errf(err, errlen, "%s: '%s' is not a number of seconds in %g..%g", opt, arg,
                         lo, hi);
    *out = t;
    return 0;
}

/* The cost rule's options; 1 when c is none of them. */
static int cost_option(int c, const char *arg, eldrd_opts *o, char *err, size_t errlen)
{
    long long v;
    switch (c) {
    case O_POLICY:
        if (strcmp(arg, "band") && strcmp(arg, "cost"))
            return eldr_errf(err, errlen, "--policy: '%s' is neither band nor cost", arg);
        o->policy_cost = !strcmp(arg, "cost");
        return 0;
    case O_MAXBATCH:
        if (parse_ll("--max-batch", arg, 1, 1 << 20, &v, err, errlen) < 0)
            return -1;
        o->max_batch = (int)v;
        return 0;
    case O_COST:
        o->cost_path = arg;
        return 0;
    case O_TOPK:
        if (parse_ll("--top-k", arg, 1, 1 << 16, &v, err, errlen) < 0)
            return -1;
        o->top_k = (int)v;
        return 0;
    }
    return 1;
}

/* The upstream health and flow options (proxy mode). 1 when c is not one
 * of them. */
static int health_option(int c, const char *arg, eldrd_opts *o, char *err, size_t errlen)
{
    long long v;
    switch (c) {
    case O_EJECT_AFTER:
        if (parse_ll("--eject-after", arg, 0, 1000, &v, err, errlen) < 0)
            return -1;
        o->eject_after = (int)v;
        return 0;
    case O_EJECT_TIME:
        return parse_secs("--eject-time", arg, 0.01, 3600, &o->eject_time, err, errlen);
    case O_HEALTH_INT:
        return parse_secs("--health-interval", arg, 0, 3600, &o->health_interval, err, errlen);
    case O_HEALTH_PATH:
        if (arg[0] != '/' || strlen(arg) > 200 || strpbrk(arg, " \r\n\t"))
            return eldr_errf(err, errlen, "--health-path: '%s' is not a path (it starts with "
                             "'/', at most 200 bytes, no spaces)", arg);
        o->health_path = arg;
        return 0;
    case O_STREAM_BUF:
        if (parse_ll("--stream-buffer", arg, 4096, 1LL << 30, &v, err, errlen) < 0)
            return -1;
        o->stream_buffer = v;
        return 0;
    case O_UP_IDLE:
        return parse_secs("--upstream-idle", arg, 0.1, 86400, &o->upstream_idle, err, errlen);
    }
    return 1;
}

/* --refit-every S, --refit-window W: seconds, finite, > 0. */
static int parse_refit_seconds(const char *opt, const char *arg, double *out, char *err,
                               size_t errlen)
{
    char *end;
    errno = 0;
    double t = strtod(arg, &end);
    if (errno || end == arg || *end || !isfinite(t) || t <= 0 || t > 86400)
        return eldr_errf(err, errlen, "%s: '%s' is not a number of seconds in (0, 86400]", opt,
                         arg);
    *out = t;
    return 0;
}

/* What eldrd routes with: the model, the workers, tau, threads, the
 * state directory. 1 when c is none of them. */
static int model_option(int c, const char *arg, eldrd_opts *o, char *err, size_t errlen)
{
    long long v;
    switch (c) {
    case 'm':
        o->model_path = arg;
        return 0;
    case 'h':
        o->help = 1;
        return 0;
    case 'V':
        o->version = 1;
        return 0;
    case O_WORKERS:
        free_names(o->workers, o->n_workers);
        o->workers = NULL;
        return opts_split_names(arg, "--workers", &o->workers, &o->n_workers, err, errlen);
    case O_PREFILL:
        free_names(o->prefill, o->n_prefill);
        o->prefill = NULL;
        return opts_split_names(arg, "--prefill-workers", &o->prefill, &o->n_prefill, err,
                                errlen);
    case O_TAU: {
        char *end;
        errno = 0;
        double t = strtod(arg, &end);
        if (errno || end == arg || *end || !isfinite(t) || t < 0)
            return eldr_errf(err, errlen, "--tau: '%s' is not a finite number >= 0", arg);
        o->tau = t;
        return 0;
    }
    case O_THREADS:
        if (parse_ll("--threads", arg, 1, 256, &v, err, errlen) < 0)
            return -1;
        o->threads = (int)v;
        return 0;
    case O_STATE:
        o->state_dir = arg;
        return 0;
    case O_QUIET:
        o->quiet = 1;
        return 0;
    }
    return 1;
}

/* What it keeps and where loads come from: the decision log and
 * window, the signature cache, the load source, the in-flight TTL. 1 when c is none of them. */
static int load_option(int c, const char *arg, eldrd_opts *o, char *err, size_t errlen)
{
    long long v;
    switch (c) {
    case O_DECISIONS:
        if (parse_ll("--decisions", arg, 1, 1 << 20, &v, err, errlen) < 0)
            return -1;
        o->decisions = (int)v;
        return 0;
    case O_WINDOW:
        if (parse_ll("--window", arg, 1, 1 << 20, &v, err, errlen) < 0)
            return -1;
        o->window = (int)v;
        return 0;
    case O_CACHE:
        return parse_ll("--cache-blocks", arg, 1, 1LL << 32, &o->cache_blocks, err, errlen);
    case O_BLOCKSIZE:
        /* a block's count of one expert must fit the cache's uint8 */
        if (parse_ll("--block-size", arg, 1, SIGCACHE_MAX_BLOCK, &v, err, errlen) < 0)
            return -1;
        o->block_size = (int)v;
        return 0;
    case O_LOADFROM:
        if (strcmp(arg, "own") && strcmp(arg, "vllm"))
            return eldr_errf(err, errlen, "--load-from: '%s' is neither own nor vllm", arg);
        o->load_vllm = !strcmp(arg, "vllm");
        return 0;
    case O_URLS:
        o->worker_urls = arg;
        return 0;
    case O_POLL:
        if (parse_ll("--poll-ms", arg, 10, 600000, &v, err, errlen) < 0)
            return -1;
        o->poll_ms = (int)v;
        return 0;
    case O_TTL: {
        char *end;
        errno = 0;
        double t = strtod(arg, &end);
        if (errno || end == arg || *end || !isfinite(t) || t < 0 || t > 1e9)
            return eldr_errf(err, errlen, "--inflight-ttl: '%s' is not a number of seconds "
                             ">= 0", arg);
        o->inflight_ttl = t;
        return 0;
    }
    }
    return 1;
}

/* The listeners and who may use them: addresses, the route API,
 * tokens. 1 when c is none of them. */
static int listen_option(int c, const char *arg, eldrd_opts *o, char *err, size_t errlen)
{
    switch (c) {
    case O_LISTEN:
        return parse_listen("--listen", arg, o->host, sizeof o->host, &o->port, err, errlen);
    case O_ADMINLISTEN:
        return parse_listen("--admin-listen", arg, o->admin_host, sizeof o->admin_host,
                            &o->admin_port, err, errlen);
    case O_EXTPROC:
        return parse_listen("--ext-proc", arg, o->xp_host, sizeof o->xp_host, &o->xp_port, err,
                            errlen);
    case O_ROUTEAPI:
        o->route_api = 1;
        return 0;
    case O_ROUTETOK:
        o->route_token_file = arg;
        return 0;
    case O_ENDPOINTS:
        o->endpoints_file = arg;
        return 0;
    case O_ADMINTOK:
        o->admin_token_file = arg;
        return 0;
    case O_KVTOK:
        o->kv_token_file = arg;
        return 0;
    case O_INSECURE:
        o->insecure = 1;
        return 0;
    }
    return 1;
}

/* The limits on clients: body sizes and budget, connections, the
 * header and request deadlines, the drain, the route timeout. 1 when c is none of them. */
static int limit_option(int c, const char *arg, eldrd_opts *o, char *err, size_t errlen)
{
    long long v;
    switch (c) {
    case O_MAXBODY:
        return parse_ll("--max-body", arg, 1024, 1LL << 30, &o->max_body, err, errlen);
    case O_MAXKV:
        return parse_ll("--max-kv-body", arg, 1024, 1LL << 30, &o->max_kv_body, err, errlen);
    case O_MAXMODEL:
        return parse_ll("--max-model-body", arg, 1024, 1LL << 30, &o->max_model_body, err,
                        errlen);
    case O_BUDGET:
        return parse_ll("--body-budget", arg, 1 << 20, 1LL << 40, &o->body_budget, err, errlen);
    case O_HEADERTIMEOUT:
        if (parse_ll("--header-timeout", arg, 1, 86400, &v, err, errlen) < 0)
            return -1;
        o->header_timeout = (int)v;
        return 0;
    case O_MAXCONNS:
        if (parse_ll("--max-conns", arg, 4, 1000000, &v, err, errlen) < 0)
            return -1;
        o->max_conns = (int)v;
        return 0;
    case O_PERIP:
        if (parse_ll("--max-conns-per-ip", arg, 1, 1000000, &v, err, errlen) < 0)
            return -1;
        o->max_conns_per_ip = (int)v;
        return 0;
    case O_DEADLINE:
        if (parse_ll("--request-deadline", arg, 1, 86400, &v, err, errlen) < 0)
            return -1;
        o->deadline = (int)v;
        return 0;
    case O_DRAIN: {
        char *end;
        errno = 0;
        double t = strtod(arg, &end);
        if (errno || end == arg || *end || !isfinite(t) || t < 0 || t > 3600)
            return eldr_errf(err, errlen, "--drain: '%s' is not a number of seconds in 0..3600",
                             arg);
        o->drain = t;
        return 0;
    }
    case O_TIMEOUT:
        if (parse_ll("--timeout", arg, 1, 86400, &v, err, errlen) < 0)
            return -1;
        o->timeout = (int)v;
        return 0;
    }
    return 1;
}

/* Proxy mode and its upstreams: the prefill and decode URLs, the
 * protocol, the upstream key, where a stream starts, the timeouts. 1 when c is none of them. */
static int upstream_option(int c, const char *arg, eldrd_opts *o, char *err, size_t errlen)
{
    switch (c) {
    case O_PROXY:
        o->proxy = 1;
        return 0;
    case O_PDPROTO:
        if (strcmp(arg, "eldr") && strcmp(arg, "vllm"))
            return eldr_errf(err, errlen, "--pd-protocol: '%s' is neither eldr nor vllm", arg);
        o->pd_vllm = !strcmp(arg, "vllm");
        return 0;
    case O_PFURLS:
        o->prefill_urls = arg;
        return 0;
    case O_DECURLS:
        o->decode_urls = arg;
        return 0;
    case O_UPKEY:
        o->upstream_key_file = arg;
        return 0;
    case O_UPTIMEOUT:
        o->upstream_timeout_given = 1;
        return parse_secs("--upstream-timeout", arg, 0.01, 86400, &o->upstream_timeout, err,
                          errlen);
    case O_STREAM_START:
        if (strcmp(arg, "decoder") && strcmp(arg, "prefill"))
            return eldr_errf(err, errlen, "--stream-start: '%s' is neither decoder nor prefill",
                             arg);
        o->stream_at_prefill = !strcmp(arg, "prefill");
        return 0;
    case O_CONN_TO:
        return parse_secs("--connect-timeout", arg, 0.01, 86400, &o->connect_timeout, err,
                          errlen);
    case O_PF_TO:
        return parse_secs("--prefill-timeout", arg, 0.01, 86400, &o->prefill_timeout, err,
                          errlen);
    case O_DEC_TO:
        return parse_secs("--decode-timeout", arg, 0.01, 86400, &o->decode_timeout, err, errlen);
    case O_IDLE_TO:
        return parse_secs("--stream-idle-timeout", arg, 0.01, 86400, &o->stream_idle_timeout,
                          err, errlen);
    }
    return 1;
}

/* KV events and the online refit: the event stream, its replay and
 * topic, the prefill/decode join, the refit period, window and rows. 1 when c is none of them. */
static int online_option(int c, const char *arg, eldrd_opts *o, char *err, size_t errlen)
{
    long long v;
    switch (c) {
    case O_KVEV:
        o->kv_events = arg;
        return 0;
    case O_KVEV_REPLAY:
        o->kv_events_replay = arg;
        return 0;
    case O_KVEV_TOPIC:
        o->kv_events_topic = arg;
        return 0;
    case O_JOIN_MAX:
        if (parse_ll("--join-max", arg, 1, 1 << 20, &v, err, errlen) < 0)
            return -1;
        o->join_max = (int)v;
        o->join_given = 1;
        return 0;
    case O_JOIN_TTL:
        o->join_given = 1;
        return parse_secs("--join-ttl", arg, 0.1, 3600, &o->join_ttl, err, errlen);
    case O_REFIT_EVERY:
        return parse_refit_seconds("--refit-every", arg, &o->refit_every, err, errlen);
    case O_REFIT_WINDOW:
        return parse_refit_seconds("--refit-window", arg, &o->refit_window, err, errlen);
    case O_REFIT_ROWS:
        if (parse_ll("--refit-max-rows", arg, 1, 1 << 20, &v, err, errlen) < 0)
            return -1;
        o->refit_max_rows = (int)v;
        return 0;
    }
    return 1;
}

/* One option c (getopt_long's answer) with its argument: 0, or -1 with
 * err set. */
static int one_option(int c, const char *arg, eldrd_opts *o, char *err, size_t errlen)
{
    int (*const groups[])(int, const char *, eldrd_opts *, char *, size_t) = {
        model_option, load_option, listen_option, limit_option, upstream_option, online_option,
        health_option, cost_option};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        int rc = groups[i](c, arg, o, err, errlen);
        if (rc <= 0)
            return rc;
    }
    return eldr_errf(err, errlen, "unknown option (try 'eldrd --help')");
}

/* The budget must hold the largest body any endpoint takes, or that body
 * could never be served. */
static int check_bodies(const eldrd_opts *o, char *err, size_t errlen)
{
    const struct {
        const char *opt;
        long long v;
    } lim[] = {{"--max-body", o->max_body}, {"--max-kv-body", o->max_kv_body},
               {"--max-model-body", o->max_model_body}};
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        if (lim[i].v >= o->body_budget)
            return eldr_errf(err, errlen, "--body-budget %lld must be above %s %lld: such a "
                             "body could never be taken in", o->body_budget, lim[i].opt,
                             lim[i].v);
    return 0;
}

/* The options that need another (proxy mode, the picker, KV events,
 * worker URLs): 0, or -1 naming what to add. */
static int check_modes(const eldrd_opts *o, char *err, size_t errlen)
{
    if (o->load_vllm != !!o->worker_urls) {
        return eldr_errf(err, errlen, o->load_vllm ? "--load-from vllm needs --worker-urls"
                                                   : "--worker-urls needs --load-from vllm");
    }
    if (o->proxy && (!o->prefill_urls || !o->decode_urls)) {
        return eldr_errf(err, errlen, "--proxy needs --prefill URL,... and --decode URL,...");
    }
    if (!o->proxy && (o->prefill_urls || o->decode_urls)) {
        return eldr_errf(err, errlen, "--%s is for proxy mode: add --proxy",
                         o->prefill_urls ? "prefill" : "decode");
    }
    if (!o->kv_events && (o->kv_events_replay || o->kv_events_topic)) {
        return eldr_errf(err, errlen, "%s needs --kv-events tcp://HOST:PORT,... (vLLM's "
                         "publishers)", o->kv_events_replay ? "--kv-events-replay"
                                                            : "--kv-events-topic");
    }
    if (!!o->xp_host[0] != !!o->endpoints_file) {
        return eldr_errf(err, errlen, o->xp_host[0] ? "--ext-proc needs --endpoints FILE (the "
                         "decode pool's addresses, llm-d's file-discovery format)"
                         : "--endpoints is for the gateway's picker: add --ext-proc HOST:PORT");
    }
    if (o->join_given && !o->xp_host[0]) {
        return eldr_errf(err, errlen, "--join-max and --join-ttl are for the gateway's picker: "
                         "add --ext-proc HOST:PORT");
    }
    if (!o->proxy && o->upstream_key_file) {
        return eldr_errf(err, errlen, "--upstream-api-key-file is for proxy mode: add --proxy");
    }
    return 0;
}

/* Limits that must agree, and what proxy mode, the tokens and the
 * refit need: 0, or -1 naming the clash. */
static int check_access(const eldrd_opts *o, char *err, size_t errlen)
{
    if (o->max_conns_per_ip > o->max_conns) {
        return eldr_errf(err, errlen, "--max-conns-per-ip %d is above --max-conns %d: one "
                         "address could take every connection", o->max_conns_per_ip,
                         o->max_conns);
    }
    if (check_bodies(o, err, errlen) < 0)
        return -1;
    if (o->route_api && !o->proxy) {
        return eldr_errf(err, errlen, "--route-api is for proxy mode (add --proxy): without "
                         "it, /v1/route and /v1/finish are always served");
    }
    if (o->route_token_file && !o->proxy) {
        return eldr_errf(err, errlen, "--route-token-file is for proxy mode (add --proxy): "
                         "without it, /v1/route and /v1/finish are the data path of the "
                         "proxy in front of eldrd");
    }
    if (o->kv_token_file && !o->admin_token_file) {
        return eldr_errf(err, errlen, "--kv-token-file needs --admin-token-file too (the "
                         "model and config endpoints would be open)");
    }
    if (o->refit_every == 0 && (!isnan(o->refit_window) || o->refit_max_rows > 0)) {
        return eldr_errf(err, errlen, "%s needs --refit-every (the online refit is off "
                         "without it)", isnan(o->refit_window) ? "--refit-max-rows"
                                                               : "--refit-window");
    }
    return 0;
}

/* The defaults that follow from other options. */
static void derive_defaults(eldrd_opts *o)
{
    if (isnan(o->refit_window))
        o->refit_window = ONLINE_DEFAULT_WINDOW;
    if (isnan(o->prefill_timeout))
        o->prefill_timeout = o->upstream_timeout;
    if (isnan(o->decode_timeout))
        o->decode_timeout = o->upstream_timeout;
    if (isnan(o->stream_idle_timeout))
        o->stream_idle_timeout = o->upstream_timeout_given ? o->upstream_timeout : 60;
    /* bounded by default: a lost finish no longer pins load for ever; a
     * request lives at most its prefill and its decode's first byte, and a
     * caller's own stream seldom more than as long again */
    if (isnan(o->inflight_ttl))
        o->inflight_ttl = 2 * (o->prefill_timeout + o->decode_timeout);
    if (o->refit_max_rows < 0)
        o->refit_max_rows = ONLINE_DEFAULT_MAX_ROWS;
}

/* eldrd's options (opts_usage says what each does). */
static const struct option longopts[] = {
    {"model", required_argument, 0, 'm'},     {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, 'V'},
    {"listen", required_argument, 0, O_LISTEN}, {"workers", required_argument, 0, O_WORKERS},
    {"prefill-workers", required_argument, 0, O_PREFILL},
    {"tau", required_argument, 0, O_TAU},     {"threads", required_argument, 0, O_THREADS},
    {"state-dir", required_argument, 0, O_STATE},
    {"max-body", required_argument, 0, O_MAXBODY},
    {"decisions", required_argument, 0, O_DECISIONS},
    {"window", required_argument, 0, O_WINDOW},
    {"cache-blocks", required_argument, 0, O_CACHE},
    {"block-size", required_argument, 0, O_BLOCKSIZE},
    {"timeout", required_argument, 0, O_TIMEOUT}, {"quiet", no_argument, 0, O_QUIET},
    {"load-from", required_argument, 0, O_LOADFROM},
    {"worker-urls", required_argument, 0, O_URLS},
    {"poll-ms", required_argument, 0, O_POLL},
    {"admin-token-file", required_argument, 0, O_ADMINTOK},
    {"kv-token-file", required_argument, 0, O_KVTOK},
    {"insecure", no_argument, 0, O_INSECURE},
    {"inflight-ttl", required_argument, 0, O_TTL},
    {"max-conns", required_argument, 0, O_MAXCONNS},
    {"max-conns-per-ip", required_argument, 0, O_PERIP},
    {"request-deadline", required_argument, 0, O_DEADLINE},
    {"drain", required_argument, 0, O_DRAIN},
    {"proxy", no_argument, 0, O_PROXY},
    {"prefill", required_argument, 0, O_PFURLS},
    {"decode", required_argument, 0, O_DECURLS},
    {"upstream-timeout", required_argument, 0, O_UPTIMEOUT},
    {"connect-timeout", required_argument, 0, O_CONN_TO},
    {"stream-start", required_argument, 0, O_STREAM_START},
    {"prefill-timeout", required_argument, 0, O_PF_TO},
    {"decode-timeout", required_argument, 0, O_DEC_TO},
    {"stream-idle-timeout", required_argument, 0, O_IDLE_TO},
    {"pd-protocol", required_argument, 0, O_PDPROTO},
    {"upstream-api-key-file", required_argument, 0, O_UPKEY},
    {"refit-every", required_argument, 0, O_REFIT_EVERY},
    {"refit-window", required_argument, 0, O_REFIT_WINDOW},
    {"refit-max-rows", required_argument, 0, O_REFIT_ROWS},
    {"eject-after", required_argument, 0, O_EJECT_AFTER},
    {"eject-time", required_argument, 0, O_EJECT_TIME},
    {"health-interval", required_argument, 0, O_HEALTH_INT},
    {"health-path", required_argument, 0, O_HEALTH_PATH},
    {"stream-buffer", required_argument, 0, O_STREAM_BUF},
    {"upstream-idle", required_argument, 0, O_UP_IDLE},
    {"max-kv-body", required_argument, 0, O_MAXKV},
    {"max-model-body", required_argument, 0, O_MAXMODEL},
    {"body-budget", required_argument, 0, O_BUDGET},
    {"header-timeout", required_argument, 0, O_HEADERTIMEOUT},
    {"admin-listen", required_argument, 0, O_ADMINLISTEN},
    {"route-token-file", required_argument, 0, O_ROUTETOK},
    {"route-api", no_argument, 0, O_ROUTEAPI},
    {"ext-proc", required_argument, 0, O_EXTPROC},
    {"endpoints", required_argument, 0, O_ENDPOINTS},
    {"kv-events", required_argument, 0, O_KVEV},
    {"kv-events-replay", required_argument, 0, O_KVEV_REPLAY},
    {"kv-events-topic", required_argument, 0, O_KVEV_TOPIC},
    {"join-max", required_argument, 0, O_JOIN_MAX},
    {"join-ttl", required_argument, 0, O_JOIN_TTL},
    {"policy", required_argument, 0, O_POLICY},
    {"max-batch", required_argument, 0, O_MAXBATCH},
    {"cost", required_argument, 0, O_COST},
    {"top-k", required_argument, 0, O_TOPK},
    {0, 0, 0, 0},
};

int opts_parse(int argc, char **argv, eldrd_opts *o, char *err, size_t errlen)
{
    defaults(o);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":m:hV", longopts, NULL)) != -1) {
        if (c == '?' || c == ':') {
            const char *name = argv[optind - 1];
            eldr_errf(err, errlen, "%s '%s' (try 'eldrd --help')",
                      c == '?' ? "unknown option" : "missing value for", name);
            opts_free(o);
            return -1;
        }
        if (one_option(c, optarg, o, err, errlen) < 0) {
            opts_free(o);
            return -1;
        }
    }
    if (optind < argc) {
        eldr_errf(err, errlen, "unexpected argument '%s' (try 'eldrd --help')", argv[optind]);
        opts_free(o);
        return -1;
    }
    if (o->help || o->version)
        return 0;
    if (check_modes(o, err, errlen) < 0 || check_access(o, err, errlen) < 0) {
        opts_free(o);
        return -1;
    }
    derive_defaults(o);
    if (!o->model_path && !o->state_dir) {
        opts_free(o);
        return eldr_errf(err, errlen, "-m MODEL is required (or --state-dir holding model.h5)");
    }
    if (!o->prefill &&
        opts_split_names("default", "--prefill-workers", &o->prefill, &o->n_prefill, err,
                         errlen) < 0)
        return -1;
    return 0;
}

void opts_free(eldrd_opts *o)
{
    free_names(o->workers, o->n_workers);
    free_names(o->prefill, o->n_prefill);
    o->workers = o->prefill = NULL;
    o->n_workers = o->n_prefill = 0;
}
