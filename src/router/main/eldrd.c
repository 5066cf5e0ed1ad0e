/* eldrd.c - the router daemon's composition root: it builds the engine,
 * starts the refit, the reaper and the load feed on it, creates the event
 * loop when a front end needs one, registers the rooms (the API, the
 * proxy) with the HTTP server and the engine's providers, and owns the
 * signals (SIGTERM/SIGINT drain and exit 0; SIGHUP reloads the
 * model). See docs/eldrd.md.
 *
 * Signals are blocked in every thread (the HTTP threads inherit the mask)
 * and taken synchronously here with sigwait, so no handler runs
 * inside a request. */
#include <cblas.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "auth.h"
#include "endpoints.h"
#include "engine.h"
#include "err.h"
#include "endpoints_file.h"
#include "evloop.h"
#include "extproc.h"
#include "http.h"
#include "kv_sub.h"
#include "load_vllm.h"
#include "log.h"
#include "opts.h"
#include "proxy.h"
#include "reaper.h"
#include "refit.h"
#include "upstream.h"
#include "version.h"

/* The admin listener's connections: operators, scrapers and the engines'
 * KV events, not the traffic (docs/eldrd.md). */
#define ADMIN_MAX_CONNS 256
/* File descriptors besides connections: stdio, the listening sockets,
 * epoll and event fds, the model, the state dir, HDF5. */
#define FD_MARGIN 64

/* Every room of one eldrd, and what main starts on them. */
typedef struct eldrd {
    eldrd_opts *o;
    engine_t e;
    int engine_on;
    auth_t auth;
    reaper_t *reaper;            /* --inflight-ttl */
    struct refitter *refit;      /* --refit-every */
    vllm_poller *vllm;           /* --load-from vllm */
    kvsub_t *kvsub;              /* --kv-events */
    evloop *loop;                /* when a front end needs one (--proxy) */
    pthread_t loop_thread;
    int loop_on;
    http_server *http;           /* --listen */
    http_server *admin;          /* --admin-listen, a thread pool */
    proxy_t *proxy;              /* --proxy */
    endpoints_table *ep;         /* --endpoints */
    extproc_t *xp;               /* --ext-proc */
} eldrd;

static void *loop_main(void *arg)
{
    evloop_run(arg);
    return NULL;
}

static int add_provider(eldrd *d, engine_provider p, char *err, size_t errlen)
{
    if (engine_add_provider(&d->e, &p) < 0)
        return eldr_errf(err, errlen, "too many providers of metrics (internal)");
    return 0;
}

/* The engine's threads and feeds: reaper, refit, vllm load. */
static int start_feeds(eldrd *d, char *err, size_t errlen)
{
    const eldrd_opts *o = d->o;
    engine_provider p;
    if (o->inflight_ttl > 0 && !(d->reaper = reaper_start(&d->e, o->inflight_ttl, err, errlen)))
        return -1;
    if (o->refit_every > 0) {
        if (!(d->refit = refit_start(&d->e, err, errlen)))
            return -1;
        refit_provider(d->refit, &p);
        if (add_provider(d, p, err, errlen) < 0)
            return -1;
    }
    if (o->load_vllm) {
        char **urls;
        if (vllm_resolve_urls(o->worker_urls, d->e.st->workers, d->e.K, &urls, err, errlen) < 0 ||
            !(d->vllm = vllm_start(d->e.st, urls, o->poll_ms, err, errlen)))
            return -1;
        vllm_provider(d->vllm, &p);
        if (add_provider(d, p, err, errlen) < 0)
            return -1;
    }
    if (o->kv_events &&
        !(d->kvsub = kvsub_start(&d->e, o->kv_events, o->kv_events_replay,
                                 o->kv_events_topic ? o->kv_events_topic : "", err, errlen)))
        return -1;
    return 0;
}

/* The public listener: in loop mode with --proxy, else a thread pool. */
static http_config public_config(eldrd *d)
{
    const eldrd_opts *o = d->o;
    return (http_config){.name = "public", .opt = "--listen", .host = o->host, .port = o->port,
                         .threads = o->threads, .timeout = o->timeout,
                         .header_timeout = o->header_timeout, .deadline = o->deadline,
                         .max_conns = o->max_conns, .max_conns_per_ip = o->max_conns_per_ip,
                         .max_body = o->max_body, .body_budget = o->body_budget,
                         .auth = &d->auth, .met = &d->e.met, .loop = d->loop};
}

/* The admin listener: always a thread pool, so that a model swap there
 * never waits on (or stops) the proxy's loop. It shares the metrics, and
 * with them the body budget. */
static http_config admin_config(eldrd *d)
{
    const eldrd_opts *o = d->o;
    http_config c = public_config(d);
    c.name = "admin";
    c.opt = "--admin-listen";
    c.host = o->admin_host;
    c.port = o->admin_port;
    c.max_conns = o->max_conns < ADMIN_MAX_CONNS ? o->max_conns : ADMIN_MAX_CONNS;
    if (c.max_conns_per_ip > c.max_conns)
        c.max_conns_per_ip = c.max_conns;
    c.loop = NULL;
    return c;
}

/* The front ends: the HTTP servers with the API's routes, and in proxy
 * mode the event loop, the proxy and its routes. */
static int start_front(eldrd *d, char *err, size_t errlen)
{
    eldrd_opts *o = d->o;
    if ((o->proxy || o->xp_host[0]) && !(d->loop = evloop_new(err, errlen)))
        return -1;
    http_config cfg = public_config(d);
    if (!(d->http = http_new(&cfg, err, errlen)))
        return -1;
    cfg = admin_config(d);
    if (o->admin_host[0] && !(d->admin = http_new(&cfg, err, errlen)))
        return -1;
    if (o->proxy && !(d->proxy = proxy_start(&d->e, d->loop, d->http, err, errlen)))
        return -1;
    if (o->xp_host[0]) {
        if (!(d->ep = endpoints_table_open(o->endpoints_file, (char *const *)d->e.st->workers,
                                           d->e.K, mono_now(), err, errlen)) ||
            endpoints_table_set_prefill(d->ep, o->prefill, o->n_prefill, err, errlen) < 0 ||
            !(d->xp = extproc_start(&d->e, d->loop, d->ep, err, errlen)))
            return -1;
        d->e.ep = d->ep;   /* readiness.h: /healthz reads the picker's endpoints too */
        log_msg("ext_proc endpoint picker on %s:%d (gRPC, h2c)", o->xp_host,
                extproc_port(d->xp));
    }
    return 0;
}

static void http_provider(void *cls, strbuf *b)
{
    eldrd *d = cls;
    http_server *const servers[2] = {d->http, d->admin};
    http_metrics(servers, 2, b);
}

/* The routes of every room on their listeners, and the providers. */
static int register_rooms(eldrd *d, char *err, size_t errlen)
{
    api_part part = d->admin ? API_PUBLIC : API_ALL;
    if (api_register(d->http, &d->e, part, !d->proxy) < 0 ||
        (d->admin && api_register(d->admin, &d->e, API_ADMIN, 0) < 0) ||
        (d->proxy && proxy_register(d->proxy, d->http) < 0))
        return eldr_errf(err, errlen, "too many HTTP routes (internal)");
    if (add_provider(d, (engine_provider){.metrics = http_provider, .cls = d}, err, errlen) < 0 ||
        (d->proxy && add_provider(d, (engine_provider){.metrics = proxy_metrics,
                                                    .failures = proxy_failures, .cls = d->proxy},
                                  err, errlen) < 0) ||
        (d->xp && add_provider(d, (engine_provider){.snapshot_key = "ext_proc",
                                                    .snapshot = extproc_snapshot,
                                                    .metrics = extproc_metrics, .cls = d->xp},
                               err, errlen) < 0))
        return -1;
    /* the pool's health: reported by the proxy's upstream side and the
     * gateway's answers */
    engine_provider pp;
    engine_pool_provider(&d->e, &pp);
    if ((d->proxy || d->xp) && add_provider(d, pp, err, errlen) < 0)
        return -1;
    return 0;
}

/* The file descriptors this configuration may hold at once, at most:
 * - every client connection: --max-conns, and the admin listener's;
 * - with --proxy, per client connection (one proxied request each) one
 *   upstream connection per role, prefill and decode, counted both
 *   though a request holds them one after the other; plus the idle
 *   pools, up to UPSTREAM_IDLE_PER_ORIGIN per instance, and never more
 *   than --max-conns to one instance (a pool keeps only what was in use);
 * - with --load-from vllm, one per worker polled;
 * - FD_MARGIN for the rest. */
static long long fds_needed(const eldrd *d)
{
    const eldrd_opts *o = d->o;
    long long n = o->max_conns + FD_MARGIN;
    if (d->admin)
        n += o->max_conns < ADMIN_MAX_CONNS ? o->max_conns : ADMIN_MAX_CONNS;
    if (o->proxy) {
        long long idle = o->max_conns < UPSTREAM_IDLE_PER_ORIGIN ? o->max_conns
                                                                   : UPSTREAM_IDLE_PER_ORIGIN;
        n += 2LL * o->max_conns + idle * (d->e.pool.n_prefill + d->e.K);
    }
    if (o->load_vllm)
        n += d->e.K;
    if (o->xp_host[0])   /* the gateway's connections (grpc_srv's max_conns) */
        n += o->max_conns;
    return n;
}

/* Raise the soft open-files limit to the hard one (a connection over the
 * limit would fail at accept, far from its cause), and refuse a
 * configuration that cannot fit under it. */
static int fit_fds(const eldrd *d, char *err, size_t errlen)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 0;
    rlim_t was = rl.rlim_cur;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            rl.rlim_cur = was;
        else
            log_msg("open files: soft limit raised from %llu to the hard limit, %llu",
                    (unsigned long long)was, (unsigned long long)rl.rlim_cur);
    }
    long long need = fds_needed(d);
    if (rl.rlim_cur == RLIM_INFINITY || (long long)rl.rlim_cur >= need)
        return 0;
    return eldr_errf(err, errlen, "this configuration may hold %lld file descriptors (--max-conns "
                     "%d%s; docs/eldrd.md, \"File descriptors\"), over the open-files limit "
                     "of %llu (ulimit -n; hard limit %llu): raise the limit (LimitNOFILE= "
                     "under systemd) or lower --max-conns", need, d->o->max_conns,
                     d->o->proxy ? ", with the proxy's upstream connections" : "",
                     (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
}

/* Proxy mode on an address others reach, with the admin endpoints on it. */
static void warn_open_admin(const eldrd *d)
{
    char why[ELDR_ERRLEN];
    if (d->proxy && !d->admin && auth_host_is_loopback(d->o->host, why, sizeof why) == 0)
        log_msg("warning: --proxy on %s, which is not loopback, without --admin-listen: the "
                "clients of the proxy also reach the admin and introspection endpoints "
                "(model, config, kv-events, snapshot, ...); give --admin-listen "
                "127.0.0.1:PORT to serve those apart", d->o->host);
}

static int start(eldrd *d, char *err, size_t errlen)
{
    d->engine_on = 1;   /* engine_free takes a half-built engine too */
    if (engine_init(&d->e, d->o, err, errlen) < 0)
        return -1;
    if (start_feeds(d, err, errlen) < 0 || start_front(d, err, errlen) < 0 ||
        auth_setup(&d->auth, d->o, err, errlen) < 0 || register_rooms(d, err, errlen) < 0 ||
        fit_fds(d, err, errlen) < 0)
        return -1;
    if (http_start(d->http, err, errlen) < 0 || (d->admin && http_start(d->admin, err, errlen) < 0))
        return -1;
    warn_open_admin(d);
    if (d->loop) {
        if (pthread_create(&d->loop_thread, NULL, loop_main, d->loop) != 0)
            return eldr_errf(err, errlen, "cannot start the event loop thread");
        d->loop_on = 1;
    }
    return 0;
}

/* The loop's thread ends; from now on this thread may run its rooms. */
static void stop_loop(eldrd *d)
{
    if (!d->loop_on)
        return;
    evloop_stop(d->loop);
    pthread_join(d->loop_thread, NULL);
    d->loop_on = 0;
}

/* The drain, in order: stop accepting and wait for the requests in
 * progress; the side thread's jobs finish; the proxy fails what it still
 * holds (its connections resume); the loop stops; libmicrohttpd sends
 * what is queued and stops. Returns the requests cut. */
static int drain(eldrd *d)
{
    /* not ready from now on, on every screen (readiness.h); both
     * listeners stop accepting at once; then each waits, within the one
     * grace period */
    atomic_store(&d->e.draining, 1);
    http_quiesce(d->http);
    if (d->admin)
        http_quiesce(d->admin);
    double t0 = mono_now();
    /* the gateway's streams: health turns NOT_SERVING, GOAWAY, then wait */
    int cut = extproc_quiesce(d->xp, d->loop_on, d->o->drain);
    double left0 = d->o->drain - (mono_now() - t0);
    cut += http_drain(d->http, left0 > 0 ? left0 : 0);
    if (d->admin) {
        double left = d->o->drain - (mono_now() - t0);
        cut += http_drain(d->admin, left > 0 ? left : 0);
    }
    http_stop_side(d->http);
    proxy_stop(d->proxy, d->loop_on);
    stop_loop(d);
    http_stop(d->http);
    if (d->admin)
        http_stop(d->admin);
    return cut;
}

static void teardown(eldrd *d)
{
    if (d->http) {
        http_stop_side(d->http);
        proxy_stop(d->proxy, d->loop_on);
        stop_loop(d);
        http_stop(d->http);
    }
    proxy_free(d->proxy);
    extproc_free(d->xp);   /* the loop has stopped: its streams finish here */
    endpoints_table_free(d->ep);
    http_free(d->admin);
    http_free(d->http);
    refit_stop(d->refit);
    reaper_stop(d->reaper);
    vllm_stop(d->vllm);
    kvsub_stop(d->kvsub);
    if (d->engine_on)
        engine_free(&d->e);
    evloop_free(d->loop);
}

static int serve(eldrd *d, const sigset_t *set)
{
    for (;;) {
        int sig;
        if (sigwait(set, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            char err[ELDR_ERRLEN];
            if (engine_reload(&d->e, err, sizeof err) < 0) {
                atomic_fetch_add(&d->e.met.reload_failures, 1);
                log_msg("SIGHUP: reload failed, keeping the current model: %s", err);
            }
            else
                log_msg("SIGHUP: model reloaded (generation %llu)",
                        (unsigned long long)d->e.model.cur->gen);
            continue;
        }
        log_msg("%s: draining (new routes get 503, every answer closes its connection)",
                sig == SIGTERM ? "SIGTERM" : "SIGINT");
        int cut = drain(d);
        if (cut) {
            log_msg("drain: %d request%s still in progress after %g s were cut", cut,
                    cut == 1 ? "" : "s", d->o->drain);
            return 1;
        }
        log_msg("drained");
        return 0;
    }
}

/* Threads that libraries start before main (OpenBLAS's pool, at load)
 * do not block SIGTERM, SIGINT and SIGHUP as every thread of eldrd's own
 * does. One that arrives while main is not in sigwait (a second SIGTERM
 * during the drain) would go to such a thread and, by its default
 * action, end the process mid-drain (exit 143). A handler that hands it
 * to main instead: pending there, blocked, it waits for main's next
 * sigwait (or for the drain to end). pthread_kill is async-signal-safe. */
static pthread_t main_thread;

static void to_main(int sig)
{
    pthread_kill(main_thread, sig);
}

static void forward_signals(void)
{
    main_thread = pthread_self();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = to_main;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

int main(int argc, char **argv)
{
    eldrd_opts o;
    char err[ELDR_ERRLEN];
    if (opts_parse(argc, argv, &o, err, sizeof err) < 0) {
        fprintf(stderr, "eldrd: %s\n", err);
        return 2;
    }
    if (o.help) {
        opts_usage(stdout);
        opts_free(&o);
        return 0;
    }
    if (o.version) {
        printf("eldrd %s\n", ELDR_VERSION);
        opts_free(&o);
        return 0;
    }
    log_set_quiet(o.quiet);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    forward_signals();
    signal(SIGPIPE, SIG_IGN);
    /* concurrency comes from the HTTP threads; a K x dim product is too
     * small for BLAS threads to pay for their hand-offs */
    openblas_set_num_threads(1);

    eldrd d = {.o = &o};
    int rc = 2;
    if (start(&d, err, sizeof err) < 0) {
        fprintf(stderr, "eldrd: %s\n", err);
    } else {
        log_msg("serving %d workers on %s:%d (model %s, %d threads; %s)", d.e.K, o.host, o.port,
                d.e.model.cur->source, o.threads,
                d.auth.admin[0] ? (d.auth.kv[0] ? "admin and kv tokens required"
                                                : "admin token required")
                                : "open: no admin token");
        if (geteuid() == 0)
            log_msg("warning: running as root; eldrd needs no privilege (its ports may be "
                    "above 1023, its files its own): run it as an unprivileged user");
        rc = serve(&d, &set);
    }
    teardown(&d);
    opts_free(&o);
    return rc;
}
